"""cocotb simulations of every matrix-vector design and the probe, on Verilator and Icarus.

Each case renders a parameter set, builds it once per simulator (build/sim/, reused) and runs
the cocotb tests of sim/<engine>/; every output word is compared with the numpy golden model.
"""
import re

import pytest

from generators.cosim import runner
from generators.designs.mv_common import CTRL_STAGES

SIMS = ["verilator", "icarus"]
MV = "sim.mv_engine.test_mv_engine"
PROBE = "sim.probe.test_probe"
ALL_MV = ["test_random_shapes", "test_tready_duty_and_latency", "test_bad_frames",
          "test_output_stall", "test_reset_mid_frame", "test_reset_mid_frame_and_stall",
          "test_worst_case_sums"]
QUICK_MV = ["test_random_shapes", "test_tready_duty_and_latency", "test_worst_case_sums"]


def run(design, params, sim, module, tests, beats=3000, **kw):
    return runner.run(design, params, sim, module, testcase=tests,
                      extra_env={"TB_BEATS": str(beats)}, **kw)


# ------------------------------------------------------------ the full suite, both simulators
@pytest.mark.parametrize("sim", SIMS)
@pytest.mark.parametrize("design,params", [
    ("int8-engine", {"max_k": 300}),
    ("ternary-engine", {"max_k": 700}),
    ("mv-engine", {"max_k": 300}),
], ids=["int8", "ternary", "dual"])
def test_mv_full_suite(design, params, sim):
    r = run(design, params, sim, MV, ALL_MV, beats=4000 if sim == "verilator" else 2500)
    assert r["tests"] == len(ALL_MV)


# beat widths are swept on Verilator; Icarus runs the PYNQ-Z1 width
@pytest.mark.parametrize("sim,bytes_", [("verilator", 4), ("verilator", 8), ("verilator", 16),
                                        ("icarus", 8)])
def test_probe(sim, bytes_):
    r = run("probe", {"bytes": bytes_}, sim, PROBE, None)
    assert r["tests"] == 7
    assert r["manifest"]["latency"] == 1   # README: 1 cycle; the benches assert it to the cycle


# ------------------------------------------------------------ every legal INT8 pipeline depth
@pytest.mark.parametrize("pipeline,sim", [
    pytest.param(p, s, id=f"{p}-{s}",
                 # Icarus runs the PYNQ-Z1 depth in make test, every depth in make test-long
                 marks=[pytest.mark.long] if (s == "icarus" and p != 5) else [])
    for p in (3, 4, 5, 6) for s in SIMS])
def test_int8_pipeline_depths(pipeline, sim):
    r = run("int8-engine", {"max_k": 96, "pipeline": pipeline}, sim, MV, QUICK_MV, beats=1500)
    assert r["manifest"]["latency"] == pipeline + CTRL_STAGES - 1   # + input reg, x output reg


@pytest.mark.parametrize("params", [
    pytest.param({"bytes": 4, "pipeline": 5, "max_k": 64}, id="4B-p5"),
    pytest.param({"bytes": 16, "pipeline": 7, "max_k": 200}, id="16B-p7", marks=pytest.mark.long),
])
def test_int8_widths(params):
    r = run("int8-engine", params, "verilator", MV, ALL_MV, beats=2000)
    assert r["tests"] == len(ALL_MV)


# ------------------------------------------------------------ ternary term counts and cadences
#: (id, parameters, simulators, long): the `long` ones run in `make test-long` (the default
#: run keeps one cadence on both simulators and the 4-byte width, within its 15-minute budget).
TERNARY_VARIANTS = [
    ("8B-r1-lut", {"bytes": 8, "reg_every": 1, "decode_bram": False, "max_k": 200}, SIMS, False),
    ("8B-r3-bram", {"bytes": 8, "reg_every": 3, "max_k": 333, "x_store": "bram"}, SIMS, True),
    ("8B-r8-lut", {"bytes": 8, "reg_every": 8, "decode_bram": False, "max_k": 81}, ["verilator"],
     True),
    ("4B-r2", {"bytes": 4, "reg_every": 2, "max_k": 101}, ["verilator"], False),
    ("16B-r2-lutram", {"bytes": 16, "reg_every": 2, "max_k": 640, "x_store": "lutram"},
     ["verilator"], True),
]


@pytest.mark.parametrize("params,sim", [
    pytest.param(p, s, id=f"{n}-{s}", marks=[pytest.mark.long] if long_ else [])
    for n, p, sims, long_ in TERNARY_VARIANTS for s in sims])
def test_ternary_variants(params, sim):
    tests = ALL_MV if sim == "verilator" else QUICK_MV
    r = run("ternary-engine", params, sim, MV, tests, beats=2000)
    assert r["tests"] == len(tests)


# ------------------------------------------------------------ the tests can fail
def _off_by_one(gen_dir):
    top = gen_dir / "int8_engine.v"
    text = top.read_text()
    m = re.search(r"localparam LANE_LAT = (\d+);", text)
    top.write_text(text.replace(m.group(0), f"localparam LANE_LAT = {int(m.group(1)) + 1};"))


def test_latency_off_by_one_is_caught():
    """The write-up's bug: a sideband delay one cycle off. The original passes
    test_random_shapes; on the mutant that same test runs and fails on a word compared with
    numpy (results.xml: one test, failed, an AssertionError naming the word)."""
    # the original shares its build with test_int8_pipeline_depths[5-verilator]
    r = runner.run_mutant("int8-engine", {"max_k": 96, "pipeline": 5}, "verilator", MV,
                          "test_random_shapes", _off_by_one, "latency+1",
                          extra_env={"TB_BEATS": "300"},
                          match=r"^word \d+: got 0x[0-9a-f]+ tlast=\w+, expected")
    assert r["original"]["tests"] == 1 and r["mutant"]["tests"] == 1


def _probe_one_cycle_late(gen_dir):
    """The count FIFO written one cycle after the tlast beat: counts right, latency 2."""
    core = gen_dir / "bw_probe_core.v"
    text = core.read_text()
    late = ("reg        wr_late;\nreg [63:0] wr_late_data;\nalways @(posedge aclk) begin\n"
            "    wr_late      <= aresetn && accept && s_axis_tlast;\n"
            "    wr_late_data <= {cycles_now, beats_now};\nend\n")
    for old, new in [(".wr_en(accept && s_axis_tlast)", ".wr_en(wr_late)"),
                     (".wr_data({cycles_now, beats_now})", ".wr_data(wr_late_data)"),
                     ("sync_fifo #(", late + "sync_fifo #(")]:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    core.write_text(text)


def test_probe_latency_one_cycle_late_is_caught():
    """The probe's output one cycle later than its 1-cycle latency: test_latency fails."""
    r = runner.run_mutant("probe", {"bytes": 4}, "verilator", PROBE, "test_latency",
                          _probe_one_cycle_late, "latency+1",
                          match=r"^measured \[2, 2, 2, 2\], manifest latency 1")
    assert r["mutant"]["tests"] == 1


def _tvalid_reset_late(gen_dir):
    """The result FIFO's valid cleared by the registered reset only (the engines before issue
    31): tvalid stays high one cycle after aresetn is sampled low."""
    fifo = gen_dir / "sync_fifo.v"
    text = fifo.read_text()
    old = "if (!port_rst_n) begin\n        vld  <= 1'b0;\n"
    assert old in text
    fifo.write_text(text.replace(old, "if (!port_rst_n) begin\n"))


@pytest.mark.parametrize("design,params", [("probe", {"bytes": 4}),
                                           ("int8-engine", {"max_k": 96, "pipeline": 5})],
                         ids=["probe", "int8"])
def test_reset_test_catches_tvalid_reset_late(design, params):
    """test_reset_mid_frame_and_stall can fail: on a mutant whose tvalid falls a cycle late it
    fails on its own check of the cycle after the reset edge (a stalled word is on m_axis)."""
    module = PROBE if design == "probe" else MV
    r = runner.run_mutant(design, params, "verilator", module, "test_reset_mid_frame_and_stall",
                          _tvalid_reset_late, "tvalid-reset-late",
                          extra_env={"TB_BEATS": "300"},
                          match=r"^m_axis_tvalid = 1 in the cycle after aresetn was sampled low")
    assert r["mutant"]["tests"] == 1


@pytest.mark.parametrize("sim,pattern", [("verilator", "*.vcd"), ("icarus", "*.fst")])
def test_waves_on_demand(sim, pattern, monkeypatch):
    """WAVES=1 writes a waveform per run (VCD under Verilator, FST under Icarus)."""
    monkeypatch.setenv("WAVES", "1")
    r = run("probe", {"bytes": 4}, sim, PROBE, ["test_counts_back_to_back"], name="waves")
    build = runner.config_dir("probe", {"bytes": 4}) / f"{sim}-waves"
    assert list(build.rglob(pattern)), f"no {pattern} under {build}"


# ------------------------------------------------------------ frames of B vectors (docs/vectors.md)
#: the B-vector suites beyond make test's (tests/sim/test_sim_q4.py runs the three-lane mv-engine at
#: vectors 2 on Verilator there, the overlay bench runs its default vectors on both simulators)
ALL_MV_V = ALL_MV + ["test_output_bound"]


@pytest.mark.long
@pytest.mark.parametrize("design,params,sim", [
    ("int8-engine", {"max_k": 96, "vectors": 3}, "icarus"),
    ("int8-engine", {"max_k": 96, "vectors": 3, "pipeline": 3}, "verilator"),
    ("ternary-engine", {"max_k": 200, "vectors": 4}, "verilator"),
    ("ternary-engine", {"max_k": 200, "vectors": 2, "decode_bram": False}, "icarus"),
    ("mv-engine", {"max_k": 150, "vectors": 3}, "verilator"),
], ids=["int8-v3-icarus", "int8-v3-p3-verilator", "ternary-v4-verilator",
        "ternary-v2-lut-icarus", "dual-v3-verilator"])
def test_vectors_suites(design, params, sim):
    """Each lane with B-vector frames mixed with one-vector and bad frames, every word against
    the golden model; the tready duty, the latency and the output-bound rate exact."""
    r = run(design, params, sim, MV, ALL_MV_V, beats=2000 if sim == "verilator" else 1200)
    assert r["tests"] == len(ALL_MV_V)
    assert r["manifest"]["vectors"] == params["vectors"]
