"""`make decode`: a SmolLM2-135M-shaped checkpoint (random weights, seeded) on the rtl backend.

    python tools/decode_bench.py [--tokens 2] [--fmt ternary,q4,int8] [--sim verilator]

Writes build/decode/smollm2-135m-random/ (the full shapes: 30 layers, 576/1536, 9/3 heads,
vocab 49,152), converts it per weight format, runs the prompt [1] and N tokens on the golden
backend (tok/s of this machine) and on the rtl backend (the overlay in the PYNQ-Z1
configuration: max_k 2048, max_context 2048, Q4_1 lanes included), and gives per token the
simulated engine cycles and the time of a whole token by the decoder model's one formula
(``generators.report.decoder_model.token_time``): the matrices' and attention's simulated
cycles at 142.857 MHz, each at least its beats' bytes at the 1.97 GB/s DDR wall (a model),
plus the host: make a9-model's Cortex-A9 model of the board's ARMv7 build of the C step for
that format and context (read from docs/results/a9-model.json), beside `make report`'s decoder
model. Figures in docs/results/decode.json (``record("decode", ...)``); a benchmark, not a
test. ``--reuse-engine``: no simulation; the engine cycles and beats recorded in
docs/results/decode.json by the last full run, with today's host model (the host term is a
separate addend of the one formula).

Formats: ``ternary``, ``q4`` (the random float weights quantised to Q4_1 with the runtime's
requantiser, the layers' frames 0x05) and ``int8`` (Q8_0 layer rows x Q8_0 blocks, 0x09); in
q4 and int8 the LM head is Q8_0 rows x Q8_0 blocks (0x09) as chat runs SmolLM2's Q8_0 tied
embedding (convert quantises this checkpoint's float head to Q8_0). Beside the decoder model's
"q4 + q8_0 head" and "int8" rows (the same layouts, x scale tables included).
"""
from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np

from generators.report.decoder_model import (ModelShape, Platform, decoder_row, token_time, weight_format_rows)
from generators.results import figure, load, record

from ..decode.decoder import Decoder
from ..engines import make_backend
from ..model.checkpoint import PYNQ_Z1_ENGINES, load_checkpoint
from ..model.model import convert

REPO = Path(__file__).resolve().parents[3]
FORMATS = ("ternary", "q4", "int8")


def model_tok_s(fmt: str, context: int) -> float:
    """The decoder model's tok/s of this format at ``context`` (attention on the PL)."""
    if fmt == "ternary":         # the decoder model's ternary rows (5 weights per byte)
        return decoder_row(ModelShape(), context, "pl", platform=Platform())["tok_s"]
    row = {"q4": "q4 + q8_0 head", "int8": "int8"}[fmt]
    return next(r for r in weight_format_rows(context=context) if r["format"] == row)["tok_s"]


def run_format(fmt, folder, args, prompt):
    """Golden and rtl runs of one weight format; returns (rows, ok, golden tok/s)."""

    t0 = time.perf_counter()
    ck = load_checkpoint(folder, PYNQ_Z1_ENGINES)
    # the LM head of q4 and int8 as chat runs SmolLM2's: Q8_0 rows x Q8_0 blocks (format 0x09;
    # convert quantises this checkpoint's float head to Q8_0 as the GGUF stores it)
    model = convert(ck, fmt, PYNQ_Z1_ENGINES, notice=None)
    del ck
    beats = sum(len(i) for m in model.matrices.values() for i in m.images) // 8
    print(f"[decode] SmolLM2-135M shapes, random weights, {fmt}"
          f"{' (Q4_1 requantised)' if fmt == 'q4' else ''}"
          f"{', Q8_0 LM head (0x09)' if fmt in ('q4', 'int8') else ''}: converted in "
          f"{time.perf_counter() - t0:.1f} s; matrix frames {beats * 8 / 1e6:.1f} MB per token",
          flush=True)

    # golden on this machine
    gold = Decoder(model, make_backend("golden", model))
    g_tokens, g_times = [], []
    gold.reset()
    logits = None
    for i in range(args.tokens + 1):            # the first step also unpacks the weights
        t0 = time.perf_counter()
        logits = gold.step(prompt[0] if i == 0 else g_tokens[-1])
        g_times.append(time.perf_counter() - t0)
        g_tokens.append(int(np.argmax(logits)))
    g_tokens = g_tokens[:args.tokens]
    g_times = g_times[1:]
    print(f"[decode] {fmt}: golden backend on this machine: {1 / np.mean(g_times):.2f} tok/s "
          f"({np.mean(g_times) * 1e3:.0f} ms per token after the first, which unpacks the "
          f"weights), tokens {g_tokens}", flush=True)

    # rtl
    t0 = time.perf_counter()
    be = make_backend("rtl", model, simulator=args.sim)
    print(f"[decode] rtl backend ({args.sim}, overlay max_k {PYNQ_Z1_ENGINES.max_k}, "
          f"max_context {PYNQ_Z1_ENGINES.max_context}) up in {time.perf_counter() - t0:.1f} s",
          flush=True)
    rows = []
    try:
        dec = Decoder(model, be)
        dec.reset()
        r_tokens = []
        for i in range(args.tokens):
            c0, b0 = dict(be.cycles), dict(be.beats)
            t0 = time.perf_counter()
            logits = dec.step(prompt[0] if i == 0 else r_tokens[-1])
            wall_s = time.perf_counter() - t0
            r_tokens.append(int(np.argmax(logits)))
            c = {k: be.cycles[k] - c0[k] for k in c0}
            b = {k: be.beats[k] - b0[k] for k in b0}
            rows.append(dict(fmt=fmt, token=i + 1, context=dec.pos, id=r_tokens[-1],
                             matrix_cycles=c["matrix"], attention_cycles=c["attention"],
                             matrix_beats=b["matrix"], attention_beats=b["attention"],
                             beats=b["matrix"] + b["attention"], sim_s=wall_s))
            print(f"[decode] {fmt} token {i + 1}: id {r_tokens[-1]}, context {dec.pos}, "
                  f"simulated cycles matrix {c['matrix']:,} attention {c['attention']:,} "
                  f"({wall_s:.0f} s of simulation)", flush=True)
    finally:
        be.close()
    ok = r_tokens == g_tokens
    print(f"[decode] {fmt}: rtl tokens {'equal' if ok else 'DIFFER from'} golden ({r_tokens} "
          f"vs {g_tokens})", flush=True)
    return rows, ok, 1 / np.mean(g_times)


def add_token_time(rows):
    """Each row's time by the decoder model's one formula and the report model's tok/s, after
    every simulation: the host term read from docs/results/a9-model.json for all rows at
    once (a make a9-model that ends during the run leaves no row on the old figures)."""
    for r in rows:
        args = (r["fmt"], r["context"], r["matrix_cycles"], r["matrix_beats"],
                r["attention_cycles"], r["attention_beats"])
        r.update(token_time(*args), model_tok_s=model_tok_s(r["fmt"], r["context"]))


#: the figures of one format and context, decode.<fmt>.ctx<context>.<name>, from its row:
#: (name, the row's field, decimals (None: as it is), unit, label, what (``{field}``s of the
#: row filled in; the configuration follows it), context: {the row's field: decimals})
DECODE_FIGURES = (
    ("matrix_cycles", "matrix_cycles", None, "cycles", "simulated",
     "matrix engine cycles of one token", {}),
    ("attention_cycles", "attention_cycles", None, "cycles", "simulated",
     "attention engine cycles of one token", {}),
    ("host_ms", "host_ms", 2, "ms", "modelled",
     "the host per token, make a9-model's Cortex-A9 model of the board's ARMv7 build of the C "
     "step on both cores as the board runs it (the worker thread's halves; llvm-mca cycles per "
     "block + cache misses + DMA memory (uncached; the results cached, invalidated by range) + "
     "DMA registers; "
     "its error against the write-up's board figures in docs/results/a9-model.json)", {}),
    ("ms", "total_ms", 2, "ms", "modelled",
     "one token: simulated engine cycles at 142.857 MHz (each part at least its bytes at the "
     "1.97 GB/s DDR wall, a model) + the host model",
     {"matrix_ms": 3, "attention_ms": 4, "matrix_bound": None, "beats": None}),
    ("tok_s", "tok_s", 1, "tok/s", "modelled",
     "tokens per second of that time (engines simulated, DDR wall and host modelled)", {}),
    ("model_tok_s", "model_tok_s", 1, "tok/s", "modelled",
     "make report's decoder model at the same context", {}),
)


def _rounded(row, field: str, digits):
    """``row[field]``, rounded to ``digits`` decimals unless ``digits`` is None."""
    return row[field] if digits is None else round(row[field], digits)


def recorded_rows():
    """The rows of the last full make decode from docs/results/decode.json (engine cycles
    and beats as simulated; the beats of each part back from its recorded wall-bound time),
    the golden tok/s and whether rtl equalled golden: what ``--reuse-engine`` recomputes."""
    data = load().get("decode", {})
    figs = {f["key"]: f for f in data.get("figures", [])}
    p = Platform()
    rows, golds, oks = [], {}, {}
    for key, f in figs.items():
        m = re.match(r"^decode\.(\w+)\.ctx(\d+)\.ms$", key)
        if not m:
            continue
        fmt, ctx = m.group(1), int(m.group(2))
        c = f["context"]
        mc = figs[f"decode.{fmt}.ctx{ctx}.matrix_cycles"]["value"]
        ac = figs[f"decode.{fmt}.ctx{ctx}.attention_cycles"]["value"]
        mb = round(c["matrix_ms"] / 1e3 * p.wall_bytes_per_s / p.beat_bytes) \
            if c["matrix_bound"] == "wall" else 0
        rows.append(dict(fmt=fmt, token=len([r for r in rows if r["fmt"] == fmt]) + 1,
                         context=ctx, id="-", matrix_cycles=mc, attention_cycles=ac,
                         matrix_beats=mb, attention_beats=c["beats"] - mb, beats=c["beats"],
                         sim_s=0.0))
        g = figs[f"decode.{fmt}.golden_tok_s"]
        golds[fmt], oks[fmt] = g["value"], "DIFFER" not in g["what"]
    if not rows:
        raise SystemExit("[decode] --reuse-engine: docs/results/decode.json has no recorded "
                         "rows: run make decode")
    origin = data["command"]
    if "--reuse-engine" in origin:          # a recomputation of before: its origin
        origin = data["note"].split("as recorded by ", 1)[1].split("; the host", 1)[0]
    return rows, golds, oks, origin


def record_figures(rows, golds, oks, sim: str, seconds: float, tokens: int = 2,
                   reused: str = ""):
    """docs/results/decode.json: per format and token the simulated cycles and the modelled
    time per token (one formula), the report model's tok/s, golden's tok/s here."""
    figs = []
    for r in rows:
        base = f"decode.{r['fmt']}.ctx{r['context']}"
        what = (f"SmolLM2-135M shapes, random weights, {r['fmt']}"
                + {"q4": " (Q4_1 layers + Q8_0 head)",
                   "int8": " (Q8_0 layers + Q8_0 head)"}.get(r["fmt"], "")
                + f", context {r['context']}, rtl backend ({sim})")
        for name, field, digits, unit, label, text, context in DECODE_FIGURES:
            figs.append(figure(f"{base}.{name}", _rounded(r, field, digits), unit, label,
                               f"{text.format_map(r)}: {what}",
                               **{f: _rounded(r, f, n) for f, n in context.items()}))
    for fmt, v in golds.items():
        figs.append(figure(f"decode.{fmt}.golden_tok_s", round(float(v), 2), "tok/s", "measured",
                           f"the golden backend on this machine (numpy models of the engines, "
                           f"the C host loop), {fmt}; rtl tokens "
                           f"{'equal' if oks[fmt] else 'DIFFER from'} golden"))
    opt = "" if tokens == 2 else f" --tokens {tokens}"
    if reused:
        return record("decode", figs, command="make decode REUSE=1 (python "
                                              "tools/decode_bench.py --reuse-engine)",
                      note=f"engine cycles and beats as recorded by {reused}; the host term "
                           f"of today's docs/results/a9-model.json")
    return record("decode", figs, command=f"make decode (python tools/decode_bench.py "
                                          f"--sim {sim}{opt})",
                  note=f"{seconds:.0f} s in all on this machine")


def print_table(rows, golds, oks, sim: str) -> None:
    print()
    print(f"SmolLM2-135M shapes (random weights), rtl backend on {sim}: engine cycles "
          f"SIMULATED at 142.857 MHz, the two HP ports' beats at the 1.97 GB/s DDR wall and the "
          f"host (make a9-model's Cortex-A9 model of the ARMv7 build) MODELLED, one formula for "
          f"every format; q4 = Q4_1 layer matrices (0x05) + the Q8_0 LM head (0x09), int8 = Q8_0 "
          f"layer matrices and LM head (0x09), beside the report model's rows 'q4 + q8_0 head' "
          f"and 'int8'")
    hdr = ("format", "token", "context", "id", "matrix cycles", "attention cycles", "beats in",
           "matrix ms", "attention ms", "host ms (ARMv7 model)", "tok/s",
           "tok/s (report model)", "sim wall s")
    print(" | ".join(hdr))
    for r in rows:
        print(" | ".join([r["fmt"], f"{r['token']}", f"{r['context']}", f"{r['id']}",
                          f"{r['matrix_cycles']:,}", f"{r['attention_cycles']:,}",
                          f"{r['beats']:,}", f"{r['matrix_ms']:.2f}", f"{r['attention_ms']:.3f}",
                          f"{r['host_ms']:.2f}", f"{r['tok_s']:.1f}", f"{r['model_tok_s']:.1f}",
                          f"{r['sim_s']:.0f}"]))
    for fmt in golds:
        print(f"{fmt}: golden backend on this machine {golds[fmt]:.2f} tok/s; rtl tokens "
              f"{'equal' if oks[fmt] else 'DIFFER from'} golden")

