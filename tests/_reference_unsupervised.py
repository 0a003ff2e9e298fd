"""Slow numpy/scipy oracles of the three unsupervised protocols (CTE, TW-FINCH, ASOT).

Written here from the protocols' descriptions (golden/unsupervised/README.md and the papers'
evaluation code as documented there), not copied. Inputs are 1-D arrays of the frames of one
set (concatenated) or of one video; -1 is the background label. ``rng`` is a
``numpy.random.RandomState``-like object; ``randint(lo, hi + 1)`` draws what the references'
``random_integers(lo, hi)`` draws (the same legacy stream) for the sampled F1 scores;
``rng=None`` gives their deterministic limits.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import linear_sum_assignment

SAMPLES, EXPERIMENTS, EPS = 15, 50, 1e-8


def _runs(labels):
    """(first, last) inclusive index pairs of the runs of equal labels."""
    if len(labels) == 0:
        return []
    cuts = np.flatnonzero(labels[1:] != labels[:-1]) + 1
    starts = np.concatenate([[0], cuts])
    ends = np.concatenate([cuts - 1, [len(labels) - 1]])
    return list(zip(starts.tolist(), ends.tolist()))


def _padding_labels(used, count, size):
    """CTE's padding labels: for index i, the smallest integer >= i not used yet."""
    used, out = set(used), []
    for index in range(count, size):
        label = index
        while label in used:
            label += 1
        used.add(label)
        out.append(label)
    return out


def cte(gt, pred, *, background, k, n_videos, rng=None):
    """CTE's accuracy_corpus on one set: dict of mof, mof_bg, iou, iou_bg, f1 (+ matching)."""
    gt, pred = np.asarray(gt, np.int64), np.asarray(pred, np.int64)
    gt_labels, pr_labels = np.unique(gt), np.unique(pred)
    size = max(len(gt_labels), len(pr_labels))
    rows = list(gt_labels) + _padding_labels(gt_labels, len(gt_labels), size)
    cols = list(pr_labels) + _padding_labels(pr_labels, len(pr_labels), size)
    votes = np.zeros((size, size))
    for i, g in enumerate(gt_labels):
        for j, c in enumerate(pr_labels):
            if background and (g == -1 or c == -1):
                continue
            votes[i, j] = np.count_nonzero((gt == g) & (pred == c))
    if background:
        assert -1 in gt_labels, "CTE raises KeyError without background frames"
        j = cols.index(-1) if -1 in cols else size - 1
        votes[rows.index(-1), j] = size * votes.max()
        cols[j] = -1
    r, c = linear_sum_assignment(-votes)
    gt2cluster = {rows[i]: cols[j] for i, j in zip(r, c)}
    out = _cte_scores(gt, pred, gt2cluster, background)
    out.update(_cte_f1(gt, pred, gt2cluster, background, k, n_videos, rng))
    out["gt2cluster"] = gt2cluster
    return out


def _cte_scores(gt, pred, gt2cluster, background):
    tp_fg = tp_all = iou_fg = iou_all = 0.0
    excluded = 0
    labels = np.unique(gt)
    for g in labels:
        in_gt, in_pred = gt == g, pred == gt2cluster[g]
        tp = np.count_nonzero(in_gt & in_pred)
        iou = tp / np.count_nonzero(in_gt | in_pred)
        tp_all, iou_all = tp_all + tp, iou_all + iou
        if background and g == -1:
            excluded = np.count_nonzero(in_gt)
        else:
            tp_fg, iou_fg = tp_fg + tp, iou_fg + iou
    classes = len(labels) - int(background)
    div = lambda a, b: a / b if b else math.nan  # noqa: E731
    return {
        "mof": div(tp_fg, len(gt) - excluded),
        "mof_bg": div(tp_all, len(gt)),
        "iou": div(iou_fg, classes),
        "iou_bg": div(iou_all, classes),
    }


def _cte_f1(gt, pred, gt2cluster, background, k, n_videos, rng):
    if background:
        keep = gt != -1
        gt, pred = gt[keep], pred[keep]
    mapped = pred.copy()
    for g, c in gt2cluster.items():
        mapped[pred == c] = g
    runs = _runs(gt)[:-1]  # CTE never adds the last run
    if not runs:
        return {"f1": math.nan}
    f1s = []
    for _ in range(EXPERIMENTS if rng is not None else 1):
        n = 0.0
        for lo, hi in runs:
            if rng is None:
                n += np.mean(mapped[lo : hi + 1] == gt[lo : hi + 1])
            else:
                idx = rng.randint(lo, hi + 1, SAMPLES)
                n += np.count_nonzero(gt[idx] == mapped[idx]) / SAMPLES
        p, r = n / (k * n_videos), n / len(runs)
        f1s.append(2 * p * r / (p + r + EPS))
    return {"f1": float(np.mean(f1s))}


def asot(gt, pred, *, exclude_background, n_videos, rng=None):
    """ASOT's eval_mof / eval_f1 / eval_miou on one sequence: dict of mof, miou, f1."""
    gt, pred = np.asarray(gt, np.int64), np.asarray(pred, np.int64)
    if exclude_background:
        keep = gt != -1
        gt, pred = gt[keep], pred[keep]
    pr_labels, gt_labels = np.unique(pred), np.unique(gt)
    affinity = np.array(
        [[np.count_nonzero((pred == c) & (gt == g)) for g in gt_labels] for c in pr_labels]
    ).reshape(len(pr_labels), len(gt_labels))
    r, c = linear_sum_assignment(affinity, maximize=True)
    pairs = list(zip(pr_labels[r].tolist(), gt_labels[c].tolist()))
    div = lambda a, b: a / b if b else math.nan  # noqa: E731
    tp = [np.count_nonzero((pred == p) & (gt == g)) for p, g in pairs]
    union = [np.count_nonzero((pred == p) | (gt == g)) for p, g in pairs]
    out = {
        "mof": div(sum(tp), len(gt)),
        "miou": div(sum(t / u for t, u in zip(tp, union)), len(gt_labels)),
        "pred_to_gt": dict(pairs),
    }
    out["f1"] = _asot_f1(gt, pred, dict((g, p) for p, g in pairs), n_videos, rng)
    return out


def _majority(p):
    return sum(math.comb(SAMPLES, j) * p**j * (1 - p) ** (SAMPLES - j) for j in range(8, 16))


def _asot_f1(gt, pred, gt_to_pred, n_videos, rng):
    if len(gt) == 0:
        return math.nan
    cuts = np.flatnonzero(gt[1:] != gt[:-1]) + 1
    bounds = np.concatenate([[0], cuts, [len(gt) - 1]])
    windows = list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))
    hits = 0.0
    for _ in range(EXPERIMENTS):
        for lo, hi in windows:
            cluster = gt_to_pred.get(int(gt[lo]))
            if rng is None:
                p = 0.0 if cluster is None else np.mean(pred[lo : hi + 1] == cluster)
                hits += _majority(p)
            else:
                idx = rng.randint(lo, hi + 1, SAMPLES)
                tp = 0 if cluster is None else np.count_nonzero(pred[idx] == cluster)
                hits += tp / SAMPLES > 0.5
    precision = hits / (n_videos * len(np.unique(gt)) * EXPERIMENTS)
    recall = hits / (len(windows) * EXPERIMENTS + EPS)
    return 2 * precision * recall / (precision + recall + EPS)


def twfinch(gt, pred, *, n_clusters=None):
    """TW-FINCH's per-video mof, iou (sum of Jaccard / n_clusters) and macro F1."""
    gt, pred = np.asarray(gt, np.int64), np.asarray(pred, np.int64)
    if len(gt) == 0:
        return {"mof": math.nan, "iou": math.nan, "f1": math.nan}
    if gt.min() < 0:
        gt = gt - gt.min()
    clusters, dense = np.unique(pred, return_inverse=True)
    width = max(len(clusters), gt.max() + 1)
    profit = np.zeros((len(clusters), width))
    for i in range(len(clusters)):
        for g in np.unique(gt):
            profit[i, g] = np.count_nonzero((dense == i) & (gt == g))
    _, col = linear_sum_assignment(-profit)
    mapped = col[dense]
    labels = np.union1d(gt, mapped)
    f1, iou = [], []
    for label in labels:
        tp = np.count_nonzero((gt == label) & (mapped == label))
        fp = np.count_nonzero((gt != label) & (mapped == label))
        fn = np.count_nonzero((gt == label) & (mapped != label))
        f1.append(2 * tp / (2 * tp + fp + fn))
        iou.append(tp / (tp + fp + fn))
    divisor = len(clusters) if n_clusters is None else n_clusters
    return {"mof": np.mean(gt == mapped), "iou": sum(iou) / divisor, "f1": np.mean(f1)}
