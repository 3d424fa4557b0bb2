"""`q4-engine`: matrix-vector engine for llama.cpp Q4_1 rows (4-bit codes, fp16 d and m per
32-weight block), header format 0x04 (INT8 x) and 0x05 (Q8_1 x: an fp16 d and s per 32 x
values, docs/activations.md), float32 results (docs/q4.md).

The shared stream controller (rtl/mv_stream_ctrl.v with WPB=2, GROUP=4: a scale beat ahead of
every four code beats) and back end (rtl/mv_backend.v), and the hand-written lane rtl/q4_lane.v.
The lane's pipeline is fixed (21 stages); the generator computes the row accumulator's width
from max_k and the latency once, here.
"""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

from ..core import ParameterError, register
from .mv_common import (CTRL_STAGES, P_FIFO, P_MAX_K, P_VECTORS, P_XSTORE, MV_RTL, MVEngine,
                        nv_width)
from ..contract import FORMAT_Q4, FORMAT_Q4_Q8_1 as CONTRACT_Q4_Q8_1

BLOCK = 32                  # weights per Q4_1 block
#: Q4_1 rows with Q8_1 x blocks (contract.FORMAT_Q4_Q8_1, docs/activations.md section 2): the
#: lane computes it next to 0x04 on the same datapath (the controller's FORMAT_S)
FORMAT_Q4_Q8_1 = CONTRACT_Q4_Q8_1
GROUP = 64                  # weights per scale beat (two blocks)
#: lane stages (rtl/q4_lane.v): pair products, products (and the fp16 decode), sums of 4 and
#: P = d_w*d_x (M register), beat sums (P's P register), block sums and the multiplies'
#: operands, multiplies (M and P registers), shifts (3, in units of 2^-48), term sum, row
#: accumulator, sign/magnitude, leading one (3), normalise (2), mantissa/guard/sticky, round.
#: 18 before format 0x05: F3 (the shifts reach 58, not 29), H2 (the 103-bit accumulator in two
#: halves, not one 63-bit carry chain) and R3a (the leading one among 7 chunks, not 4) are the
#: three added (docs/activations.md section 3)
LANE_STAGES = ("A0 pair products", "A products, fp16 decode", "B sums of 4, d_w*d_x (M)",
               "C beat sums, d_w*d_x (P)", "D block sums, operands", "E1 d*S, m*X (M register)",
               "E2 P register", "F1 shifts by 0..3", "F2 shifts by 4s", "F3 shifts by 16s",
               "G term sum", "H accumulate (low half)", "H2 accumulate (high half)",
               "R1 magnitude", "R2 chunk flags",
               "R3a leading chunk per half", "R3 leading one, shift",
               "R4a normalise (shift by 0..15)", "R4b normalise (by 16s)",
               "R5 mantissa, guard, sticky", "R6 round")
#: the stage whose registers the multiplies take (D): the INT8 lane's beat sums of format 0x09
#: (in_s8) are due this many cycles after the beat's lane inputs (rtl/q4_lane.v)
D_STAGE = 1 + next(i for i, s in enumerate(LANE_STAGES) if s.startswith("D "))
SIG_MAX = 2047              # largest fp16 significand
SH_MAX = 29                 # largest fp16 exponent shift (value = sig * 2^(sh - 24))


def q4_acc_width(max_k: int) -> int:
    """Bits of the signed row accumulator (units of 2^-24) for rows of up to max_k weights:
    per block |d*S| + |m*X| <= 2047 * 2^29 * (32*15*128 + 32*128)."""
    blocks = -(-max_k // BLOCK)
    worst = blocks * SIG_MAX * 2 ** SH_MAX * (BLOCK * 15 * 128 + BLOCK * 128)
    return max(59, worst.bit_length() + 1)


#: bits of the lane's block term G (rtl/q4_lane.v GW): |A| + |B| < 2^98 for 0x05
LANE_TERM_W = 99


def q4_lane_acc_width(max_k: int, q8_0: bool = False) -> int:
    """Bits of the lane's signed row accumulator, in units of 2^-48, for rows of up to max_k
    weights in either format: 0x04 per block |d*S| + |m*X| <= 2047 * 2^(29+24) * (61,440 +
    4,096); 0x05 per block |d_w*d_x*S| + |m_w*s_x| <= 2047^2 * 2^58 * (61,440 + 1)
    (docs/activations.md section 3: 103 bits at max_k = 2048). With ``q8_0`` (the lane also
    finishes format 0x09, the INT8 lane's Q8_0 rows: mv-engine q4=true) per block
    |d_w*d_x*S_b| <= 2047^2 * 2^58 * 128*128*32 (106 bits at max_k = 2048). At least the block
    term's width (LANE_TERM_W)."""
    blocks = -(-max_k // BLOCK)
    w04 = blocks * SIG_MAX * 2 ** (SH_MAX + 24) * (BLOCK * 15 * 128 + BLOCK * 128)
    w05 = blocks * SIG_MAX ** 2 * 2 ** (2 * SH_MAX) * (BLOCK * 15 * 128 + 1)
    w09 = blocks * SIG_MAX ** 2 * 2 ** (2 * SH_MAX) * (BLOCK * 128 * 128) if q8_0 else 0
    return max(LANE_TERM_W, max(w04, w05, w09).bit_length() + 1)


@register
class Q4Engine(MVEngine):
    name = "q4-engine"
    top = "q4_engine"
    summary = ("Q4_1 matrix-vector engine: 4-bit codes with fp16 d and m per 32 weights, "
               "INT8 x (0x04) or Q8_1 x blocks (0x05), exact fixed-point sums, one float32 "
               "per row")
    wpb = 2
    format_code = FORMAT_Q4
    lane_module = "q4_lane"
    params = (P_MAX_K, P_FIFO, P_XSTORE, P_VECTORS)

    def lane_latency(self) -> int:
        return len(LANE_STAGES)

    def lane_doc(self) -> str:
        return ("16 4-bit x INT8 products (LUTs), beat and block sums, d*S and m*X (0x05: "
                "d_w*d_x, P*S and m*s_x) on 3 DSP48 per vector, "
                f"a {self.acc_w()}-bit exact row sum, rounded once to float32")

    def acc_w(self) -> int:
        return q4_lane_acc_width(self.p["max_k"])

    def __init__(self, values=None):
        self.fifo_explicit = "fifo_depth" in (values or {})
        super().__init__(values)

    def check(self) -> None:
        self.fit_fifo()
        if self.fifo_margin() + 2 > self.p["fifo_depth"]:
            raise ParameterError(
                f"design {self.name}: fifo_depth={self.p['fifo_depth']} is too small for "
                f"latency {self.latency()}; it needs more than {self.fifo_margin() + 2} entries")

    def context(self) -> Dict[str, Any]:
        return {
            "top": self.top, "summary": self.summary, "format_code": self.format_code,
            "lane_latency": self.lane_latency(), "lane_doc": self.lane_doc(),
            "ctrl_stages": CTRL_STAGES,
            "acc_w": self.acc_w(),
            "fifo_addr_w": self.p["fifo_depth"].bit_length() - 1,
            "fifo_margin": self.fifo_margin(), "x_bram": int(self.x_bram()),
            "vectors": self.p["vectors"], "nvw": nv_width(self.p["vectors"]),
            "format_s": FORMAT_Q4_Q8_1,
        }

    def rtl_files(self) -> List[str]:
        return list(MV_RTL) + ["q4_lane.v"]

    def templates(self) -> List[Tuple[str, str]]:
        return [("q4_engine.v.j2", f"{self.top}.v")]

    def extra_manifest(self) -> Dict[str, Any]:
        return {"lane_latency": self.lane_latency(), "format": self.format_code, "bytes": 8,
                "acc_w": self.acc_w(), "output": "float32", "vectors": self.p["vectors"],
                "block_formats": [FORMAT_Q4_Q8_1]}
