"""Quantisers of the runtime (docs/runtime.md, "Numerics").

* Weights, ternary: BitNet b1.58 absmean per matrix, ``W ~= trits * scale`` (scale kept).
* Weights, INT8: absmax per row, ``W[r] ~= q[r] * scale[r]``, ``scale[r] = max|W[r]| / 127``.
* Activations: BitNet absmax INT8 per token, ``x ~= q / s``, ``s = 127 / max|x|``, round half
  to even, as ``generators.packing.absmax_quantize_activations`` in float32 (``hostops``).
* KV cache: INT8 per (layer, KV head), one float32 step for K and one for V, the running absmax
  (:class:`KVCache`, arithmetic in ``hostops.kv_step``, ``kv_requantise``, ``kv_row``), or the
  model's calibrated steps; INT16 (an INT16 attention engine, ``AttentionConfig.kv_bits = 16``)
  with the calibrated steps only, each x 127 / 32767 (:func:`kv_steps_for`).
"""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from generators.packing import absmean_quantize

from ..host import ops as hostops

__all__ = ["quantise_ternary", "quantise_int8_rows", "quantise_activations", "KVCache",
           "kv_steps_for", "KV16_MAX"]

#: the INT16 cache's largest code (hostops.kv_row(..., 16) clips there)
KV16_MAX = hostops.KV16_MAX


def quantise_ternary(W: np.ndarray) -> Tuple[np.ndarray, float]:
    """BitNet b1.58 absmean per matrix: (trits int8 (N, K), scale); W ~= trits * scale."""
    trits, scale = absmean_quantize(np.asarray(W, np.float64))
    return trits, float(scale)


def quantise_int8_rows(W: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Absmax per row: (q int8 (N, K), scale (N,) float64); W[r] ~= q[r] * scale[r].

    A row that is all zero gets scale 0 and zero weights."""
    W = np.asarray(W, np.float64)
    amax = np.max(np.abs(W), axis=1)
    scale = amax / 127.0
    safe = np.where(scale > 0, scale, 1.0)
    q = np.clip(np.rint(W / safe[:, None]), -127, 127).astype(np.int8)
    return q, scale


def quantise_activations(x: np.ndarray) -> Tuple[np.ndarray, float]:
    """Per token absmax INT8 (round half to even, float32; ``hostops.quantise``): (q int8, s)
    with x ~= q / s (s float32: one per row of a 2-D x)."""
    return hostops.quantise(x)


def kv_steps_for(steps, kv_bits: int = 8) -> np.ndarray:
    """The cache's fixed steps for K and V codes of ``kv_bits`` from the model's calibrated
    INT8 steps (absmax x KV_MARGIN / 127 per layer, KV head, K or V; ``kvcal``): themselves for
    8; for 16 the same range over 32767 codes, ``float32(float64(step) * (127 / 32767))``
    (tools/answers_experiment.py's INT16 KV, the same arithmetic)."""
    st = np.asarray(steps, np.float32)
    if kv_bits == 8:
        return st
    if kv_bits != 16:
        raise ValueError(f"kv_bits = {kv_bits!r} must be 8 or 16")
    return (st.astype(np.float64) * (127 / KV16_MAX)).astype(np.float32)


class KVCache:
    """INT8 K and V cache of every (layer, KV head), one step (real value per unit) for K and
    one for V per (layer, KV head).

    The attention engine computes q.k over the whole context with ONE score scale per query
    head, so every cached row of a KV head must share one step. The step is the running absmax:
    when a new row holds a value above 127 * step, the step becomes max|row| / 127 and the rows
    already cached are requantised in place, ``clip(rint(q * (old / new)), -127, 127)``; the
    new row is then ``clip(rint(row * (1 / step)), -127, 127)``, all in float32
    (``hostops.kv_append``, the same in C). After the first tokens the step rarely moves. A
    step of 0 (nothing but zeros so far) stores zeros.

    ``kv_bits = 16`` (an INT16 attention engine): int16 codes, the model's calibrated
    ``steps`` only (given as the INT8 steps; the cache holds :func:`kv_steps_for`'s), each row
    ``rint(clip(row * (1 / step), -32767, 32767))`` (``hostops.kv_row(..., 16)``), values
    beyond 32767 steps counted in :attr:`clipped`. No running absmax: refused.
    """

    def __init__(self, layers: int, kv_heads: int, max_context: int, head_dim: int,
                 K: Optional[np.ndarray] = None, V: Optional[np.ndarray] = None,
                 steps: Optional[np.ndarray] = None, kv_bits: int = 8):
        if kv_bits not in (8, 16) or isinstance(kv_bits, bool):
            raise ValueError(f"kv_bits = {kv_bits!r} must be 8 or 16")
        if kv_bits == 16 and steps is None:
            raise ValueError("the INT16 KV cache takes the model's calibrated KV steps only "
                             "(no running absmax, no requantisation): this model has none "
                             "(convert it with kv=True)")
        self.kv_bits = kv_bits
        self.dtype = np.dtype(np.int16 if kv_bits == 16 else np.int8)
        #: the largest code: values beyond it times the step are clipped
        self.code_max = KV16_MAX if kv_bits == 16 else 127
        # storage: (layers, kv_heads, max_context, ...) arrays whose trailing axes hold one
        # row of head_dim values in C order; the runtime passes views of its DMA memory
        # (the layout the attention engine reads, split by port: DmaRuntime.kv_views)
        if K is None:
            K = np.zeros((layers, kv_heads, max_context, head_dim), self.dtype)
            V = np.zeros_like(K)
        if K.dtype != self.dtype or V.dtype != self.dtype:
            raise ValueError(f"KV storage of {K.dtype} / {V.dtype} for an INT{kv_bits} cache")
        self.K, self.V = K, V
        # float32 (float64 under hostops.use("float64"), the reference precision)
        self.k_step = np.zeros((layers, kv_heads), hostops.dtype())
        self.v_step = np.zeros((layers, kv_heads), hostops.dtype())
        #: fixed steps (the model's calibrated ones): no growth, no requantisation
        self.fixed = steps is not None
        if self.fixed:
            st = np.asarray(steps, np.float32)
            if st.shape != (layers, kv_heads, 2) or not np.all(np.isfinite(st)) \
                    or np.any(st < 0):
                raise ValueError(f"KV steps: expected finite steps >= 0 of shape "
                                 f"{(layers, kv_heads, 2)}, got {st.shape}")
            st = kv_steps_for(st, kv_bits)
            self.k_step[:], self.v_step[:] = st[..., 0], st[..., 1]
        #: values beyond 127 steps (32767 in an INT16 cache), stored as +-127 (+-32767)
        #: (fixed steps only)
        self.clipped = 0
        self.length = np.zeros(layers, np.int64)
        self.max_context = max_context
        self.head_dim = head_dim
        #: bytes written into the cache: new rows, and rows requantised when a step grew
        self.written = 0
        self.requantised = 0
        #: (layer, head, "K" or "V", position) of every step growth that requantised rows
        self.requant_events = []
        #: while a speculative pass runs (begin_undo .. end_undo): what undoing its rows needs
        self._undo = None

    def _append(self, store, steps, layer, head, t, row, which):
        if self.fixed:
            # one kernel: the row at the head's fixed step, clamped to +-127 (+-32767 in an
            # INT16 cache; hostops.kv_row)
            step = steps[layer, head]
            if not np.all(np.isfinite(row)):      # as kv_step refuses it (and the C loop)
                raise ValueError(f"kv_step: the row {hostops.ERR_NONFINITE}")
            store[layer, head, t] = hostops.kv_row(row, step, self.kv_bits).reshape(
                store.shape[3:])
            if step > 0:
                lim = (self.code_max + 0.5) * float(step)
                self.clipped += int(np.count_nonzero(np.abs(row) > lim))
            self.written += self.head_dim * self.dtype.itemsize
            return
        # hostops' three parts (the C library's when built): the step, the cached rows
        # requantised in place (any layout of the view), the new row
        step, ratio = self._grow(row, steps[layer, head])
        if ratio > 0 and t:
            u = self._undo
            if u is not None and (which, layer, head) not in u["saved"]:
                # the rows cached before the pass, once, before their first requantisation
                n0 = int(u["length"][layer])
                u["saved"][(which, layer, head)] = np.array(store[layer, head, :n0])
            hostops.kv_requantise(store[layer, head, :t], ratio)
            self.requantised += t * self.head_dim
            self.requant_events.append((layer, head, which, t))
        steps[layer, head] = step
        store[layer, head, t] = hostops.kv_row(row, step).reshape(store.shape[3:])
        self.written += self.head_dim

    @staticmethod
    def _grow(row, step):
        """The running absmax's new step and requantisation ratio (``hostops.kv_step``)."""
        step, ratio, _ = hostops.kv_step(row, step)
        return step, ratio

    def rows(self, which: str, layer: int, head: int, n: int) -> np.ndarray:
        """Positions 0..n-1 of one (layer, KV head) of K or V as (n, head_dim) int8 (int16 in
        an INT16 cache)."""
        store = self.K if which == "K" else self.V
        return np.asarray(store[layer, head, :n]).reshape(n, self.head_dim)

    def append(self, layer: int, k: np.ndarray, v: np.ndarray) -> int:
        """Append one position's k and v (kv_heads, head_dim), real values; return the new L."""
        t = int(self.length[layer])
        if t >= self.max_context:
            raise ValueError(f"KV cache of layer {layer} is full ({self.max_context} positions)")
        if self._undo is not None:
            self._undo["rows"].append((layer, np.array(k), np.array(v)))
        for h in range(k.shape[0]):
            self._append(self.K, self.k_step, layer, h, t, np.asarray(k[h], np.float64), "K")
            self._append(self.V, self.v_step, layer, h, t, np.asarray(v[h], np.float64), "V")
        self.length[layer] = t + 1
        return t + 1

    # ---------------------------------------------------------------- speculation
    def begin_undo(self) -> None:
        """Start a pass whose last rows may be taken back (speculative decoding): the steps and
        lengths now, every row appended from here on, and each (K/V, layer, head)'s cached rows
        before its first requantisation in the pass."""
        self._undo = {"k_step": self.k_step.copy(), "v_step": self.v_step.copy(),
                      "length": self.length.copy(), "rows": [], "saved": {}}

    def end_undo(self, keep: Optional[int] = None) -> None:
        """End the pass keeping the first ``keep`` rows it appended to every layer (None: all).
        The cache becomes exactly what appending only those rows would have made: the steps,
        lengths and requantised rows of before the pass restored, those rows appended again
        (the KV append is a function of the cache and the row)."""
        u, self._undo = self._undo, None
        if u is None or keep is None:
            return
        per_layer: dict = {}
        for layer, k, v in u["rows"]:
            per_layer.setdefault(layer, []).append((k, v))
        if all(len(r) <= keep for r in per_layer.values()):
            return
        self.k_step[:], self.v_step[:], self.length[:] = u["k_step"], u["v_step"], u["length"]
        for (which, layer, head), rows in u["saved"].items():
            store = self.K if which == "K" else self.V
            store[layer, head, :len(rows)] = rows
        for layer, rows in per_layer.items():
            for k, v in rows[:keep]:
                self.append(layer, k, v)

