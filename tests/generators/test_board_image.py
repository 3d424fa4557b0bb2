"""pyproject.toml's floors against the one table of the board image's versions
(generators/board_image.py), so the two cannot drift; and the run-time check of the image."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from generators import board_image as B

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def _floors(reqs):
    """{name: (floor, upper or None)} of requirement strings like 'numpy>=1.21.5'."""
    out = {}
    for r in reqs:
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*>=\s*([0-9.]+)(?:\s*,\s*<\s*([0-9.]+))?", r)
        assert m, f"a requirement without a floor (or with an unexpected form): {r!r}"
        out[m.group(1).lower()] = (m.group(2), m.group(3))
    return out


def test_python_floor_is_the_images():
    assert PYPROJECT["project"]["requires-python"] == f">={B.BOARD_IMAGE.python}"


def test_dependency_floors_are_the_images():
    deps = _floors(PYPROJECT["project"]["dependencies"])
    assert set(deps) == {"numpy", "jinja2"}, deps
    assert deps["numpy"][0] == B.BOARD_IMAGE.numpy
    assert deps["jinja2"][0] == B.BOARD_IMAGE.jinja2


def test_board_extra_is_on_the_image_or_a_wheel_from_pypi():
    board = _floors(PYPROJECT["project"]["optional-dependencies"]["board"])
    assert board["pynq"] == (B.BOARD_IMAGE.pynq, "4"), board
    for name, (floor, _) in board.items():
        if name == "pynq":
            continue
        assert name in B.FROM_PYPI, f"[board] takes {name} from PyPI: say why in FROM_PYPI"
        assert B.FROM_PYPI[name].startswith(floor), (name, floor, B.FROM_PYPI[name])


def test_every_supported_image_meets_the_floors():
    """The floors are the oldest supported image's; every supported image has at least them,
    and the unsupported one (2.7) is below the Python floor (that is why it is not)."""
    py = B.version_tuple(B.BOARD_IMAGE.python)
    for img in B.IMAGES.values():
        assert img.sources and all(s.startswith(("Xilinx/PYNQ@v", "packages.ubuntu.com"))
                                   for s in img.sources), img
        ok = (B.version_tuple(img.python) >= py
              and B.version_tuple(img.numpy) >= B.version_tuple(B.BOARD_IMAGE.numpy))
        assert ok == img.supported, img


def test_build_backend_floor():
    """The image's setuptools cannot build a PEP 621 project; the floor is the first that can
    (pip's isolated build fetches it), and no higher."""
    req = PYPROJECT["build-system"]["requires"]
    assert req == [f"setuptools>={B.SETUPTOOLS_BUILD}"], req
    assert B.version_tuple(B.BOARD_IMAGE.setuptools) < B.version_tuple(B.SETUPTOOLS_BUILD)


def test_check_image_refuses_unsupported_images_in_one_line():
    for pv, match in (("2.7.0", "not supported"), ("2.6.1", "not supported"),
                      ("4.0.0", "PYNQ 4 has no PYNQ-Z1")):
        with pytest.raises(B.ImageError, match=match) as e:
            B.check_image((3, 10), "1.21.5", pv)
        assert "\n" not in str(e.value)
    with pytest.raises(B.ImageError, match="needs Python 3.10"):
        B.check_image((3, 8), "1.21.5", "3.0.1")
    with pytest.raises(B.ImageError, match="numpy >= 1.21.5"):
        B.check_image((3, 10), "1.20.3", "3.0.1")
    assert B.check_image((3, 10), "1.21.5", "3.0.1") == []
    assert B.check_image((3, 10), "1.21.5", "3.1") == []
    assert B.check_image((3, 11), "1.26.4", "3.1.2") == []
    assert "numpy 2" in B.check_image((3, 11), "2.3.5", "3.0.1")[0]
    assert B.version_tuple("3.1rc1") == (3, 1) and B.version_tuple("1.21.5") == (1, 21, 5)


def test_readme_and_docs_name_the_supported_images():
    readme = (REPO / "README.md").read_text()
    assert "PYNQ 3.0.1" in readme and "2.7" in readme and "not supported" in readme
    assert "PYNQ 2.7 or 3.0 image" not in readme
    runtime = (REPO / "docs" / "runtime.md").read_text()
    assert "generators/board_image.py" in runtime
