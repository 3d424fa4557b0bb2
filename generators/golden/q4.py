"""Golden model of the Q4_1 matrix-vector engine (`q4-engine`, header format 0x04; format 0x05,
Q4_1 rows with per-block Q8_1 x, docs/activations.md sections 2 and 3).

Written from the contract (docs/q4.md) alone: it shares no code with the templates, the rtl/
files or the host packing module. It reads the raw input beats, decodes every fp16 d and m
exactly into integers, forms each row's value exactly (Python integers, units of 2^-24) and
rounds it once, to nearest even, into a float32, with integer arithmetic only.

Row layout: per 64 weights a scale beat (fp16 d0, m0, d1, m1, little-endian) followed by
ceil(remaining / 16) (at most 4) code beats; code beat c of a group holds weights 16c..16c+15
of it, weight 16c+j in nibble j (byte j//2, low nibble first).

Format 0x05 (K a multiple of 32, else BAD_SHAPE): per vector K int8 codes, then an x scale
table of ceil(K/64) beats, beat g = fp16 d(2g) s(2g) d(2g+1) s(2g+1); rows as 0x04. A row's
value is ``sum_b d_w d_x S_b + m_w s_x`` with ``S_b = sum q x`` of block b, formed exactly in
units of 2^-48 (every product of two fp16 is an integer there) and rounded once to float32.
An Inf/NaN d or s of x, like a row's d or m, counts as zero and raises BAD_SCALE when a block
that uses it (a block within K whose last code beat the engine took) is computed.
"""
from __future__ import annotations

from typing import Iterable, List, Sequence, Tuple

import numpy as np

from .mv import (BAD_FORMAT, BAD_MAGIC, BAD_SHAPE, LONG_FRAME, MAGIC, SHORT_FRAME,
                 _accepted, end_status, header_block, split_frames, status_word)
from generators.contract import FORMAT_Q4, FORMAT_Q4_Q8_1

FMT_Q4 = FORMAT_Q4
FMT_Q4_Q8_1 = FORMAT_Q4_Q8_1
BAD_SCALE = 1 << 5          # an fp16 d or m with exponent 31 (Inf/NaN) in a block within K
BEAT = 8

Word = Tuple[int, bool]


def f16_exact(h: int) -> Tuple[int, bool]:
    """fp16 bits -> (value * 2^24 as an exact integer, bad). Inf/NaN -> (0, True)."""
    s, e, f = h >> 15 & 1, h >> 10 & 0x1F, h & 0x3FF
    if e == 31:
        return 0, True
    v = f if e == 0 else (1024 + f) << (e - 1)    # value = f*2^-24 or (1024+f)*2^(e-25)
    return (-v if s else v), False


def round_f32(a: int, frac: int = 24) -> int:
    """float32 bits of a * 2^-frac, rounded to nearest even (a: any integer whose value is in
    float32's normal range once rounded; 2^-24 units for 0x04, 2^-48 for 0x05 and 0x09)."""
    if a == 0:
        return 0
    sign = 1 if a < 0 else 0
    mag = -a if a < 0 else a
    p = mag.bit_length() - 1                  # leading one: mag in [2^p, 2^(p+1))
    if p > 23:
        sh = p - 23
        q, rem = mag >> sh, mag & ((1 << sh) - 1)
        half = 1 << (sh - 1)
        if rem > half or (rem == half and q & 1):
            q += 1
        if q == 1 << 24:
            q, p = q >> 1, p + 1
    else:
        q = mag << (23 - p)
    e = p - frac + 127
    assert 1 <= e <= 254, "outside float32's normal range"
    return sign << 31 | e << 23 | (q & 0x7FFFFF)


def row_beats(k: int) -> int:
    return -(-k // 64) + -(-k // 16)


def _row_plan(k: int) -> List[Tuple[str, int, int]]:
    """The beats of a row in order: ('s', group, 0) or ('c', group, code index)."""
    plan = []
    for g in range(-(-k // 64)):
        plan.append(("s", g, 0))
        for c in range(min(4, -(-(k - 64 * g) // 16))):
            plan.append(("c", g, c))
    return plan


def _row_blocks(row: bytes, k: int, beats_seen: int = None):
    """The blocks of 32 weights of one row whose last code beat is among the first beats_seen
    beats (all of them without beats_seen): (block index, fp16 d bits, fp16 m bits, codes)."""
    plan = _row_plan(k)
    beats_seen = len(plan) if beats_seen is None else beats_seen
    for b in range(-(-k // 32)):
        g, half = divmod(b, 2)
        # index in the plan of this block's code beats (the last one ends the block)
        idx = [i for i, (t, gg, c) in enumerate(plan) if t == "c" and gg == g and c // 2 == half]
        if idx[-1] >= beats_seen:
            continue
        s_at = plan.index(("s", g, 0))
        sb = row[s_at * BEAT:(s_at + 1) * BEAT]
        d = int.from_bytes(sb[4 * half:4 * half + 2], "little")
        m = int.from_bytes(sb[4 * half + 2:4 * half + 4], "little")
        q = []
        for i in idx:
            for byte in row[i * BEAT:(i + 1) * BEAT]:
                q += [byte & 0xF, byte >> 4]
        yield b, d, m, q


def row_value(row: bytes, x: np.ndarray, k: int, beats_seen: int = None) -> Tuple[int, bool]:
    """(exact integer sum in units of 2^-24, bad) of one row; with beats_seen, only the blocks
    whose last beat is among the first beats_seen beats are checked for bad scales."""
    xs = np.zeros(64 * -(-k // 64), dtype=np.int64)
    xs[:k] = x[:k]
    total, bad = 0, False
    for b, d, m, q in _row_blocks(row, k, beats_seen):
        xb = xs[32 * b:32 * b + len(q)]
        s = int(np.dot(np.array(q, dtype=np.int64), xb))
        xsum = int(xb.sum())
        dv, dbad = f16_exact(d)
        mv, mbad = f16_exact(m)
        bad |= dbad or mbad
        total += dv * s + mv * xsum
    return total, bad


def row_value_q8_1(row: bytes, xq: np.ndarray, xd: Sequence[int], xs: Sequence[int], k: int,
                   beats_seen: int = None) -> Tuple[int, bool]:
    """Format 0x05: (exact integer sum in units of 2^-48, bad) of one Q4_1 row against one
    vector's Q8_1 x: codes ``xq`` (K), fp16 bits ``xd``, ``xs`` (one per block). Per block
    ``d_w d_x S_b + m_w s_x``, each fp16 exact (f16_exact: value * 2^24), an Inf/NaN one zero;
    with beats_seen, only the blocks whose last beat is among the first beats_seen beats are
    computed and checked (the row's value then matters only for its bad flag)."""
    assert k % 32 == 0
    total, bad = 0, False
    for b, d, m, q in _row_blocks(row, k, beats_seen):
        dw, dwbad = f16_exact(d)
        mw, mwbad = f16_exact(m)
        dx, dxbad = f16_exact(int(xd[b]))
        sx, sxbad = f16_exact(int(xs[b]))
        bad |= dwbad or mwbad or dxbad or sxbad
        s = sum(int(a) * int(c) for a, c in zip(q, xq[32 * b:32 * b + 32]))
        total += dw * dx * s + mw * sx
    return total, bad


def _x_q8_1(body: bytes, k: int, nvec: int):
    """A 0x05 frame's x part: [(codes, d bits, s bits)] per vector and its length in bytes,
    or None when the body is shorter than that."""
    codes_len, table_len = k, -(-k // 64) * BEAT
    slot = codes_len + table_len
    if len(body) < nvec * slot:
        return None, nvec * slot
    xs = []
    for v in range(nvec):
        base = v * slot
        xq = np.frombuffer(body[base:base + k], dtype=np.int8).astype(np.int64)
        tb = body[base + codes_len:base + slot]
        f = [int.from_bytes(tb[2 * i:2 * i + 2], "little") for i in range(len(tb) // 2)]
        nb = k // 32
        xs.append((xq, f[0::2][:nb], f[1::2][:nb]))
    return xs, nvec * slot


def q4_frame(frame: Sequence[int], max_k: int, vectors: int = 1,
             formats: Sequence[int] = (FMT_Q4,)) -> List[Word]:
    """Expected output words of one input frame (a list of 8-byte beat integers); a frame of
    B vectors (docs/vectors.md) answers every row with B float32 words, vector 0 first.
    ``formats``: the format bytes the engine takes, 0x04 (the q4-engine today) and/or 0x05
    (Q4_1 rows with Q8_1 x); the frame's own format byte picks how it is read."""
    raw = b"".join(int(d).to_bytes(BEAT, "little") for d in frame)
    k, n, code, tag, nvec, hdr_beats, bad = header_block(raw, BEAT, _accepted(formats, vectors),
                                                         max_k, vectors)
    if bad is not None:
        return bad
    body = raw[hdr_beats * BEAT:]
    if code == FMT_Q4_Q8_1:
        xs, x_total = _x_q8_1(body, k, nvec)
        if xs is None:
            return [(status_word(tag, SHORT_FRAME, 0), True)]
        frac = 48

        def value_of(row, x, seen):
            return row_value_q8_1(row, x[0], x[1], x[2], k, seen)
    else:
        x_len = -(-k // BEAT) * BEAT
        x_total = nvec * x_len
        if len(body) < x_total:
            return [(status_word(tag, SHORT_FRAME, 0), True)]
        xs = [np.frombuffer(body[v * x_len:v * x_len + k], dtype=np.int8).astype(np.int64)
              for v in range(nvec)]
        frac = 24

        def value_of(row, x, seen):
            return row_value(row, x, k, seen)
    rows = body[x_total:]
    row_len = row_beats(k) * BEAT
    out: List[Word] = []
    flags = 0
    complete = min(len(rows) // row_len, n)
    for r in range(min(-(-len(rows) // row_len), n)):
        row = rows[r * row_len:(r + 1) * row_len]
        for x in xs:
            value, bad = value_of(row, x, len(row) // BEAT)
            if bad:
                flags |= BAD_SCALE
            if r < complete:
                out.append((round_f32(value, frac), False))
    out.append(end_status(tag, flags, len(rows), n * row_len, complete))
    return out


def q4_stream(beats: Iterable[Tuple[int, bool]], max_k: int, vectors: int = 1,
              formats: Sequence[int] = (FMT_Q4,)) -> List[Word]:
    out: List[Word] = []
    for fr in split_frames(beats):
        out.extend(q4_frame(fr, max_k, vectors, formats))
    return out


def flag_names(flags: int) -> List[str]:
    names = {BAD_MAGIC: "BAD_MAGIC", BAD_SHAPE: "BAD_SHAPE", BAD_FORMAT: "BAD_FORMAT",
             SHORT_FRAME: "SHORT_FRAME", LONG_FRAME: "LONG_FRAME", BAD_SCALE: "BAD_SCALE"}
    return [v for b, v in names.items() if flags & b]


# ----------------------------------------------------------------------------- whole matrices

def decode_rows(rows: np.ndarray, k: int):
    """Row images (N, row_beats(k)*8) uint8 -> (codes (N, nb, 32) uint8 with codes past K
    zero, D and M (N, nb) int64: each fp16 d and m times 2^24, exactly, bad (N,) bool: an Inf
    or NaN d or m in a block that holds a weight of index < K).

    For matrices of many rows (the decoder's golden backend): the same reading of the layout
    as :func:`row_value`, done once per matrix with numpy."""
    rows = np.asarray(rows, dtype=np.uint8)
    n = rows.shape[0]
    if rows.shape != (n, row_beats(k) * BEAT):
        raise ValueError(f"rows of shape {rows.shape}, K={k} needs (N, {row_beats(k) * BEAT})")
    nb = -(-k // 32)
    groups = -(-k // 64)
    codes = np.zeros((n, groups * 64), dtype=np.uint8)
    sc = np.zeros((n, groups, 4), dtype=np.int64)
    pos = 0
    for g in range(groups):
        sb = rows[:, pos * BEAT:(pos + 1) * BEAT].astype(np.int64)
        sc[:, g] = sb[:, 0::2] | (sb[:, 1::2] << 8)
        pos += 1
        c = min(4, -(-(k - 64 * g) // 16))
        cb = rows[:, pos * BEAT:(pos + c) * BEAT]
        codes[:, 64 * g:64 * g + 16 * c:2] = cb & 0xF
        codes[:, 64 * g + 1:64 * g + 16 * c:2] = cb >> 4
        pos += c
    codes[:, k:] = 0
    h = sc.reshape(n, groups * 2, 2)[:, :nb]            # (n, nb, [d, m]) fp16 bits
    s, e, f = h >> 15 & 1, h >> 10 & 0x1F, h & 0x3FF
    sh = np.where(e == 0, 0, e - 1)
    sig = np.where(e == 0, f, 1024 + f)
    v = np.where(e == 31, 0, sig << np.where(e == 31, 0, sh))
    v = np.where(s == 1, -v, v)
    bad = np.any(e == 31, axis=(1, 2))
    return codes.reshape(n, groups * 2, 32)[:, :nb], v[..., 0], v[..., 1], bad


def block_codes(codes: np.ndarray) -> np.ndarray:
    """codes (N, nb, 32) -> (nb, N, 32) float32, the operand of :func:`matrix_words` (kept)."""
    return np.ascontiguousarray(np.asarray(codes).transpose(1, 0, 2), dtype=np.float32)


def matrix_words(ct: np.ndarray, D: np.ndarray, M: np.ndarray, x: np.ndarray) -> np.ndarray:
    """float32 bits (uint32) of every row's exact sum, rounded once to nearest even.

    ``ct``: :func:`block_codes` of :func:`decode_rows`'s codes, ``D``, ``M`` its scales (rows
    without bad scales, :func:`int64_safe`), ``x`` the INT8 x (K values). ``S_b`` (exact in
    float32: |S_b| <= 61,440) by a batched matrix product, then ``A = sum_b D_b S_b + M_b X_b``
    exactly in int64. |A| < 2^53 converts to float64 exactly and then to float32 with one
    rounding (to nearest even); a larger |A| is rounded by :func:`round_f32`. The product by
    2^-24 is exact (every nonzero result is a float32 normal)."""
    nb, n, _ = ct.shape
    k = x.shape[0]
    xs = np.zeros(nb * 32, dtype=np.float32)
    xs[:k] = x
    xb = xs.reshape(nb, 32)
    S = np.matmul(ct, xb[:, :, None])[:, :, 0].T.astype(np.int64)     # (n, nb)
    X = xb.sum(axis=1).astype(np.int64)                                # (nb,)
    A = (D * S).sum(axis=1) + (M * X[None, :]).sum(axis=1)
    out = (A.astype(np.float64).astype(np.float32) * np.float32(2.0 ** -24)).view(np.uint32)
    big = np.nonzero(np.abs(A) >= 2 ** 53)[0]
    for r in big:
        out[r] = round_f32(int(A[r]))
    return out


def int64_safe(D: np.ndarray, M: np.ndarray) -> bool:
    """True when no row's sum (or partial sum) can leave int64, for any INT8 x."""
    bound = (np.abs(D).astype(np.float64) * 61440 + np.abs(M).astype(np.float64) * 4096)
    return bool(bound.sum(axis=1).max(initial=0) < 2.0 ** 62)


# ----------------------------------------------------------------- whole matrices, format 0x05

def f16_exact_array(h) -> Tuple[np.ndarray, np.ndarray]:
    """fp16 bits (any shape, uint16) -> (values * 2^24 as exact int64, bad): :func:`f16_exact`
    element by element (an Inf/NaN one is 0 and bad)."""
    h = np.asarray(h, dtype=np.int64)
    s, e, f = h >> 15 & 1, h >> 10 & 0x1F, h & 0x3FF
    sh = np.where((e == 0) | (e == 31), 0, e - 1)
    v = np.where(e == 31, 0, np.where(e == 0, f, 1024 + f) << sh)
    return np.where(s == 1, -v, v), e == 31


#: 2^-48, the unit of a 0x05 row's exact sum
_U48 = 2.0 ** -48


def matrix_words_q8_1(ct: np.ndarray, D: np.ndarray, M: np.ndarray, xq: np.ndarray, xd,
                      xs) -> np.ndarray:
    """Format 0x05 for a whole matrix: float32 bits (uint32) of every row's exact
    ``sum_b d_w d_x S_b + m_w s_x`` rounded once to nearest even, the words of
    :func:`q4_frame` (``formats`` with 0x05) for the same rows and x.

    ``ct``, ``D``, ``M``: :func:`block_codes` of :func:`decode_rows` and its scales (rows
    without Inf/NaN scales; K a multiple of 32); ``xq``: the Q8_1 codes, (K,) for one vector or
    (P, K) for P vectors; ``xd``, ``xs``: their fp16 bits, (K/32,) or (P, K/32), all finite
    (an Inf/NaN x scale is the frame model's: it flags). Returns (N,) or (P, N).

    The exact sum needs about 103 bits (units of 2^-48), more than int64. Every block term is
    exact in float64: ``d_w d_x`` is a product of two 11-bit significands and ``S_b`` (at most
    15 x 128 x 32 in magnitude) adds 16 bits, 38 in all; ``m_w s_x`` is 22 bits. Their float64
    sum ``s`` (any order) is within ``E = gamma(2 nb - 1) sum |t|`` of the exact sum; when
    ``s - 2E`` and ``s + 2E`` round to the same float32 bits, so does the exact sum (rounding is
    monotonic), and that is the word. Otherwise (an exact sum within about 2^-29 of a float32
    rounding boundary, or zero) the row is summed again in Python integers and rounded by
    :func:`round_f32`."""
    nb, n, _ = ct.shape
    xq = np.asarray(xq)
    one = xq.ndim == 1
    X = xq.reshape(1, -1) if one else xq
    P, k = X.shape
    if k != nb * 32:
        raise ValueError(f"x of {k} codes, the rows have {nb} blocks of 32")
    Dx, bdx = f16_exact_array(np.asarray(xd).reshape(P, nb))
    Sx, bsx = f16_exact_array(np.asarray(xs).reshape(P, nb))
    if bdx.any() or bsx.any():
        raise ValueError("an Inf/NaN x scale: the frame model's (it flags BAD_SCALE)")
    xb = X.astype(np.float32).reshape(P, nb, 32).transpose(1, 2, 0)        # (nb, 32, P)
    S = np.matmul(ct, xb)                                   # (nb, n, P): exact, |S| < 2^16
    S = S.transpose(2, 1, 0).astype(np.float64)             # (P, n, nb)
    Df, Mf = D.astype(np.float64), M.astype(np.float64)     # exact: < 2^41, 11 bits each
    A = (Df[None] * Dx.astype(np.float64)[:, None, :]) * S  # exact: 38 significant bits
    Bt = Mf[None] * Sx.astype(np.float64)[:, None, :]       # exact: 22 significant bits
    s = A.sum(axis=2) + Bt.sum(axis=2)                      # (P, n) in units of 2^-48
    E = (np.abs(A).sum(axis=2) + np.abs(Bt).sum(axis=2)) * ((2 * nb + 2) * 2.0 ** -52)
    out = (s * _U48).astype(np.float32).view(np.uint32)
    lo = ((s - 2 * E) * _U48).astype(np.float32).view(np.uint32)
    hi = ((s + 2 * E) * _U48).astype(np.float32).view(np.uint32)
    for p, r in zip(*np.nonzero(lo != hi)):
        Si = S[p, r].astype(np.int64)
        a = sum(int(d) * int(dx) * int(sv) + int(m) * int(sx)
                for d, dx, sv, m, sx in zip(D[r], Dx[p], Si, M[r], Sx[p]))
        out[p, r] = round_f32(a, 48)
    return out[0] if one else out
