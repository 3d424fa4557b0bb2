"""Driving the engines on the PYNQ-Z1 (PYNQ 2.x/3.0, `pynq<4`; PYNQ 4.0 dropped the board).

    from generators.host import Board
    board = Board("build/pynq_ternary.bit")          # refuses a fabric clock other than 142.857 MHz
    y, status = board.matvec(x, W, "ternary", engine=0)

`pynq` is imported only when a Board is made, so the library imports anywhere. The fabric clock
is read back and a mismatch refused: a clock left at the wrong frequency gives right answers,
slower, with no error (DESIGN.md section 7). Every status word is decoded and a frame whose
status has error flags raises.
"""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from .contract import FCLK_MHZ, FCLK_TOLERANCE_MHZ
from .golden.mv import decode_status, flag_names
from .packing import build_frame



class BoardError(RuntimeError):
    """The board, overlay or a frame's status is not what the engines need."""


def _import_pynq():
    try:
        import pynq  # noqa: F401
    except ImportError as exc:
        raise BoardError("the host side needs PYNQ 2.x or 3.0 on the board (pip install "
                         "'pynq<4'; PYNQ 4.0 dropped the PYNQ-Z1)") from exc
    return pynq


def check_clock(actual_mhz: float, expect_mhz: float = FCLK_MHZ,
                tolerance: float = FCLK_TOLERANCE_MHZ) -> None:
    """Raise BoardError unless the fabric clock is the one the design was built and timed for."""
    if abs(actual_mhz - expect_mhz) > tolerance:
        raise BoardError(f"fabric clock FCLK0 runs at {actual_mhz:.3f} MHz, the overlay is built "
                         f"for {expect_mhz:.3f} MHz: refusing to run (set it with "
                         f"pynq.Clocks.fclk0_mhz = {expect_mhz}, or pass expect_mhz)")


class Board:
    """An overlay built by `make bitstream`: engine i behind the AXI DMA named `dma_i`."""

    def __init__(self, bitfile: str, expect_mhz: float = FCLK_MHZ, download: bool = True):
        pynq = _import_pynq()
        self.pynq = pynq
        self.overlay = pynq.Overlay(bitfile, download=download)
        check_clock(float(pynq.Clocks.fclk0_mhz), expect_mhz)
        self.dmas = sorted(k for k in self.overlay.ip_dict if k.startswith("dma_"))
        if not self.dmas:
            raise BoardError(f"{bitfile}: no DMA named dma_<i> in the overlay's .hwh")

    def dma(self, engine: int):
        name = f"dma_{engine}"
        if name not in self.dmas:
            raise BoardError(f"no {name} in the overlay (it has {', '.join(self.dmas)})")
        return getattr(self.overlay, name)

    def run_frame(self, frame: bytes, n_out: int, engine: int = 0) -> np.ndarray:
        """Send one frame, return the n_out 32-bit output words (results and status)."""
        dma = self.dma(engine)
        src = self.pynq.allocate(shape=(len(frame),), dtype=np.uint8)
        dst = self.pynq.allocate(shape=(n_out,), dtype=np.uint32)
        try:
            src[:] = np.frombuffer(frame, dtype=np.uint8)
            dma.recvchannel.transfer(dst)
            dma.sendchannel.transfer(src)
            dma.sendchannel.wait()
            dma.recvchannel.wait()
            return np.array(dst, dtype=np.uint32)
        finally:
            src.freebuffer()
            dst.freebuffer()

    def matvec(self, x: np.ndarray, w: np.ndarray, fmt: str, engine: int = 0,
               tag: int = 0) -> Tuple[np.ndarray, int]:
        """W @ x on the engine (fmt 'int8' or 'ternary'); returns (int32 results, status word)."""
        words = self.run_frame(build_frame(x, w, fmt, tag=tag), w.shape[0] + 1, engine)
        return parse_results(words, w.shape[0], tag)


def parse_results(words: np.ndarray, n: int, tag: Optional[int] = None) -> Tuple[np.ndarray, int]:
    """Split N results and the status word; raise BoardError on error flags or a short count."""
    words = np.asarray(words, dtype=np.uint32)
    if len(words) < 1:
        raise BoardError("no output words")
    status = int(words[-1])
    t, flags, count = decode_status(status)
    if flags:
        raise BoardError(f"engine status flags {', '.join(flag_names(flags))} "
                         f"(tag {t}, {count} results)")
    if count != n or len(words) != n + 1:
        raise BoardError(f"engine sent {count} results for {n} rows")
    if tag is not None and t != tag:
        raise BoardError(f"status tag {t}, frame tag {tag}")
    return words[:-1].view(np.int32), status
