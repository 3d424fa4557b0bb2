"""Format 0x09 frames for the cocotb benches (Q8_0 rows with Q8_0 x blocks, docs/activations.md
section 2): the INT8 lane's per-block format, taken by `mv-engine` q4=true (the manifest's
`block_formats`).

Frames come from the host builders of generators.q8 (build_q8_0_frame, pack_q8_0_rows and,
through llama.cpp's block_q8_0 bytes, pack_q8_0_rows_raw), x from ggml's reference quantiser
(generators.golden.blocks.quantize_q8_0) or drawn codes and fp16 scales; the benches compare
every word with generators.golden.mv (q8_0_frame), which reads the frame bytes itself.
"""
from __future__ import annotations

import random
from typing import Optional, Tuple

import numpy as np

from generators.golden import blocks as gblocks
from generators.q8 import (build_q8_0_frame, pack_q8_0_rows, pack_q8_0_rows_raw,
                           q8_0_blocks_to_raw, q8_row_beats)

FORMAT = 0x09
F16_MAX, F16_MIN_SUB, F16_INF, F16_NAN = 0x7BFF, 0x0001, 0x7C00, 0x7E00
#: fp16 extremes: the largest, both signs; the smallest subnormal, both signs; the largest
#: subnormal; zero, both signs; the smallest normal; 1.0 and -1.0
F16_EXTREMES = np.array([F16_MAX, F16_MAX | 0x8000, F16_MIN_SUB, 0x8001, 0x03FF, 0, 0x8000,
                         0x0400, 0x3C00, 0xBC00], dtype=np.uint16)


def f16_scales(nprng: np.random.Generator, shape, kind: str = "mixed") -> np.ndarray:
    """fp16 bit patterns: 'typical' (a trained model's steps, normal(0, 0.01)), 'wild' (any
    finite exponent, either sign, subnormals and zero), 'extreme' (F16_EXTREMES), or per row
    (first axis) one of 'typical' and 'wild'."""
    typical = nprng.normal(0, 0.01, size=shape).astype(np.float16).view(np.uint16)
    e = nprng.integers(0, 31, size=shape, dtype=np.uint16)
    wild = ((nprng.integers(0, 2, size=shape, dtype=np.uint16) << 15) | (e << 10)
            | nprng.integers(0, 1024, size=shape, dtype=np.uint16))
    if kind == "typical":
        return typical
    if kind == "wild":
        return wild
    if kind == "extreme":
        return nprng.choice(F16_EXTREMES, size=shape).astype(np.uint16)
    pick = nprng.random(shape[:1]) < 0.5
    return np.where(pick.reshape((-1,) + (1,) * (len(shape) - 1)), typical, wild).astype(np.uint16)


def x_q80(nprng: np.random.Generator, k: int, b: Optional[int] = None,
          xkind: str = "quantised") -> Tuple[np.ndarray, np.ndarray]:
    """Q8_0 x of one vector (b None: codes (K,), d (K/32,)) or b vectors ((b, K), (b, K/32)).
    'quantised': float x (normal, one outlier channel of 100x, sometimes a zero block) through
    ggml's quantize_row_q8_0_ref; 'wild': random codes and wild fp16 d; 'extreme': codes of
    -128, 127, -1, 0 and d among F16_EXTREMES."""
    shape = (k,) if b is None else (b, k)
    nb = k // 32
    sshape = shape[:-1] + (nb,)
    if xkind == "quantised":
        x = nprng.normal(0, 1, size=shape).astype(np.float32)
        x[..., nprng.integers(0, k)] *= 100
        if nb > 1 and nprng.random() < 0.3:
            z = nprng.integers(0, nb)
            x[..., 32 * z:32 * z + 32] = 0                  # a zero block: d = 0
        q, d = gblocks.quantize_q8_0(x)
        return q.reshape(shape), d
    if xkind == "wild":
        return (nprng.integers(-128, 128, size=shape, dtype=np.int8),
                f16_scales(nprng, sshape, "wild"))
    return (nprng.choice(np.array([-128, 127, -1, 0], np.int8), size=shape),
            f16_scales(nprng, sshape, "extreme"))


def frame_q80(rng: random.Random, nprng: np.random.Generator, k: int, n: int,
              tag: Optional[int] = None, x=None, q=None, d=None, kind: str = "mixed",
              xkind: Optional[str] = None, b: Optional[int] = None,
              via_raw: Optional[bool] = None) -> bytes:
    """A 0x09 frame of K x N (K a multiple of 32). ``x``: (codes, d) or drawn by x_q80(xkind);
    ``q`` (N, K/32, 32) int8 row codes (random by default), ``d`` (N, K/32) fp16 bits (drawn by
    f16_scales(kind)); ``b`` None: one vector without the flag, an int: B vectors with it.
    Rows through llama.cpp's block_q8_0 bytes half the time (``via_raw``)."""
    nb = k // 32
    xkind = rng.choice(["quantised", "quantised", "wild"]) if xkind is None else xkind
    xq, xd = x_q80(nprng, k, b, xkind) if x is None else x
    xd = np.asarray(xd)
    if b is not None and xd.ndim == 1:
        xd = xd[None]
    q = nprng.integers(-128, 128, size=(n, nb, 32), dtype=np.int8) if q is None else q
    d = f16_scales(nprng, (n, nb), kind) if d is None else d
    tag = rng.randrange(256) if tag is None else tag
    via_raw = rng.random() < 0.5 if via_raw is None else via_raw
    if via_raw:
        rows = pack_q8_0_rows_raw(q8_0_blocks_to_raw(q, d), n, k)
    else:
        rows = pack_q8_0_rows(q, d, k)
    return build_q8_0_frame(xq, xd, rows, k, tag)


def frame_beats_q80(k: int, n: int, b: Optional[int] = None) -> int:
    """8-byte beats of a 0x09 frame: the header (and vectors word), per vector K/8 code beats
    and ceil(K/128) table beats, N rows."""
    return (1 if b is None else 2) + (b or 1) * (k // 8 + -(-k // 128)) + n * q8_row_beats(k)


def q80_ks(max_k: int):
    """K of 0x09 frames: multiples of 32 up to max_k, last groups of one, two, three and four
    blocks (K mod 128 = 32, 64, 96, 0), SmolLM2's 576 and 1536 where max_k allows."""
    ks = [k for k in (32, 64, 96, 128, 160, 224, 288, 576, 1536, max_k // 32 * 32)
          if 32 <= k <= max_k]
    return sorted(set(ks))
