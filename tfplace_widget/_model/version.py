"""``tfplace_widget.__version__``, in the bottom layer so that every module may say who wrote a file
without importing the package's entry points."""

from __future__ import annotations

from importlib import metadata as _metadata

try:  # one source of truth: the installed package's metadata (pyproject.toml)
    __version__ = _metadata.version("tfplace_widget")
except _metadata.PackageNotFoundError:  # imported from a source tree that is not installed
    __version__ = "0+unknown"
