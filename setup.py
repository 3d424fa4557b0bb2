"""Package list for setuptools (the rest is in pyproject.toml).

Every `generators*` package with an __init__.py is found, so a new subpackage ships without
an edit here; `generators.rtl` is the repository's top-level rtl/ folder (pyproject.toml maps
it with package-dir and ships its *.v as package data).
"""
from setuptools import find_packages, setup

setup(packages=find_packages(include=["generators", "generators.*"]) + ["generators.rtl"])
