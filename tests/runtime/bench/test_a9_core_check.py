"""make a9-core-check (tools/a9_core_check.py): the published figures turned into cycles a trip,
the error's sign, a trip priced from two runs' blocks by the model's own functions, and one
published loop end to end under qemu-arm (a second or so)."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tools"))
sys.path.insert(0, str(REPO / "tests"))
import a9_core_check as cc  # noqa: E402
import armv7  # noqa: E402


def ref(kernel):
    return next(r for r in cc.REFERENCES if r["kernel"] == kernel)


def test_published_figures_as_cycles_a_trip():
    # 40 FLOP a trip at 3.99919 GFLOP/s on a 1 GHz Pandaboard: 10.002 cycles
    assert cc.published_cycles(ref("vmla_q")) == pytest.approx(10.002, abs=1e-3)
    # the same 40 FLOP at 3.98 GFLOP/s on one 1.2 GHz i.MX6 core: 12.06 cycles
    assert cc.published_cycles(ref("vmla_chain")) == pytest.approx(12.060, abs=1e-3)
    # 4 cycles a load, one load a trip; 1 cycle a load, eight a trip
    assert cc.published_cycles(ref("chase")) == 4.0
    assert cc.published_cycles(ref("loads")) == 8.0
    # 920 MFLOP/s over both 1.2 GHz cores, 16 FLOP a trip: 41.7 ("about 40-42 cycles")
    assert 40 <= cc.published_cycles(ref("fmacd")) <= 42
    assert ref("fmacd")["bound"] and not any(r.get("bound") for r in cc.REFERENCES
                                             if r["kernel"] != "fmacd")
    with pytest.raises(ValueError):
        cc.published_cycles(dict(ref("chase"), kind="per_minute"))


def test_error_sign():
    assert cc.error(12.5, 10.0) == pytest.approx(0.25)      # the model slower than the chip
    assert cc.error(7.5, 10.0) == pytest.approx(-0.25)


class FixedMca:
    """llvm-mca stand-in: a fixed number of cycles per instruction of a block."""

    def __init__(self, per_instruction):
        self.per = per_instruction

    def cycles(self, blocks):
        return {pc: self.per * len(ins) for pc, ins in blocks.items()}


def test_a_trip_priced_from_two_runs():
    """The loop's block (3 instructions) ran 200 and 1,200 times, the entry block once in both:
    a trip is the loop's block once, 3 instructions, at 2 cycles each 6 cycles."""
    dis = {0x100: "mov\tr0, #0", 0x104: "add\tr0, r0, #1", 0x108: "subs\tr1, r1, #1",
           0x10c: "bne\t104 <f+0x4>"}
    entry = {"pcs": [0x100], "fn": "f"}
    loop = {"pcs": [0x104, 0x108, 0x10c], "fn": "f"}
    one = {0x100: dict(entry, execs=1), 0x104: dict(loop, execs=200)}
    two = {0x100: dict(entry, execs=1), 0x104: dict(loop, execs=1200)}
    got = cc.per_trip(one, two, 1000, dis, FixedMca(2.0))
    assert got == {"cycles": 6.0, "instructions": 3.0}


def test_one_published_loop_under_qemu(tmp_path, monkeypatch):
    """The independent quadword VMLAs end to end: built as the model builds, counted under
    qemu-arm, priced by llvm-mca: five 2-cycle VMLA.F32 q a trip, 10 cycles (the Pandaboard
    measured 10.0)."""
    armv7.need_arm()
    if shutil.which("llvm-mca") is None:
        pytest.fail("llvm-mca is missing: install the Debian package llvm")
    monkeypatch.setattr(cc, "OUT", tmp_path)
    monkeypatch.setattr(cc, "REFERENCES", (ref("vmla_q"),))
    rows = cc.check(cc.build())
    assert len(rows) == 1 and rows[0]["instructions"] == 7
    assert 9.5 <= rows[0]["modelled_cycles"] <= 10.5, rows[0]
    assert rows[0]["loop"][0] == "vmla.f32\tq0, q0, q0"
    assert any(i["instruction"].startswith("vmla.f32") for i in rows[0]["llvm_mca_info"])
