"""`make timing-calibrate CALIB=DIR`: the timing model against Vivado's own post-route reports.

The calibration set (:data:`REPORTS`, ../shared/calibration.md) is public 7-series designs whose
repositories hold Vivado's ``report_timing_summary`` after routing. DIR holds their git
directories, found as DIR/<owner>+<name>/repo (the fetch tool's layout), DIR/<owner>+<name> or
DIR/<name> (a bare or a normal clone); every file is read at the commit named, out of the git
directory, and nothing of the designs' code is kept.

Steps:

1. **Read** every report's setup and recovery paths, cell by cell and net by net
   (:func:`generators.report.vivado_timing.parse_report`) and write the facts to
   ``generators/report/timing_calibration.json`` (``--data``): the figures the fit and the
   tests use, committed, so the fit re-runs without the clones.
2. **Fit** the model's delay numbers to Vivado's elements (:mod:`generators.report.timing_fit`)
   and **bound** the model's error: leave one design out, fit the rest, re-time the left-out
   design's paths ("replay": Vivado's own cells and fanouts with the model's numbers). The bound
   is the largest held-out under-estimate, as a fraction of the modelled path.
3. **Write** the fitted numbers and the bound to ``generators/report/timing_fitted.json``, which
   ``generators.report.timing`` reads (its CALIBRATED_MODEL); ``--check`` only checks that the
   committed file is the fit of the committed data (exit 1 if not).
4. **Whole designs** (``--whole``, slower: yosys): the designs whose RTL the repositories hold
   synthesised by the model's flow (``generators.report.yosys.synth``) and timed by
   ``generators.report.timing.analyze`` with the numbers before and after the fit, against
   Vivado's worst path.
5. **Record** docs/results/timing-calibration.json: per design Vivado against the model (before
   and after the fit, replay and whole design), the residuals and the bound.

    .venv/bin/python tools/timing_calibration.py --calib DIR [--whole] [--no-record]
    .venv/bin/python tools/timing_calibration.py            # re-fit the committed data only
    .venv/bin/python tools/timing_calibration.py --check    # the committed fit is the data's

Exit 2 on a bad folder or a report missing from it; 1 when the committed numbers are not the
fit's.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from generators.report import timing as tm  # noqa: E402
from generators.report import timing_fit as tf  # noqa: E402
from generators.report import vivado_timing as vt  # noqa: E402
from generators.results import figure, record  # noqa: E402

#: the calibration set: name, repository, commit, report (post-route report_timing_summary),
#: part as calibration.md reads it. Facts about each come from the report itself (its header).
REPORTS = [
    dict(name="counter", repo="simonandz/fpga-power-test-accel", commit="d659aa9",
         report="reports/hello_top_timing_summary.rpt"),
    dict(name="uart", repo="Mike-zip/axi-uart", commit="e9991ba",
         report="reports/timing_summary.rpt"),
    dict(name="lc4", repo="gracebrentano/lab4-pipeline", commit="347bf94",
         report="output/post_route_timing_summary_report.txt"),
    dict(name="risc_soc", repo="yash-bixt/RISC_SOC", commit="00e4034",
         report="Vivado-Project/RISC_SOC_v3/RISC_SOC_v3.runs/impl_1/"
                "nexys4_top_timing_summary_routed.rpt"),
    dict(name="cordic", repo="CyrilHerzog/Signalgenerator", commit="99d83b7",
         report="output/post_route_timing_summary.rpt"),
    dict(name="gemm_reset", repo="TechJoe96/Tiled-GEMM-Accelerator_A-Custom-Vivado-IP-Module",
         commit="760c874", report="reports/timing_summary_impl.rpt"),
    dict(name="fpga3d", repo="ryxiao0/FPGA-3D", commit="7e62064",
         report="obj/post_route_timing_summary.rpt"),
    dict(name="digidrum", repo="MatthewATaylor/DigiDrum3000", commit="de9e2fe",
         report="obj/post_route_timing_summary.rpt"),
    dict(name="vit_hls", repo="JustinZhouYuFeng/Zynq7020-EMNIST26-ViT", commit="a68d913",
         report="reports/timing_summary.rpt"),
    dict(name="lvds", repo="CyrilHerzog/lvds_transceiver", commit="47474bc",
         report="output/post_route_timing_summary.rpt"),
]


def _lut_tool():
    sys.path.insert(0, str(REPO / "tools"))
    import lut_calibration   # the same design table and git reading as make lut-calibrate
    return lut_calibration


def git_dir(calib: Path, repo: str) -> Optional[Path]:
    return _lut_tool().git_dir(calib, repo)


def git_show(gd: Path, commit: str, path: str) -> str:
    return subprocess.run(["git", f"--git-dir={gd}", "show", f"{commit}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def extract(calib: Path) -> dict:
    """The calibration data (the committed JSON's form) read from the clones in ``calib``."""
    designs = []
    for d in REPORTS:
        gd = git_dir(calib, d["repo"])
        if gd is None:
            raise FileNotFoundError(f"{d['repo']} not found in {calib} (fetch it: "
                                    f"fetch github:{d['repo']})")
        text = git_show(gd, d["commit"], d["report"])
        head = vt.report_header(text)
        paths = vt.parse_report(text)
        if not paths:
            raise ValueError(f"{d['name']}: no setup path read from {d['report']}")
        designs.append(dict(name=d["name"], repo=d["repo"], commit=d["commit"],
                            report=d["report"], **head, paths=paths))
        print(f"[timing-calibrate] {d['name']}: {len(paths)} paths, worst "
              f"{max(vt.path_vivado_ns(p) for p in paths):.3f} ns ({head.get('vivado', '?')}, "
              f"{head.get('device', '?')})", flush=True)
    return dict(note="Facts read from public Vivado post-route timing reports (no design "
                "code): tools/timing_calibration.py, ../shared/calibration.md.",
                designs=designs)


def whole_designs(calib: Path, work: Path, fitted) -> List[dict]:
    """The model's flow on the designs whose RTL is public (make lut-calibrate's set)."""
    lc = _lut_tool()
    from generators.report.yosys import synth
    out = []
    for d in lc.DESIGNS:
        gd = lc.git_dir(calib, d["repo"])
        rep = next((r for r in REPORTS if r["repo"] == d["repo"]), None)
        if gd is None or rep is None:
            continue
        t0 = time.time()
        files = _stage(lc, d, gd, work / d["name"] / "src")
        r = synth(files, d["top"], work / d["name"] / "yosys",
                  include_dirs=[work / d["name"] / "src" / i for i in d.get("include", [])])
        netlist = json.loads((work / d["name"] / "yosys" / "netlist.json").read_text())
        prior = tm.analyze(netlist, top=r.get("top"), model=tf.prior_model(), n_paths=1)
        fit = tm.analyze(netlist, top=r.get("top"), model=fitted, n_paths=1)
        viv = max(vt.path_vivado_ns(p) for p in
                  vt.parse_report(git_show(gd, rep["commit"], rep["report"])))
        row = dict(name=d["name"], top=d["top"], vivado_ns=viv,
                   prior_ns=prior["reg2reg"]["worst_ns"], model_ns=fit["reg2reg"]["worst_ns"],
                   seconds=round(time.time() - t0, 1))
        print(f"[timing-calibrate] whole {d['name']}: Vivado {viv:.3f} ns, model "
              f"{row['prior_ns']:.3f} before the fit, {row['model_ns']:.3f} after "
              f"({row['seconds']} s)", flush=True)
        out.append(row)
    return out


def _stage(lc, d: dict, gd: Path, src: Path) -> List[Path]:
    """Write the design's RTL at its commit into ``src`` (as make lut-calibrate does)."""
    def put(n: str, text: str) -> Path:
        p = src / n
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        return p
    for n, text in d.get("override", {}).items():
        put(n, text)
    for n in d.get("data", []):
        put(n, lc.git(gd, "show", f"{d['commit']}:{n}"))
    names = lc.git(gd, "ls-tree", "-r", "--name-only", d["commit"]).split("\n")
    files = []
    for pattern in d["rtl"]:
        hits = [n for n in names if Path(n).match(pattern) and n.count("/") == pattern.count("/")]
        for n in sorted(hits):
            files.append(put(n, lc.git(gd, "show", f"{d['commit']}:{n}")))
    for n in names:
        if n.endswith((".v", ".vh", ".svh")) and not (src / n).exists():
            put(n, lc.git(gd, "show", f"{d['commit']}:{n}"))
    return files


def figures(data: dict, result: dict, whole: List[dict]) -> List[dict]:
    b = result["bound"]
    figs = [
        figure("timing-calibration.bound_fraction", round(100 * b["fraction"], 1), "%",
               "modelled", "the timing model's error bound: the largest under-estimate of a "
               "held-out Vivado path (leave one design out, fit the others, re-time its paths), "
               "as a fraction of the modelled path", paths=b["paths"],
               path=dict(b["fraction_path"])),
        figure("timing-calibration.bound_ns", b["ns"], "ns", "modelled",
               "the largest held-out under-estimate in ns (of any path length)",
               path=dict(b["ns_path"])),
        figure("timing-calibration.route_rms_ns", result["fit"]["route_fit"]["rms_ns"], "ns",
               "modelled", "routing fit: rms residual over Vivado's nets",
               nets=result["fit"]["route_fit"]["nets"], route=result["fit"]["route"]),
    ]
    for d in result["per_design"]:
        figs.append(figure(
            f"timing-calibration.{d['name']}.replay_ns", d["fitted"], "ns", "modelled",
            f"{d['name']} ({d['repo']} @ {d['commit']}): Vivado's worst path re-timed by the "
            "fitted model (held out: fitted without this design)",
            vivado_ns=d["vivado"], prior_ns=d["prior"], held_out_ns=d["held_out"],
            vivado=d["vivado_version"], device=d["device"]))
    for w in whole:
        figs.append(figure(
            f"timing-calibration.{w['name']}.whole_ns", w["model_ns"], "ns", "modelled",
            f"{w['name']}: the model's whole flow (yosys + analyze, fitted numbers) on the "
            "design's RTL, its worst path", vivado_ns=w["vivado_ns"], prior_ns=w["prior_ns"]))
    return figs


def calibrate(data: dict) -> dict:
    """The fit on every design, the held-out bound, per design the worst path re-timed."""
    designs = data["designs"]
    fit = tf.fit(designs)
    fitted = tf.fitted_model(fit)
    prior = tf.prior_model()
    held = tf.held_out(designs)
    per = []
    for d in designs:
        worst = max(range(len(d["paths"])), key=lambda i: vt.path_vivado_ns(d["paths"][i]))
        p = d["paths"][worst]
        h = next((r for r in held if r["design"] == d["name"] and r["i"] == worst), None)
        per.append(dict(name=d["name"], repo=d["repo"], commit=d["commit"],
                        vivado_version=d.get("vivado", ""), device=d.get("device", ""),
                        vivado=vt.path_vivado_ns(p), prior=vt.replay(p, prior)["ns"],
                        fitted=vt.replay(p, fitted)["ns"],
                        held_out=h["model"] if h else None))
    return dict(fit=fit, bound=tf.bound(held), held=held, per_design=per)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calib", default="", help="folder of the calibration clones (re-reads "
                    "the reports; without it the committed data is re-fitted)")
    ap.add_argument("--data", default=str(tf.DATA), help="the calibration data (JSON)")
    ap.add_argument("--whole", action="store_true", help="also run yosys + the model on the "
                    "designs with public RTL (needs --calib)")
    ap.add_argument("--work", default=str(REPO / "build" / "timing-calibration"))
    ap.add_argument("--check", action="store_true", help="only check that "
                    "timing_fitted.json is the fit of the data (exit 1 if not)")
    ap.add_argument("--no-record", action="store_true",
                    help="do not write docs/results/timing-calibration.json")
    args = ap.parse_args(argv)
    t0 = time.time()
    if args.calib:
        calib = Path(args.calib)
        if not calib.is_dir():
            print(f"timing-calibrate: CALIB={calib} is not a folder", file=sys.stderr)
            return 2
        try:
            data = extract(calib)
        except (FileNotFoundError, subprocess.CalledProcessError) as exc:
            print(f"timing-calibrate: {exc}", file=sys.stderr)
            return 2
        Path(args.data).write_text(json.dumps(data, indent=0) + "\n")
        print(f"[timing-calibrate] wrote {args.data}", flush=True)
    elif args.whole:
        print("timing-calibrate: --whole needs --calib DIR", file=sys.stderr)
        return 2
    else:
        data = tf.load(Path(args.data))
    res = calibrate(data)
    fitted = tf.fitted_model(res["fit"])
    whole = whole_designs(Path(args.calib), Path(args.work), fitted) if args.whole else []
    print()
    print(f"{'design':<12} {'Vivado ns':>10} {'before':>8} {'fitted':>8} {'held out':>9}")
    for d in res["per_design"]:
        ho = f"{d['held_out']:.3f}" if d["held_out"] is not None else "-"
        print(f"{d['name']:<12} {d['vivado']:>10.3f} {d['prior'] or 0:>8.3f} "
              f"{d['fitted'] or 0:>8.3f} {ho:>9}")
    b = res["bound"]
    rf = res["fit"]["route_fit"]
    print(f"\nrouting fit over {rf['nets']} nets: " +
          ", ".join(f"{k} {v}" for k, v in res["fit"]["route"].items()) +
          f" (rms {rf['rms_ns']} ns)")
    print(f"bound: the model may under-estimate a path by {100 * b['fraction']:.1f} % "
          f"(held out, {b['paths']} paths; worst: {b['fraction_path']['design']} path "
          f"{b['fraction_path']['i']}, Vivado {b['fraction_path']['vivado']:.3f} ns against "
          f"{b['fraction_path']['model']:.3f})")
    fitted_json = dict(note="Written by make timing-calibrate (tools/timing_calibration.py) "
                       "from generators/report/timing_calibration.json: the timing model's "
                       "numbers fitted to Vivado's post-route reports, and its error bound "
                       "(docs/timing.md section 4).",
                       bound=dict(kind=b["kind"], fraction=b["fraction"], ns=b["ns"],
                                  paths=b["paths"], path=b["fraction_path"]),
                       covered_fanout=tf.covered_fanout(data["designs"]),
                       route_fit=res["fit"]["route_fit"], **tf.fitted_numbers(res["fit"]))
    text = json.dumps(fitted_json, indent=1) + "\n"
    stale = tm.FITTED_FILE.read_text() != text if tm.FITTED_FILE.exists() else True
    if args.check:
        if stale:
            print(f"timing-calibrate: {tm.FITTED_FILE.name} is not the fit of the committed "
                  "data: run make timing-calibrate", file=sys.stderr)
            return 1
        print(f"[timing-calibrate] {tm.FITTED_FILE.name} is the fit of the data")
        return 0
    if stale:
        tm.FITTED_FILE.write_text(text)
        print(f"[timing-calibrate] wrote {tm.FITTED_FILE.relative_to(REPO)} (make timing's "
              "numbers changed: re-run make timing)")
    if not args.no_record:
        p = record("timing-calibration", figures(data, res, whole),
                   command="make timing-calibrate CALIB=DIR (tools/timing_calibration.py)",
                   note="Vivado figures read from public post-route reports "
                        "(../shared/calibration.md); the model's numbers fitted to them")
        print(f"[timing-calibrate] wrote {p.relative_to(REPO)}")
    print(f"[timing-calibrate] {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
