"""Run-length segments of frame-wise labels, in fixed-capacity tables.

The frame pass packs per-frame flags ("a kept segment starts here", "... ends here") into 32-bit
words; the k-th segment is then found by a two-step search over the words' running popcounts and
a popcount search inside one word. A mask is read as bits too: runs are settled across its
gaps, and bounds ranked among the valid frames. Memory is O(T / 32 + S) per sequence and no
frame-sized cumulative sum, sort or scatter is needed.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxseg._src import checks
from jaxseg._src.batching import any_example, largest, lift
from jaxseg._src.numerics import count_set_bits, popcount
from jaxseg._src.programs import one_program

WORD_BITS = 32
_ALL_ONES = np.uint32(0xFFFFFFFF)


class Segments(NamedTuple):
    """A fixed-capacity table of segments, one row per sequence.

    Attributes:
      labels: int32 ``[..., S]`` label of each segment (-1 where not valid).
      starts: int32 ``[..., S]`` first frame of each segment (0 where not valid).
      ends: int32 ``[..., S]`` one past the last frame (exclusive; 0 where not valid).
      valid: bool ``[..., S]`` which rows hold a segment.
      count: int32 ``[...]`` the true number of segments; ``count > S`` means the capacity
        overflowed and the table holds only the first ``S``.
    """

    labels: jax.Array
    starts: jax.Array
    ends: jax.Array
    valid: jax.Array
    count: jax.Array


def _lengths_within(arguments: dict) -> None:
    """Host check of :func:`lengths_to_mask`: every length lies in ``[0, T]``."""
    lengths, T = np.asarray(arguments["lengths"]), arguments["T"]
    outside = (lengths < 0) | (lengths > T)
    if outside.any():
        where = checks.first_index(outside)
        raise ValueError(
            f"lengths must lie in [0, T] = [0, {T}], got {lengths[where]} at index {where}."
        )


@one_program(host_check=_lengths_within)
def lengths_to_mask(lengths, T: int) -> jax.Array:
    """A validity mask from sequence lengths: ``mask[..., t] = t < lengths[...]``.

    Args:
      lengths: integer ``[...]`` number of valid (leading) frames of each sequence, in
        ``[0, T]`` (a concrete length outside raises ``ValueError``; a traced one is
        clipped there).
      T: static padded length.

    Returns:
      bool ``[..., T]``.

    >>> lengths_to_mask([1, 3], 4).astype(int).tolist()
    [[1, 0, 0, 0], [1, 1, 1, 0]]
    """
    T = checks.static_int("T", T)
    lengths = jnp.asarray(lengths)
    if not jnp.issubdtype(lengths.dtype, jnp.integer):
        raise TypeError(f"lengths must be integers, got dtype {lengths.dtype}.")
    # Clipped in their own dtype, then int32: a uint32 length would wrap there (and strict
    # dtype promotion compares no other integer dtype with int32 frames).
    top = jnp.asarray(min(T, jnp.iinfo(lengths.dtype).max), lengths.dtype)
    lengths = jnp.clip(lengths, jnp.zeros((), lengths.dtype), top).astype(jnp.int32)
    return jnp.arange(T, dtype=jnp.int32).reshape((1,) * lengths.ndim + (T,)) < lengths[..., None]


# ------------------------------------------------------------------------------------------
# Masks: removing invalid frames.


def mask_summary(mask):
    """``(length, is_prefix, words)`` of one sequence's mask: its valid frames, whether they
    are a prefix, and the mask bit-packed (:func:`pack_bits`)."""
    words = pack_bits(mask)
    length = count_set_bits(words)
    return length, jnp.all(words == valid_words(length, words.shape[-1])), words


# ------------------------------------------------------------------------------------------
# Bit-packed frame pass.


def word_count(T: int) -> int:
    """Number of 32-bit words holding ``T`` frames (at least one)."""
    return max(1, -(-T // WORD_BITS))


def _pack_rows(flags):
    """uint32 ``[R]`` per bool ``[R, 32]`` array of ``flags``, all in one variadic reduction."""
    shifts = jnp.arange(WORD_BITS, dtype=jnp.uint32)[None, :]
    operands = tuple(f.astype(jnp.uint32) << shifts for f in flags)
    zeros = tuple(jnp.uint32(0) for _ in flags)
    return lax.reduce(operands, zeros, lambda a, b: tuple(x + y for x, y in zip(a, b)), (1,))


def _with_previous(rows, before):
    """``[R, 32]`` frames shifted by one: row ``r`` lane ``b`` holds frame ``32 r + b - 1``;
    ``before [1]`` is the frame before the first."""
    last = jnp.concatenate([before, rows[:-1, -1]])
    return jnp.concatenate([last[:, None], rows[:, :-1]], axis=1)


def pack_frame_flags(flag_fn, arrays):
    """Packs per-frame flags into uint32 words in one pass over the frames of ``arrays``.

    ``flag_fn(current, previous)`` maps the arrays (each ``[T]``) and the same arrays shifted
    by one frame (frame 0 is its own predecessor) to a tuple of bool flags, evaluated on
    ``[R, 32]`` blocks of frames. Returns one uint32 ``[word_count(T)]`` per flag: frame
    ``32 w + b`` is bit ``b`` of word ``w``; bits past ``T`` are unspecified (mask them).

    The frames are never padded or shifted as a whole (XLA's CPU reduction is several times
    slower on a padded or shifted frame array): whole words are packed from a reshape and
    the last partial word on its own.
    """
    T = arrays[0].shape[-1]
    whole = T // WORD_BITS * WORD_BITS
    parts = []
    if whole:
        rows = [a[:whole].reshape(-1, WORD_BITS) for a in arrays]
        previous = [_with_previous(r, r[0, :1]) for r in rows]
        parts.append(_pack_rows(flag_fn(rows, previous)))
    if whole < T:
        rows = [jnp.pad(a[whole:], (0, whole + WORD_BITS - T))[None, :] for a in arrays]
        previous = [
            _with_previous(r, a[max(whole - 1, 0) : max(whole, 1)]) for r, a in zip(rows, arrays)
        ]
        parts.append(_pack_rows(flag_fn(rows, previous)))
    if not parts:  # T = 0: one empty word per flag
        empty = [jnp.zeros((1, WORD_BITS), a.dtype) for a in arrays]
        return tuple(jnp.zeros((1,), jnp.uint32) for _ in flag_fn(empty, empty))
    return tuple(jnp.concatenate(words) for words in zip(*parts))


def unpack_bits(words, T: int):
    """bool ``[T]`` from uint32 ``[word_count(T)]`` words, the inverse of :func:`pack_bits`."""
    frames = jnp.arange(T, dtype=jnp.int32)
    bits = words[frames // WORD_BITS] >> (frames % WORD_BITS).astype(jnp.uint32)
    return (bits & 1).astype(jnp.bool_)


def pack_bits(flags):
    """Packs bool ``[T]`` into uint32 ``[word_count(T)]`` (frame ``32 w + b`` is bit ``b`` of
    word ``w``; bits past ``T`` are 0)."""
    return pack_frame_flags(lambda current, _: (current[0],), (flags,))[0]


def is_background(labels, background: tuple[int, ...]):
    """``labels`` in ``background`` (a static tuple), elementwise."""
    out = jnp.zeros(labels.shape, jnp.bool_)
    for b in representable(background, labels.dtype):
        out = out | (labels == jnp.asarray(b, labels.dtype))
    return out


def representable(background: tuple[int, ...], dtype) -> tuple[int, ...]:
    """The labels of ``background`` that ``dtype`` can hold: a label outside its range never
    occurs (compared in ``dtype`` it would wrap onto a real label, 256 onto 0 in int8)."""
    info = jnp.iinfo(dtype)
    return tuple(b for b in background if info.min <= b <= info.max)


def valid_words(n, words: int):
    """uint32 ``[words]``: bit ``b`` of word ``w`` is set iff frame ``32 w + b < n``."""
    remaining = jnp.clip(n - WORD_BITS * jnp.arange(words, dtype=jnp.int32), 0, WORD_BITS).astype(
        jnp.uint32
    )
    return jnp.where(remaining == WORD_BITS, _ALL_ONES, (jnp.uint32(1) << remaining) - 1)


def _frame_bit(frame, words: int):
    """uint32 ``[words]`` with only the bit of ``frame`` set (none if ``frame < 0``)."""
    frame = jnp.asarray(frame, jnp.int32)
    bit = jnp.uint32(1) << (jnp.maximum(frame, 0) % WORD_BITS).astype(jnp.uint32)
    return jnp.where(
        (jnp.arange(words, dtype=jnp.int32) == frame // WORD_BITS) & (frame >= 0), bit, 0
    )


def _next_frame(words):
    """Bit ``t`` of the result is bit ``t + 1`` of ``words`` (a shift by one frame)."""
    following = lax.pad(words, jnp.uint32(0), ((0, 1, 0),))[1:]
    return (words >> 1) | (following << (WORD_BITS - 1))


class IndexedBits(NamedTuple):
    """Bit-packed frame flags with their running popcount, the index that selecting and
    ranking set bits reads (:func:`select_bits`, :func:`bits_before`).

    The index is computed once per flag array, in the pass over the whole batch, so that the
    segmental metrics under one ``jax.jit`` share it and no capacity branch recomputes it.

    Attributes:
      words: uint32 ``[W]``: frame ``t`` is bit ``t % 32`` of word ``t // 32``.
      running: int32 ``[G]``: the set bits of words ``0..w`` at ``w < W``, then the largest
        int32 up to ``G``, a whole number of the search blocks of :func:`select_bits`.
    """

    words: jax.Array
    running: jax.Array

    @property
    def total(self) -> jax.Array:
        """int32 ``[...]``: the number of set bits, the running popcount at the last word."""
        return self.running[..., self.words.shape[-1] - 1]


def _search_block(n_words: int) -> int:
    """Words per block of the two-step search of :func:`select_bits` (about sqrt(W) / 2)."""
    return 1 << max(3, (n_words.bit_length() + 1) // 2 - 1)


def index_bits(words) -> IndexedBits:
    """:class:`IndexedBits` of uint32 ``words [W]``.

    The padding of the running popcount to whole search blocks is written here, in the
    batch's pass, not in each selection: XLA:CPU runs a padded copy of a slice of the batch
    (one block of sequences) several times slower than the arithmetic around it.

    >>> index_bits(jnp.array([0b101, 0b1, 0b11], jnp.uint32)).running.tolist()[:3]
    [2, 3, 5]
    """
    n_words = words.shape[-1]
    padding = -n_words % _search_block(n_words)
    running = jnp.cumsum(popcount(words), axis=-1, dtype=jnp.int32)
    return IndexedBits(words, jnp.pad(running, (0, padding), constant_values=_NEVER))


_NEVER = np.iinfo(np.int32).max  # a running count no rank reaches


class LabelWords(NamedTuple):
    """Bit-packed segment boundaries of one label sequence, ``[W]`` words (frames past the
    length are 0).

    Attributes:
      starts: :class:`IndexedBits`: a kept (non-background) segment starts at ``t``.
      ends: uint32: a kept segment ends at ``t`` (its last frame); read only where there is
        background (otherwise each segment ends where the next starts).
    """

    starts: IndexedBits
    ends: jax.Array


def _change_words(labels):
    """uint32 ``[W]``: bit ``t`` is set iff ``labels[t] != labels[t - 1]`` (``t >= 1``)."""
    return pack_frame_flags(lambda current, previous: (current[0] != previous[0],), (labels,))[0]


def _kept_words(labels, valid, background: tuple[int, ...]):
    if not background:
        return valid
    return pack_bits(~is_background(labels, background)) & valid


def _label_words(runs, kept, last, before_gaps=0) -> LabelWords:
    """:class:`LabelWords` from run starts and kept frames; a run ends before the next one
    starts, at the ``last`` valid frame, and where ``before_gaps`` says."""
    ends = _next_frame(runs) | _frame_bit(last, runs.shape[-1]) | before_gaps
    return LabelWords(index_bits(runs & kept), ends & kept)


def _valid_span(n, words: int, valid: IndexedBits | None):
    """``(in_sequence, first, last)`` of one sequence: words of its valid frames (the first
    ``n``, or the set bits of ``valid``), the bit of the first one, and the last one's frame
    (-1 if there is none)."""
    if valid is None:
        return valid_words(n, words), _frame_bit(0, words), n - 1
    first = _frame_bit(select_ranks(valid, jnp.zeros((1,), jnp.int32))[0], words)
    last = jnp.where(n > 0, select_ranks(valid, jnp.maximum(n - 1, 0)[None])[0], -1)
    return valid.words, jnp.where(n > 0, first, 0), last


def label_words(
    labels, n, background: tuple[int, ...], valid: IndexedBits | None = None
) -> LabelWords:
    """Run and segment boundaries of one sequence's valid frames as bit-packed words, at the
    frames' own positions: the first ``n`` frames, or the set bits of ``valid`` (a mask's
    ``n`` frames, gaps anywhere; runs then follow the sequence with masked frames removed,
    as in :func:`pair_words`)."""
    in_sequence, first, last = _valid_span(n, word_count(labels.shape[-1]), valid)
    runs = (_change_words(labels) | first) & in_sequence
    before_gaps = 0
    if valid is not None:
        (runs,), (before_gaps,) = _across_gaps((labels,), valid, first, (runs,))
    return _label_words(runs, _kept_words(labels, in_sequence, background), last, before_gaps)


class PairWords(NamedTuple):
    """Bit-packed boundaries of a (targets, predictions) pair of one sequence, uint32 ``[W]``.

    Attributes:
      target, prediction: :class:`LabelWords` of each sequence.
      correct: the two labels agree at ``t``.
      matches: :class:`IndexedBits`: an overlap of a target segment with a same-label
        predicted segment starts at ``t``. Every such (prediction, target) pair overlaps in
        exactly one run of the pair, so these bits enumerate the candidate matches of the
        segmental F1.
      background: ``[2, len(background), W]``: the target (row 0) or the prediction (row 1)
        is the background label ``background[i]`` at ``t``.
    """

    target: LabelWords
    prediction: LabelWords
    correct: jax.Array
    matches: IndexedBits
    background: jax.Array


def pair_flags(targets, predictions):
    """The one pass over the frames of a sequence pair ``[T]``: uint32 words of its change
    points (targets, then predictions) and of agreement (bits past the frames unspecified).

    Every caller gets every word (an optimization barrier keeps JAX from pruning the pass to
    the words a caller uses), so that the passes of accuracy and the segmental metrics over
    the same labels under one ``jax.jit`` are one computation, which XLA computes once.
    Pruned, they would differ, and XLA would materialise their common operands instead (the
    labels shifted by one frame, two arrays of the labels' size) and read the labels again.
    """

    def flags(now, before):
        t, p = now
        return (t != before[0], p != before[1], t == p)

    return lax.optimization_barrier(pack_frame_flags(flags, (targets, predictions)))


def background_flags(targets, predictions, background: tuple[int, ...]):
    """uint32 ``[2, len(background), W]`` words: the target (row 0) or the prediction (row 1)
    of a sequence pair ``[T]`` is the background label ``background[i]`` at ``t`` (bits past
    the frames unspecified).

    A pass of its own, so that the pass of :func:`pair_flags` is the same with or without
    background, and accuracy beside a segmental metric with background shares it.
    """
    present = representable(background, targets.dtype)

    def flags(now, _):
        never = jnp.zeros(now[0].shape, jnp.bool_)
        return [
            (x == jnp.asarray(b, x.dtype)) if b in present else never
            for x in now
            for b in background
        ]

    words = pack_frame_flags(flags, (targets, predictions))
    return jnp.stack(words).reshape(2, len(background), -1)


def pair_words(
    targets, predictions, n, background: tuple[int, ...], valid: IndexedBits | None = None
) -> PairWords:
    """Every boundary the segmental metrics need, from the frame passes of a sequence pair
    (:func:`pair_flags`, and :func:`background_flags` where there is background).

    The valid frames are the first ``n``, or the set bits of ``valid`` (a mask, whose gaps
    may fall anywhere): boundaries are then those of the sequence with the masked frames
    removed, marked at the valid frames' own positions (:func:`_across_gaps`).
    """
    changes_t, changes_p, correct = pair_flags(targets, predictions)
    words = correct.shape[-1]
    in_sequence, first, last = _valid_span(n, words, valid)
    runs_t = (changes_t | first) & in_sequence
    runs_p = (changes_p | first) & in_sequence
    correct = correct & in_sequence
    if background:
        labelled = background_flags(targets, predictions, background) & in_sequence[None, None]
    else:
        labelled = jnp.zeros((2, 0, words), jnp.uint32)
    in_background = lax.reduce(labelled, np.uint32(0), lax.bitwise_or, (1,))
    kept_t, kept_p = in_sequence & ~in_background[0], in_sequence & ~in_background[1]
    before_gaps = (jnp.zeros_like(runs_t), jnp.zeros_like(runs_p))
    if valid is not None:
        sequences, runs = (targets, predictions), (runs_t, runs_p)
        (runs_t, runs_p), before_gaps = _across_gaps(sequences, valid, first, runs)
    pair_runs = runs_t | runs_p  # a run of the pair of labels starts
    # Behind a barrier XLA computes the words once for every metric of a jax.jit and the loops
    # read them, rather than copying or recomputing parts of them per metric: less scratch
    # memory (benchmarks/README.md).
    return lax.optimization_barrier(
        PairWords(
            _label_words(runs_t, kept_t, last, before_gaps[0]),
            _label_words(runs_p, kept_p, last, before_gaps[1]),
            correct,
            index_bits(pair_runs & correct & kept_t),
            labelled,
        )
    )


def previous_frame(words):
    """Bit ``t`` of the result is bit ``t - 1`` of ``words``."""
    preceding = lax.pad(words, jnp.uint32(0), ((1, -1, 0),))
    return (words << 1) | (preceding >> (WORD_BITS - 1))


def _bits_at(frames, chosen, words: int):
    """uint32 ``[words]`` with the bits of ``frames [C]`` set where ``chosen`` (distinct
    frames)."""
    bit = jnp.uint32(1) << (frames % WORD_BITS).astype(jnp.uint32)
    word = jnp.where(chosen, frames // WORD_BITS, words)
    return jnp.zeros(words, jnp.uint32).at[word].add(bit, mode="drop")


# Gap ends settled per loop step of _across_gaps.
_GAP_CHUNK = 32


def _gap_ends(valid: IndexedBits, first):
    """The valid frames that follow masked ones (the first valid frame aside), indexed."""
    return index_bits(valid.words & ~previous_frame(valid.words) & ~first)


def _gap_pairs(gap_ends: IndexedBits, valid: IndexedBits, i):
    """The ``i``-th chunk of ``_GAP_CHUNK`` gap ends: which are real, their frames, and the
    last valid frame before each."""
    count = gap_ends.total
    k = i * _GAP_CHUNK + jnp.arange(_GAP_CHUNK, dtype=jnp.int32)
    after = select_ranks(gap_ends, jnp.clip(k, 0, jnp.maximum(count - 1, 0)))
    before = select_ranks(valid, jnp.maximum(bits_before(valid, after) - 1, 0))
    return k < count, after, before


def _across_gaps(sequences, valid: IndexedBits, first, runs):
    """Run starts of sequences whose masked frames are removed, at the valid frames, and the
    ends of runs before gaps: ``(starts, ends)``, tuples with one word array per label
    sequence of ``sequences`` (``runs``: their run starts where no frame is masked).

    A valid frame after masked ones (a gap's end) starts a run iff its label differs from
    the last valid frame's before the gap, not from the masked frame before it; that last
    frame then ends a run. The gap ends are settled in chunks of ``_GAP_CHUNK``, as many as
    the batch's most need (no step for prefix masks).
    """
    words = runs[0].shape[-1]
    gap_ends = _gap_ends(valid, first)

    def step(i, state):
        starts, ends = state
        live, after, before = _gap_pairs(gap_ends, valid, i)
        settled = _bits_at(after, live, words)
        begins = [live & (labels[after] != labels[before]) for labels in sequences]
        starts = tuple((r & ~settled) | _bits_at(after, b, words) for r, b in zip(starts, begins))
        return starts, tuple(e | _bits_at(before, b, words) for e, b in zip(ends, begins))

    steps = -(-largest(gap_ends.total) // _GAP_CHUNK)
    state = (tuple(runs), tuple(jnp.zeros_like(r) for r in runs))
    return lax.fori_loop(steps & 0, steps, step, state)


def background_tallies(words: PairWords):
    """int32 ``[3, len(background)]``: target, predicted and correct frames of each background
    label of one video (its frames are in no segment table)."""
    target, prediction = words.background
    correct = target & words.correct[None]
    return jnp.stack([count_set_bits(target), count_set_bits(prediction), count_set_bits(correct)])


def _select_in_word(word, rank):
    """Position of the ``rank``-th (0-based) set bit of each uint32 ``word``."""
    position = jnp.zeros(rank.shape, jnp.int32)
    for width in (16, 8, 4, 2, 1):
        low = popcount(word & jnp.uint32((1 << width) - 1)).astype(jnp.int32)
        upper = rank >= low
        rank = jnp.where(upper, rank - low, rank)
        word = jnp.where(upper, word >> width, word)
        position = jnp.where(upper, position + width, position)
    return position


def select_ranks(bits: IndexedBits, ranks):
    """Frame indices of the set bits of ``bits`` of 0-based ``ranks`` (int32 ``[m]``, each
    below the number of set bits).

    The word holding the k-th bit is found in two comparison steps over the words' running
    popcounts: first against the running count at the end of every block of ``b ~ sqrt(W)/2``
    words, then against the ``b`` counts of the block found (one contiguous gather). The bit
    inside the word comes from :func:`_select_in_word`. It replaced a binary search (one
    dependent gather per step), slower on CPU and slower to compile
    (``benchmarks/README.md``, choices measured once).
    """
    words, running = bits
    n_words = words.shape[-1]
    block = _search_block(n_words)
    grid = running.reshape(-1, block)
    before = jnp.sum(grid[None, :, -1] <= ranks[:, None], axis=-1, dtype=jnp.int32)
    before = jnp.minimum(before, grid.shape[0] - 1)
    inside = jnp.sum(grid[before] <= ranks[:, None], axis=-1, dtype=jnp.int32)
    word = jnp.minimum(before * block + inside, n_words - 1)
    rank = ranks - (running[word] - popcount(words[word]).astype(jnp.int32))
    return word * WORD_BITS + _select_in_word(words[word], rank)


def select_bits(bits: IndexedBits, capacity: int):
    """Frame indices of the first ``capacity`` set bits of ``bits`` and the total count
    (entries past the count are unspecified).

    A capacity of up to ``_SELECT_STEP`` is selected at once. A larger one (such as the
    capacity ``T`` of :func:`to_segments` at default arguments) is selected
    ``_SELECT_STEP`` ranks per step of a loop that stops at the largest count of the batch
    (of every example under ``jax.vmap``): the cost follows the segments, not the capacity.
    """
    running = bits.running
    # Derived from the data, so that ranks vary (and are sharded) like ``running`` under vmap.
    like = running[:1] & 0
    if capacity <= _SELECT_STEP:
        return select_ranks(bits, jnp.arange(capacity, dtype=jnp.int32) + like), bits.total
    steps = -(-capacity // _SELECT_STEP)

    def step(i, frames):
        ranks = i * _SELECT_STEP + jnp.arange(_SELECT_STEP, dtype=jnp.int32) + like
        return lax.dynamic_update_slice(frames, select_ranks(bits, ranks), (i * _SELECT_STEP,))

    needed = jnp.minimum(-(-largest(bits.total) // _SELECT_STEP), steps)
    frames = lax.fori_loop(0, needed, step, jnp.zeros(steps * _SELECT_STEP, jnp.int32) + like)
    return frames[:capacity], bits.total


# Ranks selected at once by select_bits (its larger capacities: per step of a loop).
_SELECT_STEP = 1024


def select_runs(run_starts: IndexedBits, n, capacity: int):
    """``(starts, ends, count)`` of the first ``capacity`` runs of a sequence of ``n`` frames
    whose runs tile it (each ends where the next starts), from their bit-packed starts."""
    starts, count = select_bits(run_starts, capacity + 1)
    ends = jnp.where(jnp.arange(1, capacity + 1, dtype=jnp.int32) < count, starts[1:], n)
    return starts[:-1], ends, count


def bits_before(bits: IndexedBits, frames):
    """Number of set bits of ``bits`` at frames ``< frames`` (elementwise, ``0 <= frames <=
    32 W``): the running popcount to the frame's word, less that word's bits from the frame
    on."""
    words, running = bits
    word = jnp.minimum(frames >> 5, words.shape[-1] - 1)  # frames // 32 (frames >= 0)
    low = (frames - word * WORD_BITS).astype(jnp.uint32)  # in [0, 32]
    from_frame = jnp.where(low == WORD_BITS, 0, ~((jnp.uint32(1) << low) - 1))
    return running[word] - popcount(words[word] & from_frame).astype(jnp.int32)


def rank_bits(bits: IndexedBits, frames):
    """Number of set bits of ``bits`` at frames ``<= frames``, minus one (the index of the
    run containing each frame when ``bits`` marks run starts)."""
    return bits_before(bits, frames + 1) - 1


def _table(labels, starts, ends, count, capacity) -> Segments:
    valid = jnp.arange(capacity, dtype=jnp.int32) < count
    if labels.shape[-1] == 0:
        labels = jnp.zeros((1,), labels.dtype)
    # In int32 before the -1 of empty rows, which an unsigned dtype would wrap (255 in uint8).
    seg_labels = labels[jnp.minimum(starts, labels.shape[-1] - 1)].astype(jnp.int32)
    return Segments(
        jnp.where(valid, seg_labels, -1),
        jnp.where(valid, starts, 0),
        jnp.where(valid, ends, 0),
        valid,
        count,
    )


def segments_from_words(
    labels, n, words: LabelWords, *, capacity: int, contiguous: bool
) -> Segments:
    """Kept segments of one sequence from its :class:`LabelWords`.

    ``contiguous`` (static) says there is no background, so each segment ends where the next
    starts and one selection of set bits finds both.
    """
    if contiguous:
        starts, ends, count = select_runs(words.starts, n, capacity)
    else:
        starts, count = select_bits(words.starts, capacity)
        ends = select_bits(index_bits(words.ends), capacity)[0] + 1
    return _table(labels, starts, ends, count, capacity)


def segments_of(
    labels, n, *, background: tuple[int, ...], capacity: int, valid: IndexedBits | None = None
) -> Segments:
    """Non-background segments of one sequence's valid frames: the first ``n``, or the ``n``
    set bits of ``valid`` (a mask's), whose starts and ends then count valid frames (the
    sequence with its masked frames removed)."""
    words = label_words(labels, n, background, valid)
    if valid is None:
        return segments_from_words(labels, n, words, capacity=capacity, contiguous=not background)
    # Bounds are found as frames (the last segment ends after the last valid frame) and then
    # ranked among the valid frames.
    end = _valid_span(n, valid.words.shape[-1], valid)[2] + 1
    table = segments_from_words(labels, end, words, capacity=capacity, contiguous=not background)
    ranked = functools.partial(bits_before, valid)
    return table._replace(starts=ranked(table.starts), ends=ranked(table.ends))


def count_of(labels, n, *, background: tuple[int, ...], valid: IndexedBits | None = None):
    """Number of non-background runs of one sequence's valid frames (as in
    :func:`segments_of`)."""
    return count_set_bits(label_words(labels, n, background, valid).starts.words)


# ------------------------------------------------------------------------------------------
# Public functions.


def full_lengths(labels):
    """int32 ``[...]`` = T for labels ``[..., T]``, sharded like the labels' batch dims."""
    return jnp.sum(jnp.zeros_like(labels, jnp.int32), axis=-1, dtype=jnp.int32) + labels.shape[-1]


def _labels_within_int32(arguments) -> None:
    """:func:`to_segments`' check of host labels, which its program sees only traced."""
    if checks.on_host(arguments["labels"]):
        checks.host_int32_labels("labels", arguments["labels"])


@one_program(host_check=_labels_within_int32)
def to_segments(labels, *, mask=None, background=(), max_segments=None) -> Segments:
    """Run-length segments of frame-wise labels, background removed after encoding.

    Masked frames are removed first (so runs on both sides of an ignored gap merge); the
    remaining frames are run-length encoded; runs whose label is in ``background`` are then
    dropped, so ``[1, 1, 0, 1]`` with background ``(0,)`` gives two segments of label 1.
    Starts and ends (exclusive) index the frames that remain after masking.

    Args:
      labels: integer ``[..., T]`` frame-wise labels in int32's range, the dtype of the
        table's labels (a host label beyond it raises ``ValueError``).
      mask: optional bool ``[..., T]``, True = valid frame.
      background: static tuple of labels that form no segment.
      max_segments: static capacity S; ``None`` means ``T`` (exact for any input).

    Returns:
      :class:`Segments` with arrays ``[..., S]`` and ``count [...]``; ``count > S`` reports
      an overflow (the table then holds the first ``S`` segments).

    >>> s = to_segments([1, 1, 0, 1, 2, 2], background=(0,), max_segments=4)
    >>> s.labels.tolist(), s.starts.tolist(), s.ends.tolist(), int(s.count)
    ([1, 1, 2, -1], [0, 3, 4, 0], [2, 4, 6, 0], 3)

    References:
      Abu Farha & Gall, MS-TCN, CVPR 2019 (``get_labels_start_end_time`` in ``eval.py``).
    """
    labels = checks.int32_labels("labels", labels)
    mask = checks.as_mask(mask, labels.shape)
    background = checks.static_labels("background", background)
    capacity = checks.static_int("max_segments", max_segments, minimum=1, allow_none=True)
    capacity = capacity or max(labels.shape[-1], 1)

    def one(x, n, valid=None):
        return segments_of(x, n, background=background, capacity=capacity, valid=valid)

    if mask is None or labels.shape[-1] == 0:  # a mask of no frames has nothing to say
        return lift(one, (labels, full_lengths(labels)), (1, 0))
    lengths, is_prefix, words = lift(mask_summary, (mask,), (1,))

    def with_gaps():
        return lift(lambda x, n, w: one(x, n, index_bits(w)), (labels, lengths, words), (1, 0, 1))

    def prefixes():
        return lift(one, (labels, lengths), (1, 0))

    # The bounds of a table as large as T cost more to rank among the valid frames than to
    # find: a batch of prefix masks (the usual padding; one choice for the batch, and for all
    # mapped examples under jax.vmap) takes the first n frames instead.
    return lax.cond(any_example(~is_prefix), with_gaps, prefixes)


@one_program
def count_segments(labels, *, mask=None, background=()) -> jax.Array:
    """Number of non-background segments of each sequence (cheap: no segment table).

    Use it on the host to choose the static capacities of the segmental metrics.

    Args:
      labels: integer ``[..., T]``.
      mask: optional bool ``[..., T]``, True = valid frame.
      background: static tuple of labels that form no segment.

    Returns:
      int32 ``[...]``.

    >>> count_segments([[0, 1, 1, 0, 2], [3, 3, 3, 3, 3]], background=(0,)).tolist()
    [2, 1]
    """
    labels = checks.as_int_labels("labels", labels)
    mask = checks.as_mask(mask, labels.shape)
    background = checks.static_labels("background", background)
    return _count_program(labels, mask, background=background)


@functools.partial(jax.jit, static_argnames="background")
def _count_program(labels, mask, *, background):
    def one(x, n, words=None):
        valid = None if words is None else index_bits(words)
        return count_of(x, n, background=background, valid=valid)

    if mask is None or labels.shape[-1] == 0:  # a mask of no frames has nothing to say
        return lift(one, (labels, full_lengths(labels)), (1, 0))
    lengths, _, words = lift(mask_summary, (mask,), (1,))
    return lift(one, (labels, lengths, words), (1, 0, 1))
