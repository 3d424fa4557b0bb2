#!/usr/bin/env python3
"""A measurement, not a product change (issue 32): which numerics change brings the engines'
free-running answers as close to the float64 pass as llama.cpp's.

A numpy model of the decoder step with switches, on the weights of the engines' own model
images (``load_model(None, "int8" | "q4")``: the same INT8 rows, Q4_1 rows, calibrated KV steps,
norms, RoPE tables and embedding the golden backend uses) and the host's own small ops
(``generators.runtime.host.ops``: RMSNorm, RoPE, SiLU*up, residual, INT8 activations):

* ``--weights``: ``int8`` (absmax per row: an int8 image written before its layers became
  Q8_0 rows, 0x09), ``q4`` (the file's Q4_1 rows,
  the engines' Q4 lane), ``q8_0`` (llama.cpp's Q8_0: the Q4_1 weights dequantised and
  requantised per block of 32 with an fp16 d, ``quantize_row_q8_0_ref``);
* ``--acts``: ``vec`` (today: one INT8 step per vector, ``hostops.quantise``), ``blk`` (per block
  of 32 as ggml: Q8_1 for Q4_1 rows, Q8_0 for the other rows: fp16 d = amax / qmax, q =
  roundf(x / d), Q8_1's s = fp16(d * sum q)), ``--act-bits`` the block's width (8: ggml's),
  ``res`` (x in two parts, the runtime's default since issue 32: x's blocks and the blocks of
  its residual x - d q, each row's two results rounded to float32 and added in float32;
  docs/activations.md section 7);
* ``--head``: ``engine`` (the model's LM head as INT8 rows: an image written before the
  Q8_0 head, 0x09; today's images hold Q8_0 head rows, which is ``q8_0``) or ``q8_0`` (the GGUF's Q8_0 tied
  embedding as stored, as llama.cpp runs it); the head's activations follow ``--acts`` (Q8_0
  blocks with a Q8_0 head);
* ``--kv``: ``cal`` (today: INT8 with the calibrated per-(layer, KV head) steps), ``blk`` (INT8
  per row block of 32, fp16 d = amax / 127, Q8_0-like), ``f16`` (fp16 K and V, llama.cpp's F16
  KV; q rounded to fp16 for q.K as ggml's f16 dot does), ``i16`` (INT16 codes with the
  calibrated steps rescaled: step16 = calibrated absmax * margin / 32767, codes clipped to
  +-32767; ``kv_margin`` the margin, 1.25 = KV_MARGIN as the INT8 steps);
* ``--att``: ``engine`` (the attention engine's golden model: INT8 q per head, the fixed-point
  exp table softmax, INT8 results with a scale word; ``--kv cal`` or ``i16``: for ``i16`` the
  same arithmetic on 16-bit K and V (``attention_core`` with ``AttentionConfig(kv_bits=16)``) with the row's exp
  width (``exp_width``: W + 15 + 11 + 1 <= 48 for acc) and scale_frac_bits 16 (Z <= 2^31))
  or ``float`` (float64 softmax on the float q and the dequantised K and V).

Dot products of the block rows are ggml's generic C (``ggml_vec_dot_q4_1_q8_1``:
d_w d_x sumi + m_w s_x per block; ``ggml_vec_dot_q8_0_q8_0``: d_w d_x sumi), each block's
integer sum exact, the blocks accumulated in float64 (ggml: float32). Today's lanes are the
golden models' arithmetic: INT8 rows an exact integer sum, Q4_1 rows the exact sum rounded
once to float32 (``generators.golden.q4.matrix_words``).

The float64 pass is tests/llama_reference.py's weights and forward pass run incrementally (a
KV cache in float64). Answers are cached per row and prompt in build/numerics/.

    python tools/answers_experiment.py --rows B,B-f16-float ... [--subset even] [--tokens 32]
    python tools/answers_experiment.py --list
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tools"))

OUT = REPO / "build" / "numerics"


def log(msg: str) -> None:
    print(f"[numerics] {msg}", file=sys.stderr, flush=True)


@dataclasses.dataclass(frozen=True)
class Numerics:
    weights: str = "q4"        # int8 | q4 | q8_0
    acts: str = "vec"          # vec | blk | res
    act_bits: int = 8
    head: str = "engine"       # engine | q8_0
    kv: str = "cal"            # cal | blk | f16 | i16
    att: str = "engine"        # engine | float
    what: str = ""
    kv_margin: float = 1.25    # i16: the steps' margin over the calibrated absmax (KV_MARGIN)
    exp_width: int = 21        # i16 with the engine: the exp table's width W
    att_out: str = "y8"        # the engine's results: y8 (INT8 y, Z) | y16 (INT16 y, Z) | exact


#: the rows A (one INT8 step per vector, the INT8-row head: A-int8, A-q4 and their float-softmax
#: variants, C-rows) ran on the images before 0x05 / 0x09 and are gone with them; their figures
#: at 9142673 are in docs/quality.md's history
ROWS: Dict[str, Numerics] = {
    "B": Numerics("q4", "blk", 8, "q8_0", "cal", "engine",
                  "B. Q4_1 rows x Q8_1 activation blocks (Q8_0 head x Q8_0), KV and "
                  "attention as today"),
    "C-q8_0": Numerics("q8_0", "blk", 8, "q8_0", "cal", "engine",
                       "C. Q8_0 rows x Q8_0 activation blocks (Q8_0 head), KV and attention "
                       "as today"),
    "B-cal-float": Numerics("q4", "blk", 8, "q8_0", "cal", "float",
                            "D. B, INT8 KV as today, float softmax"),
    "B-blk-float": Numerics("q4", "blk", 8, "q8_0", "blk", "float",
                            "D. B, INT8 KV per block of 32 (Q8_0-like), float softmax"),
    "B-f16-float": Numerics("q4", "blk", 8, "q8_0", "f16", "float",
                            "D. B, F16 KV, float softmax (llama.cpp's numerics, modelled)"),
    "C-q8_0-cal-float": Numerics("q8_0", "blk", 8, "q8_0", "cal", "float",
                                 "D. C (Q8_0 rows), INT8 KV as today, float softmax"),
    "C-q8_0-blk-float": Numerics("q8_0", "blk", 8, "q8_0", "blk", "float",
                                 "D. C (Q8_0 rows), INT8 KV per block of 32, float softmax"),
    "C-q8_0-f16-float": Numerics("q8_0", "blk", 8, "q8_0", "f16", "float",
                                 "D. C (Q8_0 rows), F16 KV, float softmax"),
    "check-float": Numerics("q4", "float", 8, "q8_0", "float", "float",
                            "check of the model: float x, Q4_1 weights dequantised, float KV "
                            "and softmax (the float64 pass but for the host's float32 ops)"),
    "E-q4-a12": Numerics("q4", "blk", 12, "q8_0", "cal", "engine",
                         "E. B with INT12 activation blocks"),
    "E-q4-a16": Numerics("q4", "blk", 16, "q8_0", "cal", "engine",
                         "E. B with INT16 activation blocks"),
    "E-q4-a16-f16-float": Numerics("q4", "blk", 16, "q8_0", "f16", "float",
                                   "E. B with INT16 activation blocks, F16 KV, float softmax"),
    "E-q8_0-a16": Numerics("q8_0", "blk", 16, "q8_0", "cal", "engine",
                           "E. C (Q8_0 rows) with INT16 activation blocks"),
    "B-i16": Numerics("q4", "blk", 8, "q8_0", "i16", "engine",
                      "F. B, INT16 KV (calibrated steps, margin 1.25), the engine's fixed-point "
                      "softmax at W = 21, F = 16"),
    "B-i16-float": Numerics("q4", "blk", 8, "q8_0", "i16", "float",
                            "F. B, INT16 KV (calibrated steps, margin 1.25), float softmax"),
    "B-i16-m4": Numerics("q4", "blk", 8, "q8_0", "i16", "engine",
                         "F. B, INT16 KV (calibrated steps, margin 4), the engine's fixed-point "
                         "softmax at W = 21, F = 16", kv_margin=4.0),
    "B-i16-m4-float": Numerics("q4", "blk", 8, "q8_0", "i16", "float",
                               "F. B, INT16 KV (calibrated steps, margin 4), float softmax",
                               kv_margin=4.0),
    "B-i16-y16": Numerics("q4", "blk", 8, "q8_0", "i16", "engine",
                          "F. B-i16 with INT16 results y (RNE(32767 acc / A), the Z word): a "
                          "diagnostic of the engine's INT8 y", att_out="y16"),
    "B-i16-exact": Numerics("q4", "blk", 8, "q8_0", "i16", "engine",
                            "F. B-i16 with the exact weighted mean acc / S as the result: a "
                            "diagnostic of the engine's INT8 y", att_out="exact"),
    "E-q4-a16-i16": Numerics("q4", "blk", 16, "q8_0", "i16", "engine",
                             "G. B-i16 with INT16 activation blocks in every matrix (wider "
                             "than llama.cpp's Q8_1)"),
    "E-q4-a16-i16-y16": Numerics("q4", "blk", 16, "q8_0", "i16", "engine",
                                 "G. B-i16 with INT16 activation blocks and INT16 results y",
                                 att_out="y16"),
    "E-q8_0-a16-i16": Numerics("q8_0", "blk", 16, "q8_0", "i16", "engine",
                               "G. C (Q8_0 rows) on INT16 KV with INT16 activation blocks in "
                               "every matrix"),
    "H-q4-res-i16": Numerics("q4", "res", 8, "q8_0", "i16", "engine",
                             "H. B-i16 with x as two Q8_1 vectors of one 2-vector frame: x's "
                             "blocks and its residual's (x - d q), the two words added"),
    "H-q8_0-res-i16": Numerics("q8_0", "res", 8, "q8_0", "i16", "engine",
                               "H. C (Q8_0 rows) on INT16 KV with x as two Q8_0 vectors "
                               "(x's blocks and its residual's)"),
}

#: INT16 KV codes: the clip, and the engine's scale word's fraction bits (Z <= 32767 * 2^16)
I16_MAX = 32767
I16_FRAC_BITS = 16


# ----------------------------------------------------------------------------- ggml helpers

def roundf(v: np.ndarray) -> np.ndarray:
    """C's roundf: half away from zero."""
    from generators.runtime.model.model import _roundf
    return _roundf(v)


def f16(v) -> np.ndarray:
    return np.asarray(v, np.float32).astype(np.float16).astype(np.float32)


def block_acts(x: np.ndarray, bits: int = 8, q8_1: bool = False):
    """x (T, K) float32 -> (q (T, nb, 32) float, d (T, nb) fp16 values, s (T, nb) or None):
    ggml's quantize_row_q8_0_ref / q8_1_ref (qmax = 2^(bits-1) - 1 instead of 127)."""
    T, K = x.shape
    nb = K // 32
    xb = np.asarray(x, np.float32).reshape(T, nb, 32)
    qmax = np.float32(2 ** (bits - 1) - 1)
    d = (np.max(np.abs(xb), axis=2) / qmax).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d == 0, np.float32(0), np.float32(1) / d).astype(np.float32)
    q = roundf(xb * inv[:, :, None]).astype(np.float32)
    s = f16(d * q.sum(axis=2, dtype=np.float32)) if q8_1 else None
    return q, f16(d), s


def q8_0_blocks(W: np.ndarray):
    """Rows W (N, K) -> (codes (N, nb, 32) int8, d (N, nb) fp16 values): quantize_row_q8_0_ref."""
    from generators.runtime.model.model import quantise_q8_0
    b = quantise_q8_0(W).reshape(W.shape[0], -1, 34)
    return parse_q8_0(b)


def parse_q8_0(b: np.ndarray):
    b = np.ascontiguousarray(b, np.uint8)
    d = b[:, :, :2].copy().view("<f2")[..., 0].astype(np.float32)
    q = b[:, :, 2:].copy().view(np.int8)
    return q, d


# ----------------------------------------------------------------------------- matrices

class Lane:
    """One matrix in one weight format: codes as (nb, N, 32) float32 (exact operands of a
    batched product per block of 32) and the scales the format needs."""

    def __init__(self, fmt: str, codes: np.ndarray, **scales):
        self.fmt = fmt
        self.ct = np.ascontiguousarray(np.asarray(codes, np.float32).transpose(1, 0, 2))
        self.nb, self.n, _ = self.ct.shape
        self.k = self.nb * 32
        self.__dict__.update(scales)
        self._ct64 = None

    def block_sums(self, xq: np.ndarray, wide: bool = False) -> np.ndarray:
        """xq (T, K) integer-valued -> S (T, N, nb) exact int64 per-block sums."""
        T = xq.shape[0]
        xb = np.ascontiguousarray(np.asarray(xq).reshape(T, self.nb, 32).transpose(1, 2, 0))
        if wide:
            if self._ct64 is None:
                self._ct64 = self.ct.astype(np.float64)
            S = np.matmul(self._ct64, xb.astype(np.float64))
        else:
            S = np.matmul(self.ct, xb.astype(np.float32))
        return np.rint(S).astype(np.int64).transpose(2, 1, 0)          # (T, N, nb)


def merge(ls: List[Lane]) -> Lane:
    """Lanes of one format with the same K as one lane (their rows stacked)."""
    out = Lane.__new__(Lane)
    out.fmt = ls[0].fmt
    out.ct = np.ascontiguousarray(np.concatenate([l.ct for l in ls], axis=1))
    out.nb, out.n, _ = out.ct.shape
    out.k = out.nb * 32
    out._ct64 = None
    for a in ("scale", "D", "M", "dw", "mw"):
        if hasattr(ls[0], a):
            setattr(out, a, np.concatenate([getattr(l, a) for l in ls], axis=0))
    return out


def lane_of(model, name: str, fmt: str, cache: dict) -> Lane:
    """The matrix ``name`` of the engines' model image in format ``fmt``."""
    from generators.golden.q4 import decode_rows, row_beats
    m = model.matrices[name]
    if m.fmt == "int8" and fmt == "int8":
        rows = []
        for p, img in enumerate(m.images):
            off = m.x_offset + m.x_bytes
            rb = -(-m.k // 8) * 8
            rows.append(np.asarray(img[off:off + m.rows[p] * rb]).reshape(m.rows[p], rb)[:, :m.k])
        q = np.concatenate(rows).view(np.int8)
        return Lane("int8", q.reshape(m.n, -1, 32), scale=np.asarray(m.scale, np.float32))
    if m.fmt == "q4":
        rows = []
        for p, img in enumerate(m.images):
            off = m.x_offset + m.x_bytes
            rb = row_beats(m.k) * 8
            rows.append(np.asarray(img[off:off + m.rows[p] * rb]).reshape(m.rows[p], rb))
        codes, D, M, bad = decode_rows(np.concatenate(rows), m.k)
        assert not bad.any()
        if fmt == "q4":
            return Lane("q4", codes, D=D, M=M, dw=D / 2.0 ** 24, mw=M / 2.0 ** 24)
        if fmt == "q8_0":
            W = (codes.astype(np.float64) * D[:, :, None] + M[:, :, None]) / 2.0 ** 24
            q, d = q8_0_blocks(W.reshape(m.n, -1).astype(np.float32))
            return Lane("q8_0", q, dw=d.astype(np.float64))
    raise ValueError(f"{name}: no {fmt} lane from a {m.fmt} image")


class Matrices:
    def __init__(self, nm: Numerics):
        from generators.runtime.cli.chat import load_model
        from generators.runtime.model.checkpoint import PYNQ_Z1_ENGINES
        src = "q4" if nm.weights in ("q4", "q8_0") else "int8"
        # the INT8-KV engines' image, whatever the overlay's default: its KV steps (calibrated
        # at those engines' widths) are the ones every row starts from, INT16 rows rescaled
        self.model, self.tok, _ = load_model(None, src, engines=PYNQ_Z1_ENGINES.with_kv_bits(8),
                                             say=None)
        self.nm = nm
        c = self.model.config
        self.lanes = {}
        for i in range(c.num_hidden_layers):
            for s in ("q", "k", "v", "o", "gate", "up", "down"):
                n = f"layers.{i}.{s}"
                self.lanes[n] = lane_of(self.model, n, nm.weights, {})
            # the matrices that share x, as one (rows are independent: the same numbers)
            for name, parts in (("qkv", ("q", "k", "v")), ("gu", ("gate", "up"))):
                ls = [self.lanes.pop(f"layers.{i}.{s}") for s in parts]
                self.lanes[f"layers.{i}.{name}"] = merge(ls)
        if nm.head == "q8_0":
            emb = self.model.embedding
            q, d = parse_q8_0(np.asarray(emb.blocks).reshape(len(emb), -1, 34))
            self.lanes["lm_head"] = Lane("q8_0", q, dw=d.astype(np.float64))
        else:
            self.lanes["lm_head"] = lane_of(self.model, "lm_head", "int8", {})

    def _float_w(self, name):
        L = self.lanes[name]
        if not hasattr(L, "_wf"):
            c = L.ct.astype(np.float64)                           # (nb, N, 32)
            if L.fmt == "q4":
                W = c * L.dw.T[:, :, None] + L.mw.T[:, :, None]
            elif L.fmt == "q8_0":
                W = c * L.dw.T[:, :, None]
            else:
                W = c * L.scale.astype(np.float64)[None, :, None]
            L._wf = np.ascontiguousarray(W.transpose(1, 0, 2).reshape(L.n, -1))
        return L._wf

    def run(self, name: str, X: np.ndarray) -> np.ndarray:
        """X (T, K) float32 -> (T, N) float32, the row's numerics."""
        from generators.runtime.host import ops as H
        L, nm = self.lanes[name], self.nm
        X = np.ascontiguousarray(X, np.float32)
        T = X.shape[0]
        if nm.acts == "vec":
            q, s = H.quantise(X)                         # (T, K), (T,)
            S = L.block_sums(q)
            out = np.empty((T, L.n), np.float32)
            if L.fmt == "q4":
                X_ = q.reshape(T, L.nb, 32).astype(np.int64).sum(axis=2)          # (T, nb)
                A = (L.D[None] * S).sum(axis=2) + (L.M[None] * X_[:, None, :]).sum(axis=2)
                assert np.all(np.abs(A) < 2 ** 53)
                v = A.astype(np.float64).astype(np.float32) * np.float32(2.0 ** -24)
                for t in range(T):
                    out[t] = H.dequant_f32(v[t], s[t])
            elif L.fmt == "int8":
                acc = S.sum(axis=2).astype(np.int32)
                for t in range(T):
                    out[t] = H.dequant_i32(acc[t], L.scale, s[t])
            else:
                raise ValueError(f"--acts vec with {L.fmt} rows: not modelled")
            return out
        if nm.acts == "float":                     # a check of the model: float64 x, no step
            W = self._float_w(name)
            return (X.astype(np.float64) @ W.T).astype(np.float32)
        if nm.acts == "res":        # two vectors of one B-vector frame: x's blocks, then the
            q8_1 = L.fmt == "q4"    # blocks of its residual; each word float32, added on the host
            q, dx, sx = block_acts(X, 8, q8_1=q8_1)
            r = X - (q * dx[:, :, None]).reshape(T, -1).astype(np.float32)
            return (self._blocks(L, r, 8).astype(np.float32)
                    + self._blocks(L, X, 8).astype(np.float32))
        return self._blocks(L, X, nm.act_bits).astype(np.float32)

    def _blocks(self, L, X: np.ndarray, bits: int) -> np.ndarray:
        """ggml's blocks: Q8_1 for Q4_1 rows, Q8_0 for the others (float64 result)."""
        T = X.shape[0]
        nm = self.nm
        q, dx, sx = block_acts(X, bits, q8_1=L.fmt == "q4")
        S = L.block_sums(q.reshape(T, -1), wide=bits > 12 and L.fmt != "q4"
                         or bits > 16).astype(np.float64)
        dx = dx.astype(np.float64)[:, None, :]                      # (T, 1, nb)
        if L.fmt == "q4":       # ggml_vec_dot_q4_1_q8_1: d_w d_x sumi + m_w s_x
            y = (L.dw[None] * dx * S).sum(axis=2) + (L.mw[None] * sx.astype(np.float64)
                                                      [:, None, :]).sum(axis=2)
        elif L.fmt == "q8_0":   # ggml_vec_dot_q8_0_q8_0: d_w d_x sumi
            y = (L.dw[None] * dx * S).sum(axis=2)
        else:                   # INT8 rows (one scale per row) x Q8_0 blocks
            y = (dx * S).sum(axis=2) * L.scale.astype(np.float64)[None]
        return y


# ----------------------------------------------------------------------------- decoder

def _rne_div(n: int, a: int) -> int:
    """sign(n) * RNE(|n| / a) of Python ints (0 when a == 0)."""
    if a == 0:
        return 0
    q, r = divmod(abs(n), a)
    if 2 * r > a or (2 * r == a and q & 1):
        q += 1
    return -q if n < 0 else q


class Model:
    """The decoder step with ``Numerics`` switches (one stream, prefill as one batch: every row
    a one-token step's arithmetic)."""

    def __init__(self, nm: Numerics):
        from generators.runtime.host import ops as H
        self.H = H
        self.nm = nm
        self.mx = Matrices(nm)
        m = self.mx.model
        self.cfg = m.config
        self.acfg = m.engines.attention_config()
        self.cos, self.sin = m.rope_tables()
        self.kv_steps = np.asarray(m.kv_steps, np.float32)
        if nm.att == "engine" and nm.kv not in ("cal", "i16"):
            raise ValueError("the attention engine takes the calibrated INT8 or INT16 KV only")
        self.stats = None
        if nm.kv == "i16":
            # the calibrated steps are absmax * KV_MARGIN / 127: rescale to margin / 32767
            from generators.golden import attention as gatt
            from generators.runtime.model.kvcal import KV_MARGIN
            self.kv_steps = (self.kv_steps.astype(np.float64) * (127 / I16_MAX)
                             * (nm.kv_margin / KV_MARGIN)).astype(np.float32)
            self.acfg = dataclasses.replace(self.acfg, exp_width=nm.exp_width,
                                            scale_frac_bits=I16_FRAC_BITS, kv_bits=16)
            self.stats = dict(values=0, clipped=0, frames=0, s_max=0, e_max=0, r_min=np.inf,
                              r_max=0.0, shift_min=99, shift_max=-1, mult_min=1 << 16,
                              idx_sat24_min=1 << 62, acc_max=0, S_max=0, Z_max=0)

    def reset(self):
        c = self.cfg
        self.K = [[] for _ in range(c.num_hidden_layers)]   # per layer: list of (kvh, d) rows
        self.V = [[] for _ in range(c.num_hidden_layers)]
        self.pos = 0

    def _store(self, layer: int, k: np.ndarray, v: np.ndarray):
        """One position's k, v (kvh, d) float32 into the cache in the row's KV format: INT8
        codes (cal) or the dequantised float values (blk, f16)."""
        H, nm = self.H, self.nm
        if nm.kv == "i16":
            # the host's kv_row (x * (1 / step) in float32, rint) with the INT16 clip
            st, F = self.kv_steps[layer], np.float32
            rows = []
            for a, j in ((k, 0), (v, 1)):
                inv = (np.float64(1.0) / np.float64(st[:, j])).astype(F)[:, None]
                x = np.asarray(a, F) * inv
                self.stats["values"] += x.size
                self.stats["clipped"] += int(np.sum(np.abs(x) > I16_MAX + 0.5))
                rows.append(np.rint(np.clip(x, F(-I16_MAX), F(I16_MAX))).astype(np.int16))
            self.K[layer].append(rows[0])
            self.V[layer].append(rows[1])
        elif nm.kv == "cal":
            st = self.kv_steps[layer]
            ki = np.stack([H.kv_row(k[h], st[h, 0]) for h in range(k.shape[0])])
            vi = np.stack([H.kv_row(v[h], st[h, 1]) for h in range(v.shape[0])])
            self.K[layer].append(ki)
            self.V[layer].append(vi)
        elif nm.kv == "blk":
            def q8(a):
                q, d, _ = block_acts(a, 8)
                return (q * d[:, :, None]).reshape(a.shape).astype(np.float64)
            self.K[layer].append(q8(k))
            self.V[layer].append(q8(v))
        elif nm.kv == "float":
            self.K[layer].append(k.astype(np.float64))
            self.V[layer].append(v.astype(np.float64))
        else:
            self.K[layer].append(f16(k).astype(np.float64))
            self.V[layer].append(f16(v).astype(np.float64))

    def _attention(self, layer: int, q: np.ndarray, L: int) -> np.ndarray:
        """q (heads, d) float32 over positions 0..L-1 -> (heads, d) float32."""
        from generators.golden import attention as gatt
        H, nm, c, cfg = self.H, self.nm, self.cfg, self.acfg
        G, d = c.group, c.head_dim
        Ks = np.stack(self.K[layer][:L], axis=1)        # (kvh, L, d)
        Vs = np.stack(self.V[layer][:L], axis=1)
        o = np.empty((c.num_attention_heads, d), np.float32)
        for h in range(c.num_key_value_heads):
            qg = q[h * G:(h + 1) * G]
            if nm.att == "engine":
                kstep, vstep = self.kv_steps[layer, h]
                qi, sq = H.quantise(qg)
                mults, shifts = [], []
                for g in range(G):
                    m_, s_ = H.score_multiplier(H.score_scale(kstep, sq[g], d), cfg)
                    mults.append(m_)
                    shifts.append(s_)
                core = gatt.attention_core(qi, Ks[h], Vs[h], mults, shifts, cfg)
                if self.stats is not None:
                    self._engine_stats(core, mults, shifts, sq, kstep, d)
                Z = np.array([int(z) & 0xFFFFFFFF for z in core["Z"]], np.uint32)
                if nm.att_out == "exact":       # diagnostic: acc / S, no result rounding
                    o[h * G:(h + 1) * G] = (core["acc"] / core["S"][:, None].astype(np.float64)
                                            * float(vstep)).astype(np.float32)
                elif nm.att_out == "y16":       # diagnostic: RNE(32767 acc / A), exact
                    y = np.array([[_rne_div(32767 * int(a), int(A)) for a in row]
                                  for row, A in zip(core["acc"], core["A"])], np.float32)
                    F = np.float32
                    c_ = (Z.astype(np.float64) / (32767 * 2 ** cfg.scale_frac_bits)).astype(F)
                    o[h * G:(h + 1) * G] = y * (c_ * F(vstep))[:, None]
                else:
                    o[h * G:(h + 1) * G] = H.attention_out(core["y"].astype(np.int8), Z, vstep,
                                                           cfg.scale_frac_bits)
                continue
            if nm.kv in ("cal", "i16"):
                kstep, vstep = self.kv_steps[layer, h]
                Kf = Ks[h].astype(np.float64) * float(kstep)
                Vf = Vs[h].astype(np.float64) * float(vstep)
                qf = qg.astype(np.float64)
            else:
                Kf, Vf = Ks[h], Vs[h]
                qf = (f16(qg) if nm.kv == "f16" else qg).astype(np.float64)
            s = qf @ Kf.T / np.sqrt(d)
            w = np.exp(s - s.max(axis=1, keepdims=True))
            w /= w.sum(axis=1, keepdims=True)
            o[h * G:(h + 1) * G] = (w @ Vf).astype(np.float32)
        return o

    def _engine_stats(self, core, mults, shifts, sq, kstep, d):
        """The widths a 16-bit KV engine meets: scores, e, the score scale r = MULT / 2^SHIFT,
        the index of a 24-bit saturated e (>= depth: a clamp of e to 24 bits is exact), acc, S,
        Z."""
        st, cfg = self.stats, self.acfg
        st["frames"] += 1
        st["s_max"] = max(st["s_max"], int(np.abs(core["s"]).max()))
        st["e_max"] = max(st["e_max"], int(core["e"].max()))
        for g, (m_, sh) in enumerate(zip(mults, shifts)):
            r = self.H.score_scale(kstep, sq[g], d) * cfg.exp_steps_per_octave / np.log(2)
            st["r_min"] = min(st["r_min"], float(r))
            st["r_max"] = max(st["r_max"], float(r))
            st["shift_min"] = min(st["shift_min"], sh)
            st["shift_max"] = max(st["shift_max"], sh)
            st["mult_min"] = min(st["mult_min"], m_)
            st["idx_sat24_min"] = min(st["idx_sat24_min"],
                                      (((1 << 24) - 1) * m_ + ((1 << sh) >> 1)) >> sh)
        st["acc_max"] = max(st["acc_max"], int(np.abs(core["acc"]).max()))
        st["S_max"] = max(st["S_max"], int(core["S"].max()))
        st["Z_max"] = max(st["Z_max"], max(int(z) for z in core["Z"]))

    def forward(self, tokens: List[int], logits: bool = True) -> Optional[np.ndarray]:
        """Positions pos..pos+T-1 for ``tokens`` (a batch of rows); the last row's logits."""
        H, c, m, mx = self.H, self.cfg, self.mx.model, self.mx
        T = len(tokens)
        hd, eps = c.head_dim, c.rms_norm_eps
        pos = list(range(self.pos, self.pos + T))
        x = np.stack([np.asarray(m.embed_row(t), np.float32) for t in tokens])
        for i in range(c.num_hidden_layers):
            n = np.stack([H.rmsnorm(x[j], m.norms[f"layers.{i}.input"], eps) for j in range(T)])
            qkv = mx.run(f"layers.{i}.qkv", n)
            nq, nk = c.num_attention_heads * hd, c.num_key_value_heads * hd
            q, k, v = qkv[:, :nq], qkv[:, nq:nq + nk], qkv[:, nq + nk:]
            a = np.empty((T, c.hidden_size), np.float32)
            qs = []
            for j in range(T):
                qj = H.rope(q[j].reshape(c.num_attention_heads, hd), self.cos[pos[j]],
                            self.sin[pos[j]])
                kj = H.rope(k[j].reshape(c.num_key_value_heads, hd), self.cos[pos[j]],
                            self.sin[pos[j]])
                self._store(i, kj, v[j].reshape(c.num_key_value_heads, hd))
                qs.append(qj)
            for j in range(T):
                a[j] = self._attention(i, qs[j], pos[j] + 1).reshape(-1)
            o = mx.run(f"layers.{i}.o", a)
            x = np.stack([H.add(x[j], o[j]) for j in range(T)])
            n = np.stack([H.rmsnorm(x[j], m.norms[f"layers.{i}.post"], eps) for j in range(T)])
            gu = mx.run(f"layers.{i}.gu", n)
            g, u = gu[:, :gu.shape[1] // 2], gu[:, gu.shape[1] // 2:]
            h = np.stack([H.silu_mul(g[j], u[j]) for j in range(T)])
            dn = mx.run(f"layers.{i}.down", h)
            x = np.stack([H.add(x[j], dn[j]) for j in range(T)])
        self.pos += T
        if not logits:
            return None
        n = H.rmsnorm(x[-1], m.norms["final"], eps)
        return mx.run("lm_head", n[None])[0]

    def greedy(self, ids, n, stop=()):
        self.reset()
        lg = self.forward(list(ids))
        self.first_logits = lg
        out = []
        for _ in range(n):
            t = int(np.argmax(lg))
            out.append(t)
            if t in stop or len(out) == n:
                break
            lg = self.forward([t])
        return out


class Float64:
    """tests/llama_reference.py's weights and forward pass, incrementally (float64 KV)."""

    def __init__(self, path):
        from llama_reference import Reference
        self.ref = Reference.from_gguf(path, "float")

    def greedy(self, ids, n, stop=()):
        cache = {}

        def step(toks, p0):
            assert cache.get("p0", 0) == p0
            return self.ref.logits(toks, cache)[-1]

        ids = list(ids)
        lg = step(ids, 0)
        self.first_logits = lg
        out = []
        pos = len(ids)
        for _ in range(n):
            t = int(np.argmax(lg))
            out.append(t)
            if t in stop or len(out) == n:
                break
            lg = step([t], pos)
            pos += 1
        return out


# ----------------------------------------------------------------------------- the run

def _src_hash() -> str:
    h = hashlib.sha256()
    for p in [Path(__file__), REPO / "tests" / "llama_reference.py"]:
        h.update(p.read_bytes())
    return h.hexdigest()[:12]


def margin(lg: np.ndarray, tok) -> dict:
    o = np.argsort(-lg)[:3]
    return dict(top=[[tok.decode([int(t)]), round(float(lg[t]), 3)] for t in o],
                margin=round(float(lg[o[0]] - lg[o[1]]), 3))


def table(idx, rows, vs, tok) -> int:
    """The markdown table of the rows cached in build/numerics/ over the prompts ``idx``."""
    from answers import agreement

    def load(r):
        f = OUT / f"{r}.json"
        if not f.is_file():
            return None
        d = json.loads(f.read_text())
        if not all(str(i) in d["answers"] for i in idx):
            return None
        return d
    ref = load("float64")
    lc = load(vs)
    refa = [ref["answers"][str(i)] for i in idx]
    print(f"| row | numerics | follows float64 (tokens before the first difference) | "
          f"answers equal to float64's | follows {vs} (modelled llama.cpp) | equal to "
          f"{vs}'s | France: first-token logits (margin) | time |")
    print("|---|---|---|---|---|---|---|---|")
    fr = ref["first"]["0"]
    print(f"| float64 | tests/llama_reference.py's pass | - | - | - | - | "
          f"{', '.join(f'{t!r} {v}' for t, v in fr['top'][:2])} ({fr['margin']}) | "
          f"{sum(ref['secs'][str(i)] for i in idx):.0f} s |")
    for r in rows:
        d = load(r)
        if d is None:
            print(f"| {r} | {ROWS[r].what} | not run | | | | | |")
            continue
        ans = [d["answers"][str(i)] for i in idx]
        a = agreement(ans, refa)
        if lc is not None:
            b = agreement(ans, [lc["answers"][str(i)] for i in idx])
            bv = f"{b['tokens']}/{b['of']} ({100 * b['fraction']:.1f} %)"
            be = f"{b['equal']}/{b['prompts']}"
        else:
            bv = be = "-"
        f0 = d["first"].get("0")
        fs = (f"{', '.join(f'{t!r} {v}' for t, v in f0['top'][:2])} ({f0['margin']})"
              if f0 else "-")
        print(f"| {r} | {ROWS[r].what} | {a['tokens']}/{a['of']} "
              f"({100 * a['fraction']:.1f} %) | {a['equal']}/{a['prompts']} | {bv} | {be} | "
              f"{fs} | {sum(d['secs'][str(i)] for i in idx):.0f} s |")
    return 0


def main(argv=None) -> int:
    from answers import agreement, leading_equal, read_prompts
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", default="B", help="comma list of rows (--list)")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--subset", default="even", help="even (prompts 1, 3, 5, ...: every "
                    "second one), all, or N (the first N)")
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--table", action="store_true", help="print the markdown table of the "
                    "cached rows (no run)")
    ap.add_argument("--vs", default="B-f16-float", help="the row the table compares with as "
                    "llama.cpp's modelled numerics")
    ap.add_argument("--record", action="store_true", help="record the rows' figures (modelled) "
                    "and the KV formats' bytes per token in docs/results/answers-experiment.json "
                    "(needs --subset all)")
    args = ap.parse_args(argv)
    if args.record and args.subset != "all":
        ap.error("--record needs --subset all: the figures are over every shipped prompt")
    if args.list:
        for k, v in ROWS.items():
            print(f"{k:22s} {v.what}")
        return 0
    from generators.runtime.model.gguf import smollm2_path
    from generators.runtime.model.tokenizer import Tokenizer
    path = smollm2_path()
    tok = Tokenizer.from_gguf(path)
    eos = list(tok.eos_ids)
    prompts = read_prompts()
    idx = list(range(len(prompts)))
    if args.subset == "even":
        idx = idx[::2]
    elif args.subset != "all":
        idx = idx[:int(args.subset)]
    ids = [tok.chat_ids(prompts[i]) for i in idx]
    salt = _src_hash()
    OUT.mkdir(parents=True, exist_ok=True)

    def answers_of(row: str):
        cf = OUT / f"{row}.json"
        cache = json.loads(cf.read_text()) if cf.is_file() else {}
        # the cache is this tool's (build/numerics/, delete it after a change of the model)
        if cache.get("tokens") != args.tokens:
            cache = dict(salt=salt, tokens=args.tokens, answers={}, first={}, secs={})
        todo = [(i, q) for i, q in zip(idx, ids) if str(i) not in cache["answers"]]
        if todo:
            t0 = time.perf_counter()
            runner = Float64(path) if row == "float64" else Model(ROWS[row])
            log(f"{row}: loaded in {time.perf_counter() - t0:.0f} s")
            for i, q in todo:
                t1 = time.perf_counter()
                cache["answers"][str(i)] = runner.greedy(q, args.tokens, stop=eos)
                cache["first"][str(i)] = margin(runner.first_logits, tok)
                cache["secs"][str(i)] = round(time.perf_counter() - t1, 2)
                log(f"{row}: prompt {i + 1}: {len(cache['answers'][str(i)])} tokens, "
                    f"{cache['secs'][str(i)]} s")
                cf.write_text(json.dumps(cache))
            st = getattr(runner, "stats", None)
            if st:
                st = {k: (float(v) if isinstance(v, (float, np.floating)) else int(v))
                      for k, v in st.items()}
                if st["frames"]:
                    st["bits"] = {k: int(st[k]).bit_length() for k in
                                  ("s_max", "e_max", "acc_max", "S_max", "Z_max")}
                else:                                   # --att float: the clip count only
                    st = dict(values=st["values"], clipped=st["clipped"])
                log(f"{row}: engine widths over {len(todo)} prompts: {st}")
                cache.setdefault("stats", {})[",".join(str(i) for i, _ in todo)] = st
                cf.write_text(json.dumps(cache))
            del runner
        return cache

    if args.table:
        return table(idx, args.rows.split(","), args.vs, tok)
    ref = answers_of("float64")
    refa = [ref["answers"][str(i)] for i in idx]
    rows = [r for r in args.rows.split(",") if r]
    lines = []
    results = {}
    for r in rows:
        cache = answers_of(r)
        ans = [cache["answers"][str(i)] for i in idx]
        ag = agreement(ans, refa)
        secs = sum(cache["secs"][str(i)] for i in idx)
        fr = cache["first"].get("0")
        results[r] = dict(ag, secs=secs, france=fr)
        log(f"{r}: follows float64 {ag['tokens']}/{ag['of']} ({100 * ag['fraction']:.1f} %), "
            f"{ag['equal']} equal, {secs:.0f} s; France: {fr}")
    frr = ref["first"].get("0")
    log(f"float64 France: {frr}")
    out = OUT / "results.json"
    old = json.loads(out.read_text()) if out.is_file() else {}
    old.setdefault(args.subset, {}).update(results)
    old.setdefault(args.subset, {})["float64"] = dict(france=frr,
                                                     secs=sum(ref["secs"][str(i)] for i in idx))
    out.write_text(json.dumps(old, indent=1))
    if args.record:
        from generators.runtime.model.gguf import config_from_metadata, open_reader, read_metadata
        cfg = config_from_metadata(read_metadata(open_reader(path)), path)
        rec = record_figures(results, ref, cfg, len(idx), args.tokens)
        log(f"recorded {rec}")
    return 0


#: the KV formats of the rows: bytes per stored value (Q8_0-like blocks: an fp16 step per 32)
KV_BYTES = {"cal": ("INT8, a calibrated step per (layer, KV head)", 1.0),
            "blk": ("INT8 per block of 32 of each row, an fp16 step per block (Q8_0-like)",
                    34 / 32),
            "f16": ("fp16 (llama.cpp's F16 KV cache)", 2.0),
            "i16": ("INT16, a calibrated step per (layer, KV head)", 2.0)}


def kv_costs(cfg: dict, contexts=(512, 2048)) -> List[dict]:
    """Bytes of the KV cache per token of context (K and V of every layer and KV head), and the
    bytes the attention reads per generated token at each context, at the DDR wall."""
    from generators.contract import DDR_WALL_BYTES_PER_S
    from generators.results import figure
    hd = cfg["hidden_size"] // cfg["num_attention_heads"]
    values = 2 * cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * hd
    figs = []
    for kv, (what, per) in KV_BYTES.items():
        b = int(round(values * per))
        figs.append(figure(f"answers-experiment.kv.{kv}.bytes_per_token", b, "B", "modelled",
                           f"KV cache {what}: bytes per token of context (K and V, "
                           f"{cfg['num_hidden_layers']} layers x {cfg['num_key_value_heads']} KV "
                           f"heads x {hd}: {values} values)", values=values))
        for c in contexts:
            ms = round(b * c / DDR_WALL_BYTES_PER_S * 1e3, 2)
            figs.append(figure(f"answers-experiment.kv.{kv}.read_ms_{c}", ms, "ms", "modelled",
                               f"KV cache {what}: the cache the attention reads per generated "
                               f"token at context {c} ({b * c} B), at the DDR wall "
                               f"(generators.contract.DDR_WALL_BYTES_PER_S)", context=c))
    return figs


def record_figures(results: Dict, ref: Dict, cfg: dict, n_prompts: int, tokens: int):
    from generators.results import figure, record
    figs = []
    for r, v in results.items():
        key = r.lower()
        what = f"{ROWS[r].what} (numpy model of the step, tools/answers_experiment.py)"
        figs.append(figure(f"answers-experiment.{key}.follow_pct",
                           round(100 * v["fraction"], 1), "%", "modelled",
                           f"{what}: tokens of its greedy answers before they leave the float64 "
                           f"pass's ({v['tokens']} of {v['of']})", tokens=v["tokens"], of=v["of"]))
        figs.append(figure(f"answers-experiment.{key}.equal", v["equal"], "answers", "modelled",
                           f"{what}: answers equal to the float64 pass's in full, of "
                           f"{v['prompts']}"))
    figs += kv_costs(cfg)
    return record("answers-experiment", figs,
                  command="make answers-experiment RECORD=1 (tools/answers_experiment.py)",
                  note=f"SmolLM2-135M-Instruct, {n_prompts} prompts of "
                       f"docs/data/answers-prompts.txt, chat template, greedy, up to {tokens} "
                       f"tokens; a numpy model of the decoder step with numerics switches (its "
                       f"row B answers as the golden backend's --format q4 --kv-bits 8, answer "
                       f"for answer); the float64 pass is tests/llama_reference.py's")


if __name__ == "__main__":
    sys.exit(main())
