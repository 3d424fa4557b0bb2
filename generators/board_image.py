"""The PYNQ-Z1's software: the PYNQ SD-card images the board runs and the versions each holds,
in one table (``IMAGES``) that pyproject.toml's floors are tested against
(tests/generators/test_board_image.py), the board backend checks at run time (``check_image``) and
``ternary-pynq selftest`` reports.

Sources (the PYNQ repository's image recipes, github.com/Xilinx/PYNQ, read at the tags named):

* ``sdbuild/Makefile`` (``UBUNTU_RELEASE``), ``sdbuild/ubuntu/<release>/arm/multistrap.config``
  (the Ubuntu packages of the 32-bit ARM root: python3, python3-scipy, python3-opencv and
  python3-matplotlib, which bring Ubuntu's python3-numpy), ``sdbuild/packages/
  python_packages_<release>/qemu.sh`` (the pynq venv ``/usr/local/share/pynq-venv``, made
  with ``--system-site-packages``: the image's numpy is Ubuntu's; pip and setuptools pinned
  there), ``.../requirements.txt`` (its pip packages: no numpy, no tokenizers), ``setup.py``
  and ``pynq/__init__.py`` (the pynq package and its version), ``docs/source/changelog.rst``
  (the image releases per board).
* The Ubuntu archive for the versions of Ubuntu's own packages (packages.ubuntu.com): jammy
  python3.10 3.10.x, python3-numpy 1:1.21.5, python3-jinja2 3.0.3, python-setuptools 59.6.0,
  python-pip 22.0.2.

PYNQ 2.7 (Ubuntu 20.04, Python 3.8, numpy 1.20.3) is not supported: the package needs
Python 3.10 (pip refuses it on a 2.7 image; the board backend refuses a pynq 2.x in one line).
PYNQ 4.0 has no PYNQ-Z1 image.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

__all__ = ["BoardImage", "IMAGES", "BOARD_IMAGE", "FROM_PYPI", "ImageError", "check_image",
           "version_tuple"]


class ImageError(RuntimeError):
    """This Python, numpy or pynq is not the board image's (one line; the board backend raises
    it as generators.host.BoardError)."""


@dataclass(frozen=True)
class BoardImage:
    """One PYNQ image release for the PYNQ-Z1 (32-bit ARM, Cortex-A9)."""
    pynq: str                 # the image release and its pynq package
    ubuntu: str
    python: str               # major.minor of the image's python3 (the pynq venv's)
    numpy: str                # Ubuntu's python3-numpy, seen through --system-site-packages
    setuptools: str           # the pynq venv's
    pip: str                  # the pynq venv's
    jinja2: Optional[str]     # Ubuntu's python3-jinja2 (Flask and nbconvert of the venv need it)
    vivado: str               # the tool the image's overlays are built with
    supported: bool
    sources: Tuple[str, ...] = field(default=())
    note: str = ""


IMAGES: Dict[str, BoardImage] = {
    "2.7.0": BoardImage(
        pynq="2.7.0", ubuntu="20.04 (focal)", python="3.8", numpy="1.20.3", setuptools="44.0.0",
        pip="21.2.4", jinja2="3.0.1", vivado="2020.2", supported=False,
        sources=("Xilinx/PYNQ@v2.7.0:sdbuild/packages/python_packages_focal/qemu.sh "
                 "(numpy==1.20.3, setuptools==44.0.0, Jinja2==3.0.1, pip install pip==21.2.4)",
                 "Xilinx/PYNQ@v2.7.0:sdbuild/ubuntu/focal/arm/multistrap.config",
                 "Xilinx/PYNQ@v2.7.0:pynq/__init__.py (__version__ = '2.7.0')"),
        note="Python 3.8: not supported (the package needs 3.10)"),
    "3.0.1": BoardImage(
        pynq="3.0.1", ubuntu="22.04 (jammy)", python="3.10", numpy="1.21.5",
        setuptools="59.6.0", pip="22.0.2", jinja2="3.0.3", vivado="2022.1", supported=True,
        sources=("Xilinx/PYNQ@v3.0.1:sdbuild/Makefile (UBUNTU_RELEASE := jammy)",
                 "Xilinx/PYNQ@v3.0.1:sdbuild/ubuntu/jammy/arm/multistrap.config (python3, "
                 "python3-scipy, python3-opencv, python3-matplotlib: Ubuntu's python3-numpy)",
                 "Xilinx/PYNQ@v3.0.1:sdbuild/packages/python_packages_jammy/qemu.sh (python3 -m "
                 "venv --system-site-packages /usr/local/share/pynq-venv; pip install "
                 "pip==22.0.2)",
                 "Xilinx/PYNQ@v3.0.1:sdbuild/packages/python_packages_jammy/requirements.txt "
                 "(no numpy, Jinja2 or tokenizers)",
                 "Xilinx/PYNQ@v3.0.1:pynq/__init__.py (__version__ = \"3.0.1\")",
                 "Xilinx/PYNQ@v3.0.1:docs/source/changelog.rst (3.0.0: pynq_z1_v3.0.0, "
                 "Python 3.10, Vivado 2022.1)",
                 "packages.ubuntu.com/jammy: python3-numpy 1:1.21.5, python3-jinja2 3.0.3, "
                 "python3-setuptools 59.6.0, python3-pip 22.0.2")),
    "3.1": BoardImage(
        pynq="3.1", ubuntu="22.04 (jammy)", python="3.10", numpy="1.21.5",
        setuptools="59.6.0", pip="22.0.2", jinja2="3.0.3", vivado="2024.1", supported=True,
        sources=("Xilinx/PYNQ@v3.1:sdbuild/Makefile (UBUNTU_RELEASE := jammy)",
                 "Xilinx/PYNQ@v3.1:sdbuild/packages/python_packages_jammy/qemu.sh (venv "
                 "--system-site-packages --upgrade-deps; pip install --upgrade "
                 "setuptools==59.6.0, pip==22.0.2)",
                 "Xilinx/PYNQ@v3.1:setup.py (numpy<2.0)",
                 "Xilinx/PYNQ@v3.1:pynq/__init__.py (__version__ = \"3.1\")",
                 "Xilinx/PYNQ@v3.1:docs/source/changelog.rst (3.1.0: pynq_z1_v3.1.0, "
                 "Vivado 2024.1)"),
        note="the last PYNQ release with a PYNQ-Z1 image (v3.1 is the newest tag)"),
}

#: the oldest supported image: pyproject.toml's floors are its versions
BOARD_IMAGE = IMAGES["3.0.1"]

#: what the [board] extra takes from PyPI because no image has it, and why that is fine on the
#: board (a wheel for armv7l, nothing compiled)
FROM_PYPI = {
    "tokenizers": "0.20 (armv7l abi3 wheels on PyPI: tokenizers-0.23.3-cp310-abi3-"
                  "manylinux_2_17_armv7l was downloaded for this table)",
}

#: the build backend: the image's setuptools 59.6.0 predates PEP 621 ([project] in
#: pyproject.toml, setuptools 61.0), so pip builds in an isolated environment with a
#: setuptools from PyPI (pure Python; the image's own stays as it is)
SETUPTOOLS_BUILD = "61"


def version_tuple(v: str) -> Tuple[int, ...]:
    """'1.21.5' -> (1, 21, 5); stops after the first part that is not all digits ('3.1rc1' -> (3, 1))."""
    out = []
    for part in v.split("."):
        digits = ""
        for ch in part:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            break
        out.append(int(digits))
        if len(digits) < len(part):
            break
    return tuple(out)


def image_of(pynq_version: str) -> Optional[BoardImage]:
    """The image whose pynq is ``pynq_version`` (major.minor match), or None."""
    mm = version_tuple(pynq_version)[:2]
    for img in IMAGES.values():
        if version_tuple(img.pynq)[:2] == mm:
            return img
    return None


def check_image(python: Tuple[int, int], numpy_version: str,
                pynq_version: Optional[str]) -> list:
    """Each way this Python, numpy and pynq differ from a supported image, as lines (empty:
    fine). Raises ImageError (one line) for what cannot run at all: a pynq of an unsupported
    image (2.x) or of none (4.x), a Python below the image's."""
    notes = []
    if pynq_version is not None:
        img = image_of(pynq_version)
        if img is None or not img.supported:
            if version_tuple(pynq_version)[:1] >= (4,):
                raise ImageError(f"pynq {pynq_version}: PYNQ 4 has no PYNQ-Z1 image; use the "
                                 f"PYNQ 3.0.1 or 3.1 image")
            raise ImageError(f"pynq {pynq_version}: the PYNQ {pynq_version} image is not "
                             f"supported (Python {IMAGES['2.7.0'].python}); use the PYNQ "
                             f"3.0.1 or 3.1 image (Python 3.10)")
    if tuple(python[:2]) < version_tuple(BOARD_IMAGE.python):
        raise ImageError(f"Python {python[0]}.{python[1]}: ternary-pynq needs Python "
                         f"{BOARD_IMAGE.python} (the PYNQ 3.0.1 / 3.1 image's)")
    if version_tuple(numpy_version) < version_tuple(BOARD_IMAGE.numpy):
        raise ImageError(f"numpy {numpy_version}: ternary-pynq needs numpy >= "
                         f"{BOARD_IMAGE.numpy} (the image's)")
    if version_tuple(numpy_version)[:1] >= (2,):
        notes.append(f"numpy {numpy_version}: the image's scipy and OpenCV are built for "
                     f"numpy {BOARD_IMAGE.numpy}; a numpy 2 beside them breaks them")
    return notes
