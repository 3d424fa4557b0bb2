"""The memory plan: every byte of DMA memory and of host memory the runtime uses, computed
before anything is allocated, printed by ``ternary-pynq info``, checked against the board's
budgets, and used by the runtime to place every buffer (so what is printed is what is
allocated).

    plan = memory_plan(model, context=2048)
    print("\\n".join(plan.lines()))
    refusal = plan.check(cma_mb=128, host_mb=64)      # None, or the one-line refusal

DMA memory (docs/runtime.md, "Memory map"), four regions, each one ``pynq.allocate``:

* ``weights``: every matrix half's whole frame (8-byte header with its static tag, an x slot
  the runtime does not use, the rows), 64-byte aligned. A model whose images already live in
  DMA buffers (the image file, loaded straight into CMA) brings them: counted, not allocated.
* ``kv``: the INT8 KV cache in the layout the attention engine reads, split by HP port (port 0
  carries the even 8-byte words of every 16-byte attention beat, port 1 the odd ones):
  ``kv[port][K|V][layer][kv_head][position][head_dim / 2]``; a position of one (layer, KV head)
  is 32 bytes per port for K and 32 for V, so K_p rows 0..L-1 are one contiguous block. An
  INT16 attention engine's (``kv_bits = 16``): two bytes an element, ``[head_dim]`` bytes a
  position per port (``row_beats`` 8-byte words), twice the region.
* ``frames`` (not cached): the x slots (one per transfer kind, read by both DMAs), the attention
  header+q parts (per KV head and port; port 1's starts with the route word) and the descriptor
  chains of the four DMA channels (64 bytes each): what the CPU writes and a DMA reads, and the
  STATUS words both write.
* ``results`` (cached): the S2MM result slots (one per frame and port, reused by every layer;
  the LM head's logits among them), every byte the DMAs write and the CPU reads back. The CPU
  never writes them, so their cache lines are never dirty: after a transfer the CPU invalidates
  exactly the lines of the words a slot received (32-byte lines, ``LINE``; each slot starts on
  a 64-byte boundary and owns the lines it touches, the region's size is whole lines) and reads
  them through the caches, instead of one uncached bus read per word (docs/runtime.md 4.1).

With matrix engines of ``vectors`` V > 1 (B-vector frames, docs/runtime.md 4.7) each x slot
holds a vectors word and V vectors, each matrix half has a B-vector header word in ``frames``
and each result slot V words per row; ``streams`` S > 1 makes the ``kv`` region S caches.

Transfers per token and port: per layer q+k+v (one frame each), the KV heads' attention frames,
o, gate+up, down (5), then the LM head only where a token is sampled. A matrix frame is three
MM2S descriptors ([header][x][rows], SOF on the first, EOF on the last) and one S2MM descriptor
(the N results and the status word); an attention frame on port p is [header+q part][K_p rows
0..L-1][V_p rows 0..L-1], whose two lengths the host writes per token, and one S2MM descriptor
on port 0.

Host memory: the runtime's own arrays (RoPE tables, KV steps, the step's vectors and result
words, the transfer tables) and the model's host-side arrays (embedding table, weight images
held on the host, scales, norms), each item named.
"""
from __future__ import annotations

import dataclasses
import mmap
import sys
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from generators.q4 import q4_row_bytes
from generators.q8 import q8_row_bytes

from ..errors import ContextFitError
from ..model.checkpoint import ModelConfig, PYNQ_Z1_ENGINES
from ..model.model import HEAD_Q8_0, LAYER_MATRICES, split_rows, x_slot_bytes
from ..model.synthetic import SMOLLM2_135M
from . import pg021 as R

__all__ = ["MemoryPlan", "memory_plan", "board_context", "model_shape", "Region", "TransferPlan", "FramePlan",
           "KINDS", "MIB", "info", "ContextFitError", "cloop_bytes"]

MIB = 1 << 20
#: the transfer kinds of one layer, in order, and the LM head's
QKV, ATT, O, GU, DOWN, LM = "qkv", "att", "o", "gate_up", "down", "lm_head"
KINDS = (QKV, ATT, O, GU, DOWN)
KIND_MATRICES = {QKV: ("q", "k", "v"), O: ("o",), GU: ("gate", "up"), DOWN: ("down",),
                 LM: ("lm_head",)}
#: alignment of every item (descriptors need 64)
ALIGN = 64
#: the Cortex-A9's L1 and the PL310's line (bytes): an invalidate covers whole lines
LINE = 32
#: the CMA budget of PYNQ's Pynq-Z1 image, and the host's beyond the interpreter (MiB)
CMA_MB = 128
HOST_MB = 64
#: where the board's kernel says how much CMA is free (CmaFree) and in all (CmaTotal)
MEMINFO = "/proc/meminfo"
#: per transfer: the plan's records of it and the runtime's descriptor tables (Python objects and
#: small arrays); SmolLM2 measured 11.2 KB per transfer with tracemalloc (the whole runtime
#: object at creation, make host-bench), rounded up
TRANSFER_TABLE_BYTES = 12288


def _align(n: int, a: int = ALIGN) -> int:
    return -(-int(n) // a) * a


# --------------------------------------------------------------------------- model shapes

@dataclasses.dataclass
class MatrixShape:
    """What the plan needs of a matrix: its format, K, rows per port and frame bytes per port."""

    name: str
    fmt: str
    k: int
    n: int
    rows: List[int]
    image_bytes: List[int]
    block_x: bool = False           # formats 0x05 / 0x09: x as codes and a scale table

    @property
    def x_bytes(self) -> int:
        return x_slot_bytes(self.k, self.block_x, self.fmt)


def row_stride(fmt: str, k: int) -> int:
    """Bytes of one row in a frame (padded to whole 8-byte beats)."""
    if fmt == "q4":
        return q4_row_bytes(k)
    if fmt == HEAD_Q8_0:
        return q8_row_bytes(k)
    payload = k if fmt == "int8" else -(-k // 5)
    return -(-payload // 8) * 8


def shape_of(m) -> MatrixShape:
    if isinstance(m, MatrixShape):
        return m
    return MatrixShape(m.name, m.fmt, m.k, m.n, list(m.rows), [len(i) for i in m.images],
                       bool(getattr(m, "block_x", False)))


@dataclasses.dataclass
class ModelShape:
    """A model without weights (config, engines, matrix shapes): plans for models not loaded."""

    config: object
    engines: object
    fmt: str
    matrices: Dict[str, MatrixShape]


def model_shape(config, engines, fmt: str, head_fmt: Optional[str] = None) -> ModelShape:
    """The shapes of ``convert(ckpt, fmt)``'s matrices without converting (``head_fmt``: the LM
    head's format; by default convert's: Q8_0 rows with Q8_0 x, format 0x09, for ``int8`` and
    ``q4`` when K is a multiple of 32, else INT8 rows; ternary rows for ``ternary``). The
    layers of ``int8`` are Q8_0 rows with Q8_0 x too where K is a multiple of 32 (else INT8
    rows); of ``q4`` Q4_1 rows, with Q8_1 x (0x05) where K is a multiple of 32."""
    c = config
    H, I, V, kv = c.hidden_size, c.intermediate_size, c.vocab_size, c.kv_dim
    dims = {"q": (H, H), "k": (kv, H), "v": (kv, H), "o": (H, H), "gate": (I, H),
            "up": (I, H), "down": (H, I)}
    mats = {}

    def add(name, f, n, k, block_x=False):
        rows = split_rows(n)
        img = [8 + x_slot_bytes(k, block_x, f) + r * row_stride(f, k) for r in rows]
        mats[name] = MatrixShape(name, f, k, n, rows, img, block_x)

    for i in range(c.num_hidden_layers):
        for s in LAYER_MATRICES:
            n, k = dims[s]
            if fmt == "int8" and k % 32 == 0:
                add(f"layers.{i}.{s}", HEAD_Q8_0, n, k, True)
            else:
                add(f"layers.{i}.{s}", fmt, n, k, fmt == "q4" and k % 32 == 0)
    if head_fmt is None:
        head_fmt = fmt if fmt == "ternary" else HEAD_Q8_0 if H % 32 == 0 else "int8"
    add("lm_head", head_fmt, V, H, head_fmt == HEAD_Q8_0)
    return ModelShape(config, engines, fmt, mats)


# --------------------------------------------------------------------------- the plan

@dataclasses.dataclass
class Region:
    """One DMA buffer: its bytes, items at offsets, whether the CPU's view of it is cached."""

    name: str
    what: str
    cacheable: bool
    items: Dict[object, Tuple[int, int]] = dataclasses.field(default_factory=dict)
    nbytes: int = 0
    provided: bool = False          # brought by the model (its images already in DMA memory)
    #: the DMAs write it and the CPU reads it (cached: invalidated by range before each read)
    dma_writes: bool = False

    def add(self, key, nbytes: int, align: int = ALIGN) -> int:
        off = _align(self.nbytes, align)
        self.items[key] = (off, int(nbytes))
        self.nbytes = off + int(nbytes)
        return off


@dataclasses.dataclass
class FramePlan:
    """One frame of a transfer: per port its MM2S segments (region, key, fixed bytes or None
    for a KV block whose length grows with L) and its S2MM result slot (key or None)."""

    name: str                       # matrix name or "kv{h}"
    tag: int
    mm2s: List[List[Tuple[str, object, Optional[int]]]]
    s2mm: List[Optional[object]]
    rows: List[int]                 # result words expected per port (without the status)


@dataclasses.dataclass
class TransferPlan:
    """One DMA transfer (a TAILDESC write per channel it uses): its frames and, per channel
    (0: port 0 MM2S, 1: port 0 S2MM, 2: port 1 MM2S, 3: port 1 S2MM), the first descriptor's
    item key in the frames region and the descriptor count."""

    index: int
    layer: Optional[int]
    kind: str
    frames: List[FramePlan]
    desc: Dict[int, Tuple[object, int]] = dataclasses.field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.kind if self.layer is None else f"{self.kind} of layer {self.layer}"


def channel(port: int, s2mm: bool) -> int:
    return 2 * port + int(s2mm)


CHANNEL_NAMES = ("port 0 MM2S", "port 0 S2MM", "port 1 MM2S", "port 1 S2MM")


@dataclasses.dataclass
class MemoryPlan:
    context: int
    fmt: str
    regions: Dict[str, Region]
    transfers: List[TransferPlan]
    host: List[Tuple[str, int, str]]
    config: object
    acfg: object
    kv_row: int                       # bytes of one position's K (or V) on one port
    part_bytes: List[int]             # attention header+q part bytes per port
    #: the matrix engines' ``vectors`` (V): x slots hold V vectors behind a vectors word,
    #: result slots V words per row, every matrix half has a B-vector header
    vectors: int = 1
    #: KV caches (one per stream: Decoder.generate_streams), each of ``context`` positions
    streams: int = 1

    # ------------------------------------------------------------------ figures
    @property
    def dma_bytes(self) -> int:
        return sum(r.nbytes for r in self.regions.values())

    @property
    def ddr_bytes(self) -> int:
        """A DDR model holding every region, each page-aligned (what a simulated DDR needs)."""
        return sum(-(-r.nbytes // 4096) * 4096 for r in self.regions.values()) + 4096

    @property
    def host_bytes(self) -> int:
        return sum(n for _, n, _ in self.host)

    @property
    def runtime_host_bytes(self) -> int:
        """The host bytes the runtime allocates (not the model's)."""
        return sum(n for name, n, _ in self.host if not name.startswith("model:"))

    @property
    def descriptors(self) -> int:
        return sum(n for t in self.transfers for _, n in t.desc.values())

    def transfers_per_token(self, logits: bool = True) -> int:
        """DMA transfers per token: per layer q+k+v, attention, o, gate+up, down (each one
        TAILDESC write per channel it uses), +1 for the LM head where a token is sampled."""
        return sum(1 for t in self.transfers if logits or t.kind != LM)

    def tail_writes_per_token(self, logits: bool = True) -> int:
        """TAILDESC register writes per token (one per channel a transfer uses)."""
        return sum(len(t.desc) for t in self.transfers if logits or t.kind != LM)

    def kv_offset(self, port: int, which: int, layer: int, head: int, pos: int = 0,
                  stream: int = 0) -> int:
        """Offset in the kv region of position ``pos`` of K (which 0) or V (1) of stream
        ``stream``'s cache (each stream's cache is the whole layout of one, one after the
        other)."""
        c = self.config
        return self.kv_stream_bytes * stream + \
            ((((port * 2 + which) * c.num_hidden_layers + layer) * c.num_key_value_heads
              + head) * self.context + pos) * self.kv_row

    @property
    def kv_stream_bytes(self) -> int:
        """Bytes of one stream's KV cache (both ports, K and V, every layer and KV head)."""
        c = self.config
        return 2 * 2 * c.num_hidden_layers * c.num_key_value_heads * self.context * self.kv_row

    def lines(self) -> List[str]:
        c = self.config
        out = [f"memory plan: {c.num_hidden_layers} layers, {self.fmt} weights, context "
               f"{self.context}" + (f", {self.streams} streams" if self.streams > 1 else "")
               + (f", frames of up to {self.vectors} vectors" if self.vectors > 1 else "")
               + " (MiB = 2^20 bytes)"]
        out.append(f"  DMA memory {_mib(self.dma_bytes)} MiB ({self.dma_bytes:,} bytes):")
        for r in self.regions.values():
            extra = " (the model's own DMA buffers)" if r.provided else ""
            out.append(f"    {r.name:8s} {_mib(r.nbytes):>9s} MiB  {_cache_word(r)}: "
                       f"{r.what}{extra}")
        out.append(f"  descriptors {self.descriptors:,} ({self.descriptors * R.DESC_BYTES:,} "
                   f"bytes); transfers per token {self.transfers_per_token(False)} (+1 for "
                   f"the LM head where a token is sampled), "
                   f"{self.tail_writes_per_token(False)} TAILDESC writes")
        out.append(f"  host memory {_mib(self.host_bytes)} MiB ({self.host_bytes:,} bytes):")
        for name, n, what in self.host:
            out.append(f"    {_mib(n):>9s} MiB  {name}: {what}")
        return out

    def fit_context(self, cma_mb: float) -> int:
        """The largest context (at most the engine's max_context) whose KV cache, beside the
        plan's weights, frames and results, fits ``cma_mb`` MiB of DMA memory; 0: none."""
        fixed = self.dma_bytes - self.regions["kv"].nbytes
        per = self.regions["kv"].nbytes / max(self.context, 1)
        fits = int((cma_mb * MIB - fixed) // per) if per else 0
        return max(0, min(fits, self.acfg.max_context))

    def _fit_hint(self, cma_mb: float) -> str:
        fixed = self.dma_bytes - self.regions["kv"].nbytes
        fits = self.fit_context(cma_mb)
        hint = (f"context {fits} fits" if fits >= 1 else
                f"no context fits: the weights, frames and results alone are {_mib(fixed)} "
                f"MiB")
        if self.streams > 1:
            s_fit = int((cma_mb * MIB - fixed) // self.kv_stream_bytes)
            hint += (f" with {self.streams} streams; {s_fit} stream"
                     f"{'s fit' if s_fit != 1 else ' fits'} at context {self.context}")
        return hint

    def check_free_cma(self, meminfo: str = MEMINFO) -> Optional[str]:
        """None when the board's free CMA (CmaFree of ``meminfo``, read now) holds the plan's
        DMA memory or cannot be read (off a board), else the one-line refusal: before anything
        is allocated, instead of PYNQ's "Allocate failed" part way through."""
        cma = cma_mib(meminfo)
        if cma is None:
            return None
        free, total = cma
        if self.dma_bytes <= free * MIB:
            return None
        return (f"DMA memory {_mib(self.dma_bytes)} MiB exceeds the board's free CMA "
                f"{free:.1f} MiB (CmaFree in {meminfo}, of CmaTotal {total:.1f} MiB: another "
                f"program or overlay holds the rest); {self._fit_hint(free)} (--context, or free "
                f"the CMA: close other pynq programs, reboot)")

    def check(self, cma_mb: float = CMA_MB, host_mb: float = HOST_MB) -> Optional[str]:
        """None when the plan fits both budgets, else the one-line refusal."""
        if self.dma_bytes > cma_mb * MIB:
            hint = self._fit_hint(cma_mb)
            caches = "KV cache" if self.streams == 1 else f"{self.streams} streams' KV caches"
            return (f"DMA memory {_mib(self.dma_bytes)} MiB (weights "
                    f"{_mib(self.regions['weights'].nbytes)}, {caches} at context "
                    f"{self.context} {_mib(self.regions['kv'].nbytes)}, frames "
                    f"{_mib(self.regions['frames'].nbytes)}, results "
                    f"{_mib(self.regions['results'].nbytes)}) exceeds the {cma_mb:g} MiB CMA "
                    f"budget; {hint} (--context, --cma-mb"
                    f"{', fewer prompts' if self.streams > 1 else ''})")
        if self.host_bytes > host_mb * MIB:
            big = sorted(self.host, key=lambda h: -h[1])[:2]
            return (f"host memory {_mib(self.host_bytes)} MiB exceeds the {host_mb:g} MiB "
                    f"budget ({', '.join(f'{n} {_mib(b)} MiB' for n, b, _ in big)})")
        return None

    def require(self, cma_mb: float = CMA_MB, host_mb: float = HOST_MB) -> None:
        msg = self.check(cma_mb, host_mb)
        if msg is not None:
            raise ContextFitError(msg)


def board_context(model, cma_mb: float = CMA_MB, host_mb: float = HOST_MB,
                  vectors: Optional[int] = None, streams: int = 1) -> Tuple[int, Optional[str]]:
    """The KV context a board run allocates when no --context is given: the engines'
    max_context when its plan fits both budgets; else the largest context whose plan fits
    (q4 on the INT16-KV overlay: 1,589 of 2,048 in 128 MiB), with the one-line notice that says
    so; else max_context, whose plan's check then refuses with the reason."""
    full = memory_plan(model, None, vectors, streams)
    if full.check(cma_mb, host_mb) is None:
        return full.context, None
    fits = full.fit_context(cma_mb)
    if fits < 1 or memory_plan(model, fits, vectors, streams).check(cma_mb, host_mb) is not None:
        return full.context, None
    return fits, (f"context {fits:,} positions: the KV cache at the engines' {full.context:,} "
                  f"would make DMA memory {_mib(full.dma_bytes)} MiB, over the {cma_mb:g} MiB "
                  f"CMA budget (--context N to choose, --cma-mb for a larger CMA)")


def cma_mib(meminfo: str = MEMINFO) -> Optional[Tuple[float, float]]:
    """(free, total) CMA in MiB from /proc/meminfo's CmaFree and CmaTotal, or None where the
    file or the lines are missing (not Linux, a kernel without CMA: off a board)."""
    try:
        with open(meminfo) as f:
            text = f.read()
    except OSError:
        return None
    kb = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        if name in ("CmaFree", "CmaTotal") and rest.split():
            kb[name] = int(rest.split()[0])
    if len(kb) != 2 or kb["CmaTotal"] == 0:
        return None
    return kb["CmaFree"] / 1024, kb["CmaTotal"] / 1024


def _mib(n: float) -> str:
    return f"{n / MIB:.1f}"


def _cache_word(r: Region) -> str:
    """How the CPU maps a region and why (plan.lines)."""
    if r.dma_writes:
        return "cached, invalidated by range before each read (the DMAs write it, the CPU " \
               "only reads it)"
    if r.cacheable:
        return "cached, flushed once at load (the CPU writes it once, the DMAs read it)"
    return "uncached (the CPU writes it every token, the DMAs read it)"


def _tag(index: int) -> int:
    return (index + 1) & 0xFF


def memory_plan(model, context: Optional[int] = None, vectors: Optional[int] = None,
                streams: int = 1) -> MemoryPlan:
    """The plan of ``model`` (a :class:`generators.runtime.model.Model` or a
    :func:`model_shape`) with ``streams`` KV caches of ``context`` positions each (default: the
    attention engine's max_context), for matrix engines of ``vectors`` (default: the model's
    ``engines.vectors``; docs/vectors.md)."""
    c, eng = model.config, model.engines
    acfg = eng.attention_config()
    context = int(eng.max_context if context is None else context)
    V = int(getattr(eng, "vectors", 1) if vectors is None else vectors)
    if not 1 <= V <= 255:
        raise ValueError(f"vectors {V} outside 1..255 (the vectors word's B)")
    if int(streams) < 1:
        raise ValueError(f"streams must be at least 1, got {streams}")
    streams = int(streams)
    if not 1 <= context <= acfg.max_context:
        raise ValueError(f"context {context} outside 1..{acfg.max_context} (the attention "
                         f"engine's max_context)")
    if acfg.beat_bytes != 16 or c.head_dim % 16:
        raise ValueError("the overlay's attention engine reads 16-byte beats split over two "
                         "8-byte ports: head_dim must be a multiple of 16")
    Lyr, H, G, d = c.num_hidden_layers, c.num_key_value_heads, c.group, c.head_dim
    shapes = {n: shape_of(m) for n, m in model.matrices.items()}

    # ---- weights
    provided = all(hasattr(i, "physical_address") for m in model.matrices.values()
                   for i in getattr(m, "images", [[]]))
    weights = Region("weights", "matrix frames (header, x slot, rows) of both ports", True,
                     provided=provided and not isinstance(model, ModelShape))
    for name, m in shapes.items():
        for p in (0, 1):
            weights.add((name, p), m.image_bytes[p])

    # ---- KV cache
    kv_row = acfg.row_beats * 8                  # one port's half of a 16-byte-beat row
    kv = Region("kv", f"INT{acfg.kv_bits} KV cache, {2 * kv_row * 2} bytes per position per "
                      f"layer and KV head, split by port"
                      + (f", {streams} streams" if streams > 1 else ""), False)
    kv.add("all", streams * 2 * 2 * Lyr * H * context * kv_row)

    # ---- frames: x slots, attention parts, descriptors; results: the result slots
    fr = Region("frames", "x slots, attention header+q parts, descriptors", False)
    res = Region("results", "result slots (every S2MM buffer; the LM head's logits among "
                            "them)", True, dma_writes=True)
    part = (acfg.header_beats + acfg.q_beats) * 8
    part_bytes = [part, part + 8]                # port 1: the route word first
    for kind, names in KIND_MATRICES.items():
        # one vector's x: the largest of the kind's matrices in any layer (INT8 x, or with
        # format 0x05 the Q8_1 codes and their scale table)
        xb = max(shapes[_mname(i, n)].x_bytes for n in names
                 for i in (range(Lyr) if kind != LM else [None]))
        if V == 1:
            fr.add(("x", kind), xb)
        else:
            # [vectors word][x of vector 0][x of vector 1]...: vector 0 where a one-vector
            # frame's x is, the vectors word the 8 bytes before it (docs/runtime.md 4.7)
            off = fr.add(("xv", kind), 8 + V * xb)
            fr.items[("x", kind)] = (off + 8, V * xb)
    if V > 1:                                    # each matrix half's B-vector header word
        for name in shapes:
            for p in (0, 1):
                fr.add(("vh", name, p), 8, 8)
    for h in range(H):
        for p in (0, 1):
            fr.add(("part", h, p), part_bytes[p])
    att_words = G * d // 4 + G + 1
    for kind, names in KIND_MATRICES.items():
        for n in names:
            m = shapes[_mname(0 if kind != LM else None, n)]
            for p in (0, 1):
                res.add(("out", kind, n, p), (m.rows[p] * V + 1) * 4)
    for h in range(H):
        res.add(("out", ATT, h, 0), att_words * 4)
    res.nbytes = _align(res.nbytes, LINE)        # the last slot's last line is the region's

    # ---- transfers and their descriptors
    transfers: List[TransferPlan] = []
    frame_index = 0

    def matrix_frame(layer, short):
        nonlocal frame_index
        name = _mname(layer, short)
        m = shapes[name]
        kind = next(k for k, v in KIND_MATRICES.items() if short in v and
                    (k == LM) == (layer is None))
        f = FramePlan(name, _tag(frame_index),
                      [[("weights", (name, p), 8), ("frames", ("x", kind), m.x_bytes),
                        ("weights", (name, p), None)] for p in (0, 1)],
                      [("out", kind, short, p) for p in (0, 1)], list(m.rows))
        frame_index += 1
        return f

    def att_frame(layer, h):
        nonlocal frame_index
        f = FramePlan(f"kv{h}", _tag(frame_index),
                      [[("frames", ("part", h, p), part_bytes[p]), ("kv", (p, 0, layer, h), None),
                        ("kv", (p, 1, layer, h), None)] for p in (0, 1)],
                      [("out", ATT, h, 0), None], [att_words - 1, 0])
        frame_index += 1
        return f

    for i in list(range(Lyr)) + [None]:
        kinds = KINDS if i is not None else (LM,)
        for kind in kinds:
            if kind == ATT:
                frames = [att_frame(i, h) for h in range(H)]
            else:
                frames = [matrix_frame(i, s) for s in KIND_MATRICES[kind]]
            t = TransferPlan(len(transfers), i, kind, frames)
            for p in (0, 1):
                n_mm2s = sum(len(f.mm2s[p]) for f in frames)
                n_s2mm = sum(1 for f in frames if f.s2mm[p] is not None)
                for s2mm, n in ((False, n_mm2s), (True, n_s2mm)):
                    if n:
                        ch = channel(p, s2mm)
                        key = ("desc", t.index, ch)
                        fr.add(key, n * R.DESC_BYTES)
                        t.desc[ch] = (key, n)
            transfers.append(t)

    regions = {"weights": weights, "kv": kv, "frames": fr, "results": res}
    host = _host_items(model, c, context, transfers, shapes, V, streams)
    return MemoryPlan(context, getattr(model, "fmt", "?"), regions, transfers, host, c, acfg,
                      kv_row, part_bytes, V, streams)


def _mname(layer, short):
    return "lm_head" if layer is None else f"layers.{layer}.{short}"


def _host_items(model, c, context, transfers, shapes, vectors: int = 1,
                streams: int = 1) -> List[Tuple[str, int, str]]:
    d, V, Hd, I = c.head_dim, c.vocab_size, c.hidden_size, c.intermediate_size
    B = max(vectors, streams)           # rows the batched step holds at once
    if getattr(model, "rope", None) is not None:
        rope = ("RoPE tables", 0, "the model's own (the image's sections)")
    else:
        n = model.engines.max_context
        rope = ("RoPE tables", 2 * n * d * 8, f"cos and sin, {n} positions x {d} (float64), "
                                              f"computed")
    items = [
        rope,
        ("KV steps", streams * (2 * c.num_hidden_layers * c.num_key_value_heads
                                + c.num_hidden_layers) * 8,
         "one K and one V step per (layer, KV head), lengths" +
         (f"; {streams} streams" if streams > 1 else "")),
        ("logits", B * (V * 8 * 3 + V * 4 * 2), "the LM head's words and the float64 logits "
                                                "(with the sampler's copies)" +
         (f"; {B} rows" if B > 1 else "")),
        ("step vectors", B * (Hd * 24 + I * 8) * 8, "the residual, norms, q/k/v, attention "
                                                    "output, MLP vectors (float64)" +
         (f"; {B} rows" if B > 1 else "")),
        ("plan and transfer tables", len(transfers) * TRANSFER_TABLE_BYTES,
         f"{len(transfers)} transfers: their frames, descriptor blocks, result slots"),
        ("C loop", cloop_bytes(c, transfers, shapes, vectors),
         "the C step's table, float32 norms and row scales, its vectors "
         "(generators.runtime.engines.cloop)"),
    ]
    if isinstance(model, ModelShape):
        return items
    owned, mapped = {}, {}

    def add(what, a):
        a = np.asarray(a) if not hasattr(a, "nbytes") else a
        (mapped if _file_mapped(a) else owned)[what] = \
            (mapped if _file_mapped(a) else owned).get(what, 0) + int(a.nbytes)

    emb = getattr(model, "embedding", None)
    if emb is not None and hasattr(emb, "blocks"):
        add("embedding rows", emb.blocks)
    elif isinstance(getattr(model, "embed", None), np.ndarray):
        add("embedding table", model.embed)
    for m in model.matrices.values():
        for i in m.images:
            if not hasattr(i, "physical_address"):
                add("weight images", i)
        add("scales and norms", m.scale)
    for v in model.norms.values():
        add("scales and norms", v)
    rope = getattr(model, "rope", None)
    if rope is not None:
        for a in rope:
            add("RoPE tables", a)
    for what, n in owned.items():
        items.append((f"model: {what}", n, "held by the Model on the host"))
    if mapped:
        items.append(("model: mapped from the image file", 0,
                      f"{sum(mapped.values()) / MIB:.1f} MiB ({', '.join(mapped)}) paged in "
                      f"from the file where touched, not counted: the frames are read once "
                      f"into DMA memory, one embedding row per token"))
    return items


def cloop_bytes(c, transfers, shapes, vectors: int = 1) -> int:
    """Host bytes of the C step (hostloop.CLoop; an upper bound): its table (the header, per
    transfer its fixed words, frames, descriptors, tails and result slots, its batched-step
    record, the K/V lengths and the small tables) and each transfer's record kept beside it
    (the trace's), the float32 copies of the norms and the INT8 / ternary row scales, and the
    context with the step's vectors (``vectors`` rows of them)."""
    L, H, Hd, I, d = (c.num_hidden_layers, c.num_key_value_heads, c.hidden_size,
                      c.intermediate_size, c.head_dim)
    desc = sum(n for t in transfers for _, n in t.desc.values())
    words = 64 + 5 * L + 1 + 5 + 2 * H + 12 + 4 + len(transfers) + desc
    words += sum(18 + 5 * len(t.frames) + 3 * 4 + 3 * 4 + 6 * 2 * len(t.frames)
                 for t in transfers)
    # the batched step's records: a matrix transfer's halves, an attention transfer's K/V
    # CONTROL and BUFFER words and its four links; two offsets per transfer
    words += sum(1 + 6 * 2 * len(t.frames) + 3 + 3 * 4 * len(t.frames) + 4 * 4 + 2
                 for t in transfers)
    scales = sum(m.n for m in shapes.values() if m.fmt not in ("q4", HEAD_Q8_0)) * 4
    norms = (2 * L + 1) * Hd * 4
    ctx = 4 * (vectors * (5 * Hd + 2 * H * d + 3 * I) + d + 3 * c.group + vectors) + 4096 + 1024
    return 2 * 4 * words + scales + norms + ctx      # the table and its records per transfer


def _file_mapped(a) -> bool:
    """True when ``a`` is a view of a file mapping (numpy.memmap, mmap): its pages come from
    the file (clean, reclaimable), not from the process's own memory."""
    while a is not None:
        if isinstance(a, (np.memmap, mmap.mmap)):
            return True
        a = getattr(a, "base", None)
    return False


# --------------------------------------------------------------------------- the info command

def info(model, context: Optional[int] = None, cma_mb: float = CMA_MB,
         host_mb: float = HOST_MB, out=None, streams: int = 1,
         vectors: Optional[int] = None) -> int:
    """``ternary-pynq info FILE --context N --cma-mb M``: print the plan, then "fits", and
    return 0; or write the refusal as one ``error:`` line on stderr and return 2 (a CLI
    mistake's exit code: the user asked for more than the board has)."""
    out = out or sys.stdout
    plan = memory_plan(model, context, vectors, streams)
    for line in plan.lines():
        print(line, file=out)
    msg = plan.check(cma_mb, host_mb)
    if msg is None:
        print(f"fits: DMA {_mib(plan.dma_bytes)} of {cma_mb:g} MiB CMA, host "
              f"{_mib(plan.host_bytes)} of {host_mb:g} MiB", file=out)
        return 0
    print(f"error: {msg}", file=sys.stderr)
    return 2


def smollm2_lines(context: int = 2048, formats: Sequence[str] = ("q4", "ternary", "int8"),
                  cma_mb: float = CMA_MB, engines=None) -> List[str]:
    """The DMA plan of SmolLM2-135M's shapes in each format (no weights loaded) for
    ``engines`` (default the PYNQ-Z1 overlay's; e.g. ``kv_bits = 16`` for an INT16 KV
    cache)."""
    cfg = ModelConfig(**SMOLLM2_135M)
    out = []
    for f in formats:
        p = memory_plan(model_shape(cfg, engines or PYNQ_Z1_ENGINES, f), context)
        w = p.regions["weights"].nbytes
        msg = p.check(cma_mb, float("inf"))
        out.append(f"{f:8s} weights {_mib(w)} MiB, KV {_mib(p.regions['kv'].nbytes)} MiB, "
                   f"frames {_mib(p.regions['frames'].nbytes)} MiB: {_mib(p.dma_bytes)} MiB "
                   f"-> {'fits' if msg is None else msg}")
    return out



