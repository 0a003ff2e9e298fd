"""Slow numpy oracle for the ranking, retrieval, detection and dense metrics.

Written here from the algorithms in REFERENCE.md §2-§5 (not copied from any anchor). Loops
are plain Python, ratios float64. Each function takes one problem (a 1-D ranking, one
similarity matrix, one dataset of videos, one stack of maps).
"""

from __future__ import annotations

import math

import numpy as np


# --------------------------------------------------------------------------------------------
# Average precision
# --------------------------------------------------------------------------------------------
def step_ap(targets, scores, num_positives=None) -> float:
    """scikit-learn's AP: sum over distinct thresholds of (recall gain) x precision."""
    targets = np.asarray(targets, bool)
    scores = np.asarray(scores, np.float64)
    npos = int(targets.sum()) if num_positives is None else int(num_positives)
    if npos == 0:
        return math.nan
    total = 0.0
    for threshold in sorted(set(scores.tolist()), reverse=True):
        chosen = scores >= threshold
        tp = int((chosen & targets).sum())
        gained = int(((scores == threshold) & targets).sum())
        total += gained / npos * tp / int(chosen.sum())
    return total


def _voc_curve(targets, scores):
    """Precision and TP count at each rank; ties kept in input order (stable sort)."""
    order = sorted(range(len(scores)), key=lambda i: -float(scores[i]))
    tp = 0
    precision, tps = [], []
    for rank, i in enumerate(order, start=1):
        tp += bool(targets[i])
        precision.append(tp / rank)
        tps.append(tp)
    return precision, tps


def all_point_ap(targets, scores, num_positives=None) -> float:
    """VOC2010 AP: sentinels (0, 0), (1, 0), monotone envelope, sum of recall steps."""
    npos = int(np.sum(targets)) if num_positives is None else int(num_positives)
    if npos == 0:
        return math.nan
    precision, tps = _voc_curve(targets, scores)
    rec = [0.0] + [t / npos for t in tps] + [1.0]
    prec = [0.0, *precision, 0.0]
    for i in range(len(prec) - 2, -1, -1):
        prec[i] = max(prec[i], prec[i + 1])
    return sum((rec[i] - rec[i - 1]) * prec[i] for i in range(1, len(rec)) if rec[i] != rec[i - 1])


def eleven_point_ap(targets, scores, num_positives=None) -> float:
    """VOC2007 AP over the recall points np.linspace(0, 1, 11) (float64, as the anchors)."""
    npos = int(np.sum(targets)) if num_positives is None else int(num_positives)
    if npos == 0:
        return math.nan
    precision, tps = _voc_curve(targets, scores)
    recall = [t / npos for t in tps]
    total = 0.0
    for t in np.linspace(0, 1, 11):
        candidates = [p for p, r in zip(precision, recall, strict=True) if r >= t]
        total += max(candidates) if candidates else 0.0
    return total / 11


def calibrated_ap(targets, scores) -> float:
    """cAP (De Geest et al.): mean over positives of TP/(TP + FP/w), tied scores grouped."""
    targets = np.asarray(targets, bool)
    scores = np.asarray(scores, np.float64)
    npos = int(targets.sum())
    nneg = len(targets) - npos
    if npos == 0:
        return math.nan
    total = 0.0
    for i in np.flatnonzero(targets):
        chosen = scores >= scores[i]
        tp = int((chosen & targets).sum())
        fp = int((chosen & ~targets).sum())
        total += 1.0 if nneg == 0 else tp * nneg / (tp * nneg + fp * npos)
    return total / npos


def per_class(metric, targets, scores, background=(), ambiguous=()):
    """LSTR-style per-frame metric per class: drop ambiguous frames, skip classes, NaN if none."""
    targets = np.asarray(targets) != 0
    scores = np.asarray(scores)
    keep = ~targets[:, list(ambiguous)].any(axis=1) if ambiguous else np.ones(len(targets), bool)
    out = []
    for c in range(targets.shape[1]):
        if c in background or c in ambiguous or not targets[keep, c].any():
            out.append(math.nan)
        else:
            out.append(metric(targets[keep, c], scores[keep, c]))
    values = [v for v in out if not math.isnan(v)]
    return out, (float(np.mean(values)) if values else math.nan)


def top_k_correct(target, scores, k) -> bool:
    """scikit-learn's rule: a stable ascending sort reversed, so tied higher indices come first."""
    order = np.argsort(scores, kind="stable")[::-1]
    return int(target) in order[:k].tolist()


# --------------------------------------------------------------------------------------------
# Retrieval
# --------------------------------------------------------------------------------------------
def retrieval_rank(row, target, ties="pessimistic") -> float:
    """0-based rank of item ``target`` in one row of similarities."""
    higher = sum(1 for j, s in enumerate(row) if s > row[target])
    tied = sum(1 for j, s in enumerate(row) if s == row[target] and j != target)
    return {"pessimistic": higher + tied, "optimistic": higher, "average": higher + tied / 2}[ties]


def retrieval_summary(ranks, ks=(1, 5, 10)) -> dict:
    ranks = np.asarray(ranks, np.float64)
    out = {f"R{k}": float(np.mean(ranks < k)) for k in ks}
    out["MedianR"] = float(np.median(ranks)) + 1
    out["MeanR"] = float(np.mean(ranks)) + 1
    out["MRR"] = float(np.mean(1 / (ranks + 1)))
    return out


# --------------------------------------------------------------------------------------------
# Detection
# --------------------------------------------------------------------------------------------
def interval_iou(a, b) -> float:
    inter = max(0.0, min(a[1], b[1]) - max(a[0], b[0]))
    union = (a[1] - a[0]) + (b[1] - b[0]) - inter
    return inter / union if union > 0 else 0.0


def box_iou(a, b) -> float:
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def detection_ap(
    gt, pred, num_classes, thresholds, interpolation="all_point", matching="activitynet"
):
    """ActivityNet's loop. ``gt``: list of (video, box, label); ``pred``: (video, box, label,
    score). Returns (per-class AP [C][K] with NaN for classes without GT, mAP [K])."""
    iou = interval_iou if len(gt[0][1] if gt else pred[0][1]) == 2 else box_iou
    ap_fn = all_point_ap if interpolation == "all_point" else eleven_point_ap
    result = []
    for c in range(num_classes):
        gts = [(v, b) for v, b, label in gt if label == c]
        if not gts:
            result.append([math.nan] * len(thresholds))
            continue
        preds = [(v, b, s) for v, b, label, s in pred if label == c]
        order = sorted(range(len(preds)), key=lambda i: -preds[i][2])  # stable
        row = []
        for thr in thresholds:
            locked = [False] * len(gts)
            tp_flags = []
            for i in order:
                v, b, _ = preds[i]
                cands = [(iou(b, g), j) for j, (gv, g) in enumerate(gts) if gv == v]
                cands.sort(key=lambda x: -x[0])  # stable: lower GT index first on ties
                hit = False
                for value, j in cands:
                    if value < thr:
                        break
                    if locked[j]:
                        if matching == "voc":
                            break
                        continue
                    locked[j] = hit = True
                    break
                tp_flags.append(hit)
            row.append(ap_fn(tp_flags, -np.arange(len(tp_flags), dtype=float), len(gts)))
        result.append(row)
    result = np.asarray(result, np.float64).reshape(num_classes, len(thresholds))
    with np.errstate(all="ignore"):
        present = ~np.isnan(result[:, 0])
        mean = result[present].mean(axis=0) if present.any() else np.full(len(thresholds), np.nan)
    return result, mean


# --------------------------------------------------------------------------------------------
# Dense
# --------------------------------------------------------------------------------------------
def dense_scores(target, pred, num_classes, ignore_index=None):
    """Pooled confusion matrix -> pixel accuracy, per-class IoU / Dice (NaN if absent), means."""
    target = np.asarray(target).ravel().astype(np.int64)
    pred = np.asarray(pred).ravel().astype(np.int64)
    keep = np.ones(target.shape, bool) if ignore_index is None else target != ignore_index
    cm = np.zeros((num_classes, num_classes), np.int64)
    for t, p in zip(target[keep], pred[keep], strict=True):
        cm[t, p] += 1
    tp = np.diag(cm).astype(np.float64)
    fp = cm.sum(0) - tp
    fn = cm.sum(1) - tp
    with np.errstate(all="ignore"):
        iou = tp / (tp + fp + fn)
        dice = 2 * tp / (2 * tp + fp + fn)
        acc = tp.sum() / cm.sum()

    def mean(x):
        return float(np.nanmean(x)) if not np.all(np.isnan(x)) else math.nan

    return {
        "pixel_acc": float(acc),
        "iou": iou,
        "dice": dice,
        "miou": mean(iou),
        "mdice": mean(dice),
    }
