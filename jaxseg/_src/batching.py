"""Lifting a function written for one sequence over any number of leading batch dimensions,
and decisions taken once for all examples of a ``jax.vmap`` (a function of the joined rows,
the largest count, any flag), and the width of their loops' steps."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
from jax.custom_batching import custom_vmap
from jax.sharding import PartitionSpec as P

# Rows per loop step of a whole batch: at most this many (their scratch memory). A step of
# the F1 matching keeps several arrays per row (the groups' scan over the candidates); it
# ran faster at half that width (benchmarks/README.md, segmentation).
_BATCH_ROWS = 1 << 16
MATCHING_ROWS = 1 << 15


def rows_per_step(sequences: int, batch_rows: int = _BATCH_ROWS) -> int:
    """Rows (candidate matches, runs) of each sequence per step of a loop over a batch of
    ``sequences``: up to 128 (a usual sequence's all), fewer where the batch's rows would
    pass ``batch_rows``, and at least 16.

    >>> rows_per_step(1712), rows_per_step(256), rows_per_step(1712, MATCHING_ROWS)
    (32, 128, 16)
    """
    fits = max(batch_rows // max(sequences, 1), 16)
    return min(128, 1 << (fits.bit_length() - 1))


def lift(fn: Callable, args: Sequence, core_ndims: Sequence[int]):
    """Applies ``fn`` (written for one example) over the shared leading dims of ``args``.

    Args:
      fn: function of ``len(args)`` arrays, each with ``core_ndims[i]`` dimensions; an
        argument may be ``None``, which is passed through unchanged.
      args: arrays of shape ``[..., *core_i]`` sharing the same leading dims ``...``.
      core_ndims: number of trailing (per-example) dimensions of each argument.

    Returns:
      ``fn``'s output pytree, each leaf with the leading dims ``...`` prepended.
    """
    batch_shape = None
    for x, k in zip(args, core_ndims):
        if x is None:
            continue
        shape = tuple(x.shape[: x.ndim - k])
        if batch_shape is None:
            batch_shape = shape
        elif shape != batch_shape:
            raise ValueError(
                f"leading (batch) dimensions must agree across arguments, got {batch_shape} "
                f"and {shape}."
            )
    batch_shape = batch_shape or ()
    if not batch_shape:
        return fn(*args)
    size = 1
    for d in batch_shape:
        size *= d
    flat = [
        None if x is None else jnp.reshape(x, (size, *x.shape[x.ndim - k :]))
        for x, k in zip(args, core_ndims)
    ]
    flat = _one_batch_sharding(flat)
    in_axes = [None if x is None else 0 for x in flat]
    out = jax.vmap(fn, in_axes=in_axes)(*flat)
    return jax.tree_util.tree_map(lambda y: jnp.reshape(y, (*batch_shape, *y.shape[1:])), out)


def _one_batch_sharding(flat):
    """The arrays ``[N, ...]``, replicated along ``N`` if an explicit mesh shards ``N`` in some
    of them but not in all (``jax.vmap`` requires one sharding of the mapped dimension; a
    scatter's sums, for one, come back replicated where the labels were sharded); unchanged
    otherwise."""
    specs = [None if x is None else getattr(jax.typeof(x).sharding, "spec", None) for x in flat]
    axes = {None if spec is None or len(spec) == 0 else spec[0] for spec in specs}
    if len(axes) < 2:
        return flat
    return [
        x if x is None or spec is None or spec[0] is None else jax.sharding.reshard(x, P())
        for x, spec in zip(flat, specs)
    ]


def rows_at_once(fn: Callable) -> Callable:
    """``fn`` of row-wise operands ``[N, ...]`` whose ``jax.vmap`` runs ``fn`` once, on the
    mapped rows joined: operands ``[V, N, ...]`` run as ``[V * N, ...]``.

    A decision ``fn`` takes for all its rows at once (the segment capacity of the largest
    count, a loop that runs until every row is done) then stays one decision. Batched by
    ``vmap`` instead, it would differ per example, and every branch would run: a
    ``lax.switch`` over capacities would run its worst case on every call.

    ``fn`` must treat its rows independently and map operands ``[N, ...]`` (arrays or None,
    the same N) to outputs ``[N, ...]``. The result has no derivative of its own
    (``jax.custom_batching.custom_vmap``): use it where nothing is differentiated through
    it in reverse mode (integer statistics, values under ``stop_gradient``, the rule of a
    ``custom_jvp`` that computes its gradients itself); forward mode passes through it.

    >>> largest = rows_at_once(lambda x: jnp.broadcast_to(jnp.max(x), x.shape[:1]))
    >>> jax.vmap(largest)(jnp.array([[1, 2], [3, 4]])).tolist()
    [[4, 4], [4, 4]]
    """

    @custom_vmap
    def at_once(*operands):
        return fn(*operands)

    @at_once.def_vmap
    def _(axis_size, in_batched, *operands):
        if not any(jax.tree_util.tree_leaves(in_batched)):
            # Only what the vmap does not see is batched (jax.jacfwd's tangents, whose
            # rule JAX vmaps over this one): calling ``at_once`` here would meet the same
            # rule again, with operands ``axis_size`` times larger, without end.
            out = fn(*operands)
            return out, jax.tree_util.tree_map(lambda _: False, out)
        rows = next(x.shape[int(b)] for x, b in zip(operands, in_batched) if x is not None)

        def join(x, batched):
            if x is None:
                return None
            x = x if batched else jnp.broadcast_to(x, (axis_size, *x.shape))
            return x.reshape(axis_size * rows, *x.shape[2:])

        out = at_once(*(join(x, b) for x, b in zip(operands, in_batched)))
        split = lambda y: y.reshape(axis_size, rows, *y.shape[1:])  # noqa: E731
        return jax.tree_util.tree_map(split, out), jax.tree_util.tree_map(lambda _: True, out)

    return at_once


@custom_vmap
def largest(counts) -> jax.Array:
    """The largest of integer ``counts`` (0 if there are none), as an int32 scalar.

    Under ``jax.vmap`` it is the largest of every example's counts, and not batched: a
    ``lax.switch`` on a batched index would run every branch and select among their results,
    the worst capacity included, while one index for all examples runs one branch.

    >>> jax.vmap(largest)(jnp.array([[1, 5], [3, 2]])).tolist()  # both examples: all counts
    [5, 5]
    """
    return jnp.max(jnp.asarray(counts), initial=0).astype(jnp.int32)


@largest.def_vmap
def _largest_of_all_examples(axis_size, in_batched, counts):
    del axis_size, in_batched
    return largest(counts), False


@custom_vmap
def any_example(flags) -> jax.Array:
    """Whether any of bool ``flags`` is True (a bool scalar); under ``jax.vmap``, whether any
    of every mapped example's flags is, and not batched.

    For the predicate of a ``lax.cond`` between two exact ways to compute the same values:
    batched by ``vmap``, the predicate would make ``cond`` run both branches and select; one
    predicate for all examples runs one branch, for all of them.

    >>> jax.vmap(any_example)(jnp.array([[False, True], [False, False]])).tolist()
    [True, True]
    """
    return jnp.any(jnp.asarray(flags))


@any_example.def_vmap
def _any_of_all_examples(axis_size, in_batched, flags):
    del axis_size, in_batched
    return any_example(flags), False
