"""`make prefill`: time to the first token and streams' tok/s of the batched schedule
(docs/runtime.md 4.7), from the cycles of the frames the runtime sends, SmolLM2-135M shapes.

    python tools/prefill.py [--vectors 1,2,4] [--no-record] [--speculate]

A MODEL built from exact parts, nothing wall-clock:

* each matrix frame the runtime sends (its memory plan: every matrix half, header block, B
  vectors, rows) takes ``beats + latency`` clocks on its port (one beat per clock: the
  engines' benches assert the tready duty and the latency to the cycle, docs/vectors.md),
  the latency the top's ``port_latency`` (its manifest's, from the generator) at that
  ``vectors``; a transfer's frames follow each other on a port, the two ports in parallel;
* each attention frame (one per KV head, per layer, per token: per-token attention) the
  attention engine's own period for its beats (``decoder_model.pl_attention``);
* the matrices and attention each at least their bytes at the DDR wall (``contract``), plus
  the host's work per row (``decoder_model.host_ms``: make a9-model's Cortex-A9 model of the
  board's ARMv7 build at the row's context: a one-row pass the C step's (``tph_step``), a row
  of a B > 1 pass the batched C step's per row (``tph_step_rows``, modelled on 2-row passes);
  a row with its LM head and sampling (the a9-model "armv7" and "armv7c2" figures), a prompt
  row without ("armv7p", "armv7c2p")), one formula: ``decoder_model.token_time``.
The runtime as built runs these passes: its C loop's ``tph_step_rows`` takes a chunk of V
prompt tokens, or one row per stream, in one weight pass (``Decoder.default_chunk`` = V).
Figures: docs/results/decode-prefill.json (target "decode", variant "prefill").
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from generators.core import build
from generators.designs.overlay import PYNQ_Z1_VECTORS, attention_params
from generators.report.decoder_model import Platform, host_ms, pl_attention, token_time
from generators.results import figure

from ..decode.decoder import Decoder
from ..engines import make_backend
from ..engines.plan import ATT, memory_plan, model_shape, row_stride, shape_of
from ..model.checkpoint import ModelConfig, PYNQ_Z1_ENGINES
from ..model.conversion import load_model
from ..model.synthetic import SMOLLM2_135M

#: prompt lengths of the figures: the Paris question in SmolLM2's chat template with its
#: default system prompt (37 tokens, issue 20), and 16, 64, 128
PROMPTS = (("paris", 37), ("16", 16), ("64", 64), ("128", 128))
#: streams of the aggregate tok/s figures, and the context every stream decodes at
STREAMS = (1, 2, 4)
STREAM_CONTEXT = 512
FORMATS = ("q4", "ternary")
#: the issue's goals: a 128-token prompt's first token (s), 4 streams against one
GOAL_TTFT_128 = {"q4": 0.5, "ternary": 0.15}
GOAL_STREAMS_4 = 3.0


class Schedule:
    """The clocks and DDR beats of a batched step of SmolLM2-135M's shapes in ``fmt`` on a
    top of ``vectors`` (the runtime's memory plan of that model)."""

    def __init__(self, fmt: str, vectors: int, model=None, overlay: Optional[dict] = None,
                 host: str = "armv7"):

        self.fmt, self.vectors = fmt, vectors
        #: the host model per row: "armv7" (the C loop's ARMv7 build: tph_step for a one-row
        #: pass, its batched step's per-row figure for more rows), as decoder_model.host_ms's
        #: ``build`` (one of its HOST_FIGURES without the row suffixes)
        self.host = host
        if model is None:            # SmolLM2-135M's shapes
            self.cfg = ModelConfig(**SMOLLM2_135M)
            self.shape = model_shape(self.cfg, PYNQ_Z1_ENGINES, fmt)
        else:                        # another model's (tests: the tiny checkpoint)
            self.cfg = model.config
            self.shape = model_shape(self.cfg, model.engines, fmt)
            self.shape.matrices = {n: shape_of(m) for n, m in model.matrices.items()}
        self.plan = memory_plan(self.shape, min(2048, self.shape.engines.max_context),
                                vectors=vectors)
        self.latency = build("overlay", dict(overlay or {}, vectors=vectors)).port_latency()
        # the attention engine the model's engines name (the PYNQ-Z1 top's: INT16 K and V)
        self.att = pl_attention(attention_params(self.shape.engines.kv_bits))
        self.ATT = ATT

    def _frame_beats(self, name: str, port: int, B: int) -> int:
        m = self.shape.matrices[name]
        hdr = 1 if B == 1 else 2                     # header word (+ vectors word)
        return hdr + B * (m.x_bytes // 8) + m.rows[port] * row_stride(m.fmt, m.k) // 8

    def matrix_pass(self, B: int, lm_rows: int) -> Tuple[int, int]:
        """(clocks, 8-byte beats on both ports) of every matrix transfer of one step with B
        rows, and the LM head with ``lm_rows`` rows (0: not run)."""
        cycles = beats = 0
        for t in self.plan.transfers:
            if t.kind == self.ATT:
                continue
            b = B if t.layer is not None else lm_rows
            if b == 0:
                continue
            per_port = [0, 0]
            for f in t.frames:
                for p in (0, 1):
                    n = self._frame_beats(f.name, p, b)
                    per_port[p] += n + self.latency[p]
                    beats += n
            cycles += max(per_port)
        return cycles, beats

    def attention(self, contexts: Sequence[int]) -> Tuple[float, int]:
        """(clocks, 8-byte beats on both ports) of the per-token attention transfers of rows
        at ``contexts`` (each row's L), every layer and KV head."""
        c = self.cfg
        frames = c.num_hidden_layers * c.num_key_value_heads
        cyc = sum(frames * self.att.frame_cycles(L) for L in contexts)
        beats = sum(frames * (2 * self.att.frame_beats(L) + self.att.extra_port_beats)
                    for L in contexts)
        return cyc, beats

    def host_build(self, rows: int, logits: bool = True) -> str:
        """decoder_model.host_ms's ``build`` for a row of a pass of ``rows`` rows, with its
        LM head and sampling or without (a prompt row)."""
        return self.host + ("c2" if rows > 1 else "") + ("" if logits else "p")

    def step_time(self, contexts: Sequence[int], lm_rows: int) -> Dict:
        """One weight pass for len(contexts) rows, the last ``lm_rows`` of them with the LM
        head: decoder_model.token_time's formula with the host model summed over the rows."""
        B = len(contexts)
        mc, mb = self.matrix_pass(B, lm_rows)
        ac, ab = self.attention(contexts)
        host_s = sum(host_ms(self.fmt, L, build=self.host_build(B, j >= B - lm_rows))
                     for j, L in enumerate(contexts)) / 1e3
        return token_time(self.fmt, max(contexts), mc, mb, ac, ab,
                          platform=Platform(host_s=host_s))

    def ttft(self, n: int, chunk: Optional[int] = None) -> Tuple[float, Dict]:
        """Seconds from a prompt of n tokens to its first token (chunks of ``chunk``, default
        ``vectors``; the LM head for the last token only), and the summed parts (ms)."""
        V = min(int(chunk or self.vectors), self.vectors)
        total, parts = 0.0, {"matrix_ms": 0.0, "attention_ms": 0.0, "host_ms": 0.0}
        for j0 in range(0, n, V):
            rows = list(range(j0 + 1, min(n, j0 + V) + 1))          # each row's L
            t = self.step_time(rows, 1 if rows[-1] == n else 0)
            total += t["total_ms"] / 1e3
            for k in parts:
                parts[k] += t[k]
        return total, parts

    def streams_tok_s(self, S: int, context: int = STREAM_CONTEXT) -> float:
        """Tokens per second of S streams decoding together at ``context``: ceil(S / V)
        weight passes per step, each with its rows' LM head."""
        V, left, total = self.vectors, S, 0.0
        while left:
            b = min(V, left)
            total += self.step_time([context] * b, b)["total_ms"] / 1e3
            left -= b
        return S / total


def _ttft_row(figs: List[dict], lines: List[str], sch: "Schedule", tag: str, chunk: int,
              what: str, line: str, how: str = "") -> None:
    """The time-to-first-token figures of one schedule and prefill chunk, every prompt of
    PROMPTS (keys ``prefill.<tag>.ttft_<prompt>_s``), and their line."""
    row = []
    for name, n in PROMPTS:
        s, parts = sch.ttft(n, chunk=chunk)
        figs.append(figure(f"prefill.{tag}.ttft_{name}_s", round(s, 3), "s", "modelled",
                           f"{what}: time to the first token of a {n}-token prompt{how}",
                           prompt_tokens=n, **{k: round(v, 1) for k, v in parts.items()}))
        row.append(f"{n}: {s:.3f} s")
    lines.append(f"[prefill] {line}: time to the first token " + ", ".join(row))


def figures(vectors: Sequence[int]) -> Tuple[List[dict], List[str]]:
    figs, lines = [], []
    for fmt in FORMATS:
        sch = Schedule(fmt, PYNQ_Z1_VECTORS)
        h = sch.ttft(128)[1]["host_ms"] / 1e3
        figs.append(figure(f"prefill.{fmt}.host_128_s", round(h, 3), "s", "modelled",
                           f"SmolLM2-135M {fmt}: the host's share of a 128-token prompt on the "
                           f"PYNQ-Z1 top ({PYNQ_Z1_VECTORS}-row passes of the batched C step: "
                           f"its Cortex-A9 model per row, make a9-model)"))
        lines.append(f"[prefill] {fmt}: host model for 128 prompt rows {h:.3f} s "
                     f"({PYNQ_Z1_VECTORS}-row passes)")
        for V in vectors:
            sch = Schedule(fmt, V)
            tag = f"{fmt}.v{V}"
            default = " (the PYNQ-Z1 top's)" if V == PYNQ_Z1_VECTORS else ""
            _ttft_row(figs, lines, sch, tag, V, f"SmolLM2-135M {fmt}, vectors {V}{default}",
                      f"{fmt} vectors {V}{default}",
                      f" (chunks of {V}; engine clocks of every frame + DDR wall + host model)")
            one = sch.streams_tok_s(1)
            row = []
            for S in STREAMS:
                t = sch.streams_tok_s(S)
                figs.append(figure(f"streams.{tag}.s{S}.tok_s", round(t, 2), "tok/s", "modelled",
                                   f"SmolLM2-135M {fmt}, vectors {V}{default}: {S} stream(s) "
                                   f"at context {STREAM_CONTEXT}, tokens per second of all "
                                   f"streams together"))
                if S > 1:
                    figs.append(figure(f"streams.{tag}.s{S}.gain", round(t / one, 2), "x",
                                       "modelled", f"SmolLM2-135M {fmt}, vectors {V}: {S} "
                                       f"streams' tok/s over one stream's"))
                row.append(f"{S}: {t:.2f} tok/s ({t / one:.2f}x)")
            lines.append(f"[streams] {fmt} vectors {V}: " + ", ".join(row))
    return figs, lines


def verdict(figs: List[dict]) -> List[str]:
    """The issue's goals against the figures of each vectors."""
    by = {f["key"]: f["value"] for f in figs}
    out = []
    vs = sorted({int(k.split(".")[2][1:]) for k in by if k.startswith("prefill.")
                 and k.split(".")[2].startswith("v")})
    for V in vs:
        parts = []
        for fmt in FORMATS:
            t = by[f"prefill.{fmt}.v{V}.ttft_128_s"]
            g = by.get(f"streams.{fmt}.v{V}.s4.gain")
            parts.append(f"{fmt} 128-token prompt {t:.3f} s (goal <= {GOAL_TTFT_128[fmt]} s: "
                         f"{'met' if t <= GOAL_TTFT_128[fmt] else 'missed'}), 4 streams "
                         f"{g:.2f}x one (goal >= {GOAL_STREAMS_4:g}x: "
                         f"{'met' if g >= GOAL_STREAMS_4 else 'missed'})")
        star = " (the PYNQ-Z1 top)" if V == PYNQ_Z1_VECTORS else ""
        out.append(f"[goals] vectors {V}{star}: " + "; ".join(parts))
    return out


#: make speculate's prompts: the Paris question, and one that asks to repeat a paragraph (the
#: first of docs/data/gettysburg.txt)
QUESTION = "What is the capital of France?"
REPEAT = "Repeat the following paragraph exactly, word for word:\n\n{paragraph}"


def speculate_figures(fmt: str = "q4", vectors: Sequence[int] = (2, 4), tokens: int = 48
                      ) -> Tuple[List[dict], List[str]]:
    """SmolLM2-135M (the default image) greedy on golden with ``generate(speculate=V - 1)``
    on overlays of each V: the drafted and accepted tokens counted, and the tok/s of the
    passes it ran (each pass: its rows at their positions, :meth:`Schedule.step_time`)
    against the plain run's one-row passes (the same tokens: tests/runtime/decode/test_prefill.py)."""


    model, tok, _ = load_model(None, fmt)
    text = (Path(__file__).resolve().parents[3] / "docs" / "data" / "gettysburg.txt").read_text()
    paragraph = text.strip().split("\n\n")[0].strip()
    prompts = {"paris": tok.chat_ids(QUESTION),
               "repeat": tok.chat_ids(REPEAT.format(paragraph=paragraph))}
    figs, lines = [], []
    for V in vectors:
        sch = Schedule(fmt, V)
        for name, ids in prompts.items():
            # drafts ride in the pass's other rows: x in one part (docs/activations.md 7)
            dec = Decoder(model, make_backend("golden", model, vectors=V), x_parts=1)
            out = list(dec.generate(ids, tokens, stop_ids=tok.eos_ids, speculate=V - 1))
            sp = dec.speculation
            spec_s = sum(sch.step_time(list(range(p + 1, p + b + 1)), b)["total_ms"]
                         for p, b in sp["rows"]) / 1e3
            plain_s = sum(sch.step_time([p + 1], 1)["total_ms"]
                          for p in range(len(ids), len(ids) + len(out) - 1)) / 1e3
            n = len(out) - 1                          # tokens after the prompt's own
            tag = f"speculate.{fmt}.v{V}.{name}"
            rate = sp["accepted"] / sp["drafted"] if sp["drafted"] else 0.0
            figs += [
                figure(f"{tag}.accepted", sp["accepted"], "tokens", "measured",
                       f"SmolLM2-135M {fmt} greedy, {name} prompt ({len(ids)} tokens), "
                       f"--speculate {V - 1} on vectors {V}: drafted tokens accepted of "
                       f"{sp['drafted']} ({len(out)} tokens generated, golden)",
                       drafted=sp["drafted"], passes=sp["passes"], generated=len(out)),
                figure(f"{tag}.acceptance", round(100 * rate, 1), "%", "measured",
                       f"SmolLM2-135M {fmt}, {name} prompt, --speculate {V - 1}: accepted "
                       f"share of the drafted tokens"),
                figure(f"{tag}.tok_s", round(n / spec_s, 2) if spec_s else 0.0, "tok/s",
                       "modelled", f"SmolLM2-135M {fmt}, {name} prompt, --speculate {V - 1} "
                       f"on vectors {V}: tokens after the first per second of the passes run "
                       f"(frame clocks + DDR wall + host model per row)"),
                figure(f"{tag}.plain_tok_s", round(n / plain_s, 2) if plain_s else 0.0,
                       "tok/s", "modelled", f"SmolLM2-135M {fmt}, {name} prompt: the same "
                       f"tokens one per pass"),
            ]
            lines.append(f"[speculate] {fmt} vectors {V} {name} ({len(ids)} prompt tokens): "
                         f"{sp['accepted']} of {sp['drafted']} drafted accepted, "
                         f"{sp['passes']} passes for {n} tokens: {n / spec_s:.2f} tok/s "
                         f"against {n / plain_s:.2f} plain (modelled); "
                         f"{tok.decode(out)[:60]!r}")
            print(lines[-1], flush=True)
    return figs, lines

