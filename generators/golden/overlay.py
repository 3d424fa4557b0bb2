"""Golden model of the PYNQ-Z1 overlay top `pynq_overlay` (docs/overlay.md).

Written from the contract alone: it shares no code with rtl/ or the templates. It models the
routing, the 2x64 -> 128 joiner and the output order of each port, and calls the engines'
golden models (generators.golden.mv, generators.golden.attention) for the words themselves.
It takes each port's raw input stream of 8-byte words (data, tlast) and returns each port's
exact output words (word, tlast).
"""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

from . import attention as att
from . import mv
from generators.contract import ATTENTION_MAGIC, MATRIX_MAGIC, ROUTE_MAGIC

FORMATS = (mv.FMT_INT8, mv.FMT_TERNARY)

Word = Tuple[int, bool]


def _frames(words: Sequence[Word]) -> List[List[Word]]:
    """Whole frames (up to tlast); words after the last tlast are an unfinished frame."""
    frames, cur = [], []
    for d, last in words:
        cur.append((int(d), bool(last)))
        if last:
            frames.append(cur)
            cur = []
    return frames


def join(a: Sequence[Word], b: Sequence[Word]) -> List[Tuple[int, bool]]:
    """The joiner on whole side streams: one 16-byte beat per pair of words (side A low),
    tlast = either tlast; the side that did not end is skipped up to its own tlast."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        (da, la), (db, lb) = a[i], b[j]
        out.append((da | (db << 64), la or lb))
        i += 1
        j += 1
        if la and not lb:
            while j < len(b) and not b[j][1]:
                j += 1
            j += 1
        elif lb and not la:
            while i < len(a) and not a[i][1]:
                i += 1
            i += 1
    return out


def overlay_outputs(port0: Sequence[Word], port1: Sequence[Word], max_k: int,
                    att_cfg: att.AttentionConfig, formats: Sequence[int] = FORMATS
                    ) -> Dict[int, List[Word]]:
    """Expected output words of ports 0 and 1 for the whole input streams of both ports
    (`formats`: the matrix engines' formats, the manifest's matrix.formats; 0x04 with q4)."""
    order0: List[Tuple[str, object]] = []     # port 0's answers, in input order
    out1: List[Word] = []
    side_a: List[Word] = []
    side_b: List[Word] = []
    for fr in _frames(port0):
        if fr[0][0] & 0xFFFF == ATTENTION_MAGIC:
            side_a += fr
            order0.append(("attention", None))
        else:
            order0.append(("matrix", mv.mv_frame([d for d, _ in fr], 8, formats, max_k)))
    for fr in _frames(port1):
        if fr[0][0] & 0xFFFF == ROUTE_MAGIC:
            side_b += fr[1:]                  # the route word goes nowhere
        else:
            out1 += mv.mv_frame([d for d, _ in fr], 8, formats, max_k)
    joined = join(side_a, side_b)
    att_out = [[(w, i == len(f) - 1) for i, w in enumerate(f)]
               for f in att.stream_outputs([d for d, _ in joined], [l for _, l in joined], att_cfg)]
    out0: List[Word] = []
    k = 0
    for kind, words in order0:
        if kind == "matrix":
            out0 += words
        else:
            if k >= len(att_out):
                break                         # the other half has not come: port 0 waits
            out0 += att_out[k]
            k += 1
    return {0: out0, 1: out1}
