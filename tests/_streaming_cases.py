"""Inputs of the streaming accumulators that take scores, similarities or windows, shared by
the sharded checks (``tests/_sharded_ranking_check.py``, ``tests/_sharded_grounding_check.py``)
and ``tests/test_half_precision.py``. Importing it changes nothing (the sharded scripts set
their device count before they import JAX; this module does not)."""

from __future__ import annotations

import numpy as np

from jaxseg import streaming

V, N, C = 16, 12, 5  # videos (the sharded axis), rows per video, classes


def windows(rng, shape):
    start = rng.integers(0, 40, shape)
    return np.stack([start, start + rng.integers(1, 12, shape)], -1).astype(np.float32)


def ranking_inputs(rng):
    """Labels (out of range ones too), scores with ties, and masks with padding videos."""
    labels = rng.integers(0, C + 2, (V, N)).astype(np.int32)
    mask = rng.random((V, N)) < 0.8
    mask[[1, 6]] = False
    scores = np.round(rng.random((V, N, C)), 1).astype(np.float32)
    multi_hot = (rng.random((V, N, C)) < 0.3).astype(np.int32)
    return labels, mask, scores, multi_hot


def retrieval_inputs(rng):
    similarity = np.round(rng.random((V, N, N)), 1).astype(np.float32)
    targets = rng.integers(0, N + 1, (V, N)).astype(np.int32)  # N: a match never retrieved
    items = rng.random((V, N)) < 0.9
    return similarity, dict(targets=targets, mask=rng.random((V, N)) < 0.9, item_mask=items)


def detection_inputs(rng):
    gm, pm = rng.random((V, 4)) < 0.8, rng.random((V, 10)) < 0.8
    gm[3] = pm[3] = False  # a padding video
    boxes = (windows(rng, (V, 4)), rng.integers(0, C, (V, 4)).astype(np.int32))
    predicted = (windows(rng, (V, 10)), rng.integers(0, C, (V, 10)).astype(np.int32))
    scores = np.round(rng.random((V, 10)), 2).astype(np.float32)
    return (*boxes, *predicted, scores), dict(target_mask=gm, prediction_mask=pm)


def ranking_cases():
    """``name: (accumulator, arrays, keyword arrays, additive)``."""
    rng = np.random.default_rng(0)
    labels, mask, scores, multi_hot = ranking_inputs(rng)
    predictions = np.where(rng.random((V, N)) < 0.7, labels, rng.integers(0, C, (V, N)))
    similarity, retrieval_keywords = retrieval_inputs(rng)
    detections, detection_masks = detection_inputs(rng)
    frames = dict(num_classes=C, background=(0,), ambiguous=(4,))
    boxes = dict(num_classes=C, iou_thresholds=(0.3, 0.5, 0.7))
    return {
        "dense": (
            streaming.dense(num_classes=C, ignore_index=C + 1),
            (labels, predictions.astype(np.int32)),
            dict(mask=mask),
            True,
        ),
        "top_k": (streaming.top_k(k=(1, 3)), (labels, scores), dict(mask=mask), True),
        "retrieval": (
            streaming.retrieval(num_items=N, k=(1, 5)),
            (similarity,),
            retrieval_keywords,
            True,
        ),
        "frame_average_precision binned": (
            streaming.frame_average_precision(num_thresholds=16, **frames),
            (multi_hot, scores),
            dict(mask=mask),
            True,
        ),
        "frame_average_precision buffer": (
            streaming.frame_average_precision(capacity=V * N, **frames),
            (multi_hot, scores),
            dict(mask=mask),
            False,
        ),
        "detection binned": (
            streaming.detection(num_thresholds=16, **boxes),
            detections,
            detection_masks,
            True,
        ),
        "detection buffer voc": (
            streaming.detection(capacity=V * 10, matching="voc", **boxes),
            detections,
            detection_masks,
            False,
        ),
    }


QUERIES = 32  # queries (videos of proposals): the sharded axis


def grounding_cases():
    """``name: (accumulator, arrays, keyword arrays)`` of the grounding, highlight, moment
    query and proposal accumulators, over QUERIES queries with padding among them."""
    rng = np.random.default_rng(0)
    gm = rng.random((QUERIES, 3)) < 0.7
    gm[[2, 9]] = False  # padding queries
    pm = rng.random((QUERIES, 8)) < 0.8
    grounding = (
        windows(rng, (QUERIES, 3)),
        windows(rng, (QUERIES, 8)),
        np.round(rng.random((QUERIES, 8)), 2).astype(np.float32),
    )
    saliency = (
        rng.integers(0, 5, (QUERIES, 20, 3)).astype(np.int32),
        np.round(rng.random((QUERIES, 20)), 1).astype(np.float32),
    )
    clips = np.arange(20)[None] < rng.integers(0, 21, QUERIES)[:, None]
    videos = (
        windows(rng, (QUERIES, 2, 3)),
        windows(rng, (QUERIES, 2, 8)),
        rng.random((QUERIES, 2, 8)).astype(np.float32),
    )
    vm, vpm = gm[:, None, :].repeat(2, 1), pm[:, None, :].repeat(2, 1)
    return {
        "grounding": (streaming.grounding(), grounding, dict(target_mask=gm, prediction_mask=pm)),
        "highlight": (streaming.highlight(), saliency, dict(mask=clips)),
        "moment_queries": (
            streaming.moment_queries(),
            grounding[:2],
            dict(target_mask=gm, prediction_mask=pm),
        ),
        "proposals": (
            streaming.proposals(capacity=8, max_average_proposals=4, at=(1, 4)),
            videos,
            dict(target_mask=vm, proposal_mask=vpm),
        ),
    }
