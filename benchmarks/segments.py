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

import argparse
import functools
import time

import jax
import jax.numpy as jnp
import numpy as np
from _data import breakfast_like, machine_summary, over_segmented

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


def _same(table, runs):
    table = jax.device_get(table)
    for i, (labels, starts, ends) in enumerate(runs):
        n = int(table.count[i])
        if n != labels.size or not (
            np.array_equal(table.labels[i, :n], labels)
            and np.array_equal(table.starts[i, :n], starts)
            and np.array_equal(table.ends[i, :n], ends)
        ):
            return False
    return True


def _best_of(fn, repeats):
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return min(times), result


def run(name, videos, repeats, rounds):
    padded, lengths = jaxseg.io.pad_videos(videos)
    largest = max(int(np.count_nonzero(np.diff(v))) + 1 for v in videos)
    capacity = -(-largest // 64) * 64
    entry_points = {
        "numpy change points": lambda: _numpy(videos),
        "to_segments, defaults": lambda: _to_segments(padded, lengths),
        f"max_segments={capacity}": lambda: _to_segments(padded, lengths, capacity),
    }
    first_call = {}
    for label, fn in entry_points.items():
        start = time.perf_counter()
        jax.block_until_ready(fn())
        first_call[label] = time.perf_counter() - start
    times = {label: [] for label in entry_points}
    for _ in range(rounds):
        results = {}
        for label, fn in entry_points.items():
            seconds, results[label] = _best_of(fn, repeats)
            times[label].append(seconds)
        reference = results.pop("numpy change points")
        for label, table in results.items():
            if not _same(table, reference):
                raise AssertionError(f"{name}: {label} differs from the numpy baseline")
    baseline = np.array(times["numpy change points"])
    print(
        f"\n{name}: {len(videos)} videos, {int(lengths.sum()) / 1e6:.2f} M frames, padded to "
        f"{padded.shape}, at most {largest} segments; {rounds} rounds"
    )
    for label in entry_points:
        ours = np.array(times[label])
        print(
            f"  {label:22s} {np.median(ours) * 1e3:7.1f} ms"
            f" [{ours.min() * 1e3:.1f}-{ours.max() * 1e3:.1f}]"
            f"  x{np.median(baseline / ours):.2f} the numpy baseline"
            f"  (first call {first_call[label]:.2f} s)"
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=10, help="best of N, per round")
    parser.add_argument("--rounds", type=int, default=5, help="back-to-back rounds")
    args = parser.parse_args()
    print(machine_summary())
    jax.block_until_ready(jnp.zeros(1))  # start the backend: not part of any first call
    run("Breakfast-shaped (targets)", breakfast_like()[0], args.repeats, args.rounds)
    run("over-segmented (predictions)", over_segmented()[1], args.repeats, args.rounds)


if __name__ == "__main__":
    main()
