"""The AXI DMA's scatter-gather registers and descriptors (Xilinx PG021, AXI DMA v7.1), defined
once for the runtime's driver (:mod:`generators.runtime.engines.sgdma`) and its register model
(:mod:`generators.runtime.engines.regmodel`).

The register model is checked against an implementation that shares nothing with this file:
PYNQ 3.1.2's own ``_SGDMAChannel`` (its descriptors and register sequence) drives it in
``tests/runtime_board_check.py``.

Registers (offsets from the DMA's base; S2MM = MM2S + 0x30)::

    0x00 DMACR     RS bit 0, Reset bit 2 (resets BOTH channels, self-clearing), IOC_IrqEn 12,
                   Err_IrqEn 14
    0x04 DMASR     Halted 0, Idle 1, SGIncld 3, DMAIntErr 4, DMASlvErr 5, DMADecErr 6,
                   SGIntErr 8, SGSlvErr 9, SGDecErr 10, IOC_Irq 12, Dly_Irq 13, Err_Irq 14
                   (write 1 to clear the three interrupt bits)
    0x08 CURDESC   (+0x0C MSB) writable only while halted
    0x10 TAILDESC  (+0x14 MSB) writing it (LSB in 32-bit mode) starts the fetch; when the engine
                   is paused at the old tail, it resumes at the old tail's NXTDESC

Descriptor: 16 words (64 bytes, 64-byte aligned; 13 used)::

    word 0 NXTDESC, 1 NXTDESC_MSB, 2 BUFFER_ADDRESS, 3 BUFFER_ADDRESS_MSB, 4-5 reserved,
    6 CONTROL: length [25:0] (c_sg_length_width = 26), MM2S TXSOF bit 27, TXEOF bit 26
    7 STATUS: transferred [25:0], S2MM RXEOF 26, RXSOF 27, DMAIntErr 28, DMASlvErr 29,
      DMADecErr 30, Cmplt 31 (a fetched descriptor whose Cmplt is set is SGIntErr: software
      clears STATUS before a descriptor is reused)
    8-12 APP0..APP4
"""
from __future__ import annotations

#: the S2MM channel's registers sit 0x30 above the MM2S channel's
S2MM = 0x30
DMACR, DMASR, CURDESC, CURDESC_MSB, TAILDESC, TAILDESC_MSB = 0x00, 0x04, 0x08, 0x0C, 0x10, 0x14

CR_RS = 1 << 0
CR_RESET = 1 << 2

SR_HALTED = 1 << 0
SR_IDLE = 1 << 1
SR_SGINCLD = 1 << 3
SR_DMA_INT_ERR = 1 << 4
SR_DMA_SLV_ERR = 1 << 5
SR_DMA_DEC_ERR = 1 << 6
SR_SG_INT_ERR = 1 << 8
SR_SG_SLV_ERR = 1 << 9
SR_SG_DEC_ERR = 1 << 10
SR_IOC_IRQ = 1 << 12
SR_DLY_IRQ = 1 << 13
SR_ERR_IRQ = 1 << 14
SR_ERRORS = (SR_DMA_INT_ERR | SR_DMA_SLV_ERR | SR_DMA_DEC_ERR | SR_SG_INT_ERR | SR_SG_SLV_ERR
             | SR_SG_DEC_ERR)
SR_ERROR_NAMES = {SR_DMA_INT_ERR: "DMAIntErr", SR_DMA_SLV_ERR: "DMASlvErr",
                  SR_DMA_DEC_ERR: "DMADecErr", SR_SG_INT_ERR: "SGIntErr",
                  SR_SG_SLV_ERR: "SGSlvErr", SR_SG_DEC_ERR: "SGDecErr"}

#: descriptor size and alignment, bytes
DESC_BYTES = 64
DESC_WORDS = DESC_BYTES // 4
#: descriptor word indices
D_NXTDESC, D_NXTDESC_MSB, D_BUFFER, D_BUFFER_MSB, D_CONTROL, D_STATUS = 0, 1, 2, 3, 6, 7

LEN_BITS = 26
LEN_MASK = (1 << LEN_BITS) - 1
CTRL_SOF = 1 << 27
CTRL_EOF = 1 << 26
ST_RXEOF = 1 << 26
ST_RXSOF = 1 << 27
ST_INT_ERR = 1 << 28
ST_SLV_ERR = 1 << 29
ST_DEC_ERR = 1 << 30
ST_CMPLT = 1 << 31
ST_ERRORS = ST_INT_ERR | ST_SLV_ERR | ST_DEC_ERR


def error_names(sr: int) -> str:
    """The DMASR error bits of ``sr`` by name ("DMASlvErr, SGIntErr")."""
    return ", ".join(n for b, n in SR_ERROR_NAMES.items() if sr & b) or "none"
