"""The board backend's host code on PYNQ's own MMIO and buffers, and the AXI DMA register model
against PYNQ's own scatter-gather driver (pynq 3.1.2, x86, a venv of its own).

pynq<4 pins numpy 1.26, so it never goes into the project's .venv: this test creates
build/pynq-venv once (pip from PyPI: pynq==3.1.2, pycparser<2.22, jinja2, safetensors; about
a minute the first time, then reused) and runs tests/runtime_board_check.py there, with Python
3.10 when this machine has it (`python3.10`: the PYNQ 3.0.1 / 3.1 images for the PYNQ-Z1 are
Ubuntu 22.04 with Python 3.10), else with this Python, saying so. PyPI's pynq 3.1.2 brings numpy
1.26 here; the images' own numpy is Ubuntu's 1.21.5, and `make board-rehearsal`
(tools/board_rehearsal.py) runs the board backend on exactly the image's versions (pynq 3.0.1,
numpy 1.21.5, the wheel installed with [board]). Without PyPI access the venv cannot be made
and the test fails, saying so.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import shutil

import pytest

REPO = Path(__file__).resolve().parents[3]
VENV = REPO / "build" / "pynq-venv"


def _board_python():
    """A working Python 3.10 (the PYNQ 3.0 image's, Ubuntu 22.04), or None: python3.10 on PATH
    (a pyenv shim only works when 3.10 is selected, so it is run once to check), else pyenv's."""
    cands = [shutil.which("python3.10")]
    cands += sorted(str(p) for p in Path.home().glob(".pyenv/versions/3.10*/bin/python3.10"))
    for c in filter(None, cands):
        try:
            r = subprocess.run([c, "-c", "import sys, venv; print(sys.version_info[:2])"],
                               capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            continue
        if r.returncode == 0 and r.stdout.strip() == "(3, 10)":
            return c
    return None


#: the board image's Python (PYNQ 3.0.1 / 3.1 for the PYNQ-Z1: Ubuntu 22.04), when this machine has it
BOARD_PYTHON = _board_python()
BASE = BOARD_PYTHON or sys.executable
PACKAGES = ["pynq==3.1.2", "pycparser<2.22", "jinja2==3.1.6", "safetensors==0.7.0"]
STAMP = VENV / ".packages"


def pynq_python() -> Path:
    py = VENV / "bin" / "python"
    want = "\n".join(PACKAGES + [BASE])
    if STAMP.exists() and STAMP.read_text() == want and py.exists():
        return py
    VENV.parent.mkdir(parents=True, exist_ok=True)
    if BOARD_PYTHON is None:
        print(f"no python3.10 on this machine: the board check runs on {sys.version.split()[0]}")
    subprocess.run([BASE, "-m", "venv", "--clear", str(VENV)], check=True)
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", *PACKAGES],
                       capture_output=True, text=True)
    if r.returncode:
        pytest.fail(f"cannot install {PACKAGES} into {VENV} (PyPI access?): {r.stderr[-500:]}")
    STAMP.write_text(want)
    return py


def test_board_host_code_on_pynq_mmio_and_buffers():
    py = pynq_python()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    r = subprocess.run([str(py), str(REPO / "tests" / "runtime_board_check.py")],
                       capture_output=True, text=True, env=env, cwd=str(REPO), timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["pynq"] == "3.1.2" and res["numpy"].startswith("1.26"), res
    if BOARD_PYTHON is not None:
        assert res["python"].startswith("3.10."), res
    for fmt in ("int8", "ternary"):
        assert res[fmt]["golden"] == res[fmt]["pynq"], res
        assert res[fmt]["identical"], f"{fmt}: engine words differ through PYNQ's MMIO"
        assert res[fmt]["calls"] > 50
        # the KV cache and the frames (descriptors, x and part slots) not cached: no flush
        # per token; the results region cached, every read invalidated first in whole lines
        assert res[fmt]["cacheable"] == {"weights": True, "kv": False, "frames": False,
                                         "results": True}
        assert res[fmt]["flushes"] == 1
        assert res[fmt]["invalidates"] > res[fmt]["calls"] and not res[fmt]["bad_invalidates"]
    # the register model answers PYNQ's own SG driver (its descriptors, a packet over two
    # S2MM descriptors) with the golden model's words
    assert res["sg_channel"]["identical"] and res["sg_channel"]["status_tag"] == 0x5A
    assert "not complete within 0.2 s" in res["timeout"] and "reset" in res["timeout"]
