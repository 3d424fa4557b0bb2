"""The ``golden-server`` backend: the register model and the golden PL top in a process of their
own (regmodel.serve_golden), over the rtl backend's socket protocol (link.py)."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from typing import Optional

from ..model.model import Model
from .link import RemoteMmio, SimLink, accept, hang_up, shared_ddr
from .registry import register_backend
from .runtime import DmaRuntime
from .sgdma import SgDma

__all__ = ["GoldenServerBackend"]

#: what the server process runs (regmodel.serve_golden_json reads its one argument)
SERVER = "import sys; from generators.runtime.engines.regmodel import serve_golden_json; " \
         "serve_golden_json(sys.argv[1])"


class GoldenServerBackend(DmaRuntime):
    """The runtime with the register model and the golden PL top in a process of their own
    (generators.runtime.engines.regmodel.serve_golden), over the rtl backend's socket protocol: the host's
    process holds only the host code and DDR's map, as on the board (tests/runtime/decode/test_runtime.py
    measures its memory with tracemalloc this way)."""

    name = "golden-server"

    def __init__(self, model: Model, context: Optional[int] = None, timeout_s: float = 30.0,
                 formats=(8, 3, 4, 5, 9), vectors: Optional[int] = None, streams: int = 1):
        plan, tmp, size, sock, listener = shared_ddr(self, model, context, "golden-server-",
                                                      vectors, streams)
        arg = json.dumps({"address": sock, "ddr": str(tmp / "ddr"), "size": size,
                          "max_k": model.engines.max_k,
                          "acfg": dataclasses.asdict(model.engines.attention_config()),
                          "formats": list(formats), "vectors": plan.vectors})
        self.proc = subprocess.Popen([sys.executable, "-c", SERVER, arg])
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
        hang_up(self, lambda: self.proc.wait(timeout=60))


register_backend("golden-server", GoldenServerBackend, listed=False)
