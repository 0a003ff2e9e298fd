"""Benchmark: ``segments.to_segments`` and ``count_segments`` (run-length encoding) of padded
batches.

Times, in back-to-back rounds on the sets of the segmentation benchmark, ``jax.jit`` of
``to_segments`` at default arguments (a table of capacity T per video), called with padded
numpy arrays and a mask from the lengths as a user would; the same with ``max_segments`` set
to the batch's largest count rounded up to a multiple of 64 (a capacity a user has to know);
``count_segments``; and a numpy baseline, the change points of each video
(``np.flatnonzero(np.diff(labels))``) with their labels. Each set runs twice: with the
lengths' prefix masks, and with gaps (every video also loses ``GAPS`` stretches of
``GAP_FRAMES`` frames, which the baseline removes first). All must give the same segments.
Reported: the median over rounds of each time (best of ``--repeats`` in a round) and of the
ratios to the numpy baseline.

Run: ``python benchmarks/segments.py [--repeats N] [--rounds R]``.
"""

from __future__ import annotations

import functools

import jax
import numpy as np
from _data import breakfast_like, over_segmented, rounds_arguments, timed_rounds

import jaxseg

GAPS, GAP_FRAMES = 3, 50


@functools.partial(jax.jit, static_argnames="max_segments")
def _to_segments(labels, mask, max_segments=None):
    return jaxseg.segments.to_segments(labels, mask=mask, max_segments=max_segments)


@jax.jit
def _count_segments(labels, mask):
    return jaxseg.segments.count_segments(labels, mask=mask)


def _numpy(videos, masks):
    """``(labels, starts, ends)`` of the runs of each video's valid frames."""
    out = []
    for labels, mask in zip(videos, masks):
        labels = labels[mask]
        starts = np.concatenate([[0], np.flatnonzero(np.diff(labels)) + 1])
        ends = np.concatenate([starts[1:], [labels.size]])
        out.append((labels[starts], starts, ends))
    return out


def _same(result, runs):
    """Whether ``result`` (a table, counts, or the baseline's runs themselves) holds
    ``runs``."""
    if isinstance(result, list):
        return result is runs
    result = jax.device_get(result)
    if isinstance(result, np.ndarray):
        return result.tolist() == [labels.size for labels, _, _ in runs]
    for i, (labels, starts, ends) in enumerate(runs):
        n = int(result.count[i])
        if n != labels.size or not (
            np.array_equal(result.labels[i, :n], labels)
            and np.array_equal(result.starts[i, :n], starts)
            and np.array_equal(result.ends[i, :n], ends)
        ):
            return False
    return True


def _with_gaps(mask, rng):
    """``mask`` with ``GAPS`` stretches of ``GAP_FRAMES`` frames of every row masked."""
    mask = mask.copy()
    for row, length in zip(mask, mask.sum(axis=1)):
        for start in rng.integers(0, max(length - GAP_FRAMES, 1), GAPS):
            row[start : start + GAP_FRAMES] = False
    return mask


def run(name, videos, repeats, rounds):
    padded, lengths = jaxseg.io.pad_videos(videos)
    prefixes = np.asarray(jaxseg.segments.lengths_to_mask(lengths, padded.shape[-1]))
    gaps = _with_gaps(prefixes, np.random.default_rng(0))
    for masks, how in ((prefixes, "prefix masks"), (gaps, f"{GAPS} gaps of {GAP_FRAMES} frames")):
        _time(f"{name}, {how}", videos, padded, masks, repeats, rounds)


def _time(name, videos, padded, masks, repeats, rounds):
    rows = [m[: len(v)] for m, v in zip(masks, videos)]
    runs = _numpy(videos, rows)
    largest = max(labels.size for labels, _, _ in runs)
    capacity = -(-largest // 64) * 64
    print(
        f"\n{name}: {len(videos)} videos, {int(masks.sum()) / 1e6:.2f} M valid frames, padded "
        f"to {padded.shape}, at most {largest} segments; {rounds} rounds"
    )
    mask = jax.device_put(masks)
    entry_points = {
        "numpy change points": lambda: _numpy(videos, rows),
        "to_segments, defaults": lambda: _to_segments(padded, mask),
        f"max_segments={capacity}": lambda: _to_segments(padded, mask, capacity),
        "count_segments": lambda: _count_segments(padded, mask),
    }
    timed_rounds(entry_points, _same, repeats=repeats, rounds=rounds)


def main():
    args = rounds_arguments(__doc__)
    run("Breakfast-shaped (targets)", breakfast_like()[0], args.repeats, args.rounds)
    run("over-segmented (predictions)", over_segmented()[1], args.repeats, args.rounds)


if __name__ == "__main__":
    main()
