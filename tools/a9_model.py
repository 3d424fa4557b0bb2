#!/usr/bin/env python3
"""make a9-model: the board's host term, by the Cortex-A9 cycle model of
generators/runtime/bench/a9model.py, on the ARMv7 build of the C loop, calibrated on the write-up's
own board measurements; every figure in docs/results/a9-model.json (labelled modelled, with
the model's error against the board beside it).

* **the C loop's step** (SmolLM2-135M on the replay backend, as make host-bench runs it:
  tphbench on a dump of the decoder's state): the one-token step ("armv7") at contexts 1, 512
  and 2048, the batched 2-row pass per row ("armv7c2"), prompt rows ("armv7p": the step without
  the LM head and sampling; "armv7c2p": the 2-row pass's) at contexts 1 and 512, Q4_1 and INT8.
  Per configuration: the board build's instructions (flags: a9model.board_flags(), Thumb-2) and
  the model build's (the same flags, -marm), the model build's blocks through llvm-mca, L1/L2
  misses (callgrind's cache simulation of the x86-64 build on the A9's geometry), the uncached
  DMA memory's reads (STATUS and length words) and writes, the results read from the cached
  results region (the invalidates by range tphbench counts on the board build under
  qemu-arm: a system call each, the lines' maintenance, their fills from DDR) and the DMA
  registers (the runtime's own counters);
* **the write-up's kernels** (tools/a9cal/writeup.c: its small ops of one SmolLM2-135M token;
  its INT8 CPU attention at context 512; an INT8 dot product at its ceiling), built the way the
  write-up says it ran them (C on the board's CPU; no compiler or flags are named, so: the
  board's own gcc at -O2 with its defaults, a9model.WRITEUP_FLAGS: an assumption), modelled
  the same way, against the board's 4.2 ms, 83 ms and 0.28 G MAC/s: the model's error;
* **the write-up's build** (``ARGS=--build-grid``): the write-up names no compiler or flags,
  so its three kernels are modelled again for each build it may have had (CAL_BUILDS: -O2 /
  -O3, -ffast-math, -funroll-loops, VFPv3-D16 or NEON), recorded as
  docs/results/a9-model-grid.json: how far the model's error rests on that unknown;
* **item 4 of issue 28**: the cost of the CPU's reads of DMA memory as built (the results
  from the cached results region invalidated by range; STATUS and length words uncached)
  against the runtime before (every read uncached), against fewer crossings (the LM head's
  argmax where the logits stream, not built: the 49,152 logits not read back) on either, and
  the built design at the system call's bound (a9model.SYSCALL_BOUND_CYCLES).

    python tools/a9_model.py [--formats q4,int8,ternary] [--no-record] [--reuse-steps]
    python tools/a9_model.py --build-grid [--refigure]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Sequence

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tools"))

import host_bench as hb  # noqa: E402

from generators.runtime.bench import a9model as am  # noqa: E402

OUT = REPO / "build" / "a9"
CAL = REPO / "tools" / "a9cal" / "writeup.c"
#: the write-up's board measurements (shared/reference/pynq-z1-ternary-writeup.txt, section 7
#: and its 2026-09-13 update)
BOARD = {"small_ops_ms": 4.2, "attention_ms": 83.0, "dot_gmacs": 0.28}
#: issue 28 item 6's goals
GOAL_MINSTR, GOAL_MS = 2.0, 3.0
#: the C loop's paths: (name, rows, LM head, contexts)
PATHS = (("armv7", 1, True, (512,)), ("armv7c2", 2, True, (512,)),
         ("armv7p", 1, False, (512,)), ("armv7c2p", 2, False, (512,)))
#: make host-bench counts the same instructions per token at contexts 1, 512 and 2048 (the
#: K/V rows are read in place by the DMAs): the model runs at 512, the other contexts take it
LM_LOGITS_BYTES = 49152 * 4
#: the write-up's attention under qemu-arm: 2 of its 30 identical layers (the log of all 30 is
#: gigabytes); its cache misses are simulated on all 30
CAL_LAYERS = 2


def log(s: str) -> None:
    print(f"[a9-model] {s}", file=sys.stderr, flush=True)


def cache_misses(exe: Path, args, toggle: str, per: float) -> dict:
    """L1 data misses and L2 misses of the region ``toggle`` (callgrind on the A9's cache
    geometry), per ``per``."""
    cg = OUT / f"callgrind.cache.{os.getpid()}"
    d1, ll = am.L1D, am.L2
    hb.sh(["valgrind", "--tool=callgrind", "--cache-sim=yes", f"--callgrind-out-file={cg}",
           f"--D1={d1[0]},{d1[1]},{d1[2]}", f"--I1={d1[0]},{d1[1]},{d1[2]}",
           f"--LL={ll[0]},{ll[1]},{ll[2]}", f"--toggle-collect={toggle}", exe, *args])
    text = cg.read_text()
    ev = re.search(r"^events: (.*)$", text, re.M).group(1).split()
    tot = dict(zip(ev, map(int, re.search(r"^totals: (.*)$", text, re.M).group(1).split())))
    # the replay device's own accesses (it stands for the PL writing DDR) are not the CPU's
    dev = dict.fromkeys(("D1mr", "D1mw", "DLmr", "DLmw"), 0)
    ann = hb.sh(["callgrind_annotate", "--inclusive=yes", "--show=D1mr,D1mw,DLmr,DLmw",
                 "--threshold=100", cg]).stdout
    for line in ann.splitlines():
        m = re.match(r"^\s*((?:[\d,]+(?: \([^)]*\))?\s+){4})(\S+)", line)
        if m and m.group(2).split(":")[-1] in hb.DEVICE:
            nums = re.findall(r"([\d,]+)(?: \([^)]*\))?", m.group(1))
            for k, g in zip(dev, nums):
                dev[k] += int(g.replace(",", ""))
    # where the misses are (each function's own, the largest first): which arrays the cache
    # term pays for, and whether they are read in order (cache_cycles' streaming)
    own = {}
    ann = hb.sh(["callgrind_annotate", "--inclusive=no", "--show=D1mr,D1mw,DLmr,DLmw",
                 "--threshold=100", cg]).stdout
    for line in ann.splitlines():
        m = re.match(r"^\s*((?:[\d,]+(?: \([^)]*\))?\s+){4})(\S+)", line)
        if m:
            nums = [int(g.replace(",", "")) for g in
                    re.findall(r"([\d,]+)(?: \([^)]*\))?", m.group(1))]
            fn = m.group(2).split(":")[-1]
            if fn not in (*hb.DEVICE, "PROGRAM") and (nums[0] + nums[1]) / per >= 100:
                own[fn] = {"d1": (nums[0] + nums[1]) / per, "ll": (nums[2] + nums[3]) / per}
    cg.unlink()
    return {"by_function": dict(sorted(own.items(), key=lambda kv: -kv[1]["d1"])[:10]),
            "d1": (tot.get("D1mr", 0) + tot.get("D1mw", 0) - dev["D1mr"] - dev["D1mw"]) / per,
            "ll": (tot.get("DLmr", 0) + tot.get("DLmw", 0) - dev["DLmr"] - dev["DLmw"]) / per,
            "device_d1": (dev["D1mr"] + dev["D1mw"]) / per,
            "data_refs": (tot.get("Dr", 0) + tot.get("Dw", 0)) / per}


class Builds:
    def __init__(self):
        self.board = hb.build(am.ARM_CC, "a9board", [*am.board_flags(), "-static"])
        self.model = hb.build(am.ARM_CC, "a9model", [*am.model_flags(), "-static"])
        self.x86 = hb.build("gcc", "a9x86", ["-march=x86-64"])
        self.dis = am.disassembly(self.model["exe"])
        self.mca = am.Mca(OUT / "mca-cache.json", am.mca_attrs(am.model_flags()))

    def funcs(self, b):
        return am.symbols(b["exe"], b["syms"]["tphost"] | hb.loop_symbols(b))


def step_model(B: Builds, dump: Path, rows: int, counts: dict) -> dict:
    """The model of one step (per row) of the C loop on ``dump``."""
    OUT.mkdir(parents=True, exist_ok=True)

    def blocks(b):
        f = B.funcs(b)
        one = am.profile(b["exe"], [dump, 1], f, OUT / f"q1.{os.getpid()}.log")
        two = am.profile(b["exe"], [dump, 2], f, OUT / f"q2.{os.getpid()}.log")
        return am.difference(two, one, rows)

    board = blocks(B.board)
    board_instr = sum(len(b["pcs"]) * b["execs"] for b in board.values())
    core = am.core_cycles(blocks(B.model), B.dis, B.mca)
    # both cores: the model build run with the worker thread (tphbench threads=2), each
    # thread's blocks and each job's halves told apart
    f = B.funcs(B.model)
    one = am.profile_threads(B.model["exe"], [dump, 1, "threads=2"], f,
                             OUT / f"t1.{os.getpid()}.log")
    two = am.profile_threads(B.model["exe"], [dump, 2, "threads=2"], f,
                             OUT / f"t2.{os.getpid()}.log")
    both = am.two_cores(two, one, am.block_cycles(two["blocks"], B.dis, B.mca), rows)
    miss = cache_misses(B.x86["exe"], [dump, 2], "bench_token", 2 * rows)
    by, ca = counts["bytes"], counts["cache"]
    # the board build's own invalidates (tphbench under qemu-arm), which must be the
    # runtime's count of the same step
    arm = hb.arm_invalidates(B.board, dump, rows)
    if any(abs(arm[k] - ca[k] / rows) > 1e-9 for k in ("invalidates", "invalidated", "read")):
        raise SystemExit(f"[a9-model] the ARMv7 build's invalidates {arm} are not the "
                         f"runtime's {ca} (per {rows} row(s))")
    written = sum(v for k, v in by.items() if k != "read") / rows
    unc_bytes = (by["read"] - ca["read"]) / rows             # STATUS and length words
    unc = am.uncached_cycles(unc_bytes, written)
    inv = am.invalidated_read_cycles(arm["invalidated"], arm["invalidates"])
    mmio = am.mmio_cycles(counts["reads"] / rows, counts["writes"] / rows)
    # the step's L1 misses are its kernels' loads of whole arrays in order (the row scales
    # beside the results in tph_dequant_i32: 30 layers' 5,184 rows and the LM head's 49,152,
    # 818 KB a token, more than the L2 holds; the activations; ``misses_by_function`` in
    # steps.json), so they are taken at the streaming rates, as the write-up's kernels' are
    # The results the CPU reads from the cached results region are paid in ``inv["fill"]``:
    # on the board each line was just invalidated, so it misses L1 and L2 and is filled from
    # DDR. valgrind's simulation has no invalidate: the replay device's writes left those
    # lines in its L2, and the CPU's loads of them are L1 misses that hit L2 there
    # (tph_dequant_f32's misses in ``misses_by_function``: 18.8 k a Q4_1 token, 0.6 k of them
    # L2 misses, against 19.4 k lines of the layers' float results). Counted in both terms
    # they would be paid twice: the cache term leaves out one L2 hit per line read there.
    paid = am.results_lines_paid(miss["d1"], miss["ll"], arm["read"])
    cache = am.cache_cycles(miss["d1"] - paid, miss["ll"], streaming=True)
    memory = cache + unc["read"] + unc["write"] + inv["invalidate"] + inv["fill"] + mmio
    total = core["cycles"] + memory
    # both cores: the core's cycles as serial + the longer half of each job + the handshakes;
    # the memory terms as on one core (the two cores share the SCU, the L2 and the path to
    # DDR: no overlap of theirs is assumed; the invalidates run on the caller's core, before
    # the worker's half reads the lines)
    total2 = both["two_cores"] + memory
    fns = core["functions"]
    small = sum(v["cycles"] for k, v in fns.items() if k in B.model["syms"]["tphost"]
                and k != "tph_argmax")
    return {"board_minstr": board_instr / 1e6, "model_minstr": core["instructions"] / 1e6,
            "core_ms": am.ms(core["cycles"]), "small_ops_core_ms": am.ms(small),
            "sampling_core_ms": am.ms(fns.get("tph_argmax", {"cycles": 0})["cycles"]),
            "cpi": core["cycles"] / core["instructions"],
            "cache_ms": am.ms(cache), "d1_misses": miss["d1"], "l2_misses": miss["ll"],
            "misses_by_function": miss["by_function"], "results_lines_in_fill": paid,
            "uncached_read_ms": am.ms(unc["read"]), "uncached_write_ms": am.ms(unc["write"]),
            "invalidate_ms": am.ms(inv["invalidate"]), "cached_read_ms": am.ms(inv["fill"]),
            "mmio_ms": am.ms(mmio), "read_bytes": by["read"] / rows, "written_bytes": written,
            "uncached_read_bytes": unc_bytes, "cached_read_bytes": arm["read"],
            "invalidates": arm["invalidates"], "invalidated_bytes": arm["invalidated"],
            "register_reads": counts["reads"] / rows, "register_writes": counts["writes"] / rows,
            "ms": am.ms(total), "ms_2core": am.ms(total2),
            "core_2core_ms": am.ms(both["two_cores"]), "serial_core_ms": am.ms(both["serial"]),
            "halves_ms": [am.ms(both["halves"][0]), am.ms(both["halves"][1])],
            "longer_halves_ms": am.ms(both["longer"]), "jobs": both["jobs"],
            "sync_ms": am.ms(both["sync"])}


def counts_of(dec, L: int, rows: int, lm: bool) -> dict:
    from generators.runtime.bench import hostbench
    be = dec.be
    toks = [hostbench.RECORD_TOKEN, hostbench.RECORD_TOKEN2][:rows]

    def step():
        if rows == 1:
            dec.step(toks[0], logits=lm)
        else:
            dec.step_rows([(0, t, lm) for t in toks])
        hostbench.again(dec, L)

    step()
    w0, r0 = sum(d.writes for d in be.dmas), sum(d.reads for d in be.dmas)
    step()
    return dict(bytes=dict(dec.token_bytes), cache=dict(dec.token_cache),
                writes=sum(d.writes for d in be.dmas) - w0,
                reads=sum(d.reads for d in be.dmas) - r0)


# ------------------------------------------------------------------ calibration

def calibration(B: Builds, cflags: Sequence[str] = (), arch: Sequence[str] = ()) -> dict:
    """The write-up's kernels, modelled as the C loop is: model against board. ``cflags``
    (default the project's own, hb.CFLAGS) and ``arch`` (default a9model.WRITEUP_FLAGS): the
    build of the write-up's kernels (``--build-grid`` tries several)."""
    out = {}
    exes = {}
    cflags, arch = list(cflags or hb.CFLAGS), list(arch or am.WRITEUP_FLAGS)
    for tag, flags, cc in (("board", [*arch, "-mthumb", "-static"], am.ARM_CC),
                           ("model", [*arch, "-marm", "-static"], am.ARM_CC),
                           ("x86", ["-march=x86-64"], "gcc")):
        exe = OUT / f"writeup.{tag}"
        hb.sh([cc, *cflags, *flags, CAL, "-lm", "-o", exe])
        exes[tag] = exe
    dis = am.disassembly(exes["model"])
    mca = am.Mca(OUT / "mca-cache.json", am.mca_attrs(arch))
    # every function but main: the kernels and all they call (the write-up's static helpers
    # and gcc's clones of them, libm's expf, lrintf, fmaxf); main's set-up and the C
    # library's start-up run the same in both runs and leave the difference
    f_model = am.text_symbols(exes["model"], ("main",))
    f_board = am.text_symbols(exes["board"], ("main",))
    for kern in ("small", "attention", "dot"):
        # attention under qemu: CAL_LAYERS of the 30 layers, each layer the same work (the
        # blocks' executions scaled to 30); its cache misses below: all 30 (the KV stream)
        extra, scale = ([str(CAL_LAYERS)], 30 / CAL_LAYERS) if kern == "attention" else ([], 1)
        one = am.profile(exes["model"], [kern, 1, *extra], f_model,
                         OUT / f"c1.{os.getpid()}.log")
        two = am.profile(exes["model"], [kern, 2, *extra], f_model,
                         OUT / f"c2.{os.getpid()}.log")
        blocks = am.difference(two, one, 1 / scale)
        core = am.core_cycles(blocks, dis, mca)
        b1 = am.profile(exes["board"], [kern, 1, *extra], f_board, OUT / f"c1.{os.getpid()}.log")
        b2 = am.profile(exes["board"], [kern, 2, *extra], f_board, OUT / f"c2.{os.getpid()}.log")
        board_instr = sum(len(b["pcs"]) * b["execs"]
                          for b in am.difference(b2, b1, 1 / scale).values())
        toggle = {"small": "wu_small_ops", "attention": "wu_attention", "dot": "wu_dot"}[kern]
        m1 = cache_misses(exes["x86"], [kern, 1], toggle, 1)
        m2 = cache_misses(exes["x86"], [kern, 2], toggle, 1)
        d1, ll = m2["d1"] - m1["d1"], m2["ll"] - m1["ll"]
        cache = am.cache_cycles(d1, ll, streaming=True)
        r = hb.sh([exes["x86"], kern, 1]).stdout
        macs = float(re.search(r"macs (\d+)", r).group(1)) if "macs" in r else 0.0
        out[kern] = {"core_ms": am.ms(core["cycles"]), "cache_ms": am.ms(cache),
                     "ms": am.ms(core["cycles"] + cache),
                     # the model adds the memory's cycles to the core's; a loop whose fills
                     # run under way while it computes takes the longer of the two at best
                     "ms_overlapped": am.ms(max(core["cycles"], cache)), "model_minstr":
                     core["instructions"] / 1e6, "board_minstr": board_instr / 1e6,
                     "d1_misses": d1, "l2_misses": ll, "macs": macs,
                     "cpi": core["cycles"] / core["instructions"]}
    s, a, d = out["small"], out["attention"], out["dot"]
    s["board"], a["board"] = BOARD["small_ops_ms"], BOARD["attention_ms"]
    d["gmacs"] = d["macs"] / (d["ms"] / 1e3) / 1e9
    a["gmacs"] = a["macs"] / (a["ms"] / 1e3) / 1e9
    d["board"] = BOARD["dot_gmacs"]
    s["error"] = s["ms"] / s["board"] - 1
    a["error"] = a["ms"] / a["board"] - 1
    d["error"] = d["gmacs"] / d["board"] - 1
    return out


# ------------------------------------------------------------------ the write-up's build

#: builds the write-up's kernels may have had (it names no compiler or flags): gcc's own
#: defaults (GNU C, contraction on, no -ffp-contract=off) at -O2 and -O3, with and without
#: -ffast-math and loop unrolling, for the image gcc's default FPU (ARMv7-A, VFPv3-D16: the
#: assumed build, a9model.WRITEUP_FLAGS) and for the Cortex-A9 with NEON. ``--build-grid``
#: models the three kernels for each and records model against board per build
#: (docs/results/a9-model-grid.json): how far the model's error depends on that unknown.
VFP, NEON = am.WRITEUP_FLAGS, ("-mcpu=cortex-a9", "-mfpu=neon", "-mfloat-abi=hard")
CAL_BUILDS = (("o2-vfp", "-O2, VFPv3-D16 (the assumed build)", ("-O2",), VFP),
              ("o3-vfp", "-O3, VFPv3-D16", ("-O3",), VFP),
              ("o2-vfp-fast", "-O2 -ffast-math, VFPv3-D16", ("-O2", "-ffast-math"), VFP),
              ("o3-vfp-unroll", "-O3 -funroll-loops, VFPv3-D16", ("-O3", "-funroll-loops"), VFP),
              ("o2-a9-vfp", "-O2 -mcpu=cortex-a9, VFPv3-D16", ("-O2",),
               ("-mcpu=cortex-a9", "-mfpu=vfpv3-d16", "-mfloat-abi=hard")),
              ("o2-neon", "-O2, Cortex-A9 NEON (gcc 12 vectorises integer loops)", ("-O2",),
               NEON),
              ("o3-neon", "-O3, Cortex-A9 NEON", ("-O3",), NEON),
              ("o3-neon-fast", "-O3 -ffast-math, Cortex-A9 NEON (float loops vectorised too)",
               ("-O3", "-ffast-math"), NEON))
CAL_KERNELS = (("small", "small ops", "ms"), ("attention", "attention at context 512", "ms"),
               ("dot", "INT8 dot product", "gmacs"))


def build_grid() -> dict:
    """The calibration for each of CAL_BUILDS: {build: calibration()}."""
    out = {}
    for slug, what, opt, arch in CAL_BUILDS:
        log(f"the write-up's kernels built {what} ...")
        out[slug] = calibration(None, ["-std=gnu99", *opt], arch)
        log("  " + ", ".join(f"{k} {v['error']:+.0%}" for k, v in out[slug].items()))
    return out


def grid_figures(grid: dict) -> list:
    from generators.results import figure
    out = []
    for slug, what, opt, arch in CAL_BUILDS:
        for kern, kname, key in CAL_KERNELS:
            c = grid[slug][kern]
            unit = "G MAC/s" if key == "gmacs" else "ms"
            out.append(figure(
                f"a9-model.grid.{slug}.{kern}", round(c[key], 3), unit, "modelled",
                f"the write-up's {kname} (tools/a9cal/writeup.c) built {what}, "
                f"{' '.join(arch)}: MODEL (llvm-mca per block + cache misses); the board "
                f"measured {c['board']} {unit}: error {c['error']:+.0%}",
                error=round(c["error"], 3), core_ms=round(c["core_ms"], 3),
                cache_ms=round(c["cache_ms"], 3), board_minstr=round(c["board_minstr"], 3),
                flags=" ".join(["-std=gnu99", *opt, *arch]), sources=am.SOURCES,
                cited=am.CITED, assumptions=am.ASSUMPTIONS))
    worst = {slug: max(abs(grid[slug][k]["error"]) for k, _, _ in CAL_KERNELS)
             for slug, *_ in CAL_BUILDS}
    best = min(worst, key=worst.get)
    out.append(figure("a9-model.grid.best_worst_error", round(100 * worst[best]), "%",
                      "modelled", f"the smallest largest error over the three kernels of any "
                      f"build of CAL_BUILDS ({best}): no build the write-up may have used "
                      f"brings the model within it on all three", build=best,
                      worst={k: round(v, 3) for k, v in worst.items()}))
    return out


def grid_table(grid: dict) -> str:
    lines = ["| build of the write-up's kernels | small ops (4.2 ms) | attention (83 ms) | "
             "dot (0.28 G MAC/s) |", "|---|---:|---:|---:|"]
    for slug, what, opt, arch in CAL_BUILDS:
        g = grid[slug]
        lines.append(f"| {what} | {g['small']['ms']:.1f} ms ({g['small']['error']:+.0%}) | "
                     f"{g['attention']['ms']:.1f} ms ({g['attention']['error']:+.0%}) | "
                     f"{g['dot']['gmacs']:.3f} ({g['dot']['error']:+.0%}) |")
    return "\n".join(lines)


# ------------------------------------------------------------------ figures

def error_text(cal: dict) -> str:
    return (f"model error against the board (the write-up's kernels, tools/a9cal/writeup.c): "
            f"small ops {cal['small']['error']:+.0%} (4.2 ms), attention "
            f"{cal['attention']['error']:+.0%} (83 ms), INT8 dot ceiling "
            f"{cal['dot']['error']:+.0%} (0.28 G MAC/s)")


def figures(results: dict, cal: dict, item4: dict):
    from generators.results import figure
    err = error_text(cal)
    src = {"sources": am.SOURCES, "cited": am.CITED, "ranges": am.RANGES,
           "assumptions": am.ASSUMPTIONS, "error": {
        k: round(v["error"], 3) for k, v in cal.items()}, "flags": " ".join(am.board_flags())}
    out = []
    for (path, fmt, ctx), r in results.items():
        base = f"a9-model.{path}.{fmt}.ctx{ctx}"
        unit = "token" if path in ("armv7", "armv7p") else "row"
        what = {"armv7": "the one-token step (tph_step + argmax)",
                "armv7c2": "a row of the batched 2-row pass (tph_step_rows, LM head and "
                           "sampling per row)",
                "armv7p": "a prompt row (tph_step without the LM head and sampling)",
                "armv7c2p": "a prompt row of the 2-row pass (no LM head, no sampling)"}[path]
        where = f"{what}, {fmt} SmolLM2-135M on the replay backend, context {ctx}"
        parts = {k: round(v, 4) if isinstance(v, float) else v for k, v in r.items()}
        if path == "armv7":           # the parts of the one-token step's time
            for part, what in (("core_ms", "the core's cycles (llvm-mca, every load an L1 "
                                "hit)"), ("cache_ms", "L1 and L2 misses"),
                               ("uncached_read_ms", "the CPU's reads of uncached DMA memory "
                                "(STATUS and length words)"),
                               ("cached_read_ms", "the results read from the cached results "
                                "region: every line invalidated just before, so filled from "
                                "DDR"),
                               ("invalidate_ms", "the invalidates by range before those reads "
                                "(a system call each, the lines in L1 and the PL310)"),
                               ("uncached_write_ms", "the CPU's stores into uncached DMA "
                                "memory"), ("mmio_ms", "the DMA registers' reads and writes")):
                out.append(figure(f"{base}.{part}", round(r[part], 2), "ms", "modelled",
                                  f"part of the Cortex-A9 MODEL's time per token: {what}: "
                                  f"{where}"))
        out += [
            figure(f"{base}.ms", round(r["ms"], 2), "ms", "modelled",
                   f"Cortex-A9 time per {unit} at 650 MHz, MODEL (llvm-mca cycles per block "
                   f"+ cache misses + uncached DMA memory + the cached results' invalidates "
                   f"and fills + DMA registers): {where}; {err}",
                   **parts, **src),
            figure(f"{base}.board_minstr", round(r["board_minstr"], 3), "M instructions",
                   "measured", f"ARMv7 instructions per {unit} of the board build "
                   f"({' '.join(am.board_flags())}, Thumb-2; qemu-arm): {where}"),
            figure(f"{base}.arm_minstr", round(r["model_minstr"], 3), "M instructions",
                   "measured", f"ARMv7 instructions per {unit} of the model's build "
                   f"({' '.join(am.model_flags())}; qemu-arm): {where}"),
        ]
        if r.get("jobs"):             # both cores: the worker's halves (issue 28 item 5)
            out.append(figure(
                f"{base}.ms_2core", round(r["ms_2core"], 2), "ms", "modelled",
                f"Cortex-A9 time per {unit} on both cores (the library's worker thread: "
                f"{r['jobs']:g} job(s) per {unit}: the results' dequantisation by port, the "
                f"rows' small ops and quantisation by rows, the argmax by halves), MODEL: "
                f"the caller's serial cycles + the longer half of each job + "
                f"{am.SYNC_JOB_CYCLES} cycles a job's handshake + {am.WAKE_CYCLES} cycles a "
                f"step's wake of the worker; the memory terms as on one core: {where}; "
                f"one core {r['ms']:.2f} ms; {err}", one_core_ms=round(r["ms"], 4),
                core_2core_ms=round(r["core_2core_ms"], 4),
                serial_core_ms=round(r["serial_core_ms"], 4),
                halves_ms=[round(v, 4) for v in r["halves_ms"]],
                longer_halves_ms=round(r["longer_halves_ms"], 4), jobs=r["jobs"],
                sync_ms=round(r["sync_ms"], 4), **src))
    for kern, what, unit, key in (("small", "the write-up's small ops of one SmolLM2 token",
                                   "ms", "ms"),
                                  ("attention", "the write-up's INT8 CPU attention at context "
                                   "512", "ms", "ms"),
                                  ("dot", "the write-up's INT8 dot product (its ceiling)",
                                   "G MAC/s", "gmacs")):
        c = cal[kern]
        out.append(figure(f"a9-model.cal.{kern}.{'gmacs' if key == 'gmacs' else 'ms'}",
                          round(c[key], 3), unit, "modelled",
                          f"{what} (tools/a9cal/writeup.c, -O2 {' '.join(am.WRITEUP_FLAGS)}: "
                          f"assumed), MODEL; the "
                          f"board measured {c['board']} {unit}: error {c['error']:+.0%}",
                          **{k: round(v, 4) if isinstance(v, float) else v
                             for k, v in c.items() if k != "error"}, **src))
    for k, v in item4.items():
        out.append(figure(f"a9-model.item4.{k}_ms", round(v["ms"], 2), "ms", "modelled",
                          v["what"] + f"; {err}", **src))
    return out


def item4_costs(r: dict) -> dict:
    """Issue 28 item 4 at context 512 (Q4_1): the CPU's reads of DMA memory per token as built
    (results cached, invalidated by range; STATUS and length words uncached), against the
    runtime before (every read uncached) and fewer crossings (the LM head's argmax where the
    logits stream, not built: its 49,152 logits not read back, their two slots' lines not
    invalidated), and as built at the system call's bound."""
    read, unc_b = r["read_bytes"], r["uncached_read_bytes"]
    calls, inv_b = r["invalidates"], r["invalidated_bytes"]
    status = am.uncached_cycles(unc_b, 0)["read"]

    def built(inv_bytes, n, syscall=am.SYSCALL_CYCLES):
        c = am.invalidated_read_cycles(inv_bytes, n, syscall)
        return am.ms(c["invalidate"] + c["fill"] + status)

    lm_lines = 2 * -(-(LM_LOGITS_BYTES // 2 + 4) // am.L1D[2]) * am.L1D[2]
    return {
        "uncached": {"ms": am.ms(am.uncached_cycles(read, 0)["read"]),
                     "what": f"item 4, the runtime before: the {read:,.0f} B per token the CPU "
                             f"reads back (results, STATUS and length words) all from "
                             f"uncached DMA memory at "
                             f"{am.UNCACHED_READ_BYTES_PER_S / 1e6:.0f} MB/s"},
        "invalidated": {"ms": built(inv_b, calls),
                        "what": f"item 4 as built: the {r['cached_read_bytes']:,.0f} B of "
                                f"results from the cached results region, {calls:.0f} "
                                f"invalidates by range a token ({inv_b:,.0f} B in whole "
                                f"lines; {am.SYSCALL_CYCLES} cycles a call, "
                                f"{am.INVALIDATE_LINE_CYCLES} a line) then line fills from DDR "
                                f"({am.DDR_STREAM_LINE_CYCLES:.0f} cycles a line), and the "
                                f"{unc_b:,.0f} B of STATUS and length words uncached"},
        "invalidated_bound": {"ms": built(inv_b, calls, am.SYSCALL_BOUND_CYCLES),
                              "what": f"item 4 as built with every invalidate's system call "
                                      f"at {am.SYSCALL_BOUND_CYCLES} cycles (the bound of "
                                      f"the assumed {am.SYSCALL_CYCLES})"},
        "fewer_crossings": {"ms": am.ms(am.uncached_cycles(read - LM_LOGITS_BYTES, 0)["read"]),
                            "what": "item 4, fewer crossings (not built): the LM head's argmax "
                                    "where the logits stream (the 49,152 logits, 196,608 B, "
                                    "not read back), every other read uncached"},
        "fewer_invalidated": {"ms": built(inv_b - lm_lines + 2 * am.L1D[2], calls),
                              "what": "item 4, both: the LM head's argmax where the logits "
                                      "stream (not built: a line of its two slots read "
                                      "instead of the logits) and the results cached, "
                                      "invalidated by range, as built"}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--formats", default="q4,int8,ternary")
    ap.add_argument("--no-record", action="store_true", help="print; do not write docs/results")
    ap.add_argument("--calibration-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--steps-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--refigure", action="store_true",
                    help="the steps and the calibration modelled by earlier runs (build/a9/"
                         "steps.json, calibration.json): the figures written again")
    ap.add_argument("--reuse-steps", action="store_true",
                    help="the C loop's steps modelled by earlier runs (build/a9/steps.json) "
                         "kept, the others modelled; the calibration run again")
    ap.add_argument("--build-grid", action="store_true",
                    help="only the calibration, for each build the write-up may have used "
                         "(CAL_BUILDS): docs/results/a9-model-grid.json")
    args = ap.parse_args(argv)
    for tool, pkg in (("llvm-mca", "llvm"), ("qemu-arm", "qemu-user"),
                      (am.ARM_CC, "gcc-arm-linux-gnueabihf"), ("valgrind", "valgrind")):
        hb.need(tool, pkg)
    formats = args.formats.split(",")
    bad = [f for f in formats if f not in ("q4", "int8", "ternary")]
    if bad:
        print(f"a9-model: --formats: {bad[0]!r} is not one of q4, int8, ternary",
              file=sys.stderr)
        return 2
    from generators.results import record
    from generators.runtime.bench import hostbench
    from generators.runtime.engines import cloop as hostloop
    from generators.runtime.engines import replay
    from generators.runtime.host import ops as hostops
    t0 = time.perf_counter()
    OUT.mkdir(parents=True, exist_ok=True)
    cal_file, steps_file = OUT / "calibration.json", OUT / "steps.json"
    if args.build_grid:             # the write-up's kernels only: no C loop built
        grid_file = OUT / "grid.json"
        if args.refigure and grid_file.exists():
            log(f"the grid as {grid_file.relative_to(REPO)} holds it (--refigure)")
            grid = json.loads(grid_file.read_text())
        else:
            grid = build_grid()
        print(grid_table(grid))
        grid_file.write_text(json.dumps(grid, indent=1, default=float) + "\n")
        log(f"{time.perf_counter() - t0:.0f} s")
        if not args.no_record:
            path = record("a9-model", grid_figures(grid), variant="grid",
                          command="make a9-model ARGS=--build-grid (tools/a9_model.py)",
                          note="the write-up's three kernels modelled for each build it may "
                               "have had (it names none): the model's error against the board "
                               "per build")
            log(f"wrote {path.relative_to(REPO)}")
        return 0
    if not hostloop.available():
        raise SystemExit("[a9-model] the C library is not built (make setup)")
    B = Builds()
    log(f"board build flags: {' '.join(am.board_flags())}; model build: "
        f"{' '.join(am.model_flags())}")
    if args.steps_only:
        cal = None
    elif args.refigure and cal_file.exists():
        log(f"the calibration as {cal_file.relative_to(REPO)} holds it (--refigure)")
        cal = json.loads(cal_file.read_text())
    else:
        cal = calibration(B)
        cal_file.write_text(json.dumps(cal, indent=1, default=float) + "\n")
    if cal is not None:
        log(error_text(cal))
    results = {}
    if (args.reuse_steps or args.refigure) and steps_file.exists():
        log(f"the steps modelled before, as {steps_file.relative_to(REPO)} holds them")
        for k, v in json.loads(steps_file.read_text()).items():
            p_, f_, c_ = k.split(".")
            if f_ in formats:
                results[(p_, f_, int(c_))] = v
    if not args.calibration_only and not args.refigure:
        for fmt in formats:
            model = hostbench.smollm2(fmt, say=log)
            for path, rows, lm, contexts in PATHS:
                if all((path, fmt, c) in results for c in contexts):
                    continue
                rec = hostbench.recorded(model, fmt, log, rows=rows, logits=lm)
                for ctx in contexts:
                    if (path, fmt, ctx) in results:
                        continue
                    L0 = max(ctx - rows, 0)
                    toks = [hostbench.RECORD_TOKEN, hostbench.RECORD_TOKEN2][:rows]
                    with hostops.using("c"):
                        dec = hostbench.replay_decoder(model, rec, L0, "c",
                                                       vectors=hostbench.ROWS, rows=rows)
                        counts = counts_of(dec, L0, rows, lm)
                        dump = replay.write_dump(OUT / f"{path}.{fmt}.{ctx}.tpl", dec,
                                                   toks if rows > 1 else toks[0], logits=lm)
                    del dec
                    log(f"{path} {fmt} context {ctx} ...")
                    results[(path, fmt, ctx)] = step_model(B, dump, rows, counts)
                    dump.unlink()
                    r = results[(path, fmt, ctx)]
                    steps_file.write_text(json.dumps(
                        {f"{p_}.{f_}.{c_}": v for (p_, f_, c_), v in results.items()},
                        indent=1, default=float) + "\n")
                    log("  " + ", ".join(f"{k} {v:.3f}" for k, v in r.items()
                                         if isinstance(v, float)))
            del model
    if B.mca.refused:
        log(f"llvm-mca refused {len(B.mca.refused)} instruction(s) (1 cycle each): "
            f"{list(B.mca.refused)[:5]}")
    if cal is None:
        log(f"steps modelled: {steps_file.relative_to(REPO)} (no figures without the "
            f"calibration: make a9-model ARGS=--refigure)")
        return 0
    ref = results.get(("armv7", formats[0], 512))
    item4 = item4_costs(ref) if ref else {}
    figs = figures(results, cal, item4)
    print(table(results, cal, item4))
    (OUT / "a9_model.json").write_text(json.dumps(
        {"steps": {f"{p}.{f}.{c}": r for (p, f, c), r in results.items()},
         "calibration": cal, "item4": item4}, indent=1, default=float) + "\n")
    log(f"{time.perf_counter() - t0:.0f} s")
    if not args.no_record and not args.calibration_only and results:
        path = record("a9-model", figs, command="make a9-model (tools/a9_model.py)",
                      note=f"Cortex-A9 model (llvm-mca per qemu translation block + memory "
                           f"system); board build flags {' '.join(am.board_flags())}; "
                           f"{error_text(cal)}. Constants without a public source: "
                           f"{', '.join(am.ASSUMPTIONS)}.")
        log(f"wrote {path.relative_to(REPO)}")
    return 0


def table(results: dict, cal: dict, item4: dict) -> str:
    lines = ["| path | format | context | board M instr | ARM-mode M instr | CPI | core ms | "
             "cache ms | uncached read ms | cached read ms | invalidates ms | uncached write ms "
             "| registers ms | total ms | 2 cores: core ms | 2 cores: total ms |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for (p, f, c), r in results.items():
        lines.append(f"| {p} | {f} | {c} | {r['board_minstr']:.3f} | {r['model_minstr']:.3f} "
                     f"| {r['cpi']:.2f} | {r['core_ms']:.2f} | {r['cache_ms']:.2f} | "
                     f"{r['uncached_read_ms']:.2f} | {r.get('cached_read_ms', 0):.2f} | "
                     f"{r.get('invalidate_ms', 0):.2f} | {r['uncached_write_ms']:.2f} | "
                     f"{r['mmio_ms']:.2f} | {r['ms']:.2f} | {r.get('core_2core_ms', 0):.2f} | "
                     f"{r.get('ms_2core', 0):.2f} |")
    lines.append("")
    lines.append("| write-up kernel | board | model | error | core ms | cache ms | CPI |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|")
    for k, c in cal.items():
        val = c.get("gmacs") if k == "dot" else c["ms"]
        lines.append(f"| {k} | {c['board']} | {val:.3f} | {c['error']:+.0%} | "
                     f"{c['core_ms']:.2f} | {c['cache_ms']:.2f} | {c['cpi']:.2f} |")
    for k, v in item4.items():
        lines.append(f"item 4 {k}: {v['ms']:.2f} ms")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
