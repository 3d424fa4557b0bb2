"""`attention-engine`: GQA decode attention for one KV head group per frame (docs/attention.md).

The exp table contents come from :func:`generators.attention_tables.exp_table`, the same function
the golden model (generators/golden/attention.py) uses.
"""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

from ..attention_tables import check_table_params, exp_table
from ..core import Design, Param, ParameterError, register

BEAT_WIDTHS = (8, 16)   # beat bytes implemented in RTL: 64-bit or 128-bit s_axis
MAGIC = 0xA77E
# Fixed pipeline figures of the template (cycles); see docs/attention.md section 8.
IN_REG = 1              # input register: the FSM sees a beat one cycle after its handshake
TRIG_DELAY = 4          # V row start -> score RAM read: covers the K pipeline (max final)
W_PIPE = 5              # weight pipeline: e, e*MULT+rnd, >>SHIFT, table read, p register
FIN_WAIT_BASE = 3       # after the V MAC pipeline: product, RMW (sum registered), A; plus the
                        # |acc| row maximum tree (log2(beat bytes) registered levels)
OUT_REG = 1             # output words are registered before the FIFO write


def _sx(sig: str, fw: int, tw: int) -> str:
    """Verilog text: `sig` (fw bits) sign-extended to tw bits."""
    return sig if tw == fw else f"{{{{{tw - fw}{{{sig}[{fw - 1}]}}}}, {sig}}}"


def _zx(sig: str, fw: int, tw: int) -> str:
    """Verilog text: `sig` (fw bits) zero-extended to tw bits."""
    return sig if tw == fw else f"{{{{{tw - fw}{{1'b0}}}}, {sig}}}"


def _clog2(n: int) -> int:
    return max(1, (n - 1).bit_length())


@register
class AttentionEngine(Design):
    name = "attention-engine"
    top = "attention_engine"
    summary = "GQA decode attention: INT8 q.K, exp table in BRAM, p.V, exact INT8 output"
    params = (
        Param("heads_per_group", int, 3, "query heads per KV head (G), one frame each", min=1,
              max=8),
        Param("head_dim", int, 64, "elements per head (d), a multiple of 8", min=8, max=256),
        Param("max_context", int, 2048, "largest context length L accepted", min=1,
              max=65535),
        Param("macs", int, 24, "multiply-accumulates per clock = heads_per_group x beat bytes; "
              "8-byte (8 x G, 64-bit s_axis) or 16-byte (16 x G, 128-bit s_axis) beats",
              min=1, max=128),
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
    def bb(self) -> int:
        """Bytes per input beat: macs / heads_per_group (8 or 16)."""
        return self.p["macs"] // self.G

    @property
    def max_tree(self) -> int:
        """Registered levels of the |acc| row-maximum tree over the lanes of a beat."""
        return self.bb.bit_length() - 1

    @property
    def rb(self) -> int:
        return self.p["head_dim"] // self.bb

    @property
    def hb(self) -> int:
        return -(-(8 + 4 * self.G) // self.bb)

    @property
    def out_words(self) -> int:
        return self.G * self.p["head_dim"] // 4 + self.G

    def check(self) -> None:
        G, d = self.G, self.p["head_dim"]
        if self.p["macs"] not in tuple(b * G for b in BEAT_WIDTHS):
            raise ParameterError(
                f"design {self.name}: macs={self.p['macs']} must be 8 x heads_per_group = "
                f"{8 * G} (8-byte beats) or 16 x heads_per_group = {16 * G} (16-byte beats; "
                f"one beat of K or V used by every head)")
        bb = self.bb
        if d % bb:
            raise ParameterError(
                f"design {self.name}: head_dim={d} must be a multiple of {bb} (the beat bytes)")
        if self.hb < 2:
            raise ParameterError(
                f"design {self.name}: the header must span at least 2 beats; with 16-byte "
                f"beats heads_per_group={G} must be >= 3 (use macs={8 * G})")
        if self.rb < G:
            raise ParameterError(
                f"design {self.name}: head_dim/{bb} = {self.rb} row beats must be >= "
                f"heads_per_group = {G} (one time-multiplexed weight unit serves all heads)")
        try:
            check_table_params(self.p["exp_depth"], self.p["exp_width"],
                               self.p["exp_steps_per_octave"])
        except ValueError as exc:
            raise ParameterError(f"design {self.name}: {exc}") from None
        if self.p["fifo_depth"] < self.out_words + 4:
            raise ParameterError(
                f"design {self.name}: fifo_depth={self.p['fifo_depth']} cannot hold one "
                f"frame's {self.out_words + 1} output words plus a margin")

    # ------------------------------------------------------------------ latency
    def v_delay(self) -> int:
        """Delay-line depth of the V beats (V input register -> MAC stage)."""
        return TRIG_DELAY + self.G + W_PIPE - 1

    def fin_wait(self) -> int:
        """Cycles the finisher waits after tlast for every in-flight beat to land."""
        return self.v_delay() + FIN_WAIT_BASE + self.max_tree

    def y_latency(self) -> int:
        """Result path: accumulator read register, divider input register, 8 quotient stages,
        rounding-bit register, result register."""
        return 1 + 1 + 8 + 2

    def z_bits(self) -> int:
        return self.p["scale_frac_bits"] + 8

    def latency(self) -> int:
        """Cycles from the tlast handshake of a good frame to the status word's handshake
        with a free output (the frame's fixed overhead on top of its beats).

        The FSM sees the tlast beat IN_REG cycles after its handshake. Then the finisher waits
        fin_wait() cycles, checks the FIFO room (1 cycle) and
        issues one result word per cycle (NY words); each word spends y_latency() cycles in
        the divider and rounding registers before it is written to the FIFO. The Z dividers
        start with the first result word and take z_bits() steps. When both are done (one
        cycle to see it), the G scale words and the status word are written, one per cycle,
        and the status word's handshake follows one cycle after its write, which is
        registered (OUT_REG) in front of the FIFO.
        """
        ny = self.G * self.p["head_dim"] // 4
        y_seen = ny + 1 + self.y_latency() + 2      # last result word written and counted
        z_seen = self.z_bits() + 4                   # Z dividers done and seen
        return IN_REG + self.fin_wait() + max(y_seen, z_seen) + self.G + 2 + OUT_REG

    # ------------------------------------------------------------------ rendering
    def context(self) -> Dict[str, Any]:
        G, d, L = self.G, self.p["head_dim"], self.p["max_context"]
        W = self.p["exp_width"]
        sb = (d << 14).bit_length() + 1
        # accumulator: holds L * (2^W - 1) * 128 signed, and at least one p * v product
        ab = max((L * ((1 << W) - 1) * 128).bit_length() + 1, W + 9)
        sw = (L * ((1 << W) - 1)).bit_length()
        F = self.p["scale_frac_bits"]
        table = exp_table(self.p["exp_depth"], W, self.p["exp_steps_per_octave"])
        # scale word g: byte offset 8 + 4g -> (beat, byte within beat)
        bb = self.bb
        scales = [((8 + 4 * g) // bb, (8 + 4 * g) % bb) for g in range(G)]
        # 4-byte slots (beat, slot) that carry a scale word; the last header beat's are checked
        # as it arrives, the earlier beats' are collected into a flag
        slots: Dict[int, List[int]] = {}
        for beat, pos in scales:
            slots.setdefault(beat, []).append(pos // 4)
        fmt_last = slots.get(self.hb - 1, [])
        fmt_mid = [(b, slots[b]) for b in sorted(slots) if b != self.hb - 1]
        return {
            "top": self.top, "G": G, "BB": bb, "MT": self.max_tree,
            "PSB": (bb << 14).bit_length() + 1, "D": d, "RB": self.rb, "HB": self.hb, "LMAX": L,
            "TW": _clog2(L), "RBW": _clog2(self.rb), "GW": _clog2(G), "HBW": _clog2(self.hb),
            "SB": sb, "AB": ab, "AZP": -(-ab // 6),
            "P1W": min(48, _clog2(self.p["exp_depth"]) + 15), "SWID": sw, "W": W, "F": F,
            "EDEPTH": self.p["exp_depth"], "EAW": _clog2(self.p["exp_depth"]),
            "table": table, "scales": scales, "magic": MAGIC,
            "fmt_last_slots": fmt_last, "fmt_mid_beats": fmt_mid,
            "NY": G * d // 4, "NYW": _clog2(G * d // 4 + 1), "out_words": self.out_words,
            "ZQ": self.z_bits(), "ZN": max(ab + F + 1, sw) + 1, "ZD": sw + 1,
            "TRIG_DELAY": TRIG_DELAY, "V_DELAY": self.v_delay(), "FIN_WAIT": self.fin_wait(),
            "fifo_addr_w": self.p["fifo_depth"].bit_length() - 1,
            "fifo_margin": self.out_words + 2,
            "sx": _sx, "zx": _zx,
        }

    def rtl_files(self) -> List[str]:
        return ["sync_fifo.v", "delay_line.v", "attention_div_pipe.v", "attention_div_seq.v"]

    def templates(self) -> List[Tuple[str, str]]:
        return [("attention_engine.v.j2", f"{self.top}.v")]

    def extra_manifest(self) -> Dict[str, Any]:
        return {"bytes": self.bb, "beat_bytes": self.bb, "macs": self.p["macs"],
                "output_words": self.out_words + 1}
