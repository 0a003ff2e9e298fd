"""Streaming accumulators for the ranking, retrieval, detection and dense metrics.

Additive states (exact counts) for dense metrics, top-k and retrieval (a histogram of ranks).
AP-type metrics need every score: ``capacity=`` keeps them in a fixed-size buffer (exact;
beyond the capacity the results are NaN and ``overflow`` counts the entries that did not fit),
``num_thresholds=`` keeps per-bin counts (additive; the result is exactly the metric of the
scores rounded down to the grid ``j / num_thresholds``, a score of 1 falling in the top bin
with those from ``1 - 1 / num_thresholds``, ties in a bin entering together).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxseg._src import checks, counting
from jaxseg._src.accumulator import Accumulator
from jaxseg._src.dense import confusion_matrices
from jaxseg._src.deprecation import renamed_arguments
from jaxseg._src.detection import (
    ACTIVITYNET_THRESHOLDS,
    DATASET_NDIMS,
    MATCHINGS,
    OLD_DETECTION_NAMES,
    Matches,
    checked_detections,
    class_average_precision,
    match_detections,
)
from jaxseg._src.numerics import divide, nanmean, pairwise_sum, safe_divide
from jaxseg._src.ranking import (
    INTERPOLATIONS,
    ap_and_cap_rows,
    binary_targets,
    nanmean_classes,
    recall_reaches,
    scored_classes,
    suffix_max,
    top_k_hits,
    without_ambiguous,
)
from jaxseg._src.retrieval import TIES, doubled_ranks, reciprocal_rank_mean, retrieval_ranks
from jaxseg._src.streaming_segmentation import (
    class_scores,
    merge_states,
    pooled_accuracy,
)


def _total(values) -> jax.Array:
    """Sum of a non-negative int array over all axes, as a scalar int32 array."""
    return jnp.sum(jnp.asarray(values, jnp.int32), dtype=jnp.int32)


def _add(count: counting.Count, values, axis) -> counting.Count:
    return counting.add_sum(count, values, axis=axis)


def _one_of(capacity, num_thresholds):
    capacity = checks.static_int("capacity", capacity, minimum=1, allow_none=True)
    num_thresholds = checks.static_int("num_thresholds", num_thresholds, minimum=1, allow_none=True)
    if (capacity is None) == (num_thresholds is None):
        raise ValueError(
            f"give exactly one of capacity (exact buffer) and num_thresholds (binned), got "
            f"capacity={capacity!r}, num_thresholds={num_thresholds!r}."
        )
    return capacity, num_thresholds


# --------------------------------------------------------------------------------------------
# Dense segmentation
# --------------------------------------------------------------------------------------------
class DenseState(NamedTuple):
    """Pooled confusion matrix ``[C + 1, C + 1]`` (rows = targets; row / column C: labels
    outside [0, C)) as an exact count."""

    confusion: counting.Count


def dense(*, num_classes: int, ignore_index: int | None = None) -> Accumulator:
    """Accumulator of pooled pixel accuracy, IoU and Dice (mmsegmentation's ``IoUMetric``).

    ``update(state, targets, predictions, *, mask=None)`` takes label maps of any shape;
    ``compute`` returns ``pixel_accuracy``, ``iou`` ``[C]``, ``miou``, ``dice`` ``[C]``,
    ``mdice`` (absent classes NaN and excluded from the means), ``confusion`` ``[C, C]``
    and ``extended_confusion`` ``[C + 1, C + 1]`` (row / column C: labels outside [0, C)),
    as exact integer counts (int32, -1 past it; see ``jaxseg.streaming.segmentation``).

    Args:
      num_classes: static number of classes C. As mmsegmentation, a prediction outside
        [0, C) counts as a miss of its target pixel, and a target outside [0, C) (other than
        ``ignore_index``) drops its pixel from the accuracy but keeps its prediction's FP.
      ignore_index: static target value whose pixels are removed (e.g. 255 or -1; a value
        the labels' dtype cannot hold removes none), or None.

    >>> acc = dense(num_classes=2, ignore_index=255)
    >>> state = acc.update(acc.init(), jnp.array([[0, 1], [1, 255]]), jnp.array([[0, 1], [0, 0]]))
    >>> acc.compute(state)["iou"].tolist()
    [0.5, 0.5]
    """
    num_classes = checks.static_int("num_classes", num_classes, minimum=1)
    ignore_index = checks.static_ignore_index(ignore_index)

    def init():
        return DenseState(counting.zeros((num_classes + 1, num_classes + 1)))

    def update(state, targets, predictions, *, mask=None):
        targets = checks.as_int_labels("targets", targets)
        predictions = checks.as_int_labels("predictions", predictions)
        checks.same_shape("targets", targets, "predictions", predictions)
        valid = checks.without_ignored(targets, checks.as_valid(mask, targets.shape), ignore_index)
        matrix = confusion_matrices(targets, predictions, valid, num_classes, targets.ndim)
        return DenseState(_add(state.confusion, matrix, ()))

    def compute(state):
        scores = [class_scores(state.confusion, score)[:num_classes] for score in ("iou", "f1")]
        iou, dice_ = map(nanmean_classes, scores)  # Dice = F1
        return {
            "pixel_accuracy": pooled_accuracy(state.confusion, num_classes),
            "iou": iou.per_class,
            "miou": iou.mean,
            "dice": dice_.per_class,
            "mdice": dice_.mean,
            "confusion": counting.to_integer(state.confusion)[:num_classes, :num_classes],
            "extended_confusion": counting.to_integer(state.confusion),
        }

    return Accumulator(init, update, merge_states, compute)


# --------------------------------------------------------------------------------------------
# Top-k accuracy
# --------------------------------------------------------------------------------------------
class TopKState(NamedTuple):
    """Correct rows per k ``[K]`` and valid rows, as exact counts."""

    correct: counting.Count
    rows: counting.Count


def top_k(*, k: tuple[int, ...] = (1, 5)) -> Accumulator:
    """Accumulator of top-k accuracy over all rows seen (ties as :func:`top_k_accuracy`).

    ``update(state, targets, scores, *, mask=None)`` with targets ``[..., N]`` and scores
    ``[..., N, C]``; ``compute`` returns ``accuracy`` ``float32[K]`` (NaN with no row) and
    ``rows``.

    Args:
      k: static tuple of K values of k, as :func:`top_k_accuracy`.

    >>> acc = top_k(k=(1, 2))
    >>> state = acc.update(acc.init(), jnp.array([2, 0]), jnp.array([[.1, .5, .4], [.3, .3, .4]]))
    >>> acc.compute(state)["accuracy"].tolist()
    [0.0, 0.5]
    """
    ks = checks.static_ints("k", k)
    num_k = len(ks)

    def init():
        return TopKState(counting.zeros((num_k,)), counting.zeros())

    def update(state, targets, scores, *, mask=None):
        targets = checks.as_int_labels("targets", targets)
        valid = checks.as_valid(mask, targets.shape)
        scores = checks.as_float("scores", scores, min_ndim=1)
        if scores.shape[:-1] != targets.shape:
            raise ValueError(f"scores must have shape {targets.shape} + (C,), got {scores.shape}.")
        n = targets.size  # not -1: a reshape of no classes to (-1, 0) divides by 0
        correct = top_k_hits(
            targets.reshape(n), scores.reshape(n, scores.shape[-1]), valid.reshape(n), ks
        )
        rows = _total(valid)
        return TopKState(counting.add(state.correct, correct), counting.add(state.rows, rows))

    def compute(state):
        return {
            "accuracy": counting.ratio(state.correct, state.rows),
            "rows": counting.to_integer(state.rows),
        }

    return Accumulator(init, update, merge_states, compute)


# --------------------------------------------------------------------------------------------
# Retrieval
# --------------------------------------------------------------------------------------------
class RetrievalState(NamedTuple):
    """Histogram of twice the 0-based match ranks, ``[2 * num_items + 1]`` exact counts (the
    last slot: matches never retrieved, see :func:`retrieval_ranks`)."""

    rank_histogram: counting.Count


def retrieval(
    *, num_items: int, k: tuple[int, ...] = (1, 5, 10), ties: str = "pessimistic"
) -> Accumulator:
    """Accumulator of Recall@K, MRR, median and mean rank over all queries seen.

    The state is a histogram of ranks, so every statistic (the median too) is exact and the
    state is additive. ``update(state, similarity, *, targets=None, mask=None,
    item_mask=None)`` takes ``[..., Q, num_items]`` as :func:`retrieval_ranks`; ``compute``
    returns ``recall`` ``float32[K]``, ``mean_reciprocal_rank``, ``median_rank``,
    ``mean_rank`` (1-based) and ``queries`` (NaN statistics with no query).

    Args:
      num_items: static number of items I (last axis of the similarity).
      k: static tuple of positive ints.
      ties: static tie rule of :func:`retrieval_ranks`.

    >>> acc = retrieval(num_items=3, k=(1,))
    >>> sim = jnp.array([[0.9, 0.1, 0.5], [0.7, 0.2, 0.2], [0.3, 0.3, 0.3]])
    >>> result = acc.compute(acc.update(acc.init(), sim))
    >>> result["recall"].tolist(), float(result["median_rank"])
    ([0.3333333432674408], 3.0)
    """
    num_items = checks.static_int("num_items", num_items, minimum=1)
    ties = checks.static_choice("ties", ties, TIES)
    ks = checks.static_ints("k", k)
    size = 2 * num_items

    def init():
        return RetrievalState(counting.zeros((size + 1,)))

    def update(state, similarity, *, targets=None, mask=None, item_mask=None):
        similarity = jnp.asarray(similarity)
        if similarity.ndim < 2 or similarity.shape[-1] != num_items:
            raise ValueError(
                f"similarity must have shape [..., Q, {num_items}], got {similarity.shape}."
            )
        ranks = retrieval_ranks(similarity, targets=targets, item_mask=item_mask, ties=ties)
        valid = checks.as_valid(mask, ranks.shape)
        histogram = _count_cells(doubled_ranks(ranks, num_items), valid, (size + 1,))
        return RetrievalState(counting.add(state.rank_histogram, histogram))

    def compute(state):
        counts = counting.to_float(state.rank_histogram)
        rank = jnp.arange(size + 1, dtype=jnp.float32) / 2.0
        rank = rank.at[size].set(jnp.inf)
        queries = jnp.sum(counts)

        def mean(x):
            return safe_divide(
                pairwise_sum(jnp.where(counts > 0, counts * x, 0.0)), queries, jnp.nan
            )

        median = _median(state.rank_histogram, rank)
        # k past num_items takes every item; capped, so that a k past int32 is no OverflowError
        return {
            "recall": jnp.stack(
                [mean((rank < min(kk, num_items)).astype(jnp.float32)) for kk in ks]
            ),
            "mean_reciprocal_rank": reciprocal_rank_mean(counts),
            "mean_rank": mean(rank + 1.0),  # one rounding, as metrics.mean_rank
            "median_rank": jnp.where(queries > 0, median + 1.0, jnp.nan),
            "queries": counting.to_integer(counting.total(state.rank_histogram, 0)),
        }

    return Accumulator(init, update, merge_states, compute)


def _halved(count: counting.Count) -> counting.Count:
    """``floor(count / 2)``, exactly."""
    count = counting.normalize(count)
    low = ((count.high & 1) << (counting.LOW_BITS - 1)) + (count.low >> 1)
    return counting.Count(count.high >> 1, low)


def _median(histogram: counting.Count, rank: jax.Array) -> jax.Array:
    """The median of the ranks counted by ``histogram`` (``rank[i]`` counted
    ``histogram[i]`` times), found by exact counts: a float32 cumulative count is rounded
    past 2**24 and can pick the wrong rank."""
    cumulative = jax.lax.associative_scan(counting.merge, counting.normalize(histogram))
    queries = counting.total(histogram, 0)

    def middle(position: counting.Count):  # the rank at a 0-based position of the sorted ranks
        high, low = cumulative
        at_most = (high < position.high) | ((high == position.high) & (low <= position.low))
        index = jnp.sum(at_most, dtype=jnp.int32)  # searchsorted(..., side="right")
        return rank[jnp.minimum(index, rank.shape[0] - 1)]

    one = counting.add(counting.zeros(), 1)
    before = counting.subtract(queries, one)  # -1 for no query: compute gives NaN then
    return 0.5 * (middle(_halved(before)) + middle(_halved(queries)))


# --------------------------------------------------------------------------------------------
# Per-frame AP / cAP
# --------------------------------------------------------------------------------------------
class FrameBufferState(NamedTuple):
    """Exact mode: the valid frames seen so far, in a fixed-capacity buffer."""

    targets: jax.Array  # bool [capacity, C]
    scores: jax.Array  # float [capacity, C] (:func:`_score_zeros`)
    stored: jax.Array  # int32 scalar: filled rows (<= capacity)
    seen: counting.Count  # valid frames seen (may exceed capacity)


class FrameHistogramState(NamedTuple):
    """Binned mode: positive and negative frames per (class, score bin), and the frames with
    a score outside [0, 1] (no bin), exact counts."""

    positives: counting.Count  # [C, B]
    negatives: counting.Count  # [C, B]
    outside: counting.Count


def _score_zeros(shape) -> jax.Array:
    """A buffer of stored scores: float64 with ``jax_enable_x64``, so that scores apart only
    in float64 stay apart as in the batch metrics, float32 otherwise."""
    return jnp.zeros(shape, jax.dtypes.canonicalize_dtype(jnp.float64))


def _append(buffers, stored, rows, valid):
    """Writes the valid ``rows`` (tuple of ``[M, ...]``) after ``stored``; drops the excess."""
    capacity = buffers[0].shape[0]
    slot = stored + jnp.cumsum(valid.astype(jnp.int32)) - 1
    slot = jnp.where(valid & (slot < capacity), slot, capacity)
    out = tuple(b.at[slot].set(r, mode="drop") for b, r in zip(buffers, rows, strict=True))
    return out, jnp.minimum(stored + _total(valid), capacity)


def _merge_buffers(a: FrameBufferState, b: FrameBufferState) -> FrameBufferState:
    valid = jnp.arange(b.targets.shape[0], dtype=jnp.int32) < b.stored
    (targets, scores), stored = _append(
        (a.targets, a.scores), a.stored, (b.targets, b.scores), valid
    )
    return FrameBufferState(targets, scores, stored, counting.merge(a.seen, b.seen))


def _bin(scores, num_thresholds):
    """Bin ``floor(score * B)`` clipped to [0, B - 1]; higher bin = higher score."""
    return jnp.clip(jnp.floor(scores * num_thresholds), 0, num_thresholds - 1).astype(jnp.int32)


def _unbinnable(scores):
    """Scores that no bin holds: outside [0, 1], or NaN (logits given for probabilities)."""
    return ~((scores >= 0) & (scores <= 1))


def _count_cells(cells, selected, shape):
    """How many of the ``cells`` (flat indices into ``shape``) are ``selected``, int32 ``shape``."""
    size = math.prod(shape)
    index = jnp.where(selected, cells, size).reshape(-1)
    return jnp.zeros(size + 1, jnp.int32).at[index].add(1)[:size].reshape(shape)


def _binned_curves(positives, negatives):
    """TP/FP at each bin threshold (bins visited from the highest), float32 ``[..., B]``."""
    tp = jnp.cumsum(positives[..., ::-1], axis=-1)
    fp = jnp.cumsum(negatives[..., ::-1], axis=-1)
    return positives[..., ::-1], tp, fp


def _binned_ap(positives, negatives):
    gained, tp, fp = _binned_curves(positives, negatives)
    precision = safe_divide(tp, tp + fp, 0.0)
    return safe_divide(pairwise_sum(gained * precision), tp[..., -1], jnp.nan)


def _binned_cap(positives, negatives):
    gained, tp, fp = _binned_curves(positives, negatives)
    num_pos, num_neg = tp[..., -1:], fp[..., -1:]
    cprec = safe_divide(tp * num_neg, tp * num_neg + fp * num_pos, 1.0)
    return safe_divide(pairwise_sum(gained * cprec), num_pos[..., 0], jnp.nan)


def _frame_rows(targets, scores, mask, num_classes, ambiguous):
    """One update's frames as rows: multi-hot ``bool[M, C]``, scores ``float32[M, C]`` and
    ``valid`` ``bool[M]`` (in the mask, and no ``ambiguous`` class positive)."""
    # bool or integer only, as the batch metrics: soft float targets would all be positive
    targets = binary_targets("targets", targets)
    scores = checks.as_float("scores", scores, min_ndim=2)
    if scores.shape[-1] != num_classes or targets.shape != scores.shape:
        raise ValueError(
            f"targets and scores must both have shape [..., N, {num_classes}], got "
            f"{targets.shape} and {scores.shape}."
        )
    targets = targets.reshape(-1, num_classes)
    valid = checks.as_valid(mask, scores.shape[:-1]).reshape(-1)
    return targets, scores.reshape(-1, num_classes), without_ambiguous(valid, targets, ambiguous)


def _unstored(seen: counting.Count, stored) -> counting.Count:
    """The entries ``seen`` that a buffer holding ``stored`` (int32) could not keep."""
    return counting.subtract(seen, counting.add(counting.zeros(), stored))


def _frame_results(ap, cap, frames: counting.Count, overflow: counting.Count, scored):
    """The result dict: AP and cAP per class, NaN for the classes not ``scored`` (a static
    tuple of class indices) and everywhere when ``overflow`` (frames that did not fit) is
    positive, and their means over the classes where they are defined; the two counts as
    exact integers (:func:`counting.to_integer`)."""
    lost = counting.to_float(overflow) > 0
    is_scored = np.isin(np.arange(ap.shape[-1]), scored)

    def means(x):
        result = nanmean_classes(jnp.where(is_scored & ~lost, x, jnp.nan))
        return result.per_class, jnp.where(lost, jnp.nan, result.mean)

    ap, map_ = means(ap)
    cap, mcap = means(cap)
    return {
        "ap": ap,
        "map": map_,
        "cap": cap,
        "mcap": mcap,
        "frames": counting.to_integer(frames),
        "overflow": counting.to_integer(overflow),
    }


def _frame_buffer(num_classes, capacity, interpolation, scored):
    """Exact mode of :func:`frame_average_precision`: ``init``, ``add(state, *rows)``,
    ``merge`` and ``compute`` over a buffer of ``capacity`` frames."""

    def init():
        return FrameBufferState(
            jnp.zeros((capacity, num_classes), bool),
            _score_zeros((capacity, num_classes)),
            jnp.zeros((), jnp.int32),
            counting.zeros(),
        )

    def add(state, targets, scores, valid):
        (t, s), stored = _append(
            (state.targets, state.scores), state.stored, (targets, scores), valid
        )
        return FrameBufferState(t, s, stored, counting.add(state.seen, _total(valid)))

    def compute(state):
        stored = jnp.arange(capacity, dtype=jnp.int32)[:, None] < state.stored
        valid = jnp.broadcast_to(stored, (capacity, num_classes))
        rows = lambda: (state.targets, state.scores, valid)  # noqa: E731
        ap, cap = ap_and_cap_rows(rows, interpolation=interpolation)
        overflow = _unstored(state.seen, state.stored)
        return _frame_results(ap, cap, state.seen, overflow, scored)

    return init, add, _merge_buffers, compute


def _frame_histogram(num_classes, num_thresholds, scored):
    """Binned mode of :func:`frame_average_precision`: ``init``, ``add(state, *rows)``,
    ``merge`` and ``compute`` over positive and negative counts per (class, score bin)."""
    shape = (num_classes, num_thresholds)

    def init():
        zero = counting.zeros(shape)
        return FrameHistogramState(zero, zero, counting.zeros())

    def add(state, targets, scores, valid):
        column = jnp.arange(num_classes, dtype=jnp.int32)[None, :]
        cells = column * num_thresholds + _bin(scores, num_thresholds)
        outside = valid & jnp.any(_unbinnable(scores), axis=-1)
        valid = (valid & ~outside)[:, None]
        return FrameHistogramState(
            counting.add(state.positives, _count_cells(cells, targets & valid, shape)),
            counting.add(state.negatives, _count_cells(cells, ~targets & valid, shape)),
            counting.add(state.outside, _total(outside)),
        )

    def compute(state):
        pos, neg = counting.to_float(state.positives), counting.to_float(state.negatives)
        # every binned frame counts once per class: class 0's positives + negatives
        first = jax.tree.map(lambda x: x[0], counting.merge(state.positives, state.negatives))
        binned = counting.total(first, axis=0)
        frames = counting.merge(binned, state.outside)
        ap, cap = _binned_ap(pos, neg), _binned_cap(pos, neg)
        return _frame_results(ap, cap, frames, state.outside, scored)

    return init, add, merge_states, compute


def frame_average_precision(
    *,
    num_classes: int,
    background: tuple[int, ...] = (),
    ambiguous: tuple[int, ...] = (),
    capacity: int | None = None,
    num_thresholds: int | None = None,
    interpolation: str = "step",
) -> Accumulator:
    """Accumulator of per-frame AP and cAP per class over all frames seen (LSTR-style).

    ``update(state, targets, scores, *, mask=None)`` takes multi-hot targets and scores
    ``[..., N, C]``; frames with a positive ``ambiguous`` column are dropped at once.
    ``compute`` returns ``ap`` / ``cap`` ``float32[C]`` (NaN for background, ambiguous and
    classes without positives), their means ``map`` / ``mcap``, ``frames`` and ``overflow``.

    Args:
      num_classes: static number of classes C.
      background: static tuple of classes not scored.
      ambiguous: static tuple of classes whose positive frames are removed.
      capacity: static buffer size in frames (exact mode). Beyond it every result is NaN and
        ``overflow`` counts the frames that did not fit. ``merge`` concatenates buffers (not
        ``jax.lax.psum``: gather the states across devices and merge them): with
        ``"all_point"`` or ``"11point"``, tied scores rank in arrival order, as in the batch
        metric, so merge and update in data order (``"step"`` takes ties together).
      num_thresholds: static number of score bins (binned mode, scores in [0, 1]): AP and
        cAP are exactly those of the scores rounded down to multiples of
        ``1 / num_thresholds``, a score of 1 to ``1 - 1 / num_thresholds`` (the top bin);
        ``merge`` adds and ``jax.lax.psum`` works. AP changes only where a bin holds a
        positive and a negative of different scores. A frame with a
        score outside [0, 1] or NaN (logits) has no bin: ``overflow`` counts it, and every
        result is NaN.
      interpolation: static AP interpolation; the binned mode takes only ``"step"`` (another
        raises ``ValueError``).

    >>> acc = frame_average_precision(num_classes=1, capacity=8)
    >>> state = acc.update(acc.init(), jnp.array([[1], [0], [1]]), jnp.array([[.9], [.8], [.7]]))
    >>> round(float(acc.compute(state)["map"]), 4)
    0.8333
    """
    num_classes = checks.static_int("num_classes", num_classes, minimum=1)
    capacity, num_thresholds = _one_of(capacity, num_thresholds)
    interpolation = checks.static_choice("interpolation", interpolation, INTERPOLATIONS)
    if capacity is None and interpolation != "step":
        raise ValueError(
            f"interpolation={interpolation!r} needs the exact mode (capacity=): the binned mode "
            f"(num_thresholds={num_thresholds}) computes the step AP, interpolation='step'."
        )
    _, ambiguous, scored = scored_classes(num_classes, background, ambiguous)
    if capacity is None:
        init, add, merge, compute = _frame_histogram(num_classes, num_thresholds, scored)
    else:
        init, add, merge, compute = _frame_buffer(num_classes, capacity, interpolation, scored)

    def update(state, targets, scores, *, mask=None):
        return add(state, *_frame_rows(targets, scores, mask, num_classes, ambiguous))

    return Accumulator(init, update, merge, compute)


# --------------------------------------------------------------------------------------------
# Detection
# --------------------------------------------------------------------------------------------
class DetectionBufferState(NamedTuple):
    """Exact mode: matched predictions (label, score, TP per threshold) and GT counts."""

    labels: jax.Array  # int32 [capacity]; num_classes = empty
    scores: jax.Array  # float [capacity] (:func:`_score_zeros`)
    true_positive: jax.Array  # bool [capacity, K]
    stored: jax.Array  # int32 scalar
    seen: counting.Count  # valid predictions seen
    num_positives: counting.Count  # [C]


class DetectionHistogramState(NamedTuple):
    """Binned mode: TP and FP per (class, threshold, score bin), GT counts per class, and the
    predictions with a score outside [0, 1] (no bin)."""

    true_positives: counting.Count  # [C, K, B]
    false_positives: counting.Count  # [C, K, B]
    num_positives: counting.Count  # [C]
    outside: counting.Count


def _binned_detection_ap(tp_hist, fp_hist, npos, interpolation):
    """All-point / 11-point AP with the predictions of each bin entering together."""
    _, tp, fp = _binned_curves(tp_hist, fp_hist)  # [C, K, B]
    npos = npos[:, None, None]
    has_points = (tp + fp) > 0
    precision = jnp.where(has_points, safe_divide(tp, tp + fp, 0.0), 0.0)
    envelope = suffix_max(precision)
    recall = safe_divide(tp, npos, 0.0)
    if interpolation == "all_point":
        gained = jnp.diff(recall, axis=-1, prepend=jnp.zeros_like(recall[..., :1]))
        ap = pairwise_sum(gained * envelope)
    else:
        values = []
        for tenth in range(11):
            reached = has_points & recall_reaches(tp, npos, tenth)
            values.append(jnp.max(jnp.where(reached, envelope, 0.0), axis=-1))
        total = sum(values[1:], values[0])
        ap = divide(total, jnp.asarray(11, total.dtype))
    return jnp.where(npos[..., 0] > 0, ap, jnp.nan)


def _videos_first(tables):
    """The detection tables with all their leading axes taken as one axis of videos."""
    return [x.reshape(-1, *x.shape[x.ndim - n + 1 :]) for x, n in zip(tables, DATASET_NDIMS)]


def _append_matches(state, rows, valid, seen, num_positives) -> DetectionBufferState:
    """``state`` with the valid ``rows`` (labels, scores, TP) after its stored ones, and the
    counts ``seen`` and ``num_positives``."""
    buffers = (state.labels, state.scores, state.true_positive)
    (labels, scores, true_positive), stored = _append(buffers, state.stored, rows, valid)
    return DetectionBufferState(labels, scores, true_positive, stored, seen, num_positives)


def _detection_buffer(num_classes, num_k, capacity, interpolation):
    """Exact mode of :func:`detection`: ``init``, ``add(state, matches)``, ``merge`` and
    ``compute`` over a buffer of ``capacity`` matched predictions."""

    def init():
        return DetectionBufferState(
            jnp.full((capacity,), num_classes, jnp.int32),
            _score_zeros((capacity,)),
            jnp.zeros((capacity, num_k), bool),
            jnp.zeros((), jnp.int32),
            counting.zeros(),
            counting.zeros((num_classes,)),
        )

    def add(state, matches: Matches):
        valid = matches.label < num_classes
        seen = counting.add(state.seen, _total(valid))
        num_positives = counting.add(state.num_positives, matches.num_positives)
        return _append_matches(state, matches[:3], valid, seen, num_positives)

    def merge(a, b):
        seen = counting.merge(a.seen, b.seen)
        num_positives = counting.merge(a.num_positives, b.num_positives)
        rows = (b.labels, b.scores, b.true_positive)
        return _append_matches(
            a, rows, jnp.arange(capacity, dtype=jnp.int32) < b.stored, seen, num_positives
        )

    def compute(state):
        npos = jnp.round(counting.to_float(state.num_positives)).astype(jnp.int32)
        matches = Matches(state.labels, state.scores, state.true_positive, npos)
        ap = class_average_precision(matches, num_classes=num_classes, interpolation=interpolation)
        overflow = _unstored(state.seen, state.stored)
        lost = counting.to_float(overflow) > 0
        ap = jnp.where(lost, jnp.nan, ap)
        return {
            "ap": ap,
            "map": jnp.where(lost, jnp.nan, nanmean(ap.T)),
            "predictions": counting.to_integer(state.seen),
            "overflow": counting.to_integer(overflow),
        }

    return init, add, merge, compute


def _detection_histogram(num_classes, num_k, num_thresholds, interpolation):
    """Binned mode of :func:`detection`: ``init``, ``add(state, matches)``, ``merge`` and
    ``compute`` over TP and FP counts per (class, threshold, score bin)."""
    shape = (num_classes, num_k, num_thresholds)

    def init():
        zero = counting.zeros(shape)
        return DetectionHistogramState(zero, zero, counting.zeros((num_classes,)), counting.zeros())

    def add(state, matches: Matches):
        threshold = jnp.arange(num_k, dtype=jnp.int32)[None, :]
        row = matches.label[:, None] * num_k + threshold
        cells = row * num_thresholds + _bin(matches.score, num_thresholds)[:, None]
        predicted = matches.label < num_classes
        outside = predicted & _unbinnable(matches.score)
        valid = (predicted & ~outside)[:, None]
        tp = matches.true_positive
        return DetectionHistogramState(
            counting.add(state.true_positives, _count_cells(cells, tp & valid, shape)),
            counting.add(state.false_positives, _count_cells(cells, ~tp & valid, shape)),
            counting.add(state.num_positives, matches.num_positives),
            counting.add(state.outside, _total(outside)),
        )

    def compute(state):
        tp, fp = counting.to_float(state.true_positives), counting.to_float(state.false_positives)
        npos = counting.to_float(state.num_positives)
        lost = counting.to_float(state.outside) > 0
        ap = jnp.where(lost, jnp.nan, _binned_detection_ap(tp, fp, npos, interpolation))
        # every prediction counts once per threshold: the first threshold's TP + FP
        first = jax.tree.map(
            lambda x: x[:, 0], counting.merge(state.true_positives, state.false_positives)
        )
        binned = counting.total(counting.total(first, axis=1), axis=0)
        return {
            "ap": ap,
            "map": jnp.where(lost, jnp.nan, nanmean(ap.T)),
            "predictions": counting.to_integer(counting.merge(binned, state.outside)),
            "overflow": counting.to_integer(state.outside),
        }

    return init, add, merge_states, compute


def detection(
    *,
    num_classes: int,
    iou_thresholds: tuple[float, ...] = ACTIVITYNET_THRESHOLDS,
    capacity: int | None = None,
    num_thresholds: int | None = None,
    interpolation: str = "all_point",
    matching: str = "activitynet",
) -> Accumulator:
    """Accumulator of detection AP per class and mAP (ActivityNet or VOC) over many batches.

    Matching happens inside each video, so each ``update(state, target_boxes, target_labels,
    predicted_boxes, predicted_labels, scores, *, target_mask=None, prediction_mask=None)``
    (``[V, ...]`` tables as :func:`detection_average_precision`, whose old keyword names
    still work and warn) matches its videos at once and keeps only (label, score, TP per
    threshold) of each prediction. ``compute`` returns ``ap``
    ``float32[C, K]``, ``map`` ``[K]``, ``predictions`` and ``overflow``.

    Args:
      num_classes: static number of classes C.
      iou_thresholds: static tuple of K IoU thresholds.
      capacity: static number of predictions kept (exact mode); beyond it the results are
        NaN and ``overflow`` counts the predictions that did not fit. Tied scores rank in
        the order the predictions arrived, as in the batch metric (the reference's stable
        sort): ``merge(a, b)`` keeps ``a``'s first, so merge and update in data order; it
        concatenates buffers (not ``jax.lax.psum``: gather the states and merge them).
      num_thresholds: static number of score bins for scores in [0, 1] (binned mode, exactly
        the AP of scores rounded down to multiples of ``1 / num_thresholds``, a score of 1
        to ``1 - 1 / num_thresholds`` (the top bin), the predictions of a bin entering
        together). A prediction with a score outside [0, 1] or
        NaN has no bin: ``overflow`` counts it, and every result is NaN.
      interpolation: static ``"all_point"`` or ``"11point"``.
      matching: static ``"activitynet"`` or ``"voc"``.

    >>> acc = detection(num_classes=1, iou_thresholds=(0.5,), capacity=16)
    >>> state = acc.update(acc.init(), jnp.array([[[0.0, 10.0]]]), jnp.array([[0]]),
    ...                    jnp.array([[[0.0, 9.0], [1.0, 10.0]]]), jnp.array([[0, 0]]),
    ...                    jnp.array([[0.9, 0.8]]))
    >>> acc.compute(state)["ap"].tolist()
    [[1.0]]
    """
    num_classes = checks.static_int("num_classes", num_classes, minimum=1)
    thresholds = checks.static_unit_floats("iou_thresholds", iou_thresholds)
    capacity, num_thresholds = _one_of(capacity, num_thresholds)
    interpolation = checks.static_choice("interpolation", interpolation, ("all_point", "11point"))
    matching = checks.static_choice("matching", matching, MATCHINGS)
    num_k = len(thresholds)
    if capacity is None:
        init, add, merge, compute = _detection_histogram(
            num_classes, num_k, num_thresholds, interpolation
        )
    else:
        init, add, merge, compute = _detection_buffer(num_classes, num_k, capacity, interpolation)

    @renamed_arguments(**OLD_DETECTION_NAMES)
    def update(
        state,
        target_boxes,
        target_labels,
        predicted_boxes,
        predicted_labels,
        scores,
        *,
        target_mask=None,
        prediction_mask=None,
    ):
        tables = checked_detections(
            (target_boxes, target_labels),
            (predicted_boxes, predicted_labels, scores),
            (target_mask, prediction_mask),
        )
        matches = match_detections(
            *_videos_first(tables),
            num_classes=num_classes,
            thresholds=thresholds,
            matching=matching,
        )
        return add(state, matches)

    return Accumulator(init, update, merge, compute)
