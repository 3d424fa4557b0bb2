"""The timing model of generators/report/timing.py (docs/timing.md) on tiny hand-made netlists.

Every expected delay below is worked out by hand from the model's table (docs/timing.md,
section 2: the Zynq-7000 -1 figures) and its routing rule, written here as literal numbers: a
change of a table entry or of the traversal shows up as a difference, not as a re-computed
expectation. Netlists are yosys `write_json` shaped: cells with type, parameters,
port_directions and connections (net bits are integers, 2..).
"""
import math

import pytest

from generators.report import timing as T

# the numbers of docs/timing.md section 2, as the hand calculations below use them (ns)
TCKO, TILO, TCECK, TSRCK = 0.362, 0.124, 0.109, 0.404
ROUTE1 = 0.45          # a net of fanout 1 (general interconnect)
PER_DOUBLING = 0.20
HARD = 0.25            # a net that enters or leaves a BRAM or DSP48E1


def route(fanout, hard=False):
    return ROUTE1 + PER_DOUBLING * math.log2(fanout) + (HARD if hard else 0.0)


class Net:
    """Builds a one-module netlist: cells are added with their port connections."""

    IN, OUT = "input", "output"

    def __init__(self):
        self.cells = {}
        self.ports = {}
        self.next_bit = 2

    def bit(self):
        b = self.next_bit
        self.next_bit += 1
        return b

    def cell(self, name, typ, ins, outs, **params):
        conn, dirs = {}, {}
        for p, bits in ins.items():
            conn[p] = bits if isinstance(bits, list) else [bits]
            dirs[p] = "input"
        for p, bits in outs.items():
            conn[p] = bits if isinstance(bits, list) else [bits]
            dirs[p] = "output"
        self.cells[name] = {"type": typ, "parameters": {k: str(v) for k, v in params.items()},
                            "port_directions": dirs, "connections": conn}

    def ff(self, name, d, q, clk):
        self.cell(name, "FDRE", {"C": clk, "CE": "1", "R": "0", "D": d}, {"Q": q})

    def port(self, name, direction, bits):
        self.ports[name] = {"direction": direction, "bits": bits}

    def json(self):
        return {"modules": {"t": {"attributes": {"top": "00000000000000000000000000000001"},
                                  "ports": self.ports, "cells": self.cells, "netnames": {}}}}


def worst(n, key="reg2reg"):
    return T.analyze(n.json(), "t")[key]["worst_ns"]


@pytest.fixture
def n():
    net = Net()
    net.clk = net.bit()
    net.port("clk", "input", [net.clk])
    return net


def test_route_rule():
    assert T.route_delay(1) == pytest.approx(0.45)
    assert T.route_delay(2) == pytest.approx(0.65)
    assert T.route_delay(1024) == pytest.approx(0.45 + 2.0)
    assert T.route_delay(3, hard=True) == pytest.approx(0.45 + 0.2 * math.log2(3) + 0.25)


def test_ff_lut_ff_in_one_slice(n):
    a, b, c = n.bit(), n.bit(), n.bit()
    n.ff("r0", "1", a, n.clk)
    n.cell("l", "LUT2", {"I0": a, "I1": a}, {"O": b})
    n.ff("r1", b, c, n.clk)
    # the LUT drives only the flip-flop beside it: no route after it
    assert worst(n) == pytest.approx(TCKO + route(2) + TILO, abs=1e-3)


def test_fanout_grows_the_route(n):
    a, c = n.bit(), n.bit()
    n.ff("r0", "1", a, n.clk)
    outs = []
    for i in range(8):
        o = n.bit()
        n.cell(f"l{i}", "LUT1", {"I0": a}, {"O": o})
        outs.append(o)
    o2 = n.bit()
    n.cell("l9", "LUT1", {"I0": outs[0]}, {"O": o2})
    n.cell("ce", "FDRE", {"C": n.clk, "CE": o2, "R": "0", "D": "1"}, {"Q": c})
    # r0 drives 8 LUTs; l0 -> l9 fanout 1 (LUT to LUT is general routing); l9 -> CE
    exp = TCKO + route(8) + TILO + route(1) + TILO + route(1) + TCECK
    assert worst(n) == pytest.approx(exp, abs=1e-3)


def test_carry_chain(n):
    a, s, co, o3, q = n.bit(), n.bit(), n.bit(), n.bit(), n.bit()
    n.ff("r0", "1", a, n.clk)
    n.cell("l", "LUT2", {"I0": a, "I1": a}, {"O": s})
    c0 = [n.bit() for _ in range(4)]
    n.cell("c0", "CARRY4", {"CI": "0", "CYINIT": "0", "S": [s, "0", "0", "0"],
                            "DI": ["0", "0", "0", "0"]},
           {"CO": [c0[0], c0[1], c0[2], co], "O": [n.bit() for _ in range(4)]})
    o1 = [n.bit(), n.bit(), n.bit(), o3]
    n.cell("c1", "CARRY4", {"CI": co, "CYINIT": "0", "S": ["0", "0", "0", "0"],
                            "DI": ["0", "0", "0", "0"]},
           {"CO": [n.bit() for _ in range(4)], "O": o1})
    n.ff("r1", o3, q, n.clk)
    # LUT -> S0 in its slice, S0 -> CO3 0.508, CO3 -> next CI dedicated, CI -> O3 0.315,
    # O3 -> the flip-flop beside it
    assert worst(n) == pytest.approx(TCKO + route(2) + TILO + 0.508 + 0.315, abs=1e-3)


@pytest.mark.parametrize("doa_reg,tco", [(0, 2.46), (1, 0.89)])
def test_block_ram_output_with_and_without_its_register(n, doa_reg, tco):
    addr, do, x, q = n.bit(), n.bit(), n.bit(), n.bit()
    n.ff("ra", "1", addr, n.clk)
    n.cell("bram", "RAMB18E1", {"CLKARDCLK": n.clk, "CLKBWRCLK": n.clk, "ADDRARDADDR": [addr]},
           {"DOADO": [do]}, DOA_REG=doa_reg, DOB_REG=0)
    n.cell("l", "LUT1", {"I0": do}, {"O": x})
    n.ff("rq", x, q, n.clk)
    paths = T.analyze(n.json(), "t")["reg2reg"]["paths"]
    by_end = {p["end_type"]: p["ns"] for p in paths}
    # DO -> LUT (a net leaving the BRAM), LUT -> FF in its slice
    assert by_end["FDRE"] == pytest.approx(tco + route(1, hard=True) + TILO, abs=1e-3)
    # the address register into the BRAM: TRCCK_ADDRA 0.57
    assert by_end["RAMB18E1"] == pytest.approx(TCKO + route(1, hard=True) + 0.57, abs=1e-3)


@pytest.mark.parametrize("regs,setup", [
    (dict(AREG=1, BREG=1, MREG=1, PREG=1), 0.362),      # TDSPDCK_A_AREG
    (dict(AREG=0, BREG=1, MREG=1, PREG=1), 1.928),      # TDSPDCK_A_MREG_MULT
    (dict(AREG=0, BREG=1, MREG=0, PREG=1), 3.722),      # TDSPDCK_A_PREG_MULT
])
def test_dsp_a_input_setup_by_register(n, regs, setup):
    a, p = n.bit(), n.bit()
    n.ff("ra", "1", a, n.clk)
    n.cell("dsp", "DSP48E1", {"CLK": n.clk, "A": [a], "B": ["0"]}, {"P": [p]},
           USE_MULT="MULTIPLY", **regs)
    assert worst(n) == pytest.approx(TCKO + route(1, hard=True) + setup, abs=1e-3)


def test_dsp_without_registers_is_combinational(n):
    a, p, q = n.bit(), n.bit(), n.bit()
    n.ff("ra", "1", a, n.clk)
    n.cell("dsp", "DSP48E1", {"CLK": n.clk, "A": [a], "B": ["0"]}, {"P": [p]},
           USE_MULT="MULTIPLY", AREG=0, BREG=0, MREG=0, PREG=0, CREG=0, OPMODEREG=1,
           ALUMODEREG=1, CARRYINREG=1, INMODEREG=1)
    n.ff("rq", p, q, n.clk)
    # A -> P through the multiplier (TDSPDO_A_P_MULT 3.841), out of the DSP into the FF
    exp = TCKO + route(1, hard=True) + 3.841 + route(1, hard=True)
    assert worst(n) == pytest.approx(exp, abs=1e-3)


def test_dsp_cascade_is_dedicated(n):
    pc, p2 = n.bit(), n.bit()
    n.cell("d1", "DSP48E1", {"CLK": n.clk, "A": ["0"], "B": ["0"]}, {"PCOUT": [pc]},
           USE_MULT="MULTIPLY", AREG=1, BREG=1, MREG=1, PREG=0)
    n.cell("d2", "DSP48E1", {"CLK": n.clk, "A": ["0"], "B": ["0"], "PCIN": [pc]}, {"P": [p2]},
           USE_MULT="MULTIPLY", AREG=1, BREG=1, MREG=1, PREG=1)
    # clock -> P from MREG (2.305), PCOUT -> PCIN dedicated, setup into PREG 1.400
    assert worst(n) == pytest.approx(2.305 + 1.400, abs=1e-3)


def test_lutram_read_write_and_write_through(n):
    a, do, q, d = n.bit(), n.bit(), n.bit(), n.bit()
    n.ff("ra", "1", a, n.clk)
    n.ff("rd", "1", d, n.clk)
    n.cell("ram", "RAM32M", {"WCLK": n.clk, "WE": "1", "ADDRA": [a, "0", "0", "0", "0"],
                             "ADDRD": ["0"] * 5, "DIA": [d, "0"]}, {"DOA": [do, n.bit()]})
    n.ff("rq", do, q, n.clk)
    ends = {p["end_type"]: p for p in T.analyze(n.json(), "t", n_paths=10)["reg2reg"]["paths"]}
    # read: address -> DOA is a LUT read (TILO); the later of it and the write-through (WCLK ->
    # DOA 1.153) reaches the FF
    read = TCKO + route(1) + TILO + route(1)
    through = 1.153 + route(1)
    assert ends["FDRE"]["ns"] == pytest.approx(max(read, through), abs=1e-3)
    # write data: DI setup 0.453
    assert ends["RAM32M"]["ns"] == pytest.approx(TCKO + route(1) + 0.453, abs=1e-3)


def test_srl_output_is_slow(n):
    q, x = n.bit(), n.bit()
    n.cell("srl", "SRL16E", {"CLK": n.clk, "CE": "1", "D": "0", "A0": "1", "A1": "1",
                             "A2": "0", "A3": "0"}, {"Q": q})
    n.ff("rq", q, x, n.clk)
    # SRL clock -> Q 1.472, then a general net
    assert worst(n) == pytest.approx(1.472 + route(1), abs=1e-3)


def test_muxf7_in_its_slice(n):
    a, l0, o, q = n.bit(), n.bit(), n.bit(), n.bit()
    n.ff("ra", "1", a, n.clk)
    n.cell("l", "LUT1", {"I0": a}, {"O": l0})
    n.cell("m", "MUXF7", {"I0": l0, "I1": "0", "S": "0"}, {"O": o})
    n.ff("rq", o, q, n.clk)
    # LUT -> F7 data input 0.225, both in the slice of the flip-flop
    assert worst(n) == pytest.approx(TCKO + route(1) + TILO + 0.225, abs=1e-3)


def test_ports_count_only_in_io(n):
    i, x, q = n.bit(), n.bit(), n.bit()
    n.port("din", "input", [i])
    n.cell("l", "LUT1", {"I0": i}, {"O": x})
    n.ff("rq", x, q, n.clk)
    n.port("dout", "output", [q])
    res = T.analyze(n.json(), "t")
    assert res["reg2reg"]["worst_ns"] == 0.0                      # nothing register to register
    # io: the input port as a register outside (TCKO), and the register to the output port
    assert res["io"]["worst_ns"] == pytest.approx(TCKO + route(1) + TILO, abs=1e-3)


def test_reset_port_net_and_its_worst_path(n):
    """`reset`: the raw aresetn's loads and the worst path from that port alone (docs/timing.md
    "Reset"): aresetn -> the registered reset's D and a LUT2 (with the registered reset) into
    a flag's R pin; a longer path from another input port is not the reset's."""
    rst, rq, r, q, d, q2 = (n.bit() for _ in range(6))
    n.port("aresetn", "input", [rst])
    n.ff("rst_n", rst, rq, n.clk)
    n.cell("clr", "LUT2", {"I0": rst, "I1": rq}, {"O": r})
    n.cell("vld", "FDRE", {"C": n.clk, "CE": "1", "R": r, "D": "1"}, {"Q": q})
    n.port("din", "input", [d])
    prev = d
    for i in range(5):                        # 5 LUT levels from din
        o = n.bit()
        n.cell(f"l{i}", "LUT1", {"I0": prev}, {"O": o})
        prev = o
    n.ff("rd", prev, q2, n.clk)
    res = T.analyze(n.json(), "t")
    rs = res["reset"]
    assert (rs["port"], rs["fanout"], rs["endpoints"]) == ("aresetn", 2, 2)
    assert rs["route_ns"] == pytest.approx(route(2), abs=1e-3)
    # port (TCKO) -> net of 2 loads -> LUT2 -> its own net into R (not a D pin: routed) -> TSRCK
    assert rs["worst_ns"] == pytest.approx(TCKO + route(2) + TILO + route(1) + TSRCK, abs=1e-3)
    assert rs["end_label"] == "vld" and rs["luts"] == 1
    assert res["io"]["worst_ns"] > rs["worst_ns"] + 0.1    # din's path is longer, not counted


def test_combinational_loop_terminates(n):
    a, b, c = n.bit(), n.bit(), n.bit()
    n.ff("ra", "1", a, n.clk)
    n.cell("l1", "LUT2", {"I0": a, "I1": c}, {"O": b})
    n.cell("l2", "LUT1", {"I0": b}, {"O": c})
    q = n.bit()
    n.ff("rq", b, q, n.clk)
    assert worst(n) > 0


def test_over_budget_lists_end_cells_by_register(n):
    a = n.bit()
    n.ff("ra", "1", a, n.clk)
    prev = a
    for i in range(12):                       # 12 LUT levels: over 6 ns
        o = n.bit()
        n.cell(f"l{i}", "LUT1", {"I0": prev}, {"O": o})
        prev = o
    q = n.bit()
    n.ff("rq", prev, q, n.clk)
    res = T.analyze(n.json(), "t")["reg2reg"]
    # ra -> l0 and l0 .. l11: 12 general nets; l11 sits beside rq
    exp = TCKO + 12 * TILO + 12 * route(1)
    assert res["worst_ns"] == pytest.approx(exp, abs=1e-3)
    assert list(res["over_budget"]) == ["rq"]
    assert res["paths"][0]["luts"] == 12


def test_every_number_has_a_source():
    for key, d in T.DELAYS.items():
        assert d.source in T.SOURCES, key
        assert d.ns >= 0 and d.name
    assert T.CLOCK_NS == 7.0 and T.BUDGET_NS == 6.0


def test_max_fanout_is_routed_as_vivado_replicates_it(n):
    a = n.bit()
    n.ff("ra", "1", a, n.clk)
    for i in range(64):
        n.ff(f"r{i}", a, n.bit(), n.clk)
    plain = T.analyze(n.json(), "t")["reg2reg"]["worst_ns"]
    assert plain == pytest.approx(TCKO + route(64), abs=1e-3)
    j = n.json()
    j["modules"]["t"]["netnames"] = {"a": {"bits": [a], "attributes": {
        "max_fanout": "00000000000000000000000000010000"}}}          # 16
    res = T.analyze(j, "t")
    # Vivado's synthesis makes copies of ra with at most 16 loads each
    assert res["reg2reg"]["worst_ns"] == pytest.approx(TCKO + route(16), abs=1e-3)
    assert res["replicated"] == [["ra.Q[0]", 64, 16]]


def test_docs_carry_the_models_table():
    """docs/timing.md section 3 is the code's table (generators.report.timing.delay_table)."""
    from pathlib import Path
    doc = (Path(__file__).resolve().parents[3] / "docs" / "timing.md").read_text()
    start = doc.index("<!-- delay table: generators.report.timing.delay_table() -->")
    end = doc.index("<!-- end of the delay table -->")
    assert doc[start:end].split("\n", 1)[1].strip() == T.delay_table()
    assert f"{T.DELAYS['ROUTE_BASE'].ns:g} ns + {T.DELAYS['ROUTE_PER_DOUBLING'].ns:.2f} ns x " \
           f"log2(fanout) [+ {T.DELAYS['ROUTE_HARD'].ns:.2f} ns" in doc


def test_recorded_figures_of_the_top():
    """What make timing records for the top, from an analysis result (no yosys)."""
    path = dict(ns=5.5, start="a", end="b.D[0]", start_label="a", end_label="b", luts=2,
                carry4=0)
    t = {"reg2reg": {"worst_ns": 5.5, "paths": [path], "over_budget": {}, "endpoints": 2},
         "io": {"worst_ns": 4.0}, "max_fanout": [["core.fh", 1024], ["x", 3]],
         "replicated": [["r", 100, 24], ["s", 48, 48]]}
    figs = {f["key"]: f for f in T.figures([dict(name="top", params={}, timing=t)])}
    assert figs["timing.top.worst_ns"]["value"] == 5.5
    assert figs["timing.top.path1"]["context"]["end"] == "b.D[0]"
    assert figs["timing.top.max_fanout"]["value"] == 1024
    assert "core.fh" in figs["timing.top.max_fanout"]["what"]
    assert "2.45 ns" in figs["timing.top.max_fanout"]["what"]        # 0.45 + 0.20 x 10
    assert figs["timing.top.replicated_ffs"]["value"] == 4 + 0        # ceil(100/24) - 1
