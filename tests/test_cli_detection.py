"""`jaxseg detection` on ActivityNet JSON files and per-frame arrays built from the golden sets."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import golden_path

from jaxseg._host.cli import main

DETECTION_CASES = ("008", "019", "006")  # many classes/videos; the largest; few detections
ONLINE_CASES = ("000", "003")  # THUMOS-like with an ambiguous column; TVSeries-like without


@pytest.fixture(scope="module")
def golden_detection():
    path = golden_path("detection.json")
    if not path.exists():
        pytest.skip(f"golden data not found at {path}")
    return json.loads(path.read_text()), dict(np.load(golden_path("detection.npz")))


def write_activitynet(folder, arrays, key, subset="validation"):
    """Writes a golden detection case as ActivityNet ground-truth and submission JSON."""
    database, results = {}, {}
    videos = set(arrays[f"gt_video_{key}"]) | set(arrays[f"pred_video_{key}"])
    for v in sorted(int(v) for v in videos):
        database[f"v_{v}"] = {"subset": subset, "annotations": []}
    for v, segment, label in zip(arrays[f"gt_video_{key}"], arrays[f"gt_segment_{key}"],
                                 arrays[f"gt_label_{key}"], strict=True):  # fmt: skip
        database[f"v_{v}"]["annotations"].append(
            {"segment": [float(x) for x in segment], "label": f"class {label}"})  # fmt: skip
    for v, segment, label, score in zip(arrays[f"pred_video_{key}"], arrays[f"pred_segment_{key}"],
                                        arrays[f"pred_label_{key}"], arrays[f"pred_score_{key}"],
                                        strict=True):  # fmt: skip
        results.setdefault(f"v_{v}", []).append(
            {"segment": [float(x) for x in segment], "label": f"class {label}",
             "score": float(score)})  # fmt: skip
    database["v_train"] = {"subset": "training", "annotations": [
        {"segment": [0.0, 1.0], "label": "train only"}]}  # fmt: skip
    (folder / "gt.json").write_text(json.dumps({"version": "1.3", "database": database}))
    (folder / "sub.json").write_text(json.dumps({"version": "1.3", "results": results}))
    return folder / "gt.json", folder / "sub.json"


def run(capsys, *argv):
    code = main(["detection", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("key", DETECTION_CASES)
def test_activitynet_and_thumos_map_equal_the_anchor(tmp_path, capsys, golden_detection, key):
    golden, arrays = golden_detection
    case = next(c for c in golden["cases"] if c["key"] == key)
    truth, submission = write_activitynet(tmp_path, arrays, key)
    for preset, name in (("activitynet", "anet"), ("thumos14", "thumos")):
        code, out, err = run(capsys, truth, submission, "--preset", preset, "--per-class",
                             "--format", "json")  # fmt: skip
        assert code == 0, err
        document = json.loads(out)
        thresholds = golden["tiou_thresholds"][name]
        assert document["summary"]["tiou_thresholds"] == thresholds
        row = document["map"][0]
        values = [row[f"{t:.2f}"] for t in thresholds]
        np.testing.assert_allclose(values, 100 * np.array(case[name]["mAP"]), atol=1e-4)
        assert row["Avg"] == pytest.approx(100 * case[name]["average_mAP"], abs=1e-4)
        per_class = {r["class"]: r for r in document["ap_per_class"]}
        assert sorted(per_class) == sorted(f"class {c}" for c in case["classes"])
        for label, ap in case[name]["ap"].items():
            got = [per_class[f"class {label}"][f"{t:.2f}"] for t in thresholds]
            np.testing.assert_allclose(got, 100 * np.array(ap), atol=1e-4)


def test_table_output_and_submission_videos_outside_the_subset(tmp_path, capsys, golden_detection):
    _, arrays = golden_detection
    truth, submission = write_activitynet(tmp_path, arrays, "008")
    document = json.loads(submission.read_text())
    document["results"]["v_train"] = [{"segment": [0, 1], "label": "class 0", "score": 0.99}]
    submission.write_text(json.dumps(document))
    code, out, err = run(capsys, truth, submission, "--thresholds", "0.5", "0.75")
    assert code == 0
    assert err.startswith("jaxseg: note: 1 video(s) of the submission are not in the ground truth")
    lines = out.splitlines()
    assert lines[0].startswith("9 videos (validation), 30 ground-truth instances, 98 detections")
    assert lines[3].split() == ["name", "0.50", "0.75", "Avg"]
    assert lines[4].split()[0] == "mAP"


def _one_detection(segment="[0, 1]", label='"class 0"', score="1"):
    """An edit writing a submission of one detection of video v_1 from its JSON fields."""
    detection = f'{{"segment": {segment}, "label": {label}, "score": {score}}}'
    return lambda gt, sub: sub.write_text(f'{{"results": {{"v_1": [{detection}]}}}}')


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda gt, sub: gt.write_text("{ not json"), ":1: ground-truth file is not valid JSON"),
        (lambda gt, sub: sub.write_text('{"results": []}'),
         "submission file needs a 'results' object"),
        (_one_detection(segment="[2, 1]"),
         "video 'v_1', detection 1: 'segment' must be [start, end], finite numbers with start "
         "<= end"),
        # a list for an object was reported as "'segment' ... got None"
        (lambda gt, sub: sub.write_text('{"results": {"v_1": [[1, 5, "a", 0.9]]}}'),
         "video 'v_1', detection 1: expected an object with 'segment', got [1, 5, 'a', 0.9]"),
        (_one_detection(label='"dance"'),
         "video 'v_1', detection 1: label 'dance' is not a class of the ground truth"),
        (_one_detection(score='"high"'), "'score' must be a number, got 'high'"),
        # JSON's true is no number; an integer too large for a float raised OverflowError
        (_one_detection(score="true"), "'score' must be a number, got True"),
        (_one_detection(segment="[true, 1]"),
         "detection 1: 'segment' must be [start, end], finite numbers with start <= end, got "
         "[True, 1]"),
        (_one_detection(segment="[0, 1" + "0" * 400 + "]"),
         "detection 1: 'segment' must be [start, end], finite numbers with start <= end"),
        (lambda gt, sub: sub.unlink(), "submission file not found"),
        (lambda gt, sub: (sub.unlink(), sub.mkdir()),
         "sub.json: is a folder; the submission file must be a JSON file"),
        (lambda gt, sub: sub.write_bytes(b'{"results":\n {"v_\xe9": []}}'),
         "sub.json:2: submission file is not a UTF-8 text file (invalid byte 0xe9 at offset 17)"),
        (lambda gt, sub: sub.write_bytes(b'{"results": {}}\0'),
         "sub.json: submission file is not a text file (NUL byte at offset 15)"),
    ],
)  # fmt: skip
def test_bad_json_inputs(tmp_path, capsys, golden_detection, edit, message):
    _, arrays = golden_detection
    truth, submission = write_activitynet(tmp_path, arrays, "006")
    edit(truth, submission)
    code, out, err = run(capsys, truth, submission)
    assert code == 2 and out == ""
    assert err.startswith("jaxseg: error: ") and err.count("\n") == 1
    assert message in err


def test_unknown_subset_lists_the_subsets(tmp_path, capsys, golden_detection):
    _, arrays = golden_detection
    truth, submission = write_activitynet(tmp_path, arrays, "006")
    code, _, err = run(capsys, truth, submission, "--subset", "testing")
    assert code == 2
    assert "no video in subset 'testing'; subsets: training, validation (use --subset)" in err


@pytest.fixture(scope="module")
def golden_online():
    path = golden_path("online.json")
    if not path.exists():
        pytest.skip(f"golden data not found at {path}")
    return json.loads(path.read_text()), dict(np.load(golden_path("online.npz")))


@pytest.mark.parametrize("key", ONLINE_CASES)
def test_online_map_and_cap_equal_lstr(tmp_path, capsys, golden_online, key):
    golden, arrays = golden_online
    case = next(c for c in golden["cases"] if c["key"] == key)
    np.save(tmp_path / "targets.npy", arrays[f"targets_{key}"])
    np.save(tmp_path / "scores.npy", arrays[f"scores_{key}"])
    argv = [tmp_path / "targets.npy", tmp_path / "scores.npy", "--online", "--per-class",
            "--format", "json", "--background", str(case["bg_index"])]  # fmt: skip
    if case["ambiguous_index"] is not None:
        argv += ["--ambiguous", str(case["ambiguous_index"])]
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    document = json.loads(out)
    mean = document["online"][0]
    assert mean["mAP"] == pytest.approx(100 * case["lstr_AP"]["mean"], abs=1e-4)
    assert mean["mcAP"] == pytest.approx(100 * case["lstr_cAP"]["mean"], abs=1e-4)
    rows = {r["class"]: r for r in document["per_class"]}
    for label, value in case["lstr_AP"]["per_class"].items():
        assert rows[label]["AP"] == pytest.approx(100 * value, abs=1e-4)
    for label, value in case["lstr_cAP"]["per_class"].items():
        assert rows[label]["cAP"] == pytest.approx(100 * value, abs=1e-4)
    assert rows[str(case["bg_index"])]["AP"] is None  # not scored: null


def test_online_ranks_float64_scores_in_float64(tmp_path, capsys):
    """Probabilities of a confident model, distinct in float64, were cast to float32, where
    each class kept 5 to 11 distinct values: AP 55.96 for 96.90."""
    import _reference_ranking as ref

    rng = np.random.default_rng(0)
    targets = np.eye(3, dtype=bool)[rng.integers(0, 3, 200)]
    logits = 20 + 3 * targets + rng.normal(size=targets.shape)
    scores = 1 / (1 + np.exp(-logits))  # within 1e-8 of 1
    assert len(np.unique(scores[:, 1].astype(np.float32))) < 20
    np.save(tmp_path / "targets.npy", targets)
    np.save(tmp_path / "scores.npy", scores)
    argv = [tmp_path / "targets.npy", tmp_path / "scores.npy", "--online", "--per-class"]
    code, out, err = run(capsys, *argv, "--format", "json")
    assert code == 0, err
    rows = {r["class"]: r for r in json.loads(out)["per_class"]}
    for c in (1, 2):
        want = 100 * ref.step_ap(targets[:, c], scores[:, c])
        assert rows[str(c)]["AP"] == pytest.approx(want, abs=1e-4)


def test_online_bad_inputs(tmp_path, capsys):
    np.save(tmp_path / "scores.npy", np.random.default_rng(0).random((10, 3)).astype(np.float32))
    np.save(tmp_path / "targets.npy", np.zeros((10, 4), np.uint8))
    code, _, err = run(capsys, tmp_path / "targets.npy", tmp_path / "scores.npy", "--online")
    assert code == 2 and "targets have shape (10, 4) but scores (10, 3)" in err
    np.save(tmp_path / "targets.npy", np.array([0, 1, 2, 5, 0, 0, 0, 0, 0, 0]))
    code, _, err = run(capsys, tmp_path / "targets.npy", tmp_path / "scores.npy", "--online")
    assert code == 2 and "label 5 but scores have 3 classes" in err
    np.save(tmp_path / "targets.npy", np.zeros(10, np.int64))
    code, _, err = run(capsys, tmp_path / "targets.npy", tmp_path / "scores.npy", "--online",
                       "--ambiguous", "7")  # fmt: skip
    assert code == 2 and "class index 7 is outside the 3 score columns" in err
    code, _, err = run(capsys, tmp_path / "targets.npy", tmp_path / "scores.npy", "--online",
                       "--background", "0", "1", "--ambiguous", "2")  # fmt: skip
    assert code == 2 and err == (
        "jaxseg: error: --background (0, 1) and --ambiguous (2) leave none of the 3 score "
        "columns to score\n"
    )
    for folder, what in (("scores.npy", "scores file"), ("targets.npy", "targets file")):
        (tmp_path / folder).unlink()
        (tmp_path / folder).mkdir()
        code, _, err = run(capsys, tmp_path / "targets.npy", tmp_path / "scores.npy", "--online")
        assert code == 2 and f"{folder}: is a folder; the {what} must be a file" in err


def test_byte_order_mark_is_accepted(tmp_path, capsys, golden_detection):
    _, arrays = golden_detection
    truth, submission = write_activitynet(tmp_path, arrays, "006")
    truth.write_bytes(b"\xef\xbb\xbf" + truth.read_bytes())
    code, out, err = run(capsys, truth, submission)
    assert code == 0 and err == "" and out.startswith("5 videos"), (err, out[:40])


def test_times_and_scores_are_read_in_float64(tmp_path, capsys):
    """As ActivityNet computes: this pair's tIoU is 0.49997 in float64 (a false positive at
    0.5); from float32 times it read as 0.5 and the detection counted (mAP 100)."""
    truth, submission = tmp_path / "gt.json", tmp_path / "sub.json"
    annotation = {"segment": [2352.381032, 2355.639547], "label": "x"}
    database = {"v": {"subset": "validation", "annotations": [annotation]}}
    truth.write_text(json.dumps({"database": database}))
    detection = {"segment": [2353.467287, 2356.725802], "label": "x", "score": 0.9}
    submission.write_text(json.dumps({"results": {"v": [detection]}}))
    code, out, _ = run(capsys, truth, submission, "--thresholds", "0.5", "--format", "csv")
    assert code == 0
    assert out.splitlines()[1] == "map,mAP,0.0,0.0"
