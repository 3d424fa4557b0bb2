"""Table assembly of `make report` (generators/report/__main__.py) on fake data: no yosys,
no simulator."""
import math

import pytest

from generators.designs import PYNQ_Z1
from generators.report import __main__ as rep
from generators.report import resources
from generators.report.decoder_model import ATTN_FIXED_LATENCY_PLACEHOLDER, format_table


def _synth(design, params=None, kind="default", **kw):
    r = dict(design=design, params=params or {}, kind=kind, LUT=1000, FF=500, CARRY4=20,
             DSP48E1=0, BRAM=0.5, lut_levels=3, carry4_chain=4,
             all_params={"bytes": 8, **(params or {})})
    r.update(kw)
    return r


def test_silicon_configs_cover_defaults_sweeps_and_lane():
    cfgs = rep.silicon_configs(["probe", "int8-engine", "ternary-engine"])
    labels = [rep.design_label(c) for c in cfgs]
    assert labels[:3] == ["probe", "int8-engine", "ternary-engine"]
    both = rep.silicon_configs(["probe", "attention-engine"])
    assert [c["design"] for c in both] == ["attention-engine", "attention-engine", "probe"]
    assert both[1]["params"] == PYNQ_Z1["attention-engine"]          # the top's INT16 engine
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


def _vsynth(design, params=None, kind="default", lut=1000, lutram=0, srl=0, ff=500, dsp=0,
            bram=0.5, **kw):
    return _synth(design, params, kind, LUT=lut, LUTRAM_luts=lutram, SRL=srl,
                  LUT_slice=lut + lutram + srl, FF=ff, DSP48E1=dsp, BRAM=bram, **kw)


def test_vivado_rows_split_the_top_and_count_the_7020():
    res = [_vsynth("overlay", lut=20000, lutram=3000, srl=400, ff=15000, dsp=117, bram=21.0,
                   all_params={"q4": True, "vectors": 1}),
           _vsynth("overlay", {"q4": False}, "sweep", lut=15000),
           _vsynth("mv-engine", lut=2500),
           _vsynth("mv-engine", {"q4": True}, "sweep", lut=4000, lutram=100, srl=50, ff=3000,
                   dsp=16, bram=1.5),
           _vsynth("attention-engine", dict(PYNQ_Z1["attention-engine"]), "sweep", lut=9000, lutram=2600, srl=200,
                   ff=7000, dsp=85, bram=17.0),
           _vsynth("probe", lut=50, ff=60, bram=0)]
    assert [r["name"] for r in res_rows(res[2:])] == ["probe", "mv-engine", "mv-engine-q4",
                                                       "attention-engine"]  # no top: engines only
    timing = {"replicated": [["a", 1000, 100], ["b", 150, 100], ["c", 50, 100]]}
    assert resources.replica_ffs(timing) == 9 + 1 + 0
    rows = {r["name"]: r for r in resources.vivado_rows(res, timing)}
    m, a, g, t = rows["top-matrix"], rows["top-attention"], rows["top-glue"], rows["top"]
    assert (m["lut_logic"], m["lutram"], m["srl"], m["lut"], m["dsp"]) == (8000, 200, 100, 8300, 32)
    assert (a["lut"], a["ff"], a["bram"]) == (11800, 7000, 17.0)
    # glue = top - 2 matrix engines - attention, column by column
    assert (g["lut_logic"], g["lutram"], g["srl"], g["lut"], g["ff"], g["dsp"], g["bram"]) == \
        (20000 - 8000 - 9000, 3000 - 200 - 2600, 400 - 100 - 200, 23400 - 8300 - 11800,
         15000 - 6000 - 7000, 117 - 32 - 85, 21.0 - 3.0 - 17.0)
    assert t["lut"] == 23400 and rows["replicas"]["ff"] == 10
    infra = {k: sum(i["count"] * i[k] for i in resources.INFRA)
             for k in ("LUT", "lut_logic", "lutram", "srl", "FF", "BRAM")}
    assert infra["LUT"] == infra["lut_logic"] + infra["lutram"] + infra["srl"]
    total = rows["total"]
    assert total["lut"] == 23400 + infra["LUT"] and total["dsp"] == 117
    assert total["ff"] == 15010 + infra["FF"] and total["bram"] == 21.0 + infra["BRAM"]
    share = rows["share"]
    assert share["lut"] == round(100 * (23400 + infra["LUT"]) / 53200, 1)
    assert share["lutram"] == round(100 * (3400 + infra["lutram"] + infra["srl"]) / 17400, 1)
    assert share["dsp"] == round(100 * 117 / 220, 1)
    assert share["bram"] == round(100 * (21.0 + infra["BRAM"]) / 140, 1)
    assert all(i["source"] for i in resources.INFRA)
    # with yosys's error: the top's LUTs times the largest Vivado / yosys ratio, + infrastructure
    bound = max(viv / yos for *_, viv, yos in resources.LUT_CALIBRATION)
    assert rows["total-err"]["lut"] == math.ceil(23400 * round(bound, 3)) + infra["LUT"]
    assert rows["share-err"]["lut"] == round(100 * rows["total-err"]["lut"] / 53200, 1)
    figs = {f["key"]: f for f in resources.figures(list(rows.values()))}
    assert figs["report.top.lut"]["value"] == 23400 and figs["report.top.lut_mem"]["value"] == 3400
    assert figs["report.probe.lut"]["label"] == "synthesised (yosys)"
    assert figs["report.share.dsp"]["label"] == "modelled"
    assert figs["report.q4-lane.lut"]["value"] == 4150 - 2500      # mv-engine q4=true - mv-engine
    assert figs["report.q4-lane.dsp"]["value"] == 16 - 0
    text = format_table(list(rows.values()), resources.COLUMNS, resources.HEADERS,
                        {k: resources.fmt for k in resources.COLUMNS[1:-1]})
    assert "53,200" in text and "Ernest789/ZYNQ_7z020" in text and "LUT as memory: SRL" in text
    assert figs["report.share.lut_with_error"]["value"] == rows["share-err"]["lut"]


def test_the_infrastructure_is_vivados_7020_figures():
    """No figure of another family: every infrastructure row cites a 7020 report by commit, and
    the DMA row says what its figure leaves out (the SG engine)."""
    for i in resources.INFRA:
        assert "7z020" in i["source"] and "@ " in i["source"] and "kv260" not in i["source"]
        assert i["LUT"] == i["lut_logic"] + i["lutram"] + i["srl"]
    (dma,) = [i for i in resources.INFRA if i["part"].startswith("AXI DMA")]
    assert dma["count"] == 2 and "SG engine not in it" in dma["source"]


def test_lut_error_is_the_largest_underestimate():
    cal = [("a", "r", "p", "v", 300, 200), ("b", "r", "p", "v", 90, 100),
           ("c", "r", "p", "v", 170, 100)]
    err = resources.lut_error(cal)
    assert err["ratios"] == {"a": 1.5, "b": 0.9, "c": 1.7}
    assert (err["bound"], err["design"], err["least"]) == (1.7, "c", 0.9)
    figs = {f["key"]: f for f in resources.calibration_figures(cal)}
    assert figs["report.lut-error"]["value"] == 1.7
    assert figs["report.lut-calibration.a.vivado"]["label"] == "measured"
    assert figs["report.lut-calibration.a.yosys"]["label"] == "synthesised (yosys)"


def res_rows(results):
    return resources.vivado_rows(results)


def test_vivado_rows_take_the_matrix_engine_the_top_carries():
    res = [_vsynth("overlay", lut=20000, all_params={"q4": False, "vectors": 1}),
           _vsynth("mv-engine", lut=2500), _vsynth("mv-engine", {"q4": True}, "sweep", lut=4000),
           _vsynth("attention-engine", dict(PYNQ_Z1["attention-engine"]), "sweep", lut=9000)]
    rows = {r["name"]: r for r in resources.vivado_rows(res)}
    assert rows["top-matrix"]["lut"] == 5000 and "replicas" not in rows
    cfgs = rep.silicon_configs(["overlay", "mv-engine", "attention-engine"])
    labels = [rep.design_label(c) for c in cfgs]
    assert "overlay q4=false" in labels and "mv-engine q4=true" in labels



def test_budget_rows_per_vectors():
    """make report's budget per vectors (docs/vectors.md): the top synthesised at 1 and at the
    default, the others the default top plus twice the engine's difference; shares of the
    7020 against the caps; the worst paths where analysed, the top's against 6.0 ns. The rows
    are built for a default of 2 whatever PYNQ_Z1_VECTORS is (budget_rows takes it)."""
    from generators.designs.overlay import PYNQ_Z1_VECTORS, engine_params
    D = 2
    infra = sum(i["count"] * i["LUT"] for i in resources.INFRA)
    res = [_vsynth("overlay", lut=25000, ff=16000, dsp=117, bram=21.0,
                   all_params={"q4": True, "vectors": D}),
           _vsynth("overlay", {"vectors": 1}, "sweep", lut=22000, ff=15000, dsp=97, bram=11.0)]
    for v in resources.BUDGET_VECTORS:
        res.append(_vsynth("mv-engine", engine_params(v), "sweep", lut=3000 * v, ff=2000 * v,
                           dsp=10 * v, bram=5.0 * v + 2))
    from generators.report.timing import BUDGET_NS
    e1, tD, t1 = round(BUDGET_NS - 0.5, 3), round(BUDGET_NS - 0.1, 3), round(BUDGET_NS + 0.1, 3)
    worst = {("mv-engine", 1): e1, ("top", D): tD, ("top", 1): t1}
    rows = {r["vectors"]: r for r in resources.budget_rows(res, worst, default=D)}
    assert sorted(rows) == list(resources.BUDGET_VECTORS)
    assert rows[1]["t_lut"] == 22000 and rows[1]["source"] == "top synthesised"
    assert rows[D]["t_lut"] == 25000 and rows[D]["default"] == "yes"
    v = max(resources.BUDGET_VECTORS)
    assert rows[v]["t_lut"] == 25000 + 2 * 3000 * (v - D)
    assert rows[v]["t_dsp"] == 117 + 2 * 10 * (v - D) and rows[v]["source"].startswith("top at")
    assert rows[v]["pl_lut"] == rows[v]["t_lut"] + infra
    assert rows[v]["lut_pct"] == round(100 * rows[v]["pl_lut"] / 53200, 1)
    bound = round(max(viv / yos for *_, viv, yos in resources.LUT_CALIBRATION), 3)
    assert rows[v]["pl_lut_err"] == math.ceil(rows[v]["t_lut"] * bound) + infra
    assert rows[v]["lut_err_pct"] == round(100 * rows[v]["pl_lut_err"] / 53200, 1)
    assert rows[1]["e_worst"] == e1 and rows[D]["t_worst"] == tD and rows[v]["e_worst"] is None
    for r in rows.values():
        # the LUT cap is checked with yosys's error
        assert r["fits"] == ("yes" if r["lut_err_pct"] <= 80 and r["dsp_pct"] <= 90 else "no")
    assert (rows[1]["meets"], rows[D]["meets"], rows[v]["meets"]) == ("no", "yes", "-")
    figs = {f["key"]: f for f in resources.budget_figures(list(rows.values()))}
    assert figs[f"report.vectors.v{v}.top_lut"]["label"] == "modelled"
    assert figs["report.vectors.v1.top_lut"]["label"] == "synthesised (yosys)"
    labels = [rep.design_label(c) for c in rep.silicon_configs(["overlay", "mv-engine"])]
    for t in resources.TOP_VECTORS:     # the tops make report synthesises besides the default
        assert (f"overlay vectors={t}" in labels) == (t != PYNQ_Z1_VECTORS)
    assert f"mv-engine q4=true vectors={v} fifo_depth=64" in labels


def test_timing_configs_per_vectors():
    """make timing's per-vectors rows: the top at resources.TOP_VECTORS (named top-v<B> but at
    its default, "top"), the matrix engine at every budget vectors; only the default's rows are
    the bitstream's (tests/generators/report/test_timing_top.py holds those to 6.0 ns)."""
    from generators.designs.overlay import PYNQ_Z1_VECTORS as D
    from generators.report import timing
    names = [c[2] for c in timing.TIMING_CONFIGS]
    assert "top" in names and "mv-engine-q4" in names
    for t in resources.TOP_VECTORS:
        assert (f"top-v{t}" in names) == (t != D)
    assert {f"mv-engine-q4-v{v}" for v in resources.BUDGET_VECTORS if v > 1} <= set(names)
    built = {c[2] for c in timing.built_configs()}
    assert "top" in built and all(timing.config_vectors(n) == D for n in built)
    assert ("mv-engine-q4" in built) == (D == 1) and f"mv-engine-q4-v{D}" in built | {"mv-engine-q4-v1"}
    rows = [dict(name=n, timing={"reg2reg": {"worst_ns": ns}}) for n, ns in
            (("top", 5.9), ("top-v7", 7.2), ("mv-engine-q4", 5.5), ("mv-engine-q4-v3", 5.8),
             ("probe", 3.0))] + [dict(name="top-v9", error="synthesis failed")]
    assert timing.vector_worst(rows) == {("top", D): 5.9, ("top", 7): 7.2, ("mv-engine", 1): 5.5,
                                         ("mv-engine", 3): 5.8}
