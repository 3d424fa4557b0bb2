#!/usr/bin/env python3
"""make quality: what the engines' numerics cost the real SmolLM2-135M-Instruct, per weight
format and per host precision, with standard errors that say which differences are real.

The text: the public-domain passages of docs/data/ (README there; EVAL below), each run from an
empty KV cache at position 0 with teacher forcing, chat-template free. Per row, over every
passage's next tokens:

* mean log-likelihood (nats per token) and its standard error (batch means: blocks of BLOCK
  tokens within a passage, so that runs of correlated tokens count once),
* agreement: the argmax is the float model's argmax; top-1: the argmax is the text's token,

and per format the paired difference float32 host ops - float64 host ops (``hostops.use(
"float64")``: the same operations in the same order in float64) with its standard error, and
each row against the float model. Rows: the float64 reference of tests/llama_reference.py (its
own reader and forward pass; float weights, float activations), and the engines on the golden
backend (bit-exact with the RTL: INT8 activations, INT8 KV cache, fixed-point attention) with
INT8 and Q4_1 weights, each with the host ops in float32 (the runtime's, C = numpy bit for bit)
and in float64, run by ``generators.runtime.model.forced`` (Decoder.step's bits for a whole text at
once). The weight-only rows (INT8 and ternary weights with float activations; ternary on the
engines) run over the Gettysburg Address alone. The tok/s columns are make report's DDR-wall
model (generators.report.decoder_model, context 512: every weight byte and the INT8 KV cache
read once at 1.97 GB/s), and in brackets with the host: make a9-model's Cortex-A9 model of
that format's host work on the ARMv7 build (decoder_model.host_ms).

Beside each row's teacher-forced columns the table shows what a user reads, free-running:
make answers' recorded figures for the same numerics (docs/results/answers.json, read, not
measured here; the header names the record's commit and says when the engines' sources changed
since): the tokens of the greedy answers to the shipped prompts before they leave the float64
pass's, and the answers equal to its in full (the engines' float32 rows, llama.cpp's row; the
float64 reference is both columns' reference).

``--sweep --policies ''`` (make quality-dither) runs the dither part alone, recorded apart
(docs/results/quality-dither.json). ``--sweep`` (make quality-sweep) adds what make quality has no time for: every engine row again
with the RMSNorm weights moved by one float32 ulp at random (``--dither N`` runs, make's
DITHER=N; 0: the KV policies alone; their spread is the numerics' own noise, reported as a
standard error), and the KV-cache step policies
(running absmax; steps calibrated at conversion on generators/runtime/kv_calibration.txt, with
margins and calibration lengths; growth with headroom) with the CPU's worst-token KV bytes.

    python tools/quality.py [--formats int8,q4] [--tokens N] [--sweep] [--dither N]
"""
from __future__ import annotations

import argparse
import copy
import hashlib
import json
import math
import os
import re
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # one thread: 2x faster on 2 shared cores
import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

DATA = REPO / "docs" / "data"
#: the evaluation passages (docs/data/README.md: sources); each starts at position 0
EVAL = ("gettysburg.txt", "pride-and-prejudice-1.txt", "frankenstein-letter-1.txt",
        "moby-dick-1.txt")
OUT = REPO / "build" / "quality"
CONTEXT = 512
BLOCK = 32
FORMAT_NAMES = {"int8": "Q8_0 rows (the file's Q4_1 requantised per 32), the file's Q8_0 head",
                "ternary": "ternary, absmean",
                "q4": "Q4_1 as stored (the file's), the file's Q8_0 head"}
ENGINES = ("engines (golden = RTL): INT8 activations, one step per vector, INT8 KV, fixed-point "
           "softmax")
#: per engine format, what its rows run (int8: Q8_0 rows x Q8_0 activation blocks of 32, 0x09;
#: q4: the layers' Q4_1 rows x Q8_1 blocks of 32, 0x05, the LM head Q8_0 x Q8_0 blocks, 0x09)
ENGINE_NUMERICS = {"ternary": ENGINES,
                   "int8": "engines (golden = RTL): Q8_0 rows x Q8_0 activation blocks of 32 "
                           "(0x09, the LM head too), INT8 KV, fixed-point softmax",
                   "q4": "engines (golden = RTL): the layers' Q4_1 rows x Q8_1 activation "
                         "blocks of 32 (0x05), the LM head Q8_0 rows x Q8_0 blocks (0x09), "
                         "INT8 KV, fixed-point softmax"}
#: the "-kv16" rows: the same images on the INT16-KV attention engine (make answers' rows of
#: the same names: EngineConfig.with_kv_bits(16))
for _f in ("int8", "q4"):
    FORMAT_NAMES[f"{_f}-kv16"] = FORMAT_NAMES[_f]
    ENGINE_NUMERICS[f"{_f}-kv16"] = ENGINE_NUMERICS[_f].replace(
        "INT8 KV, fixed-point softmax", "INT16 KV (the calibrated steps x 127 / 32767), the "
        "attention engine with 16-bit K and V (exp table 21 bits, Z 16 fraction bits)")
#: the free-running rows of make answers (docs/results/answers.json) beside each row of the
#: table: the row's kind -> the answers row (the engines' rows with the runtime's float32 host
#: ops; make answers runs no float64 host ops)
FREE_RUNNING = {"reference-float": "float64", "engines-int8": "int8", "engines-q4": "q4",
                "engines-int8-kv16": "int8-kv16", "engines-q4-kv16": "q4-kv16",
                "llamacpp": "llamacpp"}


def log(msg: str) -> None:
    print(f"[quality] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- statistics

def blocks(n_per_passage, block: int = BLOCK):
    """Block index of every token: blocks of ``block`` tokens within each passage (a short
    last block joins the one before)."""
    out, b = [], 0
    for n in n_per_passage:
        k = max(1, n // block)
        out.append(b + np.minimum(np.arange(n) // block, k - 1))
        b += k
    return np.concatenate(out)


def mean_se(values, blk) -> tuple:
    """Mean over tokens and its standard error by batch means: the blocks' means (weighted by
    their sizes) as the independent samples."""
    v = np.asarray(values, np.float64)
    nb = int(blk.max()) + 1
    cnt = np.bincount(blk, minlength=nb).astype(np.float64)
    bm = np.bincount(blk, weights=v, minlength=nb) / cnt
    m = float(v.mean())
    w = cnt / cnt.sum()
    var = float(np.sum(w ** 2 * (bm - m) ** 2)) * nb / max(nb - 1, 1)
    return m, math.sqrt(var)


# --------------------------------------------------------------------------- the rows

def wall_rows():
    """bytes per weight -> tok/s at the DDR wall, and with the host (make a9-model's
    Cortex-A9 model of that format's host work: decoder_model.host_ms), from the report's
    decoder model."""
    from generators.report.decoder_model import ModelShape, Platform, attention_costs, \
        host_ms, matrices, wall_bound
    s, p = ModelShape(), Platform()
    weights = sum(m["weights"] for m in matrices(s))
    kv = attention_costs(s, CONTEXT, "cpu", p)["bytes"]

    def row(bpw, fmt, kv_bytes=1):
        wall_s = (weights * bpw + kv * kv_bytes) / p.wall_bytes_per_s
        host_s = host_ms(fmt, CONTEXT, p) / 1e3
        return dict(bytes_per_weight=bpw, weight_mb=weights * bpw / 1e6,
                    wall_tok_s=1 / wall_s, bound_tok_s=1 / (wall_s + host_s))

    # fp16 and the file's Q4_1 (llama.cpp's rows) with the host of the nearest engine format
    # the engines' formats as they run (302338b): int8 Q8_0 rows (34 bytes per 32 weights:
    # 32 codes and an fp16 step), q4 the file's Q4_1 layers (20 bytes per 32) and its Q8_0 head
    q8_0 = 34 / 32
    out = {"fp16": row(2.0, "int8"), "q4_1": row(20 / 32, "q4"), "int8": row(q8_0, "int8"),
           "ternary": row(1 / 5, "ternary")}
    head = sum(m["weights"] for m in matrices(s) if m["name"] == "lm_head")
    out["q4"] = row(((weights - head) * 20 / 32 + head * q8_0) / weights, "q4")
    # the INT16-KV rows: the same weights, the cache's read twice INT8's (2 bytes a code); their
    # host term is the INT8-KV step's (make a9-model models INT8-KV images only), optimistic by
    # the INT16 rows the CPU writes: 11,520 B more a token, not modelled
    out["int8-kv16"] = row(q8_0, "int8", kv_bytes=2)
    out["q4-kv16"] = row(out["q4"]["bytes_per_weight"], "q4", kv_bytes=2)
    # ternary's the same figure as make report's (its rows' bytes are the decoder model's)
    wb = wall_bound(ModelShape(weights_per_byte=5), CONTEXT, p)
    assert abs(wb["bound_tok_s"] - out["ternary"]["bound_tok_s"]) < 1e-9 * wb["bound_tok_s"]
    return out


def dithered(model, seed: int):
    """The model with every RMSNorm weight moved by one float32 ulp, up or down at random: a
    perturbation of the size of float32 rounding, to see how far the engines' numerics move
    the log-likelihood for reasons that are not the numerics' quality (the noise floor)."""
    rng = np.random.default_rng(seed)
    m = copy.copy(model)
    m.norms = {}
    for k, w in model.norms.items():
        w32 = np.asarray(w, np.float32)
        away = np.where(rng.random(w32.shape) < 0.5, -np.inf, np.inf).astype(np.float32)
        m.norms[k] = np.nextafter(w32, away).astype(np.float64)
    return m


_SOURCES = b""


def _key(*parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(json.dumps(p).encode() if not isinstance(p, bytes) else p)
    return h.hexdigest()[:16]


def reference_rows(path, passages, weights: str):
    """The float64 reference over the passages: per passage its next tokens' log-likelihood
    and argmax. Cached in build/quality/ by the token ids, the file and the reference's source
    (it does not depend on the engines)."""
    from llama_reference import Reference
    key = _key([ids for _, ids in passages], path.name, path.stat().st_size, weights,
               (REPO / "tests" / "llama_reference.py").read_bytes())
    cf = OUT / f"reference-{weights}-{key}.npz"
    if cf.is_file():
        d = np.load(cf, allow_pickle=False)
        return [(d[f"ll{i}"], d[f"am{i}"]) for i in range(len(passages))]
    t0 = time.perf_counter()
    ref = Reference.from_gguf(path, weights)
    out = []
    for name, ids in passages:
        lg = ref.logits(ids)[:-1]
        out.append((_ll(lg, ids), np.argmax(lg, axis=1)))
        log(f"reference ({weights} weights) {name}: {time.perf_counter() - t0:.0f} s")
    np.savez(cf, **{f"ll{i}": o[0] for i, o in enumerate(out)},
             **{f"am{i}": o[1] for i, o in enumerate(out)})
    return out


def _ll(logits, ids):
    from generators.runtime.model.forced import log_softmax_at
    return log_softmax_at(logits, np.asarray(ids[1:], np.int64))


def _source_hash() -> bytes:
    """What the engine rows depend on besides their inputs: the runtime, the golden models and
    the host kernels' sources."""
    h = hashlib.sha256()
    for pat in ("generators/runtime/**/*.py", "generators/runtime/host/csrc/*.[ch]",
                "generators/golden/*.py", "generators/packing.py"):
        for f in sorted(REPO.glob(pat)):
            h.update(f.name.encode() + f.read_bytes())
    return h.digest()


def engine_rows(model, passages, precision: str, label: str, kv=None, kv_key="model"):
    """The engines (golden) over the passages with the host ops in ``precision`` ("float32":
    the runtime's path; "float64"): per passage (ll, argmax, kv bytes per token, requant
    events, values clipped). ``kv``: a callable (n tokens) -> KVCache for another step policy,
    ``kv_key`` its name. Cached in build/quality/rows/ by everything the rows depend on (the
    ids, the format, the norms, the KV steps and policy, the precision, the sources)."""
    from generators.runtime.decode.decoder import default_x_parts
    from generators.runtime.host import ops as hostops
    from generators.runtime.model.forced import Forced
    steps = model.kv_steps
    # x in the decoder's default parts for the model's engines (2 on the PYNQ-Z1 top for
    # int8 and q4: docs/activations.md section 7)
    parts = default_x_parts(model, model.engines.vectors)
    key = _key([ids for _, ids in passages], model.fmt, precision, kv_key, parts,
               b"".join(np.asarray(model.norms[k], np.float64).tobytes()
                        for k in sorted(model.norms)),
               b"" if steps is None else np.asarray(steps).tobytes(), _SOURCES)
    cf = OUT / "rows" / f"{model.fmt}-{precision}-{key}.npz"
    if cf.is_file():
        d = np.load(cf)
        log(f"{label}: reusing {cf.relative_to(REPO)}")
        return [(d[f"ll{i}"], d[f"am{i}"], d[f"kvb{i}"], int(d["ev"][i]), int(d["cl"][i]))
                for i in range(len(passages))]
    run = Forced(model)
    out = []
    t0 = time.perf_counter()
    with hostops.using("float64" if precision == "float64" else "auto"):
        for name, ids in passages:
            r = run(ids, kv=kv(len(ids)) if kv else None, x_parts=parts)
            out.append((r["ll"], r["argmax"], r["kv_bytes"], len(r["kv"].requant_events),
                        int(getattr(r["kv"], "clipped", 0))))
            log(f"{label}, {name} ({len(ids)} tokens): {time.perf_counter() - t0:.0f} s")
    cf.parent.mkdir(parents=True, exist_ok=True)
    np.savez(cf, **{f"ll{i}": o[0] for i, o in enumerate(out)},
             **{f"am{i}": o[1] for i, o in enumerate(out)},
             **{f"kvb{i}": o[2] for i, o in enumerate(out)},
             ev=np.array([o[3] for o in out]), cl=np.array([o[4] for o in out]))
    return out


def summarise(runs, ref, blk, nxt, **extra):
    """One row's figures from its per-passage runs and the float reference's."""
    ll = np.concatenate([r[0] for r in runs])
    am = np.concatenate([r[1] for r in runs])
    m, se = mean_se(ll, blk)
    row = dict(tokens=int(ll.size), mean_ll=m, se=se, ppl=math.exp(-m),
               top1=int(np.sum(am == nxt)), _ll=ll, _am=am, **extra)
    if ref is not None:
        rll = np.concatenate([r[0] for r in ref])
        ram = np.concatenate([r[1] for r in ref])
        row["agree"] = int(np.sum(am == ram))
        row["vs_float"], row["vs_float_se"] = mean_se(ll - rll, blk)
    if runs and len(runs[0]) > 2:
        kvb = np.concatenate([r[2] for r in runs])
        row.update(kv_bytes_max=int(kvb.max()), kv_bytes_mean=float(kvb.mean()),
                   requant_events=int(sum(r[3] for r in runs)),
                   clipped=int(sum(r[4] for r in runs)))
    return row


def diff(a, b, blk):
    return mean_se(a["_ll"] - b["_ll"], blk)


# --------------------------------------------------------------------------- output

def free_running(results_dir=None) -> dict:
    """make answers' recorded free-running figures (docs/results/answers.json; not measured
    here): per answers row (int8, q4, llamacpp) the tokens of its greedy answers before they
    leave the float64 pass's (of the float64 answers' tokens) and the answers equal in full,
    with the record's commit and prompt count; {} when nothing is recorded."""
    from generators.results import load
    d = load(results_dir).get("answers")
    if not d:
        return {}
    figs = {f["key"]: f for f in d["figures"]}
    rows = {}
    for n in ("int8", "q4", "int8-kv16", "q4-kv16", "llamacpp"):
        fol, eq = figs.get(f"answers.{n}.follow_pct"), figs.get(f"answers.{n}.equal")
        if fol is None or eq is None:
            continue
        ctx = fol.get("context", {})
        rows[n] = dict(follow_pct=fol["value"], tokens=ctx.get("tokens"), of=ctx.get("of"),
                       equal=eq["value"])
    m = re.search(r"(\d+) prompts", d.get("note", ""))      # records before the context
    prompts = next((f["context"]["prompts"] for f in figs.values()
                    if "prompts" in f.get("context", {})), int(m.group(1)) if m else None)
    # the answers' sources (tools/answers.py's _sources) changed since the record: say so
    from generators.results import _git
    commit = d["commit"].replace("-dirty", "")
    changed = _git("diff", "--name-only", commit, "HEAD", "--", "generators/runtime",
                   "generators/golden", "generators/contract.py", "generators/packing.py",
                   "generators/q4.py", "generators/q8.py", "tests/llama_reference.py")
    return dict(commit=d["commit"], date=d["date"], prompts=prompts, rows=rows,
                sources_changed=len(changed.split()) if changed else 0)


def _free_cells(fr: dict, kind: str) -> str:
    """The two free-running cells of a row of kind ``kind``."""
    n = FREE_RUNNING.get(kind)
    if n == "float64":
        return "| reference | reference "
    r = fr.get("rows", {}).get(n) if fr else None
    if r is None:
        return "| - | - "
    of = f" of {fr['prompts']}" if fr.get("prompts") else ""
    return f"| {r['follow_pct']} % ({r['tokens']} of {r['of']}) | {r['equal']}{of} "


def table(res: dict) -> str:
    wall = res["wall"]
    fr = res.get("free_running") or {}
    at = (f" (make answers at {fr['commit']}: docs/results/answers.json"
          + (f"; {fr['sources_changed']} of the engines' source files changed since: rerun "
             f"make answers" if fr.get("sources_changed") else "") + ")" if fr else
          " (make answers: nothing recorded)")
    lines = [f"| weights | activations, KV cache, attention | host ops | text (tokens) "
             f"| mean log-likelihood (nats/token) +- SE | vs float model +- SE | perplexity "
             f"| top-1 = text | = float argmax "
             f"| free-running: answer tokens as float64's before the first difference{at} "
             f"| answers equal to float64's in full | bytes/weight "
             f"| tok/s at the DDR wall (ctx {CONTEXT}, + host) |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in res["rows"]:
        w = wall[r["wall"]]
        vs = (f"{r['vs_float']:+.3f} +- {r['vs_float_se']:.3f}" if "vs_float" in r
              else "reference")
        lines.append(f"| {r['weights']} | {r['numerics']} | {r.get('host', '-')} "
                     f"| {r['text']} ({r['tokens']}) | {r['mean_ll']:.3f} +- {r['se']:.3f} "
                     f"| {vs} | {r['ppl']:.4g} | {r['top1']} | {r.get('agree', 'reference')} "
                     f"{_free_cells(fr, r.get('kind', ''))}"
                     f"| {w['bytes_per_weight']:.3g} "
                     f"| {w['wall_tok_s']:.1f} ({w['bound_tok_s']:.1f}) |")
    if res.get("diffs"):
        lines += ["", "| weights | float32 - float64 host ops (nats/token) +- SE | "
                      "significant at 2 SE | worse than float64 by more than 0.01 at 2 SE |",
                  "|---|---:|---|---|"]
        for fmt, d in res["diffs"].items():
            lines.append(f"| {FORMAT_NAMES[fmt]} | {d['diff']:+.4f} +- {d['se']:.4f} "
                         f"| {'yes' if abs(d['diff']) > 2 * d['se'] else 'no'} "
                         f"| {'yes' if d['diff'] + 0.01 < -2 * d['se'] else 'no'} |")
    for title, key in (("dither runs", "dither"), ("KV step policies", "kv"),
                       ("op groups in float64", "ablate")):
        if res.get(key):
            lines += ["", f"{title}:", ""] + [f"* {s}" for s in res[key]["lines"]]
    return "\n".join(lines)


def figures(res: dict, sweep: bool):
    """The measured figures (the tok/s at the wall are make report's model)."""
    from generators.results import figure
    out = []
    if sweep:
        for fig in res.get("sweep_figures", []):
            out.append(figure(**fig))
        return out
    for r in res["rows"]:
        what = f"{r['weights']}; {r['numerics']}; host ops {r.get('host', '-')}; {r['text']}"
        key = f"quality.{r['kind']}"
        out.append(figure(f"{key}.ll", round(r["mean_ll"], 3), "nats/token", "measured",
                          f"mean log-likelihood of the text's next tokens: {what}",
                          tokens=r["tokens"], perplexity=round(r["ppl"], 3)))
        out.append(figure(f"{key}.ll_se", round(r["se"], 4), "nats/token", "measured",
                          f"standard error of that mean (batch means, {BLOCK}-token blocks): "
                          f"{what}"))
        out.append(figure(f"{key}.top1", r["top1"], f"of {r['tokens']}", "measured",
                          f"argmax = the text's next token: {what}"))
        if "agree" in r:
            out.append(figure(f"{key}.agree", r["agree"], f"of {r['tokens']}", "measured",
                              f"argmax = the float64 model's argmax: {what}"))
            out.append(figure(f"{key}.vs_float", round(r["vs_float"], 3), "nats/token",
                              "measured", f"mean log-likelihood minus the float model's, "
                              f"token by token: {what}", se=round(r["vs_float_se"], 4)))
            out.append(figure(f"{key}.vs_float_se", round(r["vs_float_se"], 4), "nats/token",
                              "measured", f"standard error of that difference (batch means, "
                              f"{BLOCK}-token blocks): {what}"))
    for fmt, d in res.get("diffs", {}).items():
        out.append(figure(f"quality.engines-{fmt}.f32_minus_f64", round(d["diff"], 4),
                          "nats/token", "measured",
                          f"mean log-likelihood with the float32 host ops minus with the same "
                          f"ops in float64, token by token ({FORMAT_NAMES[fmt]} weights, "
                          f"engines, {d['tokens']} tokens of docs/data/)", se=round(d["se"], 4)))
        out.append(figure(f"quality.engines-{fmt}.f32_minus_f64_se", round(d["se"], 4),
                          "nats/token", "measured", f"standard error of that difference "
                          f"(batch means, {BLOCK}-token blocks)"))
    return out


# --------------------------------------------------------------------------- main

def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--formats", default="int8,q4,int8-kv16,q4-kv16",
                    help="engine formats (int8, q4, and int8-kv16, q4-kv16: the same on the "
                    "INT16-KV attention engine; ternary runs over the Gettysburg Address alone "
                    "in make quality)")
    ap.add_argument("--f64", default=None,
                    help="the formats whose engine rows run with the float64 host ops too "
                         "(default: those of --formats without -kv16; '' none)")
    ap.add_argument("--tokens", type=int, default=0,
                    help="only the first N tokens of each passage (a quick look; not recorded)")
    ap.add_argument("--sweep", action="store_true",
                    help="make quality-sweep: dither runs and the KV step policies")
    ap.add_argument("--dither", type=int, default=1,
                    help="--sweep: runs per engine row with the RMSNorm weights dithered")
    ap.add_argument("--policies", default="running,calibrated:1.0,calibrated:1.25,"
                    "calibrated:1.5,calibrated:1.25:128,headroom:2",
                    help="--sweep: KV step policies to measure, float32 host ops: running, "
                         "calibrated:MARGIN[:TOKENS], headroom:H")
    ap.add_argument("--passages", default="",
                    help="only these files of EVAL (comma-separated; a quick look, not "
                         "recorded)")
    ap.add_argument("--ablate", default="",
                    help="op groups (generators.runtime.model.forced.F64_GROUPS, comma-separated, or "
                         "'all'): each run alone in float64, the rest in float32, per format: "
                         "which rounding costs what (not recorded)")
    ap.add_argument("--dump-ids", help="write the passages' token ids and the model path "
                                       "(JSON) and stop (for make quality-llamacpp)")
    ap.add_argument("--no-record", dest="record", action="store_false",
                    help="do not write docs/results/quality*.json")
    ap.add_argument("--table", action="store_true",
                    help="print the table of build/quality/quality.json again and stop")
    return ap


PARSER = parser()


def main(argv=None) -> int:
    args = PARSER.parse_args(argv)
    if args.table:
        res = json.loads((OUT / "quality.json").read_text())
        res.setdefault("free_running", free_running())     # a file written before the columns
        t = table(res)
        print(t)
        return 0

    from generators.runtime.model.checkpoint import load_checkpoint
    from generators.runtime.model.gguf import smollm2_path
    from generators.runtime.model.model import PYNQ_Z1_ENGINES, convert
    from generators.runtime.model.tokenizer import Tokenizer

    t_start = time.perf_counter()
    global _SOURCES
    _SOURCES = _source_hash()
    path = smollm2_path()
    OUT.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer.from_gguf(path)
    passages = []
    for f in [p for p in args.passages.split(",") if p] or EVAL:
        if f not in EVAL:
            raise SystemExit(f"--passages: {f!r} is not one of {', '.join(EVAL)}")
        ids = tok.encode((DATA / f).read_text())
        passages.append((f, ids[:args.tokens] if args.tokens else ids))
    if args.dump_ids:
        q = tok.chat_ids("What is the capital of France?")
        Path(args.dump_ids).write_text(json.dumps({
            "model": str(path), "passages": [ids for _, ids in passages],
            "ids": passages[0][1], "paris_prompt": q, "eos": tok.eos_ids}))
        return 0
    n_tok = [len(ids) - 1 for _, ids in passages]
    names = [f for f, _ in passages]
    blk = blocks(n_tok)
    nxt = np.concatenate([np.asarray(ids[1:]) for _, ids in passages])
    text = f"docs/data/ ({len(passages)} passages)"
    log(f"{path.name}: {sum(n_tok)} next tokens in {len(passages)} passages: "
        + ", ".join(f"{f} {n}" for f, n in zip(names, n_tok)))
    res = {"model": path.name, "passages": {f: n for f, n in zip(names, n_tok)},
           "tokens": sum(n_tok), "context": CONTEXT, "block": BLOCK, "wall": wall_rows(),
           "rows": [], "diffs": {}}

    ref = reference_rows(path, passages, "float")
    res["rows"].append(summarise(ref, None, blk, nxt, weights="float (the file's Q4_1, "
                                 "dequantised)", numerics="float64 (reference)", text=text,
                                 wall="fp16", kind="reference-float"))
    fmts = [f for f in args.formats.split(",") if f]
    ckpt = load_checkpoint(path)
    models = {}
    for fmt in fmts:
        base, _, kv = fmt.partition("-")
        engines = PYNQ_Z1_ENGINES.with_kv_bits(16 if kv else 8)
        models[fmt] = convert(ckpt, base, engines=engines, notice=None)
    if args.ablate:
        ablate(args, res, models, passages, ref, blk, nxt)
        args.record = False
    elif args.sweep:
        sweep(args, res, models, passages, ref, blk, nxt, ckpt, tok)
    else:
        f64 = ([f for f in fmts if not f.endswith("-kv16")] if args.f64 is None
               else [f for f in args.f64.split(",") if f])
        for fmt in fmts:
            rows = {}
            for prec in ("float32", "float64") if fmt in f64 else ("float32",):
                runs = engine_rows(models[fmt], passages, prec, f"{fmt} {prec}")
                rows[prec] = summarise(runs, ref, blk, nxt, weights=FORMAT_NAMES[fmt],
                                       numerics=ENGINE_NUMERICS[fmt], host=prec,
                                       text=text, wall=fmt,
                                       kind=f"engines-{fmt}" + ("-f64" if prec == "float64"
                                                                else ""))
                res["rows"].append(rows[prec])
            if "float64" in rows:
                d, se = diff(rows["float32"], rows["float64"], blk)
                res["diffs"][fmt] = dict(diff=d, se=se, tokens=int(blk.size))
        if not args.tokens and names[0] == EVAL[0]:
            weight_only(res, path, passages[:1], ckpt)
        llamacpp_row(res, passages, ref, blk, nxt, text)
    for r in res["rows"]:
        for k in [k for k in r if k.startswith("_")]:
            r.pop(k)
    res["seconds"] = round(time.perf_counter() - t_start)
    name = "quality-sweep" if args.sweep else "quality"
    if not args.sweep:
        res["free_running"] = free_running()
        fr = res["free_running"]
        log(f"free-running columns: make answers' record at {fr['commit']} ({fr['date']}), "
            "docs/results/answers.json" if fr else "free-running columns: no make answers "
            "record (docs/results/answers.json)")
    (OUT / f"{name}.json").write_text(json.dumps(res, indent=2) + "\n")
    t = table(res)
    (OUT / f"{name}.md").write_text(t + "\n")
    print(t)
    log(f"wrote {OUT / name}.json and .md; {res['seconds']} s in all")
    if args.record and not args.tokens and not args.passages:
        # every token of every passage: recorded (a sweep of fewer formats, policies or dither
        # runs too: its figures are per format and policy, and its command says what ran)
        from generators.results import record
        p = record("quality", figures(res, args.sweep), variant=variant(args),
                   command=command(args, argv), note=f"SmolLM2-135M-Instruct over docs/data/ "
                   f"({res['tokens']} next tokens in {len(passages)} passages, teacher forcing); "
                   f"engine rows on the golden numerics (generators.runtime.model.forced = "
                   f"Decoder.step's bits); formats {args.formats}"
                   + ((f"; KV policies {args.policies}" if args.policies else "")
                      + f"; {args.dither} dither run(s)" if args.sweep else "") + f"; {res['seconds']} s"
                   + (f"; its table's free-running columns quote make answers at "
                      f"{res['free_running']['commit']} (docs/results/answers.json)"
                      if res.get("free_running") else ""))
        log(f"wrote {p.relative_to(REPO)}")
    return 0


def variant(args) -> str:
    """The record's variant: "" (make quality), "sweep" (make quality-sweep), "dither" (a sweep
    without KV policies, make quality-dither: its own record, so that it does not replace the
    policies' figures of make quality-sweep)."""
    return ("sweep" if args.policies else "dither") if args.sweep else ""


def command(args, argv) -> str:
    """The command line that made the figures: the make target's when it ran as make runs it
    (``make quality-sweep DITHER=N`` for other dither counts), else the script's own."""
    if args.sweep and not args.policies:
        return f"make quality-dither FORMATS={args.formats} DITHER={args.dither}"
    target = "make quality-sweep" if args.sweep else "make quality"
    dflt = argparse.Namespace(**vars(args))
    dflt.dither, dflt.record = 1, True
    if vars(dflt) == vars(PARSER.parse_args(["--sweep"] if args.sweep else [])):
        return target + (f" DITHER={args.dither}" if args.dither != 1 else "")
    return "python tools/quality.py " + " ".join(a for a in (argv if argv is not None
                                                              else sys.argv[1:])
                                                 if a != "--no-record")


def weight_only(res, path, passages, ckpt):
    """INT8 and ternary weights with float activations (the reference), and ternary on the
    engines, over the first passage (the Gettysburg Address): what the weights alone cost."""
    n = [len(ids) - 1 for _, ids in passages]
    blk = blocks(n)
    nxt = np.asarray(passages[0][1][1:])
    ref = reference_rows(path, passages, "float")
    text = passages[0][0]
    for w in ("int8", "ternary"):
        runs = reference_rows(path, passages, w)
        res["rows"].append(summarise(runs, ref, blk, nxt, weights=FORMAT_NAMES[w],
                                     numerics="float64 (reference)", text=text, wall=w,
                                     kind=f"reference-{w}"))
    from generators.runtime.model.model import convert
    runs = engine_rows(convert(ckpt, "ternary", notice=None), passages, "float32", "ternary")
    res["rows"].append(summarise(runs, ref, blk, nxt, weights=FORMAT_NAMES["ternary"],
                                 numerics=ENGINES, host="float32", text=text, wall="ternary",
                                 kind="engines-ternary"))


def llamacpp_row(res, passages, ref, blk, nxt, text):
    lc = OUT / "llamacpp.json"
    if not lc.is_file():
        return
    d = json.loads(lc.read_text())
    if d.get("passages") != [ids for _, ids in passages]:
        log(f"{lc}: made for other token ids; run make quality-llamacpp again")
        return
    runs = []
    for ids, lg in zip(d["passages"], d["logits"]):
        lg = np.array(lg)
        runs.append((_ll(lg, ids), np.argmax(lg, axis=1)))
    res["rows"].append(summarise(runs, ref, blk, nxt, weights="Q4_1 (the file as it is)",
                                 numerics=f"llama.cpp {d.get('version', '')} (CPU: Q8_1 "
                                          f"activations per 32 in the Q4_1 matmuls, F16 KV "
                                          f"cache)", text=text, wall="q4_1", kind="llamacpp",
                                 answer=d.get("answer")))


def ablate(args, res, models, passages, ref, blk, nxt):
    """Per format: float32, then each op group alone in float64; each row's difference to the
    float32 row, token by token, with its SE."""
    from generators.runtime.decode.decoder import default_x_parts
    from generators.runtime.model.forced import F64_GROUPS, Forced
    groups = F64_GROUPS if args.ablate == "all" else args.ablate.split(",")
    lines = []
    for fmt, model in models.items():
        run = Forced(model)
        parts = default_x_parts(model, model.engines.vectors)
        base = None
        for g in [()] + [(x,) for x in groups]:
            t0 = time.perf_counter()
            runs = []
            for name, ids in passages:
                r = run(ids, f64_ops=g, x_parts=parts)
                runs.append((r["ll"], r["argmax"]))
            row = summarise(runs, ref, blk, nxt)
            base = base or row
            d, se = diff(row, base, blk)
            lines.append(f"{fmt} float64 {'+'.join(g) or '(none: float32)'}: "
                         f"{row['mean_ll']:.4f}, minus float32 {d:+.4f} +- {se:.4f} "
                         f"({time.perf_counter() - t0:.0f} s)")
            log(lines[-1])
    res["ablate"] = {"lines": lines}


# --------------------------------------------------------------------------- the sweep

class HeadroomKV:
    """A candidate KV step policy measured by the sweep (not in the runtime): the running
    absmax, but a growing step jumps to ``h`` times the new row's absmax (fewer growths, each
    still requantising the head's whole cache; up to h x coarser steps)."""

    def __new__(cls, h, *a, **kw):
        from generators.runtime.host import ops as hostops
        from generators.runtime.model.quantise import KVCache

        class _KV(KVCache):
            @staticmethod
            def _grow(row, step):
                new, ratio, grew = hostops.kv_step(row, step)
                if grew:
                    new = hostops.dtype()(new * h)
                    ratio = hostops.dtype()(step / new) if step > 0 else 0
                return new, ratio
        return _KV(*a, **kw)


def sweep(args, res, models, passages, ref, blk, nxt, ckpt, tok):
    """KV step policies, then dither runs (float32 and float64 host ops)."""
    figs = res["sweep_figures"] = []
    sweep_kv(args, res, models, passages, ref, blk, nxt, tok, figs)
    if args.dither > 0:
        sweep_dither(args, res, models, passages, ref, blk, nxt, figs)


def sweep_dither(args, res, models, passages, ref, blk, nxt, figs):
    """Every engine row again with the RMSNorm weights dithered, float32 and float64."""
    lines = []
    for fmt, model in models.items():
        per = {"float32": [], "float64": []}
        for seed in range(0, args.dither + 1):
            m = dithered(model, seed) if seed else model
            for prec in per:
                runs = engine_rows(m, passages, prec, f"{fmt} {prec} dither {seed}")
                per[prec].append(summarise(runs, ref, blk, nxt)["_ll"])
        a32, a64 = np.array(per["float32"]), np.array(per["float64"])
        d_runs = (a32 - a64).mean(axis=1)
        m32, m64 = a32.mean(axis=1), a64.mean(axis=1)
        r = len(d_runs)
        # the token-level SE of the difference of the run-averaged log-likelihoods
        dm, dse = mean_se(a32.mean(axis=0) - a64.mean(axis=0), blk)
        run_se = float(d_runs.std(ddof=1) / math.sqrt(r))
        figs += [
            dict(key=f"quality.sweep.{fmt}.f32_runs", value=round(float(m32.mean()), 4),
                 unit="nats/token", label="measured",
                 what=f"mean log-likelihood, float32 host ops, averaged over {r} runs (the "
                      f"model and {r - 1} with the RMSNorm weights dithered by one ulp)",
                 runs=[round(float(x), 4) for x in m32],
                 se=round(float(m32.std(ddof=1) / math.sqrt(r)), 4)),
            dict(key=f"quality.sweep.{fmt}.f64_runs", value=round(float(m64.mean()), 4),
                 unit="nats/token", label="measured",
                 what="the same with the host ops in float64",
                 runs=[round(float(x), 4) for x in m64],
                 se=round(float(m64.std(ddof=1) / math.sqrt(r)), 4)),
            dict(key=f"quality.sweep.{fmt}.f32_minus_f64", value=round(dm, 4),
                 unit="nats/token", label="measured",
                 what=f"float32 minus float64 host ops over {r} paired runs, "
                      f"{blk.size} tokens each", se_tokens=round(dse, 4), se_runs=round(run_se, 4),
                 runs=[round(float(x), 4) for x in d_runs]),
            dict(key=f"quality.sweep.{fmt}.f32_minus_f64_se", value=round(max(dse, run_se), 4),
                 unit="nats/token", label="measured",
                 what="standard error of that difference: the larger of the batch-means SE "
                      "over tokens and the SE over the runs"),
            dict(key=f"quality.sweep.{fmt}.dither_se", value=round(float(
                 m32.std(ddof=1) / math.sqrt(r)), 4), unit="nats/token", label="measured",
                 what=f"the dither spread as a standard error: SD over the {r} float32 runs' "
                      f"means / sqrt({r})"),
        ]
        lines.append(f"{fmt}: float32 runs {np.round(m32, 4).tolist()}, float64 runs "
                     f"{np.round(m64, 4).tolist()}; float32 - float64 = {dm:+.4f} +- "
                     f"{max(dse, run_se):.4f} (tokens {dse:.4f}, runs {run_se:.4f})")
        log(lines[-1])
    res["dither"] = {"lines": lines}


def sweep_kv(args, res, models, passages, ref, blk, nxt, tok, figs):
    """The KV step policies: quality and the CPU's worst-token KV bytes."""
    from generators.runtime.model.kvcal import CALIBRATION_TEXT, KV_CAL_TOKENS, calibrate_kv_steps
    from generators.runtime.model.quantise import KVCache
    kvl = []
    cal_ids = tok.encode(CALIBRATION_TEXT.read_text(encoding="utf-8"))
    for fmt, model in models.items():
        c = model.config
        base = None
        for pol in [p for p in args.policies.split(",") if p]:
            pol_key = pol
            if pol == "running":
                def kv(n):
                    return KVCache(c.num_hidden_layers, c.num_key_value_heads, n, c.head_dim)
            elif pol.startswith("calibrated:"):
                _, margin, ntok = (pol.split(":") + [str(KV_CAL_TOKENS)])[:3]
                steps = calibrate_kv_steps(model, cal_ids[:int(ntok)], float(margin))
                if model.kv_steps is not None and np.array_equal(steps, model.kv_steps):
                    pol_key = "model"           # the steps convert gave the model

                def kv(n, steps=steps):
                    return KVCache(c.num_hidden_layers, c.num_key_value_heads, n, c.head_dim,
                                   steps=steps)
            elif pol.startswith("headroom:"):
                h = float(pol.split(":")[1])

                def kv(n, h=h):
                    return HeadroomKV(h, c.num_hidden_layers, c.num_key_value_heads, n,
                                      c.head_dim)
            else:
                raise SystemExit(f"unknown KV policy {pol!r}")
            runs = engine_rows(model, passages, "float32", f"{fmt} KV {pol}",
                               kv=None if pol_key == "model" else kv, kv_key=pol_key)
            row = summarise(runs, ref, blk, nxt)
            row["kv_values"] = sum(len(ids) for _, ids in passages) * 2 * \
                c.num_hidden_layers * c.num_key_value_heads * c.head_dim
            if base is None:
                base = row
            d, se = diff(row, base, blk)
            k = pol.replace(":", "-").replace(".", "_")
            figs += [
                dict(key=f"quality.kv.{fmt}.{k}.ll", value=round(row["mean_ll"], 4),
                     unit="nats/token", label="measured",
                     what=f"mean log-likelihood with the KV step policy {pol} "
                          f"({FORMAT_NAMES[fmt]}, float32 host ops)",
                     se=round(row["se"], 4), minus_running=round(d, 4),
                     minus_running_se=round(se, 4), agree=row["agree"],
                     requant_events=row["requant_events"], clipped=row["clipped"]),
                dict(key=f"quality.kv.{fmt}.{k}.worst_token_bytes", value=row["kv_bytes_max"],
                     unit="B", label="measured",
                     what=f"most bytes the CPU wrote into the KV cache in one token (new rows "
                          f"and requantised rows) with the policy {pol}, {FORMAT_NAMES[fmt]}"),
                dict(key=f"quality.kv.{fmt}.{k}.clipped", value=row["clipped"],
                     unit=f"of {row['kv_values']:,} values", label="measured",
                     what=f"K and V values beyond 127 steps (stored as +-127) with the policy "
                          f"{pol}, {FORMAT_NAMES[fmt]}"),
                dict(key=f"quality.kv.{fmt}.{k}.requant_events", value=row["requant_events"],
                     unit="requantisations", label="measured",
                     what=f"KV step growths, each requantising one head's cached K or V, over "
                          f"the text with the policy {pol}, {FORMAT_NAMES[fmt]}"),
                dict(key=f"quality.kv.{fmt}.{k}.minus_running", value=round(d, 4),
                     unit="nats/token", label="measured",
                     what=f"mean log-likelihood with the policy {pol} minus with the running "
                          f"absmax, token by token ({FORMAT_NAMES[fmt]})", se=round(se, 4)),
            ]
            kvl.append(f"{fmt} {pol}: {row['mean_ll']:.4f} +- {row['se']:.4f}, minus running "
                       f"{d:+.4f} +- {se:.4f}, agree {row['agree']}, worst token "
                       f"{row['kv_bytes_max']:,} B of KV writes, {row['requant_events']} "
                       f"requantisations, {row['clipped']} values clipped")
            log(kvl[-1])
    res["kv"] = {"lines": kvl}


if __name__ == "__main__":
    sys.exit(main())
