"""The INT16 KV cache (an INT16 attention engine, ``EngineConfig.kv_bits = 16``; issue 32 item 5)
on the tiny checkpoint: the C loop (csrc/tphloop.c) against the Python loop on numpy, on the
golden backend: every engine word, logit bit, token, K/V byte, step and count equal, with the
calibrated steps and with steps so tight that many values clip at +-32767; the attention frames
the DMAs send (scale words' byte 3 = 1, K and V rows of int16 codes, two bytes little-endian an
element) equal the frame generators.golden.attention builds; the replay backend and the C step
without Python (csrc/tphbench.c) on x86-64 and on ARMv7 under qemu-arm give a recorded step's
logits bit for bit; an INT16 cache without calibrated steps is refused on both loops.
"""
from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from generators.golden import attention as gatt
from generators.packing import split_attention_frame
from generators.runtime import Decoder, make_backend
from generators.runtime.engines import cloop as hostloop
from generators.runtime.engines import replay as rp
from generators.runtime.host import ops as hostops
from generators.runtime.model.checkpoint import EngineConfig
from generators.runtime.model.quantise import KVCache, kv_steps_for

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import armv7  # noqa: E402
from frame_spy import spy_attention_frames  # noqa: E402  (tests/ is on sys.path)

#: an INT16 attention engine: exp_width <= 21 and scale_frac_bits <= 16 (AttentionConfig)
ENG = EngineConfig(max_k=512, max_context=32, exp_width=21, scale_frac_bits=16, kv_bits=16)
MODEL_SEED = 1
PROMPT = [1, 2, 3]
CSRC = hostloop.HERE / "csrc"
LOOP_SOURCES = [CSRC / "tphbench.c", CSRC / "tphloop.c", CSRC / "tphreplay.c",
                CSRC / "tphost.c", CSRC / "tphwork.c"]


@pytest.fixture(scope="module")
def models(c_models):
    return c_models


def _bits(a):
    return np.asarray(a).view(np.uint32)


def _run(m, loop, tokens=6):
    trace, logits, nbytes = [], [], []
    be = make_backend("golden", m)
    with hostops.using("numpy" if loop == "python" else "c"):
        dec = Decoder(m, be, trace=trace, loop=loop)
        toks = list(dec.generate(PROMPT, tokens, on_token=lambda i, t, lg: (
            logits.append(lg.copy()), nbytes.append(dict(dec.token_bytes)))))
    rt, kv = be.runtime, dec.kv
    return dict(toks=toks, trace=trace, logits=logits, bytes=nbytes, kv=kv,
                counts=(rt.transfers_run, rt.tail_writes, dict(rt.cpu_total)),
                K=np.array(kv.K), V=np.array(kv.V), kvbytes=bytes(be.buf["kv"]))


@pytest.mark.parametrize("fmt, policy", [("int8", "calibrated"), ("q4", "calibrated"),
                                         ("int8", "tight")])
def test_int16_cache_c_loop_equals_the_python_loop(models, fmt, policy):
    """Tokens, every engine word, every logit bit, the CPU's bytes per token, the K/V codes
    and the DMA memory's kv region byte for byte, the steps, the clipped and written counts.
    ``tight``: a 64th of the calibrated steps, so that many values clip at +-32767."""
    m = models[fmt]
    assert m.engines.kv_bits == 16 and m.kv_steps is not None
    if policy == "tight":
        m = dataclasses.replace(m, kv_steps=(m.kv_steps / np.float32(64)).astype(np.float32))
    ref, got = _run(m, "python"), _run(m, "c")
    assert ref["toks"] == got["toks"]
    assert len(ref["trace"]) == len(got["trace"]) > 0
    for x, y in zip(ref["trace"], got["trace"]):
        assert x[:3] == y[:3] and all(np.array_equal(u, v) for u, v in zip(x[3], y[3])), x[:3]
    assert all(np.array_equal(_bits(u), _bits(v)) for u, v in zip(ref["logits"], got["logits"]))
    assert ref["bytes"] == got["bytes"] and ref["counts"] == got["counts"]
    assert ref["kvbytes"] == got["kvbytes"]
    assert np.array_equal(ref["K"], got["K"]) and np.array_equal(ref["V"], got["V"])
    ka, kb = ref["kv"], got["kv"]
    assert ka.K.dtype == kb.K.dtype == np.int16 and ka.fixed and kb.fixed
    for k in ("clipped", "written", "requantised"):
        assert getattr(ka, k) == getattr(kb, k), k
    want = kv_steps_for(m.kv_steps, 16)
    assert np.array_equal(kb.k_step, want[..., 0]) and np.array_equal(kb.v_step, want[..., 1])
    c = m.config
    n = len(PROMPT) + 6 - 1                      # the last token is sampled, not stepped
    rows = c.num_hidden_layers * c.num_key_value_heads * 2
    assert kb.written == n * rows * c.head_dim * 2                  # two bytes a code
    assert got["bytes"][-1]["kv"] == rows * c.head_dim * 2
    codes = np.abs(got["K"][:, :, :n].astype(np.int32))
    if policy == "tight":
        assert kb.clipped > 0 and codes.max() == 32767
    else:
        assert kb.clipped == 0 and 127 < codes.max() < 32767


def test_int16_attention_frames_carry_code_1_and_int16_rows(models):
    """What the DMAs send for every attention frame is the frame generators.golden.attention
    builds for the INT16 engine from the cache's int16 rows (split over the ports by
    split_attention_frame): the scale words' byte 3 is 1 (INT16), each row 128 bytes; the
    cache in DMA memory holds on port p the 8-byte words p, p + 2, ... of each row's bytes."""
    m = models["int8"]
    be = make_backend("golden", m)
    dec = Decoder(m, be, loop="python")
    cfg = m.engines.attention_config()
    assert cfg.kv_bits == 16 and cfg.kv_code == 1 and cfg.row_beats == 8
    sent = spy_attention_frames(be)
    H, G, d = m.config.num_key_value_heads, m.config.group, m.config.head_dim
    for pos, tok in enumerate([5, 9, 200, 7]):
        dec.step(tok)
        L = pos + 1
        for layer in range(m.config.num_hidden_layers):
            for h in range(H):
                K, V = dec.kv.rows("K", layer, h, L), dec.kv.rows("V", layer, h, L)
                assert K.dtype == V.dtype == np.int16
                even, odd = sent[0].pop(0), sent[1].pop(0)
                e = np.frombuffer(even, "<u8")
                o = np.frombuffer(odd, "<u8")[1:]                   # past the route word
                frame = np.stack([e, o], axis=1).tobytes()
                h0 = int(np.frombuffer(frame[:8], "<u8")[0])
                sc = np.frombuffer(frame[8:8 + 4 * G], "<u4")
                assert all(int(w) >> 24 == 1 for w in sc)            # the KV format code
                hb = cfg.header_beats * 16
                q = np.frombuffer(frame[hb:hb + G * d], np.int8).reshape(G, d)
                fr = gatt.build_attention_frame(q, K, V, [int(w) & 0xFFFF for w in sc],
                                                [int(w) >> 16 & 0xFF for w in sc], h0 >> 56,
                                                cfg)
                assert (even, odd) == split_attention_frame(fr, L, h0 >> 56)
                assert len(frame) == (cfg.header_beats + cfg.q_beats) * 16 + 2 * L * d * 2
                kpart = frame[-2 * L * d * 2:-L * d * 2]
                assert np.array_equal(np.frombuffer(kpart, "<i2").reshape(L, d), K)
    assert not sent[0] and not sent[1]
    kvb, plan = be.buf["kv"], be.plan
    assert plan.kv_row == d                                   # d / 2 codes of 2 bytes a port
    for layer in range(m.config.num_hidden_layers):
        for which in ("K", "V"):
            rows = dec.kv.rows(which, layer, 0, 4).astype("<i2").view(np.uint8)
            for p in (0, 1):
                off = plan.kv_offset(p, "KV".index(which), layer, 0)
                got = kvb[off:off + 4 * plan.kv_row].reshape(4, d // 8, 8)
                assert np.array_equal(got, rows.reshape(4, d // 8, 2, 8)[:, :, p])


def test_int16_cache_without_calibrated_steps_is_refused(models):
    m = dataclasses.replace(models["int8"], kv_steps=None)
    with pytest.raises(ValueError, match="calibrated KV steps only"):
        KVCache(2, 3, 4, 64, kv_bits=16)
    with pytest.raises(ValueError, match="calibrated KV steps only"):
        Decoder(m, make_backend("golden", m))
    with pytest.raises(ValueError, match="kv_bits"):
        KVCache(2, 3, 4, 64, steps=np.ones((2, 3, 2), np.float32), kv_bits=12)


@pytest.fixture(scope="module")
def recorded(models, tmp_path_factory):
    """Q4_1 with the INT16 cache: the prompt on golden, then a recorded step (position 3,
    token 4); a replay backend in the state before it, and its dump for csrc/tphbench.c."""
    m = models["q4"]
    dec = Decoder(m, make_backend("golden", m), loop="python")
    for t in PROMPT:
        dec.step(t, logits=False)
    kv = dec.kv
    state = (kv.K.copy(), kv.V.copy(), kv.k_step.copy(), kv.v_step.copy(), kv.length.copy())
    dec.trace = []
    want = dec.step(4)
    packets = rp.packets_from_trace(dec.trace)

    def replay(loop):
        d = Decoder(m, rp.replay_backend(m, packets), loop=loop)
        d.kv.K[:], d.kv.V[:], d.kv.k_step[:], d.kv.v_step[:], d.kv.length[:] = state
        d.pos = len(PROMPT)
        return d

    dump = rp.write_dump(tmp_path_factory.mktemp("dump16") / "step.tphdump", replay("c"), 4)
    return dict(want=want, replay=replay, dump=dump)


@pytest.mark.parametrize("loop", ["python", "c"])
def test_int16_replay_gives_the_recorded_logits(recorded, loop):
    d = recorded["replay"](loop)
    with hostops.using("numpy" if loop == "python" else "c"):
        got = d.step(4)
    assert np.array_equal(_bits(got), _bits(recorded["want"]))


def _bench(cmd, dump, out):
    r = subprocess.run([*map(str, cmd), str(dump), "2", f"out={out}", "threads=1"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr + r.stdout
    return np.fromfile(out, np.float32), r.stdout


def test_int16_c_step_without_python_on_x86_and_armv7(recorded, tmp_path):
    """tphbench on the INT16 dump: x86-64, then the board's build (ARMv7, NEON) under
    qemu-arm: the recorded logits bit for bit (the KV rows written by kv_one's INT16 path)."""
    want = recorded["want"]
    exe = armv7.build("gcc", LOOP_SOURCES, tmp_path / "tphbench", ["-march=x86-64"])
    got, out = _bench([exe], recorded["dump"], tmp_path / "logits.bin")
    assert np.array_equal(_bits(got), _bits(want)), out
    armv7.need_arm()
    exe = armv7.build(armv7.ARM_CC, LOOP_SOURCES, tmp_path / "tphbench_arm",
                      ["-static", "-mcpu=cortex-a9", "-mfpu=neon"])
    got, out = _bench(["qemu-arm", "-cpu", "cortex-a9", exe], recorded["dump"],
                      tmp_path / "logits_arm.bin")
    assert np.array_equal(_bits(got), _bits(want)), out


def _run_rows(m, V, loop, what):
    """A batched run on a golden top of ``vectors`` V: "prefill" (a 5-token prompt in chunks
    of V, then 3 tokens), "streams" (three prompts as streams, 3 tokens each) or "speculate"
    (greedy with drafts of up to V - 1 tokens, the rejected ones taken back)."""
    trace, logits = [], []
    streams = 3 if what == "streams" else 1
    be = make_backend("golden", m, vectors=V, streams=streams)
    with hostops.using("numpy" if loop == "python" else "c"):
        dec = Decoder(m, be, trace=trace, loop=loop)
        if what == "streams":
            toks = dec.generate_streams([[1, 2, 3], [7, 8], [9, 10, 11, 12]], 3)
            logits = [dec.last_logits_streams[s] for s in sorted(dec.last_logits_streams)]
        else:
            kw = dict(speculate=V - 1) if what == "speculate" else {}
            prompt = [1, 2, 3, 4, 1, 2, 3, 4, 1, 2] if what == "speculate" else [1, 2, 3, 4, 5]
            toks = list(dec.generate(prompt, 8 if what == "speculate" else 3,
                                     on_token=lambda i, t, lg: logits.append(lg.copy()), **kw))
    rt = be.runtime
    return dict(toks=toks, trace=trace, logits=logits, spec=getattr(dec, "speculation", None),
                kvs=[(np.array(kv.K), np.array(kv.V), kv.clipped, kv.written,
                      kv.length.tolist()) for kv in dec.kvs],
                kvbytes=bytes(be.buf["kv"]), words=np.array(rt.words),
                counts=(rt.transfers_run, rt.tail_writes, dict(rt.cpu_total)))


@pytest.mark.parametrize("fmt, V, what", [("int8", 3, "prefill"), ("q4", 2, "streams"),
                                          ("int8", 4, "speculate")])
def test_int16_batched_c_step_equals_the_python_loop(models, fmt, V, what):
    """tph_step_rows with the INT16 cache against Decoder.step_rows' Python loop: prefill
    chunks, several streams (each its own INT16 cache in the kv region), speculation whose
    drafts are taken back: every engine word, logit bit, token, K/V byte, count, descriptor."""
    m = models[fmt]
    ref, got = _run_rows(m, V, "python", what), _run_rows(m, V, "c", what)
    assert ref["toks"] == got["toks"] and ref["spec"] == got["spec"]
    assert len(ref["trace"]) == len(got["trace"]) > 0
    for x, y in zip(ref["trace"], got["trace"]):
        assert x[:3] == y[:3] and all(np.array_equal(u, v) for u, v in zip(x[3], y[3])), x[:3]
    assert all(np.array_equal(_bits(u), _bits(v)) for u, v in zip(ref["logits"], got["logits"]))
    for a, b in zip(ref["kvs"], got["kvs"]):
        assert a[0].dtype == np.int16 and np.array_equal(a[0], b[0])
        assert np.array_equal(a[1], b[1]) and a[2:] == b[2:]
    assert ref["kvbytes"] == got["kvbytes"] and ref["counts"] == got["counts"]
    assert np.array_equal(ref["words"], got["words"])
    if what == "speculate":
        assert got["spec"]["accepted"] > 0, got["spec"]


def test_manifest_and_plan_of_an_int16_engine():
    """The overlay manifest's attention section names kv_bits (absent: 8); the plan's kv
    region of an INT16 engine is twice the INT8 one (row_beats), the rest unchanged."""
    from generators.runtime.engines.plan import memory_plan, model_shape, smollm2_lines
    from generators.runtime.model.checkpoint import PYNQ_Z1_ENGINES, ModelConfig
    from generators.runtime.model.synthetic import SMOLLM2_135M
    man = {"matrix": {"max_k": 512}, "attention": {"heads_per_group": 3, "head_dim": 64,
                                                   "max_context": 32}}
    assert EngineConfig.from_manifest(man).kv_bits == 8
    man["attention"].update(kv_bits=16, exp_width=21, scale_frac_bits=16)
    eng = EngineConfig.from_manifest(man)
    assert eng == ENG and eng.attention_config().kv_bits == 16
    man["attention"]["scale_frac_bits"] = 24                 # Z of INT16 V overflows 32 bits
    with pytest.raises(ValueError, match="INT16 V"):
        EngineConfig.from_manifest(man).attention_config()
    cfg = ModelConfig(**SMOLLM2_135M)
    e16 = dataclasses.replace(PYNQ_Z1_ENGINES, kv_bits=16, exp_width=21, scale_frac_bits=16)
    assert e16 == PYNQ_Z1_ENGINES                 # the PYNQ-Z1 overlay's default K and V
    e8 = PYNQ_Z1_ENGINES.with_kv_bits(8)
    assert (e8.exp_width, e8.scale_frac_bits) == (24, 24)
    p8 = memory_plan(model_shape(cfg, e8, "q4"), 2048)
    p16 = memory_plan(model_shape(cfg, e16, "q4"), 2048)
    assert (p8.kv_row, p16.kv_row) == (32, 64)
    assert p16.regions["kv"].nbytes == 2 * p8.regions["kv"].nbytes == 2 * 2048 * 30 * 384
    for r in ("weights", "frames", "results"):
        assert p16.regions[r].nbytes == p8.regions[r].nbytes, r
    assert "INT16 KV cache, 256 bytes per position" in p16.regions["kv"].what
    msg = p16.check()
    assert msg is not None and "exceeds the 128 MiB CMA budget; context 1589 fits" in msg
    lines = smollm2_lines(2048, engines=e16)
    assert "KV 45.0 MiB" in lines[0] and "fits" in lines[1] and "no context fits" in lines[2]
