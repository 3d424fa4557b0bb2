"""cocotb simulations of the attention engine (attention-engine) on Verilator and Icarus.

Every output word is compared with the numpy golden model generators.golden.attention. Most
runs use max_context = 128 to keep the runtime modest; the PYNQ-Z1 configuration (2048) runs
the 512 and 2048 contexts and the cycle measurement on Verilator.
"""
import json
import os
import re
import xml.etree.ElementTree as ET

import pytest

import generators
from generators.cosim import runner

MOD = "sim.attention.test_attention"
ALL = ["test_contexts", "test_special_values", "test_bad_frames", "test_reset_mid_frame",
       "test_reset_mid_frame_and_stall",
       "test_output_stall", "test_cycles", "test_summary"]
SMALL = {"max_context": 128}
G1_D8 = {"heads_per_group": 1, "head_dim": 8, "macs": 8, "max_context": 40, "exp_depth": 512,
         "exp_steps_per_octave": 32}


# Icarus, the second simulator: make test-long (make test keeps to its 15 minutes)
@pytest.mark.parametrize("sim", ["verilator", pytest.param("icarus", marks=pytest.mark.long)])
def test_attention_full_suite(sim):
    r = runner.run("attention-engine", SMALL, sim, MOD, testcase=ALL)
    assert r["tests"] == len(ALL)


@pytest.mark.long   # the PYNQ-Z1 build (max_context 2048): make test-long
def test_attention_pynq_z1_max_context(tmp_path):
    """The default configuration (max_context 2048): contexts 1 .. 2048, cycles per frame."""
    out = tmp_path / "cycles.json"
    r = runner.run("attention-engine", {}, "verilator", MOD,
                   testcase=["test_contexts", "test_cycles"], extra_env={"TB_CYCLES": str(out)})
    assert r["tests"] == 2
    table = json.loads(out.read_text())
    assert [row["context"] for row in table["rows"]] == [1, 2, 63, 64, 65, 512, 2048]
    design = generators.build("attention-engine", {})
    assert table["latency"] == design.latency()
    _check_back_to_back(table, design)


def _check_back_to_back(table, design):
    """The cocotb test asserted every frame's cycles against the latency model; here the
    steady-state figures: the period, and s_axis_tready never low across back-to-back frames
    once a frame has at least latency - 2 beats."""
    tm = design.timing()
    for row in table["rows"]:
        beats = row["beats"]
        assert row["period_back_to_back"] == tm.period(beats)
        assert row["tready_low_per_frame"] == tm.period(beats) - beats
        if beats >= tm.to_finisher + tm.finisher_busy:
            assert row["tready_low_per_frame"] == 0, row


MACS48 = {"macs": 48, "max_context": 128}


@pytest.mark.long   # make test-long; make test runs 48 MACs inside the PYNQ-Z1 overlay
def test_attention_48_macs_full_suite(tmp_path):
    """16-byte beats (128-bit s_axis, 48 MACs per clock at G = 3): the full suite at max_context
    128 (contexts 1, 2, 63, 64, 65, 128), one beat per clock, latency as computed in Python."""
    out = tmp_path / "cycles.json"
    r = runner.run("attention-engine", MACS48, "verilator", MOD, testcase=ALL,
                   extra_env={"TB_CYCLES": str(out)})
    assert r["tests"] == len(ALL)
    assert r["manifest"]["bytes"] == 16 and r["manifest"]["macs"] == 48
    table = json.loads(out.read_text())
    assert [row["context"] for row in table["rows"]] == [1, 2, 63, 64, 65, 128]
    design = generators.build("attention-engine", MACS48)
    assert table["latency"] == design.latency()
    for row in table["rows"]:
        L = row["context"]
        assert row["beats"] == 2 + 12 + 2 * L * 4          # header, q, K and V rows (16 B)
        assert row["cycles_alone"] == row["beats"] + design.latency()
    _check_back_to_back(table, design)


@pytest.mark.long   # 48 MACs on Icarus: make test-long (make test runs it inside the overlay)
def test_attention_48_macs_icarus():
    tests = ["test_contexts", "test_bad_frames", "test_cycles"]
    r = runner.run("attention-engine", {"macs": 48, "max_context": 65}, "icarus", MOD,
                   testcase=tests)
    assert r["tests"] == len(tests)


# INT16 K and V (kv_bits 16, docs/attention.md): exp_width 21 and scale_frac_bits 16 (the widths
# golden's kv_widths_ok allows at max_context 2048), 8-byte beats (4 x G = 12 MACs) and 16-byte
# beats (8 x G = 24 MACs); a small max_context for the whole suite, the default 2048 for the
# contexts up to it and the cycle table
KV16 = {"kv_bits": 16, "exp_width": 21, "scale_frac_bits": 16}
KV16_8B = dict(KV16, macs=12, max_context=70)
KV16_16B = dict(KV16, macs=24, max_context=70)


@pytest.mark.parametrize("params", [KV16_8B, KV16_16B], ids=["kv16-8B", "kv16-16B"])
def test_attention_kv16_full_suite(params, tmp_path):
    """INT16 K and V: every test of the INT8 suite (random frames at the full 16-bit range,
    extremes, every bad frame incl. a KV format code of 0, back to back, backpressure, resets,
    the cycle table) against the golden model with kv_bits = 16; the latency from the model."""
    out = tmp_path / "cycles.json"
    r = runner.run("attention-engine", params, "verilator", MOD, testcase=ALL,
                   extra_env={"TB_CYCLES": str(out)})
    assert r["tests"] == len(ALL)
    design = generators.build("attention-engine", params)
    bb = params["macs"] // 3 * 2
    assert r["manifest"]["kv_bits"] == 16 and r["manifest"]["bytes"] == bb
    table = json.loads(out.read_text())
    assert table["latency"] == design.latency()
    rb = 2 * 64 // bb
    for row in table["rows"]:
        assert row["beats"] == -(-20 // bb) + 192 // bb + 2 * row["context"] * rb
        assert row["cycles_alone"] == row["beats"] + design.latency()
    _check_back_to_back(table, design)


@pytest.mark.long   # the INT16 engines at max_context 2048: make test-long
@pytest.mark.parametrize("macs", [12, 24], ids=["kv16-8B", "kv16-16B"])
def test_attention_kv16_max_context(macs, tmp_path):
    """INT16 K and V at the default max_context 2048: contexts 1 .. 2048, cycles per frame."""
    out = tmp_path / "cycles.json"
    params = dict(KV16, macs=macs)
    r = runner.run("attention-engine", params, "verilator", MOD,
                   testcase=["test_contexts", "test_cycles"], extra_env={"TB_CYCLES": str(out)})
    assert r["tests"] == 2
    table = json.loads(out.read_text())
    assert [row["context"] for row in table["rows"]] == [1, 2, 63, 64, 65, 512, 2048]
    design = generators.build("attention-engine", params)
    assert table["latency"] == design.latency()
    _check_back_to_back(table, design)


@pytest.mark.parametrize("params", [
    G1_D8,
    {"head_dim": 24, "max_context": 70, "exp_depth": 1000, "exp_width": 16,
     "exp_steps_per_octave": 64, "scale_frac_bits": 10, "fifo_depth": 128},
], ids=["G1-d8", "d24-small-table"])
@pytest.mark.long   # make test-long
def test_attention_variants(params):
    tests = ["test_contexts", "test_bad_frames", "test_cycles", "test_special_values"]
    r = runner.run("attention-engine", params, "verilator", MOD, testcase=tests)
    assert r["tests"] == len(tests)


@pytest.mark.parametrize("params,match", [
    ({"macs": 48, "head_dim": 24}, "multiple of 16"),
    ({"heads_per_group": 2, "macs": 32}, "at least 2 beats"),
    ({"macs": 48, "head_dim": 32}, "row beats"),
    ({"macs": 25}, "8 x heads_per_group"),
    ({"head_dim": 12}, "multiple of 8"),
    ({"heads_per_group": 4, "head_dim": 24, "macs": 32}, "row beats"),
    ({"fifo_depth": 32}, "fifo_depth"),
    ({"exp_width": 25}, "out of range"),
    ({"max_context": 0}, "out of range"),
    ({"kv_bits": 16, "macs": 12}, "use exp_width <= 21"),
    ({"kv_bits": 16, "macs": 12, "exp_width": 21}, "use scale_frac_bits <= 16"),
    ({"kv_bits": 16, "exp_width": 21, "scale_frac_bits": 16, "macs": 48},
     "4 x heads_per_group = 12"),
    ({"kv_bits": 12}, "one of 8, 16"),
])
def test_attention_bad_parameters(params, match, tmp_path):
    with pytest.raises(generators.ParameterError, match=match):
        generators.render("attention-engine", params, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def _results(xml_path):
    """(names of the tests run, names of the tests failed) from a cocotb results.xml."""
    root = ET.parse(xml_path).getroot()
    ran, failed = [], []
    for case in root.iter("testcase"):
        ran.append(case.get("name"))
        if case.find("failure") is not None or case.find("error") is not None:
            failed.append(case.get("name"))
    return ran, failed


def _run_results(params, test, mutate=None, variant=""):
    """Run one named cocotb test on Verilator, pass or fail; return its results.xml counts."""
    name = f"named-{variant or 'original'}"
    try:
        runner.run("attention-engine", params, "verilator", MOD, testcase=[test],
                   mutate=mutate, variant=variant, name=name)
    except AssertionError:
        pass
    xml = (runner.config_dir("attention-engine", params, variant) / "verilator"
           / f"run-{name}-1-{os.getpid()}" / "results.xml")
    assert xml.exists(), f"no results file {xml}: the simulation did not run"
    return _results(xml)


def _v_delay_minus_one(gen_dir):
    """The latency model's V delay one cycle short in the generated Verilog."""
    top = gen_dir / "attention_engine.v"
    text = top.read_text()
    pat = r"localparam V_DELAY  = (\d+);"
    m = re.search(pat, text)
    assert m and len(re.findall(pat, text)) == 1, "V_DELAY not found once in the generated file"
    design = generators.build("attention-engine", G1_D8)
    assert int(m.group(1)) == design.timing().v_delay
    top.write_text(text.replace(m.group(0), f"localparam V_DELAY  = {int(m.group(1)) - 1};"))


@pytest.mark.long   # a mutant of the weight unit's delay: make test-long
def test_v_delay_one_short_is_caught():
    """The write-up's bug class: the V delay (AttentionTiming.v_delay) one cycle shorter than
    the weight unit, so a row's weight is read before it is written. The original passes
    test_contexts; on the mutant test_contexts runs and fails (counted in results.xml, not by
    matching an exception text)."""
    ran, failed = _run_results(G1_D8, "test_contexts")
    assert ran == ["test_contexts"] and failed == [], (ran, failed)
    ran, failed = _run_results(G1_D8, "test_contexts", mutate=_v_delay_minus_one,
                               variant="vdelay-1")
    assert ran == ["test_contexts"] and failed == ["test_contexts"], (ran, failed)
