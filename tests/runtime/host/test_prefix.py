"""One prefix for the C library (issue 29): every file of csrc/ is named tph<role>, every symbol the
built library exports is tph_*, and every macro and type its headers declare is TPH_* / tph_*."""
import re
import shutil
import subprocess
from pathlib import Path
from typing import Iterable, List

import pytest

from generators.runtime.host import clib

CSRC = clib.CSRC
FILE = re.compile(r"tph[a-z]+\.[ch]")
MACRO = re.compile(r"^\s*#\s*define\s+([A-Za-z_][A-Za-z0-9_]*)", re.M)
TYPE = re.compile(r"\b(?:struct|typedef\s+struct)\s+([A-Za-z_][A-Za-z0-9_]*)")
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def off_prefix(names: Iterable[str], prefix: str) -> List[str]:
    """The names that do not start with ``prefix`` (case as given)."""
    return sorted(n for n in names if not n.startswith(prefix))


def test_files_named_tph():
    files = sorted(p.name for p in CSRC.iterdir() if p.suffix in (".c", ".h"))
    assert files, CSRC
    assert [f for f in files if not FILE.fullmatch(f)] == []


def test_header_macros_and_types():
    for h in sorted(CSRC.glob("*.h")):
        text = COMMENT.sub(" ", h.read_text())
        assert off_prefix(MACRO.findall(text), "TPH") == [], h.name
        assert off_prefix(TYPE.findall(text), "tph_") == [], h.name


def test_checks_catch_another_prefix():
    """The checks above fail on the old second prefix."""
    assert off_prefix(MACRO.findall("#define TPL_OK 0\n#define TPH_OK 0\n"), "TPH") == ["TPL_OK"]
    assert off_prefix(TYPE.findall(COMMENT.sub(" ", "/* a struct and */ typedef struct tpl_io {")),
                      "tph_") == ["tpl_io"]
    assert not FILE.fullmatch("tpl_bench.c") and not FILE.fullmatch("tph_vectors.c")


@pytest.mark.skipif(shutil.which("nm") is None, reason="nm (binutils) not installed")
def test_exported_symbols():
    path = clib.library_path()
    if path is None:
        pytest.skip("the C library is not built")
    out = subprocess.run(["nm", "-D", "--defined-only", str(path)], check=True,
                         capture_output=True, text=True).stdout
    names = [ln.split()[-1] for ln in out.splitlines() if ln.split()[1:2] == ["T"]]
    assert "tph_step" in names and "tph_abi" in names and "tph_loop_abi" in names
    assert off_prefix(names, "tph_") == []
