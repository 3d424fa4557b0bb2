"""`make prefill` and `make speculate`: time to the first token and the batched schedule's tok/s
(generators.runtime.bench.prefill), figures to docs/results/decode.json."""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from generators.results import record  # noqa: E402
from generators.runtime.bench.prefill import figures, speculate_figures, verdict  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="tools/prefill.py",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--vectors", default="1,2,4",
                    help="the tops' vectors to model (comma-separated; default 1,2,4)")
    ap.add_argument("--no-record", action="store_true", help="print only")
    ap.add_argument("--speculate", action="store_true",
                    help="make speculate: SmolLM2 greedy with --speculate on golden (minutes)")
    ap.add_argument("--tokens", type=int, default=48, help="--speculate: tokens per prompt")
    a = ap.parse_args(argv)
    vs = [int(v) for v in a.vectors.split(",")]
    if a.speculate:
        figs, _ = speculate_figures(vectors=[v for v in vs if v > 1], tokens=a.tokens)
        what, note = "speculate", ("acceptance measured on golden (SmolLM2-135M, greedy); tok/s "
                                   "a model of the passes run (generators/runtime/bench/prefill.py)")
    else:
        figs, lines = figures(vs)
        for line in lines + verdict(figs):
            print(line, flush=True)
        what, note = "prefill", ("a model: engine clocks of every frame (beats + latency) + DDR "
                                 "wall + the host's ARMv7 C-step model per row (make "
                                 "a9-model; the batched step's in passes of more rows) "
                                 "(generators/runtime/bench/prefill.py)")
    if not a.no_record:
        p = record("decode", figs, command=f"make {what}", variant=what, note=note)
        print(f"[{what}] figures: {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
