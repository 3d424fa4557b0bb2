"""Proof of the decoder on the RTL: the overlay top (two matrix engines, the joiner and the
48-MAC attention engine) in a cocotb co-simulation, driven by the same DMA-channel host code as
the board, gives the golden backend's tokens and bit-identical engine output words; the rtl
runs use the host ops' C library, golden their numpy twin (the same bits: docs/runtime.md 9).

Tiny checkpoint (2 layers, hidden 192 = 3 heads x 64, 1 KV head, MLP 512, vocab 512), overlay
rendered with max_k 512 and max_context 16 and vectors 2 (`RTL_VECTORS`, the PYNQ-Z1 top's
`PYNQ_Z1_VECTORS`, docs/vectors.md; make test-long runs a one-vector top as well): the prompts
run in chunks of 2 tokens through B-vector frames (prefill, docs/runtime.md 4.7), the golden
run with the same vectors so that every engine word compares, and the RTL's tokens and logits
equal the token-by-token path's too (golden, vectors 1). Verilator: all three weight formats
(INT8, 6 tokens after a 3-token prompt: a 2-vector and a 1-vector pass, 5 decoder steps;
ternary, 8 tokens after a 2-token prompt; Q4_1, requantised from the float checkpoint,
2 tokens after a 2-token prompt: every matrix a format-0x04 frame on both ports, through the
overlay's Q4_1 lanes); Icarus:
ternary, 1 token after a 1-token prompt (one decoder step: every matrix on both ports and
both layers' attention; Icarus runs this top at a few hundred clocks per second).
"""
from __future__ import annotations

import io
import json

import numpy as np
import pytest

from generators.runtime import Decoder, convert, load_checkpoint, make_backend
from generators.runtime.host import ops as hostops
from generators.designs.overlay import PYNQ_Z1_VECTORS
from generators.runtime.cli import selftest as st
from generators.runtime.model.checkpoint import EngineConfig
from generators.runtime.model.synthetic import TINY, write_checkpoint

ENG = EngineConfig(max_k=512, max_context=16)
#: the rendered top's vectors, the bitstream's: B-vector frames on the RTL (prefill, streams,
#: speculation)
RTL_VECTORS = PYNQ_Z1_VECTORS
assert RTL_VECTORS >= 2, "the prefill assertions below take chunks of RTL_VECTORS >= 2 tokens"


def _rtl(m, **kw):
    """The rtl backend on the overlay at ENG's sizes and RTL_VECTORS (one Verilator build)."""
    from generators.runtime.engines.rtl import overlay_params
    return make_backend("rtl", m, params=dict(overlay_params(ENG), vectors=RTL_VECTORS), **kw)


@pytest.fixture(scope="module")
def ck(tmp_path_factory):
    return load_checkpoint(write_checkpoint(tmp_path_factory.mktemp("tiny"), TINY, seed=1), ENG)


def _compare(t_gold, t_rtl):
    assert len(t_gold) == len(t_rtl), (len(t_gold), len(t_rtl))
    for a, b in zip(t_gold, t_rtl):
        assert a[:3] == b[:3]
        assert len(a[3]) == len(b[3])
        for p, (x, y) in enumerate(zip(a[3], b[3])):
            assert np.array_equal(x, y), f"{a[0]} layer {a[1]} {a[2]} port {p} differs"


@pytest.mark.parametrize("sim, fmt, prompt, tokens, sampling", [
    ("verilator", "int8", [1, 2, 3], 6, dict(temperature=1.0, top_k=50, seed=3)),
    ("verilator", "ternary", [1, 2], 8, dict(temperature=1.0, seed=4)),
    ("verilator", "q4", [1, 2], 2, dict(temperature=1.0, seed=6)),
    # the PL top on Icarus is in make test (tests/sim/test_sim_overlay.py); the decoder on it is long
    pytest.param("icarus", "ternary", [1], 1, dict(temperature=1.0, seed=5), marks=pytest.mark.long),
])
def test_rtl_equals_golden(ck, sim, fmt, prompt, tokens, sampling):
    m = convert(ck, fmt, ENG, notice=None)        # q4: the float checkpoint requantised
    t_gold, t_rtl = [], []
    with hostops.using("numpy"):                  # golden with the host ops' numpy path,
        gold = list(Decoder(m, make_backend("golden", m, vectors=RTL_VECTORS),
                            trace=t_gold).generate(prompt, tokens, **sampling))
        one = Decoder(m, make_backend("golden", m, vectors=RTL_VECTORS))
        one.chunk = 1                             # token by token
        by_token = list(one.generate(prompt, tokens, **sampling))
    be = _rtl(m, simulator=sim)
    try:
        assert be.plan.vectors == RTL_VECTORS
        with hostops.using("c"):                  # the RTL with their C path (docs/runtime.md 9)
            dec = Decoder(m, be, trace=t_rtl)
            # int8 and q4: x in two parts (the default at V = 2: every matrix of blocks a
            # 2-vector frame, one row a pass); ternary: 2-row prefill passes
            assert dec.parts() == (1 if fmt == "ternary" else 2)
            dec.chunk = dec.rows_per_pass
            rtl = list(dec.generate(prompt, tokens, **sampling))
    finally:
        be.close()
    print(f"{sim} {fmt}: tokens {rtl}, simulated cycles {be.cycles}")
    assert len(rtl) == tokens
    assert rtl == gold == by_token
    assert np.array_equal(dec.last_logits, one.last_logits)
    _compare(t_gold, t_rtl)
    n_q = sum(1 for t in t_rtl if t[0] == "matrix" and t[2] == "layers.0.q")
    assert n_q == -(-len(prompt) // dec.rows_per_pass) + tokens - 1     # weight passes
    n_att = sum(1 for t in t_rtl if t[0] == "attention")
    assert n_att == (len(prompt) + tokens - 1) * 2          # one frame per layer (1 KV head)
    assert be.cycles["matrix"] > 0 and be.cycles["attention"] > 0


@pytest.mark.long
def test_rtl_on_the_one_vector_top(ck):
    """The runtime on a top built at vectors 1 (the top before B-vector frames, `vectors=1`):
    every frame one-vector, the prompt token by token; the golden backend's tokens and
    words."""
    from generators.runtime.engines.rtl import overlay_params
    m = convert(ck, "int8", ENG, notice=None)
    t_gold, t_rtl = [], []
    with hostops.using("numpy"):
        gold = list(Decoder(m, make_backend("golden", m, vectors=1),
                            trace=t_gold).generate([1, 2], 2, seed=7))
    be = make_backend("rtl", m, params=dict(overlay_params(ENG), vectors=1))
    try:
        assert be.manifest["matrix"]["vectors"] == 1
        with hostops.using("c"):
            rtl = list(Decoder(m, be, trace=t_rtl).generate([1, 2], 2, seed=7))
    finally:
        be.close()
    assert rtl == gold
    _compare(t_gold, t_rtl)


def test_rtl_status_flags_raise_with_layer_and_matrix(ck, tmp_path):
    """A byte no 5 trits make (250) in layer 0's k_proj, port 1 half: the RTL engine answers
    BAD_TRIT and the decoder names the flag, the layer, the matrix and the port."""
    from generators.runtime import EngineError, Model
    m = Model.load(convert(ck, "ternary", ENG).save(tmp_path / "t.tpimg"))
    q = m.matrices["layers.0.k"]
    q.images[1][8 + q.x_bytes + 5] = 250
    be = _rtl(m)
    try:
        with pytest.raises(EngineError, match=r"BAD_TRIT \(layer 0, matrix k, port 1"):
            list(Decoder(m, be).generate([1], 1))
    finally:
        be.close()


@pytest.mark.long       # the Verilator overlay build is shared with the tests above; ~1 minute
def test_rtl_cycles_of_a_b_vector_pass_bound_the_schedule_model(ck):
    """make prefill's model (generators/runtime/bench/prefill.py: each frame beats + the top's port
    latency) against the simulated clocks of the same passes on the RTL: a 2-vector pass
    (a 2-token prefill with the LM head for its last row) and a one-vector pass (a decode step)
    take at least the busier port's beats and at most the model's clocks, within 1 %."""
    from generators.runtime.bench.prefill import Schedule
    m = convert(ck, "int8", ENG, notice=None)
    be = _rtl(m)
    try:
        dec = Decoder(m, be, x_parts=1)                 # B rows of one part each
        with hostops.using("c"):
            dec.prefill([1, 2], chunk=2)              # one 2-vector pass (the C loop's default: 1)
            two = be.cycles["matrix"]
            dec.step(3)
            one = be.cycles["matrix"] - two
    finally:
        be.close()
    sch = Schedule("int8", RTL_VECTORS, model=m,
                   overlay={"max_k": ENG.max_k, "max_context": ENG.max_context})
    for B, sim in ((2, two), (1, one)):
        model, beats = sch.matrix_pass(B, 1)
        print(f"B {B}: simulated {sim} matrix clocks, modelled {model}, beats {beats}")
        assert beats / 2 <= sim <= model <= sim * 1.01, (B, sim, model, beats)


@pytest.mark.long       # ~1 minute with the overlay's Verilator build reused
def test_rtl_streams_and_speculation_equal_their_plain_runs(ck):
    """Two streams (each its own KV cache, every decode step one 2-vector pass) and a greedy
    run with --speculate 1 on the RTL: each stream's tokens and the speculative run's tokens
    and last logits are golden's plain runs (vectors 1)."""
    m = convert(ck, "ternary", ENG, notice=None)
    prompts = [[1, 2], [3]]
    alone = [list(Decoder(m, make_backend("golden", m, vectors=1)).generate(
        p, 3, temperature=1.0, seed=4)) for p in prompts]
    rep = [1, 2, 3, 1, 2]
    plain = Decoder(m, make_backend("golden", m, vectors=1))
    greedy = list(plain.generate(rep, 4))
    be = _rtl(m, streams=2)
    try:
        dec = Decoder(m, be)
        assert dec.generate_streams(prompts, 3, temperature=1.0, seed=4) == alone
        assert list(dec.generate(rep, 4, speculate=1)) == greedy
        assert np.array_equal(dec.last_logits, plain.last_logits)
        assert dec.speculation["drafted"] > 0
    finally:
        be.close()


def test_selftest_on_the_rtl_backend(tmp_path):
    """``ternary-pynq selftest`` on the rendered top (max_k 512, max_context 16, the PYNQ-Z1
    vectors: this file's build) in Verilator: every output word of every frame kind equals the
    golden models'; speeds labelled simulated (generators/runtime/cli/selftest.py)."""
    t = st.rtl_target({"max_k": ENG.max_k, "max_context": ENG.max_context,
                       "vectors": RTL_VECTORS})
    out, path = io.StringIO(), tmp_path / "selftest.json"
    try:
        rc = st.run_selftest(t, 2, seed=3, speed_rows=16, progress=io.StringIO(), out=out,
                             json_path=str(path))
    finally:
        t.close()
    out = out.getvalue()
    res = json.loads(path.read_text())
    assert rc == 0, out
    assert "simulated (rtl backend)" in res["verdict"]
    assert set(res["engines"]) == {"int8", "ternary", "q4", "q4_q8_1", "q8_0", "attention",
                                   "bad"}
    for name in ("port 0", "port 1", "both"):
        e = res["speed"][name]
        assert e["label"] == "simulated" and e["gb_s"] > 0 and e["gweights_s"] > 0, e
