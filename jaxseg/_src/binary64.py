"""IEEE binary64 (float64) products and quotients of small integers, emulated with int32.

Some reference scripts count items with ``int(n * x)`` where ``x`` is a float64 product of
ratios, and the rounding of those products decides the count (ActivityNet's proposal
evaluation keeps ``int(100 * 0.29) = 28`` proposals). This module reproduces such counts
without ``jax_enable_x64`` and on backends without float64: a positive double is a 53-bit
mantissa in four 14-bit int32 limbs (little endian) and an exponent, ``value = m * 2**e``, and
every operation rounds to nearest, ties to even, as IEEE 754 does. Only what those counts need
is here: exact quotients of int32 values, products, and ``floor``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxseg._src.numerics import power_of_two

LIMB = 14
LIMBS = 4  # 56 bits >= the 53 of a mantissa
_MASK = (1 << LIMB) - 1
_FRACTION_BITS = 85  # quotient bits below the binary point: >= 55 significant ones


class Double(NamedTuple):
    """A non-negative float64 ``mantissa * 2**exponent``; zero has mantissa 0."""

    limbs: jax.Array  # int32 [..., 4], 14 bits each, little endian
    exponent: jax.Array  # int32 [...]


def _row(x, ndim):
    """A 1-D array shaped ``[1] * ndim + [n]`` to broadcast against ``[..., n]``."""
    return x.reshape((1,) * ndim + (-1,))


def _bits_msb_first(x, width):
    """``int32 [...]`` -> its ``width`` low bits, most significant first, ``int32 [..., width]``."""
    shifts = _row(jnp.arange(width - 1, -1, -1, dtype=jnp.int32), x.ndim)
    return (x[..., None] >> shifts) & 1


def _limbs_to_bits(limbs):
    """Limbs ``[..., L]`` -> bits ``[..., 14 L]`` most significant first."""
    return jnp.concatenate(
        [_bits_msb_first(limbs[..., i], LIMB) for i in range(limbs.shape[-1] - 1, -1, -1)], -1
    )


def _round(bits, exponent_of_last, sticky):
    """Rounds an integer given by ``bits [..., n]`` (MSB first) times ``2**exponent_of_last``,
    plus a sticky bit for anything lower, to a :class:`Double` (0 if every bit is 0)."""
    n = bits.shape[-1]
    lead = jnp.argmax(bits, axis=-1).astype(jnp.int32)
    padded = jnp.pad(bits, [(0, 0)] * (bits.ndim - 1) + [(0, 54)])
    window = jnp.take_along_axis(
        padded, lead[..., None] + _row(jnp.arange(54, dtype=jnp.int32), lead.ndim), -1
    )
    later = _row(jnp.arange(n, dtype=jnp.int32), lead.ndim) > (lead[..., None] + 53)
    rest = jnp.any((bits > 0) & later, axis=-1) | sticky
    weights = 1 << jnp.arange(LIMB - 1, -1, -1, dtype=jnp.int32)
    top = jnp.pad(window[..., :53], [(0, 0)] * (bits.ndim - 1) + [(3, 0)])  # 56 bits
    groups = top.reshape(*top.shape[:-1], LIMBS, LIMB)
    limbs = jnp.sum(groups * _row(weights, groups.ndim - 1), axis=-1, dtype=jnp.int32)[..., ::-1]
    lsb, round_bit = window[..., 52], window[..., 53]
    up = (round_bit > 0) & (rest | (lsb > 0))
    limbs = _add_small(limbs, up.astype(jnp.int32))
    overflow = limbs[..., LIMBS - 1] >> (53 - LIMB * (LIMBS - 1))  # mantissa reached 2**53
    power = _row(jnp.array([0, 0, 0, 1 << 10], jnp.int32), overflow.ndim)
    limbs = jnp.where(overflow[..., None] > 0, power, limbs)
    exponent = exponent_of_last + (n - 1 - lead) - 52 + overflow
    nonzero = jnp.any(bits > 0, axis=-1)
    return Double(jnp.where(nonzero[..., None], limbs, 0), exponent.astype(jnp.int32))


def _add_small(limbs, value):
    """``limbs + value`` with carries (the sum must fit in the limbs)."""
    out = []
    carry = value
    for i in range(limbs.shape[-1]):
        total = limbs[..., i] + carry
        out.append(total & _MASK)
        carry = total >> LIMB
    return jnp.stack(out, -1)


def from_int(n) -> Double:
    """A non-negative int32 as a Double (exact)."""
    n = jnp.asarray(n, jnp.int32)
    return _round(_bits_msb_first(n, 31), jnp.zeros(n.shape, jnp.int32), jnp.zeros(n.shape, bool))


def quotient(a, b) -> Double:
    """``fl(a / b)`` for int32 ``0 <= a`` and ``0 < b`` (bit-serial division)."""
    a, b = jnp.broadcast_arrays(jnp.asarray(a, jnp.int32), jnp.asarray(b, jnp.int32))
    divisor = b.astype(jnp.uint32)

    # The remainder stays below b < 2**31, so twice it fits in uint32 (not in int32).
    def step(r, _):
        r = 2 * r
        bit = r >= divisor
        return r - jnp.where(bit, divisor, 0), bit.astype(jnp.int32)

    remainder, fraction = lax.scan(step, (a % b).astype(jnp.uint32), None, length=_FRACTION_BITS)
    bits = jnp.concatenate([_bits_msb_first(a // b, 31), jnp.moveaxis(fraction, 0, -1)], -1)
    return _round(bits, jnp.full(a.shape, -_FRACTION_BITS, jnp.int32), remainder != 0)


def product(x: Double, y: Double) -> Double:
    """``fl(x * y)``."""
    columns = []
    for k in range(2 * LIMBS - 1):
        terms = [x.limbs[..., i] * y.limbs[..., k - i] for i in range(LIMBS) if 0 <= k - i < LIMBS]
        columns.append(sum(terms[1:], terms[0]))
    limbs, carry = [], jnp.zeros_like(columns[0])
    for column in columns:
        total = column + carry
        limbs.append(total & _MASK)
        carry = total >> LIMB
    limbs.append(carry)  # < 2**14: the product has at most 112 bits
    bits = _limbs_to_bits(jnp.stack(limbs, -1))
    return _round(bits, x.exponent + y.exponent, jnp.zeros(bits.shape[:-1], bool))


def floor(x: Double) -> jax.Array:
    """``floor(x)`` as int32 (precondition: ``x < 2**31``)."""
    bits = _limbs_to_bits(x.limbs)[..., ::-1]  # least significant first, 56 bits
    place = _row(jnp.arange(bits.shape[-1], dtype=jnp.int32), x.exponent.ndim)
    place = place + x.exponent[..., None]
    kept = (place >= 0) & (place < 31)
    return jnp.sum(jnp.where(kept, bits << jnp.clip(place, 0, 30), 0), axis=-1, dtype=jnp.int32)


def to_float(x: Double, dtype=jnp.float32) -> jax.Array:
    """The value in a float dtype (rounded when ``dtype`` is float32; exact in float64 for
    normal values)."""
    value = jnp.zeros(x.exponent.shape, dtype)
    for i in range(LIMBS - 1, -1, -1):
        value = value * (1 << LIMB) + x.limbs[..., i].astype(dtype)
    half = x.exponent // 2
    return value * power_of_two(half, dtype) * power_of_two(x.exponent - half, dtype)


def constant(values) -> Double:
    """Python floats (non-negative, finite) as a Double of shape ``[len(values)]``."""
    limbs, exponents = [], []
    for v in values:
        mantissa, exponent = math.frexp(float(v))
        m = int(mantissa * (1 << 53))
        limbs.append([(m >> (LIMB * i)) & _MASK for i in range(LIMBS)])
        exponents.append(exponent - 53 if m else 0)
    return Double(jnp.asarray(np.array(limbs, np.int32)), jnp.asarray(exponents, jnp.int32))
