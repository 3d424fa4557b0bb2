"""The ``replay`` backend: every output frame the next recorded one of its port (a sampled step's
engine words), no engine compute: the host's own work per token (``make host-bench``); and the
dump of one step that ``csrc/tphbench.c`` runs on the same device without Python."""
from __future__ import annotations

import ctypes
import struct
from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np

from .cloop import TPH, for_runtime, load_library
from .plan import memory_plan
from .registry import register_backend
from .regmodel import BASE_ADDRESS, Memory
from .runtime import DmaRuntime
from .sgdma import SgDma

__all__ = ["packets_from_trace", "ReplayDevice", "replay_backend", "write_dump", "DUMP_MAGIC"]


def packets_from_trace(trace: Sequence) -> List[List[np.ndarray]]:
    """Per port, the output frames of a decoder trace in the order its S2MM channel receives
    them (the matrix frames on both ports, the attention frames on port 0)."""
    out: List[List[np.ndarray]] = [[], []]
    for entry in trace:
        for p, words in enumerate(entry[3]):
            out[p].append(np.asarray(words, np.uint32))
    return out


class ReplayDevice:
    """The C replay device (``csrc/tphreplay.c``) over a DDR model: recorded output frames
    per port, served back in order (cycling) through the AXI DMA registers, no compute."""

    def __init__(self, lib, memory, packets: Sequence[Sequence[np.ndarray]]):
        self.lib, self.memory = lib, memory
        self.mem = np.zeros(lib.tph_replay_bytes() + 16, np.uint8)
        self.ptr = self.mem.ctypes.data + (-self.mem.ctypes.data % 16)
        lib.tph_replay_init(self.ptr, memory.bytes.ctypes.data, BASE_ADDRESS, memory.size)
        self._keep = []
        for p in (0, 1):
            frames = [np.asarray(f, np.uint32) for f in packets[p]]
            words = np.concatenate(frames) if frames else np.zeros(1, np.uint32)
            starts = np.cumsum([0] + [len(f) for f in frames]).astype(np.uint32)
            self._keep += [words, starts]
            lib.tph_replay_record(self.ptr, p, words.ctypes.data, starts.ctypes.data,
                                  len(frames))

    def read(self, dma: int, offset: int) -> int:
        v = ctypes.c_uint32()
        if self.lib.tph_replay_read(self.ptr, dma, offset, ctypes.byref(v)):
            raise ValueError(f"replay device: read of unmodelled register 0x{offset:02X}")
        return v.value

    def write(self, dma: int, offset: int, value: int) -> None:
        if self.lib.tph_replay_write(self.ptr, dma, offset, int(value) & 0xFFFFFFFF):
            raise ValueError(f"replay device: write to unmodelled register 0x{offset:02X}")


class _ReplayMmio:
    """pynq.MMIO's read/write onto the replay device (the Python loop's access path)."""

    def __init__(self, dev: ReplayDevice, port: int):
        self.dev, self.port = dev, port

    def read(self, offset: int, length: int = 4) -> int:
        return self.dev.read(self.port, offset)

    def write(self, offset: int, value: int) -> None:
        self.dev.write(self.port, offset, value)


def replay_backend(model, packets, context: Optional[int] = None,
                   vectors: Optional[int] = None):
    """The runtime on the replay device: every output frame is the next recorded one of its
    port (``packets``: :func:`packets_from_trace` of a sampled step), no engine compute and no
    weights loaded (nothing reads them). For ``make host-bench``: the host's own work per
    token, the C loop calling the device's C functions directly. ``vectors``: the matrix
    engines' (default the model's), for a recorded B-row pass."""
    lib, why = load_library()
    if lib is None:
        raise RuntimeError(f"the replay backend needs the C library: {why}")
    plan = memory_plan(model, context, vectors)
    mem = Memory(None, plan.ddr_bytes)
    dev = ReplayDevice(lib, mem, packets)
    rt = DmaRuntime(model, [SgDma(_ReplayMmio(dev, p), f"dma_{p}") for p in (0, 1)],
                    mem.allocate, plan, load_weights=False)
    rt.name, rt.replay, rt.memory = "replay", dev, mem
    # the CPU's cached copy of the results region (the DDR model's), refreshed by the device's
    # tph_replay_sync in the C loop and by the DDR model's invalidate in the Python loop
    lib.tph_replay_cache(dev.ptr, rt.results.ctypes.data, rt.base["results"],
                         rt.results.nbytes)
    return rt


DUMP_MAGIC = b"TPLDUMP1"


def write_dump(path, dec, token, logits: bool = True) -> Path:
    """Everything ``csrc/tphbench.c`` needs to run the decoder's next step (position
    ``dec.pos``, ``token``) without Python, on the replay device: the C loop's table (its
    embedding cut to the token's row, row 0), the frames, kv and results regions with their
    offsets in DDR (the CPU's cached copy of the results region is tphbench's own), norms, row scales, RoPE tables, KV steps and lengths, the chains' state (every
    channel's next transfer unknown, so the first step starts them), and the recorded words
    (``dec.be`` is a :func:`replay_backend`). ``token`` a list of B > 1 tokens: a batched
    step of B rows of stream 0 (``tph_step_rows``; the recorded words one B-row pass's), the
    embedding cut to their rows in order. ``logits=False``: the steps run no LM head (prompt
    rows; the recorded words one such step's or pass's)."""
    tokens = [int(t) for t in token] if isinstance(token, (list, tuple)) else [int(token)]
    B = len(tokens) if len(tokens) > 1 else 0
    rt = dec.be.runtime
    cl = for_runtime(rt)
    dev = rt.replay
    table = cl.table.copy()
    table[TPH.T_EMBED_ROWS] = len(tokens)
    table[TPH.T_ROPE_F64] = int(dec.cos.dtype == np.float64)
    table[TPH.T_KV_FIXED] = int(bool(getattr(dec.kv, "fixed", False)))
    table[TPH.T_X_PARTS] = dec.parts()             # x in the decoder's parts (_prepare's)
    emb = rt.model.embedding.blocks
    state = rt.state.copy()
    state[TPH.S_NEXT:TPH.S_NEXT + 4] = -1
    state[TPH.S_LINK] = -1
    state[TPH.S_TIMEOUT_US] = int(rt.timeout_s * 1e6)
    state[TPH.S_RESET_TIMEOUT_US] = int(rt.reset_timeout_s * 1e6)
    base = rt.memory.bytes.ctypes.data
    sections = [
        ("meta", np.array([rt.memory.size, BASE_ADDRESS, dec.pos, tokens[0], B, int(logits)],
                          np.uint32), 0),
        ("table", table, 0),
        ("frames", rt.buf["frames"], rt.buf["frames"].ctypes.data - base),
        ("kv", rt.buf["kv"], rt.buf["kv"].ctypes.data - base),
        ("results", rt.memory.read(rt.base["results"], rt.results.nbytes),
         rt.base["results"] - BASE_ADDRESS),
        ("embed", np.ascontiguousarray(emb[tokens]), 0),
        ("norms", cl.norms, 0), ("scales", cl.scales, 0),
        ("cos", np.ascontiguousarray(dec.cos), 0), ("sin", np.ascontiguousarray(dec.sin), 0),
        ("kstep", dec.kv.k_step, 0), ("vstep", dec.kv.v_step, 0),
        ("length", dec.kv.length.astype(np.int64), 0), ("state", state, 0),
    ]
    for p in (0, 1):
        sections += [(f"pk{p}", dev._keep[2 * p], 0), (f"ps{p}", dev._keep[2 * p + 1], 0)]
    head = 12 + len(sections) * 32
    offs, off = [], -(-head // 16) * 16
    for _, a, _ in sections:
        offs.append(off)
        off = -(-(off + np.asarray(a).nbytes) // 16) * 16
    path = Path(path)
    with open(path, "wb") as f:
        f.write(DUMP_MAGIC + struct.pack("<I", len(sections)))
        for (name, a, arg), o in zip(sections, offs):
            f.write(name.encode().ljust(16, b"\0") + struct.pack("<IIII", o, np.asarray(a).nbytes,
                                                                 arg, 0))
        for (_, a, _), o in zip(sections, offs):
            f.seek(o)
            f.write(np.ascontiguousarray(a).tobytes())
    return path


register_backend("replay", replay_backend, listed=False)
