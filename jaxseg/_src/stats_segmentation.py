"""Dataset-level segmentation metrics as weighted sums of per-video statistics.

These are ``metric_fn(stats, weights)`` functions for :mod:`jaxseg._src.stats`: the MS-TCN
dataset numbers of the multiset of videos in which video ``i`` occurs ``weights[i]`` times.
Every total is an int32 weighted sum of integers, so a weighted evaluation equals, bit for
bit, the evaluation of the explicitly resampled list of videos. The host-side helpers at the
end turn an Evaluator's statistics into intervals and paired tests per reported metric.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxseg._src.deprecation import renamed_arguments
from jaxseg._src.edit import edit_score_from_distance
from jaxseg._src.frame import class_totals
from jaxseg._src.numerics import FULL_PRECISION, nanmean, precision_recall_f1, safe_divide
from jaxseg._src.programs import one_program
from jaxseg._src.segmentation import SegmentationStatistics
from jaxseg._src.stats import (
    weighted_sum,
)
from jaxseg._src.streaming_segmentation import SCORES

_WORD_BITS = 13
_WORDS = 3
# Weighted int32 totals stay exact while they are below 2^31 (guarded with this margin
# against the float32 rounding of the guard itself).
_INT32_LIMIT = 0.99 * 2.0**31


def _fraction_words(x):
    """int32 ``[..., 3]`` words ``w`` with ``x = sum_k w_k 2^(-13 (k + 1))`` for ``x`` in [0, 1].

    Exact for every float32 in ``[2^-16, 1]`` and for 0 (their ulp is at least 2^-39); smaller
    values are truncated to a multiple of 2^-39. Integer words make weighted sums of fractions
    exact and independent of the order of the videos.
    """
    words = []
    for _ in range(_WORDS):
        x = x * (1 << _WORD_BITS)
        word = jnp.floor(x)
        words.append(word)
        x = x - word
    return jnp.stack(words, axis=-1).astype(jnp.int32)


def _words_to_float(totals):
    """float32 ``sum_k totals[..., k] 2^(-13 (k + 1))``, always in the same order."""
    value = jnp.zeros(totals.shape[:-1], jnp.float32)
    for k in range(_WORDS):
        value = value + totals[..., k].astype(jnp.float32) * 2.0 ** (-_WORD_BITS * (k + 1))
    return value


def _fits_int32(frames, weights):
    """False when a weighted total (at most ``max(sum w frames, 2^13 sum w)``) may overflow."""
    w = jnp.asarray(weights).astype(jnp.float32)
    weighted = jnp.dot(w, frames.astype(jnp.float32), precision=FULL_PRECISION)
    largest = jnp.maximum(weighted, jnp.sum(w) * (1 << _WORD_BITS))
    return largest < _INT32_LIMIT


def _ones_if_none(weights, n):
    return jnp.ones(n, jnp.int32) if weights is None else jnp.asarray(weights)


@renamed_arguments(stats="statistics")
@one_program
def segmentation_metrics(statistics: SegmentationStatistics, weights=None) -> dict:
    """Dataset accuracy, edit and segmental precision/recall/F1@tau of weighted videos.

    With per-video multiplicities ``w`` (MS-TCN's dataset numbers when ``w = 1``):
    ``accuracy = sum w correct / sum w frames``; ``edit`` = ``sum w e / sum w`` over videos
    with frames, ``e = 1 - edit_distance / max(|P|, |Y|)`` (1 when both are 0); and from
    ``TP = sum w tp`` etc., ``precision = TP / (TP + FP)``, ``recall = TP / (TP + FN)``,
    ``f1 = 2 TP / (2 TP + FP + FN)`` (0 when 0/0, MS-TCN's ``nan_to_num``). Totals are int32
    (per-video edit scores as three 13-bit fixed-point words), so the result depends only on
    the multiset of videos, never on their order.

    Args:
      statistics: :class:`~jaxseg.stats.SegmentationStatistics` with leaves ``[N]``
        (``[N, K]`` for tp/fp/fn), e.g. ``Evaluator.statistics()``.
      weights: optional int32 ``[N]`` non-negative multiplicities; default 1 per video.

    Returns:
      dict of float32 in [0, 1]: ``"accuracy"`` ``[]`` (NaN without frames), ``"edit"`` ``[]``
      (NaN without a video with frames), ``"precision"``, ``"recall"``, ``"f1"`` ``[K]``.
      Edit and the segmental values are NaN if any video overflowed a segment capacity;
      everything is NaN if a weighted total could exceed int32 (more than about 2.1e9
      resampled frames, or more than about 260,000 resampled videos).

    >>> s = SegmentationStatistics(  # two videos (from segmentation_statistics)
    ...     frames=jnp.array([4, 6]), correct=jnp.array([3, 6]),
    ...     edit_distance=jnp.array([1, 0]), target_segments=jnp.array([2, 1]),
    ...     predicted_segments=jnp.array([3, 1]), tp=jnp.array([[2, 1], [1, 1]]),
    ...     fp=jnp.array([[1, 2], [0, 0]]), fn=jnp.array([[0, 1], [0, 0]]),
    ...     overflow=jnp.array([False, False]))
    >>> m = segmentation_metrics(s)
    >>> round(float(m["accuracy"]), 4), round(float(m["edit"]), 4), m["f1"].tolist()
    (0.9, 0.8333, [0.8571428656578064, 0.5714285969734192])
    >>> float(segmentation_metrics(s, jnp.array([2, 0]))["accuracy"])  # video 0 twice
    0.75
    """
    frames = jnp.asarray(statistics.frames)
    weights = _ones_if_none(weights, frames.shape[0])
    has_frames = frames > 0
    edit = edit_score_from_distance(
        jnp.asarray(statistics.edit_distance),
        jnp.asarray(statistics.target_segments),
        jnp.asarray(statistics.predicted_segments),
    )
    edit_words = jnp.where(has_frames[:, None], _fraction_words(edit), 0)
    counts = [jnp.asarray(x) for x in (statistics.tp, statistics.fp, statistics.fn)]
    k = counts[0].shape[-1]
    design = jnp.concatenate(
        [
            jnp.stack(
                [frames, jnp.asarray(statistics.correct), has_frames.astype(jnp.int32)], axis=-1
            ),
            edit_words,
            *counts,
        ],
        axis=-1,
    )
    totals = weighted_sum(design, weights)
    total_frames, total_correct, videos = (totals[i].astype(jnp.float32) for i in range(3))
    tp, fp, fn = (
        totals[3 + _WORDS + i * k : 3 + _WORDS + (i + 1) * k].astype(jnp.float32) for i in range(3)
    )
    segmental_valid = ~jnp.any(jnp.asarray(statistics.overflow))
    fits = _fits_int32(frames, weights)

    def segmental(x):
        return jnp.where(fits & segmental_valid, x, jnp.nan)

    return {
        "accuracy": jnp.where(fits, safe_divide(total_correct, total_frames, jnp.nan), jnp.nan),
        "edit": segmental(safe_divide(_words_to_float(totals[3 : 3 + _WORDS]), videos, jnp.nan)),
        **dict(zip(SCORES, map(segmental, precision_recall_f1(tp, fp, fn)))),
    }


class ClassStatistics(NamedTuple):
    """Per-video, per-class frame counts (int32 ``[..., C]``).

    Attributes:
      support: valid frames whose target is class c.
      predicted: valid frames predicted as class c.
      correct: valid frames whose target and prediction are both class c.
    """

    support: jax.Array
    predicted: jax.Array
    correct: jax.Array


@one_program
def class_statistics(targets, predictions, *, num_classes: int, mask=None) -> ClassStatistics:
    """Per-class frame counts of each sequence: the statistics of :func:`class_metrics`.

    ``support_c = #{t : y_t = c}``, ``predicted_c = #{t : p_t = c}``,
    ``correct_c = #{t : y_t = p_t = c}`` over valid frames, counted per run of the pair of
    labels (the cost follows the label changes, not the frames). Labels outside ``[0, C)`` are a
    precondition violation (not checked inside jit; such a label is left out of its total).

    Args:
      targets: integer ``[..., T]`` true labels.
      predictions: integer ``[..., T]`` predicted labels.
      num_classes: static number of classes C.
      mask: optional bool ``[..., T]``, True = valid frame.

    Returns:
      :class:`ClassStatistics` of int32 ``[..., C]``.

    >>> class_statistics([0, 1, 1], [0, 1, 0], num_classes=2).correct.tolist()
    [1, 1]
    """
    totals = class_totals(targets, predictions, mask, num_classes)
    return ClassStatistics(*(totals[..., i, :] for i in range(3)))


@renamed_arguments(stats="statistics")
@one_program
def class_metrics(statistics: ClassStatistics, weights=None) -> dict:
    """Dataset per-class accuracy (recall) and its mean over classes, of weighted videos.

    ``class_accuracy_c = sum w correct_c / sum w support_c``; 0 for a class that is predicted
    but never a target, NaN for a class absent from both (as the Evaluator). The mean skips
    NaN classes (NaN if all are). A class absent from a bootstrap resample is NaN in that
    replicate, which makes its interval NaN.

    Args:
      statistics: :class:`ClassStatistics` with leaves ``[N, C]``.
      weights: optional int32 ``[N]`` non-negative multiplicities; default 1 per video.

    Returns:
      dict: ``"class_accuracy"`` float32 ``[C]`` and ``"mean_class_accuracy"`` float32 ``[]``,
      in [0, 1]; all NaN if a weighted total could exceed int32.

    >>> s = class_statistics([[0, 1, 1], [2, 2, 2]], [[0, 1, 0], [2, 2, 2]], num_classes=4)
    >>> class_metrics(s)["class_accuracy"].tolist()
    [1.0, 0.5, 1.0, nan]
    """
    support = jnp.asarray(statistics.support)
    weights = _ones_if_none(weights, support.shape[0])
    support_total, predicted_total, correct_total = (
        weighted_sum(x, weights).astype(jnp.float32)
        for x in (support, statistics.predicted, statistics.correct)
    )
    present = (support_total > 0) | (predicted_total > 0)
    accuracy = jnp.where(present, safe_divide(correct_total, support_total, 0.0), jnp.nan)
    # nanmean adds the classes pairwise, as streaming.frame_metrics and recall(average="macro")
    # do: a plain sum was 1 ulp off their mean class accuracy for many confusion matrices
    mean = nanmean(accuracy)
    fits = _fits_int32(jnp.sum(support, axis=-1), weights)
    return {
        "class_accuracy": jnp.where(fits, accuracy, jnp.nan),
        "mean_class_accuracy": jnp.where(fits, mean, jnp.nan),
    }
