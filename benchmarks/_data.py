"""Synthetic action-segmentation datasets, a per-video pure-Python baseline, and timed
rounds of entry points against a baseline.

The baseline follows the reference scripts' algorithms (per-video loops in Python: run-length
segments, Levenshtein DP, MS-TCN F1 matching); it is written here, not copied.
"""

from __future__ import annotations

import os
import platform
import time

import numpy as np


def machine_summary() -> str:
    import jax

    try:
        import jaxlib

        jaxlib_version = jaxlib.__version__
    except (ImportError, AttributeError):  # pragma: no cover
        jaxlib_version = "?"
    return (
        f"machine: {platform.machine()} {platform.processor() or ''}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, numpy {np.__version__}, "
        f"jax {jax.__version__}, jaxlib {jaxlib_version}, backend {jax.default_backend()}"
    )


def _best_of(fn, repeats):
    import jax

    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return min(times), result


def rounds_arguments(description: str):
    """``--repeats`` and ``--rounds`` from the command line of a :func:`timed_rounds`
    benchmark; prints the machine and starts the backend (not part of any first call)."""
    import argparse

    import jax
    import jax.numpy as jnp

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--repeats", type=int, default=10, help="best of N, per round")
    parser.add_argument("--rounds", type=int, default=5, help="back-to-back rounds")
    args = parser.parse_args()
    print(machine_summary())
    jax.block_until_ready(jnp.zeros(1))
    return args


def timed_rounds(entry_points: dict, agree, *, repeats: int, rounds: int) -> None:
    """Times ``entry_points`` (label -> function; the first is the baseline) in ``rounds``
    back-to-back rounds of best of ``repeats``, after one first call each; checks that
    ``agree(result, baseline_result)`` for every other entry point in every round; prints
    each median time with its range, the median of the rounds' ratios to the baseline and
    the first call."""
    import jax

    first_call = {}
    for label, fn in entry_points.items():
        start = time.perf_counter()
        jax.block_until_ready(fn())
        first_call[label] = time.perf_counter() - start
    times = {label: [] for label in entry_points}
    baseline_label = next(iter(entry_points))
    for _ in range(rounds):
        results = {}
        for label, fn in entry_points.items():
            seconds, results[label] = _best_of(fn, repeats)
            times[label].append(seconds)
        for label, result in results.items():
            if not agree(result, results[baseline_label]):
                raise AssertionError(f"{label} differs from {baseline_label}")
    baseline = np.array(times[baseline_label])
    width = max(map(len, entry_points))
    for label, seconds in times.items():
        ours = np.array(seconds)
        print(
            f"  {label:{width}s} {np.median(ours) * 1e3:7.1f} ms"
            f" [{ours.min() * 1e3:.1f}-{ours.max() * 1e3:.1f}]"
            f"  x{np.median(baseline / ours):.2f} the baseline"
            f"  (first call {first_call[label]:.2f} s)"
        )


def _segment_lengths(rng, total, count):
    cuts = np.sort(rng.choice(np.arange(1, total), size=count - 1, replace=False))
    return np.diff(np.concatenate([[0], cuts, [total]]))


def _video(rng, length, num_classes, n_segments, n_spurious, max_spurious_length):
    n_segments = min(n_segments, length)
    labels = rng.integers(0, num_classes, size=n_segments)
    segment = np.repeat(np.arange(n_segments), _segment_lengths(rng, length, n_segments))
    target = labels[segment]
    prediction = target.copy()
    # Jittered boundaries: shift each boundary by up to 5% of the video.
    boundaries = np.flatnonzero(np.diff(target)) + 1
    for b in boundaries:
        shift = int(rng.integers(-length // 40, length // 40 + 1))
        lo, hi = sorted((b, int(np.clip(b + shift, 1, length - 1))))
        prediction[lo:hi] = target[b - 1] if shift > 0 else target[b]
    # Flipped labels on a few whole segments.
    for b in rng.choice(n_segments, size=max(1, n_segments // 8), replace=False):
        prediction[segment == b] = rng.integers(0, num_classes)
    # Spurious short segments.
    for _ in range(n_spurious):
        start = int(rng.integers(0, length))
        stop = min(length, start + int(rng.integers(1, max_spurious_length + 1)))
        prediction[start:stop] = rng.integers(0, num_classes)
    return target.astype(np.int32), prediction.astype(np.int32)


def _dataset(seed, videos, lengths, spurious, max_spurious_length):
    """Videos with 48 classes and 3-15 target segments; ``lengths``/``spurious``: ranges."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(videos):
        length = int(rng.integers(lengths[0], lengths[1] + 1))
        segments = int(rng.integers(3, 16))
        n_spurious = int(rng.integers(spurious[0], spurious[1] + 1))
        out.append(_video(rng, length, 48, segments, n_spurious, max_spurious_length))
    return [t for t, _ in out], [p for _, p in out]


def breakfast_like(seed=0, videos=1712):
    """1712 videos of 300-6000 frames, 48 classes, 3-15 target segments, <= 30 spurious."""
    return _dataset(seed, videos, (300, 6000), (0, 30), max_spurious_length=15)


def over_segmented(seed=1, videos=256):
    """256 videos of 2000-6000 frames with 200-600 spurious short segments each."""
    return _dataset(seed, videos, (2000, 6000), (200, 600), max_spurious_length=8)


def pad(videos, dtype=np.int32):
    lengths = np.array([len(v) for v in videos], np.int32)
    out = np.zeros((len(videos), int(lengths.max())), dtype)
    for row, v in enumerate(videos):
        out[row, : len(v)] = v
    return out, lengths


# ---------------------------------------------------------------------------------------
# Pure-Python baseline: the reference scripts' per-video algorithms.


def _runs(labels, background):
    names, starts, ends = [], [], []
    for i, label in enumerate(labels):
        if i == 0 or label != labels[i - 1]:
            if label not in background:
                names.append(label)
                starts.append(i)
            if i > 0 and labels[i - 1] not in background:
                ends.append(i)
    if len(labels) and labels[-1] not in background:
        ends.append(len(labels))
    return names, starts, ends


def _levenshtein(a, b):
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, y in enumerate(b, 1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y))
        previous = current
    return previous[-1]


def _matches(target, prediction, tau):
    t_names, t_starts, t_ends = target
    p_names, p_starts, p_ends = prediction
    used = [False] * len(t_names)
    tp = fp = 0
    for label, s, e in zip(p_names, p_starts, p_ends):
        best, best_iou = -1, -np.inf
        for x, (tl, ts, te) in enumerate(zip(t_names, t_starts, t_ends)):
            iou = (min(e, te) - max(s, ts)) / (max(e, te) - min(s, ts)) if tl == label else 0.0
            if iou > best_iou:
                best, best_iou = x, iou
        if best >= 0 and best_iou >= tau and not used[best]:
            used[best] = True
            tp += 1
        else:
            fp += 1
    return tp, fp, len(t_names) - tp


def _dataset_numbers(correct, total, edit_sum, videos, counts):
    """Accuracy, mean edit and F1@tau from summed counts (``counts [K, 3]``: tp, fp, fn)."""
    tp, fp, fn = counts.T
    f1 = np.where(tp > 0, 2 * tp / np.maximum(2 * tp + fp + fn, 1), 0.0)
    return correct / total, edit_sum / videos, f1


def baseline(targets, predictions, background=(), overlaps=(0.1, 0.25, 0.5)):
    """Dataset accuracy, edit and F1@tau with per-video Python loops (fractions)."""
    correct = total = 0
    edit = 0.0
    counts = np.zeros((len(overlaps), 3))
    for t, p in zip(targets, predictions):
        t, p = t.tolist(), p.tolist()
        correct += sum(a == b for a, b in zip(t, p))
        total += len(t)
        ts, ps = _runs(t, background), _runs(p, background)
        longest = max(len(ts[0]), len(ps[0]))
        edit += 1.0 - _levenshtein(ps[0], ts[0]) / longest if longest else 1.0
        for k, tau in enumerate(overlaps):
            counts[k] += _matches(ts, ps, tau)
    return _dataset_numbers(correct, total, edit, len(targets), counts)


# ---------------------------------------------------------------------------------------
# Reference-script-shaped baseline: the same algorithms organised the way MS-TCN's eval.py
# organises them (and ASFormer/DiffAct copy): segments are re-extracted by a per-frame loop
# for the edit score and again for every overlap threshold, the Levenshtein DP fills a numpy
# float matrix element by element, and each predicted segment's IoUs against all targets are
# numpy vectors. Written here from REFERENCE.md section 1, not copied.


def _segments_per_frame(labels, background):
    names, starts, ends = [], [], []
    previous = labels[0]
    if previous not in background:
        names.append(previous)
        starts.append(0)
    for i in range(len(labels)):
        if labels[i] != previous:
            if labels[i] not in background:
                names.append(labels[i])
                starts.append(i)
            if previous not in background:
                ends.append(i)
            previous = labels[i]
    if previous not in background:
        ends.append(len(labels))
    return names, starts, ends


def _levenshtein_matrix(p, y):
    table = np.zeros((len(p) + 1, len(y) + 1), np.float64)
    for i in range(len(p) + 1):
        table[i, 0] = i
    for j in range(len(y) + 1):
        table[0, j] = j
    for j in range(1, len(y) + 1):
        for i in range(1, len(p) + 1):
            if y[j - 1] == p[i - 1]:
                table[i, j] = table[i - 1, j - 1]
            else:
                table[i, j] = min(table[i - 1, j] + 1, table[i, j - 1] + 1, table[i - 1, j - 1] + 1)
    return table[-1, -1]


def _edit_of(recognized, truth, background):
    p, _, _ = _segments_per_frame(recognized, background)
    y, _, _ = _segments_per_frame(truth, background)
    longest = max(len(p), len(y))
    return (1.0 - _levenshtein_matrix(p, y) / longest) if longest else 1.0


def _f_score_of(recognized, truth, overlap, background):
    p_label, p_start, p_end = _segments_per_frame(recognized, background)
    y_label, y_start, y_end = _segments_per_frame(truth, background)
    y_start, y_end = np.array(y_start), np.array(y_end)
    tp = fp = 0
    hits = np.zeros(len(y_label))
    for j in range(len(p_label)):
        intersection = np.minimum(p_end[j], y_end) - np.maximum(p_start[j], y_start)
        union = np.maximum(p_end[j], y_end) - np.minimum(p_start[j], y_start)
        iou = (1.0 * intersection / union) * np.array([p_label[j] == y for y in y_label])
        best = np.array(iou).argmax() if len(y_label) else 0
        if len(y_label) and iou[best] >= overlap and not hits[best]:
            tp += 1
            hits[best] = 1
        else:
            fp += 1
    return tp, fp, len(y_label) - hits.sum()


def reference_style_baseline(targets, predictions, background=(), overlaps=(0.1, 0.25, 0.5)):
    """Dataset accuracy, edit and F1@tau computed the way the reference scripts compute them."""
    correct = total = 0
    edit = 0.0
    counts = np.zeros((len(overlaps), 3))
    for t, p in zip(targets, predictions):
        t, p = t.tolist(), p.tolist()
        for i in range(len(t)):
            total += 1
            if t[i] == p[i]:
                correct += 1
        edit += _edit_of(p, t, background)
        for k, tau in enumerate(overlaps):
            counts[k] += _f_score_of(p, t, tau, background)
    return _dataset_numbers(correct, total, edit, len(targets), counts)
