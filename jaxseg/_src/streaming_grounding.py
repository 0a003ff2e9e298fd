"""Streaming accumulators for temporal grounding, highlights, moment queries and proposals.

Counts (hits, recalled targets, queries) are exact :class:`~jaxseg._src.counting.Count`\\ s.
Per-query real values (IoU, AP) are summed in fixed point, ``round(v * 2**24)`` per query, as
exact counts: the sum is then exact and identical however the queries are split or merged
(a float sum depends on the order), within ``2**-25`` per query of the float sum.
The proposal curve's budgets depend on dataset totals, so its state is a histogram of
(proposals of a video, first rank recalling a target) pairs, from which ``compute`` rebuilds
the whole curve exactly.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxseg._src import checks, counting
from jaxseg._src import grounding as grounding_metrics
from jaxseg._src.accumulator import Accumulator
from jaxseg._src.detection import ACTIVITYNET_THRESHOLDS
from jaxseg._src.numerics import FULL_PRECISION, nanmean
from jaxseg._src.proposals import (
    _dataset_inputs,
    budgets,
    curve_from_recalled,
    first_hits,
    static_at,
)
from jaxseg._src.streaming_segmentation import merge_states

_ONE = 1 << 24  # fixed-point unit of the per-query sums


def _ticks(values, valid):
    """Per-query values in [0, 1] as int32 multiples of 2**-24 (0 where not ``valid``)."""
    values = jnp.where(valid, jnp.clip(jnp.nan_to_num(values), 0.0, 1.0), 0.0)
    return jnp.round(values * _ONE).astype(jnp.int32)


def _mean(total: counting.Count, count: counting.Count) -> jax.Array:
    return counting.ratio(total, count) / _ONE


def _int32(count: counting.Count) -> jax.Array:
    """The count as int32 inside jit (precondition: below 2**31)."""
    return count.high * (1 << counting.LOW_BITS) + count.low


def _flat(x, core):
    return x.reshape(-1, *x.shape[x.ndim - core :]) if core else x.reshape(-1)


class GroundingState(NamedTuple):
    """Queries with a target, hits ``[T, K]``, and fixed-point sums of top-1 IoU and AP ``[T']``."""

    queries: counting.Count
    hits: counting.Count
    iou: counting.Count
    ap_queries: counting.Count
    ap: counting.Count


def grounding(
    *,
    k: tuple[int, ...] = (1, 5),
    iou_thresholds: tuple[float, ...] = grounding_metrics.NLQ_THRESHOLDS,
    comparison: str = "inclusive",
    map_thresholds: tuple[float, ...] = grounding_metrics.MR_THRESHOLDS,
    max_predictions: int | None = 10,
) -> Accumulator:
    """Accumulator of Recall@k at tIoU, mIoU and (with scores) Moment-DETR's MR-mAP.

    ``update(state, targets, predictions, scores=None, *, target_mask=None,
    prediction_mask=None)`` takes ``[..., G, 2]``, ``[..., P, 2]`` and ``[..., P]`` as
    :func:`grounding_recall` and :func:`moment_retrieval_average_precision`; ``compute``
    returns ``recall`` ``[T, K]``, ``miou``, ``map`` ``[T']`` (per threshold), ``map_mean``
    and ``queries`` (NaN statistics with no query).

    Args:
      k, iou_thresholds, comparison: static, as :func:`grounding_recall`.
      map_thresholds, max_predictions: static, as :func:`moment_retrieval_average_precision`.

    >>> acc = grounding(k=(1,), iou_thresholds=(0.5,))
    >>> state = acc.update(acc.init(), jnp.array([[[0.0, 10.0]]]), jnp.array([[[0.0, 6.0]]]))
    >>> result = acc.compute(state)
    >>> result["recall"].tolist(), float(result["miou"])
    ([[1.0]], 0.6000000238418579)
    """
    ks = checks.static_ints("k", k)
    thresholds = checks.static_unit_floats("iou_thresholds", iou_thresholds)
    comparison = checks.static_choice("comparison", comparison, grounding_metrics.COMPARISONS)
    map_thresholds = checks.static_unit_floats("map_thresholds", map_thresholds)
    shapes = ((), (len(thresholds), len(ks)), (), (), (len(map_thresholds),))

    def init():
        return GroundingState(*(counting.zeros(s) for s in shapes))

    def update(state, targets, predictions, scores=None, *, target_mask=None, prediction_mask=None):
        masks = dict(target_mask=target_mask, prediction_mask=prediction_mask)
        hits = grounding_metrics.grounding_recall(
            targets, predictions, k=ks, iou_thresholds=thresholds, comparison=comparison, **masks
        )
        hits = _flat(hits, 2)
        valid = ~jnp.isnan(hits[:, 0, 0])
        iou = _flat(grounding_metrics.grounding_iou(targets, predictions, **masks), 0)
        values = [valid, jnp.where(valid[:, None, None], hits, 0.0) > 0, _ticks(iou, valid)]
        if scores is None:
            ap_valid = jnp.zeros(valid.shape, bool)
            ap = jnp.zeros((*valid.shape, len(map_thresholds)), jnp.int32)
        else:
            ap = grounding_metrics.moment_retrieval_average_precision(
                targets,
                predictions,
                scores,
                iou_thresholds=map_thresholds,
                max_predictions=max_predictions,
                **masks,
            )
            ap = _flat(ap, 1)
            ap_valid = ~jnp.isnan(ap[:, 0])
            ap = _ticks(ap, ap_valid[:, None])
        return GroundingState(*counting.add_sums(state, [*values, ap_valid, ap]))

    def compute(state):
        queries = state.queries
        per_threshold = _mean(state.ap, state.ap_queries)
        return {
            "recall": counting.ratio(state.hits, queries),
            "miou": _mean(state.iou, queries),
            "map": per_threshold,
            "map_mean": nanmean(per_threshold),
            "queries": counting.to_integer(queries),
        }

    return Accumulator(init, update, merge_states, compute)


class HighlightState(NamedTuple):
    """Queries with a clip, and fixed-point sums of Hit@1 ``[S]`` and AP ``[S, A]``."""

    queries: counting.Count
    hit: counting.Count
    ap: counting.Count


def highlight(*, min_scores: tuple[int, ...] = (2, 3, 4), num_annotators: int = 3) -> Accumulator:
    """Accumulator of QVHighlights HL-mAP and HL-Hit@1 at each minimum score.

    ``update(state, targets, predictions, *, mask=None)`` takes ``[..., N, A]`` integer clip
    scores and ``[..., N]`` predicted saliency as :func:`highlight_average_precision`;
    ``compute`` returns ``hit_at_1`` ``[S]``, ``map`` ``[S]`` (mean over queries and
    annotators), ``ap`` ``[S, A]`` and ``queries``.

    Args:
      min_scores: static tuple of S minimum scores (2 Fair, 3 Good, 4 VeryGood; an int is
        accepted).
      num_annotators: static A (QVHighlights: 3).

    >>> acc = highlight(min_scores=(2,), num_annotators=1)
    >>> y, s = jnp.array([[[0], [3], [2], [0]]]), jnp.array([[0.9, 0.8, 0.3, 0.1]])
    >>> float(acc.compute(acc.update(acc.init(), y, s))["map"][0])
    0.6666666865348816
    """
    min_scores = checks.static_ints("min_scores", min_scores, minimum=0)
    num_annotators = checks.static_int("num_annotators", num_annotators, minimum=1)
    shapes = ((), (len(min_scores),), (len(min_scores), num_annotators))

    def init():
        return HighlightState(*(counting.zeros(s) for s in shapes))

    def update(state, targets, predictions, *, mask=None):
        annotators = jnp.shape(targets)[-1] if jnp.ndim(targets) else None
        if annotators != num_annotators:
            raise ValueError(
                f"targets must have shape [..., N, num_annotators] = [..., N, {num_annotators}], "
                f"got {jnp.shape(targets)}."
            )
        hits, aps = [], []
        for m in min_scores:
            hits.append(
                _flat(
                    grounding_metrics.highlight_hit_at_1(
                        targets, predictions, min_score=m, mask=mask
                    ),
                    0,
                )
            )
            aps.append(
                _flat(
                    grounding_metrics.highlight_average_precision(
                        targets, predictions, min_score=m, mask=mask
                    ),
                    1,
                )
            )
        hit, ap = jnp.stack(hits, -1), jnp.stack(aps, 1)  # [B, S], [B, S, A]
        valid = ~jnp.isnan(hit[:, 0])
        values = [valid, _ticks(hit, valid[:, None]), _ticks(ap, valid[:, None, None])]
        return HighlightState(*counting.add_sums(state, values))

    def compute(state):
        ap = _mean(state.ap, state.queries)
        return {
            "hit_at_1": _mean(state.hit, state.queries),
            "map": nanmean(ap),
            "ap": ap,
            "queries": counting.to_integer(state.queries),
        }

    return Accumulator(init, update, merge_states, compute)


class MomentQueryState(NamedTuple):
    """Recalled targets ``[T, R]`` and all valid targets, exact counts."""

    recalled: counting.Count
    targets: counting.Count


def moment_queries(
    *,
    ranks: tuple[int, ...] = (1, 2, 3, 4, 5),
    iou_thresholds: tuple[float, ...] = grounding_metrics.MQ_THRESHOLDS,
    comparison: str = "strict",
) -> Accumulator:
    """Accumulator of Ego4D moment queries Recall@k×n over (clip, class) queries.

    ``update(state, targets, predictions, *, target_mask=None, prediction_mask=None)`` as
    :func:`moment_query_recall`; ``compute`` returns ``recall`` ``[T, R]`` (recalled / all
    targets, NaN with none) and ``targets``.

    Args:
      ranks, iou_thresholds, comparison: static, as :func:`moment_query_recall`.

    >>> acc = moment_queries(ranks=(1,), iou_thresholds=(0.5,))
    >>> gt, pred = jnp.array([[[0.0, 10.0], [20.0, 30.0]]]), jnp.array([[[0.0, 9.0]]])
    >>> acc.compute(acc.update(acc.init(), gt, pred))["recall"].tolist()
    [[0.5]]
    """
    ks = checks.static_ints("ranks", ranks)
    thresholds = checks.static_unit_floats("iou_thresholds", iou_thresholds)
    comparison = checks.static_choice("comparison", comparison, grounding_metrics.COMPARISONS)

    def init():
        return MomentQueryState(counting.zeros((len(thresholds), len(ks))), counting.zeros())

    def update(state, targets, predictions, *, target_mask=None, prediction_mask=None):
        recalled = grounding_metrics.moment_query_recall(
            targets,
            predictions,
            ranks=ks,
            iou_thresholds=thresholds,
            comparison=comparison,
            target_mask=target_mask,
            prediction_mask=prediction_mask,
        )
        if target_mask is None:
            target_mask = jnp.ones(jnp.shape(targets)[:-1], bool)
        count = jnp.sum(jnp.asarray(target_mask), axis=-1, dtype=jnp.int32)
        values = [_flat(recalled, 2), _flat(count, 0)]
        return MomentQueryState(*counting.add_sums(state, values))

    def compute(state):
        return {
            "recall": counting.ratio(state.recalled, state.targets),
            "targets": counting.to_integer(state.targets),
        }

    return Accumulator(init, update, merge_states, compute)


class ProposalState(NamedTuple):
    """Histograms over the proposals n of a video (``[capacity + 1]``): videos with targets,
    and ``recalled [n, r, T]``: targets first recalled at rank r (r = capacity + 1: never);
    proposals of all videos; all targets."""

    videos: counting.Count
    first: counting.Count
    proposals: counting.Count
    targets: counting.Count


def proposals(
    *,
    capacity: int = 100,
    iou_thresholds: tuple[float, ...] = ACTIVITYNET_THRESHOLDS,
    max_average_proposals: int = 100,
    at: tuple[int, ...] = (1, 5, 10, 100),
) -> Accumulator:
    """Accumulator of ActivityNet's AR-AN curve (:func:`proposal_average_recall`), exact.

    ``update(state, targets, proposals, scores, *, target_mask=None, proposal_mask=None)``
    takes batches of videos ``[..., V, G, 2]``, ``[..., V, P, 2]``, ``[..., V, P]`` with
    ``P <= capacity``; ``compute`` returns the fields of :class:`ProposalCurve` as a dict plus
    ``videos`` and ``targets`` (the curve is NaN once ``max_average_proposals`` times the
    videos with targets exceeds int32). The budgets of the reference depend on dataset
    totals, so the state is a histogram ``[capacity + 1, capacity + 2, T]`` (a few MB for
    capacity 100).

    Args:
      capacity: static largest number of proposals of one video.
      iou_thresholds, max_average_proposals, at: static, as :func:`proposal_average_recall`.

    >>> acc = proposals(capacity=2, max_average_proposals=2, at=(1, 2))
    >>> gt = jnp.array([[[0.0, 10.0]], [[5.0, 8.0]]])
    >>> props = jnp.array([[[0.0, 9.0], [20.0, 30.0]], [[0.0, 1.0], [5.0, 8.0]]])
    >>> state = acc.update(acc.init(), gt, props, jnp.array([[0.9, 0.8], [0.7, 0.6]]))
    >>> acc.compute(state)["at"].tolist()
    [0.45000001788139343, 0.949999988079071]
    """
    capacity = checks.static_int("capacity", capacity, minimum=1)
    thresholds = checks.static_unit_floats("iou_thresholds", iou_thresholds)
    max_average = checks.static_int("max_average_proposals", max_average_proposals, minimum=1)
    at_index = static_at(at, max_average)
    num_t = len(thresholds)

    def init():
        return ProposalState(
            counting.zeros((capacity + 1,)),
            counting.zeros((capacity + 1, capacity + 2, num_t)),
            counting.zeros(),
            counting.zeros(),
        )

    def update(state, targets, proposals, scores, *, target_mask=None, proposal_mask=None):
        gt, props, gm, pm, scores = _dataset_inputs(
            targets, proposals, scores, target_mask, proposal_mask
        )
        if props.shape[-2] > capacity:
            raise ValueError(
                f"proposals hold {props.shape[-2]} per video, more than capacity={capacity}."
            )
        gt, gm, props, pm, scores = (
            _flat(x, c) for x, c in ((gt, 2), (gm, 1), (props, 2), (pm, 1), (scores, 1))
        )
        increments = _histograms(gt, gm, props, scores, pm, thresholds, capacity)
        return ProposalState(*(counting.add(c, x) for c, x in zip(state, increments, strict=True)))

    def compute(state):
        return _curve_from_histograms(state, capacity, max_average, at_index)

    return Accumulator(init, update, merge_states, compute)


def _histograms(gt, gm, props, scores, pm, thresholds, capacity):
    """One batch's increments of the :class:`ProposalState` fields."""
    num_t = len(thresholds)
    first = jax.vmap(first_hits, (0, 0, 0, 0, 0, None))(gt, gm, props, scores, pm, thresholds)
    first = jnp.where(first > props.shape[-2], capacity + 1, first)
    count = jnp.sum(pm, axis=-1, dtype=jnp.int32)
    has_targets = jnp.any(gm, axis=-1)
    videos = jnp.zeros(capacity + 1, jnp.int32).at[count].add(has_targets.astype(jnp.int32))
    lane = jnp.arange(num_t, dtype=jnp.int32)[None, None, :]
    index = (count[:, None, None] * (capacity + 2) + first) * num_t + lane
    weight = jnp.broadcast_to(gm[..., None], first.shape).astype(jnp.int32)
    hist = jnp.zeros((capacity + 1) * (capacity + 2) * num_t, jnp.int32).at[index].add(weight)
    hist = hist.reshape(capacity + 1, capacity + 2, num_t)
    return videos, hist, jnp.sum(count, dtype=jnp.int32), jnp.sum(gm, dtype=jnp.int32)


def _curve_from_histograms(state, capacity, max_average, at_index) -> dict:
    """The proposal curve (as a dict) from the histograms of a :class:`ProposalState`."""
    videos = _int32(state.videos)
    num_videos = jnp.sum(videos, dtype=jnp.int32)
    kept, total, steps, pcn = budgets(
        num_videos, _int32(state.proposals), videos, capacity, max_average
    )
    budget = steps[kept]  # [n, J]: proposals used at step j by a video with n proposals
    rank = jnp.arange(capacity + 2, dtype=jnp.int32)
    used = rank[None, :, None] <= budget[:, None, :]  # [n, r, J]
    first = counting.to_float(state.first)  # [n, r, T]
    recalled = jnp.einsum("nrt,nrj->tj", first, used.astype(first.dtype), precision=FULL_PRECISION)
    targets = _int32(state.targets)
    curve = curve_from_recalled(recalled, targets, num_videos, total, pcn, at_index, jnp.float32)
    # Past int32, the budgets' scale max_average * videos would wrap: NaN, not a wrong curve.
    in_range = num_videos <= np.iinfo(np.int32).max // max_average
    curve = jax.tree.map(lambda x: jnp.where(in_range, x, jnp.nan), curve)
    targets = counting.to_integer(state.targets)
    return {**curve._asdict(), "videos": num_videos, "targets": targets}
