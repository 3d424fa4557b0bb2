"""GGUF reader and tokenizer on small synthetic GGUF files (written by tests/gguf_files.py)."""
import numpy as np
import pytest

import gguf  # installed by make setup (requirements.txt)
import tokenizers  # noqa: F401

from gguf import GGMLQuantizationType as T  # noqa: E402

from generators.runtime.model.gguf import GGUFError, read_gguf  # noqa: E402
from generators.runtime.model.tokenizer import Tokenizer, TokenizerError  # noqa: E402
import gguf_files  # noqa: E402  (tests/ is on sys.path)


@pytest.fixture(scope="module")
def f32_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    return p, gguf_files.write_llama(p)


def test_config_names_and_float_tensors(f32_file):
    p, t = f32_file
    g = read_gguf(p)
    assert g.config == dict(hidden_size=192, intermediate_size=256, num_hidden_layers=2,
                            num_attention_heads=3, num_key_value_heads=1,
                            rms_norm_eps=pytest.approx(1e-5), rope_theta=10000.0,
                            vocab_size=len(gguf_files.vocabulary()), tie_word_embeddings=True)
    assert len(g.tensors) == len(t)
    # the q/k permutation of llama.cpp undone: the HF rows come back exactly
    np.testing.assert_array_equal(g.tensors["model.layers.1.self_attn.q_proj.weight"],
                                  t["blk.1.attn_q.weight"])
    np.testing.assert_array_equal(g.tensors["model.layers.0.self_attn.k_proj.weight"],
                                  t["blk.0.attn_k.weight"])
    np.testing.assert_array_equal(g.tensors["model.layers.0.mlp.down_proj.weight"],
                                  t["blk.0.ffn_down.weight"])
    np.testing.assert_array_equal(g.tensors["model.embed_tokens.weight"], t["token_embd.weight"])
    np.testing.assert_array_equal(g.tensors["model.layers.1.post_attention_layernorm.weight"],
                                  t["blk.1.ffn_norm.weight"])
    assert g.raw == {}


def test_permutation_is_llama_cpp_row_2b_plus_a():
    from generators.runtime.model.gguf import unpermute_rows
    d, heads = 8, 2
    hf = np.arange(heads * d)[:, None] * np.ones((1, 3))
    stored = gguf_files.llama_permute(hf, heads)
    for h in range(heads):
        for b in range(d // 2):
            for a in range(2):
                assert stored[h * d + 2 * b + a, 0] == hf[h * d + a * d // 2 + b, 0]
    np.testing.assert_array_equal(unpermute_rows(stored, heads), hf)


def stored_row_of_hf(n, heads):
    """inv[r] = the stored row that holds HF row r (llama.cpp: HF a*d/2 + b at 2b + a)."""
    d = n // heads
    inv = np.empty(n, int)
    for h in range(heads):
        for b in range(d // 2):
            for a in range(2):
                inv[h * d + a * d // 2 + b] = h * d + 2 * b + a
    return inv


@pytest.mark.parametrize("qtype", [T.Q4_1, T.Q8_0, T.F16])
def test_quantised_types_and_raw_blocks(tmp_path, qtype):
    from gguf.quants import dequantize, quantize
    p = tmp_path / "q.gguf"
    t = gguf_files.write_llama(p, layers=1, qtype=qtype)
    g = read_gguf(p)
    for hf, name, heads in (("model.layers.0.self_attn.q_proj.weight", "blk.0.attn_q.weight", 3),
                            ("model.layers.0.mlp.up_proj.weight", "blk.0.ffn_up.weight", None)):
        stored = t[name] if heads is None else gguf_files.llama_permute(t[name], heads)
        rows = np.arange(stored.shape[0]) if heads is None else \
            stored_row_of_hf(stored.shape[0], heads)
        blocks = quantize(stored, qtype)
        want = dequantize(blocks, qtype).reshape(stored.shape)[rows]
        np.testing.assert_array_equal(g.tensors[hf], want)
        if heads is not None:   # and the rows are the HF rows, up to the quantisation error
            assert np.max(np.abs(g.tensors[hf] - t[name])) < 0.25 * np.max(np.abs(t[name]))
        assert g.types[hf] == qtype.name
        if qtype == T.F16:
            assert hf not in g.raw
        else:
            raw = g.raw[hf]
            assert raw.qtype == qtype.name and raw.shape == stored.shape
            np.testing.assert_array_equal(raw.blocks, blocks[rows])


def test_another_architecture_is_refused(tmp_path):
    p = tmp_path / "qwen.gguf"
    gguf_files.write_llama(p, arch="qwen2", layers=1)
    with pytest.raises(GGUFError, match=r"general.architecture is 'qwen2'.*only 'llama'"):
        read_gguf(p)


def test_unreadable_tensor_type_is_named(tmp_path):
    p = tmp_path / "i8.gguf"
    t = gguf_files.hf_tensors(layers=1, vocab=len(gguf_files.vocabulary()))
    bad = np.zeros(t["blk.0.ffn_up.weight"].shape, np.int8)
    gguf_files.write_llama(p, layers=1, tensors=t,
                           raw_types={"blk.0.ffn_up.weight": (bad, T.I8)})
    with pytest.raises(GGUFError, match=r"tensor 'blk.0.ffn_up.weight' has type I8.*cannot "
                                        r"dequantise"):
        read_gguf(p)


def test_unknown_tensor_is_named(tmp_path):
    p = tmp_path / "extra.gguf"
    gguf_files.write_llama(p, layers=1,
                           extra_tensors={"blk.0.attn_q_norm.weight": np.ones(64, np.float32)})
    with pytest.raises(GGUFError, match=r"tensor 'blk.0.attn_q_norm.weight' is not a llama "
                                        r"tensor"):
        read_gguf(p)


def test_not_a_gguf_file(tmp_path):
    p = tmp_path / "x.gguf"
    p.write_bytes(b"not a gguf file at all")
    with pytest.raises(GGUFError, match="x.gguf"):
        read_gguf(p)


# ------------------------------------------------------------------------------ tokenizer

def test_tokenizer_from_gguf(f32_file):
    p, _ = f32_file
    tok = Tokenizer.from_gguf(p)
    vocab = gguf_files.vocabulary()
    # the merges apply: "hello world" -> hell o Ġwo rld
    ids = tok.encode("hello world")
    assert [vocab[i] for i in ids] == ["hell", "o", "Ġwo", "rld"]
    assert tok.decode(ids) == "hello world"
    # every byte round-trips (byte-level BPE), digits split one by one (pre "smollm")
    text = "Zürich 2024 — ok?\n\t"
    assert tok.decode(tok.encode(text)) == text
    assert [vocab[i] for i in tok.encode("2024")] == ["2", "0", "2", "4"]
    # specials are one id each and never split
    assert tok.encode("<|im_start|>user<|im_end|>") == [1] + tok.encode("user") + [2]
    assert tok.eos_ids == (2,)
    s = tok.apply_chat_template([{"role": "user", "content": "hi"}])
    assert s == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert tok.chat_ids("hi") == tok.encode(s)


def test_vocabulary_without_merges_is_refused(tmp_path):
    p = tmp_path / "nomerges.gguf"
    gguf_files.write_llama(p, layers=1, merges=[])
    with pytest.raises(TokenizerError, match="no merges"):
        Tokenizer.from_gguf(p)


def test_template_runs_in_the_sandbox(f32_file):
    p, _ = f32_file
    tok = Tokenizer.from_gguf(p)
    tok.chat_template = "{{ messages.__class__.__mro__ }}"
    with pytest.raises(Exception, match="unsafe|access"):
        tok.apply_chat_template([{"role": "user", "content": "x"}])
    tok.chat_template = "{{ raise_exception('only user turns') }}"
    with pytest.raises(TokenizerError, match="only user turns"):
        tok.apply_chat_template([{"role": "user", "content": "x"}])


def test_tokenizer_from_hf_folder(f32_file, tmp_path):
    import json
    p, _ = f32_file
    g = Tokenizer.from_gguf(p)
    g._tk.save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({
        "chat_template": gguf_files.TEMPLATE, "eos_token": "<|im_end|>",
        "bos_token": {"content": "<|im_start|>"}}))
    tok = Tokenizer.from_folder(tmp_path)
    text = "<|im_start|>user\nhello world 42<|im_end|>"
    assert tok.encode(text) == g.encode(text)
    assert tok.eos_ids == (2,) and tok.bos_token == "<|im_start|>"
    assert tok.chat_ids("hi") == g.chat_ids("hi")
    with pytest.raises(TokenizerError, match="no tokenizer.json"):
        Tokenizer.from_folder(tmp_path / "missing")


def test_wrong_or_missing_tensor_is_named(tmp_path):
    from generators.runtime import CheckpointError, load_checkpoint
    t = gguf_files.hf_tensors(layers=1, vocab=len(gguf_files.vocabulary()))
    t["blk.0.ffn_up.weight"] = t["blk.0.ffn_up.weight"][:128]
    gguf_files.write_llama(tmp_path / "shape.gguf", layers=1, tensors=t)
    with pytest.raises(CheckpointError, match=r"'model.layers.0.mlp.up_proj.weight' has shape "
                                              r"\(128, 192\), expected \(256, 192\)"):
        load_checkpoint(tmp_path / "shape.gguf", engines=None)
    del t["blk.0.ffn_up.weight"]
    gguf_files.write_llama(tmp_path / "missing.gguf", layers=1, tensors=t)
    with pytest.raises(CheckpointError, match=r"'model.layers.0.mlp.up_proj.weight' missing"):
        load_checkpoint(tmp_path / "missing.gguf", engines=None)
