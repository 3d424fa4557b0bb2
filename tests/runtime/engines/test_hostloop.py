"""The decoder's per-token step in C (generators/runtime/host/csrc/tphloop.c, hostloop.py) against
the Python loop on numpy (the reference, decoder.py / backends.py), on the tiny checkpoint:

* golden (the register model and the golden PL top in this process), INT8, ternary and Q4_1,
  greedy and sampled: every engine word, every logit bit, every token, the CPU's bytes, the
  transfers and register accesses per token equal;
* the register model in another process (its accesses over a socket, as the rtl backend's;
  tests/runtime/engines/test_runtime_rtl.py runs the C loop on the RTL itself), and the two loops taking
  turns on one runtime (they share its chains' state);
* the batched step (tph_step_rows against Decoder.step_rows' Python loop): prefill chunks of
  2 and 3 rows, several streams, speculation whose drafts are taken back (the running
  absmax: the rows saved before a requantisation), every word, bit, byte and count equal;
* the same errors with the same messages: DMA faults twice in a row (the faults survived once
  are tests/runtime/engines/test_runtime_dma.py's, on both loops), engine flags, a NaN in the activations,
  the same in a batched pass;
* the replay backend (recorded engine words, no compute: make host-bench's) gives the
  recorded step's logits bit for bit on both loops, and so does the C step without Python
  (csrc/tphbench.c) on x86-64 and on ARMv7 under qemu-arm (32-bit pointers; VFP and NEON
  builds: the NEON build runs the kernels' NEON bodies);
* the register interface's direct path (the board's mapped pages), the table's checks, the
  generated facts header.
"""
from __future__ import annotations

import ctypes
import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from generators.runtime import Decoder, convert, load_checkpoint
from generators.runtime.engines import cloop as hostloop
from generators.runtime.engines import replay as rp
from generators.runtime.host import ops as hostops
from generators.runtime import make_backend
from generators.runtime.engines import pg021 as R
from generators.runtime.engines.runtime import DmaError, DmaHangError, DmaShortError
from generators.runtime.model.checkpoint import EngineConfig
from generators.runtime.engines.sgdma import DmaResetError
from generators.runtime.model.synthetic import TINY, write_checkpoint

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import armv7  # noqa: E402
from engine_flags import dma_results, flag_answers  # noqa: E402

ENG = EngineConfig(max_k=512, max_context=32)
CSRC = hostloop.HERE / "csrc"
LOOP_SOURCES = [CSRC / "tphbench.c", CSRC / "tphloop.c", CSRC / "tphreplay.c",
                CSRC / "tphost.c", CSRC / "tphwork.c"]
PROMPT = [1, 2, 3]

MODEL_SEED = 1


@pytest.fixture(scope="module")
def models(c_models):
    return c_models


def _run(m, be, loop, prompt=PROMPT, tokens=6, **sampling):
    """Tokens, engine words, logits, CPU bytes per token, transfers and register accesses of
    one generation; the Python loop runs the numpy host ops (the reference)."""
    trace, logits, nbytes = [], [], []
    with hostops.using("numpy" if loop == "python" else "c"):
        dec = Decoder(m, be, trace=trace, loop=loop)
        toks = list(dec.generate(prompt, tokens, on_token=lambda i, t, lg: (
            logits.append(lg.copy()), nbytes.append(dict(dec.token_bytes))), **sampling))
    rt, kv = be.runtime, dec.kv
    return dict(toks=toks, trace=trace, logits=logits, bytes=nbytes, threads=_threads(rt),
                counts=(rt.transfers_run, rt.tail_writes, [d.reads for d in rt.dmas],
                        [d.writes for d in rt.dmas], dict(rt.cpu_total)),
                kv=dict(fixed=kv.fixed, clipped=kv.clipped, requantised=kv.requantised,
                        written=kv.written, length=kv.length.tolist(),
                        steps=(kv.k_step.copy(), kv.v_step.copy()),
                        K=np.array(kv.K), V=np.array(kv.V)))


def _threads(rt):
    """The threads of the runtime's C loop (None: the C loop did not run)."""
    cl = getattr(rt, "_cloop", None)
    return None if cl is None else cl.threads


def _same_run(a, b):
    assert a["toks"] == b["toks"]
    assert len(a["trace"]) == len(b["trace"]) > 0
    for x, y in zip(a["trace"], b["trace"]):
        assert x[:3] == y[:3] and len(x[3]) == len(y[3]), (x[:3], y[:3])
        assert all(np.array_equal(u, v) for u, v in zip(x[3], y[3])), x[:3]
    assert len(a["logits"]) == len(b["logits"])
    for u, v in zip(a["logits"], b["logits"]):
        assert u.dtype == v.dtype == np.float32 and np.array_equal(u.view(np.uint32),
                                                                   v.view(np.uint32))
    assert a["bytes"] == b["bytes"]
    ka, kb = a["kv"], b["kv"]
    for k in ("fixed", "clipped", "requantised", "written", "length"):
        assert ka[k] == kb[k], k
    for u, v in zip(ka["steps"], kb["steps"]):
        assert u.dtype == v.dtype == np.float32 and np.array_equal(u.view(np.uint32),
                                                                   v.view(np.uint32))
    assert np.array_equal(ka["K"], kb["K"]) and np.array_equal(ka["V"], kb["V"])


def test_facts_header_is_current():
    assert hostloop.FACTS.read_text() == hostloop.c_facts(), \
        "csrc/tphfacts.h is stale: python tools/tphfacts.py"


@pytest.mark.parametrize("fmt, sampling", [("int8", {}), ("ternary", {}), ("q4", {}),
                                           ("int8", dict(temperature=1.0, top_k=20, seed=7))])
def test_c_loop_equals_the_python_loop_on_golden(models, fmt, sampling):
    m = models[fmt]
    ref = _run(m, make_backend("golden", m), "python", **sampling)
    got = _run(m, make_backend("golden", m), "c", **sampling)
    _same_run(ref, got)
    assert ref["counts"] == got["counts"]       # transfers, TAILDESC writes, reads, writes


@pytest.mark.parametrize("policy", ["calibrated", "tight", "running"])
def test_c_loop_equals_the_python_loop_for_each_kv_policy(models, policy):
    """The KV cache's two rules in C as in Python: fixed steps (the conversion's calibrated
    ones; a quarter of them, so that many values clip: every row clipped to +-127 and the
    clipped values counted, nothing requantised) and the running absmax (a model without
    steps: growth and requantisation). Every engine word, logit, K/V byte, step and count."""
    m = models["int8"]
    assert m.kv_steps is not None                 # the default conversion calibrates them
    if policy == "tight":
        m = dataclasses.replace(m, kv_steps=(m.kv_steps * np.float32(0.25)).astype(np.float32))
    elif policy == "running":
        m = dataclasses.replace(m, kv_steps=None)
    ref = _run(m, make_backend("golden", m), "python", tokens=8)
    got = _run(m, make_backend("golden", m), "c", tokens=8)
    _same_run(ref, got)
    assert ref["counts"] == got["counts"]
    kv = got["kv"]
    assert kv["fixed"] == (policy != "running")
    if policy == "running":
        assert kv["clipped"] == 0 and kv["requantised"] > 0
    else:
        assert kv["requantised"] == 0 and all(b["requant"] == 0 for b in got["bytes"])
        # the clipped count, from the stored rows: a clipped value is stored as +-127 (a
        # value that rounds to 127 without clipping is stored so too: at least as many)
        n127 = sum(int(np.count_nonzero(np.abs(kv[w].astype(np.int16)) == 127)) for w in "KV")
        assert (kv["clipped"] > 0) == (policy == "tight") and kv["clipped"] <= n127


def test_c_loop_on_the_register_model_in_another_process(models):
    """Every register access a callback across a socket (the rtl backend's path)."""
    from generators.runtime.engines.golden_server import GoldenServerBackend
    m = models["q4"]
    ref = _run(m, make_backend("golden", m), "python", tokens=3)
    be = GoldenServerBackend(m)
    try:
        got = _run(m, be, "c", tokens=3)
    finally:
        be.close()
    _same_run(ref, got)


def test_the_loops_take_turns_on_one_runtime(models):
    """The prompt on the Python loop, the answer on the C loop, then Python again, on one
    runtime (its chains' state is shared), and a switch of backend in the middle."""
    m = models["int8"]
    ref = _run(m, make_backend("golden", m), "python", tokens=5)
    first, second = make_backend("golden", m), make_backend("golden", m)
    trace = []
    dec = Decoder(m, first, trace=trace, loop="python")

    def on_token(i, t, lg):
        dec.loop = ("c", "python", "c", "c", "c")[i]
        if i == 2:
            dec.be = second

    toks = list(dec.generate(PROMPT, 5, on_token=on_token))
    assert toks == ref["toks"]
    assert all(x[:3] == y[:3] and all(np.array_equal(u, v) for u, v in zip(x[3], y[3]))
               for x, y in zip(trace, ref["trace"])) and len(trace) == len(ref["trace"])


@pytest.mark.parametrize("kind, channel, kw", [
    ("hang", "s2mm", {}), ("error", "mm2s", dict(error=R.SR_DMA_DEC_ERR)), ("short", "mm2s", {}),
])
def test_a_persistent_fault_raises_the_same_error_on_both_loops(models, kind, channel, kw):
    m = models["int8"]
    msgs = {}
    for loop in ("python", "c"):
        be = make_backend("golden", m, timeout_s=0.05)
        be.regs[0].inject(kind, channel, after=3, count=2, **kw)
        with pytest.raises((DmaError, DmaHangError, DmaShortError)) as e:
            list(Decoder(m, be, loop=loop).generate(PROMPT, 2))
        info = {k: v for k, v in e.value.info.items() if k != "cls"}
        msgs[loop] = (type(e.value), str(e.value), info, list(be.faults))
    assert msgs["python"] == msgs["c"]
    assert "retried after a reset" in msgs["c"][3][0]


def test_engine_flags_and_bad_values_raise_the_same_errors(models):
    m = models["ternary"]
    cases = [
        (lambda t, f, p: f.name == "layers.1.o" and p == 0, 0x20),     # BAD_TRIT, port 0
        (lambda t, f, p: t.kind == "att" and t.layer == 1, 0x10),      # LONG_FRAME
        (lambda t, f, p: t.kind == "lm_head" and p == 1, 0x01),       # BAD_MAGIC
    ]
    for select, flags in cases:
        msgs = []
        for loop in ("python", "c"):
            be = flag_answers(make_backend("golden", m), select, flags)
            with pytest.raises(Exception) as e:
                list(Decoder(m, be, loop=loop).generate(PROMPT, 1))
            msgs.append((type(e.value).__name__, str(e.value)))
        assert msgs[0] == msgs[1] and msgs[0][0] == "EngineError", msgs
    # a NaN in a norm: the activations cannot be quantised (hostops' ValueError, both loops)
    bad = dataclasses.replace(m, norms=dict(m.norms))
    bad.norms["layers.1.post"] = np.array(m.norms["layers.1.post"], copy=True)
    bad.norms["layers.1.post"][5] = np.nan
    msgs = []
    for loop in ("python", "c"):
        with hostops.using("numpy" if loop == "python" else "c"):
            with pytest.raises(ValueError) as e:
                list(Decoder(bad, make_backend("golden", bad), loop=loop).generate(PROMPT, 1))
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1] == "quantise: x holds NaN or infinity"


# ------------------------------------------------------------------ the batched step

def _run_rows(m, V, loop, what, streams=1):
    """A batched run on a golden top of ``vectors`` V: "prefill" (a 5-token prompt in
    chunks of V, then 3 tokens), "streams" (three prompts as streams, 3 tokens each) or
    "speculate" (greedy with drafts of up to V - 1 tokens); what _same_run compares, every
    stream's cache, and the runtime's shared chain state after it."""
    trace, logits, nbytes = [], [], []
    be = make_backend("golden", m, vectors=V, streams=streams)
    with hostops.using("numpy" if loop == "python" else "c"):
        dec = Decoder(m, be, trace=trace, loop=loop, x_parts=1)    # V rows a pass
        if what == "streams":
            toks = dec.generate_streams([[1, 2, 3], [7, 8], [9, 10, 11, 12]], 3,
                                        on_token=lambda s, i, t: nbytes.append(
                                            dict(dec.token_bytes)))
            logits = [dec.last_logits_streams[s] for s in sorted(dec.last_logits_streams)]
        else:
            kw = dict(speculate=V - 1) if what == "speculate" else {}
            prompt = [1, 2, 3, 4, 1, 2, 3, 4, 1, 2] if what == "speculate" else [1, 2, 3, 4, 5]
            toks = list(dec.generate(prompt, 8 if what == "speculate" else 3,
                                     on_token=lambda i, t, lg: (logits.append(lg.copy()),
                                                                nbytes.append(dict(
                                                                    dec.token_bytes))),
                                     **kw))
    rt = be.runtime
    kvs = [dict(fixed=kv.fixed, clipped=kv.clipped, requantised=kv.requantised,
                written=kv.written, length=kv.length.tolist(),
                steps=(kv.k_step.copy(), kv.v_step.copy()), K=np.array(kv.K), V=np.array(kv.V))
           for kv in dec.kvs]
    return dict(toks=toks, trace=trace, logits=logits, bytes=nbytes, kv=kvs[0], kvs=kvs,
                threads=_threads(rt),
                counts=(rt.transfers_run, rt.tail_writes, [d.reads for d in rt.dmas],
                        [d.writes for d in rt.dmas], dict(rt.cpu_total)),
                xstate=rt.xstate.copy(), spec=getattr(dec, "speculation", None),
                words=np.array(rt.words))


@pytest.mark.parametrize("fmt, V, what, policy", [
    ("int8", 2, "prefill", "calibrated"), ("ternary", 3, "prefill", "calibrated"),
    ("ternary", 16, "prefill", "calibrated"),       # the engines' largest V: a 5-row pass
    ("q4", 2, "prefill", "running"), ("int8", 2, "streams", "calibrated"),
    ("q4", 3, "streams", "running"), ("int8", 4, "speculate", "running"),
    ("q4", 3, "speculate", "calibrated"),
])
def test_batched_c_step_equals_the_python_loop(models, fmt, V, what, policy):
    """tph_step_rows against Decoder.step_rows' Python loop on numpy: every engine word (each
    row's attention frames in row order), logit bit and token, the CPU's bytes per step, the
    transfers, TAILDESC writes and register accesses, every stream's KV cache (bytes, steps,
    counts), the speculation's counts, the descriptors in DMA memory word for word and the
    chains' shared state after it (back to one-vector frames on stream 0)."""
    m = models[fmt]
    if policy == "running":                       # growth, requantisation (and its undo)
        m = dataclasses.replace(m, kv_steps=None)
    streams = 3 if what == "streams" else 1
    ref = _run_rows(m, V, "python", what, streams)
    got = _run_rows(m, V, "c", what, streams)
    _same_run(ref, got)
    assert ref["counts"] == got["counts"]
    for a, b in zip(ref["kvs"], got["kvs"]):
        _same_run(dict(ref, kv=a), dict(got, kv=b))
    assert ref["spec"] == got["spec"]
    assert np.array_equal(ref["words"], got["words"])
    assert np.array_equal(ref["xstate"], got["xstate"])
    assert (got["xstate"][0] == 1).all() and not got["xstate"][1:].any()
    if what == "speculate":
        assert got["spec"]["accepted"] > 0, got["spec"]
        if policy == "running":
            assert got["spec"]["drafted"] > got["spec"]["accepted"], got["spec"]
            assert got["kv"]["requantised"] > 0


@pytest.mark.parametrize("what", ["generate", "speculate", "streams", "sampled"])
def test_one_and_two_threads_give_the_same_run(models, monkeypatch, what):
    """The C step with its worker thread (TERNARY_PYNQ_THREADS=2: the LM head's
    dequantisation by port and the argmax by halves on two cores, one row or B rows) and
    without it (1): the same tokens, logits, engine words, bytes and counts."""
    m = models["q4"]
    runs = {}
    for n in (2, 1):
        monkeypatch.setenv(hostloop.THREADS_ENV, str(n))
        if what == "generate":
            runs[n] = _run(m, make_backend("golden", m), "c")
        elif what == "sampled":
            runs[n] = _run(m, make_backend("golden", m), "c", temperature=1.0, top_k=20, seed=3)
        else:
            runs[n] = _run_rows(m, 3, "c", what, 3 if what == "streams" else 1)
        assert runs[n]["threads"] == n
    _same_run(runs[1], runs[2])
    assert runs[1]["counts"] == runs[2]["counts"]


def test_the_worker_spins_on_the_board_only(models):
    """The C loop's idle worker spins cloop.SPIN_US before it sleeps on the board, where the
    engines run while the CPU waits; on a backend that models the engines on this CPU it
    sleeps at once (a spinning worker took the model's core: a SmolLM2 prompt pass on golden
    ran 16 times slower on a loaded 2-core machine)."""
    from generators.runtime.engines.board import BoardBackend
    from generators.runtime.engines.runtime import DmaRuntime
    assert BoardBackend.worker_spin_us == hostloop.SPIN_US > 0
    assert DmaRuntime.worker_spin_us == 0
    m = models["q4"]
    be = make_backend("golden", m)
    cl = hostloop.for_runtime(be)
    assert cl is not None and cl.spin_us == 0 and cl.threads == hostloop.default_threads()


def test_the_threads_setting_is_checked(monkeypatch):
    monkeypatch.setenv(hostloop.THREADS_ENV, "3")
    with pytest.raises(ValueError, match="TERNARY_PYNQ_THREADS='3': 1 or 2"):
        hostloop.default_threads()
    monkeypatch.delenv(hostloop.THREADS_ENV)
    assert hostloop.default_threads() == 2


@pytest.mark.parametrize("kind, channel, kw", [
    ("hang", "s2mm", {}), ("short", "mm2s", {}),
])
def test_a_persistent_fault_in_a_batched_pass_raises_the_same_error(models, kind, channel, kw):
    """A fault twice in a row in a 2-row pass: the same exception and message on both loops,
    and the chains restored (one-vector frames, stream 0) whatever the loop."""
    m = models["int8"]
    msgs = {}
    for loop in ("python", "c"):
        be = make_backend("golden", m, vectors=2, timeout_s=0.05)
        be.regs[0].inject(kind, channel, after=4, count=2, **kw)
        with pytest.raises((DmaError, DmaHangError, DmaShortError)) as e:
            Decoder(m, be, loop=loop).prefill(PROMPT, chunk=2)
        info = {k: v for k, v in e.value.info.items() if k != "cls"}
        msgs[loop] = (type(e.value), str(e.value), info, list(be.faults),
                      be.xstate.tolist(), np.array(be.words))
    p, c = msgs["python"], msgs["c"]
    assert p[:5] == c[:5] and np.array_equal(p[5], c[5])
    assert "retried after a reset" in c[3][0]


def _count_off(be, name):
    """The status word of matrix ``name``'s port 0 answer counts one row more."""
    rt = be.runtime

    def hook(index: int, done: bool) -> None:
        if done:
            t, w, d = rt.plan.transfers[index], rt.words, dma_results(rt)
            for fi, p, status, off in rt._tx[index].outs:
                if t.frames[fi].name == name and p == 0:
                    d[off + (int(w[status] & R.LEN_MASK) >> 2) - 1] += 1 << 16

    rt.transfer_hooks.append(hook)
    return be


def test_engine_answers_in_a_batched_pass_raise_the_same_errors(models):
    """An engine's flags in a 2-vector matrix frame and in the second row's attention frame,
    and a count that is not the frame's rows: the same EngineError on both loops (the count's
    message names the 2 vectors)."""
    m = models["q4"]
    cases = [
        (lambda be: flag_answers(be, lambda t, f, p: f.name == "layers.0.gate" and p == 1,
                                 0x20), "BAD_SCALE"),
        (lambda be: flag_answers(be, lambda t, f, p: t.kind == "att" and t.layer == 1, 0x08),
         "SHORT_FRAME"),
        (lambda be: _count_off(be, "layers.1.down"), "2 vectors"),
    ]
    for spoil, name in cases:
        msgs = []
        for loop in ("python", "c"):
            be = spoil(make_backend("golden", m, vectors=2))
            with pytest.raises(Exception) as e:
                Decoder(m, be, loop=loop).prefill(PROMPT[:2], chunk=2)
            msgs.append((type(e.value).__name__, str(e.value), be.xstate.tolist()))
        assert msgs[0] == msgs[1] and msgs[0][0] == "EngineError" and name in msgs[0][1], msgs


# ------------------------------------------------------------------ replay, no Python, ARMv7

def _record(models, tmp_path_factory, tokens):
    """Q4_1: the prompt on golden (a top of vectors 2), then a recorded step of the
    tokens at positions 3 .. (one token: ``Decoder.step``; more: one ``step_rows`` pass,
    every row's logits): its engine words per port, its logits, and the decoder state before
    it; a replay backend in that state, and the dump of that step for csrc/tphbench.c."""
    # the PYNQ-Z1 top's V = 2: one token with x in two parts (the default), a 2-row pass with
    # x in one part
    m, V, parts = models["q4"], 2, (1 if len(tokens) > 1 else None)
    dec = Decoder(m, make_backend("golden", m, vectors=V), loop="python", x_parts=parts)
    assert dec.parts() == (parts or 2)
    for t in PROMPT:
        dec.step(t, logits=False)
    kv = dec.kv
    state = (kv.K.copy(), kv.V.copy(), kv.k_step.copy(), kv.v_step.copy(), kv.length.copy())
    dec.trace = []
    want = dec.step(tokens[0]) if len(tokens) == 1 else \
        dec.step_rows([(0, t, True) for t in tokens])
    packets = rp.packets_from_trace(dec.trace)

    def replay(loop):
        d = Decoder(m, rp.replay_backend(m, packets, vectors=V), loop=loop, x_parts=parts)
        d.kv.K[:], d.kv.V[:], d.kv.k_step[:], d.kv.v_step[:], d.kv.length[:] = state
        d.pos = len(PROMPT)
        return d

    dump = rp.write_dump(tmp_path_factory.mktemp("dump") / "step.tphdump", replay("c"),
                               tokens[0] if len(tokens) == 1 else tokens)
    return dict(want=want, replay=replay, dump=dump, packets=packets)


@pytest.fixture(scope="module")
def recorded(models, tmp_path_factory):
    """The recorded one-token step (position 3, token 4)."""
    return _record(models, tmp_path_factory, [4])


@pytest.fixture(scope="module")
def recorded_rows(models, tmp_path_factory):
    """A recorded 2-row pass (positions 3 and 4, tokens 4 and 5, the logits of both) on a top
    of vectors 2 (tph_step_rows in the dump)."""
    return _record(models, tmp_path_factory, [4, 5])


def _bits_equal(a, b):
    return a.dtype == b.dtype and np.array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("loop", ["python", "c"])
def test_replay_backend_gives_the_recorded_logits(recorded, loop):
    d = recorded["replay"](loop)
    with hostops.using("numpy" if loop == "python" else "c"):
        got = d.step(4)
    assert _bits_equal(got, recorded["want"])
    rt = d.be.runtime
    assert rt.transfers_run == rt.plan.transfers_per_token(True) and rt.faults == []
    # a second step replays the same words: the same logits again
    with hostops.using("numpy" if loop == "python" else "c"):
        d.kv.length[:] -= 1
        d.pos -= 1
        assert _bits_equal(d.step(4), recorded["want"])


@pytest.mark.parametrize("loop", ["python", "c"])
def test_replay_backend_gives_a_recorded_batched_pass(recorded_rows, loop):
    """A recorded 2-row pass served back: both rows' logits bit for bit, on both loops."""
    d = recorded_rows["replay"](loop)
    with hostops.using("numpy" if loop == "python" else "c"):
        got = d.step_rows([(0, 4, True), (0, 5, True)])
    assert all(_bits_equal(g, w) for g, w in zip(got, recorded_rows["want"]))


def _run_bench(cmd, dump, out, threads=1):
    r = subprocess.run([*map(str, cmd), str(dump), "2", f"out={out}", f"threads={threads}"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr + r.stdout
    assert " retries 0 " in r.stdout and " device_errors 0" in r.stdout, r.stdout
    assert f" threads {threads} " in r.stdout, r.stdout
    return np.fromfile(out, np.float32), r.stdout


@pytest.mark.parametrize("threads", [1, 2])
def test_c_step_without_python_on_x86(recorded, tmp_path, threads):
    exe = armv7.build("gcc", LOOP_SOURCES, tmp_path / "tphbench",
                      ["-march=x86-64"])
    got, out = _run_bench([exe], recorded["dump"], tmp_path / "logits.bin", threads)
    assert _bits_equal(got, recorded["want"]), out
    assert f"argmax {int(np.argmax(recorded['want']))} " in out


def test_c_step_without_python_kv_rules(recorded, tmp_path):
    """The dump keeps the decoder's KV rule (fixed steps: nothing requantised); tphbench's
    "growth" (make host-bench's cost of one step growth) runs the running absmax, so one head's
    cached rows (both port halves, 3 positions) are requantised every step."""
    exe = armv7.build("gcc", LOOP_SOURCES, tmp_path / "tphbench", ["-march=x86-64"])
    _, fixed = _run_bench([exe], recorded["dump"], tmp_path / "a.bin")
    assert " requant 0 " in fixed, fixed
    r = subprocess.run([str(exe), str(recorded["dump"]), "2", "growth"], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    d = recorded["replay"]("c").kv.head_dim
    assert f" requant {len(PROMPT) * d} clipped 0" in r.stdout, r.stdout


def test_batched_c_step_without_python(recorded_rows, tmp_path):
    """tphbench on a 2-row dump runs tph_step_rows: both rows' logits bit for bit, on x86-64
    and on ARMv7 under qemu-arm, the VFP-only build and the board's NEON build (its 0x05 /
    0x09 value words split by vector with VLD2: tphloop.c split_words)."""
    want = np.concatenate(recorded_rows["want"])
    last = f"argmax {int(np.argmax(recorded_rows['want'][-1]))} "
    exe = armv7.build("gcc", LOOP_SOURCES, tmp_path / "tphbench", ["-march=x86-64"])
    for threads in (1, 2):
        got, out = _run_bench([exe], recorded_rows["dump"], tmp_path / "logits.bin", threads)
        assert _bits_equal(got, want) and " rows 2 " in out and last in out, out
    armv7.need_arm()
    for fpu in ("vfpv3-d16", "neon"):
        exe = armv7.build(armv7.ARM_CC, LOOP_SOURCES, tmp_path / f"tph_bench_arm_{fpu}",
                          ["-static", "-mcpu=cortex-a9", f"-mfpu={fpu}"])
        for threads in (1, 2):
            got, out = _run_bench(["qemu-arm", "-cpu", "cortex-a9", exe],
                                  recorded_rows["dump"], tmp_path / "logits_arm.bin", threads)
            assert _bits_equal(got, want) and last in out, (fpu, out)


@pytest.mark.parametrize("fpu", ["vfpv3-d16", "neon"])
def test_c_step_on_armv7_under_qemu(recorded, tmp_path, fpu):
    """The whole step built for the Cortex-A9 (32-bit pointers, hard float) and run under
    qemu-arm on the replay device: the recorded logits bit for bit."""
    armv7.need_arm()
    exe = armv7.build(armv7.ARM_CC, LOOP_SOURCES, tmp_path / f"tph_bench_{fpu}",
                      ["-static", "-mcpu=cortex-a9", f"-mfpu={fpu}"])
    neon = armv7.neon_float(exe, "tph_loop_abi")
    if fpu == "neon":        # the board's build: the kernels' NEON bodies
        assert {"tph_rmsnorm", "tph_silu_mul", "tph_dequant_f32"} <= set(neon), sorted(neon)
    else:
        assert not neon, neon
    for threads in (1, 2):       # the worker thread runs under qemu-arm's user mode too
        got, out = _run_bench(["qemu-arm", "-cpu", "cortex-a9", exe], recorded["dump"],
                              tmp_path / "logits.bin", threads)
        assert _bits_equal(got, recorded["want"]), out
        assert f"argmax {int(np.argmax(recorded['want']))} " in out
        # the results region read through the device's model of the CPU's cache: one invalidate
        # per result slot read, whole lines covering exactly the words read
        inv = {k: int(re.search(rf" {k} (\d+)", out).group(1))
               for k in ("invalidates", "invalidated", "read_cached")}
        assert inv["invalidates"] > 0 and inv["invalidated"] % 32 == 0, out
        assert inv["read_cached"] <= inv["invalidated"] < \
            inv["read_cached"] + 32 * inv["invalidates"]


#: tphbench with the replay device's sync a line short (what a loop that invalidates one
#: line too few would see): the last line of every slot stays stale
SHORT_SYNC = """#define _POSIX_C_SOURCE 200112L
#include "tphloop.h"
static int32_t short_sync(void *d, uint32_t bo, int32_t dir, size_t size, size_t off)
{
    return size > TPH_LINE ? tph_replay_sync(d, bo, dir, size - TPH_LINE, off) : 0;
}
#define tph_replay_sync short_sync
#include "tphbench.c"
"""


def test_c_step_on_armv7_with_an_invalidate_a_line_short_fails(recorded, tmp_path):
    """The ARMv7 build's step on the replay device, its invalidates each a line short: stale
    words (garbage or an earlier layer's) in every slot's last line, so the engines' status
    words are wrong and the step fails (or, were they right, the logits would differ)."""
    armv7.need_arm()
    src = tmp_path / "tph_bench_short.c"
    src.write_text(SHORT_SYNC)
    exe = armv7.build(armv7.ARM_CC, [src, *LOOP_SOURCES[1:]], tmp_path / "tph_bench_short",
                      ["-static", "-mcpu=cortex-a9", "-mfpu=neon", f"-I{CSRC}"])
    out = tmp_path / "logits.bin"
    r = subprocess.run(["qemu-arm", "-cpu", "cortex-a9", str(exe), str(recorded["dump"]), "2",
                        f"out={out}"], capture_output=True, text=True, timeout=600)
    assert r.returncode != 0 or not _bits_equal(np.fromfile(out, np.float32),
                                                recorded["want"]), r.stdout
    assert "step 0 failed: code 16" in r.stderr, r.stderr          # TPH_E_MATRIX


# ------------------------------------------------------------------ registers and table

def test_direct_register_access_writes_the_mapped_pages(models):
    """The board's path: the C loop writes and reads the DMAs' register pages itself (here
    plain memory: nothing answers, so the first transfer never completes, the reset never
    clears and the step says so), the same words the Python driver writes."""
    m = models["int8"]
    be = make_backend("golden", m, timeout_s=0.01)
    pages = [np.zeros(0x10000 // 4, np.uint32) for _ in (0, 1)]
    be.direct_regs = tuple(int(p.ctypes.data) for p in pages)
    be.reset_timeout_s = 0.01
    with pytest.raises(DmaResetError, match=r"dma_0: DMACR.Reset still set 0.01 s"):
        Decoder(m, be, loop="c").step(1, logits=False)
    first = be.plan.transfers[0]
    last = {ch: be._blocks[first.index][ch].last for ch in first.desc}
    for p in (0, 1):
        r = pages[p]
        assert r[(R.S2MM + R.TAILDESC) // 4] == last[2 * p + 1]    # S2MM tail, then MM2S
        assert r[R.TAILDESC // 4] == last[2 * p]
    assert pages[0][R.DMACR // 4] & R.CR_RESET              # the reset that never clears
    assert be.faults and "not complete within 0.01 s" in be.faults[0]
    assert be.regs[0].transfers == {0: 0, R.S2MM: 0}     # the register model saw nothing


def test_the_c_loop_refuses_more_vectors_than_the_engines_take(models):
    """The C loop's batched step holds up to the generator's largest vectors (16): a plan of
    more is refused in one line before any step, and the matrix engines' limit is the
    loop's."""
    from generators.designs.mv_common import MAX_VECTORS
    from generators.runtime.engines.cloop import TPH
    assert TPH.MAX_VECTORS == MAX_VECTORS
    m = models["int8"]
    with pytest.raises(ValueError, match="C loop takes matrix engines of 1..16 vectors"):
        hostloop.for_runtime(make_backend("golden", m, vectors=MAX_VECTORS + 1))


def test_the_table_is_checked(models):
    from generators.runtime.engines.cloop import TPH, CLoop, load_library
    m = models["int8"]
    be = make_backend("golden", m)
    lib = load_library()[0]
    cl = CLoop(be, lib)
    t = cl.table
    assert lib.tph_ctx_bytes(t.ctypes.data, len(t)) > 0
    for word, value in [(TPH.T_MAGIC, 0), (TPH.T_WORDS, len(t) + 1), (TPH.T_KV_ROW, 3),
                        (TPH.T_PART1, t[TPH.T_PART0]), (TPH.T_N_XFER, 10 ** 6)]:
        bad = t.copy()
        bad[word] = value
        assert lib.tph_ctx_bytes(bad.ctypes.data, len(bad)) == 0, word
    for word, value in [(TPH.T_VECTORS, 0), (TPH.T_VECTORS, TPH.MAX_VECTORS + 1),
                        (TPH.T_STREAMS, 0), (TPH.T_KV_STREAM_BYTES, t[TPH.T_KV_STREAM_BYTES] + 1),
                        (TPH.T_VEC_OFF, len(t)), (TPH.T_ATTX_OFF, len(t))]:
        bad = t.copy()
        bad[word] = value
        n = lib.tph_ctx_bytes(bad.ctypes.data, len(bad))
        if n:                         # the header holds: tph_init's whole check refuses it
            mem = np.zeros(n + 16, np.uint8)
            ptr = mem.ctypes.data + (-mem.ctypes.data % 16)
            assert lib.tph_init(ptr, n, bad.ctypes.data, len(bad), ctypes.addressof(cl.ptrs),
                                ctypes.addressof(cl.io)) == TPH.E_ARG, word
    # the batched records: an attention transfer without one, a matrix transfer with the
    # attention one, a word index outside the frames region
    att = [i for i, r in enumerate(cl._records) if r[0] == 1][0]
    mat = [i for i, r in enumerate(cl._records) if r[0] == 0][0]
    vec_at, attx_at = int(t[TPH.T_VEC_OFF]), int(t[TPH.T_ATTX_OFF])
    for patch in [(attx_at + att, 0), (attx_at + mat, t[attx_at + att]),
                  (int(t[vec_at + mat]) + 1, t[TPH.T_FRAMES_BYTES] // 4)]:
        bad = t.copy()
        bad[patch[0]] = patch[1]
        n = lib.tph_ctx_bytes(bad.ctypes.data, len(bad))
        mem = np.zeros(n + 16, np.uint8)
        ptr = mem.ctypes.data + (-mem.ctypes.data % 16)
        assert lib.tph_init(ptr, n, bad.ctypes.data, len(bad), ctypes.addressof(cl.ptrs),
                            ctypes.addressof(cl.io)) == TPH.E_ARG, patch
    bad = t.copy()
    bad[bad[TPH.T_KIND_OFF]] = bad[bad[TPH.T_KIND_OFF] + 1]     # qkv's index -> attention's
    n = lib.tph_ctx_bytes(bad.ctypes.data, len(bad))
    mem = np.zeros(n + 16, np.uint8)
    ptr = mem.ctypes.data + (-mem.ctypes.data % 16)
    assert lib.tph_init(ptr, n, bad.ctypes.data, len(bad), ctypes.addressof(cl.ptrs),
                        ctypes.addressof(cl.io)) == TPH.E_ARG


@pytest.mark.parametrize("fmt", ["int8", "q4"])
def test_the_c_loops_memory_is_in_the_plan(models, fmt):
    from generators.runtime.engines.cloop import for_runtime
    m = models[fmt]
    be = make_backend("golden", m)
    cl = for_runtime(be)
    held = sum(a.nbytes for a in (cl.table, cl.scales, cl.norms, cl.mem, cl.stats, cl.err))
    planned = dict((n, b) for n, b, _ in be.plan.host)["C loop"]
    assert held <= planned, (held, planned)
