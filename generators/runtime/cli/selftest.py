"""``ternary-pynq selftest``: the first command a board owner runs.

1. **Environment**: Python, numpy and pynq against the board image table
   (generators/board_image.py), root, the board's free CMA against the memory plan of SmolLM2
   Q4_1 at context 2048 (and the test's own buffers), FCLK0, every DMA parameter of the .hwh
   the runtime depends on (backends.DMA_PARAMETERS), the write barrier, and that pynq can
   invalidate a cached buffer by range (XRT's xclSyncBO: the decoder reads its results
   region, which the DMAs write, through the CPU's caches after invalidating the lines it
   reads; board.invalidate_probe).
2. **Every engine of the bitstream, every output word**: random frames through both ports,
   INT8, ternary and (where the overlay has the lane) Q4_1 matrix frames of random shapes,
   with one INT8 step per x vector (0x04) and with Q8_1 x blocks (0x05, what ``--format q4``
   sends: docs/activations.md), Q8_0 rows with Q8_0 x blocks (0x09, the LM head), each where
   the overlay lists it,
   B-vector frames (B = 1 .. the engines' vectors), attention frames split over the two ports,
   and bad frames (a wrong magic, a frame cut short, an attention header of the wrong shape)
   which the engines answer with their status word. Every output word of both ports is
   compared with the golden models (generators.golden.overlay.overlay_outputs, which shares
   no code with the RTL). Frames go through the DMAs in scatter-gather mode with descriptor
   chains of their own (one MM2S descriptor per frame, one S2MM descriptor per expected
   answer with room to spare, so a longer or shorter answer shows).
3. **Speed**: large INT8 matrix frames on port 0 alone, port 1 alone and both together: bytes
   read per second (GB/s) and weights per second (G weights/s), each labelled: measured on
   the board; simulated on the rtl backend (its clock cycles at FCLK0 142.857 MHz, the DDR
   wall not modelled); the register model (``--backend golden``) has no speed and says so.

A progress line on stderr, the write-up's Stage 2-4 table (rows checked, mismatches, GB/s,
G weights/s), a one-line verdict, exit 1 on any mismatch or failed check, and a JSON file
(``--json``, default ``selftest.json``) the owner can send back.
"""
from __future__ import annotations

import dataclasses
import json
import os
import platform
import sys
import tempfile
import threading
import time
from multiprocessing.connection import Listener
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from generators import __version__
from generators.board_image import BOARD_IMAGE, ImageError, check_image
from generators.contract import FCLK_MHZ, FCLK_TOLERANCE_MHZ
from generators.cosim import runner
from generators.designs.overlay import Overlay
from generators.golden import attention as gatt
from generators.golden import mv as gmv
from generators.golden.overlay import overlay_outputs
from generators.packing import build_frame, split_attention_frame
from generators.q4 import build_q4_frame, build_q4_q8_1_frame, pack_q4_rows
from generators.q8 import build_q8_0_frame, pack_q8_0_rows

from ..engines import pg021 as R
from ..engines.board import DMA_PARAMETERS, invalidate_probe, overlay_parameters
from ..engines.link import RemoteMmio, SimLink, accept
from ..engines.plan import MIB, cma_mib, memory_plan, model_shape
from ..engines.regmodel import GoldenFabric, Memory, SgDmaRegs
from ..engines.rtl import SIM_MODULE
from ..engines.runtime import write_barrier
from ..engines.sgdma import MM2S, S2MM, SgDma
from ..errors import BackendError, UsageError
from ..model.checkpoint import PYNQ_Z1_ENGINES, EngineConfig, ModelConfig
from ..model.synthetic import SMOLLM2_135M
from .. import optional

__all__ = ["run_selftest", "Target", "model_target", "rtl_target", "board_target",
           "SelftestError"]

#: the test's DMA memory: frames in, answers out, descriptors
ARENA_BYTES = 24 << 20
KINDS = ("int8", "ternary", "q4", "q4_q8_1", "q8_0", "attention", "bad")
FMT = {"int8": gmv.FMT_INT8, "ternary": gmv.FMT_TERNARY, "q4": gmv.FMT_Q4,
       "q4_q8_1": gmv.FMT_Q4_Q8_1, "q8_0": gmv.FMT_Q8_0}


def overlay_formats(man: Optional[Dict] = None) -> Tuple[int, ...]:
    """The matrix frame formats an overlay takes: its manifest's ``matrix.formats`` and
    ``matrix.block_formats`` (per-block x); without a manifest, the PYNQ-Z1 overlay's (the
    generator's defaults, as the bitstream is built)."""
    m = (man or {"matrix": Overlay({}).extra_manifest()["matrix"]})["matrix"]
    return tuple(int(f) for f in list(m.get("formats", (8, 3))) + list(m.get("block_formats", [])))


class SelftestError(BackendError):
    """The test could not run (not a mismatch: a check that failed before any frame)."""


@dataclasses.dataclass
class Target:
    """What the self-test drives: two DMAs, DMA memory, the engines behind them, a clock."""
    name: str
    dmas: List[SgDma]
    allocate: Callable
    engines: EngineConfig
    formats: Tuple[int, ...]
    #: "measured" (the board), "simulated" (rtl), None (the register model: no speed)
    speed_label: Optional[str]
    #: seconds of engine time so far (board: wall clock; rtl: simulated cycles / FCLK0)
    seconds: Callable[[], float]
    barrier: Callable[[], None] = lambda: None
    close: Callable[[], None] = lambda: None
    #: the environment checks of this target: (name, ok or None when not applicable, detail)
    checks: List[Tuple[str, Optional[bool], str]] = dataclasses.field(default_factory=list)


# --------------------------------------------------------------------------- targets

def model_target(engines: EngineConfig = PYNQ_Z1_ENGINES, formats: Optional[Sequence[int]] = None,
                 fabric_hook: Optional[Callable] = None) -> Target:
    """The AXI DMA register model with the golden PL top behind it, in this process
    (``formats``: the matrix engines', default the PYNQ-Z1 overlay's; ``fabric_hook(fabric)``:
    lets a test break the fabric)."""
    formats = overlay_formats() if formats is None else tuple(formats)
    mem = Memory(None, ARENA_BYTES + (1 << 20))
    fab = GoldenFabric(mem, engines.max_k, engines.attention_config(), formats, False,
                       engines.vectors)
    if fabric_hook is not None:
        fabric_hook(fab)
    regs = [SgDmaRegs(p, fab, mem) for p in (0, 1)]
    return Target("register model", [SgDma(regs[p], f"dma_{p}") for p in (0, 1)],
                  mem.allocate, engines, tuple(formats), None,
                  lambda: regs[0].busy_s + regs[1].busy_s, barrier=mem.barrier)


def rtl_target(params: Optional[Dict] = None, simulator: str = "verilator",
               timeout_s: float = 600.0) -> Target:
    """The rendered overlay top in a cocotb simulation (the rtl backend's simulator side,
    generators/runtime/engines/rtl_sim.py), DDR a file both processes map."""


    params = dict(params or {"max_k": PYNQ_Z1_ENGINES.max_k,
                             "max_context": PYNQ_Z1_ENGINES.max_context})
    man = runner.render("overlay", params)
    engines = EngineConfig.from_manifest(man)
    formats = overlay_formats(man)
    tmp = Path(tempfile.mkdtemp(prefix="selftest-rtl-"))
    size = ARENA_BYTES + (1 << 20)
    mem = Memory(str(tmp / "ddr"), size)
    sock = str(tmp / "sock")
    listener = Listener(sock, "AF_UNIX")
    state = {"error": None}

    def sim():
        try:
            runner.run("overlay", params, simulator, SIM_MODULE,
                       name="selftest", extra_env={"TB_RT_SOCKET": sock,
                                                   "TB_RT_DDR": str(tmp / "ddr"),
                                                   "TB_RT_DDR_SIZE": str(size),
                                                   "TB_RT_DIRECT": "1" if simulator ==
                                                   "verilator" else "0"})
        except BaseException as exc:
            state["error"] = exc

    th = threading.Thread(target=sim, daemon=True)
    th.start()
    try:
        conn = accept(listener, th.is_alive, 1800.0, f"the {simulator} simulation")
    finally:
        listener.close()
    link = SimLink(conn, timeout_s, f"the {simulator} simulation")

    def close():
        try:
            link.ask(("q",))
        except BackendError:
            pass
        conn.close()
        th.join(timeout=120)
        mem.close()
        for f in tmp.iterdir():
            f.unlink()
        tmp.rmdir()
        if state["error"] is not None:
            raise BackendError(f"the simulation failed: {state['error']}")

    return Target(f"rtl ({simulator})", [SgDma(RemoteMmio(link, p), f"dma_{p}") for p in (0, 1)],
                  mem.allocate, engines, formats, "simulated",
                  lambda: link.ask(("c",))[0] / (FCLK_MHZ * 1e6), close=close)


def board_target(bitfile: str, download: bool = True, meminfo: str = "/proc/meminfo") -> Target:
    """The PYNQ-Z1: the overlay loaded, its two DMAs through pynq.MMIO, pynq.allocate."""
    checks: List[Tuple[str, Optional[bool], str]] = []
    try:
        pynq = optional.module("pynq")
    except ImportError:
        raise SelftestError("no pynq: run on the board as root in the image's venv (sudo -i, "
                            "then ternary-pynq selftest); PYNQ 3.0.1 or 3.1") from None
    root = os.geteuid() == 0
    checks.append(("root", root, "root" if root else
                   "not root: pynq maps the registers through /dev/mem (sudo -i)"))
    if not root:
        return Target("board", [], None, PYNQ_Z1_ENGINES, (), "measured", time.perf_counter,
                      checks=checks)
    ov = pynq.Overlay(bitfile, download=download)
    mhz = float(pynq.Clocks.fclk0_mhz)
    checks.append(("FCLK0", abs(mhz - FCLK_MHZ) <= FCLK_TOLERANCE_MHZ,
                   f"{mhz:.3f} MHz (the overlay is built for {FCLK_MHZ:.3f})"))
    got = overlay_parameters(ov.ip_dict)
    for name in ("dma_0", "dma_1"):
        if name not in got:
            checks.append((f"{name} in the .hwh", False, "absent"))
            continue
        bad = {k: v for k, v in got[name].items() if v != DMA_PARAMETERS[k][0]}
        checks.append((f"{name} parameters", not bad,
                       "all of " + ", ".join(f"{k} {v[0]}" for k, v in DMA_PARAMETERS.items())
                       if not bad else "; ".join(f"{k} is {v}, must be {DMA_PARAMETERS[k][0]}"
                                                 for k, v in bad.items())))
    if not all(c[1] is not False for c in checks):
        return Target("board", [], None, PYNQ_Z1_ENGINES, (), "measured", time.perf_counter,
                      checks=checks)
    mmios = [pynq.MMIO(int(ov.ip_dict[f"dma_{p}"]["phys_addr"]),
                       int(ov.ip_dict[f"dma_{p}"]["addr_range"])) for p in (0, 1)]
    barrier, why = write_barrier()
    checks.append(("write barrier", barrier is not None,
                   "the C library's tph_wmb (DSB ST)" if barrier else why))
    checks.append(("cache invalidate",) + invalidate_probe(pynq))
    # a board figure only on the board's CPU (pynq over a register model elsewhere: the
    # board image rehearsal, make board-rehearsal)
    label = "measured" if platform.machine() == "armv7l" else \
        f"measured off a board ({platform.machine()}): not a board figure"
    return Target("board", [SgDma(m, f"dma_{p}") for p, m in enumerate(mmios)],
                  lambda shape, dtype, cacheable: pynq.allocate(shape, dtype,
                                                                cacheable=cacheable),
                  PYNQ_Z1_ENGINES, overlay_formats(), label, time.perf_counter,
                  barrier=barrier or (lambda: None), checks=checks)


# --------------------------------------------------------------------------- frames

class Frames:
    """Random frames of every kind for one overlay (engines, formats)."""

    def __init__(self, engines: EngineConfig, formats: Sequence[int], seed: int,
                 max_l: int = 64, max_rows: int = 12):
        self.eng, self.formats, self.rng = engines, tuple(formats), np.random.default_rng(seed)
        self.acfg = engines.attention_config()
        self.max_l = min(max_l, engines.max_context)
        self.max_rows = max_rows

    def _k(self) -> int:
        r = self.rng
        return self.eng.max_k if r.random() < 0.25 else int(r.integers(1, self.eng.max_k + 1))

    def matrix(self, kind: str, k: Optional[int] = None, n: Optional[int] = None,
               b: Optional[int] = -1) -> Tuple[bytes, int]:
        """(frame, weights in it); ``b``: -1 picks (no vectors flag half of the time, else
        1 .. vectors), None one vector without the flag, else B vectors."""
        r = self.rng
        if b == -1:
            b = None if self.eng.vectors < 2 or r.random() < 0.5 else \
                int(r.integers(1, self.eng.vectors + 1))
        k = self._k() if k is None else k
        n = int(r.integers(1, self.max_rows + 1)) if n is None else n
        x = r.integers(-128, 128, size=k if b is None else (b, k), dtype=np.int8)
        tag = int(r.integers(256))
        if kind in ("q4", "q4_q8_1"):
            if kind == "q4_q8_1":             # K a multiple of 32 (whole x blocks)
                k = 32 * max(1, k // 32)
            nb = -(-k // 32)
            q = r.integers(0, 16, size=(n, nb, 32), dtype=np.uint8)
            d, m = (r.normal(0, 0.01, size=(n, nb)).astype(np.float16) for _ in "dm")
            rows = pack_q4_rows(q, d, m, k)
            if kind == "q4":
                return build_q4_frame(x, rows, k, tag), n * k
            # Q8_1 x: codes, a positive fp16 step and an fp16 block sum per block of 32
            shape = (nb,) if b is None else (b, nb)
            xq = r.integers(-127, 128, size=(1 if b is None else b) * k, dtype=np.int8)
            xd = np.abs(r.normal(0, 0.02, size=shape)).astype(np.float16).view(np.uint16)
            xs = r.normal(0, 2.0, size=shape).astype(np.float16).view(np.uint16)
            return build_q4_q8_1_frame(xq, xd, xs, rows, k, tag), n * k
        if kind == "q8_0":                    # Q8_0 rows x Q8_0 x blocks, K whole blocks
            k = 32 * max(1, k // 32)
            nb = k // 32
            shape = (nb,) if b is None else (b, nb)
            q = r.integers(-128, 128, size=(n, nb, 32), dtype=np.int8)
            d = np.abs(r.normal(0, 0.01, size=(n, nb))).astype(np.float16)
            xq = r.integers(-127, 128, size=(1 if b is None else b) * k, dtype=np.int8)
            xd = np.abs(r.normal(0, 0.02, size=shape)).astype(np.float16).view(np.uint16)
            return build_q8_0_frame(xq, xd, pack_q8_0_rows(q, d, k), k, tag), n * k
        lo = -1 if kind == "ternary" else -128
        w = r.integers(lo, 2 if kind == "ternary" else 128, size=(n, k), dtype=np.int8)
        return build_frame(x, w, kind, tag=tag, beat_bytes=8, pad_fill=r), n * k

    def attention(self, L: Optional[int] = None, **over) -> Tuple[bytes, bytes]:
        r, c = self.rng, self.acfg
        L = int(r.integers(1, self.max_l + 1)) if L is None else L
        G, d = c.heads_per_group, c.head_dim
        lim = [128, 1 << (c.kv_bits - 1), 1 << (c.kv_bits - 1)]    # q INT8; K, V the KV codes
        q, K, V = (r.integers(-m, m, size=s) for m, s in zip(lim, ((G, d), (L, d), (L, d))))
        mult = [int(v) for v in r.integers(0, 1 << 16, size=G)]
        shift = [int(v) for v in r.integers(14, 31, size=G)]
        tag = int(r.integers(256))
        fr = gatt.build_attention_frame(q, K, V, mult, shift, tag, c,
                                        pad_byte=int(r.integers(256)), **over)
        return split_attention_frame(fr, L, tag)

    def bad(self, port: int) -> List[bytes]:
        """A wrong magic and a frame cut short (a matrix frame on ``port``)."""
        fr, _ = self.matrix("int8", b=None)
        wrong = bytes([fr[0] ^ 0x5A]) + fr[1:]
        cut = fr[:max(8, (len(fr) // 16) * 8)]
        return [wrong, cut]


def _words(frames: Sequence[bytes]) -> List[Tuple[int, bool]]:
    out = []
    for fr in frames:
        w = np.frombuffer(fr, "<u8")
        out += [(int(v), i == len(w) - 1) for i, v in enumerate(w)]
    return out


def _split(words: Sequence[Tuple[int, bool]]) -> List[np.ndarray]:
    frames, cur = [], []
    for w, last in words:
        cur.append(w)
        if last:
            frames.append(np.array(cur, np.uint32))
            cur = []
    return frames


# --------------------------------------------------------------------------- one batch

class Runner:
    """Frames of both ports through the DMAs: one MM2S descriptor per frame, one S2MM
    descriptor per expected answer (its length + 256 bytes of room), chains of their own."""

    SLACK = 256

    def __init__(self, target: Target, timeout_s: float = 30.0):
        self.t, self.timeout_s = target, timeout_s
        self.buf = target.allocate((ARENA_BYTES,), np.uint8, cacheable=False)
        self.base = int(self.buf.physical_address)
        self.words = self.buf.view("<u4")

    def run(self, frames: Tuple[List[bytes], List[bytes]],
            expect: Tuple[List[np.ndarray], List[np.ndarray]]):
        """(answers per port: a list of (words, complete) per expected answer, seconds)."""
        buf, w = self.buf, self.words
        top = 0

        def take(n, align=64):
            nonlocal top
            top = -(-top // align) * align
            off = top
            top += n
            if top > ARENA_BYTES:
                raise SelftestError(f"a batch needs more than the test's {ARENA_BYTES >> 20} "
                                    f"MiB of DMA memory")
            return off

        chains = {}
        outs = {0: [], 1: []}
        for p in (0, 1):
            descs = []
            for fr in frames[p]:
                off = take(len(fr), 8)
                buf[off:off + len(fr)] = np.frombuffer(fr, np.uint8)
                descs.append((off, len(fr) | R.CTRL_SOF | R.CTRL_EOF))
            mm2s = self._chain(take, descs)
            descs = []
            for e in expect[p]:
                cap = 4 * len(e) + self.SLACK
                off = take(cap, 8)
                buf[off:off + cap] = 0xA5
                descs.append((off, cap))
                outs[p].append(off)
            s2mm = self._chain(take, descs)
            chains[p] = (mm2s, s2mm)
        for d in self.t.dmas:
            d.reset()
        order = []
        for p in (0, 1):
            for ch, chain in ((S2MM, chains[p][1]), (MM2S, chains[p][0])):
                if chain:
                    self.t.dmas[p].start(ch, self.base + chain[0])
                    order.append((p, ch, chain))
        self.t.barrier()
        t0 = self.t.seconds()
        for p, ch, chain in sorted(order, key=lambda o: o[1] != S2MM):
            self.t.dmas[p].tail(ch, self.base + chain[-1])
        deadline = time.monotonic() + self.timeout_s
        pending = list(order)
        hung = []
        while pending:
            left = []
            for item in pending:
                p, ch, chain = item
                sr = self.t.dmas[p].status(ch)
                if sr & (R.SR_ERRORS | R.SR_HALTED):
                    hung.append(f"port {p} {'S2MM' if ch else 'MM2S'}: DMASR 0x{sr:08X} "
                                f"({R.error_names(sr)})")
                    continue
                if not (sr & R.SR_IDLE and w[(chain[-1] >> 2) + R.D_STATUS] & R.ST_CMPLT):
                    left.append(item)
            pending = left
            if pending and time.monotonic() > deadline:
                hung += [f"port {p} {'S2MM' if ch else 'MM2S'}: not complete within "
                         f"{self.timeout_s} s" for p, ch, _ in pending]
                break
        seconds = self.t.seconds() - t0
        got = {0: [], 1: []}
        for p in (0, 1):
            for i, off in enumerate(outs[p]):
                st = int(w[(chains[p][1][i] >> 2) + R.D_STATUS])
                n = (st & R.LEN_MASK) >> 2 if st & R.ST_CMPLT else 0
                got[p].append((w[off >> 2:(off >> 2) + n].copy(), bool(st & R.ST_RXEOF)))
        return got, seconds, hung

    def _chain(self, take, descs) -> List[int]:
        """Descriptors (offsets in the arena) for (buffer offset, CONTROL) pairs, linked."""
        offs = [take(R.DESC_BYTES) for _ in descs]
        w = self.words
        for i, (off, (boff, ctrl)) in enumerate(zip(offs, descs)):
            d = off >> 2
            w[d:d + R.DESC_WORDS] = 0
            w[d + R.D_NXTDESC] = self.base + offs[(i + 1) % len(offs)]
            w[d + R.D_BUFFER] = self.base + boff
            w[d + R.D_CONTROL] = ctrl
        return offs


# --------------------------------------------------------------------------- the test

def environment(target: Target) -> List[Tuple[str, Optional[bool], str]]:
    """The checks every target shares (Python, numpy, pynq against the image table, CMA)."""
    checks = []
    pv = None
    try:
        pynq = optional.module("pynq")
        pv = getattr(pynq, "__version__", None)
    except ImportError:
        pass
    try:
        notes = check_image(tuple(sys.version_info[:2]), np.__version__, pv)
        ok, detail = True, "; ".join(notes) or "as the image"
        if notes and target.name == "board":
            ok = False
    except ImageError as exc:
        ok, detail = False, str(exc)
    checks.append(("Python, numpy, pynq", ok,
                   f"Python {platform.python_version()}, numpy {np.__version__}, pynq "
                   f"{pv or 'absent'} (image PYNQ {BOARD_IMAGE.pynq}: Python "
                   f"{BOARD_IMAGE.python}, numpy {BOARD_IMAGE.numpy}): {detail}"))
    plan = memory_plan(model_shape(ModelConfig(**SMOLLM2_135M), PYNQ_Z1_ENGINES, "q4"), 2048)
    cma = cma_mib()
    need = plan.dma_bytes / MIB
    if cma is None:
        checks.append(("free CMA", None, f"not on a board (no CmaFree); SmolLM2 Q4_1 at "
                                         f"context 2048 plans {need:.1f} MiB"))
    else:
        free, total = cma
        checks.append(("free CMA", free >= max(need, ARENA_BYTES / MIB),
                       f"{free:.1f} of {total:.1f} MiB free; SmolLM2 Q4_1 at context 2048 "
                       f"plans {need:.1f} MiB, this test {ARENA_BYTES / MIB:.0f} MiB"))
    return checks


def run_selftest(target: Target, frames_per_kind: int = 8, seed: int = 1,
                 speed_rows: int = 2048, progress=sys.stderr, out=sys.stdout,
                 json_path: Optional[str] = "selftest.json") -> int:
    """Run the checks, the frames and the speed test on ``target``; print the table and the
    verdict; write the JSON; return the exit code (0 pass, 1 a mismatch or a failed check)."""
    res = {"version": __version__, "target": target.name, "python": platform.python_version(),
           "numpy": np.__version__, "machine": platform.machine(), "seed": seed,
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    checks = environment(target) + target.checks
    res["checks"] = [dict(name=n, ok=ok, detail=d) for n, ok, d in checks]
    for n, ok, d in checks:
        print(f"  {'ok  ' if ok else 'FAIL' if ok is False else '--  '} {n}: {d}", file=out)
    failed = [n for n, ok, _ in checks if ok is False]
    if not target.dmas:
        return _verdict(res, out, json_path, f"FAIL: {', '.join(failed)}; no frame sent")
    runner = Runner(target)
    gen = Frames(target.engines, target.formats, seed)
    kinds = [k for k in KINDS if k not in FMT or FMT[k] in target.formats]
    stats = {k: dict(frames=0, rows=0, words=0, mismatches=0) for k in kinds}
    first_bad: List[str] = []
    batches = frames_per_kind
    t_start = time.monotonic()
    for bi in range(batches):
        ports: Tuple[List[bytes], List[bytes]] = ([], [])
        kind_of: Tuple[List[str], List[str]] = ([], [])
        for kind in kinds:
            if kind == "attention":
                h0, h1 = gen.attention(**({"heads": 0} if bi % 4 == 3 else {}))
                ports[0].append(h0), ports[1].append(h1)
                kind_of[0].append(kind)           # answered on port 0 only
                continue
            for p in (0, 1):
                frs = gen.bad(p) if kind == "bad" else [gen.matrix(kind)[0]]
                ports[p].extend(frs)
                kind_of[p].extend([kind] * len(frs))
        exp_words = overlay_outputs(_words(ports[0]), _words(ports[1]), target.engines.max_k,
                                    gen.acfg, target.formats, target.engines.vectors)
        expect = (_split(exp_words[0]), _split(exp_words[1]))
        got, _, hung = runner.run(ports, expect)
        for p in (0, 1):
            # answers in the order each port sends them: port 1 at once; port 0 in the order
            # it took its frames (attention answers there too)
            for i, e in enumerate(expect[p]):
                kind = kind_of[p][i]
                s = stats[kind]
                g, eof = got[p][i]
                s["frames"] += 1
                s["words"] += len(e)
                s["rows"] += max(len(e) - 1, 0)
                if not (eof and len(g) == len(e) and np.array_equal(g, e)):
                    bad = int(np.count_nonzero(g[:len(e)] != e[:len(g)])) + abs(len(g) - len(e))
                    s["mismatches"] += max(bad, 1)
                    if len(first_bad) < 5:
                        first_bad.append(f"batch {bi} port {p} answer {i} ({kind}): "
                                         f"{len(g)} words{'' if eof else ' (no RXEOF)'}, "
                                         f"expected {len(e)}")
        first_bad.extend(hung[:5 - len(first_bad)] if len(first_bad) < 5 else [])
        if hung:
            stats[kinds[0]]["mismatches"] += len(hung)
        mism = sum(s["mismatches"] for s in stats.values())
        rows = sum(s["rows"] for s in stats.values())
        print(f"\rselftest {target.name}: batch {bi + 1}/{batches}, {rows:,} rows checked, "
              f"{mism} mismatches, {time.monotonic() - t_start:.0f} s", end="", file=progress,
              flush=True)
    print(file=progress)
    res["engines"] = stats
    res["first_mismatches"] = first_bad
    res["speed"] = _speed(target, runner, gen, speed_rows, first_bad, stats)
    _table(res, out)
    mism = sum(s["mismatches"] for s in stats.values())
    rows = sum(s["rows"] for s in stats.values())
    where = {"measured": "measured on this board", "simulated": "simulated (rtl backend)",
             None: "on the register model (no speed)"}.get(target.speed_label,
                                                           target.speed_label)
    if mism or failed:
        why = []
        if mism:
            why.append(f"{mism} mismatches in {rows:,} rows")
        if failed:
            why.append("failed checks: " + ", ".join(failed))
        return _verdict(res, out, json_path, f"FAIL: {'; '.join(why)} ({where})")
    return _verdict(res, out, json_path,
                    f"PASS: {rows:,} rows of {len(kinds)} frame kinds on both ports equal the "
                    f"golden models, 0 mismatches ({where})")


def _speed(target: Target, runner: Runner, gen: Frames, rows: int, first_bad, stats):
    """INT8 frames of max_k columns: port 0 alone, port 1 alone, both; GB/s and G weights/s."""
    k = target.engines.max_k
    n = max(1, min(rows, (ARENA_BYTES // 4) // (k + 16)))
    out = {}
    for name, ports in (("port 0", (0,)), ("port 1", (1,)), ("both", (0, 1))):
        frames: Tuple[List[bytes], List[bytes]] = ([], [])
        weights = 0
        for p in ports:
            fr, nw = gen.matrix("int8", k=k, n=n, b=None)
            frames[p].append(fr)
            weights += nw
        ew = overlay_outputs(_words(frames[0]), _words(frames[1]), k, gen.acfg,
                             target.formats, target.engines.vectors)
        expect = (_split(ew[0]), _split(ew[1]))
        got, sec, hung = runner.run(frames, expect)
        ok = not hung and all(eof and np.array_equal(g, e) for p in (0, 1)
                              for (g, eof), e in zip(got[p], expect[p]))
        stats["int8"]["rows"] += n * len(ports)
        stats["int8"]["frames"] += len(ports)
        if not ok:
            stats["int8"]["mismatches"] += 1
            first_bad.append(f"speed test {name}: answers differ from golden")
        nbytes = sum(len(f) for fr in frames for f in fr)
        entry = dict(bytes=nbytes, weights=weights, rows=n * len(ports), label=target.speed_label)
        if target.speed_label is not None and sec > 0:
            entry.update(seconds=sec, gb_s=nbytes / sec / 1e9, gweights_s=weights / sec / 1e9)
        out[name] = entry
    return out


def _table(res, out) -> None:
    print("  engine      frames   rows checked   mismatches", file=out)
    for k, s in res["engines"].items():
        print(f"  {k:<10} {s['frames']:>7,} {s['rows']:>14,} {s['mismatches']:>12,}", file=out)
    print("  speed (INT8, max_k columns)   GB/s read   G weights/s   label", file=out)
    for name, e in res["speed"].items():
        if "gb_s" in e:
            print(f"  {name:<28} {e['gb_s']:>10.3f} {e['gweights_s']:>13.3f}   {e['label']}",
                  file=out)
        else:
            print(f"  {name:<28} {'-':>10} {'-':>13}   register model: no speed", file=out)
    for line in res.get("first_mismatches", []):
        print(f"  mismatch: {line}", file=out)


def _verdict(res, out, json_path, line) -> int:
    res["verdict"] = line
    print(line, file=out)
    if json_path:
        Path(json_path).write_text(json.dumps(res, indent=1, default=str) + "\n")
        print(f"  (written to {json_path}: send it back with the board's results)", file=out)
    return 0 if line.startswith("PASS") else 1


# --------------------------------------------------------------------------- command line

def add_parser(sub) -> None:
    s = sub.add_parser("selftest", help="the board owner's first command: environment checks, "
                                        "random frames through every engine against the "
                                        "golden models, bytes/s per port, a verdict, JSON")
    s.add_argument("--bitfile", default="pynq_ternary.bit",
                   help="the overlay's .bit, its .hwh beside it (default pynq_ternary.bit)")
    s.add_argument("--backend", choices=("board", "golden", "rtl"), default="board",
                   help="board (default), golden (the register model) or rtl (the simulated top)")
    s.add_argument("--frames", type=int, default=8,
                   help="batches: each sends a frame of every kind on both ports (default 8)")
    s.add_argument("--speed-rows", type=int, default=2048,
                   help="rows of each speed test frame (INT8, max_k columns; default 2048)")
    s.add_argument("--seed", type=int, default=1)
    s.add_argument("--json", default="selftest.json",
                   help="where the results go (default selftest.json; '' for none)")
    s.add_argument("--simulator", default="verilator", help="rtl: verilator or icarus")
    s.add_argument("--max-k", type=int, default=None, help="rtl: the top's max_k")
    s.add_argument("--max-context", type=int, default=None, help="rtl: the top's max_context")
    s.add_argument("--no-download", action="store_true",
                   help="board: use the bitstream already loaded")


def run(args) -> int:
    if args.frames < 1 or args.speed_rows < 1:
        raise UsageError("--frames and --speed-rows must be at least 1")
    if args.backend != "rtl" and (args.max_k or args.max_context):
        raise UsageError("--max-k and --max-context choose the rtl backend's top")
    if args.backend == "board":
        if not Path(args.bitfile).is_file():
            raise UsageError(f"no bitstream {args.bitfile} (--bitfile; its .hwh beside it)")
        target = board_target(args.bitfile, download=not args.no_download)
    elif args.backend == "rtl":
        params = {"max_k": args.max_k or PYNQ_Z1_ENGINES.max_k,
                  "max_context": args.max_context or PYNQ_Z1_ENGINES.max_context}
        target = rtl_target(params, args.simulator)
    else:
        target = model_target()
    try:
        return run_selftest(target, args.frames, args.seed, args.speed_rows,
                            json_path=args.json or None)
    finally:
        target.close()
