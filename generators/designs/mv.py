"""`mv-engine`: one matrix-vector engine computing both row formats, chosen per frame.

The header's format byte picks the lane: 0x08 INT8 rows (one weight per byte, DSP48
multiplies) or 0x03 ternary rows (five trits per byte, adder tree). One stream controller
(rtl/mv_stream_ctrl.v with FORMAT_B), the two lane templates of `int8-engine` and
`ternary-engine`, one back end (rtl/mv_backend.v). x is kept in five banks for both formats;
an INT8 row beat reads one bank in turn, through a registered bank select that counts in the
INT8 path's latency. The shorter path is delayed at its output so both meet the back end at one
latency, computed here.
"""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

import jinja2

from ..adder_tree import build_tree, dsp_spread_registers, sext, tree_depth
from ..core import TEMPLATE_DIR, Param, ParameterError, register
from .int8 import PROD_LO, PROD_HI
from .mv_common import (CTRL_STAGES, P_BYTES, P_FIFO, P_MAX_K, P_VECTORS, P_XSTORE, MVEngine,
                        nv_width)
from .ternary import DECODE_BRAM_STAGES, TREE_MODULE, ternary_tree, trit_decode_table
from ..contract import FORMAT_INT8, FORMAT_Q4, FORMAT_Q8_0, FORMAT_TERNARY

FORMATS = (FORMAT_INT8, FORMAT_TERNARY)   # INT8 rows, ternary rows
# with q4=true: llama.cpp Q4_1 rows (FORMAT_Q4) on a third lane (docs/q4.md)


@register
class MVDualEngine(MVEngine):
    name = "mv-engine"
    top = "mv_engine"
    summary = ("matrix-vector engine for INT8 (0x08) and ternary (0x03) rows, the lane chosen "
               "per frame by the header's format byte")
    wpb = 5                 # x banks (ternary: five weights per byte)
    format_code = 0x03      # the controller's FORMAT; FORMAT_B is INT8
    params = (
        P_MAX_K,
        P_BYTES,
        Param("pipeline", int, 6, "INT8 lane depth as in int8-engine: x read + multiply + "
              "adder-tree registers + accumulate; legal 3 .. 3 + log2(bytes). Default: 3 + "
              "log2(bytes), every tree level registered (6 at 8 bytes: the calibrated timing "
              "model, docs/timing.md; the INT8 path is then no longer than the ternary one, so "
              "the latency is 5's)", min=3, max=7),
        Param("reg_every", int, 2, "ternary tree: adder levels between register stages after "
              "the first level's register", min=1, max=8),
        Param("decode_bram", bool, True, "ternary trit decode table in BRAM (two cycles: read and output "
              "registers) "
              "instead of LUTs"),
        P_FIFO,
        P_XSTORE,
        Param("q4", bool, False, "a third lane for llama.cpp Q4_1 rows (format 0x04, and 0x05 "
              "with Q8_1 x blocks; float32 results, docs/q4.md), whose multiplies and finisher "
              "also take the INT8 lane's Q8_0 rows with Q8_0 x blocks (format 0x09, "
              "docs/activations.md); 8-byte beats only"),
        P_VECTORS,
    )

    def __init__(self, values=None):
        values = dict(values or {})
        self.fifo_explicit = "fifo_depth" in values
        if "pipeline" not in values:    # the deepest legal INT8 lane for the chosen beat width
            b = P_BYTES.convert(values.get("bytes", P_BYTES.default))
            values["pipeline"] = 3 + tree_depth(b)
        super().__init__(values)

    # ---------------------------------------------------------------- the two lanes
    def int8_tree(self):
        levels = tree_depth(self.p["bytes"])
        regs = dsp_spread_registers(levels, self.p["pipeline"] - 3)
        leaves = [(f"p{i}", PROD_LO, PROD_HI) for i in range(self.p["bytes"])]
        return build_tree(leaves, regs)

    def ternary_tree(self):
        return ternary_tree(5 * self.p["bytes"], 8, self.p["reg_every"], first=True)

    def int8_lane_latency(self) -> int:
        return 1 + self.int8_tree().registers

    def ternary_lane_latency(self) -> int:
        return (DECODE_BRAM_STAGES if self.p["decode_bram"] else 0) + self.ternary_tree().registers

    def paths(self) -> Dict[str, int]:
        """Cycles from the controller's stage 1 to each lane's partial sum: the INT8 path has
        the registered bank select in front of its lane."""
        out = {"int8": 1 + self.int8_lane_latency(), "ternary": self.ternary_lane_latency()}
        if self.p["q4"]:
            from .q4 import LANE_STAGES
            out["q4"] = len(LANE_STAGES)
        return out

    def formats(self) -> List[int]:
        return list(FORMATS) + ([FORMAT_Q4] if self.p["q4"] else [])

    def lane_latency(self) -> int:
        # the longer path, then the register of the partial sum chosen by the frame's format
        # (the choice would otherwise add a LUT level in front of the accumulator)
        return max(self.paths().values()) + 1

    def lane_tree(self):   # for MVEngine.check: the wider partial sum decides the overflow
        t8, tt = self.int8_tree(), self.ternary_tree()
        return t8 if max(abs(t8.out.lo), t8.out.hi) >= max(abs(tt.out.lo), tt.out.hi) else tt

    def lane_doc(self) -> str:
        p = self.paths()
        return (f"INT8: bank select (1) + {self.p['bytes']} DSP multiplies and tree "
                f"({self.int8_lane_latency()}); ternary: trit decode and {5 * self.p['bytes']}-term "
                f"tree ({p['ternary']}); the shorter delayed to {max(p.values())}, then the "
                f"chosen partial sum registered")

    def check(self) -> None:
        if self.p["q4"] and self.p["bytes"] != 8:
            raise ParameterError(f"design {self.name}: q4=true needs bytes=8 (a Q4_1 scale beat "
                                 f"is four fp16), not bytes={self.p['bytes']}")
        if self.p["q4"]:
            from .q4 import D_STAGE
            if self.paths()["int8"] > D_STAGE:    # pipeline is at most 3 + log2(8) = 6: 5
                raise ParameterError(f"design {self.name}: the INT8 path ({self.paths()['int8']} "
                                     f"cycles) is longer than the Q4_1 lane's stage D "
                                     f"({D_STAGE}), where format 0x09 takes its beat sums")
        self.fit_fifo()
        hi = 3 + tree_depth(self.p["bytes"])
        if self.p["pipeline"] > hi:
            raise ParameterError(
                f"design {self.name}: pipeline={self.p['pipeline']} is deeper than "
                f"{self.p['bytes']} multiplies allow (legal 3..{hi})")
        super().check()
        # the INT8 lane's sums are over K/bytes beats, not K/(5*bytes)
        t8 = self.int8_tree()
        worst = max(abs(t8.out.lo), t8.out.hi) * -(-self.p["max_k"] // self.p["bytes"])
        if worst > 2**31 - 1:
            raise ParameterError(f"design {self.name}: max_k={self.p['max_k']} could overflow "
                                 "the 32-bit result")

    # ---------------------------------------------------------------- rendering
    def context(self) -> Dict[str, Any]:
        ctx = super().context()
        t8, tt = self.int8_tree(), self.ternary_tree()
        p = self.paths()
        ctx.update(
            psum_w=max(t8.out.width, tt.out.width),
            psum8_w=t8.out.width, psumt_w=tt.out.width,
            delay8=max(p.values()) - p["int8"], delayt=max(p.values()) - p["ternary"],
            int8_module="int8_lane", ternary_module="ternary_lane",
            format_b=0x08, sext=sext, q4=self.p["q4"], paths=p, ctrl_stages=CTRL_STAGES,
        )
        if self.p["q4"]:
            from .q4 import D_STAGE, FORMAT_Q4_Q8_1, q4_lane_acc_width
            ctx.update(psum_w=32, acc_w=q4_lane_acc_width(self.p["max_k"], q8_0=True),
                       delayq=max(p.values()) - p["q4"], format_s=FORMAT_Q4_Q8_1,
                       format_sb=FORMAT_Q8_0, delay_s8=D_STAGE - p["int8"])
        return ctx

    def _lane_ctx(self, kind: str) -> Dict[str, Any]:
        dw = 8 * self.p["bytes"]
        base = {"bytes": self.p["bytes"], "dw": dw, "stamp": self.stamp(), "reg_every": self.p["reg_every"],
                "decode_bram": self.p["decode_bram"], "vectors": self.p["vectors"]}
        if kind == "int8":
            t = self.int8_tree()
            base.update(lane_module="int8_lane", tree=t, psum_w=t.out.width,
                        lane_latency=self.int8_lane_latency(), xw=dw)
        else:
            t = self.ternary_tree()
            base.update(lane_module="ternary_lane", tree=t, psum_w=t.out.width, sum_w=t.out.width,
                        lane_latency=self.ternary_lane_latency(), xw=5 * dw * self.p["vectors"],
                        terms=5 * self.p["bytes"], table=trit_decode_table(),
                        tree_module=TREE_MODULE, x_width=8)
        return base

    def render_texts(self) -> Dict[str, str]:
        env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
                                 undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                                 trim_blocks=True, lstrip_blocks=True)
        out = {}
        tctx = self._lane_ctx("ternary")
        out[f"{TREE_MODULE}.v"] = env.get_template("ternary_tree.v.j2").render(**tctx)
        out["int8_lane.v"] = env.get_template("int8_lane.v.j2").render(**self._lane_ctx("int8"))
        out["ternary_lane.v"] = env.get_template("ternary_lane.v.j2").render(**tctx)
        ctx = dict(self.p)
        ctx.update(self.context())
        ctx["latency"] = self.latency()
        ctx["stamp"] = self.stamp()
        out[f"{self.top}.v"] = env.get_template("mv_dual_engine.v.j2").render(**ctx)
        return out

    def templates(self) -> List[Tuple[str, str]]:
        return []   # rendered by render_texts with one context per lane

    def rtl_files(self) -> List[str]:
        return super().rtl_files() + (["q4_lane.v"] if self.p["q4"] else [])

    def extra_manifest(self) -> Dict[str, Any]:
        out = {"lane_latency": self.lane_latency(), "formats": self.formats(),
               "bytes": self.p["bytes"], "paths": self.paths(),
               "weights_per_byte": {"8": 1, "3": 5}, "vectors": self.p["vectors"]}
        if self.p["q4"]:
            from .q4 import FORMAT_Q4_Q8_1
            out["weights_per_byte"]["4"] = 2
            # per-block x (docs/activations.md): Q4_1 rows with Q8_1 x on the Q4_1 lane, Q8_0 rows
            # with Q8_0 x on the INT8 lane's products and the Q4_1 lane's finisher
            out["block_formats"] = [FORMAT_Q4_Q8_1, FORMAT_Q8_0]
        return out
