"""Sharded updates of the dense, top-k, retrieval, frame AP and detection accumulators on 8
simulated CPU devices equal the single-device result exactly (run by ``tests/test_sharding.py``
in a subprocess): ``python tests/_sharded_ranking_check.py [auto] [explicit]``.

Both modes of the AP accumulators are checked: the binned one (additive counts, also merged
by ``shard_map`` + ``psum``) and the buffer of scores (``capacity=``), whose rows must land in
the order of the unsharded batch.
"""

from __future__ import annotations

import os
import sys

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
).strip()
# The eight devices are simulated CPUs: on a machine with a GPU, JAX would take its one GPU.
os.environ["JAX_PLATFORMS"] = "cpu"

import _sharded_check as base
import jax
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


def cases():
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


def main(axis_types) -> int:
    assert jax.device_count() == base.DEVICES, jax.devices()
    cases_ = []
    for mesh in base.meshes(axis_types):
        for name, (acc, arrays, keywords, additive) in cases().items():
            labelled = base.checks(name, acc, mesh, arrays, keywords, additive=additive)
            cases_ += [(mesh, label, thunk) for label, thunk in labelled]
    return base.run(cases_)


if __name__ == "__main__":
    sys.exit(main(base.parse_axis_types(sys.argv[1:])))
