"""The CTC forward recursion over one sequence, in log space, in ``O(T C + T^1/2 N)`` memory.

A transcript ``y_1..y_N`` is extended with blanks, ``ε y_1 ε y_2 ... y_N ε`` (states
``s = 0..2N``: even states are blanks, state ``2k - 1`` is ``y_k``), and

    α_{-1}(0) = 0,   α_{-1}(s) = log 0 for s > 0
    α_t(s) = log(e^{α_{t-1}(s)} + e^{α_{t-1}(s-1)} + [skip_s] e^{α_{t-1}(s-2)}) + log p_t(state s)
    log P(y | x) = log(e^{α_{n-1}(2N)} + e^{α_{n-1}(2N-1)})

where ``skip_s`` holds for a label state whose label differs from the previous label's (a
blank may be skipped only between different labels). Each frame gathers its ``2N + 1``
emission log-probabilities from the ``[T, C]`` table as it goes, so no ``[T, N]`` array is
formed; the gradient is JAX's, and on a large lattice it keeps only the states before every
block of about ``sqrt(T)`` frames and recomputes one block at a time (``jax.checkpoint``,
:func:`~jaxseg._src.capacity.recompute_blocks`).

References:
  Graves et al., Connectionist temporal classification, ICML 2006 (the α recursion).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from jaxseg._src.capacity import recompute_blocks

# A finite log 0: impossible paths stay finite, so that no gradient meets inf - inf; an
# impossible transcript has log-likelihood about LOG_ZERO.
LOG_ZERO = -1e30


def scratch_bytes(frames: int, capacity: int, classes: int) -> int:
    """Scratch bytes of one float32 :func:`ctc_log_likelihood` and its gradient: the states
    the gradient keeps (a few vectors of ``2N + 1`` a frame of one block, and one before each
    block) and the emission table with its gradient."""
    states = 2 * capacity + 1
    blocks, size = recompute_blocks(frames, states)
    return 4 * states * (8 * size + blocks) + 16 * frames * (classes + 1)


def _log_add3(a, b, c):
    """``log(e^a + e^b + e^c)``, elementwise; the shift is a constant for the gradient."""
    top = lax.stop_gradient(jnp.maximum(jnp.maximum(a, b), c))
    return top + jnp.log(jnp.exp(a - top) + jnp.exp(b - top) + jnp.exp(c - top))


def _shift(v, by: int):
    """``out[s] = v[s - by]``, ``LOG_ZERO`` for ``s < by``."""
    return jnp.concatenate([jnp.full((by,), LOG_ZERO, v.dtype), v[:-by]])


def ctc_log_likelihood(log_probs, n_frames, transcript, n_labels, blank: int) -> jax.Array:
    """``log P(y | x)`` of CTC: the log-probability that the frame labellings collapse (merge
    repeats, drop blanks) to the transcript ``y = transcript[:n_labels]``.

    Args:
      log_probs: float ``[T, C]`` per-frame log-probabilities; only ``log_probs[:n_frames]``
        is used.
      n_frames: int scalar in ``[0, T]``, the valid frames.
      transcript: int ``[N]`` labels in ``[0, C)``; only ``transcript[:n_labels]`` is used.
      n_labels: int scalar in ``[0, N]``.
      blank: static int in ``[0, C)``, the blank's column.

    Returns:
      float scalar (``log_probs``' dtype), ``≤ 0``; about ``LOG_ZERO`` when no labelling of
      the valid frames gives the transcript (too few frames).

    >>> log_probs = jnp.log(jnp.array([[0.5, 0.5], [0.5, 0.5]]))  # blank 0, label 1
    >>> round(float(jnp.exp(ctc_log_likelihood(log_probs, 2, jnp.array([1]), 1, 0))), 4)
    0.75

    References:
      Graves et al., Connectionist temporal classification, ICML 2006.
    """
    frames, states = log_probs.shape[0], 2 * transcript.shape[0] + 1
    s = jnp.arange(states, dtype=jnp.int32)
    labels = jnp.concatenate([jnp.full((1,), -1, transcript.dtype), transcript])  # y_0: none
    k = (s + 1) // 2  # state 2k - 1 is y_k
    is_label = s % 2 == 1
    state_columns = jnp.where(is_label, labels[k], blank)
    skips = is_label & (labels[k] != labels[jnp.maximum(k - 1, 0)])

    def step(alpha, frame):
        row, valid = frame
        skipped = jnp.where(skips, _shift(alpha, 2), LOG_ZERO)
        advanced = _log_add3(alpha, _shift(alpha, 1), skipped) + row[state_columns]
        return jnp.where(valid, advanced, alpha), None

    blocks, size = recompute_blocks(frames, states)
    padded = blocks * size
    rows = jnp.pad(log_probs, ((0, padded - frames), (0, 0)))
    valid = jnp.arange(padded, dtype=jnp.int32) < n_frames
    start = jnp.where(s == 0, 0.0, LOG_ZERO).astype(log_probs.dtype)
    if blocks == 1:
        alpha, _ = lax.scan(step, start, (rows, valid))
    else:

        @jax.checkpoint
        def block(alpha, frames_of_block):
            return lax.scan(step, alpha, frames_of_block)[0], None

        blocked = (rows.reshape(blocks, size, -1), valid.reshape(blocks, size))
        alpha, _ = lax.scan(block, start, blocked)
    ends = (s == 2 * n_labels) | (s == 2 * n_labels - 1)
    return jax.nn.logsumexp(jnp.where(ends, alpha, LOG_ZERO))
