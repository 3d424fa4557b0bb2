"""generators/report/timing_fit.py and tools/timing_calibration.py: the model's numbers fitted to
Vivado's elements, the held-out error bound, and the committed fit (docs/timing.md section 4).

The fit is tested on paths made from known numbers (it must give them back), the non-negative
least squares against an exhaustive search over its active sets, the bound on rows written
here; and the committed generators/report/timing_fitted.json is checked to be the fit of the
committed generators/report/timing_calibration.json.
"""
import itertools
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from generators.report import timing as T
from generators.report import timing_fit as tf

REPO = Path(__file__).resolve().parents[3]

# the "true" numbers the synthetic paths are made of (ns)
TRUE = dict(TCKO=0.5, TILO=0.3, TILO3=0.2, ROUTE_BASE=0.6, ROUTE_PER_DOUBLING=0.15,
            ROUTE_PER_KLOAD=2.0, ROUTE_HARD=0.4, TDICK=0.05)


def _route(fo, hard=False):
    return (TRUE["ROUTE_BASE"] + TRUE["ROUTE_PER_DOUBLING"] * math.log2(fo)
            + TRUE["ROUTE_PER_KLOAD"] * fo / 1000 + (TRUE["ROUTE_HARD"] if hard else 0.0))


def _path(fo1, fo2, lut2="LUT6", into_bram=False):
    """FF -> net fo1 -> LUT3 -> net fo2 -> LUT6 (or LUT3) -> routed net -> FF D (or BRAM)."""
    arc2 = "Prop_lut6_I1_O" if lut2 == "LUT6" else "Prop_lut3_I1_O"
    t2 = TRUE["TILO"] if lut2 == "LUT6" else TRUE["TILO3"]
    el = [["c", "FDRE", "Prop_fdre_C_Q", TRUE["TCKO"], "SLICE_X0Y0"],
          ["n", fo1, round(_route(fo1), 4)],
          ["c", "LUT3", "Prop_lut3_I0_O", TRUE["TILO3"], f"SLICE_X{fo1}Y1"],
          ["n", fo2, round(_route(fo2), 4)],
          ["c", lut2, arc2, t2, f"SLICE_X{fo2}Y2"],
          ["n", 2, round(_route(2, into_bram), 4)],
          ["p", "RAMB36E1" if into_bram else "FDRE", "X"]]
    check = (["RAMB36E1", "Setup_ramb36e1_CLKARDCLK_ADDRARDADDR[3]", 0.566] if into_bram
             else ["FDRE", "Setup_fdre_C_D", TRUE["TDICK"]])
    dp = round(sum(e[-2] if e[0] == "c" else e[2] for e in el if e[0] in "cn"), 4)
    return dict(kind="setup", group="clk", datapath_ns=dp, check=check, start="a", end="b",
                elements=el)


def _designs():
    fos = [(1, 3), (2, 40), (7, 300), (16, 900), (64, 5), (130, 1), (1, 1500), (4, 9)]
    return [dict(name=f"d{i}", paths=[_path(a, b, "LUT6" if i % 2 else "LUT3", i % 3 == 0)])
            for i, (a, b) in enumerate(fos)]


def test_the_fit_gives_back_the_numbers_the_paths_are_made_of():
    f = tf.fit(_designs())
    assert f["cells"]["TCKO"]["ns"] == TRUE["TCKO"]
    assert f["cells"]["TILO3"]["ns"] == TRUE["TILO3"]
    assert f["cells"]["TILO"]["ns"] == TRUE["TILO"]
    assert f["setup"]["TDICK"]["ns"] == TRUE["TDICK"]
    for k in tf.ROUTE_KEYS:
        assert f["route"][k] == pytest.approx(TRUE[k], abs=2e-3), k
    assert f["route_fit"]["rms_ns"] <= 1e-3
    m = tf.fitted_model(f)
    assert m.ns("TCKO") == TRUE["TCKO"] and m.delays["TCKO"].source == "fit"
    assert m.delays["TCKO"].prior == T.DELAYS["TCKO"].ns
    # what the fit has no element of keeps its source's number
    assert m.ns("TRCKO_DO") == T.DELAYS["TRCKO_DO"].ns


def test_nnls_is_the_best_non_negative_solution():
    rng = np.random.default_rng(7)
    for _ in range(20):
        a = rng.normal(size=(9, 4))
        b = rng.normal(size=9)
        x = tf.nnls(a, b)
        assert (x >= 0).all()
        best = np.inf
        for k in range(5):     # every active set: least squares on it, kept when feasible
            for cols in itertools.combinations(range(4), k):
                z = np.zeros(4)
                if cols:
                    z[list(cols)] = np.linalg.lstsq(a[:, cols], b, rcond=None)[0]
                if (z >= -1e-12).all():
                    best = min(best, float(np.sum((a @ z - b) ** 2)))
        assert float(np.sum((a @ x - b) ** 2)) == pytest.approx(best, rel=1e-9, abs=1e-12)


def test_the_bound_is_the_largest_held_out_under_estimate():
    rows = [dict(kind="setup", vivado=5.0, model=4.0),       # 25 % under, 1.0 ns
            dict(kind="setup", vivado=12.0, model=10.5),     # 14.3 % under, 1.5 ns
            dict(kind="setup", vivado=3.0, model=3.5),       # over: no bound from it
            dict(kind="recovery", vivado=9.0, model=3.0)]    # not a check the top has
    b = tf.bound(rows)
    assert b["fraction"] == 0.25 and b["fraction_path"]["vivado"] == 5.0
    assert b["ns"] == 1.5 and b["ns_path"]["vivado"] == 12.0
    assert b["paths"] == 3
    assert tf.bound([dict(kind="setup", vivado=3.0, model=3.5)])["fraction"] == 0.0


def test_covered_fanout_stands_on_two_designs():
    ds = [dict(paths=[dict(elements=[["n", f, 1.0]])]) for f in (12, 900, 40, 3000)]
    assert tf.covered_fanout(ds) == 900
    assert tf.covered_fanout(ds, min_designs=1) == 3000


def test_the_committed_fit_is_the_fit_of_the_committed_data():
    r = subprocess.run([sys.executable, str(REPO / "tools" / "timing_calibration.py"), "--check"],
                       capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stdout + r.stderr
    fitted = json.loads(T.FITTED_FILE.read_text())
    assert T.BOUND_FRACTION == fitted["bound"]["fraction"] > 0
    assert T.CALIBRATED_BUDGET_NS == round(T.CLOCK_NS / (1 + T.BOUND_FRACTION), 3)
    for k, v in fitted["delays"].items():
        assert T.CALIBRATED_MODEL.ns(k) == v


def test_the_calibration_names_a_missing_folder(tmp_path):
    r = subprocess.run([sys.executable, str(REPO / "tools" / "timing_calibration.py"),
                        "--calib", str(tmp_path / "none"), "--no-record"],
                       capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 2 and "is not a folder" in r.stderr
    r = subprocess.run([sys.executable, str(REPO / "tools" / "timing_calibration.py"),
                        "--calib", str(tmp_path), "--no-record", "--data",
                        str(tmp_path / "x.json")], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 2 and "not found in" in r.stderr
    assert not (tmp_path / "x.json").exists()
