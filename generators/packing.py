"""Weight packing, quantisers and stream-frame builders (DESIGN.md section 3).

Pure numpy; imports nothing else from the project, so the golden models and the
cocotb testbenches can both use it.

Ternary packing ("5 trits per byte")
------------------------------------
Byte ``b`` of a row holds weights ``5b .. 5b+4`` as::

    v = sum((w[5b + i] + 1) * 3**i for i in range(5))      # 0 <= v <= 242

so the first weight sits in the least significant base-3 digit. Example from the
write-up: weights ``[0, +1, 0, -1, +1]`` -> digits ``1, 2, 1, 0, 2`` -> byte 178.
Bytes 243..255 are not valid; the hardware decodes them as five zero weights and
raises the BAD_TRIT flag (``unpack_trits(..., strict=False)`` does the same).

Padding: when K is not a multiple of 5 the digits past K in the last byte encode
weight **0** (digit 1), so an unpadded decoder that forgets to mask them still adds
nothing to a dot product.

Empty inputs: K = 0 is not an error for the array functions. ``pack_trits`` of a
``(..., 0)`` array returns a ``(..., 0)`` uint8 array and ``unpack_trits`` of
``(..., 0)`` bytes returns ``(..., 0)`` trits (round trip holds). ``build_frame``
rejects K = 0 (a frame needs 1 <= K <= 65535); use ``header_bytes`` to build
deliberately bad headers for error-path tests.

Frames
------
``build_frame(x, W, fmt)`` lays out a header beat, x zero-padded to a whole beat,
then N rows each padded to a whole beat. ``frame_beats`` cuts the bytes into
little-endian integers (byte j of a beat is ``tdata[8j+7:8j]``).
"""
from __future__ import annotations

import math
from typing import Optional, Tuple, Union

import numpy as np
from generators.contract import (FORMAT_INT8, FORMAT_TERNARY, MATRIX_MAGIC, ROUTE_MAGIC,
                                 VECTORS_FLAG)

__all__ = [
    "MAGIC", "FORMATS", "FORMAT_INT8", "FORMAT_TERNARY", "HEADER_BYTES", "BEAT_BYTES_ALLOWED",
    "TRITS_PER_BYTE", "MAX_VALID_TRIT_BYTE",
    "pack_trits", "unpack_trits", "packed_len",
    "absmean_quantize", "absmax_quantize_activations",
    "header_bytes", "decode_header", "row_bytes", "frame_beat_count", "build_frame",
    "frame_beats", "parse_frame",
]

TRITS_PER_BYTE = 5
MAX_VALID_TRIT_BYTE = 242          # 3**5 - 1
MAGIC = MATRIX_MAGIC
FORMATS = {"int8": FORMAT_INT8, "ternary": FORMAT_TERNARY}
HEADER_BYTES = 8
BEAT_BYTES_ALLOWED = (4, 8, 16)

_POW3 = np.array([1, 3, 9, 27, 81], dtype=np.uint16)


def _build_lut() -> np.ndarray:
    """256 x 5 int8 table: byte value -> five weights (bad bytes -> zeros)."""
    v = np.arange(256, dtype=np.int16)
    lut = np.zeros((256, TRITS_PER_BYTE), dtype=np.int8)
    for i in range(TRITS_PER_BYTE):          # 5 iterations, not per element
        lut[:, i] = (v // (3 ** i)) % 3 - 1
    lut[MAX_VALID_TRIT_BYTE + 1:] = 0
    lut.setflags(write=False)
    return lut


_LUT = _build_lut()


# --------------------------------------------------------------------------- validation

def _as_integral_array(a, what: str, lo: int, hi: int, allowed: Optional[str] = None
                       ) -> np.ndarray:
    """Return ``a`` as an integer array after checking it holds integers in [lo, hi].

    Integer dtypes are accepted as they are; float dtypes only when every value is finite
    and integral. bool, complex, object and string arrays raise TypeError. ``allowed``,
    when given, is used in the error message instead of the range.
    """
    arr = np.asarray(a)
    kind = arr.dtype.kind
    if kind == "b":
        raise TypeError(f"{what}: boolean array not accepted; pass integers")
    if kind not in "iuf":
        raise TypeError(f"{what}: expected an integer (or integral float) array, "
                        f"got dtype {arr.dtype}")
    if kind == "f":
        if arr.size and not np.all(np.isfinite(arr)):
            raise ValueError(f"{what}: contains NaN or infinity")
        if arr.size and not np.all(arr == np.rint(arr)):
            bad = arr[arr != np.rint(arr)].flat[0].item()
            raise ValueError(f"{what}: contains non-integral value {bad!r}")
    if arr.size:
        mn, mx = arr.min(), arr.max()
        if mn < lo or mx > hi:
            bad = (mn if mn < lo else mx).item()
            rng = allowed if allowed is not None else f"{lo}..{hi}"
            raise ValueError(f"{what}: value {bad!r} out of range (allowed {rng})")
    return arr if kind == "i" else arr.astype(np.int64)


def _check_ndim(arr: np.ndarray, what: str) -> None:
    if arr.ndim not in (1, 2):
        raise ValueError(f"{what}: expected a 1-D (K,) or 2-D (N, K) array, "
                         f"got {arr.ndim}-D shape {arr.shape}")


def _check_int(value, what: str, lo: int, hi: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what} must be an integer, got {type(value).__name__}")
    value = int(value)
    if not lo <= value <= hi:
        raise ValueError(f"{what} must be in {lo}..{hi}, got {value}")
    return value


def _check_beat_bytes(beat_bytes) -> int:
    if isinstance(beat_bytes, (bool, np.bool_)) or not isinstance(beat_bytes, (int, np.integer)) \
            or int(beat_bytes) not in BEAT_BYTES_ALLOWED:
        raise ValueError(f"beat_bytes must be one of {BEAT_BYTES_ALLOWED}, got {beat_bytes!r}")
    return int(beat_bytes)


def _fmt_code(fmt) -> int:
    if isinstance(fmt, str) and fmt in FORMATS:
        return FORMATS[fmt]
    raise ValueError(f"fmt must be one of {sorted(FORMATS)}, got {fmt!r}")


# --------------------------------------------------------------------------- trits

def packed_len(k: int) -> int:
    """Number of bytes holding ``k`` trits: ceil(k / 5)."""
    k = _check_int(k, "k", 0, 2 ** 62)
    return -(-k // TRITS_PER_BYTE)


def pack_trits(w) -> np.ndarray:
    """Pack weights in {-1, 0, +1} five to a byte.

    ``w``: 1-D ``(K,)`` or 2-D ``(N, K)`` integer array (integral floats accepted).
    Returns uint8 of shape ``(..., ceil(K/5))``. Digits past K in the last byte encode
    weight 0. K = 0 gives an empty ``(..., 0)`` result.

    Raises TypeError for bool/complex/object/string input, ValueError for NaN/inf,
    non-integral values, values other than -1/0/+1, or ndim not in (1, 2).
    """
    arr = np.asarray(w)
    _check_ndim(arr, "pack_trits")
    arr = _as_integral_array(arr, "pack_trits", -1, 1, allowed="-1, 0, +1")
    k = arr.shape[-1]
    nb = -(-k // TRITS_PER_BYTE)
    digits = np.ones(arr.shape[:-1] + (nb * TRITS_PER_BYTE,), dtype=np.uint8)  # pad = weight 0
    digits[..., :k] = arr + 1
    digits = digits.reshape(arr.shape[:-1] + (nb, TRITS_PER_BYTE))
    v = digits[..., 0].astype(np.uint16)
    for i in range(1, TRITS_PER_BYTE):
        v += digits[..., i] * _POW3[i]
    return v.astype(np.uint8)


def unpack_trits(b, k: Optional[int] = None, *, strict: bool = True,
                 return_mask: bool = False):
    """Inverse of :func:`pack_trits`.

    ``b``: 1-D or 2-D array of byte values 0..255 (any integer dtype). ``k``: the number of
    weights per row; ``None`` means ``5 * nbytes``. ``ceil(k/5)`` must equal the number of
    bytes per row (slice padded rows first). Returns int8 of shape ``(..., k)``.

    Bytes 243..255 are not valid trits: with ``strict=True`` (default) they raise
    ValueError; with ``strict=False`` each decodes as five zero weights, as the hardware
    does (flag BAD_TRIT). With ``return_mask=True`` the result is ``(trits, bad)``, where
    ``bad`` is a bool array of b's shape marking the invalid bytes.
    """
    arr = np.asarray(b)
    _check_ndim(arr, "unpack_trits")
    arr = _as_integral_array(arr, "unpack_trits", 0, 255)
    arr = arr.astype(np.uint8, copy=False)
    nb = arr.shape[-1]
    if k is None:
        k = nb * TRITS_PER_BYTE
    else:
        k = _check_int(k, "k", 0, 2 ** 62)
        if -(-k // TRITS_PER_BYTE) != nb:
            raise ValueError(f"unpack_trits: k={k} needs ceil(k/5)={-(-k // 5)} bytes per row, "
                             f"got {nb}")
    bad = arr > MAX_VALID_TRIT_BYTE
    if strict and bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"unpack_trits: byte {int(arr[idx])} at index {idx} is not a valid "
                         f"packed trit byte (valid 0..{MAX_VALID_TRIT_BYTE}); "
                         f"pass strict=False to decode it as zeros")
    trits = _LUT[arr].reshape(arr.shape[:-1] + (nb * TRITS_PER_BYTE,))[..., :k]
    trits = np.ascontiguousarray(trits)
    return (trits, bad) if return_mask else trits


# --------------------------------------------------------------------------- quantisers

def _as_real_finite(a, what: str) -> np.ndarray:
    arr = np.asarray(a)
    if arr.dtype.kind == "b" or arr.dtype.kind not in "iuf":
        raise TypeError(f"{what}: expected a real numeric array, got dtype {arr.dtype}")
    arr = arr.astype(np.float64, copy=False)
    if arr.size and not np.all(np.isfinite(arr)):
        raise ValueError(f"{what}: contains NaN or infinity")
    return arr


def absmean_quantize(W, eps: float = 1e-5):
    """BitNet b1.58 weight quantiser (per-tensor absmean).

    ``scale = mean(|W|)``; ``trits = clip(rint(W / (scale + eps)), -1, 1)`` (rint rounds
    half to even). Returns ``(trits int8 of W's shape, scale float)`` with
    ``W ~= trits * scale``. All-zero W gives scale 0.0 and all-zero trits; an empty W gives
    an empty trits array and scale 0.0. NaN/inf raise ValueError.
    """
    arr = _as_real_finite(W, "absmean_quantize")
    if isinstance(eps, (bool, np.bool_)) or not isinstance(eps, (int, float, np.floating,
                                                                 np.integer)):
        raise TypeError(f"eps must be a real number, got {type(eps).__name__}")
    eps = float(eps)
    if not math.isfinite(eps) or eps < 0:
        raise ValueError(f"eps must be finite and >= 0, got {eps}")
    if arr.size == 0:
        return np.zeros(arr.shape, dtype=np.int8), 0.0
    scale = float(np.mean(np.abs(arr)))
    if scale == 0.0:
        return np.zeros(arr.shape, dtype=np.int8), 0.0
    trits = np.clip(np.rint(arr / (scale + eps)), -1, 1).astype(np.int8)
    return trits, scale


def absmax_quantize_activations(x):
    """Per-token absmax INT8 activation quantiser (BitNet b1.58).

    ``x``: 1-D (one token) or N-D with the feature axis last (one scale per token).
    ``scale = 127 / max|x|`` over the last axis; ``q = clip(rint(x * scale), -128, 127)``.
    A token that is all zero gets ``scale = 1.0`` (so ``q`` is zero and ``q / scale`` is a
    valid dequantisation). Returns ``(q int8 of x's shape, scale)``: a Python float for
    1-D x, else a float64 array of shape ``x.shape[:-1]``. ``x ~= q / scale``.
    NaN/inf raise ValueError; so do 0-D input, a zero-length feature axis, and a token
    whose max|x| is so tiny (subnormal, < ~7e-307) that the scale overflows.
    """
    arr = _as_real_finite(x, "absmax_quantize_activations")
    if arr.ndim == 0:
        raise ValueError("absmax_quantize_activations: expected at least 1-D input")
    if arr.shape[-1] == 0:
        raise ValueError("absmax_quantize_activations: feature axis (last) is empty")
    amax = np.max(np.abs(arr), axis=-1, keepdims=True)
    safe = np.where(amax > 0, amax, 127.0)
    with np.errstate(over="ignore"):
        scale = 127.0 / safe                           # all-zero token -> 1.0
    if not np.all(np.isfinite(scale)):
        raise ValueError("absmax_quantize_activations: max|x| of a token is so small "
                         f"(< {127.0 / np.finfo(np.float64).max:.3g}) that 127/max|x| "
                         "overflows float64")
    q = np.clip(np.rint(arr * scale), -128, 127).astype(np.int8)
    scale = scale[..., 0]
    if arr.ndim == 1:
        return q, float(scale)
    return q, scale


# --------------------------------------------------------------------------- frames

def header_bytes(k: int, n: int, fmt: Union[str, int], tag: int = 0, *,
                 magic: int = MAGIC, beat_bytes: int = 8, vectors: Optional[int] = None,
                 reserved: int = 0) -> bytes:
    """The header block, zero-padded to a whole number of beats (2 beats when beat_bytes = 4).

    Fields are only checked against their bit widths, so error-path tests can build a
    bad magic, K = 0, N = 0 or an unknown format. ``fmt`` is 'int8', 'ternary' or a raw
    format byte 0..255. ``vectors`` (0..255) sets the format byte's vectors flag and appends
    the vectors word (B in bits [7:0], ``reserved`` in bits [63:8]; docs/vectors.md).
    """
    beat_bytes = _check_beat_bytes(beat_bytes)
    code = fmt if isinstance(fmt, (int, np.integer)) and not isinstance(fmt, bool) \
        else _fmt_code(fmt)
    code = _check_int(code, "format", 0, 0xFF)
    k = _check_int(k, "K", 0, 0xFFFF)
    n = _check_int(n, "N", 0, 0xFFFF)
    tag = _check_int(tag, "tag", 0, 0xFF)
    magic = _check_int(magic, "magic", 0, 0xFFFF)
    if vectors is not None:
        code |= VECTORS_FLAG
    word = magic | (k << 16) | (n << 32) | (code << 48) | (tag << 56)
    hdr = word.to_bytes(HEADER_BYTES, "little")
    if vectors is not None:
        vectors = _check_int(vectors, "vectors", 0, 0xFF)
        reserved = _check_int(reserved, "reserved", 0, (1 << 56) - 1)
        hdr += (vectors | reserved << 8).to_bytes(HEADER_BYTES, "little")
    return hdr + bytes(_round_up(len(hdr), beat_bytes) - len(hdr))


def decode_header(frame: bytes) -> dict:
    """Decode the first 8 bytes of a frame: ``{magic, k, n, format, tag}``."""
    if len(frame) < HEADER_BYTES:
        raise ValueError(f"decode_header: need {HEADER_BYTES} bytes, got {len(frame)}")
    word = int.from_bytes(bytes(frame[:HEADER_BYTES]), "little")
    return {"magic": word & 0xFFFF, "k": (word >> 16) & 0xFFFF, "n": (word >> 32) & 0xFFFF,
            "format": (word >> 48) & 0xFF, "tag": (word >> 56) & 0xFF}


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def row_bytes(k: int, fmt: str) -> int:
    """Payload bytes of one row before beat padding: K (int8) or ceil(K/5) (ternary)."""
    k = _check_int(k, "K", 0, 0xFFFF)
    return k if _fmt_code(fmt) == FORMAT_INT8 else -(-k // TRITS_PER_BYTE)


def frame_beat_count(k: int, n: int, fmt: str, beat_bytes: int = 8,
                     vectors: Optional[int] = None) -> int:
    """Beats in a frame: ceil(8/b) + ceil(K/b) + N * ceil(row_bytes/b) for b-byte beats; with
    ``vectors`` = B (docs/vectors.md): ceil(16/b) + B * ceil(K/b) + N * ceil(row_bytes/b)."""
    beat_bytes = _check_beat_bytes(beat_bytes)
    n = _check_int(n, "N", 0, 0xFFFF)
    rb = row_bytes(k, fmt)
    if vectors is None:
        return (-(-HEADER_BYTES // beat_bytes) + -(-int(k) // beat_bytes)
                + n * -(-rb // beat_bytes))
    return (-(-2 * HEADER_BYTES // beat_bytes) + vectors * -(-int(k) // beat_bytes)
            + n * -(-rb // beat_bytes))


PadFill = Union[None, int, np.random.Generator]


def build_frame(x, W, fmt: str, tag: int = 0, beat_bytes: int = 8, *,
                pad_fill: PadFill = None, pad_x: bool = False,
                pad_valid_trits: bool = False) -> bytes:
    """Build one input frame for the INT8 or ternary matrix-vector engine.

    ``x``: K values in -128..127, or ``(B, K)``: B activation vectors, which makes a frame of
    B vectors (the vectors flag and word, B x slots: docs/vectors.md; a (1, K) x gives a
    B = 1 frame with the flag). ``W``: ``(N, K)``; int8 values for ``fmt='int8'``, trits
    (-1/0/+1, unpacked) for ``fmt='ternary'``. 1 <= K, N <= 65535, tag 0..255,
    beat_bytes in (4, 8, 16). Returns ``frame_beat_count(K, N, fmt, beat_bytes[, B]) *
    beat_bytes`` bytes.

    ``pad_fill`` controls the row padding bytes (the engine must ignore them):
      * ``None`` (default): zeros; ternary digits past K encode weight 0.
      * int 0..255: every row padding byte takes this value (ternary digits past K stay 0).
      * ``np.random.Generator``: random bytes 0..255; for ternary also random digits
        (0..2) past K inside the last packed byte (that byte stays a valid 0..242), and the
        padding bytes past ceil(K/5) may be 243..255 unless ``pad_valid_trits=True``.
    ``pad_x=True`` applies the same fill to x's padding (past K) too; by default x is
    zero-padded as DESIGN.md section 3 states. The header padding (beat_bytes 16) is
    always zero.
    """
    beat_bytes = _check_beat_bytes(beat_bytes)
    code = _fmt_code(fmt)
    tag = _check_int(tag, "tag", 0, 0xFF)
    xa = np.asarray(x)
    if xa.ndim not in (1, 2) or (xa.ndim == 2 and not 1 <= xa.shape[0] <= 0xFF):
        raise ValueError(f"build_frame: x must be (K,) or (B, K) with 1 <= B <= 255, got shape "
                         f"{xa.shape}")
    vectors = xa.shape[0] if xa.ndim == 2 else None
    xa = _as_integral_array(xa, "build_frame x", -128, 127).reshape(vectors or 1, xa.shape[-1])
    Wa = np.asarray(W)
    if Wa.ndim != 2:
        raise ValueError(f"build_frame: W must be 2-D (N, K), got shape {Wa.shape}")
    n, k = Wa.shape
    if k != xa.shape[1]:
        raise ValueError(f"build_frame: W has K={k} columns but x has {xa.shape[1]} elements")
    _check_int(k, "K", 1, 0xFFFF)
    _check_int(n, "N", 1, 0xFFFF)
    if pad_fill is not None and not isinstance(pad_fill, np.random.Generator):
        pad_fill = _check_int(pad_fill, "pad_fill", 0, 0xFF)
    rng = pad_fill if isinstance(pad_fill, np.random.Generator) else None

    def fill(shape, hi=255) -> np.ndarray:
        if pad_fill is None:
            return np.zeros(shape, dtype=np.uint8)
        if rng is not None:
            return rng.integers(0, hi + 1, size=shape, dtype=np.uint8)
        return np.full(shape, pad_fill, dtype=np.uint8)

    # x (each vector), padded to a whole beat
    xbytes = _round_up(k, beat_bytes)
    xbuf = fill((len(xa), xbytes)) if pad_x else np.zeros((len(xa), xbytes), dtype=np.uint8)
    xbuf[:, :k] = xa.astype(np.int8).view(np.uint8)

    # rows
    if code == FORMAT_INT8:
        Wi = _as_integral_array(Wa, "build_frame W (int8)", -128, 127)
        payload = Wi.astype(np.int8).view(np.uint8)
    else:
        Wt = _as_integral_array(Wa, "build_frame W (ternary)", -1, 1, allowed="-1, 0, +1")
        if rng is not None and k % TRITS_PER_BYTE:
            # random digits past K in the last packed byte
            nb = -(-k // TRITS_PER_BYTE)
            ext = np.empty((n, nb * TRITS_PER_BYTE), dtype=np.int8)
            ext[:, :k] = Wt
            ext[:, k:] = rng.integers(-1, 2, size=(n, nb * TRITS_PER_BYTE - k), dtype=np.int8)
            payload = pack_trits(ext)
        else:
            payload = pack_trits(Wt)
    rb = payload.shape[1]
    rstride = _round_up(rb, beat_bytes)
    rows = fill((n, rstride), MAX_VALID_TRIT_BYTE if (pad_valid_trits and code ==
                                                      FORMAT_TERNARY) else 255)
    rows[:, :rb] = payload
    return (header_bytes(k, n, code, tag, beat_bytes=beat_bytes, vectors=vectors)
            + xbuf.tobytes() + rows.tobytes())


def frame_beats(frame_bytes: bytes, beat_bytes: int = 8) -> list:
    """Split a frame into beats: a list of Python ints, byte j of a beat in bits 8j+7..8j."""
    beat_bytes = _check_beat_bytes(beat_bytes)
    buf = bytes(frame_bytes)
    if len(buf) % beat_bytes:
        raise ValueError(f"frame_beats: length {len(buf)} is not a multiple of "
                         f"beat_bytes={beat_bytes}")
    if beat_bytes == 16:
        a = np.frombuffer(buf, dtype="<u8").reshape(-1, 2)
        return [lo | (hi << 64) for lo, hi in a.tolist()]
    return np.frombuffer(buf, dtype="<u4" if beat_bytes == 4 else "<u8").tolist()


def parse_frame(frame_bytes: bytes, beat_bytes: int = 8, *, strict: bool = True) -> dict:
    """Inverse of :func:`build_frame` (for golden models and tests).

    Returns ``{magic, k, n, format, tag, fmt, x (int8 (K,)), w (int8 (N, K)), bad_trit}``.
    ``w`` holds int8 weights or trits; padding is ignored. ``bad_trit`` is True when a
    ternary byte within ceil(K/5) was 243..255 (only possible with ``strict=False``; those
    bytes decode as zeros). Raises ValueError for a bad magic/format, K or N of 0, or a
    length different from the header's.
    """
    beat_bytes = _check_beat_bytes(beat_bytes)
    buf = bytes(frame_bytes)
    h = decode_header(buf)
    if h["magic"] != MAGIC:
        raise ValueError(f"parse_frame: bad magic 0x{h['magic']:04X}")
    inv = {v: s for s, v in FORMATS.items()}
    if h["format"] not in inv:
        raise ValueError(f"parse_frame: unknown format 0x{h['format']:02X}")
    k, n, fmt = h["k"], h["n"], inv[h["format"]]
    if k == 0 or n == 0:
        raise ValueError(f"parse_frame: K={k}, N={n} (both must be >= 1)")
    want = frame_beat_count(k, n, fmt, beat_bytes) * beat_bytes
    if len(buf) != want:
        raise ValueError(f"parse_frame: frame is {len(buf)} bytes, header implies {want}")
    off = _round_up(HEADER_BYTES, beat_bytes)
    data = np.frombuffer(buf, dtype=np.uint8)
    x = data[off:off + k].view(np.int8).copy()
    off += _round_up(k, beat_bytes)
    rb = row_bytes(k, fmt)
    rows = data[off:].reshape(n, _round_up(rb, beat_bytes))[:, :rb]
    bad = False
    if fmt == "int8":
        w = rows.view(np.int8).copy()
    else:
        w, mask = unpack_trits(rows, k, strict=strict, return_mask=True)
        bad = bool(mask.any())
    return dict(h, fmt=fmt, x=x, w=w, bad_trit=bad)


# --------------------------------------------------------------------------- overlay (two ports)
OVERLAY_ROUTE_MAGIC = ROUTE_MAGIC


def route_word(context: int, tag: int) -> int:
    """Port 1's first word of an attention frame's odd half (docs/overlay.md): [15:0] 0xA77F,
    [31:16] L, [63:56] the tag, other bits 0."""
    return OVERLAY_ROUTE_MAGIC | ((context & 0xFFFF) << 16) | ((tag & 0xFF) << 56)


def split_attention_frame(frame: bytes, context: int = 0, tag: int = 0) -> Tuple[bytes, bytes]:
    """Split a 16-byte-beat attention frame into the two DMA halves of the overlay
    (docs/overlay.md): port 0 gets bytes 16i..16i+7 of every beat (the header word with
    magic 0xA77E first), port 1 a route word ([15:0] 0xA77F, [31:16] L, [63:56] tag) followed by
    bytes 16i+8..16i+15. Each half ends with tlast on its last word.

    The runtime splits only the header block and q this way (its K and V rows already live in
    DMA memory split by port, docs/runtime.md); the one definition of the split."""
    if len(frame) % 16:
        raise ValueError(f"attention frame of {len(frame)} bytes is not whole 16-byte beats")
    w = np.frombuffer(bytes(frame), "<u8").reshape(-1, 2)
    return w[:, 0].tobytes(), route_word(context, tag).to_bytes(8, "little") + w[:, 1].tobytes()
