"""Exact integer counters that stay exact past 2^31 without ``jax_enable_x64``.

A count is stored as two int32 arrays, ``high`` and ``low``, with value
``high * 2**20 + low``. Updates keep ``low`` below ``2**20``, so the states of up to 2047
devices can be summed with ``jax.lax.psum`` without overflow, and any state, normalised or
not, means the same number. The exact value reaches ``2**51``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxseg._src.numerics import integer_ratio

LOW_BITS = 20
_LOW_MASK = (1 << LOW_BITS) - 1


class Count(NamedTuple):
    """An exact non-negative count ``high * 2**20 + low`` (int32 arrays of equal shape)."""

    high: jax.Array
    low: jax.Array


def zeros(shape=()) -> Count:
    """A zero count of the given shape."""
    return Count(jnp.zeros(shape, jnp.int32), jnp.zeros(shape, jnp.int32))


def normalize(count: Count) -> Count:
    """Moves whole multiples of 2**20 from ``low`` into ``high``."""
    return Count(count.high + (count.low >> LOW_BITS), count.low & _LOW_MASK)


def add(count: Count, increment) -> Count:
    """Adds a non-negative int32 ``increment`` (< 2**31 - 2**20) to ``count`` exactly."""
    increment = jnp.asarray(increment, jnp.int32)
    return normalize(
        Count(count.high + (increment >> LOW_BITS), count.low + (increment & _LOW_MASK))
    )


def merge(a: Count, b: Count) -> Count:
    """The exact sum of two counts."""
    return normalize(Count(a.high + b.high, a.low + b.low))


def subtract(a: Count, b: Count) -> Count:
    """The exact difference ``a - b`` of two counts with ``a >= b``."""
    return normalize(Count(a.high - b.high, a.low - b.low))


def total(count: Count, axis: int) -> Count:
    """The exact sum of a count's entries along ``axis``."""
    count = normalize(count)
    high = jnp.sum(count.high, axis=axis, dtype=jnp.int32)  # below 2**31: the sum is < 2**51
    return add_sum(Count(high, jnp.zeros_like(high)), count.low, axis=axis)


def add_sums(counts, values) -> list[Count]:
    """:func:`add_sum` of several counts at once, summing all their columns in one pass.

    ``values[i]`` (non-negative int32, or bool) has shape ``batch + counts[i].shape``; the
    leading ``batch`` dims (the same for all) are summed over.
    """
    shapes = [c.high.shape for c in counts]
    sizes = [int(np.prod(shape, dtype=np.int64)) for shape in shapes]
    columns = jnp.concatenate(
        [jnp.reshape(jnp.asarray(v).astype(jnp.int32), (-1, n)) for v, n in zip(values, sizes)],
        axis=1,
    )
    flat = Count(*(jnp.concatenate([jnp.ravel(c[i]) for c in counts]) for i in (0, 1)))
    total = add_sum(flat, columns, axis=0)
    bounds = np.cumsum([0, *sizes])
    return [
        Count(total.high[a:b].reshape(shape), total.low[a:b].reshape(shape))
        for a, b, shape in zip(bounds[:-1], bounds[1:], shapes)
    ]


def to_float(count: Count) -> jax.Array:
    """The count as float32 (relative error <= 2**-24)."""
    return count.high.astype(jnp.float32) * float(1 << LOW_BITS) + count.low.astype(jnp.float32)


def to_integer(count: Count) -> jax.Array:
    """The count as an exact integer array, for ``compute`` results (jit-able).

    int64 with ``jax_enable_x64`` (every count, up to 2**51); otherwise int32, exact below
    2**31, and -1 for a count that int32 cannot hold (never a wrapped or rounded value: read
    such a count exactly on the host with :func:`to_int`).
    """
    count = normalize(count)
    if jax.dtypes.canonicalize_dtype(jnp.int64) == jnp.int64:
        return (count.high.astype(jnp.int64) << LOW_BITS) + count.low.astype(jnp.int64)
    fits = count.high < (1 << (31 - LOW_BITS))
    return jnp.where(fits, (count.high << LOW_BITS) + count.low, -1)


def ratio(numerator: Count, denominator: Count, fill=jnp.nan) -> jax.Array:
    """``numerator / denominator`` in float32, each quotient correctly rounded for every
    count (``numerics.integer_ratio``), ``fill`` where the denominator is 0.

    >>> correct, frames = add(zeros(), 90_000_001), add(zeros(), 100_000_000)
    >>> float(ratio(correct, frames))  # to_float(correct) / to_float(frames): 0.89999998
    0.9000000357627869
    """
    return integer_ratio(_words(numerator), _words(denominator), fill)


def _words(count: Count) -> tuple[jax.Array, jax.Array]:
    """The count as ``(high, low)`` uint32 words of its 64-bit value."""
    count = normalize(count)
    high = count.high.astype(jnp.uint32)
    return high >> (32 - LOW_BITS), (high << LOW_BITS) | count.low.astype(jnp.uint32)


def to_int(count: Count) -> np.ndarray:
    """The exact count on the host, as a numpy int64 array (or Python int for scalars).

    A streaming state's counters are split in two int32 halves so that they stay exact past
    2**31; ``compute`` reports such a count as -1 without ``jax_enable_x64``, this reads it.

    Args:
      count: a :class:`Count` of any shape (a state's leaf, such as ``state.frames``).

    Returns:
      Its exact value: numpy int64 of the count's shape, or a Python int for a scalar.

    >>> big = add(zeros(), 2**30)
    >>> to_int(add(add(big, 2**30), 2**30))
    3221225472
    """
    high = np.asarray(count.high, np.int64)
    low = np.asarray(count.low, np.int64)
    value = high * (1 << LOW_BITS) + low
    return int(value) if value.ndim == 0 else value


def add_sum(count: Count, values, axis=None) -> Count:
    """Adds ``sum(values, axis)`` of non-negative int32 ``values`` to ``count``, exactly.

    Each value is split into 10-bit limbs before summing, so no partial sum can overflow
    for fewer than 2**20 summands.
    """
    values = jnp.asarray(values, jnp.int32)
    total = lambda x: jnp.sum(x, axis=axis, dtype=jnp.int32)  # noqa: E731
    low = total(values & 0x3FF)
    mid = total((values >> 10) & 0x3FF)
    high = total(values >> 20)
    return normalize(
        Count(count.high + high + (mid >> 10), count.low + low + ((mid & 0x3FF) << 10))
    )
