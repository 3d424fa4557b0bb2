"""generators.runtime.model.forced (make quality's teacher forcing, a layer at a time) against the
Decoder on the golden backend, position by position, bit for bit; the float64 host path; the
KV steps calibrated at conversion (fixed steps, clipping, no requantisation, in the image)."""
from __future__ import annotations

import numpy as np
import pytest

from generators.runtime import Decoder, Model, convert, load_checkpoint, make_backend
from generators.runtime.host import ops as hostops
from generators.runtime.model.checkpoint import EngineConfig
from generators.runtime.model.forced import forced
from generators.runtime.model.kvcal import calibrate_kv_steps
from generators.runtime.model.quantise import KVCache
from generators.runtime.model.synthetic import TINY, write_checkpoint

ENG = EngineConfig(max_k=512, max_context=32)
#: an INT16 attention engine (its KV cache INT16: docs/runtime.md 4.5)
ENG16 = EngineConfig(max_k=512, max_context=32, exp_width=21, scale_frac_bits=16, kv_bits=16)
IDS = [1, 5, 9, 2, 7, 7, 3, 11, 4, 6, 8, 10, 12, 0, 2, 13]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return load_checkpoint(write_checkpoint(tmp_path_factory.mktemp("tiny"), TINY, seed=3), ENG)


@pytest.fixture(scope="module")
def models(tiny):
    out = {}
    for fmt in ("int8", "ternary", "q4"):
        out[fmt] = convert(tiny, fmt, ENG, notice=None, kv=False)     # the running absmax
        out[fmt + "-cal"] = convert(tiny, fmt, ENG, notice=None)      # calibrated steps
    for fmt in ("int8", "q4"):                                         # the INT16 cache
        out[fmt + "-cal16"] = convert(tiny, fmt, ENG16, notice=None)
    return out


def _decoder_logits(model, ids, x_parts=1):
    dec = Decoder(model, make_backend("golden", model, vectors=2), x_parts=x_parts)
    out = np.stack([dec.step(t) for t in ids])
    return out, dec


def _bits(a):
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64)


@pytest.mark.parametrize("path", ["auto", "float64"])
@pytest.mark.parametrize("name", ["int8", "ternary", "q4", "int8-cal", "q4-cal", "int8-cal16",
                                  "q4-cal16"])
@pytest.mark.parametrize("x_parts", [1, 2])
def test_forced_equals_the_decoder_bit_for_bit(models, name, path, x_parts):
    """x_parts 2: x of the matrices of blocks in two parts (docs/activations.md section 7)."""
    m = models[name]
    with hostops.using(path):
        ref, dec = _decoder_logits(m, IDS, x_parts)
        r = forced(m, IDS, logits=True, x_parts=x_parts)
    want = np.float64 if path == "float64" else np.float32
    assert ref.dtype == r["logits"].dtype == want
    assert np.array_equal(_bits(ref), _bits(r["logits"]))
    # the KV cache itself: the same rows and steps
    kv = r["kv"]
    n = len(IDS)
    c = m.config
    for w in ("K", "V"):
        for i in range(c.num_hidden_layers):
            for h in range(c.num_key_value_heads):
                assert np.array_equal(kv.rows(w, i, h, n), dec.kv.rows(w, i, h, n))
    assert np.array_equal(kv.k_step, dec.kv.k_step) and np.array_equal(kv.v_step, dec.kv.v_step)
    # the log-likelihoods and argmaxes it reports are those of these logits
    lg = ref.astype(np.float64)
    z = lg - lg.max(axis=1, keepdims=True)
    ll = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    assert np.allclose(r["ll"], ll[np.arange(n - 1), IDS[1:]], rtol=0, atol=1e-9)
    assert np.array_equal(r["argmax"], np.argmax(ref[:-1], axis=1))


def test_float64_path_differs_from_float32_and_is_float64(models):
    m = models["int8"]
    with hostops.using("float64"):
        assert hostops.dtype() == np.float64 and hostops.active() == "float64"
        a = forced(m, IDS, logits=True)["logits"]
        x = np.linspace(-3, 3, 17)
        assert hostops.rmsnorm(x, np.ones(17), 1e-5).dtype == np.float64
    b = forced(m, IDS, logits=True)["logits"]
    assert a.dtype == np.float64 and b.dtype == np.float32
    assert not np.array_equal(a.astype(np.float32), b)
    assert np.max(np.abs(a - b)) < 0.05 * np.max(np.abs(a))


def test_float64_exp_is_float64_accurate():
    x = np.linspace(-86, 88, 20001)
    with hostops.using("float64"):
        e = hostops.exp(x)
    assert e.dtype == np.float64
    rel = np.abs(e - np.exp(x)) / np.exp(x)
    assert rel.max() < 8 * 2.0 ** -52               # a few float64 ulp (float32's: 2^-23)


def test_running_absmax_requantises_and_fixed_steps_never_do(models):
    run = forced(models["int8"], IDS)
    cal = forced(models["int8-cal"], IDS)
    assert len(run["kv"].requant_events) > 0
    assert len(cal["kv"].requant_events) == 0 and cal["kv"].requantised == 0
    c = models["int8"].config
    per_token = c.num_hidden_layers * c.num_key_value_heads * 2 * c.head_dim
    assert np.all(cal["kv_bytes"] == per_token)          # only the new rows, every token
    assert run["kv_bytes"].max() > per_token


def test_calibrated_steps_are_the_running_steps_times_the_margin(models):
    m = models["int8"]
    c = m.config
    ids = IDS[:10]
    kv = KVCache(c.num_hidden_layers, c.num_key_value_heads, len(ids), c.head_dim)
    forced(m, ids, kv=kv)
    steps = calibrate_kv_steps(m, ids, 1.5)
    assert steps.dtype == np.float32 and steps.shape == (c.num_hidden_layers,
                                                         c.num_key_value_heads, 2)
    want = (np.stack([kv.k_step, kv.v_step], -1).astype(np.float64) * 1.5).astype(np.float32)
    assert np.array_equal(steps, want)
    with pytest.raises(ValueError, match="margin"):
        calibrate_kv_steps(m, ids, 0.5)


def test_fixed_steps_clip_and_count():
    kv = KVCache(1, 1, 4, 4, steps=np.array([[[1 / 127, 2 / 127]]], np.float32))
    kv.append(0, np.array([[0.5, -3.0, 1.0, 0.0]]), np.array([[0.5, 1.0, -2.0, 9.0]]))
    assert kv.K[0, 0, 0].tolist() == [64, -127, 127, 0]
    assert kv.V[0, 0, 0].tolist() == [32, 64, -127, 127]
    assert kv.clipped == 2 and kv.requantised == 0 and kv.written == 8   # -3.0 and 9.0
    with pytest.raises(ValueError, match="KV steps"):
        KVCache(1, 1, 4, 4, steps=np.ones((2, 1, 2)))


def test_the_image_keeps_the_steps(models, tmp_path):
    m = models["q4-cal"]
    assert m.kv_steps is not None and m.kv_calibration["tokens"] == ENG.max_context
    back = Model.load(m.save(tmp_path / "m.tpimg"))
    assert np.array_equal(back.kv_steps, m.kv_steps)
    assert back.kv_calibration == m.kv_calibration
    assert Model.load(models["q4"].save(tmp_path / "r.tpimg")).kv_steps is None
    a, _ = _decoder_logits(m, IDS[:6])
    b, _ = _decoder_logits(back, IDS[:6])
    assert np.array_equal(a, b)


def test_op_groups_in_float64(models):
    """make quality --ablate's instrument: no group is the float32 path itself; a group runs in
    float64 and moves the logits; an unknown group is refused by name."""
    from generators.runtime.model.forced import F64_GROUPS
    m = models["int8"]
    a = forced(m, IDS, logits=True)["logits"]
    for g in F64_GROUPS:
        b = forced(m, IDS, logits=True, f64_ops=(g,))["logits"]
        assert np.max(np.abs(b.astype(np.float64) - a)) < 0.05 * np.max(np.abs(a)), g
    c = forced(m, IDS, logits=True, f64_ops=F64_GROUPS)["logits"]
    assert c.dtype == np.float64 and not np.array_equal(c.astype(np.float32), a)
    with pytest.raises(ValueError, match="softmax"):
        forced(m, IDS, f64_ops=("softmax",))


def test_int16_cache_in_forced(models, tiny):
    """An INT16 engine's model: forced() keeps an INT16 cache (int16 codes, the calibrated
    INT8 steps x 127 / 32767, nothing requantised) as the Decoder does; its calibration ran on
    an INT8 running absmax (the steps are INT8 steps, as in any image)."""
    m = models["int8-cal16"]
    r = forced(m, IDS)
    kv = r["kv"]
    assert kv.kv_bits == 16 and kv.K.dtype == np.int16 and kv.fixed and kv.requantised == 0
    want = (m.kv_steps.astype(np.float64) * (127 / 32767)).astype(np.float32)
    assert np.array_equal(kv.k_step, want[..., 0]) and np.array_equal(kv.v_step, want[..., 1])
    assert np.abs(kv.K[:, :, :len(IDS)]).max() > 127           # the codes use the width
    c = m.config
    rows = c.num_hidden_layers * c.num_key_value_heads * 2           # K and V rows a token
    assert np.all(r["kv_bytes"] == rows * c.head_dim * 2)          # two bytes a code
    with pytest.raises(ValueError, match="calibrated KV steps only"):
        forced(convert(tiny, "int8", ENG16, notice=None, kv=False), IDS[:3])
