"""Parameters and rendering shared by the matrix-vector engines (INT8 and ternary)."""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

from ..core import Design, Param, ParameterError

#: The rtl/ files every matrix-vector engine compiles, in order.
MV_RTL = ["sync_fifo.v", "delay_line.v", "axis_skid.v", "mv_stream_ctrl.v", "mv_backend.v"]

#: register stages of the shared controller in front of the lane (rtl/mv_stream_ctrl.v): the
#: input register, the x read, the x bank's output register (docs/timing.md)
CTRL_STAGES = 3

#: register stages of the back end's read side after the result FIFO (rtl/mv_backend.v): none
#: for one-vector engines (the FIFO's head drives m_axis), two for vectors > 1 (the entry of B
#: words in the first of two entry registers, its words selected from flip-flops, then the
#: output register slice: docs/vectors.md)
def out_stages(vectors: int) -> int:
    return 0 if vectors == 1 else 2

P_MAX_K = Param("max_k", int, 2048, "largest K (x elements) a frame may declare", min=1, max=65535)
P_BYTES = Param("bytes", int, 8, "bytes per input beat (64-bit AXI-Stream = 8)", choices=(4, 8, 16))
P_FIFO = Param("fifo_depth", int, 32, "result FIFO entries (left unset: 32, or the next power of two "
               "that holds the engine's latency + 7)", min=16, max=4096, power_of_two=True)
#: the most activation vectors a frame may carry (docs/vectors.md); the engines' default is 1
#: (today's frames only), the PYNQ-Z1 top's is generators.designs.overlay.PYNQ_Z1_VECTORS
MAX_VECTORS = 16
P_VECTORS = Param("vectors", int, 1, "most activation vectors a frame may carry (docs/vectors.md): "
                  "each weight read once, B results per row; 1 takes today's frames only; above "
                  "1 needs bytes=8", min=1, max=MAX_VECTORS)


def nv_width(vectors: int) -> int:
    """Bits of B - 1 in the controller's lane_nv and the back end's FIFO entries."""
    return max(1, (vectors - 1).bit_length())


P_XSTORE = Param("x_store", str, "auto", "where x is kept: bram, lutram, or auto (BRAM from "
                 "max_k >= 256)", choices=("auto", "bram", "lutram"))


class MVEngine(Design):
    """A matrix-vector engine: the shared controller and back end plus a compute lane."""

    wpb = 1                 # weights per byte
    format_code = 0x08      # header format this engine computes
    lane_module = ""
    lane_template = ""
    #: the lane module computes one vector and is instantiated once per vector (INT8); else
    #: one lane module takes every vector's x and returns every vector's partial sum
    lane_per_vector = False

    # -- to be provided by the lane -----------------------------------------------------------
    def lane_latency(self) -> int:
        raise NotImplementedError

    def lane_tree(self):
        raise NotImplementedError

    def lane_doc(self) -> str:
        raise NotImplementedError

    # -- shared -------------------------------------------------------------------------------
    def latency(self) -> int:
        # input register, x read, x output register (CTRL_STAGES) + lane + accumulate and
        # FIFO write (1) + the entry registers of B-vector engines (out_stages)
        return CTRL_STAGES + self.lane_latency() + 1 + out_stages(self.p.get("vectors", 1))

    def fifo_margin(self) -> int:
        # every beat that can be in the pipeline when room falls, plus the eof token, plus
        # one cycle for the registered room flag (latency + 3), plus 2: then the bound the
        # proof uses holds stage by stage (at most two writes in the input register, one per
        # other stage: formal/props/matrix_engine.svh, docs/formal.md)
        return self.latency() + 5

    def fit_fifo(self) -> None:
        """A fifo_depth left at its default (32) grows to the smallest power of two that holds
        the margin (the Q4_1 lane's engines at vectors > 1: latency 26 and more); one set
        explicitly is checked as it is."""
        if getattr(self, "fifo_explicit", True):
            return
        while self.fifo_margin() + 2 > self.p["fifo_depth"]:
            self.p["fifo_depth"] *= 2

    def check_vectors(self) -> None:
        if self.p.get("vectors", 1) > 1 and self.p.get("bytes", 8) != 8:
            raise ParameterError(f"design {self.name}: vectors={self.p['vectors']} needs bytes=8 "
                                 f"(the vectors word is one 8-byte beat), not bytes={self.p['bytes']}")

    def check(self) -> None:
        self.check_vectors()
        if self.fifo_margin() + 2 > self.p["fifo_depth"]:
            raise ParameterError(
                f"design {self.name}: fifo_depth={self.p['fifo_depth']} is too small for "
                f"latency {self.latency()}; it needs more than {self.fifo_margin() + 2} entries")
        psum = self.lane_tree().out
        worst = max(abs(psum.lo), abs(psum.hi)) * -(-self.p["max_k"] // (self.p["bytes"] * self.wpb))
        if worst > 2**31 - 1:
            raise ParameterError(f"design {self.name}: max_k={self.p['max_k']} could overflow "
                                 "the 32-bit result")

    def context(self) -> Dict[str, Any]:
        tree = self.lane_tree()
        return {
            "top": self.top,
            "summary": self.summary,
            "dw": 8 * self.p["bytes"],
            "xw": 8 * self.p["bytes"] * self.wpb * self.p["vectors"],
            "vectors": self.p["vectors"],
            "nvw": nv_width(self.p["vectors"]),
            "lane_per_vector": self.lane_per_vector,
            "wpb": self.wpb,
            "format_code": self.format_code,
            "lane_module": self.lane_module,
            "lane_latency": self.lane_latency(),
            "ctrl_stages": CTRL_STAGES,
            "lane_doc": self.lane_doc(),
            "tree": tree,
            "psum_w": tree.out.width,
            "fifo_addr_w": self.p["fifo_depth"].bit_length() - 1,
            "fifo_margin": self.fifo_margin(),
            "x_bram": int(self.x_bram()),
        }

    def x_bram(self) -> bool:
        if self.p["x_store"] == "auto":
            return self.p["max_k"] >= 256
        return self.p["x_store"] == "bram"

    def rtl_files(self) -> List[str]:
        return list(MV_RTL)

    def templates(self) -> List[Tuple[str, str]]:
        return [(self.lane_template, f"{self.lane_module}.v"), ("mv_engine.v.j2", f"{self.top}.v")]

    def extra_manifest(self) -> Dict[str, Any]:
        return {"lane_latency": self.lane_latency(), "format": self.format_code,
                "bytes": self.p["bytes"], "weights_per_byte": self.wpb,
                "vectors": self.p["vectors"]}
