"""`make sim`: generate the PYNQ-Z1 configuration and simulate every engine against numpy.

Prints one row per design: parameters, rows checked, mismatches, s_axis_tready duty and the
latency in cycles (measured in simulation, next to the generator's figure), and records them
(docs/results/sim.json). `make sim DESIGN=ternary-engine PARAMS="bytes=16 max_k=1536"` simulates
one design in the configuration you give instead (printed, not recorded).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from generators.core import ParameterError, parse_assignments  # noqa: E402
from generators.cosim import BENCHES, runner  # noqa: E402

#: The PYNQ-Z1 configuration of every design (generators.designs.PYNQ_Z1); the PL top's latency
#: column is the matrix latency through port 0 / port 1, its duty over both ports' input frames
from generators.designs import PYNQ_Z1  # noqa: E402


def configs(design: str = "", params=()):
    """(design, parameters, bench) to run: the PYNQ-Z1 set, or one design as given."""
    if design:
        if design not in BENCHES:
            raise ParameterError(f"make sim DESIGN={design}: no bench for it (designs with one: "
                                 f"{', '.join(sorted(BENCHES))})")
        import generators
        p = parse_assignments(params, "PARAMS")
        generators.build(design, p)             # a bad parameter: a clear error, nothing run
        return [(design, p, BENCHES[design])]
    return [(d, p, BENCHES[d]) for d, p in PYNQ_Z1.items()]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sim", default="verilator", choices=runner.SIMULATORS)
    ap.add_argument("--beats", type=int, default=6000, help="input beats per engine")
    ap.add_argument("--design", default="", help="one design instead of the PYNQ-Z1 set")
    ap.add_argument("--params", action="append", default=[], help='"k=v k=v" (with --design)')
    args = ap.parse_args(argv)
    try:
        runs = configs(args.design, args.params)
    except ParameterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    rows, failed, figs = [], 0, []
    t_all = time.time()
    for design, params, module in runs:
        t0 = time.time()
        print(f"[sim] {design}: building and running on {args.sim} ...", flush=True)
        res_file = runner.config_dir(design, params) / f"summary-{args.sim}.json"
        res_file.parent.mkdir(parents=True, exist_ok=True)
        if res_file.exists():
            res_file.unlink()
        try:
            r = runner.run(design, params, args.sim, module, testcase="test_summary",
                           name="summary", extra_env={"TB_RESULT": str(res_file),
                                                      "TB_SUMMARY_BEATS": str(args.beats)})
            man = r["manifest"]
            res = json.loads(res_file.read_text())
            ok = res["mismatches"] == 0 and res["faults"] == 0
        except AssertionError as exc:
            print(str(exc)[-2000:])
            import generators
            man = generators.build(design, params).manifest([])
            res = json.loads(res_file.read_text()) if res_file.exists() else {}
            ok = False
        failed += not ok
        figs += _figures(design, res, ok)
        p = ", ".join(f"{k}={v}" for k, v in man["parameters"].items())
        rows.append((design, p, res.get("rows", "-"), res.get("mismatches", "FAILED"),
                     f"{res['duty']:.1f}" if "duty" in res else "-",
                     f"{res.get('latency', '-')} (gen "
                     f"{'/'.join(map(str, man['matrix']['port_latency'])) if 'matrix' in man else man['latency']})"))
        print(f"[sim] {design}: {'ok' if ok else 'FAILED'} in {time.time() - t0:.1f} s", flush=True)
    head = ("design", "parameters", "rows checked", "mismatches", "tready duty %",
            "latency cycles (simulated)")
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
    line = lambda r: "| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths)) + " |"
    table = [line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [line(r) for r in rows]
    print()
    print(f"Simulated on {args.sim}, every output word compared with the numpy golden model:")
    print("\n".join(table))
    (REPO / "build" / "sim").mkdir(parents=True, exist_ok=True)
    (REPO / "build" / "sim" / "summary.md").write_text("\n".join(table) + "\n")
    if args.design:
        return 1 if failed else 0              # a configuration of your own: printed only
    from generators.results import figure, record
    wall = round(time.time() - t_all)
    figs.append(figure("sim.wall_s", wall, "s", "measured",
                       f"make sim's run time on this machine ({args.sim}, builds cached or not)"))
    path = record("sim", figs, command=f"make sim SIM={args.sim}",
                  variant="" if args.sim == "verilator" else args.sim,
                  note=f"{args.sim}; every output word compared with the numpy golden model; "
                       f"{'all passed' if not failed else f'{failed} design(s) FAILED'}.")
    print(f"[sim] figures written to {path.relative_to(REPO)} (make results renders docs/results.md)")
    return 1 if failed else 0


def _figures(design: str, res: dict, ok: bool) -> list:
    """The summary row of one design as results figures (simulated)."""
    from generators.results import figure
    k = f"sim.{design}"
    out = [figure(f"{k}.status", "passed" if ok else "FAILED", "", "simulated",
                  f"{design}: every output word against the golden model")]
    if "rows" in res:
        unit = "words" if design == "attention-engine" else "rows"
        # the overlay's bench says "<rows> + <n> attention frames": the count, the rest in words
        rows = str(res["rows"]).strip()
        n = rows.split()[0]
        rest = rows[len(n):].strip()
        out.append(figure(f"{k}.rows", int(n), unit, "simulated",
                          f"{design}: {unit} checked" + (f" ({rest})" if rest else "")))
    if "mismatches" in res:
        out.append(figure(f"{k}.mismatches", int(res["mismatches"]), "", "simulated",
                          f"{design}: mismatching words"))
    if "duty" in res:
        out.append(figure(f"{k}.duty", round(float(res["duty"]), 1), "%", "simulated",
                          f"{design}: s_axis_tready high, share of the cycles of a frame"))
    if "latency" in res:
        out.append(figure(f"{k}.latency", str(res["latency"]), "cycles", "simulated",
                          f"{design}: latency, last input beat to first result"))
    return out


if __name__ == "__main__":
    sys.exit(main())
