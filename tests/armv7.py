"""ARMv7 (the board's Cortex-A9) builds for the tests: Debian's cross compiler, qemu-arm, and
the check that float arithmetic stays off NEON (NEON flushes subnormals to zero; the VFP keeps
them). Used by tests/test_hostops.py (the kernels' vectors) and tests/test_hostloop.py (the
decoder step on the replay device).
"""
from __future__ import annotations

import shutil
import subprocess

import pytest

ARM_CC = "arm-linux-gnueabihf-gcc"
CFLAGS = ["-std=c99", "-O2", "-ffp-contract=off", "-fno-fast-math", "-Wall", "-Wextra",
          "-Werror"]


def need(tool: str, pkg: str) -> None:
    if shutil.which(tool) is None:
        pytest.fail(f"{tool} is missing: install the Debian package {pkg} (tools/setup.sh "
                    f"installs it when it can: apt-get install gcc-arm-linux-gnueabihf qemu-user)")


def need_arm() -> None:
    need(ARM_CC, "gcc-arm-linux-gnueabihf")
    need("qemu-arm", "qemu-user")


def build(cc, srcs, out, extra=()):
    r = subprocess.run([cc, *CFLAGS, *extra, *map(str, srcs), "-lm", "-o", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return out


def neon_float(exe, first_symbol: str):
    """The NEON float arithmetic instructions of ``exe`` from ``first_symbol`` on (gcc may put
    integers and int <-> float conversions on NEON: exact, no subnormal can occur; float
    arithmetic must stay on the VFP)."""
    dump = subprocess.run(["arm-linux-gnueabihf-objdump", "-d", str(exe)], capture_output=True,
                          text=True).stdout
    lib = dump[dump.index(f"<{first_symbol}>:"):]
    out = [ln for ln in lib.splitlines()
           if ".f32" in ln and any(f" {r}" in ln or f"\t{r}" in ln for r in ("q", "d"))
           and "vcvt.f32.s32" not in ln and "vcvt.f32.u32" not in ln
           and "vcvt.f64.f32" not in ln and "vcvt.f32.f64" not in ln]
    return [ln for ln in out if any(tok.startswith(("q", "d")) and tok.rstrip(",")[1:].isdigit()
                                    for tok in ln.replace(",", " ").split())]
