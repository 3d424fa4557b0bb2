"""The golden models of the per-block formats (docs/activations.md sections 2 and 3):
format 0x05 (Q4_1 rows x Q8_1 x, ``golden.q4``) and 0x09 (Q8_0 rows x Q8_0 x, ``golden.mv``).

Expected values come from outside the models: hand-worked frames, an exact Fraction sum of
the block formula rounded to float32 here (``_f32``), and ggml's float32 dot products
(``golden.blocks``, checked against ggml's C in test_blocks.py) within the bound stated below."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from block_cases import activations as _activations  # noqa: E402

from exact import f32_bits  # noqa: E402  (tests/ is on sys.path)

from generators.golden import blocks as gb
from generators.golden import mv as gmv
from generators.golden import q4 as gq4
from generators.packing import frame_beats, header_bytes
from generators.q4 import build_q4_q8_1_frame, pack_q4_rows, quantize_q4_1
from generators.q8 import (build_q8_0_frame, decode_block_words, pack_q8_0_rows,
                           x_scale_table_q8_0, x_scale_table_q8_1)

F32 = np.float32
U = 2.0 ** -24
MAX_K = 2048
ENGINE = (gmv.FMT_INT8, gmv.FMT_TERNARY, gmv.FMT_Q4, gmv.FMT_Q4_Q8_1, gmv.FMT_Q8_0)
INF, NAN, NEG_INF = 0x7C00, 0x7E01, 0xFC00


def gamma(k: int) -> float:
    return k * U / (1 - k * U)


# ------------------------------------------------------------------ the independent model

def _f16(h: int) -> Fraction:
    """fp16 bits -> exact value; Inf/NaN count as zero (the contract's BAD_SCALE rule)."""
    h = int(h)
    if (h >> 10) & 0x1F == 31:
        return Fraction(0)
    return Fraction(float(np.uint16(h).view(np.float16)))


def _f32(v: Fraction) -> int:
    """float32 bits of the exact v, rounded to nearest, ties to even (v in the normal range)."""
    return f32_bits(v)


def exact_q4_q8_1(wq, wd, wm, xq, xd, xs) -> list:
    """float32 bits per row of sum_b d_w d_x S_b + m_w s_x, exactly, rounded once."""
    out = []
    for r in range(wq.shape[0]):
        t = Fraction(0)
        for b in range(wq.shape[1]):
            s = int(np.dot(wq[r, b].astype(np.int64), xq[b].astype(np.int64)))
            t += _f16(wd[r, b]) * _f16(xd[b]) * s + _f16(wm[r, b]) * _f16(xs[b])
        out.append(_f32(t))
    return out


def exact_q8_0(wq, wd, xq, xd) -> list:
    out = []
    for r in range(wq.shape[0]):
        t = Fraction(0)
        for b in range(wq.shape[1]):
            s = int(np.dot(wq[r, b].astype(np.int64), xq[b].astype(np.int64)))
            t += _f16(wd[r, b]) * _f16(xd[b]) * s
        out.append(_f32(t))
    return out



def _run(frame: bytes, formats=ENGINE, vectors: int = 1):
    return gmv.mv_frame(frame_beats(frame, 8), 8, formats, MAX_K, vectors)


def _status(out):
    """(flags, count) of the frame's status word, which must come last with tlast."""
    assert out[-1][1] and not any(last for _, last in out[:-1])
    _, flags, count = gmv.decode_status(out[-1][0])
    return flags, count


def _q4_case(rng, n: int, k: int):
    w = (rng.standard_normal((n, k)) * 0.05).astype(F32)
    wq, wd, wm = quantize_q4_1(w)
    xq, xd, xs = gb.quantize_q8_1(_activations(rng, k))
    return wq, wd, wm, xq, xd, xs


def _q8_case(rng, n: int, k: int):
    wq, wd = gb.quantize_q8_0((rng.standard_normal((n, k)) * 0.05).astype(F32))
    xq, xd = gb.quantize_q8_0(_activations(rng, k))
    return wq, wd, xq, xd


# ------------------------------------------------------------------ hand-worked frames

def test_hand_worked_0x05_frame():
    """K = 32, one row. x: codes 2, -3 at 0, 1; d_x 0.5, s_x -0.5 (s is taken as sent, not
    recomputed). Row: d_w 0.25, m_w 2, codes 4, 1 at 0, 1. S = 8 - 3 = 5:
    0.25 * 0.5 * 5 + 2 * (-0.5) = -0.375 (float32 0xBEC00000)."""
    xq = np.zeros(32, np.int8)
    xq[:2] = [2, -3]
    q = np.zeros((1, 1, 32), np.uint8)
    q[0, 0, :2] = [4, 1]
    rows = pack_q4_rows(q, np.array([[0x3400]], np.uint16), np.array([[0x4000]], np.uint16), 32)
    fr = build_q4_q8_1_frame(xq, np.array([0x3800], np.uint16), np.array([0xB800], np.uint16),
                             rows, 32, tag=0x11)
    want = (bytes([0x58, 0xB1, 32, 0, 1, 0, 0x05, 0x11])
            + bytes([2, 0xFD]) + bytes(30)                         # x codes, 4 beats
            + bytes([0x00, 0x38, 0x00, 0xB8, 0, 0, 0, 0])          # d0 s0, block 1 past K: 0
            + bytes([0x00, 0x34, 0x00, 0x40, 0, 0, 0, 0])          # row: d0 m0
            + bytes([0x14]) + bytes(15))                           # codes 4 | 1 << 4, 2 beats
    assert fr == want
    out = _run(fr)
    assert out == [(0xBEC00000, False), (gmv.status_word(0x11, 0, 1), True)]
    assert decode_block_words([out[0][0]]).tolist() == [-0.375]
    # the q4-engine of today does not take 0x05; with formats (0x04, 0x05) it does
    beats = frame_beats(fr, 8)
    assert gq4.q4_frame(beats, MAX_K) == [(gmv.status_word(0x11, gmv.BAD_FORMAT, 0), True)]
    assert gq4.q4_frame(beats, MAX_K, formats=(gq4.FMT_Q4, gq4.FMT_Q4_Q8_1)) == out


def test_hand_worked_0x09_frame():
    """K = 160: a full group of four blocks, then a group of one (its scale beat d4 0 0 0 and
    four code beats). x: code 3 at 0 (d_x0 1), codes -1, 5 at 128, 159 (d_x4 2). Row: 10 at 0
    (d_w0 0.5), 7, 1 at 128, 159 (d_w4 0.25): 0.5 * 1 * 30 + 0.25 * 2 * (-7 + 5) = 14."""
    k = 160
    xq = np.zeros(k, np.int8)
    xq[[0, 128, 159]] = [3, -1, 5]
    xd = np.array([0x3C00, 0x3C00, 0x3C00, 0x3C00, 0x4000], np.uint16)
    wq = np.zeros((1, k), np.int8)
    wq[0, [0, 128, 159]] = [10, 7, 1]
    wd = np.array([[0x3800, 0x3C00, 0x3C00, 0x3C00, 0x3400]], np.uint16)
    rows = pack_q8_0_rows(wq, wd, k)
    assert rows.shape == (1, 8 * (2 + 20))
    r = rows[0]
    assert r[0:8].tolist() == [0, 0x38, 0, 0x3C, 0, 0x3C, 0, 0x3C]
    assert r[8] == 10 and not r[9:136].any()
    assert r[136:144].tolist() == [0, 0x34, 0, 0, 0, 0, 0, 0]
    assert r[144] == 7 and r[175] == 1 and not r[145:175].any()
    fr = build_q8_0_frame(xq, xd, rows, k, tag=0x22)
    assert fr[:8] == bytes([0x58, 0xB1, 160, 0, 1, 0, 0x09, 0x22])
    assert fr[8 + 160:8 + 176] == bytes([0, 0x3C] * 4 + [0, 0x40, 0, 0, 0, 0, 0, 0])
    assert fr[8 + 176:] == rows.tobytes()
    out = _run(fr)
    assert out == [(0x41600000, False), (gmv.status_word(0x22, 0, 1), True)]


def _q8_hand(terms, k):
    """A 0x09 row whose block b contributes terms[b] = (w code, x code, d_w bits) at weight 0."""
    xq = np.zeros(k, np.int8)
    wq = np.zeros((1, k), np.int8)
    wd = np.zeros((1, k // 32), np.uint16)
    for b, (w, x, d) in enumerate(terms):
        wq[0, 32 * b], xq[32 * b], wd[0, b] = w, x, d
    return xq, wq, wd


def test_one_rounding_at_the_end_of_the_row():
    """Block terms 2^24, 1, 1 (d_w 2048, codes 64 * 64 twice; then 1 * 1 twice with d 1): the
    exact sum 2^24 + 2 is a float32 and is the result; ggml's float32 running sum gives 2^24
    (each + 1 a tie to even). Terms 2^24, 1: the tie is rounded once, to even: 2^24."""
    k = 96
    xq, wq, wd = _q8_hand([(64, 64, 0x6800), (1, 1, 0x3C00), (1, 1, 0x3C00)], k)
    wq[0, 1], xq[1] = 64, 64
    xd = np.full(3, 0x3C00, np.uint16)
    out = _run(build_q8_0_frame(xq, xd, pack_q8_0_rows(wq, wd, k), k))
    assert decode_block_words([out[0][0]]).tolist() == [2.0 ** 24 + 2]
    assert gb.dot_q8_0_q8_0(wq.reshape(1, 3, 32), wd, xq.reshape(3, 32), xd).tolist() == [2.0 ** 24]
    k = 64
    xq, wq, wd = _q8_hand([(64, 64, 0x6800), (1, 1, 0x3C00)], k)
    wq[0, 1], xq[1] = 64, 64
    out = _run(build_q8_0_frame(xq, np.full(2, 0x3C00, np.uint16), pack_q8_0_rows(wq, wd, k), k))
    assert out[0][0] == 0x4B800000                                  # 2^24
    # 2^24 + 3 (three blocks of 1): not a float32, rounds to 2^24 + 4 (even)
    k = 128
    xq, wq, wd = _q8_hand([(64, 64, 0x6800)] + [(1, 1, 0x3C00)] * 3, k)
    wq[0, 1], xq[1] = 64, 64
    out = _run(build_q8_0_frame(xq, np.full(4, 0x3C00, np.uint16), pack_q8_0_rows(wq, wd, k), k))
    assert decode_block_words([out[0][0]]).tolist() == [2.0 ** 24 + 4]


def test_extreme_scales_are_exact():
    """The smallest and largest fp16 scales: a subnormal 2^-24 d_w times a subnormal d_x is
    2^-48, the accumulator's unit; 65504 * 65504 * S is far above it. Both exactly as the
    Fraction model says (0x05 with m_w s_x of both kinds too)."""
    k = 64
    xq = np.zeros(k, np.int8)
    xq[[0, 32]] = [1, 127]
    wq = np.zeros((1, k), np.int8)
    wq[0, [0, 32]] = [1, 127]
    wd = np.array([[0x0001, 0x7BFF]], np.uint16)
    xd = np.array([0x0001, 0x7BFF], np.uint16)
    out = _run(build_q8_0_frame(xq, xd, pack_q8_0_rows(wq, wd, k), k))
    assert out[0][0] == exact_q8_0(wq.reshape(1, 2, 32), wd, xq.reshape(2, 32), xd)[0]
    only_small = pack_q8_0_rows(wq * np.array([1] * 32 + [0] * 32, np.int8), wd, k)
    assert _run(build_q8_0_frame(xq, xd, only_small, k))[0][0] == 0x27800000   # 2^-48
    q = np.zeros((1, 2, 32), np.uint8)
    q[0, :, 0] = 15
    wm = np.array([[0x8001, 0xFBFF]], np.uint16)
    xs = np.array([0x0001, 0x7BFF], np.uint16)
    out = _run(build_q4_q8_1_frame(xq, xd, xs, pack_q4_rows(q, wd, wm, k), k))
    assert out[0][0] == exact_q4_q8_1(q, wd, wm, xq.reshape(2, 32), xd, xs)[0]


# ------------------------------------------------------------------ against the Fraction model
# and ggml's float32 dot products

@pytest.mark.parametrize("k", [32, 64, 96, 576])
def test_0x05_equals_the_exact_block_formula_and_ggml_within_its_bound(k):
    """Every word is the float32 nearest the exact sum (Fraction model). ggml's float32 result
    is within gamma(nb + 2) sum_b (|A_b| + |B_b|) of the exact sum (test_blocks.py), and the
    golden word within half an ulp of it (u |exact|): their difference is within the sum."""
    rng = np.random.default_rng(k)
    n = 12
    wq, wd, wm, xq, xd, xs = _q4_case(rng, n, k)
    out = _run(build_q4_q8_1_frame(xq, xd, xs, pack_q4_rows(wq, wd, wm, k), k, tag=3))
    assert _status(out) == (0, n)
    words = [w for w, _ in out[:-1]]
    assert words == exact_q4_q8_1(wq, wd, wm, xq, xd, xs)
    got = decode_block_words(words).astype(np.float64)
    ggml = gb.dot_q4_1_q8_1(wq, wd, wm, xq, xd, xs).astype(np.float64)
    dw, mw = (gb.f16_to_f32(v).astype(np.float64) for v in (wd, wm))
    dx, sx = (gb.f16_to_f32(v).astype(np.float64) for v in (xd, xs))
    sumi = np.einsum("rbj,bj->rb", wq.astype(np.int64), xq.astype(np.int64))
    A, B = dw * dx * sumi, mw * sx
    exact = np.array([math.fsum(list(a) + list(b)) for a, b in zip(A, B)])
    bound = gamma(k // 32 + 2) * (np.abs(A) + np.abs(B)).sum(axis=1) + U * np.abs(exact)
    assert np.all(np.abs(got - ggml) <= bound)
    assert np.all(np.abs(got - exact) <= U * np.abs(exact))


@pytest.mark.parametrize("k", [32, 160, 576, 1536])
def test_0x09_equals_the_exact_block_formula_and_ggml_within_its_bound(k):
    """As above for Q8_0 x Q8_0; ggml's bound gamma(nb + 1) sum_b |d_w d_x S_b|."""
    rng = np.random.default_rng(k + 5)
    n = 10
    wq, wd, xq, xd = _q8_case(rng, n, k)
    out = _run(build_q8_0_frame(xq, xd, pack_q8_0_rows(wq, wd, k), k, tag=4))
    assert _status(out) == (0, n)
    words = [w for w, _ in out[:-1]]
    assert words == exact_q8_0(wq, wd, xq, xd)
    got = decode_block_words(words).astype(np.float64)
    ggml = gb.dot_q8_0_q8_0(wq, wd, xq, xd).astype(np.float64)
    A = (gb.f16_to_f32(wd).astype(np.float64) * gb.f16_to_f32(xd).astype(np.float64)
         * np.einsum("rbj,bj->rb", wq.astype(np.int64), xq.astype(np.int64)))
    exact = np.array([math.fsum(a) for a in A])
    bound = gamma(k // 32 + 1) * np.abs(A).sum(axis=1) + U * np.abs(exact)
    assert np.all(np.abs(got - ggml) <= bound)


# ------------------------------------------------------------------ bad frames

@pytest.mark.parametrize("code", [gmv.FMT_Q4_Q8_1, gmv.FMT_Q8_0])
@pytest.mark.parametrize("k", [16, 40, 100, 2047])
def test_k_not_a_multiple_of_32_is_bad_shape(code, k):
    fr = header_bytes(k, 2, code, 0x33) + bytes(8 * 40)
    assert _run(fr) == [(gmv.status_word(0x33, gmv.BAD_SHAPE, 0), True)]
    fr = header_bytes(k, 2, code, 0x33, vectors=2) + bytes(8 * 40)
    assert _run(fr, vectors=2) == [(gmv.status_word(0x33, gmv.BAD_SHAPE, 0), True)]
    # an engine that does not take the format: BAD_FORMAT alone (it knows no shape rule)
    assert _run(fr, formats=(gmv.FMT_INT8,)) == [(gmv.status_word(0x33, gmv.BAD_FORMAT, 0), True)]
    # the other formats keep any K
    assert _status(_run(header_bytes(k, 1, "int8") + bytes(-(-k // 8) * 16))) == (0, 1)


def _cut(frame: bytes, nbytes: int) -> bytes:
    assert nbytes % 8 == 0
    return frame[:nbytes]


def test_short_and_long_frames():
    rng = np.random.default_rng(11)
    k, n = 192, 3
    wq, wd, wm, xq, xd, xs = _q4_case(rng, n, k)
    rows = pack_q4_rows(wq, wd, wm, k)
    fr5 = build_q4_q8_1_frame(xq, xd, xs, rows, k, tag=9)
    want5 = exact_q4_q8_1(wq, wd, wm, xq, xd, xs)
    # short in the x codes, in the scale table (3 beats at K = 192), just before the rows
    for cut in (8 + 64, 8 + 192, 8 + 192 + 8, 8 + 192 + 16):
        assert _run(_cut(fr5, cut)) == [(gmv.status_word(9, gmv.SHORT_FRAME, 0), True)]
    # at the end of the scale table: no row came, the frame is short
    head = 8 + 192 + 24
    assert _run(_cut(fr5, head)) == [(gmv.status_word(9, gmv.SHORT_FRAME, 0), True)]
    # inside row 1: row 0 stands
    rb = rows.shape[1]
    assert _run(_cut(fr5, head + rb + 16)) == [(want5[0], False),
                                               (gmv.status_word(9, gmv.SHORT_FRAME, 1), True)]
    # one beat too many
    assert _run(fr5 + bytes(8)) == [(w, False) for w in want5] + [
        (gmv.status_word(9, gmv.LONG_FRAME, n), True)]
    q8, d8, xq8, xd8 = _q8_case(rng, n, k)
    fr9 = build_q8_0_frame(xq8, xd8, pack_q8_0_rows(q8, d8, k), k, tag=10)
    want9 = exact_q8_0(q8, d8, xq8, xd8)
    for cut in (8 + 64, 8 + 192, 8 + 192 + 8):           # the 0x09 table is 2 beats at 192
        assert _run(_cut(fr9, cut)) == [(gmv.status_word(10, gmv.SHORT_FRAME, 0), True)]
    head9 = 8 + 192 + 16
    rb9 = 8 * (2 + 24)
    assert _run(_cut(fr9, head9 + 2 * rb9 + 8)) == [(w, False) for w in want9[:2]] + [
        (gmv.status_word(10, gmv.SHORT_FRAME, 2), True)]
    assert _run(fr9 + bytes(16))[-1] == (gmv.status_word(10, gmv.LONG_FRAME, n), True)


def _set16(frame: bytes, offset: int, h: int) -> bytes:
    b = bytearray(frame)
    b[offset:offset + 2] = int(h).to_bytes(2, "little")
    return bytes(b)


@pytest.mark.parametrize("bad", [INF, NAN, NEG_INF])
def test_inf_nan_x_scales_and_row_scales_raise_bad_scale_and_count_as_zero(bad):
    """An Inf/NaN d or s of x (0x05), d of x or of a Q8_0 row (0x09), d or m of a Q4_1 row
    (0x05): BAD_SCALE (bit 5), every result still sent, that scale counted as zero (the
    Fraction model with the bad bits gives exactly that). Fields past K/32 are never read."""
    rng = np.random.default_rng(bad)
    k, n = 96, 2                                          # 3 blocks: the tables' last field unused
    wq, wd, wm, xq, xd, xs = _q4_case(rng, n, k)
    cases = [("x d", xd.copy(), xs.copy(), wd.copy(), wm.copy()),
             ("x s", xd.copy(), xs.copy(), wd.copy(), wm.copy()),
             ("row d", xd.copy(), xs.copy(), wd.copy(), wm.copy()),
             ("row m", xd.copy(), xs.copy(), wd.copy(), wm.copy())]
    cases[0][1][2] = bad
    cases[1][2][0] = bad
    cases[2][3][1, 1] = bad
    cases[3][4][0, 2] = bad
    for name, cxd, cxs, cwd, cwm in cases:
        fr = build_q4_q8_1_frame(xq, cxd, cxs, pack_q4_rows(wq, cwd, cwm, k), k, tag=1)
        out = _run(fr)
        assert _status(out) == (gmv.BAD_SCALE, n), name
        assert [w for w, _ in out[:-1]] == exact_q4_q8_1(wq, cwd, cwm, xq, cxd, cxs), name
        assert out[:-1] != _run(build_q4_q8_1_frame(
            xq, xd, xs, pack_q4_rows(wq, wd, wm, k), k, tag=1))[:-1], name
    # past K/32: block 3's d and s in the x table, d1 m1 of the row's last group
    good = build_q4_q8_1_frame(xq, xd, xs, pack_q4_rows(wq, wd, wm, k), k, tag=1)
    table = 8 + k
    past = _set16(_set16(good, table + 12, bad), table + 14, bad)
    row0 = table + 16
    # the row: scale beat, 4 code beats (blocks 0, 1), scale beat d2 m2 d3 m3, 2 code beats
    past = _set16(_set16(past, row0 + 5 * 8 + 4, bad), row0 + 5 * 8 + 6, bad)
    assert _run(past) == _run(good) and _status(_run(good)) == (0, n)

    w8, d8, x8, xd8 = _q8_case(rng, n, k)
    for name in ("x d", "row d"):
        cxd, cwd = xd8.copy(), d8.copy()
        if name == "x d":
            cxd[1] = bad
        else:
            cwd[1, 2] = bad
        out = _run(build_q8_0_frame(x8, cxd, pack_q8_0_rows(w8, cwd, k), k, tag=2))
        assert _status(out) == (gmv.BAD_SCALE, n), name
        assert [w for w, _ in out[:-1]] == exact_q8_0(w8, cwd, x8, cxd), name
    good = build_q8_0_frame(x8, xd8, pack_q8_0_rows(w8, d8, k), k, tag=2)
    past = _set16(good, 8 + k + 6, bad)                   # x d(3)
    past = _set16(past, 8 + k + 8 + 6, bad)               # row 0's d3
    assert _run(past) == _run(good) and _status(_run(good)) == (0, n)


def test_bad_scale_is_raised_by_the_blocks_computed():
    """A bad x scale is flagged when a block that uses it is computed: a frame cut before row
    0's block 0 is complete has no BAD_SCALE, one cut after it has (the rule of the rows' own
    scales, docs/q4.md)."""
    rng = np.random.default_rng(5)
    k, n = 64, 2
    wq, wd, wm, xq, xd, xs = _q4_case(rng, n, k)
    xd[0] = INF
    fr = build_q4_q8_1_frame(xq, xd, xs, pack_q4_rows(wq, wd, wm, k), k, tag=7)
    head = 8 + k + 8
    # row 0: scale beat, code beats 0, 1 (block 0), 2, 3 (block 1)
    assert _status(_run(_cut(fr, head + 16))) == (gmv.SHORT_FRAME, 0)
    assert _status(_run(_cut(fr, head + 24))) == (gmv.SHORT_FRAME | gmv.BAD_SCALE, 0)
    k = 96
    w8, d8, x8, xd8 = _q8_case(rng, n, k)
    d8[0, 1] = NAN
    fr = build_q8_0_frame(x8, xd8, pack_q8_0_rows(w8, d8, k), k, tag=7)
    head = 8 + k + 8
    # row 0: scale beat, block 0 in beats 1-4, block 1 in beats 5-8, block 2 in beats 9-12
    assert _status(_run(_cut(fr, head + 8 * 8))) == (gmv.SHORT_FRAME, 0)
    assert _status(_run(_cut(fr, head + 9 * 8))) == (gmv.SHORT_FRAME | gmv.BAD_SCALE, 0)


# ------------------------------------------------------------------ B-vector frames

@pytest.mark.parametrize("B", [1, 2, 3])
def test_vector_frames_each_vector_with_its_own_scale_table(B):
    """B vectors, each its own codes then its own scale table: every row answers B words,
    vector 0 first, each the exact formula of its own vector; the vectors' scales differ (one
    vector's table applied to another would change the words)."""
    rng = np.random.default_rng(100 + B)
    k, n = 160, 4
    X = np.stack([_activations(rng, k) * (4.0 ** v) for v in range(B)])
    wq, wd, wm = quantize_q4_1((rng.standard_normal((n, k)) * 0.05).astype(F32))
    xq, xd, xs = gb.quantize_q8_1(X)                      # (B, nb, 32), (B, nb)
    fr = build_q4_q8_1_frame(xq, xd, xs, pack_q4_rows(wq, wd, wm, k), k, tag=0x40)
    # layout: header with the flag, vectors word, then per vector K codes and 3 table beats
    assert fr[6] == gmv.FMT_Q4_Q8_1 | 0x80 and fr[8:16] == B.to_bytes(8, "little")
    slot = k + 24
    for v in range(B):
        base = 16 + v * slot
        assert fr[base:base + k] == xq[v].tobytes()
        assert fr[base + k:base + slot] == x_scale_table_q8_1(xd[v], xs[v])
    out = _run(fr, vectors=4)
    assert _status(out) == (0, n)
    want = [exact_q4_q8_1(wq, wd, wm, xq[v], xd[v], xs[v]) for v in range(B)]
    assert [w for w, _ in out[:-1]] == [want[v][r] for r in range(n) for v in range(B)]
    if B > 1:
        assert want[0] != exact_q4_q8_1(wq, wd, wm, xq[0], xd[1], xs[1])
    # B > the engine's vectors: BAD_SHAPE; the flag on an engine of one vector: BAD_FORMAT
    if B > 2:
        assert _status(_run(fr, vectors=B - 1)) == (gmv.BAD_SHAPE, 0)
    assert _status(_run(fr, vectors=1)) == (gmv.BAD_FORMAT, 0)

    w8, d8 = gb.quantize_q8_0((rng.standard_normal((n, k)) * 0.05).astype(F32))
    x8, xd8 = gb.quantize_q8_0(X)
    fr = build_q8_0_frame(x8, xd8, pack_q8_0_rows(w8, d8, k), k, tag=0x41)
    assert fr[6] == gmv.FMT_Q8_0 | 0x80
    slot = k + 16
    for v in range(B):
        base = 16 + v * slot
        assert fr[base:base + k] == x8[v].tobytes()
        assert fr[base + k:base + slot] == x_scale_table_q8_0(xd8[v])
    out = _run(fr, vectors=4)
    want = [exact_q8_0(w8, d8, x8[v], xd8[v]) for v in range(B)]
    assert [w for w, _ in out[:-1]] == [want[v][r] for r in range(n) for v in range(B)]
    assert _status(out) == (0, n)


def test_vector_frame_short_in_a_later_vectors_scale_table():
    rng = np.random.default_rng(9)
    k, n = 64, 2
    X = np.stack([_activations(rng, k) for _ in range(2)])
    w8, d8 = gb.quantize_q8_0((rng.standard_normal((n, k)) * 0.05).astype(F32))
    x8, xd8 = gb.quantize_q8_0(X)
    fr = build_q8_0_frame(x8, xd8, pack_q8_0_rows(w8, d8, k), k, tag=0x42)
    end_of_x = 16 + 2 * (k + 8)
    assert _run(_cut(fr, end_of_x - 8), vectors=2) == [
        (gmv.status_word(0x42, gmv.SHORT_FRAME, 0), True)]
    # vector 1's Inf d flags the frame; vector 0's words are unchanged
    xd8[1, 0] = INF
    out = _run(build_q8_0_frame(x8, xd8, pack_q8_0_rows(w8, d8, k), k, tag=0x42), vectors=2)
    assert _status(out) == (gmv.BAD_SCALE, n)
    assert [w for w, _ in out[:-1]][0::2] == exact_q8_0(w8, d8, x8[0], xd8[0])
