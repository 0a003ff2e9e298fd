"""Quotients of exact counts are the correctly rounded float32 of the exact ratio.

XLA:GPU divides float32 within 2 ulp (PTX ``div.full.f32``), so off CPU every quotient of the
package is ``numerics.rounded_quotient``'s, written from the operands' significands; its
tests below compare it with the CPU's IEEE 754 division, bit for bit.

XLA divides by a number it sees as one for a whole vector (a shape-derived count without a
mask, one total spread over several thresholds) as a product with its reciprocal, 1 ulp off
(9 / 10 read 0.90000004); ``numerics.count_ratio`` divides quotient by quotient. Each case
below has a vector of quotients over one denominator, the shape where that happened.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _reference import correctly_rounded_float32

from jaxseg import metrics as M
from jaxseg import streaming as S
from jaxseg._src import counting, numerics
from jaxseg._src.numerics import integer_ratio


def _exact(numerator, denominator) -> np.float32:
    return np.float32(np.float64(numerator) / np.float64(denominator))


def _similarity(queries=10, ahead=2):
    """Query 0's match has ``ahead`` items ranked before it, the others none."""
    sim = np.eye(queries, dtype=np.float32)
    sim[0, 1 : 1 + ahead] = 2.0
    return sim


def _streamed(accumulator, *args):
    return accumulator.compute(accumulator.update(accumulator.init(), *args))


def _grounding():
    """7 queries, 3 found at the first rank, none later."""
    targets = np.tile(np.array([[[0.0, 10.0]]], np.float32), (7, 1, 1))
    predictions = np.tile(np.array([[[50.0, 60.0], [70.0, 80.0]]], np.float32), (7, 1, 1))
    predictions[:3, 0] = [0.0, 9.0]
    return targets, predictions


def _moments():
    """3 queries of 2 moments each: 5 of the 6 recalled."""
    targets = np.array([[[0.0, 10.0], [20.0, 30.0]]] * 3, np.float32)
    predictions = np.array([[[0.0, 9.0], [20.0, 29.0]]] * 3, np.float32)
    predictions[0, 1] = [90.0, 99.0]
    return targets, predictions


def _saliency():
    """7 queries whose top clip is relevant in 3."""
    labels = np.zeros((7, 2, 1), np.int32)
    labels[:3, 0, 0] = 4
    return labels, np.tile(np.array([[1.0, 0.0]], np.float32), (7, 1))


def _proposals():
    """10 videos of one target, 9 of them found at tIoU 0.95 by their one proposal."""
    targets = np.tile(np.array([[[0.0, 10.0]]], np.float32), (10, 1, 1))
    proposals = np.tile(np.array([[[0.0, 9.5]]], np.float32), (10, 1, 1))
    proposals[9] = [[50.0, 60.0]]
    return targets, proposals, np.ones((10, 1), np.float32)


def _top_k_scores():
    """10 rows of class 0, whose score is highest in 9 and second in 1."""
    scores = np.zeros((10, 3), np.float32)
    scores[:, 0] = 1.0
    scores[9] = [0.5, 1.0, 0.0]
    return scores


CASES = {
    "recall_at_k": (lambda: M.recall_at_k(_similarity(), k=(1, 2, 3)), [9, 9, 10], 10),
    "mean_rank": (lambda: M.mean_rank(_similarity(queries=3)), 5, 3),
    "mean_reciprocal_rank": (  # query 0 at rank 1 (reciprocal 1/2): an exact sum
        lambda: M.mean_reciprocal_rank(_similarity(queries=3, ahead=1)),
        2.5,
        3,
    ),
    "streaming.top_k": (
        lambda: _streamed(S.top_k(k=(1, 2)), np.zeros(10, np.int32), _top_k_scores())["accuracy"],
        [9, 10],
        10,
    ),
    "streaming.retrieval mean_rank": (  # (it added 1 to the mean: two roundings)
        lambda: _streamed(S.retrieval(num_items=3), _similarity(queries=3))["mean_rank"],
        5,
        3,
    ),
    "streaming.grounding": (
        lambda: _streamed(S.grounding(k=(1, 2), iou_thresholds=(0.5,)), *_grounding())["recall"],
        [[3, 3]],
        7,
    ),
    "streaming.moment_queries": (
        lambda: _streamed(S.moment_queries(ranks=(1, 2), iou_thresholds=(0.5,)), *_moments())[
            "recall"
        ],
        [[5, 5]],
        6,
    ),
    "streaming.highlight": (
        lambda: _streamed(S.highlight(min_scores=(2, 3), num_annotators=1), *_saliency())[
            "hit_at_1"
        ],
        [3, 3],
        7,
    ),
    "proposal_average_recall": (
        lambda: M.proposal_average_recall(
            *_proposals(), iou_thresholds=(0.5, 0.9), max_average_proposals=1, at=(1,)
        ).recall[:, -1],
        [9, 9],
        10,
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_quotients_of_counts_are_correctly_rounded(name):
    compute, numerators, denominator = CASES[name]
    want = np.vectorize(_exact)(np.asarray(numerators, np.float64), denominator)
    np.testing.assert_array_equal(np.asarray(compute()), want.astype(np.float32))


# ------------------------------------------------------------------------------------------
# Dataset counts past 2**24, where float32 rounds the counts themselves: 8,500,000 correct
# frames of 17,000,001 read 0.5 as float32(count) / float32(count), exactly 0.49999997.


def _words(values):
    values = [int(v) for v in values]
    return (
        np.array([v >> 32 for v in values], np.uint32),
        np.array([v & 0xFFFFFFFF for v in values], np.uint32),
    )


def test_integer_ratio_is_correctly_rounded_for_counts_up_to_2_51():
    rng = np.random.default_rng(7)
    bits_n, bits_d = rng.integers(0, 52, 3000), rng.integers(0, 52, 3000)
    numerators = [int(rng.integers(0, 2 ** int(b) + 1)) for b in bits_n]
    denominators = [int(rng.integers(1, 2 ** int(b) + 1)) for b in bits_d]
    # exact ties between two float32 (to the even one), powers of two, the largest counts
    numerators += [2**24 + 1, 2**24 + 3, 3 * (2**24 + 1), 2**51, 2**51 - 1, 0, 8_500_000]
    denominators += [1, 1, 3, 1, 2**51, 5, 17_000_001]
    got = np.asarray(integer_ratio(_words(numerators), _words(denominators)))
    want = [correctly_rounded_float32(n, d) for n, d in zip(numerators, denominators)]
    np.testing.assert_array_equal(got, np.array(want, np.float32))
    zero = integer_ratio(_words([5]), _words([0]), np.float32(-1.0))
    assert zero.tolist() == [-1.0]


def _doubled(accumulator, batch, times: int, extra):
    """The state of ``batch`` added ``2**times`` times (by merging a state with itself)
    and ``extra`` once: counts past 2**24 without as many frames."""
    state = accumulator.update(accumulator.init(), *batch)
    for _ in range(times):
        state = accumulator.merge(state, state)
    return accumulator.merge(state, accumulator.update(accumulator.init(), *extra))


def _pairs(confusion):
    """Targets and predictions ``[1, T]`` with the given 2 x 2 confusion counts."""
    cells = [(t, p) for t in range(2) for p in range(2) for _ in range(confusion[t][p])]
    return tuple(np.array([[cell[i] for cell in cells]], np.int32) for i in (0, 1))


def _large_confusion():
    """Per-class counts near 2**25: the base confusion 2**22 times plus a few frames."""
    base, extra, times = [[9, 1], [2, 8]], [[0, 0], [1, 0]], 22
    confusion = np.array(base, object) * 2**times + np.array(extra, object)
    return _pairs(base), times, _pairs(extra), confusion


def _exact_class_scores(confusion):
    tp = [confusion[c][c] for c in range(2)]
    support = [sum(confusion[c]) for c in range(2)]
    predicted = [confusion[0][c] + confusion[1][c] for c in range(2)]
    fractions = {
        "precision": zip(tp, predicted),
        "recall": zip(tp, support),
        "f1": ((2 * t, s + p) for t, s, p in zip(tp, support, predicted)),
        "iou": ((t, s + p - t) for t, s, p in zip(tp, support, predicted)),
    }
    return {
        score: np.array([correctly_rounded_float32(n, d) for n, d in pairs], np.float32)
        for score, pairs in fractions.items()
    }


def _rounded_counts_differ(confusion, want):
    """Whether dividing float32-rounded counts misses at least one exact value (so that the
    test can fail on the old code)."""
    c = np.array(confusion, np.float64).astype(np.float32)
    tp, support, predicted = np.diag(c), c.sum(1), c.sum(0)
    rounded = {
        "precision": tp / predicted,
        "recall": tp / support,
        "f1": 2 * tp / (support + predicted),
    }
    return any(np.any(rounded[k] != want[k]) for k in rounded)


def test_streaming_frame_scores_past_2_24_frames_are_exact():
    batch, times, extra, confusion = _large_confusion()
    want = _exact_class_scores(confusion)
    assert _rounded_counts_differ(confusion, want)
    result = S.frame_metrics(num_classes=2).compute(
        _doubled(S.frame_metrics(num_classes=2), batch, times, extra)
    )
    trace, frames = confusion[0][0] + confusion[1][1], confusion.sum()
    assert np.float32(trace) / np.float32(frames) != correctly_rounded_float32(trace, frames)
    assert result["accuracy"] == correctly_rounded_float32(trace, frames)
    np.testing.assert_array_equal(result["class_accuracy"], want["recall"])
    for score in ("precision", "recall", "f1"):
        np.testing.assert_array_equal(result[score]["none"], want[score])
        assert result[score]["macro"] == np.mean(want[score], dtype=np.float32)
    np.testing.assert_array_equal(result["confusion"], confusion.astype(np.int64))


def test_streaming_segmentation_accuracy_past_2_24_frames_is_exact():
    batch, times, extra, confusion = _large_confusion()
    accumulator = S.segmentation()
    result = accumulator.compute(_doubled(accumulator, batch, times, extra))
    trace, frames = confusion[0][0] + confusion[1][1], confusion.sum()
    assert np.float32(trace) / np.float32(frames) != correctly_rounded_float32(trace, frames)
    assert result["accuracy"] == correctly_rounded_float32(trace, frames)


def test_streaming_dense_scores_past_2_24_pixels_are_exact():
    batch, times, extra, confusion = _large_confusion()
    accumulator = S.dense(num_classes=2)
    as_maps = lambda pair: tuple(x.reshape(1, 1, -1) for x in pair)  # noqa: E731
    result = accumulator.compute(_doubled(accumulator, as_maps(batch), times, as_maps(extra)))
    want = _exact_class_scores(confusion)
    trace, frames = confusion[0][0] + confusion[1][1], confusion.sum()
    assert result["pixel_accuracy"] == correctly_rounded_float32(trace, frames)
    np.testing.assert_array_equal(result["iou"], want["iou"])
    np.testing.assert_array_equal(result["dice"], want["f1"])


def test_streaming_fixed_point_means_are_rounded_once():
    """The sum of per-video edit scores (in 2**-24 units) over the videos, correctly rounded:
    rounding the sum to float32 first gave 0.45234007 for 197,314,168 / (26 * 2**24)."""
    ticks, videos = 197_314_168, 26
    accumulator = S.segmentation()
    state = accumulator.init()._replace(
        edit_sum=counting.add(counting.zeros(), ticks),
        videos=counting.add(counting.zeros(), videos),
    )
    edit = accumulator.compute(state)["edit"]
    assert edit == correctly_rounded_float32(ticks, videos * 2**24) == np.float32(0.45234004)


# ------------------------------------------------------------------------------------------
# The division of every backend but the CPU: numerics.rounded_quotient.


def _bitwise_equal(got, want):
    got, want = np.asarray(got), np.asarray(want)
    same = (got.view(np.int32) == want.view(np.int32)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), (got[~same][:5], want[~same][:5])


def _float32_pairs(rng, n):
    """Counts below 2**24, small counts, and arbitrary bit patterns (every exponent, sign,
    zero, subnormal, infinity and NaN among them)."""
    counts = rng.integers(0, 1 << 24, (2, n))
    small = rng.integers(0, 300, (2, n))
    patterns = rng.integers(0, 1 << 32, (2, n), dtype=np.uint64).astype(np.uint32)
    a = np.concatenate([counts[0], small[0]]).astype(np.float32)
    b = np.concatenate([np.maximum(counts[1], 1), np.maximum(small[1], 1)]).astype(np.float32)
    return np.concatenate([a, patterns[0].view(np.float32)]), np.concatenate(
        [b, patterns[1].view(np.float32)]
    )


def test_rounded_quotient_is_the_ieee_quotient_bit_for_bit():
    """Equal, bit for bit, to XLA:CPU's IEEE 754 division, and to numpy's where operands and
    quotient are normal numbers (XLA:CPU reads and writes subnormals as zeros, and so does
    the fallback to the backend's division)."""
    a, b = _float32_pairs(np.random.default_rng(0), 200_000)
    got = jax.jit(numerics.rounded_quotient)(a, b)
    _bitwise_equal(got, jax.jit(jnp.divide)(a, b))
    with np.errstate(all="ignore"):
        want = a / b
    tiny = np.finfo(np.float32).tiny
    normal = np.all([np.isfinite(x) & (np.abs(x) >= tiny) for x in (a, b, want)], axis=0)
    _bitwise_equal(np.asarray(got)[normal], want[normal])


def test_rounded_quotient_gives_the_quotients_an_h200_rounded_wrongly():
    """Quotients XLA:GPU's division gave 1 ulp off on an H200 (edit scores, top-k)."""
    a = np.array([5, 6, 3, 9, 9, 5, 9], np.float32)
    b = np.array([6, 7, 7, 10, 11, 200, 200], np.float32)
    want = [correctly_rounded_float32(int(x), int(y)) for x, y in zip(a, b)]
    _bitwise_equal(jax.jit(numerics.rounded_quotient)(a, b), np.array(want, np.float32))


def test_rounded_quotient_has_the_gradient_of_division():
    a, b = jnp.float32(5.0), jnp.float32(6.0)
    got = jax.grad(numerics.rounded_quotient, argnums=(0, 1))(a, b)
    want = jax.grad(jnp.divide, argnums=(0, 1))(a, b)
    _bitwise_equal(jnp.stack(got), jnp.stack(want))


def test_divide_takes_the_division_of_the_operands_dtype():
    """float32 operands go through the dispatch; float64 and mixed dtypes divide as XLA."""
    x = numerics.divide(jnp.float32(5.0), jnp.float32(6.0))
    assert x.dtype == jnp.float32 and float(x) == float(np.float32(5) / np.float32(6))
    assert numerics.divide(jnp.arange(3.0), jnp.float32(2.0)).tolist() == [0.0, 0.5, 1.0]
