"""cocotb tests of a generated Q4_1 engine: `q4-engine`, or `mv-engine` with q4=true (Q4_1
rows on a third lane next to INT8 and ternary rows; then mixed traffic of all three too).

Every output word is compared with generators.golden.q4 (exact integers, one rounding to
float32, no code shared with the RTL or the host packing module; reached through
generators.golden.mv for the frames of every format); the frames are built with the host
functions of generators.q4 from llama.cpp-layout Q4_1 blocks. An engine of `vectors` V >= 2
gets frames of B = 1 .. V activation vectors (docs/vectors.md) mixed with one-vector frames.

Format 0x05 (Q4_1 rows with Q8_1 x blocks, docs/activations.md; the manifest's
`block_formats`): the `test_q81_*` tests, frames from generators.q4.build_q4_q8_1_frame with x
quantised by generators.golden.blocks.quantize_q8_1 (an outlier channel) or random codes and
fp16 scales (subnormal, negative, the largest), against the same golden model.
"""
from __future__ import annotations

import os

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, with_timeout

from generators.golden import blocks as gblocks
from generators.golden import q4 as golden
from generators.golden import mv as golden_mv
from generators.golden.mv import decode_status
from generators.packing import build_frame
from generators.q4 import (build_q4_frame, build_q4_q8_1_frame, pack_q4_rows, pack_q4_rows_raw,
                           q4_1_blocks_to_raw, q4_row_beats)
from sim.common import q80
from sim.common.axis_tb import StreamTB, compare_words

BEAT_BUDGET = int(os.environ.get("TB_BEATS", "3000"))

F16_MAX, F16_MIN_SUB, F16_INF, F16_NAN = 0x7BFF, 0x0001, 0x7C00, 0x7E00


class Q4TB(StreamTB):
    def __init__(self, dut):
        super().__init__(dut)
        self.max_k = int(self.man["parameters"]["max_k"])
        self.latency = int(self.man["latency"])
        self.np_rng = np.random.default_rng(self.rng.randrange(2**32))
        self.accepted = [int(f) for f in self.man.get("formats", [self.man.get("format")])]
        assert golden.FMT_Q4 in self.accepted
        # the per-block x formats the engine takes too (0x05 with the Q4_1 lane)
        self.accepted += [int(f) for f in self.man.get("block_formats", [])]
        self.q81 = golden.FMT_Q4_Q8_1 in self.accepted
        self.vectors = int(self.man.get("vectors", 1))

    def pick_b(self):
        """B of the next frame: None (no vectors flag) half of the time, else 1 .. vectors."""
        if self.vectors < 2 or self.rng.random() < 0.5:
            return None
        return self.vectors if self.rng.random() < 0.5 else self.rng.randint(1, self.vectors)

    def xs(self, k, b):
        shape = k if b is None else (b, k)
        return self.np_rng.integers(-128, 128, size=shape, dtype=np.int8)

    def scales(self, shape, kind="mixed"):
        """fp16 bit patterns: 'typical' (weights of a trained model), 'wild' (any finite
        exponent, either sign, subnormals and zero), or a mix of both per row."""
        r = self.np_rng
        typical = (r.normal(0, 0.01, size=shape)).astype(np.float16).view(np.uint16)
        e = r.integers(0, 31, size=shape, dtype=np.uint16)
        wild = (r.integers(0, 2, size=shape, dtype=np.uint16) << 15) | (e << 10) \
            | r.integers(0, 1024, size=shape, dtype=np.uint16)
        if kind == "typical":
            return typical
        if kind == "wild":
            return wild
        pick = r.random(shape[:1]) < 0.5
        return np.where(pick[:, None], typical, wild).astype(np.uint16)

    def frame(self, k, n, tag=None, x=None, q=None, d=None, m=None, kind="mixed", via_raw=None,
              b=None):
        """A Q4_1 frame; `b` None: one vector, no flag; an int: B vectors; "pick": pick_b()."""
        r = self.np_rng
        nb = -(-k // 32)
        b = self.pick_b() if b == "pick" else b
        x = self.xs(k, b) if x is None else x
        q = r.integers(0, 16, size=(n, nb, 32), dtype=np.uint8) if q is None else q
        d = self.scales((n, nb), kind) if d is None else d
        m = self.scales((n, nb), kind) if m is None else m
        tag = self.rng.randrange(256) if tag is None else tag
        via_raw = (k % 32 == 0 and self.rng.random() < 0.5) if via_raw is None else via_raw
        if via_raw:   # through llama.cpp's block_q4_1 bytes, as a GGUF file holds them
            rows = pack_q4_rows_raw(q4_1_blocks_to_raw(q, d, m), n, k)
        else:
            rows = pack_q4_rows(q, d, m, k)
        return build_q4_frame(x, rows, k, tag)

    def frame_beats(self, k, n, b=None):
        return (1 if b is None else 2) + (b or 1) * -(-k // 8) + n * q4_row_beats(k)

    # ---------------------------------------------------------------- format 0x05
    def x_q81(self, k, b=None, xkind="quantised"):
        """Q8_1 x of one vector (b None) or b vectors: (codes, d, s fp16 bits). 'quantised':
        float x (normal, one outlier channel of 100x, some zero blocks) through ggml's
        quantize_row_q8_1_ref; 'wild': random codes and fp16 d and s of any finite exponent,
        either sign, subnormals; 'extreme': the largest |code| and fp16 of the extremes."""
        r = self.np_rng
        shape = (k,) if b is None else (b, k)
        nb = k // 32
        sshape = shape[:-1] + (nb,)
        if xkind == "quantised":
            x = r.normal(0, 1, size=shape).astype(np.float32)
            x[..., r.integers(0, k)] *= 100                 # an outlier channel
            if nb > 1 and r.random() < 0.3:
                z = r.integers(0, nb)
                x[..., 32 * z:32 * z + 32] = 0              # a zero block: d = s = 0
            q, d, s = gblocks.quantize_q8_1(x)
            return q.reshape(shape), d, s
        if xkind == "wild":
            return (r.integers(-128, 128, size=shape, dtype=np.int8), self.scales(sshape, "wild"),
                    self.scales(sshape, "wild"))
        ext = np.array([F16_MAX, F16_MAX | 0x8000, F16_MIN_SUB, 0x8001, 0x03FF, 0, 0x8000,
                        0x0400, 0x3C00, 0xBC00], dtype=np.uint16)
        return (r.choice(np.array([-128, 127, -1, 0], np.int8), size=shape),
                r.choice(ext, size=sshape).astype(np.uint16),
                r.choice(ext, size=sshape).astype(np.uint16))

    def frame_q81(self, k, n, tag=None, x=None, q=None, d=None, m=None, kind="mixed",
                  xkind=None, b=None):
        """A 0x05 frame (K a multiple of 32); `x` (codes, d, s) or drawn by x_q81(xkind);
        `b` as frame()'s."""
        r = self.np_rng
        nb = k // 32
        b = self.pick_b() if b == "pick" else b
        xkind = self.rng.choice(["quantised", "quantised", "wild"]) if xkind is None else xkind
        xq, xd, xs = self.x_q81(k, b, xkind) if x is None else x
        if b is not None and np.asarray(xd).ndim == 1:
            xd, xs = np.asarray(xd)[None], np.asarray(xs)[None]
        q = r.integers(0, 16, size=(n, nb, 32), dtype=np.uint8) if q is None else q
        d = self.scales((n, nb), kind) if d is None else d
        m = self.scales((n, nb), kind) if m is None else m
        tag = self.rng.randrange(256) if tag is None else tag
        if self.rng.random() < 0.5:
            rows = pack_q4_rows_raw(q4_1_blocks_to_raw(q, d, m), n, k)
        else:
            rows = pack_q4_rows(q, d, m, k)
        return build_q4_q8_1_frame(xq, xd, xs, rows, k, tag)

    def frame_beats_q81(self, k, n, b=None):
        return (1 if b is None else 2) + (b or 1) * (k // 8 + -(-k // 64)) + n * q4_row_beats(k)

    def other_frame(self, k, n, fmt, b=None):
        """An INT8 (0x08), ternary (0x03) or Q8_0 (0x09: K rounded down to a multiple of 32,
        at least 32) frame, for an engine that computes those too."""
        r = self.np_rng
        if fmt == q80.FORMAT:
            return q80.frame_q80(self.rng, r, max(32, k // 32 * 32), n, b=b)
        if fmt == golden.FMT_Q4_Q8_1:
            return self.frame_q81(max(32, k // 32 * 32), n, b=b)
        x = self.xs(k, b)
        if fmt == 0x03:
            return build_frame(x, r.integers(-1, 2, size=(n, k), dtype=np.int8), "ternary",
                               tag=self.rng.randrange(256), pad_fill=r)
        return build_frame(x, r.integers(-128, 128, size=(n, k), dtype=np.int8), "int8",
                           tag=self.rng.randrange(256), pad_fill=r)

    async def run_check(self, frames, timeout_us=200_000):
        return await super().run_check(
            frames, self.expected, golden.flag_names, timeout_us)

    def expected(self, beats):
        return golden_mv.mv_stream(beats, 8, self.accepted, self.max_k, self.vectors)


def edge_ks(tb):
    ks = {1, 2, 15, 16, 17, 31, 32, 33, 48, 63, 64, 65, 96, 127, 128, 129, tb.max_k - 1, tb.max_k}
    return sorted(k for k in ks if 1 <= k <= tb.max_k)


def random_frames(tb, budget):
    frames, used, edges = [], 0, edge_ks(tb)
    while used < budget:
        k = edges.pop(0) if edges else tb.rng.randint(1, tb.max_k)
        n = tb.rng.randint(1, max(1, min(40, (budget - used) // q4_row_beats(k))))
        b = tb.pick_b()
        frames.append(tb.frame(k, n, b=b))
        used += tb.frame_beats(k, n, b)
    return frames


@cocotb.test()
async def test_random_shapes(dut):
    """Random K (edges first: not multiples of 16, 32, 64) and N, typical and wild fp16
    scales, straight and through llama.cpp's block bytes; free output, then pauses."""
    tb = Q4TB(dut)
    await tb.reset()
    await tb.run_check(random_frames(tb, BEAT_BUDGET // 2))
    tb.set_pauses(idle=0.3, backpressure=0.3)
    await tb.run_check(random_frames(tb, BEAT_BUDGET // 2))


@cocotb.test()
async def test_extreme_scales(dut):
    """Largest and smallest (subnormal) fp16, both signs, d = 0, m = 0, the largest |sums|
    (x = -128 or 127, q = 15 or 0) at K = max_k; results near zero and cancelling terms."""
    tb = Q4TB(dut)
    await tb.reset()
    k = tb.max_k
    nb = -(-k // 32)
    full = lambda v: np.full((1, nb), v, dtype=np.uint16)
    q15 = np.full((1, nb, 32), 15, dtype=np.uint8)
    q0 = np.zeros((1, nb, 32), dtype=np.uint8)
    frames = []
    for xv in (-128, 127):
        x = np.full(k, xv, dtype=np.int8)
        for d, m in [(F16_MAX, F16_MAX), (F16_MAX | 0x8000, F16_MAX | 0x8000),
                     (F16_MAX, F16_MAX | 0x8000), (F16_MIN_SUB, F16_MIN_SUB),
                     (0x03FF, 0x8001), (0x0000, F16_MAX), (0x0000, 0x0000), (0x0400, 0x0000),
                     (0x3C00, 0xCB80)]:    # d = 1, m = -15: w = q - 15
            for q in (q15, q0):
                frames.append(tb.frame(k, 1, x=x, q=q, d=full(d), m=full(m), via_raw=False))
        if tb.vectors > 1:     # every vector against the same extremes, x = -128, 127, ...
            xs = np.stack([np.full(k, (-128, 127)[v % 2], np.int8) for v in range(tb.vectors)])
            for d, m in [(F16_MAX, F16_MAX | 0x8000), (F16_MIN_SUB, 0x8001)]:
                frames.append(tb.frame(k, 1, x=xs, q=q15, d=full(d), m=full(m), via_raw=False,
                                       b=tb.vectors))
    # one row, every block a different extreme, and x random
    ext = np.array([F16_MAX, F16_MAX | 0x8000, F16_MIN_SUB, 0x8001, 0, 0x8000, 0x0400, 0x3C00],
                   dtype=np.uint16)
    r = tb.np_rng
    for _ in range(6):
        d = r.choice(ext, size=(4, nb)).astype(np.uint16)
        m = r.choice(ext, size=(4, nb)).astype(np.uint16)
        frames.append(tb.frame(k, 4, d=d, m=m))
    # exact ties of float32 rounding: d*S = 2^(sh+10), m*X = 2^(sh-14) with S = X = 1, so the
    # row is 2^(sh+10) + 2^(sh-14) (a half unit below a 24-bit significand, even: stays)
    # and, with a second block adding 2^(sh-13), an odd significand plus a half (rounds up)
    x = np.zeros(k, dtype=np.int8)
    x[0] = 1
    q = np.zeros((1, nb, 32), dtype=np.uint8)
    q[0, 0, 0] = 1
    for sh in range(24, 30):
        for sign in (0, 0x8000):
            d = np.zeros((1, nb), np.uint16)
            m = np.zeros((1, nb), np.uint16)
            d[0, 0] = sign | (sh + 1) << 10
            m[0, 0] = sign | (sh - 24 + 1) << 10
            frames.append(tb.frame(k, 1, x=x, q=q, d=d, m=m, via_raw=False))
            if k > 32:
                x2, q2, d2 = x.copy(), q.copy(), d.copy()
                x2[32], q2[0, 1, 0] = 1, 1
                d2[0, 1] = sign | (sh - 24 + 2) << 10
                frames.append(tb.frame(k, 1, x=x2, q=q2, d=d2, m=m, via_raw=False))
    await tb.run_check(frames)


@cocotb.test()
async def test_tready_duty_and_latency(dut):
    """With a free output, s_axis_tready is high on every cycle of a frame (exact count) and
    the first result comes `latency` cycles after the last beat of its row."""
    tb = Q4TB(dut)
    await tb.reset()
    tb.set_pauses(0, 0)
    bs = [None] + ([tb.vectors] if tb.vectors > 1 else [])
    for (k, n), b in [(s, b) for s in [(tb.max_k, 4), (1, 3), (17, 40), (64, 5), (33, 2)]
                      for b in bs]:
        k = min(k, tb.max_k)
        nb = b or 1
        if q4_row_beats(k) < nb and n > 3:
            continue     # rows shorter than B beats: the output sets the rate
        tb.mon.clear()
        await tb.run_check([tb.frame(k, n, b=b)])
        beats = tb.frame_beats(k, n, b)
        hs = tb.mon.in_hs
        assert len(hs) == beats, f"{len(hs)} input handshakes, frame has {beats} beats"
        span = hs[-1] - hs[0] + 1
        assert span == beats, f"K={k} N={n}: {beats} beats took {span} cycles"
        assert not tb.mon.in_refused, f"tready low while tvalid high at {tb.mon.in_refused[:5]}"
        row0_last = hs[tb.frame_beats(k, 0, b) + q4_row_beats(k) - 1]
        out = tb.mon.out_hs
        assert out[0] - row0_last == tb.latency, (
            f"first result {out[0] - row0_last} cycles after its last beat, manifest latency "
            f"{tb.latency}")
        # the last row's B words, then the status word (or every word on consecutive cycles
        # from the first result on, when rows are shorter than B beats)
        assert out[-1] == max(hs[-1] + tb.latency + nb, out[0] + n * nb)
        dut._log.info("K=%d N=%d B=%s: %d beats in %d cycles (tready duty 100%%), latency %d",
                      k, n, b, beats, span, tb.latency)


def bad_frames(tb):
    k = min(tb.max_k, 45)
    n = 4
    nb = -(-k // 32)
    good = tb.frame(k, n)
    xlen = -(-k // 8) * 8
    row = q4_row_beats(k) * 8
    hdr = lambda kk, nn, fmt, tag, magic=0xB158: (
        magic | kk << 16 | nn << 32 | fmt << 48 | tag << 56).to_bytes(8, "little")
    d = tb.scales((n, nb), "typical")
    d_inf = d.copy(); d_inf[1, nb - 1] = F16_INF           # row 1's last block: bad
    m_nan = tb.scales((n, nb), "typical"); m_nan[2, 0] = F16_NAN
    # a NaN scale of a block wholly past K (d1 of a one-block group) is never read
    k1 = 20
    past = np.zeros((2, 1), dtype=np.uint16)
    rows_past = pack_q4_rows(np.zeros((2, 1, 32), np.uint8), past, past, k1)
    rows_past[:, 4:6] = np.frombuffer(np.uint16(F16_NAN).tobytes(), np.uint8)
    cases = {
        "BAD_MAGIC": hdr(k, n, 4, 0x11, magic=0x1234) + bytes(xlen),
        "BAD_SHAPE K=0": hdr(0, n, 4, 0x12) + bytes(xlen),
        "BAD_SHAPE K>max": hdr(min(tb.max_k + 1, 65535), n, 4, 0x13) + bytes(xlen),
        "BAD_SHAPE N=0": hdr(k, 0, 4, 0x14) + bytes(xlen),
        "BAD_FORMAT": hdr(k, n, [f for f in (8, 3, 5, 6) if f not in tb.accepted][0], 0x15)
                      + bytes(xlen),
        "BAD_FORMAT 0x00": hdr(k, n, 0, 0x16) + bytes(xlen),
        "SHORT in rows": good[:8 + xlen + 2 * row + 16],
        "SHORT in x": good[:16] if xlen > 8 else good[:8],
        "SHORT header only": good[:8],
        "LONG": good + bytes(24),
        "BAD_SCALE inf d": tb.frame(k, n, d=d_inf),
        "BAD_SCALE nan m": tb.frame(k, n, m=m_nan),
        "NaN past K (no flag)": build_q4_frame(np.ones(k1, np.int8), rows_past, k1, 0x17),
        "SHORT after a NaN": tb.frame(k, n, m=m_nan)[:8 + xlen + 3 * row - 8],
    }
    if tb.vectors == 1:     # an engine of one vector takes no frame with the flag
        cases["vectors flag on a one-vector engine"] = tb.frame(k, n, b=2)
    if tb.vectors > 1:
        V = tb.vectors
        gv = tb.frame(k, n, b=V)
        hv = lambda kk, bb, tag, res=0: (hdr(kk, n, 4 | 0x80, tag)
                                         + (bb | res << 8).to_bytes(8, "little"))
        cases.update({
            "vectors B=0": hv(k, 0, 0x21) + bytes(xlen),
            "vectors B>V": hv(k, V + 1, 0x22) + bytes((V + 1) * xlen),
            "vectors reserved": hv(k, V, 0x23, res=1 << 55) + bytes(V * xlen),
            "vectors bad K": hv(0, V, 0x24) + bytes(V * xlen),
            "vectors SHORT at word": gv[:8],
            "vectors SHORT in x": gv[:16 + xlen],
            "vectors SHORT in rows": gv[:16 + V * xlen + 2 * row + 16],
            "vectors LONG": gv + bytes(16),
            "vectors BAD_SCALE": tb.frame(k, n, d=d_inf, b=V),
            "vectors B=1": tb.frame(k, n, b=1),
        })
    return cases


@cocotb.test()
async def test_bad_frames(dut):
    """Every error class, each followed by a good frame (no reset between)."""
    tb = Q4TB(dut)
    await tb.reset()
    for pauses in ((0, 0), (0.3, 0.3)):
        tb.set_pauses(*pauses)
        for name, fr in bad_frames(tb).items():
            good = tb.frame(tb.rng.randint(1, tb.max_k), tb.rng.randint(1, 4))
            got = await tb.run_check([fr, good])
            status = [w for w, last in got if last][0]
            dut._log.info("%-22s -> status flags %s", name,
                          golden.flag_names(decode_status(status)[1]))


@cocotb.test()
async def test_output_stall(dut):
    """Hold m_axis_tready low until the result FIFO fills: s_axis_tready falls, nothing lost."""
    tb = Q4TB(dut)
    await tb.reset()
    tb.set_pauses(0, 0)
    tb.sink.pause = True
    fr = tb.frame(16, 300, b=tb.vectors if tb.vectors > 1 else None)
    beats = tb.beats_of([fr])
    expected = golden.q4_stream(beats, tb.max_k, tb.vectors)
    tb.mon.clear()
    sender = cocotb.start_soon(tb.send_frames([fr]))
    await ClockCycles(dut.aclk, 1000)
    assert tb.mon.tready_low > 0, "the FIFO never filled: the stall did not reach the input"
    assert len(tb.mon.in_hs) < len(beats), "the whole frame went in although the output was stalled"
    tb.sink.pause = False
    got = await with_timeout(tb.recv_words(1), 100_000, "us")
    await sender
    compare_words(got, expected, golden.flag_names)
    tb.assert_no_faults()
    tb.set_pauses(0.2, 0.6)
    await tb.run_check(random_frames(tb, 500))


@cocotb.test()
async def test_mixed_formats(dut):
    """Q4_1 frames interleaved with the engine's other formats (INT8, ternary), random
    shapes, with and without pauses: each frame's rows go to its own lane."""
    tb = Q4TB(dut)
    await tb.reset()
    others = [f for f in tb.accepted if f != golden.FMT_Q4]
    for pauses in ((0, 0), (0.3, 0.3)):
        tb.set_pauses(*pauses)
        frames = []
        for _ in range(16):
            k = tb.rng.randint(1, tb.max_k)
            n = tb.rng.randint(1, 6)
            fmt = tb.rng.choice(others + [golden.FMT_Q4] * max(1, len(others)))
            b = tb.pick_b()
            frames.append(tb.frame(k, n, b=b) if fmt == golden.FMT_Q4
                          else tb.other_frame(k, n, fmt, b))
        await tb.run_check(frames)


@cocotb.test()
async def test_reset_mid_frame(dut):
    """A reset in the middle of a row; the frames after it come out right."""
    tb = Q4TB(dut)
    await tb.reset()
    tb.set_pauses(0, 0)
    b = tb.vectors if tb.vectors > 1 else None
    big = tb.frame(tb.max_k, 6, b=b)
    await tb.reset_mid_frame([big], tb.frame_beats(tb.max_k, 6, b) // 2 + 3)
    await tb.run_check([tb.frame(tb.rng.randint(1, tb.max_k), 5), tb.frame(1, 1)])


@cocotb.test()
async def test_reset_mid_frame_and_stall(dut):
    """One-cycle resets (AXI4-Stream's shortest) inside a frame and under an output stall:
    m_axis_tvalid and s_axis_tready low in the cycle after aresetn is sampled low, no word out after the
    reset (nothing of the aborted frames, not the stalled word), the next frames answered
    right (docs/formal.md, "Reset")."""
    tb = Q4TB(dut)
    await tb.reset()
    b = tb.vectors if tb.vectors > 1 else None
    big = tb.frame(tb.max_k, 6, b=b)
    await tb.reset_mid_frame_checked([big], tb.frame_beats(tb.max_k, 6, b) // 2 + 1)
    await tb.run_check([tb.frame(tb.rng.randint(1, tb.max_k), 3), tb.frame(1, 1)])
    assert await tb.reset_mid_stall_checked([tb.frame(tb.max_k, 2, b=b),
                                             tb.frame(tb.max_k, 30, b=b)])
    await tb.run_check([tb.frame(tb.rng.randint(1, tb.max_k), 3, b=b), tb.frame(1, 1)])

@cocotb.test()
async def test_summary(dut):
    """The `make sim` / `make report` workload: random Q4_1 frames (and the engine's other
    formats, interleaved) with a free output or $TB_SUMMARY_STALL backpressure; counts rows
    checked and mismatches, measures the tready duty and the latency, writes $TB_RESULT."""
    tb = Q4TB(dut)
    await tb.reset()
    await tb.summary(lambda budget: random_frames(tb, budget),
                     tb.expected, lambda: tb.frame(tb.max_k, 1))


# ---------------------------------------------------------------- format 0x05 (Q8_1 x blocks)
def q81_ks(tb):
    """K of 0x05 frames: multiples of 32 up to max_k, a last group of one block (K = 32 mod
    64) among them, SmolLM2's 576 and 1536 where max_k allows."""
    ks = [k for k in (32, 64, 96, 128, 160, 288, 576, 1536, tb.max_k // 32 * 32)
          if 32 <= k <= tb.max_k]
    return sorted(set(ks))


def q81_random_frames(tb, budget, big=False):
    frames, used, edges = [], 0, q81_ks(tb)
    while used < budget and tb.max_k >= 32:
        k = edges.pop(0) if edges else 32 * tb.rng.randint(1, tb.max_k // 32)
        if not big and k > 320 and edges:
            continue
        n = tb.rng.randint(1, max(1, min(12, (budget - used) // q4_row_beats(k))))
        b = tb.pick_b()
        frames.append(tb.frame_q81(k, n, b=b))
        used += tb.frame_beats_q81(k, n, b)
    return frames


def need_q81(tb):
    assert tb.q81, "the engine's manifest lists no format 0x05 (block_formats)"


@cocotb.test()
async def test_q81_random_shapes(dut):
    """0x05 frames: K multiples of 32 (a last group of one block among them), random N,
    x quantised from float x with an outlier channel or random codes and wild fp16 d and s,
    rows of typical and wild scales; free output, then pauses; B-vector frames mixed in."""
    tb = Q4TB(dut)
    need_q81(tb)
    await tb.reset()
    await tb.run_check(q81_random_frames(tb, BEAT_BUDGET // 2))
    tb.set_pauses(idle=0.3, backpressure=0.3)
    await tb.run_check(q81_random_frames(tb, BEAT_BUDGET // 2))


@cocotb.test()
async def test_q81_smollm_shapes(dut):
    """SmolLM2-135M's K (576, 1536) where max_k allows, else the largest multiple of 32:
    quantised x with an outlier channel, typical Q4_1 scales, and one frame of B vectors."""
    tb = Q4TB(dut)
    need_q81(tb)
    await tb.reset()
    ks = [k for k in (576, 1536) if k <= tb.max_k] or [tb.max_k // 32 * 32]
    frames = []
    for k in ks:
        frames.append(tb.frame_q81(k, 3, kind="typical", xkind="quantised"))
        if tb.vectors > 1:
            frames.append(tb.frame_q81(k, 2, kind="typical", xkind="quantised", b=tb.vectors))
    await tb.run_check(frames)


@cocotb.test()
async def test_q81_extreme_scales(dut):
    """0x05 at K = the largest multiple of 32: the largest |S| (q = 15, x = -128 / 127) with
    the largest, subnormal and negative fp16 d and s of x and of the row, zero scales; every
    block a different extreme; a float32 rounding tie both ways."""
    tb = Q4TB(dut)
    need_q81(tb)
    await tb.reset()
    k = tb.max_k // 32 * 32
    nb = k // 32
    b = tb.vectors if tb.vectors > 1 else None
    full = lambda v, shape=(1, nb): np.full(shape, v, dtype=np.uint16)
    xshape = lambda v: (np.full(k if b is None else (b, k), v, np.int8))
    q15 = np.full((1, nb, 32), 15, dtype=np.uint8)
    frames = []
    for xv in (-128, 127):
        for dx, sx in [(F16_MAX, F16_MAX), (F16_MAX | 0x8000, F16_MAX), (F16_MIN_SUB, 0x8001),
                       (0x03FF, F16_MIN_SUB), (0, F16_MAX | 0x8000)]:
            for d, m in [(F16_MAX, F16_MAX), (F16_MAX | 0x8000, F16_MAX | 0x8000),
                         (F16_MIN_SUB, 0x8001), (0x3C00, 0xCB80)]:
                xs_shape = (nb,) if b is None else (b, nb)
                frames.append(tb.frame_q81(k, 1, x=(xshape(xv), full(dx, xs_shape),
                                                     full(sx, xs_shape)),
                                           q=q15, d=full(d), m=full(m)))
    for _ in range(6):
        frames.append(tb.frame_q81(k, 4, kind="wild", xkind="extreme", b=b))
    # a tie of float32 rounding at units of 2^-48: one block A = 2^24 (d_w = d_x = 2^12 / 2^12
    # ... as P*S*2^(sh-48) with S = 1) plus B = 2^0 (half an ulp of 2^24: stays, even), and
    # with a second block adding 2^1 (an odd significand plus half: rounds up)
    if nb >= 2:
        for sign in (0, 0x8000):
            xq = np.zeros(k, np.int8)
            xq[0] = 1
            q = np.zeros((1, nb, 32), np.uint8)
            q[0, 0, 0] = 1
            one = 0x3C00                                    # fp16 1.0
            d = np.zeros((1, nb), np.uint16)
            m = np.zeros((1, nb), np.uint16)
            xd = np.zeros(nb, np.uint16)
            xsv = np.zeros(nb, np.uint16)
            d[0, 0] = sign | (15 + 12) << 10                # 2^12
            xd[0] = (15 + 12) << 10                         # 2^12: A = +-2^24
            m[0, 0] = sign | one                            # B = +-1 (s_x = 1)
            xsv[0] = one
            frames.append(tb.frame_q81(k, 1, x=(xq, xd, xsv), q=q, d=d, m=m))
            m2, xs2 = m.copy(), xsv.copy()
            m2[0, 1] = sign | 0x4000                        # +-2 in block 1: 2^24 + 3
            xs2[1] = one
            frames.append(tb.frame_q81(k, 1, x=(xq, xd, xs2), q=q, d=d, m=m2))
    await tb.run_check(frames)


def q81_bad_frames(tb):
    k = 96 if tb.max_k >= 96 else 32
    n = 3
    nb = k // 32
    good = tb.frame_q81(k, n)
    hdr = lambda kk, nn, fmt, tag: (0xB158 | kk << 16 | nn << 32 | fmt << 48
                                    | tag << 56).to_bytes(8, "little")
    xq, xd, xs = tb.x_q81(k, None, "quantised")
    xd_inf = xd.copy(); xd_inf[nb - 1] = F16_INF
    xs_nan = xs.copy(); xs_nan[0] = F16_NAN
    codes_end = 8 + k
    cases = {
        "0x05 BAD_SHAPE K%32": hdr(45, n, 5, 0x31) + bytes(48),
        "0x05 BAD_SHAPE K=16": hdr(16, n, 5, 0x32) + bytes(24),
        "0x05 SHORT in codes": good[:8 + 8],
        "0x05 SHORT at the table": good[:codes_end],
        "0x05 SHORT in the table": good[:codes_end + 8] if k > 64 else good[:codes_end],
        "0x05 SHORT in rows": good[:codes_end + 8 * -(-k // 64) + 8 * q4_row_beats(k) + 16],
        "0x05 LONG": good + bytes(16),
        "0x05 BAD_SCALE inf d_x": tb.frame_q81(k, n, x=(xq, xd_inf, xs)),
        "0x05 BAD_SCALE nan s_x": tb.frame_q81(k, n, x=(xq, xd, xs_nan)),
    }
    if k % 64 == 32:     # the table's unused half of its last beat: never read, no flag
        fr = bytearray(tb.frame_q81(k, n, x=(xq, xd, xs)))
        last = 8 + k + 8 * (-(-k // 64) - 1)
        fr[last + 4:last + 8] = bytes.fromhex("007e007c")     # NaN d, Inf s past K
        cases["0x05 NaN past K (no flag)"] = bytes(fr)
    if tb.vectors > 1:
        V = tb.vectors
        bx = tb.x_q81(k, V, "quantised")
        bd = bx[1].copy(); bd[V - 1, 0] = F16_NAN
        gv = tb.frame_q81(k, n, b=V)
        slot = k + 8 * -(-k // 64)
        cases.update({
            "0x05 vectors BAD_SCALE (last vector's d_x)": tb.frame_q81(k, n, x=(bx[0], bd, bx[2]),
                                                                      b=V),
            # the last vector's store still holds that NaN: a frame of fewer vectors never reads it
            "0x05 vectors B=1 after": tb.frame_q81(k, n, b=1),
            "0x05 vectors SHORT in vector 2's table": gv[:16 + slot + k + (8 if k > 64 else 0)],
            "0x05 vectors bad K": (hdr(40, n, 5 | 0x80, 0x33) + (V).to_bytes(8, "little")
                                   + bytes(V * 48)),
        })
    return cases


@cocotb.test()
async def test_q81_bad_frames(dut):
    """0x05 error classes (K not a multiple of 32, short in the codes, at and in the scale
    table, in the rows, long, Inf d_x, NaN s_x, a NaN and an Inf past K that must not flag;
    B-vector frames: a NaN in the last vector's table, then a frame of fewer vectors), each
    followed by a good frame of either format, with and without pauses."""
    tb = Q4TB(dut)
    need_q81(tb)
    await tb.reset()
    for pauses in ((0, 0), (0.3, 0.3)):
        tb.set_pauses(*pauses)
        for name, fr in q81_bad_frames(tb).items():
            kk = 32 * tb.rng.randint(1, max(1, tb.max_k // 32))
            good = (tb.frame_q81(kk, tb.rng.randint(1, 4)) if tb.rng.random() < 0.5
                    else tb.frame(tb.rng.randint(1, tb.max_k), tb.rng.randint(1, 4)))
            got = await tb.run_check([fr, good])
            status = [w for w, last in got if last][0]
            dut._log.info("%-40s -> status flags %s", name,
                          golden.flag_names(decode_status(status)[1]))


@cocotb.test()
async def test_q81_mixed_with_0x04(dut):
    """0x04 and 0x05 frames back to back (and the engine's other formats), the same K and
    random ones, B-vector frames among them, with and without pauses."""
    tb = Q4TB(dut)
    need_q81(tb)
    await tb.reset()
    others = [f for f in tb.accepted if f not in (golden.FMT_Q4, golden.FMT_Q4_Q8_1)]
    for pauses in ((0, 0), (0.3, 0.3)):
        tb.set_pauses(*pauses)
        frames = []
        for _ in range(18):
            k = 32 * tb.rng.randint(1, max(1, tb.max_k // 32))
            n = tb.rng.randint(1, 5)
            b = tb.pick_b()
            pick = tb.rng.random()
            if pick < 0.4:
                frames.append(tb.frame_q81(k, n, b=b))
            elif pick < 0.8 or not others:
                frames.append(tb.frame(k if tb.rng.random() < 0.5 else tb.rng.randint(1, tb.max_k),
                                       n, b=b))
            else:
                frames.append(tb.other_frame(tb.rng.randint(1, tb.max_k), n,
                                             tb.rng.choice(others), b))
        await tb.run_check(frames)


@cocotb.test()
async def test_q81_tready_duty_and_latency(dut):
    """0x05 with a free output: s_axis_tready high on every cycle of a frame (the scale table
    beats too) and the first result `latency` cycles after the last beat of its row."""
    tb = Q4TB(dut)
    need_q81(tb)
    await tb.reset()
    tb.set_pauses(0, 0)
    bs = [None] + ([tb.vectors] if tb.vectors > 1 else [])
    kmax = tb.max_k // 32 * 32
    for (k, n), b in [(s, b) for s in [(kmax, 4), (32, 3), (96, 6), (64, 5)] for b in bs]:
        k = min(k, kmax)
        nb = b or 1
        if q4_row_beats(k) < nb and n > 3:
            continue
        tb.mon.clear()
        await tb.run_check([tb.frame_q81(k, n, b=b)])
        beats = tb.frame_beats_q81(k, n, b)
        hs = tb.mon.in_hs
        assert len(hs) == beats, f"{len(hs)} input handshakes, frame has {beats} beats"
        span = hs[-1] - hs[0] + 1
        assert span == beats, f"K={k} N={n}: {beats} beats took {span} cycles"
        assert not tb.mon.in_refused, f"tready low while tvalid high at {tb.mon.in_refused[:5]}"
        row0_last = hs[tb.frame_beats_q81(k, 0, b) + q4_row_beats(k) - 1]
        out = tb.mon.out_hs
        assert out[0] - row0_last == tb.latency, (
            f"first result {out[0] - row0_last} cycles after its last beat, manifest latency "
            f"{tb.latency}")
        assert out[-1] == max(hs[-1] + tb.latency + nb, out[0] + n * nb)
        dut._log.info("0x05 K=%d N=%d B=%s: %d beats in %d cycles, latency %d",
                      k, n, b, beats, span, tb.latency)
