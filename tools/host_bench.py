#!/usr/bin/env python3
"""make host-bench: the host's small ops of one SmolLM2-135M token, counted and timed.

Both paths compose the same kernel calls per token (the decoder's: DESIGN.md section 8, 30
layers; generators/runtime/csrc/tph_bench.c lists them): the embedding row, per layer
RMSNorm, quantisation, the engines' results dequantised, RoPE, the KV append at row CONTEXT - 1
(no step growth: the steady state; one growth is counted apart), the attention frames' score
multipliers and outputs, residuals, SiLU*up; the final norm, the LM head's 49,152 results and
the greedy argmax ("sampling"). No engine work: the engines' words are fixed inputs.

* C path: tph_bench built for the x86-64 baseline (gcc -O2 -march=x86-64: SSE2, whose
  128-bit vectors are NEON's width), counted with valgrind --tool=callgrind
  --toggle-collect=bench_token (instructions of the token function and below), per kernel;
  timed natively.
* numpy path: the same calls through generators.runtime.hostops on numpy, in python under
  callgrind (collection off at start); a small helper library (callgrind's client requests)
  turns collection on around one region's calls at a time (the whole token, then each
  kernel), with a dump per region; the toggles' own cost (an empty region) is subtracted.
  Timed natively with time.perf_counter.
* ARMv7 path: the same driver built with Debian's arm-linux-gnueabihf-gcc for the Cortex-A9
  (VFP, no NEON: the library's portable bodies, what the board runs today), its instructions
  counted under qemu-arm (translation blocks' sizes times their executions).
* The Cortex-A9 figures are a MODEL: instructions x CPI 1.3 / 650 MHz (no A9 here), from the
  x86 SSE2 count (the issue's yardstick: SSE2 has NEON's vector width) and from the ARMv7 count.

Frames and DMA (the attention frames, the DMA starts and completions) are not in these counts
yet: the C per-token loop adds them (issue 18, item 6).

    python tools/host_bench.py [--tokens 3] [--contexts 1,512,2048] [--no-numpy] [--no-record]
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
CSRC = REPO / "generators" / "runtime" / "csrc"
OUT = REPO / "build" / "host"
CFLAGS = ["-std=c99", "-O2", "-march=x86-64", "-ffp-contract=off", "-fno-fast-math", "-Wall",
          "-Wextra", "-Werror"]
#: the model of the board's CPU (no A9 here): cycles per instruction and clock
A9_CPI = 1.3
A9_HZ = 650e6
GOAL_MINSTR = 2.0          # issue 18 item 6: at most 2.0 M instructions per token at context 512
#: kernel -> part of the token (the later C loop adds "frames and DMA")
SAMPLING = {"argmax"}


def sh(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode:
        raise SystemExit(f"[host-bench] failed: {' '.join(map(str, cmd))}\n{r.stdout}{r.stderr}")
    return r


def need(tool: str, pkg: str) -> None:
    if shutil.which(tool) is None:
        raise SystemExit(f"[host-bench] {tool} is missing: install the Debian package {pkg}")


# --------------------------------------------------------------------------- callgrind

def inclusive(out_file: Path) -> dict:
    """function -> inclusive instructions, from callgrind_annotate."""
    r = sh(["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(out_file)])
    costs = {}
    for line in r.stdout.splitlines():
        m = re.match(r"^\s*([\d,]+)\s+\([^)]*\)\s+(\S+)\s+\[", line)
        if not m:
            continue
        name = m.group(2).split(":")[-1]
        costs[name] = costs.get(name, 0) + int(m.group(1).replace(",", ""))
    return costs


def callgrind(cmd, out_file: Path, toggle: str, env=None) -> dict:
    sh(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}",
        f"--toggle-collect={toggle}", *cmd], env=env)
    return inclusive(out_file)


# --------------------------------------------------------------------------- C path

#: tph_bench's kernels (callgrind names) -> the names both paths report
C_KERNELS = {"tph_embed_q8_0": "embed", "tph_rmsnorm": "rmsnorm", "tph_quantise_rows": "quantise",
             "tph_dequant_i32": "dequant", "tph_dequant_f32": "dequant", "tph_rope": "rope",
             "tph_kv_append": "kv_append", "tph_score_scale": "score_multiplier",
             "tph_score_multiplier": "score_multiplier", "tph_attention_out": "attention_out",
             "tph_add": "add", "tph_silu_mul": "silu_mul", "tph_argmax": "argmax"}


def build_c() -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    exe = OUT / "tph_bench"
    sh(["gcc", *CFLAGS, "-D_POSIX_C_SOURCE=199309L", str(CSRC / "tph_bench.c"),
        str(CSRC / "tphost.c"), "-lm", "-o", str(exe)])
    return exe


def c_path(exe: Path, ctx: int, fmt: str, tokens: int, time_tokens: int) -> dict:
    cg = OUT / f"callgrind.c.{fmt}.{ctx}"
    costs = callgrind([str(exe), str(tokens), str(ctx), fmt], cg, "bench_token")
    calls = tokens + 1                    # the program runs one warm-up token first
    per = {}
    for fn, name in C_KERNELS.items():
        per[name] = per.get(name, 0) + costs.get(fn, 0) / calls
    token = costs["bench_token"] / calls
    per["driver"] = token - sum(per.values())
    grow = callgrind([str(exe), "1", str(ctx), fmt], OUT / f"callgrind.c.{fmt}.{ctx}.growth",
                     "bench_growth")["bench_growth"]
    line = sh([str(exe), str(time_tokens), str(ctx), fmt]).stdout
    ns = float(re.search(r"ns_per_token (\d+)", line).group(1))
    return {"kernels": per, "total": token, "time_ms": ns / 1e6, "growth": grow}


# --------------------------------------------------------------------------- ARMv7 path

ARM_CC = "arm-linux-gnueabihf-gcc"


def build_arm() -> Path:
    """tph_bench for the board's CPU: ARMv7-A, Cortex-A9, hard float on the VFP (Debian's
    default -mfpu=vfpv3-d16: the portable C bodies, no NEON), static for qemu-arm."""
    exe = OUT / "tph_bench_armv7"
    flags = [f for f in CFLAGS if not f.startswith("-march")]
    sh([ARM_CC, *flags, "-mcpu=cortex-a9", "-static", "-D_POSIX_C_SOURCE=199309L",
        str(CSRC / "tph_bench.c"), str(CSRC / "tphost.c"), "-lm", "-o", str(exe)])
    obj = OUT / "tphost_armv7.o"
    sh([ARM_CC, *flags, "-mcpu=cortex-a9", "-c", str(CSRC / "tphost.c"), "-o", str(obj)])
    return exe


def arm_path(exe: Path, ctx: int, fmt: str, tokens: int) -> dict:
    """ARMv7 instructions per token, counted by qemu-arm: every translation block's
    instructions (-d in_asm) times its executions (-d exec,nochain), logged only inside
    bench_token and tphost's functions (-dfilter); libc calls (memset) are not counted."""
    nm = sh(["arm-linux-gnueabihf-nm", "-S", "--defined-only", str(exe)]).stdout
    lib = {ln.split()[-1] for ln in sh(["arm-linux-gnueabihf-nm", "--defined-only",
                                        str(OUT / "tphost_armv7.o")]).stdout.splitlines()
           if ln.split()[1] in "tT"}
    ranges, names = [], []
    for ln in nm.splitlines():
        f = ln.split()
        if len(f) == 4 and f[2] in "tT" and (f[3] in lib or f[3] == "bench_token"):
            a, n = int(f[0], 16), int(f[1], 16)
            ranges.append((a & ~1, n))
            names.append((a & ~1, a + n, f[3]))
    log = OUT / f"qemu.armv7.{fmt}.{ctx}.log"
    dfilter = ",".join(f"0x{a:x}+0x{n:x}" for a, n in ranges)
    sh(["qemu-arm", "-cpu", "cortex-a9", "-d", "in_asm,exec,nochain", "-dfilter", dfilter,
        "-D", str(log), str(exe), str(tokens), str(ctx), fmt, "nogrowth"])
    size, per_fn, cur = {}, {}, None
    with open(log) as fh:
        for line in fh:
            if line.startswith("IN:"):
                cur = None
            elif line.startswith("0x") and ":  " in line:
                pc = int(line.split(":", 1)[0], 16)
                if cur is None:
                    cur = pc
                    size[cur] = 0
                size[cur] += 1
            elif line.startswith("Trace"):
                pc = int(line.split("[", 1)[1].split("/")[1], 16)
                fn = next((nm_ for a, b, nm_ in names if a <= pc < b), "?")
                per_fn[fn] = per_fn.get(fn, 0) + size[pc]
    log.unlink()
    calls = tokens + 1
    per = {fn: n / calls for fn, n in per_fn.items()}
    return {"functions": per, "total": sum(per.values())}


# --------------------------------------------------------------------------- numpy path

KERNELS = ["embed", "rmsnorm", "quantise", "dequant", "rope", "kv_append", "score_multiplier",
           "attention_out", "add", "silu_mul", "argmax"]


def build_regions() -> Path:
    """The helper library: callgrind's client requests (valgrind/callgrind.h) for python."""
    OUT.mkdir(parents=True, exist_ok=True)
    src = OUT / "host_bench_regions.c"
    src.write_text("/* generated by tools/host_bench.py: callgrind client requests for python */\n"
                   "#include <valgrind/callgrind.h>\n"
                   "void hb_toggle(void) { CALLGRIND_TOGGLE_COLLECT; }\n"
                   "void hb_zero(void) { CALLGRIND_ZERO_STATS; }\n"
                   "void hb_dump(const char *s) { CALLGRIND_DUMP_STATS_AT(s); }\n")
    so = OUT / "libhb_regions.so"
    sh(["gcc", "-O2", "-shared", "-fPIC", str(src), "-o", str(so)])
    return so


class NumpyToken:
    """One token's kernel calls through hostops (numpy path), each inside its region."""

    def __init__(self, ctx: int, fmt: str, regions_so=None):
        import numpy as np
        from generators.runtime import hostops as H
        from generators.runtime.hostvectors import SMOLLM2 as S
        H.use("numpy")
        self.H, self.np, self.S, self.ctx, self.fmt = H, np, S, ctx, fmt
        rng = np.random.default_rng(0)
        f = np.float32
        H_, I, d, V = S["hidden"], S["mlp"], S["head_dim"], S["vocab"]
        self.w = rng.standard_normal(H_).astype(f)
        self.embed = rng.integers(0, 256, H_ // 32 * 34).astype(np.uint8)
        self.embed.reshape(-1, 34)[:, :2] = np.frombuffer(np.float16(2 ** -9).tobytes(), np.uint8)
        self.cos, self.sin = rng.standard_normal((2, d // 2)).astype(f)
        self.i32 = rng.integers(-10 ** 6, 10 ** 6, V).astype(np.int32)
        self.f32 = (rng.standard_normal(V) * 1000).astype(f)
        self.scale = (rng.standard_normal(V) * 1e-3).astype(f)
        self.kr = rng.standard_normal((S["kv_heads"], d)).astype(f)
        self.kv = np.zeros((S["layers"], S["kv_heads"], 2, ctx, d), np.int8)
        self.steps = np.ones((S["layers"], S["kv_heads"], 2), f)
        self.att_y = rng.integers(-127, 128, (S["heads"] // S["kv_heads"], d)).astype(np.int8)
        self.att_z = np.full(S["heads"] // S["kv_heads"], 1 << 24, np.uint32)
        from generators.golden import attention as gatt
        self.cfg = gatt.DEFAULT_CONFIG
        self.lib = ctypes.CDLL(str(regions_so)) if regions_so else None
        self.active = None          # the region whose calls callgrind collects
        self.calls = {}

    def r(self, name, fn, *args):
        self.calls[name] = self.calls.get(name, 0) + 1
        if name != self.active:
            return fn(*args)
        self.lib.hb_toggle()
        out = fn(*args)
        self.lib.hb_toggle()
        return out

    def dequant(self, n, sx, head=False):
        if self.fmt == "q4" and not head:
            return self.r("dequant", self.H.dequant_f32, self.f32[:n], sx)
        return self.r("dequant", self.H.dequant_i32, self.i32[:n], self.scale[:n], sx)

    def token(self):
        H, S, np_ = self.H, self.S, self.np
        Hd, I, d, G = S["hidden"], S["mlp"], S["head_dim"], S["heads"] // S["kv_heads"]
        t = self.ctx - 1
        x = self.r("embed", H.embed_q8_0, self.embed, Hd)
        for l in range(S["layers"]):
            n = self.r("rmsnorm", H.rmsnorm, x, self.w, 1e-5)
            _, sx = self.r("quantise", H.quantise, n)
            q = self.dequant(Hd, sx)
            self.dequant(S["kv_heads"] * d, sx)
            self.dequant(S["kv_heads"] * d, sx)
            q = self.r("rope", H.rope, q.reshape(S["heads"], d), self.cos, self.sin)
            self.r("rope", H.rope, self.kr, self.cos, self.sin)
            for h in range(S["kv_heads"]):
                for kv in (0, 1):
                    self.steps[l, h, kv], _ = self.r("kv_append", H.kv_append,
                                                     self.kv[l, h, kv], t, self.steps[l, h, kv],
                                                     self.kr[h])
            att = np_.empty((S["heads"], d), np_.float32)
            for h in range(S["kv_heads"]):
                _, sq = self.r("quantise", H.quantise, q[h * G:(h + 1) * G])
                for g in range(G):
                    self.r("score_multiplier", lambda a, b: H.score_multiplier(
                        H.score_scale(a, b, d), self.cfg), self.steps[l, h, 0], sq[g])
                att[h * G:(h + 1) * G] = self.r("attention_out", H.attention_out, self.att_y,
                                                self.att_z, self.steps[l, h, 1], 24)
            _, sx = self.r("quantise", H.quantise, att.reshape(Hd))
            o = self.dequant(Hd, sx)
            x = self.r("add", H.add, x, o)
            n = self.r("rmsnorm", H.rmsnorm, x, self.w, 1e-5)
            _, sx = self.r("quantise", H.quantise, n)
            g_ = self.dequant(I, sx)
            u = self.dequant(I, sx)
            h_ = self.r("silu_mul", H.silu_mul, g_, u)
            _, sx = self.r("quantise", H.quantise, h_)
            dn = self.dequant(Hd, sx)
            x = self.r("add", H.add, x, dn)
        n = self.r("rmsnorm", H.rmsnorm, x, self.w, 1e-5)
        _, sx = self.r("quantise", H.quantise, n)
        logits = self.dequant(S["vocab"], sx, head=True)
        return self.r("argmax", H.argmax, logits)


def numpy_child(args) -> int:
    """Run under callgrind --collect-atstart=no: one warm-up token, then per pass (the whole
    token, then each kernel) args.tokens tokens with collection toggled on around that
    region's calls only, and a dump; last, 1000 empty regions (the toggles' own cost)."""
    tok = NumpyToken(args.ctx, args.fmt, args.regions)
    tok.token()
    passes = []
    for name in ["token"] + KERNELS:
        tok.calls.clear()
        tok.active = name
        tok.lib.hb_zero()
        for _ in range(args.tokens):
            tok.r("token", tok.token)
        tok.lib.hb_dump(name.encode())
        passes.append({"name": name, "calls": tok.calls.get(name, 0)})
    tok.active = "empty"
    tok.lib.hb_zero()
    for _ in range(1000):
        tok.r("empty", lambda: None)
    tok.lib.hb_dump(b"empty")
    passes.append({"name": "empty", "calls": 1000})
    print(json.dumps(passes))
    return 0


def numpy_path(ctx: int, fmt: str, tokens: int, time_tokens: int, regions: Path) -> dict:
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
        text = (OUT / f"{cg.name}.{i}").read_text()
        assert f"Client Request: {p['name']}" in text, (i, p)
        cost[p["name"]] = int(re.search(r"^totals: (\d+)", text, re.M).group(1))
    empty = cost["empty"] / 1000
    calls = {p["name"]: p["calls"] for p in passes}
    per = {n: (cost[n] - calls[n] * empty) / tokens for n in KERNELS}
    token = (cost["token"] - calls["token"] * empty) / tokens
    per["driver"] = token - sum(per.values())
    tok = NumpyToken(ctx, fmt)
    tok.token()
    t0 = time.perf_counter()
    for _ in range(time_tokens):
        tok.token()
    ms = (time.perf_counter() - t0) / time_tokens * 1e3
    return {"kernels": per, "total": token, "time_ms": ms, "empty_per_call": empty,
            "calls_per_token": {n: calls[n] / tokens for n in KERNELS}}


# --------------------------------------------------------------------------- report

#: ARMv7 functions (exclusive counts) -> the kernel names (static helpers to their callers)
ARM_KERNELS = {"tph_embed_q8_0": "embed", "tph_rmsnorm": "rmsnorm", "tph_sumsq": "rmsnorm",
               "tph_quantise_rows": "quantise", "absmax_bits": "quantise", "quantise": "quantise",
               "tph_dequant_i32": "dequant", "tph_dequant_f32": "dequant", "mul_f32": "dequant",
               "tph_rope": "rope",
               "tph_kv_append": "kv_append", "tph_kv_step": "kv_append",
               "tph_kv_requantise": "kv_append", "tph_kv_row": "kv_append",
               "tph_score_scale": "score_multiplier", "tph_score_multiplier": "score_multiplier",
               "tph_attention_out": "attention_out", "i8_mul": "attention_out", "tph_add": "add",
               "tph_silu_mul": "silu_mul", "exp1": "silu_mul", "tph_argmax": "argmax",
               "bench_token": "driver"}


def arm_kernels(res: dict) -> dict:
    per = {}
    for fn, n in res["functions"].items():
        name = ARM_KERNELS.get(fn, fn)
        per[name] = per.get(name, 0) + n
    return {"kernels": per, "total": res["total"], "time_ms": None}


def parts(res: dict) -> dict:
    k = res["kernels"]
    sampling = sum(v for n, v in k.items() if n in SAMPLING)
    return {"small_ops": res["total"] - sampling, "sampling": sampling, "total": res["total"]}


def a9_ms(instr: float) -> float:
    return instr * A9_CPI / A9_HZ * 1e3


def table(results: dict) -> str:
    lines = ["| path | format | context | small ops (M instr) | sampling (M instr) "
             "| total (M instr) "
             "| this machine (ms/token) | A9 model (ms/token) |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for (path, fmt, ctx), res in results.items():
        p = parts(res)
        t = "-" if res["time_ms"] is None else f"{res['time_ms']:.2f}"
        lines.append(f"| {path} | {fmt} | {ctx} | {p['small_ops'] / 1e6:.3f} | "
                     f"{p['sampling'] / 1e6:.3f} | {p['total'] / 1e6:.3f} | {t} | "
                     f"{a9_ms(p['total']):.2f} |")
    return "\n".join(lines)


def kernel_table(results: dict, ctx: int) -> str:
    keys = [k for k in results if k[2] == ctx]
    names = sorted({n for k in keys for n in results[k]["kernels"]},
                   key=lambda n: -results[keys[0]]["kernels"].get(n, 0))
    head = "| kernel | " + " | ".join(f"{p} {f} (k instr)" for p, f, _ in keys) + " |"
    lines = [head, "|---|" + "---:|" * len(keys)]
    for n in names:
        lines.append(f"| {n} | " + " | ".join(f"{results[k]['kernels'].get(n, 0) / 1e3:,.1f}"
                                              for k in keys) + " |")
    return "\n".join(lines)


def figures(results: dict, growth: dict):
    from generators.results import figure
    out = []
    for (path, fmt, ctx), res in results.items():
        p = parts(res)
        base = f"host-bench.{path}.{fmt}.ctx{ctx}"
        ctxd = dict(path=path, format=fmt, context=ctx,
                    kernels_k_instr={n: round(v / 1e3, 1) for n, v in res["kernels"].items()})
        where = ({"c": "C on x86-64 (gcc -O2 -march=x86-64: SSE2)",
                  "armv7": "C on ARMv7 (arm-linux-gnueabihf-gcc -O2 -mcpu=cortex-a9, VFP; "
                           "qemu-arm)",
                  "numpy": "numpy path (python)"}[path] + f", {fmt}, context {ctx}")
        how = "qemu-arm" if path == "armv7" else "callgrind"
        out += [
            figure(f"{base}.small_ops_minstr", round(p["small_ops"] / 1e6, 3), "M instructions",
                   "measured", f"host small ops per SmolLM2-135M token: {where} ({how})",
                   **ctxd),
            figure(f"{base}.sampling_minstr", round(p["sampling"] / 1e6, 3), "M instructions",
                   "measured", f"greedy sampling (argmax of 49,152 logits) per token: {where}"),
            figure(f"{base}.total_minstr", round(p["total"] / 1e6, 3), "M instructions",
                   "measured", f"small ops + sampling per token (frames and DMA not counted "
                   f"yet): {where}"),
        ]
        if res["time_ms"] is not None:
            out.append(figure(f"{base}.time_ms", round(res["time_ms"], 3), "ms", "measured",
                              f"time per token on this x86 machine (shared, loaded): {where}"))
        out += [
            figure(f"{base}.a9_ms", round(a9_ms(p["total"]), 2), "ms", "modelled",
                   f"Cortex-A9 time per token, MODEL: instructions x CPI {A9_CPI} / 650 MHz: "
                   f"{where}"),
        ]
    for ctx, g in growth.items():
        out.append(figure(f"host-bench.c.kv_growth.ctx{ctx}_kinstr", round(g / 1e3, 1),
                          "k instructions", "measured",
                          f"one KV step growth at context {ctx}: the {ctx - 1} cached rows of one "
                          f"KV head requantised (C path, callgrind)"))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=2, help="tokens counted per configuration")
    ap.add_argument("--time-tokens", type=int, default=50, help="tokens timed per configuration")
    ap.add_argument("--contexts", default="1,512,2048")
    ap.add_argument("--formats", default="q4,int8")
    ap.add_argument("--no-numpy", action="store_true", help="leave out the numpy path")
    ap.add_argument("--no-arm", action="store_true", help="leave out the ARMv7 count (qemu-arm)")
    ap.add_argument("--no-record", action="store_true", help="print; do not write docs/results")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--ctx", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--fmt", help=argparse.SUPPRESS)
    ap.add_argument("--regions", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return numpy_child(args)
    need("valgrind", "valgrind")
    need("callgrind_annotate", "valgrind")
    need("gcc", "gcc")
    contexts = [int(c) for c in args.contexts.split(",")]
    formats = args.formats.split(",")
    exe = build_c()
    regions = None if args.no_numpy else build_regions()
    arm = None if args.no_arm else (need(ARM_CC, "gcc-arm-linux-gnueabihf"),
                                    need("qemu-arm", "qemu-user"), build_arm())[2]
    results, growth = {}, {}
    t0 = time.perf_counter()
    for fmt in formats:
        for ctx in contexts:
            # ARMv7 and numpy at every context for the first format, at 512 for the others
            main_cfg = fmt == formats[0] or ctx == 512
            paths = ["c"] + ([] if args.no_arm or not main_cfg else ["armv7"]) \
                + ([] if args.no_numpy or not main_cfg else ["numpy"])
            for path in paths:
                print(f"[host-bench] {path} {fmt} context {ctx} ...", file=sys.stderr, flush=True)
                if path == "armv7":
                    res = arm_kernels(arm_path(arm, ctx, fmt, 1))
                elif path == "c":
                    res = c_path(exe, ctx, fmt, args.tokens, max(args.time_tokens, 200))
                    if fmt == formats[0]:
                        growth[ctx] = res["growth"]
                else:
                    res = numpy_path(ctx, fmt, args.tokens, args.time_tokens, regions)
                results[(path, fmt, ctx)] = res
    print(table(results))
    print()
    print(kernel_table(results, 512 if 512 in contexts else contexts[0]))
    c512 = results.get(("c", formats[0], 512))
    if c512:
        tot = c512["total"] / 1e6
        print(f"\n[host-bench] goal: <= {GOAL_MINSTR} M instructions per token at context 512 "
              f"(frames and DMA still to add): C path {tot:.3f} M, "
              f"{'within' if tot <= GOAL_MINSTR else 'ABOVE'} the goal")
    print(f"[host-bench] {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    (OUT / "host_bench.json").write_text(json.dumps(
        {f"{p}.{f}.{c}": r for (p, f, c), r in results.items()}, indent=1) + "\n")
    if not args.no_record:
        from generators.results import record
        path = record("host-bench", figures(results, growth), variant="kernels",
                      command="make host-bench (tools/host_bench.py)",
                      note=f"Instructions: callgrind on this x86-64 machine (C: gcc -O2 "
                           f"-march=x86-64; numpy: python {sys.version.split()[0]}); A9 figures "
                           f"are a model (CPI {A9_CPI} at 650 MHz). Frames and DMA not yet "
                           f"counted.")
        print(f"[host-bench] wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
