"""Generator core: validated parameters, Jinja2 rendering with StrictUndefined, stamps, manifests.

A design is a subclass of :class:`Design` that declares its parameters as :class:`Param`
objects, checks cross-parameter rules in :meth:`Design.check`, computes its latency once in
:meth:`Design.latency`, and lists what it writes in :meth:`Design.files`. Everything is
validated before a single file is written.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import jinja2

from .version import __version__

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_DIR = PACKAGE_DIR.parent
TEMPLATE_DIR = PACKAGE_DIR / "templates"


def _rtl_dir() -> Path:
    """The hand-written Verilog: generators/rtl/ in an installed copy (the wheel ships the
    repository's rtl/ there, pyproject.toml), else the repository's top-level rtl/ (a checkout,
    an editable install)."""
    installed = PACKAGE_DIR / "rtl"
    return installed if installed.is_dir() else REPO_DIR / "rtl"


RTL_DIR = _rtl_dir()
GENERATOR_NAME = "generators (ternary-pynq)"


class ParameterError(ValueError):
    """An invalid generator parameter. Raised before any file is written."""



def parse_assignments(items: Optional[Sequence[str]], what: str = "--set") -> Dict[str, str]:
    """``NAME=VALUE`` items (an item may hold several, blank-separated: make's PARAMS="a=1 b=2")
    -> {name: value as a string}; '-' in a name becomes '_'. ParameterError on a malformed item.
    The one parser of --set (render), PARAMS (make sim, make formal) and attention_error's --set."""
    values: Dict[str, str] = {}
    for item in items or []:
        for tok in str(item).split():
            if "=" not in tok:
                raise ParameterError(f"{what} {tok!r}: expected NAME=VALUE")
            k, v = tok.split("=", 1)
            k = k.strip().replace("-", "_")
            if not k:
                raise ParameterError(f"{what} {tok!r}: empty parameter name")
            values[k] = v
    return values

@dataclass(frozen=True)
class Param:
    """One generator parameter: a type, a default, a legal range and a description."""

    name: str
    kind: type
    default: Any
    doc: str
    min: Optional[int] = None
    max: Optional[int] = None
    choices: Optional[Sequence[Any]] = None
    power_of_two: bool = False

    def legal(self) -> str:
        """The legal range as text, for `list` and for error messages."""
        if self.choices is not None:
            return "one of " + ", ".join(str(c) for c in self.choices)
        if self.kind is bool:
            return "true or false"
        parts = []
        if self.min is not None and self.max is not None:
            parts.append(f"{self.min}..{self.max}")
        elif self.min is not None:
            parts.append(f">= {self.min}")
        elif self.max is not None:
            parts.append(f"<= {self.max}")
        if self.power_of_two:
            parts.append("a power of two")
        return ", ".join(parts) or "any"

    def convert(self, value: Any) -> Any:
        """Turn a CLI string or Python value into this parameter's type, or raise ParameterError."""
        v = value
        if self.kind is bool:
            if isinstance(v, str):
                low = v.strip().lower()
                if low in ("1", "true", "yes", "on"):
                    v = True
                elif low in ("0", "false", "no", "off"):
                    v = False
                else:
                    raise ParameterError(f"parameter {self.name}: {value!r} is not a boolean (use true or false)")
            elif not isinstance(v, bool):
                raise ParameterError(f"parameter {self.name}: {value!r} is not a boolean")
        elif self.kind is int:
            if isinstance(v, bool):
                raise ParameterError(f"parameter {self.name}: {value!r} is not an integer")
            if isinstance(v, str):
                try:
                    v = int(v.strip(), 0)
                except ValueError:
                    raise ParameterError(f"parameter {self.name}: {value!r} is not an integer") from None
            elif not isinstance(v, int):
                raise ParameterError(f"parameter {self.name}: {value!r} is not an integer")
        elif self.kind is str:
            v = str(v)
        if self.choices is not None and v not in self.choices:
            raise ParameterError(f"parameter {self.name}={value!r}: must be {self.legal()}")
        if self.kind is int:
            if (self.min is not None and v < self.min) or (self.max is not None and v > self.max):
                raise ParameterError(f"parameter {self.name}={v}: out of range, legal is {self.legal()}")
            if self.power_of_two and (v <= 0 or v & (v - 1)):
                raise ParameterError(f"parameter {self.name}={v}: must be {self.legal()}")
        return v


class Design:
    """Base class of every generated design."""

    name: str = ""
    top: str = ""
    summary: str = ""
    params: Tuple[Param, ...] = ()

    def __init__(self, values: Optional[Dict[str, Any]] = None):
        values = dict(values or {})
        known = {p.name: p for p in self.params}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ParameterError(
                f"design {self.name}: unknown parameter(s) {', '.join(unknown)}; "
                f"known: {', '.join(known)}"
            )
        self.p: Dict[str, Any] = {}
        for name, prm in known.items():
            self.p[name] = prm.convert(values[name]) if name in values else prm.default
        self.check()

    # -- hooks for subclasses ---------------------------------------------------------------
    def check(self) -> None:
        """Cross-parameter rules; raise ParameterError."""

    def latency(self) -> int:
        """Cycles from an accepted beat to its result entering the output FIFO."""
        raise NotImplementedError

    def context(self) -> Dict[str, Any]:
        """Extra template variables."""
        return {}

    def templates(self) -> List[Tuple[str, str]]:
        """(template name, output file name) pairs, in compile order after the rtl/ files."""
        return []

    def rtl_files(self) -> List[str]:
        """Hand-written files from rtl/ this design needs, in compile order."""
        return []

    def extra_manifest(self) -> Dict[str, Any]:
        return {}

    # -- rendering ---------------------------------------------------------------------------
    def stamp(self, comment: str = "//") -> str:
        lines = [
            f"Generated by {GENERATOR_NAME} {__version__}: design '{self.name}'.",
            "Parameters: " + ", ".join(f"{k}={v}" for k, v in self.p.items()),
            f"Latency: {self.latency()} cycles (computed once in Python).",
            "DO NOT EDIT: regenerate with `python -m generators render "
            + self.name + "` instead.",
        ]
        return "\n".join(f"{comment} {line}" for line in lines) + "\n"

    def render_texts(self) -> Dict[str, str]:
        """Render every generated file in memory (nothing touches the disk)."""
        env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
            undefined=jinja2.StrictUndefined,
            keep_trailing_newline=True,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        ctx = dict(self.p)
        ctx.update(self.context())
        ctx["latency"] = self.latency()
        ctx["stamp"] = self.stamp()
        out = {}
        for tname, fname in self.templates():
            out[fname] = env.get_template(tname).render(**ctx)
        return out

    def manifest(self, sources: List[str]) -> Dict[str, Any]:
        m = {
            "design": self.name,
            "top": self.top,
            "sources": sources,
            "parameters": dict(self.p),
            "latency": self.latency(),
            "generator": GENERATOR_NAME,
            "version": __version__,
        }
        m.update(self.extra_manifest())
        return m

    def write(self, out_dir) -> Dict[str, Any]:
        """Render everything first, then write the files and manifest.json into out_dir."""
        texts = self.render_texts()  # may raise: nothing written yet
        rtl = [RTL_DIR / f for f in self.rtl_files()]
        missing = [str(f) for f in rtl if not f.is_file()]
        if missing:
            raise FileNotFoundError(f"hand-written sources missing: {', '.join(missing)}")
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        sources = []
        for f in rtl:
            shutil.copyfile(f, out / f.name)
            sources.append(f.name)
        for fname, text in texts.items():
            (out / fname).write_text(text)
            sources.append(fname)
        man = self.manifest(sources)
        (out / "manifest.json").write_text(json.dumps(man, indent=2) + "\n")
        return man


_REGISTRY: Dict[str, type] = {}


def register(cls):
    """Class decorator adding a Design to the registry."""
    _REGISTRY[cls.name] = cls
    return cls


def designs() -> Dict[str, type]:
    """Every registered design by name (the package's ``__init__`` imports generators.designs,
    whose modules register themselves, before any module of the package runs)."""
    return dict(_REGISTRY)


def get_design(name: str) -> type:
    reg = designs()
    if name not in reg:
        raise ParameterError(f"unknown design {name!r}; known designs: {', '.join(sorted(reg))}")
    return reg[name]


def build(name: str, params: Optional[Dict[str, Any]] = None) -> Design:
    """Validate parameters and return the design object (no files written)."""
    return get_design(name)(params)


def render(name: str, params: Optional[Dict[str, Any]] = None, out_dir=None) -> Dict[str, Any]:
    """Validate, render and write a design; return its manifest."""
    if out_dir is None:
        raise ParameterError("render needs an output directory")
    return build(name, params).write(out_dir)
