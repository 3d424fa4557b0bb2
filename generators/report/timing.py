"""Register-to-register timing estimate on a yosys ``synth_xilinx -family xc7`` netlist.

No Vivado here: this module estimates the worst setup paths of a mapped 7-series netlist
(the ``netlist.json`` that :func:`generators.report.yosys.synth` writes) with the cell delays
of the Zynq-7000 -1 speed grade and a routing allowance that grows with each net's fanout.
The model, every number and its source are in docs/timing.md; in short:

    path = clock-to-out of the start cell
         + for every net on the way: route(net) (0 inside a slice or on a dedicated cascade)
         + for every combinational cell on the way: its pin-to-pin delay
         + setup of the end pin

    route(net) = ROUTE_BASE + ROUTE_PER_DOUBLING * log2(fanout) + ROUTE_PER_KLOAD * fanout / 1000
                 [+ ROUTE_HARD at a BRAM/DSP pin]

The numbers are the sources' (DELAYS; the gate: every path <= BUDGET_NS). Beside them runs the
calibrated model: the same model with its numbers fitted to Vivado's own post-route reports of
public designs (timing_fitted.json, ``make timing-calibrate``); its figures carry the error
bound (BOUND_FRACTION of the path), and a path meets the clock when modelled + bound <= 7.0 ns.

Start points are the clocked outputs (FF Q, SRL Q, LUTRAM outputs after a write, block RAM
DO with or without its output register, DSP48E1 P/PCOUT after PREG or MREG or an input
register); end points the clocked inputs (FF D/CE/R, LUTRAM write port, SRL D/CE, block RAM
address/data/enables, DSP48E1 inputs into their first register). A DSP48E1 without its input
or pipeline registers is a combinational cell from its inputs to P, with the datasheet's
delay for that register setting. Top-level ports are start or end points only in the ``io``
figures (``reg2reg`` is what the 7.0 ns goal is checked on).

:func:`analyze` returns the worst path, the worst paths per distinct end cell and the
largest fanouts; :func:`format_path` prints one path cell by cell.
"""
from __future__ import annotations

import json
import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

__all__ = ["Delay", "DELAYS", "Model", "DEFAULT_MODEL", "SOURCE_MODEL", "CALIBRATED_MODEL",
           "apply_fit", "FITTED", "BOUND_FRACTION", "CALIBRATED_BUDGET_NS", "COVERED_FANOUT", "bound_ns", "CLOCK_NS", "BUDGET_NS", "analyze",
           "format_path", "route_delay", "SOURCES", "delay_table", "CARRY4_ARCS", "TIMING_CONFIGS", "timing_config", "main",
           "config_vectors", "built_configs", "vector_worst"]

#: the fabric clock period (generators.contract.FCLK_HZ: 142.857 MHz)
from ..contract import FCLK_HZ as _FCLK_HZ  # noqa: E402
from ..designs import PYNQ_Z1  # noqa: E402
from .yosys import postorder, top_module  # noqa: E402

CLOCK_NS = round(1e9 / _FCLK_HZ, 3)          # 7.0
#: the reset input's name (the engines' and the top's raw AXI-Stream ARESETn)
RESET_PORTS = ("aresetn",)

#: where the numbers come from (docs/timing.md, section 2)
SOURCES = {
    "xray": "Vivado's -1 speed model of the Zynq-7000 fabric as published by Project X-Ray "
            "(f4pga/prjxray-db, zynq7/timings/*.sdf: slow corner max, the larger of "
            "SLICEL/SLICEM)",
    "xray-a7": "the same for the Artix-7 -1 fabric (prjxray-db artix7/timings, quoted in "
               "yosys's xilinx/cells_sim.v specify blocks)",
    "ds189": "DS189 (Spartan-7 data sheet, -1 at 1.0 V), Table 30 Block RAM and FIFO "
             "Switching Characteristics: the 7-series block RAM, whose Zynq-7000 tile "
             "prjxray-db's zynq7 timings do not hold",
    "chosen": "not published: chosen for this model (docs/timing.md, section 3)",
}


@dataclass(frozen=True)
class Delay:
    """One number of the model: ns, the datasheet-style parameter name, its source key."""
    ns: float
    name: str
    source: str
    what: str = ""
    #: the number before the calibration (its source's), for a number the fit replaced
    prior: Optional[float] = None


def _d(ns, name, source, what="", prior=None):
    return Delay(ns, name, source, what, prior)


#: every delay the model uses (ns, Zynq-7000 -1 speed grade)
DELAYS: Dict[str, Delay] = {
    # ---- slice: LUT, flip-flop, wide muxes
    "TILO": _d(0.124, "TILO", "xray", "LUT6 An -> O6 (slicel.sdf C6LUT: all pins)"),
    "TILO5": _d(0.124, "TILO (LUT5)", "xray", "LUT5 An -> O"),
    "TILO4": _d(0.124, "TILO (LUT4)", "xray", "LUT4 An -> O"),
    "TILO3": _d(0.124, "TILO (LUT3)", "xray", "LUT3 An -> O"),
    "TILO2": _d(0.124, "TILO (LUT2)", "xray", "LUT2 An -> O"),
    "TILO1": _d(0.124, "TILO (LUT1)", "xray", "LUT1 (and INV) An -> O"),
    "TCKO": _d(0.362, "TCKO", "xray", "FF clock to Q (slicem.sdf REG_INIT_FF CLK->Q)"),
    "TDICK": _d(0.0, "TDICK/TAS", "xray-a7", "FF D setup (-0.046 ns, taken as 0, as yosys does)"),
    "TCECK": _d(0.109, "TCECK_CLB", "xray", "FF CE setup (slicel.sdf REG_INIT_FF SETUP CE)"),
    "TSRCK": _d(0.404, "TSRCK", "xray", "FF SR setup/recovery (slicel.sdf FF_INIT_QL RECOVERY SR)"),
    "F7_I": _d(0.225, "TIF7 (I0/I1)", "xray", "MUXF7 data input -> O (F7BMUX, SLICEM)"),
    "F7_S": _d(0.314, "TIF7 (S)", "xray", "MUXF7 select -> O (F7BMUX, SLICEM)"),
    "F8_I": _d(0.104, "TIF8 (I0/I1)", "xray", "MUXF8 data input -> O (F8MUX)"),
    "F8_S": _d(0.283, "TIF8 (S)", "xray", "MUXF8 select -> O (F8MUX, SLICEM)"),
    # ---- LUTRAM and SRL (SLICEM)
    "TSHCKO": _d(1.153, "TSHCKO", "xray-a7", "LUTRAM WCLK -> O after a write (CLBLM_R.sdf)"),
    "TWS": _d(0.654, "TWS", "xray-a7", "LUTRAM WE setup"),
    "TAS_RAM": _d(0.362, "TAS (LUTRAM)", "xray-a7", "LUTRAM write address setup (A0, the slowest)"),
    "TDS_RAM": _d(0.453, "TDS (LUTRAM)", "xray-a7", "LUTRAM DI setup (RAM64X1D D, the slowest)"),
    "TREG": _d(1.472, "TREG", "xray-a7", "SRL clock -> Q (addressed output)"),
    "TREG_M31": _d(1.114, "TREG_M31", "xray-a7", "SRLC32E clock -> Q31"),
    "TDS_SRL": _d(0.173, "TDS (SRL)", "xray-a7", "SRL D setup"),
    "TCE_SRL": _d(0.109, "TWS (SRL)", "xray-a7", "SRL CE setup"),
    # ---- block RAM (RAMB18E1 / RAMB36E1)
    "TRCKO_DO": _d(2.46, "TRCKO_DO", "ds189", "clock to DOUT without the output register"),
    "TRCKO_DO_REG": _d(0.89, "TRCKO_DO_REG", "ds189", "clock to DOUT with the output register"),
    "TRCCK_ADDR": _d(0.57, "TRCCK_ADDRA", "ds189", "address setup"),
    "TRDCK_DI": _d(0.74, "TRDCK_DI_WF_NC", "ds189", "data input setup"),
    "TRCCK_WE": _d(0.532, "TRCCK_WEA", "xray-a7", "write enable setup (BRAM_L.sdf)"),
    "TRCCK_EN": _d(0.532, "TRCCK_EN", "chosen", "enable setup: not in the sources, taken as WE"),
    "TRCCK_REGCE": _d(0.360, "TRCCK_REGCE", "xray-a7", "output register clock enable setup"),
    "TRCCK_RSTREG": _d(0.342, "TRCCK_RSTREG", "xray-a7", "output register reset setup"),
    # ---- DSP48E1 (USE_DPORT FALSE; slow corner max of DSP_L.sdf)
    "TDSPCKO_P_PREG": _d(0.434, "TDSPCKO_P_PREG", "xray", "clock -> P with PREG"),
    "TDSPCKO_P_MREG": _d(2.305, "TDSPCKO_P_MREG", "xray", "clock -> P with MREG, no PREG"),
    "TDSPCKO_P_AREG_MULT": _d(4.009, "TDSPCKO_P_AREG_MULT", "xray", "clock -> P from AREG through the multiplier, no MREG/PREG"),
    "TDSPCKO_P_BREG_MULT": _d(3.813, "TDSPCKO_P_BREG_MULT", "xray", "clock -> P from BREG through the multiplier"),
    "TDSPCKO_P_AREG": _d(2.215, "TDSPCKO_P_AREG", "xray", "clock -> P from AREG, USE_MULT NONE"),
    "TDSPCKO_P_BREG": _d(2.191, "TDSPCKO_P_BREG", "xray", "clock -> P from BREG, USE_MULT NONE"),
    "TDSPCKO_P_CREG": _d(2.291, "TDSPCKO_P_CREG", "xray", "clock -> P from CREG, no PREG"),
    "TDSPDO_A_P_MULT": _d(3.841, "TDSPDO_A_P_MULT", "xray", "A -> P through the multiplier, no register"),
    "TDSPDO_B_P_MULT": _d(3.656, "TDSPDO_B_P_MULT", "xray", "B -> P through the multiplier, no register"),
    "TDSPDO_A_P": _d(2.077, "TDSPDO_A_P", "xray", "A -> P, USE_MULT NONE"),
    "TDSPDO_B_P": _d(2.057, "TDSPDO_B_P", "xray", "B -> P, USE_MULT NONE"),
    "TDSPDO_C_P": _d(1.820, "TDSPDO_C_P", "xray", "C -> P"),
    "TDSPDO_PCIN_P": _d(1.518, "TDSPDO_PCIN_P", "xray", "PCIN -> P"),
    "TDSPDO_OPMODE_P": _d(2.326, "TDSPDO_OPMODE_P", "xray", "OPMODE -> P"),
    "TDSPDO_ALUMODE_P": _d(2.098, "TDSPDO_ALUMODE_P", "xray", "ALUMODE -> P"),
    "TDSPDO_CARRYIN_P": _d(1.416, "TDSPDO_CARRYIN_P", "xray", "CARRYIN -> P"),
    "TDSPDCK_A_AREG": _d(0.362, "TDSPDCK_A_AREG", "xray", "A setup into AREG"),
    "TDSPDCK_B_BREG": _d(0.450, "TDSPDCK_B_BREG", "xray", "B setup into BREG"),
    "TDSPDCK_C_CREG": _d(0.233, "TDSPDCK_C_CREG", "xray", "C setup into CREG"),
    "TDSPDCK_A_MREG_MULT": _d(1.928, "TDSPDCK_A_MREG_MULT", "xray", "A setup into MREG"),
    "TDSPDCK_B_MREG_MULT": _d(1.743, "TDSPDCK_B_MREG_MULT", "xray", "B setup into MREG"),
    "TDSPDCK_A_PREG_MULT": _d(3.722, "TDSPDCK_A_PREG_MULT", "xray", "A setup into PREG, no MREG"),
    "TDSPDCK_B_PREG_MULT": _d(3.536, "TDSPDCK_B_PREG_MULT", "xray", "B setup into PREG, no MREG"),
    "TDSPDCK_A_PREG": _d(1.958, "TDSPDCK_A_PREG", "xray", "A setup into PREG, USE_MULT NONE"),
    "TDSPDCK_B_PREG": _d(1.938, "TDSPDCK_B_PREG", "xray", "B setup into PREG, USE_MULT NONE"),
    "TDSPDCK_C_PREG": _d(1.701, "TDSPDCK_C_PREG", "xray", "C setup into PREG"),
    "TDSPDCK_PCIN_PREG": _d(1.400, "TDSPDCK_PCIN_PREG", "xray", "PCIN setup into PREG"),
    "TDSPDCK_OPMODE_PREG": _d(2.209, "TDSPDCK_OPMODE_PREG", "xray", "OPMODE setup into PREG"),
    "TDSPDCK_OPMODE_REG": _d(0.449, "TDSPDCK_OPMODE_OPMODEREG", "xray", "OPMODE setup into OPMODEREG"),
    "TDSPDCK_ALUMODE_PREG": _d(1.978, "TDSPDCK_ALUMODE_PREG", "xray", "ALUMODE setup into PREG"),
    "TDSPDCK_ALUMODE_REG": _d(0.246, "TDSPDCK_ALUMODE_ALUMODEREG", "xray", "ALUMODE setup into ALUMODEREG"),
    "TDSPDCK_CARRYIN_PREG": _d(1.298, "TDSPDCK_CARRYIN_PREG", "xray", "CARRYIN setup into PREG"),
    "TDSPDCK_CARRYIN_REG": _d(0.299, "TDSPDCK_CARRYIN_CARRYINREG", "xray", "CARRYIN setup into CARRYINREG"),
    "TDSPDCK_INMODE_MREG": _d(2.012, "TDSPDCK_INMODE_MREG", "xray", "INMODE setup into MREG"),
    "TDSPDCK_INMODE_PREG": _d(3.805, "TDSPDCK_INMODE_PREG", "xray", "INMODE setup into PREG"),
    "TDSPDCK_INMODE_REG": _d(0.449, "TDSPDCK_INMODE_INMODEREG", "xray", "INMODE setup into INMODEREG"),
    "TDSPDO_INMODE_P": _d(3.923, "TDSPDO_INMODE_P", "xray", "INMODE -> P through the multiplier"),
    "TDSPCCK_CE": _d(0.603, "TDSPCCK_CE*", "xray", "clock enables (the slowest: CEINMODE)"),
    "TDSPCCK_RST": _d(0.686, "TDSPCCK_RST*", "xray", "resets (the slowest: RSTINMODE)"),
    # ---- routing (chosen: docs/timing.md section 3)
    "ROUTE_BASE": _d(0.45, "route(fanout 1)", "chosen", "one general-interconnect net"),
    "ROUTE_PER_DOUBLING": _d(0.20, "route per fanout doubling", "chosen",
                             "added per doubling of the net's fanout"),
    "ROUTE_PER_KLOAD": _d(0.0, "route per 1,000 loads", "chosen",
                          "added per 1,000 loads of the net"),
    "ROUTE_HARD": _d(0.25, "route at a BRAM/DSP pin", "chosen",
                     "added on a net that enters or leaves a block RAM or DSP48E1 column"),
}

# CARRY4 pin-to-pin delays (ns, slow corner max of slicel.sdf CARRY4*, SLICEL/SLICEM): the
# Vivado arcs Prop_carry4_<in>_<out>; DS names TCINCO (CI -> CO), TOPCYA..D (S -> CO),
# TAXCY..TDXCY (DI -> CO)
CARRY4_ARCS: Dict[Tuple[str, int, str, int], float] = {}


def _c4(inp, outs):
    for out, ns in outs.items():
        port, idx = out[:-1], int(out[-1])
        CARRY4_ARCS[(inp[0], inp[1], port, idx)] = ns


_c4(("CI", 0), {"CO0": 0.271, "CO1": 0.157, "CO2": 0.229, "CO3": 0.117,
                "O0": 0.222, "O1": 0.334, "O2": 0.239, "O3": 0.315})
_c4(("CYINIT", 0), {"CO0": 0.561, "CO1": 0.511, "CO2": 0.608, "CO3": 0.595,
                    "O0": 0.510, "O1": 0.630, "O2": 0.602, "O3": 0.662})
_c4(("S", 0), {"CO0": 0.340, "CO1": 0.434, "CO2": 0.514, "CO3": 0.508,
               "O0": 0.228, "O1": 0.403, "O2": 0.523, "O3": 0.584})
_c4(("S", 1), {"CO1": 0.472, "CO2": 0.554, "CO3": 0.528, "O1": 0.210, "O2": 0.558, "O3": 0.623})
_c4(("S", 2), {"CO2": 0.296, "CO3": 0.376, "O2": 0.228, "O3": 0.330})
_c4(("S", 3), {"CO3": 0.380, "O3": 0.233})
_c4(("DI", 0), {"CO0": 0.393, "CO1": 0.488, "CO2": 0.564, "CO3": 0.550,
                "O1": 0.422, "O2": 0.579, "O3": 0.642})
_c4(("DI", 1), {"CO1": 0.456, "CO2": 0.533, "CO3": 0.520, "O2": 0.547, "O3": 0.610})
_c4(("DI", 2), {"CO2": 0.366, "CO3": 0.404, "O3": 0.447})
_c4(("DI", 3), {"CO3": 0.396})


def delay_table(delays: Mapping[str, Delay] = DELAYS,
                fitted: Optional[Mapping[str, float]] = None) -> str:
    """The model's numbers as the markdown table docs/timing.md carries (a test keeps the two
    equal): key, parameter, ns (the source's), fitted ns (timing_fitted.json, blank where the
    calibration keeps the source's number), what, source."""
    fitted = FITTED["delays"] if fitted is None else fitted
    rows = ["| key | parameter | ns | fitted ns | what | source |", "|---|---|---:|---:|---|---|"]
    for k, d in delays.items():
        f = f"{fitted[k]:g}" if k in fitted else ""
        rows.append(f"| `{k}` | {d.name} | {d.ns:g} | {f} | {d.what} | {d.source} |")
    return "\n".join(rows)


@dataclass
class Model:
    """The numbers the analysis uses (defaults: :data:`DELAYS`); tests build their own."""
    delays: Mapping[str, Delay] = field(default_factory=lambda: dict(DELAYS))
    carry4: Mapping[Tuple[str, int, str, int], float] = field(
        default_factory=lambda: dict(CARRY4_ARCS))

    def ns(self, key: str) -> float:
        return self.delays[key].ns

    def route(self, fanout: int, hard: bool = False) -> float:
        return route_delay(fanout, hard, self)


#: the sources' numbers (DELAYS, CARRY4_ARCS), before the calibration
SOURCE_MODEL = Model()

#: the numbers fitted to Vivado's own post-route reports and the model's error bound
#: (``make timing-calibrate``: tools/timing_calibration.py writes it from
#: generators/report/timing_calibration.json; docs/timing.md section 4)
FITTED_FILE = Path(__file__).resolve().with_name("timing_fitted.json")


def apply_fit(numbers: Mapping) -> Model:
    """:data:`SOURCE_MODEL` with the fitted ``numbers`` (timing_fitted.json's form) in place
    of the sources': each replaced Delay says ``fit`` and keeps its source's number as
    ``prior``."""
    delays = dict(DELAYS)
    n = numbers.get("n", {})
    for k, ns in numbers["delays"].items():
        d = DELAYS[k]
        delays[k] = Delay(float(ns), d.name, "fit",
                          f"{d.what} (fitted to {n.get(k, '?')} Vivado elements)", d.ns)
    carry = dict(CARRY4_ARCS)
    for k, ns in numbers.get("carry4", {}).items():
        mm = re.fullmatch(r"([A-Z]+)(\d)->([A-Z]+)(\d)", k)
        carry[(mm.group(1), int(mm.group(2)), mm.group(3), int(mm.group(4)))] = float(ns)
    return Model(delays=delays, carry4=carry)


def _load_fitted() -> dict:
    return json.loads(FITTED_FILE.read_text())


FITTED = _load_fitted()
#: the model of the gate (`make timing`'s budget): the sources' numbers. The calibrated model
#: runs beside it and its figures carry the bound; the gate moves to it when the top closes
#: with the bound (issue 30: it does not yet; docs/timing.md section 4)
DEFAULT_MODEL = SOURCE_MODEL
#: the numbers fitted to Vivado's reports (timing_fitted.json)
CALIBRATED_MODEL = apply_fit(FITTED)
#: the calibrated model's error bound: the largest under-estimate of a held-out Vivado path,
#: as a fraction of the modelled path (docs/timing.md section 4)
BOUND_FRACTION = float(FITTED["bound"]["fraction"])
#: the largest fanout the calibration has nets at in at least two designs: beyond it the
#: routing term is an extrapolation (issue 30 item 3)
COVERED_FANOUT = int(FITTED["covered_fanout"])


def bound_ns(worst_ns: float) -> float:
    """The error bound of a path the calibrated model puts at ``worst_ns``."""
    return round(worst_ns * BOUND_FRACTION, 3)


#: what every path modelled with the sources' numbers must meet: the period less 1.0 ns for
#: what the model cannot see (placement, clock skew and jitter, hold fixing, congestion)
MARGIN_NS = 1.0
BUDGET_NS = round(CLOCK_NS - MARGIN_NS, 3)   # 6.0
#: what a path must meet under the calibrated model: modelled + bound <= CLOCK_NS
CALIBRATED_BUDGET_NS = round(CLOCK_NS / (1.0 + BOUND_FRACTION), 3)


def route_delay(fanout: int, hard: bool = False, model: Optional[Model] = None) -> float:
    """The routing allowance of a general net with ``fanout`` sink pins (``hard``: it enters
    or leaves a block RAM or DSP48E1)."""
    m = model or DEFAULT_MODEL
    f = max(1, int(fanout))
    r = m.ns("ROUTE_BASE") + m.ns("ROUTE_PER_DOUBLING") * math.log2(f) \
        + m.ns("ROUTE_PER_KLOAD") * f / 1000.0
    return r + (m.ns("ROUTE_HARD") if hard else 0.0)


# ----------------------------------------------------------------------------- cell models

_LUT = {"LUT1", "LUT2", "LUT3", "LUT4", "LUT5", "LUT6", "INV"}
#: each LUT's delay key (the calibration fits the LUTs by size)
_LUT_KEY = {"LUT1": "TILO1", "INV": "TILO1", "LUT2": "TILO2", "LUT3": "TILO3",
            "LUT4": "TILO4", "LUT5": "TILO5", "LUT6": "TILO"}
_FF = {"FDRE", "FDSE", "FDCE", "FDPE"}
_BRAM = {"RAMB18E1", "RAMB36E1"}
_SLICE_COMB = _LUT | {"MUXF7", "MUXF8", "CARRY4"}
_CLOCK_PINS = re.compile(r"^(C|CLK|WCLK|CLKARDCLK|CLKBWRCLK|RDCLK|WRCLK)$")
_DSP_CASCADE = {("PCOUT", "PCIN"), ("ACOUT", "ACIN"), ("BCOUT", "BCIN"),
                ("CARRYCASCOUT", "CARRYCASCIN"), ("MULTSIGNOUT", "MULTSIGNIN")}
# distributed RAM: (read ports: out port -> address ports), write address ports, extra mux
_LUTRAM = {
    "RAM32M": ({"DOA": ["ADDRA"], "DOB": ["ADDRB"], "DOC": ["ADDRC"], "DOD": ["ADDRD"]},
               ["ADDRD"], 0),
    "RAM64M": ({"DOA": ["ADDRA"], "DOB": ["ADDRB"], "DOC": ["ADDRC"], "DOD": ["ADDRD"]},
               ["ADDRD"], 0),
    "RAM32X1D": ({"SPO": ["A0", "A1", "A2", "A3", "A4"],
                  "DPO": ["DPRA0", "DPRA1", "DPRA2", "DPRA3", "DPRA4"]},
                 ["A0", "A1", "A2", "A3", "A4"], 0),
    "RAM64X1D": ({"SPO": ["A0", "A1", "A2", "A3", "A4", "A5"],
                  "DPO": ["DPRA0", "DPRA1", "DPRA2", "DPRA3", "DPRA4", "DPRA5"]},
                 ["A0", "A1", "A2", "A3", "A4", "A5"], 0),
    "RAM128X1D": ({"SPO": ["A"], "DPO": ["DPRA"]}, ["A"], 1),
    "RAM32X1S": ({"O": ["A0", "A1", "A2", "A3", "A4"]}, ["A0", "A1", "A2", "A3", "A4"], 0),
    "RAM64X1S": ({"O": ["A0", "A1", "A2", "A3", "A4", "A5"]},
                 ["A0", "A1", "A2", "A3", "A4", "A5"], 0),
    "RAM128X1S": ({"O": ["A0", "A1", "A2", "A3", "A4", "A5", "A6"]},
                  ["A0", "A1", "A2", "A3", "A4", "A5", "A6"], 1),
    "RAM256X1S": ({"O": ["A"]}, ["A"], 2),
}
_SRL = {"SRL16E": ["A0", "A1", "A2", "A3"], "SRLC16E": ["A0", "A1", "A2", "A3"],
        "SRLC32E": ["A"]}
# block RAM inputs: (pin-name prefix, setup delay), the first prefix that matches wins
_BRAM_SETUP = (("ADDR", "TRCCK_ADDR"), ("DI", "TRDCK_DI"), ("WE", "TRCCK_WE"),
               ("EN", "TRCCK_EN"), ("REGCE", "TRCCK_REGCE"), ("RST", "TRCCK_RSTREG"))


def _param_int(params: Mapping, name: str, default: int = 0) -> int:
    v = params.get(name)
    if v is None:
        return default
    if isinstance(v, int):
        return v
    s = str(v).strip()
    if re.fullmatch(r"[01]+", s):
        return int(s, 2)
    if re.fullmatch(r"-?\d+", s):
        return int(s)
    return default


def _param_str(params: Mapping, name: str, default: str = "") -> str:
    v = params.get(name)
    return default if v is None else str(v).strip()


class _Cell:
    """What the analysis needs of one cell: for each output bit, a clock-to-out or a list of
    (input port, input bit index or None for every bit, delay); for each input port, a setup
    time (None: not a clocked input)."""

    __slots__ = ("name", "type", "kind", "conn", "dirs", "params", "clocked_out", "arcs",
                 "setup", "hard")

    def __init__(self, name, c):
        self.name = name
        self.type = c["type"].lstrip("\\")
        self.conn = c.get("connections", {})
        self.dirs = c.get("port_directions", {})
        self.params = c.get("parameters", {})
        self.clocked_out: Dict[str, Tuple[float, str]] = {}   # port -> (tco, name)
        self.arcs: Dict[Tuple[str, int], List[Tuple[str, Optional[int], float, str]]] = {}
        self.setup: Dict[str, Tuple[float, str]] = {}
        self.hard = self.type in _BRAM or self.type == "DSP48E1"
        self.kind = "other"


def _setup_first(cell: _Cell, d, port: str, choices: Sequence[Tuple[object, str]]) -> None:
    """Give ``port`` the setup time of the first (applies, delay key) in ``choices`` that
    applies: the first register on the pin's way. None applies: the pin is not a clocked
    input (no setup)."""
    key = next((k for applies, k in choices if applies), None)
    if key is not None:
        cell.setup[port] = (d(key), key)


def _build_cell(name, c, m: Model) -> _Cell:  # noqa: C901 (one table per primitive)
    cell = _Cell(name, c)
    t = cell.type
    d = m.ns
    outs = [p for p, dr in cell.dirs.items() if dr == "output"]

    def all_arcs(out_port, in_ports, delay, label):
        for i in range(len(cell.conn.get(out_port, []))):
            cell.arcs[(out_port, i)] = [(p, None, delay, label) for p in in_ports]

    if t in _LUT:
        cell.kind = "lut"
        ins = [p for p, dr in cell.dirs.items() if dr == "input"]
        key = _LUT_KEY[t]
        all_arcs("O", ins, d(key), key)
    elif t == "MUXF7" or t == "MUXF8":
        cell.kind = "muxf"
        k = "F7" if t == "MUXF7" else "F8"
        cell.arcs[("O", 0)] = [("I0", 0, d(k + "_I"), k), ("I1", 0, d(k + "_I"), k),
                               ("S", 0, d(k + "_S"), k + " S")]
    elif t == "CARRY4":
        cell.kind = "carry"
        for (ip, ii, op, oi), ns in m.carry4.items():
            cell.arcs.setdefault((op, oi), []).append((ip, ii, ns, f"CARRY4 {ip}{ii}->{op}{oi}"))
    elif t in _FF or t in {"FDRE_1", "FDSE_1", "FDCE_1", "FDPE_1"}:
        cell.kind = "ff"
        cell.clocked_out["Q"] = (d("TCKO"), "TCKO")
        cell.setup["D"] = (d("TDICK"), "TDICK")
        cell.setup["CE"] = (d("TCECK"), "TCECK")
        for p in ("R", "S", "CLR", "PRE"):
            cell.setup[p] = (d("TSRCK"), "TSRCK")
    elif t in _LUTRAM:
        cell.kind = "lutram"
        reads, waddr, extra = _LUTRAM[t]
        mux = [0.0, d("F7_S"), d("F7_I") + d("F8_S")][extra]
        for op, aps in reads.items():
            for i in range(len(cell.conn.get(op, []))):
                cell.arcs[(op, i)] = [(p, None, d("TILO") + mux, "TILO (LUTRAM read)")
                                      for p in aps]
            cell.clocked_out[op] = (d("TSHCKO"), "TSHCKO")
        for p in waddr:
            cell.setup[p] = (d("TAS_RAM"), "TAS")
        for p, dr in cell.dirs.items():
            if dr == "input" and (p.startswith("DI") or p == "D"):
                cell.setup[p] = (d("TDS_RAM"), "TDS")
        cell.setup["WE"] = (d("TWS"), "TWS")
    elif t in _SRL:
        cell.kind = "srl"
        cell.clocked_out["Q"] = (d("TREG"), "TREG")
        cell.clocked_out["Q15"] = (d("TREG_M31"), "TREG_M31")
        cell.clocked_out["Q31"] = (d("TREG_M31"), "TREG_M31")
        # the address selects a stored bit: a read, as a LUT
        cell.arcs[("Q", 0)] = [(p, None, d("TILO"), "TILO (SRL address)") for p in _SRL[t]]
        cell.setup["D"] = (d("TDS_SRL"), "TDS")
        cell.setup["CE"] = (d("TCE_SRL"), "TWS")
    elif t in _BRAM:
        cell.kind = "bram"
        rega = _param_int(cell.params, "DOA_REG")
        regb = _param_int(cell.params, "DOB_REG")
        for p in outs:
            if p.startswith(("DOA", "DOPA")):
                key = "TRCKO_DO_REG" if rega else "TRCKO_DO"
            elif p.startswith(("DOB", "DOPB")):
                key = "TRCKO_DO_REG" if regb else "TRCKO_DO"
            else:
                continue
            cell.clocked_out[p] = (d(key), key)
        for p, dr in cell.dirs.items():
            if dr != "input" or _CLOCK_PINS.match(p):
                continue
            _setup_first(cell, d, p, [(p.startswith(prefix), k) for prefix, k in _BRAM_SETUP])
    elif t == "DSP48E1":
        cell.kind = "dsp"
        _build_dsp(cell, m)
    elif t in ("VCC", "GND"):
        cell.kind = "const"
    elif t in ("BUFG", "IBUF", "OBUF", "BUFH"):
        cell.kind = "pass"
        for p in outs:
            ins = [q for q, dr in cell.dirs.items() if dr == "input"]
            all_arcs(p, ins, 0.0, "buffer")
    else:
        cell.kind = "unknown"   # treated as a register: outputs start, inputs end (0 ns)
        for p in outs:
            cell.clocked_out[p] = (0.0, "unknown cell")
        for p, dr in cell.dirs.items():
            if dr == "input" and not _CLOCK_PINS.match(p):
                cell.setup[p] = (0.0, "unknown cell")
    return cell


def _build_dsp(cell: _Cell, m: Model) -> None:
    d = m.ns
    pr = cell.params
    areg = _param_int(pr, "AREG", 1)
    breg = _param_int(pr, "BREG", 1)
    creg = _param_int(pr, "CREG", 1)
    mreg = _param_int(pr, "MREG", 1)
    preg = _param_int(pr, "PREG", 1)
    opreg = _param_int(pr, "OPMODEREG", 1)
    alureg = _param_int(pr, "ALUMODEREG", 1)
    cireg = _param_int(pr, "CARRYINREG", 1)
    inreg = _param_int(pr, "INMODEREG", 1)
    mult = _param_str(pr, "USE_MULT", "MULTIPLY") != "NONE"
    p_outs = [p for p in ("P", "PCOUT", "CARRYOUT", "CARRYCASCOUT", "MULTSIGNOUT",
                          "PATTERNDETECT", "PATTERNBDETECT", "OVERFLOW", "UNDERFLOW")
              if p in cell.conn]
    m_reg = mult and mreg   # the multiplier's output is registered

    # outputs: clocked (PREG), or through the ALU from the last register before it
    comb_in: List[Tuple[str, float, str]] = []   # input port -> P combinational
    clk_to_p: List[Tuple[float, str]] = []
    if preg:
        for p in p_outs:
            cell.clocked_out[p] = (d("TDSPCKO_P_PREG"), "TDSPCKO_P_PREG")
    else:
        if m_reg:
            clk_to_p.append((d("TDSPCKO_P_MREG"), "TDSPCKO_P_MREG"))
        else:
            for port, reg, kreg, kcomb in (
                    ("A", areg, "TDSPCKO_P_AREG", "TDSPDO_A_P"),
                    ("B", breg, "TDSPCKO_P_BREG", "TDSPDO_B_P")):
                sfx = "_MULT" if mult else ""
                if reg:
                    clk_to_p.append((d(kreg + sfx), kreg + sfx))
                else:
                    comb_in.append((port, d(kcomb + sfx), kcomb + sfx))
            if not inreg and mult:
                comb_in.append(("INMODE", d("TDSPDO_INMODE_P"), "TDSPDO_INMODE_P"))
        if creg:
            clk_to_p.append((d("TDSPCKO_P_CREG"), "TDSPCKO_P_CREG"))
        else:
            comb_in.append(("C", d("TDSPDO_C_P"), "TDSPDO_C_P"))
        comb_in.append(("PCIN", d("TDSPDO_PCIN_P"), "TDSPDO_PCIN_P"))
        if not opreg:
            comb_in.append(("OPMODE", d("TDSPDO_OPMODE_P"), "TDSPDO_OPMODE_P"))
        if not alureg:
            comb_in.append(("ALUMODE", d("TDSPDO_ALUMODE_P"), "TDSPDO_ALUMODE_P"))
        if not cireg:
            comb_in.append(("CARRYIN", d("TDSPDO_CARRYIN_P"), "TDSPDO_CARRYIN_P"))
        if clk_to_p:
            tco, name = max(clk_to_p)
            for p in p_outs:
                cell.clocked_out[p] = (tco, name)
        for p in p_outs:
            for i in range(len(cell.conn.get(p, []))):
                cell.arcs[(p, i)] = [(q, None, ns, name) for q, ns, name in comb_in
                                     if q in cell.conn]
    # inputs: setup into the first register on their way
    sfx = "_MULT" if mult else ""
    for port, reg in (("A", areg), ("B", breg)):
        _setup_first(cell, d, port, [(reg, f"TDSPDCK_{port}_{port}REG"),
                                     (m_reg, f"TDSPDCK_{port}_MREG_MULT"),
                                     (preg, f"TDSPDCK_{port}_PREG{sfx}")])
    _setup_first(cell, d, "C", [(creg, "TDSPDCK_C_CREG"), (preg, "TDSPDCK_C_PREG")])
    _setup_first(cell, d, "PCIN", [(preg, "TDSPDCK_PCIN_PREG")])
    for port, reg in (("OPMODE", opreg), ("ALUMODE", alureg), ("CARRYIN", cireg)):
        _setup_first(cell, d, port, [(reg, f"TDSPDCK_{port}_REG"), (preg, f"TDSPDCK_{port}_PREG")])
    _setup_first(cell, d, "INMODE", [(inreg, "TDSPDCK_INMODE_REG"), (m_reg, "TDSPDCK_INMODE_MREG"),
                                     (preg, "TDSPDCK_INMODE_PREG")])
    for p, dr in cell.dirs.items():
        if dr == "input":
            _setup_first(cell, d, p, [(p.startswith("CE"), "TDSPCCK_CE"),
                                      (p.startswith("RST"), "TDSPCCK_RST")])


# ----------------------------------------------------------------------------- analysis

def _top(netlist: Mapping, top: Optional[str]):
    return top_module(netlist, top)


def analyze(netlist: Mapping, top: Optional[str] = None, model: Optional[Model] = None,
            n_paths: int = 10, budget_ns: float = BUDGET_NS) -> dict:
    """Worst setup paths of a flattened ``write_json`` netlist (see the module doc).

    Returns ``reg2reg`` and ``io`` (paths from or to top-level ports, the ports taken as
    registers outside: clock-to-out TCKO at an input, setup 0 at an output), each
    ``{worst_ns, paths}``: ``paths`` the ``n_paths`` worst, one per distinct end cell, each
    ``{ns, start, end, cells: [[name, type, arrival_ns, what]], nets: [[net fanout,
    route_ns]]}``; plus ``over_budget`` (end cells whose worst path exceeds ``budget_ns``),
    ``endpoints``, ``max_fanout`` (the ten largest nets: [driver, fanout]), ``replicated``
    (registers whose MAX_FANOUT attribute the model honours: [driver, loads, max_fanout]),
    ``unknown_cells``.
    """
    m = model or DEFAULT_MODEL
    _, mod = _top(netlist, top)
    cells_json = mod.get("cells", {})
    ports = mod.get("ports", {})
    cells: Dict[str, _Cell] = {}
    unknown: Counter = Counter()
    for name, c in cells_json.items():
        cell = _build_cell(name, c, m)
        cells[name] = cell
        if cell.kind == "unknown":
            unknown[cell.type] += 1

    # drivers and sinks of every bit
    driver: Dict[int, Tuple] = {}
    sinks: Dict[int, List[Tuple[str, str, int]]] = defaultdict(list)
    for pname, p in ports.items():
        for i, b in enumerate(p.get("bits", [])):
            if not isinstance(b, int):
                continue
            if p.get("direction") in ("input", "inout"):
                driver[b] = ("port", pname, i)
            if p.get("direction") in ("output", "inout"):
                sinks[b].append(("<port>", pname, i))
    for name, cell in cells.items():
        for pn, bits in cell.conn.items():
            dr = cell.dirs.get(pn)
            for i, b in enumerate(bits):
                if not isinstance(b, int):
                    continue
                if dr == "output":
                    driver[b] = ("cell", name, pn, i)
                elif dr == "input" and not _CLOCK_PINS.match(pn):
                    sinks[b].append((name, pn, i))
    fanout = {b: len(s) for b, s in sinks.items()}

    # a register whose net carries MAX_FANOUT n is replicated by Vivado's synthesis so that no
    # copy drives more than n loads (UG901); yosys keeps one: route it as its copies would be
    replicated: Dict[int, Tuple[int, int]] = {}        # bit -> (loads, max_fanout)
    for nname, nd in mod.get("netnames", {}).items():
        mf = _param_int(nd.get("attributes", {}), "max_fanout", 0)
        if mf > 0:
            for b in nd.get("bits", []):
                if isinstance(b, int) and fanout.get(b, 0) > mf:
                    replicated[b] = (fanout[b], mf)
                    fanout[b] = mf

    # readable names: the public net name of a bit (hdlname/`$`-free names first)
    bitname: Dict[int, str] = {}
    for nname, nd in mod.get("netnames", {}).items():
        public = not nname.startswith("$")
        for i, b in enumerate(nd.get("bits", [])):
            if not isinstance(b, int):
                continue
            label = nname if len(nd["bits"]) == 1 else f"{nname}[{i}]"
            old = bitname.get(b)
            if old is None or (public and (old.startswith("$") or len(label) < len(old))):
                bitname[b] = label

    def cell_label(cell: _Cell) -> str:
        """A register by the net it drives, anything else by its name."""
        if cell.kind in ("ff", "srl"):
            q = cell.conn.get("Q", [None])[0]
            if isinstance(q, int) and q in bitname and not bitname[q].startswith("$"):
                return bitname[q]
        return cell.name

    def net_route(bit: int, sink_cell: Optional[_Cell], sink_port: str) -> float:
        """Routing from the driver of bit to one sink pin."""
        dv = driver.get(bit)
        f = fanout.get(bit, 1)
        if dv is not None and dv[0] == "cell" and sink_cell is not None:
            src = cells[dv[1]]
            # dedicated cascades: carry chain, DSP cascades
            if src.kind == "carry" and sink_cell.kind == "carry" and dv[2] == "CO" \
                    and dv[3] == 3 and sink_port == "CI":
                return 0.0
            if src.kind == "dsp" and sink_cell.kind == "dsp" and (dv[2], sink_port) in _DSP_CASCADE:
                return 0.0
            # inside one slice: LUT -> MUXF7 -> MUXF8, LUT -> CARRY4 S/DI (DI: LUT5 or
            # smaller), a single LUT,
            # MUXF or CARRY4 output into the flip-flop beside it
            if f == 1:
                # (a CARRY4's DI takes a LUT's O5 or the bypass: a LUT6 reaches it by routing)
                if src.kind == "lut" and sink_cell.kind in ("muxf", "carry") \
                        and sink_port in ("I0", "I1", "S", "DI") \
                        and not (sink_port == "DI" and src.type == "LUT6"):
                    return 0.0
                if src.kind == "muxf" and sink_cell.kind == "muxf" and sink_port in ("I0", "I1"):
                    return 0.0
                if src.kind in ("lut", "muxf", "carry") and sink_cell.kind == "ff" \
                        and sink_port == "D":
                    return 0.0
        hard = (sink_cell is not None and sink_cell.hard) or (
            dv is not None and dv[0] == "cell" and cells[dv[1]].hard)
        return route_delay(f, hard, m)

    # arrival of every bit: (ns, pred_bit, cell, what) for both modes: 0 clocked starts only,
    # 1 input-port starts only
    memo: Dict[int, Tuple] = {}
    tco_port = m.ns("TCKO")

    def port_ok(bit):        # which input ports start mode-1 paths (all; one for `reset`)
        return True

    def start_of(bit):
        dv = driver.get(bit)
        if dv is None:
            return ("none",)
        if dv[0] == "port":
            return ("port",)
        cell = cells[dv[1]]
        if cell.kind == "const":
            return ("none",)
        co = cell.clocked_out.get(dv[2])
        arcs = cell.arcs.get((dv[2], dv[3]))
        return ("cell", cell, co, arcs)

    def expand(b):
        s = start_of(b)
        if s[0] == "none":
            return (None, None), None
        if s[0] == "port":
            return (None, (tco_port, None, None, "input port") if port_ok(b) else None), None
        _, cell, co, arcs = s
        ins = []
        for (ip, ii, ns, what) in arcs or ():
            bits = cell.conn.get(ip, [])
            sel = bits if ii is None else (bits[ii:ii + 1] if ii < len(bits) else [])
            ins.extend((x, ip, ns, what) for x in sel if isinstance(x, int))

        def combine():
            res = []
            for mode in (0, 1):
                best = None
                if co is not None and mode == 0:
                    best = (co[0], None, cell.name, co[1])
                for x, ip, ns, what in ins:
                    a = memo[x][mode] if x in memo else None   # absent: a loop's back edge
                    if a is None:
                        continue
                    t = a[0] + net_route(x, cell, ip) + ns
                    if best is None or t > best[0]:
                        best = (t, x, cell.name, what)
                res.append(best)
            return tuple(res)
        return None, ([x for x, _, _, _ in ins], combine)

    def evaluate(bit):
        return postorder(bit, memo, expand)

    # endpoints
    ends = []   # (ns, bit, mode-arrival, end cell, pin, setup name, route)
    for name, cell in cells.items():
        for pn, (su, su_name) in cell.setup.items():
            for i, b in enumerate(cell.conn.get(pn, [])):
                if not isinstance(b, int):
                    continue
                ends.append((b, cell, pn, i, su, su_name))
    port_ends = []
    for pname, p in ports.items():
        if p.get("direction") in ("output", "inout"):
            for i, b in enumerate(p.get("bits", [])):
                if isinstance(b, int):
                    port_ends.append((b, pname, i))

    def trace(bit, mode):
        """Cells from the start to the net of ``bit``: [[name, type, arrival, what]], and the
        nets [[fanout, route]] in between."""
        out = []
        nets = []
        b = bit
        while True:
            a = memo[b][mode]
            dv = driver.get(b)
            if dv is None:
                break
            if dv[0] == "port":
                out.append([f"<input {dv[1]}[{dv[2]}]>", "port", round(a[0], 3), a[3]])
                break
            out.append([dv[1], cells[dv[1]].type, round(a[0], 3), a[3]])
            if a[1] is None:
                break
            pred = a[1]
            pdv = driver.get(pred)
            # route of the net pred -> this cell's pin
            pin = None
            for (ip, ii, ns, what) in cells[dv[1]].arcs.get((dv[2], dv[3]), []):
                bits = cells[dv[1]].conn.get(ip, [])
                if pred in bits:
                    pin = ip
                    break
            nets.append([fanout.get(pred, 1), round(net_route(pred, cells[dv[1]], pin or ""), 3)])
            b = pred
            if pdv is None:
                break
        return list(reversed(out)), list(reversed(nets))

    def collect(mode, with_ports_only_into):
        per_end: Dict[str, Tuple] = {}
        for b, cell, pn, i, su, su_name in ends:
            a = evaluate(b)[mode]
            if a is None:
                continue
            t = a[0] + net_route(b, cell, pn) + su
            cur = per_end.get(cell.name)
            if cur is None or t > cur[0]:
                per_end[cell.name] = (t, b, cell, pn, i, su, su_name, mode)
        return per_end

    def collect_ports(per_end, modes):
        for mode in modes:
            for b, pname, i in port_ends:
                a = evaluate(b)[mode]
                if a is None:
                    continue
                t = a[0] + route_delay(fanout.get(b, 1), False, m)
                k = f"<output {pname}>"
                cur = per_end.get(k)
                if cur is None or t > cur[0]:
                    per_end[k] = (t, b, None, pname, i, 0.0, "output port", mode)
        return per_end

    results = {}
    for key in ("reg2reg", "io"):
        if key == "reg2reg":
            per_end = collect(0, None)
        else:
            per_end = collect_ports(collect(1, None), (0, 1))
        ranked = sorted(per_end.values(), key=lambda r: -r[0])
        paths = []
        for t, b, cell, pn, i, su, su_name, mode in ranked[:n_paths]:
            on, nets = trace(b, mode)
            endroute = (net_route(b, cell, pn) if cell is not None
                        else route_delay(fanout.get(b, 1), False, m))
            nets.append([fanout.get(b, 1), round(endroute, 3)])
            first = cells.get(on[0][0]) if on else None
            paths.append(dict(
                ns=round(t, 3),
                start=on[0][0] if on else "?",
                start_label=cell_label(first) if first is not None else (on[0][0] if on else "?"),
                end_label=(cell_label(cell) if cell is not None else f"<output {pn}>"),
                start_type=on[0][1] if on else "?",
                end=f"{cell.name}.{pn}[{i}]" if cell is not None else f"<output {pn}[{i}]>",
                end_type=cell.type if cell is not None else "port",
                setup=[su_name, su],
                cells=on, nets=nets,
                luts=sum(1 for c in on[1:] if c[1] in _LUT),
                carry4=sum(1 for c in on[1:] if c[1] == "CARRY4")))
        results[key] = dict(worst_ns=round(ranked[0][0], 3) if ranked else 0.0, paths=paths,
                            endpoints=len(per_end))
        if key == "reg2reg":
            results[key]["over_budget"] = {
                cell_label(r[2]): round(r[0], 3)
                for name, r in sorted(per_end.items(), key=lambda kv: -kv[1][0])
                if r[0] > budget_ns}
    # the raw reset (docs/timing.md "Reset"): the input port's own net, its loads and the
    # worst path from it (mode 1 again, started from that port alone)
    rport = next((pn for pn in RESET_PORTS if ports.get(pn, {}).get("direction") == "input"), None)
    if rport is not None:
        rbits = {b for b in ports[rport].get("bits", []) if isinstance(b, int)}
        port_ok = rbits.__contains__     # noqa: F811 (read by expand at call time)
        memo = {}
        per_end = collect(1, None)
        worst = max(per_end.values(), key=lambda r: r[0]) if per_end else None
        loads = sum(fanout.get(b, 0) for b in rbits)
        reset = dict(port=rport, fanout=loads, route_ns=round(route_delay(loads, False, m), 3),
                     endpoints=len(per_end), worst_ns=round(worst[0], 3) if worst else 0.0)
        if worst is not None:
            on, _ = trace(worst[1], 1)
            reset.update(end_label=cell_label(worst[2]), end=f"{worst[2].name}.{worst[3]}",
                         luts=sum(1 for c in on[1:] if c[1] in _LUT))
        results["reset"] = reset
    ranked = sorted(((f, b) for b, f in fanout.items()), reverse=True)
    big = ranked[:10]

    def drv_name(b):
        dv = driver.get(b)
        if dv is None:
            return "?"
        return f"{dv[1]}.{dv[2]}[{dv[3]}]" if dv[0] == "cell" else f"<input {dv[1]}[{dv[2]}]>"

    results.update(
        max_fanout=[[bitname[b] if not bitname.get(b, "$").startswith("$") else drv_name(b), f]
                    for f, b in big],
        replicated=[[drv_name(b), loads, mf] for b, (loads, mf) in sorted(replicated.items())],
        # nets beyond what the calibration has seen routed (after the MAX_FANOUT copies)
        beyond_covered=[[bitname[b] if not bitname.get(b, "$").startswith("$") else drv_name(b), f]
                        for f, b in ranked if f > COVERED_FANOUT],
        unknown_cells=dict(unknown),
        clock_ns=CLOCK_NS, budget_ns=budget_ns,
        model={k: v.ns for k, v in m.delays.items() if k.startswith("ROUTE")},
    )
    return results


def format_path(p: Mapping) -> str:
    """One path as text: start, every cell with its arrival, the end pin and its setup."""
    lines = [f"{p['ns']:.3f} ns  {p.get('start_label', p['start'])} ({p['start_type']}) -> "
             f"{p.get('end_label', p['end'])} ({p['end_type']}; {p['end']})"]
    nets = p.get("nets", [])
    for i, (name, typ, t, what) in enumerate(p["cells"]):
        lines.append(f"    {t:7.3f}  {typ:9s} {name}  [{what}]")
        if i < len(nets):
            f, r = nets[i]
            lines.append(f"             net fanout {f}: +{r:.3f}")
    su_name, su = p["setup"]
    lines.append(f"    {p['ns']:7.3f}  setup {su_name} {su:.3f}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- make timing

#: every engine and the PL top at their PYNQ-Z1 configuration (sim/summary.py's list, plus the
#: overlay's own matrix engine: mv-engine with the Q4_1 lane)
TIMING_CONFIGS: List[Tuple[str, Dict, str]] = [
    ("overlay", {}, "top"),
    # the top with the INT8-KV attention engine (overlay kv_bits=8, make bitstream
    # ENGINES=overlay:kv_bits=8): built as the default is, held to the same budget
    ("overlay", {"kv_bits": 8}, "top-kv8"),
    ("attention-engine", dict(PYNQ_Z1["attention-engine"]), "attention-engine"),
    ("mv-engine", {"q4": True}, "mv-engine-q4"),
    ("mv-engine", {}, "mv-engine"),
    ("q4-engine", {}, "q4-engine"),
    ("ternary-engine", {}, "ternary-engine"),
    ("int8-engine", {}, "int8-engine"),
    ("probe", {}, "probe"),
]


def _vector_configs() -> List[Tuple[str, Dict, str]]:
    """The budget per `vectors` (docs/vectors.md): the top's matrix engine at every vectors
    value make report tries but 1 (mv-engine-q4), and the top at resources.TOP_VECTORS but its
    default ("top")."""
    from ..designs.overlay import PYNQ_Z1_VECTORS, engine_params
    from .resources import BUDGET_VECTORS, TOP_VECTORS
    out = [("overlay", {"vectors": v}, f"top-v{v}") for v in TOP_VECTORS
           if v != PYNQ_Z1_VECTORS]
    out += [("mv-engine", engine_params(v), f"mv-engine-q4-v{v}") for v in BUDGET_VECTORS
            if v > 1]
    return out


TIMING_CONFIGS += _vector_configs()


def config_vectors(name: str) -> int:
    """The `vectors` of a TIMING_CONFIGS row by its name: top-v<B> and mv-engine-q4-v<B> carry
    theirs, every other configuration is at its PYNQ-Z1 one (the top's default)."""
    from ..designs.overlay import PYNQ_Z1_VECTORS
    if name == "mv-engine-q4":
        return 1
    m = re.fullmatch(r"(?:top|mv-engine-q4)-v(\d+)", name)
    return int(m.group(1)) if m else PYNQ_Z1_VECTORS


def built_configs() -> List[Tuple[str, Dict, str]]:
    """The configurations the bitstream carries (what tests/generators/report/test_timing_top.py holds to
    6.0 ns): every row of TIMING_CONFIGS at the top's default vectors; the others are the
    budget's what-ifs, recorded but not built."""
    from ..designs.overlay import PYNQ_Z1_VECTORS
    return [c for c in TIMING_CONFIGS if config_vectors(c[2]) == PYNQ_Z1_VECTORS]


def vector_worst(rows: Sequence[Mapping]) -> Dict[Tuple[str, int], float]:
    """{("mv-engine" | "top", vectors): worst ns} from timing rows named as TIMING_CONFIGS."""
    out: Dict[Tuple[str, int], float] = {}
    for r in rows:
        if r.get("error") or "timing" not in r:
            continue
        name, ns = r["name"], r["timing"]["reg2reg"]["worst_ns"]
        if name == "top" or name.startswith("top-v"):
            out[("top", config_vectors(name))] = ns
        elif name.startswith("mv-engine-q4"):
            out[("mv-engine", config_vectors(name))] = ns
    return out


def _model_salt() -> str:
    import hashlib
    return hashlib.sha256(Path(__file__).read_bytes() + FITTED_FILE.read_bytes()).hexdigest()[:12]


def calibrated_summary(res: Mapping) -> dict:
    """What the figures keep of an :func:`analyze` run with :data:`CALIBRATED_MODEL`: the worst
    path, its bound, whether it closes (modelled + bound <= CLOCK_NS), the nets beyond the
    calibration's fanouts."""
    w = res["reg2reg"]["paths"][0] if res["reg2reg"]["paths"] else {}
    worst = res["reg2reg"]["worst_ns"]
    return dict(worst_ns=worst, bound_ns=bound_ns(worst),
                with_bound_ns=round(worst + bound_ns(worst), 3),
                closes=worst + bound_ns(worst) <= CLOCK_NS,
                budget_ns=CALIBRATED_BUDGET_NS, over=len(res["reg2reg"]["over_budget"]),
                start_label=w.get("start_label"), end_label=w.get("end_label"),
                beyond_covered=res.get("beyond_covered", [])[:20],
                beyond_covered_count=len(res.get("beyond_covered", [])),
                paths=res["reg2reg"]["paths"][:3])


def timing_config(design: str, params: Mapping, out, force: bool = False,
                  n_paths: int = 10) -> dict:
    """Synthesise one configuration (or take it from `make report`'s cache in ``out``) and
    analyse its netlist (cached in ``out/timing/`` by netlist and by this module's text).
    Returns the synthesis row plus ``timing`` (:func:`analyze`'s result)."""
    import json
    from pathlib import Path
    from .synth_cache import synth_config
    out = Path(out)
    row = synth_config(dict(design=design, params=dict(params), kind="default"), out,
                       force=force, netlist=True)
    cache = out / "timing" / f"{row['key']}-{_model_salt()}-{n_paths}.json"
    if cache.exists() and not force:
        row["timing"] = json.loads(cache.read_text())
        return row
    netlist = json.loads(Path(row["netlist"]).read_text())
    res = analyze(netlist, top=row.get("top"), n_paths=n_paths)
    res["calibrated"] = calibrated_summary(analyze(netlist, top=row.get("top"), n_paths=3,
                                                   model=CALIBRATED_MODEL,
                                                   budget_ns=CALIBRATED_BUDGET_NS))
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(res, indent=1))
    row["timing"] = res
    return row


def timing_rows(rows: Sequence[Mapping]) -> List[dict]:
    """The summary table: one row per configuration."""
    out = []
    for r in rows:
        if r.get("error"):
            out.append(dict(design=r["name"], note=f"FAILED: {r['error']}"[:80]))
            continue
        t = r["timing"]
        w = t["reg2reg"]["paths"][0] if t["reg2reg"]["paths"] else {}
        rst = t.get("reset", {})
        out.append(dict(
            design=r["name"], worst_ns=t["reg2reg"]["worst_ns"],
            slack_ns=round(t["clock_ns"] - t["reg2reg"]["worst_ns"], 3),
            over=len(t["reg2reg"]["over_budget"]), endpoints=t["reg2reg"]["endpoints"],
            luts=w.get("luts"), carry4=w.get("carry4"),
            path=f"{w.get('start_label', '?')} ({w.get('start_type', '?')}) -> "
                 f"{w.get('end_label', '?')} ({w.get('end_type', '?')})",
            io_ns=t["io"]["worst_ns"], rst_loads=rst.get("fanout"), rst_ns=rst.get("worst_ns"),
            **_calibrated_cols(t.get("calibrated"))))
    return out


def _calibrated_cols(c: Optional[Mapping]) -> dict:
    if not c:
        return {}
    return dict(cal_ns=c["worst_ns"], cal_bound_ns=c["with_bound_ns"],
                cal_closes="yes" if c["closes"] else "no", cal_beyond=c["beyond_covered_count"])


TIMING_COLUMNS = ["design", "worst_ns", "slack_ns", "over", "endpoints", "luts", "carry4",
                  "io_ns", "rst_loads", "rst_ns", "cal_ns", "cal_bound_ns", "cal_closes",
                  "cal_beyond", "path"]
TIMING_HEADERS = {"worst_ns": "worst reg-to-reg ns", "slack_ns": "slack at 7.0 ns",
                  "over": f"end cells over {BUDGET_NS} ns", "endpoints": "end cells",
                  "luts": "LUTs on it", "carry4": "CARRY4 on it",
                  "io_ns": "worst port path ns", "rst_loads": "aresetn loads",
                  "rst_ns": "worst path from aresetn ns",
                  "cal_ns": "calibrated worst ns", "cal_bound_ns": "calibrated + bound ns",
                  "cal_closes": "closes at 7.0 ns with the bound",
                  "cal_beyond": f"nets over {COVERED_FANOUT} loads",
                  "path": "worst path (start -> end)"}


def figures(rows: Sequence[Mapping]) -> List[dict]:
    """What `make timing` records (docs/results/timing.json)."""
    from ..results import figure
    figs = []
    for r in rows:
        if r.get("error"):
            continue
        t = r["timing"]
        w = t["reg2reg"]["paths"][0] if t["reg2reg"]["paths"] else {}
        what = ("worst register-to-register path of the PYNQ-Z1 top (overlay)" if r["name"] == "top"
                else f"worst register-to-register path of {r['name']} at its PYNQ-Z1 configuration"
                + (f" ({', '.join(f'{k}={v}' for k, v in r['params'].items())})"
                   if r.get("params") else ""))
        figs.append(figure(f"timing.{r['name']}.worst_ns", t["reg2reg"]["worst_ns"], "ns",
                           "modelled", what, start=w.get("start_label"), end=w.get("end_label"),
                           params=r.get("params", {})))
        figs.append(figure(f"timing.{r['name']}.over_budget", len(t["reg2reg"]["over_budget"]),
                           "end cells", "modelled",
                           f"end cells of {r['name']} whose worst path exceeds {BUDGET_NS} ns"))
        c = t.get("calibrated")
        if c:
            figs.append(figure(
                f"timing.{r['name']}.calibrated_ns", c["worst_ns"], "ns", "modelled",
                f"{r['name']}'s worst path under the calibrated model (numbers fitted to "
                f"Vivado's post-route reports, make timing-calibrate); its error bound "
                f"{100 * BOUND_FRACTION:.1f} % of the path: {c['bound_ns']} ns",
                bound_ns=c["bound_ns"], with_bound_ns=c["with_bound_ns"],
                closes=c["closes"], start=c["start_label"], end=c["end_label"]))
            figs.append(figure(
                f"timing.{r['name']}.calibrated_with_bound_ns", c["with_bound_ns"], "ns",
                "modelled", f"{r['name']}'s calibrated worst path plus its error bound: "
                f"{'closes' if c['closes'] else 'does not close'} at {CLOCK_NS} ns",
                closes=c["closes"]))
            figs.append(figure(
                f"timing.{r['name']}.nets_beyond_calibration", c["beyond_covered_count"], "nets",
                "modelled", f"nets of {r['name']} with more loads than the calibration has "
                f"seen routed in two designs ({COVERED_FANOUT}), after the MAX_FANOUT copies",
                largest=c["beyond_covered"][:10]))
        rst = t.get("reset")
        if rst:
            figs.append(figure(f"timing.{r['name']}.aresetn_fanout", rst["fanout"], "loads",
                               "modelled", f"loads of {r['name']}'s raw aresetn net (the reset "
                               f"register(s) and the port flags, docs/timing.md \"Reset\"), "
                               f"routed at {rst['route_ns']:.2f} ns"))
            figs.append(figure(f"timing.{r['name']}.aresetn_ns", rst["worst_ns"], "ns", "modelled",
                               f"worst path of {r['name']} from the aresetn port (taken as a "
                               f"register outside) to a register: to {rst.get('end_label', '?')}, "
                               f"{rst.get('luts', 0)} LUT", end=rst.get("end_label")))
        if r["name"] == "top":
            for i, p in enumerate(t["reg2reg"]["paths"][:10], 1):
                figs.append(figure(f"timing.top.path{i}", p["ns"], "ns", "modelled",
                                   f"the top's path {i} (one per end cell): "
                                   f"{p['start_label']} -> {p['end_label']}",
                                   start=p["start"], end=p["end"], luts=p["luts"],
                                   carry4=p["carry4"]))
            figs.append(figure("timing.top.io_ns", t["io"]["worst_ns"], "ns", "modelled",
                               "worst path from or to a port of the top (ports taken as "
                               "registers outside)"))
            if t.get("max_fanout"):
                net, loads = t["max_fanout"][0]
                figs.append(figure("timing.top.max_fanout", loads, "loads", "modelled",
                                   f"the top's largest net after the MAX_FANOUT copies: {net}, "
                                   f"routed at {route_delay(loads):.2f} ns",
                                   net=net, largest=t["max_fanout"][:5]))
            from .resources import replica_ffs
            figs.append(figure("timing.top.replicated_ffs", replica_ffs(t), "FF", "modelled", "flip-flops Vivado adds to the top for its "
                               "MAX_FANOUT attributes (no copy over its limit)"))
    return figs


def main(argv=None) -> int:
    """`make timing`: every engine and the top at their PYNQ-Z1 configuration."""
    import argparse
    import time
    from concurrent.futures import ThreadPoolExecutor
    from pathlib import Path
    from .decoder_model import format_table
    from .synth_cache import log

    ap = argparse.ArgumentParser(description="make timing: modelled register-to-register "
                                 "paths on the yosys netlists (docs/timing.md)")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[2] / "build" / "report"),
                    help="shares make report's synthesis cache (default build/report)")
    ap.add_argument("--jobs", type=int, default=2, help="parallel yosys runs")
    ap.add_argument("--design", default="", help="one configuration name (top, mv-engine-q4, ...)")
    ap.add_argument("--paths", type=int, default=10, help="paths listed per configuration")
    ap.add_argument("--force", action="store_true", help="ignore the caches")
    ap.add_argument("--no-record", action="store_true", help="do not write docs/results/timing.json")
    args = ap.parse_args(argv)
    out = Path(args.out)
    t0 = time.time()
    cfgs = [c for c in TIMING_CONFIGS if not args.design or c[2] == args.design]
    if not cfgs:
        ap.error(f"--design {args.design!r}: one of {', '.join(c[2] for c in TIMING_CONFIGS)}")
    rows = []
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futs = [(c, pool.submit(timing_config, c[0], c[1], out, args.force, args.paths))
                for c in cfgs]
        for (design, params, name), f in futs:
            try:
                r = f.result()
            except Exception as exc:   # keep going: the table shows the failure
                log(f"timing {name} FAILED: {exc}")
                r = dict(error=str(exc).splitlines()[0] if str(exc) else repr(exc))
            r["name"] = name
            r["params"] = params
            rows.append(r)
    table = format_table(timing_rows(rows), TIMING_COLUMNS, TIMING_HEADERS)
    md = ["# make timing: modelled register-to-register paths", "",
          f"Generated by `make timing` ({time.strftime('%Y-%m-%d %H:%M')}). Model: "
          f"docs/timing.md; clock {CLOCK_NS} ns, budget {BUDGET_NS} ns (1.0 ns kept for what "
          f"the model cannot see). The calibrated columns: the numbers fitted to Vivado's "
          f"reports, their bound {100 * BOUND_FRACTION:.1f} % of the path (a path closes when "
          f"modelled + bound <= {CLOCK_NS} ns).", "", table, ""]
    print()
    print(table)
    for r in rows:
        if r.get("error"):
            continue
        paths = r["timing"]["reg2reg"]["paths"]
        md.append(f"## {r['name']} ({fmt(r.get('params', {}))}): {len(paths)} worst paths, one per end cell\n")
        md.append("```\n" + "\n\n".join(format_path(p) for p in paths) + "\n```\n")
        rst = r["timing"].get("reset")
        if rst:
            md.append(f"Raw `{rst['port']}`: {rst['fanout']} loads (route {rst['route_ns']} ns), "
                      f"worst path from it {rst['worst_ns']} ns to {rst.get('end_label')} "
                      f"({rst.get('luts', 0)} LUT)\n")
        if r["name"] == "top":
            if rst:
                print(f"\nThe top's raw {rst['port']}: {rst['fanout']} loads, its net "
                      f"{rst['route_ns']:.3f} ns; worst path from it {rst['worst_ns']:.3f} ns "
                      f"(to {rst.get('end_label')}, {rst.get('luts', 0)} LUT)")
            c = r["timing"].get("calibrated")
            if c:
                print(f"\nCalibrated model (docs/timing.md section 4): the top's worst path "
                      f"{c['worst_ns']:.3f} ns + bound {c['bound_ns']:.3f} ns = "
                      f"{c['with_bound_ns']:.3f} ns: "
                      f"{'closes' if c['closes'] else 'DOES NOT CLOSE'} at {CLOCK_NS} ns "
                      f"({c['start_label']} -> {c['end_label']}); "
                      f"{c['beyond_covered_count']} net(s) over {COVERED_FANOUT} loads")
            print(f"\nThe top's {len(paths)} worst paths (one per end cell):")
            for i, p in enumerate(paths, 1):
                print(f"  {i:2d}. {p['ns']:.3f} ns  {p['start_label']} ({p['start_type']}) -> "
                      f"{p['end_label']} ({p['end_type']}), {p['luts']} LUT, {p['carry4']} CARRY4")
    (out / "timing.md").parent.mkdir(parents=True, exist_ok=True)
    (out / "timing.md").write_text("\n".join(md))
    if not args.no_record and not args.design:
        from ..results import record
        record("timing", figures(rows))
    log(f"wrote {out / 'timing.md'} in {time.time() - t0:.0f} s")
    top = [r for r in rows if r.get("name") == "top" and not r.get("error")]
    failed = any(r.get("error") for r in rows)
    if top and top[0]["timing"]["reg2reg"]["worst_ns"] > BUDGET_NS:
        log(f"the top's worst path {top[0]['timing']['reg2reg']['worst_ns']} ns is over the "
            f"{BUDGET_NS} ns budget")
        return 1
    return 1 if failed else 0


def fmt(params: Mapping) -> str:
    from .synth_cache import fmt_params
    return fmt_params(params) or "defaults"


if __name__ == "__main__":
    import sys
    sys.exit(main())
