"""`jaxseg evaluate --confidence` and `jaxseg compare`: intervals and paired tests, jaxseg.stats."""

from __future__ import annotations

import json

import numpy as np
import pytest
from _cli_data import random_videos, write_dataset, write_labels

from jaxseg._host.cli import main

NAMES = ("SIL", "take", "pour", "stir", "background")
COLUMNS = ("Acc", "Edit", "F1@10", "F1@25", "F1@50")


def run(capsys, command, *argv):
    code = main([command, *map(str, argv)])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_confidence_intervals_bracket_the_estimate_and_repeat(tmp_path, capsys):
    videos = random_videos(21, 8, len(NAMES))
    truth, predictions = write_dataset(tmp_path, videos, NAMES)
    argv = (truth, predictions, "--confidence", "0.9", "--samples", "500", "--format", "json")
    document = run(capsys, "evaluate", *argv)
    (row,) = document["results"]  # bounds are columns beside each metric, not extra rows
    assert list(row) == ["name", *(f"{c}{s}" for c in COLUMNS for s in ("", " low", " high"))]
    for column in COLUMNS:
        assert row[f"{column} low"] <= row[column] <= row[f"{column} high"]
        assert row[f"{column} low"] < row[f"{column} high"]  # videos differ: a real interval
    assert document["summary"]["confidence"] == 0.9
    assert run(capsys, "evaluate", *argv) == document  # seed 0 by default: the same intervals
    (other,) = run(capsys, "evaluate", *argv, "--seed", "1")["results"]
    assert all(other[c] == row[c] for c in COLUMNS) and other != row
    old_name = (truth, predictions, "--ci", *argv[3:])  # the option's name up to jaxseg 0.1
    assert main(["evaluate", *map(str, old_name)]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == document and "--ci is deprecated, use --confidence" in err


def test_identical_videos_give_a_zero_width_interval(tmp_path, capsys):
    video = random_videos(22, 1, len(NAMES))["video_00"]
    videos = {f"copy_{i}": video for i in range(8)}
    truth, predictions = write_dataset(tmp_path, videos, NAMES)
    document = run(capsys, "evaluate", truth, predictions, "--confidence", "0.95",
                   "--samples", "500", "--format", "json")  # fmt: skip
    (row,) = document["results"]
    for column in COLUMNS:
        assert row[f"{column} low"] == pytest.approx(row[column], abs=1e-4)
        assert row[f"{column} high"] == pytest.approx(row[column], abs=1e-4)
        assert row[f"{column} low"] <= row[column] <= row[f"{column} high"]


def test_compare_two_models(tmp_path, capsys):
    videos = random_videos(23, 8, len(NAMES))
    truth, predictions_a = write_dataset(tmp_path, videos, NAMES)
    predictions_b = tmp_path / "model_b"
    predictions_b.mkdir()
    rng = np.random.default_rng(0)
    for name, (target, _) in videos.items():
        worse = target.copy()
        flips = rng.random(target.size) < 0.4
        worse[flips] = rng.integers(0, len(NAMES), size=int(flips.sum()))
        write_labels(predictions_b / name, worse, NAMES, "mstcn")
    a = run(capsys, "evaluate", truth, predictions_a, "--format", "json")["results"][0]
    b = run(capsys, "evaluate", truth, predictions_b, "--format", "json")["results"][0]
    document = run(capsys, "compare", truth, predictions_a, predictions_b, "--samples", "500",
                   "--format", "json")  # fmt: skip
    rows = {row["metric"]: row for row in document["comparison"]}
    assert list(rows) == list(COLUMNS)
    for column in COLUMNS:
        row = rows[column]
        assert row["A"] == a[column] and row["B"] == b[column]  # float64 in both commands
        assert row["A - B"] == pytest.approx(a[column] - b[column], rel=1e-12, abs=1e-12)
        assert row["low"] <= row["A - B"] <= row["high"]
        assert 0.0 <= row["p (bootstrap)"] <= 1.0 and 0.0 <= row["p (permutation)"] <= 1.0
    assert rows["Acc"]["A - B"] > 20 and rows["Acc"]["p (permutation)"] < 0.05  # clearly better
    same = run(capsys, "compare", truth, predictions_a, predictions_a, "--samples", "500",
               "--format", "json")  # fmt: skip
    for row in same["comparison"]:
        assert row["A - B"] == row["low"] == row["high"] == 0.0


def test_compare_needs_the_same_videos(tmp_path, capsys):
    videos = random_videos(24, 3, len(NAMES))
    truth, predictions_a = write_dataset(tmp_path, videos, NAMES)
    predictions_b = tmp_path / "b"
    predictions_b.mkdir()
    write_labels(predictions_b / "video_00", videos["video_00"][1], NAMES, "lines")
    code = main(["compare", str(truth), str(predictions_a), str(predictions_b)])
    _, err = capsys.readouterr()
    assert code == 2
    assert err == (
        f"jaxseg: error: {truth}: 2 ground-truth file(s) without prediction in "
        f"{predictions_b}: video_01, video_02 (use --split to evaluate a subset)\n"
    )


def test_compare_names_each_file_left_out_once(tmp_path, capsys):
    """A ground-truth file that is no label file by its name is left out for both models
    and named once on stderr; a README in one model's folder is named too."""
    videos = random_videos(25, 4, len(NAMES))
    truth, predictions_a = write_dataset(tmp_path, videos, NAMES)
    predictions_b = tmp_path / "model_b"
    predictions_b.mkdir()
    for name, (_, prediction) in videos.items():
        write_labels(predictions_b / name, prediction, NAMES, "mstcn")
    (truth / "video_09.mp4").write_text("SIL\n")
    (predictions_b / "README.md").write_text("notes\n")
    code = main(["compare", *map(str, (truth, predictions_a, predictions_b)), "--samples", "100",
                 "--format", "json"])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0 and len(json.loads(out)["comparison"]) == len(COLUMNS)
    assert err == (
        "jaxseg: note: 2 file(s) not read, with no counterpart in the other folder and not "
        "named like a label file (no suffix, .txt or .npy): "
        f"{truth / 'video_09.mp4'}, {predictions_b / 'README.md'}\n"
    )


def test_a_bootstrap_over_one_video_is_refused(tmp_path, capsys):
    """Resampling one video gave intervals of no width and, in compare, a bootstrap
    p-value of 1 / (N + 1): a difference read as significant."""
    videos = random_videos(3, 1, len(NAMES))
    truth, predictions = write_dataset(tmp_path, videos, NAMES)
    (name,) = videos
    for command, argv in (
        ("evaluate", (truth, predictions, "--confidence", "0.9")),
        ("compare", (truth, predictions, predictions)),
    ):
        assert main([command, *map(str, argv)]) == 2
        what = "--confidence" if command == "evaluate" else "compare"
        assert capsys.readouterr().err == (
            f"jaxseg: error: {what} resamples videos: it needs at least 2, got 1 ({name})\n"
        )
