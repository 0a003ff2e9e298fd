"""Every bad input gives one clear line on stderr, exit status 2, and no traceback."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from _cli_data import write_dataset

from jaxseg._host import io_files
from jaxseg._host.cli import main

NAMES = ("take", "open", "background")
VIDEOS = {
    "a": (np.array([0, 0, 1, 2]), np.array([0, 1, 1, 2])),
    "b": (np.array([2, 2, 1]), np.array([2, 1, 1])),
}


@pytest.fixture
def dataset(tmp_path):
    truth, predictions = write_dataset(tmp_path, VIDEOS, NAMES)
    return tmp_path, truth, predictions


def fails(capsys, *argv) -> str:
    """Runs ``jaxseg evaluate argv``; asserts a one-line user error; returns that line."""
    code = main(["evaluate", *map(str, argv)])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert err.startswith("jaxseg: error: ") and err.endswith("\n") and err.count("\n") == 1, err
    return err.removeprefix("jaxseg: error: ").rstrip("\n")


def test_missing_folders_and_files(dataset, capsys):
    root, truth, predictions = dataset
    assert fails(capsys, root / "nope", predictions) == (
        f"{root / 'nope'}: ground-truth folder not found"
    )
    assert fails(capsys, truth, root / "nope") == f"{root / 'nope'}: predictions folder not found"
    assert fails(capsys, truth, predictions, "--split", root / "s.bundle") == (
        f"{root / 's.bundle'}: split file not found"
    )
    assert fails(capsys, truth, predictions, "--mapping", root / "m.txt") == (
        f"{root / 'm.txt'}: mapping file not found"
    )
    for option, what in (("--split", "split file"), ("--mapping", "mapping file")):
        assert fails(capsys, truth, predictions, option, root) == (
            f"{root}: is a folder; the {what} must be a file"
        )
    assert fails(capsys, truth) == "give GROUND_TRUTH and PREDICTIONS folders (or --demo)"
    # --background takes every word after it: the folders given after it were class names
    assert fails(capsys, "--background", "SIL", truth, predictions) == (
        "give GROUND_TRUTH and PREDICTIONS folders (or --demo); --background took 'SIL', "
        f"{str(truth)!r}, {str(predictions)!r} as class names: give the folders before it, or "
        "end its names with --"
    )
    assert fails(capsys, "--demo", truth) == "--demo takes no GROUND_TRUTH or PREDICTIONS folders"
    # --mapping was ignored without a word, even a file that does not exist
    for mapping in (root / "mapping.txt", root / "m.txt"):
        assert fails(capsys, "--demo", "--mapping", mapping) == (
            "--demo takes no --mapping (the demo dataset has its own)"
        )


def test_pipes_and_devices_are_not_called_missing(dataset, capsys):
    """`--split <(...)` and `--mapping /dev/null` said 'split file not found'."""
    root, truth, predictions = dataset
    os.mkfifo(root / "split.fifo")
    assert fails(capsys, truth, predictions, "--split", root / "split.fifo") == (
        f"{root / 'split.fifo'}: is a pipe, not a regular file; the split file must be a file"
    )
    assert fails(capsys, truth, predictions, "--mapping", os.devnull) == (
        f"{os.devnull}: is a device, not a regular file; the mapping file must be a file"
    )


def test_predictions_without_ground_truth_and_vice_versa(dataset, capsys):
    root, truth, predictions = dataset
    (predictions / "c").write_text("take\n")
    (predictions / "d.txt").write_text("take\n")
    assert fails(capsys, truth, predictions) == (
        f"{predictions}: 2 prediction(s) without ground truth in {truth}: c, d"
    )
    for name in ("c", "d.txt", "a"):
        (predictions / name).unlink()
    assert fails(capsys, truth, predictions) == (
        f"{truth}: 1 ground-truth file(s) without prediction in {predictions}: a "
        "(use --split to evaluate a subset)"
    )
    (root / "split.bundle").write_text("a.txt\nb.txt\n")
    assert fails(capsys, truth, predictions, "--split", root / "split.bundle") == (
        f"{predictions}: no prediction for 1 video(s) of the split: a"
    )
    # a namesake that is no label file is pointed out: the error alone read as a lost file
    (predictions / "a.TXT").write_text("take\n")
    (predictions / "a").mkdir()
    namesakes = (
        f"; {predictions} holds a (a folder), a.TXT, not read: a label file is a file named as "
        "its video, with no suffix, .txt or .npy"
    )
    assert fails(capsys, truth, predictions) == (
        f"{truth}: 1 ground-truth file(s) without prediction in {predictions}: a "
        "(use --split to evaluate a subset)" + namesakes
    )
    assert fails(capsys, truth, predictions, "--split", root / "split.bundle") == (
        f"{predictions}: no prediction for 1 video(s) of the split: a" + namesakes
    )
    # a link whose target is gone is named as its video: it was said not to be
    (predictions / "a.TXT").unlink()
    (predictions / "a").rmdir()
    (predictions / "a.txt").symlink_to(root / "gone" / "a.txt")
    assert fails(capsys, truth, predictions, "--split", root / "split.bundle") == (
        f"{predictions}: no prediction for 1 video(s) of the split: a; {predictions} holds "
        "a.txt (a broken symbolic link), not read: a label file is a file named as its video, "
        "with no suffix, .txt or .npy"
    )


def test_length_mismatch_names_both_lengths(dataset, capsys):
    _, truth, predictions = dataset
    (predictions / "b").write_text("### Frame level recognition: ###\nbackground open\n")
    assert fails(capsys, truth, predictions) == (
        f"{predictions / 'b'}: video 'b' has 2 predicted frames but 3 ground-truth frames "
        f"({truth / 'b.txt'})"
    )


def test_unknown_label_names_file_and_line(dataset, capsys):
    _, truth, predictions = dataset
    (truth / "b.txt").write_text("background\nstir\nopen\n")
    assert fails(capsys, truth, predictions).startswith(
        f"{truth / 'b.txt'}:2: unknown label 'stir' (frame 2); known labels: take, open"
    )
    (truth / "b.txt").write_text("background\nbackground\nopen\n")
    (predictions / "a").write_text("### Frame level recognition: ###\ntake open Open background\n")
    assert fails(capsys, truth, predictions).startswith(
        f"{predictions / 'a'}:2: unknown label 'Open' (frame 3)"
    )
    (predictions / "a").write_text("take\nopen\nopen\nbackground\n")
    assert fails(capsys, truth, predictions, "--background", "SIL", "take") == (
        "--background: 'SIL' is not a class name; classes: take, open, background"
    )


def test_a_background_name_in_another_unicode_normalization_is_pointed_out(tmp_path, capsys):
    composed, combining = "caf\u00e9", "cafe\u0301"  # both print as 'café'
    names = ("take", composed)
    truth, predictions = write_dataset(tmp_path, {"a": (np.array([0, 1]),) * 2}, names)
    assert fails(capsys, truth, predictions, "--background", combining) == (
        f"--background: {combining!r} is not a class name; classes: take, {composed} "
        f"({combining!r} is the known {composed!r} in another Unicode normalization: "
        "'cafe\\u0301' vs 'caf\\xe9')"
    )


def test_empty_and_binary_files(dataset, capsys):
    _, truth, predictions = dataset
    (predictions / "a").write_text("")
    assert fails(capsys, truth, predictions) == f"{predictions / 'a'}: empty file (no labels)"
    (predictions / "a").write_text("### Frame level recognition: ###\n")
    assert fails(capsys, truth, predictions) == f"{predictions / 'a'}: empty file (no labels)"
    (predictions / "a").write_bytes(b"PK\x03\x04\x00\x00binary")
    assert fails(capsys, truth, predictions) == (
        f"{predictions / 'a'}: label file is not a text file (NUL byte at offset 4)"
    )
    (predictions / "a").write_bytes(b"take\n\xff\xd8\xff\xe0\n")
    assert fails(capsys, truth, predictions) == (
        f"{predictions / 'a'}:2: label file is not a UTF-8 text file (invalid byte 0xff at "
        "offset 5)"
    )


def test_unreadable_mapping(dataset, capsys):
    root, truth, predictions = dataset
    (root / "mapping.txt").write_text("0 take\n1 open\n2\n")
    assert fails(capsys, truth, predictions) == (
        f"{root / 'mapping.txt'}:3: expected 'index name', got '2'"
    )
    (root / "mapping.txt").write_bytes(b"\x00\x01")
    assert fails(capsys, truth, predictions) == (
        f"{root / 'mapping.txt'}: mapping file is not a text file (NUL byte at offset 0)"
    )
    (root / "mapping.txt").unlink()
    assert fails(capsys, truth, predictions) == (
        f"{truth / 'a.txt'}: text label files need a mapping file (--mapping)"
    )
    if os.geteuid() != 0:  # root reads any file
        (root / "m.txt").write_text("0 take\n")
        (root / "m.txt").chmod(0)
        assert "cannot read mapping file" in fails(capsys, truth, predictions, "--mapping",
                                                   root / "m.txt")  # fmt: skip


def test_a_mapping_of_more_classes_than_the_limit_names_the_file(dataset, capsys, monkeypatch):
    """A ValueError traceback from the Evaluator before (2**20 classes; patched to 2 here)."""
    root, truth, predictions = dataset
    monkeypatch.setattr(io_files, "LABEL_LIMIT", 2)
    assert fails(capsys, truth, predictions) == (
        f"{root / 'mapping.txt'}: 3 classes; at most 2 are supported (per-class count tables; "
        "relabel the classes used to 0..C-1)"
    )


def test_label_array_out_of_range(dataset, capsys):
    root, truth, predictions = dataset
    (predictions / "b").unlink()
    np.save(predictions / "b.npy", np.array([2, 3, 1]))
    assert fails(capsys, truth, predictions) == (
        f"{predictions / 'b.npy'}: label 3 at frame 2 is not a class of {root / 'mapping.txt'} "
        "(0..2)"
    )


@pytest.mark.parametrize("columns", [2, 7])
def test_score_arrays_need_a_column_per_class_of_the_mapping(dataset, capsys, columns):
    """7 columns against 3 classes read as 'label 6 is not a class', or passed without a word
    when the argmax stayed below 3."""
    root, truth, predictions = dataset
    (predictions / "b").unlink()
    scores = np.zeros((3, columns), np.float32)
    scores[:, 1] = 1.0  # argmax 1: a class of the mapping
    np.save(predictions / "b.npy", scores)
    assert fails(capsys, truth, predictions) == (
        f"{predictions / 'b.npy'}: scores [T, C] of shape (3, {columns}) have {columns} class "
        f"columns, but {root / 'mapping.txt'} has 3 classes"
    )


def test_output_folder_missing(dataset, capsys):
    root, truth, predictions = dataset
    target = root / "no" / "out.json"
    assert fails(capsys, truth, predictions, "--output", target) == (
        f"{target}: output folder {root / 'no'} does not exist"
    )


def test_empty_output_and_dangling_links_are_named(dataset, capsys):
    """`--output ""` printed ': is a folder' (no name); a link to a missing folder printed
    'output folder . does not exist', the link's own folder."""
    root, truth, predictions = dataset
    assert fails(capsys, truth, predictions, "--output", "") == (
        "--output is empty; give a file name (or - for stdout)"
    )
    assert fails(capsys, truth, predictions, "--plot", "") == "--plot is empty; give a folder"
    link = root / "dangling.json"
    link.symlink_to(root / "missing" / "x.json")
    assert fails(capsys, truth, predictions, "--output", link) == (
        f"{link}: symbolic link to {root / 'missing' / 'x.json'}: its folder "
        f"{root / 'missing'} does not exist"
    )
    (root / "missing").mkdir()
    assert main(["evaluate", str(truth), str(predictions), "--output", str(link)]) == 0
    capsys.readouterr()
    assert link.is_symlink() and (root / "missing" / "x.json").read_text().startswith("2 videos")


def test_bad_arguments_exit_2_with_usage(dataset, capsys):
    _, truth, predictions = dataset
    for argv in (["--overlaps", "0"], ["--overlaps", "1.5"], ["--format", "xml"],
                 ["--overlaps", "x"], ["--decimals", "-1"], ["--decimals", "x"],
                 ["--confidence", "0.9", "--seed", str(2**64)]):  # fmt: skip
        with pytest.raises(SystemExit) as exit_:
            main(["evaluate", str(truth), str(predictions), *argv])
        assert exit_.value.code == 2
        assert "usage: jaxseg evaluate" in capsys.readouterr().err
    # In (0, 1] but no simple fraction: refused with the arguments, not by the kernels later
    # (a traceback until then).
    for threshold in ("0.00001", "0.5000001"):
        with pytest.raises(SystemExit) as exit_:
            main(["evaluate", str(truth), str(predictions), "--iou-thresholds", "0.1", threshold])
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert err.endswith(
            "error: argument --iou-thresholds: IoU thresholds must be simple fractions such "
            f"as 0.1 or 0.25 (denominator <= 32768), got {threshold}\n"
        )


def test_a_stdout_that_cannot_encode_a_class_name(tmp_path, capsys, monkeypatch):
    """A class name that stdout's encoding lacks (an ASCII or Latin-1 locale, a Windows
    console page) ended in a UnicodeEncodeError traceback after the whole evaluation."""
    truth, predictions = write_dataset(tmp_path, VIDEOS, ("take", "\u5207\u308b", "background"))
    stdout = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    monkeypatch.setattr(sys, "stdout", stdout)
    assert fails(capsys, truth, predictions, "--per-class") == (
        "stdout (ascii) cannot write '\u5207' of a name in the results (a class or video); "
        "write them with --output FILE (UTF-8), or set PYTHONIOENCODING=utf-8"
    )
    stdout.flush()
    assert stdout.buffer.getvalue() == b""  # no table cut off at the name
    assert main(["evaluate", str(truth), str(predictions), "--per-class", "--format", "json"]) == 0
    stdout.flush()
    assert json.loads(stdout.buffer.getvalue())["per_class"][1]["class"] == "\u5207\u308b"


def test_real_command_no_traceback_and_clean_json(dataset):
    """``python -m jaxseg`` as a user runs it: exit codes, stdout holds only results, and a
    second run that loads the compiled programs from the cache prints nothing more."""
    root, truth, _ = dataset
    command = [sys.executable, "-m", "jaxseg", "evaluate"]
    environment = {**os.environ, "JAXSEG_CACHE_DIR": str(root / "cache")}
    bad = subprocess.run([*command, str(truth), str(truth.parent / "x")], capture_output=True,
                         text=True, check=False, env=environment)  # fmt: skip
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr == f"jaxseg: error: {truth.parent / 'x'}: predictions folder not found\n"
    for _ in range(2):  # compiles and fills the cache, then loads from it
        good = subprocess.run([*command, "--demo", "--format", "json"], capture_output=True,
                              text=True, check=False, env=environment)  # fmt: skip
        assert good.returncode == 0, good.stderr
        assert good.stderr == ""
        assert json.loads(good.stdout)["summary"]["videos"] == 28
        assert any((root / "cache").iterdir())


def test_interrupt_is_one_line_and_status_130(dataset, capsys, monkeypatch):
    """Ctrl-C: no traceback, the shell's status for SIGINT."""
    _, truth, predictions = dataset

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("jaxseg._host.cli._evaluator", interrupted)
    assert main(["evaluate", str(truth), str(predictions)]) == 130
    assert capsys.readouterr() == ("", "jaxseg: interrupted\n")


def test_output_that_cannot_be_written(dataset, capsys, monkeypatch):
    """A folder as --output, a read-only output folder: one line, exit 2, nothing written."""
    root, truth, predictions = dataset
    assert fails(capsys, truth, predictions, "--output", root) == (
        f"{root}: is a folder; --output needs a file name"
    )
    target = root / "out.json"
    real_access = os.access
    monkeypatch.setattr(  # root may write anywhere: simulate a read-only folder
        os, "access", lambda p, mode: False if str(p) == str(root) else real_access(p, mode)
    )
    assert fails(capsys, truth, predictions, "--output", target) == (
        f"{target}: output folder {root} is not writable"
    )
    monkeypatch.setattr(os, "access", real_access)

    def read_only(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("tempfile.mkstemp", read_only)
    assert fails(capsys, truth, predictions, "--output", target) == (
        f"{target}: cannot write to {root}: Permission denied"
    )
    assert not target.exists() and not list(root.glob(".out.json.*"))


def test_plot_folder_that_cannot_be_written(dataset, capsys, monkeypatch):
    """--plot naming a file or a read-only folder: one line before any work, no --output."""
    root, truth, predictions = dataset
    output = root / "out.txt"
    picture = root / "picture.png"
    picture.write_bytes(b"")
    assert fails(capsys, truth, predictions, "--plot", picture, "--output", output) == (
        f"{picture}: is a file; --plot needs a folder"
    )
    assert fails(capsys, truth, predictions, "--plot", picture / "sub") == (
        f"{picture / 'sub'}: {picture} is a file; --plot needs a folder"
    )
    (root / "results").mkdir()
    output = root / "results" / "out.txt"
    real_access = os.access
    monkeypatch.setattr(
        os, "access", lambda p, mode: False if str(p) == str(root) else real_access(p, mode)
    )
    assert fails(capsys, truth, predictions, "--plot", root / "pictures", "--output", output) == (
        f"{root / 'pictures'}: {root} is not writable"
    )
    assert not output.exists() and not (root / "pictures").exists()


def test_unreadable_predictions_folder(dataset, capsys, monkeypatch):
    _, truth, predictions = dataset
    real_iterdir = type(predictions).iterdir

    def iterdir(self):
        if self == predictions:
            raise PermissionError(13, "Permission denied")
        return real_iterdir(self)

    monkeypatch.setattr(type(predictions), "iterdir", iterdir)
    assert fails(capsys, truth, predictions) == (
        f"{predictions}: cannot read predictions folder: Permission denied"
    )


@pytest.mark.parametrize("kind", ["MemoryError", "XLA"])
def test_out_of_memory_is_one_line(dataset, capsys, monkeypatch, kind):
    import jax

    _, truth, predictions = dataset
    output = truth.parent / "out.json"

    def exhausted(*args, **kwargs):
        if kind == "MemoryError":
            raise MemoryError
        raise jax.errors.JaxRuntimeError(
            "RESOURCE_EXHAUSTED: Out of memory allocating 42949672960 bytes.\nmore detail"
        )

    monkeypatch.setattr("jaxseg._host.cli._evaluator", exhausted)
    assert fails(capsys, truth, predictions, "--output", output) == (
        "out of memory; evaluate fewer videos at once (--split), or on a machine with more memory"
    )
    assert not output.exists()
    # a bootstrap keeps every replicate: --samples 10**9 ran out of memory on two videos
    monkeypatch.setattr("jaxseg._host.cli._confidence_intervals", exhausted)
    monkeypatch.setattr("jaxseg._host.cli._evaluator", lambda *args, **kwargs: None)
    argv = (truth, predictions, "--confidence", "0.9", "--samples", "1000000000")
    assert fails(capsys, *argv) == (
        "out of memory; evaluate fewer videos at once (--split) or fewer bootstrap replicates "
        "(--samples, now 1,000,000,000), or on a machine with more memory"
    )


def test_ground_truth_path_that_is_a_file(dataset, capsys):
    _, truth, predictions = dataset
    assert fails(capsys, truth / "a.txt", predictions) == (
        f"{truth / 'a.txt'}: is a file; the ground-truth argument must be a folder of files"
    )
    assert fails(capsys, truth, predictions / "a") == (
        f"{predictions / 'a'}: is a file; the predictions argument must be a folder of files"
    )


def test_unreadable_npy_files_are_named(dataset, capsys):
    """numpy's reader raised EOFError on an empty file and returned an archive for an .npz
    under an .npy name (AttributeError later): tracebacks."""
    _, truth, predictions = dataset
    (predictions / "b").unlink()
    (predictions / "b.npy").write_bytes(b"")
    assert fails(capsys, truth, predictions) == (
        f"{predictions / 'b.npy'}: empty label file (not a .npy file)"
    )
    np.savez(predictions / "b.npz", labels=np.array([2, 1, 1]))
    (predictions / "b.npz").rename(predictions / "b.npy")
    assert fails(capsys, truth, predictions) == (
        f"{predictions / 'b.npy'}: not a .npy array but an .npz archive of several arrays"
    )
    # numpy's message for other bytes spoke of pickled data and invited allow_pickle=True
    (predictions / "b.npy").write_text("background\nopen\nopen\n")
    assert fails(capsys, truth, predictions) == (
        f"{predictions / 'b.npy'}: label file is not a .npy file (it starts with "
        "b'backgrou', not the .npy magic b'\\x93NUMPY')"
    )


def test_crlf_results_file_names_the_line_of_a_bad_label(dataset, capsys):
    _, truth, predictions = dataset
    (predictions / "b").write_bytes(b"### Frame level recognition: ###\r\nopen stir open\r\n")
    assert fails(capsys, truth, predictions).startswith(
        f"{predictions / 'b'}:2: unknown label 'stir' (frame 2)"
    )


def test_a_mapping_file_in_the_ground_truth_folder_is_no_video(dataset, capsys):
    root, truth, predictions = dataset
    (root / "mapping.txt").rename(truth / "mapping.txt")
    assert main(["evaluate", str(truth), str(predictions), "--format", "json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["videos"] == 2


def test_output_through_a_link_writes_its_target(dataset, capsys):
    """A rename put a regular file in the link's place (``/dev/stdout`` as root)."""
    root, truth, predictions = dataset
    target = root / "results.json"
    (root / "link.json").symlink_to(target)
    argv = ["evaluate", str(truth), str(predictions), "--format", "json", "--quiet"]
    assert main([*argv, "--output", str(root / "link.json")]) == 0
    assert (root / "link.json").is_symlink()
    assert json.loads(target.read_text())["summary"]["videos"] == 2


def test_os_errors_are_one_line(dataset, capsys, monkeypatch):
    """An OSError no check foresaw (a full disk, a permission found late) is reported as one
    line naming the file, not as a traceback."""
    _, truth, predictions = dataset

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("jaxseg._host.report.emit", full)
    assert fails(capsys, truth, predictions) == "cannot read or write: No space left on device"

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(truth / "a.txt"))

    monkeypatch.setattr("jaxseg._host.report.emit", denied)
    assert fails(capsys, truth, predictions) == f"{truth / 'a.txt'}: Permission denied"


def test_bootstrap_and_plot_options_are_checked_first(dataset, capsys):
    _, truth, predictions = dataset
    for argv in (
        ["--confidence", "0.9", "--samples", "1"],
        ["--confidence", "0.9", "--samples", "3000000000"],  # was a traceback (int32)
        ["--confidence", "0.9", "--seed", str(2**32)],
        ["--confidence", "0.9", "--seed", "-1"],
        ["--confidence", "95"],
    ):
        with pytest.raises(SystemExit) as exit_:
            main(["evaluate", str(truth), str(predictions), *argv])
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert "usage: jaxseg evaluate" in err
    assert err.endswith("got 95 (a fraction: 0.95 for 95%)\n")
    # Without a mapping, the classes of .npy labels are 0..largest: a confusion matrix of
    # 46,341 of them overflowed int32 (a traceback), and 40,000 exhausted the memory.
    sparse = truth.parent / "sparse"
    for folder, labels in (("groundTruth", [0, 1]), ("predictions", [0, 2000])):
        (sparse / folder).mkdir(parents=True)
        np.save(sparse / folder / "c.npy", np.array(labels))
    pytest.importorskip("matplotlib")
    message = fails(
        capsys, sparse / "groundTruth", sparse / "predictions", "--plot", sparse / "pictures"
    )
    assert message.startswith("--plot draws the 2001 x 2001 confusion matrix of the classes")
    assert not (sparse / "pictures").exists()


def test_too_few_samples_for_the_level_are_refused(dataset, capsys):
    """``--samples 2`` at 50% printed Acc 92.57 with the interval 90.05 to 91.37: with no
    replicate in a tail, the ends are the extreme replicates, both below the estimate."""
    _, truth, predictions = dataset
    assert fails(capsys, truth, predictions, "--confidence", "0.95", "--samples", "39") == (
        "--samples 39 is too few for a 95% interval: each tail needs a replicate, so at least 40"
    )
    assert fails(capsys, truth, predictions, "--confidence", "0.9", "--samples", "19").endswith(
        "so at least 20"
    )
    argv = ("compare", str(truth), str(predictions), str(predictions), "--samples", "2")
    assert main(list(argv)) == 2
    assert capsys.readouterr().err == (
        "jaxseg: error: --samples 2 is too few for a 95% interval: each tail needs a replicate, "
        "so at least 40\n"
    )


def test_options_evaluate_would_ignore_are_refused(dataset, capsys):
    """``--samples``/``--seed`` without ``--confidence`` and the ``--matching`` options
    without it ran without a word: a user who forgot ``--matching`` got frame accuracy on
    cluster ids."""
    _, truth, predictions = dataset
    for option, needed in (
        (["--samples", "50"], "--confidence"),
        (["--seed", "7"], "--confidence"),
        (["--segments-per-video", "3"], "--matching global"),
        (["--iou-divisor", "2"], "--matching per-video"),
    ):
        assert fails(capsys, truth, predictions, *option) == (
            f"{option[0]} goes with {needed}; without it, nothing would read it"
        )
    for option in (["--samples", "50"], ["--seed", "3"]):
        assert fails(capsys, truth, predictions, "--matching", "global", *option) == (
            f"--matching global does not take {option[0]}"
        )
    assert (
        main(["evaluate", str(truth), str(predictions), "--confidence", "0.9", "--seed", "3"]) == 0
    )
    assert main(["evaluate", "--demo", "--samples", "20", "--confidence", "0.9"]) == 0


def test_output_dash_is_stdout_and_a_long_name_is_written(dataset, capsys, monkeypatch):
    """``--output -`` wrote a file named '-'; an output name of 241-255 characters was
    refused, its temporary file's name being too long."""
    root, truth, predictions = dataset
    monkeypatch.chdir(root)
    argv = ["evaluate", str(truth), str(predictions), "--format", "json", "--quiet"]
    assert main([*argv, "--output", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["videos"] == 2
    assert not (root / "-").exists()
    long_name = "r" * 250 + ".json"
    assert main([*argv, "--output", long_name]) == 0
    assert json.loads((root / long_name).read_text())["summary"]["videos"] == 2


def test_output_never_overwrites_an_input(dataset, capsys):
    """``--output groundTruth/a.txt`` replaced the video's labels with the results table
    (and ``--output mapping.txt`` the mapping, ``detection ... --output sub.json`` the
    submission), announcing "wrote"."""
    root, truth, predictions = dataset
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    for output, what in (
        (truth / "a.txt", f"a label file of {truth}"),
        (predictions / "b", f"a label file of {predictions}"),
        (root / "mapping.txt", f"{root / 'mapping.txt'}"),  # found beside groundTruth/
    ):
        for argv in ((truth, predictions), (root, predictions)):  # also the dataset folder
            assert fails(capsys, *argv, "--output", output) == (
                f"{output}: --output would overwrite {what}, an input of this run"
            )
        compare = ("compare", truth, predictions, predictions, "--output", output)
        assert main([*map(str, compare)]) == 2
        assert "--output would overwrite" in capsys.readouterr().err
    assert fails(
        capsys, truth, predictions, "--matching", "global", "--output", truth / "a.txt"
    ) == (
        f"{truth / 'a.txt'}: --output would overwrite a label file of {truth}, an input of this run"
    )
    split = root / "split.bundle"
    split.write_text("a.txt\nb.txt\n")
    assert fails(capsys, truth, predictions, "--split", split, "--output", split).endswith(
        f"would overwrite {split}, an input of this run"
    )
    for command in ("detection", "grounding"):
        files = (root / "gt.json", root / "sub.json")
        assert main([command, *map(str, files), "--output", str(files[1])]) == 2
        assert capsys.readouterr().err == (
            f"jaxseg: error: {files[1]}: --output would overwrite {files[1]}, an input of this "
            "run\n"
        )
    assert all(p.read_bytes() == content for p, content in before.items())
    # A new file in a data folder, or one a later run would not read as labels, is written.
    for output in (predictions / "results.json", truth / "new.txt"):
        assert main(["evaluate", str(truth), str(predictions), "--output", str(output)]) == 0
        assert output.is_file()
        capsys.readouterr()


@pytest.mark.parametrize(
    "argv",
    [
        ["evaluate", "T", "P", "--iou-thresholds", "0.1", "--iou-thresholds", "0.5"],
        ["evaluate", "T", "P", "--iou-thresholds", "0.1", "--overlaps", "0.5"],
        ["compare", "T", "A", "B", "--background", "--background", "x"],
        ["detection", "T", "P", "--thresholds", "0.5", "--thresholds", "0.7"],
        ["detection", "T", "P", "--online", "--ambiguous", "1", "--ambiguous", "2"],
        ["grounding", "T", "P", "--top-k", "1", "--top-k", "5"],
    ],
)
def test_a_list_option_given_again_is_refused(capsys, argv):
    """The second list replaced the first without a word: --iou-thresholds 0.1
    --iou-thresholds 0.5 scored 0.5 alone."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    option = argv[-2]
    assert capsys.readouterr().err.endswith(
        f"error: {option} is given again; list every value after one {option}\n"
    )
