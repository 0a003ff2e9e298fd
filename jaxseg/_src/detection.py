"""Detection metrics: interval / box IoU and ActivityNet (or VOC) mean average precision.

Matching runs inside each video (one ``lax.scan`` over the video's predictions in decreasing
score order, vectorised over videos and thresholds); AP then needs one sort of all
predictions by (class, score) and segmented scans, so nothing loops over videos or classes.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from jaxseg._src import batching, checks
from jaxseg._src.deprecation import renamed_arguments
from jaxseg._src.numerics import count_ratio, divide, nanmean, safe_divide
from jaxseg._src.programs import one_program
from jaxseg._src.ranking import (
    ClassScores,
    cumulative_count,
    descending_keys,
    key_order,
    recall_reaches,
    suffix_max,
    unsigned_keys,
)
from jaxseg._src.thresholds import ACTIVITYNET_THRESHOLDS

MATCHINGS = ("activitynet", "voc")


def _interval_iou(a, b):
    """``[N, 2]`` x ``[M, 2]`` -> ``[N, M]``."""
    a0, a1 = a[:, None, 0], a[:, None, 1]
    b0, b1 = b[None, :, 0], b[None, :, 1]
    inter = jnp.maximum(jnp.minimum(a1, b1) - jnp.maximum(a0, b0), 0.0)
    union = (a1 - a0) + (b1 - b0) - inter
    return safe_divide(inter, union, 0.0)


def _box_iou(a, b):
    """``[N, 4]`` x ``[M, 4]`` (x1, y1, x2, y2) -> ``[N, M]``."""
    iw = jnp.maximum(
        jnp.minimum(a[:, None, 2], b[None, :, 2]) - jnp.maximum(a[:, None, 0], b[None, :, 0]), 0.0
    )
    ih = jnp.maximum(
        jnp.minimum(a[:, None, 3], b[None, :, 3]) - jnp.maximum(a[:, None, 1], b[None, :, 1]), 0.0
    )
    inter = iw * ih
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area_a[:, None] + area_b[None, :] - inter
    return safe_divide(inter, union, 0.0)


def _pairwise(name_a, a, name_b, b, width):
    a = checks.as_float(name_a, a, min_ndim=2)
    b = checks.as_float(name_b, b, min_ndim=2)
    for name, x in ((name_a, a), (name_b, b)):
        if x.shape[-1] != width:
            raise ValueError(f"{name} must have shape [..., N, {width}], got {x.shape}.")
    fn = _interval_iou if width == 2 else _box_iou
    return batching.lift(fn, (a, b), (2, 2))


@one_program
def temporal_iou(segments_a: jax.typing.ArrayLike, segments_b: jax.typing.ArrayLike) -> jax.Array:
    r"""Pairwise temporal IoU of two sets of intervals.

    :math:`tIoU = \max(0, \min(e_a, e_b) - \max(s_a, s_b)) / (|a| + |b| - \cap)`, in
    continuous time (ActivityNet's ``segment_iou``); 0 when the union is 0.

    Args:
      segments_a: float ``[..., N, 2]`` (start, end).
      segments_b: float ``[..., M, 2]`` (start, end).

    Returns:
      ``float32[..., N, M]`` in [0, 1] (float64 for float64 segments under x64).

    >>> temporal_iou(jnp.array([[0.0, 2.0]]), jnp.array([[1.0, 3.0], [5.0, 6.0]])).tolist()
    [[0.3333333432674408, 0.0]]
    """
    return _pairwise("segments_a", segments_a, "segments_b", segments_b, 2)


@one_program
def box_iou(boxes_a: jax.typing.ArrayLike, boxes_b: jax.typing.ArrayLike) -> jax.Array:
    """Pairwise IoU of two sets of axis-aligned boxes ``(x1, y1, x2, y2)``.

    Continuous coordinates: area = (x2 - x1)(y2 - y1), 0 when the union is 0.

    Args:
      boxes_a: float ``[..., N, 4]``.
      boxes_b: float ``[..., M, 4]``.

    Returns:
      ``float32[..., N, M]`` in [0, 1] (float64 for float64 boxes under x64).

    >>> box_iou(jnp.array([[0.0, 0.0, 2.0, 2.0]]), jnp.array([[1.0, 0.0, 3.0, 2.0]])).tolist()
    [[0.3333333432674408]]

    Note: the VOC devkit and rafaelpadilla's Evaluator add 1 to widths and heights (pixel
    indices); shift ``x2, y2`` by 1 to reproduce them.
    """
    return _pairwise("boxes_a", boxes_a, "boxes_b", boxes_b, 4)


class Matches(NamedTuple):
    """Per-prediction outcome of matching, flattened over videos (``V * P`` entries)."""

    label: jax.Array  # int32 [V*P]; num_classes for invalid predictions
    score: jax.Array  # float32 [V*P]
    true_positive: jax.Array  # bool [V*P, K]
    num_positives: jax.Array  # int32 [C]: valid ground-truth instances per class


def match_detections(
    gt_boxes,
    gt_labels,
    gt_mask,
    pred_boxes,
    pred_labels,
    pred_scores,
    pred_mask,
    *,
    num_classes,
    thresholds,
    matching,
) -> Matches:
    """Greedy matching of one dataset ``[V, ...]`` at every threshold (ActivityNet or VOC)."""
    iou_fn = _interval_iou if gt_boxes.shape[-1] == 2 else _box_iou
    num_videos, num_preds = pred_labels.shape
    iou = jax.vmap(iou_fn)(pred_boxes, gt_boxes)  # [V, P, G]
    # Labels outside [0, C) name no class (a precondition inside jit; the CLI rejects them):
    # such entries are left out, as if masked, instead of aliasing onto a class.
    gt_mask = gt_mask & checks.in_label_range(gt_labels, num_classes)
    pred_mask = pred_mask & checks.in_label_range(pred_labels, num_classes)
    pred_labels = jnp.where(pred_mask, pred_labels, num_classes).astype(jnp.int32)
    gt_labels = jnp.where(gt_mask, gt_labels, 0).astype(jnp.int32)
    same = (pred_labels[:, :, None] == gt_labels[:, None, :]) & gt_mask[:, None, :]
    iou = jnp.where(same, iou, -1.0)
    # Decreasing score inside each video (ties: input order), invalid predictions last.
    order = key_order(descending_keys(pred_scores, pred_mask))
    iou = jnp.take_along_axis(iou, order[:, :, None], axis=1)
    # Compared in the IoUs' precision: float64 boxes (jax_enable_x64) decide as ActivityNet.
    thresholds = jnp.asarray(thresholds, iou.dtype)

    def step(locked, iou_p):  # locked: bool [V, K, G]; iou_p: [V, G]
        value = iou_p[:, None, :]
        reaches = value >= thresholds[None, :, None]
        if matching == "activitynet":
            candidate = reaches & ~locked
            best = jnp.argmax(jnp.where(candidate, value, -2.0), axis=-1)
            hit = jnp.any(candidate, axis=-1)
        else:  # VOC: only the best ground truth is tried; taken means FP
            best = jnp.broadcast_to(jnp.argmax(iou_p, axis=-1)[:, None], locked.shape[:2])
            hit = jnp.take_along_axis(reaches & ~locked, best[..., None], axis=-1)[..., 0]
        take = jax.nn.one_hot(best, locked.shape[-1], dtype=bool) & hit[..., None]
        return locked | take, hit

    # Derived from the data, so that inside shard_map the carry varies over the mesh axes as
    # the IoUs do (a constant carry would not match the step's output).
    locked = jnp.zeros((num_videos, thresholds.shape[0], gt_labels.shape[1]), bool)
    locked = locked & gt_mask[:, None, :]
    _, hits = lax.scan(step, locked, jnp.swapaxes(iou, 0, 1))  # [P, V, K]
    hits = jnp.swapaxes(hits, 0, 1)
    labels = jnp.take_along_axis(pred_labels, order, axis=1)
    valid = jnp.take_along_axis(pred_mask, order, axis=1)
    labels = jnp.where(valid, labels, num_classes)
    scores = jnp.take_along_axis(pred_scores, order, axis=1)
    gt_count = jax.ops.segment_sum(
        gt_mask.reshape(-1).astype(jnp.int32),
        gt_labels.reshape(-1),
        num_segments=num_classes,
    )
    return Matches(
        labels.reshape(-1),
        scores.reshape(-1),
        (hits & valid[..., None]).reshape(num_videos * num_preds, -1),
        gt_count,
    )


def _class_then_score_order(labels, scores, num_classes):
    """Stable order of flat predictions by (label, decreasing score), ``int32[N]``.

    A least-significant-digit radix sort: each pass sorts one uint32 word holding a digit of
    the (label, score key) pair above the entry's current position, so it is stable, and
    XLA's CPU sort of one uint32 operand is several times faster than a key/value sort. Four
    passes or fewer (up to 2**24 predictions); beyond, a multi-operand sort.
    """
    n = labels.shape[0]
    index_bits = max(1, (n - 1).bit_length())
    digit_bits = 32 - index_bits
    key_bits = 32 + max(1, num_classes.bit_length())  # labels lie in [0, num_classes]
    keys = descending_keys(scores)
    if keys.dtype == jnp.int64 or 4 * digit_bits < key_bits:
        iota = lax.iota(jnp.int32, n)
        return lax.sort((labels, keys, iota), num_keys=2, is_stable=True)[2]
    keys, labels = unsigned_keys(keys), labels.astype(jnp.uint32)
    position = lax.iota(jnp.uint32, n)
    order = lax.iota(jnp.int32, n)
    for shift in range(0, key_bits, digit_bits):
        key, label = keys[order], labels[order]
        if shift >= 32:
            digit = label >> (shift - 32)
        elif shift + digit_bits > 32:
            digit = (key >> shift) | (label << (32 - shift))
        else:
            digit = key >> shift
        word = ((digit & jnp.uint32((1 << digit_bits) - 1)) << index_bits) | position
        moved = jnp.sort(word) & jnp.uint32((1 << index_bits) - 1)
        order = order[moved.astype(jnp.int32)]
    return order


def class_average_precision(matches: Matches, *, num_classes, interpolation) -> jax.Array:
    """AP ``[C, K]`` from matched predictions; NaN for classes without ground truth.

    Works on ``[K, N]`` rows (one per threshold, predictions along the minor axis): XLA's CPU
    code for the running maximum is about twice as slow on the transposed layout.
    """
    labels, scores, tp, npos = matches
    n = labels.shape[0]
    order = _class_then_score_order(labels, scores, num_classes)
    labels = labels[order]
    hits = jnp.take(tp.T, order, axis=1).astype(jnp.int32)  # [K, N]
    valid = labels < num_classes
    count = jax.ops.segment_sum(valid.astype(jnp.int32), labels, num_segments=num_classes + 1)
    start = jnp.cumsum(count) - count  # first sorted index of each class
    first = start[labels]
    rank = lax.iota(jnp.int32, n) - first + 1
    cum = cumulative_count(hits)
    before = jnp.where(first[None] > 0, jnp.take(cum, jnp.maximum(first - 1, 0), axis=1), 0)
    tp_cum = cum - before
    precision = count_ratio(tp_cum, rank[None])  # correctly rounded: see count_ratio
    precision = jnp.where(valid[None], precision, 0.0)
    is_end = jnp.concatenate([labels[1:] != labels[:-1], jnp.ones((1,), bool)])
    envelope = suffix_max(precision, jnp.broadcast_to(is_end[None], precision.shape))
    npos_f = npos.astype(jnp.float32)[:, None]
    per_class = jax.vmap(lambda x: jax.ops.segment_sum(x, labels, num_segments=num_classes + 1))
    if interpolation == "all_point":
        total = per_class(jnp.where(hits > 0, envelope, 0.0))[:, :num_classes].T
        ap = count_ratio(total, npos_f)  # one total per class: see count_ratio
    else:
        npos_of = jnp.concatenate([npos, jnp.zeros((1,), jnp.int32)])[labels][None]
        values = []
        for tenth in range(11):
            below = valid[None] & ~recall_reaches(tp_cum, npos_of, tenth)
            first_reaching = per_class(below.astype(jnp.int32))[:, :num_classes].T  # [C, K]
            reached = first_reaching < count[:num_classes, None]
            index = jnp.minimum(start[:num_classes, None] + first_reaching, max(n - 1, 0))
            picked = jnp.take_along_axis(envelope, index.T, axis=1).T if n else 0.0 * index
            values.append(jnp.where(reached, picked, 0.0))
        ap = divide(sum(values[1:], values[0]), jnp.float32(11.0))
    return jnp.where(npos[:, None] > 0, ap, jnp.nan)


# Rank of each table of one dataset, in :func:`match_detections`' order: boxes ``[V, G, D]``,
# labels, scores and masks ``[V, G]``.
DATASET_NDIMS = (3, 2, 2, 3, 2, 2, 2)


# The names of the detection tables up to jaxseg 0.1, and their names now.
OLD_DETECTION_NAMES = dict(
    gt_boxes="target_boxes",
    gt_labels="target_labels",
    pred_boxes="predicted_boxes",
    pred_labels="predicted_labels",
    pred_scores="scores",
    gt_mask="target_mask",
    pred_mask="prediction_mask",
)


def checked_detections(targets, predictions, masks):
    """The tables of :func:`detection_average_precision` checked (dtypes, shapes), given as
    ``targets = (target_boxes, target_labels)``, ``predictions = (predicted_boxes,
    predicted_labels, scores)`` and ``masks = (target_mask, prediction_mask)``, and returned
    in :func:`match_detections`' order, an absent mask all True."""
    target_boxes, target_labels = targets
    predicted_boxes, predicted_labels, scores = predictions
    target_mask, prediction_mask = masks
    target_boxes = checks.as_float("target_boxes", target_boxes, min_ndim=3)
    predicted_boxes = checks.as_float("predicted_boxes", predicted_boxes, min_ndim=3)
    width = target_boxes.shape[-1]
    if width not in (2, 4) or predicted_boxes.shape[-1] != width:
        raise ValueError(
            f"target_boxes and predicted_boxes must end in the same size 2 (intervals) or 4 "
            f"(boxes), got {target_boxes.shape} and {predicted_boxes.shape}."
        )
    target_labels = checks.as_int_labels("target_labels", target_labels, min_ndim=2)
    predicted_labels = checks.as_int_labels("predicted_labels", predicted_labels, min_ndim=2)
    scores = checks.as_float("scores", scores, min_ndim=2)
    if target_labels.shape != target_boxes.shape[:-1]:
        raise ValueError(
            f"target_labels must have shape {target_boxes.shape[:-1]}, got {target_labels.shape}."
        )
    for name, x in (("predicted_labels", predicted_labels), ("scores", scores)):
        if x.shape != predicted_boxes.shape[:-1]:
            raise ValueError(f"{name} must have shape {predicted_boxes.shape[:-1]}, got {x.shape}.")
    if target_boxes.shape[:-2] != predicted_boxes.shape[:-2]:
        raise ValueError(
            f"target_boxes [..., V, G, D] and predicted_boxes [..., V, P, D] must share [..., V], "
            f"got {target_boxes.shape} and {predicted_boxes.shape}."
        )
    target_mask = checks.as_valid(target_mask, target_labels.shape, "target_mask")
    prediction_mask = checks.as_valid(prediction_mask, predicted_labels.shape, "prediction_mask")
    target_mask, target_boxes, target_labels = checks.with_an_entry(
        target_mask, target_boxes, target_labels
    )
    prediction_mask, predicted_boxes, predicted_labels, scores = checks.with_an_entry(
        prediction_mask, predicted_boxes, predicted_labels, scores
    )
    target_mask, *tables = checks.with_an_entry(  # no video: one without detections
        target_mask,
        target_boxes,
        target_labels,
        predicted_boxes,
        predicted_labels,
        scores,
        prediction_mask,
        axis=-2,
    )
    boxes, labels, predicted_boxes, predicted_labels, scores, prediction_mask = tables
    return boxes, labels, target_mask, predicted_boxes, predicted_labels, scores, prediction_mask


@renamed_arguments(**OLD_DETECTION_NAMES)
@one_program
def detection_average_precision(
    target_boxes: jax.typing.ArrayLike,
    target_labels: jax.typing.ArrayLike,
    predicted_boxes: jax.typing.ArrayLike,
    predicted_labels: jax.typing.ArrayLike,
    scores: jax.typing.ArrayLike,
    *,
    num_classes: int,
    iou_thresholds: tuple[float, ...] = ACTIVITYNET_THRESHOLDS,
    target_mask: jax.typing.ArrayLike | None = None,
    prediction_mask: jax.typing.ArrayLike | None = None,
    interpolation: str = "all_point",
    matching: str = "activitynet",
) -> ClassScores:
    """Detection AP per class at each IoU threshold, and mAP, over a dataset of videos/images.

    ActivityNet's ``compute_average_precision_detection``: per class, predictions in decreasing
    score order each take the highest-IoU ground truth of the same video and class that is
    still free at that threshold (falling through taken ones); a match needs IoU >= threshold;
    AP interpolates all points (VOC2010). ``matching="voc"`` tries only the highest-IoU ground
    truth (PASCAL VOC: a taken one makes the prediction a duplicate FP). Boxes ``[..., 4]`` use
    :func:`box_iou`, intervals ``[..., 2]`` :func:`temporal_iou`.

    Args:
      target_boxes: float ``[..., V, G, 2]`` intervals or ``[..., V, G, 4]`` boxes.
      target_labels: integer ``[..., V, G]`` in [0, num_classes).
      predicted_boxes: float ``[..., V, P, 2 or 4]``.
      predicted_labels: integer ``[..., V, P]`` in [0, num_classes).
      scores: float ``[..., V, P]`` (no NaN).
      num_classes: static number of classes C.
      iou_thresholds: static tuple of K thresholds in (0, 1]; default ActivityNet's
        0.5:0.05:0.95, ``np.linspace(0.5, 0.95, 10)``.
      target_mask: optional ``bool[..., V, G]``, True = real ground-truth instance.
      prediction_mask: optional ``bool[..., V, P]``, True = real prediction.
      interpolation: static ``"all_point"`` (default) or ``"11point"`` (VOC2007).
      matching: static ``"activitynet"`` (default, fall-through) or ``"voc"``.

    Returns:
      :class:`ClassScores`: ``per_class`` ``float32[..., C, K]`` (NaN for a class without
      ground truth; 0 for one with ground truth and no prediction) and ``mean``
      ``float32[..., K]`` over the classes with ground truth (NaN if none).

    >>> gt = jnp.array([[[0.0, 10.0], [20.0, 30.0]]])
    >>> pred = jnp.array([[[0.0, 9.0], [21.0, 30.0], [0.0, 10.0]]])
    >>> result = detection_average_precision(
    ...     gt, jnp.array([[0, 1]]), pred, jnp.array([[0, 1, 0]]), jnp.array([[0.9, 0.8, 0.7]]),
    ...     num_classes=2, iou_thresholds=(0.5, 0.95))
    >>> result.per_class.tolist()
    [[1.0, 0.5], [1.0, 0.0]]

    References:
      Caba Heilbron et al., "ActivityNet", CVPR 2015 (``Evaluation/eval_detection.py``);
      Everingham et al., "The PASCAL VOC Challenge", IJCV 2010.

    Notes: ties of scores keep the input order (video, then index), ties of IoU the lower
    ground-truth index (the anchors' unstable argsort orders them arbitrarily). IoUs and
    thresholds take the boxes' precision and scores are ordered in theirs: in float32 a tIoU
    of exactly 0.3 reaches ``np.linspace(0.1, 0.5, 5)``'s 0.30000000000000004 here, not in
    ActivityNet, times of thousands of seconds move a tIoU by up to about 1e-4, and scores
    equal in float32 tie; float64 boxes and scores (``jax_enable_x64``, as ``jaxseg
    detection`` passes them) decide as ActivityNet. A prediction of a class without ground
    truth counts nowhere (ActivityNet: KeyError). Zero-length prediction and ground truth
    have IoU 0 here, never a match; ActivityNet's NaN passes ``tiou < thr`` and matches.
    Not checked inside jit (``jaxseg detection`` rejects both): ordered corners (``start <=
    end``, ``x1 <= x2``; an inverted box never matches); labels in [0, C) (others are left out).
    The names up to 0.1 (``gt_boxes``, ``pred_scores``, ``gt_mask``, ...) still work and warn.
    """
    num_classes = checks.static_int("num_classes", num_classes, minimum=1)
    thresholds = checks.static_unit_floats("iou_thresholds", iou_thresholds)
    interpolation = checks.static_choice("interpolation", interpolation, ("all_point", "11point"))
    matching = checks.static_choice("matching", matching, MATCHINGS)
    tables = checked_detections(
        (target_boxes, target_labels),
        (predicted_boxes, predicted_labels, scores),
        (target_mask, prediction_mask),
    )
    options = dict(thresholds=thresholds, matching=matching, interpolation=interpolation)
    one_dataset = functools.partial(_dataset_average_precision, num_classes=num_classes, **options)
    return batching.lift(one_dataset, tables, DATASET_NDIMS)


def _dataset_average_precision(*tables, num_classes, thresholds, matching, interpolation):
    """:func:`detection_average_precision` of one dataset's checked ``tables``."""
    matches = match_detections(
        *tables, num_classes=num_classes, thresholds=thresholds, matching=matching
    )
    return matched_class_scores(matches, num_classes=num_classes, interpolation=interpolation)


def matched_class_scores(matches: Matches, *, num_classes, interpolation) -> ClassScores:
    """AP per class and threshold, and mAP, of matched predictions ranked together.

    The predictions may come from several calls of :func:`match_detections` (videos matched
    in groups), concatenated: tied scores rank in the order of the concatenation.

    Args:
      matches: :class:`Matches` of N predictions (``label`` ``int32[N]``, num_classes for
        none; ``score`` ``[N]``; ``true_positive`` ``bool[N, K]``; ``num_positives``
        ``int32[C]``).
      num_classes: static number of classes C.
      interpolation: static ``"all_point"`` or ``"11point"``.

    Returns:
      :class:`ClassScores`: ``per_class`` ``float32[C, K]`` and ``mean`` ``float32[K]``.
    """
    per_class = class_average_precision(
        matches, num_classes=num_classes, interpolation=interpolation
    )
    return ClassScores(per_class, nanmean(per_class.T))
