"""MS-TCN segmental matching: TP, FP and FN at several IoU thresholds, without an S x S matrix.

Each predicted segment is compared with its best same-label target segment over all targets
(highest IoU, first index on ties); it is a TP at threshold tau iff that IoU >= tau and the
target is not taken yet. Hence TP(tau) is the number of distinct targets that are the best
match of some prediction with IoU >= tau, whatever the order of the predictions.

Only overlapping same-label (prediction, target) pairs can match, and each overlaps the other
in exactly one run of the pair of label sequences: the frame pass marks the first frame of
every such overlap (:class:`jaxseg._src.segments.PairWords`), so there are at most
``S_p + S_t - 1`` candidates, found by selecting set bits. In time order both segment indices
of the candidates never decrease: a prediction's candidates are consecutive rows, its best
target a segmented maximum over them (IoUs compared exactly as integer ratios), and the best
targets of successive predictions never decrease, so a taken target is one already counted.
The candidates are visited in fixed chunks, as many as a sequence has: no segment table and
no capacity, and one compiled program whatever the number of segments.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from jaxseg._src.batching import largest
from jaxseg._src.numerics import compare_products
from jaxseg._src.segments import (
    WORD_BITS,
    IndexedBits,
    PairWords,
    Segments,
    bits_before,
    index_bits,
    rank_bits,
    select_bits,
    select_ranks,
)

_NO_OWNER = jnp.iinfo(jnp.int32).max  # the owner of rows past the last candidate


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
        jnp.arange(capacity, dtype=jnp.int32) < count,
        count,
    )


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


class _Best(NamedTuple):
    """Candidate pairs as rows (int32 ``[...]``): the predicted segment that owns each, its
    target segment, and their intersection and union in frames."""

    owner: jax.Array
    target: jax.Array
    inter: jax.Array
    union: jax.Array


def _valid_positions(valid: IndexedBits | None, gaps):
    """The map from frames to their positions among the valid frames: the frame itself
    where the valid frames are a prefix (``valid`` None, or ``gaps`` False), else the number
    of valid frames before it.

    ``gaps`` is one flag for the whole batch (a ``lax.cond`` predicate that no ``vmap``
    batches): a batch of prefix masks, the usual padding, skips the ranking of every bound.
    """
    if valid is None:
        return lambda frames: frames
    ranked = functools.partial(bits_before, valid)
    return lambda frames: lax.cond(gaps, ranked, lambda f: f, frames)


def _segment_bounds(starts: IndexedBits, ends: IndexedBits | None, index, n, position):
    """Start and end (exclusive) of the kept segments ``index [C]`` (below their count), in
    valid frames (``position``: :func:`_valid_positions`): the end is the next segment's
    start, or ``n`` (``ends`` None: no background), or one past the segment's last frame in
    ``ends``."""
    if ends is not None:
        return position(select_ranks(starts, index)), position(select_ranks(ends, index) + 1)
    # Both bounds in one selection: a segment ends where the next one starts.
    rows = index.shape[-1]
    ranks = jnp.concatenate([index, jnp.minimum(index + 1, starts.total - 1)])
    frames = position(select_ranks(starts, ranks))
    return frames[:rows], jnp.where(index + 1 < starts.total, frames[rows:], n)


def _candidate_rows(words: PairWords, ends, n, position, ranks, *, legacy_asformer_end) -> _Best:
    """The candidates of ``ranks [C]`` (rows at or past the count get no owner)."""
    count = words.matches.total
    first = select_ranks(words.matches, jnp.clip(ranks, 0, jnp.maximum(count - 1, 0)))
    owner = rank_bits(words.prediction.starts, first)
    target = rank_bits(words.target.starts, first)
    p_start, p_end = _segment_bounds(words.prediction.starts, ends[1], owner, n, position)
    t_start, t_end = _segment_bounds(words.target.starts, ends[0], target, n, position)
    if legacy_asformer_end:
        p_end, t_end = (jnp.where(end == n, n - 1, end) for end in (p_end, t_end))
    inter = jnp.minimum(p_end, t_end) - jnp.maximum(p_start, t_start)
    union = jnp.maximum(p_end, t_end) - jnp.minimum(p_start, t_start)
    overlapping = (ranks < count) & (inter > 0)
    return _Best(
        jnp.where(ranks < count, owner, _NO_OWNER),
        target,
        jnp.where(overlapping, inter, 0),
        jnp.where(overlapping, union, 1),
    )


def _keep_best(earlier: _Best, later: _Best, *, bound: int) -> _Best:
    """``later``, or ``earlier`` where both have one owner and ``later``'s IoU is not higher.

    Over rows of non-decreasing owner this is associative, and its scan gives each row the
    first row of highest IoU among those of its owner up to it (MS-TCN's argmax: the first
    target on ties); IoUs are compared exactly, as integer products below ``bound**2``.
    """
    higher = compare_products(later.inter, earlier.union, earlier.inter, later.union, bound=bound)
    keep = (earlier.owner == later.owner) & (higher <= 0)
    return _Best(*(jnp.where(keep, a, b) for a, b in zip(earlier, later)))


def _inclusive_scan(combine, rows, levels):
    """Inclusive scan of the associative ``combine`` within runs of at most ``2**levels``
    rows (along the leading axis of ``rows``), by doubling: step ``k`` combines each row with
    the one ``2**k`` rows before it.

    ``levels`` (int32 scalar, may be traced) comes from the data: a prediction usually
    overlaps a few targets, so a few steps settle every group, where a full scan would take
    ``log2`` of the rows.
    """
    size = jax.tree_util.tree_leaves(rows)[0].shape[0]

    def level(k, rows):
        step = jnp.left_shift(1, k)
        earlier = jax.tree_util.tree_map(lambda x: jnp.roll(x, step, axis=0), rows)
        combined = combine(earlier, rows)
        has_earlier = jnp.arange(size, dtype=jnp.int32) >= step
        return jax.tree_util.tree_map(lambda x, c: jnp.where(has_earlier, c, x), rows, combined)

    return lax.fori_loop(0, levels, level, rows)


def _doubling_levels(owner):
    """Steps of :func:`_inclusive_scan` that cover the longest group of rows of one
    ``owner`` (rows past the last candidate aside); under ``jax.vmap``, of all examples."""
    index = jnp.arange(owner.shape[0], dtype=jnp.int32)
    starts = jnp.concatenate([jnp.ones(1, bool), owner[1:] != owner[:-1]])
    length = index - lax.cummax(jnp.where(starts, index, 0), axis=0) + 1
    longest = jnp.max(jnp.where(owner != _NO_OWNER, length, 1))
    return largest(32 - lax.clz(longest - 1))


def _closed_groups(open_group: _Best, rows: _Best, *, bound: int):
    """The best rows of the groups (owners) that ``rows [C]`` close, after the group left
    open by the rows before them: ``(bests [C], closes [C], group left open)``; row ``i``
    of ``bests`` is the best of a group that ends there where ``closes[i]``."""
    rows = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a[None], b]), open_group, rows)
    rows = lax.optimization_barrier(rows)
    levels = _doubling_levels(rows.owner)
    bests = _inclusive_scan(functools.partial(_keep_best, bound=bound), rows, levels)
    closes = rows.owner[:-1] != rows.owner[1:]
    return _Best(*(x[:-1] for x in bests)), closes, _Best(*(x[-1] for x in bests))


def _new_true_positives(bests: _Best, closes, last, thresholds, *, bound: int):
    """int32 ``[K]`` true positives of closed groups' ``bests [R]`` at each threshold, and
    the last target counted at each (-1: none).

    A best reaching the threshold is a TP unless an earlier prediction took its target. The
    targets of successive groups' bests never decrease (each group's candidates follow the
    previous group's in time), so a target is taken exactly when it is not above the last
    one counted.
    """
    numerators = jnp.array([num for num, _ in thresholds], jnp.int32)
    denominators = jnp.array([den for _, den in thresholds], jnp.int32)
    # IoU >= num / den  <=>  inter * den >= num * union (exact on integers).
    reaches = compare_products(
        bests.inter[:, None],
        denominators[None],
        numerators[None],
        bests.union[:, None],
        bound=bound,
    )
    counted = jnp.where(closes[:, None] & (reaches >= 0), bests.target[:, None], -1)
    before = jnp.concatenate([last[None], lax.cummax(counted, axis=0)[:-1]])
    new = (counted >= 0) & (counted > jnp.maximum(before, last[None]))
    return jnp.sum(new, axis=0, dtype=jnp.int32), jnp.maximum(last, jnp.max(counted, axis=0))


def match_counts(
    words: PairWords,
    n,
    thresholds,
    *,
    background: tuple,
    legacy_asformer_end: bool,
    chunk: int,
    valid: IndexedBits | None = None,
    gaps=True,
) -> tuple[jax.Array, ...]:
    """Per-threshold ``(tp, fp, fn)`` int32 ``[K]`` of one sequence (MS-TCN ``f_score``).

    The candidates are visited in time order, ``chunk`` rows per step of a loop that runs
    as many steps as the sequence has candidates (:func:`~jaxseg._src.batching.rows_per_step`
    of the batch); each step finds the rows' segment bounds by selecting bits, and the best
    rows of the groups it closes (:func:`_closed_groups`).
    ``thresholds`` is a static tuple of exact fractions ``(numerator, denominator)``;
    ``background`` (static) says whether segments end where the next starts. The valid
    frames are the first ``n``, or the set bits of ``valid`` (a mask's); ``gaps`` (a bool
    scalar, not batched) says whether the valid frames of any sequence of the batch have
    gaps: where none has, the bounds need not be ranked among them.

    >>> from jaxseg._src.segments import pair_words
    >>> y, p = jnp.array([1, 1, 1, 1, 2, 2]), jnp.array([1, 1, 3, 3, 2, 2])
    >>> words = pair_words(y, p, 6, ())
    >>> options = dict(background=(), legacy_asformer_end=False, chunk=128)
    >>> counts = match_counts(words, 6, ((1, 2),), **options)
    >>> [c.tolist() for c in counts]
    [[2], [1], [0]]
    """
    T = words.correct.shape[-1] * WORD_BITS
    ends = (None, None)
    if background:
        ends = (index_bits(words.target.ends), index_bits(words.prediction.ends))
    position = _valid_positions(valid, gaps)
    rows = functools.partial(
        _candidate_rows, words, ends, n, position, legacy_asformer_end=legacy_asformer_end
    )
    tp = _true_positives(
        rows, words.matches.total, thresholds, chunk=min(chunk, T), bound=_bound(T, thresholds)
    )
    return tp, words.prediction.starts.total - tp, words.target.starts.total - tp


def table_match_counts(
    target: Segments,
    prediction: Segments,
    candidates: Candidates,
    n,
    thresholds,
    *,
    legacy_asformer_end: bool,
    frames: int,
) -> tuple[jax.Array, ...]:
    """:func:`match_counts` from segment tables and their candidate matches (the
    Evaluator's, sized to the batch): the same loop, with the rows' bounds gathered from the
    tables, all candidates in one step; ``frames`` (static) bounds the segments' lengths."""
    if legacy_asformer_end:
        target, prediction = legacy_last_end(target, n), legacy_last_end(prediction, n)

    _, inter, union = candidate_overlaps(target, prediction, candidates)
    owner = jnp.where(candidates.in_use, candidates.owner, _NO_OWNER)
    bound = _bound(frames, thresholds)
    # One step over every row: a step with no candidate counts nothing, so none is skipped.
    state = _matching_step(
        _Best(owner, candidates.other, inter, union),
        _start(target.count, thresholds),
        thresholds,
        bound,
    )
    tp = _finish(state, thresholds, bound)
    return tp, prediction.count - tp, target.count - tp


def _bound(frames: int, thresholds) -> int:
    """The largest integer an IoU comparison of the matching multiplies (frames or a
    threshold's denominator)."""
    return max(frames, *(den for _, den in thresholds))


def _true_positives(rows, count, thresholds, *, chunk: int, bound: int):
    """int32 ``[K]`` true positives over ``count`` candidate rows (``rows(ranks [chunk])``
    gives them in time order), ``chunk`` rows per loop step."""

    def step(i, state):
        ranks = i * chunk + jnp.arange(chunk, dtype=jnp.int32)
        return _matching_step(rows(ranks), state, thresholds, bound)

    steps = -(-count // chunk)
    state = lax.fori_loop(count & 0, steps, step, _start(count, thresholds))
    return _finish(state, thresholds, bound)


def _start(like, thresholds):
    """The matching's state before any row: no open group, no TP, no target counted (derived
    from ``like``, so that it varies like the inputs under vmap and shard_map)."""
    zero = like & 0
    none = _Best(zero - 1, zero - 1, zero, zero + 1)
    return none, jnp.zeros(len(thresholds), jnp.int32) + zero, jnp.full(len(thresholds), -1) + zero


def _matching_step(rows: _Best, state, thresholds, bound: int):
    """The state after the candidate ``rows [C]`` that follow those of ``state``."""
    open_group, tp, last = state
    bests, closes, open_group = _closed_groups(open_group, rows, bound=bound)
    new, last = _new_true_positives(bests, closes, last, thresholds, bound=bound)
    return open_group, tp + new, last


def _finish(state, thresholds, bound: int):
    """int32 ``[K]`` true positives, the group left open counted."""
    open_group, tp, last = state
    final = jax.tree_util.tree_map(lambda x: x[None], open_group)
    return tp + _new_true_positives(final, jnp.ones(1, bool), last, thresholds, bound=bound)[0]
