"""Lifting a function written for one sequence over any number of leading batch dimensions."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp


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
    in_axes = [None if x is None else 0 for x in flat]
    out = jax.vmap(fn, in_axes=in_axes)(*flat)
    return jax.tree_util.tree_map(lambda y: jnp.reshape(y, (*batch_shape, *y.shape[1:])), out)
