"""The ``jaxseg`` command (``jaxseg evaluate ...``, also ``python -m jaxseg``)."""

from jaxseg._src.cli import main

__all__ = ["main"]
