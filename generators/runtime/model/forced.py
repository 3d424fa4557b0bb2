"""Teacher forcing over a whole text, fast: the golden backend's answer at every position of a
token sequence, bit for bit what :class:`generators.runtime.Decoder` on ``golden`` returns
when it steps through the same tokens, computed a layer at a time for all positions.

    from generators.runtime.model.forced import Forced, forced
    r = forced(model, ids)                # r["ll"][t]: log p(ids[t + 1] | ids[:t + 1])
    run = Forced(model); r = run(ids)     # the matrices read back once for many texts

What makes it fast, and why the bits stay the Decoder's:

* the matrices run for every position of a layer at once: INT8 and ternary rows as one float64
  matrix product of integers (every sum exact below 2^53: the engines' int32 results), Q4_1
  rows as the golden model's exact block sums (``generators.golden.q4.matrix_words``: S_b by a
  float32 product of integers, then sum_b D_b S_b + M_b X_b in int64, rounded once; format
  0x05, x as Q8_1 blocks: ``matrix_words_q8_1``), the Q8_0 LM head (format 0x09, x as Q8_0
  blocks) as ``generators.golden.mv.matrix_words_q8_0``, batched;
* the host ops are ``hostops``' numpy reference with a leading token axis (the same operations
  per row; the C library gives the same bits, tests/runtime/host/test_hostops.py) in the active precision
  (float32; float64 under ``hostops.use("float64")``);
* what depends on the positions before (the KV cache's steps and requantisation, attention)
  runs position after position through the same code as the Decoder: ``quantise.KVCache``
  and ``generators.golden.attention.attention_core`` (the attention engine's integer model).

tests/runtime/model/test_forced.py checks the logits against ``Decoder.step`` bit for bit (INT8 and Q4_1,
float32 and float64). ``make quality`` (tools/quality.py) runs it over docs/data/.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable, Dict, Optional, Sequence

import numpy as np

from generators.golden import attention as gatt
from generators.golden import mv as gmv
from generators.golden import q4 as gq4
from generators.packing import unpack_trits

from ..host import ops as hostops
from .quantise import KVCache

if TYPE_CHECKING:                       # annotations only: model.py calibrates with forced()
    from .model import Model, QMatrix

__all__ = ["forced", "Forced", "MatrixOp", "log_softmax_at", "F64_GROUPS"]

#: positions per batch of the matrix products (bounds the int64 block sums of Q4_1 rows)
CHUNK = 128


class MatrixOp:
    """One matrix of a converted model, read back from its two port frames (the rows the
    engines stream), as an operator on INT8 inputs of many positions."""

    def __init__(self, m: QMatrix):
        self.fmt, self.k, self.n = m.fmt, m.k, m.n
        #: formats 0x05 / 0x09: x as Q8_1 / Q8_0 blocks, each word the row's whole value
        #: (words_q8_1, words_q8_0)
        self.block_x = bool(getattr(m, "block_x", False))
        self.scale = np.asarray(m.scale)
        k = m.k
        if m.fmt == "q4":
            stride = gq4.row_beats(k) * 8
        elif m.fmt == "q8_0":
            stride = gmv.q8_0_row_beats(k) * 8
        elif m.fmt == "int8":
            stride = -(-k // 8) * 8
        else:
            stride = -(-(-(-k // 5)) // 8) * 8       # ceil(k / 5) bytes, whole beats
        rows = np.concatenate([np.asarray(img[8 + m.x_bytes:], np.uint8).reshape(r, stride)
                               for img, r in zip(m.images, m.rows)])
        if m.fmt == "q4":
            codes, D, M, bad = gq4.decode_rows(rows, k)
            if bad.any() or not (self.block_x or gq4.int64_safe(D, M)):
                raise ValueError(f"{m.name}: Q4_1 rows with Inf/NaN scales or sums beyond int64")
            self.ct, self.D, self.M = gq4.block_codes(codes), D, M
        elif m.fmt == "q8_0":
            codes, D, bad = gmv.decode_q8_0_rows(rows, k)
            if bad.any():
                raise ValueError(f"{m.name}: Q8_0 rows with Inf/NaN scales")
            self.ct, self.D = gq4.block_codes(codes), D
        elif m.fmt == "int8":
            self.w = rows[:, :k].view(np.int8).astype(np.float64).T.copy()
        else:
            t = unpack_trits(rows[:, :-(-k // 5)], k)
            self.w = t.astype(np.float64).T.copy()

    def words_q8_1(self, xq: np.ndarray, xd: np.ndarray, xs: np.ndarray) -> np.ndarray:
        """Format 0x05's result words (positions, n) for Q8_1 x: codes xq (positions, k),
        fp16 bits xd, xs (positions, k / 32) (``generators.golden.q4.matrix_words_q8_1``)."""
        return np.ascontiguousarray(gq4.matrix_words_q8_1(self.ct, self.D, self.M, xq, xd, xs))

    def words_q8_0(self, xq: np.ndarray, xd: np.ndarray) -> np.ndarray:
        """Format 0x09's result words (positions, n) for Q8_0 x: codes xq (positions, k), fp16
        bits xd (positions, k / 32) (``generators.golden.mv.matrix_words_q8_0``)."""
        return np.ascontiguousarray(gmv.matrix_words_q8_0(self.ct, self.D, xq, xd))

    def words(self, xq: np.ndarray) -> np.ndarray:
        """The engines' result words (positions, n) for INT8 inputs xq (positions, k): int32
        sums (INT8, ternary) or float32 sums (Q4_1), as uint32."""
        if self.fmt != "q4":
            acc = xq.astype(np.float64) @ self.w
            return acc.astype(np.int64).astype(np.int32).view(np.uint32)
        p, k = xq.shape
        nb = self.ct.shape[0]
        xs = np.zeros((p, nb * 32), np.float32)
        xs[:, :k] = xq
        xb = xs.reshape(p, nb, 32)
        S = np.matmul(self.ct, xb.transpose(1, 2, 0)).astype(np.int64)    # (nb, n, p)
        X = xb.sum(axis=2).astype(np.int64)                                 # (p, nb)
        A = np.einsum("bnp,nb->np", S, self.D) + self.M @ X.T               # (n, p) int64
        out = (A.astype(np.float64).astype(np.float32) * np.float32(2.0 ** -24)).view(np.uint32)
        for r, c in zip(*np.nonzero(np.abs(A) >= 2 ** 53)):
            out[r, c] = gq4.round_f32(int(A[r, c]))
        return np.ascontiguousarray(out.T)


#: the op groups ``forced(f64_ops=...)`` can run in float64 while the rest stays float32
F64_GROUPS = ("rmsnorm", "quantise", "dequant", "rope", "silu", "attention", "residual")


class _Mixed:
    """The numpy reference with some op groups in float64 (each op casts its float inputs to
    its own type): which rounding of the float32 path costs what (make quality --ablate)."""

    def __init__(self, f64):
        bad = set(f64) - set(F64_GROUPS)
        if bad:
            raise ValueError(f"op groups {sorted(bad)}: not among {F64_GROUPS}")
        self.f64 = set(f64)
        self.F = np.float64 if "residual" in self.f64 else np.float32

    def _o(self, g):
        return hostops.NUMPY64 if g in self.f64 else hostops.NUMPY

    def rmsnorm(self, x, w, eps):
        o = self._o("rmsnorm")
        return o.rmsnorm(x.astype(o.F), w.astype(o.F), o.F(eps))

    def quantise_rows(self, x):
        o = self._o("quantise")
        return o.quantise_rows(x.astype(o.F))

    def dequant_i32(self, acc, scale, s):
        o = self._o("dequant")
        return o.dequant_i32(acc, scale.astype(o.F), np.asarray(s).astype(o.F))

    def dequant_f32(self, v, s):
        o = self._o("dequant")
        return o.dequant_f32(v, np.asarray(s).astype(o.F))

    def rope(self, x, c, s):
        o = self._o("rope")
        return o.rope(x.astype(o.F), c.astype(o.F), s.astype(o.F))

    def silu_mul(self, g, u):
        o = self._o("silu")
        return o.silu_mul(g.astype(o.F), u.astype(o.F))

    def score_scale(self, k, s, d):
        o = self._o("attention")
        return o.score_scale(o.F(k), o.F(s), d)

    def score_multiplier(self, c, cfg):
        return hostops.NUMPY.score_multiplier(c, cfg)

    def attention_out(self, y, z, v_step, frac_bits):
        o = self._o("attention")
        return o.attention_out(y, z, o.F(v_step), frac_bits)


def log_softmax_at(logits: np.ndarray, nxt: np.ndarray) -> np.ndarray:
    """log p(nxt[t]) under softmax(logits[t]), in float64."""
    z = np.asarray(logits, np.float64)
    m = z.max(axis=1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(z - m).sum(axis=1))
    return z[np.arange(len(nxt)), nxt] - lse


class Forced:
    """:func:`forced` for one model, its matrices read back once and kept (about 8 bytes per
    weight: float64 operands) for every later text."""

    def __init__(self, model: Model):
        self.model = model
        self._ops: Dict[str, MatrixOp] = {}

    def matrix(self, name: str) -> MatrixOp:
        if name not in self._ops:
            self._ops[name] = MatrixOp(self.model.matrices[name])
        return self._ops[name]

    def __call__(self, ids: Sequence[int], **kw) -> Dict[str, np.ndarray]:
        return forced(self.model, ids, matrix=self.matrix, **kw)


def forced(model: Model, ids: Sequence[int], *, logits: bool = False, kv: Optional[KVCache] = None,
           progress: Optional[Callable[[str], None]] = None,
           matrix: Optional[Callable[[str], MatrixOp]] = None,
           f64_ops: Sequence[str] = (), x_parts: int = 1) -> Dict[str, np.ndarray]:
    """Run ``ids`` through the model with teacher forcing, from an empty KV cache at position
    0. Returns ``ll`` (len - 1: the log-likelihood of each next token), ``argmax`` (len - 1),
    ``logits`` (len, vocab, float32 or float64) when asked, ``kv_bytes`` (len: the bytes
    written into the KV cache at each position, new rows and requantised rows), and the
    ``kv`` cache (its ``requant_events``). ``kv``: the cache to fill (default: an empty one
    with the model's KV steps, as the Decoder makes). ``f64_ops``: op groups of F64_GROUPS run
    in float64, the others in float32 (a measuring instrument; the KV cache's own arithmetic
    stays the active path's). ``x_parts``: the Decoder's ``parts()`` (2: x of the matrices of
    blocks in two parts, docs/activations.md section 7; the KV calibration runs 1)."""
    if x_parts not in (1, 2):
        raise ValueError(f"x_parts must be 1 or 2, got {x_parts!r}")
    ids = [int(t) for t in ids]
    c, m = model.config, model
    N, H, d = len(ids), c.hidden_size, c.head_dim
    if N == 0 or N > model.engines.max_context:
        raise ValueError(f"{N} tokens: between 1 and the attention engine's max_context "
                         f"{model.engines.max_context}")
    ops = hostops.NUMPY64 if hostops.active() == "float64" else hostops.NUMPY
    if f64_ops and ops is hostops.NUMPY:
        ops = _Mixed(f64_ops)
    F = ops.F
    acfg = model.engines.attention_config()
    G, nkv, heads = c.group, c.num_key_value_heads, c.num_attention_heads
    eps = F(c.rms_norm_eps)
    cos, sin = model.rope_tables()
    cos, sin = cos[:N, None, :].astype(F), sin[:N, None, :].astype(F)
    kv = kv or KVCache(c.num_hidden_layers, nkv, N, d, steps=model.kv_steps,
                       kv_bits=acfg.kv_bits)
    if kv.kv_bits != acfg.kv_bits:
        # a cache of the other width (the calibration's INT8 running absmax on a model for an
        # INT16 engine): the engine's arithmetic on its codes
        acfg = dataclasses.replace(acfg, kv_bits=kv.kv_bits)
    kv_bytes = np.zeros(N, np.int64)
    matrix = matrix or (lambda name: MatrixOp(m.matrices[name]))

    def mats(layer, names, x):
        """Real outputs of the matrices that share the input x (positions, k)."""
        ops_ = [matrix("lm_head" if layer is None else f"layers.{layer}.{nm}") for nm in names]
        if getattr(ops_[0], "block_x", False):     # 0x05 / 0x09: Q8_1 / Q8_0 x, no host scale
            P, K = x.shape
            q8_1 = ops_[0].fmt == "q4"
            if any(op.fmt != ops_[0].fmt or not op.block_x for op in ops_):
                raise ValueError(f"layer {layer}: the matrices {names} share one x and "
                                 f"must share its format")
            flat = np.ascontiguousarray(x, np.float32).reshape(-1)
            # x in two parts (Decoder.parts()): x's blocks and its residual's, words added
            xbs = (hostops.NUMPY.quantise_parts(flat, q8_1) if x_parts == 2
                   else [hostops.NUMPY.quantise_blocks(flat, q8_1)])
            xbs = [[xb[0].reshape(P, K)] + [a.reshape(P, -1) for a in xb[1:]]   # xq, xd (, xs)
                   for xb in xbs]

            def words(op, xb, s):
                f = op.words_q8_1 if q8_1 else op.words_q8_0
                return f(*(a[s:s + CHUNK] for a in xb))

            def value(op):
                ys = [np.concatenate([words(op, xb, i) for i in range(0, N, CHUNK)]
                                     ).view(np.float32).astype(F) for xb in xbs]
                return ys[0] if len(ys) == 1 else (ys[0] + ys[1]).astype(F)
            return [value(op) for op in ops_]
        xq, sx = ops.quantise_rows(x)
        sx = sx[:, None]
        out = []
        for op in ops_:
            y = np.concatenate([op.words(xq[i:i + CHUNK]) for i in range(0, N, CHUNK)])
            out.append(ops.dequant_f32(y.view(np.float32), sx) if op.fmt == "q4"
                       else ops.dequant_i32(y.view(np.int32), op.scale.astype(F), sx))
        return out

    X = np.stack([np.asarray(m.embed_row(t), np.float32) for t in ids]).astype(F)
    for i in range(c.num_hidden_layers):
        if progress:
            progress(f"layer {i + 1}/{c.num_hidden_layers}")
        n = ops.rmsnorm(X, m.norms[f"layers.{i}.input"].astype(F), eps)
        q, k, v = mats(i, ("q", "k", "v"), n)
        q = ops.rope(q.reshape(N, heads, d), cos, sin)
        k = ops.rope(k.reshape(N, nkv, d), cos, sin)
        v = v.reshape(N, nkv, d)
        qi, sq = ops.quantise_rows(q.reshape(N * heads, d))
        qi, sq = qi.reshape(N, heads, d), sq.reshape(N, heads)
        a = np.empty((N, heads, d), np.float64 if isinstance(ops, _Mixed) else F)
        for t in range(N):
            w0 = kv.written + kv.requantised
            kv.append(i, k[t], v[t])
            kv_bytes[t] += kv.written + kv.requantised - w0
            L = t + 1
            for h in range(nkv):
                ks = kv.k_step[i, h]
                ms, ss = zip(*(ops.score_multiplier(ops.score_scale(ks, sq[t, h * G + g], d),
                                                    acfg) for g in range(G)))
                core = gatt.attention_core(qi[t, h * G:(h + 1) * G], kv.rows("K", i, h, L),
                                           kv.rows("V", i, h, L), list(ms), list(ss), acfg)
                z = np.array([int(zz) & 0xFFFFFFFF for zz in core["Z"]], np.uint32)
                a[t, h * G:(h + 1) * G] = ops.attention_out(
                    core["y"].astype(np.int8), z, kv.v_step[i, h], acfg.scale_frac_bits)
        (o,) = mats(i, ("o",), a.reshape(N, H))
        X = (X + o).astype(F, copy=False)
        n = ops.rmsnorm(X, m.norms[f"layers.{i}.post"].astype(F), eps)
        g, u = mats(i, ("gate", "up"), n)
        (dn,) = mats(i, ("down",), ops.silu_mul(g, u))
        X = (X + dn).astype(F, copy=False)
    if progress:
        progress("LM head")
    n = ops.rmsnorm(X, m.norms["final"].astype(F), eps)
    head = matrix("lm_head")
    if head.fmt == "q8_0":                  # format 0x09: Q8_0 x, each word the logit
        flat = np.ascontiguousarray(n, np.float32).reshape(-1)
        hx = (hostops.NUMPY.quantise_parts(flat, False) if x_parts == 2
              else [hostops.NUMPY.quantise_blocks(flat, False)])
        hx = [(xq.reshape(N, -1), xd.reshape(N, -1)) for xq, xd in hx]
    else:
        xq, sx = ops.quantise_rows(n)
    nxt = np.array(ids[1:], np.int64)
    ll = np.empty(N - 1)
    am = np.empty(N - 1, np.int64)
    keep = [] if logits else None
    for s in range(0, N, CHUNK):
        e = min(N, s + CHUNK)
        if head.fmt == "q8_0":
            ys = [head.words_q8_0(xq[s:e], xd[s:e]).view(np.float32).astype(F)
                  for xq, xd in hx]
            lg = ys[0] if len(ys) == 1 else (ys[0] + ys[1]).astype(F)
        else:
            y = head.words(xq[s:e])
            lg = ops.dequant_i32(y.view(np.int32), head.scale.astype(F), sx[s:e, None]) \
                if head.fmt != "q4" else ops.dequant_f32(y.view(np.float32), sx[s:e, None])
        if keep is not None:
            keep.append(lg)
        j = min(e, N - 1)
        if j > s:
            ll[s:j] = log_softmax_at(lg[:j - s], nxt[s:j])
            am[s:j] = np.argmax(lg[:j - s], axis=1)
    out = {"ll": ll, "argmax": am, "kv_bytes": kv_bytes, "kv": kv}
    if keep is not None:
        out["logits"] = np.concatenate(keep)
    return out
