"""The host kernels: the C library (generators/runtime/host/csrc/tphost.c) against its numpy twin
(generators/runtime/host/ops.py) bit for bit, on x86-64 in this process (ctypes, SSE2), the
portable bodies natively, and on ARMv7 under qemu-arm (the vectors' C program, 32-bit pointers;
the NEON build, the board's, and the VFP-only one), flush-to-zero cases included; the numpy twin against
independent models where one exists (numpy's float64 arithmetic, np.rint, np.exp, the gguf
package's Q8_0 dequantiser, golden.attention.score_multiplier); the decoder on both paths
(every engine word and token); the fallback when the library is missing or stale.
"""
from __future__ import annotations

import math
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from generators.runtime import Decoder, convert, load_checkpoint
from generators.runtime.host import clib as hostlib
from generators.runtime.host import ops as hostops
from generators.runtime.host import vectors as hostvectors
from generators.runtime import make_backend
from generators.runtime.model.checkpoint import EngineConfig
from generators.runtime.host.ops import F32, NUMPY
from generators.runtime.model.synthetic import TINY, write_checkpoint

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import armv7  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
CSRC = hostlib.CSRC
CFLAGS = armv7.CFLAGS


def _c():
    ops, why = hostlib.load()
    if ops is None:
        pytest.fail(f"the C host kernels are not available: {why} (make setup builds them)")
    return ops


def _bits(a):
    a = np.asarray(a)
    if a.dtype == np.float32:
        return a.view(np.uint32)
    if a.dtype == np.float64:
        return a.view(np.uint64)
    return a


def _equal(a, b) -> bool:
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float, bool, np.bool_)) and not isinstance(a, np.floating):
        return type(a) is type(b) and a == b
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(_bits(a), _bits(b))


def _public(kernel: str, inp: dict):
    """One case through the public hostops function (argument checks included); a ValueError
    is part of the answer."""
    f = hostops
    x = inp.get("x")
    try:
        if kernel == "sumsq":
            return f.sumsq(x)
        if kernel == "absmax":
            return f.absmax(x)
        if kernel == "argmax":
            return f.argmax(x)
        if kernel == "rmsnorm":
            return f.rmsnorm(x, inp["w"], inp["eps"][0])
        if kernel == "rope":
            return f.rope(x.reshape(*inp["dims"]), inp["cos"], inp["sin"])
        if kernel == "exp":
            return f.exp(x)
        if kernel == "silu_mul":
            return f.silu_mul(inp["g"], inp["u"])
        if kernel == "add":
            return f.add(inp["a"], inp["b"])
        if kernel == "quantise_rows":
            return f.quantise(x.reshape(*inp["dims"]))
        if kernel == "dequant_i32":
            return f.dequant_i32(inp["acc"], inp["scale"], inp["s"][0])
        if kernel == "dequant_f32":
            return f.dequant_f32(inp["v"], inp["s"][0])
        if kernel == "dequant_b_i32":
            return f.dequant_b_i32(inp["acc"], inp["scale"], inp["s"])
        if kernel == "dequant_b_f32":
            return f.dequant_b_f32(inp["v"], inp["s"])
        if kernel == "kv_step":
            return f.kv_step(x, inp["step"][0])
        if kernel == "kv_requantise":
            q = inp["q"].copy()
            f.kv_requantise(q, inp["ratio"][0])
            return q
        if kernel == "kv_row":
            return f.kv_row(x, inp["step"][0])
        if kernel == "kv_row16":
            return f.kv_row(x, inp["step"][0], 16)
        if kernel == "kv_append":
            t, d = (int(v) for v in inp["dims"])
            rows = inp["rows"].copy().reshape(t + 1, d)
            return f.kv_append(rows, t, inp["step"][0], x) + (rows,)
        if kernel == "score_mult":
            from generators.golden import attention as gatt
            cfg = gatt.AttentionConfig(exp_steps_per_octave=int(inp["params"][0]))
            return f.score_multiplier(float(inp["c"][0]), cfg)
        if kernel == "score_scale":
            return f.score_scale(inp["k_step"][0], inp["s_q"][0], int(inp["d"][0]))
        if kernel == "attention_out":
            g, d, frac = (int(v) for v in inp["dims"])
            return f.attention_out(inp["y"].reshape(g, d), inp["z"], inp["v_step"][0], frac)
        if kernel == "f16_to_f32":
            return f.f16_to_f32(inp["h"])
        if kernel == "embed_q8_0":
            return f.embed_q8_0(inp["blocks"], int(inp["n"][0]))
        if kernel == "embed_int8":
            return f.embed_int8(inp["q"], inp["scale"][0])
        if kernel == "f32_to_f16":
            return f.f32_to_f16(x)
        if kernel == "quantise_q8_0":
            return f.quantise_q8_0(x)
        if kernel == "quantise_q8_1":
            return f.quantise_q8_1(x)
        if kernel in ("quant_parts_q8_0", "quant_parts_q8_1"):
            return tuple(np.concatenate(a) for a in zip(*f.quantise_parts(
                x, kernel.endswith("q8_1"))))
    except (ValueError, OverflowError) as e:
        return ("error", type(e).__name__, str(e).split(":")[0])
    raise AssertionError(kernel)


CASES = hostvectors.cases(seed=1)


@pytest.mark.parametrize("kernel", sorted(hostvectors.KERNELS))
def test_c_equals_numpy_bit_for_bit(kernel):
    """Every case of every kernel (SmolLM2 sizes, odd sizes, the edges of hostvectors.cases):
    the C path's outputs have the numpy path's bits, errors included."""
    _c()
    mine = [inp for k, inp in CASES if k == kernel]
    assert mine
    for i, inp in enumerate(mine):
        with hostops.using("numpy"):
            a = _public(kernel, inp)
        with hostops.using("c"):
            b = _public(kernel, inp)
        if isinstance(a, tuple) and isinstance(a[0], str):
            assert a[:2] == b[:2], (kernel, i, a, b)     # the same error (messages differ)
        else:
            assert _equal(a, b), (kernel, i, a, b)


def test_errors_are_named_on_both_paths():
    for path in ("numpy", "c"):
        with hostops.using(path):
            with pytest.raises(ValueError, match="NaN or infinity"):
                hostops.quantise(np.array([1.0, np.nan], np.float32))
            with pytest.raises(ValueError, match="scale overflows"):
                hostops.quantise(np.full(4, 1e-40, np.float32))
            with pytest.raises(ValueError, match="NaN or infinity"):
                hostops.kv_append(np.zeros((2, 4), np.int8), 0, 0.0,
                                  np.array([0, np.inf, 0, 0], np.float32))
            with pytest.raises(ValueError):
                hostops.score_multiplier(-1.0)
            with pytest.raises(ValueError, match="empty"):
                hostops.rmsnorm([], [], 1e-5)
            with pytest.raises(ValueError, match="shapes"):
                hostops.add(np.zeros(3), np.zeros(4))
            for qb in (hostops.quantise_q8_0, hostops.quantise_q8_1):
                with pytest.raises(ValueError, match="NaN or infinity"):
                    qb(np.array([1.0, np.nan] + [0.0] * 30, np.float32))
                with pytest.raises(ValueError, match="below 2\\^-118"):
                    qb(np.array([0.0] * 32 + [1e-37] + [0.0] * 31, np.float32))
                with pytest.raises(ValueError, match="multiple of 32"):
                    qb(np.ones(40, np.float32))
                assert not qb(np.zeros(32, np.float32))[1].any()         # a zero block: d = 0


# ------------------------------------------------------------------ the numpy twin, checked

def test_numpy_lanes_add_in_order():
    """np.add.reduce(axis=0) adds row after row: the 8-lane sum equals a Python loop of float32
    additions in the documented order, on values where the order matters."""
    rng = np.random.default_rng(3)
    for n in (576, 1536, 13, 1, 64 * 8 + 3):
        x = (rng.standard_normal(n) * np.exp(rng.uniform(-8, 8, n))).astype(F32)
        lanes = [F32(0.0)] * 8
        for i, v in enumerate(x):
            lanes[i % 8] = F32(lanes[i % 8] + F32(v * v))
        t = [F32(lanes[j] + lanes[j + 4]) for j in range(4)]
        want = F32(F32(t[0] + t[2]) + F32(t[1] + t[3]))
        with hostops.using("numpy"):
            got = hostops.sumsq(x)
        assert _equal(got, want), n
        # and the order matters on these values (pairwise or sequential give other bits)
        if n == 1536:
            assert not _equal(np.sum(x * x, dtype=F32), want) or \
                   not _equal(F32(math.fsum(float(v) * float(v) for v in x)), want)


def test_rounding_is_half_to_even_at_every_tie():
    """C's MAGIC addition against np.rint in float64: every k + 0.5 in the INT8 range, its two
    neighbouring floats, and random values; s = 1 exactly (max|x| = 127)."""
    ks = (np.arange(-127, 127) + 0.5).astype(F32)
    x = np.concatenate([ks, np.nextafter(ks, F32(np.inf)), np.nextafter(ks, -F32(np.inf)),
                        np.random.default_rng(0).uniform(-127, 127, 4000).astype(F32)])
    x = np.concatenate([[F32(127.0)], x])
    want = np.clip(np.rint(x.astype(np.float64)), -128, 127).astype(np.int8)
    for path in ("numpy", "c"):
        with hostops.using(path):
            q, s = hostops.quantise(x)
        assert s == 1.0 and np.array_equal(q, want), path


def _correctly_rounded(exact, r) -> bool:
    """r (a float32) is the float32 nearest ``exact`` (a Fraction), ties to an even mantissa:
    judged with exact rationals against r's two float32 neighbours, no float arithmetic."""
    from fractions import Fraction
    r = F32(r)
    if not np.isfinite(r):
        return False
    lo, hi = np.nextafter(r, F32(-np.inf)), np.nextafter(r, F32(np.inf))
    d = abs(exact - Fraction(float(r)))
    for n in (lo, hi):
        if not np.isfinite(n):
            continue
        dn = abs(exact - Fraction(float(n)))
        if dn < d or (dn == d and int(r.view(np.uint32)) & 1):
            return False
    return True


def test_division_and_sqrt_are_ieee_on_any_numpy():
    """The twins' float32 / and sqrt (hostops._div32, _sqrt32) are the correctly rounded ones,
    checked with exact rationals: numpy's own float32 divide and sqrt are not on ARMv7 (NEON
    estimate + Newton-Raphson), so the twins must not use them. Random operands over the whole
    exponent range, subnormal quotients and the RMSNorm / quantisation shapes among them."""
    from fractions import Fraction
    rng = np.random.default_rng(20261204)
    bits = rng.integers(0x00000001, 0x7F7FFFFF, size=(3000, 2), dtype=np.uint32)
    a, b = bits[:, 0].view(F32), bits[:, 1].view(F32)
    a = np.concatenate([a, rng.standard_normal(2000).astype(F32), F32([127.0, 1.0, 1e-38, 3.0])])
    b = np.concatenate([b, rng.uniform(0.5, 200, 2000).astype(F32), F32([0.7, 3.0, 7.0, 1e30])])
    q = hostops._div32(a, b)
    assert q.dtype == F32 and q.shape == a.shape
    checked = 0
    for x, y, r in zip(a, b, q):
        exact = Fraction(float(x)) / Fraction(float(y))
        if abs(exact) > Fraction(float(np.finfo(F32).max)):
            assert np.isinf(r)
            continue
        assert _correctly_rounded(exact, r), (x, y, r)
        checked += 1
    assert checked > 4000
    assert any(0 < abs(v) < hostops.FLT_MIN for v in q)          # subnormal quotients met
    s = hostops._sqrt32(np.abs(a))
    for x, r in zip(np.abs(a[:1500]), s[:1500]):
        # r is sqrt(x) correctly rounded iff x lies between the squares of r's half-ulp points
        assert _correctly_rounded_sqrt(Fraction(float(x)), r), (x, r)
    assert isinstance(hostops._div32(F32(1.0), F32(3.0)), np.float32)    # scalars stay scalars


def _correctly_rounded_sqrt(x, r) -> bool:
    from fractions import Fraction
    r = F32(r)
    lo, hi = np.nextafter(r, F32(-np.inf)), np.nextafter(r, F32(np.inf))
    mid_lo = (Fraction(float(lo)) + Fraction(float(r))) / 2
    mid_hi = (Fraction(float(r)) + Fraction(float(hi))) / 2
    even = not int(r.view(np.uint32)) & 1
    above = mid_lo ** 2 < x or (even and mid_lo ** 2 == x)
    below = x < mid_hi ** 2 or (even and x == mid_hi ** 2)
    return above and below


def test_exp_is_within_a_few_ulp():
    x = np.concatenate([np.linspace(-86, 88, 100001), [0.0, -0.0, 1e-30]]).astype(F32)
    with hostops.using("c"):
        e = hostops.exp(x).astype(np.float64)
    ref = np.exp(x.astype(np.float64))
    ulp = np.spacing(ref.astype(F32)).astype(np.float64)
    assert np.max(np.abs(e - ref) / ulp) < 3.0
    # clamped outside [-86, 88]: SiLU saturates to g * u and to a tiny negative value
    with hostops.using("c"):
        h = hostops.silu_mul(np.array([200.0, -200.0], F32), np.array([1.0, 1.0], F32))
    assert h[0] == 200.0 and -1e-35 < h[1] < 0


def test_float32_numerics_against_todays_float64():
    """Where the float32 reference differs from the float64 code it replaces, and by how much
    (docs/runtime.md "Host numerics" quotes these bounds)."""
    rng = np.random.default_rng(5)
    x64 = rng.standard_normal(576) * 3
    x = x64.astype(F32)
    w = rng.standard_normal(576).astype(F32)
    with hostops.using("numpy"):
        y = hostops.rmsnorm(x, w, 1e-5).astype(np.float64)
        old = x.astype(np.float64) / np.sqrt(np.mean(x.astype(np.float64) ** 2) + 1e-5) * w
        assert np.max(np.abs(y - old) / np.abs(old).max()) < 2e-7     # measured 3.9e-8
        g = (rng.standard_normal(1536) * 4).astype(F32)
        u = rng.standard_normal(1536).astype(F32)
        h = hostops.silu_mul(g, u).astype(np.float64)
        g64 = g.astype(np.float64)
        old = g64 / (1 + np.exp(-g64)) * u
        assert np.max(np.abs(h - old)) < 4e-7 * np.abs(old).max()     # measured 7.5e-8
        # activation quantisation: the float64 quantiser of generators.packing on the same
        # float32 values; a product x * s rounded in float32 crosses a .5 boundary rarely
        from generators.packing import absmax_quantize_activations
        flips = 0
        for _ in range(200):
            v = (rng.standard_normal(576) * 10).astype(F32)
            q, s = hostops.quantise(v)
            q64, s64 = absmax_quantize_activations(v.astype(np.float64))
            assert abs(float(s) - s64) <= 1e-7 * s64
            d = np.abs(q.astype(int) - q64.astype(int))
            assert d.max() <= 1
            flips += int(d.sum())
        assert flips <= 12                    # measured: 0 of these 115,200


def test_q8_0_rows_equal_the_gguf_package():
    """SmolLM2's token embedding (Q8_0 blocks as stored in the GGUF) through embed_q8_0 equals
    the gguf package's dequantiser (its own numpy code) on sampled rows."""
    import gguf
    from generators.runtime.model.gguf import smollm2_path
    r = gguf.GGUFReader(str(smollm2_path()))
    t = next(t for t in r.tensors if t.name == "token_embd.weight")
    assert t.tensor_type == gguf.GGMLQuantizationType.Q8_0
    hidden = int(t.shape[0])
    data = np.asarray(t.data).reshape(-1, hidden // 32 * 34)
    rows = np.random.default_rng(0).integers(0, data.shape[0], 64)
    want = gguf.quants.dequantize(data[rows], gguf.GGMLQuantizationType.Q8_0)
    for path in ("numpy", "c"):
        with hostops.using(path):
            for i, r_ in enumerate(rows):
                assert _equal(hostops.embed_q8_0(data[r_], hidden),
                              want[i].astype(F32).reshape(-1)), (path, r_)


def test_score_multiplier_equals_the_golden_model():
    from generators.golden import attention as gatt
    rng = np.random.default_rng(2)
    for c in [0.0, 1e-12, 1e-3, 0.5, 7.0] + list(10.0 ** rng.uniform(-9, 2.4, 2000)):
        with hostops.using("c"):
            assert hostops.score_multiplier(c) == gatt.score_multiplier(c), c


# ------------------------------------------------------------------ builds: x86-64 and ARMv7

def _build(cc, out, extra=()):
    return armv7.build(cc, [CSRC / "tphvectors.c", CSRC / "tphost.c", CSRC / "tphwork.c"], out,
                       extra)


def _run_vectors(cmd, vec):
    r = subprocess.run([*cmd, str(vec)], capture_output=True, text=True, timeout=300)
    return r.returncode, r.stdout + r.stderr


@pytest.fixture(scope="module")
def vectors(tmp_path_factory):
    path, n = hostvectors.write(tmp_path_factory.mktemp("tpv") / "v.tpv", seed=2)
    return path, n


def test_native_vectors_and_a_flipped_bit_is_caught(vectors, tmp_path):
    vec, n = vectors
    exe = _build("gcc", tmp_path / "tphvectors", ["-march=x86-64"])
    rc, out = _run_vectors([str(exe)], vec)
    assert rc == 0 and f"total {n} cases" in out and " 0 mismatches (64-bit" in out, out
    assert "sse2 bodies, argmax by halves on 2 threads)" in out, out
    # the portable bodies (the VFP-only build's) on x86-64 too: NEON's flush computed in C
    port = _build("gcc", tmp_path / "tph_vectors_portable", ["-march=x86-64", "-DTPH_PORTABLE"])
    rc, out = _run_vectors([str(port)], vec)
    assert rc == 0 and " 0 mismatches (64-bit pointers, portable bodies," in out, out
    # the check can fail: one flipped bit in the last expected float of the file
    bad = tmp_path / "bad.tpv"
    data = bytearray(vec.read_bytes())
    data[-2] ^= 0x01
    bad.write_bytes(bytes(data))
    rc, out = _run_vectors([str(exe)], bad)
    assert rc == 1 and "MISMATCH" in out and " 1 mismatches" in out, out


#: the kernels of the per-token step with NEON float bodies (tphost.c), as the NEON build's
#: objdump shows them (static helpers inlined into their callers)
NEON_KERNELS = {"tph_sumsq", "tph_rmsnorm", "tph_rope", "tph_exp", "tph_silu_mul", "tph_add",
                "tph_quantise_rows", "tph_dequant_i32", "tph_dequant_f32", "tph_dequant_b_i32",
                "tph_dequant_b_f32", "tph_kv_requantise", "tph_kv_row", "tph_quantise_q8_1"}


@pytest.mark.parametrize("fpu", ["vfpv3-d16", "neon"])
def test_armv7_vectors_under_qemu(vectors, tmp_path, fpu):
    """The same C built for the board's CPU (ARMv7, 32-bit pointers, hard float) with Debian's
    cross compiler, run under qemu-arm (Cortex-A9): every output bit equals numpy's, flush-to-
    zero cases included (hostvectors.ftz_cases). -mfpu=neon (the board's build) runs the NEON
    bodies (their float arithmetic on NEON, which flushes: the objdump check below); the
    VFP-only build runs the portable bodies, which compute NEON's flush in C."""
    armv7.need_arm()
    vec, n = vectors
    extra = ["-static", "-mcpu=cortex-a9", f"-mfpu={fpu}"]
    exe = _build(armv7.ARM_CC, tmp_path / f"tph_vectors_{fpu}", extra)
    neon = armv7.neon_float(exe, "tph_abi")                # the library's functions onward
    if fpu == "neon":
        assert NEON_KERNELS <= set(neon), sorted(NEON_KERNELS - set(neon))
        # the per-block x quantisation rounds on NEON with integer compares: one scalar VFP
        # compare is left (a block's d != 0), none per value (gcc 12 made vcgeq_f32 one a lane)
        cmp = armv7.vfp_compares(exe, "tph_abi")
        assert len(cmp.get("tph_quantise_q8_1", [])) <= 1, cmp.get("tph_quantise_q8_1")
    else:
        assert not neon, neon
    rc, out = _run_vectors(["qemu-arm", "-cpu", "cortex-a9", str(exe)], vec)
    assert rc == 0 and f"total {n} cases" in out and " 0 mismatches (32-bit" in out, out
    assert ("neon bodies" if fpu == "neon" else "portable-arm bodies") in out, out
    assert "argmax by halves on 2 threads)" in out, out        # qemu-arm runs the thread


@pytest.mark.parametrize("arm", [False, True])
def test_a_wrong_combination_of_the_argmax_halves_is_caught(vectors, tmp_path, arm):
    """The vectors' argmax cases (hostvectors.argmax_split_cases among them) catch a C loop
    argmax that combines its halves wrongly: tphwork.c built with TPH_WORK_MUTANT_TIE takes the
    second half's maximum on a tie; every mismatch is the worker's argmax by halves (tph_argmax
    and the one-thread fallback agree), on x86-64 and on ARMv7 under qemu-arm."""
    vec, _ = vectors
    mutant = ["-DTPH_WORK_MUTANT_TIE"]
    if arm:
        armv7.need_arm()
        exe = _build(armv7.ARM_CC, tmp_path / "tph_vectors_mutant",
                     ["-static", "-mcpu=cortex-a9", "-mfpu=neon", "-mfloat-abi=hard", *mutant])
        cmd = ["qemu-arm", "-cpu", "cortex-a9", str(exe)]
    else:
        exe = _build("gcc", tmp_path / "tph_vectors_mutant", ["-march=x86-64", *mutant])
        cmd = [str(exe)]
    rc, out = _run_vectors(cmd, vec)
    assert rc == 1, out
    bad = [ln for ln in out.splitlines() if "MISMATCH" in ln]
    assert bad and all("argmax" in ln and "by halves (2 threads)" in ln for ln in bad), out[:3000]
    assert "argmax by halves on 2 threads)" in out, out


def _ieee_ops():
    """The float32 twin with IEEE arithmetic (subnormals kept): what the VFP computed before
    the NEON bodies."""
    o = hostops._NumpyOps(np.float32, "ieee")
    plain = ((lambda v: np.asarray(v, F32)), np.multiply, np.add, np.subtract)
    o._fz, o._mul, o._add, o._sub = plain
    o._e = hostops._ExpConsts(np.float32)
    o._e.fz, o._e.mul, o._e.add, o._e.sub = plain
    return o


def test_flush_to_zero_cases_decide_bits():
    """Every flush-to-zero case's outputs differ from IEEE float32 arithmetic, so the vectors'
    pass under qemu-arm's NEON (above) and through the SSE2 and portable bodies shows that
    they flush as the twin says; the one rounding edge (an exact product just below FLT_MIN that
    IEEE rounds up to FLT_MIN) is flushed by the twin."""
    ieee = _ieee_ops()
    kernels = set()
    for kernel, inp in hostvectors.ftz_cases():
        a = hostvectors.reference(kernel, inp)
        with np.errstate(all="ignore"):
            b = hostvectors.reference(kernel, inp, ieee)
        assert any(not np.array_equal(_bits(a[k]), _bits(b[k])) for k in a), kernel
        kernels.add(kernel)
    assert kernels >= {"sumsq", "rmsnorm", "rope", "silu_mul", "add", "dequant_i32",
                       "dequant_f32", "dequant_b_i32", "dequant_b_f32", "attention_out",
                       "embed_int8"}
    tiny = F32(np.finfo(F32).tiny)
    below1 = np.nextafter(F32(1.0), F32(0.0))
    assert below1 * tiny == tiny                           # IEEE: rounds up to FLT_MIN
    assert hostops._mulz(below1, tiny) == 0 and hostops._mulz(-below1, tiny).view(np.uint32) \
        == 0x80000000                                      # NEON: tiny before rounding
    assert hostops._mulz(F32(1.0), tiny) == tiny and hostops._fz(F32(1e-40)) == 0


# ------------------------------------------------------------------ the decoder on both paths

ENG = EngineConfig(max_k=512, max_context=32)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return load_checkpoint(write_checkpoint(tmp_path_factory.mktemp("tiny"), TINY, seed=1), ENG)


def _decode(m, backend, path, prompt=(1, 2, 3), tokens=6):
    trace, logits = [], []
    with hostops.using(path):
        dec = Decoder(m, make_backend(backend, m), trace=trace)
        toks = list(dec.generate(list(prompt), tokens,
                                 on_token=lambda i, t, lg: logits.append(lg.copy())))
    return toks, trace, logits


@pytest.mark.parametrize("fmt, backend", [("int8", "golden"), ("ternary", "golden"),
                                          ("q4", "golden"), ("int8", "dma-model")])
def test_decoder_c_path_equals_numpy_path(tiny, fmt, backend):
    """Tokens, every engine output word and every logit bit: the C path on `backend` against
    the numpy path on golden (rtl: tests/runtime/engines/test_runtime_rtl.py runs C on the RTL against numpy on
    golden)."""
    _c()
    m = convert(tiny, fmt, ENG, notice=None)
    t1, tr1, l1 = _decode(m, "golden", "numpy")
    t2, tr2, l2 = _decode(m, backend, "c")
    assert t1 == t2 and len(tr1) == len(tr2) > 0
    for a, b in zip(tr1, tr2):
        assert a[:3] == b[:3] and all(np.array_equal(x, y) for x, y in zip(a[3], b[3])), a[:3]
    assert all(_equal(a, b) for a, b in zip(l1, l2))


# ------------------------------------------------------------------ fallback and staleness

def test_without_the_library_numpy_runs_with_one_warning(tiny):
    code = (
        "import warnings, numpy as np\n"
        "warnings.simplefilter('always')\n"
        "from generators.runtime.host import ops as hostops\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    a = hostops.rmsnorm(np.ones(8), np.ones(8), 1e-5)\n"
        "    b = hostops.silu_mul(np.ones(8), np.ones(8))\n"
        "n = len([x for x in w if issubclass(x.category, hostops.HostOpsWarning)])\n"
        "print(hostops.active(), n)\n"
        "print(str(w[0].message))\n")
    env = dict(os.environ, TERNARY_PYNQ_TPHOST="none", PYTHONPATH=str(REPO))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    first, msg = r.stdout.splitlines()[:2]
    assert first == "numpy 1" and "numpy path runs" in msg, r.stdout
    env[hostops.ENV] = "c"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode != 0 and "not available" in r.stderr


def test_without_the_library_the_decoder_runs_numpy(tiny, tmp_path):
    """Issue 18 item 5: with no C library (TERNARY_PYNQ_TPHOST=none: as after an install
    without a compiler) the decoder runs the Python loop on numpy, warns once, and gives the
    tokens of the numpy path in this process (the reference)."""
    folder = write_checkpoint(tmp_path / "tiny", TINY, seed=1)
    code = (
        "import warnings\n"
        "from generators.runtime import Decoder, convert, load_checkpoint, make_backend\n"
        "from generators.runtime.host import ops as hostops\n"
        "from generators.runtime.model.checkpoint import EngineConfig\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    eng = EngineConfig(max_k=512, max_context=32)\n"    # ENG: the same KV calibration
        f"    m = convert(load_checkpoint({str(folder)!r}, eng), 'int8', eng, notice=None)\n"
        "    dec = Decoder(m, make_backend('golden', m))\n"
        "    loop = dec.loop_now()\n"
        "    toks = list(dec.generate([1, 2, 3], 4))\n"
        "n = len([x for x in w if issubclass(x.category, hostops.HostOpsWarning)])\n"
        "print(loop, hostops.active(), n, ','.join(map(str, toks)))\n")
    env = dict(os.environ, TERNARY_PYNQ_TPHOST="none", PYTHONPATH=str(REPO))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    m = convert(load_checkpoint(folder, ENG), "int8", ENG, notice=None)
    with hostops.using("numpy"):
        want = list(Decoder(m, make_backend("golden", m), loop="python").generate([1, 2, 3], 4))
    assert r.stdout.split() == ["python", "numpy", "1", ",".join(map(str, want))], r.stdout


def test_a_stale_library_is_refused(tmp_path):
    so = tmp_path / "libstale.so"
    r = subprocess.run(["gcc", *CFLAGS, "-shared", "-fPIC", '-DTPH_SOURCE_SHA="0000"',
                        str(CSRC / "tphost.c"), "-lm", "-o", str(so)], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    ops, why = hostlib._open(so, check_source=True)
    assert ops is None and "stale" in why
    ops, why = hostlib._open(so, check_source=False)       # TERNARY_PYNQ_TPHOST=path: taken
    assert ops is not None and ops.name == "c"
    ops, why = hostlib._open(tmp_path / "missing.so", check_source=True)
    assert ops is None and "does not load" in why


def test_the_library_names_its_bodies_and_an_arm_build_without_neon_says_so(tmp_path):
    """tph_build: "sse2" for this x86-64 build, "portable" with -DTPH_PORTABLE; on ARM a
    build without NEON loads with one warning line (hostlib.build_note: the board's flags)."""
    ops = _c()
    assert ops.bodies == "sse2" == hostlib.expected_build("x86_64")
    so = tmp_path / "libportable.so"
    r = subprocess.run(["gcc", *CFLAGS, "-shared", "-fPIC", "-DTPH_PORTABLE",
                        str(CSRC / "tphost.c"), "-lm", "-o", str(so)], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    with warnings.catch_warnings():
        warnings.simplefilter("error")             # no warning on x86-64
        ops, why = hostlib._open(so, check_source=False)
    assert ops is not None and ops.bodies == "portable", why
    assert hostlib.expected_build("armv7l") == "neon"
    note = hostlib.build_note("portable-arm", "armv7l")
    assert "\n" not in note and "without NEON" in note and "-mfpu=neon" in note
    assert hostlib.build_note("neon", "armv7l") == "" == hostlib.build_note("sse2", "x86_64")


def test_the_installed_library_is_current():
    ops = _c()
    lib = ops.lib
    assert lib.tph_abi() == hostlib.ABI
    assert lib.tph_source().decode() == hostlib.source_sha()


def test_package_installs_without_a_compiler(tmp_path):
    """pip builds the wheel with CC pointing at nothing: one warning line, a wheel without
    the extension (the runtime then runs numpy: test above)."""
    env = dict(os.environ, CC="/nonexistent/cc")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                        "-w", str(tmp_path), str(REPO)], capture_output=True, text=True, env=env,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    whl = list(tmp_path.glob("ternary_pynq-*.whl"))
    assert len(whl) == 1
    import zipfile
    names = zipfile.ZipFile(whl[0]).namelist()
    assert not any("_tphost" in n for n in names)
    assert "generators/runtime/host/csrc/tphost.c" in names and "generators/runtime/host/ops.py" in names


# ------------------------------------------------------------------ x in two parts

@pytest.mark.parametrize("path", ["numpy", "c"])
def test_quantise_parts_from_its_definition(path):
    """hostops.quantise_parts against its definition computed apart (docs/activations.md
    section 7): the high part is quantise_q8_1 / _q8_0 of x; the residual x - f16(d) q is
    computed in float64 and rounded once to float32 (innocuous double rounding of a
    difference); a residual block below 2^-118 becomes zeros; the low part is the quantiser
    of that. And the two parts' values follow x to 2^-15 of each block's max|x| plus 127 x
    2^-25 (half the spacing of fp16's subnormal steps, times the largest code: the residual's
    step is subnormal below max|x| of about 2), where one part's follow it to 2^-7.8 (normal
    fp16 steps: max|x| > 0.01), on SmolLM2-sized vectors with outlier channels."""
    if path == "c":
        _c()
    rng = np.random.default_rng(11)
    vecs = []
    for n, scale in ((576, 1.0), (1536, 30.0), (64, 1e-3), (32, 1e4)):
        x = (rng.standard_normal(n) * scale).astype(F32)
        x[rng.integers(0, n, 3)] *= F32(40.0)
        vecs.append(x)
    ints = np.concatenate([[127, -127], rng.integers(-127, 128, 30)]).astype(F32)
    exact = (ints * F32(0.125)).astype(F32)
    tiny, at = exact.copy(), exact.copy()
    tiny[10], at[10] = F32(2.0 ** -125), F32(2.0 ** -118)
    vecs += [exact, tiny, at]
    with hostops.using(path):
        for q81 in (True, False):
            quant = hostops.quantise_q8_1 if q81 else hostops.quantise_q8_0
            for x in vecs:
                hi, lo = hostops.quantise_parts(x, q81)
                want_hi = quant(x)
                for a, b in zip(hi, want_hi):
                    assert np.array_equal(a, b)
                d = want_hi[1].view(np.float16).astype(np.float64)
                r = (x.astype(np.float64).reshape(-1, 32)
                     - d[:, None] * want_hi[0].astype(np.float64).reshape(-1, 32))
                r = r.astype(F32)
                r[np.max(np.abs(r), axis=1) < 2.0 ** -118] = 0
                for a, b in zip(lo, quant(r.reshape(-1))):
                    assert np.array_equal(a, b)
                val = [(p[0].astype(np.float64).reshape(-1, 32)
                        * p[1].view(np.float16).astype(np.float64)[:, None]) for p in (hi, lo)]
                amax = np.max(np.abs(x.astype(np.float64).reshape(-1, 32)), axis=1)[:, None]
                err1 = np.abs(val[0] - x.reshape(-1, 32))
                err2 = np.abs(val[0] + val[1] - x.reshape(-1, 32))
                big = amax[:, 0] > 1e-2             # fp16 steps normal: the bounds hold
                assert np.all(err2[big] <= amax[big] * 2.0 ** -15 + 127 * 2.0 ** -25)
                assert np.all(err1[big] <= amax[big] * 2.0 ** -7.8)
            # the edges: a zero residual, one below 2^-118 (zeros), one at it (kept)
            for x in (exact, tiny):
                lo = hostops.quantise_parts(x, q81)[1]
                assert not lo[0].any() and not lo[1].any()
            lo = hostops.quantise_parts(at, q81)[1]
            assert lo[0][10] == 127 and not np.delete(lo[0], 10).any()
