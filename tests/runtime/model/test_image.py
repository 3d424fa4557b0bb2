"""The model image (generators/runtime/model/image.py): what convert writes is what the model was,
the embedding rows are the GGUF's values bit for bit, the file is mapped (nothing of matrix
size copied), every damaged or foreign file is a named error, and `convert` / `info` as a
user runs them.

The expected values come from elsewhere: the gguf package's own Q8_0 quantiser and
dequantiser (llama.cpp's reference in Python), the in-memory model the image was written from,
and the tokenizer built from the GGUF's metadata.
"""
from __future__ import annotations

import json
import struct

import numpy as np
import pytest

import gguf_files  # noqa: E402  (tests/ is on sys.path)
from generators.__main__ import main
from generators.runtime import Decoder, EngineConfig, Model, convert, load_checkpoint, make_backend
from generators.runtime.model.conversion import convert_file
from generators.runtime.model.image import (ALIGN, IMAGE_MAGIC, ImageError, is_image, open_image,
                                            read_header)
from generators.runtime.model.model import EmbeddingRows, quantise_q8_0
from generators.runtime.model.synthetic import TINY, write_checkpoint

ENG = EngineConfig(max_k=512, max_context=32)
PROMPT = [1, 2, 3]


@pytest.fixture(scope="module")
def q8_gguf(tmp_path_factory):
    """A tiny GGUF whose matrices (the embedding included) are Q8_0, as SmolLM2's embedding."""
    from gguf import GGMLQuantizationType as T
    p = tmp_path_factory.mktemp("img") / "q8.gguf"
    gguf_files.write_llama(p, qtype=T.Q8_0)
    return p


@pytest.fixture(scope="module")
def float_dir(tmp_path_factory):
    return write_checkpoint(tmp_path_factory.mktemp("tiny"), TINY, seed=1)


# ------------------------------------------------------------------------------ embedding

def test_q8_0_quantiser_is_llama_cpps():
    from gguf import GGMLQuantizationType as T
    from gguf.quants import quantize
    rng = np.random.default_rng(3)
    W = (rng.standard_normal((40, 192)) * rng.uniform(0.01, 3, (40, 1))).astype(np.float32)
    W[3] = 0.0                                        # a zero row: d = 0, q = 0
    W[5, :32] = np.float32(0.5) * np.arange(32)       # exact halves: roundf rounds away
    assert np.array_equal(quantise_q8_0(W), quantize(W, T.Q8_0))


def test_q8_0_rows_of_any_width_and_their_values():
    from gguf import GGMLQuantizationType as T
    from gguf.quants import dequantize, quantize
    rng = np.random.default_rng(4)
    W = rng.standard_normal((7, 70)).astype(np.float32)        # 70: a partial last block
    rows = EmbeddingRows.from_float(W)
    Wp = np.zeros((7, 96), np.float32)
    Wp[:, :70] = W
    want = dequantize(quantize(Wp, T.Q8_0), T.Q8_0).reshape(7, 96)[:, :70]
    for t in range(7):
        got = rows[t]
        assert got.dtype == np.float32 and got.shape == (70,)
        assert np.array_equal(got, want[t])
    with pytest.raises(IndexError):
        rows[7]


def test_gguf_q8_0_embedding_kept_as_stored(q8_gguf):
    """A GGUF's Q8_0 rows are not requantised: each row dequantised from the image is the
    gguf package's float32 of that row, bit for bit."""
    from generators.runtime.model.gguf import read_gguf
    m = convert(load_checkpoint(q8_gguf, ENG), "int8", ENG)
    table = read_gguf(q8_gguf).tensors["model.embed_tokens.weight"]
    for t in range(table.shape[0]):
        assert np.array_equal(m.embed_row(t).view(np.uint32), table[t].view(np.uint32))
    assert np.array_equal(m.embed[5], m.embed_row(5))


# ------------------------------------------------------------------------------ the file

@pytest.mark.parametrize("fmt", ["int8", "ternary", "q4"])
def test_image_round_trip_is_the_model(float_dir, tmp_path, fmt):
    m = convert(load_checkpoint(float_dir, ENG), fmt, ENG, notice=None)
    m2 = Model.load(m.save(tmp_path / "m.tpimg"))
    assert (m2.config, m2.engines, m2.fmt, m2.name, m2.bitnet) == \
        (m.config, m.engines, m.fmt, m.name, m.bitnet)
    assert m2.matrices.keys() == m.matrices.keys()
    for name, q in m.matrices.items():
        q2 = m2.matrices[name]
        assert (q2.fmt, q2.k, q2.n, q2.rows) == (q.fmt, q.k, q.n, q.rows)
        assert np.array_equal(q2.scale, q.scale)
        for p in (0, 1):
            assert np.array_equal(q2.images[p], q.images[p])
            assert isinstance(q2.images[p], np.memmap)           # mapped, not read
    for k, v in m.norms.items():
        assert np.array_equal(m2.norms[k], v)
    assert np.array_equal(m2.embedding.blocks, m.embedding.blocks)
    from generators.runtime.decode.decoder import rope_tables
    cos, sin = rope_tables(64, TINY["rope_theta"], ENG.max_context)
    assert np.array_equal(m2.rope_tables()[0], cos) and np.array_equal(m2.rope_tables()[1], sin)
    a = list(Decoder(m, make_backend("golden", m)).generate(PROMPT, 4))
    b = list(Decoder(m2, make_backend("golden", m2)).generate(PROMPT, 4))
    assert a == b


def test_layout_every_section_on_a_page(float_dir, tmp_path):
    m = convert(load_checkpoint(float_dir, ENG), "ternary", ENG)
    p = m.save(tmp_path / "t.tpimg")
    raw = p.read_bytes()
    magic, version, _, hoff, hlen = struct.unpack("<8sIIQQ", raw[:32])
    assert magic == IMAGE_MAGIC == b"TPYNQIMG" and version == 1 and hoff + hlen == len(raw)
    h = json.loads(raw[hoff:])
    secs = h["sections"]
    assert all(s["offset"] % ALIGN == 0 for s in secs.values())
    spans = sorted((s["offset"], s["offset"] + s["nbytes"]) for s in secs.values())
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])) and spans[-1][1] <= hoff
    s = secs["frame1:layers.1.gate"]
    q = m.matrices["layers.1.gate"]
    assert s["nbytes"] == len(q.images[1]) == 8 + 192 + 256 * 40      # header, x, 39 -> 40 B
    assert raw[s["offset"]:s["offset"] + s["nbytes"]] == q.images[1].tobytes()
    assert h["matrices"]["lm_head"] == {"fmt": "ternary", "k": 192, "n": 512,
                                        "rows": [256, 256]}


def test_streamed_conversion_writes_the_same_bytes(q8_gguf, tmp_path):
    """convert_file(out=...) writes each matrix as it is made: the same file as converting
    in memory and saving."""
    a = convert_file(q8_gguf, "int8", ENG, out=tmp_path / "a.tpimg")
    b = convert_file(q8_gguf, "int8", ENG).save(tmp_path / "b.tpimg")
    assert a.path == tmp_path / "a.tpimg" and is_image(a.path)
    assert (tmp_path / "a.tpimg").read_bytes() == b.read_bytes()
    assert not list(tmp_path.glob("*.part"))


def test_loaded_frames_are_copy_on_write(float_dir, tmp_path):
    p = convert(load_checkpoint(float_dir, ENG), "int8", ENG).save(tmp_path / "m.tpimg")
    before = p.read_bytes()
    m = Model.load(p)
    m.matrices["layers.0.q"].images[0][20] ^= 0xFF        # this process's copy only
    assert p.read_bytes() == before
    assert Model.load(p).matrices["layers.0.q"].images[0][20] != \
        m.matrices["layers.0.q"].images[0][20]


def test_tokenizer_travels_in_the_image(q8_gguf, tmp_path):
    from generators.runtime.model.tokenizer import Tokenizer
    ref = Tokenizer.from_gguf(q8_gguf)
    m = convert_file(q8_gguf, "int8", ENG, out=tmp_path / "m.tpimg")
    tok = Model.load(m.path).tokenizer()
    for text in ("hello world", "<|im_start|>user\nhello<|im_end|>", "héllo 123 wörld!"):
        assert tok.encode(text) == ref.encode(text)
    ids = ref.chat_ids("hello world")
    assert tok.chat_ids("hello world") == ids and tok.decode(ids) == ref.decode(ids)
    assert (tok.eos_ids, tok.bos_token, tok.eos_token, tok.chat_template) == \
        (ref.eos_ids, ref.bos_token, ref.eos_token, ref.chat_template)


def test_folder_without_tokenizer_runs_from_ids_only(float_dir, tmp_path):
    from generators.runtime.model.tokenizer import TokenizerError
    m = Model.load(convert(load_checkpoint(float_dir, ENG), "int8", ENG)
                   .save(tmp_path / "m.tpimg"))
    assert m.tokenizer_data is None
    with pytest.raises(TokenizerError, match="no tokenizer"):
        m.tokenizer()


# ------------------------------------------------------------------------------ bad files

@pytest.fixture(scope="module")
def good_image(tmp_path_factory, float_dir):
    p = tmp_path_factory.mktemp("good") / "m.tpimg"
    convert(load_checkpoint(float_dir, ENG), "int8", ENG).save(p)
    return p


@pytest.mark.parametrize("damage, words", [
    ("truncate", "copy the file again"),
    ("magic", "not a ternary-pynq model image"),
    ("npz", "an .npz model file of an earlier version"),
    ("gguf", "a GGUF file: convert it"),
    ("version", "model image version 7"),
    ("header", "damaged header"),
    ("missing", "no such file"),
])
def test_a_bad_file_is_a_named_error(good_image, tmp_path, damage, words):
    raw = bytearray(good_image.read_bytes())
    p = tmp_path / "bad.tpimg"
    if damage == "truncate":
        raw = raw[:len(raw) // 2]
    elif damage == "magic":
        raw[:8] = b"NOTANIMG"
    elif damage == "npz":
        raw[:4] = b"PK\x03\x04"
    elif damage == "gguf":
        raw[:4] = b"GGUF"
    elif damage == "version":
        raw[8:12] = struct.pack("<I", 7)
    elif damage == "header":
        hoff = struct.unpack("<Q", raw[16:24])[0]
        raw[hoff] = ord("]")
    if damage != "missing":
        p.write_bytes(bytes(raw))
    with pytest.raises(ImageError, match=words):
        Model.load(p)


def test_checksums_find_a_damaged_section(good_image, tmp_path, capsys):
    raw = bytearray(good_image.read_bytes())
    s = read_header(good_image)["sections"]["frame0:layers.1.down"]
    raw[s["offset"] + 100] ^= 1
    p = tmp_path / "bad.tpimg"
    p.write_bytes(bytes(raw))
    assert open_image(good_image).verify() == []
    assert open_image(p).verify() == ["frame0:layers.1.down"]
    assert main(["info", str(p), "--verify"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error:" in err and "1 damaged section" in err


# ------------------------------------------------------------------------------ commands

def test_convert_and_info_commands(q8_gguf, tmp_path, capsys):
    out = tmp_path / "q8.int8.tpimg"
    assert main(["convert", str(q8_gguf), "--format", "int8", "-o", str(out), "--max-k", "512",
                 "--max-context", "32"]) == 0
    cap = capsys.readouterr()
    assert "[convert] wrote" in cap.err and "model image v1" in cap.out
    assert main(["info", str(out), "--verify"]) == 0
    info = capsys.readouterr().out
    for words in ("2 layers, hidden 192", "int8: q8_0 frames", "q8_0 rows", "max_context 32",
                  "chat template yes", "every section's CRC-32 matches"):
        assert words in info, info
    # the image runs on its own: chat and decode need nothing else
    assert main(["chat", "--model", str(out), "--prompt", "hello", "--tokens", "2"]) == 0
    assert "from " + str(out) in capsys.readouterr().err
    assert main(["decode", "--checkpoint", str(out), "--prompt", "hello", "--tokens", "2"]) == 0
    assert "[decode] text: " in capsys.readouterr().out


def test_decode_save_writes_an_image(float_dir, tmp_path, capsys):
    out = tmp_path / "saved.tpimg"
    assert main(["decode", "--checkpoint", str(float_dir), "--prompt-ids", "1,2,3", "--tokens",
                 "2", "--max-k", "512", "--max-context", "32", "--save", str(out)]) == 0
    ids = capsys.readouterr().out.split("[decode] ids: ")[1].split()[0]
    assert main(["decode", "--checkpoint", str(out), "--prompt-ids", "1,2,3",
                 "--tokens", "2"]) == 0
    assert capsys.readouterr().out.split("[decode] ids: ")[1].split()[0] == ids


def test_default_model_is_converted_once_into_the_cache(monkeypatch, tmp_path, q8_gguf, capsys):
    """chat without --model: the default GGUF converted into the cache once, then mapped."""
    from generators.runtime.model import gguf as G
    from generators.runtime.model.conversion import default_image
    monkeypatch.setattr(G, "smollm2_path", lambda: q8_gguf)
    monkeypatch.setenv("TERNARY_PYNQ_CACHE", str(tmp_path / "cache"))
    lines = []
    p = default_image("int8", ENG, say=lines.append)
    assert p.parent == tmp_path / "cache" and is_image(p) and len(lines) == 2
    assert "converting q8.gguf into a model image (int8 weights, KV steps calibrated), " \
           "once" in lines[0]
    stamp = p.stat().st_mtime_ns
    assert default_image("int8", ENG, say=lines.append) == p and len(lines) == 2
    assert p.stat().st_mtime_ns == stamp
    assert default_image("ternary", ENG) != p              # another format, another file
