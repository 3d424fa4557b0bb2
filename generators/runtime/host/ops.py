"""The decoder's per-token small ops: a numpy reference and its C twin (docs/runtime.md,
"Host numerics").

    from generators.runtime.host import ops as hostops
    y = hostops.rmsnorm(x, w, eps)          # the C library when it is built, else numpy
    with hostops.using("numpy"): ...        # "numpy" | "c" | "auto" (default)

Every op is defined on float32 with only correctly rounded IEEE-754 operations (+ - * / sqrt,
conversions, compares, round half to even) in a fixed order, so the numpy functions here and
the C functions of ``csrc/tphost.c`` give the same bits on x86-64 (SSE2), on the board's
ARMv7 with NEON (its build) and on ARMv7's VFP alone. The element-wise multiplies, adds,
subtracts and clamps are NEON's (:func:`_fz`, :func:`_mulz`, :func:`_addz`): flush-to-zero,
a subnormal operand read as a zero of its sign and a result tiny before rounding
(0 < |exact| < FLT_MIN) written as one; division, sqrt and the scalar set-up values (1 / s,
RMSNorm's mean, the KV steps) stay IEEE (no NEON instruction). NaN inputs to the float
kernels give a NaN whose payload is the CPU's (NEON: the default NaN): outside the bits
these twins define. What the fixed order rules out, and what replaces it:

* numpy's pairwise ``sum``/``mean``: the sum of squares of RMSNorm runs over 8 lanes (element
  i into lane i % 8, in order) combined as ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7));
  numpy forms the lanes with ``np.add.reduce(a.reshape(-1, 8), axis=0)``, which adds row after
  row (tests/runtime/host/test_hostops.py checks it against a Python loop);
* libm / numpy ``exp``: :func:`exp` is Cephes expf's polynomial after a reduction by rint and
  a power of two built from bits (a few ulp; both paths run the same operations);
* float64 anywhere in the per-token path, except the score multiplier of the attention frame
  (nine per layer, the same double arithmetic as ``generators.golden.attention``).

``TERNARY_PYNQ_HOSTOPS=numpy|c|auto|float64`` picks the path for a process; ``auto`` uses C
when the library is built (``generators.runtime.host.clib``) and warns once, then runs numpy,
when not. ``float64`` runs the numpy reference with every array and scalar in float64 (the
same operations in the same order; exp to float64 accuracy): the reference precision that
``make quality`` compares the float32 path against (docs/quality.md).
"""
from __future__ import annotations

import contextlib
import math
import os
import warnings
from typing import Iterator, Optional, Sequence, Tuple

import numpy as np

from generators.golden import attention as gatt
from generators.golden import blocks as gblocks

from . import clib as hostlib
from .clib import ERR_BLOCK_TINY, ERR_NONFINITE, ERR_TINY

__all__ = ["rmsnorm", "rope", "rope_tables", "silu_mul", "exp", "add", "sumsq", "absmax",
           "quantise", "dequant_i32", "dequant_f32", "kv_step", "kv_requantise", "kv_row",
           "kv_append", "score_scale",
           "score_multiplier", "attention_out", "embed_q8_0", "embed_int8", "f16_to_f32",
           "argmax", "f32_to_f16", "quantise_q8_0", "quantise_q8_1", "use", "using", "active",
           "dtype", "NUMPY", "NUMPY64", "HostOpsWarning", "ENV"]

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



#: the per-block quantisers' domain: a block's max|x| is 0 or at least 2^-118 (bits), where
#: NEON's flush of a subnormal x cannot change a code (tphost.c quant_block)
BLOCK_AMAX_MIN_BITS = 0x04800000

_EXP_BITS, _SIGN_BIT = np.uint32(0x7F800000), np.uint32(0x80000000)
FLT_MIN = float(np.finfo(F32).tiny)


def _fz(v):
    """NEON's operand flush (float32): a subnormal becomes the zero of its sign."""
    v = np.asarray(v, F32)
    b = v.view(np.uint32)
    return np.where((b & _EXP_BITS) == 0, b & _SIGN_BIT, b).astype(np.uint32).view(F32)


def _mulz(a, b):
    """a * b of flushed float32 operands with NEON's result flush: the exact product (a double
    holds it) is a zero of its sign when 0 < |a b| < FLT_MIN, even where it rounds to FLT_MIN;
    else rounded once to float32."""
    with np.errstate(over="ignore", invalid="ignore"):
        p = np.asarray(a, np.float64) * np.asarray(b, np.float64)
        r = p.astype(F32)
    return np.where(np.abs(p) < FLT_MIN, np.copysign(F32(0.0), r), r).astype(F32)


def _addz(a, b):
    """a + b of flushed float32 operands, flushed (a tiny sum is exact: a subnormal)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return _fz(np.asarray(a, F32) + np.asarray(b, F32))


def _subz(a, b):
    with np.errstate(over="ignore", invalid="ignore"):
        return _fz(np.asarray(a, F32) - np.asarray(b, F32))


# Division and sqrt, float32, IEEE (correctly rounded) on every CPU numpy runs on. numpy's own
# float32 ``divide`` and ``sqrt`` are not on ARMv7: its NEON universal intrinsics have no divide
# or sqrt instruction there and compute them from the reciprocal (square root) estimate and
# Newton-Raphson steps (numpy/numpy#16247, ``npyv_sqrt_f32`` / ``npyv_div_f32`` when not
# NPY_SIMD_F64), 1 ulp off now and then: seen in an armhf Debian root (numpy 1.24.2) as
# RMSNorm's 1 / sqrt 0x3f84618d against the C kernel's IEEE 0x3f84618c. So the twins divide and
# take roots in float64 (numpy's float64 loops are scalar VFP code on ARMv7) and round once to
# float32: that is the correctly rounded float32 result, since 53 >= 2 * 24 + 2 bits make the
# double rounding innocuous for / and sqrt (Figueroa, "When is double rounding innocuous?",
# 1995), subnormal results included.

def _div32(a, b):
    """a / b of float32 values, correctly rounded (IEEE), as 0-d results for scalars."""
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        r = (np.asarray(a, np.float64) / np.asarray(b, np.float64)).astype(F32)
    return r[()]


def _sqrt32(a):
    """sqrt(a) of float32 values, correctly rounded (IEEE)."""
    with np.errstate(invalid="ignore"):
        r = np.sqrt(np.asarray(a, np.float64)).astype(F32)
    return r[()]


class HostOpsWarning(RuntimeWarning):
    """The C host kernels are not available: the numpy path runs."""


# --------------------------------------------------------------------------- argument checks

def _f32(a, what: str, ndim: Optional[int] = None, dt=F32) -> np.ndarray:
    arr = np.ascontiguousarray(a, dtype=dt)
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


def _rint_clamp(v: np.ndarray, lo: int, hi: int, dt=F32) -> np.ndarray:
    """int8 of round-half-even(clip(v, lo, hi)). Every caller's |v| is below 127.5, so the clip
    never acts (the proof is in tphost.c, which leaves it out); it states the contract."""
    return np.rint(np.clip(v, dt(lo), dt(hi))).astype(np.int8)


class _ExpConsts:
    """The constants of :func:`_exp` for one float type: a Cody-Waite reduction by
    n = rint(x / ln 2) (the magic-number rounding), r = (x - n*C1) - n*C2, then
    ``exp(r) = (q(r) * r^2 + r) + 1`` by Horner and 2^n built from bits.

    float32: Cephes expf (its degree-5 q; a few ulp). float64 (the reference precision,
    ``use("float64")``): the same steps with fdlibm's split of ln 2 and the Taylor q of degree 11
    (|r| <= ln2/2: truncation below 1e-17, a few float64 ulp)."""

    def __init__(self, dt):
        self.F = dt
        if dt == np.float32:
            self.magic, self.bits = MAGIC, np.uint32(MAGIC_BITS)
            self.uint, self.bias, self.shift = np.uint32, np.uint32(127), np.uint32(23)
            self.log2e, self.c1, self.c2, self.p = EXP_LOG2E, EXP_C1, EXP_C2, EXP_P
        else:
            self.magic = dt(1.5 * 2.0 ** 52)
            self.uint, self.bias, self.shift = np.uint64, np.uint64(1023), np.uint64(52)
            self.log2e = dt(float.fromhex("0x1.71547652b82fep+0"))
            self.c1 = dt(float.fromhex("0x1.62e42fee00000p-1"))
            self.c2 = dt(float.fromhex("0x1.a39ef35793c76p-33"))
            self.p = tuple(dt(1.0 / math.factorial(k)) for k in range(13, 1, -1))
        self.lo, self.hi = dt(EXP_LO), dt(EXP_HI)
        self.fz, self.mul, self.add, self.sub = _arith(dt)


def _arith(dt):
    """(fz, mul, add, sub): NEON's flushing float32 operations, or float64's plain ones (the
    reference precision has no flush)."""
    if dt == np.float32:
        return _fz, _mulz, _addz, _subz
    return (lambda v: v), np.multiply, np.add, np.subtract


def _divsqrt(dt):
    """(div, sqrt): IEEE float32 on every CPU (:func:`_div32`), or float64's own."""
    if dt == np.float32:
        return _div32, _sqrt32
    return np.divide, np.sqrt


def _exp(x: np.ndarray, c: "_ExpConsts" = None) -> np.ndarray:
    c = c or _EXP32
    fz, mul, add, sub = c.fz, c.mul, c.add, c.sub
    xc = np.minimum(np.maximum(fz(x), c.lo), c.hi)
    mg = add(mul(xc, c.log2e), c.magic)
    # 2^n, n = rint(x / ln 2): (bits(mg) + bias) << mantissa bits (the magic's own bits shift
    # out: MAGIC_BITS << 23 is 0 mod 2^32, and likewise in float64)
    k = (mg.view(c.uint) + c.bias) << c.shift
    nf = sub(mg, c.magic)
    r = sub(sub(xc, mul(nf, c.c1)), mul(nf, c.c2))
    q = np.full_like(r, c.p[0])
    for coef in c.p[1:]:
        q = add(mul(q, r), coef)
    p = add(add(mul(q, mul(r, r)), r), c.F(1.0))
    return mul(p, k.view(c.F))


_EXP32 = _ExpConsts(np.float32)


class _NumpyOps:
    """The reference: every function takes the checked, contiguous arrays the public functions
    prepare (of ``self.F``), and returns new arrays. ``F`` is float32 (NUMPY: the C library's
    twin, bit for bit) or float64 (NUMPY64: the same operations in the same order in float64,
    the reference precision of ``use("float64")``). The element-wise ops, ``sumsq`` and
    ``rmsnorm`` (over the last axis), ``quantise_rows`` and the dequantisations (``s`` of shape
    (rows, 1)) also take a leading batch axis, one token per row, with the same bits per row
    (generators/runtime/model/forced.py runs a whole text so)."""

    def __init__(self, dt, name: str):
        self.F, self.name = dt, name
        self._e = _ExpConsts(dt)
        self._fz, self._mul, self._add, self._sub = _arith(dt)
        self._div, self._sqrt = _divsqrt(dt)

    def sumsq(self, x):
        n = x.shape[-1]
        fz, mul, add = self._fz, self._mul, self._add
        xz = fz(x)
        with np.errstate(over="ignore", under="ignore"):
            sq = mul(xz, xz)
        if n % LANES:
            pad = np.zeros(sq.shape[:-1] + (LANES - n % LANES,), self.F)
            sq = np.concatenate([sq, pad], axis=-1)
        # row after row, per lane. The additions are NEON's too, but their flush never acts:
        # every flushed square is +0 or >= FLT_MIN, so every partial sum is 0 or >= FLT_MIN
        lanes = np.add.reduce(sq.reshape(sq.shape[:-1] + (-1, LANES)), axis=-2)
        t = add(lanes[..., :4], lanes[..., 4:])
        u = add(t[..., :2], t[..., 2:])
        return add(u[..., 0], u[..., 1])

    def absmax(self, x):
        b = self._absmax(x)
        if not np.isfinite(b):
            raise ValueError(f"absmax: x {ERR_NONFINITE}")
        return b

    def _absmax(self, x):
        """max |x| over the last axis (exact, order-free; NaN propagates)."""
        if self.F == np.float32:
            return _absmax_bits(x).view(F32)
        return np.max(np.abs(x), axis=-1)

    @staticmethod
    def argmax(x):
        return int(np.argmax(x))

    def rmsnorm(self, x, w, eps):
        fz, mul = self._fz, self._mul
        ms = self._div(self.sumsq(x), self.F(x.shape[-1]))
        inv = fz(self._div(self.F(1.0), self._sqrt(ms + self.F(eps))))   # IEEE, flushed as NEON reads it
        if np.ndim(inv):
            inv = inv[..., None]
        return mul(mul(fz(x), inv), fz(w))

    def rope(self, x, cos_h, sin_h):
        fz, mul, add, sub = self._fz, self._mul, self._add, self._sub
        h = x.shape[-1] // 2
        a, b, c, s = fz(x[..., :h]), fz(x[..., h:]), fz(cos_h), fz(sin_h)
        y = np.empty_like(x)
        y[..., :h] = sub(mul(a, c), mul(b, s))
        y[..., h:] = add(mul(b, c), mul(a, s))
        return y

    def exp(self, x):
        return _exp(x, self._e)

    def silu_mul(self, g, u):
        # the division IEEE on the unflushed g (no NEON divide), the rest NEON's
        den = self._add(self.F(1.0), _exp(-g, self._e))
        return self._mul(self._fz(self._div(g, den)), self._fz(u))

    def add(self, a, b):
        return self._add(self._fz(a), self._fz(b))

    def quantise_rows(self, x):
        amax = self._absmax(x)
        if not np.all(np.isfinite(amax)):
            raise ValueError(f"quantise: x {ERR_NONFINITE}")
        F = self.F
        with np.errstate(over="ignore", divide="ignore"):
            s = np.where(amax > 0, self._div(F(127.0), np.where(amax > 0, amax, F(1.0))), F(1.0))
        if not np.all(np.isfinite(s)):
            raise ValueError(f"quantise: {ERR_TINY}")
        return _rint_clamp(x * s[:, None], -128, 127, F), s.astype(F)

    def dequant_i32(self, acc, scale, s):
        inv = self._fz(self._div(self.F(1.0), s))
        return self._mul(self._mul(acc.astype(self.F), self._fz(scale)), inv)

    def dequant_f32(self, v, s):
        return self._mul(self._fz(v), self._fz(self._div(self.F(1.0), s)))

    def dequant_b_i32(self, acc, scale, s):
        """(B, n): vector j of row-major B-vector results ``acc`` (n B,), dequant_i32's bits."""
        a = acc.reshape(-1, len(s))
        return np.stack([self.dequant_i32(np.ascontiguousarray(a[:, j]), scale, s[j])
                         for j in range(len(s))])

    def dequant_b_f32(self, v, s):
        a = v.reshape(-1, len(s))
        return np.stack([self.dequant_f32(np.ascontiguousarray(a[:, j]), s[j])
                         for j in range(len(s))])

    def kv_step(self, x, step):
        F = self.F
        m = self._absmax(x)
        if not np.isfinite(m):
            raise ValueError(f"kv_step: the row {ERR_NONFINITE}")
        if not m > F(127.0) * step:
            return F(step), F(0.0), False
        new = self._div(m, F(127.0))
        with np.errstate(over="ignore", divide="ignore"):
            if not np.isfinite(self._div(F(1.0), new)):
                raise ValueError(f"kv_step: {ERR_TINY}")
        return F(new), (F(self._div(step, new)) if step > 0 else F(0.0)), True

    def kv_requantise(self, q, ratio):
        q[...] = _rint_clamp(q.astype(self.F) * ratio, -127, 127, self.F)

    def kv_row(self, x, step):
        if step > 0:
            return _rint_clamp(x * self._div(self.F(1.0), step), -127, 127, self.F)
        return np.zeros(x.shape, np.int8)

    def kv_row16(self, x, step):
        if step > 0:
            v = x * self._div(self.F(1.0), step)
            return np.rint(np.clip(v, self.F(-KV16_MAX), self.F(KV16_MAX))).astype(np.int16)
        return np.zeros(x.shape, np.int16)

    def kv_append(self, rows, t, step, x):
        step, ratio, grew = self.kv_step(x, step)
        if ratio > 0 and t:
            self.kv_requantise(rows[:t], ratio)
        rows[t] = self.kv_row(x, step)
        return step, grew

    @staticmethod
    def score_scale(k_step, s_q, d):
        return float(k_step) / (float(s_q) * math.sqrt(d))

    @staticmethod
    def score_multiplier(c, cfg):
        try:
            return gatt.score_multiplier(c, cfg)
        except OverflowError as e:          # r * 2**SHIFT is infinite: no MULT either
            raise ValueError(f"score scale c = {c!r}: {e}") from None

    def attention_out(self, y, z, v_step, frac_bits):
        F = self.F
        with np.errstate(over="ignore", under="ignore"):
            c = self._div(z.astype(F), F(127 * 2 ** frac_bits)) * v_step        # IEEE: per head
            return self._mul(y.astype(F), self._fz(c)[:, None])

    def f16_to_f32(self, h):
        return h.view(np.float16).astype(self.F)

    def embed_q8_0(self, blocks, n):
        b = blocks.reshape(-1, 34)
        d = b[:, :2].copy().view("<f2").astype(self.F)
        q = b[:, 2:].view(np.int8).astype(self.F)
        return (q * d).reshape(-1)[:n]

    def embed_int8(self, q, scale):
        return self._mul(q.astype(self.F), self._fz(scale))

    # per-block activations: ggml's definition (generators/golden/blocks.py) in float32 on
    # every path (NUMPY64 included: not a per-token op yet), in the C kernels' domain
    @staticmethod
    def f32_to_f16(x):
        return gblocks.f32_to_f16(x)

    @staticmethod
    def quantise_blocks(x, q81: bool):
        what = "quantise_q8_1" if q81 else "quantise_q8_0"
        b = x.astype(F32).reshape(-1, gblocks.QK)
        if not np.all(np.isfinite(b)):
            raise ValueError(f"{what}: x {ERR_NONFINITE}")
        amax = _absmax_bits(b)
        if np.any((amax != 0) & (amax < BLOCK_AMAX_MIN_BITS)):
            raise ValueError(f"{what}: {ERR_BLOCK_TINY}")
        if q81:
            q, d, s = gblocks.quantize_q8_1(b.reshape(-1))
            return q.reshape(-1), d, s
        q, d = gblocks.quantize_q8_0(b.reshape(-1))
        return q.reshape(-1), d

    @staticmethod
    def quantise_parts(x, q81: bool):
        hi = _NumpyOps.quantise_blocks(x, q81)
        d = gblocks.f16_to_f32(hi[1]).astype(F32)
        b = x.astype(F32).reshape(-1, gblocks.QK)
        with np.errstate(over="ignore", invalid="ignore"):
            r = (b - d[:, None] * hi[0].reshape(b.shape).astype(F32)).astype(F32)
        r[_absmax_bits(r) < BLOCK_AMAX_MIN_BITS] = 0
        return hi, _NumpyOps.quantise_blocks(r.reshape(-1), q81)


NUMPY = _NumpyOps(np.float32, "numpy")
#: the same ops in float64 (``use("float64")``): the reference precision, numpy only
NUMPY64 = _NumpyOps(np.float64, "float64")

# --------------------------------------------------------------------------- the active path

_state = {"name": None, "ops": None, "warned": False}


def _c_ops():
    return hostlib.load()


def _resolve(name: str):
    if name == "numpy":
        return NUMPY
    if name == "float64":
        return NUMPY64
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
                warnings.warn(f"generators.runtime.host.ops: the C host kernels are not available "
                              f"({why}); the numpy path runs (the same bits, slower)",
                              HostOpsWarning, stacklevel=3)
            return NUMPY
        return ops
    raise ValueError(f"host ops path must be 'numpy', 'c', 'auto' or 'float64', got {name!r}")


def use(name: str) -> str:
    """Select the path for every later call: "numpy", "c" (an error when not built), "auto",
    or "float64" (the numpy reference run in float64: the same operations in the same order,
    every array and scalar float64; a measuring instrument for ``make quality``, not a path the
    board runs). Returns the name of the path now active."""
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
    """"c", "numpy" or "float64": the path the next call runs."""
    return _ops().name


def dtype():
    """The float type of the active path: numpy.float32, or numpy.float64 under "float64"."""
    return _ops().F


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
    o = _ops()
    return o.F(o.sumsq(_f32(x, "sumsq", 1, o.F)))


def absmax(x) -> np.float32:
    """max |x[i]| (exact); ValueError on NaN or infinity."""
    o = _ops()
    return o.F(o.absmax(_f32(x, "absmax", 1, o.F)))


def argmax(x) -> int:
    """Greedy sampling: the index of the first maximum (numpy.argmax, NaN included)."""
    o = _ops()
    return o.argmax(_f32(x, "argmax", 1, o.F))


def rmsnorm(x, w, eps: float) -> np.ndarray:
    """``(x * (1 / sqrt(sumsq(x) / n + eps))) * w``, float32."""
    o = _ops()
    x, w = _f32(x, "rmsnorm x", 1, o.F), _f32(w, "rmsnorm w", 1, o.F)
    _same(x, w, "rmsnorm")
    return o.rmsnorm(x, w, o.F(eps))


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
    o = _ops()
    x = _f32(x, "rope x", 2, o.F)
    c, s = _f32(cos_h, "rope cos", 1, o.F), _f32(sin_h, "rope sin", 1, o.F)
    if x.shape[1] % 2 or c.shape[0] != x.shape[1] // 2 or s.shape != c.shape:
        raise ValueError(f"rope: x {x.shape} needs an even d and cos/sin of d/2, got "
                         f"{c.shape}, {s.shape}")
    return o.rope(x, c, s)


def exp(x) -> np.ndarray:
    """exp(x), x clamped to [-86, 88] (Cephes expf's polynomial; a few ulp)."""
    o = _ops()
    return o.exp(_f32(x, "exp", 1, o.F))


def silu_mul(g, u) -> np.ndarray:
    """``(g / (1 + exp(-g))) * u`` (SiLU(gate) * up)."""
    o = _ops()
    g, u = _f32(g, "silu_mul g", 1, o.F), _f32(u, "silu_mul u", 1, o.F)
    _same(g, u, "silu_mul")
    return o.silu_mul(g, u)


def add(a, b) -> np.ndarray:
    """a + b (the residual)."""
    o = _ops()
    a, b = _f32(a, "add a", 1, o.F), _f32(b, "add b", 1, o.F)
    _same(a, b, "add")
    return o.add(a, b)


def quantise(x):
    """Per-token absmax INT8 (BitNet; ``generators.packing.absmax_quantize_activations`` in
    float32): per row, ``s = 127 / max|x|`` (1 for an all-zero row),
    ``q = clip(rint(x * s), -128, 127)``. 1-D x: (q, s float32); 2-D: one s per row."""
    o = _ops()
    arr = np.ascontiguousarray(x, dtype=o.F)
    if arr.ndim not in (1, 2) or arr.size == 0:
        raise ValueError(f"quantise: expected a non-empty 1-D or 2-D array, got shape "
                         f"{arr.shape}")
    q, s = o.quantise_rows(arr.reshape(-1, arr.shape[-1]))
    return (q.reshape(arr.shape), o.F(s[0])) if arr.ndim == 1 else (q, s)


def dequant_i32(acc, scale, s) -> np.ndarray:
    """Engine results of INT8 / ternary rows: ``((float)acc * scale) * (1 / s)``."""
    o = _ops()
    acc = np.ascontiguousarray(acc, dtype=np.int32)
    scale = _f32(scale, "dequant scale", 1, o.F)
    if acc.ndim != 1 or acc.shape != scale.shape:
        raise ValueError(f"dequant_i32: acc {acc.shape} and scale {scale.shape} must be the "
                         f"same 1-D shape")
    return o.dequant_i32(acc, scale, o.F(s))


def dequant_f32(v, s) -> np.ndarray:
    """Engine results of Q4_1 rows (float32 sums): ``v * (1 / s)``."""
    o = _ops()
    return o.dequant_f32(_f32(v, "dequant_f32", 1, o.F), o.F(s))


def dequant_b_i32(acc, scale, s) -> np.ndarray:
    """A B-vector frame's results of INT8 / ternary rows (n rows, row r's B results
    together: ``acc`` of n B int32), ``s`` the B vectors' scales: (B, n), vector j
    ``dequant_i32(acc[j::B], scale, s[j])`` bit for bit."""
    o = _ops()
    acc = np.ascontiguousarray(acc, dtype=np.int32).reshape(-1)
    scale = _f32(scale, "dequant scale", 1, o.F)
    s = _f32(s, "dequant_b scales", 1, o.F)
    if not 1 <= len(s) <= 256 or acc.size != scale.size * len(s):
        raise ValueError(f"dequant_b_i32: acc of {acc.size} words for {scale.size} rows and "
                         f"{len(s)} vectors (1..256)")
    return o.dequant_b_i32(acc, scale, s)


def dequant_b_f32(v, s) -> np.ndarray:
    """A B-vector frame's results of Q4_1 rows (float32 sums, row r's B together): (B, n),
    vector j ``dequant_f32(v[j::B], s[j])`` bit for bit."""
    o = _ops()
    v = _f32(np.asarray(v).reshape(-1), "dequant_b_f32", 1, o.F)
    s = _f32(s, "dequant_b scales", 1, o.F)
    if not 1 <= len(s) <= 256 or v.size % len(s):
        raise ValueError(f"dequant_b_f32: {v.size} words for {len(s)} vectors (1..256)")
    return o.dequant_b_f32(v, s)


#: the largest ratio kv_requantise takes (kv_step's are at most 1 + 3 * 2^-24)
KV_RATIO_MAX = F32(1.0 + 2.0 ** -20)


def kv_step(x, step) -> Tuple[np.float32, np.float32, bool]:
    """The running absmax step of a KV head for one new K or V row x: ``m = max|x|``; if
    ``m > 127 * step`` the step becomes ``m / 127`` and the cached rows must be requantised by
    ``ratio = old / new`` (0 while the old step was 0). Returns (step, ratio, grew)."""
    o = _ops()
    return o.kv_step(_f32(x, "kv_step x", 1, o.F), o.F(step))


def kv_requantise(q: np.ndarray, ratio) -> None:
    """The cached INT8 values q (any layout, a view of the cache) become
    ``clip(rint(q * ratio), -127, 127)`` in place (ratio: kv_step's)."""
    if not (isinstance(q, np.ndarray) and q.dtype == np.int8 and q.flags.writeable):
        raise ValueError("kv_requantise: q must be a writeable int8 array")
    o = _ops()
    ratio = o.F(ratio)
    if not (0.0 < ratio <= KV_RATIO_MAX):
        raise ValueError(f"kv_requantise: ratio {ratio} outside (0, 1 + 2^-20] (kv_step's)")
    if q.size:
        o.kv_requantise(q, ratio)


#: the INT16 KV cache's largest code (AttentionConfig.kv_bits = 16; docs/runtime.md 4.5)
KV16_MAX = 32767


def kv_row(x, step, bits: int = 8) -> np.ndarray:
    """One K or V row quantised with its head's step: ``clip(rint(x * (1 / step)), -127,
    127)`` as int8 (zeros while the step is 0); ``bits = 16`` (an INT16 attention engine's
    cache): ``rint(clip(x * (1 / step), -32767, 32767))`` as int16, the same float32 product
    (x finite)."""
    o = _ops()
    x = _f32(x, "kv_row x", 1, o.F)
    if bits == 16:
        return o.kv_row16(x, o.F(step))
    if bits != 8:
        raise ValueError(f"kv_row: bits = {bits!r} must be 8 or 16")
    return o.kv_row(x, o.F(step))


def kv_append(rows: np.ndarray, t: int, step, x) -> Tuple[np.float32, bool]:
    """Append one K or V row x (d) at row t of a head's INT8 rows (``rows``: int8 (>= t+1, d),
    C-contiguous, written in place) with the running absmax step (docs/runtime.md). Returns
    (the new step, whether it grew and rows [0, t) were requantised)."""
    o = _ops()
    x = _f32(x, "kv_append x", 1, o.F)
    if not (isinstance(rows, np.ndarray) and rows.dtype == np.int8 and rows.ndim == 2
            and rows.flags.c_contiguous and rows.flags.writeable):
        raise ValueError("kv_append: rows must be a writeable C-contiguous int8 (L, d) array")
    if rows.shape[1] != x.shape[0] or not 0 <= t < rows.shape[0]:
        raise ValueError(f"kv_append: row {t} of d = {x.shape[0]} outside rows {rows.shape}")
    return o.kv_append(rows, int(t), o.F(step), x)


def score_scale(k_step, s_q, d: int) -> float:
    """The real score scale of one query head, ``k_step / (s_q * sqrt(d))`` in double."""
    o = _ops()
    return o.score_scale(o.F(k_step), o.F(s_q), int(d))


def score_multiplier(c: float, cfg=None) -> Tuple[int, int]:
    """(MULT, SHIFT) of a score scale: ``generators.golden.attention.score_multiplier`` (the
    numpy path calls it; C computes the same in double)."""
    return _ops().score_multiplier(float(c), cfg or gatt.DEFAULT_CONFIG)


def attention_out(y, z: Sequence[int], v_step, frac_bits: int = 24) -> np.ndarray:
    """The attention engine's INT8 results y (heads, d) in real units:
    ``(float)y * (((float)Z / (127 * 2^frac_bits)) * v_step)`` per head."""
    o = _ops()
    y = np.ascontiguousarray(y, dtype=np.int8)
    z = np.ascontiguousarray(z, dtype=np.uint32)
    if y.ndim != 2 or z.shape != (y.shape[0],) or not 0 <= frac_bits <= 24:
        raise ValueError(f"attention_out: y {y.shape}, Z {z.shape}, frac_bits {frac_bits}")
    return o.attention_out(y, z, o.F(v_step), int(frac_bits))


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


def f32_to_f16(x) -> np.ndarray:
    """float32 -> fp16 bits (uint16): nearest, ties to even, subnormals, overflow to +-inf
    (ggml's GGML_FP32_TO_FP16)."""
    return _ops().f32_to_f16(np.ascontiguousarray(x, dtype=F32))


def _blocks_arg(x, what: str) -> np.ndarray:
    arr = np.ascontiguousarray(x, dtype=F32)
    if arr.ndim != 1 or arr.size == 0 or arr.size % gblocks.QK:
        raise ValueError(f"{what}: expected a 1-D array whose length is a multiple of "
                         f"{gblocks.QK}, got shape {arr.shape}")
    return arr


def quantise_q8_0(x) -> Tuple[np.ndarray, np.ndarray]:
    """ggml's Q8_0 blocks of x (quantize_row_q8_0_ref; generators/golden/blocks.py): per 32
    values ``d = max|x| / 127``, ``q = roundf(x / d)`` (ties away from zero), d as fp16.
    Returns (q int8 (n,), d fp16 bits (n/32,)). Refuses NaN / inf and a block whose max|x| is
    nonzero and below 2^-118. Not in the per-token path yet (docs/activations.md)."""
    return _ops().quantise_blocks(_blocks_arg(x, "quantise_q8_0"), False)


def quantise_q8_1(x) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ggml's Q8_1 blocks of x (quantize_row_q8_1_ref): as :func:`quantise_q8_0`, plus
    ``s = fp16((float)sum(q) * d)`` per block (d the float32 step). Returns (q, d, s)."""
    return _ops().quantise_blocks(_blocks_arg(x, "quantise_q8_1"), True)


def quantise_parts(x, q8_1: bool = True):
    """x as two vectors of blocks whose results the host adds (docs/activations.md section 7):
    ``(hi, lo)``, hi = :func:`quantise_q8_1` (``q8_1``) or :func:`quantise_q8_0` of x, lo the
    same of the residual ``r = x - f16(d_hi) * q_hi`` (float32: the product exact, the
    subtraction rounded once), a block of r whose max|r| is below 2^-118 taken as zeros. The
    two parts' values follow x to 2^-15 of each block's max|x| plus 127 * 2^-25 (the
    residual's fp16 step is subnormal below max|x| of about 2), where one part's follow it to
    2^-7.8 (tests/runtime/host/test_hostops.py). Refuses what :func:`quantise_q8_1` refuses."""
    return _ops().quantise_parts(_blocks_arg(x, "quantise_parts"), bool(q8_1))


def embed_int8(q, scale) -> np.ndarray:
    """One embedding row stored as INT8 with a row scale: ``(float)q * scale``."""
    q = np.ascontiguousarray(q, dtype=np.int8)
    if q.ndim != 1 or q.size == 0:
        raise ValueError(f"embed_int8: expected a non-empty 1-D row, got {q.shape}")
    o = _ops()
    return o.embed_int8(q, o.F(scale))
