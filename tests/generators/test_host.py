"""generators.host: PYNQ imported only for the board, a clear message without it, and the fabric
clock check (the board backend itself: tests/runtime/engines/test_runtime_dma.py, on a stand-in pynq over the
register model, and tests/runtime/engines/test_runtime_board.py, on PYNQ 3.1.2's own MMIO and buffers)."""
import sys
import types

import pytest

from generators import host


def test_wrong_clock_refused():
    with pytest.raises(host.BoardError, match="100.000 MHz, the overlay is built for 142.857"):
        host.check_clock(100.0)
    host.check_clock(142.857132)


def test_no_pynq_clear_message(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynq", None)
    with pytest.raises(host.BoardError, match="pynq<4"):
        host.import_pynq()


def test_pynq_of_an_unsupported_image_refused_in_one_line(monkeypatch):
    """A PYNQ 2.7 image's pynq (Python 3.8 there; here its version alone) and a PYNQ 4 pynq."""
    for version, match in (("2.7.0", "PYNQ 2.7.0 image is not supported"),
                           ("4.0.0", "PYNQ 4 has no PYNQ-Z1")):
        fake = types.ModuleType("pynq")
        fake.__version__ = version
        monkeypatch.setitem(sys.modules, "pynq", fake)
        with pytest.raises(host.BoardError, match=match) as e:
            host.import_pynq()
        assert "\n" not in str(e.value)
    fake.__version__ = "3.0.1"
    assert host.import_pynq() is fake
