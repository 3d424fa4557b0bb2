"""The ``golden`` backend: the runtime on the AXI DMA register model (regmodel.SgDmaRegs) with the
golden PL top behind it (regmodel.GoldenFabric over generators.golden.overlay), in this process."""
from __future__ import annotations

from typing import Optional

from ..model.model import Model
from .plan import memory_plan
from .registry import register_backend
from .regmodel import GoldenFabric, Memory, SgDmaRegs
from .runtime import DmaRuntime
from .sgdma import SgDma

__all__ = ["golden_backend"]


def golden_backend(model: Model, context: Optional[int] = None, formats=(8, 3, 4, 5, 9),
                   timeout_s: float = 5.0, zero_matrices: bool = False,
                   vectors: Optional[int] = None, streams: int = 1) -> DmaRuntime:
    """The runtime on the AXI DMA register model with the golden PL top behind it, in this
    process (``formats``: the matrix engines' formats, by default a top whose Q4_1 lane
    takes 0x04 and 0x05 and whose INT8 lane 0x09; (8, 3, 4) is one without per-block x, (8, 3)
    an overlay rendered
    with q4=false; ``zero_matrices``: matrix frames answered with zeros, their rows never read: the
    host's own cost without the engines' models; ``vectors``: the matrix engines' (default the
    model's ``engines.vectors``); ``streams``: KV caches (memory_plan))."""
    plan = memory_plan(model, context, vectors, streams)
    mem = Memory(None, plan.ddr_bytes)
    fab = GoldenFabric(mem, model.engines.max_k, model.engines.attention_config(), formats,
                       zero_matrices, plan.vectors)
    regs = [SgDmaRegs(p, fab, mem) for p in (0, 1)]
    rt = DmaRuntime(model, [SgDma(regs[p], f"dma_{p}") for p in (0, 1)], mem.allocate, plan,
                    timeout_s, pl_reset=fab.reset,
                    engine_time=lambda: regs[0].busy_s + regs[1].busy_s, barrier=mem.barrier)
    rt.name = "golden"
    rt.memory, rt.fabric, rt.regs = mem, fab, regs
    return rt


register_backend("golden", golden_backend)
register_backend("dma-model", golden_backend, listed=False)
