"""`make sim-full`: the write-up's scale in simulation on Verilator.

131,070 INT8 rows of K = 512 and 524,278 ternary rows of K = 640 (about 67 MB through each
engine), every row checked against numpy; prints rows checked and beats per second.
Options: --rows-int8, --rows-ternary, --stall (output stall probability).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from generators.cosim import runner  # noqa: E402


def run_full(design: str, params: dict, rows: int, k: int, out: Path, stall: float = 0.0,
             seed: int = 1, frame_rows: int = 65_535) -> dict:
    """One run of the bulk driver (sim.full.test_full) on Verilator; returns its JSON result.

    Raises AssertionError when the cocotb test fails (a mismatching word, a protocol fault)
    or does not run (runner.run checks that exactly test_full_scale ran)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.exists():
        out.unlink()
    runner.run(design, params, "verilator", "sim.full.test_full", testcase="test_full_scale",
               name="full", seed=seed,
               extra_env={"TB_FULL_ROWS": str(rows), "TB_FULL_K": str(k),
                          "TB_FULL_FRAME_ROWS": str(frame_rows),
                          "TB_FULL_STALL": str(stall), "TB_RESULT": str(out)})
    return json.loads(out.read_text())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows-int8", type=int, default=131_070)
    ap.add_argument("--rows-ternary", type=int, default=524_278)
    ap.add_argument("--stall", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    os.environ["SIM_VERBOSE"] = "1"     # stream the progress lines
    jobs = [("int8-engine", {"max_k": 512}, args.rows_int8, 512),
            ("ternary-engine", {"max_k": 640}, args.rows_ternary, 640)]
    results, failed = [], 0
    t0 = time.time()
    for design, params, rows, k in jobs:
        if rows <= 0:
            continue
        out = runner.config_dir(design, params) / "full.json"
        try:
            results.append(run_full(design, params, rows, k, out, args.stall, args.seed))
        except AssertionError as exc:
            print(str(exc)[-1500:])
            failed += 1
            if out.exists():
                results.append(json.loads(out.read_text()))
    print()
    print("make sim-full (simulated, Verilator):")
    print("| design | rows checked | K | beats | mismatches | protocol faults | tready duty % | beats/s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['design']} | {r['rows']:,} | {r['k']} | {r['beats']:,} | {r['mismatches']} | "
              f"{r['faults']} | {r['duty']:.2f} | {r['beats_per_s']:,.0f} |")
    print(f"total {time.time() - t0:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
