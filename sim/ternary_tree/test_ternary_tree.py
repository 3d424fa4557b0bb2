"""cocotb test of the generated ternary term-select + adder tree, for any term count and x width.

Random x and trits are driven every cycle; the output `latency` cycles later must equal the
numpy dot product (sum + ci), including the extreme sums.
"""
from __future__ import annotations

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

from sim.common.axis_tb import CLOCK_PS, load_manifest, seed


def pack(values, width):
    out = 0
    for i, v in enumerate(values):
        out |= (int(v) & ((1 << width) - 1)) << (width * i)
    return out


@cocotb.test()
async def test_tree_random_and_extremes(dut):
    man = load_manifest()
    terms = man["parameters"]["terms"]
    xw = man["parameters"]["x_width"]
    lat = man["latency"]
    sw = man["sum_width"]
    rng = np.random.default_rng(seed())
    lo, hi = -(1 << (xw - 1)), (1 << (xw - 1)) - 1
    n = 600
    x = rng.integers(lo, hi + 1, size=(n, terms))
    w = rng.integers(-1, 2, size=(n, terms))
    # extremes: most negative x with all -1 and all +1, most positive x, all zero weights
    x[:4] = [[lo] * terms, [lo] * terms, [hi] * terms, [hi] * terms]
    w[:4] = [[-1] * terms, [1] * terms, [-1] * terms, [0] * terms]
    expected = (w * x).sum(axis=1)

    cocotb.start_soon(Clock(dut.aclk, CLOCK_PS, unit="ps").start())
    await FallingEdge(dut.aclk)
    got = []
    for t in range(n + lat):
        i = min(t, n - 1)
        dut.in_x.value = pack(x[i], xw)
        dut.in_nz.value = pack(w[i] != 0, 1)
        dut.in_neg.value = pack(w[i] < 0, 1)
        await RisingEdge(dut.aclk)
        await ReadOnly()
        if t >= lat - 1 and len(got) < n:
            s = int(dut.sum.value)
            s -= (1 << sw) if s >> (sw - 1) else 0
            got.append(s + int(dut.ci.value))
        await FallingEdge(dut.aclk)
    got = np.array(got[:n])
    bad = np.nonzero(got != expected)[0]
    assert len(bad) == 0, (f"{len(bad)} of {n} sums wrong; first at cycle {bad[0]}: got "
                           f"{got[bad[0]]}, expected {expected[bad[0]]}")
    dut._log.info("%d terms of %d bits, latency %d: %d sums checked", terms, xw, lat, n)
