"""Temporal grounding / moment retrieval: Recall@k at tIoU, mIoU, MR-mAP, highlight AP and Hit@1.

Everything is written for one query (ground-truth windows ``[G, 2]``, a ranked list of predicted
windows ``[P, 2]``) and lifted over leading dims; the greedy matching of MR-mAP is one
``lax.scan`` over the (at most ``max_predictions``) predictions, vectorised over thresholds.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from jaxseg._src import batching, checks
from jaxseg._src.numerics import count_ratio, safe_divide
from jaxseg._src.programs import one_program
from jaxseg._src.ranking import descending_keys, key_order

COMPARISONS = ("strict", "inclusive")
NLQ_THRESHOLDS = (0.3, 0.5)
MQ_THRESHOLDS = (0.3, 0.5, 0.7)
# Moment-DETR rounds np.linspace(0.5, 0.95, 10) to 2 decimals: its 0.9 is not linspace's
# 0.8999999999999999, which a float64 IoU between the two would pass.
MR_THRESHOLDS = (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)


def fraction_sum(values, axis=-1):
    """Sum of values in [0, 1] along ``axis``, the same bits whatever the batch shape.

    XLA may add a float row in a different order for another batch shape (an ulp apart),
    which would make streaming sums depend on the batching. In float32 each value is rounded
    to a multiple of 2**-24 and the multiples are added as two exact int32 sums (high and low
    12 bits; rows up to 2**19 values); float64 (``jax_enable_x64``) is summed as floats.
    """
    if values.dtype != jnp.float32:
        return jnp.sum(values, axis=axis)
    ticks = jnp.round(values * (1 << 24)).astype(jnp.int32)
    high = jnp.sum(ticks >> 12, axis=axis, dtype=jnp.int32).astype(jnp.float32)
    low = jnp.sum(ticks & 0xFFF, axis=axis, dtype=jnp.int32).astype(jnp.float32)
    return (high * (1 << 12) + low) / (1 << 24)


def running_max(x, *, reverse=False):
    """Running maximum along the last axis (from the end with ``reverse``) by log-step
    doubling: ``ceil(log2 N)`` shifted maxima, no loop carry (so it runs unchanged inside
    ``shard_map``), for the short rows here (predictions, clips)."""
    n, shift = x.shape[-1], 1
    low = jnp.full(
        (*x.shape[:-1], 1),
        -jnp.inf if jnp.issubdtype(x.dtype, jnp.floating) else jnp.iinfo(x.dtype).min,
        x.dtype,
    )
    while shift < n:
        pad = jnp.repeat(low, shift, axis=-1)
        if reverse:
            moved = jnp.concatenate([x[..., shift:], pad], axis=-1)
        else:
            moved = jnp.concatenate([pad, x[..., :-shift]], axis=-1)
        x = jnp.maximum(x, moved)
        shift *= 2
    return x


def hull_iou(a, b):
    """``[N, 2]`` x ``[M, 2]`` -> ``[N, M]``: intersection over the hull ``max(e) - min(s)``.

    Equal to the true IoU whenever the windows overlap (both are 0 otherwise); 0 when the hull
    is empty. Ego4D NLQ's ``compute_IoU`` and Moment-DETR's ``compute_temporal_iou_batch_paired``.
    """
    a0, a1 = a[:, None, 0], a[:, None, 1]
    b0, b1 = b[None, :, 0], b[None, :, 1]
    inter = jnp.maximum(jnp.minimum(a1, b1) - jnp.maximum(a0, b0), 0.0)
    hull = jnp.maximum(a1, b1) - jnp.minimum(a0, b0)
    return safe_divide(inter, jnp.maximum(hull, 0.0))


def union_iou(a, b):
    """``[N, 2]`` x ``[M, 2]`` -> ``[N, M]``: intersection over ``|a| + |b| - inter`` (0 if 0)."""
    a0, a1 = a[:, None, 0], a[:, None, 1]
    b0, b1 = b[None, :, 0], b[None, :, 1]
    inter = jnp.maximum(jnp.minimum(a1, b1) - jnp.maximum(a0, b0), 0.0)
    return safe_divide(inter, (a1 - a0) + (b1 - b0) - inter)


def reaches(iou, thresholds, comparison):
    """``iou[..., None] > t`` (strict) or ``>= t`` (inclusive), thresholds on the last axis."""
    t = jnp.asarray(thresholds, iou.dtype).reshape((1,) * iou.ndim + (-1,))
    return iou[..., None] > t if comparison == "strict" else iou[..., None] >= t


def _windows(name, value, min_ndim):
    value = checks.as_float(name, value, min_ndim=min_ndim)
    if value.shape[-1] != 2:
        raise ValueError(f"{name} must have shape [..., N, 2] (start, end), got {value.shape}.")
    return value


def query_inputs(
    targets, predictions, target_mask, prediction_mask, scores=None, *, name="predictions"
):
    """Validates one query's windows (``[..., G, 2]``, ``[..., P, 2]``) and masks; ``name``
    is how errors call the predictions (``"proposals"``: masks ``proposal_mask``)."""
    mask_name = "prediction_mask" if name == "predictions" else name[:-1] + "_mask"
    targets = _windows("targets", targets, 2)
    predictions = _windows(name, predictions, 2)
    if targets.shape[:-2] != predictions.shape[:-2]:
        raise ValueError(
            f"targets [..., G, 2] and {name} [..., P, 2] must share [...], got "
            f"{targets.shape} and {predictions.shape}."
        )
    target_mask = checks.as_mask(target_mask, targets.shape[:-1], "target_mask")
    prediction_mask = checks.as_mask(prediction_mask, predictions.shape[:-1], mask_name)
    if target_mask is None:
        target_mask = jnp.ones(targets.shape[:-1], bool)
    if prediction_mask is None:
        prediction_mask = jnp.ones(predictions.shape[:-1], bool)
    target_mask, targets = checks.with_an_entry(target_mask, targets)
    if scores is None:
        prediction_mask, predictions = checks.with_an_entry(prediction_mask, predictions)
        return targets, predictions, target_mask, prediction_mask, None
    scores = checks.as_float("scores", scores, min_ndim=1)
    if scores.shape != predictions.shape[:-1]:
        raise ValueError(f"scores must have shape {predictions.shape[:-1]}, got {scores.shape}.")
    prediction_mask, predictions, scores = checks.with_an_entry(
        prediction_mask, predictions, scores
    )
    return targets, predictions, target_mask, prediction_mask, scores


def _best_iou(gt, gm, pred):
    """``[P]``: hull IoU of each prediction with the valid target of highest true IoU (the first
    on ties; Moment-DETR's ``compute_mr_r1``), 0 without a target."""
    best = jnp.argmax(jnp.where(gm[None, :], union_iou(pred, gt), -1.0), axis=-1)
    iou = jnp.take_along_axis(hull_iou(pred, gt), best[:, None], axis=-1)[:, 0]
    return jnp.where(jnp.any(gm), iou, 0.0)


@one_program
def grounding_recall(
    targets: jax.typing.ArrayLike,
    predictions: jax.typing.ArrayLike,
    *,
    k: tuple[int, ...] = (1, 5),
    iou_thresholds: tuple[float, ...] = NLQ_THRESHOLDS,
    comparison: str = "inclusive",
    target_mask: jax.typing.ArrayLike | None = None,
    prediction_mask: jax.typing.ArrayLike | None = None,
) -> jax.Array:
    r"""Recall@k at tIoU of one grounding query: is one of its first k predictions a hit?

    :math:`R@k,t = [\exists\, i \le k: \mathrm{IoU}(p_i, g^*_i) \succ t]` with
    :math:`\succ` ``>`` (``comparison="strict"``, Ego4D NLQ) or ``>=`` (``"inclusive"``,
    Moment-DETR MR-R1, ActionFormer); IoU = intersection / hull ``max(e) - min(s)`` (the true
    IoU where the windows overlap). Predictions count in list (rank) order, masked ones
    removed; fewer than k predictions means all of them; :math:`g^*_i` is the target of
    highest true IoU with :math:`p_i`. The dataset value is the mean over
    queries (``jnp.nanmean``, or :func:`jaxseg.streaming.grounding`).

    Args:
      targets: float ``[..., G, 2]`` ground-truth windows (start, end), seconds or frames.
      predictions: float ``[..., P, 2]`` predicted windows in rank order.
      k: static tuple of positive ints K (an int is accepted); default (1, 5).
      iou_thresholds: static tuple of T thresholds in (0, 1]; default (0.3, 0.5).
      comparison: static ``"inclusive"`` (``IoU >= t``, default) or ``"strict"`` (``IoU > t``).
      target_mask: optional ``bool[..., G]``, True = real window.
      prediction_mask: optional ``bool[..., P]``, True = real prediction.

    Returns:
      ``float32[..., T, K]`` (float64 for float64 windows under x64), 1.0 (hit) or 0.0; NaN
      for a query without a valid target (a padding query).

    >>> gt = jnp.array([[0.0, 10.0]])
    >>> pred = jnp.array([[0.0, 5.0], [0.0, 9.0]])
    >>> grounding_recall(gt, pred, k=(1, 2), iou_thresholds=(0.5,), comparison="strict").tolist()
    [[0.0, 1.0]]
    >>> grounding_recall(gt, pred, k=(1, 2), iou_thresholds=(0.5,)).tolist()
    [[1.0, 1.0]]

    References:
      Grauman et al., "Ego4D", CVPR 2022 (``NLQ/VSLNet/utils/evaluate_ego4d_nlq.py``,
      ``evaluate_nlq_performance``); Lei et al., "QVHighlights / Moment-DETR", NeurIPS 2021
      (``standalone_eval/eval.py``, ``compute_mr_r1``: R1@t is ``k=(1,)``, inclusive).

    Notes: with several targets, each prediction is compared with the target of highest true
    IoU (the first on ties), the IoU then recomputed over the hull, as Moment-DETR's MR-R1 does
    (Ego4D NLQ has one target per query). IoUs follow the input dtype: in float32 a tIoU near a
    threshold (float32 times move it by up to about ``6e-8 * time / length``) may be decided
    differently from the float64 references; with ``jax_enable_x64`` and float64 windows the
    decisions are theirs. A 0-length hull gives IoU 0 (Ego4D: NaN, never a hit).
    """
    ks = checks.static_ints("k", k)
    thresholds = checks.static_unit_floats("iou_thresholds", iou_thresholds)
    comparison = checks.static_choice("comparison", comparison, COMPARISONS)
    gt, pred, gm, pm, _ = query_inputs(targets, predictions, target_mask, prediction_mask)

    # k past P takes every prediction; capped, so that a k past int32 is no OverflowError
    cutoffs = jnp.asarray([min(k, pred.shape[-2]) for k in ks], jnp.int32)

    def one(gt, gm, pred, pm):
        rank = jnp.cumsum(pm.astype(jnp.int32))
        within = pm[None, :] & (rank[None, :] <= cutoffs[:, None])  # [K, P]
        hit = reaches(_best_iou(gt, gm, pred), thresholds, comparison)  # [P, T]
        out = jnp.any(within[None, :, :] & hit.T[:, None, :], axis=-1).astype(gt.dtype)
        return jnp.where(jnp.any(gm), out, jnp.nan)

    return batching.lift(one, (gt, gm, pred, pm), (2, 1, 2, 1))


@one_program
def grounding_iou(
    targets: jax.typing.ArrayLike,
    predictions: jax.typing.ArrayLike,
    *,
    target_mask: jax.typing.ArrayLike | None = None,
    prediction_mask: jax.typing.ArrayLike | None = None,
) -> jax.Array:
    r"""IoU of a query's top-1 prediction with its best target (the mean over queries is mIoU).

    :math:`\cap(p_1, g^*) / (\max(e) - \min(s))`, with :math:`p_1` the first valid
    prediction in list order (Ego4D NLQ's ``mIoU``; the hull equals the union whenever the
    windows overlap).

    Args:
      targets: float ``[..., G, 2]`` ground-truth windows.
      predictions: float ``[..., P, 2]`` predicted windows in rank order.
      target_mask: optional ``bool[..., G]``.
      prediction_mask: optional ``bool[..., P]``.

    Returns:
      ``float32[...]`` (float64 for float64 windows under x64) in [0, 1]: 0 for a query
      without a valid prediction, NaN for one without a valid target (a padding query).

    >>> grounding_iou(jnp.array([[0.0, 10.0]]), jnp.array([[5.0, 15.0], [0.0, 10.0]])).tolist()
    0.3333333432674408

    References:
      Grauman et al., "Ego4D", CVPR 2022 (``evaluate_nlq_performance``: ``mIoU`` is the mean of
      ``np.mean(np.sort(overlap[0])[-3:])``, i.e. of the first prediction's IoU).

    Notes: a 0-length hull gives 0 (Ego4D: NaN, which makes its mean NaN). Several targets:
    the one of highest true IoU, as :func:`grounding_recall` (Ego4D has one per query).
    Scripts that average the IoU of the best-of-k predictions, or of the prediction of highest
    score, compute other numbers.
    """
    gt, pred, gm, pm, _ = query_inputs(targets, predictions, target_mask, prediction_mask)

    def one(gt, gm, pred, pm):
        first = pm & (jnp.cumsum(pm.astype(jnp.int32)) == 1)
        value = jnp.sum(jnp.where(first, _best_iou(gt, gm, pred), 0.0))
        return jnp.where(jnp.any(gm), value, jnp.nan)

    return batching.lift(one, (gt, gm, pred, pm), (2, 1, 2, 1))


def _greedy_hits(iou, keep, thresholds):
    """Moment-DETR matching ``[P, T]``: in rank order, each prediction takes the free target of
    highest IoU ``>= t`` (the lower index on equal IoUs, as detection's matching: the
    scripts' ``argsort()[::-1]`` orders them as numpy's unstable sort does on the machine)."""
    t = jnp.asarray(thresholds, iou.dtype)
    num_targets = iou.shape[-1]

    def step(locked, entry):  # locked: bool [T, G]
        iou_p, keep_p = entry
        candidate = (iou_p[None, :] >= t[:, None]) & ~locked & keep_p
        key = jnp.where(candidate, iou_p[None, :], -1.0)
        best = jnp.argmax(key, axis=-1)
        hit = jnp.any(candidate, axis=-1)
        return locked | (jax.nn.one_hot(best, num_targets, dtype=bool) & hit[:, None]), hit

    locked = jnp.zeros((t.shape[0], num_targets), bool) & (iou[:1] > 2)  # varying in shard_map
    return lax.scan(step, locked, (iou, keep))[1]


def _ranked_ap(hits, keep, num_positives, dtype):
    """All-point interpolated AP ``[T]`` of hits ``[P, T]`` in rank order (valid ones first)."""
    rank = jnp.arange(1, hits.shape[0] + 1, dtype=dtype)
    tp = jnp.cumsum(hits.astype(jnp.int32), axis=0).astype(dtype)
    precision = jnp.where(keep[:, None], count_ratio(tp, rank[:, None]), 0.0).T  # [T, P]
    envelope = running_max(precision, reverse=True)
    total = fraction_sum(jnp.where(hits.T, envelope, 0.0))
    return count_ratio(total, num_positives.astype(dtype), jnp.nan)  # one total: see count_ratio


@one_program
def moment_retrieval_average_precision(
    targets: jax.typing.ArrayLike,
    predictions: jax.typing.ArrayLike,
    scores: jax.typing.ArrayLike,
    *,
    iou_thresholds: tuple[float, ...] = MR_THRESHOLDS,
    max_predictions: int | None = 10,
    target_mask: jax.typing.ArrayLike | None = None,
    prediction_mask: jax.typing.ArrayLike | None = None,
) -> jax.Array:
    r"""Per-query average precision of moment retrieval at each tIoU (Moment-DETR's MR-mAP).

    The first ``max_predictions`` predictions in list order are sorted by decreasing score
    (stable); each in turn takes the free target of highest IoU if that IoU is ``>= t``
    (falling through taken ones), else it is a false positive; then
    :math:`AP_t = \frac{1}{G}\sum_{i\,\mathrm{TP}} \max_{j \ge i} \mathrm{prec}_j` (VOC all-point
    interpolation). IoU = intersection / (``|p| + |g| - ∩``). MR-mAP is the mean over queries
    and thresholds; MR-mAP@0.5 the mean over queries of column 0.

    Args:
      targets: float ``[..., G, 2]`` ground-truth windows.
      predictions: float ``[..., P, 2]`` predicted windows in list order.
      scores: float ``[..., P]`` prediction scores (no NaN).
      iou_thresholds: static tuple of T thresholds; default 0.5:0.05:0.95 (two decimals, as
        Moment-DETR rounds its ``np.linspace``).
      max_predictions: static int, predictions kept per query (Moment-DETR: 10); None = all.
      target_mask: optional ``bool[..., G]``.
      prediction_mask: optional ``bool[..., P]``.

    Returns:
      ``float32[..., T]`` (float64 for float64 windows under x64) in [0, 1]; 0 for a query
      without predictions, NaN for one without a valid target (a padding query).

    >>> gt = jnp.array([[0.0, 10.0], [20.0, 30.0]])
    >>> pred = jnp.array([[0.0, 9.0], [40.0, 50.0], [20.0, 30.0]])
    >>> moment_retrieval_average_precision(
    ...     gt, pred, jnp.array([0.9, 0.8, 0.7]), iou_thresholds=(0.5, 0.95)).tolist()
    [0.8333333730697632, 0.1666666865348816]

    References:
      Lei et al., "QVHighlights / Moment-DETR", NeurIPS 2021 (``standalone_eval/eval.py``,
      ``compute_mr_ap``; ``utils.py``, ``compute_average_precision_detection``).

    Notes: the reference drops a query without predictions from the mean (here it scores 0), and
    gives NaN for one without targets (here NaN too, i.e. a padding query: mask targets outside
    a length range to get the reference's short/middle/long subsets). A zero-length prediction
    on a zero-length target has IoU 0 here; the reference's 0/0 is NaN, which passes its
    ``iou < t`` test, a true positive wherever the two windows are. Equal scores keep list
    order, as the reference's stable sort; equal IoUs take the lower target index, as
    :func:`detection_average_precision` (the reference's ``argsort()[::-1]`` orders them as
    numpy's unstable sort happens to). IoUs follow the input dtype (see
    :func:`grounding_recall`); in float32 the sum over the ranked list is taken in fixed point
    (``2**-24``) so that a query's AP does not depend on the batch shape.
    """
    thresholds = checks.static_unit_floats("iou_thresholds", iou_thresholds)
    max_predictions = checks.static_int(
        "max_predictions", max_predictions, minimum=1, allow_none=True
    )
    gt, pred, gm, pm, scores = query_inputs(
        targets, predictions, target_mask, prediction_mask, scores
    )

    def one(gt, gm, pred, scores, pm):
        keep = pm
        if max_predictions is not None:
            keep = pm & (jnp.cumsum(pm.astype(jnp.int32)) <= max_predictions)
        order = key_order(descending_keys(scores, keep))
        width = order.shape[0] if max_predictions is None else min(order.shape[0], max_predictions)
        order = order[:width]
        keep = keep[order]
        iou = jnp.where(gm[None, :], union_iou(pred[order], gt), -1.0)
        hits = _greedy_hits(iou, keep, thresholds)
        return _ranked_ap(hits, keep, jnp.sum(gm, dtype=jnp.int32), iou.dtype)

    return batching.lift(one, (gt, gm, pred, scores, pm), (2, 1, 2, 1, 1))


def _saliency_inputs(targets, predictions, mask):
    targets = checks.as_int_labels("targets", targets, min_ndim=0)
    if targets.ndim < 2:  # as_int_labels would ask for frame labels [..., T]
        raise ValueError(
            f"targets must have shape [..., N, A] (clip scores per annotator; A = 1 for one), "
            f"got {targets.shape}."
        )
    predictions = checks.as_float("predictions", predictions, min_ndim=1)
    if targets.shape[:-1] != predictions.shape:
        raise ValueError(
            f"targets [..., N, A] (clip scores per annotator) must match predictions [..., N], "
            f"got {targets.shape} and {predictions.shape}."
        )
    mask, targets, predictions = checks.with_an_entry(
        checks.as_valid(mask, predictions.shape), targets, predictions
    )
    return targets, predictions, mask


@one_program
def highlight_hit_at_1(
    targets: jax.typing.ArrayLike,
    predictions: jax.typing.ArrayLike,
    *,
    min_score: int = 2,
    mask: jax.typing.ArrayLike | None = None,
) -> jax.Array:
    r"""HL-Hit@1: is the clip of highest predicted saliency positive for some annotator?

    :math:`\max_a [y_{c^*, a} \ge s_{\min}]` with :math:`c^* = \arg\max_c \hat s_c` (the first
    maximum among valid clips). QVHighlights: ``min_score`` 2 (Fair), 3 (Good), 4 (VeryGood).

    Args:
      targets: integer ``[..., N, A]`` saliency scores (0-4 in QVHighlights) of N clips by A
        annotators; 0 for clips outside the relevant ones.
      predictions: float ``[..., N]`` predicted saliency per clip (no NaN).
      min_score: static int, the lowest score of a positive clip; default 2.
      mask: optional ``bool[..., N]``, True = a clip of the video.

    Returns:
      ``float32[...]``, 1.0 or 0.0; NaN for a query without a valid clip.

    >>> y = jnp.array([[0, 4], [2, 1], [0, 0]])
    >>> highlight_hit_at_1(y, jnp.array([0.2, 0.9, 0.9])).tolist()
    1.0

    References:
      Lei et al., "QVHighlights / Moment-DETR", NeurIPS 2021 (``standalone_eval/eval.py``,
      ``compute_hl_hit1``).

    Notes: the reference takes the arg-max over the whole submitted list and counts a miss when
    it lies beyond the video's clips; here only valid clips compete.
    """
    min_score = checks.static_int("min_score", min_score)
    y, s, m = _saliency_inputs(targets, predictions, mask)

    def one(y, s, m):
        top = jnp.max(jnp.where(m, s, -jnp.inf))
        best = jnp.argmax(m & (s == top))  # a valid clip also where every score is -inf
        hit = jnp.any(checks.at_least(y[best], min_score)).astype(jnp.float32)
        return jnp.where(jnp.any(m), hit, jnp.nan)

    return batching.lift(one, (y, s, m), (2, 1, 1))


def _grouped_interpolated_ap(positive, scores, valid):
    """``get_ap(interpolate=True)`` per column of ``positive [N, A]``, ``float32[A]``."""
    n = scores.shape[0]
    keys = descending_keys(scores, valid)
    order = key_order(keys)
    keys, valid = keys[order], valid[order]
    positive = positive[order] & valid[:, None]
    index = jnp.arange(n, dtype=jnp.int32)
    nxt_differs = jnp.concatenate([keys[1:] != keys[:-1], jnp.ones((1,), bool)])
    end = valid & (nxt_differs | jnp.concatenate([~valid[1:], jnp.ones((1,), bool)]))
    start = jnp.concatenate([jnp.ones((1,), bool), end[:-1]])
    tp = jnp.cumsum(positive.astype(jnp.int32), axis=0)  # [N, A]
    first = running_max(jnp.where(start, index, 0))
    before = jnp.where(first[:, None] > 0, tp[jnp.maximum(first - 1, 0)], 0)
    precision = count_ratio(tp, (index + 1)[:, None])  # correctly rounded: see count_ratio
    precision = jnp.where(end[:, None], precision, 0.0)
    envelope = running_max(precision.T, reverse=True)  # [A, N]
    counted = (end[:, None] & (tp > before)).T
    total = fraction_sum(jnp.where(counted, envelope, 0.0))
    return safe_divide(total, jnp.sum(counted, axis=-1, dtype=jnp.int32).astype(jnp.float32), 0.0)


@one_program
def highlight_average_precision(
    targets: jax.typing.ArrayLike,
    predictions: jax.typing.ArrayLike,
    *,
    min_score: int = 2,
    mask: jax.typing.ArrayLike | None = None,
) -> jax.Array:
    r"""HL-mAP's per-annotator average precision of predicted clip saliency (QVHighlights).

    Clips are positive for annotator a when :math:`y_{c,a} \ge s_{\min}`. Over the distinct
    predicted scores in decreasing order (ties form one group), with :math:`\tilde p_g` the
    precision envelope (the maximum precision at this or any later cut):
    :math:`AP_a = \mathrm{mean}_{g:\,\text{group } g \text{ holds a positive}} \tilde p_g`;
    0 when no clip is positive. HL-mAP is the mean over queries and annotators.

    Args:
      targets: integer ``[..., N, A]`` saliency scores of N clips by A annotators.
      predictions: float ``[..., N]`` predicted saliency per clip (no NaN).
      min_score: static int, the lowest score of a positive clip; default 2 (Fair).
      mask: optional ``bool[..., N]``, True = a clip of the video.

    Returns:
      ``float32[..., A]`` in [0, 1]; NaN for a query without a valid clip.

    >>> y = jnp.array([[0], [3], [2], [0]])
    >>> highlight_average_precision(y, jnp.array([0.9, 0.8, 0.3, 0.1])).tolist()
    [0.6666666865348816]

    References:
      Lei et al., "QVHighlights / Moment-DETR", NeurIPS 2021 (``standalone_eval/eval.py``,
      ``compute_hl_ap``; ``utils.py``, ``get_ap``: scikit-learn's ``precision_recall_curve``,
      running maximum of precision, mean over the points where recall changes).

    Notes: that mean weighs each tied group holding positives once, whatever its number of
    positives (it is not scikit-learn's AP when positives tie). The reference pads or cuts the
    submitted scores to the video's clips (missing clips score 0); here the mask selects them.
    """
    min_score = checks.static_int("min_score", min_score)
    y, s, m = _saliency_inputs(targets, predictions, mask)

    def one(y, s, m):
        ap = _grouped_interpolated_ap(checks.at_least(y, min_score), s, m)
        return jnp.where(jnp.any(m), ap, jnp.nan)

    return batching.lift(one, (y, s, m), (2, 1, 1))


@one_program
def moment_query_recall(
    targets: jax.typing.ArrayLike,
    predictions: jax.typing.ArrayLike,
    *,
    ranks: tuple[int, ...] = (1, 2, 3, 4, 5),
    iou_thresholds: tuple[float, ...] = MQ_THRESHOLDS,
    comparison: str = "strict",
    target_mask: jax.typing.ArrayLike | None = None,
    prediction_mask: jax.typing.ArrayLike | None = None,
) -> jax.Array:
    r"""Ego4D moment queries Recall@k×n: targets recalled by the first ``r·n`` predictions.

    One query is one (clip, class) with n valid targets: target g is recalled at rank r and
    threshold t when one of the first ``r·n`` predictions (list order) has
    :math:`\mathrm{IoU} \succ t` with it (``>`` by default, as Ego4D). Recall@r×n, t of a
    dataset is the sum of these counts over queries divided by the number of targets.

    Args:
      targets: float ``[..., G, 2]`` ground-truth windows of one clip and class.
      predictions: float ``[..., P, 2]`` predicted windows of that clip and class, rank order.
      ranks: static tuple of R positive ints; default (1, 2, 3, 4, 5).
      iou_thresholds: static tuple of T thresholds; default (0.3, 0.5, 0.7).
      comparison: static ``"strict"`` (``>``, default, Ego4D) or ``"inclusive"`` (``>=``).
      target_mask: optional ``bool[..., G]``.
      prediction_mask: optional ``bool[..., P]``.

    Returns:
      ``int32[..., T, R]``: recalled targets (0 for a query without target or prediction).

    >>> gt = jnp.array([[0.0, 10.0], [20.0, 30.0]])
    >>> pred = jnp.array([[0.0, 9.0], [40.0, 50.0], [20.0, 30.0]])
    >>> moment_query_recall(gt, pred, ranks=(1, 2), iou_thresholds=(0.5,)).tolist()
    [[1, 2]]

    References:
      Grauman et al., "Ego4D", CVPR 2022 (``MQ/Evaluation/ego4d/get_retrieval_performance.py``,
      ``Moment_Retrieval.evaluate``; IoU over the hull).

    Notes: the reference raises ``KeyError`` for a clip absent from the predictions; treat it as
    a query without predictions (all targets missed). A 0-length hull gives IoU 0 (reference:
    NaN, never recalled).
    """
    ks = checks.static_ints("ranks", ranks)
    thresholds = checks.static_unit_floats("iou_thresholds", iou_thresholds)
    comparison = checks.static_choice("comparison", comparison, COMPARISONS)
    gt, pred, gm, pm, _ = query_inputs(targets, predictions, target_mask, prediction_mask)

    # r past P takes every prediction (n >= 1 targets): capped, so that r * n cannot wrap
    cutoffs = jnp.asarray([min(r, pred.shape[-2]) for r in ks], jnp.int32)

    def one(gt, gm, pred, pm):
        n = jnp.sum(gm, dtype=jnp.int32)
        rank = jnp.cumsum(pm.astype(jnp.int32))
        within = pm[None, :] & (rank[None, :] <= cutoffs[:, None] * n)  # [R, P]
        hit = reaches(hull_iou(pred, gt), thresholds, comparison) & gm[None, :, None]  # [P, G, T]
        recalled = jnp.any(within[:, :, None, None] & hit[None], axis=1)  # [R, G, T]
        return jnp.sum(recalled, axis=1, dtype=jnp.int32).T

    return batching.lift(one, (gt, gm, pred, pm), (2, 1, 2, 1))
