"""x in two parts (docs/activations.md section 7): a transfer of blocks (formats 0x05 and
0x09) carries each row of x as two vectors of one B-vector frame, x's blocks and its
residual's, and the host adds the two words. Checked here on the tiny checkpoint and the golden
fabric: the default (2 where the frames take two vectors and the layers take blocks), the
refusals, the matrices' results against a float64 product of the image's own weights (an
independent model: numpy on the decoded Q4_1 and Q8_0 rows; the residual cuts the error by more than 30
times), the two loops bit for bit, and a prefill of two rows a pass (V = 4) equal to token by
token. The quantiser itself: tests/runtime/host/test_hostops.py.

Tiny checkpoint (2 layers, hidden 192, 1 KV head, vocab 512), max_k 512, max_context 32.
"""
from __future__ import annotations

import numpy as np
import pytest

from generators.runtime import Decoder, convert, load_checkpoint, make_backend
from generators.runtime.engines.plan import QKV
from generators.runtime.host import ops as hostops
from generators.runtime.model.checkpoint import EngineConfig
from generators.runtime.model.forced import MatrixOp
from generators.runtime.model.synthetic import TINY, write_checkpoint

ENG = EngineConfig(max_k=512, max_context=32)
PROMPT = [1, 2, 3, 4, 5]
SAMPLING = dict(temperature=1.0, top_k=50, seed=3)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    ck = load_checkpoint(write_checkpoint(tmp_path_factory.mktemp("tiny"), TINY, seed=1), ENG)
    return {f: convert(ck, f, ENG, notice=None) for f in ("int8", "ternary", "q4")}


def test_default_parts_and_refusals(models):
    for fmt, want in (("q4", 2), ("int8", 2), ("ternary", 1)):
        m = models[fmt]
        dec = Decoder(m, make_backend("golden", m, vectors=2))
        assert dec.parts() == want, fmt
        assert dec.rows_per_pass == 2 // want and dec.default_chunk() == 2 // want
        assert Decoder(m, make_backend("golden", m, vectors=1)).parts() == 1
        assert Decoder(m, make_backend("golden", m, vectors=4)).rows_per_pass == 4 // want
    m = models["q4"]
    with pytest.raises(ValueError, match="x_parts must be 1, 2 or None"):
        Decoder(m, make_backend("golden", m), x_parts=3)
    dec = Decoder(m, make_backend("golden", m, vectors=1), x_parts=2)
    with pytest.raises(ValueError, match=r"x_parts=2: the matrix engines take 1 vector"):
        dec.step(1)
    dec = Decoder(m, make_backend("golden", m, vectors=2))
    with pytest.raises(ValueError, match=r"2 rows in one weight pass; the matrix engines take "
                                         r"1\.\.1 rows of 2 vector"):
        dec.step_rows([(0, 1, False)] * 2)


def _weights(m, name: str) -> np.ndarray:
    """A Q4_1 or Q8_0 matrix's weights (N, K) float64, decoded from its images (the rows the
    engines stream): d q + m per block, or d q."""
    op = MatrixOp(m.matrices[name])
    W = op.ct.astype(np.float64) * op.D.T[:, :, None]                # (nb, N, 32)
    if op.fmt == "q4":
        W = W + op.M.T[:, :, None]
    return (W.transpose(1, 0, 2).reshape(op.n, -1) / 2.0 ** 24)[:, :op.k]


@pytest.mark.parametrize("path", ["numpy", "c"])
@pytest.mark.parametrize("fmt", ["q4", "int8"])
def test_two_parts_follow_the_float_product(models, fmt, path):
    """Two rows of x with outlier channels through layer 0's q+k+v transfer (Q4_1 rows, 0x05;
    Q8_0 rows, 0x09):
    with two parts every result is within the quantiser's bound of W x (float64, the image's
    weights), and the largest error is under 1/30 of one part's."""
    if path == "c" and hostops.active() != "c":
        pytest.skip("the C library is not built")
    m = models[fmt]
    rng = np.random.default_rng(5)
    names = {QKV: ("layers.0.q", "layers.0.k", "layers.0.v")}   # a step's first transfer
    for kind, mats in names.items():
        k = m.matrices[mats[0]].k
        X = (rng.standard_normal((2, k)) * 3).astype(np.float32)
        X[:, rng.integers(0, k, 4)] *= 30
        errs = {}
        for P in (1, 2):
            dec = Decoder(m, make_backend("golden", m, vectors=4), x_parts=P, loop="python")
            with hostops.using(path):
                outs = dec._matrices_b(0, kind, X)
            errs[P] = 0.0
            for name, y in zip(mats, outs):
                W = _weights(m, name)
                want = X.astype(np.float64) @ W.T                  # (2, N)
                err = np.abs(np.asarray(y, np.float64) - want)
                errs[P] = max(errs[P], float(err.max()))
                if P == 2:
                    amax = np.repeat(np.abs(X.reshape(2, -1, 32)).max(axis=2), 32, axis=1)
                    e = amax * 2.0 ** -15 + 127 * 2.0 ** -25    # per x value (test_hostops)
                    bound = e @ np.abs(W.T) + 2.0 ** -22 * (np.abs(X) @ np.abs(W.T))
                    assert np.all(err <= bound), (kind, name, float((err / bound).max()))
        assert errs[2] * 30 < errs[1], (kind, errs)


@pytest.mark.parametrize("fmt", ["int8", "q4"])
def test_two_parts_on_both_loops_and_in_passes_of_two_rows(models, fmt):
    """generate() with two parts: the Python loop token by token (V = 2) is the reference;
    the C loop (token by token on V = 2, and 2-row passes on V = 4) and the Python loop's
    2-row passes (V = 4) give its tokens, its last logits bit for bit and its KV cache."""
    m = models[fmt]
    ref = Decoder(m, make_backend("golden", m, vectors=2), loop="python")
    assert ref.parts() == 2
    ref.chunk = 1
    want = list(ref.generate(PROMPT, 4, **SAMPLING))
    runs = [("python", 4)] + ([("c", 2), ("c", 4)] if hostops.active() == "c" else [])
    for loop, V in runs:
        be = make_backend("golden", m, vectors=V)
        dec = Decoder(m, be, loop=loop)
        assert dec.default_chunk() == V // 2
        assert list(dec.generate(PROMPT, 4, **SAMPLING)) == want, (loop, V)
        assert np.array_equal(dec.last_logits, ref.last_logits), (loop, V)
        n = int(ref.kv.length.max())
        assert np.array_equal(np.asarray(dec.kv.K[:, :, :n]), np.asarray(ref.kv.K[:, :, :n]))
        assert np.array_equal(np.asarray(dec.kv.V[:, :, :n]), np.asarray(ref.kv.V[:, :, :n]))
