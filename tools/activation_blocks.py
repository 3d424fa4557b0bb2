"""The per-block activation frames of docs/activations.md, counted: bytes per token of
SmolLM2-135M that the x stream and the rows gain, their time at the DDR wall, and the exact
accumulator widths of the Q4_1 lane today and with Q8_1 x.

    python tools/activation_blocks.py            # a table
    python tools/activation_blocks.py --record   # make activation-blocks: the table, and the
                                                 # figures into docs/results/activation-blocks.json

Layouts counted (docs/activations.md section 2): a frame's x is its K codes padded to a beat
as today, then an x scale table: Q8_1 (Q4_1 frames) one beat per two blocks (d0 s0 d1 s1),
Q8_0 (INT8-lane frames) one beat per four blocks (d0 d1 d2 d3). Q8_0 rows as stored: per
four blocks a scale beat (d0..d3) and 16 code beats. Every matrix is two frames (one per HP
port), each carrying the whole x; the CPU writes one x slot per transfer kind (QKV, O, GU,
DOWN, LM head), read by both ports.
"""
from __future__ import annotations

import argparse
import json

from generators import results
from generators.contract import DDR_WALL_BYTES_PER_S, HP_BEAT_BYTES
from generators.designs.q4 import q4_acc_width
from generators.q4 import q4_row_bytes
from generators.report.decoder_model import ModelShape, matrices

QK = 32
BEAT = HP_BEAT_BYTES
PORTS = 2
#: x slots the CPU writes per token: (kind, K, per layer?)
SLOTS = (("qkv", "hidden", True), ("o", "hidden", True), ("gu", "hidden", True),
         ("down", "intermediate", True), ("lm_head", "hidden", False))


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def x_codes_bytes(k: int) -> int:
    return ceil_div(k, BEAT) * BEAT


def x_scale_bytes(k: int, q81: bool) -> int:
    """The x scale table: 4 bytes per block (d, s) for Q8_1, 2 (d) for Q8_0, in whole beats."""
    return ceil_div(ceil_div(k, QK) * (4 if q81 else 2), BEAT) * BEAT


def q8_0_row_bytes(k: int) -> int:
    """A Q8_0 row: per four blocks one scale beat, then the blocks' code beats."""
    nb = ceil_div(k, QK)
    return (ceil_div(nb, 4) + ceil_div(k, BEAT)) * BEAT


def int8_row_bytes(k: int) -> int:
    return ceil_div(k, BEAT) * BEAT


def acc_width_q8_1(max_k: int) -> int:
    """Signed bits of an exact row sum in units of 2^-48 with Q8_1 x: per block
    |d_w d_x S| + |m_w s_x| <= 2047^2 2^58 (32 * 15 * 128) + 2047^2 2^58."""
    worst = ceil_div(max_k, QK) * 2047 ** 2 * 2 ** 58 * (QK * 15 * 128 + 1)
    return worst.bit_length() + 1


def acc_width_q8_0(max_k: int) -> int:
    """Signed bits of an exact row sum in units of 2^-48 for Q8_0 rows and x: per block
    |d_w d_x S| <= 2047^2 2^58 (32 * 128 * 128)."""
    worst = ceil_div(max_k, QK) * 2047 ** 2 * 2 ** 58 * (QK * 128 * 128)
    return worst.bit_length() + 1


def figures(shape: ModelShape | None = None) -> dict:
    s = shape or ModelShape()
    out: dict = {"model": "SmolLM2-135M", "ports": PORTS, "beat_bytes": BEAT,
                 "ddr_wall_bytes_per_s": DDR_WALL_BYTES_PER_S, "formats": {}}
    for fmt in ("q4", "int8"):
        x_now = x_blk = rows_now = rows_blk = 0
        for m in matrices(s):
            k, n, c = m["k"], m["n"], m["count"]
            q4_rows = fmt == "q4" and m["name"] != "lm_head"        # the head is Q8_0
            x_now += c * PORTS * x_codes_bytes(k)
            x_blk += c * PORTS * (x_codes_bytes(k) + x_scale_bytes(k, q4_rows))
            if q4_rows:
                rows_now += c * n * q4_row_bytes(k)
                rows_blk += c * n * q4_row_bytes(k)
            else:
                rows_now += c * n * int8_row_bytes(k)
                rows_blk += c * n * q8_0_row_bytes(k)
        cpu_now = cpu_blk = 0
        for kind, dim, per_layer in SLOTS:
            k = getattr(s, dim)
            c = s.layers if per_layer else 1
            cpu_now += c * x_codes_bytes(k)
            cpu_blk += c * (x_codes_bytes(k) + x_scale_bytes(k, fmt == "q4" and
                                                            kind != "lm_head"))
        total_now = x_now + rows_now
        out["formats"][fmt] = {
            "x_stream_bytes_now": x_now, "x_stream_bytes_blocks": x_blk,
            "x_stream_bytes_added": x_blk - x_now,
            "x_added_us_at_wall": (x_blk - x_now) / DDR_WALL_BYTES_PER_S * 1e6,
            "row_bytes_now": rows_now, "row_bytes_blocks": rows_blk,
            "row_bytes_added": rows_blk - rows_now,
            "row_added_us_at_wall": (rows_blk - rows_now) / DDR_WALL_BYTES_PER_S * 1e6,
            "stream_bytes_now": total_now,
            "added_share": (x_blk - x_now + rows_blk - rows_now) / total_now,
            "cpu_x_bytes_now": cpu_now, "cpu_x_bytes_blocks": cpu_blk,
        }
    out["acc_w"] = {str(k): {"now": q4_acc_width(k), "q8_1": acc_width_q8_1(k),
                             "q8_0": acc_width_q8_0(k)}
                    for k in (576, 1536, 2048, 65535)}
    return out


def table(f: dict) -> str:
    lines = ["bytes per token (streamed: both ports' frames; header and row bytes as today)",
             "", "| format | x streamed now | with x scales | added | at the wall | "
             "rows now | rows with Q8_0 blocks | added | at the wall | share of the token's "
             "stream | CPU x slots now | with scales |", "|" + "---|" * 12]
    for fmt, g in f["formats"].items():
        lines.append(
            f"| {fmt} | {g['x_stream_bytes_now']:,} | {g['x_stream_bytes_blocks']:,} | "
            f"{g['x_stream_bytes_added']:,} | {g['x_added_us_at_wall']:.1f} us | "
            f"{g['row_bytes_now']:,} | {g['row_bytes_blocks']:,} | {g['row_bytes_added']:,} | "
            f"{g['row_added_us_at_wall']:.0f} us | {100 * g['added_share']:.2f} % | "
            f"{g['cpu_x_bytes_now']:,} | {g['cpu_x_bytes_blocks']:,} |")
    lines += ["", "exact row accumulators, signed bits", "",
              "| max_k | Q4_1 today (units of 2^-24) | Q4_1 x Q8_1 (units of 2^-48) | "
              "Q8_0 x Q8_0 (units of 2^-48) |", "|---|---|---|---|"]
    for k, a in f["acc_w"].items():
        lines.append(f"| {int(k):,} | {a['now']} | {a['q8_1']} | {a['q8_0']} |")
    return "\n".join(lines)


def recorded(f: dict) -> list:
    """The figures docs/activations.md quotes ("modelled": the layouts above, counted)."""
    out = []
    names = {"q4": "q4 (Q4_1 layers, Q8_0 head)", "int8": "int8"}
    for fmt, g in f["formats"].items():
        what = f"SmolLM2-135M per token, format {names[fmt]}, both ports' frames: "
        out += [
            results.figure(f"activation-blocks.{fmt}.x_added_bytes", g["x_stream_bytes_added"],
                           "B", "modelled", what + "bytes the x scale tables add to the x "
                           "stream (Q8_1 for Q4_1 frames, Q8_0 for INT8-lane frames)"),
            results.figure(f"activation-blocks.{fmt}.x_added_ms", round(g["x_added_us_at_wall"]
                                                                        / 1e3, 4),
                           "ms", "modelled", what + "those bytes at the DDR wall"),
            results.figure(f"activation-blocks.{fmt}.rows_added_bytes", g["row_bytes_added"],
                           "B", "modelled", what + "bytes Q8_0 rows as stored (an fp16 d per "
                           "32 weights) add against today's INT8 rows"),
            results.figure(f"activation-blocks.{fmt}.rows_added_ms",
                           round(g["row_added_us_at_wall"] / 1e3, 3), "ms", "modelled",
                           what + "those bytes at the DDR wall"),
            results.figure(f"activation-blocks.{fmt}.added_share",
                           round(100 * g["added_share"], 2), "%", "modelled",
                           what + "x scales and Q8_0 rows together, as a share of the "
                           "token's matrix stream today"),
            results.figure(f"activation-blocks.{fmt}.cpu_x_bytes", g["cpu_x_bytes_blocks"], "B",
                           "modelled", what + "bytes the CPU writes into the x slots per "
                           f"token with x scale tables (today {g['cpu_x_bytes_now']:,} B)"),
        ]
    for k in ("2048",):
        a = f["acc_w"][k]
        out += [results.figure("activation-blocks.acc_w.now", a["now"], "bits", "modelled",
                               f"the Q4_1 lane's exact row accumulator at max_k = {k} today "
                               "(generators.designs.q4.q4_acc_width)"),
                results.figure("activation-blocks.acc_w.q8_1", a["q8_1"], "bits", "modelled",
                               f"an exact row accumulator at max_k = {k} with Q8_1 x "
                               "(units of 2^-48: d_w d_x S + m_w s_x per block)"),
                results.figure("activation-blocks.acc_w.q8_0", a["q8_0"], "bits", "modelled",
                               f"an exact row accumulator at max_k = {k} for Q8_0 rows and x "
                               "(units of 2^-48: d_w d_x S per block)")]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--record", action="store_true",
                    help="write docs/results/activation-blocks.json (make activation-blocks)")
    a = ap.parse_args(argv)
    f = figures()
    print(json.dumps(f, indent=1) if a.json else table(f))
    if a.record:
        print(results.record("activation-blocks", recorded(f)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
