"""Tests of retrieval ranks, Recall@K, MRR, median and mean rank."""

from __future__ import annotations

import functools
import json

import _reference_ranking as ref
import jax
import numpy as np
import pytest
from conftest import golden_path

from jaxseg import metrics as M
from jaxseg import streaming as S

N = 200  # every similarity matrix is padded to [N, N] (items beyond n masked out)


@functools.partial(jax.jit, static_argnames=("ties",))
def _all(sim, targets, mask, item_mask, ties="pessimistic"):
    kw = dict(targets=targets, mask=mask, item_mask=item_mask, ties=ties)
    return dict(
        ranks=M.retrieval_ranks(sim, targets=targets, item_mask=item_mask, ties=ties),
        recall=M.recall_at_k(sim, k=(1, 5, 10), **kw),
        mrr=M.mean_reciprocal_rank(sim, **kw),
        median=M.median_rank(sim, **kw),
        mean=M.mean_rank(sim, **kw),
    )


def _padded(sim, targets=None):
    n = sim.shape[0]
    out = np.zeros((N, N), np.float32)
    out[:n, : sim.shape[1]] = sim
    mask, item_mask = np.arange(N) < n, np.arange(N) < sim.shape[1]
    targets = np.arange(N, dtype=np.int32) if targets is None else np.pad(targets, (0, N - n))
    return out, targets, mask, item_mask


def test_golden_clip4clip():
    path = golden_path("retrieval.json")
    if not path.exists():
        pytest.skip(f"golden data not found at {path}")
    data = json.load(open(path))
    z = np.load(golden_path("retrieval.npz"))
    for case in data["retrieval"]:
        sim = z[f"sim_{case['key']}"]
        got = _all(*_padded(sim))
        n = case["n"]
        np.testing.assert_array_equal(np.asarray(got["ranks"])[:n], case["ranks0"])
        np.testing.assert_allclose(
            np.asarray(got["recall"]) * 100, [case["R1"], case["R5"], case["R10"]], atol=1e-4
        )
        assert float(got["median"]) == pytest.approx(case["MedianR"], abs=1e-6)
        assert float(got["mean"]) == pytest.approx(case["MeanR"], abs=1e-4)
        assert float(got["mrr"]) == pytest.approx(case["MRR_derived"], abs=1e-6)


@pytest.mark.parametrize("ties", ["pessimistic", "optimistic", "average"])
def test_ties_and_targets_match_reference(ties):
    rng = np.random.default_rng(3)
    sim = np.round(rng.random((37, 50)) * 4).astype(np.float32)  # heavy ties
    sim[0] = 1.0  # a constant row
    targets = rng.integers(0, 50, 37).astype(np.int32)
    got = _all(*_padded(sim, targets), ties=ties)
    ranks = [ref.retrieval_rank(sim[q], targets[q], ties) for q in range(37)]
    np.testing.assert_allclose(np.asarray(got["ranks"])[:37], ranks, atol=0)
    want = ref.retrieval_summary(ranks)
    np.testing.assert_allclose(
        np.asarray(got["recall"]), [want["R1"], want["R5"], want["R10"]], atol=1e-6
    )
    assert float(got["median"]) == pytest.approx(want["MedianR"], abs=1e-6)
    assert float(got["mean"]) == pytest.approx(want["MeanR"], abs=1e-4)
    assert float(got["mrr"]) == pytest.approx(want["MRR"], abs=1e-6)
    constant_rank = {"pessimistic": 49, "optimistic": 0, "average": 24.5}[ties]
    assert float(got["ranks"][0]) == constant_rank  # a constant score earns no credit by default


def test_no_valid_query_is_nan():
    sim, targets, mask, item_mask = _padded(np.eye(3, dtype=np.float32))
    got = _all(sim, targets, mask & False, item_mask)
    for key in ("recall", "mrr", "median", "mean"):
        assert np.isnan(np.asarray(got[key])).all(), key


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="ties"):
        M.recall_at_k(np.eye(3), ties="random")
    with pytest.raises(ValueError, match="targets"):
        M.recall_at_k(np.eye(3), targets=np.zeros(2, np.int32))
    with pytest.raises(ValueError, match="k must"):
        M.recall_at_k(np.eye(3), k=(0,))
    with pytest.raises(ValueError, match="Q <= I"):
        M.median_rank(np.ones((4, 3)))


def test_matches_that_are_no_item_are_never_retrieved():
    """A target outside [0, I) (or on a padding item) is a miss: rank +inf, reciprocal rank 0.

    Target 7 of 3 items used to be clipped onto item 2 and scored R@1 = 1.0.
    """
    from jaxseg import streaming

    sim = np.eye(3, dtype=np.float32)
    targets = np.array([7, 1, 2])
    np.testing.assert_array_equal(M.retrieval_ranks(sim, targets=targets), [np.inf, 0, 0])
    np.testing.assert_allclose(M.recall_at_k(sim, targets=targets, k=(1, 3)), [2 / 3, 2 / 3])
    assert float(M.mean_reciprocal_rank(sim, targets=targets)) == pytest.approx(2 / 3)
    assert float(M.mean_rank(sim, targets=targets)) == np.inf
    assert float(M.recall_at_k(np.eye(1, dtype=np.float32), targets=[-1], k=1)[0]) == 0.0
    padded_item = np.array([True, True, False])
    np.testing.assert_allclose(M.recall_at_k(sim, item_mask=padded_item, k=(1,)), [2 / 3])
    acc = streaming.retrieval(num_items=3, k=(1, 3))
    result = acc.compute(jax.jit(acc.update)(acc.init(), sim, targets=targets))
    np.testing.assert_allclose(result["recall"], [2 / 3, 2 / 3])
    assert float(result["mean_reciprocal_rank"]) == pytest.approx(2 / 3)
    assert float(result["mean_rank"]) == np.inf and float(result["median_rank"]) == 1.0


def test_a_nan_similarity_is_the_lowest():
    """A NaN similarity (a diverged model) compared as neither higher nor equal: a NaN match
    had rank 0, a perfect hit. It counts as -inf now, in the batch and streaming metrics."""
    sim = np.array([[np.nan, 0.5, 0.9], [0.1, 0.9, np.nan], [0.3, 0.2, 0.1]], np.float32)
    lowest = np.where(np.isnan(sim), -np.inf, sim)
    for ties in ("pessimistic", "optimistic", "average"):
        np.testing.assert_array_equal(
            M.retrieval_ranks(sim, ties=ties), M.retrieval_ranks(lowest, ties=ties)
        )
    assert M.retrieval_ranks(sim).tolist() == [2.0, 0.0, 2.0]
    assert M.recall_at_k(sim, k=(1,))[0] == np.float32(1 / 3)
    accumulator = S.retrieval(num_items=3)
    state = accumulator.update(accumulator.init(), sim)
    assert float(accumulator.compute(state)["recall"][0]) == np.float32(1 / 3)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_subnormal_similarity_ranks_above_zero(dtype):
    """XLA's CPU code flushes subnormals to zero in float comparisons: a match of similarity
    1e-40 (or 5e-324 in float64) tied with the 0 beside it and ranked behind it
    (pessimistic ties). Compared by their bits, they rank as on the host."""
    tiny = np.finfo(dtype).smallest_subnormal
    sim = np.array([[tiny, 0.0, -0.0], [0.0, tiny, -tiny]], dtype)
    want = [ref.retrieval_rank(row.tolist(), q) for q, row in enumerate(sim)]
    assert want == [0, 0]
    with jax.enable_x64(dtype == np.float64):
        sim = jax.numpy.asarray(sim)
        assert sim.dtype == dtype
        np.testing.assert_array_equal(M.retrieval_ranks(sim), want)
        np.testing.assert_array_equal(M.retrieval_ranks(sim, ties="optimistic"), want)
        accumulator = S.retrieval(num_items=3, k=(1,))
        state = accumulator.update(accumulator.init(), sim)
        assert float(accumulator.compute(state)["recall"][0]) == 1.0


@pytest.mark.parametrize("ties", ["pessimistic", "average"])
def test_mrr_is_the_same_bits_in_any_query_order_and_any_split(ties):
    """MRR sums each rank's share ``count_r / (r + 1)`` in the order of the ranks, in the
    batch metric and the streaming accumulator alike. A sum over queries in their order gave
    the stream 1 ulp more than the batch (0.16427845 against 0.16427843), and a batch with
    its queries reordered could differ as well. The rows of a batch are each their own."""
    rng = np.random.default_rng(11)
    sim = np.round(rng.normal(size=(300, 120)), 1).astype(np.float32)  # many ties
    targets = rng.integers(-2, 121, 300)  # some matches are no item: rank +inf
    mask = rng.random(300) < 0.9
    want = M.mean_reciprocal_rank(sim, targets=targets, mask=mask, ties=ties)
    order = rng.permutation(300)
    shuffled = M.mean_reciprocal_rank(
        sim[order], targets=targets[order], mask=mask[order], ties=ties
    )
    assert shuffled.tobytes() == want.tobytes()
    batched = M.mean_reciprocal_rank(
        sim.reshape(3, 100, 120),
        targets=targets.reshape(3, 100),
        mask=mask.reshape(3, 100),
        ties=ties,
    )
    acc = S.retrieval(num_items=120, ties=ties)
    state = acc.init()
    for part in np.split(order, [7, 150, 151]):
        state = acc.update(state, sim[part], targets=targets[part], mask=mask[part])
    assert np.asarray(acc.compute(state)["mean_reciprocal_rank"]).tobytes() == want.tobytes()
    reference = np.mean(
        [1 / (r + 1) for r, m in zip(M.retrieval_ranks(sim, targets=targets, ties=ties), mask) if m]
    )
    assert float(want) == pytest.approx(reference, rel=1e-6)
    for i, row in enumerate(np.split(np.arange(300), 3)):
        alone = M.mean_reciprocal_rank(sim[row], targets=targets[row], mask=mask[row], ties=ties)
        assert np.asarray(batched[i]).tobytes() == alone.tobytes()


def test_recall_with_k_past_int32_takes_every_item():
    """A k of 2**31 or more raised OverflowError from the comparison with the ranks; k >= I
    takes every item, so only a match that is no item misses."""
    sim = np.array([[0.1, 0.9, 0.5], [0.7, 0.2, 0.3]], np.float32)
    targets = np.array([0, 7])
    want = [0.5, 0.5, 0.5]  # query 0 ranks 2 (< 3 = I); query 1's match is no item
    assert ref.retrieval_rank(sim[0], 0) == 2
    ks = (3, 2**31, 2**40)
    np.testing.assert_array_equal(M.recall_at_k(sim, k=ks, targets=targets), want)
    accumulator = S.retrieval(num_items=3, k=ks)
    state = accumulator.update(accumulator.init(), sim, targets=targets)
    np.testing.assert_array_equal(accumulator.compute(state)["recall"], want)
