"""A cycle model of the PYNQ-Z1's Cortex-A9 running a program of the ARMv7 build: make a9-model
(tools/a9_model.py) applies it to the C loop's step and to the write-up's own kernels.

A MODEL: there is no A9 here. Its parts, each with its source beside its number:

* **the core**: every translation block qemu-arm runs (``-d in_asm,exec,nochain``: a block's
  instructions and its executions, the same count as make host-bench's) is handed to
  ``llvm-mca -mcpu=cortex-a9`` (LLVM's Cortex-A9 scheduling model, ARMScheduleA9.td, written
  from the Cortex-A9 TRM's and its NEON/VFP cycle tables) as one code region; its cycles per
  iteration in steady state (100 iterations) times the block's executions is the core's time
  with every load an L1 hit. llvm-mca cannot read Thumb-2 IT blocks, so the model's build is
  the board build's flags plus ``-marm`` (ARM mode: the same code with conditional execution
  instead of IT); the board build (Thumb-2, the compiler's default) is counted too. llvm-mca has
  no scheduling class for LDM/STM/PUSH/POP/VLDM/VSTM register lists: each is handed over as one
  load or store per register (the A9 moves one register per cycle through them: Cortex-A9 TRM
  r4p1, DDI0388I, "Cycle timings": load/store multiple);
* **the memory system**: L1 misses (32 KiB 4-way data cache, 32-byte lines: Cortex-A9 TRM;
  UG585 v1.11 section 3.1.1) that hit or miss the PL310 L2 (512 KiB, 8-way: UG585 v1.11
  section 3.1.1; 32-byte lines: PL310 TRM), counted by valgrind's cache simulation of the
  same C code (the x86-64 build's data accesses on the A9's cache geometry, the replay
  device's own accesses taken out: they stand for the PL's); the CPU's loads from and stores
  into the DMA memory the board maps uncached, counted by the runtime (``cpu_bytes``); the
  results the CPU reads from the cached results region (``cache_ops``): per invalidate by
  range a system call into the kernel's dma_sync path, per line invalidated its maintenance
  in L1 and the PL310, and each line read afterwards filled from DDR (the lines were just
  invalidated, so every one misses both caches); the DMA registers' reads and writes (AXI GP
  port).

The memory-system constants below carry their source (``CITED``: public measurements of a
Cortex-A9 with a PL310 L2, on Zynq-7000 boards where one was found, and the ranges they give:
``RANGES``); the ones for which no public figure was found are marked ASSUMPTION and listed in
every result (``assumptions``).
"""
from __future__ import annotations

import bisect
import hashlib
import json
import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Sequence, Tuple

#: the PYNQ-Z1's CPU clock: 650 MHz (Digilent's PYNQ-Z1 reference manual: "650MHz dual-core
#: Cortex-A9 processor")
A9_HZ = 650e6

#: the board build's compiler flags: setup.py's ARM_CFLAGS, what pip builds on the board (the
#: kernels' NEON bodies, hard float; Thumb-2, the Debian/Ubuntu armhf gcc's default mode);
#: tests/runtime/bench/test_a9model.py reads setup.py and checks the two stay equal. TPH_ARMV7_FLAGS in the
#: environment (words split as a shell does) overrides it; make a9-model and make host-bench
#: count that build.
ARMV7_FLAGS_DEFAULT = ("-mcpu=cortex-a9", "-mfpu=neon", "-mfloat-abi=hard")
ARM_CC = "arm-linux-gnueabihf-gcc"
ARM_OBJDUMP = "arm-linux-gnueabihf-objdump"
ARM_NM = "arm-linux-gnueabihf-nm"


def board_flags() -> Tuple[str, ...]:
    """The board build's flags (TPH_ARMV7_FLAGS overrides ARMV7_FLAGS_DEFAULT)."""
    env = os.environ.get("TPH_ARMV7_FLAGS")
    return tuple(shlex.split(env)) if env else ARMV7_FLAGS_DEFAULT


def model_flags() -> Tuple[str, ...]:
    """The model's build: the board build's flags in ARM mode (llvm-mca reads no IT block)."""
    return tuple(f for f in board_flags() if f not in ("-mthumb", "-marm")) + ("-marm",)


def mca_attrs(flags: Sequence[str]) -> str:
    """llvm-mca's -mattr for a build: NEON unless an -mfpu names an FPU without it (gcc's
    -mfpu=auto with -mcpu=cortex-a9 is NEON: its vectoriser uses it for integer loops)."""
    fpu = [f.split("=", 1)[1] for f in flags if f.startswith("-mfpu=")]
    return "+vfp3" if fpu and fpu[-1] != "auto" and "neon" not in fpu[-1] else "+vfp3,+neon"


#: the write-up's kernels' build: it names no compiler or flags ("I wrote everything except
#: the matrix multiply in C ... and ran it on the board's CPU"), so ASSUMED: the board's own
#: gcc (the PYNQ image's Ubuntu armhf) at -O2 with its defaults, ARMv7-A, VFPv3-D16 (no NEON),
#: hard float; its scalar INT8 dot product at 0.28 G MAC/s (2.3 cycles a MAC) agrees
WRITEUP_FLAGS = ("-march=armv7-a", "-mfpu=vfpv3-d16", "-mfloat-abi=hard")


# ------------------------------------------------------------------ memory-system constants

#: L1 data cache: 32 KiB (UG585 v1.11 section 3.1.1: "two separate 32 KB L1 caches for
#: instruction and data"), 4-way, 32-byte lines (Cortex-A9 TRM r4p1, DDI0388I, Level 1 memory
#: system)
L1D = (32768, 4, 32)
#: L2 (PL310 / L2C-310): 512 KiB, 8-way (UG585 v1.11 section 3.1.1: "The unified 512 KB L2
#: cache is 8-way set-associative"), 32-byte lines (PL310 TRM r3p3, DDI0246)
L2 = (524288, 8, 32)
#: The memory system's latencies and rates below are public measurements. No one source
#: measured all of them on a PYNQ-Z1, so each is taken from the source closest to this board
#: (650 MHz A9, PL310, DDR3-1050, Linux with PYNQ's settings) and the others bound it:
#: * 7-cpu.com, "ARM Cortex-A9" (https://7-cpu.com/cpu/Cortex-A9.html): a Cortex-A9 MPCore
#:   with a PL310-class L2 (Samsung Exynos 4210, 1200 MHz, 32-byte lines, LPDDR2/DDR3 800),
#:   pointer-chasing and bandwidth tests in CPU cycles and ns: load-to-use 4 cycles in L1,
#:   23 in L2 (+19), RAM +110 ns beyond; "L2->L1 B/W (Read, 32 bytes step) = 8.7 cycles per
#:   cache line"; "RAM Read B/W (Parallel Random Read) = 68 ns / cache line = 470 MB/s";
#:   "Data prefetcher monitors only RAM misses. It doesn't prefetch data from L2 cache";
#: * ikwzm/udmabuf issue #120 (2024, ZYBO-Z7: Zynq-7000 at 667 MHz, DDR3-1066, Debian Linux):
#:   memcpy of 16 MiB x 32 from a cached buffer 1.537 s (349 MB/s), from an uncached one
#:   7.634 s (70 MB/s);
#: * bmartini/zynq-xdma issue #10 (2016, Zedboard: Zynq-7020 at 667 MHz, Linux): memcpy between
#:   cached buffers ~256 MB/s, out of a non-cacheable CMA buffer ~64 MB/s;
#: * genodelabs/genode issue #4456 (2022, Zynq-7000 at 666 MHz, the Genode base-hw kernel with
#:   the PL310's prefetch and double linefill on): "memcpy (uncached write): copied 8 GB in
#:   7200 milliseconds (1137 MiB/sec)";
#: * UviDTE-FPSoC/Zynq7000-time-measurements (Zedboard, Linaro Ubuntu, CPU at 667 MHz;
#:   results/Zynq7000_HPS-FPGA.xlsx, "Linaro OS cache ON (for loop)"): a loop of 32-bit loads
#:   (stores) through an O_SYNC /dev/mem mapping of an FPGA RAM behind M_AXI_GP1, PL at 100 MHz:
#:   reads 24.7 MB/s, writes 27.2 MB/s at 2 KB and more (code/Linaro_OS/PS-to-PL_CPU_GP1).
#: Whether PYNQ's Linux turns the A9's L1 data prefetcher (ACTLR bit 2) or the PL310's
#: prefetch on is not known here (Xilinx's standalone boot.S sets ACTLR bits 1 and 2; Linux's
#: zynq-7000.dtsi sets only the PL310's RAM latencies); the Linux measurements above run with
#: whatever their kernels set.
#:
#: cycles a load that misses L1 and hits L2 waits beyond an L1 hit (llvm-mca counts the L1
#: hit): 19 (7-cpu.com Cortex-A9: 23-cycle L2 load-to-use against 4 in L1). No Zynq-7000
#: figure was retrieved (the PL310's tag and data RAM latencies Linux programs on Zynq,
#: zynq-7000.dtsi arm,tag-latency <2 2 2>, arm,data-latency <3 2 2>, are of the same order as
#: the Exynos 4210's)
L2_HIT_CYCLES = 23 - 4
#: an L1 miss that hits L2 in a loop that reads in order: the A9 keeps several line fills
#: under way (two linefill buffers; "up to four outstanding data cache read misses": Cortex-A9
#: TRM r4p1 DDI0388I 7.1), so a line costs its throughput, not its latency: 8.7 cycles per
#: line (7-cpu.com Cortex-A9, "L2->L1 B/W (Read, 32 bytes step)")
L2_STREAM_LINE_CYCLES = 8.7
#: cycles of a load that misses L2 (a DDR3 line fill through the PL310) beyond an L1 hit: the L2
#: lookup (L2_HIT_CYCLES) plus 110 ns of RAM (7-cpu.com Cortex-A9: "+ 110 ns (RAM)"), 90.5
#: cycles at 650 MHz. Zynq cross-check: memcpy out of an uncached buffer on Linux moves 8 bytes
#: per 114 ns (ZYBO-Z7, 70 MB/s, udmabuf #120) to 125 ns (Zedboard, 64 MB/s, zynq-xdma #10),
#: one DDR round trip a load if its loads are 8 bytes wide: 74 to 81 cycles
DDR_MISS_CYCLES = L2_HIT_CYCLES + 110e-9 * A9_HZ
#: a DDR line fill in a loop that reads in order (misses under way in parallel): 68 ns a line
#: (7-cpu.com Cortex-A9, "RAM Read B/W (Parallel Random Read) = 68 ns / cache line = 470 MB/s";
#: a read in order does no worse than independent random lines), 44.2 cycles at 650 MHz. The
#: Zynq-7000 measurements under Linux bound it: memcpy between cached buffers 349 MB/s
#: (ZYBO-Z7, udmabuf #120) or 256 MB/s (Zedboard, zynq-xdma #10) copies a line per 92 to 125
#: ns while it also writes (and, write-allocating, reads) the destination: a read-only stream
#: is faster than 349 MB/s (59.6 cycles a line); the range taken here: 349 to 470 MB/s
DDR_STREAM_LINE_CYCLES = 68e-9 * A9_HZ
#: the CPU's reads of uncached DMA memory (the frames region: results, STATUS and length
#: words): memcpy OUT of a non-cacheable CMA buffer on a Zynq-7020 (Zedboard) measured 64 MB/s
#: (bmartini/zynq-xdma issue #10, 2016: "~64 MB/s" against 256 MB/s between cached buffers);
#: 70 MB/s on a ZYBO-Z7 (ikwzm/udmabuf issue #120, 2024); a word loop's loads are no faster
#: than memcpy's (each waits for its DDR round trip: at DDR_MISS_CYCLES a 4-byte word, 29 MB/s,
#: the figure would be 2.2x this one)
UNCACHED_READ_BYTES_PER_S = 64e6
#: the CPU's stores into uncached (bufferable) DMA memory: the A9's store buffer merges them:
#: memcpy into uncached memory on a Zynq-7000 at 666 MHz, 1137 MiB/s (genodelabs/genode issue
#: #4456, 2022; not Linux: its memcpy and L2 settings tuned); the Linux figures at hand are
#: copy rates between cached buffers (256 to 349 MB/s: zynq-xdma #10, udmabuf #120), which
#: bound it from below
UNCACHED_WRITE_BYTES_PER_S = 1137 * 2**20
#: one read of an AXI DMA register through M_AXI_GP0 (PL at 100 MHz, AXI-Lite; pynq.MMIO maps
#: /dev/mem O_SYNC): a 32-bit load through an O_SYNC /dev/mem mapping of PL memory behind
#: M_AXI_GP1 at 100 MHz under Linux on a Zedboard, 24.7 MB/s: 162 ns a load, 105 cycles at
#: 650 MHz (UviDTE-FPSoC/Zynq7000-time-measurements, "Linaro OS cache ON (for loop)", RD;
#: 28.6 MB/s, 91 cycles, with the PL at 150 MHz)
MMIO_READ_CYCLES = 4 / 24.7e6 * A9_HZ
#: one write of a DMA register: the same measurement's stores (UviDTE-FPSoC/Zynq7000-time-
#: measurements, "Linaro OS cache ON (for loop)", WR), 27.2 MB/s at 100 MHz: 147 ns a
#: store, 96 cycles (an O_SYNC mapping is strongly ordered on ARMv7 Linux: each store waits
#: for its response; the old assumption of a posted 20-cycle write does not hold for it)
MMIO_WRITE_CYCLES = 4 / 27.2e6 * A9_HZ
#: invalidate one 32-byte line: the kernel's dma_sync_single_for_cpu(DMA_FROM_DEVICE) on ARMv7
#: (arch/arm/mm/dma-mapping.c __dma_page_dev_to_cpu) does, per line, one MCR DCIMVAC in L1
#: (arch/arm/mm/cache-v7.S v7_dma_inv_range) and one write of the PL310's "Invalidate Line by
#: PA" register (arch/arm/mm/cache-l2x0.c l2c210_inv_range; an atomic operation: PL310 TRM
#: r3p3 DDI0246 section 3.3.10), then one cache sync for the range: ASSUMPTION 30 CPU cycles
#: per line (the MCR a few cycles; the PL310's registers sit on the SCU's private bus at
#: 0xF8F02000, not behind the GP port, so MMIO_WRITE_CYCLES does not bound them; no public
#: per-line figure was found)
INVALIDATE_LINE_CYCLES = 30
#: one invalidate by range from user space: XRT's xclSyncBO (libxrt_core's shim) ->
#: ioctl(DRM_IOCTL_ZOCL_SYNC_BO) -> drm_ioctl (copy of the argument, the GEM object looked up
#: and referenced) -> zocl's sync -> dma_sync_single_for_cpu, and back: ASSUMPTION 2,000 CPU
#: cycles (3.1 us at 650 MHz). No public measurement of this path (or of a null system call) on
#: a Cortex-A9 was found; the figures say what the step costs at SYSCALL_BOUND_CYCLES instead
SYSCALL_CYCLES = 2000
#: the bound the model is also evaluated at (``invalidate_bound_ms``): 5x the ASSUMPTION,
#: 10,000 cycles (15 us) a call
SYSCALL_BOUND_CYCLES = 10000

#: both cores (issue 28 item 5; csrc/tphwork.c): the step with its worker thread takes the
#: serial part, then per job the longer of its two halves (each counted on the ARMv7 build:
#: qemu's blocks per thread of a run with the worker thread: profile_threads), plus
#: the handshake of each job and one wake of the sleeping worker per step. One job with the
#: worker spinning: the job's cache line from the caller's L1 to the worker's and the
#: completion's line back, through the SCU; a cache-to-cache transfer stands in for a line
#: that would otherwise come from memory, so each is bounded here by DDR_MISS_CYCLES; and the
#: sequentially consistent stores and loads on both sides (tphwork.c: the job, the sleeping
#: word, the completion, the waiting word; each a DMB before and after on ARMv7, 8 in all):
#: ASSUMPTION 20 cycles per DMB (a DMB waits for the A9's 4-slot store buffer to drain; no
#: public figure for the Zynq-7000 was retrieved)
DMB_CYCLES = 20
SYNC_LINES, SYNC_BARRIERS = 2, 8
SYNC_JOB_CYCLES = SYNC_LINES * DDR_MISS_CYCLES + SYNC_BARRIERS * DMB_CYCLES
#: waking the worker, once per step (tph_worker_wake before the LM head's transfer: the worker
#: slept after the last step's argmax): the caller's futex wake, a system call
#: (SYSCALL_CYCLES), and the mutex's lock and unlock (2 DMB each); the worker's own wake-up
#: latency runs while the DMA streams the LM head (about 15 ms of Q8_0 rows at the DDR wall),
#: so it is not on the step's path
WAKE_CYCLES = SYSCALL_CYCLES + 4 * DMB_CYCLES
#: a batched pass wakes the worker at its start and gives it a job almost at once (the first
#: layer's RMSNorm): the worker's wake-up latency (the futex wake's IPI to the idle core, its
#: exit from the idle loop, a context switch) is on the pass's path once: ASSUMPTION 50 us
#: (no measurement of a Cortex-A9 board's thread wake-up latency was retrieved; Linux
#: scheduling latencies on such boards are quoted in tens of microseconds)
WAKE_LATENCY_CYCLES = 50e-6 * A9_HZ

#: the memory-system constants no public figure was found for
ASSUMPTIONS = {
    "INVALIDATE_LINE_CYCLES": INVALIDATE_LINE_CYCLES, "SYSCALL_CYCLES": SYSCALL_CYCLES,
    "SYSCALL_BOUND_CYCLES": SYSCALL_BOUND_CYCLES, "DMB_CYCLES": DMB_CYCLES,
    "WAKE_LATENCY_CYCLES": WAKE_LATENCY_CYCLES}
SOURCES = [
    "LLVM 14 llvm-mca -mcpu=cortex-a9 (ARMScheduleA9.td, from the Cortex-A9 TRM cycle tables)",
    "ARM Cortex-A9 TRM r4p1 (DDI0388I): L1 32 KiB 4-way 32-byte lines; LDM/STM timing; "
    "two linefill buffers, up to four outstanding data cache read misses (7.1)",
    "Xilinx UG585 Zynq-7000 TRM v1.11, section 3.1.1: L1 32 KB + 32 KB, L2 512 KB 8-way",
    "ARM PL310 (L2C-310) TRM r3p3 (DDI0246): maintenance by PA is atomic",
    "Linux arch/arm/mm (dma-mapping.c __dma_page_dev_to_cpu, cache-v7.S v7_dma_inv_range, "
    "cache-l2x0.c l2c210_inv_range): per line one L1 MCR and one PL310 register write",
    "pynq 3.0.1 pl_server/xrt_device.py XrtDevice.invalidate: xclSyncBO(handle, bo, "
    "XCL_BO_SYNC_BO_FROM_DEVICE, size, offset)",
    "7-cpu.com ARM Cortex-A9 (Exynos 4210, 1200 MHz): L1 4 cycles, L2 23 cycles, RAM +110 ns; "
    "L2->L1 read 8.7 cycles a line; RAM parallel random read 68 ns a line (470 MB/s)",
    "ikwzm/udmabuf issue #120 (ZYBO-Z7, Zynq-7000 667 MHz, Linux, 2024): memcpy from a cached "
    "buffer 349 MB/s, from an uncached one 70 MB/s",
    "bmartini/zynq-xdma issue #10 (Zedboard, Zynq-7020, Linux, 2016): memcpy out of "
    "non-cacheable CMA ~64 MB/s, between cached buffers 256 MB/s",
    "genodelabs/genode issue #4456 (Zynq-7000 666 MHz, Genode base-hw, 2022): memcpy into "
    "uncached memory 1137 MiB/s",
    "UviDTE-FPSoC/Zynq7000-time-measurements (Zedboard, Linaro, PL 100 MHz, GP1): a loop of "
    "32-bit loads through O_SYNC /dev/mem 24.7 MB/s, stores 27.2 MB/s",
    "bperez77/xilinx_axidma issue #69: reads of driver-allocated (uncached) memory slow, "
    "writes fine",
    "PYNQ-Z1 reference manual: CPU 650 MHz"]
#: the memory-system constants with a public source: name -> the source (a part of its SOURCES
#: entry, named in the comment beside the number)
#: (tests/runtime/bench/test_a9model.py: every constant of the memory system is in CITED or in
#: ASSUMPTIONS, and every CITED source is one of SOURCES)
CITED = {
    "L1D": "Cortex-A9 TRM r4p1", "L2": "UG585",
    "L2_HIT_CYCLES": "7-cpu.com", "L2_STREAM_LINE_CYCLES": "7-cpu.com",
    "DDR_MISS_CYCLES": "7-cpu.com", "DDR_STREAM_LINE_CYCLES": "7-cpu.com",
    "UNCACHED_READ_BYTES_PER_S": "bmartini/zynq-xdma issue #10",
    "UNCACHED_WRITE_BYTES_PER_S": "genodelabs/genode issue #4456",
    "MMIO_READ_CYCLES": "UviDTE-FPSoC/Zynq7000-time-measurements",
    "MMIO_WRITE_CYCLES": "UviDTE-FPSoC/Zynq7000-time-measurements"}
#: the memory system's other constants: counts of the code's own operations and sums of the
#: constants above (their parts cited or assumed there)
DERIVED = {"SYNC_LINES": "tphwork.c: a job's line and its completion's",
           "SYNC_BARRIERS": "tphwork.c: 4 sequentially consistent accesses, a DMB each side",
           "SYNC_JOB_CYCLES": "SYNC_LINES x DDR_MISS_CYCLES + SYNC_BARRIERS x DMB_CYCLES",
           "WAKE_CYCLES": "SYSCALL_CYCLES + 4 x DMB_CYCLES"}
#: the ranges the sources give where they disagree or only bound a constant (value at the low
#: and at the high end, in the constant's unit), for the figures' context
RANGES = {
    "DDR_STREAM_LINE_CYCLES": (68e-9 * A9_HZ, 32 / 349e6 * A9_HZ),   # 470 .. 349 MB/s
    "UNCACHED_READ_BYTES_PER_S": (64e6, 70e6),
    "UNCACHED_WRITE_BYTES_PER_S": (256e6, 1137 * 2**20),
    "MMIO_READ_CYCLES": (4 / 28.6e6 * A9_HZ, 4 / 24.7e6 * A9_HZ)}


# ------------------------------------------------------------------ the core: blocks

def _sh(cmd, **kw):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if r.returncode:
        raise RuntimeError(f"failed: {' '.join(map(str, cmd))}\n{r.stdout[-2000:]}"
                           f"{r.stderr[-2000:]}")
    return r


def symbols(exe: Path, names: Iterable[str]) -> List[Tuple[int, int, str]]:
    """(start, end, name) of the text symbols ``names`` of ``exe``, sorted."""
    want = set(names)
    out = []
    for ln in _sh([ARM_NM, "-S", "--defined-only", exe]).stdout.splitlines():
        f = ln.split()
        if len(f) == 4 and f[2] in "tT" and f[3] in want:
            a, n = int(f[0], 16) & ~1, int(f[1], 16)
            out.append((a, a + n, f[3]))
    return sorted(out)


def text_symbols(exe: Path, exclude: Iterable[str] = ()) -> List[Tuple[int, int, str]]:
    """(start, end, name) of every text symbol of ``exe`` but ``exclude``, sorted: a
    program's kernels with everything they call (static helpers and gcc's clones of them,
    libm), where the names of the kernels alone would leave their callees out."""
    skip = set(exclude)
    names = set()
    for ln in _sh([ARM_NM, "-S", "--defined-only", exe]).stdout.splitlines():
        f = ln.split()
        if len(f) == 4 and f[2] in "tT" and f[3] not in skip:
            names.add(f[3])
    return symbols(exe, names)


def merged_ranges(funcs: Iterable[Tuple[int, int, str]], gap: int = 64) -> List[Tuple[int, int]]:
    """``funcs``' address ranges, those less than ``gap`` bytes apart joined (the padding
    between functions is never executed): qemu's -dfilter checks its ranges one by one."""
    out: List[List[int]] = []
    for a, b, _ in sorted(funcs):
        if out and a - out[-1][1] < gap:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _trace(exe: Path, args: Sequence, funcs: List[Tuple[int, int, str]], log_file: Path,
           blocks: Dict[int, dict]) -> Iterator[Tuple[int, int]]:
    """Run ``exe`` under qemu-arm logging the blocks inside ``funcs``; fill ``blocks`` (start
    -> {"pcs": [...]}, a block translated again keeps its start) and yield (guest thread,
    start) per execution of a block, in the log's order; name each block's function at the
    end ("fn")."""
    dfilter = ",".join(f"0x{a:x}+0x{b - a:x}" for a, b in merged_ranges(funcs))
    _sh(["qemu-arm", "-cpu", "cortex-a9", "-d", "in_asm,exec,nochain", "-dfilter", dfilter,
         "-D", log_file, exe, *args])
    cur = None
    with open(log_file) as fh:
        for line in fh:
            if line.startswith("IN:"):
                cur = None
            elif line.startswith("0x") and ":  " in line:
                pc = int(line.split(":", 1)[0], 16)
                if cur is None:
                    cur = pc
                    blocks[cur] = {"pcs": []}
                blocks[cur]["pcs"].append(pc)
            elif line.startswith("Trace"):
                pc = int(line.split("[", 1)[1].split("/")[1], 16)
                if pc in blocks:
                    yield int(line.split()[1].rstrip(":")), pc
    log_file.unlink()
    starts = [a for a, _, _ in funcs]
    for pc, b in blocks.items():
        i = bisect.bisect_right(starts, pc) - 1
        b["fn"] = funcs[i][2] if i >= 0 and pc < funcs[i][1] else "?"


def profile(exe: Path, args: Sequence, funcs: List[Tuple[int, int, str]],
            log_file: Path) -> Dict[int, dict]:
    """Every translation block qemu-arm ran inside ``funcs``: start -> {"pcs": [...],
    "execs": n, "fn": name}. A block qemu translates again (the same start) keeps the
    executions counted so far."""
    blocks: Dict[int, dict] = {}
    execs: Dict[int, int] = {}
    for _, pc in _trace(exe, args, funcs, log_file, blocks):
        execs[pc] = execs.get(pc, 0) + 1
    for pc, b in blocks.items():
        b["execs"] = execs.get(pc, 0)
    return blocks


#: the functions a job of the worker runs (tphwork.h tph_half_fn: a frame's results by port,
#: the activations' quantisation by rows, the rows' small ops, the argmax's half), the one
#: that dispatches them on the caller's thread and the worker thread's loop (a half is over at
#: their next block), and the spinning (tphwork.c spin_while: waiting, not work)
JOB_FUNCTIONS = ("port_half", "quant_part", "rows_part", "argmax_half")
DISPATCH, WORKER_LOOP, WAITING = "tph_worker_run", "worker_main", ("spin_while", "now_us")


def profile_threads(exe: Path, args: Sequence, funcs: List[Tuple[int, int, str]],
                    log_file: Path) -> dict:
    """The blocks of a run with the worker thread (tphbench threads=2) under qemu-arm, per
    thread (qemu's CPU index in each "Trace" line: 0 the caller's, 1 the worker's), with each
    job's halves told apart in the order each thread ran its blocks: a half starts at the
    entry block of a job function (JOB_FUNCTIONS) entered from DISPATCH (thread 0) or
    WORKER_LOOP (thread 1), not from a direct call (a one-row step's), and ends at the next
    block of that function; the spinning (WAITING) is left out. Returns
    {"blocks": start -> {"pcs", "fn"}, "serial": start -> executions of thread 0 outside its
    halves, "halves": per job, (thread 0's, thread 1's) start -> executions}."""
    entry = {a for a, _, n in funcs if n in JOB_FUNCTIONS}
    span = {n: (a, b) for a, b, n in funcs if n in (DISPATCH, WORKER_LOOP)}
    if not entry or DISPATCH not in span or WORKER_LOOP not in span:
        raise RuntimeError(f"{exe}: no job function of {JOB_FUNCTIONS}, or not {DISPATCH} and "
                           f"{WORKER_LOOP}, in the profiled functions")
    ends = (span[DISPATCH], span[WORKER_LOOP])
    blocks: Dict[int, dict] = {}
    serial: Dict[int, int] = {}
    halves: List[Tuple[Dict[int, int], Dict[int, int]]] = []
    where: List = [serial, None]           # per thread: the dict its blocks count in
    jobs = [0, 0]                          # per thread: the jobs begun
    came = [False, False]                  # per thread: its last block was the dispatcher's
    for t, pc in _trace(exe, args, [f for f in funcs if f[2] not in WAITING], log_file,
                        blocks):                # the spinning is not logged at all
        if t > 1:
            continue
        home = serial if t == 0 else None
        dispatcher = ends[t][0] <= pc < ends[t][1]
        if where[t] is home and pc in entry and came[t]:
            while len(halves) <= jobs[t]:
                halves.append(({}, {}))
            where[t] = halves[jobs[t]][t]
            jobs[t] += 1
        elif where[t] is not home and dispatcher:
            where[t] = home
        came[t] = dispatcher
        if where[t] is not None:
            where[t][pc] = where[t].get(pc, 0) + 1
    if jobs[0] != jobs[1]:
        raise RuntimeError(f"{exe}: {jobs[0]} jobs begun on the caller's thread, {jobs[1]} on "
                           f"the worker's (not a run with the worker thread?)")
    return {"blocks": blocks, "serial": serial, "halves": halves}


def two_cores(two: dict, one: dict, cycles: Dict[int, float], per: float = 1.0) -> dict:
    """Both cores' core time of one step: profile_threads of runs of two steps and one (the
    last step's jobs; ``cycles``: llvm-mca's cycles per block), per ``per`` rows: the caller's
    serial part, each job's halves, the handshakes and the wake of the worker (cycles; a
    batched pass, ``per`` > 1, waits for the worker's wake-up once)."""
    def cyc(execs: Dict[int, float]) -> float:
        return sum(cycles[pc] * n for pc, n in execs.items() if n)

    jobs = two["halves"][len(one["halves"]):]
    serial = cyc({pc: n - one["serial"].get(pc, 0) for pc, n in two["serial"].items()})
    halves = [(cyc(h0), cyc(h1)) for h0, h1 in jobs]
    sync = len(jobs) * SYNC_JOB_CYCLES
    if jobs:
        sync += WAKE_CYCLES + (WAKE_LATENCY_CYCLES if per > 1 else 0.0)
    longer = sum(max(a, b) for a, b in halves)
    return {"serial": serial / per, "jobs": len(jobs) / per, "sync": sync / per,
            "halves": (sum(a for a, _ in halves) / per, sum(b for _, b in halves) / per),
            "longer": longer / per, "two_cores": (serial + longer + sync) / per}


def difference(two: Dict[int, dict], one: Dict[int, dict], per: float = 1.0) -> Dict[int, dict]:
    """The blocks of one step: a run of two steps less a run of one (executions / ``per``)."""
    out = {}
    for pc, b in two.items():
        n = (b["execs"] - one.get(pc, {"execs": 0})["execs"]) / per
        if n:
            out[pc] = dict(b, execs=n)
    return out


def disassembly(exe: Path) -> Dict[int, str]:
    """pc -> instruction text (objdump, ARM mode), comments and branch targets dropped."""
    out = {}
    for ln in _sh([ARM_OBJDUMP, "-d", "--no-show-raw-insn", exe]).stdout.splitlines():
        m = re.match(r"^\s*([0-9a-f]+):\t(.*)$", ln)
        if not m:
            continue
        text = m.group(2).split("@")[0].split(";")[0].strip()
        if not text or text.startswith("."):
            continue
        out[int(m.group(1), 16)] = text
    return out


_BRANCH = re.compile(r"^(b|bl|blx|bx|cbz|cbnz)(eq|ne|cs|hs|cc|lo|mi|pl|vs|vc|hi|ls|ge|lt|gt|le"
                     r"|al)?(\.[nw])?$")
_MULTI = re.compile(r"^(v?)(ldm|stm|push|pop|vpush|vpop)(ia|ib|da|db|fd|ea)?(\w*)$")


def _regs(lst: str) -> List[str]:
    out = []
    for part in lst.strip("{} ").split(","):
        part = part.strip()
        m = re.match(r"^([rsdq])(\d+)-[rsdq](\d+)$", part)
        if m:
            out += [f"{m.group(1)}{i}" for i in range(int(m.group(2)), int(m.group(3)) + 1)]
        elif part:
            out.append(part)
    return out


def mca_text(ins: str) -> List[str]:
    """One instruction as llvm-mca reads it: branches to a local label; register lists (no
    scheduling class in LLVM 14's Cortex-A9 model) as one load or store per register."""
    op, _, rest = ins.partition("\t")
    op, rest = op.strip(), rest.strip()
    if _BRANCH.match(op):
        if op.startswith("bx") or op.startswith("blx") and rest.startswith(("r", "l", "i")):
            return [ins]
        if op.startswith(("cbz", "cbnz")):
            return [f"{op} {rest.split(',')[0]}, .Lt"]
        return [f"{op} .Lt"]
    m = _MULTI.match(op)
    if not m:
        return [ins]
    kind = m.group(2)
    if kind in ("push", "pop", "vpush", "vpop"):
        base, wb, regs = "sp", True, _regs(rest)
        load = kind in ("pop", "vpop")
        down = not load
    else:
        base, _, lst = rest.partition(",")
        base, wb = base.strip(), base.strip().endswith("!")
        base = base.rstrip("!")
        regs = _regs(lst)
        load = kind == "ldm"
        down = (m.group(3) or "ia") in ("db", "da", "fd" if not load else "ea")
    out, pc_load = [], False
    step = 0
    for r in regs:
        vec = r[0] in "sd"
        size = 8 if r[0] == "d" else 4
        if r == "pc":
            pc_load = True
            r = "lr"
        off = -(step + size) if down else step
        mn = ("vldr" if load else "vstr") if vec else ("ldr" if load else "str")
        out.append(f"{mn} {r}, [{base}, #{off}]")
        step += size
    if wb:
        out.append(f"{'sub' if down else 'add'} {base}, {base}, #{step}")
    if pc_load:
        out.append("bx lr")
    return out


def _mca_run(text: str, attrs: str) -> Tuple[bool, str]:
    r = subprocess.run(["llvm-mca", "-mtriple=armv7-linux-gnueabihf", "-mcpu=cortex-a9",
                        f"-mattr={attrs}", "-iterations=100", "-all-views=false",
                        "-summary-view"], input=text, capture_output=True, text=True)
    return r.returncode == 0, r.stdout + r.stderr


def _regions_text(regions: List[Tuple[str, List[str]]]) -> str:
    lines = [".Lt:"]
    for name, ins in regions:
        lines.append(f"# LLVM-MCA-BEGIN {name}")
        lines += [f"\t{i}" for i in ins]
        lines.append("# LLVM-MCA-END")
    return "\n".join(lines) + "\n"


def _parse(out: str) -> Dict[str, float]:
    res, name = {}, None
    for ln in out.splitlines():
        m = re.match(r"^\[\d+\] Code Region - (\S+)", ln)
        if m:
            name = m.group(1)
        m = re.match(r"^Total Cycles:\s+(\d+)", ln)
        if m and name is not None:
            res[name] = int(m.group(1)) / 100.0
    return res


class Mca:
    """llvm-mca's cycles per block, cached on disk by the block's text."""

    def __init__(self, cache: Path, attrs: str):
        self.cache_file, self.attrs = cache, attrs
        try:
            self.cache = json.loads(cache.read_text()) if cache.exists() else {}
        except ValueError:              # a run stopped while writing it: model again
            self.cache = {}
        #: instructions llvm-mca refused (each counted as 1 cycle)
        self.refused: Dict[str, int] = {}

    def key(self, ins: List[str]) -> str:
        return hashlib.sha1(("\n".join(ins) + self.attrs).encode()).hexdigest()[:16]

    def _solve(self, regions: List[Tuple[str, List[str]]]) -> Dict[str, float]:
        ok, out = _mca_run(_regions_text(regions), self.attrs)
        if ok:
            res = _parse(out)
            if len(res) == len(regions):
                return res
        if len(regions) > 1:
            h = len(regions) // 2
            return {**self._solve(regions[:h]), **self._solve(regions[h:])}
        name, ins = regions[0]
        keep, dropped = [], 0
        for i in ins:
            ok1, _ = _mca_run(_regions_text([("x", [i])]), self.attrs)
            if ok1:
                keep.append(i)
            else:
                dropped += 1
                self.refused[i] = self.refused.get(i, 0) + 1
        cyc = 0.0
        if keep:
            ok, out = _mca_run(_regions_text([(name, keep)]), self.attrs)
            cyc = _parse(out).get(name, float(len(keep))) if ok else float(len(keep))
        return {name: cyc + dropped}

    def cycles(self, blocks: Dict[int, List[str]]) -> Dict[int, float]:
        """start -> cycles per execution of each block (instruction texts)."""
        todo = {}
        for pc, ins in blocks.items():
            k = self.key(ins)
            if k not in self.cache:
                todo[k] = ins
        items = list(todo.items())
        for i in range(0, len(items), 400):
            chunk = [(f"b{k}", ins) for k, ins in items[i:i + 400]]
            for name, c in self._solve(chunk).items():
                self.cache[name[1:]] = c
        self.cache_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.cache_file.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.cache))
        tmp.replace(self.cache_file)
        return {pc: self.cache[self.key(ins)] for pc, ins in blocks.items()}


def block_cycles(blocks: Dict[int, dict], dis: Dict[int, str], mca: Mca) -> Dict[int, float]:
    """start -> llvm-mca's cycles per execution of each block."""
    texts = {}
    for pc, b in blocks.items():
        ins = []
        for p in b["pcs"]:
            ins += mca_text(dis.get(p, "nop"))
        texts[pc] = ins
    return mca.cycles(texts)


def core_cycles(blocks: Dict[int, dict], dis: Dict[int, str], mca: Mca) -> dict:
    """Cycles (perfect caches) and instructions of a step's blocks, in all and per function."""
    cyc = block_cycles(blocks, dis, mca)
    per_fn: Dict[str, dict] = {}
    for pc, b in blocks.items():
        f = per_fn.setdefault(b["fn"], {"cycles": 0.0, "instructions": 0.0})
        f["cycles"] += cyc[pc] * b["execs"]
        f["instructions"] += len(b["pcs"]) * b["execs"]
    return {"cycles": sum(f["cycles"] for f in per_fn.values()),
            "instructions": sum(f["instructions"] for f in per_fn.values()),
            "functions": per_fn}


# ------------------------------------------------------------------ the memory system

def cache_cycles(d1_misses: float, ll_misses: float, streaming: bool = False) -> float:
    """Cycles of the L1 misses (``d1_misses`` of them, ``ll_misses`` also missing L2; each
    line counted once: the L2 hits are ``d1_misses - ll_misses``). ``streaming``: the loads
    read their arrays in order (several fills under way at once), so a line costs the
    throughput of its level (L2_STREAM_LINE_CYCLES, DDR_STREAM_LINE_CYCLES), not the latency
    of a lone miss (L2_HIT_CYCLES, DDR_MISS_CYCLES)."""
    l2_hits = max(d1_misses - ll_misses, 0.0)
    if streaming:
        return l2_hits * L2_STREAM_LINE_CYCLES + ll_misses * DDR_STREAM_LINE_CYCLES
    return l2_hits * L2_HIT_CYCLES + ll_misses * DDR_MISS_CYCLES


def results_lines_paid(d1_misses: float, ll_misses: float, results_read_bytes: float) -> float:
    """The L1 misses of a step that ``invalidated_read_cycles``' fills already pay: one per
    line of the results read from the cached results region (on the board each was just
    invalidated and misses both caches; the cache simulation, without the invalidate, finds
    it in L2), at most the step's L2 hits."""
    return min(results_read_bytes / L1D[2], max(d1_misses - ll_misses, 0.0))


def uncached_cycles(read_bytes: float, write_bytes: float) -> dict:
    return {"read": read_bytes / UNCACHED_READ_BYTES_PER_S * A9_HZ,
            "write": write_bytes / UNCACHED_WRITE_BYTES_PER_S * A9_HZ}


def mmio_cycles(reads: float, writes: float) -> float:
    return reads * MMIO_READ_CYCLES + writes * MMIO_WRITE_CYCLES


def invalidated_read_cycles(invalidated_bytes: float, calls: float,
                            syscall_cycles: float = SYSCALL_CYCLES) -> dict:
    """The CPU's reads of the cached results region: the maintenance (per call a system call
    into the kernel's dma_sync path, per line invalidated its L1 and PL310 invalidate) and the
    line fills from DDR at the streaming rate (every line read was just invalidated: it misses
    L1 and L2; a slot's words are read in order, so the fills stream)."""
    lines = invalidated_bytes / L1D[2]
    return {"invalidate": lines * INVALIDATE_LINE_CYCLES + calls * syscall_cycles,
            "fill": lines * DDR_STREAM_LINE_CYCLES}


def ms(cycles: float) -> float:
    return cycles / A9_HZ * 1e3
