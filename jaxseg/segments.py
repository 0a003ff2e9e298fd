"""Segments of frame-wise label sequences: run-length tables with a fixed capacity."""

from jaxseg._src.segments import Segments, count_segments, lengths_to_mask, to_segments

__all__ = ["Segments", "count_segments", "lengths_to_mask", "to_segments"]
