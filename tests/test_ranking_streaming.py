"""Tests of the streaming accumulators: dense, top-k, retrieval, per-frame AP and detection."""

from __future__ import annotations

import _reference_ranking as ref
import jax
import numpy as np
import pytest
from test_detection import C, V, _random_dataset, to_tables

from jaxseg import metrics as M
from jaxseg import streaming as S

RNG = np.random.default_rng(0)


def _run(acc, batches, **kw):
    """init -> jitted update per batch -> compute, and the same split across two merged states."""
    update = jax.jit(acc.update)
    state = acc.init()
    for batch in batches:
        state = update(state, *batch, **kw)
    half = len(batches) // 2
    a, b = acc.init(), acc.init()
    for batch in batches[:half]:
        a = update(a, *batch, **kw)
    for batch in batches[half:]:
        b = update(b, *batch, **kw)
    compute = jax.jit(acc.compute)
    return compute(state), compute(jax.jit(acc.merge)(a, b))


def _same(x, y):
    for key in x:
        np.testing.assert_allclose(np.asarray(x[key]), np.asarray(y[key]), atol=1e-6, err_msg=key)


def test_dense_pools_like_the_reference():
    batches = []
    for _ in range(4):
        t = RNG.integers(0, 4, (2, 16, 16)).astype(np.uint8)
        t[RNG.random(t.shape) < 0.2] = 255
        batches.append((t, RNG.integers(0, 4, (2, 16, 16)).astype(np.uint8)))
    result, merged = _run(S.dense(num_classes=6, ignore_index=255), batches)
    _same(result, merged)
    want = ref.dense_scores(
        np.stack([b[0] for b in batches]), np.stack([b[1] for b in batches]), 6, ignore_index=255
    )
    assert float(result["pixel_accuracy"]) == pytest.approx(want["pixel_acc"], abs=1e-6)
    np.testing.assert_allclose(np.asarray(result["iou"]), want["iou"], atol=1e-6)
    np.testing.assert_allclose(np.asarray(result["dice"]), want["dice"], atol=1e-6)
    assert float(result["miou"]) == pytest.approx(want["miou"], abs=1e-6)
    empty = S.dense(num_classes=2)
    assert np.isnan(float(jax.jit(empty.compute)(empty.init())["miou"]))


def test_top_k_and_retrieval_equal_the_functions():
    scores = np.round(RNG.random((4, 30, 9)) * 3).astype(np.float32)
    targets = RNG.integers(0, 9, (4, 30)).astype(np.int32)
    result, merged = _run(S.top_k(k=(1, 3)), list(zip(targets, scores, strict=True)))
    _same(result, merged)
    direct = jax.jit(M.top_k_accuracy, static_argnames="k")(
        targets.reshape(-1), scores.reshape(-1, 9), k=(1, 3)
    )
    np.testing.assert_allclose(np.asarray(result["accuracy"]), np.asarray(direct), atol=1e-6)

    sim = np.round(RNG.random((4, 25, 40)) * 5).astype(np.float32)
    result, merged = _run(S.retrieval(num_items=40, k=(1, 5), ties="average"), [(s,) for s in sim])
    _same(result, merged)
    ranks = np.asarray(jax.jit(M.retrieval_ranks, static_argnames="ties")(sim, ties="average"))
    ranks = ranks.reshape(-1)
    want = ref.retrieval_summary(ranks, ks=(1, 5))
    np.testing.assert_allclose(np.asarray(result["recall"]), [want["R1"], want["R5"]], atol=1e-6)
    assert float(result["median_rank"]) == pytest.approx(want["MedianR"], abs=1e-6)
    assert float(result["mean_rank"]) == pytest.approx(want["MeanR"], abs=1e-4)
    assert float(result["mean_reciprocal_rank"]) == pytest.approx(want["MRR"], abs=1e-6)


def _frames(num_batches=4, n=40, c=5, grid=None):
    batches = []
    for _ in range(num_batches):
        targets = np.eye(c, dtype=np.uint8)[RNG.integers(0, c, n)]
        scores = RNG.random((n, c)).astype(np.float32)
        if grid:
            scores = (np.floor(scores * grid) / grid).astype(np.float32)
        batches.append((targets, scores))
    return batches


def test_top_k_without_classes_counts_misses_like_the_function():
    """Scores of no class (``[N, 0]``) raised ZeroDivisionError in the update; every valid
    row is a miss, as in top_k_accuracy (a target names no class)."""
    targets, scores = np.array([[0, 1], [2, 0]]), np.zeros((2, 2, 0), np.float32)
    accumulator = S.top_k(k=(1, 5))
    result = accumulator.compute(accumulator.update(accumulator.init(), targets, scores))
    assert int(result["rows"]) == 4
    np.testing.assert_array_equal(result["accuracy"], [0.0, 0.0])
    np.testing.assert_array_equal(M.top_k_accuracy(targets, scores, k=(1, 5)), [[0, 0], [0, 0]])


def test_frame_ap_exact_equals_direct_and_reports_overflow():
    batches = _frames()
    kw = dict(num_classes=5, background=(0,), ambiguous=(4,))
    result, merged = _run(S.frame_average_precision(capacity=200, **kw), batches)
    _same(result, merged)
    targets = np.concatenate([b[0] for b in batches])
    scores = np.concatenate([b[1] for b in batches])
    for key, metric in (("ap", ref.step_ap), ("cap", ref.calibrated_ap)):
        per_class, mean = ref.per_class(metric, targets, scores, (0,), (4,))
        np.testing.assert_allclose(np.asarray(result[key]), per_class, atol=1e-6)
        assert float(result["m" + key]) == pytest.approx(mean, abs=1e-6)
    assert float(result["overflow"]) == 0
    small, _ = _run(S.frame_average_precision(capacity=50, **kw), batches)
    assert float(small["overflow"]) == float(small["frames"]) - 50 > 0
    assert np.isnan(float(small["map"])) and np.isnan(np.asarray(small["ap"])).all()


@pytest.mark.parametrize("interpolation", ["all_point", "11point"])
def test_frame_ap_with_ties_follows_the_data_order_like_the_batch_metric(interpolation):
    """Tied scores rank in arrival order, as in the batch metric (the reference's stable
    sort): updates and merges in data order give the batch value bit for bit."""
    batches = _frames(grid=4)  # many ties
    accumulator = S.frame_average_precision(
        num_classes=5, capacity=200, interpolation=interpolation
    )
    result, merged = _run(accumulator, batches)
    targets = np.concatenate([b[0] for b in batches])
    scores = np.concatenate([b[1] for b in batches])
    batch = M.mean_average_precision(targets, scores, interpolation=interpolation)
    for got in (result, merged):
        np.testing.assert_array_equal(got["ap"], batch.per_class)
        np.testing.assert_array_equal(got["map"], batch.mean)


def test_frame_ap_refuses_float_targets_like_the_batch_metric():
    """Soft float targets (0.05 / 0.9) were taken as nonzero = positive: every frame a
    positive of every class, AP 1.0. They raise TypeError naming targets, as in
    mean_average_precision."""
    targets = np.array([[0.9, 0.05], [0.05, 0.9]], np.float32)
    scores = np.array([[0.9, 0.1], [0.8, 0.7]], np.float32)
    for accumulator in (
        S.frame_average_precision(num_classes=2, capacity=4),
        S.frame_average_precision(num_classes=2, num_thresholds=4),
    ):
        with pytest.raises(TypeError, match="targets must be bool or integer"):
            accumulator.update(accumulator.init(), targets, scores)
    with pytest.raises(TypeError, match="targets must be bool or integer"):
        M.mean_average_precision(targets, scores)


def test_frame_ap_binned_is_exact_on_the_grid():
    batches = _frames(grid=16)  # scores already on the bin grid: binning loses nothing
    result, merged = _run(S.frame_average_precision(num_classes=5, num_thresholds=16), batches)
    _same(result, merged)
    targets = np.concatenate([b[0] for b in batches])
    scores = np.concatenate([b[1] for b in batches])
    for key, metric in (("ap", ref.step_ap), ("cap", ref.calibrated_ap)):
        per_class, _ = ref.per_class(metric, targets, scores)
        np.testing.assert_allclose(np.asarray(result[key]), per_class, atol=1e-6)
    with pytest.raises(ValueError, match="exactly one of capacity"):
        S.frame_average_precision(num_classes=5)


@pytest.mark.parametrize("interpolation", ["11point", "all_point"])
def test_frame_ap_binned_refuses_an_interpolation_it_does_not_compute(interpolation):
    """The binned mode computes the step AP: asked for another interpolation, it returned the
    step AP without a word."""
    with pytest.raises(ValueError, match=f"interpolation='{interpolation}' needs the exact"):
        S.frame_average_precision(num_classes=2, num_thresholds=8, interpolation=interpolation)
    S.frame_average_precision(num_classes=2, capacity=8, interpolation=interpolation)


def test_binned_modes_put_a_score_of_one_in_the_top_bin():
    """The docstrings said the scores were rounded down to multiples of 1 / B, which keeps
    1.0 apart from 0.95 (B = 10); a score of 1 falls in the top bin, as 0.9 does: a
    positive at 1.0 tied with a negative at 0.95 (AP 0.5, not 1.0)."""
    targets, scores = np.array([1, 0]), np.array([1.0, 0.95], np.float32)
    want = ref.step_ap(targets, [0.9, 0.9])
    assert want == 0.5 and ref.step_ap(targets, [1.0, 0.9]) == 1.0
    frames = S.frame_average_precision(num_classes=1, num_thresholds=10)
    state = frames.update(frames.init(), targets[:, None], scores[:, None])
    assert float(frames.compute(state)["map"]) == want
    detections = S.detection(num_classes=1, iou_thresholds=(0.5,), num_thresholds=10)
    state = detections.update(
        detections.init(),
        np.array([[[0.0, 10.0]]]),
        np.array([[0]]),
        np.array([[[0.0, 10.0], [50.0, 60.0]]]),
        np.array([[0, 0]]),
        scores[None],
    )
    # one bin holds the hit and the miss, entering together: precision 1/2 at recall 1
    assert float(detections.compute(state)["map"][0]) == 0.5


@pytest.mark.parametrize("seed", range(4))
def test_dense_means_equal_the_batch_metric_bit_for_bit(seed):
    """Means over classes add in one order for a ``[C]`` row and a ``[B, C]`` batch (XLA's
    sums did not: the streaming mDice was 1 ulp off)."""
    rng = np.random.default_rng(seed)
    targets = rng.integers(0, 5, (3, 5, 7))
    predictions = rng.integers(0, 6, (3, 5, 7))
    targets[rng.random(targets.shape) < 0.2] = 255
    accumulator = S.dense(num_classes=5, ignore_index=255)
    result = accumulator.compute(accumulator.update(accumulator.init(), targets, predictions))
    pooled = [x.reshape(1, 1, -1) for x in (targets, predictions)]
    for key, metric in (("iou", M.iou), ("dice", M.dice)):
        batch = metric(*pooled, num_classes=5, ignore_index=255)
        np.testing.assert_array_equal(result[key], batch.per_class[0])
        assert result["m" + key] == batch.mean[0]


def test_binned_modes_report_scores_without_a_bin():
    """Logits (or NaN) given for scores in [0, 1] were clipped into the end bins: mAP 0.667
    for an exact 0.833, silently. They are counted as overflow now, and results are NaN."""
    accumulator = S.frame_average_precision(num_classes=1, num_thresholds=16)
    for bad in (9.0, -0.5, np.nan):
        scores = np.array([[0.9], [0.8], [bad]], np.float32)
        state = accumulator.update(accumulator.init(), np.array([[1], [0], [1]]), scores)
        result = accumulator.compute(state)
        assert float(result["overflow"]) == 1 and float(result["frames"]) == 3
        assert np.isnan(float(result["map"])) and np.isnan(np.asarray(result["ap"])).all()
    masked = accumulator.update(  # a masked frame may hold anything
        accumulator.init(), np.array([[1], [0]]), np.array([[0.9], [9.0]]), mask=[True, False]
    )
    assert float(accumulator.compute(masked)["map"]) == 1.0
    detections = S.detection(num_classes=1, iou_thresholds=(0.5,), num_thresholds=16)
    state = detections.update(
        detections.init(),
        np.array([[[0.0, 10.0]]]),
        np.array([[0]]),
        np.array([[[0.0, 9.0], [1.0, 10.0]]]),
        np.array([[0, 0]]),
        np.array([[0.9, 3.0]]),
    )
    result = detections.compute(state)
    assert float(result["overflow"]) == 1 and float(result["predictions"]) == 2
    assert np.isnan(float(result["map"][0])) and np.isnan(np.asarray(result["ap"])).all()


@pytest.mark.parametrize("mode", ["capacity", "num_thresholds"])
def test_detection_accumulator_equals_direct(mode):
    gt, pred = _random_dataset(4, 2)
    # Scores distinct, one per bin of 1/512, so the binned mode has no ties within a bin.
    assert len(pred) < 512
    pred = [(v, b, label, np.float32((i + 0.5) / 512)) for i, (v, b, label, _) in enumerate(pred)]
    tables = to_tables(gt, pred)
    gb, gl, gm, pb, pl, ps, pm = tables
    direct = jax.jit(
        lambda *t: M.detection_average_precision(
            *t[:5], num_classes=C, iou_thresholds=(0.3, 0.5), target_mask=t[5], prediction_mask=t[6]
        )
    )(gb, gl, pb, pl, ps, gm, pm)
    size = {"capacity": 1024, "num_thresholds": 512}[mode]
    acc = S.detection(num_classes=C, iou_thresholds=(0.3, 0.5), **{mode: size})
    halves = [tuple(x[: V // 2] for x in tables), tuple(x[V // 2 :] for x in tables)]
    batches = [(h[0], h[1], h[3], h[4], h[5]) for h in halves]
    update = jax.jit(acc.update)
    states = [
        update(acc.init(), *b, target_mask=h[2], prediction_mask=h[6])
        for b, h in zip(batches, halves, strict=True)
    ]
    result = jax.jit(lambda a, b: acc.compute(acc.merge(a, b)))(*states)
    np.testing.assert_allclose(np.asarray(result["ap"]), np.asarray(direct.per_class), atol=1e-6)
    np.testing.assert_allclose(np.asarray(result["map"]), np.asarray(direct.mean), atol=1e-6)
    assert float(result["predictions"]) == len(pred)
    if mode == "capacity":
        tiny = S.detection(num_classes=C, iou_thresholds=(0.3, 0.5), capacity=8)
        run = jax.jit(
            lambda *b: tiny.compute(
                tiny.update(tiny.init(), *b[:5], target_mask=b[5], prediction_mask=b[6])
            )
        )
        out = run(*batches[0], halves[0][2], halves[0][6])
        assert float(out["overflow"]) > 0 and np.isnan(np.asarray(out["map"])).all()


def test_frame_and_detection_counts_are_exact_integers():
    """``frames``, ``predictions`` and ``overflow`` were float32: past 2**24 they were
    rounded. A state of two entries doubled 24 times, plus one entry, counts exactly, in both
    modes (a buffer of one entry overflows by all but one)."""
    frame_rows = (np.array([[1], [0]]), np.array([[0.9], [0.8]], np.float32))
    one_frame = tuple(x[:1] for x in frame_rows)
    boxes = (
        np.array([[[0.0, 10.0]]], np.float32),
        np.array([[0]]),
        np.array([[[0.0, 9.0], [1.0, 10.0]]], np.float32),
        np.array([[0, 0]]),
        np.array([[0.9, 0.4]], np.float32),
    )
    one_box = (*boxes[:2], *(x[:, :1] for x in boxes[2:]))
    thresholds = dict(iou_thresholds=(0.5,))
    cases = [  # accumulator, rows, one more row, the count's key, its buffer's capacity
        (
            S.frame_average_precision(num_classes=1, num_thresholds=16),
            frame_rows,
            one_frame,
            "frames",
            None,
        ),
        (S.frame_average_precision(num_classes=1, capacity=1), frame_rows, one_frame, "frames", 1),
        (
            S.detection(num_classes=1, num_thresholds=16, **thresholds),
            boxes,
            one_box,
            "predictions",
            None,
        ),
        (S.detection(num_classes=1, capacity=1, **thresholds), boxes, one_box, "predictions", 1),
    ]
    entries = 2 * 2**24 + 1
    assert int(np.float32(entries)) != entries
    for acc, rows, one_more, key, capacity in cases:
        state = acc.update(acc.init(), *rows)
        for _ in range(24):
            state = acc.merge(state, state)
        result = acc.compute(acc.update(state, *one_more))
        assert result[key].dtype == result["overflow"].dtype == np.int32, key
        assert int(result[key]) == entries, key
        assert int(result["overflow"]) == (0 if capacity is None else entries - capacity), key


def test_retrieval_queries_past_int32_are_minus_one_not_wrapped():
    """``queries`` summed the histogram's int32 counts: 2**30 queries at each of two ranks
    wrapped to -2**31. It is the exact total, -1 past int32 like every other count."""
    acc = S.retrieval(num_items=2, k=(1,))
    state = acc.update(acc.init(), np.array([[0.9, 0.1], [0.9, 0.1]], np.float32))  # ranks 0, 1
    for _ in range(30):
        state = acc.merge(state, state)
    queries = acc.compute(state)["queries"]
    assert sorted(S.to_int(state.rank_histogram).tolist()) == [0, 0, 0, 2**30, 2**30]
    assert int(queries) == (2**31 if queries.dtype == np.int64 else -1)


def test_retrieval_median_is_exact_past_2_to_the_24_queries():
    """The median was searched in a float32 cumulative count: with 2**24 + 1 queries at each
    of ranks 1 and 2 the counts rounded to 2**24 and the median was 2, not 1.5."""
    acc = S.retrieval(num_items=2, k=(1,))
    ranks_1_and_2 = np.array([[0.9, 0.1], [0.9, 0.1]], np.float32)
    state = acc.update(acc.init(), ranks_1_and_2)
    for _ in range(24):
        state = acc.merge(state, state)
    state = acc.update(state, ranks_1_and_2)
    assert sorted(S.to_int(state.rank_histogram).tolist())[-2:] == [2**24 + 1] * 2
    assert float(acc.compute(state)["median_rank"]) == 1.5


def test_factories_take_a_numpy_array_of_ranks_as_the_functions_do():
    """``k`` / ``ranks`` given as a numpy array were refused by the accumulator factories
    ('k must be a non-empty tuple of positive ints, got array([1, 5])'), while the functions
    took them as the tuple of their items."""
    made = {
        "top_k": S.top_k(k=np.array([1, 5])),
        "retrieval": S.retrieval(num_items=3, k=np.array([1, 2])),
        "grounding": S.grounding(k=np.array([1, 5])),
        "moment_queries": S.moment_queries(ranks=np.array([1, 2])),
    }
    same = {
        "top_k": S.top_k(k=(1, 5)),
        "retrieval": S.retrieval(num_items=3, k=(1, 2)),
        "grounding": S.grounding(k=(1, 5)),
        "moment_queries": S.moment_queries(ranks=(1, 2)),
    }
    for name, accumulator in made.items():
        got = jax.tree.map(np.shape, accumulator.init())
        assert got == jax.tree.map(np.shape, same[name].init()), name
    targets, scores = np.array([2, 0]), np.array([[0.1, 0.5, 0.4], [0.2, 0.5, 0.3]], np.float32)
    for accumulator in (made["top_k"], same["top_k"]):
        state = accumulator.update(accumulator.init(), targets, scores)
        np.testing.assert_array_equal(accumulator.compute(state)["accuracy"], [0.0, 1.0])
    with pytest.raises(ValueError, match="k must be a non-empty tuple"):
        S.top_k(k=np.array([[1, 5]]))
