"""`jaxseg evaluate` end to end on folders built here: numbers, formats, options, the demo."""

from __future__ import annotations

import csv
import io
import json
import math
import re
import subprocess
import sys

import _reference as ref
import numpy as np
import pytest
from _cli_data import golden_videos, random_videos, write_dataset

from jaxseg import Evaluator, metrics
from jaxseg._host import demo
from jaxseg._host.cli import Progress, main
from jaxseg._host.io_files import load_segmentation_dataset

NAMES = ("SIL", "take", "pour", "stir", "background")
OVERLAPS = (0.1, 0.25, 0.5)


def run(capsys, *argv):
    code = main(["evaluate", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def expected_scores(videos, background=(), overlaps=OVERLAPS, asformer_end=False):
    """Dataset numbers in percent from the numpy oracle (tests/_reference.py)."""
    frames, correct, edits, tp, fp, fn = [], [], [], [], [], []
    for target, prediction in videos.values():
        frames.append(target.size)
        correct.append(int(np.sum(target == prediction)))
        edits.append(ref.edit_score(target, prediction, background=background))
        counts = ref.segmental_counts(target, prediction, overlaps, background=background,
                                      asformer_end=asformer_end)  # fmt: skip
        for store, value in zip((tp, fp, fn), counts, strict=True):
            store.append(value)
    scores = ref.dataset_scores(frames, correct, edits, tp, fp, fn)
    return [100 * scores["accuracy"], 100 * scores["edit"], *(100 * scores["f1"])]


def json_row(out, table="results"):
    return json.loads(out)[table]


def test_golden_set_prints_the_mstcn_lines_to_4_decimals(tmp_path, capsys, golden_segmentation):
    golden, arrays = golden_segmentation
    names = [f"class{c}" for c in range(golden["num_classes"])]  # no 'background': nothing excluded
    truth, predictions = write_dataset(tmp_path, golden_videos(arrays), names)
    code, out, err = run(capsys, truth, predictions, "--per-video", "--format", "json")
    assert code == 0 and err == ""
    row = json_row(out)[0]
    printed = [f"Acc: {row['Acc']:.4f}", f"Edit: {row['Edit']:.4f}"]
    printed += [f"F1@{tau:0.2f}: {row[f'F1@{100 * tau:g}']:.4f}" for tau in OVERLAPS]
    assert printed == golden["dataset"]["mstcn_no_bg"]["printed"]
    summary = json.loads(out)["summary"]
    assert summary["background"] == []
    for tau, column in zip(OVERLAPS, ("F1@10", "F1@25", "F1@50"), strict=True):
        counts = [summary[key][column] for key in ("tp", "fp", "fn")]
        assert counts == golden["dataset"]["mstcn_no_bg"][f"sum_tp_fp_fn@{tau}"]
    rows = {row["video"]: row for row in json_row(out, "per_video")}
    assert len(rows) == len(golden["videos"])
    for video in golden["videos"]:
        row, anchor = rows[video["name"]], video["mstcn_no_bg"]
        assert row["frames"] == video["T"]
        assert row["Acc"] == pytest.approx(100 * video["correct_frames"] / video["T"], abs=1e-9)
        assert row["Edit"] == pytest.approx(anchor["edit"], abs=1e-9)
        for tau, column in zip(OVERLAPS, ("F1@10", "F1@25", "F1@50"), strict=True):
            tp, fp, fn = anchor[f"tp_fp_fn@{tau}"]
            f1 = 0.0 if tp == 0 else 200 * tp / (2 * tp + fp + fn)
            assert row[column] == pytest.approx(f1, abs=1e-9)
    # The table with 4 decimals shows exactly the numbers eval.py prints.
    code, out, _ = run(capsys, truth, predictions, "--decimals", "4", "--background")
    numbers = out.splitlines()[4].split()[1:]
    assert numbers == [line.split(": ")[1] for line in golden["dataset"]["mstcn_no_bg"]["printed"]]


def test_golden_set_with_background_finite_subset(tmp_path, capsys, golden_segmentation):
    golden, arrays = golden_segmentation
    reference = golden["dataset"]["mstcn_bg0_finite_subset"]
    names = ["background"] + [f"class{c}" for c in range(1, golden["num_classes"])]
    videos = golden_videos(arrays, exclude=reference["excluded_videos"])
    _, predictions = write_dataset(tmp_path, videos, names)
    code, out, _ = run(capsys, tmp_path, predictions, "--format", "json")  # dataset folder
    assert code == 0
    row = json_row(out)[0]
    printed = [f"Acc: {row['Acc']:.4f}", f"Edit: {row['Edit']:.4f}"]
    printed += [f"F1@{tau:0.2f}: {row[f'F1@{100 * tau:g}']:.4f}" for tau in OVERLAPS]
    assert printed == reference["printed"]
    assert json.loads(out)["summary"]["background"] == ["background"]


def test_golden_set_legacy_asformer_end(tmp_path, capsys, golden_segmentation):
    golden, arrays = golden_segmentation
    reference = golden["dataset"]["asformer_no_bg"]
    names = [f"class{c}" for c in range(golden["num_classes"])]
    truth, predictions = write_dataset(tmp_path, golden_videos(arrays), names)
    code, out, _ = run(capsys, truth, predictions, "--legacy-asformer-end", "--format", "json")
    assert code == 0
    row = json_row(out)[0]
    assert row["Acc"] == pytest.approx(reference["acc"], abs=1e-9)
    assert row["Edit"] == pytest.approx(reference["edit"], abs=1e-9)
    for tau, column in zip(OVERLAPS, ("F1@10", "F1@25", "F1@50"), strict=True):
        assert row[column] == pytest.approx(reference[f"f1@{tau}"], abs=1e-9)


@pytest.mark.parametrize(
    ("truth_style", "prediction_style", "suffix"),
    [
        ("lines", "mstcn", ""),
        ("lines", "lines", ".txt"),
        ("npy", "npy", ""),
        ("lines", "npy", ""),
        ("lines", "scores", ""),
    ],
)
def test_every_file_format_gives_the_oracle_numbers(tmp_path, capsys, truth_style,
                                                    prediction_style, suffix):  # fmt: skip
    videos = random_videos(7, 8, len(NAMES))
    truth, predictions = write_dataset(tmp_path, videos, NAMES, truth_style=truth_style,
                                       prediction_style=prediction_style,
                                       prediction_suffix=suffix)  # fmt: skip
    code, out, _ = run(capsys, truth, predictions, "--format", "json")
    assert code == 0
    row = json_row(out)[0]
    values = [row[c] for c in ("Acc", "Edit", "F1@10", "F1@25", "F1@50")]
    np.testing.assert_allclose(values, expected_scores(videos, background=(4,)), atol=1e-9)


def test_per_class_rows_equal_the_oracle(tmp_path, capsys):
    videos = random_videos(9, 8, len(NAMES) - 1)  # class 4 ('background') never occurs
    truth, predictions = write_dataset(tmp_path, videos, NAMES)
    code, out, _ = run(capsys, truth, predictions, "--per-class", "--format", "json")
    assert code == 0
    rows = json_row(out, "per_class")
    targets = np.concatenate([t for t, _ in videos.values()])
    outputs = np.concatenate([p for _, p in videos.values()])
    oracle = ref.per_class(targets, outputs, len(NAMES))
    assert [r["class"] for r in rows] == [*NAMES, "mean"]
    for c, row in enumerate(rows[:-1]):
        assert row["frames"] == int(np.sum(targets == c))
        assert row["predicted"] == int(np.sum(outputs == c))
        for column, key in (("Recall", "recall"), ("Precision", "precision"), ("F1", "f1")):
            if math.isnan(oracle[key][c]):
                assert row[column] is None  # absent class: null, left out of the mean
            else:
                assert row[column] == pytest.approx(100 * oracle[key][c], abs=1e-4)
    assert rows[-1]["F1"] == pytest.approx(100 * np.nanmean(oracle["f1"]), abs=1e-4)


def test_per_class_table_follows_the_librarys_rule_for_missing_classes(tmp_path, capsys):
    """A class only predicted has recall 0 and one never predicted precision 0, both in the
    means; only a class in neither is '-' (null) and left out: the numbers of
    ``metrics.recall``/``precision``/``f1_score``, ``streaming.frame_metrics`` and the
    Evaluator's class accuracy. The table used to leave the recall of a class only predicted
    out of its mean (mmsegmentation's mAcc), so its mean recall was not the Evaluator's mean
    class accuracy, nor the recall bars of ``--plot``."""
    videos = {
        "a": (np.array([0, 0, 1, 1]), np.array([0, 3, 1, 1])),  # 'stir' (3) is only predicted
        "b": (np.array([1, 1, 0, 4]), np.array([1, 0, 0, 1])),  # 'background' never predicted
    }
    truth, predictions = write_dataset(tmp_path, videos, NAMES)
    code, out, _ = run(capsys, truth, predictions, "--per-class", "--background", "--format",
                       "json")  # fmt: skip
    assert code == 0
    rows = {row["class"]: row for row in json_row(out, "per_class")}
    assert rows["stir"]["Recall"] == 0.0 and rows["stir"]["Precision"] == 0.0
    assert rows["background"]["Recall"] == 0.0 and rows["background"]["Precision"] == 0.0
    assert [rows["pour"][k] for k in ("Recall", "Precision", "F1")] == [None] * 3
    assert rows["mean"]["Recall"] == pytest.approx(100 * (2 / 3 + 3 / 4 + 0 + 0) / 4)

    targets = np.concatenate([t for t, _ in videos.values()])
    outputs = np.concatenate([p for _, p in videos.values()])
    options = {"num_classes": len(NAMES)}
    names = {"Recall": metrics.recall, "Precision": metrics.precision, "F1": metrics.f1_score}
    for column, metric in names.items():
        per_class = np.asarray(metric(targets, outputs, average="none", **options))
        got = [np.nan if rows[n][column] is None else rows[n][column] for n in NAMES]
        np.testing.assert_allclose(got, 100 * per_class, rtol=1e-6)
        macro = float(metric(targets, outputs, average="macro", **options))
        assert rows["mean"][column] == pytest.approx(100 * macro, rel=1e-6)
    evaluator = Evaluator(**options)
    evaluator.add([t for t, _ in videos.values()], [p for _, p in videos.values()])
    result = evaluator.get()
    assert rows["mean"]["Recall"] == pytest.approx(100 * result["mean_class_accuracy"], rel=1e-6)
    _, table, _ = run(capsys, truth, predictions, "--per-class", "--background")
    assert "'-': a class in neither the ground truth nor the predictions" in table
    stir = next(line for line in table.splitlines() if line.startswith("stir"))
    assert stir.split() == ["stir", "0", "1", "0.00", "0.00", "0.00"]
    pour = next(line for line in table.splitlines() if line.startswith("pour"))
    assert pour.split() == ["pour", "0", "0", "-", "-", "-"]


def test_plot_draws_the_per_class_tables_numbers(tmp_path, capsys, monkeypatch):
    """The bars of ``--plot`` are the ``--per-class`` table's recall and F1 and its heatmap the
    confusion matrix of all frames (the bars had come from a second computation)."""
    pytest.importorskip("matplotlib")
    from jaxseg._host import plotting

    drawn = {}

    def overview(matrix, scores, **options):
        drawn.update(matrix=np.asarray(matrix), scores=scores)
        return plotting.class_scores(options["class_names"], scores, dpi=10)

    monkeypatch.setattr(plotting, "overview", overview)
    videos = random_videos(5, 6, len(NAMES) - 1)  # class 4 ('background') never occurs
    videos["only predicted"] = (np.array([0, 0, 1]), np.array([0, 3, 1]))
    truth, predictions = write_dataset(tmp_path, videos, NAMES)
    code, out, _ = run(capsys, truth, predictions, "--per-class", "--format", "json", "--plot",
                       tmp_path / "pictures")  # fmt: skip
    assert code == 0
    rows = json_row(out, "per_class")[:-1]
    for column, key in (("Recall", "Recall"), ("F1", "F1")):
        table = [np.nan if row[column] is None else row[column] for row in rows]
        np.testing.assert_array_equal(drawn["scores"][key], table)
    targets = np.concatenate([t for t, _ in videos.values()])
    outputs = np.concatenate([p for _, p in videos.values()])
    expected = np.zeros((len(NAMES), len(NAMES)), np.int64)
    np.add.at(expected, (targets, outputs), 1)
    np.testing.assert_array_equal(drawn["matrix"], expected)


def test_a_first_label_beginning_with_hash_is_a_frame_not_a_header(tmp_path, capsys):
    """A class '#bg' on the first line was taken as the MS-TCN results header: both files
    lost their first frame without a word (2 frames, not 3)."""
    truth, predictions = write_dataset(
        tmp_path, {"a": (np.array([0, 1, 1]), np.array([0, 1, 0]))}, ("#bg", "take")
    )
    (predictions / "a").write_text("#bg\ntake\n#bg\n")
    for header in ("", "### Frame level recognition: ###\n"):
        (truth / "a.txt").write_text(f"{header}#bg\ntake\ntake\n")
        code, out, err = run(capsys, truth, predictions, "--format", "json")
        assert code == 0, err
        document = json.loads(out)
        assert document["summary"]["frames"] == 3
        assert json_row(out)[0]["Acc"] == pytest.approx(100 * 2 / 3)


def test_table_markdown_and_csv_agree_with_json(tmp_path, capsys):
    videos = random_videos(10, 8, len(NAMES))
    truth, predictions = write_dataset(tmp_path, videos, NAMES)
    argv = (truth, predictions, "--per-video", "--per-class")
    _, document, _ = run(capsys, *argv, "--format", "json")
    document = json.loads(document)
    _, table, _ = run(capsys, *argv)
    _, markdown, _ = run(capsys, *argv, "--format", "markdown", "--decimals", "1")
    _, text, _ = run(capsys, *argv, "--format", "csv")
    frames = sum(t.size for t, _ in videos.values())
    summary = f"8 videos, {frames:,} frames, 5 classes; background: background"
    assert table.splitlines()[0] == summary and markdown.splitlines()[0] == summary
    result = document["results"][0]
    assert table.splitlines()[4].split() == ["all"] + [
        f"{result[c]:.2f}" for c in ("Acc", "Edit", "F1@10", "F1@25", "F1@50")
    ]
    assert f"| all | {result['Acc']:.1f} | {result['Edit']:.1f} |" in markdown
    assert sum(line.startswith("|:---|") for line in markdown.splitlines()) == 3  # 3 tables
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["table"] for r in rows] == ["results"] + ["per_video"] * 8 + ["per_class"] * 6
    assert float(rows[0]["Edit"]) == result["Edit"]
    video = document["per_video"][2]
    assert rows[3]["name"] == video["video"] and float(rows[3]["F1@25"]) == video["F1@25"]
    assert rows[-1]["name"] == "mean" and rows[-1]["Edit"] == ""


def test_markdown_cells_holding_a_pipe_stay_one_cell(tmp_path, capsys):
    """A ``|`` in a video or class name split its Markdown cell: the row had one cell more
    than the header, and every number after the name sat under the wrong column."""
    videos = random_videos(12, 2, 3)
    videos = {"v|a": videos["video_00"], "v|b": videos["video_01"]}
    truth, predictions = write_dataset(tmp_path, videos, ("bg", "a|b", "c"))
    argv = (truth, predictions, "--per-video", "--per-class")
    _, document, _ = run(capsys, *argv, "--format", "json")
    document = json.loads(document)
    _, markdown, _ = run(capsys, *argv, "--format", "markdown")
    tables = [[re.split(r"(?<!\\)\|", line)[1:-1] for line in block.splitlines()]
              for block in markdown.split("\n\n") if block.startswith("|")]  # fmt: skip
    assert len(tables) == 3
    for table in tables:
        assert all(len(row) == len(table[0]) for row in table)
    video_row = tables[1][3]  # header, rule, then the videos in sorted order: v|b second
    assert [c.strip() for c in video_row[:3]] == [
        "v\\|b",
        str(videos["v|b"][0].size),
        f"{document['per_video'][1]['Acc']:.2f}",
    ]
    class_row = tables[2][3]
    assert class_row[0].strip() == "a\\|b"
    assert class_row[3].strip() == f"{document['per_class'][1]['Recall']:.2f}"


def test_split_overlaps_and_background_options(tmp_path, capsys):
    videos = random_videos(11, 8, len(NAMES))
    chosen = ["video_05", "video_01", "video_02"]
    truth, predictions = write_dataset(tmp_path, videos, NAMES, split=chosen)
    (truth / "video_03.txt").unlink()  # outside the split: never looked at
    subset = {name: videos[name] for name in chosen}
    argv = (truth, predictions, "--split", tmp_path / "split.bundle", "--format", "json")
    options = ("--background", "SIL", "background", "--overlaps", "0.3", "0.75", "--per-video")
    code, out, _ = run(capsys, *argv, *options)
    assert code == 0
    assert [r["video"] for r in json_row(out, "per_video")] == chosen
    assert json.loads(out)["summary"]["background"] == ["SIL", "background"]
    row = json_row(out)[0]
    assert list(row) == ["name", "Acc", "Edit", "F1@30", "F1@75"]
    expected = expected_scores(subset, (0, 4), overlaps=(0.3, 0.75))
    np.testing.assert_allclose(list(row.values())[1:], expected, atol=1e-9)


def test_thresholds_alike_in_six_digits_get_two_columns(tmp_path, capsys):
    """145/1016 and 146/1023 are both F1@14.2717 to six digits: the JSON row and the summary's
    tp/fp/fn kept one of the two thresholds (a dict of equal keys). Column names take more
    digits where needed, as detection's and grounding's do."""
    videos = random_videos(15, 6, len(NAMES))
    truth, predictions = write_dataset(tmp_path, videos, NAMES)
    overlaps = (0.1, 145 / 1016, 146 / 1023)
    code, out, err = run(capsys, truth, predictions, "--format", "json", "--iou-thresholds",
                         *map(repr, overlaps))  # fmt: skip
    assert code == 0, err
    row = json_row(out)[0]
    assert list(row) == ["name", "Acc", "Edit", "F1@10", "F1@14.27165", "F1@14.27175"]
    expected = expected_scores(videos, (4,), overlaps=overlaps)
    np.testing.assert_allclose(list(row.values())[1:], expected, atol=1e-9)
    tp = [int(sum(ref.segmental_counts(t, p, overlaps, background=(4,))[0][k]
                  for t, p in videos.values())) for k in range(3)]  # fmt: skip
    assert list(json.loads(out)["summary"]["tp"].values()) == tp


def test_output_file_and_quiet(tmp_path, capsys):
    videos = random_videos(12, 8, len(NAMES))
    truth, predictions = write_dataset(tmp_path, videos, NAMES)
    target = tmp_path / "results.json"
    code, out, err = run(capsys, truth, predictions, "--format", "json", "--output", target)
    assert code == 0 and out == ""
    assert err == f"jaxseg: wrote {target}\n"
    assert json.loads(target.read_text())["summary"]["videos"] == 8
    code, out, err = run(capsys, truth, predictions, "--output", target, "--quiet")
    assert code == 0 and out == "" and err == ""
    assert target.read_text().startswith("8 videos,")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_files_left_out_as_no_label_files_are_named(tmp_path, capsys):
    """A ground-truth file ``video_09.mp4`` without a prediction is no label file by its
    name and is left out, like a README: said on stderr, so that a video never drops out
    unseen."""
    videos = random_videos(14, 5, len(NAMES))
    truth, predictions = write_dataset(tmp_path, videos, NAMES, split=list(videos))
    (truth / "video_09.mp4").write_text("SIL\n")
    (predictions / "README.md").write_text("notes\n")
    code, out, err = run(capsys, truth, predictions, "--format", "json")
    assert code == 0 and json.loads(out)["summary"]["videos"] == 5
    assert err == (
        "jaxseg: note: 2 file(s) not read, with no counterpart in the other folder and not "
        "named like a label file (no suffix, .txt or .npy): "
        f"{truth / 'video_09.mp4'}, {predictions / 'README.md'}\n"
    )
    for options in (("--quiet",), ("--split", tmp_path / "split.bundle")):
        code, _, err = run(capsys, truth, predictions, *options)
        assert code == 0 and err == ""
    # a mapping.txt in the ground-truth folder is read as the mapping: it was named as a
    # file "not read" and "not named like a label file"
    (tmp_path / "mapping.txt").rename(truth / "mapping.txt")
    (truth / "video_09.mp4").unlink()
    code, out, err = run(capsys, truth, predictions, "--format", "json")
    assert code == 0 and json.loads(out)["summary"]["classes"] == list(NAMES)
    assert err == (
        "jaxseg: note: 1 file(s) not read, with no counterpart in the other folder and not "
        f"named like a label file (no suffix, .txt or .npy): {predictions / 'README.md'}\n"
    )


def test_plot_folder(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    videos = random_videos(13, 8, len(NAMES))
    truth, predictions = write_dataset(tmp_path, videos, NAMES)
    pictures = tmp_path / "pictures"
    code, out, err = run(capsys, truth, predictions, "--plot", pictures)
    assert code == 0 and out.startswith("8 videos")
    # one overview by default (a PNG per video made --plot 30x slower than the evaluation)
    assert err == f"jaxseg: wrote 1 picture to {pictures}\n"
    assert sorted(p.name for p in pictures.iterdir()) == ["overview.png"]
    code, _, err = run(capsys, truth, predictions, "--plot", pictures, "--plot-videos", "3")
    assert code == 0 and err == f"jaxseg: wrote 4 pictures to {pictures}\n"
    accuracy = {v: float(np.mean(t == p)) for v, (t, p) in videos.items()}
    worst = sorted(videos, key=lambda v: (accuracy[v], sorted(videos).index(v)))[:3]
    timelines = sorted(p.name for p in pictures.iterdir() if p.name.startswith("timeline_"))
    assert timelines == sorted(f"timeline_{v}.png" for v in worst)
    code, _, err = run(capsys, truth, predictions, "--plot", pictures, "--plot-videos", "all")
    assert code == 0 and err == f"jaxseg: wrote 9 pictures to {pictures}\n"
    for path in pictures.iterdir():
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 2000
    assert main(["evaluate", str(truth), str(predictions), "--plot-videos", "2"]) == 2
    assert capsys.readouterr().err == (
        "jaxseg: error: --plot-videos needs --plot DIR (the folder of the pictures)\n"
    )


def test_demo_command(capsys):
    code, out, err = run(capsys, "--demo")
    assert code == 0 and err == ""
    dataset = load_segmentation_dataset(
        demo.DEMO_DIRECTORY / "groundTruth", demo.DEMO_DIRECTORY / "predictions"
    )
    videos = dict(zip(dataset.names, zip(dataset.targets, dataset.predictions, strict=True),
                      strict=True))  # fmt: skip
    frames = sum(t.size for t in dataset.targets)
    lines = out.splitlines()
    assert lines[0] == f"28 videos, {frames:,} frames, 11 classes; background: background"
    assert lines[2] == "Results (%)"
    expected = [f"{v:.2f}" for v in expected_scores(videos, background=(10,))]
    assert lines[3].split() == ["name", "Acc", "Edit", "F1@10", "F1@25", "F1@50"]
    assert lines[4].split() == ["all", *expected]


def test_progress_bar_only_on_a_terminal_after_the_delay():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    stream = Terminal()
    progress = Progress("reading", stream=stream, delay=0.0)
    progress(1, 4)
    assert stream.getvalue() == "\rreading [#######.......................] 1/4"
    progress(4, 4)
    assert stream.getvalue().endswith("\rreading [" + "#" * 30 + "] 4/4")
    progress.close()
    assert stream.getvalue().endswith("\r" + " " * 44 + "\r")
    for stream, delay in ((Terminal(), 60.0), (io.StringIO(), 0.0)):
        progress = Progress("reading", stream=stream, delay=delay)
        progress(4, 4)
        progress.close()
        assert stream.getvalue() == ""


def test_the_command_line_imports_no_jax_before_reading():
    """Building the parser imported JAX (the detection command's threshold preset came from a
    kernel module), so the label files were always read by one process: a process running
    JAX's threads must not fork its two readers."""
    probe = (
        "import sys; from jaxseg._host.cli import build_parser; build_parser(); "
        "print('jax' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["False"]
