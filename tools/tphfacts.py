"""Write generators/runtime/host/csrc/tphfacts.h, the C loop's facts from the Python side
(generators.runtime.engines.cloop.c_facts: TPH's numbers, the kinds, the channels); tests check
the committed file against it.

    python tools/tphfacts.py
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from generators.runtime.engines.cloop import FACTS, c_facts  # noqa: E402


def main(argv=None) -> int:
    FACTS.write_text(c_facts())
    print(f"wrote {FACTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
