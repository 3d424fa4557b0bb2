"""The simulator side of the ``rtl`` backend (engines/rtl.py), a cocotb module: cocotb loads it by
name (rtl.SIM_MODULE) in the simulator's process; no module of the library imports it.

The host process (the decoder and the runtime's DMA host code, the board's) talks to this test
over a socket at register level: MMIO writes and reads of the two AXI DMAs. The register model
(generators.runtime.engines.regmodel.SgDmaRegs, scatter-gather) walks the descriptor chains in DDR (a file
mapped by both processes) and moves their packets between DDR and the overlay top's s0/s1 and
m0/m1 AXI-Stream ports through a lean driver that drives and samples the stream signals
directly, both ports in one loop, one beat per clock; a packet that follows another on the same
port starts on the next clock (tvalid stays high), as the DMA's stream does.

cocotb 2.x joins the two worlds: the socket loop is synchronous code run with bridge (cocotb.task);
a status read of a busy DMA channel calls resume on the coroutine that runs the clock
until a channel's transfer completes; a "reset" request pulses aresetn (the runtime's PL reset
after a DMA fault).

Environment: TB_RT_SOCKET (the host's listener), TB_RT_DDR, TB_RT_DDR_SIZE.
"""
from __future__ import annotations

import os
import time
from multiprocessing.connection import Client

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

try:                                    # cocotb 2.x: the bridge lives in cocotb.task
    from cocotb.task import bridge, resume
except ImportError:                     # pragma: no cover
    bridge, resume = cocotb.bridge, cocotb.resume
import numpy as np

from generators.contract import FCLK_HZ
from generators.runtime.engines.regmodel import Memory, SgDmaRegs, serve

#: Verilator applies an input written in the clock-edge callback at its next evaluation, so the
#: 64-bit tdata may be written straight through the GPI handle (no scheduled write); Icarus
#: keeps cocotb's scheduled writes (TB_RT_DIRECT=0). rtl == golden on every word checks both.
DIRECT_WRITES = os.environ.get("TB_RT_DIRECT", "0") == "1"


def _direct64(h):
    f = h._handle.set_signal_val_binstr
    n = len(h)
    return lambda v: f(0, format(v, f"0{n}b"))


def _scheduled(h):
    def w(v):
        h.value = v
    return w


#: the fabric clock's period (7.00 ns)
CLOCK_PS = round(1e12 / FCLK_HZ)

#: clock cycles one poll may run without any transfer completing (the host's timeout decides)
POLL_CYCLES = 200_000


class RtlFabric:
    """Two MM2S streams into s0/s1, two S2MM streams out of m0/m1, one beat per clock (the
    fabric interface of SgDmaRegs: send, recv, abort, poll, reset)."""

    def __init__(self, dut, mem):
        self.dut, self.mem = dut, mem
        self.s = [(dut.s0_axis_tdata, dut.s0_axis_tvalid, dut.s0_axis_tlast, dut.s0_axis_tready),
                  (dut.s1_axis_tdata, dut.s1_axis_tvalid, dut.s1_axis_tlast, dut.s1_axis_tready)]
        self.m = [(dut.m0_axis_tdata, dut.m0_axis_tvalid, dut.m0_axis_tlast, dut.m0_axis_tready),
                  (dut.m1_axis_tdata, dut.m1_axis_tvalid, dut.m1_axis_tlast, dut.m1_axis_tready)]
        self.sends = [None, None]      # [beats list, index, done, applied]
        self.recvs = [None, None]      # [done, words, applied]
        self.aborted = set()
        self.cycles = 0
        self.beats_in = 0
        self.polls = 0
        self.poll_s = 0.0

    # called from the register model (host thread): only record, signals are set in _run
    def send(self, port, segments, done):
        data = self.mem.gather(segments)
        self.sends[port] = [data.view("<u8").tolist(), 0, lambda: done(), False]

    def recv(self, port, done):
        self.recvs[port] = [done, [], False]

    def abort(self, port, mm2s=True, s2mm=True):
        if mm2s:
            self.sends[port] = None
            self.aborted.add(("s", port))
        if s2mm:
            self.recvs[port] = None
            self.aborted.add(("m", port))

    def poll(self):
        t0 = time.perf_counter()
        resume(self._run)()
        self.polls += 1
        self.poll_s += time.perf_counter() - t0

    def reset(self):
        """aresetn low for 4 clocks: every frame half and answer in the PL is dropped."""
        self.sends, self.recvs = [None, None], [None, None]
        resume(self._pl_reset)()

    async def _pl_reset(self):
        for p in (0, 1):
            self.s[p][1].value = 0
            self.s[p][2].value = 0
            self.m[p][3].value = 0
        self.dut.aresetn.value = 0
        await ClockCycles(self.dut.aclk, 4)
        self.dut.aresetn.value = 1
        await ClockCycles(self.dut.aclk, 2)
        self.cycles += 6

    def _apply(self, p, wdat):
        """Drive a newly queued packet's first beat / raise tready for a new receive."""
        s, m = self.s, self.m
        st = self.sends[p]
        if st is not None and not st[3]:
            st[3] = True
            wdat[p](st[0][0])
            s[p][2].value = 1 if len(st[0]) == 1 else 0
            s[p][1].value = 1
            return True
        return False

    async def _run(self):
        s, m = self.s, self.m
        if DIRECT_WRITES:
            wdat = [_direct64(s[0][0]), _direct64(s[1][0])]
        else:
            wdat = [_scheduled(s[0][0]), _scheduled(s[1][0])]
        for kind, p in self.aborted:
            if kind == "s" and self.sends[p] is None:
                s[p][1].value = 0
                s[p][2].value = 0
            if kind == "m" and self.recvs[p] is None:
                m[p][3].value = 0
        self.aborted.clear()
        for p in (0, 1):
            self._apply(p, wdat)
            rv = self.recvs[p]
            if rv is not None and not rv[2]:
                rv[2] = True
                m[p][3].value = 1
        # the per-clock loop reads the handshake signals through the GPI handle directly
        # (an int, no Logic object): about twice the speed of .value
        rdy = [s[0][3]._handle.get_signal_val_long, s[1][3]._handle.get_signal_val_long]
        val = [m[0][1]._handle.get_signal_val_long, m[1][1]._handle.get_signal_val_long]
        dat = [m[0][0]._handle.get_signal_val_long, m[1][0]._handle.get_signal_val_long]
        lst = [m[0][2]._handle.get_signal_val_long, m[1][2]._handle.get_signal_val_long]
        sends, recvs = self.sends, self.recvs
        events = 0
        n = 0
        edge = RisingEdge(self.dut.aclk)
        while not events and n < POLL_CYCLES:
            await edge
            n += 1
            for p in (0, 1):
                st = sends[p]
                if st is not None and st[3] and rdy[p]():
                    i = st[1] + 1
                    st[1] = i
                    beats = st[0]
                    if i == len(beats):
                        sends[p] = None
                        self.beats_in += i
                        st[2]()                    # the next packet of the chain, if any
                        if not self._apply(p, wdat):
                            s[p][1].value = 0
                            s[p][2].value = 0
                            events += 1
                    else:
                        wdat[p](beats[i])
                        if i == len(beats) - 1:
                            s[p][2].value = 1
                rv = recvs[p]
                if rv is not None and rv[2] and val[p]():
                    rv[1].append(dat[p]() & 0xFFFFFFFF)
                    if lst[p]():
                        recvs[p] = None
                        rv[0](np.array(rv[1], dtype="<u4").view(np.uint8))
                        nv = recvs[p]
                        if nv is not None and not nv[2]:
                            nv[2] = True               # tready stays high
                        else:
                            m[p][3].value = 0
                            events += 1
        self.cycles += n


@cocotb.test()
async def test_runtime_server(dut):
    mem = Memory(os.environ["TB_RT_DDR"], int(os.environ["TB_RT_DDR_SIZE"]), create=False)
    cocotb.start_soon(Clock(dut.aclk, CLOCK_PS, unit="ps").start())
    for p in (0, 1):
        getattr(dut, f"s{p}_axis_tvalid").value = 0
        getattr(dut, f"s{p}_axis_tlast").value = 0
        getattr(dut, f"s{p}_axis_tdata").value = 0
        getattr(dut, f"s{p}_axis_tkeep").value = 0xFF
        getattr(dut, f"m{p}_axis_tready").value = 0
    dut.aresetn.value = 0
    await ClockCycles(dut.aclk, 4)
    dut.aresetn.value = 1
    await ClockCycles(dut.aclk, 2)
    fabric = RtlFabric(dut, mem)
    regs = [SgDmaRegs(p, fabric, mem) for p in (0, 1)]
    conn = Client(os.environ["TB_RT_SOCKET"], "AF_UNIX")

    def pl_reset(msg):
        fabric.reset()
        return "ok"

    ops = {"c": lambda msg: (fabric.cycles, fabric.beats_in, fabric.polls, fabric.poll_s),
           "reset": pl_reset}
    # a host that says nothing for an hour is gone: end the simulation
    await bridge(serve)(conn, regs, ops, 3600.0)
    conn.close()
    mem.close()
