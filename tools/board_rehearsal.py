"""`make board-rehearsal`: the PYNQ-Z1 image's software, rehearsed on this machine.

1. A venv of the image's Python (3.10: pyenv's, ``~/.pyenv/versions/3.10*``; ``pyenv install
   3.10`` when it is missing and pyenv is there) with the image's packages
   (generators/board_image.py: numpy 1.21.5, Jinja2 3.0.3, pip 22.0.2, setuptools 59.6.0, and
   pynq 3.0.1 from PyPI with the cffi and pycparser of the image), in build/board-image/venv,
   made once (a stamp of the list).
2. The project's wheel built by that pip as on the board (an isolated build: pip fetches
   setuptools >= 61, the image's 59.6.0 predates PEP 621) and installed with ``[board]``;
   the install log must not download numpy, and numpy must still be 1.21.5 after it.
3. tests/board_image_check.py in the venv, out of the checkout (the installed package):
   chat and decode on the board backend through the real pynq package (Overlay and .hwh
   parsing, Clocks, allocate, MMIO) over the register model: a tiny checkpoint in three
   formats and one SmolLM2-135M Q4_1 token, both loops, equal to golden; then selftest.
4. The overlay top rendered by the installed package on the image's Jinja2 3.0.3 is the
   checkout's (requirements.txt's Jinja2), file for file.

The .hwh is `make bitstream-dryrun`'s (vivado/build.tcl on the IP integrator stubs) completed
with the sections Vivado writes in every handoff and pynqmetadata reads but the stubs leave
out (external ports, the PS's M_AXI_GP0 and each DMA's S_AXI_LITE bus interfaces, the PS7's
FCLK divisors): a stand-in for a real build's handoff, which nobody has run here. The SmolLM2
image and the tiny checkpoint's images are converted by this Python (the project's .venv) into
build/board-image, as an owner converts off the board, and kept while the package's sources are
unchanged (a digest beside them).

Writes build/board-image/result.json; exit 1 when a step fails (its last lines printed).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from generators.board_image import BOARD_IMAGE  # noqa: E402
from generators.runtime import convert, load_checkpoint  # noqa: E402
from generators.runtime.model.checkpoint import PYNQ_Z1_ENGINES, EngineConfig  # noqa: E402
from generators.runtime.model.synthetic import TINY, write_checkpoint  # noqa: E402

OUT = REPO / "build" / "board-image"
VENV = OUT / "venv"
#: the image's packages (generators/board_image.py and the image's requirements.txt: cffi is
#: Ubuntu's python3-cffi 1.15.0, pycparser 2.19 and nest-asyncio 1.5.5 its pip pins), then pynq
IMAGE_PACKAGES = [f"pip=={BOARD_IMAGE.pip}", f"setuptools=={BOARD_IMAGE.setuptools}",
                  f"numpy=={BOARD_IMAGE.numpy}", f"Jinja2=={BOARD_IMAGE.jinja2}",
                  "MarkupSafe==2.0.1", "cffi==1.15.0", "pycparser==2.19", "nest-asyncio==1.5.5"]
PYNQ = f"pynq=={BOARD_IMAGE.pynq}"
PACKAGING = ("generators", "rtl", "pyproject.toml", "setup.py", "README.md")


class StepError(RuntimeError):
    pass


def run(cmd, what, **kw):
    """The command's stdout; StepError with the end of both streams when it fails. It runs in
    OUT unless told otherwise: ``python -m pip`` and ``python -c`` put the working folder on
    sys.path, and the checkout's own ``ternary_pynq.egg-info`` (make setup's editable install)
    would pass for an installed ternary-pynq there ("already installed", nothing installed).
    For the same reason the image venv's commands run without PYTHONPATH (make's ENV sets it
    to the checkout), as a board owner's shell has none."""
    if "cwd" not in kw:
        OUT.mkdir(parents=True, exist_ok=True)
        kw["cwd"] = OUT
    if "env" not in kw and str(cmd[0]).startswith(str(VENV)):
        kw["env"] = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if r.returncode:
        raise StepError(f"{what} failed (exit {r.returncode}):\n{(r.stdout + r.stderr)[-3000:]}")
    return r.stdout


def board_python() -> Path:
    want = BOARD_IMAGE.python
    cands = sorted(Path.home().glob(f".pyenv/versions/{want}*/bin/python{want}"))
    if not cands and shutil.which("pyenv"):
        print(f"board-rehearsal: no Python {want} in pyenv: pyenv install {want} (minutes)")
        run(["pyenv", "install", "--skip-existing", want], f"pyenv install {want}")
        cands = sorted(Path.home().glob(f".pyenv/versions/{want}*/bin/python{want}"))
    if not cands:
        raise StepError(f"no Python {want}: install it (pyenv install {want}, or the "
                        f"distribution's python{want} with venv)")
    return cands[-1]


def make_venv(py: Path) -> Path:
    vpy = VENV / "bin" / "python"
    stamp = VENV / ".image-packages"
    want = "\n".join([str(py)] + IMAGE_PACKAGES + [PYNQ])
    if stamp.exists() and stamp.read_text() == want and vpy.exists():
        return vpy
    run([py, "-m", "venv", "--clear", VENV], "venv")
    run([vpy, "-m", "pip", "install", "-q", *IMAGE_PACKAGES[:2]], "pip and setuptools")
    run([vpy, "-m", "pip", "install", "-q", *IMAGE_PACKAGES[2:]], "the image's packages")
    run([vpy, "-m", "pip", "install", "-q", PYNQ, *IMAGE_PACKAGES[2:]], PYNQ)
    stamp.write_text(want)
    return vpy


def build_wheel(vpy: Path) -> Path:
    src, dist = OUT / "src", OUT / "dist"
    for d in (src, dist):
        shutil.rmtree(d, ignore_errors=True)
    src.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "*.pyc")
    for name in PACKAGING:
        p = REPO / name
        (shutil.copytree(p, src / name, ignore=ignore) if p.is_dir()
         else shutil.copy2(p, src / name))
    run([vpy, "-m", "pip", "wheel", "-q", "--no-deps", "-w", dist, src], "pip wheel")
    wheels = sorted(dist.glob("ternary_pynq-*.whl"))
    if len(wheels) != 1:
        raise StepError(f"pip wheel made {wheels}")
    return wheels[0]


def install(vpy: Path, wheel: Path) -> dict:
    run([vpy, "-m", "pip", "uninstall", "-y", "-q", "ternary-pynq"], "uninstall")
    log = run([vpy, "-m", "pip", "install", f"{wheel}[board]"], "pip install [board]")
    (OUT / "install.log").write_text(log)
    fetched = [ln.strip() for ln in log.splitlines()
               if re.match(r"\s*(Collecting|Downloading|Building wheel for)\s+numpy\b", ln)]
    if fetched:
        raise StepError(f"pip install [board] downloads numpy: {fetched}")
    ver = run([vpy, "-c", "import numpy; print(numpy.__version__)"], "numpy").strip()
    if ver != BOARD_IMAGE.numpy:
        raise StepError(f"numpy is {ver} after the install, the image's is {BOARD_IMAGE.numpy}")
    freeze = run([vpy, "-m", "pip", "freeze"], "pip freeze").split()
    return {"numpy": ver, "installed": [ln for ln in log.splitlines()
                                        if ln.startswith("Successfully installed")],
            "freeze": freeze}


def vivado_hwh(text: str) -> str:
    """The dryrun's handoff with what Vivado writes and the stubs leave out (module doc)."""
    text = text.replace("  </MODULES>",
                        "  </MODULES>\n  <EXTERNALPORTS/>\n  <EXTERNALINTERFACES/>")
    bi = ('<BUSINTERFACE BUSNAME="{bus}" NAME="{name}" TYPE="{typ}" '
          'VLNV="xilinx.com:interface:aximm:1.0"><PORTMAPS/></BUSINTERFACE>')

    def module(m):
        inst = re.search(r'INSTANCE="([^"]+)"', m.group(1)).group(1)
        b = ""
        if inst == "ps7":
            b = bi.format(bus="ps7_M_AXI_GP0", name="M_AXI_GP0", typ="MASTER")
        elif re.fullmatch(r"dma_\d", inst):
            b = bi.format(bus=f"ctrl_ic_M0{inst[-1]}_AXI", name="S_AXI_LITE", typ="SLAVE")
        return f"{m.group(1)}\n      <PORTS/>\n      <BUSINTERFACES>{b}</BUSINTERFACES>"
    text = re.sub(r"(<MODULE [^>]*>)", module, text)
    ps = []
    for i in range(4):          # FCLK0 142.857 MHz = IO PLL 1000 MHz / 7 / 1 (vivado/build.tcl)
        d0, d1 = (7, 1) if i == 0 else (5, 2)
        ps += [f'<PARAMETER NAME="PCW_FCLK{i}_PERIPHERAL_DIVISOR0" VALUE="{d0}"/>',
               f'<PARAMETER NAME="PCW_FCLK{i}_PERIPHERAL_DIVISOR1" VALUE="{d1}"/>',
               f'<PARAMETER NAME="PCW_FCLK{i}_PERIPHERAL_CLKSRC" VALUE="IO PLL"/>']
        if i:
            ps.append(f'<PARAMETER NAME="PCW_FPGA_FCLK{i}_ENABLE" VALUE="0"/>')
    key = '<PARAMETER NAME="PCW_FPGA_FCLK0_ENABLE" VALUE="1"/>'
    if key not in text:
        raise StepError("the dryrun's .hwh has no PCW_FPGA_FCLK0_ENABLE 1")
    return text.replace(key, key + "\n        " + "\n        ".join(ps))


def source_key() -> str:
    """A digest of the package's Python sources: the converted images are kept only while it
    holds (an image converted by an older checkout may carry another frame format, which this
    checkout's engines refuse or, worse, the old one's accept)."""
    h = hashlib.sha256()
    for f in sorted((REPO / "generators").rglob("*.py")):
        h.update(str(f.relative_to(REPO)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def fresh(path: Path, key: str) -> bool:
    stamp = path.parent / (path.name + ".source")
    return path.exists() and stamp.exists() and stamp.read_text() == key


def stamp(path: Path, key: str) -> None:
    (path.parent / (path.name + ".source")).write_text(key)


def smollm2_image() -> Path:
    img, key = OUT / "smollm2.q4.tpimg", source_key()
    if not fresh(img, key):
        img.unlink(missing_ok=True)
        run([sys.executable, "-m", "generators", "convert", "smollm2", "--format", "q4", "-o",
             img], "convert smollm2 (the project's .venv)", cwd=str(REPO))
        stamp(img, key)
    return img


def tiny_images() -> Path:
    """The tests' tiny checkpoint converted off the board (as an owner converts) into model
    images, INT8, ternary and Q4_1, for engines of max_k 512 and max_context 16 (the board
    reads images only: safetensors and gguf are not in [board])."""
    d, key = OUT / "tiny", source_key()
    eng = EngineConfig(max_k=512, max_context=16, vectors=PYNQ_Z1_ENGINES.vectors)
    if fresh(d, key):
        return d
    shutil.rmtree(d, ignore_errors=True)
    write_checkpoint(d / "ckpt", TINY, seed=3)
    ck = load_checkpoint(d / "ckpt", eng)
    for f in ("int8", "ternary", "q4"):
        convert(ck, f, eng, notice=None).save(d / f"tiny.{f}.tpimg")
    stamp(d, key)
    return d


def same_render(vpy: Path) -> str:
    """The overlay top rendered by the installed package on the image's Jinja2 (3.0.3) is the
    checkout's on requirements.txt's, file for file (the jinja2 floor)."""
    outs = []
    for name, py in (("image", vpy), ("dev", Path(sys.executable))):
        d = OUT / "render" / name
        shutil.rmtree(d, ignore_errors=True)
        run([py, "-m", "generators", "render", "overlay", "--out", d], f"render ({name})",
            cwd=str(OUT if name == "image" else REPO))
        outs.append({str(f.relative_to(d)): f.read_bytes() for f in sorted(d.rglob("*"))
                     if f.is_file()})
    if outs[0] != outs[1]:
        diff = sorted(k for k in set(outs[0]) | set(outs[1]) if outs[0].get(k) != outs[1].get(k))
        raise StepError(f"the overlay rendered on the image's Jinja2 differs: {diff[:5]}")
    return f"{len(outs[0])} files identical"


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    t = {}
    res = {"image": BOARD_IMAGE.pynq, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    try:
        t0 = time.monotonic()
        py = board_python()
        vpy = make_venv(py)
        t["venv_s"] = time.monotonic() - t0
        t0 = time.monotonic()
        wheel = build_wheel(vpy)
        res["install"] = install(vpy, wheel)
        t["wheel_install_s"] = time.monotonic() - t0
        stub = REPO / "build" / "dryrun" / "pynq_ternary.hwh"
        if not stub.exists():
            raise StepError(f"no {stub}: make bitstream-dryrun first (the make target does)")
        hwh = OUT / "pynq_ternary.hwh"
        hwh.write_text(vivado_hwh(stub.read_text()))
        t0 = time.monotonic()
        img = smollm2_image()
        tiny = tiny_images()
        t["images_s"] = time.monotonic() - t0
        t0 = time.monotonic()
        out = run([vpy, REPO / "tests" / "board_image_check.py", hwh, img, tiny],
                  "the board check",
                  cwd=str(OUT), env={"PATH": f"{VENV / 'bin'}:/usr/bin:/bin",
                                     "HOME": str(Path.home())})
        t["check_s"] = time.monotonic() - t0
        res["check"] = json.loads(out.strip().splitlines()[-1])
        res["render"] = same_render(vpy)
    except StepError as exc:
        res["error"] = str(exc)
    res["seconds"] = {k: round(v, 1) for k, v in t.items()}
    (OUT / "result.json").write_text(json.dumps(res, indent=1) + "\n")
    if "error" in res:
        print(f"board-rehearsal: FAIL: {res['error']}", file=sys.stderr)
        return 1
    c = res["check"]
    print(f"board-rehearsal: PASS on Python {c['python']}, numpy {c['numpy']}, pynq {c['pynq']} "
          f"(the PYNQ {BOARD_IMAGE.pynq} image's): the wheel installed with [board] without "
          f"a numpy download; the tiny checkpoint (INT8, ternary, Q4_1) and one SmolLM2 Q4_1 "
          f"token {c['smollm2']['c']['board']} on the board backend through pynq's Overlay, "
          f"Clocks, MMIO and allocate equal golden on both loops; chat and selftest pass; "
          f"the overlay rendered on Jinja2 {BOARD_IMAGE.jinja2}: {res['render']} "
          f"({', '.join(f'{k} {v} s' for k, v in res['seconds'].items())}; "
          f"build/board-image/result.json)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
