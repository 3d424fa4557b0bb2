"""Bit-exact numpy golden model of the GQA attention engine (docs/attention.md).

The model shares no code with the Verilog templates; the only generator module it imports is
``generators.attention_tables``, the single source of the exp table contents.

Main entry points:

* :class:`AttentionConfig`   the generator parameters the model depends on,
* :func:`score_multiplier`   host side: real score scale -> header (MULT, SHIFT),
* :func:`attention_core`     the integer arithmetic, every intermediate returned,
* :func:`attention_frame`    one good frame -> the output words, status word included,
* :func:`build_attention_frame`, :func:`frame_to_beats`  the frame builder,
* :func:`stream_outputs`, :func:`attention_stream`  the engine on raw beats with ``tlast``,
* :func:`decode_output`, :func:`dequantise`  output words -> INT8, scales, real values,
* :func:`float_attention`    float64 softmax attention on the same INT8 inputs.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Iterable, Sequence

import numpy as np

from generators.attention_tables import check_table_params, exp_table
from generators.contract import ATTENTION_MAGIC

__all__ = [
    "MAGIC", "MAX_SHIFT", "MULT_BITS",
    "FLAG_BAD_MAGIC", "FLAG_BAD_SHAPE", "FLAG_BAD_FORMAT", "FLAG_SHORT_FRAME",
    "FLAG_LONG_FRAME",
    "AttentionConfig", "DEFAULT_CONFIG", "score_multiplier", "score_scale", "attention_core",
    "kv_widths_ok",
    "attention_frame", "status_word", "pack_header", "build_attention_frame",
    "frame_to_beats", "frame_beat_count", "output_word_count", "frame_output",
    "stream_outputs", "attention_stream", "decode_output", "dequantise", "float_attention",
]

MAGIC = ATTENTION_MAGIC
MULT_BITS = 16
MAX_SHIFT = 47

FLAG_BAD_MAGIC = 1 << 0
FLAG_BAD_SHAPE = 1 << 1
FLAG_BAD_FORMAT = 1 << 2
FLAG_SHORT_FRAME = 1 << 3
FLAG_LONG_FRAME = 1 << 4


def kv_widths_ok(cfg: "AttentionConfig", kv_bits: int | None = None) -> None:
    """Raise ValueError unless K and V of ``kv_bits`` (default ``cfg.kv_bits``) fit the engine's fixed widths: the
    weighted sums ``acc = p @ V`` in a DSP48E1's 48-bit signed accumulator
    (``|acc| <= max_context * (2**W - 1) * 2**(kv_bits - 1)``, plus a sign bit: W + 15 + 11 + 1
    = 48 at W = 21, 16-bit V, L <= 2048) and the scale word Z in 32 unsigned bits
    (``Z <= 2**(kv_bits - 1) * 2**scale_frac_bits <= 2**31``). Every INT8 configuration
    passes (L <= 65535, W <= 24: 47 + 1 bits; 7 + 24 = 31)."""
    kv_bits = cfg.kv_bits if kv_bits is None else kv_bits
    if not (isinstance(kv_bits, int) and 2 <= kv_bits <= 16):
        raise ValueError(f"kv_bits = {kv_bits!r} must be an int in [2, 16]")
    acc = (cfg.max_context * ((1 << cfg.exp_width) - 1) << (kv_bits - 1)).bit_length() + 1
    if acc > 48:
        raise ValueError(f"INT{kv_bits} V with exp_width {cfg.exp_width} and max_context "
                         f"{cfg.max_context}: acc needs {acc} bits > 48 (narrow exp_width)")
    if (kv_bits - 1) + cfg.scale_frac_bits > 31:
        raise ValueError(f"INT{kv_bits} V with scale_frac_bits {cfg.scale_frac_bits}: Z "
                         f"reaches 2**{kv_bits - 1 + cfg.scale_frac_bits} > 2**31 (use "
                         f"scale_frac_bits <= {32 - kv_bits})")


@dataclasses.dataclass(frozen=True)
class AttentionConfig:
    """Generator parameters that fix the engine's arithmetic and frame layout.

    ``beat_bytes`` is the input beat width (8: 64-bit ``s_axis``, 24 MACs/clock with G = 3;
    16: 128-bit, 48 MACs/clock). ``kv_bits`` is the width of the K and V codes: 8 (one byte
    per element) or 16 (two bytes, little-endian; issue 32 item 5), which needs a narrower exp
    table and Z word (:func:`kv_widths_ok`: W <= 21 and F <= 16 at L <= 2048).
    ``macs_per_clock`` is derived: G * (K or V elements per beat).
    """

    heads_per_group: int = 3
    head_dim: int = 64
    max_context: int = 2048
    beat_bytes: int = 8
    exp_depth: int = 4096
    exp_width: int = 24
    exp_steps_per_octave: int = 170
    scale_frac_bits: int = 24
    kv_bits: int = 8

    def __post_init__(self) -> None:
        def _int(name, lo, hi):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise ValueError(f"{name} = {v!r} must be an int in [{lo}, {hi}]")

        _int("heads_per_group", 1, 255)
        _int("head_dim", 4, 65535)
        _int("max_context", 1, 65535)
        _int("scale_frac_bits", 0, 24)
        if self.kv_bits not in (8, 16) or isinstance(self.kv_bits, bool):
            raise ValueError(f"kv_bits = {self.kv_bits!r} must be 8 or 16")
        if self.head_dim % 4:
            raise ValueError(f"head_dim = {self.head_dim} must be a multiple of 4 "
                             "(four INT8 results per output word)")
        if self.beat_bytes not in (8, 16):
            raise ValueError(f"beat_bytes = {self.beat_bytes!r} must be 8 or 16")
        check_table_params(self.exp_depth, self.exp_width, self.exp_steps_per_octave)
        kv_widths_ok(self, self.kv_bits)

    @property
    def kv_bytes(self) -> int:
        """Bytes of one K or V element: 1 (INT8) or 2 (INT16, little-endian)."""
        return self.kv_bits // 8

    @property
    def kv_code(self) -> int:
        """The KV format code every scale word's byte 3 carries: 0 INT8, 1 INT16."""
        return self.kv_bytes - 1

    @property
    def kv_per_beat(self) -> int:
        """K or V elements per beat (the products of one head per clock)."""
        return self.beat_bytes // self.kv_bytes

    @property
    def macs_per_clock(self) -> int:
        return self.heads_per_group * self.kv_per_beat

    @property
    def header_bytes(self) -> int:
        """Header word (8 bytes) and one 4-byte scale word per head, before padding."""
        return 8 + 4 * self.heads_per_group

    @property
    def header_beats(self) -> int:
        return -(-self.header_bytes // self.beat_bytes)

    @property
    def q_beats(self) -> int:
        return -(-self.heads_per_group * self.head_dim // self.beat_bytes)

    @property
    def row_beats(self) -> int:
        return -(-self.head_dim * self.kv_bytes // self.beat_bytes)

    @property
    def table(self) -> np.ndarray:
        return _table_array(self.exp_depth, self.exp_width, self.exp_steps_per_octave)

    @property
    def score_bits(self) -> int:
        """Signed width of a score q.k (|s| <= head_dim * 2**7 * 2**(kv_bits - 1): 2**14 per
        product with INT8 K, 2**22 with INT16)."""
        return (self.head_dim << (6 + self.kv_bits)).bit_length() + 1

    @property
    def z_bits(self) -> int:
        """Quotient bits of the Z divider: A / S < 2**(kv_bits - 1), times 2**F, plus one
        rounding bit (F + 8 for INT8 V, F + 16 for INT16)."""
        return self.scale_frac_bits + self.kv_bits


DEFAULT_CONFIG = AttentionConfig()


@functools.lru_cache(maxsize=16)
def _table_array(depth: int, width: int, spo: int) -> np.ndarray:
    a = np.array(exp_table(depth, width, spo), dtype=np.int64)
    a.setflags(write=False)
    return a


# --------------------------------------------------------------------------- host helpers

def score_scale(c: float, cfg: AttentionConfig = DEFAULT_CONFIG) -> float:
    """Table steps per unit of integer score for a real score scale ``c`` (nats per unit).

    ``c`` is what turns an integer score into the softmax logit: ``c = s_q * s_k / sqrt(d)``
    for INT8 q and K with scales ``s_q`` and ``s_k``.
    """
    return c * cfg.exp_steps_per_octave / math.log(2)


def score_multiplier(c: float, cfg: AttentionConfig = DEFAULT_CONFIG) -> tuple[int, int]:
    """Scale word (MULT, SHIFT) that approximates ``score_scale(c)`` as MULT / 2**SHIFT.

    SHIFT is the largest value <= MAX_SHIFT that keeps MULT < 2**16, so MULT carries 16
    significant bits whenever the scale allows it. ``c = 0`` gives (0, 0): every weight equal.
    """
    if not (c >= 0 and math.isfinite(c)):
        raise ValueError(f"score scale c must be finite and >= 0, got {c!r}")
    r = score_scale(c, cfg)
    if r == 0:
        return 0, 0
    for shift in range(MAX_SHIFT, -1, -1):
        mult = round(r * 2.0 ** shift)
        if mult < (1 << MULT_BITS):
            return mult, shift
    raise ValueError(f"score scale c = {c!r} needs MULT/2**SHIFT = {r:.6g} >= 2**16")


# --------------------------------------------------------------------------- arithmetic

def _check_tensors(q, K, V, cfg: AttentionConfig, kv_bits: int = 8):
    q = np.asarray(q)
    K = np.asarray(K)
    V = np.asarray(V)
    G, d = cfg.heads_per_group, cfg.head_dim
    if q.shape != (G, d):
        raise ValueError(f"q has shape {q.shape}, expected {(G, d)}")
    if K.ndim != 2 or K.shape[1] != d or V.shape != K.shape:
        raise ValueError(f"K {K.shape} and V {V.shape} must both be (L, {d})")
    if not 1 <= K.shape[0] <= cfg.max_context:
        raise ValueError(f"context length {K.shape[0]} outside [1, {cfg.max_context}]")
    for name, a, bits in (("q", q, 8), ("K", K, kv_bits), ("V", V, kv_bits)):
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        if a.size and (a.min() < lo or a.max() > hi):
            raise ValueError(f"{name} holds values outside INT{bits}")
    return q.astype(np.int64), K.astype(np.int64), V.astype(np.int64)


def _per_head(mult, shift, cfg: AttentionConfig) -> tuple[list[int], list[int]]:
    """(MULT, SHIFT) as one int each (every head alike) or one per head -> two lists of G."""
    G = cfg.heads_per_group
    mults = [mult] * G if np.isscalar(mult) else list(mult)
    shifts = [shift] * G if np.isscalar(shift) else list(shift)
    if len(mults) != G or len(shifts) != G:
        raise ValueError(f"need one MULT and one SHIFT per head ({G})")
    mults = [int(m) if isinstance(m, (int, np.integer)) else m for m in mults]
    shifts = [int(x) if isinstance(x, (int, np.integer)) else x for x in shifts]
    return mults, shifts


def attention_core(q, K, V, mult, shift, cfg: AttentionConfig = DEFAULT_CONFIG) -> dict:
    """The engine's integer arithmetic (docs/attention.md section 3, steps 1-8), all values.

    q: (G, d) INT8 values, K and V: (L, d) values of ``cfg.kv_bits`` (INT8 or INT16); ``mult`` and ``shift``: ints (every head alike) or
    one per head, as in the frame's scale words. Returns a dict of numpy int64 arrays (``Z`` a list
    of Python ints): ``s`` (G, L) scores, ``m`` (G,) maxima, ``e`` (G, L) distances below the
    maximum, ``idx`` (G, L) raw table indices, ``p`` (G, L) weights, ``S`` (G,) sums, ``acc``
    (G, d) weighted sums of V, ``A`` (G,) max |acc|, ``y`` (G, d) INT8 results, ``Z`` (G,)
    scale words.

    With ``cfg.kv_bits = 16`` the arithmetic is the same on 16-bit codes; the configuration's
    widths were checked by :func:`kv_widths_ok` when it was made.
    """
    mults, shifts = _per_head(mult, shift, cfg)
    for m_, sh in zip(mults, shifts):
        if not (isinstance(m_, int) and 0 <= m_ < (1 << MULT_BITS)):
            raise ValueError(f"mult = {m_!r} must be an int in [0, 2**{MULT_BITS})")
        if not (isinstance(sh, int) and 0 <= sh <= MAX_SHIFT):
            raise ValueError(f"shift = {sh!r} must be an int in [0, {MAX_SHIFT}]")
    q, K, V = _check_tensors(q, K, V, cfg, cfg.kv_bits)
    table = cfg.table
    depth = cfg.exp_depth

    # 1. scores, exact: s[g, t] = sum_i q[g, i] * K[t, i]
    s = q @ K.T
    # 2. per-head maximum over the whole context (pass over K)
    m = s.max(axis=1)
    # 3. index: distance below the maximum, times MULT_g, rounded shift by SHIFT_g
    e = m[:, None] - s
    mv = np.array(mults, dtype=np.int64)[:, None]
    sv = np.array(shifts, dtype=np.int64)[:, None]
    rnd = (np.int64(1) << sv) >> 1
    idx = (e * mv + rnd) >> sv
    # 4. weight from the table; past the table's end the weight is 0
    inside = idx < depth
    p = np.where(inside, table[np.minimum(idx, depth - 1)], 0)
    # 5. normalising sum and weighted sum of V (pass over V), exact
    S = p.sum(axis=1)
    acc = p @ V
    # 6. per-head absmax
    A = np.abs(acc).max(axis=1)
    # 7. INT8 results, the exact round-half-even quotient y = RNE(127 * acc / A)
    y = _rne_quotient(acc, A)
    # 8. scale word Z = round-half-up(A / S * 2**F)
    F = cfg.scale_frac_bits
    Z = [((int(a) << (F + 1)) + int(sm)) // (2 * int(sm)) for a, sm in zip(A, S)]
    return {"s": s, "m": m, "e": e, "idx": idx, "p": p, "S": S, "acc": acc, "A": A, "y": y,
            "Z": Z}


def _rne_quotient(acc: np.ndarray, A: np.ndarray) -> np.ndarray:
    """y = sign(acc) * RNE(127 * |acc| / A), per row; 0 where A == 0.

    Computed as the hardware does: Q = floor(254 |acc| / A) (8 quotient bits, Q <= 254),
    R the remainder; y = Q >> 1, plus 1 when Q is odd and (R != 0 or Q >> 1 is odd).
    """
    mag = np.abs(acc)
    num = 254 * mag
    Asafe = np.where(A == 0, 1, A)[:, None]
    Q = num // Asafe
    R = num - Q * Asafe
    base = Q >> 1
    up = (Q & 1) & ((R != 0) | ((base & 1) == 1))
    y = base + up
    y = np.where(acc < 0, -y, y)
    y = np.where((A == 0)[:, None], 0, y)
    return y.astype(np.int64)


def status_word(tag: int, flags: int, count: int) -> int:
    return (tag & 0xFF) | ((flags & 0xFF) << 8) | ((count & 0xFFFF) << 16)


def output_word_count(cfg: AttentionConfig = DEFAULT_CONFIG) -> int:
    """Result words of a good frame (the status word not counted)."""
    return cfg.heads_per_group * cfg.head_dim // 4 + cfg.heads_per_group


def _result_words(core: dict, cfg: AttentionConfig) -> list[int]:
    y = np.asarray(core["y"], dtype=np.int64).reshape(-1)
    b = (y & 0xFF).astype(np.uint32).reshape(-1, 4)
    words = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16) | (b[:, 3] << 24)
    return [int(w) for w in words] + [int(z) & 0xFFFFFFFF for z in core["Z"]]


def attention_frame(q, K, V, mult, shift, tag: int = 0,
                    cfg: AttentionConfig = DEFAULT_CONFIG, flags: int = 0) -> list[int]:
    """Output words of one well-formed frame: G*d/4 result words, G scale words, status.

    ``flags`` may carry FLAG_LONG_FRAME (results still sent) for the raw-stream model.
    """
    core = attention_core(q, K, V, mult, shift, cfg)
    words = _result_words(core, cfg)
    return words + [status_word(tag, flags, len(words))]


# --------------------------------------------------------------------------- frames

def pack_header(context: int, mult, shift, tag: int = 0,
                cfg: AttentionConfig = DEFAULT_CONFIG, *, magic: int = MAGIC,
                heads: int | None = None, head_dim: int | None = None,
                reserved=None, pad_byte: int = 0) -> bytes:
    """The header block: header word, G scale words, padding to a whole beat.

    ``mult``/``shift``/``reserved`` are one int for every head or one per head. ``reserved`` is
    each scale word's byte 3, the KV format code (default ``cfg.kv_code``: 0 INT8, 1 INT16).
    Every field may be set out of range to build bad frames (only the field's bits are kept).
    """
    reserved = cfg.kv_code if reserved is None else reserved
    heads = cfg.heads_per_group if heads is None else heads
    head_dim = cfg.head_dim if head_dim is None else head_dim
    h0 = ((magic & 0xFFFF) | ((context & 0xFFFF) << 16) | ((heads & 0xFF) << 32)
          | ((head_dim & 0xFFFF) << 40) | ((tag & 0xFF) << 56))
    out = bytearray(h0.to_bytes(8, "little"))
    G = cfg.heads_per_group
    res = [reserved] * G if np.isscalar(reserved) else list(reserved)
    mults = [mult] * G if np.isscalar(mult) else list(mult)
    shifts = [shift] * G if np.isscalar(shift) else list(shift)
    for m_, sh, r in zip(mults, shifts, res, strict=True):
        w = (int(m_) & 0xFFFF) | ((int(sh) & 0xFF) << 16) | ((int(r) & 0xFF) << 24)
        out += w.to_bytes(4, "little")
    return _pad(bytes(out), cfg.beat_bytes, pad_byte)


def _pad(data: bytes, n: int, pad_byte: int) -> bytes:
    return data + bytes([pad_byte]) * ((-len(data)) % n)


def build_attention_frame(q, K, V, mult, shift, tag: int = 0,
                          cfg: AttentionConfig = DEFAULT_CONFIG, *, pad_byte: int = 0,
                          **header_overrides) -> bytes:
    """Frame bytes: header block, q (head 0 first), K rows t = 0..L-1, V rows t = 0..L-1.

    K and V elements are ``cfg.kv_bits`` wide: one byte each, or two (little-endian) for INT16.

    The header block, q, and each K and V row are padded to whole beats with ``pad_byte``.
    ``header_overrides`` (magic, context, heads, head_dim, reserved) go to :func:`pack_header`.
    """
    q = np.asarray(q, dtype=np.int64)
    K = np.asarray(K, dtype=np.int64)
    V = np.asarray(V, dtype=np.int64)
    kv_type = "<i2" if cfg.kv_bits == 16 else "i1"
    context = header_overrides.pop("context", K.shape[0])
    bb = cfg.beat_bytes
    out = bytearray(pack_header(context, mult, shift, tag, cfg, pad_byte=pad_byte,
                                **header_overrides))
    out += _pad((q.reshape(-1) & 0xFF).astype(np.uint8).tobytes(), bb, pad_byte)
    mask = (1 << cfg.kv_bits) - 1
    for M in (K, V):
        for row in M:
            out += _pad((row & mask).astype(kv_type.replace("i", "u")).tobytes(), bb, pad_byte)
    return bytes(out)


def frame_to_beats(data: bytes, beat_bytes: int = 8) -> list[int]:
    """Split frame bytes into beats; byte j of a beat is bits [8j+7:8j]."""
    if len(data) % beat_bytes:
        raise ValueError(f"{len(data)} bytes is not a whole number of {beat_bytes}-byte beats")
    return [int.from_bytes(data[i:i + beat_bytes], "little")
            for i in range(0, len(data), beat_bytes)]


def frame_beat_count(context: int, cfg: AttentionConfig = DEFAULT_CONFIG) -> int:
    """Beats of a frame of context ``context``: header + q + 2 * L rows."""
    return cfg.header_beats + cfg.q_beats + 2 * context * cfg.row_beats


def frame_output(beats: Sequence[int], cfg: AttentionConfig = DEFAULT_CONFIG) -> list[int]:
    """The engine's output for one frame: ``beats`` are its beats, the last one has tlast."""
    bb = cfg.beat_bytes
    if len(beats) == 0:
        raise ValueError("a frame has at least one beat")
    return frame_output_data(b"".join(int(b).to_bytes(bb, "little") for b in beats), cfg)


def frame_output_data(data: bytes, cfg: AttentionConfig = DEFAULT_CONFIG) -> list[int]:
    """As :func:`frame_output`, for the frame's bytes (whole beats; tlast on the last one)."""
    bb = cfg.beat_bytes
    n = len(data) // bb
    if n == 0 or len(data) % bb:
        raise ValueError(f"a frame is one or more whole {bb}-byte beats, not {len(data)} bytes")
    h0 = int.from_bytes(data[0:8], "little")
    tag = (h0 >> 56) & 0xFF
    if h0 & 0xFFFF != MAGIC:
        return [status_word(tag, FLAG_BAD_MAGIC, 0)]
    L = (h0 >> 16) & 0xFFFF
    heads = (h0 >> 32) & 0xFF
    head_dim = (h0 >> 40) & 0xFFFF
    if (not 1 <= L <= cfg.max_context or heads != cfg.heads_per_group
            or head_dim != cfg.head_dim):
        return [status_word(tag, FLAG_BAD_SHAPE, 0)]
    G = cfg.heads_per_group
    if n < cfg.header_beats:  # tlast inside the header block
        return [status_word(tag, FLAG_SHORT_FRAME, 0)]
    words = [int.from_bytes(data[8 + 4 * g:12 + 4 * g], "little") for g in range(G)]
    mult = [w & 0xFFFF for w in words]
    shift = [(w >> 16) & 0xFF for w in words]
    if any(sh > MAX_SHIFT or (w >> 24) != cfg.kv_code for w, sh in zip(words, shift)):
        return [status_word(tag, FLAG_BAD_FORMAT, 0)]
    declared = frame_beat_count(L, cfg)
    if n < declared:
        return [status_word(tag, FLAG_SHORT_FRAME, 0)]
    flags = FLAG_LONG_FRAME if n > declared else 0
    d = cfg.head_dim
    pos = cfg.header_beats * bb
    q = np.frombuffer(data, np.int8, G * d, pos).reshape(G, d)
    pos += cfg.q_beats * bb
    rows = np.frombuffer(data, np.uint8, 2 * L * cfg.row_beats * bb, pos)
    rows = rows.reshape(2 * L, cfg.row_beats * bb)[:, :d * cfg.kv_bytes].copy()
    rows = rows.view("<i2" if cfg.kv_bits == 16 else np.int8)
    return attention_frame(q, rows[:L], rows[L:], mult, shift, tag, cfg, flags)


def stream_outputs(beats: Sequence[int], lasts: Sequence[bool],
                   cfg: AttentionConfig = DEFAULT_CONFIG) -> list[list[int]]:
    """The engine on a raw input stream: one list of output words per frame (per tlast).

    Beats after the last tlast form an unfinished frame and produce nothing yet.
    """
    if len(beats) != len(lasts):
        raise ValueError("beats and lasts differ in length")
    out, start = [], 0
    for i, last in enumerate(lasts):
        if last:
            out.append(frame_output(beats[start:i + 1], cfg))
            start = i + 1
    return out


def attention_stream(beats: Iterable[tuple[int, bool]],
                     cfg: AttentionConfig = DEFAULT_CONFIG) -> list[tuple[int, bool]]:
    """As :func:`stream_outputs`, in the testbench's form: ``(data, tlast)`` pairs in and out
    (the same shape as ``generators.golden.mv.mv_stream``)."""
    pairs = [(int(d), bool(last)) for d, last in beats]
    frames = stream_outputs([d for d, _ in pairs], [last for _, last in pairs], cfg)
    return [(w, i == len(f) - 1) for f in frames for i, w in enumerate(f)]


# --------------------------------------------------------------------------- outputs

def decode_output(words: Sequence[int], cfg: AttentionConfig = DEFAULT_CONFIG) -> dict:
    """Split one frame's output words: ``y`` (G, d) int8 or None, ``Z``, tag, flags, count."""
    st = int(words[-1])
    res = {"tag": st & 0xFF, "flags": (st >> 8) & 0xFF, "count": st >> 16,
           "y": None, "Z": None}
    n = cfg.heads_per_group * cfg.head_dim // 4
    if len(words) - 1 == output_word_count(cfg):
        w = np.array(words[:n], dtype=np.uint32)
        res["y"] = w.astype("<u4").view(np.int8).reshape(cfg.heads_per_group, cfg.head_dim)
        res["Z"] = [int(z) for z in words[n:n + cfg.heads_per_group]]
    return res


def dequantise(y, Z: Iterable[int], cfg: AttentionConfig = DEFAULT_CONFIG) -> np.ndarray:
    """Engine results in V's integer units: o[g, i] = y[g, i] * Z[g] / (127 * 2**F)."""
    z = np.array([float(v) for v in Z]) / (127.0 * 2.0 ** cfg.scale_frac_bits)
    return np.asarray(y, dtype=np.float64) * z[:, None]


def float_attention(q, K, V, c) -> np.ndarray:
    """float64 softmax attention on INT8 inputs, in V's integer units: softmax(c q K^T) V.

    ``c`` (nats per unit of integer score) is one float or one per head.
    """
    s = np.asarray(q, np.float64) @ np.asarray(K, np.float64).T
    c = np.broadcast_to(np.asarray(c, np.float64), (s.shape[0],))[:, None]
    z = c * (s - s.max(axis=1, keepdims=True))
    w = np.exp(z)
    w /= w.sum(axis=1, keepdims=True)
    return w @ np.asarray(V, np.float64)
