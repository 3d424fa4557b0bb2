"""The write-up's scale in simulation, with a lean bulk driver.

cocotbext-axi moves about 26 k beats/s here; this driver drives and samples the AXI-Stream
signals directly, one beat per clock, and still checks the protocol (the output must hold
tvalid/tdata/tlast while stalled; the input handshake is counted every cycle) and every word:
each result against numpy (generators.golden.mv), each status word against the contract.

Environment: TB_FULL_ROWS (rows in all), TB_FULL_K, TB_FULL_FRAME_ROWS (rows per frame, at most
65,535, the default), TB_SEED, TB_FULL_STALL (output stall probability, 0 = free output),
TB_RESULT (JSON written at the end).
"""
from __future__ import annotations

import json
import os
import time

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

from generators.golden import mv as golden
from generators.packing import build_frame
from sim.common.axis_tb import CLOCK_PS, load_manifest

MAX_N = 65535


def workload(man, rows, k, rng, frame_rows=MAX_N):
    """Frames of up to frame_rows rows; returns (beats uint64 array, tlast bool array, expected)."""
    fmt = int(man["format"])
    bb = int(man["bytes"])
    name = "ternary" if fmt == golden.FMT_TERNARY else "int8"
    beats, lasts, expected = [], [], []
    left, tag = rows, 0
    while left:
        n = min(frame_rows, left)
        x = rng.integers(-128, 128, size=k, dtype=np.int8)
        if name == "ternary":
            w = rng.integers(-1, 2, size=(n, k), dtype=np.int8)
        else:
            w = rng.integers(-128, 128, size=(n, k), dtype=np.int8)
        fr = np.frombuffer(build_frame(x, w, name, tag=tag, beat_bytes=bb), dtype="<u8" if bb == 8 else np.uint8)
        if bb != 8:
            raise ValueError("the bulk driver runs the 8-byte PYNQ-Z1 configuration")
        la = np.zeros(len(fr), dtype=bool)
        la[-1] = True
        beats.append(fr)
        lasts.append(la)
        res = (golden.mv_results(x, w) & 0xFFFFFFFF).astype(np.uint64)
        expected.append((res, golden.status_word(tag, 0, n)))
        left -= n
        tag = (tag + 1) & 0xFF
    return np.concatenate(beats), np.concatenate(lasts), expected


@cocotb.test()
async def test_full_scale(dut):
    man = load_manifest()
    rows = int(os.environ.get("TB_FULL_ROWS", "1000"))
    k = int(os.environ.get("TB_FULL_K", "512"))
    stall = float(os.environ.get("TB_FULL_STALL", "0"))
    frame_rows = int(os.environ.get("TB_FULL_FRAME_ROWS", str(MAX_N)))
    assert 1 <= frame_rows <= MAX_N, f"TB_FULL_FRAME_ROWS={frame_rows}: 1..{MAX_N}"
    rng = np.random.default_rng(int(os.environ.get("TB_SEED", "1")))
    t0 = time.time()
    beats, lasts, expected = workload(man, rows, k, rng, frame_rows)
    exp_words = np.concatenate([np.append(r, s) for r, s in expected]).astype(np.uint64)
    exp_last = np.concatenate([np.append(np.zeros(len(r), bool), True) for r, _ in expected])
    print(f"[sim-full] {man['design']}: {rows} rows of K={k} in {len(expected)} frames, "
          f"{len(beats)} beats ({len(beats) * 8 / 1e6:.1f} MB), workload built in "
          f"{time.time() - t0:.1f} s", flush=True)

    cocotb.start_soon(Clock(dut.aclk, CLOCK_PS, unit="ps").start())
    dut.s_axis_tvalid.value = 0
    dut.s_axis_tlast.value = 0
    dut.s_axis_tdata.value = 0
    dut.s_axis_tkeep.value = 0xFF
    dut.m_axis_tready.value = 1
    dut.aresetn.value = 0
    await ClockCycles(dut.aclk, 4)
    dut.aresetn.value = 1
    await ClockCycles(dut.aclk, 2)

    s_tdata, s_tvalid, s_tlast, s_tready = dut.s_axis_tdata, dut.s_axis_tvalid, dut.s_axis_tlast, dut.s_axis_tready
    m_tdata, m_tvalid, m_tlast, m_tready = dut.m_axis_tdata, dut.m_axis_tvalid, dut.m_axis_tlast, dut.m_axis_tready
    n_in, n_exp = len(beats), len(exp_words)
    got = np.zeros(n_exp, dtype=np.uint64)
    got_last = np.zeros(n_exp, dtype=bool)
    beat_list = beats.tolist()
    last_list = lasts.tolist()
    i = o = 0
    cycles = refused = faults = 0
    first_cycle = None
    held = None
    ready = 1
    stall_pat = (rng.random(1 << 16) < stall).tolist() if stall else None
    s_tvalid.value = 1
    s_tdata.value = beat_list[0]
    s_tlast.value = last_list[0]
    t_start = time.time()
    next_report = 1_000_000
    idle = 0
    moved = 0      # last cycle with an input or output handshake: a stuck engine ends the run
    while o < n_exp:
        await RisingEdge(dut.aclk)
        cycles += 1
        if cycles - moved > 100_000:
            break
        # input side: a handshake happened at this edge when tvalid and tready were high
        if i < n_in:
            if s_tready.value:
                if first_cycle is None:
                    first_cycle = cycles
                i += 1
                moved = cycles
                if i < n_in:
                    s_tdata.value = beat_list[i]
                    s_tlast.value = last_list[i]
                else:
                    s_tvalid.value = 0
            else:
                refused += 1
        # output side
        if m_tvalid.value:
            word = (int(m_tdata.value), bool(m_tlast.value))
            if ready:
                if held is not None and held != word:
                    faults += 1
                got[o], got_last[o] = word
                o += 1
                moved = cycles
                held = None
            else:
                if held is not None and held != word:
                    faults += 1
                held = word
        elif held is not None:
            faults += 1
            held = None
        if stall_pat is not None:
            ready = 0 if stall_pat[cycles & 0xFFFF] else 1
            m_tready.value = ready
        if i >= n_in:
            idle += 1
            if idle > 10_000:
                break
        if i >= next_report:
            el = time.time() - t_start
            print(f"[sim-full] {man['design']}: {i:,}/{n_in:,} beats, {o:,} words out, "
                  f"{i / el:,.0f} beats/s", flush=True)
            next_report += 1_000_000
    elapsed = time.time() - t_start
    mism = int(np.count_nonzero(got[:o] != exp_words[:o])) + (n_exp - o)
    mism += int(np.count_nonzero(got_last[:o] != exp_last[:o]))
    res = {"design": man["design"], "rows": rows, "k": k, "frames": len(expected),
           "beats": n_in, "beats_in": i, "cycles": cycles,
           "refused": refused, "faults": faults, "mismatches": mism, "words": o,
           "seconds": elapsed, "beats_per_s": n_in / elapsed,
           "duty": 100.0 * n_in / (n_in + refused)}
    print(f"[sim-full] {man['design']}: {rows:,} rows checked, {mism} mismatches, "
          f"{faults} protocol faults, tready duty {res['duty']:.2f} %, {n_in:,} beats in "
          f"{elapsed:.1f} s = {n_in / elapsed:,.0f} beats/s", flush=True)
    if os.environ.get("TB_RESULT"):
        with open(os.environ["TB_RESULT"], "w") as f:
            json.dump(res, f)
    assert faults == 0, f"{faults} protocol faults on m_axis"
    assert mism == 0, f"{mism} mismatching output words"
