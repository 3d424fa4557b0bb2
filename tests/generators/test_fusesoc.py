"""The FuseSoC core (CAPI2) lints the generated PYNQ-Z1 ternary engine with Verilator -Wall."""
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_fusesoc_lint_target():
    r = subprocess.run([sys.executable, "tools/fusesoc_lint.py"], cwd=REPO, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    vc = list((REPO / "build" / "fusesoc" / "run").glob("*/lint-verilator/Makefile"))
    assert vc and "--lint-only" in vc[0].read_text()
