"""Resources as Vivado's utilisation report counts them, for every engine and the PL top.

Vivado's "Slice LUTs" are LUT as Logic + LUT as Memory (distributed RAM and shift registers,
SRL); yosys's ``stat`` counts logic LUTs only. :func:`vivado_rows` builds one table from the
synthesis results of ``make report`` (generators.report.synth_cache): per engine at its
PYNQ-Z1 configuration, the top's parts (its two matrix engines, the attention engine, the glue
and the whole top), the registers Vivado adds for the MAX_FANOUT attributes (counted by the
timing model: generators.report.timing), the block design's infrastructure at published
figures (:data:`INFRA`, each with its source) and the XC7Z020's capacity and utilisation.
:func:`figures` turns the table into ``make report``'s recorded figures.

One place for the infrastructure's published figures and the chip's capacity: here.
"""
from __future__ import annotations

import math
from typing import Dict, List, Mapping, Optional, Sequence

from ..designs import PYNQ_Z1

__all__ = ["XC7Z020", "INFRA", "ENGINES", "vivado_rows", "figures", "COLUMNS", "HEADERS",
           "NOTE", "replica_ffs", "fmt", "BUDGET_VECTORS", "CAPS", "budget_rows",
           "budget_figures", "BUDGET_COLUMNS", "BUDGET_HEADERS", "BUDGET_NOTE",
           "budget_configs", "TOP_VECTORS"]

from ..designs.overlay import PYNQ_Z1_VECTORS, engine_params

#: the Zynq-7020's programmable logic (DS190, Zynq-7000 SoC overview): 53,200 LUTs of which
#: 17,400 (the SLICEMs' LUTs: 1,100 Kb of distributed RAM at 64 bits a LUT) can be memory,
#: 106,400 flip-flops, 220 DSP48E1, 140 RAMB36
XC7Z020 = {"LUT": 53200, "LUTMEM": 17400, "FF": 106400, "DSP48E1": 220, "BRAM": 140}

#: The block design around pynq_overlay (vivado/build.tcl): two AXI DMAs in scatter-gather mode
#: (c_include_sg 1, 64-bit MM2S, 32-bit S2MM and SG masters), the AXI interconnect ctrl_ic (GP0,
#: AXI3 32 bit -> the two DMAs' AXI-Lite registers: a protocol converter and a 1x2 crossbar), one
#: AXI interconnect per HP port (hp0_ic, hp1_ic: MM2S 64 bit, S2MM and SG 32 bit -> S_AXI_HPn,
#: AXI3 64 bit: a 3x1 crossbar, an upsizer on each 32-bit master, an AXI4 -> AXI3 converter) and
#: proc_sys_reset. AMD's PG021 / PG059 tables are not on this machine (PG021 v7.1 defers to a
#: web page), so every figure is Vivado's own: the out-of-context synthesis utilisation reports
#: of the same IPs in a public PS7 + AXI DMA design on the 7020 (Vivado 2020.2, xc7z020clg400-2):
#: Ernest789/ZYNQ_7z020 @ ca3303bf6206ee6fe53e7ca62a64d9bf5691ef08 : dma/dma.runs/
#: bd_dma_<ip>_synth_1/bd_dma_<ip>_utilization_synth.rpt. Per instance: LUT as logic, LUT as
#: distributed RAM, LUT as shift register, FF, RAMB36 tiles. What they leave out is said per row:
#: that design's DMA is in simple mode (c_include_sg 0) with 32-bit masters, so **the SG engine
#: (axi_sg) and our wider MM2S are not in the DMA figure**: no 7-series figure of the SG
#: configuration was found (docs/report.md, "Infrastructure"); its crossbar is the 2x1 64-bit
#: one, standing in for our 1x2 AXI-Lite and 3x1 64-bit ones. OOC synthesis counts, before
#: opt_design ("the final LUT count ... is typically lower", as the reports say).
_IP_SRC = "Ernest789/ZYNQ_7z020 @ ca3303bf : dma/dma.runs/bd_dma_{}_synth_1 (Vivado 2020.2, 7z020)"
INFRA = [
    {"part": "AXI DMA (dma_0, dma_1)", "count": 2, "lut_logic": 1218, "lutram": 8, "srl": 150,
     "FF": 1857, "BRAM": 2.0,
     "source": _IP_SRC.format("axi_dma_0_0") + "; simple mode, 32 bit: SG engine not in it"},
    {"part": "AXI3 -> AXI-Lite converter (ctrl_ic)", "count": 1, "lut_logic": 356, "lutram": 0,
     "srl": 65, "FF": 562, "BRAM": 0.0, "source": _IP_SRC.format("auto_pc_0")},
    {"part": "AXI crossbar (ctrl_ic 1x2, hp0_ic / hp1_ic 3x1)", "count": 3, "lut_logic": 283,
     "lutram": 0, "srl": 3, "FF": 353, "BRAM": 0.0,
     "source": _IP_SRC.format("xbar_0") + "; its 2x1 64-bit crossbar stands in"},
    {"part": "upsizer 32 -> 64 bit (S2MM, SG on each HP port)", "count": 4, "lut_logic": 215,
     "lutram": 0, "srl": 28, "FF": 322, "BRAM": 0.0,
     "source": _IP_SRC.format("auto_us_0 / auto_us_1") + "; the larger of the two per column"},
    {"part": "AXI4 -> AXI3 converter, 64 bit (hp0_ic, hp1_ic)", "count": 2, "lut_logic": 388,
     "lutram": 10, "srl": 0, "FF": 430, "BRAM": 0.0, "source": _IP_SRC.format("auto_pc_1")},
    {"part": "proc_sys_reset (rst_fclk0)", "count": 1, "lut_logic": 18, "lutram": 0, "srl": 1,
     "FF": 40, "BRAM": 0.0, "source": _IP_SRC.format("rst_ps7_0_50M_0")},
]
for _i in INFRA:        # slice LUTs, as Vivado counts them: logic + distributed RAM + SRL
    _i["LUT"] = _i["lut_logic"] + _i["lutram"] + _i["srl"]

#: yosys's slice LUTs against Vivado's on public 7-series designs whose repositories hold both
#: the RTL and Vivado's utilisation report (the calibration set of ../shared/calibration.md),
#: measured by tools/lut_calibration.py (generators.report.yosys.synth, the model make report
#: uses, on the RTL at the commit named; report: Vivado's Slice LUTs). Only these figures are
#: kept here, none of those designs' code.
LUT_CALIBRATION = [
    # name, repository @ commit : report, part, Vivado version, Vivado LUT, yosys LUT
    ("uart", "Mike-zip/axi-uart @ e9991ba : reports/utilization.rpt", "xc7z007sclg400-1",
     "2024.2", 265, 155),
    ("lc4_system", "gracebrentano/lab4-pipeline @ 347bf94 : "
     "output/post_route_utilization_report.txt", "7z020clg484-1", "2017.4", 1622, 1473),
    ("risc_soc", "yash-bixt/RISC_SOC @ 00e4034 : Vivado-Project/RISC_SOC_v3/RISC_SOC_v3.runs/"
     "impl_1/nexys4_top_utilization_placed.rpt", "7a100tcsg324-1", "2020.2", 4452, 3834),
]


def lut_error(calibration: Sequence = LUT_CALIBRATION) -> dict:
    """yosys's error on the calibration set: Vivado LUT / yosys LUT per design, and its largest
    value (the largest under-estimate by yosys), which the LUT cap is checked with."""
    ratios = {name: round(viv / yos, 3) for name, _, _, _, viv, yos in calibration}
    worst = max(ratios, key=ratios.get)
    return {"ratios": ratios, "bound": ratios[worst], "design": worst,
            "least": min(ratios.values())}


#: every engine at its PYNQ-Z1 configuration: (name, design, parameters, what)
ENGINES = [
    ("probe", "probe", {}, "bandwidth probe"),
    ("int8-engine", "int8-engine", {}, "INT8 engine"),
    ("ternary-engine", "ternary-engine", {}, "ternary engine"),
    ("q4-engine", "q4-engine", {}, "Q4_1 engine"),
    ("mv-engine", "mv-engine", {}, "matrix engine, INT8 + ternary"),
    ("mv-engine-q4", "mv-engine", {"q4": True}, "matrix engine, INT8 + ternary + Q4_1, one vector"
     + (" (the top's)" if PYNQ_Z1_VECTORS == 1 else "")),
] + ([(f"mv-engine-q4-v{PYNQ_Z1_VECTORS}", "mv-engine", engine_params(PYNQ_Z1_VECTORS),
       f"matrix engine, INT8 + ternary + Q4_1, vectors {PYNQ_Z1_VECTORS} (the top's)")]
     if PYNQ_Z1_VECTORS > 1 else []) + [
    ("attention-engine", "attention-engine", dict(PYNQ_Z1["attention-engine"]),
     "attention engine, 48 MACs/clock"),
]

#: the note under the table in make report
NOTE = ("Slice LUTs = LUT as logic + LUT as memory (distributed RAM: the LUT sites of the RAM32M/"
        "RAM64M/RAM32X1D cells; SRL: SRL16E/SRLC32E), as Vivado's utilisation report counts "
        "them; yosys synth_xilinx estimates, engines synthesised alone at their PYNQ-Z1 "
        "configuration; the top's rows split the overlay (q4=true, max_k 2048, max_context "
        "2048) into its engines and the glue (top minus engines). FF copies: the registers "
        "Vivado replicates for the MAX_FANOUT attributes (docs/timing.md). The infrastructure "
        "rows (DMAs, interconnect parts, reset) are Vivado 2020.2's out-of-context synthesis "
        "reports of the same IPs in a public PS7 + AXI DMA design on the 7020 (each row names "
        "its report); that DMA is in simple mode, so the scatter-gather engine is not in the "
        "DMA rows (no 7-series figure of it was found). With the error: the top's yosys LUTs "
        "times yosys's largest under-estimate on the calibration set (Vivado / yosys, "
        "LUT_CALIBRATION), plus the infrastructure. BRAM in RAMB36 units. LUT as memory's "
        "share is of the 17,400 SLICEM LUTs.")

COLUMNS = ["part", "lut_logic", "lutram", "srl", "lut", "ff", "dsp", "bram", "source"]
HEADERS = {"lut_logic": "LUT as logic", "lutram": "LUT as memory: RAM",
           "srl": "LUT as memory: SRL", "lut": "slice LUTs", "ff": "FF", "dsp": "DSP48E1",
           "bram": "BRAM (RAMB36)"}


def _find(results: Sequence[Mapping], design: str, params: Mapping) -> Optional[Mapping]:
    for r in results:
        if r.get("design") == design and dict(r.get("params", {})) == dict(params) \
                and not r.get("error") and r.get("kind") != "lane":
            return r
    return None


def _split(r: Mapping, n: int = 1) -> Dict:
    """The Vivado split of one synthesis result (times n)."""
    return dict(lut_logic=n * r["LUT"], lutram=n * r.get("LUTRAM_luts", 0),
                srl=n * r.get("SRL", 0), lut=n * r.get("LUT_slice", r["LUT"]),
                ff=n * r["FF"], dsp=n * r["DSP48E1"], bram=n * r["BRAM"])


def replica_ffs(timing: Optional[Mapping]) -> int:
    """Flip-flops Vivado adds for the MAX_FANOUT attributes: for every replicated register bit
    of the timing analysis (``replicated``: [driver, loads, max_fanout]) ceil(loads / max) - 1
    copies."""
    if not timing:
        return 0
    return sum(math.ceil(loads / mf) - 1 for _, loads, mf in timing.get("replicated", []))


def vivado_rows(results: Sequence[Mapping], top_timing: Optional[Mapping] = None,
                infra: Sequence[Mapping] = INFRA, chip: Mapping = XC7Z020) -> List[dict]:
    """The table (see the module doc); rows whose synthesis is missing are left out; the top's
    part and the totals only when the overlay was synthesised."""
    rows = []
    for name, design, params, what in ENGINES:
        r = _find(results, design, params)
        if r is not None:
            rows.append(dict(part=f"{what} ({name})", name=name, group="engine",
                             source="yosys, engine alone", **_split(r)))
    top = _find(results, "overlay", {})
    if top is None:
        return rows
    q4 = bool((top.get("all_params") or {}).get("q4", True))
    vec = int((top.get("all_params") or {}).get("vectors", PYNQ_Z1_VECTORS))
    mat = _find(results, "mv-engine", engine_params(vec, True) if q4 else
                ({} if vec == 1 else dict(engine_params(vec, False), q4=False)))
    att = _find(results, "attention-engine", PYNQ_Z1["attention-engine"])
    keys = ("lut_logic", "lutram", "srl", "lut", "ff", "dsp", "bram")
    t = _split(top)
    if mat is not None and att is not None:
        m2, a1 = _split(mat, 2), _split(att)
        rows.append(dict(part="top: matrix engines (x2)", group="top", name="top-matrix",
                         source="yosys, engine alone", **m2))
        rows.append(dict(part="top: attention engine (x1)", group="top", name="top-attention",
                         source="yosys, engine alone", **a1))
        rows.append(dict(part="top: glue (slices, routers, joiner, merger)", group="top",
                         name="top-glue", source="yosys: top minus engines",
                         **{k: t[k] - m2[k] - a1[k] for k in keys}))
    rows.append(dict(part="pynq_overlay, the whole top", group="top", name="top",
                     source="yosys synth_xilinx", **t))
    total = dict(t)
    rep = replica_ffs(top_timing)
    if top_timing is not None:
        rows.append(dict(part="FF copies Vivado makes for MAX_FANOUT", group="infra",
                         name="replicas", lut_logic=0, lutram=0, srl=0, lut=0, ff=rep, dsp=0,
                         bram=0, source="timing model: replicated registers (docs/timing.md)"))
        total["ff"] += rep
    for i in infra:
        n = i["count"]
        part = dict(lut_logic=n * i["lut_logic"], lutram=n * i["lutram"], srl=n * i["srl"],
                    lut=n * i["LUT"], ff=n * i["FF"], dsp=0, bram=n * i["BRAM"])
        rows.append(dict(part=f"{i['part']} (x{n})", group="infra", name="infra",
                         source=i["source"], **part))
        for k in keys:
            total[k] += part[k]
    rows.append(dict(part="total PL (top + copies + infrastructure)", group="total",
                     name="total", source="sum", **total))
    err = lut_error()
    top_err = math.ceil(t["lut"] * err["bound"])
    infra_lut = sum(i["count"] * i["LUT"] for i in infra)
    rows.append(dict(part=f"total PL slice LUTs with yosys's error (top x {err['bound']:g})",
                     group="total", name="total-err", lut_logic=None, lutram=None, srl=None,
                     lut=top_err + infra_lut, ff=None, dsp=None, bram=None,
                     source=f"the top's yosys LUTs x the largest Vivado / yosys ratio of the "
                            f"calibration set ({err['design']}) + infrastructure"))
    cap = dict(lut_logic=chip["LUT"], lutram=chip["LUTMEM"], srl=chip["LUTMEM"],
               lut=chip["LUT"], ff=chip["FF"], dsp=chip["DSP48E1"], bram=chip["BRAM"])
    rows.append(dict(part="XC7Z020 capacity", group="total", name="capacity",
                     source="DS190 (LUT as memory: SLICEM LUTs)", **cap))
    share = {k: round(100.0 * total[k] / cap[k], 1) for k in keys}
    share["lutram"] = round(100.0 * (total["lutram"] + total["srl"]) / cap["lutram"], 1)
    share["srl"] = None
    rows.append(dict(part="share of the 7020 (%)", group="total", name="share",
                     source="total / capacity (LUT as memory: RAM + SRL)", **share))
    rows.append(dict(part="share of the 7020 with yosys's LUT error (%)", group="total",
                     name="share-err", lut_logic=None, lutram=None, srl=None,
                     lut=round(100.0 * (top_err + infra_lut) / cap["lut"], 1), ff=None,
                     dsp=None, bram=None, source="total with the error / capacity"))
    return rows


def fmt(v):
    """Table cells: thousands separators, BRAM halves, a dash for what is not counted."""
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:g}" if v != int(v) else f"{int(v):,}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _num(v):
    """A whole float as an int (BRAM counts: 21.0 -> 21, 16.5 stays)."""
    return int(v) if isinstance(v, float) and v == int(v) else v


def calibration_figures(calibration: Sequence = LUT_CALIBRATION) -> List[dict]:
    """The LUT calibration (LUT_CALIBRATION, tools/lut_calibration.py) as recorded figures."""
    from ..results import figure
    err = lut_error(calibration)
    out = []
    for name, src, part, ver, viv, yos in calibration:
        out += [figure(f"report.lut-calibration.{name}.vivado", viv, "LUT", "measured",
                       f"{name}: Vivado {ver}'s slice LUTs ({src}, {part})"),
                figure(f"report.lut-calibration.{name}.yosys", yos, "LUT", "synthesised (yosys)",
                       f"{name}: yosys's slice LUTs on the same RTL (tools/lut_calibration.py)"),
                figure(f"report.lut-calibration.{name}.ratio", err["ratios"][name], "x",
                       "measured", f"{name}: Vivado LUT / yosys LUT")]
    out.append(figure("report.lut-error", err["bound"], "x", "measured",
                      f"yosys's largest LUT under-estimate on the calibration set "
                      f"(Vivado / yosys, {err['design']}): the 80 % cap is checked with it",
                      designs=len(calibration)))
    return out


def figures(rows: Sequence[Mapping]) -> List[dict]:
    """``make report``'s recorded figures: each engine's and the top's Vivado-style resources
    and the 7020's utilisation."""
    from ..results import figure
    out = calibration_figures()
    label = "synthesised (yosys)"
    by = {r["name"]: r for r in rows}
    if "mv-engine" in by and "mv-engine-q4" in by:     # what the Q4_1 lane adds to an engine
        a, b = by["mv-engine"], by["mv-engine-q4"]
        for k, unit, what in (("lut", "LUT", "slice LUTs"), ("ff", "FF", "flip-flops"),
                              ("dsp", "DSP48E1", "DSP48E1")):
            out.append(figure(f"report.q4-lane.{k}", b[k] - a[k], unit, label,
                              f"what the Q4_1 lane adds to one matrix engine: {what} "
                              f"(mv-engine q4=true minus mv-engine)"))
    for r in rows:
        name = r["name"]
        if r["group"] == "engine" or name == "top":
            key = f"report.{name}"
            what = r["part"]
            out += [
                figure(f"{key}.lut", r["lut"], "LUT", label,
                       f"{what}: slice LUTs (logic + memory, as Vivado counts them)",
                       logic=r["lut_logic"], lutram=r["lutram"], srl=r["srl"]),
                figure(f"{key}.lut_logic", r["lut_logic"], "LUT", label, f"{what}: LUT as logic"),
                figure(f"{key}.lut_mem", r["lutram"] + r["srl"], "LUT", label,
                       f"{what}: LUT as memory (distributed RAM + SRL)"),
                figure(f"{key}.ff", r["ff"], "FF", label, f"{what}: flip-flops"),
                figure(f"{key}.dsp", r["dsp"], "DSP48E1", label, f"{what}: DSP48E1"),
                figure(f"{key}.bram", _num(r["bram"]), "RAMB36", label,
                       f"{what}: block RAM (RAMB18 = 0.5)"),
            ]
        elif name == "total":
            out += [figure("report.total.lut", r["lut"], "LUT", "modelled",
                           "PL total: the top (yosys) + the infrastructure (Vivado's OOC "
                           "reports of the same IPs on a 7020)"),
                    figure("report.total.ff", r["ff"], "FF", "modelled",
                           "PL total flip-flops: the top (yosys) + MAX_FANOUT copies + the "
                           "infrastructure"),
                    figure("report.total.lut_mem", r["lutram"] + r["srl"], "LUT", "modelled",
                           "PL total LUT as memory (distributed RAM + SRL), infrastructure "
                           "included"),
                    figure("report.total.bram", _num(r["bram"]), "RAMB36", "modelled",
                           "PL total block RAM, the DMAs' included")]
        elif name == "total-err":
            out.append(figure("report.total.lut_with_error", r["lut"], "LUT", "modelled",
                              "PL total slice LUTs with yosys's largest under-estimate on the "
                              "calibration set applied to the top"))
        elif name == "share-err":
            out.append(figure("report.share.lut_with_error", r["lut"], "%", "modelled",
                              "share of the XC7Z020's slice LUTs the PL total takes with "
                              "yosys's error (the 80 % cap is checked on this)"))
        elif name == "share":
            for k, what in (("lut", "slice LUTs"), ("lutram", "LUT as memory"), ("ff", "FF"),
                            ("dsp", "DSP48E1"), ("bram", "block RAM")):
                out.append(figure(f"report.share.{k}", r[k], "%", "modelled",
                                  f"share of the XC7Z020's {what} the PL total takes"))
    return out


# --------------------------------------------------------------------------------------------
# the budget per `vectors` (docs/vectors.md): what each B costs and whether the 7020 holds it

#: the `vectors` values make report tries
BUDGET_VECTORS = (1, 2, 3, 4)
#: the `vectors` values at which make report and make timing synthesise the whole top (4.5 to
#: 30 min of yosys each), besides its default: the others are modelled from the engine alone
TOP_VECTORS = (1, 2)
# make timing's budget (imported here, after the names timing's own import of this module
# reads, so that either module may be imported first)
from .timing import BUDGET_NS as TIMING_BUDGET_NS  # noqa: E402
#: the caps of issue 20 on the whole PL: slice LUTs (logic + LUTRAM + SRL) and DSP48E1, in %
CAPS = {"lut": 80.0, "dsp": 90.0}


def budget_configs() -> List[dict]:
    """The synthesis configurations the budget needs: the matrix engine alone at every
    vectors value (the top's parameters, engine_params) and the top at TOP_VECTORS but its
    default (the top at its default is make report's default overlay run)."""
    out = [dict(design="mv-engine", params=engine_params(v), kind="sweep")
           for v in BUDGET_VECTORS if engine_params(v) != {"q4": True}]
    out += [dict(design="overlay", params={"vectors": v}, kind="sweep")
            for v in TOP_VECTORS if v != PYNQ_Z1_VECTORS]
    return out


def budget_rows(results: Sequence[Mapping], worst: Optional[Mapping] = None,
                infra: Sequence[Mapping] = INFRA, chip: Mapping = XC7Z020,
                default: int = PYNQ_Z1_VECTORS) -> List[dict]:
    """One row per `vectors` value of BUDGET_VECTORS whose engine was synthesised: the matrix
    engine alone, the top (synthesised where make report synthesises it: at vectors 1 and at
    the default; else the default top plus twice the engine's difference, the glue and the
    attention engine being the same), the whole PL (the top plus the published DMA and
    interconnect LUTs, as in vivado_rows), its shares of the 7020 and whether it is under the
    caps. ``worst``: {("mv-engine" | "top", vectors): modelled worst path in ns}."""
    worst = worst or {}
    eng = {v: _find(results, "mv-engine", engine_params(v)) for v in BUDGET_VECTORS}
    tops = {v: _find(results, "overlay", {} if v == default else {"vectors": v})
            for v in BUDGET_VECTORS}
    keys = ("lut_logic", "lutram", "srl", "lut", "ff", "dsp", "bram")
    infra_lut = sum(i["count"] * i["LUT"] for i in infra)
    err = lut_error()
    rows = []
    for v in BUDGET_VECTORS:
        e = eng[v]
        if e is None:
            continue
        es = _split(e)
        if tops[v] is not None:
            t = _split(tops[v])
            source = "top synthesised"
        elif tops[default] is not None and eng[default] is not None:
            base, d = _split(tops[default]), _split(eng[default])
            t = {k: base[k] + 2 * (es[k] - d[k]) for k in keys}
            source = f"top at vectors {default} + 2 x (engine at {v} - engine at {default})"
        else:
            continue
        pl_lut = t["lut"] + infra_lut
        pl_lut_err = math.ceil(t["lut"] * err["bound"]) + infra_lut
        share = {"lut": round(100.0 * pl_lut / chip["LUT"], 1),
                 "lut_err": round(100.0 * pl_lut_err / chip["LUT"], 1),
                 "ff": round(100.0 * t["ff"] / chip["FF"], 1),
                 "dsp": round(100.0 * t["dsp"] / chip["DSP48E1"], 1),
                 "bram": round(100.0 * t["bram"] / chip["BRAM"], 1)}
        # the LUT cap holds only if it holds with yosys's error (issue 30)
        fits = share["lut_err"] <= CAPS["lut"] and share["dsp"] <= CAPS["dsp"]
        t_worst = worst.get(("top", v))
        meets = "-" if t_worst is None else ("yes" if t_worst <= TIMING_BUDGET_NS else "no")
        rows.append(dict(vectors=v, e_lut=es["lut"], e_ff=es["ff"], e_dsp=es["dsp"],
                         e_bram=_num(es["bram"]), t_lut=t["lut"], t_ff=t["ff"], t_dsp=t["dsp"],
                         t_bram=_num(t["bram"]), pl_lut=pl_lut, lut_pct=share["lut"],
                         pl_lut_err=pl_lut_err, lut_err_pct=share["lut_err"],
                         ff_pct=share["ff"], dsp_pct=share["dsp"], bram_pct=share["bram"],
                         e_worst=worst.get(("mv-engine", v)), t_worst=worst.get(("top", v)),
                         fits="yes" if fits else "no", meets=meets,
                         default="yes" if v == default else "",
                         source=source))
    return rows


BUDGET_COLUMNS = ["vectors", "e_lut", "e_ff", "e_dsp", "e_bram", "t_lut", "t_ff", "t_dsp",
                  "t_bram", "pl_lut", "lut_pct", "pl_lut_err", "lut_err_pct", "ff_pct",
                  "dsp_pct", "bram_pct", "e_worst", "t_worst", "fits", "meets", "default",
                  "source"]
BUDGET_HEADERS = {"e_lut": "engine LUT", "e_ff": "engine FF", "e_dsp": "engine DSP",
                  "e_bram": "engine BRAM", "t_lut": "top LUT", "t_ff": "top FF",
                  "t_dsp": "top DSP", "t_bram": "top BRAM", "pl_lut": "PL LUT",
                  "lut_pct": "PL LUT %", "pl_lut_err": "PL LUT with yosys's error",
                  "lut_err_pct": "PL LUT % with the error", "ff_pct": "FF %", "dsp_pct": "DSP %",
                  "bram_pct": "BRAM %", "e_worst": "engine worst ns", "t_worst": "top worst ns",
                  "fits": f"under {CAPS['lut']:g} % LUT, {CAPS['dsp']:g} % DSP",
                  "meets": f"top within {TIMING_BUDGET_NS:g} ns",
                  "default": "PYNQ-Z1 default"}
BUDGET_NOTE = ("The matrix engine (mv-engine q4=true, as the top builds it: generators.designs."
               "overlay.engine_params) synthesised alone at each vectors value; the top twice "
               "(two ports). PL LUT = the top's slice LUTs (logic + LUTRAM + SRL) + the "
               "infrastructure's of section 1b; with the error: the top's times yosys's largest "
               "under-estimate on the calibration set, and the LUT cap is checked on that (FF %: "
               "the top's flip-flops only). "
               "Worst ns: make timing's modelled worst register-to-register path (budget "
               "6.0 ns of 7.0 ns, docs/timing.md); '-' where that configuration was not "
               "analysed. The PYNQ-Z1 default was chosen as the largest vectors under both caps "
               "whose top meets the 6.0 ns budget, before the LUT error was known "
               "(docs/vectors.md).")


def budget_figures(rows: Sequence[Mapping]) -> List[dict]:
    """make report's figures of the budget table (report.vectors.v<B>.*)."""
    from ..results import figure
    out = []
    for r in rows:
        key, v = f"report.vectors.v{r['vectors']}", r["vectors"]
        how = "synthesised (yosys)" if r["source"] == "top synthesised" else "modelled"
        out += [
            figure(f"{key}.engine_lut", r["e_lut"], "LUT", "synthesised (yosys)",
                   f"matrix engine (q4=true) at vectors {v}: slice LUTs"),
            figure(f"{key}.engine_dsp", r["e_dsp"], "DSP48E1", "synthesised (yosys)",
                   f"matrix engine (q4=true) at vectors {v}: DSP48E1"),
            figure(f"{key}.top_lut", r["t_lut"], "LUT", how,
                   f"PL top at vectors {v}: slice LUTs ({r['source']})"),
            figure(f"{key}.top_ff", r["t_ff"], "FF", how, f"PL top at vectors {v}: flip-flops"),
            figure(f"{key}.top_dsp", r["t_dsp"], "DSP48E1", how, f"PL top at vectors {v}: DSP48E1"),
            figure(f"{key}.top_bram", r["t_bram"], "RAMB36", how,
                   f"PL top at vectors {v}: block RAM"),
            figure(f"{key}.lut_share", r["lut_pct"], "%", "modelled",
                   f"whole PL at vectors {v}: share of the 7020's slice LUTs, yosys's count"),
            figure(f"{key}.lut_share_with_error", r["lut_err_pct"], "%", "modelled",
                   f"whole PL at vectors {v}: share of the 7020's slice LUTs with yosys's "
                   f"largest under-estimate on the calibration set (cap {CAPS['lut']:g} %)"),
            figure(f"{key}.dsp_share", r["dsp_pct"], "%", "modelled",
                   f"whole PL at vectors {v}: share of the 7020's DSP48E1 (cap {CAPS['dsp']:g} %)"),
            figure(f"{key}.bram_share", r["bram_pct"], "%", "modelled",
                   f"whole PL at vectors {v}: share of the 7020's RAMB36"),
        ]
    return out
