"""Shared cocotb test-bench pieces: clock and reset, AXI-Stream drivers, pause generators and
a protocol monitor that records every handshake cycle and counts protocol faults."""
from __future__ import annotations

import json
import logging
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge, with_timeout
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

from generators.contract import FCLK_HZ

CLOCK_PS = round(1e12 / FCLK_HZ)   # 7.00 ns: 142.857 MHz, the PYNQ-Z1 fabric clock of the write-up


def load_manifest() -> dict:
    with open(os.environ["TB_MANIFEST"]) as f:
        return json.load(f)


def seed() -> int:
    return int(os.environ.get("TB_SEED", "1"))


def random_pauses(rng: random.Random, p: float):
    """Pause generator: each cycle paused with probability p (bursty, seeded)."""
    while True:
        if rng.random() < p:
            for _ in range(rng.randint(1, 8)):
                yield True
        else:
            yield False


def _bit(sig) -> int:
    v = sig.value
    return int(v) if v.is_resolvable else -1


class StreamMonitor:
    """Per-cycle sampler of both streams.

    Records the cycle number of every input and output handshake and the cycles on which the
    input was offered but refused, and counts protocol faults (AXI4-Stream, docs/formal.md): on
    the output, tvalid dropped before its handshake or tdata, tlast, tkeep changed while stalled
    (checked in a cycle with aresetn low too: a stalled word still holds until the edge that
    samples the reset); tvalid high, or the input's tready high, in a cycle after an edge that
    sampled aresetn low (the reset's first cycle included); X/Z on the control outputs. A
    handshake in a cycle whose edge samples aresetn low is not a transfer (not recorded).
    """

    def __init__(self, dut, s_prefix: str = "s_axis", m_prefix: str = "m_axis"):
        self.dut = dut
        self.s_prefix, self.m_prefix = s_prefix, m_prefix
        self.cycle = 0
        self.in_hs = []          # cycles of s_axis handshakes
        self.in_last = []        # cycles of s_axis handshakes with tlast
        self.in_refused = []     # cycles with s_axis_tvalid high and s_axis_tready low
        self.out_hs = []         # cycles of m_axis handshakes
        self.out_valid_first = []
        self.faults = []
        self.reset_cycles = 0    # cycles checked after an edge that sampled aresetn low
        self.tready_low = 0
        self._task = None

    def start(self):
        self._task = cocotb.start_soon(self._run())

    def clear(self):
        self.in_hs.clear(); self.in_last.clear(); self.in_refused.clear(); self.out_hs.clear()
        self.tready_low = 0

    def frame_spans(self):
        """(first, last) handshake cycles of every input frame seen since clear()."""
        spans, first, lasts = [], None, set(self.in_last)
        for c in self.in_hs:
            first = c if first is None else first
            if c in lasts:
                spans.append((first, c))
                first = None
        return spans

    async def _run(self):
        d = self.dut
        s, m = self.s_prefix, self.m_prefix
        self._s_valid, self._s_ready = getattr(d, f"{s}_tvalid"), getattr(d, f"{s}_tready")
        self._s_last = getattr(d, f"{s}_tlast")
        self._m_valid, self._m_ready = getattr(d, f"{m}_tvalid"), getattr(d, f"{m}_tready")
        self._m_data, self._m_last = getattr(d, f"{m}_tdata"), getattr(d, f"{m}_tlast")
        self._m_keep = getattr(d, f"{m}_tkeep")
        held = None
        in_reset = False       # the edge that began this cycle sampled aresetn low
        while True:
            await RisingEdge(d.aclk)
            await ReadOnly()
            self.cycle += 1
            a = _bit(d.aresetn)        # what the next edge samples (driven right after edges)
            was_reset, in_reset = in_reset, a == 0
            rst = a != 1               # no transfer at that edge (X/Z before the first drive)
            sv, sr, sl = _bit(self._s_valid), _bit(self._s_ready), _bit(self._s_last)
            mv, mr = _bit(self._m_valid), _bit(self._m_ready)
            if was_reset:
                # AXI4-Stream 2.7.2: "During reset TVALID must be driven LOW"; nothing is
                # accepted in reset either (the engines' s_axis_tready, docs/formal.md)
                self.reset_cycles += 1
                if mv != 0:
                    self.faults.append((self.cycle, f"{m}_tvalid not low in reset"))
                if sr != 0:
                    self.faults.append((self.cycle, f"{s}_tready not low in reset"))
                held = None
                continue
            if sr not in (0, 1) or mv not in (0, 1):
                self.faults.append((self.cycle, f"X/Z on {s}_tready or {m}_tvalid"))
                continue
            if mv == 1:
                data = (int(self._m_data.value), _bit(self._m_last), _bit(self._m_keep))
                if held is not None and data != held:
                    self.faults.append((self.cycle, f"{m} data changed while stalled"))
            elif held is not None:
                self.faults.append((self.cycle, f"{m}_tvalid dropped before its handshake"))
            held = None
            if rst:
                continue          # the reset ends every obligation at this edge
            if sr == 0:
                self.tready_low += 1
            if sv == 1 and sr == 1:
                self.in_hs.append(self.cycle)
                if sl == 1:
                    self.in_last.append(self.cycle)
            elif sv == 1:
                self.in_refused.append(self.cycle)
            if mv == 1:
                if mr == 1:
                    self.out_hs.append(self.cycle)
                else:
                    held = data


class StreamTB:
    """Clock, reset, cocotbext-axi source and sink, and the monitor."""

    def __init__(self, dut):
        self.dut = dut
        self.man = load_manifest()
        self.bytes = int(self.man.get("bytes", 8))
        self.rng = random.Random(seed())
        cocotb.start_soon(Clock(dut.aclk, CLOCK_PS, unit="ps").start())
        self.source = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis"), dut.aclk,
                                      dut.aresetn, reset_active_level=False)
        self.sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis"), dut.aclk,
                                  dut.aresetn, reset_active_level=False)
        if not os.environ.get("TB_VERBOSE"):
            self.source.log.setLevel(logging.WARNING)
            self.sink.log.setLevel(logging.WARNING)
        self.mon = StreamMonitor(dut)
        self.mon.start()

    async def reset(self, cycles: int = 4):
        self.dut.aresetn.value = 0
        await ClockCycles(self.dut.aclk, cycles)
        self.dut.aresetn.value = 1
        await ClockCycles(self.dut.aclk, 2)

    async def reset_mid_frame(self, frames, cycles: int):
        """Start sending frames, assert reset after `cycles` clocks, and drop what the source
        still held and what the sink took before it: the engine must start clean."""
        sender = cocotb.start_soon(self.send_frames(frames))
        await ClockCycles(self.dut.aclk, cycles)
        await self.reset()
        sender.cancel()
        self.source.clear()
        await ClockCycles(self.dut.aclk, 4)
        self.sink.clear()

    async def reset_pulse(self, sender=None, cycles: int = 1):
        """aresetn low for `cycles` rising edges (1: the shortest reset AXI4-Stream allows),
        driven right after an edge as tb.reset() does (the monitor reads it as the value the
        next edge samples). In the cycle after the first edge that samples it low,
        m_axis_tvalid and s_axis_tready must already be low (asserted here; the monitor checks
        every reset cycle). `sender` (a task sending frames) is cancelled and the source
        emptied while aresetn is low, so nothing of the aborted frames is offered after it.
        Returns right after the edge that samples aresetn high again."""
        d, mon = self.dut, self.mon
        tvalid, tready = getattr(d, f"{mon.m_prefix}_tvalid"), getattr(d, f"{mon.s_prefix}_tready")
        await RisingEdge(d.aclk)
        d.aresetn.value = 0
        if sender is not None:
            sender.cancel()
        self.source.clear()
        for i in range(cycles):
            await RisingEdge(d.aclk)           # an edge that samples aresetn low
            if i == cycles - 1:
                d.aresetn.value = 1
            if i == 0:
                await ReadOnly()
                tv, tr = _bit(tvalid), _bit(tready)
                assert tv == 0, (f"{mon.m_prefix}_tvalid = {tv} in the cycle after aresetn was "
                                 f"sampled low")
                assert tr == 0, (f"{mon.s_prefix}_tready = {tr} in the cycle after aresetn was "
                                 f"sampled low")
        await RisingEdge(d.aclk)               # the edge that samples it high

    async def _quiet_after_reset(self, quiet: int):
        """`quiet` cycles with a free output and nothing sent: no word may come out (nothing of
        the frames the reset aborted, nor a word that was waiting under a stall)."""
        self.set_pauses(0, 0)
        self.mon.clear()
        await ClockCycles(self.dut.aclk, quiet)
        await ReadOnly()
        assert not self.mon.out_hs, (f"{len(self.mon.out_hs)} word(s) came out after the reset "
                                     f"(the first at monitor cycle {self.mon.out_hs[0]})")
        self.sink.clear()
        self.assert_no_faults()
        await RisingEdge(self.dut.aclk)

    def _quiet_cycles(self) -> int:
        return max(300, 4 * int(self.man.get("latency", 0)))

    async def reset_mid_frame_checked(self, frames, beats: int):
        """Send `frames` with a free output; once `beats` beats are taken and the last one taken
        is no tlast (the input is inside a frame), a one-cycle reset (reset_pulse's checks),
        then no word out in a quiet window. The caller then checks the next frames."""
        self.set_pauses(0, 0)
        self.mon.clear()
        sender = cocotb.start_soon(self.send_frames(frames))
        for _ in range(200_000):
            await RisingEdge(self.dut.aclk)
            await ReadOnly()
            hs = self.mon.in_hs
            if len(hs) >= beats and hs[-1] not in self.mon.in_last:
                break
        else:
            raise AssertionError(f"the input never stood inside a frame after {beats} beats")
        await self.reset_pulse(sender)
        await self._quiet_after_reset(self._quiet_cycles())

    async def reset_mid_stall_checked(self, frames, stall: int = 3):
        """Send `frames` with the output stalled (sink paused); once m_axis_tvalid has been
        high and unanswered for `stall` cycles (preferably with the input inside a frame: up to
        200 cycles more are waited for that), a one-cycle reset (reset_pulse's checks), then
        no word out in a quiet window (the stalled word included). The caller then checks the
        next frames. Returns whether the input was inside a frame at the reset."""
        d, mon = self.dut, self.mon
        tvalid = getattr(d, f"{mon.m_prefix}_tvalid")
        self.set_pauses(0, 0)
        self.sink.pause = True
        mon.clear()
        sender = cocotb.start_soon(self.send_frames(frames))
        waited, inside = 0, False
        for _ in range(200_000):
            await RisingEdge(d.aclk)
            await ReadOnly()
            hs = mon.in_hs
            inside = bool(hs) and hs[-1] not in mon.in_last
            waited = waited + 1 if _bit(tvalid) == 1 else 0
            if waited >= stall + (0 if inside else 200):
                break
        else:
            raise AssertionError("the output never stalled")
        assert not mon.out_hs, "the paused sink took a word"
        await self.reset_pulse(sender)
        await self._quiet_after_reset(self._quiet_cycles())
        return inside

    def set_pauses(self, idle: float = 0.0, backpressure: float = 0.0):
        """Idle (source) and backpressure (sink) inserters; 0 turns one off for good."""
        if idle:
            self.source.set_pause_generator(random_pauses(random.Random(self.rng.random()), idle))
        else:
            self.source.clear_pause_generator()
            self.source.pause = False
        if backpressure:
            self.sink.set_pause_generator(random_pauses(random.Random(self.rng.random()), backpressure))
        else:
            self.sink.clear_pause_generator()
            self.sink.pause = False

    async def send_frames(self, frames):
        for fr in frames:
            await self.source.send(AxiStreamFrame(bytes(fr)))

    async def recv_words(self, n_frames: int, timeout_cycles: int = 2_000_000):
        """Receive n_frames output frames as a flat list of (word, tlast)."""
        out = []
        for _ in range(n_frames):
            fr = await self.sink.recv()
            data = bytes(fr.tdata)
            assert len(data) % 4 == 0, f"output frame of {len(data)} bytes is not whole words"
            words = [int.from_bytes(data[i:i + 4], "little") for i in range(0, len(data), 4)]
            out += [(w, i == len(words) - 1) for i, w in enumerate(words)]
        return out

    def beats_of(self, frames):
        """(data, tlast) beats of byte frames, as the source will send them."""
        beats = []
        for fr in frames:
            fr = bytes(fr)
            assert len(fr) % self.bytes == 0, "test frames are whole beats"
            n = len(fr) // self.bytes
            for i in range(n):
                beats.append((int.from_bytes(fr[i * self.bytes:(i + 1) * self.bytes], "little"),
                              i == n - 1))
        return beats

    def assert_no_faults(self):
        assert not self.mon.faults, f"protocol faults: {self.mon.faults[:10]}"

    async def run_check(self, frames, expected_fn, flag_names=None, timeout_us=2_000_000):
        """Send byte frames, receive one output frame per input frame and compare every word
        with expected_fn(beats) (the golden model); also no protocol fault on the output."""
        expected = expected_fn(self.beats_of(frames))
        sender = cocotb.start_soon(self.send_frames(frames))
        got = await with_timeout(self.recv_words(len(frames)), timeout_us, "us")
        await sender
        compare_words(got, expected, flag_names)
        self.assert_no_faults()
        return got


    async def summary(self, make_frames, expected_fn, latency_frame):
        """The `make sim` / `make report` workload of a matrix engine: the frames of
        `make_frames(budget)` ($TB_SUMMARY_BEATS beats; output backpressure from
        $TB_SUMMARY_STALL), rows checked and mismatching words against `expected_fn(beats)`
        (the golden model), the tready duty over each frame's span and the latency of
        `latency_frame()` (a one-row frame, free output); writes $TB_RESULT and fails on any
        mismatch or protocol fault."""
        import json
        stall = float(os.environ.get("TB_SUMMARY_STALL", "0"))   # output backpressure
        self.set_pauses(0, stall)
        frames = make_frames(int(os.environ.get("TB_SUMMARY_BEATS", "6000")))
        expected = expected_fn(self.beats_of(frames))
        self.mon.clear()
        sender = cocotb.start_soon(self.send_frames(frames))
        got = await with_timeout(self.recv_words(len(frames)), 1_000_000, "us")
        await sender
        rows = sum(1 for _, last in expected if not last)
        mismatches = (sum(1 for g, e in zip(got, expected) if g != e)
                      + abs(len(got) - len(expected)))
        # duty: handshakes over the cycles from each frame's first beat to its last
        hs = list(self.mon.in_hs)
        span = sum(e - s + 1 for s, e in self.mon.frame_spans())
        # latency of a one-row frame, free output
        self.set_pauses(0, 0)
        self.mon.clear()
        await self.run_check([latency_frame()])
        lat = self.mon.out_hs[0] - self.mon.in_hs[-1]
        result = {"rows": rows, "mismatches": mismatches, "beats": len(hs), "cycles": span,
                  "stall": stall, "duty": 100.0 * len(hs) / span if span else 0.0,
                  "latency": lat, "faults": len(self.mon.faults)}
        if os.environ.get("TB_RESULT"):
            with open(os.environ["TB_RESULT"], "w") as f:
                json.dump(result, f)
        assert mismatches == 0, f"{mismatches} mismatching words"
        self.assert_no_faults()
        return result


def compare_words(got, expected, flag_names=None):
    """Word-by-word comparison of (word, tlast) lists; status words are decoded in the message."""
    names = flag_names or (lambda f: [f"bit{b}" for b in range(8) if f >> b & 1])
    assert len(got) == len(expected), (
        f"{len(got)} output words, the golden model expects {len(expected)}")
    for i, (g, e) in enumerate(zip(got, expected)):
        if g != e:
            what = ""
            if e[1]:
                what = (f" (status: expected tag {e[0] & 0xFF} flags {names(e[0] >> 8 & 0xFF)} "
                        f"count {e[0] >> 16}, got tag {g[0] & 0xFF} flags "
                        f"{names(g[0] >> 8 & 0xFF)} count {g[0] >> 16})")
            raise AssertionError(f"word {i}: got {g[0]:#010x} tlast={g[1]}, expected "
                                 f"{e[0]:#010x} tlast={e[1]}{what}")
