"""Host side of the per-block formats (generators/q8.py, generators.q4.build_q4_q8_1_frame):
the x scale tables, Q8_0 row images from numpy and from a GGUF's raw block_q8_0 bytes, the
frames' byte layout (docs/activations.md section 2) and the refusals. The layouts are walked
here independently of the builders; the golden models' words are in
tests/generators/golden/test_block_frames.py."""
from __future__ import annotations

import numpy as np
import pytest

from generators import contract
from generators import q4 as hostq4
from generators import q8
from generators.golden import blocks as gb
from generators.packing import build_frame

F32 = np.float32


def test_contract_names():
    assert contract.FORMAT_Q4_Q8_1 == 0x05 and contract.FORMAT_Q8_0 == 0x09
    assert contract.FORMAT_CODES["q4_q8_1"] == 0x05 and contract.FORMAT_CODES["q8_0"] == 0x09
    assert contract.FORMAT_CODES["q4"] == 0x04 and contract.FORMAT_CODES["int8"] == 0x08
    assert contract.BLOCK_FORMATS == (0x05, 0x09) and contract.BLOCK_K == 32
    # the INT8 / ternary frame builder does not offer them (no engine takes them yet)
    with pytest.raises(ValueError, match="fmt must be one of"):
        build_frame(np.zeros(32), np.zeros((1, 32)), "q8_0")


# ------------------------------------------------------------------ Q8_0 rows

def _walk_q8_row(row: np.ndarray, k: int):
    """(codes (K,) int8, d (K/32,) uint16) of one 0x09 row image, read as the layout says:
    per 128 weights a scale beat d0..d3, then 4 code beats per block; fields past K/32 zero."""
    nb = k // 32
    codes, d, pos = [], [], 0
    for g in range(-(-k // 128)):
        nbg = min(4, nb - 4 * g)
        sb = row[pos:pos + 8].view("<u2")
        d += sb[:nbg].tolist()
        assert not sb[nbg:].any()
        pos += 8
        codes += row[pos:pos + 32 * nbg].view(np.int8).tolist()
        pos += 32 * nbg
    assert pos == row.size
    return np.array(codes, np.int8), np.array(d, np.uint16)


@pytest.mark.parametrize("k", [32, 64, 96, 128, 160, 256, 288, 576])
def test_q8_0_row_layout(k):
    rng = np.random.default_rng(k)
    nb = k // 32
    q = rng.integers(-128, 128, size=(3, nb, 32)).astype(np.int8)
    d = rng.integers(0, 0x10000, size=(3, nb)).astype(np.uint16)   # any bits, Inf/NaN too
    rows = q8.pack_q8_0_rows(q, d, k)
    assert rows.shape == (3, 8 * (-(-k // 128) + k // 8)) == (3, q8.q8_row_bytes(k))
    assert q8.q8_row_beats(k) == -(-k // 128) + k // 8
    for r in range(3):
        c, dd = _walk_q8_row(rows[r], k)
        assert np.array_equal(c, q[r].reshape(-1)) and np.array_equal(dd, d[r])
    # (N, K) codes and float16 d give the same image
    assert np.array_equal(q8.pack_q8_0_rows(q.reshape(3, k), d.view(np.float16), k), rows)


def test_raw_block_q8_0_bytes_run_as_stored():
    """A GGUF Q8_0 tensor's raw bytes (34 per block: fp16 d, 32 int8) become row images
    without requantising: every code and every d bit pattern comes back from the image, and
    the host's and golden.blocks' block_q8_0 writers agree byte for byte."""
    rng = np.random.default_rng(1)
    n, k = 5, 320
    w = (rng.standard_normal((n, k)) * 0.05).astype(F32)
    q, d = gb.quantize_q8_0(w)                                 # as llama.cpp writes them
    d[2, 3] = 0x0001                                           # a subnormal d, kept as is
    raw = gb.q8_0_blocks_to_raw(q, d)
    assert raw.shape == (n, 10 * 34)
    assert np.array_equal(q8.q8_0_blocks_to_raw(q, d), raw)
    q2, d2 = q8.q8_0_raw_to_blocks(raw.tobytes(), n, k)
    assert np.array_equal(q2, q) and np.array_equal(d2, d)
    rows = q8.pack_q8_0_rows_raw(raw, n, k)
    assert np.array_equal(rows, q8.pack_q8_0_rows(q, d, k))
    back = []
    for r in range(n):
        c, dd = _walk_q8_row(rows[r], k)
        back.append(np.concatenate([np.concatenate([dd[b:b + 1].astype("<u2").view(np.uint8),
                                                    c[32 * b:32 * b + 32].view(np.uint8)])
                                    for b in range(k // 32)]))
    assert np.array_equal(np.stack(back), raw)
    with pytest.raises(ValueError, match="Q8_0 tensor has"):
        q8.q8_0_raw_to_blocks(raw.tobytes()[:-1], n, k)


# ------------------------------------------------------------------ x scale tables and frames

def test_scale_tables():
    d = np.array([0x1111, 0x2222, 0x3333], np.uint16)
    s = np.array([0xAAAA, 0xBBBB, 0xCCCC], np.uint16)
    t = q8.x_scale_table_q8_1(d, s)
    assert t == bytes.fromhex("1111aaaa2222bbbb3333cccc00000000")
    assert np.frombuffer(t, "<u2").tolist() == [0x1111, 0xAAAA, 0x2222, 0xBBBB,
                                                0x3333, 0xCCCC, 0, 0]
    t0 = q8.x_scale_table_q8_0(np.array([1, 2, 3, 4, 5], np.uint16))
    assert np.frombuffer(t0, "<u2").tolist() == [1, 2, 3, 4, 5, 0, 0, 0]
    assert t[:2] == bytes([0x11, 0x11]) and t0[:2] == bytes([1, 0])   # little-endian
    assert len(q8.x_scale_table_q8_0(np.ones(4, np.uint16))) == 8
    assert len(q8.x_scale_table_q8_1(np.ones(2, np.uint16), np.ones(2, np.uint16))) == 8


@pytest.mark.parametrize("k", [32, 64, 96, 576])
def test_frames_from_either_quantiser_shape(k):
    """The builders take golden.blocks' (nb, 32) codes and hostops' flat (K,) codes alike, and
    lay out header, codes, scale table, rows."""
    rng = np.random.default_rng(k)
    x = rng.standard_normal(k).astype(F32)
    xq, xd, xs = gb.quantize_q8_1(x)
    wq, wd, wm = hostq4.quantize_q4_1((rng.standard_normal((2, k)) * 0.1).astype(F32))
    rows = hostq4.pack_q4_rows(wq, wd, wm, k)
    fr = hostq4.build_q4_q8_1_frame(xq, xd, xs, rows, k, tag=0x7E)
    assert fr == hostq4.build_q4_q8_1_frame(xq.reshape(-1), xd, xs, rows, k, tag=0x7E)
    head = int.from_bytes(fr[:8], "little")
    assert head == 0xB158 | k << 16 | 2 << 32 | 0x05 << 48 | 0x7E << 56
    tb = -(-k // 64) * 8
    assert fr[8:8 + k] == xq.tobytes()
    assert fr[8 + k:8 + k + tb] == q8.x_scale_table_q8_1(xd, xs)
    assert fr[8 + k + tb:] == rows.tobytes() and len(fr) == 8 + k + tb + rows.size
    x0q, x0d = gb.quantize_q8_0(x)
    w8 = q8.pack_q8_0_rows(*gb.quantize_q8_0(np.ones((2, k), F32)), k)
    fr = q8.build_q8_0_frame(x0q, x0d, w8, k, tag=1)
    tb = -(-k // 128) * 8
    assert fr[6] == 0x09 and fr[8:8 + k] == x0q.tobytes()
    assert fr[8 + k:8 + k + tb] == q8.x_scale_table_q8_0(x0d)
    assert fr[8 + k + tb:] == w8.tobytes()
    try:
        from generators.runtime.host import ops as hostops
        hq, hd, hs = hostops.quantise_q8_1(x)
    except (ImportError, OSError):                         # the C library not built
        return
    assert hq.shape == (k,)
    assert hostq4.build_q4_q8_1_frame(hq, hd, hs, rows, k, tag=0x7E) == \
        hostq4.build_q4_q8_1_frame(xq, xd, xs, rows, k, tag=0x7E)


def test_vector_frame_layout():
    """B vectors: the flag, the vectors word, then per vector its codes and its own table."""
    rng = np.random.default_rng(3)
    k = 64
    X = rng.standard_normal((2, k)).astype(F32)
    xq, xd = gb.quantize_q8_0(X)
    rows = q8.pack_q8_0_rows(*gb.quantize_q8_0(np.ones((1, k), F32)), k)
    fr = q8.build_q8_0_frame(xq, xd, rows, k)
    assert fr[6] == 0x89 and int.from_bytes(fr[8:16], "little") == 2
    assert fr[16:16 + k] == xq[0].tobytes() and fr[16 + k:24 + k] == q8.x_scale_table_q8_0(xd[0])
    assert fr[24 + k:24 + 2 * k] == xq[1].tobytes()
    assert fr[24 + 2 * k:32 + 2 * k] == q8.x_scale_table_q8_0(xd[1])
    # (1, nb) d: one vector with the flag
    one = q8.build_q8_0_frame(xq[:1], xd[:1], rows, k)
    assert one[6] == 0x89 and int.from_bytes(one[8:16], "little") == 1
    assert q8.build_q8_0_frame(xq[0], xd[0], rows, k)[6] == 0x09


def test_bad_parameters():
    rng = np.random.default_rng(4)
    xq, xd, xs = gb.quantize_q8_1(rng.standard_normal(64).astype(F32))
    wq, wd, wm = hostq4.quantize_q4_1(np.ones((1, 64), F32))
    rows4 = hostq4.pack_q4_rows(wq, wd, wm, 64)
    for k in (16, 40, 100):                                  # not whole blocks
        with pytest.raises(ValueError, match="not a multiple of 32"):
            hostq4.build_q4_q8_1_frame(np.zeros(k, np.int8), xd, xs, rows4, k)
        with pytest.raises(ValueError, match="not a multiple of 32"):
            q8.build_q8_0_frame(np.zeros(k, np.int8), xd, np.zeros((1, 8), np.uint8), k)
        with pytest.raises(ValueError, match="not a multiple of 32"):
            q8.pack_q8_0_rows(np.zeros((1, k), np.int8), np.zeros((1, 2), np.uint16), k)
    with pytest.raises(ValueError, match="needs the x blocks' s"):
        hostq4.build_q4_q8_1_frame(xq, xd, None, rows4, 64)
    with pytest.raises(ValueError, match="x s of shape"):
        hostq4.build_q4_q8_1_frame(xq, xd, xs[:1], rows4, 64)
    with pytest.raises(ValueError, match="x d of shape"):
        hostq4.build_q4_q8_1_frame(xq, xd[:1], xs[:1], rows4, 64)
    with pytest.raises(ValueError, match="x d of shape"):             # B = 256
        q8.build_q8_0_frame(np.zeros((256, 64), np.int8), np.zeros((256, 2), np.uint16),
                            np.zeros((1, q8.q8_row_bytes(64)), np.uint8), 64)
    with pytest.raises(ValueError, match="x codes must be"):
        hostq4.build_q4_q8_1_frame(xq[:1], xd, xs, rows4, 64)
    with pytest.raises(ValueError, match="-128..127"):
        hostq4.build_q4_q8_1_frame(np.full(64, 200), xd, xs, rows4, 64)
    with pytest.raises(TypeError, match="float16 values or uint16"):
        hostq4.build_q4_q8_1_frame(xq, xd.astype(F32), xs, rows4, 64)
    with pytest.raises(ValueError, match="rows of shape"):
        hostq4.build_q4_q8_1_frame(xq, xd, xs, rows4[:, :-8], 64)
    with pytest.raises(ValueError, match="rows of shape"):
        q8.build_q8_0_frame(xq, xd, rows4, 64)                        # a Q4_1 row in 0x09
    with pytest.raises(ValueError, match="N=0"):
        q8.build_q8_0_frame(xq, xd, np.zeros((0, q8.q8_row_bytes(64)), np.uint8), 64)
    with pytest.raises(ValueError, match="tag"):
        hostq4.build_q4_q8_1_frame(xq, xd, xs, rows4, 64, tag=256)
    with pytest.raises(ValueError, match="codes of shape"):
        q8.pack_q8_0_rows(np.zeros((1, 3, 32), np.int8), np.zeros((1, 3), np.uint16), 64)
    with pytest.raises(ValueError, match="d of shape"):
        q8.pack_q8_0_rows(np.zeros((1, 64), np.int8), np.zeros((1, 3), np.uint16), 64)
    with pytest.raises(ValueError, match="-128..127"):
        q8.pack_q8_0_rows(np.full((1, 64), 128), np.zeros((1, 2), np.uint16), 64)
    with pytest.raises(TypeError):
        q8.check_block_k(64.0)


def test_decode_block_words():
    words = [0xBEC00000, 0x41600000, 0x27800000]
    assert q8.decode_block_words(words).tolist() == [-0.375, 14.0, 2.0 ** -48]
    assert hostq4.decode_block_words is q8.decode_block_words
