"""The decoder's per-token step in C (``csrc/tphloop.c``): its table, its register interface,
its errors, and the replay backend (docs/runtime.md section 4.3).

    from generators.runtime.engines import cloop as hostloop
    cl = hostloop.for_runtime(be)           # None when the C library is not built
    logits = cl.step(decoder, token, logits=True)
    rows_logits = cl.step_rows(decoder, [(stream, token, logits), ...], positions)

``Decoder.step`` and ``Decoder.step_rows`` call it when the host ops run in C
(``hostops.active() == "c"``, or ``Decoder(..., loop="c")``); the Python loop of
``decoder.py`` / ``backends.py`` stays the reference (``loop="python"``), and the two give the
same engine words, logits and tokens. ``step_rows`` is the batched step (``tph_step_rows``: B
rows in one weight pass through B-vector frames, docs/runtime.md 4.7).

What C gets, all computed here from the runtime's own objects, never by C itself:

* **the table** (uint32 words, layout in ``tphloop.h``): the dimensions, the x and part
  slots' offsets in the frames region, and per transfer its frames (tag, format, rows per
  port, where its row scales start), every descriptor's STATUS and CONTROL word and channel,
  the TAILDESC writes (S2MM first), the result slots, each channel's next transfer with the
  LM head on and off: DmaRuntime's chains, as ``DmaRuntime.run`` uses them; per step, the
  decoder's RoPE tables' type and its KV cache's policy (``KVCache.fixed``: the model's
  calibrated steps, each row clipped to +-127 and the clipped values counted; else the running
  absmax with requantisation);
* **pointers**: the frames and kv regions (the DMA memory), the Q8_0 embedding rows (the
  image's, mapped), float32 copies of the norms and row scales (``hostops`` converts the same
  float64 values on every call; here once: the same float32 bits), the RoPE tables, the
  decoder's KV steps and lengths, the state shared with the Python runtime (each channel's
  next transfer, the LM head link, L, the timeouts), the step's counters and error words;
* **the register interface** (``tph_io``): the mapped register pages of the two DMAs on the
  board (direct volatile access; ``DmaRuntime.direct_regs``), else ctypes callbacks into the
  register model (golden, rtl, the tests; a callback's exception is kept and raised after the
  step), or the C replay device's own functions (no Python at all per token); and the cached
  results region's invalidate by range (``tph_io.sync``, called with exactly the lines about
  to be read): on the board XRT's own ``xclSyncBO`` (``DmaRuntime.cache_sync``: its address,
  the device handle, the buffer object and the region's offset in it; no Python per token),
  on the replay device ``tph_replay_sync``, else a callback into the DDR model's cache
  (``DmaBuffer.invalidate`` of the slice).

Faults are handled in C as the Python runtime does (both DMAs reset, the PL reset through a
callback, the channels started where the chains stand, the transfer run once more); the
step then returns the fault records and this module raises the same exception with the same
message as the Python loop (DmaHangError, DmaError, DmaShortError, EngineError, ValueError).

``python tools/tphfacts.py`` rewrites ``csrc/tphfacts.h`` from
``generators/runtime/engines/pg021.py`` and ``generators/contract.py`` (tests check it is current).
"""
from __future__ import annotations

import ctypes
import os
import struct
import weakref
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

from generators import contract
from generators.golden import attention as gatt

from ..errors import (BackendError, DmaError, DmaHangError, DmaResetError, DmaShortError,
                      EngineError)
from ..host import clib as hostlib
from ..host import ops as hostops
from .faults import attention_error, matrix_error
from . import pg021 as R
from .plan import ATT, CHANNEL_NAMES, DOWN, GU, KINDS, LM, O, QKV

__all__ = ["CLoop", "for_runtime", "available", "why_unavailable", "load_library", "c_facts",
           "FACTS", "TPH_LOOP_ABI", "TPH", "THREADS_ENV", "SPIN_US", "default_threads"]

HERE = Path(__file__).resolve().parents[1] / "host"
FACTS = HERE / "csrc" / "tphfacts.h"
TPH_LOOP_ABI = 9                       # tphloop.h TPH_LOOP_ABI
NONE = 0xFFFFFFFF
#: the C step's threads (docs/runtime.md section 9, "Both cores"): 2 (the default: a worker
#: thread of the library takes the second core's half of the LM head's dequantisation and of
#: the argmax) or 1 (the same halves one after the other on the caller's thread)
THREADS_ENV = "TERNARY_PYNQ_THREADS"
#: how long (us) the idle worker spins for its next job before it sleeps on the board
#: (``DmaRuntime.worker_spin_us``; 0 on the backends that model the engines on this CPU):
#: longer than the LM head's transfer on the board (30.1 MB of Q8_0 rows at the DDR wall,
#: about 15 ms), so the worker woken before that transfer is spinning when the logits arrive
SPIN_US = 30000


def default_threads() -> int:
    """The C step's threads: ``TERNARY_PYNQ_THREADS`` (1 or 2), else 2."""
    v = os.environ.get(THREADS_ENV, "2").strip()
    if v not in ("1", "2"):
        raise ValueError(f"{THREADS_ENV}={v!r}: 1 or 2")
    return int(v)


class TPH:
    """tphloop.h's enumerations (word indices and codes), kept beside the header."""

    MAGIC = 0x54504C31
    (T_MAGIC, T_WORDS, T_LAYERS, T_HIDDEN, T_MLP, T_HEADS, T_KV_HEADS, T_HEAD_DIM, T_VOCAB,
     T_EPS, T_CONTEXT, T_KV_ROW, T_EMBED_ROWS, T_EMBED_STRIDE, T_ROPE_F64, T_HDR_BYTES, T_PART0,
     T_PART1, T_ATT_WORDS, T_FRAC_BITS, T_SPO, T_MAX_SHIFT, T_MULT_BITS, T_N_XFER, T_XFER_OFF,
     T_KIND_OFF, T_XSLOT_OFF, T_PART_OFF, T_KVCTRL_OFF, T_KVCTRL_N, T_SWITCH_OFF, T_SEQ0_OFF,
     T_TRACE_WORDS, T_TRACE_OUTS, T_FRAMES_BYTES, T_KV_BYTES, T_KV_FIXED, T_VECTORS, T_STREAMS,
     T_KV_STREAM_BYTES, T_VEC_OFF, T_ATTX_OFF, T_RESULTS_BYTES, T_KV_BITS, T_X_PARTS) = range(45)
    T_HEADER = 48
    MAX_VECTORS = 16
    VEC_WORDS = 6
    X_FIXED = 18
    FRAME_WORDS, DESC_WORDS, TAIL_WORDS, OUT_WORDS = 5, 3, 3, 6
    (P_FRAMES, P_KV, P_EMBED, P_NORMS, P_SCALES, P_COS, P_SIN, P_KSTEP, P_VSTEP, P_LENGTH,
     P_STATE, P_STATS, P_ERR, P_LOGITS, P_TRACE, P_TRACE_N, P_XSTATE, P_RESULTS,
     P_COUNT) = range(19)
    S_NEXT, S_LINK, S_L, S_TIMEOUT_US, S_RESET_TIMEOUT_US, STATE_WORDS = 0, 4, 5, 6, 7, 8
    (C_KV, C_PARTS, C_X, C_DESC, C_REQUANT, C_TRANSFERS, C_TAILS, C_READS0, C_READS1,
     C_WRITES0, C_WRITES1, C_RETRIES, C_GROWTHS, C_READ, C_CLIPPED, C_INVALIDATES,
     C_INVALIDATED, C_READ_CACHED, STATS) = range(19)
    (E_DMA_ERRBIT, E_DMA_HALTED, E_DMA_HANG, E_DMA_DESC, E_DMA_SHORT, E_DMA_OVER) = range(1, 7)
    (E_MATRIX, E_ATT, E_VALUE, E_RESET, E_IO, E_ORDER, E_ARG, E_CONTEXT, E_SYNC) = range(16, 25)
    LINE, SYNC_FROM_DEVICE = 32, 1
    W_NONE, W_FLAGS, W_COUNT, W_TAG = 1, 2, 3, 4
    V_QUANTISE, V_KV_STEP, V_KV_REQUANT, V_SCORE, V_QUANTISE_Q8_1, V_QUANTISE_Q8_0 = \
        1, 2, 3, 4, 5, 6
    RES_INT32, RES_F32, RES_VALUE, RES_VALUE_Q8_0 = 0, 1, 2, 3
    REC_WORDS, ERR_RETRIED = 12, 4
    ERR_NRETRIED = REC_WORDS * (1 + ERR_RETRIED)
    ERR_WORDS = ERR_NRETRIED + 1


KIND_CODE = {QKV: 0, ATT: 1, O: 2, GU: 3, DOWN: 4, LM: 5}
XSLOT_KINDS = (QKV, O, GU, DOWN, LM)


# --------------------------------------------------------------------------- the facts header

def c_facts() -> str:
    """``csrc/tphfacts.h``: PG021's registers and descriptor bits (pg021.py) and the
    attention frame's magics (contract.py), for the C loop and the replay device."""
    rows = [("S2MM", R.S2MM), ("DMACR", R.DMACR), ("DMASR", R.DMASR), ("CURDESC", R.CURDESC),
            ("CURDESC_MSB", R.CURDESC_MSB), ("TAILDESC", R.TAILDESC),
            ("TAILDESC_MSB", R.TAILDESC_MSB), ("CR_RS", R.CR_RS), ("CR_RESET", R.CR_RESET),
            ("SR_HALTED", R.SR_HALTED), ("SR_IDLE", R.SR_IDLE), ("SR_SGINCLD", R.SR_SGINCLD),
            ("SR_ERRORS", R.SR_ERRORS), ("DESC_BYTES", R.DESC_BYTES),
            ("D_NXTDESC", R.D_NXTDESC), ("D_BUFFER", R.D_BUFFER), ("D_CONTROL", R.D_CONTROL),
            ("D_STATUS", R.D_STATUS), ("LEN_MASK", R.LEN_MASK), ("CTRL_SOF", R.CTRL_SOF),
            ("CTRL_EOF", R.CTRL_EOF), ("ST_RXEOF", R.ST_RXEOF), ("ST_RXSOF", R.ST_RXSOF),
            ("ST_CMPLT", R.ST_CMPLT), ("ST_ERRORS", R.ST_ERRORS),
            ("ATTENTION_MAGIC", contract.ATTENTION_MAGIC), ("ROUTE_MAGIC", contract.ROUTE_MAGIC)]
    out = ["/* tphfacts.h: generated by `python tools/tphfacts.py` from",
           " * generators/runtime/engines/pg021.py (the AXI DMA's registers and descriptor bits, PG021)",
           " * and generators/contract.py (the attention frame's magics). Do not edit: the facts",
           " * are defined there once; tests/runtime/engines/test_hostloop.py checks this file is current. */",
           "#ifndef TPHFACTS_H", "#define TPHFACTS_H", ""]
    out += [f"#define TPH_{n} 0x{v:X}u" for n, v in rows]
    out += ["", "#endif /* TPHFACTS_H */", ""]
    return "\n".join(out)


# --------------------------------------------------------------------------- the library

class _Io(ctypes.Structure):
    _fields_ = [("ctx", ctypes.c_void_p), ("read", ctypes.c_void_p), ("write", ctypes.c_void_p),
                ("pl_reset", ctypes.c_void_p), ("hook", ctypes.c_void_p),
                ("kv_save", ctypes.c_void_p), ("regs", ctypes.c_void_p * 2),
                ("sync", ctypes.c_void_p), ("sync_handle", ctypes.c_void_p),
                ("sync_bo", ctypes.c_uint32), ("sync_offset", ctypes.c_uint32)]


class _Row(ctypes.Structure):
    """tphloop.h's tph_row: one position of a batched step."""
    _fields_ = [("stream", ctypes.c_uint32), ("token", ctypes.c_uint32),
                ("pos", ctypes.c_uint32), ("logits", ctypes.c_uint32),
                ("k_step", ctypes.c_void_p), ("v_step", ctypes.c_void_p),
                ("length", ctypes.c_void_p), ("out", ctypes.c_void_p),
                ("kv_rows", ctypes.c_void_p), ("kv_written", ctypes.c_uint32),
                ("kv_requantised", ctypes.c_uint32), ("kv_clipped", ctypes.c_uint32),
                ("reserved", ctypes.c_uint32)]


_READ = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32,
                         ctypes.POINTER(ctypes.c_uint32))
_WRITE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32,
                          ctypes.c_uint32)
_RESET = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)
_HOOK = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32)
_KV_SAVE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32,
                            ctypes.c_uint32)
#: tph_sync_fn: xclSyncBO's signature (handle, bo, direction, size, offset)
_SYNC = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int32,
                         ctypes.c_size_t, ctypes.c_size_t)

_P, _U, _I = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int32
_SIGNATURES = {
    "tph_loop_abi": (_I, []),
    "tph_ctx_bytes": (_U, [_P, _U]),
    "tph_init": (_I, [_P, _U, _P, _U, _P, _P]),
    "tph_step": (_I, [_P, _U, _U, _U]),
    "tph_step_rows": (_I, [_P, _P, _U]),
    "tph_threads": (_U, [_P, _U, _U]),
    "tph_free": (None, [_P]),
    "tph_loop_argmax": (_I, [_P, _P, _U, _U]),
    "tph_replay_bytes": (_U, []),
    "tph_replay_init": (None, [_P, _P, _U, _U]),
    "tph_replay_record": (None, [_P, _U, _P, _P, _U]),
    "tph_replay_read": (_I, [_P, _U, _U, ctypes.POINTER(_U)]),
    "tph_replay_write": (_I, [_P, _U, _U, _U]),
    "tph_replay_cache": (None, [_P, _P, _U, _U]),
    "tph_replay_sync": (_I, [_P, _U, _I, ctypes.c_size_t, ctypes.c_size_t]),
}


def load_library():
    """The tphost library with the loop's functions typed, or None (and why)."""
    ops, why = hostlib.load()
    if ops is None:
        return None, why
    lib = ops.lib
    if not getattr(lib, "_tph_typed", False):
        try:
            for fn, (res, args) in _SIGNATURES.items():
                f = getattr(lib, fn)
                f.restype, f.argtypes = res, args
        except AttributeError as e:
            return None, f"{ops.path.name} has no C loop ({e}): rebuild (make setup)"
        if lib.tph_loop_abi() != TPH_LOOP_ABI:
            return None, f"{ops.path.name} has C loop ABI {lib.tph_loop_abi()}, this package needs " \
                         f"{TPH_LOOP_ABI}: rebuild (make setup)"
        lib._tph_typed = True
    return lib, ""


def available() -> bool:
    """True when the C loop can run (the library is built and current)."""
    return load_library()[0] is not None


def why_unavailable() -> str:
    """Why the C loop cannot run ("" when it can)."""
    return load_library()[1]


def for_runtime(be) -> Optional["CLoop"]:
    """The C loop of a runtime (made once and kept on it), or None without the library."""
    rt = be.runtime
    cl = getattr(rt, "_cloop", None)
    if cl is None:
        lib, _ = load_library()
        if lib is None:
            return None
        cl = rt._cloop = CLoop(rt, lib)
    return cl


# --------------------------------------------------------------------------- the table

def build_table(rt) -> Dict[str, object]:
    """The C loop's table and host arrays for runtime ``rt`` (a DmaRuntime): its chains,
    slots and transfers as ``DmaRuntime.run`` uses them."""
    model, plan = rt.model, rt.plan
    c, acfg = model.config, rt.acfg
    L, H = c.num_hidden_layers, c.num_key_value_heads
    fr = plan.regions["frames"].items
    w = rt.words
    # float32 copies, made once (in place: the host's memory is planned): the bits hostops'
    # _f32 gives on every call
    soff, n = {}, 0
    for name, m in model.matrices.items():
        if m.fmt not in ("q4", "q8_0"):
            soff[name] = n
            n += m.n
    scales = np.zeros(max(n, 1), np.float32)
    for name, off in soff.items():
        m = model.matrices[name]
        scales[off:off + m.n] = m.scale
    keys = [k for i in range(L) for k in (f"layers.{i}.input", f"layers.{i}.post")] + ["final"]
    norms = np.zeros((len(keys), c.hidden_size), np.float32)
    for i, k in enumerate(keys):
        norms[i] = model.norms[k]

    records, trace_words, trace_outs = [], 0, 0
    for t in plan.transfers:
        blocks = rt._blocks[t.index]
        x = rt._tx[t.index]
        rec = [KIND_CODE[t.kind], NONE if t.layer is None else t.layer, len(t.frames), 0, 0, 0]
        rec += [int(blocks[ch].first) if ch in blocks else 0 for ch in range(4)]
        rec += [int(x.next_logits.get(ch, 0)) for ch in range(4)]
        rec += [int(x.next_body.get(ch, 0)) for ch in range(4)]
        for f in t.frames:
            if t.kind == ATT:
                rec += [f.tag, 0, 0, 0, 0]
            else:
                m = model.matrices[f.name]
                res = (TPH.RES_VALUE_Q8_0 if m.fmt == "q8_0" else
                       TPH.RES_VALUE if getattr(m, "block_x", False) else
                       TPH.RES_F32 if m.fmt == "q4" else TPH.RES_INT32)
                rec += [f.tag, res, m.rows[0], m.rows[1], soff.get(f.name, 0)]
        for ch in x.channels:                   # _transfer_table's order: S2MM first
            b = blocks[ch]
            s0 = int(b.status_idx[0])
            if not np.array_equal(b.status_idx, s0 + np.arange(len(b.status_idx))
                                  * R.DESC_WORDS):
                raise ValueError(f"transfer {t.name}: {CHANNEL_NAMES[ch]}'s descriptors are "
                                 f"not consecutive (the C loop checks them as one block)")
            rec += [ch, s0, len(b.status_idx)]
        rec[3] = len(x.channels)
        for _, _, last, ch in x.tails:
            rec += [ch, int(last), int(x.last_status[ch])]
        rec[4] = len(x.tails)
        outs = sorted(x.outs, key=lambda o: (o[0], o[1]))
        for fi, p, si, off in outs:
            cap = int(w[si - R.D_STATUS + R.D_CONTROL] & R.LEN_MASK) // 4
            rec += [fi, p, int(si), int(off), trace_words, trace_outs]
            trace_words += cap
            trace_outs += 1
        rec[5] = len(outs)
        records.append(np.array(rec, np.uint32))      # (arrays: the host's memory is planned)

    hdr = [0] * TPH.T_HEADER
    body: List[np.ndarray] = []
    size = [TPH.T_HEADER]

    def put(words) -> int:
        off = size[0]
        a = np.asarray(words, np.int64).astype(np.uint32)
        body.append(a)
        size[0] += len(a)
        return off

    xoff = [0] * len(records)
    for i, rec in enumerate(records):
        xoff[i] = put(rec)
    emb = model.embedding.blocks
    hdr[TPH.T_MAGIC] = TPH.MAGIC
    hdr[TPH.T_LAYERS], hdr[TPH.T_HIDDEN], hdr[TPH.T_MLP] = L, c.hidden_size, c.intermediate_size
    hdr[TPH.T_HEADS], hdr[TPH.T_KV_HEADS] = c.num_attention_heads, H
    hdr[TPH.T_HEAD_DIM], hdr[TPH.T_VOCAB] = c.head_dim, c.vocab_size
    hdr[TPH.T_EPS] = int(np.float32(c.rms_norm_eps).view(np.uint32))
    hdr[TPH.T_CONTEXT], hdr[TPH.T_KV_ROW] = plan.context, plan.kv_row
    hdr[TPH.T_EMBED_ROWS], hdr[TPH.T_EMBED_STRIDE] = emb.shape[0], emb.strides[0]
    hdr[TPH.T_HDR_BYTES] = acfg.header_beats * acfg.beat_bytes
    hdr[TPH.T_PART0], hdr[TPH.T_PART1] = plan.part_bytes
    hdr[TPH.T_ATT_WORDS] = gatt.output_word_count(acfg)
    hdr[TPH.T_FRAC_BITS], hdr[TPH.T_SPO] = acfg.scale_frac_bits, acfg.exp_steps_per_octave
    hdr[TPH.T_KV_BITS] = acfg.kv_bits
    hdr[TPH.T_X_PARTS] = 1                      # set before every step (Decoder.parts())
    hdr[TPH.T_MAX_SHIFT], hdr[TPH.T_MULT_BITS] = gatt.MAX_SHIFT, gatt.MULT_BITS
    hdr[TPH.T_N_XFER] = len(records)
    hdr[TPH.T_XFER_OFF] = put(xoff)
    hdr[TPH.T_KIND_OFF] = put([rt._index[(i, k)] for i in range(L) for k in KINDS]
                              + [rt._index[(None, LM)]])
    hdr[TPH.T_XSLOT_OFF] = put([fr[("x", k)][0] for k in XSLOT_KINDS])
    hdr[TPH.T_PART_OFF] = put([fr[("part", h, p)][0] for h in range(H) for p in (0, 1)])
    kvc = [word | (int(eof) << 31) for k in rt._kv_ctrl for word, _, eof in k]
    hdr[TPH.T_KVCTRL_OFF], hdr[TPH.T_KVCTRL_N] = put(kvc), len(kvc)
    hdr[TPH.T_SWITCH_OFF] = put([v for word, lm, body_ in rt._switch
                                 for v in (word, NONE if lm is None else lm, body_)])
    hdr[TPH.T_SEQ0_OFF] = put([rt._seq[ch][0] for ch in range(4)])
    hdr[TPH.T_TRACE_WORDS], hdr[TPH.T_TRACE_OUTS] = trace_words, trace_outs
    hdr[TPH.T_FRAMES_BYTES] = plan.regions["frames"].nbytes
    hdr[TPH.T_RESULTS_BYTES] = plan.regions["results"].nbytes
    hdr[TPH.T_KV_BYTES] = plan.regions["kv"].nbytes
    # the batched step (DmaRuntime.set_vectors, set_attention, restore_chains)
    hdr[TPH.T_VECTORS], hdr[TPH.T_STREAMS] = plan.vectors, plan.streams
    hdr[TPH.T_KV_STREAM_BYTES] = plan.kv_stream_bytes
    fb = rt.base["frames"]
    vec_off, attx_off = [0] * len(records), [0] * len(records)
    for t in plan.transfers:
        if t.kind == ATT:
            ctrl = [word | (int(eof) << 31) for word, _, eof in rt._kv_ctrl[t.index]]
            kvb = [v for bw, p, which, lyr, h in rt._kv_buf[t.index]
                   for v in (bw, rt.base["kv"] + plan.kv_offset(p, which, lyr, h))]
            link = [v for ch, (word, nxt, first) in sorted(rt._link[t.index].items())
                    for v in (ch, word, nxt, first)]
            attx_off[t.index] = put([len(ctrl)] + ctrl + [len(kvb) // 2] + kvb
                                    + [len(link) // 4] + link)
        elif rt._mat_desc[t.index]:
            xoff = fr[("x", t.kind)][0]
            rows = []
            for hw, xw, p, name in rt._mat_desc[t.index]:
                m = model.matrices[name]
                vh = fb + fr[("vh", name, p)][0] if plan.vectors > 1 else 0
                rows += [hw, xw, rt._image_addr[(name, p)], vh, fb + xoff, m.x_bytes]
            vec_off[t.index] = put([len(rows) // TPH.VEC_WORDS] + rows)
    hdr[TPH.T_VEC_OFF], hdr[TPH.T_ATTX_OFF] = put(vec_off), put(attx_off)
    table = np.concatenate([np.array(hdr, np.uint32)] + body)
    table[TPH.T_WORDS] = len(table)
    return dict(table=table, scales=scales, norms=norms, records=records)


# --------------------------------------------------------------------------- the loop

def _free(lib, ctx: int, mem) -> None:
    """The context's worker joined (tph_free) before its memory ``mem`` goes."""
    lib.tph_free(ctx)


class CLoop:
    """The C step of one runtime: its table, context memory, pointers and register
    interface. :meth:`step` runs one decoder position, :meth:`step_rows` B of them in one
    weight pass, :meth:`argmax` greedy sampling; ``threads`` (None: ``default_threads()``) 2
    starts the context's worker thread (tph_threads), joined when the loop is collected."""

    def __init__(self, rt, lib, threads: Optional[int] = None):
        self.rt, self.lib = rt, lib
        if not 1 <= rt.plan.vectors <= TPH.MAX_VECTORS:
            raise ValueError(f"the C loop takes matrix engines of 1..{TPH.MAX_VECTORS} vectors "
                             f"(the generator's largest), the plan has {rt.plan.vectors}: "
                             f"Decoder(..., loop='python') runs it")
        t = build_table(rt)
        self.table, self.scales, self.norms = t["table"], t["scales"], t["norms"]
        self._records = t["records"]
        self.trace_words = int(self.table[TPH.T_TRACE_WORDS])
        self.trace_outs = int(self.table[TPH.T_TRACE_OUTS])
        self.stats = np.zeros(TPH.STATS, np.uint32)
        self.err = np.zeros(TPH.ERR_WORDS, np.uint32)
        self.ptrs = (ctypes.c_void_p * TPH.P_COUNT)()
        emb = np.ascontiguousarray(rt.model.embedding.blocks) \
            if rt.model.embedding.blocks.strides[1] != 1 else rt.model.embedding.blocks
        self._keep = [emb]
        self.ptrs[TPH.P_FRAMES] = rt.buf["frames"].ctypes.data
        self.ptrs[TPH.P_KV] = rt.buf["kv"].ctypes.data
        self.ptrs[TPH.P_EMBED] = emb.ctypes.data
        self.ptrs[TPH.P_NORMS] = self.norms.ctypes.data
        self.ptrs[TPH.P_SCALES] = self.scales.ctypes.data
        self.ptrs[TPH.P_STATE] = rt.state.ctypes.data
        self.ptrs[TPH.P_STATS] = self.stats.ctypes.data
        self.ptrs[TPH.P_ERR] = self.err.ctypes.data
        self.ptrs[TPH.P_XSTATE] = rt.xstate.ctypes.data
        self.ptrs[TPH.P_RESULTS] = rt.results.ctypes.data
        self.vectors = int(self.table[TPH.T_VECTORS])
        self.rows = (_Row * self.vectors)()
        self._undo_kv = None                        # the KVCache of a pass that may be undone
        self._exc: Optional[BaseException] = None
        self.io = _Io()
        self._callbacks = []
        dev = getattr(rt, "replay", None)
        if dev is not None:                         # the C device: no Python per access
            self.io.ctx = dev.ptr
            self.io.read = ctypes.cast(lib.tph_replay_read, ctypes.c_void_p).value
            self.io.write = ctypes.cast(lib.tph_replay_write, ctypes.c_void_p).value
        elif rt.direct_regs is not None:            # the board: the mapped register pages
            self.io.regs[0], self.io.regs[1] = rt.direct_regs
        else:
            self.io.read = self._cb(_READ, self._read)
            self.io.write = self._cb(_WRITE, self._write)
        if rt.pl_reset is not None:
            self.io.pl_reset = self._cb(_RESET, self._pl_reset)
        self.io.hook = self._cb(_HOOK, self._hook)
        self._hook_ptr = self.io.hook
        self.io.kv_save = self._cb(_KV_SAVE, self._kv_save)
        if dev is not None:                         # the device's cache model, in C
            self.io.sync = ctypes.cast(lib.tph_replay_sync, ctypes.c_void_p).value
            self.io.sync_handle = dev.ptr
        elif rt.cache_sync is not None:             # the board: XRT's xclSyncBO itself
            (self.io.sync, self.io.sync_handle, self.io.sync_bo,
             self.io.sync_offset) = rt.cache_sync
        else:
            self.io.sync = self._cb(_SYNC, self._sync)
        n = lib.tph_ctx_bytes(self.table.ctypes.data, len(self.table))
        if n == 0:
            raise RuntimeError("the C loop refused its table (tphloop.c bad_header)")
        self.mem = np.zeros(n + 16, np.uint8)
        self.ctx = self.mem.ctypes.data + (-self.mem.ctypes.data % 16)
        rc = lib.tph_init(self.ctx, n, self.table.ctypes.data, len(self.table),
                          ctypes.addressof(self.ptrs), ctypes.addressof(self.io))
        if rc:
            raise RuntimeError(f"the C loop refused its table or pointers (tph_init {rc})")
        want = default_threads() if threads is None else int(threads)
        #: the threads running the step's halves: 2, or 1 (asked, or no pthreads)
        #: the idle worker's spin (us): the runtime's (the board's SPIN_US, else 0)
        self.spin_us = int(getattr(rt, "worker_spin_us", SPIN_US))
        self.threads = int(lib.tph_threads(self.ctx, want, self.spin_us))
        self._pid = os.getpid()
        weakref.finalize(self, _free, lib, self.ctx, self.mem)

    def _forked(self) -> None:
        """In a child of fork() the worker thread is not there: the serial fallback."""
        if os.getpid() != self._pid:
            self.threads = int(self.lib.tph_threads(self.ctx, 1, 0))
            self._pid = os.getpid()

    def argmax(self, x) -> int:
        """Greedy sampling of a row of logits on both cores (``tph_loop_argmax``: each half's
        first maximum, then the first of the two): numpy.argmax's index, NaN rule included;
        anything but a non-empty contiguous float32 vector goes to ``hostops.argmax``."""
        if not (isinstance(x, np.ndarray) and x.dtype == np.float32 and x.ndim == 1
                and x.size and x.flags.c_contiguous):
            return hostops.argmax(x)
        self._forked()
        return int(self.lib.tph_loop_argmax(self.ctx, x.ctypes.data, x.size, 1))

    def _cb(self, proto, fn) -> int:
        f = proto(fn)
        self._callbacks.append(f)
        return ctypes.cast(f, ctypes.c_void_p).value

    # the callbacks: any exception is kept and raised after the step
    def _read(self, _, dma, off, pv):
        try:
            pv[0] = int(self.rt.dmas[dma].mmio.read(off)) & 0xFFFFFFFF
            return 0
        except BaseException as e:        # noqa: BLE001 (raised again after the C step)
            self._exc = e
            return 1

    def _write(self, _, dma, off, value):
        try:
            self.rt.dmas[dma].mmio.write(off, int(value))
            return 0
        except BaseException as e:        # noqa: BLE001
            self._exc = e
            return 1

    def _sync(self, _, bo, direction, size, offset):
        """The DDR model's invalidate of [offset, offset + size) of the results region."""
        try:
            if direction != TPH.SYNC_FROM_DEVICE:
                raise ValueError(f"sync direction {direction}: the C loop only invalidates")
            self.rt.results[offset:offset + size].invalidate()
            return 0
        except BaseException as e:        # noqa: BLE001
            self._exc = e
            return 1

    def _pl_reset(self, _):
        try:
            self.rt.pl_reset()
            return 0
        except BaseException as e:        # noqa: BLE001
            self._exc = e
            return 1

    def _hook(self, _, index, done):
        try:
            for h in self.rt.transfer_hooks:
                h(int(index), bool(done))
            return 0
        except BaseException as e:        # noqa: BLE001
            self._exc = e
            return 1

    def _kv_save(self, _, which, layer, head):
        """Before a requantisation in a pass that may be taken back: KVCache._append's
        saving of the rows cached before the pass (once per (K/V, layer, head))."""
        try:
            kv = self._undo_kv
            u = None if kv is None else kv._undo
            key = ("K" if which == 0 else "V", int(layer), int(head))
            if u is not None and key not in u["saved"]:
                store = kv.K if which == 0 else kv.V
                u["saved"][key] = np.array(store[layer, head, :int(u["length"][layer])])
            return 0
        except BaseException as e:        # noqa: BLE001
            self._exc = e
            return 1

    # ------------------------------------------------------------------ one step
    @staticmethod
    def _check_kv(kv) -> None:
        for a in (kv.k_step, kv.v_step, kv.length):
            if not a.flags.c_contiguous:
                raise ValueError("the C loop needs the KV cache's steps and lengths contiguous")
        if kv.k_step.dtype != np.float32 or kv.v_step.dtype != np.float32 \
                or kv.length.dtype != np.int64:
            raise ValueError("the C loop needs float32 KV steps and int64 lengths")

    def _prepare(self, dec, trace_rows: int):
        """The pointers and flags every step sets: the RoPE tables, the KV rule, the trace
        buffers (``trace_rows`` rows of them; None when the decoder keeps no trace), the hook
        and the timeouts."""
        rt, p = self.rt, self.ptrs
        self._forked()
        for a in (dec.cos, dec.sin):
            if not (a.flags.c_contiguous and a.dtype in (np.float64, np.float32)
                    and a.dtype == dec.cos.dtype):
                raise ValueError("the C loop needs C-contiguous float32 or float64 RoPE tables")
        self.table[TPH.T_ROPE_F64] = int(dec.cos.dtype == np.float64)
        self.table[TPH.T_X_PARTS] = dec.parts()
        p[TPH.P_COS], p[TPH.P_SIN] = dec.cos.ctypes.data, dec.sin.ctypes.data
        # fixed steps (the model's calibrated ones): quantise and clip, never requantise
        self.table[TPH.T_KV_FIXED] = int(bool(getattr(dec.kv, "fixed", False)))
        tr = None
        if dec.trace is not None:
            tr = (np.zeros(trace_rows * self.trace_words, np.uint32),
                  np.zeros(trace_rows * self.trace_outs, np.uint32))
            p[TPH.P_TRACE], p[TPH.P_TRACE_N] = tr[0].ctypes.data, tr[1].ctypes.data
        else:
            p[TPH.P_TRACE] = p[TPH.P_TRACE_N] = None
        self.io.hook = self._hook_ptr if rt.transfer_hooks else None
        rt.state[TPH.S_TIMEOUT_US] = min(int(rt.timeout_s * 1e6), 2 ** 31 - 1)
        rt.state[TPH.S_RESET_TIMEOUT_US] = int(rt.reset_timeout_s * 1e6)
        self._exc = None
        return tr

    def step_rows(self, dec, rows, positions) -> List[Optional[np.ndarray]]:
        """Run ``rows`` ((stream, token, logits), B of them, at ``positions``) in one weight
        pass (``tph_step_rows``, as ``Decoder.step_rows``'s Python loop): each row's logits
        (float32) or None. Counts as :meth:`step`, each row's KV counts on its stream's cache;
        a pass of stream 0 whose KV cache keeps an undo record (speculation) gets its rows and
        saved rows recorded as KVCache.append records them."""
        B = len(rows)
        if not 1 <= B <= dec.rows_per_pass:
            raise ValueError(f"{B} rows in one weight pass; the matrix engines take 1.."
                             f"{dec.rows_per_pass} rows of {dec.parts()} vector(s)")
        c = self.rt.model.config
        kvd = c.num_key_value_heads * c.head_dim
        tr = self._prepare(dec, self.vectors)
        outs: List[Optional[np.ndarray]] = []
        undo = dec.kv if dec.kv._undo is not None else None
        kvrows = []
        for j, ((s, tok, lg), pos) in enumerate(zip(rows, positions)):
            kv = dec.kvs[s]
            self._check_kv(kv)
            r = self.rows[j]
            r.stream, r.token, r.pos, r.logits = int(s), int(tok), int(pos), int(bool(lg))
            r.k_step, r.v_step = kv.k_step.ctypes.data, kv.v_step.ctypes.data
            r.length = kv.length.ctypes.data
            out = np.empty(c.vocab_size, np.float32) if lg else None
            outs.append(out)
            r.out = None if out is None else out.ctypes.data
            kr = None
            if undo is not None and s == 0:
                kr = np.empty((c.num_hidden_layers, 2, kvd), np.float32)
            kvrows.append(kr)
            r.kv_rows = None if kr is None else kr.ctypes.data
        self._undo_kv = undo
        try:
            rc = self.lib.tph_step_rows(self.ctx, ctypes.addressof(self.rows), B)
        finally:
            self._undo_kv = None
        self._account(dec, rc == 0, rows=B)
        if rc:
            raise self._error(rc)
        if undo is not None:
            for i in range(c.num_hidden_layers):
                for kr in kvrows:
                    if kr is not None:
                        undo._undo["rows"].append(
                            (i, kr[i, 0].reshape(c.num_key_value_heads, c.head_dim).copy(),
                             kr[i, 1].reshape(c.num_key_value_heads, c.head_dim).copy()))
        if tr is not None:
            self._trace(dec, tr[0], tr[1], bool(any(r[2] for r in rows)), B)
        return outs

    def step(self, dec, token: int, logits: bool):
        """Run position ``dec.pos`` with ``token``; the logits (float32) or None. Updates the
        runtime's counters (CPU bytes, transfers, register accesses, faults) and, when
        ``dec.trace`` is a list, appends the step's engine words as the Python loop does."""
        rt, p = self.rt, self.ptrs
        kv = dec.kv
        tr = self._prepare(dec, 1)
        self._check_kv(kv)
        p[TPH.P_KSTEP], p[TPH.P_VSTEP] = kv.k_step.ctypes.data, kv.v_step.ctypes.data
        p[TPH.P_LENGTH] = kv.length.ctypes.data
        out = np.empty(rt.model.config.vocab_size, np.float32) if logits else None
        p[TPH.P_LOGITS] = None if out is None else out.ctypes.data
        rc = self.lib.tph_step(self.ctx, int(token), int(dec.pos), int(bool(logits)))
        self._account(dec, rc == 0)
        if rc:
            raise self._error(rc)
        if tr is not None:
            self._trace(dec, tr[0], tr[1], logits)
        return out

    def _account(self, dec, ok: bool, rows: int = 0) -> None:
        """The step's counters into the runtime's and the KV caches' (``rows``: a batched
        step's rows, each counted on its stream's cache)."""
        rt, s = self.rt, self.stats
        for k, i in (("kv", TPH.C_KV), ("parts", TPH.C_PARTS), ("x", TPH.C_X),
                     ("desc", TPH.C_DESC), ("requant", TPH.C_REQUANT), ("read", TPH.C_READ)):
            rt.cpu_bytes[k] = int(s[i])
        for k, i in (("invalidates", TPH.C_INVALIDATES), ("invalidated", TPH.C_INVALIDATED),
                     ("read", TPH.C_READ_CACHED)):
            rt.cache_ops[k] = int(s[i])
        rt.transfers_run += int(s[TPH.C_TRANSFERS])
        rt.tail_writes += int(s[TPH.C_TAILS])
        for d in (0, 1):
            rt.dmas[d].reads += int(s[TPH.C_READS0 + d])
            rt.dmas[d].writes += int(s[TPH.C_WRITES0 + d])
        if rows:
            for r in self.rows[:rows]:
                kv = dec.kvs[r.stream]
                kv.written += int(r.kv_written)
                kv.requantised += int(r.kv_requantised)
                kv.clipped += int(r.kv_clipped)
        else:
            dec.kv.written += int(s[TPH.C_KV])
            dec.kv.requantised += int(s[TPH.C_REQUANT])
            dec.kv.clipped += int(s[TPH.C_CLIPPED])
        n = int(self.err[TPH.ERR_NRETRIED])
        for k in range(min(n, TPH.ERR_RETRIED)):
            rec = self.err[TPH.REC_WORDS * (1 + k):][:TPH.REC_WORDS]
            rt.faults.append(f"{self._dma_fault(rec)['what']} (retried after a reset)")
        if ok:
            rt.end_token()

    def _trace(self, dec, tw, tn, logits: bool, rows: int = 1) -> None:
        """The step's engine words as Decoder._matrices / _attention append them (a batched
        step: each row's attention words from its own trace row, in row order)."""
        rt = self.rt
        W, N = self.trace_words, self.trace_outs
        for t in rt.plan.transfers:
            if t.kind == LM and not logits:
                continue
            rec = [int(v) for v in self._records[t.index]]
            nf = rec[2]
            outs = rec[TPH.X_FIXED + nf * TPH.FRAME_WORDS + rec[3] * TPH.DESC_WORDS
                       + rec[4] * TPH.TAIL_WORDS:]
            for row in range(rows if t.kind == ATT else 1):
                words = {}
                for j in range(rec[5]):
                    fi, port, _, _, off, idx = outs[j * TPH.OUT_WORDS:(j + 1) * TPH.OUT_WORDS]
                    o, n = row * W + off, int(tn[row * N + idx])
                    words[(fi, port)] = tw[o:o + n].copy()
                for fi, f in enumerate(t.frames):
                    if t.kind == ATT:
                        dec.trace.append(("attention", t.layer, f.name, [words[(fi, 0)]]))
                    else:
                        dec.trace.append(("matrix", t.layer, f.name,
                                          [words[(fi, 0)], words[(fi, 1)]]))

    # ------------------------------------------------------------------ errors
    def _dma_fault(self, rec) -> dict:
        """A fault record as DmaRuntime._fault's dict (the Python loop's message)."""
        rt = self.rt
        code, ti, ch, sr = (int(v) for v in rec[:4])
        t = rt.plan.transfers[ti]
        also = ""
        if code == TPH.E_DMA_ERRBIT:
            cls, what = DmaError, f"DMASR error {R.error_names(sr)}"
        elif code == TPH.E_DMA_HALTED:
            cls, what = DmaError, "the channel halted"
        elif code == TPH.E_DMA_HANG:
            cls, what = DmaHangError, f"not complete within {rt.timeout_s} s"
            also = "".join(f", {CHANNEL_NAMES[int(rec[5 + 2 * i])]} "
                           f"(DMASR 0x{int(rec[6 + 2 * i]):08X})" for i in range(int(rec[4])))
        elif code == TPH.E_DMA_DESC:
            cls, what = DmaError, f"a descriptor reports an error (STATUS 0x{int(rec[4]):08X})"
        elif code == TPH.E_DMA_SHORT:
            cls, what = DmaShortError, (f"short transfer: a descriptor moved {int(rec[4])} of "
                                        f"{int(rec[5])} bytes")
        else:
            cls, what = DmaShortError, "an output frame overran its slot (no RXEOF)"
        return rt._fault(cls, t, ch, sr, what, also)

    def _error(self, rc: int) -> BaseException:
        rt, e = self.rt, self.err
        rec = e[:TPH.REC_WORDS]
        if rc in (TPH.E_IO, TPH.E_SYNC) and self._exc is not None:
            return self._exc
        if TPH.E_DMA_ERRBIT <= rc <= TPH.E_DMA_OVER:
            n = int(e[TPH.ERR_NRETRIED])
            first = self._dma_fault(e[TPH.REC_WORDS * min(n, TPH.ERR_RETRIED):][:TPH.REC_WORDS])
            return rt.twice_error(first, self._dma_fault(rec))
        ti, ch = int(rec[1]), int(rec[2])
        if rc in (TPH.E_MATRIX, TPH.E_ATT):
            t = rt.plan.transfers[ti]
            f = t.frames[ch]
            st, n = int(rec[5]), int(rec[6])
            if rc == TPH.E_MATRIX:
                msg = matrix_error(n, st, rt.model.matrices[f.name], int(rec[3]), f.tag, t.layer,
                                   max(1, int(rec[8])))
            else:
                msg = attention_error(n, st, f.tag, t.layer, ch, rt.acfg)
            return EngineError(msg)
        if rc == TPH.E_VALUE:
            op, kr = int(rec[4]), int(np.uint32(rec[5]).view(np.int32))
            if op == TPH.V_SCORE:
                c = struct.unpack("<d", struct.pack("<II", int(rec[6]), int(rec[7])))[0]
                return ValueError(f"score scale c = {c!r}: no (MULT, SHIFT) with MULT < "
                                  f"2**{gatt.MULT_BITS} and SHIFT <= {gatt.MAX_SHIFT} (or c is "
                                  f"not finite and >= 0)")
            what = {TPH.V_QUANTISE: "quantise", TPH.V_KV_STEP: "kv_step",
                    TPH.V_KV_REQUANT: "kv_requantise", TPH.V_QUANTISE_Q8_1: "quantise_q8_1",
                    TPH.V_QUANTISE_Q8_0: "quantise_q8_0"}[op]
            if op in (TPH.V_QUANTISE_Q8_1, TPH.V_QUANTISE_Q8_0) and kr == hostlib.TPH_TINY:
                return ValueError(f"{what}: {hostlib.ERR_BLOCK_TINY}")
            try:
                hostlib.check_code(kr, what)
            except ValueError as exc:
                return exc
            return ValueError(f"{what}: code {kr}")
        if rc == TPH.E_RESET:
            dma = ch // 2
            name = rt.dmas[dma].name
            lim = rt.reset_timeout_s
            if int(rec[4]) == 1:
                return DmaResetError(f"{name}: DMACR.Reset still set {lim} s after a soft reset")
            return DmaResetError(f"{name} {'S2MM' if ch % 2 else 'MM2S'}: still halted {lim} s "
                                 f"after DMACR.RS was set (DMASR 0x{int(rec[3]):08X})")
        if rc == TPH.E_ORDER:
            t = rt.plan.transfers[ti]
            return BackendError(f"transfer {t.name} out of the chain's order on "
                                f"{CHANNEL_NAMES[ch]} (next: "
                                f"{rt.plan.transfers[int(rec[4])].name})")
        if rc == TPH.E_CONTEXT:
            return ValueError(f"KV cache of layer {ch} is full ({rt.plan.context} positions)")
        if rc == TPH.E_IO:
            return BackendError("a register access failed (no reason kept)")
        if rc == TPH.E_SYNC:
            a, n = int(rec[4]), int(rec[5])
            return BackendError(f"invalidating the results region's bytes {a}..{a + n} (frame "
                                f"{ch}, port {int(rec[3])}) failed: the sync returned "
                                f"{int(np.uint32(rec[6]).view(np.int32))}")
        return ValueError(f"the C loop refused its arguments (code {rc}: token "
                          f"{int(rec[4])})")


