"""The Q4_1 lane (`q4-engine`): host packing against llama.cpp's block layout, the golden
model's rounding against numpy (the simulations are in test_sim_q4.py)."""
import numpy as np
import pytest

import generators
from generators import q4 as host
from generators.golden import q4 as golden



# ------------------------------------------------------------ host functions and golden model
def test_raw_blocks_round_trip_and_llama_cpp_order():
    rng = np.random.default_rng(0)
    q = rng.integers(0, 16, size=(3, 4, 32), dtype=np.uint8)
    d = rng.normal(0, 0.01, size=(3, 4)).astype(np.float16)
    m = rng.normal(0, 0.01, size=(3, 4)).astype(np.float16)
    raw = host.q4_1_blocks_to_raw(q, d, m)
    assert raw.shape == (3, 4 * 20)
    blk = raw[1, 20:40]
    # block_q4_1: d, m, then qs[j] = q[j] | q[j+16] << 4
    assert blk[0:2].tobytes() == d[1, 1].tobytes() and blk[2:4].tobytes() == m[1, 1].tobytes()
    assert [b & 0xF for b in blk[4:]] == list(q[1, 1, :16])
    assert [b >> 4 for b in blk[4:]] == list(q[1, 1, 16:])
    q2, d2, m2 = host.q4_1_raw_to_blocks(raw.tobytes(), 3, 128)
    assert (q2 == q).all() and (d2 == d.view(np.uint16)).all() and (m2 == m.view(np.uint16)).all()
    # llama.cpp's dequantize_row_q4_1: y[j] = x*d + m with x the low nibble, y[j+16] high
    w = host.q4_dequantize(q2, d2, m2)
    j = 37   # block 1, weight 5
    assert w[2, j] == np.float32(q[2, 1, 5]) * np.float32(d[2, 1]) + np.float32(m[2, 1])


@pytest.mark.parametrize("k", [1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 128, 300])
def test_row_layout(k):
    rng = np.random.default_rng(k)
    nb = -(-k // 32)
    q = rng.integers(0, 16, size=(2, nb, 32), dtype=np.uint8)
    d = rng.integers(0, 0x7C00, size=(2, nb), dtype=np.uint16)
    m = rng.integers(0, 0x7C00, size=(2, nb), dtype=np.uint16)
    rows = host.pack_q4_rows(q, d, m, k)
    assert rows.shape == (2, 8 * (-(-k // 64) + -(-k // 16)))
    # walk the layout as the engine reads it
    codes, pos, flat = [], 0, q.reshape(2, -1)
    for g in range(-(-k // 64)):
        sb = rows[1, pos:pos + 8].view(np.uint16)
        assert sb[0] == d[1, 2 * g] and sb[1] == m[1, 2 * g]
        if 2 * g + 1 < nb:
            assert sb[2] == d[1, 2 * g + 1] and sb[3] == m[1, 2 * g + 1]
        else:
            assert sb[2] == 0 and sb[3] == 0
        pos += 8
        for c in range(min(4, -(-(k - 64 * g) // 16))):
            for byte in rows[1, pos:pos + 8]:
                codes += [byte & 0xF, byte >> 4]
            pos += 8
    assert pos == rows.shape[1]
    assert codes[:k] == list(flat[1, :k]) and not any(codes[k:])


def test_round_f32_against_numpy():
    """The golden model's integer rounding equals numpy's float64 -> float32 (one RNE) where
    the integer is exact in float64, at every magnitude and at the halfway points."""
    rng = np.random.default_rng(1)
    vals = [int(v) for v in rng.integers(-2**52, 2**52, size=4000)]
    for p in range(0, 52):
        vals += [2**p, 2**p + 1, -(2**p) - 1, 3 << p, (2**24 + 1) << p, (2**25 - 1) << p]
    for a in vals:
        want = np.float32(np.float64(a) * 2.0**-24).view(np.uint32)
        assert golden.round_f32(a) == int(want), a
    # beyond float64's 53 bits: a sticky bit far below the halfway point rounds up
    a = (((1 << 23) | 1) << 40) + (1 << 39) + 1      # odd mantissa, just above half
    assert golden.round_f32(a) == golden.round_f32(((1 << 23) | 2) << 40)
    a = ((1 << 23) << 40) + (1 << 39)                # even mantissa, exactly half: stays
    assert golden.round_f32(a) == golden.round_f32((1 << 23) << 40)


def test_golden_row_against_float64_dot():
    """A row's value is the dot product of the dequantised weights (exact in float64 for
    moderate scales) with x."""
    rng = np.random.default_rng(2)
    for k in (32, 45, 200):
        nb = -(-k // 32)
        q = rng.integers(0, 16, size=(1, nb, 32), dtype=np.uint8)
        d = rng.normal(0, 0.02, size=(1, nb)).astype(np.float16)
        m = rng.normal(0, 0.02, size=(1, nb)).astype(np.float16)
        x = rng.integers(-128, 128, size=k).astype(np.int8)
        row = host.pack_q4_rows(q, d, m, k)[0].tobytes()
        a, bad = golden.row_value(row, x.astype(np.int64), k)
        w = (q.reshape(-1)[:k].astype(np.float64) * np.repeat(d.astype(np.float64), 32)[:k]
             + np.repeat(m.astype(np.float64), 32)[:k])
        assert not bad and a * 2.0**-24 == float(np.dot(w, x.astype(np.float64)))


def test_decode_words():
    words = [golden.round_f32(3 << 24), golden.round_f32(-(1 << 23))]
    assert list(host.decode_q4_words(words)) == [3.0, -0.5]


def test_bad_parameters():
    with pytest.raises(generators.ParameterError):
        generators.render("q4-engine", {"fifo_depth": 16}, "/nonexistent/never-written")
    with pytest.raises(generators.ParameterError, match="bytes=8"):
        generators.render("mv-engine", {"q4": True, "bytes": 4}, "/nonexistent/never-written")
    with pytest.raises(ValueError):
        host.pack_q4_rows(np.full((1, 1, 32), 16), np.zeros((1, 1), np.uint16),
                          np.zeros((1, 1), np.uint16), 32)
    with pytest.raises(ValueError):
        host.q4_1_raw_to_blocks(bytes(40), 1, 48)


def test_acc_width():
    from generators.designs.q4 import q4_acc_width
    for k in (32, 300, 2048, 65535):
        w = q4_acc_width(k)
        worst = -(-k // 32) * 2047 * 2**29 * (32 * 15 * 128 + 32 * 128)   # every block at max
        assert worst < 2**(w - 1) and (w == 59 or worst >= 2**(w - 2))
    assert [q4_acc_width(k) for k in (32, 2048, 65535)] == [59, 63, 68]


def test_lane_acc_width():
    """The lane's accumulator (units of 2^-48) holds the worst row of either format: 0x04's
    every block at max shifted by 24 more, 0x05's |d_w d_x S| + |m_w s_x| at the largest fp16
    (docs/activations.md section 3: 103 bits at max_k = 2048, tools/activation_blocks.py's
    figure), and at least the lane's block term (99 bits)."""
    from generators.designs.q4 import LANE_TERM_W, q4_acc_width, q4_lane_acc_width
    from tools.activation_blocks import acc_width_q8_1
    for k in (1, 32, 300, 1536, 2048, 65535):
        w = q4_lane_acc_width(k)
        nb = -(-k // 32)
        w04 = nb * 2047 * 2**(29 + 24) * (32 * 15 * 128 + 32 * 128)
        w05 = nb * 2047**2 * 2**58 * (32 * 15 * 128 + 1)
        worst = max(w04, w05)
        assert worst < 2**(w - 1) and (w == LANE_TERM_W or worst >= 2**(w - 2))
        assert w >= q4_acc_width(k) + 24 and w == max(LANE_TERM_W, acc_width_q8_1(k))
    assert [q4_lane_acc_width(k) for k in (32, 2048, 65535)] == [99, 103, 108]


def test_lane_acc_width_q8_0():
    """With format 0x09 on the lane (mv-engine q4=true) the accumulator also holds the worst
    Q8_0 row: |d_w d_x S_b| = 2047^2 2^58 * 128*128*32 per block (docs/activations.md section
    3: 106 bits at max_k = 2048, tools/activation_blocks.py's acc_width_q8_0), and the engine
    renders that width."""
    from generators.designs.q4 import q4_lane_acc_width
    from tools.activation_blocks import acc_width_q8_0
    for k in (1, 32, 300, 1536, 2048, 65535):
        w = q4_lane_acc_width(k, q8_0=True)
        worst = -(-k // 32) * 2047**2 * 2**58 * (32 * 128 * 128)
        assert worst < 2**(w - 1) <= 2 * worst
        assert w == max(q4_lane_acc_width(k), acc_width_q8_0(k))
    assert [q4_lane_acc_width(k, q8_0=True) for k in (32, 2048, 65535)] == [100, 106, 111]
    ctx = generators.build("mv-engine", {"q4": True}).context()
    assert ctx["acc_w"] == 106 and ctx["format_sb"] == 0x09 and ctx["delay_s8"] == 0


def test_decoder_model_weight_formats():
    """SmolLM2-135M per token: Q4_1 streams 5 bits per weight (every K is a multiple of 64),
    INT8 rows 8, Q8_0 rows 8.5 and a little more (a beat of four fp16 d per 128 weights or
    part: K = 576 takes 5), ternary 8/5 padded to beats; the wall decides the order of the
    tok/s."""
    from generators.report.decoder_model import host_ms, matrices, weight_format_rows
    rows = {r["format"]: r for r in weight_format_rows()}
    weights = sum(m["weights"] for m in matrices())
    assert rows["q4"]["bits_per_weight"] == 5.0 and rows["int8 rows"]["bits_per_weight"] == 8.0
    q8_0_row_beats = sum(m["n"] * (-(-m["k"] // 128) + m["k"] // 8) * m["count"]
                         for m in matrices())
    assert rows["int8"]["bits_per_weight"] == 64 * q8_0_row_beats / weights
    assert 8.5 < rows["int8"]["bits_per_weight"] < 8.6
    assert rows["q4"]["stream_mb"] * 1e6 > weights * 5 / 8
    # the x slots: K codes, and with 0x05 / 0x09 the scale table (0x05 twice 0x09's per K)
    x_beats = {f: sum((1 + -(-m["k"] // 8)) * m["count"] for m in matrices()) for f in rows}
    assert rows["int8"]["stream_mb"] * 1e6 == pytest.approx(8 * (x_beats["int8"] + sum(
        -(-m["k"] // 128) * m["count"] for m in matrices()) + q8_0_row_beats), rel=1e-12)
    assert all(r["bound"] == "wall" for r in rows.values())
    assert (rows["ternary"]["tok_s"] > rows["q4"]["tok_s"] > rows["q4 + q8_0 head"]["tok_s"]
            > rows["int8 rows"]["tok_s"] > rows["int8"]["tok_s"])
    assert 23 < rows["q4"]["matmul_tok_s"] < 24
    # the token's time is the three terms' sum, the host's being make a9-model's recorded model
    # of the board's ARMv7 build (tests/generators/report/test_report_model.py checks that reading); the old
    # 19..21 tok/s bound was the CPI-1.3 model of the x86 count, which issue 28 retired
    for fmt, row in rows.items():
        assert row["host_ms"] == host_ms(fmt, 512)
        assert row["tok_s"] == pytest.approx(
            1e3 / (row["matmul_ms"] + row["attention_ms"] + row["host_ms"]), rel=1e-12)


def test_q4_images_from_raw_tensors():
    """What the runtime calls on the GGUF reader's raw tensors: Q4_1 matrices packed, the
    others named for the INT8 path."""
    from collections import namedtuple
    Raw = namedtuple("Raw", "qtype shape blocks")
    rng = np.random.default_rng(3)
    q = rng.integers(0, 16, size=(6, 4, 32), dtype=np.uint8)
    d = rng.normal(0, 0.01, size=(6, 4)).astype(np.float16)
    m = rng.normal(0, 0.01, size=(6, 4)).astype(np.float16)
    raw = {"a.weight": Raw("Q4_1", (6, 128), host.q4_1_blocks_to_raw(q, d, m)),
           "emb.weight": Raw("Q8_0", (6, 128), np.zeros((6, 136), np.uint8)),
           "norm.weight": Raw("F32", (128,), np.zeros(512, np.uint8))}
    images, other = host.q4_images(raw)
    assert other == ["emb.weight"] and list(images) == ["a.weight"]
    assert (images["a.weight"] == host.pack_q4_rows(q, d, m, 128)).all()
