"""Small numerical building blocks shared by the metrics and losses."""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

_BLOCK = 64  # entries summed by one triangular matrix product
_EXACT_FLOAT32 = 1 << 24  # float32 holds every integer below this
_INT32_LIMIT = 1 << 31
# Float matrix products ask for it: at the default precision XLA:GPU may round float32
# operands to TF32 (11 significant bits), which changes counts and losses.
FULL_PRECISION = lax.Precision.HIGHEST


def safe_divide(numerator, denominator, fill=0.0):
    """``numerator / denominator`` as :func:`divide` rounds it, and ``fill`` where the
    denominator is 0.

    Uses the double-``where`` pattern so that the gradient is finite everywhere, including
    where the denominator is 0.

    >>> float(safe_divide(1.0, 0.0, fill=-1.0))
    -1.0
    """
    numerator = jnp.asarray(numerator)
    wide = jnp.issubdtype(numerator.dtype, jnp.floating) and numerator.dtype.itemsize >= 4
    numerator = numerator.astype(numerator.dtype if wide else jnp.float32)  # float64 stays
    denominator = jnp.asarray(denominator, numerator.dtype)
    nonzero = denominator != 0
    ratio = divide(numerator, jnp.where(nonzero, denominator, 1))
    return jnp.where(nonzero, ratio, jnp.asarray(fill, ratio.dtype))


def divide(numerator, denominator):
    """``numerator / denominator`` rounded to nearest (ties to even) on every backend, with
    the gradient of ``/``.

    XLA:CPU divides float32 as IEEE 754 asks (but for a denominator shared by many
    quotients: see :func:`count_ratio`). XLA:GPU lowers a float32 division to PTX's
    ``div.full.f32``, within 2 ulp (on an H200, 5 / 6 read 0.83333337 and 9 / 200 read
    0.044999998; openxla/xla#37181), so on other backends a float32 quotient is the one of
    :func:`rounded_quotient`. Other dtypes divide as XLA does (float64 as IEEE 754 on CPU
    and GPU).

    >>> float(divide(jnp.float32(5), jnp.float32(6)))
    0.8333333134651184
    """
    numerator, denominator = jnp.broadcast_arrays(numerator, denominator)
    if numerator.dtype != jnp.float32 or denominator.dtype != jnp.float32:
        return numerator / denominator
    return lax.platform_dependent(numerator, denominator, cpu=lax.div, default=rounded_quotient)


def rounded_quotient(a, b):
    """float32 ``a / b`` rounded to nearest (ties to even) from the operands' integer
    significands, whatever the backend's division; its gradient is that of ``a / b``.

    ``a = ma 2^ea``, ``b = mb 2^eb`` with 24-bit integers ``ma``, ``mb``: long division of
    ``ma`` by ``mb`` in chunks of 7 bits (the remainder stays below ``2**24``, so each
    chunk's shifted remainder fits int32) gives 28 bits of ``ma / mb`` and a remainder, so the
    24 bits of the result, its rounding bit and a sticky bit. Zeros, infinities, NaN,
    subnormal operands and quotients outside float32's normal range take the backend's
    ``a / b``.
    """
    quotient = a / b
    bits_a = lax.bitcast_convert_type(a, jnp.int32)
    bits_b = lax.bitcast_convert_type(b, jnp.int32)
    ea, eb = (bits_a >> 23) & 0xFF, (bits_b >> 23) & 0xFF
    ma, mb = (bits_a & 0x7FFFFF) | 0x800000, (bits_b & 0x7FFFFF) | 0x800000
    q = (ma >= mb).astype(jnp.int32)
    r = ma - q * mb
    for _ in range(4):
        r = r << 7
        q = (q << 7) | lax.div(r, mb)
        r = lax.rem(r, mb)
    low_bits = jnp.where(q >= 1 << 28, 5, 4)  # below the 24 bits kept: rounding bit + rest
    kept = q >> low_bits
    rounding = (q >> (low_bits - 1)) & 1
    sticky = ((q & ((1 << (low_bits - 1)) - 1)) != 0) | (r != 0)
    up = (rounding == 1) & (sticky | ((kept & 1) == 1))  # to nearest, ties to even
    kept = kept + up.astype(jnp.int32)  # at most 2**24: exact in float32
    exponent = ea - eb + low_bits - 5  # of the quotient's leading bit
    magnitude = kept.astype(jnp.float32) * jnp.float32(2.0**-23) * power_of_two(exponent)
    exact = jnp.where((bits_a ^ bits_b) < 0, -magnitude, magnitude)
    regular = (ea > 0) & (ea < 255) & (eb > 0) & (eb < 255)
    regular = regular & (exponent >= -126) & (exponent <= 127)
    return jnp.where(regular, quotient + lax.stop_gradient(exact - quotient), quotient)


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


def compare_products(a, b, c, d, *, bound: int | None = None):
    """Sign of ``a*b - c*d`` (-1, 0 or 1) for non-negative int32 arrays, computed exactly.

    Args:
      a, b, c, d: non-negative int32 arrays (broadcast together).
      bound: static, optional: no operand exceeds it. Products that cannot reach 2**31 are
        compared as int32 products; otherwise (and without a bound) as 64-bit products in two
        uint32 words.

    >>> int(compare_products(46341, 46341, 46340, 46342))
    1
    >>> int(compare_products(3, 4, 2, 6, bound=6))
    0
    """
    if bound is not None and bound * bound < _INT32_LIMIT:
        return jnp.sign(jnp.asarray(a) * b - jnp.asarray(c) * d).astype(jnp.int32)
    ab_hi, ab_lo = _mul_wide(a, b)
    cd_hi, cd_lo = _mul_wide(c, d)
    greater = (ab_hi > cd_hi) | ((ab_hi == cd_hi) & (ab_lo > cd_lo))
    less = (ab_hi < cd_hi) | ((ab_hi == cd_hi) & (ab_lo < cd_lo))
    return greater.astype(jnp.int32) - less.astype(jnp.int32)


def precision_recall_f1(tp, fp, fn):
    """``(tp / (tp + fp), tp / (tp + fn), 2 tp / (2 tp + fp + fn))``, 0 where a denominator
    is 0 (MS-TCN's ``nan_to_num``), elementwise.

    >>> [float(x) for x in precision_recall_f1(2.0, 1.0, 0.0)]
    [0.6666666865348816, 1.0, 0.800000011920929]
    """
    return (
        safe_divide(tp, tp + fp, 0.0),
        safe_divide(tp, tp + fn, 0.0),
        safe_divide(2 * tp, 2 * tp + fp + fn, 0.0),
    )


def pairwise_sum(x):
    """Sum over the last axis, adding halves pairwise (zeros pad it to a power of two).

    The same row gives the same bits in any batch and any padding with zeros: ``jnp.sum``
    leaves the order of the additions to XLA, which sums a ``[C]`` row and the rows of a
    ``[B, C]`` batch in different orders (a streaming mean over classes was 1 ulp off the
    batch metric's).

    >>> float(pairwise_sum(jnp.array([1.0, 2.0, 3.0])))
    6.0
    """
    size = 1 << max(0, (x.shape[-1] - 1).bit_length())
    x = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, size - x.shape[-1])])
    while x.shape[-1] > 1:
        x = x[..., 0::2] + x[..., 1::2]
    return x[..., 0]


def nanmean(values):
    """Mean over the last axis of the values that are not NaN; NaN where every one is.

    >>> float(nanmean(jnp.array([1.0, jnp.nan, 3.0])))
    2.0
    """
    defined = ~jnp.isnan(values)
    total = pairwise_sum(jnp.where(defined, values, 0.0))
    count = jnp.sum(defined, axis=-1, dtype=jnp.int32).astype(jnp.float32)
    return safe_divide(total, count, jnp.nan)


def popcount(words):
    """Number of set bits of each unsigned integer word."""
    return lax.population_count(words)


def count_ratio(counts, totals, fill=0.0):
    """``counts / totals``, each quotient correctly rounded, and ``fill`` where a total is 0:
    integer counts (float32 quotients) or floats holding exact counts or sums (their dtype),
    over totals of either kind, below 2**24 (a row's frames or queries; the streaming
    accumulators divide larger dataset counts with :func:`integer_ratio`, whose loop would
    cost every jitted metric compilation time).

    A total that is the same for every quotient (without a mask, the frames of a padded
    batch, the queries of a set) is one number to XLA, which divides by it as a product with
    its reciprocal (1 ulp off: 9 / 10 read 0.90000004). Made to vary like the counts (also
    under ``jax.vmap``) and put behind a barrier, the totals are divided quotient by quotient.

    >>> count_ratio(jnp.array([9, 9]), jnp.array(10)).tolist()
    [0.8999999761581421, 0.8999999761581421]
    """
    counts, totals = jnp.asarray(counts), jnp.asarray(totals)
    if jnp.issubdtype(counts.dtype, jnp.integer):
        varying, counts = counts & 0, counts.astype(jnp.float32)
    else:  # no integer trick on floats; isnan is False here, but XLA cannot know it
        varying = jnp.isnan(counts).astype(totals.dtype)
    totals = lax.optimization_barrier(totals + varying)
    return safe_divide(counts, totals.astype(counts.dtype), fill)


def _leading_zeros(high, low):
    """Leading zero bits of the 64-bit values ``(high, low)`` (64 for 0), int32."""
    return jnp.where(high != 0, lax.clz(high), 32 + lax.clz(low)).astype(jnp.int32)


def _shift_left(high, low, shift):
    """``(high, low) << shift`` for int32 shifts in [0, 63] that lose no set bit."""
    small = jnp.clip(shift, 0, 31).astype(jnp.uint32)
    carry = jnp.where(shift > 0, low >> (32 - jnp.clip(shift, 1, 31)).astype(jnp.uint32), 0)
    large = shift >= 32
    wide_high = low << jnp.clip(shift - 32, 0, 31).astype(jnp.uint32)
    return (
        jnp.where(large, wide_high, (high << small) | carry.astype(jnp.uint32)),
        jnp.where(large, jnp.uint32(0), low << small),
    )


def _at_least(a, b):
    """``a >= b`` for 64-bit values as ``(high, low)`` uint32 words."""
    return (a[0] > b[0]) | ((a[0] == b[0]) & (a[1] >= b[1]))


def _minus(a, b):
    """``a - b`` for 64-bit values ``a >= b`` as ``(high, low)`` uint32 words."""
    return a[0] - b[0] - (a[1] < b[1]).astype(jnp.uint32), a[1] - b[1]


def power_of_two(exponent, dtype=jnp.float32):
    """``2.0 ** exponent`` for the exponents of normal numbers of ``dtype``, from its bit
    pattern: ``jnp.ldexp`` computes the power with ``pow``, which XLA:GPU may round.

    >>> float(power_of_two(jnp.int32(-3)))
    0.125
    """
    info = jnp.finfo(dtype)
    ints = jnp.int64 if info.bits == 64 else jnp.int32
    biased = jnp.clip(exponent, info.minexp, info.maxexp - 1).astype(ints) + (1 - info.minexp)
    return lax.bitcast_convert_type(biased << info.nmant, dtype)


def integer_ratio(numerator, denominator, fill=0.0):
    """``n / d`` in float32, correctly rounded (to nearest, ties to even), for integers
    ``0 <= n, d < 2**63`` given as ``(high, low)`` uint32 words; ``fill`` where ``d = 0``.

    Converting a count above 2**24 to float32 rounds it, and the quotient of rounded counts
    can be 1 ulp off. Here both are scaled to the same leading bit and divided bit by bit
    (restoring division): 24 quotient bits, a rounding bit, and the remainder's sticky bit.

    >>> words = lambda x: (jnp.uint32(x >> 32), jnp.uint32(x & 0xFFFFFFFF))
    >>> float(integer_ratio(words(90_000_001), words(100_000_000)))  # in float32: 0.89999998
    0.9000000357627869
    """
    n = jnp.broadcast_arrays(*numerator, *denominator)
    numerator, denominator = n[:2], n[2:]
    n_shift = _leading_zeros(*numerator) - 1  # leading bits to bit 62
    d_shift = _leading_zeros(*denominator) - 1
    r = _shift_left(*numerator, jnp.clip(n_shift, 0, 63))
    d = _shift_left(*denominator, jnp.clip(d_shift, 0, 63))
    below = ~_at_least(r, d)  # then one more bit: n / d scaled lies in [1, 2)
    r = _shift_left(*r, below.astype(jnp.int32))
    exponent = d_shift - n_shift - below.astype(jnp.int32)

    def step(_, state):
        r, bits = state
        bit = _at_least(r, d)
        high, low = _minus(r, d)
        r = (jnp.where(bit, high, r[0]), jnp.where(bit, low, r[1]))
        return _shift_left(*r, jnp.ones_like(exponent)), 2 * bits + bit.astype(jnp.int32)

    r, bits = lax.fori_loop(0, 25, step, (r, jnp.zeros_like(exponent)), unroll=True)
    mantissa, rounding = bits >> 1, bits & 1
    sticky = (r[0] | r[1]) != 0
    up = (rounding == 1) & (sticky | ((mantissa & 1) == 1))  # to nearest, ties to even
    mantissa = mantissa + up.astype(jnp.int32)
    value = mantissa.astype(jnp.float32) * power_of_two(exponent - 23)
    value = jnp.where((numerator[0] | numerator[1]) == 0, 0.0, value)
    return jnp.where((denominator[0] | denominator[1]) == 0, jnp.float32(fill), value)


def count_set_bits(words):
    """int32 number of set bits of bit-packed ``words [..., W]``, over the last axis.

    >>> int(count_set_bits(jnp.array([0b1011, 0b1], jnp.uint32)))
    4
    """
    return jnp.sum(popcount(words), axis=-1, dtype=jnp.int32)


def _blocked_running_sum(x, block: int, within_block):
    """Inclusive running sum along the last axis: ``within_block`` sums inside blocks of
    ``block`` entries (it gets arrays whose last axis is at most ``block``), and the block
    totals are summed by the same scheme, recursively."""
    n = x.shape[-1]
    if n <= block:
        return within_block(x)
    blocks = -(-n // block)
    grid = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, blocks * block - n)])
    within = within_block(grid.reshape(*x.shape[:-1], blocks, block))
    totals = within[..., -1]
    before = _blocked_running_sum(totals, block, within_block) - totals
    return (within + before[..., None]).reshape(*x.shape[:-1], blocks * block)[..., :n]


def _triangular_product(x):
    """Running sums of float32 rows by a matrix product with an upper triangle of ones."""
    upper = jnp.triu(jnp.ones((x.shape[-1], x.shape[-1]), x.dtype))
    return jnp.matmul(x, upper, precision=FULL_PRECISION)


def _cumsum(x):
    return jnp.cumsum(x, axis=-1, dtype=jnp.int32)


def running_sum(x, *, largest: int):
    """Inclusive running sum of integers in ``[0, largest]`` along the last axis, as int32.

    Blocks of 64 entries are summed by a float32 matrix product with a triangular matrix, and
    the block totals by the same scheme: about 64 multiply-adds per entry and a few kernels
    per level of 64. float32 is exact while ``largest * N < 2**24``; beyond, a parallel
    prefix scan. On CPU it runs as fast as ``lax.associative_scan`` with a third of the
    kernels (so it compiles faster), and ``jnp.cumsum`` lowers to a windowed reduction,
    quadratic in N. Other backends run ``jnp.cumsum`` (the same integers).

    >>> running_sum(jnp.array([1, 0, 3, 2]), largest=3).tolist()
    [1, 1, 4, 6]
    """
    if x.shape[-1] == 0:
        return jnp.zeros(x.shape, jnp.int32)
    if largest * x.shape[-1] >= _EXACT_FLOAT32:
        on_cpu = lambda x: lax.associative_scan(jnp.add, x.astype(jnp.int32), axis=-1)  # noqa: E731
    else:

        def on_cpu(x):
            blocked = _blocked_running_sum(x.astype(jnp.float32), _BLOCK, _triangular_product)
            return blocked.astype(jnp.int32)

    return lax.platform_dependent(x, cpu=on_cpu, default=_cumsum)
