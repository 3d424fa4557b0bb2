"""`make fusesoc-lint`: render the PYNQ-Z1 ternary engine and lint it through its FuseSoC core."""
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import generators  # noqa: E402
from generators.cosim.tools import use_verilator  # noqa: E402


def main() -> int:
    out = REPO / "build" / "fusesoc" / "ternary-engine"
    man = generators.render("ternary-engine", {}, out)
    print(f"[fusesoc] rendered {man['design']} ({man['top']}, latency {man['latency']}) into {out}")
    listed = [Path(line.strip()[2:]).name for line in (REPO / "ternary_pynq.core").read_text().splitlines()
              if line.strip().startswith("- ") and line.strip().endswith(".v")]
    if listed != man["sources"]:
        print(f"[fusesoc] ternary_pynq.core lists {listed}, the generator writes {man['sources']} "
              "(in compile order): update the core's file list", file=sys.stderr)
        return 1
    use_verilator()
    # FuseSoC looks for .core files under the cores root (the checkout), symlinks followed:
    # build/ holds no core of ours but may hold a Debian root (make armhf-rehearsal's
    # build/armhf/root, whose dev/fd links fail the scan); FUSESOC_IGNORE keeps it out
    (REPO / "build" / "FUSESOC_IGNORE").touch()
    fusesoc = shutil.which("fusesoc") or str(Path(sys.executable).parent / "fusesoc")
    cmd = [fusesoc, "--cores-root", str(REPO), "run", "--target", "lint",
           "--build-root", str(REPO / "build" / "fusesoc" / "run"),
           "ternary-pynq:engines:ternary_engine"]
    print("[fusesoc]", " ".join(cmd), flush=True)
    return subprocess.run(cmd, cwd=REPO).returncode


if __name__ == "__main__":
    sys.exit(main())
