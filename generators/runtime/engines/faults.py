"""An engine's answer that is not a result, in words: a status word's flags, a wrong count or a
wrong tag of a matrix or attention frame, as the message of an EngineError (both loops: the
Decoder's Python one and the C loop)."""
from __future__ import annotations

from typing import Dict, Optional

from generators.golden import attention as gatt
from generators.golden.mv import FLAG_NAMES

__all__ = ["matrix_error", "attention_error", "ATT_FLAGS", "matrix_site"]


def matrix_site(layer, name: str) -> str:
    """"layer L, matrix q_proj" (the LM head: "matrix lm_head"), for messages."""
    return f"layer {layer}, matrix {name.split('.')[-1]}" if layer is not None \
        else f"matrix {name}"


ATT_FLAGS = {gatt.FLAG_BAD_MAGIC: "BAD_MAGIC", gatt.FLAG_BAD_SHAPE: "BAD_SHAPE",
             gatt.FLAG_BAD_FORMAT: "BAD_FORMAT", gatt.FLAG_SHORT_FRAME: "SHORT_FRAME",
             gatt.FLAG_LONG_FRAME: "LONG_FRAME"}


def _flag_table(fmt: str) -> Dict[int, str]:
    """The matrix engine's flag names; bit 5 is BAD_TRIT for ternary rows, BAD_SCALE (an
    Inf/NaN d or m) for Q4_1 and Q8_0 rows."""
    t = dict(FLAG_NAMES)
    if fmt in ("q4", "q8_0"):
        t = {b: ("BAD_SCALE" if b == 0x20 else v) for b, v in t.items()}
    return t


def _names(flags: int, table: Dict[int, str]) -> str:
    return ", ".join(n for b, n in table.items() if flags & b) or f"0x{flags:02X}"


def matrix_error(n_words: int, st: int, m, port: int, tag: int, layer,
                 vectors: int = 1) -> Optional[str]:
    """The EngineError message for a matrix frame's answer on ``port`` (``n_words`` words
    received, the last one ``st``; a frame of ``vectors`` vectors: B words per row, the status
    counts rows), or None when it is good (both loops use it)."""
    where = matrix_site(layer, m.name) + f", port {port}"
    if n_words == 0:
        return f"no output words ({where})"
    t, flags, count = st & 0xFF, (st >> 8) & 0xFF, st >> 16
    if flags:
        hint = ""
        if flags & 0x04 and m.fmt == "q8_0":                  # BAD_FORMAT of 0x09
            hint = ("; the overlay's matrix engines do not take format 0x09 (the LM head's "
                    "Q8_0 rows with Q8_0 x, docs/activations.md): render this version's "
                    "overlay with q4=true")
        elif flags & 0x04 and getattr(m, "block_x", False):   # BAD_FORMAT of 0x05
            hint = ("; the overlay's matrix engines do not take format 0x05 (Q4_1 rows with "
                    "Q8_1 x, docs/activations.md): render this version's overlay with "
                    "q4=true, or convert the model to int8")
        elif flags & 0x04 and m.fmt == "q4":         # BAD_FORMAT
            hint = ("; the overlay's matrix engines have no Q4_1 lane (format 0x04): "
                    "render it with q4=true, or convert the model to int8")
        return (f"matrix engine status flags {_names(flags, _flag_table(m.fmt))} "
                f"({where}, tag {t}, {count} results){hint}")
    n = m.rows[port]
    if count != n or n_words != n * vectors + 1:
        return f"matrix engine sent {n_words - 1} results with count {count} for {n} rows " \
               f"({where}" + (f", {vectors} vectors" if vectors > 1 else "") + ")"
    if t != tag:
        return f"matrix engine status tag {t}, frame tag {tag} ({where})"
    return None


def attention_error(n_words: int, st: int, tag: int, layer: int, head: int,
                    cfg) -> Optional[str]:
    """The EngineError message for an attention frame's answer, or None when it is good."""
    where = f"layer {layer}, attention KV head {head}"
    if n_words == 0:
        return f"no output words ({where})"
    t, flags, count = st & 0xFF, (st >> 8) & 0xFF, st >> 16
    if flags:
        return f"attention engine status flags {_names(flags, ATT_FLAGS)} ({where}, tag {t})"
    owc = gatt.output_word_count(cfg)
    if n_words - 1 != owc or count != owc:
        return f"attention engine sent {n_words - 1} words, count {count} ({where})"
    if t != tag:
        return f"attention engine status tag {t}, frame tag {tag} ({where})"
    return None
