"""Contract cases of the ranking, retrieval, detection and dense metrics (see _contract.py)."""

from __future__ import annotations

import numpy as np
from _contract import Case

from jaxseg import metrics as M

C_FRAMES, ITEMS, VIDEOS, GT, PRED = 4, 12, 3, 3, 5


def _binary_scores(rng, lead, T):
    """Binary targets and scores with ties (rounded), ``[..., T]`` each."""
    targets = (rng.random((*lead, T)) < 0.4).astype(np.int32)
    scores = np.round(rng.random((*lead, T)) * 4).astype(np.float32) / 4
    return targets, scores


def _multi_hot(rng, lead, T):
    targets = np.eye(C_FRAMES, dtype=np.int32)[rng.integers(0, C_FRAMES, (*lead, T))]
    return targets, rng.random((*lead, T, C_FRAMES)).astype(np.float32)


def _top_k(rng, lead, T):
    targets = rng.integers(0, C_FRAMES, (*lead, T)).astype(np.int32)
    return targets, np.round(rng.random((*lead, T, C_FRAMES)) * 3).astype(np.float32)


def _similarity(rng, lead, T):
    sim = np.round(rng.random((*lead, T, ITEMS)) * 5).astype(np.float32)
    return sim, rng.integers(0, ITEMS, (*lead, T)).astype(np.int32)


def _intervals(rng, shape):
    start = rng.uniform(0, 10, shape)
    return np.stack([start, start + rng.uniform(0.5, 5, shape)], -1).astype(np.float32)


def _boxes(rng, shape):
    return np.concatenate(
        [
            _intervals(rng, shape)[..., [0]],
            _intervals(rng, shape)[..., [0]],
            _intervals(rng, shape)[..., [1]] + 10,
            _intervals(rng, shape)[..., [1]] + 10,
        ],
        -1,
    ).astype(np.float32)


def _pairs(width):
    make = _intervals if width == 2 else _boxes
    return lambda rng, lead, T: (make(rng, (*lead, 4)), make(rng, (*lead, T)))


def _detections(width):
    make = _intervals if width == 2 else _boxes

    def args(rng, lead, T):
        return (
            make(rng, (*lead, VIDEOS, GT)),
            rng.integers(0, 3, (*lead, VIDEOS, GT)).astype(np.int32),
            make(rng, (*lead, VIDEOS, PRED)),
            rng.integers(0, 3, (*lead, VIDEOS, PRED)).astype(np.int32),
            rng.random((*lead, VIDEOS, PRED)).astype(np.float32),
        )

    return args


def _labels(rng, lead, T):
    return tuple(rng.integers(0, 4, (*lead, T)).astype(np.int32) for _ in range(2))


def _curve_canonical(curve):
    """The valid points of each row, packed first and NaN-padded to a fixed width."""
    valid = np.asarray(curve.valid)
    rows = valid.reshape(-1, valid.shape[-1])
    out = np.full((rows.shape[0], 3, 16), np.nan)
    fields = [np.asarray(x).reshape(rows.shape) for x in curve[:3]]
    for r, keep in enumerate(rows):
        for f, x in enumerate(fields):
            out[r, f, : keep.sum()] = x[r][keep]
    return out


def _retrieval(fn):
    def call(similarity, targets, mask=None, **kwargs):
        return fn(similarity, targets=targets, mask=mask, **kwargs)

    return call


def _ranks(similarity, targets, **kwargs):
    return M.retrieval_ranks(similarity, targets=targets, **kwargs)


_SCORES = ("targets", "scores")
_DETECTION = ("target_boxes", "target_labels", "predicted_boxes", "predicted_labels", "scores")
_DENSE = dict(num_classes=5, ignore_index=3, spatial_ndim=1)
_SIM = ("similarity", "targets")

CASES = [
    Case(
        "jaxseg.metrics.average_precision",
        M.average_precision,
        _binary_scores,
        _SCORES,
        integer_args=("targets",),
    ),
    Case(
        "jaxseg.metrics.average_precision",
        M.average_precision,
        _binary_scores,
        _SCORES,
        kwargs=dict(interpolation="11point"),
        integer_args=("targets",),
    ),
    Case(
        "jaxseg.metrics.average_precision",
        M.average_precision,
        _binary_scores,
        _SCORES,
        kwargs=dict(interpolation="all_point"),
        integer_args=("targets",),
    ),
    Case(
        "jaxseg.metrics.precision_recall_curve",
        M.precision_recall_curve,
        _binary_scores,
        _SCORES,
        integer_args=("targets",),
        out_dtype=("float32", "float32", "float32", "bool"),
        canonical=_curve_canonical,
    ),
    Case(
        "jaxseg.metrics.mean_average_precision",
        M.mean_average_precision,
        _multi_hot,
        _SCORES,
        (2, 2),
        (-2, -2),
        dict(background=(0,), ambiguous=(3,)),
        integer_args=("targets",),
    ),
    Case(
        "jaxseg.metrics.calibrated_average_precision",
        M.calibrated_average_precision,
        _multi_hot,
        _SCORES,
        (2, 2),
        (-2, -2),
        dict(background=(0,)),
        integer_args=("targets",),
    ),
    Case(
        "jaxseg.metrics.top_k_accuracy",
        M.top_k_accuracy,
        _top_k,
        _SCORES,
        (1, 2),
        (-1, -2),
        dict(k=(1, 2)),
        integer_args=("targets",),
    ),
    Case(
        "jaxseg.metrics.retrieval_ranks",
        _ranks,
        _similarity,
        _SIM,
        (2, 1),
        (None, None),
        dict(ties="average"),
        takes_mask=False,
        integer_args=("targets",),
    ),
    Case(
        "jaxseg.metrics.recall_at_k",
        _retrieval(M.recall_at_k),
        _similarity,
        _SIM,
        (2, 1),
        (-2, -1),
        dict(k=(1, 3)),
        integer_args=("targets",),
    ),
    Case(
        "jaxseg.metrics.mean_reciprocal_rank",
        _retrieval(M.mean_reciprocal_rank),
        _similarity,
        _SIM,
        (2, 1),
        (-2, -1),
        dict(ties="optimistic"),
        integer_args=("targets",),
    ),
    Case(
        "jaxseg.metrics.median_rank",
        _retrieval(M.median_rank),
        _similarity,
        _SIM,
        (2, 1),
        (-2, -1),
        integer_args=("targets",),
    ),
    Case(
        "jaxseg.metrics.mean_rank",
        _retrieval(M.mean_rank),
        _similarity,
        _SIM,
        (2, 1),
        (-2, -1),
        integer_args=("targets",),
    ),
    Case(
        "jaxseg.metrics.temporal_iou",
        M.temporal_iou,
        _pairs(2),
        ("segments_a", "segments_b"),
        (2, 2),
        (None, None),
        takes_mask=False,
        integer_args=(),
    ),
    Case(
        "jaxseg.metrics.box_iou",
        M.box_iou,
        _pairs(4),
        ("boxes_a", "boxes_b"),
        (2, 2),
        (None, None),
        takes_mask=False,
        integer_args=(),
    ),
    Case(
        "jaxseg.metrics.detection_average_precision",
        M.detection_average_precision,
        _detections(2),
        _DETECTION,
        (3, 2, 3, 2, 2),
        (None,) * 5,
        dict(num_classes=3, iou_thresholds=(0.3, 0.7)),
        takes_mask=False,
        integer_args=("gt_labels", "pred_labels"),
    ),
    Case(
        "jaxseg.metrics.detection_average_precision",
        M.detection_average_precision,
        _detections(4),
        _DETECTION,
        (3, 2, 3, 2, 2),
        (None,) * 5,
        dict(num_classes=3, iou_thresholds=(0.5,), interpolation="11point", matching="voc"),
        takes_mask=False,
        integer_args=("gt_labels", "pred_labels"),
    ),
    Case(
        "jaxseg.metrics.pixel_accuracy",
        M.pixel_accuracy,
        _labels,
        ("targets", "predictions"),
        kwargs=_DENSE,
    ),
    Case("jaxseg.metrics.iou", M.iou, _labels, ("targets", "predictions"), kwargs=_DENSE),
    Case("jaxseg.metrics.dice", M.dice, _labels, ("targets", "predictions"), kwargs=_DENSE),
]
