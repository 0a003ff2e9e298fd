"""Benchmark: the confusion matrix (class accuracy, frame P/R/F1) of padded batches.

Times, in back-to-back rounds on the same synthetic data, ``jax.jit`` of the public
``confusion_matrix`` at default arguments, called with padded numpy arrays and a mask from
the lengths as a user would (the per-video matrices summed on the device); the same with the
plain frame-by-frame count (``frame.count_pairs``, one scatter update per frame, the
formulation the kernel replaced); and a numpy baseline, ``np.bincount`` of ``C * t + p``
over each video's frames, summed (what mmaction2-style scripts do). All three must give the
same matrix. A third set puts the Breakfast-shaped frames in one row, as the CLI pools them
for its plots. The per-video class totals of ``jaxseg.stats.class_statistics`` (support,
predicted and correct frames per class, the statistics of bootstrapped class accuracy) are
timed the same way against three ``np.bincount`` per video and their frame-by-frame
definition (``frame.count_classes``). And the frame scores a user asks for per video
(``precision``, ``recall`` and ``f1_score``, macro averages, and ``class_accuracy``, under one
``jax.jit``, sharing one matrix per video) against numpy computing the same from each
video's ``np.bincount`` matrix. Reported: the median over rounds of each time (best of
``--repeats`` in a round) and of the ratios to the numpy baseline.

Run: ``python benchmarks/frame.py [--repeats N] [--rounds R]``.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from _data import breakfast_like, over_segmented, rounds_arguments, timed_rounds

import jaxseg
from jaxseg._src.frame import count_classes, count_pairs


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


@functools.partial(jax.jit, static_argnames="num_classes")
def _class_statistics(targets, predictions, lengths, num_classes):
    """What a user writes: each video's class totals, stacked ``[B, 3, C]``."""
    mask = jaxseg.segments.lengths_to_mask(lengths, targets.shape[-1])
    totals = jaxseg.stats.class_statistics(targets, predictions, num_classes=num_classes, mask=mask)
    return jnp.stack(totals, axis=1)


@functools.partial(jax.jit, static_argnames="num_classes")
def _class_totals_frame_by_frame(targets, predictions, lengths, num_classes):
    """The plain specification: three scatter updates per frame, per video."""
    mask = jaxseg.segments.lengths_to_mask(lengths, targets.shape[-1]).astype(jnp.int32)
    count = jax.vmap(count_classes, in_axes=(0, 0, 0, None))
    return count(targets, predictions, mask, num_classes)


@functools.partial(jax.jit, static_argnames="num_classes")
def _frame_scores(targets, predictions, lengths, num_classes):
    """What a user writes: each video's macro precision, recall and F1 and its class
    accuracy under one ``jax.jit``."""
    mask = jaxseg.segments.lengths_to_mask(lengths, targets.shape[-1])
    options = dict(num_classes=num_classes, mask=mask)
    metrics = (jaxseg.metrics.precision, jaxseg.metrics.recall, jaxseg.metrics.f1_score)
    macro = [metric(targets, predictions, **options) for metric in metrics]
    return (*macro, jaxseg.metrics.class_accuracy(targets, predictions, **options))


def _numpy_frame_scores(targets, predictions, num_classes):
    """Per video: the same scores from its ``np.bincount`` matrix (a class absent from both
    sides is NaN and left out of the means, any other 0/0 is 0, as scikit-learn's
    ``zero_division=0``)."""
    scores = []
    for t, p in zip(targets, predictions):
        cells = np.bincount(num_classes * t + p, minlength=num_classes * num_classes)
        matrix = cells.reshape(num_classes, num_classes)
        tp = np.diagonal(matrix).astype(np.float64)
        fp, fn = matrix.sum(axis=0) - tp, matrix.sum(axis=1) - tp
        absent = tp + fp + fn == 0

        def ratio(numerator, denominator, absent=absent):
            value = numerator / np.maximum(denominator, 1)
            return np.where(absent, np.nan, value)

        per_class = (ratio(tp, tp + fp), ratio(tp, tp + fn), ratio(2 * tp, 2 * tp + fp + fn))
        scores.append((*(np.nanmean(x) for x in per_class), per_class[1]))
    return tuple(np.array(column) for column in zip(*scores))


def _close(ours, baseline):
    """float32 scores against float64 ones, NaN where NaN."""
    return all(
        np.allclose(np.asarray(a), b, rtol=0, atol=1e-6, equal_nan=True)
        for a, b in zip(ours, baseline, strict=True)
    )


def _numpy_class_totals(targets, predictions, num_classes):
    """Per video: ``np.bincount`` of the targets, the predictions and the agreeing targets."""
    totals = np.zeros((len(targets), 3, num_classes), np.int64)
    for row, (t, p) in enumerate(zip(targets, predictions)):
        for side, labels in enumerate((t, p, t[t == p])):
            totals[row, side] = np.bincount(labels, minlength=num_classes)
    return totals


def _numpy(targets, predictions, num_classes):
    """Per-video ``np.bincount`` of the cells ``C * t + p``, summed in int64."""
    total = np.zeros(num_classes * num_classes, np.int64)
    for t, p in zip(targets, predictions):
        total += np.bincount(num_classes * t + p, minlength=num_classes * num_classes)
    return total.reshape(num_classes, num_classes)


def run(name, targets, predictions, repeats, rounds):
    padded_t, lengths = jaxseg.io.pad_videos(targets)
    padded_p, _ = jaxseg.io.pad_videos(predictions)
    classes = int(max(padded_t.max(), padded_p.max())) + 1
    print(
        f"\n{name}: {len(targets)} videos, {int(lengths.sum()) / 1e6:.2f} M frames, padded to "
        f"{padded_t.shape}, {classes} classes; {rounds} rounds"
    )
    entry_points = {
        "numpy bincount per video": lambda: _numpy(targets, predictions, classes),
        "jaxseg confusion_matrix": lambda: _public(padded_t, padded_p, lengths, classes),
        "frame by frame (plain)": lambda: _frame_by_frame(padded_t, padded_p, lengths, classes),
    }
    same = lambda a, b: np.array_equal(np.asarray(a), np.asarray(b))  # noqa: E731
    timed_rounds(entry_points, same, repeats=repeats, rounds=rounds)
    print("  per-video class totals:")
    entry_points = {
        "numpy bincount per video": lambda: _numpy_class_totals(targets, predictions, classes),
        "jaxseg class_statistics": lambda: _class_statistics(padded_t, padded_p, lengths, classes),
        "frame by frame (plain)": lambda: _class_totals_frame_by_frame(
            padded_t, padded_p, lengths, classes
        ),
    }
    timed_rounds(entry_points, same, repeats=repeats, rounds=rounds)
    print("  per-video frame scores (macro P/R/F1, class accuracy):")
    entry_points = {
        "numpy bincount per video": lambda: _numpy_frame_scores(targets, predictions, classes),
        "jaxseg, one jax.jit": lambda: _frame_scores(padded_t, padded_p, lengths, classes),
    }
    timed_rounds(entry_points, _close, repeats=repeats, rounds=rounds)


def main():
    args = rounds_arguments(__doc__)
    targets, predictions = breakfast_like()
    run("Breakfast-shaped", targets, predictions, args.repeats, args.rounds)
    run("over-segmented", *over_segmented(), args.repeats, args.rounds)
    # As the CLI pools the frames of a dataset for its plots: one sequence of 5.4 M frames.
    whole = [np.concatenate(targets)], [np.concatenate(predictions)]
    run("Breakfast-shaped frames in one row", *whole, args.repeats, args.rounds)


if __name__ == "__main__":
    main()
