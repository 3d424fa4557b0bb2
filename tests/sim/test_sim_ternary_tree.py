"""The ternary adder-tree generator in simulation: term counts, x widths and register cadences
swept; every sum compared with numpy (Verilator; two configurations on Icarus too)."""
import pytest

from generators.cosim import runner

CONFIGS = [
    ({"terms": 2, "x_width": 8, "reg_every": 1}, "verilator"),
    ({"terms": 3, "x_width": 4, "reg_every": 1}, "verilator"),
    ({"terms": 7, "x_width": 8, "reg_every": 2}, "verilator"),
    ({"terms": 40, "x_width": 8, "reg_every": 2}, "verilator"),
    pytest.param({"terms": 41, "x_width": 12, "reg_every": 3}, "verilator",
                 marks=pytest.mark.long),     # make test-long
    ({"terms": 100, "x_width": 8, "reg_every": 4}, "verilator"),
    ({"terms": 5, "x_width": 8, "reg_every": 1}, "icarus"),
    ({"terms": 40, "x_width": 8, "reg_every": 3}, "icarus"),
]


def _id(c):
    p, s = c.values if hasattr(c, "values") else c
    return f"{p['terms']}t-{p['x_width']}b-r{p['reg_every']}-{s}"


@pytest.mark.parametrize("params,sim", CONFIGS, ids=[_id(c) for c in CONFIGS])
def test_ternary_tree(params, sim):
    r = runner.run("ternary-tree", params, sim, "sim.ternary_tree.test_ternary_tree")
    assert r["tests"] == 1
