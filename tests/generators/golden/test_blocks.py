"""generators/golden/blocks.py: ggml's Q8_0 / Q8_1 activation blocks and its Q4_1 x Q8_1 and
Q8_0 x Q8_0 dot products, checked against hand-worked cases, exact rational arithmetic
(fp16 rounding, roundf), independent float64 computations within stated bounds, and ggml
itself in test_ggml.py."""
from __future__ import annotations

import ctypes
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from block_cases import activations as _activations, hand_x as _hand_x  # noqa: E402

from generators import q4 as hostq4
from generators.golden import blocks as gb

F32 = np.float32
U = 2.0 ** -24                    # float32 unit roundoff


def gamma(k: int) -> float:
    """Higham's gamma_k = k u / (1 - k u): the relative bound of k float32 roundings."""
    return k * U / (1 - k * U)


# ------------------------------------------------------------------ fp16 and roundf, exactly

def _f16_exact(v: float) -> int:
    """IEEE binary16 bits of float v, rounded to nearest, ties to even, from rationals."""
    sign = 0x8000 if math.copysign(1.0, v) < 0 else 0
    a = Fraction(abs(v))
    if a == 0:
        return sign
    e = max(math.floor(math.log2(a)), -14)          # subnormals share the exponent -14
    while Fraction(2) ** e > a:                       # log2 of a Fraction may be off by one
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    e = max(e, -14)
    ulp = Fraction(2) ** (e - 10)
    n, r = divmod(a, ulp)
    if r > ulp / 2 or (r == ulp / 2 and n % 2):
        n += 1
    value = n * ulp
    if value >= 65520 or value > 65504:
        return sign | 0x7C00
    return sign | int(np.float16(float(value)).view(np.uint16))   # exact: value is an fp16


def test_fp16_rounding_is_ieee_nearest_even():
    """GGML_FP32_TO_FP16 is IEEE binary16 rounding; numpy's float32 -> float16 (what
    golden.blocks uses) equals an exact rational rounding on every kind of edge and on random
    float32 bit patterns of the fp16 range."""
    edges = [0.0, -0.0, 1.0, 1 + 2 ** -11, 1 + 3 * 2 ** -11, 1 + 2 ** -11 + 2 ** -24,
             -(1 + 2 ** -11), 65504.0, 65519.99, 65520.0, 65536.0, 1e30, -1e30,
             2 ** -14, 2 ** -14 - 2 ** -25, 2 ** -24, 2 ** -25, 2 ** -25 + 2 ** -40, 3 * 2 ** -25,
             2 ** -26, 1e-10, 5 * 2 ** -25, 2 ** -126, 3.4e38]
    rng = np.random.default_rng(0)
    rand = rng.integers(0x2F000000, 0x47900000, 4000, dtype=np.uint32).view(F32)
    vals = np.concatenate([np.array(edges, F32), rand, -rand])
    got = gb.f32_to_f16(vals)
    want = np.array([_f16_exact(float(v)) for v in vals], np.uint16)
    assert np.array_equal(got, want)
    assert gb.f32_to_f16(F32(1 + 2 ** -11)) == 0x3C00            # the tie goes to even
    assert gb.f32_to_f16(F32(1 + 3 * 2 ** -11)) == 0x3C02
    assert gb.f32_to_f16(F32(65520.0)) == 0x7C00                 # rounds up to infinity
    assert gb.f32_to_f16(F32(2 ** -25)) == 0x0000                # half the smallest: to even
    assert gb.f32_to_f16(F32(3 * 2 ** -25)) == 0x0002


def test_round_away_is_roundf():
    v = np.array([0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999997, -0.49999997, 126.5, -126.5,
                  127.49999, 0.0, -0.0, 3.2, -3.7, 1e-40], F32)
    assert gb.round_away(v).tolist() == [1, -1, 2, -2, 3, -3, 0, 0, 127, -127, 127, 0, 0, 3,
                                         -4, 0]


# ------------------------------------------------------------------ hand-worked blocks


def test_q8_1_and_q8_0_of_hand_worked_blocks():
    q, d, s = gb.quantize_q8_1(_hand_x())
    assert q.shape == (4, 32) and q.dtype == np.int8
    assert q[0, :9].tolist() == [127, 1, -1, 2, -2, 3, -3, -127, 63] and not q[0, 9:].any()
    assert q[1, :5].tolist() == [127, 1, 2, -2, 3] and not q[1, 5:].any()
    assert not q[2].any()
    assert q[3, 0] == 127 and not q[3, 1:].any()
    assert d.tolist() == [0x3C00, 0x4000, 0x0000, 0x3C00]
    # s: 63 = 1.96875 * 2^5 (0x53E0), 2 * 131 = 262 = 1.0234375 * 2^8 (0x5C18), 0, 127.0625
    assert s.tolist() == [0x53E0, 0x5C18, 0x0000, 0x57F1]
    q0, d0 = gb.quantize_q8_0(_hand_x())
    assert np.array_equal(q0, q) and np.array_equal(d0, d)
    raw = gb.q8_1_blocks_to_raw(q, d, s)
    assert raw.shape == (4 * 36,) and raw[:4].tolist() == [0x00, 0x3C, 0xE0, 0x53]
    assert raw[4:13].view(np.int8).tolist() == [127, 1, -1, 2, -2, 3, -3, -127, 63]
    raw0 = gb.q8_0_blocks_to_raw(q0, d0)
    assert raw0.shape == (4 * 34,) and raw0[34:36].tolist() == [0x00, 0x40]
    assert raw0[36:41].view(np.int8).tolist() == [127, 1, 2, -2, 3]


def test_hand_worked_dot_products():
    xq, xd, xs = gb.quantize_q8_1(_hand_x()[:64])
    # Q4_1 block 0: d 0.5, m -1, code 15 at 0 (w = 6.5), 0 elsewhere (w = -1):
    #   (0.5 * 1) * (15 * 127) + (-1) * 63 = 952.5 - 63 = 889.5
    # block 1: d 0.25, m 0.5, all codes 1 (w = 0.75): (0.25 * 2) * 131 + 0.5 * 262 = 196.5
    wq = np.zeros((1, 2, 32), np.uint8)
    wq[0, 0, 0] = 15
    wq[0, 1, :] = 1
    wd = np.array([[0x3800, 0x3400]], np.uint16)
    wm = np.array([[0xBC00, 0x3800]], np.uint16)
    assert gb.dot_q4_1_q8_1(wq, wd, wm, xq, xd, xs).tolist() == [1086.0]
    # Q8_0: d_w 0.5, codes -2 at 0 and 4 at 8: sumi = -254 + 252 = -2, times 0.5 * 1; block 1
    # d_w 0 contributes nothing
    q0, d0 = gb.quantize_q8_0(_hand_x()[:64])
    w8 = np.zeros((1, 2, 32), np.int8)
    w8[0, 0, 0], w8[0, 0, 8], w8[0, 1, 0] = -2, 4, 100
    assert gb.dot_q8_0_q8_0(w8, np.array([[0x3800, 0x0000]], np.uint16), q0, d0).tolist() == [-1.0]


def test_the_float32_order_of_the_blocks_is_ggml_s():
    """Block terms 2^24, 1, 1: ggml's float32 sum from 0 in block order gives 2^24 (each + 1 a
    tie to even); the exact sum is 2^24 + 2. The same terms in another order would differ."""
    wq = np.zeros((1, 3, 32), np.int8)
    xq = np.zeros((3, 32), np.int8)
    wq[0, 0, :2], xq[0, :2] = 64, 64                      # sumi 8192
    wq[0, 1, 0] = wq[0, 2, 0] = xq[1, 0] = xq[2, 0] = 1    # sumi 1
    wd = np.array([[0x6800, 0x3C00, 0x3C00]], np.uint16)  # 2048, 1, 1
    xd = np.array([0x3C00] * 3, np.uint16)
    assert gb.dot_q8_0_q8_0(wq, wd, xq, xd).tolist() == [2.0 ** 24]
    assert gb.dot_q8_0_q8_0(wq[:, ::-1], wd[:, ::-1], xq[::-1], xd).tolist() == [2.0 ** 24 + 2]


def test_domain():
    with pytest.raises(ValueError, match="multiple of 32"):
        gb.quantize_q8_1(np.ones(40, F32))
    with pytest.raises(ValueError, match="NaN or infinity"):
        gb.quantize_q8_0(np.array([np.inf] + [0.0] * 31, F32))
    with pytest.raises(ValueError, match="overflows"):
        gb.quantize_q8_0(np.full(32, 1e-37, F32))         # amax / 127 is subnormal, 1 / d inf
    q, d = gb.quantize_q8_0(np.full(32, 1e-44, F32))       # d rounds to 0: ggml's id = 0
    assert not q.any() and not d.any()


# ------------------------------------------------------------------ against float64


def test_quantisation_error_is_within_half_a_step():
    """Each dequantised x (fp16 d times the code) is within half a step of x, plus the float32
    roundings of d, 1/d and x/d (|fl(x id) - x/d| <= 127 * 3.01 u) and fp16's rounding of d
    times the code: |x - d16 q| <= d (1/2 + 400 u) + |d - d16| |q|, d = max|x| / 127 exactly."""
    rng = np.random.default_rng(1)
    for n in (576, 1536):
        x32 = _activations(rng, n)
        x = x32.astype(np.float64).reshape(-1, 32)
        q, d16, s16 = gb.quantize_q8_1(x32)
        d = np.max(np.abs(x), axis=1) / 127             # float64; the float32 d is within u
        dq = gb.f16_to_f32(d16).astype(np.float64)
        bound = d[:, None] * (0.5 + 400 * U) + np.abs(d - dq)[:, None] * np.abs(q)
        assert np.all(np.abs(x - dq[:, None] * q) <= bound)
        # s is the fp16 of sum * d: within fp16's half ulp of the float64 product
        ss = gb.f16_to_f32(s16).astype(np.float64)
        exact = q.astype(np.float64).sum(axis=1) * d
        assert np.all(np.abs(ss - exact) <= np.abs(exact) * (2.0 ** -11 + 4 * U) + 2.0 ** -25)


def _q4_rows(rng, rows: int, k: int):
    w = (rng.standard_normal((rows, k)) * 0.05).astype(F32)
    return hostq4.quantize_q4_1(w)                        # codes (rows, nb, 32), d, m fp16


@pytest.mark.parametrize("k", [64, 576, 1536])
def test_q4_1_dot_is_the_block_formula_within_its_float32_bound(k):
    """The float32 result against the same formula summed exactly (math.fsum of float64 terms,
    each exact: an 11-bit by 11-bit product times a 17-bit sumi). Bound: the A term of a block
    sees 3 roundings, the B term 2, and the running sum nb - 1 more:
    |got - exact| <= gamma(nb + 2) * sum_b (|A_b| + |B_b|)."""
    rng = np.random.default_rng(k)
    wq, wd, wm = _q4_rows(rng, 40, k)
    xq, xd, xs = gb.quantize_q8_1(_activations(rng, k))
    got = gb.dot_q4_1_q8_1(wq, wd, wm, xq, xd, xs)
    nb = k // 32
    dw, mw = (gb.f16_to_f32(v).astype(np.float64) for v in (wd, wm))
    dx, sx = (gb.f16_to_f32(v).astype(np.float64) for v in (xd, xs))
    sumi = np.einsum("rbj,bj->rb", wq.astype(np.int64), xq.astype(np.int64))
    A, B = dw * dx * sumi, mw * sx
    exact = np.array([math.fsum(list(a) + list(b)) for a, b in zip(A, B)])
    bound = gamma(nb + 2) * (np.abs(A) + np.abs(B)).sum(axis=1)
    assert np.all(np.abs(got - exact) <= bound)
    assert got.dtype == F32 and np.any(got != exact)      # float32 rounding happened


@pytest.mark.parametrize("k", [64, 576, 1536])
def test_q8_0_dot_is_the_block_formula_within_its_float32_bound(k):
    """As above for Q8_0 x Q8_0: (d_w d_x) rounded, times sumi rounded, then the running sum:
    gamma(nb + 1) * sum_b |d_w d_x sumi|."""
    rng = np.random.default_rng(k + 1)
    w = (rng.standard_normal((40, k)) * 0.05).astype(F32)
    wq, wd = gb.quantize_q8_0(w)                          # weights as a GGUF's Q8_0
    xq, xd = gb.quantize_q8_0(_activations(rng, k))
    got = gb.dot_q8_0_q8_0(wq, wd, xq, xd)
    nb = k // 32
    A = (gb.f16_to_f32(wd).astype(np.float64) * gb.f16_to_f32(xd).astype(np.float64)
         * np.einsum("rbj,bj->rb", wq.astype(np.int64), xq.astype(np.int64)))
    exact = np.array([math.fsum(a) for a in A])
    assert np.all(np.abs(got - exact) <= gamma(nb + 1) * np.abs(A).sum(axis=1))


def test_q4_1_dot_approximates_the_float_dot_product():
    """Against the float64 dot product of the exact weights d q + m with the float x. The
    difference is the float32 bound above, plus the activation quantisation, per weight
    |w| * (x's bound above), plus m_w * (s_x - d_x16 sum q) per block (s is rounded from the
    float32 d, not from d16)."""
    rng = np.random.default_rng(7)
    k, rows = 576, 30
    wq, wd, wm = _q4_rows(rng, rows, k)
    x = _activations(rng, k)
    xq, xd, xs = gb.quantize_q8_1(x)
    got = gb.dot_q4_1_q8_1(wq, wd, wm, xq, xd, xs).astype(np.float64)
    dw, mw = (gb.f16_to_f32(v).astype(np.float64) for v in (wd, wm))
    w = (dw[..., None] * wq + mw[..., None]).reshape(rows, k)        # exact in float64
    ref = np.array([math.fsum(r) for r in w * x.astype(np.float64)])
    xb = x.astype(np.float64).reshape(-1, 32)
    d = np.max(np.abs(xb), axis=1) / 127
    dx, sx = (gb.f16_to_f32(v).astype(np.float64) for v in (xd, xs))
    xerr = (d[:, None] * (0.5 + 400 * U) + np.abs(d - dx)[:, None] * np.abs(xq)).reshape(-1)
    serr = np.abs(sx - dx * xq.astype(np.float64).sum(axis=1))
    sumi = np.einsum("rbj,bj->rb", wq.astype(np.int64), xq.astype(np.int64))
    f32 = gamma(k // 32 + 2) * (np.abs(dw * dx * sumi) + np.abs(mw * sx)).sum(axis=1)
    bound = np.abs(w) @ xerr + np.abs(mw) @ serr + f32
    assert np.all(np.abs(got - ref) <= bound)
    # a useful approximation: the error is a small part of the rows' scale
    assert np.max(np.abs(got - ref)) < 0.05 * np.max(np.abs(ref))
