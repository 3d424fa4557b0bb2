"""The Vivado flow (vivado/*.tcl, constraints/*.xdc, vivado/bitstream.mk) without Vivado.

vivado/build.tcl runs under a plain tclsh with recording stubs of the Vivado commands
(tests/tcl_stubs/vivado_stubs.tcl): every call is logged as one JSON line, and environment
variables set what the stubs return (slack, the PS7's actual FCLK, ...). The tests then check the
recorded flow: the part, the PS7 (HP0, HP1, GP0, FCLK0 and its read-back), the DMAs, that every
generated source is added, and that the timing gate stops the build before write_bitstream.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

REPO = Path(__file__).resolve().parent.parent
VIVADO_DIR = REPO / "vivado"
STUBS = REPO / "tests" / "tcl_stubs"
RUNNER = STUBS / "run_stubbed.tcl"
BUILD_TCL = VIVADO_DIR / "build.tcl"
TCLSH = shutil.which("tclsh")
PART = "xc7z020clg400-1"

_spec = importlib.util.spec_from_file_location("vivado_engines", VIVADO_DIR / "engines.py")
engines_py = importlib.util.module_from_spec(_spec)
sys.modules["vivado_engines"] = engines_py
_spec.loader.exec_module(engines_py)

pytestmark = pytest.mark.skipif(TCLSH is None, reason="tclsh is not installed (apt-get install tcl)")


# ------------------------------------------------------------------------------------------
# Engines: the real generator. fake_render is only injected by the tests of engines.py's own
# checks (shared files, stream widths, missing sources), never as a fallback.
# ------------------------------------------------------------------------------------------
def fake_render(design: str, params: Dict[str, Any], out_dir: str) -> Dict[str, Any]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    top = design.replace("-", "_")
    sources = ["sync_fifo.v", "delay_line.v", f"{top}.v"]
    for name in sources:
        (out / name).write_text(f"module {Path(name).stem}; endmodule\n")
    manifest = {"design": design, "top": top, "sources": sources,
                "parameters": dict(params, bytes=8), "latency": 6}
    (out / "manifest.json").write_text(json.dumps(manifest))
    return manifest


@pytest.fixture(scope="module")
def stage4(tmp_path_factory):
    """engines.tcl for the default engine list (two ternary engines) and its manifest sources."""
    out = tmp_path_factory.mktemp("engines") / "vivado" / "engines"
    tcl = engines_py.write_engines_tcl(["ternary-engine", "ternary-engine"], out)
    manifest = json.loads((out / "ternary-engine" / "manifest.json").read_text())
    sources = [str((out / "ternary-engine" / s).resolve()) for s in manifest["sources"]]
    return {"tcl": tcl, "sources": sources, "top": manifest["top"]}


# ------------------------------------------------------------------------------------------
# Running the flow under the stubs
# ------------------------------------------------------------------------------------------
class Flow:
    def __init__(self, proc: subprocess.CompletedProcess, log: Path, out: Path):
        self.proc = proc
        self.rc = proc.returncode
        self.stdout = proc.stdout
        self.out = out
        self.calls: List[Dict[str, Any]] = []
        if log.exists():
            self.calls = [json.loads(line) for line in log.read_text().splitlines() if line]

    def cmds(self) -> List[str]:
        return [c["cmd"] for c in self.calls]

    def of(self, cmd: str) -> List[Dict[str, Any]]:
        return [c for c in self.calls if c["cmd"] == cmd]

    def index(self, cmd: str) -> int:
        return self.cmds().index(cmd)

    def props(self, obj: str) -> Dict[str, str]:
        """Every property set on OBJ, later values winning."""
        out: Dict[str, str] = {}
        for c in self.of("set_property"):
            if obj in c["objects"]:
                out.update(c["props"])
        return out

    def joined(self, cmd: str) -> List[str]:
        return [" ".join(" ".join(a.split()) for a in c["args"]) for c in self.of(cmd)]


def run_tcl(script: Path, args: List[str], tmp: Path, env: Optional[Dict[str, str]] = None,
            log_name: str = "calls.jsonl") -> Flow:
    log = tmp / log_name
    if log.exists():
        log.unlink()
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("STUB_")}
    full_env["STUB_LOG"] = str(log)
    full_env.update(env or {})
    proc = subprocess.run([TCLSH, str(RUNNER), str(script), *args], cwd=tmp, env=full_env,
                          capture_output=True, text=True, timeout=60)
    return Flow(proc, log, tmp / "out")


def run_build(tmp: Path, engines_tcl: Path, env: Optional[Dict[str, str]] = None,
              extra: Optional[List[str]] = None) -> Flow:
    args = ["--out", str(tmp / "out"), "--engines-tcl", str(engines_tcl), *(extra or [])]
    return run_tcl(BUILD_TCL, args, tmp, env)


@pytest.fixture(scope="module")
def good(tmp_path_factory, stage4) -> Flow:
    """The default build with positive slack (the write-up's fixed design: WNS +0.062 ns)."""
    flow = run_build(tmp_path_factory.mktemp("good"), stage4["tcl"], {"STUB_WNS": "0.062"})
    assert flow.rc == 0, flow.stdout + flow.proc.stderr
    return flow


# ------------------------------------------------------------------------------------------
# Project, PS7, clock
# ------------------------------------------------------------------------------------------
def test_project_targets_the_zynq_7020_part(good):
    (create,) = good.of("create_project")
    args = create["args"]
    assert args[args.index("-part") + 1] == PART
    assert good.of("get_parts")[0]["args"][-1] == PART
    # no board files installed: the board part is not set, the PS7 settings are explicit
    assert not any(c["args"][0] == "board_part" for c in good.of("set_property"))
    assert "No PYNQ-Z1 board files installed" in good.stdout


def test_board_part_is_used_only_when_installed(tmp_path, stage4):
    bp = "www.digilentinc.com:pynq-z1:part0:1.0"
    flow = run_build(tmp_path, stage4["tcl"], {"STUB_BOARD_PART": bp})
    assert flow.rc == 0, flow.stdout
    assert any(c["args"][:2] == ["board_part", bp] for c in flow.of("set_property"))
    # the explicit PS7 settings are applied either way
    assert flow.props("/ps7")["CONFIG.PCW_UIPARAM_DDR_PARTNO"] == "MT41K256M16 RE-125"


def test_missing_part_fails_clearly(tmp_path, stage4):
    flow = run_build(tmp_path, stage4["tcl"], {"STUB_NO_PART": "1"})
    assert flow.rc != 0
    assert "part xc7z020clg400-1 is not installed" in flow.stdout
    assert "create_project" not in flow.cmds()


def test_ps7_has_pynq_z1_ddr_and_mio(good):
    p = good.props("/ps7")
    assert p["CONFIG.PCW_UIPARAM_DDR_PARTNO"] == "MT41K256M16 RE-125"
    assert p["CONFIG.PCW_UIPARAM_DDR_BUS_WIDTH"] == "16 Bit"
    assert p["CONFIG.PCW_UIPARAM_DDR_FREQ_MHZ"] == "525"
    assert p["CONFIG.PCW_UIPARAM_DDR_DQS_TO_CLK_DELAY_0"] == "0.040"
    assert p["CONFIG.PCW_UIPARAM_DDR_BOARD_DELAY1"] == "0.212"
    assert p["CONFIG.PCW_CRYSTAL_PERIPHERAL_FREQMHZ"] == "50"
    assert p["CONFIG.PCW_PRESET_BANK0_VOLTAGE"] == "LVCMOS 3.3V"
    assert p["CONFIG.PCW_PRESET_BANK1_VOLTAGE"] == "LVCMOS 1.8V"
    assert p["CONFIG.PCW_UART0_UART0_IO"] == "MIO 14 .. 15"
    assert p["CONFIG.PCW_SD0_SD0_IO"] == "MIO 40 .. 45"
    assert p["CONFIG.PCW_USB0_USB0_IO"] == "MIO 28 .. 39"
    assert p["CONFIG.PCW_ENET0_ENET0_IO"] == "MIO 16 .. 27"
    assert p["CONFIG.PCW_QSPI_QSPI_IO"] == "MIO 1 .. 6"
    # DDR and FIXED_IO made external
    ports = good.joined("create_bd_intf_port")
    assert any(a.endswith(" DDR") and "ddrx_rtl" in a for a in ports)
    assert any(a.endswith(" FIXED_IO") and "fixedio_rtl" in a for a in ports)


def test_ps7_enables_hp0_hp1_gp0_and_fclk0_at_142_857(good):
    p = good.props("/ps7")
    assert p["CONFIG.PCW_USE_S_AXI_HP0"] == "1"
    assert p["CONFIG.PCW_USE_S_AXI_HP1"] == "1"
    assert p["CONFIG.PCW_S_AXI_HP0_DATA_WIDTH"] == "64"
    assert p["CONFIG.PCW_S_AXI_HP1_DATA_WIDTH"] == "64"
    assert p["CONFIG.PCW_USE_M_AXI_GP0"] == "1"
    assert p["CONFIG.PCW_FPGA0_PERIPHERAL_FREQMHZ"] == "142.857"
    assert p["CONFIG.PCW_FPGA_FCLK0_ENABLE"] == "1"
    # the actual frequency is read back from the PS7, before anything is built
    reads = [c for c in good.of("get_property")
             if c["args"][0] == "CONFIG.PCW_ACT_FPGA0_PERIPHERAL_FREQMHZ"]
    assert reads and reads[0]["args"][1] == "/ps7"
    assert good.calls.index(reads[0]) < good.index("launch_runs")
    assert "PS7 makes 142.857132 MHz" in good.stdout


@pytest.mark.parametrize("actual", ["125.000000", "142.000000", "100.000000", ""])
def test_fclk_readback_mismatch_fails_the_build(tmp_path, stage4, actual):
    flow = run_build(tmp_path, stage4["tcl"], {"STUB_FCLK0_ACT": actual or "none"})
    assert flow.rc != 0
    assert "FCLK_CLK0 is" in flow.stdout and "PCW_ACT_FPGA0_PERIPHERAL_FREQMHZ" in flow.stdout
    assert "launch_runs" not in flow.cmds()
    assert "write_bitstream" not in flow.cmds()


def test_fclk_option_is_checked_against_readback(tmp_path, stage4):
    # asking for 100 MHz while the PS7 reports 142.857 must fail too
    flow = run_build(tmp_path, stage4["tcl"], extra=["--fclk-mhz", "100"])
    assert flow.rc != 0
    assert "requested 100 MHz" in flow.stdout


# ------------------------------------------------------------------------------------------
# DMAs, interconnect, engines
# ------------------------------------------------------------------------------------------
def test_ip_versions_are_looked_up_not_pinned(good):
    patterns = [c["args"][-1] for c in good.of("get_ipdefs")]
    for ip in ("processing_system7", "axi_dma", "axi_interconnect", "proc_sys_reset"):
        assert f"xilinx.com:ip:{ip}:*" in patterns
    text = "".join(p.read_text() for p in VIVADO_DIR.glob("*.tcl"))
    assert not re.search(r"xilinx\.com:ip:\w+:\d", text), "a hard-pinned IP version"


def test_two_dmas_in_simple_mode(good):
    cells = good.joined("create_bd_cell")
    dmas = [a for a in cells if "axi_dma" in a]
    assert len(dmas) == 2
    for i in (0, 1):
        p = good.props(f"/dma_{i}")
        assert p["CONFIG.C_INCLUDE_SG"] == "0"
        assert p["CONFIG.C_SG_LENGTH_WIDTH"] == "26"
        assert p["CONFIG.C_INCLUDE_MM2S"] == "1"
        assert p["CONFIG.C_INCLUDE_S2MM"] == "1"
        assert p["CONFIG.C_M_AXIS_MM2S_TDATA_WIDTH"] == "64"
        assert p["CONFIG.C_M_AXI_MM2S_DATA_WIDTH"] == "64"
        assert p["CONFIG.C_S_AXIS_S2MM_TDATA_WIDTH"] == "32"
        assert p["CONFIG.C_MICRO_DMA"] == "0"


def test_engines_are_module_references_on_the_dma_streams(good, stage4):
    refs = [a for a in good.joined("create_bd_cell") if "-type module" in a]
    assert refs == [f"-type module -reference {stage4['top']} engine_0",
                    f"-type module -reference {stage4['top']} engine_1"]
    nets = good.joined("connect_bd_intf_net")
    for i in (0, 1):
        assert f"/dma_{i}/M_AXIS_MM2S /engine_{i}/s_axis" in nets
        assert f"/engine_{i}/m_axis /dma_{i}/S_AXIS_S2MM" in nets


def test_each_dma_on_its_own_hp_port(good):
    nets = good.joined("connect_bd_intf_net")
    for i in (0, 1):
        assert f"/dma_{i}/M_AXI_MM2S /hp{i}_ic/S00_AXI" in nets
        assert f"/dma_{i}/M_AXI_S2MM /hp{i}_ic/S01_AXI" in nets
        assert f"/hp{i}_ic/M00_AXI /ps7/S_AXI_HP{i}" in nets
        assert good.props(f"/hp{i}_ic")["CONFIG.NUM_SI"] == "2"


def test_single_engine_splits_mm2s_and_s2mm_over_hp0_hp1(tmp_path):
    tcl = engines_py.write_engines_tcl(["ternary-engine"], tmp_path / "e" / "engines")
    flow = run_build(tmp_path, tcl)
    assert flow.rc == 0, flow.stdout
    nets = flow.joined("connect_bd_intf_net")
    assert "/dma_0/M_AXI_MM2S /hp0_ic/S00_AXI" in nets
    assert "/dma_0/M_AXI_S2MM /hp1_ic/S00_AXI" in nets


def test_axi_lite_control_from_gp0(good):
    nets = good.joined("connect_bd_intf_net")
    assert "/ps7/M_AXI_GP0 /ctrl_ic/S00_AXI" in nets
    for i in (0, 1):
        assert f"/ctrl_ic/M0{i}_AXI /dma_{i}/S_AXI_LITE" in nets
    assert good.props("/ctrl_ic")["CONFIG.NUM_MI"] == "2"
    addrs = good.joined("assign_bd_address")
    assert "-offset 0x40400000 -range 64K -target_address_space /ps7/Data " \
           "/dma_0/S_AXI_LITE/Reg" in addrs
    assert "-offset 0x40410000 -range 64K -target_address_space /ps7/Data " \
           "/dma_1/S_AXI_LITE/Reg" in addrs
    assert "" in addrs  # then everything else (DDR for the DMA masters)


def test_clocks_and_resets_are_wired_explicitly(good):
    nets = {a.split()[0]: a.split()[1:] for a in good.joined("connect_bd_net")}
    clk = nets["/ps7/FCLK_CLK0"]
    for pin in ("/ps7/M_AXI_GP0_ACLK", "/ps7/S_AXI_HP0_ACLK", "/ps7/S_AXI_HP1_ACLK",
                "/rst_fclk0/slowest_sync_clk", "/ctrl_ic/ACLK"):
        assert pin in clk
    rst = nets["/rst_fclk0/peripheral_aresetn"]
    for i in (0, 1):
        for pin in ("s_axi_lite_aclk", "m_axi_mm2s_aclk", "m_axi_s2mm_aclk"):
            assert f"/dma_{i}/{pin}" in clk
        assert f"/engine_{i}/aclk" in clk
        assert f"/dma_{i}/axi_resetn" in rst
        assert f"/engine_{i}/aresetn" in rst
        assert f"/hp{i}_ic/ACLK" in clk and f"/hp{i}_ic/M00_ACLK" in clk
        assert f"/hp{i}_ic/ARESETN" in nets["/rst_fclk0/interconnect_aresetn"]
    assert nets["/ps7/FCLK_RESET0_N"] == ["/rst_fclk0/ext_reset_in"]
    assert "apply_bd_automation" not in good.cmds()
    assert good.index("validate_bd_design") < good.index("generate_target")


def test_every_generated_source_is_added(good, stage4):
    added = []
    for c in good.of("add_files"):
        a = c["args"]
        if a[a.index("-fileset") + 1] == "sources_1":
            for word in a[a.index("-fileset") + 2:]:
                added.extend(word.split())
    for src in stage4["sources"]:
        assert src in added, f"{src} not added"
    assert good.index("add_files") < good.index("create_bd_design")
    constrs = [c for c in good.of("add_files") if "constrs_1" in c["args"]]
    xdcs = " ".join(" ".join(c["args"]) for c in constrs)
    assert str(REPO / "constraints" / "pynq_z1.xdc") in xdcs
    assert str(REPO / "constraints" / "clocks.xdc") in xdcs


def test_missing_generated_source_fails(tmp_path, stage4):
    text = stage4["tcl"].read_text()
    bad = tmp_path / "engines.tcl"
    bad.write_text(text.replace(stage4["sources"][0], str(tmp_path / "gone.v")))
    flow = run_build(tmp_path, bad)
    assert flow.rc != 0
    assert "gone.v is missing" in flow.stdout


# ------------------------------------------------------------------------------------------
# Timing gate and outputs
# ------------------------------------------------------------------------------------------
def test_positive_slack_writes_bitstream_and_hwh(good):
    cmds = good.cmds()
    assert "write_bitstream" in cmds
    routed = cmds.index("open_run")
    gate = max(i for i, c in enumerate(cmds) if c == "get_timing_paths")
    assert routed < gate < cmds.index("write_bitstream")
    setup = [c["args"] for c in good.of("get_timing_paths") if "-setup" in c["args"]]
    hold = [c["args"] for c in good.of("get_timing_paths") if "-hold" in c["args"]]
    assert setup and hold
    assert "TIMING GATE PASSED: WNS=0.062 ns WHS=0.035 ns WPWS=2.750 ns" in good.stdout
    (wb,) = good.of("write_bitstream")
    assert wb["args"][-1] == str(good.out / "pynq_ternary.bit")
    assert (good.out / "pynq_ternary.bit").is_file()
    # the .hwh is the block design's hw_handoff file, copied beside the .bit
    hwh = good.out / "pynq_ternary.hwh"
    assert hwh.is_file() and "EDKSYSTEM" in hwh.read_text()
    for rpt in ("utilization.rpt", "timing_summary.rpt", "pulse_width.rpt"):
        assert (good.out / rpt).is_file(), rpt
    assert "BUILD OK" in good.stdout
    # the runs: synthesis, then implementation up to route_design
    runs = good.joined("launch_runs")
    assert runs[0].startswith("synth_1") and runs[1].startswith("impl_1 -to_step route_design")


@pytest.mark.parametrize("env, expect", [
    ({"STUB_WNS": "-0.502"}, "setup slack WNS = -0.502 ns is negative"),  # the write-up's build
    ({"STUB_WHS": "-0.011"}, "hold slack WHS = -0.011 ns is negative"),
    ({"STUB_WPWS": "-0.150"}, "pulse-width slack WPWS = -0.150 ns is negative"),
    ({"STUB_WNS": "none"}, "no setup timing path found"),
    ({"STUB_CLK_PERIOD": "10.000"}, "clock clk_fpga_0 has period 10.000 ns, expected 7.000 ns"),
    ({"STUB_NO_CLOCK": "1"}, "clock clk_fpga_0 not found"),
])
def test_timing_gate_stops_before_the_bitstream(tmp_path, stage4, env, expect):
    flow = run_build(tmp_path, stage4["tcl"], env)
    assert flow.rc != 0
    assert expect in flow.stdout
    assert "TIMING GATE FAILED" in flow.stdout
    if "STUB_WPWS" not in env:
        assert "could not read WPWS" not in flow.stdout  # a negative first column parses
    assert "write_bitstream" not in flow.cmds()
    assert "write_hw_platform" not in flow.cmds()
    assert not (flow.out / "pynq_ternary.bit").exists()
    assert not (flow.out / "pynq_ternary.hwh").exists()
    assert (flow.out / "timing_failed.rpt").is_file()


def test_failed_setup_prints_the_worst_paths(tmp_path, stage4):
    flow = run_build(tmp_path, stage4["tcl"], {"STUB_WNS": "-0.502"})
    rt = flow.joined("report_timing")
    assert any("-delay_type max" in a and "-return_string" in a for a in rt)
    assert "Worst setup paths" in flow.stdout and "Slack: -0.502 ns" in flow.stdout


def test_zero_slack_passes(tmp_path, stage4):
    flow = run_build(tmp_path, stage4["tcl"], {"STUB_WNS": "0.000", "STUB_WHS": "-0.000"})
    assert flow.rc == 0, flow.stdout
    assert "write_bitstream" in flow.cmds()


def test_failed_run_stops_the_build(tmp_path, stage4):
    flow = run_build(tmp_path, stage4["tcl"], {"STUB_RUN_PROGRESS": "50%"})
    assert flow.rc != 0
    assert "run synth_1 did not complete" in flow.stdout
    assert "open_run" not in flow.cmds()


@pytest.mark.parametrize("layout, ok", [("gen", True), ("srcs", True), ("none", False)])
def test_hwh_comes_from_hw_handoff(tmp_path, stage4, layout, ok):
    flow = run_build(tmp_path, stage4["tcl"], {"STUB_HWH_LAYOUT": layout})
    assert (flow.rc == 0) == ok, flow.stdout
    assert (flow.out / "pynq_ternary.hwh").is_file() == ok
    if not ok:
        assert "hw_handoff" in flow.stdout


def test_summary_parser_reads_vivado_table(tmp_path):
    """timing_gate::parse_summary on a table laid out as Vivado prints it."""
    table = (
        "------------------------------------------------------------------------------------\n"
        "| Design Timing Summary\n"
        "| ---------------------\n"
        "------------------------------------------------------------------------------------\n"
        "\n"
        "    WNS(ns)      TNS(ns)  TNS Failing Endpoints  TNS Total Endpoints      WHS(ns)"
        "      THS(ns)  THS Failing Endpoints  THS Total Endpoints     WPWS(ns)     TPWS(ns)"
        "  TPWS Failing Endpoints  TPWS Total Endpoints  \n"
        "    -------      -------  ---------------------  -------------------      -------"
        "      -------  ---------------------  -------------------     --------     --------"
        "  ----------------------  --------------------  \n"
        "     -0.502      -12.345                     42                21423        0.021"
        "        0.000                      0                21423        2.750        0.000"
        "                       0                  9114  \n")
    script = tmp_path / "parse.tcl"
    script.write_text(
        f"source {{{VIVADO_DIR / 'timing_gate.tcl'}}}\n"
        "set fh [open [lindex $argv 0]]\nset text [read $fh]\nclose $fh\n"
        "puts [timing_gate::parse_summary $text]\n")
    (tmp_path / "table.txt").write_text(table)
    out = subprocess.run([TCLSH, str(script), str(tmp_path / "table.txt")],
                         capture_output=True, text=True, check=True).stdout.split()
    got = dict(zip(out[::2], out[1::2]))
    assert got == {"wns": "-0.502", "tns": "-12.345", "whs": "0.021", "ths": "0.000",
                   "wpws": "2.750", "tpws": "0.000"}


# ------------------------------------------------------------------------------------------
# engines.py
# ------------------------------------------------------------------------------------------
def test_engine_list_parsing():
    assert engines_py.parse_engine_list(["ternary-engine,ternary-engine"]) == [
        ("ternary-engine", {}), ("ternary-engine", {})]
    assert engines_py.parse_engine_list(["int8-engine", "ternary-engine:max_k=1024"]) == [
        ("int8-engine", {}), ("ternary-engine", {"max_k": "1024"})]
    with pytest.raises(engines_py.EngineError):
        engines_py.parse_engine_list([" , "])
    with pytest.raises(engines_py.EngineError):
        engines_py.parse_engine_list(["ternary-engine:max_k"])


def test_engines_tcl_renders_each_design_once_and_quotes_paths(tmp_path):
    calls = []

    def render(design, params, out_dir):
        calls.append((design, params))
        return fake_render(design, params, out_dir)

    out = tmp_path / "dir with space" / "engines"
    tcl = engines_py.write_engines_tcl(["ternary-engine", "ternary-engine", "int8-engine"],
                                       out, render=render)
    assert tcl == out.parent / "engines.tcl"
    assert calls == [("ternary-engine", {}), ("int8-engine", {})]
    script = tmp_path / "read.tcl"
    script.write_text(
        "source [lindex $argv 0]\n"
        "foreach e $ENGINES {puts [list [dict get $e name] [dict get $e top] "
        "[dict get $e s_axis_width] [llength [dict get $e sources]]]}\n"
        "foreach s $ENGINE_SOURCES {puts [file exists $s]}\n")
    lines = subprocess.run([TCLSH, str(script), str(tcl)], capture_output=True, text=True,
                           check=True).stdout.splitlines()
    assert lines[:3] == ["engine_0 ternary_engine 64 3", "engine_1 ternary_engine 64 3",
                         "engine_2 int8_engine 64 3"]
    # sync_fifo.v and delay_line.v are shared (same content): once; then the two tops
    assert lines[3:] == ["1"] * 4


def test_shared_file_with_different_content_is_refused(tmp_path):
    def render(design, params, out_dir):
        m = fake_render(design, params, out_dir)
        if design == "int8-engine":
            (Path(out_dir) / "sync_fifo.v").write_text("module sync_fifo(input a); endmodule\n")
        return m

    with pytest.raises(engines_py.EngineError, match="sync_fifo.v differs"):
        engines_py.write_engines_tcl(["ternary-engine", "int8-engine"], tmp_path / "engines",
                                     render=render)


def test_conflicting_configurations_of_one_module_are_refused(tmp_path):
    with pytest.raises(engines_py.EngineError, match="one Vivado project"):
        engines_py.write_engines_tcl(
            [("ternary-engine", {"max_k": 512}), ("ternary-engine", {"max_k": 1024})],
            tmp_path / "engines", render=fake_render)


def test_stream_width_follows_bytes_and_is_checked(tmp_path):
    def render(bytes_):
        def _r(design, params, out_dir):
            m = fake_render(design, params, out_dir)
            m["parameters"]["bytes"] = bytes_
            return m
        return _r

    tcl = engines_py.write_engines_tcl(["ternary-engine"], tmp_path / "a" / "engines",
                                       render=render(16))
    assert "s_axis_width 128" in tcl.read_text()
    with pytest.raises(engines_py.EngineError, match="AXI DMA"):
        engines_py.write_engines_tcl(["ternary-engine"], tmp_path / "b" / "engines",
                                     render=render(3))


def test_manifest_with_missing_source_is_refused(tmp_path):
    def render(design, params, out_dir):
        m = fake_render(design, params, out_dir)
        m["sources"].append("not_there.v")
        return m

    with pytest.raises(engines_py.EngineError, match="not_there.v"):
        engines_py.write_engines_tcl(["ternary-engine"], tmp_path / "engines", render=render)


def test_engines_py_cli_with_the_real_generator(tmp_path):
    proc = subprocess.run([sys.executable, str(VIVADO_DIR / "engines.py"), "--engines",
                           "ternary-engine,ternary-engine", "--out",
                           str(tmp_path / "vivado" / "engines")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "vivado" / "engines.tcl").is_file()


# ------------------------------------------------------------------------------------------
# Constraints
# ------------------------------------------------------------------------------------------
XDC_FILES = sorted((REPO / "constraints").glob("*.xdc"))
CLG400_PIN = re.compile(r"[A-HJ-NPR-W](1[0-9]|20|[1-9])\Z")  # rows A..W (no I, O, Q), cols 1..20


def test_xdc_sources_under_tcl_and_declares_sysclk(tmp_path, good):
    assert XDC_FILES, "no XDC in constraints/"
    calls = []
    for xdc in XDC_FILES:
        flow = run_tcl(xdc, [], tmp_path, log_name=f"{xdc.stem}.jsonl")
        assert flow.rc == 0, f"{xdc.name}: {flow.proc.stderr}"
        calls.extend(flow.calls)
    pins = {}
    for c in calls:
        if c["cmd"] == "set_property" and "CONFIG" not in str(c["props"]):
            props = c["props"]
            if "PACKAGE_PIN" in props:
                for port in c["objects"]:
                    pins[port] = props
    assert pins["sysclk"]["PACKAGE_PIN"] == "H16"
    assert pins["sysclk"]["IOSTANDARD"] == "LVCMOS33"
    clocks = [" ".join(c["args"]) for c in calls if c["cmd"] == "create_clock"]
    assert any("-period 8.000" in a for a in clocks)
    # the port the clock is on is sysclk
    get_ports = [c["args"] for c in calls if c["cmd"] == "get_ports"]
    assert ["sysclk"] in get_ports
    # every constrained port is a legal name, on a real clg400 pin, and a port of the design
    design_ports = {a.split()[-1] for a in good.joined("create_bd_port")}
    for port, props in pins.items():
        assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\[\d+\])?", port), port
        assert CLG400_PIN.match(props["PACKAGE_PIN"]), props["PACKAGE_PIN"]
        assert port.split("[")[0] in design_ports, f"{port} is not a port of the block design"
    for args in get_ports:
        for name in args:
            assert name.split("[")[0] in design_ports, f"get_ports {name}: no such port"


def test_timing_is_checked_at_the_fclk_period(good):
    (clk,) = [c for c in good.of("get_clocks") if "clk_fpga_0" in c["args"]]
    assert clk
    assert "(clk_fpga_0 7.000 ns)" in good.stdout


# ------------------------------------------------------------------------------------------
# Lint, Tcl 8.5 (Vivado's Tcl), make
# ------------------------------------------------------------------------------------------
def _venv_tool(name: str) -> Optional[str]:
    cand = Path(sys.executable).parent / name
    if cand.exists():
        return str(cand)
    return shutil.which(name)


@pytest.mark.parametrize("tool", ["tclint", "tclfmt"])
def test_tcl_and_xdc_lint_clean(tool):
    exe = _venv_tool(tool)
    if exe is None:
        pytest.skip(f"{tool} is not installed (pip install tclint)")
    args = [exe, "-c", str(REPO / "tclint.toml")]
    if tool == "tclfmt":
        args.append("--check")
    args += [str(REPO / "vivado"), str(REPO / "constraints"), str(STUBS)]
    proc = subprocess.run(args, capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_no_tcl_8_6_only_commands():
    """Vivado 2020.2 runs Tcl 8.5: no lmap, try, string cat, dict map, tailcall..."""
    bad = re.compile(r"\b(lmap|try|throw|tailcall|coroutine|yield|zlib)\b|string cat|"
                     r"dict map|file tempfile|lsort -stride|\bfinally\b")
    for path in list(VIVADO_DIR.glob("*.tcl")) + XDC_FILES:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0] if line.lstrip().startswith("#") else line
            assert not bad.search(code), f"{path.name}:{n}: {line.strip()}"


def _make_args() -> List[str]:
    top = REPO / "Makefile"
    if top.exists() and "vivado/bitstream.mk" in top.read_text():
        return ["make", "-f", str(top)]
    return ["make", "-f", str(VIVADO_DIR / "bitstream.mk")]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_bitstream_without_vivado_says_what_to_install(tmp_path):
    proc = subprocess.run(
        [*_make_args(), "bitstream", f"VIVADO={tmp_path / 'no' / 'vivado'}",
         f"BUILD_DIR={tmp_path / 'build'}"],
        cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    msg = proc.stdout + proc.stderr
    assert "Vivado not found" in msg
    assert "Install Vivado 2020.2" in msg
    assert "settings64.sh" in msg and "VIVADO=" in msg
    assert not (tmp_path / "build").exists()


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_bitstream_end_to_end_with_a_stub_vivado(tmp_path):
    """make -> engines.py -> `vivado -source build.tcl -tclargs ...`, with a fake vivado that
    runs the Tcl under tclsh and the stubs."""
    fake = tmp_path / "bin" / "vivado"
    fake.parent.mkdir()
    fake.write_text(f"""#!/bin/sh
# fake vivado: vivado -mode batch ... -source SCRIPT -tclargs ARGS...
echo "$@" > "{tmp_path}/vivado_args.txt"
while [ $# -gt 0 ] && [ "$1" != "-source" ]; do shift; done
script="$2"; shift 2
while [ $# -gt 0 ] && [ "$1" != "-tclargs" ]; do shift; done
[ $# -gt 0 ] && shift
exec {TCLSH} {RUNNER} "$script" "$@"
""")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    build = tmp_path / "build"
    base = [*_make_args(), "bitstream", f"VIVADO={fake}", f"BUILD_DIR={build}",
            f"PY={sys.executable}", "JOBS=3"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("STUB_")}
    env["STUB_LOG"] = str(tmp_path / "calls.jsonl")

    bad = subprocess.run(base, cwd=REPO, capture_output=True, text=True, timeout=300,
                         env=dict(env, STUB_WNS="-0.502"))
    assert bad.returncode != 0
    assert "TIMING GATE FAILED" in bad.stdout
    assert not (build / "pynq_ternary.bit").exists()

    ok = subprocess.run(base, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert (build / "pynq_ternary.bit").is_file() and (build / "pynq_ternary.hwh").is_file()
    assert (build / "vivado" / "engines.tcl").is_file()
    args = (tmp_path / "vivado_args.txt").read_text()
    assert "-mode batch" in args and "--jobs 3" in args
