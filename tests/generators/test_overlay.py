"""The `overlay` design (docs/overlay.md) without simulation: manifest, sources, module
names, port attributes, parameter errors; and the golden model's joiner on its own."""
import re

import pytest

import generators
from generators.designs.overlay import PYNQ_Z1_KV_BITS, PYNQ_Z1_VECTORS
from generators import ParameterError
from generators.golden import overlay as gov
from generators.packing import split_attention_frame


@pytest.fixture(scope="module")
def pynq(tmp_path_factory):
    d = tmp_path_factory.mktemp("overlay")
    return generators.render("overlay", {}, d), d


def test_manifest_contract(pynq):
    man, _ = pynq
    assert man["design"] == "overlay" and man["top"] == "pynq_overlay"
    assert man["streams"] == [
        {"port": 0, "s_axis": "s0_axis", "s_axis_width": 64, "m_axis": "m0_axis", "m_axis_width": 32},
        {"port": 1, "s_axis": "s1_axis", "s_axis_width": 64, "m_axis": "m1_axis", "m_axis_width": 32}]
    # the Q4_1 lane by default (q4=true, docs/q4.md): INT8, ternary and Q4_1 rows
    assert man["matrix"]["formats"] == [8, 3, 4] and man["matrix"]["max_k"] == 2048
    # latency: 3 controller stages + 22 (the Q4_1 path and the select) + 1 (docs/timing.md)
    # + 2 (the back end's entry register and output slice of B-vector engines); two vectors per
    # frame (PYNQ_Z1_VECTORS, docs/vectors.md "The PYNQ-Z1 default")
    assert man["matrix"]["vectors"] == PYNQ_Z1_VECTORS == 2
    assert man["matrix"]["latency"] == 28 and man["matrix"]["port_latency"] == [31, 30]
    # and format 0x05 (Q4_1 rows with Q8_1 x blocks) on the Q4_1 lane, 0x09 (Q8_0 rows with
    # Q8_0 x blocks) on the INT8 lane's products and the Q4_1 lane's finisher
    assert man["matrix"]["block_formats"] == [5, 9]
    assert man["matrix"]["bytes"] == 8 and man["latency"] == man["matrix"]["latency"]
    a = man["attention"]
    assert (a["heads_per_group"], a["head_dim"], a["max_context"], a["macs"], a["beat_bytes"]) \
        == (3, 64, 2048, 24, 16)
    for k in ("latency", "exp_depth", "exp_width", "exp_steps_per_octave", "scale_frac_bits"):
        assert isinstance(a[k], int)
    # INT16 K and V by default (PYNQ_Z1_KV_BITS, issue 32 item 5): 24 MACs at the 128-bit
    # joined beat, the exp table 21 bits wide, Z with 16 fraction bits; latency 96 (the golden
    # timing model's, asserted in cocotb)
    assert a["kv_bits"] == PYNQ_Z1_KV_BITS == 16
    assert (a["exp_width"], a["scale_frac_bits"], a["latency"]) == (21, 16, 96)
    assert man["route"] == {"matrix_magic": 0xB158, "attention_magic": 0xA77E,
                            "attention_route_magic": 0xA77F}


def test_q4_false_leaves_two_formats(tmp_path):
    man = generators.render("overlay", {"q4": False}, tmp_path / "o")
    # mv-engine's 11 (the ternary path the longer: decode ROM 2 + 4 tree registers) + 2
    # (vectors 2: docs/vectors.md)
    assert man["matrix"]["formats"] == [8, 3] and man["matrix"]["latency"] == 13
    assert man["matrix"]["block_formats"] == []     # neither 0x05 nor 0x09 without the lane
    assert "q4_lane.v" not in man["sources"]


def test_one_definition_per_module(pynq):
    man, d = pynq
    assert len(man["sources"]) == len(set(man["sources"]))
    names = []
    for src in man["sources"]:
        names += re.findall(r"^module\s+(\w+)", (d / src).read_text(), re.M)
    assert len(names) == len(set(names)), sorted(names)
    top = (d / "pynq_overlay.v").read_text()
    # one matrix-engine definition, two instances
    assert names.count("mv_engine") == 1
    assert len(re.findall(r"^mv_engine matrix[01] \(", top, re.M)) == 2
    assert len(re.findall(r"^attention_engine attention \(", top, re.M)) == 1


def test_port_attributes(pynq):
    _, d = pynq
    top = (d / "pynq_overlay.v").read_text()
    assert ('(* X_INTERFACE_INFO = "xilinx.com:signal:clock:1.0 aclk CLK" *)' in top)
    # no FREQ_HZ of its own: IP integrator propagates the PS7's 142857132 Hz (issue 19; a value
    # that differs stops the build, tests/vivado/test_vivado_tcl.py)
    assert ('(* X_INTERFACE_PARAMETER = "ASSOCIATED_BUSIF s0_axis:m0_axis:s1_axis:m1_axis, '
            'ASSOCIATED_RESET aresetn" *)') in top
    assert "FREQ_HZ" not in "".join(re.findall(r"\(\*.*?\*\)", top))
    assert '(* X_INTERFACE_PARAMETER = "POLARITY ACTIVE_LOW" *)' in top
    for p in (0, 1):
        for sig, w in (("s", "[63:0]"), ("m", "[31:0]")):
            assert re.search(rf"wire {re.escape(w)}\s+{sig}{p}_axis_tdata", top)


@pytest.mark.parametrize("params,needle", [
    ({"max_k": 0}, "max_k=0"), ({"max_context": 0}, "max_context=0"),
    ({"order_depth": 12}, "power of two"), ({"macs": 24}, "unknown parameter"),
    ({"kv_bits": 12}, "kv_bits=12 must be 8 or 16"), ({"kv_bits": 32}, "kv_bits=32"),
])
def test_bad_parameters_write_nothing(params, needle, tmp_path):
    out = tmp_path / "o"
    with pytest.raises(ParameterError, match=needle):
        generators.render("overlay", params, out)
    assert not out.exists()


def test_kv16_top(tmp_path):
    """kv_bits=16: the attention engine with INT16 K and V at the same 128-bit joined beat (24
    MACs, 8 elements a beat), the widths it needs, and its latency (docs/attention.md 3.1: one
    cycle less than the INT8 engine's 97, the K and |acc| trees a level shorter); the runtime
    reads the width from the manifest."""
    from generators.runtime.model.checkpoint import EngineConfig
    man = generators.render("overlay", {"kv_bits": 16}, tmp_path / "o")
    a = man["attention"]
    assert (a["kv_bits"], a["macs"], a["beat_bytes"], a["exp_width"], a["scale_frac_bits"],
            a["latency"]) == (16, 24, 16, 21, 16, 96)
    cfg = EngineConfig.from_manifest(man).attention_config()
    assert (cfg.kv_bits, cfg.row_beats, cfg.exp_width, cfg.scale_frac_bits) == (16, 8, 21, 16)
    assert man["matrix"] == generators.render("overlay", {}, tmp_path / "p")["matrix"]


def test_golden_joiner():
    a = [(1, False), (2, False), (3, True), (4, False), (5, True)]
    b = [(10, False), (20, True), (30, False), (40, False), (50, True)]
    # frame 1: B ends first -> joined tlast on beat 2, A's word 3 dropped; frame 2: A ends
    # first -> B's word 50 dropped
    assert gov.join(a, b) == [(1 | 10 << 64, False), (2 | 20 << 64, True),
                              (4 | 30 << 64, False), (5 | 40 << 64, True)]


def test_split_attention_frame():
    frame = bytes(range(48))
    even, odd = split_attention_frame(frame, context=5, tag=0x9A)
    assert even == bytes(range(0, 8)) + bytes(range(16, 24)) + bytes(range(32, 40))
    route = int.from_bytes(odd[:8], "little")
    assert route == 0xA77F | (5 << 16) | (0x9A << 56)
    assert odd[8:] == bytes(range(8, 16)) + bytes(range(24, 32)) + bytes(range(40, 48))


def test_vectors_one_is_todays_top(tmp_path):
    """vectors=1: the matrix engines of before (latency 26, one vector; 64 FIFO entries since
    the Q4_1 lane's format 0x05: the 32-entry FIFO no longer holds latency + 7); vectors=2 (the
    default): 64 FIFO entries, the back end's entry registers and output slice (latency 28)."""
    man = generators.render("overlay", {"vectors": 1}, tmp_path / "o")
    assert man["matrix"]["vectors"] == 1
    assert man["matrix"]["latency"] == 26 and man["matrix"]["port_latency"] == [29, 28]
    assert generators.core.build("overlay", {"vectors": 1}).matrix().p["fifo_depth"] == 64
    man = generators.render("overlay", {"vectors": 2}, tmp_path / "o2")
    assert man["matrix"]["vectors"] == 2
    assert man["matrix"]["latency"] == 28 and man["matrix"]["port_latency"] == [31, 30]
    assert generators.core.build("overlay", {"vectors": 2}).matrix().p["fifo_depth"] == 64
