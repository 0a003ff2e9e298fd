"""The ``jaxseg`` command line: ``evaluate`` and ``compare`` (action segmentation on files).

``jaxseg detection`` lives in :mod:`jaxseg._host.cli_detection`, ``jaxseg grounding`` in
:mod:`jaxseg._host.cli_grounding`.

Results go to stdout (or ``--output``), everything else (progress, notes, errors) to stderr, so
``jaxseg evaluate ... --format json | jq`` works. Problems with the user's files end the
program with a one-line message naming the file and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import io
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from jaxseg import __version__
from jaxseg._host import report as reports
from jaxseg._host.demo import DEMO_DIRECTORY
from jaxseg._host.io_files import (
    InputError,
    SegmentationDataset,
    _listing,
    find_mapping,
    normalization_hint,
    other_files,
    start_loading,
    write_atomic,
)
from jaxseg._src.thresholds import MAX_DENOMINATOR, simple_fraction

USER_ERROR = 2
INTERRUPTED = 130  # 128 + SIGINT, as shells report it
DEFAULT_IOU_THRESHOLDS = (0.1, 0.25, 0.5)


class Progress:
    """A progress bar on a terminal's stderr, shown only once a run has taken ``delay`` seconds.

    Call it with ``(done, total)`` after each step; ``close()`` erases the bar.
    """

    def __init__(self, label: str, *, stream=None, enabled: bool = True, delay: float = 1.0):
        self.stream = sys.stderr if stream is None else stream
        self.enabled = enabled and self.stream.isatty()
        self.label, self.delay = label, delay
        self.start = time.monotonic()
        self.shown = 0

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or total <= 0 or time.monotonic() - self.start < self.delay:
            return
        width = 30
        filled = width * done // total
        text = f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}"
        self.stream.write(text)
        self.stream.flush()
        self.shown = len(text) - 1  # without the carriage return

    def close(self) -> None:
        """Erases the bar (if it was shown)."""
        if self.shown:
            self.stream.write("\r" + " " * self.shown + "\r")
            self.stream.flush()
            self.shown = 0


def _parse(text: str, kind: type, what: str):
    """``text`` as a ``kind`` (int or float), else an argparse error naming ``what``."""
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise argparse.ArgumentTypeError(message)


def _overlap(text: str) -> float:
    value = _parse(text, float, "a number")
    _require(0.0 < value <= 1.0, f"IoU thresholds must be in (0, 1], got {text}")
    _require(
        simple_fraction(value) is not None,
        "IoU thresholds must be simple fractions such as 0.1 or 0.25 (denominator <= "
        f"{MAX_DENOMINATOR}), got {text}",
    )
    return value


def _seed(text: str) -> int:
    """A seed of ``jax.random.key``, which keeps 32 bits (5 and 2**32 + 5 drew the same)."""
    value = _parse(text, int, "an integer")
    _require(0 <= value < 2**32, f"must be in 0..{2**32 - 1}, got {text}")
    return value


def _replicates(text: str) -> int:
    value = _parse(text, int, "an integer")
    _require(value >= 2, f"must be at least 2 (a spread needs two replicates), got {text}")
    _require(value < 2**31, f"must be below 2**31 (the kernels' int32), got {text}")
    return value


def _decimals(text: str) -> int:
    value = _parse(text, int, "an integer")
    _require(0 <= value <= 15, f"must be in 0..15, got {text}")
    return value


def _video_count(text: str) -> int | None:
    """A number of videos, or None for 'all'."""
    if text == "all":
        return None
    value = _parse(text, int, "a number of videos or 'all'")
    _require(value >= 0, f"must be at least 0, got {text}")
    return value


def _level(text: str) -> float:
    value = _parse(text, float, "a number")
    percent = f" (a fraction: {value / 100:g} for {value:g}%)" if 1 < value < 100 else ""
    _require(0.0 < value < 1.0, f"confidence level must be in (0, 1), got {text}{percent}")
    return value


def _store_list_once(action, parser, namespace, values, option_string) -> None:
    """Stores ``values``; a list option (``nargs`` ``+`` or ``*``) found already given, by
    this name or another of its destination, is a usage error: its second list replaced the
    first without a word (``--iou-thresholds 0.1 --iou-thresholds 0.5`` scored 0.5 alone)."""
    listed = action.nargs in ("+", "*")
    if listed and getattr(namespace, action.dest) is not parser.get_default(action.dest):
        parser.error(f"{option_string} is given again; list every value after one {option_string}")
    setattr(namespace, action.dest, values)


class _ListOnce(argparse.Action):
    """A list option that refuses a second occurrence (:func:`_store_list_once`)."""

    def __call__(self, parser, namespace, values, option_string=None):
        _store_list_once(self, parser, namespace, values, option_string)


class _Parser(argparse.ArgumentParser):
    """The parser of a ``jaxseg`` command: its list options refuse a second occurrence."""

    def add_argument(self, *args, **kwargs):
        if kwargs.get("nargs") in ("+", "*") and "action" not in kwargs:
            kwargs["action"] = _ListOnce
        return super().add_argument(*args, **kwargs)


class _DeprecatedAlias(argparse.Action):
    """An option's old name: stores into the new option's destination and says so on stderr."""

    def __init__(self, option_strings, dest, *, replacement: str, **kwargs):
        super().__init__(option_strings, dest, **kwargs)
        self.replacement = replacement

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"jaxseg: {option_string} is deprecated, use {self.replacement}", file=sys.stderr)
        _store_list_once(self, parser, namespace, values, option_string)


def _add_output_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format", choices=reports.FORMATS, default="table", help="output format (default: table)"
    )
    parser.add_argument(
        "--decimals",
        type=_decimals,
        default=2,
        metavar="N",
        help="decimals of the percentages in table/markdown output (default 2; "
        "4 gives the digits MS-TCN's eval.py prints)",
    )
    parser.add_argument(
        "--output",
        metavar="FILE",
        help="write the results to FILE (atomically) instead of stdout ('-': stdout)",
    )
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="print nothing on stderr but errors (no progress, no notes)",
    )


def _add_segmentation_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--mapping",
        metavar="FILE",
        help="'index name' per line (default: mapping.txt beside or above GROUND_TRUTH)",
    )
    parser.add_argument(
        "--split", metavar="FILE", help="split/bundle file listing the videos to evaluate"
    )
    parser.add_argument(
        "--background",
        nargs="*",
        metavar="NAME",
        help="class names that form no segment (default: 'background' if the "
        "mapping has it, as in eval.py); give no name for none",
    )
    parser.add_argument(
        "--iou-thresholds",
        nargs="+",
        type=_overlap,
        default=DEFAULT_IOU_THRESHOLDS,
        metavar="TAU",
        help="IoU thresholds of F1 (default: 0.1 0.25 0.5)",
    )
    parser.add_argument(
        "--overlaps",
        nargs="+",
        type=_overlap,
        dest="iou_thresholds",
        action=_DeprecatedAlias,
        replacement="--iou-thresholds",
        help=argparse.SUPPRESS,
    )
    parser.add_argument(
        "--legacy-asformer-end",
        action="store_true",
        help="reproduce ASFormer/DiffAct/ASRF, whose last segment ends one "
        "frame early (slightly lower F1)",
    )


_SAMPLES, _SEED = 10_000, 0


def _add_bootstrap_arguments(parser: argparse.ArgumentParser, *, resampled: bool) -> None:
    """``--samples`` and ``--seed``; ``resampled=False``: they default to None, for a command
    that resamples only when asked (so that an option it would ignore can be refused)."""
    parser.add_argument(
        "--samples",
        type=_replicates,
        default=_SAMPLES if resampled else None,
        metavar="N",
        help=f"bootstrap replicates / permutations (default {_SAMPLES})",
    )
    parser.add_argument(
        "--seed",
        type=_seed,
        default=_SEED if resampled else None,
        help=f"random seed of the resampling (default {_SEED})",
    )


def _add_confidence_arguments(parser: argparse.ArgumentParser, items: str) -> None:
    """``--confidence`` (intervals only when asked), ``--samples`` and ``--seed``, for a
    command whose bootstrap resamples ``items`` ("videos", "queries")."""
    parser.add_argument(
        "--confidence",
        type=_level,
        metavar="LEVEL",
        help="add percentile-bootstrap confidence intervals at LEVEL (e.g. 0.95), resampling "
        f"{items}",
    )
    _add_bootstrap_arguments(parser, resampled=False)


def check_resampling_options(args) -> None:
    """Refuses ``--samples`` or ``--seed`` without ``--confidence`` (nothing would read them),
    and fewer samples than a replicate in each tail of the interval: below that, its ends
    are the extreme replicates, which can both lie on one side of the estimate."""
    for value, name in ((args.samples, "--samples"), (args.seed, "--seed")):
        if value is not None and args.confidence is None:
            raise InputError(f"{name} goes with --confidence; without it, nothing would read it")
    if args.confidence is None or args.samples is None:
        return
    needed = math.ceil(round(2 / (1 - args.confidence), 9))
    if args.samples < needed:
        raise InputError(
            f"--samples {args.samples} is too few for a {100 * args.confidence:g}% interval: "
            f"each tail needs a replicate, so at least {needed}"
        )


def resampling(args) -> tuple[int, int]:
    """``(num_samples, seed)`` of ``--samples`` and ``--seed``, their defaults where not given."""
    return (
        _SAMPLES if args.samples is None else args.samples,
        _SEED if args.seed is None else args.seed,
    )


def mean_interval_section(args, items: str, names, values, kept, reported):
    """``--confidence``'s section of a command whose numbers are means over ``items``
    ("queries", "videos"): percentile-bootstrap intervals (%) of the ``reported``
    percentages, the means of ``values [N, M]`` over their ``kept [N, M]`` items
    (:func:`~jaxseg._host.intervals.mean_intervals`), and the facts for the JSON summary."""
    from jaxseg._host.intervals import mean_intervals

    num_samples, seed = resampling(args)
    means = np.asarray(reported, np.float64) / 100
    ends = 100 * mean_intervals(
        values, kept, means, confidence=args.confidence, num_samples=num_samples, seed=seed
    )
    rows = tuple((n, r, low, high) for n, r, (low, high) in zip(names, reported, ends))
    title = (
        f"{100 * args.confidence:g}% percentile-bootstrap intervals over {items} (%; none "
        f"where fewer than 2 {items})"
    )
    section = reports.Section("intervals", title, ("metric", "value", "low", "high"), rows)
    return section, {"confidence": args.confidence, "samples": num_samples, "seed": seed}


_CACHE_NOTE = (
    "Compiled programs are cached in $JAXSEG_CACHE_DIR (default ~/.cache/jaxseg; set it to an "
    "empty string to disable), so later runs skip compilation."
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``jaxseg`` command."""
    from jaxseg._host import cli_detection, cli_grounding

    parser = argparse.ArgumentParser(
        prog="jaxseg",
        description="Evaluate temporal action segmentation and detection results.",
        epilog=_CACHE_NOTE,
    )
    parser.add_argument("--version", action="version", version=f"jaxseg {__version__}")
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_Parser
    )
    _add_evaluate_command(commands)
    _add_compare_command(commands)
    cli_detection.add_parser(commands, _add_output_arguments)
    cli_grounding.add_parser(commands, _add_output_arguments, _add_confidence_arguments)
    return parser


def _add_evaluate_command(commands) -> None:
    """The ``evaluate`` subcommand: one model's segmentation against the ground truth."""
    from jaxseg._host import cli_unsupervised

    evaluate = commands.add_parser(
        "evaluate",
        help="action segmentation: frame accuracy, edit score, segmental F1@k",
        description="Evaluate frame-wise action segmentation results in the MS-TCN layout: "
        "Acc (MoF), Edit and F1@k in percent, the numbers MS-TCN's eval.py prints. "
        "Differences: Edit of a video with no segment in both ground truth and prediction is "
        "100 (eval.py: NaN), ground truth without segments makes every prediction a false "
        "positive (eval.py: crash), and lengths must match exactly.",
        epilog=_CACHE_NOTE,
    )
    evaluate.add_argument(
        "ground_truth",
        nargs="?",
        metavar="GROUND_TRUTH",
        help="folder of ground-truth files (<video>.txt, one label per line, "
        "or <video>.npy), or a dataset folder holding groundTruth/",
    )
    evaluate.add_argument(
        "predictions",
        nargs="?",
        metavar="PREDICTIONS",
        help="folder of predictions (<video>[.txt] one label per line or "
        "MS-TCN results format, or <video>.npy labels [T] / scores [T, C])",
    )
    evaluate.add_argument(
        "--demo", action="store_true", help="evaluate the demo dataset shipped with jaxseg"
    )
    _add_segmentation_arguments(evaluate)
    _add_picture_arguments(evaluate)
    _add_confidence_arguments(evaluate, "videos")
    evaluate.add_argument(
        "--ci",
        type=_level,
        dest="confidence",
        action=_DeprecatedAlias,
        replacement="--confidence",
        help=argparse.SUPPRESS,
    )
    cli_unsupervised.add_arguments(evaluate)
    _add_output_arguments(evaluate)


def _add_picture_arguments(parser: argparse.ArgumentParser) -> None:
    """``evaluate``'s rows per video and per class, and its pictures."""
    parser.add_argument("--per-video", action="store_true", help="also a row per video")
    parser.add_argument(
        "--per-class",
        action="store_true",
        help="also frame-level accuracy, precision and F1 per class",
    )
    parser.add_argument(
        "--plot",
        metavar="DIR",
        help="write PNG pictures to DIR: overview.png (per-class scores and the confusion "
        "matrix; needs matplotlib)",
    )
    parser.add_argument(
        "--plot-videos",
        type=_video_count,
        default=0,
        metavar="N",
        help="with --plot, also a timeline_<video>.png for the N videos of lowest frame "
        "accuracy, or for 'all' videos (default 0)",
    )


def _add_compare_command(commands) -> None:
    """The ``compare`` subcommand: two models' segmentations, paired, on the same videos."""
    compare = commands.add_parser(
        "compare",
        help="paired comparison of two models' predictions on the same videos",
        description="Evaluate two prediction folders against the same ground truth and test "
        "the difference A - B of every metric: paired bootstrap interval and p-value, and "
        "paired permutation p-value (videos resampled / swapped between the models).",
        epilog=_CACHE_NOTE,
    )
    compare.add_argument("ground_truth", metavar="GROUND_TRUTH", help="as for evaluate")
    compare.add_argument("predictions_a", metavar="PREDICTIONS_A", help="model A's folder")
    compare.add_argument("predictions_b", metavar="PREDICTIONS_B", help="model B's folder")
    _add_segmentation_arguments(compare)
    compare.add_argument(
        "--confidence",
        type=_level,
        default=0.95,
        metavar="LEVEL",
        help="level of the interval of the difference (default 0.95)",
    )
    _add_bootstrap_arguments(compare, resampled=True)
    _add_output_arguments(compare)


def _ground_truth_folder(path: str) -> Path:
    """The ground-truth folder: ``path`` itself, or its ``groundTruth/`` (a dataset folder)."""
    folder = Path(path)
    return folder / "groundTruth" if (folder / "groundTruth").is_dir() else folder


def check_output_is_no_input(args, prediction_folders) -> None:
    """:func:`~jaxseg._host.report.check_output` of a segmentation command: ``--output`` may
    not overwrite the mapping, the split or a label file of the ground-truth or prediction
    folders."""
    ground_truth = _ground_truth_folder(args.ground_truth)
    mapping = args.mapping or find_mapping(ground_truth)
    reports.check_output(
        args.output,
        files=(mapping, args.split),
        folders=(ground_truth, *prediction_folders),
    )


def _read(
    ground_truth: Path, predictions: Path, args, mapping=None, *, note=True
) -> SegmentationDataset:
    """Reads a dataset with a progress bar, and loads JAX meanwhile: before JAX is imported
    (the first read), two forked processes read the files (a process running JAX's threads
    must not fork). A broken mapping is reported before any label; with ``note``, the files
    left out are named after the read (:func:`note_other_files`)."""
    finish = start_loading(
        ground_truth,
        predictions,
        mapping=mapping or args.mapping,
        split=args.split,
        processes=1 if "jax" in sys.modules else 2,
    )
    _load_jax()
    reading = Progress(f"reading {predictions.name}", enabled=not args.quiet)
    dataset = finish(reading)
    reading.close()
    if note:
        note_other_files(ground_truth, [predictions], args)
    return dataset


def note_other_files(ground_truth: Path, predictions: Sequence[Path], args) -> None:
    """Names on stderr, once each, the files left out as no label files (without ``--split``)
    next to the prediction folders: a video whose name holds a dot (``x.y``) and that has no
    prediction would otherwise be left out unseen."""
    if args.split is not None or args.quiet:
        return
    left = sorted({path for folder in predictions for path in other_files(ground_truth, folder)})
    if left:
        print(
            f"jaxseg: note: {len(left)} file(s) not read, with no counterpart in the other "
            "folder and not named like a label file (no suffix, .txt or .npy): "
            f"{_listing([str(path) for path in left])}",
            file=sys.stderr,
        )


def _load_jax() -> None:
    """Imports JAX and the evaluator, enables the compilation cache, starts the backend."""
    import jax

    from jaxseg._host import compilation, evaluator  # noqa: F401

    _enable_compilation_cache()
    jax.devices()
    compilation.compiler_options()


def _background_indices(names: Sequence[str] | None, class_names: Sequence[str]) -> tuple:
    """Class indices of the background names (default: 'background' when it is a class)."""
    if names is None:
        return tuple(i for i, name in enumerate(class_names) if name == "background")
    index = {name: i for i, name in enumerate(class_names)}
    unknown = [name for name in names if name not in index]
    if unknown:
        raise InputError(
            f"--background: {', '.join(map(repr, unknown))} is not a class name; classes: "
            f"{_listing(class_names, limit=12)}{normalization_hint(unknown[0], class_names)}"
        )
    return tuple(sorted({index[name] for name in names}))


def _evaluator(dataset: SegmentationDataset, *, background, iou_thresholds, legacy):
    """An Evaluator holding every video of ``dataset``."""
    from jaxseg.evaluator import Evaluator  # imports JAX: only when needed (fast --help)

    evaluator = Evaluator(
        num_classes=len(dataset.class_names),
        background=background,
        iou_thresholds=iou_thresholds,
        legacy_asformer_end=legacy,
    )
    evaluator.add(list(dataset.targets), list(dataset.predictions), name=list(dataset.names))
    return evaluator


def _confusion(dataset: SegmentationDataset) -> np.ndarray:
    """The frame-level confusion matrix ``[C, C]`` over all videos (rows: ground truth).

    The frames of all videos are concatenated (frame metrics ignore video boundaries) and
    padded to a power of two with a mask, so that datasets of similar size share one program.
    """
    import jax

    from jaxseg import metrics

    frames = sum(t.size for t in dataset.targets)
    padded = 1 << max(10, (frames - 1).bit_length())
    targets, predictions = np.zeros(padded, np.int32), np.zeros(padded, np.int32)
    np.concatenate(dataset.targets, out=targets[:frames])
    np.concatenate(dataset.predictions, out=predictions[:frames])
    mask = np.arange(padded) < frames
    confusion = jax.jit(metrics.confusion_matrix, static_argnames="num_classes")
    return np.asarray(
        confusion(targets, predictions, num_classes=len(dataset.class_names), mask=mask)
    )


def _percent(value) -> float:
    return 100.0 * float(value)


def _lookup(result: dict, key):
    """``result[key]``, or ``result[name][tau]`` for a key ``(name, tau)``."""
    return result[key[0]][key[1]] if isinstance(key, tuple) else result[key]


def _segmentation_report(
    dataset, evaluator, per_class: bool, *, background, iou_thresholds, intervals, per_video: bool
) -> reports.Report:
    result = evaluator.get()
    named = dict(zip(iou_thresholds, reports.overlap_columns(iou_thresholds), strict=True))
    metrics = ["Acc", "Edit", *named.values()]
    values = [result["accuracy"], result["edit"], *(result["f1"][tau] for tau in iou_thresholds)]
    if intervals is None:
        columns = ("name", *metrics)
        row = ("all", *(_percent(v) for v in values))
        title = "Results (%)"
    else:  # each metric's interval as two columns beside it: one row, one schema
        keys = ["accuracy", "edit", *(("f1", tau) for tau in iou_thresholds)]
        columns, row = ["name"], ["all"]
        for metric, key, value in zip(metrics, keys, values, strict=True):
            low, high = _lookup(intervals, key)
            columns += [metric, f"{metric} low", f"{metric} high"]
            row += [_percent(value), _percent(low), _percent(high)]
        columns, row = tuple(columns), tuple(row)
        level = f"{100 * intervals['confidence']:g}%"
        title = f"Results (%; low / high: {level} percentile-bootstrap interval over videos)"
    sections = [reports.Section("results", title, columns, (row,))]
    columns = ("name", *metrics)
    if per_video:
        by_name = {row["name"]: row for row in evaluator.per_video()}
        video_rows = []
        for name in dataset.names:
            row = by_name[name]
            video_rows.append(
                (
                    name,
                    int(row["frames"]),
                    _percent(row["accuracy"]),
                    _percent(row["edit"]),
                    *(_percent(row["f1"][t]) for t in iou_thresholds),
                )
            )
        sections.append(
            reports.Section(
                "per_video", "Per video (%)", ("video", "frames", *columns[1:]), tuple(video_rows)
            )
        )
    if per_class:
        sections.append(_class_section(dataset.class_names, evaluator.class_counts()))
    background_names = [dataset.class_names[i] for i in background]
    summary = {
        "videos": len(dataset.names),
        "frames": int(result["frames"]),
        "classes": list(dataset.class_names),
        "background": background_names,
        "iou_thresholds": list(iou_thresholds),
        "confidence": None if intervals is None else intervals["confidence"],
        **{
            key: {named[t]: int(result[key][t]) for t in iou_thresholds}
            for key in ("tp", "fp", "fn")
        },
    }
    text = reports.description(
        len(dataset.names), int(result["frames"]), len(dataset.class_names), background_names
    )
    return reports.Report(text, summary, tuple(sections))


def _class_scores(counts) -> dict[str, np.ndarray]:
    """Per-class frame ``recall`` (class accuracy), ``precision`` and ``f1`` (float64 ``[C]``)
    from the Evaluator's class counts (:meth:`~jaxseg.Evaluator.class_counts`, the pooled
    confusion's diagonal and sums), for the ``--per-class`` table and the ``--plot`` bars.

    The library's rule (``metrics.recall``/``precision``/``f1_score``, ``streaming.frame_metrics``
    and the Evaluator's ``class_accuracy``, DESIGN §4): a class in neither the ground truth nor
    the predictions is NaN; any other ratio whose denominator is 0 is 0 (scikit-learn's
    ``zero_division=0``: a class only predicted has recall 0, one never predicted precision 0).
    """
    from jaxseg._src.frame import score_fraction

    tp, frames, predicted = (
        np.asarray(x, np.int64).astype(np.float64)
        for x in (counts.correct, counts.support, counts.predicted)
    )
    absent = frames + predicted == 0

    def per_class(score):
        numerator, denominator = score_fraction(score, tp, frames, predicted)
        ratio = np.divide(numerator, denominator, out=np.zeros_like(tp), where=denominator > 0)
        return np.where(absent, np.nan, ratio)

    return {score: per_class(score) for score in ("recall", "precision", "f1")}


def _class_section(class_names, counts) -> reports.Section:
    """The ``--per-class`` table: :func:`_class_scores` of each class and their mean over the
    classes where they are defined (those in the ground truth or the predictions)."""
    scores = list(_class_scores(counts).values())
    frames, predicted = np.asarray(counts.support), np.asarray(counts.predicted)
    rows = [
        (name, int(frames[c]), int(predicted[c]), *(_percent(s[c]) for s in scores))
        for c, name in enumerate(class_names)
    ]

    def mean(values):
        defined = values[~np.isnan(values)]
        return float(defined.mean()) if defined.size else math.nan

    totals = (int(frames.sum()), int(predicted.sum()))
    rows.append(("mean", *totals, *(_percent(mean(s)) for s in scores)))
    return reports.Section(
        "per_class",
        "Per class (%, frame level; '-': a class in neither the ground truth nor the "
        "predictions, left out of the mean; a zero denominator otherwise gives 0)",
        ("class", "frames", "predicted", "Recall", "Precision", "F1"),
        tuple(rows),
    )


def _png(figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=figure.dpi)
    return buffer.getvalue()


def _worst_videos(dataset, count: int | None) -> list[int]:
    """Indices of the ``count`` videos of lowest frame accuracy (all for None), worst first,
    ties in evaluation order."""
    accuracy = [float(np.mean(t == p)) for t, p in zip(dataset.targets, dataset.predictions)]
    order = sorted(range(len(accuracy)), key=lambda i: (accuracy[i], i))
    return order if count is None else order[:count]


def _write_plots(
    directory: Path, dataset, evaluator, background, *, videos: int | None, quiet: bool
) -> None:
    from jaxseg._host import plotting

    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        reason = error.strerror or error
        raise InputError(f"{directory}: cannot create the --plot folder: {reason}") from None
    names = dataset.class_names
    scores = _class_scores(evaluator.class_counts())
    figure = plotting.overview(
        _confusion(dataset),
        {"F1": 100 * scores["f1"], "Recall": 100 * scores["recall"]},
        class_names=names,
        title=f"{len(dataset.names):,} videos, {len(names)} classes",
    )
    write_atomic(directory / "overview.png", _png(figure))
    chosen = _worst_videos(dataset, videos)
    progress = Progress("plotting", enabled=not quiet)
    for count, index in enumerate(chosen, start=1):
        video = dataset.names[index]
        figure = plotting.timeline(
            dataset.targets[index],
            dataset.predictions[index],
            class_names=names,
            background=background,
            title=video,
        )
        write_atomic(directory / f"timeline_{video}.png", _png(figure))
        progress(count, len(chosen))
    progress.close()
    if not quiet:
        count = 1 + len(chosen)
        plural = "picture" if count == 1 else "pictures"
        print(f"jaxseg: wrote {count} {plural} to {directory}", file=sys.stderr)


def _check_resampled(dataset: SegmentationDataset, what: str) -> None:
    """Refuses a bootstrap over one video: every replicate is that video, so the intervals
    have no width and a difference of two models reads as significant (p = 1 / (N + 1))."""
    if len(dataset.names) < 2:
        named = f" ({dataset.names[0]})" if dataset.names else ""
        raise InputError(
            f"{what} resamples videos: it needs at least 2, got {len(dataset.names)}{named}"
        )


def _confidence_intervals(evaluator, iou_thresholds, args):
    """Percentile-bootstrap intervals over videos of every reported metric (jaxseg.stats)."""
    from jaxseg.stats import segmentation_intervals

    num_samples, seed = resampling(args)
    intervals = segmentation_intervals(
        evaluator.statistics(),
        iou_thresholds=iou_thresholds,
        confidence=args.confidence,
        num_samples=num_samples,
        seed=seed,
    )
    return {**intervals, "confidence": args.confidence}


def _check_evaluate_options(args) -> None:
    """Refuses an option that supervised ``evaluate`` would silently ignore."""
    needs = (
        (args.segments_per_video, "--segments-per-video", "--matching global"),
        (args.iou_divisor, "--iou-divisor", "--matching per-video"),
    )
    for value, name, needed in needs:
        if value is not None:
            raise InputError(f"{name} goes with {needed}; without it, nothing would read it")
    check_resampling_options(args)


def _greedy(args) -> str:
    """A note when ``--background`` took the folders as class names (it takes every word
    after it: ``--background SIL GT PRED``), or nothing."""
    if not args.background:
        return ""
    return (
        f"; --background took {', '.join(map(repr, args.background))} as class names: give "
        "the folders before it, or end its names with --"
    )


def _run_evaluate(args) -> int:
    if args.matching is not None:
        from jaxseg._host import cli_unsupervised

        return cli_unsupervised.run(args)
    _check_evaluate_options(args)
    if args.demo and (args.ground_truth or args.predictions):
        raise InputError("--demo takes no GROUND_TRUTH or PREDICTIONS folders")
    if args.demo and args.mapping is not None:  # the demo's own mapping would be used
        raise InputError("--demo takes no --mapping (the demo dataset has its own)")
    if not args.demo and not (args.ground_truth and args.predictions):
        raise InputError("give GROUND_TRUTH and PREDICTIONS folders (or --demo)" + _greedy(args))
    if args.demo:
        reports.check_output(args.output)
    else:
        check_output_is_no_input(args, [args.predictions])
    reports.check_folder(args.plot, "--plot")
    if args.plot_videos != 0 and args.plot is None:
        raise InputError("--plot-videos needs --plot DIR (the folder of the pictures)")
    if args.plot is not None:
        from jaxseg._host import plotting

        plotting.class_colors(1)  # fail before the work if matplotlib is missing
    if args.demo:
        dataset = _read(
            DEMO_DIRECTORY / "groundTruth",
            DEMO_DIRECTORY / "predictions",
            args,
            mapping=DEMO_DIRECTORY / "mapping.txt",
        )
    else:
        dataset = _read(_ground_truth_folder(args.ground_truth), Path(args.predictions), args)
    if args.plot is not None and len(dataset.class_names) > _PLOT_CLASSES:
        raise InputError(
            f"--plot draws the {len(dataset.class_names)} x {len(dataset.class_names)} "
            f"confusion matrix of the classes: at most {_PLOT_CLASSES} classes, got "
            f"{len(dataset.class_names)} (leave out --plot, or number the labels densely)"
        )
    background = _background_indices(args.background, dataset.class_names)
    iou_thresholds = tuple(dict.fromkeys(args.iou_thresholds))
    evaluator = _evaluator(
        dataset,
        background=background,
        iou_thresholds=iou_thresholds,
        legacy=args.legacy_asformer_end,
    )
    intervals = None
    if args.confidence is not None:
        _check_resampled(dataset, "--confidence")
        intervals = _confidence_intervals(evaluator, iou_thresholds, args)
    report = _segmentation_report(
        dataset,
        evaluator,
        args.per_class,
        background=background,
        iou_thresholds=iou_thresholds,
        intervals=intervals,
        per_video=args.per_video,
    )
    text = reports.render(report, args.format, decimals=args.decimals)
    if args.plot is not None:  # first: a failure here leaves no --output behind
        _write_plots(
            Path(args.plot),
            dataset,
            evaluator,
            background,
            videos=args.plot_videos,
            quiet=args.quiet,
        )
    reports.emit(text, args.output, quiet=args.quiet)
    return 0


_METRICS = (("Acc", "accuracy"), ("Edit", "edit"))
# Classes of the --plot confusion matrix: a picture of more has no readable cell, and its
# int32 cell index overflowed at 46,341 classes (40,000 exhausted the memory).
_PLOT_CLASSES = 1024


def _comparison_report(dataset_a, result, *, background, iou_thresholds, args) -> reports.Report:
    columns = reports.overlap_columns(iou_thresholds)
    keys = [*_METRICS, *((c, ("f1", t)) for c, t in zip(columns, iou_thresholds, strict=True))]
    rows = []
    for column, key in keys:
        value = _lookup(result, key)
        rows.append(
            (
                column,
                *(_percent(value[f]) for f in ("a", "b", "difference", "lower", "upper")),
                value["p_value"],
                value["permutation_p_value"],
            )
        )
    level = f"{100 * args.confidence:g}%"
    columns = ("metric", "A", "B", "A - B", "low", "high", "p (bootstrap)", "p (permutation)")
    section = reports.Section(
        "comparison",
        f"Paired comparison A - B (%; low / high: {level} paired-bootstrap interval of A - B; "
        "p-values two-sided)",
        columns,
        tuple(rows),
        decimals=(None,) * 6 + (4, 4),
    )
    background_names = [dataset_a.class_names[i] for i in background]
    frames = int(sum(t.size for t in dataset_a.targets))
    summary = {
        "videos": len(dataset_a.names),
        "frames": frames,
        "classes": list(dataset_a.class_names),
        "background": background_names,
        "iou_thresholds": list(iou_thresholds),
        "a": args.predictions_a,
        "b": args.predictions_b,
        "confidence": args.confidence,
        "samples": args.samples,
        "seed": args.seed,
    }
    text = reports.description(
        len(dataset_a.names),
        frames,
        len(dataset_a.class_names),
        background_names,
        f"\nA = {args.predictions_a}\nB = {args.predictions_b}",
    )
    return reports.Report(text, summary, (section,))


def _run_compare(args) -> int:
    from jaxseg.stats import segmentation_comparison

    check_resampling_options(args)
    check_output_is_no_input(args, [args.predictions_a, args.predictions_b])
    ground_truth = _ground_truth_folder(args.ground_truth)
    folders = [Path(args.predictions_a), Path(args.predictions_b)]
    dataset_a, dataset_b = (_read(ground_truth, folder, args, note=False) for folder in folders)
    note_other_files(ground_truth, folders, args)
    _check_resampled(dataset_a, "compare")
    background = _background_indices(args.background, dataset_a.class_names)
    iou_thresholds = tuple(dict.fromkeys(args.iou_thresholds))
    statistics = [
        _evaluator(
            d, background=background, iou_thresholds=iou_thresholds, legacy=args.legacy_asformer_end
        ).statistics()
        for d in (dataset_a, dataset_b)
    ]
    result = segmentation_comparison(
        *statistics,
        iou_thresholds=iou_thresholds,
        confidence=args.confidence,
        num_samples=args.samples,
        seed=args.seed,
    )
    report = _comparison_report(
        dataset_a, result, background=background, iou_thresholds=iou_thresholds, args=args
    )
    reports.emit(
        reports.render(report, args.format, decimals=args.decimals), args.output, quiet=args.quiet
    )
    return 0


def _enable_compilation_cache() -> None:
    """Caches compiled programs on disk (``$JAXSEG_CACHE_DIR``, default ``~/.cache/jaxseg``).

    Compilation dominates a first run; with the cache, later runs start in about a second.
    Left alone when the user configured JAX's cache already or set ``JAXSEG_CACHE_DIR=""``,
    and before jax 0.10.2, whose CPU loader rejected the programs it had cached on the same
    machine (an error on stderr at every later run; openxla/xla#44565).
    """
    import jax

    if jax.config.jax_compilation_cache_dir is not None or jax.__version_info__ < (0, 10, 2):
        return
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "jaxseg"
    directory = os.environ.get("JAXSEG_CACHE_DIR", str(default))
    if not directory:
        return
    try:
        Path(directory).mkdir(parents=True, exist_ok=True)
    except OSError:
        return  # a read-only home: run without the cache
    jax.config.update("jax_compilation_cache_dir", directory)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)


def run() -> None:
    """The console command: :func:`main`, then the process ends at once.

    Every result is written and flushed by then; what is skipped is the interpreter's teardown
    of JAX (its CPU client), a noticeable part of a short command's time even after a trivial
    program (``benchmarks/README.md``, choices measured once).
    """
    status = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # a closed pipe or stream: nothing to flush
            pass
    os._exit(status)


def _out_of_memory(args: argparse.Namespace) -> str:
    """The out-of-memory error; where a bootstrap ran, it names ``--samples`` too (each
    replicate is kept: a billion of them exhaust the memory whatever the number of videos)."""
    fewer = f"fewer {'queries' if args.command == 'grounding' else 'videos'} at once"
    if args.command in ("evaluate", "compare"):
        fewer += " (--split)"
    if getattr(args, "confidence", None) is not None:  # compare's has a default
        fewer += f" or fewer bootstrap replicates (--samples, now {resampling(args)[0]:,})"
    return f"out of memory; evaluate {fewer}, or on a machine with more memory"


def _out_of_device_memory(error: Exception) -> bool:
    """Whether ``error`` is XLA failing to allocate (host or accelerator memory)."""
    text = str(error)
    return type(error).__name__ in ("XlaRuntimeError", "JaxRuntimeError") and (
        "RESOURCE_EXHAUSTED" in text or "Out of memory" in text
    )


def _os_error(error: OSError) -> str:
    """``error`` as one line: the file it names (if any) and the reason."""
    reason = error.strerror or str(error)
    if error.filename is None:
        return f"cannot read or write: {reason}"
    return f"{error.filename}: {reason}"


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the ``jaxseg`` command; returns the exit status (0 ok, 2 bad input or arguments).

    Args:
      argv: the command's arguments (``["evaluate", "--demo"]``); None: ``sys.argv[1:]``.

    Returns:
      0 on success, 2 for bad input (one ``jaxseg: error:`` line on stderr, no traceback),
      130 when interrupted. Arguments argparse refuses exit with its ``SystemExit(2)``.

    >>> main(["evaluate", "--demo"])
    28 videos, 16,979 frames, 11 classes; background: background
    <BLANKLINE>
    Results (%)
    name    Acc   Edit  F1@10  F1@25  F1@50
    all   79.60  72.14  80.63  80.23  74.36
    0
    """
    from jaxseg._host import cli_detection, cli_grounding

    args = build_parser().parse_args(argv)
    commands = {
        "evaluate": _run_evaluate,
        "compare": _run_compare,
        "detection": cli_detection.run,
        "grounding": cli_grounding.run,
    }
    try:
        if args.command in ("detection", "grounding"):  # the others load JAX while reading
            _load_jax()
        return commands[args.command](args)
    except InputError as error:
        print(f"jaxseg: error: {error}", file=sys.stderr)
        return USER_ERROR
    except ImportError as error:
        if "matplotlib" not in str(error):
            raise
        print(f"jaxseg: error: {error}", file=sys.stderr)
        return USER_ERROR
    except BrokenPipeError:  # e.g. `jaxseg evaluate ... | head`
        sys.stderr.close()
        return 0
    except OSError as error:  # a file the checks could not foresee, or a full disk
        print(f"jaxseg: error: {_os_error(error)}", file=sys.stderr)
        return USER_ERROR
    except MemoryError:
        print(f"jaxseg: error: {_out_of_memory(args)}", file=sys.stderr)
        return USER_ERROR
    except Exception as error:  # XLA's allocation failures (RESOURCE_EXHAUSTED)
        if not _out_of_device_memory(error):
            raise
        print(f"jaxseg: error: {_out_of_memory(args)}", file=sys.stderr)
        return USER_ERROR
    except KeyboardInterrupt:
        print("jaxseg: interrupted", file=sys.stderr)
        return INTERRUPTED
