"""Golden model of the PYNQ-Z1 overlay top `pynq_overlay` (docs/overlay.md).

Written from the contract alone: it shares no code with rtl/ or the templates. It models the
routing, the 2x64 -> 128 joiner and the output order of each port, and calls the engines'
golden models (generators.golden.mv, generators.golden.attention) for the words themselves.

Two entry points, one routing:

* :class:`Overlay`, frame by frame: ``frame(port, first_word, payload)`` for each whole input
  frame of a port as it arrives; the output frames wait in ``out[port]`` in the order each port
  sends them. The runtime's register model (generators.runtime.engines.regmodel.GoldenFabric) drives it with
  fast engine models; by default it calls the exact golden models.
* :func:`overlay_outputs`, on whole raw streams of 8-byte words (data, tlast): each port's exact
  output words (word, tlast). The cocotb test of the top compares the RTL with it.
"""
from __future__ import annotations

from collections import deque
from typing import Callable, Dict, List, Sequence, Tuple

import numpy as np

from . import attention as att
from . import mv
from generators.contract import ATTENTION_MAGIC, ROUTE_MAGIC

FORMATS = (mv.FMT_INT8, mv.FMT_TERNARY)

Word = Tuple[int, bool]

#: where a frame goes, decided on its first 8-byte word
MATRIX, ATTENTION_A, ATTENTION_B = "matrix", "attention A", "attention B"


def route(port: int, first_word: int) -> str:
    """The router of port ``port`` on a frame's first word: 0xA77E on port 0 -> joiner side A
    (the word kept), 0xA77F on port 1 -> joiner side B (the route word consumed), anything
    else -> the port's matrix engine (which answers BAD_MAGIC for a magic it does not know)."""
    magic = int(first_word) & 0xFFFF
    if port == 0 and magic == ATTENTION_MAGIC:
        return ATTENTION_A
    if port == 1 and magic == ROUTE_MAGIC:
        return ATTENTION_B
    return MATRIX


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


def join_frames(a: np.ndarray, b: np.ndarray) -> bytes:
    """The joiner on one frame of each side (8-byte words, the route word already consumed):
    the 16-byte beats of the attention frame, cut at the shorter side (its tlast ends the
    joined frame; the rest of the longer side is dropped), side A in the low 8 bytes."""
    n = min(len(a), len(b))
    return np.stack([np.asarray(a[:n], "<u8"), np.asarray(b[:n], "<u8")], axis=1).tobytes()


class Overlay:
    """The PL top, one whole input frame at a time.

    ``matrix(port, payload) -> output words`` answers a matrix-routed frame;
    ``words(payload) -> uint64 array`` gives an attention half's 8-byte words;
    ``attention(frame bytes) -> output words`` answers a joined 16-byte-beat frame.
    Output frames (sequences of 32-bit words, the last one the status word) wait in
    ``out[0]`` / ``out[1]``: port 1 answers its matrix frames at once; port 0 answers in the
    order it accepted frames, so a matrix frame behind an attention half waits for that half's
    partner on port 1.
    """

    def __init__(self, matrix: Callable, attention: Callable,
                 words: Callable = lambda p: np.asarray(p, "<u8")):
        self.matrix, self.attention, self.words = matrix, attention, words
        self.out: Dict[int, deque] = {0: deque(), 1: deque()}
        self._order0: deque = deque()           # [answer or None] per port-0 frame, in order
        self._a: deque = deque()                # side A halves waiting for their partner
        self._b: deque = deque()                # side B halves waiting for their partner

    def frame(self, port: int, first_word: int, payload) -> None:
        where = route(port, first_word)
        if where == ATTENTION_A:
            slot = [None]
            self._order0.append(slot)
            self._a.append((payload, slot))
        elif where == ATTENTION_B:
            b = self.words(payload)[1:]
            if len(b):                          # a lone route word goes nowhere
                self._b.append(b)
        elif port == 0:
            self._order0.append([self.matrix(0, payload)])
        else:
            self.out[1].append(self.matrix(1, payload))
        while self._a and self._b:
            payload_a, slot = self._a.popleft()
            slot[0] = self.attention(join_frames(self.words(payload_a), self._b.popleft()))
        while self._order0 and self._order0[0][0] is not None:
            self.out[0].append(self._order0.popleft()[0])

    def reset(self) -> None:
        """Forget frames waiting for a partner and answers not yet taken."""
        self.__init__(self.matrix, self.attention, self.words)


def overlay_outputs(port0: Sequence[Word], port1: Sequence[Word], max_k: int,
                    att_cfg: att.AttentionConfig, formats: Sequence[int] = FORMATS,
                    vectors: int = 1) -> Dict[int, List[Word]]:
    """Expected output words of ports 0 and 1 for the whole input streams of both ports
    (`formats`: the matrix engines' formats, the manifest's matrix.formats; 0x04 with q4;
    `vectors`: the most activation vectors a matrix frame may carry, the manifest's
    matrix.vectors, docs/vectors.md)."""
    ov = Overlay(lambda port, fr: [w for w, _ in mv.mv_frame(fr, 8, formats, max_k, vectors)],
                 lambda data: att.frame_output_data(data, att_cfg),
                 lambda fr: np.array(fr, "<u8"))
    for p, stream in ((0, port0), (1, port1)):
        for fr in _frames(stream):
            ov.frame(p, fr[0][0], [d for d, _ in fr])
    out: Dict[int, List[Word]] = {}
    for p in (0, 1):
        out[p] = [(int(w), i == len(f) - 1) for f in ov.out[p] for i, w in enumerate(f)]
    return out


__all__ = ["route", "join", "join_frames", "Overlay", "overlay_outputs", "MATRIX", "ATTENTION_A",
           "ATTENTION_B"]
