"""MS-TCN segmental matching: TP, FP and FN at several IoU thresholds, without an S x S matrix.

Each predicted segment is compared with its best same-label target segment over all targets
(highest IoU, first index on ties); it is a TP at threshold tau iff that IoU >= tau and the
target is not taken yet. Hence TP(tau) is the number of distinct targets that are the best
match of some prediction with IoU >= tau, which needs no sequential loop.

Only overlapping same-label (prediction, target) pairs can match, and each overlaps the other
in exactly one run of the pair of label sequences: the frame pass marks the first frame of
every such overlap (:class:`jaxseg._src.segments.PairWords`), so there are at most
``S_p + S_t - 1`` candidates, found by selecting set bits. Scatter reductions then pick each
prediction's best target, comparing IoUs exactly as integer ratios.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from jaxseg._src.numerics import compare_products
from jaxseg._src.segments import PairWords, Segments, rank_bits, select_bits


class Candidates(NamedTuple):
    """Same-label overlapping (prediction, target) segment pairs of one sequence, in time order.

    Attributes:
      owner: int32 ``[M]`` index of the predicted segment (non-decreasing).
      other: int32 ``[M]`` index of the target segment.
      in_use: bool ``[M]`` which rows hold a pair.
      count: int32 the true number of pairs (``> M`` is an overflow).
    """

    owner: jax.Array
    other: jax.Array
    in_use: jax.Array
    count: jax.Array


def legacy_last_end(segments: Segments, n) -> Segments:
    """ASFormer/DiffAct/ASRF convention: a segment ending at the last frame ends one earlier."""
    ends = jnp.where(segments.valid & (segments.ends == n), n - 1, segments.ends)
    return segments._replace(ends=ends)


def candidate_bound(target_segments: int, predicted_segments: int, background: tuple) -> int:
    """The most candidate matches two sequences of ``S_t`` and ``S_p`` kept segments can have.

    A candidate is a run of the label pair where both labels agree (and are kept). Without
    background, two agreeing runs that follow each other are separated by a disagreeing run or
    by a frame where both sequences change label; counting the runs and boundaries of the pair
    gives ``A - 1 <= (S_t + S_p - 1 - A)``, so ``A <= (S_t + S_p) / 2``. With background the
    kept segments can be split by background runs (targets ``A 0 A 0 A`` against predictions
    ``A A A A A``: 3 candidates for 3 + 1 segments), and the bound is ``S_t + S_p - 1``.
    """
    if background:
        return max(target_segments + predicted_segments - 1, 1)
    return max((target_segments + predicted_segments) // 2, 1)


def match_candidates(
    words: PairWords, *, capacity: int, target_capacity: int, prediction_capacity: int
) -> Candidates:
    """The candidate matches of one sequence, from the first frames of their overlaps."""
    first, count = select_bits(words.matches, capacity)
    owner = rank_bits(words.prediction.starts, first)
    other = rank_bits(words.target.starts, first)
    return Candidates(
        jnp.clip(owner, 0, prediction_capacity - 1),
        jnp.clip(other, 0, target_capacity - 1),
        jnp.arange(capacity) < count,
        count,
    )


def _best_pairs(owner, candidate, inter, union, groups: int):
    """Per group (prediction): the first pair of highest ratio ``inter / union``, exactly.

    Returns the pair index of each group, or the number of pairs for a group without one.

    Ratios are first compared in float32 (rounding is monotone, so the exact maximum has the
    largest float); where several pairs of a group tie in float32, they are settled with
    exact integer comparisons against the earliest of them until no pair beats it.
    """
    pairs = owner.shape[-1]
    index = jnp.arange(pairs, dtype=jnp.int32)
    ratio = jnp.where(candidate, inter.astype(jnp.float32) / union.astype(jnp.float32), -1.0)
    top = jnp.full((groups,), -1.0, jnp.float32).at[owner].max(ratio)
    contenders = candidate & (ratio == top[owner])

    def earliest(contenders):
        return (
            jnp.full((groups,), pairs, jnp.int32).at[owner].min(jnp.where(contenders, index, pairs))
        )

    def keep_better(state):
        contenders, first, _ = state
        ref = jnp.minimum(first, pairs - 1)[owner]
        better = contenders & (compare_products(inter, union[ref], inter[ref], union) > 0)
        any_better = jnp.zeros((groups,), jnp.bool_).at[owner].max(better)
        contenders = jnp.where(any_better[owner], better, contenders)
        return contenders, earliest(contenders), jnp.any(any_better)

    first = earliest(contenders)
    tied = jnp.any(contenders & (index != first[owner]))  # usually False: no loop step
    return lax.while_loop(lambda state: state[2], keep_better, (contenders, first, tied))[1]


def candidate_overlaps(target: Segments, prediction: Segments, candidates: Candidates):
    """``(overlapping, intersection, union)`` ``[M]`` of every candidate pair, in frames
    (``intersection`` 0 and ``union`` 1 where ``overlapping`` is False)."""
    owner, other = candidates.owner, candidates.other
    p_start, p_end = prediction.starts[owner], prediction.ends[owner]
    t_start, t_end = target.starts[other], target.ends[other]
    inter = jnp.minimum(p_end, t_end) - jnp.maximum(p_start, t_start)
    union = jnp.maximum(p_end, t_end) - jnp.minimum(p_start, t_start)
    overlapping = candidates.in_use & (inter > 0)
    return overlapping, jnp.where(overlapping, inter, 0), jnp.where(overlapping, union, 1)


def match_counts(
    target: Segments, prediction: Segments, candidates: Candidates, thresholds
) -> tuple[jax.Array, ...]:
    """Per-threshold ``(tp, fp, fn)`` int32 ``[K]`` of one sequence (MS-TCN ``f_score``).

    ``thresholds`` is a static tuple of exact fractions ``(numerator, denominator)``.
    """
    owner, other = candidates.owner, candidates.other
    candidate, inter, union = candidate_overlaps(target, prediction, candidates)
    best_pair = _best_pairs(owner, candidate, inter, union, prediction.labels.shape[-1])
    matched = best_pair < owner.shape[-1]
    best_pair = jnp.minimum(best_pair, owner.shape[-1] - 1)
    best_inter, best_union, best = inter[best_pair], union[best_pair], other[best_pair]

    numerators = jnp.array([num for num, _ in thresholds], jnp.int32)
    denominators = jnp.array([den for _, den in thresholds], jnp.int32)
    # IoU >= num / den  <=>  inter * den >= num * union (exact on integers).
    meets = matched[:, None] & (
        compare_products(
            best_inter[:, None], denominators[None, :], numerators[None, :], best_union[:, None]
        )
        >= 0
    )
    target_index = jnp.where(matched, best, target.labels.shape[-1])
    hit = jnp.zeros((target.labels.shape[-1], len(thresholds)), jnp.bool_)
    hit = hit.at[target_index].max(meets, mode="drop")
    tp = jnp.sum(hit, axis=0, dtype=jnp.int32)
    return tp, prediction.count - tp, target.count - tp
