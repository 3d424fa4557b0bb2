"""Package list and the optional C extension for setuptools (the rest is in pyproject.toml).

Every `generators*` package with an __init__.py is found, so a new subpackage ships without
an edit here; `generators.rtl` is the repository's top-level rtl/ folder (pyproject.toml maps
it with package-dir and ships its *.v as package data).

`generators.runtime.host._tphost` is the host's C library (generators/runtime/host/csrc: the kernels
tphost.c, the per-token loop tphloop.c, its worker thread tphwork.c (linked with -pthread), the
replay device tphreplay.c; loaded with ctypes by
generators/runtime/host/clib.py). It is optional: without a C compiler (or
when the build fails) pip prints a warning and installs the package anyway, and the runtime
runs the numpy twins of the kernels (the same bits) after one warning. The flags are part of
the numerics: no contraction into FMA, no fast-math, -O2 as `make host-bench` counts it; on
32-bit ARM also ARM_CFLAGS (NEON, the board's build).
"""
import hashlib
import platform
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

CSRC = Path("generators") / "runtime" / "host" / "csrc"
# hostlib.SOURCES: the SHA the loader checks
SOURCES = ("tphost.h", "tphost.c", "tphloop.h", "tphloop.c", "tphreplay.c", "tphfacts.h",
           "tphwork.h", "tphwork.c")
CFLAGS = ["-std=c99", "-O2", "-ffp-contract=off", "-fno-fast-math", "-Wall", "-Wextra",
          "-Werror"]
#: the board's build (32-bit ARM: the PYNQ-Z1's Cortex-A9): the kernels' NEON bodies, hard-float
#: calling convention (armhf); the library reports "neon" (tph_build) and hostlib warns in one
#: line when an ARM build lacks it
ARM_CFLAGS = ["-mcpu=cortex-a9", "-mfpu=neon", "-mfloat-abi=hard"]
if platform.machine().lower().startswith("arm") and not platform.machine().lower().startswith(
        "arm64"):
    CFLAGS += ARM_CFLAGS


def source_sha() -> str:
    h = hashlib.sha1()
    for name in SOURCES:
        h.update((Path(__file__).resolve().parent / CSRC / name).read_bytes())
    return h.hexdigest()


class OptionalBuildExt(build_ext):
    """build_ext that never fails the install: one clear line instead."""

    def run(self):
        try:
            super().run()
        except Exception as e:           # no compiler at all (distutils raises early)
            self._notice(e)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as e:           # the compiler failed on this extension
            self._notice(e)

    @staticmethod
    def _notice(e):
        print(f"WARNING: the C host kernels (generators.runtime.host._tphost) were not built ({e}); "
              f"ternary-pynq installs without them and runs their numpy twins (same results, "
              f"slower)")


tphost = Extension(
    "generators.runtime.host._tphost",
    sources=[str(CSRC / n) for n in SOURCES if n.endswith(".c")],
    depends=[str(CSRC / n) for n in SOURCES if n.endswith(".h")],
    define_macros=[("TPH_SOURCE_SHA", f'"{source_sha()}"')],
    extra_compile_args=CFLAGS + ["-pthread"],
    extra_link_args=["-pthread"],      # tphwork.c: the second core's worker thread
    libraries=["m"],
    optional=True,
)

setup(packages=find_packages(include=["generators", "generators.*"]) + ["generators.rtl"],
      ext_modules=[tphost],
      cmdclass={"build_ext": OptionalBuildExt})
