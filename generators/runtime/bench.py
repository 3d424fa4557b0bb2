"""`make decode`: a SmolLM2-135M-shaped checkpoint (random weights, seeded) on the rtl backend.

    python -m generators.runtime.bench [--tokens 2] [--fmt ternary,q4] [--sim verilator]

Writes build/decode/smollm2-135m-random/ (the full shapes: 30 layers, 576/1536, 9/3 heads,
vocab 49,152), converts it per weight format, runs the prompt [1] and N tokens on the golden
backend (tok/s of this machine) and on the rtl backend (the overlay in the PYNQ-Z1
configuration: max_k 2048, max_context 2048, Q4_1 lanes included), and prints per token the
simulated engine cycles, the tok/s they give at 142.857 MHz with the 1.97 GB/s DDR wall and
the write-up's 4.2 ms of small ops, beside `make report`'s decoder model. A printed figure,
not a test.

Formats: ``ternary`` (the default row), ``q4`` (the random float weights quantised to Q4_1
with the runtime's requantiser, and the LM head as INT8 rows as SmolLM2's GGUF has it: its
Q8_0 tied embedding; beside the decoder model's "q4 + int8 head" row) and ``int8``.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
from generators.contract import DDR_WALL_BYTES_PER_S as WALL, FCLK_HZ as FCLK  # noqa: E402
SMALL_OPS_S = 4.2e-3


def model_tok_s(fmt: str, context: int) -> float:
    """The decoder model's tok/s of this format at ``context`` (attention on the PL)."""
    from generators.report.decoder_model import ModelShape, Platform, decoder_row, \
        weight_format_rows
    if fmt == "ternary":
        return decoder_row(ModelShape(), context, "pl", platform=Platform())["tok_s"]
    row = {"q4": "q4 + int8 head", "int8": "int8"}[fmt]
    return next(r for r in weight_format_rows(context=context) if r["format"] == row)["tok_s"]


def run_format(fmt, folder, args, prompt):
    """Golden and rtl runs of one weight format; returns (rows, ok, golden tok/s)."""
    from . import Decoder, convert, load_checkpoint, make_backend
    from .checkpoint import PYNQ_Z1_ENGINES
    from .model import quantise_matrix

    t0 = time.perf_counter()
    ck = load_checkpoint(folder, PYNQ_Z1_ENGINES)
    model = convert(ck, fmt, PYNQ_Z1_ENGINES, notice=None)
    if fmt == "q4":        # SmolLM2's GGUF: Q4_1 matrices, Q8_0 tied embedding -> INT8 head
        model.matrices["lm_head"] = quantise_matrix(
            "lm_head", ck.tensors["model.embed_tokens.weight"], "int8")
    del ck
    beats = sum(len(i) for m in model.matrices.values() for i in m.images) // 8
    print(f"[decode] SmolLM2-135M shapes, random weights, {fmt}"
          f"{' (Q4_1 requantised, INT8 LM head)' if fmt == 'q4' else ''}: converted in "
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
            t_mat = max(c["matrix"] / FCLK, b["matrix"] * 8 / WALL)
            t_att = max(c["attention"] / FCLK, b["attention"] * 8 / WALL)
            tok_s = 1.0 / (t_mat + t_att + SMALL_OPS_S)
            rows.append((fmt, i + 1, dec.pos, r_tokens[-1], c["matrix"], c["attention"],
                         b["matrix"] + b["attention"], t_mat * 1e3, t_att * 1e3, tok_s,
                         model_tok_s(fmt, dec.pos), wall_s))
            print(f"[decode] {fmt} token {i + 1}: id {r_tokens[-1]}, context {dec.pos}, "
                  f"simulated cycles matrix {c['matrix']:,} attention {c['attention']:,} "
                  f"({wall_s:.0f} s of simulation)", flush=True)
    finally:
        be.close()
    ok = r_tokens == g_tokens
    print(f"[decode] {fmt}: rtl tokens {'equal' if ok else 'DIFFER from'} golden ({r_tokens} "
          f"vs {g_tokens})", flush=True)
    return rows, ok, 1 / np.mean(g_times)


def main(argv=None) -> int:
    from .synthetic import SMOLLM2_135M, write_checkpoint

    ap = argparse.ArgumentParser(prog="python -m generators.runtime.bench")
    ap.add_argument("--tokens", type=int, default=2)
    ap.add_argument("--fmt", default="ternary,q4",
                    help="weight formats, comma-separated: ternary, q4, int8 (default "
                         "ternary,q4)")
    ap.add_argument("--sim", choices=("verilator", "icarus"), default="verilator")
    ap.add_argument("--out", default=str(REPO / "build" / "decode"))
    args = ap.parse_args(argv)
    fmts = [f for f in args.fmt.split(",") if f]
    bad = [f for f in fmts if f not in ("ternary", "q4", "int8")]
    if bad or not fmts:
        ap.error(f"--fmt: unknown format(s) {bad}; choose from ternary, q4, int8")
    t_all = time.perf_counter()
    folder = Path(args.out) / "smollm2-135m-random"
    if not (folder / "model.safetensors").exists():
        t0 = time.perf_counter()
        write_checkpoint(folder, SMOLLM2_135M, seed=135)
        print(f"[decode] wrote {folder} ({time.perf_counter() - t0:.1f} s)", flush=True)
    prompt = [1]
    rows, oks, golds = [], {}, {}
    for fmt in fmts:
        r, oks[fmt], golds[fmt] = run_format(fmt, folder, args, prompt)
        rows += r
    print()
    print(f"SmolLM2-135M shapes (random weights), rtl backend on {args.sim} (SIMULATED), "
          f"142.857 MHz, two HP ports, DDR wall 1.97 GB/s, small ops 4.2 ms; q4 = Q4_1 layer "
          f"matrices + INT8 LM head (report model row 'q4 + int8 head')")
    hdr = ("format", "token", "context", "id", "matrix cycles", "attention cycles", "beats in",
           "matrix ms", "attention ms", "tok/s (sim)", "tok/s (report model)", "sim wall s")
    print(" | ".join(hdr))
    for r in rows:
        print(" | ".join([r[0], f"{r[1]}", f"{r[2]}", f"{r[3]}", f"{r[4]:,}", f"{r[5]:,}",
                          f"{r[6]:,}", f"{r[7]:.2f}", f"{r[8]:.3f}", f"{r[9]:.1f}",
                          f"{r[10]:.1f}", f"{r[11]:.0f}"]))
    for fmt in fmts:
        print(f"{fmt}: golden backend on this machine {golds[fmt]:.2f} tok/s; rtl tokens "
              f"{'equal' if oks[fmt] else 'DIFFER from'} golden")
    print(f"make decode took {time.perf_counter() - t_all:.0f} s")
    return 0 if all(oks.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
