"""``jaxseg evaluate --matching``: the protocols' numbers from files, and one-line errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from _cli_data import write_labels, write_mapping

from jaxseg import metrics as M
from jaxseg._host.cli import main

NAMES = ("take", "open", "pour", "background")
TRUTH = {
    "a": np.array([0, 0, 1, 1, 1, 3, 2, 2]),
    "b": np.array([3, 1, 1, 2, 2, 2]),
    "c": np.array([0, 2, 2, 2, 3]),
}
CLUSTERS = {
    "a": np.array([4, 4, 0, 0, 2, -1, 1, 1]),
    "b": np.array([-1, 0, 0, 1, 1, 0]),
    "c": np.array([4, 1, 1, 3, 3]),
}


@pytest.fixture
def folders(tmp_path):
    truth, predictions = tmp_path / "groundTruth", tmp_path / "predictions"
    truth.mkdir()
    predictions.mkdir()
    write_mapping(tmp_path / "mapping.txt", NAMES)
    for i, (name, labels) in enumerate(TRUTH.items()):
        write_labels(truth / f"{name}.txt", labels, NAMES, "lines")
        ids = CLUSTERS[name]
        if i == 0:
            np.save(predictions / f"{name}.npy", ids)
        elif i == 1:
            (predictions / name).write_text(
                "### Frame level recognition: ###\n" + " ".join(map(str, ids)) + "\n"
            )
        else:
            (predictions / f"{name}.txt").write_text("".join(f"{x}\n" for x in ids))
    return tmp_path, truth, predictions


def _json(capsys, *argv):
    assert main(["evaluate", *map(str, argv), "--format", "json"]) == 0
    out, _ = capsys.readouterr()
    return json.loads(out)


def _padded():
    names = sorted(TRUTH)
    T = max(len(TRUTH[n]) for n in names)
    gt = np.full((3, T), -5, np.int32)
    pred = np.full((3, T), -5, np.int32)
    mask = np.zeros((3, T), bool)
    for row, n in enumerate(names):
        k = len(TRUTH[n])
        gt[row, :k] = np.where(TRUTH[n] == 3, -1, TRUTH[n])  # 'background' becomes -1
        pred[row, :k] = CLUSTERS[n]
        mask[row, :k] = True
    return gt, pred, mask


@pytest.mark.parametrize("matching", ["global", "per-video", "asot-full", "asot-per"])
def test_matching_prints_the_protocol(folders, capsys, matching):
    root, _, predictions = folders
    result = _json(capsys, root, predictions, "--matching", matching)
    gt, pred, mask = _padded()
    kw = dict(mask=mask, num_classes=4, num_clusters=5)
    if matching == "global":
        want = M.global_hungarian_scores(gt, pred, exclude_background=True, **kw)
        keys = {"MoF": "mof", "IoU": "iou", "F1": "f1", "MoF-bg": "mof_bg", "IoU-bg": "iou_bg"}
    elif matching == "per-video":
        want = M.per_video_hungarian_scores(gt, pred, **kw)
        keys = {"MoF": "mof", "IoU": "iou", "F1": "f1"}
    else:
        mode = matching.removeprefix("asot-")
        want = M.asot_hungarian_scores(gt, pred, mode=mode, exclude_background=True, **kw)
        keys = {"MoF": "mof", "mIoU": "miou", "F1": "f1"}
    row = result["results"][0]
    for column, key in keys.items():
        assert row[column] == pytest.approx(100 * float(np.mean(want[key])), abs=1e-4), column
    assert result["summary"]["matching"] == matching


def test_no_background(folders, capsys):
    root, _, predictions = folders
    result = _json(capsys, root, predictions, "--matching", "global", "--background")
    assert "MoF-bg" not in result["results"][0]


def test_asot_per_leaves_an_all_background_video_out_of_the_mean(folders, capsys):
    """ASOT's eval_mof divides by zero on a video with no frame outside the background: it
    has no score (null) and the mean is over the other videos."""
    root, truth, predictions = folders
    want = _json(capsys, root, predictions, "--matching", "asot-per")["results"][0]
    write_labels(truth / "d.txt", np.array([3, 3, 3]), NAMES, "lines")
    (predictions / "d.txt").write_text("0\n1\n1\n")
    result = _json(capsys, root, predictions, "--matching", "asot-per", "--per-video")
    rows = {row["video"]: row for row in result["per_video"]}
    assert rows["d"]["MoF"] is None and rows["a"]["MoF"] is not None
    assert result["results"][0] == want


def test_files_left_out_as_no_label_files_are_named(folders, capsys):
    root, truth, predictions = folders
    (truth / "d.mp4").write_text("take\n")
    assert main(["evaluate", str(root), str(predictions), "--matching", "global"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("jaxseg: note: 1 file(s) not read, ")
    assert err.endswith(f"(no suffix, .txt or .npy): {truth / 'd.mp4'}\n")


def fails(capsys, *argv) -> str:
    code = main(["evaluate", *map(str, argv)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.startswith("jaxseg: error: ") and err.count("\n") == 1, err
    return err.removeprefix("jaxseg: error: ").rstrip("\n")


def test_errors(folders, capsys):
    root, _, predictions = folders
    (predictions / "c.txt").write_text("1\ntake\n1\n1\n1\n")
    assert fails(capsys, root, predictions, "--matching", "global") == (
        f"{predictions / 'c.txt'}:2: 'take' is not an integer cluster id "
        "(--matching takes cluster ids, not class names)"
    )
    for token in ("-2", "99999999999999999999999", "9223372036854775808"):
        (predictions / "c.txt").write_text(f"1\n{token}\n1\n1\n1\n")  # int64 overflowed
        assert fails(capsys, root, predictions, "--matching", "global") == (
            f"{predictions / 'c.txt'}:2: cluster id {token} is not in [-1, 8192) "
            "(the matching compares (largest id + 1)^2 pairs: number the clusters densely)"
        )
    for token in ("1_0", "\u0663", "0x1"):  # int() read the first two as 10 and 3
        (predictions / "c.txt").write_text(f"1\n1\n{token}\n1\n1\n", encoding="utf-8")
        assert fails(capsys, root, predictions, "--matching", "global") == (
            f"{predictions / 'c.txt'}:3: {token!r} is not an integer cluster id "
            "(--matching takes cluster ids, not class names)"
        )
    (predictions / "c.txt").write_text("1\n1\n\n1\n1\n1\n")  # was read as 5 frames
    assert fails(capsys, root, predictions, "--matching", "global") == (
        f"{predictions / 'c.txt'}:3: blank line after frame 2, a frame without a cluster id; "
        "remove the line or write the frame's cluster id"
    )
    (predictions / "c.txt").write_text("\n### header ###\n0 0\n1 1 1\n\n")  # after a blank line
    assert main(["evaluate", str(root), str(predictions), "--matching", "global"]) == 0
    capsys.readouterr()
    (predictions / "c.txt").write_text("1\n1\n")
    assert "has 2 predicted frames but 5" in fails(
        capsys, root, predictions, "--matching", "per-video"
    )
    assert fails(capsys, root, predictions, "--matching", "global", "--confidence", "0.9") == (
        "--matching global does not take --confidence"
    )
    assert (
        fails(capsys, root, predictions, "--matching", "global", "--segments-per-video", "0")
        == "--segments-per-video must be at least 1"
    )
    for option, matching in (("--segments-per-video", "global"), ("--iou-divisor", "per-video")):
        argv = ("--matching", matching, option, "3000000000")
        assert fails(capsys, root, predictions, *argv) == (
            f"{option} must be below 2**31, got 3000000000"
        )


def test_npy_ground_truth_is_checked_against_the_mapping(folders, capsys):
    """A ground-truth label that the mapping does not hold fails, as in plain evaluate; its
    frames used to drop out of the scores (MoF 100 where it is 50)."""
    root, truth, predictions = folders
    (truth / "c.txt").unlink()
    np.save(truth / "c.npy", np.array([0, 2, 7, 2, 3]))
    message = fails(capsys, root, predictions, "--matching", "global")
    assert message == (
        f"{truth / 'c.npy'}: label 7 at frame 3 is not a class of {root / 'mapping.txt'} (0..3)"
    )


def test_cluster_ids_beyond_the_matching_table_are_named(folders, capsys):
    """An id of 100,000 made the matching's (largest id + 1)^2 table exhaust the memory, and
    the message then blamed the number of videos; a uint64 id of 2**64 - 1 was read as -1,
    the background cluster."""
    root, _, predictions = folders
    (predictions / "c.txt").unlink()
    for ids in (np.array([1, 1, 100_000, 1, 1]), np.array([1, 1, 2**64 - 1, 1, 1], np.uint64)):
        np.save(predictions / "c.npy", ids)
        assert fails(capsys, root, predictions, "--matching", "global") == (
            f"{predictions / 'c.npy'}: cluster id {ids[2]} at frame 3 is not in [-1, 8192) "
            "(the matching compares (largest id + 1)^2 pairs: number the clusters densely)"
        )


@pytest.mark.parametrize(
    "matching, option",
    [
        ("global", ["--per-video"]),
        ("asot-full", ["--per-video"]),
        ("global", ["--iou-divisor", "3"]),
        ("per-video", ["--segments-per-video", "3"]),
        ("per-video", ["--iou-thresholds", "0.5"]),
        ("asot-per", ["--plot-videos", "2"]),
        ("asot-full", ["--confidence", "0.9"]),  # one matching of the whole set
        ("global", ["--seed", "3"]),
    ],
)
def test_options_a_protocol_would_ignore_are_refused(folders, capsys, matching, option):
    root, _, predictions = folders
    assert fails(capsys, root, predictions, "--matching", matching, *option) == (
        f"--matching {matching} does not take {option[0]}"
    )


def test_global_f1_does_not_depend_on_how_the_clusters_are_numbered(folders, capsys):
    """CTE's K defaulted to the largest id + 1: renumbering cluster 3 as 8191 (the same
    partition) moved F1 from 30.0 to 0.018. It is the number of distinct ids now, and a note
    says so where they are not 0..K-1."""
    root, _, predictions = folders
    dense = _json(capsys, root, predictions, "--matching", "global")
    (predictions / "c.txt").write_text("".join(f"{8191 if x == 3 else x}\n" for x in CLUSTERS["c"]))
    assert (
        main(["evaluate", str(root), str(predictions), "--matching", "global", "--format", "json"])
        == 0
    )
    out, err = capsys.readouterr()
    assert json.loads(out) == dense
    assert err == (
        "jaxseg: note: the predictions hold 5 distinct cluster ids up to 8191; F1 takes K = 5 "
        "segments per video (give the number of clusters the method was asked for with "
        "--segments-per-video)\n"
    )


def test_a_divisor_below_what_it_divides_is_noted(folders, capsys):
    """--segments-per-video 1 printed F1 120% and --iou-divisor 1 IoU 300% without a word
    (the references' arithmetic, kept): a note now names the divisor."""
    root, _, predictions = folders
    gt, pred, mask = _padded()
    kw = dict(mask=mask, num_classes=4, num_clusters=5)
    want = M.global_hungarian_scores(gt, pred, exclude_background=True, segments_per_video=1, **kw)
    assert float(want["precision"]) > 1  # the case this test is about
    argv = ("evaluate", str(root), str(predictions), "--format", "json")
    assert main([*argv, "--matching", "global", "--segments-per-video", "1"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["results"][0]["F1"] == pytest.approx(100 * float(want["f1"]), rel=1e-6)
    assert err.startswith(
        f"jaxseg: note: F1's precision is {100 * float(want['precision']):.2f}%: CTE divides the "
    )
    assert "by K x videos = 1 x 3 (--segments-per-video is the number of clusters" in err
    per_video = M.per_video_hungarian_scores(gt, pred, iou_divisor=1, **kw)
    above = int(np.sum(np.asarray(per_video["iou"]) > 1))
    assert above > 0
    assert main([*argv, "--matching", "per-video", "--iou-divisor", "1"]) == 0
    assert capsys.readouterr().err == (
        f"jaxseg: note: IoU exceeds 100% in {above} videos: TW-FINCH divides the IoU sum by "
        "--iou-divisor 1, fewer than their matched labels\n"
    )
    for option in (["--segments-per-video", "5"], ["--iou-divisor", "5"]):
        matching = "global" if option[0] == "--segments-per-video" else "per-video"
        assert main([*argv, "--matching", matching, *option]) == 0
        assert capsys.readouterr().err == ""


@pytest.mark.parametrize("matching", ["per-video", "asot-per"])
def test_per_video_protocols_give_intervals_over_videos(folders, capsys, matching):
    """The per-video protocols report means over videos: --confidence bootstraps them
    (the set-level protocols, one matching of the whole set, still refuse it)."""
    import jax

    from jaxseg.stats import resample_indices

    root, _, predictions = folders
    argv = ("--matching", matching, "--per-video", "--confidence", "0.9", "--samples", "400")
    document = _json(capsys, root, predictions, *argv, "--seed", "5")
    intervals = {row["metric"]: row for row in document["intervals"]}
    videos = document["per_video"]
    indices = np.asarray(resample_indices(jax.random.key(5), num_videos=3, num_samples=400))
    assert (document["summary"]["confidence"], document["summary"]["samples"]) == (0.9, 400)
    for column, row in intervals.items():
        values = np.array([v[column] for v in videos], np.float64)  # percentages
        assert not np.isnan(values).any()
        want = np.quantile(values[indices].mean(axis=1), [0.05, 0.95])
        np.testing.assert_allclose([row["low"], row["high"]], want, rtol=1e-5, err_msg=column)
        assert row["value"] == document["results"][0][column]
        assert row["low"] <= row["value"] <= row["high"]
