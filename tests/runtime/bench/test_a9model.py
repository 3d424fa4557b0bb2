"""The Cortex-A9 cycle model (generators/runtime/bench/a9model.py, make a9-model): the board build's
flags in one place, register lists handed to llvm-mca one register at a time, qemu-arm's
blocks counted against a loop whose trip count is known, llvm-mca's cycles ordered as the A9's
pipeline orders them, and the host term of the figures read from a9-model's figures."""
from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import armv7  # noqa: E402

from generators.runtime.bench import a9model as am  # noqa: E402


def need_mca():
    if shutil.which("llvm-mca") is None:
        pytest.fail("llvm-mca is missing: install the Debian package llvm (tools/setup.sh "
                    "installs it when it can)")


def setup_arm_cflags() -> tuple:
    """setup.py's ARM_CFLAGS (what pip builds on the board), read from its text."""
    tree = ast.parse((Path(__file__).resolve().parents[3] / "setup.py").read_text())
    found = [node.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
             and any(isinstance(t, ast.Name) and t.id == "ARM_CFLAGS" for t in node.targets)]
    assert len(found) == 1, "setup.py assigns ARM_CFLAGS once"
    return tuple(ast.literal_eval(found[0]))


def test_board_flags_are_setup_pys():
    """The modelled and counted board build is the one pip builds on the board."""
    assert am.ARMV7_FLAGS_DEFAULT == setup_arm_cflags()
    assert "-mfpu=neon" in am.ARMV7_FLAGS_DEFAULT and "-marm" not in am.ARMV7_FLAGS_DEFAULT


def test_board_flags_in_one_place(monkeypatch):
    monkeypatch.delenv("TPH_ARMV7_FLAGS", raising=False)
    assert am.board_flags() == am.ARMV7_FLAGS_DEFAULT
    assert am.board_flags() == ("-mcpu=cortex-a9", "-mfpu=neon", "-mfloat-abi=hard")
    assert am.model_flags() == ("-mcpu=cortex-a9", "-mfpu=neon", "-mfloat-abi=hard", "-marm")
    assert am.mca_attrs(am.board_flags()) == "+vfp3,+neon"         # -mfpu=neon
    assert am.mca_attrs(("-mcpu=cortex-a9", "-mfloat-abi=hard")) == "+vfp3,+neon"  # auto: A9's
    assert am.mca_attrs(am.WRITEUP_FLAGS) == "+vfp3"                  # vfpv3-d16
    monkeypatch.setenv("TPH_ARMV7_FLAGS", "-mcpu=cortex-a9 -mfpu=neon -mthumb")
    assert am.board_flags() == ("-mcpu=cortex-a9", "-mfpu=neon", "-mthumb")
    assert am.model_flags() == ("-mcpu=cortex-a9", "-mfpu=neon", "-marm")
    assert am.mca_attrs(am.model_flags()) == "+vfp3,+neon"


def test_register_lists_one_register_at_a_time():
    assert am.mca_text("push\t{r4, r5, lr}") == [
        "str r4, [sp, #-4]", "str r5, [sp, #-8]", "str lr, [sp, #-12]", "sub sp, sp, #12"]
    assert am.mca_text("pop\t{r4, pc}") == [
        "ldr r4, [sp, #0]", "ldr lr, [sp, #4]", "add sp, sp, #8", "bx lr"]
    assert am.mca_text("vldmia\tr2!, {s15}") == ["vldr s15, [r2, #0]", "add r2, r2, #4"]
    assert am.mca_text("vpush\t{d8-d9}") == [
        "vstr d8, [sp, #-8]", "vstr d9, [sp, #-16]", "sub sp, sp, #16"]
    assert am.mca_text("ldm\tr0, {r1, r2}") == ["ldr r1, [r0, #0]", "ldr r2, [r0, #4]"]
    assert am.mca_text("bne\t1ec <tph_argmax+0x20>") == ["bne .Lt"]
    assert am.mca_text("bx\tlr") == ["bx\tlr"]
    assert am.mca_text("vmul.f32\ts15, s15, s14") == ["vmul.f32\ts15, s15, s14"]


def test_llvm_mca_orders_the_a9s_pipeline(tmp_path):
    """Four independent adds dual-issue; the same four in one chain do not; a VFP multiply
    chain costs its latency per step (Cortex-A9: VMUL.F32 not forwarded in one cycle)."""
    need_mca()
    mca = am.Mca(tmp_path / "cache.json", "+vfp3")
    c = mca.cycles({1: ["add r0, r0, #1", "add r1, r1, #1", "add r2, r2, #1", "add r3, r3, #1"],
                    2: ["add r0, r0, #1", "add r0, r0, #1", "add r0, r0, #1", "add r0, r0, #1"],
                    3: ["vmul.f32 s0, s0, s1", "vmul.f32 s0, s0, s1"],
                    4: am.mca_text("push\t{r4, r5, r6, r7, r8, lr}")})
    assert c[1] < c[2], c
    assert 1.5 <= c[1] <= 2.5 and 3.5 <= c[2] <= 4.5, c
    assert c[3] >= 6, c
    assert c[4] >= 6 and not mca.refused, (c, mca.refused)
    assert am.Mca(tmp_path / "cache.json", "+vfp3").cache == mca.cache    # kept on disk


def test_blocks_count_a_known_loop(tmp_path):
    """qemu-arm's blocks of a function whose loop runs a known number of times: the loop's
    block runs that many times, a run of 2 calls less a run of 1 is one call."""
    armv7.need_arm()
    src = tmp_path / "loop.c"
    src.write_text(
        "#include <stdint.h>\n#include <stdlib.h>\n#include <stdio.h>\n"
        "__attribute__((noinline)) uint32_t work(volatile uint32_t *p, uint32_t n)\n"
        "{\n    uint32_t i, s = 0;\n    for (i = 0; i < n; i++)\n        s += p[i & 7];\n"
        "    return s;\n}\n"
        "int main(int argc, char **argv)\n{\n    uint32_t b[8] = {1, 2, 3, 4, 5, 6, 7, 8};\n"
        "    uint32_t k, r = (uint32_t)atoi(argv[1]), s = 0;\n    (void)argc;\n"
        "    for (k = 0; k < r; k++)\n        s += work(b, 1000);\n"
        "    printf(\"%u\\n\", s);\n    return 0;\n}\n")
    exe = tmp_path / "loop"
    armv7.build(armv7.ARM_CC, [src], exe, [*am.model_flags(), "-static"])
    f = am.symbols(exe, ["work"])
    assert len(f) == 1
    one = am.profile(exe, [1], f, tmp_path / "1.log")
    two = am.profile(exe, [2], f, tmp_path / "2.log")
    d = am.difference(two, one)
    runs = sorted(b["execs"] for b in d.values())
    assert runs[-1] in (999, 1000), runs              # the loop body, once per element
    assert all(b["fn"] == "work" for b in d.values())
    assert 1000 * 3 <= sum(len(b["pcs"]) * b["execs"] for b in d.values()) <= 1000 * 8


def test_merged_ranges_join_neighbours_only():
    f = [(0x100, 0x140, "a"), (0x140, 0x180, "b"), (0x1b0, 0x1c0, "c"), (0x400, 0x420, "d")]
    assert am.merged_ranges(f) == [(0x100, 0x1c0), (0x400, 0x420)]
    assert am.merged_ranges(f, gap=1) == [(0x100, 0x180), (0x1b0, 0x1c0), (0x400, 0x420)]


def test_a_kernels_callees_are_counted(tmp_path):
    """A kernel that calls a static helper and libm's expf: profiled by its own name the
    callees' blocks are missed (the calibration's count before); profiled over every
    function but main (text_symbols), the difference of two runs holds them, once each per
    call, and main's set-up is not in it."""
    armv7.need_arm()
    src = tmp_path / "callee.c"
    src.write_text(
        "#include <math.h>\n#include <stdlib.h>\n#include <stdio.h>\n"
        "__attribute__((noinline)) static float helper(volatile float *p, int n)\n"
        "{\n    float s = 0;\n    int i;\n    for (i = 0; i < n; i++)\n        s += p[i & 3];\n"
        "    return s;\n}\n"
        "__attribute__((noinline)) float kern(volatile float *p)\n"
        "{\n    int i;\n    float s = helper(p, 500);\n"
        "    for (i = 0; i < 100; i++)\n        s += expf(p[i & 3] * 0.25f);\n    return s;\n}\n"
        "int main(int argc, char **argv)\n{\n    float b[4] = {0.5f, 1.0f, -1.0f, 2.0f};\n"
        "    volatile float setup = 0;\n    int k, r = atoi(argv[1]);\n    float s = 0;\n"
        "    (void)argc;\n    for (k = 0; k < 100000; k++)\n        setup += 1.0f;\n"
        "    for (k = 0; k < r; k++)\n        s += kern(b);\n"
        "    printf(\"%f\\n\", s + setup);\n    return 0;\n}\n")
    exe = tmp_path / "callee"
    armv7.build(armv7.ARM_CC, [src], exe, [*am.model_flags(), "-static", "-lm"])

    def counted(funcs):
        one = am.profile(exe, [1], funcs, tmp_path / "1.log")
        two = am.profile(exe, [2], funcs, tmp_path / "2.log")
        d = am.difference(two, one)
        by = {}
        for b in d.values():
            by[b["fn"]] = by.get(b["fn"], 0) + len(b["pcs"]) * b["execs"]
        return by

    alone = counted(am.symbols(exe, ["kern"]))
    every = counted(am.text_symbols(exe, ("main",)))
    assert set(alone) == {"kern"}
    assert "main" not in every                     # its 100,000-trip set-up loop is not counted
    assert any(fn.startswith("helper") for fn in every), every
    assert any("exp" in fn for fn in every), every
    assert every["kern"] == alone["kern"]
    helper = sum(v for fn, v in every.items() if fn.startswith("helper"))
    assert 500 * 3 <= helper <= 500 * 10               # its loop, once per element
    assert sum(every.values()) - every["kern"] >= 100 * 5    # expf's 100 calls, a few each


def test_both_cores_halves_are_told_apart(tmp_path):
    """A run with the library's worker thread (tphwork.c) under qemu-arm: a job whose halves
    loop 1,000 and 3,000 times, dispatched once per step, and the same function called directly
    (not a job): per step one job, its halves on their threads in the ratio of their loops, the
    direct call in the caller's serial part, the longer half and the handshakes in the time."""
    armv7.need_arm()
    src = tmp_path / "job.c"
    src.write_text(
        "#include <stdint.h>\n#include <stdlib.h>\n#include <stdio.h>\n"
        "#include \"tphwork.h\"\n"
        "static void rows_part(void *arg, uint32_t half)\n"
        "{\n    volatile uint32_t *p = (volatile uint32_t *)arg;\n    uint32_t i;\n"
        "    for (i = 0; i < (half ? 3000u : 1000u); i++)\n        p[half] += i;\n}\n"
        "int main(int argc, char **argv)\n{\n    static uint32_t mem[1024] __attribute__((aligned(64)));\n"
        "    static volatile uint32_t acc[2];\n    uint32_t k, r = (uint32_t)atoi(argv[1]);\n"
        "    (void)argc;\n    if (tph_worker_bytes() > sizeof mem || tph_worker_start(mem, 2u, 1000u) != 2u)\n"
        "        return 1;\n"
        "    for (k = 0; k < r; k++) {\n        tph_worker_run(mem, rows_part, (void *)acc, 0u);\n"
        "        rows_part((void *)acc, 0u);\n    }\n    tph_worker_stop(mem);\n"
        "    printf(\"%u %u\\n\", acc[0], acc[1]);\n    return 0;\n}\n")
    exe = tmp_path / "job"
    csrc = Path(__file__).resolve().parents[3] / "generators" / "runtime" / "host" / "csrc"
    armv7.build(armv7.ARM_CC, [src, csrc / "tphwork.c", csrc / "tphost.c"], exe,
                [*am.model_flags(), "-static", f"-I{csrc}"])
    f = am.symbols(exe, ["rows_part", am.DISPATCH, am.WORKER_LOOP, *am.WAITING, "main"])
    one = am.profile_threads(exe, [1], f, tmp_path / "1.log")
    two = am.profile_threads(exe, [2], f, tmp_path / "2.log")
    assert len(one["halves"]) == 1 and len(two["halves"]) == 2
    instr = {pc: float(len(b["pcs"])) for pc, b in two["blocks"].items()}
    both = am.two_cores(two, one, instr)
    h0, h1 = both["halves"]
    assert both["jobs"] == 1 and 2.9 < h1 / h0 < 3.1 and both["longer"] == h1, both
    assert 1000 * 3 <= h0 <= 1000 * 8, both
    assert both["serial"] >= h0                   # the direct call: the caller's, serial
    assert both["sync"] == am.SYNC_JOB_CYCLES + am.WAKE_CYCLES
    assert both["two_cores"] == both["serial"] + h1 + both["sync"]


def test_memory_terms_follow_their_constants():
    assert am.uncached_cycles(64e6, 0)["read"] == pytest.approx(am.A9_HZ)   # 1 s at 64 MB/s
    assert am.cache_cycles(10, 4) == 6 * am.L2_HIT_CYCLES + 4 * am.DDR_MISS_CYCLES
    inv = am.invalidated_read_cycles(32 * 100, 2)
    assert inv["invalidate"] == 100 * am.INVALIDATE_LINE_CYCLES + 2 * am.SYSCALL_CYCLES
    assert inv["fill"] == pytest.approx(100 * am.DDR_STREAM_LINE_CYCLES)
    bound = am.invalidated_read_cycles(32 * 100, 2, am.SYSCALL_BOUND_CYCLES)
    assert bound["invalidate"] == 100 * am.INVALIDATE_LINE_CYCLES + 2 * am.SYSCALL_BOUND_CYCLES
    assert am.SYSCALL_BOUND_CYCLES > am.SYSCALL_CYCLES and "SYSCALL_BOUND_CYCLES" in \
        am.ASSUMPTIONS
    assert am.ms(am.A9_HZ) == pytest.approx(1e3)


def test_streamed_lines_cost_their_throughput():
    """A loop that reads in order pays each line's throughput (7-cpu.com's 8.7 cycles a line
    from L2, 68 ns a line from DDR), less than a lone miss's latency; each line once."""
    assert am.cache_cycles(10, 4, streaming=True) == pytest.approx(
        6 * am.L2_STREAM_LINE_CYCLES + 4 * am.DDR_STREAM_LINE_CYCLES)
    assert am.L2_STREAM_LINE_CYCLES < am.L2_HIT_CYCLES < am.DDR_STREAM_LINE_CYCLES \
        < am.DDR_MISS_CYCLES
    assert am.DDR_MISS_CYCLES == pytest.approx(19 + 110e-9 * am.A9_HZ)
    assert am.DDR_STREAM_LINE_CYCLES == pytest.approx(68e-9 * am.A9_HZ)
    lo, hi = am.RANGES["DDR_STREAM_LINE_CYCLES"]
    assert lo == pytest.approx(am.DDR_STREAM_LINE_CYCLES) and hi == pytest.approx(
        32 / 349e6 * am.A9_HZ)


def test_results_read_are_paid_once():
    """The results read from the cached results region are filled from DDR (the invalidates'
    term); the cache simulation's L2 hits on them are not paid again."""
    assert am.results_lines_paid(100, 40, 32 * 25) == 25          # 25 lines read
    assert am.results_lines_paid(100, 40, 32 * 90) == 60          # at most the L2 hits
    assert am.results_lines_paid(10, 40, 32 * 5) == 0


def memory_constants():
    """The module-level names assigned in a9model.py's memory-system section, each with the
    comment lines just above its assignment."""
    lines = Path(am.__file__).read_text().splitlines()
    start = next(i for i, ln in enumerate(lines)
                 if ln.startswith("# ---") and ln.endswith("memory-system constants"))
    end = next(i for i, ln in enumerate(lines) if ln.startswith("ASSUMPTIONS = {"))
    out = {}
    for i in range(start, end):
        m = re.match(r"^([A-Z][A-Z0-9_]*)(?:, ([A-Z][A-Z0-9_]*))? = ", lines[i])
        if not m:
            continue
        j = i
        while j > start and lines[j - 1].startswith("#:"):
            j -= 1
        for name in filter(None, m.groups()):
            out[name] = " ".join(lines[j:i])
    return out


def test_every_memory_constant_is_cited_or_an_assumption():
    """Each constant of the memory system has a public source named beside it (CITED, the
    source one of SOURCES), is marked ASSUMPTION and listed in ASSUMPTIONS, or is a count or
    sum of the others (DERIVED); nothing is both cited and assumed."""
    consts = memory_constants()
    assert {"L2_HIT_CYCLES", "DDR_MISS_CYCLES", "DDR_STREAM_LINE_CYCLES", "MMIO_READ_CYCLES",
            "INVALIDATE_LINE_CYCLES", "SYSCALL_CYCLES"} <= set(consts)
    assert set(consts) == set(am.CITED) | set(am.ASSUMPTIONS) | set(am.DERIVED), consts
    assert not set(am.CITED) & set(am.ASSUMPTIONS)
    for name, source in am.CITED.items():
        assert any(source in s for s in am.SOURCES), (name, source)
        # the source is named in the comment beside the number (a repository by its name)
        key = source.split("/")[1].split()[0] if "/" in source else source
        assert key in consts[name].replace("-\n#: ", "-").replace("- #: ", "-"), (name, key)
    for name in am.ASSUMPTIONS:
        if name in consts:
            assert "ASSUMPTION" in consts[name], name
    for name, (lo, hi) in am.RANGES.items():
        assert name in am.CITED and lo <= getattr(am, name) <= hi, name


def test_the_host_term_is_a9_models_figure():
    """decoder_model.host_ms reads make a9-model's figures (docs/results/a9-model.json)."""
    from generators.report.decoder_model import HOST_FIGURES, host_ms
    from generators.results import load
    figs = {f["key"]: f["value"] for f in load()["a9-model"]["figures"]}
    for build, key in HOST_FIGURES.items():
        assert key.startswith("a9-model."), key
        k = key.format(fmt="q4", context=512)
        # on both cores as the board runs it: the _2core figure where the step has jobs
        assert host_ms("q4", 512, build=build) == figs.get(k + "_2core", figs[k])
    with pytest.raises(ValueError, match="host build"):
        host_ms("q4", 512, build="c")


def test_tool_refuses_a_bad_format():
    r = subprocess.run([sys.executable, str(am.__file__).replace(
        "generators/runtime/bench/a9model.py", "tools/a9_model.py"), "--formats", "fp8",
        "--no-record"], capture_output=True, text=True)
    assert r.returncode == 2 and "fp8" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_decode_reuse_keeps_the_recorded_engine_terms():
    """make decode REUSE=1: the rows rebuilt from docs/results/decode.json give the recorded
    matrix and attention times again by the one formula (only the host term is new), and the
    tokens per second follow from the total."""
    from generators.report.decoder_model import token_time
    from generators.results import load
    from generators.runtime.bench import decode as bench
    rows, golds, oks, origin = bench.recorded_rows()
    figs = {f["key"]: f for f in load()["decode"]["figures"]}
    assert rows and set(golds) == {r["fmt"] for r in rows} and "make decode" in origin
    for r in rows:
        rec = figs[f"decode.{r['fmt']}.ctx{r['context']}.ms"]["context"]
        t = token_time(r["fmt"], r["context"], r["matrix_cycles"], r["matrix_beats"],
                       r["attention_cycles"], r["attention_beats"])
        assert t["matrix_ms"] == pytest.approx(rec["matrix_ms"], abs=6e-4)
        assert t["attention_ms"] == pytest.approx(rec["attention_ms"], abs=6e-5)
        assert t["matrix_bound"] == rec["matrix_bound"]
        assert t["tok_s"] == pytest.approx(1e3 / t["total_ms"])
