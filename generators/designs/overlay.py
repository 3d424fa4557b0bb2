"""`overlay`: the PYNQ-Z1 PL top `pynq_overlay`, everything between the two AXI DMAs and the
engines (docs/overlay.md).

Per HP port p: a register slice on s{p}_axis, a frame router, a matrix engine (`mv-engine`
with INT8, ternary and, by default (q4=true), Q4_1 rows: one module definition, two instances); the attention engine (`attention-engine`,
48 MACs, 128-bit s_axis) fed by a joiner from both routers; port 0's output merger orders the
matrix and attention output frames as their input frames came. The engines are rendered by
their own designs; each file of the union is written once (sync_fifo.v and delay_line.v are
copied by both engines).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Dict, List, Tuple

import jinja2

from .mv_common import MAX_VECTORS
from ..core import RTL_DIR, TEMPLATE_DIR, Design, Param, ParameterError, build, register
from ..contract import (ATTENTION_MAGIC, FCLK_HZ, HP_BEAT_BYTES, MATRIX_MAGIC, RESULT_BYTES,
                        ROUTE_MAGIC)

#: the PYNQ-Z1 top's `vectors` (docs/vectors.md "The PYNQ-Z1 default"): the largest whose top fits
#: the 7020 next to the attention engine, the DMAs and the interconnect (make report's budget
#: table: LUT with LUTRAM and SRL <= 80 %, DSP <= 90 %) AND meets make timing's 6.0 ns budget.
#: Vectors 2: 66.9 % LUT and 42.7 % DSP modelled with the INT16-KV attention engine (77.9 % and
#: 62.3 % with the INT8 one), its top within 6.0 ns since the back end's output slice and the
#: controller's stage-0 header tests; vectors 3 is over the LUT cap (81.0 %, make report).
PYNQ_Z1_VECTORS = 2

#: the PYNQ-Z1 top's ``kv_bits`` (issue 32 item 5, docs/quality.md): INT16 K and V, what
#: ``make answers`` and ``make quality`` favour (q4: 63.2 % of the float64 pass's tokens against
#: 49.0 % on INT8 KV, level with llama.cpp prompt by prompt). It costs twice the KV cache and its
#: read (23,040 bytes a token of context against 11,520); ``kv_bits=8`` builds the INT8 engine.
PYNQ_Z1_KV_BITS = 16

#: result FIFO entries of the matrix engines when they take B-vector frames (vectors > 1)
VECTORS_FIFO_DEPTH = 64


def engine_params(vectors: int, q4: bool = True) -> Dict[str, Any]:
    """The matrix engine's parameters the top sets besides max_k and bytes (whose PYNQ-Z1
    values are the engine's defaults): the Q4_1 lane and, for B-vector frames, `vectors` and a
    64-entry result FIFO, so that while rows shorter than B beats hold the input back, the
    entries it holds outlast the pipeline's refill and the output stays busy (docs/vectors.md
    "As built"). ``make report`` synthesises the engine alone with exactly these."""
    out: Dict[str, Any] = {"q4": q4}
    if vectors > 1:
        out.update(vectors=vectors, fifo_depth=VECTORS_FIFO_DEPTH)
    return out


OVERLAY_RTL = ["axis_skid.v", "axis_frame_router.v", "axis_join2.v", "axis_order_merge.v"]
ATTENTION_ROUTE_MAGIC = ROUTE_MAGIC
ATT_MACS = 48
ATT_FIXED = {"heads_per_group": 3, "head_dim": 64, "macs": ATT_MACS}
#: the attention engine's parameters per KV width (the overlay's ``kv_bits``): INT16 K and V
#: (docs/attention.md 3.1) take a 21-bit exp table and a Z word with 16 fraction bits (the
#: widths that keep acc within 48 bits at context 2048 and Z within 32), and half the products
#: a clock at the same 128-bit joined beat (8 elements of 2 bytes: macs 24)
ATT_KV = {8: {}, 16: {"kv_bits": 16, "macs": ATT_MACS // 2, "exp_width": 21,
                      "scale_frac_bits": 16}}


def attention_params(kv_bits: int = PYNQ_Z1_KV_BITS) -> Dict[str, Any]:
    """The attention engine's parameters in the PYNQ-Z1 top with K and V of ``kv_bits`` (its
    generator defaults but these): what ``make sim``, ``make report``, ``make timing`` and
    ``make formal`` run as the PYNQ-Z1 attention engine (generators.designs.PYNQ_Z1)."""
    return dict({"macs": ATT_MACS}, **ATT_KV[kv_bits])

#: the top's widths, each defined here once (from the contract) and written into the template
#: and the manifest from these names: s{p}_axis carries one HP-port beat, m{p}_axis one result
#: word, the joiner puts one word of each port side by side for the attention engine
S_AXIS_BITS = 8 * HP_BEAT_BYTES           # 64
M_AXIS_BITS = 8 * RESULT_BYTES            # 32
JOIN_BITS = 2 * S_AXIS_BITS               # 128: port 0's word in [63:0], port 1's above
#: register stages of the glue on a matrix frame's way through port p (rtl/axis_skid.v is one
#: register stage; the router's and the merger's output slices are axis_skid instances): the
#: input slice and the router's output slice on both ports, the merger's slice on port 0 only
GLUE_STAGES = {0: ("in_slice", "router", "merge"), 1: ("in_slice", "router")}


@register
class Overlay(Design):
    name = "overlay"
    top = "pynq_overlay"
    summary = ("PYNQ-Z1 PL top: two DMA ports, a matrix engine per port (INT8, ternary and "
               "Q4_1 rows), the attention engine (INT16 K and V by default) fed from both ports "
               "through a joiner")
    params = (
        Param("max_k", int, 2048, "matrix engines: largest K (SmolLM2's largest is 1536)",
              min=1, max=65535),
        Param("max_context", int, 2048, "attention engine: largest context length", min=1,
              max=65535),
        Param("order_depth", int, 16, "frame-order FIFO entries of port 0's output merger "
              "(frames accepted but not yet answered)", min=8, max=1024, power_of_two=True),
        Param("q4", bool, True, "matrix engines: the third lane for llama.cpp Q4_1 rows (format "
              "0x04, docs/q4.md); false leaves INT8 and ternary only"),
        Param("vectors", int, PYNQ_Z1_VECTORS, "matrix engines: most activation vectors a frame "
              "may carry (docs/vectors.md; each weight read once, B results per row)", min=1,
              max=MAX_VECTORS),
        Param("kv_bits", int, PYNQ_Z1_KV_BITS, "attention engine: width of the K and V codes, 16 "
              "(INT16 KV, 24 MACs: answers closer to the float model) or 8 (INT8 KV, 48 MACs: "
              "half the cache and its read); "
              "docs/attention.md 3.1, docs/quality.md)", min=8, max=16),
    )

    # ---------------------------------------------------------------- sub-designs
    def matrix(self) -> Design:
        return build("mv-engine", dict(engine_params(self.p["vectors"], self.p["q4"]),
                                       max_k=self.p["max_k"], bytes=HP_BEAT_BYTES))

    def attention(self) -> Design:
        return build("attention-engine", dict(ATT_FIXED, **ATT_KV[self.p["kv_bits"]],
                                              max_context=self.p["max_context"]))

    def check(self) -> None:
        if self.p["kv_bits"] not in ATT_KV:
            raise ParameterError(f"overlay: kv_bits={self.p['kv_bits']} must be 8 or 16")
        self.matrix()
        att = self.attention()
        if 8 * att.bb != JOIN_BITS:
            raise ParameterError(f"overlay: the attention engine must take {JOIN_BITS}-bit beats "
                                 f"(one word of each port), not {8 * att.bb}")

    def latency(self) -> int:
        return self.matrix().latency()

    def port_latency(self) -> List[int]:
        """Matrix latency seen at each port (last input word's handshake on s{p}_axis to the
        first result's on m{p}_axis, free output): the matrix engine's latency plus one cycle
        per glue register stage on that port's way (GLUE_STAGES)."""
        return [self.latency() + len(GLUE_STAGES[p]) for p in (0, 1)]

    def context(self) -> Dict[str, Any]:
        return {"top": self.top, "summary": self.summary,
                "order_aw": self.p["order_depth"].bit_length() - 1,
                "s_bits": S_AXIS_BITS, "m_bits": M_AXIS_BITS, "join_bits": JOIN_BITS,
                "mat_top": self.matrix().top, "att_top": self.attention().top,
                "matrix_magic": MATRIX_MAGIC, "attention_magic": ATTENTION_MAGIC,
                "route_magic": ATTENTION_ROUTE_MAGIC}

    def templates(self) -> List[Tuple[str, str]]:
        return [("overlay.v.j2", f"{self.top}.v")]

    # ---------------------------------------------------------------- files
    def collect(self) -> List[Tuple[str, bytes]]:
        """(file name, content) of every source in compile order; one copy of each name.

        A name two designs both bring must have the same content (rtl/ copies), else the
        module definitions would collide."""
        files: Dict[str, bytes] = {}
        order: List[str] = []

        def add(name: str, data: bytes, who: str) -> None:
            if name in files:
                if files[name] != data:
                    raise ParameterError(f"overlay: {who} brings a {name} that differs from the "
                                         "one already collected (module name collision)")
                return
            files[name] = data
            order.append(name)

        for sub in (self.matrix(), self.attention()):
            for f in sub.rtl_files():
                add(f, (RTL_DIR / f).read_bytes(), sub.name)
            for fname, text in sub.render_texts().items():
                add(fname, text.encode(), sub.name)
        for f in OVERLAY_RTL:
            add(f, (RTL_DIR / f).read_bytes(), self.name)
        for fname, text in self.render_texts().items():
            add(fname, text.encode(), self.name)
        return [(n, files[n]) for n in order]

    def write(self, out_dir) -> Dict[str, Any]:
        files = self.collect()          # may raise: nothing written yet
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        for name, data in files:
            (out / name).write_bytes(data)
        man = self.manifest([n for n, _ in files])
        (out / "manifest.json").write_text(json.dumps(man, indent=2) + "\n")
        return man

    def extra_manifest(self) -> Dict[str, Any]:
        mat, att = self.matrix(), self.attention()
        ap = att.p
        return {
            "streams": [{"port": p, "s_axis": f"s{p}_axis", "s_axis_width": S_AXIS_BITS,
                         "m_axis": f"m{p}_axis", "m_axis_width": M_AXIS_BITS} for p in (0, 1)],
            "matrix": {"formats": mat.formats(), "max_k": mat.p["max_k"], "bytes": mat.p["bytes"],
                       "latency": mat.latency(), "port_latency": self.port_latency(),
                       "vectors": mat.p["vectors"],
                       # per-block x formats the Q4_1 lane takes too (0x05, docs/activations.md)
                       "block_formats": mat.extra_manifest().get("block_formats", []),
                       "module": mat.top},
            "attention": {"heads_per_group": ap["heads_per_group"], "head_dim": ap["head_dim"],
                          "max_context": ap["max_context"], "macs": ap["macs"],
                          "beat_bytes": att.bb, "latency": att.latency(),
                          "exp_depth": ap["exp_depth"], "exp_width": ap["exp_width"],
                          "exp_steps_per_octave": ap["exp_steps_per_octave"],
                          "scale_frac_bits": ap["scale_frac_bits"], "kv_bits": ap["kv_bits"],
                          "fifo_depth": ap["fifo_depth"], "module": att.top},
            "route": {"matrix_magic": MATRIX_MAGIC, "attention_magic": ATTENTION_MAGIC,
                      "attention_route_magic": ATTENTION_ROUTE_MAGIC},
            # the clock the latency and speed figures assume (contract: 1 GHz / 7); the Verilog
            # declares no FREQ_HZ on aclk: Vivado propagates the PS7's actual FCLK_CLK0
            "fclk_hz": FCLK_HZ,
        }
