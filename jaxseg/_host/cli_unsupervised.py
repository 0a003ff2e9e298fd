"""``jaxseg evaluate --matching ...``: unsupervised action segmentation on files.

Ground truth as for ``evaluate`` (MS-TCN layout, class names mapped by ``mapping.txt``, or
``.npy`` class indices); predictions are cluster ids, one integer per frame (text: one per
line or the MS-TCN results format; or ``.npy``), -1 allowed (a background cluster), no
mapping. All videos given form one set (an activity): run once per activity (``--split``)
for the per-activity numbers of CTE and ASOT "full". Problems with the files end the program
with one line naming the file, exit status 2.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np

from jaxseg._host import report as reports
from jaxseg._host.io_files import (
    InputError,
    _check_in_range,
    _decode_text,
    _label_files,
    _read_bytes,
    check_same_length,
    find_mapping,
    pair_files,
    read_labels,
    read_mapping,
    read_npy,
    read_split,
    text_lines,
)

MATCHINGS = ("global", "per-video", "asot-full", "asot-per")
_COLUMNS = {
    "global": (("MoF", "mof"), ("IoU", "iou"), ("F1", "f1")),
    "per-video": (("MoF", "mof"), ("IoU", "iou"), ("F1", "f1")),
    "asot-full": (("MoF", "mof"), ("mIoU", "miou"), ("F1", "f1")),
    "asot-per": (("MoF", "mof"), ("mIoU", "miou"), ("F1", "f1")),
}
_PROTOCOL = {
    "global": "global Hungarian matching over all videos (CTE, ute)",
    "per-video": "Hungarian matching per video (TW-FINCH)",
    "asot-full": "ASOT matching over all videos ('full')",
    "asot-per": "ASOT matching per video ('per')",
}


def add_arguments(parser) -> None:
    """The options of the unsupervised protocols on ``jaxseg evaluate``."""
    parser.add_argument(
        "--matching",
        choices=MATCHINGS,
        help="unsupervised segmentation: PREDICTIONS hold cluster ids (integers, -1 allowed), "
        "matched to the classes by the Hungarian algorithm with this protocol: global (CTE), "
        "per-video (TW-FINCH), asot-full, asot-per; prints MoF, IoU and F1 (%%). The "
        "--background classes become CTE's/ASOT's background -1",
    )
    parser.add_argument(
        "--segments-per-video",
        type=int,
        metavar="K",
        help="--matching global: CTE's K in F1's precision (default: the number of distinct "
        "cluster ids of the predictions)",
    )
    parser.add_argument(
        "--iou-divisor",
        type=int,
        metavar="K",
        help="--matching per-video: TW-FINCH's n_clusters dividing the IoU sum (default: the "
        "number of distinct clusters of each video)",
    )


# The protocols scoring the whole set at once (no per-video rows).
_SET_LEVEL = ("global", "asot-full")
# Cluster ids the matching takes: its assignment table has (largest id + 1)^2 entries, so a
# sparse id exhausts the memory long before the label limit, under an error about the videos.
CLUSTER_LIMIT = 1 << 13


def _cluster_id(path: Path, number: int, token: str) -> int:
    """The cluster id of a token on line ``number``: ASCII digits (Python's ``int`` would
    also read ``1_0`` as 10 and other scripts' digits), within the ids the matching takes."""
    if not re.fullmatch(r"[+-]?[0-9]+", token, flags=re.ASCII):
        raise InputError(
            f"{path}:{number}: {token!r} is not an integer cluster id "
            "(--matching takes cluster ids, not class names)"
        )
    value = int(token)
    if not -1 <= value < CLUSTER_LIMIT:
        raise InputError(
            f"{path}:{number}: cluster id {token} is not in [-1, {CLUSTER_LIMIT}) "
            "(the matching compares (largest id + 1)^2 pairs: number the clusters densely)"
        )
    return value


def _cluster_id_lines(path: Path, lines: list[str]) -> list[int]:
    """The cluster ids of a text file's lines: after blank lines and a ``#`` header line, if
    any, up to trailing blank lines; a blank line between them is an error (a frame without
    its id, which would move the frames after it up one)."""
    filled = [n for n, line in enumerate(lines) if line.strip()]
    start = filled[0] + lines[filled[0]].lstrip().startswith("#") if filled else 0
    values = []
    for number, line in enumerate(lines[start : filled[-1] + 1] if filled else [], start + 1):
        if not line.strip():
            raise InputError(
                f"{path}:{number}: blank line after frame {len(values)}, a frame without a "
                "cluster id; remove the line or write the frame's cluster id"
            )
        values += [_cluster_id(path, number, token) for token in line.split()]
    if not values:
        raise InputError(f"{path}: empty file (no cluster ids)")
    return values


def read_cluster_ids(path: Path) -> np.ndarray:
    """One video's cluster ids: integers ``>= -1`` from a text or ``.npy`` file."""
    if path.suffix == ".npy":
        array = read_npy(path, "label file")
        if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer) or array.size == 0:
            raise InputError(
                f"{path}: expected integer cluster ids [T], got dtype {array.dtype} "
                f"shape {array.shape}"
            )
        ids = array  # checked in its own dtype: a uint64 id of 2**64 - 1 would cast to -1
    else:
        data = _read_bytes(path, "prediction file")
        text = _decode_text(path, data, "prediction file")
        ids = np.asarray(_cluster_id_lines(path, text_lines(text)), np.int64)
    outside = (ids < -1) | (ids >= CLUSTER_LIMIT)
    if outside.any():
        bad = int(np.argmax(outside))
        raise InputError(
            f"{path}: cluster id {ids[bad]} at frame {bad + 1} is not in [-1, {CLUSTER_LIMIT}) "
            "(the matching compares (largest id + 1)^2 pairs: number the clusters densely)"
        )
    return ids.astype(np.int32)


def load(args):
    """``(names, targets, predictions, class_names)`` of the videos named on the command line."""
    truth = Path(args.ground_truth)
    if (truth / "groundTruth").is_dir():
        truth = truth / "groundTruth"
    mapping = Path(args.mapping) if args.mapping else find_mapping(truth)
    class_names = read_mapping(mapping) if mapping is not None else None
    index = None if class_names is None else {n: i for i, n in enumerate(class_names)}
    _label_files(truth, "ground-truth")
    videos = pair_files(
        truth, Path(args.predictions), read_split(args.split) if args.split else None
    )
    from jaxseg._host.cli import note_other_files

    note_other_files(truth, [Path(args.predictions)], args)
    targets, predictions = [], []
    for name, truth_file, prediction_file in videos:
        target = read_labels(truth_file, index)
        if class_names is not None:  # a .npy file's labels, checked against the mapping
            _check_in_range(truth_file, target, mapping, len(class_names))
        prediction = read_cluster_ids(prediction_file)
        check_same_length(name, truth_file, target, prediction_file, prediction)
        targets.append(target)
        predictions.append(prediction)
    if class_names is None:
        class_names = tuple(str(i) for i in range(1 + max(int(t.max()) for t in targets)))
    return [name for name, _, _ in videos], targets, predictions, tuple(class_names)


def _background(args, class_names) -> tuple[int, ...]:
    from jaxseg._host.cli import _background_indices

    return _background_indices(args.background, class_names)


def _padded(sequences, fill=-1):
    length = max(len(s) for s in sequences)
    out = np.full((len(sequences), length), fill, np.int32)
    mask = np.zeros((len(sequences), length), bool)
    for row, s in enumerate(sequences):
        out[row, : len(s)] = s
        mask[row, : len(s)] = True
    return out, mask


def _segments_per_video(args, predictions) -> int:
    """CTE's K of ``--matching global``: ``--segments-per-video``, or else the number of
    distinct cluster ids, which renumbering the clusters cannot change (the largest id + 1
    would count ids that no cluster has)."""
    if args.segments_per_video is not None:
        return args.segments_per_video
    ids = np.unique(np.concatenate(predictions))
    ids = ids[ids >= 0]
    if ids.size and ids.size != int(ids[-1]) + 1 and not args.quiet:
        print(
            f"jaxseg: note: the predictions hold {ids.size} distinct cluster ids up to "
            f"{int(ids[-1])}; F1 takes K = {ids.size} segments per video (give the number of "
            "clusters the method was asked for with --segments-per-video)",
            file=sys.stderr,
        )
    return max(1, ids.size)


def _note_scores_above_one(args, result: dict, videos: int) -> None:
    """A note where a protocol's divisor, given on the command line, is below what it
    divides, so that a score exceeds 100% (kept, as the reference computes it)."""
    if args.matching == "global" and args.segments_per_video and result["precision"] > 1:
        divisor = args.segments_per_video * videos
        print(
            f"jaxseg: note: F1's precision is {100 * float(result['precision']):.2f}%: CTE "
            f"divides the {round(float(result['precision']) * divisor)} runs it finds correct by "
            f"K x videos = {args.segments_per_video} x {videos} (--segments-per-video is the "
            "number of clusters the method was asked for)",
            file=sys.stderr,
        )
    if args.matching == "per-video" and args.iou_divisor and np.any(result["iou"] > 1):
        print(
            f"jaxseg: note: IoU exceeds 100% in {int(np.sum(result['iou'] > 1))} videos: "
            f"TW-FINCH divides the IoU sum by --iou-divisor {args.iou_divisor}, fewer than "
            "their matched labels",
            file=sys.stderr,
        )


def evaluate(args, targets, predictions, num_classes: int, background: tuple[int, ...]):
    """The protocol's scores: dict of floats (set level) and of arrays (per video, or None)."""
    import jax

    from jaxseg import metrics

    if background:
        targets = [np.where(np.isin(t, background), -1, t).astype(np.int32) for t in targets]
    gt, mask = _padded(targets)
    pred, _ = _padded(predictions)
    kw = dict(num_classes=num_classes, num_clusters=max(1, int(pred.max()) + 1))
    bg = bool(background)
    if args.matching == "global":
        segments = _segments_per_video(args, predictions)
        fn = jax.jit(
            lambda g, p, m: metrics.global_hungarian_scores(
                g, p, mask=m, exclude_background=bg, segments_per_video=segments, **kw
            )
        )
    elif args.matching == "per-video":
        divisor = args.iou_divisor
        fn = jax.jit(
            lambda g, p, m: metrics.per_video_hungarian_scores(
                g, p, mask=m, iou_divisor=divisor, **kw
            )
        )
    else:
        mode = args.matching.removeprefix("asot-")
        fn = jax.jit(
            lambda g, p, m: metrics.asot_hungarian_scores(
                g, p, mask=m, mode=mode, exclude_background=bg, **kw
            )
        )
    result = {k: np.asarray(v) for k, v in fn(gt, pred, mask).items()}
    if not args.quiet:
        _note_scores_above_one(args, result, len(targets))
    columns = _COLUMNS[args.matching]
    if args.matching in _SET_LEVEL:
        overall = {key: float(result[key]) for _, key in columns}
        if args.matching == "global" and bg:
            overall.update(mof_bg=float(result["mof_bg"]), iou_bg=float(result["iou_bg"]))
        return overall, None
    per_video = {key: result[key].astype(np.float64) for _, key in columns}
    overall = {key: float(np.nanmean(values)) for key, values in per_video.items()}
    return overall, per_video


def report(args, names, targets, class_names, background, overall, per_video):
    columns = list(_COLUMNS[args.matching])
    if "mof_bg" in overall:
        columns += [("MoF-bg", "mof_bg"), ("IoU-bg", "iou_bg")]
    label = "mean over videos" if per_video is not None else "all"
    rows = [(label, *(100.0 * overall[key] for _, key in columns))]
    sections = [
        reports.Section("results", "Results (%)", ("name", *(c for c, _ in columns)), tuple(rows))
    ]
    if per_video is not None and args.per_video:
        video_rows = tuple(
            (name, len(t), *(100.0 * per_video[key][i] for _, key in columns))
            for i, (name, t) in enumerate(zip(names, targets))
        )
        sections.append(
            reports.Section(
                "per_video",
                "Per video (%)",
                ("video", "frames", *(c for c, _ in columns)),
                video_rows,
            )
        )
    frames = sum(len(t) for t in targets)
    background_names = [class_names[i] for i in background]
    summary = {
        "videos": len(names),
        "frames": frames,
        "classes": list(class_names),
        "background": background_names,
        "matching": args.matching,
    }
    if args.confidence is not None:  # the per-video protocols: means over videos
        from jaxseg._host.cli import mean_interval_section

        values = np.stack([per_video[key] for _, key in columns], axis=1)
        section, facts = mean_interval_section(
            args, "videos", [c for c, _ in columns], values, ~np.isnan(values), rows[0][1:]
        )
        sections.append(section)
        summary.update(facts)
    text = reports.description(
        len(names),
        frames,
        len(class_names),
        background_names,
        f"; {_PROTOCOL[args.matching]}",
    )
    return reports.Report(text, summary, tuple(sections))


def _check_protocol_options(args) -> None:
    """Refuses an option that the chosen protocol would silently ignore, and checks the
    resampling options as ``evaluate`` does (:func:`~jaxseg._host.cli.check_resampling_options`)."""
    from jaxseg._host.cli import DEFAULT_IOU_THRESHOLDS, check_resampling_options

    ignored = (
        (args.plot_videos != 0, "--plot-videos"),
        (tuple(args.iou_thresholds) != DEFAULT_IOU_THRESHOLDS, "--iou-thresholds"),
        (args.per_video and args.matching in _SET_LEVEL, "--per-video"),
        (args.segments_per_video is not None and args.matching != "global", "--segments-per-video"),
        (args.iou_divisor is not None and args.matching != "per-video", "--iou-divisor"),
        # one matching of the whole set: a replicate would need a matching of its own
        *(
            (value is not None and args.matching in _SET_LEVEL, name)
            for value, name in (
                (args.confidence, "--confidence"),
                (args.samples, "--samples"),
                (args.seed, "--seed"),
            )
        ),
    )
    for flag, name in ignored:
        if flag:
            raise InputError(f"--matching {args.matching} does not take {name}")
    check_resampling_options(args)


def run(args) -> int:
    """``jaxseg evaluate --matching ...``."""
    from jaxseg._host.cli import _load_jax, check_output_is_no_input

    for flag, name in (
        (args.demo, "--demo"),
        (args.per_class, "--per-class"),
        (args.plot, "--plot"),
        (args.legacy_asformer_end, "--legacy-asformer-end"),
    ):
        if flag:
            raise InputError(f"--matching does not take {name}")
    _check_protocol_options(args)
    if not (args.ground_truth and args.predictions):
        raise InputError("give GROUND_TRUTH and PREDICTIONS folders")
    for value, name in (
        (args.segments_per_video, "--segments-per-video"),
        (args.iou_divisor, "--iou-divisor"),
    ):
        if value is not None and value < 1:
            raise InputError(f"{name} must be at least 1")
        if value is not None and value >= 2**31:  # the kernels' int32
            raise InputError(f"{name} must be below 2**31, got {value}")
    check_output_is_no_input(args, [args.predictions])
    names, targets, predictions, class_names = load(args)
    background = _background(args, class_names)
    _load_jax()
    overall, per_video = evaluate(args, targets, predictions, len(class_names), background)
    result = report(args, names, targets, class_names, background, overall, per_video)
    reports.emit(
        reports.render(result, args.format, decimals=args.decimals), args.output, quiet=args.quiet
    )
    return 0
