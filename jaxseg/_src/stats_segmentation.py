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
import numpy as np

from jaxseg._src.deprecation import renamed_arguments
from jaxseg._src.edit import edit_score_from_distance
from jaxseg._src.frame import class_totals
from jaxseg._src.numerics import FULL_PRECISION, precision_recall_f1, safe_divide
from jaxseg._src.programs import one_program
from jaxseg._src.segmentation import DEFAULT_IOU_THRESHOLDS, SegmentationStatistics
from jaxseg._src.stats import (
    bootstrap,
    paired_bootstrap_test,
    permutation_test,
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
      statistics: :class:`~jaxseg._src.segmentation.SegmentationStatistics` with leaves ``[N]``
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
    labels (:func:`jaxseg._src.frame.class_totals_by_runs`). Labels outside ``[0, C)`` are a
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
    mean = safe_divide(
        jnp.sum(jnp.where(present, accuracy, 0.0)), jnp.sum(present.astype(jnp.float32)), jnp.nan
    )
    fits = _fits_int32(jnp.sum(support, axis=-1), weights)
    return {
        "class_accuracy": jnp.where(fits, accuracy, jnp.nan),
        "mean_class_accuracy": jnp.where(fits, mean, jnp.nan),
    }


# --------------------------------------------------------------------------------------------
# Host-side helpers for the Evaluator and the command line.
# --------------------------------------------------------------------------------------------
def _ratio64(numerator, denominator, fill):
    """float64 ``numerator / denominator`` of exact integer totals, ``fill`` where 0/0."""
    numerator = np.asarray(numerator, np.float64)
    denominator = np.asarray(denominator, np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, numerator / np.maximum(denominator, 1.0), fill)


def video_metrics(statistics) -> dict:
    """Accuracy ``[N]``, edit ``[N]`` and segmental precision/recall/F1 ``[N, K]`` of every
    video, float64 on the host from its exact counts (the values :class:`jaxseg.Evaluator`'s
    ``per_video`` reports).

    A video without segments has edit 1, and a score whose denominator is 0 is 0 (MS-TCN's
    ``nan_to_num``); a video without frames has accuracy NaN.

    >>> s = SegmentationStatistics(
    ...     frames=np.array([6]), correct=np.array([3]), edit_distance=np.array([1]),
    ...     target_segments=np.array([2]), predicted_segments=np.array([4]),
    ...     tp=np.array([[1]]), fp=np.array([[3]]), fn=np.array([[1]]),
    ...     overflow=np.array([False]))
    >>> values = video_metrics(s)
    >>> values["accuracy"].tolist(), values["edit"].tolist(), values["precision"].tolist()
    ([0.5], [0.75], [[0.25]])
    >>> values["recall"].tolist(), values["f1"].round(4).tolist()
    ([[0.5]], [[0.3333]])
    """
    tp, fp, fn = (np.asarray(x, np.int64) for x in (statistics.tp, statistics.fp, statistics.fn))
    longest = np.maximum(statistics.target_segments, statistics.predicted_segments)
    return {
        "accuracy": _ratio64(statistics.correct, statistics.frames, np.nan),
        "edit": 1.0 - _ratio64(statistics.edit_distance, longest, 0.0),
        "precision": _ratio64(tp, tp + fp, 0.0),
        "recall": _ratio64(tp, tp + fn, 0.0),
        "f1": _ratio64(2 * tp, 2 * tp + fp + fn, 0.0),
    }


def dataset_metrics(statistics, *, class_stats=None) -> dict:
    """:func:`segmentation_metrics` (and :func:`class_metrics`) of every video once, in
    float64 on the host from exact int64 totals: the point estimates that the intervals and
    comparisons report beside their float32 bootstrap replicates.

    Args:
      statistics: ``SegmentationStatistics`` of numpy or JAX arrays ``[N, ...]``.
      class_stats: optional :class:`ClassStatistics` ``[N, C]`` of the same videos.

    Returns:
      dict of numpy float64 with the keys and degenerate values of
      :func:`segmentation_metrics` (and :func:`class_metrics`).

    >>> s = SegmentationStatistics(
    ...     frames=np.array([6, 6]), correct=np.array([5, 5]), edit_distance=np.array([1, 1]),
    ...     target_segments=np.array([3, 3]), predicted_segments=np.array([2, 2]),
    ...     tp=np.array([[2], [2]]), fp=np.array([[0], [0]]), fn=np.array([[1], [1]]),
    ...     overflow=np.array([False, False]))
    >>> float(dataset_metrics(s)["accuracy"]) == 5 / 6
    True
    """
    total = lambda x: np.sum(np.asarray(x, np.int64), axis=0)  # noqa: E731
    frames = np.asarray(statistics.frames, np.int64)
    edit = video_metrics(statistics)["edit"]
    tp, fp, fn = total(statistics.tp), total(statistics.fp), total(statistics.fn)
    segmental_valid = not np.any(statistics.overflow)
    out = {
        "accuracy": _ratio64(total(statistics.correct), total(frames), np.nan),
        "edit": _ratio64(np.sum(edit[frames > 0]), np.sum(frames > 0), np.nan),
        "precision": _ratio64(tp, tp + fp, 0.0),
        "recall": _ratio64(tp, tp + fn, 0.0),
        "f1": _ratio64(2 * tp, 2 * tp + fp + fn, 0.0),
    }
    if not segmental_valid:
        out.update({k: np.full_like(out[k], np.nan) for k in ("edit", *SCORES)})
    if class_stats is not None:
        support, predicted = total(class_stats.support), total(class_stats.predicted)
        present = (support > 0) | (predicted > 0)
        accuracy = np.where(present, _ratio64(total(class_stats.correct), support, 0.0), np.nan)
        out["class_accuracy"] = accuracy
        out["mean_class_accuracy"] = _ratio64(np.nansum(accuracy), np.sum(present), np.nan)
    return out


def _around(lower, upper, point, ulps: int = 4):
    """float64 ``(lower, upper)`` trees, an endpoint moved onto the float64 ``point`` where it
    lies beyond it by at most ``ulps`` float32 ulps: the rounding of float32 replicates, not
    the resampling, put it there (every replicate of 5/6 is the float32 0.83333331)."""

    def slack(x):
        return ulps * np.spacing(np.abs(x).astype(np.float32)).astype(np.float64)

    def low(lo, x):
        lo, x = np.asarray(lo, np.float64), np.asarray(x, np.float64)
        return np.where((x < lo) & (lo - x <= slack(x)), x, lo)

    def high(hi, x):
        hi, x = np.asarray(hi, np.float64), np.asarray(x, np.float64)
        return np.where((x > hi) & (x - hi <= slack(x)), x, hi)

    return jax.tree_util.tree_map(low, lower, point), jax.tree_util.tree_map(high, upper, point)


def _all_metrics(stats, weights):
    segmentation, classes = stats
    out = segmentation_metrics(segmentation, weights)
    if classes is not None:
        out.update(class_metrics(classes, weights))
    return out


_bootstrap = jax.jit(
    bootstrap,
    static_argnums=(1,),
    static_argnames=("num_samples", "confidence", "method", "batch_size"),
)
_paired_bootstrap_test = jax.jit(
    paired_bootstrap_test,
    static_argnums=(2,),
    static_argnames=("num_samples", "confidence", "method", "alternative", "batch_size"),
)
_permutation_test = jax.jit(
    permutation_test,
    static_argnums=(2,),
    static_argnames=("num_samples", "alternative", "batch_size"),
)


def _on_device(statistics, classes):
    segmentation = jax.tree_util.tree_map(jnp.asarray, SegmentationStatistics(*statistics))
    if classes is None:
        return segmentation, None
    return segmentation, jax.tree_util.tree_map(jnp.asarray, ClassStatistics(*classes))


def _by_metric(iou_thresholds, leaf, *trees):
    """``{"accuracy": leaf(...), "f1": {tau: leaf(...)}, ...}`` as the Evaluator reports."""
    out = {}
    for name in trees[0]:
        values = [np.asarray(t[name]) for t in trees]
        if name in ("precision", "recall", "f1"):
            if values[0].shape != (len(iou_thresholds),):
                raise ValueError(
                    f"iou_thresholds must list the {values[0].shape[0]} thresholds of the "
                    f"statistics, got {tuple(iou_thresholds)}."
                )
            out[name] = {tau: leaf(*(v[i] for v in values)) for i, tau in enumerate(iou_thresholds)}
        elif name == "class_accuracy":
            out[name] = [leaf(*(v[c] for v in values)) for c in range(values[0].shape[0])]
        else:
            out[name] = leaf(*values)
    return out


@renamed_arguments(overlaps="iou_thresholds")
def segmentation_intervals(
    statistics,
    *,
    iou_thresholds=DEFAULT_IOU_THRESHOLDS,
    confidence: float = 0.95,
    num_samples: int = 10_000,
    method: str = "percentile",
    seed: int = 0,
    strata=None,
    class_stats=None,
) -> dict:
    """Bootstrap confidence intervals of every dataset metric the Evaluator reports (host side).

    Resamples videos (:func:`~jaxseg._src.stats.bootstrap`, jit-compiled) over
    :func:`segmentation_metrics` and, if given, :func:`class_metrics`.

    Args:
      statistics: ``SegmentationStatistics`` of numpy or JAX arrays ``[N, ...]``
        (``Evaluator.statistics()``).
      iou_thresholds: the thresholds of ``statistics.tp`` (keys of the ``"f1"`` etc. dicts).
      confidence: coverage level in (0, 1) (default 0.95).
      num_samples: number of bootstrap replicates (default 10,000).
      method: ``"percentile"`` (default) or ``"bca"``.
      seed: integer seed of ``jax.random.key`` (default 0): the same seed, the same intervals.
      strata: optional integer ``[N]`` group ids for stratified resampling.
      class_stats: optional :class:`ClassStatistics` ``[N, C]`` of the same videos.

    Returns:
      dict shaped like ``Evaluator.get()``'s metrics with ``(lower, upper)`` Python floats per
      value (the replicates are float32; an endpoint that their rounding alone puts beyond
      the float64 point estimate of :func:`dataset_metrics` is moved onto it, so an interval
      never excludes its own estimate for that reason): ``"accuracy"``, ``"edit"``,
      ``"precision"``/``"recall"``/``"f1"`` as ``{tau: (lower, upper)}``; with
      ``class_stats`` also ``"mean_class_accuracy"`` and ``"class_accuracy"`` (numpy float64
      ``[C, 2]``).

    >>> n = 6  # videos of 4 frames and 2 segments, each correctly matched
    >>> s = SegmentationStatistics(
    ...     frames=np.full(n, 4), correct=np.array([4, 3, 4, 2, 4, 3]),
    ...     edit_distance=np.zeros(n, int), target_segments=np.full(n, 2),
    ...     predicted_segments=np.full(n, 2), tp=np.full((n, 3), 2),
    ...     fp=np.zeros((n, 3), int), fn=np.zeros((n, 3), int), overflow=np.zeros(n, bool))
    >>> ci = segmentation_intervals(s, num_samples=1000)
    >>> ci["accuracy"][0] < 20 / 24 < ci["accuracy"][1], ci["f1"][0.5]
    (True, (1.0, 1.0))
    """
    stats = _on_device(statistics, class_stats)
    result = _bootstrap(
        stats,
        _all_metrics,
        key=jax.random.key(seed),
        num_samples=num_samples,
        confidence=confidence,
        method=method,
        strata=strata,
    )
    lower, upper = _around(
        result.lower, result.upper, dataset_metrics(statistics, class_stats=class_stats)
    )
    out = _by_metric(tuple(iou_thresholds), lambda lo, hi: (float(lo), float(hi)), lower, upper)
    if "class_accuracy" in out:
        out["class_accuracy"] = np.array(out["class_accuracy"], np.float64)
    return out


def _check_same_videos(a: SegmentationStatistics, b: SegmentationStatistics):
    frames_a, frames_b = np.asarray(a.frames), np.asarray(b.frames)
    if frames_a.shape != frames_b.shape:
        raise ValueError(
            "statistics_a and statistics_b must describe the same videos, got "
            f"{frames_a.shape[0] if frames_a.ndim else frames_a.shape} and "
            f"{frames_b.shape[0] if frames_b.ndim else frames_b.shape} videos."
        )
    differ = np.flatnonzero(frames_a != frames_b)
    if differ.size:
        i = int(differ[0])
        raise ValueError(
            "statistics_a and statistics_b must describe the same videos in the same order, but "
            f"video {i} has {int(frames_a[i])} frames in a and {int(frames_b[i])} in b."
        )


@renamed_arguments(overlaps="iou_thresholds")
def segmentation_comparison(
    statistics_a,
    statistics_b,
    *,
    iou_thresholds=DEFAULT_IOU_THRESHOLDS,
    confidence: float = 0.95,
    num_samples: int = 10_000,
    alternative: str = "two-sided",
    seed: int = 0,
    strata=None,
    class_stats_a=None,
    class_stats_b=None,
) -> dict:
    """Paired comparison of two models per reported metric (host side, for ``jaxseg compare``).

    For each metric: the paired bootstrap interval and p-value of ``a - b``
    (:func:`~jaxseg._src.stats.paired_bootstrap_test`) and the paired permutation p-value
    (:func:`~jaxseg._src.stats.permutation_test`), both with ``num_samples`` draws.

    Args:
      statistics_a: ``SegmentationStatistics`` ``[N, ...]`` of model A.
      statistics_b: the same for model B, on the same videos in the same order (checked:
        equal frame counts per video).
      iou_thresholds: the thresholds of the statistics.
      confidence: level of the interval in (0, 1) (default 0.95).
      num_samples: number of bootstrap replicates and of permutations (default 10,000).
      alternative: ``"two-sided"`` (default), ``"greater"`` (A better) or ``"less"``.
      seed: integer seed (default 0).
      strata: optional integer ``[N]`` group ids for stratified bootstrap resampling.
      class_stats_a: optional :class:`ClassStatistics` of model A (then also of B).
      class_stats_b: optional :class:`ClassStatistics` of model B.

    Returns:
      dict shaped like ``Evaluator.get()``'s metrics; each value is a dict of Python floats
      ``{"a", "b", "difference", "lower", "upper", "p_value", "permutation_p_value"}``
      (``class_accuracy``: numpy float64 ``[C, 7]`` in that column order). ``a``, ``b`` and
      ``difference`` are float64 from exact counts (:func:`dataset_metrics`); the interval
      comes from float32 replicates, widened as in :func:`segmentation_intervals` so that it
      never excludes ``difference`` by their rounding alone.

    >>> n = 6  # videos of 4 frames and 2 segments, each correctly matched
    >>> a = SegmentationStatistics(
    ...     frames=np.full(n, 4), correct=np.full(n, 4), edit_distance=np.zeros(n, int),
    ...     target_segments=np.full(n, 2), predicted_segments=np.full(n, 2),
    ...     tp=np.full((n, 3), 2), fp=np.zeros((n, 3), int), fn=np.zeros((n, 3), int),
    ...     overflow=np.zeros(n, bool))
    >>> b = a._replace(correct=np.full(n, 3))  # model B misses one frame per video
    >>> r = segmentation_comparison(a, b, num_samples=1000)["accuracy"]
    >>> r["difference"], r["permutation_p_value"] < 0.1  # exact p: 2 / 2^6
    (0.25, True)
    """
    if (class_stats_a is None) != (class_stats_b is None):
        raise ValueError("class_stats_a and class_stats_b must be given together.")
    _check_same_videos(statistics_a, statistics_b)
    values_a = dataset_metrics(statistics_a, class_stats=class_stats_a)
    values_b = dataset_metrics(statistics_b, class_stats=class_stats_b)
    difference = jax.tree_util.tree_map(np.subtract, values_a, values_b)
    paired, permuted = _paired_draws(
        _on_device(statistics_a, class_stats_a),
        _on_device(statistics_b, class_stats_b),
        seed=seed,
        num_samples=num_samples,
        confidence=confidence,
        alternative=alternative,
        strata=strata,
    )
    lower, upper = _around(paired.lower, paired.upper, difference)
    columns = (values_a, values_b, difference, lower, upper, paired.p_value, permuted.p_value)
    return _comparison_table(tuple(iou_thresholds), columns)


def _paired_draws(a, b, *, seed, num_samples, confidence, alternative, strata):
    """The paired bootstrap test and the permutation test of every metric of
    :func:`segmentation_comparison`, from one seed."""
    bootstrap_key, permutation_key = jax.random.split(jax.random.key(seed))
    paired = _paired_bootstrap_test(
        a,
        b,
        _all_metrics,
        key=bootstrap_key,
        num_samples=num_samples,
        confidence=confidence,
        alternative=alternative,
        strata=strata,
    )
    permuted = _permutation_test(
        a, b, _all_metrics, key=permutation_key, num_samples=num_samples, alternative=alternative
    )
    return paired, permuted


_COMPARISON_FIELDS = ("a", "b", "difference", "lower", "upper", "p_value", "permutation_p_value")


def _comparison_table(iou_thresholds: tuple, columns: tuple) -> dict:
    """:func:`segmentation_comparison`'s dict from its columns (each a metrics tree):
    a dict of Python floats per metric, a ``[C, 7]`` array for ``class_accuracy``."""

    def leaf(*values):
        return dict(zip(_COMPARISON_FIELDS, (float(v) for v in values), strict=True))

    out = _by_metric(iou_thresholds, leaf, *columns)
    if "class_accuracy" in out:
        out["class_accuracy"] = np.array(
            [[row[f] for f in _COMPARISON_FIELDS] for row in out["class_accuracy"]], np.float64
        )
    return out
