"""Q4_1 weights in the decoder runtime (fmt="q4", docs/q4.md "How the runtime uses Q4"):
a GGUF's Q4_1 tensors as stored, other types as INT8 rows, float checkpoints requantised with
a notice, the golden backend's fast Q4 path against the engine's exact frame model
(generators.golden.q4.q4_frame), the DMA host code, and the errors (an overlay without the Q4
lane, a GGUF without Q4_1 tensors, Inf scales)."""
from __future__ import annotations

import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from generators.golden import blocks as gblocks
from generators.golden import mv as gmv
from generators.golden import q4 as gq4
from generators.q4 import (build_q4_frame, pack_q4_rows, pack_q4_rows_raw, q4_1_raw_to_blocks,
                           q4_dequantize)
from generators.q8 import pack_q8_0_rows_raw, x_slots
from generators.runtime import (CheckpointError, Decoder, EngineError, Model, convert,
                                load_checkpoint, make_backend)
from generators.runtime.engines.runtime import BackendError
from generators.runtime.model.checkpoint import EngineConfig
from generators.runtime.model.model import QMatrix, q4_matrix_float, q4_matrix_raw
from generators.runtime.engines.rtl import check_formats
from generators.runtime.model.synthetic import TINY, write_checkpoint

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import gguf_files  # noqa: E402
from exact import f32_nearest  # noqa: E402  (tests/ is on sys.path)

ENG = EngineConfig(max_k=512, max_context=32)


def _frame_words(rows, k, x, max_k=4096):
    fr = build_q4_frame(x, rows, k, tag=7)
    beats = [int(b) for b in np.frombuffer(fr + bytes(-len(fr) % 8), "<u8")]
    return [w for w, _ in gq4.q4_frame(beats, max_k)]


def _random_rows(rng, n, k, wild=False):
    nb = -(-k // 32)
    q = rng.integers(0, 16, (n, nb, 32))
    if wild:      # any finite exponent, either sign, subnormals
        bits = rng.integers(0, 0x7C00, (2, n, nb)) | (rng.integers(0, 2, (2, n, nb)) << 15)
        d, m = bits[0].astype(np.uint16), bits[1].astype(np.uint16)
    else:
        d = (rng.standard_normal((n, nb)) * 0.01).astype(np.float16)
        m = (rng.standard_normal((n, nb)) * 0.05).astype(np.float16)
    return pack_q4_rows(q, d, m, k)


@pytest.mark.parametrize("k", [1, 15, 31, 33, 64, 100, 300])
@pytest.mark.parametrize("wild", [False, True])
def test_fast_golden_path_equals_frame_model(k, wild):
    """decode_rows + matrix_words (the golden backend's path) give the frame model's words,
    typical and wild scales (sums beyond 2^53 rounded by round_f32), x at the extremes."""
    rng = np.random.default_rng(k + 1000 * wild)
    rows = _random_rows(rng, 24, k, wild)
    for x in (rng.integers(-128, 128, k), np.full(k, -128), np.full(k, 127)):
        codes, D, M, bad = gq4.decode_rows(rows, k)
        assert not bad.any() and gq4.int64_safe(D, M)
        got = gq4.matrix_words(gq4.block_codes(codes), D, M, x.astype(np.int8))
        exp = _frame_words(rows, k, x)
        assert [int(w) for w in got] == exp[:-1]


def test_fast_golden_path_rounds_ties_to_even():
    """Row sums that are float32 ties (A = odd * 2^s + 2^(s-1) past 24 bits) both ways."""
    k = 32
    # d and m with large exponents: |A| well past 2^24, and with 11-bit significands the
    # dropped bits are often exactly half (a tie); both neighbours (even below, even above)
    rng = np.random.default_rng(5)
    hits = {0: 0, 1: 0}
    for _ in range(1500):
        d = np.array([[rng.integers(0x6000, 0x7BFF)]], np.uint16)
        m = np.array([[rng.integers(0x0400, 0x7BFF)]], np.uint16)
        q = rng.integers(0, 16, (1, 1, 32))
        r = pack_q4_rows(q, d, m, k)
        x = rng.integers(-128, 128, k)
        codes, D, M, _ = gq4.decode_rows(r, k)
        A = int((D[0, 0] * (q[0, 0] * x).sum()) + M[0, 0] * x.sum())
        p = abs(A).bit_length() - 1
        if p > 24 and abs(A) >> (p - 24) & 1 and not abs(A) & ((1 << (p - 24)) - 1):
            hits[abs(A) >> (p - 23) & 1] += 1          # kept LSB even or odd
        got = gq4.matrix_words(gq4.block_codes(codes), D, M, x.astype(np.int8))
        assert int(got[0]) == gq4.round_f32(A)
    assert hits[0] > 10 and hits[1] > 10, hits


# ------------------------------------------------------------------ GGUF: Q4_1 as stored

@pytest.fixture(scope="module")
def q4_gguf(tmp_path_factory):
    from gguf import GGMLQuantizationType as T
    p = tmp_path_factory.mktemp("q4") / "tiny-q4_1.gguf"
    gguf_files.write_llama(p, qtype=T.Q4_1, inter=512)
    return load_checkpoint(p, engines=ENG)


def _fabric_words(be, qm, x_slot: bytes):
    """Both port frames of ``qm`` sent to the golden fabric with ``x_slot`` as their x."""
    xa, _ = be._item("frames", ("x", "qkv"))
    be.memory.write(xa, np.frombuffer(x_slot, np.uint8))
    words = []
    for p in (0, 1):
        a = be._image_addr[(qm.name, p)]
        words.append(be.fabric._matrix(p, [(a, 8), (xa, qm.x_bytes),
                                           (a + 8 + qm.x_bytes, len(qm.images[p]) - 8
                                            - qm.x_bytes)]))
    tag = next(f.tag for t in be.plan.transfers for f in t.frames if f.name == qm.name)
    assert all(int(w[-1]) == gmv.status_word(tag, 0, r) for w, r in zip(words, qm.rows))
    return np.concatenate([w[:-1] for w in words])


def test_gguf_q4_1_tensors_used_as_stored(q4_gguf):
    m = convert(q4_gguf, "q4", ENG)
    # the layers Q4_1 as stored; the LM head Q8_0 rows with Q8_0 x (format 0x09)
    assert m.fmt == "q4" and {q.fmt for n, q in m.matrices.items() if n != "lm_head"} == {"q4"}
    assert m.matrices["lm_head"].fmt == "q8_0" and m.matrices["lm_head"].code == 0x09
    name = "model.layers.1.self_attn.q_proj.weight"       # un-permuted rows
    raw = q4_gguf.raw[name]
    n, k = raw.shape
    rows = pack_q4_rows_raw(raw.blocks, n, k)
    qm = m.matrices["layers.1.q"]
    assert qm.block_x and qm.code == 0x05
    for p, (a, b) in enumerate(((0, qm.rows[0]), (qm.rows[0], n))):
        img = qm.images[p]
        assert img[6] == 0x05                   # format 0x05: x as Q8_1 blocks
        assert qm.x_bytes == k + -(-k // 64) * 8
        assert np.array_equal(img[8 + qm.x_bytes:].reshape(b - a, -1), rows[a:b])
    be = make_backend("golden", m)
    rng = np.random.default_rng(0)
    # format 0x05: x as ggml's Q8_1 blocks (generators.golden.blocks, ggml's reference
    # quantiser); the engine's word is the float32 nearest the block formula
    # sum_b d_w d_x S_b + m_w s_x, with (q, d_w, m_w) the file's own blocks
    xf = (rng.standard_normal(k) * 3).astype(np.float32)
    xq, xd, xs = gblocks.quantize_q8_1(xf)
    xq = xq.reshape(-1)
    y = _fabric_words(be, qm, x_slots(xq, xd, xs, k)[0]).view(np.float32)
    q, d, mm = q4_1_raw_to_blocks(raw.blocks, n, k)
    f16 = lambda h: Fraction(float(np.uint16(h).view(np.float16)))      # noqa: E731
    for r in range(0, n, 11):
        v = sum(f16(d[r, b]) * f16(xd[b]) * int(np.dot(q[r, b].astype(np.int64),
                                                         xq[32 * b:32 * b + 32]))
                + f16(mm[r, b]) * f16(xs[b]) for b in range(k // 32))
        assert y[r] == f32_nearest(v), r
    # format 0x04 (a model converted with block_x=False): the float32 nearest sum(w x) with
    # w the gguf package's own dequantisation (the checkpoint's float tensor), x INT8
    q04 = q4_matrix_raw(qm.name, raw.blocks, k, n, block_x=False)
    assert q04.images[0][6] == 0x04 and q04.x_bytes == k
    m4 = _as_0x04(m)
    assert all(np.array_equal(a, b) for a, b in zip(m4.matrices[qm.name].images, q04.images))
    be4 = make_backend("golden", m4, formats=(8, 3, 4))
    x = rng.integers(-128, 128, k).astype(np.int8)
    y4 = _fabric_words(be4, q04, x.tobytes()).view(np.float32)
    ref = q4_gguf.tensors[name].astype(np.float64) @ x.astype(np.float64)
    assert np.array_equal(y4, ref.astype(np.float32))


def test_gguf_other_types_run_as_int8(tmp_path):
    """A GGUF with Q4_1 matrices and a Q8_0 one (SmolLM2's mix: Q8_0 embedding / head): the
    layer matrices of other types run as INT8 rows, the Q8_0 head as stored (format 0x09)."""
    from gguf import GGMLQuantizationType as T
    from gguf.quants import quantize
    t = gguf_files.hf_tensors(layers=1, inter=512, vocab=len(gguf_files.vocabulary()))
    p = tmp_path / "mixed.gguf"
    raw = {n: (quantize(a, T.Q4_1), T.Q4_1) for n, a in t.items()
           if a.ndim == 2 and n != "token_embd.weight" and "attn_q" not in n
           and "attn_k" not in n}
    raw["token_embd.weight"] = (quantize(t["token_embd.weight"], T.Q8_0), T.Q8_0)
    gguf_files.write_llama(p, layers=1, inter=512, tensors=t, raw_types=raw)
    ck = load_checkpoint(p, engines=ENG)
    m = convert(ck, "q4", ENG)
    fm = {n: q.fmt for n, q in m.matrices.items()}
    assert fm["lm_head"] == "q8_0" and fm["layers.0.q"] == "int8" and fm["layers.0.k"] == "int8"
    assert fm["layers.0.v"] == fm["layers.0.down"] == "q4"
    head, emb = m.matrices["lm_head"], ck.raw["model.embed_tokens.weight"]
    n, k = (int(v) for v in emb.shape)
    rows = pack_q8_0_rows_raw(emb.blocks, n, k)           # the file's blocks, not requantised
    assert head.code == 0x09 and head.x_bytes == k + -(-k // 128) * 8
    for p, (a, b) in enumerate(((0, head.rows[0]), (head.rows[0], n))):
        assert head.images[p][6] == 0x09
        assert np.array_equal(head.images[p][8 + head.x_bytes:].reshape(b - a, -1), rows[a:b])
    toks = list(Decoder(m, make_backend("golden", m)).generate([1, 2], 3))
    assert len(toks) == 3


def test_gguf_without_q4_1_asked_for_q4_is_an_error(tmp_path):
    from gguf import GGMLQuantizationType as T
    p = tmp_path / "q8.gguf"
    gguf_files.write_llama(p, layers=1, qtype=T.Q8_0)
    ck = load_checkpoint(p, engines=ENG)
    with pytest.raises(CheckpointError, match=r"Q4_1 tensors as stored, and this file has none "
                                              r"\(types: .*Q8_0.*\); use int8"):
        convert(ck, "q4", ENG)


# ------------------------------------------------------------------ float checkpoints

@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return write_checkpoint(tmp_path_factory.mktemp("tiny"), TINY, seed=1)


def test_float_checkpoint_requantised_with_one_notice(tiny_dir, tmp_path):
    notes = []
    m = convert(load_checkpoint(tiny_dir, ENG), "q4", ENG, notice=notes.append)
    assert len(notes) == 1 and "quantised to Q4_1" in notes[0] and "\n" not in notes[0]
    assert {q.fmt for n, q in m.matrices.items() if n != "lm_head"} == {"q4"}
    assert m.matrices["lm_head"].fmt == "q8_0"      # quantised to Q8_0 (llama.cpp's reference)
    # one file: save and load keep the format per matrix and the frames
    m2 = Model.load(m.save(tmp_path / "q4.tpimg"))
    assert m2.fmt == "q4" and all(
        a.fmt == b.fmt and all(np.array_equal(x, y) for x, y in zip(a.images, b.images))
        for a, b in zip(m.matrices.values(), m2.matrices.values()))
    # int8 of the same checkpoint: no notice
    convert(load_checkpoint(tiny_dir, ENG), "int8", ENG, notice=notes.append)
    assert len(notes) == 1


@pytest.mark.parametrize("k", [1, 20, 100, 200])
def test_requantised_matrix_of_any_k(k):
    """K not a multiple of 32: the last block is padded (min and max unchanged), the codes
    past K are not sent; the golden backend's path equals the frame model; the weights are
    within half a step of the float ones."""
    rng = np.random.default_rng(k)
    W = rng.standard_normal((6, k)).astype(np.float32)
    qm = q4_matrix_float("m", W)
    assert qm.k == k and qm.rows == [3, 3]
    rows = np.concatenate([qm.images[p][8 + qm.x_bytes:].reshape(3, -1) for p in (0, 1)])
    codes, D, M, _ = gq4.decode_rows(rows, k)
    w = (codes * (D[..., None] / 2.0 ** 24) + M[..., None] / 2.0 ** 24).reshape(6, -1)[:, :k]
    step = (D / 2.0 ** 24).repeat(32, axis=1)[:, :k]
    assert np.all(np.abs(w - W) <= step / 2 + 2e-3 * np.abs(W) + 1e-6)
    x = rng.integers(-128, 128, k)
    for p in (0, 1):
        r = rows[3 * p:3 * p + 3]
        c, D_, M_, _ = gq4.decode_rows(r, k)
        got = gq4.matrix_words(gq4.block_codes(c), D_, M_, x.astype(np.int8))
        assert [int(v) for v in got] == _frame_words(r, k, x)[:-1]


# ------------------------------------------------------------------ decoder and backends

@pytest.fixture(scope="module")
def q4_model(tiny_dir):
    return convert(load_checkpoint(tiny_dir, ENG), "q4", ENG, notice=None)


def test_decoder_q4_fast_path_equals_the_exact_frame_model(q4_model):
    """The golden fabric's fast Q4 path against the same decoder with every matrix frame
    answered by generators.golden.overlay's exact frame models: same tokens, every word
    identical."""
    m = q4_model
    tg, td = [], []
    gold = list(Decoder(m, make_backend("golden", m), trace=tg).generate(
        [1, 2], 2, temperature=1.0, seed=2))
    exact = make_backend("golden", m)
    exact.fabric._fast_matrix = lambda segments: None
    dma = list(Decoder(m, exact, trace=td).generate([1, 2], 2, temperature=1.0, seed=2))
    assert gold == dma
    assert len(tg) == len(td) and all(
        a[:3] == b[:3] and all(np.array_equal(x, y) for x, y in zip(a[3], b[3]))
        for a, b in zip(tg, td))
    # 3 steps of 2 layers, the LM head after the prompt's last token and the next one
    assert sum(1 for e in tg if e[0] == "matrix") == 3 * 7 * 2 + 2


def test_overlay_without_the_q4_lane_is_a_clear_error(q4_model):
    """A q4 model's layer matrices are format 0x05 (Q8_1 x): an overlay without the Q4_1
    lane, or whose lane takes 0x04 only, answers BAD_FORMAT and the decoder says so; the rtl
    backend's manifest check refuses before any frame (its block_formats list 0x05)."""
    m = q4_model
    for formats in ((8, 3), (8, 3, 4)):
        be = make_backend("dma-model", m, formats=formats)
        with pytest.raises(EngineError, match=r"BAD_FORMAT \(layer 0, matrix q, port 0.*do "
                                              r"not take format 0x05 \(Q4_1 rows with Q8_1 "
                                              r"x.*q4=true, or convert the model to int8"):
            list(Decoder(m, be).generate([1], 2))
    man = {"matrix": {"formats": [8, 3]}}
    with pytest.raises(BackendError, match=r"formats \['0x08', '0x03'\], the model needs "
                                           r"\['q4', 'q8_0'\] \(0x05, 0x09\); render the "
                                           r"overlay with q4=true"):
        check_formats(man, m)
    with pytest.raises(BackendError, match=r"formats \['0x08', '0x03', '0x04'\], the model "
                                           r"needs \['q4', 'q8_0'\] \(0x05, 0x09\); its Q4_1 "
                                           r"lane does not take format 0x05"):
        check_formats({"matrix": {"formats": [8, 3, 4]}}, m)
    # the top of the 0x05 lane alone: the LM head's Q8_0 rows (format 0x09) need this version's
    with pytest.raises(BackendError, match=r"the model needs \['q8_0'\] \(0x09\); the LM "
                                           r"head's Q8_0 rows \(format 0x09\) need this "
                                           r"version's overlay with q4=true"):
        check_formats({"matrix": {"formats": [8, 3, 4], "block_formats": [5]}}, m)
    check_formats({"matrix": {"formats": [8, 3, 4], "block_formats": [5, 9]}}, m)
    # a model with 0x04 frames (block_x=False) on the lane without 0x05, and the BAD_FORMAT of
    # an overlay without the Q4_1 lane for it
    m4 = _as_0x04(m)
    check_formats({"matrix": {"formats": [8, 3, 4], "block_formats": [9]}}, m4)   # head: 0x09
    with pytest.raises(EngineError, match=r"no Q4_1 lane \(format 0x04\): render it with "
                                          r"q4=true"):
        list(Decoder(m4, make_backend("dma-model", m4, formats=(8, 3))).generate([1], 2))


def _as_0x04(m):
    """A copy of q4 model ``m`` whose Q4_1 matrices are format 0x04 frames (INT8 x); its Q8_0
    LM head stays format 0x09."""
    import copy
    m4 = copy.copy(m)
    m4.matrices = {}
    for name, q in m.matrices.items():
        if q.block_x and q.fmt == "q4":
            rows = np.concatenate([np.asarray(img[8 + q.x_bytes:]).reshape(r, -1)
                                   for img, r in zip(q.images, q.rows)])
            q = QMatrix(name, "q4", q.k, q.n, q.scale, [
                np.frombuffer(build_q4_frame(np.zeros(q.k, np.int8), part, q.k), np.uint8).copy()
                for part in (rows[:q.rows[0]], rows[q.rows[0]:])], q.rows, False)
        m4.matrices[name] = q
    return m4


def test_inf_scale_in_an_image_is_reported(q4_model):
    """An Inf d in a Q4_1 image: the golden backend falls back to the exact frame model,
    which flags BAD_SCALE; the decoder names it."""
    import copy
    m = copy.deepcopy(q4_model)
    qm = m.matrices["layers.1.up"]
    qm.images[1][8 + qm.x_bytes:8 + qm.x_bytes + 2] = np.frombuffer(
        np.uint16(0x7C00).tobytes(), np.uint8)
    with pytest.raises(EngineError, match=r"BAD_SCALE \(layer 1, matrix up, port 1"):
        list(Decoder(m, make_backend("golden", m)).generate([1], 2))


def test_q4_1_tensor_rows_must_be_whole_blocks():
    """GGUF requires whole 32-weight blocks per row; a raw tensor that is not is refused
    with its name (float weights of any K are requantised instead, above)."""
    from generators.runtime.model.model import q4_matrix_raw
    with pytest.raises(CheckpointError, match=r"layers.0.q: a Q4_1 tensor's rows must be whole "
                                              r"32-weight blocks, K = 40"):
        q4_matrix_raw("layers.0.q", np.zeros((4, 40), np.uint8), 40, 4)
