"""`make test-timed`: run `make test` (or `make test-long` with --long), measure its wall time,
and record how many tests passed and how long it took (docs/results/test.json).

`make test` itself records nothing (a figure that changed under every run would make the
README's quote check fail on the next one); run this on a quiet machine, as CI does, when the
figure should be renewed. The time includes lint and every Verilator/Icarus build from an
empty build/ when run on a fresh clone (.ci/run's situation).
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from generators.results import figure, record  # noqa: E402

SUMMARY = re.compile(r"=+ (?P<body>.*?) in (?P<s>[\d.]+)s")


def parse(out: str):
    """The last pytest summary line of `out`: {'passed': n, 'failed': n, ...}, pytest seconds."""
    found = None
    for m in SUMMARY.finditer(out):
        counts = {w: int(n) for n, w in re.findall(r"(\d+) (passed|failed|skipped|errors?|"
                                                   r"xfailed|xpassed|deselected)", m["body"])}
        if counts:
            found = (counts, float(m["s"]))
    return found


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--long", action="store_true", help="make test-long instead of make test")
    args = ap.parse_args(argv)
    target = "test-long" if args.long else "test"
    t0 = time.monotonic()
    proc = subprocess.Popen(["make", "--no-print-directory", target], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = []
    for line in proc.stdout:
        sys.stdout.write(line)
        out.append(line)
    rc = proc.wait()
    wall = time.monotonic() - t0
    res = parse("".join(out))
    if rc or res is None:
        print(f"[test-timed] make {target} failed (exit {rc}): nothing recorded", file=sys.stderr)
        return rc or 1
    counts, _ = res
    key = "test.long" if args.long else "test.default"
    figs = [figure(f"{key}.passed", counts.get("passed", 0), "tests", "measured",
                   f"tests passed by make {target}"),
            figure(f"{key}.skipped", counts.get("skipped", 0), "tests", "measured",
                   f"tests skipped by make {target}"),
            figure(f"{key}.wall_min", round(wall / 60, 1), "min", "measured",
                   f"wall time of make {target} (lint, builds and pytest) on "
                   f"{os.cpu_count()} cores"),
            figure(f"{key}.cores", os.cpu_count(), "cores", "measured",
                   "CPU cores of the machine that ran it")]
    path = record("test", figs, command=f"make test-timed{' LONG=1' if args.long else ''}",
                  variant="long" if args.long else "")
    print(f"[test-timed] make {target}: {counts.get('passed', 0)} passed in {wall / 60:.1f} min "
          f"on {os.cpu_count()} cores; wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
