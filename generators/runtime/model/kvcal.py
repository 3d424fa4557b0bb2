"""The fixed KV steps of a model, calibrated once at conversion: teacher forcing
(:mod:`forced`) over the calibration text, each step the running absmax times a margin
(docs/runtime.md section 4.5)."""
from __future__ import annotations

from pathlib import Path
from typing import List

import numpy as np

from ..host import ops as hostops
from .forced import forced
from .quantise import KVCache

__all__ = ["calibrate_kv_steps", "calibration_ids", "CALIBRATION_TEXT", "KV_CAL_TOKENS",
           "KV_MARGIN"]


#: the KV steps' calibration text (Mary Shelley, Frankenstein (1818), Letter 2; public domain,
#: Project Gutenberg eBook #84; docs/data/README.md), never an evaluation text of make quality
CALIBRATION_TEXT = Path(__file__).with_name("kv_calibration.txt")
#: tokens of it that calibrate, and the margin over their absmax (docs/runtime.md section 4.5)
KV_CAL_TOKENS = 512
KV_MARGIN = 1.25


def calibration_ids(tokenizer=None, vocab_size: int = 0, n: int = KV_CAL_TOKENS) -> List[int]:
    """The first ``n`` token ids of the calibration text, or (a model without a tokenizer)
    ``n`` ids drawn from the vocabulary with a fixed seed."""
    if tokenizer is not None:
        return list(tokenizer.encode(CALIBRATION_TEXT.read_text(encoding="utf-8")))[:n]
    return np.random.default_rng(0).integers(0, vocab_size, n).tolist()


def calibrate_kv_steps(model, ids, margin: float = KV_MARGIN) -> np.ndarray:
    """Fixed KV steps for ``model``: its running-absmax steps after the calibration ``ids``
    (teacher forcing from position 0 on the golden numerics with the float32 host ops,
    ``generators.runtime.model.forced``), times ``margin``, as float32 (layers, kv_heads, 2: K, V).
    Rows of other texts beyond 127 steps are clipped (docs/runtime.md section 4.5)."""
    if not margin >= 1.0:
        raise ValueError(f"KV step margin {margin} must be >= 1")
    ids = list(ids)[:model.engines.max_context]
    c = model.config
    kv = KVCache(c.num_hidden_layers, c.num_key_value_heads, max(len(ids), 1), c.head_dim)
    with hostops.using("numpy" if hostops.active() == "float64" else hostops.active()):
        forced(model, ids, kv=kv)
    steps = np.stack([kv.k_step, kv.v_step], axis=-1).astype(np.float64) * margin
    return steps.astype(np.float32)
