"""With ``jax_enable_x64`` the metrics give the numbers they give without it.

JAX sums integers into its default integer, int64 under x64: a count summed without a dtype
then met an int32 one in a loop's carry or a conditional's branches, and most frame,
segmental and unsupervised metrics raised ``TypeError`` (they ran only in 32 bits). Checked
under JAX's standard dtype promotion, a user's default, and under the strict one, where an
``arange`` or a sum without a dtype (int64 under x64) met int32 operands and raised.
"""

from __future__ import annotations

import functools

import jax
import numpy as np
import pytest

from jaxseg import losses, stats, streaming
from jaxseg import metrics as M
from jaxseg import segments as S


@pytest.fixture(params=["standard", "strict"])
def promotion(request):
    """JAX's dtype promotion: a user's default, and the strict one (no implicit int32/int64
    mixing, which x64 makes of every integer sum or ``arange`` without a dtype)."""
    return request.param


def _under_x64(call, *args):
    """``call(*args)`` under x64 and JAX's standard promotion, once the strict promotion has
    traced it to the very same program. Strict promotion only refuses programs (a
    ``TypeError`` while tracing), so the numbers checked under the standard one are the
    strict one's as well, and the program compiles once rather than once per promotion."""
    with jax.enable_x64(True):
        with jax.numpy_dtype_promotion("strict"):
            strict = str(jax.make_jaxpr(call)(*args))
        with jax.numpy_dtype_promotion("standard"):
            assert str(jax.make_jaxpr(call)(*args)) == strict
            return call(*args)


def _batch():
    """6 videos of 60 frames: runs of 1-8 frames of 4 labels, a gap, padding at the end."""
    rng = np.random.default_rng(3)

    def labels():
        runs = rng.integers(0, 4, 60), rng.integers(1, 9, 60)
        return np.repeat(*runs)[:60].astype(np.int32)

    targets = np.stack([labels() for _ in range(6)])
    predictions = np.stack([labels() for _ in range(6)])
    mask = np.arange(60)[None] < rng.integers(20, 61, 6)[:, None]
    mask[:, 5:9] = False
    return targets, predictions, mask


def _update(accumulator, targets, predictions, mask):
    state = accumulator.update(accumulator.init(), targets, predictions, mask=mask)
    return accumulator.compute(state)


CALLS = {
    "confusion_matrix": functools.partial(M.confusion_matrix, num_classes=4),
    "f1_score": functools.partial(M.f1_score, num_classes=4),
    "class_statistics": functools.partial(stats.class_statistics, num_classes=4),
    "segmental_f1": M.segmental_f1,
    "segmental_f1, background": functools.partial(M.segmental_f1, background=(0,)),
    "segmental_f1, legacy end": functools.partial(M.segmental_f1, legacy_asformer_end=True),
    "segmentation_statistics": stats.segmentation_statistics,
    "edit_score": M.edit_score,
    "global_hungarian_scores": functools.partial(
        M.global_hungarian_scores, num_classes=4, num_clusters=4
    ),
    "per_video_hungarian_scores": functools.partial(
        M.per_video_hungarian_scores, num_classes=4, num_clusters=4
    ),
    "streaming.segmentation": functools.partial(_update, streaming.segmentation()),
    "streaming.frame_metrics": functools.partial(_update, streaming.frame_metrics(num_classes=4)),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_x64_gives_the_32_bit_numbers(name):
    targets, predictions, mask = _batch()
    want = CALLS[name](targets, predictions, mask=mask)
    got = _under_x64(lambda t, p: CALLS[name](t, p, mask=mask), targets, predictions)
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, equal_nan=True)


def test_x64_segments_of_masked_labels():
    targets, _, mask = _batch()
    want = S.to_segments(targets, mask=mask)
    got = _under_x64(lambda t: S.to_segments(t, mask=mask), targets)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


SEGMENTAL = {
    "edit_score": M.edit_score,
    "edit_distance": M.edit_distance,
    "segmental_f1": M.segmental_f1,
    "segmental_counts, capacities": functools.partial(
        M.segmental_counts, max_target_segments=40, max_predicted_segments=40
    ),
    "segmentation_statistics": stats.segmentation_statistics,
    "streaming.segmentation": None,  # built per background below
}


@pytest.mark.parametrize("name", sorted(SEGMENTAL))
def test_x64_segmental_metrics_take_64_bit_labels_whole(name):
    """JAX's default integer under x64 is int64 (``jnp.array([0, 1])``): the segmental metrics
    take it, and labels beyond int32 are compared whole, not wrapped onto a small label (2^33
    and 0 would be one label in 32 bits)."""
    targets, predictions, mask = _batch()

    def call(shift, t, p):
        background = (shift,)
        if name == "streaming.segmentation":
            return _update(streaming.segmentation(background=background), t, p, mask)
        return SEGMENTAL[name](t, p, mask=mask, background=background)

    want = call(0, targets, predictions)
    wide_t, wide_p = targets.astype(np.int64), predictions.astype(np.int64)
    big = 2**33  # in 32 bits, label 2^33 + c would be label c
    small = _under_x64(functools.partial(call, 0), wide_t, wide_p)
    shifted = _under_x64(functools.partial(call, big), wide_t + big, wide_p + big)
    leaves = jax.tree_util.tree_leaves
    for got in (small, shifted):
        for a, b in zip(leaves(got), leaves(want), strict=True):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def _ranking_inputs():
    """Per-frame multi-hot targets [60, 4] and float32 scores with ties."""
    rng = np.random.default_rng(7)
    targets = rng.random((60, 4)) < 0.3
    scores = rng.integers(0, 12, (60, 4)).astype(np.float32) / 8  # 0.125 steps: many ties
    return targets, scores


RANKING = {
    "average_precision": lambda t, s: M.average_precision(t[:, 0], s[:, 0]),
    "average_precision, 11point": lambda t, s: M.average_precision(
        t[:, 1], s[:, 1], interpolation="11point"
    ),
    "average_precision, all_point": lambda t, s: M.average_precision(
        t[:, 2], s[:, 2], interpolation="all_point"
    ),
    "mean_average_precision": M.mean_average_precision,
    "calibrated_average_precision": M.calibrated_average_precision,
    "precision_recall_curve": lambda t, s: M.precision_recall_curve(t[:, 3], s[:, 3]),
}


@pytest.mark.parametrize("name", sorted(RANKING))
def test_x64_ranking_of_float64_scores(name, promotion):
    """float64 scores (``jnp.array`` of Python floats under x64) rank as their float32 values
    when those are exact: ties included (the CPU kernel packed their 64-bit keys into 32-bit
    words, and the curve's tie groups read the keys' low 32 bits, equal for 0.5 and 0.25)."""
    targets, scores = _ranking_inputs()
    want = RANKING[name](targets, scores)
    with jax.enable_x64(True), jax.numpy_dtype_promotion(promotion):
        wide = jax.numpy.asarray(scores.astype(np.float64))
        got = RANKING[name](jax.numpy.asarray(targets), wide)
        jitted = jax.jit(RANKING[name])(jax.numpy.asarray(targets), wide)
    leaves = jax.tree_util.tree_leaves
    for out in (got, jitted):
        for a, b in zip(leaves(out), leaves(want), strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, equal_nan=True)


def test_x64_float64_scores_apart_below_float32_stay_apart(promotion):
    """0.5 + 1e-12 ranks above 0.5 in float64 (a tie in float32: AP 0.5, not 1)."""
    with jax.enable_x64(True), jax.numpy_dtype_promotion(promotion):
        scores = jax.numpy.array([0.5 + 1e-12, 0.5])
        assert float(M.average_precision(jax.numpy.array([1, 0]), scores)) == 1.0
        curve = M.precision_recall_curve(jax.numpy.array([1, 0]), scores)
    assert np.asarray(curve.valid).tolist() == [True, True]
    assert float(M.average_precision(np.array([1, 0]), np.array([0.5 + 1e-12, 0.5]))) == 0.5


def test_x64_streaming_score_buffers_keep_float64_scores(promotion):
    """The exact (capacity) modes store scores in float64 under x64: scores apart only in
    float64 were scattered into float32 buffers (a warning, then a tie the batch metric
    does not have)."""
    import warnings

    with jax.enable_x64(True), jax.numpy_dtype_promotion(promotion), warnings.catch_warnings():
        warnings.simplefilter("error")
        jnp = jax.numpy
        frames = streaming.frame_average_precision(num_classes=1, capacity=8)
        state = frames.update(
            frames.init(), jnp.array([[[1], [0]]]), jnp.array([[[0.5 + 1e-12], [0.5]]])
        )
        assert float(frames.compute(state)["map"]) == 1.0
        boxes = (jnp.array([[[0.0, 1.0]], [[3.0, 5.0]]]), jnp.zeros((2, 1), int))
        predicted = jnp.array([[[0.0, 2.0], [1.0, 2.0]], [[1.0, 2.0], [1.0, 2.0]]])
        scores = jnp.array([[0.5, 0.5 + 1e-12], [0.5 + 1e-12, 0.5 + 1e-12]])
        args = (*boxes, predicted, jnp.zeros((2, 2), int), scores)
        detection = streaming.detection(num_classes=1, iou_thresholds=(0.5,), capacity=8)
        got = detection.compute(detection.update(detection.init(), *args))["map"]
        want = M.detection_average_precision(*args, num_classes=1, iou_thresholds=(0.5,)).mean
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_x64_permutation_test_draws_the_same_swaps(promotion):
    """The same key gives the same p-value with x64 (its coin flips drew float64 uniforms)."""
    a = np.array([0.9, 0.8, 0.95, 0.85, 0.9, 0.8, 0.7, 0.92], np.float32)
    b = a - np.float32(0.05) * np.arange(8, dtype=np.float32) % 3

    def mean(x, w):
        return stats.weighted_sum(x, w) / stats.weighted_sum(np.ones_like(x), w)

    def p_value():
        key = jax.random.key(0)
        return float(stats.permutation_test(a, b, mean, key=key, num_samples=199).p_value)

    want = p_value()
    with jax.enable_x64(True), jax.numpy_dtype_promotion(promotion):
        assert p_value() == want


def test_x64_hungarian_matching_of_integer_tables_beyond_float32(promotion):
    """Integer tables are exact to 2**53 under x64, as documented (they went through float32
    first: 2**25 + 1 and 2**25 + 2 were one number)."""
    table = np.array([[2**25 + 1, 2**25 + 2], [2**25 + 2, 2**25 + 2]])
    with jax.enable_x64(True), jax.numpy_dtype_promotion(promotion):
        col_for_row, _ = M.hungarian_matching(jax.numpy.asarray(table))
    assert np.asarray(col_for_row).tolist() == [1, 0]  # total 2**26 + 4, scipy's answer


def test_x64_generalized_dice_loss_keeps_float32(promotion):
    """float32 logits give a float32 loss under x64 (a Python 1.0 made it float64)."""
    logits = np.random.default_rng(0).normal(size=(2, 6, 3)).astype(np.float32)
    labels = np.array([[0, 0, 1, 1, 2, 2], [1, 1, 1, 0, 0, 2]], np.int32)
    want = losses.generalized_dice_loss(logits, labels)
    with jax.enable_x64(True), jax.numpy_dtype_promotion(promotion):
        got = losses.generalized_dice_loss(logits, labels)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("loss", ["soft_edit_loss", "soft_levenshtein"])
def test_x64_soft_dp_losses_keep_a_float64_gamma(loss, promotion):
    """Under x64, float64 logits and gamma 0.3 give the loss of 0.3, not of 0.3 rounded to
    float32 (0.30000001192...), which the DP once took."""
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 2, (2, 6, 3))  # float64
    labels = rng.integers(0, 3, (2, 4 if loss == "soft_levenshtein" else 6)).astype(np.int32)
    fn = getattr(losses, loss)
    with jax.enable_x64(True), jax.numpy_dtype_promotion(promotion):
        exact = np.asarray(fn(logits, labels, gamma=0.3))
        rounded = np.asarray(fn(logits, labels, gamma=float(np.float32(0.3))))
    assert exact.dtype == np.float64
    assert not np.array_equal(exact, rounded)


def test_x64_default_tiou_thresholds_are_the_references(promotion):
    """ActivityNet compares tIoUs with np.linspace(0.5, 0.95, 10), whose ninth threshold is
    0.8999999999999999 under numpy 2, not 0.9: a float64 tIoU of exactly that value is a hit
    there (it missed the decimal 0.9). Moment-DETR's compute_mr_ap rounds the same linspace
    to two decimals, so for MR-mAP that tIoU misses 0.9."""
    target, predicted = np.array([[0.0, 1.0]]), np.array([[0.0, 0.8999999999999999]])
    want = np.asarray(np.linspace(0.5, 0.95, 10) <= 0.8999999999999999, np.float64)
    rounded = np.round(np.linspace(0.5, 0.95, 10), 2)
    want_moment = np.asarray(rounded <= 0.8999999999999999, np.float64)
    assert want[8] == 1.0 and want_moment[8] == 0.0
    with jax.enable_x64(True), jax.numpy_dtype_promotion(promotion):
        detection = M.detection_average_precision(
            target[None],
            np.array([[0]]),
            predicted[None],
            np.array([[0]]),
            np.array([[1.0]]),
            num_classes=1,
        )
        moment = M.moment_retrieval_average_precision(target, predicted, np.array([1.0]))
    np.testing.assert_array_equal(detection.mean, want)
    np.testing.assert_array_equal(moment, want_moment)


def test_x64_interval_ious_follow_float64_windows(promotion):
    """The IoU-valued metrics whose docstrings say so keep float64 windows' precision: an IoU
    of 1 - 1e-12 stays below 1 (float32 would round it to a hit at a threshold of 1)."""
    a = np.array([[0.0, 1.0]])
    b = np.array([[0.0, 1.0 - 1e-12]])
    with jax.enable_x64(True), jax.numpy_dtype_promotion(promotion):
        a64, b64 = jax.numpy.asarray(a), jax.numpy.asarray(b)
        results = {
            "temporal_iou": M.temporal_iou(a64, b64),
            "box_iou": M.box_iou(jax.numpy.asarray([[0.0, 0.0, 1.0, 1.0]]), b64[:, [0, 0, 1, 1]]),
            "grounding_iou": M.grounding_iou(a64, b64),
            "grounding_recall": M.grounding_recall(a64, b64, k=(1,), iou_thresholds=(1.0,)),
            "moment_retrieval_average_precision": M.moment_retrieval_average_precision(
                a64, b64, jax.numpy.ones(1), iou_thresholds=(1.0,)
            ),
        }
    for name, value in results.items():
        assert value.dtype == np.float64, name
    assert float(results["temporal_iou"][0, 0]) < 1.0 and float(results["grounding_iou"]) < 1.0
    assert float(results["grounding_recall"][0, 0]) == 0.0
    assert float(results["moment_retrieval_average_precision"][0]) == 0.0


def test_weighted_sums_of_int64_values_are_int64():
    """Under x64, int64 per-video values were summed in int32: 2**40 and 1 summed to 1,
    silently (without x64 such a value is refused as it enters JAX)."""
    with jax.enable_x64(True):
        total = stats.weighted_sum(np.array([2**40, 1], np.int64), np.array([2, 1]))
        assert total.dtype == np.int64 and int(total) == 2**41 + 1
        small = stats.weighted_sum(np.array([3, 1], np.int8), np.array([2, 1]))
        assert small.dtype == np.int32 and int(small) == 7
