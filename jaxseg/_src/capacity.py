"""Run-time choice among a few static capacities, by the batch's true counts.

A segment table, a transcript or a dynamic programme needs a static size. Sized for the worst
case (one segment per frame) it costs as much as the worst case on every call; sized by hand it
is a knob the user must know. Here the caller compiles its computation for a short ladder of
capacities and ``lax.switch`` runs the smallest that holds the batch's largest true count, so a
call costs what its data needs and nothing is ever truncated (the last rung is the worst case).

``lax.switch`` runs one branch only outside ``vmap``: call these helpers on the whole batch,
not inside a vmapped function (there every branch would run).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


def capacity_ladder(worst: int, *, smallest: int = 32, factor: int = 8) -> tuple[int, ...]:
    """``smallest * factor**k`` up to half of ``worst``, then ``worst``: the sizes to compile.

    Every rung compiles the caller's computation once more, so the ladder is short; a batch
    runs at most ``factor`` times larger than it needs (or twice, on the last rung).

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


def rung(capacities: Sequence[int], needed) -> jax.Array:
    """int32 index of the smallest capacity ``>= needed`` (the last one if none is)."""
    needed = jnp.asarray(needed, jnp.int32)
    return sum((needed > c).astype(jnp.int32) for c in capacities[:-1]) + jnp.int32(0)


def switch_capacity(make: Callable, capacities: Sequence[int], needed, *operands):
    """``make(c)(*operands)`` for the smallest capacity ``c`` that holds ``needed``."""
    branches = [make(c) for c in capacities]
    if len(branches) == 1:
        return branches[0](*operands)
    return lax.switch(rung(capacities, needed), branches, *operands)


def switch_capacity_rows(make: Callable, capacities: Sequence[int], needed, rows, others):
    """Like :func:`switch_capacity` for a per-row function, differentiable in ``rows``.

    ``make(c)(rows, others)`` returns ``[B]`` values, value ``b`` depending on row ``b`` of every
    array of the pytree ``rows`` only (``others``: non-differentiable operands). The gradient
    is taken inside the chosen branch, so reverse mode keeps no residuals of the branches that
    did not run (``lax.switch``'s own derivative would allocate every branch's residuals, the
    worst case's included).
    """
    branches = tuple(make(c) for c in capacities)
    if len(branches) == 1:
        return branches[0](rows, others)
    return _switched_rows(branches, rung(capacities, needed), rows, others)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _switched_rows(branches, index, rows, others):
    return lax.switch(index, branches, rows, others)


def _with_row_gradients(branch):
    def run(rows, others):
        value, pullback = jax.vjp(lambda r: branch(r, others), rows)
        return value, pullback(jnp.ones_like(value))[0]

    return run


def _switched_rows_fwd(branches, index, rows, others):
    value, gradients = lax.switch(
        index, [_with_row_gradients(b) for b in branches], rows, others
    )
    return value, (gradients, others)


def _switched_rows_bwd(branches, residuals, cotangent):
    gradients, others = residuals

    def scale(g):
        return g * jnp.reshape(cotangent, cotangent.shape + (1,) * (g.ndim - 1)).astype(g.dtype)

    zeros = jax.tree_util.tree_map(_zero_cotangent, others)
    return None, jax.tree_util.tree_map(scale, gradients), zeros


def _zero_cotangent(x):
    if jnp.issubdtype(x.dtype, jnp.inexact):
        return jnp.zeros_like(x)
    return np.zeros(x.shape, jax.dtypes.float0)


_switched_rows.defvjp(_switched_rows_fwd, _switched_rows_bwd)


def run_count_bound(labels, mask, background: tuple[int, ...]) -> jax.Array:
    """int32 ``[B]``: an upper bound on the non-background segments of each row of
    ``labels [B, T]`` once its masked frames are removed (exact for a prefix mask).

    A valid frame of a kept label starts a run unless the frame before it is valid with the
    same label; removing masked frames can only merge such runs, never split them.
    """
    labels = jnp.asarray(labels)
    previous = jnp.concatenate([labels[:, :1], labels[:, :-1]], axis=1)
    previous_valid = jnp.concatenate([jnp.zeros_like(mask[:, :1]), mask[:, :-1]], axis=1)
    starts = mask & ~(previous_valid & (labels == previous))
    for label in background:
        starts = starts & (labels != label)
    return jnp.sum(starts, axis=1, dtype=jnp.int32)


def sequence_loss(one: Callable, capacity, rows, others, *, count_bound, any_order=False):
    """A per-sequence loss over a flat batch, at the given or the smallest sufficient capacity.

    Args:
      one: ``one(c, *row, *other)`` -> scalar loss of one sequence at static capacity ``c``.
      capacity: static int, or ``None`` to choose among :func:`capacity_ladder` of the frames.
      rows: tuple of differentiable ``[B, ...]`` arrays (logits, per-sequence parameters).
      others: tuple of ``[B, T]`` arrays (labels, mask).
      count_bound: int32 ``[B]``, each sequence's need (e.g. :func:`run_count_bound`).
      any_order: differentiate through ``lax.switch`` itself (forward mode and higher orders;
        reverse mode then allocates every rung's residuals) instead of inside the branch.

    Returns:
      ``[B]`` losses.
    """

    def at_capacity(c):
        def rows_loss(rows, others):
            return jax.vmap(functools.partial(one, c))(*rows, *others)

        return rows_loss

    if capacity is not None:
        return at_capacity(capacity)(rows, others)
    ladder = capacity_ladder(max(others[0].shape[-1], 1))
    needed = jnp.max(count_bound, initial=0)
    if any_order:
        return switch_capacity(at_capacity, ladder, needed, rows, others)
    return switch_capacity_rows(at_capacity, ladder, needed, rows, others)
