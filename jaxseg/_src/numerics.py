"""Small numerical building blocks shared by the metrics and losses."""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax


def safe_divide(numerator, denominator, fill=0.0):
    """``numerator / denominator``, and ``fill`` where the denominator is 0.

    Uses the double-``where`` pattern so that the gradient is finite everywhere, including
    where the denominator is 0.

    >>> float(safe_divide(1.0, 0.0, fill=-1.0))
    -1.0
    """
    numerator = jnp.asarray(numerator, jnp.result_type(numerator, jnp.float32))
    denominator = jnp.asarray(denominator, numerator.dtype)
    nonzero = denominator != 0
    ratio = numerator / jnp.where(nonzero, denominator, 1)
    return jnp.where(nonzero, ratio, jnp.asarray(fill, ratio.dtype))


def _mul_wide(a, b):
    """Exact product of non-negative int32 values as ``(high, low)`` uint32 words."""
    a = jnp.asarray(a).astype(jnp.uint32)
    b = jnp.asarray(b).astype(jnp.uint32)
    a_hi, a_lo = a >> 16, a & 0xFFFF
    b_hi, b_lo = b >> 16, b & 0xFFFF
    low = a_lo * b_lo
    mid1 = a_hi * b_lo
    mid2 = a_lo * b_hi
    high = a_hi * b_hi
    # Add the two middle products (each < 2^32) shifted by 16 into (high, low) with carries.
    mid = mid1 + mid2
    mid_carry = (mid < mid1).astype(jnp.uint32)
    low_new = low + (mid << 16)
    low_carry = (low_new < low).astype(jnp.uint32)
    high = high + (mid >> 16) + (mid_carry << 16) + low_carry
    return high, low_new


def compare_products(a, b, c, d):
    """Sign of ``a*b - c*d`` (-1, 0 or 1) for non-negative int32 arrays, computed exactly.

    >>> int(compare_products(46341, 46341, 46340, 46342))
    1
    """
    ab_hi, ab_lo = _mul_wide(a, b)
    cd_hi, cd_lo = _mul_wide(c, d)
    greater = (ab_hi > cd_hi) | ((ab_hi == cd_hi) & (ab_lo > cd_lo))
    less = (ab_hi < cd_hi) | ((ab_hi == cd_hi) & (ab_lo < cd_lo))
    return greater.astype(jnp.int32) - less.astype(jnp.int32)


def popcount(words):
    """Number of set bits of each unsigned integer word."""
    return lax.population_count(words)
