"""golden.q4.matrix_words_q8_1 (the golden backend's whole-matrix path for format 0x05)
against the frame model ``golden.q4.q4_frame(..., formats=(0x04, 0x05))``, word for word, and
against an exact Fraction sum rounded to float32 here: random rows and x, wild fp16 scales,
SmolLM2's own Q4_1 rows, several vectors at once, and constructed rows whose exact value sits
on or next to a float32 rounding midpoint, with and without large cancelling terms (where the
float64 sum cannot decide and the integer fallback must)."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from exact import f32_bits  # tests/ is on sys.path: Fraction -> float32 bits, nearest even

from generators.golden import blocks as gb
from generators.golden import q4 as gq4
from generators.q4 import build_q4_q8_1_frame, pack_q4_rows, pack_q4_rows_raw
from gguf_files import smollm2_file  # noqa: E402  (tests/ is on sys.path)

FORMATS = (gq4.FMT_Q4, gq4.FMT_Q4_Q8_1)


def _frame_words(rows, xq, xd, xs, k):
    """The frame model's result words of one 0x05 frame (one vector, or B when xd is (B, nb))."""
    fr = build_q4_q8_1_frame(xq, xd, xs, rows, k)
    fr += bytes(-len(fr) % 8)
    beats = [int.from_bytes(fr[i:i + 8], "little") for i in range(0, len(fr), 8)]
    out = gq4.q4_frame(beats, 2048, 4, FORMATS)
    assert out[-1][0] >> 8 & 0xFF == 0, "the frame flagged"
    return np.array([w for w, _ in out[:-1]], np.uint32)


def _fast(rows, k, xq, xd, xs):
    codes, D, M, bad = gq4.decode_rows(rows, k)
    assert not bad.any()
    return gq4.matrix_words_q8_1(gq4.block_codes(codes), D, M, xq, xd, xs)


def _f16(h) -> Fraction:
    return Fraction(float(np.uint16(h).view(np.float16)))


def _exact(q, d, m, xq, xd, xs) -> Fraction:
    """One row's block formula, exactly (q (nb, 32) codes, d m (nb,) fp16 bits)."""
    tot = Fraction(0)
    for b in range(len(d)):
        s = int(np.dot(q[b].astype(np.int64), xq[32 * b:32 * b + 32].astype(np.int64)))
        tot += _f16(d[b]) * _f16(xd[b]) * s + _f16(m[b]) * _f16(xs[b])
    return tot


def _random_rows(rng, n, k, wild=False):
    nb = k // 32
    q = rng.integers(0, 16, size=(n, nb, 32)).astype(np.uint8)
    if wild:      # any finite fp16, either sign, subnormals included
        d = rng.integers(0, 0x7C00, size=(n, nb)).astype(np.uint16) | \
            (rng.integers(0, 2, size=(n, nb)).astype(np.uint16) << 15)
        m = rng.integers(0, 0x7C00, size=(n, nb)).astype(np.uint16) | \
            (rng.integers(0, 2, size=(n, nb)).astype(np.uint16) << 15)
    else:
        d = np.abs(rng.normal(0, 0.01, size=(n, nb))).astype(np.float16).view(np.uint16)
        m = (-np.abs(rng.normal(0, 0.05, size=(n, nb)))).astype(np.float16).view(np.uint16)
    return q, d, m, pack_q4_rows(q, d, m, k)


@pytest.mark.parametrize("k", [32, 64, 96, 192, 576, 1536])
@pytest.mark.parametrize("wild", [False, True])
def test_random_rows_equal_the_frame_model(k, wild):
    rng = np.random.default_rng(k + 7 * wild)
    n = 37
    q, d, m, rows = _random_rows(rng, n, k, wild)
    x = (rng.normal(0, 1, size=k) * rng.choice([1, 40], size=k)).astype(np.float32)
    xq, xd, xs = gb.quantize_q8_1(x)
    xq = xq.reshape(-1)
    if wild:        # x scales of any finite fp16 too
        xd = rng.integers(0, 0x7C00, size=k // 32).astype(np.uint16)
        xs = rng.integers(0, 0xFC00, size=k // 32).astype(np.uint16)
        xs[(xs >> 10 & 0x1F) == 31] = 0x3C00
    got = _fast(rows, k, xq, xd, xs)
    assert (got == _frame_words(rows, xq, xd, xs, k)).all()
    for r in range(0, n, 9):
        assert int(got[r]) == f32_bits(_exact(q[r], d[r], m[r], xq, xd, xs))


def test_several_vectors_at_once():
    """(P, K) x: each vector's words are the one-vector path's and the B-vector frame's."""
    rng = np.random.default_rng(3)
    k, n, P = 192, 21, 3
    _, _, _, rows = _random_rows(rng, n, k)
    xs_ = [gb.quantize_q8_1(rng.normal(0, 2, size=k).astype(np.float32)) for _ in range(P)]
    XQ = np.stack([q.reshape(-1) for q, _, _ in xs_])
    XD = np.stack([d for _, d, _ in xs_])
    XS = np.stack([s for _, _, s in xs_])
    got = _fast(rows, k, XQ, XD, XS)
    assert got.shape == (P, n)
    frame = _frame_words(rows, XQ, XD, XS, k).reshape(n, P).T      # row-major: B per row
    assert (got == frame).all()
    for p in range(P):
        assert (got[p] == _fast(rows, k, XQ[p], XD[p], XS[p])).all()


def _h(v: float) -> int:
    h = np.float16(v)
    assert float(h) == v
    return int(h.view(np.uint16))


def _one_row(terms, k=None):
    """A row and an x whose blocks give exactly the (d_w, d_x, S, m_w, s_x) of ``terms``:
    S made of codes 1 or 15 against x codes of at most 127, position after position."""
    nb = len(terms) if k is None else k // 32
    q = np.zeros((1, nb, 32), np.uint8)
    xq = np.zeros(nb * 32, np.int8)
    d = np.zeros((1, nb), np.uint16)
    m = np.zeros((1, nb), np.uint16)
    xd = np.zeros(nb, np.uint16)
    xs = np.zeros(nb, np.uint16)
    for b, (dw, dx, S, mw, sx) in enumerate(terms):
        rem, pos = S, 0
        while rem:
            if abs(rem) <= 127:
                code, xv = 1, rem
            else:
                code, xv = 15, int(np.sign(rem)) * min(127, abs(rem) // 15)
            q[0, b, pos], xq[32 * b + pos] = code, xv
            rem, pos = rem - code * xv, pos + 1
        d[0, b], xd[b], m[0, b], xs[b] = _h(dw), _h(dx), _h(mw), _h(sx)
    return q, d, m, pack_q4_rows(q, d, m, nb * 32), xq, xd, xs


TINY = 2.0 ** -24                        # the smallest fp16 subnormal: TINY * TINY = 2^-48

MIDPOINTS = {
    # 1 + 2^-24: halfway between 1 and 1 + 2^-23, ties to even: 1
    "tie-even-down": [(2 ** -4, 2 ** -4, 256, 0, 0), (0, 0, 0, 2 ** -12, 2 ** -12)],
    # 1 + 3 * 2^-24: halfway between 1 + 2^-23 and 1 + 2^-22, ties to even: up
    "tie-even-up": [(2 ** -4, 2 ** -4, 256, 0, 0), (0, 0, 0, 2 ** -12, 3 * 2 ** -12)],
    # one unit of 2^-48 above and below the midpoint
    "above": [(2 ** -4, 2 ** -4, 256, 0, 0), (0, 0, 0, 2 ** -12, 2 ** -12),
              (TINY, TINY, 1, 0, 0)],
    "below": [(2 ** -4, 2 ** -4, 256, 0, 0), (0, 0, 0, 2 ** -12, 2 ** -12),
              (TINY, TINY, -1, 0, 0)],
    # the same, next to +-2^32 terms that cancel: the float64 sum loses the small ones
    "cancel-above": [(256.0, 2 ** 12, 15 * 127, 0, 0), (2 ** -4, 2 ** -4, 256, 0, 0),
                     (0, 0, 0, 2 ** -12, 2 ** -12), (TINY, TINY, 1, 0, 0),
                     (256.0, 2 ** 12, -15 * 127, 0, 0)],
    "cancel-below": [(256.0, 2 ** 12, 15 * 127, 0, 0), (2 ** -4, 2 ** -4, 256, 0, 0),
                     (0, 0, 0, 2 ** -12, 2 ** -12), (TINY, TINY, -1, 0, 0),
                     (256.0, 2 ** 12, -15 * 127, 0, 0)],
    "cancel-tie": [(256.0, 2 ** 12, 15 * 127, 0, 0), (2 ** -4, 2 ** -4, 256, 0, 0),
                   (0, 0, 0, 2 ** -12, 2 ** -12), (256.0, 2 ** 12, -15 * 127, 0, 0)],
    # everything cancels: +0.0
    "zero": [(256.0, 2 ** 12, 15 * 127, 0, 0), (256.0, 2 ** 12, -15 * 127, 0, 0),
             (0, 0, 0, 2.0, -2.0), (0, 0, 0, 2.0, 2.0)],
    # negative, halfway between -(1 + 2^-23) and -(1 + 2^-22), one unit below
    "negative": [(2 ** -4, 2 ** -4, -256, 0, 0), (0, 0, 0, -2 ** -12, 3 * 2 ** -12),
                 (TINY, TINY, -1, 0, 0)],
}
EXPECTED = {"tie-even-down": 1.0, "tie-even-up": 1 + 2 ** -22, "above": 1 + 2 ** -23,
            "below": 1.0, "cancel-above": 1 + 2 ** -23, "cancel-below": 1.0,
            "cancel-tie": 1.0, "zero": 0.0, "negative": -(1 + 2 ** -22)}


@pytest.mark.parametrize("case", sorted(MIDPOINTS))
def test_rounding_midpoints(case):
    q, d, m, rows, xq, xd, xs = _one_row(MIDPOINTS[case])
    k = len(MIDPOINTS[case]) * 32
    want = np.float32(EXPECTED[case]).view(np.uint32)
    assert f32_bits(_exact(q[0], d[0], m[0], xq, xd, xs)) == want
    got = _fast(rows, k, xq, xd, xs)
    assert got[0] == want
    assert (got == _frame_words(rows, xq, xd, xs, k)).all()


def test_fallback_runs_where_float64_cannot_decide(monkeypatch):
    """The cancelling cases go through the integer fallback; the plain ones need not."""
    calls = []
    real = gq4.round_f32
    monkeypatch.setattr(gq4, "round_f32", lambda a, frac=24: calls.append(a) or real(a, frac))
    q, d, m, rows, xq, xd, xs = _one_row(MIDPOINTS["cancel-above"])
    _fast(rows, 5 * 32, xq, xd, xs)
    assert calls, "a sum float64 cannot decide was not summed again exactly"
    calls.clear()
    rng = np.random.default_rng(11)
    _, _, _, rows = _random_rows(rng, 64, 576)
    x = rng.normal(0, 1, size=576).astype(np.float32)
    xq, xd, xs = gb.quantize_q8_1(x)
    _fast(rows, 576, xq.reshape(-1), xd, xs)
    assert len(calls) <= 1


def test_inf_x_scale_is_the_frame_models():
    rng = np.random.default_rng(5)
    _, _, _, rows = _random_rows(rng, 3, 64)
    xq, xd, xs = gb.quantize_q8_1(rng.normal(0, 1, size=64).astype(np.float32))
    xd = xd.copy()
    xd[1] = 0x7C00
    with pytest.raises(ValueError, match="Inf/NaN"):
        _fast(rows, 64, xq.reshape(-1), xd, xs)


def test_smollm2_rows_equal_the_frame_model():
    import gguf  # installed by make setup (requirements.txt)
    reader = gguf.GGUFReader(str(smollm2_file()))
    names = {"blk.0.attn_q.weight", "blk.0.ffn_down.weight", "blk.29.ffn_up.weight"}
    rng = np.random.default_rng(2)
    seen = 0
    for t in reader.tensors:
        if t.name not in names:
            continue
        n, k = (int(v) for v in t.shape[::-1]) if len(t.data.shape) == 2 else (0, 0)
        raw = np.array(t.data, dtype=np.uint8)
        n, k = raw.shape[0], raw.shape[1] // 20 * 32
        rows = pack_q4_rows_raw(raw, n, k)[::7][:96]
        x = rng.normal(0, 1, size=k).astype(np.float32)
        x[rng.integers(0, k, size=3)] *= 60                 # outlier channels, as SmolLM2's
        xq, xd, xs = gb.quantize_q8_1(x)
        xq = xq.reshape(-1)
        got = _fast(rows, k, xq, xd, xs)
        assert (got == _frame_words(rows, xq, xd, xs, k)).all()
        seen += 1
    assert seen == len(names)
