"""The ``rtl`` backend: the overlay top (contracts section A) in a cocotb co-simulation, driven
by the same DMA-channel host code as the board (:class:`generators.runtime.backends.DmaHost`).

The host side (this process) holds the decoder, the DMA channel driver (the stand-in of PYNQ's
_SDMAChannel, the same register accesses) and DDR: a file mapped by both processes, holding the
weight images in buffers allocated once. The simulator process (generators/cosim/runtime_top.py)
runs the register model of the two AXI DMAs in front of the RTL; every MMIO access crosses a
socket. Simulated time only advances while the host waits on a DMA channel, so the cycle
counts are those of the engines with an ideal host.
"""
from __future__ import annotations

import os
import socket
import tempfile
import threading
import time
from multiprocessing.connection import Listener
from pathlib import Path
from typing import Dict, Optional

from .backends import BackendError, DmaHost
from .checkpoint import EngineConfig
from .dma import Memory, SimpleDma
from .model import Model

REPO = Path(__file__).resolve().parents[2]


class RemoteMmio:
    """pynq.MMIO's read/write, forwarded to the register model in the simulator process."""

    def __init__(self, conn, port: int):
        self.conn, self.port = conn, port

    def write(self, offset: int, value: int) -> None:
        self.conn.send(("w", self.port, int(offset), int(value)))

    def read(self, offset: int, length: int = 4) -> int:
        self.conn.send(("r", self.port, int(offset)))
        return self.conn.recv()


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


class RtlBackend(DmaHost):
    name = "rtl"

    def __init__(self, model: Model, simulator: str = "verilator", params: Optional[Dict] = None,
                 timeout_s: float = 600.0, start_timeout_s: float = 1800.0):
        from generators.cosim import runner
        self.simulator = simulator
        params = dict(params or overlay_params(model.engines))
        man = runner.render("overlay", params)
        check_manifest(man, model.engines)
        check_formats(man, model)
        self.manifest = man
        tmp = Path(tempfile.mkdtemp(prefix="rtl-backend-"))
        self._tmp = tmp
        size = sum(len(i) for m in model.matrices.values() for i in m.images) + (64 << 20)
        self.memory = Memory(str(tmp / "ddr"), size)
        sock = str(tmp / "sock")
        listener = Listener(sock, "AF_UNIX")
        self._error = None
        self.result = None

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
        listener._listener._socket.settimeout(1.0)
        t0 = time.monotonic()
        while True:
            try:
                self.conn = listener.accept()
                break
            except (socket.timeout, TimeoutError):
                if not self._thread.is_alive():
                    raise BackendError(f"the {simulator} simulation of the overlay ended "
                                       f"before connecting: {self._error}")
                if time.monotonic() - t0 > start_timeout_s:
                    raise BackendError("the simulation did not connect within "
                                       f"{start_timeout_s} s")
        listener.close()
        dmas = [SimpleDma(RemoteMmio(self.conn, p)) for p in (0, 1)]
        self.cycles = {"matrix": 0, "attention": 0}
        self.beats = {"matrix": 0, "attention": 0}
        super().__init__(model, dmas, self.memory.allocate, timeout_s,
                         beat_bytes=man["streams"][0]["s_axis_width"] // 8)

    def sim_counts(self):
        """(clock cycles simulated, input beats accepted on both ports) so far."""
        self.conn.send(("c",))
        return self.conn.recv()[:2]

    def _counted(self, kind, fn, arg):
        c0, b0 = self.sim_counts()
        out = fn(arg)
        c1, b1 = self.sim_counts()
        self.cycles[kind] += c1 - c0
        self.beats[kind] += b1 - b0
        return out

    def matrices(self, calls):
        return self._counted("matrix", super().matrices, calls)

    def attention(self, frames):
        return self._counted("attention", super().attention, frames)

    def close(self):
        if getattr(self, "conn", None) is not None:
            try:
                self.conn.send(("q",))
                self.conn.recv()
            except (EOFError, OSError):
                pass
            self.conn.close()
            self.conn = None
        self._thread.join(timeout=120)
        self.memory.close()
        for f in self._tmp.iterdir():
            f.unlink()
        self._tmp.rmdir()
        if self._error is not None:
            raise BackendError(f"the simulation failed: {self._error}")

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()
