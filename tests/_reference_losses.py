"""Slow numpy/Python references for the losses and the edit DP, written from the formulas.

Everything here works on one unpadded sequence (masked frames already removed), in float64.
"""

from __future__ import annotations

import itertools

import numpy as np


def levenshtein(a, b) -> int:
    """Plain O(len(a) * len(b)) Levenshtein distance between two Python sequences."""
    a, b = list(a), list(b)
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cur[j] = min(prev[j] + 1, prev[j - 1] + (a[i - 1] != b[j - 1]), cur[j - 1] + 1)
        prev = cur
    return prev[len(b)]


def segment_labels(labels, background=()):
    """Labels of the runs of ``labels``, background runs removed after encoding."""
    runs = [int(v) for k, v in enumerate(labels) if k == 0 or labels[k - 1] != v]
    return [v for v in runs if v not in background]


def softmin(values, gamma):
    values = np.asarray(values, np.float64)
    if gamma == 0:
        return values.min()
    low = values.min()
    return low - gamma * np.log(np.sum(np.exp(-(values - low) / gamma)))


def soft_dp(c_del, c_sub, c_ins, gamma):
    """The generic soft edit recursion over the full grid; returns R[N, M]."""
    n, m = len(c_del), len(c_ins)
    r = np.full((n + 1, m + 1), np.inf)
    r[0, 0] = 0.0
    for i in range(n + 1):
        for j in range(m + 1):
            if i == 0 and j == 0:
                continue
            options = []
            if i > 0:
                options.append(r[i - 1, j] + c_del[i - 1])
            if i > 0 and j > 0:
                options.append(r[i - 1, j - 1] + c_sub[i - 1, j - 1])
            if j > 0:
                options.append(r[i, j - 1] + c_ins[j - 1])
            r[i, j] = softmin(options, gamma)
    return r[n, m]


def softmax(logits):
    z = np.asarray(logits, np.float64)
    z = np.exp(z - z.max(-1, keepdims=True))
    return z / z.sum(-1, keepdims=True)


def soft_edit_distance(probs, labels, gamma, background=()):
    """SOFT_LOSSES.md §3.3 on one unpadded sequence: rows = label segments, columns = frames."""
    probs = np.asarray(probs, np.float64)
    previous = np.vstack([np.zeros((1, probs.shape[1])), probs[:-1]])
    starts = np.maximum(probs - previous, 0.0)
    starts[:, list(background)] = 0.0
    segments = segment_labels(labels, background)
    c_sub = np.array([[1.0 - starts[t, y] for t in range(len(probs))] for y in segments])
    c_sub = c_sub.reshape(len(segments), len(probs))
    return soft_dp(np.ones(len(segments)), c_sub, starts.sum(1), gamma), len(segments), starts


def class_sums(probs, labels, num_classes):
    onehot = np.eye(num_classes)[np.asarray(labels)]
    return (probs * onehot).sum(0), probs.sum(0), onehot.sum(0)


def hard_iou(pred, labels, num_classes):
    """Per-class IoU (NaN where the union is empty)."""
    out = np.full(num_classes, np.nan)
    for c in range(num_classes):
        union = np.sum((pred == c) | (labels == c))
        if union:
            out[c] = np.sum((pred == c) & (labels == c)) / union
    return out


def hard_dice(pred, labels, num_classes):
    out = np.full(num_classes, np.nan)
    for c in range(num_classes):
        total = np.sum(pred == c) + np.sum(labels == c)
        if total:
            out[c] = 2 * np.sum((pred == c) & (labels == c)) / total
    return out


def lovasz_class(errors, foreground):
    """Lovász extension of the Jaccard loss, by explicit set evaluation along the sorted order."""
    order = np.argsort(-errors, kind="stable")
    e, g = errors[order], foreground[order]
    total = g.sum()

    def jaccard_loss(k):  # the k largest errors mispredicted
        if k == 0:
            return 0.0
        inter = total - g[:k].sum()
        union = total + (1 - g[:k]).sum()
        return 1.0 - inter / union

    return sum(e[k] * (jaccard_loss(k + 1) - jaccard_loss(k)) for k in range(len(e)))


def smoothing(log_probs, threshold):
    d = log_probs[1:] - log_probs[:-1]
    if len(d) == 0:
        return 0.0
    return float(np.mean(np.minimum(d * d, threshold**2)))


def ctc_brute_force(probs, transcript, blank):
    """``-log P(collapse(z) = transcript)`` by enumerating every frame labelling z."""
    total = 0.0
    for z in itertools.product(range(probs.shape[1]), repeat=probs.shape[0]):
        collapsed = [v for k, v in enumerate(z) if (k == 0 or z[k - 1] != v) and v != blank]
        if collapsed == list(transcript):
            total += np.prod(probs[np.arange(len(z)), z])
    return -np.log(total)


def intervals(p, t):
    """IoU, GIoU and DIoU of two (start, end) intervals."""
    inter = max(0.0, min(p[1], t[1]) - max(p[0], t[0]))
    union = (p[1] - p[0]) + (t[1] - t[0]) - inter
    hull = max(p[1], t[1]) - min(p[0], t[0])
    iou = inter / union if union else 0.0
    giou = iou - ((hull - union) / hull if hull else 0.0)
    gap = (p[0] + p[1]) / 2 - (t[0] + t[1]) / 2
    diou = iou - ((gap / hull) ** 2 if hull else 0.0)
    return iou, giou, diou
