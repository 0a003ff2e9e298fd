"""`jaxseg detection` matches videos in groups of similar sizes: the same APs, bit for bit, as
one table padded to the largest video, in tables that grow with the data, not with
(videos x largest video)."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest
from _cli_data import window_near

from jaxseg._host import cli_detection
from jaxseg._host.cli import main
from jaxseg._host.padding import bucket
from jaxseg.metrics import detection_average_precision

THRESHOLDS = (0.1, 0.3, 0.5, 0.7, 0.95)


def skewed_dataset(seed):
    """ActivityNet ground truth and submission: most videos with 0-3 detections, a few with
    hundreds; scores rounded to 0.1 (many ties); videos without detections, videos of the
    submission outside the ground truth, a class without detections."""
    rng = np.random.default_rng(seed)
    classes = [f"c{c}" for c in range(6)]  # c5: ground truth only
    database, results = {}, {}
    for v in range(60):
        instances = int(rng.integers(0, 5)) if v % 17 else int(rng.integers(20, 40))
        annotations = []
        for _ in range(instances):
            start = float(np.round(rng.uniform(0, 100), 2))
            label = classes[int(rng.integers(0, 6))]
            annotations.append(
                {"segment": [start, start + float(rng.uniform(1, 20))], "label": label}
            )
        database[f"v{v}"] = {"subset": "validation", "annotations": annotations}
        if v % 7 == 3:
            continue  # no detections
        count = int(rng.integers(0, 4)) if v % 13 else int(rng.choice([150, 300, 700]))
        detections = []
        for _ in range(count):
            segment = window_near(rng, annotations)
            label = classes[int(rng.integers(0, 5))]
            score = float(np.round(rng.random(), 1))
            detections.append({"segment": segment, "label": label, "score": score})
        results[f"v{v}"] = detections
    for v in range(3):  # outside the ground truth: false positives only
        results[f"extra{v}"] = [
            {"segment": [0.0, 5.0], "label": classes[v], "score": 0.5} for _ in range(2 + 40 * v)
        ]
    database["v_train"] = {"subset": "training", "annotations": [{"segment": [0, 1], "label": "t"}]}
    return {"database": database}, {"results": results}


def write(tmp_path, truth, submission):
    (tmp_path / "gt.json").write_text(json.dumps(truth))
    (tmp_path / "sub.json").write_text(json.dumps(submission))
    return tmp_path / "gt.json", tmp_path / "sub.json"


def one_table(data):
    """The APs of one table padded to the largest video, as `jaxseg detection` computed them."""
    videos = bucket(len(data.videos), 8)
    width = bucket(max(len(rows) for rows in data.detections), 8)
    gt_width = bucket(max(len(rows) for rows in data.ground_truth), 8)
    gt = cli_detection._pad(data.ground_truth, videos, gt_width)
    pred = cli_detection._pad(data.detections, videos, width)
    with jax.enable_x64(True):
        scores = jax.jit(
            detection_average_precision, static_argnames=("num_classes", "iou_thresholds")
        )(
            gt[0],
            gt[1],
            pred[0],
            pred[1],
            pred[2],
            num_classes=len(data.class_names),
            iou_thresholds=THRESHOLDS,
            target_mask=gt[3],
            prediction_mask=pred[3],
        )
        return np.asarray(scores.per_class), np.asarray(scores.mean)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_groups_give_the_aps_of_one_padded_table_bit_for_bit(tmp_path, capsys, seed):
    truth, submission = write(tmp_path, *skewed_dataset(seed))
    data = cli_detection.read_activitynet(truth, submission, "validation")
    assert len(cli_detection.video_groups(data)) > 3
    assert len({float(s) for rows in data.detections for s in rows[:, 3]}) <= 11  # ties
    per_class, mean = one_table(data)
    assert np.isfinite(per_class[:5]).all() and (per_class[5] == 0).all()  # c5: no detection
    grouped = cli_detection.detection_scores(data, THRESHOLDS)
    np.testing.assert_array_equal(np.asarray(grouped.per_class), per_class)
    np.testing.assert_array_equal(np.asarray(grouped.mean), mean)
    argv = ["detection", truth, submission, "--thresholds", *THRESHOLDS, "--format", "json"]
    assert main([*map(str, argv)]) == 0
    row = json.loads(capsys.readouterr().out)["map"][0]
    assert [row[f"{t:.2f}"] for t in THRESHOLDS] == [100.0 * float(m) for m in mean]


def test_tables_stay_within_four_times_the_data():
    """The audit's case: 2000 videos of one detection and one with 20,000. One padded table
    held 2048 x 32768 detection slots (over 21 GB in matching)."""
    one = np.array([[0.0, 1.0, 0.0]])
    truth = tuple(one for _ in range(2001))
    detections = tuple(np.array([[0.0, 1.0, 0.0, 0.5]]) for _ in range(2000))
    detections += (np.tile([[0.0, 1.0, 0.0, 0.5]], (20000, 1)),)
    videos = tuple(f"v{v}" for v in range(2001))
    data = cli_detection.DetectionData(videos, ("a",), truth, detections, ())
    groups = cli_detection.video_groups(data)
    assert [(g.pred_mask.shape, g.gt_mask.shape) for g in groups] == [
        ((2048, 1), (2048, 1)),
        ((1, 32768), (1, 1)),
    ]
    pred_slots = sum(g.pred_mask.size for g in groups)
    gt_slots = sum(g.gt_mask.size for g in groups)
    assert pred_slots <= 4 * (22000 + 2001) and gt_slots <= 4 * (2001 + 2001)
    members = np.concatenate([g.videos for g in groups])
    assert sorted(members) == list(range(2001))
    assert all((np.diff(g.videos) > 0).all() for g in groups)
    for g in groups:
        assert g.pred_mask.sum() == sum(len(detections[v]) for v in g.videos)
        assert g.gt_mask.sum() == len(g.videos)
