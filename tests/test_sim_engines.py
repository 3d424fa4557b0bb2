"""cocotb simulations of every matrix-vector design and the probe, on Verilator and Icarus.

Each case renders a parameter set, builds it once per simulator (build/sim/, reused) and runs
the cocotb tests of sim/<engine>/; every output word is compared with the numpy golden model.
"""
import re

import pytest

from sim.common import runner

SIMS = ["verilator", "icarus"]
MV = "sim.mv_engine.test_mv_engine"
PROBE = "sim.probe.test_probe"
ALL_MV = ["test_random_shapes", "test_tready_duty_and_latency", "test_bad_frames",
          "test_output_stall", "test_reset_mid_frame", "test_worst_case_sums"]
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
    assert r["tests"] == 5


# ------------------------------------------------------------ every legal INT8 pipeline depth
@pytest.mark.parametrize("sim", SIMS)
@pytest.mark.parametrize("pipeline", [3, 4, 5, 6])
def test_int8_pipeline_depths(pipeline, sim):
    r = run("int8-engine", {"max_k": 96, "pipeline": pipeline}, sim, MV, QUICK_MV, beats=1500)
    assert r["manifest"]["latency"] == pipeline


@pytest.mark.parametrize("params", [
    {"bytes": 4, "pipeline": 5, "max_k": 64},
    {"bytes": 16, "pipeline": 7, "max_k": 200},
], ids=["4B-p5", "16B-p7"])
def test_int8_widths(params):
    run("int8-engine", params, "verilator", MV, ALL_MV, beats=2000)


# ------------------------------------------------------------ ternary term counts and cadences
TERNARY_VARIANTS = [
    ("8B-r1-lut", {"bytes": 8, "reg_every": 1, "decode_bram": False, "max_k": 200}, SIMS),
    ("8B-r3-bram", {"bytes": 8, "reg_every": 3, "max_k": 333, "x_store": "bram"}, SIMS),
    ("8B-r8-lut", {"bytes": 8, "reg_every": 8, "decode_bram": False, "max_k": 81}, ["verilator"]),
    ("4B-r2", {"bytes": 4, "reg_every": 2, "max_k": 101}, ["verilator"]),
    ("16B-r2-lutram", {"bytes": 16, "reg_every": 2, "max_k": 640, "x_store": "lutram"}, ["verilator"]),
]


@pytest.mark.parametrize("params,sim", [(p, s) for _, p, sims in TERNARY_VARIANTS for s in sims],
                         ids=[f"{n}-{s}" for n, _, sims in TERNARY_VARIANTS for s in sims])
def test_ternary_variants(params, sim):
    tests = ALL_MV if sim == "verilator" else QUICK_MV
    run("ternary-engine", params, sim, MV, tests, beats=2000)


# ------------------------------------------------------------ the tests can fail
def _off_by_one(gen_dir):
    top = gen_dir / "int8_engine.v"
    text = top.read_text()
    m = re.search(r"localparam LANE_LAT = (\d+);", text)
    top.write_text(text.replace(m.group(0), f"localparam LANE_LAT = {int(m.group(1)) + 1};"))


def test_latency_off_by_one_is_caught():
    """The write-up's bug: a sideband delay one cycle off. The same tests must fail on it."""
    with pytest.raises(AssertionError, match="cocotb tests failed"):
        run("int8-engine", {"max_k": 64}, "verilator", MV, ["test_random_shapes"], beats=300,
            mutate=_off_by_one, variant="latency+1")


@pytest.mark.parametrize("sim,pattern", [("verilator", "*.vcd"), ("icarus", "*.fst")])
def test_waves_on_demand(sim, pattern, monkeypatch):
    """WAVES=1 writes a waveform per run (VCD under Verilator, FST under Icarus)."""
    monkeypatch.setenv("WAVES", "1")
    r = run("probe", {"bytes": 4}, sim, PROBE, ["test_counts_back_to_back"], name="waves")
    build = runner.config_dir("probe", {"bytes": 4}) / f"{sim}-waves"
    assert list(build.rglob(pattern)), f"no {pattern} under {build}"
