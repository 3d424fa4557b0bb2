"""Run by tests/runtime/engines/test_runtime_board.py in the PYNQ venv (build/pynq-venv, pynq 3.1.2, numpy 1.26).

1. The board backend's host code (generators.runtime.engines.runtime.DmaRuntime with the driver
   generators.runtime.engines.sgdma) on PYNQ's OWN ``pynq.MMIO`` (its register-access path) and
   ``pynq.allocate`` (``PynqBuffer``: physical addresses, flush, cacheable or not), through a
   PYNQ ``Device`` whose registers are the AXI DMA register model
   (generators.runtime.engines.regmodel.SgDmaRegs) with the golden PL top behind it and DDR full of 0xA5
   garbage: tokens and every engine word equal the golden backend's, INT8 and ternary.
   PYNQ 3.1.2's ``_SGDMAChannel`` is not the driver: it allocates descriptors per transfer for
   one buffer and stops the channel after each; the runtime's chains are built once.
2. The register model against PYNQ's own scatter-gather driver, ``_SGDMAChannel``: a matrix
   frame sent and its answer received (PYNQ's descriptors: at least two per buffer, SOF/EOF,
   the answer spanning both S2MM descriptors) give the golden model's words.
3. A hang: DmaHangError naming the transfer after a reset and a retry.

Prints one JSON line.
"""
import json
import sys
import tempfile

import numpy as np
import pynq
from pynq.buffer import PynqBuffer
from pynq.lib.dma import _SGDMAChannel

from generators.golden import mv as gmv
from generators.runtime import Decoder, convert, load_checkpoint, make_backend
from generators.runtime.engines.runtime import DmaHangError, DmaRuntime
from generators.runtime.model.checkpoint import EngineConfig
from generators.runtime.engines.regmodel import GoldenFabric, Memory, SgDmaRegs
from generators.runtime.engines.plan import memory_plan
from generators.runtime.engines.sgdma import SgDma
from generators.runtime.model.synthetic import TINY, write_checkpoint

DMA_BASE = (0x4040_0000, 0x4041_0000)


class ModelDevice(pynq.Device):
    """A PYNQ device whose register reads and writes go to the AXI DMA register model and
    whose memory is the DDR model (REGISTER_RW: pynq.MMIO's own path for such devices)."""

    capabilities = {"REGISTER_RW": True}

    def __init__(self, model, zero=False):
        super().__init__("dma-register-model")
        self.zero = zero
        self.mem = Memory(None, 64 << 20)
        self.fabric = GoldenFabric(self.mem, model.engines.max_k,
                                   model.engines.attention_config())
        self.regs = {b: SgDmaRegs(p, self.fabric, self.mem) for p, b in enumerate(DMA_BASE)}
        self.flushes = 0
        #: the Python loop's invalidates of the cached results region (PynqBuffer.invalidate
        #: of a slice: the buffer's offset, its bytes), each whole 32-byte lines or recorded
        self.invalidates, self.bad_invalidates = 0, []

    def _reg(self, address):
        base = address & ~0xFFFF
        return self.regs[base], address - base

    def read_registers(self, address, length):
        regs, off = self._reg(address)
        return int(regs.read(off)).to_bytes(4, "little")

    def write_registers(self, address, data):
        regs, off = self._reg(address)
        regs.write(off, int.from_bytes(data, "little"))

    def allocate(self, shape, dtype, cacheable=True, **kwargs):
        a = self.mem.allocate(shape, dtype)
        if self.zero:
            a[...] = 0
        off = a.physical_address - 0x1000_0000
        return PynqBuffer(shape, dtype, buffer=self.mem.map, offset=off,
                          device_address=a.physical_address, device=self,
                          coherent=not cacheable)

    def flush(self, bo, offset, ptr, size):
        self.flushes += 1

    def invalidate(self, bo, offset, ptr, size):
        self.invalidates += 1
        if offset % 32 or size % 32 or size <= 0:
            self.bad_invalidates.append((offset, size))


def board_runtime(model, dev):
    mmios = [pynq.MMIO(b, 0x10000, device=dev) for b in DMA_BASE]
    return DmaRuntime(model, [SgDma(m, f"dma_{p}") for p, m in enumerate(mmios)],
                      lambda shape, dtype, cacheable, **_: pynq.allocate(
                          shape, dtype, target=dev, cacheable=cacheable),
                      memory_plan(model), pl_reset=dev.fabric.reset,
                      engine_time=lambda: sum(r.busy_s for r in dev.regs.values()))


def same(t1, t2):
    return len(t1) == len(t2) and all(
        a[:3] == b[:3] and len(a[3]) == len(b[3])
        and all(np.array_equal(x, y) for x, y in zip(a[3], b[3])) for a, b in zip(t1, t2))


def pynq_sg_channel_check(model, dev):
    """One matrix frame through PYNQ's _SGDMAChannel on both directions of dma_0."""
    mmio = pynq.MMIO(DMA_BASE[0], 0x10000, device=dev)
    send = _SGDMAChannel(mmio, (1 << 26) - 1, 8, 1, False, device=dev)
    recv = _SGDMAChannel(mmio, (1 << 26) - 1, 4, 0, False, device=dev)
    m = model.matrices["layers.0.gate"]
    x = np.random.default_rng(5).integers(-128, 128, m.k).astype(np.int8)
    frame = m.images[0].copy()
    frame[7] = 0x5A
    frame[8:8 + m.k] = x.view(np.uint8)
    src = pynq.allocate((len(frame),), np.uint8, target=dev)
    src[:] = frame
    dst = pynq.allocate((m.rows[0] + 1,), np.uint32, target=dev)
    recv.transfer(dst)
    send.transfer(src)
    send.wait()
    recv.wait()
    want = [w for w, _ in gmv.mv_frame([int(b) for b in frame.view("<u8")], 8,
                                       (8, 3, 4), model.engines.max_k)]
    return {"identical": [int(w) for w in dst] == want, "received": int(recv.transferred),
            "status_tag": int(dst[-1]) & 0xFF}


def main():
    d = tempfile.mkdtemp()
    eng = EngineConfig(max_k=512, max_context=16)
    write_checkpoint(d, TINY, seed=3)
    ck = load_checkpoint(d, eng)
    res = {"pynq": pynq.__version__, "numpy": np.__version__, "python": sys.version.split()[0]}
    for fmt in ("int8", "ternary"):
        m = convert(ck, fmt, eng)
        t_gold, t_pynq = [], []
        g = list(Decoder(m, make_backend("golden", m), trace=t_gold).generate(
            [5, 6, 7], 4, temperature=1.0, top_k=40, seed=1))
        dev = ModelDevice(m)
        be = board_runtime(m, dev)
        assert type(be.dmas[0].mmio) is pynq.MMIO and isinstance(be.buf["kv"], PynqBuffer)
        p = list(Decoder(m, be, trace=t_pynq).generate([5, 6, 7], 4, temperature=1.0, top_k=40,
                                                     seed=1))
        res[fmt] = {"golden": g, "pynq": p, "calls": len(t_pynq),
                    "identical": bool(same(t_gold, t_pynq)),
                    "cacheable": {k: bool(b.cacheable) for k, b in be.buf.items()},
                    "flushes": dev.flushes, "invalidates": dev.invalidates,
                    "bad_invalidates": dev.bad_invalidates[:3]}
    # PYNQ's SG driver counts on zeroed descriptors ("Zero-Allocate buffer for descriptors"):
    # a STATUS word left with Cmplt set is SGIntErr. The runtime writes every field itself.
    res["sg_channel"] = pynq_sg_channel_check(m, ModelDevice(m, zero=True))
    # a DMA that never finishes: DmaHangError after a reset and a retry
    dev = ModelDevice(m)
    be = board_runtime(m, dev)
    be.timeout_s = 0.2
    dev.regs[DMA_BASE[1]].inject("hang", "s2mm", count=2)
    try:
        Decoder(m, be).step(1)
        res["timeout"] = "no exception"
    except DmaHangError as exc:
        res["timeout"] = str(exc)
    print(json.dumps(res))


if __name__ == "__main__":
    sys.exit(main())
