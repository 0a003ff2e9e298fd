"""Streaming accumulators for frame-level and segmentation metrics.

States hold exact counts (:mod:`jaxseg._src.counting`); the only non-integer statistic, the
sum of per-video edit scores, is kept in fixed point with 2**-24 resolution per video, so it
is additive too and the result does not depend on how the data was batched or sharded.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxseg._src import checks, counting
from jaxseg._src.accumulator import Accumulator
from jaxseg._src.deprecation import renamed_arguments
from jaxseg._src.edit import edit_score_from_distance
from jaxseg._src.frame import (
    AVERAGES,
    average_over_classes,
    confusion_by_runs,
    score_fraction,
)
from jaxseg._src.numerics import precision_recall_f1
from jaxseg._src.segmentation import DEFAULT_IOU_THRESHOLDS, segmentation_statistics

EDIT_SCALE = 1 << 24
SCORES = ("precision", "recall", "f1")


class FrameState(NamedTuple):
    """Pooled confusion matrix ``[C, C]`` (rows = targets) and the number of valid frames
    with a label outside ``[0, C)``, as exact counts."""

    confusion: counting.Count
    out_of_range: counting.Count


class SegmentationState(NamedTuple):
    """Additive statistics of the segmentation metrics (all exact counts).

    ``edit_sum`` is the sum of per-video edit scores times 2**24 (rounded per video);
    ``frame`` is a :class:`FrameState` when the accumulator has ``num_classes``, else None.
    """

    videos: counting.Count
    frames: counting.Count
    correct: counting.Count
    edit_sum: counting.Count
    target_segments: counting.Count
    predicted_segments: counting.Count
    tp: counting.Count
    fp: counting.Count
    fn: counting.Count
    overflow: counting.Count
    frame: FrameState | None


def merge_states(a, b):
    """Adds two states of the same accumulator (leaf-wise exact count sums)."""
    is_count = lambda x: isinstance(x, counting.Count)  # noqa: E731
    return jax.tree_util.tree_map(
        lambda x, y: counting.merge(x, y) if is_count(x) else x + y, a, b, is_leaf=is_count
    )


def pooled_confusion(targets, predictions, mask, num_classes: int):
    """One int32 ``[C, C]`` confusion matrix over all valid frames of a batch ``[..., T]``."""
    mask = jnp.ones(targets.shape, jnp.bool_) if mask is None else mask
    targets, predictions, mask = checks.with_a_frame(targets, predictions, mask)
    rows = [jnp.reshape(x, (-1, targets.shape[-1])) for x in (targets, predictions, mask)]
    return confusion_by_runs(*rows, num_classes, pooled=True)


def class_scores(confusion: counting.Count, score: str) -> jax.Array:
    """Per-class precision, recall, F1 or IoU (``score``) of an exact confusion count
    ``[C, C]`` (rows = targets), each ratio correctly rounded for every count: as
    :func:`~jaxseg._src.frame.scores_from_confusion` with ``average="none"``, whose float32
    counts are exact only below 2**24."""
    tp = counting.Count(*(jnp.diagonal(x, axis1=-2, axis2=-1) for x in confusion))
    support, predicted = counting.total(confusion, -1), counting.total(confusion, -2)
    fraction = score_fraction(
        score, tp, support, predicted, add=counting.merge, subtract=counting.subtract
    )
    absent = counting.to_float(counting.merge(support, predicted)) == 0
    return jnp.where(absent, jnp.nan, counting.ratio(*fraction, fill=0.0))


def pooled_accuracy(confusion: counting.Count, classes: int) -> jax.Array:
    """Correct over labelled frames of an exact confusion count: the diagonal of its first
    ``classes`` rows over their sum (NaN for none)."""
    rows = counting.Count(*(x[:classes] for x in confusion))
    correct = counting.Count(*(jnp.diagonal(x) for x in rows))
    return counting.ratio(counting.total(correct, 0), counting.total(counting.total(rows, 1), 0))


def frame_results(confusion: counting.Count) -> dict:
    """Frame-level metrics of an exact confusion count ``[C, C]``."""
    support = counting.to_float(counting.total(confusion, -1))
    accuracy = pooled_accuracy(confusion, confusion.high.shape[-1])
    per_class = {score: class_scores(confusion, score) for score in SCORES}

    def average(score, how):
        return average_over_classes(per_class[score], support, accuracy, how)

    return {
        "accuracy": accuracy,
        "class_accuracy": per_class["recall"],
        "mean_class_accuracy": average("recall", "macro"),
        **{score: {how: average(score, how) for how in AVERAGES} for score in SCORES},
    }


def frame_metrics(*, num_classes: int, ignore_index=None) -> Accumulator:
    """Accumulator of the confusion-matrix metrics over a whole dataset.

    ``compute`` returns ``accuracy`` (pooled over frames), ``class_accuracy [C]``,
    ``mean_class_accuracy``, and ``precision``/``recall``/``f1`` as dicts over
    ``"micro"|"macro"|"weighted"|"none"`` (see :func:`jaxseg.metrics.precision`), plus
    ``confusion`` (exact integer counts ``[C, C]``) and ``out_of_range``, the number of valid
    frames with a label outside ``[0, C)``: when it is not 0 every ratio is NaN. Counts are
    int32 (int64 with ``jax_enable_x64``), exact; a count int32 cannot hold is -1
    (``jaxseg.streaming.to_int(state.confusion)`` gives it exactly on the host). Ratios are
    float32 (see :func:`segmentation` for float64 on the host).

    Args:
      num_classes: static number of classes C; labels must lie in ``[0, C)``.
      ignore_index: optional static int: frames whose target equals it are removed like
        masked ones (as in :func:`jaxseg.metrics.accuracy`).

    >>> acc = frame_metrics(num_classes=3)
    >>> state = acc.update(acc.init(), [[0, 1, 1, 2]], [[0, 1, 2, 2]])
    >>> float(acc.compute(state)["accuracy"])
    0.75
    """
    num_classes = checks.static_int("num_classes", num_classes, minimum=1)
    ignore_index = checks.static_ignore_index(ignore_index)

    def init():
        return FrameState(counting.zeros((num_classes, num_classes)), counting.zeros())

    def update(state, targets, predictions, *, mask=None):
        targets, predictions = checks.label_pair(targets, predictions)
        mask = checks.without_ignored(targets, checks.as_mask(mask, targets.shape), ignore_index)
        confusion = pooled_confusion(targets, predictions, mask, num_classes)
        frames = targets.size if mask is None else jnp.sum(mask, dtype=jnp.int32)
        outside = frames - jnp.sum(confusion, dtype=jnp.int32)
        return FrameState(
            counting.add_sum(state.confusion, confusion, axis=()),
            counting.add(state.out_of_range, outside),
        )

    def compute(state):
        out_of_range = counting.to_integer(state.out_of_range)
        results = jax.tree_util.tree_map(
            lambda x: jnp.where(out_of_range != 0, jnp.nan, x),
            frame_results(state.confusion),
        )
        confusion = counting.to_integer(state.confusion)
        return {**results, "confusion": confusion, "out_of_range": out_of_range}

    return Accumulator(init, update, merge_states, compute)


def _additive(stats) -> tuple:
    """The per-video terms a :class:`SegmentationState` sums (its fields but ``frame``): the
    edit score of a video with frames and no overflow in 2**-24 fixed point."""
    present = stats.frames > 0
    score = edit_score_from_distance(
        stats.edit_distance, stats.target_segments, stats.predicted_segments
    )
    fixed = jnp.where(present & ~stats.overflow, jnp.round(score * EDIT_SCALE), 0)
    return (
        present,
        stats.frames,
        stats.correct,
        fixed.astype(jnp.int32),
        stats.target_segments,
        stats.predicted_segments,
        stats.tp,
        stats.fp,
        stats.fn,
        stats.overflow,
    )


def _segmentation_results(state: SegmentationState) -> dict:
    """Accuracy, edit and segmental scores of a :class:`SegmentationState`."""
    as_float = counting.to_float
    tp, fp, fn = as_float(state.tp), as_float(state.fp), as_float(state.fn)
    overflowed = as_float(state.overflow) > 0

    def nan_if_overflow(x):
        return jnp.where(overflowed, jnp.nan, x)

    edit = counting.ratio(state.edit_sum, state.videos) / EDIT_SCALE  # rounded once
    return {
        "accuracy": counting.ratio(state.correct, state.frames),
        "edit": nan_if_overflow(edit),
        **dict(zip(SCORES, map(nan_if_overflow, precision_recall_f1(tp, fp, fn)))),
        **{
            name: counting.to_integer(getattr(state, name))
            for name in ("videos", "frames", "tp", "fp", "fn", "overflow")
        },
    }


@renamed_arguments(overlaps="iou_thresholds")
def segmentation(
    *,
    iou_thresholds=DEFAULT_IOU_THRESHOLDS,
    background=(),
    num_classes=None,
    max_target_segments=None,
    max_predicted_segments=None,
    legacy_asformer_end=False,
    ignore_index=None,
) -> Accumulator:
    """Accumulator of the MS-TCN dataset metrics: accuracy, edit and segmental P/R/F1@tau.

    As MS-TCN's ``eval.py``: accuracy pools frames over all videos, edit is the mean of
    per-video edit scores (:func:`jaxseg.metrics.edit_score`), precision, recall and F1
    come from TP/FP/FN summed over videos. Rows whose mask is all False change nothing.

    Args:
      iou_thresholds: static IoU thresholds (see :func:`jaxseg.metrics.segmental_counts`).
      background: static tuple of labels that form no segment.
      num_classes: optional static C (labels then in ``[0, C)``): ``compute`` also returns
        :func:`frame_metrics`' ``class_accuracy``, ``mean_class_accuracy``, ``confusion``
        and ``frame_precision``/``frame_recall``/``frame_f1``.
      max_target_segments, max_predicted_segments: optional static limits on a video's
        segments, as in :func:`jaxseg.metrics.segmental_counts` (``None``: none).
      legacy_asformer_end: static; reproduce ASFormer's last-segment end (F1 only).
      ignore_index: optional static int: frames whose target equals it are removed like
        masked ones before anything is counted (as in :func:`jaxseg.metrics.edit_score`).

    Returns:
      An :class:`~jaxseg.streaming.Accumulator`. ``compute(state)`` gives a dict with
      ``accuracy``, ``edit`` (NaN without data), ``precision``/``recall``/``f1`` (float32
      ``[K]``, 0 where 0/0), and the exact counts ``videos``, ``frames``, ``tp``/``fp``/``fn``
      (``[K]``, summed over videos) and ``overflow`` (videos past a segment limit;
      then ``edit`` and the segmental scores are NaN). Counts are int32 (int64 with
      ``jax_enable_x64``); a count past int32 is -1, never rounded, and
      ``jaxseg.streaming.to_int`` reads the state's counts exactly on the host, where float64
      scores follow (``to_int(state.correct) / to_int(state.frames)``).

    >>> acc = segmentation(iou_thresholds=(0.5,), background=(0,))
    >>> state = acc.init()
    >>> state = acc.update(state, [[1, 1, 0, 2, 2]], [[1, 1, 0, 0, 2]])
    >>> state = acc.update(state, [[3, 3, 3, 0, 0]], [[3, 0, 3, 0, 0]])
    >>> result = acc.compute(state)
    >>> round(float(result["accuracy"]), 4), float(result["edit"]), result["f1"].tolist()
    (0.8, 0.75, [0.5714285969734192])
    """
    thresholds = checks.static_thresholds("iou_thresholds", iou_thresholds)
    background = checks.static_labels("background", background)
    num_classes = checks.static_int("num_classes", num_classes, minimum=1, allow_none=True)
    frames_acc = None if num_classes is None else frame_metrics(num_classes=num_classes)
    ignore_index = checks.static_ignore_index(ignore_index)
    options = dict(
        iou_thresholds=iou_thresholds,
        background=background,
        max_target_segments=max_target_segments,
        max_predicted_segments=max_predicted_segments,
        legacy_asformer_end=checks.static_bool("legacy_asformer_end", legacy_asformer_end),
    )

    def init():
        zero, per_threshold = counting.zeros(), counting.zeros((len(thresholds),))
        frame = None if frames_acc is None else frames_acc.init()
        return SegmentationState(*(zero,) * 6, *(per_threshold,) * 3, zero, frame)

    def update(state, targets, predictions, *, mask=None):
        if ignore_index is not None:
            targets, predictions, mask = _without_ignored(targets, predictions, mask, ignore_index)
        stats = segmentation_statistics(targets, predictions, mask=mask, **options)
        frame = state.frame
        if frames_acc is not None:
            frame = frames_acc.update(frame, targets, predictions, mask=mask)
        return SegmentationState(*counting.add_sums(state[:-1], _additive(stats)), frame)

    def compute(state):
        results = _segmentation_results(state)
        if frames_acc is None:
            return results
        return {**results, **_frame_results(frames_acc.compute(state.frame))}

    return Accumulator(init, update, merge_states, compute)


def _without_ignored(targets, predictions, mask, ignore_index: int):
    """The checked labels and the mask without the frames whose target is ``ignore_index``
    (removed before the frame metrics too)."""
    targets, predictions = checks.label_pair(targets, predictions)
    mask = checks.as_mask(mask, targets.shape)
    return targets, predictions, checks.without_ignored(targets, mask, ignore_index)


def _frame_results(frame: dict) -> dict:
    """The frame-level results :func:`segmentation` adds with ``num_classes``, by their names
    there (the frame scores prefixed ``frame_``)."""
    kept = ("class_accuracy", "mean_class_accuracy", "confusion", "out_of_range")
    return {
        **{key: frame[key] for key in kept},
        **{f"frame_{key}": frame[key] for key in SCORES},
    }
