#!/usr/bin/env python3
"""Render the engines that go into the overlay and write the engine list for vivado/build.tcl.

    .venv/bin/python vivado/engines.py --engines ternary-engine,ternary-engine \
        --out build/vivado/engines

renders each distinct engine once with ``generators.render`` into ``OUT/<design>`` and writes
``build/vivado/engines.tcl`` (beside OUT), which build.tcl sources:

    set ENGINES {
        {name engine_0 design ternary-engine top ternary_engine s_axis_width 64 m_axis_width 32
         latency 7 dir /abs/OUT/ternary-engine sources {/abs/a.v /abs/b.v}}
        ...
    }
    set ENGINE_SOURCES {/abs/a.v /abs/b.v}

Each entry is a Tcl dict; ENGINE_SOURCES is every source once, in compile order (a shared
rtl/ file that several designs copy is listed once).

An engine is ``DESIGN`` or ``DESIGN:NAME=VALUE[:NAME=VALUE...]`` (generator parameters), e.g.
``ternary-engine:max_k=1024``. Engines are separated by commas or spaces. Two different
configurations of the same design would define the same Verilog module twice in one Vivado
project, so that is refused.
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

DEFAULT_ENGINES = ("ternary-engine", "ternary-engine")
DEFAULT_S_AXIS_WIDTH = 64  # DESIGN.md section 3: s_axis_tdata[63:0]
DEFAULT_M_AXIS_WIDTH = 32  # m_axis_tdata[31:0]
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


def _stream_width(manifest: Dict[str, Any], key: str, default: int, what: str) -> int:
    params = manifest.get("parameters") or {}
    if key in manifest:
        width = manifest[key]
    elif key == "s_axis_width" and "bytes" in params:
        width = 8 * int(params["bytes"])  # the ternary engine's beat width follows `bytes`
    else:
        width = default
    width = int(width)
    if width not in AXIS_WIDTHS:
        raise EngineError(
            f"{manifest.get('design', '?')}: {what} width {width} bit is not one that AXI DMA "
            f"supports ({', '.join(map(str, AXIS_WIDTHS))})")
    return width


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
            rendered[slug] = {
                "design": manifest.get("design", design),
                "top": top,
                "dir": gen_dir,
                "sources": sources,
                "parameters": manifest.get("parameters", params),
                "latency": manifest.get("latency"),
                "s_axis_width": _stream_width(manifest, "s_axis_width",
                                              DEFAULT_S_AXIS_WIDTH, "input stream"),
                "m_axis_width": _stream_width(manifest, "m_axis_width",
                                              DEFAULT_M_AXIS_WIDTH, "output stream"),
            }
        engines.append(dict(rendered[slug], name=f"engine_{index}"))
    return engines


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
        "# Generated by vivado/engines.py: the engines of the overlay, for vivado/build.tcl.",
        "# DO NOT EDIT: `make bitstream` (or vivado/engines.py) rewrites it.",
    ]
    if spec_text:
        lines.append(f"# Engines: {spec_text}")
    for e in engines:
        params = ", ".join(f"{k}={v}" for k, v in (e["parameters"] or {}).items())
        lines.append(f"#   {e['name']}: {e['design']} ({params or 'defaults'}), "
                     f"latency {e['latency']} cycles")
    lines.append("set ENGINES {")
    for e in engines:
        fields = [
            ("name", tcl_word(e["name"])),
            ("design", tcl_word(e["design"])),
            ("top", tcl_word(e["top"])),
            ("s_axis_width", str(e["s_axis_width"])),
            ("m_axis_width", str(e["m_axis_width"])),
            ("latency", tcl_word(e["latency"] if e["latency"] is not None else "")),
            ("dir", tcl_word(e["dir"])),
            ("sources", tcl_list(e["sources"])),
        ]
        lines.append("    {" + " ".join(f"{k} {v}" for k, v in fields) + "}")
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
                    help="engines, comma- or space-separated, each DESIGN[:NAME=VALUE...] "
                         f"(default: {','.join(DEFAULT_ENGINES)}, the write-up's Stage 4)")
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
