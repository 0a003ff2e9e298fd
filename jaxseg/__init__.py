"""jaxseg: action-segmentation and video-understanding metrics and losses in JAX.

The namespaces are imported on first use, so that ``jaxseg evaluate`` can read its files while
JAX is being imported.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__version__ = "0.1.0"

_NAMESPACES = ("io", "losses", "metrics", "segments", "stats", "streaming")

__all__ = ["Evaluator", "__version__", *_NAMESPACES]

if TYPE_CHECKING:
    from jaxseg import io, losses, metrics, segments, stats, streaming  # noqa: F401
    from jaxseg.evaluator import Evaluator


def __getattr__(name: str):
    if name in _NAMESPACES:
        return importlib.import_module(f"jaxseg.{name}")
    if name == "Evaluator":
        return importlib.import_module("jaxseg.evaluator").Evaluator
    raise AttributeError(f"module 'jaxseg' has no attribute {name!r}")


def __dir__():
    return sorted(__all__)
