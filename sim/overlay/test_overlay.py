"""cocotb tests of the PYNQ-Z1 overlay top `pynq_overlay` (design `overlay`).

Two independent cocotbext-axi sources (one per DMA MM2S stream) with independent random pauses,
two sinks with random backpressure, a protocol monitor on each port. Matrix frames of both
formats on both ports are interleaved with attention frames split over the two ports (the
second half skewed against the first), with bad frames on either port. With matrix engines of
`vectors` V >= 2, half of the matrix frames carry B = 1 .. V activation vectors
(docs/vectors.md). Every output word of
each port is compared with generators.golden.overlay, an independent model of the routing,
the joiner and the output order that calls the engines' golden models.
"""
from __future__ import annotations

import json
import logging
import os
import random

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge, with_timeout
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

from generators.contract import HP_BEAT_BYTES as BEAT, RESULT_BYTES as WORD
from generators.golden import attention as gatt
from generators.golden import mv as gmv
from generators.golden import overlay as golden
from generators.packing import build_frame, header_bytes, row_bytes, split_attention_frame
from sim.common.axis_tb import (CLOCK_PS, StreamMonitor, compare_words, load_manifest,
                                random_pauses, seed)

BEATS = int(os.environ.get("TB_BEATS", "3000"))     # 8-byte words per port, roughly
#: largest attention context of the mixed traffic (0: the engine's max_context). The PYNQ-Z1
#: top's 2048 would make one attention frame about 16k words per port.
L_MAX = int(os.environ.get("TB_L_MAX", "0"))
#: rows of a random matrix frame are cut to stay near this many 8-byte words (0: up to 12 rows);
#: K still goes up to max_k, so the x banks are read at every depth
FRAME_WORDS = int(os.environ.get("TB_FRAME_WORDS", "0"))


def flag_names(flags):
    return gmv.flag_names(flags) or ["OK"]


class OverlayTB:
    def __init__(self, dut):
        self.dut = dut
        self.man = load_manifest()
        self.max_k = int(self.man["matrix"]["max_k"])
        for st in self.man["streams"]:        # frames of 8-byte beats in, 4-byte words out
            assert (st["s_axis_width"], st["m_axis_width"]) == (8 * BEAT, 8 * WORD), st
        self.formats = [int(f) for f in self.man["matrix"].get("formats", golden.FORMATS)]
        self.vectors = int(self.man["matrix"].get("vectors", 1))
        a = self.man["attention"]
        self.cfg = gatt.AttentionConfig(
            heads_per_group=a["heads_per_group"], head_dim=a["head_dim"],
            max_context=a["max_context"], beat_bytes=a["beat_bytes"], exp_depth=a["exp_depth"],
            exp_width=a["exp_width"], exp_steps_per_octave=a["exp_steps_per_octave"],
            scale_frac_bits=a["scale_frac_bits"], kv_bits=a.get("kv_bits", 8))
        self.max_l = a["max_context"]
        self.formats_sent = [{f: 0 for f in self.formats} for _ in (0, 1)]
        self.rng = random.Random(seed())
        self.np_rng = np.random.default_rng(self.rng.randrange(2**32))
        cocotb.start_soon(Clock(dut.aclk, CLOCK_PS, unit="ps").start())
        self.src, self.snk, self.mon = [], [], []
        for p in (0, 1):
            s = AxiStreamSource(AxiStreamBus.from_prefix(dut, f"s{p}_axis"), dut.aclk,
                                dut.aresetn, reset_active_level=False)
            k = AxiStreamSink(AxiStreamBus.from_prefix(dut, f"m{p}_axis"), dut.aclk,
                              dut.aresetn, reset_active_level=False)
            if not os.environ.get("TB_VERBOSE"):
                s.log.setLevel(logging.WARNING)
                k.log.setLevel(logging.WARNING)
            m = StreamMonitor(dut, f"s{p}_axis", f"m{p}_axis")
            m.start()
            self.src.append(s); self.snk.append(k); self.mon.append(m)

    async def reset(self):
        self.dut.aresetn.value = 0
        await ClockCycles(self.dut.aclk, 4)
        self.dut.aresetn.value = 1
        await ClockCycles(self.dut.aclk, 2)

    def set_pauses(self, idle=0.0, backpressure=0.0):
        """Independent pause generators per source and per sink (0 turns one off)."""
        for s in self.src:
            if idle:
                s.set_pause_generator(random_pauses(random.Random(self.rng.random()), idle))
            else:
                s.clear_pause_generator(); s.pause = False
        for k in self.snk:
            if backpressure:
                k.set_pause_generator(random_pauses(random.Random(self.rng.random()), backpressure))
            else:
                k.clear_pause_generator(); k.pause = False

    # ---------------------------------------------------------------- frames
    @staticmethod
    def row_words(k, fmt):
        """8-byte words of one row of K weights in format FMT."""
        if fmt == gmv.FMT_Q4:
            from generators.q4 import q4_row_bytes
            return -(-q4_row_bytes(k) // BEAT)
        return -(-row_bytes(k, "ternary" if fmt == gmv.FMT_TERNARY else "int8") // BEAT)

    def matrix(self, k=None, n=None, fmt=None, tag=None, b="pick"):
        """A random matrix frame: K is max_k a quarter of the time (the deepest x-bank
        address), else uniform in 1..max_k; N up to 12 rows, fewer where FRAME_WORDS says;
        `b`: None one vector without the flag, B vectors, or "pick": None half of the time
        (always with vectors = 1), else 1 .. vectors."""
        if b == "pick":
            b = (None if self.vectors < 2 or self.rng.random() < 0.5
                 else self.rng.randint(1, self.vectors))
        if k is None:
            k = self.max_k if self.rng.random() < 0.25 else self.rng.randint(1, self.max_k)
        fmt = self.rng.choice(self.formats) if fmt is None else fmt
        if n is None:
            n_max = 12 if not FRAME_WORDS else FRAME_WORDS // self.row_words(k, fmt)
            n = self.rng.randint(1, max(1, min(12, n_max)))
        x = self.np_rng.integers(-128, 128, size=k if b is None else (b, k), dtype=np.int8)
        if fmt == gmv.FMT_Q4:         # llama.cpp Q4_1 rows (overlay q4=true, docs/q4.md)
            from generators.q4 import build_q4_frame, pack_q4_rows
            nb = -(-k // 32)
            q = self.np_rng.integers(0, 16, size=(n, nb, 32), dtype=np.uint8)
            d, m = (self.np_rng.normal(0, 0.01, size=(n, nb)).astype(np.float16) for _ in "dm")
            return build_q4_frame(x, pack_q4_rows(q, d, m, k), k,
                                  self.rng.randrange(256) if tag is None else tag)
        if fmt == gmv.FMT_TERNARY:
            w = self.np_rng.integers(-1, 2, size=(n, k), dtype=np.int8)
        else:
            w = self.np_rng.integers(-128, 128, size=(n, k), dtype=np.int8)
        tag = self.rng.randrange(256) if tag is None else tag
        return build_frame(x, w, "ternary" if fmt == gmv.FMT_TERNARY else "int8", tag=tag,
                           beat_bytes=BEAT, pad_fill=self.np_rng)

    def attention(self, L=None, tag=None, **over):
        """(port-0 half, port-1 half) of a random attention frame."""
        L = self.rng.randint(1, self.max_l) if L is None else L
        G, d = self.cfg.heads_per_group, self.cfg.head_dim
        q = self.np_rng.integers(-128, 128, size=(G, d))
        top = 1 << (self.cfg.kv_bits - 1)          # the K and V codes' full range
        K = self.np_rng.integers(-top, top, size=(L, d))
        V = self.np_rng.integers(-top, top, size=(L, d))
        mult = [self.rng.randrange(1 << 16) for _ in range(G)]
        shift = [self.rng.randint(14, 30) for _ in range(G)]
        tag = self.rng.randrange(256) if tag is None else tag
        fr = gatt.build_attention_frame(q, K, V, mult, shift, tag, self.cfg,
                                        pad_byte=self.rng.randrange(256), **over)
        return split_attention_frame(fr, L, tag)

    def mixed(self, budget, att_share=0.3, l_max=None):
        """Per-port frame lists: matrix frames on both ports, their formats taken in turn per
        port (self.formats_sent counts them), and attention frames (one half on each port, in
        the same relative order, contexts up to l_max, else TB_L_MAX, else max_context), about
        `budget` words per port."""
        ports = ([], [])
        used = [0, 0]
        l_max = min(l_max or L_MAX or self.max_l, self.max_l)
        while min(used) < budget:
            if self.rng.random() < att_share:
                h0, h1 = self.attention(self.rng.randint(1, l_max))
                ports[0].append(h0); ports[1].append(h1)
                used[0] += len(h0) // BEAT; used[1] += len(h1) // BEAT
            else:
                p = 0 if used[0] <= used[1] else 1
                fmt = self.formats[sum(self.formats_sent[p].values()) % len(self.formats)]
                self.formats_sent[p][fmt] += 1
                fr = self.matrix(fmt=fmt)
                ports[p].append(fr)
                used[p] += len(fr) // BEAT
        return ports

    # ---------------------------------------------------------------- running
    @staticmethod
    def words_of(frames):
        out = []
        for fr in frames:
            n = len(fr) // BEAT
            assert len(fr) % BEAT == 0
            out += [(int.from_bytes(fr[BEAT * i:BEAT * (i + 1)], "little"), i == n - 1)
                    for i in range(n)]
        return out

    async def _send(self, p, frames, skew):
        if skew:
            await ClockCycles(self.dut.aclk, skew)
        for fr in frames:
            await self.src[p].send(AxiStreamFrame(bytes(fr)))
        await self.src[p].wait()

    async def _recv(self, p, n_frames):
        out = []
        for _ in range(n_frames):
            fr = await self.snk[p].recv()
            data = bytes(fr.tdata)
            assert len(data) % WORD == 0, f"port {p}: output frame of {len(data)} bytes"
            words = [int.from_bytes(data[i:i + WORD], "little")
                     for i in range(0, len(data), WORD)]
            out += [(w, i == len(words) - 1) for i, w in enumerate(words)]
        return out

    async def run_check(self, frames0, frames1, skew=(0, 0), timeout_us=2_000_000):
        """Send both ports' frames (port p starting skew[p] cycles late), receive and compare
        every output word of both ports with the golden model; check that every input word
        was taken and that no port saw a protocol fault."""
        w0, w1 = self.words_of(frames0), self.words_of(frames1)
        exp = golden.overlay_outputs(w0, w1, self.max_k, self.cfg, self.formats, self.vectors)
        for m in self.mon:
            m.clear()
        senders = [cocotb.start_soon(self._send(p, fr, skew[p]))
                   for p, fr in ((0, frames0), (1, frames1))]
        got = {}
        for p in (0, 1):
            n = sum(1 for _, last in exp[p] if last)
            got[p] = await with_timeout(self._recv(p, n), timeout_us, "us")
        for s in senders:
            await s
        await ClockCycles(self.dut.aclk, 40)
        for p in (0, 1):
            try:
                compare_words(got[p], exp[p], flag_names)
            except AssertionError as e:
                raise AssertionError(f"port {p}: {e}") from None
            assert not self.snk[p].count(), f"port {p}: {self.snk[p].count()} extra output frame(s)"
            assert len(self.mon[p].in_hs) == len((w0, w1)[p]), (
                f"port {p}: {len(self.mon[p].in_hs)} input handshakes, {len((w0, w1)[p])} words sent")
            assert not self.mon[p].faults, f"port {p}: protocol faults {self.mon[p].faults[:5]}"
        return got, exp


async def port_latency(tb, p):
    """Cycles from a one-row matrix frame's last input handshake to its result's handshake on
    port p, free flow."""
    await tb.run_check(*([[tb.matrix(tb.max_k, 1, b=None)], []][::1 if p == 0 else -1]))
    return tb.mon[p].out_hs[0] - tb.mon[p].in_hs[-1]


@cocotb.test()
async def test_mixed_traffic(dut):
    """Matrix frames of both formats on both ports interleaved with attention frames: free
    flow, then independent source pauses and sink backpressure with the halves skewed.
    First the matrix latency through each port, exact."""
    tb = OverlayTB(dut)
    await tb.reset()
    for p in (0, 1):
        lat = await port_latency(tb, p)
        assert lat == tb.man["matrix"]["port_latency"][p], (
            f"port {p}: matrix latency {lat}, manifest {tb.man['matrix']['port_latency'][p]}")
    f0, f1 = tb.mixed(BEATS // 3)
    await tb.run_check(f0, f1)
    tb.set_pauses(idle=0.3, backpressure=0.3)
    for skew in ((0, 57), (91, 0)):
        f0, f1 = tb.mixed(BEATS // 3)
        got, _ = await tb.run_check(f0, f1, skew=skew)
        dut._log.info("skew %s: port 0 %d frames / %d words, port 1 %d frames / %d words", skew,
                      len(f0), len(got[0]), len(f1), len(got[1]))
    for p in (0, 1):
        assert all(tb.formats_sent[p].values()), (
            f"port {p}: matrix frames per format {tb.formats_sent[p]}: a format was not sent")
    dut._log.info("matrix frames per format: port 0 %s, port 1 %s", *tb.formats_sent)


def bad_cases(tb):
    """(name, port-0 frames, port-1 frames): each bad case with good frames around it."""
    k = min(tb.max_k, 19)
    good = tb.matrix(k, 3, b=None)
    L = min(tb.max_l, 3)
    h0, h1 = tb.attention(L)
    # a format byte no matrix lane takes (0x05 is the Q4_1 lane's with Q8_1 x: block_formats)
    takes = tb.formats + [int(f) for f in tb.man["matrix"].get("block_formats", [])]
    bad_fmt = [f for f in (4, 5, 6) if f not in takes][0]
    cases = [
        ("bad magic on port 0", [bytes(header_bytes(k, 2, 8, 0x21, magic=0x1234)) + bytes(8)], []),
        ("bad magic on port 1", [], [bytes(header_bytes(k, 2, 3, 0x22, magic=0x0000)) + bytes(8)]),
        ("route magic on port 0", [bytes(header_bytes(k, 2, 8, 0x23, magic=0xA77F))], []),
        ("attention magic on port 1", [], [bytes(header_bytes(k, 2, 8, 0x24, magic=0xA77E))]),
        (f"BAD_FORMAT {bad_fmt:#04x} on port 1", [], [bytes(header_bytes(k, 2, bad_fmt, 0x25))
                                                      + bytes(24)]),
        ("matrix SHORT on port 0", [good[:-16]], []),
        ("matrix LONG on port 1", [], [good + bytes(16)]),
        ("attention SHORT (both halves)", [h0[:-8 * BEAT]], [h1[:-8 * BEAT]]),
        ("attention LONG (both halves)", [h0 + bytes(16)], [h1 + bytes(16)]),
        ("halves mismatched: port 1 shorter", [h0], [h1[:-24]]),
        ("halves mismatched: port 0 shorter", [h0[:-40]], [h1]),
        ("halves mismatched: port 1 longer", [h0], [h1 + bytes(32)]),
        ("attention bad shape", *[[h] for h in tb.attention(L, heads=2)]),
        ("route word alone", [], [split_attention_frame(bytes(16), 0, 0x26)[1][:8]]),
    ]
    V = tb.vectors
    xl = -(-k // BEAT) * BEAT
    if V > 1:
        gv = tb.matrix(k, 3, fmt=3, b=V)
        cases += [
            ("vectors B=0 on port 0", [header_bytes(k, 2, 8, 0x31, vectors=0) + bytes(xl)], []),
            ("vectors B>V on port 1", [], [header_bytes(k, 2, 3, 0x32, vectors=V + 1)
                                           + bytes((V + 1) * xl)]),
            ("vectors reserved on port 0", [header_bytes(k, 2, 3, 0x33, vectors=V, reserved=5)
                                            + bytes(V * xl)], []),
            ("vectors SHORT in x on port 1", [], [gv[:16 + xl]]),
            ("vectors LONG on port 0", [gv + bytes(8)], []),
        ]
    else:
        cases += [("vectors flag on a one-vector engine", [header_bytes(k, 2, 8, 0x34, vectors=1)
                                                         + bytes(xl)], [])]
    return cases


@cocotb.test()
async def test_bad_frames(dut):
    """Bad frames on either port, each between good frames of both kinds: every port answers
    each frame it owns, in order, and the next frames come out right."""
    tb = OverlayTB(dut)
    await tb.reset()
    passes = ((0.3, 0.3),) if os.environ.get("TB_QUICK") else ((0, 0), (0.3, 0.3))
    for pauses in passes:
        tb.set_pauses(*pauses)
        for name, b0, b1 in bad_cases(tb):
            a0, a1 = tb.attention(min(tb.max_l, 2))
            f0 = [tb.matrix()] + b0 + [a0, tb.matrix()]
            f1 = [tb.matrix()] + b1 + [a1, tb.matrix()]
            got, exp = await tb.run_check(f0, f1, skew=(0, tb.rng.randint(0, 40)))
            st0 = [gmv.decode_status(w) for w, last in exp[0] if last]
            st1 = [gmv.decode_status(w) for w, last in exp[1] if last]
            dut._log.info("%-36s port 0 flags %s, port 1 flags %s", name,
                          [f for _, f, _ in st0], [f for _, f, _ in st1])


@cocotb.test()
async def test_output_stall(dut):
    """Port 0's sink stalled for a long time: its inputs stop, port 1 carries on with its
    matrix frames, and after the stall every word of both ports comes out right."""
    tb = OverlayTB(dut)
    await tb.reset()
    f0 = [tb.matrix(n=30) for _ in range(6)]
    a0, a1 = tb.attention(min(tb.max_l, 4))
    f0.insert(2, a0)
    f1 = [tb.matrix(n=10) for _ in range(3)] + [a1] + [tb.matrix() for _ in range(3)]
    tb.snk[0].pause = True
    task = cocotb.start_soon(tb.run_check(f0, f1))
    await ClockCycles(dut.aclk, 3000)
    assert tb.mon[0].tready_low > 0, "port 0's input never stalled"
    assert len(tb.mon[0].in_hs) < len(tb.words_of(f0)), "port 0 took everything while stalled"
    tb.snk[0].pause = False
    await task


async def reset_checked(tb, senders, quiet=400):
    """A one-cycle reset driven right after an edge: in the cycle after the edge that samples
    it low both ports show m_axis_tvalid and s_axis_tready low (asserted here; the monitors
    check every reset cycle); the senders are cancelled and the sources emptied during it;
    then `quiet` cycles with free sinks and nothing sent: no output word on either port."""
    d = tb.dut
    await RisingEdge(d.aclk)
    d.aresetn.value = 0
    for s in senders:
        s.cancel()
    for s in tb.src:
        s.clear()
    await RisingEdge(d.aclk)
    d.aresetn.value = 1
    await ReadOnly()
    for p in (0, 1):
        for sig in (f"m{p}_axis_tvalid", f"s{p}_axis_tready"):
            v = getattr(d, sig).value
            assert v.is_resolvable and int(v) == 0, \
                f"{sig} = {v} in the cycle after aresetn was sampled low"
    await RisingEdge(d.aclk)
    tb.set_pauses(0, 0)
    for m in tb.mon:
        m.clear()
    await ClockCycles(d.aclk, quiet)
    for p in (0, 1):
        assert not tb.mon[p].out_hs, f"port {p}: {len(tb.mon[p].out_hs)} word(s) after the reset"
        assert not tb.mon[p].faults, f"port {p}: protocol faults {tb.mon[p].faults[:5]}"
        tb.snk[p].clear()


def _inside(mon):
    return bool(mon.in_hs) and mon.in_hs[-1] not in mon.in_last


@cocotb.test()
async def test_reset_mid_frame_and_stall(dut):
    """One-cycle resets (AXI4-Stream's shortest) with both ports inside a frame, then under an
    output stall on both ports: tvalid and tready of both ports low in the cycle after aresetn
    is sampled low, no word out after the reset, the next frames of both ports answered right
    (docs/formal.md, "Reset")."""
    tb = OverlayTB(dut)
    await tb.reset()
    for stalled in (False, True):
        a0, a1 = tb.attention(min(tb.max_l, 4))
        f0 = [tb.matrix(tb.max_k, 6, b=None), a0, tb.matrix(n=6)]
        f1 = [tb.matrix(tb.max_k, 6, b=None), a1, tb.matrix(n=6)]
        for m in tb.mon:
            m.clear()
        for k in tb.snk:
            k.pause = stalled
        senders = [cocotb.start_soon(tb._send(p, fr, 0)) for p, fr in ((0, f0), (1, f1))]
        waited = 0
        for _ in range(100_000):
            await RisingEdge(dut.aclk)
            await ReadOnly()
            if stalled:
                both = all(int(getattr(dut, f"m{p}_axis_tvalid").value) == 1 for p in (0, 1))
                waited = waited + 1 if both else 0
                if waited >= 3:
                    break
            elif all(_inside(m) and len(m.in_hs) > 8 for m in tb.mon):
                break
        else:
            raise AssertionError("never reached the state to reset in")
        if stalled:
            assert not any(m.out_hs for m in tb.mon), "a paused sink took a word"
        await reset_checked(tb, senders)
        b0, b1 = tb.attention(min(tb.max_l, 2))
        await tb.run_check([tb.matrix(), b0], [tb.matrix(), b1])


@cocotb.test()
async def test_summary(dut):
    """The `make sim` workload: mixed traffic, free flow; writes $TB_RESULT."""
    tb = OverlayTB(dut)
    await tb.reset()
    budget = int(os.environ.get("TB_SUMMARY_BEATS", str(BEATS)))
    f0, f1 = tb.mixed(budget, l_max=128)
    got, exp = await tb.run_check(f0, f1)
    spans = [sum(e - s + 1 for s, e in m.frame_spans()) for m in tb.mon]
    hs = [len(m.in_hs) for m in tb.mon]
    words = sum(len(got[p]) for p in (0, 1))
    n_att = sum(1 for fr in f0 if int.from_bytes(fr[:2], "little") == golden.ATTENTION_MAGIC)
    # matrix result words: port 1's non-status words, port 0's outside attention frames
    att_words = n_att * (gatt.output_word_count(tb.cfg) + 1)
    rows = sum(1 for p in (0, 1) for _, last in exp[p] if not last) - (att_words - n_att)
    lats = [await port_latency(tb, p) for p in (0, 1)]
    result = {"frames": len(f0) + len(f1), "attention_frames": n_att, "words": words,
              "rows": f"{rows} + {n_att} attention frames", "mismatches": 0,
              "beats": sum(hs), "cycles": sum(spans),
              "duty": 100.0 * sum(hs) / sum(spans) if sum(spans) else 0.0,
              "latency": "/".join(map(str, lats)),
              "faults": sum(len(m.faults) for m in tb.mon)}
    if os.environ.get("TB_RESULT"):
        with open(os.environ["TB_RESULT"], "w") as f:
            json.dump(result, f)
