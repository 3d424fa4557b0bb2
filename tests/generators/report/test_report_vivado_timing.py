"""generators/report/vivado_timing.py: Vivado's report_timing_summary read path by path, and a
path re-timed with the model's numbers (the calibration's replay, docs/timing.md section 4).

The report below is written for this test in the layout of Vivado's post-route
``report_timing_summary`` (its "Max Delay Paths" and "Min Delay Paths" sections, the four
segments of a path's table, a cell whose numbers wrap to the next line); its numbers are made
up, so the expectations are the literal numbers written in it.
"""
import math

import pytest

from generators.report import timing as T
from generators.report import vivado_timing as vt

_CLOCK = """\
                         (clock clk rise edge)        0.000     0.000 r
    K17                                               0.000     0.000 r  clk (IN)
                         net (fo=0)                   0.000     0.000    clk
    K17                  IBUF (Prop_ibuf_I_O)         1.400     1.400 r  clk_IBUF_inst/O
                         net (fo=40, routed)          1.600     3.000    clk_IBUF_BUFG
    SLICE_X2Y10          FDRE                                         r  a_reg/C
"""

REPORT = f"""\
Timing Report

| Tool Version : Vivado v.2022.1 (lin64) Build 3526262 Mon Apr 18 15:47:01 MDT 2022
| Device       : 7z020-clg400
| Speed File   : -1  PRODUCTION 1.12 2019-11-22

Max Delay Paths
--------------------------------------------------------------------------------------
Slack (MET) :             3.000ns  (required time - arrival time)
  Source:                 a_reg/C
  Destination:            b_reg/D
  Path Group:             clk
  Path Type:              Setup (Max at Slow Process Corner)
  Requirement:            7.000ns  (clk rise@7.000ns - clk rise@0.000ns)
  Data Path Delay:        3.200ns  (logic 0.900ns (28.125%)  route 2.300ns (71.875%))
  Logic Levels:           2  (LUT4=1 LUT6=1)

    Location             Delay type                Incr(ns)  Path(ns)    Netlist Resource(s)
  -------------------------------------------------------------------    -------------------
{_CLOCK}  -------------------------------------------------------------------    -------------------
    SLICE_X2Y10          FDRE (Prop_fdre_C_Q)         0.456     3.456 r  a_reg/Q
                         net (fo=12, routed)          1.500     4.956    a
    SLICE_X3Y11          LUT4 (Prop_lut4_I2_O)        0.124     5.080 r  u1/O
                         net (fo=1, routed)           0.800     5.880    u1_n
    SLICE_X3Y12          LUT6 (Prop_lut6_I0_O)
                                                      0.320     6.200 r  u2/O
                         net (fo=1, routed)           0.000     6.200    u2_n
    SLICE_X3Y12          FDRE                                         r  b_reg/D
  -------------------------------------------------------------------    -------------------

{_CLOCK.replace('0.000     0.000 r', '7.000     7.000 r').replace('a_reg/C', 'b_reg/C')}\
                         clock pessimism              0.100    10.100
    SLICE_X3Y12          FDRE (Setup_fdre_C_D)        0.062    10.162    b_reg
  -------------------------------------------------------------------
                         required time                         10.162
                         arrival time                          -6.200
  -------------------------------------------------------------------
                         slack                                  3.962

Slack (inf) :             inf  (required time - arrival time)
  Source:                 in_port
  Destination:            c_reg/D
  Path Group:             (none)
  Path Type:              Setup (Max at Slow Process Corner)
  Data Path Delay:        1.000ns  (logic 1.000ns (100%)  route 0.000ns (0%))

Min Delay Paths
--------------------------------------------------------------------------------------
Slack (MET) :             0.100ns  (required time - arrival time)
  Source:                 a_reg/C
  Destination:            b_reg/D
  Path Group:             clk
  Path Type:              Hold (Min at Fast Process Corner)
  Requirement:            0.000ns  (clk rise@0.000ns - clk rise@0.000ns)
  Data Path Delay:        0.300ns  (logic 0.100ns (33%)  route 0.200ns (67%))
"""


def test_the_header_names_tool_device_and_speed():
    h = vt.report_header(REPORT)
    assert h["vivado"] == "Vivado v.2022.1"
    assert h["device"] == "7z020-clg400"
    assert h["speed"].startswith("-1")


def test_one_setup_path_cell_by_cell_and_net_by_net():
    paths = vt.parse_report(REPORT)
    # the unconstrained path (no Requirement) and the hold path are not read
    assert len(paths) == 1
    p = paths[0]
    assert p["kind"] == "setup" and p["group"] == "clk"
    assert p["start"] == "a_reg/C" and p["end"] == "b_reg/D"
    assert p["datapath_ns"] == 3.2 and p["requirement"] == 7.0 and p["levels"] == 2
    assert p["elements"] == [
        ["c", "FDRE", "Prop_fdre_C_Q", 0.456, "SLICE_X2Y10"],
        ["n", 12, 1.5],
        ["c", "LUT4", "Prop_lut4_I2_O", 0.124, "SLICE_X3Y11"],
        ["n", 1, 0.8],
        ["c", "LUT6", "Prop_lut6_I0_O", 0.32, "SLICE_X3Y12"],   # numbers on the next line
        ["n", 1, 0.0],
        ["p", "FDRE", "SLICE_X3Y12"],
    ]
    # Vivado prints the setup as its increment to the required time: the setup is minus that
    assert p["check"] == ["FDRE", "Setup_fdre_C_D", -0.062]
    assert vt.path_vivado_ns(p) == 3.138


def test_a_path_without_its_table_is_an_error():
    broken = REPORT.replace("Delay type", "Delay kind")
    with pytest.raises(ValueError, match="without its table"):
        vt.parse_report(broken)


def test_vivados_arcs_onto_the_models_keys():
    assert vt.cell_key("FDRE", "Prop_fdre_C_Q", 0.456) == "TCKO"
    assert vt.cell_key("FDCE", "Prop_fdce_C_Q", 0.456) == "TCKO"
    assert vt.cell_key("LUT6", "Prop_lut6_I5_O", 0.124) == "TILO"
    assert vt.cell_key("LUT3", "Prop_lut3_I1_O", 0.124) == "TILO3"
    assert vt.cell_key("CARRY4", "Prop_carry4_S[1]_CO[3]", 0.674) == "CARRY4:S1->CO3"
    assert vt.cell_key("CARRY4", "Prop_carry4_CI_O[1]", 0.334) == "CARRY4:CI0->O1"
    assert vt.cell_key("MUXF7", "Prop_muxf7_S_O", 0.3) == "F7_S"
    assert vt.cell_key("BUFG", "Prop_bufg_I_O", 0.096) is None
    # block RAM clock-to-out: the two output settings are 1.6 ns apart
    assert vt.cell_key("RAMB36E1", "Prop_ramb36e1_CLKARDCLK_DOADO[3]", 0.88) == "TRCKO_DO_REG"
    assert vt.cell_key("RAMB36E1", "Prop_ramb36e1_CLKARDCLK_DOADO[3]", 2.45) == "TRCKO_DO"
    assert vt.setup_key("FDRE", "Setup_fdre_C_CE", -0.2) == "TCECK"
    assert vt.setup_key("FDRE", "Setup_fdre_C_R", -0.5) == "TSRCK"
    assert vt.setup_key("RAMB18E1", "Setup_ramb18e1_CLKARDCLK_ADDRARDADDR[5]", 0.5) \
        == "TRCCK_ADDR"


def _elems(*items):
    return [list(i) for i in items]


def test_how_the_model_routes_vivados_nets():
    carry = _elems(("c", "CARRY4", "Prop_carry4_CI_CO[3]", 0.1, ""), ("n", 1, 0.0),
                   ("c", "CARRY4", "Prop_carry4_CI_CO[3]", 0.1, ""))
    assert vt.net_class(carry, 1) == "dedicated"
    # a CARRY4's DI takes a LUT5's O5 (or the bypass) inside the slice; a LUT6 arrives routed
    lut5 = _elems(("c", "LUT5", "Prop_lut5_I0_O", 0.1, ""), ("n", 1, 0.0),
                  ("c", "CARRY4", "Prop_carry4_DI[0]_CO[3]", 0.5, ""))
    lut6 = _elems(("c", "LUT6", "Prop_lut6_I0_O", 0.1, ""), ("n", 1, 0.3),
                  ("c", "CARRY4", "Prop_carry4_DI[0]_CO[3]", 0.5, ""))
    assert vt.net_class(lut5, 1) == "slice"
    assert vt.net_class(lut6, 1) == "general"
    into_ff = _elems(("c", "LUT2", "Prop_lut2_I0_O", 0.1, ""), ("n", 1, 0.0), ("p", "FDRE", ""))
    assert vt.net_class(into_ff, 1, end_d=True) == "slice"
    assert vt.net_class(into_ff, 1, end_d=False) == "general"     # to CE or R: routed
    into_bram = _elems(("c", "FDRE", "Prop_fdre_C_Q", 0.4, ""), ("n", 3, 1.0),
                       ("p", "RAMB36E1", ""))
    assert vt.net_class(into_bram, 1) == "hard"


def test_the_replay_is_the_models_sum_over_vivados_path():
    p = vt.parse_report(REPORT)[0]
    m = T.SOURCE_MODEL
    # worked out from docs/timing.md's table: TCKO 0.362, a net of 12 loads
    # 0.45 + 0.20 log2(12), LUT4 0.124, a routed fanout-1 net 0.45, LUT6 0.124, the LUT6 into
    # the flip-flop beside it 0, D setup 0
    expect = 0.362 + (0.45 + 0.20 * math.log2(12)) + 0.124 + 0.45 + 0.124 + 0.0 + 0.0
    r = vt.replay(p, m)
    assert r["missing"] == []
    assert r["ns"] == pytest.approx(expect, abs=1e-3)


def test_a_cell_the_model_has_no_number_for_is_named():
    p = vt.parse_report(REPORT)[0]
    q = dict(p, elements=[["c", "PS7", "Prop_ps7_MAXIGP0ACLK_MAXIGP0ARADDR[3]", 1.8, "PS7"]]
             + p["elements"][1:])
    r = vt.replay(q, T.SOURCE_MODEL)
    assert r["ns"] is None and r["missing"] == ["PS7 Prop_ps7_MAXIGP0ACLK_MAXIGP0ARADDR[3]"]
