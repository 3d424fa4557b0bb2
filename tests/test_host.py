"""The host driver, against a stand-in `pynq` whose DMA runs the numpy golden model: the
clock check refuses a wrong fabric clock, frames and results round-trip, bad status raises."""
import sys
import types

import numpy as np
import pytest

from generators import host
from generators.golden import mv as golden


class FakeBuffer(np.ndarray):
    def freebuffer(self):
        pass


def make_fake_pynq(mhz, fmt_code):
    pynq = types.ModuleType("pynq")
    pynq.Clocks = types.SimpleNamespace(fclk0_mhz=mhz)
    pynq.allocate = lambda shape, dtype: np.zeros(shape, dtype=dtype).view(FakeBuffer)

    class Channel:
        def __init__(self):
            self.buf = None

        def transfer(self, buf):
            self.buf = buf

        def wait(self):
            pass

    class DMA:
        def __init__(self):
            self.sendchannel, self.recvchannel = Channel(), Channel()

        def run(self):
            data = bytes(np.asarray(self.sendchannel.buf, dtype=np.uint8))
            beats = [(int.from_bytes(data[i:i + 8], "little"), i + 8 >= len(data))
                     for i in range(0, len(data), 8)]
            out = golden.mv_stream(beats, 8, fmt_code, 2048)
            self.recvchannel.buf[:len(out)] = [w for w, _ in out]

    class Overlay:
        def __init__(self, bitfile, download=True):
            self.ip_dict = {"dma_0": {}, "dma_1": {}, "ps7_0": {}}
            self.dma_0, self.dma_1 = DMA(), DMA()
            for d in (self.dma_0, self.dma_1):
                d.recvchannel.wait = (lambda d=d: d.run())

    pynq.Overlay = Overlay
    return pynq


def test_wrong_clock_refused(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynq", make_fake_pynq(100.0, 0x03))
    with pytest.raises(host.BoardError, match="100.000 MHz"):
        host.Board("x.bit")


def test_matvec_round_trip(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynq", make_fake_pynq(142.857132, 0x03))
    board = host.Board("x.bit")
    assert board.dmas == ["dma_0", "dma_1"]
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, 300, dtype=np.int8)
    w = rng.integers(-1, 2, (17, 300), dtype=np.int8)
    y, status = board.matvec(x, w, "ternary", engine=1, tag=9)
    assert np.array_equal(y, w.astype(np.int64) @ x.astype(np.int64))
    assert golden.decode_status(status) == (9, 0, 17)
    with pytest.raises(host.BoardError, match="no dma_2"):
        board.matvec(x, w, "ternary", engine=2)


def test_bad_status_raises():
    words = np.array([5, golden.status_word(1, golden.SHORT_FRAME, 1)], dtype=np.uint32)
    with pytest.raises(host.BoardError, match="SHORT_FRAME"):
        host.parse_results(words, 3)
    with pytest.raises(host.BoardError, match="2 results for 3"):
        host.parse_results(np.array([1, 2, golden.status_word(0, 0, 2)], dtype=np.uint32), 3)


def test_no_pynq_clear_message(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynq", None)
    with pytest.raises(host.BoardError, match="pynq<4"):
        host.Board("x.bit")
