"""Contents of the attention engine's softmax exp table (docs/attention.md, section 4).

One function, :func:`exp_table`, produces the table. The Verilog template (BRAM init) and the
golden model (``generators/golden/attention.py``) both call it, so they cannot disagree; the
table is then measured against the ideal exponential by :func:`exp_table_error`, because a
golden model that copies the hardware proves nothing about accuracy (DESIGN.md section 7).

Entry ``i`` is the weight of a score that lies ``i`` table steps below the row maximum:

    table[i] = RNE((2**width - 1) * 2**(-i / steps_per_octave))

with ``RNE`` round-half-to-even. Where ``i`` is a whole number of octaves the value is the
rational ``(2**width - 1) / 2**(i / steps_per_octave)`` and is rounded exactly (the ``.5`` tie
at one octave goes to even); elsewhere it is irrational, never a tie, and is computed in
``decimal`` arithmetic with 60 significant digits (``Decimal.exp`` is correctly rounded), so
the table is the same on every machine and libm.
"""
from __future__ import annotations

import functools
import math
from decimal import ROUND_FLOOR, ROUND_HALF_EVEN, Decimal, localcontext
from fractions import Fraction

__all__ = ["exp_table", "exp_table_error", "check_table_params", "TABLE_LIMITS"]

# Hardware limits of the parameters (docs/attention.md): the weight p feeds the 25-bit signed
# A port of a DSP48E1, so width <= 24; the index is at most 16 bits wide.
TABLE_LIMITS = {"depth": (2, 1 << 16), "width": (2, 24), "steps_per_octave": (1, 1 << 12)}

_DIGITS = 60


def check_table_params(depth: int, width: int, steps_per_octave: int) -> None:
    """Raise ValueError for table parameters outside :data:`TABLE_LIMITS`."""
    for name, value in (("depth", depth), ("width", width),
                        ("steps_per_octave", steps_per_octave)):
        lo, hi = TABLE_LIMITS[name]
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"exp table {name} must be an int, got {value!r}")
        if not lo <= value <= hi:
            raise ValueError(f"exp table {name} = {value} is outside [{lo}, {hi}]")


def exp_table(depth: int, width: int, steps_per_octave: int) -> list[int]:
    """The exp table: ``depth`` unsigned ``width``-bit entries, ``steps_per_octave`` per halving.

    ``table[0] = 2**width - 1`` (the row maximum); the entries never increase.
    """
    check_table_params(depth, width, steps_per_octave)
    return list(_exp_table(depth, width, steps_per_octave))


@functools.lru_cache(maxsize=16)
def _exp_table(depth: int, width: int, steps_per_octave: int) -> tuple[int, ...]:
    full = (1 << width) - 1
    out = []
    with localcontext() as ctx:
        ctx.prec = _DIGITS
        ln2 = Decimal(2).ln()
        for i in range(depth):
            octaves, r = divmod(i, steps_per_octave)
            if r == 0:
                # exact: full / 2**octaves, a rational, so a .5 tie is decided exactly
                out.append(round(Fraction(full, 1 << octaves)))
                continue
            # 2**(-r/spo) with 0 < r < spo is irrational: the value is never a tie, and 60
            # digits decide the rounding (checked: the value is not within 1e-40 of a tie)
            x = (Decimal(-r) * ln2 / Decimal(steps_per_octave)).exp() * full
            x = x / (1 << octaves)
            frac = x - x.to_integral_value(rounding=ROUND_FLOOR)
            if abs(frac - Decimal("0.5")) < Decimal("1e-40"):
                raise ArithmeticError(f"exp table entry {i} too close to a rounding tie")
            out.append(int(x.to_integral_value(rounding=ROUND_HALF_EVEN)))
    return tuple(out)


def exp_table_error(depth: int, width: int, steps_per_octave: int) -> dict:
    """Measure the table against ideal ``exp``.

    Returned keys:

    * ``abs_lsb_max``: largest ``|table[i] - ideal(i)|`` in table LSBs (entry rounding alone,
      at most 0.5),
    * ``rel_max_where_ge_half``: largest relative entry error among entries >= 2**(width-1)
      (the entries that carry most of the weight),
    * ``step_rel_max``: largest relative error of a weight caused by rounding a real index to
      the nearest table step, ``2**(0.5/steps_per_octave) - 1``,
    * ``range_octaves``: ``depth / steps_per_octave``, how far below the maximum the table
      reaches before the weight becomes 0,
    * ``tail_entry``: ``table[depth-1]``; ``tail_ideal``: the ideal weight (in table LSBs) of
      the first index past the end, which the engine replaces by 0,
    * ``monotone``: entries never increase.
    """
    t = exp_table(depth, width, steps_per_octave)
    full = (1 << width) - 1
    abs_err = 0.0
    rel_hi = 0.0
    for i, v in enumerate(t):
        ideal = full * 2.0 ** (-i / steps_per_octave)
        abs_err = max(abs_err, abs(v - ideal))
        if v >= (1 << (width - 1)):
            rel_hi = max(rel_hi, abs(v - ideal) / ideal)
    return {
        "depth": depth,
        "width": width,
        "steps_per_octave": steps_per_octave,
        "abs_lsb_max": abs_err,
        "rel_max_where_ge_half": rel_hi,
        "step_rel_max": math.expm1(0.5 * math.log(2) / steps_per_octave),
        "range_octaves": depth / steps_per_octave,
        "tail_entry": t[-1],
        "tail_ideal": full * 2.0 ** (-depth / steps_per_octave),
        "monotone": all(a >= b for a, b in zip(t, t[1:])),
    }
