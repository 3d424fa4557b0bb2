"""Activation vectors the per-block (Q8_0 / Q8_1) tests share: SmolLM2-like random ones and a
hand-made set of blocks with the quantisers' edge cases."""
from __future__ import annotations

import numpy as np

F32 = np.float32


def activations(rng, n: int) -> np.ndarray:
    """SmolLM2-like hidden state: normal values and a few large channels."""
    x = rng.standard_normal(n).astype(F32)
    x[rng.integers(0, n, 3)] *= 40
    return x


def hand_x() -> np.ndarray:
    """Four blocks of 32: ties of x * id, a zero block, and a step whose fp16 is a tie."""
    x = np.zeros(4 * 32, F32)
    # block 0: amax 127, so d = 1 and id = 1; the ties go away from zero (rint would give 0, 2)
    x[0:9] = [127, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, -127, 63.49]
    # block 1: amax 254, d = 2, id = 0.5
    x[32:37] = [254, 1, 4, -4, 6]
    # block 2: all zero: d = 0, id = 0, codes 0
    # block 3: d = 1 + 2^-11 in float32 (exact: 127.06201171875 / 127); its fp16 is the tie
    # 1.0 (to even), while s = fp16(127 * d) uses the float32 d: 127.0620..., fp16 127.0625
    x[96] = 127.06201171875
    return x
