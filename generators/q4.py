"""Host side of the Q4_1 lane (`q4-engine`, header format 0x04): row images from llama.cpp
Q4_1 blocks, frames, and the decoding of the result words (docs/q4.md).

Pure numpy; imports nothing from the golden models or the templates.

llama.cpp's ``block_q4_1`` (ggml-common.h), 20 bytes per 32 weights::

    ggml_half d;      // bytes 0-1, fp16
    ggml_half m;      // bytes 2-3, fp16
    uint8_t qs[16];   // weight j (0..15) in the low nibble of qs[j], weight j+16 in its high nibble

    w[j] = d * q[j] + m

The engine's row layout (8-byte beats): per 64 weights (two blocks) one scale beat
``d0 m0 d1 m1`` (fp16, little-endian; d1 m1 zero when the row has no second block there) and
then ceil(remaining/16) (at most four) code beats; code beat c holds weights 16c..16c+15 of the
group, weight 16c+j in nibble j (byte j//2, low nibble first). A row of K weights is
``ceil(K/64) + ceil(K/16)`` beats (5 bits per weight for K a multiple of 64). Codes past K
are written as 0 (the engine reads x past K as zero, so they would not count anyway).

Results: one float32 word per row, ``sum over blocks of d*sum(q*x) + m*sum(x)`` formed exactly
and rounded once to nearest even; x is the INT8 vector of the frame, so the host multiplies by
its activation scale as for INT8 rows.
"""
from __future__ import annotations

from typing import Tuple

import numpy as np
from generators.contract import FORMAT_Q4, FORMAT_Q4_Q8_1, MATRIX_MAGIC, VECTORS_FLAG
from generators.q8 import block_frame, check_block_k, decode_block_words, f16_bits, x_slots

__all__ = ["FORMAT_Q4", "Q4_1_BLOCK_BYTES", "q4_row_beats", "q4_row_bytes",
           "q4_1_blocks_to_raw", "q4_1_raw_to_blocks", "pack_q4_rows", "pack_q4_rows_raw",
           "q4_dequantize", "build_q4_frame", "decode_q4_words", "quantize_q4_1",
           "q4_images", "FORMAT_Q4_Q8_1", "build_q4_q8_1_frame", "decode_block_words"]

Q4_1_BLOCK_BYTES = 20
BLOCK = 32
BEAT = 8
MAGIC = MATRIX_MAGIC


def q4_row_beats(k: int) -> int:
    """Beats of one row of K weights: ceil(K/64) scale beats + ceil(K/16) code beats."""
    if not 1 <= int(k) <= 65535:
        raise ValueError(f"K={k} out of range 1..65535")
    return -(-int(k) // 64) + -(-int(k) // 16)


def q4_row_bytes(k: int) -> int:
    return BEAT * q4_row_beats(k)


def _as_f16_bits(a) -> np.ndarray:
    """fp16 values (float16 array) or their bits (uint16 array) -> uint16 bits."""
    return f16_bits(a, "d and m")


def q4_1_blocks_to_raw(q, d, m) -> np.ndarray:
    """(..., nb, 32) codes and (..., nb) fp16 d, m -> llama.cpp block_q4_1 bytes (..., nb*20)."""
    q = np.asarray(q)
    if q.shape[-1] != BLOCK or np.any(q < 0) or np.any(q > 15):
        raise ValueError("q must be (..., blocks, 32) codes in 0..15")
    d, m = _as_f16_bits(d), _as_f16_bits(m)
    q = q.astype(np.uint8)
    out = np.zeros(q.shape[:-1] + (Q4_1_BLOCK_BYTES,), dtype=np.uint8)
    out[..., 0:2] = d[..., None].view(np.uint8).reshape(d.shape + (2,))
    out[..., 2:4] = m[..., None].view(np.uint8).reshape(m.shape + (2,))
    out[..., 4:] = q[..., :16] | (q[..., 16:] << 4)
    return out.reshape(q.shape[:-2] + (-1,))


def q4_1_raw_to_blocks(raw, n_rows: int, k: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """llama.cpp Q4_1 bytes of an (n_rows, k) tensor (k a multiple of 32, as GGUF requires)
    -> codes (n_rows, k/32, 32) uint8, d and m (n_rows, k/32) uint16 fp16 bits."""
    if k % BLOCK:
        raise ValueError(f"a Q4_1 tensor's row length must be a multiple of 32, not {k}")
    nb = k // BLOCK
    raw = np.frombuffer(bytes(raw), dtype=np.uint8) if not isinstance(raw, np.ndarray) else raw
    raw = raw.reshape(-1)
    if raw.size != n_rows * nb * Q4_1_BLOCK_BYTES:
        raise ValueError(f"{raw.size} bytes, a ({n_rows}, {k}) Q4_1 tensor has "
                         f"{n_rows * nb * Q4_1_BLOCK_BYTES}")
    b = raw.reshape(n_rows, nb, Q4_1_BLOCK_BYTES)
    d = b[..., 0:2].copy().view(np.uint16)[..., 0]
    m = b[..., 2:4].copy().view(np.uint16)[..., 0]
    qs = b[..., 4:]
    q = np.concatenate([qs & 0xF, qs >> 4], axis=-1)
    return q, d, m


def q4_dequantize(q, d, m) -> np.ndarray:
    """float32 weights (..., nb*32) as llama.cpp's dequantize_row_q4_1: d*q + m, each in fp32."""
    d = _as_f16_bits(d).view(np.float16).astype(np.float32)
    m = _as_f16_bits(m).view(np.float16).astype(np.float32)
    w = np.asarray(q).astype(np.float32) * d[..., None] + m[..., None]
    return w.reshape(w.shape[:-2] + (-1,))


def pack_q4_rows(q, d, m, k: int) -> np.ndarray:
    """Engine row images (N, q4_row_bytes(k)) uint8 from (N, ceil(k/32), 32) codes and
    (N, ceil(k/32)) fp16 d and m (float16 values or uint16 bits). Codes past K are dropped."""
    q = np.asarray(q)
    n = q.shape[0]
    nb = -(-int(k) // BLOCK)
    if q.shape != (n, nb, BLOCK):
        raise ValueError(f"codes of shape {q.shape}, K={k} needs ({n}, {nb}, {BLOCK})")
    if np.any(q < 0) or np.any(q > 15):
        raise ValueError("codes must be 0..15")
    d, m = _as_f16_bits(d), _as_f16_bits(m)
    if d.shape != (n, nb) or m.shape != (n, nb):
        raise ValueError(f"d and m must be ({n}, {nb})")
    groups = -(-nb // 2)
    codes = np.zeros((n, groups * 64), dtype=np.uint8)
    codes[:, :k] = q.reshape(n, -1)[:, :k]
    sc = np.zeros((n, groups * 2, 2), dtype=np.uint16)
    sc[:, :nb, 0], sc[:, :nb, 1] = d, m
    scale_beats = sc.reshape(n, groups, 4).view(np.uint8)            # (n, groups, 8)
    nib = codes.reshape(n, groups, 32, 2)
    code_beats = (nib[..., 0] | (nib[..., 1] << 4)).reshape(n, groups, 4, BEAT)
    out = np.zeros((n, q4_row_bytes(k)), dtype=np.uint8)
    pos = 0
    for g in range(groups):
        out[:, pos:pos + BEAT] = scale_beats[:, g]
        pos += BEAT
        c = min(4, -(-(int(k) - 64 * g) // 16))
        out[:, pos:pos + c * BEAT] = code_beats[:, g, :c].reshape(n, -1)
        pos += c * BEAT
    assert pos == out.shape[1]
    return out


def pack_q4_rows_raw(raw, n_rows: int, k: int) -> np.ndarray:
    """Engine row images straight from a GGUF tensor's raw Q4_1 bytes (rows of k weights)."""
    q, d, m = q4_1_raw_to_blocks(raw, n_rows, k)
    return pack_q4_rows(q, d, m, k)


def quantize_q4_1(w) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A simple Q4_1 quantiser for tests and checkpoints without Q4_1 tensors (llama.cpp's
    reference: per block min and (max-min)/15, fp16 d and m, codes round((w-m)/d) in 0..15).
    (N, K), K a multiple of 32 -> (q, d bits, m bits)."""
    w = np.asarray(w, dtype=np.float32)
    n, k = w.shape
    if k % BLOCK:
        raise ValueError("K must be a multiple of 32")
    b = w.reshape(n, k // BLOCK, BLOCK)
    lo, hi = b.min(-1), b.max(-1)
    d = ((hi - lo) / 15).astype(np.float16)
    m = lo.astype(np.float16)
    df = d.astype(np.float32)
    inv = np.where(df > 0, 1 / np.where(df > 0, df, 1), 0)
    q = np.clip(np.round((b - m.astype(np.float32)[..., None]) * inv[..., None]), 0, 15)
    return q.astype(np.uint8), d.view(np.uint16), m.view(np.uint16)


def build_q4_frame(x, rows, k: int, tag: int = 0) -> bytes:
    """Header, x (K INT8 values, zero-padded to a beat), then the row images (N, q4_row_bytes).

    ``x`` of shape (B, K) makes a frame of B vectors (the vectors flag and word, then B x
    slots: docs/vectors.md)."""
    x = np.asarray(x)
    multi = x.ndim == 2
    if (x.shape[-1:] != (k,) or x.ndim not in (1, 2) or (multi and not 1 <= len(x) <= 255)
            or np.any(x < -128) or np.any(x > 127)):
        raise ValueError(f"x must be {k} values in -128..127, or (B, {k}) with 1 <= B <= 255")
    rows = np.asarray(rows, dtype=np.uint8)
    n = rows.shape[0]
    if rows.shape != (n, q4_row_bytes(k)) or not 1 <= n <= 65535:
        raise ValueError(f"rows of shape {rows.shape}, K={k} needs (N, {q4_row_bytes(k)})")
    if not 0 <= tag <= 255:
        raise ValueError("tag out of range 0..255")
    code = FORMAT_Q4 | (VECTORS_FLAG if multi else 0)
    hdr = (MAGIC | k << 16 | n << 32 | code << 48 | tag << 56).to_bytes(8, "little")
    if multi:
        hdr += int(len(x)).to_bytes(8, "little")
    xb = b"".join(v.astype(np.int8).tobytes() + bytes((-k) % BEAT) for v in x.reshape(-1, k))
    return hdr + xb + rows.tobytes()


def build_q4_q8_1_frame(xq, xd, xs, rows, k: int, tag: int = 0) -> bytes:
    """A format 0x05 frame (docs/activations.md section 2): Q8_1 x, as ``quantize_q8_1`` gives
    it (codes, fp16 d and s per block of 32), then the Q4_1 row images (N, q4_row_bytes(k)) of
    :func:`pack_q4_rows` / :func:`pack_q4_rows_raw`, exactly as a 0x04 frame's. K must be a
    multiple of 32. Per vector: its K codes (K/8 beats), then its scale table
    (``generators.q8.x_scale_table_q8_1``: ceil(K/64) beats, beat g = d(2g) s(2g) d(2g+1)
    s(2g+1)). ``xd``, ``xs`` of shape (B, K/32) make a frame of B vectors (the flag and
    vectors word). The results are float32 words (:func:`decode_block_words`), no host scale."""
    k = check_block_k(k)
    if xs is None:
        raise ValueError("a 0x05 frame needs the x blocks' s (quantize_q8_1's third output)")
    xb, nvec = x_slots(xq, xd, xs, k)
    return block_frame(k, FORMAT_Q4_Q8_1, tag, xb, nvec, rows, q4_row_bytes(k))


def decode_q4_words(words) -> np.ndarray:
    """The result words of a Q4 frame (status word excluded) -> float32 values (the same words
    as a 0x05 / 0x09 frame's)."""
    return decode_block_words(words)


def q4_images(raw, names=None):
    """Row images of every Q4_1 matrix of a GGUF checkpoint, once, for the weight file.

    ``raw``: {name: tensor} with ``.qtype`` (GGML type name), ``.shape`` (rows, cols) and
    ``.blocks`` ((rows, bytes per row) uint8, rows in the Hugging Face order), as the GGUF
    reader's ``RawTensor``; ``names``: the matrices wanted (default: all 2-D ones). Returns
    ``(images, other)``: {name: (rows, q4_row_bytes(cols)) uint8} for the Q4_1 tensors, and
    the sorted names of the tensors of any other type (Q8_0, F16, ...), which the runtime runs
    in the nearest format the engines compute (INT8 rows), not on the Q4_1 lane.
    """
    images, other = {}, []
    for name in (sorted(raw) if names is None else names):
        t = raw[name]
        if len(t.shape) != 2:
            continue
        if t.qtype != "Q4_1":
            other.append(name)
            continue
        rows, cols = (int(v) for v in t.shape)
        images[name] = pack_q4_rows_raw(np.asarray(t.blocks, dtype=np.uint8), rows, cols)
    return images, sorted(other)
