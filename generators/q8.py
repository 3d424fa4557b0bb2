"""Host side of the per-block activation formats (issue 32, docs/activations.md section 2):
x as ggml's Q8_1 / Q8_0 blocks (codes and an x scale table per vector), llama.cpp Q8_0 rows
for format 0x09, the frames of formats 0x05 (Q4_1 rows x Q8_1 x, the Q4_1 lane; its builder is
``generators.q4.build_q4_q8_1_frame``) and 0x09 (Q8_0 rows x Q8_0 x, the INT8 lane), and the
decoding of their result words.

Pure numpy; imports nothing from the golden models or the templates. The x blocks come from
ggml's reference quantisers: ``generators.golden.blocks.quantize_q8_1`` / ``quantize_q8_0``
(codes (nb, 32), fp16 bits (nb,)) or the host kernels ``hostops.quantise_q8_1`` /
``quantise_q8_0`` (codes (K,), fp16 bits (nb,)); both shapes are taken here.

llama.cpp's ``block_q8_0`` (ggml-common.h), 34 bytes per 32 weights::

    ggml_half d;      // bytes 0-1, fp16
    int8_t qs[32];    // weight j in qs[j]
    w[j] = d * qs[j]

Frame (8-byte beats; K a multiple of 32, any other K is a ValueError here and BAD_SHAPE in the
engine)::

    header beat        magic 0xB158, K, N, format 0x05 / 0x09 (| 0x80 with B > 1 vectors), tag
    [vectors word]     B, only with the flag (docs/vectors.md)
    per vector v:      x codes: K int8 (K/8 beats, whole since K is a multiple of 32)
                       x scale table, fp16 little-endian, fields of blocks past K/32 zero:
                         0x05: ceil(K/64) beats, beat g = d(2g) s(2g) d(2g+1) s(2g+1)
                         0x09: ceil(K/128) beats, beat g = d(4g) d(4g+1) d(4g+2) d(4g+3)
    N rows             0x05: Q4_1 rows as format 0x04 (docs/q4.md)
                       0x09: per 128 weights one scale beat d0 d1 d2 d3 (fp16, zero past K/32)
                             then 4 code beats per block of the group (block j of the group
                             in code beats 4j..4j+3, its weight 8c+i in byte i of code beat
                             4j+c, as block_q8_0's qs); the last group only as long as its
                             blocks:
                             ceil(K/128) + K/8 beats per row

Results: one float32 word per row and vector (vector 0 first), the block formula formed exactly
and rounded once to nearest even (docs/activations.md section 3): no host scale follows, the
x and row scales are in the frame.
"""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np
from generators.contract import (BLOCK_K, FORMAT_Q4_Q8_1, FORMAT_Q8_0, MATRIX_MAGIC,
                                 VECTORS_FLAG)

__all__ = ["FORMAT_Q4_Q8_1", "FORMAT_Q8_0", "Q8_0_BLOCK_BYTES", "check_block_k",
           "x_scale_table_q8_1", "x_scale_table_q8_0", "x_slots", "q8_row_beats",
           "q8_row_bytes", "q8_0_blocks_to_raw", "q8_0_raw_to_blocks", "pack_q8_0_rows",
           "pack_q8_0_rows_raw", "build_q8_0_frame", "block_frame_header",
           "decode_block_words"]

Q8_0_BLOCK_BYTES = 34
BLOCK = BLOCK_K
BEAT = 8


def check_block_k(k) -> int:
    """K of a 0x05 / 0x09 frame: an integer 32..65504, a multiple of 32."""
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"K must be an integer, got {type(k).__name__}")
    k = int(k)
    if not 1 <= k <= 65535:
        raise ValueError(f"K={k} out of range 1..65535")
    if k % BLOCK:
        raise ValueError(f"K={k} is not a multiple of {BLOCK}: formats 0x05 and 0x09 carry "
                         f"whole blocks of {BLOCK} (GGUF's rows are)")
    return k


def f16_bits(a, what: str) -> np.ndarray:
    """fp16 values (float16) or their bits (uint16) -> uint16 bits."""
    a = np.asarray(a)
    if a.dtype == np.float16:
        return a.view(np.uint16)
    if a.dtype == np.uint16:
        return a
    raise TypeError(f"{what} must be float16 values or uint16 fp16 bits, not {a.dtype}")


def _scale_fields(fields, per_beat: int) -> bytes:
    """(nb, f) uint16 fields per block -> beats of per_beat blocks, zero past the last block."""
    nb, f = fields.shape
    beats = -(-nb // per_beat)
    t = np.zeros((beats * per_beat, f), dtype="<u2")
    t[:nb] = fields
    return t.tobytes()


def x_scale_table_q8_1(d, s) -> bytes:
    """A 0x05 frame's x scale table of one vector: fp16 d, s (nb,) -> ceil(nb/2) beats,
    beat g = d(2g) s(2g) d(2g+1) s(2g+1), little-endian (a Q4_1 row's scale beat, byte for
    byte); the fields of a block past the last are zero."""
    d, s = f16_bits(d, "d"), f16_bits(s, "s")
    if d.ndim != 1 or d.shape != s.shape or d.size == 0:
        raise ValueError(f"d and s must be two (nb,) arrays, got {d.shape} and {s.shape}")
    return _scale_fields(np.stack([d, s], axis=1), 2)


def x_scale_table_q8_0(d) -> bytes:
    """A 0x09 frame's x scale table of one vector: fp16 d (nb,) -> ceil(nb/4) beats,
    beat g = d(4g) d(4g+1) d(4g+2) d(4g+3); the fields past the last block are zero."""
    d = f16_bits(d, "d")
    if d.ndim != 1 or d.size == 0:
        raise ValueError(f"d must be a (nb,) array, got {d.shape}")
    return _scale_fields(d[:, None], 4)


def x_slots(xq, xd, xs, k: int) -> Tuple[bytes, Optional[int]]:
    """The x part of a 0x05 (``xs`` given) or 0x09 (``xs`` None) frame and its B.

    ``xd`` (and ``xs``) of shape (nb,) is one vector (no vectors flag, B None); (B, nb) is B
    vectors, 1 <= B <= 255 (the flag and vectors word, even for B = 1). ``xq``: that vector's
    or those vectors' K codes, in any shape of B*K int8 values (quantize_q8_1's (nb, 32),
    hostops' (K,), (B, K), (B, nb, 32))."""
    k = check_block_k(k)
    nb = k // BLOCK
    xd = f16_bits(xd, "x d")
    multi = xd.ndim == 2
    if xd.shape[-1:] != (nb,) or xd.ndim not in (1, 2) or (multi and not 1 <= len(xd) <= 255):
        raise ValueError(f"x d of shape {xd.shape}: K={k} needs ({nb},) or (B, {nb}) with "
                         "1 <= B <= 255")
    nvec = len(xd) if multi else 1
    xd = xd.reshape(nvec, nb)
    if xs is not None:
        xs = f16_bits(xs, "x s")
        if xs.shape != (xd.shape if multi else (nb,)):
            raise ValueError(f"x s of shape {xs.shape}, x d of shape "
                             f"{xd.shape if multi else (nb,)}: they must match")
        xs = xs.reshape(nvec, nb)
    xq = np.asarray(xq)
    if xq.dtype.kind not in "iu" or xq.size != nvec * k:
        raise ValueError(f"x codes must be {nvec} x {k} integers (dtype {xq.dtype}, "
                         f"{xq.size} values)")
    if xq.size and (xq.min() < -128 or xq.max() > 127):
        raise ValueError("x codes must be in -128..127")
    xq = xq.reshape(nvec, k).astype(np.int8)
    out = []
    for v in range(nvec):
        out.append(xq[v].tobytes())                         # K/8 whole beats
        out.append(x_scale_table_q8_1(xd[v], xs[v]) if xs is not None
                   else x_scale_table_q8_0(xd[v]))
    return b"".join(out), (nvec if multi else None)


def block_frame_header(k: int, n: int, code: int, tag: int, vectors: Optional[int]) -> bytes:
    """Header beat (and the vectors word when ``vectors`` is not None) of a 0x05 / 0x09 frame."""
    if not 1 <= int(n) <= 65535:
        raise ValueError(f"N={n} out of range 1..65535")
    if isinstance(tag, bool) or not 0 <= int(tag) <= 255:
        raise ValueError(f"tag {tag!r} out of range 0..255")
    code |= VECTORS_FLAG if vectors is not None else 0
    hdr = (MATRIX_MAGIC | int(k) << 16 | int(n) << 32 | code << 48 | int(tag) << 56)
    out = hdr.to_bytes(BEAT, "little")
    if vectors is not None:
        out += int(vectors).to_bytes(BEAT, "little")
    return out


# ----------------------------------------------------------------------------- Q8_0 rows

def q8_row_beats(k: int) -> int:
    """Beats of one Q8_0 row of K weights (K a multiple of 32): ceil(K/128) scale beats and
    K/8 code beats (34 bytes per 32 weights as block_q8_0, plus the last group's zero fields)."""
    k = check_block_k(k)
    return -(-k // 128) + k // BEAT


def q8_row_bytes(k: int) -> int:
    return BEAT * q8_row_beats(k)


def q8_0_blocks_to_raw(q, d) -> np.ndarray:
    """(..., nb, 32) int8 codes and (..., nb) fp16 d (float16 or bits) -> llama.cpp block_q8_0
    bytes (..., nb * 34)."""
    q = np.asarray(q)
    if q.shape[-1:] != (BLOCK,) or q.dtype.kind not in "iu" or (
            q.size and (q.min() < -128 or q.max() > 127)):
        raise ValueError("q must be (..., blocks, 32) integers in -128..127")
    d = f16_bits(d, "d")
    if d.shape != q.shape[:-1]:
        raise ValueError(f"d of shape {d.shape}, codes of shape {q.shape}")
    out = np.concatenate([d.astype("<u2")[..., None].view(np.uint8),
                          q.astype(np.int8).view(np.uint8)], axis=-1)
    return out.reshape(q.shape[:-2] + (-1,))


def q8_0_raw_to_blocks(raw, n_rows: int, k: int) -> Tuple[np.ndarray, np.ndarray]:
    """llama.cpp Q8_0 bytes of an (n_rows, k) tensor (k a multiple of 32) -> codes
    (n_rows, k/32, 32) int8 and d (n_rows, k/32) uint16 fp16 bits, as stored."""
    k = check_block_k(k)
    nb = k // BLOCK
    raw = (np.frombuffer(bytes(raw), dtype=np.uint8) if not isinstance(raw, np.ndarray)
           else np.ascontiguousarray(raw, dtype=np.uint8)).reshape(-1)
    if raw.size != n_rows * nb * Q8_0_BLOCK_BYTES:
        raise ValueError(f"{raw.size} bytes, a ({n_rows}, {k}) Q8_0 tensor has "
                         f"{n_rows * nb * Q8_0_BLOCK_BYTES}")
    b = raw.reshape(n_rows, nb, Q8_0_BLOCK_BYTES)
    d = b[..., 0:2].copy().view("<u2")[..., 0].astype(np.uint16)
    q = b[..., 2:].copy().view(np.int8)
    return q, d


def pack_q8_0_rows(q, d, k: int) -> np.ndarray:
    """Engine row images (N, q8_row_bytes(k)) uint8 of format 0x09 from codes (N, K/32, 32) or
    (N, K) int8 and (N, K/32) fp16 d (float16 values or uint16 bits), without requantising."""
    k = check_block_k(k)
    nb = k // BLOCK
    q = np.asarray(q)
    n = q.shape[0] if q.ndim else 0
    if q.shape not in ((n, nb, BLOCK), (n, k)) or not 1 <= n <= 65535:
        raise ValueError(f"codes of shape {q.shape}, K={k} needs (N, {nb}, {BLOCK}) or (N, {k})")
    if q.dtype.kind not in "iu" or q.min() < -128 or q.max() > 127:
        raise ValueError("codes must be integers in -128..127")
    d = f16_bits(d, "d")
    if d.shape != (n, nb):
        raise ValueError(f"d of shape {d.shape}, needs ({n}, {nb})")
    codes = q.reshape(n, k).astype(np.int8).view(np.uint8)
    groups = -(-nb // 4)
    sc = np.zeros((n, groups * 4), dtype="<u2")
    sc[:, :nb] = d
    out = np.zeros((n, q8_row_bytes(k)), dtype=np.uint8)
    pos = 0
    for g in range(groups):
        out[:, pos:pos + BEAT] = np.ascontiguousarray(sc[:, 4 * g:4 * g + 4]).view(np.uint8)
        pos += BEAT
        w = min(128, k - 128 * g)                            # the group's weights: 32..128
        out[:, pos:pos + w] = codes[:, 128 * g:128 * g + w]
        pos += w
    assert pos == out.shape[1]
    return out


def pack_q8_0_rows_raw(raw, n_rows: int, k: int) -> np.ndarray:
    """Engine row images straight from a GGUF tensor's raw Q8_0 bytes (rows of k weights)."""
    q, d = q8_0_raw_to_blocks(raw, n_rows, k)
    return pack_q8_0_rows(q, d, k)


def build_q8_0_frame(xq, xd, rows, k: int, tag: int = 0) -> bytes:
    """A format 0x09 frame: Q8_0 x (codes and fp16 d per block, as ``quantize_q8_0`` gives
    them) and the row images (N, q8_row_bytes(k)) of :func:`pack_q8_0_rows`. ``xd`` of shape
    (B, K/32) makes a frame of B vectors (the flag and vectors word; each vector's codes, then
    its own scale table)."""
    k = check_block_k(k)
    xb, nvec = x_slots(xq, xd, None, k)
    return block_frame(k, FORMAT_Q8_0, tag, xb, nvec, rows, q8_row_bytes(k))


def block_frame(k: int, code: int, tag: int, xb: bytes, nvec: Optional[int], rows,
                row_bytes: int) -> bytes:
    """A 0x05 / 0x09 frame from its x slots (:func:`x_slots`) and row images (N, row_bytes)."""
    rows = np.asarray(rows)
    n = rows.shape[0] if rows.ndim == 2 else 0
    if rows.shape != (n, row_bytes) or rows.dtype != np.uint8:
        raise ValueError(f"rows of shape {rows.shape} ({rows.dtype}), K={k} needs uint8 "
                         f"(N, {row_bytes})")
    return block_frame_header(k, n, code, tag, nvec) + xb + rows.tobytes()


def decode_block_words(words) -> np.ndarray:
    """The result words of a 0x05 or 0x09 frame (status word excluded) -> float32 values."""
    return np.asarray(words, dtype=np.uint32).view(np.float32)
