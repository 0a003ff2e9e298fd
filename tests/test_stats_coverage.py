"""Calibration of jaxseg.stats on simulated datasets whose sampling distribution is known.

Each test simulates many datasets at once and runs the bootstrap or the tests under ``vmap``
over datasets, so one compilation covers all of them. Tolerances are binomial: a coverage
or rejection rate estimated from R datasets has standard error ``sqrt(q (1 - q) / R)``.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxseg import stats

DATASETS, VIDEOS, SAMPLES = 400, 150, 600
TRUTH = 0.7  # expected frame accuracy and expected edit score of every simulated video


def _simulate(seed, *, video_effects, datasets=DATASETS, videos=VIDEOS, shift=0.0):
    """``SegmentationStatistics`` ``[R, N]`` of R datasets with known expectations.

    Frames: ``T_i ~ U{20..199}``; correct ~ Binomial(T_i, p_i) with ``p_i = 0.7`` (i.i.d.
    Bernoulli frames) or ``p_i ~ Beta(7, 3)`` (a per-video effect, mean 0.7); the dataset
    accuracy ``sum c / sum T`` then has expectation 0.7 given the lengths. Edit: ``Y_i ~
    U{1..10}`` segments on both sides, ``D_i ~ Binomial(Y_i, 0.3)``, so ``E[1 - D/Y] = 0.7``.
    ``shift`` lowers every p_i (and the edit error rate rises by it): a real difference.
    """
    rng = np.random.default_rng(seed)
    shape = (datasets, videos)
    frames = rng.integers(20, 200, shape)
    p = rng.beta(7, 3, shape) if video_effects else np.full(shape, TRUTH)
    correct = rng.binomial(frames, np.clip(p - shift, 0, 1))
    segments = rng.integers(1, 11, shape)
    distance = rng.binomial(segments, 1 - TRUTH + shift)
    zeros = np.zeros((*shape, 1), np.int32)
    return stats.SegmentationStatistics(
        *(jnp.asarray(x, jnp.int32) for x in (frames, correct, distance, segments, segments)),
        tp=zeros,
        fp=zeros,
        fn=zeros,
        overflow=jnp.zeros(shape, bool),
    ), p


@functools.partial(jax.jit, static_argnames=("method",))
def _intervals(batch, keys, method):
    return jax.vmap(
        lambda s, k: stats.bootstrap(
            s,
            stats.segmentation_metrics,
            key=k,
            num_samples=SAMPLES,
            method=method,
            batch_size=SAMPLES,
        )
    )(batch, keys)


@pytest.mark.parametrize("video_effects", [False, True])
@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_intervals_cover_the_truth_at_the_nominal_rate(video_effects, method):
    batch, _ = _simulate(int(video_effects), video_effects=video_effects)
    r = _intervals(batch, jax.random.split(jax.random.key(0), DATASETS), method)
    # Three binomial standard errors (0.033), and below 0.95 also the textbook intervals' own
    # finite-sample undercoverage: an independent numpy percentile bootstrap on 2000 i.i.d.
    # datasets of this design (N = 150) covers 0.9395 (accuracy) and 0.9375 (edit), so 2 points
    # are allowed. Measured here: 0.91-0.94 over the four cases.
    tolerance = 3 * np.sqrt(0.95 * 0.05 / DATASETS)
    for name in ("accuracy", "edit"):
        lower, upper = np.asarray(r.lower[name]), np.asarray(r.upper[name])
        coverage = np.mean((lower <= TRUTH) & (TRUTH <= upper))
        assert 0.95 - 0.02 - tolerance < coverage < 0.95 + tolerance, (name, coverage)


def test_standard_error_matches_the_binomial_law():
    # i.i.d. Bernoulli(p) frames: Var(sum c / sum T | T) = p (1 - p) / sum T exactly.
    batch, _ = _simulate(2, video_effects=False)
    r = _intervals(batch, jax.random.split(jax.random.key(1), DATASETS), "percentile")
    total = np.asarray(batch.frames).sum(axis=1)
    exact = np.sqrt(TRUTH * (1 - TRUTH) / total)
    ratio = np.asarray(r.standard_error["accuracy"]) / exact
    # The video bootstrap estimates the same variance (up to its (N-1)/N bias and noise).
    assert abs(np.mean(ratio) - 1) < 0.05
    # Across datasets the estimates scatter as the law says.
    estimates = np.asarray(r.estimate["accuracy"])
    assert abs(np.std(estimates - TRUTH) / np.mean(exact) - 1) < 0.15


@jax.jit
def _paired(batch_a, batch_b, keys):
    def one(a, b, key):
        k1, k2 = jax.random.split(key)
        boot = stats.paired_bootstrap_test(
            a, b, stats.segmentation_metrics, key=k1, num_samples=500, batch_size=500
        )
        perm = stats.permutation_test(
            a, b, stats.segmentation_metrics, key=k2, num_samples=500, batch_size=500
        )
        return boot.p_value, perm.p_value

    return jax.vmap(one)(batch_a, batch_b, keys)


def _two_models(seed, shift, datasets):
    """Two models on 50 videos: per-video effects shared, outcomes independent."""
    a, p = _simulate(seed, video_effects=True, datasets=datasets, videos=50)
    rng = np.random.default_rng(seed + 100)
    correct_b = rng.binomial(np.asarray(a.frames), np.clip(p - shift, 0, 1))
    distance_b = rng.binomial(np.asarray(a.target_segments), 1 - TRUTH + shift)
    b = a._replace(
        correct=jnp.asarray(correct_b, jnp.int32), edit_distance=jnp.asarray(distance_b, jnp.int32)
    )
    return a, b


PAIRED_DATASETS = 200


def test_p_values_are_uniform_under_the_null():
    datasets = PAIRED_DATASETS
    a, b = _two_models(3, 0.0, datasets)
    boot, perm = _paired(a, b, jax.random.split(jax.random.key(2), datasets))
    for p_values in (boot, perm):
        for name in ("accuracy", "edit"):
            p = np.sort(np.asarray(p_values[name]))
            # Kolmogorov-Smirnov distance to U(0, 1); 1.95 / sqrt(R) is its 0.1% critical value.
            grid = np.arange(1, datasets + 1) / datasets
            assert np.max(np.abs(p - grid)) < 1.95 / np.sqrt(datasets), name
            rejected = np.mean(p <= 0.05)
            assert rejected < 0.05 + 3 * np.sqrt(0.05 * 0.95 / datasets), (name, rejected)


def test_p_values_are_small_under_a_real_difference():
    datasets = PAIRED_DATASETS
    a, b = _two_models(4, 0.2, datasets)
    boot, perm = _paired(a, b, jax.random.split(jax.random.key(3), datasets))
    for p_values in (boot, perm):
        for name in ("accuracy", "edit"):
            assert np.mean(np.asarray(p_values[name]) < 0.05) > 0.9, name
