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

``--prefill B`` (``make chat-rtl PREFILL=2``): prefill on the RTL. The prompt's first len - B
tokens run on golden token by token (no LM head), its last B tokens in ONE B-vector weight pass
(``Decoder.prefill`` with chunk B, the LM head for the last row only) on the overlay top in the
PYNQ-Z1 configuration rendered at ``vectors`` = B (the bitstream is built at 1: docs/vectors.md),
then --tokens decoder steps on the RTL. Two references: the token-by-token golden run at
vectors 1 (plain ``generate``), whose tokens and last-prompt-token logits the RTL run must equal
exactly, and a golden run at vectors B with the same split, whose engine output words of the
RTL passes must be bit-identical. Prints the simulated cycles of the prefill pass and of each
decode step, and exits 1 on any mismatch.
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
    ap.add_argument("--prefill", type=int, default=None, metavar="B",
                    help="the prompt's last B tokens (>= 2) in one B-vector prefill pass on the "
                         "RTL (the top rendered at vectors B), then --tokens steps")
    args = ap.parse_args(argv)
    if args.tokens < 1:
        ap.error(f"--tokens {args.tokens}: at least 1 decoder step on the RTL")
    if args.prefill is not None and args.prefill < 2:
        ap.error(f"--prefill {args.prefill}: a B-vector pass needs B >= 2 (without --prefill "
                 f"the prompt's last step runs on golden)")

    from generators.runtime import Decoder, make_backend
    from generators.runtime.cli.chat import ProgressBackend, load_model, token_beats

    t0 = time.perf_counter()
    model, tok, _ = load_model(None, args.format,
                               say=lambda s: print(f"[chat-rtl] {s}", flush=True))
    prompt = tok.chat_ids(QUESTION)
    n = args.tokens + 1
    if args.prefill is not None:
        return prefill_main(args, model, tok, prompt, time.perf_counter() - t0)
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


def split_prompt(prompt, B: int):
    """(head, tail): the prompt's first len - B tokens and its last B (ValueError when the
    prompt has fewer than B tokens)."""
    prompt = [int(t) for t in prompt]
    if not 1 <= B <= len(prompt):
        raise ValueError(f"--prefill {B}: the prompt has {len(prompt)} tokens")
    return prompt[:len(prompt) - B], prompt[len(prompt) - B:]


def split_generate(dec, prompt, B: int, n: int, switch=None, before=None, after=None):
    """Greedy tokens of ``prompt`` with the prefill split of ``--prefill B``: the head token by
    token without the LM head, then ``switch()`` (the backend that takes over), the tail as ONE
    B-row pass (``dec.prefill(tail, chunk=B)``, the LM head for its last row only), then n - 1
    one-token steps. ``before(k, rows)`` / ``after(k, rows)`` around each pass after the switch
    (k 0: the prefill pass of B rows, k >= 1: decode step k, 1 row). Returns (tokens, the last
    prompt token's logits)."""
    from generators.runtime.host import ops as hostops
    from generators.runtime.decode.decoder import check_prompt
    prompt = check_prompt(prompt, dec.max_context, dec.cfg.vocab_size)
    head, tail = split_prompt(prompt, B)
    dec.reset()
    for t in head:
        dec.step(t, logits=False)
    if switch is not None:
        switch()
    if dec.vectors < B:
        raise ValueError(f"--prefill {B}: the backend's matrix engines take {dec.vectors} "
                         f"vectors")
    ids = []
    for k in range(n):
        if before:
            before(k, B if k == 0 else 1)
        logits = dec.prefill(tail, chunk=B) if k == 0 else dec.step(ids[-1])
        if k == 0:
            first = logits
        if after:
            after(k, B if k == 0 else 1)
        ids.append(hostops.argmax(logits))
    return ids, first


def _frames_equal(t_gold, t_rtl) -> bool:
    return len(t_gold) == len(t_rtl) and all(
        a[:3] == b[:3] and len(a[3]) == len(b[3])
        and all(np.array_equal(x, y) for x, y in zip(a[3], b[3]))
        for a, b in zip(t_gold, t_rtl))


def prefill_main(args, model, tok, prompt, load_s: float) -> int:
    """``--prefill B``: see the module's docstring."""
    from generators.report.decoder_model import token_time
    from generators.runtime import Decoder, make_backend
    from generators.runtime.cli.chat import FCLK_HZ, ProgressBackend, token_beats
    from generators.runtime.engines.rtl import overlay_params

    B, n = args.prefill, args.tokens + 1
    head, tail = split_prompt(prompt, B)
    print(f"[chat-rtl] SmolLM2-135M-Instruct, {args.format} weights, loaded in {load_s:.0f} s; "
          f"prompt {len(prompt)} tokens: {len(head)} on golden, the last {B} in one {B}-vector "
          f"prefill pass on the rtl backend, then {args.tokens} decoder step(s)", flush=True)

    # (a) the token-by-token path: golden at vectors 1, plain generate
    t1 = time.perf_counter()
    one = Decoder(model, make_backend("golden", model, vectors=1))   # (one part: V = 1)
    ref = {}
    gold = list(one.generate(prompt, n, on_token=lambda i, t, lg: ref.setdefault("logits", lg)
                             if i == 0 else None))
    print(f"[chat-rtl] golden, token by token (vectors 1): {gold} {tok.decode(gold)!r} "
          f"({time.perf_counter() - t1:.0f} s on this machine)", flush=True)

    # (b) golden at vectors B with the same split: the engine words of the passes after it
    t_gold, mark_g = [], {}
    t1 = time.perf_counter()
    gv = Decoder(model, make_backend("golden", model, vectors=B), trace=t_gold, x_parts=1)
    gold_b, _ = split_generate(gv, prompt, B, n,
                               switch=lambda: mark_g.setdefault("trace", len(t_gold)))
    print(f"[chat-rtl] golden, vectors {B}, the same split: {gold_b} {tok.decode(gold_b)!r} "
          f"({time.perf_counter() - t1:.0f} s on this machine)", flush=True)

    # the run: the head on golden, then the rtl backend (the top at vectors B) takes over
    t_mix = []
    # B rows a pass: x in one part (llama.cpp's blocks; docs/activations.md section 7)
    dec = Decoder(model, make_backend("golden", model, vectors=1), trace=t_mix, x_parts=1)
    st = {}
    passes = []

    def switch():
        print(f"[chat-rtl] starting the {args.sim} simulation of the overlay top (PYNQ-Z1 "
              f"configuration: max_k {model.engines.max_k}, max_context "
              f"{model.engines.max_context}, rendered at vectors {B})", flush=True)
        tb = time.perf_counter()
        be = make_backend("rtl", model, simulator=args.sim,
                          params=dict(overlay_params(model.engines), vectors=B))
        st["be"] = be
        if be.plan.vectors != B:
            raise RuntimeError(f"the rendered top takes {be.plan.vectors} vectors, not {B}")
        print(f"[chat-rtl] simulation up in {time.perf_counter() - tb:.0f} s; "
              f"{token_beats(model, dec.pos, rows=B) / 1e6:.1f} M beats in the prefill pass, "
              f"{token_beats(model, dec.pos + B) / 1e6:.1f} M per decode step", flush=True)
        st["rtl"] = ProgressBackend(be, model, out=sys.stdout)
        st["sim_t0"] = time.perf_counter()
        dec.be = st["rtl"]
        st["trace"] = len(t_mix)

    def counts():
        be = st["be"]
        return (time.perf_counter(), be.cycles["matrix"], be.cycles["attention"],
                be.beats["matrix"], be.beats["attention"])

    def before(k, rows):
        rtl = st["rtl"]
        rtl.next_token()
        rtl.token = k                    # the bar's "step 0": the prefill pass
        rtl.total = token_beats(model, dec.pos, rows=rows)
        st["mark"] = counts()
        st["context"] = dec.pos

    def after(k, rows):
        a, b = st["mark"], counts()
        passes.append(dict(rows=rows, context=st["context"], seconds=b[0] - a[0],
                           matrix=b[1] - a[1], attention=b[2] - a[2], mbeats=b[3] - a[3],
                           abeats=b[4] - a[4], bar=st["rtl"].done, total=st["rtl"].total))

    try:
        ids, logits = split_generate(dec, prompt, B, n, switch=switch, before=before,
                                     after=after)
    finally:
        if "be" in st:
            st["be"].close()
    sim_s = time.perf_counter() - st["sim_t0"]
    print()
    tail_g, tail_r = t_gold[mark_g["trace"]:], t_mix[st["trace"]:]
    words = sum(len(w) for e in tail_r for w in e[3])
    same_words = _frames_equal(tail_g, tail_r)
    same_tokens = ids == gold == gold_b
    same_logits = bool(np.array_equal(logits, ref["logits"]))
    print(f"[chat-rtl] rtl: {ids} {tok.decode(ids)!r}")
    print(f"[chat-rtl] tokens equal to golden token by token: {same_tokens}; the last prompt "
          f"token's logits ({len(logits):,}) bit-identical to it: {same_logits}")
    print(f"[chat-rtl] engine output words of the {len(passes)} rtl pass(es) "
          f"({len(tail_r)} engine calls, {words:,} words) bit-identical to golden at vectors "
          f"{B}: {same_words}")
    for k, p in enumerate(passes):
        tt = token_time(args.format, p["context"] + p["rows"], p["matrix"], p["mbeats"],
                        p["attention"], p["abeats"])
        cyc = p["matrix"] + p["attention"]
        beats = (f"{p['mbeats'] + p['abeats']:,} beats (progress bar {p['bar']:,} of "
                 f"{p['total']:,})")
        if k == 0:
            ms = tt["matrix_ms"] + tt["attention_ms"] + p["rows"] * tt["host_ms"]
            print(f"[chat-rtl] rtl prefill pass ({p['rows']} prompt tokens, positions "
                  f"{p['context']}..{p['context'] + p['rows'] - 1}, one {p['rows']}-vector "
                  f"weight pass): {cyc:,} simulated cycles (matrix {p['matrix']:,}, attention "
                  f"{p['attention']:,}; {cyc / FCLK_HZ * 1e3:.2f} ms at 142.857 MHz), {beats}; "
                  f"matrices {tt['matrix_ms']:.2f} ms ({tt['matrix_bound']}-bound), attention "
                  f"{tt['attention_ms']:.3f} ms, host {p['rows']} x {tt['host_ms']:.2f} ms "
                  f"(Cortex-A9 model) = {ms:.2f} ms; {p['seconds']:.0f} s of {args.sim} "
                  f"simulation")
        else:
            print(f"[chat-rtl] rtl step {k} (token {k + 1}): {cyc:,} simulated cycles (matrix "
                  f"{p['matrix']:,}, attention {p['attention']:,}), {beats}; matrices "
                  f"{tt['matrix_ms']:.2f} ms ({tt['matrix_bound']}-bound), attention "
                  f"{tt['attention_ms']:.3f} ms, host {tt['host_ms']:.2f} ms (Cortex-A9 model) "
                  f"= {tt['tok_s']:.2f} tok/s; {p['seconds']:.0f} s of {args.sim} simulation")
    print(f"[chat-rtl] simulation wall time {sim_s:.0f} s (the rtl backend's start to its "
          f"last pass)")
    loop = dec.loop_now()
    print(f"[chat-rtl] the host loop of the rtl run: {loop} ("
          + ("tph_step_rows for the B-row pass, tph_step for the steps" if loop == "c" else
             "Decoder.step_rows and Decoder.step in Python") + ")")
    ok = same_tokens and same_logits and same_words
    record_prefill(args, passes, same_tokens=same_tokens, same_logits=same_logits,
                   same_words=same_words, words=words, calls=len(tail_r), sim_s=sim_s,
                   ids=ids, prompt=len(prompt), loop=loop)
    return 0 if ok else 1


def record_prefill(args, passes, *, same_tokens, same_logits, same_words, words, calls, sim_s,
                   ids, prompt, loop="python") -> None:
    """docs/results/decode-chat-rtl-prefill-<format>.json: the figures of this run (a
    mismatch is recorded too, as "differ")."""
    from generators.report.decoder_model import token_time
    from generators.results import figure, record
    fmt, B = args.format, args.prefill
    k = f"decode.chat_rtl.prefill.{fmt}"
    eq = {True: "equal", False: "differ"}
    p0 = passes[0]
    ctx = dict(format=fmt, vectors=B, prompt_tokens=prompt, decode_steps=len(passes) - 1,
               simulator=args.sim, tokens=ids, host_loop=loop)
    figs = [
        figure(f"{k}.pass_cycles", p0["matrix"] + p0["attention"], "cycles", "simulated",
               f"SmolLM2-135M ({fmt}) on the rtl backend: the prompt's last {B} tokens in one "
               f"{B}-vector prefill pass (LM head for the last row), the PYNQ-Z1 overlay "
               f"rendered at vectors {B}", matrix=p0["matrix"], attention=p0["attention"],
               beats=p0["mbeats"] + p0["abeats"], **ctx),
    ]
    for n, p in enumerate(passes[1:], 1):
        tt = token_time(fmt, p["context"] + 1, p["matrix"], p["mbeats"], p["attention"],
                        p["abeats"])
        figs += [
            figure(f"{k}.step{n}_cycles", p["matrix"] + p["attention"], "cycles", "simulated",
                   f"decode step {n} on the rtl backend after that prefill pass",
                   matrix=p["matrix"], attention=p["attention"], context=p["context"] + 1),
            figure(f"{k}.step{n}_tok_s", round(tt["tok_s"], 2), "tok/s", "modelled",
                   f"decode step {n}: the simulated cycles at 142.857 MHz, the DDR wall and "
                   f"the Cortex-A9 host model (decoder_model.token_time)")]
    figs += [
        figure(f"{k}.tokens", eq[same_tokens], "", "measured",
               "the rtl run's tokens against golden token by token (vectors 1)"),
        figure(f"{k}.logits", eq[same_logits], "", "measured",
               "the last prompt token's logits of the rtl prefill pass against golden token "
               "by token (vectors 1), bit for bit"),
        figure(f"{k}.words", words, "words", "measured",
               f"engine output words of the rtl passes compared with golden at vectors {B} "
               f"and the same split", engine_calls=calls),
        figure(f"{k}.words_equal", eq[same_words], "", "measured",
               "those words bit-identical"),
        figure(f"{k}.sim_wall_s", round(sim_s), "s", "measured",
               f"wall time of the {args.sim} simulation on this shared 2-core machine (the "
               f"rtl backend's start, with its build, to its last pass)"),
    ]
    cmd = f"make chat-rtl FORMAT={fmt} PREFILL={B} TOKENS={args.tokens}" + \
        (f" SIM={args.sim}" if args.sim != "verilator" else "")
    path = record("decode", figs, command=cmd, variant=f"chat-rtl-prefill-{fmt}")
    print(f"[chat-rtl] recorded {path}")


if __name__ == "__main__":
    sys.exit(main())
