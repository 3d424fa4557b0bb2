"""`make armhf-rehearsal`: the package on 32-bit ARMv7 Linux (Debian armhf) under qemu-arm.

1. A Debian bookworm armhf root (build/armhf/root, made once): ``debootstrap --foreign`` with
   python3, python3-numpy (1.24.2), python3-jinja2, python3-setuptools, python3-pip,
   python3-dev and libc6-dev, its packages unpacked with dpkg-deb (the second stage needs a
   binfmt_misc handler for ARM binaries, which this machine's kernel does not have: no
   maintainer scripts run; the two alternatives numpy needs, libblas.so.3 and liblapack.so.3,
   are linked as their postinst would).
2. Its Python runs under ``qemu-arm -L root`` through build/armhf/py3, a host script that is
   also the guest's ``sys.executable`` (qemu's ``-0``), so pip's build subprocesses run too;
   a process the guest starts that is not in the root runs natively (the compiler:
   ``arm-linux-gnueabihf-gcc``, the distribution's own name in its sysconfig, here Debian's
   cross gcc 12.2, the root's gcc version).
3. ``pip install --no-deps --target`` of the project, as on the board (an isolated build:
   pip fetches setuptools), twice: with the distribution's default flags (sysconfig's CFLAGS)
   and with the board's (``CFLAGS=-mcpu=cortex-a9 -mfpu=neon -mfloat-abi=hard``; setup.py adds its ARM_CFLAGS, NEON, on any 32-bit ARM build). --no-deps: with
   --target pip would install a numpy of its own (a source build: PyPI has no armv7l wheel);
   the root's numpy and Jinja2 are Debian's.
4. For each: the host kernels' tests (tests/runtime/host/test_hostops.py: C = numpy bit for bit, errors,
   lanes, ties, exp, float32 numerics, the score multiplier) with pytest (installed once into
   build/armhf/tools), and tests/armhf_decode_check.py: one decode token of the tiny
   checkpoint's images in three formats on the register model, C and Python loops, whose
   tokens and engine words must equal this machine's.

Needs root, debootstrap, qemu-user (qemu-arm) and gcc-arm-linux-gnueabihf (apt-get install
debootstrap qemu-user gcc-arm-linux-gnueabihf). Writes build/armhf/result.json; exit 1 when a
step fails.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tools.board_rehearsal import StepError, run, tiny_images  # noqa: E402

OUT = REPO / "build" / "armhf"
ROOT = OUT / "root"
PY3 = OUT / "py3"
PACKAGES = ["python3", "python3-numpy", "python3-jinja2", "python3-setuptools", "python3-pip",
            "python3-venv", "python3-dev", "libc6-dev"]
APT_SOURCES = (Path("/etc/apt/sources.list.d"), Path("/etc/apt/sources.list"))


def mirror() -> str:
    """The Debian archive this machine's apt already uses (its sources' first 'deb' URI that
    serves the main archive, not -security): debootstrap fetches from the same place."""
    files = sorted(APT_SOURCES[0].glob("*.sources")) + sorted(APT_SOURCES[0].glob("*.list"))
    files.append(APT_SOURCES[1])
    for f in files:
        if not f.is_file():
            continue
        for line in f.read_text().splitlines():
            words = line.split()
            if len(words) >= 2 and words[0] == "URIs:":
                uri = words[1]
            elif len(words) >= 3 and words[0] == "deb" and not words[1].startswith("["):
                uri = words[1]
            else:
                continue
            if uri.rstrip("/").endswith("/debian"):
                return uri
    raise StepError("no Debian archive in this machine's apt sources (/etc/apt): debootstrap "
                    "needs one")
FLAGS = {"distribution": "", "board": "-mcpu=cortex-a9 -mfpu=neon -mfloat-abi=hard"}
HOSTOPS_TESTS = ("c_equals_numpy or errors_are_named or lanes_add or rounding_is or exp_is or "
                 "float32_numerics or score_multiplier")
PACKAGING = ("generators", "rtl", "pyproject.toml", "setup.py", "README.md")


def need() -> None:
    missing = [f"{t} ({p})" for t, p in (("debootstrap", "debootstrap"),
                                          ("qemu-arm", "qemu-user"),
                                          ("arm-linux-gnueabihf-gcc", "gcc-arm-linux-gnueabihf"),
                                          ("dpkg-deb", "dpkg"))
               if shutil.which(t) is None]
    if missing or os.geteuid() != 0:
        raise StepError("armhf-rehearsal needs root and " + ", ".join(missing or ["nothing"]) +
                        ": apt-get install debootstrap qemu-user gcc-arm-linux-gnueabihf")


def make_root() -> None:
    ready = ROOT / ".ternary-pynq-ready"
    want = "\n".join(PACKAGES)
    if ready.exists() and ready.read_text() == want:
        return
    shutil.rmtree(ROOT, ignore_errors=True)
    run(["debootstrap", "--foreign", "--arch=armhf", "--variant=minbase",
         f"--include={','.join(PACKAGES)}", "bookworm", ROOT, mirror()], "debootstrap")
    for deb in sorted((ROOT / "var" / "cache" / "apt" / "archives").glob("*.deb")):
        run(["dpkg-deb", "-x", deb, ROOT], f"dpkg-deb -x {deb.name}")
    lib = ROOT / "usr" / "lib" / "arm-linux-gnueabihf"
    for name, sub in (("libblas.so.3", "blas"), ("liblapack.so.3", "lapack")):
        link = lib / name
        if not link.exists():
            link.symlink_to(f"{sub}/{name}")
    ready.write_text(want)


def make_py3() -> None:
    PY3.write_text("#!/bin/sh\n# the armhf root's Python under qemu-arm, also its sys.executable\n"
                   f'PYTHONHOME="{ROOT}/usr" exec qemu-arm -0 "{PY3}" -L "{ROOT}" '
                   f'"{ROOT}/usr/bin/python3.11" "$@"\n')
    PY3.chmod(0o755)


def install(name: str, cflags: str) -> Path:
    src, site = OUT / f"src-{name}", OUT / f"site-{name}"
    for d in (src, site):
        shutil.rmtree(d, ignore_errors=True)
    src.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "*.pyc")
    for n in PACKAGING:
        p = REPO / n
        shutil.copytree(p, src / n, ignore=ignore) if p.is_dir() else shutil.copy2(p, src / n)
    env = dict(os.environ, CFLAGS=cflags) if cflags else dict(os.environ)
    env.pop("PYTHONPATH", None)
    run([PY3, "-m", "pip", "install", "-q", "--no-deps", "--target", site, src],
        f"pip install ({name} flags)", env=env, cwd=str(OUT))
    so = list((site / "generators" / "runtime" / "host").glob("_tphost*.so"))
    if len(so) != 1:
        raise StepError(f"pip install ({name} flags) built no C library: {so}")
    elf = so[0].read_bytes()[:20]
    if elf[4] != 1 or int.from_bytes(elf[18:20], "little") != 40:      # ELFCLASS32, EM_ARM
        raise StepError(f"{so[0].name} is not a 32-bit ARM library")
    return site


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    res: dict = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "builds": {}}
    t = {}
    try:
        need()
        t0 = time.monotonic()
        make_root()
        make_py3()
        t["root_s"] = time.monotonic() - t0
        tools = OUT / "tools"
        if not (tools / "pytest").exists():
            run([PY3, "-m", "pip", "install", "-q", "--target", tools, "pytest"], "pytest")
        tiny = tiny_images()
        host = json.loads(run([sys.executable, REPO / "tests" / "armhf_decode_check.py", tiny],
                              "decode on this machine", cwd=str(OUT)).splitlines()[-1])
        res["host"] = host
        failed = []
        for name, cflags in FLAGS.items():
            t0 = time.monotonic()
            site = install(name, cflags)
            env = dict(os.environ, PYTHONPATH=f"{site}:{tools}")
            r = subprocess.run([str(PY3), "-m", "pytest", "-p", "no:cacheprovider",
                                "--noconftest", "--import-mode=append", f"--rootdir={REPO}",
                                "-q", str(REPO / "tests" / "runtime" / "host" / "test_hostops.py"), "-k",
                                HOSTOPS_TESTS], capture_output=True, text=True, env=env,
                               cwd=str(OUT))
            tail = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.stderr[-300:]
            fails = [ln for ln in r.stdout.splitlines() if ln.startswith(("FAILED", "ERROR"))]
            arm = json.loads(run([PY3, REPO / "tests" / "armhf_decode_check.py", tiny],
                                 f"decode ({name} flags)", env=env, cwd=str(OUT))
                             .splitlines()[-1])
            same = arm["runs"] == host["runs"]
            res["builds"][name] = {"cflags": cflags or "sysconfig's", "hostops": tail,
                                   "hostops_failed": fails, "decode": arm,
                                   "decode_equals_host": same}
            t[f"{name}_s"] = time.monotonic() - t0
            if r.returncode or not same:
                failed.append(f"{name} flags: " + "; ".join(
                    ([f"host kernels' tests {tail} ({', '.join(f.split()[1] for f in fails)})"]
                     if r.returncode else []) +
                    ([] if same else ["decode differs from this machine's"])))
        if failed:
            raise StepError(" | ".join(failed))
    except StepError as exc:
        res["error"] = str(exc)
    res["seconds"] = {k: round(v, 1) for k, v in t.items()}
    (OUT / "result.json").write_text(json.dumps(res, indent=1) + "\n")
    times = ", ".join(f"{k} {v} s" for k, v in res["seconds"].items())
    if "error" in res:
        print(f"armhf-rehearsal: FAIL: {res['error']} ({times}; build/armhf/result.json)",
              file=sys.stderr)
        return 1
    b = res["builds"]["board"]["decode"]
    print(f"armhf-rehearsal: PASS on Debian armhf (Python {b['python']}, {b['pointer_bits']}-bit, "
          f"numpy {b['numpy']}) under qemu-arm: pip installs the project with the "
          f"distribution's and the board's flags; the host kernels' tests pass and one decode "
          f"token per format and loop equals this machine's ({times})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
