"""The runtime at DMA level, one class for every backend: :class:`DmaRuntime`.

    be = make_backend("golden", model)      # "golden" | "rtl" | "board" (bitfile=...)

Every backend is the same host code (this module and generators.runtime.engines.sgdma): DMA memory laid
out by the memory plan (generators.runtime.engines.plan), descriptor chains built once at load, per
token only what changes written by the CPU, transfers started with TAILDESC writes and proven
complete by each descriptor's Cmplt bit and byte count. What differs is what answers the
registers:

* ``golden``: the AXI DMA register model (generators.runtime.engines.regmodel.SgDmaRegs) with the golden PL
  top behind it (GoldenFabric over generators.golden.overlay), in this process;
* ``rtl``: the same register model in the simulator process with the generated overlay top in
  Verilator or Icarus behind it (generators.runtime.engines.rtl and rtl_sim);
* ``board``: the PYNQ-Z1's two AXI DMAs in scatter-gather mode through ``pynq.MMIO``
  (``pynq<4``), buffers from ``pynq.allocate``.

Faults: a transfer that does not complete within the timeout, a DMA error bit, a short MM2S
transfer or an output frame longer than its slot makes the runtime reset both DMAs (and the PL
where the backend can), start the four channels again where the chains stand, and run the
transfer once more; a second failure raises :class:`DmaHangError`, :class:`DmaError` or
:class:`DmaShortError` naming the transfer, the layer, the port and channel, and DMASR.

Two loops drive a runtime and share its state (``state``: each channel's next transfer, the LM
head link, L): the Python one (``begin_token``, ``write_x``, ``write_attention_part``,
``run``: the reference) and the C one (generators.runtime.engines.cloop: one call per token, the
same chains, the same faults handling). ``transfer_hooks`` are called before and after every
transfer by both (the rtl backend's cycle counts, chat's progress bar).
"""
from __future__ import annotations

import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from generators.contract import FORMAT_Q4_Q8_1, FORMAT_Q8_0, VECTORS_FLAG
from generators.golden import attention as gatt
from generators.packing import split_attention_frame

from ..errors import BackendError, DmaError, DmaHangError, DmaShortError
from ..host import clib as hostlib
from ..model.model import HEAD_Q8_0, Model
from . import pg021 as R
from .plan import ATT, CHANNEL_NAMES, LM, MemoryPlan
from .sgdma import MM2S, RESET_TIMEOUT_S, S2MM, SgDma

__all__ = ["DmaRuntime", "BackendError", "DmaError", "DmaHangError", "DmaShortError",
           "CPU_BYTES", "CACHE_OPS", "write_barrier"]

#: what the CPU writes into DMA memory per token, by kind (DmaRuntime.cpu_bytes), and "read":
#: what it reads back from it (the words each result slot received; every STATUS word and
#: every MM2S length checked after a transfer), memory the CPU maps uncached on the board
CPU_BYTES = ("kv", "parts", "x", "desc", "requant", "read")
#: the CPU's reads of the cached results region per token (DmaRuntime.cache_ops): the
#: invalidates by range before them (calls, and bytes: whole 32-byte lines) and the bytes read
#: (part of CPU_BYTES "read"; the rest, STATUS and length words, are uncached reads)
CACHE_OPS = ("invalidates", "invalidated", "read")
#: the CPU's cache line (Cortex-A9 L1, PL310): the unit of an invalidate
LINE = 32


def _no_barrier() -> None:
    """No write barrier: a backend whose DMA memory the CPU does not reach through a write
    buffer (the rtl backend's socket, the replay device)."""


def write_barrier() -> Tuple[Optional[Callable[[], None]], str]:
    """(the C library's tph_wmb, "") or (None, why not): the CPU's write barrier of the C loop
    (ARMv7: DSB ST, as Linux's wmb(); elsewhere a compiler barrier) for the Python loop."""
    ops, why = hostlib.load()
    if ops is None:
        return None, why
    f = ops.lib.tph_wmb
    f.restype, f.argtypes = None, []
    return f, ""


#: the name the earlier simple-mode host code used for a transfer that never finished
DmaTimeout = DmaHangError


def _chan(ch: int) -> Tuple[int, int]:
    """Channel index 0..3 -> (port, register base)."""
    return ch // 2, S2MM if ch % 2 else MM2S


class _Block:
    """One channel's descriptors of one transfer, contiguous in the frames region."""

    __slots__ = ("ch", "first", "last", "status_idx", "control_idx", "s2mm")

    def __init__(self, ch, first, count, base_word):
        self.ch, self.s2mm = ch, bool(ch % 2)
        self.first = first
        self.last = first + (count - 1) * R.DESC_BYTES
        w = base_word + np.arange(count) * R.DESC_WORDS
        self.status_idx = w + R.D_STATUS
        self.control_idx = w + R.D_CONTROL


class _Transfer:
    """A transfer's precomputed index arrays (DmaRuntime._transfer_table)."""


class DmaRuntime:
    """The host code at DMA level (see the module docstring).

    ``dmas``: two :class:`SgDma` (port 0, port 1); ``allocate(shape, dtype, cacheable)``:
    pynq.allocate or the DDR model's (for the results region also ``cpu_cache=True``: the DDR
    model models the CPU's cache over it; pynq's ignores it); ``plan``: the memory plan (its regions are allocated
    here, its transfers become the descriptor chains); ``pl_reset``: resets the PL (engines,
    joiner, FIFOs), called after a DMA reset on a fault; ``engine_time``: seconds the DMAs and
    the PL took so far where the backend can tell (the register model's own time), else None.
    ``load_weights=False`` (the replay backend) leaves the weights region as allocated: its
    frames are addressed by the descriptors but never read. ``barrier``: the CPU's write
    barrier, issued by the Python loop after its last store into DMA memory and before the
    TAILDESC writes of every transfer (the C loop's TPH_WMB): on the board the C library's
    ``tph_wmb`` (ARMv7 DSB ST, :func:`write_barrier`), on the register model its
    ``Memory.barrier`` (which records the order), else nothing.
    """

    name = "dma"
    #: how long (us) the C loop's idle worker thread spins for its next job before it sleeps
    #: (docs/runtime.md section 9, "Both cores"): the board's ``cloop.SPIN_US``, where the
    #: engines' transfers run while the CPU waits; 0 where the engines are modelled on this
    #: machine's CPU (the register model, the RTL simulation, replay): there a spinning worker
    #: takes the core the model needs (a 2-row prompt pass of SmolLM2 on golden: 98 s with
    #: 30 ms of spin on a loaded 2-core machine, 5.7 s without)
    worker_spin_us = 0

    def __init__(self, model: Model, dmas: Sequence[SgDma], allocate, plan: MemoryPlan,
                 timeout_s: float = 5.0, pl_reset: Optional[Callable[[], None]] = None,
                 engine_time: Optional[Callable[[], float]] = None, load_weights: bool = True,
                 barrier: Optional[Callable[[], None]] = None):
        self.model, self.plan, self.dmas = model, plan, list(dmas)
        self.barrier = barrier if barrier is not None else _no_barrier
        self.timeout_s = timeout_s
        self.reset_timeout_s = RESET_TIMEOUT_S
        #: state shared with the C loop (hostloop.TPH: S_NEXT 4 words, S_LINK, S_L, timeouts)
        self.state = np.zeros(8, np.int32)
        self.state[4] = -1
        self._next = self.state[0:4]
        #: callables (transfer index, done) run before (False) and after (True) each transfer
        self.transfer_hooks: List[Callable[[int, bool], None]] = []
        #: the two DMAs' mapped register pages (virtual addresses) where the C loop may access
        #: them directly (the board), else None (callbacks into ``dmas[p].mmio``)
        self.direct_regs: Optional[Tuple[int, int]] = None
        #: the C loop's invalidate of the cached results region where it can call the platform
        #: directly (the board: XRT's xclSyncBO's address, the device handle, the region's
        #: buffer object and its offset in it), else None (the replay device's, or a callback)
        self.cache_sync: Optional[Tuple[int, int, int, int]] = None
        self.pl_reset = pl_reset
        self._engine_time = engine_time
        self.acfg = model.engines.attention_config()
        self.cpu_bytes = dict.fromkeys(CPU_BYTES, 0)       # this token
        self.cpu_total = dict.fromkeys(CPU_BYTES, 0)       # since load
        self.cache_ops = dict.fromkeys(CACHE_OPS, 0)       # this token
        self.cache_total = dict.fromkeys(CACHE_OPS, 0)     # since load
        self.faults: List[str] = []
        self.transfers_run = 0
        self.tail_writes = 0
        self.engine_s = 0.0                                 # in run(), where not modelled
        self.L = 1                                          # the current token's context
        # ---- DMA memory, as planned
        self.buf: Dict[str, np.ndarray] = {}
        self.base: Dict[str, int] = {}
        for r in plan.regions.values():
            if r.provided:
                continue
            kw = {"cpu_cache": True} if r.dma_writes else {}   # (the DDR model's)
            b = allocate((r.nbytes,), np.uint8, cacheable=r.cacheable, **kw)
            self.buf[r.name], self.base[r.name] = b, int(b.physical_address)
        fr = self.buf["frames"]
        self.frames = fr
        self.words = fr.view("<u4")
        #: the result slots as the CPU reads them (cached: invalidated by range first)
        self.results = self.buf["results"]
        self.rwords = self.results.view("<u4")
        self._image_addr: Dict[Tuple[str, int], int] = {}
        self._load_weights(load_weights)
        kvb = self.buf["kv"]
        c = model.config
        shape = (plan.streams, 2, 2, c.num_hidden_layers, c.num_key_value_heads, plan.context,
                 plan.kv_row // 8, 8)
        # INT8 codes, or INT16 little-endian (an INT16 attention engine: 4 codes a port word)
        kv = kvb.reshape(shape).view(np.int16 if self.acfg.kv_bits == 16 else np.int8)
        # logical (layer, head, position, word pair, port, code): byte 16 j + 8 p + b of the
        # row's codes (INT8: element 16 j + 8 p + b; INT16: element 8 j + 4 p + b / 2)
        self._kv = [(kv[s, :, 0].transpose(1, 2, 3, 4, 0, 5),
                     kv[s, :, 1].transpose(1, 2, 3, 4, 0, 5)) for s in range(plan.streams)]
        self.kv_K, self.kv_V = self._kv[0]
        #: the matrix engines' vectors (V): the most activation vectors a frame may carry
        self.vectors = plan.vectors
        self._write_vector_headers()
        self._build_chains()
        self._first = [self._blocks[self._seq[ch][0]][ch].first for ch in range(4)]
        self._start_all([self._seq[ch][0] for ch in range(4)])

    @property
    def runtime(self) -> "DmaRuntime":
        """This runtime (a wrapper such as chat's ProgressBackend forwards to it)."""
        return self

    @property
    def logits_link(self) -> Optional[bool]:
        """Whether the chains run the LM head after the last layer (None: not set yet)."""
        v = int(self.state[4])
        return None if v < 0 else bool(v)

    @logits_link.setter
    def logits_link(self, v: Optional[bool]) -> None:
        self.state[4] = -1 if v is None else int(bool(v))

    @property
    def L(self) -> int:
        """The current token's context (positions its attention frames read)."""
        return int(self.state[5])

    @L.setter
    def L(self, v: int) -> None:
        self.state[5] = v

    # ------------------------------------------------------------------ load
    def _item(self, region: str, key) -> Tuple[int, int]:
        off, n = self.plan.regions[region].items[key]
        return self.base[region] + off, n

    def _load_weights(self, copy: bool = True) -> None:
        """Copy every matrix half's frame into the weights region (or use the model's own DMA
        buffers) and write each frame's static tag into its header (``copy=False``: only
        their addresses)."""
        region = self.plan.regions["weights"]
        tags = {f.name: f.tag for t in self.plan.transfers for f in t.frames}
        for m in self.model.matrices.values():
            for p in (0, 1):
                img = m.images[p]
                if region.provided:
                    img[7] = tags[m.name]
                    img.flush()
                    self._image_addr[(m.name, p)] = int(img.physical_address)
                elif not copy:
                    off, n = region.items[(m.name, p)]
                    self._image_addr[(m.name, p)] = self.base["weights"] + off
                else:
                    off, n = region.items[(m.name, p)]
                    dst = self.buf["weights"][off:off + n]
                    dst[:] = img
                    dst[7] = tags[m.name]
                    self._image_addr[(m.name, p)] = self.base["weights"] + off
        if not region.provided and copy:
            self.buf["weights"].flush()

    def _write_vector_headers(self) -> None:
        """Each matrix half's B-vector header word (its header with VECTORS_FLAG in the format
        byte, the same static tag) into its slot in the frames region, once (V > 1)."""
        if self.vectors == 1:
            return
        tags = {f.name: f.tag for t in self.plan.transfers for f in t.frames}
        for m in self.model.matrices.values():
            for p in (0, 1):
                h = np.array(m.images[p][:8], np.uint8)
                h[6] |= VECTORS_FLAG
                h[7] = tags[m.name]
                off, _ = self.plan.regions["frames"].items[("vh", m.name, p)]
                self.frames[off:off + 8] = h

    def _segment(self, seg, L: int) -> Tuple[int, int]:
        region, key, n = seg
        if region == "weights":
            name, p = key
            a = self._image_addr[key]
            if n == 8:
                return a, 8
            m = self.model.matrices[name]
            return a + 8 + m.x_bytes, len(m.images[p]) - 8 - m.x_bytes
        if region == "kv":
            p, which, layer, h = key
            return self.base["kv"] + self.plan.kv_offset(p, which, layer, h), L * self.plan.kv_row
        return self._item(region, key)[0], n

    def _build_chains(self) -> None:
        """Every descriptor of every transfer, written once: per channel a ring in token order
        (the last layer's down links to the LM head or back to layer 0: begin_token)."""
        plan, w = self.plan, self.words
        fb = self.base["frames"]
        self._blocks: List[Dict[int, _Block]] = []
        self._kv_ctrl: List[List[Tuple[int, int, bool]]] = []   # per transfer: (word, port, eof)
        #: per transfer: (header descriptor word, x descriptor word, port, matrix) of each
        #: matrix frame, and (BUFFER word, port, which, layer, head) of each KV segment
        self._mat_desc: List[List[Tuple[int, int, int, str]]] = []
        self._kv_buf: List[List[Tuple[int, int, int, int, int]]] = []
        self._out: List[List[List[Optional[Tuple[int, int]]]]] = []
        self._seq: List[List[int]] = [[], [], [], []]
        for t in plan.transfers:
            blocks, kvc, outs, md, kvb = {}, [], [], [], []
            for ch, (key, count) in t.desc.items():
                off, _ = plan.regions["frames"].items[key]
                blocks[ch] = _Block(ch, fb + off, count, off // 4)
                self._seq[ch].append(t.index)
            for p in (0, 1):
                ch = 2 * p
                if ch in blocks:
                    i = 0
                    b = blocks[ch]
                    for f in t.frames:
                        if t.kind != ATT:
                            w0 = int(b.control_idx[i] - R.D_CONTROL)
                            md.append((w0, w0 + R.DESC_WORDS, p, f.name))
                        for j, seg in enumerate(f.mm2s[p]):
                            a, n = self._segment(seg, 1)
                            word = b.control_idx[i] - R.D_CONTROL
                            sof = R.CTRL_SOF if j == 0 else 0
                            eof = R.CTRL_EOF if j == len(f.mm2s[p]) - 1 else 0
                            w[word + R.D_BUFFER] = a
                            w[word + R.D_BUFFER_MSB] = 0
                            w[word + R.D_CONTROL] = n | sof | eof
                            w[word + R.D_STATUS] = 0
                            if seg[0] == "kv":
                                kvc.append((word + R.D_CONTROL, p, bool(eof)))
                                kvb.append((int(word + R.D_BUFFER),) + tuple(seg[1]))
                            i += 1
                if ch + 1 in blocks:
                    b = blocks[ch + 1]
                    i = 0
                    for f in t.frames:
                        if f.s2mm[p] is None:
                            continue
                        a, n = self._item("results", f.s2mm[p])
                        word = b.control_idx[i] - R.D_CONTROL
                        w[word + R.D_BUFFER] = a
                        w[word + R.D_BUFFER_MSB] = 0
                        w[word + R.D_CONTROL] = n
                        w[word + R.D_STATUS] = 0
                        i += 1
            for f in t.frames:
                outs.append([self._item("results", s) if s is not None else None
                             for s in f.s2mm])
            self._blocks.append(blocks)
            self._kv_ctrl.append(kvc)
            self._out.append(outs)
            self._mat_desc.append(md)
            self._kv_buf.append(kvb)
        # links: within a block to the next descriptor, a block's last to the channel's next
        for ch in range(4):
            seq = self._seq[ch]
            for k, ti in enumerate(seq):
                b = self._blocks[ti][ch]
                n = len(b.status_idx)
                for i in range(n):
                    word = b.status_idx[i] - R.D_STATUS
                    if i + 1 < n:
                        nxt = b.first + (i + 1) * R.DESC_BYTES
                    else:
                        nxt = self._blocks[seq[(k + 1) % len(seq)]][ch].first
                    w[word + R.D_NXTDESC] = nxt
                    w[word + R.D_NXTDESC_MSB] = 0
        # where the LM head is switched in or out: the last non-LM block of every channel
        self._switch = []
        for ch in range(4):
            seq = self._seq[ch]
            lm = [ti for ti in seq if plan.transfers[ti].kind == LM]
            body = [ti for ti in seq if plan.transfers[ti].kind != LM]
            last = self._blocks[body[-1]][ch]
            self._switch.append((last.status_idx[-1] - R.D_STATUS + R.D_NXTDESC,
                                 self._blocks[lm[0]][ch].first if lm else None,
                                 self._blocks[body[0]][ch].first))
        self._index = {(t.layer, t.kind): t.index for t in plan.transfers}
        self._block_x = [self._transfer_block_x(t) for t in plan.transfers]
        self._tx = [self._transfer_table(t) for t in plan.transfers]
        # batched steps (docs/runtime.md 4.7): each transfer's B, each attention transfer's
        # stream, and per channel its last descriptor's NXTDESC word with the ring's target
        # (shared with the C loop: hostloop.TPH.P_XSTATE, one int32 row each)
        self.xstate = np.zeros((3, len(plan.transfers)), np.int32)
        self.xstate[0] = 1
        self._vec, self._kv_stream, self._again = self.xstate
        self._link = []
        for t in plan.transfers:
            lk = {}
            for ch, b in self._blocks[t.index].items():
                word = int(b.status_idx[-1] - R.D_STATUS + R.D_NXTDESC)
                lk[ch] = (word, int(w[word]), b.first)
            self._link.append(lk)

    def _transfer_block_x(self, t) -> int:
        """How transfer ``t``'s matrices take x: 0 as INT8 values, ``FORMAT_Q4_Q8_1`` (0x05) as
        Q8_1 blocks, ``FORMAT_Q8_0`` (0x09) as Q8_0 blocks; they share one x slot, so all must
        agree (ValueError otherwise)."""
        if t.kind == ATT:
            return 0
        bx = set()
        for f in t.frames:
            m = self.model.matrices[f.name]
            bx.add(0 if not getattr(m, "block_x", False)
                   else FORMAT_Q8_0 if m.fmt == HEAD_Q8_0 else FORMAT_Q4_Q8_1)
        if len(bx) > 1:
            raise ValueError(f"the matrices of {t.name} share one x but not its format "
                             f"({', '.join(f'0x{c:02X}' if c else 'INT8 x' for c in sorted(bx))})"
                             f": convert the model again")
        return bx.pop()

    def _transfer_table(self, t) -> "_Transfer":
        """One transfer's arrays: every status word index (for clearing and checking in one
        numpy operation each), the MM2S ones with their CONTROL words, the S2MM ones, the
        result slots, the TAILDESC writes (S2MM first), and each channel's next transfer."""
        blocks = self._blocks[t.index]
        x = _Transfer()
        order = sorted(blocks, key=lambda c: (-(c % 2), c))
        status, ctrl, chan, mm2s, s2mm = [], [], [], [], []
        for ch in order:
            b = blocks[ch]
            for si, ci in zip(b.status_idx, b.control_idx):
                (s2mm if b.s2mm else mm2s).append(len(status))
                status.append(si)
                ctrl.append(ci)
                chan.append(ch)
        x.status = np.array(status, np.intp)
        x.mm2s = np.array(mm2s, np.intp)
        x.s2mm = np.array(s2mm, np.intp)
        x.mm2s_control = np.array([ctrl[i] for i in mm2s], np.intp)
        x.channel_of = chan
        x.channels = order
        x.tails = [(ch // 2, _chan(ch)[1], blocks[ch].last, ch) for ch in order]
        x.last_status = {ch: int(blocks[ch].status_idx[-1]) for ch in order}
        x.outs = []
        fb = self.base["results"]
        for p in (0, 1):
            b = blocks.get(2 * p + 1)
            i = 0
            for fi, f in enumerate(t.frames):
                if f.s2mm[p] is None:
                    continue
                a, _ = self._out[t.index][fi][p]
                x.outs.append((fi, p, int(b.status_idx[i]), (a - fb) // 4))
                i += 1
        x.next_logits, x.next_body = {}, {}
        for ch in order:
            seq = self._seq[ch]
            nxt = seq[(seq.index(t.index) + 1) % len(seq)]
            x.next_logits[ch] = nxt
            x.next_body[ch] = seq[0] if self.plan.transfers[nxt].kind == LM else nxt
        return x

    # ------------------------------------------------------------------ channels
    def _start_all(self, next_transfer: Sequence[int]) -> None:
        for ch in range(4):
            p, base = _chan(ch)
            self.dmas[p].start(base, self._blocks[next_transfer[ch]][ch].first,
                               self.reset_timeout_s)
        self._next[:] = next_transfer

    def _reset(self) -> None:
        for d in self.dmas:
            d.reset(self.reset_timeout_s)
        if self.pl_reset is not None:
            self.pl_reset()
        self._start_all(self._next)

    # ------------------------------------------------------------------ per token
    def kv_views(self, stream: int = 0):
        """Stream ``stream``'s KV cache in DMA memory as (K, V), each indexed [layer, head,
        position] to a (head_dim / 16, 2, 8) block: element 16 j + 8 p + b is byte b of port
        p's j-th word; an INT16 engine's (kv_bits 16) a (head_dim / 8, 2, 4) block of int16:
        element 8 j + 4 p + b is bytes 2 b, 2 b + 1 of port p's j-th word."""
        return self._kv[stream]

    def begin_token(self, position: int, logits: bool = True) -> None:
        """Before a token's first transfer: its K/V descriptor lengths (L = position + 1) and
        whether the chain runs the LM head after the last layer."""
        for k in CPU_BYTES:
            self.cpu_bytes[k] = 0
        for k in CACHE_OPS:
            self.cache_ops[k] = 0
        if any(self._next[ch] != self._seq[ch][0] for ch in range(4)):
            self._next[:] = [self._seq[ch][0] for ch in range(4)]
            self._reset()                 # a token left half-done (an error): start over
        L = position + 1
        n = L * self.plan.kv_row
        w = self.words
        for ti, kvc in enumerate(self._kv_ctrl):
            for word, p, eof in kvc:
                w[word] = n | (R.CTRL_EOF if eof else 0)
        self._count("desc", 4 * sum(len(k) for k in self._kv_ctrl))
        if logits != self.logits_link:
            for word, lm, body in self._switch:
                w[word] = lm if logits and lm is not None else body
            self._count("desc", 4 * len(self._switch))
            self.logits_link = logits
        self.L = L

    def end_token(self) -> None:
        for k in CPU_BYTES:
            self.cpu_total[k] += self.cpu_bytes[k]
        for k in CACHE_OPS:
            self.cache_total[k] += self.cache_ops[k]

    def invalidate(self, offset: int, n: int) -> None:
        """Before the CPU reads bytes [offset, offset + n) of the results region (after the
        DMA's completion was seen): invalidate their cache lines, rounded up to whole 32-byte
        lines (a slot starts on a line and owns the lines it touches). On the board
        ``PynqBuffer.invalidate`` of the slice (XRT's xclSyncBO from the device over exactly
        that range, the C loop's call); on the DDR model its cache's refresh."""
        if n <= 0:
            return
        n = -(-n // LINE) * LINE
        self.results[offset:offset + n].invalidate()
        self.cache_ops["invalidates"] += 1
        self.cache_ops["invalidated"] += n

    def _count(self, kind: str, n: int) -> None:
        self.cpu_bytes[kind] += n

    def write_x(self, kind: str, xq: np.ndarray) -> None:
        """The quantised x of a transfer kind into its slot (both DMAs read it); a (B, K)
        ``xq`` writes B vectors (vector v at v whole beats of K further) and the vectors word
        before them (B > 1: the slot of an engine of ``vectors`` >= B)."""
        off, _ = self.plan.regions["frames"].items[("x", kind)]
        xq = np.asarray(xq, np.int8)
        if xq.ndim == 1:
            xb = xq.view(np.uint8)
            self.frames[off:off + len(xb)] = xb
            self._count("x", len(xb))
            return
        B, K = xq.shape
        if not 1 <= B <= self.vectors:
            raise ValueError(f"{B} vectors in one frame; the matrix engines take 1.."
                             f"{self.vectors}")
        xs = -(-K // 8) * 8
        if B > 1:
            self.words[(off - 8) // 4:(off - 8) // 4 + 2] = (B, 0)
            self._count("x", 8)
        for v in range(B):
            self.frames[off + v * xs:off + v * xs + K] = xq[v].view(np.uint8)
            self.frames[off + v * xs + K:off + (v + 1) * xs] = 0
        self._count("x", B * xs)

    def write_x_blocks(self, kind: str, xq: np.ndarray, xd: np.ndarray,
                       xs: Optional[np.ndarray] = None) -> None:
        """x of a transfer kind in blocks of 32 (docs/activations.md section 2) into its slot:
        per vector its K codes, then its scale table: Q8_1 blocks (format 0x05, ``xs`` given)
        ceil(K/64) beats, beat g = d(2g) s(2g) d(2g+1) s(2g+1); Q8_0 blocks (format 0x09,
        ``xs`` None) ceil(K/128) beats, beat g = d(4g) .. d(4g+3); fp16 little-endian, the
        fields of blocks past K/32 zero. ``xq`` (K,) codes with ``xd`` (and ``xs``) (K/32,) fp16
        bits: one vector; (B, K) with (B, K/32): B vectors and the vectors word before them
        (B > 1)."""
        off, _ = self.plan.regions["frames"].items[("x", kind)]
        xq = np.asarray(xq, np.int8)
        one = xq.ndim == 1
        xq = xq.reshape(1, -1) if one else xq
        B, K = xq.shape
        nb = K // 32
        xd = np.asarray(xd, np.uint16).reshape(B, nb)
        if xs is not None:
            xs = np.asarray(xs, np.uint16).reshape(B, nb)
        if K % 32 or not 1 <= B <= self.vectors:
            raise ValueError(f"x blocks of {B} x {K} codes: K a multiple of 32 and 1.."
                             f"{self.vectors} vectors")
        tb = -(-K // (64 if xs is not None else 128)) * 8
        stride = K + tb
        if B > 1:
            self.words[(off - 8) // 4:(off - 8) // 4 + 2] = (B, 0)
            self._count("x", 8)
        table = np.zeros((B, tb // 2), "<u2")
        if xs is not None:
            table[:, 0:2 * nb:2], table[:, 1:2 * nb:2] = xd, xs
        else:
            table[:, :nb] = xd
        for v in range(B):
            self.frames[off + v * stride:off + v * stride + K] = xq[v].view(np.uint8)
            self.frames[off + v * stride + K:off + (v + 1) * stride] = table[v].view(np.uint8)
        self._count("x", B * stride)

    # ------------------------------------------------------------------ batched steps
    def set_vectors(self, layer: Optional[int], kind: str, B: int) -> None:
        """Make the next ``kind`` transfer of ``layer`` send B-vector frames (B = 1: today's
        frames): per matrix half its header descriptor points at the B-vector header (or back
        at the image's) and its x descriptor takes the vectors word and B vectors."""
        ti = self._index[(layer, kind)]
        if not 1 <= B <= self.vectors:
            raise ValueError(f"{B} vectors in one frame; the matrix engines take 1.."
                             f"{self.vectors}")
        if self._vec[ti] == B:
            return
        w, fr = self.words, self.plan.regions["frames"].items
        xoff, _ = fr[("x", kind)]
        for hw, xw, p, name in self._mat_desc[ti]:
            m = self.model.matrices[name]
            if B == 1:
                w[hw + R.D_BUFFER] = self._image_addr[(name, p)]
                x_addr, x_len = self.base["frames"] + xoff, m.x_bytes
            else:
                w[hw + R.D_BUFFER] = self.base["frames"] + fr[("vh", name, p)][0]
                x_addr, x_len = self.base["frames"] + xoff - 8, 8 + B * m.x_bytes
            w[xw + R.D_BUFFER] = x_addr
            w[xw + R.D_CONTROL] = (int(w[xw + R.D_CONTROL]) & ~R.LEN_MASK) | x_len
        self._count("desc", 12 * len(self._mat_desc[ti]))
        self._vec[ti] = B

    def block_x(self, layer: Optional[int], kind: str) -> int:
        """How the ``kind`` transfer of ``layer`` carries x: 0 as INT8 values, 0x05 as Q8_1
        blocks (every matrix of it Q4_1 rows with ``block_x``), 0x09 as Q8_0 blocks (the LM
        head's Q8_0 rows); convert makes a transfer's matrices agree, and the runtime refuses a
        model whose do not."""
        return self._block_x[self._index[(layer, kind)]]

    def vectors_of(self, layer: Optional[int], kind: str) -> int:
        """B of the next ``kind`` transfer of ``layer``."""
        return self._vec[self._index[(layer, kind)]]

    def set_attention(self, layer: int, stream: int, L: int, again: bool) -> None:
        """Before one of several attention transfers of ``layer`` in a batched step: its K/V
        segments read stream ``stream``'s cache, L positions; ``again``: another attention
        transfer of this layer follows (each channel's block links back to itself), else the
        chain goes on to o as in a one-token step."""
        ti = self._index[(layer, ATT)]
        w = self.words
        n = L * self.plan.kv_row
        for word, p, eof in self._kv_ctrl[ti]:
            w[word] = n | (R.CTRL_EOF if eof else 0)
        if self._kv_stream[ti] != stream:
            for bw, p, which, lyr, h in self._kv_buf[ti]:
                w[bw] = self.base["kv"] + self.plan.kv_offset(p, which, lyr, h, 0, stream)
            self._kv_stream[ti] = stream
            self._count("desc", 4 * len(self._kv_buf[ti]))
        if self._again[ti] != again:
            for ch, (word, nxt, first) in self._link[ti].items():
                w[word] = first if again else nxt
            self._again[ti] = again
            self._count("desc", 4 * len(self._link[ti]))
        self._count("desc", 4 * len(self._kv_ctrl[ti]))
        self.L = L

    def restore_chains(self) -> None:
        """After a batched step: every transfer back to today's one-vector frames, every
        attention transfer on stream 0's cache, the ring's links (what the one-token step of
        either loop expects)."""
        for t in self.plan.transfers:
            if t.kind == ATT:
                if self._kv_stream[t.index] or self._again[t.index]:
                    w = self.words
                    for bw, p, which, lyr, h in self._kv_buf[t.index]:
                        w[bw] = self.base["kv"] + self.plan.kv_offset(p, which, lyr, h)
                    for ch, (word, nxt, first) in self._link[t.index].items():
                        w[word] = nxt
                    self._kv_stream[t.index], self._again[t.index] = 0, False
            elif self._vec[t.index] != 1:
                self.set_vectors(t.layer, t.kind, 1)

    def attention_tag(self, layer: int, head: int) -> int:
        return self.plan.transfers[self._index[(layer, ATT)]].frames[head].tag

    def write_attention_part(self, layer: int, head: int, L: int, qi: np.ndarray, mults,
                             shifts) -> None:
        """KV head ``head``'s header block and q, split by port (port 1's behind the route
        word) into its two part slots; K and V stay where they are."""
        tag = self.attention_tag(layer, head)
        block = gatt.pack_header(L, mults, shifts, tag, self.acfg) \
            + (np.asarray(qi, np.int64).reshape(-1) & 0xFF).astype(np.uint8).tobytes()
        for p, half in enumerate(split_attention_frame(block, L, tag)):
            off, n = self.plan.regions["frames"].items[("part", head, p)]
            self.frames[off:off + n] = np.frombuffer(half, np.uint8)
            self._count("parts", n)

    def run(self, layer: Optional[int], kind: str):
        """Run one transfer; returns per frame (FramePlan, [words of port 0, words of port 1]
        (None where the port has no output))."""
        ti = self._index[(layer, kind)]
        t = self.plan.transfers[ti]
        x = self._tx[ti]
        for ch in x.channels:
            if self._next[ch] != ti:
                raise BackendError(f"transfer {t.name} out of the chain's order on "
                                   f"{CHANNEL_NAMES[ch]} (next: "
                                   f"{self.plan.transfers[self._next[ch]].name})")
        for hook in self.transfer_hooks:
            hook(ti, False)
        t0 = time.perf_counter()
        fault = self._attempt(t, x)
        if fault is not None:
            self.faults.append(f"{fault['what']} (retried after a reset)")
            self._reset()
            fault2 = self._attempt(t, x)
            if fault2 is not None:
                self.engine_s += time.perf_counter() - t0
                raise self.twice_error(fault, fault2)
        self.engine_s += time.perf_counter() - t0
        for hook in self.transfer_hooks:
            hook(ti, True)
        if self._again[ti]:
            nxt = {ch: ti for ch in x.channels}
        else:
            nxt = x.next_logits if self.logits_link else x.next_body
        for ch in x.channels:
            self._next[ch] = nxt[ch]
        self.transfers_run += 1
        # results: the bytes every S2MM descriptor received, in frame order
        out = [(f, [None, None]) for f in t.frames]
        w, rw = self.words, self.rwords
        for fi, p, idx, off in x.outs:
            n = int(w[idx] & R.LEN_MASK) >> 2
            self.invalidate(4 * off, 4 * n)
            out[fi][1][p] = rw[off:off + n].copy()
            self._count("read", 4 * n)
            self.cache_ops["read"] += 4 * n
        return out

    def _attempt(self, t, x: "_Transfer") -> Optional[dict]:
        """Clear the statuses, start the channels (S2MM first), wait, check every
        descriptor. None when the transfer completed, else what went wrong."""
        w = self.words
        w[x.status] = 0
        self._count("desc", 4 * len(x.status))
        self.barrier()        # every store into DMA memory visible before the DMAs fetch
        for p, base, last, _ in x.tails:
            self.dmas[p].tail(base, last)
        self.tail_writes += len(x.tails)
        deadline = time.monotonic() + self.timeout_s
        pending = list(x.tails)
        sr = {}
        while pending:
            left = []
            for item in pending:
                p, base, _, ch = item
                s = self.dmas[p].status(base)
                sr[ch] = s
                if s & R.SR_ERRORS:
                    return self._fault(DmaError, t, ch, s, f"DMASR error {R.error_names(s)}")
                if s & R.SR_HALTED:
                    return self._fault(DmaError, t, ch, s, "the channel halted")
                if not (s & R.SR_IDLE and w[x.last_status[ch]] & R.ST_CMPLT):
                    left.append(item)
            pending = left
            if pending and time.monotonic() > deadline:
                ch = pending[0][3]
                also = "".join(f", {CHANNEL_NAMES[c]} (DMASR 0x{sr.get(c, 0):08X})"
                               for _, _, _, c in pending[1:])
                return self._fault(DmaHangError, t, ch, sr.get(ch, 0),
                                   f"not complete within {self.timeout_s} s", also)
        st = w[x.status]
        self._count("read", 4 * (len(x.status) + len(x.mm2s)))
        bad = (st & (R.ST_CMPLT | R.ST_ERRORS)) != R.ST_CMPLT
        short = (st[x.mm2s] & R.LEN_MASK) != (w[x.mm2s_control] & R.LEN_MASK)
        over = (st[x.s2mm] & R.ST_RXEOF) == 0
        if bad.any() or short.any() or over.any():
            if bad.any():
                i = int(np.nonzero(bad)[0][0])
                ch = x.channel_of[i]
                return self._fault(DmaError, t, ch, sr[ch], f"a descriptor reports an error "
                                   f"(STATUS 0x{int(st[i]):08X})")
            if short.any():
                i = int(np.nonzero(short)[0][0])
                ch = x.channel_of[x.mm2s[i]]
                return self._fault(DmaShortError, t, ch, sr[ch],
                                   f"short transfer: a descriptor moved "
                                   f"{int(st[x.mm2s[i]] & R.LEN_MASK)} of "
                                   f"{int(w[x.mm2s_control[i]] & R.LEN_MASK)} bytes")
            i = int(np.nonzero(over)[0][0])
            ch = x.channel_of[x.s2mm[i]]
            return self._fault(DmaShortError, t, ch, sr[ch],
                               "an output frame overran its slot (no RXEOF)")
        return None

    @staticmethod
    def twice_error(fault: dict, fault2: dict) -> "DmaError":
        """The error of a transfer that failed, was retried after a reset and failed again."""
        return fault2["cls"](f"{fault2['what']}; it failed the same way before a reset of both "
                             f"DMAs and a retry" if fault2["what"] == fault["what"] else
                             f"{fault2['what']}; the first attempt: {fault['what']}; both DMAs "
                             f"were reset between them", fault2)

    def _fault(self, cls, t, ch, sr, what, also: str = "") -> dict:
        p = ch // 2
        return dict(cls=cls, what=f"DMA transfer {t.name} on {CHANNEL_NAMES[ch]}: {what} "
                                  f"(DMASR 0x{sr:08X}){also}",
                    transfer=t.name, layer=t.layer, kind=t.kind, port=p, channel=ch, dmasr=sr)

    # ------------------------------------------------------------------ figures
    def engine_time(self) -> float:
        """Seconds the DMAs and the PL took so far: the register model's own time where it
        runs in this process, else the time spent in transfers (start to completion)."""
        return self._engine_time() if self._engine_time is not None else self.engine_s

    def transfer_beats(self, layer: Optional[int], kind: str, L: int = 1) -> int:
        """8-byte input beats of one transfer on both ports (the progress bar's unit), as it
        is set now: a B-vector matrix transfer (``set_vectors``) sends per matrix half the
        vectors word and B - 1 more vectors than its image."""
        ti = self._index[(layer, kind)]
        t = self.plan.transfers[ti]
        n = sum(self._segment(s, L)[1] for f in t.frames for p in (0, 1) for s in f.mm2s[p])
        B = self._vec[ti] if kind != ATT else 1
        n += sum(self.model.matrices[name].vectors_extra_bytes(B)
                 for _, _, _, name in self._mat_desc[ti])
        return n // 8

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()


# --------------------------------------------------------------------------- golden
