#!/usr/bin/env python3
"""make a9-core-check: the Cortex-A9 model's core term (llvm-mca's cycles per qemu-arm block,
generators/runtime/bench/a9model.py) checked against loops whose cycles were measured on real
Cortex-A9 chips and published; the errors in docs/results/a9-core-check.json (labelled
modelled, each with the published figure and its source).

make a9-model's error against the board (the write-up's kernels: small ops +210 %, attention
+147 %, dot product -54 %) mixes three unknowns: the write-up's code (rewritten), its build (not
named) and the model. This check takes the first two away: each loop of tools/a9cal/corecheck.c
is the published loop instruction for instruction, in ARM-mode assembly (no compiler choice),
L1-resident (no memory term), so the difference is llvm-mca's Cortex-A9 model alone.

Each loop is built as the model builds the project's code (a9model.model_flags(): the board
build's flags, -marm), run under qemu-arm twice (ITERATIONS[0] and ITERATIONS[1] trips), its
blocks counted (a9model.profile, a9model.difference) and priced with the model's own functions
(a9model.core_cycles: llvm-mca per block x executions): modelled cycles per trip against the
published figure converted to cycles per trip at the chip's stated clock.

A published CoreMark or Dhrystone score of a Cortex-A9 would test the integer and branch mix of
real code; those programs are third-party code, which this repository neither commits nor
builds (docs/runtime.md, "The core term against real Cortex-A9 measurements": what was found).

    python tools/a9_core_check.py [--no-record]
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Mapping

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tools"))

from generators.runtime.bench import a9model as am  # noqa: E402

OUT = REPO / "build" / "a9core"
SRC = REPO / "tools" / "a9cal" / "corecheck.c"
#: the two runs' trips of each loop (their difference is what is priced)
ITERATIONS = (200, 1200)

#: the published measurements: kernel of corecheck.c -> the figure, the chip and its clock,
#: and what one trip of the loop does (``work`` units a trip, in the unit the figure counts:
#: ``per_second`` figures are rates of work, ``per_work`` figures are cycles per unit of work)
REFERENCES = (
    {"kernel": "vmla_q", "what": "five independent NEON VMLA.F32 on quadwords a trip",
     "source": "http://gruntthepeon.free.fr/blog/index.php/2011/05/26/54-arm-cortex-a9-peak-flops",
     "chip": "Pandaboard (TI OMAP4430, Cortex-A9)", "hz": 1.0e9,
     "published": 3.99919e9, "unit": "FLOP/s", "kind": "per_second",
     "work": 40, "work_unit": "FLOP (5 x 4 lanes x 2)",
     "quote": "3.99919 GFlops with five VMLA.F32 q, q, q, SUBS, BNE at 1 GHz"},
    {"kernel": "vmla_d", "what": "ten independent NEON VMLA.F32 on doublewords a trip",
     "source": "http://gruntthepeon.free.fr/blog/index.php/2011/05/26/54-arm-cortex-a9-peak-flops",
     "chip": "Pandaboard (TI OMAP4430, Cortex-A9)", "hz": 1.0e9,
     "published": 3.64e9, "unit": "FLOP/s", "kind": "per_second",
     "work": 40, "work_unit": "FLOP (10 x 2 lanes x 2)",
     "quote": "3.64 GFlops with the five VMLA on quadwords replaced by ten on doublewords"},
    {"kernel": "vmla_chain",
     "what": "five NEON VMLA.F32 on quadwords, each one's operands another's result",
     "source": "https://community.nxp.com/thread/305349 (Grant Tao, 2013-03-21, \"The computing "
               "power of the four Cortex-A9 cores in i.MX6 Q\")",
     "chip": "NXP i.MX6 Quad (Cortex-A9), one core", "hz": 1.2e9,
     "published": 3.98e9, "unit": "FLOP/s", "kind": "per_second",
     "work": 40, "work_unit": "FLOP (5 x 4 lanes x 2)",
     "quote": "3.98 G/s (32-bit float) on one core at 1.2 GHz, 500,000 trips"},
    {"kernel": "chase", "what": "a pointer chase in L1 (each load's address the last load's "
                                "result): the load-to-use latency",
     "source": "https://7-cpu.com/cpu/Cortex-A9.html",
     "chip": "Samsung Exynos 4210 (Cortex-A9)", "hz": 1.2e9,
     "published": 4.0, "unit": "cycles a load", "kind": "per_work",
     "work": 1, "work_unit": "load",
     "quote": "latency 4 cycles at 32 K (TLB + L1)"},
    {"kernel": "loads", "what": "eight independent loads from one L1 line a trip",
     "source": "https://7-cpu.com/cpu/Cortex-A9.html",
     "chip": "Samsung Exynos 4210 (Cortex-A9)", "hz": 1.2e9,
     "published": 1.0, "unit": "cycles a load", "kind": "per_work",
     "work": 8, "work_unit": "loads",
     "quote": "L1 B/W (Parallel Random Read) = 1 cycles per one access"},
    # a bound, not a core-only figure: the measured loop walked a matrix column (L1 misses) on
    # both cores at once (the L2 shared); the core's cycles a trip are at most this
    {"kernel": "fmacd", "what": "gcc's inner loop of a double-precision VFP matrix multiply "
                                "(6 VLDR, 8 VMLA.F64, 5 integer ops, a branch)",
     "source": "http://codedivine.org/2012/09/25/prelim-analysis-rgbenchmm/ (RgbenchMM, the "
               "loop's assembly listed there)",
     "chip": "Samsung Exynos 4 dual-core (Cortex-A9), both cores", "hz": 1.2e9,
     "published": 920e6 / 2, "unit": "FLOP/s a core", "kind": "per_second",
     "work": 16, "work_unit": "FLOP (8 x 2)", "bound": True,
     "quote": "920 MFlops on the dual-core Exynos 4 at 1.2 GHz, two threads; \"about 40-42 "
              "cycles\" a trip by its author (with the loop's cache misses)"},
)


def log(s: str) -> None:
    print(f"[a9-core-check] {s}", file=sys.stderr, flush=True)


def published_cycles(ref: Mapping) -> float:
    """The published figure as cycles per trip of the loop at the chip's clock."""
    if ref["kind"] == "per_second":
        return ref["work"] / ref["published"] * ref["hz"]
    if ref["kind"] == "per_work":
        return ref["published"] * ref["work"]
    raise ValueError(f"{ref['kernel']}: kind {ref['kind']!r}")


def error(modelled: float, published: float) -> float:
    """The model's error: modelled cycles over the real chip's, less one (+: the model slower)."""
    return modelled / published - 1.0


def per_trip(one: Dict[int, dict], two: Dict[int, dict], trips: int, dis: Dict[int, str],
             mca) -> dict:
    """Cycles and instructions of one trip: the blocks of a run of ITERATIONS[1] trips less a
    run of ITERATIONS[0] (``trips`` the difference), priced by a9model.core_cycles."""
    core = am.core_cycles(am.difference(two, one, trips), dis, mca)
    return {"cycles": core["cycles"], "instructions": core["instructions"]}


def build() -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    exe = OUT / "corecheck"
    flags = ["-std=gnu99", "-O2", "-Wall", "-Wextra", *am.model_flags(), "-static"]
    subprocess.run([am.ARM_CC, *flags, str(SRC), "-o", str(exe)], check=True)
    return exe


#: llvm-mca's instruction-info columns: latency and reciprocal throughput per instruction
_INFO = re.compile(r"^\s*\d+\s+(\d+)\s+([\d.]+)\s+.*?\s{2,}(\S.*)$")


def instruction_info(lines: List[str], attrs: str) -> List[dict]:
    """llvm-mca's own latency and reciprocal throughput (Cortex-A9) for each instruction."""
    r = subprocess.run(["llvm-mca", "-mtriple=armv7-linux-gnueabihf", "-mcpu=cortex-a9",
                        f"-mattr={attrs}", "-iterations=1", "-all-views=false",
                        "-instruction-info"], input="\n".join(lines) + "\n",
                       capture_output=True, text=True, check=True)
    out = []
    for ln in r.stdout.splitlines():
        m = _INFO.match(ln)
        if m and not ln.strip().startswith("[") and m.group(3).strip() != "Instructions:":
            out.append({"instruction": m.group(3).strip(), "latency": int(m.group(1)),
                        "rthroughput": float(m.group(2))})
    return out


def check(exe: Path) -> List[dict]:
    funcs = am.symbols(exe, [f"cc_{r['kernel']}" for r in REFERENCES])
    dis = am.disassembly(exe)
    attrs = am.mca_attrs(am.model_flags())
    mca = am.Mca(OUT / "mca-cache.json", attrs)
    trips = ITERATIONS[1] - ITERATIONS[0]
    rows = []
    for ref in REFERENCES:
        f = [x for x in funcs if x[2] == f"cc_{ref['kernel']}"]
        one = am.profile(exe, [ref["kernel"], ITERATIONS[0]], f, OUT / "c1.log")
        two = am.profile(exe, [ref["kernel"], ITERATIONS[1]], f, OUT / "c2.log")
        got = per_trip(one, two, trips, dis, mca)
        loop = max(am.difference(two, one, trips).values(), key=lambda b: b["execs"])
        body = [t for p in loop["pcs"] for t in am.mca_text(dis.get(p, "nop"))]
        pub = published_cycles(ref)
        rows.append({**ref, "modelled_cycles": got["cycles"],
                     "instructions": got["instructions"], "published_cycles": pub,
                     "error": error(got["cycles"], pub), "loop": body,
                     "llvm_mca_info": instruction_info(body, attrs)})
        log(f"{ref['kernel']}: modelled {got['cycles']:.2f} cycles a trip, published "
            f"{pub:.2f} ({ref['chip']}): {rows[-1]['error']:+.0%}")
    if mca.refused:
        raise SystemExit(f"[a9-core-check] llvm-mca refused {list(mca.refused)}")
    return rows


def table(rows: List[dict]) -> str:
    lines = ["| loop | chip, clock | published | published cycles a trip | modelled (llvm-mca) "
             "| error |", "|---|---|---|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['kernel']}: {r['what']} | {r['chip']}, {r['hz'] / 1e9:g} GHz | "
                     f"{r['quote']} | {r['published_cycles']:.2f} | {r['modelled_cycles']:.2f} "
                     f"| {r['error']:+.0%} |")
    return "\n".join(lines)


def figures(rows: List[dict]) -> list:
    from generators.results import figure
    out = []
    for r in rows:
        out.append(figure(
            f"a9-core-check.{r['kernel']}.cycles", round(r["modelled_cycles"], 2), "cycles",
            "modelled",
            f"cycles a trip of {r['what']} (tools/a9cal/corecheck.c, ARM-mode assembly), "
            f"MODEL (llvm-mca -mcpu=cortex-a9 per qemu-arm block x executions, as make "
            f"a9-model prices the step); measured on a {r['chip']} at {r['hz'] / 1e9:g} GHz: "
            f"{r['published_cycles']:.2f} cycles a trip ({r['quote']}; {r['source']}): "
            f"error {r['error']:+.0%}",
            published_cycles=round(r["published_cycles"], 3), error=round(r["error"], 3),
            published=r["published"], published_unit=r["unit"], chip=r["chip"],
            clock_hz=r["hz"], work_a_trip=r["work"], work_unit=r["work_unit"],
            source=r["source"], instructions_a_trip=round(r["instructions"], 3),
            loop=r["loop"], llvm_mca_info=r["llvm_mca_info"],
            flags=" ".join(am.model_flags())))
        out.append(figure(
            f"a9-core-check.{r['kernel']}.error", round(100 * r["error"]), "%", "modelled",
            f"llvm-mca's Cortex-A9 cycles a trip of {r['what']} against the "
            + ("bound" if r.get("bound") else "measurement")
            + f" on a {r['chip']} ({r['source']}): modelled {r['modelled_cycles']:.2f}, "
            f"published {r['published_cycles']:.2f} cycles a trip"
            + ("; the measured loop also waited for cache misses on two cores, so the core's "
               "own cycles are at most the published ones" if r.get("bound") else ""),
            modelled_cycles=round(r["modelled_cycles"], 3),
            published_cycles=round(r["published_cycles"], 3), bound=bool(r.get("bound"))))
    core = [r for r in rows if not r.get("bound")]
    worst = max(core, key=lambda r: abs(r["error"]))
    out.append(figure(
        "a9-core-check.worst_error", round(100 * worst["error"]), "%", "modelled",
        f"the largest error of llvm-mca's Cortex-A9 cycles over the {len(core)} published "
        f"core-only Cortex-A9 loops of make a9-core-check ({worst['kernel']}); the others: "
        + ", ".join(f"{r['kernel']} {r['error']:+.0%}" for r in core if r is not worst),
        errors={r["kernel"]: round(r["error"], 3) for r in core}))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--no-record", action="store_true", help="print; do not write docs/results")
    args = ap.parse_args(argv)
    import host_bench as hb
    for tool, pkg in (("llvm-mca", "llvm"), ("qemu-arm", "qemu-user"),
                      (am.ARM_CC, "gcc-arm-linux-gnueabihf")):
        hb.need(tool, pkg)
    t0 = time.perf_counter()
    rows = check(build())
    print(table(rows))
    log(f"{time.perf_counter() - t0:.0f} s")
    if not args.no_record:
        from generators.results import record
        path = record("a9-core-check", figures(rows),
                      command="make a9-core-check (tools/a9_core_check.py)",
                      note="llvm-mca's Cortex-A9 cycles (the core term of make a9-model) on "
                           "loops measured on real Cortex-A9 chips, from their published "
                           "figures: " + "; ".join(f"{r['kernel']} {r['error']:+.0%}"
                                                    for r in rows))
        log(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
