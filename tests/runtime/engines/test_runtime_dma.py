"""The runtime at DMA level (docs/runtime.md): the memory plan and its refusals, the DMA memory
it allocates, the descriptor chains, the bytes the CPU writes per token, the transfers per
token and the LM head only where a token is sampled, DMA faults (a hang, an error bit, a short
transfer: survived with every engine word equal to golden's, or reported by name with nothing
left behind), the board backend on a stand-in ``pynq`` whose registers are the register model,
the overlay checks, the simulator link's timeout, and the host's memory (tracemalloc) with the
register model in a process of its own. The per-token tests and the faults run on both host
loops (``loop``: the Python reference and the C step of generators.runtime.engines.cloop).
"""
from __future__ import annotations

import ctypes
import sys
import tracemalloc
import types
from pathlib import Path

import numpy as np
import pytest

from generators.runtime import Decoder, convert, load_checkpoint, make_backend
from generators.runtime.host import ops as hostops
from generators.runtime.engines import pg021 as R
from generators.runtime.engines.board import (DMA_PARAMETERS, FPGA_RST_CTRL, SLCR_BASE, SLCR_LOCK,
                                              SLCR_LOCKSTA, SLCR_UNLOCK, check_overlay)
from generators.runtime.errors import BackendError, DmaError, DmaHangError, DmaShortError
from generators.runtime.model.checkpoint import PYNQ_Z1_ENGINES, EngineConfig, ModelConfig
from generators.runtime.engines.plan import (MIB, board_context, cma_mib, info, memory_plan, model_shape,
                                            smollm2_lines)
from generators.runtime.model.synthetic import SMOLLM2_135M, TINY, write_checkpoint

REPO = Path(__file__).resolve().parents[3]
ENG = EngineConfig(max_k=512, max_context=32)
PROMPT = [1, 2, 3]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    ck = load_checkpoint(write_checkpoint(tmp_path_factory.mktemp("tiny"), TINY, seed=1), ENG)
    return {f: convert(ck, f, ENG, notice=None) for f in ("int8", "ternary", "q4")}


@pytest.fixture(scope="module")
def golden_run(models):
    """Tokens and engine words of the golden backend, no fault: the reference (the Python
    loop on the numpy host ops)."""
    m = models["int8"]
    tr = []
    with hostops.using("numpy"):
        toks = list(Decoder(m, make_backend("golden", m), trace=tr,
                            loop="python").generate(PROMPT, 4))
    return toks, tr


LOOPS = ["python", "c"]


def _same(t1, t2):
    return len(t1) == len(t2) and all(
        a[:3] == b[:3] and len(a[3]) == len(b[3])
        and all(np.array_equal(x, y) for x, y in zip(a[3], b[3])) for a, b in zip(t1, t2))


# ------------------------------------------------------------------ the memory plan

SMOLLM2 = ModelConfig(**SMOLLM2_135M)


def test_smollm2_plans_at_context_2048():
    """On the PYNQ-Z1 overlay's INT16 KV, ternary fits 128 MiB of CMA at context 2048; Q4_1 (+
    the Q8_0 head) fits at 1589 of 2048 (on the INT8-KV overlay at 2048), and a board run
    without --context takes that, saying so in one line; INT8 does not fit at any context and
    says so in one line."""
    assert PYNQ_Z1_ENGINES.kv_bits == 16
    mib = {}
    for f in ("q4", "ternary", "int8"):
        p = memory_plan(model_shape(SMOLLM2, PYNQ_Z1_ENGINES, f), 2048)
        mib[f] = p.dma_bytes / MIB
        assert p.regions["kv"].nbytes == 30 * 768 * 2048          # 768 B / position / layer
        assert p.transfers_per_token(False) == 150 and p.transfers_per_token(True) == 151
        per_port = [(t.index, ch) for t in p.transfers for ch in t.desc if ch in (0, 2)]
        assert len(per_port) == 2 * 30 * 5 + 2                     # 5 per port per layer
    assert mib["q4"] > 128 and mib["ternary"] < 128 and mib["int8"] > 128
    q4 = memory_plan(model_shape(SMOLLM2, PYNQ_Z1_ENGINES, "q4"), 2048)
    assert "exceeds the 128 MiB CMA budget; context 1589 fits" in q4.check()
    assert memory_plan(model_shape(SMOLLM2, PYNQ_Z1_ENGINES, "q4"), 1589).check() is None
    assert memory_plan(model_shape(SMOLLM2, PYNQ_Z1_ENGINES, "q4"), 1590).check() is not None
    e8 = PYNQ_Z1_ENGINES.with_kv_bits(8)
    assert memory_plan(model_shape(SMOLLM2, e8, "q4"), 2048).check() is None
    # without --context: the engines' max_context where it fits, else the most that fits
    ctx, notice = board_context(model_shape(SMOLLM2, PYNQ_Z1_ENGINES, "q4"))
    assert ctx == 1589 and "context 1,589 positions" in notice and "138.1 MiB" in notice
    assert "\n" not in notice
    assert board_context(model_shape(SMOLLM2, PYNQ_Z1_ENGINES, "ternary")) == (2048, None)
    assert board_context(model_shape(SMOLLM2, e8, "q4")) == (2048, None)
    assert board_context(model_shape(SMOLLM2, PYNQ_Z1_ENGINES, "int8")) == (2048, None)
    msg = memory_plan(model_shape(SMOLLM2, PYNQ_Z1_ENGINES, "int8"), 2048).check()
    assert "exceeds the 128 MiB CMA budget; no context fits" in msg and "\n" not in msg
    # a larger CMA: the refusal names the context that fits
    msg = memory_plan(model_shape(SMOLLM2, PYNQ_Z1_ENGINES, "int8"), 2048).check(cma_mb=150)
    assert "exceeds the 150 MiB CMA budget; context " in msg and " fits" in msg
    lines = smollm2_lines(2048)
    assert len(lines) == 3 and "context 1589 fits" in lines[0] and "fits" in lines[1]


def test_plan_is_what_the_runtime_allocates(models):
    m = models["ternary"]
    be = make_backend("golden", m)
    plan = be.plan
    assert plan is not None and plan.context == ENG.max_context
    for name, r in plan.regions.items():
        assert be.buf[name].nbytes == r.nbytes, name
    # every descriptor of the plan is written: 64-byte aligned, NXTDESC inside the region
    w = be.words
    fb = be.base["frames"]
    for t in plan.transfers:
        for ch, (key, n) in t.desc.items():
            off = plan.regions["frames"].items[key][0]
            assert off % R.DESC_BYTES == 0
            for i in range(n):
                d = w[off // 4 + i * R.DESC_WORDS:][:8]
                assert fb <= d[R.D_NXTDESC] < fb + plan.regions["frames"].nbytes
                assert d[R.D_CONTROL] & R.LEN_MASK > 0
    assert plan.descriptors == sum(n for t in plan.transfers for _, n in t.desc.values())


def test_info_prints_the_plan_and_refuses_in_one_line(models, capsys):
    m = models["q4"]
    assert info(m, 16) == 0
    out = capsys.readouterr().out
    assert "DMA memory" in out and "kv " in out and "host memory" in out and "fits:" in out
    assert info(m, 16, cma_mb=0.1) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: DMA memory") and "0.1 MiB" in err[0]
    assert info(m, 16, host_mb=0.01) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: host memory") and "model: weight images" in err
    with pytest.raises(ValueError, match="context 33 outside 1..32"):
        memory_plan(m, 33)


# ------------------------------------------------------------------ per token

@pytest.mark.parametrize("loop", LOOPS)
def test_cpu_bytes_transfers_and_the_lm_head_only_where_sampled(models, golden_run, loop):
    m = models["int8"]
    be = make_backend("golden", m)
    dec = Decoder(m, be, loop=loop)
    ran, hooks = [], []

    def hook(index, done):               # both loops call it before and after each transfer
        hooks.append((index, done))
        if done:
            t = be.plan.transfers[index]
            ran.append((t.layer, t.kind))

    be.transfer_hooks.append(hook)
    toks = list(dec.generate(PROMPT, 4))
    assert hooks[:2] == [(hooks[0][0], False), (hooks[0][0], True)]
    assert be.transfers_run == len(ran)
    assert toks == golden_run[0]
    lm = [i for i, (_, k) in enumerate(ran) if k == "lm_head"]
    per_token = 2 * 5
    # prompt of 3: the LM head after the last prompt token only, then after each new token
    assert len(lm) == 4 and lm[0] == 3 * per_token
    assert len(ran) == 6 * per_token + 4
    c = m.config
    tb = dec.token_bytes
    assert tb["kv"] == c.num_hidden_layers * c.num_key_value_heads * 2 * c.head_dim
    assert tb["parts"] == c.num_hidden_layers * c.num_key_value_heads * (112 + 120)
    # every x as Q8_0 blocks (format 0x09, layers and LM head): K codes and ceil(K/128)
    # beats of fp16 d; per layer the transfers q k v, o, gate up (K = hidden) and down
    def q8_0_x(k):
        return k + -(-k // 128) * 8
    assert tb["x"] == c.num_hidden_layers * (3 * q8_0_x(c.hidden_size)
                                             + q8_0_x(c.intermediate_size)) \
        + q8_0_x(c.hidden_size)
    # per token the descriptor fields: every status word of the transfers run, the K/V lengths
    n_desc = sum(n for t in be.plan.transfers for _, n in t.desc.values())
    assert tb["desc"] == 4 * n_desc + 4 * 4 * c.num_hidden_layers * c.num_key_value_heads
    assert be.faults == []


def test_backend_switch_carries_the_kv_cache(models, golden_run):
    """The prompt on one backend, the answer on another (chat's --prefill golden): the KV
    rows move into the second backend's DMA memory once; same tokens and words."""
    m = models["int8"]
    tr = []
    first, second = make_backend("golden", m), make_backend("golden", m)
    dec = Decoder(m, first, trace=tr)

    def on_token(i, t, logits):
        if i == 0:
            dec.be = second

    toks = list(dec.generate(PROMPT, 4, on_token=on_token))
    assert toks == golden_run[0] and _same(tr, golden_run[1])
    assert second.transfers_run > 0


# ------------------------------------------------------------------ faults

FAULTS = [
    ("hang", "mm2s", {}), ("hang", "s2mm", {}),
    ("error", "mm2s", dict(error=R.SR_DMA_SLV_ERR)), ("error", "mm2s", dict(error=R.SR_DMA_DEC_ERR)),
    ("error", "s2mm", dict(error=R.SR_SG_INT_ERR)), ("error", "s2mm", dict(error=R.SR_DMA_INT_ERR)),
    ("short", "mm2s", {}),
]
ERRORS = {"hang": DmaHangError, "error": DmaError, "short": DmaShortError}


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("kind, channel, kw", FAULTS)
@pytest.mark.parametrize("port, after", [(0, 1), (1, 7)])      # an attention, a matrix transfer
def test_a_dma_fault_is_survived(models, golden_run, kind, channel, kw, port, after, loop):
    """One fault: the runtime resets both DMAs and the PL and runs the transfer again; the
    tokens and every engine word equal golden's."""
    m = models["int8"]
    be = make_backend("golden", m, timeout_s=0.05)
    be.regs[port].inject(kind, channel, after=after, **kw)
    tr = []
    toks = list(Decoder(m, be, trace=tr, loop=loop).generate(PROMPT, 4))
    assert toks == golden_run[0] and _same(tr, golden_run[1])
    assert len(be.faults) == 1 and "retried after a reset" in be.faults[0]
    assert be.regs[0].resets == be.regs[1].resets == 1


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("kind, channel, kw", FAULTS)
def test_a_persistent_dma_fault_is_named(models, golden_run, kind, channel, kw, loop):
    """The same fault twice: a named error with the transfer, the layer and the channel; the
    backend then runs a whole generation again with golden's answers (nothing left behind)."""
    m = models["int8"]
    be = make_backend("golden", m, timeout_s=0.05)
    be.regs[1].inject(kind, channel, after=7, count=2, **kw)
    with pytest.raises(ERRORS[kind]) as e:
        list(Decoder(m, be, loop=loop).generate(PROMPT, 4))
    msg = str(e.value)
    assert "DMA transfer " in msg and " of layer " in msg and "port 1" in msg
    assert e.value.info["layer"] is not None and e.value.info["port"] in (0, 1)
    if kind == "error":
        assert R.error_names(kw["error"]) in msg
    tr = []
    assert list(Decoder(m, be, trace=tr, loop=loop).generate(PROMPT, 4)) == golden_run[0]
    assert _same(tr, golden_run[1])


def test_register_model_refuses_stale_and_bad_descriptors(models):
    """PG021's SG errors: a fetched descriptor with Cmplt set is SGIntErr, a descriptor outside
    DDR SGDecErr, a buffer outside DDR DMADecErr; the channel halts with the bit set."""
    m = models["int8"]
    be = make_backend("golden", m)
    regs = be.regs[0]
    b = be._blocks[0][0]
    be.words[b.status_idx] = R.ST_CMPLT                  # stale: not cleared before reuse
    be.dmas[0].tail(0, b.last)
    assert regs.read(R.DMASR) & R.SR_SG_INT_ERR and regs.read(R.DMASR) & R.SR_HALTED
    be2 = make_backend("golden", m)
    b = be2._blocks[0][0]
    be2.words[b.status_idx] = 0
    be2.words[b.status_idx[0] - R.D_STATUS + R.D_BUFFER] = 0x10              # outside DDR
    be2.dmas[0].tail(0, b.last)
    assert be2.regs[0].read(R.DMASR) & R.SR_DMA_DEC_ERR
    assert be2.words[b.status_idx[0]] & R.ST_DEC_ERR
    with pytest.raises(ValueError, match="fault kind"):
        regs.inject("melt")


# ------------------------------------------------------------------ board backend

#: XRT's xclSyncBO (handle, bo, direction, size, offset), as pynq 3's _3rdparty.xrt types it
XCL_SYNC = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int,
                            ctypes.c_size_t, ctypes.c_size_t)
XRT_HANDLE = 0x5A5A000


def fake_pynq(model, mhz=142.857132, sg=1, allocations=None, slcr_locked=False, xrt=True):
    """A stand-in for pynq: Overlay with dma_0/dma_1 in its ip_dict, MMIO onto the register
    model (the golden PL top behind it), allocate from its DDR model (a cacheable buffer
    through the model of the CPU's cache: flush writes back, invalidate refreshes), each
    buffer with its XRT buffer object, device handle and offset, Clocks.fclk0_mhz; and
    (``xrt``) XRT's libxrt_core with xclSyncBO onto the DDR model's cache (``pynq.syncs``: the
    calls), as pynq 3.0.1's _3rdparty.xrt loads it (install with :func:`use_pynq`)."""
    from generators.runtime.engines.regmodel import DmaBuffer, GoldenFabric, Memory, SgDmaRegs

    class XrtBuffer(DmaBuffer):
        """A PynqBuffer's XRT attributes (``device`` shadows numpy 2's ndarray.device)."""
        device = bo = offset = None

    mem = Memory(None, 64 << 20)
    fab = GoldenFabric(mem, model.engines.max_k, model.engines.attention_config())
    regs = {0x4040_0000: SgDmaRegs(0, fab, mem), 0x4041_0000: SgDmaRegs(1, fab, mem)}
    dma_bases = list(regs)
    pynq = types.ModuleType("pynq")
    pynq.Clocks = types.SimpleNamespace(fclk0_mhz=mhz)
    device = types.SimpleNamespace(handle=XRT_HANDLE)
    bos = {}

    def allocate(shape, dtype, cacheable=True):
        if allocations is not None:
            allocations.append((shape, cacheable))
        a = mem.allocate(shape, dtype, cacheable, cpu_cache=cacheable).view(XrtBuffer)
        a.device, a.bo, a.offset = device, 7 + len(bos), 0
        bos[a.bo] = a.physical_address
        return a

    pynq.allocate = allocate
    pynq.syncs = []

    def xcl_sync_bo(handle, bo, direction, size, offset):
        pynq.syncs.append((bo, direction, size, offset))
        if handle != XRT_HANDLE or bo not in bos or direction != 1:
            return -22                                   # -EINVAL
        mem.invalidate(bos[bo] + offset, size)
        return 0

    if xrt:
        pynq.xcl_sync_bo = XCL_SYNC(xcl_sync_bo)
        pynq.xrt = types.SimpleNamespace(libc=types.SimpleNamespace(
            xclSyncBO=pynq.xcl_sync_bo))

    slcr = Slcr(slcr_locked, fab.reset)
    regs[SLCR_BASE] = slcr

    class MMIO:
        def __init__(self, base, length=4):
            self.regs = regs.get(base)

        def read(self, offset, length=4):
            return self.regs.read(offset)

        def write(self, offset, value):
            if self.regs is not None:
                self.regs.write(offset, value)

    par = {k.upper(): str(v) for k, (v, _) in DMA_PARAMETERS.items()}
    par["C_INCLUDE_SG"] = str(sg)

    class Overlay:
        def __init__(self, bitfile, download=True):
            self.ip_dict = {f"dma_{p}": {"phys_addr": a, "addr_range": 0x10000,
                                         "parameters": par}
                            for p, a in enumerate(dma_bases)}

    pynq.MMIO, pynq.Overlay = MMIO, Overlay
    pynq.regs = [regs[a] for a in dma_bases]
    pynq.slcr = slcr
    return pynq


def use_pynq(monkeypatch, pynq):
    """``import pynq`` gives the stand-in, and ``pynq._3rdparty.xrt`` its XRT (or nothing)."""
    monkeypatch.setitem(sys.modules, "pynq", pynq)
    monkeypatch.setitem(sys.modules, "pynq._3rdparty.xrt", getattr(pynq, "xrt", None))
    return pynq


class Slcr:
    """The SLCR's lock and FPGA_RST_CTRL (UG585 4.3, B.28): SLCR_UNLOCK with 0xDF0D unlocks,
    SLCR_LOCK with 0x767B locks, SLCR_LOCKSTA bit 0 reads it; a write to FPGA_RST_CTRL while
    locked is ignored (as the real register's); a pulse of FPGA0_OUT_RST resets the PL
    (``pl_reset``: the fabric's)."""

    def __init__(self, locked, pl_reset):
        self.locked, self.rst, self.pulses, self.ignored = locked, 0, 0, 0
        self.pl_reset = pl_reset

    def read(self, offset):
        if offset == SLCR_LOCKSTA:
            return int(self.locked)
        if offset == FPGA_RST_CTRL:
            return self.rst
        raise AssertionError(f"SLCR read 0x{offset:03X}")

    def write(self, offset, value):
        if offset == SLCR_UNLOCK and value == 0xDF0D:
            self.locked = False
        elif offset == SLCR_LOCK and value == 0x767B:
            self.locked = True
        elif offset == FPGA_RST_CTRL:
            if self.locked:
                self.ignored += 1
                return
            if self.rst & 1 and not value & 1:
                self.pulses += 1
                self.pl_reset()
            self.rst = value
        else:
            raise AssertionError(f"SLCR write 0x{offset:03X} = 0x{value:X}")


@pytest.mark.parametrize("loop", ["python", "c"])
def test_board_backend_on_a_stand_in_pynq(models, golden_run, monkeypatch, loop):
    """BoardBackend (pynq.Overlay, pynq.MMIO on dma_0/dma_1, pynq.allocate, the clock check)
    over the register model, the CPU's cache modelled over every cacheable buffer: golden's
    tokens and words on both loops; frames and KV not cached, weights and results cached; the
    C loop invalidates through XRT's xclSyncBO itself (its address, the device handle, the
    results region's buffer object and offset), exactly the lines each result read takes."""
    m = models["int8"]
    allocs = []
    pynq = use_pynq(monkeypatch, fake_pynq(m, allocations=allocs))
    be = make_backend("board", m, bitfile="x.bit")
    assert be.cache_sync == (ctypes.cast(pynq.xcl_sync_bo, ctypes.c_void_p).value, XRT_HANDLE,
                             be.results.bo, 0)
    tr = []
    dec = Decoder(m, be, trace=tr, loop=loop)
    assert list(dec.generate(PROMPT, 4)) == golden_run[0]
    assert _same(tr, golden_run[1])
    assert [c for _, c in allocs] == [True, False, False, True]    # weights, kv, frames, results
    if loop == "c":
        assert pynq.syncs and all(bo == be.results.bo and d == 1 and n % 32 == 0 and o % 32 == 0
                                  for bo, d, n, o in pynq.syncs)
        assert len(pynq.syncs) == be.cache_total["invalidates"]
        assert sum(n for _, _, n, _ in pynq.syncs) == be.cache_total["invalidated"]
    else:
        assert not pynq.syncs and be.cache_total["invalidates"] > 0    # PynqBuffer.invalidate


def test_a_failing_invalidate_stops_the_c_step_in_one_line(models, monkeypatch):
    """xclSyncBO answering an error (here a wrong buffer object): the C step ends before it
    reads the slot and says which bytes and what the sync returned."""
    m = models["int8"]
    pynq = use_pynq(monkeypatch, fake_pynq(m))
    be = make_backend("board", m, bitfile="x.bit")
    fn, handle, bo, off = be.cache_sync
    be.cache_sync = (fn, handle, bo + 100, off)
    with pytest.raises(BackendError, match=r"invalidating the results region's bytes \d+\.\.\d+ "
                                           r"\(frame 0, port 0\) failed: the sync returned -22"):
        Decoder(m, be, loop="c").step(1)
    assert pynq.syncs[-1][0] == bo + 100


def test_board_backend_refuses_a_pynq_that_cannot_invalidate(models, monkeypatch):
    """No XRT in the pynq (or its libxrt_core not loaded): refused in one line before any
    allocation, naming why the results region needs it."""
    m = models["int8"]
    for xrt in (None, types.SimpleNamespace(libc=None)):
        allocs = []
        pynq = fake_pynq(m, allocations=allocs, xrt=False)
        if xrt is not None:
            pynq.xrt = xrt
        use_pynq(monkeypatch, pynq)
        with pytest.raises(BackendError, match="invalidate") as e:
            make_backend("board", m, bitfile="x.bit")
        assert "\n" not in str(e.value) and allocs == []


def test_board_backend_refusals(models, monkeypatch):
    m = models["int8"]
    from generators.host import BoardError
    use_pynq(monkeypatch, fake_pynq(m, mhz=100.0))
    with pytest.raises(BoardError, match="100.000 MHz"):
        make_backend("board", m, bitfile="x.bit")
    use_pynq(monkeypatch, fake_pynq(m, sg=0))
    with pytest.raises(BackendError, match="without scatter-gather"):
        make_backend("board", m, bitfile="x.bit")
    allocs = []
    use_pynq(monkeypatch, fake_pynq(m, allocations=allocs))
    with pytest.raises(BackendError, match=r"exceeds the 0.5 MiB CMA budget"):
        make_backend("board", m, bitfile="x.bit", cma_mb=0.5)
    assert allocs == []                                  # refused before any allocation


#: docs/vivado.md's table of what the board backend must check in the .hwh (parameter: value),
#: written out here from the doc, not from DMA_PARAMETERS
DOC_PARAMETERS = {"c_include_sg": "1", "c_sg_length_width": "26",
                  "c_sg_include_stscntrl_strm": "0", "c_micro_dma": "0",
                  "c_m_axi_mm2s_data_width": "64", "c_m_axi_s2mm_data_width": "32",
                  "c_m_axis_mm2s_tdata_width": "64", "c_s_axis_s2mm_tdata_width": "32"}


def test_check_overlay_checks_every_parameter_docs_vivado_names(models):
    doc = (REPO / "docs" / "vivado.md").read_text()
    table = doc[doc.index("### What the board backend needs to know"):]
    for k, v in DOC_PARAMETERS.items():
        assert f"`{k}`" in table, k
    plan = make_backend("golden", models["int8"]).plan
    good = dict(DOC_PARAMETERS, c_addr_width="32")
    check_overlay({"dma_0": {"parameters": good}, "dma_1": {"parameters": good}}, plan)
    upper = {k.upper(): v for k, v in good.items()}           # the HDL generics' spelling
    check_overlay({"dma_0": {"parameters": upper}, "dma_1": {"parameters": upper}}, plan)
    for k, v in good.items():
        wrong = str(1 - int(v)) if v in "01" else str(2 * int(v))
        for p in (0, 1):
            ipd = {"dma_0": {"parameters": good}, "dma_1": {"parameters": good}}
            ipd[f"dma_{p}"] = {"parameters": dict(good, **{k: wrong})}
            with pytest.raises(BackendError, match=f"dma_{p}") as e:
                check_overlay(ipd, plan)
            assert "\n" not in str(e.value)
            ipd[f"dma_{p}"] = {"parameters": {q: w for q, w in good.items() if q != k}}
            with pytest.raises(BackendError, match=f"dma_{p}'s .hwh does not give {k}"):
                check_overlay(ipd, plan)
    for bad, words in [({"c_sg_length_width": "14"}, "c_sg_length_width 14"),
                       ({"c_m_axis_mm2s_tdata_width": "128"}, "128 bits"),
                       ({"c_sg_include_stscntrl_strm": "1"}, "c_sg_include_stscntrl_strm 1"),
                       ({"c_micro_dma": "1"}, "c_micro_dma 1"),
                       ({"c_s_axis_s2mm_tdata_width": "64"}, "c_s_axis_s2mm_tdata_width 64"),
                       ({"c_addr_width": "64"}, "c_addr_width 64")]:
        with pytest.raises(BackendError, match=words):
            check_overlay({"dma_0": {"parameters": dict(good, **bad)},
                           "dma_1": {"parameters": good}}, plan)
    with pytest.raises(BackendError, match="no dma_1"):
        check_overlay({"dma_0": {"parameters": good}}, plan)


@pytest.mark.parametrize("locked", [False, True])
def test_pl_reset_leaves_the_slcr_lock_as_found(models, monkeypatch, locked):
    """A DMA fault on the board resets the PL through FPGA_RST_CTRL. Linux leaves the SLCR
    unlocked and PYNQ's Clocks writes the FCLK dividers without unlocking it: the reset must
    leave the lock as it found it (locked stays locked, unlocked stays unlocked)."""
    m = models["int8"]
    pynq = use_pynq(monkeypatch, fake_pynq(m, slcr_locked=locked))
    be = make_backend("board", m, bitfile="x.bit")
    pynq.regs[0].inject("error", "mm2s", after=1)
    list(Decoder(m, be, loop="python").generate(PROMPT, 1))
    assert len(be.faults) == 1, "no fault: the reset path did not run"
    assert pynq.slcr.pulses >= 1 and pynq.slcr.ignored == 0
    assert pynq.slcr.locked == locked


def test_free_cma_refused_in_one_line_before_allocating(models, monkeypatch, tmp_path):
    m = models["int8"]
    allocs = []
    use_pynq(monkeypatch, fake_pynq(m, allocations=allocs))
    plan = memory_plan(m)
    need_kb = -(-plan.dma_bytes // 1024)
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(f"MemTotal:         510000 kB\nCmaTotal:         131072 kB\n"
                       f"CmaFree:          {need_kb - 4} kB\n")
    with pytest.raises(BackendError, match=r"exceeds the board's free CMA .* CmaTotal 128.0 "
                                           r"MiB") as e:
        make_backend("board", m, bitfile="x.bit", meminfo=str(meminfo))
    assert "\n" not in str(e.value) and allocs == []
    meminfo.write_text(f"CmaTotal:         131072 kB\nCmaFree:          {need_kb + 4} kB\n")
    make_backend("board", m, bitfile="x.bit", meminfo=str(meminfo))
    assert len(allocs) == 4                   # weights, kv, frames, results
    assert cma_mib(str(tmp_path / "absent")) is None


def test_python_loop_fences_its_stores_before_taildesc(models, monkeypatch):
    """The register model records the CPU's stores into DMA memory and the TAILDESC writes in
    order (Memory.track_order): every TAILDESC of the Python loop comes after a barrier with
    no store since; without DmaRuntime.barrier the same run has TAILDESC writes with stores
    not yet fenced (the check can fail)."""
    m = models["int8"]
    for fence in (True, False):
        be = make_backend("golden", m)
        if not fence:
            be.barrier = lambda: None
        be.memory.track_order()
        toks = list(Decoder(m, be, loop="python").generate(PROMPT, 2))
        assert len(toks) == 2
        tails = [e for e in be.memory.order if e[0] == "TAILDESC"]
        assert len(tails) >= be.transfers_run
        unfenced = [e for e in tails if e[3]]
        if fence:
            assert tails and not unfenced, unfenced[:3]
            assert be.memory.order.count(("barrier",)) == be.transfers_run
        else:
            assert len(unfenced) >= be.transfers_run // 2, len(unfenced)


# ------------------------------------------------------------------ links and host memory

def test_simulator_link_times_out():
    from multiprocessing import Pipe
    from generators.runtime.engines.link import RemoteMmio, SimLink
    from generators.runtime.errors import SimLinkError
    a, b = Pipe()
    mmio = RemoteMmio(SimLink(a, 0.2, "the silent simulator"), 0)
    with pytest.raises(SimLinkError, match="the silent simulator did not answer 'r' within "
                                           "0.2 s"):
        mmio.read(R.DMASR)
    b.close()
    with pytest.raises(SimLinkError, match="broke"):
        mmio.read(R.DMASR)


def test_host_memory_within_the_plan(models, golden_run):
    """The board's host code with the register model and the PL in another process: what the
    host allocates (tracemalloc, peak over setup and 7 tokens) stays within the plan's
    runtime items."""
    from generators.runtime.engines.golden_server import GoldenServerBackend
    m = models["int8"]
    tracemalloc.start()
    try:
        be = GoldenServerBackend(m)
        try:
            toks = list(Decoder(m, be).generate(PROMPT, 4))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            be.close()
    finally:
        tracemalloc.stop()
    assert toks == golden_run[0]
    print(f"host peak {peak:,} bytes, plan {be.plan.runtime_host_bytes:,}")
    assert peak <= be.plan.runtime_host_bytes


def test_chat_progress_bar_wraps_the_runtime(models, golden_run):
    """chat's ProgressBackend (a wrapper of run()) counts each transfer's beats; the tokens
    are golden's."""
    import io
    from generators.runtime.cli.chat import ProgressBackend
    m = models["int8"]
    out = io.StringIO()
    pb = ProgressBackend(make_backend("golden", m), m, out=out)
    assert list(Decoder(m, pb).generate(PROMPT, 4)) == golden_run[0]
    assert pb.done > 0 and "M beats (matrices)" in out.getvalue()
