"""The C library's second core (generators/runtime/host/csrc/tphwork.c): the argmax by halves
(the C loop's tph_loop_argmax) against numpy.argmax on every argmax case of the host vectors, on a
worker thread and on the serial fallback, in this process (x86-64); many jobs in a row (the
handshake under load); the worker started and joined again. The same cases run on ARMv7 under
qemu-arm and against a wrong combination in tests/runtime/host/test_hostops.py (the vectors'
C program); the decoder with 1 and 2 threads in tests/runtime/engines/test_hostloop.py.
"""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

from generators.runtime.host import clib as hostlib
from generators.runtime.host import vectors as hostvectors

_P, _U, _I = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int32


def _lib():
    ops, why = hostlib.load()
    if ops is None:
        pytest.fail(f"the C host kernels are not available: {why} (make setup builds them)")
    lib = ops.lib
    for fn, res, args in (("tph_worker_bytes", _U, []), ("tph_worker_start", _U, [_P, _U, _U]),
                          ("tph_worker_stop", None, [_P]), ("tph_worker_threads", _U, [_P]),
                          ("tph_argmax_halves", _I, [_P, _P, _U, _U])):
        f = getattr(lib, fn)
        f.restype, f.argtypes = res, args
    return lib


class _Worker:
    def __init__(self, lib, threads: int):
        self.lib = lib
        self.mem = np.zeros(lib.tph_worker_bytes() + 64, np.uint8)
        self.ptr = self.mem.ctypes.data + (-self.mem.ctypes.data % 64)
        self.threads = lib.tph_worker_start(self.ptr, threads, 20000)

    def argmax(self, x: np.ndarray, last: int = 1) -> int:
        return int(self.lib.tph_argmax_halves(self.ptr, x.ctypes.data, x.size, last))

    def stop(self):
        self.lib.tph_worker_stop(self.ptr)


@pytest.fixture(params=[2, 1], ids=["2 threads", "serial"])
def worker(request):
    w = _Worker(_lib(), request.param)
    assert w.threads == request.param
    yield w
    w.stop()
    assert w.lib.tph_worker_threads(w.ptr) == 1


ARGMAX_CASES = [inp["x"] for k, inp in hostvectors.cases(seed=1) if k == "argmax"]


def test_argmax_by_halves_equals_numpy(worker):
    """Every argmax case (random rows, NaN and infinity, zeros of both signs, subnormal maxima,
    and argmax_split_cases: ties across the halves, NaN in one half or both) gives
    numpy.argmax's index, through both halves and their combination."""
    split = hostvectors.argmax_split_cases()
    assert len(ARGMAX_CASES) > len(split)
    for i, x in enumerate(ARGMAX_CASES):
        assert worker.argmax(x, i % 2) == int(np.argmax(x)), i


def test_the_split_cases_need_the_first_half_on_a_tie():
    """The split cases can fail: combined as a mutant would (the second half's maximum on a
    tie), numpy's index is missed on many of them."""
    wrong = 0
    for x in hostvectors.argmax_split_cases():
        h = (x.size // 2) & ~7
        if not h:
            continue
        i0, i1 = int(np.argmax(x[:h])), h + int(np.argmax(x[h:]))
        pair = np.array([x[i0], x[i1]], np.float32)
        second = int(np.argmax(pair)) == 1 or pair[0] == pair[1]
        wrong += (i1 if second else i0) != int(np.argmax(x))
    assert wrong >= 20


def test_many_jobs_in_a_row(worker):
    """2,000 rows one after the other, the worker told to sleep after every third: each index
    numpy's (a lost or stale half would show)."""
    rng = np.random.default_rng(5)
    for k in range(2000):
        n = int(rng.integers(16, 3000))
        x = rng.standard_normal(n).astype(np.float32)
        x[int(rng.integers(0, n))] = np.float32(9.0)
        assert worker.argmax(x, int(k % 3 == 0)) == int(np.argmax(x)), k


def test_the_worker_starts_and_stops_again():
    lib = _lib()
    w = _Worker(lib, 2)
    x = np.arange(100, dtype=np.float32)
    for _ in range(20):
        assert w.threads == 2 and w.argmax(x) == 99
        w.stop()
        w.stop()                                  # idempotent
        assert w.argmax(x) == 99                  # the serial fallback after it
        w.threads = lib.tph_worker_start(w.ptr, 2, 100)
    w.stop()
    # a worker's memory must be 64-byte aligned: refused otherwise
    assert lib.tph_worker_start(w.ptr + 16, 2, 100) == 0
