"""A float64 LLaMA decoder written for the tests from the HF definition alone: it shares no code
with generators/runtime (its own safetensors read, quantisers, RoPE, attention).

Weights are the runtime's weight formats, dequantised (ternary: absmean per matrix; INT8:
absmax per row); activations, the KV cache and the softmax stay float64. Comparing its logits
with the runtime's measures what INT8 activations, the INT8 KV cache and the fixed-point
attention engine cost.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file


def dequantised(W: np.ndarray, fmt: str) -> np.ndarray:
    W = W.astype(np.float64)
    if fmt == "float":
        return W
    if fmt == "ternary":
        s = np.abs(W).mean()
        return np.clip(np.round(W / (s + 1e-5)), -1, 1) * s
    s = np.abs(W).max(axis=1, keepdims=True) / 127.0
    s[s == 0] = 1.0
    return np.clip(np.round(W / s), -127, 127) * s


class Reference:
    def __init__(self, folder, fmt: str):
        folder = Path(folder)
        c = json.loads((folder / "config.json").read_text())
        t = load_file(str(folder / "model.safetensors"))
        self.c = c
        self.H = c["hidden_size"]
        self.nh, self.nkv = c["num_attention_heads"], c["num_key_value_heads"]
        self.d = self.H // self.nh
        self.eps, self.theta = c["rms_norm_eps"], c["rope_theta"]
        self.emb = t["model.embed_tokens.weight"].astype(np.float64)
        self.head = dequantised(t["model.embed_tokens.weight"], fmt)
        self.final = t["model.norm.weight"].astype(np.float64)
        self.layers = []
        for i in range(c["num_hidden_layers"]):
            p = f"model.layers.{i}."
            L = {k: dequantised(t[p + n + ".weight"], fmt) for k, n in [
                ("q", "self_attn.q_proj"), ("k", "self_attn.k_proj"), ("v", "self_attn.v_proj"),
                ("o", "self_attn.o_proj"), ("g", "mlp.gate_proj"), ("u", "mlp.up_proj"),
                ("dn", "mlp.down_proj")]}
            L["n1"] = t[p + "input_layernorm.weight"].astype(np.float64)
            L["n2"] = t[p + "post_attention_layernorm.weight"].astype(np.float64)
            self.layers.append(L)
        self.K = [[] for _ in self.layers]
        self.V = [[] for _ in self.layers]

    def _norm(self, x, w):
        return w * x / np.sqrt((x ** 2).mean() + self.eps)

    def _rope(self, x, pos):
        half = self.d // 2
        f = pos / self.theta ** (np.arange(half) * 2.0 / self.d)
        cs, sn = np.cos(f), np.sin(f)
        a, b = x[..., :half], x[..., half:]
        return np.concatenate([a * cs - b * sn, b * cs + a * sn], axis=-1)

    def step(self, tok: int) -> np.ndarray:
        pos = len(self.K[0])
        x = self.emb[tok].copy()
        G = self.nh // self.nkv
        for i, L in enumerate(self.layers):
            h = self._norm(x, L["n1"])
            q = self._rope((L["q"] @ h).reshape(self.nh, self.d), pos)
            k = self._rope((L["k"] @ h).reshape(self.nkv, self.d), pos)
            v = (L["v"] @ h).reshape(self.nkv, self.d)
            self.K[i].append(k)
            self.V[i].append(v)
            Ks, Vs = np.stack(self.K[i], 1), np.stack(self.V[i], 1)    # (kv, T, d)
            out = np.empty((self.nh, self.d))
            for hq in range(self.nh):
                s = Ks[hq // G] @ q[hq] / np.sqrt(self.d)
                w = np.exp(s - s.max())
                out[hq] = (w / w.sum()) @ Vs[hq // G]
            x = x + L["o"] @ out.reshape(-1)
            h = self._norm(x, L["n2"])
            g, u = L["g"] @ h, L["u"] @ h
            x = x + L["dn"] @ (g / (1 + np.exp(-g)) * u)
        return self.head @ self._norm(x, self.final)
