"""Levenshtein distance between segment label sequences, and the segmental edit score.

With at most 32 target segments the distance is computed with Myers' bit-vector algorithm
(Hyyrö's formulation for the global edit distance): the target's segment labels fit in one
32-bit word, and each predicted segment costs a handful of word operations. Larger target
capacities use the integer anti-diagonal DP of :mod:`jaxseg._src.edit_dp`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from jaxseg._src import edit_dp
from jaxseg._src.segments import WORD_BITS, Segments

_ALL_ONES = jnp.uint32(0xFFFFFFFF)


def _bit_parallel_levenshtein(target, n_target, prediction, n_prediction):
    """Levenshtein distance of ``target[:n_target]`` (<= 32 symbols) and ``prediction[:n]``."""
    bits = jnp.uint32(1) << jnp.arange(target.shape[-1], dtype=jnp.uint32)
    in_target = jnp.arange(target.shape[-1]) < n_target
    top = jnp.where(n_target > 0, jnp.uint32(1) << (jnp.maximum(n_target, 1) - 1).astype(
        jnp.uint32), jnp.uint32(0))

    def step(j, carry):
        positive, negative, score = carry
        match = jnp.sum(jnp.where((target == prediction[j]) & in_target, bits, 0),
                        dtype=jnp.uint32)
        x_vertical = match | negative
        x_horizontal = (((match & positive) + positive) ^ positive) | match
        h_positive = negative | ~(x_horizontal | positive)
        h_negative = positive & x_horizontal
        new_score = (score + ((h_positive & top) != 0).astype(jnp.int32)
                     - ((h_negative & top) != 0).astype(jnp.int32))
        h_positive = (h_positive << 1) | jnp.uint32(1)
        h_negative = h_negative << 1
        new = (h_negative | ~(x_vertical | h_positive), h_positive & x_vertical, new_score)
        active = j < n_prediction
        return tuple(jnp.where(active, a, b) for a, b in zip(new, carry))

    init = (_ALL_ONES, jnp.uint32(0), n_target.astype(jnp.int32))
    _, _, score = lax.fori_loop(0, prediction.shape[-1], step, init)
    return jnp.where(n_target == 0, n_prediction, score)


def levenshtein(target, n_target, prediction, n_prediction):
    """Unit-cost Levenshtein distance between two padded label sequences (int32 scalar)."""
    n_target = jnp.minimum(n_target, target.shape[-1])
    n_prediction = jnp.minimum(n_prediction, prediction.shape[-1])
    if target.shape[-1] <= WORD_BITS:
        return _bit_parallel_levenshtein(target, n_target, prediction, n_prediction)
    return edit_dp.hard_levenshtein(target, prediction, n_target, n_prediction)


def segment_edit_distance(target: Segments, prediction: Segments) -> jax.Array:
    """Levenshtein distance of two segment tables' label sequences (one sequence each)."""
    return levenshtein(target.labels, target.count, prediction.labels, prediction.count)


def edit_score_from_distance(distance, n_target, n_prediction):
    """``1 - distance / max(n_target, n_prediction)``, and 1 when both are 0."""
    longest = jnp.maximum(n_target, n_prediction).astype(jnp.float32)
    return jnp.where(longest > 0, 1.0 - distance.astype(jnp.float32) / jnp.maximum(longest, 1.0),
                     1.0)
