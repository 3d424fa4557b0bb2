"""Tests of generators.report.decoder_model (arithmetic, Figure 6) and plots (smoke)."""

import math

import pytest

from generators.report import decoder_model as dm
from generators.report.decoder_model import (
    FIGURE6_WRITEUP,
    ModelShape,
    Platform,
    attention_costs,
    attention_frame_beats,
    decoder_row,
    decoder_table,
    figure6,
    format_table,
    matmul_frame_beats,
    matrices,
    matrix_rows,
    part_rows,
    wall_bound,
)

# A one-layer toy shape, every number below computed by hand.
TOY = ModelShape(name="toy", hidden=10, intermediate=20, layers=1, q_heads=2, kv_heads=1,
                 head_dim=5, vocab=30, kv_bytes_per_element=1)
# matrices: q 10x10=100, k 10x5=50, v 50, o 100, gate 10x20=200, up 200, down 200,
# lm_head 10x30=300 -> 1200 weights = 240 bytes at 5 per byte.
# rates chosen so that each part takes a round number of ms:
TOY_PLATFORM = Platform(
    fclk_hz=1e4, beat_bytes=8, wall_bytes_per_s=72e3, pl_matmul_weights_per_s=1.2e6,
    cpu_attention_macs_per_s=80e3, cpu_matmul_macs_per_s=0.6e6, host_s=2e-3,
    pl_attention_engines=1)


def test_toy_matrices_by_hand():
    ms = {m["name"]: m for m in matrices(TOY)}
    assert [m["name"] for m in matrices(TOY)] == ["q", "k", "v", "o", "gate", "up",
                                                  "down", "lm_head"]
    assert (ms["q"]["k"], ms["q"]["n"], ms["q"]["weights"]) == (10, 10, 100)
    assert (ms["k"]["k"], ms["k"]["n"], ms["k"]["weights"]) == (10, 5, 50)
    assert ms["v"]["weights"] == 50
    assert (ms["o"]["k"], ms["o"]["n"]) == (10, 10)
    assert (ms["gate"]["k"], ms["gate"]["n"]) == (10, 20)
    assert (ms["down"]["k"], ms["down"]["n"]) == (20, 10)
    assert (ms["lm_head"]["k"], ms["lm_head"]["n"], ms["lm_head"]["count"]) == (10, 30, 1)
    assert sum(m["weights"] for m in ms.values()) == 1200


def test_toy_matrix_rows_bytes_beats_time():
    rows = {r["part"]: r for r in matrix_rows(TOY, TOY_PLATFORM)}
    assert sum(r["bytes"] for r in rows.values()) == pytest.approx(240)
    # q: header 1 + x (10 bytes -> 2 beats) + 10 rows of ceil(10/5)=2 bytes -> 1 beat each
    assert rows["q"]["beats"] == 13
    # down: K=20 -> x 3 beats, rows of 4 bytes -> 1 beat, 10 rows
    assert rows["down"]["beats"] == 1 + 3 + 10
    assert rows["q"]["stream_bytes"] == 13 * 8
    assert sum(r["ms"] for r in rows.values()) == pytest.approx(1.0)  # 1200 / 1.2e6 s
    # a matrix on the CPU runs at the CPU's rate: gate 200 / 0.6e6 s
    rows = {r["part"]: r for r in matrix_rows(TOY, TOY_PLATFORM, {"gate": "cpu"})}
    assert rows["gate"]["where"] == "cpu"
    assert rows["gate"]["ms"] == pytest.approx(200 / 0.6e6 * 1e3)


def test_frame_beats_by_hand():
    # K=576 ternary: 116 bytes per row -> 15 beats; x 72 beats; header 1
    assert matmul_frame_beats(576, 576, 5, 8) == 1 + 72 + 576 * 15
    # K=1536: 308 bytes -> 39 beats; x 192 beats
    assert matmul_frame_beats(1536, 576, 5, 8) == 1 + 192 + 576 * 39
    # INT8 rows: 1 weight per byte
    assert matmul_frame_beats(512, 2, 1, 8) == 1 + 64 + 2 * 64
    # toy attention frame, context 4: header 1, q 2*5=10 bytes -> 2 beats,
    # K and V 4*5=20 bytes -> 3 beats each
    assert attention_frame_beats(TOY, 4, 8) == 1 + 2 + 3 + 3


def test_toy_attention_cpu_and_pl_by_hand():
    a = attention_costs(TOY, 4, "cpu", TOY_PLATFORM)
    assert a["macs"] == 2 * 4 * 2 * 5 * 1 == 80
    assert a["bytes"] == 4 * 1 * 5 * 2 * 1 == 40
    assert a["ms"] == pytest.approx(1.0)  # 80 MAC at 80 k MAC/s
    # PL: 1 frame of 9 beats; fixed latency 11 -> 20 cycles at 10 kHz = 2 ms;
    # wall: 72 bytes at 72 kB/s = 1 ms -> engine-bound, 2 ms
    p = attention_costs(TOY, 4, "pl", TOY_PLATFORM, engine_cycles=11)
    assert (p["frames"], p["frame_beats"], p["frame_cycles"]) == (1, 9, 20)
    assert p["compute_ms"] == pytest.approx(2.0)
    assert p["wall_ms"] == pytest.approx(1.0)
    assert p["ms"] == pytest.approx(2.0)
    assert p["bound"] == "engine"
    # no latency and a faster clock: the wall decides
    fast = Platform(**{**TOY_PLATFORM.as_dict(), "fclk_hz": 1e6})
    p = attention_costs(TOY, 4, "pl", fast, engine_cycles=0)
    assert p["ms"] == pytest.approx(1.0) and p["bound"] == "wall"


def test_engine_cycles_forms():
    s, c = TOY, 4
    beats = attention_frame_beats(s, c, 8)
    default = attention_costs(s, c, "pl", TOY_PLATFORM)
    assert default["frame_cycles"] == beats + dm.ATTN_FIXED_LATENCY_PLACEHOLDER
    assert attention_costs(s, c, "pl", TOY_PLATFORM, 5)["frame_cycles"] == beats + 5
    assert attention_costs(s, c, "pl", TOY_PLATFORM,
                           lambda b: 2 * b)["frame_cycles"] == 2 * beats
    assert attention_costs(s, c, "pl", TOY_PLATFORM, {4: 123})["frame_cycles"] == 123
    with pytest.raises(KeyError):
        attention_costs(s, 8, "pl", TOY_PLATFORM, {4: 123})
    with pytest.raises(ValueError):
        attention_costs(s, c, "gpu", TOY_PLATFORM)


def test_toy_decoder_row_by_hand():
    r = decoder_row(TOY, 4, "cpu", platform=TOY_PLATFORM)
    # matmul 1 ms (PL) + attention 1 ms (CPU) + host 2 ms = 4 ms -> 250 tok/s
    assert r["matmul_ms"] == pytest.approx(1.0)
    assert r["attention_ms"] == pytest.approx(1.0)
    assert r["host_ms"] == pytest.approx(2.0)
    assert r["total_ms"] == pytest.approx(4.0)
    assert r["tok_s"] == pytest.approx(250.0)
    assert r["pl_share"] == pytest.approx(0.25)
    # wall bound: (240 + 40) bytes at 72 kB/s + 2 ms
    assert r["bound_ms"] == pytest.approx(280 / 72e3 * 1e3 + 2.0)
    wb = wall_bound(TOY, 4, TOY_PLATFORM)
    assert wb["wall_tok_s"] == pytest.approx(72e3 / 280)
    rows = part_rows(TOY, 4, "pl", 11, platform=TOY_PLATFORM)
    assert [x["part"] for x in rows][-2:] == ["attention", "host"]
    assert sum(x["ms"] for x in rows) == pytest.approx(1.0 + 2.0 + 2.0)


def test_placement_validation():
    with pytest.raises(ValueError):
        part_rows(TOY, 4, placement={"qq": "pl"})
    with pytest.raises(ValueError):
        part_rows(TOY, 4, placement={"q": "fpga"})
    r = part_rows(TOY, 4, placement={"attention": "pl"}, platform=TOY_PLATFORM)
    assert r[-2]["where"] == "pl"
    with pytest.raises(ValueError):
        ModelShape(q_heads=9, kv_heads=2)
    with pytest.raises(ValueError):
        ModelShape(layers=0)


# ---------------------------------------------------------------- SmolLM2-135M


def test_smollm2_weight_bytes_27mb_and_14_68_ms():
    s = ModelShape()
    w = sum(m["weights"] for m in matrices(s))
    # per layer 2*576*576 + 2*576*192 + 3*576*1536 = 3,538,944; x30; + 576*49152
    assert w == 30 * 3_538_944 + 576 * 49152 == 134_479_872
    rows = matrix_rows(s)
    total_bytes = sum(r["bytes"] for r in rows)
    assert total_bytes == pytest.approx(26_895_974.4)
    assert 26.5e6 < total_bytes < 27.5e6  # "27 MB of weights"
    ms = sum(r["ms"] for r in rows)
    assert ms == pytest.approx(14.68, abs=0.005)  # at 9.16 G weights/s
    assert 1e3 / ms == pytest.approx(68, abs=0.5)  # "about 68 tok/s"


def test_smollm2_attention_counts():
    a = attention_costs(ModelShape(), 512, "cpu")
    assert a["macs"] == 2 * 512 * 9 * 64 * 30 == 17_694_720
    # the PYNQ-Z1 overlay's INT16 K and V: 2 bytes an element (the write-up's INT8: half)
    assert ModelShape().kv_bytes_per_element == 2
    assert a["bytes"] == 512 * 3 * 64 * 2 * 30 * 2 == 11_796_480
    assert attention_costs(ModelShape(kv_bytes_per_element=1), 512, "cpu")["bytes"] == 5_898_240
    # write-up: 83 ms at 0.21 G MAC/s effective
    assert a["ms"] == pytest.approx(83.0, rel=0.03)


def test_figure6_reproduction_within_5_percent():
    rows = figure6()
    assert [r["context"] for r in rows] == [128, 512, 2048]
    for r in rows:
        assert r["tok_s"] == pytest.approx(FIGURE6_WRITEUP[r["context"]], rel=0.05), r
        assert abs(r["error_pct"]) < 5.0
        assert r["matmul_ms"] == pytest.approx(14.68, abs=0.005)
    # "at context 2048, the PL's share is 4%"
    assert rows[-1]["pl_share"] == pytest.approx(0.04, abs=0.005)
    # "at context 512 attention is 5.7x the matmul"
    assert rows[1]["attention_ms"] / rows[1]["matmul_ms"] == pytest.approx(5.7, rel=0.05)


def test_pl_attention_estimate_matches_writeup():
    # write-up: bandwidth-bound attention 2.94 ms at context 512, 14.68 + 2.94 + 4.2 ms (its
    # own host), about 46 tok/s
    # (its INT8 K and V: one byte an element)
    wu = ModelShape(kv_bytes_per_element=1)
    r = decoder_row(wu, 512, "pl", platform=Platform(host_s=dm.WRITEUP_SMALL_OPS_S))
    assert r["attention_ms"] == pytest.approx(2.94, rel=0.05)
    assert r["tok_s"] == pytest.approx(46, rel=0.05)
    att = attention_costs(wu, 512, "pl")
    assert att["frames"] == 90 and att["bound"] == "wall"
    # one engine (8 B/clock at 142.857 MHz = 1.14 GB/s) cannot reach the wall
    one = attention_costs(wu, 512, "pl", Platform(pl_attention_engines=1))
    assert one["bound"] == "engine" and one["ms"] > att["ms"]


def test_decoder_table_defaults_and_bound():
    cpu = decoder_table()
    pl = decoder_table(attention_on="pl")
    assert [r["context"] for r in cpu] == [128, 256, 512, 1024, 2048]
    for a, b in zip(cpu, pl):
        assert a["attention_on"] == "cpu" and b["attention_on"] == "pl"
        assert b["tok_s"] > a["tok_s"]
        assert b["tok_s"] <= b["bound_tok_s"] + 1e-9  # nothing beats the wall
        assert a["bound_ms"] == pytest.approx(b["bound_ms"])
    assert all(x["tok_s"] > y["tok_s"] for x, y in zip(cpu, cpu[1:]))
    # measured cycles can be passed per context
    cyc = {c: attention_frame_beats(ModelShape(), c) + 40 for c in (128, 512)}
    rows = decoder_table(contexts=(128, 512), attention_on="pl", engine_cycles=cyc)
    assert rows[1]["attention_cycles"] == 90 * cyc[512]


def test_format_table():
    rows = [dict(context=128, tok_s=26.2, where="pl"), dict(context=2048, tok_s=2.8125,
                                                            where="cpu")]
    t = format_table(rows)
    lines = t.strip().splitlines()
    assert lines[0].split("|")[1].strip() == "context"
    assert lines[1].startswith("|") and lines[1].count(":") == 2  # two numeric columns
    assert "2,048" in lines[3] and "2.81" in lines[3] and "cpu" in lines[3]
    t = format_table(rows, ["tok_s"], headers={"tok_s": "tok/s"},
                     formats={"tok_s": ".1f"})
    assert t.splitlines()[0] == "| tok/s |" and t.splitlines()[3] == "|   2.8 |"
    assert math.isfinite(float(t.splitlines()[2].strip("| ")))


def test_plots_write_pngs(tmp_path):
    from generators.report import plots

    paths = [
        plots.plot_figure1(plots.WRITEUP_STAGES, tmp_path / "f1.png"),
        plots.plot_figure5([{"name": "a", "LUT": 1000, "DSP48E1": 3},
                            {"name": "b", "LUT": 2000, "DSP": 0}], tmp_path / "f5.png"),
        plots.plot_figure6({"CPU": decoder_table(), "PL": decoder_table(attention_on="pl")},
                           tmp_path / "sub" / "f6.png"),
        plots.plot_figure6({"fig6": figure6()}, tmp_path / "f6n.png", normalize=True),
    ]
    for p in paths:
        with open(p, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------ attention on the PL, as built
def test_pl_attention_follows_the_engine():
    """The PL-attention rows come from the attention engine as built (INT16 K and V, 24 MACs,
    16-byte beats; generators.designs.PYNQ_Z1):
    frame beats as the golden model's frame layout counts them (an independent model), cycles
    per frame from the engine's back-to-back period (AttentionTiming, asserted to the cycle
    against simulation by sim/attention test_cycles), and the deciding bound named."""
    from generators.core import build
    from generators.golden.attention import AttentionConfig, frame_beat_count
    eng = dm.pl_attention()
    from generators.designs import PYNQ_Z1
    ap = PYNQ_Z1["attention-engine"]
    assert (ap["kv_bits"], ap["macs"]) == (16, 24)
    timing = build("attention-engine", ap).timing()
    cfg = AttentionConfig(beat_bytes=16, kv_bits=16, exp_width=21, scale_frac_bits=16)
    for ctx in (1, 2, 64, 512, 2048):
        beats = frame_beat_count(ctx, cfg)
        assert eng.frame_beats(ctx) == beats
        row = attention_costs(ModelShape(), ctx, "pl", engine_cycles=eng)
        assert row["frame_cycles"] == max(timing.period(beats), beats + 1)
        assert row["frames"] == 90 and row["stream_bytes"] == 90 * (16 * beats + 8)
    # context 1: the finisher bounds the period, the engine decides; from 64 on the DDR wall
    one = attention_costs(ModelShape(), 1, "pl", engine_cycles=eng)
    assert one["bound"] == "engine" and one["frame_cycles"] > eng.frame_beats(1) + 1
    for ctx in (64, 512, 2048):
        assert attention_costs(ModelShape(), ctx, "pl", engine_cycles=eng)["bound"] == "wall"
    # a slower engine changes the engine-bound figure: the rows follow the engine's model
    slow = dm.PLAttention(eng.name, eng.beat_bytes, eng.header_beats, eng.q_beats,
                          eng.row_beats, lambda b: eng.period(b) + 100)
    assert (attention_costs(ModelShape(), 1, "pl", engine_cycles=slow)["ms"]
            > one["ms"])


# ------------------------------------------------------------------ the host term

def test_host_term_and_token_time_by_hand():
    """One formula: matrices max(cycles / fclk, bytes / wall) + attention the same + host."""
    from generators.report.decoder_model import host_ms, token_time
    p = Platform(fclk_hz=1e4, beat_bytes=8, wall_bytes_per_s=8e4, host_s=3e-3)
    assert host_ms("int8", 512, p) == pytest.approx(3.0)
    # matrices: 20 cycles = 2 ms, 30 beats = 240 B = 3 ms at the wall -> 3 ms (wall-bound);
    # attention: 50 cycles = 5 ms, 10 beats = 1 ms -> 5 ms; + 3 ms host = 11 ms
    t = token_time("q4", 1, 20, 30, 50, 10, p)
    assert t["matrix_ms"] == pytest.approx(3.0) and t["matrix_bound"] == "wall"
    assert t["attention_ms"] == pytest.approx(5.0) and t["host_ms"] == pytest.approx(3.0)
    assert t["total_ms"] == pytest.approx(11.0) and t["tok_s"] == pytest.approx(1e3 / 11)
    with pytest.raises(ValueError, match="weight format"):
        host_ms("fp8", 1)


def test_host_term_is_a9_models_figure():
    """The default host term is make a9-model's recorded Cortex-A9 model of the ARMv7 build
    (docs/results), read and interpolated between its contexts, not a copy of a number: on
    both cores as the board runs the step (the ``_2core`` figure where there is one);
    figure6 keeps the write-up's own 4.2 ms."""
    from generators.report.decoder_model import HOST_FIGURES, WRITEUP_SMALL_OPS_S, host_ms
    from generators.results import load
    raw = {f["key"]: f["value"] for f in load()["a9-model"]["figures"]}
    figs = {k: raw.get(k + "_2core", v) for k, v in raw.items()}
    # the one-token step has work for the worker: its two-core figure is the host term
    one = HOST_FIGURES["armv7"].format(fmt="q4", context=512)
    assert raw[one + "_2core"] != raw[one] and host_ms("q4", 512) == raw[one + "_2core"]
    for build, key in HOST_FIGURES.items():
        for fmt, measured in (("q4", "q4"), ("int8", "int8"), ("ternary", "ternary"),
                                  ("int8 rows", "int8")):
            # the contexts a9-model records for this build
            ctxs = [c for c in (1, 512, 2048) if key.format(fmt=measured, context=c) in figs]
            assert ctxs, (build, fmt)
            for ctx in ctxs:
                assert host_ms(fmt, ctx, build=build) == figs[key.format(fmt=measured,
                                                                         context=ctx)]
            if ctxs[:2] == [1, 512]:
                lo, hi = (figs[key.format(fmt=measured, context=c)] for c in (1, 512))
                assert host_ms(fmt, 256, build=build) == pytest.approx(lo + (hi - lo) * 255 / 511)
            else:                         # one context: every context takes it
                assert host_ms(fmt, 256, build=build) == figs[key.format(fmt=measured,
                                                                         context=ctxs[0])]
    r = decoder_row(None, 512, "pl")
    assert r["host_ms"] == host_ms("ternary", 512)
    assert all(row["host_ms"] == pytest.approx(WRITEUP_SMALL_OPS_S * 1e3) for row in figure6())


def test_chat_rtl_tok_s_line_is_the_formula():
    """chat's rtl tok/s: the simulated cycles and beats per token through token_time, no
    'engine time only' figure."""
    from generators.report.decoder_model import token_time
    from generators.runtime.cli.chat import tok_s_line
    counts = dict(matrix_cycles=2 * 5_939_895, matrix_beats=2 * 11_800_000,
                  attention_cycles=2 * 10_620, attention_beats=2 * 76_000)
    r = dict(steps=2, gen_s=1400.0, cycles=2 * (5_939_895 + 10_620), counts=counts, fmt="q4",
             context=3)
    line = tok_s_line("rtl", r)
    tt = token_time("q4", 3, 5_939_895, 11_800_000, 10_620, 76_000)
    assert line.startswith(f"tok/s: {tt['tok_s']:.2f} (modelled: ")
    assert f"host model {tt['host_ms']:.1f} ms" in line and "engine time only" not in line
