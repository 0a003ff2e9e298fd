"""MS-TCN segmental matching: TP, FP and FN at several IoU thresholds, without an S x S matrix.

Each predicted segment is compared with its best same-label target segment over all targets
(highest IoU, first index on ties); it is a TP at threshold tau iff that IoU >= tau and the
target is not taken yet. Hence TP(tau) is the number of distinct targets that are the best
match of some prediction with IoU >= tau, which needs no sequential loop.

Only overlapping (prediction, target) pairs can match. Both tables are sorted, disjoint
intervals, so there are at most ``S_p + S_t`` such pairs: they are enumerated with two binary
searches, and a segmented scan picks each prediction's best target comparing IoUs exactly as
integer ratios.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from jaxseg._src.numerics import compare_products
from jaxseg._src.segments import Segments

_FAR = jnp.iinfo(jnp.int32).max // 2


def legacy_last_end(segments: Segments, n) -> Segments:
    """ASFormer/DiffAct/ASRF convention: a segment ending at the last frame ends one earlier."""
    ends = jnp.where(segments.valid & (segments.ends == n), n - 1, segments.ends)
    return segments._replace(ends=ends)


def _overlapping_pairs(target: Segments, prediction: Segments):
    """(prediction, target) index pairs with overlapping spans, grouped by prediction."""
    capacity = target.labels.shape[-1] + prediction.labels.shape[-1]
    target_starts = jnp.where(target.valid, target.starts, _FAR)
    target_ends = jnp.where(target.valid, target.ends, _FAR)
    first = jnp.searchsorted(target_ends, prediction.starts, side="right")
    stop = jnp.searchsorted(target_starts, prediction.ends, side="left")
    n_pairs = jnp.where(prediction.valid, jnp.maximum(stop - first, 0), 0).astype(jnp.int32)
    pair_end = jnp.cumsum(n_pairs)
    pair_start = pair_end - n_pairs
    k = jnp.arange(capacity, dtype=jnp.int32)
    owner = jnp.minimum(jnp.searchsorted(pair_end, k, side="right"),
                        prediction.labels.shape[-1] - 1)
    other = jnp.clip(first[owner] + k - pair_start[owner], 0, target.labels.shape[-1] - 1)
    in_use = k < pair_end[-1]
    opens_group = k == pair_start[owner]
    return owner, other, in_use, opens_group, pair_end - 1, n_pairs > 0


def _best_of(left, right):
    """Segmented 'best IoU, first on ties' combine for ``lax.associative_scan``."""
    l_open, l_ok, l_inter, l_union, l_index = left
    r_open, r_ok, r_inter, r_union, r_index = right
    r_better = r_ok & (~l_ok | (compare_products(r_inter, l_union, l_inter, r_union) > 0))
    take_right = r_open | r_better
    pick = lambda a, b: jnp.where(take_right, b, a)  # noqa: E731
    return (l_open | r_open, pick(l_ok, r_ok), pick(l_inter, r_inter),
            pick(l_union, r_union), pick(l_index, r_index))


def match_counts(target: Segments, prediction: Segments, thresholds) -> tuple[jax.Array, ...]:
    """Per-threshold ``(tp, fp, fn)`` int32 ``[K]`` of one sequence (MS-TCN ``f_score``).

    ``thresholds`` is a static tuple of exact fractions ``(numerator, denominator)``.
    """
    owner, other, in_use, opens_group, last_pair, has_pairs = _overlapping_pairs(
        target, prediction)
    p_start, p_end = prediction.starts[owner], prediction.ends[owner]
    t_start, t_end = target.starts[other], target.ends[other]
    inter = jnp.minimum(p_end, t_end) - jnp.maximum(p_start, t_start)
    union = jnp.maximum(p_end, t_end) - jnp.minimum(p_start, t_start)
    candidate = in_use & (prediction.labels[owner] == target.labels[other]) & (inter > 0)
    inter = jnp.maximum(inter, 0)
    union = jnp.maximum(union, 1)

    _, ok, best_inter, best_union, best = lax.associative_scan(
        _best_of, (opens_group, candidate, inter, union, other))
    ok, best_inter, best_union, best = (x[last_pair] for x in (ok, best_inter, best_union, best))
    matched = has_pairs & ok

    numerators = jnp.array([num for num, _ in thresholds], jnp.int32)
    denominators = jnp.array([den for _, den in thresholds], jnp.int32)
    # IoU >= num / den  <=>  inter * den >= num * union (exact on integers).
    meets = matched[:, None] & (compare_products(
        best_inter[:, None], denominators, numerators, best_union[:, None]) >= 0)
    target_index = jnp.where(matched, best, target.labels.shape[-1])
    hit = jnp.zeros((target.labels.shape[-1], len(thresholds)), jnp.bool_)
    hit = hit.at[target_index].max(meets, mode="drop")
    tp = jnp.sum(hit, axis=0, dtype=jnp.int32)
    return tp, prediction.count - tp, target.count - tp
