"""generators.results: figures written by their targets, docs/results.md, quotes checked."""
import json

import pytest

from generators import results as R


def _fig(key="decode.q4.tok_s", value=19.1, unit="tok/s", label="modelled"):
    return R.figure(key, value, unit, label, "Q4_1 at context 512")


def test_display():
    assert R.display(1234567, "LUT") == "1,234,567 LUT"
    assert R.display(19.1, "tok/s") == "19.1 tok/s"
    assert R.display(74.2, "%") == "74.2 %"
    assert R.display("rtl = golden") == "rtl = golden"
    with pytest.raises(TypeError):
        R.display(True)


def test_a_numpy_scalar_is_written_as_its_number():
    import numpy as np
    f = R.figure("decode.q4.golden_tok_s", np.float64(1.15), "tok/s", "measured", "golden")
    assert f["text"] == "1.15 tok/s" and type(f["value"]) is float
    assert R.figure("x.n", np.int64(1234), "B", "measured", "n")["text"] == "1,234 B"


def test_figure_checks_label_and_key():
    with pytest.raises(ValueError, match="label"):
        R.figure("a.b", 1, "", "estimated", "x")
    with pytest.raises(ValueError, match="key"):
        R.figure("A b", 1, "", "measured", "x")


def test_record_render_and_one_source(tmp_path):
    p = R.record("decode", [_fig()], out_dir=tmp_path)
    data = json.loads(p.read_text())
    assert data["target"] == "decode" and data["commit"] and data["date"]
    assert data["figures"][0]["text"] == "19.1 tok/s"
    with pytest.raises(ValueError, match="already written by `make decode`"):
        R.record("report", [_fig()], out_dir=tmp_path)
    with pytest.raises(ValueError, match="twice"):
        R.record("report", [_fig("a.b"), _fig("a.b")], out_dir=tmp_path)
    with pytest.raises(ValueError, match="target"):
        R.record("nonsense", [_fig("a.c")], out_dir=tmp_path)
    md = R.render(out_dir=tmp_path)
    assert '<a id="decode.q4.tok_s"></a>' in md and "| 19.1 tok/s | modelled |" in md


def test_quotes_are_checked(tmp_path):
    R.record("decode", [_fig()], out_dir=tmp_path)
    figs = R.figures_by_key(tmp_path)
    good = "Q4_1 runs at 19.1 tok/s ([modelled](docs/results.md#decode.q4.tok_s)) on the board."
    assert R.check_quotes(good, "README.md", figs) == []
    for text, what in [
        ("at 19.2 tok/s ([modelled](docs/results.md#decode.q4.tok_s))", "quoted as"),
        ("at 19.1 tok/s ([simulated](docs/results.md#decode.q4.tok_s))", "labelled"),
        ("at 19.1 tok/s ([modelled](docs/results.md#decode.int8.tok_s))", "no target"),
        # a figure at a line's end, its link opening the next line: checked as one quote
        ("Q4_1 runs at 19.2 tok/s\n([modelled](docs/results.md#decode.q4.tok_s)) here.",
         "quoted as"),
    ]:
        bad = R.check_quotes(text, "README.md", figs)
        assert len(bad) == 1 and what in bad[0], (text, bad)
    assert R.check_quotes("Q4_1 runs at 19.1 tok/s\n([modelled](docs/results.md#decode.q4.tok_s))",
                          "README.md", figs) == []
    syn = R.figure("report.overlay.lut", 23328, "LUT", "synthesised (yosys)", "top")
    R.record("report", [syn], out_dir=tmp_path)
    figs = R.figures_by_key(tmp_path)
    assert R.check_quotes("23,328 LUT ([synthesised (yosys)](results.md#report.overlay.lut))",
                          "docs/overlay.md", figs) == []


def test_bare_figures():
    text = ("The top is 23,328 LUT and runs 19.1 tok/s ([modelled](docs/results.md#x.y)).\n"
            "    make sim   # 75 s in code\n"
            "Clock `7.0 ns` in code; 142.857 MHz is the contract.\n")
    bare = R.bare_figures(text, allow=["142.857 MHz"])
    assert bare == ["line 1: '23,328 LUT'"]


def test_the_docs_quote_the_recorded_figures():
    """Every quote in docs/ names a figure some target recorded, with its label and its value
    as recorded (a figure re-measured means its quotes are updated)."""
    docs = sorted(p for p in (R.REPO / "docs").glob("*.md") if p != R.RESULTS_MD)
    figs = R.figures_by_key()
    bad = [b for p in docs for b in R.check_quotes(p.read_text(), str(p.relative_to(R.REPO)),
                                                   figs)]
    assert not bad, "\n".join(bad)


def test_formal_records_every_proof(tmp_path):
    """make formal's figures: one result and CPU time per proof, two runs of one label both
    kept, a design without a stream left out."""
    import json
    from generators.formal import Result, record_figures
    runs = [Result("probe", "PYNQ-Z1", {}, "PASS", depth=6, seconds={"cpu": 1.25}),
            Result("probe", "PYNQ-Z1", {"bytes": 4}, "FAIL", depth=12, seconds={"cpu": 2.0}),
            Result("ternary-tree", "defaults", {}, "NO STREAM")]
    figs = {f["key"]: f["text"] for f in json.loads(record_figures(runs, False, tmp_path)
                                                    .read_text())["figures"]}
    assert figs == {"formal.probe.pynq-z1.result": "PASS at k = 6",
                    "formal.probe.pynq-z1.cpu_s": "1.2 s CPU",
                    "formal.probe.pynq-z1-2.result": "FAIL at k = 12",
                    "formal.probe.pynq-z1-2.cpu_s": "2.0 s CPU"}


def test_sources_dirty_ignores_the_recorded_figures(tmp_path):
    """A record's "-dirty": a changed source counts, a changed docs/results file does not (a
    chain of targets in one checkout records the commit it ran)."""
    import subprocess
    from generators.results import sources_dirty
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    (tmp_path / "docs" / "results").mkdir(parents=True)
    (tmp_path / "docs" / "results" / "a.json").write_text("{}\n")
    (tmp_path / "docs" / "results.md").write_text("# r\n")
    (tmp_path / "src.py").write_text("x = 1\n")
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "c"], check=True)
    assert not sources_dirty(tmp_path)
    (tmp_path / "docs" / "results" / "a.json").write_text('{"x": 1}\n')
    (tmp_path / "docs" / "results.md").write_text("# r2\n")
    assert not sources_dirty(tmp_path)
    (tmp_path / "src.py").write_text("x = 2\n")
    assert sources_dirty(tmp_path)
