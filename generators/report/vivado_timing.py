"""Vivado's timing reports, read: the worst setup paths of ``report_timing_summary`` cell by
cell, and those paths re-timed with the model's delay numbers (the "replay").

``parse_report(text)`` reads every path of the report's "Max Delay Paths" sections whose
``Path Type`` is ``Setup`` or ``Recovery`` (the max-delay checks of a clocked end pin; the
unconstrained ``Max at Slow Process Corner`` paths are skipped) and returns, per path, its data
path element by element as Vivado prints it:

* a cell: ``["c", type, arc, incr_ns, location]`` (``FDRE``, ``Prop_fdre_C_Q``, 0.478,
  ``SLICE_X34Y20``); the arc names the input and output pins;
* a net: ``["n", fanout, incr_ns]`` (``net (fo=7, routed)  0.862``);

plus the end pin's check (``Setup_fdre_C_CE`` -0.429: a setup time of 0.429 ns; Vivado prints
it as its increment to the required time, so the setup time is minus that), the data path
delay Vivado states, and start, end, clock group. "Vivado ns" of a path is its data path
delay plus that setup time (../shared/calibration.md).

``replay(path, model)`` re-times one parsed path with a :class:`generators.report.timing.Model`:
each of Vivado's arcs mapped onto the model's key (:func:`cell_key`), each net routed as the
model routes it (:func:`net_class`: 0 on the dedicated connections, else ``route_delay`` of
Vivado's fanout, at a block RAM or DSP48E1 pin with the hard-block term).

This is the part of the calibration (tools/timing_calibration.py, docs/timing.md section 4)
that needs no fetched repository: the parsed figures are committed in
``generators/report/timing_calibration.json`` and re-fitted from there by
:mod:`generators.report.timing_fit`.
"""
from __future__ import annotations

import math
import re
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

__all__ = ["parse_report", "report_header", "cell_key", "setup_key", "net_class", "replay",
           "path_vivado_ns", "lut_class", "end_is_d", "HARD_TYPES"]

_NUM = r"-?\d+\.\d+"
# a cell line: [location] TYPE (ARC) [incr path [r|f] resource]; the numbers may wrap to the
# next line when the arc is long
_CELL_RE = re.compile(r"^\s+(?:(?P<loc>[A-Z][A-Z0-9_]*X\d+Y\d+|[A-Z]+\d+)\s+)?"
                      r"(?P<type>[A-Z][A-Z0-9_]*) \((?P<arc>(?:Prop|Setup|Recov|Hold|Remov)_[^)]*)\)"
                      r"(?:\s+(?P<incr>" + _NUM + r")\s+(?P<path>" + _NUM + r"))?")
_NUMS_RE = re.compile(r"^\s+(?P<incr>" + _NUM + r")\s+(?P<path>" + _NUM + r")(?:\s|$)")
_NET_RE = re.compile(r"^\s+net \(fo=(?P<fo>\d+)(?:, \w+)?\)\s+(?P<incr>" + _NUM + r")\s+"
                     r"(?P<path>" + _NUM + r")")
# the end pin: [location] TYPE  r|f  resource (no arc, no delay)
_PIN_RE = re.compile(r"^\s+(?:(?P<loc>[A-Z][A-Z0-9_]*X\d+Y\d+|[A-Z]+\d+)\s+)?"
                     r"(?P<type>[A-Z][A-Z0-9_]*)\s+[rf]\s+(?P<res>\S+)\s*$")
_SEP_RE = re.compile(r"^\s+-{20,}")

#: cell types whose pins are in a hard-block column (the model's ROUTE_HARD class)
HARD_TYPES = ("RAMB18E1", "RAMB36E1", "DSP48E1", "FIFO18E1", "FIFO36E1")


def report_header(text: str) -> Dict[str, str]:
    """The report's tool version, device and speed file."""
    out = {}
    for key, label in (("vivado", "Tool Version"), ("device", "Device"),
                       ("speed", "Speed File")):
        m = re.search(r"^\|\s*" + label + r"\s*:\s*(.+?)\s*$", text, re.M)
        out[key] = m.group(1) if m else ""
    m = re.match(r"(Vivado v\.\S+)", out["vivado"])
    out["vivado"] = m.group(1) if m else out["vivado"]
    return out


def _field(block: str, name: str) -> Optional[str]:
    m = re.search(r"^\s*" + re.escape(name) + r":\s*(.*?)\s*$", block, re.M)
    return m.group(1) if m else None


def _data_path(table: List[str]) -> Tuple[List[list], Optional[str], Optional[list]]:
    """The elements of one path's data path (the table's third segment: from the start
    cell's clock pin to the end pin), the end pin, and the check line of the last segment."""
    segs: List[List[str]] = [[]]
    for line in table:
        if _SEP_RE.match(line):
            segs.append([])
        else:
            segs[-1].append(line)
    if len(segs) < 4:
        raise ValueError("path table without its four segments")
    elems: List[list] = []
    end_pin = None
    data = segs[2]
    i = 0
    while i < len(data):
        line = data[i]
        mn = _NET_RE.match(line)
        mc = _CELL_RE.match(line)
        if mn:
            elems.append(["n", int(mn.group("fo")), float(mn.group("incr"))])
        elif mc:
            incr = mc.group("incr")
            if incr is None and i + 1 < len(data) and _NUMS_RE.match(data[i + 1]):
                incr = _NUMS_RE.match(data[i + 1]).group("incr")
                i += 1
            if incr is None:
                raise ValueError(f"cell line without its delay: {line.strip()}")
            elems.append(["c", mc.group("type"), mc.group("arc"), float(incr),
                          mc.group("loc") or ""])
        else:
            mp = _PIN_RE.match(line)
            if mp:
                end_pin = mp.group("res")
                elems.append(["p", mp.group("type"), mp.group("loc") or ""])
        i += 1
    check = None
    last = segs[3]
    for j, line in enumerate(last):
        mc = _CELL_RE.match(line)
        if mc and mc.group("arc").startswith(("Setup_", "Recov_")):
            incr = mc.group("incr")
            if incr is None and j + 1 < len(last) and _NUMS_RE.match(last[j + 1]):
                incr = _NUMS_RE.match(last[j + 1]).group("incr")
            check = [mc.group("type"), mc.group("arc"), -float(incr)]
    return elems, end_pin, check


def parse_report(text: str) -> List[dict]:
    """Every Setup and Recovery path of a ``report_timing_summary`` text (see the module
    doc). Raises ValueError on a path it cannot read whole."""
    paths = []
    sections = re.split(r"^(Max Delay Paths|Min Delay Paths)\s*$", text, flags=re.M)
    for k in range(1, len(sections), 2):
        if sections[k] != "Max Delay Paths":
            continue
        body = sections[k + 1]
        for block in re.split(r"^(?=Slack)", body, flags=re.M)[1:]:
            ptype = _field(block, "Path Type") or ""
            kind = ptype.split(" ")[0].lower()
            if kind not in ("setup", "recovery"):
                continue
            if not re.search(r"^\s*Requirement:", block, re.M):
                continue    # unconstrained (slack inf, a false path): no check to read
            slack = re.match(r"Slack(?: \((\w+)\))?\s*:\s*(" + _NUM + r"|inf)", block)
            dpd = re.search(r"Data Path Delay:\s*(" + _NUM + r")ns", block)
            req = re.search(r"Requirement:\s*(" + _NUM + r")ns", block)
            lev = re.search(r"Logic Levels:\s*(\d+)", block)
            lines = block.splitlines()
            if any(ln.strip().startswith("max delay") for ln in lines):
                continue    # set_max_delay -datapath_only (a CDC bound): no clock, no period
            try:
                t0 = next(i for i, ln in enumerate(lines) if "Delay type" in ln and "Incr" in ln)
                t1 = next(i for i, ln in enumerate(lines) if ln.strip().startswith("required time"))
            except StopIteration:
                raise ValueError(f"path without its table: {_field(block, 'Source')}")
            elems, end_pin, check = _data_path(lines[t0 + 1:t1])
            if check is None:
                raise ValueError(f"path without its {ptype.split()[0]} check: {end_pin}")
            src = (_field(block, "Source") or "").strip()
            paths.append(dict(
                kind=kind, group=(_field(block, "Path Group") or "").strip(),
                slack=float(slack.group(2)) if slack else None,
                requirement=float(req.group(1)) if req else None,
                datapath_ns=float(dpd.group(1)), levels=int(lev.group(1)) if lev else None,
                start=src, end=end_pin or (_field(block, "Destination") or "").strip(),
                elements=elems, check=check))
    return paths


def path_vivado_ns(p: Mapping) -> float:
    """Vivado's figure of a path: data path delay plus the end pin's setup time."""
    return round(p["datapath_ns"] + p["check"][2], 3)


# ----------------------------------------------------------------------------- the replay

_LUT_ARC = re.compile(r"Prop_lut(\d)_I(\d)_O")
_CARRY_ARC = re.compile(r"Prop_carry4_([A-Z]+)(?:\[(\d)\])?_([A-Z]+)\[(\d)\]")


def lut_class(arc: str) -> Optional[str]:
    """The LUT input class of a Vivado LUT arc: ``LUTn_Ik`` (LUT size and input pin)."""
    m = _LUT_ARC.fullmatch(arc)
    return f"LUT{m.group(1)}_I{m.group(2)}" if m else None


def cell_key(typ: str, arc: str, ns: float) -> Optional[str]:
    """The model's key for one of Vivado's cell arcs (None: a cell the model has no number
    for, such as the PS7 or a clock buffer). CARRY4 arcs are returned as
    ``CARRY4:<in><i>-><out><o>`` (the model's CARRY4_ARCS)."""
    a = arc.lower()
    if re.fullmatch(r"prop_fd[a-z]e_c_q", a):
        return "TCKO"
    m = _LUT_ARC.fullmatch(arc)
    if m:       # the LUTs by size, as the model times them (TILO: LUT6)
        return "TILO" if m.group(1) == "6" else f"TILO{m.group(1)}"
    m = _CARRY_ARC.fullmatch(arc)
    if m:
        return f"CARRY4:{m.group(1)}{m.group(2) or 0}->{m.group(3)}{m.group(4)}"
    if typ in ("MUXF7", "MUXF8"):
        k = "F7" if typ == "MUXF7" else "F8"
        return f"{k}_S" if "_S_O" in arc else f"{k}_I"
    if typ.startswith(("RAMD", "RAMS")):
        return "TSHCKO" if "_CLK_" in arc else "TILO"
    if typ.startswith("RAMB") and re.search(r"_CLK\w*_DO", arc):
        # the report does not name DOA_REG/DOB_REG: the two settings differ by 1.6 ns
        return "TRCKO_DO_REG" if ns < 1.5 else "TRCKO_DO"
    if typ == "DSP48E1":
        m = re.fullmatch(r"Prop_dsp48e1_([A-Z]+)(?:\[\d+\])?_([A-Z]+)(?:\[\d+\])?", arc)
        if m:
            i = m.group(1)
            if i in ("A", "ACIN"):
                return _nearest(ns, _DSP_PROP["A"])
            if i in ("B", "BCIN"):
                return _nearest(ns, _DSP_PROP["B"])
            if i in ("C", "PCIN", "OPMODE", "ALUMODE", "CARRYIN"):
                return f"TDSPDO_{i}_P"
            if i == "CLK":
                return "TDSPCKO_P_PREG"
    if typ.startswith("SRL") and "_CLK_" in arc:
        return "TREG"
    return None


#: the DSP48E1 setup checks of one input pin, one per register setting
_DSP_SETUP = {"A": ("TDSPDCK_A_AREG", "TDSPDCK_A_MREG_MULT", "TDSPDCK_A_PREG_MULT",
                    "TDSPDCK_A_PREG"),
              "B": ("TDSPDCK_B_BREG", "TDSPDCK_B_MREG_MULT", "TDSPDCK_B_PREG_MULT",
                    "TDSPDCK_B_PREG"),
              "C": ("TDSPDCK_C_CREG", "TDSPDCK_C_PREG")}
#: the DSP48E1 input-to-P arcs of one pin: through the multiplier or not
_DSP_PROP = {"A": ("TDSPDO_A_P_MULT", "TDSPDO_A_P"), "B": ("TDSPDO_B_P_MULT", "TDSPDO_B_P")}


def _nearest(ns: float, keys: Sequence[str]) -> str:
    """Of ``keys``, the one whose number before the calibration is nearest ``ns``."""
    from .timing import DELAYS
    def prior(k):
        d = DELAYS[k]
        return d.prior if d.prior is not None else d.ns
    return min(keys, key=lambda k: abs(prior(k) - ns))


def setup_key(typ: str, arc: str, ns: Optional[float] = None) -> Optional[str]:
    """The model's key for the end pin's setup (or recovery) check (``ns``: Vivado's setup
    time, which picks the register setting of a DSP48E1 input)."""
    m = re.fullmatch(r"(?:Setup|Recov)_(\w+?)_C(?:LK\w*)?_(\w+?)(?:\[\d+\])?", arc)
    if not m:
        return None
    pin = m.group(2)
    if typ.startswith("FD"):
        return {"D": "TDICK", "CE": "TCECK", "R": "TSRCK", "S": "TSRCK", "CLR": "TSRCK",
                "PRE": "TSRCK"}.get(pin)
    if typ.startswith("RAMB"):
        for prefix, key in (("ADDR", "TRCCK_ADDR"), ("DI", "TRDCK_DI"), ("WE", "TRCCK_WE"),
                            ("EN", "TRCCK_EN"), ("REGCE", "TRCCK_REGCE"),
                            ("RST", "TRCCK_RSTREG")):
            if pin.startswith(prefix):
                return key
    if typ == "DSP48E1":
        if pin.startswith("RST"):
            return "TDSPCCK_RST"
        if pin.startswith("CE"):
            return "TDSPCCK_CE"
        if pin in ("A", "B", "C"):
            # the report does not name the register setting (AREG/BREG, MREG, PREG): the
            # setting whose number before the calibration is nearest Vivado's
            return _nearest(ns, _DSP_SETUP[pin])
    if typ.startswith(("RAMD", "RAMS")):
        return {"I": "TDS_RAM", "WE": "TWS"}.get(pin, "TAS_RAM")
    if typ.startswith("SRL"):
        return "TDS_SRL" if pin == "D" else "TCE_SRL"
    return None


def _in_pin(arc: str) -> str:
    """The input pin an arc starts at: Prop_lut6_I3_O -> I3, Prop_carry4_S[1]_CO[3] -> S."""
    m = re.fullmatch(r"Prop_[a-z0-9]+_([A-Z]+)(\d?)(?:\[\d+\])?_.*", arc)
    return m.group(1) if m else ""


def net_class(elems: Sequence[list], i: int, end_d: bool = True) -> str:
    """How the model routes net ``elems[i]`` (docs/timing.md section 2): ``dedicated`` (the
    carry chain's CO3 -> CI, a DSP48E1 cascade), ``slice`` (a fanout-1 net inside one slice:
    a LUT into the MUXF7/MUXF8 or CARRY4 S/DI beside it, MUXF7 into MUXF8, a LUT, MUXF or
    CARRY4 into the flip-flop's D beside it (``end_d``: the path's end pin is a flip-flop's
    D): the model's 0), ``hard`` (a general net that enters
    or leaves a block RAM or DSP48E1) or ``general``."""
    fo = elems[i][1]
    drv = next((e for e in reversed(elems[:i]) if e[0] == "c"), None)
    snk = elems[i + 1] if i + 1 < len(elems) else None
    dtype = drv[1] if drv else ""
    stype = snk[1] if snk else ""
    sarc = snk[2] if snk and snk[0] == "c" else ""
    spin = _in_pin(sarc) if sarc else ("D" if snk and snk[0] == "p" else "")
    if dtype == "CARRY4" and stype == "CARRY4" and spin == "CI" and \
            re.search(r"_CO\[3\]$", drv[2]):
        return "dedicated"
    if dtype == "DSP48E1" and stype == "DSP48E1" and spin in ("PCIN", "ACIN", "BCIN",
                                                              "CARRYCASCIN", "MULTSIGNIN"):
        return "dedicated"
    dlut = dtype.startswith("LUT")
    if fo == 1:
        if dlut and stype in ("MUXF7", "MUXF8", "CARRY4") and spin in ("I", "S", "DI") \
                and not (spin == "DI" and dtype == "LUT6"):
            return "slice"      # (DI takes a LUT's O5 or the bypass: not a LUT6's O6)
        if dtype in ("MUXF7",) and stype == "MUXF8" and spin == "I":
            return "slice"
        if (dlut or dtype in ("MUXF7", "MUXF8", "CARRY4")) and snk and snk[0] == "p" and \
                stype.startswith("FD") and end_d:
            return "slice"
    if dtype in HARD_TYPES or stype in HARD_TYPES:
        return "hard"
    return "general"


def replay(p: Mapping, model=None) -> Dict[str, object]:
    """The model's figure for Vivado's own path ``p`` (parse_report's form): each cell by its
    model key, each net by the model's routing, the end by its setup key. Returns ``ns``
    (None when a cell has no model number: ``missing`` names it) and the terms."""
    from .timing import DEFAULT_MODEL, route_delay
    m = model or DEFAULT_MODEL
    elems = p["elements"]
    end_d = end_is_d(p)
    total = 0.0
    missing = []
    for i, e in enumerate(elems):
        if e[0] == "c":
            k = cell_key(e[1], e[2], e[3])
            if k is None:
                missing.append(f"{e[1]} {e[2]}")
                continue
            total += _model_cell(m, k)
        elif e[0] == "n":
            cls = net_class(elems, i, end_d)
            if cls in ("dedicated", "slice"):
                continue
            total += route_delay(e[1], cls == "hard", m)
    sk = setup_key(p["check"][0], p["check"][1], p["check"][2])
    if sk is None:
        missing.append(f"{p['check'][0]} {p['check'][1]}")
    else:
        total += m.ns(sk)
    return dict(ns=None if missing else round(total, 3), missing=missing)


def end_is_d(p: Mapping) -> bool:
    """Whether the path ends at a flip-flop's D (the check line names the pin)."""
    return p["check"][0].startswith("FD") and p["check"][1].endswith("_D")


def _model_cell(m, key: str) -> float:
    if key.startswith("CARRY4:"):
        mm = re.fullmatch(r"CARRY4:([A-Z]+)(\d)->([A-Z]+)(\d)", key)
        k = (mm.group(1), int(mm.group(2)), mm.group(3), int(mm.group(4)))
        return m.carry4[k]
    return m.ns(key)


def log2f(fo: int) -> float:
    return math.log2(max(1, int(fo)))
