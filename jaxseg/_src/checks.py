"""Trace-time validation of arguments: ranks, shapes, dtypes and static arguments.

Every check raises ``ValueError`` or ``TypeError`` with a message naming the argument, the
expected and the actual value. Nothing here looks at array values, so all of it runs at trace
time under ``jax.jit``.
"""

from __future__ import annotations

import fractions
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np


def as_int_labels(name: str, value, *, min_ndim: int = 1) -> jnp.ndarray:
    """Returns ``value`` as an integer array, checking its dtype and rank."""
    value = jnp.asarray(value)
    if not jnp.issubdtype(value.dtype, jnp.integer):
        raise TypeError(f"{name} must hold integer labels, got dtype {value.dtype}.")
    if value.ndim < min_ndim:
        raise ValueError(
            f"{name} must have at least {min_ndim} dimension(s) [..., T], got shape {value.shape}."
        )
    return value


def as_float(name: str, value, *, min_ndim: int = 0) -> jnp.ndarray:
    """Returns ``value`` as a floating array (integers and bools are promoted to float32)."""
    value = jnp.asarray(value)
    if not jnp.issubdtype(value.dtype, jnp.floating):
        value = value.astype(jnp.float32)
    if value.ndim < min_ndim:
        raise ValueError(
            f"{name} must have at least {min_ndim} dimension(s), got shape {value.shape}."
        )
    return value


def label_pair(targets, predictions):
    """Validates two label arrays of one shape; returns them with one integer dtype.

    Labels of different integer dtypes (say uint8 targets, int32 predictions) are both cast
    to int32; labels must then lie in the int32 range.
    """
    targets = as_int_labels("targets", targets)
    predictions = as_int_labels("predictions", predictions)
    same_shape("targets", targets, "predictions", predictions)
    if targets.dtype != predictions.dtype:
        targets, predictions = targets.astype(jnp.int32), predictions.astype(jnp.int32)
    return targets, predictions


def same_shape(name_a: str, a, name_b: str, b) -> None:
    """Raises unless ``a`` and ``b`` have the same shape."""
    if a.shape != b.shape:
        raise ValueError(
            f"{name_a} and {name_b} must have the same shape, got {a.shape} and {b.shape}."
        )


def as_mask(mask, shape: tuple[int, ...], name: str = "mask") -> jnp.ndarray | None:
    """Returns ``mask`` as a boolean array of ``shape`` (``None`` passes through)."""
    if mask is None:
        return None
    mask = jnp.asarray(mask)
    if mask.dtype != jnp.bool_:
        raise TypeError(
            f"{name} must be a boolean array (True = valid frame), got dtype {mask.dtype}."
        )
    if mask.shape != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {mask.shape}.")
    return mask


def static_int(name: str, value, *, minimum: int = 0, allow_none: bool = False) -> int | None:
    """Returns a static Python int >= ``minimum`` (or ``None`` when allowed)."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be a static Python int, got {value!r}.")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}.")
    return int(value)


def positive_if_static(name: str, value) -> None:
    """Raises if ``value`` is a concrete number that is not > 0 (a traced value passes: it
    may be annealed inside jit, where its value is not known)."""
    if isinstance(value, jax.core.Tracer):
        return
    array = np.asarray(value)
    if array.ndim == 0 and np.issubdtype(array.dtype, np.number) and not array > 0:
        raise ValueError(f"{name} must be > 0, got {value!r}.")


def static_labels(name: str, values) -> tuple[int, ...]:
    """Returns a static tuple of distinct integer labels (e.g. ``background``)."""
    if isinstance(values, (int, np.integer)) and not isinstance(values, bool):
        values = (values,)
    if not isinstance(values, Sequence) or isinstance(values, str):
        raise TypeError(f"{name} must be a tuple of integer labels, got {values!r}.")
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{name} must be a tuple of integer labels, got element {v!r}.")
        out.append(int(v))
    return tuple(sorted(set(out)))


def static_choice(name: str, value, choices: Sequence[str]) -> str:
    """Returns ``value`` if it is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {tuple(choices)}, got {value!r}.")
    return value


def static_thresholds(
    name: str, values, *, max_denominator: int = 1 << 15
) -> tuple[tuple[int, int], ...]:
    """Returns each threshold in (0, 1] as an exact fraction ``(numerator, denominator)``.

    A float such as ``0.1`` is taken to mean the simple fraction it was written as (1/10): the
    fraction with the smallest denominator that rounds to exactly this double. Testing
    ``i / u >= 1/10`` on integers then agrees with the reference scripts, which compare the
    double ``i / u`` with the double ``0.1``.
    """
    if isinstance(values, (int, float, np.floating, np.integer)):
        values = (values,)
    if not isinstance(values, Sequence) or len(values) == 0:
        raise ValueError(
            f"{name} must be a non-empty tuple of thresholds in (0, 1], got {values!r}."
        )
    out = []
    for v in values:
        v = float(v)
        if not 0.0 < v <= 1.0:
            raise ValueError(f"{name} must lie in (0, 1], got {v!r}.")
        frac = fractions.Fraction(v).limit_denominator(max_denominator)
        if float(frac) != v:
            raise ValueError(
                f"{name} must be simple fractions such as 0.1 or 0.25 (denominator <= "
                f"{max_denominator}); {v!r} is not."
            )
        out.append((frac.numerator, frac.denominator))
    return tuple(out)
