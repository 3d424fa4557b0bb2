"""Run by tools/board_rehearsal.py (`make board-rehearsal`) in build/board-image/venv: the board
image's software (Python 3.10, numpy 1.21.5, pynq 3.0.1 from PyPI: generators/board_image.py)
with this project's wheel installed as a board owner installs it, `pip install '<wheel>[board]'`.

What runs is the board backend (generators.runtime.engines.runtime.BoardBackend) and `ternary-pynq
selftest` with no change, through the real pynq package: ``pynq.Overlay`` parses the .hwh
(pynqmetadata) and downloads the bitstream (its ``Clocks`` writes FCLK0's dividers from the
.hwh), ``pynq.Clocks.fclk0_mhz`` reads them back through pynq's own register map, ``pynq.MMIO``
and ``pynq.allocate`` (``PynqBuffer``) go through a ``pynq.Device`` made active. Behind the
device: the AXI DMA register model with the golden PL top (generators.runtime.engines.regmodel) and an SLCR
model (lock, FPGA_RST_CTRL). What only the board has is stood in, and named: XRT's xclbinutil
and xclbin parser (the DDR banks XRT allocates from), the FPGA manager (``download`` records
the bitstream), /dev/mem (the SLCR clock registers an array; the registers behind a device
with REGISTER_RW), XRT's libxrt_core (``pynq._3rdparty.xrt.libc``, not loaded off the board:
its xclSyncBO, the C loop's invalidate of the cached results region, checks the device
handle, the buffer object, the direction and that the range is whole lines inside the buffer,
and counts; ``PynqBuffer.invalidate``, the Python loop's, reaches the same check through the
device's ``invalidate``).

Checked: the installed package is the wheel's (not the checkout), its C library loads; the
tiny checkpoint's images (``argv[3]``, converted off the board) in INT8, ternary and Q4_1
on the board backend give the golden backend's tokens
and every engine word, on the C loop and the Python loop, each invalidating the results region
in whole lines of its own buffer object; one SmolLM2-135M Q4_1 token from the
model image (``argv[2]``) on both loops equals golden's, and ``chat --backend board`` gives it;
``selftest --bitfile`` passes. Prints one JSON line.
"""
import contextlib
import ctypes
import io
import json
import os
import struct
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np
import pynq
import pynq._3rdparty.xrt
import pynq.mmio
import pynq.pl_server.embedded_device as embedded
import pynq.pl_server.xclbin_parser as xclbin_parser
import pynq.ps
from pynq.buffer import PynqBuffer

import generators
from generators.__main__ import main as cli
from generators.runtime import Decoder, Model, make_backend
from generators.runtime.host import clib as hostlib
from generators.runtime.engines.board import BoardBackend
from generators.runtime.model.checkpoint import PYNQ_Z1_ENGINES
from generators.runtime.engines.regmodel import BASE_ADDRESS, GoldenFabric, Memory, SgDmaRegs

DMA_BASE = (0x4040_0000, 0x4041_0000)
SLCR = 0xF800_0000
#: the model devices by their XRT handle (the stand-in xclSyncBO's lookup)
DEVICES = {}
#: xclSyncBO as pynq's _3rdparty.xrt types it: (handle, bo, direction, size, offset)
XCL_SYNC = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int,
                            ctypes.c_size_t, ctypes.c_size_t)


def _xcl_sync_bo(handle, bo, direction, size, offset):
    dev = DEVICES.get(handle)
    return -19 if dev is None else dev.sync(bo, direction, size, offset)     # -ENODEV


XCL_SYNC_BO = XCL_SYNC(_xcl_sync_bo)


class Slcr:
    """SLCR_LOCK / SLCR_UNLOCK / SLCR_LOCKSTA and FPGA_RST_CTRL (UG585); a pulse resets the PL."""

    def __init__(self, pl_reset):
        self.locked, self.rst, self.pulses, self.pl_reset = False, 0, 0, pl_reset

    def read(self, off):
        return {0x00C: int(self.locked), 0x240: self.rst}[off]

    def write(self, off, v):
        if off == 0x008 and v == 0xDF0D:
            self.locked = False
        elif off == 0x004 and v == 0x767B:
            self.locked = True
        elif off == 0x240 and not self.locked:
            if self.rst & 1 and not v & 1:
                self.pulses += 1
                self.pl_reset()
            self.rst = v


class ModelDevice(pynq.Device):
    """A pynq Device whose registers are the DMA register model and the SLCR model and whose
    memory is the DDR model (REGISTER_RW: pynq.MMIO's own path for such a device)."""

    capabilities = {"REGISTER_RW": True}

    def __init__(self, engines, mib=160):
        super().__init__("board-image-model")
        self.mem = Memory(None, mib << 20)
        # every format the PYNQ-Z1 overlay's engines take (the fabric model's default)
        self.fabric = GoldenFabric(self.mem, engines.max_k, engines.attention_config(),
                                   vectors=engines.vectors)
        self.regs = {b: SgDmaRegs(p, self.fabric, self.mem) for p, b in enumerate(DMA_BASE)}
        self.regs[SLCR] = self.slcr = Slcr(self.fabric.reset)
        self.downloads = []
        self.handle = 0x7A000 + len(DEVICES) * 0x10
        DEVICES[self.handle] = self
        self.bos, self.syncs, self.bad_syncs = {}, 0, []

    def _reg(self, address):
        base = address & ~0xFFFF
        return self.regs[base], address - base

    def read_registers(self, address, length):
        r, off = self._reg(address)
        return int(r.read(off)).to_bytes(4, "little")

    def write_registers(self, address, data):
        r, off = self._reg(address)
        r.write(off, int.from_bytes(data, "little"))

    def allocate(self, shape, dtype, cacheable=True, **kw):
        a = self.mem.allocate(shape, dtype)
        bo = len(self.bos) + 1
        self.bos[bo] = a.nbytes
        return PynqBuffer(shape, dtype, buffer=self.mem.map,
                          offset=a.physical_address - BASE_ADDRESS,
                          device_address=a.physical_address, device=self, bo=bo,
                          coherent=not cacheable)

    def sync(self, bo, direction, size, offset):
        """xclSyncBO from the device (direction 1) of whole 32-byte lines inside buffer
        object ``bo``: 0, else -EINVAL (recorded)."""
        self.syncs += 1
        n = self.bos.get(bo)
        if n is None or direction != 1 or size <= 0 or size % 32 or offset % 32 \
                or offset + size > n:
            self.bad_syncs.append((bo, direction, size, offset))
            return -22
        return 0

    def flush(self, bo, offset, ptr, size):
        pass

    def invalidate(self, bo, offset, ptr, size):
        if self.sync(bo, 1, size, offset):
            raise RuntimeError(f"Invalidate Failed: bo {bo} offset {offset} size {size}")

    def download(self, bitstream, parser=None):
        self.downloads.append(Path(bitstream.bitfile_name).name)

    def get_bitfile_metadata(self, bitfile_name, partial=False):
        return embedded.EmbeddedDevice.get_bitfile_metadata(self, bitfile_name, partial)


class _NoXclbin:
    """XRT's xclbin parser stood in: no DDR banks (the device allocates from its DDR model)."""

    def __init__(self, xclbin_data=None):
        self.mem_dict, self.ip_dict = {}, {}


def stand_ins():
    """What only the board has: XRT's tools and libxrt_core's xclSyncBO, and /dev/mem for
    pynq's clock registers."""
    pynq._3rdparty.xrt.libc = types.SimpleNamespace(xclSyncBO=XCL_SYNC_BO)
    embedded._create_xclbin = lambda mem_dict: b""
    xclbin_parser.XclBin = _NoXclbin
    regs = np.zeros(0x200 // 4, np.uint32)
    regs[0x108 // 4] = 20 << 12            # IO_PLL_CTRL: FDIV 20 (50 MHz -> 1000 MHz)
    regs[0x100 // 4] = 26 << 12            # ARM PLL 1300 MHz
    regs[0x104 // 4] = 21 << 12            # DDR PLL 1050 MHz
    regs[0x170 // 4] = (5 << 8) | (2 << 20)   # FPGA0_CLK_CTRL: 100 MHz until the overlay loads

    class ArrayMMIO:
        def __init__(self, base, length):
            self.array = regs

    real = pynq.mmio.MMIO
    pynq.mmio.MMIO = ArrayMMIO
    try:
        pynq.ps.Clocks._real_instance = pynq.ps._ClocksZynq()
    finally:
        pynq.mmio.MMIO = real
    return regs


def bitstream(folder: Path, hwh: Path) -> Path:
    """A .bit with a real header (pynq parses it) beside the .hwh, as copied to the board."""
    def field(tag, text):
        b = text.encode() + b"\0"
        return bytes([tag]) + struct.pack(">h", len(b)) + b
    data = bytes.fromhex("ffffffffaa995566") * 16
    bit = (struct.pack(">h", 9) + bytes.fromhex("0ff00ff00ff00ff000") + struct.pack(">h", 1)
           + field(0x61, "pynq_ternary;UserID=0XFFFFFFFF;Version=2020.2")
           + field(0x62, "7z020clg400") + field(0x63, "2026/12/04") + field(0x64, "00:00:00")
           + b"\x65" + struct.pack(">i", len(data)) + data)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pynq_ternary.bit").write_bytes(bit)
    (folder / "pynq_ternary.hwh").write_bytes(hwh.read_bytes())
    return folder / "pynq_ternary.bit"


def same(t1, t2):
    return len(t1) == len(t2) and all(
        a[:3] == b[:3] and len(a[3]) == len(b[3])
        and all(np.array_equal(x, y) for x, y in zip(a[3], b[3])) for a, b in zip(t1, t2))


def on_device(engines):
    dev = ModelDevice(engines)
    pynq.Device.active_device = dev
    return dev


def run_pair(m, bit, ids, n, loop, **kw):
    """(golden tokens, board tokens, engine words identical, the board backend)."""
    t_g, t_b = [], []
    g = list(Decoder(m, make_backend("golden", m, **kw), trace=t_g, loop=loop).generate(ids, n))
    dev = on_device(m.engines)
    be = make_backend("board", m, bitfile=str(bit), **kw)
    assert isinstance(be, BoardBackend) and type(be.dmas[0].mmio) is pynq.MMIO
    assert isinstance(be.buf["kv"], PynqBuffer)
    b = list(Decoder(m, be, trace=t_b, loop=loop).generate(ids, n))
    return g, b, bool(same(t_g, t_b)), be, dev


def main():
    hwh, image, tiny = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    t0 = time.time()
    res = {"python": sys.version.split()[0], "numpy": np.__version__, "pynq": pynq.__version__,
           "package": generators.__file__}
    here = Path(__file__).resolve().parents[1]
    assert not Path(generators.__file__).resolve().is_relative_to(here / "generators"), \
        "the checkout's package was imported, not the installed wheel"
    ops, why = hostlib.load()
    res["c_library"] = why or str(ops.path.name)
    assert ops is not None, why
    regs = stand_ins()
    work = Path(tempfile.mkdtemp(prefix="board-image-"))
    bit = bitstream(work / "board", hwh)
    # the overlay as the board loads it: .hwh parsed, FCLK0 set from it and read back
    dev = on_device(PYNQ_Z1_ENGINES)
    ov = pynq.Overlay(str(bit))
    res["overlay"] = {"ip": sorted(ov.ip_dict), "downloads": dev.downloads,
                      "fclk0_mhz": float(pynq.Clocks.fclk0_mhz),
                      "dma_0": {k: v for k, v in ov.ip_dict["dma_0"]["parameters"].items()
                                if k.startswith("c_")}}
    assert res["overlay"]["downloads"] == ["pynq_ternary.bit"], res["overlay"]
    assert abs(res["overlay"]["fclk0_mhz"] - 142.857) < 0.01, res["overlay"]
    # the tiny checkpoint's images, every format, both loops
    res["tiny"] = {}
    for fmt in ("int8", "ternary", "q4"):
        m = Model.load(str(tiny / f"tiny.{fmt}.tpimg"))
        for loop in ("c", "python"):
            g, b, ident, be, dev = run_pair(m, bit, [5, 6, 7], 4, loop)
            res["tiny"][f"{fmt}/{loop}"] = {"golden": g, "board": b, "identical": ident,
                                            "invalidates": dev.syncs}
            assert g == b and ident, (fmt, loop, g, b)
            assert dev.syncs == be.cache_total["invalidates"] > 0 and not dev.bad_syncs, \
                (fmt, loop, dev.syncs, be.cache_total, dev.bad_syncs[:3])
    # a DMA fault on the board path: reset through the SLCR, the lock left as found
    m = Model.load(str(tiny / "tiny.int8.tpimg"))
    dev = on_device(m.engines)
    be = make_backend("board", m, bitfile=str(bit))
    dev.regs[DMA_BASE[0]].inject("error", "mm2s", after=1)
    toks = list(Decoder(m, be, loop="python").generate([5, 6, 7], 2))
    res["fault"] = {"faults": be.faults, "slcr_pulses": dev.slcr.pulses,
                    "slcr_locked": dev.slcr.locked, "tokens": toks}
    assert len(be.faults) == 1 and dev.slcr.pulses == 1 and not dev.slcr.locked, res["fault"]
    # one SmolLM2-135M Q4_1 token from the model image, both loops
    sm = Model.load(str(image))
    ids = sm.tokenizer().chat_ids("What is the capital of France?")
    res["smollm2"] = {"prompt_tokens": len(ids)}
    for loop in ("c", "python"):
        g, b, ident, be, dev = run_pair(sm, bit, ids, 1, loop, context=64)
        res["smollm2"][loop] = {"golden": g, "board": b, "identical": ident}
        assert g == b and ident, (loop, g, b)
    # the owner's commands: chat on the board, then selftest
    dev = on_device(sm.engines)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = cli(["chat", "--model", str(image), "--backend", "board", "--bitfile", str(bit),
                  "--prompt", "What is the capital of France?", "--tokens", "1",
                  "--context", "64"])
    res["chat"] = {"rc": rc, "text": out.getvalue().strip()[-200:]}
    assert rc == 0, res["chat"]
    dev = on_device(PYNQ_Z1_ENGINES)
    out = io.StringIO()
    os.chdir(work)
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        rc = cli(["selftest", "--bitfile", str(bit), "--frames", "2", "--speed-rows", "64"])
    res["selftest"] = {"rc": rc, "verdict": json.loads((work / "selftest.json").read_text())
                       ["verdict"]}
    assert rc == 0, out.getvalue()
    res["fclk0_ctrl"] = f"0x{int(regs[0x170 // 4]):08X}"
    res["seconds"] = round(time.time() - t0, 1)
    print(json.dumps(res))


if __name__ == "__main__":
    sys.exit(main())
