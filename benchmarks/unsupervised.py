"""Benchmark: the global (CTE) unsupervised protocol on a Breakfast-sized set.

1712 videos of 300-6000 frames (``benchmarks/_data.py``'s Breakfast-shaped set), 48 classes;
the predictions' labels are turned into 48 cluster ids by a fixed random permutation, so the
matching has to recover it. Baselines, written here (not copied), on the videos
concatenated, checked against jaxseg (MoF and IoU to 1e-6) before timing:

- **reference-style matching**: organised as CTE's ``Accuracy.mof`` organises it
  (``np.unique`` of the predictions again for every class, the class's predictions selected
  again for every (class, cluster) pair), the square voting table,
  ``scipy.optimize.linear_sum_assignment``, then MoF and IoU by a loop over the classes;
- **lean matching**: the same algorithm with the label sets and each class's predictions
  computed once (several times faster than the reference style);
- each of them **+ sampled F1**: CTE's F1 (15 frames drawn per ground-truth run, 50
  repetitions, numpy's legacy generator), the reference's cost of the whole protocol.

jaxseg is ``jax.jit(global_hungarian_scores)`` on padded ``[1712, 6000]`` int32 arrays with a
mask (warm; compilation reported apart), with ``f1=False`` (MoF and IoU, against the
matching baselines) and at its default (MoF, IoU and the F1 limit, against the baselines
with sampled F1). Each round times every baseline once and jaxseg best of ``--repeats``; the
ratio reported is the median over ``--rounds`` of the per-round ratios. A row times
``metrics.contingency_table`` (one table per video) against ``np.bincount`` per video.

A last row times the per-video protocol (TW-FINCH), ``metrics.per_video_hungarian_scores``,
on per-video clusterings: each video's predictions relabelled into as many clusters as the
video has target labels (TW-FINCH clusters each video into its activity's number of
actions), a predicted label that is one of the video's target labels going to that label's
cluster (a random permutation per video), any other to a random one of them. Baseline,
written here: per video, the table of its clusters (sorted) against the target values
``0 .. max``, ``scipy.optimize.linear_sum_assignment``, then MoF, IoU (over the number of
clusters) and macro F1 over the labels of the targets and the mapped predictions, checked
against jaxseg (1e-6, means over videos) before timing.

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


def _assignment(votes, gt_labels, pr_labels) -> dict:
    """Each class's cluster under the maximum-vote one-to-one matching (scipy)."""
    rows, cols = linear_sum_assignment(-votes)
    return {
        gt_labels[i]: pr_labels[j]
        for i, j in zip(rows, cols)
        if i < len(gt_labels) and j < len(pr_labels)
    }


def reference_style_matching(gt, pred):
    """Organised as CTE's ``Accuracy.mof`` organises it: the predicted label set recomputed
    for every class, the predictions of the class re-selected for every (class, cluster)
    pair, LSA on the negated square table, then a mask per class for TP and union."""
    gt_labels = np.unique(gt)
    size = max(len(gt_labels), len(np.unique(pred)))
    votes = np.zeros((size, size))
    for i, g in enumerate(gt_labels):
        in_class = gt == g
        for j, c in enumerate(np.unique(pred)):
            votes[i, j] = np.sum(pred[in_class] == c, dtype=float)
    pr_labels = np.unique(pred)
    gt2cluster = _assignment(votes, gt_labels, pr_labels)
    correct, iou = 0.0, 0.0
    for g in np.unique(gt):
        in_class = gt == g
        cluster = gt2cluster.get(g, -10)
        tp = np.sum(pred[in_class] == cluster, dtype=float)
        correct += tp
        iou += tp / np.sum(in_class | (pred == cluster))
    return gt2cluster, correct / len(gt), iou / len(gt_labels)


def lean_matching(gt, pred):
    """The same with the label sets and each class's predictions computed once."""
    gt_labels, pr_labels = np.unique(gt), np.unique(pred)
    size = max(len(gt_labels), len(pr_labels))
    votes = np.zeros((size, size))
    for i, g in enumerate(gt_labels):
        in_class = pred[gt == g]
        for j, c in enumerate(pr_labels):
            votes[i, j] = np.sum(in_class == c, dtype=float)
    gt2cluster = _assignment(votes, gt_labels, pr_labels)
    correct, iou = 0.0, 0.0
    for g in gt_labels:
        in_gt = gt == g
        cluster = gt2cluster.get(g, -10)
        tp = np.sum(pred[in_gt] == cluster, dtype=float)
        correct += tp
        iou += tp / np.sum(in_gt | (pred == cluster))
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


def _jaxseg(with_f1):
    return jax.jit(
        lambda g, p, m: metrics.global_hungarian_scores(
            g,
            p,
            mask=m,
            num_classes=CLASSES,
            num_clusters=CLUSTERS,
            segments_per_video=CLUSTERS,
            f1=with_f1,
        )
    )


def _best(fn, args, repeats):
    return min(timed(lambda: jax.block_until_ready(fn(*args)))[0] for _ in range(repeats))


def numpy_contingency(targets, predictions):
    """Per video ``np.bincount`` of the cells ``K t + p`` (every label of this set is in range)."""
    cells = CLASSES * CLUSTERS
    return np.stack(
        [
            np.bincount(CLUSTERS * t + p, minlength=cells).reshape(CLASSES, CLUSTERS)
            for t, p in zip(targets, predictions)
        ]
    )


def contingency_row(targets, predictions, data, repeats, rounds):
    """``metrics.contingency_table`` (the per-video tables) against per-video ``np.bincount``."""
    table = jax.jit(
        lambda g, p, m: metrics.contingency_table(
            g, p, mask=m, num_classes=CLASSES, num_clusters=CLUSTERS
        )
    )
    first, ours = timed(lambda: jax.block_until_ready(table(*data)))
    assert np.array_equal(np.asarray(ours)[: len(targets)], numpy_contingency(targets, predictions))
    baseline = functools.partial(numpy_contingency, targets, predictions)
    label = "contingency_table per video vs np.bincount per video"
    _print_rounds(label, baseline, table, data, repeats, rounds, first)


def _print_rounds(label, baseline, ours, data, repeats, rounds, first):
    """Times ``baseline()`` once and ``ours(*data)`` best of ``repeats`` in each round, then
    prints the medians and the ratio (median of the rounds', lowest and highest)."""
    base, mine = [], []
    for _ in range(rounds):
        base.append(timed(baseline)[0])
        mine.append(_best(ours, data, repeats))
    ratio = np.array(base) / np.array(mine)
    print(
        f"{label}: baseline {1e3 * np.median(base):.1f} ms, jaxseg {1e3 * np.median(mine):.1f} "
        f"ms (best of {repeats}; first call {first:.2f} s); ratio x{np.median(ratio):.1f} "
        f"[x{ratio.min():.1f}-x{ratio.max():.1f}]"
    )


def per_video_clusters(targets, predictions, seed=0):
    """Each video's predictions as its own clustering (dense ids; module docstring)."""
    rng = np.random.default_rng(seed)
    clustered = []
    for target, prediction in zip(targets, predictions):
        labels = np.unique(target)
        cluster_of = np.full(CLASSES, -1)
        cluster_of[labels] = rng.permutation(len(labels))
        noise = rng.integers(0, len(labels), len(prediction))
        mapped = cluster_of[np.minimum(prediction, CLASSES - 1)]
        clustered.append(np.where(mapped >= 0, mapped, noise).astype(np.int32))
    return clustered


def per_video_baseline(targets, clusterings):
    """Mean MoF, IoU and macro F1 over videos, each video matched on its own (TW-FINCH's
    table: its clusters against the target values 0 .. max; scipy)."""
    scores = []
    for gt, pred in zip(targets, clusterings):
        clusters, rows = np.unique(pred, return_inverse=True)
        width = max(len(clusters), int(gt.max()) + 1)
        table = np.zeros((len(clusters), width))
        np.add.at(table, (rows, gt), 1)
        row, col = linear_sum_assignment(table, maximize=True)
        mapped = np.empty(len(clusters), int)
        mapped[row] = col
        mapped = mapped[rows]
        labels = np.union1d(gt, mapped)
        tp = np.array([np.sum((gt == v) & (mapped == v)) for v in labels], float)
        support = np.array([np.sum(gt == v) for v in labels], float)
        predicted = np.array([np.sum(mapped == v) for v in labels], float)
        iou = np.sum(tp / (support + predicted - tp)) / len(clusters)
        f1 = np.mean(2 * tp / (support + predicted))
        scores.append((tp.sum() / len(gt), iou, f1))
    return np.mean(scores, axis=0)


def per_video_row(targets, predictions, repeats, rounds):
    """``metrics.per_video_hungarian_scores`` against :func:`per_video_baseline`."""
    clusterings = per_video_clusters(targets, predictions)
    gt, lengths = pad(targets)
    pred, _ = pad(clusterings)
    mask = np.arange(gt.shape[1])[None, :] < lengths[:, None]
    data = tuple(jax.device_put(x) for x in (gt, pred, mask))
    scores = jax.jit(
        lambda g, p, m: metrics.per_video_hungarian_scores(
            g, p, mask=m, num_classes=CLASSES, num_clusters=CLASSES
        )
    )
    first, ours = timed(lambda: jax.block_until_ready(scores(*data)))
    got = [float(np.mean(np.asarray(ours[k])[: len(targets)])) for k in ("mof", "iou", "f1")]
    want = per_video_baseline(targets, clusterings)
    assert np.allclose(got, want, rtol=0, atol=1e-6), (got, want)
    baseline = functools.partial(per_video_baseline, targets, clusterings)
    label = "per_video_hungarian_scores (TW-FINCH) vs a per-video scipy loop"
    _print_rounds(label, baseline, scores, data, repeats, rounds, first)


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
    data = tuple(jax.device_put(x) for x in (gt, pred, mask))
    fast, full = _jaxseg(False), _jaxseg(True)
    compile_fast, _ = timed(lambda: jax.block_until_ready(fast(*data)))
    compile_full, ours = timed(lambda: jax.block_until_ready(full(*data)))
    for baseline in (reference_style_matching, lean_matching):
        _, mof, iou = baseline(gt_flat, pred_flat)
        assert abs(float(ours["mof"]) - mof) < 1e-6 and abs(float(ours["iou"]) - iou) < 1e-6
    names = (
        "MoF + IoU (f1=False) vs reference-style matching",
        "MoF + IoU (f1=False) vs lean matching",
        "MoF + IoU + F1 (default) vs reference-style matching + sampled F1",
        "MoF + IoU + F1 (default) vs lean matching + sampled F1",
    )
    rows = {name: ([], [], []) for name in names}
    for _ in range(args.rounds):
        t_ref, (gt2cluster, _, _) = timed(lambda: reference_style_matching(gt_flat, pred_flat))
        t_lean, _ = timed(lambda: lean_matching(gt_flat, pred_flat))
        sample = functools.partial(baseline_sampled_f1, gt_flat, pred_flat, gt2cluster)
        t_f1, f1 = timed(lambda: sample(CLUSTERS, len(targets)))  # noqa: B023 (called at once)
        t_fast, t_full = _best(fast, data, args.repeats), _best(full, data, args.repeats)
        pairs = ((t_ref, t_fast), (t_lean, t_fast), (t_ref + t_f1, t_full), (t_lean + t_f1, t_full))
        for name, (base, ours_t) in zip(names, pairs):
            rows[name][0].append(base)
            rows[name][1].append(ours_t)
            rows[name][2].append(base / ours_t)
    print(f"F1: sampled (seed 0) {f1:.6f}, jaxseg's deterministic limit {float(ours['f1']):.6f}")
    print(
        f"first call (trace + compile + run): f1=False {compile_fast:.2f} s, "
        f"f1=True {compile_full:.2f} s"
    )
    for name, (base, ours_t, ratio) in rows.items():
        print(
            f"{name}: baseline {np.median(base):.3f} s, jaxseg {1e3 * np.median(ours_t):.1f} ms "
            f"(best of {args.repeats}); ratio x{np.median(ratio):.0f} "
            f"[x{min(ratio):.0f}-x{max(ratio):.0f}] (target x20)"
        )
    contingency_row(targets, predictions, data, args.repeats, args.rounds)
    per_video_row(targets, predictions, args.repeats, args.rounds)


if __name__ == "__main__":
    main()
