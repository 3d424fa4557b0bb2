"""Prefill and several streams through B-vector matrix frames (issue 20 items 2 and 3,
docs/runtime.md 4.7): the chunked prompt and the batched streams give the token-by-token
path's logits bit for bit and its tokens, on the golden fabric behind the register model (in
this process and in a process of its own), with the C loop taking over after a prefill; each
stream's tokens equal its run alone; the memory plan counts every stream's KV cache and
refuses in one line when they do not fit. The references are runs of the same decoder on an
overlay of vectors = 1 (one frame per token: today's path, itself checked against an
independent float reference in tests/runtime/decode/test_runtime.py); the B-vector frames' words are checked
against numpy in tests/generators/test_vectors.py and the engines' benches.

These runs send x as one vector a row (``x_parts=1``, llama.cpp's blocks), so that V rows fit a
pass; x in two parts (the default where the frames take two vectors):
tests/runtime/decode/test_parts.py.

Tiny checkpoint (2 layers, hidden 192, 1 KV head, vocab 512), max_k 512, max_context 32.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from generators.runtime import Decoder, convert, load_checkpoint, make_backend
from generators.runtime.host import ops as hostops
from generators.runtime.model.checkpoint import PYNQ_Z1_ENGINES, EngineConfig, ModelConfig
from generators.runtime.engines.plan import ContextFitError, memory_plan, model_shape
from generators.runtime.model.synthetic import SMOLLM2_135M, TINY, write_checkpoint

ENG = EngineConfig(max_k=512, max_context=32)
PROMPT = [1, 2, 3, 4, 5]
SAMPLING = dict(temperature=1.0, top_k=50, seed=3)
#: matrix frames of one weight pass of the tiny model (2 layers x 7 matrices x 2 ports), and
#: of the LM head
PASS_FRAMES, HEAD_FRAMES = 2 * 7 * 2, 2


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    ck = load_checkpoint(write_checkpoint(tmp_path_factory.mktemp("tiny"), TINY, seed=1), ENG)
    return {f: convert(ck, f, ENG, notice=None) for f in ("int8", "ternary", "q4")}


def _token_by_token(m, prompt):
    """The logits after each prompt token, one frame per token (vectors 1)."""
    dec = Decoder(m, make_backend("golden", m, vectors=1), loop="python")
    return [dec.step(t) for t in prompt], dec


def _same_cache(a: Decoder, b: Decoder, sa: int = 0, sb: int = 0):
    ka, kb = a.kvs[sa], b.kvs[sb]
    n = int(ka.length.max())
    assert n == int(kb.length.max()) and np.array_equal(ka.length, kb.length)
    assert np.array_equal(ka.k_step, kb.k_step) and np.array_equal(ka.v_step, kb.v_step)
    assert np.array_equal(np.asarray(ka.K[:, :, :n]), np.asarray(kb.K[:, :, :n]))
    assert np.array_equal(np.asarray(ka.V[:, :, :n]), np.asarray(kb.V[:, :, :n]))


@pytest.mark.parametrize("fmt", ["int8", "ternary", "q4"])
def test_prefill_equals_token_by_token(models, fmt):
    """Every prompt length 1..5 in chunks of up to V = 2 and 3: the last token's logits equal
    the token-by-token path's bit for bit, the KV caches (every byte, every step) too, and the
    chunks ran as ceil(n / B) weight passes of B-vector frames plus one LM head."""
    m = models[fmt]
    ref, rdec = _token_by_token(m, PROMPT)
    for V in (2, 3):
        for n in range(1, len(PROMPT) + 1):
            be = make_backend("golden", m, vectors=V)
            dec = Decoder(m, be, x_parts=1)
            with hostops.using("numpy"):
                lg = dec.prefill(PROMPT[:n])
            assert np.array_equal(lg, ref[n - 1]), (V, n)
            assert dec.pos == n
            passes = -(-n // V)
            assert be.fabric.frames["matrix"] == passes * PASS_FRAMES + HEAD_FRAMES, (V, n)
            assert be.fabric.frames["attention"] == n * 2          # per token, per layer
            if n == len(PROMPT):
                _same_cache(dec, rdec)


@pytest.mark.parametrize("fmt", ["int8", "q4"])
def test_generate_with_prefill_equals_token_by_token(models, fmt):
    """generate(): chunked prompt, then decoding; tokens and the last logits equal, with
    sampling; on the Python loop, and with the C library built on the C loop by default
    (2-row passes: tph_step_rows) and token by token (chunk 1: tph_step)."""
    m = models[fmt]
    ref = Decoder(m, make_backend("golden", m, vectors=1), loop="python")
    want = list(ref.generate(PROMPT, 4, **SAMPLING))
    loops = [("python", None)] + ([("c", None), ("c", 1)] if hostops.active() == "c" else [])
    for loop, chunk in loops:
        dec = Decoder(m, make_backend("golden", m, vectors=2), loop=loop, x_parts=1)
        dec.chunk = chunk
        assert dec.default_chunk() == 2
        assert list(dec.generate(PROMPT, 4, **SAMPLING)) == want, loop
        assert np.array_equal(dec.last_logits, ref.last_logits), loop
        _same_cache(dec, ref)


@pytest.mark.parametrize("fmt", ["int8", "ternary", "q4"])
def test_prefill_on_the_register_model_in_another_process(models, fmt):
    """Every register access across a socket, the golden top in its own process: the chunked
    prompt's logits equal the token-by-token path's."""
    from generators.runtime.engines.golden_server import GoldenServerBackend
    m = models[fmt]
    ref, _ = _token_by_token(m, PROMPT[:3])
    be = GoldenServerBackend(m, vectors=2)
    try:
        lg = Decoder(m, be, x_parts=1).prefill(PROMPT[:3], chunk=2)
    finally:
        be.close()
    assert np.array_equal(lg, ref[-1])


@pytest.mark.parametrize("fmt", ["int8", "ternary", "q4"])
def test_streams_equal_their_single_runs(models, fmt):
    """Four prompts of different lengths on an overlay of V = 2 (steps of 2 and 2 rows) and
    V = 3 (3 and 1), a stop id that ends one stream early: each stream's tokens and last
    logits are its run alone, and its KV cache too."""
    m = models[fmt]
    prompts = [[1, 2, 3], [7, 8], [9, 10, 11, 12, 13], [4]]
    alone = []
    for p in prompts:
        d = Decoder(m, make_backend("golden", m, vectors=1), loop="python")
        alone.append((list(d.generate(p, 4, **SAMPLING)), d))
    stop = alone[1][0][1]                       # stream 1's second token: it stops there
    alone[1] = (alone[1][0][:2], alone[1][1])
    for V in (2, 3):
        be = make_backend("golden", m, vectors=V, streams=4)
        dec = Decoder(m, be, x_parts=1)
        got = dec.generate_streams(prompts, 4, stop_ids=[stop], **SAMPLING)
        for s, (toks, d) in enumerate(alone):
            assert got[s] == toks[:len(got[s])] and (got[s][-1] == stop or len(got[s]) == 4), \
                (V, s, got[s], toks)
            if s != 1:
                assert got[s] == toks
                assert np.array_equal(dec.last_logits_streams[s], d.last_logits), (V, s)
                _same_cache(dec, d, s, 0)


def test_batched_step_refusals(models):
    m = models["int8"]
    dec = Decoder(m, make_backend("golden", m, vectors=2, streams=2), x_parts=1)
    with pytest.raises(ValueError, match=r"3 rows in one weight pass; the matrix engines take "
                                         r"1\.\.2 rows of 1 vector"):
        dec.step_rows([(0, 1, False)] * 3)
    with pytest.raises(ValueError, match=r"3 prompts, the backend holds 2 streams"):
        dec.generate_streams([[1], [2], [3]], 1)
    with pytest.raises(ValueError, match=r"stream 2 outside 0\.\.1"):
        dec.step_rows([(2, 1, True)])


def test_plan_counts_every_streams_kv_cache():
    """The KV region is one cache per stream; the refusal is one line that says how many
    streams fit; the B-vector slots are counted."""
    cfg = ModelConfig(**SMOLLM2_135M)
    # q4 on the PYNQ-Z1 overlay's INT16 KV: 22.5 MiB a stream at context 1024
    one = memory_plan(model_shape(cfg, PYNQ_Z1_ENGINES, "q4"), 1024, vectors=1)
    v2 = memory_plan(model_shape(cfg, PYNQ_Z1_ENGINES, "q4"), 1024, vectors=2)
    four = memory_plan(model_shape(cfg, PYNQ_Z1_ENGINES, "q4"), 1024, vectors=2, streams=4)
    assert four.regions["kv"].nbytes == 4 * one.regions["kv"].nbytes
    assert four.kv_stream_bytes == one.regions["kv"].nbytes
    assert v2.regions["frames"].nbytes > one.regions["frames"].nbytes
    assert v2.check() is None
    msg = four.check()
    assert msg is not None and "\n" not in msg
    assert "4 streams' KV caches at context 1024" in msg and "1 stream fits at context 1024" in msg
    with pytest.raises(ContextFitError):
        four.require()
    two = memory_plan(model_shape(cfg, PYNQ_Z1_ENGINES, "q4"), 512, vectors=2, streams=2)
    assert two.check() is None
    assert any("2 streams" in line for line in two.lines())


def test_decode_takes_several_prompts(models, tmp_path, capsys):
    """``decode --prompt-ids A --prompt-ids B``: one stream each; each stream's ids are its
    run alone (the same command with one prompt); ``info --streams`` plans the caches."""
    from generators.__main__ import main
    img = models["int8"].save(tmp_path / "t.tpimg")
    base = ["decode", "--checkpoint", str(img), "--tokens", "3", "--temperature", "1",
            "--seed", "3"]
    assert main(base + ["--prompt-ids", "1,2,3", "--prompt-ids", "7,8", "--vectors", "2"]) == 0
    out = capsys.readouterr().out
    assert "2 streams, up to 2 per weight pass" in out
    for s, p in enumerate(("1,2,3", "7,8")):
        assert main(base + ["--prompt-ids", p, "--vectors", "1"]) == 0
        alone = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("[decode] ids")]
        assert f"[decode] stream {s} ids: {alone[0].split(': ')[1]}" in out
    assert main(["info", str(img), "--streams", "3", "--vectors", "2"]) == 0
    assert "3 streams, frames of up to 2 vectors" in capsys.readouterr().out
    assert main(base + ["--prompt-ids", "1", "--vectors", "0"]) == 2
    assert "error: --vectors 0: at least 1" in capsys.readouterr().err


def test_schedule_counts_the_frames_the_runtime_sends():
    """make prefill's model (generators/runtime/bench/prefill.py) counts exactly the bytes of the
    runtime's frames: one-vector passes are the images' bytes (header, x slot, rows), a
    B-vector pass adds per frame the vectors word and B - 1 more x; clocks add each frame's
    port latency; four streams at V = 2 are two passes of two."""
    from generators.runtime.bench.prefill import Schedule
    one, two = Schedule("ternary", 1), Schedule("ternary", 2)
    images = sum(sum(m.image_bytes) for m in one.shape.matrices.values())
    assert one.matrix_pass(1, 1)[1] * 8 == images
    body = sum(sum(m.image_bytes) for n, m in one.shape.matrices.items() if n != "lm_head")
    assert one.matrix_pass(1, 0)[1] * 8 == body
    extra = sum(2 * (1 + m.x_bytes // 8) for n, m in two.shape.matrices.items()
                if n != "lm_head")
    assert two.matrix_pass(2, 0)[1] == body // 8 + extra
    frames = sum(len(t.frames) for t in one.plan.transfers if t.kind != "att")
    lat = one.latency
    assert one.matrix_pass(1, 1)[0] >= one.matrix_pass(1, 1)[1] // 2 + min(lat) * frames // 2
    assert two.streams_tok_s(4) == pytest.approx(two.streams_tok_s(2))
    assert one.streams_tok_s(4) == pytest.approx(one.streams_tok_s(1))


def test_schedule_host_per_row_follows_the_pass():
    """make prefill's host model per row: a one-row pass counts the C step's figure
    (tph_step), a row of a B > 1 pass the batched C step's per-row figure, a prompt row
    without the LM head the prompt-row figures (make a9-model's ARMv7 "armv7", "armv7c2",
    "armv7p", "armv7c2p"), each at its row's context; chunk 1 on a V = 2 top is one pass per
    prompt row, each at its L, the LM head for the last only; streams' rows all sample."""
    from generators.report.decoder_model import host_ms
    from generators.runtime.bench.prefill import Schedule
    two = Schedule("q4", 2)
    n = 5                                        # passes (1, 2), (3, 4), (5: the LM head)
    want = sum(host_ms("q4", L, build="armv7c2p") for L in range(1, n)) + host_ms("q4", n)
    assert two.ttft(n)[1]["host_ms"] == pytest.approx(want)
    want = (sum(host_ms("q4", L, build="armv7c2p") for L in range(1, 4))
            + host_ms("q4", 4, build="armv7c2"))
    assert two.ttft(4)[1]["host_ms"] == pytest.approx(want)      # passes (1, 2), (3, 4: head)
    assert two.step_time([512, 512], 2)["host_ms"] == pytest.approx(
        2 * host_ms("q4", 512, build="armv7c2"))
    figs = {b: host_ms("q4", 512, build=b) for b in ("armv7", "armv7c2", "armv7p", "armv7c2p")}
    assert figs["armv7p"] < figs["armv7"] and figs["armv7c2p"] < figs["armv7c2"], figs
    want = sum(two.step_time([L], 1 if L == n else 0)["total_ms"] for L in range(1, n + 1))
    assert two.ttft(n, chunk=1)[0] == pytest.approx(want / 1e3)
    assert two.ttft(n, chunk=1)[0] > two.ttft(n)[0]              # two rows per pass save passes


def test_default_chunk_is_the_vectors_on_both_loops(models):
    """Both loops run B-row passes (the C loop's tph_step_rows): a Decoder prefills in
    chunks of the backend's vectors unless a chunk is set."""
    m = models["int8"]
    for V in (1, 2, 3):
        for loop in ("python",) + (("c",) if hostops.active() == "c" else ()):
            assert Decoder(m, make_backend("golden", m, vectors=V), loop=loop,
                           x_parts=1).default_chunk() == V


# ------------------------------------------------------------------ speculative decoding

def test_kv_undo_restores_a_requantised_cache_exactly():
    """A pass appends three rows whose K step grows at each (every cached row requantised);
    taking back the last two leaves exactly the cache that appending the first alone makes."""
    from generators.runtime.model.quantise import KVCache
    rng = np.random.default_rng(5)
    base = [rng.standard_normal((1, 64)) for _ in range(3)]
    rows = [base[0] * 0.5, base[1] * 2.0, base[2] * 8.0]       # steps grow at rows 1 and 2

    def fresh():
        kv = KVCache(1, 1, 8, 64)
        for r in base:
            kv.append(0, r, r)
        return kv
    ref = fresh()
    ref.append(0, rows[0], rows[0])
    got = fresh()
    got.begin_undo()
    for r in rows:
        got.append(0, r, r)
    assert len(got.requant_events) > len(ref.requant_events)   # the pass requantised rows
    got.end_undo(keep=1)
    assert np.array_equal(got.length, ref.length)
    assert np.array_equal(got.k_step, ref.k_step) and np.array_equal(got.v_step, ref.v_step)
    assert np.array_equal(got.K[:, :, :4], ref.K[:, :, :4])
    assert np.array_equal(got.V[:, :, :4], ref.V[:, :, :4])


def test_lookup_draft():
    from generators.runtime.decode.decoder import lookup_draft
    assert lookup_draft([1, 2, 3, 9, 1, 2], 3) == [3, 9, 1]       # the 2-gram 1 2
    assert lookup_draft([5, 6, 7, 5], 2) == [6, 7]
    assert lookup_draft([4, 4, 4], 3) == [4]                      # the most that followed
    assert lookup_draft([1, 2, 3], 3) == [] and lookup_draft([1, 1], 0) == []


@pytest.mark.parametrize("fmt", ["int8", "ternary", "q4"])
def test_speculate_keeps_the_greedy_tokens(models, fmt):
    """generate(speculate=3) on overlays of V = 2 and 4: the plain greedy run's tokens, last
    logits and KV cache; drafts were checked and some accepted (the tiny model repeats itself),
    and on V = 4 some rejected and taken back."""
    m = models[fmt]
    prompt = [1, 2, 3, 4, 1, 2, 3, 4, 1, 2]
    plain = Decoder(m, make_backend("golden", m, vectors=1), loop="python")
    want = list(plain.generate(prompt, 12))
    rejected = 0
    for V in (2, 4):
        dec = Decoder(m, make_backend("golden", m, vectors=V), x_parts=1)
        assert list(dec.generate(prompt, 12, speculate=3)) == want, V
        assert np.array_equal(dec.last_logits, plain.last_logits)
        _same_cache(dec, plain)
        sp = dec.speculation
        assert sp["accepted"] > 0 and sp["passes"] < 12, sp
        rejected += sp["drafted"] - sp["accepted"]
    assert rejected > 0 or fmt != "int8"
    with pytest.raises(ValueError, match="temperature 0"):
        list(dec.generate(prompt, 2, temperature=1.0, speculate=2))


def test_decode_speculate(models, tmp_path, capsys):
    from generators.__main__ import main
    img = models["int8"].save(tmp_path / "t.tpimg")
    base = ["decode", "--checkpoint", str(img), "--tokens", "10", "--prompt-ids",
            "1,2,3,4,1,2,3,4,1,2"]
    assert main(base + ["--vectors", "1"]) == 0
    plain = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("[decode] ids")]
    # drafts ride in the pass's other row: x in one part (the default, two parts, fills it)
    assert main(base + ["--vectors", "2", "--x-parts", "1", "--speculate", "1"]) == 0
    out = capsys.readouterr().out
    drafted = re.search(r"speculation: (\d+) of (\d+) drafted tokens accepted", out)
    assert plain[0] in out and drafted and int(drafted.group(2)) > 0, out
    assert main(base + ["--vectors", "2", "--speculate", "1"]) == 2
    assert ("error: --speculate 1: a weight pass here holds 1 row (x in 2 part(s), frames of 2 "
            "vector(s))") in capsys.readouterr().err
    assert main(base + ["--vectors", "1", "--x-parts", "2"]) == 2
    assert ("error: --x-parts 2: the matrix engines here take 1 vector(s) a frame; two parts "
            "need 2") in capsys.readouterr().err
    assert main(base + ["--speculate", "2", "--temperature", "1"]) == 2
    assert "error: --speculate keeps greedy output only" in capsys.readouterr().err


@pytest.mark.long        # SmolLM2-135M on golden: about 3 minutes on 2 loaded cores
def test_smollm2_speculate_keeps_the_greedy_answer():
    """SmolLM2-135M Q4_1 (the default image), a prompt that asks to repeat a paragraph, 16
    greedy tokens: --speculate 1 on vectors 2 and --speculate 3 on vectors 4 give the plain
    run's tokens and last logits; drafts are accepted. The plain run prefills token by token
    (vectors 1), so this is also SmolLM2's prefill against the token-by-token path."""
    from generators.runtime.cli.chat import load_model
    from generators.runtime.bench.prefill import REPEAT
    model, tok, _ = load_model(None, "q4")
    para = "Four score and seven years ago our fathers brought forth on this continent, " \
           "a new nation, conceived in Liberty."
    ids = tok.chat_ids(REPEAT.format(paragraph=para))
    plain = Decoder(model, make_backend("golden", model, vectors=1))
    want = list(plain.generate(ids, 16))
    for V in (2, 4):
        dec = Decoder(model, make_backend("golden", model, vectors=V), x_parts=1)
        assert list(dec.generate(ids, 16, speculate=V - 1)) == want, (V, tok.decode(want))
        assert np.array_equal(dec.last_logits, plain.last_logits)
        assert dec.speculation["accepted"] > 0, dec.speculation


@pytest.mark.parametrize("kind, channel, after", [
    ("hang", "mm2s", 1),         # port 0's second transfer: layer 0's first attention row
    ("error", "s2mm", 2),        # port 0's third: the second attention row (the block again)
    ("short", "mm2s", 0),        # the first: q+k+v as 2-vector frames
])
def test_prefill_survives_a_fault(models, kind, channel, after):
    """A fault in a 2-vector pass (a B-vector matrix transfer, an attention block run again):
    the runtime resets both DMAs, restarts the channels where the chains stand and retries;
    the prompt's logits equal the token-by-token path's."""
    m = models["int8"]
    ref, _ = _token_by_token(m, PROMPT[:3])
    be = make_backend("golden", m, vectors=2)
    be.timeout_s = 0.5
    be.regs[0].inject(kind, channel, after=after)
    lg = Decoder(m, be, x_parts=1).prefill(PROMPT[:3], chunk=2)   # 2-vector passes, any loop
    assert len(be.faults) == 1, be.faults
    assert np.array_equal(lg, ref[-1])


def test_chat_batch_answers_each_line_as_alone(tmp_path, monkeypatch, capsys):
    """chat --batch: two stdin questions as two streams; each answer is the one-stream run's."""
    import io
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    import gguf_files
    from generators.__main__ import main
    from generators.runtime.cli.chat import load_model
    p = tmp_path / "tiny.gguf"
    gguf_files.write_llama(p)
    qs = ["hello there", "what is this"]
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join(qs) + "\n\n"))
    assert main(["chat", "--model", str(p), "--format", "int8", "--batch", "--tokens", "4"]) == 0
    out = capsys.readouterr()
    from generators.designs.overlay import PYNQ_Z1_VECTORS
    assert f"2 streams, up to {PYNQ_Z1_VECTORS} per weight pass" in out.err
    model, tok, _ = load_model(p, "int8")
    want = []
    for q in qs:
        ids = list(Decoder(model, make_backend("golden", model, vectors=1)).generate(
            tok.chat_ids(q), 4, stop_ids=tok.eos_ids))
        want += [f"> {q}", tok.decode([t for t in ids if t not in tok.eos_ids])]
    assert out.out.splitlines() == want
    monkeypatch.setattr(sys, "stdin", io.StringIO("hi\n"))
    assert main(["chat", "--model", str(p), "--batch", "--prompt", "x"]) == 2
