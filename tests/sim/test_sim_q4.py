"""The Q4_1 engine (`q4-engine`) on Verilator and Icarus: every output word against
generators.golden.q4 (random shapes, extreme fp16 scales, bad frames, backpressure, reset)."""
import re

import pytest

from generators.cosim import runner

Q4 = "sim.q4_engine.test_q4_engine"
ALL_Q4 = ["test_random_shapes", "test_extreme_scales", "test_tready_duty_and_latency",
          "test_bad_frames", "test_output_stall", "test_reset_mid_frame",
          "test_reset_mid_frame_and_stall", "test_mixed_formats"]
#: format 0x05 (Q4_1 rows with Q8_1 x blocks, docs/activations.md), on every build of the lane
Q81 = ["test_q81_random_shapes", "test_q81_smollm_shapes", "test_q81_extreme_scales",
       "test_q81_bad_frames", "test_q81_mixed_with_0x04", "test_q81_tready_duty_and_latency"]
ALL_Q4 = ALL_Q4 + Q81
MV = "sim.mv_engine.test_mv_engine"
ALL_MV = ["test_random_shapes", "test_tready_duty_and_latency", "test_bad_frames",
          "test_output_stall", "test_reset_mid_frame", "test_reset_mid_frame_and_stall",
          "test_worst_case_sums"]
#: format 0x09 (Q8_0 rows with Q8_0 x blocks, docs/activations.md: the INT8 lane's products into
#: the Q4_1 lane's finisher), on every mv-engine q4=true build
Q80 = ["test_q80_random_shapes", "test_q80_smollm_shapes", "test_q80_extreme_scales",
       "test_q80_bad_frames", "test_q80_mixed_with_0x08", "test_q80_tready_duty_and_latency"]


# The lane on both simulators: the standalone q4-engine on Icarus, the three-lane mv-engine on
# Verilator (the two share the lane and the controller; each runs the whole Q4_1 suite).
# `make test` runs the q4-engine on Icarus and the three-lane mv-engine on Verilator; the other
# simulator of each, and the overlay with q4=true, are `long` (make test-long, run by CI after make test).
LONG = pytest.mark.long


@pytest.mark.parametrize("sim", ["icarus", pytest.param("verilator", marks=LONG)])
def test_q4_engine_suite(sim):
    r = runner.run("q4-engine", {"max_k": 300}, sim, Q4, ALL_Q4,
                   extra_env={"TB_BEATS": "2400" if sim == "verilator" else "1200"})
    assert r["tests"] == len(ALL_Q4)
    assert r["manifest"]["latency"] == 25   # 3 controller stages + 21 lane stages + 1
    assert r["manifest"]["block_formats"] == [5]


@pytest.mark.parametrize("sim", ["verilator", pytest.param("icarus", marks=LONG)])
def test_mv_engine_three_lanes(sim):
    """mv-engine q4=true: the Q4_1 suite (with INT8/ternary/0x09 frames mixed in) and the INT8,
    ternary and 0x09 suite, on one build."""
    params = {"max_k": 300, "q4": True}
    beats = "2400" if sim == "verilator" else "800"
    r = runner.run("mv-engine", params, sim, Q4, ALL_Q4, extra_env={"TB_BEATS": beats})
    assert r["manifest"]["formats"] == [8, 3, 4] and r["manifest"]["latency"] == 26   # + the select register
    assert r["manifest"]["block_formats"] == [5, 9]
    runner.run("mv-engine", params, sim, MV, ALL_MV + Q80, extra_env={"TB_BEATS": beats})


@pytest.mark.parametrize("sim", ["verilator", pytest.param("icarus", marks=LONG)])
def test_mv_engine_three_lanes_vectors(sim):
    """mv-engine q4=true at vectors 2 (docs/vectors.md): the Q4_1 suite and the INT8/ternary/
    0x09 suite with B-vector frames mixed with one-vector frames and bad frames of the vectors
    word: every lane's B results per row against the golden models, latency unchanged."""
    params = {"max_k": 150, "q4": True, "vectors": 2}
    beats = "1200" if sim == "verilator" else "600"
    r = runner.run("mv-engine", params, sim, Q4, ALL_Q4, extra_env={"TB_BEATS": beats})
    # + the entry register and the output slice (out_stages)
    assert r["manifest"]["vectors"] == 2 and r["manifest"]["latency"] == 28
    runner.run("mv-engine", params, sim, MV, ALL_MV + ["test_output_bound"] + Q80,
               extra_env={"TB_BEATS": beats})


@pytest.mark.parametrize("sim", ["verilator", pytest.param("icarus", marks=LONG)])
def test_q4_engine_q81_smollm(sim):
    """Format 0x05 at SmolLM2's K (576, 1536: max_k 1536), frames of 1 and 2 vectors: the 0x05
    tests, every word against generators.golden.q4."""
    r = runner.run("q4-engine", {"max_k": 1536, "vectors": 2}, sim, Q4,
                   ["test_q81_smollm_shapes", "test_q81_random_shapes", "test_q81_bad_frames",
                    "test_q81_tready_duty_and_latency"],
                   extra_env={"TB_BEATS": "3000" if sim == "verilator" else "1500"})
    assert r["manifest"]["latency"] == 27 and r["manifest"]["block_formats"] == [5]


@pytest.mark.parametrize("sim", ["icarus", pytest.param("verilator", marks=LONG)])
def test_mv_engine_q80_smollm(sim):
    """Format 0x09 at SmolLM2's K (576, 1536: max_k 1536) on the top's matrix engine (q4=true,
    vectors 2): frames of 1 and 2 vectors, random K, extremes, ties, bad frames, the latency;
    every word against generators.golden.mv."""
    r = runner.run("mv-engine", {"max_k": 1536, "q4": True, "vectors": 2}, sim, MV,
                   ["test_q80_smollm_shapes", "test_q80_random_shapes", "test_q80_bad_frames",
                    "test_q80_extreme_scales", "test_q80_tready_duty_and_latency"],
                   extra_env={"TB_BEATS": "3000" if sim == "verilator" else "1500"})
    assert r["manifest"]["latency"] == 28 and r["manifest"]["block_formats"] == [5, 9]


@LONG
@pytest.mark.parametrize("sim", ["verilator", "icarus"])
def test_q4_engine_vectors(sim):
    """The standalone Q4_1 engine at vectors 3."""
    r = runner.run("q4-engine", {"max_k": 200, "vectors": 3}, sim, Q4, ALL_Q4,
                   extra_env={"TB_BEATS": "1200"})
    assert r["manifest"]["vectors"] == 3


@LONG
def test_overlay_q4():
    """The PL top with q4=true: Q4_1, INT8 and ternary matrix frames on both ports mixed with
    attention frames, every word of both ports against generators.golden.overlay."""
    r = runner.run("overlay", {"max_k": 64, "max_context": 8, "q4": True}, "verilator",
                   "sim.overlay.test_overlay", testcase=["test_mixed_traffic", "test_bad_frames"],
                   extra_env={"TB_BEATS": "900"})
    assert r["manifest"]["matrix"]["formats"] == [8, 3, 4]


def _mutate(pattern, repl, fname):
    def f(gen_dir):
        p = gen_dir / fname
        text = p.read_text()
        new = re.sub(pattern, repl, text, count=1)
        assert new != text, f"{pattern!r} not found in {fname}"
        p.write_text(new)
    return f


@pytest.mark.parametrize("name,pattern,repl,fname,tests", [
    ("latency+1", r"localparam LANE_LAT = (\d+);", lambda m: f"localparam LANE_LAT = {int(m.group(1)) + 1};",
     "q4_engine.v", ["test_tready_duty_and_latency"]),
    ("round-half-up", r"r5_guard && \(r5_sticky \|\| r5_mant\[0\]\)", "r5_guard", "q4_lane.v",
     ["test_extreme_scales"]),
    # format 0x05: s_x's exponent read as d_x's; K % 32 not checked
    ("x-s-exponent", r"\{1'b0, c_sx\[4:0\]\}", "{1'b0, c_dx[4:0]}", "q4_lane.v",
     ["test_q81_random_shapes"]),
    ("k-mod-32", r"\(\(h_fmt_s \|\| h_fmt_sb\) && h_k_odd\)", "1'b0", "mv_stream_ctrl.v",
     ["test_q81_bad_frames"]),
], ids=lambda v: v if isinstance(v, str) and " " not in v and len(v) < 24 else "")
def test_q4_tests_can_fail(name, pattern, repl, fname, tests):
    """A latency one cycle off, ties rounded up, 0x05's s_x scaled by d_x's exponent, a 0x05
    frame's K not checked: the same tests fail on each (Icarus, a small build; docs/q4.md
    lists the other mutants tried by hand)."""
    with pytest.raises(AssertionError, match="cocotb tests failed"):
        runner.run("q4-engine", {"max_k": 300}, "icarus", Q4, tests, variant=name,
                   mutate=_mutate(pattern, repl, fname), extra_env={"TB_BEATS": "400"})


@pytest.mark.parametrize("name,pattern,repl,fname,test", [
    # the P*hi term's exponent sum 4 more, not 5 (hi = s >>> 5)
    ("hi-shift", r"6'd5 : 6'd0", "6'd4 : 6'd0", "q4_lane.v", "test_q80_random_shapes"),
    # an Inf/NaN scale flagged on every code beat of its block, not its last: a block cut short
    # by tlast would raise BAD_SCALE
    ("bad-every-beat", r"x9_r \? \(\(cidx\[1:0\] == 2'd3\) \|\| in_last\)", "x9_r ? 1'b1",
     "q4_lane.v", "test_q80_bad_frames"),
    # the row end after a scale beat compared with an INT8 beat of five banks (40 elements):
    # a last group of one block ends a beat early
    ("row-end-after-scale", r"h_fmt_sb \? R1THR_B", "h_fmt_sb ? R1THR_A", "mv_stream_ctrl.v",
     "test_q80_random_shapes"),
    # a 0x09 frame's K % 32 not checked
    ("k-mod-32-q80", r"\(h_fmt_s \|\| h_fmt_sb\) && h_k_odd", "h_fmt_s && h_k_odd",
     "mv_stream_ctrl.v", "test_q80_bad_frames"),
    # the scale store read at half the row's group count (the x table word of another group)
    ("x-table-address", r"assign xs_raddr = rgrp;", "assign xs_raddr = rgrp >> 1;",
     "mv_stream_ctrl.v", "test_q80_random_shapes"),
], ids=lambda v: v if isinstance(v, str) and " " not in v and len(v) < 24 else "")
def test_q80_tests_can_fail(name, pattern, repl, fname, test):
    """Format 0x09's mutants, one at a time: the engine as generated passes `test`, the mutant
    fails it on a word compared with generators.golden.mv (Icarus, the three-lane mv-engine at
    max_k 300)."""
    runner.run_mutant("mv-engine", {"max_k": 300, "q4": True}, "icarus", MV, test,
                      _mutate(pattern, repl, fname), name, extra_env={"TB_BEATS": "400"},
                      match=r"^word \d+: got 0x[0-9a-f]+ tlast=\w+, expected")
