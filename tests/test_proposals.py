"""ActivityNet proposals (AR-AN, AUC, AR@k): golden parity, our oracle, the float64 budgets,
THUMOS-14 settings, degenerate cases and the streaming accumulator."""

from __future__ import annotations

import functools
import itertools

import _reference_grounding as ref
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _jaxprs import float_products
from conftest import load_golden

from jaxseg import metrics as M
from jaxseg import streaming
from jaxseg._src import binary64

THRESHOLDS = tuple(float(t) for t in np.linspace(0.5, 0.95, 10))


@pytest.fixture(scope="module")
def golden():
    return load_golden("proposals/proposals")


def _curve(a, cfg, **kw):
    return jax.jit(M.proposal_average_recall, static_argnames=("at",))(
        a[f"{cfg}_gt_windows"],
        a[f"{cfg}_prop_windows"],
        a[f"{cfg}_prop_scores"],
        target_mask=a[f"{cfg}_gt_mask"],
        proposal_mask=a[f"{cfg}_prop_mask"],
        **kw,
    )


@pytest.mark.parametrize("cfg", ["std", "var"])
def test_golden_float64_equals_eval_proposal(golden, cfg):
    data, a = golden
    with jax.enable_x64(True):
        curve = jax.device_get(_curve(a, cfg))
    expected = data["expected"][cfg]
    np.testing.assert_allclose(curve.recall, a[f"{cfg}_exp_recall"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(curve.average_recall, a[f"{cfg}_exp_avg_recall"], atol=1e-12)
    np.testing.assert_allclose(
        curve.proposals_per_video, a[f"{cfg}_exp_proposals_per_video"], rtol=0, atol=0
    )
    assert abs(100 * curve.auc - expected["auc_percent"]) < 1e-6
    assert abs(curve.auc * curve.proposals_per_video[-1] - expected["auc_raw"]) < 1e-6
    for i, k in enumerate((1, 5, 10, 100)):
        assert abs(curve.at[i] - expected["ar_at_index"][str(k)]) < 1e-6


@pytest.mark.parametrize("cfg", ["std", "var"])
def test_golden_float32_differs_only_where_a_tiou_ties_a_threshold(golden, cfg):
    _data, a = golden
    with jax.enable_x64(True):
        exact = jax.device_get(_curve(a, cfg))
    curve = jax.device_get(_curve(a, cfg))
    differs = np.abs(curve.recall - exact.recall) > 1e-6  # [T, J]
    ties = np.zeros(len(THRESHOLDS), bool)
    for v in range(a[f"{cfg}_gt_windows"].shape[0]):
        for g, gm in zip(a[f"{cfg}_gt_windows"][v], a[f"{cfg}_gt_mask"][v]):
            for p, pm in zip(a[f"{cfg}_prop_windows"][v], a[f"{cfg}_prop_mask"][v]):
                if gm and pm:
                    ties |= np.abs(ref.union_iou(p, g) - np.array(THRESHOLDS)) < 1e-6
    assert not np.any(differs & ~ties[:, None])
    # the budgets (float64 products) are exact in float32 mode too: AN is the reference's
    np.testing.assert_allclose(
        curve.proposals_per_video, a[f"{cfg}_exp_proposals_per_video"], rtol=1e-6
    )


def test_budgets_reproduce_the_float64_floor_of_100_times_0_29():
    # ActivityNet-like: every video 100 proposals, so pcn_29 = 0.29 and int(100 * 0.29) = 28
    rng = np.random.default_rng(0)
    gt = np.array([[[10.0, 20.0]]] * 3)
    props = np.zeros((3, 100, 2))
    props[:, :, 0] = rng.uniform(0, 50, (3, 100))
    props[:, :, 1] = props[:, :, 0] + 2  # tIoU <= 0.2 with the target
    props[:, 28] = [10.0, 20.0]  # the only hit, at rank 29
    scores = np.tile(np.linspace(1.0, 0.01, 100), (3, 1))
    curve = M.proposal_average_recall(gt, props.astype(np.float32), scores.astype(np.float32))
    # 100 * 0.29 = 28.999999999999996 in float64: step 29 still uses 28 proposals
    assert float(curve.average_recall[28]) == 0.0
    assert float(curve.average_recall[29]) == 1.0


def test_video_budgets_are_the_budget_table_rows_without_the_table():
    """One video of 20,000 proposals made a step table over every count up to 20,000 (about
    2 GB of binary64 products in ``jaxseg detection --proposals``): the steps are taken for
    the videos' distinct numbers kept, and equal the table's rows."""
    from jaxseg._src.proposals import budgets, video_budgets

    capacity = 20_000
    count = jnp.array([1, 1, capacity, 3, 7, 7], jnp.int32)
    has_targets = jnp.array([True, True, True, False, True, True])
    rows = functools.partial(video_budgets, capacity=capacity, max_average=100)
    table = functools.partial(budgets, capacity=capacity, max_average=100)

    def largest(fn, *args):  # the most entries of one array of fn's program
        jaxpr = jax.make_jaxpr(fn)(*args)
        return max(int(np.prod(v.aval.shape)) for eqn in jaxpr.eqns for v in eqn.outvars)

    budget, num_videos, total, _ = jax.jit(rows)(count, has_targets)
    counts = jnp.zeros(capacity + 1, jnp.int32).at[count].add(has_targets.astype(jnp.int32))
    arguments = (num_videos, jnp.sum(count), counts)
    assert 50 * largest(rows, count, has_targets) < largest(table, *arguments)
    kept, want_total, steps, _ = jax.jit(table)(*arguments)
    used = jnp.where(has_targets, kept[count], 0)
    np.testing.assert_array_equal(budget, steps[used])
    assert int(total) == int(want_total) and int(num_videos) == 5


def test_binary64_matches_numpy():
    """Quotients over all of int32's non-negative range: a numerator of 2**30 or more over 1
    lost its top bit (2**30 + 5 read 5), and a divisor of 2**30 or more wrapped."""
    rng = np.random.default_rng(1)
    top = np.iinfo(np.int32).max
    a = np.concatenate([rng.integers(0, 1 << 29, 500), [top, top, 2**30 + 5, 7, 2**30, 5]])
    b = np.concatenate([rng.integers(1, 1 << 29, 500), [1, top, 1, top, 2**30 + 1, 3]])
    q = binary64.quotient(a, b)
    with jax.enable_x64(True):
        np.testing.assert_array_equal(np.asarray(binary64.to_float(q, np.float64)), a / b)
    x = np.concatenate([np.arange(1, 101) / 100.0, rng.uniform(0, 3, 400)])
    n = rng.integers(0, 3000, 500)
    floors = binary64.floor(binary64.product(binary64.from_int(n), binary64.constant(x)))
    np.testing.assert_array_equal(np.asarray(floors), np.floor(n * x).astype(np.int64))


def test_binary64_powers_of_two_convert_exactly():
    # A mantissa of 2**52 times 2**(e - 52), for the exponents of normal numbers.
    for dtype, exponents in (
        (np.float32, np.arange(-126, 128)),
        (np.float64, np.arange(-1022, 1024)),
    ):
        limbs = np.tile(np.array([0, 0, 0, 1 << 10], np.int32), (exponents.size, 1))
        with jax.enable_x64(dtype == np.float64):
            powers = binary64.Double(jnp.asarray(limbs), jnp.asarray(exponents - 52, jnp.int32))
            got = np.asarray(binary64.to_float(powers, dtype))
        np.testing.assert_array_equal(got, np.ldexp(dtype(1), exponents), err_msg=str(dtype))


def _random_videos(rng, num_videos, counts):
    videos = []
    for v in range(num_videos):
        n_gt = int(rng.integers(0 if v % 7 == 3 else 1, 5))
        s = rng.integers(0, 60, n_gt)
        gts = [[float(a), float(a + rng.integers(1, 15))] for a in s]
        n = int(rng.choice(counts))
        s = rng.integers(0, 60, n)
        props = [[float(a), float(a + rng.integers(1, 15))] for a in s]
        scores = [float(x) for x in rng.permutation(n) / max(n, 1)]
        videos.append((gts, props, scores))
    return videos


def _arrays(videos, width_g, width_p):
    v = len(videos)
    gt, gm = np.zeros((v, width_g, 2), np.float32), np.zeros((v, width_g), bool)
    pr, pm = np.zeros((v, width_p, 2), np.float32), np.zeros((v, width_p), bool)
    sc = np.zeros((v, width_p), np.float32)
    for i, (g, p, s) in enumerate(videos):
        gt[i, : len(g)], gm[i, : len(g)] = np.reshape(g, (-1, 2)), True
        pr[i, : len(p)], pm[i, : len(p)], sc[i, : len(p)] = np.reshape(p, (-1, 2)), True, s
    return gt, pr, sc, gm, pm


@pytest.mark.parametrize(
    ("seed", "counts", "max_average"),
    [(0, (0, 1, 5, 10, 37, 100), 100), (1, (30, 60), 20), (2, (3, 17, 40), 10), (3, (50,), 50)],
)
def test_matches_the_oracle_on_random_integer_windows(seed, counts, max_average):
    rng = np.random.default_rng(seed)
    videos = _random_videos(rng, 25, counts)
    gt, pr, sc, gm, pm = _arrays(videos, 5, max(counts) or 1)
    curve = M.proposal_average_recall(
        gt,
        pr,
        sc,
        target_mask=gm,
        proposal_mask=pm,
        max_average_proposals=max_average,
        at=(max_average,),
    )
    recall, average, per_video = ref.proposal_curve(videos, THRESHOLDS, max_average)
    np.testing.assert_allclose(np.asarray(curve.recall), recall, atol=1e-6)
    np.testing.assert_allclose(np.asarray(curve.average_recall), average, atol=1e-6)
    np.testing.assert_allclose(np.asarray(curve.proposals_per_video), per_video, rtol=1e-6)
    auc = ref.trapezoid(average, per_video) / per_video[-1]
    assert abs(float(curve.auc) - auc) < 1e-6
    assert abs(float(curve.at[0]) - average[-1]) < 1e-6


def test_thumos_settings_ar_at_50_to_1000():
    rng = np.random.default_rng(4)
    videos = _random_videos(rng, 12, (1000,))
    gt, pr, sc, gm, pm = _arrays(videos, 5, 1000)
    at = (50, 100, 200, 500, 1000)
    curve = M.proposal_average_recall(
        gt, pr, sc, target_mask=gm, proposal_mask=pm, max_average_proposals=1000, at=at
    )
    _, average, per_video = ref.proposal_curve(videos, THRESHOLDS, 1000)
    want = [average[a // 10 - 1] for a in at]
    np.testing.assert_allclose(np.asarray(curve.at), want, atol=1e-6)
    assert per_video[4] == pytest.approx(50)


def test_degenerate_datasets_and_bad_arguments():
    gt = np.array([[[0.0, 10.0]], [[0.0, 10.0]]], np.float32)
    props = np.array([[[0.0, 10.0]], [[0.0, 10.0]]], np.float32)
    scores = np.ones((2, 1), np.float32)
    none = M.proposal_average_recall(gt, props, scores, target_mask=np.zeros((2, 1), bool))
    assert np.isnan(np.asarray(none.recall)).all() and np.isnan(float(none.auc))
    empty = M.proposal_average_recall(gt, props, scores, proposal_mask=np.zeros((2, 1), bool))
    assert (np.asarray(empty.recall) == 0).all() and float(empty.auc) == 0.0
    with pytest.raises(ValueError, match="at"):
        M.proposal_average_recall(gt, props, scores, at=(3,), max_average_proposals=2)
    with pytest.raises(ValueError, match="targets"):
        M.proposal_average_recall(gt[0], props, scores)


def test_at_as_a_numpy_int_or_empty():
    """``at=np.int64(2)`` failed in the accumulator factory and under jax.jit ("'numpy.int64'
    object is not iterable") and ``at=()`` with "Indexer must have integer or boolean type";
    a numpy int is one AN value, as an int is, and an empty ``at`` is refused by name."""
    gt = np.array([[[0.0, 10.0]], [[5.0, 8.0]]], np.float32)
    props = np.array([[[0.0, 9.0], [20.0, 30.0]], [[0.0, 1.0], [5.0, 8.0]]], np.float32)
    scores = np.array([[0.9, 0.8], [0.7, 0.6]], np.float32)
    at = np.int64(2)
    run = jax.jit(lambda *a: M.proposal_average_recall(*a, max_average_proposals=2, at=at))
    want = M.proposal_average_recall(gt, props, scores, max_average_proposals=2, at=2).at
    np.testing.assert_array_equal(np.asarray(run(gt, props, scores).at), np.asarray(want))
    acc = streaming.proposals(capacity=2, max_average_proposals=2, at=at)
    result = acc.compute(acc.update(acc.init(), gt, props, scores))
    np.testing.assert_array_equal(np.asarray(result["at"]), np.asarray(want))
    with pytest.raises(ValueError, match=r"at must be a non-empty tuple of ints >= 1"):
        M.proposal_average_recall(gt, props, scores, max_average_proposals=2, at=())
    with pytest.raises(ValueError, match=r"at must be a non-empty tuple of ints >= 1"):
        streaming.proposals(capacity=2, max_average_proposals=2, at=())


def _stream(acc, arrays, masks, splits):
    state = acc.init()
    update = jax.jit(acc.update)
    bounds = [0, *splits, len(arrays[0])]
    for lo, hi in itertools.pairwise(bounds):
        part = {k: v[lo:hi] for k, v in masks.items()}
        state = update(state, *(x[lo:hi] for x in arrays), **part)
    return state


@pytest.mark.parametrize("cfg", ["std", "var"])
def test_streaming_proposals_is_split_invariant_and_equals_the_metric(golden, cfg):
    _data, a = golden
    acc = streaming.proposals(capacity=150)
    arrays = tuple(a[f"{cfg}_{k}"] for k in ("gt_windows", "prop_windows", "prop_scores"))
    masks = dict(target_mask=a[f"{cfg}_gt_mask"], proposal_mask=a[f"{cfg}_prop_mask"])
    one = _stream(acc, arrays, masks, [])
    for splits in ([1], [13, 14, 30]):
        other = _stream(acc, arrays, masks, splits)
        assert jax.tree.all(jax.tree.map(lambda x, y: bool((x == y).all()), one, other))
    result = acc.compute(one)
    # The recalled counts are float products: at full precision, not XLA:GPU's TF32 default.
    products = float_products(jax.make_jaxpr(acc.compute)(one))
    assert products and all(p == (jax.lax.Precision.HIGHEST,) * 2 for p in products)
    curve = _curve(a, cfg)
    for name in ("recall", "average_recall", "proposals_per_video", "auc", "at"):
        np.testing.assert_allclose(
            np.asarray(result[name]), np.asarray(getattr(curve, name)), atol=1e-6, rtol=1e-6
        )
    small = streaming.proposals(capacity=10)
    with pytest.raises(ValueError, match="more than capacity=10"):
        small.update(small.init(), *arrays)


def test_a_large_max_average_proposals_keeps_its_budgets_exact():
    """M V up to int32's largest: with 2 videos and 1 proposal in all, M = 2**29 gave AR 0
    and AN NaN (the ratio 2**30 lost its top bit), M = 2**30 - 1 half the AN."""
    gt = np.array([[[0.0, 10.0]], [[0.0, 10.0]]])
    props = np.array([[[0.0, 10.0]], [[0.0, 10.0]]])
    scores, pm = np.array([[0.9], [0.8]]), np.array([[True], [False]])
    videos = [([(0.0, 10.0)], [(0.0, 10.0)], [0.9]), ([(0.0, 10.0)], [], [])]
    for m in (2**29, 2**30 - 1):
        curve = M.proposal_average_recall(
            gt, props, scores, proposal_mask=pm, max_average_proposals=m, at=(m,)
        )
        _, average, per_video = ref.proposal_curve(videos, THRESHOLDS, max_average=m)
        np.testing.assert_allclose(curve.average_recall, average, rtol=1e-6)
        np.testing.assert_allclose(curve.proposals_per_video, per_video, rtol=1e-6)
    with pytest.raises(ValueError, match=r"max_average_proposals=1073741824 .* 2 videos"):
        M.proposal_average_recall(gt, props, scores, max_average_proposals=2**30, at=(2**30,))


def test_streaming_proposals_past_int32_budgets_is_nan():
    acc = streaming.proposals(capacity=1, max_average_proposals=2**30, at=(2**30,))
    gt, props, scores = np.zeros((2, 1, 2)), np.zeros((2, 1, 2)), np.ones((2, 1))
    gt[..., 1] = props[..., 1] = 10.0
    one = acc.compute(acc.update(acc.init(), gt[:1], props[:1], scores[:1]))
    assert float(one["at"][0]) == 1.0 and np.isfinite(one["auc"])
    two = acc.compute(acc.update(acc.init(), gt, props, scores))
    assert int(two["videos"]) == 2
    assert all(np.isnan(two[name]).all() for name in ("recall", "auc", "at", "average_recall"))
