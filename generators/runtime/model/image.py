"""The model image: one file per converted model, what the board loads and nothing else.

    ternary-pynq convert MODEL --format int8 -o smollm2.int8.tpimg   # off the board, once
    ternary-pynq info smollm2.int8.tpimg                             # what it holds
    model = Model.load("smollm2.int8.tpimg")                         # mmap, no copy

``MODEL`` is a GGUF file or a Hugging Face folder; conversion (:func:`convert_file`) reads and
dequantises it once, off the board. The image holds everything ``chat`` and ``decode`` need:
every matrix as the engines' frames (header, x slot, rows padded to whole beats: the bytes a
DMA buffer gets), the per-row scales, the norms, the RoPE tables, the embedding as quantised
rows (Q8_0 blocks; one row is dequantised per token), the tokenizer and the chat template.
On the board nothing reads a GGUF or holds a float32 matrix.

File layout (little-endian; docs/runtime.md "The model image"):

    offset 0     8 B   magic b"TPYNQIMG"
    offset 8     u32   IMAGE_VERSION
    offset 12    u32   0 (reserved)
    offset 16    u64   offset of the JSON header
    offset 24    u64   bytes of the JSON header (the file ends with it: its size is the sum)
    offset 4096  the sections, each at a multiple of ALIGN (4096 B, a page), zero padding
    after the last section: the JSON header (UTF-8)

The header sits at the end so that a converter can write each section as soon as it is made
(nothing of the whole model is held to write the file). It lists every section (offset,
bytes, dtype, shape, CRC-32) and the model: configuration, engine configuration, weight format,
matrices (format, K, N, rows per port), the embedding's encoding, the tokenizer's small fields.
Every section starts on a page, so it can be mmap'ed on its own or read with ``readinto``
straight into a DMA buffer.

Section names: ``frame0:NAME`` / ``frame1:NAME`` (a matrix's two port frames, uint8),
``scale:NAME`` (float64 per row), ``norm:KEY`` (float64), ``embed.q8_0`` (uint8, one row of
Q8_0 blocks per token), ``rope.cos`` / ``rope.sin`` (float32, (max_context, head_dim / 2):
``hostops.rope_tables``),
``tokenizer.json`` (the ``tokenizers`` serialisation, UTF-8 bytes), ``kv.steps`` (float32
(layers, kv_heads, 2): the fixed K and V steps calibrated at conversion; the header's
``kv_steps`` says on what).
"""
from __future__ import annotations

import json
import os
import struct
import tempfile
import zlib
from pathlib import Path
from typing import Dict

import numpy as np

from ..errors import ImageError
from .tokenizer import Tokenizer

__all__ = ["ImageError", "ImageWriter", "ImageFile", "IMAGE_MAGIC", "IMAGE_VERSION", "ALIGN",
           "is_image", "open_image", "read_header", "model_name", "checkpoint_tokenizer",
           "SUFFIX"]

IMAGE_MAGIC = b"TPYNQIMG"
IMAGE_VERSION = 1
#: every section starts at a multiple of this (a page of the board's Linux)
ALIGN = 4096
#: the file name suffix the documentation uses (any name is read: the magic decides)
SUFFIX = ".tpimg"
_PRELUDE = struct.Struct("<8sIIQQ")
_DTYPES = {"u1": np.uint8, "i1": np.int8, "f8": np.float64, "f4": np.float32, "u4": np.uint32}


def is_image(path) -> bool:
    """True when ``path`` is a file that starts with the image magic."""
    p = Path(path)
    if not p.is_file():
        return False
    with open(p, "rb") as f:
        return f.read(len(IMAGE_MAGIC)) == IMAGE_MAGIC


def _dtype_code(a: np.ndarray) -> str:
    for code, dt in _DTYPES.items():
        if a.dtype == np.dtype(dt):
            return code
    raise TypeError(f"section dtype {a.dtype} is not one of {sorted(_DTYPES)}")


class ImageWriter:
    """Write an image section by section: ``add(name, array)`` as each is made, then
    ``close(header)``. The file appears under its name only when complete (written to a
    temporary file in the same folder, renamed at the end)."""

    def __init__(self, path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".part",
                                   dir=self.path.parent)
        self._tmp = Path(tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)            # mkstemp makes 0600: as open() would
        self._f = os.fdopen(fd, "wb")
        self._f.write(b"\0" * ALIGN)
        self.pos = ALIGN
        self.sections: Dict[str, dict] = {}

    def add(self, name: str, a: np.ndarray) -> None:
        if name in self.sections:
            raise ValueError(f"section {name!r} written twice")
        a = np.ascontiguousarray(a)
        a = a.astype(a.dtype.newbyteorder("<")) if a.dtype.byteorder == ">" else a
        code = _dtype_code(a)
        pad = -self.pos % ALIGN
        if pad:
            self._f.write(b"\0" * pad)
            self.pos += pad
        buf = memoryview(a).cast("B") if a.size else b""
        self._f.write(buf)
        self.sections[name] = {"offset": self.pos, "nbytes": a.nbytes, "dtype": code,
                               "shape": list(a.shape), "crc32": zlib.crc32(buf)}
        self.pos += a.nbytes

    def read(self, name: str) -> np.ndarray:
        """A section already written, read back (a read-only map of the file being
        written): how convert_file calibrates the KV steps on frames it no longer holds."""
        s = self.sections[name]
        self._f.flush()
        return np.memmap(self._tmp, dtype=np.dtype(s["dtype"]), mode="r", offset=s["offset"],
                         shape=tuple(s["shape"]))

    def add_bytes(self, name: str, data: bytes) -> None:
        self.add(name, np.frombuffer(data, np.uint8))

    def close(self, header: dict) -> Path:
        text = json.dumps(dict(header, sections=self.sections), separators=(",", ":"),
                          ensure_ascii=False).encode()
        hoff = self.pos
        self._f.write(text)
        self._f.seek(0)
        self._f.write(_PRELUDE.pack(IMAGE_MAGIC, IMAGE_VERSION, 0, hoff, len(text)))
        self._f.close()
        os.replace(self._tmp, self.path)
        return self.path

    def abort(self) -> None:
        try:
            self._f.close()
        finally:
            self._tmp.unlink(missing_ok=True)


class ImageFile:
    """An image opened for reading: ``header`` (dict) and ``section(name)`` (a numpy view
    of the file, mapped copy-on-write: nothing is read until used, and a write to a view
    changes the process's copy, never the file)."""

    def __init__(self, path, header: dict, mm: np.ndarray):
        self.path, self.header, self._mm = Path(path), header, mm

    def has(self, name: str) -> bool:
        return name in self.header["sections"]

    def section(self, name: str) -> np.ndarray:
        s = self.header["sections"].get(name)
        if s is None:
            raise ImageError(f"{self.path}: section {name!r} missing")
        raw = self._mm[s["offset"]:s["offset"] + s["nbytes"]]
        return raw.view(_DTYPES[s["dtype"]]).reshape(s["shape"])

    def verify(self) -> list:
        """Names of the sections whose CRC-32 is not the one written."""
        bad = []
        for name, s in self.header["sections"].items():
            raw = self._mm[s["offset"]:s["offset"] + s["nbytes"]]
            if zlib.crc32(memoryview(raw)) != s["crc32"]:
                bad.append(name)
        return bad


def read_header(path) -> dict:
    """The header of an image, checked (magic, version, size): reads only the prelude and the
    header's bytes."""
    p = Path(path)
    if not p.is_file():
        raise ImageError(f"{p}: no such file")
    size = p.stat().st_size
    with open(p, "rb") as f:
        pre = f.read(_PRELUDE.size)
        if len(pre) < _PRELUDE.size or pre[:8] != IMAGE_MAGIC:
            hint = ""
            if pre[:2] == b"PK":
                hint = (" (an .npz model file of an earlier version: convert the model again "
                        "with `ternary-pynq convert MODEL -o FILE`)")
            elif pre[:4] == b"GGUF":
                hint = " (a GGUF file: convert it with `ternary-pynq convert`)"
            raise ImageError(f"{p}: not a ternary-pynq model image{hint}")
        _, version, _, hoff, hlen = _PRELUDE.unpack(pre)
        if version != IMAGE_VERSION:
            raise ImageError(f"{p}: model image version {version}, this runtime reads version "
                             f"{IMAGE_VERSION}: convert the model again")
        if hoff + hlen != size:
            raise ImageError(f"{p}: {size:,} bytes, the image says {hoff + hlen:,}: "
                             f"copy the file again")
        f.seek(hoff)
        try:
            header = json.loads(f.read(hlen))
        except (ValueError, UnicodeDecodeError) as exc:
            raise ImageError(f"{p}: damaged header ({exc})") from None
    for name, s in header["sections"].items():
        if s["offset"] % ALIGN or s["offset"] + s["nbytes"] > hoff or s["dtype"] not in _DTYPES:
            raise ImageError(f"{p}: section {name!r} lies outside the data or is misaligned")
    return header


def open_image(path) -> ImageFile:
    """Check the header and map the file (copy-on-write)."""
    header = read_header(path)
    mm = np.memmap(path, dtype=np.uint8, mode="c")
    return ImageFile(path, header, mm)


# ----------------------------------------------------------------------------- names

def model_name(ckpt) -> str:
    """A short name for messages: the GGUF's general.basename + size label, else the stem."""
    md = getattr(ckpt, "metadata", None) or {}
    if md.get("general.basename"):
        return f"{md['general.basename']} {md.get('general.size_label', '')}".strip()
    return Path(str(ckpt.source).split(" ")[0]).stem


def checkpoint_tokenizer(path, ckpt):
    """The Tokenizer of a checkpoint: a GGUF's metadata, or a folder's tokenizer.json (None
    when the folder has none: such a model runs from token ids only)."""
    p = Path(path)
    if getattr(ckpt, "metadata", None) is not None:
        return Tokenizer.from_metadata(ckpt.metadata, str(p))
    if p.is_dir() and (p / "tokenizer.json").is_file():
        return Tokenizer.from_folder(p)
    return None


