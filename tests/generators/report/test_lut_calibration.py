"""tools/lut_calibration.py: reading Vivado's utilisation reports (flat and hierarchical), the
clone lookup and its CLI errors. The synthesis itself is generators.report.yosys.synth, tested in
tests/generators/report/test_report_yosys.py; the figures it gave are resources.LUT_CALIBRATION."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from generators.report import resources

REPO = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("lut_calibration",
                                               REPO / "tools" / "lut_calibration.py")
lc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lc)

FLAT = """| Tool Version : Vivado v.2024.2 (win64) Build 5239630 Fri Nov 08 22:35:27 MST 2024
| Design       : Uart_Top
| Device       : xc7z007sclg400-1
+-------------------------+------+-------+------------+-----------+-------+
|        Site Type        | Used | Fixed | Prohibited | Available | Util% |
+-------------------------+------+-------+------------+-----------+-------+
| Slice LUTs              |  265 |     0 |          0 |     14400 |  1.84 |
|   LUT as Logic          |  258 |     0 |          0 |     14400 |  1.84 |
|   LUT as Memory         |    7 |     0 |          0 |      6000 |  0.00 |
| Slice Registers         |  507 |     0 |          0 |     28800 |  1.76 |
"""
HIER = """| Tool Version : Vivado v.2024.2 (win64) Build 5239630 Fri Nov 08 22:35:27 MST 2024
| Device       : xc7a35tcpg236-1
|  Instance | Module | Total LUTs | Logic LUTs | LUTRAMs | SRLs | FFs | RAMB36 | RAMB18 |
| hello_top |  (top) |          9 |          2 |       3 |    4 |  26 |      0 |      0 |
"""


def test_flat_and_hierarchical_reports():
    f = lc.vivado_luts(FLAT, "flat")
    assert (f["lut"], f["lut_logic"], f["lut_mem"], f["ff"]) == (265, 258, 7, 507)
    assert (f["vivado"], f["device"]) == ("Vivado v.2024.2", "xc7z007sclg400-1")
    h = lc.vivado_luts(HIER, "hier")
    assert (h["lut"], h["lut_logic"], h["lut_mem"], h["ff"]) == (9, 2, 7, 26)


def test_the_table_in_the_code_is_the_tools_designs():
    """Every row of LUT_CALIBRATION is a design the tool measures, at the same commit."""
    designs = {d["name"]: d for d in lc.DESIGNS}
    for name, src, *_ in resources.LUT_CALIBRATION:
        d = designs[name]
        assert src.startswith(f"{d['repo']} @ {d['commit']} : {d['report']}")


def test_a_missing_folder_or_clone_is_exit_2(tmp_path):
    cmd = [sys.executable, str(REPO / "tools" / "lut_calibration.py"), "--calib"]
    p = subprocess.run(cmd + [str(tmp_path / "nope")], capture_output=True, text=True)
    assert p.returncode == 2 and "is not a folder" in p.stderr
    p = subprocess.run(cmd + [str(tmp_path)], capture_output=True, text=True)
    assert p.returncode == 2 and "not found in" in p.stderr and p.stderr.count("\n") == 1
    assert lc.git_dir(tmp_path, "Mike-zip/axi-uart") is None
