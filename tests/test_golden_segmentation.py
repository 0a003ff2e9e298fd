"""Every per-video value and dataset aggregate of golden/segmentation.json, reproduced.

The golden values were computed by the anchors themselves (MS-TCN, ASFormer, DiffAct,
kage1020's evaluator). jaxseg differs from them on purpose in two places, asserted here as our
documented values instead of the anchor's:
  * edit score when neither sequence has a segment: anchor NaN (JSON null; kage1020 0.0),
    jaxseg 1.0;
  * F1 counts when the targets have no segment but the prediction does: MS-TCN / ASFormer
    raise (JSON {"error": ...}), jaxseg counts every prediction as an FP, which is what
    kage1020's evaluator returns.
Per-video edit is in percent in the JSON and a fraction in jaxseg.
"""

from __future__ import annotations

import functools
import math
import re

import _reference as ref
import jax
import numpy as np
import pytest
from conftest import golden_path

from jaxseg import metrics as M
from jaxseg import segments as jseg
from jaxseg._src.segmentation import segmentation_statistics

TAUS = (0.1, 0.25, 0.5)
BACKGROUNDS = {"no_bg": (), "bg0": (0,)}


def _names():
    import json

    path = golden_path("segmentation.json")
    if not path.exists():
        return []
    with open(path) as f:
        return [v["name"] for v in json.load(f)["videos"]]


@functools.partial(jax.jit, static_argnames="background")
def _evaluate(gt, pred, mask, background):
    kw = dict(mask=mask, background=background)
    return dict(
        stats=segmentation_statistics(gt, pred, iou_thresholds=TAUS, **kw),
        legacy=segmentation_statistics(
            gt, pred, iou_thresholds=TAUS, legacy_asformer_end=True, **kw
        ),
        edit_score=M.edit_score(gt, pred, **kw),
        edit_distance=M.edit_distance(gt, pred, **kw),
        counts=M.segmental_counts(gt, pred, iou_thresholds=TAUS, **kw),
        legacy_counts=M.segmental_counts(
            gt, pred, iou_thresholds=TAUS, legacy_asformer_end=True, **kw
        ),
        accuracy=M.accuracy(gt, pred, mask=mask),
        gt_segments=jseg.count_segments(gt, **kw),
        pred_segments=jseg.count_segments(pred, **kw),
    )


@pytest.fixture(scope="module")
def golden(golden_segmentation):
    data, arrays = golden_segmentation
    assert tuple(data["taus"]) == TAUS
    assert list(arrays["names"]) == [v["name"] for v in data["videos"]]
    mask = ref.lengths_to_mask(arrays["lengths"], arrays["gt"].shape[1])
    ours = {
        key: jax.device_get(_evaluate(arrays["gt"], arrays["pred"], mask, background))
        for key, background in BACKGROUNDS.items()
    }
    videos = {}
    for i, v in enumerate(data["videos"]):
        n = int(arrays["lengths"][i])
        videos[v["name"]] = (i, v, arrays["gt"][i, :n], arrays["pred"][i, :n])
    return data, ours, videos


def _row(tree, i):
    return jax.tree.map(lambda x: x[i], tree)


def _anchor_counts(entry, n_pred):
    """The anchor's (tp, fp, fn) [3, K]; where it raised, jaxseg's all-FP counts instead."""
    rows = []
    for tau in TAUS:
        value = entry[f"tp_fp_fn@{tau}"]
        rows.append([0, n_pred, 0] if isinstance(value, dict) else value)
    return np.array(rows, np.float64).T


# ------------------------------------------------------------------------------------------
# Per video.


@pytest.mark.parametrize("name", _names())
def test_per_video(golden, name):
    _, ours, videos = golden
    i, v, gt, pred = videos[name]
    assert len(gt) == v["T"]
    for key, background in BACKGROUNDS.items():
        got = _row(ours[key], i)
        stats = got["stats"]
        mstcn = v[f"mstcn_{key}"]
        n_y, n_p = mstcn["n_seg_gt"], mstcn["n_seg_pred"]
        assert stats.frames == v["T"] and stats.correct == v["correct_frames"]
        np.testing.assert_allclose(got["accuracy"], v["correct_frames"] / v["T"], rtol=1e-6)
        assert (stats.target_segments, stats.predicted_segments) == (n_y, n_p), key
        assert (got["gt_segments"], got["pred_segments"]) == (n_y, n_p), key
        assert not stats.overflow

        # Edit: percent -> fraction; null (both empty) -> jaxseg's 1.0.
        if mstcn["edit"] is None:
            assert n_y == n_p == 0
            want_edit, want_distance = 1.0, 0
        else:
            want_edit = mstcn["edit"] / 100
            want_distance = round((1 - want_edit) * max(n_y, n_p))
        np.testing.assert_allclose(got["edit_score"], want_edit, rtol=0, atol=1e-6)
        assert got["edit_distance"] == want_distance == stats.edit_distance, key
        assert ref.edit_distance(gt, pred, None, background) == want_distance
        assert ref.edit_score(gt, pred, None, background) == pytest.approx(want_edit, abs=1e-12)

        # F1 counts, MS-TCN and ASFormer ends; {'error'} -> all predictions FP.
        for prefix, counts, stats_k, legacy in (
            ("mstcn", got["counts"], stats, False),
            ("asformer", got["legacy_counts"], got["legacy"], True),
        ):
            want = _anchor_counts(v[f"{prefix}_{key}"], n_p)
            np.testing.assert_array_equal(counts, want, err_msg=f"{prefix}_{key}")
            np.testing.assert_array_equal((stats_k.tp, stats_k.fp, stats_k.fn), want)
            np.testing.assert_array_equal(
                ref.segmental_counts(gt, pred, TAUS, None, background, legacy), want
            )

    # kage1020 (bg0): same counts as ours everywhere (it has no raise), same edit except
    # that it gives 0.0 where neither side has a segment (jaxseg: 1.0).
    kage = v["kage1020_bg0"]
    got = _row(ours["bg0"], i)
    n_p = v["mstcn_bg0"]["n_seg_pred"]
    np.testing.assert_array_equal(got["counts"], _anchor_counts(kage, n_p))
    both_empty = v["mstcn_bg0"]["n_seg_gt"] == v["mstcn_bg0"]["n_seg_pred"] == 0
    want_edit = 1.0 if both_empty else kage["edit"] / 100
    np.testing.assert_allclose(got["edit_score"], want_edit, rtol=0, atol=1e-6)
    if both_empty:
        assert kage["edit"] == 0.0


def test_golden_contains_the_documented_differences(golden):
    """The set exercises both deliberate differences (otherwise the tests above prove less)."""
    data, _, _ = golden
    nulls = [v["name"] for v in data["videos"] if v["mstcn_bg0"]["edit"] is None]
    errors = [v["name"] for v in data["videos"] if isinstance(v["mstcn_bg0"]["tp_fp_fn@0.1"], dict)]
    assert nulls == ["len1_bg_both", "all_bg_both"]
    assert errors == ["gt_all_bg_pred_action"]


# ------------------------------------------------------------------------------------------
# Dataset level: MS-TCN's aggregation (micro accuracy, mean edit, F1 of summed counts).


def _dataset(golden, key, legacy, exclude=()):
    """Our dataset numbers from the per-video statistics, as fractions, in float64."""
    data, ours, _ = golden
    keep = np.array([v["name"] not in exclude for v in data["videos"]])
    got = ours[key]
    stats = got["legacy"] if legacy else got["stats"]
    edits = np.where(
        np.maximum(stats.target_segments, stats.predicted_segments) == 0,
        1.0,
        1.0
        - stats.edit_distance
        / np.maximum(1, np.maximum(stats.target_segments, stats.predicted_segments)),
    )
    scores = ref.dataset_scores(
        stats.frames[keep],
        stats.correct[keep],
        edits[keep],
        stats.tp[keep],
        stats.fp[keep],
        stats.fn[keep],
    )
    scores["edit_float32"] = float(np.mean(got["edit_score"][keep].astype(np.float64)))
    scores["sums"] = [
        np.array([x[keep, k].sum() for x in (stats.tp, stats.fp, stats.fn)])
        for k in range(len(TAUS))
    ]
    return scores


def _assert_dataset(scores, anchor, *, edit=True):
    assert scores["accuracy"] * 100 == pytest.approx(anchor["acc"], rel=1e-13)
    if edit:
        assert scores["edit"] * 100 == pytest.approx(anchor["edit"], rel=1e-13)
        assert scores["edit_float32"] * 100 == pytest.approx(anchor["edit"], abs=1e-4)
    for k, tau in enumerate(TAUS):
        assert scores["f1"][k] * 100 == pytest.approx(anchor[f"f1@{tau}"], rel=1e-13)
        if f"sum_tp_fp_fn@{tau}" in anchor:
            np.testing.assert_array_equal(scores["sums"][k], anchor[f"sum_tp_fp_fn@{tau}"])


def _printed_numbers(lines):
    """``(value, half of the last printed digit)`` for every decimal number in ``lines``."""
    return [
        (float(x), 0.5 * 10.0 ** -len(x.split(".")[1]))
        for x in re.findall(r"(?<!@)\b\d+\.\d+", " ".join(lines))
    ]


@pytest.mark.parametrize("run", ["mstcn", "asformer", "diffact"])
def test_dataset_no_background(golden, run):
    data = golden[0]
    anchor = data["dataset"][f"{run}_no_bg"]
    scores = _dataset(golden, "no_bg", legacy=run != "mstcn")
    _assert_dataset(scores, anchor)
    if "printed" in anchor:  # the rounded lines the anchors' main() print
        ours = [scores["accuracy"] * 100, scores["edit"] * 100, *(scores["f1"] * 100)]
        for got, (printed, half_digit) in zip(
            ours, _printed_numbers(anchor["printed"]), strict=True
        ):
            assert abs(got - printed) <= half_digit + 1e-12


@pytest.mark.parametrize("run", ["mstcn", "asformer"])
def test_dataset_bg0_finite_subset(golden, run):
    anchor = golden[0]["dataset"][f"{run}_bg0_finite_subset"]
    scores = _dataset(golden, "bg0", legacy=run != "mstcn", exclude=anchor["excluded_videos"])
    _assert_dataset(scores, anchor)


@pytest.mark.parametrize("run", ["mstcn", "asformer", "diffact"])
def test_dataset_bg0(golden, run):
    """The anchors' bg0 runs leave out the video where they raise; their edit is NaN.

    jaxseg's edit is a number: the two both-empty videos score 1.0. Asserted against the
    anchor's own mean over the non-NaN videos (47 of the 49).
    """
    data = golden[0]
    anchor = data["dataset"][f"{run}_bg0"]
    excluded = anchor["excluded_videos_anchor_raises"]
    scores = _dataset(golden, "bg0", legacy=run != "mstcn", exclude=excluded)
    assert anchor["edit"] is None
    _assert_dataset(scores, anchor, edit=False)
    derived = data["dataset"]["mstcn_bg0"]["edit_mean_over_non_nan_videos(derived)"]
    n_kept = len(data["videos"]) - len(excluded)
    n_both_empty = 2
    want = (derived * (n_kept - n_both_empty) + 100.0 * n_both_empty) / n_kept
    assert scores["edit"] * 100 == pytest.approx(want, rel=1e-13)


def test_dataset_kage1020_all_videos(golden):
    """kage1020 keeps every video (all-FP where MS-TCN raises) and scores both-empty 0.0."""
    data = golden[0]
    anchor = data["dataset"]["kage1020_bg0_all_videos"]
    scores = _dataset(golden, "bg0", legacy=False)
    assert scores["accuracy"] * 100 == pytest.approx(anchor["acc"], rel=1e-13)
    np.testing.assert_allclose(scores["f1"], anchor["f1_fraction@0.1,0.25,0.5"], rtol=1e-13)
    n_videos, n_both_empty = len(data["videos"]), 2
    want = anchor["edit"] + 100.0 * n_both_empty / n_videos  # their 0.0 -> our 1.0
    assert scores["edit"] * 100 == pytest.approx(want, rel=1e-13)


def test_reference_reproduces_dataset_numbers(golden):
    """The numpy reference alone (no jaxseg) gives the MS-TCN no-background numbers."""
    data, _, videos = golden
    frames, correct, edits, tp, fp, fn = [], [], [], [], [], []
    for *_, gt, pred in videos.values():
        frames.append(len(gt))
        correct.append(int(np.sum(gt == pred)))
        edits.append(ref.edit_score(gt, pred))
        counts = ref.segmental_counts(gt, pred, TAUS)
        for acc, x in zip((tp, fp, fn), counts, strict=True):
            acc.append(x)
    scores = ref.dataset_scores(frames, correct, edits, tp, fp, fn)
    anchor = data["dataset"]["mstcn_no_bg"]
    assert scores["accuracy"] * 100 == pytest.approx(anchor["acc"], rel=1e-13)
    assert scores["edit"] * 100 == pytest.approx(anchor["edit"], rel=1e-13)
    for k, tau in enumerate(TAUS):
        assert scores["f1"][k] * 100 == pytest.approx(anchor[f"f1@{tau}"], rel=1e-13)
    assert not math.isnan(scores["edit"])
