"""Slow, obviously-correct numpy oracle for the segmentation and frame metrics.

Written here from the algorithms described in ``REFERENCE.md`` §1 and ``FOUNDATION_API.md``
(not copied from MS-TCN or any other project). Every function takes ONE sequence as 1-D
arrays and an optional boolean mask (True = valid frame); masked frames are removed first.
Ratios are float64; counts are Python/numpy integers. Speed is irrelevant here, clarity is not.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np


# --------------------------------------------------------------------------------------------
# Segments
# --------------------------------------------------------------------------------------------
def compact(labels, mask=None) -> np.ndarray:
    """The valid frames of ``labels``, concatenated in order (mask None = all valid)."""
    labels = np.asarray(labels)
    if mask is None:
        return labels.copy()
    return labels[np.asarray(mask, dtype=bool)]


def runs(frames) -> list[tuple[int, int, int]]:
    """Maximal runs of equal labels as ``(label, start, end)``, end exclusive."""
    out = []
    start = 0
    for i in range(1, len(frames) + 1):
        if i == len(frames) or frames[i] != frames[start]:
            out.append((int(frames[start]), start, i))
            start = i
    return out


def segments(labels, mask=None, background=(), asformer_end=False) -> list[tuple[int, int, int]]:
    """Segments ``(label, start, end)`` of the compacted sequence, background runs dropped.

    Background is removed AFTER run-length encoding, so two runs of one label separated by
    background stay two segments. ``asformer_end`` reproduces ASFormer/DiffAct: a segment that
    runs to the last frame ends at ``T - 1`` instead of ``T``.
    """
    frames = compact(labels, mask)
    segs = [s for s in runs(frames) if s[0] not in background]
    if asformer_end and segs and segs[-1][2] == len(frames):
        label, start, _ = segs[-1]
        segs[-1] = (label, start, len(frames) - 1)
    return segs


def lengths_to_mask(lengths, T) -> np.ndarray:
    """``mask[..., t] = t < lengths[...]``."""
    lengths = np.asarray(lengths)
    return np.arange(T) < lengths[..., None]


# --------------------------------------------------------------------------------------------
# Edit distance
# --------------------------------------------------------------------------------------------
def levenshtein(a, b) -> int:
    """Unit-cost Levenshtein distance, the plain O(|a| |b|) dynamic programme."""
    a, b = list(a), list(b)
    previous = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        current = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            current[j] = min(
                previous[j] + 1,  # delete a[i-1]
                current[j - 1] + 1,  # insert b[j-1]
                previous[j - 1] + (a[i - 1] != b[j - 1]),  # substitute / keep
            )
        previous = current
    return previous[-1]


def levenshtein_rows(a, b) -> int:
    """The same dynamic programme as ``levenshtein`` with each row computed by numpy.

    Row i is ``D[i, j] = min(candidate[j], D[i, j-1] + 1)`` with ``candidate[j]`` the delete and
    substitute moves from row i-1; unrolling the insert chain gives
    ``D[i, j] = min_{k <= j} candidate[k] + (j - k)``, a running minimum of
    ``candidate - arange``. Used only because the plain loop is too slow for thousands of
    segments; ``test_segmental`` checks that the two agree.
    """
    a, b = np.asarray(a), np.asarray(b)
    offsets = np.arange(len(b) + 1)
    previous = offsets.copy()
    for i in range(1, len(a) + 1):
        candidate = np.empty_like(previous)
        candidate[0] = i
        candidate[1:] = np.minimum(previous[1:] + 1, previous[:-1] + (a[i - 1] != b))
        previous = np.minimum.accumulate(candidate - offsets) + offsets
    return int(previous[-1])


def edit_distance(targets, predictions, mask=None, background=()) -> int:
    """Levenshtein distance between the segment-label sequences."""
    y = [s[0] for s in segments(targets, mask, background)]
    p = [s[0] for s in segments(predictions, mask, background)]
    return levenshtein_rows(p, y)


def edit_score(targets, predictions, mask=None, background=()) -> float:
    """``1 - D / max(|P|, |Y|)``; 1.0 when neither side has a segment (jaxseg's choice)."""
    n_y = len(segments(targets, mask, background))
    n_p = len(segments(predictions, mask, background))
    if max(n_y, n_p) == 0:
        return 1.0
    return 1.0 - edit_distance(targets, predictions, mask, background) / max(n_y, n_p)


# --------------------------------------------------------------------------------------------
# Segmental F1 (MS-TCN matching)
# --------------------------------------------------------------------------------------------
def best_targets(target_segments, predicted_segments) -> list[tuple[int, float]]:
    """For each predicted segment, ``(index, IoU)`` of its best target segment.

    IoU = (min(ends) - max(starts)) / (max(ends) - min(starts)) in float64 (the union is the
    span, so the IoU of disjoint segments is negative); a target of another label scores 0;
    the first index wins ties. A zero-length predicted segment (only possible with the
    ASFormer end) has span 0 against a zero-length target at the same frame; MS-TCN gets NaN
    there and the prediction is an FP; here it scores 0, which is an FP as well because every
    IoU of a zero-length prediction is <= 0 < tau.
    """
    labels = np.array([s[0] for s in target_segments])
    starts = np.array([s[1] for s in target_segments], dtype=np.float64)
    ends = np.array([s[2] for s in target_segments], dtype=np.float64)
    out = []
    for label, start, end in predicted_segments:
        intersection = np.minimum(end, ends) - np.maximum(start, starts)
        union = np.maximum(end, ends) - np.minimum(start, starts)
        iou = np.zeros(len(target_segments))
        np.divide(intersection, union, out=iou, where=union > 0)
        iou = np.where(labels == label, iou, 0.0)
        best = int(np.argmax(iou))  # numpy returns the first maximum
        out.append((best, float(iou[best])))
    return out


def segmental_counts(
    targets, predictions, overlaps, mask=None, background=(), asformer_end=False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(tp, fp, fn)`` int64 arrays ``[K]``, one entry per threshold in ``overlaps``.

    Predictions are visited in temporal order; each takes its best target (``best_targets``);
    TP iff IoU >= tau (float64 comparison, as MS-TCN) and that target is still free, else FP
    (no fall-back to the second best). FN = targets never matched. Without target segments
    every prediction is an FP.
    """
    y = segments(targets, mask, background, asformer_end)
    p = segments(predictions, mask, background, asformer_end)
    tp = np.zeros(len(overlaps), np.int64)
    fp = np.zeros(len(overlaps), np.int64)
    fn = np.zeros(len(overlaps), np.int64)
    if not y:
        fp[:] = len(p)
        return tp, fp, fn
    best = best_targets(y, p)
    for k, tau in enumerate(overlaps):
        used = [False] * len(y)
        for index, iou in best:
            if iou >= tau and not used[index]:
                used[index] = True
                tp[k] += 1
            else:
                fp[k] += 1
        fn[k] = len(y) - sum(used)
    return tp, fp, fn


def ratio_or_zero(numerator, denominator) -> float:
    """``numerator / denominator`` and 0.0 for 0/0 (MS-TCN's nan_to_num)."""
    return 0.0 if denominator == 0 else numerator / denominator


def correctly_rounded_float32(numerator: int, denominator: int) -> np.float32:
    """The float32 nearest to the exact rational ``numerator / denominator`` (ties to the
    even mantissa), chosen among the neighbours of a close float32 by exact comparison."""
    exact = Fraction(numerator, denominator)
    guess = np.float32(float(exact))
    candidates = [
        np.nextafter(guess, np.float32(-np.inf)),
        guess,
        np.nextafter(guess, np.float32(np.inf)),
    ]

    def key(c):
        return abs(Fraction(float(c)) - exact), int(np.float32(c).view(np.int32)) & 1

    return min(candidates, key=key)


def segmental_scores(tp, fp, fn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-threshold precision tp/(tp+fp), recall tp/(tp+fn), F1 2tp/(2tp+fp+fn); 0 for 0/0."""
    precision = np.array([ratio_or_zero(t, t + f) for t, f in zip(tp, fp, strict=True)])
    recall = np.array([ratio_or_zero(t, t + f) for t, f in zip(tp, fn, strict=True)])
    f1 = np.array([ratio_or_zero(2 * t, 2 * t + a + b) for t, a, b in zip(tp, fp, fn, strict=True)])
    return precision, recall, f1


# --------------------------------------------------------------------------------------------
# Frame-level metrics
# --------------------------------------------------------------------------------------------
def accuracy(targets, predictions, mask=None) -> float:
    """Correct valid frames / valid frames; NaN without valid frames."""
    y, p = compact(targets, mask), compact(predictions, mask)
    if len(y) == 0:
        return math.nan
    return float(np.sum(y == p)) / len(y)


def confusion_matrix(targets, predictions, num_classes, mask=None) -> np.ndarray:
    """``cm[i, j]`` = number of valid frames with target i and prediction j."""
    cm = np.zeros((num_classes, num_classes), np.int64)
    for i, j in zip(compact(targets, mask), compact(predictions, mask), strict=True):
        cm[i, j] += 1
    return cm


def class_totals(targets, predictions, num_classes, mask=None) -> np.ndarray:
    """int64 ``[3, C]``: valid frames whose target is c, whose prediction is c, and whose
    target and prediction are both c; a label outside [0, C) counts in no class."""
    totals = np.zeros((3, num_classes), np.int64)
    for y, p in zip(compact(targets, mask), compact(predictions, mask), strict=True):
        if 0 <= y < num_classes:
            totals[0, y] += 1
            totals[2, y] += y == p
        if 0 <= p < num_classes:
            totals[1, p] += 1
    return totals


def per_class(targets, predictions, num_classes, mask=None) -> dict[str, np.ndarray]:
    """Per-class precision, recall, F1 (float64 ``[C]``) and support (target frames).

    A class absent from both targets and predictions is NaN; otherwise an undefined ratio
    is 0 (a class in the targets but never predicted has precision 0, and so on).
    """
    cm = confusion_matrix(targets, predictions, num_classes, mask)
    out = {"precision": [], "recall": [], "f1": []}
    for c in range(num_classes):
        tp = cm[c, c]
        predicted = cm[:, c].sum()
        actual = cm[c, :].sum()
        if predicted == 0 and actual == 0:
            values = (math.nan, math.nan, math.nan)
        else:
            values = (
                ratio_or_zero(tp, predicted),
                ratio_or_zero(tp, actual),
                ratio_or_zero(2 * tp, predicted + actual),
            )
        for key, value in zip(("precision", "recall", "f1"), values, strict=True):
            out[key].append(value)
    out = {key: np.array(value, np.float64) for key, value in out.items()}
    out["support"] = cm.sum(axis=1)
    return out


def average_scores(
    targets, predictions, num_classes, metric, average, mask=None
) -> float | np.ndarray:
    """``metric`` in precision|recall|f1 with ``average`` in none|micro|macro|weighted."""
    if average == "micro":  # single-label: every micro average is the accuracy
        return accuracy(targets, predictions, mask)
    classes = per_class(targets, predictions, num_classes, mask)
    values = classes[metric]
    if average == "none":
        return values
    defined = ~np.isnan(values)
    if average == "macro":
        return float(np.mean(values[defined])) if defined.any() else math.nan
    if average == "weighted":
        weights = classes["support"][defined]
        total = weights.sum()
        return float(np.sum(weights * values[defined]) / total) if total > 0 else math.nan
    raise ValueError(average)


def class_accuracy(targets, predictions, num_classes, mask=None) -> np.ndarray:
    """Per-class recall under the same absent-class rule."""
    return per_class(targets, predictions, num_classes, mask)["recall"]


# --------------------------------------------------------------------------------------------
# Dataset aggregation (MS-TCN main())
# --------------------------------------------------------------------------------------------
def dataset_scores(frames, correct, edit_scores, tp, fp, fn) -> dict[str, object]:
    """MS-TCN's dataset numbers, as fractions.

    Args: per-video ``frames``, ``correct`` [N]; ``edit_scores`` [N] fractions; ``tp``, ``fp``,
    ``fn`` [N, K]. Videos without frames are left out of the edit mean.
    Returns ``accuracy`` = sum(correct) / sum(frames), ``edit`` = mean of the per-video edit
    scores, and ``f1`` [K] = 2PR / (P + R) from the summed counts with P = TP / (TP + FP),
    R = TP / (TP + FN), NaN turned into 0 (as MS-TCN).
    """
    frames = np.asarray(frames, np.int64)
    correct = np.asarray(correct, np.int64)
    edits = np.asarray(edit_scores, np.float64)[frames > 0]
    tp, fp, fn = (np.asarray(x, np.float64).sum(axis=0) for x in (tp, fp, fn))
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = tp / (tp + fp)
        recall = tp / (tp + fn)
        f1 = np.nan_to_num(2.0 * precision * recall / (precision + recall))
    return {
        "accuracy": correct.sum() / frames.sum(),
        "edit": float(np.mean(edits)) if len(edits) else math.nan,
        "f1": f1,
    }
