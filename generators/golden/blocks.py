"""Per-block activation scales as ggml defines them: Q8_0 and Q8_1 quantisation of an
activation vector, and the two dot products the matrix lanes are to compute with them
(issue 32, item 1; docs/activations.md).

Written from ggml's reference C (ggml-org/ggml at d99724f2b141fed9e1a9f402213506c081433465),
not from the templates or the host kernels:

* ``src/ggml-common.h``: ``block_q8_0 {ggml_half d; int8_t qs[32]}`` (34 bytes),
  ``block_q8_1 {ggml_half d; ggml_half s; int8_t qs[32]}`` (36 bytes; s = d * sum(qs)),
  ``block_q4_1 {ggml_half d; ggml_half m; uint8_t qs[16]}`` (weight j in the low nibble of
  qs[j], weight j + 16 in its high nibble; generators/q4.py reads it).
* ``src/ggml-quants.c`` ``quantize_row_q8_0_ref`` / ``quantize_row_q8_1_ref``, per block of
  32, all in float32: ``amax = max |x|``; ``d = amax / 127``; ``id = d ? 1 / d : 0``;
  ``qs[j] = roundf(x[j] * id)`` (nearest, ties away from zero); ``d`` stored as
  ``GGML_FP32_TO_FP16(d)``: the codes are computed with the float32 d, the stored step is its
  fp16 rounding. Q8_1 also stores ``s = GGML_FP32_TO_FP16((float)sum(qs) * d)``, again with the
  float32 d.
* ``src/ggml-impl.h`` ``ggml_compute_fp32_to_fp16``: IEEE binary16 rounding, to nearest, ties
  to even, subnormals kept, overflow to infinity (numpy's float32 -> float16 conversion
  computes the same; tests/generators/golden/test_blocks.py checks it against exact rational
  rounding).
* ``src/ggml-cpu/quants.c`` ``ggml_vec_dot_q4_1_q8_1_generic``: per block an integer
  ``sumi`` = sum of code * qs over 32 weights (exact), then, in float32,
  ``sumf += (d_w * d_x) * sumi + m_w * s_x`` (C's order: ``sumf + (((d_w d_x) sumi) + m_w s_x)``,
  each operation rounded once) over the blocks in order from ``sumf = 0``. (A build that
  contracts these into fused multiply-adds, gcc's default where the CPU has FMA, rounds fewer
  times: ggml's bits then depend on its build; this module is the unfused C order.)
  ``ggml_vec_dot_q8_0_q8_0_generic``: ``sumf += sumi * (d_w * d_x)``.

These are the ``_ref`` quantisers. ggml's CPU backend quantises activations with
per-architecture versions that differ at ties and in the reciprocal: x86 AVX/AVX2
(``src/ggml-cpu/arch/x86/quants.c``) ``id = 127 / amax`` and nearest-even rounding, AArch64
NEON (``arch/arm/quants.c``) ``id = 1 / d`` and nearest-even rounding.

Domain: finite x. ggml leaves the codes undefined where ``1 / d`` overflows
(0 < amax below about 2^-121: ``roundf`` of an infinity into an int8); here such a block is a
ValueError. The host kernels (``generators.runtime.host.ops.quantise_q8_0`` / ``_q8_1``, C twin
tphost.c) accept a narrower domain, documented there.

Every float32 operation here is computed in float64 and rounded once to float32: a product of
two float32 is exact in float64, and for + and / the double rounding is innocuous (53 >= 2 * 24
+ 2; Figueroa 1995), so each result is the correctly rounded IEEE float32 one on any CPU numpy
runs on (numpy's own float32 loops on ARMv7 NEON flush subnormals and approximate division).
"""
from __future__ import annotations

from typing import Tuple

import numpy as np

__all__ = ["QK", "f32_to_f16", "f16_to_f32", "round_away", "quantize_q8_0", "quantize_q8_1",
           "dot_q4_1_q8_1", "dot_q8_0_q8_0", "q8_0_blocks_to_raw", "q8_1_blocks_to_raw"]

F32 = np.float32
F64 = np.float64
#: values per block (QK8_0 = QK8_1 = QK4_1 = 32)
QK = 32


def _r(v) -> np.ndarray:
    """float64 values -> float32, one rounding (to nearest even)."""
    with np.errstate(over="ignore"):
        return np.asarray(v, F64).astype(F32)


def _mul(a, b) -> np.ndarray:
    return _r(np.asarray(a, F32).astype(F64) * np.asarray(b, F32).astype(F64))


def _add(a, b) -> np.ndarray:
    return _r(np.asarray(a, F32).astype(F64) + np.asarray(b, F32).astype(F64))


def _div(a, b) -> np.ndarray:
    with np.errstate(divide="ignore", over="ignore"):
        return _r(np.asarray(a, F32).astype(F64) / np.asarray(b, F32).astype(F64))


def f32_to_f16(x) -> np.ndarray:
    """float32 -> fp16 bits (uint16): GGML_FP32_TO_FP16 (nearest, ties to even, subnormals,
    overflow to +-inf). NaN is outside the domain (ggml: 0x7E00 with the sign)."""
    with np.errstate(over="ignore"):
        return np.asarray(x, F32).astype(np.float16).view(np.uint16)


def f16_to_f32(h) -> np.ndarray:
    """fp16 bits -> float32 (exact)."""
    return np.asarray(h, np.uint16).view(np.float16).astype(F32)


def round_away(v) -> np.ndarray:
    """C's roundf of float32 values, as int64: nearest, ties away from zero (exact: |v| + 0.5 in
    float64 needs no rounding for |v| < 2^52)."""
    v = np.asarray(v, F32).astype(F64)
    return (np.sign(v) * np.floor(np.abs(v) + 0.5)).astype(np.int64)


def _blocks(x) -> np.ndarray:
    x = np.asarray(x, F32)
    if x.ndim < 1 or x.shape[-1] == 0 or x.shape[-1] % QK:
        raise ValueError(f"per-block quantisation needs a length that is a multiple of {QK}, "
                         f"got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("per-block quantisation: x holds NaN or infinity")
    return x.reshape(x.shape[:-1] + (x.shape[-1] // QK, QK))


def _quantize(x):
    """(..., n) float32 -> codes (..., nb, 32) int8, float32 d (..., nb) before its fp16
    rounding, float32 1/d."""
    b = _blocks(x)
    amax = np.max(np.abs(b), axis=-1)                        # exact
    d = _div(amax, F32(127.0))
    nz = d != 0
    idv = np.where(nz, _div(F32(1.0), np.where(nz, d, F32(1.0))), F32(0.0)).astype(F32)
    if not np.all(np.isfinite(idv)):
        raise ValueError("per-block quantisation: a block's max|x| is so small that 1/d "
                         "overflows float32 (ggml leaves its codes undefined)")
    q = round_away(_mul(b, idv[..., None]))
    assert np.all(np.abs(q) <= 127)                          # |x * id| <= 127 (1 + u)^3 < 127.5
    return q.astype(np.int8), d


def quantize_q8_0(x) -> Tuple[np.ndarray, np.ndarray]:
    """quantize_row_q8_0_ref of x (..., n), n a multiple of 32: (qs (..., n/32, 32) int8,
    d (..., n/32) fp16 bits)."""
    q, d = _quantize(x)
    return q, f32_to_f16(d)


def quantize_q8_1(x) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """quantize_row_q8_1_ref of x (..., n): (qs (..., n/32, 32) int8, d, s (..., n/32) fp16
    bits), s = fp16((float)sum(qs) * d) with the float32 d."""
    q, d = _quantize(x)
    sums = q.astype(np.int64).sum(axis=-1).astype(F32)      # |sum| <= 4064: exact
    return q, f32_to_f16(d), f32_to_f16(_mul(sums, d))


def q8_0_blocks_to_raw(q, d) -> np.ndarray:
    """(..., nb, 32) codes and (..., nb) fp16 bits -> block_q8_0 bytes (..., nb * 34)."""
    q, d = np.asarray(q, np.int8), np.asarray(d, np.uint16)
    out = np.concatenate([d.astype("<u2")[..., None].view(np.uint8), q.view(np.uint8)], axis=-1)
    return out.reshape(q.shape[:-2] + (-1,))


def q8_1_blocks_to_raw(q, d, s) -> np.ndarray:
    """(..., nb, 32) codes, (..., nb) fp16 d and s -> block_q8_1 bytes (..., nb * 36)."""
    q, d, s = np.asarray(q, np.int8), np.asarray(d, np.uint16), np.asarray(s, np.uint16)
    out = np.concatenate([d.astype("<u2")[..., None].view(np.uint8),
                          s.astype("<u2")[..., None].view(np.uint8), q.view(np.uint8)], axis=-1)
    return out.reshape(q.shape[:-2] + (-1,))


def _sumi(wq, xq) -> np.ndarray:
    """Per row and block, the exact integer sum of w code * x code over the block."""
    return np.einsum("rbj,bj->rb", np.asarray(wq, np.int64), np.asarray(xq, np.int64))


def _rows(wq, nb: int, what: str) -> np.ndarray:
    wq = np.asarray(wq)
    if wq.ndim == 2:
        wq = wq[None]
    if wq.ndim != 3 or wq.shape[1:] != (nb, QK):
        raise ValueError(f"{what}: weight codes of shape (rows, {nb}, {QK}) expected, "
                         f"got {wq.shape}")
    return wq


def dot_q4_1_q8_1(wq, wd, wm, xq, xd, xs) -> np.ndarray:
    """ggml_vec_dot_q4_1_q8_1_generic of every row: weight codes wq (rows, nb, 32) 0..15 in x
    order, fp16 bits wd, wm (rows, nb); x as quantize_q8_1 gives it (qs (nb, 32), d, s (nb)).
    float32 (rows,): ``sumf = sumf + (((d_w d_x) sumi) + m_w s_x)`` block after block."""
    xq = np.asarray(xq)
    nb = xq.shape[0]
    wq = _rows(wq, nb, "dot_q4_1_q8_1")
    if wq.min(initial=0) < 0 or wq.max(initial=0) > 15:
        raise ValueError("dot_q4_1_q8_1: Q4_1 codes are 0..15")
    sumi = _sumi(wq, xq).astype(F32)                        # |sumi| <= 15 * 128 * 32: exact
    dw = f16_to_f32(np.asarray(wd).reshape(-1, nb))
    mw = f16_to_f32(np.asarray(wm).reshape(-1, nb))
    dx, sx = f16_to_f32(xd), f16_to_f32(xs)
    sumf = np.zeros(wq.shape[0], F32)
    for b in range(nb):
        t = _add(_mul(_mul(dw[:, b], dx[b]), sumi[:, b]), _mul(mw[:, b], sx[b]))
        sumf = _add(sumf, t)
    return sumf


def dot_q8_0_q8_0(wq, wd, xq, xd) -> np.ndarray:
    """ggml_vec_dot_q8_0_q8_0_generic of every row: weight codes wq (rows, nb, 32) int8 and fp16
    bits wd (rows, nb) (a GGUF Q8_0 tensor as stored); x as quantize_q8_0 gives it.
    float32 (rows,): ``sumf = sumf + sumi * (d_w d_x)`` block after block."""
    xq = np.asarray(xq)
    nb = xq.shape[0]
    wq = _rows(wq, nb, "dot_q8_0_q8_0")
    sumi = _sumi(wq, xq).astype(F32)                        # |sumi| <= 128 * 128 * 32: exact
    dw = f16_to_f32(np.asarray(wd).reshape(-1, nb))
    dx = f16_to_f32(xd)
    sumf = np.zeros(wq.shape[0], F32)
    for b in range(nb):
        sumf = _add(sumf, _mul(sumi[:, b], _mul(dw[:, b], dx[b])))
    return sumf
