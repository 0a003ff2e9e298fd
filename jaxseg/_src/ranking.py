"""Ranking metrics: average precision (step, VOC 11-point, all-point), calibrated AP, top-k.

Every score is ranked exactly: a float32 score becomes an int32 key with the same order, ties
are explicit (equal keys), and counts are int32 cumulative sums. Only the final ratios are
float32, and sums of ratios use a pairwise tree, so results match float64 references to ~1e-7.
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from jaxseg._src import checks
from jaxseg._src.batching import any_example
from jaxseg._src.numerics import count_ratio, nanmean, pairwise_sum, running_sum, safe_divide
from jaxseg._src.programs import one_program

INTERPOLATIONS = ("step", "11point", "all_point")
_SENTINEL = 0xFFFFFFFF
_SORT_PIECES, _SORT_PIECES_MIN = 24, 10  # _sort_rows: at least 10 sorts, or just one
_SORT_PIECE_LENGTH = 1 << 14  # _sort_rows: shorter rows are sorted at once
_KEY_MARGIN = 1 << 24  # _key_window: > the keys of all subnormal and zero scores
_SUM_BLOCK = 16  # _tree_sum: entries summed in order before the pairwise tree


class ClassScores(NamedTuple):
    """A metric per class and its mean over the classes where it is defined.

    Attributes:
      per_class: ``float32[..., C]`` (or ``[..., C, K]``); NaN where undefined or not scored.
      mean: ``float32[...]`` (or ``[..., K]``): mean over the non-NaN classes, NaN if none.
    """

    per_class: jax.Array
    mean: jax.Array


def nanmean_classes(per_class) -> ClassScores:
    """``per_class`` and its mean over the classes where it is defined (mmsegmentation's
    ``nanmean``)."""
    return ClassScores(per_class, nanmean(per_class))


class PrecisionRecallCurve(NamedTuple):
    """Precision and recall at every distinct score threshold, in a fixed-size table.

    Attributes:
      precision: ``float32[..., N]``, precision when predicting positive for scores >= threshold.
      recall: ``float32[..., N]``, recall at that threshold (NaN without positives).
      thresholds: ``float32[..., N]``, the scores in decreasing order.
      valid: ``bool[..., N]``, True at the last entry of each group of tied scores (one entry
        per distinct threshold); other entries are padding.
    """

    precision: jax.Array
    recall: jax.Array
    thresholds: jax.Array
    valid: jax.Array


# --------------------------------------------------------------------------------------------
# Exact ranking of rows
# --------------------------------------------------------------------------------------------
def descending_keys(scores: jax.Array, valid: jax.Array | None = None) -> jax.Array:
    """Integer keys whose ascending order is the decreasing order of ``scores``, entries where
    ``valid`` is False last: int64 keys of float64 scores (with ``jax_enable_x64``, so that
    scores that differ only in float64 stay apart, as in the float64 reference scripts),
    int32 keys of the scores as float32 otherwise.

    ``-0.0`` and ``0.0`` get the same key; subnormal scores keep their order (the bits are
    compared, not the floats, which XLA's CPU code may flush to zero). NaN is not supported
    (precondition).
    """
    wide = scores.dtype == jnp.float64
    kind = jnp.int64 if wide else jnp.int32
    bits = lax.bitcast_convert_type(scores if wide else scores.astype(jnp.float32), kind)
    largest = jnp.iinfo(kind).max
    bits = jnp.where(bits == jnp.iinfo(kind).min, 0, bits)  # -0.0 -> 0.0
    keys = ~jnp.where(bits < 0, bits ^ jnp.array(largest, kind), bits)
    return keys if valid is None else jnp.where(valid, keys, largest)


def key_order(keys: jax.Array) -> jax.Array:
    """Stable ascending order of :func:`descending_keys` along the last axis, ``int32[..., N]``
    (32-bit keys by :func:`stable_order`, 64-bit ones by a sort of (key, index) pairs)."""
    if keys.dtype == jnp.int64:
        return jnp.argsort(keys, axis=-1, stable=True).astype(jnp.int32)
    return stable_order(unsigned_keys(keys))


def unsigned_keys(keys: jax.Array) -> jax.Array:
    """The int32 ``keys`` as uint32 with the same order (sign bit flipped)."""
    return lax.bitcast_convert_type(keys, jnp.uint32) ^ jnp.uint32(0x80000000)


def stable_order(keys: jax.Array, *, key_bits: int = 32) -> jax.Array:
    """Stable argsort of uint32 ``keys < 2**key_bits`` along the last axis: ``int32[..., N]``.

    The order of ``lax.sort`` on (key, index) pairs. XLA's CPU sort is several times faster on
    one uint32 operand than on a pair, so on CPU the index goes into the low bits of the
    sorted word (:func:`_packed_stable_order`); other backends sort the pairs.

    >>> stable_order(jnp.array([3, 1, 3, 0], jnp.uint32)).tolist()
    [3, 1, 0, 2]
    """
    packed = functools.partial(_packed_stable_order, key_bits=key_bits)
    return lax.platform_dependent(keys, cpu=packed, default=_paired_stable_order)


def _paired_stable_order(keys: jax.Array) -> jax.Array:
    """:func:`stable_order` by a stable sort of (key, index) pairs."""
    index = lax.broadcasted_iota(jnp.int32, keys.shape, keys.ndim - 1)
    return lax.sort((keys, index), num_keys=1, is_stable=True)[1]


def _packed_stable_order(keys: jax.Array, *, key_bits: int) -> jax.Array:
    """:func:`stable_order` by sorts of single uint32 words that hold key bits and the index.

    The index goes into the low ``b = bit_length(N - 1)`` bits of the sorted word. When key
    and index do not fit in 32 bits, a first sort orders the top ``32 - b`` key bits with the
    index and a second sorts (group of equal top bits, remaining ``d`` key bits, index) in
    ``2b + d <= 32`` bits: together the exact stable order. Otherwise the pairs are sorted.
    """
    n = keys.shape[-1]
    index_bits = max(1, (n - 1).bit_length())
    index = lax.broadcasted_iota(jnp.uint32, keys.shape, keys.ndim - 1)
    dropped = max(0, key_bits + index_bits - 32)  # key bits that do not fit next to the index
    if dropped and 2 * index_bits + dropped > 32:
        return _paired_stable_order(keys)
    low = jnp.uint32((1 << index_bits) - 1)
    first = jnp.sort(((keys >> dropped) << index_bits) | index, axis=-1)
    order = first & low
    if dropped:
        top = first >> index_bits
        before = jnp.pad(top[..., :-1], [(0, 0)] * (top.ndim - 1) + [(1, 0)])
        group = (cumulative_count((top != before) | (index == 0)) - 1).astype(jnp.uint32)
        rest = jnp.take_along_axis(keys, order.astype(jnp.int32), axis=-1)
        rest = rest & jnp.uint32((1 << dropped) - 1)
        second = (group << (dropped + index_bits)) | (rest << index_bits) | order
        order = jnp.sort(second, axis=-1) & low
    return order.astype(jnp.int32)


def _tree_sum(x: jax.Array) -> jax.Array:
    """Sum over the last axis: blocks of 16 in order, then pairwise halving (rounding error
    ~16 + log2(N / 16) ulps). The blocks spare padding a long row to a power of two.

    Zeros appended to a row leave the sum unchanged bit for bit (a block adds them last, and
    zero blocks form whole subtrees), so a metric does not depend on the row's padding (a
    streaming buffer's capacity). A block is summed as 16 slices added one by one, not by
    ``jnp.sum``: XLA:CPU runs a sum over a short axis as a separate library kernel, so the
    summands were written out first and the sums of all rows ran one after another once
    every sort was done, rather than beside the sorts (``benchmarks/ranking.py``)."""
    padded = max(1, -(-x.shape[-1] // _SUM_BLOCK)) * _SUM_BLOCK
    x = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, padded - x.shape[-1])])
    blocks = x.reshape(*x.shape[:-1], padded // _SUM_BLOCK, _SUM_BLOCK)
    return pairwise_sum(functools.reduce(operator.add, [blocks[..., i] for i in range(_SUM_BLOCK)]))


def cumulative_count(x: jax.Array) -> jax.Array:
    """Inclusive cumulative sum of a 0/1 array along the last axis, as int32 (exact).

    Every 32 entries become the bits of a uint32 word; an entry's count is the running sum of
    the words' popcounts before its word plus the popcount of its word's lower bits. Only the
    word counts are summed in a separate pass: the rest is elementwise, computed in the pass
    that uses the counts (a float matrix product over all entries costs several times more
    there).
    """
    n = x.shape[-1]
    if n == 0:
        return jnp.zeros(x.shape, jnp.int32)
    padded = -(-n // 32) * 32
    bits = jnp.pad(x.astype(jnp.uint32), [(0, 0)] * (x.ndim - 1) + [(0, padded - n)])
    bits = bits.reshape(*x.shape[:-1], padded // 32, 32)
    lane = lax.broadcasted_iota(jnp.uint32, bits.shape, bits.ndim - 1)
    words = jnp.sum(bits << lane, axis=-1, dtype=jnp.uint32)
    ones = lax.population_count(words).astype(jnp.int32)
    before = running_sum(ones, largest=32) - ones
    upto = words[..., None] & (jnp.uint32(0xFFFFFFFF) >> (31 - lane))
    count = before[..., None] + lax.population_count(upto).astype(jnp.int32)
    return count.reshape(*x.shape[:-1], padded)[..., :n]


def suffix_max(values: jax.Array, segment_end: jax.Array | None = None) -> jax.Array:
    """Maximum of ``values[..., i:]`` along the last axis, restarting after each segment end.

    With ``segment_end`` (bool, same shape), the maximum at ``i`` stops at the first ``j >= i``
    where ``segment_end[j]``. A ``lax.scan`` runs over the 32 positions of every block at once;
    the block heads are combined by the same function, recursively (O(N) work in a few short
    loops; ``lax.cummax`` is O(N^2) on CPU, and a log-step doubling chain gets fused with its
    producer, which XLA then recomputes at every step).
    """
    n = values.shape[-1]
    if segment_end is None:
        segment_end = jnp.zeros(values.shape, bool)
    low = jnp.asarray(-jnp.inf, values.dtype)
    block = max(1, min(32, n))
    num_blocks = -(-n // block)
    pad = [(0, 0)] * (values.ndim - 1) + [(0, num_blocks * block - n)]
    v = jnp.pad(values, pad, constant_values=low).reshape(*values.shape[:-1], num_blocks, block)
    f = jnp.pad(segment_end, pad, constant_values=True).reshape(v.shape)

    def step(after, entry):  # after: (maximum, segment ended) over the block's later entries
        value, end = entry
        out = (jnp.where(end, value, jnp.maximum(value, after[0])), end | after[1])
        return out, out

    init = (jnp.full(v.shape[:-1], low), jnp.zeros(v.shape[:-1], bool))
    entries = (jnp.moveaxis(v, -1, 0), jnp.moveaxis(f, -1, 0))
    _, (v, f) = lax.scan(step, init, entries, reverse=True)
    v, f = jnp.moveaxis(v, 0, -1), jnp.moveaxis(f, 0, -1)
    if num_blocks > 1:  # carry the maximum in from the following blocks
        heads = suffix_max(v[..., 0], f[..., 0])
        incoming = jnp.concatenate([heads[..., 1:], jnp.full(heads[..., :1].shape, low)], -1)
        v = jnp.where(f, v, jnp.maximum(v, incoming[..., None]))
    return v.reshape(*values.shape[:-1], num_blocks * block)[..., :n]


def _sort_rows(x: jax.Array, pieces: int) -> tuple[jax.Array, ...]:
    """Sorts each row of ``x [R, N]`` as ``pieces`` independent sorts of consecutive rows;
    returns the sorted blocks (concatenated where they are used, so that XLA reads them there
    instead of copying them into one array first)."""
    bounds = [x.shape[0] * i // pieces for i in range(pieces + 1)]
    return tuple(jnp.sort(x[a:b], axis=-1) for a, b in itertools.pairwise(bounds))


def _cpu_sort_pieces(rows: int, n: int, metrics: int) -> int:
    """How many independent sorts XLA:CPU makes of ``rows`` rows of ``n`` entries when
    ``metrics`` values are computed per sorted row: up to ``24 / metrics`` for ten or more
    long rows, else 1.

    XLA:CPU runs independent operations side by side only when more than 8 are ready at once
    (its thunk executor's split threshold), so there one sort of all rows uses one core while
    ten or more sorts of a few rows each use them all. The number of sorts (one per row for
    one metric, one per two rows when the work after each sort doubles) was chosen by
    measurement (``benchmarks/README.md``, ranking section); other backends sort all rows at
    once.
    """
    pieces = min(rows, max(_SORT_PIECES_MIN, _SORT_PIECES // metrics))
    if pieces < _SORT_PIECES_MIN or n < _SORT_PIECE_LENGTH:
        return 1
    return pieces


class _Ranked(NamedTuple):
    """Rows sorted by decreasing score (invalid entries last)."""

    key: jax.Array  # integer [R, N]: equal keys = tied scores (valid entries only)
    positive: jax.Array  # int32 [R, N] in {0, 1}; 0 for invalid entries
    valid: jax.Array  # bool [R, N]


Rows = Callable[[], tuple[jax.Array, jax.Array, jax.Array]]
RowValues = Callable[[_Ranked, jax.Array], tuple[jax.Array, ...]]  # per-row values


def _row_keys(rows: Rows) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``rows()`` as ``[R, N]`` keys (:func:`descending_keys`), positive flags and validity."""
    targets, scores, valid = rows()
    return descending_keys(scores).T, (targets & valid).T, valid.T


def _unpack(words: jax.Array) -> _Ranked:
    """The ranking stored as sorted ``(key - lowest) << 1 | positive`` words."""
    valid = words != jnp.uint32(_SENTINEL)
    return _Ranked(words >> 1, jnp.where(valid, words & 1, 0).astype(jnp.int32), valid)


def _key_window(scores: jax.Array, valid: jax.Array) -> tuple[jax.Array, jax.Array]:
    """A lower bound ``lo`` (uint32 ``[R, 1]``) of each row's valid unsigned keys, and whether
    every row's valid keys lie within ``lo + 2^31 - 2``; ``scores``/``valid`` are ``[N, R]``.

    From the largest and smallest valid float scores: a vectorized float reduction, much
    faster on CPU than an integer one over the keys. XLA's CPU code may treat subnormal
    scores as zeros there, so both bounds are widened by ``_KEY_MARGIN`` keys, more than all
    subnormal and zero scores span.
    """
    scores = scores.astype(jnp.float32)
    top = jnp.max(jnp.where(valid, scores, -jnp.inf), axis=0)
    bottom = jnp.min(jnp.where(valid, scores, jnp.inf), axis=0)
    first, last = unsigned_keys(descending_keys(top)), unsigned_keys(descending_keys(bottom))
    lo = first - jnp.minimum(first, jnp.uint32(_KEY_MARGIN))
    span = last - lo  # wraps when no entry is valid (first > last): nothing to fit then
    fits = jnp.all((first > last) | (span <= jnp.uint32((1 << 31) - 2 - _KEY_MARGIN)))
    return lo[:, None], fits


def _rank_grouped(rows: Rows, row_values: tuple[RowValues, ...]) -> tuple:
    """Each ``row_values(ranked, after)`` of rows ranked by decreasing score (see
    :func:`_with_ties` for ``after``); inside a group of tied scores the positives come last.

    ``rows`` is called inside each branch, so that XLA computes the keys within the branch's
    first pass instead of storing them for the ``cond``, which returns only per-row values.
    A three-operand sort of (validity, key, label) (:func:`_rank_sorted`); on CPU, where
    sorting one operand is several times faster, key and label packed into one word
    (:func:`_rank_packed`) for float32 scores. Both give the same groups and labels.
    """
    packed, general = (functools.partial(f, rows, row_values) for f in (_rank_packed, _rank_sorted))
    if jax.eval_shape(rows)[1].dtype == jnp.float64:  # 64-bit keys: no room for the label
        return general()
    return lax.platform_dependent(cpu=packed, default=general)


def _rank_sorted(rows: Rows, row_values: tuple[RowValues, ...]) -> tuple:
    """:func:`_rank_grouped` by one sort of (validity, key, label) triples."""
    keys, positive, valid = _row_keys(rows)
    invalid = (~valid).astype(jnp.int32)
    stored = lax.sort((invalid, keys, positive.astype(jnp.int32)), num_keys=3)

    def view(stored):
        inv, key, pos = stored
        return _Ranked(key, jnp.where(inv == 0, pos, 0), inv == 0)

    return _with_ties((stored,), view, row_values)


def _rank_packed(rows: Rows, row_values: tuple[RowValues, ...]) -> tuple:
    """:func:`_rank_grouped` by sorts of single uint32 words ``(key - lowest) << 1 | label``,
    in pieces of rows (:func:`_cpu_sort_pieces`), when every row's valid keys fit in a window
    of 2^31; otherwise :func:`_rank_sorted`."""
    _, scores, valid = rows()
    lo, fits = _key_window(scores, valid)

    def packed():
        keys, positive, valid = _row_keys(rows)
        word = ((unsigned_keys(keys) - lo) << 1) | positive.astype(jnp.uint32)  # < _SENTINEL
        word = jnp.where(valid, word, jnp.uint32(_SENTINEL))
        blocks = _sort_rows(word, _cpu_sort_pieces(*word.shape, len(row_values)))
        return _with_ties(blocks, _unpack, row_values)

    # Under vmap, one branch for every example: the general one unless all of them fit.
    return lax.cond(any_example(~fits), lambda: _rank_sorted(rows, row_values), packed)


def _with_ties(blocks, view, row_values: tuple[RowValues, ...]) -> tuple:
    """Each ``row_values(ranked, after)`` of the ranking stored in ``blocks`` of consecutive
    rows (``view(block)``: the block as :class:`_Ranked`), where ``after`` is, for each
    positive entry, the number of entries after it in its group of tied scores.

    Positives come last in their group (see :func:`_rank_grouped`), so these entries are the
    positives tied with it that follow it. The common case, at most two tied positives, takes
    one comparison with the next entry, in the passes of ``row_values`` over each block (they
    run side by side, on blocks that stay in cache); a longer run recomputes all rows with
    :func:`_group_end`. ``after`` of other entries: undefined.
    """

    def short_runs(ranked):  # (positive entries are valid)
        key, pos, _ = ranked
        same = (key[:, 1:] == key[:, :-1]) & (pos[:, 1:] > 0) & (pos[:, :-1] > 0)
        tied = jnp.pad(same, [(0, 0), (0, 1)])  # a positive followed by a tied positive
        values = tuple(fn(ranked, tied.astype(jnp.int32)) for fn in row_values)
        return values, jnp.any(same[:, :-1] & same[:, 1:])

    def long_runs():
        ranked = view(jax.tree.map(lambda *parts: jnp.concatenate(parts), *blocks))
        tail = _group_end(ranked) - lax.broadcasted_iota(jnp.int32, ranked.key.shape, 1)
        return tuple(fn(ranked, tail) for fn in row_values)

    values, longer = zip(*(short_runs(view(block)) for block in blocks))
    values = jax.tree.map(lambda *parts: jnp.concatenate(parts), *values)
    return lax.cond(any_example(jnp.stack(longer)), long_runs, lambda: values)


def _rank_stable(keys, positive, valid) -> _Ranked:
    """Sorts rows by key; tied scores keep their input order (the VOC anchors' ranking)."""
    invalid = (~valid).astype(jnp.int32)
    inv, key, pos = lax.sort(
        (invalid, keys, positive.astype(jnp.int32)), num_keys=2, is_stable=True
    )
    sorted_valid = inv == 0
    return _Ranked(key, jnp.where(sorted_valid, pos, 0), sorted_valid)


def _group_end(ranked: _Ranked) -> jax.Array:
    """Index of the last entry of each entry's group of tied scores, ``int32[R, N]``."""
    rows, n = ranked.key.shape
    index = lax.broadcasted_iota(jnp.int32, ranked.key.shape, 1)
    prev_key = jnp.concatenate([ranked.key[:, :1], ranked.key[:, :-1]], axis=1)
    first = (index == 0) | (prev_key != ranked.key) | ~ranked.valid
    group = cumulative_count(first) - 1
    group = (group + lax.broadcasted_iota(jnp.int32, group.shape, 0) * n).reshape(-1)
    last = jax.ops.segment_max(
        index.reshape(-1), group, num_segments=rows * n, indices_are_sorted=True
    )
    return last[group].reshape(rows, n)


def _gather(x, index):
    n = x.shape[-1]
    return jnp.take_along_axis(x, jnp.minimum(index, n - 1), axis=-1)


def _precision_sum(ranked: _Ranked, after: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The sum over positives of the precision at their group's threshold, and the number of
    positives ranked (see :func:`_step_ap`)."""
    tp = cumulative_count(ranked.positive)
    tp_end = tp + after  # the group ends `after` entries later, all positive
    seen = lax.broadcasted_iota(jnp.int32, tp.shape, 1) + 1 + after
    precision = safe_divide(tp_end.astype(jnp.float32), seen.astype(jnp.float32))
    return _tree_sum(jnp.where(ranked.positive > 0, precision, 0.0)), tp[:, -1]


def _step_ap(precision_sum, num_positives=None) -> jax.Array:
    """scikit-learn's AP from :func:`_precision_sum`: the mean over positives of the precision
    at their group's threshold (``num_positives``: the recall denominator; by default, the
    positives ranked)."""
    total, ranked = precision_sum
    positives = ranked if num_positives is None else num_positives
    return safe_divide(total, positives.astype(jnp.float32), jnp.nan)


def _calibrated_ap(ranked: _Ranked, after: jax.Array) -> tuple[jax.Array]:
    """cAP: mean over positives of TP / (TP + FP / w) at their group's threshold."""
    tp = cumulative_count(ranked.positive)
    tp_end = tp + after  # the group ends `after` entries later, all positive
    fp_end = lax.broadcasted_iota(jnp.int32, tp.shape, 1) + 1 - tp
    num_pos = tp[..., -1:]
    num_neg = jnp.sum(ranked.valid, axis=-1, keepdims=True, dtype=jnp.int32) - num_pos
    weighted_tp = tp_end.astype(jnp.float32) * num_neg.astype(jnp.float32)
    weighted_fp = fp_end.astype(jnp.float32) * num_pos.astype(jnp.float32)
    cprec = safe_divide(weighted_tp, weighted_tp + weighted_fp, 1.0)
    total = _tree_sum(jnp.where(ranked.positive > 0, cprec, 0.0))
    return (safe_divide(total, num_pos[..., 0].astype(jnp.float32), jnp.nan),)


def _voc_precision(ranked: _Ranked):
    tp = cumulative_count(ranked.positive)
    rank = lax.broadcasted_iota(jnp.int32, tp.shape, tp.ndim - 1) + 1
    precision = jnp.where(ranked.valid, count_ratio(tp, rank), 0.0)  # see count_ratio
    return tp, suffix_max(precision)


def _all_point_ap_rows(ranked: _Ranked, num_positives) -> jax.Array:
    """Area under the monotone precision envelope (VOC2010+, ActivityNet)."""
    _, envelope = _voc_precision(ranked)
    total = _tree_sum(jnp.where(ranked.positive > 0, envelope, 0.0))
    return safe_divide(total, num_positives.astype(jnp.float32), jnp.nan)


def recall_reaches(tp, num_positives, tenth: int):
    """Whether ``tp / num_positives >= fl(0.1 * tenth)`` as the float64 anchors decide it.

    ``np.linspace(0, 1, 11)`` holds 0.30000000000000004, 0.6000000000000001 and
    0.7000000000000001, which a recall of exactly 3/10, 6/10, 7/10 does not reach.
    Exact for every int32 count (and float counts below 2**24): ``10 tp >= tenth npos`` is
    decided as ``10 (tp - tenth q) >= tenth r`` with ``npos = 10 q + r``, where only the sign
    and the few values of ``tp - tenth q`` near 0 matter (``10 tp`` wrapped past int32).
    """
    q, r = num_positives // 10, num_positives % 10
    lhs = 10 * jnp.clip(tp - tenth * q, -10, 10)
    rhs = tenth * r
    return (lhs > rhs) if tenth in (3, 6, 7) else (lhs >= rhs)


def _eleven_point_ap_rows(ranked: _Ranked, num_positives) -> jax.Array:
    """VOC2007: mean over t in {0, 0.1, ..., 1} of the best precision at recall >= t."""
    tp, envelope = _voc_precision(ranked)
    n = tp.shape[-1]
    npos = num_positives[..., None]
    values = []
    for tenth in range(11):
        below = ranked.valid & ~recall_reaches(tp, npos, tenth)
        first = jnp.sum(below, axis=-1, keepdims=True, dtype=jnp.int32)
        reached = jnp.take_along_axis(ranked.valid, jnp.minimum(first, n - 1), axis=-1)
        value = jnp.where(reached & (first < n), _gather(envelope, first), 0.0)
        values.append(value[..., 0])
    mean = _tree_sum(jnp.stack(values, axis=-1)) / 11.0
    return jnp.where(num_positives > 0, mean, jnp.nan)


def _no_entries(rows: Rows) -> jax.Array | None:
    """NaN per row when the rows are empty (nothing to rank), else None."""
    entries, num_rows = rows()[1].shape
    return jnp.full(num_rows, jnp.nan, jnp.float32) if entries == 0 else None


def ap_rows(rows: Rows, *, interpolation: str, num_positives=None) -> jax.Array:
    """AP of each of ``R`` rankings; ``rows()`` gives ``[N, R]`` targets (bool), scores (float)
    and valid (bool), one column per ranking: a function rather than arrays, so that they are
    computed where they are used (by the sort's first pass, after reductions over ``N``)."""
    if (empty := _no_entries(rows)) is not None:
        if num_positives is None:
            return empty
        # nothing ranked, as when every entry is masked: recall 0 of num_positives
        return safe_divide(jnp.zeros_like(empty), num_positives.astype(jnp.float32), jnp.nan)
    if interpolation == "step":
        return _step_ap(_rank_grouped(rows, (_precision_sum,))[0], num_positives)
    targets, scores, valid = (x.T for x in rows())
    positive = (targets & valid).astype(jnp.int32)
    if num_positives is None:
        num_positives = jnp.sum(positive, axis=-1, dtype=jnp.int32)
    ranked = _rank_stable(descending_keys(scores), positive, valid)
    if interpolation == "all_point":
        return _all_point_ap_rows(ranked, num_positives)
    return _eleven_point_ap_rows(ranked, num_positives)


def cap_rows(rows: Rows) -> jax.Array:
    """Calibrated AP of each row (``rows`` as in :func:`ap_rows`)."""
    if (empty := _no_entries(rows)) is not None:
        return empty
    return _rank_grouped(rows, (_calibrated_ap,))[0][0]


def ap_and_cap_rows(rows: Rows, *, interpolation: str) -> tuple[jax.Array, jax.Array]:
    """AP and calibrated AP of each row (``rows`` as in :func:`ap_rows`); with
    ``interpolation="step"`` both come from one ranking."""
    if interpolation != "step" or _no_entries(rows) is not None:
        return ap_rows(rows, interpolation=interpolation), cap_rows(rows)
    precision_sum, (cap,) = _rank_grouped(rows, (_precision_sum, _calibrated_ap))
    return _step_ap(precision_sum), cap


# --------------------------------------------------------------------------------------------
# Argument handling
# --------------------------------------------------------------------------------------------
def binary_targets(name, value):
    """``value`` as bool (nonzero = positive); floats raise ``TypeError`` naming ``name``."""
    value = jnp.asarray(value)
    if not (value.dtype == jnp.bool_ or jnp.issubdtype(value.dtype, jnp.integer)):
        raise TypeError(f"{name} must be bool or integer (nonzero = positive), got {value.dtype}.")
    return value if value.dtype == jnp.bool_ else value != 0


def _rows(targets, scores, *, min_ndim=1):
    targets = binary_targets("targets", targets)
    scores = checks.as_float("scores", scores, min_ndim=min_ndim)
    checks.same_shape("targets", targets, "scores", scores)
    return targets, scores


# --------------------------------------------------------------------------------------------
# Public metrics
# --------------------------------------------------------------------------------------------
@one_program
def average_precision(
    targets: jax.typing.ArrayLike,
    scores: jax.typing.ArrayLike,
    *,
    mask: jax.typing.ArrayLike | None = None,
    interpolation: str = "step",
    num_positives: jax.typing.ArrayLike | None = None,
) -> jax.Array:
    r"""Average precision of one ranking per row.

    Entries are ranked by decreasing score; ``P_i``/``R_i`` are precision and recall of the top
    ``i``. ``"step"`` (scikit-learn): :math:`AP = \sum_n (R_n - R_{n-1}) P_n` over distinct
    thresholds, tied scores entering together. ``"all_point"`` (VOC2010+, ActivityNet): area
    under the envelope :math:`\max_{j \ge i} P_j`. ``"11point"`` (VOC2007): mean over
    :math:`t \in \{0, 0.1, \dots, 1\}` of :math:`\max\{P_i : R_i \ge t\}` (0 if none). The VOC
    variants rank tied scores in input order (stable), like their anchors.

    Args:
      targets: ``bool`` or integer ``[..., N]``; nonzero = positive.
      scores: float ``[..., N]``, higher = more confident (no NaN).
      mask: optional ``bool[..., N]``, True = valid; invalid entries are removed first.
      interpolation: static, ``"step"`` (default), ``"11point"`` or ``"all_point"``.
      num_positives: optional int ``[...]``: recall denominator including positives that were
        never scored (missed detections), at least the valid positive targets; default: the
        number of valid positive targets.

    Returns:
      ``float32[...]`` in [0, 1]; NaN when there are no positives (0/0 recall), and where
      ``num_positives`` is fewer than the valid positive targets (a recall above 1).

    >>> float(average_precision(jnp.array([1, 0, 1]), jnp.array([0.9, 0.8, 0.7])))
    0.8333333...

    References:
      scikit-learn ``average_precision_score``; Everingham et al., "The PASCAL Visual Object
      Classes (VOC) Challenge", IJCV 2010.

    Note: scikit-learn returns 0.0 (with a warning) without positives; we return NaN.
    """
    interpolation = checks.static_choice("interpolation", interpolation, INTERPOLATIONS)
    targets, scores = _rows(targets, scores)
    valid = checks.as_valid(mask, targets.shape)
    batch = targets.shape[:-1]
    shape = (math.prod(batch), targets.shape[-1])
    if num_positives is not None:
        num_positives = checks.as_int_labels("num_positives", num_positives, min_ndim=0)
        if num_positives.shape != batch:
            raise ValueError(f"num_positives must have shape {batch}, got {num_positives.shape}.")
        num_positives = num_positives.reshape(shape[0]).astype(jnp.int32)
    out = ap_rows(
        lambda: (targets.reshape(shape).T, scores.reshape(shape).T, valid.reshape(shape).T),
        interpolation=interpolation,
        num_positives=num_positives,
    ).reshape(batch)
    if num_positives is None:
        return out
    counted = jnp.sum(targets.astype(bool) & valid, axis=-1, dtype=jnp.int32)
    return jnp.where(num_positives.reshape(batch) < counted, jnp.nan, out)


@one_program
def precision_recall_curve(
    targets: jax.typing.ArrayLike,
    scores: jax.typing.ArrayLike,
    *,
    mask: jax.typing.ArrayLike | None = None,
) -> PrecisionRecallCurve:
    """Precision and recall at every distinct score threshold, as a fixed-size table.

    Entry ``i`` of each row describes the ``i``-th largest valid score; it is a real point of
    the curve (``valid``) when it is the last of its group of tied scores, so tied scores enter
    together, as in scikit-learn. Invalid (masked) entries come last with ``valid`` False.

    Args:
      targets: ``bool`` or integer ``[..., N]``; nonzero = positive.
      scores: float ``[..., N]`` (no NaN).
      mask: optional ``bool[..., N]``, True = valid.

    Returns:
      :class:`PrecisionRecallCurve` of ``[..., N]`` arrays, in decreasing threshold order
      (scikit-learn's output reversed, without its final (recall 0, precision 1) point).

    >>> curve = precision_recall_curve(jnp.array([1, 0, 1]), jnp.array([0.9, 0.5, 0.5]))
    >>> curve.precision[curve.valid].tolist(), curve.recall[curve.valid].tolist()
    ([1.0, 0.6666666865348816], [0.5, 1.0])
    """
    targets, scores = _rows(targets, scores)
    valid = checks.as_valid(mask, targets.shape)
    shape = targets.shape
    n = shape[-1]
    if n == 0:
        empty = jnp.zeros(shape, jnp.float32)
        return PrecisionRecallCurve(empty, empty, empty, jnp.zeros(shape, bool))
    targets, scores, valid = (x.reshape(-1, n) for x in (targets, scores, valid))
    positive = (targets & valid).astype(jnp.int32)
    invalid = (~valid).astype(jnp.int32)
    inv, _, sorted_scores, pos = lax.sort(
        (invalid, descending_keys(scores), scores, positive), num_keys=2
    )
    ranked = _Ranked(descending_keys(sorted_scores), pos, inv == 0)
    end = _group_end(ranked)
    index = lax.broadcasted_iota(jnp.int32, end.shape, 1)
    tp = cumulative_count(pos)
    precision = count_ratio(tp, index + 1)  # correctly rounded: see count_ratio
    recall = count_ratio(tp, tp[..., -1:], jnp.nan)  # one total per row: see count_ratio
    point = ranked.valid & (end == index)
    return PrecisionRecallCurve(
        *(x.reshape(shape) for x in (precision, recall, sorted_scores, point))
    )


def scored_classes(num_classes: int, background, ambiguous) -> tuple:
    """The static ``background`` and ``ambiguous`` tuples, checked against [0, C), and the
    classes scored (neither), in order."""
    background = checks.static_labels("background", background)
    ambiguous = checks.static_labels("ambiguous", ambiguous)
    for name, labels in (("background", background), ("ambiguous", ambiguous)):
        for c in labels:
            if not 0 <= c < num_classes:
                raise ValueError(f"{name} classes must lie in [0, {num_classes}), got {c}.")
    scored = tuple(c for c in range(num_classes) if c not in background + ambiguous)
    return background, ambiguous, scored


def without_ambiguous(valid, targets, ambiguous: tuple[int, ...]):
    """``valid`` less the frames positive for an ``ambiguous`` class (multi-hot ``targets``
    ``[..., C]``): LSTR removes them from every class."""
    if not ambiguous:
        return valid
    return valid & ~jnp.any(select_columns(targets, list(ambiguous)), axis=-1)


def _per_class(targets, scores, mask, background, ambiguous):
    """Rows ``[..., C, N]`` and the frame validity after dropping ambiguous frames."""
    targets, scores = _rows(targets, scores, min_ndim=2)
    _, ambiguous, scored = scored_classes(targets.shape[-1], background, ambiguous)
    valid = without_ambiguous(checks.as_valid(mask, targets.shape[:-1]), targets, ambiguous)
    return targets, scores, valid, scored


def select_columns(x: jax.Array, columns: list[int]) -> jax.Array:
    """``x[..., columns]`` as slices of consecutive columns (a gather is several times slower)."""
    if not columns:
        return x[..., :0]
    runs = [[columns[0]]]
    for c in columns[1:]:
        if c == runs[-1][-1] + 1:
            runs[-1].append(c)
        else:
            runs.append([c])
    return jnp.concatenate([x[..., run[0] : run[-1] + 1] for run in runs], axis=-1)


def _over_classes(row_fn, targets, scores, valid, scored) -> tuple[ClassScores, ...]:
    """``row_fn(rows)``, a tuple of per-row values (``rows`` as in :func:`ap_rows`), over the
    class columns ``scored``: each value as :class:`ClassScores`, NaN for the other classes."""
    *batch, n, num_classes = targets.shape
    columns = list(scored)
    shape = (n, math.prod(batch) * len(columns))

    def rows():  # [N, rows]: the rows are (batch, column) pairs
        to_rows = lambda x: jnp.moveaxis(x, -2, 0).reshape(shape)  # noqa: E731
        valid_rows = jnp.broadcast_to(valid[..., None], (*batch, n, len(columns)))
        return (
            to_rows(select_columns(targets, columns)),
            to_rows(select_columns(scores, columns)),
            to_rows(valid_rows),
        )

    out = jnp.full((*batch, num_classes), jnp.nan, jnp.float32)
    return tuple(
        nanmean_classes(out.at[..., columns].set(values.reshape(*batch, len(columns))))
        for values in row_fn(rows)
    )


@one_program
def mean_average_precision(
    targets: jax.typing.ArrayLike,
    scores: jax.typing.ArrayLike,
    *,
    mask: jax.typing.ArrayLike | None = None,
    background: tuple[int, ...] = (),
    ambiguous: tuple[int, ...] = (),
    interpolation: str = "step",
) -> ClassScores:
    """Per-frame AP of every class column and their mean (online action detection).

    Frames with a positive in an ``ambiguous`` column are removed first; then every class
    except ``background`` and ``ambiguous`` is scored with :func:`average_precision` over the
    remaining frames. A class without positive frames is NaN and left out of the mean. With
    ``background=(0,), ambiguous=(21,)`` this is LSTR/TeSTra's THUMOS'14 per-frame mAP.

    Args:
      targets: ``bool`` or integer ``[..., N, C]`` multi-hot; nonzero = positive.
      scores: float ``[..., N, C]`` (no NaN).
      mask: optional ``bool[..., N]``, True = valid frame.
      background: static tuple of classes not scored (their frames stay as negatives).
      ambiguous: static tuple of classes whose positive frames are removed from every class.
      interpolation: static, as in :func:`average_precision`.

    Returns:
      :class:`ClassScores` with ``per_class`` ``float32[..., C]`` and ``mean`` ``float32[...]``.

    >>> targets = jnp.array([[1, 0], [0, 1], [1, 0], [0, 1]])
    >>> scores = jnp.array([[0.9, 0.1], [0.2, 0.8], [0.4, 0.6], [0.7, 0.3]])
    >>> result = mean_average_precision(targets, scores)
    >>> [round(float(x), 4) for x in result.per_class], round(float(result.mean), 4)
    ([0.8333, 0.8333], 0.8333)

    References:
      Xu et al., "Long Short-Term Transformer for Online Action Detection", NeurIPS 2021
      (``perframe_average_precision``).
    """
    interpolation = checks.static_choice("interpolation", interpolation, INTERPOLATIONS)
    targets, scores, valid, scored = _per_class(targets, scores, mask, background, ambiguous)
    row_fn = lambda rows: (ap_rows(rows, interpolation=interpolation),)  # noqa: E731
    return _over_classes(row_fn, targets, scores, valid, scored)[0]


@one_program
def calibrated_average_precision(
    targets: jax.typing.ArrayLike,
    scores: jax.typing.ArrayLike,
    *,
    mask: jax.typing.ArrayLike | None = None,
    background: tuple[int, ...] = (),
    ambiguous: tuple[int, ...] = (),
) -> ClassScores:
    r"""Per-frame calibrated AP (cAP) of every class column and their mean.

    With frames ranked by decreasing score, :math:`w = \#neg / \#pos` and
    :math:`cPrec_k = TP_k / (TP_k + FP_k / w)`, cAP is the mean of :math:`cPrec` over the
    positive frames. Tied scores enter together (precision at the end of their group).
    ``background``/``ambiguous`` and absent classes behave as in
    :func:`mean_average_precision`; TVSeries' mcAP is ``background=(0,)``.

    Args:
      targets: ``bool`` or integer ``[..., N, C]`` multi-hot; nonzero = positive.
      scores: float ``[..., N, C]`` (no NaN).
      mask: optional ``bool[..., N]``, True = valid frame.
      background: static tuple of classes not scored.
      ambiguous: static tuple of classes whose positive frames are removed from every class.

    Returns:
      :class:`ClassScores` with ``per_class`` ``float32[..., C]`` in [0, 1] (1 when every
      frame is positive) and ``mean`` ``float32[...]``.

    >>> targets = jnp.array([[1], [0], [1], [0]])
    >>> scores = jnp.array([[0.9], [0.8], [0.7], [0.1]])
    >>> round(float(calibrated_average_precision(targets, scores).mean), 4)
    0.8333

    References:
      De Geest et al., "Online Action Detection", ECCV 2016.

    Note: LSTR orders tied scores arbitrarily (unstable argsort); here ties are grouped.
    """
    targets, scores, valid, scored = _per_class(targets, scores, mask, background, ambiguous)
    row_fn = lambda rows: (cap_rows(rows),)  # noqa: E731
    return _over_classes(row_fn, targets, scores, valid, scored)[0]


def frame_ap_and_cap(targets, scores, *, mask=None, background=(), ambiguous=()):
    """:func:`mean_average_precision` and :func:`calibrated_average_precision` (same arguments)
    from one ranking of each class: about the cost of either."""
    targets, scores, valid, scored = _per_class(targets, scores, mask, background, ambiguous)
    row_fn = lambda rows: ap_and_cap_rows(rows, interpolation="step")  # noqa: E731
    return _over_classes(row_fn, targets, scores, valid, scored)


@one_program
def top_k_accuracy(
    targets: jax.typing.ArrayLike,
    scores: jax.typing.ArrayLike,
    *,
    k: tuple[int, ...] = (1, 5),
    mask: jax.typing.ArrayLike | None = None,
) -> jax.Array:
    """Fraction of valid rows whose target class is among the ``k`` highest scores.

    The rank of the target is the number of classes with a higher score plus the number of
    tied classes with a higher index (scikit-learn's rule: ties go to the higher index).
    A row is correct at ``k`` when that rank is below ``k``; no sort is needed. Scores are
    compared by their bits, so a subnormal score ranks above 0 as on the host (XLA's CPU
    code flushes subnormals to zero in float comparisons).

    Args:
      targets: integer ``[..., N]`` class indices in [0, C). A valid row whose target lies
        outside [0, C) counts as a miss at every k (scikit-learn raises on such a label; a
        padding row belongs in ``mask``).
      scores: float ``[..., N, C]`` (no NaN).
      k: static tuple of positive ints (an int is accepted); ``k >= C`` is always correct
        for a target in [0, C).
      mask: optional ``bool[..., N]``, True = valid row.

    Returns:
      ``float32[..., len(k)]`` in [0, 1]; NaN when no row is valid.

    >>> scores = jnp.array([[0.1, 0.5, 0.4], [0.3, 0.3, 0.4]])
    >>> top_k_accuracy(jnp.array([2, 0]), scores, k=(1, 2)).tolist()
    [0.0, 0.5]

    References:
      scikit-learn ``top_k_accuracy_score``.
    """
    ks = checks.static_ints("k", k)
    targets = checks.as_int_labels("targets", targets)
    scores = checks.as_float("scores", scores, min_ndim=2)
    if scores.shape[:-1] != targets.shape:
        raise ValueError(
            f"scores must have shape targets.shape + (C,) = {targets.shape} + (C,), "
            f"got {scores.shape}."
        )
    valid = checks.as_valid(mask, targets.shape)
    hits = top_k_hits(targets, scores, valid, ks)
    count = jnp.sum(valid, axis=-1, dtype=jnp.int32)[..., None]
    return count_ratio(hits, count, jnp.nan)


def top_k_hits(targets, scores, valid, ks) -> jax.Array:
    """Number of valid rows whose target ranks below each k, ``int32[..., len(ks)]``."""
    num_classes = scores.shape[-1]
    index = lax.broadcasted_iota(jnp.int32, scores.shape, scores.ndim - 1)
    target = targets.astype(jnp.int32)[..., None]
    # scores are compared by their bits (subnormal scores above 0, as on the host): float64
    # ones too, which XLA's CPU code flushes to zero as well
    keys = descending_keys(scores)
    target_key = jnp.take_along_axis(keys, jnp.clip(target, 0, num_classes - 1), axis=-1)
    ahead = (keys < target_key) | ((keys == target_key) & (index > target))
    rank = jnp.sum(ahead, axis=-1, dtype=jnp.int32)
    # a target outside [0, C) names no class: it never scores (it used to be clipped onto one)
    known = checks.in_label_range(targets, num_classes)
    rank = jnp.where(known, rank, jnp.iinfo(jnp.int32).max)
    # k past C takes every class; capped, so that a k past int32 is no OverflowError
    hits = [jnp.sum(valid & (rank < min(kk, num_classes)), axis=-1, dtype=jnp.int32) for kk in ks]
    return jnp.stack(hits, axis=-1)
