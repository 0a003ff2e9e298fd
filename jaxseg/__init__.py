"""jaxseg: action-segmentation and video-understanding metrics and losses in JAX."""

from jaxseg import io, losses, metrics, segments, stats, streaming
from jaxseg.evaluator import Evaluator

__version__ = "0.1.0"

__all__ = [
    "Evaluator",
    "__version__",
    "io",
    "losses",
    "metrics",
    "segments",
    "stats",
    "streaming",
]
