"""The decoder's per-token step in C (generators/runtime/csrc/tphloop.c, hostloop.py) against
the Python loop on numpy (the reference, decoder.py / backends.py), on the tiny checkpoint:

* golden (the register model and the golden PL top in this process), INT8, ternary and Q4_1,
  greedy and sampled: every engine word, every logit bit, every token, the CPU's bytes, the
  transfers and register accesses per token equal;
* the register model in another process (its accesses over a socket, as the rtl backend's;
  tests/test_runtime_rtl.py runs the C loop on the RTL itself), and the two loops taking
  turns on one runtime (they share its chains' state);
* the same errors with the same messages: DMA faults twice in a row (the faults survived once
  are tests/test_runtime_dma.py's, on both loops), engine flags, a NaN in the activations;
* the replay backend (recorded engine words, no compute: make host-bench's) gives the
  recorded step's logits bit for bit on both loops, and so does the C step without Python
  (csrc/tpl_bench.c) on x86-64 and on ARMv7 under qemu-arm (32-bit pointers; VFP and NEON
  builds, no float arithmetic on NEON);
* the register interface's direct path (the board's mapped pages), the table's checks, the
  generated facts header.
"""
from __future__ import annotations

import ctypes
import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from generators.runtime import Decoder, convert, hostloop, hostops, load_checkpoint
from generators.runtime import make_backend
from generators.runtime import pg021 as R
from generators.runtime.backends import DmaError, DmaHangError, DmaShortError
from generators.runtime.checkpoint import EngineConfig
from generators.runtime.sgdma import DmaResetError
from generators.runtime.synthetic import TINY, write_checkpoint

sys.path.insert(0, str(Path(__file__).parent))
import armv7  # noqa: E402
from engine_flags import flag_answers  # noqa: E402

ENG = EngineConfig(max_k=512, max_context=32)
CSRC = hostloop.HERE / "csrc"
LOOP_SOURCES = [CSRC / "tpl_bench.c", CSRC / "tphloop.c", CSRC / "tphreplay.c",
                CSRC / "tphost.c"]
PROMPT = [1, 2, 3]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    if not hostloop.available():
        pytest.fail("the C loop is not available (make setup builds the library)")
    ck = load_checkpoint(write_checkpoint(tmp_path_factory.mktemp("tiny"), TINY, seed=1), ENG)
    return {f: convert(ck, f, ENG, notice=None) for f in ("int8", "ternary", "q4")}


def _run(m, be, loop, prompt=PROMPT, tokens=6, **sampling):
    """Tokens, engine words, logits, CPU bytes per token, transfers and register accesses of
    one generation; the Python loop runs the numpy host ops (the reference)."""
    trace, logits, nbytes = [], [], []
    with hostops.using("numpy" if loop == "python" else "c"):
        dec = Decoder(m, be, trace=trace, loop=loop)
        toks = list(dec.generate(prompt, tokens, on_token=lambda i, t, lg: (
            logits.append(lg.copy()), nbytes.append(dict(dec.token_bytes))), **sampling))
    rt = be.runtime
    return dict(toks=toks, trace=trace, logits=logits, bytes=nbytes,
                counts=(rt.transfers_run, rt.tail_writes, [d.reads for d in rt.dmas],
                        [d.writes for d in rt.dmas], dict(rt.cpu_total)))


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


def test_facts_header_is_current():
    assert hostloop.FACTS.read_text() == hostloop.c_facts(), \
        "csrc/tpl_facts.h is stale: python -m generators.runtime.hostloop"


@pytest.mark.parametrize("fmt, sampling", [("int8", {}), ("ternary", {}), ("q4", {}),
                                           ("int8", dict(temperature=1.0, top_k=20, seed=7))])
def test_c_loop_equals_the_python_loop_on_golden(models, fmt, sampling):
    m = models[fmt]
    ref = _run(m, make_backend("golden", m), "python", **sampling)
    got = _run(m, make_backend("golden", m), "c", **sampling)
    _same_run(ref, got)
    assert ref["counts"] == got["counts"]       # transfers, TAILDESC writes, reads, writes


def test_c_loop_on_the_register_model_in_another_process(models):
    """Every register access a callback across a socket (the rtl backend's path)."""
    from generators.runtime.rtl import GoldenServerBackend
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


# ------------------------------------------------------------------ replay, no Python, ARMv7

@pytest.fixture(scope="module")
def recorded(models, tmp_path_factory):
    """Q4_1: the prompt on golden, then the recorded step (position 3, token 4): its engine
    words per port, its logits, and the decoder state before it; a replay backend in that
    state, and the dump of that step for csrc/tpl_bench.c."""
    m = models["q4"]
    dec = Decoder(m, make_backend("golden", m), loop="python")
    for t in PROMPT:
        dec.step(t, logits=False)
    kv = dec.kv
    state = (kv.K.copy(), kv.V.copy(), kv.k_step.copy(), kv.v_step.copy(), kv.length.copy())
    dec.trace = []
    want = dec.step(4)
    packets = hostloop.packets_from_trace(dec.trace)

    def replay(loop):
        d = Decoder(m, hostloop.replay_backend(m, packets), loop=loop)
        d.kv.K[:], d.kv.V[:], d.kv.k_step[:], d.kv.v_step[:], d.kv.length[:] = state
        d.pos = len(PROMPT)
        return d

    dump = hostloop.write_dump(tmp_path_factory.mktemp("dump") / "step.tpl", replay("c"), 4)
    return dict(want=want, replay=replay, dump=dump, packets=packets)


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


def _run_bench(cmd, dump, out):
    r = subprocess.run([*map(str, cmd), str(dump), "2", f"out={out}"], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr + r.stdout
    assert " retries 0 " in r.stdout and " device_errors 0" in r.stdout, r.stdout
    return np.fromfile(out, np.float32), r.stdout


def test_c_step_without_python_on_x86(recorded, tmp_path):
    exe = armv7.build("gcc", LOOP_SOURCES, tmp_path / "tpl_bench",
                      ["-march=x86-64"])
    got, out = _run_bench([exe], recorded["dump"], tmp_path / "logits.bin")
    assert _bits_equal(got, recorded["want"]), out
    assert f"argmax {int(np.argmax(recorded['want']))} " in out


@pytest.mark.parametrize("fpu", ["vfpv3-d16", "neon"])
def test_c_step_on_armv7_under_qemu(recorded, tmp_path, fpu):
    """The whole step built for the Cortex-A9 (32-bit pointers, hard float) and run under
    qemu-arm on the replay device: the recorded logits bit for bit."""
    armv7.need_arm()
    exe = armv7.build(armv7.ARM_CC, LOOP_SOURCES, tmp_path / f"tpl_bench_{fpu}",
                      ["-static", "-mcpu=cortex-a9", f"-mfpu={fpu}"])
    bad = armv7.neon_float(exe, "tpl_abi")
    assert not bad, "NEON float arithmetic in the loop:\n" + "\n".join(bad[:10])
    got, out = _run_bench(["qemu-arm", "-cpu", "cortex-a9", exe], recorded["dump"],
                          tmp_path / "logits.bin")
    assert _bits_equal(got, recorded["want"]), out


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


def test_the_table_is_checked(models):
    from generators.runtime.hostloop import TPL, CLoop, _lib
    m = models["int8"]
    be = make_backend("golden", m)
    lib = _lib()[0]
    cl = CLoop(be, lib)
    t = cl.table
    assert lib.tpl_ctx_bytes(t.ctypes.data, len(t)) > 0
    for word, value in [(TPL.T_MAGIC, 0), (TPL.T_WORDS, len(t) + 1), (TPL.T_KV_ROW, 3),
                        (TPL.T_PART1, t[TPL.T_PART0]), (TPL.T_N_XFER, 10 ** 6)]:
        bad = t.copy()
        bad[word] = value
        assert lib.tpl_ctx_bytes(bad.ctypes.data, len(bad)) == 0, word
    bad = t.copy()
    bad[bad[TPL.T_KIND_OFF]] = bad[bad[TPL.T_KIND_OFF] + 1]     # qkv's index -> attention's
    n = lib.tpl_ctx_bytes(bad.ctypes.data, len(bad))
    mem = np.zeros(n + 16, np.uint8)
    ptr = mem.ctypes.data + (-mem.ctypes.data % 16)
    assert lib.tpl_init(ptr, n, bad.ctypes.data, len(bad), ctypes.addressof(cl.ptrs),
                        ctypes.addressof(cl.io)) == TPL.E_ARG


@pytest.mark.parametrize("fmt", ["int8", "q4"])
def test_the_c_loops_memory_is_in_the_plan(models, fmt):
    from generators.runtime.hostloop import for_runtime
    m = models[fmt]
    be = make_backend("golden", m)
    cl = for_runtime(be)
    held = sum(a.nbytes for a in (cl.table, cl.scales, cl.norms, cl.mem, cl.stats, cl.err))
    planned = dict((n, b) for n, b, _ in be.plan.host)["C loop"]
    assert held <= planned, (held, planned)
