"""Benchmark: the confusion matrix (class accuracy, frame P/R/F1) of padded batches.

Times, in back-to-back rounds on the same synthetic data, ``jax.jit`` of the public
``confusion_matrix`` at default arguments, called with padded numpy arrays and a mask from
the lengths as a user would (the per-video matrices summed on the device); the same with the
plain frame-by-frame count (``frame.count_pairs``, one scatter update per frame, the
formulation the kernel replaced); and a numpy baseline, ``np.bincount`` of ``C * t + p``
over each video's frames, summed (what mmaction2-style scripts do). All three must give the
same matrix. A third set puts the Breakfast-shaped frames in one row, as the CLI pools them
for its plots. Reported: the median over rounds of each time (best of ``--repeats`` in a
round) and of the ratios to the numpy baseline.

Run: ``python benchmarks/frame.py [--repeats N] [--rounds R]``.
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
from jaxseg._src.frame import count_pairs


@functools.partial(jax.jit, static_argnames="num_classes")
def _public(targets, predictions, lengths, num_classes):
    """What a user writes: the per-video confusion matrices, summed over the batch."""
    mask = jaxseg.segments.lengths_to_mask(lengths, targets.shape[-1])
    return jaxseg.metrics.confusion_matrix(
        targets, predictions, num_classes=num_classes, mask=mask
    ).sum(axis=0)


@functools.partial(jax.jit, static_argnames="num_classes")
def _frame_by_frame(targets, predictions, lengths, num_classes):
    """The plain specification: one scatter update per frame, per video, summed."""
    mask = jaxseg.segments.lengths_to_mask(lengths, targets.shape[-1]).astype(jnp.int32)
    count = jax.vmap(count_pairs, in_axes=(0, 0, 0, None))
    return count(targets, predictions, mask, num_classes).sum(axis=0)


def _numpy(targets, predictions, num_classes):
    """Per-video ``np.bincount`` of the cells ``C * t + p``, summed in int64."""
    total = np.zeros(num_classes * num_classes, np.int64)
    for t, p in zip(targets, predictions):
        total += np.bincount(num_classes * t + p, minlength=num_classes * num_classes)
    return total.reshape(num_classes, num_classes)


def _best_of(fn, repeats):
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return min(times), np.asarray(result)


def run(name, targets, predictions, repeats, rounds):
    padded_t, lengths = jaxseg.io.pad_videos(targets)
    padded_p, _ = jaxseg.io.pad_videos(predictions)
    classes = int(max(padded_t.max(), padded_p.max())) + 1
    entry_points = {
        "numpy bincount per video": lambda: _numpy(targets, predictions, classes),
        "jaxseg confusion_matrix": lambda: _public(padded_t, padded_p, lengths, classes),
        "frame by frame (plain)": lambda: _frame_by_frame(padded_t, padded_p, lengths, classes),
    }
    first_call = {}
    for label, fn in entry_points.items():
        start = time.perf_counter()
        jax.block_until_ready(fn())
        first_call[label] = time.perf_counter() - start
    times = {label: [] for label in entry_points}
    for _ in range(rounds):
        results = []
        for label, fn in entry_points.items():
            seconds, result = _best_of(fn, repeats)
            times[label].append(seconds)
            results.append(result)
        for label, result in zip(entry_points, results):
            if not np.array_equal(result, results[0]):
                raise AssertionError(f"{name}: {label} differs from the numpy baseline")
    baseline = np.array(times["numpy bincount per video"])
    print(
        f"\n{name}: {len(targets)} videos, {int(lengths.sum()) / 1e6:.2f} M frames, padded to "
        f"{padded_t.shape}, {classes} classes; {rounds} rounds"
    )
    for label in entry_points:
        ours = np.array(times[label])
        print(
            f"  {label:26s} {np.median(ours) * 1e3:7.1f} ms"
            f" [{ours.min() * 1e3:.1f}-{ours.max() * 1e3:.1f}]"
            f"  x{np.median(baseline / ours):.1f} the numpy baseline"
            f"  (first call {first_call[label]:.2f} s)"
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=10, help="best of N, per round")
    parser.add_argument("--rounds", type=int, default=5, help="back-to-back rounds")
    args = parser.parse_args()
    print(machine_summary())
    jax.block_until_ready(jnp.zeros(1))  # start the backend: not part of any first call
    targets, predictions = breakfast_like()
    run("Breakfast-shaped", targets, predictions, args.repeats, args.rounds)
    run("over-segmented", *over_segmented(), args.repeats, args.rounds)
    # As the CLI pools the frames of a dataset for its plots: one sequence of 5.4 M frames.
    whole = [np.concatenate(targets)], [np.concatenate(predictions)]
    run("Breakfast-shaped frames in one row", *whole, args.repeats, args.rounds)


if __name__ == "__main__":
    main()
