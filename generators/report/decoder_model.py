"""Per-token performance model of a ternary (BitNet b1.58) decoder on the PYNQ-Z1.

The model's shape is data (:class:`ModelShape`, SmolLM2-135M by default) and the
board's rates are data (:class:`Platform`, the write-up's measured numbers by default).
Every function returns plain dicts / lists of dicts so that a report can print them
with :func:`format_table` or plot them with :mod:`generators.report.plots`.

What is counted (see docs/report.md for the derivation):

* Matrices, per layer: q (576x576), k (576x192), v (576x192), o (576x576),
  gate (576x1536), up (576x1536), down (1536x576); once per token: the LM head,
  576x49152 (the tied embedding read as a matrix).  Embedding lookup (one row
  gather), RMSNorm weights and biases are not matrices and are left out.  With
  5 ternary weights per byte that is 134,479,872 weights = 26.9 MB, and at the
  measured 9.16 G weights/s it is 14.68 ms per token.
* Attention, per token at context c: QK^T and AV are each c x head_dim MACs per
  query head, so ``2 * c * q_heads * head_dim * layers`` MACs (17.7 M at c = 512);
  the KV cache read is ``c * kv_heads * head_dim * 2 * layers * kv_bytes_per_element`` bytes
  (INT16 K and V on the PYNQ-Z1 overlay: 2 bytes an element).
* The host: everything the Cortex-A9 does per token but the matrices and attention (small
  ops, the frames and DMA, sampling) is :func:`host_ms`: ``make a9-model``'s Cortex-A9 cycle
  model of the board's ARMv7 build of the C step for the weight format (llvm-mca's Cortex-A9
  cycles per block times its executions under qemu-arm, plus cache misses, the CPU's reads
  and writes of uncached DMA memory, its reads of the cached results region with their
  invalidates by range, and the DMA registers; generators/runtime/bench/a9model.py,
  every constant with its source; its error against the write-up's board measurements
  beside every figure), read from docs/results/a9-model.json and interpolated between the
  contexts modelled (1, 512, 2048). The x86-64 count of make host-bench is a development
  yardstick, not a time. The write-up measured 4.2 ms for its own host code; that figure
  reproduces its Figure 6 only (:func:`figure6`, ``WRITEUP_SMALL_OPS_S``).

Simulated runs (``make decode``, chat's rtl tok/s) use the same formula through
:func:`token_time`: matrices max(cycles / fclk, bytes / wall) + attention the same + host.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Callable, Iterable, Mapping, Optional, Sequence, Union

from generators.contract import DDR_WALL_BYTES_PER_S, FCLK_HZ
from generators.designs import PYNQ_Z1
from generators.designs.overlay import PYNQ_Z1_KV_BITS

__all__ = [
    "ModelShape",
    "Platform",
    "CONTEXTS",
    "FIGURE6_WRITEUP",
    "ATTN_FIXED_LATENCY_PLACEHOLDER",
    "matrices",
    "matrix_rows",
    "attention_costs",
    "attention_frame_beats",
    "part_rows",
    "decoder_row",
    "decoder_table",
    "wall_bound",
    "figure6",
    "format_table",
    "PLAttention",
    "pl_attention",
    "host_ms",
    "token_time",
    "WRITEUP_SMALL_OPS_S",
    "HostFigureError",
]

CONTEXTS = (128, 256, 512, 1024, 2048)

#: Figure 6 of the write-up: tok/s with matmul on the PL, attention and small ops on the CPU.
FIGURE6_WRITEUP = {128: 26.2, 512: 9.8, 2048: 2.8}
#: the write-up's measured CPU time per token for everything but matmul and attention, with its
#: own host code: :func:`figure6` reproduces the write-up's table with it, nothing else uses it
WRITEUP_SMALL_OPS_S = 4.2e-3

#: Fixed latency (cycles) of one attention-engine frame on top of its beats.  A placeholder
#: until the measured value from simulation replaces it (pass ``engine_cycles=``).
ATTN_FIXED_LATENCY_PLACEHOLDER = 64

MATRIX_NAMES = ("q", "k", "v", "o", "gate", "up", "down", "lm_head")


@dataclass(frozen=True)
class ModelShape:
    """Shape of a Llama-style GQA decoder.  Defaults: SmolLM2-135M."""

    name: str = "SmolLM2-135M"
    hidden: int = 576
    intermediate: int = 1536
    layers: int = 30
    q_heads: int = 9
    kv_heads: int = 3
    head_dim: int = 64
    vocab: int = 49152
    #: tied embedding: the LM head is the embedding matrix read as hidden x vocab; it is
    #: stored (and counted) once.
    tied_embedding: bool = True
    #: ternary weights packed per byte (3**5 = 243 <= 256)
    weights_per_byte: int = 5
    #: bytes per KV-cache element: the PYNQ-Z1 overlay's K and V codes (INT16: 2; an overlay
    #: built with kv_bits=8: 1)
    kv_bytes_per_element: int = PYNQ_Z1_KV_BITS // 8

    def __post_init__(self):
        for f in ("hidden", "intermediate", "layers", "q_heads", "kv_heads", "head_dim",
                  "vocab", "weights_per_byte", "kv_bytes_per_element"):
            v = getattr(self, f)
            if not isinstance(v, int) or v <= 0:
                raise ValueError(f"ModelShape.{f} must be a positive int, got {v!r}")
        if self.q_heads % self.kv_heads:
            raise ValueError(f"q_heads ({self.q_heads}) must be a multiple of kv_heads "
                             f"({self.kv_heads})")

    @property
    def q_dim(self) -> int:
        return self.q_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def group(self) -> int:
        """Query heads per KV head (GQA group size)."""
        return self.q_heads // self.kv_heads

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Platform:
    """Rates of the PYNQ-Z1 (Zynq-7020).  Defaults are the write-up's measurements."""

    #: fabric clock: IO PLL 1000 MHz / 7
    fclk_hz: float = FCLK_HZ
    #: bytes per AXI-Stream beat = bytes per clock per engine (one HP port)
    beat_bytes: int = 8
    #: DDR wall measured with two HP ports
    wall_bytes_per_s: float = DDR_WALL_BYTES_PER_S
    #: measured ternary matmul throughput (1.83 GB/s x 5 weights per byte)
    pl_matmul_weights_per_s: float = 9.16e9
    #: effective INT8 attention rate of the Cortex-A9 (83 ms at context 512)
    cpu_attention_macs_per_s: float = 0.21e9
    #: rate assumed for a matrix placed on the CPU (not measured for ternary; the write-up's
    #: effective INT8 rate is used)
    cpu_matmul_macs_per_s: float = 0.21e9
    #: the host's time per token (small ops, frames and DMA, sampling): None = make
    #: a9-model's Cortex-A9 model for the weight format and context (:func:`host_ms`); a
    #: number replaces it (figure6: the write-up's own 4.2 ms)
    host_s: Optional[float] = None
    #: attention engines working in parallel (two HP ports are needed to reach the wall)
    pl_attention_engines: int = 2

    def as_dict(self) -> dict:
        return asdict(self)


# --------------------------------------------------------------------------------------
# the host


class HostFigureError(RuntimeError):
    """docs/results/a9-model.json has no figure for the host term (make a9-model)."""


#: the measured host path per weight format (make a9-model models each of q4, int8 and ternary
#: on its own SmolLM2 image): "int8 rows" (0x08, one step per vector) has no image of its own
#: any more and borrows int8's (Q8_0) step; "q4 + q8_0 head" is what host-bench runs as q4
HOST_FORMAT = {"int8": "int8", "int8 rows": "int8", "ternary": "ternary", "q4": "q4",
               "q4 + q8_0 head": "q4"}
#: which figure is the host term, by build: make a9-model's Cortex-A9 model of the board's
#: ARMv7 build of the C step ("armv7": the one-token step; "armv7c2": a row of the batched
#: 2-row pass; "armv7p" / "armv7c2p": the same for prompt rows, no LM head and no sampling)
HOST_FIGURES = {"armv7": "a9-model.armv7.{fmt}.ctx{context}.ms",
                "armv7c2": "a9-model.armv7c2.{fmt}.ctx{context}.ms",
                "armv7p": "a9-model.armv7p.{fmt}.ctx{context}.ms",
                "armv7c2p": "a9-model.armv7c2p.{fmt}.ctx{context}.ms"}
HOST_FIGURE = HOST_FIGURES["armv7"]
#: the board runs the C step on both cores by default (engines.cloop.default_threads:
#: TERNARY_PYNQ_THREADS, default 2), so the host term is a9-model's two-core figure
#: (``<key>_2core``) where the step has work for the second core, else the one-core one
HOST_THREADS = 2


def _host_points(fmt: str, build: str = "armv7", threads: int = HOST_THREADS) -> list:
    from generators.results import load
    key = HOST_FIGURES[build]
    data = load().get(key.split(".", 1)[0], {})
    got = {}
    pre, post = key.split("{context}")
    pre = pre.format(fmt=fmt)
    posts = (post + "_2core", post) if threads == 2 else (post,)
    for f in data.get("figures", []):
        k = f["key"]
        for rank, suffix in enumerate(posts):
            if k.startswith(pre) and k.endswith(suffix) and k[len(pre):-len(suffix)].isdigit():
                ctx = int(k[len(pre):-len(suffix)])
                if ctx not in got or rank < got[ctx][0]:
                    got[ctx] = (rank, float(f["value"]))
    return sorted((c, v) for c, (_, v) in got.items())


def host_ms(fmt: str = "ternary", context: int = 512, platform: Platform | None = None,
            build: str = "armv7") -> float:
    """The host's milliseconds per token for weight format ``fmt`` at ``context``: the
    platform's ``host_s`` when set, else make a9-model's Cortex-A9 model of the board's ARMv7
    build (HOST_FIGURES in docs/results/a9-model.json; ``build`` "armv7": the one-token step,
    "armv7c2": per row of the batched C step's 2-row pass, "armv7p" / "armv7c2p": the same for
    prompt rows (no LM head, no sampling)), on both cores as the board runs it (HOST_THREADS:
    the ``_2core`` figure where the step has work for the worker thread), linear between the
    contexts modelled, the nearest one outside them. A MODEL (no A9 here)."""
    if platform is not None and platform.host_s is not None:
        return platform.host_s * 1e3
    if fmt not in HOST_FORMAT:
        raise ValueError(f"weight format {fmt!r}: one of {', '.join(HOST_FORMAT)}")
    if build not in HOST_FIGURES:
        raise ValueError(f"host build {build!r}: one of {', '.join(HOST_FIGURES)}")
    pts = _host_points(HOST_FORMAT[fmt], build)
    if not pts:
        raise HostFigureError(f"docs/results/a9-model.json has no "
                              f"{HOST_FIGURES[build].format(fmt=HOST_FORMAT[fmt], context='N')} "
                              f"figures: run make a9-model")
    if context <= pts[0][0]:
        return pts[0][1]
    for (c0, v0), (c1, v1) in zip(pts, pts[1:]):
        if context <= c1:
            return v0 + (v1 - v0) * (context - c0) / (c1 - c0)
    return pts[-1][1]


def _shape_fmt(s: "ModelShape") -> str:
    return "ternary" if s.weights_per_byte == 5 else "int8"


def token_time(fmt: str, context: int, matrix_cycles: float, matrix_beats: float,
               attention_cycles: float, attention_beats: float,
               platform: Platform | None = None, build: str = "armv7") -> dict:
    """One token's time from simulated engine cycles and the beats the DMAs moved (both
    ports, ``beat_bytes`` each): matrices ``max(cycles / fclk, bytes / wall)``, attention
    the same, plus the host (:func:`host_ms`, ``build``): the formula of make decode, chat's
    rtl tok/s and this model's rows."""
    p = platform or Platform()
    mat = max(matrix_cycles / p.fclk_hz, matrix_beats * p.beat_bytes / p.wall_bytes_per_s)
    att = max(attention_cycles / p.fclk_hz, attention_beats * p.beat_bytes / p.wall_bytes_per_s)
    host = host_ms(fmt, context, p, build) / 1e3
    total = mat + att + host
    return dict(matrix_ms=mat * 1e3, attention_ms=att * 1e3, host_ms=host * 1e3,
                total_ms=total * 1e3, tok_s=1.0 / total,
                matrix_bound="wall" if matrix_beats * p.beat_bytes / p.wall_bytes_per_s
                >= matrix_cycles / p.fclk_hz else "engine")


# --------------------------------------------------------------------------------------
# matrices


def matrices(shape: ModelShape | None = None) -> list[dict]:
    """The matrix-vector products of one token.

    Each dict: ``name``, ``k`` (input length = elements of x), ``n`` (rows = outputs),
    ``count`` (how many times per token: ``layers`` or 1), ``weights`` (k*n*count).
    """
    s = shape or ModelShape()
    L = s.layers
    rows = [
        ("q", s.hidden, s.q_dim, L),
        ("k", s.hidden, s.kv_dim, L),
        ("v", s.hidden, s.kv_dim, L),
        ("o", s.q_dim, s.hidden, L),
        ("gate", s.hidden, s.intermediate, L),
        ("up", s.hidden, s.intermediate, L),
        ("down", s.intermediate, s.hidden, L),
        ("lm_head", s.hidden, s.vocab, 1),
    ]
    return [dict(name=n, k=k, n=nn, count=c, weights=k * nn * c) for n, k, nn, c in rows]


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def matmul_frame_beats(k: int, n: int, weights_per_byte: int, beat_bytes: int = 8) -> int:
    """Beats of one engine frame (DESIGN.md section 3): header, x, n padded rows."""
    row_bytes = _ceil_div(k, weights_per_byte)
    return 1 + _ceil_div(k, beat_bytes) + n * _ceil_div(row_bytes, beat_bytes)


def matrix_rows(shape: ModelShape | None = None, platform: Platform | None = None,
                placement: Mapping[str, str] | None = None) -> list[dict]:
    """Bytes, beats, cycles and time per token for every matrix.

    ``placement`` maps a matrix name (``q`` ... ``down``, ``lm_head``) to ``'pl'`` or
    ``'cpu'``; unnamed matrices go to the PL.

    Columns: ``part``, ``where``, ``k``, ``n``, ``count``, ``weights``, ``macs``,
    ``bytes`` (weights / weights_per_byte, the write-up's count), ``stream_bytes`` (the
    engine frames' beats x beat_bytes: header, x and rows padded to whole beats),
    ``beats``, ``cycles`` (one engine, one beat per clock), ``ms``.

    Time on the PL is ``weights / pl_matmul_weights_per_s`` (the measured rate, which is
    wall-bound); on the CPU ``macs / cpu_matmul_macs_per_s``.
    """
    s = shape or ModelShape()
    p = platform or Platform()
    placement = dict(placement or {})
    _check_placement(placement, MATRIX_NAMES)
    out = []
    for m in matrices(s):
        where = placement.get(m["name"], "pl")
        frame = matmul_frame_beats(m["k"], m["n"], s.weights_per_byte, p.beat_bytes)
        beats = frame * m["count"]
        if where == "pl":
            sec = m["weights"] / p.pl_matmul_weights_per_s
        else:
            sec = m["weights"] / p.cpu_matmul_macs_per_s
        out.append(dict(
            part=m["name"], where=where, k=m["k"], n=m["n"], count=m["count"],
            weights=m["weights"], macs=m["weights"],
            bytes=m["weights"] / s.weights_per_byte,
            stream_bytes=beats * p.beat_bytes,
            beats=beats, cycles=beats, ms=sec * 1e3,
        ))
    return out


def _check_placement(placement: Mapping[str, str], names: Sequence[str]):
    for k, v in placement.items():
        if k not in names and k not in ("attention",):
            raise ValueError(f"unknown part {k!r} in placement (known: {', '.join(names)}, "
                             f"attention)")
        if v not in ("pl", "cpu"):
            raise ValueError(f"placement of {k!r} must be 'pl' or 'cpu', got {v!r}")


# --------------------------------------------------------------------------------------
# attention

@dataclass(frozen=True)
class PLAttention:
    """The attention engine as built in the PL top (docs/attention.md, docs/overlay.md): its
    frame layout and its back-to-back cycles per frame, from the design's own latency model
    (``AttentionTiming.period``, which ``sim/attention`` ``test_cycles`` asserts to the cycle
    against the simulation). Make one with :func:`pl_attention`."""

    name: str
    beat_bytes: int          # bytes per joined beat (16 at 48 MACs: both HP ports)
    header_beats: int
    q_beats: int
    row_beats: int           # beats per K (or V) row
    period: Callable[[int], float]   # back-to-back cycles per frame of `beats` beats
    #: 8-byte words the top adds per frame: port 1's route word in front of its half
    extra_port_beats: int = 1

    def frame_beats(self, context: int) -> int:
        return self.header_beats + self.q_beats + 2 * context * self.row_beats

    def frame_cycles(self, context: int) -> float:
        """Back-to-back cycles per frame in the top: the engine's period, and at least one
        cycle per 8-byte word on port 1 (its half plus the route word)."""
        beats = self.frame_beats(context)
        return max(self.period(beats), beats + self.extra_port_beats)


def pl_attention(params: Mapping | None = None) -> PLAttention:
    """The PYNQ-Z1 attention engine of the overlay (INT16 K and V, 24 MACs, 16-byte beats fed
    by both HP ports through the joiner: generators.designs.PYNQ_Z1), or another
    configuration of ``attention-engine`` (``params``: its parameters, the generator's
    defaults for the rest; e.g. ``generators.designs.overlay.attention_params(8)``)."""
    from ..core import build   # the generator's own latency model, not a copy of it
    values = dict(PYNQ_Z1["attention-engine"] if params is None else params)
    d = build("attention-engine", values)
    t = d.timing()
    G, hd, bb = d.G, d.p["head_dim"], d.bb
    return PLAttention(name=f"attention-engine macs={d.p['macs']}", beat_bytes=bb,
                       header_beats=d.hb, q_beats=_ceil_div(G * hd, bb), row_beats=d.rb,
                       period=t.period)


EngineCycles = Union[None, int, float, Callable[[int], float], Mapping[int, float], PLAttention]


def attention_frame_beats(shape: ModelShape | None, context: int, beat_bytes: int = 8) -> int:
    """Beats of one attention-engine frame: one KV head group of one layer.

    header (1 beat) + q of the group's query heads (group*head_dim INT8 bytes) + K cache
    (context*head_dim bytes) + V cache (context*head_dim bytes), each padded to whole beats.
    """
    s = shape or ModelShape()
    e = s.kv_bytes_per_element
    q = _ceil_div(s.group * s.head_dim * e, beat_bytes)
    kv = _ceil_div(context * s.head_dim * e, beat_bytes)
    return 1 + q + 2 * kv


def _cycles_per_frame(engine_cycles: EngineCycles, beats: int, context: int) -> float:
    if engine_cycles is None:
        return beats + ATTN_FIXED_LATENCY_PLACEHOLDER
    if isinstance(engine_cycles, bool):
        raise TypeError("engine_cycles must be None, a number, a callable or a mapping")
    if isinstance(engine_cycles, (int, float)):
        return beats + engine_cycles
    if isinstance(engine_cycles, Mapping):
        if context not in engine_cycles:
            raise KeyError(f"engine_cycles has no entry for context {context}")
        return float(engine_cycles[context])
    if callable(engine_cycles):
        return float(engine_cycles(beats))
    raise TypeError("engine_cycles must be None, a number (fixed latency), a callable "
                    "beats -> cycles, or a mapping context -> cycles per frame")


def attention_costs(shape: ModelShape | None, context: int, where: str = "cpu",
                    platform: Platform | None = None,
                    engine_cycles: EngineCycles = None) -> dict:
    """Attention of one token at ``context`` cached positions.

    ``macs`` = 2 * context * q_heads * head_dim * layers (QK^T and AV);
    ``bytes`` = context * kv_heads * head_dim * 2 * layers * kv_bytes_per_element
    (the K and V cache read once per token: GQA shares each KV head by ``group`` query
    heads).

    On the CPU: ``ms = macs / cpu_attention_macs_per_s``.  On the PL: ``frames =
    layers * kv_heads`` engine frames of :func:`attention_frame_beats` beats each;
    ``engine_cycles`` gives the cycles of one frame: None -> beats +
    ATTN_FIXED_LATENCY_PLACEHOLDER; a number -> beats + that fixed latency; a callable ->
    ``engine_cycles(beats)``; a mapping -> ``engine_cycles[context]``.  The engines
    (``pl_attention_engines``, each one beat per clock at ``fclk_hz``) share the frames,
    and the time is at least the frames' bytes over the DDR wall:
    ``ms = max(frames * cycles / engines / fclk, stream_bytes / wall)``.
    """
    s = shape or ModelShape()
    p = platform or Platform()
    if context <= 0:
        raise ValueError(f"context must be positive, got {context}")
    macs = 2 * context * s.q_heads * s.head_dim * s.layers
    kv_bytes = context * s.kv_heads * s.head_dim * 2 * s.layers * s.kv_bytes_per_element
    row = dict(part="attention", where=where, context=context, macs=macs, bytes=kv_bytes)
    if where == "cpu":
        row.update(frames=0, beats=0, cycles=0, stream_bytes=0, compute_ms=None,
                   wall_ms=None, ms=macs / p.cpu_attention_macs_per_s * 1e3)
    elif where == "pl":
        frames = s.layers * s.kv_heads
        if isinstance(engine_cycles, PLAttention):   # the engine as built: one, both ports
            eng = engine_cycles
            fbeats, cyc, engines = eng.frame_beats(context), eng.frame_cycles(context), 1
            stream_bytes = frames * (fbeats * eng.beat_bytes + 8 * eng.extra_port_beats)
        else:
            fbeats = attention_frame_beats(s, context, p.beat_bytes)
            cyc = _cycles_per_frame(engine_cycles, fbeats, context)
            engines = p.pl_attention_engines
            stream_bytes = frames * fbeats * p.beat_bytes
        compute_s = frames * cyc / engines / p.fclk_hz
        wall_s = stream_bytes / p.wall_bytes_per_s
        row.update(frames=frames, frame_beats=fbeats, frame_cycles=cyc,
                   beats=frames * fbeats, cycles=frames * cyc, stream_bytes=stream_bytes,
                   compute_ms=compute_s * 1e3, wall_ms=wall_s * 1e3,
                   ms=max(compute_s, wall_s) * 1e3,
                   bound="wall" if wall_s >= compute_s else "engine")
    else:
        raise ValueError(f"attention must be on 'pl' or 'cpu', got {where!r}")
    return row


# --------------------------------------------------------------------------------------
# per token


def part_rows(shape: ModelShape | None = None, context: int = 512,
              attention_on: str = "cpu", engine_cycles: EngineCycles = None, *,
              platform: Platform | None = None,
              placement: Mapping[str, str] | None = None) -> list[dict]:
    """Every part of one token at ``context``: the matrices, attention and the host.

    Each row has at least ``part``, ``where``, ``bytes`` (DDR bytes read by the part),
    ``macs``, ``cycles`` (PL engine cycles; 0 on the CPU) and ``ms``.
    """
    s = shape or ModelShape()
    p = platform or Platform()
    placement = dict(placement or {})
    attention_on = placement.pop("attention", attention_on)
    rows = matrix_rows(s, p, placement)
    for r in rows:
        r["context"] = context
    rows.append(attention_costs(s, context, attention_on, p, engine_cycles))
    rows.append(dict(part="host", where="cpu", context=context, macs=0, bytes=0,
                     cycles=0, ms=host_ms(_shape_fmt(s), context, p)))
    return rows


def wall_bound(shape: ModelShape | None = None, context: int = 512,
               platform: Platform | None = None) -> dict:
    """The bandwidth-limit bound: every weight byte and every KV byte read once at the
    DDR wall (no engine can do better), plus the host.

    Returns ``weight_bytes``, ``kv_bytes``, ``wall_ms`` (bytes / wall), ``bound_ms``
    (wall_ms + host), ``bound_tok_s`` and ``wall_tok_s`` (1000 / wall_ms, the host
    ignored as well).
    """
    s = shape or ModelShape()
    p = platform or Platform()
    wbytes = sum(m["weights"] for m in matrices(s)) / s.weights_per_byte
    kv = attention_costs(s, context, "cpu", p)["bytes"]
    wall_ms = (wbytes + kv) / p.wall_bytes_per_s * 1e3
    bound_ms = wall_ms + host_ms(_shape_fmt(s), context, p)
    return dict(context=context, weight_bytes=wbytes, kv_bytes=kv, wall_ms=wall_ms,
                bound_ms=bound_ms, bound_tok_s=1e3 / bound_ms, wall_tok_s=1e3 / wall_ms)


def decoder_row(shape: ModelShape | None = None, context: int = 512,
                attention_on: str = "cpu", engine_cycles: EngineCycles = None, *,
                platform: Platform | None = None,
                placement: Mapping[str, str] | None = None) -> dict:
    """One token at ``context``: time by part, tok/s, PL share and the wall bound."""
    s = shape or ModelShape()
    p = platform or Platform()
    parts = part_rows(s, context, attention_on, engine_cycles, platform=p,
                      placement=placement)
    mats = [r for r in parts if r["part"] in MATRIX_NAMES]
    att = next(r for r in parts if r["part"] == "attention")
    host = next(r for r in parts if r["part"] == "host")
    total_ms = sum(r["ms"] for r in parts)
    pl_ms = sum(r["ms"] for r in parts if r["where"] == "pl")
    wb = wall_bound(s, context, p)
    return dict(
        context=context,
        attention_on=att["where"],
        matmul_ms=sum(r["ms"] for r in mats),
        matmul_pl_ms=sum(r["ms"] for r in mats if r["where"] == "pl"),
        matmul_cpu_ms=sum(r["ms"] for r in mats if r["where"] == "cpu"),
        attention_ms=att["ms"],
        host_ms=host["ms"],
        total_ms=total_ms,
        tok_s=1e3 / total_ms,
        pl_share=pl_ms / total_ms,
        weights=sum(r["weights"] for r in mats),
        weight_bytes=sum(r["bytes"] for r in mats),
        kv_bytes=att["bytes"],
        attention_macs=att["macs"],
        attention_cycles=att["cycles"],
        bound_ms=wb["bound_ms"],
        bound_tok_s=wb["bound_tok_s"],
    )


def decoder_table(shape: ModelShape | None = None, contexts: Iterable[int] = CONTEXTS,
                  attention_on: str = "cpu", engine_cycles: EngineCycles = None, *,
                  platform: Platform | None = None,
                  placement: Mapping[str, str] | None = None) -> list[dict]:
    """:func:`decoder_row` for every context (default 128, 256, 512, 1024, 2048).

    ``attention_on``: ``'cpu'`` (the write-up's Figure 6) or ``'pl'`` (the attention
    engine; ``engine_cycles`` as in :func:`attention_costs`).  ``placement`` may move any
    matrix (or ``attention``) to ``'cpu'`` or ``'pl'``.
    """
    return [decoder_row(shape, c, attention_on, engine_cycles, platform=platform,
                        placement=placement) for c in contexts]


def figure6(shape: ModelShape | None = None, platform: Platform | None = None,
            reference: Mapping[int, float] = FIGURE6_WRITEUP) -> list[dict]:
    """The write-up's Figure 6 recomputed: matmul on the PL, attention and small ops on
    the CPU (the write-up's own host: its measured 4.2 ms, ``WRITEUP_SMALL_OPS_S``, unless
    ``platform`` sets ``host_s``), at the contexts of ``reference`` ({context: tok/s}).
    Each row adds ``writeup_tok_s`` and ``error_pct`` = 100 * (model / write-up - 1)."""
    p = platform or Platform()
    if p.host_s is None:
        from dataclasses import replace
        p = replace(p, host_s=WRITEUP_SMALL_OPS_S)
    rows = decoder_table(shape, sorted(reference), "cpu", platform=p)
    for r in rows:
        ref = reference[r["context"]]
        r["writeup_tok_s"] = ref
        r["error_pct"] = 100.0 * (r["tok_s"] / ref - 1.0)
    return rows


# --------------------------------------------------------------------------------------
# formatting


def _fmt(v) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        a = abs(v)
        if a == 0:
            return "0"
        if a >= 10000:
            return f"{v:,.0f}"
        if a >= 100:
            return f"{v:.1f}"
        if a >= 1:
            return f"{v:.2f}"
        return f"{v:.3g}"
    return str(v)


def format_table(rows: Sequence[Mapping], columns: Sequence[str] | None = None,
                 headers: Mapping[str, str] | None = None,
                 formats: Mapping[str, Union[str, Callable]] | None = None) -> str:
    """Markdown table of ``rows`` (a list of dicts).

    ``columns``: keys to show, in order (default: every key, in first-seen order);
    ``headers``: display names for keys; ``formats``: per-key format spec (``".2f"``) or
    callable.  Numbers are right-aligned.
    """
    rows = list(rows)
    if columns is None:
        columns = []
        for r in rows:
            for k in r:
                if k not in columns:
                    columns.append(k)
    headers = headers or {}
    formats = formats or {}

    def cell(r, c):
        v = r.get(c)
        f = formats.get(c)
        if v is None:
            return ""
        if callable(f):
            return str(f(v))
        if f is not None:
            return format(v, f)
        return _fmt(v)

    body = [[cell(r, c) for c in columns] for r in rows]
    head = [str(headers.get(c, c)) for c in columns]
    numeric = [all(isinstance(r.get(c), (int, float)) and not isinstance(r.get(c), bool)
                   for r in rows if r.get(c) is not None) and rows
               for c in columns]
    widths = [max([len(h)] + [len(b[i]) for b in body] + [3]) for i, h in enumerate(head)]

    def line(cells):
        out = []
        for i, x in enumerate(cells):
            out.append(x.rjust(widths[i]) if numeric[i] else x.ljust(widths[i]))
        return "| " + " | ".join(out) + " |"

    sep = "|" + "|".join(("-" * (w + 1) + ":") if numeric[i] else ("-" * (w + 2))
                         for i, w in enumerate(widths)) + "|"
    return "\n".join([line(head), sep] + [line(b) for b in body]) + "\n"


# --------------------------------------------------------------------------------------
# weight formats side by side (INT8, ternary, Q4_1)

#: row beats of one k-weight row per weight format at 8-byte beats: INT8 one weight per byte,
#: ternary five per byte, Q4_1 (the q4-engine's layout, docs/q4.md) a scale beat per 64
#: weights and a code beat per 16, Q8_0 (format 0x09's rows, docs/activations.md) a beat of
#: four fp16 d per 128 weights and a code beat per 8
WEIGHT_FORMATS = {
    "int8": lambda k: _ceil_div(k, 8),
    "ternary": lambda k: _ceil_div(_ceil_div(k, 5), 8),
    "q4": lambda k: _ceil_div(k, 64) + _ceil_div(k, 16),
    "q8_0": lambda k: _ceil_div(k, 128) + k // 8,
}
#: beats of one vector's x scale table behind its K codes (docs/activations.md): format 0x05
#: (Q4_1 rows x Q8_1 blocks: fp16 d and s per 32) ceil(K/64), 0x09 (Q8_0 rows x Q8_0 blocks)
#: ceil(K/128); INT8 and ternary rows take one INT8 step per vector (no table), and so does a
#: Q4_1 LM head (format 0x04, the "q4" row)
X_TABLE_BEATS = {"q4": lambda k: _ceil_div(k, 64), "q8_0": lambda k: _ceil_div(k, 128)}
#: the rows of the table: (layer matrices' format, LM head's format). ``--format int8`` runs
#: Q8_0 rows for both (0x09, since issue 32 item 1), ``--format q4`` Q4_1 layers and SmolLM2's
#: tied embedding as stored, Q8_0 (the last row); "int8 rows" is the INT8 lane's 0x08 layout
#: (one weight per byte, a float scale per row on the host) for comparison.
FORMAT_ROWS = {"int8": ("q8_0", "q8_0"), "int8 rows": ("int8", "int8"),
               "ternary": ("ternary", "ternary"), "q4": ("q4", "q4"),
               "q4 + q8_0 head": ("q4", "q8_0")}


def weight_format_rows(shape: ModelShape | None = None, context: int = 512,
                       platform: Platform | None = None, engines: int = 2,
                       attention_on: str = "pl", engine_cycles: EngineCycles = None
                       ) -> list[dict]:
    """Tokens per second of the decoder per weight format, from the engines' stream beats.

    Per format: the beats of every matrix frame of one token (header + x + N rows in that
    format's layout, 8-byte beats, every engine one beat per clock), shared by ``engines``
    engines (one per HP port); the matmul time is the larger of the engines' cycles at
    ``fclk_hz`` and the streamed bytes over the DDR wall. Attention (on the PL by default,
    INT8 KV cache, the same for every format) and the host of that format (:func:`host_ms`)
    are added. ``bits_per_weight`` counts the streamed row bytes only.
    """
    s = shape or ModelShape()
    p = platform or Platform()
    att = attention_costs(s, context, attention_on, p, engine_cycles)
    out = []
    for fmt, (layer_fmt, head_fmt) in FORMAT_ROWS.items():
        beats = row_beats = 0
        for m in matrices(s):
            head = m["name"] == "lm_head"
            f = head_fmt if head else layer_fmt
            rb = m["n"] * WEIGHT_FORMATS[f](m["k"])
            row_beats += rb * m["count"]
            table = 0 if f == "q4" and head else X_TABLE_BEATS.get(f, lambda k: 0)(m["k"])
            beats += (1 + _ceil_div(m["k"], p.beat_bytes) + table + rb) * m["count"]
        stream = beats * p.beat_bytes
        engine_s = beats / engines / p.fclk_hz
        wall_s = stream / p.wall_bytes_per_s
        mat_ms = max(engine_s, wall_s) * 1e3
        host = host_ms(fmt, context, p)
        total = mat_ms + att["ms"] + host
        weights = sum(m["weights"] for m in matrices(s))
        out.append(dict(format=fmt, bits_per_weight=8 * row_beats * p.beat_bytes / weights,
                        stream_mb=stream / 1e6, matmul_ms=mat_ms,
                        bound="wall" if wall_s >= engine_s else "engine",
                        matmul_tok_s=1e3 / mat_ms, attention_ms=att["ms"],
                        host_ms=host, total_ms=total, tok_s=1e3 / total,
                        context=context))
    return out
