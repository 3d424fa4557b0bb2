"""ggml's own libraries, from the llama-cpp-python build the Makefile makes (issue 32 item 2).

llama-cpp-python lives in its own venv (``build/llamacpp-venv``, the Makefile's
``$(LLAMACPP_VENV)/.portable-build``: its numpy is not the project's), so the tests do not import
it: they load its ``libggml-base`` and ``libggml-cpu`` with ctypes. Where they are found:

* ``TPH_GGML_LIB_DIR``, a directory holding both libraries, if set;
* else ``build/llamacpp-venv/lib/python3*/site-packages/llama_cpp/lib`` of this checkout;
* else the ``llama_cpp`` package of the running Python, if it has one.

Absent, the tests that need them skip, unless ``TPH_REQUIRE_GGML=1`` (``make ggml-check``, which
CI runs): then they fail, so that a check against ggml cannot pass by not running.
"""
from __future__ import annotations

import ctypes
import importlib.util
import os
from pathlib import Path
from typing import List, Optional

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: ggml's type ids (ggml.h, enum ggml_type)
GGML_TYPE_Q4_1 = 3
GGML_TYPE_Q8_0 = 8
GGML_TYPE_Q8_1 = 9

#: ggml_vec_dot_t: (n, float *s, size_t bs, const void *x, size_t bx, const void *y, size_t by,
#: int nrc)
VEC_DOT = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t,
                           ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t,
                           ctypes.c_int)
#: ggml_from_float_t: (const float *x, void *y, int64_t k)
FROM_FLOAT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


class TypeTraitsCpu(ctypes.Structure):
    """struct ggml_type_traits_cpu (ggml-cpu.h): the CPU backend's kernels of one type."""
    _fields_ = [("from_float", ctypes.c_void_p), ("vec_dot", ctypes.c_void_p),
                ("vec_dot_type", ctypes.c_int), ("nrows", ctypes.c_int64)]


def _candidates() -> List[Path]:
    env = os.environ.get("TPH_GGML_LIB_DIR")
    if env:
        return [Path(env)]
    dirs = sorted(ROOT.glob("build/llamacpp-venv/lib/python3*/site-packages/llama_cpp/lib"))
    spec = importlib.util.find_spec("llama_cpp")
    if spec is not None and spec.origin:
        dirs.append(Path(spec.origin).parent / "lib")
    return dirs


def _find(d: Path, stem: str) -> Optional[Path]:
    libs = sorted(d.glob(f"{stem}.so*")) + sorted(d.glob(f"{stem}.dylib"))
    return libs[0] if libs else None


class Ggml:
    """libggml-base (the reference quantisers) and libggml-cpu (the kernels llama.cpp runs)."""

    def __init__(self, base: ctypes.CDLL, cpu: ctypes.CDLL, where: Path):
        self.base, self.cpu, self.where = base, cpu, where
        cpu.ggml_cpu_init.restype, cpu.ggml_cpu_init.argtypes = None, []
        cpu.ggml_cpu_init()                       # the fp16 tables the CPU kernels read
        cpu.ggml_get_type_traits_cpu.restype = ctypes.POINTER(TypeTraitsCpu)
        cpu.ggml_get_type_traits_cpu.argtypes = [ctypes.c_int]

    def ref(self, name: str):
        """A ``quantize_row_*_ref`` of ggml-base: (const float *, void *, int64_t)."""
        fn = getattr(self.base, name)
        fn.restype, fn.argtypes = None, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        return fn

    def traits(self, ggml_type: int) -> TypeTraitsCpu:
        return self.cpu.ggml_get_type_traits_cpu(ggml_type).contents

    def vec_dot(self, ggml_type: int):
        """The CPU backend's dot product of rows of ``ggml_type`` (the x86 build's AVX2 kernel
        here) and its ``vec_dot_type``, as llama.cpp's matrix products call it."""
        return VEC_DOT(self.traits(ggml_type).vec_dot)

    def from_float(self, ggml_type: int):
        """The CPU backend's quantiser of ``ggml_type`` (what llama.cpp runs on activations)."""
        return FROM_FLOAT(self.traits(ggml_type).from_float)


def load() -> Ggml:
    """ggml's libraries, or a skip (a failure under TPH_REQUIRE_GGML=1) saying what is missing."""
    tried = []
    for d in _candidates():
        base, cpu = _find(d, "libggml-base"), _find(d, "libggml-cpu")
        tried.append(str(d))
        if base and cpu:
            b = ctypes.CDLL(str(base), mode=ctypes.RTLD_GLOBAL)
            c = ctypes.CDLL(str(cpu), mode=ctypes.RTLD_GLOBAL)
            return Ggml(b, c, d)
    why = ("ggml's libraries (libggml-base, libggml-cpu) not found in "
           f"{tried or ['build/llamacpp-venv']}: `make ggml-check` builds llama-cpp-python and "
           "runs these tests")
    if os.environ.get("TPH_REQUIRE_GGML") == "1":
        pytest.fail(why)
    pytest.skip(why)
