"""The golden attention model's ``AttentionConfig.kv_bits`` (the 16-bit KV engine, issue 32
item 5): the default is the INT8 arithmetic; 16-bit K and V need W <= 21 and F <= 16 at
L <= 2048; INT16 frames carry two bytes an element and the KV format code 1.

Run: .venv/bin/python -m pytest tests/generators/golden/test_attention_kv16.py -q
"""
from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np
import pytest

from generators.golden import attention as att

KV16 = att.AttentionConfig(exp_width=21, scale_frac_bits=16, kv_bits=16)
#: the INT8 engine's arithmetic at KV16's table and Z widths
KV8N = dataclasses.replace(KV16, kv_bits=8)


def _inputs(rng, L, kv_max):
    G, d = att.DEFAULT_CONFIG.heads_per_group, att.DEFAULT_CONFIG.head_dim
    q = rng.integers(-127, 128, (G, d))
    K = rng.integers(-kv_max, kv_max + 1, (L, d))
    V = rng.integers(-kv_max, kv_max + 1, (L, d))
    return q, K, V


def test_widths():
    att.kv_widths_ok(att.DEFAULT_CONFIG)                     # today's INT8
    att.kv_widths_ok(dataclasses.replace(att.DEFAULT_CONFIG, max_context=65535))
    att.kv_widths_ok(KV16)
    with pytest.raises(ValueError, match="acc needs 49 bits"):
        dataclasses.replace(KV16, exp_width=22)
    with pytest.raises(ValueError, match="Z reaches"):
        dataclasses.replace(KV16, scale_frac_bits=17)
    with pytest.raises(ValueError, match="acc needs 51 bits"):   # the INT8 defaults
        att.AttentionConfig(kv_bits=16)
    with pytest.raises(ValueError, match="must be 8 or 16"):
        att.AttentionConfig(kv_bits=12)
    assert (KV16.row_beats, KV16.kv_per_beat, KV16.macs_per_clock, KV16.kv_code) == (16, 4, 12, 1)
    assert (KV16.score_bits, KV16.z_bits) == (30, 32)
    assert (att.DEFAULT_CONFIG.score_bits, att.DEFAULT_CONFIG.z_bits) == (22, 32)


def test_int8_range_is_the_same_arithmetic():
    """kv_bits only widens the accepted range: on INT8 codes every value is today's."""
    rng = np.random.default_rng(1)
    q, K, V = _inputs(rng, 37, 127)
    a = att.attention_core(q, K, V, 40000, 20, KV8N)
    b = att.attention_core(q, K, V, 40000, 20, KV16)
    for k in ("s", "idx", "p", "acc", "y"):
        assert np.array_equal(a[k], b[k])
    assert a["Z"] == b["Z"]
    with pytest.raises(ValueError, match="outside INT8"):
        att.attention_core(q, K * 200, V, 40000, 20, KV8N)
    with pytest.raises(ValueError, match="outside INT16"):
        att.attention_core(q, K * 300, V, 40000, 20, KV16)


def test_int16_extremes():
    """Full-scale 16-bit K and V at the largest context: acc within 48 bits, Z within 32, y the
    exact RNE of 127 acc / A, Z = A / S * 2^16 rounded half up."""
    rng = np.random.default_rng(2)
    L = KV16.max_context
    q, K, V = _inputs(rng, L, 32767)
    V[:, 0] = -32767                                        # a full-scale column
    core = att.attention_core(q, K, V, 1, 47, KV16)   # every weight full scale
    assert np.all(core["p"] == (1 << 21) - 1)
    assert int(np.abs(core["acc"]).max()).bit_length() + 1 <= 48
    assert all(0 <= z < 1 << 31 for z in core["Z"])
    for g in range(KV16.heads_per_group):
        A, S = int(core["A"][g]), int(core["S"][g])
        assert core["Z"][g] == int(Fraction(A, S) * (1 << 16) + Fraction(1, 2))
        for i in range(0, KV16.head_dim, 7):
            assert core["y"][g, i] == round(Fraction(127 * int(core["acc"][g, i]), A))


def test_int16_frame_layout():
    """An INT16 frame: the scale words' byte 3 is 1, each K and V element two bytes
    little-endian (16 beats a row of 64 at 8-byte beats), and the frame's output is the core's
    arithmetic on those values, computed here from the bytes by hand."""
    rng = np.random.default_rng(3)
    L = 5
    q, K, V = _inputs(rng, L, 32767)
    data = att.build_attention_frame(q, K, V, 3000, 30, tag=0x5A, cfg=KV16)
    d, G = KV16.head_dim, KV16.heads_per_group
    assert len(data) == att.frame_beat_count(L, KV16) * 8 == (3 + 24 + 2 * L * 16) * 8
    for g in range(G):
        assert data[8 + 4 * g + 3] == 1
    rows = data[(3 + 24) * 8:]
    t, i = 3, 17                                   # V row 3, element 17
    off = (L + t) * 2 * d + 2 * i
    assert int.from_bytes(rows[off:off + 2], "little", signed=True) == V[t, i]
    words = att.frame_output(att.frame_to_beats(data), KV16)
    assert words == att.attention_frame(q, K, V, 3000, 30, 0x5A, KV16)
    out = att.decode_output(words, KV16)
    assert out["flags"] == 0 and out["count"] == G * d // 4 + G and out["tag"] == 0x5A


@pytest.mark.parametrize("code, cfg", [(0, KV16), (1, att.DEFAULT_CONFIG), (2, KV16)])
def test_kv_format_code_mismatch_is_bad_format(code, cfg):
    """A frame whose KV format code is not the engine's is refused with BAD_FORMAT alone."""
    rng = np.random.default_rng(4)
    q, K, V = _inputs(rng, 3, 100)
    data = att.build_attention_frame(q, K, V, 3000, 30, tag=7, cfg=cfg, reserved=code)
    assert att.frame_output(att.frame_to_beats(data), cfg) == [
        att.status_word(7, att.FLAG_BAD_FORMAT, 0)]
