"""`int8-engine`: the write-up's Stage 3 INT8 matrix-vector engine on DSP48s."""
from __future__ import annotations

from ..adder_tree import build_tree, dsp_spread_registers, tree_depth
from ..core import Param, ParameterError, register
from .mv_common import P_BYTES, P_FIFO, P_MAX_K, P_VECTORS, P_XSTORE, MVEngine

PROD_LO, PROD_HI = -128 * 127, 128 * 128   # range of an INT8 x INT8 product


@register
class Int8Engine(MVEngine):
    name = "int8-engine"
    top = "int8_engine"
    summary = "INT8 matrix-vector engine, one multiply per input byte on DSP48s"
    wpb = 1
    format_code = 0x08
    lane_module = "int8_lane"
    lane_template = "int8_lane.v.j2"
    lane_per_vector = True      # one int8_lane per vector, the weights shared
    params = (
        P_MAX_K,
        P_BYTES,
        Param("pipeline", int, 5,
              "pipeline depth in cycles: x read + multiply + adder-tree registers + accumulate "
              "(the latency is 2 more: the controller's input register and the x banks' output "
              "register); legal 3 .. 3 + log2(bytes)", min=3, max=7),
        P_FIFO,
        P_XSTORE,
        P_VECTORS,
    )

    def tree_levels(self) -> int:
        return tree_depth(self.p["bytes"])

    def check(self) -> None:
        hi = 3 + self.tree_levels()
        if self.p["pipeline"] > hi:
            raise ParameterError(
                f"design {self.name}: pipeline={self.p['pipeline']} is deeper than "
                f"{self.p['bytes']} multiplies allow (legal 3..{hi}: x read, multiply, "
                f"{self.tree_levels()} adder levels, accumulate)")
        super().check()

    def lane_tree(self):
        regs = dsp_spread_registers(self.tree_levels(), self.p["pipeline"] - 3)
        leaves = [(f"p{i}", PROD_LO, PROD_HI) for i in range(self.p["bytes"])]
        return build_tree(leaves, regs)

    def lane_latency(self) -> int:
        return 1 + self.lane_tree().registers   # product register + tree registers

    def lane_doc(self) -> str:
        return (f"{self.p['bytes']} DSP multiplies (registered), adder tree with "
                f"{self.lane_tree().registers} register stage(s)")
