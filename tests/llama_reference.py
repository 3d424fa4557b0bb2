"""A float64 LLaMA forward pass of a GGUF file, for the tests and the quality measurement.

It shares no code with ``generators.runtime``: its own GGUF-to-float path (the ``gguf``
package's reader and dequantiser, its own tensor names and its own undoing of llama.cpp's
q/k permutation) and its own forward pass (float64 everywhere: weights, activations, KV,
softmax; RoPE in the rotate_half convention). It processes a whole sequence at once with a
causal mask, so one call gives the next-token logits at every position (teacher forcing).

    ref = Reference.from_gguf(path)                       # float weights
    ref = Reference.from_gguf(path, weights="int8")       # INT8 absmax per row, dequantised
    logits = ref.logits(ids)                              # (len(ids), vocab)
"""
from __future__ import annotations

import numpy as np


def _read(path):
    import gguf
    from gguf.quants import dequantize
    r = gguf.GGUFReader(str(path), "r")

    def val(key):
        f = r.fields[key]
        return f.parts[f.data[0]].tolist()[0]

    cfg = dict(dim=val("llama.embedding_length"), layers=val("llama.block_count"),
               heads=val("llama.attention.head_count"), kv=val("llama.attention.head_count_kv"),
               eps=float(val("llama.attention.layer_norm_rms_epsilon")),
               theta=float(val("llama.rope.freq_base")))
    w = {}
    for t in r.tensors:
        shape = tuple(int(x) for x in t.shape[::-1])
        w[t.name] = dequantize(t.data, t.tensor_type).astype(np.float64).reshape(shape)
    return cfg, w


def _unpermute(w, heads):
    # llama.cpp: stored row 2b + a of a head is the HF row a*d/2 + b
    n, k = w.shape
    d = n // heads
    out = np.empty_like(w)
    for h in range(heads):
        for b in range(d // 2):
            for a in range(2):
                out[h * d + a * d // 2 + b] = w[h * d + 2 * b + a]
    return out


def int8_rows(W):
    s = np.abs(W).max(axis=1, keepdims=True) / 127.0
    s[s == 0] = 1.0
    return np.clip(np.round(W / s), -127, 127) * s


def ternary_absmean(W):
    g = np.abs(W).mean() + 1e-5
    return np.clip(np.round(W / g), -1, 1) * g


class Reference:
    def __init__(self, cfg, w):
        self.cfg, self.w = cfg, w

    @classmethod
    def from_gguf(cls, path, weights="float"):
        cfg, w = _read(path)
        for i in range(cfg["layers"]):
            w[f"blk.{i}.attn_q.weight"] = _unpermute(w[f"blk.{i}.attn_q.weight"], cfg["heads"])
            w[f"blk.{i}.attn_k.weight"] = _unpermute(w[f"blk.{i}.attn_k.weight"], cfg["kv"])
        if "output.weight" not in w:
            w["output.weight"] = w["token_embd.weight"]
        return cls(cfg, w).with_weights(weights)

    def with_weights(self, weights):
        """The same model with its matrices (LM head included, embedding lookup not)
        quantised and dequantised: "float" (as read), "int8" (absmax per row) or "ternary"
        (BitNet absmean per matrix)."""
        q = {"float": None, "int8": int8_rows, "ternary": ternary_absmean}[weights]
        if q is None:
            return self
        w = {name: (q(v) if v.ndim == 2 and name != "token_embd.weight" else v)
             for name, v in self.w.items()}
        return Reference(self.cfg, w)

    def logits(self, ids, cache=None):
        """The logits of every position of ``ids``; with ``cache`` (a dict, empty at first)
        ``ids`` continue the tokens of earlier calls: their K and V rows (float64) are kept
        there and the positions run on (an incremental pass; the same arithmetic per row)."""
        c, w = self.cfg, self.w
        T, H, KV = len(ids), c["heads"], c["kv"]
        p0 = 0 if cache is None else cache.get("p0", 0)
        d = c["dim"] // H
        x = w["token_embd.weight"][np.asarray(ids)]
        inv = c["theta"] ** (-np.arange(0, d, 2) / d)
        ang = np.arange(p0, p0 + T)[:, None] * inv[None, :]
        cos = np.cos(np.concatenate([ang, ang], 1))[:, None, :]
        sin = np.sin(np.concatenate([ang, ang], 1))[:, None, :]

        def norm(v, g):
            return v / np.sqrt((v * v).mean(-1, keepdims=True) + c["eps"]) * g

        def rope(v):
            return v * cos + np.concatenate([-v[..., d // 2:], v[..., :d // 2]], -1) * sin

        mask = np.triu(np.full((T, p0 + T), -np.inf), p0 + 1)
        for i in range(c["layers"]):
            p = f"blk.{i}."
            h = norm(x, w[p + "attn_norm.weight"])
            q = rope((h @ w[p + "attn_q.weight"].T).reshape(T, H, d))
            k = rope((h @ w[p + "attn_k.weight"].T).reshape(T, KV, d))
            v = (h @ w[p + "attn_v.weight"].T).reshape(T, KV, d)
            if cache is not None:
                if i in cache:
                    k = np.concatenate([cache[i][0], k])
                    v = np.concatenate([cache[i][1], v])
                cache[i] = (k, v)
            k = np.repeat(k, H // KV, axis=1)
            v = np.repeat(v, H // KV, axis=1)
            s = np.einsum("thd,shd->hts", q, k) / np.sqrt(d) + mask
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            a = np.einsum("hts,shd->thd", s, v).reshape(T, H * d)
            x = x + a @ w[p + "attn_output.weight"].T
            h = norm(x, w[p + "ffn_norm.weight"])
            g = h @ w[p + "ffn_gate.weight"].T
            x = x + (g / (1 + np.exp(-g)) * (h @ w[p + "ffn_up.weight"].T)) @ w[p + "ffn_down.weight"].T
        if cache is not None:
            cache["p0"] = p0 + T
        return norm(x, w["output_norm.weight"]) @ w["output.weight"].T

    def greedy(self, ids, n, stop=()):
        ids = list(ids)
        out = []
        for _ in range(n):
            t = int(np.argmax(self.logits(ids)[-1]))
            out.append(t)
            if t in stop:
                break
            ids.append(t)
        return out
