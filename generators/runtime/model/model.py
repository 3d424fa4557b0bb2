"""Conversion, once: a Checkpoint -> weight images laid out as the engines read them.

    model = convert(ckpt, fmt="int8")      # "ternary", "q4"; None: ternary for BitNet, else int8
    model.save("smollm2.int8.tpimg");  model = Model.load("smollm2.int8.tpimg")   # image.py

Weight formats: "int8" (the INT8 lane: llama.cpp Q8_0 rows with x as Q8_0 blocks of 32,
format 0x09, below; INT8 rows with one INT8 step per vector, 0x08, absmax per row, where K is
not a multiple of 32), "ternary" (0x03,
BitNet absmean per matrix) and "q4" (llama.cpp Q4_1 rows, docs/q4.md: format 0x05, x as
Q8_1 blocks of 32 as llama.cpp quantises it, docs/activations.md; 0x04, one INT8 step per
vector, where a transfer also carries INT8 rows, for K not a multiple of 32, and in images
written before 0x05). With "q4" a GGUF's Q4_1 tensors are used as stored (their raw blocks repacked into the engine's row
layout, ``generators.q4.pack_q4_rows_raw``: no requantisation); every other layer matrix of a
GGUF (F16, F32, other quantised types) runs as INT8 rows; a float checkpoint (Hugging Face
folder) is quantised to Q4_1 with llama.cpp's reference quantiser
(``generators.q4.quantize_q4_1``), with a one-line notice.

The layer matrices of "int8" and the LM head of "int8" and "q4" (tied to the embedding or not)
run as llama.cpp Q8_0 rows with x as Q8_0 blocks of 32 (the matrix format "q8_0", format 0x09,
docs/activations.md): a GGUF's Q8_0 tensor as stored (``generators.q8.pack_q8_0_rows_raw``: no
requantisation, SmolLM2's tied ``token_embd``), any other matrix quantised to Q8_0 with
llama.cpp's reference quantiser (:func:`quantise_q8_0`, the embedding's; SmolLM2's Q4_1 layers
dequantised, then per 32 weights d = max|w| / 127); a matrix whose K is not a multiple of 32
runs as INT8 rows, and "ternary" keeps its ternary head.

Every matrix (q, k, v, o, gate, up, down of each layer, and the LM head) is split by rows over
the two matrix engines: rows [0, n0) to port 0, [n0, N) to port 1, n0 = ceil(N / 2). Each half
is one complete input frame (DESIGN.md section 3, ``generators.packing.build_frame``): the
8-byte header (magic, K, N of the half, format; the tag is written per call), the x slot
(K bytes rounded up to whole 8-byte beats, written per call) and the rows, each padded to a
whole beat. The host keeps one DMA buffer per frame and writes only the header and x per call.

The embedding is kept as quantised rows (:class:`EmbeddingRows`, Q8_0 blocks) and one row is
dequantised per token (``model.embed_row(token)``); the LM head, tied or not, runs on the
engines (Q8_0 rows for "int8" and "q4", above; ternary rows for "ternary"). ``Model.save``
writes the model image and
``Model.load`` maps one (generators/runtime/model/image.py).
"""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

from generators import __version__
from generators.contract import MATRIX_MAGIC
from generators.packing import FORMATS, build_frame, header_bytes
from generators.contract import FORMAT_Q4_Q8_1, FORMAT_Q8_0
from generators.q4 import (FORMAT_Q4, build_q4_frame, build_q4_q8_1_frame, pack_q4_rows,
                           pack_q4_rows_raw, quantize_q4_1)
from generators.q8 import build_q8_0_frame, pack_q8_0_rows_raw

from ..errors import ImageError, TokenizerError
from ..host import ops as hostops
from .checkpoint import (Checkpoint, CheckpointError, EngineConfig, ModelConfig, PYNQ_Z1_ENGINES,
                         check_engines, matrix_names)
from .image import ImageWriter, checkpoint_tokenizer, model_name, open_image
from . import kvcal as Q
from .quantise import quantise_int8_rows, quantise_ternary
from .tokenizer import Tokenizer

__all__ = ["QMatrix", "Model", "convert", "LAYER_MATRICES", "WEIGHT_FORMATS", "FORMAT_CODES",
           "EmbeddingRows", "quantise_q8_0", "HEAD_Q8_0", "format_code", "q8_0_matrix_raw",
           "q8_0_matrix_float"]

#: every weight format of the runtime and its header format byte
FORMAT_CODES = dict(FORMATS, q4=FORMAT_Q4)
WEIGHT_FORMATS = ("int8", "ternary", "q4")
#: the matrix format of "int8"'s matrices and of the LM head of "int8" and "q4": llama.cpp
#: Q8_0 rows, x as Q8_0 blocks (format 0x09; a matrix format, not a model format)
HEAD_Q8_0 = "q8_0"

LAYER_MATRICES = ("q", "k", "v", "o", "gate", "up", "down")
#: the layer's matrices that share one x (one transfer: plan.KIND_MATRICES)
TRANSFER_GROUPS = (("q", "k", "v"), ("o",), ("gate", "up"), ("down",))


@dataclasses.dataclass
class QMatrix:
    """One quantised matrix: its two port frames and its scale."""

    name: str
    fmt: str                   # "int8" | "ternary" | "q4" | "q8_0" (int8's matrices, LM heads)
    k: int
    n: int
    scale: np.ndarray          # (n,) real value per unit of the engine's result (q4: ones,
                               # the float32 result is already sum(w * x_int8))
    images: List[np.ndarray]   # per port: the whole input frame, uint8
    rows: List[int]            # rows per port
    #: x as blocks of 32 (docs/activations.md): Q4_1 rows with Q8_1 x (format 0x05) or, fmt
    #: "q8_0", Q8_0 rows with Q8_0 x (format 0x09); x goes as codes and an fp16 scale table,
    #: the result is the row's whole value (no host scale); False: format 0x04 (one INT8
    #: step per vector), INT8 and ternary rows
    block_x: bool = False

    @property
    def x_offset(self) -> int:
        return 8

    @property
    def x_bytes(self) -> int:
        """Bytes of one vector's x in a frame: K codes in whole beats, and with ``block_x``
        the scale table behind them (ceil(K/64) beats of fp16 d s d s; Q8_0 x ceil(K/128)
        beats of d)."""
        return x_slot_bytes(self.k, self.block_x, self.fmt)

    def vectors_extra_bytes(self, B: int) -> int:
        """Bytes a B-vector frame half carries beyond the image (a B = 1 frame): the vectors
        word and B - 1 more vectors (docs/vectors.md)."""
        return 8 + (B - 1) * self.x_bytes if B > 1 else 0

    @property
    def code(self) -> int:
        """The header's format byte."""
        return format_code(self.fmt, self.block_x)

    def header(self, port: int, tag: int) -> bytes:
        if self.fmt in ("q4", HEAD_Q8_0):
            return (MATRIX_MAGIC | self.k << 16 | self.rows[port] << 32 | self.code << 48
                    | (tag & 0xFF) << 56).to_bytes(8, "little")
        return header_bytes(self.k, self.rows[port], self.fmt, tag)


def format_code(fmt: str, block_x: bool = False) -> int:
    """The header's format byte of a matrix of ``fmt`` (with ``block_x``: x in blocks)."""
    if fmt == HEAD_Q8_0:
        return FORMAT_Q8_0
    return FORMAT_Q4_Q8_1 if block_x else FORMAT_CODES[fmt]


def x_slot_bytes(k: int, block_x: bool = False, fmt: str = "q4") -> int:
    """Bytes of one vector's x in a frame of K columns: K INT8 values in whole 8-byte beats;
    ``block_x`` (K a multiple of 32): K codes and the scale table, ceil(K/64) beats for
    format 0x05 (Q4_1 rows), ceil(K/128) for 0x09 (``fmt`` "q8_0")."""
    table = -(-int(k) // (128 if fmt == HEAD_Q8_0 else 64)) * 8 if block_x else 0
    return -(-int(k) // 8) * 8 + table


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


def _q4_images(rows: np.ndarray, k: int, name: str, block_x: bool = False) -> List[np.ndarray]:
    """Engine row images (N, q4_row_bytes(k)) -> the two port frames (format 0x04, or with
    ``block_x`` 0x05: an x slot of K zero codes and a zero scale table)."""
    n = rows.shape[0]
    split = split_rows(n)
    out, start = [], 0
    for r in split:
        if r == 0:
            raise CheckpointError(f"{name}: a matrix of {n} row(s) cannot be split over two "
                                  f"engines")
        if block_x:
            nb = k // 32
            fr = build_q4_q8_1_frame(np.zeros(k, np.int8), np.zeros(nb, np.uint16),
                                     np.zeros(nb, np.uint16), rows[start:start + r], k)
        else:
            fr = build_q4_frame(np.zeros(k, np.int8), rows[start:start + r], k)
        out.append(np.frombuffer(fr, np.uint8).copy())
        start += r
    return out


def q4_matrix_raw(name: str, raw, k: int, n: int, block_x: bool = True) -> QMatrix:
    """A GGUF Q4_1 tensor as stored (``RawTensor.blocks``: (n, k/32 * 20) bytes); frames of
    format 0x05 (``block_x``, the default) or 0x04."""
    if k % 32:
        raise CheckpointError(f"{name}: a Q4_1 tensor's rows must be whole 32-weight blocks, "
                              f"K = {k}")
    rows = pack_q4_rows_raw(np.asarray(raw, np.uint8), n, k)
    return QMatrix(name, "q4", k, n, np.ones(n), _q4_images(rows, k, name, block_x),
                   split_rows(n), block_x)


def q4_matrix_float(name: str, W: np.ndarray, block_x: Optional[bool] = None) -> QMatrix:
    """Requantise float weights to Q4_1 (llama.cpp's reference quantiser, per 32 weights
    d = (max - min) / 15 and m = min in fp16). Any K: a last partial block is padded with
    its own first weight (min and max unchanged); the engine ignores codes past K.
    ``block_x`` (default: K a multiple of 32): frames of format 0x05, else 0x04."""
    W = np.asarray(W, np.float32)
    n, k = W.shape
    nb = -(-k // 32)
    Wp = np.empty((n, nb * 32), np.float32)
    Wp[:, :k] = W
    if nb * 32 > k:
        Wp[:, k:] = W[:, 32 * (nb - 1):32 * (nb - 1) + 1]
    q, d, m = quantize_q4_1(Wp)
    rows = pack_q4_rows(q, d, m, k)
    block_x = k % 32 == 0 if block_x is None else bool(block_x)
    if block_x and k % 32:
        raise ValueError(f"{name}: format 0x05 needs K a multiple of 32, K = {k}")
    return QMatrix(name, "q4", k, n, np.ones(n), _q4_images(rows, k, name, block_x),
                   split_rows(n), block_x)


def q8_0_matrix_raw(name: str, raw, k: int, n: int) -> QMatrix:
    """A llama.cpp Q8_0 tensor as stored (``RawTensor.blocks``: (n, k/32 * 34) bytes), as
    frames of format 0x09 (Q8_0 rows, x as Q8_0 blocks): an x slot of K zero codes and a zero
    scale table, the rows from ``generators.q8.pack_q8_0_rows_raw`` (no requantisation)."""
    if k % 32:
        raise CheckpointError(f"{name}: a Q8_0 tensor's rows must be whole 32-weight blocks, "
                              f"K = {k}")
    rows = pack_q8_0_rows_raw(np.asarray(raw, np.uint8), n, k)
    nb = k // 32
    out, start = [], 0
    for r in split_rows(n):
        if r == 0:
            raise CheckpointError(f"{name}: a matrix of {n} row(s) cannot be split over two "
                                  f"engines")
        fr = build_q8_0_frame(np.zeros(k, np.int8), np.zeros(nb, np.uint16),
                              rows[start:start + r], k)
        out.append(np.frombuffer(fr, np.uint8).copy())
        start += r
    return QMatrix(name, HEAD_Q8_0, k, n, np.ones(n), out, split_rows(n), True)


def q8_0_matrix_float(name: str, W: np.ndarray) -> QMatrix:
    """Float weights quantised to Q8_0 with llama.cpp's reference quantiser
    (:func:`quantise_q8_0`: per 32 weights d = max|w| / 127, fp16), then as
    :func:`q8_0_matrix_raw` (K a multiple of 32)."""
    W = np.asarray(W)
    n, k = W.shape
    return q8_0_matrix_raw(name, quantise_q8_0(W), k, n)


def quantise_matrix(name: str, W: np.ndarray, fmt: str) -> QMatrix:
    W = np.asarray(W)
    n, k = W.shape
    if fmt == "ternary":
        q, s = quantise_ternary(W)
        scale = np.full(n, s)
    elif fmt == "int8":                   # per row: done in blocks of rows, same values,
        q = np.empty((n, k), np.int8)       # float64 temporaries of 4096 rows at a time
        scale = np.empty(n)
        for r in range(0, n, 4096):
            q[r:r + 4096], scale[r:r + 4096] = quantise_int8_rows(W[r:r + 4096])
    elif fmt == "q4":
        return q4_matrix_float(name, W)
    else:
        raise ValueError(f"fmt must be one of {list(WEIGHT_FORMATS)}, got {fmt!r}")
    return QMatrix(name, fmt, k, n, scale, _images(q, fmt), split_rows(n))


# --------------------------------------------------------------------------- embedding

Q8_0_BLOCK = 32
Q8_0_BYTES = 34           # fp16 d, then 32 int8 q: value = float32(d) * q (llama.cpp's Q8_0)


def _roundf(v: np.ndarray) -> np.ndarray:
    """C's roundf (half away from zero) on float32, written as llama.cpp's Python port does
    so that a value just below .5 never rounds up through an inexact ``+ 0.5``."""
    a = np.abs(v)
    fl = np.floor(a)
    return np.sign(v) * (fl + np.floor(2 * (a - fl)))


def quantise_q8_0(W: np.ndarray) -> np.ndarray:
    """Rows of float values -> rows of Q8_0 blocks (uint8 (N, ceil(K/32) * 34)), llama.cpp's
    reference quantiser (``quantize_row_q8_0_ref``): per 32 values d = max|w| / 127 in float32,
    q = roundf(w / d) (w * (1/d)), d stored as fp16. A last partial block is zero-padded."""
    W = np.asarray(W, np.float32)
    n, k = W.shape
    nb = -(-k // Q8_0_BLOCK)
    out = np.empty((n, nb, Q8_0_BYTES), np.uint8)
    for r0 in range(0, n, 4096):                      # bounded temporaries for a big table
        blk = np.zeros((min(4096, n - r0), nb * Q8_0_BLOCK), np.float32)
        blk[:, :k] = W[r0:r0 + 4096]
        blk = blk.reshape(-1, nb, Q8_0_BLOCK)
        d = np.max(np.abs(blk), axis=2, keepdims=True) / np.float32(127)
        with np.errstate(divide="ignore"):
            inv = np.where(d == 0, np.float32(0), np.float32(1) / d).astype(np.float32)
        q = _roundf(blk * inv).astype(np.int8)
        out[r0:r0 + 4096, :, :2] = d.astype(np.float16).view(np.uint8).reshape(-1, nb, 2)
        out[r0:r0 + 4096, :, 2:] = q.view(np.uint8)
    return out.reshape(n, nb * Q8_0_BYTES)


class EmbeddingRows:
    """The token embedding as quantised rows, dequantised one row at a time (Q8_0: per 32
    values an fp16 scale d and 32 int8 q; value = float32(d) * q, in float32, exactly as
    the gguf package and llama.cpp dequantise it). ``rows[token]`` is that row (float32,
    (hidden,)); ``blocks`` is the (vocab, bytes per row) uint8 table, a view of the image
    when loaded from one."""

    encoding = "q8_0"

    def __init__(self, blocks: np.ndarray, cols: int):
        self.blocks = blocks
        self.cols = int(cols)
        self.nb = -(-self.cols // Q8_0_BLOCK)
        if blocks.ndim != 2 or blocks.shape[1] != self.nb * Q8_0_BYTES:
            raise CheckpointError(f"embedding rows of {blocks.shape} bytes do not hold "
                                  f"{self.cols} Q8_0 values per row")

    @property
    def shape(self):
        return (self.blocks.shape[0], self.cols)

    def __len__(self):
        return self.blocks.shape[0]

    def __getitem__(self, token) -> np.ndarray:
        t = int(token)
        if not 0 <= t < self.blocks.shape[0]:
            raise IndexError(f"token id {t} outside the embedding (0..{self.blocks.shape[0] - 1})")
        return hostops.embed_q8_0(self.blocks[t], self.cols)

    @classmethod
    def from_float(cls, W: np.ndarray) -> "EmbeddingRows":
        return cls(quantise_q8_0(W), np.shape(W)[1])


# --------------------------------------------------------------------------- the model

def write_matrix(w, m: QMatrix) -> None:
    """A matrix's sections: its two port frames and its scales (image.ImageWriter ``w``)."""
    for p, img in enumerate(m.images):
        w.add(f"frame{p}:{m.name}", np.asarray(img, np.uint8))
    w.add(f"scale:{m.name}", np.asarray(m.scale, np.float64))


@dataclasses.dataclass
class Model:
    """A converted model: every matrix as its two port frames, the small tensors, the
    embedding as quantised rows. Made by :func:`convert` (in memory) or :meth:`load` (an
    image file, mapped: nothing of matrix size is copied; see generators/runtime/model/image.py)."""

    config: ModelConfig
    engines: EngineConfig
    fmt: str
    embedding: EmbeddingRows                # one row per token, dequantised on use
    norms: Dict[str, np.ndarray]           # "layers.{i}.input", "layers.{i}.post", "final"
    matrices: Dict[str, QMatrix]
    source: str = ""
    name: str = ""
    bitnet: bool = False
    rope: Optional[Tuple[np.ndarray, np.ndarray]] = None    # cos, sin (max_context, head_dim/2)
    tokenizer_data: Optional[dict] = None   # Tokenizer.to_data(): tokenizer.json + template
    path: Optional[Path] = None             # the image file this model was loaded from
    #: fixed KV steps (layers, kv_heads, 2: K, V) float32, calibrated at conversion
    #: (quantise.calibrate_kv_steps); None: the running absmax (docs/runtime.md section 4.5)
    kv_steps: Optional[np.ndarray] = None
    kv_calibration: Optional[dict] = None   # how: text, tokens, margin

    def matrix(self, layer: Optional[int], short: str) -> QMatrix:
        return self.matrices["lm_head" if layer is None else f"layers.{layer}.{short}"]

    def embed_row(self, token: int) -> np.ndarray:
        """The embedding of ``token``: float32 (hidden,), one row dequantised."""
        return self.embedding[token]

    @property
    def embed(self) -> EmbeddingRows:
        """``model.embed[token]``: the same row as :meth:`embed_row` (no table is built)."""
        return self.embedding

    def rope_tables(self):
        """cos, sin (max_context, head_dim / 2) float32 for the HF rotate_half RoPE: the image's
        tables (``decoder.rope_tables`` at conversion), computed when the model has none."""
        if self.rope is not None:
            return self.rope
        c = self.config
        return hostops.rope_tables(c.head_dim, c.rope_theta, self.engines.max_context)

    def tokenizer(self):
        """The model's Tokenizer (vocabulary and chat template travel in the image)."""
        if not self.tokenizer_data:
            raise TokenizerError(f"{self.path or self.source or 'the model'} has no tokenizer "
                                 f"(converted from a folder without tokenizer.json): give "
                                 f"token ids (decode --prompt-ids)")
        return Tokenizer.from_data(self.tokenizer_data, str(self.path or self.source))

    def weight_bytes(self) -> Dict[str, int]:
        """Frame bytes per matrix format (both ports; what one token streams)."""
        out: Dict[str, int] = {}
        for m in self.matrices.values():
            out[m.fmt] = out.get(m.fmt, 0) + sum(len(i) for i in m.images)
        return out

    # ------------------------------------------------------------------ one file
    def header(self) -> dict:
        """The image header's model part (image.py writes it with the section table)."""
        return {"kind": "ternary-pynq model image", "generator": f"ternary-pynq {__version__}",
                "name": self.name, "source": self.source, "fmt": self.fmt,
                "bitnet": self.bitnet, "config": self.config.as_dict(),
                "engines": self.engines.as_dict(),
                "matrices": {m.name: dict({"fmt": m.fmt, "k": m.k, "n": m.n, "rows": m.rows},
                                          **({"block_x": True} if m.block_x else {}))
                             for m in self.matrices.values()},
                "embedding": {"encoding": self.embedding.encoding,
                              "rows": self.embedding.shape[0], "cols": self.embedding.cols},
                "rope": self.rope is not None,
                "kv_steps": self.kv_calibration if self.kv_steps is not None else None,
                "tokenizer": None if not self.tokenizer_data else
                {k: v for k, v in self.tokenizer_data.items() if k != "tokenizer_json"}}

    def save(self, path) -> Path:
        """Write the model image (generators/runtime/model/image.py): one file, each section on a
        page of its own."""
        w = ImageWriter(path)
        try:
            for m in self.matrices.values():
                write_matrix(w, m)
            return self.finish_image(w)
        except BaseException:
            w.abort()
            raise

    def finish_image(self, w) -> Path:
        """Write every section but the matrices' (those came first), then the header."""
        try:
            for k, v in self.norms.items():
                w.add(f"norm:{k}", np.asarray(v, np.float64))
            w.add("embed.q8_0", self.embedding.blocks)
            if self.rope is not None:
                w.add("rope.cos", np.asarray(self.rope[0], np.float64))
                w.add("rope.sin", np.asarray(self.rope[1], np.float64))
            if self.kv_steps is not None:
                w.add("kv.steps", np.asarray(self.kv_steps, np.float32))
            if self.tokenizer_data:
                w.add_bytes("tokenizer.json", self.tokenizer_data["tokenizer_json"].encode())
            return w.close(self.header())
        except BaseException:
            w.abort()
            raise

    @classmethod
    def load(cls, path) -> "Model":
        """Map an image file (copy-on-write: nothing is read before it is used; a write to a
        frame changes this process's copy only). ImageError names what is wrong with it."""
        im = open_image(path)
        h = im.header
        try:
            if h.get("kind") != "ternary-pynq model image":
                raise ImageError(f"{path}: not a ternary-pynq model image")
            mats = {}
            for name, m in h["matrices"].items():
                mats[name] = QMatrix(name, m["fmt"], m["k"], m["n"], im.section(f"scale:{name}"),
                                     [im.section(f"frame0:{name}"), im.section(f"frame1:{name}")],
                                     list(m["rows"]), bool(m.get("block_x", False)))
                code = mats[name].code
                for img in mats[name].images:
                    if len(img) < 8 or int(img[6]) != code:
                        raise ImageError(f"{path}: {name}'s frame has format byte "
                                         f"0x{int(img[6]) if len(img) > 6 else 0:02X}, its "
                                         f"header says 0x{code:02X}: convert the model again")
            norms = {s[5:]: im.section(s) for s in h["sections"] if s.startswith("norm:")}
            e = h["embedding"]
            if e["encoding"] != EmbeddingRows.encoding:
                raise ImageError(f"{path}: embedding encoding {e['encoding']!r} is not "
                                 f"{EmbeddingRows.encoding!r}")
            emb = EmbeddingRows(im.section("embed.q8_0"), e["cols"])
            rope = (im.section("rope.cos"), im.section("rope.sin")) if h.get("rope") else None
            tok = None
            if h.get("tokenizer") is not None:
                tok = dict(h["tokenizer"],
                           tokenizer_json=im.section("tokenizer.json").tobytes().decode())
            kvc = h.get("kv_steps")
            kvs = im.section("kv.steps") if kvc is not None else None
            cfg = ModelConfig(**h["config"])
            eng = EngineConfig(**h["engines"])
        except (KeyError, TypeError) as exc:
            raise ImageError(f"{path}: the header lacks {exc}: not an image this version "
                             f"wrote; convert the model again") from None
        return cls(cfg, eng, h["fmt"], emb, norms, mats, h.get("source", ""),
                   h.get("name", ""), bool(h.get("bitnet")), rope, tok, Path(path), kvs, kvc)

    def calibrate_kv(self, tokenizer=None, margin: Optional[float] = None,
                     tokens: Optional[int] = None) -> "Model":
        """Set :attr:`kv_steps` from the calibration text (``tokenizer``: the model's; without
        one, ids drawn with a fixed seed): ``quantise.calibrate_kv_steps``. Returns self."""
        margin = Q.KV_MARGIN if margin is None else margin
        tokens = Q.KV_CAL_TOKENS if tokens is None else tokens
        ids = Q.calibration_ids(tokenizer, self.config.vocab_size,
                                min(tokens, self.engines.max_context))
        self.kv_steps = Q.calibrate_kv_steps(self, ids, margin)
        self.kv_calibration = {"text": Q.CALIBRATION_TEXT.name if tokenizer is not None
                               else "random ids (seed 0)", "tokens": len(ids), "margin": margin}
        return self


def stderr_notice(text: str) -> None:
    print(text, file=sys.stderr)


def convert(ckpt: Checkpoint, fmt: Optional[str] = None,
            engines: EngineConfig = PYNQ_Z1_ENGINES, notice=stderr_notice, sink=None,
            progress=None, kv: bool = True) -> Model:
    """Quantise and pack every matrix once. ``fmt``: "int8", "ternary", "q4", or None (ternary
    for a BitNet-trained checkpoint, INT8 for any other).

    "q4": each matrix whose checkpoint tensor is stored as Q4_1 (a GGUF's ``ckpt.raw``) runs
    on the Q4_1 lane as stored; any other tensor of a GGUF runs as INT8 rows; a checkpoint
    without any quantised tensor (float weights) is quantised to Q4_1 and ``notice`` (a
    callable taking one line; default: stderr) says so. A GGUF asked for q4 that has no Q4_1
    tensor is a CheckpointError.

    ``sink``: a callable given each QMatrix as soon as it is made, whose frames are then
    dropped (the returned Model's matrices have ``images = [None, None]``): how
    :func:`generators.runtime.model.image.convert_file` writes an image holding one matrix at a
    time. ``progress(layer, layers)``: called after each layer.

    ``kv``: calibrate the fixed KV steps (:meth:`Model.calibrate_kv` with the checkpoint's
    tokenizer: its GGUF metadata or its folder's tokenizer.json; docs/runtime.md section 4.5);
    False leaves them None (the running absmax). With a ``sink`` the caller calibrates
    (``image.convert_file`` reads the frames back)."""
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

    def q4_1(hf: str) -> bool:
        r = raw.get(hf)
        return r is not None and r.qtype == "Q4_1"

    def block_x_of(names: Dict[str, str], short: str) -> bool:
        """Format 0x05 for a Q4_1 matrix when every matrix of its transfer (q k v; gate up;
        o; down: they share one x slot) runs Q4_1 rows with K a multiple of 32; else 0x04
        (INT8 x), as the INT8 rows beside it need."""
        group = next(g for g in TRANSFER_GROUPS if short in g)
        if gguf:
            return all(q4_1(names[s]) for s in group)
        return all(np.shape(t[names[s]])[1] % 32 == 0 for s in group)

    def matrix(name: str, hf: str, block_x: bool = False) -> QMatrix:
        if fmt == "int8":
            return int8_lane_matrix(name, hf)
        if fmt != "q4":
            return quantise_matrix(name, t[hf], fmt)
        r = raw.get(hf)
        if q4_1(hf):
            n, k = (int(v) for v in r.shape)
            return q4_matrix_raw(name, r.blocks, k, n, block_x)
        if gguf:                        # Q8_0, F16, F32, other quantised types: INT8 rows
            return quantise_matrix(name, t[hf], "int8")
        return q4_matrix_float(name, t[hf], block_x)

    def int8_lane_matrix(name: str, hf: str) -> QMatrix:
        """The INT8 lane's matrix: Q8_0 rows with Q8_0 x (format 0x09): a GGUF's Q8_0 tensor
        as stored, any other quantised to Q8_0 here (llama.cpp's reference quantiser); INT8
        rows (0x08, one INT8 step per vector) where K % 32 != 0. The matrices of one
        transfer share K, so they share the x format."""
        r = raw.get(hf)
        if r is not None and r.qtype == "Q8_0":
            n, k = (int(v) for v in r.shape)
            return q8_0_matrix_raw(name, r.blocks, k, n)
        if np.shape(t[hf])[1] % 32:
            return quantise_matrix(name, t[hf], "int8")
        return q8_0_matrix_float(name, t[hf])

    def head_matrix(hf: str) -> QMatrix:
        """The LM head: Q8_0 rows with Q8_0 x (format 0x09) for "int8" and "q4" (a GGUF's Q8_0
        tensor as stored, any other quantised to Q8_0 here), INT8 rows where K % 32 != 0;
        "ternary": ternary rows."""
        if fmt == "ternary":
            return matrix("lm_head", hf)
        return int8_lane_matrix("lm_head", hf)

    def add(q: QMatrix) -> None:
        if sink is not None:
            sink(q)
            q.images = [None, None]
        mats[q.name] = q

    mats: Dict[str, QMatrix] = {}
    norms: Dict[str, np.ndarray] = {"final": t["model.norm.weight"].astype(np.float64)}
    for i in range(cfg.num_hidden_layers):
        names = matrix_names(i)
        for short, hf in names.items():
            add(matrix(f"layers.{i}.{short}", hf, fmt == "q4" and block_x_of(names, short)))
        for key, hf in (("input", "input_layernorm"), ("post", "post_attention_layernorm")):
            norms[f"layers.{i}.{key}"] = t[f"model.layers.{i}.{hf}.weight"].astype(np.float64)
        if progress is not None:
            progress(i + 1, cfg.num_hidden_layers)
    head_name = "model.embed_tokens.weight" if cfg.tie_word_embeddings else "lm_head.weight"
    add(head_matrix(head_name))
    model = Model(cfg, engines, fmt, embedding_rows(ckpt), norms, mats, ckpt.source,
                  model_name(ckpt), bool(ckpt.bitnet),
                  hostops.rope_tables(cfg.head_dim, cfg.rope_theta, engines.max_context))
    if kv and sink is None:
        try:
            tok = checkpoint_tokenizer(str(ckpt.source or ""), ckpt)
        except (TokenizerError, OSError, KeyError, ValueError):
            tok = None                  # a file without a usable tokenizer: seeded ids
        model.calibrate_kv(tok)
    return model


def embedding_rows(ckpt: Checkpoint) -> EmbeddingRows:
    """The embedding as Q8_0 rows: a GGUF's Q8_0 table as stored (so each dequantised row is
    the float32 the gguf package gives, bit for bit); any other table (a float checkpoint, a
    GGUF's F16/F32 or other quantised types) quantised to Q8_0 with llama.cpp's reference
    quantiser."""
    name = "model.embed_tokens.weight"
    r = (getattr(ckpt, "raw", None) or {}).get(name)
    if r is not None and r.qtype == "Q8_0":
        return EmbeddingRows(np.array(r.blocks, np.uint8), int(r.shape[1]))
    return EmbeddingRows.from_float(ckpt.tensors[name])
