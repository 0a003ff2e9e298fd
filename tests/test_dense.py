"""Tests of pixel accuracy, IoU and Dice (mmsegmentation's pooled convention)."""

from __future__ import annotations

import functools
import json

import _reference_ranking as ref
import jax
import numpy as np
import pytest
from conftest import golden_path

from jaxseg import metrics as M

SHAPE = (6, 48, 48)  # every case is padded to this stack of maps (pads are masked out)


@functools.partial(jax.jit, static_argnames=("num_classes", "spatial_ndim"))
def _dense(targets, predictions, mask, num_classes, spatial_ndim=3):
    kw = dict(num_classes=num_classes, mask=mask, ignore_index=255, spatial_ndim=spatial_ndim)
    return (
        M.pixel_accuracy(targets, predictions, **kw),
        M.iou(targets, predictions, **kw),
        M.dice(targets, predictions, **kw),
    )


def _pad(target, pred):
    t, p = np.zeros(SHAPE, np.uint8), np.zeros(SHAPE, np.uint8)
    m = np.zeros(SHAPE, bool)
    b, h, w = target.shape
    t[:b, :h, :w], p[:b, :h, :w], m[:b, :h, :w] = target, pred, True
    return t, p, m


def _nan(values):
    return np.array([np.nan if v is None else v for v in values], np.float64)


def test_golden_pooled():
    path = golden_path("dense.json")
    if not path.exists():
        pytest.skip(f"golden data not found at {path}")
    data = json.load(open(path))
    z = np.load(golden_path("dense.npz"))
    for case in data["cases"]:
        padded = _pad(z[f"target_{case['key']}"], z[f"pred_{case['key']}"])
        accuracy, iou, dice = _dense(*padded, 21)  # extra classes are absent: NaN, excluded
        c = case["num_classes"]
        np.testing.assert_allclose(
            np.asarray(iou.per_class)[:c], _nan(case["per_class_iou"]), atol=1e-6
        )
        np.testing.assert_allclose(
            np.asarray(dice.per_class)[:c], _nan(case["per_class_dice"]), atol=1e-6
        )
        assert np.isnan(np.asarray(iou.per_class)[c:]).all()
        assert float(iou.mean) == pytest.approx(case["miou"], abs=1e-6)
        assert float(dice.mean) == pytest.approx(case["mdice"], abs=1e-6)
        assert float(accuracy) == pytest.approx(case["pixel_acc"], abs=1e-6)


def test_per_map_values_match_reference():
    rng = np.random.default_rng(0)
    target = rng.integers(0, 5, SHAPE).astype(np.uint8)
    target[rng.random(SHAPE) < 0.1] = 255
    target[0] = 255  # an all-ignored map
    pred = rng.integers(0, 5, SHAPE).astype(np.uint8)
    pred[1] = target[1] % 255  # near-perfect map
    accuracy, iou, dice = _dense(target, pred, np.ones(SHAPE, bool), 7, spatial_ndim=2)
    assert accuracy.shape == (6,) and iou.per_class.shape == (6, 7)
    assert np.isnan(float(accuracy[0])) and np.isnan(np.asarray(iou.per_class[0])).all()
    assert np.isnan(float(iou.mean[0])) and np.isnan(float(dice.mean[0]))
    for b in range(1, 6):
        want = ref.dense_scores(target[b], pred[b], 7, ignore_index=255)
        assert float(accuracy[b]) == pytest.approx(want["pixel_acc"], abs=1e-6)
        np.testing.assert_allclose(np.asarray(iou.per_class[b]), want["iou"], atol=1e-6)
        np.testing.assert_allclose(np.asarray(dice.per_class[b]), want["dice"], atol=1e-6)
        assert float(iou.mean[b]) == pytest.approx(want["miou"], abs=1e-6)
        assert float(dice.mean[b]) == pytest.approx(want["mdice"], abs=1e-6)


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="targets and predictions"):
        M.iou(np.zeros((2, 2), np.int32), np.zeros((2, 3), np.int32), num_classes=2)
    with pytest.raises(TypeError, match="predictions"):
        M.dice(np.zeros((2, 2), np.int32), np.zeros((2, 2)), num_classes=2)
    with pytest.raises(TypeError, match="num_classes"):
        M.pixel_accuracy(np.zeros((2, 2), np.int32), np.zeros((2, 2), np.int32), num_classes=None)


def _mmseg_intersect_and_union(target, pred, num_classes, ignore_index=255):
    """mmsegmentation ``IoUMetric.intersect_and_union`` in numpy (``torch.histc`` over
    [0, C - 1] counts only in-range values): returns (intersect, pred, label) areas."""
    keep = target != ignore_index
    target, pred = target[keep].astype(np.int64), pred[keep].astype(np.int64)

    def histc(x):
        x = x[(x >= 0) & (x <= num_classes - 1)]
        return np.bincount(x, minlength=num_classes).astype(np.float64)

    return histc(pred[pred == target]), histc(pred), histc(target)


def test_labels_outside_the_classes_follow_mmsegmentation():
    """A prediction outside [0, C) is dropped but its target pixel is kept as a miss, and a
    target outside [0, C) (not ignore_index) drops its pixel but keeps its prediction's FP.
    jaxseg used to drop the whole pixel (iou 1.0, pixel_accuracy 1.0 instead of 0.75)."""
    from jaxseg import streaming

    target = np.array([[0, 1], [1, 0]])
    pred = np.array([[0, 1], [1, 5]])
    assert float(M.pixel_accuracy(target, pred, num_classes=2)) == 0.75
    assert float(M.iou(target, pred, num_classes=2).mean) == 0.75
    rng = np.random.default_rng(3)
    target = rng.integers(-2, 7, (4, 9, 9))
    target[rng.random(target.shape) < 0.1] = 255
    pred = rng.integers(-1, 8, (4, 9, 9))
    acc = streaming.dense(num_classes=5, ignore_index=255)
    state = jax.jit(acc.update)(acc.init(), target, pred)
    result = acc.compute(state)
    inter, area_pred, area_label = _mmseg_intersect_and_union(target, pred, 5)
    union = area_pred + area_label - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        want_iou = inter / union
        want_dice = 2 * inter / (area_pred + area_label)
    np.testing.assert_allclose(result["iou"], want_iou, rtol=1e-6)
    np.testing.assert_allclose(result["dice"], want_dice, rtol=1e-6)
    assert float(result["pixel_accuracy"]) == pytest.approx(inter.sum() / area_label.sum())
    assert float(result["miou"]) == pytest.approx(np.nanmean(want_iou), rel=1e-6)
    pooled = M.iou(target, pred, num_classes=5, ignore_index=255, spatial_ndim=3)
    np.testing.assert_allclose(pooled.per_class, want_iou, rtol=1e-6)
    assert result["confusion"].shape == (5, 5) and result["extended_confusion"].shape == (6, 6)
    # labels are compared in their own dtype: 2**32 + 1 is outside, not class 1
    with jax.enable_x64():
        wide = np.array([[2**32 + 1, 1]])
        assert float(M.pixel_accuracy(wide, np.array([[1, 1]]), num_classes=2)) == 1.0


def test_a_batch_of_no_maps_gives_no_values():
    """B = 0: empty results (the pixels per map were inferred from the size, which fails for
    no maps)."""
    maps = np.zeros((0, 4, 4), np.int32)
    assert M.pixel_accuracy(maps, maps, num_classes=3).shape == (0,)
    scores = jax.jit(functools.partial(M.iou, num_classes=3))(maps, maps)
    assert scores.per_class.shape == (0, 3) and scores.mean.shape == (0,)


@pytest.mark.parametrize(
    "dtype, ignore_index, other",
    [(np.int8, 255, -1), (np.uint8, 511, 255), (np.uint8, -1, 255), (np.int8, -1, 100)],
)
def test_ignore_index_is_compared_without_wrapping_into_the_labels_dtype(
    dtype, ignore_index, other
):
    """``ignore_index`` removes the pixels whose target equals it, and no other: 255 with
    int8 labels (mmsegmentation's default) removed the pixels labelled -1 (255 wrapped onto
    int8), and 511 removed a uint8 label 255; a negative one was refused. The numbers equal
    mmsegmentation's on the same labels as int64, where nothing wraps."""
    from jaxseg import streaming

    rng = np.random.default_rng(0)
    target = rng.integers(0, 3, (2, 6, 6))
    target[rng.random(target.shape) < 0.3] = other  # not a class, and not ignore_index
    if np.iinfo(dtype).min <= ignore_index <= np.iinfo(dtype).max:
        target[rng.random(target.shape) < 0.2] = ignore_index
    pred = rng.integers(0, 3, target.shape)
    inter, area_pred, area_label = _mmseg_intersect_and_union(target, pred, 3, ignore_index)
    want_iou = inter / (area_pred + area_label - inter)
    want_accuracy = inter.sum() / area_label.sum()
    labels = target.astype(dtype), pred.astype(dtype)
    kw = dict(num_classes=3, ignore_index=ignore_index, spatial_ndim=3)
    np.testing.assert_allclose(M.iou(*labels, **kw).per_class, want_iou, rtol=1e-6)
    assert float(M.pixel_accuracy(*labels, **kw)) == pytest.approx(want_accuracy, rel=1e-6)
    acc = streaming.dense(num_classes=3, ignore_index=ignore_index)
    result = acc.compute(acc.update(acc.init(), *labels))
    np.testing.assert_allclose(result["iou"], want_iou, rtol=1e-6)


@pytest.mark.parametrize("num_classes", [128, 200, 300])
def test_negative_int8_labels_of_many_classes_are_no_class(num_classes):
    """int8 labels with C >= 128: a label outside [0, C) (here -1 or -128) was replaced by C
    in the labels' own dtype, which wrapped (200 onto -56), so its pixel was counted in
    another class's cell (pixel accuracy 0.5 instead of 0.75, row C of the extended
    confusion empty); the numbers equal mmsegmentation's on the same labels as int64."""
    from jaxseg import streaming

    target = np.array([[0, 100, 127, -1, -128, 5]], np.int8)
    pred = np.array([[0, 100, -128, -1, 127, 5]], np.int8)
    inter, area_pred, area_label = _mmseg_intersect_and_union(
        target.astype(np.int64), pred.astype(np.int64), num_classes, ignore_index=None
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        want_iou = inter / (area_pred + area_label - inter)
    want_accuracy = inter.sum() / area_label.sum()  # 3 / 4
    kw = dict(num_classes=num_classes)
    assert float(M.pixel_accuracy(target, pred, **kw)) == pytest.approx(want_accuracy)
    np.testing.assert_allclose(M.iou(target, pred, **kw).per_class, want_iou, rtol=1e-6)
    acc = streaming.dense(**kw)
    result = acc.compute(acc.update(acc.init(), target, pred))
    assert float(result["pixel_accuracy"]) == pytest.approx(want_accuracy)
    np.testing.assert_allclose(result["iou"], want_iou, rtol=1e-6)
    extended = np.asarray(result["extended_confusion"])
    assert extended[num_classes].sum() == 2 and extended[:, num_classes].sum() == 2
