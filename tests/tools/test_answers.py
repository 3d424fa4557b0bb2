"""tools/answers.py (make answers): the agreement of free-running answers with the float64
pass, on answers written here, the shipped prompts, and its command line."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))
sys.path.insert(0, str(REPO / "tests"))
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


def test_the_float64_reference_with_int8s_weights():
    """float64-q8_0: every layer matrix requantised to Q8_0 per 32 along K as ggml's reference
    quantiser does (d = max|w| / 127 in float32, q = roundf(w / d), d stored as fp16, value
    float32(d) x q), written here from that definition; the embedding and the LM head kept."""
    from llama_reference import Reference
    rng = np.random.default_rng(7)
    w = {"token_embd.weight": rng.normal(size=(10, 64)),
         "output.weight": rng.normal(size=(10, 64)),
         "blk.0.attn_q.weight": rng.normal(size=(3, 64)) * np.array([1e-3, 1.0, 40.0])[:, None],
         "blk.0.attn_norm.weight": rng.normal(size=64)}
    w["blk.0.attn_q.weight"][1, 32:] = 0.0                  # an all-zero block: d = 0, q = 0
    ref = Reference({"layers": 1}, w)
    got = answers.q8_0_reference(ref).w
    for name in ("token_embd.weight", "output.weight", "blk.0.attn_norm.weight"):
        assert got[name] is w[name]
    W = w["blk.0.attn_q.weight"].astype(np.float32).reshape(3, 2, 32)
    d = (np.abs(W).max(axis=2, keepdims=True) / np.float32(127)).astype(np.float32)
    x = W * np.where(d == 0, np.float32(0), np.float32(1) / np.where(d == 0, 1, d))
    q = np.sign(x) * np.floor(np.abs(x.astype(np.float64)) + 0.5)   # roundf, exact in float64
    want = (d.astype(np.float16).astype(np.float32) * q).reshape(3, 64)
    assert got["blk.0.attn_q.weight"].dtype == np.float64
    assert np.array_equal(got["blk.0.attn_q.weight"], want.astype(np.float64))
    assert not np.array_equal(want, w["blk.0.attn_q.weight"].astype(np.float32))
    assert np.all(want[1, 32:] == 0)
