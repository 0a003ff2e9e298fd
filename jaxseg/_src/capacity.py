"""Run-time choice among a few static capacities, by the batch's true counts.

The segment-level losses' tables, transcripts and dynamic programmes need a static size.
Sized for the worst case (one segment per frame) one costs as much as the worst case on every
call; sized by hand it is a knob the user must know. Here the caller compiles its computation
for a short ladder of capacities and ``lax.switch`` runs the smallest that holds the batch's
largest true count, so a call costs what its data needs and nothing is ever truncated (the
last rung is the worst case).

``lax.switch`` with an index batched by ``vmap`` would run every branch: :func:`rung` takes
the largest count of all examples (:func:`~jaxseg._src.batching.largest`), so that one branch
runs, on every example of the batch.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
from jax import lax

from jaxseg._src.batching import largest, rows_at_once
from jaxseg._src.segments import is_background


def capacity_ladder(worst: int, *, smallest: int = 32, factor: int = 8) -> tuple[int, ...]:
    """``smallest * factor**k`` up to half of ``worst``, then ``worst``: the sizes to compile.

    Every rung compiles the caller's computation once more, so the ladder is short: a batch
    that needs more than ``smallest`` runs less than ``factor`` times larger than it needs,
    and on the last rung less than ``2 * factor`` times (``capacity_ladder(4095)`` runs a need
    of 257 at 4095).

    >>> capacity_ladder(6000)
    (32, 256, 2048, 6000)
    >>> capacity_ladder(40)
    (40,)
    """
    sizes = []
    size = smallest
    while 2 * size <= worst:
        sizes.append(size)
        size *= factor
    return (*sizes, max(worst, 1))


def rung(capacities: Sequence[int], counts) -> jax.Array:
    """int32 index of the smallest capacity that holds every one of ``counts`` (the last one
    if none does), one index for all examples of a ``jax.vmap``
    (:func:`~jaxseg._src.batching.largest`)."""
    needed = largest(counts)
    return sum((needed > c).astype(jnp.int32) for c in capacities[:-1]) + jnp.int32(0)


def switch_capacity(make: Callable, capacities: Sequence[int], counts, *operands):
    """``make(c)(*operands)`` for the smallest capacity ``c`` that holds every count."""
    branches = [make(c) for c in capacities]
    if len(branches) == 1:
        return branches[0](*operands)
    return lax.switch(rung(capacities, counts), branches, *operands)


# Scratch memory one rung may ask for: sequences beyond it run in chunks, one after another.
_SCRATCH_BYTES = 1 << 28
# A recursion's gradient keeps its intermediate values up to this many cells; a larger one is
# recomputed block by block, so that a loss's last rung (as many segments as frames) needs no
# T x T memory.
_KEPT_CELLS = 1 << 22


def recompute_blocks(steps: int, width: int) -> tuple[int, int]:
    """``(blocks, size)`` for the gradient of a recursion of ``steps`` sequential steps over
    ``width`` cells: one block of every step if ``steps * width`` cells fit ``_KEPT_CELLS``,
    else about ``sqrt(steps)`` blocks of about ``sqrt(steps)`` steps (``blocks * size >=
    steps``), whose backward pass recomputes one block at a time from the values kept at
    the blocks' starts (gradient checkpointing: twice the forward work, ``O(sqrt(steps)
    width)`` memory).

    >>> recompute_blocks(6032, 33), recompute_blocks(12000, 6001)
    ((1, 6032), (110, 110))
    """
    if steps * width <= _KEPT_CELLS:
        return 1, max(steps, 1)
    size = math.isqrt(steps - 1) + 1
    return -(-steps // size), size


def _per_sequence(one: Callable, capacity: int, n_rows: int, with_gradient: bool):
    """``one(capacity, *row, *other)`` on one sequence's flat operands, and with the
    gradient with respect to its ``n_rows`` differentiable operands."""

    def value(operands):
        return one(capacity, *operands)

    def value_and_gradient(operands):
        rows, others = operands[:n_rows], operands[n_rows:]
        return jax.value_and_grad(lambda r: one(capacity, *r, *others))(rows)

    return value_and_gradient if with_gradient else value


def _over_batch(fn, chunk: int):
    """``fn`` over the leading axis of a tuple of operands, ``chunk`` sequences at a time;
    under ``jax.vmap`` over the sequences of all examples (:func:`rows_at_once`), so that the
    chunks still bound the scratch memory."""

    def over(*operands):
        if chunk >= operands[0].shape[0]:
            return jax.vmap(fn)(operands)
        return lax.map(fn, operands, batch_size=chunk)

    at_once = rows_at_once(over)
    return lambda operands: at_once(*operands)


def sequence_loss(one: Callable, capacity, rows, others, *, count_bound, bytes_per_sequence):
    """A per-sequence loss over a flat batch at the given capacity, or at the smallest rung of
    :func:`capacity_ladder` that holds every sequence's need.

    At a rung the reverse-mode gradient is taken inside the rung, sequence by sequence (so
    it keeps no residuals of the rungs that did not run, which ``lax.switch``'s own
    derivative would allocate, the worst case's included), and rungs whose scratch memory
    would exceed ``_SCRATCH_BYTES`` for the batch run it in chunks.

    Args:
      one: ``one(c, *row, *other)`` -> scalar loss of one sequence at static capacity ``c``.
      capacity: static int, or ``None`` to choose among :func:`capacity_ladder` of the frames.
      rows: tuple of differentiable ``[B, ...]`` arrays (logits, per-sequence parameters).
      others: tuple of ``[B, T]`` arrays (labels, mask).
      count_bound: int32 ``[B]``, each sequence's need (e.g. :func:`run_count_bound`).
      bytes_per_sequence: ``bytes_per_sequence(c)``, the scratch memory of one sequence.

    Returns:
      ``[B]`` losses, with derivatives in any mode and order (those of ``one``).
    """
    operands, n_rows = (*rows, *others), len(rows)
    if capacity is not None:
        return jax.vmap(lambda ops: one(capacity, *ops))(operands)
    ladder = capacity_ladder(max(others[0].shape[-1], 1))
    chunks = [max(1, _SCRATCH_BYTES // max(bytes_per_sequence(c), 1)) for c in ladder]

    def branches(with_gradient):
        return tuple(
            _over_batch(_per_sequence(one, c, n_rows, with_gradient), chunk)
            for c, chunk in zip(ladder, chunks)
        )

    index = rung(ladder, count_bound)
    return _switched_losses(branches(False), branches(True), n_rows, index, operands)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1, 2))
def _switched_losses(values, with_gradients, n_rows, index, operands):
    del with_gradients, n_rows
    return lax.switch(index, values, operands)


@_switched_losses.defjvp
def _switched_losses_jvp(values, with_gradients, n_rows, primals, tangents):
    """The losses ``[B]`` and their derivatives along the tangents of the ``n_rows``
    differentiable operands: each sequence's gradient, from the rung that runs, dotted with
    its tangent. Linear in the tangents, so reverse mode transposes it into the gradients
    times the cotangents (no residuals of the other rungs), and forward mode and higher
    derivatives differentiate the rung's own gradient."""
    del values
    index, operands = primals
    value, gradients = lax.switch(index, with_gradients, operands)

    # in the losses' dtype: a bfloat16 row's T x C products summed in float32; no -1 in the
    # reshape, which an empty batch (0 rows) cannot resolve
    def dot(g, t):
        product = g.astype(value.dtype) * t.astype(value.dtype)
        return jnp.sum(product.reshape(g.shape[0], math.prod(g.shape[1:])), axis=1)

    pairs = zip(gradients, tangents[1][:n_rows], strict=True)
    return value, sum(dot(g, t) for g, t in pairs)


def run_count_bound(labels, mask, background: tuple[int, ...]) -> jax.Array:
    """int32 ``[B]``: an upper bound on the non-background segments of each row of
    ``labels [B, T]`` once its masked frames are removed (exact for a prefix mask).

    A valid frame of a kept label starts a run unless the frame before it is valid with the
    same label; removing masked frames can only merge such runs, never split them.
    """
    labels = jnp.asarray(labels)
    previous = jnp.concatenate([labels[:, :1], labels[:, :-1]], axis=1)
    previous_valid = jnp.concatenate([jnp.zeros_like(mask[:, :1]), mask[:, :-1]], axis=1)
    starts = mask & ~(previous_valid & (labels == previous)) & ~is_background(labels, background)
    return jnp.sum(starts, axis=1, dtype=jnp.int32)
