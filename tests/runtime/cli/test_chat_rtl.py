"""`make chat-rtl PREFILL=B` (tools/chat_rtl.py --prefill B) without the simulator: its
command-line refusals, and its prefill split on the golden backend with the tiny checkpoint
(the head token by token, the tail in one B-vector pass, then decode steps; the backend
switched after the head as the tool switches to the rtl one) against the token-by-token path
at vectors 1 (tokens and the last prompt token's logits, bit for bit) and against a run at
vectors B with the same split (every engine word); the progress bar's total of a B-vector pass
and of a decode step against the beats its transfers send and against make prefill's schedule
model. The SmolLM2 run on the RTL itself is `make chat-rtl FORMAT=q4 PREFILL=2` (tens of
minutes: not in make test; its figures are in docs/results/decode-chat-rtl-prefill-q4.json).
"""
from __future__ import annotations

import importlib.util
import io
from pathlib import Path

import numpy as np
import pytest

from generators.runtime import Decoder, convert, load_checkpoint, make_backend
from generators.runtime.cli.chat import ProgressBackend, token_beats
from generators.runtime.model.checkpoint import EngineConfig
from generators.runtime.model.synthetic import TINY, write_checkpoint

ENG = EngineConfig(max_k=512, max_context=32)
PROMPT = [5, 1, 2, 3, 4]
_spec = importlib.util.spec_from_file_location(
    "chat_rtl", Path(__file__).resolve().parents[3] / "tools" / "chat_rtl.py")
chat_rtl = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(chat_rtl)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    ck = load_checkpoint(write_checkpoint(tmp_path_factory.mktemp("tiny"), TINY, seed=1), ENG)
    return {f: convert(ck, f, ENG, notice=None) for f in ("int8", "ternary", "q4")}


@pytest.mark.parametrize("argv, msg", [
    (["--prefill", "1"], "--prefill 1: a B-vector pass needs B >= 2"),
    (["--prefill", "x"], "invalid int value"),
    (["--tokens", "0"], "--tokens 0: at least 1"),
])
def test_refusals_in_one_line_before_loading(argv, msg, capsys):
    with pytest.raises(SystemExit) as e:
        chat_rtl.main(argv)
    assert e.value.code == 2
    assert msg in capsys.readouterr().err


def test_split_prompt():
    assert chat_rtl.split_prompt([1, 2, 3], 2) == ([1], [2, 3])
    assert chat_rtl.split_prompt([1, 2], 2) == ([], [1, 2])
    with pytest.raises(ValueError, match="the prompt has 2 tokens"):
        chat_rtl.split_prompt([1, 2], 3)


@pytest.mark.parametrize("fmt, B", [("int8", 2), ("q4", 2), ("ternary", 4)])
def test_split_equals_token_by_token_and_the_same_split(models, fmt, B):
    m, n = models[fmt], 3
    one = Decoder(m, make_backend("golden", m, vectors=1))
    ref = {}
    gold = list(one.generate(PROMPT, n, on_token=lambda i, t, lg: ref.setdefault("lg", lg)
                             if i == 0 else None))
    # the reference at vectors B with the same split
    t_b, mark_b = [], {}
    ids_b, lg_b = chat_rtl.split_generate(
        Decoder(m, make_backend("golden", m, vectors=B), trace=t_b, x_parts=1), PROMPT, B, n,
        switch=lambda: mark_b.setdefault("at", len(t_b)))
    # the tool's run: the head at vectors 1, then another backend at vectors B takes over
    t_mix, mark, seen = [], {}, []
    dec = Decoder(m, make_backend("golden", m, vectors=1), trace=t_mix, x_parts=1)
    other = make_backend("golden", m, vectors=B)

    def switch():
        mark["pos"], mark["at"] = dec.pos, len(t_mix)
        dec.be = other

    ids, lg = chat_rtl.split_generate(dec, PROMPT, B, n, switch=switch,
                                      before=lambda k, r: seen.append(("b", k, r, dec.pos)),
                                      after=lambda k, r: seen.append(("a", k, r, dec.pos)))
    assert ids == ids_b == gold
    assert np.array_equal(lg, ref["lg"]) and np.array_equal(lg_b, ref["lg"])
    assert mark["pos"] == len(PROMPT) - B
    assert seen == [("b", 0, B, len(PROMPT) - B), ("a", 0, B, len(PROMPT))] + [
        (w, k, 1, len(PROMPT) + k - (w == "b")) for k in range(1, n) for w in "ba"]
    tail, tail_b = t_mix[mark["at"]:], t_b[mark_b["at"]:]
    assert chat_rtl._frames_equal(tail_b, tail)
    # one B-vector weight pass for the tail: one q frame with B results per row, then n - 1
    q = [w for e in tail if e[2] == "layers.0.q" for w in e[3][:1]]
    rows = m.matrices["layers.0.q"].rows[0]
    assert [len(w) for w in q] == [rows * B + 1] + [rows + 1] * (n - 1)
    # and the head ran without the LM head
    assert [e[2] for e in t_mix[:mark["at"]]].count("lm_head") == 0


def test_split_refuses_a_backend_of_fewer_vectors(models):
    m = models["int8"]
    with pytest.raises(ValueError, match="engines take 1 vectors"):
        chat_rtl.split_generate(Decoder(m, make_backend("golden", m, vectors=1)), PROMPT, 2, 1)


@pytest.mark.parametrize("fmt", ["int8", "q4"])
def test_progress_total_of_a_b_vector_pass_is_its_beats(models, fmt):
    """The bar's total (token_beats) is what the pass's transfers send (transfer_beats, from
    the descriptors), and its matrix part is make prefill's schedule model's beats."""
    from generators.runtime.bench.prefill import Schedule
    m, B = models[fmt], 2
    out = io.StringIO()
    pb = ProgressBackend(make_backend("golden", m, vectors=B), m, out=out)
    dec = Decoder(m, pb, x_parts=1)
    totals = []

    def before(k, rows):
        pb.next_token()
        pb.total = token_beats(m, dec.pos, rows=rows)
        totals.append(pb.total)

    chat_rtl.split_generate(dec, PROMPT, B, 2, before=before,
                            after=lambda k, r: totals.append(pb.done))
    assert totals[0] == totals[1] and totals[2] == totals[3], totals
    assert totals[0] > totals[2]
    sch = Schedule(fmt, B, model=m, overlay={"max_k": ENG.max_k,
                                             "max_context": ENG.max_context})
    for ctx, rows, lm in ((3, B, 1), (5, 1, 1), (0, B, 0)):
        contexts = [ctx + j + 1 for j in range(rows)]
        assert token_beats(m, ctx, rows=rows, lm_rows=lm) == \
            sch.matrix_pass(rows, lm)[1] + sch.attention(contexts)[1], (ctx, rows, lm)
    assert "100.0%" in out.getvalue()


def test_the_tool_end_to_end_with_golden_in_place_of_the_rtl(models, monkeypatch, capsys):
    """tools/chat_rtl.py --prefill 2 on the tiny model, the rtl backend replaced by golden at
    the vectors it is asked to render (no simulator: zero cycles): the comparisons hold, the
    lines are printed, the figures go to generators.results.record (caught here)."""
    import generators.results
    import generators.runtime
    import generators.runtime.cli.chat as chat
    m = models["q4"]

    class Tok:
        def chat_ids(self, text):
            return list(PROMPT)

        def decode(self, ids):
            return " ".join(map(str, ids))

    real = generators.runtime.make_backend
    made = []

    def fake(name, model, **kw):
        if name != "rtl":
            return real(name, model, **kw)
        be = real("golden", model, vectors=kw["params"]["vectors"])
        be.cycles = {"matrix": 0, "attention": 0}
        be.beats = {"matrix": 0, "attention": 0}
        made.append(kw)
        return be

    recorded = []
    monkeypatch.setattr(generators.runtime, "make_backend", fake)
    monkeypatch.setattr(chat, "load_model", lambda *a, **k: (m, Tok(), None))
    monkeypatch.setattr(generators.results, "record",
                        lambda target, figs, **kw: recorded.append((target, figs, kw)) or "x")
    assert chat_rtl.main(["--prefill", "2", "--tokens", "2", "--format", "q4"]) == 0
    out = capsys.readouterr().out
    assert made and made[0]["params"] == {"max_k": ENG.max_k, "max_context": ENG.max_context,
                                          "kv_bits": ENG.kv_bits, "vectors": 2}
    assert "tokens equal to golden token by token: True" in out
    assert "bit-identical to it: True" in out and "golden at vectors 2: True" in out
    assert "rtl prefill pass (2 prompt tokens, positions 3..4" in out
    assert "rtl step 2 (token 3)" in out and "simulation wall time" in out
    (target, figs, kw), = recorded
    assert target == "decode" and kw["variant"] == "chat-rtl-prefill-q4"
    assert kw["command"] == "make chat-rtl FORMAT=q4 PREFILL=2 TOKENS=2"
    f = {x["key"]: x["value"] for x in figs}
    k = "decode.chat_rtl.prefill.q4"
    assert f[f"{k}.tokens"] == f[f"{k}.logits"] == f[f"{k}.words_equal"] == "equal"
    assert f[f"{k}.words"] > 0 and f"{k}.step2_cycles" in f
