"""The Vivado flow (vivado/*.tcl, constraints/*.xdc, vivado/bitstream.mk) without Vivado.

vivado/build.tcl runs under a plain tclsh with recording stubs of the Vivado commands
(tests/tcl_stubs/vivado_stubs.tcl): every call is logged as one JSON line, and environment
variables set what the stubs return (slack, the PS7's actual FCLK, ...). The tests then check the
recorded flow: the part, the PS7 (HP0, HP1, GP0, FCLK0 and its read-back), the PL top `overlay`
as one module reference with one AXI DMA per HP port, the DMA stream widths from the manifest,
the clock association of aclk, that block-design critical warnings stop the build, that every
generated source is added, and that the timing gate stops the build before write_bitstream.

The block design. tests/tcl_stubs/bd_model.tcl models the pins each cell has for its
configuration, the nets, IP integrator's clock propagation and what validate_bd_design reports,
with Vivado's message IDs and texts as public Vivado logs and scripts quote them:
  - [BD 41-238] "Port/Pin property FREQ_HZ does not match between /X/aclk(100000000) and
    /zynq_ultra_ps_e_0/pl_clk0(99999001)" and [BD 41-237] "Bus Interface property FREQ_HZ does
    not match between /X/s_axi_lite(100000000) and /axi_smc/M00_AXI(99999001)" for a clock that
    declares a FREQ_HZ of its own (a KV260 IP-packaging script, package_accelerator_ip.tcl; a
    2023.2 Xilinx change request "[BD 41-238] ... /axi_ethernet_0/gtx_clk(125000000) and
    /axi_ethernet_0_refclk/clk_out2(124999000)"); [BD 41-237] with FREQ_HZ 142857132 on a
    PYNQ-Z2 design (Xilinx/PYNQ_Composable_Pipeline issue 71);
  - the PS7's FCLK at 142857132 Hz and CLK_DOMAIN <bd>_<ps7 cell>_0_FCLK_CLKn in the
    X_INTERFACE_PARAMETER Vivado writes on a module reference's clock ("XIL_INTERFACENAME clk,
    FREQ_HZ 142857132, ..., CLK_DOMAIN design_1_processing_system7_0_1_FCLK_CLK1", a 2021.2
    module_ref stub; "CLK_DOMAIN base_ps7_0_0_FCLK_CLK1" in PYNQ-Z1 base-overlay wrappers);
  - [BD 41-967] "AXI interface pin /X/S_AXI is not associated to any clock pin" followed by
    [BD 41-237] FREQ_HZ (100000000 against the real clock) for an interface missing from
    ASSOCIATED_BUSIF; Vivado's inference adding ASSOCIATED_BUSIF to a lone clock ([IP_Flow
    19-4728], laurencebarker/Saturn issue 7);
  - [BD 41-758] "The following clock pins are not connected to a valid clock source:" (ERROR);
    [BD 5-232] "No interface pins matched 'get_bd_intf_pins X'" then [BD 5-106] "Arguments to
    the connect_bd_intf_net command cannot be empty."; [BD 5-235] "No pins matched
    'get_bd_pins X'"; [BD 41-701] for connect_bd_net; [Common 17-39] "'cmd' failed due to
    earlier errors.";
  - the AXI DMA address spaces Data_MM2S, Data_S2MM, Data_SG and the PS7 segments
    HPn_DDR_LOWOCM (PYNQ board Tcl: assign_bd_address ... [get_bd_addr_spaces
    axi_dma_0/Data_SG] [get_bd_addr_segs processing_system7_0/S_AXI_HP0/HP0_DDR_LOWOCM]);
  - the .hwh's axi_dma PARAMETERs in both spellings, C_SG_LENGTH_WIDTH and c_sg_length_width
    (scripts that read them from Vivado's .hwh), and PYNQ's DMA driver reading
    description["parameters"]["c_include_sg"] (Xilinx/PYNQ, pynq/lib/dma.py,
    19ed17d4fd4ea71f95a97d30f8ccd0d62b8dbaaa).

Issue 30 (docs/vivado.md, "What the stubs model, and what is ruled out"): the PS7's DDR settings
are PYNQ's base.tcl's (v2.7.0 59515a9b, v3.0.1 93ddd21a); the stubs number the PS7's negative
DQS-delay critical warnings by occurrence and raise them after every later PS7 set_property
(fpgasystems/spooNN issue 14, fastmachinelearning/hls4ml issue 933); the runs read the XDC in
the fileset's order with a get_clocks that knows which clocks exist ([Vivado 12-627],
[Vivado 12-4739], [Vivado 12-5201]: enjoy-digital/litepcie issue 113) and a get_ports that
knows the block design's ports ([Vivado 12-584], [Common 17-55]), and route_design's
[Timing 38-282]; the b30b579 flow (git show) is run on them and stopped.

Property names. The stubs refuse a CONFIG.* property of processing_system7, axi_dma,
axi_interconnect or proc_sys_reset that is not in tests/tcl_stubs/ip_param_names.tcl, and
test_every_ip_property_is_a_real_parameter checks the recorded flow against the same list. The
names were taken from these public sources (repository, path, commit: what was taken):
  - Xilinx/PYNQ, boards/Pynq-Z1/base/base.tcl, 19a33c76c661274bae441281456dc111cdf67a91: the
    processing_system7 parameter names of the PYNQ-Z1 base overlay (its PS7 dump: PCW_UIPARAM_DDR_*,
    PCW_MIO_*_PULLUP, PCW_QSPI_*, PCW_ENET0_*, PCW_USB0_*, PCW_SD0_*, PCW_UART*, PCW_EN_CLK0_PORT,
    PCW_FPGA0_PERIPHERAL_FREQMHZ, PCW_S_AXI_HP*_DATA_WIDTH, PCW_USE_*, ...), axi_interconnect
    NUM_MI, proc_sys_reset (no properties set);
  - Xilinx/PYNQ-HelloWorld, boards/Pynq-Z1/resizer/resizer.tcl,
    7d30bb7df66a5f1b8c9f6b81a99574e963139c24 (Vivado 2020.2): PCW_ACT_FPGA0_PERIPHERAL_FREQMHZ,
    PCW_FPGA_FCLK0..3_ENABLE; axi_dma c_include_sg, c_sg_length_width, c_mm2s_burst_size,
    c_s2mm_burst_size, c_sg_include_stscntrl_strm; axi_interconnect NUM_SI, NUM_MI;
  - Xilinx/embeddedsw, XilinxProcessorIPLib/drivers/axidma/data/axidma.tcl,
    056ac087e6ed7780b63639e7871f7cbdc0beff4c: the axi_dma parameters C_INCLUDE_MM2S(_DRE),
    C_INCLUDE_S2MM(_DRE), C_M_AXI_MM2S_DATA_WIDTH, C_M_AXI_S2MM_DATA_WIDTH, C_INCLUDE_SG,
    C_MICRO_DMA, c_addr_width, c_sg_length_width, C_ENABLE_MULTI_CHANNEL, C_NUM_*_CHANNELS;
  - AMD PG022 (AXI DataMover, inside AXI DMA), User Parameters table: c_m_axis_mm2s_tdata_width,
    c_s_axis_s2mm_tdata_width (the AXI DMA stream widths; set on axi_dma 7.1 cells in public Tcl,
    e.g. MEEPproject/aurora-dma, ip/axi_dma.tcl).
PCW_SINGLE_QSPI_DATA_MODE, which the flow used to set, is in neither PYNQ-Z1 source and was
dropped (the IP default stands).
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

REPO = Path(__file__).resolve().parents[2]
VIVADO_DIR = REPO / "vivado"
STUBS = REPO / "tests" / "tcl_stubs"
RUNNER = STUBS / "run_stubbed.tcl"
BUILD_TCL = VIVADO_DIR / "build.tcl"
PARAM_NAMES = STUBS / "ip_param_names.tcl"
TCLSH = shutil.which("tclsh")
PART = "xc7z020clg400-1"

_spec = importlib.util.spec_from_file_location("vivado_engines", VIVADO_DIR / "engines.py")
engines_py = importlib.util.module_from_spec(_spec)
sys.modules["vivado_engines"] = engines_py
_spec.loader.exec_module(engines_py)

pytestmark = pytest.mark.skipif(TCLSH is None, reason="tclsh is not installed (apt-get install tcl)")

# The PL top (design `overlay`, docs/overlay.md).
OVERLAY_TOP = "pynq_overlay"
OVERLAY_STREAMS = [
    {"port": 0, "s_axis": "s0_axis", "s_axis_width": 64, "m_axis": "m0_axis", "m_axis_width": 32},
    {"port": 1, "s_axis": "s1_axis", "s_axis_width": 64, "m_axis": "m1_axis", "m_axis_width": 32},
]
ACLK_PARAMETER = "ASSOCIATED_BUSIF s0_axis:m0_axis:s1_axis:m1_axis, ASSOCIATED_RESET aresetn"
#: what the generator wrote before issue 19: a FREQ_HZ of its own, 10 Hz off the PS7's 142857132
OLD_ACLK_PARAMETER = ACLK_PARAMETER + ", FREQ_HZ 142857142"


# ------------------------------------------------------------------------------------------
# Stand-in designs for the error paths of engines.py and build.tcl (deliberate fakes, each
# with the port list a generator writes); the flow itself is tested on the real generator.
# ------------------------------------------------------------------------------------------
def axis_ports(prefix: str, direction: str, width: int) -> List[str]:
    inp, out = ("input ", "output") if direction == "in" else ("output", "input ")
    return [f"    {inp} wire [{width - 1}:0] {prefix}_tdata,",
            f"    {inp} wire [{width // 8 - 1}:0] {prefix}_tkeep,",
            f"    {inp} wire {prefix}_tvalid,",
            f"    {out} wire {prefix}_tready,",
            f"    {inp} wire {prefix}_tlast,"]


def verilog_top(top: str, pairs: List[tuple], aclk_parameter: Optional[str]) -> str:
    lines = ["`resetall", "`default_nettype none", f"module {top} ("]
    if aclk_parameter is not None:
        lines.append('    (* X_INTERFACE_INFO = "xilinx.com:signal:clock:1.0 aclk CLK" *)')
        lines.append(f'    (* X_INTERFACE_PARAMETER = "{aclk_parameter}" *)')
    lines.append("    input  wire aclk,")
    lines.append('    (* X_INTERFACE_PARAMETER = "POLARITY ACTIVE_LOW" *)')
    lines.append("    input  wire aresetn,")
    for s_name, s_w, m_name, m_w in pairs:
        lines += axis_ports(s_name, "in", s_w) + axis_ports(m_name, "out", m_w)
    lines[-1] = lines[-1].rstrip(",")
    lines += [");", "endmodule", "`resetall", ""]
    return "\n".join(lines)


def fake_render(design: str, params: Dict[str, Any], out_dir: str, s_width: int = 64,
                m_width: int = 32) -> Dict[str, Any]:
    """A single engine: s_axis/m_axis, no manifest streams."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    top = design.replace("-", "_")
    sources = ["sync_fifo.v", "delay_line.v", f"{top}.v"]
    for name in sources[:2]:
        (out / name).write_text(f"module {Path(name).stem}; endmodule\n")
    (out / f"{top}.v").write_text(verilog_top(top, [("s_axis", s_width, "m_axis", m_width)],
                                              None))
    manifest = {"design": design, "top": top, "sources": sources,
                "parameters": dict(params), "latency": 6}
    (out / "manifest.json").write_text(json.dumps(manifest))
    return manifest


def standin_overlay_render(design: str, params: Dict[str, Any], out_dir: str,
                           aclk_parameter: Optional[str] = ACLK_PARAMETER,
                           verilog_widths: tuple = (64, 32)) -> Dict[str, Any]:
    """The PL top's interface (ports, manifest streams) as the overlay generator writes it."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    s_w, m_w = verilog_widths
    (out / "sync_fifo.v").write_text("module sync_fifo; endmodule\n")
    (out / f"{OVERLAY_TOP}.v").write_text(verilog_top(
        OVERLAY_TOP, [("s0_axis", s_w, "m0_axis", m_w), ("s1_axis", s_w, "m1_axis", m_w)],
        aclk_parameter))
    manifest = {"design": "overlay", "top": OVERLAY_TOP,
                "sources": ["sync_fifo.v", f"{OVERLAY_TOP}.v"], "parameters": dict(params),
                "latency": 7, "streams": [dict(st) for st in OVERLAY_STREAMS]}
    (out / "manifest.json").write_text(json.dumps(manifest))
    return manifest


# ------------------------------------------------------------------------------------------
# The real generator
# ------------------------------------------------------------------------------------------
def manifest_sources(out: Path, design_dir: str) -> Dict[str, Any]:
    manifest = json.loads((out / design_dir / "manifest.json").read_text())
    sources = [str((out / design_dir / s).resolve()) for s in manifest["sources"]]
    return {"sources": sources, "top": manifest["top"], "manifest": manifest}


@pytest.fixture(scope="module")
def overlay(tmp_path_factory) -> Dict[str, Any]:
    """engines.tcl of the default build: the PL top `overlay`, from the real generator."""
    out = tmp_path_factory.mktemp("engines") / "vivado" / "engines"
    tcl = engines_py.write_engines_tcl(list(engines_py.DEFAULT_ENGINES), out)
    return dict(manifest_sources(out, "overlay"), tcl=tcl)


@pytest.fixture(scope="module")
def stage4(tmp_path_factory) -> Dict[str, Any]:
    """engines.tcl for two single ternary engines (the write-up's Stage 4), real generator."""
    out = tmp_path_factory.mktemp("engines4") / "vivado" / "engines"
    tcl = engines_py.write_engines_tcl(["ternary-engine", "ternary-engine"], out)
    return dict(manifest_sources(out, "ternary-engine"), tcl=tcl)


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
def good(tmp_path_factory, overlay) -> Flow:
    """The default build (the PL top) with positive slack (the write-up's WNS +0.062 ns)."""
    flow = run_build(tmp_path_factory.mktemp("good"), overlay["tcl"], {"STUB_WNS": "0.062"})
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


def test_board_part_is_used_only_when_installed(tmp_path, overlay):
    bp = "www.digilentinc.com:pynq-z1:part0:1.0"
    flow = run_build(tmp_path, overlay["tcl"], {"STUB_BOARD_PART": bp})
    assert flow.rc == 0, flow.stdout
    assert any(c["args"][:2] == ["board_part", bp] for c in flow.of("set_property"))
    # the explicit PS7 settings are applied either way
    assert flow.props("/ps7")["CONFIG.PCW_UIPARAM_DDR_PARTNO"] == "Custom"


def test_missing_part_fails_clearly(tmp_path, overlay):
    flow = run_build(tmp_path, overlay["tcl"], {"STUB_NO_PART": "1"})
    assert flow.rc != 0
    assert "part xc7z020clg400-1 is not installed" in flow.stdout
    assert "create_project" not in flow.cmds()


#: Every PCW_UIPARAM_DDR_<name> of PYNQ's own PYNQ-Z1 base overlay, the same at both board images
#: the flow is for: Xilinx/PYNQ boards/Pynq-Z1/base/base.tcl at v2.7.0
#: (59515a9b5de6fad0ff0538bfc50010b16f53c9a8, Vivado 2020.2, lines 3456-3527) and at v3.0.1
#: (93ddd21ab623883590a8c8b07f0b157b2855da4b, Vivado 2022.1, lines 3431-3502).
BASE_TCL_DDR = {
    "ADV_ENABLE": "0", "AL": "0", "BANK_ADDR_COUNT": "3", "BL": "8", "BOARD_DELAY0": "0.223",
    "BOARD_DELAY1": "0.212", "BOARD_DELAY2": "0.085", "BOARD_DELAY3": "0.092",
    "BUS_WIDTH": "16 Bit", "CL": "7", "CLOCK_0_LENGTH_MM": "25.8",
    "CLOCK_0_PACKAGE_LENGTH": "80.4535", "CLOCK_0_PROPOGATION_DELAY": "160",
    "CLOCK_1_LENGTH_MM": "25.8", "CLOCK_1_PACKAGE_LENGTH": "80.4535",
    "CLOCK_1_PROPOGATION_DELAY": "160", "CLOCK_2_LENGTH_MM": "0",
    "CLOCK_2_PACKAGE_LENGTH": "80.4535", "CLOCK_2_PROPOGATION_DELAY": "160",
    "CLOCK_3_LENGTH_MM": "0", "CLOCK_3_PACKAGE_LENGTH": "80.4535",
    "CLOCK_3_PROPOGATION_DELAY": "160", "CLOCK_STOP_EN": "0", "COL_ADDR_COUNT": "10", "CWL": "6",
    "DEVICE_CAPACITY": "4096 MBits", "DQS_0_LENGTH_MM": "15.6", "DQS_0_PACKAGE_LENGTH": "105.056",
    "DQS_0_PROPOGATION_DELAY": "160", "DQS_1_LENGTH_MM": "18.8", "DQS_1_PACKAGE_LENGTH": "66.904",
    "DQS_1_PROPOGATION_DELAY": "160", "DQS_2_LENGTH_MM": "0", "DQS_2_PACKAGE_LENGTH": "89.1715",
    "DQS_2_PROPOGATION_DELAY": "160", "DQS_3_LENGTH_MM": "0", "DQS_3_PACKAGE_LENGTH": "113.63",
    "DQS_3_PROPOGATION_DELAY": "160", "DQS_TO_CLK_DELAY_0": "0.040",
    "DQS_TO_CLK_DELAY_1": "0.058", "DQS_TO_CLK_DELAY_2": "0.000", "DQS_TO_CLK_DELAY_3": "0.000",
    "DQ_0_LENGTH_MM": "16.5", "DQ_0_PACKAGE_LENGTH": "98.503", "DQ_0_PROPOGATION_DELAY": "160",
    "DQ_1_LENGTH_MM": "18", "DQ_1_PACKAGE_LENGTH": "68.5855", "DQ_1_PROPOGATION_DELAY": "160",
    "DQ_2_LENGTH_MM": "0", "DQ_2_PACKAGE_LENGTH": "90.295", "DQ_2_PROPOGATION_DELAY": "160",
    "DQ_3_LENGTH_MM": "0", "DQ_3_PACKAGE_LENGTH": "103.977", "DQ_3_PROPOGATION_DELAY": "160",
    "DRAM_WIDTH": "16 Bits", "ECC": "Disabled", "ENABLE": "1", "FREQ_MHZ": "525",
    "HIGH_TEMP": "Normal (0-85)", "MEMORY_TYPE": "DDR 3", "PARTNO": "Custom",
    "ROW_ADDR_COUNT": "15", "SPEED_BIN": "DDR3_1066F", "TRAIN_DATA_EYE": "1",
    "TRAIN_READ_GATE": "1", "TRAIN_WRITE_LEVEL": "1", "T_FAW": "40.0", "T_RAS_MIN": "35.0",
    "T_RC": "50.625", "T_RCD": "13.125", "T_RP": "13.125", "USE_INTERNAL_VREF": "0"
}


def test_ps7_ddr_is_pynq_base_tcl(good):
    """The PS7's DDR settings are base.tcl's, every one of them, and no other DDR setting."""
    p = good.props("/ps7")
    got = {k[len("CONFIG.PCW_UIPARAM_DDR_"):]: v for k, v in p.items()
           if k.startswith("CONFIG.PCW_UIPARAM_DDR_")}
    assert got == BASE_TCL_DDR
    assert BASE_TCL_DDR["DQS_TO_CLK_DELAY_2"] == BASE_TCL_DDR["DQS_TO_CLK_DELAY_3"] == "0.000"


def test_ps7_has_pynq_z1_ddr_and_mio(good):
    p = good.props("/ps7")
    assert p["CONFIG.PCW_UIPARAM_DDR_BUS_WIDTH"] == "16 Bit"
    assert p["CONFIG.PCW_UIPARAM_DDR_FREQ_MHZ"] == "525"
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
def test_fclk_readback_mismatch_fails_the_build(tmp_path, overlay, actual):
    flow = run_build(tmp_path, overlay["tcl"], {"STUB_FCLK0_ACT": actual or "none"})
    assert flow.rc != 0
    assert "FCLK_CLK0 is" in flow.stdout and "PCW_ACT_FPGA0_PERIPHERAL_FREQMHZ" in flow.stdout
    assert "launch_runs" not in flow.cmds()
    assert "write_bitstream" not in flow.cmds()


def test_fclk_option_is_checked_against_readback(tmp_path, overlay):
    # asking for 100 MHz while the PS7 reports 142.857 must fail too
    flow = run_build(tmp_path, overlay["tcl"], extra=["--fclk-mhz", "100"])
    assert flow.rc != 0
    assert "requested 100 MHz" in flow.stdout


# ------------------------------------------------------------------------------------------
# The PL top, DMAs, interconnect
# ------------------------------------------------------------------------------------------
def test_ip_versions_are_looked_up_not_pinned(good):
    patterns = [c["args"][-1] for c in good.of("get_ipdefs")]
    for ip in ("processing_system7", "axi_dma", "axi_interconnect", "proc_sys_reset"):
        assert f"xilinx.com:ip:{ip}:*" in patterns
    text = "".join(p.read_text() for p in VIVADO_DIR.glob("*.tcl"))
    assert not re.search(r"xilinx\.com:ip:\w+:\d", text), "a hard-pinned IP version"


def test_the_pl_top_is_one_module_reference(good, overlay):
    assert overlay["top"] == OVERLAY_TOP
    refs = [a for a in good.joined("create_bd_cell") if "-type module" in a]
    assert refs == [f"-type module -reference {OVERLAY_TOP} overlay"]
    assert "overlay: overlay (top pynq_overlay)" in good.stdout


def test_two_dmas_in_scatter_gather_mode_with_the_manifest_widths(good, overlay):
    cells = good.joined("create_bd_cell")
    assert len([a for a in cells if "axi_dma" in a]) == 2
    streams = overlay["manifest"]["streams"]
    assert [(st["port"], st["s_axis"], st["m_axis"]) for st in streams] == [
        (0, "s0_axis", "m0_axis"), (1, "s1_axis", "m1_axis")]
    for st in streams:
        p = good.props(f"/dma_{st['port']}")
        assert p["CONFIG.C_INCLUDE_SG"] == "1"
        assert p["CONFIG.C_SG_INCLUDE_STSCNTRL_STRM"] == "0"    # no control/status streams
        assert p["CONFIG.C_SG_LENGTH_WIDTH"] == "26"
        assert p["CONFIG.C_MICRO_DMA"] == "0"
        assert p["CONFIG.C_INCLUDE_MM2S"] == "1"
        assert p["CONFIG.C_INCLUDE_S2MM"] == "1"
        assert p["CONFIG.C_M_AXIS_MM2S_TDATA_WIDTH"] == str(st["s_axis_width"]) == "64"
        assert p["CONFIG.C_M_AXI_MM2S_DATA_WIDTH"] == "64"
        assert p["CONFIG.C_S_AXIS_S2MM_TDATA_WIDTH"] == str(st["m_axis_width"]) == "32"
        assert p["CONFIG.C_M_AXI_S2MM_DATA_WIDTH"] == "32"


def test_dma_p_feeds_stream_pair_p_on_hp_port_p(good):
    nets = good.joined("connect_bd_intf_net")
    for p in (0, 1):
        assert f"/dma_{p}/M_AXIS_MM2S /overlay/s{p}_axis" in nets
        assert f"/overlay/m{p}_axis /dma_{p}/S_AXIS_S2MM" in nets
        assert f"/dma_{p}/M_AXI_MM2S /hp{p}_ic/S00_AXI" in nets
        assert f"/dma_{p}/M_AXI_S2MM /hp{p}_ic/S01_AXI" in nets
        assert f"/dma_{p}/M_AXI_SG /hp{p}_ic/S02_AXI" in nets      # descriptors in DDR
        assert f"/hp{p}_ic/M00_AXI /ps7/S_AXI_HP{p}" in nets
        assert good.props(f"/hp{p}_ic")["CONFIG.NUM_SI"] == "3"
        assert f"MM2S on HP{p}, S2MM on HP{p}, SG on HP{p}" in good.stdout
    assert len(nets) == 3 + 3 * 2 + 4 * 2  # DDR, FIXED_IO, GP0; per DMA 3; per HP 4


def test_aclk_carries_the_stream_and_reset_association(good, overlay):
    """The top's Verilog (the overlay generator writes it) names every stream interface."""
    top_v = next(Path(s) for s in overlay["sources"] if Path(s).name == f"{OVERLAY_TOP}.v")
    ports = engines_py.top_ports(top_v, OVERLAY_TOP)
    params = engines_py.interface_parameters(ports["aclk"]["attrs"]["X_INTERFACE_PARAMETER"])
    assert params["ASSOCIATED_BUSIF"].split(":") == ["s0_axis", "m0_axis", "s1_axis", "m1_axis"]
    assert params["ASSOCIATED_RESET"] == "aresetn"
    assert "overlay/aclk: ASSOCIATED_BUSIF s0_axis:m0_axis:s1_axis:m1_axis, " \
           "ASSOCIATED_RESET aresetn" in good.stdout


def test_single_engines_still_build_one_dma_each(tmp_path, stage4):
    flow = run_build(tmp_path, stage4["tcl"])
    assert flow.rc == 0, flow.stdout
    refs = [a for a in flow.joined("create_bd_cell") if "-type module" in a]
    assert refs == [f"-type module -reference {stage4['top']} engine_0",
                    f"-type module -reference {stage4['top']} engine_1"]
    nets = flow.joined("connect_bd_intf_net")
    for i in (0, 1):
        assert f"/dma_{i}/M_AXIS_MM2S /engine_{i}/s_axis" in nets
        assert f"/engine_{i}/m_axis /dma_{i}/S_AXIS_S2MM" in nets
        assert f"/dma_{i}/M_AXI_MM2S /hp{i}_ic/S00_AXI" in nets
        assert f"/dma_{i}/M_AXI_SG /hp{i}_ic/S02_AXI" in nets
    assert "engine_0: aclk carries no X_INTERFACE_PARAMETER" in flow.stdout
    # Vivado associates the lone clock with both streams: the FREQ_HZ propagates, no warning
    assert "engine_1/aclk: FREQ_HZ 142857132" in flow.stdout


def test_single_engine_splits_mm2s_and_s2mm_over_hp0_hp1(tmp_path):
    tcl = engines_py.write_engines_tcl(["ternary-engine"], tmp_path / "e" / "engines")
    flow = run_build(tmp_path, tcl)
    assert flow.rc == 0, flow.stdout
    nets = flow.joined("connect_bd_intf_net")
    assert "/dma_0/M_AXI_MM2S /hp0_ic/S00_AXI" in nets
    assert "/dma_0/M_AXI_SG /hp0_ic/S01_AXI" in nets
    assert "/dma_0/M_AXI_S2MM /hp1_ic/S00_AXI" in nets


def test_attention_engine_at_48_macs_gets_a_128_bit_dma(tmp_path):
    """The width comes from the Verilog port, not from a `bytes` parameter the design lacks."""
    tcl = engines_py.write_engines_tcl(["attention-engine:macs=48:max_context=64"],
                                       tmp_path / "e" / "engines")
    flow = run_build(tmp_path, tcl)
    assert flow.rc == 0, flow.stdout
    p = flow.props("/dma_0")
    assert p["CONFIG.C_M_AXIS_MM2S_TDATA_WIDTH"] == "128"
    assert p["CONFIG.C_M_AXI_MM2S_DATA_WIDTH"] == "128"
    assert "TDATA_NUM_BYTES" not in flow.stdout


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
                "/rst_fclk0/slowest_sync_clk", "/ctrl_ic/ACLK", "/overlay/aclk"):
        assert pin in clk
    rst = nets["/rst_fclk0/peripheral_aresetn"]
    assert "/overlay/aresetn" in rst
    for i in (0, 1):
        for pin in ("s_axi_lite_aclk", "m_axi_mm2s_aclk", "m_axi_s2mm_aclk", "m_axi_sg_aclk"):
            assert f"/dma_{i}/{pin}" in clk
        assert f"/dma_{i}/axi_resetn" in rst
        assert f"/hp{i}_ic/ACLK" in clk and f"/hp{i}_ic/M00_ACLK" in clk
        assert f"/hp{i}_ic/S02_ACLK" in clk and f"/hp{i}_ic/S02_ARESETN" in rst
        assert f"/hp{i}_ic/ARESETN" in nets["/rst_fclk0/interconnect_aresetn"]
    assert nets["/ps7/FCLK_RESET0_N"] == ["/rst_fclk0/ext_reset_in"]
    assert "apply_bd_automation" not in good.cmds()
    assert good.index("validate_bd_design") < good.index("generate_target")


def test_every_generated_source_is_added(good, overlay):
    added = []
    for c in good.of("add_files"):
        a = c["args"]
        if a[a.index("-fileset") + 1] == "sources_1":
            for word in a[a.index("-fileset") + 2:]:
                added.extend(word.split())
    for src in overlay["sources"]:
        assert src in added, f"{src} not added"
    assert good.index("add_files") < good.index("create_bd_design")
    constrs = [c for c in good.of("add_files") if "constrs_1" in c["args"]]
    xdcs = " ".join(" ".join(c["args"]) for c in constrs)
    assert str(REPO / "constraints" / "pynq_z1.xdc") in xdcs
    assert str(REPO / "constraints" / "clocks.xdc") in xdcs


def test_missing_generated_source_fails(tmp_path, overlay):
    text = overlay["tcl"].read_text()
    bad = tmp_path / "engines.tcl"
    bad.write_text(text.replace(overlay["sources"][0], str(tmp_path / "gone.v")))
    flow = run_build(tmp_path, bad)
    assert flow.rc != 0
    assert "gone.v is missing" in flow.stdout


# ------------------------------------------------------------------------------------------
# Block-design critical warnings stop the build
# ------------------------------------------------------------------------------------------
def test_bd_critical_warnings_are_counted_around_the_block_design(good):
    cmds = good.cmds()
    raised = [c["args"] for c in good.of("set_msg_config")]
    assert ["-id", "BD 41-237", "-new_severity", "ERROR"] in raised
    assert cmds.index("set_msg_config") < cmds.index("create_bd_design")
    counts = [i for i, c in enumerate(cmds) if c == "get_msg_config"]
    assert counts and min(counts) < cmds.index("create_bd_design")
    assert max(counts) > cmds.index("validate_bd_design")
    assert max(counts) < cmds.index("save_bd_design")
    assert "Block design: validated, no critical warnings." in good.stdout


def test_tdata_width_mismatch_stops_the_build(tmp_path, overlay):
    """dma_0 configured for 128 bit against the top's 64-bit s0_axis: TDATA_NUM_BYTES."""
    text = overlay["tcl"].read_text()
    bad = tmp_path / "engines.tcl"
    mutated = re.sub(r"(\{name dma_0 .*?s_axis_width )64", r"\g<1>128", text)
    assert mutated != text
    bad.write_text(mutated)
    flow = run_build(tmp_path, bad)
    assert flow.rc != 0
    assert "ERROR: [BD 41-237] Bus Interface property TDATA_NUM_BYTES does not match between " \
           "/overlay/s0_axis(8) and /dma_0/M_AXIS_MM2S(16)" in flow.stdout
    # ... and validate_bd_design fails on it: [Common 17-39], counted too
    assert "the block design raised 2 critical warning(s) or error(s)" in flow.stdout
    assert "save_bd_design" not in flow.cmds() and "launch_runs" not in flow.cmds()


def test_any_bd_critical_warning_stops_the_build(tmp_path, overlay):
    flow = run_build(tmp_path, overlay["tcl"], {"STUB_BD_CRITICAL_WARNINGS": "2"})
    assert flow.rc != 0
    assert "CRITICAL WARNING: [BD 41-1356]" in flow.stdout
    assert "the block design raised 2 critical warning(s) or error(s)" in flow.stdout
    assert "launch_runs" not in flow.cmds()


def ps7_setting_calls(flow: Flow) -> List[Dict[str, Any]]:
    return [c for c in flow.of("set_property") if "/ps7" in c["objects"]]


def psu_lines(flow: Flow) -> List[str]:
    return [line for line in flow.stdout.splitlines() if "[PSU-" in line]


def test_no_ps7_ddr_warning_and_no_exemption_by_id(good):
    """base.tcl's DDR settings raise no [PSU-n]; the flow counts every critical warning of the
    block design and exempts none by its ID."""
    assert psu_lines(good) == []
    assert not [c for c in good.of("get_msg_config") if "-id" in c["args"]]
    code = [line.split("#")[0] for line in BUILD_TCL.read_text().splitlines()]
    assert not [line for line in code if "PSU-" in line or
                re.search(r"get_msg_config\b.*-id\b", line)]


def mutant_ps7(tmp_path: Path, delays: Dict[int, str]) -> Path:
    """A copy of vivado/ with some DQS_TO_CLK_DELAY_<lane> values changed."""
    mutant = tmp_path / "vivado"
    shutil.copytree(VIVADO_DIR, mutant, ignore=shutil.ignore_patterns("__pycache__"))
    ps7 = mutant / "ps7_pynq_z1.tcl"
    text = ps7.read_text()
    for lane, value in delays.items():
        name = f"CONFIG.PCW_UIPARAM_DDR_DQS_TO_CLK_DELAY_{lane}"
        old = f"{name} {{{BASE_TCL_DDR[f'DQS_TO_CLK_DELAY_{lane}']}}}"
        assert text.count(old) == 1, old
        text = text.replace(old, f"{name} {{{value}}}")
    ps7.write_text(text)
    return mutant / "build.tcl"


@pytest.mark.parametrize("delays", [{1: "-0.020", 3: "-0.033"}, {0: "-0.040"},
                                    {0: "-0.050", 1: "-0.044", 2: "-0.035", 3: "-0.100"}])
def test_ps7_ddr_warnings_are_numbered_by_occurrence_and_stop_the_build(tmp_path, overlay,
                                                                        delays):
    """Negative lanes in lane order get PSU-1, PSU-2, ... (not PSU-<lane+1>), raised again
    after every later set_property on the PS7; any of them stops the build."""
    flow = run_tcl(mutant_ps7(tmp_path, delays), ["--out", str(tmp_path / "out"),
                                                  "--engines-tcl", str(overlay["tcl"]),
                                                  "--xdc", " ".join(map(str, FLOW_XDC))],
                   tmp_path)
    assert flow.rc != 0
    calls = ps7_setting_calls(flow)
    first = min(i for i, c in enumerate(calls)
                if any(f"DQS_TO_CLK_DELAY_{lane}" in k for k in c["props"] for lane in delays))
    one_round = [f"CRITICAL WARNING: [PSU-{n + 1}] Parameter : PCW_UIPARAM_DDR_DQS_TO_CLK_DELAY_"
                 f"{lane} has negative value {delays[lane]} . PS DDR interfaces might fail when "
                 f"entering negative DQS skew values." for n, lane in enumerate(sorted(delays))]
    rounds = len(calls) - first
    assert rounds >= 2, "the PS7 is set again after its DDR settings"
    assert psu_lines(flow) == one_round * rounds
    assert (f"the block design raised {len(delays) * rounds} critical warning(s) or error(s)"
            in flow.stdout)
    assert "launch_runs" not in flow.cmds()


#: the constraint files in the order build.tcl reads them by default
FLOW_XDC = [REPO / "constraints" / "pynq_z1.xdc", REPO / "constraints" / "clocks.xdc"]
OLD_COMMIT = "b30b579"
OLD_FILES = ["vivado/build.tcl", "vivado/ps7_pynq_z1.tcl", "vivado/timing_gate.tcl",
             "constraints/clocks.xdc", "constraints/pynq_z1.xdc"]


@pytest.fixture(scope="module")
def old_tree(tmp_path_factory) -> Path:
    """The flow as it stood at b30b579 (before issue 30), from git."""
    root = tmp_path_factory.mktemp("b30b579")
    for path in OLD_FILES:
        proc = subprocess.run(["git", "-C", str(REPO), "show", f"{OLD_COMMIT}:{path}"],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.skip(f"{OLD_COMMIT} is not in this clone's history: {proc.stderr.strip()}")
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(proc.stdout)
    return root


def test_the_old_tcl_stops_at_the_ps7_ddr_warnings(tmp_path, old_tree, overlay):
    """At b30b579 the PS7 had DQS_TO_CLK_DELAY_2/3 = -0.009/-0.033 and build.tcl exempted PSU-3
    and PSU-4: Vivado numbers the two warnings PSU-1 and PSU-2, so the old flow stops at its
    block-design gate (as the public logs say a real build would)."""
    flow = run_tcl(old_tree / "vivado" / "build.tcl", ["--out", str(tmp_path / "out"),
                                                       "--engines-tcl", str(overlay["tcl"])],
                   tmp_path)
    assert flow.rc != 0
    calls = ps7_setting_calls(flow)
    first = min(i for i, c in enumerate(calls)
                if "CONFIG.PCW_UIPARAM_DDR_DQS_TO_CLK_DELAY_2" in c["props"])
    rounds = len(calls) - first
    one_round = ["CRITICAL WARNING: [PSU-1] Parameter : PCW_UIPARAM_DDR_DQS_TO_CLK_DELAY_2 has "
                 "negative value -0.009 . PS DDR interfaces might fail when entering negative "
                 "DQS skew values.",
                 "CRITICAL WARNING: [PSU-2] Parameter : PCW_UIPARAM_DDR_DQS_TO_CLK_DELAY_3 has "
                 "negative value -0.033 . PS DDR interfaces might fail when entering negative "
                 "DQS skew values."]
    assert rounds >= 2
    assert psu_lines(flow) == one_round * rounds
    assert f"the block design raised {2 * rounds} critical warning(s) or error(s)" in flow.stdout
    assert "launch_runs" not in flow.cmds()


def test_an_interface_the_top_does_not_have_is_an_error(tmp_path, overlay):
    text = overlay["tcl"].read_text()
    bad = tmp_path / "engines.tcl"
    bad.write_text(text.replace("s_axis s1_axis", "s_axis s9_axis"))
    flow = run_build(tmp_path, bad)
    assert flow.rc != 0
    assert "s9_axis is not in the ASSOCIATED_BUSIF of aclk" in flow.stdout


def test_build_tcl_refuses_a_pl_top_without_clock_association(tmp_path, overlay):
    text = overlay["tcl"].read_text()
    bad = tmp_path / "engines.tcl"
    mutated = re.sub(r"aclk_busif \{[^}]*\}", "aclk_busif {}", text)
    assert mutated != text
    bad.write_text(mutated)
    flow = run_build(tmp_path, bad)
    assert flow.rc != 0
    assert "overlay: aclk has no X_INTERFACE_PARAMETER ASSOCIATED_BUSIF" in flow.stdout
    assert "create_project" not in flow.cmds()


# ------------------------------------------------------------------------------------------
# Property names: the stubs know Vivado's names
# ------------------------------------------------------------------------------------------
def real_param_names() -> Dict[str, List[str]]:
    script = (f"source {{{PARAM_NAMES}}}\n"
              "foreach ip [lsort [array names stub::ip_params]] {"
              "puts [join [concat $ip $stub::ip_params($ip)]]}\n")
    out = subprocess.run([TCLSH], input=script, capture_output=True, text=True, check=True)
    names = {}
    for line in out.stdout.splitlines():
        ip, *rest = line.split()
        names[ip] = [n.upper() for n in rest]
    return names


def unknown_ip_properties(flow: Flow) -> List[str]:
    """Every CONFIG.* set on a cell of the four IPs that is not in ip_param_names.tcl."""
    names = real_param_names()
    ip_of = {}
    for c in flow.of("create_bd_cell"):
        a = c["args"]
        if "-vlnv" in a:
            ip_of["/" + a[-1]] = a[a.index("-vlnv") + 1].split(":")[2]
    bad = []
    for c in flow.of("set_property"):
        for obj in c["objects"]:
            ip = ip_of.get(obj)
            if ip is None:
                continue
            for prop in c["props"]:
                if prop.upper().removeprefix("CONFIG.") not in names[ip]:
                    bad.append(f"{ip} {obj} {prop}")
    return bad


def test_the_name_list_covers_the_four_ips():
    names = real_param_names()
    assert set(names) == {"processing_system7", "axi_dma", "axi_interconnect", "proc_sys_reset"}
    assert names["proc_sys_reset"] == []
    assert {"NUM_SI", "NUM_MI"} == set(names["axi_interconnect"])
    text = PARAM_NAMES.read_text()
    for source in ("Xilinx/PYNQ, boards/Pynq-Z1/base/base.tcl",
                   "Xilinx/PYNQ-HelloWorld, boards/Pynq-Z1/resizer/resizer.tcl",
                   "Xilinx/embeddedsw, XilinxProcessorIPLib/drivers/axidma/data/axidma.tcl",
                   "PG022"):
        assert source in text and source.split(",")[0] in __doc__


def test_every_ip_property_is_a_real_parameter(good):
    cells = {c["args"][-1] for c in good.of("create_bd_cell") if "-vlnv" in c["args"]}
    assert {"ps7", "rst_fclk0", "ctrl_ic", "hp0_ic", "hp1_ic", "dma_0", "dma_1"} <= cells
    assert len([c for c in good.of("set_property") if "/dma_0" in c["objects"]]) >= 1
    assert unknown_ip_properties(good) == []


def run_mutant(tmp_path: Path, engines_tcl: Path, path: str, good_text: str, bad_text: str,
               env: Optional[Dict[str, str]] = None) -> Flow:
    """The flow with one edit in vivado/PATH (GOOD_TEXT, found once, becomes BAD_TEXT)."""
    mutant = tmp_path / "vivado"
    shutil.copytree(VIVADO_DIR, mutant, ignore=shutil.ignore_patterns("__pycache__"))
    text = (mutant / path).read_text()
    assert text.count(good_text) == 1, good_text
    (mutant / path).write_text(text.replace(good_text, bad_text))
    return run_tcl(mutant / "build.tcl", ["--out", str(tmp_path / "out"), "--engines-tcl",
                                          str(engines_tcl), "--xdc",
                                          str(REPO / "constraints" / "clocks.xdc")], tmp_path, env)


@pytest.mark.parametrize("path, good_text, typo, ip", [
    ("build.tcl", "set dma_sg_config {c_include_sg 1", "set dma_sg_config {c_inculde_sg 1",
     "axi_dma"),
    ("build.tcl", "c_sg_include_stscntrl_strm 0}", "c_sg_include_stscntrl_stream 0}", "axi_dma"),
    ("build.tcl", "CONFIG.c_m_axis_mm2s_tdata_width $in_w",
     "CONFIG.c_m_axis_mm2s_data_width $in_w", "axi_dma"),
    ("build.tcl", "CONFIG.NUM_SI {1}", "CONFIG.NUM_SLAVES {1}", "axi_interconnect"),
    ("build.tcl", "CONFIG.PCW_USE_S_AXI_HP1 {1}", "CONFIG.PCW_USE_S_AXI_HP_1 {1}",
     "processing_system7"),
    ("ps7_pynq_z1.tcl", "CONFIG.PCW_UIPARAM_DDR_BOARD_DELAY0 {0.223}",
     "CONFIG.PCW_UIPARAM_DDR_BOARD_DELAYO {0.223}", "processing_system7"),
    ("build.tcl", "add_ip proc_sys_reset rst_fclk0",
     "set_property CONFIG.C_EXT_RST_WIDTH {4} [add_ip proc_sys_reset rst_fclk0]",
     "proc_sys_reset"),
])
def test_a_misspelt_config_key_fails(tmp_path, overlay, path, good_text, typo, ip):
    """Mutants of the flow with one wrong property name: the stubs stop it, as Vivado does."""
    flow = run_mutant(tmp_path, overlay["tcl"], path, good_text, typo)
    assert flow.rc != 0
    assert f"is not a parameter of {ip}" in flow.stdout
    assert "launch_runs" not in flow.cmds()


# ------------------------------------------------------------------------------------------
# Clock properties: the PL top takes FCLK_CLK0's frequency as IP integrator propagates it
# ------------------------------------------------------------------------------------------
ACLK_ATTR = f'(* X_INTERFACE_PARAMETER = "{ACLK_PARAMETER}" *)'


def pl_top_with(tmp_path: Path, overlay: Dict[str, Any], old: str, new: str) -> Path:
    """engines.tcl for a copy of the real generated PL top with OLD (found once) made NEW in
    its Verilog."""
    src_dir = Path(overlay["sources"][0]).parent
    dst = tmp_path / "top"
    shutil.copytree(src_dir, dst)
    top = dst / f"{OVERLAY_TOP}.v"
    text = top.read_text()
    assert text.count(old) == 1, old
    top.write_text(text.replace(old, new))
    tcl = tmp_path / "engines.tcl"
    tcl.write_text(overlay["tcl"].read_text().replace(str(src_dir), str(dst)))
    return tcl


def test_the_top_takes_its_clock_from_fclk0(good, overlay):
    """The generated aclk declares no FREQ_HZ or CLK_DOMAIN: both come from FCLK_CLK0, at the
    frequency the PS7 reports (the same read-back the flow checks)."""
    top_v = next(Path(s) for s in overlay["sources"] if Path(s).name == f"{OVERLAY_TOP}.v")
    assert ACLK_ATTR in top_v.read_text()
    params = engines_py.interface_parameters(ACLK_PARAMETER)
    assert "FREQ_HZ" not in params and "CLK_DOMAIN" not in params
    assert "overlay/aclk: FREQ_HZ 142857132, CLK_DOMAIN system_ps7_0_FCLK_CLK0 " \
           "(from ps7/FCLK_CLK0)" in good.stdout
    assert "[BD 41-23" not in good.stdout and "[BD 41-967]" not in good.stdout


def test_the_old_top_with_a_freq_hz_of_its_own_stops_the_build(tmp_path, overlay):
    """Issue 19: FREQ_HZ 142857142 on aclk against the PS7's 142857132. Vivado reports the pin
    [BD 41-238] and every stream associated with it [BD 41-237]; the build stops before the
    block design is saved."""
    tcl = pl_top_with(tmp_path, overlay, ACLK_ATTR,
                      f'(* X_INTERFACE_PARAMETER = "{OLD_ACLK_PARAMETER}" *)')
    flow = run_build(tmp_path, tcl)
    assert flow.rc != 0
    assert "CRITICAL WARNING: [BD 41-238] Port/Pin property FREQ_HZ does not match between " \
           "/overlay/aclk(142857142) and /ps7/FCLK_CLK0(142857132)" in flow.stdout
    for p in (0, 1):
        assert "[BD 41-237] Bus Interface property FREQ_HZ does not match between " \
               f"/overlay/s{p}_axis(142857142) and /dma_{p}/M_AXIS_MM2S(142857132)" in flow.stdout
        assert "[BD 41-237] Bus Interface property FREQ_HZ does not match between " \
               f"/dma_{p}/S_AXIS_S2MM(142857132) and /overlay/m{p}_axis(142857142)" in flow.stdout
    assert "the block design raised 6 critical warning(s) or error(s)" in flow.stdout
    assert "save_bd_design" not in flow.cmds() and "launch_runs" not in flow.cmds()


@pytest.mark.parametrize("extra, fclk_act, error", [
    (", FREQ_HZ 142857132", None, None),              # the PS7's actual frequency: builds
    (", FREQ_HZ 142857142", "142.857142", None),      # passes only where the PS7 makes that
    (", CLK_DOMAIN system_ps7_0_FCLK_CLK0", None, None),
    (", CLK_DOMAIN pynq_overlay_aclk", None,
     "Port/Pin property CLK_DOMAIN does not match between /overlay/aclk(pynq_overlay_aclk) "
     "and /ps7/FCLK_CLK0(system_ps7_0_FCLK_CLK0)"),
])
def test_a_clock_property_of_its_own_must_match_the_source(tmp_path, overlay, extra, fclk_act,
                                                           error):
    tcl = pl_top_with(tmp_path, overlay, ACLK_ATTR,
                      f'(* X_INTERFACE_PARAMETER = "{ACLK_PARAMETER}{extra}" *)')
    flow = run_build(tmp_path, tcl, {"STUB_FCLK0_ACT": fclk_act} if fclk_act else None)
    if error is None:
        assert flow.rc == 0, flow.stdout
        assert "[BD 41-23" not in flow.stdout
    else:
        assert flow.rc != 0
        assert f"CRITICAL WARNING: [BD 41-238] {error}" in flow.stdout
        assert "Bus Interface property CLK_DOMAIN does not match" in flow.stdout
        assert "save_bd_design" not in flow.cmds()


def test_a_stream_missing_from_associated_busif_stops_the_build(tmp_path, overlay):
    """The Verilog leaves m1_axis out of aclk's ASSOCIATED_BUSIF (engines.tcl still lists it):
    the interface has no clock, IP integrator gives it 100 MHz, and the net to the DMA
    mismatches."""
    tcl = pl_top_with(tmp_path, overlay, "s1_axis:m1_axis, ASSOCIATED_RESET",
                      "s1_axis, ASSOCIATED_RESET")
    flow = run_build(tmp_path, tcl)
    assert flow.rc != 0
    assert "CRITICAL WARNING: [BD 41-967] AXI interface pin /overlay/m1_axis is not associated " \
           "to any clock pin" in flow.stdout
    assert "[BD 41-237] Bus Interface property FREQ_HZ does not match between " \
           "/dma_1/S_AXIS_S2MM(142857132) and /overlay/m1_axis(100000000)" in flow.stdout
    assert "save_bd_design" not in flow.cmds()


def test_a_stream_with_a_freq_hz_of_its_own_stops_the_build(tmp_path, overlay):
    tcl = pl_top_with(tmp_path, overlay, "    input  wire [63:0]  s1_axis_tdata,",
                      '    (* X_INTERFACE_PARAMETER = "FREQ_HZ 100000000" *)\n'
                      "    input  wire [63:0]  s1_axis_tdata,")
    flow = run_build(tmp_path, tcl)
    assert flow.rc != 0
    assert "[BD 41-237] Bus Interface property FREQ_HZ does not match between " \
           "/overlay/s1_axis(100000000) and /dma_1/M_AXIS_MM2S(142857132)" in flow.stdout
    assert "[BD 41-238]" not in flow.stdout       # aclk itself is fine


def test_the_propagated_frequency_is_the_ps7_read_back(tmp_path, overlay):
    flow = run_build(tmp_path, overlay["tcl"], {"STUB_FCLK0_ACT": "142.857000"})
    assert flow.rc == 0, flow.stdout
    assert "overlay/aclk: FREQ_HZ 142857000," in flow.stdout


def test_a_clock_pin_left_unconnected_stops_the_build(tmp_path, overlay):
    flow = run_mutant(tmp_path, overlay["tcl"], "build.tcl", "        $dma/m_axi_sg_aclk ",
                      "        ")
    assert flow.rc != 0
    assert "ERROR: [BD 41-758] The following clock pins are not connected to a valid clock " \
           "source: \n/dma_0/m_axi_sg_aclk\n/dma_1/m_axi_sg_aclk" in flow.stdout
    assert "save_bd_design" not in flow.cmds()


# ------------------------------------------------------------------------------------------
# Scatter-gather: descriptors in DDR, the mode in the .hwh
# ------------------------------------------------------------------------------------------
def test_every_dma_master_reaches_ddr_through_its_hp_port(good):
    for p in (0, 1):
        for space in ("Data_MM2S", "Data_S2MM", "Data_SG"):
            assert f"dma_{p}/{space} -> SEG_ps7_HP{p}_DDR_LOWOCM at 0x00000000, 512M" in good.stdout
    reads = [c["args"] for c in good.of("get_bd_addr_segs") if "-of_objects" in c["args"]]
    assert ["-of_objects", "/dma_0/Data_SG"] in reads
    assert good.index("assign_bd_address") < good.index("validate_bd_design")


def test_a_dma_in_simple_mode_has_no_sg_master_and_stops_the_build(tmp_path, overlay):
    flow = run_mutant(tmp_path, overlay["tcl"], "build.tcl", "set dma_sg_config {c_include_sg 1",
                      "set dma_sg_config {c_include_sg 0")
    assert flow.rc != 0
    assert "WARNING: [BD 5-232] No interface pins matched 'get_bd_intf_pins dma_0/M_AXI_SG'" \
        in flow.stdout
    assert "ERROR: [BD 5-106] Arguments to the connect_bd_intf_net command cannot be empty." \
        in flow.stdout
    assert "save_bd_design" not in flow.cmds()


def test_an_sg_master_left_unconnected_stops_the_build(tmp_path, overlay):
    flow = run_mutant(tmp_path, overlay["tcl"], "build.tcl",
                      "    lappend hp_masters([dict get $d hp_sg]) $dma/M_AXI_SG\n", "")
    assert flow.rc != 0
    assert "dma_0/Data_SG does not reach DDR through HP0" in flow.stdout
    assert "save_bd_design" not in flow.cmds()


def test_the_hwh_says_scatter_gather(good):
    """What the board backend reads: dma_0 and dma_1 with C_INCLUDE_SG=1 (PYNQ's driver reads
    c_include_sg), 26-bit lengths, no status stream, and their register windows."""
    import xml.etree.ElementTree as ET
    root = ET.parse(good.out / "pynq_ternary.hwh").getroot()
    dmas = {m.get("INSTANCE"): {q.get("NAME"): q.get("VALUE") for q in m.iter("PARAMETER")}
            for m in root.iter("MODULE") if m.get("MODTYPE") == "axi_dma"}
    assert sorted(dmas) == ["dma_0", "dma_1"]
    for params in dmas.values():
        assert params["C_INCLUDE_SG"] == params["c_include_sg"] == "1"
        assert params["C_SG_LENGTH_WIDTH"] == params["c_sg_length_width"] == "26"
        assert params["c_sg_include_stscntrl_strm"] == "0" and params["c_micro_dma"] == "0"
        assert params["c_m_axi_mm2s_data_width"] == "64"
        assert params["c_m_axi_s2mm_data_width"] == "32"
    base = {r.get("INSTANCE"): r.get("BASEVALUE") for r in root.iter("MEMRANGE")}
    assert base == {"dma_0": "0x40400000", "dma_1": "0x40410000"}
    assert "Hardware handoff: dma_0 C_INCLUDE_SG=1, C_SG_LENGTH_WIDTH=26" in good.stdout
    assert good.index("generate_target") < good.index("launch_runs")


def test_a_handoff_without_the_sg_mode_stops_the_build(tmp_path, overlay):
    flow = run_build(tmp_path, overlay["tcl"], {"STUB_HWH_NO_PARAMS": "1"})
    assert flow.rc != 0
    assert "dma_0 does not carry C_INCLUDE_SG=1" in flow.stdout
    assert "launch_runs" not in flow.cmds()
    assert not (flow.out / "pynq_ternary.hwh").exists()


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
def test_timing_gate_stops_before_the_bitstream(tmp_path, overlay, env, expect):
    flow = run_build(tmp_path, overlay["tcl"], env)
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


def test_failed_setup_prints_the_worst_paths(tmp_path, overlay):
    flow = run_build(tmp_path, overlay["tcl"], {"STUB_WNS": "-0.502"})
    rt = flow.joined("report_timing")
    assert any("-delay_type max" in a and "-return_string" in a for a in rt)
    assert "Worst setup paths" in flow.stdout and "Slack: -0.502 ns" in flow.stdout


def test_zero_slack_passes(tmp_path, overlay):
    flow = run_build(tmp_path, overlay["tcl"], {"STUB_WNS": "0.000", "STUB_WHS": "-0.000"})
    assert flow.rc == 0, flow.stdout
    assert "write_bitstream" in flow.cmds()


def test_failed_run_stops_the_build(tmp_path, overlay):
    flow = run_build(tmp_path, overlay["tcl"], {"STUB_RUN_PROGRESS": "50%"})
    assert flow.rc != 0
    assert "run synth_1 did not complete" in flow.stdout
    assert "open_run" not in flow.cmds()


@pytest.mark.parametrize("layout, ok", [("gen", True), ("srcs", True), ("none", False)])
def test_hwh_comes_from_hw_handoff(tmp_path, overlay, layout, ok):
    flow = run_build(tmp_path, overlay["tcl"], {"STUB_HWH_LAYOUT": layout})
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
    assert engines_py.DEFAULT_ENGINES == ("overlay",)
    with pytest.raises(engines_py.EngineError):
        engines_py.parse_engine_list([" , "])
    with pytest.raises(engines_py.EngineError):
        engines_py.parse_engine_list(["ternary-engine:max_k"])


def read_engines_tcl(tcl: Path, tmp_path: Path) -> List[str]:
    script = tmp_path / "read.tcl"
    script.write_text(
        "source [lindex $argv 0]\n"
        "foreach e $ENGINES {puts [list E [dict get $e name] [dict get $e top] "
        "[llength [dict get $e sources]] [dict get $e aclk_busif] [dict get $e aclk_reset]]}\n"
        "foreach d $DMAS {puts [list D [dict get $d name] [dict get $d cell] "
        "[dict get $d s_axis] [dict get $d s_axis_width] [dict get $d m_axis] "
        "[dict get $d m_axis_width] [dict get $d hp_mm2s] [dict get $d hp_s2mm]]}\n"
        "foreach s $ENGINE_SOURCES {puts [list S [file exists $s]]}\n")
    return subprocess.run([TCLSH, str(script), str(tcl)], capture_output=True, text=True,
                          check=True).stdout.splitlines()


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
    lines = read_engines_tcl(tcl, tmp_path)
    assert lines[:6] == [
        "E engine_0 ternary_engine 3 {} {}", "E engine_1 ternary_engine 3 {} {}",
        "E engine_2 int8_engine 3 {} {}",
        "D dma_0 engine_0 s_axis 64 m_axis 32 0 0", "D dma_1 engine_1 s_axis 64 m_axis 32 1 1",
        "D dma_2 engine_2 s_axis 64 m_axis 32 0 0"]
    # sync_fifo.v and delay_line.v are shared (same content): once; then the two tops
    assert lines[6:] == ["S 1"] * 4


def test_the_pl_top_gets_one_dma_per_declared_stream(tmp_path):
    tcl = engines_py.write_engines_tcl(["overlay"], tmp_path / "engines",
                                       render=standin_overlay_render)
    assert read_engines_tcl(tcl, tmp_path) == [
        "E overlay pynq_overlay 2 {s0_axis m0_axis s1_axis m1_axis} aresetn",
        "D dma_0 overlay s0_axis 64 m0_axis 32 0 0",
        "D dma_1 overlay s1_axis 64 m1_axis 32 1 1",
        "S 1", "S 1"]


def test_stream_widths_come_from_the_manifest_and_the_verilog_never_from_bytes(tmp_path):
    def render(design, params, out_dir):  # a 128-bit engine whose parameters say bytes=8
        m = fake_render(design, params, out_dir, s_width=128)
        m["parameters"]["bytes"] = 8
        return m

    tcl = engines_py.write_engines_tcl(["attention-engine"], tmp_path / "a" / "engines",
                                       render=render)
    assert "s_axis_width 128" in tcl.read_text()

    def wide_manifest(design, params, out_dir):  # manifest says 128, the Verilog has 64
        m = standin_overlay_render(design, params, out_dir)
        m["streams"][0]["s_axis_width"] = 128
        return m

    with pytest.raises(engines_py.EngineError, match="manifest says s0_axis is 128 bit, the "
                       "Verilog port s0_axis_tdata is 64 bit"):
        engines_py.write_engines_tcl(["overlay"], tmp_path / "b" / "engines",
                                     render=wide_manifest)

    def odd_width(design, params, out_dir):
        return fake_render(design, params, out_dir, s_width=24)

    with pytest.raises(engines_py.EngineError, match="AXI DMA"):
        engines_py.write_engines_tcl(["x"], tmp_path / "c" / "engines", render=odd_width)


def test_pl_top_without_clock_association_is_refused(tmp_path):
    def no_attr(design, params, out_dir):
        return standin_overlay_render(design, params, out_dir, aclk_parameter=None)

    with pytest.raises(engines_py.EngineError, match="aclk must carry X_INTERFACE_PARAMETER"):
        engines_py.write_engines_tcl(["overlay"], tmp_path / "a" / "engines", render=no_attr)

    def partial(design, params, out_dir):
        return standin_overlay_render(design, params, out_dir,
                                      aclk_parameter="ASSOCIATED_BUSIF s0_axis:m0_axis")

    with pytest.raises(engines_py.EngineError, match="found ASSOCIATED_BUSIF s0_axis:m0_axis, "
                       "ASSOCIATED_RESET none"):
        engines_py.write_engines_tcl(["overlay"], tmp_path / "b" / "engines", render=partial)


def test_the_pl_top_is_built_alone(tmp_path):
    def render(design, params, out_dir):
        if design == "overlay":
            return standin_overlay_render(design, params, out_dir)
        return fake_render(design, params, out_dir)

    with pytest.raises(engines_py.EngineError, match="built alone"):
        engines_py.write_engines_tcl(["overlay", "ternary-engine"], tmp_path / "engines",
                                     render=render)


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


def test_manifest_with_missing_source_is_refused(tmp_path):
    def render(design, params, out_dir):
        m = fake_render(design, params, out_dir)
        m["sources"].append("not_there.v")
        return m

    with pytest.raises(engines_py.EngineError, match="not_there.v"):
        engines_py.write_engines_tcl(["ternary-engine"], tmp_path / "engines", render=render)


def test_engines_py_cli_with_the_real_generator(tmp_path):
    proc = subprocess.run([sys.executable, str(VIVADO_DIR / "engines.py"), "--out",
                           str(tmp_path / "vivado" / "engines")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "vivado" / "engines.tcl").read_text()
    assert "# Engines: overlay" in text and "top pynq_overlay" in text


# ------------------------------------------------------------------------------------------
# Constraints
# ------------------------------------------------------------------------------------------
CLG400_PIN = re.compile(r"[A-HJ-NPR-W](1[0-9]|20|[1-9])\Z")  # rows A..W (no I, O, Q), cols 1..20


def constraint_files(flow: Flow) -> List[str]:
    """The files added to constrs_1, in the order the runs read them."""
    out: List[str] = []
    for c in flow.of("add_files"):
        if "constrs_1" in c["args"]:
            for word in c["args"][c["args"].index("constrs_1") + 1:]:
                out += word.split()
    return out


def run_log(flow: Flow, run: str) -> str:
    return (flow.out / "vivado" / "project" / "pynq_ternary.runs" / run / "runme.log").read_text()


def problems(text: str) -> List[str]:
    return [line for line in text.splitlines()
            if line.startswith(("CRITICAL WARNING:", "ERROR:"))]


def xdc_in_order(tmp_path: Path, files: List[str], ip_clocks: List[str]) -> Flow:
    """The XDC files sourced one after the other in one interpreter, as a run reads them, with
    the clocks the IP's own XDC made before them."""
    script = tmp_path / "read_xdc.tcl"
    script.write_text(f"set stub::clocks {{{' '.join(ip_clocks)}}}\n"
                      + "".join(f"source {{{f}}}\n" for f in files))
    return run_tcl(script, [], tmp_path, log_name="xdc.jsonl")


def test_xdc_sources_under_tcl_and_declares_sysclk(tmp_path, good):
    files = constraint_files(good)
    assert sorted(files) == sorted(str(p) for p in (REPO / "constraints").glob("*.xdc"))
    flow = xdc_in_order(tmp_path, files, ["clk_fpga_0"])
    assert flow.rc == 0, flow.proc.stderr
    assert problems(flow.stdout) == [] and "[Vivado 12-627]" not in flow.stdout
    calls = flow.calls
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


def test_xdc_is_read_in_an_order_where_every_clock_exists(good):
    """pynq_z1.xdc (create_clock sys_clk_pin) before clocks.xdc (set_clock_groups naming it and
    the PS7's clk_fpga_0); both runs read them so and log no critical warning, and the clock
    groups are set with both clocks."""
    assert constraint_files(good) == [str(p) for p in FLOW_XDC]
    for run in ("synth_1", "impl_1"):
        text = run_log(good, run)
        assert text.index("pynq_z1.xdc") < text.index("clocks.xdc")
        assert problems(text) == []
    groups = good.of("set_clock_groups")
    assert groups and all(c["args"] == ["-asynchronous", "-group", "sys_clk_pin", "-group",
                                        "clk_fpga_0"] for c in groups)


def test_get_clocks_knows_which_clocks_exist(tmp_path):
    script = tmp_path / "clocks.tcl"
    script.write_text("puts \"A=[get_clocks sys_clk_pin]\"\n"
                      "create_clock -period 8.000 -name sys_clk_pin [get_ports sysclk]\n"
                      "puts \"B=[get_clocks -include_generated_clocks sys_clk_pin]\"\n"
                      "puts \"C=[get_clocks sys_*]\"\n"
                      "puts \"D=[get_clocks -quiet clk_fpga_0]\"\n")
    flow = run_tcl(script, [], tmp_path)
    assert flow.rc == 0, flow.proc.stderr
    lines = flow.stdout.splitlines()
    assert "WARNING: [Vivado 12-627] No clocks matched 'sys_clk_pin'." in lines
    assert [x for x in lines if x[:2] in ("A=", "B=", "C=", "D=")] == [
        "A=", "B=sys_clk_pin", "C=sys_clk_pin", "D="]


def test_the_old_xdc_order_drops_the_clock_groups(tmp_path, old_tree, overlay):
    """b30b579 read the XDC sorted: clocks.xdc names sys_clk_pin before pynq_z1.xdc creates it.
    With its PS7 mended (today's ps7_pynq_z1.tcl), the old flow runs to its end, as Vivado
    would, with [Vivado 12-4739] in both runs' logs and the clock groups dropped: the old flow
    never read a run's log."""
    old = tmp_path / "old"
    shutil.copytree(old_tree, old)
    shutil.copy(VIVADO_DIR / "ps7_pynq_z1.tcl", old / "vivado" / "ps7_pynq_z1.tcl")
    flow = run_tcl(old / "vivado" / "build.tcl", ["--out", str(tmp_path / "out"),
                                                  "--engines-tcl", str(overlay["tcl"])],
                   tmp_path)
    assert flow.rc == 0, flow.stdout
    assert [Path(f).name for f in constraint_files(flow)] == ["clocks.xdc", "pynq_z1.xdc"]
    for run in ("synth_1", "impl_1"):
        assert problems(run_log(flow, run)) == [
            "CRITICAL WARNING: [Vivado 12-4739] set_clock_groups:No valid object(s) found for "
            "'-group '.",
            "ERROR: [Vivado 12-5201] set_clock_groups: cannot set the clock group when only one "
            "non-empty group remains."]
    assert "BUILD OK" in flow.stdout


def test_a_clock_named_before_it_exists_stops_the_build(tmp_path, overlay):
    """Today's flow given the old order: synth_1's log has the 12-4739 and the build stops there."""
    flow = run_build(tmp_path, overlay["tcl"], extra=[
        "--xdc", " ".join(str(REPO / "constraints" / n) for n in ("clocks.xdc", "pynq_z1.xdc"))])
    assert flow.rc != 0
    assert "  synth_1: CRITICAL WARNING: [Vivado 12-4739] set_clock_groups:No valid object(s) " \
           "found for '-group '." in flow.stdout
    assert "run synth_1 raised 2 critical warning(s) or error(s)" in flow.stdout
    launched = [c["args"][0] for c in flow.of("launch_runs")]
    assert launched == ["synth_1"] and "write_bitstream" not in flow.cmds()


def test_a_port_the_design_does_not_have_stops_the_build(tmp_path, overlay):
    """An XDC line on a port the block design lacks: [Vivado 12-584], then [Common 17-55] in
    synth_1's log, and the build stops."""
    bad = tmp_path / "pynq_z1.xdc"
    text = FLOW_XDC[0].read_text()
    assert text.count("[get_ports sysclk]") == 2
    bad.write_text(text.replace("[get_ports sysclk]", "[get_ports sys_clk]", 1))
    flow = run_build(tmp_path, overlay["tcl"], extra=["--xdc", f"{bad} {FLOW_XDC[1]}"])
    assert flow.rc != 0
    log = run_log(flow, "synth_1")
    assert "WARNING: [Vivado 12-584] No ports matched 'sys_clk'." in log
    assert problems(log) == ["CRITICAL WARNING: [Common 17-55] 'set_property' expects at least "
                             "one object."]
    assert "run synth_1 raised 1 critical warning(s) or error(s)" in flow.stdout


def test_route_designs_timing_warning_is_left_to_the_timing_gate(tmp_path, overlay):
    """A failing design's [Timing 38-282] in impl_1's log is matched by its message and left to
    the timing gate, which stops the build with the worst paths."""
    flow = run_build(tmp_path, overlay["tcl"], {"STUB_WNS": "-0.250"})
    assert flow.rc != 0
    assert problems(run_log(flow, "impl_1")) == [
        "CRITICAL WARNING: [Timing 38-282] The design failed to meet the timing requirements. "
        "Please see the timing summary report for details on the timing violations."]
    assert "  tolerated in impl_1: CRITICAL WARNING: [Timing 38-282]" in flow.stdout
    assert "TIMING GATE FAILED" in flow.stdout and "write_bitstream" not in flow.cmds()
    (tmp_path / "ok").mkdir()
    assert problems(run_log(run_build(tmp_path / "ok", overlay["tcl"]), "impl_1")) == []


def test_a_critical_warning_in_a_run_log_stops_the_build(tmp_path, overlay):
    flow = run_build(tmp_path, overlay["tcl"], {"STUB_RUN_CRITICAL_WARNINGS": "1"})
    assert flow.rc != 0
    assert "run synth_1 raised 1 critical warning(s) or error(s)" in flow.stdout
    assert "write_bitstream" not in flow.cmds()


def test_timing_is_checked_at_the_fclk_period(good):
    # the timing gate's look-up in the routed design (the others are the XDC's, in the runs)
    (clk,) = [c for c in good.of("get_clocks") if c["args"] == ["-quiet", "clk_fpga_0"]]
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
    for path in list(VIVADO_DIR.glob("*.tcl")) + list((REPO / "constraints").glob("*.xdc")):
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


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_bitstream_dryrun_builds_the_pl_top(tmp_path):
    """`make bitstream-dryrun` as a user runs it: the real generator's overlay, on the stubs."""
    build = tmp_path / "build"
    env = {k: v for k, v in os.environ.items() if not k.startswith("STUB_")}
    proc = subprocess.run([*_make_args(), "bitstream-dryrun", f"BUILD_DIR={build}",
                           f"PY={sys.executable}"], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "overlay: overlay (top pynq_overlay)" in out
    assert "dma_0: overlay/s0_axis 64 bit in, overlay/m0_axis 32 bit out, MM2S on HP0" in out
    assert "dma_1: overlay/s1_axis 64 bit in, overlay/m1_axis 32 bit out, MM2S on HP1" in out
    assert "overlay/aclk: ASSOCIATED_BUSIF s0_axis:m0_axis:s1_axis:m1_axis" in out
    assert "Block design: validated, no critical warnings." in out and "BUILD OK" in out
    flow = Flow(subprocess.CompletedProcess([], 0, out, ""),
                build / "dryrun" / "vivado_calls.jsonl", build / "dryrun")
    refs = [a for a in flow.joined("create_bd_cell") if "-type module" in a]
    assert refs == ["-type module -reference pynq_overlay overlay"]
    assert unknown_ip_properties(flow) == []
    assert (build / "dryrun" / "pynq_ternary.bit").is_file()
