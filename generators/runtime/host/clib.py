"""Loader of the C host kernels (``csrc/tphost.c``) with ctypes, and their Python face.

The library is built by pip with the package: setup.py declares the optional setuptools
extension ``generators.runtime.host._tphost`` (a plain C shared library: no Python API inside, so
it is loaded with ctypes, not imported). Without a C compiler the build step fails quietly,
the package installs anyway, and :func:`load` answers ``(None, reason)``; ``hostops`` then
warns once and runs numpy. ctypes rather than cffi: it is in the standard library (no build
or run dependency); the C per-token loop (``tphloop.c``, generators.runtime.engines.cloop) and the
replay device (``tphreplay.c``) are in the same library.

The library carries the SHA-1 of the sources it was built from (``tph_source()``); when the
sources beside this file differ (an edited checkout not rebuilt: ``make setup``), the library
is refused as stale, so a C path is never silently a different numerics.

The library also says which bodies it was built with (``tph_build()``: "neon", "sse2",
"portable"; setup.py passes ``-mcpu=cortex-a9 -mfpu=neon -mfloat-abi=hard`` on ARMv7, the
board's build). A library for ARM built without NEON loads (the same bits: its portable bodies
compute NEON's flush in C) with one warning line, since its per-token step costs several times
the instructions.

``TERNARY_PYNQ_TPHOST=/path/lib.so`` loads another build (the tests' own builds); ``none``
behaves as if no library were built.
"""
from __future__ import annotations

import ctypes
import hashlib
import importlib.machinery
import os
import platform
import warnings
from pathlib import Path
from typing import Optional, Tuple

import numpy as np

from generators.golden import attention as gatt

__all__ = ["load", "library_path", "source_sha", "expected_build", "CSRC", "LIB_ENV", "COps",
           "HostBuildWarning"]

LIB_ENV = "TERNARY_PYNQ_TPHOST"
HERE = Path(__file__).resolve().parent
CSRC = HERE / "csrc"
#: the library's sources (setup.py builds the .c files; the SHA covers all)
SOURCES = ("tphost.h", "tphost.c", "tphloop.h", "tphloop.c", "tphreplay.c", "tphfacts.h",
           "tphwork.h", "tphwork.c")
ABI = 6                          # tphost.h TPH_ABI

TPH_NONFINITE, TPH_TINY, TPH_BADARG = -1, -2, -3

_cache: dict = {}


#: the kernels' refusals, worded the same by the C library (its codes) and the numpy twins
ERR_NONFINITE = "holds NaN or infinity"
ERR_TINY = "max|x| is so small that the scale overflows float32"
#: per-block quantisation (tph_quantise_q8_0 / _q8_1): TPH_TINY there
ERR_BLOCK_TINY = "a block's max|x| is nonzero and below 2^-118"


class HostBuildWarning(RuntimeWarning):
    """The C library was built without the board's vector unit (an ARM build without NEON)."""


def expected_build(machine: Optional[str] = None) -> Optional[str]:
    """The bodies a library for this CPU should have: "neon" on 32-bit ARM (setup.py's ARMv7
    flags), "sse2" on x86-64, None elsewhere (portable only)."""
    m = (machine or platform.machine()).lower()
    if m.startswith("arm") and not m.startswith("arm64"):
        return "neon"
    if m in ("x86_64", "amd64"):
        return "sse2"
    return None


def source_sha(folder: Path = CSRC) -> Optional[str]:
    """SHA-1 of the library's sources, SOURCES in order (setup.py defines the same as
    TPH_SOURCE_SHA)."""
    h = hashlib.sha1()
    for name in SOURCES:
        p = Path(folder) / name
        if not p.is_file():
            return None
        h.update(p.read_bytes())
    return h.hexdigest()


def library_path() -> Optional[Path]:
    """The built extension beside this file (first match of this interpreter's suffixes)."""
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        p = HERE / f"_tphost{suffix}"
        if p.is_file():
            return p
    return None


def load(path: Optional[str] = None) -> Tuple[Optional["COps"], str]:
    """(COps, "") or (None, why not). Cached per path."""
    env = os.environ.get(LIB_ENV, "")
    if path is None:
        if env.lower() == "none":
            return None, f"{LIB_ENV}=none"
        path = env or library_path()
    if path is None:
        return None, ("the extension generators/runtime/host/_tphost was not built: no C compiler "
                      "when the package was installed? (pip install . or make setup with gcc)")
    key = str(path)
    if key not in _cache:
        _cache[key] = _open(Path(path), check_source=not env)
    return _cache[key]


def _open(path: Path, check_source: bool):
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as e:
        return None, f"{path.name} does not load: {e}"
    try:
        abi = lib.tph_abi()
        lib.tph_source.restype = ctypes.c_char_p
        built = lib.tph_source().decode()
        lib.tph_build.restype = ctypes.c_char_p
        bodies = lib.tph_build().decode()
    except AttributeError as e:
        return None, f"{path.name} is not the tphost library ({e})"
    if abi != ABI:
        return None, f"{path.name} has ABI {abi}, this package needs {ABI}: rebuild (make setup)"
    want = source_sha() if check_source else None
    if want is not None and built != want:
        return None, (f"{path.name} was built from other sources than csrc/ holds (stale build): "
                      f"rebuild with make setup (pip install -e .)")
    note = build_note(bodies)
    if note:
        warnings.warn(f"{path.name}: {note}", HostBuildWarning, stacklevel=3)
    return COps(lib, path, bodies), ""


def build_note(bodies: str, machine: Optional[str] = None) -> str:
    """One line when a library's bodies are not this CPU's ("" when they are)."""
    want = expected_build(machine)
    if want == "neon" and bodies != "neon":
        return (f"the C host library was built without NEON ({bodies} bodies: -mfpu=neon "
                f"-mfloat-abi=hard missing); the per-token step runs on the VFP alone, the same "
                f"bits at several times the instructions: rebuild with make setup")
    return ""


# --------------------------------------------------------------------------- the C face

_P = ctypes.c_void_p
_U = ctypes.c_uint32
_I = ctypes.c_int32
_F = ctypes.c_float
_D = ctypes.c_double

_SIGNATURES = {
    "tph_sumsq": (_F, [_P, _U]),
    "tph_absmax": (_I, [_P, _U, _P]),
    "tph_argmax": (_I, [_P, _U]),
    "tph_rmsnorm": (None, [_P, _P, _U, _F, _P]),
    "tph_rope": (None, [_P, _U, _U, _P, _P, _P]),
    "tph_exp": (None, [_P, _U, _P]),
    "tph_silu_mul": (None, [_P, _P, _U, _P]),
    "tph_add": (None, [_P, _P, _U, _P]),
    "tph_quantise_rows": (_I, [_P, _U, _U, _P, _P]),
    "tph_dequant_i32": (None, [_P, _P, _U, _F, _P]),
    "tph_dequant_f32": (None, [_P, _U, _F, _P]),
    "tph_dequant_b_i32": (None, [_P, _P, _U, _U, _P, _P]),
    "tph_dequant_b_f32": (None, [_P, _U, _U, _P, _P]),
    "tph_kv_step": (_I, [_P, _U, _P, _P]),
    "tph_kv_requantise": (_I, [_P, _U, _F]),
    "tph_kv_row": (None, [_P, _U, _F, _P]),
    "tph_kv_append": (_I, [_P, _U, _U, _P, _P]),
    "tph_kv_row16": (None, [_P, _U, _F, _P]),
    "tph_score_multiplier": (_I, [_D, _U, _U, _U, _P, _P]),
    "tph_score_scale": (_D, [_F, _F, _U]),
    "tph_attention_out": (None, [_P, _P, _U, _U, _U, _F, _P]),
    "tph_f16_to_f32": (None, [_P, _U, _P]),
    "tph_embed_q8_0": (None, [_P, _U, _P]),
    "tph_embed_int8": (None, [_P, _U, _F, _P]),
    "tph_f32_to_f16": (None, [_P, _U, _P]),
    "tph_quantise_q8_0": (_I, [_P, _U, _P, _P]),
    "tph_quantise_q8_1": (_I, [_P, _U, _P, _P, _P]),
    "tph_quantise_parts": (_I, [_P, _U, _P, _P, _P, _P, _P, _P]),
}


def _ptr(a: np.ndarray) -> int:
    return a.ctypes.data


def check_code(rc: int, what: str) -> None:
    if rc == TPH_NONFINITE:
        raise ValueError(f"{what}: the row {ERR_NONFINITE}" if what.startswith("kv_")
                         else f"{what}: x {ERR_NONFINITE}")
    if rc == TPH_TINY:
        raise ValueError(f"{what}: {ERR_TINY}")
    if rc < 0:
        raise ValueError(f"{what}: bad argument (code {rc})")


class COps:
    """The same functions as ``hostops._NumpyOps`` (the same prepared arguments), run by the
    library."""

    name = "c"
    F = np.float32

    def __init__(self, lib: ctypes.CDLL, path: Path, bodies: str = ""):
        self.lib, self.path, self.bodies = lib, path, bodies
        for fn, (res, args) in _SIGNATURES.items():
            f = getattr(lib, fn)
            f.restype, f.argtypes = res, args

    def sumsq(self, x):
        return np.float32(self.lib.tph_sumsq(_ptr(x), x.size))

    def absmax(self, x):
        out = np.zeros(1, np.float32)
        check_code(self.lib.tph_absmax(_ptr(x), x.size, _ptr(out)), "absmax")
        return out[0]

    def argmax(self, x):
        return int(self.lib.tph_argmax(_ptr(x), x.size))

    def rmsnorm(self, x, w, eps):
        y = np.empty_like(x)
        self.lib.tph_rmsnorm(_ptr(x), _ptr(w), x.size, eps, _ptr(y))
        return y

    def rope(self, x, cos_h, sin_h):
        y = np.empty_like(x)
        self.lib.tph_rope(_ptr(x), x.shape[0], x.shape[1], _ptr(cos_h), _ptr(sin_h), _ptr(y))
        return y

    def exp(self, x):
        y = np.empty_like(x)
        self.lib.tph_exp(_ptr(x), x.size, _ptr(y))
        return y

    def silu_mul(self, g, u):
        y = np.empty_like(g)
        self.lib.tph_silu_mul(_ptr(g), _ptr(u), g.size, _ptr(y))
        return y

    def add(self, a, b):
        y = np.empty_like(a)
        self.lib.tph_add(_ptr(a), _ptr(b), a.size, _ptr(y))
        return y

    def quantise_rows(self, x):
        q = np.empty(x.shape, np.int8)
        s = np.empty(x.shape[0], np.float32)
        check_code(self.lib.tph_quantise_rows(_ptr(x), x.shape[0], x.shape[1], _ptr(q), _ptr(s)),
             "quantise")
        return q, s

    def dequant_i32(self, acc, scale, s):
        y = np.empty(acc.shape, np.float32)
        self.lib.tph_dequant_i32(_ptr(acc), _ptr(scale), acc.size, s, _ptr(y))
        return y

    def dequant_f32(self, v, s):
        y = np.empty_like(v)
        self.lib.tph_dequant_f32(_ptr(v), v.size, s, _ptr(y))
        return y

    @staticmethod
    def _rows(y):
        return (ctypes.c_void_p * len(y))(*[y[j].ctypes.data for j in range(len(y))])

    def dequant_b_i32(self, acc, scale, s):
        y = np.empty((len(s), scale.size), np.float32)
        rows = self._rows(y)                  # (kept alive across the call)
        self.lib.tph_dequant_b_i32(_ptr(acc), _ptr(scale), scale.size, len(s), _ptr(s),
                                   ctypes.addressof(rows))
        return y

    def dequant_b_f32(self, v, s):
        y = np.empty((len(s), v.size // len(s)), np.float32)
        rows = self._rows(y)
        self.lib.tph_dequant_b_f32(_ptr(v), y.shape[1], len(s), _ptr(s), ctypes.addressof(rows))
        return y

    def kv_step(self, x, step):
        st = np.array([step, 0.0], np.float32)        # step, ratio
        rc = self.lib.tph_kv_step(_ptr(x), x.size, _ptr(st), _ptr(st[1:]))
        check_code(rc, "kv_step")
        return st[0], st[1], rc == 1

    def kv_requantise(self, q, ratio):
        if q.flags.c_contiguous:
            check_code(self.lib.tph_kv_requantise(_ptr(q), q.size, ratio), "kv_requantise")
        else:                        # a strided view of the cache: through a contiguous copy
            tmp = np.ascontiguousarray(q)
            check_code(self.lib.tph_kv_requantise(_ptr(tmp), tmp.size, ratio), "kv_requantise")
            q[...] = tmp

    def kv_row(self, x, step):
        q = np.empty(x.shape, np.int8)
        self.lib.tph_kv_row(_ptr(x), x.size, step, _ptr(q))
        return q

    def kv_row16(self, x, step):
        q = np.empty(x.shape, np.int16)
        self.lib.tph_kv_row16(_ptr(x), x.size, step, _ptr(q))
        return q

    def kv_append(self, rows, t, step, x):
        st = np.array([step], np.float32)
        rc = self.lib.tph_kv_append(_ptr(rows), t, x.size, _ptr(st), _ptr(x))
        check_code(rc, "kv_append")
        return st[0], rc == 1

    def score_scale(self, k_step, s_q, d):
        return float(self.lib.tph_score_scale(k_step, s_q, d))

    def score_multiplier(self, c, cfg):
        m, s = ctypes.c_uint32(), ctypes.c_uint32()
        rc = self.lib.tph_score_multiplier(c, cfg.exp_steps_per_octave, gatt.MAX_SHIFT,
                                           gatt.MULT_BITS, ctypes.byref(m), ctypes.byref(s))
        if rc:
            raise ValueError(f"score scale c = {c!r}: no (MULT, SHIFT) with MULT < "
                             f"2**{gatt.MULT_BITS} and SHIFT <= {gatt.MAX_SHIFT} (or c is "
                             f"not finite and >= 0)")
        return m.value, s.value

    def attention_out(self, y, z, v_step, frac_bits):
        o = np.empty(y.shape, np.float32)
        self.lib.tph_attention_out(_ptr(y), _ptr(z), y.shape[0], y.shape[1], frac_bits,
                                   v_step, _ptr(o))
        return o

    def f16_to_f32(self, h):
        y = np.empty(h.shape, np.float32)
        self.lib.tph_f16_to_f32(_ptr(h), h.size, _ptr(y))
        return y

    def embed_q8_0(self, blocks, n):
        y = np.empty(n, np.float32)
        self.lib.tph_embed_q8_0(_ptr(blocks), n, _ptr(y))
        return y

    def embed_int8(self, q, scale):
        y = np.empty(q.shape, np.float32)
        self.lib.tph_embed_int8(_ptr(q), q.size, scale, _ptr(y))
        return y

    def f32_to_f16(self, x):
        h = np.empty(x.shape, np.uint16)
        self.lib.tph_f32_to_f16(_ptr(x), x.size, _ptr(h))
        return h

    def quantise_blocks(self, x, q81: bool):
        what = "quantise_q8_1" if q81 else "quantise_q8_0"
        q = np.empty(x.size, np.int8)
        d = np.empty(x.size // 32, np.uint16)
        s = np.empty(x.size // 32, np.uint16)
        rc = (self.lib.tph_quantise_q8_1(_ptr(x), x.size, _ptr(q), _ptr(d), _ptr(s)) if q81
              else self.lib.tph_quantise_q8_0(_ptr(x), x.size, _ptr(q), _ptr(d)))
        if rc == TPH_TINY:
            raise ValueError(f"{what}: {ERR_BLOCK_TINY}")
        check_code(rc, what)
        return (q, d, s) if q81 else (q, d)

    def quantise_parts(self, x, q81: bool):
        what = "quantise_parts"
        nb = x.size // 32
        q = np.empty((2, x.size), np.int8)
        d = np.empty((2, nb), np.uint16)
        s = np.empty((2, nb), np.uint16)
        rc = self.lib.tph_quantise_parts(_ptr(x), x.size, _ptr(q[0]), _ptr(d[0]),
                                         _ptr(s[0]) if q81 else None, _ptr(q[1]), _ptr(d[1]),
                                         _ptr(s[1]) if q81 else None)
        if rc == TPH_TINY:
            raise ValueError(f"{what}: {ERR_BLOCK_TINY}")
        check_code(rc, what)
        return tuple((q[i], d[i], s[i]) if q81 else (q[i], d[i]) for i in (0, 1))
