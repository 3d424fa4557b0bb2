"""Adder-tree generator: the shape of a pipelined signed adder tree, computed in Python.

The tree takes any number (>= 2) of signed leaves with known value ranges, adds them in pairs
level by level, and puts a register after the levels it is told to. Every node's width is the
exact width its worst-case range needs (ranges are tracked as integer intervals, not bit
counts). Templates render the result; the latency is the number of registered levels.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Sequence, Set, Tuple


def signed_width(lo: int, hi: int) -> int:
    """Smallest two's-complement width holding every integer in [lo, hi]."""
    if lo > hi:
        raise ValueError(f"empty range [{lo}, {hi}]")
    w = 1
    while not (-(1 << (w - 1)) <= lo and hi <= (1 << (w - 1)) - 1):
        w += 1
    return w


def sext(name: str, width: int, to: int) -> str:
    """Verilog text sign-extending signal `name` of `width` bits to `to` bits."""
    if to < width:
        raise ValueError(f"cannot sign-extend {name} from {width} to {to} bits")
    if to == width:
        return name
    if to == width + 1:
        return f"{{{name}[{width - 1}], {name}}}"
    return f"{{{{{to - width}{{{name}[{width - 1}]}}}}, {name}}}"


@dataclass
class Node:
    name: str
    lo: int
    hi: int
    a: str = ""          # operand names ("" for a leaf)
    b: str = ""          # second operand ("" for a pass-through)
    expr: str = ""       # Verilog expression, operands sign-extended to this node's width

    @property
    def width(self) -> int:
        return signed_width(self.lo, self.hi)


@dataclass
class Level:
    index: int           # 1-based level number
    registered: bool
    nodes: List[Node] = field(default_factory=list)
    carry_regs: List[Tuple[str, str]] = field(default_factory=list)  # (register, source)


@dataclass
class Tree:
    leaves: List[Node]
    levels: List[Level]
    carry_out: List[str] = field(default_factory=list)

    @property
    def out(self) -> Node:
        return self.levels[-1].nodes[0] if self.levels else self.leaves[0]

    @property
    def depth(self) -> int:
        return len(self.levels)

    @property
    def registers(self) -> int:
        return sum(1 for lv in self.levels if lv.registered)


def tree_depth(n: int) -> int:
    """Levels of a pairwise tree over n leaves."""
    if n < 1:
        raise ValueError("a tree needs at least one leaf")
    d = 0
    while n > 1:
        n = (n + 1) // 2
        d += 1
    return d


def build_tree(leaves: Sequence[Tuple[str, int, int]], registered_levels: Set[int],
               prefix: str = "t", carries: Sequence[str] = ()) -> Tree:
    """Build a pairwise tree over leaves given as (name, lo, hi).

    `carries` are 1-bit signals (value 0 or 1) to be added too: each adder takes one as its
    carry-in (free on a 7-series carry chain), level by level; carry bits still waiting are
    registered along with the tree, and any left over at the end are in `tree.carry_out`
    (a list of signal names, aligned with the tree output) for the next adder to take.
    """
    if len(leaves) < 1:
        raise ValueError("a tree needs at least one leaf")
    cur = [Node(n, lo, hi) for n, lo, hi in leaves]
    tree = Tree(leaves=list(cur), levels=[])
    pool = list(carries)
    lvl = 0
    while len(cur) > 1:
        lvl += 1
        level = Level(index=lvl, registered=lvl in registered_levels)
        nxt = []
        for i in range(0, len(cur), 2):
            name = f"{prefix}{lvl}_{i // 2}"
            if i + 1 < len(cur):
                a, b = cur[i], cur[i + 1]
                cin = pool.pop(0) if pool else ""
                node = Node(name, a.lo + b.lo, a.hi + b.hi + (1 if cin else 0), a.name, b.name)
                node.expr = f"{sext(a.name, a.width, node.width)} + {sext(b.name, b.width, node.width)}"
                if cin:
                    node.expr += f" + {zext1(cin, node.width)}"
            else:
                a = cur[i]
                node = Node(name, a.lo, a.hi, a.name, "")
                node.expr = sext(a.name, a.width, node.width)
            level.nodes.append(node)
            nxt.append(node)
        if level.registered and pool:
            # carry bits not yet taken wait in registers of their own
            delayed = []
            for j, c in enumerate(pool):
                dname = f"{prefix}{lvl}_c{j}"
                level.carry_regs.append((dname, c))
                delayed.append(dname)
            pool = delayed
        tree.levels.append(level)
        cur = nxt
    tree.carry_out = pool
    return tree


def zext1(name: str, to: int) -> str:
    """Verilog text zero-extending the 1-bit signal `name` to `to` bits."""
    if to == 1:
        return name
    return f"{{{{{to - 1}{{1'b0}}}}, {name}}}"


def spread_registers(levels: int, registers: int) -> Set[int]:
    """Levels after which to register when `registers` registers are spread over `levels`,
    the last one always at the output."""
    if registers < 0 or registers > levels:
        raise ValueError(f"cannot place {registers} registers in {levels} levels")
    return {-(-(i + 1) * levels // registers) for i in range(registers)}


def dsp_spread_registers(levels: int, registers: int) -> Set[int]:
    """:func:`spread_registers` for a tree over DSP48 products: with two registers or more the
    first is after level 1, so that synthesis can pack each pair of products and their sum into
    two DSP48E1 (cascade PCOUT -> PCIN, the sum in the second one's P register). Without it the
    sum leaves the DSP48E1 unregistered, 3.8 ns after the clock (docs/timing.md)."""
    if registers < 2 or levels < 2:
        return spread_registers(levels, registers)
    return {1} | {1 + lv for lv in spread_registers(levels - 1, registers - 1)}


def cadence_registers(levels: int, every: int) -> Set[int]:
    """A register after every `every` levels, and always after the last level."""
    if every < 1:
        raise ValueError("register cadence must be >= 1")
    regs = set(range(every, levels + 1, every))
    if levels:
        regs.add(levels)
    return regs
