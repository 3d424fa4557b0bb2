"""ARMv7 (the board's Cortex-A9) builds for the tests: Debian's cross compiler, qemu-arm, and
the functions of a build whose float arithmetic runs on NEON (-mfpu=neon: the library's NEON
bodies, whose flush-to-zero the numpy twins define; a VFP-only build has none). Used by
tests/runtime/host/test_hostops.py (the kernels' vectors) and tests/runtime/engines/test_hostloop.py (the decoder step on
the replay device).
"""
from __future__ import annotations

import re
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
    r = subprocess.run([cc, *CFLAGS, *extra, *map(str, srcs), "-lm", "-pthread", "-o",
                        str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return out


def neon_float(exe, first_symbol: str) -> dict:
    """function -> its NEON float arithmetic instructions (vector multiply, add, subtract,
    max, min on q or d registers: the ones that flush subnormals), for the functions of
    ``exe`` from ``first_symbol`` on and the parts gcc split off ``tph_`` functions wherever
    they lie. int <-> float conversions are left out (exact)."""
    return _census(exe, first_symbol, r"\tv(mul|add|sub|max|min|pmax|pmin|padd|neg|abs)\.f32\t[qd]\d")


def vfp_compares(exe, first_symbol: str) -> dict:
    """function -> its scalar VFP compares (vcmp / vcmpe .f32 or .f64), as
    :func:`neon_float` finds functions: each one costs an FPSCR transfer (vmrs) on the A9;
    gcc 12 lowers the NEON float compare intrinsics to them without -ffast-math."""
    return _census(exe, first_symbol, r"\tvcmpe?\.f(32|64)\t")


def _census(exe, first_symbol: str, pattern: str) -> dict:
    dump = subprocess.run(["arm-linux-gnueabihf-objdump", "-d", str(exe)], capture_output=True,
                          text=True).stdout
    out: dict = {}
    fn = None
    seen = False
    for ln in dump.splitlines():
        m = re.match(r"^[0-9a-f]+ <(\S+)>:$", ln)
        if m:
            name = m.group(1)
            seen = seen or name == first_symbol
            base = name.split(".")[0]
            # a part gcc split off a library function (tph_x.part.0: partial inlining) may lie
            # before first_symbol: it counts as tph_x
            fn = base if "." in name and base.startswith("tph_") else name if seen else None
            continue
        if fn is None:
            continue
        if re.search(pattern, ln):
            out.setdefault(fn, []).append(ln.strip())
    return out
