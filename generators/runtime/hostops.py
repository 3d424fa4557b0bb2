"""The decoder's per-token small ops: a numpy reference and its C twin (docs/runtime.md,
"Host numerics").

    from generators.runtime import hostops
    y = hostops.rmsnorm(x, w, eps)          # the C library when it is built, else numpy
    with hostops.using("numpy"): ...        # "numpy" | "c" | "auto" (default)

Every op is defined on float32 with only correctly rounded IEEE-754 operations (+ - * / sqrt,
conversions, compares, round half to even) in a fixed order, so the numpy functions here and
the C functions of ``csrc/tphost.c`` give the same bits on x86-64 (SSE2) and on the board's
ARMv7 (VFP). What that rules out, and what replaces it:

* numpy's pairwise ``sum``/``mean``: the sum of squares of RMSNorm runs over 8 lanes (element
  i into lane i % 8, in order) combined as ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7));
  numpy forms the lanes with ``np.add.reduce(a.reshape(-1, 8), axis=0)``, which adds row after
  row (tests/test_hostops.py checks it against a Python loop);
* libm / numpy ``exp``: :func:`exp` is Cephes expf's polynomial after a reduction by rint and
  a power of two built from bits (a few ulp; both paths run the same operations);
* float64 anywhere in the per-token path, except the score multiplier of the attention frame
  (nine per layer, the same double arithmetic as ``generators.golden.attention``).

``TERNARY_PYNQ_HOSTOPS=numpy|c|auto`` picks the path for a process; ``auto`` uses C when the
library is built (``generators.runtime.hostlib``) and warns once, then runs numpy, when not.
"""
from __future__ import annotations

import contextlib
import math
import os
import warnings
from typing import Iterator, Optional, Sequence, Tuple

import numpy as np

__all__ = ["rmsnorm", "rope", "rope_tables", "silu_mul", "exp", "add", "sumsq", "absmax",
           "quantise", "dequant_i32", "dequant_f32", "kv_step", "kv_requantise", "kv_row",
           "kv_append", "score_scale",
           "score_multiplier", "attention_out", "embed_q8_0", "embed_int8", "f16_to_f32",
           "argmax", "use", "using", "active", "NUMPY", "HostOpsWarning", "ENV"]

ENV = "TERNARY_PYNQ_HOSTOPS"
F32 = np.float32
LANES = 8

#: 1.5 * 2**23: v + MAGIC rounds |v| <= 2**22 to an integer (half to even), whose bits are
#: MAGIC_BITS + rint(v)
MAGIC = F32(12582912.0)
MAGIC_BITS = 0x4B400000


def _h(hexstr: str) -> np.float32:
    """A float32 constant written exactly (the C source writes the same hex literal)."""
    v = F32(float.fromhex(hexstr))
    assert float(v) == float.fromhex(hexstr), hexstr
    return v


# exp: Cephes expf (polynomial on |r| <= ln2 / 2), x clamped so that 2^n and the result stay
# normal floats
EXP_LO, EXP_HI = F32(-86.0), F32(88.0)
EXP_LOG2E = _h("0x1.715476p+0")
EXP_C1 = _h("0x1.63p-1")                 # ln 2, high part (9 bits: n * C1 exact)
EXP_C2 = _h("-0x1.bd0106p-13")           # ln 2 - C1
EXP_P = (_h("0x1.a0d2cep-13"), _h("0x1.6e879cp-10"), _h("0x1.111210p-7"),
         _h("0x1.555382p-5"), _h("0x1.555554p-3"), F32(0.5))

ERR_NONFINITE = "holds NaN or infinity"
ERR_TINY = "max|x| is so small that the scale overflows float32"


class HostOpsWarning(RuntimeWarning):
    """The C host kernels are not available: the numpy path runs."""


# --------------------------------------------------------------------------- argument checks

def _f32(a, what: str, ndim: Optional[int] = None) -> np.ndarray:
    arr = np.ascontiguousarray(a, dtype=F32)
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{what}: expected a {ndim}-D array, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{what}: empty")
    return arr


def _same(a: np.ndarray, b: np.ndarray, what: str) -> None:
    if a.shape != b.shape:
        raise ValueError(f"{what}: shapes {a.shape} and {b.shape} differ")


# --------------------------------------------------------------------------- numpy reference

def _absmax_bits(x: np.ndarray) -> np.ndarray:
    """max |x| over the last axis, as float32 bits (order-free: integers)."""
    return np.max(x.view(np.uint32) & np.uint32(0x7FFFFFFF), axis=-1)


def _rint_clamp(v: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """int8 of round-half-even(clip(v, lo, hi)). Every caller's |v| is below 127.5, so the clip
    never acts (the proof is in tphost.c, which leaves it out); it states the contract."""
    return np.rint(np.clip(v, F32(lo), F32(hi))).astype(np.int8)


def _exp(x: np.ndarray) -> np.ndarray:
    xc = np.minimum(np.maximum(x, EXP_LO), EXP_HI)
    mg = xc * EXP_LOG2E + MAGIC
    # 2^n, n = rint(x / ln 2): (bits(mg) + 127) << 23 (MAGIC_BITS << 23 is 0 mod 2^32)
    k = (mg.view(np.uint32) + np.uint32(127)) << np.uint32(23)
    nf = mg - MAGIC
    r = (xc - nf * EXP_C1) - nf * EXP_C2
    q = np.full_like(r, EXP_P[0])
    for c in EXP_P[1:]:
        q = q * r + c
    p = (q * (r * r) + r) + F32(1.0)
    return p * k.view(F32)


class _NumpyOps:
    """The reference: every function takes the checked, contiguous float32 / int arrays the
    public functions prepare, and returns new arrays."""

    name = "numpy"

    @staticmethod
    def sumsq(x):
        n = x.shape[0]
        with np.errstate(over="ignore", under="ignore"):
            sq = x * x
        if n % LANES:
            sq = np.concatenate([sq, np.zeros(LANES - n % LANES, F32)])
        lanes = np.add.reduce(sq.reshape(-1, LANES), axis=0)    # row after row, per lane
        t = lanes[:4] + lanes[4:]
        u = t[:2] + t[2:]
        return u[0] + u[1]

    @staticmethod
    def absmax(x):
        b = _absmax_bits(x)
        if b >= 0x7F800000:
            raise ValueError(f"absmax: x {ERR_NONFINITE}")
        return b.view(F32)

    @staticmethod
    def argmax(x):
        return int(np.argmax(x))

    @classmethod
    def rmsnorm(cls, x, w, eps):
        ms = cls.sumsq(x) / F32(x.shape[0])
        inv = F32(1.0) / np.sqrt(ms + eps)
        return (x * inv) * w

    @staticmethod
    def rope(x, cos_h, sin_h):
        h = x.shape[1] // 2
        a, b = x[:, :h], x[:, h:]
        y = np.empty_like(x)
        y[:, :h] = a * cos_h - b * sin_h
        y[:, h:] = b * cos_h + a * sin_h
        return y

    @staticmethod
    def exp(x):
        return _exp(x)

    @staticmethod
    def silu_mul(g, u):
        return (g / (F32(1.0) + _exp(-g))) * u

    @staticmethod
    def add(a, b):
        return a + b

    @staticmethod
    def quantise_rows(x):
        bits = _absmax_bits(x)
        if np.any(bits >= 0x7F800000):
            raise ValueError(f"quantise: x {ERR_NONFINITE}")
        amax = bits.view(F32)
        with np.errstate(over="ignore", divide="ignore"):
            s = np.where(bits > 0, F32(127.0) / np.where(bits > 0, amax, F32(1.0)), F32(1.0))
        if not np.all(np.isfinite(s)):
            raise ValueError(f"quantise: {ERR_TINY}")
        return _rint_clamp(x * s[:, None], -128, 127), s.astype(F32)

    @staticmethod
    def dequant_i32(acc, scale, s):
        inv = F32(1.0) / s
        return (acc.astype(F32) * scale) * inv

    @staticmethod
    def dequant_f32(v, s):
        return v * (F32(1.0) / s)

    @staticmethod
    def kv_step(x, step):
        bits = _absmax_bits(x)
        if bits >= 0x7F800000:
            raise ValueError(f"kv_step: the row {ERR_NONFINITE}")
        m = bits.view(F32)
        if not m > F32(127.0) * step:
            return F32(step), F32(0.0), False
        new = m / F32(127.0)
        with np.errstate(over="ignore", divide="ignore"):
            if not np.isfinite(F32(1.0) / new):
                raise ValueError(f"kv_step: {ERR_TINY}")
        return F32(new), (step / new if step > 0 else F32(0.0)), True

    @staticmethod
    def kv_requantise(q, ratio):
        q[...] = _rint_clamp(q.astype(F32) * ratio, -127, 127)

    @staticmethod
    def kv_row(x, step):
        if step > 0:
            return _rint_clamp(x * (F32(1.0) / step), -127, 127)
        return np.zeros(x.shape, np.int8)

    @classmethod
    def kv_append(cls, rows, t, step, x):
        step, ratio, grew = cls.kv_step(x, step)
        if ratio > 0 and t:
            cls.kv_requantise(rows[:t], ratio)
        rows[t] = cls.kv_row(x, step)
        return step, grew

    @staticmethod
    def score_scale(k_step, s_q, d):
        return float(k_step) / (float(s_q) * math.sqrt(d))

    @staticmethod
    def score_multiplier(c, cfg):
        from generators.golden import attention as gatt
        try:
            return gatt.score_multiplier(c, cfg)
        except OverflowError as e:          # r * 2**SHIFT is infinite: no MULT either
            raise ValueError(f"score scale c = {c!r}: {e}") from None

    @staticmethod
    def attention_out(y, z, v_step, frac_bits):
        with np.errstate(over="ignore", under="ignore"):
            c = (z.astype(F32) / F32(127 * 2 ** frac_bits)) * v_step
            return y.astype(F32) * c[:, None]

    @staticmethod
    def f16_to_f32(h):
        return h.view(np.float16).astype(F32)

    @staticmethod
    def embed_q8_0(blocks, n):
        b = blocks.reshape(-1, 34)
        d = b[:, :2].copy().view("<f2").astype(F32)
        q = b[:, 2:].view(np.int8).astype(F32)
        return (q * d).reshape(-1)[:n]

    @staticmethod
    def embed_int8(q, scale):
        return q.astype(F32) * scale


NUMPY = _NumpyOps()

# --------------------------------------------------------------------------- the active path

_state = {"name": None, "ops": None, "warned": False}


def _c_ops():
    from . import hostlib
    return hostlib.load()


def _resolve(name: str):
    if name == "numpy":
        return NUMPY
    if name == "c":
        ops, why = _c_ops()
        if ops is None:
            raise RuntimeError(f"{ENV}=c or hostops.use('c'): the C host kernels are not "
                               f"available ({why})")
        return ops
    if name == "auto":
        ops, why = _c_ops()
        if ops is None:
            if not _state["warned"]:
                _state["warned"] = True
                warnings.warn(f"generators.runtime.hostops: the C host kernels are not available "
                              f"({why}); the numpy path runs (the same bits, slower)",
                              HostOpsWarning, stacklevel=3)
            return NUMPY
        return ops
    raise ValueError(f"host ops path must be 'numpy', 'c' or 'auto', got {name!r}")


def use(name: str) -> str:
    """Select the path for every later call: "numpy", "c" (an error when not built) or "auto".
    Returns the name of the path now active."""
    ops = _resolve(name)
    _state["name"], _state["ops"] = name, ops
    return ops.name


def _ops():
    ops = _state["ops"]
    if ops is None:
        use(os.environ.get(ENV, "auto") or "auto")
        ops = _state["ops"]
    return ops


def active() -> str:
    """"c" or "numpy": the path the next call runs."""
    return _ops().name


@contextlib.contextmanager
def using(name: str) -> Iterator[str]:
    """``with using("numpy"): ...`` runs the block on that path, then restores the previous."""
    prev = (_state["name"], _state["ops"])
    try:
        yield use(name)
    finally:
        _state["name"], _state["ops"] = prev


# --------------------------------------------------------------------------- public functions

def sumsq(x) -> np.float32:
    """Sum of x[i]^2 in the 8-lane order (RMSNorm's mean)."""
    return F32(_ops().sumsq(_f32(x, "sumsq", 1)))


def absmax(x) -> np.float32:
    """max |x[i]| (exact); ValueError on NaN or infinity."""
    return F32(_ops().absmax(_f32(x, "absmax", 1)))


def argmax(x) -> int:
    """Greedy sampling: the index of the first maximum (numpy.argmax, NaN included)."""
    return _ops().argmax(_f32(x, "argmax", 1))


def rmsnorm(x, w, eps: float) -> np.ndarray:
    """``(x * (1 / sqrt(sumsq(x) / n + eps))) * w``, float32."""
    x, w = _f32(x, "rmsnorm x", 1), _f32(w, "rmsnorm w", 1)
    _same(x, w, "rmsnorm")
    return _ops().rmsnorm(x, w, F32(eps))


def rope_tables(head_dim: int, theta: float, positions: int) -> Tuple[np.ndarray, np.ndarray]:
    """cos and sin (positions, head_dim / 2), float32, for the rotate_half RoPE: angle
    ``p * inv_freq[i]``, ``inv_freq[i] = 1 / theta ** (2 i / head_dim)``, each value computed
    in double (Python's math: the C library's pow, cos and sin) and rounded once to float32.
    Computed once per decoder; the C path gets these tables, it never computes them."""
    if head_dim % 2 or head_dim <= 0 or positions <= 0:
        raise ValueError(f"rope_tables: head_dim {head_dim} must be even and positive, "
                         f"positions {positions} positive")
    inv = [1.0 / (theta ** (i / head_dim)) for i in range(0, head_dim, 2)]
    ang = [[p * f for f in inv] for p in range(positions)]
    cos = np.array([[math.cos(a) for a in row] for row in ang], np.float64).astype(F32)
    sin = np.array([[math.sin(a) for a in row] for row in ang], np.float64).astype(F32)
    return cos, sin


def rope(x, cos_h, sin_h) -> np.ndarray:
    """rotate_half RoPE of x (heads, d) with one position's cos_h, sin_h (d / 2): with
    h = d / 2, ``y[:h] = x[:h]*c - x[h:]*s``, ``y[h:] = x[h:]*c + x[:h]*s``."""
    x = _f32(x, "rope x", 2)
    c, s = _f32(cos_h, "rope cos", 1), _f32(sin_h, "rope sin", 1)
    if x.shape[1] % 2 or c.shape[0] != x.shape[1] // 2 or s.shape != c.shape:
        raise ValueError(f"rope: x {x.shape} needs an even d and cos/sin of d/2, got "
                         f"{c.shape}, {s.shape}")
    return _ops().rope(x, c, s)


def exp(x) -> np.ndarray:
    """exp(x), x clamped to [-86, 88] (Cephes expf's polynomial; a few ulp)."""
    return _ops().exp(_f32(x, "exp", 1))


def silu_mul(g, u) -> np.ndarray:
    """``(g / (1 + exp(-g))) * u`` (SiLU(gate) * up)."""
    g, u = _f32(g, "silu_mul g", 1), _f32(u, "silu_mul u", 1)
    _same(g, u, "silu_mul")
    return _ops().silu_mul(g, u)


def add(a, b) -> np.ndarray:
    """a + b (the residual)."""
    a, b = _f32(a, "add a", 1), _f32(b, "add b", 1)
    _same(a, b, "add")
    return _ops().add(a, b)


def quantise(x):
    """Per-token absmax INT8 (BitNet; ``generators.packing.absmax_quantize_activations`` in
    float32): per row, ``s = 127 / max|x|`` (1 for an all-zero row),
    ``q = clip(rint(x * s), -128, 127)``. 1-D x: (q, s float32); 2-D: one s per row."""
    arr = np.ascontiguousarray(x, dtype=F32)
    if arr.ndim not in (1, 2) or arr.size == 0:
        raise ValueError(f"quantise: expected a non-empty 1-D or 2-D array, got shape "
                         f"{arr.shape}")
    q, s = _ops().quantise_rows(arr.reshape(-1, arr.shape[-1]))
    return (q.reshape(arr.shape), F32(s[0])) if arr.ndim == 1 else (q, s)


def dequant_i32(acc, scale, s) -> np.ndarray:
    """Engine results of INT8 / ternary rows: ``((float)acc * scale) * (1 / s)``."""
    acc = np.ascontiguousarray(acc, dtype=np.int32)
    scale = _f32(scale, "dequant scale", 1)
    if acc.ndim != 1 or acc.shape != scale.shape:
        raise ValueError(f"dequant_i32: acc {acc.shape} and scale {scale.shape} must be the "
                         f"same 1-D shape")
    return _ops().dequant_i32(acc, scale, F32(s))


def dequant_f32(v, s) -> np.ndarray:
    """Engine results of Q4_1 rows (float32 sums): ``v * (1 / s)``."""
    return _ops().dequant_f32(_f32(v, "dequant_f32", 1), F32(s))


#: the largest ratio kv_requantise takes (kv_step's are at most 1 + 3 * 2^-24)
KV_RATIO_MAX = F32(1.0 + 2.0 ** -20)


def kv_step(x, step) -> Tuple[np.float32, np.float32, bool]:
    """The running absmax step of a KV head for one new K or V row x: ``m = max|x|``; if
    ``m > 127 * step`` the step becomes ``m / 127`` and the cached rows must be requantised by
    ``ratio = old / new`` (0 while the old step was 0). Returns (step, ratio, grew)."""
    return _ops().kv_step(_f32(x, "kv_step x", 1), F32(step))


def kv_requantise(q: np.ndarray, ratio) -> None:
    """The cached INT8 values q (any layout, a view of the cache) become
    ``clip(rint(q * ratio), -127, 127)`` in place (ratio: kv_step's)."""
    if not (isinstance(q, np.ndarray) and q.dtype == np.int8 and q.flags.writeable):
        raise ValueError("kv_requantise: q must be a writeable int8 array")
    ratio = F32(ratio)
    if not (F32(0.0) < ratio <= KV_RATIO_MAX):
        raise ValueError(f"kv_requantise: ratio {ratio} outside (0, 1 + 2^-20] (kv_step's)")
    if q.size:
        _ops().kv_requantise(q, ratio)


def kv_row(x, step) -> np.ndarray:
    """One K or V row quantised with its head's step: ``clip(rint(x * (1 / step)), -127,
    127)`` (zeros while the step is 0)."""
    return _ops().kv_row(_f32(x, "kv_row x", 1), F32(step))


def kv_append(rows: np.ndarray, t: int, step, x) -> Tuple[np.float32, bool]:
    """Append one K or V row x (d) at row t of a head's INT8 rows (``rows``: int8 (>= t+1, d),
    C-contiguous, written in place) with the running absmax step (docs/runtime.md). Returns
    (the new step, whether it grew and rows [0, t) were requantised)."""
    x = _f32(x, "kv_append x", 1)
    if not (isinstance(rows, np.ndarray) and rows.dtype == np.int8 and rows.ndim == 2
            and rows.flags.c_contiguous and rows.flags.writeable):
        raise ValueError("kv_append: rows must be a writeable C-contiguous int8 (L, d) array")
    if rows.shape[1] != x.shape[0] or not 0 <= t < rows.shape[0]:
        raise ValueError(f"kv_append: row {t} of d = {x.shape[0]} outside rows {rows.shape}")
    return _ops().kv_append(rows, int(t), F32(step), x)


def score_scale(k_step, s_q, d: int) -> float:
    """The real score scale of one query head, ``k_step / (s_q * sqrt(d))`` in double."""
    return _ops().score_scale(F32(k_step), F32(s_q), int(d))


def score_multiplier(c: float, cfg=None) -> Tuple[int, int]:
    """(MULT, SHIFT) of a score scale: ``generators.golden.attention.score_multiplier`` (the
    numpy path calls it; C computes the same in double)."""
    from generators.golden import attention as gatt
    return _ops().score_multiplier(float(c), cfg or gatt.DEFAULT_CONFIG)


def attention_out(y, z: Sequence[int], v_step, frac_bits: int = 24) -> np.ndarray:
    """The attention engine's INT8 results y (heads, d) in real units:
    ``(float)y * (((float)Z / (127 * 2^frac_bits)) * v_step)`` per head."""
    y = np.ascontiguousarray(y, dtype=np.int8)
    z = np.ascontiguousarray(z, dtype=np.uint32)
    if y.ndim != 2 or z.shape != (y.shape[0],) or not 0 <= frac_bits <= 24:
        raise ValueError(f"attention_out: y {y.shape}, Z {z.shape}, frac_bits {frac_bits}")
    return _ops().attention_out(y, z, F32(v_step), int(frac_bits))


def f16_to_f32(h) -> np.ndarray:
    """fp16 bit patterns (uint16) -> float32 (exact)."""
    return _ops().f16_to_f32(np.ascontiguousarray(h, dtype=np.uint16))


def embed_q8_0(blocks, n: int) -> np.ndarray:
    """One embedding row from GGUF Q8_0 blocks (34 bytes: fp16 d, 32 int8 q): ``d * q``
    (exact in float32, as the gguf package dequantises)."""
    b = np.ascontiguousarray(blocks, dtype=np.uint8).reshape(-1)
    if b.size % 34 or not 0 < n <= b.size // 34 * 32 or n <= (b.size // 34 - 1) * 32:
        raise ValueError(f"embed_q8_0: {b.size} bytes are not the Q8_0 blocks of {n} values")
    return _ops().embed_q8_0(b, int(n))


def embed_int8(q, scale) -> np.ndarray:
    """One embedding row stored as INT8 with a row scale: ``(float)q * scale``."""
    q = np.ascontiguousarray(q, dtype=np.int8)
    if q.ndim != 1 or q.size == 0:
        raise ValueError(f"embed_int8: expected a non-empty 1-D row, got {q.shape}")
    return _ops().embed_int8(q, F32(scale))
