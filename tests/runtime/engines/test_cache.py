"""The cached results region (docs/runtime.md 4.1, issue 28 item 4): the DMAs write the result
slots into DDR, the CPU reads them through its data cache, invalidated by range before each
read. The DDR model (regmodel.Memory, ``cpu_cache``) holds every line of the region in the
CPU's own copy, stale until an invalidate refreshes it, so:

* both loops (Python over ``DmaRuntime.invalidate``, C over ``tph_io.sync``) give, bit for bit,
  the engine words, logits and tokens of a run whose results the CPU reads straight from DDR
  (the region uncached: the runtime before), on golden INT8, ternary and Q4_1 and on a 2-row
  pass;
* a loop that skips the invalidate, or invalidates one line short, reads stale words (garbage
  or the previous layer's answers) and fails: the engine's status word is checked, so it
  raises EngineError;
* a partial line is refused by the model (Linux would clean and invalidate it whole), and by
  the replay device's C sync.
"""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

from generators.runtime import Decoder, convert, load_checkpoint, make_backend
from generators.runtime.engines import cloop as hostloop
from generators.runtime.engines.regmodel import LINE, Memory
from generators.runtime.engines.runtime import DmaRuntime
from generators.runtime.errors import EngineError
from generators.runtime.host import ops as hostops
from generators.runtime.model.checkpoint import EngineConfig
from generators.runtime.model.synthetic import TINY, write_checkpoint

ENG = EngineConfig(max_k=512, max_context=32)
PROMPT = [1, 2, 3]

MODEL_SEED = 2


@pytest.fixture(scope="module")
def models(c_models):
    return c_models


def _uncached(monkeypatch):
    """The DDR model without the CPU's cache: every buffer a view of DDR (the runtime before
    the results region was cached: its reads see what the DMAs wrote, invalidate or not)."""
    real = Memory.allocate

    def allocate(self, shape, dtype=np.uint8, cacheable=True, cpu_cache=False):
        return real(self, shape, dtype, cacheable, False)
    monkeypatch.setattr(Memory, "allocate", allocate)


def _generate(m, loop, vectors=None, rows=False):
    """Tokens, engine words and logits of a generation on golden (``rows``: the prompt in
    2-row passes, the batched step), and the runtime."""
    be = make_backend("golden", m, vectors=vectors)
    trace, logits = [], []
    with hostops.using("numpy" if loop == "python" else "c"):
        dec = Decoder(m, be, trace=trace, loop=loop)
        dec.chunk = 2 if rows else 1
        toks = list(dec.generate(PROMPT, 4, on_token=lambda i, t, lg: logits.append(lg.copy())))
    return toks, trace, logits, be


def _same(a, b):
    ta, tra, la, _ = a
    tb, trb, lb, _ = b
    assert ta == tb
    assert len(tra) == len(trb) > 0
    for x, y in zip(tra, trb):
        assert x[:3] == y[:3] and all(np.array_equal(u, v) for u, v in zip(x[3], y[3])), x[:3]
    assert len(la) == len(lb) and all(np.array_equal(u.view(np.uint32), v.view(np.uint32))
                                      for u, v in zip(la, lb))


@pytest.mark.parametrize("fmt, loop, rows", [("int8", "python", False), ("int8", "c", False),
                                             ("ternary", "c", False), ("q4", "c", False),
                                             ("q4", "python", True), ("q4", "c", True)])
def test_cached_results_equal_the_uncached_reads_bit_for_bit(models, monkeypatch, fmt, loop,
                                                              rows):
    m = models[fmt]
    V = 2 if rows else None
    cached = _generate(m, loop, V, rows)
    be = cached[3]
    assert be.results.cached and be.plan.regions["results"].cacheable
    # every result word read was invalidated first, in whole lines, once per slot read
    tot = be.cache_total
    assert tot["invalidates"] > 0 and tot["invalidated"] % LINE == 0
    assert tot["read"] <= tot["invalidated"] < tot["read"] + LINE * tot["invalidates"]
    if loop == "python":
        assert be.memory.invalidates == tot["invalidates"]
    with monkeypatch.context() as mp:
        _uncached(mp)
        before = _generate(m, loop, V, rows)
    assert not before[3].results.cached
    _same(cached, before)


def test_both_loops_count_the_same_invalidates(models):
    m = models["q4"]
    counts = {}
    for loop in ("python", "c"):
        _, _, _, be = _generate(m, loop)
        counts[loop] = (dict(be.cache_total), dict(be.cpu_total))
    assert counts["python"] == counts["c"]


def _mutant_python(monkeypatch, short: bool):
    """The Python loop without its invalidate, or with one a line short."""
    real = DmaRuntime.invalidate

    def invalidate(self, offset, n):
        if short:
            n = -(-n // LINE) * LINE - LINE
            if n > 0:
                real(self, offset, n)
    monkeypatch.setattr(DmaRuntime, "invalidate", invalidate)


def _mutant_c(be, short: bool):
    """The C loop's tph_io.sync without effect, or a line short of what the loop asks."""
    cl = hostloop.for_runtime(be)
    real = hostloop._SYNC(cl.io.sync)              # the DDR model's callback, by address

    def sync(handle, bo, direction, size, offset):
        if short and size > LINE:
            return real(handle, bo, direction, size - LINE, offset)
        return 0
    cl._mutant = (real, hostloop._SYNC(sync))      # kept alive with the loop
    cl.io.sync = ctypes.cast(cl._mutant[1], ctypes.c_void_p).value


@pytest.mark.parametrize("loop", ["python", "c"])
@pytest.mark.parametrize("short", [False, True], ids=["no-invalidate", "a-line-short"])
def test_a_missing_or_short_invalidate_reads_stale_words_and_fails(models, monkeypatch, loop,
                                                                   short):
    m = models["int8"]
    be = make_backend("golden", m)
    if loop == "python":
        _mutant_python(monkeypatch, short)
    else:
        _mutant_c(be, short)
    with hostops.using("numpy" if loop == "python" else "c"):
        with pytest.raises(EngineError):
            list(Decoder(m, be, loop=loop).generate(PROMPT, 2))


def test_the_model_refuses_a_partial_line_and_reads_stale_until_invalidated():
    mem = Memory(None, 1 << 16)
    a = mem.allocate((256,), np.uint8, cacheable=True, cpu_cache=True)
    mem.write(a.physical_address, np.arange(256, dtype=np.uint8))    # a DMA's write
    assert (a == 0xA5).all()                                         # the CPU's stale lines
    a[32:64].invalidate()
    assert np.array_equal(a[32:64], np.arange(32, 64)) and (a[:32] == 0xA5).all() \
        and (a[64:] == 0xA5).all()
    for lo, hi in ((0, 48), (16, 64), (40, 72)):
        with pytest.raises(ValueError, match="whole 32-byte lines"):
            a[lo:hi].invalidate()
    b = mem.allocate((64,), np.uint8, cacheable=False)               # uncached: DDR itself
    mem.write(b.physical_address, np.ones(64, np.uint8))
    assert (b == 1).all()


def test_the_replay_devices_sync_refuses_a_partial_line():
    lib, _ = hostloop.load_library()
    dev = np.zeros(lib.tph_replay_bytes() + 16, np.uint8)
    ptr = dev.ctypes.data + (-dev.ctypes.data % 16)
    ddr = np.arange(4096, dtype=np.uint32).view(np.uint8).copy()
    cpu = np.full(1024, 0xA5, np.uint8)
    lib.tph_replay_init(ptr, ddr.ctypes.data, 0x1000_0000, ddr.nbytes)
    lib.tph_replay_cache(ptr, cpu.ctypes.data, 0x1000_0000 + 2048, cpu.nbytes)
    assert lib.tph_replay_sync(ptr, 0, 1, 64, 32) == 0
    assert np.array_equal(cpu[32:96], ddr[2048 + 32:2048 + 96]) and (cpu[:32] == 0xA5).all() \
        and (cpu[96:] == 0xA5).all()
    for size, off, direction in ((48, 0, 1), (32, 16, 1), (32, 1024, 1), (32, 0, 0)):
        assert lib.tph_replay_sync(ptr, 0, direction, size, off) == -1, (size, off, direction)
