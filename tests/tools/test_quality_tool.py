"""tools/quality.py's bookkeeping (the runs themselves are make targets: docs/quality.md)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_quality_records_name_their_make_target():
    """tools/quality.py: each kind of run is recorded apart and names the make target that
    reruns it (make quality, make quality-sweep DITHER=N, make quality-dither)."""
    spec = importlib.util.spec_from_file_location("quality_tool", REPO / "tools" / "quality.py")
    q = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(q)
    runs = {(): ("", "make quality"),
            ("--sweep",): ("sweep", "make quality-sweep"),
            ("--sweep", "--dither", "0"): ("sweep", "make quality-sweep DITHER=0"),
            ("--sweep", "--policies", "", "--formats", "int8", "--dither", "4"):
                ("dither", "make quality-dither FORMATS=int8 DITHER=4")}
    for argv, (var, cmd) in runs.items():
        args = q.PARSER.parse_args(list(argv))
        assert (q.variant(args), q.command(args, list(argv))) == (var, cmd), argv
