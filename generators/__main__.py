"""Command line: `python -m generators list`, `python -m generators render DESIGN ...` and
`python -m generators decode --checkpoint DIR --backend golden|rtl|board --prompt-ids 1,2,3` and
`python -m generators chat` (the real model on the engines, generators/runtime/chat.py)."""
from __future__ import annotations

import argparse
import json
import sys

from . import __version__
from .core import ParameterError, build, designs


def _parse_sets(items):
    values = {}
    for item in items or []:
        if "=" not in item:
            raise ParameterError(f"--set {item!r}: expected NAME=VALUE")
        k, v = item.split("=", 1)
        k = k.strip().replace("-", "_")
        if not k:
            raise ParameterError(f"--set {item!r}: empty parameter name")
        values[k] = v
    return values


def cmd_list(args) -> int:
    reg = designs()
    for name in sorted(reg):
        cls = reg[name]
        print(f"{name}  (top {cls.top}): {cls.summary}")
        for p in cls.params:
            default = str(p.default).lower() if isinstance(p.default, bool) else p.default
            print(f"    {p.name:<14} default {default!s:<8} legal {p.legal():<28} {p.doc}")
        d = cls()
        print(f"    latency at defaults: {d.latency()} cycles")
        print()
    return 0


def cmd_render(args) -> int:
    d = build(args.design, _parse_sets(args.set))
    man = d.write(args.out)
    if args.json:
        print(json.dumps(man, indent=2))
    else:
        print(f"{man['design']}: wrote {len(man['sources'])} sources to {args.out} "
              f"(top {man['top']}, latency {man['latency']} cycles)")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m generators",
                                 description="Generate the PYNQ-Z1 ternary LLM engines.")
    ap.add_argument("--version", action="version", version=__version__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="every design with its parameters, defaults and legal ranges")
    r = sub.add_parser("render", help="write a design's Verilog and manifest.json")
    r.add_argument("design")
    r.add_argument("--set", action="append", metavar="NAME=VALUE", help="set a parameter")
    r.add_argument("--out", required=True, help="output directory")
    r.add_argument("--json", action="store_true", help="print the manifest")
    from .runtime import chat
    from .runtime import cli as runtime_cli
    runtime_cli.add_parser(sub)
    chat.add_parser(sub)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "decode":
            return runtime_cli.run(args)
        if args.cmd == "chat":
            return chat.run(args)
        return cmd_list(args) if args.cmd == "list" else cmd_render(args)
    except ParameterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except chat.USER_ERRORS as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
