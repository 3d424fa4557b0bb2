"""The ``board`` backend: the PYNQ-Z1's two AXI DMAs in scatter-gather mode through ``pynq.MMIO``
(``pynq<4``, imported by generators.host.import_pynq when a board backend is made), buffers
from ``pynq.allocate``; the .hwh's DMA parameters the runtime depends on; the PL reset; the
cached results region's invalidate by range (XRT's xclSyncBO, as pynq's own
``PynqBuffer.invalidate`` calls it)."""
from __future__ import annotations

import ctypes
import platform
import sys
import time
from typing import Callable, Dict, Optional, Tuple

import numpy as np

from generators.host import FCLK_MHZ, check_clock, import_pynq

from ..errors import BackendError
from ..model.model import Model
from ..optional import module
from . import pg021 as R
from .cloop import SPIN_US
from .plan import MEMINFO, MemoryPlan, board_context, memory_plan
from .registry import register_backend
from .runtime import DmaRuntime, write_barrier
from .sgdma import SgDma

__all__ = ["BoardBackend", "DMA_PARAMETERS", "overlay_parameters", "check_overlay",
           "mapped_registers", "xrt_sync", "buffer_sync", "invalidate_probe"]


# --------------------------------------------------------------------------- board

#: every AXI DMA parameter of the .hwh the runtime depends on (docs/vivado.md, "What the board
#: backend needs to know"): the value it must have and why
DMA_PARAMETERS = {
    "c_include_sg": (1, "the runtime's descriptor chains need scatter-gather (a simple-mode "
                        "bitstream has no CURDESC/TAILDESC)"),
    "c_sg_length_width": (R.LEN_BITS, "the runtime's descriptors (a whole matrix half's rows "
                                      "each) carry 26-bit lengths"),
    "c_sg_include_stscntrl_strm": (0, "a status stream the PL top never drives stalls S2MM"),
    "c_micro_dma": (0, "micro DMA has no scatter-gather and short bursts"),
    "c_m_axi_mm2s_data_width": (64, "MM2S buffers are 8-byte aligned (no realignment engine)"),
    "c_m_axi_s2mm_data_width": (32, "S2MM buffers are 4-byte aligned (no realignment engine)"),
    "c_m_axis_mm2s_tdata_width": (64, "the engines' frames are 64-bit beats"),
    "c_s_axis_s2mm_tdata_width": (32, "the engines' results are 32-bit words"),
    "c_addr_width": (32, "the runtime writes 32-bit descriptors"),
}


def overlay_parameters(ip_dict: dict) -> Dict[str, Dict[str, Optional[int]]]:
    """{dma_p: {parameter: value or None (absent)}} of DMA_PARAMETERS as the .hwh gives them."""
    out = {}
    for p in (0, 1):
        name = f"dma_{p}"
        if name not in ip_dict:
            continue
        par = {k.lower(): v for k, v in ip_dict[name].get("parameters", {}).items()}
        out[name] = {k: (int(par[k]) if k in par else None) for k in DMA_PARAMETERS}
    return out


def check_overlay(ip_dict: dict, plan: MemoryPlan, where: str = "the overlay") -> None:
    """BackendError (one line) unless the overlay's .hwh has dma_0 and dma_1 with every
    parameter of DMA_PARAMETERS (docs/vivado.md's table) at its value; an absent one is refused
    too (an old or hand-made .hwh)."""
    got = overlay_parameters(ip_dict)
    for p in (0, 1):
        name = f"dma_{p}"
        if name not in got:
            raise BackendError(f"{where}: no {name} in its .hwh")
        for k, (want, why) in DMA_PARAMETERS.items():
            v = got[name][k]
            if v is None:
                raise BackendError(f"{where}: {name}'s .hwh does not give {k} (must be {want}: "
                                   f"{why})")
            if v != want:
                what = {"c_include_sg": "is built without scatter-gather (c_include_sg 0)",
                        "c_m_axis_mm2s_tdata_width": f"'s MM2S stream is {v} bits"}.get(
                            k, f"has {k} {v}")
                sep = "" if what.startswith("'") else " "
                raise BackendError(f"{where}: {name}{sep}{what}; must be {want}: {why}")


#: the SLCR (UG585 ch. 4.3): SLCR_LOCK, SLCR_UNLOCK, SLCR_LOCKSTA, FPGA_RST_CTRL
SLCR_BASE, SLCR_LOCK, SLCR_UNLOCK, SLCR_LOCKSTA, FPGA_RST_CTRL = (0xF8000000, 0x004, 0x008,
                                                                  0x00C, 0x240)
SLCR_LOCK_KEY, SLCR_UNLOCK_KEY = 0x767B, 0xDF0D


def _slcr_pl_reset(pynq) -> Callable[[], None]:
    """FCLK_RESET0_N pulsed through the SLCR (FPGA_RST_CTRL, 0xF8000240): resets the PL
    logic on that reset (the engines, the joiner, the DMAs behind proc_sys_reset). The SLCR is
    left as it was found (SLCR_LOCKSTA): Linux leaves it unlocked and PYNQ's Clocks writes the
    FCLK dividers without unlocking it, so locking it here would make every later clock setting
    of that boot a silent no-op."""
    slcr = pynq.MMIO(SLCR_BASE, 0x1000)

    def reset():
        locked = slcr.read(SLCR_LOCKSTA) & 1
        if locked:
            slcr.write(SLCR_UNLOCK, SLCR_UNLOCK_KEY)
        slcr.write(FPGA_RST_CTRL, 0x1)         # FPGA0_OUT_RST
        time.sleep(0.001)
        slcr.write(FPGA_RST_CTRL, 0x0)
        if locked:
            slcr.write(SLCR_LOCK, SLCR_LOCK_KEY)
    return reset


#: XRT's sync direction of an invalidate (xclBOSyncDirection.XCL_BO_SYNC_BO_FROM_DEVICE)
SYNC_FROM_DEVICE = 1


def xrt_sync(pynq) -> int:
    """The address of XRT's ``xclSyncBO`` (libxrt_core, as pynq 3.0.1 / 3.1 load it in
    ``pynq._3rdparty.xrt``: ``libc``), which ``PynqBuffer.invalidate`` reaches through
    ``XrtDevice.invalidate(bo, offset, ptr, size)`` = ``xclSyncBO(device.handle, bo,
    XCL_BO_SYNC_BO_FROM_DEVICE, size, offset)``; BackendError in one line when the pynq in use
    has no way to invalidate a cached buffer by range (the results region needs it)."""
    ver = getattr(pynq, "__version__", "?")
    try:
        xrt = module("pynq._3rdparty.xrt")
    except ImportError:
        raise BackendError(f"pynq {ver} has no XRT (pynq._3rdparty.xrt): the results region is "
                           f"cached and must be invalidated by range before each read; run "
                           f"the PYNQ 3.0.1 or 3.1 image's pynq") from None
    lib = getattr(xrt, "libc", None)
    fn = getattr(lib, "xclSyncBO", None) if lib is not None else None
    if fn is None:
        raise BackendError(f"pynq {ver}: XRT's libxrt_core is not loaded (XILINX_XRT unset?), "
                           f"so nothing can invalidate the cached results region before the "
                           f"CPU reads it; run as root in the image's venv (source "
                           f"/etc/profile.d/pynq_venv.sh, which sets XILINX_XRT)")
    return int(ctypes.cast(fn, ctypes.c_void_p).value)


def buffer_sync(fn: int, buf) -> Tuple[int, int, int, int]:
    """(xclSyncBO, the device handle, the buffer object, the buffer's offset in it) of a
    PynqBuffer of an XRT device: the C loop's ``tph_io.sync``; BackendError in one line when
    the buffer has none of them (a pynq whose buffers are not XRT buffer objects)."""
    dev = getattr(buf, "device", None)
    handle = getattr(dev, "handle", None)
    bo, offset = getattr(buf, "bo", None), getattr(buf, "offset", None)
    if handle is None or bo is None or offset is None:
        raise BackendError("pynq.allocate gave the results region a buffer without an XRT "
                           "device handle, buffer object and offset (PynqBuffer.device.handle, "
                           ".bo, .offset): it cannot be invalidated by range")
    h = handle if isinstance(handle, int) else ctypes.cast(handle, ctypes.c_void_p).value
    return fn, int(h or 0), int(bo), int(offset)


#: tph_sync_fn / xclSyncBO: (handle, bo, direction, size, offset) -> 0 or a negative errno
SYNC_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int32,
                           ctypes.c_size_t, ctypes.c_size_t)


def invalidate_probe(pynq) -> Tuple[bool, str]:
    """(ok, what) of selftest's check: XRT's xclSyncBO, found as the board backend finds it,
    invalidates one line of a cached buffer of ``pynq.allocate``."""
    try:
        fn, handle, bo, off = buffer_sync(xrt_sync(pynq),
                                          pynq.allocate((64,), np.uint8, cacheable=True))
    except BackendError as exc:
        return False, str(exc)
    rc = SYNC_FN(fn)(handle, bo, SYNC_FROM_DEVICE, 32, off)
    if rc:
        return False, f"xclSyncBO of one line of a cached buffer returned {rc}"
    return True, ("XRT's xclSyncBO invalidates a cached buffer by range (the decoder's results "
                  "region is cached and invalidated so before each read)")


class BoardBackend(DmaRuntime):
    """The PYNQ-Z1 overlay: dma_0 and dma_1 in scatter-gather mode; ``pynq<4`` imported here
    only. The memory plan is checked against the budgets, and after the overlay is loaded
    against the board's free CMA (``meminfo``'s CmaFree), before anything is allocated."""

    name = "board"
    worker_spin_us = SPIN_US           # the engines run while the CPU waits: spin, then sleep

    def __init__(self, model: Model, bitfile: str, context: Optional[int] = None,
                 timeout_s: float = 5.0, download: bool = True, cma_mb: float = 128,
                 host_mb: float = 64, vectors: Optional[int] = None, streams: int = 1,
                 meminfo: str = MEMINFO):
        if context is None:              # max_context, or the most that fits the CMA budget
            context, notice = board_context(model, cma_mb, host_mb, vectors, streams)
            if notice is not None:
                print(notice, file=sys.stderr)
        plan = memory_plan(model, context, vectors, streams)
        msg = plan.check(cma_mb, host_mb)
        if msg is not None:
            raise BackendError(msg)
        pynq = import_pynq()
        ov = pynq.Overlay(bitfile, download=download)
        check_clock(float(pynq.Clocks.fclk0_mhz), FCLK_MHZ)
        check_overlay(ov.ip_dict, plan, bitfile)
        msg = plan.check_free_cma(meminfo)
        if msg is not None:
            raise BackendError(msg)
        sync = xrt_sync(pynq)
        mmios = [pynq.MMIO(int(ov.ip_dict[f"dma_{p}"]["phys_addr"]),
                           int(ov.ip_dict[f"dma_{p}"]["addr_range"])) for p in (0, 1)]
        self.overlay = ov
        barrier, why = write_barrier()
        if barrier is None and platform.machine().startswith("arm"):
            print(f"WARNING: no write barrier for the Python loop ({why}): its stores into "
                  f"DMA memory are not ordered before TAILDESC; build the C library (a C "
                  f"compiler when pip installs the package)", file=sys.stderr)
        super().__init__(model, [SgDma(m, f"dma_{p}") for p, m in enumerate(mmios)],
                         lambda shape, dtype, cacheable, **_: pynq.allocate(
                             shape, dtype, cacheable=cacheable),
                         plan, timeout_s, pl_reset=_slcr_pl_reset(pynq), barrier=barrier)
        self.direct_regs = mapped_registers(mmios)
        # the results region (allocated cacheable): the Python loop invalidates a slice of it
        # (PynqBuffer.invalidate: the same xclSyncBO), the C loop calls xclSyncBO itself
        self.cache_sync = buffer_sync(sync, self.results)


def mapped_registers(mmios) -> Optional[Tuple[int, int]]:
    """The virtual addresses of both DMAs' register pages where pynq.MMIO maps them
    (``mmio.array``, a device with MEMORY_MAPPED: the board), for the C loop's direct
    volatile access; None where its accesses go through Python (a device with REGISTER_RW,
    a stand-in)."""
    out = []
    for m in mmios:
        a = getattr(m, "array", None)
        if not (isinstance(a, np.ndarray) and a.dtype == np.uint32 and a.size * 4 >= 0x40):
            return None
        out.append(int(a.ctypes.data))
    return tuple(out)


def _board(model: Model, **kw) -> BoardBackend:
    if "bitfile" not in kw:
        raise BackendError("the board backend needs bitfile=PATH (the overlay's .bit)")
    return BoardBackend(model, **kw)


register_backend("board", _board)
