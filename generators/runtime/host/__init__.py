"""The host's per-token small ops: the numpy reference (ops), the C library's loader (clib, csrc/), the kernels' test vectors (vectors)."""
