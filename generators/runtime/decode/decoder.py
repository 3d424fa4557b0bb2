"""The decoder step (SmolLM2 / LLaMA): matrices and attention on the engines, the small ops
(RMSNorm, RoPE, residuals, SiLU, quantisation, sampling) on the host, as on the Cortex-A9:
``hostops`` (float32; its C library when built, else its numpy twin: the same bits).

    dec = Decoder(model, backend)                  # loop="c" | "python" | None (auto)
    for tok in dec.generate([1, 2, 3], max_new_tokens=8): ...

Two loops run a step: this module's Python loop over ``hostops`` and the runtime's methods
(the reference), and the C loop (``generators.runtime.engines.cloop``, ``csrc/tphloop.c``: the whole
step in one call: kernels, slots, descriptors, registers). ``loop=None`` runs C when the host
ops run in C (``hostops.active() == "c"``: the library is built and not switched off), else
Python with numpy: ``with hostops.using("numpy")`` is the reference path. Both give the same
engine words, logits and tokens (tests/runtime/engines/test_hostloop.py).

Every engine output is checked: a status word with flags raises EngineError naming the flags,
the layer and the matrix; a count or tag that is not the frame's raises too.
"""
from __future__ import annotations

import time
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from generators.contract import FORMAT_Q8_0
from generators.golden import attention as gatt

from ..engines import cloop as hostloop
from ..engines.faults import attention_error, matrix_error, matrix_site
from ..engines.plan import ATT, DOWN, GU, LM, O, QKV
from ..errors import ContextError, EngineError, PromptError
from ..host import ops as hostops
from ..model.model import Model, QMatrix
from ..model.quantise import KVCache, quantise_activations

__all__ = ["Decoder", "EngineError", "ContextError", "PromptError", "check_prompt",
           "rope_tables", "sample"]


def check_prompt(ids: Sequence[int], max_context: int, vocab_size: int) -> List[int]:
    """The prompt check, defined once (the Decoder, chat and decode make it before any engine
    work): at least one token (PromptError), no more than the attention engine's
    ``max_context`` (ContextError), every id in the vocabulary (PromptError)."""
    prompt = [int(t) for t in ids]
    if not prompt:
        raise PromptError("the prompt needs at least one token")
    if len(prompt) > max_context:
        raise ContextError(f"prompt of {len(prompt)} tokens is longer than the attention "
                           f"engine's max_context {max_context}")
    for t in prompt:
        if not 0 <= t < vocab_size:
            raise PromptError(f"token id {t} outside the vocabulary (0..{vocab_size - 1})")
    return prompt


def rope_tables(head_dim: int, theta: float, positions: int):
    """cos, sin (positions, head_dim / 2), float32, for the HF rotate_half RoPE (hostops)."""
    return hostops.rope_tables(head_dim, theta, positions)


def _rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    return hostops.rope(x, cos, sin)


def _rmsnorm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    return hostops.rmsnorm(x, w, eps)


def sample(logits: np.ndarray, temperature: float, top_k: int,
           rng: np.random.Generator, argmax: Optional[Callable[[np.ndarray], int]] = None) -> int:
    """Greedy (temperature 0: the first maximum, ``argmax`` or ``hostops.argmax``) or
    temperature / top-k sampling."""
    if temperature <= 0:
        return (argmax or hostops.argmax)(logits)
    z = np.asarray(logits, np.float64) / temperature
    if 0 < top_k < len(z):
        kth = np.partition(z, -top_k)[-top_k]
        z = np.where(z >= kth, z, -np.inf)
    z = z - np.max(z)
    p = np.exp(z)
    p /= p.sum()
    return int(rng.choice(len(p), p=p))


class Decoder:
    """The host loop: one token is a fixed sequence of steps over flat arrays, and the
    backend's transfers in the order of its descriptor chains (docs/runtime.md, "Host loop").

    ``backend``: a :class:`generators.runtime.engines.runtime.DmaRuntime` (every backend is one).
    Setting ``dec.be`` to another backend between tokens carries the KV cache over (the
    rows are copied into the new backend's DMA memory once). ``loop``: "c" (the C step of
    ``generators.runtime.engines.cloop``), "python" (this class's, on the active ``hostops``
    path) or None: C when ``hostops.active()`` is "c", else Python (read at every step).
    ``trace``: a list that gets every engine output frame's words (both loops)."""

    def __init__(self, model: Model, backend, trace: Optional[list] = None,
                 loop: Optional[str] = None, x_parts: Optional[int] = None):
        if loop not in (None, "c", "python"):
            raise ValueError(f"loop must be 'c', 'python' or None, got {loop!r}")
        if x_parts not in (None, 1, 2):
            raise ValueError(f"x_parts must be 1, 2 or None, got {x_parts!r}")
        self.loop = loop
        #: vectors per row of x in a transfer of blocks (0x05 / 0x09): 1, x's blocks as
        #: llama.cpp's; 2, x's blocks and its residual's, the two words added (about 15
        #: bits of each block, docs/activations.md section 7); None: ``default_parts()``
        self.x_parts = x_parts
        self.model = model
        self.cfg = model.config
        self.acfg = model.engines.attention_config()
        self.trace = trace
        c = self.cfg
        self._be = backend
        self.max_context = backend.plan.context
        cos, sin = model.rope_tables()                  # the image's tables, else computed
        self.cos, self.sin = cos[:self.max_context], sin[:self.max_context]
        self.timing = {"matrix_s": 0.0, "attention_s": 0.0, "total_s": 0.0, "engine_s": 0.0}
        #: bytes the CPU wrote into DMA memory for the last token, by kind (CPU_BYTES)
        self.token_bytes: Dict[str, int] = {}
        #: the CPU's reads of the cached results region in the last step (DmaRuntime.cache_ops)
        self.token_cache: Dict[str, int] = {}
        #: prompt tokens per prefill chunk (one weight pass of B-vector frames); None:
        #: ``default_chunk()``; 1: token by token (docs/runtime.md 4.7)
        self.chunk: Optional[int] = None
        self.reset()

    @property
    def be(self):
        return self._be

    @be.setter
    def be(self, new) -> None:
        if new is self._be:
            return
        if new.plan.context < self.pos:
            raise ContextError(f"the new backend's KV cache holds {new.plan.context} positions, "
                               f"the decoder has {self.pos}")
        old = self.kv
        if getattr(new.plan, "streams", 1) < len(self.kvs) and any(
                int(k.length.max(initial=0)) for k in self.kvs[1:]):
            raise ContextError("the new backend holds fewer streams' KV caches")
        self._be = new
        self.reset()
        n = int(old.length.max(initial=0))
        if n:
            self.kv.K[:, :, :n] = old.K[:, :, :n]
            self.kv.V[:, :, :n] = old.V[:, :, :n]
        self.kv.k_step[:], self.kv.v_step[:], self.kv.length[:] = \
            old.k_step, old.v_step, old.length
        self.pos = n

    def reset(self) -> None:
        """Empty every stream's KV cache (the backend holds ``plan.streams`` of them)."""
        c = self.cfg
        self.kvs: List[KVCache] = []
        for s in range(getattr(self._be.plan, "streams", 1)):
            K, V = self._be.kv_views(s) if s else self._be.kv_views()
            self.kvs.append(KVCache(c.num_hidden_layers, c.num_key_value_heads,
                                    self.max_context, c.head_dim, K=K, V=V,
                                    steps=self.model.kv_steps, kv_bits=self.acfg.kv_bits))
        #: each stream's next position
        self.positions = [0] * len(self.kvs)

    @property
    def kv(self) -> KVCache:
        """Stream 0's KV cache (the one-stream decoder's)."""
        return self.kvs[0]

    @property
    def pos(self) -> int:
        """Stream 0's next position."""
        return self.positions[0]

    @pos.setter
    def pos(self, v: int) -> None:
        self.positions[0] = int(v)

    @property
    def vectors(self) -> int:
        """The most vectors a matrix frame of the backend may carry (its plan's)."""
        return int(getattr(self.be.runtime.plan, "vectors", 1))

    def default_parts(self) -> int:
        """:func:`default_x_parts` of the model and the backend's vectors."""
        return default_x_parts(self.model, self.vectors)

    def parts(self) -> int:
        """Vectors per row of x in a transfer of blocks: ``x_parts``, else
        ``default_parts()``."""
        P = self.default_parts() if self.x_parts is None else int(self.x_parts)
        if P > self.vectors:
            raise ValueError(f"x_parts={P}: the matrix engines take {self.vectors} vector(s) "
                             f"a frame")
        return P

    @property
    def rows_per_pass(self) -> int:
        """The most rows of one weight pass: ``vectors`` // ``parts()``."""
        return self.vectors // self.parts()

    # ------------------------------------------------------------------ engines
    def _matrices(self, layer, kind: str, x: np.ndarray) -> List[np.ndarray]:
        """Real outputs of the matrices of one transfer, which share the input x."""
        return [y[0] for y in self._matrices_b(layer, kind, x[None])]

    _where = staticmethod(matrix_site)

    def _check_matrix(self, words, m: QMatrix, port: int, tag: int, layer,
                      vectors: int = 1) -> np.ndarray:
        words = np.asarray(words, np.uint32)
        msg = matrix_error(len(words), int(words[-1]) if len(words) else 0, m, port, tag, layer,
                           vectors)
        if msg is not None:
            raise EngineError(msg)
        return words[:-1]

    def _matrices_b(self, layer, kind: str, X: np.ndarray) -> List[np.ndarray]:
        """Real outputs (B, N) of the matrices of one transfer for B rows of x (B, K) in one
        weight pass: one B-vector frame per matrix half (B = 1: today's frame). Each row is
        quantised, and each result dequantised, exactly as a one-token step does it."""
        B = X.shape[0]
        rt = self.be.runtime
        blocks = rt.block_x(layer, kind)
        P = self.parts() if blocks else 1   # vectors per row of x
        if blocks:                  # formats 0x05 / 0x09: blocks of 32, no host scale after
            q81 = blocks != FORMAT_Q8_0
            if P == 2:              # row j: vector 2j x's blocks, 2j + 1 its residual's
                qb = [v for j in range(B) for v in hostops.quantise_parts(X[j], q81)]
            else:
                quant = hostops.quantise_q8_1 if q81 else hostops.quantise_q8_0
                qb = [quant(X[j]) for j in range(B)]
            qs = [(None, None)] * B
            rt.set_vectors(layer, kind, B * P)
            if B * P == 1:
                self.be.write_x_blocks(kind, *qb[0])
            else:
                self.be.write_x_blocks(kind, *(np.stack(a) for a in zip(*qb)))
        else:
            qs = [quantise_activations(X[j]) for j in range(B)]
            rt.set_vectors(layer, kind, B)
            self.be.write_x(kind, qs[0][0] if B == 1 else np.stack([q for q, _ in qs]))
        t0 = time.perf_counter()
        frames = self.be.run(layer, kind)
        self.timing["matrix_s"] += time.perf_counter() - t0
        out = []
        for fp, per_port in frames:
            m = self.model.matrices[fp.name]
            acc = [self._check_matrix(w, m, p, fp.tag, layer, B * P).reshape(-1, B * P)
                   for p, w in enumerate(per_port)]
            if self.trace is not None:
                self.trace.append(("matrix", layer, m.name, [np.asarray(w, np.uint32).copy()
                                                            for w in per_port]))
            y = np.concatenate(acc)                    # (N, B P): a row's results together
            if m.block_x:                              # 0x05, 0x09: each word the row's value
                v = np.ascontiguousarray(y.T).view(np.float32)
                if P == 2:                             # x's blocks' word + its residual's
                    v = np.stack([hostops.add(v[2 * j], v[2 * j + 1]) for j in range(B)])
                out.append(v.astype(hostops.dtype()))
                continue
            # INT8 / ternary rows: exact int32 sums; Q4_1 rows: float32 sum(w * x_int8)
            if B == 1:
                y0, sx = y[:, 0], qs[0][1]
                out.append((hostops.dequant_f32(y0.view(np.float32), sx) if m.fmt == "q4"
                            else hostops.dequant_i32(y0.view(np.int32), m.scale, sx))[None])
                continue
            flat, sxs = np.ascontiguousarray(y).reshape(-1), [sx for _, sx in qs]
            out.append(hostops.dequant_b_f32(flat.view(np.float32), sxs) if m.fmt == "q4"
                       else hostops.dequant_b_i32(flat.view(np.int32), m.scale, sxs))
        return out

    def _attention(self, layer: int, q: np.ndarray, kv: Optional[KVCache] = None) -> np.ndarray:
        """q (heads, d) real -> attention output (heads, d) real: per KV head its header and
        q into the part slots, then one transfer for all KV heads (K and V in place; ``kv``:
        the stream's cache, default stream 0's)."""
        c, cfg = self.cfg, self.acfg
        G, d = c.group, c.head_dim
        kv = self.kv if kv is None else kv
        L = int(kv.length[layer])
        for h in range(c.num_key_value_heads):
            qg = q[h * G:(h + 1) * G]
            qi, sq = quantise_activations(qg)          # per query head (G scales)
            kstep = kv.k_step[layer, h]
            mults, shifts = [], []
            for g in range(G):
                m_, s_ = hostops.score_multiplier(hostops.score_scale(kstep, sq[g], d), cfg)
                mults.append(m_)
                shifts.append(s_)
            self.be.write_attention_part(layer, h, L, qi, mults, shifts)
        t0 = time.perf_counter()
        frames = self.be.run(layer, ATT)
        self.timing["attention_s"] += time.perf_counter() - t0
        o = np.empty((c.num_attention_heads, d), hostops.dtype())
        for h, (fp, per_port) in enumerate(frames):
            words = np.asarray(per_port[0], np.uint32)
            if self.trace is not None:
                self.trace.append(("attention", layer, f"kv{h}", [words.copy()]))
            msg = attention_error(len(words), int(words[-1]) if len(words) else 0, fp.tag,
                                  layer, h, cfg)
            if msg is not None:
                raise EngineError(msg)
            res = gatt.decode_output([int(w) for w in words], cfg)
            o[h * G:(h + 1) * G] = hostops.attention_out(res["y"], res["Z"],
                                                         kv.v_step[layer, h],
                                                         cfg.scale_frac_bits)
        return o

    # ------------------------------------------------------------------ one step
    def loop_now(self) -> str:
        """The loop the next step runs: "c" or "python"."""
        if self.loop is not None:
            return self.loop
        if hostops.active() == "c":
            if hostloop.available():
                return "c"
        return "python"

    def argmax(self, logits: np.ndarray) -> int:
        """Greedy sampling: the first maximum (numpy.argmax's index). On the C loop
        (``loop_now() == "c"``) ``tph_loop_argmax``, each half of the logits on one core
        (docs/runtime.md section 9); else ``hostops.argmax``. The same index either way."""
        if self.loop_now() == "c":
            cl = hostloop.for_runtime(self.be)
            if cl is not None:
                return cl.argmax(logits)
        return hostops.argmax(logits)

    def step(self, token: int, logits: bool = True) -> Optional[np.ndarray]:
        """Run one position; return the logits (vocab,) of the next token (``logits=False``:
        a prompt token whose successor is known: the LM head is not run, None is returned)."""
        t_start = time.perf_counter()
        e_start = self.be.engine_time()
        c = self.cfg
        if self.pos >= self.max_context:
            raise ContextError(f"context full: the KV cache holds {self.max_context} positions")
        if not 0 <= token < c.vocab_size:
            raise ValueError(f"token id {token} outside the vocabulary (0..{c.vocab_size - 1})")
        if self.loop_now() == "c":
            cl = hostloop.for_runtime(self.be)
            if cl is None:
                raise RuntimeError("Decoder(loop='c'): the C library is not available "
                                   f"({hostloop.why_unavailable()})")
            out = cl.step(self, int(token), logits)
            self.token_bytes = dict(self.be.cpu_bytes)
            self.token_cache = dict(self.be.runtime.cache_ops)
        else:
            out = self._step_python(token, logits)
        self.pos += 1
        self.timing["total_s"] += time.perf_counter() - t_start
        self.timing["engine_s"] += self.be.engine_time() - e_start
        return out

    def _step_python(self, token: int, logits: bool) -> Optional[np.ndarray]:
        """The reference loop (docs/runtime.md section 4.3)."""
        c, m = self.cfg, self.model
        H, d, eps = c.hidden_size, c.head_dim, c.rms_norm_eps
        rt = self.be
        rt.begin_token(self.pos, logits)
        cos, sin = self.cos[self.pos], self.sin[self.pos]
        x = np.asarray(m.embed_row(token), np.float32)
        for i in range(c.num_hidden_layers):
            n = _rmsnorm(x, m.norms[f"layers.{i}.input"], eps)
            q, k, v = self._matrices(i, QKV, n)
            q = _rope(q.reshape(c.num_attention_heads, d), cos, sin)
            k = _rope(k.reshape(c.num_key_value_heads, d), cos, sin)
            w0, r0 = self.kv.written, self.kv.requantised
            self.kv.append(i, k, v.reshape(c.num_key_value_heads, d))
            rt.cpu_bytes["kv"] += self.kv.written - w0
            rt.cpu_bytes["requant"] += self.kv.requantised - r0
            a = self._attention(i, q).reshape(H)
            (o,) = self._matrices(i, O, a)
            x = hostops.add(x, o)
            n = _rmsnorm(x, m.norms[f"layers.{i}.post"], eps)
            g, u = self._matrices(i, GU, n)
            h = hostops.silu_mul(g, u)
            (dn,) = self._matrices(i, DOWN, h)
            x = hostops.add(x, dn)
        out = None
        if logits:
            n = _rmsnorm(x, m.norms["final"], eps)
            (out,) = self._matrices(None, LM, n)
        rt.end_token()
        self.token_bytes = dict(rt.cpu_bytes)
        self.token_cache = dict(rt.cache_ops)
        return out

    # ------------------------------------------------------------------ batched steps
    def step_rows(self, rows: Sequence[Tuple[int, int, bool]]) -> List[Optional[np.ndarray]]:
        """Run B = len(rows) positions in one weight pass (docs/runtime.md 4.7): ``rows`` is
        a list of (stream, token, logits), B at most ``rows_per_pass``; a stream's
        rows take its next positions in order (a prefill chunk: one stream's consecutive
        prompt tokens; a batched decode step: one row per stream). Every matrix transfer
        carries the B rows as one B-vector frame per matrix half; attention runs per row, each
        over its own stream's cache and causal prefix, its K/V appended just before it; the
        LM head runs once, for the rows that ask for logits only. Returns each row's logits
        or None. Each row's arithmetic is a one-token step's, op for op: the logits equal the
        token-by-token path's bit for bit. Runs the loop ``loop_now()`` names: the C loop's
        ``tph_step_rows`` or this class's Python loop (the reference)."""
        B = len(rows)
        if not 1 <= B <= self.rows_per_pass:
            raise ValueError(f"{B} rows in one weight pass; the matrix engines take 1.."
                             f"{self.rows_per_pass} rows of {self.parts()} vector(s)")
        t_start = time.perf_counter()
        e_start = self.be.engine_time()
        c = self.cfg
        pos, nxt = [], list(self.positions)
        for s, tok, _ in rows:
            if not 0 <= s < len(self.kvs):
                raise ValueError(f"stream {s} outside 0..{len(self.kvs) - 1}")
            if nxt[s] >= self.max_context:
                raise ContextError(f"context full: the KV cache holds {self.max_context} "
                                   f"positions")
            if not 0 <= tok < c.vocab_size:
                raise ValueError(f"token id {tok} outside the vocabulary (0..{c.vocab_size - 1})")
            pos.append(nxt[s])
            nxt[s] += 1
        if self.loop_now() == "c":
            cl = hostloop.for_runtime(self.be)
            if cl is None:
                raise RuntimeError("Decoder(loop='c'): the C library is not available "
                                   f"({hostloop.why_unavailable()})")
            out = cl.step_rows(self, [(int(s), int(t), bool(lg)) for s, t, lg in rows], pos)
            self.token_bytes = dict(self.be.runtime.cpu_bytes)
            self.token_cache = dict(self.be.runtime.cache_ops)
        else:
            out = self._step_rows_python(rows, pos)
        self.positions = nxt
        self.timing["total_s"] += time.perf_counter() - t_start
        self.timing["engine_s"] += self.be.engine_time() - e_start
        return out

    def _step_rows_python(self, rows, pos) -> List[Optional[np.ndarray]]:
        """The reference loop of a batched step (``step_rows`` checked the rows)."""
        c, m = self.cfg, self.model
        H, d, eps = c.hidden_size, c.head_dim, c.rms_norm_eps
        B = len(rows)
        want = [j for j, r in enumerate(rows) if r[2]]
        rt = self.be.runtime
        rt.begin_token(pos[0], bool(want))
        x = np.stack([np.asarray(m.embed_row(t), np.float32) for _, t, _ in rows])
        try:
            for i in range(c.num_hidden_layers):
                n = np.stack([_rmsnorm(x[j], m.norms[f"layers.{i}.input"], eps)
                              for j in range(B)])
                q, k, v = self._matrices_b(i, QKV, n)
                a = np.empty((B, H), np.float32)
                for j, (s, _, _) in enumerate(rows):
                    cos, sin = self.cos[pos[j]], self.sin[pos[j]]
                    qj = _rope(q[j].reshape(c.num_attention_heads, d), cos, sin)
                    kj = _rope(k[j].reshape(c.num_key_value_heads, d), cos, sin)
                    kv = self.kvs[s]
                    w0, r0 = kv.written, kv.requantised
                    L = kv.append(i, kj, v[j].reshape(c.num_key_value_heads, d))
                    rt.cpu_bytes["kv"] += kv.written - w0
                    rt.cpu_bytes["requant"] += kv.requantised - r0
                    rt.set_attention(i, s, L, again=j < B - 1)
                    a[j] = self._attention(i, qj, kv).reshape(H)
                (o,) = self._matrices_b(i, O, a)
                x = np.stack([hostops.add(x[j], o[j]) for j in range(B)])
                n = np.stack([_rmsnorm(x[j], m.norms[f"layers.{i}.post"], eps)
                              for j in range(B)])
                g, u = self._matrices_b(i, GU, n)
                h = np.stack([hostops.silu_mul(g[j], u[j]) for j in range(B)])
                (dn,) = self._matrices_b(i, DOWN, h)
                x = np.stack([hostops.add(x[j], dn[j]) for j in range(B)])
            out: List[Optional[np.ndarray]] = [None] * B
            if want:
                n = np.stack([_rmsnorm(x[j], m.norms["final"], eps) for j in want])
                (lg,) = self._matrices_b(None, LM, n)
                for r, j in enumerate(want):
                    out[j] = lg[r]
        finally:
            rt.restore_chains()
        rt.end_token()
        self.token_bytes = dict(rt.cpu_bytes)
        self.token_cache = dict(rt.cache_ops)
        return out

    def default_chunk(self) -> int:
        """The prefill chunk when none is set: ``rows_per_pass`` (one weight pass for V //
        ``parts()`` prompt tokens, on either loop: the C loop's ``tph_step_rows`` runs a B-row
        pass at about a one-token step's host work per row, make host-bench's C rows;
        docs/runtime.md 4.7)."""
        return self.rows_per_pass

    def prefill(self, prompt: Sequence[int], stream: int = 0,
                chunk: Optional[int] = None) -> np.ndarray:
        """Run a prompt on ``stream`` (from its current position) in chunks of ``chunk``
        tokens (default ``self.chunk``, else ``default_chunk()``; 1: token by token through
        ``step``), the LM head only for the last token; its logits."""
        B = int(chunk or self.chunk or self.default_chunk())
        B = max(1, min(B, self.rows_per_pass))
        prompt = [int(t) for t in prompt]
        logits = None
        if B == 1 and stream == 0:
            for j, t in enumerate(prompt):
                logits = self.step(t, logits=j == len(prompt) - 1)
            return logits
        for j0 in range(0, len(prompt), B):
            part = prompt[j0:j0 + B]
            last = j0 + len(part) == len(prompt)
            res = self.step_rows([(stream, t, last and j == len(part) - 1)
                                  for j, t in enumerate(part)])
            logits = res[-1]
        return logits

    def generate_streams(self, prompts: Sequence[Sequence[int]], max_new_tokens: int = 8,
                         temperature: float = 0.0, top_k: int = 0, seed: int = 0,
                         stop_ids: Iterable[int] = (),
                         on_token: Optional[Callable[[int, int, int], None]] = None
                         ) -> List[List[int]]:
        """Several prompts at once, each a stream with its own KV cache and position (the
        backend's plan holds ``streams`` caches): each prompt prefilled on its stream, then
        every step one weight pass for up to ``rows_per_pass`` streams (one B-vector frame per
        matrix half, a row per stream). Each stream samples with its own generator seeded
        ``seed``, so its tokens are those of ``generate(prompt, ..., seed=seed)`` alone.
        ``on_token(stream, i, token)`` after each token. Returns each stream's tokens."""
        n = len(prompts)
        if n < 1:
            raise PromptError("no prompts")
        if n > len(self.kvs):
            raise ValueError(f"{n} prompts, the backend holds {len(self.kvs)} streams' KV "
                             f"caches (memory_plan(..., streams=N))")
        ps = [check_prompt(p, self.max_context, self.cfg.vocab_size) for p in prompts]
        stop = set(int(t) for t in stop_ids)
        rngs = [np.random.default_rng(seed) for _ in ps]
        self.reset()
        logits: Dict[int, np.ndarray] = {s: self.prefill(p, stream=s) for s, p in enumerate(ps)}
        out: List[List[int]] = [[] for _ in ps]
        self.last_logits_streams = {}
        while logits:
            nxt = []
            for s in sorted(logits):
                tok = sample(logits[s], temperature, top_k, rngs[s], self.argmax)
                self.last_logits_streams[s] = logits[s]
                out[s].append(tok)
                if on_token is not None:
                    on_token(s, len(out[s]) - 1, tok)
                if not (tok in stop or len(out[s]) == max_new_tokens
                        or self.positions[s] >= self.max_context):
                    nxt.append((s, tok))
            logits = {}
            V = self.rows_per_pass
            for g in range(0, len(nxt), V):
                grp = nxt[g:g + V]
                res = self.step_rows([(s, t, True) for s, t in grp])
                for (s, _), lg in zip(grp, res):
                    logits[s] = lg
        return out

    def generate(self, prompt_ids: Sequence[int], max_new_tokens: int = 8,
                 temperature: float = 0.0, top_k: int = 0, seed: int = 0,
                 stop_ids: Iterable[int] = (),
                 on_token: Optional[Callable[[int, int, np.ndarray], None]] = None,
                 speculate: int = 0) -> Iterator[int]:
        """Yield up to max_new_tokens tokens after the prompt (greedy when temperature is 0).

        The prompt runs in chunks of B tokens (``prefill``), without the LM head except for
        its last token; then one token per step. A prompt longer than
        the context is refused before any engine work; generation ends when the context is
        full. ``speculate`` K > 0 (greedy only): each step also checks up to K tokens drafted
        by prompt lookup in the same weight pass (``_speculative``); the tokens are the plain
        run's, ``self.speculation`` counts drafted and accepted tokens."""
        prompt = check_prompt(prompt_ids, self.max_context, self.cfg.vocab_size)
        stop = set(int(s) for s in stop_ids)
        rng = np.random.default_rng(seed)
        if speculate:
            if speculate < 0:
                raise ValueError(f"speculate {speculate}: 0 (off) or the most tokens to draft")
            if temperature > 0:
                raise ValueError("speculative decoding keeps greedy output only: temperature 0")
        self.reset()
        logits = self.prefill(prompt)
        #: speculative decoding's counts (generate(speculate=K)): weight passes, drafted and
        #: accepted tokens, and per pass (its first position, its rows)
        self.speculation = {"passes": 0, "drafted": 0, "accepted": 0, "rows": []}
        if speculate and self.rows_per_pass > 1:
            yield from self._speculative(prompt, logits, max_new_tokens, stop, on_token,
                                         min(int(speculate), self.rows_per_pass - 1))
            return
        for i in range(max_new_tokens):
            tok = sample(logits, temperature, top_k, rng, self.argmax)
            self.last_logits = logits
            if on_token is not None:
                on_token(i, tok, logits)
            yield tok
            if tok in stop or i == max_new_tokens - 1 or self.pos >= self.max_context:
                return
            logits = self.step(tok)

    def _speculative(self, prompt: List[int], logits: np.ndarray, max_new_tokens: int,
                     stop: set, on_token, K: int) -> Iterator[int]:
        """Greedy decoding that checks drafted tokens in the weight pass of the token they
        follow: rows [token, d1 .. dk] (k <= K, 1 + k <= rows_per_pass) in one ``step_rows``; row i's
        logits are the one-token step's after d1 .. di (bit for bit), so d(i+1) is kept while it
        is their argmax, and the first argmax that differs is the next token. The KV rows of
        the drafts not kept are taken back exactly (``KVCache.begin_undo`` / ``end_undo``)."""
        ctx = list(prompt)
        emitted = 0
        while True:
            tok = self.argmax(logits)
            self.last_logits = logits
            if on_token is not None:
                on_token(emitted, tok, logits)
            yield tok
            emitted += 1
            ctx.append(tok)
            if tok in stop or emitted == max_new_tokens or self.pos >= self.max_context:
                return
            room = min(max_new_tokens - emitted, self.max_context - self.pos) - 1
            drafts = lookup_draft(ctx, min(K, self.rows_per_pass - 1, room)) if room > 0 else []
            if not drafts:
                self.speculation["rows"].append((self.pos, 1))
                logits = self.step(tok)
                self.speculation["passes"] += 1
                continue
            pre = self.pos
            self.speculation["rows"].append((pre, 1 + len(drafts)))
            self.kv.begin_undo()
            keep = None
            try:
                res = self.step_rows([(0, tok, True)] + [(0, d, True) for d in drafts])
                self.speculation["passes"] += 1
                self.speculation["drafted"] += len(drafts)
                i = 0
                while i < len(drafts):
                    nxt = self.argmax(res[i])
                    if nxt != drafts[i]:
                        break
                    # the draft is the plain run's next token: emit it from its own logits
                    self.speculation["accepted"] += 1
                    self.last_logits = res[i]
                    if on_token is not None:
                        on_token(emitted, nxt, res[i])
                    yield nxt
                    emitted += 1
                    ctx.append(nxt)
                    i += 1
                    if nxt in stop or emitted == max_new_tokens or \
                            pre + i >= self.max_context:
                        keep = i
                        return
                keep = i + 1
                logits = res[i]
            finally:
                self.kv.end_undo(keep)
                if keep is not None:
                    self.pos = pre + keep


def default_x_parts(model: Model, vectors: int) -> int:
    """Vectors per row of x in the matrices of blocks when none is set: 2 where the frames
    take two vectors and the model's layer matrices take x in blocks (``--format q4`` and
    ``int8``), else 1 (docs/activations.md section 7)."""
    blocks = any(m.block_x for n, m in model.matrices.items() if n != "lm_head")
    return 2 if blocks and vectors >= 2 else 1


def lookup_draft(ctx: Sequence[int], k: int, max_ngram: int = 3) -> List[int]:
    """Prompt lookup: the up to ``k`` tokens that followed an earlier occurrence of the
    context's last n tokens (n = max_ngram down to 1: the longest match wins; among its
    occurrences the latest that is followed by k tokens, else the one followed by most)."""
    if k <= 0:
        return []
    ctx = list(ctx)
    for n in range(min(max_ngram, len(ctx) - 1), 0, -1):
        tail = ctx[-n:]
        best: List[int] = []
        for start in range(len(ctx) - n - 1, -1, -1):
            if ctx[start:start + n] == tail:
                follow = ctx[start + n:start + n + k]
                if len(follow) > len(best):
                    best = follow
                if len(best) == k:
                    break
        if best:
            return best
    return []
