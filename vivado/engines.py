#!/usr/bin/env python3
"""Render the PL top (or single engines) and write the cell and DMA list for vivado/build.tcl.

    .venv/bin/python vivado/engines.py --engines overlay --out build/vivado/engines
    .venv/bin/python vivado/engines.py --engines ternary-engine,ternary-engine \
        --out build/vivado/engines

renders each distinct design once with ``generators.render`` into ``OUT/<design>`` and writes
``build/vivado/engines.tcl`` (beside OUT), which build.tcl sources:

    set ENGINES {
        {name overlay design overlay top pynq_overlay latency 7 dir /abs/OUT/overlay
         sources {/abs/a.v ...} streams_declared 1
         aclk_busif {s0_axis m0_axis s1_axis m1_axis} aclk_reset aresetn}
    }
    set DMAS {
        {name dma_0 cell overlay s_axis s0_axis s_axis_width 64 m_axis m0_axis
         m_axis_width 32 hp_mm2s 0 hp_s2mm 0 hp_sg 0}
        {name dma_1 cell overlay s_axis s1_axis ... hp_mm2s 1 hp_s2mm 1 hp_sg 1}
    }
    set ENGINE_SOURCES {/abs/a.v /abs/b.v}

ENGINES has one Tcl dict per module-reference cell, DMAS one per AXI DMA (one DMA per
s_axis/m_axis pair of a cell), ENGINE_SOURCES every source once, in compile order (a shared
rtl/ file that several designs copy is listed once).

Stream widths are never guessed. A design whose manifest has ``streams`` (the PL top
``overlay``, docs/overlay.md) names its stream pairs, their widths and their HP port
there; a single engine without ``streams`` has one pair, ``s_axis``/``m_axis``. Either way the
widths are checked against the port declarations of the generated top module, so that the DMA
is configured for the width the Verilog has. A design with ``streams`` is the whole PL: it is
built alone, and its ``aclk`` must carry ``X_INTERFACE_PARAMETER`` with ``ASSOCIATED_BUSIF``
naming every stream interface and ``ASSOCIATED_RESET aresetn``.

A design is ``DESIGN`` or ``DESIGN:NAME=VALUE[:NAME=VALUE...]`` (generator parameters), e.g.
``ternary-engine:max_k=1024``, separated by commas or spaces. Two different configurations of
the same design would define the same Verilog module twice in one Vivado project, so that is
refused.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

REPO_DIR = Path(__file__).resolve().parent.parent

DEFAULT_ENGINES = ("overlay",)  # the PL top (docs/overlay.md)
HP_PORTS = (0, 1)  # S_AXI_HP0 and S_AXI_HP1 of the PS7
AXIS_WIDTHS = (8, 16, 32, 64, 128, 256, 512, 1024)  # what AXI DMA accepts on its streams

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*\Z")
_DESIGN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")

EngineSpec = Union[str, Tuple[str, Dict[str, Any]]]
RenderFn = Callable[[str, Dict[str, Any], str], Dict[str, Any]]


class EngineError(ValueError):
    """A bad engine list or a manifest that the Vivado flow cannot use."""


# ------------------------------------------------------------------------------------------
# Engine list
# ------------------------------------------------------------------------------------------
def parse_engine(spec: str) -> Tuple[str, Dict[str, str]]:
    """``ternary-engine:max_k=1024`` -> ("ternary-engine", {"max_k": "1024"})."""
    parts = spec.strip().split(":")
    design = parts[0].strip()
    if not _DESIGN.match(design):
        raise EngineError(f"bad engine name {spec!r}")
    params: Dict[str, str] = {}
    for item in parts[1:]:
        name, eq, value = item.partition("=")
        name = name.strip()
        if not eq or not _IDENT.match(name):
            raise EngineError(f"engine {spec!r}: parameter {item!r} is not NAME=VALUE")
        params[name] = value.strip()
    return design, params


def parse_engine_list(words: Iterable[str]) -> List[Tuple[str, Dict[str, str]]]:
    """Words separated by commas and/or spaces, e.g. ["ternary-engine,ternary-engine"]."""
    specs = []
    for word in words:
        for piece in re.split(r"[,\s]+", word):
            if piece:
                specs.append(parse_engine(piece))
    if not specs:
        raise EngineError("no engines given")
    return specs


def _normalise(spec: EngineSpec) -> Tuple[str, Dict[str, Any]]:
    if isinstance(spec, str):
        return parse_engine(spec)
    design, params = spec
    return design, dict(params or {})


# ------------------------------------------------------------------------------------------
# Rendering
# ------------------------------------------------------------------------------------------
def generator_render(design: str, params: Dict[str, Any], out_dir: str) -> Dict[str, Any]:
    """The project's generator: ``generators.render(design, params, out_dir)``."""
    if str(REPO_DIR) not in sys.path:
        sys.path.insert(0, str(REPO_DIR))
    import generators  # noqa: WPS433 (imported late so --help works without the package)

    return generators.render(design, params, out_dir)


def _slug(design: str, params: Dict[str, Any]) -> str:
    if not params:
        return design
    key = json.dumps(params, sort_keys=True, default=str).encode()
    return f"{design}-{hashlib.sha1(key).hexdigest()[:8]}"


_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_ATTR = re.compile(r"\(\*(.*?)\*\)", re.S)
_PORT = re.compile(
    r"((?:\(\*.*?\*\)\s*)*)\b(input|output|inout)\s+(?:wire\s+|reg\s+)?(?:signed\s+)?"
    r"(\[[^\]]*\]\s*)?([A-Za-z_][A-Za-z0-9_$]*)", re.S)
_RANGE = re.compile(r"\[\s*(\d+)\s*:\s*0\s*\]")


def top_ports(path: Path, top: str) -> Dict[str, Dict[str, Any]]:
    """The ports of module TOP in PATH: {name: {"dir", "width" (None if not literal), "attrs"}}.

    Reads the ANSI port list of the module header (what the generators write); "attrs" are
    the Verilog attributes on the port, e.g. {"X_INTERFACE_PARAMETER": "ASSOCIATED_BUSIF ..."}.
    """
    text = _COMMENT.sub(" ", path.read_text())
    m = re.search(r"\bmodule\s+" + re.escape(top) + r"\b", text)
    if not m:
        raise EngineError(f"module {top} not found in {path}")
    rest = text[m.end():]
    if rest.lstrip().startswith("#"):  # skip the parameter list #( ... )
        depth, i = 0, rest.index("(")
        for i in range(i, len(rest)):
            depth += {"(": 1, ")": -1}.get(rest[i], 0)
            if depth == 0:
                break
        rest = rest[i + 1:]
    header = rest[:rest.find(");") + 1] if ");" in rest else rest
    ports: Dict[str, Dict[str, Any]] = {}
    for pm in _PORT.finditer(header):
        attrs: Dict[str, str] = {}
        for am in _ATTR.finditer(pm.group(1) or ""):
            for item in re.finditer(r'(\w+)\s*=\s*"([^"]*)"', am.group(1)):
                attrs[item.group(1)] = item.group(2)
        rng = pm.group(3)
        if rng is None:
            width: Optional[int] = 1
        else:
            rm = _RANGE.fullmatch(rng.strip())
            width = int(rm.group(1)) + 1 if rm else None
        ports[pm.group(4)] = {"dir": pm.group(2), "width": width, "attrs": attrs}
    return ports


def interface_parameters(value: str) -> Dict[str, str]:
    """"ASSOCIATED_BUSIF a:b, ASSOCIATED_RESET aresetn" -> {"ASSOCIATED_BUSIF": "a:b", ...}."""
    out = {}
    for item in value.split(","):
        key, _, val = item.strip().partition(" ")
        if key:
            out[key] = val.strip()
    return out


def _port_width(ports: Dict[str, Dict[str, Any]], name: str, direction: str, design: str) -> int:
    port = ports.get(name)
    if port is None or port["dir"] != direction:
        raise EngineError(f"{design}: the top module has no {direction} port {name}")
    if port["width"] is None:
        raise EngineError(f"{design}: {name} has no literal [N:0] range; the DMA width cannot "
                          "be read from the Verilog")
    return port["width"]


def _check_axis_width(design: str, what: str, width: int) -> int:
    if width not in AXIS_WIDTHS:
        raise EngineError(
            f"{design}: {what} is {width} bit, not a width that AXI DMA supports "
            f"({', '.join(map(str, AXIS_WIDTHS))})")
    return width


def stream_pairs(manifest: Dict[str, Any], ports: Dict[str, Dict[str, Any]],
                 design: str) -> List[Dict[str, Any]]:
    """The s_axis/m_axis pairs of a design, one AXI DMA each, widths checked against ports.

    From the manifest's ``streams`` when it has them (each {"port", "s_axis", "s_axis_width",
    "m_axis", "m_axis_width"}); else the single pair s_axis/m_axis, with the widths of the
    top module's port declarations. Never from a ``bytes`` parameter.
    """
    declared = manifest.get("streams")
    if declared is None:
        specs = [{"port": None, "s_axis": "s_axis", "m_axis": "m_axis",
                  "s_axis_width": None, "m_axis_width": None}]
    else:
        if not isinstance(declared, list) or not declared:
            raise EngineError(f"{design}: manifest 'streams' must be a non-empty list")
        specs = []
        for st in declared:
            try:
                specs.append({k: st[k] for k in ("port", "s_axis", "s_axis_width", "m_axis",
                                                 "m_axis_width")})
            except (KeyError, TypeError) as exc:
                raise EngineError(f"{design}: stream {st!r} lacks {exc}") from None
    pairs = []
    seen_ports = set()
    for st in specs:
        for side in ("s_axis", "m_axis"):
            if not isinstance(st[side], str) or not _IDENT.match(st[side]):
                raise EngineError(f"{design}: stream interface {st[side]!r} is not a name")
        s_w = _port_width(ports, st["s_axis"] + "_tdata", "input", design)
        m_w = _port_width(ports, st["m_axis"] + "_tdata", "output", design)
        for side, width in (("s_axis", s_w), ("m_axis", m_w)):
            if st[f"{side}_width"] is not None and int(st[f"{side}_width"]) != width:
                raise EngineError(
                    f"{design}: manifest says {st[side]} is {st[side + '_width']} bit, the "
                    f"Verilog port {st[side]}_tdata is {width} bit")
            _check_axis_width(design, f"{st[side]}_tdata", width)
        port = st["port"]
        if port is not None:
            if port not in HP_PORTS or port in seen_ports:
                raise EngineError(f"{design}: stream port {port!r} is not one of the free HP "
                                  f"ports {HP_PORTS}")
            seen_ports.add(port)
        pairs.append({"port": port, "s_axis": st["s_axis"], "s_axis_width": s_w,
                      "m_axis": st["m_axis"], "m_axis_width": m_w})
    return pairs


def clock_association(ports: Dict[str, Dict[str, Any]]) -> Tuple[List[str], str]:
    """ASSOCIATED_BUSIF (as a list) and ASSOCIATED_RESET of the top's aclk, or ([], "")."""
    aclk = ports.get("aclk")
    if aclk is None:
        return [], ""
    params = interface_parameters(aclk["attrs"].get("X_INTERFACE_PARAMETER", ""))
    busif = [b for b in params.get("ASSOCIATED_BUSIF", "").split(":") if b]
    return busif, params.get("ASSOCIATED_RESET", "")


def _top_file(sources: List[Path], top: str, design: str) -> Path:
    pattern = re.compile(r"\bmodule\s+" + re.escape(top) + r"\b")
    for src in sources:
        if pattern.search(_COMMENT.sub(" ", src.read_text())):
            return src
    raise EngineError(f"{design}: no source defines the top module {top}")


def _check_manifest(manifest: Dict[str, Any], out_dir: Path, design: str) -> List[Path]:
    for key in ("top", "sources"):
        if key not in manifest:
            raise EngineError(f"{design}: manifest has no {key!r}")
    top = manifest["top"]
    if not isinstance(top, str) or not _IDENT.match(top):
        raise EngineError(f"{design}: top {top!r} is not a Verilog module name")
    sources = manifest["sources"]
    if not sources:
        raise EngineError(f"{design}: manifest lists no sources")
    paths = []
    for src in sources:
        path = Path(src)
        if not path.is_absolute():
            path = out_dir / path
        path = path.resolve()
        if not path.is_file():
            raise EngineError(f"{design}: source {src} listed in the manifest is missing ({path})")
        paths.append(path)
    return paths


def render_engines(engine_list: Sequence[EngineSpec], out_dir: Union[str, Path],
                   render: Optional[RenderFn] = None) -> List[Dict[str, Any]]:
    """Render every distinct engine once; return one record per engine instance."""
    render = render or generator_render
    out_dir = Path(out_dir).resolve()
    specs = [_normalise(s) for s in engine_list]
    if not specs:
        raise EngineError("no engines given")

    rendered: Dict[str, Dict[str, Any]] = {}  # slug -> record
    tops: Dict[str, str] = {}  # top module -> slug
    engines = []
    for index, (design, params) in enumerate(specs):
        slug = _slug(design, params)
        if slug not in rendered:
            gen_dir = out_dir / slug
            manifest = render(design, dict(params), str(gen_dir))
            if not isinstance(manifest, dict):
                raise EngineError(f"{design}: the generator returned {type(manifest).__name__}, "
                                  "not a manifest dict")
            sources = _check_manifest(manifest, gen_dir, design)
            top = manifest["top"]
            if top in tops and tops[top] != slug:
                raise EngineError(
                    f"two configurations define Verilog module {top!r} ({tops[top]} and {slug}); "
                    "one Vivado project can hold only one of them")
            tops[top] = slug
            ports = top_ports(_top_file(sources, top, design), top)
            for name in ("aclk", "aresetn"):
                if name not in ports or ports[name]["dir"] != "input":
                    raise EngineError(f"{design}: the top module has no input {name}")
            pairs = stream_pairs(manifest, ports, design)
            busif, reset = clock_association(ports)
            declared = manifest.get("streams") is not None
            if declared:
                missing = [i for p in pairs for i in (p["s_axis"], p["m_axis"])
                           if i not in busif]
                if missing or reset != "aresetn":
                    raise EngineError(
                        f"{design}: aclk must carry X_INTERFACE_PARAMETER \"ASSOCIATED_BUSIF "
                        f"{':'.join(i for p in pairs for i in (p['s_axis'], p['m_axis']))}, "
                        f"ASSOCIATED_RESET aresetn\" (found ASSOCIATED_BUSIF "
                        f"{':'.join(busif) or 'none'}, ASSOCIATED_RESET {reset or 'none'})")
            rendered[slug] = {
                "design": manifest.get("design", design),
                "top": top,
                "dir": gen_dir,
                "sources": sources,
                "parameters": manifest.get("parameters", params),
                "latency": manifest.get("latency"),
                "streams": pairs,
                "streams_declared": declared,
                "aclk_busif": busif,
                "aclk_reset": reset,
            }
        engines.append(dict(rendered[slug], name=f"engine_{index}"))
    if any(e["streams_declared"] for e in engines):
        if len(engines) != 1:
            raise EngineError("a design with manifest 'streams' (the PL top) is the whole PL "
                              "and is built alone, not with other engines")
        engines[0]["name"] = engines[0]["design"].replace("-", "_").replace(".", "_")
    return engines


def assign_dmas(engines: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """One AXI DMA per stream pair: dma_<i>, with the HP port of each of its masters.

    A pair with a declared port uses that HP port for both channels (the PL top: dma_p on
    HP p). Otherwise DMA i uses HP (i mod 2); a lone DMA reads through HP0 and writes
    through HP1. The scatter-gather master (descriptors) uses the MM2S channel's port.
    """
    pairs = [(e, p) for e in engines for p in e["streams"]]
    dmas = []
    for i, (e, p) in enumerate(pairs):
        if p["port"] is not None:
            hp_mm2s = hp_s2mm = p["port"]
        elif len(pairs) == 1:
            hp_mm2s, hp_s2mm = 0, 1
        else:
            hp_mm2s = hp_s2mm = i % 2
        dmas.append({"name": f"dma_{i}", "cell": e["name"], "s_axis": p["s_axis"],
                     "s_axis_width": p["s_axis_width"], "m_axis": p["m_axis"],
                     "m_axis_width": p["m_axis_width"], "hp_mm2s": hp_mm2s,
                     "hp_s2mm": hp_s2mm, "hp_sg": hp_mm2s})
    return dmas


# ------------------------------------------------------------------------------------------
# Tcl output
# ------------------------------------------------------------------------------------------
_TCL_BARE = re.compile(r"[A-Za-z0-9_./:+=,@%-]+\Z")


def tcl_word(value: Any) -> str:
    """Quote one value as a single Tcl word."""
    s = str(value)
    if _TCL_BARE.match(s):
        return s
    if not re.search(r"[{}\\\n]", s):
        return "{" + s + "}"
    return "".join("\\" + c if c in '{}[]$"\\; \t' else ("\\n" if c == "\n" else c) for c in s)


def tcl_list(values: Iterable[Any]) -> str:
    return "{" + " ".join(tcl_word(v) for v in values) + "}"


def unique_sources(engines: Sequence[Dict[str, Any]]) -> List[Path]:
    """Every source once, in compile order, for one Vivado project.

    Designs each carry copies of the shared rtl/ files (sync_fifo.v, ...): a file whose name
    was already added with the same content is skipped; the same name with different content
    would define one module twice, and is refused.
    """
    by_name: Dict[str, Path] = {}
    out: List[Path] = []
    for e in engines:
        for src in e["sources"]:
            src = Path(src)
            first = by_name.get(src.name)
            if first is None:
                by_name[src.name] = src
                out.append(src)
            elif first != src and first.read_bytes() != src.read_bytes():
                raise EngineError(
                    f"{src.name} differs between {first.parent} and {src.parent}: "
                    "one Vivado project cannot hold both")
    return out


def engines_tcl_text(engines: Sequence[Dict[str, Any]], spec_text: str = "") -> str:
    lines = [
        "# Generated by vivado/engines.py: the cells and DMAs of the overlay, for build.tcl.",
        "# DO NOT EDIT: `make bitstream` (or vivado/engines.py) rewrites it.",
    ]
    if spec_text:
        lines.append(f"# Engines: {spec_text}")
    for e in engines:
        params = ", ".join(f"{k}={v}" for k, v in (e["parameters"] or {}).items())
        lines.append(f"#   {e['name']}: {e['design']} ({params or 'defaults'}), "
                     f"latency {e['latency']} cycles")
        for p in e["streams"]:
            lines.append(f"#     {p['s_axis']} {p['s_axis_width']} bit in, "
                         f"{p['m_axis']} {p['m_axis_width']} bit out")
    lines.append("set ENGINES {")
    for e in engines:
        fields = [
            ("name", tcl_word(e["name"])),
            ("design", tcl_word(e["design"])),
            ("top", tcl_word(e["top"])),
            ("latency", tcl_word(e["latency"] if e["latency"] is not None else "")),
            ("dir", tcl_word(e["dir"])),
            ("sources", tcl_list(e["sources"])),
            ("streams_declared", "1" if e["streams_declared"] else "0"),
            ("aclk_busif", tcl_list(e["aclk_busif"])),
            ("aclk_reset", tcl_word(e["aclk_reset"]) if e["aclk_reset"] else "{}"),
        ]
        lines.append("    {" + " ".join(f"{k} {v}" for k, v in fields) + "}")
    lines.append("}")
    lines.append("set DMAS {")
    for d in assign_dmas(engines):
        lines.append("    {" + " ".join(f"{k} {tcl_word(d[k])}" for k in (
            "name", "cell", "s_axis", "s_axis_width", "m_axis", "m_axis_width", "hp_mm2s",
            "hp_s2mm", "hp_sg")) + "}")
    lines.append("}")
    all_sources = unique_sources(engines)
    lines.append("set ENGINE_SOURCES {")
    for src in all_sources:
        lines.append(f"    {tcl_word(src)}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def default_tcl_path(out_dir: Union[str, Path]) -> Path:
    """``build/vivado/engines`` -> ``build/vivado/engines.tcl``."""
    return Path(out_dir).resolve().parent / "engines.tcl"


def write_engines_tcl(engine_list: Sequence[EngineSpec], out_dir: Union[str, Path],
                      tcl_path: Union[str, Path, None] = None,
                      render: Optional[RenderFn] = None) -> Path:
    """Render the engines into out_dir and write engines.tcl; return its path.

    engine_list holds "DESIGN[:NAME=VALUE...]" strings or (design, params) pairs; render
    defaults to ``generators.render``.
    """
    engines = render_engines(engine_list, out_dir, render=render)
    path = Path(tcl_path) if tcl_path is not None else default_tcl_path(out_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    spec_text = " ".join(
        s if isinstance(s, str) else s[0] + "".join(f":{k}={v}" for k, v in s[1].items())
        for s in engine_list)
    path.write_text(engines_tcl_text(engines, spec_text))
    return path


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engines", nargs="+", default=None,
                    help="designs, comma- or space-separated, each DESIGN[:NAME=VALUE...] "
                         f"(default: {','.join(DEFAULT_ENGINES)}, the PL top)")
    ap.add_argument("--out", default="build/vivado/engines",
                    help="where the generated Verilog goes (default: %(default)s)")
    ap.add_argument("--tcl", default=None,
                    help="engine list to write (default: engines.tcl beside --out)")
    args = ap.parse_args(argv)
    try:
        specs = parse_engine_list(args.engines or [",".join(DEFAULT_ENGINES)])
        path = write_engines_tcl(specs, args.out, tcl_path=args.tcl)
    except Exception as exc:  # report any generator error as one clear line
        print(f"engines.py: error: {exc}", file=sys.stderr)
        return 1
    print(f"engines.py: {len(specs)} engine(s) -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
