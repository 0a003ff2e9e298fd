"""Bootstrap intervals and paired tests over per-video statistics, as weighted sums.

A dataset-level metric here is a function ``metric_fn(statistics, weights)`` of per-video
statistics (a pytree whose leaves have a leading video axis ``[N, ...]``) and of integer
per-video multiplicities ``weights`` (int32 ``[N]``): the metric of the multiset of videos in
which video ``i`` occurs ``weights[i]`` times. A plain evaluation is ``weights = 1``; a
bootstrap replicate is a multinomial weight vector; the two halves of a paired permutation
are 0/1 weights over the videos of both models. Dataset metrics are ratios of weighted sums,
so thousands of replicates cost a few matrix products under ``vmap``.
"""

from __future__ import annotations

from collections.abc import Callable
from statistics import NormalDist
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import ndtr, ndtri

from jaxseg._src import checks
from jaxseg._src.deprecation import renamed_arguments
from jaxseg._src.numerics import FULL_PRECISION, _mul_wide, divide, safe_divide
from jaxseg._src.programs import one_program

MetricFn = Callable[[Any, jax.Array], Any]
METHODS = ("percentile", "bca")
ALTERNATIVES = ("two-sided", "greater", "less")


class BootstrapResult(NamedTuple):
    """A bootstrap confidence interval; every field is a pytree shaped like the metric.

    Attributes:
      estimate: the metric on the original videos (``weights = 1``).
      lower: lower end of the interval.
      upper: upper end of the interval.
      standard_error: standard deviation of the bootstrap replicates (ddof 1).
    """

    estimate: Any
    lower: Any
    upper: Any
    standard_error: Any


class PairedTestResult(NamedTuple):
    """A paired comparison of two models on the same videos; pytrees shaped like the metric.

    Attributes:
      difference: ``metric(a) - metric(b)`` on the original videos.
      lower: lower end of the bootstrap interval of the difference.
      upper: upper end of the bootstrap interval of the difference.
      p_value: p-value of the null hypothesis "no difference", in (0, 1].
    """

    difference: Any
    lower: Any
    upper: Any
    p_value: Any


class PermutationTestResult(NamedTuple):
    """A paired permutation test; pytrees shaped like the metric.

    Attributes:
      difference: ``metric(a) - metric(b)`` on the original videos.
      p_value: p-value of the null hypothesis "the models are exchangeable", in (0, 1].
    """

    difference: Any
    p_value: Any


@one_program
def weighted_sum(values, weights) -> jax.Array:
    """Sum over videos of ``weights[i] * values[i, ...]``.

    Integer and boolean values are summed in int32 (int64 for int64 values under
    ``jax_enable_x64``), exactly and independently of the order of the videos as long as the
    total fits; floating values in float32, or float64 for float64 values (half precision, 8 or
    11 bits, would lose the sum of a few hundred values).

    Args:
      values: ``[N, ...]`` per-video values (integer, bool or floating).
      weights: int32 ``[N]`` per-video multiplicities.

    Returns:
      ``[...]`` int32 for integer/bool values (int64 for int64 ones), else float32 (float64
      for float64 values).

    >>> weighted_sum(jnp.array([[1, 2], [3, 4]]), jnp.array([2, 1])).tolist()
    [5, 8]
    """
    values = jnp.asarray(values)
    if jnp.issubdtype(values.dtype, jnp.floating):
        values = checks.as_float("values", values)
    else:
        # int64 values (only under x64) summed whole: through int32, 2**40 summed to 0
        values = values.astype(jnp.int64 if values.dtype.itemsize == 8 else jnp.int32)
    weights = jnp.asarray(weights)
    if not (jnp.issubdtype(weights.dtype, jnp.integer) or weights.dtype == jnp.bool_):
        # a cast would floor them: weights 0.5 and 0.5 summed 1 and 2 to 0
        raise TypeError(f"weights must be integer multiplicities [N], got dtype {weights.dtype}.")
    if values.ndim == 0 or weights.shape != values.shape[:1]:
        raise ValueError(
            "weights must be [N], one multiplicity per video of values [N, ...], got weights of "
            f"shape {weights.shape} and values of shape {values.shape}."
        )
    weights = weights.astype(values.dtype)
    return jnp.tensordot(weights, values, axes=(0, 0), precision=FULL_PRECISION)


def _num_videos(name: str, statistics) -> int:
    """The common leading (video) dimension of every leaf of ``stats``."""
    leaves = jax.tree_util.tree_leaves(statistics)
    if not leaves:
        raise ValueError(
            f"{name} must be a pytree of per-video arrays [N, ...], got {statistics!r}."
        )
    shapes = [jnp.shape(x) for x in leaves]
    if any(len(s) == 0 for s in shapes) or len({s[0] for s in shapes}) != 1:
        raise ValueError(
            f"every leaf of {name} must have the same leading (video) dimension N, got leaf "
            f"shapes {shapes}."
        )
    if shapes[0][0] < 1:
        raise ValueError(f"{name} must hold at least one video, got N = 0.")
    return int(shapes[0][0])


def _check_key(key):
    key = jnp.asarray(key) if not isinstance(key, jax.Array) else key
    typed = jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
    if not (typed and key.shape == ()) and not (key.dtype == jnp.uint32 and key.shape == (2,)):
        raise TypeError(
            "key must be a single PRNG key (jax.random.key(seed) or jax.random.PRNGKey(seed)), "
            f"got dtype {key.dtype} and shape {key.shape}."
        )
    return key


def _check_confidence(confidence) -> float:
    # numpy scalars are static too (hashable host values), as for static_int
    if isinstance(confidence, (bool, np.bool_)) or not isinstance(
        confidence, (int, float, np.integer, np.floating)
    ):
        raise TypeError(f"confidence must be a static Python float in (0, 1), got {confidence!r}.")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}.")
    return float(confidence)


def _stratum_ranges(strata, n: int):
    """``(order, start, size)`` int32 ``[N]``: position ``j`` of ``order`` draws uniformly from
    ``order[start[j] : start[j] + size[j]]``, the videos of its own stratum."""
    if strata is None:
        return (jnp.arange(n, dtype=jnp.int32), jnp.zeros(n, jnp.int32), jnp.full(n, n, jnp.int32))
    strata = jnp.asarray(strata)
    if not jnp.issubdtype(strata.dtype, jnp.integer) or strata.shape != (n,):
        raise ValueError(
            f"strata must be an integer array [N] = [{n}] of per-video group ids, got dtype "
            f"{strata.dtype} and shape {strata.shape}."
        )
    order = jnp.argsort(strata, stable=True).astype(jnp.int32)
    grouped = strata[order]
    start = jnp.searchsorted(grouped, grouped, side="left").astype(jnp.int32)
    end = jnp.searchsorted(grouped, grouped, side="right").astype(jnp.int32)
    return order, start, end - start


def _draw(key, ranges):
    """One resample: int32 ``[N]`` video indices, uniform within each stratum."""
    order, start, size = ranges
    bits = jax.random.bits(key, order.shape, jnp.uint32)
    offset, _ = _mul_wide(bits, size)  # floor(bits * size / 2^32), uniform up to size / 2^32
    return order[start + offset.astype(jnp.int32)]


def _multiplicities(indices, n: int) -> jax.Array:
    return jnp.zeros(n, jnp.int32).at[indices].add(1)


@one_program
def resample_indices(key, *, num_videos: int, num_samples: int, strata=None) -> jax.Array:
    """The videos drawn by :func:`bootstrap` (with replacement; per stratum if given).

    Replicate ``b`` uses the key ``jax.random.split(key, num_samples)[b]``, so replicates do
    not depend on ``num_samples`` beyond their number, nor on the chunking of the computation.
    Each index is ``floor(u * n_s / 2^32)`` for 32 random bits ``u`` (``n_s`` = size of the
    stratum): uniform up to a relative bias below ``n_s / 2^32``.

    Args:
      key: a PRNG key.
      num_videos: static number of videos N.
      num_samples: static number of replicates B.
      strata: optional integer ``[N]`` group ids (split, dataset); each replicate then draws
        as many videos from each group as the group has. Default: one group.

    Returns:
      int32 ``[B, N]`` indices of the resampled videos; sorted by stratum, not by draw.

    >>> resample_indices(jax.random.key(0), num_videos=4, num_samples=2).shape
    (2, 4)
    """
    key = _check_key(key)
    n = checks.static_int("num_videos", num_videos, minimum=1)
    num_samples = checks.static_int("num_samples", num_samples, minimum=1)
    ranges = _stratum_ranges(strata, n)
    return jax.vmap(lambda k: _draw(k, ranges))(jax.random.split(key, num_samples))


@renamed_arguments(stats="statistics")
@one_program
def bootstrap_replicates(
    statistics,
    metric_fn: MetricFn,
    *,
    key,
    num_samples: int = 10_000,
    strata=None,
    batch_size: int = 1000,
):
    """The metric on ``num_samples`` bootstrap resamples of the videos.

    Replicate ``b`` is ``metric_fn(statistics, w_b)`` with
    ``w_b = bincount(resample_indices(...)[b])``
    (multinomial multiplicities), computed under ``vmap`` in chunks of ``batch_size`` replicates
    so that memory stays ``O(batch_size * N)``.

    Args:
      statistics, metric_fn, key, strata: as in :func:`bootstrap` (the same key gives the
        same replicates).
      num_samples: static number of replicates B (default 10,000).
      batch_size: static number of replicates computed at once (default 1000); the result
        does not depend on it.

    Returns:
      ``metric_fn``'s output pytree with a leading axis ``[B, ...]``.

    >>> mean = lambda x, w: weighted_sum(x, w) / weighted_sum(jnp.ones_like(x), w)
    >>> bootstrap_replicates(jnp.ones(5), mean, key=jax.random.key(0), num_samples=3).tolist()
    [1.0, 1.0, 1.0]
    """
    key = _check_key(key)
    n = _num_videos("statistics", statistics)
    num_samples = checks.static_int("num_samples", num_samples, minimum=1)
    batch_size = checks.static_int("batch_size", batch_size, minimum=1)
    ranges = _stratum_ranges(strata, n)

    def replicate(k):
        return metric_fn(statistics, _multiplicities(_draw(k, ranges), n))

    return jax.lax.map(
        replicate, jax.random.split(key, num_samples), batch_size=min(batch_size, num_samples)
    )


def _quantiles(replicates, levels):
    """Linear-interpolation quantiles ``[2, ...]`` of ``replicates [B, ...]`` at ``levels``
    (``[2]`` or ``[2, ...]``); NaN if any replicate is NaN."""
    ordered = jnp.sort(replicates, axis=0)
    b = replicates.shape[0]
    levels = jnp.reshape(levels, levels.shape + (1,) * (replicates.ndim - levels.ndim))
    position = jnp.broadcast_to(levels * (b - 1), (2, *replicates.shape[1:]))
    below = jnp.clip(jnp.floor(position), 0, b - 1).astype(jnp.int32)
    above = jnp.minimum(below + 1, b - 1)
    fraction = position - below.astype(position.dtype)
    lo = jnp.take_along_axis(ordered, below, axis=0)
    hi = jnp.take_along_axis(ordered, above, axis=0)
    value = lo + fraction * (hi - lo)
    return jnp.where(jnp.any(jnp.isnan(replicates), axis=0), jnp.nan, value)


def _tie_tolerance(x):
    """``100 * eps(float32) * |x|``: how far apart two values equal in exact arithmetic may be
    after rounding (as ``scipy.stats.permutation_test``). XLA sums an estimate (weights all 1,
    a constant) in another order than a replicate of the same videos, a few ulps apart."""
    return 100 * jnp.finfo(jnp.float32).eps * jnp.abs(x)


def _bca_levels(estimate, replicates, jackknife, alpha):
    """BCa quantile levels ``[2, ...]`` (Efron 1987), ties counted half in the bias term."""
    b = replicates.shape[0]
    tolerance = _tie_tolerance(estimate)[None]
    tied = jnp.abs(replicates - estimate[None]) <= tolerance
    below = jnp.sum(replicates < estimate[None] - tolerance, axis=0, dtype=jnp.float32)
    z0 = ndtri((below + 0.5 * jnp.sum(tied, axis=0, dtype=jnp.float32)) / b)[None]
    centred = jnp.mean(jackknife, axis=0)[None] - jackknife
    accel = safe_divide(jnp.sum(centred**3, axis=0), 6.0 * jnp.sum(centred**2, axis=0) ** 1.5, 0.0)[
        None
    ]
    # In float64 on the host: in float32, 1 - alpha / 2 rounds to 1 (z = inf, a NaN level)
    # once alpha < 6e-8.
    z_low = NormalDist().inv_cdf(alpha / 2)
    z = jnp.reshape(jnp.array([z_low, -z_low], jnp.float32), (2,) + (1,) * estimate.ndim)
    return ndtr(z0 + (z0 + z) / (1 - accel * (z0 + z)))


def _interval(estimate, replicates, jackknife, confidence, method):
    alpha = 1.0 - confidence
    if method == "percentile":
        levels = jnp.array([alpha / 2, 1 - alpha / 2], jnp.float32)
    else:
        levels = _bca_levels(estimate, replicates, jackknife, alpha)
    lower, upper = _quantiles(replicates, levels)
    return lower, upper


def _leave_one_out(statistics, metric_fn, n):
    """Jackknife values ``[N, ...]``: the metric without video i (weights 1 - e_i)."""
    return jax.vmap(lambda i: metric_fn(statistics, 1 - jax.nn.one_hot(i, n, dtype=jnp.int32)))(
        jnp.arange(n, dtype=jnp.int32)
    )


def _as_float(tree):
    return jax.tree_util.tree_map(lambda x: jnp.asarray(x, jnp.float32), tree)


def _summarise(estimate, replicates, jackknife, confidence, method):
    """``(lower, upper, standard_error)`` pytrees from the estimate and its replicates."""

    def leaf(e, r, j):
        lower, upper = _interval(e, r, j, confidence, method)
        return lower, upper, jnp.std(r - r[:1], axis=0, ddof=1)  # shifted: exact 0 if constant

    jackknife = replicates if jackknife is None else jackknife
    leaves, treedef = jax.tree_util.tree_flatten(estimate)
    rows = [
        leaf(e, r, j)
        for e, r, j in zip(
            leaves,
            jax.tree_util.tree_leaves(replicates),
            jax.tree_util.tree_leaves(jackknife),
            strict=True,
        )
    ]
    return tuple(treedef.unflatten([row[i] for row in rows]) for i in range(3))


def _check_common(confidence, method, num_samples):
    confidence = _check_confidence(confidence)
    method = checks.static_choice("method", method, METHODS)
    num_samples = checks.static_int("num_samples", num_samples, minimum=2)
    return confidence, method, num_samples


def _resampled(statistics, metric_fn, *, key, num_samples, method, strata, batch_size):
    """``(estimate, replicates, jackknife or None)`` as float32 pytrees."""
    n = _num_videos("statistics", statistics)
    estimate = _as_float(metric_fn(statistics, jnp.ones(n, jnp.int32)))
    replicates = _as_float(
        bootstrap_replicates(
            statistics,
            metric_fn,
            key=key,
            num_samples=num_samples,
            strata=strata,
            batch_size=batch_size,
        )
    )
    jackknife = _as_float(_leave_one_out(statistics, metric_fn, n)) if method == "bca" else None
    return estimate, replicates, jackknife


@renamed_arguments(stats="statistics")
@one_program
def bootstrap(
    statistics,
    metric_fn: MetricFn,
    *,
    key,
    num_samples: int = 10_000,
    confidence: float = 0.95,
    method: str = "percentile",
    strata=None,
    batch_size: int = 1000,
) -> BootstrapResult:
    """Bootstrap confidence interval of a dataset-level metric, resampling videos.

    Replicates ``theta*_b = metric_fn(statistics, w_b)`` use multinomial multiplicities ``w_b``
    (:func:`bootstrap_replicates`). With ``alpha = 1 - confidence``:

    * ``"percentile"``: ``[q(alpha/2), q(1 - alpha/2)]``, ``q`` the linear-interpolation
      quantile of the replicates (numpy's default).
    * ``"bca"``: bias-corrected and accelerated, ``q(Phi(z0 + (z0 + z) / (1 - a (z0 + z))))``
      for ``z = Phi^-1(alpha/2), Phi^-1(1 - alpha/2)``, with ``z0 = Phi^-1((#{theta* <
      theta} + #{theta* = theta} / 2) / B)`` (equal: within ``100 eps(float32) |theta|``, as
      rounding alone puts equal values apart) and the acceleration ``a`` from the
      leave-one-video-out jackknife, ``a = sum(d^3) / (6 sum(d^2)^1.5)``,
      ``d = mean(theta_(.)) - theta_(i)`` (0 when all ``d`` are 0).

    Any NaN among the replicates (e.g. a capacity overflow, or a resample without frames), or
    for ``"bca"`` among the jackknife values, makes that output's interval NaN. Wrap in
    ``jax.jit`` with ``metric_fn`` and the keyword arguments except ``key`` and ``strata``
    static.

    Args:
      statistics: pytree of per-video statistics, leaves ``[N, ...]``.
      metric_fn: static ``metric_fn(statistics, weights) -> pytree`` of float arrays, e.g.
        :func:`segmentation_metrics`.
      key: a PRNG key; the same key gives the same result.
      num_samples: static number of replicates B >= 2 (default 10,000).
      confidence: static coverage level in (0, 1) (default 0.95).
      method: static, ``"percentile"`` (default) or ``"bca"``.
      strata: optional integer ``[N]`` group ids: resample within each group (split, dataset).
      batch_size: static number of replicates computed at once (default 1000).

    Returns:
      :class:`BootstrapResult` ``(estimate, lower, upper, standard_error)``, each float32 and
      shaped like ``metric_fn``'s output.

    >>> statistics = jnp.array([0.2, 0.4, 0.6, 0.8])
    >>> mean = lambda x, w: weighted_sum(x, w) / weighted_sum(jnp.ones_like(x), w)
    >>> r = bootstrap(statistics, mean, key=jax.random.key(0), num_samples=1000)
    >>> bool(r.lower < r.estimate < r.upper), round(float(r.estimate), 6)
    (True, 0.5)

    References:
      Efron & Tibshirani, An Introduction to the Bootstrap, 1993 (ch. 13-14);
      Efron, Better bootstrap confidence intervals, JASA 1987.
    """
    confidence, method, num_samples = _check_common(confidence, method, num_samples)
    estimate, replicates, jackknife = _resampled(
        statistics,
        metric_fn,
        key=key,
        num_samples=num_samples,
        method=method,
        strata=strata,
        batch_size=batch_size,
    )
    return BootstrapResult(
        estimate, *_summarise(estimate, replicates, jackknife, confidence, method)
    )


def _pair_num_videos(statistics_a, statistics_b) -> int:
    n = _num_videos("statistics_a", statistics_a)
    _num_videos("statistics_b", statistics_b)
    shapes_a, shapes_b = (
        jax.tree_util.tree_map(jnp.shape, s) for s in (statistics_a, statistics_b)
    )
    structure_a, structure_b = (
        jax.tree_util.tree_structure(s) for s in (statistics_a, statistics_b)
    )
    same_structure = structure_a == structure_b
    if not same_structure or shapes_a != shapes_b:
        raise ValueError(
            "statistics_a and statistics_b must be statistics of the same videos with the same "
            f"structure and shapes, got {shapes_a} and {shapes_b}."
        )
    return n


def _subtract(x, y):
    return jax.tree_util.tree_map(
        lambda u, v: jnp.asarray(u, jnp.float32) - jnp.asarray(v, jnp.float32), x, y
    )


def _paired_difference(metric_fn: MetricFn) -> MetricFn:
    """``(pair, weights) -> metric(a, weights) - metric(b, weights)`` for ``pair = (a, b)``."""
    return lambda pair, weights: _subtract(metric_fn(pair[0], weights), metric_fn(pair[1], weights))


def _p_value(observed, null, alternative):
    """``(1 + #{null at least as extreme as observed}) / (B + 1)``; NaN if anything is NaN.

    "At least as extreme" allows a relative tolerance of ``100 * eps(float32) * |observed|``
    (as ``scipy.stats.permutation_test``), so that values equal in exact arithmetic but
    rounded differently count as ties.
    """
    observed = observed[None]
    tolerance = _tie_tolerance(observed)
    if alternative == "two-sided":
        extreme = jnp.abs(null) >= jnp.abs(observed) - tolerance
    elif alternative == "greater":
        extreme = null >= observed - tolerance
    else:
        extreme = null <= observed + tolerance
    b = null.shape[0]
    p = divide(1.0 + jnp.sum(extreme, axis=0, dtype=jnp.float32), jnp.float32(b + 1.0))
    undefined = jnp.isnan(observed[0]) | jnp.any(jnp.isnan(null), axis=0)
    return jnp.where(undefined, jnp.nan, p)


@renamed_arguments(stats_a="statistics_a", stats_b="statistics_b")
@one_program
def paired_bootstrap_test(
    statistics_a,
    statistics_b,
    metric_fn: MetricFn,
    *,
    key,
    num_samples: int = 10_000,
    confidence: float = 0.95,
    method: str = "percentile",
    alternative: str = "two-sided",
    strata=None,
    batch_size: int = 1000,
) -> PairedTestResult:
    """Paired bootstrap of ``metric(a) - metric(b)`` for two models on the same videos.

    Each replicate resamples videos once and evaluates both models on that resample, so the
    per-video pairing is kept. The interval is the bootstrap interval of the difference
    (``method`` as in :func:`bootstrap`). The p-value shifts the replicates to the null
    (Efron & Tibshirani 1993, §16.4): with ``delta`` the observed difference and ``d*_b`` the
    replicates, ``p = (1 + #{extreme}) / (B + 1)`` where "extreme" is
    ``|d*_b - delta| >= |delta|`` (``"two-sided"``, default), ``d*_b - delta >= delta``
    (``"greater"``: alternative ``metric(a) > metric(b)``) or ``d*_b - delta <= delta``
    (``"less"``).

    Args:
      statistics_a: per-video statistics of model A, leaves ``[N, ...]``.
      statistics_b: per-video statistics of model B on the same N videos, same shapes.
      metric_fn, key, num_samples, confidence, method, strata, batch_size: as in
        :func:`bootstrap`.
      alternative: static, ``"two-sided"`` (default), ``"greater"`` or ``"less"``.

    Returns:
      :class:`PairedTestResult` ``(difference, lower, upper, p_value)``, each float32 and shaped
      like ``metric_fn``'s output; p-values in ``[1 / (B + 1), 1]``, NaN where the metric is.

    >>> a = jnp.array([0.9, 0.8, 0.95, 0.85, 0.9, 0.8])
    >>> mean = lambda x, w: weighted_sum(x, w) / weighted_sum(jnp.ones_like(x), w)
    >>> r = paired_bootstrap_test(a, a - 0.1, mean, key=jax.random.key(0), num_samples=999)
    >>> round(float(r.difference), 4), round(float(r.p_value), 4)
    (0.1, 0.001)

    References:
      Efron & Tibshirani, An Introduction to the Bootstrap, 1993 (§16.4);
      Koehn, Statistical significance tests for machine translation evaluation, EMNLP 2004.
    """
    confidence, method, num_samples = _check_common(confidence, method, num_samples)
    alternative = checks.static_choice("alternative", alternative, ALTERNATIVES)
    _pair_num_videos(statistics_a, statistics_b)
    difference, replicates, jackknife = _resampled(
        (statistics_a, statistics_b),
        _paired_difference(metric_fn),
        key=key,
        num_samples=num_samples,
        method=method,
        strata=strata,
        batch_size=batch_size,
    )
    lower, upper, _ = _summarise(difference, replicates, jackknife, confidence, method)
    p_value = jax.tree_util.tree_map(
        lambda d, r: _p_value(d, r - d[None], alternative), difference, replicates
    )
    return PairedTestResult(difference, lower, upper, p_value)


@renamed_arguments(stats_a="statistics_a", stats_b="statistics_b")
@one_program
def permutation_test(
    statistics_a,
    statistics_b,
    metric_fn: MetricFn,
    *,
    key,
    num_samples: int = 10_000,
    alternative: str = "two-sided",
    batch_size: int = 1000,
) -> PermutationTestResult:
    """Paired (sign-flip) permutation test of ``metric(a) = metric(b)`` on the same videos.

    Under the null the two models' outputs are exchangeable on every video, so each
    permutation swaps the models on each video independently with probability 1/2. The
    swapped datasets are weighted sums too: with both models' statistics stacked (``2N``
    videos) and swap flags ``s``, model A is ``weights = [1 - s, s]`` and model B
    ``[s, 1 - s]``. With ``delta`` the observed difference and ``d_b`` the permuted ones,
    ``p = (1 + #{extreme}) / (B + 1)`` (Monte-Carlo p-value, valid at every B) where
    "extreme" is ``|d_b| >= |delta|`` (``"two-sided"``, default), ``d_b >= delta``
    (``"greater"``: alternative ``metric(a) > metric(b)``) or ``d_b <= delta`` (``"less"``).
    For an interval of the difference use :func:`paired_bootstrap_test`.

    Args:
      statistics_a, statistics_b, metric_fn, key, alternative: as in
        :func:`paired_bootstrap_test`.
      num_samples: static number of random permutations B >= 1 (default 10,000).
      batch_size: static number of permutations computed at once (default 1000).

    Returns:
      :class:`PermutationTestResult` ``(difference, p_value)``, float32 pytrees shaped like
      ``metric_fn``'s output; p-values in ``[1 / (B + 1), 1]``, NaN where the metric is.

    >>> a = jnp.array([0.9, 0.8, 0.95, 0.85, 0.9, 0.8])
    >>> mean = lambda x, w: weighted_sum(x, w) / weighted_sum(jnp.ones_like(x), w)
    >>> r = permutation_test(a, a - 0.1, mean, key=jax.random.key(0), num_samples=999)
    >>> 0.01 < float(r.p_value) < 0.05  # 2 of the 2^6 sign patterns are as extreme
    True

    References:
      Good, Permutation, Parametric, and Bootstrap Tests of Hypotheses, 2005;
      Dror et al., The hitchhiker's guide to testing statistical significance in NLP, ACL 2018.
    """
    key = _check_key(key)
    alternative = checks.static_choice("alternative", alternative, ALTERNATIVES)
    num_samples = checks.static_int("num_samples", num_samples, minimum=1)
    batch_size = checks.static_int("batch_size", batch_size, minimum=1)
    n = _pair_num_videos(statistics_a, statistics_b)
    both = jax.tree_util.tree_map(lambda x, y: jnp.concatenate([x, y]), statistics_a, statistics_b)

    def permuted(swap):
        keep = 1 - swap
        return _subtract(
            metric_fn(both, jnp.concatenate([keep, swap])),
            metric_fn(both, jnp.concatenate([swap, keep])),
        )

    observed = permuted(jnp.zeros(n, jnp.int32))
    # A float32 probability: with a Python 0.5 the draw compares float64 uniforms under
    # jax_enable_x64, and the same key gave other swaps.
    half = jnp.float32(0.5)
    flips = jax.lax.map(
        lambda k: permuted(jax.random.bernoulli(k, half, (n,)).astype(jnp.int32)),
        jax.random.split(key, num_samples),
        batch_size=min(batch_size, num_samples),
    )
    p_value = jax.tree_util.tree_map(lambda d, r: _p_value(d, r, alternative), observed, flips)
    return PermutationTestResult(observed, p_value)
