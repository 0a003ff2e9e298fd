"""The segmental rules as the papers and MS-TCN's ``eval.py`` state them, in plain JAX.

This is the specification: run-length encoding from change points, the Levenshtein recursion,
and MS-TCN's greedy matching as a scan over the predicted segments in temporal order. The
kernels that :func:`jaxseg.metrics.edit_score` and the segmental F1 run (bit-packed boundary
words, Myers' bit-vector edit distance, matching by distinct best targets) compute the same
numbers faster; ``tests/test_segmentation_plain.py`` asserts that the two agree bit for bit.
To change a rule, change it here first.

Every function takes one compacted sequence (its valid frames first, ``n`` of them).
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from jaxseg._src.edit_dp import hard_levenshtein
from jaxseg._src.f1 import legacy_last_end
from jaxseg._src.numerics import compare_products
from jaxseg._src.segments import Segments, is_background


def run_length_segments(labels, n, *, background: tuple[int, ...], capacity: int) -> Segments:
    """The kept segments of ``labels[:n]``: maximal runs, background runs dropped afterwards.

    A run starts at frame 0 and wherever the label changes; it ends where the next one
    starts (or at ``n``). Runs whose label is in ``background`` are then removed, so two runs
    of one label split by background stay two segments.

    Returns:
      :class:`Segments` with ``capacity`` rows; ``count`` is the true number of segments.
    """
    T = labels.shape[-1]
    frames = jnp.arange(T, dtype=jnp.int32)
    valid = frames < n
    changes = jnp.concatenate([jnp.ones((1,), bool), labels[1:] != labels[:-1]]) & valid
    run = jnp.cumsum(changes, dtype=jnp.int32) - 1  # the run each frame belongs to
    starts = jnp.zeros((T,), jnp.int32).at[jnp.where(changes, run, T)].set(frames, mode="drop")
    follows = changes & (frames > 0)  # the start of run r + 1 ends run r
    ends = jnp.full((T,), n, jnp.int32).at[jnp.where(follows, run - 1, T)].set(frames, mode="drop")
    run_labels = labels[starts].astype(jnp.int32)
    runs = jnp.sum(changes, dtype=jnp.int32)
    kept = (frames < runs) & ~is_background(run_labels, background)
    count = jnp.sum(kept, dtype=jnp.int32)
    slot = jnp.where(kept, jnp.cumsum(kept, dtype=jnp.int32) - 1, capacity)
    table = jnp.zeros((capacity,), jnp.int32)
    in_table = jnp.arange(capacity, dtype=jnp.int32) < count
    return Segments(
        jnp.where(in_table, table.at[slot].set(run_labels, mode="drop"), -1),
        table.at[slot].set(starts, mode="drop"),
        table.at[slot].set(ends, mode="drop"),
        in_table,
        count,
    )


def best_target(target: Segments, start, end, label):
    """Index of the same-label target segment of highest IoU with ``[start, end)`` (first on
    ties, IoUs compared exactly as fractions), its intersection and union, and whether any
    same-label target overlaps it.

    ``IoU = intersection / union`` with ``intersection = min(ends) - max(starts)`` and
    ``union = max(ends) - min(starts)`` (MS-TCN's span). A target that does not overlap
    cannot be a true positive at any threshold in (0, 1], so it is not a candidate.
    """
    inter = jnp.minimum(end, target.ends) - jnp.maximum(start, target.starts)
    union = jnp.maximum(end, target.ends) - jnp.minimum(start, target.starts)
    candidate = target.valid & (target.labels == label) & (inter > 0)
    inter, union = jnp.maximum(inter, 0), jnp.maximum(union, 1)
    index = jnp.arange(target.labels.shape[-1], dtype=jnp.int32)

    def better(a, b):  # the better of two (candidate, inter, union, index) entries
        a_wins = a[0] & (~b[0] | (compare_products(a[1], b[2], b[1], a[2]) > 0))
        tied = (a[0] == b[0]) & (compare_products(a[1], b[2], b[1], a[2]) == 0)
        a_wins = a_wins | (tied & (a[3] < b[3]))
        return tuple(jnp.where(a_wins, x, y) for x, y in zip(a, b))

    init = (jnp.bool_(False), jnp.int32(0), jnp.int32(1), jnp.int32(index.size))
    found, best_inter, best_union, best = lax.reduce(
        (candidate, inter, union, index), init, better, (0,)
    )
    return best, best_inter, best_union, found


def greedy_match_counts(target: Segments, prediction: Segments, thresholds):
    """``(tp, fp, fn)`` int32 ``[K]``: MS-TCN's ``f_score`` at each threshold.

    The predicted segments are visited in temporal order. Each is compared with its best
    same-label target (:func:`best_target`); it is a true positive at ``tau`` iff that IoU is
    at least ``tau`` and the target is not used yet (it then becomes used), otherwise a false
    positive; there is no fall-back to the second best target. Unused targets are false
    negatives. ``thresholds``: static ``(numerator, denominator)`` pairs.
    """
    numerators = jnp.array([num for num, _ in thresholds], jnp.int32)
    denominators = jnp.array([den for _, den in thresholds], jnp.int32)

    def visit(used, j):
        best, inter, union, found = best_target(
            target, prediction.starts[j], prediction.ends[j], prediction.labels[j]
        )
        reaches = compare_products(inter, denominators, numerators, union) >= 0
        hit = found & prediction.valid[j] & reaches & ~used[:, best]
        return used.at[:, best].set(used[:, best] | hit), hit

    used = jnp.zeros((len(thresholds), target.labels.shape[-1] + 1), bool)
    _, hits = lax.scan(visit, used, jnp.arange(prediction.labels.shape[-1], dtype=jnp.int32))
    tp = jnp.sum(hits, axis=0, dtype=jnp.int32)
    return tp, prediction.count - tp, target.count - tp


def sequence_statistics(
    targets,
    predictions,
    n,
    *,
    background: tuple[int, ...],
    thresholds,
    legacy_asformer_end: bool,
    target_capacity: int,
    prediction_capacity: int,
):
    """Every segmentation statistic of one compacted sequence, by the plain rules above.

    Returns:
      ``(frames, correct, edit_distance, target_segments, predicted_segments, tp, fp, fn,
      overflow)`` as :class:`jaxseg._src.segmentation.SegmentationStatistics` holds them.
    """
    correct = jnp.sum(
        (targets == predictions) & (jnp.arange(targets.shape[-1], dtype=jnp.int32) < n)
    )
    target = run_length_segments(targets, n, background=background, capacity=target_capacity)
    prediction = run_length_segments(
        predictions, n, background=background, capacity=prediction_capacity
    )
    overflow = (target.count > target_capacity) | (prediction.count > prediction_capacity)
    distance = hard_levenshtein(
        target.labels,
        prediction.labels,
        jnp.minimum(target.count, target_capacity),
        jnp.minimum(prediction.count, prediction_capacity),
    )
    if legacy_asformer_end:
        target, prediction = legacy_last_end(target, n), legacy_last_end(prediction, n)
    tp, fp, fn = greedy_match_counts(target, prediction, thresholds)
    return (
        jnp.asarray(n, jnp.int32),
        correct.astype(jnp.int32),
        distance,
        target.count,
        prediction.count,
        tp,
        fp,
        fn,
        overflow,
    )
