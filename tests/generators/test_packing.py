"""Tests for generators/packing.py (DESIGN.md section 3)."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from generators.packing import (
    FORMAT_INT8, FORMAT_TERNARY, MAGIC, absmax_quantize_activations, absmean_quantize,
    build_frame, decode_header, frame_beat_count, frame_beats, header_bytes, pack_trits,
    packed_len, parse_frame, row_bytes, unpack_trits)

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

trit_arrays = hnp.arrays(
    dtype=st.sampled_from([np.int8, np.int16, np.int32, np.int64]),
    shape=st.one_of(
        st.tuples(st.integers(1, 67)),
        st.tuples(st.integers(0, 6), st.integers(1, 67))),
    elements=st.integers(-1, 1))


def ref_pack(row):
    """Per-element reference of DESIGN.md section 3 (slow, for cross-checks)."""
    row = list(row) + [0] * (-len(row) % 5)
    return [sum((row[5 * b + i] + 1) * 3 ** i for i in range(5)) for b in range(len(row) // 5)]


# --------------------------------------------------------------------------- pack / unpack

def test_write_up_example_178():
    assert pack_trits([0, 1, 0, -1, 1]).tolist() == [178]
    assert unpack_trits(np.array([178], dtype=np.uint8)).tolist() == [0, 1, 0, -1, 1]
    assert 178 == 1 + 2 * 3 + 1 * 9 + 0 * 27 + 2 * 81


@SETTINGS
@given(trit_arrays)
def test_round_trip(w):
    b = pack_trits(w)
    k = w.shape[-1]
    assert b.dtype == np.uint8
    assert b.shape == w.shape[:-1] + (-(-k // 5),)
    assert b.shape[-1] == packed_len(k)
    assert (b <= 242).all()
    back = unpack_trits(b, k)
    assert back.dtype == np.int8 and back.shape == w.shape
    np.testing.assert_array_equal(back, w)


@SETTINGS
@given(trit_arrays)
def test_pack_matches_reference_and_pads_with_weight_zero(w):
    w2 = np.atleast_2d(w)
    b2 = np.atleast_2d(pack_trits(w))
    for row, packed in zip(w2, b2):
        assert packed.tolist() == ref_pack(row.tolist())
    # digits past K decode as weight 0
    full = unpack_trits(pack_trits(w))
    assert (full[..., w.shape[-1]:] == 0).all()


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 6, 9, 10, 11])
def test_small_k_including_1(k):
    for v in (-1, 0, 1):
        w = np.full(k, v)
        np.testing.assert_array_equal(unpack_trits(pack_trits(w), k), w)
    assert pack_trits([-1]).tolist() == [0 + 1 * 3 + 9 + 27 + 81]       # pad digits = 1
    assert pack_trits([1]).tolist() == [2 + 3 + 9 + 27 + 81]


def test_every_valid_byte_round_trips_exhaustively():
    b = np.arange(243, dtype=np.uint8)
    t = unpack_trits(b)
    assert t.shape == (243 * 5,)
    assert set(np.unique(t).tolist()) <= {-1, 0, 1}
    np.testing.assert_array_equal(pack_trits(t), b)
    # and as 2-D (one byte per row)
    t2 = unpack_trits(b.reshape(243, 1))
    np.testing.assert_array_equal(pack_trits(t2), b.reshape(243, 1))
    # all 243 trit patterns are distinct
    assert len({tuple(r) for r in t2.tolist()}) == 243


@pytest.mark.parametrize("bad", range(243, 256))
def test_invalid_bytes_strict_and_lenient(bad):
    b = np.array([[178, bad, 0], [bad, 5, 242]], dtype=np.uint8)
    with pytest.raises(ValueError, match="not a valid packed trit byte"):
        unpack_trits(b)
    t, mask = unpack_trits(b, strict=False, return_mask=True)
    np.testing.assert_array_equal(mask, b > 242)
    np.testing.assert_array_equal(t[0, 5:10], 0)
    np.testing.assert_array_equal(t[1, 0:5], 0)
    np.testing.assert_array_equal(t[0, 0:5], [0, 1, 0, -1, 1])
    np.testing.assert_array_equal(t[1, 5:], unpack_trits(np.array([5, 242], np.uint8)))
    # without the mask, lenient returns just the trits
    np.testing.assert_array_equal(unpack_trits(b, strict=False), t)


def test_strict_mask_is_all_false():
    t, mask = unpack_trits(np.array([1, 2, 3]), return_mask=True)
    assert mask.dtype == bool and not mask.any()


def test_empty_inputs_give_empty_results():
    # Decision (documented in packing.py): K = 0 arrays are not an error.
    assert pack_trits(np.zeros(0, dtype=np.int8)).shape == (0,)
    assert pack_trits(np.zeros((3, 0), dtype=np.int8)).shape == (3, 0)
    assert pack_trits(np.zeros((0, 7), dtype=np.int8)).shape == (0, 2)
    assert unpack_trits(np.zeros(0, dtype=np.uint8)).shape == (0,)
    assert unpack_trits(np.zeros((3, 0), dtype=np.uint8), 0).shape == (3, 0)
    assert unpack_trits(np.zeros((0, 2), dtype=np.uint8), 7).shape == (0, 7)
    assert pack_trits([]).shape == (0,)          # float64 empty list is fine
    # but a frame needs K >= 1
    with pytest.raises(ValueError, match="K"):
        build_frame(np.zeros(0), np.zeros((1, 0)), "ternary")


def test_huge_round_trip():
    """10^7 trits through pack and unpack. The speed is a figure of `make report` (section
    2c, generators/report/host_speed.py), not asserted here: no wall-clock limits in tests."""
    rng = np.random.default_rng(1)
    w = rng.integers(-1, 2, size=10 ** 7, dtype=np.int8)
    b = pack_trits(w)
    assert b.dtype == np.uint8 and b.size == 2 * 10 ** 6
    np.testing.assert_array_equal(unpack_trits(b, w.size), w)


def test_host_speed_measure_rows():
    from generators.report import host_speed
    rows = host_speed.measure(n=1000, repeats=1)
    assert [r["function"] for r in rows] == ["pack_trits", "unpack_trits"]
    assert all(r["trits"] == 1000 and r["seconds"] > 0 and r["mtrits_per_s"] > 0 for r in rows)


def test_integral_floats_and_other_int_dtypes_accepted():
    np.testing.assert_array_equal(pack_trits(np.array([0., 1., 0., -1., 1.])), [178])
    np.testing.assert_array_equal(pack_trits(np.array([1, 2, 1, 0, 2], np.int16) - 1), [178])
    np.testing.assert_array_equal(pack_trits(np.array([0, 1, 0, 0, 1], np.uint64)),
                                  pack_trits([0, 1, 0, 0, 1]))
    np.testing.assert_array_equal(unpack_trits(np.array([178.0])), [0, 1, 0, -1, 1])
    # uint8 wrap-around is caught, not silently accepted
    with pytest.raises(ValueError, match="value 255 out of range"):
        pack_trits(np.array([1, 2, 1, 0, 2], np.uint8) - 1)


@pytest.mark.parametrize("bad, exc, msg", [
    ([0, 2, 1], ValueError, "out of range"),
    ([0, -2], ValueError, "out of range"),
    ([127], ValueError, "out of range"),
    (np.array([0.5, 0.0]), ValueError, "non-integral"),
    (np.array([np.nan, 0.0]), ValueError, "NaN"),
    (np.array([np.inf]), ValueError, "NaN or infinity"),
    (np.array([True, False]), TypeError, "boolean"),
    (np.array([1 + 0j]), TypeError, "dtype"),
    (np.array(["1"]), TypeError, "dtype"),
    (np.array([1, None], dtype=object), TypeError, "dtype"),
    (np.zeros((2, 2, 5), np.int8), ValueError, "3-D"),
    (np.int8(1), ValueError, "0-D"),
])
def test_pack_rejects_bad_input(bad, exc, msg):
    with pytest.raises(exc, match=msg):
        pack_trits(bad)


@SETTINGS
@given(hnp.arrays(np.int64, st.integers(1, 30), elements=st.integers(-1000, 1000)))
def test_pack_rejects_any_value_outside_trits(w):
    if np.all(np.abs(w) <= 1):
        pack_trits(w)
    else:
        with pytest.raises(ValueError, match="-1, 0, \\+1"):
            pack_trits(w)


@pytest.mark.parametrize("bad, k, exc, msg", [
    ([256], None, ValueError, "out of range"),
    ([-1], None, ValueError, "out of range"),
    (np.array([1.5]), None, ValueError, "non-integral"),
    (np.array([np.nan]), None, ValueError, "NaN"),
    (np.zeros((1, 1, 1), np.uint8), None, ValueError, "3-D"),
    ([1, 2], 11, ValueError, "ceil"),
    ([1, 2], 5, ValueError, "ceil"),
    ([1, 2], -1, ValueError, "k"),
    ([1, 2], 7.0, TypeError, "k"),
])
def test_unpack_rejects_bad_input(bad, k, exc, msg):
    with pytest.raises(exc, match=msg):
        unpack_trits(bad, k)


# --------------------------------------------------------------------------- quantisers

finite_floats = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False, width=64)
weight_mats = hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=2, max_side=40),
                         elements=finite_floats)


@SETTINGS
@given(weight_mats)
def test_absmean_quantize_properties(W):
    trits, scale = absmean_quantize(W)
    assert trits.dtype == np.int8 and trits.shape == W.shape
    assert set(np.unique(trits).tolist()) <= {-1, 0, 1}
    assert isinstance(scale, float)
    assert scale == pytest.approx(float(np.mean(np.abs(W))), rel=1e-12, abs=0)
    expect = np.clip(np.rint(W / (scale + 1e-5)), -1, 1) if scale else np.zeros_like(W)
    np.testing.assert_array_equal(trits, expect)
    # quantised values keep the sign of W (or are 0)
    assert np.all(trits * np.sign(W) >= 0)
    # idempotence-ish: quantising trits*scale gives the same trits
    if scale > 1e-2:
        t2, s2 = absmean_quantize(trits * scale)
        np.testing.assert_array_equal(t2, trits)
        assert s2 == pytest.approx(scale * np.mean(trits != 0))


def test_absmean_quantize_edges():
    t, s = absmean_quantize(np.zeros((3, 4)))
    assert s == 0.0 and t.dtype == np.int8 and not t.any()
    t, s = absmean_quantize(np.zeros((3, 4)), eps=0)        # no division by zero
    assert s == 0.0 and not t.any()
    t, s = absmean_quantize(np.zeros((0, 4)))
    assert t.shape == (0, 4) and s == 0.0
    t, s = absmean_quantize([[2.0, -2.0], [0.0, 0.5]], eps=0)   # mean|W| = 1.125
    assert s == 1.125
    np.testing.assert_array_equal(t, [[1, -1], [0, 0]])       # 0.5/1.125 = 0.44 -> 0
    # rint rounds half to even: 0.5 -> 0, 1.5 -> 2 -> clipped to 1
    t, s = absmean_quantize([0.5, 1.5, 1.0, 1.0], eps=0)      # scale 1.0
    np.testing.assert_array_equal(t, [0, 1, 1, 1])
    t, s = absmean_quantize(np.array([1, -3, 2], dtype=np.int32))
    assert s == 2.0 and t.tolist() == [0, -1, 1]               # 1/2 = 0.5 -> 0 (even)
    for bad in (np.array([1.0, np.nan]), np.array([np.inf]), np.array([-np.inf, 1])):
        with pytest.raises(ValueError, match="NaN or infinity"):
            absmean_quantize(bad)
    with pytest.raises(ValueError, match="eps"):
        absmean_quantize([1.0], eps=-1)
    with pytest.raises(TypeError):
        absmean_quantize(np.array([True]))


@SETTINGS
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=2, max_side=40),
                  elements=finite_floats))
def test_absmax_quantize_activations_properties(x):
    amax = np.max(np.abs(x), axis=-1)
    if np.any((amax > 0) & (amax < 127.0 / np.finfo(np.float64).max)):
        with pytest.raises(ValueError, match="overflows"):
            absmax_quantize_activations(x)
        return
    q, scale = absmax_quantize_activations(x)
    assert q.dtype == np.int8 and q.shape == x.shape
    scale_arr = np.asarray(scale)
    assert scale_arr.shape == x.shape[:-1]
    if x.ndim == 1:
        assert isinstance(scale, float)
    np.testing.assert_allclose(scale_arr, 127.0 / np.where(amax > 0, amax, 127.0))
    # the largest |x| of each token maps to +-127; nothing reaches -128 by rounding
    nz = amax > 0
    assert np.all(np.max(np.abs(q.astype(int)), axis=-1)[nz] == 127)
    assert np.all(q[~nz] == 0)
    # dequantisation error is at most half a step
    err = np.abs(q / scale_arr[..., None] - x) if x.ndim > 1 else np.abs(q / scale - x)
    step = 1.0 / scale_arr
    assert np.all(err <= (0.5 + 1e-9) * (step[..., None] if x.ndim > 1 else step))


def test_absmax_edges():
    q, s = absmax_quantize_activations(np.zeros(8))
    assert s == 1.0 and not q.any()
    q, s = absmax_quantize_activations([[0.0, 0.0], [1.0, -2.0]])
    np.testing.assert_array_equal(s, [1.0, 63.5])
    np.testing.assert_array_equal(q, [[0, 0], [64, -127]])   # 63.5 -> 64 (half to even)
    with pytest.raises(ValueError, match="NaN"):
        absmax_quantize_activations([1.0, np.nan])
    with pytest.raises(ValueError, match="NaN or infinity"):
        absmax_quantize_activations([np.inf])
    with pytest.raises(ValueError):
        absmax_quantize_activations(np.zeros(0))
    with pytest.raises(ValueError, match="overflows"):
        absmax_quantize_activations([1e-310, 0.0])


# --------------------------------------------------------------------------- frames

@st.composite
def frames(draw):
    fmt = draw(st.sampled_from(["int8", "ternary"]))
    k = draw(st.one_of(st.integers(1, 40), st.sampled_from([1, 5, 7, 64, 65, 127, 255])))
    n = draw(st.integers(1, 6))
    beat = draw(st.sampled_from([4, 8, 16]))
    tag = draw(st.integers(0, 255))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, size=k)
    if fmt == "int8":
        W = rng.integers(-128, 128, size=(n, k))
    else:
        W = rng.integers(-1, 2, size=(n, k))
    return fmt, k, n, beat, tag, x, W, rng


def expected_beats(k, n, fmt, beat):
    rb = k if fmt == "int8" else -(-k // 5)
    return -(-8 // beat) + -(-k // beat) + n * -(-rb // beat)


@SETTINGS
@given(frames(), st.sampled_from(["zero", "const", "random"]), st.booleans())
def test_frame_layout_and_round_trip(case, fill_kind, pad_x):
    fmt, k, n, beat, tag, x, W, rng = case
    pad_fill = {"zero": None, "const": 0xFF, "random": rng}[fill_kind]
    f = build_frame(x, W, fmt, tag=tag, beat_bytes=beat, pad_fill=pad_fill, pad_x=pad_x)
    assert isinstance(f, bytes)
    nbeats = frame_beat_count(k, n, fmt, beat)
    assert nbeats == expected_beats(k, n, fmt, beat)
    assert len(f) == nbeats * beat and len(f) % beat == 0
    # header fields decode back
    h = decode_header(f)
    assert h == {"magic": 0xB158, "k": k, "n": n,
                 "format": FORMAT_INT8 if fmt == "int8" else FORMAT_TERNARY, "tag": tag}
    word = int.from_bytes(f[:8], "little")
    assert word & 0xFFFF == MAGIC and (word >> 16) & 0xFFFF == k and (word >> 32) & 0xFFFF == n
    assert (word >> 48) & 0xFF == (8 if fmt == "int8" else 3) and word >> 56 == tag
    hb = -(-8 // beat) * beat
    assert f[8:hb] == bytes(hb - 8)                   # header padding is zero
    # x follows, signed bytes, zero padding unless pad_x
    xs = f[hb:hb + k]
    np.testing.assert_array_equal(np.frombuffer(xs, np.int8), x)
    xpad = f[hb + k:hb + -(-k // beat) * beat]
    if not pad_x or pad_fill is None:
        assert xpad == bytes(len(xpad))
    elif fill_kind == "const":
        assert xpad == b"\xff" * len(xpad)
    # rows at beat-aligned offsets
    rb = row_bytes(k, fmt)
    stride = -(-rb // beat) * beat
    base = hb + -(-k // beat) * beat
    for r in range(n):
        row = np.frombuffer(f[base + r * stride: base + r * stride + rb], np.uint8)
        if fmt == "int8":
            np.testing.assert_array_equal(row.view(np.int8), W[r])
        else:
            assert (row <= 242).all()
            np.testing.assert_array_equal(unpack_trits(row, k), W[r])
            if pad_fill is None and k % 5:
                assert (unpack_trits(row)[k:] == 0).all()   # digits past K = weight 0
        pad = f[base + r * stride + rb: base + (r + 1) * stride]
        if pad_fill is None:
            assert pad == bytes(len(pad))
        elif fill_kind == "const":
            assert pad == b"\xff" * len(pad)
    # parse_frame inverts build_frame whatever the padding
    p = parse_frame(f, beat, strict=True)
    assert (p["k"], p["n"], p["tag"], p["fmt"]) == (k, n, tag, fmt)
    np.testing.assert_array_equal(p["x"], x)
    np.testing.assert_array_equal(p["w"], W)
    assert p["bad_trit"] is False
    # beats: little-endian ints, byte j = bits 8j+7..8j
    beats = frame_beats(f, beat)
    assert len(beats) == nbeats
    assert all(isinstance(b, int) and 0 <= b < 1 << (8 * beat) for b in beats)
    assert b"".join(b.to_bytes(beat, "little") for b in beats) == f


def test_random_padding_really_is_garbage():
    rng = np.random.default_rng(5)
    k, n = 7, 200                                     # 2 packed bytes, 6 bytes of padding
    x = np.ones(k, dtype=np.int8)
    W = np.zeros((n, k), dtype=np.int8)
    f = build_frame(x, W, "ternary", beat_bytes=8, pad_fill=rng)
    rows = np.frombuffer(f, np.uint8)[16:].reshape(n, 8)
    assert (rows[:, 2:] > 242).any()                  # invalid bytes appear in padding
    digits = unpack_trits(rows[:, :2])[:, k:]         # the 3 digits past K
    assert set(np.unique(digits).tolist()) == {-1, 0, 1}
    np.testing.assert_array_equal(unpack_trits(rows[:, :2], k), W)
    f2 = build_frame(x, W, "ternary", pad_fill=np.random.default_rng(5), pad_valid_trits=True)
    rows2 = np.frombuffer(f2, np.uint8)[16:].reshape(n, 8)
    assert (rows2 <= 242).all()
    # pad_x: x's 15 padding bytes (K=1, 16-byte beats) are garbage too; header pad stays 0
    f3 = build_frame([7], [[-5]], "int8", beat_bytes=16, pad_fill=np.random.default_rng(6),
                     pad_x=True)
    b3 = np.frombuffer(f3, np.uint8)
    assert len(f3) == 48 and b3[16] == 7 and b3[32] == 251
    assert not b3[8:16].any() and b3[17:32].any() and b3[33:48].any()
    f4 = build_frame([7], [[-5]], "int8", beat_bytes=16, pad_fill=np.random.default_rng(6))
    assert not np.frombuffer(f4, np.uint8)[17:32].any()     # x stays zero-padded by default


def test_frame_known_bytes():
    f = build_frame([1, -2, 3], [[1, 0, -1], [1, 1, 1]], "ternary", tag=7, beat_bytes=8)
    assert f.hex() == ("58b1030002000307" "01fe030000000000"
                       "7100000000000000" "8600000000000000")
    # 113 = 2 + 1*3 + 0*9 + 1*27 + 1*81 ; 134 = 2 + 6 + 18 + 27 + 81
    assert frame_beats(f) == [0x07030002_0003B158, 0x0000000000_03FE01, 0x71, 0x86]
    f4 = build_frame([5], [[-3]], "int8", tag=255, beat_bytes=4)
    assert f4.hex() == "58b10100" "010008ff" "05000000" "fd000000"
    assert frame_beats(f4, 4) == [0x0001B158, 0xFF080001, 5, 0xFD]
    f16 = build_frame([5], [[-3]], "int8", beat_bytes=16)
    assert len(f16) == 48 and frame_beats(f16, 16)[0] == 0x00080001_0001B158


def test_max_sizes_header():
    h = header_bytes(65535, 65535, "int8", 255)
    assert decode_header(h) == {"magic": MAGIC, "k": 65535, "n": 65535, "format": 8, "tag": 255}
    assert frame_beat_count(65535, 65535, "ternary", 16) == 1 + 4096 + 65535 * 820


def test_header_bytes_can_build_bad_headers():
    h = header_bytes(0, 0, 0x55, magic=0x1234, beat_bytes=4)
    assert len(h) == 8
    assert decode_header(h) == {"magic": 0x1234, "k": 0, "n": 0, "format": 0x55, "tag": 0}
    assert len(header_bytes(1, 1, "ternary", beat_bytes=16)) == 16
    with pytest.raises(ValueError):
        header_bytes(65536, 1, "int8")
    with pytest.raises(ValueError):
        header_bytes(1, 1, 256)
    with pytest.raises(ValueError, match="fmt"):
        header_bytes(1, 1, "int4")


@pytest.mark.parametrize("kwargs, exc, msg", [
    (dict(x=[1, 2], W=[[1, 2, 3]], fmt="int8"), ValueError, "K=3"),
    (dict(x=[1], W=[[1]], fmt="int4"), ValueError, "fmt"),
    (dict(x=[1], W=[[1]], fmt="int8", tag=256), ValueError, "tag"),
    (dict(x=[1], W=[[1]], fmt="int8", tag=-1), ValueError, "tag"),
    (dict(x=[1], W=[[1]], fmt="int8", beat_bytes=2), ValueError, "beat_bytes"),
    (dict(x=[128], W=[[1]], fmt="int8"), ValueError, "out of range"),
    (dict(x=[-129], W=[[1]], fmt="int8"), ValueError, "out of range"),
    (dict(x=[0.5], W=[[1]], fmt="int8"), ValueError, "non-integral"),
    (dict(x=[np.nan], W=[[1]], fmt="int8"), ValueError, "NaN"),
    (dict(x=[1], W=[[200]], fmt="int8"), ValueError, "out of range"),
    (dict(x=[1], W=[[2]], fmt="ternary"), ValueError, "-1, 0, \\+1"),
    (dict(x=[1], W=[1], fmt="ternary"), ValueError, "2-D"),
    (dict(x=[[[1]]], W=[[1]], fmt="ternary"), ValueError, r"\(K,\) or \(B, K\)"),
    (dict(x=np.zeros((256, 1)), W=[[1]], fmt="int8"), ValueError, "B <= 255"),
    (dict(x=np.zeros(0), W=np.zeros((1, 0)), fmt="int8"), ValueError, "K"),
    (dict(x=[1], W=np.zeros((0, 1)), fmt="int8"), ValueError, "N"),
    (dict(x=np.zeros(65536), W=np.zeros((1, 65536)), fmt="int8"), ValueError, "K"),
    (dict(x=[1], W=[[1]], fmt="int8", pad_fill=300), ValueError, "pad_fill"),
    (dict(x=[1], W=[[1]], fmt="int8", pad_fill="x"), TypeError, "pad_fill"),
])
def test_build_frame_validation(kwargs, exc, msg):
    with pytest.raises(exc, match=msg):
        build_frame(**kwargs)


def test_frame_beats_and_parse_errors():
    with pytest.raises(ValueError, match="multiple"):
        frame_beats(bytes(12), 8)
    with pytest.raises(ValueError, match="beat_bytes"):
        frame_beats(bytes(8), 3)
    f = build_frame([1, 2], [[1, 0], [0, 1]], "ternary")
    with pytest.raises(ValueError, match="bytes"):
        parse_frame(f[:-8])
    bad = bytearray(f)
    bad[0] ^= 1
    with pytest.raises(ValueError, match="magic"):
        parse_frame(bytes(bad))
    bad = bytearray(f)
    bad[6] = 0x04
    with pytest.raises(ValueError, match="format"):
        parse_frame(bytes(bad))
    bad = bytearray(f)
    bad[16] = 250                                     # invalid trit byte in row 0
    with pytest.raises(ValueError, match="not a valid"):
        parse_frame(bytes(bad))
    p = parse_frame(bytes(bad), strict=False)
    assert p["bad_trit"] is True and p["w"][0].tolist() == [0, 0]
