"""Host-side speed of generators.packing (measured, wall clock): `make report` section 2c.

Speed is a figure of the report, not a test (no wall-clock asserts in tests): the round trip
itself is checked by tests/generators/test_packing.py. What matters on the board is how fast the
Cortex-A9 can pack a matrix before it streams; this measures the machine that runs the report.
"""
from __future__ import annotations

import time
from typing import Dict, List

import numpy as np

from ..packing import pack_trits, unpack_trits


def measure(n: int = 10 ** 7, repeats: int = 3, seed: int = 1) -> List[Dict]:
    """Best of `repeats` wall-clock times of pack_trits / unpack_trits on n random trits."""
    rng = np.random.default_rng(seed)
    w = rng.integers(-1, 2, size=n, dtype=np.int8)
    best = {"pack_trits": float("inf"), "unpack_trits": float("inf")}
    for _ in range(repeats):
        t0 = time.perf_counter()
        b = pack_trits(w)
        t1 = time.perf_counter()
        back = unpack_trits(b, n)
        t2 = time.perf_counter()
        if not np.array_equal(back, w):
            raise AssertionError("pack/unpack round trip lost trits")
        best["pack_trits"] = min(best["pack_trits"], t1 - t0)
        best["unpack_trits"] = min(best["unpack_trits"], t2 - t1)
    return [{"function": f, "trits": n, "seconds": s, "mtrits_per_s": n / s / 1e6}
            for f, s in best.items()]
