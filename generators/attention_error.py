"""Error of the attention engine's fixed-point arithmetic against float64 attention.

    python -m generators.attention_error [--trials N] [--seed S] [--markdown]
                                         [--set exp_depth=2048 --set exp_width=16 ...]

Every case is INT8 q (G, d), K and V (L, d) and a real score scale ``c`` (nats per unit of
integer score). The golden model (``generators.golden.attention``, bit-exact with the RTL)
runs on the header's (MULT, SHIFT) from :func:`score_multiplier`; the reference is float64
``softmax(c q K^T) V`` on the same INT8 values. Errors are in output LSBs of the head, where one
LSB is ``max_i |o_ref[g, i]| / 127`` (the step of an ideal BitNet absmax INT8 quantisation of
the float64 result):

* ``out``: the engine's dequantised result ``y * Z / (127 * 2**F)`` against ``o_ref``; an
  ideal quantiser alone already gives up to 0.5 LSB here,
* ``pre``: the engine's exact weighted mean ``acc / S`` (before its output quantisation)
  against ``o_ref``: the error of the softmax weights alone,
* ``V-unit``: ``|y * Z / (127 * 2**F) - o_ref|`` in units of V's INT8 step (absolute; the
  measure that stays meaningful when a head's whole result cancels to nearly 0),
* ``code``: the INT8 codes ``y`` against ``RNE(127 * o_ref / max|o_ref|)``: largest difference
  and the fraction of codes that differ (where the engine's result is exact, a difference is
  an exact .5 tie that float64 rounding pushed to the other side).

All inputs come from seeded generators, so the printed table is reproducible.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Callable, Iterator

import numpy as np

from generators.attention_tables import exp_table_error
from generators.golden.attention import (
    DEFAULT_CONFIG, AttentionConfig, attention_core, dequantise, float_attention,
    score_multiplier, score_scale,
)

__all__ = ["measure_case", "suites", "run", "format_table", "main", "THRESHOLDS"]

# Documented bounds (docs/attention.md section 7), checked by tests/generators/golden/test_attention_model.py
# for the default configuration: family -> (statistic, bound). "out_max" is in output LSBs,
# "abs_max" in units of V's INT8 step. The "cancellation" suites make a whole head's result
# cancel to nearly 0, where an output LSB (max|o|/127) shrinks without limit, so their bound
# is absolute.
THRESHOLDS = {
    "random": ("out_max", 1.0),
    "exact": ("out_max", 0.5 + 1e-6),
    "adversarial": ("out_max", 1.0),
    "cancellation": ("abs_max", 0.25),
}


def measure_case(q, K, V, c, cfg: AttentionConfig = DEFAULT_CONFIG) -> dict:
    """Per-element errors of one case, arrays of shape (G, d); ``c`` one float or one per head."""
    cs = np.broadcast_to(np.asarray(c, dtype=np.float64), (cfg.heads_per_group,))
    ms = [score_multiplier(float(x), cfg) for x in cs]
    core = attention_core(q, K, V, [m for m, _ in ms], [sh for _, sh in ms], cfg)
    ref = float_attention(q, K, V, c)
    amax = np.abs(ref).max(axis=1, keepdims=True)
    lsb = np.where(amax > 0, amax / 127.0, 1.0)
    got = dequantise(core["y"], core["Z"], cfg)
    pre = core["acc"] / core["S"][:, None].astype(np.float64)
    ideal = np.where(amax > 0, np.rint(ref * 127.0 / np.where(amax > 0, amax, 1.0)), 0.0)
    return {
        "out": np.abs(got - ref) / lsb,
        "pre": np.abs(pre - ref) / lsb,
        "abs": np.abs(got - ref),
        "code": np.abs(core["y"] - ideal),
    }


# --------------------------------------------------------------------------- input suites

def _int8(rng, shape, lo=-128, hi=127):
    return rng.integers(lo, hi + 1, size=shape, dtype=np.int64)


def _c_for_spread(q, K, nats: float) -> np.ndarray:
    """Per-head score scales that give each head's scores a standard deviation of ``nats``."""
    s = (q @ K.T).astype(np.float64)
    sd = s.std(axis=1)
    fallback = np.abs(q).sum(axis=1) * 128.0 + 1.0
    return nats / np.where(sd > 0, sd, fallback)


Case = tuple  # (q, K, V, c)


def _random_cases(cfg, rng, trials, L_pick, nats) -> Iterator[Case]:
    G, d = cfg.heads_per_group, cfg.head_dim
    for _ in range(trials):
        L = L_pick(rng)
        q = _int8(rng, (G, d))
        K = _int8(rng, (L, d))
        V = _int8(rng, (L, d))
        yield q, K, V, _c_for_spread(q, K, nats)


def _dominant_cases(cfg, rng, trials, L, gap_nats) -> Iterator[Case]:
    """One row's score is ``gap_nats`` above every other row's, for every head."""
    G, d = cfg.heads_per_group, cfg.head_dim
    for _ in range(trials):
        base = _int8(rng, (d,), -100, 100)
        q = np.clip(base[None, :] + _int8(rng, (G, d), -20, 20), -128, 127)
        K = _int8(rng, (L, d), -40, 40)
        t = int(rng.integers(L))
        K[t] = np.where(base >= 0, 127, -128)
        V = _int8(rng, (L, d))
        s = q @ K.T
        others = np.delete(s, t, axis=1)
        gap = (s[:, t] - (others.max(axis=1) if L > 1 else s[:, t] - 1)).min()
        assert gap > 0
        yield q, K, V, gap_nats / float(gap)


def _equal_cases(cfg, rng, trials, L_pick) -> Iterator[Case]:
    """Every K row identical, so every score is equal: the result is the mean of V."""
    G, d = cfg.heads_per_group, cfg.head_dim
    for _ in range(trials):
        L = L_pick(rng)
        q = _int8(rng, (G, d))
        K = np.repeat(_int8(rng, (1, d)), L, axis=0)
        V = _int8(rng, (L, d))
        yield q, K, V, float(rng.uniform(1e-6, 1e-3))


def _two_level_cases(cfg, rng, L, steps_list, v_mode) -> Iterator[Case]:
    """Adversarial for the table: one row at the maximum, L-1 rows ``steps`` table steps below.

    The real distance is set exactly (in table steps) through c, so the engine's index rounding,
    the entry's rounding and the cut-off past the table's end all act on L-1 equal weights at
    once, and V puts those rows as far as possible from the maximum row (+127 against -128).
    """
    G, d = cfg.heads_per_group, cfg.head_dim
    for steps in steps_list:
        q = np.full((G, d), 127, dtype=np.int64)
        K = np.zeros((L, d), dtype=np.int64)
        K[0, :] = 1  # score 127*d for row 0, 0 for the others, every head alike
        gap = 127 * d
        c = steps / (gap * score_scale(1.0, cfg))
        if v_mode == "extreme":
            V = np.full((L, d), -128, dtype=np.int64)
            V[0, :] = 127
        else:
            V = _int8(rng, (L, d))
        yield q, K, V, c


def _steps_sweep(cfg: AttentionConfig) -> list[float]:
    """Distances (in table steps) that stress index rounding, entry rounding and the cut-off:
    every whole octave and the octave mid-points, each 0.49 and 0.51 steps past an index (the
    two sides of an index rounding boundary), the last non-zero entry, and past the end."""
    D, spo = cfg.exp_depth, cfg.exp_steps_per_octave
    table = cfg.table
    nz = np.flatnonzero(table)
    last = int(nz[-1])
    points = sorted({min(D - 1, (k * spo) // 2) for k in range(2 * D // spo + 1)}
                    | {0, 1, 2, last, D - 1})
    sweep = [x + f for x in points for f in (0.49, 0.51)]
    sweep += [last + 1.0, D + 0.5, D + 5.0]
    return sweep


def suites(cfg: AttentionConfig = DEFAULT_CONFIG, trials: int = 20,
           seed: int = 2024) -> list[tuple[str, str, Callable[[], Iterator[Case]]]]:
    """(family, name, case generator) for every suite; family keys :data:`THRESHOLDS`."""
    Lmax = cfg.max_context
    steps_sweep = _steps_sweep(cfg)

    def rs(k):
        return np.random.default_rng([seed, k])

    def short_L(r):
        return int(r.integers(1, 257))

    out = [
        ("random", "random L<=256, spread 1 nat",
         lambda: _random_cases(cfg, rs(1), trials, short_L, 1.0)),
        ("random", "random L<=256, spread 3 nats",
         lambda: _random_cases(cfg, rs(2), trials, short_L, 3.0)),
        ("random", "random L<=256, spread 8 nats",
         lambda: _random_cases(cfg, rs(3), trials, short_L, 8.0)),
        ("random", f"random L={Lmax} (max), spread 2 nats",
         lambda: _random_cases(cfg, rs(4), max(2, trials // 4), lambda r: Lmax, 2.0)),
        ("random", f"random L={Lmax} (max), spread 6 nats",
         lambda: _random_cases(cfg, rs(5), max(2, trials // 4), lambda r: Lmax, 6.0)),
        ("exact", "context 1",
         lambda: _random_cases(cfg, rs(6), trials, lambda r: 1, 1.0)),
        ("exact", "all scores equal, L<=256",
         lambda: _equal_cases(cfg, rs(7), trials, short_L)),
        ("exact", f"all scores equal, L={Lmax}",
         lambda: _equal_cases(cfg, rs(8), max(2, trials // 4), lambda r: Lmax)),
        ("random", "one dominant score, gap 2 nats, L=256",
         lambda: _dominant_cases(cfg, rs(9), trials, 256, 2.0)),
        ("random", "one dominant score, gap 8 nats, L=256",
         lambda: _dominant_cases(cfg, rs(10), trials, 256, 8.0)),
        ("random", f"one dominant score, gap 12 nats, L={Lmax}",
         lambda: _dominant_cases(cfg, rs(11), max(2, trials // 4), Lmax, 12.0)),
        ("random", f"one dominant score, gap 30 nats, L={Lmax}",
         lambda: _dominant_cases(cfg, rs(12), max(2, trials // 4), Lmax, 30.0)),
        ("cancellation", "two levels, L=2, V +127/-128, steps swept",
         lambda: _two_level_cases(cfg, rs(13), 2, steps_sweep, "extreme")),
        ("cancellation", f"two levels, L={Lmax}, V +127/-128, steps swept",
         lambda: _two_level_cases(cfg, rs(14), Lmax, steps_sweep, "extreme")),
        ("adversarial", f"two levels, L={Lmax}, random V, steps swept",
         lambda: _two_level_cases(cfg, rs(15), Lmax, steps_sweep, "random")),
    ]
    return out


# --------------------------------------------------------------------------- driver

def run(cfg: AttentionConfig = DEFAULT_CONFIG, trials: int = 20, seed: int = 2024) -> list[dict]:
    """Measure every suite; one dict of statistics per suite."""
    rows = []
    for family, name, gen in suites(cfg, trials, seed):
        acc: dict[str, list] = {k: [] for k in ("out", "pre", "abs", "code")}
        n = 0
        for q, K, V, c in gen():
            r = measure_case(q, K, V, c, cfg)
            for k in acc:
                acc[k].append(r[k].ravel())
            n += 1
        a = {k: np.concatenate(v) for k, v in acc.items()}
        rows.append({
            "family": family, "suite": name, "cases": n,
            "out_max": float(a["out"].max()), "out_mean": float(a["out"].mean()),
            "pre_max": float(a["pre"].max()), "pre_mean": float(a["pre"].mean()),
            "abs_max": float(a["abs"].max()), "abs_mean": float(a["abs"].mean()),
            "code_max": int(a["code"].max()), "code_diff": float((a["code"] != 0).mean()),
        })
    return rows


COLUMNS = [
    ("suite", "suite", "{}"), ("cases", "cases", "{}"),
    ("out_max", "out max", "{:.3f}"), ("out_mean", "out mean", "{:.3f}"),
    ("pre_max", "pre max", "{:.3f}"), ("pre_mean", "pre mean", "{:.4f}"),
    ("abs_max", "V-unit max", "{:.4f}"), ("abs_mean", "V-unit mean", "{:.4f}"),
    ("code_max", "code max", "{}"), ("code_diff", "codes differing", "{:.2%}"),
]


def format_table(rows: list[dict], markdown: bool = False) -> str:
    head = [h for _, h, _ in COLUMNS]
    body = [[f.format(r[k]) for k, _, f in COLUMNS] for r in rows]
    if markdown:
        lines = ["| " + " | ".join(head) + " |",
                 "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
        lines += ["| " + " | ".join(b) + " |" for b in body]
        return "\n".join(lines)
    w = [max(len(x[i]) for x in [head] + body) for i in range(len(head))]
    fmt = "  ".join("{:<%d}" % w[0] if i == 0 else "{:>%d}" % w[i] for i in range(len(head)))
    return "\n".join(fmt.format(*x) for x in [head] + body)


def _parse_sets(items: list[str]) -> dict:
    from .core import ParameterError, parse_assignments
    try:
        sets = parse_assignments(items)
    except ParameterError as exc:
        raise SystemExit(str(exc)) from None
    fields = {f.name for f in dataclasses.fields(AttentionConfig)}
    bad = sorted(set(sets) - fields)
    if bad:
        raise SystemExit(f"--set {bad[0]}: not an AttentionConfig field ({', '.join(sorted(fields))})")
    return {k: int(v, 0) for k, v in sets.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m generators.attention_error",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=20, help="cases per random suite")
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="override an AttentionConfig field (exp_depth, exp_width, ...)")
    a = ap.parse_args(argv)
    cfg = dataclasses.replace(DEFAULT_CONFIG, **_parse_sets(a.set))
    te = exp_table_error(cfg.exp_depth, cfg.exp_width, cfg.exp_steps_per_octave)
    print(f"config: G={cfg.heads_per_group} d={cfg.head_dim} max_context={cfg.max_context} "
          f"exp table {cfg.exp_depth} x {cfg.exp_width} bit, {cfg.exp_steps_per_octave} "
          f"steps/octave ({te['range_octaves']:g} octaves), scale F={cfg.scale_frac_bits}; "
          f"trials={a.trials} seed={a.seed}")
    print(f"table: entry rounding <= {te['abs_lsb_max']:.3f} LSB, index rounding <= "
          f"{100 * te['step_rel_max']:.3f} % of a weight, last entry {te['tail_entry']}, "
          f"monotone {te['monotone']}")
    rows = run(cfg, a.trials, a.seed)
    print(format_table(rows, a.markdown))
    print("out/pre: output LSBs (max|o_ref|/127 of the head), engine result / before its output "
          "quantisation; V-unit: |error| in units of V's INT8 step; code: INT8 code difference "
          "from RNE(127 o_ref / max|o_ref|)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
