"""The README and docs/ quote figures only from docs/results.md (issue 21 item 1), and the README
stays a page a newcomer reads (item 2): its commands name targets that exist."""
import re
from pathlib import Path

from generators import results as R

REPO = Path(__file__).resolve().parents[1]

#: numbers with a unit that are facts of the contract or of the toolchain, not measurements
CONTRACT = ["7.0 ns", "6.0 ns", "142.857 MHz", "650 MHz", "512 MB", "128 MB"]

def test_readme_quotes_match_results():
    """Every quote in the README names a recorded figure with its value and label (docs/:
    tests/generators/test_results.py)."""
    bad = R.check_quotes((REPO / "README.md").read_text(), "README.md")
    assert bad == [], "\n".join(bad)

def test_readme_has_no_bare_figure():
    bare = R.bare_figures((REPO / "README.md").read_text(), allow=CONTRACT)
    assert bare == [], "README.md figures without a docs/results.md quote:\n" + "\n".join(bare)

def test_bare_figure_check_can_fail():
    text = (REPO / "README.md").read_text() + "\nThe top runs at 99.9 tok/s.\n"
    assert R.bare_figures(text, allow=CONTRACT) == [f"line {text.count(chr(10))}: '99.9 tok/s'"]

def test_results_md_is_rendered_from_the_files():
    assert R.render() == R.RESULTS_MD.read_text(), "docs/results.md is stale: run make results"

def test_readme_is_short_and_its_targets_exist():
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 130
    first = text.splitlines()[:4]
    assert any(line.strip().startswith("make sim") for line in first)
    assert any(line.strip().startswith("make test") for line in first)
    makefile = "\n".join(p.read_text() for p in [REPO / "Makefile", *REPO.glob("**/*.mk")]
                         if ".venv" not in p.parts)
    targets = set(re.findall(r"^([a-z][\w-]*):", makefile, re.M))
    used = set(re.findall(r"\bmake ([a-z][\w-]*)", text))
    assert used and used <= targets, f"README names targets the Makefile lacks: {used - targets}"
    for doc in re.findall(r"`(docs/[\w./-]+\.md)`", text):
        assert (REPO / doc).exists(), doc
