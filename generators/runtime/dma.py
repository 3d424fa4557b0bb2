"""The AXI DMA (simple mode) at register level, DDR, and the golden PL top behind it.

Used by the ``rtl`` backend (the RTL simulation behind the registers) and by the tests of the
``board`` host code (PYNQ's own ``pynq.lib.dma._SDMAChannel`` driving :class:`AxiDmaRegs`).

* :class:`Memory` is "DDR": one file mapped by the host and by the simulator process, a bump
  allocator handing out :class:`DmaBuffer` arrays (physical_address, flush, invalidate, like
  ``pynq.allocate``) whose bytes are NOT zeroed (filled with 0xA5 garbage, so leftovers
  are never mistaken for results).
* :class:`AxiDmaRegs` is one AXI DMA's register file (PG021, simple mode): MM2S_DMACR 0x00,
  MM2S_DMASR 0x04 (bit 0 halted, bit 1 idle, bits 4-6 errors), MM2S_SA 0x18/0x1C, MM2S_LENGTH
  0x28 (a write starts the transfer); S2MM at +0x30, S2MM_LENGTH 0x58 reads back the bytes the
  stream actually delivered (its tlast). A frame longer than the armed length is DMAIntErr.
* :class:`SimpleDmaChannel` mirrors ``pynq.lib.dma._SDMAChannel`` of PYNQ 3.1.2 register for
  register (the same reads and writes in the same order) for environments without PYNQ.
* :class:`GoldenFabric` is the PL top of the contracts (section A) as numpy golden models:
  a router per port, matrix engines, the joiner and the attention engine.
"""
from __future__ import annotations

import mmap
import os
from typing import Callable, Dict, List, Optional

import numpy as np

from generators.golden import attention as gatt
from generators.golden import mv as gmv
from generators.contract import ATTENTION_MAGIC, MATRIX_MAGIC, ROUTE_MAGIC

BASE_ADDRESS = 0x1000_0000
GARBAGE = 0xA5


class DmaBuffer(np.ndarray):
    """A numpy view of DDR with a physical address (the interface of pynq's PynqBuffer that
    the DMA driver uses)."""

    physical_address: int = 0

    def flush(self):
        pass

    def invalidate(self):
        pass

    def freebuffer(self):
        pass

    @property
    def device_address(self):
        return self.physical_address


class Memory:
    """DDR shared by the host and the simulated PL: a file mapped by both processes."""

    def __init__(self, path: str, size: int, create: bool = True):
        self.path, self.size = path, int(size)
        if create:
            with open(path, "wb") as f:
                f.truncate(self.size)
        self._f = open(path, "r+b")
        self.map = mmap.mmap(self._f.fileno(), self.size)
        self.bytes = np.frombuffer(self.map, np.uint8)
        self.top = 0

    def allocate(self, shape, dtype=np.uint8) -> DmaBuffer:
        dt = np.dtype(dtype)
        n = int(np.prod(shape)) * dt.itemsize
        off = -(-self.top // 64) * 64
        if off + n > self.size:
            raise MemoryError(f"DDR model of {self.size:,} bytes is full")
        self.top = off + n
        self.bytes[off:off + n] = GARBAGE
        a = self.bytes[off:off + n].view(dt).reshape(shape).view(DmaBuffer)
        a.physical_address = BASE_ADDRESS + off
        return a

    def read(self, address: int, n: int) -> np.ndarray:
        off = address - BASE_ADDRESS
        if off < 0 or off + n > self.size:
            raise ValueError(f"address 0x{address:X} + {n} outside DDR")
        return self.bytes[off:off + n]

    def write(self, address: int, data: np.ndarray) -> None:
        off = address - BASE_ADDRESS
        if off < 0 or off + len(data) > self.size:
            raise ValueError(f"address 0x{address:X} + {len(data)} outside DDR")
        self.bytes[off:off + len(data)] = data

    def close(self):
        self.bytes = None
        try:
            self.map.close()
        except BufferError:
            pass
        self._f.close()


class AxiDmaRegs:
    """One AXI DMA in simple mode (MM2S = port p's s_axis, S2MM = port p's m_axis)."""

    def __init__(self, port: int, fabric, memory: Memory):
        self.port, self.fabric, self.mem = port, fabric, memory
        self.regs = {0x00: 0x0, 0x04: 0x1, 0x30: 0x0, 0x34: 0x1}
        self.addr = {0: 0, 0x30: 0}
        self.length = {0: 0, 0x30: 0}
        self.busy = {0: False, 0x30: False}
        self.started = {0: False, 0x30: False}   # a transfer since RS went high

    # MMIO interface of pynq.MMIO
    def write(self, offset: int, value: int) -> None:
        base = 0x30 if offset >= 0x30 else 0
        r = offset - base
        value = int(value) & 0xFFFFFFFF
        if r == 0x00:
            self.regs[base] = value
            if value & 1:
                self.regs[base + 4] &= ~0x1          # running
                self.started[base] = False
            else:
                self.regs[base + 4] |= 0x1           # halted
        elif r == 0x04:
            self.regs[base + 4] &= ~(value & 0x7000)  # write 1 to clear interrupt bits
        elif r == 0x18:
            self.addr[base] = (self.addr[base] & ~0xFFFFFFFF) | value
        elif r == 0x1C:
            self.addr[base] = (self.addr[base] & 0xFFFFFFFF) | (value << 32)
        elif r == 0x28:
            self._start(base, value)
        else:
            raise ValueError(f"AXI DMA model: write to unmodelled register 0x{offset:02X}")

    def read(self, offset: int, length: int = 4) -> int:
        base = 0x30 if offset >= 0x30 else 0
        r = offset - base
        if r == 0x04:
            if self.busy[base]:
                self.fabric.poll()
            st = self.regs[base + 4] & ~0x2
            if self.started[base] and not self.busy[base] and not (st & 0x1):
                st |= 0x2
            return st
        if r == 0x00:
            return self.regs[base]
        if r == 0x18:
            return self.addr[base] & 0xFFFFFFFF
        if r == 0x1C:
            return self.addr[base] >> 32
        if r == 0x28:
            return self.length[base]
        raise ValueError(f"AXI DMA model: read of unmodelled register 0x{offset:02X}")

    def _start(self, base: int, nbytes: int) -> None:
        if self.regs[base + 4] & 0x1:
            return                                    # halted: the write is ignored
        if nbytes == 0:
            self.regs[base + 4] |= 0x10 | 0x1         # DMAIntErr, halts
            return
        self.length[base] = nbytes
        self.busy[base] = True
        self.started[base] = True
        addr = self.addr[base]
        if base == 0:
            data = self.mem.read(addr, nbytes).copy()
            self.fabric.send(self.port, data, lambda: self._done(0, nbytes))
        else:
            self.fabric.recv(self.port, nbytes, lambda data: self._received(addr, nbytes, data))

    def _done(self, base: int, nbytes: int) -> None:
        self.length[base] = nbytes
        self.busy[base] = False

    def _received(self, addr: int, cap: int, data: np.ndarray) -> None:
        if len(data) > cap:                            # the frame overran the armed buffer
            self.mem.write(addr, data[:cap])
            self.regs[0x34] |= 0x10 | 0x1
            self.length[0x30] = cap
        else:
            self.mem.write(addr, data)
            self.length[0x30] = len(data)
        self.busy[0x30] = False


class SimpleDmaChannel:
    """A stand-in for ``pynq.lib.dma._SDMAChannel`` (PYNQ 3.1.2): the same register accesses
    in the same order, for hosts without PYNQ (the rtl backend)."""

    def __init__(self, mmio, max_size: int, width: int, tx_rx: int, dre: bool = False):
        self._mmio = mmio
        self._max_size = max_size
        self._active_buffer = None
        self._first_transfer = True
        self._align = width
        self._dre = dre
        self._offset = 0x30 if tx_rx == 0 else 0
        self._flush_before = tx_rx != 0
        self.transferred = 0
        self.start()

    @property
    def running(self):
        return self._mmio.read(self._offset + 4) & 0x01 == 0x00

    @property
    def idle(self):
        return self._mmio.read(self._offset + 4) & 0x02 == 0x02

    @property
    def error(self):
        return self._mmio.read(self._offset + 4) & 0x70 != 0x0

    def start(self):
        self._mmio.write(self._offset, 0x0001)
        while not self.running:
            pass
        self._first_transfer = True

    def stop(self):
        self._mmio.write(self._offset, 0x0000)
        while self.running:
            pass

    def transfer(self, array, start=0, nbytes=0):
        if not self.running:
            raise RuntimeError("DMA channel not started")
        if not self.idle and not self._first_transfer:
            raise RuntimeError("DMA channel not idle")
        if nbytes == 0:
            nbytes = array.nbytes - start
        if nbytes > self._max_size:
            raise ValueError(f"Transfer size is {nbytes} bytes, which exceeds the maximum DMA "
                             f"buffer size {self._max_size}.")
        if not self._dre and ((array.physical_address + start) % self._align) != 0:
            raise RuntimeError("DMA does not support unaligned transfers; Starting address "
                               f"must be aligned to {self._align} bytes.")
        if self._flush_before:
            array.flush()
        self.transferred = 0
        self._mmio.write(self._offset + 0x18, (array.physical_address + start) & 0xFFFFFFFF)
        self._mmio.write(self._offset + 0x1C, ((array.physical_address + start) >> 32)
                         & 0xFFFFFFFF)
        self._mmio.write(self._offset + 0x28, nbytes)
        self._active_buffer = array
        self._first_transfer = False

    def wait(self):
        if not self.running:
            raise RuntimeError("DMA channel not started")
        while True:
            error = self._mmio.read(self._offset + 4)
            if self.error:
                if error & 0x10:
                    raise RuntimeError("DMA Internal Error (transfer length 0?)")
                if error & 0x20:
                    raise RuntimeError("DMA Slave Error (cannot access memory map interface)")
                if error & 0x40:
                    raise RuntimeError("DMA Decode Error (invalid address)")
            if self.idle:
                break
        if not self._flush_before:
            self._active_buffer.invalidate()
        self.transferred = self._mmio.read(self._offset + 0x28)
        self._active_buffer = None


class SimpleDma:
    """``dma.sendchannel`` / ``dma.recvchannel`` as pynq's AxiDMA has them."""

    def __init__(self, regs, channel_cls=SimpleDmaChannel, max_size=(1 << 26) - 1, width=8):
        self.sendchannel = channel_cls(regs, max_size, width, 1, False)
        self.recvchannel = channel_cls(regs, max_size, 4, 0, False)


# --------------------------------------------------------------------------- golden PL top

def _words_to_bytes(words: List[int]) -> np.ndarray:
    return np.array(words, dtype="<u4").view(np.uint8)


class GoldenFabric:
    """The overlay of section A as golden models: per-port routers, matrix engines (the
    formats of ``formats``, per frame: 0x08, 0x03 and, with the Q4_1 lane, 0x04), the
    64+64 -> 128-bit joiner and the attention engine."""

    def __init__(self, max_k: int, acfg: gatt.AttentionConfig, beat_bytes: int = 8,
                 formats=(gmv.FMT_INT8, gmv.FMT_TERNARY, gmv.FMT_Q4)):
        self.max_k, self.acfg, self.bb = max_k, acfg, beat_bytes
        self.formats = tuple(int(f) for f in formats)
        self.out: Dict[int, List[np.ndarray]] = {0: [], 1: []}
        self.pending: Dict[int, Optional[Callable]] = {0: None, 1: None}
        self.half: Dict[int, Optional[np.ndarray]] = {0: None, 1: None}

    def poll(self):
        pass

    def send(self, port: int, data: np.ndarray, done: Callable[[], None]) -> None:
        beats = np.frombuffer(data.tobytes(), "<u8")
        first = int(beats[0]) if len(beats) else 0
        magic = first & 0xFFFF
        if port == 0 and magic == ATTENTION_MAGIC:
            self.half[0] = beats
        elif port == 1 and magic == ROUTE_MAGIC:
            self.half[1] = beats[1:]
        else:
            self.out[port].append(_words_to_bytes([w for w, _ in gmv.mv_frame(
                [int(b) for b in beats], self.bb, self.formats, self.max_k)]))
        if self.half[0] is not None and self.half[1] is not None:
            a, b = self.half[0], self.half[1]
            n = min(len(a), len(b))                 # the joiner ends at the first tlast
            joined = [int(a[i]) | (int(b[i]) << 64) for i in range(n)]
            self.out[0].append(_words_to_bytes(gatt.frame_output(joined, self.acfg)))
            self.half = {0: None, 1: None}
        done()
        self._deliver()

    def recv(self, port: int, cap: int, done: Callable[[np.ndarray], None]) -> None:
        self.pending[port] = done
        self._deliver()

    def _deliver(self):
        for p in (0, 1):
            if self.pending[p] is not None and self.out[p]:
                cb, self.pending[p] = self.pending[p], None
                cb(self.out[p].pop(0))
