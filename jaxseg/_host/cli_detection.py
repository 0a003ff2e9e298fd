"""``jaxseg detection``: temporal action detection (ActivityNet JSON) and online detection.

Offline: a ground-truth database and a submission in the ActivityNet JSON formats are scored
as :func:`jaxseg.metrics.detection_average_precision` scores one padded table of them
(ActivityNet's algorithm): AP per class and threshold, mAP per threshold and their average.
Videos are matched in groups of similar sizes, each padded to its own (one video with
thousands of detections no longer pads every other video to its size), and the matched
detections of all groups are ranked together.
Online (``--online``): per-frame ``[N, C]`` targets and scores (``.npy``) are scored with
:func:`jaxseg.metrics.mean_average_precision` and
:func:`jaxseg.metrics.calibrated_average_precision`.
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path
from typing import NamedTuple

import numpy as np

from jaxseg._host import report as reports
from jaxseg._host.io_files import (
    InputError,
    is_finite_number,
    normalization_hint,
    read_json,
    read_label_array,
    read_npy,
    require_file,
)
from jaxseg._host.padding import bucket, size_groups
from jaxseg._src.thresholds import ACTIVITYNET_THRESHOLDS

PRESETS = {
    "activitynet": ACTIVITYNET_THRESHOLDS,
    "thumos14": tuple(np.linspace(0.3, 0.7, 5).tolist()),
}


class DetectionData(NamedTuple):
    """Ground truth and detections of each of V videos, unpadded."""

    videos: tuple[str, ...]
    class_names: tuple[str, ...]
    ground_truth: tuple[np.ndarray, ...]  # V x float64 [n, 3]: start, end (seconds), class
    detections: tuple[np.ndarray, ...]  # V x float64 [n, 4]: start, end, class, score
    videos_without_ground_truth: tuple[str, ...]


class VideoGroup(NamedTuple):
    """Videos matched together, padded to the group's sizes (W videos, G / P slots)."""

    videos: np.ndarray  # int64 [n <= W]: indices into DetectionData.videos, increasing
    gt_segments: np.ndarray  # float64 [W, G, 2] seconds
    gt_labels: np.ndarray  # int32 [W, G]
    gt_mask: np.ndarray  # bool [W, G]
    pred_segments: np.ndarray  # float64 [W, P, 2]
    pred_labels: np.ndarray  # int32 [W, P]
    pred_scores: np.ndarray  # float64 [W, P]
    pred_mask: np.ndarray  # bool [W, P]


def add_parser(commands, add_output_arguments) -> None:
    """Adds the ``detection`` subcommand to the ``jaxseg`` parser."""
    parser = commands.add_parser(
        "detection",
        help="temporal action detection: AP per tIoU threshold and average mAP (ActivityNet "
        "JSON), or per-frame mAP / cAP of online detection (--online)",
        description="Offline: mAP at each tIoU threshold and their average, ActivityNet's "
        "algorithm (score order, tIoU >= threshold, fall-through to the next best free ground "
        "truth, all-point interpolation). Detections in videos without ground truth count as "
        "false positives, as in ActivityNet. Online (--online): per-frame AP and calibrated AP "
        "(cAP) per class and their mean (LSTR conventions).",
    )
    parser.add_argument(
        "ground_truth",
        metavar="GROUND_TRUTH",
        help="ActivityNet ground-truth JSON ({'database': {video: {'subset', 'annotations': "
        "[{'segment': [start, end], 'label'}]}}}); with --online, targets .npy [N, C] "
        "multi-hot or [N] class indices",
    )
    parser.add_argument(
        "predictions",
        metavar="PREDICTIONS",
        help="ActivityNet submission JSON ({'results': {video: [{'segment', 'label', "
        "'score'}]}}); with --online, scores .npy [N, C]",
    )
    parser.add_argument(
        "--online", action="store_true", help="per-frame online detection (mAP and cAP)"
    )
    _add_proposal_arguments(parser)
    _add_threshold_arguments(parser)
    parser.add_argument(
        "--per-class", action="store_true", help="also AP (or AP and cAP) per class"
    )
    _add_online_arguments(parser)
    add_output_arguments(parser)


def _add_proposal_arguments(parser: argparse.ArgumentParser) -> None:
    """``--proposals`` and the average numbers of proposals of its curve."""
    parser.add_argument(
        "--proposals",
        action="store_true",
        help="temporal action proposals (PREDICTIONS: ActivityNet proposal JSON, "
        "{'results': {video: [{'segment', 'score'}]}}): average recall AR@AN and AUC, "
        "ActivityNet's eval_proposal.py",
    )
    parser.add_argument(
        "--max-proposals",
        type=int,
        default=None,
        metavar="M",
        help="proposals: average number of proposals per video of the curve's end (default "
        "100, ActivityNet; 1000 for THUMOS-14's AR@50..1000)",
    )
    parser.add_argument(
        "--at",
        nargs="+",
        type=int,
        metavar="AN",
        help="proposals: AR at these average numbers of proposals, multiples of M/100 up to M "
        "(the curve's points); default 1 5 10 100 for M = 100, otherwise those of 1 5 10 50 "
        "100 200 500 1000 on the curve, and M itself",
    )


def _add_threshold_arguments(parser: argparse.ArgumentParser) -> None:
    """The ground-truth subset and the tIoU thresholds of offline detection."""
    parser.add_argument(
        "--subset",
        default=None,
        help="ground-truth subset to evaluate (default: validation; 'all' for every video)",
    )
    parser.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        default=None,
        help="tIoU thresholds: activitynet = 0.5:0.05:0.95 (default), thumos14 = 0.3:0.1:0.7",
    )
    parser.add_argument(
        "--thresholds",
        nargs="+",
        type=float,
        metavar="TIOU",
        help="explicit tIoU thresholds in (0, 1] (instead of --preset)",
    )


def _add_online_arguments(parser: argparse.ArgumentParser) -> None:
    """The class columns online detection leaves out."""
    parser.add_argument(
        "--background",
        nargs="*",
        type=int,
        default=None,
        metavar="INDEX",
        help="online: class columns not scored (default: 0)",
    )
    parser.add_argument(
        "--ambiguous",
        nargs="*",
        type=int,
        default=None,
        metavar="INDEX",
        help="online: columns whose positive frames are removed from every class (THUMOS: 21)",
    )


# ------------------------------------------------------------------------------------------
# Reading ActivityNet JSON
# ------------------------------------------------------------------------------------------
def _member(path: Path, document, key: str, what: str) -> dict:
    if not isinstance(document, dict) or not isinstance(document.get(key), dict):
        raise InputError(f"{path}: {what} needs a '{key}' object mapping video ids to entries")
    return document[key]


def _segment(path: Path, where: str, entry) -> tuple[float, float]:
    if not isinstance(entry, dict):
        raise InputError(f"{path}: {where}: expected an object with 'segment', got {entry!r}")
    segment = entry.get("segment")
    if (
        not isinstance(segment, (list, tuple))
        or len(segment) != 2
        or not all(is_finite_number(x) for x in segment)
        or segment[1] < segment[0]
    ):
        raise InputError(
            f"{path}: {where}: 'segment' must be [start, end], finite numbers with start <= end, "
            f"got {segment!r}"
        )
    return float(segment[0]), float(segment[1])


def _label(path: Path, where: str, entry) -> str:
    label = entry.get("label")
    if not isinstance(label, (str, int)) or isinstance(label, bool):
        raise InputError(f"{path}: {where}: 'label' must be a string, got {label!r}")
    return str(label)


def _without_subset(database: dict) -> str:
    """A note on the videos whose 'subset' is missing or not a string, which no --subset but
    'all' selects (``--subset None`` does not select a missing one), or nothing."""
    videos = [v for v, entry in database.items() if not isinstance(entry.get("subset"), str)]
    if not videos:
        return ""
    return (
        f"; {len(videos)} video(s) have no string 'subset' (e.g. {videos[0]!r}: "
        f"{database[videos[0]].get('subset')!r}), which only --subset all selects"
    )


def read_activitynet(ground_truth: Path, submission: Path, subset: str) -> DetectionData:
    """Reads an ActivityNet ground-truth database and a submission, video by video.

    Classes are the labels of the ground truth of ``subset`` (sorted), compared as strings
    (ActivityNet compares them as given: its KeyError for ``1`` against ``"1"``); a submission
    label outside them is an error (ActivityNet raises KeyError). Videos of the submission
    that are not in the subset keep their detections, which can only be false positives.
    """
    database = _member(
        ground_truth,
        read_json(ground_truth, "ground-truth file"),
        "database",
        "ground-truth file",
    )
    results = _member(
        submission, read_json(submission, "submission file"), "results", "submission file"
    )
    truth: dict[str, list[tuple[float, float, str]]] = {}
    subsets = set()
    for video, entry in database.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("annotations", []), list):
            raise InputError(
                f"{ground_truth}: video {video!r}: expected an object with 'annotations': [...]"
            )
        if isinstance(entry.get("subset"), str):
            subsets.add(entry["subset"])
        if subset != "all" and entry.get("subset") != subset:
            continue
        truth[video] = [
            (
                *_segment(ground_truth, f"video {video!r}, annotation {n}", a),
                _label(ground_truth, f"video {video!r}, annotation {n}", a),
            )
            for n, a in enumerate(entry.get("annotations", []), start=1)
        ]
    if not truth:
        raise InputError(
            f"{ground_truth}: no video in subset {subset!r}; subsets: "
            f"{', '.join(sorted(subsets)) or 'none'} (use --subset)"
            f"{_without_subset(database)}"
        )
    class_names = tuple(sorted({label for rows in truth.values() for *_, label in rows}))
    if not class_names:
        raise InputError(f"{ground_truth}: subset {subset!r} has no annotation")
    index = {name: i for i, name in enumerate(class_names)}
    detections: dict[str, list[tuple[float, float, int, float]]] = {}
    for video, entries in results.items():
        if not isinstance(entries, list):
            raise InputError(f"{submission}: video {video!r}: expected a list of detections")
        rows = []
        for number, entry in enumerate(entries, start=1):
            where = f"video {video!r}, detection {number}"
            start, end = _segment(submission, where, entry)
            label = _label(submission, where, entry)
            if label not in index:
                raise InputError(
                    f"{submission}: {where}: label {label!r} is not a class of the ground truth "
                    f"(subset {subset!r}: {len(class_names)} classes)"
                    f"{normalization_hint(label, class_names)}"
                )
            score = entry.get("score")
            if not is_finite_number(score):
                raise InputError(f"{submission}: {where}: 'score' must be a number, got {score!r}")
            rows.append((start, end, index[label], float(score)))
        detections[video] = rows
    # Videos only in the submission and without detections change no AP, and are left out
    # so that the report's count of videos is the subset's.
    videos = tuple(truth) + tuple(v for v in detections if v not in truth and detections[v])
    return DetectionData(
        videos,
        class_names,
        tuple(_rows(_indexed(truth.get(v, []), index), 3) for v in videos),
        tuple(_rows(detections.get(v, []), 4) for v in videos),
        tuple(v for v in detections if v not in truth and detections[v]),
    )


def _indexed(rows, index):
    return [(start, end, index[label]) for start, end, label in rows]


def _rows(rows, columns: int) -> np.ndarray:
    """A video's rows (tuples of ``columns`` numbers) as float64 ``[n, columns]``."""
    return np.array(rows, np.float64).reshape(len(rows), columns)


def _pad(per_video, videos: int, width: int):
    """``per_video`` float64 ``[n, 3 or 4]`` rows (start, end, label[, score]) -> segments,
    labels, scores and mask tables of ``videos`` rows and ``width`` slots; padding rows and
    slots are masked out (a video without ground truth or detections changes no AP)."""
    segments = np.zeros((videos, width, 2), np.float64)
    labels = np.zeros((videos, width), np.int32)
    scores = np.zeros((videos, width), np.float64)
    mask = np.zeros((videos, width), bool)
    for v, rows in enumerate(per_video):
        n = len(rows)
        segments[v, :n] = rows[:, :2]
        labels[v, :n] = rows[:, 2]
        if rows.shape[1] > 3:
            scores[v, :n] = rows[:, 3]
        mask[v, :n] = True
    return segments, labels, scores, mask


def video_groups(data: DetectionData) -> list[VideoGroup]:
    """The videos with detections, grouped by their numbers of detections and of ground-truth
    instances, each rounded up to a power of two, as is the number of videos of a group.

    A video's slots are thus fewer than twice its detections (or instances), plus one, and a
    group's rows fewer than twice its videos: the tables stay within four times the data,
    where one table padded to the largest video grew with (videos x largest video).
    Videos without detections match nothing; their ground truth counts in the AP's recall.
    """
    sizes = [
        (len(rows), len(truth)) if len(rows) else None
        for truth, rows in zip(data.ground_truth, data.detections, strict=True)
    ]
    groups = []
    for (width, gt_width), videos in size_groups(sizes):
        count = bucket(len(videos))
        gt = _pad([data.ground_truth[v] for v in videos], count, gt_width)
        pred = _pad([data.detections[v] for v in videos], count, width)
        groups.append(VideoGroup(np.array(videos, np.int64), gt[0], gt[1], gt[3], *pred))
    return groups


def _instances(data: DetectionData) -> np.ndarray:
    """Ground-truth instances per class, ``int64[C]``."""
    truth = np.concatenate([rows[:, 2] for rows in data.ground_truth]).astype(np.int64)
    return np.bincount(truth, minlength=len(data.class_names))


@functools.cache
def _programs():
    """The jitted matching of one group of videos and AP of all the matched detections."""
    import jax

    from jaxseg._src.detection import match_detections, matched_class_scores

    match = jax.jit(match_detections, static_argnames=("num_classes", "thresholds", "matching"))
    score = jax.jit(matched_class_scores, static_argnames=("num_classes", "interpolation"))
    return match, score


def detection_scores(data: DetectionData, thresholds: tuple[float, ...]):
    """AP per class and threshold and mAP of ``data``, as
    :func:`jaxseg.metrics.detection_average_precision` gives them for one padded table of
    all videos (float64 times and scores), bit for bit: the groups of :func:`video_groups`
    are matched one by one and their matched detections ranked together, in the order one
    table holds them (video, then decreasing score), which breaks ties of scores alike.

    Returns:
      :class:`~jaxseg._src.ranking.ClassScores`: ``per_class`` ``[C, K]``, ``mean`` ``[K]``.
    """
    import jax

    from jaxseg._src import checks
    from jaxseg._src.detection import Matches

    match, score = _programs()
    num_classes = len(data.class_names)
    thresholds = checks.static_unit_floats("thresholds", thresholds)
    counts = np.array([len(rows) for rows in data.detections], np.int64)
    offsets = np.cumsum(counts) - counts  # each video's first detection in one table's order
    size = bucket(int(counts.sum()))  # padded with no detection (class C), ranked last
    labels = np.full(size, num_classes, np.int32)
    scores = np.zeros(size, np.float64)
    hits = np.zeros((size, len(thresholds)), bool)
    # In float64, as ActivityNet: float32 times of a few thousand seconds move a tIoU by up to
    # about 1e-4, and scores that differ only in float64 would tie.
    with jax.enable_x64(True):
        for group in video_groups(data):
            found = match(
                *group[1:], num_classes=num_classes, thresholds=thresholds, matching="activitynet"
            )
            # Each row holds its video's detections first, in decreasing score order.
            width = group.pred_mask.shape[1]
            slot = np.arange(width)
            valid = slot < counts[group.videos][:, None]
            where = (offsets[group.videos][:, None] + slot)[valid]
            for table, value in zip((labels, scores, hits), found[:3], strict=True):
                value = np.asarray(value)
                table[where] = value.reshape(-1, width, *value.shape[1:])[: valid.shape[0]][valid]
        matches = Matches(labels, scores, hits, _instances(data).astype(np.int32))
        return score(matches, num_classes=num_classes, interpolation="all_point")


# ------------------------------------------------------------------------------------------
# Reports
# ------------------------------------------------------------------------------------------
def _thresholds(args) -> tuple[float, ...]:
    if args.thresholds is None:
        return PRESETS[args.preset]
    bad = [t for t in args.thresholds if not 0.0 < t <= 1.0]
    if bad:
        raise InputError(f"--thresholds must be in (0, 1], got {bad[0]}")
    return tuple(dict.fromkeys(args.thresholds))


def _threshold_columns(thresholds) -> list[str]:
    """Column names of the tIoU thresholds: two decimals, more where two would collide."""
    for digits in range(2, 18):
        names = [f"{t:.{digits}f}" for t in thresholds]
        if len(set(names)) == len(names):
            return names
    return [repr(t) for t in thresholds]


def _percent(values) -> list[float]:
    return [100.0 * float(v) for v in np.asarray(values).reshape(-1)]


def _offline(args) -> reports.Report:
    data = read_activitynet(Path(args.ground_truth), Path(args.predictions), args.subset)
    thresholds = _thresholds(args)
    scores = detection_scores(data, thresholds)
    per_class, mean = np.asarray(scores.per_class, np.float64), np.asarray(scores.mean, np.float64)
    columns = ("name", *_threshold_columns(thresholds), "Avg")
    sections = [
        reports.Section(
            "map",
            "mAP (%) at tIoU",
            columns,
            (("mAP", *_percent(mean), 100.0 * float(np.mean(mean))),),
        )
    ]
    instances = _instances(data)
    if args.per_class:
        rows = tuple(
            (name, int(instances[c]), *_percent(per_class[c]), 100.0 * float(per_class[c].mean()))
            for c, name in enumerate(data.class_names)
        )
        sections.append(
            reports.Section(
                "ap_per_class", "AP (%) per class", ("class", "instances", *columns[1:]), rows
            )
        )
    detections = sum(len(rows) for rows in data.detections)
    summary = {
        "videos": len(data.videos) - len(data.videos_without_ground_truth),
        "ground_truth_instances": int(instances.sum()),
        "detections": detections,
        "classes": list(data.class_names),
        "subset": args.subset,
        "tiou_thresholds": list(thresholds),
        "videos_without_ground_truth": list(data.videos_without_ground_truth),
        "average_mAP": 100.0 * float(np.mean(mean)),
    }
    text = (
        f"{summary['videos']:,} videos ({args.subset}), {int(instances.sum()):,} ground-truth "
        f"instances, {detections:,} detections, {len(data.class_names)} classes"
    )
    if data.videos_without_ground_truth and not args.quiet:
        print(
            f"jaxseg: note: {len(data.videos_without_ground_truth)} video(s) of the "
            f"submission are not in the ground truth of subset {args.subset!r}; their "
            "detections count as false positives",
            file=sys.stderr,
        )
    return reports.Report(text, summary, tuple(sections))


def _online_arrays(args) -> tuple[np.ndarray, np.ndarray]:
    scores_path, targets_path = Path(args.predictions), Path(args.ground_truth)
    require_file(targets_path, "targets file")  # before the scores are read
    scores = read_npy(scores_path, "scores file")
    if scores.ndim != 2 or not np.issubdtype(scores.dtype, np.floating) or 0 in scores.shape:
        raise InputError(
            f"{scores_path}: expected float scores [N, C] with N, C >= 1, got dtype "
            f"{scores.dtype} shape {scores.shape}"
        )
    if np.isnan(scores).any():
        frame, column = np.argwhere(np.isnan(scores))[0]
        raise InputError(f"{scores_path}: scores hold NaN (first at scores[{frame}, {column}])")
    targets = read_npy(targets_path, "targets file")
    if targets.ndim == 1:
        labels = read_label_array(targets_path)
        if labels.max() >= scores.shape[1]:
            raise InputError(
                f"{targets_path}: label {labels.max()} but scores have {scores.shape[1]} classes"
            )
        targets = np.eye(scores.shape[1], dtype=bool)[labels]
    if targets.shape != scores.shape:
        raise InputError(
            f"{targets_path}: targets have shape {targets.shape} but scores "
            f"{scores.shape} ({scores_path})"
        )
    # A target other than 0 or 1 (NaN, -1 of a +-1 coding, a soft 0.9) would count as a
    # positive silently: mAP 100 for +-1 targets.
    if targets.dtype != bool:
        bad = ~np.isin(targets, (0, 1))
        if bad.any():
            frame, column = np.argwhere(bad)[0]
            raise InputError(
                f"{targets_path}: targets[{frame}, {column}] = {targets[frame, column]}; "
                "expected 0 or 1"
            )
    # float64, ranked under x64: float32 made distinct probabilities near 1 equal (AP 56%
    # for 97%) and scores past 3.4e38 infinite
    return targets != 0, scores.astype(np.float64)


def _online_scores(targets, scores, mask, *, background, ambiguous):
    """Per-frame AP and cAP, from one ranking of each class."""
    from jaxseg._src.ranking import frame_ap_and_cap

    return frame_ap_and_cap(targets, scores, mask=mask, background=background, ambiguous=ambiguous)


def _online(args) -> reports.Report:
    import jax

    targets, scores = _online_arrays(args)
    num_classes = scores.shape[1]
    background = (0,) if args.background is None else tuple(args.background)
    ambiguous = tuple(args.ambiguous)
    bad = [c for c in (*background, *ambiguous) if not 0 <= c < num_classes]
    if bad:
        raise InputError(f"class index {bad[0]} is outside the {num_classes} score columns")
    if len({*background, *ambiguous}) == num_classes:  # a mean over no class: exit 0, "-"
        raise InputError(
            f"--background ({', '.join(map(str, background)) or 'none'}) and --ambiguous "
            f"({', '.join(map(str, ambiguous)) or 'none'}) leave none of the {num_classes} "
            "score columns to score"
        )
    options = {
        "background": tuple(sorted(set(background))),
        "ambiguous": tuple(sorted(set(ambiguous))),
    }
    frames = scores.shape[0]
    padded = bucket(frames, 8)  # frame counts repeat across files: fewer compilations
    mask = np.arange(padded) < frames
    targets_padded = np.zeros((padded, num_classes), bool)
    targets_padded[:frames] = targets
    scores_padded = np.zeros((padded, num_classes), np.float64)
    scores_padded[:frames] = scores
    online_scores = jax.jit(_online_scores, static_argnames=("background", "ambiguous"))
    with jax.enable_x64(True):
        ap, cap = online_scores(targets_padded, scores_padded, mask, **options)
    sections = [
        reports.Section(
            "online",
            "Per-frame mAP and mcAP (%)",
            ("name", "mAP", "mcAP"),
            (("mean", 100.0 * float(ap.mean), 100.0 * float(cap.mean)),),
        )
    ]
    if args.per_class:
        rows = tuple(
            (str(c), int(targets[:, c].sum()), *_percent([ap.per_class[c], cap.per_class[c]]))
            for c in range(num_classes)
        )
        sections.append(
            reports.Section("per_class", "Per class (%)", ("class", "positives", "AP", "cAP"), rows)
        )
    summary = {"frames": int(scores.shape[0]), "classes": num_classes, **options}
    text = (
        f"{scores.shape[0]:,} frames, {num_classes} classes; not scored: "
        f"{', '.join(map(str, options['background'])) or 'none'}; ambiguous: "
        f"{', '.join(map(str, options['ambiguous'])) or 'none'}"
    )
    return reports.Report(text, summary, tuple(sections))


# The modes that use each option (attribute, flag): another mode refuses it, rather than
# ignoring it without a word (``--online --thresholds 5`` ran and printed per-frame mAP).
MODE_OPTIONS = {
    ("subset", "--subset"): ("offline", "proposals"),
    ("preset", "--preset"): ("offline",),
    ("thresholds", "--thresholds"): ("offline",),
    ("per_class", "--per-class"): ("offline", "online"),
    ("max_proposals", "--max-proposals"): ("proposals",),
    ("at", "--at"): ("proposals",),
    ("background", "--background"): ("online",),
    ("ambiguous", "--ambiguous"): ("online",),
}
MODE_NAMES = {"offline": "offline detection", "online": "--online", "proposals": "--proposals"}
DEFAULTS = {"subset": "validation", "preset": "activitynet", "max_proposals": 100, "ambiguous": ()}


def _mode(args: argparse.Namespace) -> str:
    """The mode of the command; refuses options it does not use, then fills in the defaults
    (options default to None, so that an option given with its default value is seen)."""
    if args.online and args.proposals:
        raise InputError(
            "--online and --proposals cannot be combined (per-frame .npy arrays or "
            "ActivityNet proposal JSON)"
        )
    mode = "proposals" if args.proposals else "online" if args.online else "offline"
    for (name, flag), modes in MODE_OPTIONS.items():
        if mode not in modes and getattr(args, name) not in (None, False):
            used = " and ".join(MODE_NAMES[m] for m in modes)
            raise InputError(f"{flag} is not used by {MODE_NAMES[mode]} (only by {used})")
    if args.preset is not None and args.thresholds is not None:
        raise InputError("give --preset or --thresholds, not both")
    for name, value in DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    return mode


def run(args: argparse.Namespace) -> int:
    """Runs ``jaxseg detection``; returns the exit status."""
    mode = _mode(args)
    reports.check_output(args.output, files=(args.ground_truth, args.predictions))
    if mode == "proposals":
        from jaxseg._host.cli_grounding import proposal_report

        report = proposal_report(args)
    else:
        report = _online(args) if mode == "online" else _offline(args)
    text = reports.render(report, args.format, decimals=args.decimals)
    reports.emit(text, args.output, quiet=args.quiet)
    return 0
