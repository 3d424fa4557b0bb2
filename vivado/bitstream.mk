# Vivado build of the PYNQ-Z1 overlay. Included by the top Makefile (include vivado/bitstream.mk);
# also works alone: make -f vivado/bitstream.mk bitstream
#
#   make bitstream                                   the PL top `overlay` (docs/overlay.md), 2 SG DMAs
#   make bitstream ENGINES="ternary-engine ternary-engine"   single engines, one DMA each
#   make bitstream VIVADO=/tools/Xilinx/Vivado/2020.2/bin/vivado JOBS=4
#   make bitstream-dryrun                            the same flow under tclsh with Vivado stubs
#   make lint-tcl                                    tclint and tclfmt --check on the Tcl and XDC
#
# Outputs in $(BUILD_DIR): $(OVERLAY).bit, $(OVERLAY).hwh, $(OVERLAY).xsa, *.rpt;
# the Vivado project and log in $(BUILD_DIR)/vivado. See docs/vivado.md.

VIVADO ?= vivado
ENGINES ?= overlay
JOBS ?= 2
PY ?= .venv/bin/python
BUILD_DIR ?= build
OVERLAY ?= pynq_ternary
TCLINT ?= .venv/bin/tclint
TCLFMT ?= .venv/bin/tclfmt
TCLSH ?= tclsh

# The version vivado/build.tcl was written for (PYNQ 2.7's tool version).
VIVADO_VERSION := 2020.2

BITSTREAM_MK_DIR := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
BITSTREAM_REPO_DIR := $(abspath $(BITSTREAM_MK_DIR)/..)
BITSTREAM_OUT := $(abspath $(BUILD_DIR))
# A VIVADO given as a path keeps working after the recipe's cd.
VIVADO_CMD = $(if $(findstring /,$(VIVADO)),$(abspath $(VIVADO)),$(VIVADO))
TCL_LINT_PATHS := $(addprefix $(BITSTREAM_REPO_DIR)/,vivado constraints tests/tcl_stubs)

.PHONY: bitstream vivado-check bitstream-dryrun lint-tcl

vivado-check:
	@if ! command -v "$(VIVADO_CMD)" >/dev/null 2>&1; then \
	  echo "Vivado not found on PATH (looked for '$(VIVADO)')." >&2; \
	  echo "Install Vivado $(VIVADO_VERSION) (the version vivado/build.tcl is written for, as used by PYNQ 2.7;" >&2; \
	  echo "the free edition with Zynq-7000 device support is enough), then" >&2; \
	  echo "  source <install dir>/Vivado/$(VIVADO_VERSION)/settings64.sh" >&2; \
	  echo "or set VIVADO=/path/to/vivado. Without Vivado, 'make bitstream-dryrun' runs the flow on stubs." >&2; \
	  exit 2; \
	fi

bitstream: vivado-check
	$(PY) $(BITSTREAM_MK_DIR)/engines.py --engines $(ENGINES) --out $(BITSTREAM_OUT)/vivado/engines
	cd $(BITSTREAM_OUT)/vivado && $(VIVADO_CMD) -mode batch -nojournal -notrace -log vivado.log \
	  -source $(BITSTREAM_MK_DIR)/build.tcl -tclargs --out $(BITSTREAM_OUT) \
	  --engines-tcl $(BITSTREAM_OUT)/vivado/engines.tcl --jobs $(JOBS) --name $(OVERLAY)

# The whole flow under tclsh with recording stubs of the Vivado commands (no Vivado needed):
# the calls go to $(BUILD_DIR)/dryrun/vivado_calls.jsonl, placeholder outputs to $(BUILD_DIR)/dryrun.
bitstream-dryrun:
	$(PY) $(BITSTREAM_MK_DIR)/engines.py --engines $(ENGINES) \
	  --out $(BITSTREAM_OUT)/dryrun/vivado/engines
	rm -f $(BITSTREAM_OUT)/dryrun/vivado_calls.jsonl
	STUB_LOG=$(BITSTREAM_OUT)/dryrun/vivado_calls.jsonl $(TCLSH) \
	  $(BITSTREAM_REPO_DIR)/tests/tcl_stubs/run_stubbed.tcl $(BITSTREAM_MK_DIR)/build.tcl \
	  --out $(BITSTREAM_OUT)/dryrun --engines-tcl $(BITSTREAM_OUT)/dryrun/vivado/engines.tcl \
	  --jobs $(JOBS) --name $(OVERLAY)

lint-tcl:
	$(TCLINT) -c $(BITSTREAM_REPO_DIR)/tclint.toml $(TCL_LINT_PATHS)
	$(TCLFMT) -c $(BITSTREAM_REPO_DIR)/tclint.toml --check $(TCL_LINT_PATHS)
