"""cocotb simulation of the PYNQ-Z1 overlay top on Verilator and Icarus (small max_k and
max_context; `make sim` runs the PYNQ-Z1 configuration). Every output word of both ports is
compared with generators.golden.overlay."""
import pytest

from generators.cosim import runner

MOD = "sim.overlay.test_overlay"
PARAMS = {"max_k": 64, "max_context": 8}
TESTS = {"verilator": ["test_mixed_traffic", "test_bad_frames", "test_output_stall"],
         "icarus": ["test_mixed_traffic", "test_bad_frames"]}


@pytest.mark.parametrize("sim", ["verilator", "icarus"])
def test_overlay(sim):
    env = {"TB_BEATS": "900"}
    if sim == "icarus":
        env["TB_QUICK"] = "1"       # bad frames under pauses only (Icarus is ~8x slower)
    r = runner.run("overlay", PARAMS, sim, MOD, testcase=TESTS[sim], extra_env=env)
    assert r["tests"] == len(TESTS[sim])


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
