"""The public API's shape: data arguments first, in the shared names, options keyword-only.

Metrics take ``(targets, predictions)`` (or ``(targets, scores)`` for rankings), losses
``(logits, labels)``, streaming updates the same data after the state, and the statistics
``statistics`` (per-video statistics, ``_a`` / ``_b`` for two models); everything after the
data is keyword-only, and an option means the same thing under the same name everywhere. A
function whose data does not fit says so in ``_DATA`` below, so that a new one cannot drift
silently. Names renamed after jaxseg 0.1 still work as keywords, with a DeprecationWarning.
"""

import inspect
import warnings

import jax
import numpy as np
import pytest

import jaxseg

# Functions whose data is not a (truth, prediction) pair of the usual names, and why.
_DATA = {
    "box_iou": ("boxes_a", "boxes_b"),  # symmetric geometry, no truth
    "temporal_iou": ("segments_a", "segments_b"),
    # Detection tables: a boxes / labels pair on each side, and one score per prediction.
    "detection_average_precision": (
        "target_boxes",
        "target_labels",
        "predicted_boxes",
        "predicted_labels",
        "scores",
    ),
    "mean_rank": ("similarity",),  # one query-by-item matrix; targets is an option
    "mean_reciprocal_rank": ("similarity",),
    "median_rank": ("similarity",),
    "recall_at_k": ("similarity",),
    "retrieval_ranks": ("similarity",),
    "hungarian_matching": ("table",),  # a contingency table
    "moment_retrieval_average_precision": ("targets", "predictions", "scores"),
    "proposal_average_recall": ("targets", "proposals", "scores"),  # proposals have no label
    # Interval regression takes intervals, not logits: the metrics' pair (the losses are
    # symmetric, so jaxseg 0.1's (predictions, targets) order gives the same numbers).
    "temporal_iou_loss": ("targets", "predictions"),
    "temporal_giou_loss": ("targets", "predictions"),
    "temporal_diou_loss": ("targets", "predictions"),
}

# Every keyword option, one meaning per name. Names that look alike but differ in meaning:
# - masks: `mask` (valid frames / items of the data), `target_mask` and `prediction_mask`
#   (targets and predictions with item axes of their own), `proposal_mask` (for `proposals`),
#   `item_mask` (retrieval's gallery items, a second axis beside the queries of `mask`),
#   `label_mask` (the label sequence of `soft_levenshtein`, apart from the logits' frames);
# - capacities: `max_segments` (one sequence's segments, losses), `max_target_segments` and
#   `max_predicted_segments` (each side of a metric), `capacity` (an accumulator's buffer);
#   `max_predictions` and `max_average_proposals` are no capacities but how many of the
#   ranked predictions are scored (Moment-DETR's top 10, ActivityNet's AR@AN);
# - thresholds: `iou_thresholds` everywhere (segmental F1, detection, grounding, proposals);
#   `threshold` is `smoothing_loss`'s clamp and `num_thresholds` the number of score bins of
#   an accumulator.
_OPTIONS = {
    "alpha", "ambiguous", "at", "average", "background", "backward", "beta", "classes",
    "comparison", "event_ndim", "exclude_background", "f1", "form", "gamma",
    "ignore_index", "interpolation", "iou_divisor", "iou_thresholds", "item_mask", "k",
    "label_mask", "legacy_asformer_end", "mask", "matching", "max_average_proposals",
    "max_predicted_segments", "max_predictions", "max_segments", "max_target_segments",
    "min_score", "mode", "normalize", "num_classes", "num_clusters", "num_cols",
    "num_positives", "num_rows", "prediction_mask", "proposal_mask",
    "ranks", "segments_per_video", "smooth", "spatial_ndim", "stride", "target_mask",
    "targets", "threshold", "ties",
}  # fmt: skip

# Options of the accumulator factories and of jaxseg.stats, beside those above.
_FACTORY_OPTIONS = {
    "capacity", "map_thresholds", "min_scores", "num_annotators", "num_items",
    "num_thresholds", "protocol",
}  # fmt: skip
_STATS_OPTIONS = {
    "alternative", "batch_size", "class_stats", "class_stats_a", "class_stats_b",
    "confidence", "key", "method", "num_samples", "num_videos", "seed", "strata",
}  # fmt: skip

# The data of jaxseg.stats: per-video statistics, or what they are computed from.
_STATS_DATA = {
    "bootstrap": ("statistics", "metric_fn"),
    "bootstrap_replicates": ("statistics", "metric_fn"),
    "paired_bootstrap_test": ("statistics_a", "statistics_b", "metric_fn"),
    "permutation_test": ("statistics_a", "statistics_b", "metric_fn"),
    "segmentation_intervals": ("statistics",),
    "segmentation_comparison": ("statistics_a", "statistics_b"),
    "class_statistics": ("targets", "predictions"),
    "segmentation_statistics": ("targets", "predictions"),
    "resample_indices": ("key",),
    "weighted_sum": ("values", "weights"),
    "class_metrics": ("statistics", "weights"),
    "segmentation_metrics": ("statistics", "weights"),
    "dataset_metrics": ("statistics",),
}

# One way to build each accumulator, and the data its update takes when not the pair.
_ACCUMULATORS = {
    "dense": dict(num_classes=3),
    "detection": dict(num_classes=2, capacity=4),
    "frame_average_precision": dict(num_classes=2, capacity=4),
    "frame_metrics": dict(num_classes=2),
    "global_hungarian": dict(num_classes=2, num_clusters=2),
    "grounding": {},
    "highlight": {},
    "moment_queries": {},
    "per_video_hungarian": dict(num_classes=2, num_clusters=2),
    "proposals": {},
    "retrieval": dict(num_items=3),
    "segmentation": {},
    "top_k": {},
}
_UPDATE_DATA = {
    "detection": _DATA["detection_average_precision"],
    "grounding": ("targets", "predictions", "scores"),  # scores: optional, for MR-mAP
    "proposals": _DATA["proposal_average_recall"],
    "retrieval": ("similarity",),
}


def _public(module):
    """The functions of ``module.__all__`` (result types such as ``ProposalCurve`` left out)."""
    return [
        (name, getattr(module, name))
        for name in module.__all__
        if not isinstance(getattr(module, name), type)
    ]


def _split(parameters):
    """(names of the data arguments, names of the keyword-only options)."""
    data = tuple(p.name for p in parameters if p.kind is p.POSITIONAL_OR_KEYWORD)
    options = {p.name for p in parameters if p.kind is p.KEYWORD_ONLY}
    assert not [p for p in parameters if p.kind in (p.VAR_POSITIONAL, p.POSITIONAL_ONLY)]
    return data, options


_FUNCTIONS = [(m.__name__, *f) for m in (jaxseg.metrics, jaxseg.losses) for f in _public(m)]


@pytest.mark.parametrize("module, name, fn", _FUNCTIONS, ids=[f[1] for f in _FUNCTIONS])
def test_data_first_in_shared_names_then_keyword_only_options(module, name, fn):
    data, options = _split(list(inspect.signature(fn).parameters.values()))
    if name in _DATA:
        expected = [_DATA[name]]
    elif module == "jaxseg.losses":
        expected = [("logits", "labels")]
    else:
        expected = [("targets", "predictions"), ("targets", "scores")]
    assert data in expected, f"{name}{inspect.signature(fn)}"
    assert options <= _OPTIONS, f"{name}: options outside the vocabulary: {options - _OPTIONS}"


def test_every_accumulator_is_checked():
    factories = {name for name, fn in _public(jaxseg.streaming) if name != "to_int"}
    assert factories == set(_ACCUMULATORS)


@pytest.mark.parametrize("name", sorted(_ACCUMULATORS))
def test_accumulator_updates_take_the_metrics_data_names(name):
    factory = getattr(jaxseg.streaming, name)
    data, options = _split(list(inspect.signature(factory).parameters.values()))
    assert not data, f"{name}: factory options must be keyword-only"
    assert options <= _OPTIONS | _FACTORY_OPTIONS, options - _OPTIONS - _FACTORY_OPTIONS
    update = factory(**_ACCUMULATORS[name]).update
    state, *rest = inspect.signature(update).parameters.values()
    assert state.name == "state"
    data, options = _split(rest)
    expected = [_UPDATE_DATA[name]] if name in _UPDATE_DATA else [
        ("targets", "predictions"), ("targets", "scores")
    ]  # fmt: skip
    assert data in expected, f"{name}.update{inspect.signature(update)}"
    assert options <= _OPTIONS, options - _OPTIONS


@pytest.mark.parametrize(
    "name, fn", _public(jaxseg.stats), ids=[f[0] for f in _public(jaxseg.stats)]
)
def test_statistics_functions_use_the_shared_names(name, fn):
    data, options = _split(list(inspect.signature(fn).parameters.values()))
    assert data == _STATS_DATA[name], f"{name}{inspect.signature(fn)}"
    vocabulary = _OPTIONS | _STATS_OPTIONS
    assert options <= vocabulary, f"{name}: options outside the vocabulary: {options - vocabulary}"


@pytest.mark.parametrize("module", [jaxseg.metrics, jaxseg.losses, jaxseg.segments, jaxseg.io])
def test_all_is_sorted_and_complete(module):
    assert list(module.__all__) == sorted(module.__all__)
    for name in module.__all__:
        assert getattr(module, name).__doc__, f"{module.__name__}.{name} has no docstring"


# --------------------------------------------------------------------------------------------
# The names of jaxseg 0.1 still work, and warn.
# --------------------------------------------------------------------------------------------
def _detection_tables():
    boxes = np.array([[[0.0, 10.0], [20.0, 30.0]]], np.float32)
    predicted = np.array([[[0.0, 9.0], [21.0, 30.0], [0.0, 10.0]]], np.float32)
    labels, predicted_labels = np.array([[0, 1]]), np.array([[0, 1, 0]])
    scores = np.array([[0.9, 0.8, 0.7]], np.float32)
    masks = np.array([[True, False]]), np.array([[True, True, False]])
    return (boxes, labels, predicted, predicted_labels, scores), masks


_OLD_DETECTION_NAMES = ("gt_boxes", "gt_labels", "pred_boxes", "pred_labels", "pred_scores")


def _warns_once(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    deprecations = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert deprecations, "no DeprecationWarning"
    assert all("is deprecated, use" in str(w.message) for w in deprecations)
    return result


def test_detection_average_precision_old_keywords_warn_and_agree():
    tables, (target_mask, prediction_mask) = _detection_tables()
    kw = dict(num_classes=2, iou_thresholds=(0.5, 0.95))
    new = jaxseg.metrics.detection_average_precision(
        *tables, target_mask=target_mask, prediction_mask=prediction_mask, **kw
    )
    old = _warns_once(
        lambda: jaxseg.metrics.detection_average_precision(
            **dict(zip(_OLD_DETECTION_NAMES, tables)), gt_mask=target_mask,
            pred_mask=prediction_mask, **kw,
        )
    )  # fmt: skip
    np.testing.assert_array_equal(old.per_class, new.per_class)
    with pytest.raises(TypeError, match="both 'gt_mask'"):
        jaxseg.metrics.detection_average_precision(
            *tables, gt_mask=target_mask, target_mask=target_mask, **kw
        )


def test_streaming_detection_update_old_keywords_warn_and_agree():
    tables, (target_mask, prediction_mask) = _detection_tables()
    acc = jaxseg.streaming.detection(num_classes=2, iou_thresholds=(0.5,), capacity=8)
    new = acc.update(acc.init(), *tables, target_mask=target_mask, prediction_mask=prediction_mask)
    old = _warns_once(
        lambda: acc.update(acc.init(), *tables, gt_mask=target_mask, pred_mask=prediction_mask)
    )
    for a, b in zip(jax.tree_util.tree_leaves(old), jax.tree_util.tree_leaves(new), strict=True):
        np.testing.assert_array_equal(a, b)


def test_evaluator_add_old_keywords_warn_and_agree():
    targets, predictions = [1, 1, 0, 2, 2], [1, 1, 0, 0, 2]
    new, old = jaxseg.Evaluator(background=(0,)), jaxseg.Evaluator(background=(0,))
    new.add(targets=targets, predictions=predictions)
    _warns_once(lambda: old.add(gt=targets, pred=predictions))
    got, want = old.get(), new.get()
    assert got.keys() == want.keys()
    for key, value in want.items():
        np.testing.assert_equal(got[key], value)


def test_statistics_old_keywords_warn_and_agree():
    values = np.array([0.2, 0.4, 0.6, 0.8], np.float32)

    def mean(statistics, weights):
        return jaxseg.stats.weighted_sum(statistics, weights) / weights.sum().astype(np.float32)

    kw = dict(key=jax.random.key(0), num_samples=200)
    new = jaxseg.stats.bootstrap(values, mean, **kw)
    old = _warns_once(lambda: jaxseg.stats.bootstrap(stats=values, metric_fn=mean, **kw))
    np.testing.assert_array_equal(old.lower, new.lower)
    paired = _warns_once(
        lambda: jaxseg.stats.permutation_test(stats_a=values, stats_b=values[::-1],
                                              metric_fn=mean, **kw)
    )  # fmt: skip
    np.testing.assert_array_equal(
        paired.p_value, jaxseg.stats.permutation_test(values, values[::-1], mean, **kw).p_value
    )


def test_overlaps_is_the_old_name_of_iou_thresholds():
    targets = np.array([[1, 1, 1, 0, 2, 2, 2, 2]])
    predictions = np.array([[1, 1, 0, 0, 2, 2, 1, 1]])
    new = jaxseg.metrics.segmental_f1(targets, predictions, iou_thresholds=(0.5, 0.75))
    old = _warns_once(
        lambda: jaxseg.metrics.segmental_f1(targets, predictions, overlaps=(0.5, 0.75))
    )
    np.testing.assert_array_equal(old, new)
    assert not np.array_equal(new, jaxseg.metrics.segmental_f1(targets, predictions))
    accumulator = _warns_once(lambda: jaxseg.streaming.segmentation(overlaps=(0.5,)))
    state = accumulator.update(accumulator.init(), targets, predictions)
    assert accumulator.compute(state)["f1"].shape == (1,)
    evaluator = _warns_once(lambda: jaxseg.Evaluator(overlaps=(0.5,)))
    assert evaluator.iou_thresholds == (0.5,)
    with pytest.raises(TypeError, match="both"):
        jaxseg.metrics.segmental_f1(targets, predictions, overlaps=(0.5,), iou_thresholds=(0.5,))
