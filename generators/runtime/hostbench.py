"""``make host-bench``: what the runtime's host loop costs per token, for the board's budget.

Figures (written to docs/results/host-bench.json through generators.results):

* the memory plan of SmolLM2-135M at context 2048 for Q4_1 (+ the INT8 head), ternary and INT8
  (DMA MiB by region; **modelled**: the plan's arithmetic, which is what the runtime allocates);
* bytes the CPU writes into DMA memory per token at contexts 1, 512 and 2048, split into the
  KV append + attention header/q parts, the x slots, and descriptor fields (**measured**: the
  runtime's own counter on the real SmolLM2 GGUF);
* DMA transfers and register accesses per token (**measured**, the runtime's counters);
* the KV cache on real text: the Gettysburg Address (docs/data/gettysburg.txt) through the
  real SmolLM2, teacher-forced: with its calibrated steps, the most bytes written in a token
  and the values clipped; with the running absmax (the rule before), how many step growths,
  when, and the bytes (**measured**);
* host time per token of the numpy path on this machine at contexts 1, 512, 2048 with the
  engines' time taken out (CPU time of the host's thread less the register model's and the
  golden PL's) (**measured**, x86: a reference for the host loop's own cost, not the A9's);
* the host loop's peak memory (tracemalloc) with the register model and the PL in a process of
  their own, as on the board (**measured**).

    python -m generators.runtime.hostbench [--fmt int8] [--reps 3] [--no-text]
"""
from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
CONTEXTS = (1, 512, 2048)


def plan_figures(figure):
    from .checkpoint import PYNQ_Z1_ENGINES, ModelConfig
    from .plan import MIB, memory_plan, model_shape
    from .synthetic import SMOLLM2_135M
    cfg = ModelConfig(**SMOLLM2_135M)
    out, lines = [], []
    for f in ("q4", "ternary", "int8"):
        p = memory_plan(model_shape(cfg, PYNQ_Z1_ENGINES, f), 2048)
        name = {"q4": "Q4_1 layers + INT8 head", "ternary": "ternary", "int8": "INT8"}[f]
        for r in ("weights", "kv", "frames"):
            out.append(figure(f"host.plan.{f}.{r}_mib", round(p.regions[r].nbytes / MIB, 1),
                              "MiB", "modelled", f"SmolLM2-135M {name}, context 2048: DMA "
                              f"memory region {r} (the memory plan)"))
        out.append(figure(f"host.plan.{f}.dma_mib", round(p.dma_bytes / MIB, 1), "MiB",
                          "modelled", f"SmolLM2-135M {name}, context 2048: all DMA memory "
                          f"(128 MiB of CMA on the Pynq-Z1 image)"))
        msg = p.check(128, float("inf"))
        lines.append(f"  {name:24s} {p.dma_bytes / MIB:6.1f} MiB: "
                     f"{'fits 128 MiB' if msg is None else msg}")
    return out, lines


def forge(dec, L: int, rng) -> None:
    """Put the decoder at position L (L cached positions of random INT8 K/V, steps set): the
    state of a long conversation, without running L tokens."""
    dec.reset()
    if L:
        K, V = dec.kv.K, dec.kv.V
        K[:, :, :L] = rng.integers(-127, 128, K[:, :, :L].shape)
        V[:, :, :L] = rng.integers(-127, 128, V[:, :, :L].shape)
        dec.kv.k_step[:] = 1.0                     # large: no step growth in the timed steps
        dec.kv.v_step[:] = 1.0
        dec.kv.length[:] = L
        dec.pos = L


def host_times(dec, contexts, reps, rng, log):
    """Per context: min over reps of the step's CPU time less the register model's and the
    golden PL's (this thread's CPU time: a loaded machine's other jobs do not count), the CPU
    bytes, transfers and register accesses of one token."""
    rows = {}
    be = dec.be
    for ctx in contexts:
        best = None
        for _ in range(reps):
            forge(dec, ctx - 1, rng)
            n0, w0 = be.transfers_run, sum(d.writes for d in be.dmas)
            r0 = sum(d.reads for d in be.dmas)
            e0, c0 = sum(r.busy_cpu_s for r in be.regs), time.thread_time()
            dec.step(42)
            host = (time.thread_time() - c0) - (sum(r.busy_cpu_s for r in be.regs) - e0)
            row = dict(host_s=host, bytes=dict(dec.token_bytes),
                       transfers=be.transfers_run - n0,
                       writes=sum(d.writes for d in be.dmas) - w0,
                       reads=sum(d.reads for d in be.dmas) - r0)
            if best is None or host < best["host_s"]:
                best = row
        rows[ctx] = best
        log(f"  context {ctx:5d}: host {best['host_s'] * 1e3:7.1f} ms/token (engines excluded), "
            f"CPU bytes {best['bytes']}, {best['transfers']} transfers, register writes "
            f"{best['writes']}, reads {best['reads']}")
    return rows


def fixed_steps_on_text(model, tok, log, max_tokens=0):
    """The Gettysburg Address through the real model with its calibrated KV steps (the
    runtime's rule, docs/runtime.md section 4.5), teacher-forced (no LM head): the bytes the
    CPU writes per token into the KV cache and the attention parts, requantisation included,
    and the K/V values clipped."""
    from . import Decoder, make_backend
    ids = tok.encode((REPO / "docs" / "data" / "gettysburg.txt").read_text())
    if max_tokens:
        ids = ids[:max_tokens]
    dec = Decoder(model, make_backend("golden", model))
    per_token = []
    t0 = time.perf_counter()
    for i, t in enumerate(ids):
        dec.step(int(t), logits=False)
        b = dec.token_bytes
        per_token.append(b["kv"] + b["parts"] + b["requant"])
        if i % 50 == 49:
            log(f"  text, fixed steps: token {i + 1}/{len(ids)}, {time.perf_counter() - t0:.0f} s")
    per_token = np.array(per_token)
    kv = dec.kv
    return dict(tokens=len(ids), max_bytes=int(per_token.max()), min_bytes=int(per_token.min()),
                requant_bytes=int(kv.requantised), clipped=int(kv.clipped),
                values=int(len(ids) * 2 * kv.K.shape[0] * kv.K.shape[1] * kv.head_dim))


def requant_on_text(model, tok, log, max_tokens=0):
    """The Gettysburg Address through the real model, teacher-forced (no LM head), with the
    running absmax (the rule before the calibrated steps; ``model``'s steps set aside): the KV
    step growths (requantisations) by position."""
    import dataclasses
    from . import Decoder, make_backend
    text = (REPO / "docs" / "data" / "gettysburg.txt").read_text()
    ids = tok.encode(text)
    if max_tokens:
        ids = ids[:max_tokens]
    model = dataclasses.replace(model, kv_steps=None)
    dec = Decoder(model, make_backend("golden", model))
    per_token = []
    amax = []                       # per position: max|row| of K and V per (layer, head)
    append = dec.kv.append

    def spy(layer, k, v):
        if layer == 0:
            amax.append(np.zeros((2, model.config.num_hidden_layers, k.shape[0])))
        amax[-1][0, layer] = np.abs(k).max(axis=1)
        amax[-1][1, layer] = np.abs(v).max(axis=1)
        return append(layer, k, v)

    t0 = time.perf_counter()
    for i, t in enumerate(ids):
        dec.kv.append = spy
        dec.step(int(t), logits=False)
        per_token.append(dec.token_bytes["requant"])
        if i % 50 == 49:
            log(f"  text: token {i + 1}/{len(ids)}, {time.perf_counter() - t0:.0f} s")
    ev = dec.kv.requant_events
    pos = np.array([e[3] for e in ev]) if ev else np.zeros(0, int)
    per_token = np.array(per_token)
    out = dict(tokens=len(ids), events=len(ev), bytes=int(per_token.sum()),
               last_event=int(pos.max()) if len(pos) else -1,
               events_after_32=int(np.sum(pos >= 32)), events_after_128=int(np.sum(pos >= 128)),
               tokens_with_requant=int(np.sum(per_token > 0)),
               max_bytes=int(per_token.max(initial=0)),
               max_bytes_after_32=int(per_token[32:].max(initial=0)),
               mean_bytes=float(per_token.mean()))
    out["replay"] = {h: replay(np.array(amax), model.config.head_dim, h) for h in (1.0, 1.25, 2.0)}
    assert out["replay"][1.0]["events"] == out["events"]           # the replay is the cache's
    return out


def replay(amax: np.ndarray, d: int, headroom: float) -> dict:
    """The running-absmax step rule on recorded row maxima (positions, K|V, layer, head): a
    row above 127 x step sets step = headroom x max / 127 and requantises the rows before it
    (headroom 1 is the runtime's rule). Events and bytes requantised."""
    step = np.zeros(amax.shape[1:])
    events = nbytes = 0
    for t in range(amax.shape[0]):
        grow = amax[t] > 127.0 * step
        if t:
            n = int(np.sum(grow & (step > 0)))
            events += n
            nbytes += n * t * d
        step = np.where(grow, headroom * amax[t] / 127.0, step)
    return dict(events=events, bytes=nbytes)


def shape_model(fmt: str):
    """SmolLM2-135M's shapes with zero weights (valid frames) and a random embedding: the host
    loop's memory without loading the real file."""
    from generators.contract import FORMAT_CODES, MATRIX_MAGIC
    from .checkpoint import PYNQ_Z1_ENGINES, ModelConfig
    from .model import EmbeddingRows, Model, QMatrix
    from .plan import model_shape
    from .synthetic import SMOLLM2_135M
    cfg = ModelConfig(**SMOLLM2_135M)
    mats = {}
    for n, s in model_shape(cfg, PYNQ_Z1_ENGINES, fmt).matrices.items():
        imgs = []
        for p in (0, 1):
            a = np.zeros(s.image_bytes[p], np.uint8)
            hdr = MATRIX_MAGIC | s.k << 16 | s.rows[p] << 32 | FORMAT_CODES[s.fmt] << 48
            a[:8] = np.frombuffer(hdr.to_bytes(8, "little"), np.uint8)
            imgs.append(a)
        mats[n] = QMatrix(n, s.fmt, s.k, s.n, np.full(s.n, 0.01), imgs, s.rows)
    norms = {"final": np.ones(cfg.hidden_size)}
    for i in range(cfg.num_hidden_layers):
        norms[f"layers.{i}.input"] = norms[f"layers.{i}.post"] = np.ones(cfg.hidden_size)
    emb = (np.random.default_rng(0).standard_normal((cfg.vocab_size, cfg.hidden_size))
           * 0.05).astype(np.float32)
    return Model(cfg, PYNQ_Z1_ENGINES, fmt, EmbeddingRows.from_float(emb), norms, mats)


def host_peak(context: int = 2048):
    """tracemalloc peak of the host side (backend set-up, decoder, 2 tokens) with the register
    model and the golden PL in their own process."""
    from . import Decoder
    from .rtl import GoldenServerBackend
    m = shape_model("ternary")
    tracemalloc.start()
    try:
        be = GoldenServerBackend(m, context=context, timeout_s=600)
        try:
            list(Decoder(m, be).generate([1, 2], 2))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            be.close()
    finally:
        tracemalloc.stop()
    return peak, be.plan


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fmt", default="int8", help="weight format of the timed runs")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--text-tokens", type=int, default=0, help="only the first N text tokens")
    ap.add_argument("--no-text", action="store_true", help="skip the requantisation run")
    ap.add_argument("--no-record", action="store_true")
    args = ap.parse_args(argv)
    from generators.results import figure, record
    from . import Decoder, make_backend
    from .chat import load_model

    def log(s):
        print(f"[host-bench] {s}", flush=True)

    figs, lines = plan_figures(figure)
    log("memory plan of SmolLM2-135M at context 2048:")
    for line in lines:
        log(line)

    t0 = time.perf_counter()
    model, tok, _ = load_model(None, args.fmt)
    log(f"SmolLM2-135M-Instruct {args.fmt} loaded in {time.perf_counter() - t0:.0f} s")
    dec = Decoder(model, make_backend("golden", model))
    rows = host_times(dec, CONTEXTS, args.reps, np.random.default_rng(0), log)
    kinds = {"kv_parts": ("kv", "parts"), "x": ("x",), "desc": ("desc",)}
    for ctx, r in rows.items():
        for k, parts in kinds.items():
            figs.append(figure(f"host.bytes.{k}.ctx{ctx}", int(sum(r["bytes"][p] for p in parts)),
                               "B", "measured", f"bytes the CPU writes into DMA memory per token "
                               f"at context {ctx}: " + {"kv_parts": "KV append + attention "
                                                        "header/q parts (goal <= 32 KiB)",
                                                        "x": "matrix x slots",
                                                        "desc": "descriptor fields (status "
                                                        "words cleared, K/V lengths)"}[k]))
        figs.append(figure(f"host.time_ms.ctx{ctx}", round(r["host_s"] * 1e3, 1), "ms",
                           "measured", f"host time per token of the numpy path on this x86 "
                           f"machine at context {ctx}, engine time excluded ({args.fmt} "
                           f"SmolLM2, min of {args.reps})"))
    r = rows[CONTEXTS[-1]]
    figs += [figure("host.transfers_per_token", r["transfers"], "transfers", "measured",
                    "DMA transfers per sampled token (5 per layer and port + the LM head)"),
             figure("host.register_writes_per_token", r["writes"], "writes", "measured",
                    "DMA register writes per token (one TAILDESC per channel a transfer uses)"),
             figure("host.register_reads_per_token", r["reads"], "reads", "measured",
                    "DMA register reads per token with an engine that is done when polled "
                    "(DMASR once per channel and transfer; more while the PL works)")]
    from .plan import MIB, memory_plan
    q4, tok4, _ = load_model(None, "q4")
    p4 = memory_plan(q4, 2048)
    mapped = next((h for h in p4.host if h[0].startswith("model: mapped")), None)
    log(f"SmolLM2 Q4_1 image at context 2048: DMA {p4.dma_bytes / MIB:.1f} MiB, host "
        f"{p4.host_bytes / MIB:.1f} MiB; {p4.check() or 'fits 128 MiB CMA and 64 MiB host'}")
    figs += [figure("host.plan.q4.image_host_mib", round(p4.host_bytes / MIB, 1), "MiB",
                    "modelled", "SmolLM2-135M Q4_1 model image at context 2048: host memory "
                    "of the plan (the runtime's items; the image's sections are mapped from "
                    "the file" + (f", {mapped[2].split(' (')[0]}" if mapped else "") + ")"),
             figure("host.plan.q4.image_fits", "fits" if p4.check() is None else "refused", "",
                    "modelled", "SmolLM2-135M Q4_1 model image at context 2048 against 128 MiB "
                    "of CMA and 64 MiB of host memory")]
    if not args.no_text:
        fx = fixed_steps_on_text(q4, tok4, log, args.text_tokens)
        log(f"calibrated KV steps over {fx['tokens']} tokens of the Gettysburg Address: {fx}")
        figs += [figure("host.kvfixed.max_bytes_token", fx["max_bytes"], "B", "measured",
                        f"most bytes the CPU wrote into the KV cache and the attention parts in "
                        f"one token (requantisation included: none) over {fx['tokens']} tokens "
                        f"of the Gettysburg Address, Q4_1 SmolLM2 with its calibrated KV steps "
                        f"(goal <= 32 KiB)", min_bytes=fx["min_bytes"]),
                 figure("host.kvfixed.clipped", fx["clipped"], f"of {fx['values']:,} values",
                        "measured", "K and V values beyond their calibrated step's 127 "
                        "(stored as +-127) over the same text")]
        rq = requant_on_text(q4, tok4, log, args.text_tokens)
        log(f"KV requantisation over {rq['tokens']} tokens of the Gettysburg Address: {rq}")
        figs += [figure("host.requant.events", rq["events"], "step growths", "measured",
                        f"KV step growths (each requantises one head's cached K or V) over "
                        f"{rq['tokens']} tokens of the Gettysburg Address, Q4_1 SmolLM2, with "
                        f"the running absmax (the rule before the calibrated steps)"),
                 figure("host.requant.last_position", rq["last_event"], "", "measured",
                        "the last position at which a KV step grew (Gettysburg)"),
                 figure("host.requant.after_32", rq["events_after_32"], "step growths",
                        "measured", "KV step growths after the first 32 positions (Gettysburg)"),
                 figure("host.requant.bytes_total", rq["bytes"], "B", "measured",
                        "bytes requantised over the whole text (Gettysburg)"),
                 figure("host.requant.max_bytes_token_after_32", rq["max_bytes_after_32"], "B",
                        "measured", "most bytes requantised in one token after position 32 "
                        "(Gettysburg)")]
        for h, r in rq["replay"].items():
            if h != 1.0:
                figs.append(figure(f"host.requant.headroom_{round(h * 100)}.events",
                                   r["events"], "step growths", "measured",
                                   f"the same text replayed with a step {h:g}x the new row's "
                                   f"absmax (not the runtime's rule): step growths "
                                   f"({r['bytes']:,} bytes requantised)"))
    peak, plan = host_peak(2048)
    log(f"host loop peak memory (tracemalloc, ternary SmolLM2 shapes, context 2048): "
        f"{peak:,} bytes; the plan's runtime items: {plan.runtime_host_bytes:,} bytes")
    figs += [figure("host.memory.peak_bytes", peak, "B", "measured",
                    "the host loop's peak memory (tracemalloc: backend set-up, decoder, 2 "
                    "tokens; register model and PL in another process), SmolLM2 shapes, "
                    "context 2048"),
             figure("host.memory.plan_bytes", plan.runtime_host_bytes, "B", "modelled",
                    "the memory plan's host items of the runtime (same configuration)")]
    if not args.no_record:
        path = record("host-bench", figs, command="make host-bench")
        log(f"figures written to {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
