"""``make host-bench``'s measurements that the runtime makes of itself (tools/host_bench.py runs
them, counts instructions with callgrind and qemu-arm, and records every figure in
docs/results/host-bench.json through generators.results):

* the memory plan of SmolLM2-135M at context 2048 for Q4_1 and INT8 (+ the Q8_0 head), and ternary
  (DMA MiB by region; **modelled**: the plan's arithmetic, which is what the runtime allocates);
* the replay backend's recording: one sampled token of the real SmolLM2 on the golden backend,
  its engine words per port (:func:`recorded`, cached in build/host/), and decoders on the
  replay backend at any position (:func:`replay_decoder`: K/V filled, nothing recomputed);
* per token at contexts 1, 512 and 2048 on the replay backend: the bytes the CPU writes into
  DMA memory (KV append + attention header/q parts, x slots, descriptor fields), DMA transfers
  and register accesses (**measured**: the runtime's own counters, C loop; the Python loop's
  are equal, tests/runtime/engines/test_hostloop.py);
* the KV cache on real text: the Gettysburg Address (docs/data/gettysburg.txt) through the
  real SmolLM2, teacher-forced: with its calibrated steps, the most bytes written in a token
  and the values clipped; with the running absmax (the rule before), how many step growths,
  when, and the bytes (**measured**);
* the host loop's peak memory (tracemalloc) with the register model and the PL in a process of
  their own, as on the board (**measured**).
"""
from __future__ import annotations

import dataclasses
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

from generators.contract import MATRIX_MAGIC

from ..decode.decoder import Decoder
from ..engines import make_backend
from ..engines.golden_server import GoldenServerBackend
from ..engines.plan import MIB, memory_plan, model_shape
from ..engines.replay import packets_from_trace, replay_backend
from ..host import ops as hostops
from ..host.ops import rope_tables
from ..model.checkpoint import ModelConfig, PYNQ_Z1_ENGINES
from ..model.conversion import default_image, load_model
from ..model.model import EmbeddingRows, Model, QMatrix, format_code
from ..model.synthetic import SMOLLM2_135M

REPO = Path(__file__).resolve().parents[3]
CONTEXTS = (1, 512, 2048)
OUT = REPO / "build" / "host"
#: the token of the recorded step (position 0) and of every replayed step: SmolLM2's
#: <|im_start|>, the first token of every chat prompt
RECORD_TOKEN = 1
#: the second row's token of the recorded 2-row pass (make host-bench's batched step)
RECORD_TOKEN2 = 2
#: rows of that pass (the PYNQ-Z1 top's vectors)
ROWS = 2


def plan_figures(figure):
    cfg = ModelConfig(**SMOLLM2_135M)
    out, lines = [], []
    for f in ("q4", "ternary", "int8"):
        p = memory_plan(model_shape(cfg, PYNQ_Z1_ENGINES, f), 2048)
        name = {"q4": "Q4_1 layers + Q8_0 head", "ternary": "ternary",
                "int8": "INT8 layers + Q8_0 head"}[f]
        for r in ("weights", "kv", "frames", "results"):
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


def smollm2(fmt: str, say=None):
    """SmolLM2-135M-Instruct's model image in ``fmt`` (converted once into the user cache),
    mapped."""
    return Model.load(default_image(fmt, PYNQ_Z1_ENGINES, say=say))


def recorded(model, fmt: str, log=print, rows: int = 1, logits: bool = True):
    """Per port, the engine words of one SmolLM2 step on the golden backend (of vectors
    ROWS): what the replay backend serves. ``rows`` 1: one sampled token (RECORD_TOKEN at
    position 0, the one-token step's frames); ``rows`` 2: one pass of two rows (RECORD_TOKEN,
    RECORD_TOKEN2 at positions 0 and 1: a batched step's frames); each row with its logits
    or none (``logits=False``: prompt rows, no LM head). Recorded once per image and kind
    (build/host/)."""
    OUT.mkdir(parents=True, exist_ok=True)
    parts = rows_parts(rows)
    path = OUT / (f"replay.rows{rows}{'' if logits else 'p'}.x{parts or 'd'}."
                  f"{Path(str(model.path)).stem}.npz")
    if path.is_file():
        z = np.load(path)
        return [[z[f"w{p}"][a:b] for a, b in zip(z[f"s{p}"][:-1], z[f"s{p}"][1:])]
                for p in (0, 1)]
    t0 = time.perf_counter()
    with hostops.using("numpy"):
        dec = Decoder(model, make_backend("golden", model, vectors=ROWS), trace=[],
                      loop="python", x_parts=parts)
        tokens = [RECORD_TOKEN, RECORD_TOKEN2][:rows]
        if rows == 1:
            dec.step(tokens[0], logits=logits)
        else:
            dec.step_rows([(0, t, logits) for t in tokens])
    packets = packets_from_trace(dec.trace)
    arrays = {}
    for p in (0, 1):
        arrays[f"w{p}"] = np.concatenate(packets[p])
        arrays[f"s{p}"] = np.cumsum([0] + [len(f) for f in packets[p]])
    np.savez(path, **arrays)
    what = "token" if rows == 1 else f"{rows}-row pass"
    log(f"recorded the engine words of one {fmt} SmolLM2 {what} "
        f"{'with' if logits else 'without'} the LM head on golden "
        f"({sum(map(len, packets[0])) + sum(map(len, packets[1])):,} words, "
        f"{time.perf_counter() - t0:.0f} s): {path.relative_to(REPO)}")
    return packets


def fill(dec, L: int) -> None:
    """Put the decoder at position L: L cached positions of INT8 K/V (a fixed pattern) with
    steps of 1: the state of a long conversation, without running L tokens."""
    dec.reset()
    if L:
        for a in (dec.kv.K, dec.kv.V):
            block = a[:, :, :L]
            block[...] = np.resize(np.arange(-127, 128, dtype=np.int8), block.shape)
        dec.kv.k_step[:] = 1.0
        dec.kv.v_step[:] = 1.0
        dec.kv.length[:] = L
        dec.pos = L


def again(dec, L: int) -> None:
    """Back to position L after a step (the same step's work can run again)."""
    dec.kv.length[:] = L
    dec.pos = L


def rows_parts(rows: int):
    """The x parts a recorded pass of ``rows`` rows runs: one row the decoder's default (two
    for int8 and q4 at V = ROWS); a pass of more rows one part each, so that they fit it
    (docs/activations.md section 7)."""
    return 1 if rows > 1 else None


def replay_decoder(model, packets, L: int, loop=None, vectors=None, rows: int = 1):
    """A Decoder on the replay backend at position L (:func:`fill`; ``vectors``: the
    engines', for a recorded B-row pass; ``rows`` > 1: x in one part, as :func:`recorded`
    records such a pass)."""
    dec = Decoder(model, replay_backend(model, packets, vectors=vectors), loop=loop,
                  x_parts=rows_parts(rows))
    fill(dec, L)
    return dec


def token_counts(dec, L: int, rows: int = 1) -> dict:
    """One step at position L (after a warm-up one; ``rows`` > 1: one batched pass of that
    many rows at L .., each with its logits): the CPU's bytes by kind, transfers, TAILDESC
    writes and register accesses (the runtime's counters)."""
    be = dec.be
    tokens = [RECORD_TOKEN, RECORD_TOKEN2][:rows]

    def step():
        if rows == 1:
            dec.step(tokens[0])
        else:
            dec.step_rows([(0, t, True) for t in tokens])
        again(dec, L)

    step()
    n0, t0 = be.transfers_run, be.tail_writes
    w0, r0 = sum(d.writes for d in be.dmas), sum(d.reads for d in be.dmas)
    step()
    return dict(bytes=dict(dec.token_bytes), cache=dict(dec.token_cache),
                transfers=be.transfers_run - n0,
                tails=be.tail_writes - t0, writes=sum(d.writes for d in be.dmas) - w0,
                reads=sum(d.reads for d in be.dmas) - r0)


def count_figures(figure, rows: dict, fmt: str):
    """The per-token counters of :func:`token_counts` at each context as figures."""
    out = []
    kinds = {"kv_parts": ("kv", "parts"), "x": ("x",), "desc": ("desc",), "read": ("read",)}
    what = {"kv_parts": "KV append + attention header/q parts (goal <= 32 KiB)",
            "x": "matrix x slots", "desc": "descriptor fields (status words cleared, K/V "
                                           "lengths)",
            "read": "READ back: the result words (the cached results region, invalidated "
                    "by range first) and the descriptors' STATUS and length words checked "
                    "(uncached)"}
    for ctx, r in rows.items():
        for k, parts in kinds.items():
            verb = "reads from" if k == "read" else "writes into"
            out.append(figure(f"host.bytes.{k}.ctx{ctx}", int(sum(r["bytes"][p] for p in parts)),
                              "B", "measured", f"bytes the CPU {verb} DMA memory per token "
                              f"at context {ctx}: {what[k]} ({fmt} SmolLM2)"))
        c = r["cache"]
        out += [figure(f"host.cache.read.ctx{ctx}", int(c["read"]), "B", "measured",
                       f"bytes of the results the CPU reads per token at context {ctx} from "
                       f"the cached results region (part of host.bytes.read; the rest "
                       f"uncached: STATUS and length words) ({fmt} SmolLM2)"),
                figure(f"host.cache.invalidates.ctx{ctx}", int(c["invalidates"]), "calls",
                       "measured", f"invalidates by range per token at context {ctx}: one "
                       f"per result slot read, exactly its words' lines ({fmt} SmolLM2)"),
                figure(f"host.cache.invalidated.ctx{ctx}", int(c["invalidated"]), "B",
                       "measured", f"bytes invalidated per token at context {ctx} (whole "
                       f"32-byte lines) ({fmt} SmolLM2)")]
    r = rows[max(rows)]
    out += [figure("host.transfers_per_token", r["transfers"], "transfers", "measured",
                   "DMA transfers per sampled token (5 per layer and port + the LM head)"),
            figure("host.register_writes_per_token", r["writes"], "writes", "measured",
                   "DMA register writes per token (one TAILDESC per channel a transfer uses)"),
            figure("host.register_reads_per_token", r["reads"], "reads", "measured",
                   "DMA register reads per token with an engine that is done when polled "
                   "(DMASR once per channel and transfer; more while the PL works)")]
    return out


def rows_count_figures(figure, rows: dict, fmt: str):
    """:func:`token_counts` of ROWS-row passes at each context as figures (per row)."""
    out = []
    for ctx, r in rows.items():
        b = r["bytes"]
        out += [figure(f"host.rows{ROWS}.bytes.ctx{ctx}", int(sum(b.values()) - b["read"]) // ROWS,
                       "B", "measured", f"bytes the CPU writes into DMA memory per row of a "
                       f"{ROWS}-row pass at context {ctx} (KV, attention parts, x slots, "
                       f"descriptor fields: the B-vector switch and back, each row's attention "
                       f"set-up; {fmt} SmolLM2)", **{k: int(v) for k, v in b.items()}),
                figure(f"host.rows{ROWS}.transfers", r["transfers"], "transfers", "measured",
                       f"DMA transfers of a {ROWS}-row pass (a matrix transfer per kind and "
                       f"layer, an attention transfer per row and layer, the LM head)"),
                figure(f"host.rows{ROWS}.register_writes", r["writes"], "writes", "measured",
                       f"DMA register writes of a {ROWS}-row pass")]
    return out


def fixed_steps_on_text(model, tok, log, max_tokens=0):
    """The Gettysburg Address through the real model with its calibrated KV steps (the
    runtime's rule, docs/runtime.md section 4.5), teacher-forced (no LM head): the bytes the
    CPU writes per token into the KV cache and the attention parts, requantisation included,
    and the K/V values clipped."""
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
    text = (REPO / "docs" / "data" / "gettysburg.txt").read_text()
    ids = tok.encode(text)
    if max_tokens:
        ids = ids[:max_tokens]
    # the running absmax is an INT8 cache's rule (an INT16 cache takes fixed steps only): the
    # INT8-KV engines of the same model
    model = dataclasses.replace(model, kv_steps=None, engines=model.engines.with_kv_bits(8))
    dec = Decoder(model, make_backend("golden", model), loop="python")     # the spy below
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
    """SmolLM2-135M's shapes with zero weights (valid frames), a random embedding and the
    RoPE tables: the host loop's memory without loading the real file."""
    cfg = ModelConfig(**SMOLLM2_135M)
    mats = {}
    for n, s in model_shape(cfg, PYNQ_Z1_ENGINES, fmt).matrices.items():
        imgs = []
        for p in (0, 1):
            a = np.zeros(s.image_bytes[p], np.uint8)
            hdr = (MATRIX_MAGIC | s.k << 16 | s.rows[p] << 32
                   | format_code(s.fmt, s.block_x) << 48)
            a[:8] = np.frombuffer(hdr.to_bytes(8, "little"), np.uint8)
            imgs.append(a)
        mats[n] = QMatrix(n, s.fmt, s.k, s.n, np.full(s.n, 0.01), imgs, s.rows, s.block_x)
    norms = {"final": np.ones(cfg.hidden_size)}
    for i in range(cfg.num_hidden_layers):
        norms[f"layers.{i}.input"] = norms[f"layers.{i}.post"] = np.ones(cfg.hidden_size)
    emb = (np.random.default_rng(0).standard_normal((cfg.vocab_size, cfg.hidden_size))
           * 0.05).astype(np.float32)
    # the RoPE tables as an image carries them (float64), computed here, outside the
    # measurement: the board runs images
    rope = tuple(np.asarray(t, np.float64) for t in
                 rope_tables(cfg.head_dim, cfg.rope_theta, PYNQ_Z1_ENGINES.max_context))
    m = Model(cfg, PYNQ_Z1_ENGINES, fmt, EmbeddingRows.from_float(emb), norms, mats, rope=rope)
    # fixed KV steps, as a converted image has (the INT16 cache takes no other; their values
    # change no memory figure)
    return dataclasses.replace(m, kv_steps=np.full(
        (cfg.num_hidden_layers, cfg.num_key_value_heads, 2), 0.05, np.float32))


def host_peak(context: int = 2048):
    """tracemalloc peak of the host side (backend set-up, decoder, 2 tokens) with the register
    model and the golden PL in their own process."""
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


def text_figures(figure, log, text_tokens: int = 0):
    """The memory plan of the Q4_1 image, the KV cache on real text (the calibrated steps; the
    running absmax's requantisation), and the host loop's peak memory, as figures."""
    figs = []
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
    fx = fixed_steps_on_text(q4, tok4, log, text_tokens)
    log(f"calibrated KV steps over {fx['tokens']} tokens of the Gettysburg Address: {fx}")
    figs += [figure("host.kvfixed.max_bytes_token", fx["max_bytes"], "B", "measured",
                    f"most bytes the CPU wrote into the KV cache and the attention parts in "
                    f"one token (requantisation included: none) over {fx['tokens']} tokens "
                    f"of the Gettysburg Address, Q4_1 SmolLM2 with its calibrated KV steps "
                    f"(goal <= 32 KiB)", min_bytes=fx["min_bytes"]),
             figure("host.kvfixed.clipped", fx["clipped"], f"of {fx['values']:,} values",
                    "measured", "K and V values beyond their calibrated step's 127 "
                    "(stored as +-127) over the same text")]
    rq = requant_on_text(q4, tok4, log, text_tokens)
    log(f"KV requantisation over {rq['tokens']} tokens of the Gettysburg Address: {rq}")
    for name, field, unit, what in (   # host.requant.<name>: rq[field]
            ("events", "events", "step growths",
             f"KV step growths (each requantises one head's cached K or V) over "
             f"{rq['tokens']} tokens of the Gettysburg Address, Q4_1 SmolLM2, with the running "
             f"absmax (the rule before the calibrated steps)"),
            ("last_position", "last_event", "",
             "the last position at which a KV step grew (Gettysburg)"),
            ("after_32", "events_after_32", "step growths",
             "KV step growths after the first 32 positions (Gettysburg)"),
            ("bytes_total", "bytes", "B", "bytes requantised over the whole text (Gettysburg)"),
            ("max_bytes_token_after_32", "max_bytes_after_32", "B",
             "most bytes requantised in one token after position 32 (Gettysburg)")):
        figs.append(figure(f"host.requant.{name}", rq[field], unit, "measured", what))
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
                    "the host loop's peak memory (tracemalloc: backend set-up, decoder (C "
                    "loop), 2 tokens; register model and PL in another process), SmolLM2 "
                    "shapes, context 2048"),
             figure("host.memory.plan_bytes", plan.runtime_host_bytes, "B", "modelled",
                    "the memory plan's host items of the runtime (same configuration)")]
    return figs
