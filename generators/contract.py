"""The contract's facts, defined once (DESIGN.md sections 2, 3 and 5; docs/overlay.md).

Every module that needs a frame magic, a format byte, the fabric clock or the DDR wall imports
it from here; templates get the same values through their design's context. Nothing here is a
parameter: a user who changes one of these changes the contract.
"""
from __future__ import annotations

#: matrix-vector frame header, bits [15:0] (DESIGN.md section 3)
MATRIX_MAGIC = 0xB158
#: attention frame header word, bits [15:0] (docs/attention.md section 2.1); on the PL top the
#: frame's even 8-byte words go to port 0 and start with this word
ATTENTION_MAGIC = 0xA77E
#: the PL top's route word: port 1's first word of an attention frame's odd half (docs/overlay.md)
ROUTE_MAGIC = 0xA77F

#: the header's format byte, bits [55:48]
FORMAT_INT8 = 0x08
FORMAT_TERNARY = 0x03
FORMAT_Q4 = 0x04
#: per-block x (issue 32, docs/activations.md section 2): Q4_1 rows with Q8_1 x blocks (the
#: Q4_1 lane) and Q8_0 rows with Q8_0 x blocks (the INT8 lane). The golden models and the host
#: frame builders (generators/q4.py, generators/q8.py) have them; the Q4_1 lane takes 0x05 (the
#: manifests' `block_formats`, docs/q4.md "Format 0x05"), mv-engine q4=true (and so the PL top)
#: 0x09 too, the INT8 lane's products finished on the Q4_1 lane (docs/activations.md section 3);
#: no design's `formats` list offers them. The runtime sends 0x05 for `--format q4`'s layer matrices
#: (docs/activations.md section 6, step 6) and checks a top's `block_formats` for it.
FORMAT_Q4_Q8_1 = 0x05
FORMAT_Q8_0 = 0x09
#: the formats whose K must be a multiple of 32 (a frame with another K is BAD_SHAPE)
BLOCK_FORMATS = (FORMAT_Q4_Q8_1, FORMAT_Q8_0)
#: values per block of the per-block formats (ggml's QK4_1 = QK8_0 = QK8_1)
BLOCK_K = 32
#: format name -> format byte
FORMAT_CODES = {"int8": FORMAT_INT8, "ternary": FORMAT_TERNARY, "q4": FORMAT_Q4,
                "q4_q8_1": FORMAT_Q4_Q8_1, "q8_0": FORMAT_Q8_0}

#: bytes of one beat on an HP port's stream (64-bit AXI-Stream)
HP_BEAT_BYTES = 8
#: bytes of one output word on an engine's m_axis: a 32-bit result or the status word
#: (DESIGN.md section 3)
RESULT_BYTES = 4
#: the fabric clock: IO PLL 1000 MHz / 7 (DESIGN.md section 2), the frequency every timing
#: figure is computed for
FCLK_HZ = 1e9 / 7
FCLK_MHZ = FCLK_HZ / 1e6
#: how far the clock read back on the board may be from FCLK_MHZ (the PS7 reports 142.857132 MHz)
FCLK_TOLERANCE_MHZ = 0.01
#: the DDR wall measured on the board (the write-up, Stage 2): bytes per second over both HP ports
DDR_WALL_BYTES_PER_S = 1.97e9

#: the format byte's bit 7: a vectors word follows the header word (docs/vectors.md); the
#: frame then carries B activation vectors and every row answers with B results
VECTORS_FLAG = 0x80
#: the largest B the vectors word can declare (its bits [7:0])
MAX_VECTORS_FIELD = 0xFF
