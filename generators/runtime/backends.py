"""Backends behind one interface: ``golden`` (numpy, fast), ``rtl`` (cocotb co-simulation of
the overlay top), ``board`` (PYNQ, ``pynq<4``).

A backend has two calls, both returning the raw output words (results and status word) so
that the decoder checks every status the same way on every backend:

* ``matrices([(QMatrix, x int8, tag), ...]) -> [[words of port 0, words of port 1], ...]``
* ``attention([(frame bytes, tag), ...]) -> [words, ...]``

``rtl`` and ``board`` share :class:`DmaHost`, the host code at DMA-channel level: weight images
in DMA buffers allocated once and kept, only the header and x written per call, both ports
started together, results taken from the words the S2MM channel actually transferred, a DMA
that does not finish within the timeout raising DmaTimeout.
"""
from __future__ import annotations

import time
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from generators.golden import attention as gatt
from generators.golden import mv as gmv
from generators.golden import q4 as gq4
from generators.packing import unpack_trits

from .model import Model, QMatrix

__all__ = ["make_backend", "GoldenBackend", "DmaHost", "BoardBackend", "DmaTimeout",
           "BackendError", "split_attention_frame", "route_word"]


class BackendError(RuntimeError):
    pass


class DmaTimeout(BackendError):
    pass


def route_word(context: int, tag: int) -> int:
    """Port 1's first word of an attention half (contracts, section A)."""
    from .dma import ROUTE_MAGIC
    return ROUTE_MAGIC | ((context & 0xFFFF) << 16) | ((tag & 0xFF) << 56)


def split_attention_frame(frame: bytes) -> Tuple[np.ndarray, np.ndarray]:
    """A 16-byte-beat attention frame -> (port 0 words: the even 8-byte words, port 1 words:
    the route word, then the odd 8-byte words)."""
    w = np.frombuffer(frame, "<u8")
    h0 = int(w[0])
    ctx, tag = (h0 >> 16) & 0xFFFF, (h0 >> 56) & 0xFF
    odd = np.concatenate([np.array([route_word(ctx, tag)], np.uint64), w[1::2]])
    return np.ascontiguousarray(w[0::2]), odd


# --------------------------------------------------------------------------- golden

class GoldenBackend:
    """The engines' golden models on each call's frames, vectorised: the weights of every
    image are unpacked once (from the image bytes, as the engine reads them) and cached as
    floats whose dot products are exact (4 bytes per weight ternary, 8 INT8)."""

    name = "golden"

    def __init__(self, model: Model):
        self.model = model
        self.acfg = model.engines.attention_config()
        self._w: Dict[Tuple[str, int], np.ndarray] = {}
        self.cycles = {"matrix": 0, "attention": 0}

    def _q4_weights(self, m: QMatrix, port: int):
        """A Q4_1 image read by generators.golden.q4 once: (codes as float32 (nb, N, 32),
        D, M) or None when a scale is Inf/NaN or a row's sum could leave int64 (then the
        golden model's exact frame function answers, BAD_SCALE included)."""
        key = (m.name, port)
        if key not in self._w:
            off = 8 + m.x_bytes
            rows = m.images[port][off:].reshape(m.rows[port], -1)
            codes, D, M, bad = gq4.decode_rows(rows, m.k)
            self._w[key] = None if bad.any() or not gq4.int64_safe(D, M) \
                else (gq4.block_codes(codes), D, M)
        return self._w[key]

    def _weights(self, m: QMatrix, port: int) -> np.ndarray:
        """The rows of one image as a float matrix whose products are exact: float32 for
        trits (|sum| <= 128 K < 2**24), float64 for INT8 (|sum| < 2**53); None when a byte
        is not a valid trit byte (then the exact frame model answers, BAD_TRIT included)."""
        key = (m.name, port)
        if key not in self._w:
            img = m.images[port]
            off = 8 + m.x_bytes
            rb = m.k if m.fmt == "int8" else -(-m.k // 5)
            stride = -(-rb // 8) * 8
            rows = img[off:].reshape(m.rows[port], stride)[:, :rb]
            if m.fmt == "int8":
                w = rows.view(np.int8).astype(np.float64)
            else:
                w, bad = unpack_trits(rows, m.k, strict=False, return_mask=True)
                w = None if bad.any() else w.astype(np.float32)
            self._w[key] = w
        return self._w[key]

    def _frame_words(self, m: QMatrix, port: int, x: np.ndarray, tag: int) -> np.ndarray:
        """The golden model of the whole frame (slow; exact in every case)."""
        img = m.images[port].copy()
        img[:8] = np.frombuffer(m.header(port, tag), np.uint8)
        img[8:8 + m.k] = x.view(np.uint8)
        beats = [int(b) for b in img.view("<u8")]
        return np.array([wd for wd, _ in gmv.mv_frame(beats, 8, m.code,
                                                      self.model.engines.max_k)], np.uint32)

    def _mv(self, m: QMatrix, port: int, x: np.ndarray, tag: int) -> np.ndarray:
        if m.fmt == "q4":
            w = self._q4_weights(m, port)
            if w is None:
                return self._frame_words(m, port, x, tag)
            n = m.rows[port]
            out = np.empty(n + 1, np.uint32)
            out[:n] = gq4.matrix_words(*w, np.asarray(x, np.int8))
            out[n] = gmv.status_word(tag, 0, n)
            return out
        w = self._weights(m, port)
        if w is None:
            img = m.images[port].copy()
            hx = m.header(port, tag)
            img[:8] = np.frombuffer(hx, np.uint8)
            img[8:8 + m.k] = x.view(np.uint8)
            beats = [int(b) for b in img.view("<u8")]
            fmt = gmv.FMT_INT8 if m.fmt == "int8" else gmv.FMT_TERNARY
            return np.array([wd for wd, _ in gmv.mv_frame(beats, 8, fmt,
                                                          self.model.engines.max_k)], np.uint32)
        n = m.rows[port]
        acc = (w @ x.astype(w.dtype)).astype(np.int64)
        out = np.empty(n + 1, np.uint32)
        out[:n] = (acc & 0xFFFFFFFF).astype(np.uint32)
        out[n] = gmv.status_word(tag, 0, n)
        return out

    def matrices(self, calls):
        return [[self._mv(m, p, x, tag) for p in (0, 1)] for m, x, tag in calls]

    def attention(self, frames):
        out = []
        bb = self.acfg.beat_bytes
        for fr, _ in frames:
            beats = gatt.frame_to_beats(fr, bb)
            out.append(np.array(gatt.frame_output(beats, self.acfg), np.uint32))
        return out

    def close(self):
        pass


# --------------------------------------------------------------------------- DMA host code

class DmaHost:
    """Host code at DMA-channel level, the same for the board and the RTL co-simulation.

    ``dmas``: two objects with ``sendchannel`` / ``recvchannel`` (pynq's AxiDMA or
    :class:`generators.runtime.dma.SimpleDma`); ``allocate(shape, dtype)``: pynq.allocate or
    the DDR model's.
    """

    def __init__(self, model: Model, dmas: Sequence, allocate, timeout_s: float = 5.0,
                 beat_bytes: int = 8):
        if beat_bytes != 8:
            raise BackendError(f"the DMA streams are {beat_bytes * 8} bits wide; the engines' "
                               f"frames need 64-bit MM2S streams")
        self.model, self.dmas, self.allocate = model, list(dmas), allocate
        self.timeout_s = timeout_s
        self.acfg = model.engines.attention_config()
        self.images: Dict[str, List] = {}
        max_rows = 1
        for m in model.matrices.values():
            bufs = []
            for p in (0, 1):
                img = m.images[p]
                b = allocate((len(img),), np.uint8)
                b[:] = img
                b.flush()
                bufs.append(b)
                max_rows = max(max_rows, m.rows[p])
            self.images[m.name] = bufs
        self.out = [allocate((max_rows + 1,), np.uint32) for _ in (0, 1)]
        L = model.engines.max_context
        half = gatt.frame_beat_count(L, self.acfg) + 1
        self.att_in = [allocate((half,), np.uint64) for _ in (0, 1)]
        self.att_out = allocate((gatt.output_word_count(self.acfg) + 1,), np.uint32)

    def _wait(self, ch, what: str) -> None:
        deadline = time.monotonic() + self.timeout_s
        while not ch.idle:
            if ch.error:
                break                                  # wait() names the error
            if time.monotonic() > deadline:
                raise DmaTimeout(f"DMA {what} did not finish within {self.timeout_s} s")
        ch.wait()

    def _run(self, sends, recvs):
        """sends: [(port, buffer, nbytes)], recvs: [(port, buffer)] -> words per recv."""
        for p, buf in recvs:
            self.dmas[p].recvchannel.transfer(buf)
        for p, buf, n in sends:
            self.dmas[p].sendchannel.transfer(buf, 0, n)
        for p, _, _ in sends:
            self._wait(self.dmas[p].sendchannel, f"{p} MM2S")
        words = []
        for p, buf in recvs:
            ch = self.dmas[p].recvchannel
            self._wait(ch, f"{p} S2MM")
            n = ch.transferred // 4
            words.append(np.array(buf[:n], np.uint32))
        return words

    def matrices(self, calls):
        out = []
        for m, x, tag in calls:
            bufs = self.images[m.name]
            for p in (0, 1):
                hx = np.zeros(8 + m.x_bytes, np.uint8)
                hx[:8] = np.frombuffer(m.header(p, tag), np.uint8)
                hx[8:8 + m.k] = np.asarray(x, np.int8).view(np.uint8)
                bufs[p][:len(hx)] = hx
            out.append(self._run([(p, bufs[p], len(m.images[p])) for p in (0, 1)],
                                 [(p, self.out[p]) for p in (0, 1)]))
        return out

    def attention(self, frames):
        out = []
        for fr, _ in frames:
            even, odd = split_attention_frame(fr)
            self.att_in[0][:len(even)] = even
            self.att_in[1][:len(odd)] = odd
            (words,) = self._run([(0, self.att_in[0], 8 * len(even)),
                                  (1, self.att_in[1], 8 * len(odd))], [(0, self.att_out)])
            out.append(words)
        return out


class BoardBackend(DmaHost):
    """The PYNQ-Z1 overlay: dma_0 and dma_1 (simple mode), pynq<4 imported here only."""

    name = "board"

    def __init__(self, model: Model, bitfile: str, timeout_s: float = 5.0, download=True):
        from generators.host import FCLK_MHZ, _import_pynq, check_clock
        pynq = _import_pynq()
        ov = pynq.Overlay(bitfile, download=download)
        check_clock(float(pynq.Clocks.fclk0_mhz), FCLK_MHZ)
        dmas = []
        for p in (0, 1):
            if f"dma_{p}" not in ov.ip_dict:
                raise BackendError(f"{bitfile}: no dma_{p} in the overlay")
            dmas.append(getattr(ov, f"dma_{p}"))
        par = ov.ip_dict["dma_0"].get("parameters", {})
        width = int(par.get("C_M_AXIS_MM2S_TDATA_WIDTH", par.get("c_m_axis_mm2s_tdata_width",
                                                                   64)))
        self.overlay = ov
        super().__init__(model, dmas, pynq.allocate, timeout_s, beat_bytes=width // 8)


def make_backend(name: str, model: Model, **kw):
    """"golden" | "rtl" | "board" (keyword arguments go to the backend)."""
    if name == "golden":
        return GoldenBackend(model)
    if name == "rtl":
        from .rtl import RtlBackend
        return RtlBackend(model, **kw)
    if name == "board":
        if "bitfile" not in kw:
            raise BackendError("the board backend needs bitfile=PATH (the overlay's .bit)")
        return BoardBackend(model, **kw)
    if name == "dma-model":
        return model_dma_backend(model, **kw)
    raise ValueError(f"backend must be golden, rtl or board, got {name!r}")


def model_dma_backend(model: Model, channel_cls=None, path: Optional[str] = None,
                      size: Optional[int] = None, formats=(8, 3, 4)):
    """The DMA host code on the register model of the AXI DMAs with the golden PL top behind
    it (the board host code without a board; tests). ``formats``: the matrix engines'
    (the manifest's matrix.formats; (8, 3) is an overlay rendered with q4=false)."""
    import tempfile
    from .dma import AxiDmaRegs, GoldenFabric, Memory, SimpleDma, SimpleDmaChannel
    if size is None:
        size = 2 * sum(len(i) for m in model.matrices.values() for i in m.images) + (64 << 20)
    if path is None:
        path = tempfile.NamedTemporaryFile(prefix="ddr-", delete=False).name
    mem = Memory(path, size)
    fab = GoldenFabric(model.engines.max_k, model.engines.attention_config(), formats=formats)
    dmas = [SimpleDma(AxiDmaRegs(p, fab, mem), channel_cls or SimpleDmaChannel) for p in (0, 1)]
    host = DmaHost(model, dmas, mem.allocate)
    host.name = "dma-model"
    host.memory, host.fabric = mem, fab
    host.close = lambda: None
    return host
