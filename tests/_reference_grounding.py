"""Slow, obviously-correct oracles for the grounding and proposal metrics (plain Python floats).

Written from the algorithms as the papers and the evaluation scripts describe them, one query or
one video at a time, with Python floats (IEEE float64, as the reference scripts use), so that
``int(n * x)`` and every IoU comparison round as theirs do. Not derived from jaxseg's kernels.
"""

from __future__ import annotations

import math


def hull_iou(p, g):
    inter = max(0.0, min(p[1], g[1]) - max(p[0], g[0]))
    hull = max(p[1], g[1]) - min(p[0], g[0])
    return inter / hull if hull > 0 else 0.0


def union_iou(p, g):
    inter = max(0.0, min(p[1], g[1]) - max(p[0], g[0]))
    union = (p[1] - p[0]) + (g[1] - g[0]) - inter
    return inter / union if union != 0 else 0.0


def _passes(iou, t, strict):
    return iou > t if strict else iou >= t


def _best(pred, gts):
    """Hull IoU with the target of highest true IoU (first on ties), 0 without targets."""
    if not gts:
        return 0.0
    best = max(range(len(gts)), key=lambda i: (union_iou(pred, gts[i]), -i))
    return hull_iou(pred, gts[best])


def grounding_recall(gts, preds, ks, thresholds, strict):
    """``[T][K]`` of 0/1 (NaN without targets); ``preds`` in rank order."""
    if not gts:
        return [[math.nan] * len(ks) for _ in thresholds]
    ious = [_best(p, gts) for p in preds]
    return [[float(any(_passes(x, t, strict) for x in ious[:k])) for k in ks] for t in thresholds]


def grounding_iou(gts, preds):
    if not gts:
        return math.nan
    return _best(preds[0], gts) if preds else 0.0


def moment_retrieval_ap(gts, preds, scores, thresholds, max_predictions=10):
    """Per-threshold AP of one query (list of floats)."""
    if not gts:
        return [math.nan] * len(thresholds)
    kept = list(zip(preds, scores))[:max_predictions]
    kept = sorted(kept, key=lambda ps: -ps[1])  # stable
    out = []
    for t in thresholds:
        taken = [False] * len(gts)
        hits = []
        for p, _ in kept:
            ious = [union_iou(p, g) for g in gts]
            # candidates by decreasing IoU, lower index first among equal IoUs
            order = sorted(range(len(gts)), key=lambda i: (-ious[i], i))
            hit = False
            for i in order:
                if ious[i] < t:
                    break
                if not taken[i]:
                    taken[i] = hit = True
                    break
            hits.append(hit)
        precision = []
        tp = 0
        for n, h in enumerate(hits, 1):
            tp += h
            precision.append(tp / n)
        ap = 0.0
        for i, h in enumerate(hits):
            if h:
                ap += max(precision[i:]) / len(gts)
        out.append(ap)
    return out


def highlight_ap(labels, scores):
    """``get_ap(interpolate=True)`` semantics for one annotator: mean over the distinct score
    values holding a positive of the best precision at that or any lower score cut."""
    if not any(labels):
        return 0.0
    values = sorted(set(scores), reverse=True)
    cuts = []
    for v in values:
        chosen = [lab for lab, s in zip(labels, scores) if s >= v]
        group = [lab for lab, s in zip(labels, scores) if s == v]
        cuts.append((sum(chosen) / len(chosen), any(group)))
    kept = [max(p for p, _ in cuts[i:]) for i, (_, pos) in enumerate(cuts) if pos]
    return sum(kept) / len(kept)


def highlight_hit(labels_any, scores):
    best = max(range(len(scores)), key=lambda i: (scores[i], -i))
    return float(labels_any[best])


def moment_query_recall(gts, preds, ranks, thresholds, strict=True):
    """``[T][R]`` recalled-target counts of one (clip, class)."""
    n = len(gts)
    out = []
    for t in thresholds:
        row = []
        for r in ranks:
            top = preds[: r * n]
            row.append(sum(any(_passes(hull_iou(p, g), t, strict) for p in top) for g in gts))
        out.append(row)
    return out


def proposal_curve(videos, thresholds, max_average=100):
    """ActivityNet AR-AN. ``videos``: list of (targets, proposals, scores); returns
    (recall [T][100], average [100], proposals_per_video [100])."""
    with_targets = [v for v in videos if v[0]]
    num_videos = len(with_targets)
    all_proposals = sum(len(v[1]) for v in videos)
    ratio = max_average * float(num_videos) / all_proposals
    ranked, total = [], 0
    for gts, props, scores in with_targets:
        order = sorted(range(len(props)), key=lambda i: (-scores[i], i))
        n = min(int(len(props) * ratio), len(props))
        total += n if props else 0
        ranked.append((gts, [props[i] for i in order[:n]]))
    fractions = [j / 100.0 * (max_average * float(num_videos) / total) for j in range(1, 101)]
    num_targets = sum(len(g) for g, _ in ranked)
    recall = []
    for t in thresholds:
        row = []
        for pcn in fractions:
            hit = 0
            for gts, props in ranked:
                used = min(int(len(props) * pcn), len(props))
                hit += sum(any(union_iou(p, g) >= t for p in props[:used]) for g in gts)
            row.append(hit / num_targets)
        recall.append(row)
    average = [sum(col) / len(thresholds) for col in zip(*recall)]
    per_video = [pcn * (float(total) / num_videos) for pcn in fractions]
    return recall, average, per_video


def trapezoid(y, x):
    return sum((x[i + 1] - x[i]) * (y[i + 1] + y[i]) / 2 for i in range(len(x) - 1))
