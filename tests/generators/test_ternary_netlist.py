"""The ternary lane has no multiplier: in the generated Verilog (no `*` operator) and in the
synthesised 7-series netlist (no DSP48E1, no $mul left). The INT8 lane, synthesised the same
way, shows one DSP48E1 per multiply, so the check can fail."""
import re

import pytest

import generators
from generators.report.yosys import run_yosys, synth


def _code(text):
    text = re.sub(r"//.*", "", text)
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)


@pytest.mark.parametrize("params", [{}, {"bytes": 4, "reg_every": 1}, {"bytes": 16, "decode_bram": True}])
def test_no_multiply_operator_in_generated_lane(params, tmp_path):
    generators.render("ternary-engine", params, tmp_path)
    code = _code((tmp_path / "ternary_lane.v").read_text() + (tmp_path / "ternary_tree.v").read_text())
    code = code.replace("(*", "").replace("*)", "")          # synthesis attributes
    while re.search(r"\[[^\[\]]*\]", code):                  # indexes: genvar/constant arithmetic
        code = re.sub(r"\[[^\[\]]*\]", "", code)
    assert "*" not in code, "the ternary lane has a '*' operator"


def test_synthesised_lanes(tmp_path):
    tern = generators.render("ternary-engine", {}, tmp_path / "t")
    lane = [tmp_path / "t" / f for f in ("delay_line.v", "ternary_tree.v", "ternary_lane.v")]
    r = synth(lane, "ternary_lane", tmp_path / "ts")
    assert r["DSP48E1"] == 0, r
    # and no generic multiplier cell before technology mapping
    run_yosys("read_verilog delay_line.v ternary_tree.v ternary_lane.v\nhierarchy -top ternary_lane\n"
              "proc\nflatten\nopt\nwreduce\nalumacc\ntee -o cells.txt stat\n",
              tmp_path / "t")
    cells = (tmp_path / "t" / "cells.txt").read_text()
    assert "$mul" not in cells and "$macc" not in cells.replace("$macc_", ""), cells
    int8 = generators.render("int8-engine", {}, tmp_path / "i")
    r8 = synth([tmp_path / "i" / "int8_lane.v"], "int8_lane", tmp_path / "is")
    assert r8["DSP48E1"] == int8["parameters"]["bytes"], r8
