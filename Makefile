# ternary-pynq: generators, simulations and builds of the PYNQ-Z1 ternary LLM engines.
# `make help` lists the targets. Every target sets up .venv (tools/setup.sh) when needed.

SHELL := /bin/bash
PY    := .venv/bin/python
ENV   := tools/env.sh
JOBS_TEST ?= 2
SIM ?= verilator

.DEFAULT_GOAL := help
.PHONY: help setup sim sim-icarus test test-quick lint sim-full report fusesoc-lint clean

help:
	@echo "make sim          generate the PYNQ-Z1 configuration, simulate every engine against numpy (summary table)"
	@echo "make test         lint + the whole pytest suite on Verilator and Icarus (under 15 min on 2 cores)"
	@echo "make test-quick   the tests without the engine simulations"
	@echo "make lint         verilator --lint-only -Wall and iverilog on generated designs; tclint on Tcl/XDC"
	@echo "make sim-full     the write-up's scale: 131,070 INT8 rows (K=512) + 524,278 ternary rows (K=640)"
	@echo "make report       silicon (yosys), speed (simulation) and decoder-model report in build/report/"
	@echo "make bitstream    Vivado build of the PYNQ-Z1 overlay (ENGINES=..., VIVADO=...); see docs/vivado.md"
	@echo "make bitstream-dryrun   the Vivado flow under tclsh with recording stubs"
	@echo "make fusesoc-lint Verilator lint of the PYNQ-Z1 ternary engine through its FuseSoC core"
	@echo "make setup        create .venv (pinned packages) and install Icarus/tclsh if missing"
	@echo "make clean        remove build/"
	@echo "Variables: SIM=verilator|icarus (make sim), WAVES=1 (FST/VCD per test), JOBS_TEST=2"

setup: .venv/.requirements.sha1
.venv/.requirements.sha1: requirements.txt tools/setup.sh
	@tools/setup.sh

sim: setup
	@$(ENV) python sim/summary.py --sim $(SIM)

sim-icarus: SIM = icarus
sim-icarus: sim

lint: setup
	@$(ENV) python -m pytest -q -n $(JOBS_TEST) tests/test_lint.py
	@$(MAKE) --no-print-directory lint-tcl

test: setup
	@$(MAKE) --no-print-directory lint
	@$(ENV) python -m pytest -n $(JOBS_TEST) -p no:cacheprovider tests

test-quick: setup
	@$(ENV) python -m pytest -q -n $(JOBS_TEST) tests --ignore=tests/test_sim_engines.py --ignore=tests/test_sim_attention.py --ignore=tests/test_sim_ternary_tree.py --ignore=tests/test_sim_q4.py

sim-full: setup
	@$(ENV) python sim/full_scale.py

report: setup
	@$(ENV) python -m generators.report

fusesoc-lint: setup
	@$(ENV) python tools/fusesoc_lint.py

clean:
	rm -rf build

include vivado/bitstream.mk
