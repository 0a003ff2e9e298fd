"""Tests of the segmental metrics: edit distance/score, MS-TCN F1 counts and ratios."""

from __future__ import annotations

import functools

import _reference as ref
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _videos import pad_batch, pad_rows, video_specs
from hypothesis import given
from hypothesis import strategies as st

from jaxseg import Evaluator
from jaxseg import metrics as M
from jaxseg import segments as jseg
from jaxseg import streaming as S
from jaxseg._src import edit
from jaxseg._src.f1 import candidate_bound
from jaxseg._src.segmentation import (
    segmentation_statistics,
    static_arguments,
    statistics_from_tables,
    tables_from_words,
)
from jaxseg._src.segments import pair_words

# Exact simple fractions, including 1/3 (a repeating binary fraction) and 1.
OVERLAPS = (0.1, 0.25, 1 / 3, 0.5, 1.0)
SMALL = (2, 3)  # hand batch: (max_target_segments, max_predicted_segments)
RANDOM_SMALL = (32, 24)  # random batches: 32 = one machine word of target segments
HAND_T, BATCH, T_MAX = 16, 16, 3000


@functools.partial(jax.jit, static_argnames=("background", "small"))
def _segmental(targets, predictions, mask, background, small):
    """Every segmental output for one padded batch (one compile per static configuration)."""

    def run(capacities):
        kw = dict(
            mask=mask,
            background=background,
            max_target_segments=capacities[0],
            max_predicted_segments=capacities[1],
        )
        okw = dict(kw, iou_thresholds=OVERLAPS)
        return dict(
            edit_distance=M.edit_distance(targets, predictions, **kw),
            edit_score=M.edit_score(targets, predictions, **kw),
            counts=M.segmental_counts(targets, predictions, **okw),
            legacy=M.segmental_counts(targets, predictions, legacy_asformer_end=True, **okw),
            precision=M.segmental_precision(targets, predictions, **okw),
            recall=M.segmental_recall(targets, predictions, **okw),
            f1=M.segmental_f1(targets, predictions, **okw),
            stats=segmentation_statistics(targets, predictions, **okw),
        )

    return run((None, None)), run(small)


def _row(tree, i):
    return jax.tree.map(lambda x: x[i], tree)


# ------------------------------------------------------------------------------------------
# Hand-computed cases (REFERENCE.md §1.8 and more), with OVERLAPS = (.1, .25, 1/3, .5, 1).

T, F = True, False
# Background is (0,) throughout (the rows without label 0 behave as with no background).
# id, targets, predictions, extra mask, edit distance, edit score,
# (tp, fp, fn) per threshold, (tp, fp, fn) per threshold with the ASFormer end.
HAND = [
    # T = 1, same label: a match; ASFormer's zero-length last segment never matches.
    ("len1_same", [3], [3], None, 0, 1.0, ([1] * 5, [0] * 5, [0] * 5), ([0] * 5, [1] * 5, [1] * 5)),
    ("len1_diff", [3], [4], None, 1, 0.0, ([0] * 5, [1] * 5, [1] * 5), ([0] * 5, [1] * 5, [1] * 5)),
    # Both all background: edit 1.0 (MS-TCN: NaN, kage1020: 0.0), no counts.
    (
        "both_all_bg",
        [0, 0, 0],
        [0, 0, 0],
        None,
        0,
        1.0,
        ([0] * 5, [0] * 5, [0] * 5),
        ([0] * 5, [0] * 5, [0] * 5),
    ),
    # Targets all background, prediction has a segment: every prediction is an FP.
    (
        "gt_all_bg_pred_action",
        [0, 0, 0, 0],
        [0, 1, 1, 0],
        None,
        1,
        0.0,
        ([0] * 5, [1] * 5, [0] * 5),
        ([0] * 5, [1] * 5, [0] * 5),
    ),
    (
        "pred_all_bg",
        [1, 1, 2, 2],
        [0, 0, 0, 0],
        None,
        2,
        0.0,
        ([0] * 5, [0] * 5, [2] * 5),
        ([0] * 5, [0] * 5, [2] * 5),
    ),
    # IoU exactly tau is a TP (>=). The ASFormer end shortens the target to 9 frames.
    (
        "iou_exactly_0.1",
        [1] * 10,
        [1] + [0] * 9,
        None,
        0,
        1.0,
        ([1, 0, 0, 0, 0], [0, 1, 1, 1, 1], [0, 1, 1, 1, 1]),
        ([1, 0, 0, 0, 0], [0, 1, 1, 1, 1], [0, 1, 1, 1, 1]),
    ),
    (
        "iou_1/11_below_0.1",
        [1] * 11,
        [1] + [0] * 10,
        None,
        0,
        1.0,
        ([0] * 5, [1] * 5, [1] * 5),
        ([1, 0, 0, 0, 0], [0, 1, 1, 1, 1], [0, 1, 1, 1, 1]),
    ),
    (
        "iou_exactly_0.25",
        [1] * 4,
        [1, 0, 0, 0],
        None,
        0,
        1.0,
        ([1, 1, 0, 0, 0], [0, 0, 1, 1, 1], [0, 0, 1, 1, 1]),
        ([1, 1, 1, 0, 0], [0, 0, 0, 1, 1], [0, 0, 0, 1, 1]),
    ),
    (
        "iou_exactly_1/3",
        [1, 1, 1, 0],
        [1, 0, 0, 0],
        None,
        0,
        1.0,
        ([1, 1, 1, 0, 0], [0, 0, 0, 1, 1], [0, 0, 0, 1, 1]),
        ([1, 1, 1, 0, 0], [0, 0, 0, 1, 1], [0, 0, 0, 1, 1]),
    ),
    (
        "iou_exactly_0.5",
        [2, 2, 0],
        [2, 0, 0],
        None,
        0,
        1.0,
        ([1, 1, 1, 1, 0], [0, 0, 0, 0, 1], [0, 0, 0, 0, 1]),
        ([1, 1, 1, 1, 0], [0, 0, 0, 0, 1], [0, 0, 0, 0, 1]),
    ),
    (
        "iou_exactly_1",
        [0, 2, 2, 0],
        [0, 2, 2, 0],
        None,
        0,
        1.0,
        ([1] * 5, [0] * 5, [0] * 5),
        ([1] * 5, [0] * 5, [0] * 5),
    ),
    # One prediction ties two same-label targets (IoU 2/7 each): the first index wins, so
    # the second prediction can still take the second target.
    (
        "tie_first_index",
        [1, 1, 1, 1, 0, 1, 1, 1, 1],
        [0, 0, 1, 1, 1, 1, 1, 0, 1],
        None,
        0,
        1.0,
        ([2, 2, 0, 0, 0], [0, 0, 2, 2, 2], [0, 0, 2, 2, 2]),
        ([1, 1, 1, 0, 0], [1, 1, 1, 2, 2], [1, 1, 1, 2, 2]),
    ),
    # Two predictions with the same best target: the second is an FP even though the other
    # target has IoU 1/6 >= 0.1 (no fall-back).
    (
        "no_fall_back",
        [1, 1, 1, 1, 1, 1, 0, 1, 1],
        [1, 1, 0, 1, 1, 1, 1, 1, 0],
        None,
        0,
        1.0,
        ([1, 1, 1, 0, 0], [1, 1, 1, 2, 2], [1, 1, 1, 2, 2]),
        ([1, 1, 1, 0, 0], [1, 1, 1, 2, 2], [1, 1, 1, 2, 2]),
    ),
    # Same label split by background: two target segments, one predicted.
    (
        "same_label_split_by_bg",
        [1, 1, 0, 1, 1],
        [1, 1, 1, 1, 1],
        None,
        1,
        0.5,
        ([1, 1, 1, 0, 0], [0, 0, 0, 1, 1], [1, 1, 1, 2, 2]),
        ([1, 1, 1, 1, 0], [0, 0, 0, 0, 1], [1, 1, 1, 1, 2]),
    ),
    (
        "substitution",
        [1, 1, 2, 2, 3],
        [1, 2, 2, 4, 3],
        None,
        1,
        0.75,
        ([3, 3, 3, 2, 1], [1, 1, 1, 2, 3], [0, 0, 0, 1, 2]),
        ([2, 2, 2, 1, 0], [2, 2, 2, 3, 4], [1, 1, 1, 2, 3]),
    ),
    (
        "swapped",
        [1, 1, 2, 2],
        [2, 2, 1, 1],
        None,
        2,
        0.0,
        ([0] * 5, [2] * 5, [2] * 5),
        ([0] * 5, [2] * 5, [2] * 5),
    ),
    # No valid frame (the analogue of the anchors' T = 0, where they raise).
    (
        "fully_masked",
        [1, 2],
        [2, 1],
        [F, F],
        0,
        1.0,
        ([0] * 5, [0] * 5, [0] * 5),
        ([0] * 5, [0] * 5, [0] * 5),
    ),
    # Masked frames are removed first: the runs on both sides of the gap merge.
    (
        "mask_merges_runs",
        [1, 1, 2, 1, 1],
        [1, 1, 1, 1, 1],
        [T, T, F, T, T],
        0,
        1.0,
        ([1] * 5, [0] * 5, [0] * 5),
        ([1] * 5, [0] * 5, [0] * 5),
    ),
    # Overflow in the small-capacity run (3 target segments > 2).
    (
        "three_targets",
        [1, 2, 3, 3],
        [1, 2, 3, 3],
        None,
        0,
        1.0,
        ([3] * 5, [0] * 5, [0] * 5),
        ([3] * 5, [0] * 5, [0] * 5),
    ),
    # Overflow of the predictions only in the small-capacity run (8 > 3).
    (
        "eight_predictions",
        [1] * 8,
        [1, 2, 1, 2, 1, 2, 1, 2],
        None,
        7,
        0.125,
        ([1, 0, 0, 0, 0], [7, 8, 8, 8, 8], [0, 1, 1, 1, 1]),
        ([1, 0, 0, 0, 0], [7, 8, 8, 8, 8], [0, 1, 1, 1, 1]),
    ),
    (
        "full_length",
        [1] * 8 + [2] * 8,
        [1] * 7 + [2] * 9,
        None,
        0,
        1.0,
        ([2, 2, 2, 2, 0], [0, 0, 0, 0, 2], [0, 0, 0, 0, 2]),
        ([2, 2, 2, 2, 0], [0, 0, 0, 0, 2], [0, 0, 0, 0, 2]),
    ),
]
HAND_IDS = [c[0] for c in HAND]


BG = (0,)


@functools.cache
def _hand_results():
    (targets, predictions), mask = pad_rows([c[1:3] for c in HAND], HAND_T, [c[3] for c in HAND])
    full, small = jax.device_get(_segmental(targets, predictions, mask, BG, SMALL))
    return {c[0]: (_row(full, i), _row(small, i)) for i, c in enumerate(HAND)}


@pytest.mark.parametrize("case", HAND, ids=HAND_IDS)
def test_hand_case_reference(case):
    """The numpy reference reproduces every hand-computed value (it is then trusted)."""
    _, y, p, mask, distance, score, counts, legacy = case
    assert ref.edit_distance(y, p, mask, BG) == distance
    assert ref.edit_score(y, p, mask, BG) == pytest.approx(score, abs=1e-15)
    got = ref.segmental_counts(y, p, OVERLAPS, mask, BG)
    assert [g.tolist() for g in got] == [list(c) for c in counts]
    got = ref.segmental_counts(y, p, OVERLAPS, mask, BG, asformer_end=True)
    assert [g.tolist() for g in got] == [list(c) for c in legacy]


@pytest.mark.parametrize("case", HAND, ids=HAND_IDS)
def test_hand_case(case):
    name, y, p, mask, distance, score, counts, legacy = case
    full, small = _hand_results()[name]
    assert full["edit_distance"] == distance
    assert full["edit_score"] == np.float32(score)
    for got, want in zip(full["counts"], counts, strict=True):
        np.testing.assert_array_equal(got, np.array(want, np.float32))
    for got, want in zip(full["legacy"], legacy, strict=True):
        np.testing.assert_array_equal(got, np.array(want, np.float32))
    precision, recall, f1 = ref.segmental_scores(*counts)
    np.testing.assert_allclose(full["precision"], precision, rtol=1e-6)
    np.testing.assert_allclose(full["recall"], recall, rtol=1e-6)
    np.testing.assert_allclose(full["f1"], f1, rtol=1e-6)
    stats = full["stats"]
    valid = [True] * len(y) if mask is None else mask
    assert stats.frames == sum(valid)
    assert stats.correct == sum(a == b for a, b, v in zip(y, p, valid, strict=True) if v)
    assert stats.edit_distance == distance
    n_y = len(ref.segments(y, mask, BG))
    n_p = len(ref.segments(p, mask, BG))
    assert (stats.target_segments, stats.predicted_segments) == (n_y, n_p)
    for got, want in zip((stats.tp, stats.fp, stats.fn), counts, strict=True):
        np.testing.assert_array_equal(got, want)
    assert not stats.overflow
    for x in (stats.frames, stats.tp, stats.overflow):
        assert x.dtype in (np.int32, np.bool_)
    # Small capacities: NaN exactly where a side overflows, identical values elsewhere.
    overflow = n_y > SMALL[0] or n_p > SMALL[1]
    assert small["stats"].overflow == overflow
    assert (small["stats"].target_segments, small["stats"].predicted_segments) == (n_y, n_p)
    for key in ("edit_distance", "edit_score", "counts", "legacy", "precision", "recall", "f1"):
        for got, want in zip(jax.tree.leaves(small[key]), jax.tree.leaves(full[key]), strict=True):
            if overflow:
                assert np.isnan(got).all(), key
            else:
                np.testing.assert_array_equal(got, want)


def test_hand_overflow_cases_exist():
    """The small-capacity run above does see overflows on both sides."""
    sides = {
        (len(ref.segments(c[1], c[3], BG)) > SMALL[0], len(ref.segments(c[2], c[3], BG)) > SMALL[1])
        for c in HAND
    }
    assert {(True, False), (False, True), (False, False)} <= sides


def test_mixed_integer_dtypes():
    """uint8 targets with int32 predictions (e.g. labels read from disk vs an argmax)."""
    y = np.array([[1, 1, 0, 2, 2, 2]], np.uint8)
    p = np.array([[1, 0, 0, 2, 2, 3]], np.int32)
    stats = jax.jit(functools.partial(segmentation_statistics, background=(0,)))(y, p)
    assert int(stats.correct[0]) == 4 and int(stats.edit_distance[0]) == 1
    np.testing.assert_array_equal(
        (stats.tp[0], stats.fp[0], stats.fn[0]),
        ref.segmental_counts(y[0], p[0], (0.1, 0.25, 0.5), None, (0,)),
    )


# ------------------------------------------------------------------------------------------
# Bad input.


def test_errors_name_the_argument():
    y = np.array([1, 2, 3], np.int32)
    with pytest.raises(TypeError, match="predictions"):
        M.edit_score(y, np.array([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match="targets"):
        M.segmental_counts(y, np.array([1, 2], np.int32))
    with pytest.raises(ValueError, match="mask"):
        M.segmental_f1(y, y, mask=np.array([True, False]))
    with pytest.raises(ValueError, match="iou_thresholds"):
        M.segmental_counts(y, y, iou_thresholds=(0.0,))
    with pytest.raises(ValueError, match="iou_thresholds"):
        M.segmental_counts(y, y, iou_thresholds=(1.5,))
    with pytest.raises(ValueError, match="iou_thresholds"):
        M.segmental_counts(y, y, iou_thresholds=(0.123456789,))
    # Falsy values once skipped the check and gave empty counts.
    for empty in (0, False, (), None):
        error = TypeError if empty is False else ValueError  # a bool is no threshold
        with pytest.raises(error, match="iou_thresholds"):
            M.segmental_f1(y, y, iou_thresholds=empty)
        with pytest.raises(error, match="iou_thresholds"):
            segmentation_statistics(y, y, iou_thresholds=empty)
    with pytest.raises(ValueError, match="max_target_segments"):
        M.edit_distance(y, y, max_target_segments=0)
    with pytest.raises(TypeError, match="max_predicted_segments"):
        M.edit_distance(y, y, max_predicted_segments=2.5)


# ------------------------------------------------------------------------------------------
# The reference's vectorised DP equals the plain one.


def test_reference_levenshtein_rows_equals_plain_dp():
    rng = np.random.default_rng(0)
    for _ in range(300):
        a = rng.integers(0, 3, rng.integers(0, 12))
        b = rng.integers(0, 3, rng.integers(0, 12))
        assert ref.levenshtein_rows(a, b) == ref.levenshtein(a, b)


# ------------------------------------------------------------------------------------------
# Parity with the reference on random padded batches [16, 3000].


@jax.jit
def _random_statistics(targets, predictions, mask):
    """Statistics of a random batch: MS-TCN and ASFormer ends, exact and small capacities."""
    kw = dict(mask=mask, iou_thresholds=OVERLAPS, background=(0,))
    small = dict(max_target_segments=RANDOM_SMALL[0], max_predicted_segments=RANDOM_SMALL[1])
    return (
        segmentation_statistics(targets, predictions, **kw),
        segmentation_statistics(targets, predictions, legacy_asformer_end=True, **kw),
        segmentation_statistics(targets, predictions, **kw, **small),
    )


@given(
    specs=st.lists(video_specs(T_MAX), min_size=BATCH, max_size=BATCH),
    shifted=st.lists(st.booleans(), min_size=BATCH, max_size=BATCH),
)
def test_matches_reference(specs, shifted):
    """Background is (0,); rows ``shifted`` by +1 have no background label at all.

    The public wrappers (edit score, ratios, NaN on overflow) are thin functions of these
    statistics, checked on the hand cases, the golden set and the contract test; compiling
    them here too would multiply the compile time.
    """
    targets, predictions, mask, _ = pad_batch(specs, T_MAX)
    offset = np.array(shifted, np.int32)[:, None]
    targets, predictions = targets + offset, predictions + offset
    stats, legacy, small = (
        _row_all(x) for x in jax.device_get(_random_statistics(targets, predictions, mask))
    )
    for i in range(BATCH):
        y, p, m = targets[i], predictions[i], mask[i]
        n_y, n_p = len(ref.segments(y, m, BG)), len(ref.segments(p, m, BG))
        distance = ref.edit_distance(y, p, m, BG)
        counts = ref.segmental_counts(y, p, OVERLAPS, m, BG)
        got = stats[i]
        assert got.frames == m.sum() and got.correct == np.sum((y == p) & m)
        assert (got.target_segments, got.predicted_segments) == (n_y, n_p), specs[i]
        assert got.edit_distance == distance and not got.overflow, specs[i]
        np.testing.assert_array_equal((got.tp, got.fp, got.fn), counts, err_msg=str(specs[i]))
        np.testing.assert_array_equal(
            (legacy[i].tp, legacy[i].fp, legacy[i].fn),
            ref.segmental_counts(y, p, OVERLAPS, m, BG, asformer_end=True),
            err_msg=str(specs[i]),
        )
        # Capacities (32, 24): overflow flagged with the true counts, exact values otherwise
        # (32 target segments = one machine word: the bit-parallel edit distance).
        overflow = n_y > RANDOM_SMALL[0] or n_p > RANDOM_SMALL[1]
        assert small[i].overflow == overflow, specs[i]
        assert (small[i].target_segments, small[i].predicted_segments) == (n_y, n_p)
        if not overflow:
            for a, b in zip(small[i], got, strict=True):
                np.testing.assert_array_equal(a, b, err_msg=str(specs[i]))


def _row_all(stats):
    return [jax.tree.map(lambda x, i=i: x[i], stats) for i in range(BATCH)]


@functools.partial(jax.jit, static_argnames=("background", "legacy"))
def _table_statistics(targets, predictions, lengths, *, background, legacy):
    """The Evaluator's statistics of prefix rows: segment tables and their candidates."""
    T = targets.shape[-1]
    static = static_arguments(T, OVERLAPS, background, None, None, legacy)
    capacities = dict(target_capacity=T, prediction_capacity=T, candidate_capacity=T)

    def one(t, p, n):
        words = pair_words(t, p, n, background)
        tables = tables_from_words(t, p, n, words, **capacities, contiguous=not background)
        return statistics_from_tables(
            n, words, *tables, thresholds=static["thresholds"], legacy_asformer_end=legacy
        )

    return jax.vmap(one)(targets, predictions, lengths)


@given(
    specs=st.lists(video_specs(T_MAX), min_size=BATCH, max_size=BATCH),
    background=st.sampled_from([(), BG]),
    legacy=st.booleans(),
)
def test_the_evaluators_tables_match_like_the_reference(specs, background, legacy):
    # The matching from tables (the Evaluator's rows, all in one step of the loop) against
    # the reference, prefix rows (the Evaluator's padding) with and without background.
    targets, predictions, _, videos = pad_batch(specs, T_MAX)
    lengths = np.array([len(y) for y, _, _ in videos], np.int32)
    got = _row_all(
        jax.device_get(
            _table_statistics(targets, predictions, lengths, background=background, legacy=legacy)
        )
    )
    for i, n in enumerate(lengths):
        y, p, m = targets[i], predictions[i], np.arange(T_MAX) < n
        counts = ref.segmental_counts(y, p, OVERLAPS, m, background, asformer_end=legacy)
        np.testing.assert_array_equal((got[i].tp, got[i].fp, got[i].fn), counts, str(specs[i]))
        assert got[i].edit_distance == ref.edit_distance(y, p, m, background), specs[i]


def test_float32_tie_is_settled_exactly():
    # One prediction with two same-label targets whose IoUs 2^25 / U and (2^25 + 1) / U
    # (U = 2^26 + 1) round to the same float32 (0.5): only the second reaches tau = 0.5, so
    # picking the earlier target on the float tie would lose the TP.
    from jaxseg._src.f1 import _Best, _closed_groups, _new_true_positives

    half, union = 1 << 25, (1 << 26) + 1
    assert np.float32(half / union) == np.float32((half + 1) / union)
    rows = _Best(
        *(jnp.array(x, jnp.int32) for x in ([0, 0], [0, 1], [half, half + 1], [union] * 2))
    )
    none = _Best(*(jnp.array(x, jnp.int32) for x in (-1, -1, 0, 1)))
    _, _, last_group = _closed_groups(none, rows, bound=union)
    assert int(last_group.target) == 1
    closed = jax.tree_util.tree_map(lambda x: x[None], last_group)
    tp, _ = _new_true_positives(
        closed, jnp.ones(1, bool), jnp.full(1, -1, jnp.int32), ((1, 2),), bound=union
    )
    assert tp.tolist() == [1]


@pytest.mark.parametrize("bound", [1, 7, 46340, 46341, 1 << 20, (1 << 31) - 1])
def test_products_below_a_bound_compare_as_the_exact_products(bound):
    # Under a bound whose square is below 2**31 the products are int32 multiplications,
    # above it two-word products: the same signs as exact integers, the bound itself included.
    from jaxseg._src.numerics import compare_products

    rng = np.random.default_rng(bound % 1000)
    a, b, c, d = rng.integers(0, bound + 1, (4, 2000), dtype=np.int64)
    a[:4], b[:4], c[:4], d[:4] = [bound, bound, 0, 1], [bound, 1, 0, bound], [bound] * 4, [1] * 4
    want = np.sign(a * b - c * d)  # int64: exact below 2**62
    args = [jnp.asarray(x, jnp.int32) for x in (a, b, c, d)]
    np.testing.assert_array_equal(compare_products(*args, bound=bound), want)
    np.testing.assert_array_equal(compare_products(*args), want)


def _group_best_reference(owner, in_use, overlapping, inter, union):
    """numpy/Fraction: whether each overlapping row is the first of highest inter / union
    among the in-use rows of its owner (one row ``[M]``)."""
    from fractions import Fraction

    best = np.zeros(len(owner), bool)
    contenders = {}
    for i in np.flatnonzero(in_use & overlapping):
        contenders.setdefault(int(owner[i]), []).append(i)
    for rows in contenders.values():
        ratios = [Fraction(int(inter[i]), int(union[i])) for i in rows]
        best[rows[ratios.index(max(ratios))]] = True
    return best


def _candidate_rows(rng, rows, width, longest):
    """Random candidate tables: owners in runs of 1..``longest`` rows, IoUs with exact ties
    (1/2 = 2/4) and float32 ties (2^25 / U against (2^25 + 1) / U)."""
    owner = np.zeros((rows, width), np.int32)
    for r in range(rows):
        sizes = rng.integers(1, longest + 1, width)
        owner[r] = np.repeat(np.arange(width), sizes)[:width]
    in_use = np.arange(width)[None, :] < rng.integers(0, width + 1, (rows, 1))
    overlapping = in_use & (rng.random((rows, width)) < 0.9)
    union = rng.integers(1, 9, (rows, width)).astype(np.int64)
    inter = rng.integers(0, union + 1)
    big = rng.random((rows, width)) < 0.2
    union[big] = (1 << 26) + 1
    inter[big] = (1 << 25) + rng.integers(0, 2, big.sum())
    return owner, in_use, overlapping, inter.astype(np.int32), union.astype(np.int32)


@pytest.mark.parametrize("chunk", [1, 7, 40])
def test_best_pair_of_each_prediction(chunk):
    # The segmented scan finds each prediction's first pair of highest IoU, exactly (float32
    # ties included), whatever the chunks its rows are cut into: the group left open at the
    # end of a chunk goes on into the next.
    from jaxseg._src.f1 import _NO_OWNER, _Best, _closed_groups

    closed_groups = jax.jit(functools.partial(_closed_groups, bound=(1 << 26) + 1))
    for longest in (1, 2, 4, 9, 40):
        rng = np.random.default_rng(longest)
        for owner, in_use, overlapping, inter, union in zip(*_candidate_rows(rng, 6, 40, longest)):
            overlapping = overlapping & (inter > 0)  # a candidate overlaps by a frame or more
            want = _group_best_reference(owner, in_use, overlapping, inter, union)
            rows = _Best(
                np.where(in_use, owner, _NO_OWNER).astype(np.int32),
                np.arange(40, dtype=np.int32),  # a pair's target: its row, to name it
                np.where(overlapping, inter, 0).astype(np.int32),
                np.where(overlapping, union, 1).astype(np.int32),
            )
            group = _Best(*(np.int32(x) for x in (-1, -1, 0, 1)))
            best = {}
            for start in range(0, 40, chunk):
                part = _Best(*(x[start : start + chunk] for x in rows))
                bests, closes, group = closed_groups(group, part)
                for row, close in zip(zip(*bests), closes):
                    if close:
                        best[int(row[0])] = (int(row[1]), int(row[2]))
            best[int(group.owner)] = (int(group.target), int(group.inter))
            got = np.zeros(40, bool)
            for target, overlap in best.values():
                got[target] = overlap > 0
            np.testing.assert_array_equal(got, want, err_msg=f"longest {longest}, chunk {chunk}")


def test_new_true_positives_count_each_target_once_across_chunks():
    # The best targets of successive predictions never decrease; a target is counted once,
    # at the first best that reaches the threshold, also when its bests span two chunks.
    from jaxseg._src.f1 import _Best, _new_true_positives

    targets = np.array([0, 0, 1, 1, 1, 3, 4, 4, 6], np.int32)
    inter = np.array([1, 3, 1, 2, 3, 1, 3, 3, 2], np.int32)
    closes = np.array([1, 1, 1, 0, 1, 1, 1, 1, 1], bool)
    thresholds = ((1, 2), (3, 4))  # of a union of 4 frames: inter >= 2, inter >= 3
    reached = [
        {t for t, i, c in zip(targets, inter, closes) if c and i * d >= n * 4}
        for n, d in thresholds
    ]
    tp, last = np.zeros(2, np.int32), np.full(2, -1, np.int32)
    for part in (slice(0, 4), slice(4, 9)):
        bests = _Best(targets[part] * 0, targets[part], inter[part], np.full_like(inter[part], 4))
        new, last = _new_true_positives(bests, closes[part], last, thresholds, bound=16)
        tp = tp + np.asarray(new)
    assert tp.tolist() == [len(r) for r in reached] == [4, 3]


def _with_segments(rng, count, length, labels=4):
    """int32 ``[length]`` labels of exactly ``count`` runs, cut at random frames."""
    cuts = np.sort(rng.choice(np.arange(1, length), count - 1, replace=False))
    steps = rng.integers(1, labels, count)  # each run's label differs from the one before
    run_labels = np.cumsum(steps) % labels + 1
    return np.repeat(run_labels, np.diff(np.concatenate([[0], cuts, [length]]))).astype(np.int32)


@pytest.mark.parametrize(
    "target_segments, predicted_segments",
    [(5, 500), (128, 1024), (129, 500), (500, 5), (5, 1025)],
)
def test_many_more_segments_on_one_side_are_exact(target_segments, predicted_segments):
    # Over- and under-segmented predictions, beside sequences of few segments: the loops run
    # as many candidate chunks and pattern blocks as the largest needs, and no value changes.
    T = 3000
    rng = np.random.default_rng(target_segments + predicted_segments)
    counts = [(target_segments, predicted_segments), (3, 40), (target_segments // 2 + 1, 2)]
    targets = np.stack([_with_segments(rng, n_t, T) for n_t, _ in counts])
    predictions = np.stack([_with_segments(rng, n_p, T) for _, n_p in counts])
    got = segmentation_statistics(targets, predictions, iou_thresholds=OVERLAPS)
    for i, (y, p) in enumerate(zip(targets, predictions)):
        m = np.ones(T, bool)
        assert (int(got.target_segments[i]), int(got.predicted_segments[i])) == counts[i]
        assert int(got.edit_distance[i]) == ref.edit_distance(y, p, m) and not got.overflow[i]
        tp, fp, fn = ref.segmental_counts(y, p, OVERLAPS, m)
        np.testing.assert_array_equal((got.tp[i], got.fp[i], got.fn[i]), (tp, fp, fn))


def test_a_large_batch_matches_its_candidates_in_narrow_steps_exactly():
    # 1100 sequences: the matching visits 16 candidates of each per loop step
    # (batching.MATCHING_ROWS), so a sequence of up to ~100 candidates (two labels, up to 120
    # segments a side) takes several steps and its predictions' groups cross the steps'
    # edges; no count changes.
    rng = np.random.default_rng(11)
    T, B = 300, 1100
    counts = rng.integers(1, 120, (B, 2))
    targets = np.stack([_with_segments(rng, n_t, T, labels=2) for n_t, _ in counts])
    predictions = np.stack([_with_segments(rng, n_p, T, labels=2) for _, n_p in counts])
    lengths = rng.integers(T // 2, T + 1, B)
    mask = np.arange(T) < lengths[:, None]
    got = jax.jit(segmentation_statistics, static_argnames="iou_thresholds")(
        targets, predictions, mask=mask, iou_thresholds=OVERLAPS
    )
    for i in range(B):
        tp, fp, fn = ref.segmental_counts(targets[i], predictions[i], OVERLAPS, mask[i])
        np.testing.assert_array_equal((got.tp[i], got.fp[i], got.fn[i]), (tp, fp, fn))


def test_many_target_segments():
    # 300 target segments: the distinct targets are counted with a scatter (more than 256).
    rng = np.random.default_rng(4)
    targets = np.repeat(np.arange(300) % 3, 7)
    predictions = np.where(rng.random(targets.size) < 0.15, 5, targets)
    predictions[rng.integers(0, targets.size, 40)] = 1
    stats = segmentation_statistics(targets[None], predictions[None], iou_thresholds=OVERLAPS)
    tp, fp, fn = ref.segmental_counts(targets, predictions, OVERLAPS)
    np.testing.assert_array_equal(stats.tp[0], tp)
    np.testing.assert_array_equal(stats.fp[0], fp)
    np.testing.assert_array_equal(stats.fn[0], fn)
    assert 0 < tp[-1] < tp[0] and stats.edit_distance[0] == ref.edit_distance(targets, predictions)


@pytest.mark.parametrize("words", [1, 2, 3, 28, 31, 32, 33, 40, 188, 1024, 1025, 1100])
def test_multi_word_add_carries_like_integers(words):
    # Up to 32 words: carries from one integer addition; more: groups of 32 words, then
    # groups of groups (beyond 1024 words).
    rng = np.random.default_rng(words)
    a = rng.integers(0, 1 << 32, (64, words), dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 1 << 32, (64, words), dtype=np.uint64).astype(np.uint32)
    a[::2][rng.random((32, words)) < 0.6] = 0xFFFFFFFF  # long chains of carried-through words
    b[1::4], a[1::4, :-1] = 0, 0xFFFFFFFF
    b[1::4, 0] = 1  # a carry through every word
    got = np.asarray(jax.vmap(edit._add)(a, b))
    for row_a, row_b, row_got in zip(a, b, got):
        total = (_as_integer(row_a) + _as_integer(row_b)) % (1 << (32 * words))
        assert _as_integer(row_got) == total


def _as_integer(words):
    return sum(int(w) << (32 * i) for i, w in enumerate(words))


@pytest.mark.parametrize("predicted", [900, 1100])
def test_edit_distance_with_hundreds_of_predicted_segments(predicted):
    # The predicted labels are the bit pattern: 29 words (one group of carries) or 35 (two).
    rng = np.random.default_rng(predicted)
    target = rng.integers(0, 6, 40).astype(np.int32)
    prediction = rng.integers(0, 6, predicted).astype(np.int32)
    got = jax.jit(edit.levenshtein)(target, 40, prediction, predicted)
    assert int(got) == ref.levenshtein(target.tolist(), prediction.tolist())


@pytest.mark.parametrize(
    "shape, background",
    [((1712, 6000), ()), ((1712, 6000), (0,)), ((256, 6000), (0,))],
    ids=["breakfast", "breakfast-bg", "few-bg"],
)
def test_the_metrics_of_a_dataset_sized_batch_fit_a_small_scratch_memory(shape, background):
    # XLA:CPU allocates the scratch afresh per call; above glibc's mmap threshold (32 MiB at
    # most) every touched page faults on every call. The loops' steps are sized by the batch
    # (rows_per_step, pattern_rows) to stay below it, and one frame pass serves the three
    # metrics, so they need little more scratch than the statistics alone.
    labels = jax.ShapeDtypeStruct(shape, np.int32)
    lengths = jax.ShapeDtypeStruct(shape[:1], np.int32)

    def scratch(fn):
        def metrics(targets, predictions, lengths):
            mask = jseg.lengths_to_mask(lengths, targets.shape[-1])
            return fn(targets, predictions, mask=mask, background=background)

        compiled = jax.jit(metrics).lower(labels, labels, lengths).compile()
        return compiled.memory_analysis().temp_size_in_bytes

    def three(targets, predictions, mask, background):
        return (
            M.accuracy(targets, predictions, mask=mask),
            M.edit_score(targets, predictions, mask=mask, background=background),
            M.segmental_counts(targets, predictions, mask=mask, background=background),
        )

    together = scratch(three)
    assert together < 32 * 2**20
    assert together < 1.25 * scratch(segmentation_statistics)


# ------------------------------------------------------------------------------------------
# The default capacity of the candidate matches.


def _agreeing_runs(targets, predictions, background=()):
    """Number of runs of the label pair where the labels agree and are kept (numpy)."""
    starts = np.ones(len(targets), bool)
    starts[1:] = (targets[1:] != targets[:-1]) | (predictions[1:] != predictions[:-1])
    kept = ~np.isin(targets, background)
    return int(np.sum(starts & (targets == predictions) & kept))


def _adversarial_pairs(rng):
    """Rows that reach or approach the candidate bound: equal rows, both changing together,
    alternating targets against a constant prediction, and random rows."""
    for length in (1, 2, 7, 40):
        same = rng.integers(0, 3, length)
        yield same, same.copy()
        together = np.repeat(rng.integers(0, 4, length), 3)
        yield together, np.where(rng.random(together.size) < 0.3, 9, together)
        yield np.arange(length) % 2, np.zeros(length, int)
        yield rng.integers(0, 2, length), rng.integers(0, 2, length)


def test_candidate_bound_holds_and_is_reached():
    rng = np.random.default_rng(8)
    reached = False
    for y, p in _adversarial_pairs(rng):
        n_y, n_p = len(ref.runs(y)), len(ref.runs(p))
        bound = candidate_bound(n_y, n_p, ())
        assert _agreeing_runs(y, p) <= bound
        reached |= _agreeing_runs(y, p) == bound
    assert reached
    # With background the kept segments can be split: 3 candidates for 3 + 1 segments.
    y, p = np.array([1, 0, 1, 0, 1]), np.ones(5, int)
    assert _agreeing_runs(y, p, (0,)) == 3 == candidate_bound(3, 1, (0,))
    assert candidate_bound(3, 1, ()) == 2


@pytest.mark.parametrize("background", [(), (0,)])
def test_candidates_at_their_bound_do_not_overflow(background):
    # Capacities equal to the true segment counts, and a row whose candidates reach the bound
    # (the default candidate capacity): every row must come out right, with no overflow.
    if background:
        pairs = [(np.array([1, 0] * 45 + [1]), np.ones(91, int))]
    else:
        same = np.arange(90) % 3
        pairs = [(same, same.copy()), *_adversarial_pairs(np.random.default_rng(9))]
    T = max(len(y) for y, _ in pairs)
    targets, predictions = np.zeros((2, len(pairs), T), np.int32)
    mask = np.zeros((len(pairs), T), bool)
    for i, (y, p) in enumerate(pairs):
        targets[i, : len(y)], predictions[i, : len(p)], mask[i, : len(y)] = y, p, True
    counts = [
        max(len(ref.segments(r, m, background)) for r, m in zip(x, mask))
        for x in (targets, predictions)
    ]
    most = max(_agreeing_runs(y, p, background) for y, p in pairs)
    assert most == candidate_bound(*counts, background)
    stats = segmentation_statistics(
        targets,
        predictions,
        mask=mask,
        iou_thresholds=OVERLAPS,
        background=background,
        max_target_segments=counts[0],
        max_predicted_segments=counts[1],
    )
    assert not np.any(stats.overflow)
    for i, (y, p) in enumerate(pairs):
        tp, fp, fn = ref.segmental_counts(y, p, OVERLAPS, background=background)
        np.testing.assert_array_equal(stats.tp[i], tp)
        np.testing.assert_array_equal(stats.fp[i], fp)
        np.testing.assert_array_equal(stats.fn[i], fn)
        assert stats.edit_distance[i] == ref.edit_distance(y, p, background=background)


def _label_one_between_gaps(period, offset, T=3000):
    """Label 1 at every frame but one in each ``period`` (background 0 there, at ``offset``)."""
    return np.where(np.arange(T) % period == offset, 0, 1).astype(np.int32)


@pytest.mark.parametrize(
    "targets, predictions",
    [
        # Every predicted segment overlaps two target segments: 249 candidates for 125 + 125
        # segments.
        (
            np.where(np.arange(3000) % 24 < 16, 1, 0).astype(np.int32),
            np.where((np.arange(3000) - 12) % 24 < 16, 1, 0).astype(np.int32),
        ),
        # 100 target and 600 predicted segments cut each other into 700 candidates.
        (_label_one_between_gaps(30, 29), _label_one_between_gaps(5, 2)),
    ],
)
def test_candidates_beyond_the_bound_without_background_are_exact(targets, predictions):
    # With background the candidates can outnumber (S_t + S_p) / 2, their bound without it
    # (up to S_t + S_p - 1): exact and without overflow.
    n_y, n_p = (len(ref.segments(x, background=(0,))) for x in (targets, predictions))
    assert _agreeing_runs(targets, predictions, (0,)) > candidate_bound(n_y, n_p, ())
    stats = segmentation_statistics(
        targets[None], predictions[None], iou_thresholds=OVERLAPS, background=(0,)
    )
    assert not stats.overflow[0]
    assert (int(stats.target_segments[0]), int(stats.predicted_segments[0])) == (n_y, n_p)
    assert stats.edit_distance[0] == ref.edit_distance(targets, predictions, background=(0,))
    want = ref.segmental_counts(targets, predictions, OVERLAPS, background=(0,))
    np.testing.assert_array_equal((stats.tp[0], stats.fp[0], stats.fn[0]), want)


def test_ignore_index_cuts_frames_out_before_segmenting():
    """ASRF's rule: frames whose target is ``ignore_index`` are removed, so the segments on
    both sides of them can merge; the scores equal those of the compacted sequences."""
    rng = np.random.default_rng(20)
    T = 120
    targets = np.repeat(rng.integers(0, 4, (3, T // 6)), 6, axis=1)
    predictions = np.where(rng.random((3, T)) < 0.9, targets, rng.integers(0, 4, (3, T)))
    targets[:, 30:42] = -100
    targets[1, ::7] = -100
    kw = dict(background=(0,), ignore_index=-100)
    edit_scores = np.asarray(M.edit_score(targets, predictions, **kw))
    tp, fp, fn = (np.asarray(x) for x in M.segmental_counts(targets, predictions, **kw))
    for k in range(3):
        keep = targets[k] != -100
        t, p = targets[k][keep], predictions[k][keep]
        assert edit_scores[k] == pytest.approx(ref.edit_score(t, p, background=(0,)), abs=1e-6)
        want = ref.segmental_counts(t, p, (0.1, 0.25, 0.5), background=(0,))
        np.testing.assert_array_equal(np.stack([tp[k], fp[k], fn[k]]), np.stack(want))
    # Without ignore_index, -100 is a segment label of its own.
    plain = float(M.edit_score(targets[:1], predictions[:1], background=(0,))[0])
    assert plain == pytest.approx(ref.edit_score(targets[0], predictions[0], background=(0,)))
    assert plain != pytest.approx(edit_scores[0])


@pytest.mark.parametrize(
    "name",
    [
        "accuracy",
        "edit_distance",
        "edit_score",
        "segmental_counts",
        "segmental_f1",
        "confusion_matrix",
        "class_accuracy",
    ],
)
def test_sequences_without_frames_score_as_wholly_masked_ones(name):
    """``[..., 0]`` labels (T = 0) give what a sequence whose frames are all masked gives."""
    fn = getattr(M, name)
    options = {"num_classes": 3} if name in ("confusion_matrix", "class_accuracy") else {}
    empty = np.zeros((2, 0), np.int32)
    masked = np.zeros((2, 4), np.int32)
    got = fn(empty, empty, **options)
    want = fn(masked, masked, mask=np.zeros((2, 4), bool), **options)
    jax.tree.map(np.testing.assert_array_equal, got, want)


def test_edit_score_is_the_correctly_rounded_reference_value():
    """Every (L, D) with L <= 40 segments: the float32 edit score is MS-TCN's float64
    ``1 - D / L`` rounded once (``1 - D / L`` in float32 rounds twice: 2/3 read 0.6666666)."""
    pairs = [(n, d) for n in range(1, 41) for d in range(n + 1)]
    targets = np.full((len(pairs), 40), -1, np.int32)
    predictions = targets.copy()
    for row, (n, d) in enumerate(pairs):
        targets[row, :n] = np.arange(n)
        predictions[row, :n] = np.arange(n) + np.where(np.arange(n) < d, 100, 0)
    mask = targets >= 0
    assert M.edit_distance(targets, predictions, mask=mask).tolist() == [d for _, d in pairs]
    want = np.array([np.float32(1 - d / n) for n, d in pairs])
    got = M.edit_score(targets, predictions, mask=mask)
    np.testing.assert_array_equal(np.asarray(got), want)


@pytest.mark.parametrize(
    "thresholds", [0.5, np.float32(0.5), np.array(0.5), np.array([0.25, 0.5])], ids=repr
)
def test_thresholds_in_every_accepted_form_are_the_tuple_of_their_values(thresholds):
    """A 0-d array of thresholds, which the detection metrics take, was refused by the
    segmental metrics under jax.jit and by ``streaming.segmentation``, and a number made the
    Evaluator fail inside ("'float' object is not iterable"). One parser reads them all."""
    values = tuple(np.atleast_1d(np.asarray(thresholds)).tolist())
    targets, predictions = jnp.array([[1, 1, 1, 1, 2, 2]]), jnp.array([[1, 1, 3, 3, 2, 2]])
    want = M.segmental_f1(targets, predictions, iou_thresholds=values)
    run = jax.jit(lambda t, p: M.segmental_f1(t, p, iou_thresholds=thresholds))
    np.testing.assert_array_equal(run(targets, predictions), want)
    acc = S.segmentation(iou_thresholds=thresholds)
    state = acc.update(acc.init(), targets, predictions)
    np.testing.assert_array_equal(acc.compute(state)["f1"], want[0])
    evaluator = Evaluator(iou_thresholds=thresholds)
    evaluator.add(targets[0], predictions[0])
    f1 = evaluator.get()["f1"]  # from the summed counts, in float64
    assert list(f1) == list(values)
    np.testing.assert_allclose(list(f1.values()), want[0], rtol=1e-6)


def test_legacy_asformer_end_must_be_a_bool():
    """``legacy_asformer_end="no"`` was taken as True (``bool("no")``), silently."""
    calls = (
        lambda: M.segmental_f1([1, 1, 2], [1, 2, 2], legacy_asformer_end="no"),
        lambda: S.segmentation(legacy_asformer_end="no"),
        lambda: Evaluator(legacy_asformer_end="no"),
    )
    for call in calls:
        with pytest.raises(
            TypeError, match=r"^legacy_asformer_end must be True or False, got 'no'"
        ):
            call()
