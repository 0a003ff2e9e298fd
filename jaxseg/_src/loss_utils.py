"""Argument checks and frame handling shared by the losses."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxseg._src import checks


def logits_and_labels(logits, labels, mask, *, event_ndim: int = 1, ignore_index=None):
    """Validates ``logits [..., *E, C]``, ``labels [..., *E]`` and ``mask [..., *E]``.

    ``event_ndim`` is the number of per-example axes before the class axis (1 for ``[T]``, 2 for
    ``[H, W]``). Returns ``(logits, labels, mask, invalid)``: ``mask`` without the frames whose
    label is ``ignore_index`` and without frames whose label lies outside ``[0, C)``, and
    ``invalid`` bool ``[...]``, True for an example with such an out-of-range label on a valid
    frame (pass it to :func:`nan_where_invalid`). Concrete labels of that kind raise
    ``ValueError`` here instead. The logits of masked frames are returned as 0
    (:func:`zero_where_masked`), and an empty frame axis as one masked frame.
    """
    logits = checks.as_float("logits", logits)
    if logits.ndim < event_ndim + 1:
        axes = "[..., T, C]" if event_ndim == 1 else "[..., H, W, C]"
        raise ValueError(f"logits must have shape {axes}, got shape {logits.shape}.")
    no_class(logits)
    labels = checks.as_int_labels("labels", labels, min_ndim=event_ndim)
    if labels.shape != logits.shape[:-1]:
        raise ValueError(
            f"labels must have shape logits.shape[:-1] = {logits.shape[:-1]}, got {labels.shape}."
        )
    mask = checks.as_mask(mask, labels.shape)
    if 0 in labels.shape[labels.ndim - event_ndim :]:  # no frame: one masked frame
        mask = jnp.ones(labels.shape, bool) if mask is None else mask
        for axis in range(-event_ndim, 0):
            mask, labels, logits = checks.with_an_entry(mask, labels, logits, axis=axis)
    mask, invalid = labels_in_range(
        labels, mask, logits.shape[-1], ignore_index=ignore_index, event_ndim=event_ndim
    )
    return zero_where_masked(logits, mask), labels, mask, invalid


def no_class(logits) -> None:
    """Raises ``ValueError`` for ``logits [..., C]`` without a class (``C = 0``): there is no
    distribution to score (numpy's ZeroDivisionError, naming nothing, came from a reshape)."""
    if logits.shape[-1] == 0:
        raise ValueError(
            f"logits must hold at least one class on its last axis (C >= 1), got shape "
            f"{logits.shape}."
        )


def temperature(gamma, batch_shape: tuple[int, ...]) -> jax.Array:
    """``gamma`` (a number or an array, traced or not) broadcast to ``batch_shape``: one
    temperature per sequence, checked by :func:`positive_parameter`."""
    return jnp.broadcast_to(positive_parameter("gamma", gamma, batch_shape), batch_shape)


def positive_parameter(name: str, value, shape: tuple[int, ...] = (), *, or_zero: bool = False):
    """``value`` as an array, checked: anything but a real number (None, a string, a bool)
    raises ``TypeError`` naming ``name``; a shape that does not broadcast to ``shape`` (a
    scalar for ``()``), or a host value (no JAX array: no sync) that is not > 0 (>= 0 with
    ``or_zero``), ``ValueError``."""
    where = "a scalar" if not shape else f"a scalar or broadcastable to {shape}"
    try:
        array = jnp.asarray(value)
    except (TypeError, ValueError):
        array = None
    if array is None or array.dtype == jnp.bool_ or not jnp.issubdtype(array.dtype, jnp.number):
        raise TypeError(f"{name} must be a float ({where}), got {value!r}.")
    try:
        fits = np.broadcast_shapes(array.shape, shape) == tuple(shape)
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"{name} must be {where}, got shape {array.shape}.")
    host = np.asarray(value) if checks.on_host(value) else None
    if host is not None and not np.all(host >= 0 if or_zero else host > 0):
        raise ValueError(f"{name} must be {'>=' if or_zero else '>'} 0, got {value!r}.")
    return array


def zero_where_masked(x, mask):
    """``x [..., K]`` (logits, intervals) with 0 where ``mask [...]`` is False (None: nowhere),
    so that a NaN or an infinity there (padding) reaches neither a loss nor its gradient."""
    return x if mask is None else jnp.where(mask[..., None], x, jnp.zeros((), x.dtype))


def labels_in_range(labels, mask, num_classes: int, *, ignore_index=None, event_ndim: int = 1):
    """The frames of ``labels [..., *E]`` a loss reads, and the examples it cannot score.

    Returns ``(mask, invalid)``: bool ``[..., *E]``, ``mask`` (None = all valid) without the
    ``ignore_index`` frames and without the labels outside ``[0, num_classes)``; bool ``[...]``
    ``invalid``, True where such an out-of-range label sits on a valid, not ignored frame.
    Concrete (not traced) labels of that kind raise ``ValueError`` instead.
    """
    ignore_index = checks.static_ignore_index(ignore_index)
    if not any(isinstance(x, jax.core.Tracer) for x in (labels, mask)):
        reject_labels_outside(labels, mask, num_classes, ignore_index)
    mask = checks.without_ignored(labels, mask, ignore_index)
    if mask is None:
        mask = jnp.ones(labels.shape, jnp.bool_)
    outside = mask & ~checks.in_label_range(labels, num_classes)
    invalid = jnp.any(outside, axis=tuple(range(labels.ndim - event_ndim, labels.ndim)))
    return mask & ~outside, invalid


def reject_labels_outside(labels, mask, num_classes: int, ignore_index: int | None) -> None:
    """Raises ``ValueError`` naming the first label of ``labels`` outside ``[0, num_classes)``
    on a valid frame (``mask``, None = all) whose label is not ``ignore_index``: the host side
    of :func:`labels_in_range`, for concrete labels of a validated shape."""
    labels = np.asarray(labels)
    valid = np.ones(labels.shape, bool) if mask is None else np.asarray(mask)
    if ignore_index is not None:  # in int64: -100 is no uint8
        valid = valid & (labels.astype(np.int64) != ignore_index)
    hint = (
        "pass ignore_index=<padding label> (e.g. -100) or a mask to leave padding frames out"
        if ignore_index is None
        else f"only frames labelled ignore_index={ignore_index} are left out"
    )
    checks.host_labels_within_classes(
        "labels", labels, valid, num_classes, classes="the classes of logits' last axis", hint=hint
    )


def labels_within_classes(*, mask: str = "mask"):
    """The ``host_check`` of :func:`~jaxseg._src.programs.one_program` for a loss of
    ``logits [..., C]`` and ``labels``: :func:`reject_labels_outside`, with the labels' mask
    the argument named ``mask``."""

    def check(arguments: dict) -> None:
        num_classes = np.shape(arguments["logits"])[-1]
        labels, ignore_index = arguments["labels"], arguments["ignore_index"]
        reject_labels_outside(labels, arguments[mask], num_classes, ignore_index)

    return check


def nan_where_invalid(loss, invalid):
    """``loss`` with NaN for the examples flagged ``invalid`` by :func:`logits_and_labels`.

    Their out-of-range frames were already masked, so the loss and its gradient are computed
    on in-range labels only and the gradient stays finite (zero for a NaN example).
    """
    return jnp.where(invalid, jnp.nan, loss)


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
