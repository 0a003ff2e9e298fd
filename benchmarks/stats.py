"""Speed of bootstrap intervals: 10,000 replicates of accuracy + edit + F1@{10,25,50}.

Breakfast-shaped set: 1712 videos, 5.36 M frames, 48 classes. jaxseg computes the per-video
statistics once (``segmentation_statistics``), then every replicate is a weighted sum
(``bootstrap(statistics, segmentation_metrics)``, jit-compiled). Baselines, measured in the
same run:

* pure Python, as the reference scripts evaluate: for each replicate, draw 1712 videos with
  replacement and recompute accuracy, edit and F1 from the frame labels with per-video Python
  loops (run-length encoding, Levenshtein DP, IoU matching). Timed for ``--replicates``
  replicates (default 100) and extrapolated linearly to 10,000.
* numpy over the same precomputed per-video statistics: 10,000 multinomial weight vectors
  (``integers`` + ``bincount``) and float64 matrix products (the weighted-sum idea without
  JAX), in chunks of 1000.

    python benchmarks/stats.py [--replicates 100] [--repeats 5] [--quick]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import statistics
import time

import jax
import numpy as np

from jaxseg import stats

VIDEOS, FRAMES, CLASSES = 1712, 5_360_000, 48
OVERLAPS = (0.1, 0.25, 0.5)
SAMPLES = 10_000


def machine():
    return (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"{platform.system()}; python {platform.python_version()}, jax {jax.__version__}, "
        f"jaxlib {importlib.metadata.version('jaxlib')}, numpy {np.__version__}; "
        f"backend {jax.default_backend()}"
    )


def breakfast_shaped(rng):
    """Per-video ``(targets, predictions)`` int32 arrays: ~6 target segments per video and
    predictions with shifted boundaries, substituted segments and short spurious blips."""
    lengths = rng.lognormal(0.0, 0.6, VIDEOS)
    lengths = np.maximum((lengths / lengths.sum() * FRAMES).astype(int), 60)
    videos = []
    for n in lengths:
        cuts = np.sort(
            rng.choice(np.arange(1, n), size=min(rng.poisson(5) + 1, n - 1), replace=False)
        )
        bounds = np.concatenate([[0], cuts, [n]])
        labels = rng.integers(0, CLASSES, len(bounds) - 1)
        target = np.repeat(labels, np.diff(bounds)).astype(np.int32)
        shift = rng.integers(-n // 50 - 1, n // 50 + 2, len(cuts))
        moved = np.clip(cuts + shift, 1, n - 1)
        predicted = np.where(
            rng.random(len(labels)) < 0.2, rng.integers(0, CLASSES, len(labels)), labels
        )
        prediction = np.repeat(predicted, np.diff(np.concatenate([[0], np.sort(moved), [n]])))
        for _ in range(rng.poisson(4)):
            start = int(rng.integers(0, n))
            prediction[start : start + int(rng.integers(1, 30))] = rng.integers(CLASSES)
        videos.append((target, prediction.astype(np.int32)))
    return videos


# ---------------------------------------------------------------------------------------------
# Pure-Python per-video evaluation (the way the reference scripts compute it).
# ---------------------------------------------------------------------------------------------
def python_segments(labels):
    """``(labels, starts, ends)`` of the runs of a label list, by a loop over frames."""
    out_labels, starts, ends = [labels[0]], [0], []
    for i in range(1, len(labels)):
        if labels[i] != labels[i - 1]:
            out_labels.append(labels[i])
            starts.append(i)
            ends.append(i)
    ends.append(len(labels))
    return out_labels, starts, ends


def python_levenshtein(p, y):
    row = list(range(len(y) + 1))
    for i in range(1, len(p) + 1):
        previous, row[0] = row[0], i
        for j in range(1, len(y) + 1):
            current = min(row[j] + 1, row[j - 1] + 1, previous + (p[i - 1] != y[j - 1]))
            previous, row[j] = row[j], current
    return row[-1]


def python_video(target, prediction):
    """``(frames, correct, edit score, tp, fp, fn)`` of one video from its frame labels."""
    target, prediction = target.tolist(), prediction.tolist()
    correct = 0
    for a, b in zip(target, prediction, strict=True):
        correct += a == b
    y_labels, y_starts, y_ends = python_segments(target)
    p_labels, p_starts, p_ends = python_segments(prediction)
    longest = max(len(y_labels), len(p_labels))
    edit = 1.0 - python_levenshtein(p_labels, y_labels) / longest
    y_starts, y_ends = np.array(y_starts), np.array(y_ends)
    tp, fp = [0] * len(OVERLAPS), [0] * len(OVERLAPS)
    used = [[False] * len(y_labels) for _ in OVERLAPS]
    same = np.array(y_labels)
    for label, start, end in zip(p_labels, p_starts, p_ends, strict=True):
        intersection = np.minimum(end, y_ends) - np.maximum(start, y_starts)
        union = np.maximum(end, y_ends) - np.minimum(start, y_starts)
        iou = intersection / union * (same == label)
        best = int(np.argmax(iou))
        for k, tau in enumerate(OVERLAPS):
            if iou[best] >= tau and not used[k][best]:
                tp[k] += 1
                used[k][best] = True
            else:
                fp[k] += 1
    fn = [len(y_labels) - t for t in tp]
    return len(target), correct, edit, tp, fp, fn


def python_dataset(rows):
    frames = sum(r[0] for r in rows)
    correct = sum(r[1] for r in rows)
    tp, fp, fn = (np.sum([r[i] for r in rows], axis=0) for i in (3, 4, 5))
    f1 = np.where(2 * tp + fp + fn > 0, 2 * tp / np.maximum(2 * tp + fp + fn, 1), 0.0)
    return correct / frames, float(np.mean([r[2] for r in rows])), f1


def python_bootstrap(videos, replicates, rng):
    out = []
    for _ in range(replicates):
        drawn = rng.integers(0, len(videos), len(videos))
        out.append(python_dataset([python_video(*videos[i]) for i in drawn]))
    return out


# ---------------------------------------------------------------------------------------------
# numpy weighted sums over the same per-video statistics.
# ---------------------------------------------------------------------------------------------
def numpy_bootstrap(design, edit, rng, samples, chunk=1000):
    """Replicates as float64 matrix products (exact for these integer totals, < 2^53)."""
    n = design.shape[0]
    design = np.concatenate([design, edit[:, None]], axis=1).astype(np.float64)
    k = len(OVERLAPS)
    out = []
    for start in range(0, samples, chunk):
        rows = min(chunk, samples - start)
        drawn = rng.integers(0, n, (rows, n)) + n * np.arange(rows)[:, None]
        weights = np.bincount(drawn.ravel(), minlength=rows * n).reshape(rows, n)
        totals = weights @ design
        tp, fp, fn = (totals[:, 2 + i * k : 2 + (i + 1) * k] for i in range(3))
        out.append(
            (
                totals[:, 1] / totals[:, 0],
                totals[:, -1] / n,
                2 * tp / np.maximum(2 * tp + fp + fn, 1),
            )
        )
    return out


def timed(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--replicates",
        type=int,
        default=100,
        help="replicates of the pure-Python baseline (default 100)",
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 baseline replicates")
    args = parser.parse_args()
    replicates = 2 if args.quick else args.replicates
    repeats = 1 if args.quick else args.repeats
    print(machine())

    rng = np.random.default_rng(0)
    videos = breakfast_shaped(rng)
    lengths = np.array([len(t) for t, _ in videos])
    print(
        f"{len(videos)} videos, {lengths.sum():,} frames (max {lengths.max()}), {CLASSES} classes"
    )

    # Per-video statistics, once (padded batch, default arguments).
    targets = np.full((VIDEOS, lengths.max()), -1, np.int32)
    predictions = np.full_like(targets, -1)
    for i, (t, p) in enumerate(videos):
        targets[i, : len(t)], predictions[i, : len(p)] = t, p
    mask = targets >= 0
    per_video = jax.jit(
        lambda t, p, m: stats.segmentation_statistics(t, p, mask=m, iou_thresholds=OVERLAPS)
    )
    start = time.perf_counter()
    s = jax.block_until_ready(per_video(targets, predictions, mask))
    first = time.perf_counter() - start
    stats_time, _ = timed(lambda: per_video(targets, predictions, mask), repeats)
    print(
        f"per-video statistics (jaxseg, default arguments): {stats_time * 1e3:.0f} ms "
        f"(first call with compilation {first:.1f} s)"
    )

    start = time.perf_counter()
    rows = [python_video(t, p) for t, p in videos]
    python_once = time.perf_counter() - start
    assert np.array_equal([r[1] for r in rows], np.asarray(s.correct))
    assert np.array_equal([r[3] for r in rows], np.asarray(s.tp))
    metrics = stats.segmentation_metrics(s)
    acc, edit, f1 = python_dataset(rows)
    np.testing.assert_allclose(
        [float(metrics["accuracy"]), float(metrics["edit"])], [acc, edit], rtol=1e-6
    )
    np.testing.assert_allclose(np.asarray(metrics["f1"]), f1, rtol=1e-6)
    print(f"one pure-Python evaluation: {python_once:.2f} s (per-video values equal jaxseg's)")

    run = jax.jit(
        lambda s, key: stats.bootstrap(s, stats.segmentation_metrics, key=key, num_samples=SAMPLES)
    )
    key = jax.random.key(0)
    start = time.perf_counter()
    result = jax.block_until_ready(run(s, key))
    compile_time = time.perf_counter() - start
    jax_median, jax_best = timed(lambda: run(s, key), repeats)
    print(
        f"jaxseg bootstrap, {SAMPLES:,} replicates: median {jax_median * 1e3:.0f} ms, best "
        f"{jax_best * 1e3:.0f} ms (first call with compilation {compile_time:.1f} s)"
    )
    print(
        "  95% intervals: accuracy [{:.4f}, {:.4f}], edit [{:.4f}, {:.4f}], F1@50 [{:.4f}, "
        "{:.4f}]".format(
            float(result.lower["accuracy"]),
            float(result.upper["accuracy"]),
            float(result.lower["edit"]),
            float(result.upper["edit"]),
            float(result.lower["f1"][2]),
            float(result.upper["f1"][2]),
        )
    )

    edit_scores = np.array([r[2] for r in rows])
    design = np.concatenate(
        [
            np.stack([[r[0] for r in rows], [r[1] for r in rows]], 1),
            *(np.array([r[i] for r in rows]) for i in (3, 4, 5)),
        ],
        1,
    )
    numpy_median, _ = timed(
        lambda: numpy_bootstrap(design, edit_scores, np.random.default_rng(1), SAMPLES), repeats
    )
    print(
        f"numpy weighted sums over the same statistics, {SAMPLES:,} replicates: "
        f"{numpy_median * 1e3:.0f} ms"
    )

    start = time.perf_counter()
    python_bootstrap(videos, replicates, np.random.default_rng(2))
    python_time = time.perf_counter() - start
    extrapolated = python_time / replicates * SAMPLES
    print(
        f"pure-Python re-evaluation, {replicates} replicates: {python_time:.1f} s -> "
        f"{SAMPLES:,} replicates extrapolated: {extrapolated:,.0f} s"
    )

    print("\n| method | 10,000 replicates | ratio to jaxseg |")
    print("|---|---|---|")
    print(f"| jaxseg `bootstrap` (jit, median of {repeats}) | {jax_median:.3f} s | 1 |")
    print(
        f"| numpy weighted sums, same per-video statistics | {numpy_median:.3f} s | "
        f"{numpy_median / jax_median:.1f}x |"
    )
    print(
        f"| pure-Python re-evaluation ({replicates} replicates, extrapolated) | "
        f"{extrapolated:,.0f} s | {extrapolated / jax_median:,.0f}x |"
    )
    print(
        f"\nper-video statistics once: jaxseg {stats_time:.3f} s, pure Python "
        f"{python_once:.2f} s; bootstrap compile {compile_time:.1f} s"
    )


if __name__ == "__main__":
    main()
