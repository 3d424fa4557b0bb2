"""Conversion, once: a Checkpoint -> weight images laid out as the engines read them.

    model = convert(ckpt, fmt="int8")           # "ternary", "q4"; None: ternary for BitNet, else int8
    model.save("smollm2.npz");  model = Model.load("smollm2.npz")

Weight formats (the header's format byte): "int8" (0x08, absmax per row), "ternary" (0x03,
BitNet absmean per matrix) and "q4" (0x04, llama.cpp Q4_1 rows, docs/q4.md). With "q4" a
GGUF's Q4_1 tensors are used as stored (their raw blocks repacked into the engine's row
layout, ``generators.q4.pack_q4_rows_raw``: no requantisation); every other matrix of a GGUF
(SmolLM2's Q8_0 tied embedding / LM head, F16, F32, other quantised types) runs as INT8 rows;
a float checkpoint (Hugging Face folder) is quantised to Q4_1 with llama.cpp's reference
quantiser (``generators.q4.quantize_q4_1``), with a one-line notice.

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

from generators.contract import MATRIX_MAGIC
from generators.packing import FORMATS, build_frame, header_bytes
from generators.q4 import (FORMAT_Q4, build_q4_frame, pack_q4_rows, pack_q4_rows_raw,
                           quantize_q4_1)

from .checkpoint import (Checkpoint, CheckpointError, EngineConfig, ModelConfig, PYNQ_Z1_ENGINES,
                         check_engines, matrix_names)
from .quantise import quantise_int8_rows, quantise_ternary

__all__ = ["QMatrix", "Model", "convert", "LAYER_MATRICES", "WEIGHT_FORMATS", "FORMAT_CODES"]

#: every weight format of the runtime and its header format byte
FORMAT_CODES = dict(FORMATS, q4=FORMAT_Q4)
WEIGHT_FORMATS = ("int8", "ternary", "q4")

LAYER_MATRICES = ("q", "k", "v", "o", "gate", "up", "down")
FORMAT_VERSION = 1


@dataclasses.dataclass
class QMatrix:
    """One quantised matrix: its two port frames and its scale."""

    name: str
    fmt: str                   # "int8" | "ternary" | "q4"
    k: int
    n: int
    scale: np.ndarray          # (n,) real value per unit of the engine's result (q4: ones,
                               # the float32 result is already sum(w * x_int8))
    images: List[np.ndarray]   # per port: the whole input frame, uint8
    rows: List[int]            # rows per port

    @property
    def x_offset(self) -> int:
        return 8

    @property
    def x_bytes(self) -> int:
        return -(-self.k // 8) * 8

    @property
    def code(self) -> int:
        """The header's format byte."""
        return FORMAT_CODES[self.fmt]

    def header(self, port: int, tag: int) -> bytes:
        if self.fmt == "q4":
            return (MATRIX_MAGIC | self.k << 16 | self.rows[port] << 32 | FORMAT_Q4 << 48
                    | (tag & 0xFF) << 56).to_bytes(8, "little")
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


def _q4_images(rows: np.ndarray, k: int, name: str) -> List[np.ndarray]:
    """Engine row images (N, q4_row_bytes(k)) -> the two port frames (format 0x04)."""
    n = rows.shape[0]
    split = split_rows(n)
    out, start = [], 0
    for r in split:
        if r == 0:
            raise CheckpointError(f"{name}: a matrix of {n} row(s) cannot be split over two "
                                  f"engines")
        fr = build_q4_frame(np.zeros(k, np.int8), rows[start:start + r], k)
        out.append(np.frombuffer(fr, np.uint8).copy())
        start += r
    return out


def q4_matrix_raw(name: str, raw, k: int, n: int) -> QMatrix:
    """A GGUF Q4_1 tensor as stored (``RawTensor.blocks``: (n, k/32 * 20) bytes)."""
    if k % 32:
        raise CheckpointError(f"{name}: a Q4_1 tensor's rows must be whole 32-weight blocks, "
                              f"K = {k}")
    rows = pack_q4_rows_raw(np.asarray(raw, np.uint8), n, k)
    return QMatrix(name, "q4", k, n, np.ones(n), _q4_images(rows, k, name), split_rows(n))


def q4_matrix_float(name: str, W: np.ndarray) -> QMatrix:
    """Requantise float weights to Q4_1 (llama.cpp's reference quantiser, per 32 weights
    d = (max - min) / 15 and m = min in fp16). Any K: a last partial block is padded with
    its own first weight (min and max unchanged); the engine ignores codes past K."""
    W = np.asarray(W, np.float32)
    n, k = W.shape
    nb = -(-k // 32)
    Wp = np.empty((n, nb * 32), np.float32)
    Wp[:, :k] = W
    if nb * 32 > k:
        Wp[:, k:] = W[:, 32 * (nb - 1):32 * (nb - 1) + 1]
    q, d, m = quantize_q4_1(Wp)
    rows = pack_q4_rows(q, d, m, k)
    return QMatrix(name, "q4", k, n, np.ones(n), _q4_images(rows, k, name), split_rows(n))


def quantise_matrix(name: str, W: np.ndarray, fmt: str) -> QMatrix:
    W = np.asarray(W)
    n, k = W.shape
    if fmt == "ternary":
        q, s = quantise_ternary(W)
        scale = np.full(n, s)
    elif fmt == "int8":
        q, scale = quantise_int8_rows(W)
    elif fmt == "q4":
        return q4_matrix_float(name, W)
    else:
        raise ValueError(f"fmt must be one of {list(WEIGHT_FORMATS)}, got {fmt!r}")
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

    def embed_row(self, token: int) -> np.ndarray:
        """The embedding of ``token``: float32 (hidden,). The decoder reads the table only
        through this method."""
        return self.embed[token]

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


def _notice(text: str) -> None:
    import sys
    print(text, file=sys.stderr)


def convert(ckpt: Checkpoint, fmt: Optional[str] = None,
            engines: EngineConfig = PYNQ_Z1_ENGINES, notice=_notice) -> Model:
    """Quantise and pack every matrix once. ``fmt``: "int8", "ternary", "q4", or None (ternary
    for a BitNet-trained checkpoint, INT8 for any other).

    "q4": each matrix whose checkpoint tensor is stored as Q4_1 (a GGUF's ``ckpt.raw``) runs
    on the Q4_1 lane as stored; any other tensor of a GGUF runs as INT8 rows; a checkpoint
    without any quantised tensor (float weights) is quantised to Q4_1 and ``notice`` (a
    callable taking one line; default: stderr) says so. A GGUF asked for q4 that has no Q4_1
    tensor is a CheckpointError."""
    if fmt is None:
        fmt = "ternary" if ckpt.bitnet else "int8"
    if fmt not in WEIGHT_FORMATS:
        raise ValueError(f"fmt must be one of {list(WEIGHT_FORMATS)}, got {fmt!r}")
    cfg = ckpt.config
    check_engines(cfg, engines, ckpt.source or "checkpoint")
    t = ckpt.tensors
    raw = getattr(ckpt, "raw", None) or {}
    gguf = getattr(ckpt, "gguf_types", None) is not None or bool(raw)

    if fmt == "q4":
        if gguf and not any(r.qtype == "Q4_1" for r in raw.values()):
            types = sorted(set((getattr(ckpt, "gguf_types", None) or {}).values())
                           or {r.qtype for r in raw.values()})
            raise CheckpointError(f"{ckpt.source or 'checkpoint'}: --format q4 runs a GGUF's "
                                  f"Q4_1 tensors as stored, and this file has none (types: "
                                  f"{', '.join(types) or 'none'}); use int8")
        if not gguf and notice is not None:
            notice(f"notice: {ckpt.source or 'the checkpoint'} has float weights: quantised "
                   f"to Q4_1 here (llama.cpp's reference quantiser, per 32 weights d = "
                   f"(max-min)/15, m = min), not a GGUF's own Q4_1 weights")

    def matrix(name: str, hf: str, W: np.ndarray) -> QMatrix:
        if fmt != "q4":
            return quantise_matrix(name, W, fmt)
        r = raw.get(hf)
        if r is not None and r.qtype == "Q4_1":
            n, k = (int(v) for v in r.shape)
            return q4_matrix_raw(name, r.blocks, k, n)
        if gguf:                        # Q8_0, F16, F32, other quantised types: INT8 rows
            return quantise_matrix(name, W, "int8")
        return q4_matrix_float(name, W)

    mats: Dict[str, QMatrix] = {}
    norms: Dict[str, np.ndarray] = {"final": t["model.norm.weight"].astype(np.float64)}
    for i in range(cfg.num_hidden_layers):
        for short, hf in matrix_names(i).items():
            mats[f"layers.{i}.{short}"] = matrix(f"layers.{i}.{short}", hf, t[hf])
        norms[f"layers.{i}.input"] = t[f"model.layers.{i}.input_layernorm.weight"].astype(np.float64)
        norms[f"layers.{i}.post"] = t[f"model.layers.{i}.post_attention_layernorm.weight"].astype(np.float64)
    head_name = "model.embed_tokens.weight" if cfg.tie_word_embeddings else "lm_head.weight"
    mats["lm_head"] = matrix("lm_head", head_name, t[head_name])
    return Model(cfg, engines, fmt, t["model.embed_tokens.weight"].astype(np.float32), norms,
                 mats, ckpt.source)
