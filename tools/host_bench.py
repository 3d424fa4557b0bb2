#!/usr/bin/env python3
"""make host-bench: the host's work per SmolLM2-135M token, counted and timed; every figure in
docs/results/host-bench.json. Its time on the board is make a9-model's (tools/a9_model.py: a
Cortex-A9 cycle model of the ARMv7 build); the x86-64 count here is a development yardstick.

The engines are replaced by the replay backend (generators.runtime.engines.cloop.replay_backend):
the engine words of one sampled token are recorded once from a golden run of the real SmolLM2
(its images, Q4_1 layers and INT8 layers, each with the Q8_0 head), then served back through the same AXI DMA
registers and descriptors by a device with no compute (csrc/tphreplay.c). The host then does
exactly a decoder step's work: the small ops, the slots and attention parts, the KV append,
every descriptor cleared and checked, TAILDESC writes and polls, the results checked and
dequantised, the LM head, greedy sampling. At contexts 1, 512 and 2048 (the step at position
context - 1, K/V filled), three ways:

* **C path, x86-64 yardstick** (gcc -O2 -march=x86-64: SSE2, NEON's 128-bit width): the whole
  step without Python (csrc/tphbench.c on a dump of the decoder's state,
  replay.write_dump) under valgrind --tool=callgrind --toggle-collect=bench_token (the
  step and sampling); the replay device's inclusive cost taken out; split with
  callgrind's inclusive costs into **small ops** (the tphost.h kernels the step calls),
  **frames and DMA** (the rest of tph_step: slots, parts, descriptors, registers, checks) and
  **sampling** (tph_argmax); one KV step growth counted apart (the same step with one head's
  step set tiny); timed natively;
* **C path, ARMv7** (arm-linux-gnueabihf-gcc -O2 and the board build's flags,
  generators.runtime.bench.a9model.board_flags(): what a board build runs): the same program under
  qemu-arm, every translation block of the library's functions times its executions (libc's
  memset/memcpy not counted);
* **batched C step, x86-64** ("c2"; at context 512 also on ARMv7, "armv7c2"): the same
  program on a dump of a recorded 2-row pass
  (tph_step_rows: two rows of stream 0 at positions context - 2 and context - 1 (0 and 1 at
  context 1) through 2-vector frames, each row with its attention, LM head and sampling: a
  batched decode step), counted per row the same way (no growth run), and the CPU's bytes
  per pass; **prompt rows** ("cp": the one-token step, "c2p": the 2-row pass) the same
  without the LM head and sampling (a prompt token whose successor is known: what prefill
  runs for all but a prompt's last token);
* **numpy path** (the Python loop on numpy, the reference): python under callgrind with
  collection toggled by client requests around the step, around every hostops call (small
  ops) and around sampling; the device's C functions' inclusive costs taken out (their
  Python callers, the MMIO adapter as pynq.MMIO's, are the host's); timed natively.

No time of the board here: make a9-model models the ARMv7 build's cycles (the host term of
make decode, prefill, speculate and report); the goal of issue 18 / 28 (<= 2.0 M instructions
per token at context 512) is checked on the ARMv7 count.

    python tools/host_bench.py [--formats q4,int8] [--contexts 1,512,2048] [--no-numpy]
                               [--no-arm] [--no-text] [--no-record]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from generators.runtime.bench import a9model  # noqa: E402
CSRC = REPO / "generators" / "runtime" / "host" / "csrc"
OUT = REPO / "build" / "host"
CFLAGS = ["-std=c99", "-O2", "-ffp-contract=off", "-fno-fast-math", "-Wall", "-Wextra",
          "-Werror"]
LIB = ("tphost", "tphloop", "tphreplay", "tphwork")
GOAL_MINSTR = 2.0          # issue 28 item 6: at most 2.0 M ARMv7 instructions per token (ctx 512)
ARM_CC = "arm-linux-gnueabihf-gcc"
#: the kernels (tphost.h) the C step calls: their inclusive costs are the small ops
STEP_KERNELS = ("tph_embed_q8_0", "tph_rmsnorm", "tph_quantise_rows", "tph_dequant_i32",
                "tph_dequant_f32", "tph_rope", "tph_absmax", "tph_kv_step", "tph_kv_requantise",
                "tph_kv_row",
                "tph_score_scale", "tph_score_multiplier", "tph_attention_out", "tph_add",
                "tph_silu_mul", "tph_dequant_b_i32", "tph_dequant_b_f32")
#: the replay device's functions: they stand for the PL (and tph_replay_sync for the kernel's
#: cache maintenance and the DMA's writes reaching DDR), not the CPU's work: left out of the
#: counts (a9model prices the invalidates itself)
DEVICE = ("tph_replay_read", "tph_replay_write", "tph_replay_sync")
#: hostops' per-token functions (the numpy path's small ops)
NUMPY_KERNELS = ("embed_q8_0", "rmsnorm", "quantise", "dequant_i32", "dequant_f32", "rope",
                 "kv_step", "kv_requantise", "kv_row", "score_scale", "score_multiplier",
                 "attention_out", "add", "silu_mul")


def sh(cmd, **kw):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if r.returncode:
        raise SystemExit(f"[host-bench] failed: {' '.join(map(str, cmd))}\n{r.stdout}{r.stderr}")
    return r


def need(tool: str, pkg: str) -> None:
    if shutil.which(tool) is None:
        raise SystemExit(f"[host-bench] {tool} is missing: install the Debian package {pkg}")


def log(s: str) -> None:
    print(f"[host-bench] {s}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- builds

def build(cc: str, tag: str, extra) -> dict:
    """tphbench and the library's objects (their symbols: the counts' categories)."""
    OUT.mkdir(parents=True, exist_ok=True)
    objs, syms = [], {}
    nm = "arm-linux-gnueabihf-nm" if cc == ARM_CC else "nm"
    for name in LIB + ("tphbench",):
        o = OUT / f"{name}.{tag}.o"
        sh([cc, *CFLAGS, *extra, "-c", CSRC / f"{name}.c", "-o", o])
        objs.append(o)
        syms[name] = {ln.split()[-1] for ln in sh([nm, "--defined-only", o]).stdout.splitlines()
                      if ln.split()[1] in "tT"}
    exe = OUT / f"tphbench.{tag}"
    sh([cc, *extra, *objs, "-lm", "-pthread", "-o", exe])
    return {"exe": exe, "syms": syms}


def build_regions() -> Path:
    """The helper library: callgrind's client requests (valgrind/callgrind.h) for python."""
    src = OUT / "host_bench_regions.c"
    src.write_text("/* generated by tools/host_bench.py: callgrind client requests for python */\n"
                   "#include <valgrind/callgrind.h>\n"
                   "void hb_toggle(void) { CALLGRIND_TOGGLE_COLLECT; }\n"
                   "void hb_zero(void) { CALLGRIND_ZERO_STATS; }\n"
                   "void hb_dump(const char *s) { CALLGRIND_DUMP_STATS_AT(s); }\n")
    so = OUT / "libhb_regions.so"
    sh(["gcc", "-O2", "-shared", "-fPIC", src, "-o", so])
    return so


# --------------------------------------------------------------------------- callgrind

def annotate(out_file: Path, inclusive: bool) -> dict:
    """function -> instructions (callgrind_annotate, inclusive or self)."""
    r = sh(["callgrind_annotate", f"--inclusive={'yes' if inclusive else 'no'}",
            "--threshold=100", out_file])
    costs = {}
    for line in r.stdout.splitlines():
        m = re.match(r"^\s*([\d,]+)\s+\([^)]*\)\s+(\S+)\s+\[", line)
        if m:
            name = m.group(2).split(":")[-1]
            costs[name] = costs.get(name, 0) + int(m.group(1).replace(",", ""))
    return costs


def totals(out_file: Path) -> int:
    return int(re.search(r"^totals: (\d+)", out_file.read_text(), re.M).group(1))


# --------------------------------------------------------------------------- C path

def c_path(b: dict, dump: Path, tokens: int, time_tokens: int, rows: int = 1,
           lm: bool = True, growth_run: bool = True) -> dict:
    """The C step on x86-64 under callgrind (--toggle-collect=bench_token: the steps after the
    warm-up, each tph_step and tph_argmax): small ops, frames and DMA, sampling; the same with
    one KV step growth per step; the time per step natively. ``rows`` > 1: a dump of a
    batched pass (tph_step_rows), every figure per row; ``lm`` False: a dump of prompt rows
    (no LM head, no sampling); either, or ``growth_run`` False (an INT16 KV cache, which
    takes the calibrated fixed steps only: no running absmax to grow): no growth run."""
    def run(*extra):
        cg = OUT / f"callgrind.{dump.stem}{'.' + extra[0] if extra else ''}"
        sh(["valgrind", "--tool=callgrind", f"--callgrind-out-file={cg}",
            "--toggle-collect=bench_token", b["exe"], dump, tokens, *extra])
        inc = annotate(cg, True)
        total = totals(cg) - sum(inc.get(f, 0) for f in DEVICE)
        cg.unlink()
        return inc, total / (tokens * rows)

    inc, total = run()
    kernels = {k: inc.get(k, 0) / (tokens * rows) for k in STEP_KERNELS}
    small = sum(kernels.values())
    sampling = inc.get("tph_argmax", 0) / (tokens * rows)
    growth = run("growth")[1] - total if rows == 1 and lm and growth_run else None
    line = sh([b["exe"], dump, time_tokens]).stdout
    if f" rows {rows} lm {int(lm)} " not in line:
        raise SystemExit(f"[host-bench] tphbench ran another step than {rows} row(s) "
                         f"{'with' if lm else 'without'} the LM head: {line}")
    ns = float(re.search(r"ns_per_token (\d+)", line).group(1)) / rows
    return {"small_ops": small, "frames_dma": total - small - sampling, "sampling": sampling,
            "total": total, "kernels": kernels, "time_ms": ns / 1e6, "growth": growth}


# --------------------------------------------------------------------------- ARMv7 path

def loop_symbols(b: dict) -> set:
    """The functions counted as the loop's own work ("frames and DMA"): the C loop's, its
    worker's (tphwork.c: the halves' dispatch and their combination) and bench_token."""
    return b["syms"]["tphloop"] | b["syms"]["tphwork"] | {"bench_token"}


def arm_path(b: dict, dump: Path, rows: int = 1) -> dict:
    """ARMv7 instructions of one step (``rows`` > 1: a dump of a batched pass, per row),
    counted by qemu-arm: every translation block's
    instructions (-d in_asm) times its executions (-d exec,nochain), logged only inside the
    library's functions and bench_token (-dfilter); run with 1 and 2 steps after the warm-up,
    the difference is one step."""
    loop_fns = loop_symbols(b)
    funcs = a9model.symbols(b["exe"], b["syms"]["tphost"] | loop_fns)

    def count(steps: int) -> dict:
        blocks = a9model.profile(b["exe"], [dump, steps], funcs,
                                 OUT / f"qemu.{dump.stem}.{steps}.log")
        per_fn: Dict[str, float] = {}
        for blk in blocks.values():
            per_fn[blk["fn"]] = per_fn.get(blk["fn"], 0) + len(blk["pcs"]) * blk["execs"]
        return per_fn

    one, two = count(1), count(2)
    per = {fn: (two.get(fn, 0) - one.get(fn, 0)) / rows for fn in set(one) | set(two)}
    cache = arm_invalidates(b, dump, rows)
    small = sum(v for fn, v in per.items() if fn in b["syms"]["tphost"] and fn != "tph_argmax")
    sampling = per.get("tph_argmax", 0)
    loop = sum(v for fn, v in per.items() if fn in loop_fns)
    return {"small_ops": small, "frames_dma": loop, "sampling": sampling,
            "total": small + loop + sampling, "time_ms": None, "functions": per,
            "cache": cache}


def arm_invalidates(b: dict, dump: Path, rows: int = 1) -> dict:
    """The ARMv7 build's invalidates of the cached results region in one step (per row), as
    tphbench prints them under qemu-arm: calls, bytes invalidated, bytes read from it."""
    line = sh(["qemu-arm", "-cpu", "cortex-a9", b["exe"], dump, 1]).stdout
    got = {k: int(re.search(rf"\b{k} (\d+)", line).group(1))
           for k in ("invalidates", "invalidated", "read_cached")}
    return {"invalidates": got["invalidates"] / rows, "invalidated": got["invalidated"] / rows,
            "read": got["read_cached"] / rows}


# --------------------------------------------------------------------------- numpy path

def numpy_child(args) -> int:
    """Run under callgrind --collect-atstart=no: the Python loop on numpy, on the replay
    backend at position ctx - 1, one warm-up step, then per pass (the step, the hostops calls
    inside it, sampling) args.tokens steps with collection toggled on around that region and
    a dump; last, 1000 empty regions (the toggles' own cost)."""
    import ctypes

    import numpy as np

    from generators.runtime.decode import decoder
    from generators.runtime.bench import hostbench
    from generators.runtime.host import ops as hostops
    hostops.use("numpy")
    lib = ctypes.CDLL(args.regions)
    model = hostbench.smollm2(args.fmt)
    pos = args.ctx - 1
    dec = hostbench.replay_decoder(model, hostbench.recorded(model, args.fmt), pos, "python")
    state = {"active": None, "calls": 0}
    rng = np.random.default_rng(0)

    def region(name, fn):
        def run(*a, **k):
            if state["active"] != name:
                return fn(*a, **k)
            state["calls"] += 1
            lib.hb_toggle()
            try:
                return fn(*a, **k)
            finally:
                lib.hb_toggle()
        return run

    for k in NUMPY_KERNELS:
        setattr(hostops, k, region("kernels", getattr(hostops, k)))
    step = region("step", dec.step)
    sample = region("sampling", decoder.sample)

    def token():
        logits = step(hostbench.RECORD_TOKEN)
        sample(logits, 0.0, 0, rng)
        hostbench.again(dec, pos)

    token()
    passes = []
    for name in ("step", "kernels", "sampling"):
        state.update(active=name, calls=0)
        lib.hb_zero()
        for _ in range(args.tokens):
            token()
        lib.hb_dump(name.encode())
        passes.append({"name": name, "calls": state["calls"]})
    state.update(active="empty", calls=0)
    empty = region("empty", lambda: None)
    lib.hb_zero()
    for _ in range(1000):
        empty()
    lib.hb_dump(b"empty")
    passes.append({"name": "empty", "calls": state["calls"]})
    print(json.dumps(passes))
    return 0


def numpy_path(fmt: str, ctx: int, tokens: int, time_tokens: int, regions: Path) -> dict:
    cg = OUT / f"callgrind.numpy.{fmt}.{ctx}"
    for old in OUT.glob(cg.name + "*"):
        old.unlink()
    env = dict(os.environ, PYTHONPATH=str(REPO), OPENBLAS_NUM_THREADS="1")
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--ctx", str(ctx),
           "--fmt", fmt, "--tokens", str(tokens), "--regions", str(regions)]
    r = subprocess.run(["valgrind", "--tool=callgrind", "--collect-atstart=no",
                        f"--callgrind-out-file={cg}", *cmd], capture_output=True, text=True,
                       env=env)
    if r.returncode:
        raise SystemExit(f"[host-bench] numpy path under callgrind failed:\n{r.stderr[-3000:]}")
    passes = json.loads(r.stdout.strip().splitlines()[-1])
    cost = {}
    for i, p in enumerate(passes, 1):
        part = OUT / f"{cg.name}.{i}"
        assert f"Client Request: {p['name']}" in part.read_text(), (i, p)
        inc = annotate(part, True)
        cost[p["name"]] = totals(part) - sum(inc.get(f, 0) for f in DEVICE)
        part.unlink()
    calls = {p["name"]: p["calls"] for p in passes}
    empty = cost["empty"] / 1000

    def per(name):
        return (cost[name] - calls[name] * empty) / tokens

    step, small, sampling = per("step"), per("kernels"), per("sampling")
    # natively: the step and sampling on the replay backend, this machine
    import numpy as np

    from generators.runtime.decode import decoder
    from generators.runtime.bench import hostbench
    from generators.runtime.host import ops as hostops
    model = hostbench.smollm2(fmt)
    with hostops.using("numpy"):
        dec = hostbench.replay_decoder(model, hostbench.recorded(model, fmt), ctx - 1, "python")
        rng = np.random.default_rng(0)
        decoder.sample(dec.step(hostbench.RECORD_TOKEN), 0.0, 0, rng)
        hostbench.again(dec, ctx - 1)
        t0 = time.perf_counter()
        for _ in range(time_tokens):
            decoder.sample(dec.step(hostbench.RECORD_TOKEN), 0.0, 0, rng)
            hostbench.again(dec, ctx - 1)
        ms = (time.perf_counter() - t0) / time_tokens * 1e3
    return {"small_ops": small, "frames_dma": step - small, "sampling": sampling,
            "total": step + sampling, "time_ms": ms, "empty_per_call": empty}


# --------------------------------------------------------------------------- figures

ARMV7 = f"arm-linux-gnueabihf-gcc -O2 {' '.join(a9model.board_flags())}; qemu-arm"
WHERE = {"c": "C on x86-64, the development yardstick (gcc -O2 -march=x86-64: SSE2; callgrind)",
         "c2": "the batched C step (tph_step_rows: 2 rows in one weight pass, each with its "
               "LM head and sampling; per row) on x86-64 (gcc -O2 -march=x86-64: SSE2; "
               "callgrind)",
         "armv7c2": "the batched C step (tph_step_rows: 2 rows in one weight pass, each with "
                    f"its LM head and sampling; per row) on ARMv7 ({ARMV7})",
         "cp": "C on x86-64, a prompt row (tph_step without the LM head and sampling; "
               "gcc -O2 -march=x86-64: SSE2; callgrind)",
         "c2p": "the batched C step, prompt rows (tph_step_rows: 2 rows in one weight pass "
                "without the LM head and sampling; per row) on x86-64 (gcc -O2 "
                "-march=x86-64: SSE2; callgrind)",
         "armv7": f"C on ARMv7, the board build ({ARMV7})",
         "numpy": "the Python loop on numpy (callgrind)"}


def figures(results: dict, growth: dict):
    from generators.results import figure
    out = []
    for (path, fmt, ctx), res in results.items():
        base = f"host-bench.{path}.{fmt}.ctx{ctx}"
        unit = "token" if path in ("c", "armv7", "numpy") else "row"
        where = f"{WHERE[path]}, {fmt} SmolLM2 on the replay backend, context {ctx}"
        ctxd = dict(path=path, format=fmt, context=ctx)
        if "kernels" in res:
            ctxd["kernels_k_instr"] = {n: round(v / 1e3, 1) for n, v in res["kernels"].items()}
        out += [
            figure(f"{base}.small_ops_minstr", round(res["small_ops"] / 1e6, 3),
                   "M instructions", "measured", f"host small ops per {unit}: {where}", **ctxd),
            figure(f"{base}.frames_dma_minstr", round(res["frames_dma"] / 1e6, 3),
                   "M instructions", "measured", f"frames and DMA per {unit} (slots, attention "
                   f"parts, KV rows, descriptors, registers, result checks): {where}"),
            figure(f"{base}.sampling_minstr", round(res["sampling"] / 1e6, 3), "M instructions",
                   "measured", f"greedy sampling (argmax of 49,152 logits) per {unit}: {where}"),
            figure(f"{base}.total_minstr", round(res["total"] / 1e6, 3), "M instructions",
                   "measured", f"the host's whole work per {unit}: {where}"),
        ]
        if res.get("time_ms") is not None:
            out.append(figure(f"{base}.time_ms", round(res["time_ms"], 3), "ms", "measured",
                              f"time per {unit} on this x86 machine (shared, loaded): {where}"))
        if res.get("cache"):
            c = res["cache"]
            out += [figure(f"{base}.invalidates", round(c["invalidates"], 1), "calls",
                           "measured", f"invalidates of the cached results region per {unit} "
                           f"(tph_io.sync: xclSyncBO on the board), as tphbench counts them "
                           f"under qemu-arm: {where}"),
                    figure(f"{base}.invalidated_bytes", round(c["invalidated"]), "B",
                           "measured", f"bytes those invalidates cover (whole 32-byte lines) "
                           f"per {unit}: {where}", read_bytes=round(c["read"]))]
    for ctx, g in growth.items():
        out.append(figure(f"host-bench.c.kv_growth.ctx{ctx}_kinstr", round(g / 1e3, 1),
                          "k instructions", "measured",
                          f"one KV step growth at context {ctx}: the {ctx - 1} cached rows of "
                          f"one KV head's K requantised, both port halves (C path, callgrind)"))
    return out


def table(results: dict) -> str:
    lines = ["| path | format | context | small ops | frames and DMA | sampling | total (M "
             "instr) | this machine (ms) |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for (path, fmt, ctx), r in results.items():
        t = "-" if r.get("time_ms") is None else f"{r['time_ms']:.2f}"
        lines.append(f"| {path} | {fmt} | {ctx} | {r['small_ops'] / 1e6:.3f} | "
                     f"{r['frames_dma'] / 1e6:.3f} | {r['sampling'] / 1e6:.3f} | "
                     f"{r['total'] / 1e6:.3f} | {t} |")
    for (path, fmt, ctx), r in results.items():
        if r.get("cache"):
            c = r["cache"]
            lines.append(f"{path} {fmt} context {ctx}: {c['invalidates']:.0f} invalidates of the "
                         f"results region, {c['invalidated']:,.0f} B in whole lines, "
                         f"{c['read']:,.0f} B read")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=2, help="steps counted per configuration")
    ap.add_argument("--time-tokens", type=int, default=50, help="steps timed (numpy path; "
                                                                "the C path times 4x as many)")
    ap.add_argument("--contexts", default="1,512,2048")
    ap.add_argument("--formats", default="q4,int8")
    ap.add_argument("--no-numpy", action="store_true", help="leave out the numpy path")
    ap.add_argument("--no-arm", action="store_true", help="leave out the ARMv7 count (qemu-arm)")
    ap.add_argument("--no-text", action="store_true", help="leave out the requantisation on "
                                                           "real text and the memory peak")
    ap.add_argument("--no-record", action="store_true", help="print; do not write docs/results")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--ctx", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--fmt", help=argparse.SUPPRESS)
    ap.add_argument("--regions", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return numpy_child(args)
    for tool, pkg in (("valgrind", "valgrind"), ("callgrind_annotate", "valgrind"),
                      ("gcc", "gcc")):
        need(tool, pkg)
    if not args.no_arm:
        need(ARM_CC, "gcc-arm-linux-gnueabihf")
        need("qemu-arm", "qemu-user")
    from generators.results import figure, record
    from generators.runtime.bench import hostbench
    from generators.runtime.engines import cloop as hostloop
    from generators.runtime.engines import replay
    from generators.runtime.host import ops as hostops
    from generators.runtime.engines.plan import CMA_MB
    if not hostloop.available():
        raise SystemExit("[host-bench] the C library is not built (make setup)")
    contexts = [int(c) for c in args.contexts.split(",")]
    formats = args.formats.split(",")
    t_all = time.perf_counter()
    figs, lines = hostbench.plan_figures(figure)
    log(f"memory plan of SmolLM2-135M at context 2048 (CMA {CMA_MB} MiB):")
    for ln in lines:
        log(ln)
    x86 = build("gcc", "x86", ["-march=x86-64"])
    arm = None if args.no_arm else build(ARM_CC, "armv7", [*a9model.board_flags(), "-static"])
    regions = None if args.no_numpy else build_regions()
    results, growth, counts, rows_counts = {}, {}, {}, {}
    for fmt in formats:
        model = hostbench.smollm2(fmt, say=log)
        packets = hostbench.recorded(model, fmt, log)
        # the batched step and prompt rows: (path, rows, LM head)
        passes = [("c2", hostbench.ROWS, True), ("cp", 1, False),
                  ("c2p", hostbench.ROWS, False)]
        recs = {p: hostbench.recorded(model, fmt, log, rows=r, logits=lm)
                for p, r, lm in passes}
        for ctx in contexts:
            for path, rows, lm in passes:
                L0 = max(ctx - rows, 0)
                tokens = [hostbench.RECORD_TOKEN, hostbench.RECORD_TOKEN2][:rows]
                with hostops.using("c"):
                    dec = hostbench.replay_decoder(model, recs[path], L0, "c",
                                                   vectors=hostbench.ROWS, rows=rows)
                    if path == "c2" and fmt == formats[0] and ctx == 512:
                        rows_counts[ctx] = hostbench.token_counts(dec, L0, rows)
                    dump = replay.write_dump(OUT / f"{path}.{fmt}.{ctx}.tpl", dec,
                                               tokens if rows > 1 else tokens[0], logits=lm)
                del dec
                log(f"C x86-64 {fmt} context {ctx}: {WHERE[path].split(' (')[0]} ...")
                results[(path, fmt, ctx)] = c_path(x86, dump, args.tokens,
                                                   2 * args.time_tokens, rows=rows, lm=lm)
                if arm is not None and path == "c2" and ctx == 512:
                    log(f"C ARMv7 (qemu-arm) {fmt} context {ctx}, a {rows}-row pass ...")
                    results[("armv7c2", fmt, ctx)] = arm_path(arm, dump, rows=rows)
                dump.unlink()
            with hostops.using("c"):
                dec = hostbench.replay_decoder(model, packets, ctx - 1, "c")
                if fmt == formats[0]:
                    counts[ctx] = hostbench.token_counts(dec, ctx - 1)
                dump = replay.write_dump(OUT / f"step.{fmt}.{ctx}.tpl", dec,
                                           hostbench.RECORD_TOKEN)
            del dec
            log(f"C x86-64 {fmt} context {ctx} ...")
            # the running absmax's step growth: INT8 KV only (an INT16 cache takes fixed steps)
            kv8 = model.engines.kv_bits == 8
            if fmt == formats[0] and not kv8:
                log(f"no KV step growth run: the INT{model.engines.kv_bits} cache takes the "
                    f"calibrated fixed steps only")
            res = c_path(x86, dump, args.tokens, 4 * args.time_tokens, growth_run=kv8)
            results[("c", fmt, ctx)] = res
            if fmt == formats[0] and res["growth"] is not None:
                growth[ctx] = res["growth"]
            if arm is not None:
                log(f"C ARMv7 (qemu-arm) {fmt} context {ctx} ...")
                results[("armv7", fmt, ctx)] = arm_path(arm, dump)
            dump.unlink()
            if regions is not None and (fmt == formats[0] or ctx == 512):
                log(f"numpy {fmt} context {ctx} ...")
                results[("numpy", fmt, ctx)] = numpy_path(fmt, ctx, args.tokens,
                                                          args.time_tokens, regions)
        del model
    figs += hostbench.count_figures(figure, counts, formats[0])
    figs += hostbench.rows_count_figures(figure, rows_counts, formats[0])
    figs += figures(results, growth)
    if not args.no_text:
        figs += hostbench.text_figures(figure, log)
    print(table(results))
    for path in ("armv7", "c"):
        r512 = results.get((path, formats[0], 512))
        if r512:
            tot = r512["total"] / 1e6
            print(f"\n[host-bench] goal: <= {GOAL_MINSTR} M ARMv7 instructions per token at "
                  f"context 512: {WHERE[path].split(' (')[0]} {tot:.3f} M, "
                  f"{'within' if tot <= GOAL_MINSTR else 'ABOVE'} the goal")
            break
    (OUT / "host_bench.json").write_text(json.dumps(
        {f"{p}.{f}.{c}": r for (p, f, c), r in results.items()}, indent=1, default=float) + "\n")
    log(f"{time.perf_counter() - t_all:.0f} s")
    (OUT / "figures.json").write_text(json.dumps(figs, indent=1) + "\n")
    if not args.no_record:
        old = REPO / "docs" / "results" / "host-bench-kernels.json"     # the variant of before
        if old.exists():
            old.unlink()
        path = record("host-bench", figs, command="make host-bench (tools/host_bench.py)",
                      note=f"Instructions: callgrind on this x86-64 machine (C: gcc -O2 "
                           f"-march=x86-64, a development yardstick; numpy: python "
                           f"{sys.version.split()[0]}) and qemu-arm (ARMv7: {ARMV7}); the "
                           f"engines replaced by the replay backend. The board's time: make "
                           f"a9-model.")
        log(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
