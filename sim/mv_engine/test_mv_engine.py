"""cocotb tests of a generated matrix-vector engine (int8-engine, ternary-engine or the
two-format mv-engine, whose frames take either format at random, interleaved). An engine of
`vectors` V >= 2 gets frames of B = 1 .. V activation vectors (docs/vectors.md) mixed with
today's one-vector frames and the bad frames of the vectors word.

The design under test is described by the manifest in $TB_MANIFEST. Every output word is
compared with the numpy golden model in generators.golden.mv, which shares no code with the
templates.
"""
from __future__ import annotations

import os

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, with_timeout

from generators.golden import mv as golden
from generators.packing import build_frame, header_bytes
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
        # have a suite of their own, sim/q4_engine, which also mixes them with these)
        self.formats = [f for f in accepted if f not in (golden.FMT_Q4, golden.FMT_Q4_Q8_1)]
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
    other_fmt = [f for f in (0x03, 0x08, 0x04, 0x05, 0x06) if f not in tb.fmt][0]
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
