"""golden.mv.matrix_words_q8_0 (the golden backend's whole-matrix path for format 0x09) against
the frame model ``golden.mv.q8_0_frame`` (through ``mv_frame``), word for word, and against an
exact Fraction sum rounded to float32 here (tests/exact.py): random rows and x, wild fp16
scales, several vectors at once, SmolLM2's own Q8_0 embedding rows, and constructed rows whose
exact value sits on or next to a float32 rounding midpoint, with and without large cancelling
terms (where the float64 sum cannot decide and the integer fallback must)."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from generators.golden import blocks as gb
from generators.golden import mv as gmv
from generators.golden import q4 as gq4
from generators.q8 import build_q8_0_frame, pack_q8_0_rows, pack_q8_0_rows_raw
from gguf_files import smollm2_file  # noqa: E402  (tests/ is on sys.path)
from tests.exact import f32_bits


def _frame_words(rows, xq, xd, k):
    """The frame model's result words of one 0x09 frame (one vector, or B when xd is (B, nb))."""
    fr = build_q8_0_frame(xq, xd, rows, k)
    beats = [int.from_bytes(fr[i:i + 8], "little") for i in range(0, len(fr), 8)]
    out = gmv.mv_frame(beats, 8, (gmv.FMT_INT8, gmv.FMT_Q8_0), 2048, 4)
    assert out[-1][0] >> 8 & 0xFF == 0, "the frame flagged"
    return np.array([w for w, _ in out[:-1]], np.uint32)


def _fast(rows, k, xq, xd):
    codes, D, bad = gmv.decode_q8_0_rows(rows, k)
    assert not bad.any()
    return gmv.matrix_words_q8_0(gq4.block_codes(codes), D, xq, xd)


def _f16(h) -> Fraction:
    return Fraction(float(np.uint16(h).view(np.float16)))


def _exact(q, d, xq, xd) -> Fraction:
    """One row's block formula, exactly (q (nb, 32) codes, d (nb,) fp16 bits)."""
    tot = Fraction(0)
    for b in range(len(d)):
        s = int(np.dot(q[b].astype(np.int64), xq[32 * b:32 * b + 32].astype(np.int64)))
        tot += _f16(d[b]) * _f16(xd[b]) * s
    return tot


def _random_rows(rng, n, k, wild=False):
    nb = k // 32
    q = rng.integers(-128, 128, size=(n, nb, 32)).astype(np.int8)
    if wild:      # any finite fp16, either sign, subnormals included
        d = rng.integers(0, 0x7C00, size=(n, nb)).astype(np.uint16) | \
            (rng.integers(0, 2, size=(n, nb)).astype(np.uint16) << 15)
    else:
        d = np.abs(rng.normal(0, 0.002, size=(n, nb))).astype(np.float16).view(np.uint16)
    return q, d, pack_q8_0_rows(q, d, k)


def test_decode_rows_reads_the_layout():
    """codes and d as packed, a last group of one to four blocks; an Inf/NaN d is bad."""
    rng = np.random.default_rng(1)
    for k in (32, 64, 96, 128, 160, 576):
        q, d, rows = _random_rows(rng, 5, k, wild=True)
        codes, D, bad = gmv.decode_q8_0_rows(rows, k)
        assert (codes == q).all() and not bad.any()
        assert [int(v) for v in D[2]] == [gq4.f16_exact(int(h))[0] for h in d[2]]
        d2 = d.copy()
        d2[3, -1] = 0x7E00
        assert list(gmv.decode_q8_0_rows(pack_q8_0_rows(q, d2, k), k)[2]) == [0, 0, 0, 1, 0]


@pytest.mark.parametrize("k", [32, 64, 96, 160, 576, 1536])
@pytest.mark.parametrize("wild", [False, True])
def test_random_rows_equal_the_frame_model(k, wild):
    rng = np.random.default_rng(k + 7 * wild)
    n = 37
    q, d, rows = _random_rows(rng, n, k, wild)
    x = (rng.normal(0, 1, size=k) * rng.choice([1, 40], size=k)).astype(np.float32)
    xq, xd = gb.quantize_q8_0(x)
    xq = xq.reshape(-1)
    if wild:        # x scales of any finite fp16 too
        xd = rng.integers(0, 0xFC00, size=k // 32).astype(np.uint16)
        xd[(xd >> 10 & 0x1F) == 31] = 0x3C00
    got = _fast(rows, k, xq, xd)
    assert (got == _frame_words(rows, xq, xd, k)).all()
    for r in range(0, n, 6):
        assert int(got[r]) == f32_bits(_exact(q[r], d[r], xq, xd))


def test_several_vectors_at_once():
    """(P, K) x: each vector's words are the one-vector path's and the B-vector frame's."""
    rng = np.random.default_rng(3)
    k, n, P = 192, 21, 3
    _, _, rows = _random_rows(rng, n, k)
    xs_ = [gb.quantize_q8_0(rng.normal(0, 2, size=k).astype(np.float32)) for _ in range(P)]
    XQ = np.stack([q.reshape(-1) for q, _ in xs_])
    XD = np.stack([d for _, d in xs_])
    got = _fast(rows, k, XQ, XD)
    assert got.shape == (P, n)
    frame = _frame_words(rows, XQ, XD, k).reshape(n, P).T      # row-major: B per row
    assert (got == frame).all()
    for p in range(P):
        assert (got[p] == _fast(rows, k, XQ[p], XD[p])).all()


def _h(v: float) -> int:
    h = np.float16(v)
    assert float(h) == v
    return int(h.view(np.uint16))


def _one_row(terms):
    """A row and an x whose blocks give exactly the (d_w, d_x, S) of ``terms``: S made of
    codes against x codes of at most 127 in magnitude, position after position."""
    nb = len(terms)
    q = np.zeros((1, nb, 32), np.int8)
    xq = np.zeros(nb * 32, np.int8)
    d = np.zeros((1, nb), np.uint16)
    xd = np.zeros(nb, np.uint16)
    for b, (dw, dx, S) in enumerate(terms):
        rem, pos = S, 0
        while rem:
            xv = 1 if abs(rem) <= 127 else min(127, abs(rem) // 127)
            code = rem if abs(rem) <= 127 else int(np.sign(rem)) * 127
            q[0, b, pos], xq[32 * b + pos] = code, xv
            rem, pos = rem - code * xv, pos + 1
        d[0, b], xd[b] = _h(dw), _h(dx)
    return q, d, pack_q8_0_rows(q, d, nb * 32), xq, xd


TINY = 2.0 ** -24                        # the smallest fp16 subnormal: TINY * TINY = 2^-48

MIDPOINTS = {
    # 1 + 2^-24: halfway between 1 and 1 + 2^-23, ties to even: 1
    "tie-even-down": [(2 ** -4, 2 ** -4, 256), (2 ** -12, 2 ** -12, 1)],
    # 1 + 3 * 2^-24: halfway between 1 + 2^-23 and 1 + 2^-22, ties to even: up
    "tie-even-up": [(2 ** -4, 2 ** -4, 256), (2 ** -12, 2 ** -12, 3)],
    # one unit of 2^-48 above and below the midpoint
    "above": [(2 ** -4, 2 ** -4, 256), (2 ** -12, 2 ** -12, 1), (TINY, TINY, 1)],
    "below": [(2 ** -4, 2 ** -4, 256), (2 ** -12, 2 ** -12, 1), (TINY, TINY, -1)],
    # the same, next to +-2^40-ish terms that cancel: the float64 sum loses the small ones
    "cancel-above": [(256.0, 2 ** 12, 127 * 127 * 32), (2 ** -4, 2 ** -4, 256),
                     (2 ** -12, 2 ** -12, 1), (TINY, TINY, 1),
                     (256.0, 2 ** 12, -127 * 127 * 32)],
    "cancel-below": [(256.0, 2 ** 12, 127 * 127 * 32), (2 ** -4, 2 ** -4, 256),
                     (2 ** -12, 2 ** -12, 1), (TINY, TINY, -1),
                     (256.0, 2 ** 12, -127 * 127 * 32)],
    "cancel-tie": [(256.0, 2 ** 12, 127 * 127 * 32), (2 ** -4, 2 ** -4, 256),
                   (2 ** -12, 2 ** -12, 1), (256.0, 2 ** 12, -127 * 127 * 32)],
    # everything cancels: +0.0 (negative scales: no -0.0)
    "zero": [(-256.0, 2 ** 12, 127 * 127 * 32), (-256.0, 2 ** 12, -127 * 127 * 32),
             (-2.0, 2.0, 0)],
    # negative, halfway between -(1 + 2^-23) and -(1 + 2^-22), one unit below
    "negative": [(2 ** -4, 2 ** -4, -256), (-2 ** -12, 2 ** -12, 3), (TINY, TINY, -1)],
}
EXPECTED = {"tie-even-down": 1.0, "tie-even-up": 1 + 2 ** -22, "above": 1 + 2 ** -23,
            "below": 1.0, "cancel-above": 1 + 2 ** -23, "cancel-below": 1.0,
            "cancel-tie": 1.0, "zero": 0.0, "negative": -(1 + 2 ** -22)}


@pytest.mark.parametrize("case", sorted(MIDPOINTS))
def test_rounding_midpoints(case):
    q, d, rows, xq, xd = _one_row(MIDPOINTS[case])
    k = len(MIDPOINTS[case]) * 32
    want = int(np.float32(EXPECTED[case]).view(np.uint32))
    assert f32_bits(_exact(q[0], d[0], xq, xd)) == want
    got = _fast(rows, k, xq, xd)
    assert int(got[0]) == want
    assert (got == _frame_words(rows, xq, xd, k)).all()


def test_fallback_runs_where_float64_cannot_decide(monkeypatch):
    """The cancelling cases go through the integer fallback; the plain ones need not."""
    calls = []
    real = gq4.round_f32
    monkeypatch.setattr(gq4, "round_f32", lambda a, frac=24: calls.append(a) or real(a, frac))
    q, d, rows, xq, xd = _one_row(MIDPOINTS["cancel-above"])
    _fast(rows, 5 * 32, xq, xd)
    assert calls, "a sum float64 cannot decide was not summed again exactly"
    calls.clear()
    rng = np.random.default_rng(11)
    _, _, rows = _random_rows(rng, 64, 576)
    xq, xd = gb.quantize_q8_0(rng.normal(0, 1, size=576).astype(np.float32))
    _fast(rows, 576, xq.reshape(-1), xd)
    assert len(calls) <= 1


def test_inf_x_scale_is_the_frame_models():
    rng = np.random.default_rng(5)
    _, _, rows = _random_rows(rng, 3, 64)
    xq, xd = gb.quantize_q8_0(rng.normal(0, 1, size=64).astype(np.float32))
    xd = xd.copy()
    xd[1] = 0x7C00
    with pytest.raises(ValueError, match="Inf/NaN"):
        _fast(rows, 64, xq.reshape(-1), xd)


def test_smollm2_head_rows_equal_the_frame_model():
    """SmolLM2-135M's Q8_0 token_embd (its tied LM head) as stored, every 97th row."""
    gguf = pytest.importorskip("gguf")
    reader = gguf.GGUFReader(str(smollm2_file()))
    t = next(t for t in reader.tensors if t.name == "token_embd.weight")
    raw = np.array(t.data, dtype=np.uint8)
    n, k = raw.shape[0], raw.shape[1] // 34 * 32
    rows = pack_q8_0_rows_raw(raw[::97][:128], len(raw[::97][:128]), k)
    rng = np.random.default_rng(2)
    x = rng.normal(0, 1, size=k).astype(np.float32)
    x[rng.integers(0, k, size=3)] *= 60                 # outlier channels, as SmolLM2's
    xq, xd = gb.quantize_q8_0(x)
    xq = xq.reshape(-1)
    got = _fast(rows, k, xq, xd)
    assert (got == _frame_words(rows, xq, xd, k)).all()
    assert n == 49152 and k == 576
