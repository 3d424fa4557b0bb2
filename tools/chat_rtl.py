#!/usr/bin/env python3
"""make chat-rtl: the real SmolLM2-135M-Instruct (INT8 or Q4_1 weights) on the rtl backend.

The chat prompt "What is the capital of France?" runs on the golden backend (37 tokens; one
token of this model is about 17 M beats on the two ports, hours of simulation for the whole
prompt); the first answer token comes from the prompt's last step. The decoder state (KV cache,
position, tags) then continues on the overlay top in a cocotb co-simulation, driven by the same
DMA host code as the board, for --tokens more decoder steps, with a progress bar of the beats.
A golden run of the same steps gives the reference: the tokens must be the same and every
engine output word of the rtl steps bit-identical. Prints the simulated cycles per token, the
tok/s of the decoder model's formula (the cycles at 142.857 MHz, the DDR wall, the Cortex-A9
host model: generators.report.decoder_model.token_time), and the simulation's wall time.

    python tools/chat_rtl.py [--tokens 2] [--sim verilator|icarus] [--format int8|q4|ternary]

``--format q4`` (``make chat-rtl FORMAT=q4``): the GGUF's own Q4_1 weights on the overlay's Q4_1
lanes (the Q8_0 LM head as INT8 rows), 70 % of the INT8 beats per token (11.9 M).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

QUESTION = "What is the capital of France?"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=2, help="decoder steps on the RTL (>= 1)")
    ap.add_argument("--sim", default="verilator", choices=("verilator", "icarus"))
    ap.add_argument("--format", default="int8", choices=("int8", "q4", "ternary"))
    args = ap.parse_args(argv)

    from generators.runtime import Decoder, make_backend
    from generators.runtime.chat import ProgressBackend, load_model, token_beats

    t0 = time.perf_counter()
    model, tok, _ = load_model(None, args.format,
                               say=lambda s: print(f"[chat-rtl] {s}", flush=True))
    prompt = tok.chat_ids(QUESTION)
    n = args.tokens + 1
    print(f"[chat-rtl] SmolLM2-135M-Instruct, {args.format} weights, loaded in "
          f"{time.perf_counter() - t0:.0f} s; prompt {len(prompt)} tokens on golden", flush=True)

    # golden: the whole answer, with the engine outputs of every step
    t_gold = []
    t1 = time.perf_counter()
    gold = list(Decoder(model, make_backend("golden", model), trace=t_gold).generate(prompt, n))
    golden_s = time.perf_counter() - t1
    print(f"[chat-rtl] golden: {gold} {tok.decode(gold)!r} ({golden_s:.0f} s on this machine, "
          f"{(len(prompt) + n - 1) / golden_s:.2f} decoder steps/s)", flush=True)

    # golden prompt, then the rtl backend takes over for the next steps
    t_mix = []
    dec = Decoder(model, make_backend("golden", model), trace=t_mix)
    rtl = None
    mark = {}
    ids = []
    steps = []

    def on_token(i, t, logits):
        nonlocal rtl
        if i == 0:
            print(f"[chat-rtl] starting the {args.sim} simulation of the overlay top "
                  f"(PYNQ-Z1 configuration: max_k {model.engines.max_k}, max_context "
                  f"{model.engines.max_context})", flush=True)
            tb = time.perf_counter()
            be = make_backend("rtl", model, simulator=args.sim)
            print(f"[chat-rtl] simulation up in {time.perf_counter() - tb:.0f} s; "
                  f"{token_beats(model, dec.pos) / 1e6:.1f} M beats per step", flush=True)
            rtl = ProgressBackend(be, model, total=token_beats(model, dec.pos), out=sys.stdout)
            dec.be = rtl
            mark["trace"] = len(t_mix)
        else:
            steps.append(dict(seconds=time.perf_counter() - mark["t"], context=dec.pos,
                              cycles=sum(rtl.be.cycles.values()) - mark["c"],
                              matrix=rtl.be.cycles["matrix"] - mark["cm"],
                              attention=rtl.be.cycles["attention"] - mark["ca"],
                              mbeats=rtl.be.beats["matrix"] - mark["bm"],
                              abeats=rtl.be.beats["attention"] - mark["ba"]))
        if i < n - 1:
            rtl.next_token()
        mark.update(t=time.perf_counter(), c=sum(rtl.be.cycles.values()),
                    cm=rtl.be.cycles["matrix"], ca=rtl.be.cycles["attention"],
                    bm=rtl.be.beats["matrix"], ba=rtl.be.beats["attention"])

    try:
        for t in dec.generate(prompt, n, on_token=on_token):
            ids.append(t)
    finally:
        if rtl is not None:
            rtl.be.close()
    print()
    ok = ids == gold
    tail_g, tail_r = t_gold[mark["trace"]:], t_mix[mark["trace"]:]
    words = sum(len(w) for e in tail_r for w in e[3])
    same = len(tail_g) == len(tail_r) and all(
        a[:3] == b[:3] and all(np.array_equal(x, y) for x, y in zip(a[3], b[3]))
        for a, b in zip(tail_g, tail_r))
    print(f"[chat-rtl] rtl after the golden prompt: {ids} {tok.decode(ids)!r}")
    print(f"[chat-rtl] tokens equal to golden: {ok}; engine output words of the "
          f"{len(steps)} rtl step(s) ({len(tail_r)} engine calls, {words:,} words) "
          f"bit-identical: {same}")
    from generators.report.decoder_model import token_time
    for k, s in enumerate(steps, 1):
        tt = token_time(args.format, s["context"], s["matrix"], s["mbeats"], s["attention"],
                        s["abeats"])
        print(f"[chat-rtl] rtl step {k} (token {k + 1}): {s['cycles']:,} simulated cycles "
              f"(matrix {s['matrix']:,}, attention {s['attention']:,}); matrices "
              f"{tt['matrix_ms']:.2f} ms ({tt['matrix_bound']}-bound), attention "
              f"{tt['attention_ms']:.3f} ms, host {tt['host_ms']:.2f} ms (Cortex-A9 model) = "
              f"{tt['tok_s']:.2f} tok/s; {s['seconds']:.0f} s of {args.sim} simulation")
    return 0 if ok and same else 1


if __name__ == "__main__":
    sys.exit(main())
