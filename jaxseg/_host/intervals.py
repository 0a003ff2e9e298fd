"""Dataset numbers on the host from per-video statistics: float64 point estimates from exact
integer totals, bootstrap intervals and paired comparisons per reported metric (the
Evaluator's and the command line's), over the jit-compiled kernels of
:mod:`jaxseg._src.stats` and :mod:`jaxseg._src.stats_segmentation`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxseg._src import checks
from jaxseg._src.deprecation import renamed_arguments
from jaxseg._src.numerics import safe_divide
from jaxseg._src.segmentation import DEFAULT_IOU_THRESHOLDS, SegmentationStatistics
from jaxseg._src.stats import bootstrap, paired_bootstrap_test, permutation_test, weighted_sum
from jaxseg._src.stats_segmentation import (
    ClassStatistics,
    class_metrics,
    segmentation_metrics,
)
from jaxseg._src.streaming_segmentation import SCORES


def _ratio64(numerator, denominator, fill):
    """float64 ``numerator / denominator`` of exact integer totals, ``fill`` where 0/0."""
    numerator = np.asarray(numerator, np.float64)
    denominator = np.asarray(denominator, np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, numerator / np.maximum(denominator, 1.0), fill)


def _scores64(tp, fp, fn) -> dict:
    """float64 ``precision``, ``recall`` and ``f1`` of exact integer counts, 0 where a
    denominator is 0 (MS-TCN's ``nan_to_num``; :func:`~jaxseg._src.numerics.precision_recall_f1`
    in float64)."""
    return {
        "precision": _ratio64(tp, tp + fp, 0.0),
        "recall": _ratio64(tp, tp + fn, 0.0),
        "f1": _ratio64(2 * tp, 2 * tp + fp + fn, 0.0),
    }


def _edit_scores(statistics) -> np.ndarray:
    """float64 ``[N]``: each video's edit score, 1 where it has no segment."""
    longest = np.maximum(statistics.target_segments, statistics.predicted_segments)
    return 1.0 - _ratio64(statistics.edit_distance, longest, 0.0)


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
    return {
        "accuracy": _ratio64(statistics.correct, statistics.frames, np.nan),
        "edit": _edit_scores(statistics),
        **_scores64(tp, fp, fn),
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
    edit = _edit_scores(statistics)
    tp, fp, fn = total(statistics.tp), total(statistics.fp), total(statistics.fn)
    segmental_valid = not np.any(statistics.overflow)
    out = {
        "accuracy": _ratio64(total(statistics.correct), total(frames), np.nan),
        "edit": _ratio64(np.sum(edit[frames > 0]), np.sum(frames > 0), np.nan),
        **_scores64(tp, fp, fn),
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


def _key(seed):
    """``jax.random.key(seed)`` of an integer seed in ``[0, 2**32)``, else an error naming
    ``seed``: JAX's own errors named no argument ("None is not a valid value for jnp.array"),
    and it keeps 32 bits (without x64, 2**32 + 5 drew as 5 and -1 as 2**32 - 1)."""
    if np.ndim(seed) != 0 or not np.issubdtype(np.asarray(seed).dtype, np.integer):
        raise TypeError(f"seed must be an integer, got {seed!r}.")
    if not 0 <= int(seed) < 2**32:
        raise ValueError(f"seed must lie in [0, 2**32), got {int(seed)}.")
    return jax.random.key(seed)


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

    Resamples videos (:func:`~jaxseg.stats.bootstrap`, jit-compiled) over
    :func:`segmentation_metrics` and, if given, :func:`class_metrics`.

    Args:
      statistics: ``SegmentationStatistics`` of numpy or JAX arrays ``[N, ...]``
        (``Evaluator.statistics()``).
      iou_thresholds: the thresholds of ``statistics.tp`` (keys of the ``"f1"`` etc. dicts).
      confidence: coverage level in (0, 1) (default 0.95).
      num_samples: number of bootstrap replicates (default 10,000).
      method: ``"percentile"`` (default) or ``"bca"``.
      seed: integer seed of ``jax.random.key`` in ``[0, 2**32)`` (default 0): the same seed,
        the same intervals.
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
    thresholds = checks.static_unit_floats("iou_thresholds", iou_thresholds)  # float keys
    stats = _on_device(statistics, class_stats)
    result = _bootstrap(
        stats,
        _all_metrics,
        key=_key(seed),
        num_samples=num_samples,
        confidence=confidence,
        method=method,
        strata=strata,
    )
    lower, upper = _around(
        result.lower, result.upper, dataset_metrics(statistics, class_stats=class_stats)
    )
    out = _by_metric(thresholds, lambda lo, hi: (float(lo), float(hi)), lower, upper)
    if "class_accuracy" in out:
        out["class_accuracy"] = np.array(out["class_accuracy"], np.float64)
    return out


def _kept_means(statistics, weights):
    """The mean of each column over its kept items, each item taken ``weights`` times."""
    values, kept = statistics
    return safe_divide(weighted_sum(values, weights), weighted_sum(kept, weights), jnp.nan)


def mean_intervals(
    values, kept, estimates, *, confidence: float, num_samples: int, seed: int
) -> np.ndarray:
    """Percentile-bootstrap intervals of per-item means (host side, for ``jaxseg grounding``,
    whose items are queries): column m is the mean over the items ``kept[:, m]`` marks.

    The columns that keep the same items form a group (QVHighlights' windows of one length
    range), whose items are resampled with replacement, as many as it has, so that every
    replicate of a subgroup's mean has as many items as the mean itself
    (:func:`~jaxseg.stats.bootstrap`'s ``strata``, one jit-compiled program).

    Args:
      values: float ``[N, M]`` per-item values (read only where kept).
      kept: bool ``[N, M]``: the items each column's mean takes.
      estimates: float ``[M]``: the means reported beside the intervals, onto which an
        endpoint is moved where the float32 rounding of the replicates alone puts it beyond.
      confidence: coverage level in (0, 1).
      num_samples: number of bootstrap replicates.
      seed: integer seed of ``jax.random.key`` in ``[0, 2**32)``.

    Returns:
      numpy float64 ``[M, 2]``: lower and upper ends; NaN where a column keeps fewer than
      two items (one item would give every replicate its value: an interval of no width).

    >>> values = np.array([[1.0, 0.2], [0.0, 0.5], [1.0, 0.0], [1.0, 0.9]])
    >>> kept = np.array([[True, True], [True, True], [True, False], [True, False]])
    >>> ci = mean_intervals(values, kept, np.array([0.75, 0.35]), confidence=0.9,
    ...                     num_samples=1000, seed=0)
    >>> ci.round(6).tolist()  # the second mean resamples items 0 and 1 only
    [[0.25, 1.0], [0.2, 0.5]]
    """
    kept = np.asarray(kept, bool)
    patterns, group = np.unique(kept.T, axis=0, return_inverse=True)  # [G, N], [M]
    resampled = [g for g, p in enumerate(patterns) if p.sum() >= 2]
    out = np.full((kept.shape[1], 2), np.nan)
    if not resampled:
        return out
    rows = [np.flatnonzero(patterns[g]) for g in resampled]
    member = np.concatenate(
        [np.broadcast_to(group == g, (r.size, group.size)) for g, r in zip(resampled, rows)]
    )
    values = np.asarray(values, np.float64)[np.concatenate(rows)]
    result = _bootstrap(
        (jnp.asarray(np.where(member, values, 0.0), jnp.float32), jnp.asarray(member)),
        _kept_means,
        key=_key(seed),
        num_samples=num_samples,
        confidence=confidence,
        method="percentile",
        strata=jnp.asarray(np.repeat(np.arange(len(rows)), [r.size for r in rows]), jnp.int32),
    )
    lower, upper = _around(result.lower, result.upper, np.asarray(estimates, np.float64))
    columns = np.isin(group, resampled)
    out[columns] = np.stack([lower, upper], axis=-1)[columns]
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
    (:func:`~jaxseg.stats.paired_bootstrap_test`) and the paired permutation p-value
    (:func:`~jaxseg.stats.permutation_test`), both with ``num_samples`` draws.

    Args:
      statistics_a: ``SegmentationStatistics`` ``[N, ...]`` of model A.
      statistics_b: the same for model B, on the same videos in the same order (checked:
        equal frame counts per video).
      iou_thresholds: the thresholds of the statistics.
      confidence: level of the interval in (0, 1) (default 0.95).
      num_samples: number of bootstrap replicates and of permutations (default 10,000).
      alternative: ``"two-sided"`` (default), ``"greater"`` (A better) or ``"less"``.
      seed: integer seed in ``[0, 2**32)`` (default 0).
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
    thresholds = checks.static_unit_floats("iou_thresholds", iou_thresholds)  # float keys
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
    return _comparison_table(thresholds, columns)


def _paired_draws(a, b, *, seed, num_samples, confidence, alternative, strata):
    """The paired bootstrap test and the permutation test of every metric of
    :func:`segmentation_comparison`, from one seed."""
    bootstrap_key, permutation_key = jax.random.split(_key(seed))
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
