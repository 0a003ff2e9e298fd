"""Argument checks and frame handling shared by the losses."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxseg._src import checks


def logits_and_labels(logits, labels, mask, *, event_ndim: int = 1):
    """Validates ``logits [..., *E, C]``, ``labels [..., *E]`` and ``mask [..., *E]``.

    ``event_ndim`` is the number of per-example axes before the class axis (1 for ``[T]``, 2 for
    ``[H, W]``). Returns ``(logits, labels, mask)`` with ``mask`` all True when ``None``.
    """
    logits = checks.as_float("logits", logits)
    if logits.ndim < event_ndim + 1:
        axes = "[..., T, C]" if event_ndim == 1 else "[..., H, W, C]"
        raise ValueError(f"logits must have shape {axes}, got shape {logits.shape}.")
    labels = checks.as_int_labels("labels", labels, min_ndim=event_ndim)
    if labels.shape != logits.shape[:-1]:
        raise ValueError(
            f"labels must have shape logits.shape[:-1] = {logits.shape[:-1]}, got {labels.shape}."
        )
    mask = checks.as_mask(mask, labels.shape)
    if mask is None:
        mask = jnp.ones(labels.shape, jnp.bool_)
    return logits, labels, mask


def compute_dtype(*arrays):
    """float64 if any argument is float64, else float32 (half precision is upcast)."""
    wide = any(jnp.asarray(x).dtype == jnp.float64 for x in arrays)
    return jnp.dtype(jnp.float64 if wide else jnp.float32)


def probabilities(logits) -> jax.Array:
    """Stable softmax over the last axis, computed in (at least) float32."""
    return jax.nn.softmax(logits.astype(compute_dtype(logits)), axis=-1)


def compact_frames(x, mask):
    """Moves the valid frames (rows) of one sequence ``x [T, ...]`` to the front.

    Returns ``(x_compacted, n_valid)``; rows past ``n_valid`` hold the masked frames. The move
    is a gather, so gradients flow back to the original positions and masked frames get
    exactly zero gradient from anything that reads only the first ``n_valid`` rows.
    """
    order = jnp.argsort(~mask, stable=True)
    return x[order], jnp.sum(mask, dtype=jnp.int32)
