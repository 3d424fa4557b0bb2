"""The runtime's driver of one AXI DMA in scatter-gather mode (PG021), over MMIO.

``mmio`` is pynq.MMIO of the DMA's register space on the board (``overlay.dma_0.mmio``), the
register model (generators.runtime.engines.regmodel.SgDmaRegs) in this process, or its stand-in across the
socket of the rtl backend. Every method is a few register accesses; the descriptor chains are
in DMA memory and belong to the caller (generators.runtime.engines.runtime.DmaRuntime).

Register sequence (PG021, "Scatter Gather Mode"):

* start a channel: it is halted; write CURDESC (the first descriptor it will fetch), set
  DMACR.RS, wait until DMASR.Halted reads 0;
* run a transfer: write TAILDESC (its last descriptor). The engine fetches from CURDESC (after
  a start) or from the NXTDESC of the tail it is paused at, through TAILDESC, and pauses there
  (DMASR.Idle);
* reset: set DMACR.Reset (it resets both channels of the DMA), wait until it reads 0; both
  channels are halted with their registers cleared, and start again.
"""
from __future__ import annotations

import time

from ..errors import DmaResetError
from . import pg021 as R

__all__ = ["SgDma", "MM2S", "S2MM", "DmaResetError", "RESET_TIMEOUT_S"]

MM2S, S2MM = 0, R.S2MM
#: how long a soft reset and a channel start may take (both loops: this driver and tphloop.c)
RESET_TIMEOUT_S = 1.0


class SgDma:
    """One AXI DMA (both channels) at register level."""

    def __init__(self, mmio, name: str = "dma"):
        self.mmio, self.name = mmio, name
        self.writes = 0
        self.reads = 0

    def _w(self, offset: int, value: int) -> None:
        self.writes += 1
        self.mmio.write(offset, value)

    def status(self, ch: int) -> int:
        """DMASR of channel ``ch`` (MM2S or S2MM)."""
        self.reads += 1
        return self.mmio.read(ch + R.DMASR)

    def reset(self, timeout_s: float = RESET_TIMEOUT_S) -> None:
        self._w(MM2S + R.DMACR, R.CR_RESET)
        deadline = time.monotonic() + timeout_s
        while True:
            self.reads += 2
            if not (self.mmio.read(MM2S + R.DMACR) | self.mmio.read(S2MM + R.DMACR)) \
                    & R.CR_RESET:
                return
            if time.monotonic() > deadline:
                raise DmaResetError(f"{self.name}: DMACR.Reset still set {timeout_s} s after "
                                    f"a soft reset")

    def start(self, ch: int, curdesc: int, timeout_s: float = RESET_TIMEOUT_S) -> None:
        """Start a halted channel at descriptor ``curdesc``."""
        self._w(ch + R.CURDESC, curdesc & 0xFFFFFFFF)
        self._w(ch + R.DMACR, R.CR_RS)
        deadline = time.monotonic() + timeout_s
        while self.status(ch) & R.SR_HALTED:
            if time.monotonic() > deadline:
                raise DmaResetError(f"{self.name} {'S2MM' if ch else 'MM2S'}: still halted "
                                    f"{timeout_s} s after DMACR.RS was set (DMASR "
                                    f"0x{self.status(ch):08X})")

    def tail(self, ch: int, address: int) -> None:
        """Run the descriptors up to ``address`` (a TAILDESC write)."""
        self._w(ch + R.TAILDESC, address & 0xFFFFFFFF)
