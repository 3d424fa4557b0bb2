"""The optional dependencies, the one place they are imported: each is imported when first used,
so the library imports without any of them (``module(name)`` raises ImportError; the caller
says which extra installs it).

* ``pynq`` (the board's image, ``[board]``): ``selftest`` here; the board backend through
  generators.host.import_pynq (outside the runtime: pynq with the image's version checks);
* ``gguf`` (``[runtime]``): GGUF files (model/gguf.py);
* ``tokenizers`` (``[runtime]``, ``[board]``): text (model/tokenizer.py);
* ``safetensors`` (``[runtime]``): Hugging Face folders (model/checkpoint.py, model/synthetic.py).

cocotb is imported only by the simulator's process: engines/rtl_sim.py (the rtl backend's cocotb
module, loaded by cocotb by name; no module of the library imports it) and generators/cosim.
"""
from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["OPTIONAL", "module"]

#: the packages (top-level names) the library may go without
OPTIONAL = ("pynq", "gguf", "tokenizers", "safetensors")


def module(name: str) -> ModuleType:
    """``import name`` (a package of OPTIONAL or one of its submodules), done once."""
    if name.split(".")[0] not in OPTIONAL:
        raise ValueError(f"{name} is not an optional dependency ({', '.join(OPTIONAL)})")
    return importlib.import_module(name)
