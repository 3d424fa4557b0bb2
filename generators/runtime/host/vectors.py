"""Test vectors of the host kernels: inputs with edge cases, the numpy reference's outputs.

    python tools/host_vectors.py build/host/vectors.tpv                # then, on any machine:
    cc -O2 -ffp-contract=off csrc/tphvectors.c csrc/tphost.c csrc/tphwork.c -lm -pthread \
        -o tphvectors
    ./tphvectors build/host/vectors.tpv                               # every output bit

``cases(seed)`` is the list the tests run through both paths in one process (ctypes); the
file carries the same cases with the numpy outputs to a C program built elsewhere: under
``qemu-arm`` for ARMv7 in ``make test`` (tests/runtime/host/test_hostops.py), or natively on the board.

File format (little-endian): ``b"TPV1"``, u32 case count; per case a 16-byte kernel name
(NUL-padded), u32 array count, then the arrays, each u32 dtype code (``DTYPES``), u32 element
count and the elements. Per kernel the arrays are its inputs then its expected outputs, in the
order ``KERNELS`` lists (tphvectors.c reads them in that order).
"""
from __future__ import annotations

import math
import struct
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np

from generators.golden import attention as gatt

from . import ops as hostops
from .ops import F32

__all__ = ["KERNELS", "DTYPES", "cases", "ftz_cases", "argmax_split_cases", "reference", "write",
           "SMOLLM2"]

DTYPES = {np.dtype(np.float32): 1, np.dtype(np.int32): 2, np.dtype(np.uint32): 3,
          np.dtype(np.int8): 4, np.dtype(np.uint8): 5, np.dtype(np.uint16): 6,
          np.dtype(np.float64): 7, np.dtype(np.int16): 8}

#: kernel -> (input names, output names); tphvectors.c reads the arrays in this order
KERNELS: Dict[str, Tuple[Tuple[str, ...], Tuple[str, ...]]] = {
    "sumsq": (("x",), ("sum",)),
    "absmax": (("x",), ("rc", "amax")),
    "argmax": (("x",), ("index",)),
    "rmsnorm": (("x", "w", "eps"), ("y",)),
    "rope": (("x", "dims", "cos", "sin"), ("y",)),
    "exp": (("x",), ("y",)),
    "silu_mul": (("g", "u"), ("y",)),
    "add": (("a", "b"), ("y",)),
    "quantise_rows": (("x", "dims"), ("rc", "q", "s")),
    "dequant_i32": (("acc", "scale", "s"), ("y",)),
    "dequant_f32": (("v", "s"), ("y",)),
    "dequant_b_i32": (("acc", "scale", "s"), ("y",)),
    "dequant_b_f32": (("v", "s"), ("y",)),
    "kv_step": (("x", "step"), ("rc", "step", "ratio")),
    "kv_requantise": (("q", "ratio"), ("rc", "q")),
    "kv_row": (("x", "step"), ("q",)),
    "kv_row16": (("x", "step"), ("q",)),
    "kv_append": (("rows", "dims", "step", "x"), ("rc", "rows", "step")),
    "score_mult": (("c", "params"), ("rc", "mult", "shift")),
    "score_scale": (("k_step", "s_q", "d"), ("c",)),
    "attention_out": (("y", "z", "dims", "v_step"), ("o",)),
    "f16_to_f32": (("h",), ("y",)),
    "embed_q8_0": (("blocks", "n"), ("y",)),
    "embed_int8": (("q", "scale"), ("y",)),
    "f32_to_f16": (("x",), ("h",)),
    "quantise_q8_0": (("x",), ("rc", "q", "d")),
    "quantise_q8_1": (("x",), ("rc", "q", "d", "s")),
    # x's blocks and its residual's: q, d (and s) the two parts one after the other
    "quant_parts_q8_0": (("x",), ("rc", "q", "d")),
    "quant_parts_q8_1": (("x",), ("rc", "q", "d", "s")),
}

#: SmolLM2-135M's sizes (DESIGN.md section 8): hidden, MLP, heads, KV heads, head_dim, vocab
SMOLLM2 = dict(hidden=576, mlp=1536, heads=9, kv_heads=3, head_dim=64, vocab=49152, layers=30)

RC_OK, RC_NONFINITE, RC_TINY, RC_BADARG = 0, -1, -2, -3


def _a(v, dt):
    return np.ascontiguousarray(np.asarray(v, dtype=dt).reshape(-1))


def reference(kernel: str, inp: Dict[str, np.ndarray], ops=None) -> Dict[str, np.ndarray]:
    """The numpy reference's outputs of one case (error cases: the C return code only);
    ``ops``: another _NumpyOps (the tests' IEEE arithmetic without NEON's flush)."""
    NUMPY = ops or hostops.NUMPY
    f = F32
    x = inp.get("x")
    if kernel == "sumsq":
        return {"sum": _a(NUMPY.sumsq(x), f)}
    if kernel == "absmax":
        try:
            return {"rc": _a(RC_OK, np.int32), "amax": _a(NUMPY.absmax(x), f)}
        except ValueError:
            return {"rc": _a(RC_NONFINITE, np.int32), "amax": _a(0, f)}
    if kernel == "argmax":
        return {"index": _a(NUMPY.argmax(x), np.int32)}
    if kernel == "rmsnorm":
        return {"y": NUMPY.rmsnorm(x, inp["w"], inp["eps"][0])}
    if kernel == "rope":
        heads, d = (int(v) for v in inp["dims"])
        return {"y": _a(NUMPY.rope(x.reshape(heads, d), inp["cos"], inp["sin"]), f)}
    if kernel == "exp":
        return {"y": NUMPY.exp(x)}
    if kernel == "silu_mul":
        return {"y": NUMPY.silu_mul(inp["g"], inp["u"])}
    if kernel == "add":
        return {"y": NUMPY.add(inp["a"], inp["b"])}
    if kernel == "quantise_rows":
        rows, n = (int(v) for v in inp["dims"])
        try:
            q, s = NUMPY.quantise_rows(x.reshape(rows, n))
            return {"rc": _a(RC_OK, np.int32), "q": _a(q, np.int8), "s": _a(s, f)}
        except ValueError as e:
            rc = RC_TINY if hostops.ERR_TINY in str(e) else RC_NONFINITE
            return {"rc": _a(rc, np.int32), "q": _a(np.zeros(rows * n), np.int8),
                    "s": _a(np.zeros(rows), f)}
    if kernel == "dequant_i32":
        return {"y": NUMPY.dequant_i32(inp["acc"], inp["scale"], inp["s"][0])}
    if kernel == "dequant_f32":
        return {"y": NUMPY.dequant_f32(inp["v"], inp["s"][0])}
    if kernel == "dequant_b_i32":
        return {"y": _a(NUMPY.dequant_b_i32(inp["acc"], inp["scale"], inp["s"]), f)}
    if kernel == "dequant_b_f32":
        return {"y": _a(NUMPY.dequant_b_f32(inp["v"], inp["s"]), f)}
    if kernel == "kv_step":
        try:
            step, ratio, grew = NUMPY.kv_step(x, inp["step"][0])
            return {"rc": _a(int(grew), np.int32), "step": _a(step, f), "ratio": _a(ratio, f)}
        except ValueError as e:
            rc = RC_TINY if hostops.ERR_TINY in str(e) else RC_NONFINITE
            return {"rc": _a(rc, np.int32), "step": _a(inp["step"][0], f), "ratio": _a(0, f)}
    if kernel == "kv_requantise":
        q, ratio = inp["q"].copy(), f(inp["ratio"][0])
        if not f(0) < ratio <= hostops.KV_RATIO_MAX:
            return {"rc": _a(RC_BADARG, np.int32), "q": q}
        NUMPY.kv_requantise(q, ratio)
        return {"rc": _a(RC_OK, np.int32), "q": q}
    if kernel == "kv_row":
        return {"q": NUMPY.kv_row(x, inp["step"][0])}
    if kernel == "kv_row16":
        return {"q": NUMPY.kv_row16(x, inp["step"][0])}
    if kernel == "kv_append":
        t, d = (int(v) for v in inp["dims"])
        rows = inp["rows"].copy().reshape(t + 1, d)
        try:
            step, grew = NUMPY.kv_append(rows, t, inp["step"][0], x)
            rc = int(grew)
        except ValueError as e:
            rows, step = inp["rows"].reshape(t + 1, d), inp["step"][0]
            rc = RC_TINY if hostops.ERR_TINY in str(e) else RC_NONFINITE
        return {"rc": _a(rc, np.int32), "rows": _a(rows, np.int8), "step": _a(step, f)}
    if kernel == "score_mult":
        spo, max_shift, mult_bits = (int(v) for v in inp["params"])
        assert (max_shift, mult_bits) == (gatt.MAX_SHIFT, gatt.MULT_BITS)
        cfg = gatt.AttentionConfig(exp_steps_per_octave=spo)
        try:
            m, s = NUMPY.score_multiplier(float(inp["c"][0]), cfg)
            rc = RC_OK
        except (ValueError, OverflowError):
            m, s, rc = 0, 0, RC_BADARG
        return {"rc": _a(rc, np.int32), "mult": _a(m, np.uint32), "shift": _a(s, np.uint32)}
    if kernel == "score_scale":
        return {"c": _a(NUMPY.score_scale(inp["k_step"][0], inp["s_q"][0], int(inp["d"][0])),
                        np.float64)}
    if kernel == "attention_out":
        g, d, frac = (int(v) for v in inp["dims"])
        return {"o": _a(NUMPY.attention_out(inp["y"].reshape(g, d), inp["z"], inp["v_step"][0],
                                            frac), f)}
    if kernel == "f16_to_f32":
        return {"y": NUMPY.f16_to_f32(inp["h"])}
    if kernel == "embed_q8_0":
        return {"y": NUMPY.embed_q8_0(inp["blocks"], int(inp["n"][0]))}
    if kernel == "embed_int8":
        return {"y": NUMPY.embed_int8(inp["q"], inp["scale"][0])}
    if kernel == "f32_to_f16":
        return {"h": _a(NUMPY.f32_to_f16(x), np.uint16)}
    if kernel in ("quantise_q8_0", "quantise_q8_1", "quant_parts_q8_0",
                  "quant_parts_q8_1"):
        q81, nb = kernel.endswith("q8_1"), x.size // 32
        parts = 2 if "parts" in kernel else 1
        zero = {"q": _a(np.zeros(parts * x.size), np.int8),
                "d": _a(np.zeros(parts * nb), np.uint16)}
        if q81:
            zero["s"] = _a(np.zeros(parts * nb), np.uint16)
        if x.size == 0 or x.size % 32:
            return {"rc": _a(RC_BADARG, np.int32), **zero}
        try:
            if parts == 2:
                outs = [np.concatenate(a) for a in zip(*NUMPY.quantise_parts(x, q81))]
            else:
                outs = NUMPY.quantise_blocks(x, q81)
        except ValueError as e:
            rc = RC_NONFINITE if hostops.ERR_NONFINITE in str(e) else RC_TINY
            return {"rc": _a(rc, np.int32), **zero}
        return {"rc": _a(RC_OK, np.int32),
                **{k: _a(v, v.dtype) for k, v in zip(("q", "d", "s"), outs)}}
    raise ValueError(f"unknown kernel {kernel!r}")


# --------------------------------------------------------------------------- the cases

def _ties(rng, n: int, amax: float) -> np.ndarray:
    """A row with max|x| = amax whose other values land on k + 0.5 once scaled by 127/amax."""
    s = F32(127.0) / F32(amax)
    k = rng.integers(-127, 127, n).astype(np.float64) + 0.5
    x = (k / float(s)).astype(F32)
    x[rng.integers(0, n)] = F32(amax)
    return x


def argmax_split_cases() -> List[np.ndarray]:
    """Rows whose first maximum depends on how two halves' maxima are combined (the C loop's
    argmax by halves, tphwork.c: [0, h) and [h, n), h = n / 2 rounded down to a multiple of 8):
    equal maxima in both halves, -0 in one and +0 in the other, the maximum at either side of
    h, NaN in one half or both, -inf only; SmolLM2's vocabulary and sizes around the smallest
    split (16) and the vector loops' 8. No random values (the other cases' draws unchanged)."""
    f = F32
    out = []
    for n in (49152, 16, 17, 23, 24, 31, 33, 15):
        h = (n // 2) & ~7
        base = -np.abs(np.sin(np.arange(n, dtype=np.float64))).astype(f) - f(1.0)
        for i, j in ((0, n - 1), (h - 1, h), (max(h - 3, 0), n - 2)):
            x = base.copy()
            x[i] = x[j] = f(7.5)                      # a tie across the halves: i
            out.append(x)
        x = np.full(n, f(-1.0))
        x[max(h - 1, 0)], x[n - 1] = f(-0.0), f(0.0)  # -0 first, +0 second: equal, the first
        out.append(x)
        x = np.full(n, f(-1.0))
        x[0], x[max(h, 1)] = f(0.0), f(-0.0)
        out.append(x)
        x = base.copy()
        x[max(h, 1)] = f(3.0)                         # the maximum first in the second half
        x[max(h - 1, 0)] = f(2.0)
        out.append(x)
        x = base.copy()
        x[1], x[n - 1] = f(9.0), f(np.nan)            # NaN in the second half only: the NaN
        out.append(x)
        x = base.copy()
        x[n - 2], x[n - 1], x[max(h - 2, 0)] = f(np.nan), f(9.0), f(-np.nan)   # NaN in both
        out.append(x)
        out.append(np.full(n, f(-np.inf)))
    return out


def cases(seed: int = 0, quick: bool = False) -> List[Tuple[str, Dict[str, np.ndarray]]]:
    """(kernel, inputs) of every case: random values at SmolLM2's sizes and odd sizes, plus the
    edges each kernel has (zeros, ties at .5, huge and tiny values, subnormals, all-equal rows,
    the maximum at several places, NaN and infinity where the kernel defines them)."""
    rng = np.random.default_rng(seed)
    S = SMOLLM2
    H, I, d, V = S["hidden"], S["mlp"], S["head_dim"], S["vocab"]
    out: List[Tuple[str, Dict[str, np.ndarray]]] = []
    f = F32

    def add(kernel, **inp):
        out.append((kernel, {k: _a(v, v.dtype if isinstance(v, np.ndarray) else f)
                             for k, v in inp.items()}))

    def normal(n, scale=1.0):
        return (rng.standard_normal(n) * scale).astype(f)

    sizes = [H, I, 1, 5, 8, 13, 577] if not quick else [H, 13]
    specials = np.array([0.0, -0.0, 1e-45, -1e-45, 1e-40, 1.17549435e-38, 1e-30, 1e30, 1e20,
                         -1e20, 3.4e38, 0.5, -0.5], f)
    wide = [normal(n, 10.0 ** rng.uniform(-3, 3)) for n in sizes]

    # ---- reductions
    for x in wide + [np.zeros(H, f), np.full(H, f(2.5)), specials,
                     np.concatenate([normal(H - 13), specials]), np.full(16, f(1e20))]:
        add("sumsq", x=x)
        add("absmax", x=x)
        add("rmsnorm", x=x, w=normal(x.size), eps=np.array([1e-5], f))
    add("absmax", x=np.array([1.0, np.inf, 2.0], f))
    add("absmax", x=np.array([1.0, -np.nan, 2.0], f))
    add("rmsnorm", x=normal(H), w=normal(H), eps=np.array([1e-6], f))
    # numpy's add.reduce order, adversarial: big and small values in every lane
    x = normal(H)
    x[::7] *= f(4096.0)
    add("sumsq", x=x)
    for x in [normal(V, 5.0), normal(13)]:
        add("argmax", x=x)
    x = normal(V)
    x[[17, 300, 4000, V - 1]] = f(99.0)                      # the maximum at several places
    add("argmax", x=x)
    add("argmax", x=np.full(64, f(-3.0)))                    # all equal
    add("argmax", x=np.array([-0.0, 0.0, -1.0], f))
    add("argmax", x=np.array([-np.inf, -np.inf], f))
    add("argmax", x=np.array([1.0, np.nan, 5.0, np.nan], f))
    add("argmax", x=np.concatenate([normal(20), [np.inf], normal(3), [np.inf]]).astype(f))
    # the vector bodies' edges (n >= 8): zeros of both signs as the maximum, all negative,
    # subnormal maxima, a negative NaN, -inf only
    add("argmax", x=np.array([-1] * 7 + [-0.0] + [-2] * 4 + [0.0] + [-5] * 3, f))
    add("argmax", x=np.array([-3, -2, -7, -1e-40, -9, -1e-45, -4, -8, -6, -2, -3, -1e-44], f))
    add("argmax", x=np.array([-1] * 9 + [1e-45, 1e-40, -0.0, 1e-40, 0.0, -1, -1], f))
    add("argmax", x=np.array([1, 2, 3, 4, 5, 6, 7, -np.nan, 9, 1, 2, 3], f))
    add("argmax", x=np.full(24, -np.inf, f))
    for x in argmax_split_cases():                           # the C loop's halves' combination
        add("argmax", x=x)

    # ---- element-wise
    cos, sin = hostops.rope_tables(d, 100000.0, 2048)
    for pos in ([0, 1, 511, 2047] if not quick else [511]):
        for heads in (S["heads"], S["kv_heads"]):
            add("rope", x=normal(heads * d, 3.0), dims=np.array([heads, d], np.uint32),
                cos=cos[pos], sin=sin[pos])
    add("rope", x=normal(2 * 12), dims=np.array([2, 12], np.uint32), cos=normal(6), sin=normal(6))
    ln2 = math.log(2)
    e = np.concatenate([np.linspace(-100, 100, 4001), [(k + 0.5) * ln2 for k in range(-130, 130)],
                        [-86, 88, -86.0001, 88.0001, 0.0, -0.0, 1e-30, -1e-30, 3e38, -3e38],
                        # r near 0 (x nearest k ln 2), the SSE2 body's 2^-60 fast-path edge
                        [k * ln2 for k in range(-124, 127)],
                        [2.0 ** -60, -(2.0 ** -60), 2.0 ** -61, -(2.0 ** -61), 2.0 ** -59]])
    add("exp", x=e.astype(f))
    for n in sizes:
        g = normal(n, 10.0 ** rng.uniform(-1, 1.5))
        add("silu_mul", g=g, u=normal(n))
        add("add", a=normal(n), b=normal(n, 1e-3))
    add("silu_mul", g=np.array([-200, -100, -88, -87, -86, 0, -0.0, 86, 88, 200, 1e-40, 3e38],
                               f), u=np.array([1, 1e-3, 1, 1, 2, 5, 5, 1, 1, 1, 1, 1], f))
    add("add", a=specials, b=-specials)

    # ---- quantisation
    for rows, n in [(1, H), (1, I), (S["heads"] // S["kv_heads"], d), (1, 13), (2, 5)]:
        add("quantise_rows", x=normal(rows * n, 10.0 ** rng.uniform(-2, 2)),
            dims=np.array([rows, n], np.uint32))
    for amax in (127.0, 254.0, 12.7, 3.0):
        add("quantise_rows", x=_ties(rng, H, amax), dims=np.array([1, H], np.uint32))
    add("quantise_rows", x=np.array([127.0, 0.5, 1.5, 2.5, -2.5, -0.5], f),
        dims=np.array([1, 6], np.uint32))
    add("quantise_rows", x=np.zeros(2 * 64, f), dims=np.array([2, 64], np.uint32))
    add("quantise_rows", x=np.full(64, f(-7.25)), dims=np.array([1, 64], np.uint32))
    add("quantise_rows", x=np.concatenate([normal(60), [1e-40, -1e30, 1e-30, 0.0]]).astype(f),
        dims=np.array([1, 64], np.uint32))
    add("quantise_rows", x=np.full(8, f(1e-40)), dims=np.array([1, 8], np.uint32))     # TINY
    add("quantise_rows", x=np.array([1.0, np.inf, 0, 0], f), dims=np.array([1, 4], np.uint32))
    for n, fmt in [(H, "i32"), (I, "i32"), (V, "i32"), (H, "f32"), (13, "i32"), (29, "i32"),
                   (13, "f32")]:       # 29: the SSE2 body's 16-, 4- and 1-wide loops
        s = np.array([127.0 / abs(rng.standard_normal())], f)
        if fmt == "i32":
            acc = rng.integers(-(1 << 31), 1 << 31, n, dtype=np.int64).astype(np.int32)
            add("dequant_i32", acc=acc, scale=np.abs(normal(n, 0.01)), s=s)
        else:
            add("dequant_f32", v=normal(n, 1e4), s=s)
    add("dequant_i32", acc=np.array([0, 1, -1, 2 ** 31 - 1, -2 ** 31, 16777217], np.int32),
        scale=np.array([0.0, 1.0, 1e-30, 1e-3, 1.0, 1.0], f), s=np.array([1.0], f))
    add("dequant_f32", v=specials, s=np.array([1e30], f))
    # B-vector results (row-major, B per row): B = 2 (the SSE2 body's 8- and 4-row loops and
    # the tail), 3 and 4 (the portable loop), at SmolLM2's sizes and odd ones
    for n, B in [(H, 2), (V // 2, 2), (13, 2), (15, 2), (29, 3), (I, 4), (7, 4)]:
        s = np.array([127.0 / abs(rng.standard_normal()) for _ in range(B)], f)
        acc = rng.integers(-(1 << 31), 1 << 31, n * B, dtype=np.int64).astype(np.int32)
        add("dequant_b_i32", acc=acc, scale=np.abs(normal(n, 0.01)), s=s)
        add("dequant_b_f32", v=normal(n * B, 1e4), s=s)
    add("dequant_b_f32", v=np.concatenate([specials, specials[::-1]]).astype(f),
        s=np.array([1e30, 3.0], f))

    # ---- KV append (t rows already cached, one appended)
    def kv(t, step, xrow, rows=None):
        if rows is None:
            rows = rng.integers(-127, 128, (t + 1) * d).astype(np.int8)
        add("kv_append", rows=rows, dims=np.array([t, d], np.uint32),
            step=np.array([step], f), x=xrow)

    kv(0, 0.0, normal(d))                              # first row: the step is set
    kv(0, 0.0, np.zeros(d, f))                         # zeros, step stays 0
    kv(5, 0.0, np.zeros(d, f), rows=np.zeros(6 * d, np.int8))
    kv(511, 0.05, normal(d, 0.5))                      # no growth (|x| < 127 * 0.05)
    kv(511, 0.01, normal(d, 3.0))                      # growth: 511 rows requantised
    kv(2047, 0.02, normal(d, 0.8))
    kv(3, 0.5, _ties(rng, d, 63.5))                    # ties at .5 on the new row
    kv(7, 1.0, np.full(d, f(127.0)))                   # exactly 127 * step: no growth
    kv(7, 1.0, np.full(d, f(127.00002)))               # just above: growth by one ulp
    kv(2, 1.0, np.array([np.nan] + [0.0] * (d - 1), f))
    kv(2, 0.0, np.full(d, f(1e-44)))                   # TINY
    for step, xrow in [(0.0, normal(d)), (0.05, normal(d, 0.5)), (0.01, normal(d, 3.0)),
                       (1.0, np.full(d, f(127.00002))), (0.0, np.zeros(d, f)),
                       (0.0, np.full(d, f(1e-44))), (1.0, np.array([np.inf] * d, f))]:
        add("kv_step", x=xrow, step=np.array([step], f))
        add("kv_row", x=xrow if np.all(np.isfinite(xrow)) else np.zeros(d, f),
            step=np.array([step], f))
    # ---- the INT16 cache's row (fixed steps): ties at k + 0.5 codes, the clip at +-32767
    # (and just inside it), zeros, a step of 0, an odd size
    st16 = f(0.05 * 127 / 32767)
    inv16 = f(1.0) / st16
    k16 = rng.integers(-32767, 32767, d).astype(np.float64) + 0.5
    ties16 = (k16 / float(inv16)).astype(f)
    for step, xrow in [(st16, normal(d, 1.5)), (st16, normal(d, 20.0)),      # most clip
                       (st16, ties16), (st16, np.full(d, f(32767.5) / inv16)),
                       (st16, np.full(d, f(32766.5) / inv16)),
                       (f(1.0), np.array([32767.0, -32767.0, 32767.5, -32767.5, 32768.0,
                                          -32768.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5,
                                          3e38, -3e38, 1e-45, -0.0], f)),
                       (f(0.0), normal(d)), (st16, np.zeros(d, f)), (st16, normal(37, 0.1))]:
        add("kv_row16", x=np.asarray(xrow, f), step=np.array([step], f))
    q = rng.integers(-127, 128, 2048 * d + 13).astype(np.int8)
    for ratio in (0.999, 0.5, 0.01, 1.0, float(f(1.0) + f(2 ** -23)), 1.5, 0.0, -0.5):
        add("kv_requantise", q=q[:1000 + int(ratio * 1000) % 7], ratio=np.array([ratio], f))
    add("kv_requantise", q=q, ratio=np.array([0.73], f))

    # ---- attention
    params = np.array([gatt.DEFAULT_CONFIG.exp_steps_per_octave, gatt.MAX_SHIFT, gatt.MULT_BITS],
                      np.uint32)
    cs = [0.0, 5e-324, 1e-300, 1e-20, 1e-6, 1.0, 3.5, 123.0, 1e300, float("inf")]
    cs += list(10.0 ** rng.uniform(-8, 3, 200 if not quick else 20))
    r16 = (65535.5 / 2 ** 20) * math.log(2) / 170             # r * 2^20 = 65535.5 exactly-ish
    cs += [r16, math.nextafter(r16, 0), math.nextafter(r16, 1)]
    for c in cs:
        add("score_mult", c=np.array([c], np.float64), params=params)
    for _ in range(20 if not quick else 3):
        add("score_scale", k_step=np.array([abs(rng.standard_normal()) * 0.01], f),
            s_q=np.array([abs(rng.standard_normal()) * 50], f), d=np.array([d], np.uint32))
    add("score_scale", k_step=np.array([0.0], f), s_q=np.array([1.0], f),
        d=np.array([48], np.uint32))
    G = S["heads"] // S["kv_heads"]
    for frac in (24, 16, 0):
        add("attention_out", y=rng.integers(-128, 128, G * d).astype(np.int8),
            z=rng.integers(0, 1 << 32, G, dtype=np.uint64).astype(np.uint32),
            dims=np.array([G, d, frac], np.uint32), v_step=np.array([0.0123], f))
    add("attention_out", y=np.full(G * d, 127, np.int8),
        z=np.array([0, 1, 0xFFFFFFFF], np.uint32), dims=np.array([G, d, 24], np.uint32),
        v_step=np.array([3e38], f))

    # ---- embedding rows
    add("f16_to_f32", h=np.arange(1 << 16, dtype=np.uint32).astype(np.uint16))
    for n in (H, 40):
        nb = -(-n // 32)
        blocks = rng.integers(0, 256, (nb, 34)).astype(np.uint8)
        dd = (rng.standard_normal(nb) * 0.01).astype(np.float16)
        dd[0] = np.float16(6e-8) if n == 40 else dd[0]             # a subnormal d
        blocks[:, :2] = dd.view(np.uint8).reshape(nb, 2)
        add("embed_q8_0", blocks=blocks, n=np.array([n], np.uint32))
        add("embed_int8", q=rng.integers(-128, 128, n).astype(np.int8),
            scale=np.array([abs(rng.standard_normal()) * 0.01], f))
    # ---- per-block activations (ggml's Q8_0 / Q8_1)
    h16 = np.arange(0x7C00, dtype=np.uint16).view(np.float16).astype(f)      # every finite fp16
    mid = ((h16[:-1].astype(np.float64) + h16[1:]) / 2).astype(f)            # ties: exact
    tie = np.concatenate([mid, np.nextafter(mid, f(0)), np.nextafter(mid, f(1e9)),
                          [65504.0, 65519.996, 65520.0, 65536.0, 1e30, 3.4e38, 1e-45, 1e-40,
                           2.0 ** -25, 2.0 ** -24, 2.0 ** -14, 0.0, -0.0, np.inf]]).astype(f)
    add("f32_to_f16", x=np.concatenate([tie, -tie]))
    bits = rng.integers(0, 0x7F800000, 20000, dtype=np.int64).astype(np.uint32)
    add("f32_to_f16", x=(bits | (rng.integers(0, 2, bits.size).astype(np.uint32) << 31)
                        ).view(f))
    halves = (np.arange(-127, 128) + 0.5).astype(f)                # x * id exactly k + 1/2
    blk: List[np.ndarray] = []
    for n in (H, I, 32, 64):
        for scale in (1.0, 10.0 ** rng.uniform(-3, 3), 1e-5, 3e-7):  # fp16 d subnormal at last
            x = normal(n, scale)
            x[rng.integers(0, n, 3)] *= f(50.0)                     # outlier channels
            blk.append(x)
    x = np.zeros(4 * 32, f)
    x[:31] = halves[::8][:31]
    x[31] = 127.0                                                   # d = 1, id = 1: the ties
    x[32:64] = -halves[120:152] * 2                                  # odd: ties at id = 1/2
    x[63] = 254.0                                                    # d = 2 (amax 254)
    x[96:] = np.linspace(-3, 3, 32, dtype=f)                         # block 2 all zero
    blk.append(x)
    edge = np.zeros(64, f)                      # the domain's edge: max|x| = 2^-118 with
    edge[0] = 2.0 ** -118                       # subnormal x (flushed by NEON, 0 in IEEE)
    edge[1:9] = [1e-40, -1e-40, 2.0 ** -127, -(2.0 ** -127), 1e-45, 5.8e-39, -5.8e-39, 2.0 ** -120]
    edge[32:64] = normal(32, 1e-3)
    edge[40] = 1e-39
    blk += [edge, np.full(32, f(1e30)), np.full(64, f(-7.25))]    # fp16 d and s infinite
    # the residual's own edges (two blocks of max|x| = 127 e, so that d = e exactly): x
    # exactly d q (a zero residual); one value 2^-125 (its code 0, its residual the block's
    # only nonzero one: below 2^-118, zeros) or 2^-118 (at the domain's edge: kept)
    ints = np.concatenate([[127, -127], rng.integers(-127, 128, 30),
                           [127], rng.integers(-127, 128, 31)]).astype(f)
    exact = (ints * f(2.0 ** -3)).astype(f)
    tiny, at = exact.copy(), exact.copy()
    tiny[10], at[10] = f(2.0 ** -125), f(2.0 ** -118)
    for x in blk + [exact, tiny, at]:
        add("quantise_q8_0", x=x)
        add("quantise_q8_1", x=x)
        add("quant_parts_q8_0", x=x)
        add("quant_parts_q8_1", x=x)
    for bad in (np.concatenate([np.zeros(32, f), [1e-36], np.zeros(31, f)]),    # TINY
                np.concatenate([normal(32), [np.inf], normal(31)]),              # NONFINITE
                np.concatenate([normal(40), [np.nan], normal(23)]),
                normal(40)):                                                     # BADARG
        for k in ("quantise_q8_0", "quantise_q8_1", "quant_parts_q8_0",
                  "quant_parts_q8_1"):
            add(k, x=bad.astype(f))
    return out + ftz_cases()


def ftz_cases() -> List[Tuple[str, Dict[str, np.ndarray]]]:
    """Cases where NEON's flush-to-zero decides the bits (hostops._fz / _mulz / _addz): a
    subnormal operand, a subnormal result, and an exact product just below FLT_MIN that IEEE
    rounds up to FLT_MIN (a tie to even: (1 - 2^-24) * 2^-126) and NEON flushes, in both the
    four-lane bodies and the scalar tails. Each case's outputs differ from IEEE float32
    arithmetic (tests/runtime/host/test_hostops.py checks that)."""
    f = F32
    m = float(np.finfo(f).tiny)                       # FLT_MIN = 2^-126
    below1 = float(np.nextafter(f(1.0), f(0.0)))      # 1 - 2^-24
    sub = [0.5 * m, -0.25 * m, 1e-40, -1e-45]         # subnormal operands
    out: List[Tuple[str, Dict[str, np.ndarray]]] = []

    def add(kernel, **inp):
        out.append((kernel, {k: _a(v, v.dtype if isinstance(v, np.ndarray) else f)
                             for k, v in inp.items()}))

    def arr(v, dt=f):
        return np.array(v, dt)

    # sums of squares: squares below FLT_MIN (2^-64 squared), in the lanes and the tail
    add("sumsq", x=arr([2.0 ** -64] * 13))
    add("sumsq", x=arr([2.0 ** -63.5] * 8 + [1e-30] * 5))
    # RMSNorm: tiny outputs ((x * inv) * w below FLT_MIN) and subnormal x, w
    x = arr([2.0 ** -120, -(2.0 ** -121), 3.0, 2.0 ** -119] + sub + [2.0 ** -120] * 5)
    w = arr([2.0 ** -20, 2.0 ** -22, 1.0, 2.0 ** -30, 1.0, 1.0, 1.0, 1.0] + [2.0 ** -24, 1.0,
                                                                           2.0 ** -10, 0.5, m])
    add("rmsnorm", x=x, w=w, eps=arr([1e-5]))
    # RoPE: the rounding edge in lane 0 and in the tail (h = 5), subnormal operands, tiny
    # differences
    a = [below1, 3.0 * m, 2.0 ** -70, 1.0, below1]
    b = [0.0, 2.0 * m, 2.0 ** -70, sub[0], 0.0]
    add("rope", x=arr(a + b), dims=arr([1, 10], np.uint32),
        cos=arr([m, 0.5, 2.0 ** -60, 1.0, m]), sin=arr([0.5, 0.25, 2.0 ** -60, sub[2], 0.5]))
    # x86's flush decides tininess after rounding: an exact product in (FLT_MIN (1 - 2^-25),
    # FLT_MIN) rounds to FLT_MIN there and in IEEE, NEON flushes it ((1 - 2^-23) *
    # (1 + 2^-23) 2^-126, and V * (1 / S) below): the SSE2 bodies' slow lanes
    A, B = float.fromhex("0x1.fffffcp-1"), float.fromhex("0x1.000002p-126")
    add("rope", x=arr([A, A, 1.0, A, 0.0, A, 0.0, 0.0]), dims=arr([1, 8], np.uint32),
        cos=arr([B, B, 1.0, 0.5]), sin=arr([0.5, 0.0, 0.0, B]))
    S, V = float.fromhex("0x1.50da32p+125"), float.fromhex("0x1.50da32p-1")
    add("dequant_f32", v=arr([V, -V, V, 1.0, V, V, 0.5, V, V]), s=arr([S]))
    add("dequant_i32", acc=np.array([1, -1, 1, 1, 2, 1, 1, 1, 1], np.int32), scale=arr([V] * 9),
        s=arr([S]))
    add("dequant_b_f32", v=np.repeat(arr([V, -V, 0.5, V, V] * 2), 2), s=arr([S, S]))
    # SiLU times up: subnormal g and u, products below FLT_MIN
    g = arr([2.0, 1e-40, -3.0, 2.0, 5.0, 1.0, -1e-44, 4.0, 2.0, 2.0 ** -100, 1.0])
    u = arr([0.5 * m, 1.0, 2.0 ** -125, 2.0 ** -126, m, 1e-38, 1.0, 2.0 ** -127, 0.5 * m,
             2.0 ** -30, 1e-39])
    add("silu_mul", g=g, u=u)
    # residual: subnormal operands and subnormal sums (1.5 m - m), vector and tail
    av = [1.5 * m, m, 1e-40, 3.0, 1.25 * m, -m, 2.0, 1.0, 1.5 * m, 1e-40, -1.75 * m, 4.0, m]
    bv = [-m, -0.5 * m, 1.0, 1e-41, -m, 1.5 * m, -2.0, 1e-44, -m, 0.0, m, 1e-39, -0.75 * m]
    add("add", a=arr(av), b=arr(bv))
    # dequantisation: (1 - 2^-24) * 2^-126 (inv = 1 / 2^126 = FLT_MIN), subnormal scales,
    # vector (16 and 4 wide) and tail
    n = 21
    acc = np.array([1, 3, -1, 7, 1, 2, 1, 1] * 2 + [1, -1, 5, 1, 1], np.int32)
    scale = np.array([below1, 0.25, below1, 1.0, 1e-40, below1, 2.0, below1] * 2
                     + [below1, below1, 0.5, 1e-41, 1.0], f)
    add("dequant_i32", acc=acc, scale=scale, s=arr([2.0 ** 126]))
    add("dequant_f32", v=arr([below1, -below1, 0.5, 3.0] * 5 + [below1]), s=arr([2.0 ** 126]))
    add("dequant_f32", v=arr([1e-40, 1.0, -1e-39, 2.0, 1e-38, 1e-45, 1.0, 1.0, 1e-40]),
        s=arr([1.0]))
    add("dequant_b_i32", acc=np.repeat(acc[:n - 1], 2).astype(np.int32), scale=scale[:n - 1],
        s=arr([2.0 ** 126, 1.0]))
    add("dequant_b_i32", acc=np.repeat(acc, 3).astype(np.int32), scale=scale,
        s=arr([2.0 ** 126, 1.0, 2.0 ** 125]))
    add("dequant_b_f32", v=np.repeat(arr([below1, 0.5, 1e-40, -below1] * 5 + [below1]), 2),
        s=arr([2.0 ** 126, 1.0]))
    # attention out: a subnormal per-head multiplier ((Z / (127 2^24)) * v_step)
    add("attention_out", y=np.arange(-60, 60, dtype=np.int8)[:3 * 20],
        z=np.array([1, 1 << 31, 0xFFFFFFFF], np.uint32), dims=arr([3, 20, 24], np.uint32),
        v_step=arr([1e-30]))
    # an INT8 row times a subnormal scale
    add("embed_int8", q=np.arange(-9, 12, dtype=np.int8), scale=arr([1e-40]))
    return out


def write(path, seed: int = 0, quick: bool = False) -> Tuple[Path, int]:
    """Write the vector file; returns (path, number of cases)."""
    cs = cases(seed, quick)
    buf = bytearray(b"TPV1" + struct.pack("<I", len(cs)))
    for kernel, inp in cs:
        names_in, names_out = KERNELS[kernel]
        outs = reference(kernel, inp)
        arrays = [inp[n] for n in names_in] + [_a(outs[n], outs[n].dtype) for n in names_out]
        buf += kernel.encode().ljust(16, b"\0") + struct.pack("<I", len(arrays))
        for a in arrays:
            a = np.ascontiguousarray(a)
            le = a.astype(a.dtype.newbyteorder("<"))
            buf += struct.pack("<II", DTYPES[a.dtype], a.size) + le.tobytes()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes(buf))
    return path, len(cs)

