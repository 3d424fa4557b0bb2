#!/usr/bin/env python3
"""make quality: what each weight format costs the real SmolLM2-135M-Instruct, and what it buys.

For a fixed text (docs/data/gettysburg.txt, 320 tokens, public domain) every row runs the model
over the text with teacher forcing and reports, over the text's next tokens:

* mean log-likelihood (nats per token; perplexity = exp(-LL)),
* top-1: the argmax is the text's next token,
* agreement: the argmax is the float64 model's argmax (float weights, float activations),

beside the bytes per weight and the tok/s that format reaches at the DDR wall
(generators.report.decoder_model: every weight byte and the INT8 KV cache read once at
1.97 GB/s, and with the host: make host-bench's Cortex-A9 model of that format's host work,
decoder_model.host_ms; context 512).

Rows: the float64 reference of tests/llama_reference.py (its own reader and forward pass) with
float, INT8 and ternary weights and float activations; the runtime on the golden backend (bit-exact
with the RTL: INT8 activations, INT8 KV cache, fixed-point attention) with INT8, ternary and
Q4_1 weights (``q4``: the file's own Q4_1 matrices as stored on the Q4_1 lane, its Q8_0 tied
embedding as the INT8 LM head; its wall figure counts those bytes); and llama.cpp on the same GGUF file when `make quality-llamacpp` has run
(build/quality/llamacpp.json).

    python tools/quality.py [--tokens N] [--formats int8,ternary,q4] [--dump-ids FILE]
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

TEXT = REPO / "docs" / "data" / "gettysburg.txt"
OUT = REPO / "build" / "quality"
CONTEXT = 512


def log_softmax(z):
    z = np.asarray(z, np.float64)
    m = z.max(axis=-1, keepdims=True)
    return z - m - np.log(np.exp(z - m).sum(axis=-1, keepdims=True))


def metrics(logits, ids, ref_argmax=None):
    """logits[t] predicts ids[t + 1]."""
    nxt = np.asarray(ids[1:])
    lp = log_softmax(logits[:len(nxt)])
    ll = lp[np.arange(len(nxt)), nxt]
    am = np.argmax(logits[:len(nxt)], axis=1)
    r = dict(tokens=int(len(nxt)), mean_ll=float(ll.mean()), ppl=float(math.exp(-ll.mean())),
             top1=int(np.sum(am == nxt)), argmax=am.tolist())
    if ref_argmax is not None:
        r["agree"] = int(np.sum(am == np.asarray(ref_argmax)))
    return r


def wall_rows():
    """bytes per weight -> tok/s at the DDR wall, and with the host (make host-bench's
    Cortex-A9 model of that format's host work: decoder_model.host_ms), from the report's
    decoder model."""
    from generators.report.decoder_model import ModelShape, Platform, attention_costs, \
        host_ms, matrices, wall_bound
    s, p = ModelShape(), Platform()
    weights = sum(m["weights"] for m in matrices(s))
    kv = attention_costs(s, CONTEXT, "cpu", p)["bytes"]

    def row(bpw, fmt):
        wall_s = (weights * bpw + kv) / p.wall_bytes_per_s
        host_s = host_ms(fmt, CONTEXT, p) / 1e3
        return dict(bytes_per_weight=bpw, weight_mb=weights * bpw / 1e6,
                    wall_tok_s=1 / wall_s, bound_tok_s=1 / (wall_s + host_s))

    # fp16 and the file's Q4_1 (llama.cpp's rows) with the host of the nearest engine format
    out = {"fp16": row(2.0, "int8"), "q4_1": row(20 / 32, "q4"), "int8": row(1.0, "int8"),
           "ternary": row(1 / 5, "ternary")}
    # the engines' Q4 row: Q4_1 layer matrices (20 bytes per 32 weights) + the INT8 LM head
    head = sum(m["weights"] for m in matrices(s) if m["name"] == "lm_head")
    out["q4"] = row(((weights - head) * 20 / 32 + head) / weights, "q4")
    for fmt, wpb in (("int8", 1), ("ternary", 5)):      # the same figures as make report's
        wb = wall_bound(ModelShape(weights_per_byte=wpb), CONTEXT, p)
        assert abs(wb["bound_tok_s"] - out[fmt]["bound_tok_s"]) < 1e-9 * wb["bound_tok_s"]
    return out


def engine_logits(model, ids, label):
    from generators.runtime import Decoder, make_backend
    dec = Decoder(model, make_backend("golden", model))
    out = np.empty((len(ids) - 1, model.config.vocab_size))
    t0 = time.perf_counter()
    for t, tid in enumerate(ids[:-1]):
        out[t] = dec.step(tid)
        el = time.perf_counter() - t0
        print(f"\r  {label}: token {t + 1}/{len(ids) - 1}, {el:.0f} s", end="", file=sys.stderr,
              flush=True)
    print(file=sys.stderr)
    return out


def dithered(model, seed: int):
    """The model with every RMSNorm weight moved by one float32 ulp, up or down at random: a
    perturbation of the size of float32 rounding, to see how far the engines' numerics move
    the log-likelihood for reasons that are not the numerics' quality (the noise floor)."""
    import copy
    rng = np.random.default_rng(seed)
    m = copy.copy(model)
    m.norms = {}
    for k, w in model.norms.items():
        w32 = np.asarray(w, np.float32)
        away = np.where(rng.random(w32.shape) < 0.5, -np.inf, np.inf).astype(np.float32)
        m.norms[k] = np.nextafter(w32, away).astype(np.float64)
    return m


def table(res: dict) -> str:
    wall = res["wall"]
    lines = [f"| weights | activations, KV cache, attention | mean log-likelihood (nats/token) "
             f"| perplexity | top-1 = text ({res['tokens']}) | = float64 argmax | bytes/weight "
             f"| tok/s at the DDR wall (ctx {CONTEXT}, + host) |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in res["rows"]:
        w = wall[r["wall"]]
        lines.append(f"| {r['weights']} | {r['numerics']} | {r['mean_ll']:.3f} | {r['ppl']:.4g} "
                     f"| {r['top1']} | {r.get('agree', 'reference')} | {w['bytes_per_weight']:.3g} "
                     f"| {w['wall_tok_s']:.1f} ({w['bound_tok_s']:.1f}) |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=0, help="only the first N tokens of the text")
    ap.add_argument("--formats", default="int8,ternary,q4", help="engine rows ('' for none)")
    ap.add_argument("--fresh", action="store_true",
                    help="recompute the engine rows (default: reuse build/quality/rows/ when it "
                         "was made for the same token ids)")
    ap.add_argument("--dump-ids", help="write the text's token ids and the model path (JSON) "
                                       "and stop (for make quality-llamacpp)")
    ap.add_argument("--dither", type=int, default=0,
                    help="also run the int8 and q4 engine rows N times with the RMSNorm weights "
                         "moved by one float32 ulp at random: the spread of the log-likelihood "
                         "that float32-sized changes cause (make quality: 2)")
    ap.add_argument("--no-record", dest="record", action="store_false",
                    help="do not write docs/results/quality.json (make quality writes it)")
    ap.add_argument("--table", action="store_true",
                    help="print the table of build/quality/quality.json again and stop")
    args = ap.parse_args(argv)
    if args.table:
        t = table(json.loads((OUT / "quality.json").read_text()))
        (OUT / "quality.md").write_text(t + "\n")
        print(t)
        return 0

    from generators.runtime.checkpoint import load_checkpoint
    from generators.runtime.gguf import smollm2_path
    from generators.runtime.model import convert
    from generators.runtime.tokenizer import Tokenizer
    from llama_reference import Reference

    path = smollm2_path()
    OUT.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer.from_gguf(path)
    ids = tok.encode(TEXT.read_text())
    if args.tokens:
        ids = ids[:args.tokens]
    if args.dump_ids:
        q = tok.chat_ids("What is the capital of France?")
        Path(args.dump_ids).write_text(json.dumps({"model": str(path), "ids": ids,
                                                   "paris_prompt": q, "eos": tok.eos_ids}))
        return 0
    print(f"[quality] {path.name}: {len(ids)} tokens of {TEXT.relative_to(REPO)}", file=sys.stderr)

    res = {"model": path.name, "text": str(TEXT.relative_to(REPO)), "tokens": len(ids) - 1,
           "context": CONTEXT, "wall": wall_rows(), "rows": []}
    t0 = time.perf_counter()
    ref = Reference.from_gguf(path)
    ref_logits = ref.logits(ids)[:-1]
    base = metrics(ref_logits, ids)
    ref_argmax = base["argmax"]
    for w, wall in (("float", "fp16"), ("int8", "int8"), ("ternary", "ternary")):
        lg = ref_logits if w == "float" else ref.with_weights(w).logits(ids)[:-1]
        m = metrics(lg, ids, None if w == "float" else ref_argmax)
        m.update(weights={"float": "float (the file's Q4_1, dequantised)",
                          "int8": "INT8, absmax per row", "ternary": "ternary, absmean"}[w],
                 numerics="float64 (reference)", wall=wall, kind=f"reference-{w}")
        res["rows"].append(m)
    print(f"[quality] float64 reference: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    del ref

    fmts = [f for f in args.formats.split(",") if f]
    cache = OUT / "rows"
    cache.mkdir(exist_ok=True)
    ckpt = None
    for fmt in fmts:
        cf = cache / f"engines-{fmt}.npz"
        old = dict(np.load(cf)) if cf.is_file() and not args.fresh else {}
        if "ids" in old and old["ids"].tolist() == ids:
            print(f"[quality] {fmt} on golden: reusing {cf.relative_to(REPO)} (--fresh to "
                  f"recompute)", file=sys.stderr)
            m = metrics(np.array(old["logits"]), ids, ref_argmax)
        else:
            ckpt = ckpt or load_checkpoint(path)
            model = convert(ckpt, fmt, notice=None)
            lg = engine_logits(model, ids, f"{fmt} on golden")
            np.savez(cf, ids=np.array(ids), logits=lg.astype(np.float32))
            m = metrics(lg, ids, ref_argmax)
        if args.dither and fmt in ("int8", "q4"):
            lls = [m["mean_ll"]]
            for seed in range(1, args.dither + 1):
                cd = cache / f"engines-{fmt}-dither{seed}.npz"
                old = dict(np.load(cd)) if cd.is_file() and not args.fresh else {}
                if "ids" in old and old["ids"].tolist() == ids:
                    lg = np.array(old["logits"])
                else:
                    ckpt = ckpt or load_checkpoint(path)
                    model = convert(ckpt, fmt, notice=None)
                    lg = engine_logits(dithered(model, seed), ids,
                                       f"{fmt} on golden, norms dithered (seed {seed})")
                    np.savez(cd, ids=np.array(ids), logits=lg.astype(np.float32))
                lls.append(metrics(lg, ids)["mean_ll"])
            m["dither_ll"] = lls
        m.update(weights={"int8": "INT8, absmax per row", "ternary": "ternary, absmean",
                          "q4": "Q4_1 as stored (the file's), Q8_0 head as INT8 rows"}[fmt],
                 numerics="engines (golden = RTL): INT8 activations per token, INT8 KV, "
                          "fixed-point softmax", wall=fmt, kind=f"engines-{fmt}")
        res["rows"].append(m)
    lc = OUT / "llamacpp.json"
    if lc.is_file():
        d = json.loads(lc.read_text())
        if d.get("ids") == ids:
            m = metrics(np.array(d["logits"]), ids, ref_argmax)
            m.update(weights="Q4_1 (the file as it is)",
                     numerics=f"llama.cpp {d.get('version', '')} (CPU: Q8_1 activations per 32 "
                              f"in the Q4_1 matmuls, F16 KV cache)",
                     wall="q4_1", kind="llamacpp", answer=d.get("answer"))
            res["rows"].append(m)
        else:
            print(f"[quality] {lc}: made for another text; run make quality-llamacpp again",
                  file=sys.stderr)
    for r in res["rows"]:
        r.pop("argmax", None)
    (OUT / "quality.json").write_text(json.dumps(res, indent=2) + "\n")
    t = table(res)
    (OUT / "quality.md").write_text(t + "\n")
    print(t)
    print(f"[quality] wrote {OUT / 'quality.json'} and quality.md", file=sys.stderr)
    if args.record and not args.tokens:          # the whole text only
        from generators.results import record
        from generators.runtime import hostops
        p = record("quality", figures(res), note=f"SmolLM2-135M-Instruct over {res['text']} "
                   f"({res['tokens']} next tokens, teacher forcing); engine rows on the golden "
                   f"backend with the host ops' {hostops.active()} path (C and numpy give the "
                   f"same bits).")
        print(f"[quality] wrote {p.relative_to(REPO)}", file=sys.stderr)
    return 0


def figures(res: dict):
    """The measured figures of each row (the tok/s at the wall are make report's model)."""
    from generators.results import figure
    out = []
    for r in res["rows"]:
        what = f"{r['weights']}; {r['numerics']}"
        key = f"quality.{r['kind']}"
        out.append(figure(f"{key}.ll", round(r["mean_ll"], 3), "nats/token", "measured",
                          f"mean log-likelihood of the text's next tokens: {what}",
                          tokens=r["tokens"], perplexity=round(r["ppl"], 3)))
        out.append(figure(f"{key}.top1", r["top1"], f"of {r['tokens']}", "measured",
                          f"argmax = the text's next token: {what}"))
        if "agree" in r:
            out.append(figure(f"{key}.agree", r["agree"], f"of {r['tokens']}", "measured",
                              f"argmax = the float64 model's argmax: {what}"))
        if "dither_ll" in r:
            v = r["dither_ll"]
            out.append(figure(f"{key}.ll_spread", round(max(v) - min(v), 3), "nats/token",
                              "measured", f"spread (max - min) of the mean log-likelihood over "
                              f"the row and {len(v) - 1} runs with the RMSNorm weights moved by "
                              f"one float32 ulp at random: {what}",
                              runs=[round(x, 4) for x in v]))
    return out


if __name__ == "__main__":
    sys.exit(main())
