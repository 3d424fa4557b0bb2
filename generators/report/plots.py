"""The write-up's figures redrawn from data (matplotlib, Agg backend, PNG files).

* :func:`plot_figure1`: GB/s moved from DDR and G weights/s extracted, per stage.
* :func:`plot_figure5`: LUT and DSP use per design against the chip's totals.
* :func:`plot_figure6`: time per token by part against context, one panel per series
  (e.g. attention on the CPU, attention on the PL), from :func:`decoder_table` rows.

Every function takes plain dicts / lists of dicts, writes ``path`` and returns it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

__all__ = ["CHIP", "WRITEUP_STAGES", "WRITEUP_DESIGNS", "plot_figure1", "plot_figure5",
           "plot_figure6"]

#: Zynq-7020 totals
CHIP = {"LUT": 53200, "FF": 106400, "BRAM": 140, "DSP": 220}

#: Figure 1 of the write-up (measured on the board)
WRITEUP_STAGES = [
    {"name": "Stage 2 · no compute", "gb_s": 1.97, "gweights_s": None},
    {"name": "Stage 3 · INT8", "gb_s": 1.91, "gweights_s": 1.91},
    {"name": "Stage 4 · ternary", "gb_s": 1.83, "gweights_s": 9.16},
]

#: Figure 5 of the write-up (Vivado, whole design with DMA)
WRITEUP_DESIGNS = [
    {"name": "Stage 3 INT8", "LUT": 8175, "DSP": 20, "gweights_s": 1.91},
    {"name": "Stage 4 ternary", "LUT": 9557, "DSP": 0, "gweights_s": 9.16},
]

_PART_COLORS = {"matmul": "#3a9a4a", "attention": "#d9822b", "host": "#8a8f98"}


def _save(fig, path) -> str:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(p, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return str(p)


def plot_figure1(stages: Sequence[Mapping] = WRITEUP_STAGES, path: str | os.PathLike = "figure1.png",
                 wall_gb_s: float = 1.97, title: str | None = None) -> str:
    """GB/s moved (top) and G weights/s extracted (bottom) per stage.

    ``stages``: dicts with ``name``, ``gb_s`` and ``gweights_s`` (None: the stage
    computes nothing and gets no bar in the bottom panel).
    """
    stages = list(stages)
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(7, 5.2))
    names = [s["name"] for s in stages]
    gb = [float(s["gb_s"]) for s in stages]
    y = range(len(stages))
    ax1.barh(list(y), gb, color="#5b7db1")
    ax1.axvline(wall_gb_s, color="#b03030", ls="--", lw=1.2)
    ax1.text(wall_gb_s, -0.7, f" wall {wall_gb_s:.2f}", color="#b03030", va="center",
             fontsize=8)
    for i, v in enumerate(gb):
        ax1.text(v, i, f" {v:.2f}", va="center", fontsize=8)
    ax1.set_yticks(list(y), names)
    ax1.invert_yaxis()
    ax1.set_xlim(0, max(gb + [wall_gb_s]) * 1.25)
    ax1.set_xlabel("bytes moved from DDR (GB/s)")

    comp = [s for s in stages if s.get("gweights_s") is not None]
    gw = [float(s["gweights_s"]) for s in comp]
    y2 = range(len(comp))
    ax2.barh(list(y2), gw, color="#3a9a4a")
    for i, v in enumerate(gw):
        ax2.text(v, i, f" {v:.2f}", va="center", fontsize=8)
    ax2.set_yticks(list(y2), [s["name"] for s in comp])
    ax2.invert_yaxis()
    if gw:
        ax2.set_xlim(0, max(gw) * 1.25)
        if len(gw) >= 2 and min(gw) > 0:
            ax2.set_title(f"{max(gw) / min(gw):.1f}x more weights from the same bytes",
                          fontsize=9)
    ax2.set_xlabel("weights extracted (G weights/s)")
    fig.suptitle(title or "Figure 1: bytes moved vs weights extracted")
    fig.tight_layout()
    return _save(fig, path)


def plot_figure5(designs: Sequence[Mapping] = WRITEUP_DESIGNS,
                 path: str | os.PathLike = "figure5.png",
                 chip: Mapping[str, int] = CHIP, title: str | None = None) -> str:
    """LUT and DSP use of each design against the chip's totals.

    ``designs``: dicts with ``name``, ``LUT`` and ``DSP`` (``DSP48E1`` accepted too);
    ``chip``: totals, default Zynq-7020 (53,200 LUT, 220 DSP).
    """
    designs = list(designs)
    names = [d["name"] for d in designs]
    luts = [float(d.get("LUT", 0)) for d in designs]
    dsps = [float(d.get("DSP", d.get("DSP48E1", 0))) for d in designs]
    fig, axes = plt.subplots(1, 2, figsize=(9, 0.6 * len(designs) + 2.2))
    for ax, vals, total, label, color in (
            (axes[0], luts, chip["LUT"], "LUT", "#5b7db1"),
            (axes[1], dsps, chip["DSP"], "DSP48E1", "#d9822b")):
        y = list(range(len(designs)))
        ax.barh(y, [total] * len(designs), color="#e6e6e6")
        ax.barh(y, vals, color=color)
        for i, v in enumerate(vals):
            txt = f" {v:,.0f} ({100 * v / total:.0f}%)" if v else " 0 (none used)"
            ax.text(v, i, txt, va="center", fontsize=8)
        ax.set_yticks(y, names if ax is axes[0] else [""] * len(names))
        ax.invert_yaxis()
        ax.set_xlim(0, total * 1.05)
        ax.set_xlabel(f"{label} ({total:,} on the chip)")
    fig.suptitle(title or "Figure 5: resources per design vs the Zynq-7020")
    fig.tight_layout()
    return _save(fig, path)


def plot_figure6(series: Mapping[str, Sequence[Mapping]], path: str | os.PathLike = "figure6.png",
                 normalize: bool = False, title: str | None = None,
                 label_bound: bool = True) -> str:
    """Time per token by part against context, one panel per series.

    ``series``: ``{label: rows}``, rows as returned by :func:`decoder_table` (keys
    ``context``, ``matmul_ms``, ``attention_ms``, ``host_ms``, ``tok_s``), e.g.
    ``{"attention on the CPU": cpu_rows, "attention on the PL": pl_rows}``.
    ``normalize``: bars as shares of 100 % (the write-up's layout) instead of ms.
    ``label_bound``: mark each row's ``bound_ms`` (DDR wall + host) when present.
    """
    items = list(series.items())
    if not items:
        raise ValueError("plot_figure6 needs at least one series")
    n = len(items)
    height = max(len(r) for _, r in items) * 0.45 + 1.6
    fig, axes = plt.subplots(n, 1, figsize=(9, height * n), squeeze=False)
    parts = (("matmul", "matmul_ms"), ("attention", "attention_ms"),
             ("host", "host_ms"))
    for ax, (label, rows) in zip(axes[:, 0], items):
        rows = list(rows)
        y = list(range(len(rows)))
        left = [0.0] * len(rows)
        for part, key in parts:
            vals = []
            for r in rows:
                v = float(r.get(key, 0.0))
                if normalize:
                    tot = sum(float(r.get(k, 0.0)) for _, k in parts)
                    v = 100.0 * v / tot if tot else 0.0
                vals.append(v)
            ax.barh(y, vals, left=left, color=_PART_COLORS[part], label=part.replace("_", " "))
            left = [a + b for a, b in zip(left, vals)]
        if not normalize and all("bound_ms" in r for r in rows) and label_bound:
            ax.scatter([float(r["bound_ms"]) for r in rows], y, marker="|", s=300,
                       color="black", zorder=3, label="DDR-wall bound")
        for i, r in enumerate(rows):
            ax.text(left[i], i, f"  {r['tok_s']:.1f} tok/s", va="center", fontsize=8)
        ax.set_yticks(y, [f"context {r['context']}" for r in rows])
        ax.invert_yaxis()
        ax.set_xlim(0, max(left) * 1.22 if left else 1)
        ax.set_xlabel("share of time per token (%)" if normalize else "time per token (ms)")
        ax.set_title(label, fontsize=10)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    fig.suptitle(title or "Figure 6: time per token by part")
    fig.tight_layout()
    return _save(fig, path)
