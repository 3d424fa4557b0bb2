"""Golden model of the matrix-vector engines and the bandwidth probe (DESIGN.md section 3).

Written from the contract alone: it shares no code with the templates, the rtl/ files or the
generator's tables. It takes the raw input beats (data, tlast) and returns the exact output
words (word, tlast), bad frames included.
"""
from __future__ import annotations

from typing import Iterable, List, Sequence, Tuple

import numpy as np
from generators.contract import (BLOCK_FORMATS, BLOCK_K, FORMAT_INT8, FORMAT_Q4,
                                 FORMAT_Q4_Q8_1, FORMAT_Q8_0, FORMAT_TERNARY, MATRIX_MAGIC,
                                 VECTORS_FLAG)

MAGIC = MATRIX_MAGIC
FMT_INT8 = FORMAT_INT8
FMT_TERNARY = FORMAT_TERNARY
FMT_Q4 = FORMAT_Q4
FMT_Q4_Q8_1 = FORMAT_Q4_Q8_1
FMT_Q8_0 = FORMAT_Q8_0

BAD_MAGIC = 1 << 0
BAD_SHAPE = 1 << 1
BAD_FORMAT = 1 << 2
SHORT_FRAME = 1 << 3
LONG_FRAME = 1 << 4
BAD_TRIT = 1 << 5
#: the same bit for the formats with fp16 scales (0x04, 0x05, 0x09): an Inf/NaN scale
BAD_SCALE = BAD_TRIT

FLAG_NAMES = {BAD_MAGIC: "BAD_MAGIC", BAD_SHAPE: "BAD_SHAPE", BAD_FORMAT: "BAD_FORMAT",
              SHORT_FRAME: "SHORT_FRAME", LONG_FRAME: "LONG_FRAME", BAD_TRIT: "BAD_TRIT"}

Word = Tuple[int, bool]


def status_word(tag: int, flags: int, count: int) -> int:
    return (tag & 0xFF) | ((flags & 0xFF) << 8) | ((count & 0xFFFF) << 16)


def end_status(tag: int, flags: int, got: int, declared: int, count: int) -> Word:
    """The status word that ends a frame whose header was good: SHORT_FRAME when fewer row
    bytes came than the header declared, LONG_FRAME when more, on top of `flags`."""
    if got < declared:
        flags |= SHORT_FRAME
    elif got > declared:
        flags |= LONG_FRAME
    return (status_word(tag, flags, count), True)


def decode_status(word: int) -> Tuple[int, int, int]:
    """(tag, flags, count) of a status word."""
    return word & 0xFF, (word >> 8) & 0xFF, (word >> 16) & 0xFFFF


def flag_names(flags: int) -> List[str]:
    return [n for b, n in FLAG_NAMES.items() if flags & b]


def split_frames(beats: Iterable[Tuple[int, bool]]) -> List[List[int]]:
    """Group beats into frames at tlast; a trailing frame without tlast is not yet complete."""
    frames, cur = [], []
    for data, last in beats:
        cur.append(int(data))
        if last:
            frames.append(cur)
            cur = []
    return frames


def ternary_weights(row: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Packed row bytes -> (weights int64, 5 per byte, bad-byte mask). Bad bytes give zeros."""
    row = row.astype(np.int64)
    bad = row >= 243
    digits = np.stack([(row // 3 ** i) % 3 for i in range(5)], axis=-1) - 1
    digits[bad] = 0
    return digits.reshape(*row.shape[:-1], -1), bad


def _accepted(fmt, vectors: int = 1) -> Tuple[int, ...]:
    """The format bytes an engine takes: its format code(s) and, when it computes more than one
    vector per frame (``vectors`` >= 2), the same codes with the vectors flag."""
    codes = (fmt,) if isinstance(fmt, int) else tuple(int(f) for f in fmt)
    return codes + (tuple(c | VECTORS_FLAG for c in codes) if vectors >= 2 else ())


def header_block(raw: bytes, beat_bytes: int, accepted: Sequence[int], max_k: int,
                 vectors: int):
    """Read a frame's header block (docs/vectors.md, DESIGN.md section 3).

    Returns ``(k, n, code, tag, B, header beats, None)`` for a good header, or ``(..., [the
    status word])`` for a bad one. The checks, in the order the engine makes them: fewer bytes
    than a header word: SHORT_FRAME (tag 0); a wrong magic: BAD_MAGIC; from the header word,
    BAD_SHAPE (K = 0, K > max_k, N = 0, or, for a format the engine takes whose rows are
    blocks of 32 (0x05, 0x09), K not a multiple of 32) and BAD_FORMAT (a format byte the
    engine does not take), ORed; with the vectors flag, ``tlast`` before the end of the vectors word: SHORT_FRAME; from
    the vectors word, BAD_SHAPE (B = 0 or B > vectors) and BAD_FORMAT (reserved bits [63:8] not
    zero), ORed."""
    if len(raw) < 8:
        return 0, 0, 0, 0, 0, 0, [(status_word(0, SHORT_FRAME, 0), True)]
    magic = int.from_bytes(raw[0:2], "little")
    k = int.from_bytes(raw[2:4], "little")
    n = int.from_bytes(raw[4:6], "little")
    f, tag = raw[6], raw[7]
    code = f & ~VECTORS_FLAG & 0xFF
    if magic != MAGIC:
        return k, n, code, tag, 0, 0, [(status_word(tag, BAD_MAGIC, 0), True)]
    flags = 0
    if k == 0 or k > max_k or n == 0:
        flags |= BAD_SHAPE
    if f not in accepted:
        flags |= BAD_FORMAT
    elif code in BLOCK_FORMATS and k % BLOCK_K:
        flags |= BAD_SHAPE
    if flags:
        return k, n, code, tag, 0, 0, [(status_word(tag, flags, 0), True)]
    if not f & VECTORS_FLAG:
        return k, n, code, tag, 1, -(-8 // beat_bytes), None
    if len(raw) < 16:
        return k, n, code, tag, 0, 0, [(status_word(tag, SHORT_FRAME, 0), True)]
    ext = int.from_bytes(raw[8:16], "little")
    b = ext & 0xFF
    if b == 0 or b > vectors:
        flags |= BAD_SHAPE
    if ext >> 8:
        flags |= BAD_FORMAT
    if flags:
        return k, n, code, tag, b, 0, [(status_word(tag, flags, 0), True)]
    return k, n, code, tag, b, -(-16 // beat_bytes), None


def mv_frame(frame: Sequence[int], beat_bytes: int, fmt, max_k: int,
             vectors: int = 1) -> List[Word]:
    """Expected output words of one input frame (a list of beat integers).

    `fmt` is the format code the engine computes, or a collection of codes when it computes
    several (the frame's own format byte then picks how its rows are read). `vectors` is the
    most activation vectors a frame may carry (the engine's parameter, docs/vectors.md): a
    frame of B vectors answers every row with B results (vector 0 first), and its status
    word counts the rows answered."""
    accepted = _accepted(fmt, vectors)
    raw = b"".join(int(d).to_bytes(beat_bytes, "little") for d in frame)
    k, n, fmt, tag, nvec, hdr_beats, bad = header_block(raw, beat_bytes, accepted, max_k, vectors)
    if bad is not None:
        return bad
    if fmt in (FMT_Q4, FMT_Q4_Q8_1):   # llama.cpp Q4_1 rows: their own model (golden/q4.py)
        from .q4 import q4_frame
        assert beat_bytes == 8, "Q4_1 rows are laid out in 8-byte beats"
        return q4_frame(frame, max_k, vectors,
                        [c for c in accepted if c in (FMT_Q4, FMT_Q4_Q8_1)])
    if fmt == FMT_Q8_0:
        assert beat_bytes == 8, "Q8_0 rows are laid out in 8-byte beats"
        return q8_0_frame(raw[hdr_beats * 8:], k, n, tag, nvec)

    body = np.frombuffer(raw[hdr_beats * beat_bytes:], dtype=np.uint8)
    x_len = -(-k // beat_bytes) * beat_bytes
    if len(body) < nvec * x_len:
        return [(status_word(tag, SHORT_FRAME, 0), True)]
    xs = np.stack([body[v * x_len:v * x_len + k].view(np.int8).astype(np.int64)
                   for v in range(nvec)])
    rows = body[nvec * x_len:]
    wpb = 5 if fmt == FMT_TERNARY else 1
    used = -(-k // wpb)                               # bytes that hold weights of index < K
    row_len = -(-used // beat_bytes) * beat_bytes
    n_rows_seen = -(-len(rows) // row_len)            # complete or partial
    complete = min(len(rows) // row_len, n)
    out: List[Word] = []
    flags = 0
    if fmt == FMT_TERNARY:
        # every row beat the engine took counts for BAD_TRIT, a cut-short row's too
        for r in range(min(n_rows_seen, n)):
            seen = rows[r * row_len:(r + 1) * row_len][:used]
            if np.any(seen >= 243):
                flags |= BAD_TRIT
    for r in range(complete):
        row = rows[r * row_len:r * row_len + used]
        if fmt == FMT_TERNARY:
            w, _ = ternary_weights(row)
            w = w[:k]
        else:
            w = row[:k].view(np.int8).astype(np.int64)
        for x in xs:
            out.append((int(np.dot(w, x)) & 0xFFFFFFFF, False))
    out.append(end_status(tag, flags, len(rows), n * row_len, complete))
    return out


# ----------------------------------------------------------------------------- format 0x09

def q8_0_row_value(row: bytes, xq: np.ndarray, xd: Sequence[int], k: int,
                   beats_seen: int = None) -> Tuple[int, bool]:
    """Format 0x09: (exact integer sum in units of 2^-48, bad) of one Q8_0 row against one
    vector's Q8_0 x (codes ``xq`` (K), fp16 bits ``xd`` per block): ``sum_b d_w d_x S_b``.

    Row layout: per 128 weights a scale beat (fp16 d of its up to four blocks) then four code
    beats per block (8 int8 weights each, in order); the last group holds only its blocks.
    With beats_seen, only the blocks whose last code beat is among the first beats_seen beats
    count (for the bad flag of a row cut short)."""
    from .q4 import f16_exact           # fp16 -> value * 2^24 exactly; Inf/NaN -> (0, bad)
    assert k % BLOCK_K == 0
    beats_seen = len(row) // 8 if beats_seen is None else beats_seen
    total, bad, pos = 0, False, 0
    for g in range(-(-k // 128)):
        nbg = min(4, k // BLOCK_K - 4 * g)
        scale = row[pos * 8:(pos + 1) * 8]
        pos += 1
        for j in range(nbg):
            last_beat = pos + 4 * j + 3
            if last_beat >= beats_seen:
                continue
            dw, dwbad = f16_exact(int.from_bytes(scale[2 * j:2 * j + 2], "little"))
            b = 4 * g + j
            dx, dxbad = f16_exact(int(xd[b]))
            bad |= dwbad or dxbad
            w = np.frombuffer(row[(pos + 4 * j) * 8:(pos + 4 * j + 4) * 8], dtype=np.int8)
            s = sum(int(a) * int(c) for a, c in zip(w, xq[32 * b:32 * b + 32]))
            total += dw * dx * s
        pos += 4 * nbg
    return total, bad


def q8_0_row_beats(k: int) -> int:
    return -(-k // 128) + k // 8


def q8_0_frame(body: bytes, k: int, n: int, tag: int, nvec: int) -> List[Word]:
    """The words of a 0x09 frame whose header block was good: ``body`` is everything after
    it. Per vector K int8 codes, then ceil(K/128) beats of fp16 d (beat g: d(4g)..d(4g+3)),
    then N rows; each row's value rounded once to float32 (nearest even), B words per row."""
    from .q4 import round_f32
    slot = k + -(-k // 128) * 8
    if len(body) < nvec * slot:
        return [(status_word(tag, SHORT_FRAME, 0), True)]
    xs = []
    for v in range(nvec):
        base = v * slot
        xq = np.frombuffer(body[base:base + k], dtype=np.int8).astype(np.int64)
        tb = body[base + k:base + slot]
        xs.append((xq, [int.from_bytes(tb[2 * i:2 * i + 2], "little")
                        for i in range(k // BLOCK_K)]))
    rows = body[nvec * slot:]
    row_len = q8_0_row_beats(k) * 8
    out: List[Word] = []
    flags = 0
    complete = min(len(rows) // row_len, n)
    for r in range(min(-(-len(rows) // row_len), n)):
        row = rows[r * row_len:(r + 1) * row_len]
        for xq, xd in xs:
            value, bad = q8_0_row_value(row, xq, xd, k, len(row) // 8)
            if bad:
                flags |= BAD_SCALE
            if r < complete:
                out.append((round_f32(value, 48), False))
    out.append(end_status(tag, flags, len(rows), n * row_len, complete))
    return out


def decode_q8_0_rows(rows: np.ndarray, k: int):
    """0x09 row images (N, q8_0_row_beats(k)*8) uint8 -> (codes (N, K/32, 32) int8, D (N, K/32)
    int64: each row's fp16 d times 2^24, exactly, bad (N,) bool: an Inf/NaN d in a block
    within K). The layout as :func:`q8_0_row_value` reads it, done once per matrix with numpy
    (the golden backend's whole-matrix path, :func:`matrix_words_q8_0`)."""
    from .q4 import f16_exact_array
    rows = np.asarray(rows, dtype=np.uint8)
    n = rows.shape[0]
    if k % BLOCK_K or rows.shape != (n, q8_0_row_beats(k) * 8):
        raise ValueError(f"rows of shape {rows.shape}, K={k} needs K a multiple of 32 and "
                         f"(N, {q8_0_row_beats(k) * 8})")
    nb = k // BLOCK_K
    codes = np.empty((n, k), dtype=np.int8)
    dbits = np.empty((n, nb), dtype=np.uint16)
    pos = 0
    for g in range(-(-k // 128)):
        nbg = min(4, nb - 4 * g)
        sb = rows[:, pos * 8:pos * 8 + 2 * nbg].copy().view("<u2")
        dbits[:, 4 * g:4 * g + nbg] = sb
        pos += 1
        codes[:, 128 * g:128 * g + 32 * nbg] = rows[:, pos * 8:(pos + 4 * nbg) * 8].view(np.int8)
        pos += 4 * nbg
    D, bad = f16_exact_array(dbits)
    return codes.reshape(n, nb, BLOCK_K), D, bad.any(axis=1)


#: 2^-48, the unit of a 0x09 row's exact sum
_U48 = 2.0 ** -48


def matrix_words_q8_0(ct: np.ndarray, D: np.ndarray, xq: np.ndarray, xd) -> np.ndarray:
    """Format 0x09 for a whole matrix: float32 bits (uint32) of every row's exact
    ``sum_b d_w d_x S_b`` rounded once to nearest even, the words of :func:`q8_0_frame` for the
    same rows and x.

    ``ct``: ``golden.q4.block_codes`` of :func:`decode_q8_0_rows`'s codes ((K/32, N, 32) float32,
    kept by the caller), ``D`` its scales (rows without an Inf/NaN d); ``xq``: the Q8_0
    codes, (K,) for one vector or (P, K) for P vectors; ``xd``: their fp16 bits, (K/32,) or
    (P, K/32), all finite (an Inf/NaN x scale is the frame model's: it flags). Returns (N,) or
    (P, N).

    The exact sum needs up to 106 bits (units of 2^-48), more than int64. Every block term is
    exact in float64: ``d_w d_x`` is a product of two 11-bit significands and ``S_b`` (at most
    128 x 128 x 32 in magnitude) adds 20 bits, 42 in all. Their float64 sum ``s`` (any order) is
    within ``E = gamma(nb - 1) sum |t|`` of the exact sum; when ``s - 2E`` and ``s + 2E`` round
    to the same float32 bits, so does the exact sum (rounding is monotonic), and that is the
    word. Otherwise (an exact sum within about 2^-29 of a float32 rounding boundary, or zero)
    the row is summed again in Python integers and rounded by :func:`round_f32`."""
    from .q4 import f16_exact_array, round_f32
    nb, n, _ = ct.shape
    xq = np.asarray(xq)
    one = xq.ndim == 1
    X = xq.reshape(1, -1) if one else xq
    P, k = X.shape
    if k != nb * BLOCK_K:
        raise ValueError(f"x of {k} codes, the rows have {nb} blocks of 32")
    Dx, bdx = f16_exact_array(np.asarray(xd).reshape(P, nb))
    if bdx.any():
        raise ValueError("an Inf/NaN x scale: the frame model's (it flags BAD_SCALE)")
    # S_b by a batched float32 product: every partial sum an integer below 2^24, so exact
    # in any order (|S_b| <= 2^19)
    xb = X.astype(np.float32).reshape(P, nb, BLOCK_K).transpose(1, 2, 0)      # (nb, 32, P)
    S = np.matmul(ct, xb).transpose(2, 1, 0).astype(np.float64)               # (P, n, nb)
    A = (D.astype(np.float64)[None] * Dx.astype(np.float64)[:, None, :]) * S  # exact: 42 bits
    s = A.sum(axis=2) + 0.0                                 # (P, n) in units of 2^-48; no -0
    E = np.abs(A).sum(axis=2) * ((2 * nb + 2) * 2.0 ** -52)
    out = (s * _U48).astype(np.float32).view(np.uint32)
    lo = ((s - 2 * E) * _U48).astype(np.float32).view(np.uint32)
    hi = ((s + 2 * E) * _U48).astype(np.float32).view(np.uint32)
    for p, r in zip(*np.nonzero(lo != hi)):
        a = sum(int(d) * int(dx) * int(sv) for d, dx, sv in zip(D[r], Dx[p], S[p, r].astype(np.int64)))
        out[p, r] = round_f32(a, 48)
    return out[0] if one else out


def mv_stream(beats: Iterable[Tuple[int, bool]], beat_bytes: int, fmt, max_k: int,
              vectors: int = 1) -> List[Word]:
    """Expected output words for a whole stream of frames (`fmt`: a code or a collection)."""
    out: List[Word] = []
    for fr in split_frames(beats):
        out.extend(mv_frame(fr, beat_bytes, fmt, max_k, vectors))
    return out


def mv_results(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Plain dot products (int64) of weight rows with x, for bulk checks."""
    return w.astype(np.int64) @ x.astype(np.int64)


def probe_stream(beats: Iterable[Tuple[int, bool]], gaps: Sequence[int] = ()) -> List[Word]:
    """Expected probe output when every frame's beats come on consecutive cycles.

    `gaps[i]` is the number of idle cycles inside frame i (between its first and last beat).
    """
    out: List[Word] = []
    for i, fr in enumerate(split_frames(beats)):
        extra = gaps[i] if i < len(gaps) else 0
        out += [(len(fr), False), (len(fr) + extra, False), (status_word(0, 0, 2), True)]
    return out
