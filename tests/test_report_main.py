"""Table assembly of `make report` (generators/report/__main__.py) on fake data: no yosys,
no simulator."""
import pytest

from generators.report import __main__ as rep
from generators.report.decoder_model import ATTN_FIXED_LATENCY_PLACEHOLDER, format_table


def _synth(design, params=None, kind="default", **kw):
    r = dict(design=design, params=params or {}, kind=kind, LUT=1000, FF=500, CARRY4=20,
             DSP48E1=0, BRAM=0.5, lut_levels=3, carry4_chain=4,
             all_params={"bytes": 8, **(params or {})})
    r.update(kw)
    return r


def test_silicon_configs_cover_defaults_sweeps_and_lane():
    cfgs = rep.silicon_configs(["probe", "int8-engine", "ternary-engine"])
    labels = [rep._label(c) for c in cfgs]
    assert labels[:3] == ["probe", "int8-engine", "ternary-engine"]
    both = rep.silicon_configs(["probe", "attention-engine"])
    assert [c["design"] for c in both] == ["attention-engine", "attention-engine", "probe"]
    assert both[1]["params"] == {"macs": 48}
    for p in ("bytes=4", "bytes=16", "reg_every=1", "reg_every=3", "decode_bram=false"):
        assert f"ternary-engine {p}" in labels
    for p in (3, 4, 6):
        assert f"int8-engine pipeline={p}" in labels
    lane = [c for c in cfgs if c["kind"] == "lane"]
    assert lane and lane[0]["top"] == "ternary_lane" and "delay_line.v" in lane[0]["sources"]
    assert len(set(labels)) == len(labels)


def test_silicon_rows_and_writeup_reference():
    res = [_synth("ternary-engine"), _synth("ternary-engine", {"bytes": 4}, "sweep"),
           _synth("ternary-engine", kind="lane", LUT=1200, terms=40),
           dict(design="int8-engine", params={}, kind="default", error="yosys died")]
    rows = rep.silicon_rows(res)
    assert rows[0]["LUT"] == 1000 and rows[0]["note"] == "generator default"
    assert rows[1]["note"] == "sweep: bytes=4"
    assert "40-term" in rows[2]["note"] and "2.00x" in rows[2]["note"]
    assert rows[3]["note"].startswith("FAILED")
    assert [r["LUT"] for r in rows[-2:]] == [8175, 9557]
    assert [r["DSP48E1"] for r in rows[-2:]] == [20, 0]
    assert all("DMA" in r["note"] for r in rows[-2:])
    text = format_table(rows, rep.SILICON_COLUMNS, rep.SILICON_HEADERS, {"BRAM": rep._bram_fmt})
    assert "max LUT levels" in text and "8,175" in text


def test_synth_key_depends_on_content():
    a = rep.synth_key({"a.v": b"module a; endmodule"}, "a")
    assert a == rep.synth_key({"a.v": b"module a; endmodule"}, "a")
    assert a != rep.synth_key({"a.v": b"module a;  endmodule"}, "a")
    assert a != rep.synth_key({"a.v": b"module a; endmodule"}, "b")
    assert a != rep.synth_key({"a.v": b"module a; endmodule"}, "a", b"flow2")


def test_speed_rows_rates_and_wall():
    res = [dict(design="ternary-engine", duty=100.0, latency=6, beats=3000, cycles=3000,
                rows=100, mismatches=0, parameters={"bytes": 8}),
           dict(design="int8-engine", duty=50.0, latency=5, beats=1500, cycles=3000),
           dict(design="probe", duty=100.0, latency=1),
           dict(design="attention-engine", error="boom")]
    rows = rep.speed_rows(res)
    t, i, p, a = rows
    one = 1e9 / 7 * 8 / 1e9
    assert t["beats_per_cycle"] == 1.0
    assert t["gb_s_1"] == pytest.approx(one)
    assert t["gb_s_2"] == pytest.approx(1.97)          # capped by the wall
    assert t["gw_s_2"] == pytest.approx(1.97 * 5)
    assert t["note"] == "2 ports wall-bound"
    assert i["gb_s_1"] == pytest.approx(one / 2)
    assert i["gb_s_2"] == pytest.approx(one)           # under the wall
    assert i["gw_s_1"] == pytest.approx(one / 2)
    assert p["gw_s_1"] is None
    assert a["note"].startswith("FAILED")
    format_table(rows, rep.SPEED_COLUMNS, rep.SPEED_HEADERS, rep.SPEED_FORMATS)


def test_frame_rows_cycles_are_beats_plus_latency():
    rows = rep.frame_rows({"ternary-engine": 6, "probe": 1})
    assert {r["design"] for r in rows} == {"ternary-engine"}
    q = next(r for r in rows if r["matrix"] == "q")
    # K = 576 ternary: 116 bytes per row -> 15 beats; 1 header + 72 x beats
    assert q["frame_beats"] == 1 + 72 + 576 * 15
    assert q["frame_cycles"] == q["frame_beats"] + 6
    tot = rows[-1]
    assert tot["matrix"] == "per token"
    assert tot["token_cycles"] == sum(r["token_cycles"] for r in rows[:-1])
    assert tot["ms_2"] <= tot["ms_1"]


def test_decoder_tables_placeholder_and_measured():
    d = rep.decoder_tables(None)
    assert d["latency"] == ATTN_FIXED_LATENCY_PLACEHOLDER and d["latency_source"] == "placeholder"
    assert [r["context"] for r in d["figure6"]] == [128, 512, 2048]
    assert all(abs(r["error_pct"]) < 5 for r in d["figure6"])
    for r in d["both"]:
        assert r["pl_tok_s"] > r["cpu_tok_s"] and r["pl_tok_s"] <= r["bound_tok_s"]
    m = rep.decoder_tables(10)
    assert m["latency_source"] == "measured"
    assert m["pl"][0]["attention_ms"] <= d["pl"][0]["attention_ms"]


def test_figure_inputs():
    st = rep.figure1_stages([dict(design="ternary-engine", gb_s_2=1.97, gw_s_2=9.85),
                             dict(design="x", note="FAILED")])
    assert st[-1]["gb_s"] == 1.97 and len(st) == 4
    de = rep.figure5_designs([_synth("ternary-engine"), _synth("probe"),
                              _synth("int8-engine", {"pipeline": 3}, "sweep")])
    assert [d["name"] for d in de][-1] == "yosys ternary-engine" and len(de) == 3


def test_top_rows_whole_overlay_against_the_7020():
    res = [_synth("overlay", LUT=20000, FF=15000, DSP48E1=70, BRAM=30.0),
           _synth("mv-engine", LUT=3000, FF=2000, DSP48E1=8, BRAM=3.0),
           _synth("attention-engine", {"macs": 48}, "sweep", LUT=8000, FF=6000, DSP48E1=52,
                  BRAM=20.0)]
    assert rep.top_rows(res[1:]) == []          # no overlay synthesised: no table
    rows = {r["part"].split(" (")[0]: r for r in rep.top_rows(res)}
    glue = rows["glue: slices, routers, joiner, merger"]
    assert (glue["LUT"], glue["FF"], glue["DSP48E1"], glue["BRAM"]) == (6000, 5000, 2, 4.0)
    total = rows["total PL"]
    assert total["LUT"] == 20000 + 2 * 2050 + 3 * 2130 and total["DSP48E1"] == 70
    assert rows["share of the 7020"]["DSP48E1"] == f"{100 * 70 / 220:.1f} %"
    assert all("published" in r["source"] for p, r in rows.items() if p.startswith("AXI"))
    text = format_table(rep.top_rows(res), rep.TOP_COLUMNS, {}, {"BRAM": rep._top_bram_fmt})
    assert "53200" in text.replace(",", "") and "published" in text


def test_top_rows_use_the_q4_matrix_engine_when_the_overlay_has_it():
    res = [_synth("overlay", LUT=24000, FF=17000, DSP48E1=74, BRAM=30.0,
                  all_params={"q4": True}),
           _synth("overlay", {"q4": False}, "sweep", LUT=20000),
           _synth("mv-engine", LUT=3000, FF=2000, DSP48E1=8, BRAM=3.0),
           _synth("mv-engine", {"q4": True}, "sweep", LUT=5000, FF=3000, DSP48E1=10, BRAM=3.0),
           _synth("attention-engine", {"macs": 48}, "sweep", LUT=8000, FF=6000, DSP48E1=52,
                  BRAM=20.0)]
    rows = {r["part"].split(" (")[0]: r for r in rep.top_rows(res)}
    m = rows["matrix engine"]
    assert "Q4_1" in m["part"] and m["LUT"] == 10000 and m["DSP48E1"] == 20
    assert rows["glue: slices, routers, joiner, merger"]["LUT"] == 24000 - 10000 - 8000
    cfgs = rep.silicon_configs(["overlay", "mv-engine", "attention-engine"])
    labels = [rep._label(c) for c in cfgs]
    assert "overlay q4=false" in labels and "mv-engine q4=true" in labels
