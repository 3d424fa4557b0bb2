"""Conversion, once: a Checkpoint -> weight images laid out as the engines read them.

    model = convert(ckpt, fmt="int8")           # or "ternary"; None: ternary for BitNet, else int8
    model.save("smollm2.npz");  model = Model.load("smollm2.npz")

Every matrix (q, k, v, o, gate, up, down of each layer, and the LM head) is split by rows over
the two matrix engines: rows [0, n0) to port 0, [n0, N) to port 1, n0 = ceil(N / 2). Each half
is one complete input frame (DESIGN.md section 3, ``generators.packing.build_frame``): the
8-byte header (magic, K, N of the half, format; the tag is written per call), the x slot
(K bytes rounded up to whole 8-byte beats, written per call) and the rows, each padded to a
whole beat. The host keeps one DMA buffer per frame and writes only the header and x per call.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

from generators.packing import FORMATS, build_frame, header_bytes

from .checkpoint import (Checkpoint, CheckpointError, EngineConfig, ModelConfig, PYNQ_Z1_ENGINES,
                         check_engines, matrix_names)
from .quantise import quantise_int8_rows, quantise_ternary

__all__ = ["QMatrix", "Model", "convert", "LAYER_MATRICES"]

LAYER_MATRICES = ("q", "k", "v", "o", "gate", "up", "down")
FORMAT_VERSION = 1


@dataclasses.dataclass
class QMatrix:
    """One quantised matrix: its two port frames and its scale."""

    name: str
    fmt: str                   # "int8" | "ternary"
    k: int
    n: int
    scale: np.ndarray          # (n,) real value per unit of the engine's integer result
    images: List[np.ndarray]   # per port: the whole input frame, uint8
    rows: List[int]            # rows per port

    @property
    def x_offset(self) -> int:
        return 8

    @property
    def x_bytes(self) -> int:
        return -(-self.k // 8) * 8

    def header(self, port: int, tag: int) -> bytes:
        return header_bytes(self.k, self.rows[port], self.fmt, tag)


def split_rows(n: int) -> List[int]:
    n0 = -(-n // 2)
    return [n0, n - n0]


def _images(q: np.ndarray, fmt: str) -> List[np.ndarray]:
    n, k = q.shape
    rows = split_rows(n)
    out, start = [], 0
    for r in rows:
        if r == 0:
            raise CheckpointError(f"a matrix of {n} row(s) cannot be split over two engines")
        fr = build_frame(np.zeros(k, np.int8), q[start:start + r], fmt)
        out.append(np.frombuffer(fr, np.uint8).copy())
        start += r
    return out


def quantise_matrix(name: str, W: np.ndarray, fmt: str) -> QMatrix:
    W = np.asarray(W)
    n, k = W.shape
    if fmt == "ternary":
        q, s = quantise_ternary(W)
        scale = np.full(n, s)
    elif fmt == "int8":
        q, scale = quantise_int8_rows(W)
    else:
        raise ValueError(f"fmt must be 'int8' or 'ternary', got {fmt!r}")
    return QMatrix(name, fmt, k, n, scale, _images(q, fmt), split_rows(n))


@dataclasses.dataclass
class Model:
    config: ModelConfig
    engines: EngineConfig
    fmt: str
    embed: np.ndarray                      # (vocab, hidden) float32, the lookup on the CPU
    norms: Dict[str, np.ndarray]           # "layers.{i}.input", "layers.{i}.post", "final"
    matrices: Dict[str, QMatrix]
    source: str = ""

    def matrix(self, layer: Optional[int], short: str) -> QMatrix:
        return self.matrices["lm_head" if layer is None else f"layers.{layer}.{short}"]

    # ------------------------------------------------------------------ one file
    def save(self, path) -> Path:
        path = Path(path)
        meta = {"version": FORMAT_VERSION, "config": self.config.as_dict(),
                "engines": self.engines.as_dict(), "fmt": self.fmt, "source": self.source,
                "matrices": {m.name: {"fmt": m.fmt, "k": m.k, "n": m.n, "rows": m.rows}
                             for m in self.matrices.values()}}
        arrays = {"meta": np.frombuffer(json.dumps(meta).encode(), np.uint8),
                  "embed": self.embed}
        for k, v in self.norms.items():
            arrays[f"norm:{k}"] = v
        for m in self.matrices.values():
            arrays[f"scale:{m.name}"] = m.scale
            for p, img in enumerate(m.images):
                arrays[f"image{p}:{m.name}"] = img
        with open(path, "wb") as f:
            np.savez(f, **arrays)
        return path

    @classmethod
    def load(cls, path) -> "Model":
        with np.load(path) as z:
            meta = json.loads(z["meta"].tobytes())
            if meta.get("version") != FORMAT_VERSION:
                raise CheckpointError(f"{path}: model file version {meta.get('version')}, "
                                      f"expected {FORMAT_VERSION}")
            mats = {}
            for name, m in meta["matrices"].items():
                mats[name] = QMatrix(name, m["fmt"], m["k"], m["n"], z[f"scale:{name}"],
                                     [z[f"image0:{name}"], z[f"image1:{name}"]], m["rows"])
            norms = {k[5:]: z[k] for k in z.files if k.startswith("norm:")}
            return cls(ModelConfig(**meta["config"]), EngineConfig(**meta["engines"]),
                       meta["fmt"], z["embed"], norms, mats, meta.get("source", ""))


def convert(ckpt: Checkpoint, fmt: Optional[str] = None,
            engines: EngineConfig = PYNQ_Z1_ENGINES) -> Model:
    """Quantise and pack every matrix once. ``fmt``: "int8", "ternary", or None (ternary for a
    BitNet-trained checkpoint, INT8 for any other)."""
    if fmt is None:
        fmt = "ternary" if ckpt.bitnet else "int8"
    if fmt not in FORMATS:
        raise ValueError(f"fmt must be one of {sorted(FORMATS)}, got {fmt!r}")
    cfg = ckpt.config
    check_engines(cfg, engines, ckpt.source or "checkpoint")
    t = ckpt.tensors
    mats: Dict[str, QMatrix] = {}
    norms: Dict[str, np.ndarray] = {"final": t["model.norm.weight"].astype(np.float64)}
    for i in range(cfg.num_hidden_layers):
        for short, hf in matrix_names(i).items():
            mats[f"layers.{i}.{short}"] = quantise_matrix(f"layers.{i}.{short}", t[hf], fmt)
        norms[f"layers.{i}.input"] = t[f"model.layers.{i}.input_layernorm.weight"].astype(np.float64)
        norms[f"layers.{i}.post"] = t[f"model.layers.{i}.post_attention_layernorm.weight"].astype(np.float64)
    head = t["model.embed_tokens.weight"] if cfg.tie_word_embeddings else t["lm_head.weight"]
    mats["lm_head"] = quantise_matrix("lm_head", head, fmt)
    return Model(cfg, engines, fmt, t["model.embed_tokens.weight"].astype(np.float32), norms,
                 mats, ckpt.source)
