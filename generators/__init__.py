"""Generators for the ternary-weight LLM engines of the PYNQ-Z1 (Zynq-7020).

    import generators
    generators.list_designs()
    man = generators.render("int8-engine", {"max_k": 512}, "build/gen/int8")
"""
__version__ = "0.1.0"

from .core import ParameterError, Param, Design, build, render, get_design  # noqa: E402
from .core import designs as list_designs  # noqa: E402

__all__ = ["ParameterError", "Param", "Design", "build", "render", "get_design", "list_designs",
           "__version__"]
