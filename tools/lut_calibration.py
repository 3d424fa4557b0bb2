"""yosys's LUT count against Vivado's on public 7-series designs (the calibration set).

Each design of :data:`DESIGNS` is a public repository whose files hold the RTL and Vivado's own
utilisation report of it (../shared/calibration.md lists them; fetch them with the fetch tool,
or ``git clone`` them, into one folder). This script reads the RTL at the commit named, out of
the clone's git directory (nothing of it is kept in this repository), synthesises it with
``generators.report.yosys.synth`` (the model make report uses), reads the report's Slice LUTs,
and prints the rows of ``generators.report.resources.LUT_CALIBRATION``:

    .venv/bin/python tools/lut_calibration.py --calib DIR [--work build/lut-calibration]

DIR holds one git directory per design, found as DIR/<owner>+<name>/repo (the fetch tool's
layout), DIR/<owner>+<name> or DIR/<name> (a bare or a normal clone). Exit 2 on a bad folder.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from generators.report.yosys import synth  # noqa: E402

#: name, repository, commit, RTL files (globs at that commit), top, Vivado report, report kind.
#: The RTL is the design the report is of (its "Design" line): the whole top, out of context
#: for yosys (no IO buffers, which hold no LUTs). Of calibration.md's designs with RTL, counter
#: is left out (2 LUTs in Vivado's report, and SystemVerilog, which the model's read_verilog
#: does not take without -sv) and cordic too (its hierarchical `inst.port` references need
#: rewriting for yosys: its figures would be of another text).
DESIGNS = [
    dict(name="uart", repo="Mike-zip/axi-uart", commit="e9991ba",
         rtl=["rtl/uart_top.v", "rtl/uart_rx.v", "rtl/uart_tx.v", "rtl/uart_axil.v"],
         top="Uart_Top", report="reports/utilization.rpt", kind="flat"),
    dict(name="lc4_system", repo="gracebrentano/lab4-pipeline", commit="347bf94",
         rtl=["lc4_alu.v", "lc4_cla.v", "lc4_decoder.v", "lc4_divider.v", "lc4_regfile.v",
              "lc4_pipeline.v", "include/register.v", "include/lc4_memory.v",
              "include/clock_util.v", "include/delay_eight_cycles.v", "include/bram.v",
              "system/*.v"],
         top="lc4_system", report="output/post_route_utilization_report.txt", kind="flat",
         include=[".", "include"], data=["test_data/wireframe.hex"],
         # its .set_testcase.v (written by its vivado.mk) names the memory image by an
         # absolute path of its author's machine: the same image, named where it was
         # extracted (relative to yosys's folder)
         override={".set_testcase.v":
                   '`define MEMORY_IMAGE_FILE "../src/test_data/wireframe.hex"\n'}),
    dict(name="risc_soc", repo="yash-bixt/RISC_SOC", commit="00e4034",
         rtl=["Vivado-Project/RISC_SOC_v3/RISC_SOC_v3.srcs/sources_1/imports/new/*.v",
              "Vivado-Project/RISC_SOC_v3/RISC_SOC_v3.srcs/sources_1/new/*.v"],
         top="nexys4_top",
         include=["Vivado-Project/RISC_SOC_v3/RISC_SOC_v3.srcs/sources_1/imports/new"],
         report="Vivado-Project/RISC_SOC_v3/RISC_SOC_v3.runs/impl_1/"
                "nexys4_top_utilization_placed.rpt", kind="flat"),
]


def git_dir(calib: Path, repo: str) -> Optional[Path]:
    owner, name = repo.split("/")
    for cand in (calib / f"{owner}+{name}" / "repo", calib / f"{owner}+{name}", calib / name,
                 calib / f"{owner}+{name}" / ".git", calib / name / ".git"):
        if (cand / "HEAD").exists() and (cand / "objects").exists():
            return cand
    return None


def git(gd: Path, *args: str) -> str:
    return subprocess.run(["git", f"--git-dir={gd}", *args], check=True,
                          capture_output=True, text=True).stdout


def vivado_luts(text: str, kind: str) -> Dict[str, object]:
    """Slice LUTs (and LUT as memory) of a Vivado utilisation report, its tool and part."""
    tool = re.search(r"\| Tool Version\s*:\s*(Vivado v\.\S+)", text)
    dev = re.search(r"\| Device\s*:\s*(\S+)", text)
    out: Dict[str, object] = {"vivado": tool.group(1) if tool else "",
                              "device": dev.group(1) if dev else ""}
    if kind == "hier":          # report_utilization -hierarchical: the top's row
        m = re.search(r"^\|\s*\S+\s*\|\s*\(top\)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|"
                      r"\s*(\d+)\s*\|\s*(\d+)\s*\|", text, re.M)
        out.update(lut=int(m.group(1)), lut_logic=int(m.group(2)),
                   lut_mem=int(m.group(3)) + int(m.group(4)), ff=int(m.group(5)))
        return out
    def row(label: str) -> int:
        m = re.search(r"^\|\s*" + re.escape(label) + r"\s*\|\s*(\d+)", text, re.M)
        return int(m.group(1))
    out.update(lut=row("Slice LUTs"), lut_logic=row("LUT as Logic"),
               lut_mem=row("LUT as Memory"), ff=row("Slice Registers"))
    return out


def measure(d: dict, gd: Path, work: Path) -> dict:
    src = work / d["name"] / "src"
    files: List[Path] = []
    for n, text in d.get("override", {}).items():
        p = src / n
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    for n in d.get("data", []):
        p = src / n
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(git(gd, "show", f"{d['commit']}:{n}"))
    names = git(gd, "ls-tree", "-r", "--name-only", d["commit"]).split("\n")
    for pattern in d["rtl"]:
        hits = [n for n in names if Path(n).match(pattern) and n.count("/") == pattern.count("/")]
        if not hits:
            raise SystemExit(f"{d['name']}: no {pattern} at {d['commit']}")
        for n in sorted(hits):
            p = src / n
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(git(gd, "show", f"{d['commit']}:{n}"))
            files.append(p)
    # every Verilog file and header of the tree, for `include
    for n in names:
        if n.endswith((".v", ".vh", ".svh")) and not (src / n).exists():
            p = src / n
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(git(gd, "show", f"{d['commit']}:{n}"))
    viv = vivado_luts(git(gd, "show", f"{d['commit']}:{d['report']}"), d["kind"])
    r = synth(files, d["top"], work / d["name"] / "yosys",
              include_dirs=[src / i for i in d.get("include", [])])
    y_lut = r.get("LUT_slice", r["LUT"])
    return dict(name=d["name"], repo=d["repo"], commit=d["commit"], report=d["report"],
                device=viv["device"], vivado=viv["vivado"], vivado_lut=viv["lut"],
                vivado_lut_mem=viv["lut_mem"], vivado_ff=viv["ff"], yosys_lut=y_lut,
                yosys_ff=r["FF"], ratio=round(viv["lut"] / y_lut, 3) if y_lut else None)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calib", required=True, help="folder of the calibration clones")
    ap.add_argument("--work", default=str(REPO / "build" / "lut-calibration"))
    ap.add_argument("--only", default="", help="comma-separated design names")
    args = ap.parse_args(argv)
    calib = Path(args.calib)
    if not calib.is_dir():
        print(f"lut_calibration: {calib} is not a folder", file=sys.stderr)
        return 2
    only = [s for s in args.only.split(",") if s]
    rows = []
    for d in DESIGNS:
        if only and d["name"] not in only:
            continue
        gd = git_dir(calib, d["repo"])
        if gd is None:
            print(f"lut_calibration: {d['repo']} not found in {calib}", file=sys.stderr)
            return 2
        row = measure(d, gd, Path(args.work))
        print(json.dumps(row), flush=True)
        rows.append(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
