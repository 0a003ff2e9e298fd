"""Reading action-segmentation datasets from files (MS-TCN layout, label files, ``.npy`` arrays).

Every problem with the user's files raises :class:`InputError`, whose message is one line that
names the file (and the line, where there is one). Nothing here imports JAX.
"""

from __future__ import annotations

import ctypes
import json
import math
import multiprocessing
import os
import re
import signal
import stat
import sys
import tempfile
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import NamedTuple

import numpy as np

_LABEL_SUFFIXES = (".txt", ".npy")
_MAPPING_FILE = "mapping.txt"
# Characters of an output's name kept in its temporary file's name, so that the latter fits
# the usual limit of 255 bytes whenever the output's own name does.
_TEMPORARY_STEM = 64
# Class indices and cluster ids index per-class count tables (the Evaluator's: largest label + 1
# entries on the host and on the device), which this bound keeps at a few MB; a larger label
# is a misread file or ids to relabel, not a class.
LABEL_LIMIT = 1 << 20
_NPY_MAGIC = b"\x93NUMPY"  # the first bytes of every .npy file
_BOM = b"\xef\xbb\xbf"  # a UTF-8 byte-order mark (Windows editors write one)
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")  # little- and big-endian UTF-16 byte-order marks
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_BYTE_LINE_BREAK = re.compile(rb"\r\n|\r|\n")
# A line of ASCII whitespace only (the labels' separators) after a line break.
_BLANK_LINE = re.compile(rb"(?:\r\n|\r(?!\n)|\n)[ \t\x0b\x0c]*[\r\n]")


class InputError(ValueError):
    """A problem with the user's input files; the message names the file (and line)."""


class SegmentationDataset(NamedTuple):
    """Frame labels of the videos of a dataset, as class indices.

    Attributes:
      names: video names (file names without ``.txt``/``.npy``), in evaluation order.
      targets: one int32 array ``[T_i]`` of ground-truth class indices per video.
      predictions: one int32 array ``[T_i]`` of predicted class indices per video.
      class_names: name of each class index ``0..C-1`` (``str(i)`` when there is no mapping).
    """

    names: tuple[str, ...]
    targets: tuple[np.ndarray, ...]
    predictions: tuple[np.ndarray, ...]
    class_names: tuple[str, ...]


def text_lines(text: str) -> list[str]:
    """The lines of ``text``, broken at ``\\n``, ``\\r\\n`` or ``\\r`` only, as ``open`` reads
    them and editors number them: ``str.splitlines`` also breaks at form feeds and at U+2028,
    U+2029 and U+0085, which a JSON string may hold as they are."""
    return _LINE_BREAK.split(text)


def require_file(path: Path, what: str) -> None:
    """Raises :class:`InputError` unless ``path`` is a regular file (a folder, a pipe or a
    device is named as one: a pipe, such as ``<(...)``, reads once, and some files are read
    twice, by ``compare``)."""
    if path.is_dir():
        raise InputError(f"{path}: is a folder; the {what} must be a file")
    if path.is_file():
        return
    try:
        mode = path.stat().st_mode
    except OSError:
        raise InputError(f"{path}: {what} not found") from None
    kind = (
        "a pipe" if stat.S_ISFIFO(mode)
        else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
        else "a socket" if stat.S_ISSOCK(mode)
        else "not a file"
    )  # fmt: skip
    raise InputError(f"{path}: is {kind}, not a regular file; the {what} must be a file")


def _read_bytes(path: Path, what: str) -> bytes:
    require_file(path, what)
    try:
        return path.read_bytes()
    except OSError as error:
        raise InputError(f"{path}: cannot read {what}: {error.strerror or error}") from None


def _decode_text(path: Path, data: bytes, what: str) -> str:
    """Returns ``data`` as text (without a byte-order mark), rejecting binary content.

    A byte that is not UTF-8 is reported by line: ``path:line: ... (invalid byte 0xff at
    offset 5)``.
    """
    nul = data.find(b"\0")
    if nul >= 0 and data.startswith(_UTF16_BOMS):  # Windows' "Unicode" text: a NUL per letter
        raise InputError(
            f"{path}: {what} is UTF-16 text (it starts with a UTF-16 byte-order mark); "
            "save it as UTF-8"
        )
    if nul >= 0:
        raise InputError(f"{path}: {what} is not a text file (NUL byte at offset {nul})")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise InputError(
            f"{path}:{line}: {what} is not a UTF-8 text file (invalid byte "
            f"0x{data[error.start]:02x} at offset {error.start})"
        ) from None


class _RepeatedKey(dict):
    """A JSON object in which ``key`` appears more than once (``json`` keeps the last value)."""

    key: str = ""


def _object_pairs(pairs: list) -> dict:
    """``object_pairs_hook`` that marks an object with a repeated key instead of dropping it."""
    out = dict(pairs)
    if len(out) == len(pairs):
        return out
    repeated, seen = _RepeatedKey(out), set()
    for key, _ in pairs:
        if key in seen:
            repeated.key = key
            break
        seen.add(key)
    return repeated


def _first_repeated(value, where: str = ""):
    """``(location, object)`` of the first object of a document with a repeated key, or
    None."""
    if isinstance(value, _RepeatedKey):
        return where, value
    if not isinstance(value, (dict, list)):
        return None
    for key, item in value.items() if isinstance(value, dict) else enumerate(value):
        found = _first_repeated(item, f"{where}[{key!r}]")
        if found:
            return found
    return None


def parse_json(text: str):
    """The JSON document of ``text``: ``json.loads``, except that a key repeated in one
    object raises ``ValueError('key ... appears twice in the object ...')``. ``json`` keeps
    the last of repeated keys, so a video listed twice in a submission would lose its first
    detections without a word, and change the scores. Invalid JSON raises
    ``json.JSONDecodeError``; JSON nested past Python's recursion limit ``ValueError``."""
    try:
        document = json.loads(text, object_pairs_hook=_object_pairs)
        found = _first_repeated(document)
    except RecursionError:  # arrays or objects nested past Python's recursion limit
        raise ValueError("the JSON is nested too deeply to read (arrays or objects)") from None
    if found:
        where, repeated = found
        raise ValueError(
            f"key {repeated.key!r} appears twice in the object {where or 'at the top'}"
        )
    return document


def read_json(path: Path, what: str):
    """A JSON document (:func:`parse_json`), or an :class:`InputError` naming the file (and
    the line).

    A UTF-8 byte-order mark is accepted; a folder, binary or non-UTF-8 content is not.
    """
    if path.is_dir():
        raise InputError(f"{path}: is a folder; the {what} must be a JSON file")
    text = _decode_text(path, _read_bytes(path, what), what)
    if not text.strip():
        raise InputError(f"{path}: empty file; the {what} must be a JSON document")
    try:
        return parse_json(text)
    except json.JSONDecodeError as error:
        # Several values, one per line, are JSON Lines, which the readers tell by the suffix
        hint = "; a JSON Lines file needs the .jsonl suffix" if error.msg == "Extra data" else ""
        raise InputError(
            f"{path}:{error.lineno}: {what} is not valid JSON ({error.msg}, column "
            f"{error.colno}{hint})"
        ) from None
    except ValueError as error:
        raise InputError(f"{path}: {error}") from None


def is_finite_number(value) -> bool:
    """Whether a value read from JSON is a finite number: not a bool (JSON's ``true``), and
    not an integer too large for a float (Python's JSON reads any number of digits).

    >>> [is_finite_number(x) for x in (1, 2.5, True, float("inf"), 10**400)]
    [True, True, False, False, False]
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _check_npy_magic(path: Path, what: str) -> None:
    """Raises :class:`InputError` unless ``path`` begins as a ``.npy`` file (or an ``.npz``
    archive, which :func:`read_npy` names): numpy's own message for other bytes talks of
    pickled data and ``allow_pickle``."""
    try:
        with path.open("rb") as file:
            head = file.read(8)
    except OSError as error:
        raise InputError(f"{path}: cannot read {what}: {error.strerror or error}") from None
    if head.startswith((_NPY_MAGIC, b"PK\x03\x04")):
        return
    if not head:
        raise InputError(f"{path}: empty {what} (not a .npy file)")
    raise InputError(
        f"{path}: {what} is not a .npy file (it starts with {head!r}, not the .npy magic "
        f"{_NPY_MAGIC!r})"
    )


def read_npy(path: Path, what: str) -> np.ndarray:
    """The array of a ``.npy`` file (no pickles are loaded), or an :class:`InputError`."""
    require_file(path, what)
    _check_npy_magic(path, what)
    try:
        array = np.load(path, allow_pickle=False)
    except Exception as error:  # numpy's readers raise EOFError, BadZipFile, ... on bad bytes
        reason = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        raise InputError(f"{path}: not a readable .npy array ({reason})") from None
    if not isinstance(array, np.ndarray):  # an .npz archive under an .npy name
        array.close()
        raise InputError(f"{path}: not a .npy array but an .npz archive of several arrays")
    return array


def read_mapping(path: str | os.PathLike) -> tuple[str, ...]:
    """Reads a ``mapping.txt`` (one ``index name`` pair per line) into the class names.

    Indices must be the integers ``0..C-1``, each once, in any order; names must be unique.

    Args:
      path: the mapping file.

    Returns:
      The class names, ``names[i]`` being the name of class index ``i``.

    Raises:
      InputError: naming the file and line of the first problem.

    >>> from jaxseg._host.demo import DEMO_DIRECTORY
    >>> read_mapping(DEMO_DIRECTORY / "mapping.txt")[:4]
    ('take', 'open', 'pour', 'close')
    """
    path = Path(path)
    text = _decode_text(path, _read_bytes(path, "mapping file"), "mapping file")
    by_index: dict[int, str] = {}
    first_line: dict[str, int] = {}
    for number, line in enumerate(text_lines(text), start=1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 2 or not (fields[0].isascii() and fields[0].isdigit()):
            raise InputError(f"{path}:{number}: expected 'index name', got {line.strip()!r}")
        index, name = int(fields[0]), fields[1]
        if index in by_index:
            raise InputError(f"{path}:{number}: index {index} appears twice")
        if name in first_line:
            raise InputError(
                f"{path}:{number}: name {name!r} appears twice (first on line {first_line[name]})"
            )
        by_index[index] = name
        first_line[name] = number
    _check_indices(path, by_index, first_line)
    return tuple(by_index[i] for i in range(len(by_index)))


def _check_indices(path: Path, by_index: dict[int, str], first_line: dict[str, int]) -> None:
    """Raises :class:`InputError` unless the mapping's indices are ``0..C-1``, C within
    ``LABEL_LIMIT`` (naming the line of the first index out of range)."""
    count = len(by_index)
    if not count:
        raise InputError(f"{path}: mapping file is empty")
    if count > LABEL_LIMIT:
        raise InputError(
            f"{path}: {count:,} classes; at most {LABEL_LIMIT:,} are supported (per-class "
            "count tables; relabel the classes used to 0..C-1)"
        )
    outside = [index for index in by_index if index >= count]
    if outside:
        line, index = min((first_line[by_index[i]], i) for i in outside)
        missing = min(set(range(count)) - set(by_index))
        raise InputError(
            f"{path}:{line}: index {index} is out of range: {count} classes take indices "
            f"0..{count - 1} ({missing} is missing)"
        )


def _locate_token(text: str, position: int) -> tuple[int, int]:
    """Returns the (line, frame) of the ``position``-th label of a label file (both 1-based)."""
    seen = 0
    for number, line in enumerate(text_lines(text), start=1):
        fields = line.encode().split()  # the labels' own split: at ASCII whitespace
        if seen + len(fields) > position:
            return number, position + 1
        seen += len(fields)
    raise AssertionError("position beyond the last label")


def read_label_text(path: str | os.PathLike, class_index: Mapping[str, int]) -> np.ndarray:
    """Reads a text file of per-frame label names into class indices.

    Two formats are recognised: one label per line (ground truth, most predictions), and the
    MS-TCN results format, a header line beginning with ``#`` followed by labels separated by
    spaces (a first line of class names only, such as a class ``#bg``, is labels, not a
    header). Labels may be separated by any whitespace in both.

    Args:
      path: the label file.
      class_index: maps each label name to its class index (see :func:`read_mapping`).

    Returns:
      int32 array ``[T]`` of class indices, ``T >= 1``.

    Raises:
      InputError: missing, empty or binary file, or a label name not in ``class_index``
        (naming the line and frame).

    >>> from jaxseg._host.demo import DEMO_DIRECTORY
    >>> names = read_mapping(DEMO_DIRECTORY / "mapping.txt")
    >>> index = {name: i for i, name in enumerate(names)}
    >>> labels = read_label_text(DEMO_DIRECTORY / "predictions" / "S1_Tea_C1", index)
    >>> labels.dtype, [names[i] for i in labels[20:23]]
    (dtype('int32'), ['background', 'take', 'take'])
    """
    path = Path(path)
    data = _read_bytes(path, "label file")
    if b"\0" in data:
        _decode_text(path, data, "label file")
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    body = data.lstrip()
    first_line = len(text_lines(data[: len(data) - len(body)].decode("ascii")))
    lookup = {name.encode(): index for name, index in class_index.items()}
    body, header_lines = _without_header(body, lookup)
    first_line += header_lines
    tokens = body.split()
    if not tokens:
        raise InputError(f"{path}: empty file (no labels)")
    _refuse_blank_lines(path, body.rstrip(), first_line)
    try:
        return np.fromiter(map(lookup.__getitem__, tokens), dtype=np.int32, count=len(tokens))
    except KeyError as error:
        _decode_text(path, data, "label file")  # a byte that is not UTF-8, by its line
        text = _decode_text(path, body, "label file")
        unknown = error.args[0]
        line, frame = _locate_token(text, tokens.index(unknown))
        raise InputError(
            f"{path}:{first_line + line - 1}: unknown label {unknown.decode()!r} (frame {frame}); "
            f"known labels: {_listing(list(class_index), limit=8)}"
            f"{normalization_hint(unknown.decode(), class_index)}"
        ) from None


def _refuse_blank_lines(path: Path, body: bytes, first_line: int) -> None:
    """Refuses a blank line between the labels of ``body`` (the file from its line
    ``first_line``): a frame without its label. Split at whitespace, the frames after it
    would move up one (or the lengths of two files differ, with no line named), where
    MS-TCN's ``eval.py`` reads a frame labelled ``''``."""
    blank = _BLANK_LINE.search(body)
    if blank is None:
        return
    before = body[: blank.start()]
    line = first_line + len(_BYTE_LINE_BREAK.findall(before)) + 1
    raise InputError(
        f"{path}:{line}: blank line after frame {len(before.split())}, a frame without a "
        "label; remove the line or write the frame's label"
    )


def _without_header(body: bytes, lookup: Mapping[bytes, int]) -> tuple[bytes, int]:
    """``body`` without the header line of an MS-TCN results file (``### Frame level
    recognition: ###``), and the number of lines removed (0 or 1).

    The header is a first line that begins with ``#`` and is not made of class names only:
    the label of a class named ``#bg`` on the first line is a frame, not a header.
    """
    if not body.startswith(b"#"):
        return body, 0
    # The header ends at its line break, whichever the file uses (\n, \r\n or \r).
    ends = [i for i in (body.find(b"\n"), body.find(b"\r")) if i >= 0]
    end = min(ends) + 1 if ends else len(body)
    if all(token in lookup for token in body[:end].split()):
        return body, 0
    return (body[end + 1 :] if body[end - 1 : end + 1] == b"\r\n" else body[end:]), 1


def normalization_hint(name: str, known: Iterable[str]) -> str:
    """A note when ``name`` is a known name in another Unicode normalization (an accented
    letter as one code point or as a letter and a combining accent: the two print alike)."""
    composed = unicodedata.normalize("NFC", name)
    for other in known:
        if unicodedata.normalize("NFC", other) == composed:
            return (
                f" ({name!r} is the known {other!r} in another Unicode normalization: "
                f"{name!a} vs {other!a})"
            )
    return ""


def read_label_array(
    path: str | os.PathLike, num_classes: int | None = None, mapping: Path | None = None
) -> np.ndarray:
    """Reads a ``.npy`` file of per-frame class indices ``[T]`` or scores ``[T, C]`` (argmax).

    Args:
      path: the ``.npy`` file (no pickles are loaded).
      num_classes: the number of classes, which scores ``[T, C]`` must have as C (else the
        argmax of too many columns may pass for a class, or be reported as a label out of
        range); None: not checked.
      mapping: the file of the ``num_classes`` classes, named in that error.

    Returns:
      int32 array ``[T]`` of class indices (not yet checked against a number of classes).

    Raises:
      InputError: unreadable file, wrong rank or dtype, empty array, a label outside
        ``[0, LABEL_LIMIT)``, NaN scores, a frame whose scores are all -inf.

    >>> import pathlib, tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = pathlib.Path(folder) / "scores.npy"
    ...     np.save(path, np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]], np.float32))
    ...     print(read_label_array(path, num_classes=2).tolist())
    [1, 0, 1]
    """
    path = Path(path)
    array = read_npy(path, "label file")
    if array.ndim == 2 and np.issubdtype(array.dtype, np.floating):
        if array.shape[1] == 0 or np.isnan(array).any():
            raise InputError(f"{path}: score array [T, C] must have C >= 1 and no NaN")
        lowest = np.all(array == -np.inf, axis=1)  # the argmax would predict class 0
        if lowest.any():
            raise InputError(
                f"{path}: scores of frame {int(np.argmax(lowest)) + 1} are -inf in every "
                "class: no class is predicted"
            )
        if num_classes is not None and array.shape[1] != num_classes:
            raise InputError(
                f"{path}: scores [T, C] of shape {array.shape} have {array.shape[1]} class "
                f"columns, but {mapping or 'the mapping'} has {num_classes} classes"
            )
        array = np.argmax(array, axis=1)
    # bool is no label type, as for the Evaluator and the metrics: more likely a mask file.
    if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer):
        raise InputError(
            f"{path}: expected integer labels [T] or float scores [T, C], "
            f"got dtype {array.dtype} shape {array.shape}"
        )
    if array.size == 0:
        raise InputError(f"{path}: empty array (no frames)")
    # Checked before the cast to int32, which would wrap a large label onto a class.
    outside = (array < 0) | (array >= LABEL_LIMIT)
    if outside.any():
        frame = int(np.argmax(outside))
        raise InputError(
            f"{path}: label {array[frame]} at frame {frame + 1} is not a class index "
            f"(0..{LABEL_LIMIT - 1})"
        )
    return array.astype(np.int32)


def read_labels(
    path: str | os.PathLike, class_index: Mapping[str, int] | None, mapping: Path | None = None
) -> np.ndarray:
    """Reads one video's labels: a ``.npy`` array (labels ``[T]``, or scores ``[T, C]`` with
    a column per class of ``class_index``), or a text file of class names.

    Args:
      path: the label file (``.npy``, or text as :func:`read_label_text` reads).
      class_index: class name -> index (from :func:`read_mapping`); needed by text files,
        None for ``.npy`` files without a mapping.
      mapping: the mapping file, named in errors.

    Returns:
      int32 ``[T]`` class indices.

    Raises:
      InputError: an unreadable or malformed file, naming it (and the line of a bad label).

    >>> from jaxseg._host.demo import DEMO_DIRECTORY
    >>> names = read_mapping(DEMO_DIRECTORY / "mapping.txt")
    >>> index = {name: i for i, name in enumerate(names)}
    >>> labels = read_labels(DEMO_DIRECTORY / "groundTruth" / "S1_Tea_C1.txt", index)
    >>> labels.shape, labels.dtype
    ((480,), dtype('int32'))
    """
    path = Path(path)
    if path.suffix == ".npy":
        return read_label_array(path, None if class_index is None else len(class_index), mapping)
    if class_index is None:
        raise InputError(f"{path}: text label files need a mapping file (--mapping)")
    return read_label_text(path, class_index)


def video_name(path: Path) -> str:
    """The video a label file belongs to: its name without a ``.txt``/``.npy`` suffix."""
    return path.stem if path.suffix in _LABEL_SUFFIXES else path.name


def _label_files(folder: Path, what: str) -> dict[str, Path]:
    if folder.is_file():
        raise InputError(f"{folder}: is a file; the {what} argument must be a folder of files")
    if not folder.is_dir():
        raise InputError(f"{folder}: {what} folder not found")
    files: dict[str, Path] = {}
    try:
        entries = sorted(folder.iterdir())
    except OSError as error:
        reason = error.strerror or error
        raise InputError(f"{folder}: cannot read {what} folder: {reason}") from None
    for path in entries:
        if path.name.startswith(".") or not path.is_file():
            continue
        name = video_name(path)
        if name in files:
            raise InputError(f"{path}: two files for video {name!r} (also {files[name].name})")
        files[name] = path
    if not files:
        raise InputError(f"{folder}: {what} folder has no files")
    return files


def read_split(path: str | os.PathLike) -> tuple[str, ...]:
    """Reads a split/bundle file listing one video per line (``.txt`` suffixes allowed).

    Args:
      path: the split file; blank lines are skipped.

    Returns:
      The video names in file order, without suffixes.

    Raises:
      InputError: an unreadable file, a video listed twice (naming both lines), no video.

    >>> import pathlib, tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     split = pathlib.Path(folder) / "test.split1.bundle"
    ...     _ = split.write_text("S1_Tea_C1.txt\\n\\nS1_Coffee_C1\\n")
    ...     print(read_split(split))
    ('S1_Tea_C1', 'S1_Coffee_C1')
    """
    path = Path(path)
    text = _decode_text(path, _read_bytes(path, "split file"), "split file")
    names: dict[str, int] = {}
    for number, line in enumerate(text_lines(text), start=1):
        if not line.strip():
            continue
        name = video_name(Path(line.strip()))
        if name in names:
            raise InputError(
                f"{path}:{number}: video {name!r} is listed twice (first on line {names[name]})"
            )
        names[name] = number
    if not names:
        raise InputError(f"{path}: split file lists no videos")
    return tuple(names)


def _listing(names: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f", ... ({len(names)} in all)" if len(names) > limit else "")


def pair_files(
    ground_truth: Path, predictions: Path, split: Sequence[str] | None
) -> list[tuple[str, Path, Path]]:
    """Pairs ground-truth and prediction files by video name.

    With a split, exactly the listed videos are evaluated (each needs both files; other files
    are ignored, as in MS-TCN). Without one, both folders must hold the same videos, except
    that a file without a counterpart whose suffix is not a label file's (``README.md``,
    ``results.json``, ``log.csv``; label files have no suffix, ``.txt`` or ``.npy``) is not a
    video and is ignored.

    Returns:
      ``(name, ground_truth_file, prediction_file)`` per video, in split or sorted order.
    """
    truth = _label_files(ground_truth, "ground-truth")
    predicted = _label_files(predictions, "predictions")
    if split is not None:
        no_truth = [name for name in split if name not in truth]
        no_prediction = [name for name in split if name not in predicted]
        if no_truth:
            raise InputError(
                f"{ground_truth}: no ground truth for {len(no_truth)} video(s) of the split: "
                f"{_listing(no_truth)}{_unread_namesakes(ground_truth, no_truth)}"
            )
        if no_prediction:
            raise InputError(
                f"{predictions}: no prediction for {len(no_prediction)} video(s) of the split: "
                f"{_listing(no_prediction)}{_unread_namesakes(predictions, no_prediction)}"
            )
        names = list(split)
    else:
        truth, predicted = _without_other_files(truth, predicted)
        no_truth = sorted(set(predicted) - set(truth))
        no_prediction = sorted(set(truth) - set(predicted))
        if no_truth:
            raise InputError(
                f"{predictions}: {len(no_truth)} prediction(s) without ground truth in "
                f"{ground_truth}: {_listing(no_truth)}{_unread_namesakes(ground_truth, no_truth)}"
            )
        if no_prediction:
            raise InputError(
                f"{ground_truth}: {len(no_prediction)} ground-truth file(s) without prediction "
                f"in {predictions}: {_listing(no_prediction)} (use --split to evaluate a subset)"
                f"{_unread_namesakes(predictions, no_prediction)}"
            )
        names = sorted(truth)
    return [(name, truth[name], predicted[name]) for name in names]


def other_files(ground_truth: Path, predictions: Path) -> list[Path]:
    """The files :func:`pair_files` leaves out without a split: those without a counterpart
    in the other folder whose suffix is not a label file's (sorted); a ``mapping.txt`` is not
    one of them (:func:`find_mapping` reads the one in the ground-truth folder)."""
    truth = _label_files(ground_truth, "ground-truth")
    predicted = _label_files(predictions, "predictions")
    kept = _without_other_files(truth, predicted)
    return sorted(
        path
        for files, left in zip((truth, predicted), kept)
        for name, path in files.items()
        if name not in left and path.name != _MAPPING_FILE
    )


def _unread_namesakes(folder: Path, names: Sequence[str]) -> str:
    """A note naming the entries of ``folder`` named as the videos ``names`` that were not
    read as their label files (``a.TXT``, a folder ``a``), or the video of ``folder`` whose
    name is the first of ``names`` in another Unicode normalization (``café`` written by
    macOS, as ``e`` and a combining accent: the two print alike), or nothing."""
    wanted = set(names)
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return ""
    unread = [p.name + _kind(p) for p in entries if p.name in wanted or p.stem in wanted]
    if not unread:
        videos = (video_name(p) for p in entries if not p.name.startswith("."))
        return normalization_hint(names[0], videos)
    return (
        f"; {folder} holds {_listing(unread)}, not read: a label file is a file named as its "
        "video, with no suffix, .txt or .npy"
    )


def _kind(path: Path) -> str:
    """`` (a folder)`` or `` (a broken symbolic link)`` for such an entry, else nothing: a
    link whose target is gone is named as its video, and was said not to be."""
    if path.is_dir():
        return " (a folder)"
    if path.is_symlink() and not path.exists():
        return " (a broken symbolic link)"
    return ""


def _without_other_files(
    truth: dict[str, Path], predicted: dict[str, Path]
) -> tuple[dict[str, Path], dict[str, Path]]:
    """``truth`` and ``predicted`` without the files that have no counterpart and are no
    label files (``README.md``, ``results.json``), and without any ``mapping.txt`` (which
    :func:`find_mapping` also looks for inside the ground-truth folder, and which a folder
    evaluated against itself holds twice): not videos."""

    def videos(files, other):
        return {
            n: f
            for n, f in files.items()
            if f.name != _MAPPING_FILE and (n in other or is_label_file_name(f))
        }

    return videos(truth, predicted), videos(predicted, truth)


def is_label_file_name(path: Path) -> bool:
    """Whether a file's name could be a label file's: no suffix, ``.txt`` or ``.npy``."""
    return path.suffix in ("", *_LABEL_SUFFIXES)


def find_mapping(ground_truth: Path) -> Path | None:
    """The ``mapping.txt`` beside or above a ground-truth folder (MS-TCN layout), if any.

    The folder above ``.`` or ``..`` is looked up from the absolute path: ``Path(".").parent``
    is ``.`` itself, so ``jaxseg evaluate . ../results`` inside ``groundTruth/`` missed it."""
    above = (ground_truth.resolve() if ground_truth.name in ("", "..") else ground_truth).parent
    for candidate in (ground_truth / _MAPPING_FILE, above / _MAPPING_FILE):
        if candidate.is_file():
            return candidate
    return None


def check_same_length(name, truth_file, target, prediction_file, prediction) -> None:
    """Raises :class:`InputError` naming both files if a video's two label files differ in
    length."""
    if target.shape != prediction.shape:
        raise InputError(
            f"{prediction_file}: video {name!r} has {prediction.size} predicted frames but "
            f"{target.size} ground-truth frames ({truth_file})"
        )


def _check_in_range(path: Path, labels: np.ndarray, mapping, num_classes: int) -> None:
    """Raises unless every label (from a ``.npy`` file) is a class index of the mapping."""
    if labels.max() >= num_classes:
        frame = int(np.argmax(labels >= num_classes))
        raise InputError(
            f"{path}: label {labels[frame]} at frame {frame + 1} is not a class of {mapping} "
            f"(0..{num_classes - 1})"
        )


def read_videos(
    videos: Sequence[tuple[str, Path, Path]],
    class_names: Sequence[str] | None,
    mapping: Path | None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The target and predicted labels of ``(name, ground_truth_file, prediction_file)``
    triples (:func:`pair_files`), each checked against the classes and the other's length."""
    class_index = None if class_names is None else {n: i for i, n in enumerate(class_names)}
    targets, outputs = [], []
    for count, (name, truth_file, prediction_file) in enumerate(videos, start=1):
        target = read_labels(truth_file, class_index, mapping)
        prediction = read_labels(prediction_file, class_index, mapping)
        if class_names is not None:
            _check_in_range(truth_file, target, mapping, len(class_names))
            _check_in_range(prediction_file, prediction, mapping, len(class_names))
        check_same_length(name, truth_file, target, prediction_file, prediction)
        targets.append(target)
        outputs.append(prediction)
        if progress is not None:
            progress(count, len(videos))
    return targets, outputs


def _dataset(videos, targets, outputs, class_names) -> SegmentationDataset:
    if class_names is None:
        num_classes = 1 + max(int(labels.max()) for labels in (*targets, *outputs))
        class_names = tuple(str(i) for i in range(num_classes))
    return SegmentationDataset(
        names=tuple(name for name, _, _ in videos),
        targets=tuple(targets),
        predictions=tuple(outputs),
        class_names=tuple(class_names),
    )


def _reader_setup(parent: int) -> None:
    """In a forked reader: leave Ctrl-C to the parent, and end with the parent (Linux
    ``PR_SET_PDEATHSIG``), so that no reader outlives an interrupted or crashed command."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent ended before the line above
        os._exit(1)


def start_loading(
    ground_truth: str | os.PathLike,
    predictions: str | os.PathLike,
    *,
    mapping: str | os.PathLike | None = None,
    split: str | os.PathLike | None = None,
    processes: int = 1,
) -> Callable[..., SegmentationDataset]:
    """Starts :func:`load_segmentation_dataset`; returns ``finish(progress=None)``, which
    waits for the files and returns the dataset.

    The folders, mapping and split are checked at once. With ``processes > 1`` (Linux) the
    label files are then read by that many forked processes, which start now: the caller can
    work meanwhile (the command line imports JAX, which takes about as long as reading a
    Breakfast-sized folder). Fork only from a process without threads: not after JAX has
    been imported.
    """
    ground_truth, predictions = Path(ground_truth), Path(predictions)
    if mapping is None:
        mapping = find_mapping(ground_truth)
    class_names = read_mapping(mapping) if mapping is not None else None
    videos = pair_files(ground_truth, predictions, None if split is None else read_split(split))

    def here(progress=None):
        return _dataset(videos, *read_videos(videos, class_names, mapping, progress), class_names)

    if processes <= 1 or sys.platform != "linux" or len(videos) < 2:
        return here
    step = -(-len(videos) // (8 * processes))  # small parts: the processes finish together
    parts = [videos[start : start + step] for start in range(0, len(videos), step)]
    readers = None
    try:
        readers = ProcessPoolExecutor(
            processes,
            mp_context=multiprocessing.get_context("fork"),
            initializer=_reader_setup,
            initargs=(os.getpid(),),
        )
        pending = [readers.submit(read_videos, part, class_names, mapping) for part in parts]
    except OSError:  # no processes or semaphores here (a sandbox, no /dev/shm): read here
        if readers is not None:
            readers.shutdown(wait=False, cancel_futures=True)
        return here

    def finish(progress=None):
        try:
            done = 0
            for part in as_completed(pending):
                if part.exception() is not None:
                    break  # raised below, after any earlier part's error
                done += len(part.result()[0])
                if progress is not None:
                    progress(done, len(videos))
            results = [part.result() for part in pending]  # the first bad video in order
        finally:
            readers.shutdown(cancel_futures=True)
        targets = [labels for result in results for labels in result[0]]
        outputs = [labels for result in results for labels in result[1]]
        return _dataset(videos, targets, outputs, class_names)

    return finish


def load_segmentation_dataset(
    ground_truth: str | os.PathLike,
    predictions: str | os.PathLike,
    *,
    mapping: str | os.PathLike | None = None,
    split: str | os.PathLike | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> SegmentationDataset:
    """Reads the ground truth and predictions of an action-segmentation dataset.

    Layout (MS-TCN): ``ground_truth`` holds one file per video (``<video>.txt``, one label name
    per frame, or ``<video>.npy``); ``predictions`` holds one file per video (``<video>``,
    ``<video>.txt`` or ``<video>.npy``; text either one label per line or the MS-TCN results
    format). ``mapping.txt`` is looked up beside and above ``ground_truth`` unless given.

    Args:
      ground_truth: folder of ground-truth files.
      predictions: folder of prediction files.
      mapping: ``index name`` file; default: found next to ``ground_truth``. Needed for text.
      split: optional split/bundle file naming the videos to evaluate.
      progress: called with (videos read so far, videos in all) after each video.

    Returns:
      A :class:`SegmentationDataset`; every label is checked to be within the classes.

    Raises:
      InputError: for any problem with the files, naming the file (and line).

    >>> from jaxseg._host.demo import DEMO_DIRECTORY
    >>> data = load_segmentation_dataset(
    ...     DEMO_DIRECTORY / "groundTruth", DEMO_DIRECTORY / "predictions")
    >>> len(data.names), data.names[0], data.class_names[-1], data.targets[0].shape
    (28, 'S1_Cheese_C1', 'background', (579,))
    """
    return start_loading(ground_truth, predictions, mapping=mapping, split=split)(progress)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _write_through(path: Path, data: bytes) -> None:
    """Writes ``data`` into what ``path`` names (a link's target, a device, a pipe)."""
    try:
        with open(path, "wb") as stream:
            stream.write(data)
    except OSError as error:
        raise InputError(f"{path}: cannot write: {error.strerror or error}") from None


def write_atomic(path: str | os.PathLike, content: str | bytes) -> None:
    """Writes ``content`` to ``path`` all at once: a temporary file beside it, then a rename.

    The file gets the mode any new file gets (``0o666`` less the umask), not the temporary
    file's ``0o600``. A folder that cannot be written raises :class:`InputError`; nothing is
    left behind. A symbolic link, a device or a pipe (``/dev/stdout``) is written through,
    not replaced.
    """
    path = Path(path)
    data = content.encode() if isinstance(content, str) else content
    if path.is_dir():
        raise InputError(f"{path}: is a folder; give a file name to write")
    if path.is_symlink() or (path.exists() and not path.is_file()):
        _write_through(path, data)  # a rename would replace the link or the device itself
        return
    if not path.parent.is_dir():
        raise InputError(f"{path}: output folder {path.parent} does not exist")
    try:
        handle, temporary = tempfile.mkstemp(
            dir=path.parent, prefix=f".{path.name[:_TEMPORARY_STEM]}.", suffix=".tmp"
        )
    except OSError as error:
        reason = error.strerror or error
        raise InputError(f"{path}: cannot write to {path.parent}: {reason}") from None
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.chmod(temporary, 0o666 & ~_umask())
        os.replace(temporary, path)
    except OSError as error:
        Path(temporary).unlink(missing_ok=True)
        raise InputError(f"{path}: cannot write: {error.strerror or error}") from None
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
