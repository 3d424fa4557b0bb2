"""The PYNQ-Z1 side of the board backend: importing PYNQ (the PYNQ 3.0.1 or 3.1 image's, ``pynq<4``;
PYNQ 4.0 dropped the board; PYNQ 2.7, Python 3.8, is not supported: generators/board_image.py)
and refusing a fabric clock other than the one the overlay was built and timed for.

The engines are driven on the board by the runtime's board backend
(``generators.runtime.make_backend("board", model, bitfile=...)``,
:class:`generators.runtime.engines.board.BoardBackend`): the same host code as every other backend
(scatter-gather descriptor chains, buffers allocated once from the memory plan, transfers with
a timeout, DMA faults reset and retried once). The earlier ``Board`` class, which allocated
two buffers per frame and waited without a timeout, is gone.

`pynq` is imported only when a board backend is made, so the library imports anywhere. The
fabric clock is read back and a mismatch refused: a clock left at the wrong frequency gives
right answers, slower, with no error (DESIGN.md section 7).
"""
from __future__ import annotations

import sys

import numpy

from .board_image import ImageError, check_image
from .contract import FCLK_MHZ, FCLK_TOLERANCE_MHZ

__all__ = ["BoardError", "check_clock", "import_pynq", "FCLK_MHZ"]


class BoardError(RuntimeError):
    """The board or the overlay is not what the engines need."""


def import_pynq():
    """pynq, after checking Python, numpy and pynq against the supported images (one line)."""
    try:
        import pynq  # noqa: F401
    except ImportError as exc:
        raise BoardError("the host side needs pynq, the PYNQ 3.0.1 or 3.1 image's own: run in "
                         "the image's venv as root (sudo /usr/local/share/pynq-venv/bin/"
                         "ternary-pynq ...); elsewhere pip install 'pynq<4' (PYNQ 4.0 dropped "
                         "the PYNQ-Z1)") from exc
    try:
        check_image(tuple(sys.version_info[:2]), numpy.__version__,
                    getattr(pynq, "__version__", None))
    except ImageError as exc:
        raise BoardError(str(exc)) from None
    return pynq


def check_clock(actual_mhz: float, expect_mhz: float = FCLK_MHZ,
                tolerance: float = FCLK_TOLERANCE_MHZ) -> None:
    """Raise BoardError unless the fabric clock is the one the design was built and timed for."""
    if abs(actual_mhz - expect_mhz) > tolerance:
        raise BoardError(f"fabric clock FCLK0 runs at {actual_mhz:.3f} MHz, the overlay is built "
                         f"for {expect_mhz:.3f} MHz: refusing to run (set it with "
                         f"pynq.Clocks.fclk0_mhz = {expect_mhz}, or pass expect_mhz)")
