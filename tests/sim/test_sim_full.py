"""A small bulk run of the `make sim-full` driver (sim/full/test_full.py) in the test suite.

10,000 rows per engine (8 beats each: INT8 K = 64, ternary K = 320) in frames of 4,000 rows, so
frame boundaries and tags are crossed; the driver checks every word against numpy and the
output protocol; here every beat must be taken on consecutive cycles. The Verilator builds are
those of test_mv_full_suite (same parameters), so this adds only the runs.
"""
import pytest

from sim import full_scale

ROWS, FRAME_ROWS = 10_000, 4_000
BEAT = 8


def frame_beats(fmt, k, n):
    """Header, x and n rows, each padded to whole 8-byte beats (DESIGN.md section 3)."""
    row_bytes = k if fmt == "int8" else -(-k // 5)
    return 1 + -(-k // BEAT) + n * -(-row_bytes // BEAT)


@pytest.mark.parametrize("design,params,fmt,k", [
    ("int8-engine", {"max_k": 300}, "int8", 64),
    ("ternary-engine", {"max_k": 700}, "ternary", 320),
], ids=["int8", "ternary"])
def test_bulk_driver(design, params, fmt, k, tmp_path):
    r = full_scale.run_full(design, params, ROWS, k, tmp_path / "full.json",
                            frame_rows=FRAME_ROWS)
    sizes = [FRAME_ROWS, FRAME_ROWS, ROWS - 2 * FRAME_ROWS]
    beats = sum(frame_beats(fmt, k, n) for n in sizes)
    assert (r["rows"], r["k"], r["frames"]) == (ROWS, k, len(sizes))
    assert r["beats"] == r["beats_in"] == beats
    assert r["words"] == ROWS + len(sizes)          # one result per row, one status per frame
    assert r["mismatches"] == 0 and r["faults"] == 0
    assert r["refused"] == 0, f"s_axis_tready low on {r['refused']} cycles with a free output"
