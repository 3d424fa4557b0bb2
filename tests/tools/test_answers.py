"""tools/answers.py (make answers): the agreement of free-running answers with the float64
pass, on answers written here, the shipped prompts, and its command line."""
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))
import answers  # noqa: E402


def test_leading_tokens_equal():
    assert answers.leading_equal([1, 2, 3, 9], [1, 2, 3, 4, 5]) == 3
    assert answers.leading_equal([7], [1, 2]) == 0
    assert answers.leading_equal([1, 2, 3, 4, 5, 6], [1, 2, 3]) == 3   # at most the reference
    assert answers.leading_equal([], [1]) == 0


def test_agreement_over_prompts():
    refs = [[1, 2, 3, 0], [5, 6, 0], [8, 0]]
    got = [[1, 2, 3, 0], [5, 7, 7], [8, 0, 4]]
    r = answers.agreement(got, refs)
    # 4 + 1 + 2 leading tokens of 4 + 3 + 2; only the first answer is equal in full
    assert r == dict(tokens=7, of=9, fraction=round(7 / 9, 4), equal=1, prompts=3)
    with pytest.raises(ValueError, match="2 answers against 3"):
        answers.agreement(got[:2], refs)


def test_paired_against_another_row():
    """Per prompt, which row follows the reference further; the sign test's p by hand."""
    refs = [[1, 2, 3], [4, 5], [6, 7], [8, 9]]
    a = [[1, 2, 3], [4, 0], [6, 0], [8, 9]]       # 3, 1, 1, 2 leading tokens
    b = [[1, 0, 0], [4, 5], [6, 1], [8, 9]]       # 1, 2, 1, 2
    assert answers.paired(a, b, refs) == dict(further=1, shorter=1, same=2, p=1.0)
    # 1 against 6: P(X <= 1) for X ~ Bin(7, 1/2) is 8/128, two-sided 16/128
    assert answers.sign_test_p(1, 6) == answers.sign_test_p(6, 1) == 16 / 128
    assert answers.sign_test_p(0, 0) == 1.0
    assert answers.sign_test_p(18, 7) == pytest.approx(0.0433, abs=1e-4)


def test_the_kv16_rows_name_their_engine():
    assert set(answers.FORMATS) >= {"int8", "q4", "int8-kv16", "q4-kv16"}
    for f in answers.FORMATS:
        assert ("INT16 KV" in answers.NUMERICS[f]) == f.endswith("-kv16")


def test_the_shipped_prompts():
    p = answers.read_prompts()
    assert len(p) >= 40 and len(set(p)) == len(p)
    assert "What is the capital of France?" in p          # the README's question
    kinds = {"translate": 0, "what is": 0, "list": 0, "write": 0}
    for q in p:
        for k in kinds:
            if q.lower().startswith(k) or (k == "translate" and "translate" in q.lower()):
                kinds[k] += 1
    assert all(n >= 3 for n in kinds.values()), kinds


@pytest.mark.parametrize("args,msg", [
    (["--formats", "fp8"], "--formats 'fp8'"),
    (["--tokens", "0"], "--tokens 0"),
    (["--limit", "-1"], "--limit -1"),
    (["--prompts", "/nonexistent/p.txt"], "no such file"),
])
def test_command_line_mistakes(args, msg):
    r = subprocess.run([sys.executable, str(REPO / "tools" / "answers.py")] + args,
                       capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 2 and msg in r.stderr, r.stderr
