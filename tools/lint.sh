#!/usr/bin/env bash
# Lint a generated design folder (with manifest.json) under Verilator -Wall and Icarus.
set -euo pipefail
dir="$1"
srcs=$(python -c "import json,sys;print(' '.join(json.load(open(sys.argv[1]+'/manifest.json'))['sources']))" "$dir")
top=$(python -c "import json,sys;print(json.load(open(sys.argv[1]+'/manifest.json'))['top'])" "$dir")
cd "$dir"
verilator --lint-only -Wall --top-module "$top" $srcs
iverilog -g2005 -Wall -o /dev/null -s "$top" $srcs
