"""`attention-engine`: GQA decode attention for one KV head group per frame (docs/attention.md).

The exp table contents come from :func:`generators.attention_tables.exp_table`, the same function
the golden model (generators/golden/attention.py) uses.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Tuple

from ..adder_tree import Tree, build_tree, cadence_registers, tree_depth
from ..attention_tables import check_table_params, exp_table
from ..core import Design, Param, ParameterError, register
from ..contract import ATTENTION_MAGIC

BEAT_WIDTHS = (8, 16)   # beat bytes implemented in RTL: 64-bit or 128-bit s_axis
KV_WIDTHS = (8, 16)     # K and V code widths implemented in RTL: INT8 or INT16 (little-endian)
EP_A_BITS = 24          # widest unsigned e one DSP48E1 takes on its 25-bit signed A port
MAGIC = ATTENTION_MAGIC
K_TREE_EVERY = 1         # the K adder tree: every level registered (docs/timing.md)


def k_tree_registers(depth: int):
    """The K tree's registered levels: after level 1 (the q*k products leave their DSP48s
    summed in pairs, in the second one's P register: docs/timing.md), then every
    K_TREE_EVERY levels and at the output."""
    return {1} | {1 + lv for lv in cadence_registers(depth - 1, K_TREE_EVERY)}


def _clog2(n: int) -> int:
    return max(1, (n - 1).bit_length())


# ---------------------------------------------------------------------------- latency model
@dataclass(frozen=True)
class AttentionTiming:
    """The one latency model of the attention engine: every pipeline delay of the RTL is a
    field or a derived figure here, passed to the Verilog as a parameter (nothing in the
    template repeats a stage count). Cycle figures are register stages.

    Timeline of one frame (cycle numbers relative to handshakes on the ports):

    - input register: the FSM sees a beat `in_reg` cycles after its handshake.
    - K pass: K1 (beat and q slice registered), K2 (products), the adder tree's registers,
      K4 (row accumulate) and the score RAM write: a row's score is readable `k_visible`
      cycles after the row's last beat leaves the input register.
    - weight unit: a V row's first beat, `trig_delay` cycles after the V input register,
      reads the score RAM (`score_read` cycles: BRAM read and output register), then per head,
      one per clock, `w_pipe` stages (every head's e registered, e selected, e*MULT (two
      stages when `ep_split`), >>SHIFT,
      table read, table output register, weight register).
    - V pass: the V beats wait `v_delay` cycles so the last head's weight is there when the
      row's first beat reaches the p*v products.
    - drain: the finisher takes a frame `fin_wait` cycles after the FSM saw its tlast (A and S
      final: product operands registered, product (M register), accumulate (P register),
      order key, |acc| tree, A).
    - finisher: room check, NY result words issued one per clock through the `y_latency`
      divider pipeline while the Z dividers run `z_bits` steps, G scale words, status word.
    """
    heads: int              # G
    row_beats: int          # Rb
    beat_bytes: int         # 8 or 16
    result_words: int       # NY = G*d/4
    z_bits: int             # Z quotient bits (F + kv_bits)
    k_tree_regs: int        # registered levels of the per-head K adder tree
    max_tree: int           # registered levels of the |acc| maximum tree (log2 beat bytes)
    ep_split: int = 0       # e*MULT+rnd over two cascaded DSP48Es (e wider than EP_A_BITS:
                            # INT16 K): the low 17 bits of e, then the high bits plus the
                            # first product >> 17, one more weight stage
    in_reg: int = 1         # input register in front of the FSM
    score_read: int = 2     # score BRAM: read register + output register
    w_stages: int = 7       # weight unit: every head's e, e selected, e*MULT+rnd, shift,
                            # ROM read, ROM out reg, p reg
    drain_base: int = 6     # after the V delay: p*v operands registered (the DSP48's A and B
                            # registers), product (M register), accumulate (P register),
                            # order key registered, the maximum's compare, A written
    y_latency: int = 12     # result path: acc read reg, divider input reg, 8 quotient
                            # stages, rounding-bit register, result register
    pending: int = 2        # drain delay line output -> pending register -> finisher take
    out_reg: int = 1        # output words are registered before the FIFO write
    fifo_out: int = 1       # FIFO: a written word is presented the next cycle

    # ---------------------------------------------------------------- pipeline delays
    @property
    def k_visible(self) -> int:
        """K1 output -> score (and running maximum) readable: product, tree registers,
        row accumulate, RAM write."""
        return 1 + self.k_tree_regs + 1 + 1

    @property
    def trig_delay(self) -> int:
        """V input register (a row's first beat) -> score RAM read address: the K pipeline
        has written the last score and the maximum by then (K1 and V0 are the same stage)."""
        return self.k_visible

    @property
    def w_pipe(self) -> int:
        """Score RAM read -> head 0's weight register written (visible the cycle after)."""
        return self.score_read - 1 + self.w_stages + self.ep_split

    @property
    def v_delay(self) -> int:
        """V input register -> p*v stage: the last head's weight (head G-1, G-1 clocks after
        head 0) is visible when the row's first beat arrives."""
        return self.trig_delay + self.w_pipe + self.heads - 1

    @property
    def fin_wait(self) -> int:
        """FSM sees tlast -> the frame's event leaves the drain delay line (every in-flight
        beat landed, A and S final)."""
        return self.v_delay + self.drain_base + self.max_tree

    # ---------------------------------------------------------------- finisher and frame
    @property
    def to_finisher(self) -> int:
        """E: tlast handshake -> the finisher's room phase (finisher idle)."""
        return self.in_reg + self.fin_wait + self.pending

    @property
    def finisher_busy(self) -> int:
        """T: room phase -> status word written (free output). The room check takes a cycle,
        then NY result words are issued one per clock and leave the divider pipeline
        `y_latency` cycles later (the last one counted a cycle after), while the Z dividers
        (started with the first word) take `z_bits` steps (done seen 3 cycles after their
        start); when both are done the G scale words and then the status word are written."""
        y_seen = self.result_words + self.y_latency + 3
        z_seen = self.z_bits + 4
        return max(y_seen, z_seen) + self.heads - 1

    @property
    def finisher_turnaround(self) -> int:
        """J: status word written -> the next frame's room phase (idle, take)."""
        return 2

    @property
    def latency(self) -> int:
        """tlast handshake -> status word handshake, one frame alone, free output."""
        return self.to_finisher + self.finisher_busy + self.out_reg + self.fifo_out

    @property
    def output_words(self) -> int:
        return self.result_words + self.heads + 1

    def period(self, beats: int) -> float:
        """Cycles per frame, back to back, free output (steady state): the input (one beat per
        clock), the finisher (one frame at a time), or the two-frame handoff (a frame starts
        only when the finisher has written the status of the frame before the previous one:
        the accumulators, A, S and the scale words are double-buffered)."""
        return max(beats, self.finisher_busy + self.finisher_turnaround,
                   (beats + self.to_finisher + self.finisher_busy) / 2)

    def schedule(self, beats: int, frames: int, first: int = 0) -> List[Dict[str, int]]:
        """Cycle of every frame's first beat, tlast and status handshake, back to back with
        a free output and a source that is always valid (the recurrences of the RTL)."""
        out, stat = [], []            # stat[k]: cycle the status word of frame k is written
        s = first
        for k in range(frames):
            t = s + beats - 1
            room = t + self.to_finisher
            if stat:
                room = max(room, stat[-1] + self.finisher_turnaround)
            stat.append(room + self.finisher_busy)
            out.append({"first": s, "tlast": t, "status": stat[-1] + self.out_reg + self.fifo_out})
            s = t + 1 if k == 0 else max(t + 1, stat[-2] + 1)
        return out


@register
class AttentionEngine(Design):
    name = "attention-engine"
    top = "attention_engine"
    summary = ("GQA decode attention: INT8 q, INT8 or INT16 K and V, exp table in BRAM, p.V, "
               "exact INT8 output")
    params = (
        Param("heads_per_group", int, 3, "query heads per KV head (G), one frame each", min=1,
              max=8),
        Param("head_dim", int, 64, "elements per head (d), a multiple of 8", min=8, max=256),
        Param("max_context", int, 2048, "largest context length L accepted", min=1,
              max=65535),
        Param("macs", int, 24, "multiply-accumulates per clock = heads_per_group x K or V "
              "elements per beat (beat bytes = macs x kv_bits / 8 / heads_per_group); INT8: "
              "8-byte (8 x G, 64-bit s_axis) or 16-byte (16 x G, 128-bit s_axis) beats; INT16: "
              "8-byte (4 x G) or 16-byte (8 x G) beats", min=1, max=128),
        Param("kv_bits", int, 8, "width of the K and V codes: 8 (INT8, one byte an element) or "
              "16 (INT16, two bytes little-endian; needs exp_width <= 21 at max_context 2048 "
              "and scale_frac_bits <= 16)", choices=KV_WIDTHS),
        Param("exp_depth", int, 4096, "exp table entries", min=16, max=65536),
        Param("exp_width", int, 24, "exp table entry width in bits (DSP A port)", min=2, max=24),
        Param("exp_steps_per_octave", int, 170, "table entries per halving of the weight",
              min=1, max=4096),
        Param("scale_frac_bits", int, 24, "fraction bits of the Z scale word", min=0, max=24),
        Param("fifo_depth", int, 64, "output FIFO words (must hold one frame's output)",
              min=16, max=4096, power_of_two=True),
    )

    # ------------------------------------------------------------------ derived figures
    @property
    def G(self) -> int:
        return self.p["heads_per_group"]

    @property
    def kvb(self) -> int:
        """Bytes of one K or V element: 1 (INT8) or 2 (INT16)."""
        return self.p["kv_bits"] // 8

    @property
    def ne(self) -> int:
        """K or V elements per beat (the products of one head per clock): macs /
        heads_per_group."""
        return self.p["macs"] // self.G

    @property
    def bb(self) -> int:
        """Bytes per input beat: macs x kv_bytes / heads_per_group (8 or 16)."""
        return self.ne * self.kvb

    @property
    def max_tree(self) -> int:
        """Registered levels of the |acc| row-maximum tree over the V lanes of a beat."""
        return self.ne.bit_length() - 1

    @property
    def rb(self) -> int:
        """Beats per K or V row: head_dim x kv_bytes / beat bytes."""
        return self.p["head_dim"] * self.kvb // self.bb

    @property
    def score_bits(self) -> int:
        """Signed width of a score q.k (golden AttentionConfig.score_bits)."""
        return (self.p["head_dim"] << (6 + self.p["kv_bits"])).bit_length() + 1

    @property
    def ep_split(self) -> int:
        """1 when e = m - s (score_bits - 1 bits unsigned) is wider than one DSP48E1's A port:
        e*MULT then takes two cascaded DSPs and one more stage (INT16 K)."""
        return int(self.score_bits - 1 > EP_A_BITS)

    @property
    def hb(self) -> int:
        return -(-(8 + 4 * self.G) // self.bb)

    @property
    def out_words(self) -> int:
        return self.G * self.p["head_dim"] // 4 + self.G

    def check(self) -> None:
        G, d = self.G, self.p["head_dim"]
        kvb = self.kvb
        if self.p["macs"] not in tuple(b // kvb * G for b in BEAT_WIDTHS):
            kind = f"INT{self.p['kv_bits']} (kv_bits={self.p['kv_bits']})"
            raise ParameterError(
                f"design {self.name}: macs={self.p['macs']} must be {8 // kvb} x "
                f"heads_per_group = {8 // kvb * G} (8-byte beats) or {16 // kvb} x "
                f"heads_per_group = {16 // kvb * G} (16-byte beats) with {kind} K and V "
                f"(macs = heads_per_group x K or V elements per beat; one beat of K or V used "
                f"by every head)")
        self._check_kv_widths()
        bb = self.bb
        if d % bb:
            raise ParameterError(
                f"design {self.name}: head_dim={d} must be a multiple of {bb} (the beat bytes)")
        if self.hb < 2:
            raise ParameterError(
                f"design {self.name}: the header must span at least 2 beats; with 16-byte "
                f"beats heads_per_group={G} must be >= 3 (use macs={8 // kvb * G})")
        if self.rb < G:
            raise ParameterError(
                f"design {self.name}: head_dim x {kvb}/{bb} = {self.rb} row beats must be "
                f">= heads_per_group = {G} (one time-multiplexed weight unit serves all heads)")
        try:
            check_table_params(self.p["exp_depth"], self.p["exp_width"],
                               self.p["exp_steps_per_octave"])
        except ValueError as exc:
            raise ParameterError(f"design {self.name}: {exc}") from None
        if self.p["fifo_depth"] < self.out_words + 4:
            raise ParameterError(
                f"design {self.name}: fifo_depth={self.p['fifo_depth']} cannot hold one "
                f"frame's {self.out_words + 1} output words plus a margin")

    def _check_kv_widths(self) -> None:
        """The widths the RTL fixes for a K and V code of kv_bits (the inequalities of the
        golden model's kv_widths_ok, repeated here: this module does not import the golden
        model): acc = p @ V in a DSP48E1's 48-bit signed accumulator, Z in 32 unsigned bits.
        Every INT8 configuration passes."""
        kv, W, F = self.p["kv_bits"], self.p["exp_width"], self.p["scale_frac_bits"]
        lmax = self.p["max_context"]
        acc = (lmax * ((1 << W) - 1) << (kv - 1)).bit_length() + 1
        if acc > 48:
            widest = max([w for w in range(2, W) if
                          (lmax * ((1 << w) - 1) << (kv - 1)).bit_length() + 1 <= 48] or [2])
            raise ParameterError(
                f"design {self.name}: kv_bits={kv} with exp_width={W} and max_context={lmax}: "
                f"acc = p x V needs {acc} bits > 48 (a DSP48E1 accumulator); use "
                f"exp_width <= {widest} or a smaller max_context")
        if (kv - 1) + F > 31:
            raise ParameterError(
                f"design {self.name}: kv_bits={kv} with scale_frac_bits={F}: Z reaches "
                f"2**{kv - 1 + F} > 2**31; use scale_frac_bits <= {32 - kv}")

    # ------------------------------------------------------------------ latency
    def k_tree(self, g: int = 0) -> Tree:
        """The per-head K-pass adder tree over the beat's products q*k, INT8 q times a K code
        of kv_bits (leaves kp<g>_<j>, one per K element of the beat, range
        [-128 * (2**(kv_bits-1) - 1), 128 * 2**(kv_bits-1)]), registered at k_tree_registers:
        after level 1, every K_TREE_EVERY levels after it and at its output."""
        ne, h = self.ne, 1 << (self.p["kv_bits"] - 1)
        leaves = [(f"kp{g}_{j}", -128 * (h - 1), 128 * h) for j in range(ne)]
        return build_tree(leaves, k_tree_registers(tree_depth(ne)), prefix=f"kt{g}_")

    def k_tree_reg_levels(self) -> int:
        """The K tree's registered levels as the bit mask rtl/attention_core.v takes (bit l-1:
        level l), checked against the widths that module builds (level l at 8 + kv_bits + l
        bits)."""
        tree = self.k_tree()
        kpw = 8 + self.p["kv_bits"]
        if tree.depth != self.max_tree or tree.out.width != kpw + tree.depth:
            raise RuntimeError(f"rtl/attention_core.v builds the K tree at {kpw} + level bits")
        return sum(1 << (lv.index - 1) for lv in tree.levels if lv.registered)

    def timing(self) -> AttentionTiming:
        """The latency model (one object; every delay of the RTL comes from it)."""
        return AttentionTiming(heads=self.G, row_beats=self.rb, beat_bytes=self.bb,
                               result_words=self.G * self.p["head_dim"] // 4,
                               z_bits=self.p["scale_frac_bits"] + self.p["kv_bits"],
                               k_tree_regs=self.k_tree().registers, max_tree=self.max_tree,
                               ep_split=self.ep_split)

    def v_delay(self) -> int:
        return self.timing().v_delay

    def fin_wait(self) -> int:
        return self.timing().fin_wait

    def latency(self) -> int:
        """Cycles from the tlast handshake of a good frame to the status word's handshake
        with a free output, one frame alone (AttentionTiming.latency)."""
        return self.timing().latency

    # ------------------------------------------------------------------ rendering
    def context(self) -> Dict[str, Any]:
        """What the templates emit: the design's parameters and the latency model's delays for
        rtl/attention_core.v (which derives every width itself), and the exp table contents."""
        tm = self.timing()
        table = exp_table(self.p["exp_depth"], self.p["exp_width"],
                          self.p["exp_steps_per_octave"])
        return {
            "top": self.top, "G": self.G, "BB": self.bb, "D": self.p["head_dim"],
            "KV_BITS": self.p["kv_bits"], "EP_SPLIT": tm.ep_split, "NE": self.ne,
            "LMAX": self.p["max_context"], "W": self.p["exp_width"],
            "F": self.p["scale_frac_bits"], "EDEPTH": self.p["exp_depth"],
            "EAW": _clog2(self.p["exp_depth"]), "table": table, "magic": MAGIC,
            "ZQ": tm.z_bits, "TRIG_DELAY": tm.trig_delay, "V_DELAY": tm.v_delay,
            "FIN_WAIT": tm.fin_wait, "k_tree_reg_levels": self.k_tree_reg_levels(), "tm": tm,
            "fifo_addr_w": self.p["fifo_depth"].bit_length() - 1,
            "fifo_margin": self.out_words + 2,
        }

    def rtl_files(self) -> List[str]:
        return ["sync_fifo.v", "delay_line.v", "attention_div_pipe.v", "attention_div_seq.v",
                "attention_core.v"]

    def templates(self) -> List[Tuple[str, str]]:
        return [("attention_exp_rom.v.j2", f"{self.top}_exp_rom.v"),
                ("attention_engine.v.j2", f"{self.top}.v")]

    def extra_manifest(self) -> Dict[str, Any]:
        tm = self.timing()
        return {"bytes": self.bb, "beat_bytes": self.bb, "macs": self.p["macs"],
                "kv_bits": self.p["kv_bits"], "exp_width": self.p["exp_width"],
                "scale_frac_bits": self.p["scale_frac_bits"],
                "output_words": self.out_words + 1,
                "timing": {"v_delay": tm.v_delay, "trig_delay": tm.trig_delay,
                           "fin_wait": tm.fin_wait, "to_finisher": tm.to_finisher,
                           "finisher_busy": tm.finisher_busy,
                           "finisher_turnaround": tm.finisher_turnaround,
                           "out_reg": tm.out_reg, "fifo_out": tm.fifo_out,
                           "ep_split": tm.ep_split, "w_pipe": tm.w_pipe}}
