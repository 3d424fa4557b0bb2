"""generators.host: PYNQ imported only for the board, a clear message without it, and the fabric
clock check (the board backend itself: tests/test_runtime_dma.py, on a stand-in pynq over the
register model, and tests/test_runtime_board.py, on PYNQ 3.1.2's own MMIO and buffers)."""
import sys

import pytest

from generators import host


def test_wrong_clock_refused():
    with pytest.raises(host.BoardError, match="100.000 MHz, the overlay is built for 142.857"):
        host.check_clock(100.0)
    host.check_clock(142.857132)


def test_no_pynq_clear_message(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynq", None)
    with pytest.raises(host.BoardError, match="pynq<4"):
        host._import_pynq()
