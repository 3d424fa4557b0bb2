"""The timing model's numbers fitted to Vivado's own reports, and the model's error bound.

The data: ``generators/report/timing_calibration.json``, the worst setup (and recovery) paths
of the calibration set's post-route reports (../shared/calibration.md) as
:func:`generators.report.vivado_timing.parse_report` reads them: every cell's arc and
incremental delay, every net's fanout and delay (facts read from the reports; none of the
designs' code). ``tools/timing_calibration.py`` writes it from the fetched repositories;
this module needs only that file.

The fit (:func:`fit`): Vivado prints each element's own delay, so each class is fitted on its
own elements by least squares:

* a cell class (clock-to-out TCKO, the LUTs by size TILO1..TILO5/TILO, each CARRY4 arc, MUXF7/F8,
  the block RAM and DSP48E1 arcs, each end pin's setup): the least-squares constant, the mean
  of its elements;
* routing, over the nets the model routes (not the dedicated carry and cascade connections
  nor the in-slice ones): ``ROUTE_BASE + ROUTE_PER_DOUBLING*log2(fo) + ROUTE_PER_KLOAD*fo/1000
  [+ ROUTE_HARD at a block RAM or DSP48E1 pin]``, non-negative least squares.

Each element counts once per design (a report prints the same cells on many of its paths:
risc_soc's ten worst paths share most of their 320 levels); an element is one design's cell
at one site with one arc and delay, or one net between two sites with one fanout and delay.

The bound (:func:`held_out`): leave one design out, fit on the others (a class the others do
not have keeps its source's number), re-time the left-out
design's paths (the replay, :func:`generators.report.vivado_timing.replay`), and take Vivado
minus that. The bound is the largest such under-estimate over every held-out path, as a
fraction of the modelled path (:data:`BOUND_KIND`): errors add up element by element, so they
scale with the path (a 103 ns path 3 % under reads 3 ns, which says nothing of a 6 ns path).
"""
from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from . import vivado_timing as vt

__all__ = ["DATA", "load", "fit", "fitted_numbers", "fitted_model", "prior_model", "covered_fanout", "held_out", "bound", "cell_class",
           "route_features", "nnls", "BOUND_KIND", "ROUTE_KEYS"]

DATA = Path(__file__).resolve().parent / "timing_calibration.json"
#: what the bound is: the largest held-out under-estimate as a fraction of the modelled path
BOUND_KIND = "fraction"
ROUTE_KEYS = ("ROUTE_BASE", "ROUTE_PER_DOUBLING", "ROUTE_PER_KLOAD", "ROUTE_HARD")


def load(path: Optional[Path] = None) -> dict:
    return json.loads(Path(path or DATA).read_text())


def cell_class(typ: str, arc: str, ns: float) -> Optional[str]:
    """The fitted class of a cell element: the model key (LUTs by size: TILO1..TILO5, TILO
    for LUT6), CARRY4 arcs as ``CARRY4:<in><i>-><out><o>``."""
    lc = vt.lut_class(arc)
    if lc:
        n = int(lc[3])
        return "TILO" if n == 6 else f"TILO{n}"
    return vt.cell_key(typ, arc, ns)


def route_features(fo: int, hard: bool) -> List[float]:
    """The routing terms of a net (the order of :data:`ROUTE_KEYS`)."""
    return [1.0, math.log2(max(1, fo)), max(1, fo) / 1000.0, 1.0 if hard else 0.0]


def nnls(a: np.ndarray, b: np.ndarray, iters: int = 100) -> np.ndarray:
    """Non-negative least squares (Lawson and Hanson's active set; numpy only)."""
    a = np.asarray(a, float)
    b = np.asarray(b, float)
    n = a.shape[1]
    x = np.zeros(n)
    passive = np.zeros(n, bool)
    for _ in range(iters):
        w = a.T @ (b - a @ x)
        if passive.all() or (w[~passive] <= 1e-12).all():
            break
        j = int(np.argmax(np.where(passive, -np.inf, w)))
        passive[j] = True
        while True:
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
            if (z[passive] > 0).all():
                x = z
                break
            neg = passive & (z <= 0)
            alpha = np.min(x[neg] / (x[neg] - z[neg]))
            x = x + alpha * (z - x)
            passive &= x > 1e-12
    return x


def _elements(designs: Sequence[Mapping]):
    """(cells {class: [ns]}, setups {key: [ns]}, nets [(fo, hard, ns)], slice nets, lut pins):
    every distinct element of the designs' paths."""
    cells: Dict[str, List[float]] = defaultdict(list)
    setups: Dict[str, List[float]] = defaultdict(list)
    nets: List[Tuple[int, bool, float]] = []
    zero: Dict[str, List[float]] = defaultdict(list)
    pins: Dict[str, List[float]] = defaultdict(list)
    for d in designs:
        seen = set()
        for p in d["paths"]:
            el = p["elements"]
            end_d = vt.end_is_d(p)
            for i, e in enumerate(el):
                if e[0] == "c":
                    k = ("c",) + tuple(e)
                    if k in seen:
                        continue
                    seen.add(k)
                    c = cell_class(e[1], e[2], e[3])
                    if c is not None:
                        cells[c].append(e[3])
                    lc = vt.lut_class(e[2])
                    if lc:
                        pins[lc].append(e[3])
                elif e[0] == "n":
                    drv = next((x for x in reversed(el[:i]) if x[0] == "c"), None)
                    snk = el[i + 1] if i + 1 < len(el) else None
                    k = ("n", e[1], e[2], drv[-1] if drv else "", snk[-1] if snk else "",
                         snk[2] if snk and snk[0] == "c" else "")
                    if k in seen:
                        continue
                    seen.add(k)
                    cls = vt.net_class(el, i, end_d)
                    if cls in ("general", "hard"):
                        nets.append((e[1], cls == "hard", e[2]))
                    else:
                        zero[cls].append(e[2])
            ck = p["check"]
            sk = vt.setup_key(ck[0], ck[1], ck[2])
            k = ("s", ck[0], ck[1], ck[2], p["end"])
            if sk is not None and k not in seen:
                seen.add(k)
                setups[sk].append(ck[2])
    return cells, setups, nets, zero, pins


def fit(designs: Sequence[Mapping]) -> dict:
    """The fitted numbers of the designs' paths (see the module doc): ``cells`` {class:
    {ns, n, min, max}}, ``setup`` {key: ...}, ``route`` {key: ns}, with the routing fit's
    ``nets`` count and its residuals, and the in-slice and dedicated nets Vivado reports
    (which the model takes as 0)."""
    cells, setups, nets, zero, pins = _elements(designs)

    def stat(v):
        return dict(ns=round(float(np.mean(v)), 3), n=len(v), min=round(min(v), 3),
                    max=round(max(v), 3))
    out = dict(cells={k: stat(v) for k, v in sorted(cells.items())},
               setup={k: stat(v) for k, v in sorted(setups.items())},
               lut_pins={k: stat(v) for k, v in sorted(pins.items())},
               zero_nets={k: stat(v) for k, v in sorted(zero.items())})
    if nets:
        a = np.array([route_features(fo, h) for fo, h, _ in nets])
        b = np.array([ns for _, _, ns in nets])
        x = nnls(a, b)
        res = b - a @ x
        out["route"] = {k: round(float(v), 4) for k, v in zip(ROUTE_KEYS, x)}
        out["route_fit"] = dict(nets=len(nets), rms_ns=round(float(np.sqrt(np.mean(res ** 2))), 3),
                                max_under_ns=round(float(res.max()), 3),
                                max_over_ns=round(float(-res.min()), 3))
    return out


def fitted_numbers(f: Mapping) -> dict:
    """The fit's numbers as ``generators/report/timing_fitted.json`` holds them (what
    :func:`generators.report.timing.apply_fit` applies): ``delays`` {key: ns} for every
    class the fit holds that the model has, ``carry4`` {"DI0->CO0": ns}, ``n`` {key: the
    number of Vivado elements behind it}."""
    from .timing import DELAYS
    delays, carry, n = {}, {}, {}
    for k, s in list(f["cells"].items()) + list(f["setup"].items()):
        if k.startswith("CARRY4:"):
            carry[k[len("CARRY4:"):]] = s["ns"]
            n[k] = s["n"]
        elif k in DELAYS:
            delays[k] = s["ns"]
            n[k] = s["n"]
    for k, v in f.get("route", {}).items():
        delays[k] = round(float(v), 4)
        n[k] = f["route_fit"]["nets"]
    return dict(delays=dict(sorted(delays.items())), carry4=dict(sorted(carry.items())),
                n=dict(sorted(n.items())))


def fitted_model(f: Mapping):
    """A :class:`generators.report.timing.Model`: the sources' numbers (``DELAYS``,
    ``CARRY4_ARCS``) with every class the fit ``f`` holds replaced by the fit's."""
    from .timing import apply_fit
    return apply_fit(fitted_numbers(f))


def prior_model():
    """The model with the sources' numbers, before the calibration."""
    from .timing import Model
    return Model()


def _carry_key(k: str):
    import re
    m = re.fullmatch(r"CARRY4:([A-Z]+)(\d)->([A-Z]+)(\d)", k)
    return (m.group(1), int(m.group(2)), m.group(3), int(m.group(4)))


def replays(designs: Sequence[Mapping], model) -> List[dict]:
    """Every path of the designs re-timed with ``model``: [{design, i, vivado, model}] (paths
    with a cell the model has no number for are left out)."""
    out = []
    for d in designs:
        for i, p in enumerate(d["paths"]):
            r = vt.replay(p, model)
            if r["ns"] is None:
                continue
            out.append(dict(design=d["name"], i=i, kind=p["kind"], group=p["group"],
                            vivado=vt.path_vivado_ns(p), model=r["ns"]))
    return out


def held_out(designs: Sequence[Mapping]) -> List[dict]:
    """Leave each design out in turn: fit on the others, re-time its paths."""
    out = []
    for d in designs:
        rest = [x for x in designs if x["name"] != d["name"]]
        m = fitted_model(fit(rest))
        out += replays([d], m)
    return out


def covered_fanout(designs: Sequence[Mapping], min_designs: int = 2) -> int:
    """The largest fanout F such that at least ``min_designs`` designs have a routed net of F
    loads or more on their paths: up to F the routing fit stands on more than one design."""
    tops = sorted((max((e[1] for p in d["paths"] for e in p["elements"] if e[0] == "n"),
                       default=0) for d in designs), reverse=True)
    return int(tops[min_designs - 1]) if len(tops) >= min_designs else 0


#: the path checks the bound is taken over: the PL top's flip-flops have synchronous resets
#: (FDRE/FDSE only: no recovery check; tests/generators/report/test_timing_model.py checks the top's netlist)
BOUND_KINDS = ("setup",)


def bound(rows: Iterable[Mapping]) -> dict:
    """The largest under-estimate (Vivado minus model, positive) of ``rows``: as a fraction of
    the modelled path (:data:`BOUND_KIND`, the bound) and in ns, each with the path it is of."""
    rows = [r for r in rows if r.get("kind", "setup") in BOUND_KINDS]
    frac = max(rows, key=lambda r: (r["vivado"] - r["model"]) / r["model"])
    ns = max(rows, key=lambda r: r["vivado"] - r["model"])
    f = max(0.0, (frac["vivado"] - frac["model"]) / frac["model"])
    return dict(kind=BOUND_KIND, fraction=round(f, 4), fraction_path=dict(frac),
                ns=round(max(0.0, ns["vivado"] - ns["model"]), 3), ns_path=dict(ns),
                paths=len(rows))
