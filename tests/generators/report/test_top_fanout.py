"""Issue 30 item 3: no net of the PL top beyond the loads the calibrated timing model has seen
routed (timing.COVERED_FANOUT, 258: docs/timing.md), after the copies Vivado's synthesis makes of
a register that carries MAX_FANOUT (UG901), as generators/report/timing.py `analyze` counts them.

The long test takes the top's analysis as tests/generators/report/test_timing_top.py does (yosys on the top: 4.5 to
11 min, cached in build/report/ by the sources' text); the fast one checks the counting itself on
a hand-made netlist.
"""
from pathlib import Path

import pytest

from generators.report import timing

REPO_OUT = Path(timing.__file__).resolve().parents[2] / "build" / "report"
#: the PL top as the bitstream carries it (the config named "top")
CONFIGS = [c for c in timing.built_configs() if c[2] == "top"]


@pytest.mark.long
@pytest.mark.parametrize("design,params,name", CONFIGS, ids=[c[2] for c in CONFIGS])
def test_no_net_of_the_top_beyond_the_calibration(design, params, name):
    t = timing.timing_config(design, params, REPO_OUT)["timing"]
    largest = t["max_fanout"]
    print(f"\n{name}: the ten largest nets (loads after the MAX_FANOUT copies):")
    for net, loads in largest:
        print(f"  {loads:6d}  {net}")
    assert len(largest) == 10 and all(loads > 0 for _, loads in largest)
    assert largest == sorted(largest, key=lambda nl: -nl[1])
    assert t["beyond_covered"] == [], (
        f"{name}: {len(t['beyond_covered'])} net(s) over {timing.COVERED_FANOUT} loads: "
        + ", ".join(f"{net} ({loads})" for net, loads in t["beyond_covered"]))
    assert largest[0][1] <= timing.COVERED_FANOUT


def _netlist():
    """A flip-flop `big` driving 259 flip-flops (one over the calibration's 258) and a flip-flop
    `cap` driving 300 whose net carries MAX_FANOUT = 24, as yosys writes them."""
    cells, bit = {}, [2]

    def new():
        bit[0] += 1
        return bit[0]

    def ff(name, d, q):
        cells[name] = {"type": "FDRE", "parameters": {},
                       "port_directions": {"C": "input", "CE": "input", "R": "input",
                                           "D": "input", "Q": "output"},
                       "connections": {"C": [2], "CE": ["1"], "R": ["0"], "D": [d], "Q": [q]}}

    big, cap = new(), new()
    ff("big_ff", "1", big)
    ff("cap_ff", "1", cap)
    for i in range(259):
        ff(f"lb{i}", big, new())
    for i in range(300):
        ff(f"lc{i}", cap, new())
    netnames = {"clk": {"bits": [2], "attributes": {}},
                "big": {"bits": [big], "attributes": {}},
                "capped": {"bits": [cap], "attributes": {
                    "max_fanout": "00000000000000000000000000011000"}}}     # 24
    return {"modules": {"t": {"attributes": {"top": "00000000000000000000000000000001"},
                              "ports": {"clk": {"direction": "input", "bits": [2]}},
                              "cells": cells, "netnames": netnames}}}


def test_max_fanout_caps_a_net_and_beyond_covered_lists_the_rest():
    assert timing.COVERED_FANOUT == 258
    res = timing.analyze(_netlist(), "t")
    # capped: 300 loads, Vivado's copies drive at most 24 each; big: 259 > 258, listed
    assert res["replicated"] == [["cap_ff.Q[0]", 300, 24]]
    assert res["max_fanout"] == [["big", 259], ["capped", 24]]
    assert res["beyond_covered"] == [["big", 259]]
