"""cocotb tests of a generated matrix-vector engine (int8-engine, ternary-engine or the
two-format mv-engine, whose frames take either format at random, interleaved). An engine of
`vectors` V >= 2 gets frames of B = 1 .. V activation vectors (docs/vectors.md) mixed with
today's one-vector frames and the bad frames of the vectors word.

The design under test is described by the manifest in $TB_MANIFEST. Every output word is
compared with the numpy golden model in generators.golden.mv, which shares no code with the
templates.

Format 0x09 (Q8_0 rows with Q8_0 x blocks on the INT8 lane, docs/activations.md; the manifest's
`block_formats`, mv-engine q4=true): the `test_q80_*` tests, frames from generators.q8 (x
quantised by ggml's reference quantiser or drawn codes and fp16 scales: sim/common/q80.py),
every word against generators.golden.mv (q8_0_frame: exact sums, one rounding to float32).
"""
from __future__ import annotations

import os

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, with_timeout

from generators.golden import mv as golden
from generators.packing import build_frame, header_bytes
from sim.common import q80
from sim.common.axis_tb import StreamTB, compare_words

BEAT_BUDGET = int(os.environ.get("TB_BEATS", "4000"))


class MVTB(StreamTB):
    def __init__(self, dut):
        super().__init__(dut)
        accepted = [int(f) for f in self.man.get("formats", [self.man.get("format")])]
        # and the per-block x formats of the Q4_1 lane (0x05, docs/activations.md)
        accepted += [int(f) for f in self.man.get("block_formats", [])]
        self.fmt = accepted              # what the golden model accepts
        # the frames this suite builds: INT8 and ternary rows (Q4_1 rows of mv-engine q4=true
        # have a suite of their own, sim/q4_engine, which also mixes them with these; Q8_0 rows,
        # format 0x09, the test_q80_* tests below)
        self.formats = [f for f in accepted
                        if f not in (golden.FMT_Q4, golden.FMT_Q4_Q8_1, golden.FMT_Q8_0)]
        self.q80 = golden.FMT_Q8_0 in accepted
        self.ternary = golden.FMT_TERNARY in self.formats   # some frames are ternary
        self.max_k = int(self.man["parameters"]["max_k"])
        self.latency = int(self.man["latency"])
        self.vectors = int(self.man.get("vectors", 1))
        self.np_rng = np.random.default_rng(self.rng.randrange(2**32))

    # ---------------------------------------------------------------- frames
    def pick(self, fmt=None):
        """The format of the next frame: the one given, or one of the engine's at random."""
        return self.rng.choice(self.formats) if fmt is None else fmt

    def weights(self, n, k, fmt):
        if fmt == golden.FMT_TERNARY:
            return self.np_rng.integers(-1, 2, size=(n, k), dtype=np.int8)
        return self.np_rng.integers(-128, 128, size=(n, k), dtype=np.int8)

    def pick_b(self):
        """B of the next frame: None (a frame without the flag) half of the time, else
        1 .. vectors (B = vectors most often)."""
        if self.vectors < 2 or self.rng.random() < 0.5:
            return None
        return self.vectors if self.rng.random() < 0.5 else self.rng.randint(1, self.vectors)

    def frame(self, k, n, tag=None, x=None, w=None, garbage=True, fmt=None, b=0):
        """A frame of K x N; `b`: None one vector without the flag, an int B vectors with it,
        0 (default) picked at random (pick_b)."""
        fmt = self.pick(fmt)
        b = self.pick_b() if b == 0 else b
        shape = k if b is None else (b, k)
        x = self.np_rng.integers(-128, 128, size=shape, dtype=np.int8) if x is None else x
        w = self.weights(n, k, fmt) if w is None else w
        tag = self.rng.randrange(256) if tag is None else tag
        name = "ternary" if fmt == golden.FMT_TERNARY else "int8"
        return build_frame(x, w, name, tag=tag, beat_bytes=self.bytes,
                           pad_fill=self.np_rng if garbage else None)

    def row_beats(self, k, fmt=None):
        fmt = self.formats[0] if fmt is None else fmt
        per_beat = self.bytes * (5 if fmt == golden.FMT_TERNARY else 1)
        return -(-k // per_beat)

    def frame_beats(self, k, n, fmt=None, b=None):
        """Beats of a frame; `b` None: no vectors flag (one vector)."""
        hdr = -(-8 // self.bytes) if b is None else -(-16 // self.bytes)
        return hdr + (b or 1) * -(-k // self.bytes) + n * self.row_beats(k, fmt)

    # ---------------------------------------------------------------- format 0x09
    def frame_q80(self, k, n, b=0, **kw):
        """A 0x09 frame (sim/common/q80.frame_q80); ``b`` as frame()'s."""
        b = self.pick_b() if b == 0 else b
        return q80.frame_q80(self.rng, self.np_rng, k, n, b=b, **kw)

    # ---------------------------------------------------------------- checking
    async def run_check(self, frames, timeout_us=200_000):
        return await super().run_check(
            frames, self.expected, golden.flag_names, timeout_us)

    def expected(self, beats):
        return golden.mv_stream(beats, self.bytes, self.fmt, self.max_k, self.vectors)


def compare(got, expected):
    compare_words(got, expected, golden.flag_names)


def edge_ks(tb):
    per = tb.bytes * (5 if tb.ternary else 1)
    ks = {1, 2, tb.bytes - 1, tb.bytes, tb.bytes + 1, per - 1, per, per + 1, tb.max_k - 1, tb.max_k}
    return sorted(k for k in ks if 1 <= k <= tb.max_k)


def random_frames(tb, budget):
    """Frames of random shape and format (edge K values first, in every format), about
    `budget` beats in all."""
    frames, used = [], 0
    edges = [(k, f) for k in edge_ks(tb) for f in tb.formats]
    while used < budget:
        k, fmt = edges.pop(0) if edges else (tb.rng.randint(1, tb.max_k), tb.pick())
        max_n = max(1, min(300, (budget - used) // max(1, tb.row_beats(k, fmt))))
        n = tb.rng.randint(1, max_n)
        b = tb.pick_b()
        frames.append(tb.frame(k, n, fmt=fmt, b=b))
        used += tb.frame_beats(k, n, fmt, b)
    return frames


@cocotb.test()
async def test_random_shapes(dut):
    """Random K (1..max_k, edge values first) and N, no pauses then idle and backpressure."""
    tb = MVTB(dut)
    await tb.reset()
    await tb.run_check(random_frames(tb, BEAT_BUDGET // 2))
    tb.set_pauses(idle=0.3, backpressure=0.3)
    await tb.run_check(random_frames(tb, BEAT_BUDGET // 2))


@cocotb.test()
async def test_tready_duty_and_latency(dut):
    """With a free output, s_axis_tready is high on every cycle of a frame (exact count) and
    the first result comes `latency` cycles after the last beat of its row."""
    tb = MVTB(dut)
    await tb.reset()
    tb.set_pauses(0, 0)
    shapes = [(tb.max_k, 4), (1, 3), (min(tb.max_k, 3 * tb.bytes + 1), 40)]
    bs = [None] + ([tb.vectors] if tb.vectors > 1 else [])
    for (k, n), fmt, b in [(s, f, b) for s in shapes for f in tb.formats for b in bs]:
        nb = b or 1
        if tb.row_beats(k, fmt) < nb and n > 3:
            continue     # rows shorter than B beats: the output sets the rate (test_output_bound)
        tb.mon.clear()
        fr = tb.frame(k, n, fmt=fmt, b=b)
        await tb.run_check([fr])
        beats = tb.frame_beats(k, n, fmt, b)
        hs = tb.mon.in_hs
        assert len(hs) == beats, f"{len(hs)} input handshakes, frame has {beats} beats"
        span = hs[-1] - hs[0] + 1
        assert span == beats, (f"K={k} N={n}: {beats} beats took {span} cycles; s_axis_tready "
                               f"fell during the frame")
        assert not tb.mon.in_refused, f"tready low while tvalid high at {tb.mon.in_refused[:5]}"
        row0_last = hs[tb.frame_beats(k, 0, fmt, b) + tb.row_beats(k, fmt) - 1]
        out = tb.mon.out_hs
        assert out[0] - row0_last == tb.latency, (
            f"first result {out[0] - row0_last} cycles after its last beat, manifest latency "
            f"{tb.latency}")
        # the last row's B words, then the status word; rows shorter than B beats: every word
        # from the first result on leaves on consecutive cycles
        want = max(hs[-1] + tb.latency + nb, out[0] + n * nb)
        assert out[-1] == want, (
            f"status {out[-1] - hs[-1]} cycles after the last beat, expected {want - hs[-1]}")
        dut._log.info("format %#04x K=%d N=%d B=%s: %d beats in %d cycles (tready duty 100%%), "
                      "latency %d", fmt, k, n, b, beats, span, tb.latency)


@cocotb.test()
async def test_output_bound(dut):
    """Rows shorter than B beats (K small, B = vectors): every row's B words leave one per
    clock, so the output sets the rate: from the first result to the status word the output
    hands a word over on every cycle (exact count), and the input waits on the FIFO's room."""
    tb = MVTB(dut)
    if tb.vectors < 2:
        return
    await tb.reset()
    tb.set_pauses(0, 0)
    for fmt in tb.formats:
        k, n, b = 1, 60, tb.vectors
        tb.mon.clear()
        await tb.run_check([tb.frame(k, n, fmt=fmt, b=b)])
        out = tb.mon.out_hs
        assert len(out) == n * b + 1
        # the FIFO keeps the output busy while room is low if the entries it holds when room
        # rises (depth - margin - 1, B words each) outlast the pipeline's refill (latency + 4)
        depth = int(tb.man["parameters"]["fifo_depth"])
        if (depth - (tb.latency + 5) - 1) * b < tb.latency + 4:
            dut._log.info("fifo_depth %d too shallow to keep the output busy at B=%d", depth, b)
            continue
        assert out[-1] - out[0] + 1 == len(out), (
            f"{len(out)} output words took {out[-1] - out[0] + 1} cycles: the output idled")
        dut._log.info("format %#04x K=%d N=%d B=%d: %d words on %d consecutive cycles, %d input "
                      "beats refused", fmt, k, n, b, len(out), len(out), len(tb.mon.in_refused))


def bad_frames(tb, fmt=None):
    """One frame of each error class (rows of format `fmt`, the engine's first by default);
    each is followed by a good frame."""
    fmt = tb.formats[0] if fmt is None else fmt
    k = min(tb.max_k, 2 * tb.bytes + 3)
    n = 5
    good = tb.frame(k, n, fmt=fmt, b=None)
    hb = -(-8 // tb.bytes) * tb.bytes
    row = tb.row_beats(k, fmt) * tb.bytes
    xlen = -(-k // tb.bytes) * tb.bytes
    pad = lambda b: bytes(b) + bytes((-len(b)) % tb.bytes)
    other_fmt = [f for f in (0x03, 0x08, 0x04, 0x05, 0x09, 0x06) if f not in tb.fmt][0]
    cases = {
        "BAD_MAGIC": pad(header_bytes(k, n, fmt, 0x11, magic=0x1234, beat_bytes=tb.bytes))
                     + bytes(xlen),
        "BAD_SHAPE K=0": header_bytes(0, n, fmt, 0x12, beat_bytes=tb.bytes) + bytes(xlen),
        "BAD_SHAPE K>max": header_bytes(min(tb.max_k + 1, 65535), n, fmt, 0x13,
                                        beat_bytes=tb.bytes) + bytes(xlen),
        "BAD_SHAPE N=0": header_bytes(k, 0, fmt, 0x14, beat_bytes=tb.bytes) + bytes(xlen),
        "BAD_FORMAT": header_bytes(k, n, other_fmt, 0x15, beat_bytes=tb.bytes) + bytes(xlen),
        "SHORT in rows": good[:hb + xlen + 2 * row + tb.bytes],
        "SHORT in x": good[:hb + tb.bytes] if xlen > tb.bytes else good[:hb],
        "SHORT header only": good[:hb],
        "LONG": good + bytes(3 * tb.bytes),
    }
    if tb.max_k == 65535:
        del cases["BAD_SHAPE K>max"]
    if not tb.q80 and tb.bytes == 8 and tb.max_k >= 32:
        # a well-formed 0x09 frame to an engine without the format: BAD_FORMAT alone
        cases["BAD_FORMAT 0x09"] = q80.frame_q80(tb.rng, tb.np_rng, 32, 2, tag=0x16)
    if fmt == golden.FMT_TERNARY:
        bad = bytearray(good)
        bad[hb + xlen + row + 1] = 250      # a bad byte in row 1, within K
        cases["BAD_TRIT"] = bytes(bad)
    if tb.bytes < 8:
        cases["SHORT half header"] = good[:tb.bytes]
    if tb.vectors == 1:     # an engine of one vector takes no frame with the flag
        cases["vectors flag on a one-vector engine"] = tb.frame(k, n, fmt=fmt, b=2)
    if tb.vectors > 1:
        V = tb.vectors
        gv = tb.frame(k, n, fmt=fmt, b=V)
        hv = 16
        xv = lambda b: bytes(b * xlen)
        name = "ternary" if fmt == golden.FMT_TERNARY else "int8"
        cases.update({
            "vectors B=0": header_bytes(k, n, name, 0x21, vectors=0) + xv(1),
            "vectors B>V": header_bytes(k, n, name, 0x22, vectors=V + 1) + xv(V + 1),
            "vectors B=255": header_bytes(k, n, name, 0x23, vectors=255) + xv(2),
            "vectors reserved": header_bytes(k, n, name, 0x24, vectors=V, reserved=1 << 40)
                                + xv(V),
            "vectors B>V reserved": header_bytes(k, n, name, 0x25, vectors=V + 1, reserved=3)
                                    + xv(1),
            "vectors bad K": header_bytes(0, n, name, 0x26, vectors=V) + xv(V),
            "vectors SHORT at word": gv[:8],
            "vectors SHORT at vectors word": gv[:hv],
            "vectors SHORT in vector 1": gv[:hv + xlen + tb.bytes] if xlen > tb.bytes
                                         else gv[:hv + xlen],
            "vectors SHORT last vector": gv[:hv + V * xlen - tb.bytes],
            "vectors SHORT in rows": gv[:hv + V * xlen + 2 * row + tb.bytes],
            "vectors LONG": gv + bytes(2 * tb.bytes),
            "vectors B=1": tb.frame(k, n, fmt=fmt, b=1),
        })
        if fmt == golden.FMT_TERNARY:
            bad = bytearray(gv)
            bad[hv + V * xlen + 2 * row + 1] = 247
            cases["vectors BAD_TRIT"] = bytes(bad)
    return cases


@cocotb.test()
async def test_bad_frames(dut):
    """Every error class of the contract, each followed by a good frame (no reset between)."""
    tb = MVTB(dut)
    await tb.reset()
    for pauses, fmt in zip(((0, 0), (0.3, 0.3)), tb.formats * 2):
        tb.set_pauses(*pauses)
        for name, fr in bad_frames(tb, fmt).items():
            good = tb.frame(tb.rng.randint(1, tb.max_k), tb.rng.randint(1, 6))
            got = await tb.run_check([fr, good])
            status = [w for w, last in got if last][0]
            dut._log.info("%-18s -> status flags %s", name,
                          golden.flag_names(golden.decode_status(status)[1]))


@cocotb.test()
async def test_output_stall(dut):
    """Hold m_axis_tready low until the result FIFO fills: s_axis_tready falls, nothing is lost."""
    tb = MVTB(dut)
    await tb.reset()
    tb.set_pauses(0, 0)
    tb.sink.pause = True
    k = min(tb.max_k, tb.bytes)
    fr = tb.frame(k, 300, fmt=tb.formats[-1], b=tb.vectors if tb.vectors > 1 else None)
    beats = tb.beats_of([fr])
    expected = tb.expected(beats)
    tb.mon.clear()
    sender = cocotb.start_soon(tb.send_frames([fr]))
    await ClockCycles(dut.aclk, 2000)
    assert tb.mon.tready_low > 0, "the FIFO never filled: the stall did not reach the input"
    assert len(tb.mon.in_hs) < len(beats), "the whole frame went in although the output was stalled"
    tb.sink.pause = False
    got = await with_timeout(tb.recv_words(1), 100_000, "us")
    await sender
    compare(got, expected)
    tb.assert_no_faults()
    # and the engine is still right afterwards, under random stalls
    tb.set_pauses(0.2, 0.6)
    await tb.run_check(random_frames(tb, 600))


@cocotb.test()
async def test_reset_mid_frame(dut):
    """A reset in the middle of a frame; the next frame after it comes out right."""
    tb = MVTB(dut)
    await tb.reset()
    tb.set_pauses(0, 0)
    b = tb.vectors if tb.vectors > 1 else None
    big = tb.frame(tb.max_k, 8, fmt=tb.formats[0], b=b)
    await tb.reset_mid_frame([big], tb.frame_beats(tb.max_k, 8, b=b) // 2 + 3)
    await tb.run_check([tb.frame(tb.rng.randint(1, tb.max_k), 7), tb.frame(1, 1)])


@cocotb.test()
async def test_reset_mid_frame_and_stall(dut):
    """One-cycle resets (AXI4-Stream's shortest) inside a frame and under an output stall:
    m_axis_tvalid and s_axis_tready low in the cycle after aresetn is sampled low, no word out after the
    reset (nothing of the aborted frames, not the stalled word), the next frames answered
    right (docs/formal.md, "Reset")."""
    tb = MVTB(dut)
    await tb.reset()
    b = tb.vectors if tb.vectors > 1 else None
    big = tb.frame(tb.max_k, 8, fmt=tb.formats[0], b=b)
    await tb.reset_mid_frame_checked([big], tb.frame_beats(tb.max_k, 8, b=b) // 2 + 1)
    await tb.run_check([tb.frame(tb.rng.randint(1, tb.max_k), 3), tb.frame(1, 1)])
    assert await tb.reset_mid_stall_checked([tb.frame(tb.max_k, 2, b=b),
                                             tb.frame(tb.max_k, 40, b=b)])
    await tb.run_check([tb.frame(tb.rng.randint(1, tb.max_k), 3, b=b), tb.frame(1, 1)])

@cocotb.test()
async def test_worst_case_sums(dut):
    """Largest magnitudes at K = max_k: x = -128 with the most negative and positive weights."""
    tb = MVTB(dut)
    await tb.reset()
    k = tb.max_k
    x = np.full(k, -128, dtype=np.int8)
    x2 = np.full(k, 127, dtype=np.int8)
    frames = []
    for fmt in tb.formats:
        if fmt == golden.FMT_TERNARY:
            w = np.stack([np.full(k, -1), np.full(k, 1), np.zeros(k)]).astype(np.int8)
        else:
            w = np.stack([np.full(k, -128), np.full(k, 127), np.zeros(k)]).astype(np.int8)
        frames += [tb.frame(k, 3, x=x, w=w, fmt=fmt, b=None),
                   tb.frame(k, 3, x=x2, w=w, fmt=fmt, b=None)]
        if tb.vectors > 1:
            xs = np.stack([x, x2] * tb.vectors)[:tb.vectors]
            frames.append(tb.frame(k, 3, x=xs, w=w, fmt=fmt, b=tb.vectors))
    await tb.run_check(frames)


@cocotb.test()
async def test_summary(dut):
    """The `make sim` workload: random frames with a free output, then under stalls; counts
    rows checked and mismatches, measures the tready duty and the latency, writes $TB_RESULT."""
    tb = MVTB(dut)
    await tb.reset()
    await tb.summary(lambda budget: random_frames(tb, budget),
                     tb.expected, lambda: tb.frame(tb.max_k, 1, b=None))


# ---------------------------------------------------------------- format 0x09 (Q8_0 x blocks)
def need_q80(tb):
    assert tb.q80, "the engine's manifest lists no format 0x09 (block_formats)"


def q80_random_frames(tb, budget, big=False):
    frames, used, edges = [], 0, q80.q80_ks(tb.max_k)
    while used < budget and tb.max_k >= 32:
        k = edges.pop(0) if edges else 32 * tb.rng.randint(1, tb.max_k // 32)
        if not big and k > 320 and edges:
            continue
        n = tb.rng.randint(1, max(1, min(12, (budget - used) // q80.q8_row_beats(k))))
        b = tb.pick_b()
        frames.append(tb.frame_q80(k, n, b=b))
        used += q80.frame_beats_q80(k, n, b)
    return frames


@cocotb.test()
async def test_q80_random_shapes(dut):
    """0x09 frames: K multiples of 32 (last groups of one to four blocks), random N, x
    quantised from float x with an outlier channel or random codes with wild fp16 d, rows of
    typical and wild d, straight and through llama.cpp's block_q8_0 bytes; free output, then
    pauses; B-vector frames mixed in."""
    tb = MVTB(dut)
    need_q80(tb)
    await tb.reset()
    await tb.run_check(q80_random_frames(tb, BEAT_BUDGET // 2))
    tb.set_pauses(idle=0.3, backpressure=0.3)
    await tb.run_check(q80_random_frames(tb, BEAT_BUDGET // 2))


@cocotb.test()
async def test_q80_smollm_shapes(dut):
    """SmolLM2-135M's K (576, 1536) where max_k allows, else the largest multiple of 32:
    quantised x with an outlier channel, typical Q8_0 rows, and a frame of B vectors."""
    tb = MVTB(dut)
    need_q80(tb)
    await tb.reset()
    ks = [k for k in (576, 1536) if k <= tb.max_k] or [tb.max_k // 32 * 32]
    frames = []
    for k in ks:
        frames.append(tb.frame_q80(k, 3, kind="typical", xkind="quantised", b=None))
        if tb.vectors > 1:
            frames.append(tb.frame_q80(k, 2, kind="typical", xkind="quantised", b=tb.vectors))
    await tb.run_check(frames)


@cocotb.test()
async def test_q80_extreme_scales(dut):
    """0x09 at K = the largest multiple of 32: the largest |S_b| (codes -128 and 127 in rows and
    x) with the largest, subnormal, zero and negative fp16 d of x and of the row; every block a
    different extreme; float32 rounding ties both ways and both signs (normal and subnormal
    scales); rows whose blocks cancel to zero."""
    tb = MVTB(dut)
    need_q80(tb)
    await tb.reset()
    k = tb.max_k // 32 * 32
    nb = k // 32
    b = tb.vectors if tb.vectors > 1 else None
    xs_shape = (nb,) if b is None else (b, nb)
    full = lambda v, shape=(1, nb): np.full(shape, v, dtype=np.uint16)
    frames = []
    for xv in (-128, 127):
        xq = np.full(k if b is None else (b, k), xv, np.int8)
        for wv in (-128, 127):
            q = np.full((1, nb, 32), wv, np.int8)
            for dx, d in [(q80.F16_MAX, q80.F16_MAX), (q80.F16_MAX | 0x8000, q80.F16_MAX),
                          (q80.F16_MAX, q80.F16_MAX | 0x8000), (q80.F16_MIN_SUB, 0x8001),
                          (0x03FF, 0x3C00), (0x8000, q80.F16_MAX)]:
                frames.append(tb.frame_q80(k, 1, x=(xq, full(dx, xs_shape)), q=q, d=full(d),
                                           b=b))
    for _ in range(6):
        frames.append(tb.frame_q80(k, 4, kind="extreme", xkind="extreme", b=b))
    # float32 ties: block 0 gives +-2^24 u, block 1 adds +-1 u (half an ulp of 2^24: stays, even)
    # or +-3 u (2^24 + 3 is half way between 2^24 + 2, odd, and 2^24 + 4: rounds up); u = 1 with
    # normal scales (d_w = d_x = 2^12, then 1.0), u = 2^-48 with subnormal ones (2^-12, then the
    # smallest subnormal 2^-24)
    if nb >= 2:
        for big, small in ((27 << 10, 0x3C00), (3 << 10, 0x0001)):
            for sign in (1, -1):
                for add in (1, 3):
                    xq = np.zeros(k, np.int8)
                    xq[0] = 1
                    xq[32] = 1
                    q = np.zeros((1, nb, 32), np.int8)
                    q[0, 0, 0] = sign
                    q[0, 1, 0] = sign * add
                    d = np.zeros((1, nb), np.uint16)
                    xd = np.zeros(nb, np.uint16)
                    d[0, 0], xd[0] = big, big
                    d[0, 1], xd[1] = small, small
                    frames.append(tb.frame_q80(k, 1, x=(xq, xd), q=q, d=d, b=None))
        # exact cancellation: block 0 = -block 1 (the word is +0)
        xq = np.ones(k, np.int8)
        q = np.zeros((1, nb, 32), np.int8)
        q[0, 0, :] = 5
        q[0, 1, :] = -5
        frames.append(tb.frame_q80(k, 1, x=(xq, full(0x4400, (nb,))), q=q, d=full(0x3800), b=None))
    await tb.run_check(frames)


def q80_bad_frames(tb):
    k = 160 if tb.max_k >= 160 else (96 if tb.max_k >= 96 else 32)
    n = 3
    nb = k // 32
    tbl = -(-k // 128)
    row = 8 * q80.q8_row_beats(k)
    xq, xd = q80.x_q80(tb.np_rng, k, None, "quantised")
    q = tb.np_rng.integers(-128, 128, size=(n, nb, 32), dtype=np.int8)
    d = q80.f16_scales(tb.np_rng, (n, nb), "typical")
    good = tb.frame_q80(k, n, x=(xq, xd), q=q, d=d, b=None)
    hdr = lambda kk, nn, fmt, tag: (0xB158 | kk << 16 | nn << 32 | fmt << 48
                                    | tag << 56).to_bytes(8, "little")
    codes_end = 8 + k
    rows_at = codes_end + 8 * tbl
    xd_inf = xd.copy(); xd_inf[nb - 1] = q80.F16_INF
    xd_nan = xd.copy(); xd_nan[0] = q80.F16_NAN | 0x8000          # a negative NaN
    d_inf = d.copy(); d_inf[1, nb - 1] = q80.F16_INF               # row 1's last block
    d_nan = d.copy(); d_nan[2, 0] = q80.F16_NAN                    # row 2's first block
    bad_row1 = tb.frame_q80(k, n, x=(xq, xd), q=q, d=d_inf, b=None)
    cases = {
        "0x09 BAD_SHAPE K%32": hdr(45, n, 9, 0x41) + bytes(48),
        "0x09 BAD_SHAPE K=16": hdr(16, n, 9, 0x42) + bytes(24),
        "0x09 SHORT in codes": good[:8 + 8],
        "0x09 SHORT at the table": good[:codes_end],
        "0x09 SHORT in the table": good[:codes_end + 8] if tbl > 1 else good[:codes_end],
        "0x09 SHORT in rows": good[:rows_at + row + 8 * 7],
        "0x09 SHORT after a block": good[:rows_at + row + 8 * 5],
        "0x09 LONG": good + bytes(16),
        "0x09 BAD_SCALE inf d_x": tb.frame_q80(k, n, x=(xq, xd_inf), q=q, d=d, b=None),
        "0x09 BAD_SCALE nan d_x": tb.frame_q80(k, n, x=(xq, xd_nan), q=q, d=d, b=None),
        "0x09 BAD_SCALE inf row d": bad_row1,
        "0x09 BAD_SCALE nan row d": tb.frame_q80(k, n, x=(xq, xd), q=q, d=d_nan, b=None),
        # row 1's last block (Inf d) cut before its last code beat: no flag
        "0x09 SHORT before a bad block ends": bad_row1[:rows_at + 2 * row - 8],
    }
    if nb % 4:      # the fields past K of the table's and a row's last scale beat: never read
        fr = bytearray(good)
        last_t = codes_end + 8 * (tbl - 1)
        last_s = rows_at + row - 8 * (1 + 4 * (nb % 4))
        for j in range(nb % 4, 4):
            fr[last_t + 2 * j:last_t + 2 * j + 2] = (0x7E00 | 0x8000 * (j % 2)).to_bytes(2, "little")
            fr[last_s + 2 * j:last_s + 2 * j + 2] = (0x7C00).to_bytes(2, "little")
        cases["0x09 NaN past K (no flag)"] = bytes(fr)
    if tb.vectors > 1:
        V = tb.vectors
        bq, bd = q80.x_q80(tb.np_rng, k, V, "quantised")
        bd = bd.copy(); bd[V - 1, nb - 1] = q80.F16_NAN
        gv = tb.frame_q80(k, n, b=V)
        slot = k + 8 * tbl
        cases.update({
            "0x09 vectors BAD_SCALE (last vector's d_x)": tb.frame_q80(k, n, x=(bq, bd), q=q, d=d,
                                                                      b=V),
            # the last vector's store still holds that NaN: a frame of fewer vectors never reads it
            "0x09 vectors B=1 after": tb.frame_q80(k, n, b=1),
            "0x09 vectors SHORT in vector 2's table": gv[:16 + slot + k + (8 if tbl > 1 else 0)],
            "0x09 vectors bad K": (hdr(40, n, 9 | 0x80, 0x43) + (V).to_bytes(8, "little")
                                   + bytes(V * 48)),
        })
    return cases


@cocotb.test()
async def test_q80_bad_frames(dut):
    """0x09 error classes (K not a multiple of 32, short in the codes, at and in the scale table,
    in the rows, long, Inf / NaN d of x and of a row, a bad block cut short, NaN and Inf past K
    that must not flag; B-vector frames: a NaN in the last vector's table, then a frame of fewer
    vectors), each followed by a good frame of 0x09 or 0x08, with and without pauses."""
    tb = MVTB(dut)
    need_q80(tb)
    await tb.reset()
    for pauses in ((0, 0), (0.3, 0.3)):
        tb.set_pauses(*pauses)
        for name, fr in q80_bad_frames(tb).items():
            kk = 32 * tb.rng.randint(1, max(1, tb.max_k // 32))
            good = (tb.frame_q80(kk, tb.rng.randint(1, 4)) if tb.rng.random() < 0.5
                    else tb.frame(tb.rng.randint(1, tb.max_k), tb.rng.randint(1, 4)))
            got = await tb.run_check([fr, good])
            status = [w for w, last in got if last][0]
            dut._log.info("%-44s -> status flags %s", name,
                          golden.flag_names(golden.decode_status(status)[1]))


@cocotb.test()
async def test_q80_mixed_with_0x08(dut):
    """0x09 and 0x08 frames back to back (the same K and random ones; ternary frames too), B-vector
    frames among them, with and without pauses."""
    tb = MVTB(dut)
    need_q80(tb)
    await tb.reset()
    for pauses in ((0, 0), (0.3, 0.3)):
        tb.set_pauses(*pauses)
        frames = []
        for _ in range(24):
            k = 32 * tb.rng.randint(1, max(1, tb.max_k // 32))
            n = tb.rng.randint(1, 5)
            b = tb.pick_b()
            pick = tb.rng.random()
            if pick < 0.45:
                frames.append(tb.frame_q80(k, n, b=b))
            elif pick < 0.85:
                frames.append(tb.frame(k if tb.rng.random() < 0.5 else tb.rng.randint(1, tb.max_k),
                                       n, fmt=golden.FMT_INT8, b=b))
            else:
                frames.append(tb.frame(tb.rng.randint(1, tb.max_k), n, b=b))
        await tb.run_check(frames)


@cocotb.test()
async def test_q80_tready_duty_and_latency(dut):
    """0x09 with a free output: s_axis_tready high on every cycle of a frame (the scale table
    beats too) and the first result `latency` cycles after the last beat of its row."""
    tb = MVTB(dut)
    need_q80(tb)
    await tb.reset()
    tb.set_pauses(0, 0)
    bs = [None] + ([tb.vectors] if tb.vectors > 1 else [])
    kmax = tb.max_k // 32 * 32
    for (k, n), b in [(s, b) for s in [(kmax, 4), (32, 3), (96, 6), (160, 5)] for b in bs]:
        k = min(k, kmax)
        nb = b or 1
        tb.mon.clear()
        await tb.run_check([tb.frame_q80(k, n, b=b)])
        beats = q80.frame_beats_q80(k, n, b)
        hs = tb.mon.in_hs
        assert len(hs) == beats, f"{len(hs)} input handshakes, frame has {beats} beats"
        span = hs[-1] - hs[0] + 1
        assert span == beats, f"K={k} N={n}: {beats} beats took {span} cycles"
        assert not tb.mon.in_refused, f"tready low while tvalid high at {tb.mon.in_refused[:5]}"
        row0_last = hs[q80.frame_beats_q80(k, 0, b) + q80.q8_row_beats(k) - 1]
        out = tb.mon.out_hs
        assert out[0] - row0_last == tb.latency, (
            f"first result {out[0] - row0_last} cycles after its last beat, manifest latency "
            f"{tb.latency}")
        assert out[-1] == max(hs[-1] + tb.latency + nb, out[0] + n * nb)
        dut._log.info("0x09 K=%d N=%d B=%s: %d beats in %d cycles, latency %d",
                      k, n, b, beats, span, tb.latency)
