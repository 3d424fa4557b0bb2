"""The runtime's layers import one way: every import of every module of generators/runtime (those
inside functions included) as an edge between modules, none running up a layer or closing a
cycle; imports at the top of modules only, the optional dependencies only through
generators/runtime/optional.py, cocotb only in the rtl backend's simulator side."""
import ast
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from generators.runtime import optional
from generators.runtime.engines.rtl import SIM_MODULE

import import_graph  # tests/ is on sys.path
from import_graph import check, imports

PKG = "generators.runtime"
ROOT = Path(__file__).resolve().parents[2] / "generators" / "runtime"
#: bottom to top; a module may import its own layer and those below it (the package's
#: __init__, the public API, sits above all of them and is imported by none)
LAYERS = ("errors", "optional", "host", "model", "engines", "decode", "cli", "bench")
RANK = {"errors": 0, "optional": 0, "host": 1, "model": 2, "engines": 3, "decode": 4, "cli": 5,
        "bench": 6}
API = len(LAYERS)


def modules() -> Dict[str, Path]:
    """{dotted name: file} of every module of the package."""
    return import_graph.modules(ROOT, PKG)


def layer(name: str) -> int:
    """The rank of a module of the package (its first component below generators.runtime)."""
    rest = name[len(PKG) + 1:].split(".")[0] if name != PKG else ""
    if rest == "":
        return API
    if rest not in RANK:
        raise KeyError(f"{name}: in no layer (add its subpackage to LAYERS)")
    return RANK[rest]


def edges() -> List[Tuple[str, str, int]]:
    """(importer, imported, line) between modules of the package."""
    return import_graph.edges(modules(), PKG)


def test_every_module_is_in_a_layer_with_a_docstring():
    for name, path in modules().items():
        layer(name)
        if path.name == "__init__.py" and name != PKG:
            doc = ast.get_docstring(ast.parse(path.read_text()))
            assert doc and "\n" not in doc.strip(), f"{path}: one line saying what it holds"


def test_imports_run_down_the_layers_without_cycles():
    graph = edges()
    assert len(graph) > 100                      # the walk sees the package
    assert check(graph, layer) == []


def test_imports_sit_at_the_top_and_optional_packages_go_through_optional():
    mods = modules()
    wrong = []
    for name, path in mods.items():
        for target, line, infn, top in imports(name, path, mods):
            if infn:
                wrong.append(f"{path.name}:{line} imports {target} inside a function")
            if top in optional.OPTIONAL:
                wrong.append(f"{path.name}:{line} imports the optional {target} (use "
                             f"generators.runtime.optional.module)")
    assert wrong == []


def test_the_checker_sees_an_up_edge_and_a_cycle(tmp_path):
    rank = {"a.host": 1, "a.model": 2, "a.engines": 3}.get
    assert check([("a.engines", "a.model", 1), ("a.model", "a.host", 2)], rank) == []
    up = check([("a.host", "a.model", 7)], rank)
    assert len(up) == 1 and "up from layer 1 to 2" in up[0]
    cyc = check([("a.model", "a.host", 1), ("a.host", "a.host2", 2), ("a.host2", "a.model", 3)],
                lambda n: 1)
    assert cyc == ["cycle: a.host -> a.host2 -> a.model -> a.host"]
    # a function-level import is an edge like any other
    src = "def f():\n    from .b import c\n"
    p = tmp_path / "x.py"
    p.write_text(src)
    got = imports("generators.runtime.host.x", p, {})
    assert got == [("generators.runtime.host.b", 2, True, "generators")]


def test_cocotb_only_in_the_simulator_module_which_no_module_imports():
    """engines/rtl_sim.py is the rtl backend's simulator side: cocotb loads it by name (the
    backend's SIM_MODULE) in the simulator's process, so it may import cocotb and no module of
    the package may import it."""
    mods = modules()
    assert SIM_MODULE in mods
    wrong = []
    for name, path in mods.items():
        for target, line, _, top in imports(name, path, mods):
            if top == "cocotb" and name != SIM_MODULE:
                wrong.append(f"{path.name}:{line} imports {target}")
            if target == SIM_MODULE:
                wrong.append(f"{path.name}:{line} imports the cocotb module {target}")
    assert wrong == []


def test_optional_names_only_optional_packages():
    with pytest.raises(ValueError):
        optional.module("numpy")


def test_no_private_name_is_imported_across_modules():
    """Neither ``from .x import _name`` nor ``x._name`` on a module of the package imported as
    ``x``: what another module needs is public."""
    mods = modules()
    wrong = []
    for name, path in mods.items():
        tree = ast.parse(path.read_text())
        local = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "")
                                                     .startswith(PKG)):
                for a in node.names:
                    if a.name.startswith("_") and not a.name.startswith("__"):
                        wrong.append(f"{path.name}:{node.lineno} imports {a.name}")
                    local.add(a.asname or a.name)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                    node.value.id in local and node.attr.startswith("_") and \
                    not node.attr.startswith("__"):
                wrong.append(f"{path.name}:{node.lineno} uses {node.value.id}.{node.attr}")
    assert wrong == []
