"""`python -m generators decode`: run a checkpoint on a backend, a progress line per token."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .checkpoint import EngineConfig, PYNQ_Z1_ENGINES


def add_parser(sub) -> None:
    d = sub.add_parser("decode", help="generate tokens from a checkpoint on golden, rtl or board")
    d.add_argument("--checkpoint", required=True,
                   help="HF folder (config.json + model.safetensors), a .gguf, or a converted "
                        "model .npz")
    d.add_argument("--backend", choices=("golden", "rtl", "board"), default="golden")
    d.add_argument("--format", dest="fmt", choices=("int8", "ternary", "q4"), default=None,
                   help="weight format (default: ternary for a BitNet checkpoint, else int8; "
                        "q4: a GGUF's Q4_1 tensors as stored, float weights requantised)")
    g = d.add_mutually_exclusive_group(required=True)
    g.add_argument("--prompt-ids", help="comma-separated token ids, e.g. 1,2,3")
    g.add_argument("--prompt", help="text (needs tokenizer.json and the tokenizers package)")
    d.add_argument("--tokens", type=int, default=8, help="tokens to generate")
    d.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    d.add_argument("--top-k", type=int, default=0)
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--save", help="write the converted model (.npz) here")
    d.add_argument("--bitfile", help="board: the overlay's .bit (with its .hwh beside it)")
    d.add_argument("--sim", choices=("verilator", "icarus"), default="verilator",
                   help="rtl: simulator")
    d.add_argument("--max-k", type=int, default=PYNQ_Z1_ENGINES.max_k,
                   help="engines' max_k (default: the PYNQ-Z1 overlay)")
    d.add_argument("--max-context", type=int, default=PYNQ_Z1_ENGINES.max_context)


def _tokenizer(folder: Path):
    tj = folder / "tokenizer.json"
    if not tj.exists():
        return None
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return None
    return Tokenizer.from_file(str(tj))


def run(args) -> int:
    from . import Decoder, Model, convert, load_checkpoint, make_backend
    from .checkpoint import CheckpointError
    eng = EngineConfig(max_k=args.max_k, max_context=args.max_context)
    path = Path(args.checkpoint)
    tok = None
    t0 = time.perf_counter()
    try:
        if path.suffix == ".npz":
            model = Model.load(path)
        else:
            ck = load_checkpoint(path, eng)
            model = convert(ck, args.fmt, eng)
            tok = _tokenizer(path if path.is_dir() else path.parent)
    except CheckpointError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"[decode] {path}: {model.config.num_hidden_layers} layers, hidden "
          f"{model.config.hidden_size}, vocab {model.config.vocab_size}, {model.fmt} weights "
          f"({time.perf_counter() - t0:.1f} s to load and convert)", flush=True)
    if args.save:
        model.save(args.save)
    if args.prompt is not None:
        if tok is None:
            print("error: --prompt needs tokenizer.json beside the checkpoint and the "
                  "'tokenizers' package; use --prompt-ids", file=sys.stderr)
            return 2
        prompt = tok.encode(args.prompt).ids
    else:
        prompt = [int(t) for t in args.prompt_ids.split(",") if t.strip()]
    kw = {}
    if args.backend == "rtl":
        kw["simulator"] = args.sim
    if args.backend == "board":
        kw["bitfile"] = args.bitfile
    from .backends import BackendError
    from .decoder import ContextError, EngineError
    if len(prompt) > model.engines.max_context:
        print(f"error: prompt of {len(prompt)} tokens is longer than the attention engine's "
              f"max_context {model.engines.max_context}", file=sys.stderr)
        return 2
    be = make_backend(args.backend, model, **kw)
    dec = Decoder(model, be)
    out = []
    try:
        last = time.perf_counter()
        cyc = dict(getattr(be, "cycles", {}))
        for i, t in enumerate(dec.generate(prompt, args.tokens, args.temperature, args.top_k,
                                           args.seed)):
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
    except (ContextError, EngineError, BackendError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if hasattr(be, "close"):
            be.close()
    print("[decode] ids: " + ",".join(map(str, out)))
    if tok is not None:
        print("[decode] text: " + tok.decode(prompt + out))
    return 0
