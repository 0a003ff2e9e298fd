"""MS-TCN segmental matching: TP, FP and FN at several IoU thresholds, without an S x S matrix.

Each predicted segment is compared with its best same-label target segment over all targets
(highest IoU, first index on ties); it is a TP at threshold tau iff that IoU >= tau and the
target is not taken yet. Hence TP(tau) is the number of distinct targets that are the best
match of some prediction with IoU >= tau, which needs no sequential loop.

Only overlapping same-label (prediction, target) pairs can match, and each overlaps the other
in exactly one run of the pair of label sequences: the frame pass marks the first frame of
every such overlap (:class:`jaxseg._src.segments.PairWords`), so there are at most
``S_p + S_t - 1`` candidates, found by selecting set bits. A prediction's candidates are
consecutive, so its best target is usually found by comparing neighbouring candidates, with
IoUs compared exactly as integer ratios; the distinct targets are counted as bits.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from jaxseg._src.batching import any_example
from jaxseg._src.numerics import compare_products, popcount
from jaxseg._src.segments import WORD_BITS, PairWords, Segments, rank_bits, select_bits

_MAX_DISTINCT_WORDS = 8  # distinct_count: up to 256 values as bits


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


def _best_pairs(owner, candidate, inter, union, groups: int, bound=None):
    """Per group (prediction): the first pair of highest ratio ``inter / union``, exactly
    (``bound`` as in :func:`_best_of_pairs`).

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
        order = compare_products(inter, union[ref], inter[ref], union, bound=bound)
        better = contenders & (order > 0)
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


def _neighbour(x, step: int, fill):
    """``x`` moved ``step`` rows along the last axis (``+1``: each row sees the next one)."""
    pad = [(0, 0)] * (x.ndim - 1)
    if step > 0:
        return jnp.pad(x[..., 1:], [*pad, (0, 1)], constant_values=fill)
    return jnp.pad(x[..., :-1], [*pad, (1, 0)], constant_values=fill)


def _best_of_pairs(owner, in_use, overlapping, inter, union, *, bound=None):
    """Whether each pair ``[..., M]`` is the best of its group, for groups of at most two rows.

    A row is its group's best when no earlier row of the group has an IoU at least as high
    and no later row a higher one (the first wins ties), compared exactly as integer ratios
    (``bound``: static, optional, the largest intersection or union, see
    :func:`~jaxseg._src.numerics.compare_products`).
    """
    same_next = in_use & _neighbour(in_use, 1, False) & (owner == _neighbour(owner, 1, -1))
    same_prev = _neighbour(same_next, -1, False)

    def beaten(step, strict):
        order = compare_products(
            _neighbour(inter, step, 0), union, inter, _neighbour(union, step, 1), bound=bound
        )
        return _neighbour(overlapping, step, False) & ((order > 0) if strict else (order >= 0))

    return overlapping & ~(same_prev & beaten(-1, False)) & ~(same_next & beaten(1, True))


def _best_flags(owner, in_use, overlapping, inter, union, *, groups: int, bound=None):
    """bool ``[M]``: whether each candidate pair is the best of its prediction's pairs.

    MS-TCN compares every prediction with its highest-IoU same-label target (the first on
    ties), so only these pairs can be true positives. Groups of one or two rows, the usual
    case, are settled by comparing neighbours; if any group is longer, every row goes through
    :func:`_best_pairs` instead. Under ``vmap`` that choice is one for all sequences
    (:func:`~jaxseg._src.batching.any_example`), so that the rare general case is one branch
    taken for the batch rather than a selection that computes both. ``bound`` as in
    :func:`_best_of_pairs`.
    """
    same_next = in_use[:-1] & in_use[1:] & (owner[:-1] == owner[1:])
    longer = any_example(same_next[:-1] & same_next[1:])

    def general(owner, in_use, overlapping, inter, union):
        best = _best_pairs(owner, overlapping, inter, union, groups, bound)
        return overlapping & (best[owner] == jnp.arange(owner.shape[-1]))

    args = (owner, in_use, overlapping, inter, union)
    return lax.cond(longer, general, functools.partial(_best_of_pairs, bound=bound), *args)


def distinct_count(index, chosen, size: int):
    """int32 ``[K]``: how many distinct values of ``index [M]`` (in ``[0, size)``) have a
    chosen row, for each column of ``chosen`` bool ``[M, K]``.

    Up to ``32 * 8`` values, one bit per value, OR-reduced over the rows (no scatter: XLA's
    CPU scatter costs several ns per update); beyond, a scatter into ``[size, K]``.
    """
    words = -(-size // WORD_BITS)
    if words > _MAX_DISTINCT_WORDS:
        seen = jnp.zeros((size, chosen.shape[-1]), jnp.bool_)
        seen = seen.at[jnp.clip(index, 0, size - 1)].max(chosen)
        return jnp.sum(seen, axis=0, dtype=jnp.int32)
    bit = jnp.uint32(1) << (index % WORD_BITS).astype(jnp.uint32)
    in_word = (index // WORD_BITS)[:, None] == jnp.arange(words)[None, :]
    masks = jnp.where(in_word[:, :, None] & chosen[:, None, :], bit[:, None, None], 0)
    union = lax.reduce(masks, jnp.uint32(0), lax.bitwise_or, (0,))
    return jnp.sum(popcount(union).astype(jnp.int32), axis=0)


def match_counts(
    target: Segments, prediction: Segments, candidates: Candidates, thresholds, *, frames: int
) -> tuple[jax.Array, ...]:
    """Per-threshold ``(tp, fp, fn)`` int32 ``[K]`` of one sequence (MS-TCN ``f_score``).

    A pair that is its prediction's best match and reaches ``tau`` is a TP unless its target
    was taken by an earlier prediction: TP is the number of distinct targets of such pairs.
    ``thresholds`` is a static tuple of exact fractions ``(numerator, denominator)``;
    ``frames`` (static) bounds every segment's length.
    """
    # Intersections and unions take at most ``frames``: with the denominators, the bound
    # under which their products are compared as int32 products.
    bound = max(frames, *(den for _, den in thresholds))
    overlapping, inter, union = candidate_overlaps(target, prediction, candidates)
    best = _best_flags(
        candidates.owner,
        candidates.in_use,
        overlapping,
        inter,
        union,
        groups=prediction.labels.shape[-1],
        bound=bound,
    )
    numerators = jnp.array([num for num, _ in thresholds], jnp.int32)
    denominators = jnp.array([den for _, den in thresholds], jnp.int32)
    # IoU >= num / den  <=>  inter * den >= num * union (exact on integers).
    meets = (
        compare_products(
            inter[:, None], denominators[None, :], numerators[None, :], union[:, None], bound=bound
        )
        >= 0
    )
    tp = distinct_count(candidates.other, best[:, None] & meets, target.labels.shape[-1])
    return tp, prediction.count - tp, target.count - tp
