"""The decoder step (SmolLM2 / LLaMA): matrices and attention on the engines, the small ops
(RMSNorm, RoPE, residuals, SiLU, quantisation, sampling) in numpy, as on the Cortex-A9.

    dec = Decoder(model, backend)
    for tok in dec.generate([1, 2, 3], max_new_tokens=8): ...

Every engine output is checked: a status word with flags raises EngineError naming the flags,
the layer and the matrix; a count or tag that is not the frame's raises too.
"""
from __future__ import annotations

import math
import time
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence

import numpy as np

from generators.golden import attention as gatt
from generators.golden.mv import FLAG_NAMES

from .model import Model, QMatrix
from .quantise import KVCache, quantise_activations

__all__ = ["Decoder", "EngineError", "ContextError", "PromptError", "check_prompt",
           "rope_tables", "sample"]


class EngineError(RuntimeError):
    """An engine answered with error flags, a wrong count or a wrong tag."""


class ContextError(ValueError):
    """The prompt does not fit the attention engine's max_context."""


class PromptError(ValueError):
    """A prompt without tokens, or with an id outside the vocabulary."""


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


ATT_FLAGS = {gatt.FLAG_BAD_MAGIC: "BAD_MAGIC", gatt.FLAG_BAD_SHAPE: "BAD_SHAPE",
             gatt.FLAG_BAD_FORMAT: "BAD_FORMAT", gatt.FLAG_SHORT_FRAME: "SHORT_FRAME",
             gatt.FLAG_LONG_FRAME: "LONG_FRAME"}


def _flag_table(fmt: str) -> Dict[int, str]:
    """The matrix engine's flag names; bit 5 is BAD_TRIT for ternary rows, BAD_SCALE (an
    Inf/NaN d or m) for Q4_1 rows."""
    t = dict(FLAG_NAMES)
    if fmt == "q4":
        t = {b: ("BAD_SCALE" if b == 0x20 else v) for b, v in t.items()}
    return t


def _names(flags: int, table: Dict[int, str]) -> str:
    return ", ".join(n for b, n in table.items() if flags & b) or f"0x{flags:02X}"


def rope_tables(head_dim: int, theta: float, positions: int):
    """cos, sin (positions, head_dim) in the HF rotate_half layout."""
    inv = 1.0 / (theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim))
    ang = np.arange(positions, dtype=np.float64)[:, None] * inv[None, :]
    ang = np.concatenate([ang, ang], axis=1)
    return np.cos(ang), np.sin(ang)


def _rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    h = x.shape[-1] // 2
    rot = np.concatenate([-x[..., h:], x[..., :h]], axis=-1)
    return x * cos + rot * sin


def _rmsnorm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x) + eps) * w


def sample(logits: np.ndarray, temperature: float, top_k: int,
           rng: np.random.Generator) -> int:
    """Greedy (temperature 0: the first maximum) or temperature / top-k sampling."""
    if temperature <= 0:
        return int(np.argmax(logits))
    z = np.asarray(logits, np.float64) / temperature
    if 0 < top_k < len(z):
        kth = np.partition(z, -top_k)[-top_k]
        z = np.where(z >= kth, z, -np.inf)
    z = z - np.max(z)
    p = np.exp(z)
    p /= p.sum()
    return int(rng.choice(len(p), p=p))


class Decoder:
    def __init__(self, model: Model, backend, trace: Optional[list] = None):
        self.model = model
        self.be = backend
        self.cfg = model.config
        self.acfg = model.engines.attention_config()
        self.trace = trace
        c = self.cfg
        self.max_context = model.engines.max_context
        self.cos, self.sin = rope_tables(c.head_dim, c.rope_theta, self.max_context)
        self.tag = 0
        self.reset()
        self.timing = {"matrix_s": 0.0, "attention_s": 0.0, "total_s": 0.0}

    def reset(self) -> None:
        c = self.cfg
        self.kv = KVCache(c.num_hidden_layers, c.num_key_value_heads, self.max_context,
                          c.head_dim)
        self.pos = 0

    def _next_tag(self) -> int:
        self.tag = (self.tag + 1) & 0xFF
        return self.tag

    # ------------------------------------------------------------------ engines
    def _matvecs(self, layer, mats: Sequence[QMatrix], x: np.ndarray) -> List[np.ndarray]:
        """Real outputs of several matrices that share the input x."""
        xq, sx = quantise_activations(x)
        calls = [(m, xq, self._next_tag()) for m in mats]
        t0 = time.perf_counter()
        words = self.be.matrices(calls)
        self.timing["matrix_s"] += time.perf_counter() - t0
        out = []
        for (m, _, tag), per_port in zip(calls, words):
            acc = []
            for p, w in enumerate(per_port):
                acc.append(self._check_matrix(w, m, p, tag, layer))
            if self.trace is not None:
                self.trace.append(("matrix", layer, m.name, [np.asarray(w, np.uint32).copy()
                                                            for w in per_port]))
            y = np.concatenate(acc)
            # INT8 / ternary rows: exact int32 sums; Q4_1 rows: float32 sum(w * x_int8)
            y = (y.view(np.float32) if m.fmt == "q4" else y.view(np.int32)).astype(np.float64)
            out.append(y * m.scale / sx)
        return out

    @staticmethod
    def _where(layer, name):
        return f"layer {layer}, matrix {name.split('.')[-1]}" if layer is not None \
            else f"matrix {name}"

    def _check_matrix(self, words, m: QMatrix, port: int, tag: int, layer) -> np.ndarray:
        words = np.asarray(words, np.uint32)
        where = self._where(layer, m.name) + f", port {port}"
        if len(words) == 0:
            raise EngineError(f"no output words ({where})")
        st = int(words[-1])
        t, flags, count = st & 0xFF, (st >> 8) & 0xFF, st >> 16
        if flags:
            hint = ""
            if flags & 0x04 and m.fmt == "q4":           # BAD_FORMAT
                hint = ("; the overlay's matrix engines have no Q4_1 lane (format 0x04): "
                        "render it with q4=true, or convert the model to int8")
            raise EngineError(f"matrix engine status flags "
                              f"{_names(flags, _flag_table(m.fmt))} "
                              f"({where}, tag {t}, {count} results){hint}")
        n = m.rows[port]
        if count != n or len(words) != n + 1:
            raise EngineError(f"matrix engine sent {len(words) - 1} results with count {count} "
                              f"for {n} rows ({where})")
        if t != tag:
            raise EngineError(f"matrix engine status tag {t}, frame tag {tag} ({where})")
        return words[:-1]

    def _attention(self, layer: int, q: np.ndarray) -> np.ndarray:
        """q (heads, d) real -> attention output (heads, d) real, one engine frame per KV head."""
        c, cfg = self.cfg, self.acfg
        G, d = c.group, c.head_dim
        L = int(self.kv.length[layer])
        frames = []
        for h in range(c.num_key_value_heads):
            qg = q[h * G:(h + 1) * G]
            qi, sq = quantise_activations(qg)          # per query head (G scales)
            kstep = self.kv.k_step[layer, h]
            mults, shifts = [], []
            for g in range(G):
                cval = kstep / (sq[g] * math.sqrt(d))
                m_, s_ = gatt.score_multiplier(cval, cfg)
                mults.append(m_)
                shifts.append(s_)
            tag = self._next_tag()
            fr = gatt.build_attention_frame(qi, self.kv.K[layer, h, :L], self.kv.V[layer, h, :L],
                                            mults, shifts, tag, cfg)
            frames.append((fr, tag))
        t0 = time.perf_counter()
        outs = self.be.attention(frames)
        self.timing["attention_s"] += time.perf_counter() - t0
        o = np.empty((c.num_attention_heads, d))
        for h, ((fr, tag), words) in enumerate(zip(frames, outs)):
            words = np.asarray(words, np.uint32)
            if self.trace is not None:
                self.trace.append(("attention", layer, f"kv{h}", [words.copy()]))
            where = f"layer {layer}, attention KV head {h}"
            if len(words) == 0:
                raise EngineError(f"no output words ({where})")
            res = gatt.decode_output([int(w) for w in words], cfg)
            if res["flags"]:
                raise EngineError(f"attention engine status flags "
                                  f"{_names(res['flags'], ATT_FLAGS)} ({where}, tag {res['tag']})")
            if res["y"] is None or res["count"] != gatt.output_word_count(cfg):
                raise EngineError(f"attention engine sent {len(words) - 1} words, count "
                                  f"{res['count']} ({where})")
            if res["tag"] != tag:
                raise EngineError(f"attention engine status tag {res['tag']}, frame tag {tag} "
                                  f"({where})")
            o[h * G:(h + 1) * G] = gatt.dequantise(res["y"], res["Z"], cfg) \
                * self.kv.v_step[layer, h]
        return o

    # ------------------------------------------------------------------ one step
    def step(self, token: int) -> np.ndarray:
        """Run one position; return the logits (vocab,) of the next token."""
        t_start = time.perf_counter()
        c, m = self.cfg, self.model
        if self.pos >= self.max_context:
            raise ContextError(f"context full: the attention engine's max_context is "
                               f"{self.max_context}")
        if not 0 <= token < c.vocab_size:
            raise ValueError(f"token id {token} outside the vocabulary (0..{c.vocab_size - 1})")
        H, d, eps = c.hidden_size, c.head_dim, c.rms_norm_eps
        cos, sin = self.cos[self.pos], self.sin[self.pos]
        x = m.embed[token].astype(np.float64)
        for i in range(c.num_hidden_layers):
            n = _rmsnorm(x, m.norms[f"layers.{i}.input"], eps)
            q, k, v = self._matvecs(i, [m.matrix(i, "q"), m.matrix(i, "k"), m.matrix(i, "v")], n)
            q = _rope(q.reshape(c.num_attention_heads, d), cos, sin)
            k = _rope(k.reshape(c.num_key_value_heads, d), cos, sin)
            self.kv.append(i, k, v.reshape(c.num_key_value_heads, d))
            a = self._attention(i, q).reshape(H)
            (o,) = self._matvecs(i, [m.matrix(i, "o")], a)
            x = x + o
            n = _rmsnorm(x, m.norms[f"layers.{i}.post"], eps)
            g, u = self._matvecs(i, [m.matrix(i, "gate"), m.matrix(i, "up")], n)
            h = g / (1.0 + np.exp(-g)) * u
            (dn,) = self._matvecs(i, [m.matrix(i, "down")], h)
            x = x + dn
        n = _rmsnorm(x, m.norms["final"], eps)
        (logits,) = self._matvecs(None, [m.matrix(None, "lm_head")], n)
        self.pos += 1
        self.timing["total_s"] += time.perf_counter() - t_start
        return logits

    def generate(self, prompt_ids: Sequence[int], max_new_tokens: int = 8,
                 temperature: float = 0.0, top_k: int = 0, seed: int = 0,
                 stop_ids: Iterable[int] = (),
                 on_token: Optional[Callable[[int, int, np.ndarray], None]] = None
                 ) -> Iterator[int]:
        """Yield up to max_new_tokens tokens after the prompt (greedy when temperature is 0).

        A prompt longer than max_context is refused before any engine work; generation ends
        when the context is full."""
        prompt = check_prompt(prompt_ids, self.max_context, self.cfg.vocab_size)
        stop = set(int(s) for s in stop_ids)
        rng = np.random.default_rng(seed)
        self.reset()
        logits = None
        for t in prompt:
            logits = self.step(t)
        for i in range(max_new_tokens):
            tok = sample(logits, temperature, top_k, rng)
            self.last_logits = logits
            if on_token is not None:
                on_token(i, tok, logits)
            yield tok
            if tok in stop or i == max_new_tokens - 1 or self.pos >= self.max_context:
                return
            logits = self.step(tok)
