"""Tests of temporal / box IoU and detection mAP (ActivityNet and VOC matching)."""

from __future__ import annotations

import functools
import json

import _reference_ranking as ref
import jax
import numpy as np
import pytest
from conftest import golden_path

from jaxseg import metrics as M
from jaxseg import streaming as S
from jaxseg._src import checks, detection

V, G, P, C = 16, 16, 64, 20  # padded table shape shared by every test (few compiles)


def to_tables(gt, pred, width=2, videos=V):
    """Flat lists -> padded per-video tables ``(gb, gl, gm, pb, pl, ps, pm)``."""
    gb, gl, gm = (
        np.zeros((videos, G, width), np.float32),
        np.zeros((videos, G), np.int32),
        np.zeros((videos, G), bool),
    )
    pb, pl, ps, pm = (
        np.zeros((videos, P, width), np.float32),
        np.zeros((videos, P), np.int32),
        np.zeros((videos, P), np.float32),
        np.zeros((videos, P), bool),
    )
    gcount, pcount = [0] * videos, [0] * videos
    for v, box, label in gt:
        k = gcount[v]
        gcount[v] += 1
        gb[v, k], gl[v, k], gm[v, k] = box, label, True
    for v, box, label, score in pred:
        k = pcount[v]
        pcount[v] += 1
        pb[v, k], pl[v, k], ps[v, k], pm[v, k] = box, label, score, True
    return gb, gl, gm, pb, pl, ps, pm


@functools.partial(jax.jit, static_argnames=("thresholds", "interpolation", "matching"))
def _detection(
    gb, gl, gm, pb, pl, ps, pm, thresholds, interpolation="all_point", matching="activitynet"
):
    return M.detection_average_precision(
        gb,
        gl,
        pb,
        pl,
        ps,
        num_classes=C,
        iou_thresholds=thresholds,
        target_mask=gm,
        prediction_mask=pm,
        interpolation=interpolation,
        matching=matching,
    )


def test_golden_activitynet():
    path = golden_path("detection.json")
    if not path.exists():
        pytest.skip(f"golden data not found at {path}")
    data = json.load(open(path))
    z = np.load(golden_path("detection.npz"))
    batches = []
    for case in data["cases"]:
        k = case["key"]
        gt = list(zip(z[f"gt_video_{k}"], z[f"gt_segment_{k}"], z[f"gt_label_{k}"], strict=True))
        pred = list(
            zip(
                z[f"pred_video_{k}"],
                z[f"pred_segment_{k}"],
                z[f"pred_label_{k}"],
                z[f"pred_score_{k}"],
                strict=True,
            )
        )
        batches.append(to_tables(gt, pred))
    stacked = [np.stack(x) for x in zip(*batches, strict=True)]  # leading batch of cases
    for name, thresholds in data["tiou_thresholds"].items():
        result = _detection(*stacked, tuple(thresholds))
        for i, case in enumerate(data["cases"]):
            per_class = np.asarray(result.per_class[i])
            for c in range(C):
                want = case[name]["ap"].get(str(c))
                if want is None:
                    assert np.isnan(per_class[c]).all(), (case["name"], c)
                else:
                    np.testing.assert_allclose(per_class[c], want, atol=1e-6, rtol=0)
            np.testing.assert_allclose(np.asarray(result.mean[i]), case[name]["mAP"], atol=1e-6)


def _random_dataset(seed, width):
    rng = np.random.default_rng(seed)
    gt, pred = [], []
    for v in range(V - 2):  # the last two videos stay empty
        for _ in range(rng.integers(0, 6)):
            gt.append((v, _random_box(rng, width), int(rng.integers(0, 6))))
        for _ in range(rng.integers(0, 20)):
            if gt and rng.random() < 0.6:  # a jittered copy of some ground truth
                base = gt[rng.integers(0, len(gt))]
                box = np.asarray(base[1]) + rng.normal(0, 1.5, width)
                box = np.concatenate(
                    [
                        np.minimum(box[: width // 2], box[width // 2 :]),
                        np.maximum(box[: width // 2], box[width // 2 :]) + 0.5,
                    ]
                )
                label = base[2] if rng.random() < 0.8 else int(rng.integers(0, 7))
                pred.append((base[0], box.astype(np.float32), label, 0.0))
            else:
                pred.append((v, _random_box(rng, width), int(rng.integers(0, 7)), 0.0))
    scores = rng.permutation(len(pred)) / max(len(pred), 1)  # distinct scores
    scores = np.round(scores, 1) if seed % 2 else scores  # odd seeds: many tied scores
    pred = [(v, b, label, np.float32(s)) for (v, b, label, _), s in zip(pred, scores, strict=True)]
    return gt, pred


def _random_box(rng, width):
    start = rng.uniform(0, 40, width // 2)
    return np.concatenate([start, start + rng.uniform(1, 15, width // 2)]).astype(np.float32)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(
    "width, interpolation, matching",
    [(2, "all_point", "activitynet"), (4, "11point", "voc"), (4, "all_point", "activitynet")],
)
def test_random_matches_reference_loop(seed, width, interpolation, matching):
    thresholds = (0.3, 0.5, 0.7)
    gt, pred = _random_dataset(seed, width)
    result = _detection(*to_tables(gt, pred, width), thresholds, interpolation, matching)
    # The reference ranks tied scores in input order (video, then index): sort pred likewise.
    want, mean = ref.detection_ap(
        gt, sorted(pred, key=lambda x: x[0]), C, thresholds, interpolation, matching
    )
    np.testing.assert_allclose(np.asarray(result.per_class), want, atol=1e-6, rtol=0)
    np.testing.assert_allclose(np.asarray(result.mean), mean, atol=1e-6, rtol=0)


def test_degenerate_cases():
    thresholds = (0.5,)
    seg = np.array([0.0, 10.0], np.float32)
    # class 0: GT, no prediction -> 0; class 1: prediction, no GT -> NaN; no GT at all -> NaN.
    result = _detection(*to_tables([(0, seg, 0)], [(1, seg, 1, 0.5)]), thresholds)
    per_class = np.asarray(result.per_class)
    assert per_class[0, 0] == 0.0 and np.isnan(per_class[1:]).all()
    assert float(result.mean[0]) == 0.0
    empty = _detection(*to_tables([], []), thresholds)
    assert np.isnan(np.asarray(empty.per_class)).all() and np.isnan(float(empty.mean[0]))
    # A prediction in a video without GT of its class is a false positive.
    result = _detection(*to_tables([(0, seg, 0)], [(1, seg, 0, 0.9), (0, seg, 0, 0.8)]), thresholds)
    assert float(result.per_class[0, 0]) == pytest.approx(0.5)
    # Threshold test is >=: tIoU exactly 0.5 matches.
    half = np.array([0.0, 5.0], np.float32)
    result = _detection(*to_tables([(0, seg, 0)], [(0, half, 0, 0.9)]), thresholds)
    assert float(result.per_class[0, 0]) == 1.0


def test_fall_through_differs_from_voc():
    """Best GT taken: ActivityNet falls through to the next free GT, VOC counts a duplicate."""
    gt = [(0, np.array([0.0, 10.0], np.float32), 0), (0, np.array([1.0, 11.0], np.float32), 0)]
    pred = [
        (0, np.array([0.0, 10.0], np.float32), 0, 0.9),
        (0, np.array([0.5, 10.0], np.float32), 0, 0.8),
    ]
    tables = to_tables(gt, pred)
    assert float(_detection(*tables, (0.5,)).per_class[0, 0]) == 1.0
    assert float(_detection(*tables, (0.5,), "all_point", "voc").per_class[0, 0]) == 0.5


def test_iou_functions_match_reference():
    rng = np.random.default_rng(0)
    a = np.stack([_random_box(rng, 2) for _ in range(5)])
    b = np.stack([_random_box(rng, 2) for _ in range(4)])
    b[0, 1] = b[0, 0]  # zero length
    got = np.asarray(jax.jit(M.temporal_iou)(a, b))
    want = [[ref.interval_iou(x, y) for y in b] for x in a]
    np.testing.assert_allclose(got, want, atol=1e-6)
    a4 = np.stack([_random_box(rng, 4) for _ in range(5)])
    b4 = np.stack([_random_box(rng, 4) for _ in range(4)])
    got = np.asarray(jax.jit(M.box_iou)(a4[None], b4[None]))[0]
    want = [[ref.box_iou(x, y) for y in b4] for x in a4]
    np.testing.assert_allclose(got, want, atol=1e-6)
    zero = np.zeros((1, 2), np.float32)
    assert float(M.temporal_iou(zero, zero)[0, 0]) == 0.0  # 0/0 union


def test_errors_name_the_argument():
    gb, gl, _, pb, pl, ps, _ = to_tables([], [], videos=2)
    with pytest.raises(ValueError, match="target_boxes and predicted_boxes"):
        M.detection_average_precision(gb, gl, pb[..., :1], pl, ps, num_classes=3)
    with pytest.raises(ValueError, match="scores must have shape"):
        M.detection_average_precision(gb, gl, pb, pl, ps[:, :3], num_classes=3)
    with pytest.raises(ValueError, match="iou_thresholds"):
        M.detection_average_precision(gb, gl, pb, pl, ps, num_classes=3, iou_thresholds=(0.0,))
    with pytest.raises(TypeError, match="num_classes"):
        M.detection_average_precision(gb, gl, pb, pl, ps, num_classes=3.0)
    with pytest.raises(ValueError, match="segments_a"):
        M.temporal_iou(np.zeros((2, 3)), np.zeros((2, 2)))


@pytest.mark.parametrize("threshold", [np.float32(0.5), np.array(0.5), np.float64(0.5)])
def test_a_numpy_scalar_threshold_is_one_threshold(threshold):
    """A numpy scalar or 0-d array threshold failed under jax.jit and in the accumulator
    factories ("'numpy.float32' object is not iterable") while 0.5 worked."""
    gb, gl, gm, pb, pl, ps, _ = to_tables([(0, np.array([0.0, 10.0]), 0)], [], videos=1)
    run = jax.jit(
        lambda *t: M.detection_average_precision(
            *t[:5], num_classes=1, iou_thresholds=threshold, target_mask=t[5]
        )
    )
    assert run(gb, gl, pb, pl, ps, gm).per_class.shape == (1, 1)
    assert checks.static_unit_floats("iou_thresholds", threshold) == (0.5,)
    state = S.detection(num_classes=1, iou_thresholds=threshold, capacity=4).init()
    assert state.true_positive.shape == (4, 1)
    with pytest.raises(ValueError, match=r"iou_thresholds must be .* 1-D .* shape \(1, 2\)"):
        checks.static_unit_floats("iou_thresholds", np.array([[0.3, 0.5]]))


def test_a_bool_threshold_is_refused():
    """``iou_thresholds=True`` was taken as the threshold 1.0, by detection and the segmental
    metrics alike; a bool is no threshold."""
    with pytest.raises(TypeError, match="iou_thresholds must hold numbers, got True"):
        checks.static_unit_floats("iou_thresholds", True)
    with pytest.raises(TypeError, match="iou_thresholds must hold numbers, got True"):
        M.segmental_f1([1, 1, 2], [1, 2, 2], iou_thresholds=(0.5, np.bool_(True)))


@pytest.mark.parametrize("n", [0, 1, 3000])
def test_class_then_score_order_is_a_stable_sort(n):
    # The radix passes give the order of a stable sort by (label, decreasing score); scores
    # tie often, -0.0 ties with 0.0, invalid predictions carry label num_classes.
    rng = np.random.default_rng(n)
    labels = rng.integers(0, 201, n).astype(np.int32)
    scores = rng.choice(np.float32([0.0, -0.0, 1.0, 0.5, 1e-40, -2.0, np.inf]), n)
    scores[: n // 2] = rng.random(n // 2).astype(np.float32)
    got = jax.jit(lambda a, b: detection._class_then_score_order(a, b, 200))(labels, scores)
    want = np.lexsort((np.arange(n), -scores.astype(np.float64) + 0.0, labels))
    np.testing.assert_array_equal(np.asarray(got), want)


def _activitynet_segment_iou(target, candidates):
    """ActivityNet ``Evaluation/utils.py::segment_iou`` verbatim (float64, 0/0 = NaN)."""
    tt1 = np.maximum(target[0], candidates[:, 0])
    tt2 = np.minimum(target[1], candidates[:, 1])
    inter = (tt2 - tt1).clip(0)
    union = (candidates[:, 1] - candidates[:, 0]) + (target[1] - target[0]) - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        return inter.astype(float) / union


def _activitynet_is_tp(pred, gts, thr):
    """ActivityNet's matching step for one prediction against free ground truths."""
    tiou = _activitynet_segment_iou(np.asarray(pred, np.float64), np.asarray(gts, np.float64))
    for j in tiou.argsort()[::-1]:
        if tiou[j] < thr:
            return False
        return True  # the first free one (all are free here)
    return False


def test_degenerate_cases_where_jaxseg_differs_from_activitynet():
    """The two documented differences ("Where jaxseg differs" in README.md)."""
    # 1. A zero-length prediction on a zero-length ground truth: NaN tIoU in ActivityNet,
    #    which passes `tiou < thr` and is a TP; here 0/0 is tIoU 0, a false positive.
    point = np.array([5.0, 5.0], np.float32)
    assert _activitynet_is_tp(point, [point], 0.5)
    assert float(M.temporal_iou(point[None], point[None])[0, 0]) == 0.0
    result = _detection(*to_tables([(0, point, 0)], [(0, point, 0, 0.9)]), (0.5,))
    assert float(result.per_class[0, 0]) == 0.0
    # 2. A tIoU of exactly 0.3 on the float64 linspace threshold 0.30000000000000004: below
    #    it in ActivityNet (FP), on it here (thresholds and IoUs are float32).
    threshold = float(np.linspace(0.1, 0.5, 5)[2])
    assert threshold == 0.30000000000000004
    gt, pred = np.array([0.0, 10.0], np.float32), np.array([0.0, 3.0], np.float32)
    assert not _activitynet_is_tp(pred, [gt], threshold)
    assert _activitynet_is_tp(pred, [gt], 0.3)
    result = _detection(*to_tables([(0, gt, 0)], [(0, pred, 0, 0.9)]), (threshold,))
    assert float(result.per_class[0, 0]) == 1.0


def test_labels_outside_the_classes_and_inverted_intervals_never_count():
    """Inside jit a label outside [0, C) is left out as if masked (it used to alias: -1 read
    the last class's tables, and a label >= C corrupted the sort); an inverted interval has
    IoU <= 0 and never matches. The CLI rejects both (test_cli_detection)."""
    seg = np.array([0.0, 10.0], np.float32)
    clean = _detection(*to_tables([(0, seg, 1)], [(0, seg, 1, 0.9)]), (0.5,))
    for bad_pred_label in (-1, C, C + 5, 2**20):
        tables = to_tables([(0, seg, 1)], [(0, seg, 1, 0.9), (0, seg, bad_pred_label, 0.95)])
        result = _detection(*tables, (0.5,))
        np.testing.assert_array_equal(result.per_class, clean.per_class)
    for bad_gt_label in (-1, C, C + 5):
        tables = to_tables([(0, seg, 1), (0, seg, bad_gt_label)], [(0, seg, 1, 0.9)])
        np.testing.assert_array_equal(_detection(*tables, (0.5,)).per_class, clean.per_class)
    inverted = np.array([10.0, 0.0], np.float32)
    assert float(M.temporal_iou(inverted[None], seg[None])[0, 0]) <= 0.0
    assert float(M.temporal_iou(inverted[None], inverted[None])[0, 0]) <= 0.0
    result = _detection(*to_tables([(0, seg, 1)], [(0, inverted, 1, 0.9)]), (0.5,))
    assert float(result.per_class[1, 0]) == 0.0


def test_readme_lists_the_detection_differences():
    import pathlib

    readme = (pathlib.Path(__file__).resolve().parents[1] / "README.md").read_text()
    differs = readme.split("## Where jaxseg differs", 1)[1].split("\n## ", 1)[0]
    assert "zero-length prediction on a zero-length ground truth" in differs
    assert "0.30000000000000004" in differs
    assert "labels outside [0, C)" in differs


def test_float64_boxes_and_scores_decide_as_activitynet():
    """With ``jax_enable_x64`` and float64 boxes and scores (what ``jaxseg detection`` passes),
    a tIoU just below a threshold stays below it, and scores that differ only in float64 keep
    their order; in float32 both are lost (the documented difference of the default)."""
    # ActivityNet's segment_iou of these two in float64: 0.49997..., a false positive at 0.5.
    target = np.array([[[2352.381032, 2355.639547]]])
    close = np.array([[[2353.467287, 2356.725802]]])
    inter = min(target[0, 0, 1], close[0, 0, 1]) - max(target[0, 0, 0], close[0, 0, 0])
    union = np.ptp(target) + np.ptp(close) - inter
    assert inter / union < 0.5
    # A miss scored 0.87345612 above a hit scored 0.8734561: equal in float32.
    assert np.float32(0.8734561) == np.float32(0.87345612)
    boxes = np.array([[[0.0, 1.0], [5.0, 6.0]]])
    scores = np.array([[0.8734561, 0.87345612]])

    def ap(gt, pred, s):
        labels = np.zeros(pred.shape[:2], np.int32)
        result = M.detection_average_precision(
            gt, np.zeros(gt.shape[:2], np.int32), pred, labels, s, num_classes=1,
            iou_thresholds=(0.5,),
        )  # fmt: skip
        return float(result.mean[0])

    with jax.enable_x64(True):
        assert ap(target, close, np.ones((1, 1))) == 0.0
        assert ap(boxes[:, :1], boxes, scores) == 0.5  # the miss ranks first
    assert ap(target, close, np.ones((1, 1))) == 1.0
    assert ap(boxes[:, :1], boxes, scores) == 1.0
