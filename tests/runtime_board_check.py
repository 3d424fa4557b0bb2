"""Run by tests/test_runtime_board.py in the PYNQ venv (build/pynq-venv, pynq 3.1.2, numpy 1.26).

The board host code (generators.runtime.backends.DmaHost) drives PYNQ's OWN simple-mode DMA
driver, pynq.lib.dma._SDMAChannel, whose MMIO is the register model of the AXI DMA
(generators.runtime.dma.AxiDmaRegs) with the golden PL top behind it and DDR buffers that are
not zeroed. The tokens and every engine output word must equal the golden backend's.
Prints one JSON line.
"""
import json
import sys
import tempfile

import numpy as np
import pynq
from pynq.lib.dma import _SDMAChannel

from generators.runtime import Decoder, convert, load_checkpoint, make_backend
from generators.runtime.backends import DmaTimeout, model_dma_backend
from generators.runtime.checkpoint import EngineConfig
from generators.runtime.synthetic import TINY, write_checkpoint


def main():
    d = tempfile.mkdtemp()
    eng = EngineConfig(max_k=512, max_context=16)
    write_checkpoint(d, TINY, seed=3)
    ck = load_checkpoint(d, eng)
    res = {"pynq": pynq.__version__, "numpy": np.__version__}
    for fmt in ("int8", "ternary"):
        m = convert(ck, fmt, eng)
        t_gold, t_pynq = [], []
        g = list(Decoder(m, make_backend("golden", m), trace=t_gold).generate(
            [5, 6, 7], 4, temperature=1.0, top_k=40, seed=1))
        be = model_dma_backend(m, channel_cls=_SDMAChannel)
        assert type(be.dmas[0].sendchannel) is _SDMAChannel
        p = list(Decoder(m, be, trace=t_pynq).generate([5, 6, 7], 4, temperature=1.0, top_k=40,
                                                     seed=1))
        same = len(t_gold) == len(t_pynq) and all(
            a[:3] == b[:3] and len(a[3]) == len(b[3])
            and all(np.array_equal(x, y) for x, y in zip(a[3], b[3]))
            for a, b in zip(t_gold, t_pynq))
        res[fmt] = {"golden": g, "pynq": p, "calls": len(t_pynq), "identical": bool(same)}
    # a DMA that never finishes: the recv channel armed, nothing sent -> DmaTimeout
    be.timeout_s = 0.2
    try:
        be._run([], [(0, be.out[0])])
        res["timeout"] = "no exception"
    except DmaTimeout as exc:
        res["timeout"] = str(exc)
    print(json.dumps(res))


if __name__ == "__main__":
    sys.exit(main())
