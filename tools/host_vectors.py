"""Write the host kernels' test vectors (generators.runtime.host.vectors) for tphvectors.c:

    python tools/host_vectors.py build/host/vectors.tpv"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from generators.runtime.host.vectors import write  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="tools/host_vectors.py",
                                 description="write the host kernels' test vectors "
                                             "(numpy reference)")
    ap.add_argument("out", help="the .tpv file to write")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    path, n = write(args.out, args.seed)
    print(f"[hostvectors] {path}: {n} cases, {path.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
