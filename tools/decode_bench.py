"""`make decode`: SmolLM2-135M shapes (random weights) per weight format on the simulated PL top
(generators.runtime.bench.decode), tok/s to docs/results/decode.json."""
import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from generators.runtime.bench.decode import (FORMATS, REPO, add_token_time,  # noqa: E402
                                             print_table, record_figures, recorded_rows,
                                             run_format)
from generators.runtime.model.synthetic import SMOLLM2_135M, write_checkpoint  # noqa: E402


def main(argv=None) -> int:

    ap = argparse.ArgumentParser(prog="tools/decode_bench.py")
    ap.add_argument("--tokens", type=int, default=2)
    ap.add_argument("--fmt", default=",".join(FORMATS),
                    help="weight formats, comma-separated: ternary, q4, int8 (default all)")
    ap.add_argument("--no-record", action="store_true",
                    help="print; do not write docs/results/decode.json")
    ap.add_argument("--sim", choices=("verilator", "icarus"), default="verilator")
    ap.add_argument("--out", default=str(REPO / "build" / "decode"))
    ap.add_argument("--reuse-engine", action="store_true",
                    help="no simulation: the engine cycles and beats recorded in "
                         "docs/results/decode.json, today's host model")
    args = ap.parse_args(argv)
    fmts = [f for f in args.fmt.split(",") if f]
    bad = [f for f in fmts if f not in FORMATS]
    if bad or not fmts:
        ap.error(f"--fmt: unknown format(s) {bad}; choose from ternary, q4, int8")
    t_all = time.perf_counter()
    if args.reuse_engine:
        rows, golds, oks, reused = recorded_rows()
        add_token_time(rows)
        print_table(rows, golds, oks, "recorded (" + reused + ")")
        if not args.no_record:
            path = record_figures(rows, golds, oks, args.sim, 0.0, reused=reused)
            print(f"[decode] wrote {path.relative_to(REPO)}")
        return 0 if all(oks.values()) else 1
    folder = Path(args.out) / "smollm2-135m-random"
    if not (folder / "model.safetensors").exists():
        t0 = time.perf_counter()
        write_checkpoint(folder, SMOLLM2_135M, seed=135)
        print(f"[decode] wrote {folder} ({time.perf_counter() - t0:.1f} s)", flush=True)
    prompt = [1]
    rows, oks, golds = [], {}, {}
    for fmt in fmts:
        r, oks[fmt], golds[fmt] = run_format(fmt, folder, args, prompt)
        rows += r
    add_token_time(rows)
    print_table(rows, golds, oks, args.sim)
    if not args.no_record:
        path = record_figures(rows, golds, oks, args.sim, time.perf_counter() - t_all,
                              args.tokens)
        print(f"[decode] wrote {path.relative_to(REPO)}")
    print(f"make decode took {time.perf_counter() - t_all:.0f} s")
    return 0 if all(oks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
