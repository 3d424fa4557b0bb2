"""Command line (``ternary-pynq`` or ``python -m generators``): ``list``, ``render DESIGN ...``;
the runtime's ``convert MODEL -o FILE`` (a model image), ``info FILE``, ``decode`` and ``chat``
(the real model on the engines, generators/runtime/cli/).

Every mistake is answered with one line ``error: ...`` on stderr and exit code 2: argparse's
own (an unknown option, a value of the wrong type), a generator parameter, and the runtime's
named errors (``generators.runtime.errors.USER_ERRORS``), caught here and nowhere else."""
from __future__ import annotations

import argparse
import json
import sys

from . import __version__
from .core import ParameterError, build, designs, parse_assignments




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
    d = build(args.design, parse_assignments(args.set))
    man = d.write(args.out)
    if args.json:
        print(json.dumps(man, indent=2))
    else:
        print(f"{man['design']}: wrote {len(man['sources'])} sources to {args.out} "
              f"(top {man['top']}, latency {man['latency']} cycles)")
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse with its mistakes in one line (no usage block): ``error: ...``, exit 2."""

    def error(self, message):
        self.exit(2, f"error: {self.prog}: {message} (see --help)\n")


def main(argv=None) -> int:
    ap = _Parser(prog="ternary-pynq",
                 description="Generate the PYNQ-Z1 ternary LLM engines; run models on them.")
    ap.add_argument("--version", action="version", version=__version__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="every design with its parameters, defaults and legal ranges")
    r = sub.add_parser("render", help="write a design's Verilog and manifest.json")
    r.add_argument("design")
    r.add_argument("--set", action="append", metavar="NAME=VALUE", help="set a parameter")
    r.add_argument("--out", required=True, help="output directory")
    r.add_argument("--json", action="store_true", help="print the manifest")
    from .runtime.cli import chat, selftest
    from .runtime.cli import commands as runtime_cli
    from .runtime.errors import USER_ERRORS
    runtime_cli.add_convert_parser(sub)
    runtime_cli.add_info_parser(sub)
    runtime_cli.add_parser(sub)
    chat.add_parser(sub)
    selftest.add_parser(sub)
    try:
        args = ap.parse_args(argv)
    except SystemExit as exc:            # --help, --version, or a mistake (already answered)
        return exc.code
    commands = {"list": cmd_list, "render": cmd_render, "convert": runtime_cli.run_convert,
                "info": runtime_cli.run_info, "decode": runtime_cli.run, "chat": chat.run,
                "selftest": selftest.run}
    try:
        return commands[args.cmd](args)
    except (ParameterError, *USER_ERRORS) as exc:
        sys.stdout.flush()
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        sys.stdout.flush()
        print("\nerror: interrupted", file=sys.stderr)
        return 130


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


if __name__ == "__main__":
    sys.exit(main())
