"""The measuring code of the targets (decode, prefill, host-bench, the Cortex-A9 model): run by tools/ and tests, imported by no library module."""
