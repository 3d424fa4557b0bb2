"""The ``rtl`` backend: the overlay top (docs/overlay.md) in a cocotb co-simulation, driven by
the runtime's host code (:class:`generators.runtime.engines.runtime.DmaRuntime`, the board's).

The host side (this process) holds the decoder, the DMA driver and DDR: a file mapped by both
processes, laid out by the memory plan (weights, KV cache, frame slots, descriptor chains).
The simulator process (:data:`SIM_MODULE`, engines/rtl_sim.py) runs the AXI DMA register model
(generators.runtime.engines.regmodel.SgDmaRegs, scatter-gather) in front of the RTL; every register access
crosses a socket, every answer awaited with a timeout (:class:`SimLinkError`). Simulated time
only advances while the host polls a busy DMA channel, so the cycle counts are those of the
engines with an ideal host.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Dict, Optional

from generators.contract import FORMAT_Q4, FORMAT_Q4_Q8_1, FORMAT_Q8_0
from generators.cosim import runner

from ..errors import BackendError
from ..model.checkpoint import EngineConfig
from ..model.model import Model
from .link import RemoteMmio, SimLink, accept, hang_up, shared_ddr
from .plan import ATT
from .registry import register_backend
from .runtime import DmaRuntime
from .sgdma import SgDma

REPO = Path(__file__).resolve().parents[3]
#: the simulator side, the cocotb module cocotb loads by name in its own process (no module of
#: the library imports it: cocotb is imported there only)
SIM_MODULE = "generators.runtime.engines.rtl_sim"

__all__ = ["RtlBackend", "check_formats", "check_manifest", "overlay_params"]


def overlay_params(engines: EngineConfig) -> Dict:
    """The overlay parameters of a top serving ``engines`` (its K and V width included: the
    overlay's default is INT16, an INT8-KV model needs ``kv_bits=8``)."""
    return {"max_k": engines.max_k, "max_context": engines.max_context,
            "kv_bits": engines.kv_bits}


def check_formats(man: dict, model: Model) -> None:
    """BackendError unless the overlay's matrix engines compute every frame format of the
    model: its manifest's ``matrix.formats`` and ``matrix.block_formats`` (the per-block x
    formats, docs/activations.md: 0x05 on the Q4_1 lane, 0x09 on the INT8 lane's products and
    the Q4_1 lane's finisher). A Q4_1 model needs an overlay rendered with q4=true, one
    converted with Q8_1 x (format 0x05) a lane that takes it, and an int8 or q4 model's Q8_0
    LM head (format 0x09) a top that takes 0x09 (this version's, q4=true)."""
    have = [int(f) for f in man["matrix"].get("formats", [8, 3])] + \
        [int(f) for f in man["matrix"].get("block_formats", [])]
    need = sorted({(m.fmt, m.code) for m in model.matrices.values()})
    gone = [(f, c) for f, c in need if c not in have]
    if gone:
        missing = sorted({f for f, _ in gone})
        hint = ""
        if any(c == FORMAT_Q4_Q8_1 for _, c in gone) and FORMAT_Q4 in have:
            hint = ("; its Q4_1 lane does not take format 0x05 (Q8_1 x): render the overlay "
                    "of this version")
        elif "q4" in missing:
            hint = "; render the overlay with q4=true"
        elif any(c == FORMAT_Q8_0 for _, c in gone):
            hint = ("; the LM head's Q8_0 rows (format 0x09) need this version's overlay with "
                    "q4=true (the INT8 lane's 0x09 on the Q4_1 lane's finisher)")
        raise BackendError(f"the overlay's matrix engines compute the formats "
                           f"{['0x%02X' % f for f in have]}, the model needs {missing} "
                           f"({', '.join('0x%02X' % c for _, c in gone)}){hint}")


def check_manifest(man: dict, engines: EngineConfig) -> None:
    got = EngineConfig.from_manifest(man)
    if got != engines:
        diff = {k: (v, getattr(got, k)) for k, v in engines.as_dict().items()
                if getattr(got, k) != v}
        raise BackendError(f"the rendered overlay serves other engines than the model was "
                           f"converted for (model, overlay): {diff}")


class RtlBackend(DmaRuntime):
    """The runtime on the simulated overlay. ``timeout_s``: a transfer's deadline and the
    link's (simulation is slow: a register read of a busy channel runs the clock until a
    transfer completes)."""

    name = "rtl"

    def __init__(self, model: Model, simulator: str = "verilator", params: Optional[Dict] = None,
                 timeout_s: float = 600.0, start_timeout_s: float = 1800.0,
                 context: Optional[int] = None, streams: int = 1):
        self.simulator = simulator
        params = dict(params or overlay_params(model.engines))
        man = runner.render("overlay", params)
        check_manifest(man, model.engines)
        check_formats(man, model)
        if man["streams"][0]["s_axis_width"] != 64:
            raise BackendError("the overlay's streams must be 64 bits wide")
        self.manifest = man
        # B-vector frames of up to the rendered top's vectors (its manifest)
        plan, tmp, size, sock, listener = shared_ddr(
            self, model, context, "rtl-backend-", int(man["matrix"].get("vectors", 1)), streams)
        self._error = None
        self.result = None
        self.conn = None

        def sim():
            try:
                self.result = runner.run("overlay", params, simulator,
                                         SIM_MODULE, name="runtime",
                                         extra_env={"TB_RT_SOCKET": sock,
                                                    "TB_RT_DDR": str(tmp / "ddr"),
                                                    "TB_RT_DDR_SIZE": str(size),
                                                    "TB_RT_DIRECT": "1" if simulator ==
                                                    "verilator" else "0"})
            except BaseException as exc:       # reported by __init__ or close()
                self._error = exc

        self._thread = threading.Thread(target=sim, daemon=True)
        self._thread.start()
        try:
            self.conn = accept(listener, self._thread.is_alive, start_timeout_s,
                               f"the {simulator} simulation of the overlay")
        except BackendError as exc:
            raise BackendError(f"{exc}: {self._error}") if self._error else exc
        finally:
            listener.close()
        self.link = SimLink(self.conn, timeout_s, f"the {simulator} simulation")
        self.cycles = {"matrix": 0, "attention": 0}
        self.beats = {"matrix": 0, "attention": 0}
        super().__init__(model, [SgDma(RemoteMmio(self.link, p), f"dma_{p}") for p in (0, 1)],
                         self.memory.allocate, plan, timeout_s,
                         pl_reset=lambda: self.link.ask(("reset",)))
        self._counts = (0, 0)
        self.transfer_hooks.append(self._count_cycles)

    def sim_counts(self):
        """(clock cycles simulated, input beats accepted on both ports) so far."""
        return self.link.ask(("c",))[:2]

    def _count_cycles(self, index: int, done: bool) -> None:
        """A transfer hook: the simulated cycles and beats of each transfer, by kind."""
        if not done:
            self._counts = self.sim_counts()
            return
        c0, b0 = self._counts
        c1, b1 = self.sim_counts()
        k = "attention" if self.plan.transfers[index].kind == ATT else "matrix"
        self.cycles[k] += c1 - c0
        self.beats[k] += b1 - b0

    def close(self):
        hang_up(self, lambda: self._thread.join(timeout=120))
        if self._error is not None:
            raise BackendError(f"the simulation failed: {self._error}")


register_backend("rtl", RtlBackend)
