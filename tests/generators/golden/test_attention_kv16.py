"""The golden attention model's ``kv_bits`` (a model of a 16-bit KV engine, issue 32 item 5):
the default is today's INT8 arithmetic; 16-bit K and V need W <= 21 and F <= 16 at L <= 2048.

Run: .venv/bin/python -m pytest tests/generators/golden/test_attention_kv16.py -q
"""
from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np
import pytest

from generators.golden import attention as att

KV16 = dataclasses.replace(att.DEFAULT_CONFIG, exp_width=21, scale_frac_bits=16)


def _inputs(rng, L, kv_max):
    G, d = att.DEFAULT_CONFIG.heads_per_group, att.DEFAULT_CONFIG.head_dim
    q = rng.integers(-127, 128, (G, d))
    K = rng.integers(-kv_max, kv_max + 1, (L, d))
    V = rng.integers(-kv_max, kv_max + 1, (L, d))
    return q, K, V


def test_widths():
    att.kv_widths_ok(att.DEFAULT_CONFIG)                     # today's INT8
    att.kv_widths_ok(dataclasses.replace(att.DEFAULT_CONFIG, max_context=65535))
    att.kv_widths_ok(KV16, 16)
    with pytest.raises(ValueError, match="acc needs 49 bits"):
        att.kv_widths_ok(dataclasses.replace(KV16, exp_width=22), 16)
    with pytest.raises(ValueError, match="Z reaches"):
        att.kv_widths_ok(dataclasses.replace(KV16, scale_frac_bits=17), 16)
    with pytest.raises(ValueError):
        att.attention_core(*_inputs(np.random.default_rng(0), 4, 100), 1000, 20, kv_bits=16)


def test_int8_range_is_the_same_arithmetic():
    """kv_bits only widens the accepted range: on INT8 codes every value is today's."""
    rng = np.random.default_rng(1)
    q, K, V = _inputs(rng, 37, 127)
    a = att.attention_core(q, K, V, 40000, 20, KV16)
    b = att.attention_core(q, K, V, 40000, 20, KV16, kv_bits=16)
    for k in ("s", "idx", "p", "acc", "y"):
        assert np.array_equal(a[k], b[k])
    assert a["Z"] == b["Z"]
    with pytest.raises(ValueError, match="outside INT8"):
        att.attention_core(q, K * 200, V, 40000, 20, KV16)


def test_int16_extremes():
    """Full-scale 16-bit K and V at the largest context: acc within 48 bits, Z within 32, y the
    exact RNE of 127 acc / A, Z = A / S * 2^16 rounded half up."""
    rng = np.random.default_rng(2)
    L = KV16.max_context
    q, K, V = _inputs(rng, L, 32767)
    V[:, 0] = -32767                                        # a full-scale column
    core = att.attention_core(q, K, V, 1, 47, KV16, kv_bits=16)   # every weight full scale
    assert np.all(core["p"] == (1 << 21) - 1)
    assert int(np.abs(core["acc"]).max()).bit_length() + 1 <= 48
    assert all(0 <= z < 1 << 31 for z in core["Z"])
    for g in range(KV16.heads_per_group):
        A, S = int(core["A"][g]), int(core["S"][g])
        assert core["Z"][g] == int(Fraction(A, S) * (1 << 16) + Fraction(1, 2))
        for i in range(0, KV16.head_dim, 7):
            assert core["y"][g, i] == round(Fraction(127 * int(core["acc"][g, i]), A))
