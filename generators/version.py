"""The package's version, the one place it is defined (pyproject.toml reads it; the stamps of
generated files and ``generators.__version__`` import it from here)."""
__version__ = "0.1.0"
