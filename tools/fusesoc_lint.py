"""`make fusesoc-lint`: render the PYNQ-Z1 ternary engine and lint it through its FuseSoC core."""
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import generators  # noqa: E402


def main() -> int:
    out = REPO / "build" / "fusesoc" / "ternary-engine"
    man = generators.render("ternary-engine", {}, out)
    print(f"[fusesoc] rendered {man['design']} ({man['top']}, latency {man['latency']}) into {out}")
    fusesoc = shutil.which("fusesoc") or str(Path(sys.executable).parent / "fusesoc")
    cmd = [fusesoc, "--cores-root", str(REPO), "run", "--target", "lint",
           "--build-root", str(REPO / "build" / "fusesoc" / "run"),
           "ternary-pynq:engines:ternary_engine"]
    print("[fusesoc]", " ".join(cmd), flush=True)
    return subprocess.run(cmd, cwd=REPO).returncode


if __name__ == "__main__":
    sys.exit(main())
