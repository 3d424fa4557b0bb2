"""Exact rational arithmetic the tests use as an independent model (no project code)."""
from __future__ import annotations

from fractions import Fraction

import numpy as np


def f32_nearest(v: Fraction) -> np.float32:
    """The float32 nearest the rational v, ties to even, computed from rationals (v in
    float32's normal range, or 0)."""
    if v == 0:
        return np.float32(0.0)
    a = abs(v)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    assert -126 <= e <= 127, "outside float32's normal range"
    ulp = Fraction(2) ** (e - 23)
    n, r = divmod(a, ulp)
    if r > ulp / 2 or (r == ulp / 2 and n % 2):
        n += 1
    return np.float32(float(n * ulp) * (1 if v > 0 else -1))    # exact: n has at most 25 bits


def f32_bits(v: Fraction) -> int:
    """float32 bits of :func:`f32_nearest` (v = 0: +0)."""
    return int(f32_nearest(v).view(np.uint32))
