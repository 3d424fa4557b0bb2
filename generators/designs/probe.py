"""`probe`: the write-up's Stage 2 bandwidth probe (DESIGN.md section 3, last paragraph)."""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

from ..core import Design, Param, register


@register
class Probe(Design):
    name = "probe"
    top = "bw_probe"
    summary = "accepts every beat, counts beats and cycles"
    params = (
        Param("bytes", int, 8, "bytes per input beat", choices=(4, 8, 16)),
        Param("fifo_depth", int, 16, "frames whose counts can wait for the output", min=4,
              max=1024, power_of_two=True),
    )

    def latency(self) -> int:
        return 1   # the tlast handshake writes the FIFO; the word is valid the next cycle

    def context(self) -> Dict[str, Any]:
        return {"top": self.top, "dw": 8 * self.p["bytes"],
                "fifo_addr_w": self.p["fifo_depth"].bit_length() - 1}

    def rtl_files(self) -> List[str]:
        return ["sync_fifo.v", "bw_probe_core.v"]

    def templates(self) -> List[Tuple[str, str]]:
        return [("probe.v.j2", f"{self.top}.v")]

    def extra_manifest(self) -> Dict[str, Any]:
        return {"bytes": self.p["bytes"]}
