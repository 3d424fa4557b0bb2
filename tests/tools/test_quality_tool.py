"""tools/quality.py's bookkeeping (the runs themselves are make targets: docs/quality.md)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_quality_records_name_their_make_target():
    """tools/quality.py: each kind of run is recorded apart and names the make target that
    reruns it (make quality, make quality-sweep DITHER=N, make quality-dither)."""
    spec = importlib.util.spec_from_file_location("quality_tool", REPO / "tools" / "quality.py")
    q = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(q)
    runs = {(): ("", "make quality"),
            ("--sweep",): ("sweep", "make quality-sweep"),
            ("--sweep", "--dither", "0"): ("sweep", "make quality-sweep DITHER=0"),
            ("--sweep", "--policies", "", "--formats", "int8", "--dither", "4"):
                ("dither", "make quality-dither FORMATS=int8 DITHER=4")}
    for argv, (var, cmd) in runs.items():
        args = q.PARSER.parse_args(list(argv))
        assert (q.variant(args), q.command(args, list(argv))) == (var, cmd), argv


def test_quality_table_shows_make_answers_free_running_figures_beside_each_row(tmp_path):
    """make quality's table carries, beside each row's log-likelihood columns, the
    free-running figures make answers recorded for the same numerics (the float64 pass is
    the reference of both; the engines' float32 rows get their format's answers; rows make
    answers does not run get '-'), and names the record's commit."""
    import sys
    sys.path.insert(0, str(REPO))
    from generators.results import figure, record
    spec = importlib.util.spec_from_file_location("quality_tool", REPO / "tools" / "quality.py")
    q = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(q)
    assert q.free_running(tmp_path) == {}
    figs = []
    for n, (tok, of, eq) in {"int8": (393, 1206, 4), "q4": (500, 1206, 9),
                             "llamacpp": (803, 1206, 17)}.items():
        figs += [figure(f"answers.{n}.follow_pct", round(100 * tok / of, 1), "%", "measured",
                        "w", tokens=tok, of=of),
                 figure(f"answers.{n}.equal", eq, "answers", "measured", "w", prompts=46)]
    record("answers", figs, out_dir=tmp_path, note="x")
    fr = q.free_running(tmp_path)
    assert fr["prompts"] == 46 and fr["rows"]["q4"] == dict(follow_pct=41.5, tokens=500,
                                                            of=1206, equal=9)

    def row(kind, host="float32"):
        return dict(kind=kind, weights=kind, numerics="n", host=host, text="t", tokens=9,
                    mean_ll=-3.0, se=0.1, ppl=20.0, top1=4, agree=8, vs_float=-0.03,
                    vs_float_se=0.01, wall="q4")
    res = dict(wall=q.wall_rows(), free_running=fr,
               rows=[row("reference-float"), row("engines-q4"), row("engines-q4-f64", "float64"),
                     row("engines-int8"), row("llamacpp"), row("engines-ternary")])
    lines = q.table(res).splitlines()
    assert f"make answers at {fr['commit']}" in lines[0]
    cells = {ln.split(" | ")[0][2:]: ln.split(" | ")[9:11] for ln in lines[2:]}
    assert cells == {"reference-float": ["reference", "reference"],
                     "engines-q4": ["41.5 % (500 of 1206)", "9 of 46"],
                     "engines-q4-f64": ["-", "-"],
                     "engines-int8": ["32.6 % (393 of 1206)", "4 of 46"],
                     "llamacpp": ["66.6 % (803 of 1206)", "17 of 46"],
                     "engines-ternary": ["-", "-"]}
