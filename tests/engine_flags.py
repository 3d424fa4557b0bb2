"""Engines that flag their answers, for the tests of the decoder's checks (both host loops).

:func:`flag_answers` adds a transfer hook to a runtime: after each transfer, before either
loop reads the results, the status word of every answer ``select`` picks gets ``flags`` in its
flags field, as an engine that raised them would have sent it (tests/runtime/decode/test_runtime.py,
tests/runtime/cli/test_cli.py): in DDR, where the DMA wrote it (:func:`dma_results`), so the
loops see it only through their invalidates of the cached results region.
"""
from __future__ import annotations

from generators.runtime.engines import pg021 as R
from generators.runtime.engines.regmodel import BASE_ADDRESS


def dma_results(rt):
    """The results region's words in the DDR model (what the DMAs wrote; the CPU's cached copy
    is ``rt.rwords``)."""
    off = rt.base["results"] - BASE_ADDRESS
    return rt.memory.bytes[off:off + rt.plan.regions["results"].nbytes].view("<u4")


def flag_answers(be, select, flags: int):
    """``select(transfer, frame, port) -> bool``; returns ``be``."""
    rt = be.runtime

    def hook(index: int, done: bool) -> None:
        if not done:
            return
        t = rt.plan.transfers[index]
        w, d = rt.words, dma_results(rt)
        for fi, p, status, off in rt._tx[index].outs:
            if select(t, t.frames[fi], p):
                n = int(w[status] & R.LEN_MASK) >> 2
                d[off + n - 1] |= flags << 8

    rt.transfer_hooks.append(hook)
    return be
