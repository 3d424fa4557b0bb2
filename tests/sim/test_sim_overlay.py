"""cocotb simulation of the PYNQ-Z1 overlay top on Verilator and Icarus: a small configuration
(max_k 64: x in LUTRAM banks) and the bitstream's own (the generator defaults: max_k 2048, x in
BRAM banks; max_context 2048). Every output word of both ports is compared with
generators.golden.overlay."""
import pytest

import generators
from generators.cosim import runner
from generators.designs.overlay import PYNQ_Z1_KV_BITS, PYNQ_Z1_VECTORS

MOD = "sim.overlay.test_overlay"
#: the small top takes frames of two vectors (the PYNQ-Z1 default is one: docs/vectors.md), so
#: make test sends B-vector matrix frames through the top on both simulators
PARAMS = {"max_k": 64, "max_context": 8, "vectors": 2}
TESTS = {"verilator": ["test_mixed_traffic", "test_bad_frames", "test_output_stall",
                       "test_reset_mid_frame_and_stall"],
         "icarus": ["test_mixed_traffic", "test_bad_frames", "test_reset_mid_frame_and_stall"]}

#: the bitstream's configuration: `make bitstream` and `make sim` build the defaults
PYNQ_Z1 = {}
#: its traffic: all three formats on both ports with K up to 2048 (a quarter of the frames at
#: K = max_k, the deepest x-bank address), rows cut to about 320 words a frame, attention
#: contexts up to 160, free flow then pauses and backpressure with the halves skewed; bad
#: frames under pauses and backpressure (TB_QUICK)
PYNQ_ENV = {"TB_BEATS": "9000", "TB_FRAME_WORDS": "320", "TB_L_MAX": "160", "TB_QUICK": "1"}


# make test-long (make test keeps to its 15 minutes; it runs the PYNQ-Z1 build below, the
# configuration the bitstream holds)
@pytest.mark.long
@pytest.mark.parametrize("sim", ["verilator", "icarus"])
def test_overlay(sim):
    env = {"TB_BEATS": "900"}
    if sim == "icarus":
        env["TB_QUICK"] = "1"       # bad frames under pauses only (Icarus is ~8x slower)
    r = runner.run("overlay", PARAMS, sim, MOD, testcase=TESTS[sim], extra_env=env)
    assert r["tests"] == len(TESTS[sim])


@pytest.mark.parametrize("sim", ["verilator", pytest.param("icarus", marks=pytest.mark.long)])
def test_overlay_pynq_z1(sim):
    """The configuration the bitstream carries (issue 19, item 5): mixed traffic and bad frames,
    K and V over the whole 16-bit range (the INT16-KV attention engine, ``kv_bits=16``: 24 MACs
    at the 128-bit joined beat, exp table 21 bits, Z 16 fraction bits). Verilator in make test
    (about 1.5 min with its build), Icarus in make test-long (about 3 min: the same traffic)."""
    top = generators.core.build("overlay", PYNQ_Z1)
    assert top.p["max_k"] == 2048 and top.matrix().x_bram(), "not the BRAM x banks"
    r = runner.run("overlay", PYNQ_Z1, sim, MOD, testcase=["test_mixed_traffic",
                                                            "test_bad_frames"],
                   extra_env=PYNQ_ENV)
    assert r["tests"] == 2
    assert r["manifest"]["matrix"]["formats"] == [8, 3, 4]
    assert r["manifest"]["matrix"]["vectors"] == PYNQ_Z1_VECTORS
    a = r["manifest"]["attention"]
    assert (a["kv_bits"], a["macs"], a["beat_bytes"], a["exp_width"], a["scale_frac_bits"]) \
        == (PYNQ_Z1_KV_BITS, 24, 16, 21, 16)


@pytest.mark.long
def test_overlay_pynq_z1_kv8():
    """The bitstream's configuration with the INT8-KV attention engine (``kv_bits=8``: 48 MACs
    at the same 128-bit joined beat, exp table 24 bits, Z 24 fraction bits), the same traffic
    (make test-long)."""
    r = runner.run("overlay", dict(PYNQ_Z1, kv_bits=8), "verilator", MOD,
                   testcase=["test_mixed_traffic", "test_bad_frames"], extra_env=PYNQ_ENV)
    assert r["tests"] == 2
    a = r["manifest"]["attention"]
    assert (a["kv_bits"], a["macs"], a["beat_bytes"], a["exp_width"], a["scale_frac_bits"]) \
        == (8, 48, 16, 24, 24)


@pytest.mark.long
def test_overlay_vectors_one():
    """The top with vectors=1 (the matrix engines of before): a frame with the vectors flag is
    BAD_FORMAT, every other word as before (make test-long)."""
    r = runner.run("overlay", dict(PARAMS, vectors=1), "verilator", MOD,
                   testcase=["test_mixed_traffic", "test_bad_frames"],
                   extra_env={"TB_BEATS": "900"})
    assert r["manifest"]["matrix"]["vectors"] == 1 and r["manifest"]["matrix"]["latency"] == 26


def _swap_halves(gen_dir):
    """The joiner with its halves the wrong way round."""
    f = gen_dir / "axis_join2.v"
    text = f.read_text()
    assert ".s_data({b_data, a_data})" in text
    f.write_text(text.replace(".s_data({b_data, a_data})", ".s_data({a_data, b_data})"))


def test_swapped_joiner_is_caught():
    """The same bench fails on a joiner that puts port 1's word in the low half."""
    with pytest.raises(AssertionError, match="cocotb tests failed"):
        runner.run("overlay", PARAMS, "icarus", MOD, testcase=["test_mixed_traffic"],
                   extra_env={"TB_BEATS": "200"}, mutate=_swap_halves, variant="swapped-joiner")
