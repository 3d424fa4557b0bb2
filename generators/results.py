"""Every figure the project quotes, written by the make target that measured it.

    from generators.results import figure, record
    record("decode", [figure("decode.q4.tok_s", 19.1, "tok/s", "modelled",
                             "Q4_1 SmolLM2-135M at context 512: engine + DDR wall + host")])

Each target (`make sim`, `make report`, `make decode`, `make quality`, `make timing`,
`make host-bench`, `make image`) writes ``docs/results/<target>.json``: the command, the commit and the date
it ran at, and its figures, each with a key, a value, a unit and a label saying what kind of
figure it is:

* ``simulated``: counted in an RTL simulation (cycles, words, mismatches);
* ``synthesised (yosys)``: a yosys ``synth_xilinx`` estimate (LUT, FF, DSP, BRAM);
* ``modelled``: computed by a documented model (the DDR wall, the A9's speed, cell delays);
* ``measured``: measured on this machine (seconds, instructions, bytes, nats/token).

``make results`` (``python -m generators.results``) renders ``docs/results.md`` from those files
(``record`` renders it too, so it never lags behind them).
The README and ``docs/`` quote a figure as ``VALUE UNIT ([LABEL](results.md#KEY))``
(``docs/results.md#KEY`` from the README); ``tests/generators/test_results.py`` fails when a quote's value
or label is not the one in ``docs/results.md``, or when the README has a bare figure.
"""
from __future__ import annotations

import datetime as _dt
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Sequence

__all__ = ["LABELS", "TARGETS", "figure", "record", "load", "render", "display", "QUOTE_RE",
           "quotes", "check_quotes", "bare_figures", "RESULTS_DIR", "RESULTS_MD"]

LABELS = ("simulated", "synthesised (yosys)", "modelled", "measured")
#: the targets that write figures, in the order docs/results.md shows them
TARGETS = ("sim", "report", "timing", "timing-calibration", "formal", "decode", "host-bench", "a9-model", "a9-core-check", "image",
           "quality", "answers", "answers-experiment", "activation-blocks", "test")

_PKG = Path(__file__).resolve().parent
REPO = _PKG.parent
RESULTS_DIR = REPO / "docs" / "results"
RESULTS_MD = REPO / "docs" / "results.md"
_KEY_RE = re.compile(r"^[a-z0-9][a-z0-9_.\-]*$")


def display(value, unit: str = "") -> str:
    """How a figure is written wherever it is quoted: integers with thousands separators,
    floats as the target rounded them, then the unit."""
    if isinstance(value, bool):
        raise TypeError("a figure's value is a number or a string, not a bool")
    if isinstance(value, int):
        text = f"{value:,}"
    elif isinstance(value, float):
        text = repr(value) if value != int(value) or abs(value) < 1e15 else f"{value:g}"
        if text.endswith(".0") and abs(value) >= 1000:
            text = f"{int(value):,}"
    else:
        text = str(value)
    return f"{text} {unit}".strip() if unit and unit != "%" else (f"{text} %" if unit else text)


def figure(key: str, value, unit: str, label: str, what: str, **context) -> Dict:
    """One figure. ``value``: an int, a float already rounded to the digits it is quoted
    with, or a short string; ``context``: anything else worth keeping (parameters, counts)."""
    if not _KEY_RE.match(key):
        raise ValueError(f"figure key {key!r}: lower-case letters, digits, '.', '_' and '-' only")
    if label not in LABELS:
        raise ValueError(f"figure {key}: label {label!r} is not one of {LABELS}")
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        value = value.item()             # a numpy scalar: its Python number (repr is not one)
    if isinstance(value, float) and value != value:
        raise ValueError(f"figure {key}: value is NaN")
    f = {"key": key, "value": value, "unit": unit, "label": label, "what": what,
         "text": display(value, unit)}
    if context:
        f["context"] = context
    return f


def _git(*args: str, cwd: Optional[Path] = None) -> str:
    try:
        return subprocess.run(["git", *args], cwd=cwd or REPO, capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def sources_dirty(repo: Optional[Path] = None) -> bool:
    """Whether the checkout's tracked files differ from its commit ("-dirty" in a record).
    The recorded figures themselves (docs/results/, docs/results.md: what the targets write)
    do not count, so a chain of targets in one checkout records the commit it ran."""
    out = _git("status", "--porcelain", "--untracked-files=no", "--", ".",
               ":(exclude)docs/results", ":(exclude)docs/results.md",
               cwd=repo or REPO)
    return bool(out)


def record(target: str, figures: Sequence[Mapping], command: Optional[str] = None,
           out_dir: Optional[Path] = None, note: str = "", variant: str = "") -> Path:
    """Write ``docs/results/<target>.json`` (``<target>-<variant>.json`` for a variant of the
    target, e.g. ``make sim SIM=icarus``), replacing that file's earlier figures.

    Refuses duplicate keys and keys that another file already holds, so that each figure
    has one source."""
    if target not in TARGETS:
        raise ValueError(f"target {target!r} is not one of {TARGETS}")
    if variant and not _KEY_RE.match(variant):
        raise ValueError(f"variant {variant!r}: lower-case letters, digits, '.', '_', '-'")
    name = f"{target}-{variant}" if variant else target
    keys = [f["key"] for f in figures]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise ValueError(f"{target}: figure keys given twice: {dup}")
    out_dir = Path(out_dir) if out_dir else RESULTS_DIR
    for other, data in load(out_dir).items():
        if other != name:
            clash = sorted(set(keys) & {f["key"] for f in data["figures"]})
            if clash:
                raise ValueError(f"{target}: keys {clash} are already written by "
                                 f"`make {other}`: one figure, one source")
    commit = _git("rev-parse", "--short=10", "HEAD") or "unknown"
    if sources_dirty():
        commit += "-dirty"
    data = {"target": target, "variant": variant, "command": command or f"make {target}",
            "commit": commit,
            "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "note": note, "figures": [dict(f) for f in figures]}
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.json"
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    if out_dir == RESULTS_DIR:
        render(RESULTS_MD)          # docs/results.md follows its files at once
    return path


def load(out_dir: Optional[Path] = None) -> Dict[str, Dict]:
    """Every results file, by its name (the target, or target-variant)."""
    d = Path(out_dir) if out_dir else RESULTS_DIR
    out = {}
    for p in sorted(d.glob("*.json")) if d.exists() else []:
        out[p.stem] = json.loads(p.read_text())
    return out


def _cell(s: str) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def render(out: Optional[Path] = None, out_dir: Optional[Path] = None) -> str:
    """docs/results.md from every target's file; returns the text (written to ``out``)."""
    data = load(out_dir)
    lines = ["# Results", "",
             "Written by `make results` from `docs/results/*.json`; each file is written by the",
             "`make` target named in its section, which anyone can rerun. Labels: **simulated**",
             "(counted in an RTL simulation), **synthesised (yosys)** (a yosys `synth_xilinx`",
             "estimate), **modelled** (a documented model), **measured** (on the machine named).",
             "Do not edit by hand.", ""]
    rank = {t: i for i, t in enumerate(TARGETS)}
    order = sorted(data, key=lambda n: (rank.get(data[n]["target"], len(TARGETS)), n))
    for t in order:
        d = data[t]
        lines += [f"## {t}", "",
                  f"`{d['command']}` at commit `{d['commit']}`, {d['date']}."
                  + (f" {d['note']}" if d.get("note") else ""), "",
                  "| figure | value | label | key |", "|---|---:|---|---|"]
        for f in d["figures"]:
            lines.append(f"| {_cell(f['what'])} | {_cell(f['text'])} | {f['label']} | "
                         f"<a id=\"{f['key']}\"></a>`{f['key']}` |")
        lines.append("")
    text = "\n".join(lines)
    if out is not None:
        Path(out).write_text(text)
    return text


def figures_by_key(out_dir: Optional[Path] = None) -> Dict[str, Dict]:
    return {f["key"]: f for d in load(out_dir).values() for f in d["figures"]}


#: a quote: "VALUE UNIT ([LABEL](results.md#KEY))" (any relative path ending in results.md)
QUOTE_RE = re.compile(r"(?P<before>(?:^|[^\s(\[][^(\[]*?))\s*\(\[(?P<label>[^\]]+(?:\([^)]*\))?)\]"
                      r"\((?:[./\w-]*/)?results\.md#(?P<key>[a-z0-9][a-z0-9_.\-]*)\)\)")


def quotes(text: str) -> List[Dict]:
    """Every figure quote of a markdown text: the text before it, the label, the key, the line."""
    out, prev = [], ""
    for n, line in enumerate(text.splitlines(), 1):
        for m in QUOTE_RE.finditer(line):
            before = m.group("before")
            if not before.strip():        # the link opens the line: its figure ends the last
                before = prev.rstrip() + before
            out.append({"before": before, "label": m.group("label"),
                        "key": m.group("key"), "line": n})
        prev = line
    return out


def check_quotes(text: str, where: str, figs: Optional[Mapping[str, Mapping]] = None) -> List[str]:
    """Problems of the quotes in ``text``: unknown key, other label, other value."""
    figs = figures_by_key() if figs is None else figs
    bad = []
    for q in quotes(text):
        f = figs.get(q["key"])
        at = f"{where}:{q['line']}"
        if f is None:
            bad.append(f"{at}: quotes {q['key']!r}, which no target writes")
            continue
        if q["label"] != f["label"]:
            bad.append(f"{at}: {q['key']} is labelled {q['label']!r}, the results say "
                       f"{f['label']!r}")
        if not q["before"].rstrip().endswith(f["text"]):
            bad.append(f"{at}: {q['key']} is quoted as '...{q['before'][-40:]}', the results "
                       f"say '{f['text']}'")
    return bad


#: units whose numbers are figures (the README may not carry one without a quote link)
_UNITS = (r"tok/s|tokens/s|LUTs?|FFs?|DSP48E1|DSPs?|BRAM36|BRAMs?|ns|ms|µs|us|MB|GB/s|GB|KB|kB|"
          r"cycles|nats/token|M instructions|instructions|beats/s|MHz|min|s|%")
_LINK_RE = re.compile(r"\(\[[^\]]+(?:\([^)]*\))?\]\((?:[./\w-]*/)?results\.md#[a-z0-9][a-z0-9_.\-]*\)\)")
_BARE_RE = re.compile(r"(?<![\w.#/-])(\d[\d,]*(?:\.\d+)?)\s*(" + _UNITS + r")(?![\w/])")


def bare_figures(text: str, allow: Iterable[str] = ()) -> List[str]:
    """Numbers with a unit that are not part of a quote (nor in a code block, nor in
    ``allow``: facts of the contract such as '142.857 MHz' or '7.0 ns')."""
    allow = set(allow)
    out, in_code = [], False
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip().startswith("```"):
            in_code = not in_code
            continue
        if in_code or line.startswith("    "):
            continue
        stripped = _LINK_RE.sub("\x00", re.sub(r"`[^`]*`", " ", line))
        for m in _BARE_RE.finditer(stripped):
            if stripped[m.end():].lstrip().startswith("\x00"):
                continue                                   # the figure of a quote
            s = f"{m.group(1)} {m.group(2)}"
            if s not in allow and m.group(0) not in allow:
                out.append(f"line {n}: {m.group(0)!r}")
    return out


def main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(prog="python -m generators.results",
                                 description="render docs/results.md from docs/results/*.json")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 when docs/results.md is not what the files render")
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        have = RESULTS_MD.read_text() if RESULTS_MD.exists() else ""
        if have != text:
            print("docs/results.md is stale: run make results", file=sys.stderr)
            return 1
        return 0
    RESULTS_MD.write_text(text)
    n = sum(len(d["figures"]) for d in load().values())
    print(f"[results] {RESULTS_MD.relative_to(REPO)}: {n} figures from {len(load())} targets")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
