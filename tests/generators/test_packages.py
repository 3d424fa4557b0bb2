"""The package's parts import one way: every import of every module of generators (those inside
functions included) as an edge between its parts (a top-level module or a subpackage, the
package's ``__init__`` one part of its own), none running up a layer or closing a cycle. Within
generators/runtime, tests/runtime/test_layers.py checks the runtime's own layers."""
from pathlib import Path
from typing import List, Tuple

import pytest

import import_graph  # tests/ is on sys.path
from import_graph import check

PKG = "generators"
ROOT = Path(__file__).resolve().parents[2] / PKG
#: bottom to top; a part may import its own layer and those below it
LAYERS = (
    ("version", "contract", "results", "adder_tree", "attention_tables", "board_image"),
    ("packing", "q4", "q8", "golden", "host"),   # the formats, the numpy models, the board
    ("core",),                                   # Design, Param, rendering, the registry
    ("designs",),                                # every design; importing it registers them
    ("",),                                       # generators/__init__: the public API
    ("attention_error", "cosim", "formal"),      # the programs and plumbing over the designs
    ("report",),
    ("runtime",),
    ("__main__",),                               # the ternary-pynq command
)
RANK = {part: i for i, parts in enumerate(LAYERS) for part in parts}


def part(name: str) -> str:
    """The part of the package a module belongs to ("" for the package's __init__)."""
    return name[len(PKG) + 1:].split(".")[0] if name != PKG else ""


def layer(name: str) -> int:
    p = part(name)
    if p not in RANK:
        raise KeyError(f"{name}: in no layer (add {p!r} to LAYERS)")
    return RANK[p]


def part_edges() -> List[Tuple[str, str, int]]:
    """(importer, imported, line) between modules of different parts of the package."""
    return [(a, b, ln) for a, b, ln in import_graph.edges(import_graph.modules(ROOT, PKG), PKG)
            if part(a) != part(b)]


def problems(graph) -> List[str]:
    """The edges that run up a layer (named by module), then a cycle between parts (a cycle
    there even when no module imports its own importer)."""
    def node(name):
        return ".".join(filter(None, (PKG, part(name))))
    return check(graph, layer) + check([(node(a), node(b), ln) for a, b, ln in graph],
                                       lambda n: 0)


def test_every_part_is_in_one_layer():
    assert len(RANK) == sum(len(p) for p in LAYERS)
    for name in import_graph.modules(ROOT, PKG):
        layer(name)


def test_parts_import_down_the_layers_without_cycles():
    graph = part_edges()
    assert len(graph) > 100                      # the walk sees the package
    assert {part(a) for a, _, _ in graph} >= {"runtime", "report", "designs", "cosim", ""}
    assert problems(graph) == []


def test_the_check_sees_an_injected_up_edge_and_cycle():
    graph = part_edges()
    # the edge this test was written against: the cocotb module of the runtime's rtl backend,
    # once generators/cosim/runtime_top.py, imported the runtime, which imports cosim.runner
    up = problems(graph + [("generators.cosim.runtime_top", "generators.runtime.engines.regmodel",
                            35)])
    assert len(up) == 2, up
    assert up[0] == ("generators.cosim.runtime_top (line 35) imports "
                     "generators.runtime.engines.regmodel: up from layer "
                     f"{RANK['cosim']} to {RANK['runtime']}")
    assert up[1].startswith("cycle: ") and "generators.cosim" in up[1] and \
        "generators.runtime" in up[1]
    # core importing the designs inside a function (the registry's old way), or the package's
    # version from its __init__: both close a cycle and run up
    for target in ("generators.designs", "generators"):
        bad = problems(graph + [("generators.core", target, 1)])
        assert any("up from layer" in b for b in bad) and bad[-1].startswith("cycle: "), bad
    # a cycle within one layer is caught too
    same = problems(graph + [("generators.cosim.runner", "generators.formal", 1),
                             ("generators.formal", "generators.cosim.tools", 2)])
    assert same and same[-1].startswith("cycle: "), same


def test_a_new_part_must_be_placed():
    with pytest.raises(KeyError, match="in no layer"):
        layer("generators.newpart.x")
