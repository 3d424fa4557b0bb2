"""cocotb tests of the bandwidth probe: every beat taken, beats and cycles reported exactly."""
from __future__ import annotations

import cocotb
from cocotb.triggers import ClockCycles, with_timeout

from generators.golden import mv as golden
from sim.common.axis_tb import StreamTB


def frames_of(tb, lengths):
    return [bytes(tb.rng.randrange(256) for _ in range(n * tb.bytes)) for n in lengths]


async def send_and_check(tb, frames):
    """Expected counts come from the monitor's own record of the handshake cycles."""
    tb.mon.clear()
    sender = cocotb.start_soon(tb.send_frames(frames))
    got = await with_timeout(tb.recv_words(len(frames)), 100_000, "us")
    await sender
    return check(tb, frames, got)


WORDS_PER_FRAME = 3   # beats, cycles, status


def out_cycles(in_last, latency):
    """Output handshake cycles with a free output: a frame's first word `latency` cycles
    after its tlast beat, one word per cycle, behind the words of earlier frames."""
    out, free = [], None
    for c in in_last:
        start = c + latency if free is None else max(c + latency, free)
        out += [start + j for j in range(WORDS_PER_FRAME)]
        free = start + WORDS_PER_FRAME
    return out


def check_latency(tb):
    """Every output word on the cycle out_cycles() gives for the manifest's latency."""
    latency = int(tb.man["latency"])
    want = out_cycles(tb.mon.in_last, latency)
    got = tb.mon.out_hs
    assert len(got) == len(want), f"{len(got)} output handshakes, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        f = i // WORDS_PER_FRAME
        assert g == w, (f"frame {f} word {i % WORDS_PER_FRAME}: output at cycle {g}, expected {w} "
                        f"({g - tb.mon.in_last[f]} cycles after its tlast beat; latency {latency})")


def check(tb, frames, got):
    spans = tb.mon.frame_spans()
    assert len(spans) == len(frames), f"{len(spans)} frames seen on s_axis, sent {len(frames)}"
    gaps = [(e - s + 1) - len(f) // tb.bytes for (s, e), f in zip(spans, frames)]
    expected = golden.probe_stream(tb.beats_of(frames), gaps)
    assert got == expected, f"got {got[:9]}..., expected {expected[:9]}..."
    tb.assert_no_faults()
    return gaps


@cocotb.test()
async def test_counts_back_to_back(dut):
    """Frames back to back with a free output: cycles == beats, tready never falls."""
    tb = StreamTB(dut)
    await tb.reset()
    tb.set_pauses(0, 0)
    lengths = [1, 2, 3, 100, 1, 513] + [tb.rng.randint(1, 200) for _ in range(20)]
    gaps = await send_and_check(tb, frames_of(tb, lengths))
    assert gaps == [0] * len(lengths), f"idle cycles inside frames: {gaps}"
    assert not tb.mon.in_refused, f"s_axis_tready low with data offered at {tb.mon.in_refused[:5]}"
    check_latency(tb)


@cocotb.test()
async def test_latency(dut):
    """Frames one at a time (the output idle): the first count word `latency` cycles after the
    tlast beat, the next two on the following cycles."""
    tb = StreamTB(dut)
    await tb.reset()
    tb.set_pauses(0, 0)
    tb.mon.clear()
    frames = frames_of(tb, [1, 2, 7, 1])
    for fr in frames:
        sender = cocotb.start_soon(tb.send_frames([fr]))
        await with_timeout(tb.recv_words(1), 10_000, "ns")
        await sender
        await ClockCycles(dut.aclk, 3)
    latency = int(tb.man["latency"])
    firsts = tb.mon.out_hs[::WORDS_PER_FRAME]
    measured = [o - t for o, t in zip(firsts, tb.mon.in_last)]
    assert measured == [latency] * len(frames), f"measured {measured}, manifest latency {latency}"
    check_latency(tb)


@cocotb.test()
async def test_counts_with_pauses(dut):
    """Idle source and backpressured sink: cycles count the idle cycles inside each frame."""
    tb = StreamTB(dut)
    await tb.reset()
    tb.set_pauses(idle=0.3, backpressure=0.5)
    gaps = await send_and_check(tb, frames_of(tb, [tb.rng.randint(1, 150) for _ in range(30)]))
    assert any(gaps), "the idle inserter never paused inside a frame"


@cocotb.test()
async def test_output_stall(dut):
    """Output stalled until the count FIFO fills: tready falls, no count is lost."""
    tb = StreamTB(dut)
    await tb.reset()
    tb.set_pauses(0, 0)
    tb.sink.pause = True
    frames = frames_of(tb, [2] * 40)
    tb.mon.clear()
    sender = cocotb.start_soon(tb.send_frames(frames))
    await ClockCycles(dut.aclk, 400)
    assert tb.mon.tready_low > 0, "tready never fell with the output stalled"
    tb.sink.pause = False
    got = await with_timeout(tb.recv_words(len(frames)), 100_000, "us")
    await sender
    gaps = check(tb, frames, got)
    assert any(gaps), "no frame was held up by the full FIFO"


@cocotb.test()
async def test_reset_mid_frame(dut):
    """A reset inside a frame; the next frame is counted from its own first beat."""
    tb = StreamTB(dut)
    await tb.reset()
    tb.set_pauses(0, 0)
    await tb.reset_mid_frame(frames_of(tb, [300]), 100)
    await send_and_check(tb, frames_of(tb, [7, 1]))


@cocotb.test()
async def test_reset_mid_frame_and_stall(dut):
    """One-cycle resets (AXI4-Stream's shortest) inside a frame and under an output stall:
    m_axis_tvalid and s_axis_tready low in the cycle after aresetn is sampled low, no word out after the
    reset (nothing of the aborted frames, not the stalled word), the next frames answered
    right (docs/formal.md, "Reset")."""
    tb = StreamTB(dut)
    await tb.reset()
    await tb.reset_mid_frame_checked(frames_of(tb, [300]), 100)
    await send_and_check(tb, frames_of(tb, [7, 1]))
    assert await tb.reset_mid_stall_checked(frames_of(tb, [2, 300]))
    await send_and_check(tb, frames_of(tb, [5, 1]))

@cocotb.test()
async def test_summary(dut):
    """The `make sim` workload: frames back to back, counts checked, duty and latency."""
    import json
    import os
    tb = StreamTB(dut)
    await tb.reset()
    stall = float(os.environ.get("TB_SUMMARY_STALL", "0"))   # output backpressure probability
    tb.set_pauses(0, stall)
    frames = frames_of(tb, [tb.rng.randint(1, 400) for _ in range(20)])
    gaps = await send_and_check(tb, frames)
    beats = len(tb.mon.in_hs)
    cycles = beats + sum(gaps)
    lat = tb.mon.out_hs[0] - tb.mon.in_last[0]
    if not stall:   # with a free output the latency is exact
        assert lat == int(tb.man["latency"]), f"latency {lat} cycles, manifest {tb.man['latency']}"
        check_latency(tb)
    result = {"rows": 2 * len(frames), "mismatches": 0, "beats": beats, "cycles": cycles, "stall": stall,
              "duty": 100.0 * beats / cycles, "latency": lat, "faults": len(tb.mon.faults)}
    if os.environ.get("TB_RESULT"):
        with open(os.environ["TB_RESULT"], "w") as f:
            json.dump(result, f)
