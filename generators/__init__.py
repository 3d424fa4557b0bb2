"""Generators for the ternary-weight LLM engines of the PYNQ-Z1 (Zynq-7020).

    import generators
    generators.list_designs()
    man = generators.render("int8-engine", {"max_k": 512}, "build/gen/int8")
"""
from .version import __version__
from .core import ParameterError, Param, Design, build, render, get_design
from .core import designs as list_designs
from . import designs  # noqa: F401  (importing it registers every design with core)

__all__ = ["ParameterError", "Param", "Design", "build", "render", "get_design", "list_designs",
           "__version__"]
