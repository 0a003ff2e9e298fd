"""Benchmark: the global (CTE) unsupervised protocol on a Breakfast-sized set.

1712 videos of 300-6000 frames (``benchmarks/_data.py``'s Breakfast-shaped set), 48 classes;
the predictions' labels are turned into 48 cluster ids by a fixed random permutation, so the
matching has to recover it. Baselines, written here in the reference's style (``ute``'s
``Accuracy`` and ``F1Score``, not copied), on the videos concatenated:

- **matching**: ``np.unique`` of both label sets, the square voting table filled by a numpy
  comparison per (class, cluster) pair, ``scipy.optimize.linear_sum_assignment``, then MoF
  and IoU by a loop over the classes (what CTE's ``Accuracy.mof`` does);
- **matching + sampled F1**: the same, plus CTE's F1 (15 frames drawn per ground-truth run,
  50 repetitions, numpy's legacy generator).

jaxseg is ``jax.jit(global_hungarian_scores)`` on padded ``[1712, 6000]`` int32 arrays with a
mask (warm; compilation reported apart): it computes MoF, IoU and the F1 limit in one call.
Each round times both baselines once and jaxseg best of ``--repeats``; the ratio reported is
the median over ``--rounds`` of the per-round ratios. Before timing, MoF and IoU are checked
against the baseline (1e-6) and F1 against its deterministic limit's neighbourhood.

Run: ``python benchmarks/unsupervised.py [--repeats N] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import functools
import time

import jax
import numpy as np
from _data import breakfast_like, machine_summary, pad
from scipy.optimize import linear_sum_assignment

from jaxseg import metrics

CLASSES = CLUSTERS = 48


def cluster_dataset(seed=0):
    targets, predictions = breakfast_like(seed)
    permutation = np.random.default_rng(seed).permutation(CLUSTERS)
    return targets, [permutation[p].astype(np.int32) for p in predictions]


def baseline_matching(gt, pred):
    """CTE-style: square voting table by comparisons, LSA, MoF and IoU by class loops."""
    gt_labels, pr_labels = np.unique(gt), np.unique(pred)
    size = max(len(gt_labels), len(pr_labels))
    votes = np.zeros((size, size))
    for i, g in enumerate(gt_labels):
        in_class = pred[gt == g]
        for j, c in enumerate(pr_labels):
            votes[i, j] = np.sum(in_class == c, dtype=float)
    rows, cols = linear_sum_assignment(-votes)
    gt2cluster = {
        gt_labels[i]: pr_labels[j]
        for i, j in zip(rows, cols)
        if i < len(gt_labels) and j < len(pr_labels)
    }
    correct, iou = 0.0, 0.0
    for g in gt_labels:
        in_gt = gt == g
        in_pred = pred == gt2cluster.get(g, -10)
        tp = np.sum(pred[in_gt] == gt2cluster.get(g, -10), dtype=float)
        correct += tp
        iou += tp / np.sum(in_gt | in_pred)
    return gt2cluster, correct / len(gt), iou / len(gt_labels)


def baseline_sampled_f1(gt, pred, gt2cluster, k, n_videos, seed=0):
    """CTE-style F1: runs of the concatenation (the last never added), 15 draws, 50 times."""
    mapped = pred.copy()
    for g, c in gt2cluster.items():
        mapped[pred == c] = g
    cuts = np.flatnonzero(gt[1:] != gt[:-1]) + 1
    starts, ends = np.concatenate([[0], cuts[:-1]]), cuts - 1
    rng = np.random.RandomState(seed)
    scores = []
    for _ in range(50):
        n = 0.0
        for lo, hi in zip(starts, ends):
            idx = rng.randint(lo, hi + 1, 15)
            n += np.sum(gt[idx] == mapped[idx]) / 15
        p, r = n / (k * n_videos), n / len(starts)
        scores.append(2 * p * r / (p + r + 1e-8))
    return float(np.mean(scores))


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5, help="jaxseg calls per round (best)")
    parser.add_argument("--rounds", type=int, default=3, help="baseline + jaxseg rounds")
    args = parser.parse_args()
    print(machine_summary())
    targets, predictions = cluster_dataset()
    gt_flat, pred_flat = np.concatenate(targets), np.concatenate(predictions)
    gt, lengths = pad(targets)
    pred, _ = pad(predictions)
    mask = np.arange(gt.shape[1])[None, :] < lengths[:, None]
    print(
        f"set: {len(targets)} videos, {gt_flat.size:,} frames (padded {gt.size:,}), "
        f"{CLASSES} classes, {CLUSTERS} clusters; {args.rounds} rounds"
    )
    score = jax.jit(
        lambda g, p, m: metrics.global_hungarian_scores(
            g, p, mask=m, num_classes=CLASSES, num_clusters=CLUSTERS, segments_per_video=CLUSTERS
        )
    )
    gt, pred, mask = (jax.device_put(x) for x in (gt, pred, mask))
    compile_time, ours = timed(lambda: jax.block_until_ready(score(gt, pred, mask)))
    gt2cluster, mof, iou = baseline_matching(gt_flat, pred_flat)
    assert abs(float(ours["mof"]) - mof) < 1e-6 and abs(float(ours["iou"]) - iou) < 1e-6
    ratios = {"matching": [], "matching + sampled F1": []}
    times = {"matching": [], "matching + sampled F1": [], "jaxseg": []}
    for _ in range(args.rounds):
        t_match, (gt2cluster, _, _) = timed(lambda: baseline_matching(gt_flat, pred_flat))
        sample = functools.partial(baseline_sampled_f1, gt_flat, pred_flat, gt2cluster)
        t_f1, f1 = timed(lambda: sample(CLUSTERS, len(targets)))  # noqa: B023 (called at once)
        ours_t = min(
            timed(lambda: jax.block_until_ready(score(gt, pred, mask)))[0]
            for _ in range(args.repeats)
        )
        times["matching"].append(t_match)
        times["matching + sampled F1"].append(t_match + t_f1)
        times["jaxseg"].append(ours_t)
        ratios["matching"].append(t_match / ours_t)
        ratios["matching + sampled F1"].append((t_match + t_f1) / ours_t)
    print(f"F1: sampled (seed 0) {f1:.6f}, jaxseg's deterministic limit {float(ours['f1']):.6f}")
    print(f"jaxseg first call (trace + compile + run): {compile_time:.2f} s")
    print(
        f"jaxseg jit(global_hungarian_scores), best of {args.repeats}: "
        f"median {1e3 * np.median(times['jaxseg']):.1f} ms "
        f"[{1e3 * min(times['jaxseg']):.1f}-{1e3 * max(times['jaxseg']):.1f}]"
    )
    for name, values in ratios.items():
        print(
            f"baseline {name}: median {np.median(times[name]):.3f} s; ratio "
            f"x{np.median(values):.0f} [x{min(values):.0f}-x{max(values):.0f}] (target x20)"
        )


if __name__ == "__main__":
    main()
