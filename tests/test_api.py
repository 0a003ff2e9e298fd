"""The public API's shape: data arguments first, in the shared names, options keyword-only.

Metrics take ``(targets, predictions)`` (or ``(targets, scores)`` for rankings), losses
``(logits, labels)``; everything after the data is keyword-only, and an option means the same
thing under the same name everywhere. A function whose data does not fit the pair says so in
``_DATA`` below, so that a new one cannot drift silently.
"""

import inspect

import pytest

import jaxseg

# Functions whose data is not a (truth, prediction) pair of the usual names.
_DATA = {
    "box_iou": ("boxes_a", "boxes_b"),  # symmetric geometry
    "temporal_iou": ("segments_a", "segments_b"),
    "detection_average_precision": (
        "gt_boxes",
        "gt_labels",
        "pred_boxes",
        "pred_labels",
        "pred_scores",
    ),
    "mean_rank": ("similarity",),  # one query-by-item matrix
    "mean_reciprocal_rank": ("similarity",),
    "median_rank": ("similarity",),
    "recall_at_k": ("similarity",),
    "retrieval_ranks": ("similarity",),
    "hungarian_matching": ("table",),  # a contingency table
    "moment_retrieval_average_precision": ("targets", "predictions", "scores"),
    "proposal_average_recall": ("targets", "proposals", "scores"),
    "temporal_iou_loss": ("predictions", "targets"),  # interval regression, optax's order
    "temporal_giou_loss": ("predictions", "targets"),
    "temporal_diou_loss": ("predictions", "targets"),
}

# Every keyword option of the metrics and losses, one meaning per name.
_OPTIONS = {
    "alpha", "ambiguous", "at", "average", "background", "backward", "beta", "classes",
    "comparison", "event_ndim", "exclude_background", "f1", "form", "gamma", "gt_mask",
    "ignore_index", "interpolation", "iou_divisor", "iou_thresholds", "item_mask", "k",
    "label_mask", "legacy_asformer_end", "mask", "matching", "max_average_proposals",
    "max_predicted_segments", "max_predictions", "max_segments", "max_target_segments",
    "min_score", "mode", "normalize", "num_classes", "num_clusters", "num_cols",
    "num_positives", "num_rows", "overlaps", "pred_mask", "prediction_mask", "proposal_mask",
    "ranks", "segments_per_video", "smooth", "spatial_ndim", "stride", "target_mask",
    "targets", "threshold", "ties",
}  # fmt: skip


def _public(module):
    """The functions of ``module.__all__`` (result types such as ``ProposalCurve`` left out)."""
    return [
        (name, getattr(module, name))
        for name in module.__all__
        if not isinstance(getattr(module, name), type)
    ]


_FUNCTIONS = [(m.__name__, *f) for m in (jaxseg.metrics, jaxseg.losses) for f in _public(m)]


@pytest.mark.parametrize("module, name, fn", _FUNCTIONS, ids=[f[1] for f in _FUNCTIONS])
def test_data_first_in_shared_names_then_keyword_only_options(module, name, fn):
    parameters = list(inspect.signature(fn).parameters.values())
    data = [p.name for p in parameters if p.kind is p.POSITIONAL_OR_KEYWORD]
    if name in _DATA:
        expected = [_DATA[name]]
    elif module == "jaxseg.losses":
        expected = [("logits", "labels")]
    else:
        expected = [("targets", "predictions"), ("targets", "scores")]
    assert tuple(data) in expected, f"{name}{inspect.signature(fn)}"
    options = {p.name for p in parameters if p.kind is p.KEYWORD_ONLY}
    assert not [p for p in parameters if p.kind in (p.VAR_POSITIONAL, p.POSITIONAL_ONLY)]
    assert options <= _OPTIONS, f"{name}: options outside the vocabulary: {options - _OPTIONS}"


@pytest.mark.parametrize("module", [jaxseg.metrics, jaxseg.losses, jaxseg.segments, jaxseg.io])
def test_all_is_sorted_and_complete(module):
    assert list(module.__all__) == sorted(module.__all__)
    for name in module.__all__:
        assert getattr(module, name).__doc__, f"{module.__name__}.{name} has no docstring"
