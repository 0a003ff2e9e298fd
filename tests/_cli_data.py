"""Builds action-segmentation datasets as files (MS-TCN layout) for the CLI and io tests, and
the windows of skewed ActivityNet-style files."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def write_mapping(path: Path, class_names) -> Path:
    path.write_text("".join(f"{i} {name}\n" for i, name in enumerate(class_names)))
    return path


def write_labels(path: Path, labels, class_names, style: str) -> Path:
    """Writes one video's labels: ``lines``, ``mstcn`` (header + one line), ``npy`` (class
    indices) or ``scores`` (``.npy`` float ``[T, C]`` whose argmax is the label)."""
    labels = np.asarray(labels)
    if style == "scores":
        path = path.with_suffix(".npy")
        scores = np.random.default_rng(labels.size).random((labels.size, len(class_names)))
        scores[np.arange(labels.size), labels] += 1.0
        np.save(path, scores.astype(np.float32))
    elif style == "npy":
        path = path.with_suffix(".npy")
        np.save(path, labels.astype(np.int64))
    elif style == "mstcn":
        words = " ".join(class_names[i] for i in labels)
        path.write_text("### Frame level recognition: ###\n" + words + "\n")
    else:
        path.write_text("".join(f"{class_names[i]}\n" for i in labels))
    return path


def write_dataset(
    root: Path,
    videos: dict,
    class_names,
    *,
    truth_style: str = "lines",
    prediction_style: str = "mstcn",
    prediction_suffix: str = "",
    split=None,
) -> tuple[Path, Path]:
    """Writes ``videos`` (name -> (target, prediction) index arrays) below ``root``.

    Layout: ``root/mapping.txt``, ``root/groundTruth/<video>.txt`` and
    ``root/predictions/<video><prediction_suffix>`` (MS-TCN writes no suffix), plus
    ``root/split.bundle`` when ``split`` lists videos. Returns the two folders.
    """
    truth_dir, prediction_dir = root / "groundTruth", root / "predictions"
    truth_dir.mkdir(parents=True)
    prediction_dir.mkdir(parents=True)
    write_mapping(root / "mapping.txt", class_names)
    for name, (target, prediction) in videos.items():
        write_labels(truth_dir / f"{name}.txt", target, class_names, truth_style)
        write_labels(
            prediction_dir / f"{name}{prediction_suffix}", prediction, class_names,
            prediction_style,
        )  # fmt: skip
    if split is not None:
        (root / "split.bundle").write_text("".join(f"{name}.txt\n" for name in split))
    return truth_dir, prediction_dir


def golden_videos(data, exclude=()) -> dict:
    """The golden segmentation arrays (segmentation.npz) as name -> (target, prediction)."""
    videos = {}
    for name, length, target, prediction in zip(
        data["names"], data["lengths"], data["gt"], data["pred"], strict=True
    ):
        if str(name) not in exclude:
            videos[str(name)] = (target[:length], prediction[:length])
    return videos


def random_videos(seed: int, count: int, num_classes: int, max_length: int = 200) -> dict:
    """Random piecewise-constant videos (runs of 1..30 frames) with noisy predictions."""
    rng = np.random.default_rng(seed)
    videos = {}
    for v in range(count):
        length = int(rng.integers(1, max_length))
        runs = rng.integers(1, 30, size=length)
        target = np.repeat(rng.integers(0, num_classes, size=length), runs)[:length]
        prediction = target.copy()
        flips = rng.random(length) < 0.15
        prediction[flips] = rng.integers(0, num_classes, size=int(flips.sum()))
        videos[f"video_{v:02d}"] = (target, prediction)
    return videos


def window_near(rng, annotations) -> list[float]:
    """``[start, end]`` seconds: most often an annotation's segment with jittered ends (a
    likely match), else a random window in [0, 120]."""
    if annotations and rng.random() < 0.6:
        near = annotations[int(rng.integers(0, len(annotations)))]
        start, end = (x + float(rng.normal(0, 2)) for x in near["segment"])
        return [min(start, end), max(start, end)]
    start = float(rng.uniform(0, 100))
    return [start, start + float(rng.uniform(0, 20))]
