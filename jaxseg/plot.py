"""Public namespace: pictures (needs the optional matplotlib, ``pip install 'jaxseg[plot]'``)."""

from jaxseg._host.plotting import class_colors, class_scores, confusion, overview, timeline

__all__ = ["class_colors", "class_scores", "confusion", "overview", "timeline"]
