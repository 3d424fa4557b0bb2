"""DDR, the AXI DMA in scatter-gather mode at register level, and the golden PL top behind it.

The runtime's host code (generators.runtime.engines.sgdma, generators.runtime.engines.runtime) drives the DMA
registers and descriptors exactly as on the board; what answers it here is:

* :class:`Memory`: "DDR", one file mapped by the host and by the simulator process (or an
  anonymous map), a bump allocator handing out :class:`DmaBuffer` arrays (physical_address,
  flush, invalidate, like ``pynq.allocate``) whose bytes are NOT zeroed (0xA5 garbage, so
  leftovers are never mistaken for results). A buffer allocated with ``cpu_cache`` (the
  runtime asks it for the plan's cached ``results`` region, which the DMAs write and the CPU
  reads) is the model of the CPU's data cache over it: the array the CPU reads and writes is
  its own copy, every line of it held (the worst case: nothing is ever evicted), which only an
  invalidate of that line refreshes from DDR and only a flush writes back; the DMAs read and
  write DDR only. A missing invalidate, or one that misses a
  line, leaves the CPU reading the line as it was (garbage at first, then the previous
  layer's results), so the decoder's words differ from golden's.
* :class:`SgDmaRegs`: one AXI DMA's register file in scatter-gather mode (PG021; the bits in
  :mod:`generators.runtime.engines.pg021`): DMACR (RS, Reset), DMASR (Halted, Idle, SGIncld, the six
  error bits, IOC_Irq, Err_Irq), CURDESC (written while halted), TAILDESC (a write starts the
  fetch; an engine paused at the old tail resumes at its NXTDESC). It walks the descriptors in
  DDR: MM2S descriptors SOF..EOF form one packet (tlast at EOF) handed to the fabric; each
  packet the fabric answers fills S2MM descriptors (RXSOF on its first, RXEOF on its last; a
  packet longer than a descriptor continues in the next one), STATUS written back with Cmplt
  and the byte count. A fetched descriptor with Cmplt set is SGIntErr, a zero length
  DMAIntErr, an address outside DDR SGDecErr / DMADecErr: the channel halts. Faults can be
  injected (:meth:`SgDmaRegs.inject`): a hang (the channel never goes idle), an error bit, a
  short transfer (fewer bytes, tlast early).
* :class:`GoldenFabric`: the PL top of docs/overlay.md as golden models
  (:class:`generators.golden.overlay.Overlay`, the one model of the routing, joiner and output
  order) with fast engine models: a matrix frame laid out as the runtime sends it ([header][x]
  [rows], rows read once from DDR and cached by address as floats whose products are exact)
  is a BLAS product; any other frame goes through the exact frame model
  (``generators.golden.mv.mv_frame``, bad frames included).
* :func:`serve`: the register protocol over a socket (MMIO reads and writes of the two DMAs),
  used by the rtl backend's simulator side (engines/rtl_sim.py) and by
  :func:`serve_golden` (the register model and the golden top in a process of their own).
"""
from __future__ import annotations

import json
import mmap
import time
from collections import deque
from multiprocessing.connection import Client
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from generators.contract import VECTORS_FLAG
from generators.golden import attention as gatt
from generators.golden import mv as gmv
from generators.golden import q4 as gq4
from generators.golden.overlay import Overlay
from generators.packing import unpack_trits

from . import pg021 as R

BASE_ADDRESS = 0x1000_0000
GARBAGE = 0xA5


#: the CPU's cache line (Cortex-A9 L1 and PL310: 32 bytes), the unit of invalidation
LINE = 32


class DmaBuffer(np.ndarray):
    """A numpy view of DDR with a physical address (the interface of pynq's PynqBuffer that
    the runtime uses), or the CPU's cached copy of a buffer the DMAs write (``cached``):
    ``invalidate()`` of it or of a slice of it refreshes those lines from DDR, as pynq's
    ``PynqBuffer.invalidate()`` of a slice syncs that range (xclSyncBO from the device)."""

    physical_address: int = 0
    memory: Optional["Memory"] = None
    cached = False

    def __array_finalize__(self, obj):
        if not isinstance(obj, DmaBuffer) or self.base is None:
            return
        delta = self.__array_interface__["data"][0] - obj.__array_interface__["data"][0]
        if 0 <= delta <= obj.nbytes:                # a view (slice, dtype view) of obj
            self.physical_address = obj.physical_address + delta
            self.memory, self.cached = obj.memory, obj.cached

    def flush(self):
        if self.cached:
            self.memory.writeback(self.physical_address, self.nbytes)

    def invalidate(self):
        if self.cached:
            self.memory.invalidate(self.physical_address, self.nbytes)

    def freebuffer(self):
        pass

    @property
    def device_address(self):
        return self.physical_address


class Memory:
    """DDR shared by the host and the simulated PL: a file mapped by both processes, or (no
    path) an anonymous map for a register model in the host's own process."""

    def __init__(self, path: Optional[str], size: int, create: bool = True):
        self.path, self.size = path, int(size)
        self._f = None
        if path is None:
            self.map = mmap.mmap(-1, self.size)
        else:
            if create:
                with open(path, "wb") as f:
                    f.truncate(self.size)
            self._f = open(path, "r+b")
            self.map = mmap.mmap(self._f.fileno(), self.size)
        self.bytes = np.frombuffer(self.map, np.uint8)
        self.top = 0
        #: the order of the CPU's stores and the DMAs' TAILDESC writes, when tracked
        #: (track_order): None, or a list of ("barrier",) and ("TAILDESC", port, channel,
        #: bytes the CPU stored since the last barrier)
        self.order: Optional[List[tuple]] = None
        self._fenced: Optional[np.ndarray] = None
        #: the CPU's cached copies (allocate(dma_writes=True)): (DDR offset, bytes, copy)
        self._cached: List[Tuple[int, int, np.ndarray]] = []
        self._views: List[mmap.mmap] = []
        #: invalidates done (calls, bytes): what a test or a count of the Python loop reads
        self.invalidates = 0
        self.invalidated = 0

    # ------------------------------------------------------------------ store ordering
    def track_order(self) -> None:
        """Record the order of CPU stores and TAILDESC writes: the model of a CPU whose stores
        to uncached DMA memory sit in its write buffer until a barrier (ARMv7: DSB ST; what the
        C loop's TPH_WMB and DmaRuntime.barrier issue). A store is any byte that differs from
        the copy taken at the last barrier and was not written by a DMA (the DMAs' own writes,
        write and set_word, go to both)."""
        self.order = []
        self._fenced = self.bytes.copy()

    def barrier(self) -> None:
        """The CPU's write barrier: every store so far is visible to the DMAs."""
        if self._fenced is not None:
            self._fenced[:] = self.bytes
            self.order.append(("barrier",))

    def unfenced(self) -> int:
        """Bytes the CPU stored since the last barrier (0 when not tracked)."""
        if self._fenced is None:
            return 0
        return int(np.count_nonzero(self._fenced != self.bytes))

    def allocate(self, shape, dtype=np.uint8, cacheable: bool = True,
                 cpu_cache: bool = False) -> DmaBuffer:
        """A buffer in DDR, page-aligned, full of garbage. ``cpu_cache`` (with ``cacheable``):
        the CPU reaches it through its data cache, modelled: the array is the CPU's copy
        (every line cached: stale until invalidated, written back only by a flush); other
        buffers are views of DDR (uncached; or cached, written by the CPU once and flushed:
        write-through here, so a weights region of a large model is not held twice)."""
        dt = np.dtype(dtype)
        n = int(np.prod(shape)) * dt.itemsize
        off = -(-self.top // 4096) * 4096              # page-aligned, as the CMA allocator
        if off + n > self.size:
            raise MemoryError(f"DDR model of {self.size:,} bytes is full (asked for {n:,} "
                              f"more at {off:,})")
        self.top = off + n
        self.bytes[off:off + n] = GARBAGE
        if self._fenced is not None:
            self._fenced[off:off + n] = GARBAGE
        if cacheable and cpu_cache:
            # the CPU's view of DMA memory: a mapping, as DDR's (and on the board the CMA
            # buffer's), not the host process's heap
            view = mmap.mmap(-1, max(n, 1))
            self._views.append(view)
            copy = np.frombuffer(view, np.uint8, n)
            copy[:] = GARBAGE
            self._cached.append((off, n, copy))
            a = copy.view(dt).reshape(shape).view(DmaBuffer)
            a.cached = True
        else:
            a = self.bytes[off:off + n].view(dt).reshape(shape).view(DmaBuffer)
        a.physical_address = BASE_ADDRESS + off
        a.memory = self
        return a

    # ------------------------------------------------------------------ the CPU's data cache
    def _copy(self, address: int, n: int, what: str) -> Tuple[int, np.ndarray]:
        """(DDR offset, the CPU's copy of [address, address + n)) inside one cached buffer,
        or ValueError."""
        off = address - BASE_ADDRESS
        for o, size, copy in self._cached:
            if o <= off and off + n <= o + size:
                return off, copy[off - o:off - o + n]
        raise ValueError(f"{what} of 0x{address:X} + {n}: not inside one cached buffer")

    def invalidate(self, address: int, n: int) -> None:
        """Invalidate the CPU's cached lines of [address, address + n): its next reads of
        them come from DDR (what the DMAs wrote). Whole 32-byte lines only: a partial line is
        refused, because Linux cleans and invalidates a partial line at either end whole
        (arch/arm/mm/cache-v7.S v7_dma_inv_range, the PL310's l2c210_inv_range), writing a
        dirty copy of the line's other bytes back over the DMA's, and a clean one is read
        again whole: either way what such a line holds depends on bytes outside the range.
        The runtime's result slots each start on a line and own the lines they touch, so it
        never asks for one."""
        if address % LINE or n % LINE or n <= 0:
            raise ValueError(f"invalidate of 0x{address:X} + {n}: not whole {LINE}-byte "
                             f"lines")
        off, copy = self._copy(address, n, "invalidate")
        copy[:] = self.bytes[off:off + n]
        self.invalidates += 1
        self.invalidated += n

    def writeback(self, address: int, n: int) -> None:
        """Clean (flush) the CPU's cached copy of [address, address + n) to DDR."""
        off, copy = self._copy(address, n, "flush")
        self.bytes[off:off + n] = copy

    def offset(self, address: int, n: int) -> int:
        off = address - BASE_ADDRESS
        if off < 0 or off + n > self.size:
            raise ValueError(f"address 0x{address:X} + {n} outside DDR")
        return off

    def inside(self, address: int, n: int) -> bool:
        off = address - BASE_ADDRESS
        return 0 <= off and off + n <= self.size

    def read(self, address: int, n: int) -> np.ndarray:
        off = self.offset(address, n)
        return self.bytes[off:off + n]

    def write(self, address: int, data: np.ndarray) -> None:
        off = self.offset(address, len(data))
        self.bytes[off:off + len(data)] = data
        if self._fenced is not None:
            self._fenced[off:off + len(data)] = data

    def word(self, address: int) -> int:
        off = self.offset(address, 4)
        return int(self.bytes[off:off + 4].view("<u4")[0])

    def set_word(self, address: int, value: int) -> None:
        off = self.offset(address, 4)
        self.bytes[off:off + 4].view("<u4")[0] = value & 0xFFFFFFFF
        if self._fenced is not None:
            self._fenced[off:off + 4].view("<u4")[0] = value & 0xFFFFFFFF

    def gather(self, segments: Sequence[Tuple[int, int]]) -> np.ndarray:
        """The bytes of several (address, length) segments, one after the other."""
        if len(segments) == 1:
            return self.read(*segments[0]).copy()
        return np.concatenate([self.read(a, n) for a, n in segments])

    def close(self):
        self.bytes = None
        try:
            self.map.close()
        except BufferError:
            pass
        if self._f is not None:
            self._f.close()


# --------------------------------------------------------------------------- register model

class _Channel:
    """One direction of an AXI DMA: its registers and the descriptors it is working on."""

    def __init__(self, name: str):
        self.name = name
        self.power_on()

    def power_on(self):
        self.cr = 0
        self.halted, self.idle, self.errors, self.irq = True, False, 0, 0
        self.curdesc = self.taildesc = 0
        self.next = None          # where the next fetch starts (None: at CURDESC)
        self.queue: deque = deque()   # MM2S: packets to send; S2MM: descriptors to fill
        self.sending = False
        self.partial: Optional[np.ndarray] = None   # S2MM: the rest of a packet too long
        self.first_of_packet = True
        self.hung = False

    @property
    def sr(self) -> int:
        v = self.errors | self.irq | R.SR_SGINCLD
        if self.halted:
            v |= R.SR_HALTED
        if self.idle and not self.halted:
            v |= R.SR_IDLE
        return v

    @property
    def busy(self) -> bool:
        return not self.halted and not self.idle


class SgDmaRegs:
    """One AXI DMA in scatter-gather mode: MM2S feeds port ``port``'s s_axis, S2MM takes its
    m_axis (pynq.MMIO's ``read(offset)`` / ``write(offset, value)``).

    ``busy_s`` (``busy_cpu_s``) is the wall (CPU) time this model spent moving data and
    running the PL models: the DMA's and the engines' time, which a host-time measurement
    leaves out."""

    def __init__(self, port: int, fabric, memory: Memory):
        self.port, self.fabric, self.mem = port, fabric, memory
        self.ch = {0: _Channel("MM2S"), R.S2MM: _Channel("S2MM")}
        self.faults: Dict[int, List[dict]] = {0: [], R.S2MM: []}
        self.busy_s = 0.0
        self.busy_cpu_s = 0.0                     # the same, CPU time of this thread
        self.resets = 0
        self.transfers = {0: 0, R.S2MM: 0}

    # ------------------------------------------------------------------ fault injection
    def inject(self, kind: str, channel: str = "mm2s", after: int = 0, count: int = 1,
               error: int = R.SR_DMA_SLV_ERR, keep: Optional[int] = None) -> None:
        """Make the ``after``-th next transfer (TAILDESC write) of ``channel`` ("mm2s" or
        "s2mm") fail, and the ``count - 1`` transfers after it:

        * ``"hang"``: the channel takes the transfer and never finishes it (never idle);
        * ``"error"``: the channel sets the DMASR error bit ``error`` (one of the six) and
          halts before moving a byte;
        * ``"short"`` (MM2S): the transfer's first packet stops after ``keep`` bytes (default:
          half of it, whole 8-byte beats) with tlast on its last beat; its descriptors report
          the bytes they sent.
        """
        if kind not in ("hang", "error", "short"):
            raise ValueError(f"fault kind must be hang, error or short, not {kind!r}")
        if kind == "short" and channel != "mm2s":
            raise ValueError("a short transfer is injected on an MM2S channel")
        if kind == "error" and not error & R.SR_ERRORS:
            raise ValueError(f"error 0x{error:X} is not a DMASR error bit")
        base = 0 if channel == "mm2s" else R.S2MM
        n = self.transfers[base] + after
        for i in range(count):
            self.faults[base].append(dict(kind=kind, at=n + i, error=error, keep=keep))

    def _fault(self, base: int) -> Optional[dict]:
        n = self.transfers[base]
        for f in self.faults[base]:
            if f["at"] == n:
                self.faults[base].remove(f)
                return f
        return None

    # ------------------------------------------------------------------ MMIO
    def write(self, offset: int, value: int) -> None:
        base = R.S2MM if offset >= R.S2MM else 0
        r, value = offset - base, int(value) & 0xFFFFFFFF
        ch = self.ch[base]
        if r == R.DMACR:
            if value & R.CR_RESET:
                self._reset()
                return
            was = ch.cr & R.CR_RS
            ch.cr = value & ~R.CR_RESET
            if value & R.CR_RS and not was and ch.halted and not ch.errors:
                ch.halted, ch.idle, ch.next = False, True, None
            elif not value & R.CR_RS and was:
                self._stop(base)
        elif r == R.DMASR:
            ch.irq &= ~(value & (R.SR_IOC_IRQ | R.SR_DLY_IRQ | R.SR_ERR_IRQ))
        elif r == R.CURDESC:
            if ch.halted:
                ch.curdesc = value & ~0x3F
        elif r == R.TAILDESC:
            ch.taildesc = value & ~0x3F
            if self.mem.order is not None:
                self.mem.order.append(("TAILDESC", self.port, "S2MM" if base else "MM2S",
                                       self.mem.unfenced()))
            if not ch.halted:
                t0, c0 = time.perf_counter(), time.thread_time()
                try:
                    self._start(base)
                finally:
                    self.busy_s += time.perf_counter() - t0
                    self.busy_cpu_s += time.thread_time() - c0
        elif r in (R.CURDESC_MSB, R.TAILDESC_MSB):
            if value:
                raise ValueError("AXI DMA model: 32-bit addresses only (c_addr_width 32)")
        else:
            raise ValueError(f"AXI DMA model: write to unmodelled register 0x{offset:02X}")

    def read(self, offset: int, length: int = 4) -> int:
        base = R.S2MM if offset >= R.S2MM else 0
        r, ch = offset - base, self.ch[base]
        if r == R.DMASR:
            if ch.busy and not ch.hung:
                t0, c0 = time.perf_counter(), time.thread_time()
                self.fabric.poll()
                self.busy_s += time.perf_counter() - t0
                self.busy_cpu_s += time.thread_time() - c0
            return ch.sr
        if r == R.DMACR:
            return ch.cr
        if r == R.CURDESC:
            return ch.curdesc
        if r == R.TAILDESC:
            return ch.taildesc
        if r in (R.CURDESC_MSB, R.TAILDESC_MSB):
            return 0
        raise ValueError(f"AXI DMA model: read of unmodelled register 0x{offset:02X}")

    # ------------------------------------------------------------------ state changes
    def _reset(self) -> None:
        """DMACR.Reset: both channels to their power-on state (halted, registers cleared);
        the transfers in flight are abandoned (the PL keeps what it already took)."""
        self.resets += 1
        for base, ch in self.ch.items():
            ch.power_on()
        self.fabric.abort(self.port)

    def _stop(self, base: int) -> None:
        ch = self.ch[base]
        ch.halted, ch.idle = True, False
        ch.queue.clear()
        ch.sending = False
        self.fabric.abort(self.port, mm2s=base == 0, s2mm=base != 0)

    def _halt_error(self, base: int, bit: int) -> None:
        ch = self.ch[base]
        ch.errors |= bit
        ch.irq |= R.SR_ERR_IRQ
        ch.halted, ch.idle = True, False
        ch.queue.clear()

    def _fetch(self, base: int) -> Optional[List[Tuple[int, List[int]]]]:
        """The descriptors from the channel's position through TAILDESC: [(address, words)],
        or None after an SG error (the channel halted)."""
        ch = self.ch[base]
        addr = ch.curdesc if ch.next is None else ch.next
        out = []
        limit = self.mem.size // R.DESC_BYTES + 1
        while True:
            if addr % R.DESC_BYTES or not self.mem.inside(addr, R.DESC_BYTES):
                self._halt_error(base, R.SR_SG_DEC_ERR)
                return None
            w = self.mem.read(addr, R.DESC_BYTES).view("<u4")
            words = [int(v) for v in w[:8]]
            if words[R.D_STATUS] & R.ST_CMPLT:
                self._halt_error(base, R.SR_SG_INT_ERR)        # a stale descriptor
                return None
            out.append((addr, words))
            if addr == ch.taildesc:
                ch.next = words[R.D_NXTDESC] & ~0x3F
                return out
            addr = words[R.D_NXTDESC] & ~0x3F
            if len(out) > limit:
                self._halt_error(base, R.SR_SG_INT_ERR)
                return None

    def _start(self, base: int) -> None:
        ch = self.ch[base]
        fault = self._fault(base)
        self.transfers[base] += 1
        ch.idle = False
        if fault is not None and fault["kind"] == "hang":
            ch.hung = True
            return
        if fault is not None and fault["kind"] == "error":
            self._halt_error(base, fault["error"])
            return
        descs = self._fetch(base)
        if descs is None:
            return
        for a, w in descs:
            if w[R.D_CONTROL] & R.LEN_MASK == 0:
                self._halt_error(base, R.SR_DMA_INT_ERR)
                self.mem.set_word(a + 4 * R.D_STATUS, R.ST_INT_ERR)
                return
            if not self.mem.inside(w[R.D_BUFFER], w[R.D_CONTROL] & R.LEN_MASK):
                self._halt_error(base, R.SR_DMA_DEC_ERR)
                self.mem.set_word(a + 4 * R.D_STATUS, R.ST_DEC_ERR)
                return
        if base == 0:
            pkt: List[Tuple[int, List[int]]] = []
            for a, w in descs:
                pkt.append((a, w))
                if w[R.D_CONTROL] & R.CTRL_EOF:
                    ch.queue.append(pkt)
                    pkt = []
            if pkt:
                ch.queue.append(pkt)             # no EOF before the tail: sent without tlast
            if fault is not None and fault["kind"] == "short" and ch.queue:
                ch.queue[0] = ("short", ch.queue[0], fault["keep"])
            self._send_next()
        else:
            ch.queue.extend(descs)
            self._arm_recv()

    # ------------------------------------------------------------------ MM2S
    def _send_next(self) -> None:
        ch = self.ch[0]
        if ch.sending or ch.halted:
            return
        if not ch.queue:
            ch.idle = True
            ch.irq |= R.SR_IOC_IRQ
            return
        pkt = ch.queue.popleft()
        short, keep = False, None
        if isinstance(pkt, tuple):
            _, pkt, keep = pkt
            short = True
        sizes = [w[R.D_CONTROL] & R.LEN_MASK for _, w in pkt]
        total = sum(sizes)
        if not short:
            keep = total
        else:
            keep = min(total - 8, total // 2 if keep is None else keep)
            keep = max(8, keep - keep % 8)
        segs, sent, left = [], [], keep
        for (a, w), n in zip(pkt, sizes):
            take = min(n, left)
            if take:
                segs.append((w[R.D_BUFFER], take))
            sent.append(take)
            left -= take
        ch.sending = True

        def done():
            ch.sending = False
            for (a, w), n in zip(pkt, sent):
                self.mem.set_word(a + 4 * R.D_STATUS, R.ST_CMPLT | n)
            self._send_next()

        self.fabric.send(self.port, segs, done)

    # ------------------------------------------------------------------ S2MM
    def _arm_recv(self) -> None:
        ch = self.ch[R.S2MM]
        if ch.halted:
            return
        if ch.partial is not None:
            data, ch.partial = ch.partial, None
            self._received(data)
            return
        if not ch.queue:
            ch.idle = True
            ch.irq |= R.SR_IOC_IRQ
            return
        if not ch.sending:
            ch.sending = True
            self.fabric.recv(self.port, self._received)

    def _received(self, data: np.ndarray) -> None:
        """One output frame (up to tlast) into the queued descriptors."""
        ch = self.ch[R.S2MM]
        ch.sending = False
        if ch.halted:
            return
        while True:
            if not ch.queue:
                ch.partial = data                      # waits for more descriptors
                return
            a, w = ch.queue.popleft()
            cap = w[R.D_CONTROL] & R.LEN_MASK
            n = min(cap, len(data))
            self.mem.write(w[R.D_BUFFER], data[:n])
            st = R.ST_CMPLT | n | (R.ST_RXSOF if ch.first_of_packet else 0)
            data = data[n:]
            ch.first_of_packet = len(data) == 0
            if not len(data):
                self.mem.set_word(a + 4 * R.D_STATUS, st | R.ST_RXEOF)
                break
            self.mem.set_word(a + 4 * R.D_STATUS, st)
        self._arm_recv()


# --------------------------------------------------------------------------- golden PL top

class GoldenFabric:
    """The overlay of docs/overlay.md behind two :class:`SgDmaRegs`: the one golden model of
    the routing, joiner and output order (:class:`generators.golden.overlay.Overlay`), the
    matrix engines (the formats of ``formats``: 0x08, 0x03 and, with the Q4_1 lane, 0x04, 0x05
    and 0x09) and
    the attention engine.

    A matrix frame sent as the runtime sends it (three segments: the 8-byte header, x, the
    rows, with a valid header whose sizes match) is computed from rows unpacked once per
    address and kept (floats whose dot products are exact: float32 for trits, |sum| < 2**24;
    float64 for INT8; Q4_1 by ``generators.golden.q4.matrix_words`` and, format 0x05,
    ``matrix_words_q8_1``; Q8_0 rows, format 0x09, by ``generators.golden.mv.matrix_words_q8_0``);
    every other frame, and rows holding a byte no 5 trits make or an Inf/NaN Q4_1 or Q8_0
    scale, go through the exact frame model. Weight rows are assumed not to change once used (:meth:`forget` drops the cache)."""

    def __init__(self, memory: Memory, max_k: int, acfg: gatt.AttentionConfig,
                 formats=(gmv.FMT_INT8, gmv.FMT_TERNARY, gmv.FMT_Q4, gmv.FMT_Q4_Q8_1,
                          gmv.FMT_Q8_0),
                 zero_matrices: bool = False, vectors: int = 1):
        self.mem, self.max_k, self.acfg = memory, max_k, acfg
        #: the matrix engines' vectors (docs/vectors.md): frames of 1..vectors vectors
        self.vectors = int(vectors)
        #: answer every matrix frame with zero results and a good status word, its rows never
        #: read (a measurement of the host's own cost without the engines' models)
        self.zero_matrices = zero_matrices
        self.formats = tuple(int(f) for f in formats)
        self.overlay = Overlay(self._matrix, self._attention, self._words)
        self.pending: Dict[int, Optional[Callable]] = {0: None, 1: None}
        self._w: Dict[tuple, object] = {}
        self.frames = {"matrix": 0, "attention": 0}

    # the fabric interface of SgDmaRegs
    def poll(self):
        pass

    def send(self, port: int, segments: List[Tuple[int, int]], done: Callable[[], None]) -> None:
        if segments:
            first = int(self.mem.read(segments[0][0], 8).view("<u8")[0]) \
                if segments[0][1] >= 8 else 0
            self.overlay.frame(port, first, segments)
        done()
        self._deliver()

    def recv(self, port: int, done: Callable[[np.ndarray], None]) -> None:
        self.pending[port] = done
        self._deliver()

    def abort(self, port: int, mm2s: bool = True, s2mm: bool = True) -> None:
        """A DMA reset: the receiver it had armed goes away; the PL keeps its answers."""
        if s2mm:
            self.pending[port] = None

    def reset(self) -> None:
        """aresetn: every frame half and every answer still in the PL is dropped."""
        self.overlay.reset()
        self.pending = {0: None, 1: None}

    def forget(self) -> None:
        self._w.clear()

    def _deliver(self):
        for p in (0, 1):
            if self.pending[p] is not None and self.overlay.out[p]:
                cb, self.pending[p] = self.pending[p], None
                cb(np.asarray(self.overlay.out[p].popleft(), "<u4").view(np.uint8))

    # the engines
    def _words(self, segments) -> np.ndarray:
        data = self.mem.gather(segments)
        return data[:len(data) - len(data) % 8].view("<u8")

    def _attention(self, data: bytes) -> np.ndarray:
        self.frames["attention"] += 1
        return np.array(gatt.frame_output_data(data, self.acfg), np.uint32)

    def _matrix(self, port: int, segments) -> np.ndarray:
        self.frames["matrix"] += 1
        if self.zero_matrices:
            h = int(self.mem.read(segments[0][0], 8).view("<u8")[0])
            n = h >> 32 & 0xFFFF
            B = 1
            if h >> 48 & VECTORS_FLAG and len(segments) > 1:
                B = max(1, int(self.mem.read(segments[1][0], 1)[0]))
            out = np.zeros(n * B + 1, np.uint32)
            out[n * B] = gmv.status_word(h >> 56, 0, n)
            return out
        fast = self._fast_matrix(segments)
        if fast is not None:
            return fast
        words = self._words(segments)
        return np.array([w for w, _ in gmv.mv_frame([int(b) for b in words], 8, self.formats,
                                                    self.max_k, self.vectors)], np.uint32)

    def _fast_matrix(self, segments) -> Optional[np.ndarray]:
        if len(segments) != 3 or segments[0][1] != 8:
            return None
        h = int(self.mem.read(segments[0][0], 8).view("<u8")[0])
        magic, k, n, fmt, tag = h & 0xFFFF, h >> 16 & 0xFFFF, h >> 32 & 0xFFFF, \
            h >> 48 & 0xFF, h >> 56
        B, x_off = 1, 0
        if fmt & VECTORS_FLAG and self.vectors > 1:     # [vectors word][B vectors] (B > 0)
            fmt &= ~VECTORS_FLAG
            vw = int(self.mem.read(segments[1][0], 8).view("<u8")[0])
            B, x_off = vw & 0xFF, 8
            if vw >> 8 or not 1 <= B <= self.vectors:
                return None
        if magic != gmv.MAGIC or not 0 < k <= self.max_k or n == 0 or fmt not in self.formats:
            return None
        q8_1 = fmt == gmv.FMT_Q4_Q8_1
        q8_0 = fmt == gmv.FMT_Q8_0
        if (q8_1 or q8_0) and k % 32:
            return None                                 # BAD_SHAPE: the frame model's
        if fmt in (gmv.FMT_Q4, gmv.FMT_Q4_Q8_1):
            stride = gq4.row_beats(k) * 8
        elif q8_0:
            stride = gmv.q8_0_row_beats(k) * 8
        else:
            stride = -(-(k if fmt == gmv.FMT_INT8 else -(-k // 5)) // 8) * 8
        (xa, xn), (ra, rn) = segments[1], segments[2]
        xs = -(-k // 8) * 8 + (-(-k // 64) * 8 if q8_1 else -(-k // 128) * 8 if q8_0 else 0)
        if xn != x_off + B * xs or rn != n * stride:
            return None
        w = self._weights(ra, fmt, k, n, stride)
        if w is None:
            return None
        out = np.empty(n * B + 1, np.uint32)
        res = out[:n * B].reshape(n, B)                 # row-major: a row's B results together
        if q8_1:                                        # per vector: K codes, scale table
            xb = self.mem.read(xa + x_off, B * xs).reshape(B, xs)
            nb = k // 32
            tab = xb[:, k:].copy().view("<u2")[:, :2 * nb]
            xd, xsc = tab[:, 0::2], tab[:, 1::2]
            if np.any((xd & 0x7C00) == 0x7C00) or np.any((xsc & 0x7C00) == 0x7C00):
                return None                             # an Inf/NaN x scale flags
            res[:] = gq4.matrix_words_q8_1(*w, xb[:, :k].view(np.int8), xd, xsc).T
            out[n * B] = gmv.status_word(tag, 0, n)
            return out
        if q8_0:                                        # per vector: K codes, scale table
            xb = self.mem.read(xa + x_off, B * xs).reshape(B, xs)
            xd = xb[:, k:].copy().view("<u2")[:, :k // 32]
            if np.any((xd & 0x7C00) == 0x7C00):
                return None                             # an Inf/NaN x scale flags
            res[:] = gmv.matrix_words_q8_0(*w, xb[:, :k].view(np.int8), xd).T
            out[n * B] = gmv.status_word(tag, 0, n)
            return out
        for v in range(B):
            x = self.mem.read(xa + x_off + v * xs, k).view(np.int8)
            if fmt == gmv.FMT_Q4:
                res[:, v] = gq4.matrix_words(*w, x.astype(np.int8))
            else:
                acc = (w @ x.astype(w.dtype)).astype(np.int64)
                res[:, v] = (acc & 0xFFFFFFFF).astype(np.uint32)
        out[n * B] = gmv.status_word(tag, 0, n)
        return out

    def _weights(self, addr: int, fmt: int, k: int, n: int, stride: int):
        key = (addr, fmt, k, n)
        if key not in self._w:
            rows = self.mem.read(addr, n * stride).reshape(n, stride)
            if fmt == gmv.FMT_Q4_Q8_1:                 # exact for any finite scales
                codes, D, M, bad = gq4.decode_rows(rows, k)
                w = None if bad.any() else (gq4.block_codes(codes), D, M)
            elif fmt == gmv.FMT_Q8_0:                  # exact for any finite scales
                codes, D, bad = gmv.decode_q8_0_rows(rows, k)
                w = None if bad.any() else (gq4.block_codes(codes), D)
            elif fmt == gmv.FMT_Q4:
                codes, D, M, bad = gq4.decode_rows(rows, k)
                w = None if bad.any() or not gq4.int64_safe(D, M) \
                    else (gq4.block_codes(codes), D, M)
            elif fmt == gmv.FMT_INT8:
                w = rows[:, :k].view(np.int8).astype(np.float64)
            else:
                t, bad = unpack_trits(rows[:, :-(-k // 5)], k, strict=False, return_mask=True)
                w = None if bad.any() else t.astype(np.float32)
            self._w[key] = w
        return self._w[key]


# --------------------------------------------------------------------------- register server

def serve(conn, regs: Sequence[SgDmaRegs], ops: Optional[Dict[str, Callable]] = None,
          timeout_s: Optional[float] = None) -> None:
    """The register protocol of the rtl backend over ``conn`` (a multiprocessing Connection):
    ("w", port, offset, value), ("r", port, offset) -> value, ("q",) -> "bye"; ``ops`` adds
    more (name -> callable(msg) -> reply or None). ``timeout_s``: give up when the host says
    nothing for this long (a host that died)."""
    ops = ops or {}
    while True:
        if timeout_s is not None and not conn.poll(timeout_s):
            return
        msg = conn.recv()
        op = msg[0]
        if op == "w":
            regs[msg[1]].write(msg[2], msg[3])
        elif op == "r":
            conn.send(regs[msg[1]].read(msg[2]))
        elif op == "q":
            conn.send("bye")
            return
        elif op in ops:
            reply = ops[op](msg)
            if reply is not None:
                conn.send(reply)
        else:
            conn.send(("error", f"unknown request {op!r}"))


def serve_golden(address: str, ddr: str, size: int, max_k: int, acfg: dict,
                 formats=(8, 3, 4, 5, 9), vectors: int = 1) -> None:
    """The register model and the golden PL top in a process of their own, at ``address``
    (a Unix socket the host listens on): the board's host code with nothing of the PL in the
    host's process (tests/runtime/decode/test_runtime.py measures the host's memory this way)."""
    mem = Memory(ddr, size, create=False)
    fab = GoldenFabric(mem, max_k, gatt.AttentionConfig(**acfg), formats, vectors=vectors)
    regs = [SgDmaRegs(p, fab, mem) for p in (0, 1)]
    conn = Client(address, "AF_UNIX")

    def pl_reset(msg):
        fab.reset()
        return "ok"

    def inject(msg):
        regs[msg[1]].inject(**msg[2])
        return "ok"

    serve(conn, regs, {"reset": pl_reset, "inject": inject,
                       "c": lambda msg: (0, 0, 0, sum(r.busy_s for r in regs))},
          timeout_s=3600)
    conn.close()
    mem.close()


def serve_golden_json(arg: str) -> None:
    """serve_golden with its arguments as one JSON object (GoldenServerBackend's server
    process: ``python -c`` with golden_server.SERVER)."""
    a = json.loads(arg)
    serve_golden(a["address"], a["ddr"], a["size"], a["max_k"], a["acfg"], a["formats"],
                 a.get("vectors", 1))


__all__ = ["BASE_ADDRESS", "GARBAGE", "DmaBuffer", "Memory", "SgDmaRegs", "GoldenFabric",
           "serve", "serve_golden", "serve_golden_json"]
