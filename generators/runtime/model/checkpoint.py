"""Hugging Face LLaMA-family checkpoints (config.json + model.safetensors), read without torch.

    ckpt = load_checkpoint("path/to/SmolLM2-135M")          # or a .gguf file (generators.runtime.model.gguf)
    ckpt.config.hidden_size, ckpt.tensors["model.norm.weight"], ckpt.bitnet

Every problem is found before any conversion work starts and raised as a CheckpointError that
names the field or the tensor: a missing or malformed config field, a missing tensor, a wrong
shape, and a shape the generated engines cannot serve (``check_engines``: head_dim and query
heads per KV head must be the attention engine's, every matrix's K at most the matrix engine's
``max_k``).
"""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

from generators.designs.overlay import PYNQ_Z1_KV_BITS, PYNQ_Z1_VECTORS
from generators.golden.attention import AttentionConfig

from ..errors import CheckpointError
from .. import optional
from . import gguf

__all__ = ["CheckpointError", "ModelConfig", "Checkpoint", "EngineConfig", "PYNQ_Z1_ENGINES",
           "load_checkpoint", "expected_shapes", "check_engines", "matrix_names"]


CONFIG_INT_FIELDS = ("hidden_size", "intermediate_size", "num_hidden_layers",
                     "num_attention_heads", "num_key_value_heads", "vocab_size")
CONFIG_FLOAT_FIELDS = ("rms_norm_eps", "rope_theta")


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    rms_norm_eps: float
    rope_theta: float
    vocab_size: int
    tie_word_embeddings: bool = True

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def group(self) -> int:
        """Query heads per KV head."""
        return self.num_attention_heads // self.num_key_value_heads

    @property
    def kv_dim(self) -> int:
        return self.num_key_value_heads * self.head_dim

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict, source: str = "config.json") -> "ModelConfig":
        vals = {}
        for f in CONFIG_INT_FIELDS:
            if f not in d:
                raise CheckpointError(f"{source}: field {f!r} missing")
            v = d[f]
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise CheckpointError(f"{source}: field {f!r} = {v!r} must be a positive integer")
            vals[f] = v
        for f in CONFIG_FLOAT_FIELDS:
            if f not in d:
                raise CheckpointError(f"{source}: field {f!r} missing")
            v = d[f]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                    or v <= 0:
                raise CheckpointError(f"{source}: field {f!r} = {v!r} must be a positive number")
            vals[f] = float(v)
        tie = d.get("tie_word_embeddings", True)
        if not isinstance(tie, bool):
            raise CheckpointError(f"{source}: field 'tie_word_embeddings' = {tie!r} must be a bool")
        vals["tie_word_embeddings"] = tie
        if vals["hidden_size"] % vals["num_attention_heads"]:
            raise CheckpointError(f"{source}: field 'hidden_size' = {vals['hidden_size']} is not a "
                                  f"multiple of 'num_attention_heads' = "
                                  f"{vals['num_attention_heads']}")
        if vals["num_attention_heads"] % vals["num_key_value_heads"]:
            raise CheckpointError(f"{source}: field 'num_attention_heads' = "
                                  f"{vals['num_attention_heads']} is not a multiple of "
                                  f"'num_key_value_heads' = {vals['num_key_value_heads']}")
        hd = d.get("head_dim")
        if hd is not None and hd != vals["hidden_size"] // vals["num_attention_heads"]:
            raise CheckpointError(f"{source}: field 'head_dim' = {hd!r} differs from hidden_size / "
                                  f"num_attention_heads = "
                                  f"{vals['hidden_size'] // vals['num_attention_heads']}")
        return cls(**vals)


def _pynq_z1_vectors() -> int:
    return PYNQ_Z1_VECTORS


@dataclasses.dataclass(frozen=True)
class EngineConfig:
    """What the generated engines serve (the overlay's manifest, section A of the contracts)."""

    max_k: int = 2048
    matrix_beat_bytes: int = 8
    heads_per_group: int = 3
    head_dim: int = 64
    max_context: int = 2048
    attention_beat_bytes: int = 16
    exp_depth: int = 4096
    exp_width: int = 24
    exp_steps_per_octave: int = 170
    scale_frac_bits: int = 24
    #: the attention engine's K and V codes: 8 (INT8, one byte an element) or 16 (INT16, two
    #: bytes little-endian; needs exp_width <= 21 and scale_frac_bits <= 16: AttentionConfig
    #: refuses otherwise). The KV cache the runtime keeps follows (docs/runtime.md 4.5).
    kv_bits: int = 8
    #: the matrix engines' ``vectors`` (docs/vectors.md): the most activation vectors a frame
    #: may carry, the runtime's prefill chunk and stream batch. Not part of a model's
    #: compatibility (the weights do not depend on it; ``compare=False``): an image converted
    #: for one overlay runs on another of the same max_k / max_context whatever its vectors.
    vectors: int = dataclasses.field(default=1, compare=False)

    @classmethod
    def from_manifest(cls, man: dict) -> "EngineConfig":
        m, a = man["matrix"], man["attention"]
        return cls(max_k=int(m["max_k"]), matrix_beat_bytes=int(m.get("bytes", 8)),
                   heads_per_group=int(a["heads_per_group"]), head_dim=int(a["head_dim"]),
                   max_context=int(a["max_context"]),
                   attention_beat_bytes=int(a.get("beat_bytes", 16)),
                   exp_depth=int(a.get("exp_depth", 4096)), exp_width=int(a.get("exp_width", 24)),
                   exp_steps_per_octave=int(a.get("exp_steps_per_octave", 170)),
                   scale_frac_bits=int(a.get("scale_frac_bits", 24)),
                   kv_bits=int(a.get("kv_bits", 8)),
                   vectors=int(m.get("vectors", 1)))

    def attention_config(self):
        return AttentionConfig(heads_per_group=self.heads_per_group, head_dim=self.head_dim,
                               max_context=self.max_context, beat_bytes=self.attention_beat_bytes,
                               exp_depth=self.exp_depth, exp_width=self.exp_width,
                               exp_steps_per_octave=self.exp_steps_per_octave,
                               scale_frac_bits=self.scale_frac_bits, kv_bits=self.kv_bits)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    def with_kv_bits(self, kv_bits: int) -> "EngineConfig":
        """These engines with the attention engine of ``kv_bits`` K and V codes, at the widths
        the PYNQ-Z1 overlay builds for it (``overlay`` ``kv_bits``: KV_WIDTHS)."""
        if kv_bits not in KV_WIDTHS:
            raise ValueError(f"kv_bits {kv_bits!r}: 8 or 16")
        return dataclasses.replace(self, kv_bits=kv_bits, **KV_WIDTHS[kv_bits])


#: the attention engine's exp table and Z widths per KV width, as the PYNQ-Z1 overlay builds
#: them (generators.designs.overlay.ATT_KV; INT16 K and V need W <= 21 and F <= 16)
KV_WIDTHS = {8: dict(exp_width=24, scale_frac_bits=24), 16: dict(exp_width=21, scale_frac_bits=16)}


#: The PYNQ-Z1 overlay (generator defaults): matrix max_k 2048, attention max_context 2048,
#: matrix frames of up to ``generators.designs.overlay.PYNQ_Z1_VECTORS`` vectors, K and V codes
#: of ``PYNQ_Z1_KV_BITS`` (16: INT16 KV at KV_WIDTHS[16]). ``EngineConfig()``'s own field
#: defaults are the INT8-KV engine's (kv_bits 8), the key of every image made before INT16.
PYNQ_Z1_ENGINES = EngineConfig(vectors=_pynq_z1_vectors()).with_kv_bits(PYNQ_Z1_KV_BITS)


@dataclasses.dataclass
class Checkpoint:
    config: ModelConfig
    tensors: Dict[str, np.ndarray]
    source: str = ""
    bitnet: bool = False


MATRICES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def matrix_names(i: int) -> Dict[str, str]:
    """Short matrix name -> HF tensor name for layer i."""
    out = {}
    for m in MATRICES:
        part = "self_attn" if m in ("q_proj", "k_proj", "v_proj", "o_proj") else "mlp"
        out[m[:-5] if m.endswith("_proj") else m] = f"model.layers.{i}.{part}.{m}.weight"
    return out


def expected_shapes(cfg: ModelConfig) -> Dict[str, tuple]:
    """Every tensor the runtime reads, with its shape (HF layout: (out, in))."""
    H, I, V = cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size
    kv = cfg.kv_dim
    shapes = {"model.embed_tokens.weight": (V, H), "model.norm.weight": (H,)}
    if not cfg.tie_word_embeddings:
        shapes["lm_head.weight"] = (V, H)
    for i in range(cfg.num_hidden_layers):
        n = matrix_names(i)
        shapes[n["q"]] = (H, H)
        shapes[n["k"]] = (kv, H)
        shapes[n["v"]] = (kv, H)
        shapes[n["o"]] = (H, H)
        shapes[n["gate"]] = (I, H)
        shapes[n["up"]] = (I, H)
        shapes[n["down"]] = (H, I)
        shapes[f"model.layers.{i}.input_layernorm.weight"] = (H,)
        shapes[f"model.layers.{i}.post_attention_layernorm.weight"] = (H,)
    return shapes


def check_engines(cfg: ModelConfig, eng: EngineConfig, source: str = "config.json") -> None:
    """Raise CheckpointError unless the engines can serve every matrix and attention group."""
    if cfg.head_dim != eng.head_dim:
        raise CheckpointError(f"{source}: head_dim = hidden_size / num_attention_heads = "
                              f"{cfg.head_dim}, the attention engine serves head_dim "
                              f"{eng.head_dim}")
    if cfg.group != eng.heads_per_group:
        raise CheckpointError(f"{source}: num_attention_heads / num_key_value_heads = "
                              f"{cfg.num_attention_heads} / {cfg.num_key_value_heads} = "
                              f"{cfg.group} query heads per KV head, the attention engine "
                              f"serves {eng.heads_per_group}")
    for field, k in (("hidden_size", cfg.hidden_size), ("intermediate_size",
                                                         cfg.intermediate_size)):
        if k > eng.max_k:
            raise CheckpointError(f"{source}: {field} = {k} is the K of a matrix "
                                  f"({'every q/k/v/gate/up/lm_head' if field == 'hidden_size' else 'down_proj'}), "
                                  f"above the matrix engine's max_k {eng.max_k}")
    for field, n in (("vocab_size", cfg.vocab_size), ("intermediate_size", cfg.intermediate_size)):
        if -(-n // 2) > 0xFFFF:
            raise CheckpointError(f"{source}: {field} = {n} rows: half of them is above the "
                                  f"frame's 65,535-row limit")


def _read_safetensors(files: List[Path]) -> Dict[str, np.ndarray]:
    try:
        load_file = optional.module("safetensors.numpy").load_file
    except ImportError:
        raise CheckpointError("reading model.safetensors needs the 'safetensors' package: "
                              "pip install 'ternary-pynq[runtime]'") from None
    out: Dict[str, np.ndarray] = {}
    for f in files:
        try:
            t = load_file(str(f))
        except Exception as exc:
            try:                      # numpy has no bfloat16: SmolLM2 ships bf16 tensors
                t = _read_bf16(f)
            except Exception:
                raise CheckpointError(f"{f}: not a readable safetensors file ({exc})") from exc
        out.update(t)
    return out


def _read_bf16(f: Path) -> Dict[str, np.ndarray]:
    """The safetensors layout (8-byte header length, JSON header, data) for files with BF16
    tensors, which the numpy API refuses: BF16 is widened to float32 exactly."""
    kinds = {"F32": np.float32, "F16": np.float16, "F64": np.float64}
    raw = np.memmap(f, dtype=np.uint8, mode="r")
    n = int(np.frombuffer(raw[:8].tobytes(), "<u8")[0])
    header = json.loads(raw[8:8 + n].tobytes())
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        buf = raw[base + a:base + b]
        if info["dtype"] == "BF16":
            v = (buf.view("<u2").astype(np.uint32) << 16).view(np.float32)
        elif info["dtype"] in kinds:
            v = buf.view(np.dtype(kinds[info["dtype"]]).newbyteorder("<")).astype(np.float32)
        else:
            raise CheckpointError(f"{f}: tensor {name!r} has dtype {info['dtype']}")
        out[name] = np.array(v).reshape(info["shape"])
    return out


def _is_bitnet(d: dict) -> bool:
    q = d.get("quantization_config") or {}
    arch = " ".join(d.get("architectures") or [])
    return (isinstance(q, dict) and str(q.get("quant_method", "")).lower() == "bitnet") \
        or "bitnet" in str(d.get("model_type", "")).lower() or "BitNet" in arch


def load_gguf(path):
    """The runtime's Checkpoint for a GGUF file (what ``load_checkpoint(path)`` returns).

    The raw quantised blocks ride along as ``ckpt.raw`` ({HF name: RawTensor}), the file's
    metadata as ``ckpt.metadata`` (``Tokenizer.from_metadata(ckpt.metadata)`` reads it again
    without parsing the file twice).
    """
    g = gguf.read_gguf(path)
    cfg = ModelConfig(**g.config)
    for name, shape in expected_shapes(cfg).items():
        if name not in g.tensors:
            raise CheckpointError(f"{path}: tensor {name!r} missing")
        if tuple(g.tensors.shapes[name]) != shape:
            raise CheckpointError(f"{path}: tensor {name!r} has shape "
                                  f"{tuple(g.tensors.shapes[name])}, expected {shape} from the "
                                  f"metadata")
    ckpt = Checkpoint(config=cfg, tensors=g.tensors,
                      source=f"{path} (GGUF)", bitnet=False)
    ckpt.raw = g.raw
    ckpt.gguf_types = g.types
    ckpt.metadata = g.metadata
    return ckpt


def load_checkpoint(path, engines: Optional[EngineConfig] = PYNQ_Z1_ENGINES) -> Checkpoint:
    """Read a HF folder (config.json + model.safetensors or model-*.safetensors) or a .gguf.

    ``engines``: check the shapes against these engines (None: no engine check).
    """
    p = Path(path)
    if p.suffix == ".gguf":
        ck = load_gguf(p)
        if engines is not None:
            check_engines(ck.config, engines, str(p))
        return ck
    if not p.is_dir():
        raise CheckpointError(f"{p}: not a checkpoint folder (config.json + model.safetensors)")
    cfg_path = p / "config.json"
    if not cfg_path.exists():
        raise CheckpointError(f"{p}: config.json missing")
    try:
        raw = json.loads(cfg_path.read_text())
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{cfg_path}: not JSON ({exc})") from exc
    cfg = ModelConfig.from_dict(raw, str(cfg_path))
    if engines is not None:
        check_engines(cfg, engines, str(cfg_path))
    files = sorted(p.glob("model*.safetensors"))
    if not files:
        raise CheckpointError(f"{p}: model.safetensors missing")
    tensors = _read_safetensors(files)
    want = expected_shapes(cfg)
    for name, shape in want.items():
        if name not in tensors:
            raise CheckpointError(f"{p}: tensor {name!r} missing")
        t = tensors[name]
        if tuple(t.shape) != shape:
            raise CheckpointError(f"{p}: tensor {name!r} has shape {tuple(t.shape)}, "
                                  f"expected {shape} from config.json")
    out = {}
    for name in want:
        t = np.asarray(tensors[name])
        if t.dtype.kind != "f":
            raise CheckpointError(f"{p}: tensor {name!r} has dtype {t.dtype}, expected a float")
        t = t.astype(np.float32)
        if not np.all(np.isfinite(t)):
            raise CheckpointError(f"{p}: tensor {name!r} holds NaN or infinity")
        out[name] = t
    return Checkpoint(config=cfg, tensors=out, source=str(p), bitnet=_is_bitnet(raw))
