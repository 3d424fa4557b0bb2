"""Tests of the attention engine's exp table, golden model and error bounds (docs/attention.md).

Run: .venv/bin/python -m pytest tests/generators/golden/test_attention_model.py -q
"""
from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from generators import attention_error
from generators.attention_tables import exp_table, exp_table_error
from generators.golden import attention as att
from generators.golden.attention import (
    DEFAULT_CONFIG, FLAG_BAD_FORMAT, FLAG_BAD_MAGIC, FLAG_BAD_SHAPE, FLAG_LONG_FRAME,
    FLAG_SHORT_FRAME, AttentionConfig, attention_core, attention_frame, build_attention_frame,
    decode_output, dequantise, frame_beat_count, frame_to_beats, pack_header, score_multiplier,
    status_word, stream_outputs,
)

# A configuration small enough to check by hand: 1 head of 4, table of 8 entries, 1 per octave.
TINY = AttentionConfig(heads_per_group=1, head_dim=4, max_context=4, exp_depth=8, exp_width=8,
                       exp_steps_per_octave=1, scale_frac_bits=8)


def rne(x: Fraction) -> int:
    """Round half to even of an exact rational (Python's round on Fraction does exactly this)."""
    return round(x)


def rand_case(rng, cfg, L):
    G, d = cfg.heads_per_group, cfg.head_dim
    return (rng.integers(-128, 128, (G, d)), rng.integers(-128, 128, (L, d)),
            rng.integers(-128, 128, (L, d)))


def one_frame(data: bytes, cfg=DEFAULT_CONFIG):
    beats = frame_to_beats(data, cfg.beat_bytes)
    return beats, [False] * (len(beats) - 1) + [True]


# --------------------------------------------------------------------------- exp table

def test_exp_table_by_hand():
    # 255 * 2**-i rounded half to even: 127.5 -> 128, 63.75 -> 64, 31.875 -> 32, ...
    assert exp_table(8, 8, 1) == [255, 128, 64, 32, 16, 8, 4, 2]
    # two steps per octave: 255 / sqrt(2) = 180.31 -> 180, 255 / 2 = 127.5 -> 128
    assert exp_table(4, 8, 2) == [255, 180, 128, 90]


def test_exp_table_exact_ties_and_float_agreement():
    # one octave down: (2**24 - 1) / 2 = 8388607.5 exactly, a tie that goes to even
    t = exp_table(4096, 24, 170)
    assert t[170] == 8388608 and t[340] == 4194304  # 4194303.75 -> 4194304
    full = (1 << 24) - 1
    ideal = full * np.exp2(-np.arange(4096) / 170)
    assert np.abs(np.array(t) - ideal).max() <= 0.5 + 1e-6


def test_default_exp_table_properties():
    cfg = DEFAULT_CONFIG
    t = exp_table(cfg.exp_depth, cfg.exp_width, cfg.exp_steps_per_octave)
    assert len(t) == cfg.exp_depth
    assert t[0] == (1 << cfg.exp_width) - 1
    assert all(a >= b for a, b in zip(t, t[1:]))
    assert t[-1] >= 1  # the table ends where its entries reach 1 LSB, not earlier
    err = exp_table_error(cfg.exp_depth, cfg.exp_width, cfg.exp_steps_per_octave)
    assert err["abs_lsb_max"] <= 0.5
    assert err["monotone"]
    assert err["step_rel_max"] < 0.0021
    assert err["tail_ideal"] < 1.0  # the first index past the end is worth under 1 LSB


@pytest.mark.parametrize("bad", [dict(width=25), dict(width=1), dict(depth=1),
                                 dict(steps_per_octave=0), dict(depth=2.5)])
def test_exp_table_rejects_bad_parameters(bad):
    kw = dict(depth=64, width=16, steps_per_octave=8) | bad
    with pytest.raises(ValueError):
        exp_table(**kw)


def test_config_rejects_bad_parameters():
    for bad in (dict(head_dim=6), dict(beat_bytes=4), dict(max_context=0),
                dict(exp_width=25), dict(scale_frac_bits=25), dict(heads_per_group=0)):
        with pytest.raises(ValueError):
            dataclasses.replace(DEFAULT_CONFIG, **bad)


# --------------------------------------------------------------------------- arithmetic

def test_hand_checked_frame():
    q = [[1, 0, 0, 0]]
    K = [[3, 0, 0, 0], [2, 5, 5, 5], [0, -1, -1, -1], [-20, 0, 0, 0]]
    V = [[10, -10, 0, 127], [20, 0, -128, 1], [-40, 8, 0, 0], [127, 127, 127, 127]]
    core = attention_core(q, K, V, mult=1, shift=0, cfg=TINY)
    # s = 3, 2, 0, -20; max 3; e = 0, 1, 3, 23; idx = e; idx 23 >= depth 8 gives weight 0
    assert core["s"].tolist() == [[3, 2, 0, -20]]
    assert core["idx"].tolist() == [[0, 1, 3, 23]]
    assert core["p"].tolist() == [[255, 128, 32, 0]]
    assert core["S"].tolist() == [415]
    # acc = 255*V0 + 128*V1 + 32*V2
    assert core["acc"].tolist() == [[3830, -2294, -16384, 32513]]
    # 127*acc/32513 = 14.960, -8.961, -63.998, 127
    assert core["y"].tolist() == [[15, -9, -64, 127]]
    # Z = 32513 / 415 * 2**8 = 20056.2 -> 20056
    assert core["Z"] == [20056]
    words = attention_frame(q, K, V, 1, 0, tag=0x42, cfg=TINY)
    assert words == [0x7FC0F70F, 20056, 0x42 | (2 << 16)]


def test_hand_checked_index_rounding():
    q = [[1, 0, 0, 0]]
    K = [[3, 0, 0, 0], [2, 0, 0, 0], [0, 0, 0, 0], [1, 0, 0, 0]]
    V = [[1, 0, 0, 0]] * 4
    core = attention_core(q, K, V, mult=3, shift=2, cfg=TINY)
    # e = 0, 1, 3, 2; idx = (3e + 2) >> 2 = 0, 1, 2, 2 (0.75 -> 1, 2.25 -> 2, 1.5 -> 2)
    assert core["idx"].tolist() == [[0, 1, 2, 2]]
    assert core["p"].tolist() == [[255, 128, 64, 64]]


def test_rne_ties_go_to_even():
    # all scores equal, two rows: acc = 255 * (v0 + v1); A = 255 * 254
    cfg = TINY
    q = [[0, 0, 0, 0]]
    K = [[0] * 4, [0] * 4]
    V = [[127, 0, 2, -2], [127, 1, 1, -3]]  # column sums 254, 1, 3, -5
    y = attention_core(q, K, V, 0, 0, cfg)["y"].tolist()[0]
    # 127 * (254, 1, 3, -5) / 254 = 127, 0.5, 1.5, -2.5  ->  127, 0, 2, -2
    assert y == [127, 0, 2, -2]


def test_context_one_returns_v_requantised():
    rng = np.random.default_rng(1)
    q, K, V = rand_case(rng, DEFAULT_CONFIG, 1)
    core = attention_core(q, K, V, *score_multiplier(1e-4), cfg=DEFAULT_CONFIG)
    v = [int(x) for x in V[0]]
    amax = max(abs(x) for x in v)
    expect = [rne(Fraction(127 * x, amax)) for x in v]
    for g in range(DEFAULT_CONFIG.heads_per_group):
        assert core["y"][g].tolist() == expect
        assert core["Z"][g] == amax << DEFAULT_CONFIG.scale_frac_bits


@pytest.mark.parametrize("L", [1, 2, 7, 300, 2048])
def test_equal_scores_give_mean_of_v(L):
    rng = np.random.default_rng(L)
    cfg = DEFAULT_CONFIG
    q = rng.integers(-128, 128, (cfg.heads_per_group, cfg.head_dim))
    K = np.repeat(rng.integers(-128, 128, (1, cfg.head_dim)), L, axis=0)
    V = rng.integers(-128, 128, (L, cfg.head_dim))
    core = attention_core(q, K, V, *score_multiplier(3e-4), cfg=cfg)
    col = [int(x) for x in V.sum(axis=0)]
    amax = max(abs(x) for x in col)
    expect = [rne(Fraction(127 * x, amax)) for x in col]
    F = cfg.scale_frac_bits
    for g in range(cfg.heads_per_group):
        assert core["y"][g].tolist() == expect
        # Z = round-half-up(mean max |o| * 2**F)
        assert core["Z"][g] == int(Fraction(amax << F, L) + Fraction(1, 2))


def test_mult_zero_means_uniform_weights():
    rng = np.random.default_rng(5)
    q, K, V = rand_case(rng, DEFAULT_CONFIG, 33)
    core = attention_core(q, K, V, 0, 0)
    assert (core["p"] == (1 << DEFAULT_CONFIG.exp_width) - 1).all()


def _reference_core(q, K, V, mult, shift, cfg):
    """Independent slow reference of docs/attention.md section 4 with Python ints/Fractions."""
    table = exp_table(cfg.exp_depth, cfg.exp_width, cfg.exp_steps_per_octave)
    ys, Zs = [], []
    G = len(q)
    mult = [mult] * G if np.isscalar(mult) else mult
    shift = [shift] * G if np.isscalar(shift) else shift
    for qg, mult_g, shift_g in zip(q, mult, shift):
        s = [sum(int(a) * int(b) for a, b in zip(qg, k)) for k in K]
        m = max(s)
        p = []
        for st_ in s:
            idx = ((m - st_) * mult_g + ((1 << shift_g) >> 1)) >> shift_g
            p.append(table[idx] if idx < cfg.exp_depth else 0)
        S = sum(p)
        acc = [sum(pt * int(v[i]) for pt, v in zip(p, V)) for i in range(cfg.head_dim)]
        A = max(abs(a) for a in acc)
        ys.append([rne(Fraction(127 * a, A)) if A else 0 for a in acc])
        Zs.append(int(Fraction(A << cfg.scale_frac_bits, S) + Fraction(1, 2)))
    return ys, Zs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), L=st.integers(1, 40), mult=st.integers(0, 65535),
       shift=st.integers(0, 47), small=st.booleans())
def test_numpy_model_matches_slow_reference(seed, L, mult, shift, small):
    cfg = TINY if small else dataclasses.replace(DEFAULT_CONFIG, head_dim=16, max_context=64)
    L = min(L, cfg.max_context)
    rng = np.random.default_rng(seed)
    q, K, V = rand_case(rng, cfg, L)
    if seed % 3 == 0:  # narrow values make ties and equal scores likely
        q, K, V = (np.clip(x, -2, 2) for x in (q, K, V))
    core = attention_core(q, K, V, mult, shift, cfg)
    ys, Zs = _reference_core(q, K, V, mult, shift, cfg)
    assert core["y"].tolist() == ys
    assert core["Z"] == Zs


def test_per_head_scale_words():
    cfg = dataclasses.replace(DEFAULT_CONFIG, head_dim=16, max_context=64)
    rng = np.random.default_rng(21)
    for L in (1, 9, 64):
        q, K, V = rand_case(rng, cfg, L)
        mult = [int(x) for x in rng.integers(0, 65536, 3)]
        shift = [int(x) for x in rng.integers(10, 30, 3)]
        core = attention_core(q, K, V, mult, shift, cfg)
        assert (core["y"].tolist(), core["Z"]) == _reference_core(q, K, V, mult, shift, cfg)
        for g in range(3):  # each head only depends on its own scale word
            one = attention_core(q, K, V, mult[g], shift[g], cfg)
            assert one["y"][g].tolist() == core["y"][g].tolist()
        data = build_attention_frame(q, K, V, mult, shift, 5, cfg)
        assert stream_outputs(*one_frame(data, cfg), cfg) == [
            attention_frame(q, K, V, mult, shift, 5, cfg)]


def test_extreme_values_stay_in_range():
    cfg = DEFAULT_CONFIG
    L = cfg.max_context
    q = np.full((cfg.heads_per_group, cfg.head_dim), -128)
    K = np.full((L, cfg.head_dim), -128)
    V = np.full((L, cfg.head_dim), -128)
    core = attention_core(q, K, V, 65535, 0, cfg)
    assert core["s"].max() == cfg.head_dim * 128 * 128
    assert core["s"].max() < 2 ** (cfg.score_bits - 1)
    assert (core["y"] == -127).all()
    assert core["Z"] == [128 << cfg.scale_frac_bits] * cfg.heads_per_group
    assert max(core["Z"]) < 2**32
    words = attention_frame(q, K, V, 65535, 0, 9, cfg)
    assert all(0 <= w < 2**32 for w in words)


def test_score_multiplier():
    m, s = score_multiplier(1e-4)
    assert 2**15 <= m < 2**16 and 0 <= s <= att.MAX_SHIFT
    assert m / 2**s == pytest.approx(att.score_scale(1e-4), rel=2**-15)
    assert score_multiplier(0.0) == (0, 0)
    with pytest.raises(ValueError):
        score_multiplier(1e6)
    with pytest.raises(ValueError):
        score_multiplier(-1.0)


# --------------------------------------------------------------------------- frames

def test_header_layout():
    h = pack_header(context=0x123, mult=[0xBEEF, 0x1234, 0x8000], shift=[0x21, 0, 47],
                    tag=0x5A)
    assert len(h) == 24  # 8 + 3 * 4 bytes, padded to 3 beats
    assert int.from_bytes(h[:8], "little") == 0x5A0040_03_0123_A77E
    assert h[:2] == bytes([0x7E, 0xA7])
    assert [int.from_bytes(h[8 + 4 * g:12 + 4 * g], "little") for g in range(3)] == [
        0x0021_BEEF, 0x0000_1234, 0x002F_8000]
    assert h[20:] == bytes(4)
    h16 = pack_header(1, 7, 3, 0, dataclasses.replace(DEFAULT_CONFIG, beat_bytes=16))
    assert len(h16) == 32 and h16[8:12] == bytes([7, 0, 3, 0])


def test_frame_lengths():
    cfg = DEFAULT_CONFIG
    assert cfg.macs_per_clock == 24
    assert frame_beat_count(1) == 3 + 24 + 16
    assert frame_beat_count(2048) == 32795
    c16 = dataclasses.replace(cfg, beat_bytes=16)
    assert c16.macs_per_clock == 48
    assert frame_beat_count(2048, c16) == 2 + 12 + 2 * 2048 * 4
    assert att.output_word_count(cfg) == 51


@pytest.mark.parametrize("cfg", [
    DEFAULT_CONFIG,
    dataclasses.replace(DEFAULT_CONFIG, beat_bytes=16),
    dataclasses.replace(DEFAULT_CONFIG, head_dim=12, heads_per_group=3, max_context=16),
    dataclasses.replace(DEFAULT_CONFIG, head_dim=20, heads_per_group=1, beat_bytes=16,
                        max_context=16),
], ids=["d64-b8", "d64-b16", "d12-b8-padded", "d20-b16-padded"])
def test_frame_roundtrip(cfg):
    rng = np.random.default_rng(7)
    for L in (1, 2, 5):
        q, K, V = rand_case(rng, cfg, L)
        data = build_attention_frame(q, K, V, 40000, 20, L, cfg, pad_byte=0xA5)
        beats, lasts = one_frame(data, cfg)
        assert len(beats) == frame_beat_count(L, cfg)
        out = stream_outputs(beats, lasts, cfg)
        assert out == [attention_frame(q, K, V, 40000, 20, L, cfg)]
        dec = decode_output(out[0], cfg)
        core = attention_core(q, K, V, 40000, 20, cfg)
        assert (dec["y"] == core["y"]).all() and dec["Z"] == core["Z"]
        assert (dec["tag"], dec["flags"], dec["count"]) == (L, 0, att.output_word_count(cfg))


def test_dequantise_close_to_float():
    rng = np.random.default_rng(11)
    q, K, V = rand_case(rng, DEFAULT_CONFIG, 100)
    c = 2e-5
    dec = decode_output(attention_frame(q, K, V, *score_multiplier(c)))
    got = dequantise(dec["y"], dec["Z"])
    ref = att.float_attention(q, K, V, c)
    lsb = np.abs(ref).max(axis=1, keepdims=True) / 127
    assert (np.abs(got - ref) <= lsb).all()


# --------------------------------------------------------------------------- bad frames

def _good(rng, L=3, tag=0x11, cfg=DEFAULT_CONFIG):
    q, K, V = rand_case(rng, cfg, L)
    return (q, K, V), build_attention_frame(q, K, V, 50000, 22, tag, cfg)


def _status_only(data, cfg=DEFAULT_CONFIG):
    out = stream_outputs(*one_frame(data, cfg), cfg)
    assert len(out) == 1 and len(out[0]) == 1
    st_ = out[0][0]
    return st_ & 0xFF, (st_ >> 8) & 0xFF, st_ >> 16


@pytest.mark.parametrize("override,flag", [
    (dict(magic=0xB158), FLAG_BAD_MAGIC),
    (dict(magic=0xA77F, context=0), FLAG_BAD_MAGIC),  # bad magic wins over bad shape
    (dict(context=0), FLAG_BAD_SHAPE),
    (dict(context=2049), FLAG_BAD_SHAPE),
    (dict(heads=9), FLAG_BAD_SHAPE),
    (dict(head_dim=128), FLAG_BAD_SHAPE),
    (dict(context=0, reserved=1), FLAG_BAD_SHAPE),  # shape checked before format
    (dict(reserved=1), FLAG_BAD_FORMAT),
    (dict(reserved=[0, 0, 0x80]), FLAG_BAD_FORMAT),
])
def test_bad_header(override, flag):
    rng = np.random.default_rng(3)
    q, K, V = rand_case(rng, DEFAULT_CONFIG, 3)
    data = build_attention_frame(q, K, V, 50000, 22, 0x77, **override)
    assert _status_only(data) == (0x77, flag, 0)


def test_bad_shift_is_bad_format():
    rng = np.random.default_rng(3)
    q, K, V = rand_case(rng, DEFAULT_CONFIG, 3)
    data = bytearray(build_attention_frame(q, K, V, 50000, 22, 0x10))
    data[18] = 48  # SHIFT of head 2: byte 2 of the third scale word (bytes 16..19)
    assert _status_only(bytes(data)) == (0x10, FLAG_BAD_FORMAT, 0)
    data[18] = 47
    out = stream_outputs(*one_frame(bytes(data)))
    assert out == [attention_frame(q, K, V, 50000, [22, 22, 47], 0x10)]


def test_header_padding_is_ignored():
    rng = np.random.default_rng(3)
    q, K, V = rand_case(rng, DEFAULT_CONFIG, 3)
    data = build_attention_frame(q, K, V, 50000, 22, 0x10, pad_byte=0xFF)
    assert data[20:24] == bytes([0xFF] * 4)
    assert stream_outputs(*one_frame(data)) == [attention_frame(q, K, V, 50000, 22, 0x10)]


@pytest.mark.parametrize("keep", [1, 2, 3, 4, 26, 27, 27 + 24 - 1, 27 + 24, 27 + 24 + 3,
                                  27 + 48 - 1])
def test_short_frame(keep):
    # L = 3: header 3, q 24, K 24, V 24 beats = 75; keep the first `keep` beats only
    rng = np.random.default_rng(4)
    _, data = _good(rng)
    beats = frame_to_beats(data)
    assert len(beats) == 75
    out = stream_outputs(beats[:keep], [False] * (keep - 1) + [True])
    assert out == [[status_word(0x11, FLAG_SHORT_FRAME, 0)]]


@pytest.mark.parametrize("extra", [1, 5])
def test_long_frame(extra):
    rng = np.random.default_rng(5)
    (q, K, V), data = _good(rng)
    beats = frame_to_beats(data) + [0xFFFF_FFFF_FFFF_FFFF] * extra
    out = stream_outputs(beats, [False] * (len(beats) - 1) + [True])
    good = attention_frame(q, K, V, 50000, 22, 0x11)
    assert out == [good[:-1] + [status_word(0x11, FLAG_LONG_FRAME, len(good) - 1)]]


def test_next_frame_right_after_bad_frames():
    rng = np.random.default_rng(6)
    frames, expect = [], []

    def add(data, lasts_at=None):
        beats = frame_to_beats(data)
        n = len(beats) if lasts_at is None else lasts_at
        frames.append((beats[:n], [False] * (n - 1) + [True]))

    for i in range(3):
        (q, K, V), data = _good(rng, L=1 + i, tag=i)
        add(data)
        expect.append(attention_frame(q, K, V, 50000, 22, i))
    _, data = _good(rng, tag=0x20)
    add(bytes([0]) + data[1:])  # bad magic
    expect.append([status_word(0x20, FLAG_BAD_MAGIC, 0)])
    (q, K, V), data = _good(rng, L=2, tag=0x21)
    add(data, lasts_at=30)  # short
    expect.append([status_word(0x21, FLAG_SHORT_FRAME, 0)])
    (q, K, V), data = _good(rng, L=2, tag=0x22)
    add(data + bytes(16))  # long by two beats
    good = attention_frame(q, K, V, 50000, 22, 0x22)
    expect.append(good[:-1] + [status_word(0x22, FLAG_LONG_FRAME, len(good) - 1)])
    (q, K, V), data = _good(rng, L=4, tag=0x23)
    add(data)
    expect.append(attention_frame(q, K, V, 50000, 22, 0x23))
    beats = [b for f in frames for b in f[0]]
    lasts = [x for f in frames for x in f[1]]
    assert stream_outputs(beats, lasts) == expect
    # beats after the last tlast are an unfinished frame: no output yet
    assert stream_outputs(beats + beats[:3], lasts + [False] * 3) == expect
    # the (data, tlast) form used by the testbench
    pairs = att.attention_stream(zip(beats + beats[:3], lasts + [False] * 3))
    assert [w for w, _ in pairs] == [w for f in expect for w in f]
    assert [i for i, (_, last) in enumerate(pairs) if last] == list(
        np.cumsum([len(f) for f in expect]) - 1)


# --------------------------------------------------------------------------- error bounds

def test_error_against_float64_within_documented_bounds():
    rows = attention_error.run(DEFAULT_CONFIG, trials=6, seed=99)
    assert {r["family"] for r in rows} == set(attention_error.THRESHOLDS)
    for r in rows:
        stat, bound = attention_error.THRESHOLDS[r["family"]]
        assert r[stat] <= bound, (r["suite"], stat, r[stat], bound)
        if r["family"] == "exact":
            assert r["pre_max"] < 1e-9, r["suite"]
    random_rows = [r for r in rows if r["family"] == "random"]
    assert max(r["out_mean"] for r in random_rows) < 0.3
    assert max(r["pre_max"] for r in random_rows) < 0.3


def test_error_tool_runs(capsys):
    assert attention_error.main(["--trials", "2", "--markdown"]) == 0
    out = capsys.readouterr().out
    assert "| context 1 |" in out and "all scores equal" in out
