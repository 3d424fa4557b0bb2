"""`make formal` in the tests: the PYNQ-Z1 configuration of every engine proved by k-induction
(stream handshake, no combinational path from m_axis_tready, result FIFO never overflows,
no word dropped), and mutants that must FAIL, each on the property named.
docs/formal.md: the method, the properties and the invariants."""
import json
import shutil

import pytest

import generators
from generators import formal
from generators.core import RTL_DIR

PYNQ = [(d, p) for d, p, _ in formal.PYNQ_Z1 if d in generators.list_designs()]


@pytest.mark.parametrize("design,params", PYNQ, ids=[d for d, _ in PYNQ])
def test_pynq_z1_proof(design, params, tmp_path):
    r = formal.prove(design, params, "PYNQ-Z1", cover=False, workdir=tmp_path / "f")
    assert r.failed == [], r.note
    assert r.status == "PASS", (r.status, r.note)


def test_covers_reached_probe(tmp_path):
    """The cover task reaches a stalled word accepted, a tlast word accepted and an input beat
    refused while the output is stalled (the cover steps come from the solver's trace)."""
    r = formal.prove("probe", {}, cover=True, workdir=tmp_path / "f")
    assert r.status == "PASS"
    assert set(r.covers) == {"c_stalled_word_accepted", "c_tlast_word_accepted",
                             "c_input_refused_while_output_stalled"}
    assert all(v.startswith("step ") for v in r.covers.values()), r.covers


# The mutants run on small configurations, so the failing trace is short (the base case of
# the proof finds it: a real run from reset, not an unreachable induction state).
MUTANT_CONFIGS = [
    ("probe", {"bytes": 4, "fifo_depth": 4}, 12),
    ("int8-engine", {"max_k": 4, "bytes": 4, "pipeline": 3, "fifo_depth": 16}, 30),
]
CASES = [(m, d, p, k) for m in sorted(formal.MUTANTS) for d, p, k in MUTANT_CONFIGS]


@pytest.mark.parametrize("mutant,design,params,depth", CASES,
                         ids=[f"{m}-{d}" for m, d, _, _ in CASES])
def test_mutant_fails(mutant, design, params, depth, tmp_path):
    mutate, prop = formal.MUTANTS[mutant]
    if prop == "comb_path":
        depth = 4   # the structural check finds it; the proof itself passes (tvalid never
        #             falls while stalled when it is gated by tready), so keep it short
    r = formal.prove(design, params, mutant=mutate, depth=depth, cover=False,
                     workdir=tmp_path / "f")
    assert r.status == "FAIL", (r.status, r.failed, r.note)
    assert len(r.failed) == 1 and r.failed[0] in prop.split("|"), (r.failed, r.note)
    if prop == "comb_path":
        assert "m_axis_tready -> m_axis_tvalid" in r.note


@pytest.mark.long   # make test-long: about 40 s CPU, 90 s wall on a loaded 2-core machine
def test_default_top_proof(tmp_path):
    """The PL top the bitstream carries (q4=true): k-induction at k = 12 closes with the
    matrix engines' writes-in-flight invariant (formal/props/matrix_engine.svh)."""
    r = formal.prove("overlay", {}, "PYNQ-Z1", cover=False, workdir=tmp_path / "f")
    assert r.failed == [] and r.status == "PASS", (r.status, r.failed, r.note)
    assert "matrix_engine.svh" in r.props and r.depth == 12


def test_ternary_tree_has_no_stream(tmp_path):
    r = formal.prove("ternary-tree", {}, cover=False, workdir=tmp_path / "f")
    assert r.status == "NO STREAM"


def test_two_port_top_from_manifest_streams(tmp_path):
    """A top with s0_axis/m0_axis/s1_axis/m1_axis (the overlay's port names) proved from a
    manifest's `streams`: the wrapper binds the checks to both pairs; a tready-gated tvalid on
    port 1 only is found on port 1."""
    src = tmp_path / "two"
    src.mkdir()
    for f in ("sync_fifo.v", "bw_probe_core.v"):
        shutil.copyfile(RTL_DIR / f, src / f)
    ports, body = [], []
    for p in (0, 1):
        ports += [f"input wire [31:0] s{p}_axis_tdata", f"input wire [3:0] s{p}_axis_tkeep",
                  f"input wire s{p}_axis_tvalid", f"output wire s{p}_axis_tready",
                  f"input wire s{p}_axis_tlast", f"output wire [31:0] m{p}_axis_tdata",
                  f"output wire [3:0] m{p}_axis_tkeep", f"output wire m{p}_axis_tvalid",
                  f"input wire m{p}_axis_tready", f"output wire m{p}_axis_tlast"]
        body.append(
            f"wire v{p};\n"
            f"bw_probe_core #(.DW(32), .FIFO_ADDR_W(2)) c{p} (.aclk(aclk), .aresetn(aresetn),\n"
            f"  .port_rst_n(aresetn),\n"
            f"  .s_axis_tdata(s{p}_axis_tdata), .s_axis_tvalid(s{p}_axis_tvalid),\n"
            f"  .s_axis_tready(s{p}_axis_tready), .s_axis_tlast(s{p}_axis_tlast),\n"
            f"  .m_axis_tdata(m{p}_axis_tdata), .m_axis_tkeep(m{p}_axis_tkeep),\n"
            f"  .m_axis_tvalid(v{p}), .m_axis_tready(m{p}_axis_tready),\n"
            f"  .m_axis_tlast(m{p}_axis_tlast));\n"
            + (f"assign m{p}_axis_tvalid = v{p};\n" if p == 0 else
               f"assign m{p}_axis_tvalid = v{p} & GATE;\n"))
    top = ("`default_nettype none\nmodule two_port #(parameter GATE_READY = 0) (\n"
           "input wire aclk, input wire aresetn,\n" + ",\n".join(ports) + ");\n"
           "wire GATE = GATE_READY ? m1_axis_tready : 1'b1;\n" + "".join(body) + "endmodule\n")
    (src / "two_port.v").write_text(top)
    man = {"design": "two-port", "top": "two_port",
           "sources": ["sync_fifo.v", "bw_probe_core.v", "two_port.v"],
           "streams": [{"port": p, "s_axis": f"s{p}_axis", "s_axis_width": 32,
                        "m_axis": f"m{p}_axis", "m_axis_width": 32} for p in (0, 1)]}
    (src / "manifest.json").write_text(json.dumps(man))
    r = formal.prove("two-port", {}, manifest_dir=src, depth=6, cover=False,
                     workdir=tmp_path / "ok")
    assert r.status == "PASS", (r.failed, r.note)
    gated = lambda f, t: t.replace("GATE_READY = 0", "GATE_READY = 1")  # noqa: E731
    r = formal.prove("two-port", {}, manifest_dir=src, depth=6, cover=False, mutant=gated,
                     workdir=tmp_path / "bad")
    assert r.failed == ["comb_path"]
    assert "m1_axis_tready -> m1_axis_tvalid" in r.note and "m0_axis" not in r.note


@pytest.mark.parametrize("design,params", [
    pytest.param(d, p, id=lab, marks=[pytest.mark.long] if "vectors 3" in lab else [])
    for d, p, lab in formal.VECTORS if lab.startswith("small")])
def test_vectors_proof(design, params, tmp_path):
    """Matrix engines taking frames of B vectors (docs/vectors.md): the handshake, no lost
    word and the read side's word index (backend_word_in_entry) prove at the default depth."""
    r = formal.prove(design, params, cover=False, workdir=tmp_path / "f")
    assert r.status == "PASS", (r.status, r.failed, r.note)
    assert "mv_backend.svh" in " ".join(map(str, r.props)), r.props


@pytest.mark.parametrize("mutant", sorted(formal.VECTOR_MUTANTS))
def test_vector_mutant_fails(mutant, tmp_path):
    """The B-vector read side broken: its property fails (from reset: the base case)."""
    mutate, prop = formal.VECTOR_MUTANTS[mutant]
    design, params, _ = formal.VECTORS[0]
    r = formal.prove(design, params, mutant=mutate, depth=30, cover=False, workdir=tmp_path / "f")
    assert r.status == "FAIL" and r.failed == [prop], (r.status, r.failed, r.note)


@pytest.mark.long   # make test-long
def test_vectors_pynq_engine_proof(tmp_path):
    """The top's matrix engine at vectors 2 as the overlay builds it (q4=true, fifo_depth 64)."""
    design, params, _ = formal.VECTORS[-1]
    r = formal.prove(design, params, cover=False, workdir=tmp_path / "f")
    assert r.status == "PASS", (r.status, r.failed, r.note)
