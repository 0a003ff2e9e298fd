"""jaxseg.stats: weighted-sum metrics, resampling, bootstrap intervals, paired tests, errors.

The statistical calibration (coverage, p-value uniformity) is in test_stats_coverage.py.
"""

from __future__ import annotations

import _reference as ref
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _jaxprs import compilations, float_products

from jaxseg import stats
from jaxseg._src.stats import _bca_levels, _p_value
from jaxseg._src.stats_segmentation import _fraction_words, _words_to_float

N, T, C = 20, 32, 5
S = 64  # bootstrap replicates in most tests (one shape: few compilations)
OVERLAPS = (0.1, 0.25, 0.5)
BACKGROUND = (0,)
STRATA = np.repeat(np.arange(3), [7, 8, 5]).astype(np.int32)

# Jitted once per static configuration, as a caller would.
BOOT = jax.jit(
    stats.bootstrap,
    static_argnums=1,
    static_argnames=("num_samples", "confidence", "method", "batch_size"),
)
REPS = jax.jit(
    stats.bootstrap_replicates, static_argnums=1, static_argnames=("num_samples", "batch_size")
)
PAIRED = jax.jit(
    stats.paired_bootstrap_test,
    static_argnums=2,
    static_argnames=("num_samples", "confidence", "method", "alternative", "batch_size"),
)
PERM = jax.jit(
    stats.permutation_test,
    static_argnums=2,
    static_argnames=("num_samples", "alternative", "batch_size"),
)
METRICS = jax.jit(stats.segmentation_metrics)


def _videos(seed, n=N, flip=0.15):
    """Padded labels ``[n, T]`` and mask: piecewise-constant targets, noisy predictions.

    Video 0 has no valid frame (it must be left out of the edit mean).
    """
    rng = np.random.default_rng(seed)
    targets = np.zeros((n, T), np.int32)
    for i in range(n):
        t = 0
        while t < T:
            length = int(rng.integers(1, 16))
            targets[i, t : t + length] = rng.integers(C)
            t += length
    noise = rng.random((n, T)) < flip
    predictions = np.where(noise, rng.integers(0, C, (n, T)), targets).astype(np.int32)
    lengths = rng.integers(1, T + 1, n)
    lengths[0] = 0
    mask = np.arange(T)[None, :] < lengths[:, None]
    return targets, predictions, mask


def _oracle_stats(targets, predictions, mask):
    """Per-video (frames, correct, edit score, tp, fp, fn) from the numpy oracle."""
    rows = []
    for y, p, m in zip(targets, predictions, mask, strict=True):
        tp, fp, fn = ref.segmental_counts(y, p, OVERLAPS, m, BACKGROUND)
        rows.append(
            (
                int(m.sum()),
                int(((y == p) & m).sum()),
                ref.edit_score(y, p, m, BACKGROUND),
                tp,
                fp,
                fn,
            )
        )
    return [np.array(x) for x in zip(*rows, strict=True)]


def _statistics(targets, predictions, mask):
    """``SegmentationStatistics`` built from the oracle (as segmentation_statistics returns)."""
    frames, correct, _, tp, fp, fn = _oracle_stats(targets, predictions, mask)

    def count(labels):
        return [len(ref.segments(x, m, BACKGROUND)) for x, m in zip(labels, mask, strict=True)]

    distance = [
        ref.edit_distance(y, p, m, BACKGROUND)
        for y, p, m in zip(targets, predictions, mask, strict=True)
    ]
    return stats.SegmentationStatistics(
        *(
            jnp.asarray(x, jnp.int32)
            for x in (frames, correct, distance, count(targets), count(predictions), tp, fp, fn)
        ),
        overflow=jnp.zeros(len(frames), bool),
    )


def _oracle_dataset(per_video):
    frames, correct, edit, tp, fp, fn = per_video
    return ref.dataset_scores(frames, correct, edit, tp, fp, fn)


@pytest.fixture(scope="module")
def data():
    targets, predictions, mask = _videos(0)
    return _statistics(targets, predictions, mask), _oracle_stats(targets, predictions, mask)


@pytest.fixture(scope="module")
def model_b():
    targets, predictions, mask = _videos(0)
    rng = np.random.default_rng(1)
    worse = np.where(
        rng.random(predictions.shape) < 0.2, rng.integers(0, C, predictions.shape), predictions
    ).astype(np.int32)
    return _statistics(targets, worse, mask)


def _take(tree, index):
    return jax.tree_util.tree_map(lambda x: np.asarray(x)[index], tree)


def _assert_metrics_close(ours, theirs):
    np.testing.assert_allclose(float(ours["accuracy"]), theirs["accuracy"], rtol=1e-6)
    np.testing.assert_allclose(float(ours["edit"]), theirs["edit"], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ours["f1"]), theirs["f1"], rtol=1e-6, atol=1e-7)


# ------------------------------------------------------------------------------------------
# Weighted-sum metrics
# ------------------------------------------------------------------------------------------
def test_segmentation_metrics_equals_oracle_dataset_scores(data):
    s, per_video = data
    _assert_metrics_close(METRICS(s), _oracle_dataset(per_video))
    frames, _, _, tp, fp, _ = per_video
    tp, fp = tp.sum(0), fp.sum(0)
    np.testing.assert_allclose(
        np.asarray(METRICS(s)["precision"]), tp / np.maximum(tp + fp, 1), rtol=1e-6
    )
    assert frames[0] == 0  # the empty video is in the data and left out of the edit mean


def test_weights_are_multiplicities(data):
    s, per_video = data
    weights = np.random.default_rng(2).integers(0, 4, N).astype(np.int32)
    repeated = np.repeat(np.arange(N), weights)
    ours = METRICS(s, jnp.asarray(weights))
    _assert_metrics_close(ours, _oracle_dataset(_take(per_video, repeated)))


def test_float_products_run_at_full_precision(data):
    # At the default precision XLA:GPU may round float32 operands to TF32 (11 bits).
    s, _ = data
    weights = jnp.ones(N, jnp.int32)
    highest = (jax.lax.Precision.HIGHEST, jax.lax.Precision.HIGHEST)
    values = jnp.ones((N, 3), jnp.float32)
    for fn, args in ((stats.weighted_sum, (values, weights)), (METRICS, (s, weights))):
        products = float_products(jax.make_jaxpr(fn)(*args))
        assert products and all(p == highest for p in products), (fn, products)


def test_fraction_words_are_exact():
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.random(1000), [0.0, 1.0, 2.0**-16, 1 - 2.0**-24]]).astype(np.float32)
    x = x[(x == 0) | (x >= 2.0**-16)]
    words = np.asarray(_fraction_words(jnp.asarray(x))).astype(np.float64)
    assert words.min() >= 0 and words.max() <= 2**13
    np.testing.assert_array_equal(words @ 2.0 ** (-13 * np.arange(1, 4)), x.astype(np.float64))
    np.testing.assert_array_equal(np.asarray(_words_to_float(_fraction_words(jnp.asarray(x)))), x)


# ------------------------------------------------------------------------------------------
# Resampling
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("strata", [None, STRATA])
def test_weighted_path_equals_explicit_resampling(data, strata):
    s, per_video = data
    key = jax.random.key(7)
    reps = REPS(s, stats.segmentation_metrics, key=key, num_samples=S, strata=strata, batch_size=5)
    indices = np.asarray(stats.resample_indices(key, num_videos=N, num_samples=S, strata=strata))
    for b, index in enumerate(indices[:12]):
        explicit = METRICS(_take(s, index))  # the materialised list
        for name in ("accuracy", "edit", "precision", "recall", "f1"):
            np.testing.assert_array_equal(np.asarray(reps[name][b]), np.asarray(explicit[name]))
        _assert_metrics_close(
            {k: v[b] for k, v in reps.items()}, _oracle_dataset(_take(per_video, index))
        )


def test_resample_indices_are_multinomial_within_strata():
    b = 4000
    idx = np.asarray(
        stats.resample_indices(jax.random.key(1), num_videos=N, num_samples=b, strata=STRATA)
    )
    assert idx.shape == (b, N) and idx.dtype == np.int32
    for row in idx[:50]:
        np.testing.assert_array_equal(np.sort(STRATA[row]), STRATA)  # n_s draws per stratum
    counts = np.bincount(idx.ravel(), minlength=N)  # each video expected b times
    chi2 = np.sum((counts - b) ** 2 / b)
    assert chi2 < 60  # chi-square with 19 dof: P(> 60) < 1e-5
    plain = np.asarray(stats.resample_indices(jax.random.key(1), num_videos=N, num_samples=b))
    weights = np.apply_along_axis(np.bincount, 1, plain, minlength=N)
    # Multinomial(N, 1/N): each multiplicity has mean 1 and variance 1 - 1/N.
    assert abs(weights.mean() - 1) < 0.01 and abs(weights.var() - (1 - 1 / N)) < 0.03


def test_same_key_same_result_independent_of_batch_size(data):
    s, _ = data

    def run(key, **kw):
        return BOOT(s, stats.segmentation_metrics, key=key, num_samples=S, **kw)

    first = run(jax.random.key(3))
    again = run(jax.random.key(3))
    chunked = run(jax.random.key(3), batch_size=7)
    other = run(jax.random.key(4))
    for tree in (again, chunked):
        jax.tree_util.tree_map(np.testing.assert_array_equal, first, tree)
    assert float(first.standard_error["accuracy"]) != float(other.standard_error["accuracy"])


# ------------------------------------------------------------------------------------------
# Intervals
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_constant_statistic_has_zero_width(data, method):
    s, _ = data
    same = _take(s, np.full(N, 3))  # every video identical: every resample is the same
    r = BOOT(same, stats.segmentation_metrics, key=jax.random.key(0), num_samples=S, method=method)
    for name in ("accuracy", "edit", "f1"):
        np.testing.assert_array_equal(np.asarray(r.lower[name]), np.asarray(r.estimate[name]))
        np.testing.assert_array_equal(np.asarray(r.upper[name]), np.asarray(r.estimate[name]))
        np.testing.assert_array_equal(np.asarray(r.standard_error[name]), 0.0)


def test_percentile_interval_is_numpy_quantile_of_replicates(data):
    s, _ = data
    key = jax.random.key(5)
    reps = REPS(s, stats.segmentation_metrics, key=key, num_samples=S)
    r = BOOT(s, stats.segmentation_metrics, key=key, num_samples=S)
    acc = np.asarray(reps["accuracy"], np.float64)
    np.testing.assert_allclose(float(r.lower["accuracy"]), np.quantile(acc, 0.025), rtol=1e-6)
    np.testing.assert_allclose(float(r.upper["accuracy"]), np.quantile(acc, 0.975), rtol=1e-6)
    np.testing.assert_allclose(float(r.standard_error["accuracy"]), acc.std(ddof=1), rtol=1e-4)
    f1 = np.asarray(reps["f1"], np.float64)
    np.testing.assert_allclose(np.asarray(r.upper["f1"]), np.quantile(f1, 0.975, axis=0), rtol=1e-6)


def test_bca_agrees_with_scipy_on_a_skewed_mean():
    scipy_stats = pytest.importorskip("scipy.stats")
    x = np.random.default_rng(0).exponential(size=30).astype(np.float32)
    mean = lambda v, w: stats.weighted_sum(v, w) / stats.weighted_sum(jnp.ones_like(v), w)  # noqa: E731
    run = jax.jit(stats.bootstrap, static_argnums=1, static_argnames=("num_samples", "method"))
    ours = run(jnp.asarray(x), mean, key=jax.random.key(0), num_samples=20_000, method="bca")
    percentile = scipy_stats.bootstrap(
        (x.astype(np.float64),),
        np.mean,
        n_resamples=20_000,
        method="percentile",
        rng=np.random.default_rng(1),
    )
    theirs = scipy_stats.bootstrap(
        (x.astype(np.float64),),
        np.mean,
        n_resamples=20_000,
        method="BCa",
        rng=np.random.default_rng(0),
    )
    width = theirs.confidence_interval.high - theirs.confidence_interval.low
    # Two independent Monte-Carlo runs: the endpoints agree to a few percent of the width.
    assert abs(float(ours.lower) - theirs.confidence_interval.low) < 0.05 * width
    assert abs(float(ours.upper) - theirs.confidence_interval.high) < 0.05 * width
    # BCa shifts the interval right of the percentile one for a right-skewed mean.
    assert float(ours.upper) > percentile.confidence_interval.high + 0.05 * width


def _numpy_bca(x, indices, confidence):
    """Efron's BCa interval of the mean, in float64, from the given resampled indices."""
    scipy_special = pytest.importorskip("scipy.special")
    x = x.astype(np.float64)
    replicates, estimate = x[indices].mean(axis=1), x.mean()
    b = len(replicates)
    below = (replicates < estimate).sum() + (replicates <= estimate).sum()  # ties count half
    z0 = scipy_special.ndtri(below / (2 * b))
    jackknife = (x.sum() - x) / (len(x) - 1)
    d = jackknife.mean() - jackknife
    accel = (d**3).sum() / (6 * ((d**2).sum()) ** 1.5)
    alpha = 1 - confidence
    z = scipy_special.ndtri([alpha / 2, 1 - alpha / 2])
    levels = scipy_special.ndtr(z0 + (z0 + z) / (1 - accel * (z0 + z)))
    return np.quantile(replicates, levels)


@pytest.mark.parametrize(
    ("videos", "confidence"),
    [
        (3, 0.95),  # a fifth of the resamples are the original videos: ties with the estimate
        (3, 0.5),
        (30, 0.95),
        (30, 1 - 1e-9),  # 1 - alpha / 2 is 1 in float32
    ],
)
def test_bca_equals_numpy_on_the_same_resamples(videos, confidence):
    x = np.random.default_rng(0).exponential(size=videos).astype(np.float32)
    key, b = jax.random.key(1), 200
    indices = np.asarray(stats.resample_indices(key, num_videos=videos, num_samples=b))
    r = stats.bootstrap(
        jnp.asarray(x), _mean, key=key, num_samples=b, confidence=confidence, method="bca"
    )
    np.testing.assert_allclose(
        [float(r.lower), float(r.upper)], _numpy_bca(x, indices, confidence), rtol=1e-5
    )


def test_bca_counts_replicates_an_ulp_from_the_estimate_as_ties():
    # Replicates equal to the estimate in exact arithmetic, rounded an ulp apart: half below.
    estimate = jnp.float32(0.573111891746521)
    tied = jnp.nextafter(estimate, jnp.float32(0.0))
    replicates = jnp.array([0.1, 0.2, tied, tied, tied, tied, 0.9, 1.0], jnp.float32)
    jackknife = jnp.array([0.5, 0.6], jnp.float32)  # symmetric: no acceleration
    levels = _bca_levels(estimate, replicates, jackknife, 0.05)
    np.testing.assert_allclose(np.asarray(levels), [0.025, 0.975], rtol=1e-5)  # z0 = 0


def test_overflow_makes_segmental_intervals_nan(data):
    s, _ = data
    broken = s._replace(overflow=jnp.asarray(s.overflow).at[5].set(True))
    r = BOOT(broken, stats.segmentation_metrics, key=jax.random.key(0), num_samples=S)
    assert np.isfinite(float(r.lower["accuracy"]))
    for name in ("edit", "f1", "precision", "recall"):
        assert np.all(np.isnan(np.asarray(r.lower[name])))
        assert np.all(np.isnan(np.asarray(r.estimate[name])))
    t = PAIRED(broken, s, stats.segmentation_metrics, key=jax.random.key(0), num_samples=S)
    assert np.isnan(float(t.p_value["edit"])) and np.isfinite(float(t.p_value["accuracy"]))


def test_int32_overflow_of_weighted_totals_is_nan_not_wrapped(data):
    s, _ = data
    huge = s._replace(frames=jnp.full(N, 2**27, jnp.int32), correct=jnp.full(N, 2**26, jnp.int32))
    m = METRICS(huge)  # 20 * 2^27 frames > 2^31
    assert np.isnan(float(m["accuracy"])) and np.all(np.isnan(np.asarray(m["f1"])))
    fits = METRICS(huge, jnp.zeros(N, jnp.int32).at[:15].set(1))
    assert float(fits["accuracy"]) == 0.5  # 15 * 2^27 < 2^31: exact


# ------------------------------------------------------------------------------------------
# Paired tests
# ------------------------------------------------------------------------------------------
def test_paired_bootstrap_difference_and_sidedness(data, model_b):
    s, _ = data
    key = jax.random.key(0)

    def run(a, b, **kw):
        return PAIRED(a, b, stats.segmentation_metrics, key=key, num_samples=S, **kw)

    two, greater = run(s, model_b), run(s, model_b, alternative="greater")
    reverse = run(model_b, s, alternative="greater")
    a_value = float(METRICS(s)["accuracy"])
    b_value = float(METRICS(model_b)["accuracy"])
    np.testing.assert_allclose(float(two.difference["accuracy"]), a_value - b_value, rtol=1e-6)
    assert a_value > b_value  # model B has 20% more noise
    assert float(two.lower["accuracy"]) > 0
    assert float(greater.p_value["accuracy"]) < 0.05 < 0.5 < float(reverse.p_value["accuracy"])
    assert float(two.p_value["accuracy"]) < 0.05
    # The interval of the difference comes from the same replicates, pairing the videos.
    reps_a = REPS(s, stats.segmentation_metrics, key=key, num_samples=S)
    reps_b = REPS(model_b, stats.segmentation_metrics, key=key, num_samples=S)
    diff = np.asarray(reps_a["accuracy"]) - np.asarray(reps_b["accuracy"])
    np.testing.assert_allclose(float(two.upper["accuracy"]), np.quantile(diff, 0.975), rtol=1e-5)


def test_p_value_counts_extreme_replicates_per_alternative():
    observed = jnp.array([0.5, -0.5])
    null = jnp.array([[0.6, 0.6], [-0.7, -0.7], [0.1, 0.1], [0.5, 0.5]])
    p = lambda alternative: np.asarray(_p_value(observed, null, alternative))  # noqa: E731
    np.testing.assert_allclose(p("two-sided"), [4 / 5, 4 / 5])  # |null| >= 0.5: 3 of 4, +1
    np.testing.assert_allclose(p("greater"), [3 / 5, 4 / 5])
    np.testing.assert_allclose(p("less"), [4 / 5, 2 / 5])
    assert np.isnan(np.asarray(_p_value(observed, null.at[0, 0].set(jnp.nan), "less"))[0])


def test_identical_models_have_zero_difference_and_p_one(data):
    s, _ = data
    t = PAIRED(s, s, stats.segmentation_metrics, key=jax.random.key(0), num_samples=S)
    p = PERM(s, s, stats.segmentation_metrics, key=jax.random.key(0), num_samples=S)
    for tree in (t.difference, t.lower, t.upper, p.difference):
        for leaf in jax.tree_util.tree_leaves(tree):
            np.testing.assert_array_equal(np.asarray(leaf), 0.0)
    for tree in (t.p_value, p.p_value):
        for leaf in jax.tree_util.tree_leaves(tree):
            np.testing.assert_array_equal(np.asarray(leaf), 1.0)


def test_permutation_test_against_exhaustive_enumeration():
    # 8 videos: all 2^8 swap patterns enumerated by hand give the exact permutation p-value.
    rng = np.random.default_rng(4)
    frames = rng.integers(20, 60, 8)
    a = (frames * rng.uniform(0.6, 0.9, 8)).astype(np.int32)
    b = (frames * rng.uniform(0.4, 0.8, 8)).astype(np.int32)

    def accuracy(c, w):
        correct = stats.weighted_sum(c[:, 1], w).astype(jnp.float32)
        return correct / stats.weighted_sum(c[:, 0], w).astype(jnp.float32)

    sa, sb = (jnp.asarray(np.stack([frames, x], -1), jnp.int32) for x in (a, b))
    observed = a.sum() / frames.sum() - b.sum() / frames.sum()
    swaps = (np.arange(256)[:, None] >> np.arange(8)) & 1
    permuted = ((np.where(swaps, b, a) - np.where(swaps, a, b)).sum(1)) / frames.sum()
    exact = np.mean(np.abs(permuted) >= abs(observed) - 1e-12)
    r = PERM(sa, sb, accuracy, key=jax.random.key(0), num_samples=20_000, batch_size=5000)
    np.testing.assert_allclose(float(r.difference), observed, rtol=1e-5)
    assert abs(float(r.p_value) - exact) < 4 * np.sqrt(exact * (1 - exact) / 20_000) + 1e-4


# ------------------------------------------------------------------------------------------
# Per-class statistics
# ------------------------------------------------------------------------------------------
def test_class_metrics_equal_pooled_oracle():
    targets, predictions, mask = _videos(5)
    cs = stats.class_statistics(targets, predictions, num_classes=C + 1, mask=mask)
    pooled = ref.class_accuracy(targets[mask], predictions[mask], C + 1)  # class C never occurs
    m = stats.class_metrics(cs)
    np.testing.assert_allclose(np.asarray(m["class_accuracy"]), pooled, rtol=1e-6)
    assert np.isnan(pooled[C])
    np.testing.assert_allclose(float(m["mean_class_accuracy"]), np.nanmean(pooled), rtol=1e-6)
    index = np.random.default_rng(0).integers(0, N, N)
    resampled = stats.class_metrics(cs, jnp.asarray(np.bincount(index, minlength=N), jnp.int32))
    ref_resampled = ref.class_accuracy(
        targets[index][mask[index]], predictions[index][mask[index]], C + 1
    )
    np.testing.assert_allclose(np.asarray(resampled["class_accuracy"]), ref_resampled, rtol=1e-6)


def test_mean_class_accuracy_is_bit_for_bit_the_streaming_and_batch_value():
    """class_metrics' mean over classes adds them pairwise, as ``streaming.frame_metrics``
    and ``recall(average="macro")`` do: a plain sum was 1 ulp off theirs for about 40% of
    these videos of 37 classes."""
    from jaxseg import metrics, streaming

    classes, frames = 37, 500
    acc = streaming.frame_metrics(num_classes=classes)

    @jax.jit
    def three(y, p):
        ours = stats.class_metrics(stats.class_statistics(y, p, num_classes=classes))
        pooled = acc.compute(acc.update(acc.init(), y, p))
        return ours, pooled, metrics.recall(y, p, num_classes=classes)[0]

    rng = np.random.default_rng(0)
    for _ in range(20):
        y = rng.integers(0, classes, (1, frames))
        p = np.where(rng.random((1, frames)) < 0.5, y, rng.integers(0, classes, (1, frames)))
        ours, pooled, batch = jax.device_get(three(y, p))
        np.testing.assert_array_equal(ours["class_accuracy"], pooled["class_accuracy"])
        assert ours["mean_class_accuracy"] == pooled["mean_class_accuracy"] == batch


def test_class_statistics_leave_labels_outside_the_classes_out():
    """A negative label counts in no class (it once wrapped onto class C - 1 as a negative
    index), on each side on its own: the other label of the frame still counts."""
    cs = stats.class_statistics([[0, -1, 1, 2]], [[0, 1, -1, 1]], num_classes=2)
    assert np.asarray(cs.support).tolist() == [[1, 1]]
    assert np.asarray(cs.predicted).tolist() == [[1, 2]]
    assert np.asarray(cs.correct).tolist() == [[1, 0]]
    expected = ref.class_totals(np.array([0, -1, 1, 2]), np.array([0, 1, -1, 1]), 2)
    np.testing.assert_array_equal(
        np.stack([cs.support[0], cs.predicted[0], cs.correct[0]]), expected
    )


def test_class_statistics_jit_vmap_and_degenerate_rows():
    """One video at a time under ``jax.vmap`` equals the batch, under ``jax.jit`` too; a fully
    masked row and sequences without frames count nothing."""
    targets, predictions, mask = _videos(2)
    mask[1] = False
    batched = stats.class_statistics(targets, predictions, num_classes=C, mask=mask)

    def one(t, p, m):
        return stats.class_statistics(t, p, num_classes=C, mask=m)

    mapped = jax.jit(jax.vmap(one))(targets, predictions, mask)
    for got, want in zip(mapped, batched, strict=True):
        np.testing.assert_array_equal(got, want)
    for row in range(N):
        expected = ref.class_totals(targets[row], predictions[row], C, mask[row])
        np.testing.assert_array_equal(np.stack([x[row] for x in batched]), expected)
    assert not np.asarray(batched.support[1]).any()
    empty = stats.class_statistics(
        np.zeros((2, 0), np.int32), np.zeros((2, 0), np.int32), num_classes=3
    )
    assert all(np.asarray(x).tolist() == [[0, 0, 0]] * 2 for x in empty)


# ------------------------------------------------------------------------------------------
# Host-side helpers (Evaluator / CLI)
# ------------------------------------------------------------------------------------------
def _segmentation_and_class(pair, weights):
    return {**stats.segmentation_metrics(pair[0], weights), **stats.class_metrics(pair[1], weights)}


def test_segmentation_intervals_structure_and_values(data):
    s, _ = data
    targets, predictions, mask = _videos(0)
    cs = stats.class_statistics(targets, predictions, num_classes=C, mask=mask)
    numpy_stats = stats.SegmentationStatistics(*(np.asarray(x) for x in s))
    out = stats.segmentation_intervals(
        numpy_stats, iou_thresholds=OVERLAPS, num_samples=S, seed=3, class_stats=cs
    )
    r = BOOT((s, cs), _segmentation_and_class, key=jax.random.key(3), num_samples=S)
    assert out["accuracy"] == (float(r.lower["accuracy"]), float(r.upper["accuracy"]))
    assert set(out["f1"]) == set(OVERLAPS)
    assert out["f1"][0.25] == (float(r.lower["f1"][1]), float(r.upper["f1"][1]))
    assert out["recall"][0.5][0] <= out["recall"][0.5][1]
    assert out["class_accuracy"].shape == (C, 2)
    assert out["mean_class_accuracy"][0] < out["mean_class_accuracy"][1]
    assert out["edit"][0] < float(r.estimate["edit"]) < out["edit"][1]


def test_segmentation_comparison(data, model_b):
    s, _ = data
    out = stats.segmentation_comparison(s, model_b, iou_thresholds=OVERLAPS, num_samples=S, seed=1)
    acc = out["accuracy"]
    for value, model in ((acc["a"], s), (acc["b"], model_b)):  # float64 from exact totals
        frames, correct = (np.sum(np.asarray(x), dtype=np.int64) for x in (s.frames, model.correct))
        assert value == correct / frames
        assert value == pytest.approx(float(METRICS(model)["accuracy"]), rel=1e-6)
    assert acc["difference"] == acc["a"] - acc["b"]
    assert 0 < acc["lower"] < acc["difference"] < acc["upper"]
    assert acc["p_value"] < 0.05 and acc["permutation_p_value"] < 0.05
    assert set(out["f1"][0.1]) == {
        "a",
        "b",
        "difference",
        "lower",
        "upper",
        "p_value",
        "permutation_p_value",
    }


# ------------------------------------------------------------------------------------------
# Bad arguments
# ------------------------------------------------------------------------------------------
def _mean(x, w):
    return stats.weighted_sum(x, w) / stats.weighted_sum(jnp.ones_like(x), w)


X = jnp.arange(6.0)
KEY = jax.random.key(0)


def test_confidence_may_be_a_numpy_scalar():
    # A static argument under jax.jit, as a numpy integer num_samples is.
    python = BOOT(X, _mean, key=KEY, num_samples=20, confidence=0.9)
    for confidence in (np.float32(0.9), np.float64(0.9)):
        r = BOOT(X, _mean, key=KEY, num_samples=20, confidence=confidence)
        np.testing.assert_allclose([r.lower, r.upper], [python.lower, python.upper], rtol=1e-6)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: stats.bootstrap(X, _mean, key=0), TypeError, "key must be a single PRNG key"),
        (
            lambda: stats.bootstrap(X, _mean, key=KEY, confidence=1.5),
            ValueError,
            r"confidence must lie in \(0, 1\), got 1.5",
        ),
        (lambda: stats.bootstrap(X, _mean, key=KEY, confidence="95%"), TypeError, "confidence"),
        (
            lambda: stats.bootstrap(X, _mean, key=KEY, method="basic"),
            ValueError,
            "method must be one of",
        ),
        (
            lambda: stats.bootstrap(X, _mean, key=KEY, num_samples=1),
            ValueError,
            "num_samples must be >= 2, got 1",
        ),
        (lambda: stats.bootstrap(X, _mean, key=KEY, num_samples=10.0), TypeError, "num_samples"),
        (lambda: stats.bootstrap(X, _mean, key=KEY, batch_size=0), ValueError, "batch_size"),
        (
            lambda: stats.bootstrap(X, _mean, key=KEY, strata=jnp.zeros(5, jnp.int32)),
            ValueError,
            r"strata must be an integer array \[N\] = \[6\].*shape \(5,\)",
        ),
        (
            lambda: stats.bootstrap(X, _mean, key=KEY, strata=jnp.zeros(6)),
            ValueError,
            "strata must be an integer array",
        ),
        (
            lambda: stats.bootstrap((X, jnp.ones(5)), _mean, key=KEY),
            ValueError,
            "same leading .video. dimension",
        ),
        (lambda: stats.bootstrap(jnp.ones(0), _mean, key=KEY), ValueError, "at least one video"),
        (
            lambda: stats.bootstrap(jnp.float32(1.0), _mean, key=KEY),
            ValueError,
            "same leading .video. dimension",
        ),
        (
            lambda: stats.paired_bootstrap_test(X, jnp.ones(5), _mean, key=KEY),
            ValueError,
            "statistics_a and statistics_b must be statistics of the same videos",
        ),
        (
            lambda: stats.paired_bootstrap_test(X, X, _mean, key=KEY, alternative="bigger"),
            ValueError,
            "alternative must be one of",
        ),
        (lambda: stats.permutation_test(X, (X, X), _mean, key=KEY), ValueError, "same structure"),
        (
            lambda: stats.permutation_test(X, X, _mean, key=KEY, num_samples=0),
            ValueError,
            "num_samples must be >= 1",
        ),
        (
            lambda: stats.resample_indices(KEY, num_videos=0, num_samples=3),
            ValueError,
            "num_videos must be >= 1",
        ),
        (
            lambda: stats.class_statistics([0, 1], [0, 1], num_classes=None),
            TypeError,
            "num_classes",
        ),
    ],
)
def test_bad_arguments_raise_clear_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_host_helpers_check_their_inputs(data, model_b):
    s, _ = data
    with pytest.raises(ValueError, match="iou_thresholds must list the 3 thresholds"):
        stats.segmentation_intervals(s, iou_thresholds=(0.5,), num_samples=10)
    shorter = _take(model_b, np.arange(N - 1))
    with pytest.raises(ValueError, match="same videos, got 20 and 19 videos"):
        stats.segmentation_comparison(s, shorter, num_samples=10)
    moved = model_b._replace(frames=jnp.asarray(model_b.frames).at[4].add(1))
    with pytest.raises(ValueError, match="video 4 has"):
        stats.segmentation_comparison(s, moved, num_samples=10)
    with pytest.raises(ValueError, match="class_stats_a and class_stats_b"):
        stats.segmentation_comparison(s, model_b, num_samples=10, class_stats_a=s)


def test_an_eager_call_compiles_one_program():
    """Outside jax.jit each statistics function compiles one program for a new shape (not one
    per operation; the bootstrap's replicate loop included) and nothing when called again."""
    rng = np.random.default_rng(5)
    videos, frames, classes = 7, 37, 4  # shapes no other test compiles
    targets = rng.integers(0, classes, (videos, frames)).astype(np.int32)
    predictions = np.where(rng.random(targets.shape) < 0.2, 0, targets).astype(np.int32)
    key = jax.block_until_ready(jax.random.key(3))
    per_video = _compiled_once(
        "segmentation_statistics", lambda: stats.segmentation_statistics(targets, predictions)
    )
    per_class = _compiled_once(
        "class_statistics",
        lambda: stats.class_statistics(targets, predictions, num_classes=classes),
    )
    metric, resampling = stats.segmentation_metrics, dict(key=key, num_samples=20, batch_size=7)
    calls = {
        "segmentation_metrics": lambda: metric(per_video),
        "class_metrics": lambda: stats.class_metrics(per_class),
        "weighted_sum": lambda: stats.weighted_sum(per_video.correct, np.ones(videos, np.int32)),
        "resample_indices": lambda: stats.resample_indices(key, num_videos=videos, num_samples=9),
        "bootstrap_replicates": lambda: stats.bootstrap_replicates(per_video, metric, **resampling),
        "bootstrap": lambda: stats.bootstrap(per_video, metric, **resampling),
        "paired_bootstrap_test": lambda: stats.paired_bootstrap_test(
            per_video, per_video, metric, **resampling
        ),
        "permutation_test": lambda: stats.permutation_test(
            per_video, per_video, metric, **resampling
        ),
    }
    for name, call in calls.items():
        _compiled_once(name, call)


def _compiled_once(name, call):
    """``call()``, asserting that it compiles one program and, called again, none."""
    with compilations() as first:
        result = jax.block_until_ready(call())
    with compilations() as again:
        jax.block_until_ready(call())
    assert (len(first), len(again)) == (1, 0), (name, first)
    return result


@pytest.mark.parametrize("weights", [np.ones(5, np.int32), np.ones((4, 1), np.int32)])
def test_weights_of_the_wrong_shape_are_named(data, weights):
    s, _ = data
    cs = stats.class_statistics(np.zeros((4, 3), int), np.zeros((4, 3), int), num_classes=2)
    message = r"weights must be \[N\], one multiplicity per video .* got weights of shape"
    for call in (
        lambda: stats.weighted_sum(np.ones((4, 2)), weights),
        lambda: stats.class_metrics(cs, weights),
        lambda: stats.segmentation_metrics(_take(s, np.arange(4)), weights),
    ):
        with pytest.raises(ValueError, match=message):
            call()


def test_weighted_sum_refuses_float_weights():
    """Cast to integer values' dtype, weights 0.5 and 0.5 summed 1 and 2 to 0."""
    with pytest.raises(TypeError, match="weights must be integer multiplicities"):
        stats.weighted_sum(jnp.array([1, 2]), jnp.array([0.5, 0.5]))


def _numpy_percentile_interval(values, indices, confidence):
    """The percentile interval of the mean of ``values [N]`` over the resamples ``indices
    [B, N]``, in float64."""
    replicates = values[indices].mean(axis=1)
    alpha = 1 - confidence
    return np.quantile(replicates, [alpha / 2, 1 - alpha / 2])


def test_mean_intervals_are_the_percentile_bootstrap_of_each_columns_mean():
    from jaxseg._host.intervals import mean_intervals

    rng = np.random.default_rng(0)
    values = np.stack([rng.random(N), rng.integers(0, 2, N).astype(float)], axis=1)
    kept = np.ones(values.shape, bool)
    ends = mean_intervals(values, kept, values.mean(0), confidence=0.9, num_samples=S, seed=4)
    indices = np.asarray(stats.resample_indices(jax.random.key(4), num_videos=N, num_samples=S))
    for m in range(2):
        want = _numpy_percentile_interval(values[:, m], indices, 0.9)
        np.testing.assert_allclose(ends[m], want, rtol=1e-6)


def test_mean_intervals_resample_only_the_kept_items_of_each_column():
    from jaxseg._host.intervals import mean_intervals

    rng = np.random.default_rng(1)
    values = rng.random((N, 4))
    kept = np.ones(values.shape, bool)
    ones = rng.random(N) < 0.5
    values[ones, 1], kept[:, 1] = 1.0, ones  # the mean of 1 over its kept items
    kept[:, 2] = np.arange(N) < 2  # two items: every replicate mean lies between them
    kept[:, 3] = np.arange(N) == 5  # one item: no interval
    means = [v[k].mean() for v, k in zip(values.T, kept.T)]
    ends = mean_intervals(values, kept, means, confidence=0.95, num_samples=S, seed=0)
    assert ends[0, 0] < means[0] < ends[0, 1]
    np.testing.assert_array_equal(ends[1], [1.0, 1.0])
    assert values[:2, 2].min() <= ends[2, 0] <= ends[2, 1] <= values[:2, 2].max()
    assert np.isnan(ends[3]).all()
    nothing = mean_intervals(
        values, ~np.ones_like(kept), means, confidence=0.9, num_samples=2, seed=0
    )
    assert np.isnan(nothing).all()
