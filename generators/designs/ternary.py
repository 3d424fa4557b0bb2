"""`ternary-engine`: the write-up's Stage 4 engine, 5 trits per byte, no multiplier."""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

from ..adder_tree import Tree, build_tree, cadence_registers, tree_depth
from ..core import Design, Param, register
from .mv_common import P_BYTES, P_FIFO, P_MAX_K, P_VECTORS, P_XSTORE, MVEngine

TREE_MODULE = "ternary_tree"


#: register stages of the trit decode table in BRAM: its read register and its output register
#: (DOA_REG: the term select sees the RAMB18's registered output; docs/timing.md)
DECODE_BRAM_STAGES = 2


def ternary_tree(terms: int, x_width: int, reg_every: int, first: bool = False) -> Tree:
    """Term select + adder tree: `terms` signed x of `x_width` bits, each passed, zeroed or
    one's-complemented; the +1 of every negation rides on an adder's carry-in. A register
    every `reg_every` levels and at the output; with `first` (the engines' lanes) also after
    level 1: the term select is a LUT level of its own in front of each first-level adder, so
    that level and the next do not fit one 7.0 ns cycle by the calibrated timing model
    (docs/timing.md)."""
    lo, hi = -(1 << (x_width - 1)), (1 << (x_width - 1)) - 1
    leaves = [(f"t{e}", lo, hi) for e in range(terms)]
    carries = [f"c{e}" for e in range(terms)]
    regs = cadence_registers(tree_depth(terms), reg_every)
    if first:
        regs = regs | {1}
    tree = build_tree(leaves, regs, prefix="s", carries=carries)
    assert len(tree.carry_out) <= 1, "a pairwise tree has n-1 adders for n carries"
    return tree


@register
class TernaryTree(Design):
    """The ternary lane's term select and adder tree on its own, for any term count."""

    name = "ternary-tree"
    top = TREE_MODULE
    summary = "ternary term select + pipelined adder tree (the ternary lane without decode)"
    params = (
        Param("terms", int, 40, "number of ternary terms (40 for an 8-byte beat)", min=2, max=512),
        Param("x_width", int, 8, "bits of each signed x", min=2, max=16),
        Param("reg_every", int, 2, "adder levels between register stages (the output is always "
              "registered)", min=1, max=16),
    )

    def tree(self) -> Tree:
        return ternary_tree(self.p["terms"], self.p["x_width"], self.p["reg_every"])

    def latency(self) -> int:
        return self.tree().registers

    def context(self) -> Dict[str, Any]:
        t = self.tree()
        return {"tree": t, "sum_w": t.out.width, "tree_module": TREE_MODULE}

    def templates(self) -> List[Tuple[str, str]]:
        return [("ternary_tree.v.j2", f"{TREE_MODULE}.v")]

    def extra_manifest(self) -> Dict[str, Any]:
        t = self.tree()
        return {"sum_width": t.out.width, "sum_range": [t.out.lo, t.out.hi], "depth": t.depth}


def trit_decode_table() -> List[int]:
    """Byte -> 11-bit decode word: bit 10 bad byte, bits 9..5 negative, bits 4..0 nonzero.

    Weight i of a byte is base-3 digit i minus one (DESIGN.md section 3); 243..255 are bad
    and decode to five zero weights.
    """
    table = []
    for v in range(256):
        if v >= 243:
            table.append(1 << 10)
            continue
        nz = neg = 0
        for i in range(5):
            digit = (v // 3 ** i) % 3
            if digit != 1:
                nz |= 1 << i
            if digit == 0:
                neg |= 1 << i
        table.append((neg << 5) | nz)
    return table


@register
class TernaryEngine(MVEngine):
    name = "ternary-engine"
    top = "ternary_engine"
    summary = "ternary matrix-vector engine, 5 trits per byte, adder tree, no multipliers"
    wpb = 5
    format_code = 0x03
    lane_module = "ternary_lane"
    lane_template = "ternary_lane.v.j2"
    params = (
        P_MAX_K,
        P_BYTES,
        Param("reg_every", int, 2, "adder levels between register stages after the first "
              "level's register (the tree output is always registered)", min=1, max=8),
        Param("decode_bram", bool, True, "hold the trit decode table in BRAM (two more cycles: read and "
              "output registers, "
              "2 RAMB18 per 8 bytes) instead of LUTs (about 55 LUT per byte)"),
        P_FIFO,
        P_XSTORE,
        P_VECTORS,
    )

    @property
    def terms(self) -> int:
        return 5 * self.p["bytes"]

    def lane_tree(self):
        return ternary_tree(self.terms, 8, self.p["reg_every"], first=True)

    def lane_latency(self) -> int:
        return (DECODE_BRAM_STAGES if self.p["decode_bram"] else 0) + self.lane_tree().registers

    def lane_doc(self) -> str:
        t = self.lane_tree()
        return (f"trit decode ({f'BRAM, {DECODE_BRAM_STAGES} cycles' if self.p['decode_bram'] else 'LUT'}), "
                f"{self.terms}-term tree, {t.registers} register stage(s)")

    def context(self) -> Dict[str, Any]:
        ctx = super().context()
        tree = self.lane_tree()
        ctx.update(terms=self.terms, table=trit_decode_table(), tree_module=TREE_MODULE,
                   x_width=8, sum_w=tree.out.width)
        return ctx

    def templates(self):
        return [("ternary_tree.v.j2", f"{TREE_MODULE}.v")] + super().templates()

    def extra_manifest(self) -> Dict[str, Any]:
        m = super().extra_manifest()
        m["terms"] = self.terms
        return m
