"""Pieces of ``make report``: the decoder performance model, yosys resource and
logic-depth estimates, and the write-up's figures.

* :mod:`generators.report.decoder_model`: ``ModelShape``, ``Platform``,
  ``decoder_table(shape, contexts, attention_on='cpu'|'pl', engine_cycles=None)``,
  ``part_rows``, ``figure6``, ``wall_bound``, ``format_table``.
* :mod:`generators.report.yosys`: ``synth(sources, top, workdir) -> dict``.
* :mod:`generators.report.plots`: ``plot_figure1``, ``plot_figure5``, ``plot_figure6``
  (imported on first use: it loads matplotlib).

See docs/report.md.
"""

from .decoder_model import (  # noqa: F401
    CONTEXTS,
    FIGURE6_WRITEUP,
    ModelShape,
    Platform,
    attention_costs,
    decoder_row,
    decoder_table,
    figure6,
    format_table,
    matrices,
    matrix_rows,
    part_rows,
    wall_bound,
)
from .yosys import YosysError, logic_depth, summarize_cells, synth  # noqa: F401


def __getattr__(name):
    if name == "plots":
        import importlib

        return importlib.import_module(".plots", __name__)
    raise AttributeError(name)
