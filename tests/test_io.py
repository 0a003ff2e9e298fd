"""Reading datasets from files: formats, pairing of videos, and every bad input."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from _cli_data import random_videos, write_dataset, write_labels, write_mapping

from jaxseg import io
from jaxseg._host.io_files import find_mapping, pair_files, start_loading, write_atomic

NAMES = ("take", "open", "pour", "background")
INDEX = {name: i for i, name in enumerate(NAMES)}


def test_mapping_reads_indices_in_any_order_and_skips_blank_lines(tmp_path):
    path = tmp_path / "mapping.txt"
    path.write_text("2 pour\n\n0 take\n1 open\n3 background\n")
    assert io.read_mapping(path) == NAMES


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("0 take\n1\n", ":2: expected 'index name', got '1'"),
        ("0 take\nx open\n", ":2: expected 'index name', got 'x open'"),
        # a digit to str.isdigit, not to int(): it raised a ValueError with a traceback
        ("0 take\n\u00b9 open\n", ":2: expected 'index name', got '\u00b9 open'"),
        ("0 take\n1 open pour\n", ":2: expected 'index name'"),
        ("0 take\n0 open\n", ":2: index 0 appears twice"),
        ("0 take\n1 take\n", ":2: name 'take' appears twice (first on line 1)"),
        # a form feed breaks no line (str.splitlines counted one: line 3)
        ("0 take\x0c\n1 take\n", ":2: name 'take' appears twice (first on line 1)"),
        ("0 take\n2 open\n", ":2: index 2 is out of range: 2 classes take indices 0..1 (1 is"),
        # the line of the index, not only the gap it leaves
        ("2 a\n0 b\n99999999999999999999 c\n", ":3: index 99999999999999999999 is out of range"),
        ("\n\n", "mapping file is empty"),
        ("0 take\n1 op\x00en\n", "mapping file is not a text file (NUL byte at offset 11)"),
    ],
)
def test_mapping_errors_name_file_and_line(tmp_path, content, message):
    path = tmp_path / "mapping.txt"
    path.write_text(content)
    with pytest.raises(io.InputError) as error:
        io.read_mapping(path)
    assert str(error.value).startswith(str(path))
    assert message in str(error.value)


def test_mapping_missing_and_not_utf8(tmp_path):
    with pytest.raises(io.InputError, match="mapping file not found"):
        io.read_mapping(tmp_path / "nope.txt")
    path = tmp_path / "mapping.txt"
    path.write_bytes(b"0 take\n1 \xff\xfe\n")
    with pytest.raises(io.InputError, match=r":2: mapping file is not a UTF-8 text file \(invali"):
        io.read_mapping(path)
    path.write_text("0 take\n1 open\n", encoding="utf-16")
    with pytest.raises(io.InputError, match=r"mapping.txt: mapping file is UTF-16 text \(it st"):
        io.read_mapping(path)


@pytest.mark.parametrize("style", ["lines", "mstcn", "npy"])
def test_label_files_round_trip(tmp_path, style):
    for name, (target, _) in random_videos(0, 5, len(NAMES)).items():
        path = write_labels(tmp_path / name, target, NAMES, style)
        np.testing.assert_array_equal(io.read_labels(path, INDEX), target)
        assert io.read_labels(path, INDEX).dtype == np.int32


def test_text_labels_accept_crlf_tabs_and_leading_and_trailing_blank_lines(tmp_path):
    path = tmp_path / "v.txt"
    path.write_bytes(b"\r\ntake\r\ntake\topen\r\npour \n\r\n \n")
    np.testing.assert_array_equal(io.read_label_text(path, INDEX), [0, 0, 1, 2])
    path.write_bytes(b"\n### Frame level recognition: ###\ntake open\nbackground\n")
    np.testing.assert_array_equal(io.read_label_text(path, INDEX), [0, 1, 3])
    # Line breaks of classic Mac files (\r alone): the header is one line, not the whole file.
    path.write_bytes(b"### Frame level recognition: ###\rtake open\rbackground\r")
    np.testing.assert_array_equal(io.read_label_text(path, INDEX), [0, 1, 3])


@pytest.mark.parametrize(
    ("content", "line", "frame"),
    [
        (b"take\ntake\n\nopen\n", 3, 2),
        (b"\n\ntake\r\ntake\r\n \t\r\nopen\r\n", 5, 2),  # after leading blank lines
        (b"take\rtake\r\ropen", 3, 2),  # classic Mac line breaks
        (b"### Frame level recognition: ###\ntake open\n\nopen\n", 3, 2),
    ],
)
def test_a_blank_line_between_labels_is_named(tmp_path, content, line, frame):
    """It was skipped: the frames after it moved up one, or two files' lengths differed
    with no line named (MS-TCN's eval.py reads a frame labelled '')."""
    path = tmp_path / "v.txt"
    path.write_bytes(content)
    with pytest.raises(io.InputError) as error:
        io.read_label_text(path, INDEX)
    assert str(error.value) == (
        f"{path}:{line}: blank line after frame {frame}, a frame without a label; remove the "
        "line or write the frame's label"
    )


def test_a_first_line_of_class_names_beginning_with_hash_is_no_header(tmp_path):
    path, index = tmp_path / "v.txt", {"#bg": 0, "take": 1, "#": 2}
    path.write_text("#bg\ntake\n")
    np.testing.assert_array_equal(io.read_label_text(path, index), [0, 1])
    path.write_text("#bg take #\ntake\n")
    np.testing.assert_array_equal(io.read_label_text(path, index), [0, 1, 2, 1])
    path.write_text("### Frame level recognition: ###\n#bg take\n")
    np.testing.assert_array_equal(io.read_label_text(path, index), [0, 1])
    path.write_text("# take\n#bg take\n")  # '#' is no class of this mapping: a header
    np.testing.assert_array_equal(io.read_label_text(path, {"#bg": 0, "take": 1}), [0, 1])


def test_unknown_label_names_line_and_frame(tmp_path):
    path = tmp_path / "v.txt"
    path.write_text("\ntake\ntake\nopen\nstir\ntake\n")
    with pytest.raises(io.InputError) as error:
        io.read_label_text(path, INDEX)
    assert str(error.value).startswith(f"{path}:5: unknown label 'stir' (frame 4)")
    assert "known labels: take, open, pour, background" in str(error.value)
    path.write_text("### Frame level recognition: ###\ntake take open\nstir\n")
    with pytest.raises(io.InputError, match=r":3: unknown label 'stir' \(frame 4\)"):
        io.read_label_text(path, INDEX)
    path.write_text("### Frame level recognition: ###\ntake Take\n")
    with pytest.raises(io.InputError, match=r":2: unknown label 'Take' \(frame 2\)"):
        io.read_label_text(path, INDEX)
    # 'café' with a combining accent prints as the known 'café' with a composed one
    composed, combining = "caf\u00e9", "cafe\u0301"
    path.write_text(f"{combining}\n")
    with pytest.raises(io.InputError) as error:
        io.read_label_text(path, {composed: 0})
    assert str(error.value).endswith(
        f"known labels: {composed} ({combining!r} is the known {composed!r} in another Unicode "
        "normalization: 'cafe\\u0301' vs 'caf\\xe9')"
    )
    # Lines as editors number them: \r alone breaks one (here before the labels too), a form
    # feed does not.
    path.write_bytes(b"\r\rtake\x0ctake\rstir\n")
    with pytest.raises(io.InputError, match=r":4: unknown label 'stir' \(frame 3\)"):
        io.read_label_text(path, INDEX)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", ": empty file (no labels)"),
        (b" \n\n\t\n", ": empty file (no labels)"),
        (b"### Frame level recognition: ###\n", ": empty file (no labels)"),
        (b"### Frame level recognition: ###", ": empty file (no labels)"),
        (b"take\n\x00\x01\x02take\n", ": label file is not a text file (NUL byte at offset 5)"),
        # Windows' "Unicode" (UTF-16) text is text, but not UTF-8: it was "not a text file"
        ("take\r\n".encode("utf-16"),
         ": label file is UTF-16 text (it starts with a UTF-16 byte-order mark); save it as UTF-8"),
        (b"\xfe\xff" + "take\n".encode("utf-16-be"),
         ": label file is UTF-16 text (it starts with a UTF-16 byte-order mark); save it as UTF-8"),
        (b"take\n\x89PNG\xff\n",
         ":2: label file is not a UTF-8 text file (invalid byte 0x89 at offset 5)"),
        (b"### Frame level recognition: ###\ntake take\ntake \xe9\n",
         ":3: label file is not a UTF-8 text file (invalid byte 0xe9 at offset 48)"),
    ],
)  # fmt: skip
def test_empty_and_binary_label_files(tmp_path, content, message):
    path = tmp_path / "v.txt"
    path.write_bytes(content)
    with pytest.raises(io.InputError) as error:
        io.read_label_text(path, INDEX)
    assert str(error.value) == f"{path}{message}"


def test_label_arrays(tmp_path):
    scores = np.array([[0.1, 0.9, 0.0], [0.8, 0.1, 0.1], [0.0, 0.2, 0.3]], np.float32)
    np.save(tmp_path / "scores.npy", scores)
    np.testing.assert_array_equal(io.read_label_array(tmp_path / "scores.npy"), [1, 0, 2])
    bad = {
        "float_labels": (np.array([0.0, 1.0]), "expected integer labels [T] or float scores"),
        # a mask saved by mistake: refused as the Evaluator and the metrics refuse bool labels
        "bool_labels": (np.array([True, False]), "got dtype bool shape (2,)"),
        "rank3": (np.zeros((2, 2, 2), np.int32), "shape (2, 2, 2)"),
        "empty": (np.zeros((0,), np.int64), "empty array (no frames)"),
        "negative": (np.array([0, 2, -1]), "label -1 at frame 3 is not a class index"),
        # Larger than any class index: read as int32 they would wrap onto class 1 or 0.
        "int64": (np.array([0, 2**32 + 1, 1]), "label 4294967297 at frame 2 is not a class"),
        "uint64": (np.array([2**63 + 1], np.uint64), "label 9223372036854775809 at frame 1"),
        "limit": (np.array([0, 2**20]), "label 1048576 at frame 2 is not a class index"),
        "nan": (np.array([[0.0, np.nan]]), "no NaN"),
        # the argmax read class 0
        "no_class": (np.array([[0.0, 1.0], [-np.inf, -np.inf]]), "frame 2 are -inf in every"),
        "objects": (np.array([1, "a"], dtype=object), "not a readable .npy array"),
    }
    for name, (array, message) in bad.items():
        np.save(tmp_path / f"{name}.npy", array, allow_pickle=True)
        with pytest.raises(io.InputError, match=re.escape(message)):
            io.read_label_array(tmp_path / f"{name}.npy")
    (tmp_path / "junk.npy").write_bytes(b"not numpy")
    with pytest.raises(io.InputError, match=r"junk\.npy: label file is not a \.npy file"):
        io.read_label_array(tmp_path / "junk.npy")
    with pytest.raises(io.InputError, match="text label files need a mapping file"):
        io.read_labels(tmp_path / "v.txt", None)


def test_split_file(tmp_path):
    path = tmp_path / "test.split1.bundle"
    path.write_text("b.txt\na.txt\n\nc\n")
    assert io.read_split(path) == ("b", "a", "c")
    path.write_text("b.txt\na.txt\nb\n")
    with pytest.raises(
        io.InputError, match=r"bundle:3: video 'b' is listed twice \(first on line 1\)"
    ):
        io.read_split(path)
    path.write_text("b\x0c\na.txt\nb\n")  # a form feed breaks no line
    with pytest.raises(io.InputError, match=r"bundle:3: video 'b' is listed twice"):
        io.read_split(path)
    path.write_text("\n")
    with pytest.raises(io.InputError, match="split file lists no videos"):
        io.read_split(path)


def _touch(folder, *names):
    folder.mkdir(exist_ok=True)
    for name in names:
        (folder / name).write_text("take\n")


def test_pairing_by_video_name_ignoring_suffixes(tmp_path):
    _touch(tmp_path / "gt", "b.txt", "a.txt", ".hidden")
    _touch(tmp_path / "pred", "a", "b.npy")
    pairs = pair_files(tmp_path / "gt", tmp_path / "pred", None)
    assert [(n, t.name, p.name) for n, t, p in pairs] == [
        ("a", "a.txt", "a"),
        ("b", "b.txt", "b.npy"),
    ]
    pairs = pair_files(tmp_path / "gt", tmp_path / "pred", ["b"])
    assert [n for n, _, _ in pairs] == ["b"]


def test_pairing_errors_list_the_videos(tmp_path):
    _touch(tmp_path / "gt", "a.txt", "b.txt", "c.txt")
    _touch(tmp_path / "pred", "a", "d", "e")
    with pytest.raises(io.InputError) as error:
        pair_files(tmp_path / "gt", tmp_path / "pred", None)
    assert str(error.value) == (
        f"{tmp_path / 'pred'}: 2 prediction(s) without ground truth in {tmp_path / 'gt'}: d, e"
    )
    for name in ("d", "e"):
        (tmp_path / "pred" / name).unlink()
    with pytest.raises(io.InputError) as error:
        pair_files(tmp_path / "gt", tmp_path / "pred", None)
    assert str(error.value).endswith(
        "2 ground-truth file(s) without prediction in "
        f"{tmp_path / 'pred'}: b, c (use --split to evaluate a subset)"
    )
    with pytest.raises(io.InputError, match=r"no prediction for 1 video\(s\) of the split: c"):
        pair_files(tmp_path / "gt", tmp_path / "pred", ["a", "c"])
    with pytest.raises(io.InputError, match=r"no ground truth for 2 video\(s\) of the split: x, y"):
        pair_files(tmp_path / "gt", tmp_path / "pred", ["a", "x", "y"])
    _touch(tmp_path / "pred", "a.txt")
    with pytest.raises(io.InputError, match=r"two files for video 'a' \(also a\)"):
        pair_files(tmp_path / "gt", tmp_path / "pred", None)
    with pytest.raises(io.InputError, match="missing: ground-truth folder not found"):
        pair_files(tmp_path / "missing", tmp_path / "pred", None)
    (tmp_path / "empty").mkdir()
    with pytest.raises(io.InputError, match="empty: predictions folder has no files"):
        pair_files(tmp_path / "gt", tmp_path / "empty", None)


def test_a_video_name_in_another_unicode_normalization_is_pointed_out(tmp_path):
    """Files copied from macOS name ``café`` as ``e`` and a combining accent: the error said
    that ``café`` had no ground truth beside a ground truth ``café.txt`` that prints alike."""
    composed, combining = "caf\u00e9", "cafe\u0301"
    _touch(tmp_path / "gt", f"{composed}.txt", "x.txt")
    _touch(tmp_path / "pred", combining, "x")
    hint = (
        f"({combining!r} is the known {composed!r} in another Unicode normalization: "
        f"{combining!a} vs {composed!a})"
    )
    with pytest.raises(io.InputError) as error:
        pair_files(tmp_path / "gt", tmp_path / "pred", None)
    assert str(error.value).endswith(f"ground truth in {tmp_path / 'gt'}: {combining} {hint}")
    with pytest.raises(io.InputError) as error:
        pair_files(tmp_path / "gt", tmp_path / "pred", [composed, "x"])
    assert str(error.value).endswith(
        f"of the split: {composed} ({composed!r} is the known {combining!r} in another "
        f"Unicode normalization: {composed!a} vs {combining!a})"
    )


def test_dataset_reading_and_mapping_discovery(tmp_path):
    videos = random_videos(1, 6, len(NAMES))
    truth, predictions = write_dataset(
        tmp_path, videos, NAMES, prediction_style="lines", prediction_suffix=".txt"
    )
    assert find_mapping(truth) == tmp_path / "mapping.txt"
    dataset = io.load_segmentation_dataset(truth, predictions)
    assert dataset.names == tuple(sorted(videos))
    assert dataset.class_names == NAMES
    for name, target, prediction in zip(
        dataset.names, dataset.targets, dataset.predictions, strict=True
    ):
        np.testing.assert_array_equal(target, videos[name][0])
        np.testing.assert_array_equal(prediction, videos[name][1])
    calls = []
    io.load_segmentation_dataset(truth, predictions, progress=lambda *a: calls.append(a))
    assert calls == [(i, 6) for i in range(1, 7)]


def test_dataset_from_arrays_without_mapping_infers_classes(tmp_path):
    videos = {"a": (np.array([0, 0, 4]), np.array([0, 1, 1])), "b": (np.array([2]), np.array([3]))}
    truth, predictions = write_dataset(
        tmp_path, videos, [str(i) for i in range(5)], truth_style="npy", prediction_style="npy"
    )
    (tmp_path / "mapping.txt").unlink()
    dataset = io.load_segmentation_dataset(truth, predictions)
    assert dataset.class_names == ("0", "1", "2", "3", "4")
    np.testing.assert_array_equal(dataset.targets[0], [0, 0, 4])


def test_dataset_errors(tmp_path):
    videos = {"a": (np.array([0, 0, 1]), np.array([0, 1]))}
    truth, predictions = write_dataset(tmp_path, videos, NAMES)
    with pytest.raises(io.InputError) as error:
        io.load_segmentation_dataset(truth, predictions)
    assert str(error.value) == (
        f"{predictions / 'a'}: video 'a' has 2 predicted frames but 3 "
        f"ground-truth frames ({truth / 'a.txt'})"
    )
    (predictions / "a").unlink()
    np.save(predictions / "a.npy", np.array([0, 1, 7]))
    with pytest.raises(
        io.InputError, match=r"a.npy: label 7 at frame 3 is not a class of .*mapping.txt \(0..3\)"
    ):
        io.load_segmentation_dataset(truth, predictions)
    with pytest.raises(io.InputError, match=r"other\.txt: mapping file not found"):
        io.load_segmentation_dataset(truth, predictions, mapping=tmp_path / "other.txt")


_FORKED_READING = textwrap.dedent(
    """
    import sys
    from jaxseg._host.io_files import InputError, start_loading

    assert "jax" not in sys.modules  # forking is only safe before JAX starts its threads
    truth, predictions, bad = sys.argv[1:]
    calls = []
    forked = start_loading(truth, predictions, processes=2)(lambda *a: calls.append(a))
    here = start_loading(truth, predictions, processes=1)()
    assert forked.names == here.names and forked.class_names == here.class_names
    for a, b in zip(forked.targets + forked.predictions, here.targets + here.predictions):
        assert a.dtype == b.dtype and (a == b).all()
    assert calls[-1] == (len(here.names), len(here.names)), calls
    assert all(x[0] < y[0] for x, y in zip(calls, calls[1:])), calls
    try:
        start_loading(bad, predictions, processes=2)()
    except InputError as error:
        print(error)
    """
)


def test_forked_reading_equals_reading_here(tmp_path):
    """The command line reads with two forked processes before it imports JAX: the same
    dataset, and the error of the first bad video in order, as reading in one process."""
    videos = random_videos(2, 40, len(NAMES))
    truth, predictions = write_dataset(tmp_path, videos, NAMES)
    bad = tmp_path / "bad"
    bad.mkdir()
    for path in truth.iterdir():
        (bad / path.name).write_bytes(path.read_bytes())
    names = sorted(videos)
    (bad / f"{names[3]}.txt").write_text("take\nfly\n")  # unknown label, an early part
    (bad / f"{names[37]}.txt").write_text("take\n")  # wrong length, a late part
    done = subprocess.run(
        [sys.executable, "-c", _FORKED_READING, str(truth), str(predictions), str(bad)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{bad / names[3]}.txt:2: unknown label 'fly'"), done.stdout


def test_reading_here_when_no_process_can_start(tmp_path, monkeypatch):
    """Where processes or semaphores are unavailable, the files are read in this process."""
    truth, predictions = write_dataset(tmp_path, random_videos(4, 5, len(NAMES)), NAMES)

    def unavailable(*args, **kwargs):
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr("jaxseg._host.io_files.ProcessPoolExecutor", unavailable)
    dataset = start_loading(truth, predictions, processes=2)()
    expected = io.load_segmentation_dataset(truth, predictions)
    assert dataset.names == expected.names
    for a, b in zip(dataset.targets + dataset.predictions, expected.targets + expected.predictions):
        np.testing.assert_array_equal(a, b)


_ABANDONED_READING = textwrap.dedent(
    """
    import multiprocessing, os, sys
    from jaxseg._host.io_files import start_loading

    start_loading(sys.argv[1], sys.argv[2], processes=2)  # never finished
    with open(sys.argv[3], "w") as out:
        print(*(child.pid for child in multiprocessing.active_children()), file=out)
    os._exit(0)  # as the command ends: no interpreter teardown
    """
)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"  # a zombie has ended (its new parent may not reap it)


@pytest.mark.skipif(sys.platform != "linux", reason="forked readers are Linux-only")
def test_forked_readers_end_with_their_parent(tmp_path):
    """A command that ends (or is killed) while its readers work leaves no process behind."""
    truth, predictions = write_dataset(tmp_path, random_videos(3, 40, len(NAMES), 2000), NAMES)
    listing = tmp_path / "readers.txt"
    done = subprocess.run(  # no pipes: a leftover reader would hold them open
        [sys.executable, "-c", _ABANDONED_READING, str(truth), str(predictions), str(listing)],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
        timeout=120,
    )
    pids = [int(pid) for pid in listing.read_text().split()]
    assert done.returncode == 0 and len(pids) == 2, pids
    deadline = time.monotonic() + 10
    while any(map(_alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(map(_alive, pids))


def test_atomic_write_replaces_whole_file_or_nothing(tmp_path, monkeypatch):
    path = tmp_path / "out.json"
    write_atomic(path, "first")
    write_atomic(path, b"second")
    assert path.read_text() == "second"

    def broken_replace(source, target):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(io.InputError, match=f"{path}: cannot write: disk full"):
        write_atomic(path, "third")
    assert path.read_text() == "second"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]
    with pytest.raises(io.InputError, match=r"output folder .* does not exist"):
        write_atomic(tmp_path / "no" / "out.json", "x")


def test_mapping_is_found_above_the_ground_truth_folder(tmp_path, monkeypatch):
    (tmp_path / "groundTruth").mkdir()
    assert find_mapping(tmp_path / "groundTruth") is None
    write_mapping(tmp_path / "mapping.txt", NAMES)
    assert find_mapping(tmp_path / "groundTruth") == tmp_path / "mapping.txt"
    # from inside the folder (`jaxseg evaluate . ../results`): '.' has no parent of its own
    (tmp_path / "groundTruth" / "deeper").mkdir()
    monkeypatch.chdir(tmp_path / "groundTruth")
    for folder in (".", "./", "deeper/..", "../groundTruth"):
        assert find_mapping(Path(folder)).samefile(tmp_path / "mapping.txt"), folder
    monkeypatch.chdir(tmp_path / "groundTruth" / "deeper")
    assert find_mapping(Path("..")).samefile(tmp_path / "mapping.txt")


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_written_files_get_the_umask_mode(tmp_path, umask):
    """The temporary file's 0600 used to survive the rename: output was -rw------- always."""
    previous = os.umask(umask)
    try:
        write_atomic(tmp_path / "new.json", "x")
        write_atomic(tmp_path / "new.json", "y")  # a rewrite too
    finally:
        os.umask(previous)
    assert (tmp_path / "new.json").stat().st_mode & 0o777 == 0o666 & ~umask


def test_byte_order_marks_are_not_labels(tmp_path):
    """A UTF-8 BOM (Windows editors) used to make the first label unknown."""
    bom = b"\xef\xbb\xbf"
    (tmp_path / "mapping.txt").write_bytes(bom + b"0 take\n1 open\n2 pour\n3 background\n")
    assert io.read_mapping(tmp_path / "mapping.txt") == NAMES
    (tmp_path / "v.txt").write_bytes(bom + b"take\nopen\n")
    assert io.read_label_text(tmp_path / "v.txt", INDEX).tolist() == [0, 1]
    (tmp_path / "r").write_bytes(bom + b"### Frame level recognition: ###\npour take\n")
    assert io.read_label_text(tmp_path / "r", INDEX).tolist() == [2, 0]
    (tmp_path / "s.bundle").write_bytes(bom + b"v.txt\n")
    assert io.read_split(tmp_path / "s.bundle") == ("v",)


def test_non_label_files_beside_the_videos_are_ignored(tmp_path):
    """README.md or results.json in a predictions folder are no videos (they used to be
    'predictions without ground truth'); label-like names without a partner still are."""
    truth, predictions = write_dataset(tmp_path, {"a": ([0, 1], [0, 1])}, NAMES)
    for name in ("README.md", "results.json", "log.csv"):
        (predictions / name).write_text("not labels\n")
    (truth / "notes.md").write_text("notes\n")
    assert [name for name, _, _ in pair_files(truth, predictions, None)] == ["a"]
    (predictions / "b").write_text("take\n")
    with pytest.raises(io.InputError, match=r"1 prediction\(s\) without ground truth .*: b$"):
        pair_files(truth, predictions, None)


def test_a_mapping_file_in_both_folders_is_no_video(tmp_path):
    """``jaxseg evaluate GT GT`` (a sanity check) with ``GT/mapping.txt``, or a predictions
    folder holding a copy of the mapping: ``mapping.txt`` had a counterpart and was read as
    the labels of a video 'mapping' ("unknown label '0'")."""
    videos = {"a": (np.array([0, 1, 1]), np.array([0, 1, 1]))}
    truth, predictions = write_dataset(tmp_path, videos, NAMES)
    (tmp_path / "mapping.txt").rename(truth / "mapping.txt")
    assert [name for name, _, _ in pair_files(truth, truth, None)] == ["a"]
    write_mapping(predictions / "mapping.txt", NAMES)
    assert [name for name, _, _ in pair_files(truth, predictions, None)] == ["a"]
    data = io.load_segmentation_dataset(truth, truth)
    assert data.names == ("a",) and data.targets[0].tolist() == [0, 1, 1]
