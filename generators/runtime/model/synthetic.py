"""Seeded random LLaMA-family checkpoints in the HF layout (config.json + model.safetensors).

``write_checkpoint(dir, TINY)`` for the tests, ``write_checkpoint(dir, SMOLLM2_135M)`` for
``make decode`` (the full SmolLM2-135M shapes, random weights). The weights are Gaussian with the
scales of a trained model (std 0.02 matrices; norm weights near 1) so that activations have
realistic ranges; they carry no language.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .. import optional

TINY = dict(hidden_size=192, intermediate_size=512, num_hidden_layers=2, num_attention_heads=3,
            num_key_value_heads=1, rms_norm_eps=1e-5, rope_theta=10000.0, vocab_size=512,
            tie_word_embeddings=True)
SMOLLM2_135M = dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                    num_attention_heads=9, num_key_value_heads=3, rms_norm_eps=1e-5,
                    rope_theta=100000.0, vocab_size=49152, tie_word_embeddings=True)


def write_checkpoint(path, cfg: dict = TINY, seed: int = 0, std: float = 0.02,
                     embed_std: float = 1.0) -> Path:
    save_file = optional.module("safetensors.numpy").save_file
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    H, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    d = H // cfg["num_attention_heads"]
    kv = cfg["num_key_value_heads"] * d

    def mat(n, k, s=std):
        return (rng.standard_normal((n, k), dtype=np.float32) * s).astype(np.float32)

    def norm(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    t = {"model.embed_tokens.weight": mat(V, H, std * embed_std), "model.norm.weight": norm(H)}
    for i in range(cfg["num_hidden_layers"]):
        a, m = f"model.layers.{i}.self_attn", f"model.layers.{i}.mlp"
        # q and k 4x larger than the rest so that attention is not flat
        t[f"{a}.q_proj.weight"] = mat(H, H, 4 * std)
        t[f"{a}.k_proj.weight"] = mat(kv, H, 4 * std)
        t[f"{a}.v_proj.weight"] = mat(kv, H)
        t[f"{a}.o_proj.weight"] = mat(H, H)
        t[f"{m}.gate_proj.weight"] = mat(I, H)
        t[f"{m}.up_proj.weight"] = mat(I, H)
        t[f"{m}.down_proj.weight"] = mat(H, I)
        t[f"model.layers.{i}.input_layernorm.weight"] = norm(H)
        t[f"model.layers.{i}.post_attention_layernorm.weight"] = norm(H)
    save_file(t, str(path / "model.safetensors"))
    conf = dict(cfg, architectures=["LlamaForCausalLM"], model_type="llama",
                hidden_act="silu", max_position_embeddings=2048)
    (path / "config.json").write_text(json.dumps(conf, indent=1))
    return path
