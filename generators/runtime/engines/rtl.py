"""The ``rtl`` backend: the overlay top (docs/overlay.md) in a cocotb co-simulation, driven by
the runtime's host code (:class:`generators.runtime.backends.DmaRuntime`, the board's).

The host side (this process) holds the decoder, the DMA driver and DDR: a file mapped by both
processes, laid out by the memory plan (weights, KV cache, frame slots, descriptor chains).
The simulator process (generators/cosim/runtime_top.py) runs the AXI DMA register model
(generators.runtime.dma.SgDmaRegs, scatter-gather) in front of the RTL; every register access
crosses a socket, every answer awaited with a timeout (:class:`SimLinkError`). Simulated time
only advances while the host polls a busy DMA channel, so the cycle counts are those of the
engines with an ideal host.
"""
from __future__ import annotations

import dataclasses
import socket
import tempfile
import threading
import time
from multiprocessing.connection import Listener
from pathlib import Path
from typing import Dict, Optional

from .backends import BackendError, DmaRuntime
from .checkpoint import EngineConfig
from .dma import Memory
from .model import Model
from .plan import ATT, memory_plan
from .sgdma import SgDma

REPO = Path(__file__).resolve().parents[2]

__all__ = ["RtlBackend", "RemoteMmio", "SimLink", "SimLinkError", "check_formats",
           "check_manifest", "overlay_params"]


class SimLinkError(BackendError):
    """The simulator did not answer within the link's timeout, or the link broke."""


class SimLink:
    """The socket to a register server (the simulator process, or a golden one): requests
    and their answers, each answer awaited at most ``timeout_s``."""

    def __init__(self, conn, timeout_s: float, what: str = "the simulator"):
        self.conn, self.timeout_s, self.what = conn, timeout_s, what

    def send(self, msg) -> None:
        try:
            self.conn.send(msg)
        except (OSError, EOFError) as exc:
            raise SimLinkError(f"the link to {self.what} broke: {exc}") from None

    def ask(self, msg):
        self.send(msg)
        try:
            if not self.conn.poll(self.timeout_s):
                raise SimLinkError(f"{self.what} did not answer {msg[0]!r} within "
                                   f"{self.timeout_s} s")
            reply = self.conn.recv()
        except (OSError, EOFError) as exc:
            raise SimLinkError(f"the link to {self.what} broke: {exc}") from None
        if isinstance(reply, tuple) and reply and reply[0] == "error":
            raise SimLinkError(f"{self.what}: {reply[1]}")
        return reply


class RemoteMmio:
    """pynq.MMIO's read/write, forwarded to the register model across a :class:`SimLink`."""

    def __init__(self, link: SimLink, port: int):
        self.link, self.port = link, port

    def write(self, offset: int, value: int) -> None:
        self.link.send(("w", self.port, int(offset), int(value)))

    def read(self, offset: int, length: int = 4) -> int:
        return self.link.ask(("r", self.port, int(offset)))


def overlay_params(engines: EngineConfig) -> Dict:
    return {"max_k": engines.max_k, "max_context": engines.max_context}


def check_formats(man: dict, model: Model) -> None:
    """BackendError unless the overlay's matrix engines compute every weight format of the
    model (a Q4_1 model needs an overlay rendered with q4=true)."""
    have = [int(f) for f in man["matrix"].get("formats", [8, 3])]
    need = sorted({(m.fmt, m.code) for m in model.matrices.values()})
    missing = [f for f, c in need if c not in have]
    if missing:
        raise BackendError(f"the overlay's matrix engines compute the formats "
                           f"{['0x%02X' % f for f in have]}, the model needs {missing} "
                           f"({', '.join('0x%02X' % c for f, c in need if f in missing)})"
                           + ("; render the overlay with q4=true" if "q4" in missing else ""))


def check_manifest(man: dict, engines: EngineConfig) -> None:
    got = EngineConfig.from_manifest(man)
    if got != engines:
        diff = {k: (v, getattr(got, k)) for k, v in engines.as_dict().items()
                if getattr(got, k) != v}
        raise BackendError(f"the rendered overlay serves other engines than the model was "
                           f"converted for (model, overlay): {diff}")


def accept(listener: Listener, alive, timeout_s: float, what: str):
    """The register server's connection, or BackendError when it died or never came."""
    listener._listener._socket.settimeout(1.0)
    t0 = time.monotonic()
    while True:
        try:
            return listener.accept()
        except (socket.timeout, TimeoutError):
            if not alive():
                raise BackendError(f"{what} ended before connecting")
            if time.monotonic() - t0 > timeout_s:
                raise BackendError(f"{what} did not connect within {timeout_s} s")


def _shared_ddr(be, model, context, prefix, vectors=None, streams=1):
    """The plan, a folder with DDR (a file both processes map, ``be.memory``) and the
    listener the register server connects to."""
    plan = memory_plan(model, context, vectors, streams)
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    be._tmp = tmp
    be.memory = Memory(str(tmp / "ddr"), plan.ddr_bytes)
    sock = str(tmp / "sock")
    return plan, tmp, plan.ddr_bytes, sock, Listener(sock, "AF_UNIX")


def _hang_up(be, join) -> None:
    """Say goodbye to the register server, wait for it (``join``), drop DDR and the folder."""
    if getattr(be, "conn", None) is not None:
        try:
            be.link.ask(("q",))
        except BackendError:
            pass
        be.conn.close()
        be.conn = None
    join()
    be.memory.close()
    for f in be._tmp.iterdir():
        f.unlink()
    be._tmp.rmdir()


class RtlBackend(DmaRuntime):
    """The runtime on the simulated overlay. ``timeout_s``: a transfer's deadline and the
    link's (simulation is slow: a register read of a busy channel runs the clock until a
    transfer completes)."""

    name = "rtl"

    def __init__(self, model: Model, simulator: str = "verilator", params: Optional[Dict] = None,
                 timeout_s: float = 600.0, start_timeout_s: float = 1800.0,
                 context: Optional[int] = None, streams: int = 1):
        from generators.cosim import runner
        self.simulator = simulator
        params = dict(params or overlay_params(model.engines))
        man = runner.render("overlay", params)
        check_manifest(man, model.engines)
        check_formats(man, model)
        if man["streams"][0]["s_axis_width"] != 64:
            raise BackendError("the overlay's streams must be 64 bits wide")
        self.manifest = man
        # B-vector frames of up to the rendered top's vectors (its manifest)
        plan, tmp, size, sock, listener = _shared_ddr(
            self, model, context, "rtl-backend-", int(man["matrix"].get("vectors", 1)), streams)
        self._error = None
        self.result = None
        self.conn = None

        def sim():
            try:
                self.result = runner.run("overlay", params, simulator,
                                         "generators.cosim.runtime_top", name="runtime",
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
        _hang_up(self, lambda: self._thread.join(timeout=120))
        if self._error is not None:
            raise BackendError(f"the simulation failed: {self._error}")


class GoldenServerBackend(DmaRuntime):
    """The runtime with the register model and the golden PL top in a process of their own
    (generators.runtime.dma.serve_golden), over the rtl backend's socket protocol: the host's
    process holds only the host code and DDR's map, as on the board (tests/test_runtime.py
    measures its memory with tracemalloc this way)."""

    name = "golden-server"

    def __init__(self, model: Model, context: Optional[int] = None, timeout_s: float = 30.0,
                 formats=(8, 3, 4), vectors: Optional[int] = None, streams: int = 1):
        import json
        import subprocess
        import sys
        plan, tmp, size, sock, listener = _shared_ddr(self, model, context, "golden-server-",
                                                      vectors, streams)
        arg = json.dumps({"address": sock, "ddr": str(tmp / "ddr"), "size": size,
                          "max_k": model.engines.max_k,
                          "acfg": dataclasses.asdict(model.engines.attention_config()),
                          "formats": list(formats), "vectors": plan.vectors})
        self.proc = subprocess.Popen([sys.executable, "-m", "generators.runtime.dma", arg])
        try:
            self.conn = accept(listener, lambda: self.proc.poll() is None, 120,
                               "the golden register server")
        finally:
            listener.close()
        self.link = SimLink(self.conn, timeout_s, "the golden register server")
        super().__init__(model, [SgDma(RemoteMmio(self.link, p), f"dma_{p}") for p in (0, 1)],
                         self.memory.allocate, plan, timeout_s,
                         pl_reset=lambda: self.link.ask(("reset",)),
                         engine_time=lambda: self.link.ask(("c",))[3])

    def inject(self, port: int, **fault) -> None:
        """SgDmaRegs.inject on the server's register model of ``port``."""
        self.link.ask(("inject", port, fault))

    def close(self):
        _hang_up(self, lambda: self.proc.wait(timeout=60))
