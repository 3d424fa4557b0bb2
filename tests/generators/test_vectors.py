"""Frames of B activation vectors (docs/vectors.md): the golden models against numpy.

The expected words are computed here with numpy dot products (INT8, ternary) or from B frames
of one vector each (Q4_1, whose single-vector model is checked against llama.cpp's arithmetic
in tests/generators/test_q4.py), never by the code under test."""
import numpy as np
import pytest

from generators.contract import VECTORS_FLAG
from generators.golden import mv as gmv
from generators.golden import q4 as gq4
from generators.packing import build_frame, frame_beats, header_bytes, pack_trits
from generators.q4 import build_q4_frame, pack_q4_rows, quantize_q4_1

MAX_K = 512
FORMATS = (gmv.FMT_INT8, gmv.FMT_TERNARY, gmv.FMT_Q4)


def _beats(frame: bytes):
    return frame_beats(frame, 8)


def _frame(fmt, X, W, tag=0x5A, rng=None):
    """A frame of len(X) vectors (X 2-D) or one vector (X 1-D) and its weights' numpy view."""
    if fmt == "q4":
        q, d, m = quantize_q4_1(W.astype(np.float32))
        rows = pack_q4_rows(q, d, m, W.shape[1])
        return build_q4_frame(X, rows, W.shape[1], tag), rows
    return build_frame(X, W, fmt, tag, 8, pad_fill=rng), None


def _status(tag, flags, count):
    return gmv.status_word(tag, flags, count)


def _words(out):
    return [w for w, _ in out]


@pytest.mark.parametrize("fmt", ["int8", "ternary"])
@pytest.mark.parametrize("B, k, n", [(1, 37, 5), (2, 64, 7), (4, 200, 3), (8, 5, 9)])
def test_integer_rows_every_vector(fmt, B, k, n):
    rng = np.random.default_rng(B * 1000 + k)
    X = rng.integers(-128, 128, size=(B, k))
    W = rng.integers(-128, 128, size=(n, k)) if fmt == "int8" else rng.integers(-1, 2, (n, k))
    fr, _ = _frame(fmt, X, W, rng=rng)
    out = gmv.mv_frame(_beats(fr), 8, FORMATS, MAX_K, vectors=8)
    want = (W.astype(np.int64) @ X.astype(np.int64).T) & 0xFFFFFFFF     # (n, B), row-major
    assert _words(out) == [int(v) for v in want.reshape(-1)] + [_status(0x5A, 0, n)]
    assert [last for _, last in out] == [False] * (n * B) + [True]


@pytest.mark.parametrize("B", [1, 2, 3])
def test_q4_rows_equal_single_vector_frames(B):
    rng = np.random.default_rng(7 + B)
    k, n = 96, 6
    X = rng.integers(-128, 128, size=(B, k))
    W = rng.normal(0, 0.05, size=(n, k))
    fr, rows = _frame("q4", X, W, tag=0x31)
    out = _words(gmv.mv_frame(_beats(fr), 8, FORMATS, MAX_K, vectors=4))
    singles = [_words(gq4.q4_frame(_beats(build_q4_frame(X[v], rows, k, 0x31)), MAX_K))[:-1]
               for v in range(B)]
    assert out[:-1] == [singles[v][r] for r in range(n) for v in range(B)]
    assert out[-1] == _status(0x31, 0, n)
    # and the values are W.x to float32 accuracy (a check independent of the Q4 models)
    deq = gq4_dequant(rows, k)
    got = np.array(out[:-1], np.uint32).view(np.float32).reshape(n, B)
    assert np.allclose(got, deq @ X.T, rtol=1e-5, atol=1e-3)


def gq4_dequant(rows, k):
    codes, D, M, bad = gq4.decode_rows(rows, k)
    assert not bad.any()
    w = codes.astype(np.float64) * (D[..., None] / 2 ** 24) + (M[..., None] / 2 ** 24)
    return w.reshape(rows.shape[0], -1)[:, :k]


def test_one_vector_with_the_flag_is_todays_frame():
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, size=40)
    W = rng.integers(-1, 2, size=(4, 40))
    legacy = gmv.mv_frame(_beats(build_frame(x, W, "ternary", 9)), 8, FORMATS, MAX_K)
    flagged = gmv.mv_frame(_beats(build_frame(x[None], W, "ternary", 9)), 8, FORMATS, MAX_K,
                           vectors=2)
    assert legacy == flagged
    # an engine of one vector does not take the flag: BAD_FORMAT
    one = gmv.mv_frame(_beats(build_frame(x[None], W, "ternary", 9)), 8, FORMATS, MAX_K)
    assert _words(one) == [_status(9, gmv.BAD_FORMAT, 0)]


def _with_header(fmt_byte, k, n, tag, ext, rest=b""):
    word = 0xB158 | k << 16 | n << 32 | fmt_byte << 48 | tag << 56
    return word.to_bytes(8, "little") + (b"" if ext is None else ext.to_bytes(8, "little")) + rest


@pytest.mark.parametrize("ext, flags", [
    (0, gmv.BAD_SHAPE),                         # B = 0
    (5, gmv.BAD_SHAPE),                         # B > vectors (4)
    (2 | 1 << 8, gmv.BAD_FORMAT),               # reserved bits set
    (0 | 1 << 63, gmv.BAD_SHAPE | gmv.BAD_FORMAT),
])
@pytest.mark.parametrize("code", FORMATS)
def test_bad_vectors_word(ext, flags, code):
    fr = _with_header(code | VECTORS_FLAG, 16, 2, 0x44, ext, bytes(8 * 20))
    assert _words(gmv.mv_frame(_beats(fr), 8, FORMATS, MAX_K, vectors=4)) == \
        [_status(0x44, flags, 0)]


def test_header_word_flags_come_first():
    # K = 0 and an unknown format from the header word: the vectors word is not read
    fr = _with_header(0x05 | VECTORS_FLAG, 0, 2, 0x12, 0, bytes(16))
    assert _words(gmv.mv_frame(_beats(fr), 8, FORMATS, MAX_K, vectors=4)) == \
        [_status(0x12, gmv.BAD_SHAPE | gmv.BAD_FORMAT, 0)]


@pytest.mark.parametrize("fmt", ["int8", "ternary", "q4"])
def test_short_and_long_frames(fmt):
    rng = np.random.default_rng(11)
    B, k, n = 3, 64, 4     # every format: rows of more than one beat
    X = rng.integers(-128, 128, size=(B, k))
    W = (rng.integers(-128, 128, size=(n, k)) if fmt == "int8" else
         rng.integers(-1, 2, (n, k)) if fmt == "ternary" else rng.normal(0, 0.1, (n, k)))
    fr, _ = _frame(fmt, X, W, tag=0x77)
    full = _words(gmv.mv_frame(_beats(fr), 8, FORMATS, MAX_K, vectors=4))
    assert len(full) == n * B + 1 and full[-1] == _status(0x77, 0, n)
    beats = _beats(fr)
    x_beats = -(-k // 8)
    row_beats = (len(beats) - 2 - B * x_beats) // n
    cases = {
        "inside the vectors word": beats[:1],
        "inside the x of the last vector": beats[:2 + (B - 1) * x_beats + 1],
        "after x, no row": beats[:2 + B * x_beats],
    }
    for name, b in cases.items():
        assert _words(gmv.mv_frame(b, 8, FORMATS, MAX_K, vectors=4)) == \
            [_status(0x77, gmv.SHORT_FRAME, 0)], name
    # two whole rows and part of the third: the two rows' B results stand
    cut = beats[:2 + B * x_beats + 2 * row_beats + 1]
    assert _words(gmv.mv_frame(cut, 8, FORMATS, MAX_K, vectors=4)) == \
        full[:2 * B] + [_status(0x77, gmv.SHORT_FRAME, 2)]
    # one beat too many: every result, LONG_FRAME
    long_ = beats + [0x1234]
    assert _words(gmv.mv_frame(long_, 8, FORMATS, MAX_K, vectors=4)) == \
        full[:-1] + [_status(0x77, gmv.LONG_FRAME, n)]


def test_bad_trit_with_vectors():
    rng = np.random.default_rng(5)
    X = rng.integers(-128, 128, size=(2, 10))
    W = rng.integers(-1, 2, size=(3, 10))
    fr = bytearray(build_frame(X, W, "ternary", 1))
    fr[16 + 2 * 16 + 8 + 1] = 250            # row 1, byte 1: weights 5..9 count as zero
    out = _words(gmv.mv_frame(_beats(bytes(fr)), 8, FORMATS, MAX_K, vectors=2))
    Wz = W.copy()
    Wz[1, 5:10] = 0
    want = (Wz.astype(np.int64) @ X.T) & 0xFFFFFFFF
    assert out == [int(v) for v in want.reshape(-1)] + [_status(1, gmv.BAD_TRIT, 3)]


def test_mixed_stream():
    rng = np.random.default_rng(8)
    X = rng.integers(-128, 128, size=(2, 16))
    W = rng.integers(-128, 128, size=(2, 16))
    a = build_frame(X, W, "int8", 1)
    b = build_frame(X[0], W, "int8", 2)
    stream = [(d, i == len(_beats(f)) - 1) for f in (a, b) for i, d in enumerate(_beats(f))]
    out = _words(gmv.mv_stream(stream, 8, FORMATS, MAX_K, vectors=2))
    want = (W.astype(np.int64) @ X.T) & 0xFFFFFFFF
    assert out == ([int(v) for v in want.reshape(-1)] + [_status(1, 0, 2)]
                   + [int(v) for v in want[:, 0]] + [_status(2, 0, 2)])


def test_header_bytes_vectors_word():
    h = header_bytes(16, 2, "int8", 3, vectors=4)
    assert len(h) == 16 and h[6] == 0x08 | VECTORS_FLAG and h[8:] == (4).to_bytes(8, "little")
    assert len(header_bytes(16, 2, "int8", 3, vectors=4, beat_bytes=4)) == 16
    assert header_bytes(16, 2, "int8", 3)[6] == 0x08 and len(header_bytes(16, 2, "int8")) == 8
    assert len(pack_trits(np.zeros((1, 5), np.int8))[0]) == 1
