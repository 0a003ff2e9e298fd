"""Benchmark: ``segments.to_segments`` (run-length encoding) of padded batches.

Times, in back-to-back rounds on the sets of the segmentation benchmark, ``jax.jit`` of
``to_segments`` at default arguments (a table of capacity T per video), called with padded
numpy arrays and a mask from the lengths as a user would; the same with ``max_segments`` set
to the batch's largest count rounded up to a multiple of 64 (a capacity a user has to know);
and a numpy baseline, the change points of each video (``np.flatnonzero(np.diff(labels))``)
with their labels. All three must give the same segments. Reported: the median over rounds
of each time (best of ``--repeats`` in a round) and of the ratios to the numpy baseline.

Run: ``python benchmarks/segments.py [--repeats N] [--rounds R]``.
"""

from __future__ import annotations

import functools

import jax
import numpy as np
from _data import breakfast_like, over_segmented, rounds_arguments, timed_rounds

import jaxseg


@functools.partial(jax.jit, static_argnames="max_segments")
def _to_segments(labels, lengths, max_segments=None):
    mask = jaxseg.segments.lengths_to_mask(lengths, labels.shape[-1])
    return jaxseg.segments.to_segments(labels, mask=mask, max_segments=max_segments)


def _numpy(videos):
    """``(labels, starts, ends)`` of each video's runs."""
    out = []
    for labels in videos:
        starts = np.concatenate([[0], np.flatnonzero(np.diff(labels)) + 1])
        ends = np.concatenate([starts[1:], [labels.size]])
        out.append((labels[starts], starts, ends))
    return out


def _same(result, runs):
    """Whether ``result`` (a table, or the baseline's runs themselves) holds ``runs``."""
    if isinstance(result, list):
        return result is runs
    table = jax.device_get(result)
    for i, (labels, starts, ends) in enumerate(runs):
        n = int(table.count[i])
        if n != labels.size or not (
            np.array_equal(table.labels[i, :n], labels)
            and np.array_equal(table.starts[i, :n], starts)
            and np.array_equal(table.ends[i, :n], ends)
        ):
            return False
    return True


def run(name, videos, repeats, rounds):
    padded, lengths = jaxseg.io.pad_videos(videos)
    largest = max(int(np.count_nonzero(np.diff(v))) + 1 for v in videos)
    capacity = -(-largest // 64) * 64
    print(
        f"\n{name}: {len(videos)} videos, {int(lengths.sum()) / 1e6:.2f} M frames, padded to "
        f"{padded.shape}, at most {largest} segments; {rounds} rounds"
    )
    entry_points = {
        "numpy change points": lambda: _numpy(videos),
        "to_segments, defaults": lambda: _to_segments(padded, lengths),
        f"max_segments={capacity}": lambda: _to_segments(padded, lengths, capacity),
    }
    timed_rounds(entry_points, _same, repeats=repeats, rounds=rounds)


def main():
    args = rounds_arguments(__doc__)
    run("Breakfast-shaped (targets)", breakfast_like()[0], args.repeats, args.rounds)
    run("over-segmented (predictions)", over_segmented()[1], args.repeats, args.rounds)


if __name__ == "__main__":
    main()
