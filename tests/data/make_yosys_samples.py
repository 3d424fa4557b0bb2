"""Regenerate the saved yosys outputs used by tests/generators/report/test_report_yosys.py.

    .venv/bin/python tests/data/make_yosys_samples.py

Synthesises ``report_sample`` (tests/data/tiny_designs.v) and copies stat.txt, stat.json
and the netlist into tests/data/ as yosys_stat_sample.txt, yosys_stat_sample.json and
yosys_netlist_sample.json.
"""
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from generators.report.yosys import synth  # noqa: E402


def main():
    with tempfile.TemporaryDirectory() as tmp:
        res = synth([HERE / "tiny_designs.v"], "report_sample", tmp)
        shutil.copy(Path(tmp) / "stat.txt", HERE / "yosys_stat_sample.txt")
        shutil.copy(Path(tmp) / "stat.json", HERE / "yosys_stat_sample.json")
        shutil.copy(Path(tmp) / "netlist.json", HERE / "yosys_netlist_sample.json")
    res.pop("depth")
    print(res)


if __name__ == "__main__":
    main()
