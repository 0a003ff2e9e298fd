"""Levenshtein distance between segment label sequences, and the segmental edit score.

The distance is computed with Myers' bit-vector algorithm in Hyyrö's formulation for the
global edit distance, extended to several 32-bit words: the labels of the table of larger
capacity are the pattern (one bit per segment), and every segment of the other table is one
step of a dozen word operations. The carries of the addition cross the words by one more
integer addition over the words' carry flags, per group of 32 words and per level of groups.
There is no (segments x segments) matrix, and for the usual case of at most 32 segments a
step is a handful of scalar operations.

References:
  Myers, A fast bit-vector algorithm for approximate string matching based on dynamic
  programming, JACM 1999; Hyyrö, Explaining and extending the bit-parallel approximate string
  matching algorithm of Myers, 2001.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxseg._src.numerics import count_set_bits, safe_divide
from jaxseg._src.segments import (
    WORD_BITS,
    PairWords,
    Segments,
    pack_bits,
    select_ranks,
    valid_words,
)

_ALL_ONES = np.uint32(0xFFFFFFFF)


def _add(a, b):
    """Multi-word sum ``a + b`` of little-endian uint32 words ``[W]`` (modulo 2^(32 W))."""
    total = a + b
    generate, propagate = total < a, total == _ALL_ONES  # a word's carry out; carry through
    return total + _carries(generate, propagate)


def _carries(generate, propagate, carry_in=0):
    """The carry (uint32 0 or 1) into each of ``W`` words from each word's generate and
    propagate flags ``[W]`` (never both set: a word that overflowed is not all ones), and
    ``carry_in`` into word 0.

    Up to 32 words, word ``i``'s flags become bit ``i`` of ``g`` and ``p``. Adding ``x = g |
    p``, ``g`` and the carry in as integers carries exactly where the words do (bit ``i``:
    generate ``x_i & g_i = g_i``, propagate ``x_i ^ g_i = p_i``), so the carries are ``(x + g +
    carry_in) ^ x ^ g``. More words go in groups of 32: a group generates where its addition
    overflows and propagates where its sum is all ones, and the carries into the groups come
    from the same rule one level up. A loop step of the edit distance thus takes a few
    operations per factor of 32 words, where a parallel prefix scan over the words took
    several kernels per factor of 2 (each compiled, and launched at every step).
    """
    words = generate.shape[-1]
    width = min(words, WORD_BITS)
    groups = -(-words // width)
    pad = groups * width - words
    lane = jnp.arange(width, dtype=jnp.uint32)

    def as_bits(flags):
        flags = jnp.pad(flags, (0, pad)).reshape(groups, width)
        return jnp.sum(flags.astype(jnp.uint32) << lane[None, :], axis=-1, dtype=jnp.uint32)

    g = as_bits(generate)
    x = g | as_bits(propagate)
    if groups > 1:
        total = x + g
        carry_in = _carries(total < x, total == _ALL_ONES, carry_in)
    carries = (x + g + carry_in) ^ x ^ g
    return ((carries[:, None] >> lane[None, :]) & 1).reshape(-1)[:words]


def _shift_up(x, low_bit):
    """Multi-word ``(x << 1) | low_bit``."""
    from_below = jnp.concatenate([jnp.full((1,), low_bit, jnp.uint32), x[:-1] >> 31])
    return (x << 1) | from_below


def _levenshtein_bits(pattern, n_pattern, text, n_text):
    """Levenshtein distance of ``pattern[:n_pattern]`` and ``text[:n_text]`` (one pair)."""
    words = -(-pattern.shape[-1] // WORD_BITS)
    pattern = jnp.pad(pattern, (0, words * WORD_BITS - pattern.shape[-1]))
    in_pattern = jnp.arange(words * WORD_BITS, dtype=jnp.int32) < n_pattern
    last = jnp.maximum(n_pattern, 1) - 1
    top_word, top_bit = last // WORD_BITS, (last % WORD_BITS).astype(jnp.uint32)

    def step(j, carry):
        positive, negative, score = carry
        match = pack_bits((pattern == text[j]) & in_pattern)
        x_vertical = match | negative
        x_horizontal = (_add(match & positive, positive) ^ positive) | match
        h_positive = negative | ~(x_horizontal | positive)
        h_negative = positive & x_horizontal
        at_top = lambda x: ((x[top_word] >> top_bit) & 1).astype(jnp.int32)  # noqa: E731
        new_score = score + at_top(h_positive) - at_top(h_negative)
        h_positive = _shift_up(h_positive, 1)
        h_negative = _shift_up(h_negative, 0)
        new = (h_negative | ~(x_vertical | h_positive), h_positive & x_vertical, new_score)
        return tuple(jnp.where(j < n_text, a, b) for a, b in zip(new, carry))

    # Derived from the data (not constants) so the carry varies like the inputs in shard_map.
    zeros = jnp.zeros((words,), jnp.uint32) | (text[0] & 0).astype(jnp.uint32)
    init = (zeros | _ALL_ONES, zeros, n_pattern.astype(jnp.int32))
    # The trip count is the true text length: a batch stops after its longest sequence.
    # Both bounds come from the data, so the loop counter is batched like the inputs.
    _, _, score = lax.fori_loop(n_text & 0, n_text, step, init)
    return jnp.where(n_pattern == 0, n_text, score)


def levenshtein(target, n_target, prediction, n_prediction):
    """Unit-cost Levenshtein distance between two padded label sequences (int32 scalar).

    The distance is symmetric, and the bit pattern costs one word operation per 32 entries of
    its static capacity while the text costs one loop step per true entry: the table of larger
    capacity is the pattern, and between tables of equal capacity the sequence with more
    segments (so the loop runs over the shorter one).
    """
    n_target = jnp.minimum(n_target, target.shape[-1]).astype(jnp.int32)
    n_prediction = jnp.minimum(n_prediction, prediction.shape[-1]).astype(jnp.int32)
    if target.shape[-1] < prediction.shape[-1]:
        return _levenshtein_bits(prediction, n_prediction, target, n_target)
    if target.shape[-1] == prediction.shape[-1]:
        swap = n_target < n_prediction
        pattern, text = jnp.where(swap, prediction, target), jnp.where(swap, target, prediction)
        n_pattern = jnp.where(swap, n_prediction, n_target)
        n_text = jnp.where(swap, n_target, n_prediction)
        return _levenshtein_bits(pattern, n_pattern, text, n_text)
    return _levenshtein_bits(target, n_target, prediction, n_prediction)


def segment_edit_distance(target: Segments, prediction: Segments) -> jax.Array:
    """Levenshtein distance of two segment tables' label sequences (one sequence each)."""
    return levenshtein(target.labels, target.count, prediction.labels, prediction.count)


def edit_score_from_distance(distance, n_target, n_prediction):
    """``1 - distance / max(n_target, n_prediction)``, and 1 when both are 0.

    Computed as ``(longest - distance) / longest`` from the integers: one rounding, so the
    float32 score is the correctly rounded value of MS-TCN's float64 one (``1 - D / L`` in
    float32 rounds twice: 2/3 read 0.6666666).
    """
    longest = jnp.maximum(n_target, n_prediction)
    return safe_divide((longest - distance).astype(jnp.float32), longest, 1.0)


# Pattern rows per block and text entries per chunk of :func:`words_edit_distance`.
_BLOCK_ROWS = 128
_BATCH_BITS = 1 << 18  # pattern bits of a whole batch per loop step
_TEXT_CHUNK = 32


def _bit(words, i):
    """Bit ``i`` of little-endian uint32 ``words`` (uint32 0 or 1)."""
    return (words[i // WORD_BITS] >> (i % WORD_BITS).astype(jnp.uint32)) & 1


def _pattern_block(pattern, m, rows0, text, nt, hin, *, block: int):
    """One block of pattern rows ``[rows0, rows0 + block)`` over the whole text: Myers' step
    with horizontal deltas in (``hin``: bits of +1 and -1 per text entry, from the block
    above) and out (the same at the block's last row)."""
    words = -(-block // WORD_BITS)
    valid = rows0 + jnp.arange(block, dtype=jnp.int32) < m
    last = jnp.minimum(m - rows0, block) - 1
    chunk_words = _TEXT_CHUNK // WORD_BITS
    first_word = jnp.arange(words, dtype=jnp.int32) == 0
    chunk_word = jnp.arange(chunk_words, dtype=jnp.int32)

    def one_chunk(c, state):
        pv, mv, h_pos, h_neg = state
        cols0, w0 = c * _TEXT_CHUNK, c * chunk_words
        labels = text(cols0 + jnp.arange(_TEXT_CHUNK, dtype=jnp.int32))
        in_pos = lax.dynamic_slice(h_pos, (w0,), (chunk_words,))
        in_neg = lax.dynamic_slice(h_neg, (w0,), (chunk_words,))

        def step(k, state):
            pv, mv, out_pos, out_neg = state
            hin_pos, hin_neg = _bit(in_pos, k), _bit(in_neg, k)
            eq = pack_bits((pattern == labels[k]) & valid)
            xv = eq | mv
            eq = eq | jnp.where(first_word, hin_neg, 0).astype(jnp.uint32)
            xh = (_add(eq & pv, pv) ^ pv) | eq
            ph, mh = mv | ~(xh | pv), pv & xh
            at = jnp.where(chunk_word == k // WORD_BITS, k % WORD_BITS, WORD_BITS)
            out_pos = out_pos | (_bit(ph, last) << at.astype(jnp.uint32))
            out_neg = out_neg | (_bit(mh, last) << at.astype(jnp.uint32))
            ph, mh = _shift_up(ph, hin_pos), _shift_up(mh, hin_neg)
            return mh | ~(xv | ph), ph & xv, out_pos, out_neg

        steps = jnp.clip(nt - cols0, 0, _TEXT_CHUNK)
        none = jnp.zeros_like(in_pos)
        pv, mv, out_pos, out_neg = lax.fori_loop(steps & 0, steps, step, (pv, mv, none, none))
        h_pos = lax.dynamic_update_slice(h_pos, out_pos, (w0,))
        return pv, mv, h_pos, lax.dynamic_update_slice(h_neg, out_neg, (w0,))

    zeros = jnp.zeros((words,), jnp.uint32) + (m & 0).astype(jnp.uint32)
    chunks = -(-nt // _TEXT_CHUNK)
    state = (zeros | _ALL_ONES, zeros, *hin)
    return lax.fori_loop(chunks & 0, chunks, one_chunk, state)[2:]


def pattern_rows(sequences: int) -> int:
    """Pattern rows per block of :func:`words_edit_distance` for a batch of ``sequences``:
    a step costs the batch's words, so a small batch takes wide blocks (fewer steps).

    >>> pattern_rows(1712), pattern_rows(256)
    (128, 1024)
    """
    fits = max(_BATCH_BITS // max(sequences, 1), _BLOCK_ROWS)
    return min(1024, 1 << (fits.bit_length() - 1))


def _clipped(ranks, bits):
    """``ranks`` within the set bits of ``bits`` (any rank when there are none)."""
    return jnp.clip(ranks, 0, jnp.maximum(bits.total - 1, 0))


def words_edit_distance(targets, predictions, words: PairWords, *, block=_BLOCK_ROWS):
    """Levenshtein distance of one sequence's segment label sequences, from its frame pass.

    The longer sequence is the pattern, in blocks of ``block`` rows one after another;
    each block runs Myers' steps over the text (the other sequence, labels selected
    ``_TEXT_CHUNK`` at a time) and hands its last row's horizontal deltas to the next block,
    as bits. The loops run as many blocks and steps as the sequence has segments.
    """
    starts_t, starts_p = words.target.starts, words.prediction.starts
    swap = starts_t.total < starts_p.total
    m = jnp.maximum(starts_t.total, starts_p.total)
    nt = jnp.minimum(starts_t.total, starts_p.total)
    # The pattern's and the text's words are chosen once per sequence (a copy of two bit
    # arrays), so that each label costs one selection, not one in each sequence's words.
    choose = lambda a, b: jnp.where(swap, a, b)  # noqa: E731
    bits = {
        True: jax.tree_util.tree_map(choose, starts_p, starts_t),
        False: jax.tree_util.tree_map(choose, starts_t, starts_p),
    }

    def labels_of(ranks, pattern):
        frames = select_ranks(bits[pattern], _clipped(ranks, bits[pattern]))
        return jnp.where(swap == pattern, predictions[frames], targets[frames])

    frames = words.correct.shape[-1] * WORD_BITS
    in_text = valid_words(nt, -(-frames // _TEXT_CHUNK) * (_TEXT_CHUNK // WORD_BITS))
    text = functools.partial(labels_of, pattern=False)

    def one_block(b, hin):
        rows0 = b * block
        pattern = labels_of(rows0 + jnp.arange(block, dtype=jnp.int32), True)
        return _pattern_block(pattern, m, rows0, text, nt, hin, block=block)

    # The first row is D[0][j] = j: every horizontal delta +1.
    blocks = -(-m // block)
    h_pos, h_neg = lax.fori_loop(blocks & 0, blocks, one_block, (in_text, in_text & 0))
    score = m + count_set_bits(h_pos & in_text) - count_set_bits(h_neg & in_text)
    return jnp.where(m == 0, nt, score)
