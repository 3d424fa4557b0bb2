"""cocotb tests of a generated attention engine (attention-engine).

The design under test is described by the manifest in $TB_MANIFEST. Every output word is
compared with the numpy golden model generators.golden.attention (raw-stream model
`attention_stream`), which shares no code with the template except the exp table function.

Environment: TB_SEED; TB_FULL=1 runs the max_context frame on any simulator (it always runs on
Verilator); TB_CYCLES=<file> makes test_cycles write its table as JSON; TB_RESULT for
test_summary (`make sim`).
"""
from __future__ import annotations

import json
import os

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, with_timeout

import generators
from generators.golden import attention as golden
from sim.common.axis_tb import StreamTB, compare_words

FLAG_NAMES = {golden.FLAG_BAD_MAGIC: "BAD_MAGIC", golden.FLAG_BAD_SHAPE: "BAD_SHAPE",
              golden.FLAG_BAD_FORMAT: "BAD_FORMAT", golden.FLAG_SHORT_FRAME: "SHORT_FRAME",
              golden.FLAG_LONG_FRAME: "LONG_FRAME"}


def flag_names(flags):
    return "|".join(n for b, n in FLAG_NAMES.items() if flags & b) or "OK"


def simulator() -> str:
    name = os.environ.get("SIM") or getattr(cocotb, "SIM_NAME", "") or ""
    return name.lower()


def full_enabled() -> bool:
    return os.environ.get("TB_FULL", "0") not in ("", "0") or "verilator" in simulator()


class AttTB(StreamTB):
    def __init__(self, dut):
        super().__init__(dut)
        p = self.man["parameters"]
        self.cfg = golden.AttentionConfig(
            heads_per_group=p["heads_per_group"], head_dim=p["head_dim"],
            max_context=p["max_context"], beat_bytes=self.bytes, exp_depth=p["exp_depth"],
            exp_width=p["exp_width"], exp_steps_per_octave=p["exp_steps_per_octave"],
            scale_frac_bits=p["scale_frac_bits"], kv_bits=p.get("kv_bits", 8))
        self.kv_lo = -(1 << (self.cfg.kv_bits - 1))     # the K and V code range
        self.kv_hi = (1 << (self.cfg.kv_bits - 1)) - 1
        self.G, self.d, self.max_l = self.cfg.heads_per_group, self.cfg.head_dim, p["max_context"]
        self.latency = int(self.man["latency"])
        # the latency model of the design (generators/designs/attention.py: AttentionTiming)
        self.timing = generators.build("attention-engine", p).timing()
        assert self.timing.latency == self.latency
        self.np_rng = np.random.default_rng(self.rng.randrange(2**32))

    # ---------------------------------------------------------------- frames
    def tensors(self, L):
        r = self.np_rng
        q = r.integers(-128, 128, size=(self.G, self.d))
        K = r.integers(self.kv_lo, self.kv_hi + 1, size=(L, self.d))
        V = r.integers(self.kv_lo, self.kv_hi + 1, size=(L, self.d))
        return q, K, V

    def scales(self):
        """Per-head (MULT, SHIFT) that spread random scores over a useful part of the table,
        now and then 0 (all weights equal) or a steep scale (one dominant row). INT16 K makes
        the scores 2^8 times larger: SHIFT 8 more."""
        mult, shift = [], []
        ks = self.cfg.kv_bits - 8
        for _ in range(self.G):
            u = self.rng.random()
            if u < 0.08:
                mult.append(0); shift.append(self.rng.randint(0, 47))
            elif u < 0.16:
                mult.append(self.rng.randrange(1 << 16)); shift.append(self.rng.randint(0, 8))
            else:
                mult.append(self.rng.randrange(1 << 16))
                shift.append(self.rng.randint(16 + ks, 30 + ks))
        return mult, shift

    def frame(self, L, tag=None, **over):
        q, K, V = self.tensors(L)
        mult, shift = self.scales()
        tag = self.rng.randrange(256) if tag is None else tag
        return golden.build_attention_frame(q, K, V, mult, shift, tag, self.cfg,
                                            pad_byte=self.rng.randrange(256), **over)

    def frame_beats(self, L):
        return golden.frame_beat_count(L, self.cfg)

    # ---------------------------------------------------------------- checking
    async def run_check(self, frames, timeout_us=2_000_000):
        return await super().run_check(
            frames, lambda beats: golden.attention_stream(beats, self.cfg), flag_names,
            timeout_us)


def compare(got, expected):
    compare_words(got, expected, flag_names)


def contexts(tb, with_max=True):
    ls = [1, 2, 63, 64, 65, 512]
    ls = [L for L in ls if L <= tb.max_l]
    if with_max and tb.max_l not in ls and (tb.max_l <= 512 or full_enabled()):
        ls.append(tb.max_l)
    return ls


@cocotb.test()
async def test_contexts(dut):
    """Contexts 1, 2, 63, 64, 65, 512 and max_context (max only on Verilator or TB_FULL=1),
    free output, then idle and backpressure."""
    tb = AttTB(dut)
    await tb.reset()
    for L in contexts(tb):
        await tb.run_check([tb.frame(L)])
        dut._log.info("L=%d: %d output words match", L, golden.output_word_count(tb.cfg) + 1)
    tb.set_pauses(idle=0.3, backpressure=0.3)
    await tb.run_check([tb.frame(L) for L in contexts(tb, with_max=False)[:5]])
    tb.set_pauses(idle=0.1, backpressure=0.7)
    await tb.run_check([tb.frame(tb.rng.randint(1, min(tb.max_l, 100))) for _ in range(3)])


@cocotb.test()
async def test_special_values(dut):
    """Extremes: every score equal, one dominant row, V at the code range's ends (-128/+127 or
    -32768/+32767), q = -128 and K at its most negative code."""
    tb = AttTB(dut)
    await tb.reset()
    G, d = tb.G, tb.d
    L = min(tb.max_l, 65)
    frames = []
    q = np.full((G, d), -128); K = np.full((L, d), tb.kv_lo)
    V = np.where(np.arange(L * d).reshape(L, d) % 2, tb.kv_hi, tb.kv_lo)
    frames.append(golden.build_attention_frame(q, K, V, 65535, 0, 1, tb.cfg))
    frames.append(golden.build_attention_frame(q, K, V, 0, 0, 2, tb.cfg))
    qq, KK, VV = tb.tensors(L)
    frames.append(golden.build_attention_frame(qq, KK, VV, 65535, 0, 3, tb.cfg))  # dominant
    frames.append(golden.build_attention_frame(qq, KK, np.zeros_like(VV), 1000, 20, 4, tb.cfg))
    # per-head scales: the steepest, SHIFT = 47 (every index rounds to 0), MULT = 0, ...
    mults = [[65535, 1, 0][g % 3] for g in range(G)]
    shifts = [[0, 47, 5][g % 3] for g in range(G)]
    frames.append(golden.build_attention_frame(qq, KK, VV, mults, shifts, 5, tb.cfg))
    # the widest distance below the maximum: K rows at the two ends of the code range, so
    # e = m - s reaches 2 * 128 * d * 2^(kv_bits - 1) (e * MULT near 2^(SB + 15)), the index
    # around the table's end
    KE = np.where((np.arange(L) % 2)[:, None] == 1, tb.kv_hi, tb.kv_lo) * np.ones((1, d), int)
    ks = tb.cfg.kv_bits - 8
    frames.append(golden.build_attention_frame(q, KE, VV, 65535, 25 + ks, 6, tb.cfg))
    frames.append(golden.build_attention_frame(q, KE, VV, [65535, 40000, 1][:G] + [7] * (G - 3),
                                               [24 + ks, 25 + ks, 0][:G] + [9] * (G - 3), 7,
                                               tb.cfg))
    await tb.run_check(frames)


def bad_frames(tb):
    """One frame of each error class of the contract; each is followed by a good frame."""
    L = min(tb.max_l, 3)
    good = tb.frame(L)
    q, K, V = tb.tensors(L)
    bb = tb.bytes
    hb = tb.cfg.header_beats * bb
    qb = tb.cfg.q_beats * bb
    rb = tb.cfg.row_beats * bb
    mk = lambda **o: golden.build_attention_frame(q, K, V, 1000, 20, tb.rng.randrange(256),
                                                  tb.cfg, **o)
    cases = {
        "BAD_MAGIC": mk(magic=0x1234),
        "BAD_MAGIC one beat": mk(magic=0xA77F)[:bb],
        "BAD_SHAPE L=0": mk(context=0),
        "BAD_SHAPE G": mk(heads=tb.G + 1),
        "BAD_SHAPE d": mk(head_dim=tb.d + 8),
        "BAD_FORMAT shift": golden.build_attention_frame(q, K, V, 5, 48, 7, tb.cfg),
        "BAD_FORMAT byte 3 = 2": mk(reserved=2),
        # the KV format code of the other width (0 INT8, 1 INT16): every head, then one head
        "BAD_FORMAT KV code": mk(reserved=1 - tb.cfg.kv_code),
        "BAD_FORMAT KV code, last head": mk(reserved=[tb.cfg.kv_code] * (tb.G - 1)
                                            + [1 - tb.cfg.kv_code]),
        "SHORT in header": good[:bb],
        "SHORT header only": good[:hb],
        "SHORT in q": good[:hb + bb],
        "SHORT q only": good[:hb + qb],
        "SHORT in K": good[:hb + qb + rb + bb],
        "SHORT K only": good[:hb + qb + L * rb],
        "SHORT last V beat missing": good[:-bb],
        "LONG": good + bytes(3 * bb),
        "LONG by one": tb.frame(L) + bytes(range(bb)),
    }
    if tb.max_l < 65535:
        cases["BAD_SHAPE L>max"] = mk(context=tb.max_l + 1)
    return cases


@cocotb.test()
async def test_bad_frames(dut):
    """Every error class, each followed by a good frame, no reset in between."""
    tb = AttTB(dut)
    await tb.reset()
    # Icarus is slow: one pass with pauses and short good frames there (Verilator does both)
    fast = "verilator" in simulator() or full_enabled()
    for pauses in ((0, 0), (0.3, 0.3)) if fast else ((0.3, 0.3),):
        tb.set_pauses(*pauses)
        for name, fr in bad_frames(tb).items():
            good = tb.frame(tb.rng.randint(1, min(tb.max_l, 70 if fast else 8)))
            got = await tb.run_check([fr, good])
            status = [w for w, last in got if last][0]
            dut._log.info("%-26s -> status flags %s", name, flag_names((status >> 8) & 0xFF))


@cocotb.test()
async def test_reset_mid_frame(dut):
    """A reset in the middle of a frame (K pass, then V pass); the next frames come out right."""
    tb = AttTB(dut)
    await tb.reset()
    tb.set_pauses(0, 0)
    L = min(tb.max_l, 64)
    for frac in (0.4, 0.8):
        big = tb.frame(L)
        await tb.reset_mid_frame([big], int(tb.frame_beats(L) * frac))
        await tb.run_check([tb.frame(tb.rng.randint(1, L)), tb.frame(1)])


@cocotb.test()
async def test_reset_mid_frame_and_stall(dut):
    """One-cycle resets (AXI4-Stream's shortest) inside a frame and under an output stall:
    m_axis_tvalid and s_axis_tready low in the cycle after aresetn is sampled low, no word out after the
    reset (nothing of the aborted frames, not the stalled word), the next frames answered
    right (docs/formal.md, "Reset")."""
    tb = AttTB(dut)
    await tb.reset()
    L = min(tb.max_l, 64)
    await tb.reset_mid_frame_checked([tb.frame(L)], int(tb.frame_beats(L) * 0.6))
    await tb.run_check([tb.frame(tb.rng.randint(1, L)), tb.frame(1)])
    await tb.reset_mid_stall_checked([tb.frame(2), tb.frame(L)])
    await tb.run_check([tb.frame(tb.rng.randint(1, L)), tb.frame(1)])

@cocotb.test()
async def test_output_stall(dut):
    """m_axis_tready low for long: the FIFO fills, s_axis_tready falls, nothing is lost."""
    tb = AttTB(dut)
    await tb.reset()
    tb.set_pauses(0, 0)
    tb.sink.pause = True
    frames = [tb.frame(2) for _ in range(4)]
    beats = tb.beats_of(frames)
    expected = golden.attention_stream(beats, tb.cfg)
    tb.mon.clear()
    sender = cocotb.start_soon(tb.send_frames(frames))
    await ClockCycles(dut.aclk, 1500)
    assert len(tb.mon.in_hs) < len(beats), "every frame went in although the output was stalled"
    tb.sink.pause = False
    got = await with_timeout(tb.recv_words(len(frames)), 100_000, "us")
    await sender
    compare(got, expected)
    tb.assert_no_faults()


def frame_cycles(tb, L):
    """One frame alone with a free output: (beats, input span, latency, cycles to status)."""
    hs = tb.mon.in_hs
    out = tb.mon.out_hs
    return len(hs), hs[-1] - hs[0] + 1, out[-1] - hs[-1], out[-1] - hs[0] + 1


BACK_TO_BACK_FRAMES = 5   # the schedule is periodic from the third frame on


async def back_to_back(tb, L, n=BACK_TO_BACK_FRAMES):
    """n frames of context L back to back with a free output and an always-valid source: the
    cycle of every frame's first beat, tlast and status word, and the tready-low cycles, each
    equal to the latency model's schedule (AttentionTiming.schedule), exactly."""
    tb.mon.clear()
    await tb.run_check([tb.frame(L) for _ in range(n)])
    spans = tb.mon.frame_spans()
    words = golden.output_word_count(tb.cfg) + 1
    got = [{"first": f, "tlast": t, "status": tb.mon.out_hs[(k + 1) * words - 1]}
           for k, (f, t) in enumerate(spans)]
    beats = tb.frame_beats(L)
    want = tb.timing.schedule(beats, n, first=spans[0][0])
    assert got == want, f"L={L}: back to back {got}, latency model {want}"
    low = [spans[k + 1][0] - spans[k][1] - 1 for k in range(n - 1)]
    assert len(tb.mon.in_refused) == sum(low), (
        f"L={L}: tready low with tvalid high on {len(tb.mon.in_refused)} cycles, model {low}")
    # steady state: the mean of the last two frames (the period may alternate between two
    # values when the two-frame hand-over bounds it)
    period = (got[-1]["tlast"] - got[-3]["tlast"]) / 2
    assert period == tb.timing.period(beats), (
        f"L={L}: period {period}, model {tb.timing.period(beats)}")
    assert low[-1] + low[-2] == 2 * period - 2 * beats
    return {"period_back_to_back": period, "tready_low_per_frame": period - beats,
            "period_model": tb.timing.period(beats)}


@cocotb.test()
async def test_cycles(dut):
    """Cycles per frame against context with a free output: the input takes exactly one beat
    per clock within a frame, the status word follows the last beat after the fixed latency,
    and back-to-back frames follow the latency model's schedule exactly (first beat, tlast,
    status word of every frame, and the cycles s_axis_tready is low between frames)."""
    tb = AttTB(dut)
    await tb.reset()
    tb.set_pauses(0, 0)
    table = []
    for L in contexts(tb):
        tb.mon.clear()
        await tb.run_check([tb.frame(L)])
        beats, span, lat, total = frame_cycles(tb, L)
        assert beats == tb.frame_beats(L), f"{beats} handshakes, frame has {tb.frame_beats(L)}"
        assert span == beats, f"L={L}: {beats} beats took {span} cycles (tready fell in a frame)"
        assert not tb.mon.in_refused, f"tready low while tvalid high at {tb.mon.in_refused[:5]}"
        assert lat == tb.latency, f"L={L}: status {lat} cycles after tlast, manifest {tb.latency}"
        row = {"context": L, "beats": beats, "cycles_alone": total, "latency": lat}
        row.update(await back_to_back(tb, L))
        row["duty"] = round(100.0 * beats / row["period_back_to_back"], 2)
        table.append(row)
        dut._log.info("L=%5d: %6d beats, alone %6d cycles to status, latency %d, "
                      "back-to-back period %8.1f cycles, tready low %d per frame "
                      "(%.2f%% of cycles carry a beat)", L, beats, total, lat,
                      row["period_back_to_back"], row["tready_low_per_frame"], row["duty"])
    if os.environ.get("TB_CYCLES"):
        with open(os.environ["TB_CYCLES"], "w") as f:
            json.dump({"latency": tb.latency, "rows": table}, f, indent=1)


@cocotb.test()
async def test_summary(dut):
    """The `make sim` workload: random contexts with a free output, then under stalls; counts
    output words checked and mismatches, measures the tready duty within frames and the
    latency, writes $TB_RESULT."""
    tb = AttTB(dut)
    await tb.reset()
    tb.set_pauses(0, 0)
    budget = int(os.environ.get("TB_SUMMARY_BEATS", "6000"))
    frames, used = [], 0
    ls = contexts(tb, with_max=False)
    while used < budget:
        L = ls.pop(0) if ls else tb.rng.randint(1, min(tb.max_l, 300))
        frames.append(tb.frame(L))
        used += tb.frame_beats(L)
    beats = tb.beats_of(frames)
    expected = golden.attention_stream(beats, tb.cfg)
    tb.mon.clear()
    sender = cocotb.start_soon(tb.send_frames(frames))
    got = await with_timeout(tb.recv_words(len(frames)), 5_000_000, "us")
    await sender
    rows = len(expected)
    mismatches = sum(1 for g, e in zip(got, expected) if g != e) + abs(len(got) - len(expected))
    hs = list(tb.mon.in_hs)
    span = sum(e - s + 1 for s, e in tb.mon.frame_spans())
    tb.mon.clear()
    await tb.run_check([tb.frame(1)])
    lat = tb.mon.out_hs[-1] - tb.mon.in_hs[-1]
    tb.set_pauses(0.2, 0.4)
    await tb.run_check([tb.frame(tb.rng.randint(1, min(tb.max_l, 64))) for _ in range(3)])
    result = {"rows": rows, "mismatches": mismatches, "beats": len(hs), "cycles": span,
              "duty": 100.0 * len(hs) / span if span else 0.0, "latency": lat,
              "faults": len(tb.mon.faults)}
    if os.environ.get("TB_RESULT"):
        with open(os.environ["TB_RESULT"], "w") as f:
            json.dump(result, f)
    assert mismatches == 0, f"{mismatches} mismatching words"
    tb.assert_no_faults()
