"""``ternary-pynq selftest`` (generators/runtime/cli/selftest.py) on the AXI DMA register model
(golden PL top), on a register model whose PL top is broken by one bit (it must fail, exit 1),
and on the board backend's path over a stand-in pynq; on the rtl backend (the rendered top in
Verilator) in tests/runtime/engines/test_runtime_rtl.py, beside the other simulations (make test-quick skips
them)."""
from __future__ import annotations

import dataclasses
import io
import json
import sys

import numpy as np

from generators.__main__ import main
from generators.designs.overlay import PYNQ_Z1_VECTORS
from generators.runtime.cli import selftest as st
from generators.runtime.model.checkpoint import EngineConfig

#: a small top for the register model (tests/runtime/engines/test_runtime_rtl.py runs selftest on the rtl
#: backend's build of it)
ENG = EngineConfig(max_k=512, max_context=16, vectors=PYNQ_Z1_VECTORS)


def _run(target, tmp_path, frames=4, speed_rows=16):
    out, prog = io.StringIO(), io.StringIO()
    path = tmp_path / "selftest.json"
    rc = st.run_selftest(target, frames, seed=3, speed_rows=speed_rows, progress=prog, out=out,
                         json_path=str(path))
    return rc, out.getvalue(), prog.getvalue(), json.loads(path.read_text())


def test_selftest_passes_on_the_register_model(tmp_path):
    rc, out, prog, res = _run(st.model_target(ENG), tmp_path)
    assert rc == 0, out
    verdict = out.strip().splitlines()[-2]
    assert verdict.startswith("PASS: ") and "0 mismatches" in verdict and "register model" \
        in verdict
    assert res["verdict"] == verdict
    # 0x05 (Q4_1 rows x Q8_1 blocks) is what --format q4 sends, 0x09 (Q8_0 x Q8_0) the LM
    # head: the PYNQ-Z1 overlay takes both
    assert set(res["engines"]) == {"int8", "ternary", "q4", "q4_q8_1", "q8_0", "attention",
                                   "bad"}
    for kind, s in res["engines"].items():
        assert s["frames"] > 0 and s["mismatches"] == 0, (kind, s)
    assert res["engines"]["int8"]["rows"] >= 3 * 16          # the speed frames are checked too
    assert "batch 4/4" in prog and "\r" in prog               # the progress line
    for name in ("port 0", "port 1", "both"):
        assert "gb_s" not in res["speed"][name] and res["speed"][name]["label"] is None
    assert "register model: no speed" in out


def test_selftest_formats_are_the_overlays(tmp_path):
    """The kinds sent are the overlay's formats and block formats: a top without per-block x
    (formats 8, 3, 4) gets no 0x05 frame; the PYNQ-Z1 overlay's list is its manifest's."""
    from generators.designs.overlay import Overlay
    man = Overlay({}).extra_manifest()
    assert st.overlay_formats() == tuple(man["matrix"]["formats"] + man["matrix"]["block_formats"])
    assert {5, 9} <= set(st.overlay_formats())
    assert st.overlay_formats({"matrix": {"formats": [8, 3]}}) == (8, 3)
    rc, out, _, res = _run(st.model_target(ENG, formats=(8, 3, 4)), tmp_path, frames=1)
    assert rc == 0 and set(res["engines"]) == {"int8", "ternary", "q4", "attention", "bad"}


def test_selftest_finds_a_wrong_q8_1_answer(tmp_path):
    """A fabric whose 0x05 answers (only those) have bit 0 of their first word flipped: the
    selftest's 0x05 frames show it, under their own kind."""
    from generators.golden import mv as gmv

    def hook(fab):
        orig = fab.overlay.matrix

        def matrix(port, segments):
            w = np.array(orig(port, segments), np.uint32)
            h = int(fab.mem.read(segments[0][0], 8).view("<u8")[0])
            if (h >> 48) & 0x7F == gmv.FMT_Q4_Q8_1:
                w[0] ^= 1
            return w
        fab.overlay.matrix = matrix

    rc, out, _, res = _run(st.model_target(ENG, fabric_hook=hook), tmp_path, frames=2)
    assert rc == 1
    assert res["engines"]["q4_q8_1"]["mismatches"] > 0
    assert all(res["engines"][k]["mismatches"] == 0 for k in ("int8", "ternary", "q4"))


def test_selftest_finds_one_wrong_bit_and_exits_1(tmp_path):
    """A PL top whose matrix engine on port 1 flips bit 0 of its first output word."""
    def hook(fab):
        ov = fab.overlay
        orig = ov.matrix

        def matrix(port, payload):
            w = np.array(orig(port, payload), np.uint32)
            if port == 1:
                w[0] ^= 1
            return w
        ov.matrix = matrix

    rc, out, _, res = _run(st.model_target(ENG, fabric_hook=hook), tmp_path, frames=2)
    assert rc == 1
    assert res["verdict"].startswith("FAIL: ") and "mismatches" in res["verdict"]
    assert sum(s["mismatches"] for s in res["engines"].values()) >= 2
    assert any("port 1" in m for m in res["first_mismatches"])


def test_selftest_command_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["selftest", "--backend", "golden", "--frames", "1", "--speed-rows", "8"]) == 0
    res = json.loads((tmp_path / "selftest.json").read_text())
    assert res["verdict"].startswith("PASS")
    capsys.readouterr()
    assert main(["selftest", "--frames", "0", "--backend", "golden"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1
    assert main(["selftest", "--bitfile", str(tmp_path / "none.bit")]) == 2
    assert "no bitstream" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "pynq", None)
    (tmp_path / "x.bit").write_bytes(b"")
    assert main(["selftest", "--bitfile", str(tmp_path / "x.bit")]) == 2
    err = capsys.readouterr().err
    assert "image's venv" in err and len(err.strip().splitlines()) == 1


def test_selftest_board_path_on_a_stand_in_pynq(tmp_path, monkeypatch):
    """board_target over the stand-in pynq of tests/runtime/engines/test_runtime_dma.py (its registers the
    register model): the .hwh and FCLK0 checks pass, every frame is checked; a wrong .hwh or
    FCLK0 fails the checks and sends no frame."""
    from tests.runtime.engines.test_runtime_dma import fake_pynq, use_pynq

    class M:                      # what fake_pynq reads of a model: its engines
        engines = ENG
    monkeypatch.setattr(st.os, "geteuid", lambda: 0)
    pynq = use_pynq(monkeypatch, fake_pynq(M))
    t = st.board_target("x.bit")
    assert pynq.syncs == [(pynq.syncs[0][0], 1, 32, 0)]            # the invalidate probe
    t.engines = dataclasses.replace(ENG, vectors=1)      # the stand-in's fabric: one vector
    rc, out, _, res = _run(t, tmp_path, frames=1)
    checks = {c["name"]: c["ok"] for c in res["checks"]}
    assert checks["dma_0 parameters"] and checks["dma_1 parameters"] and checks["FCLK0"]
    assert checks["root"] and checks["write barrier"] and checks["cache invalidate"]
    assert sum(s["mismatches"] for s in res["engines"].values()) == 0
    # off the board's CPU even the board path's figures are not board figures
    assert all(res["speed"][n]["label"].startswith("measured off a board")
               for n in ("port 0", "port 1", "both"))
    assert "not a board figure" in res["verdict"]
    # numpy 2 in this environment is not the image's: the board verdict says so (exit 1)
    assert rc == (1 if np.__version__.startswith("2") else 0), res["verdict"]
    for bad in (dict(mhz=100.0), dict(sg=0)):
        use_pynq(monkeypatch, fake_pynq(M, **bad))
        t = st.board_target("x.bit")
        rc, out, _, res = _run(t, tmp_path, frames=1)
        assert rc == 1 and "no frame sent" in res["verdict"], res["verdict"]
    use_pynq(monkeypatch, fake_pynq(M, xrt=False))             # no XRT: no invalidate
    rc, out, _, res = _run(st.board_target("x.bit"), tmp_path, frames=1)
    checks = {c["name"]: c for c in res["checks"]}
    assert rc == 1 and not checks["cache invalidate"]["ok"]
    assert "invalidate" in checks["cache invalidate"]["detail"]
    monkeypatch.setattr(st.os, "geteuid", lambda: 1000)
    monkeypatch.setitem(sys.modules, "pynq", fake_pynq(M))
    rc, out, _, res = _run(st.board_target("x.bit"), tmp_path, frames=1)
    assert rc == 1 and "root" in res["verdict"]
