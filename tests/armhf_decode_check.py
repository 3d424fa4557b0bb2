"""Run by tools/armhf_rehearsal.py (`make armhf-rehearsal`) in the Debian armhf root under
qemu-arm, and on this machine for comparison: one decode token of the tiny checkpoint's images
(argv[1]: a folder of tiny.<fmt>.tpimg) on the register model (golden backend), the C loop
and the Python loop, with the tokens and a checksum of every engine word. Prints one JSON line.
"""
import json
import platform
import struct
import sys

import numpy as np

from generators.runtime import Decoder, Model, make_backend
from generators.runtime.host import clib as hostlib


def main():
    ops, why = hostlib.load()
    res = {"machine": platform.machine(), "pointer_bits": 8 * struct.calcsize("P"),
           "python": sys.version.split()[0], "numpy": np.__version__,
           "c_library": why or ops.path.name, "runs": {}}
    for fmt in ("int8", "ternary", "q4"):
        m = Model.load(f"{sys.argv[1]}/tiny.{fmt}.tpimg")
        for loop in ("c", "python"):
            tr = []
            toks = list(Decoder(m, make_backend("golden", m), trace=tr, loop=loop).generate(
                [5, 6, 7], 1))
            words = [np.asarray(w, np.uint64) for t in tr for w in t[3] if w is not None]
            res["runs"][f"{fmt}/{loop}"] = {
                "tokens": toks, "words": int(sum(len(w) for w in words)),
                "sum": int(sum(int(w.sum()) for w in words) & 0xFFFFFFFFFFFF)}
    print(json.dumps(res))


if __name__ == "__main__":
    sys.exit(main())
