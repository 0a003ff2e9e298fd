"""Tests of average precision, precision-recall curves, per-frame mAP / cAP and top-k."""

from __future__ import annotations

import functools
import json
import math

import _reference_ranking as ref
import jax
import numpy as np
import pytest
from _jaxprs import unconditional_primitives
from conftest import golden_path
from sklearn import metrics as skm

from jaxseg import metrics as M
from jaxseg import streaming as S
from jaxseg._src import ranking

N_AP = 512  # every AP row is padded to this length (one compile per interpolation)


def _load(name):
    path = golden_path(f"{name}.json")
    if not path.exists():
        pytest.skip(f"golden data not found at {path}")
    with open(path) as f:
        return json.load(f), dict(np.load(golden_path(f"{name}.npz")))


@functools.partial(jax.jit, static_argnames=("interpolation",))
def _ap(targets, scores, mask, num_positives, interpolation):
    return M.average_precision(
        targets, scores, mask=mask, interpolation=interpolation, num_positives=num_positives
    )


def _pad_rows(rows, n):
    out = np.zeros((len(rows), n), rows[0].dtype)
    mask = np.zeros((len(rows), n), bool)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
        mask[i, : len(r)] = True
    return out, mask


# ---------------------------------------------------------------------------- golden
@pytest.mark.parametrize(
    "interpolation, key",
    [
        ("step", "sklearn_ap"),
        ("11point", "voc11_ap_padilla"),
        ("all_point", "allpoint_ap_padilla"),
        ("all_point", "allpoint_ap_anet"),
    ],
)
def test_golden_ap(interpolation, key):
    data, arrays = _load("ap")
    cases = data["cases"]
    scores, mask = _pad_rows([arrays[f"scores_{c['key']}"] for c in cases], N_AP)
    labels, _ = _pad_rows([arrays[f"labels_{c['key']}"] for c in cases], N_AP)
    # sklearn ignores the never-retrieved positives; the VOC anchors count them.
    missed = 0 if interpolation == "step" else 1
    npos = np.array([c["n_pos"] + missed * c["n_missed"] for c in cases], np.int32)
    got = np.asarray(_ap(labels, scores, mask, npos, interpolation))
    want = np.array([np.nan if c[key] is None else c[key] for c in cases])
    np.testing.assert_allclose(got, want, atol=1e-6, rtol=0)


def _online_batch(cases, arrays, n, c):
    targets = np.zeros((len(cases), n, c), np.uint8)
    scores = np.zeros((len(cases), n, c), np.float32)
    mask = np.zeros((len(cases), n), bool)
    for i, case in enumerate(cases):
        t, s = arrays[f"targets_{case['key']}"], arrays[f"scores_{case['key']}"]
        targets[i, : t.shape[0], : t.shape[1]] = t
        scores[i, : s.shape[0], : s.shape[1]] = s
        mask[i, : t.shape[0]] = True
    return targets, scores, mask


@functools.partial(jax.jit, static_argnames=("background", "ambiguous"))
def _online(targets, scores, mask, background, ambiguous):
    kw = dict(mask=mask, background=background, ambiguous=ambiguous)
    return (
        M.mean_average_precision(targets, scores, **kw),
        M.calibrated_average_precision(targets, scores, **kw),
    )


def test_frame_ap_and_cap_equal_the_two_metrics():
    # One ranking serves both (the CLI and the streaming accumulator use it): the same bits as
    # the two public functions, with a mask, ties, and scored columns that are not consecutive.
    rng = np.random.default_rng(21)
    targets = rng.random((2, 300, 6)) < 0.3
    scores = np.round(rng.random((2, 300, 6)), 2).astype(np.float32)
    mask = rng.random((2, 300)) < 0.9
    kw = dict(mask=mask, background=(0, 3), ambiguous=(5,))
    both = jax.jit(lambda t, s: ranking.frame_ap_and_cap(t, s, **kw))(targets, scores)
    separate = _online(targets, scores, mask, (0, 3), (5,))
    for got, want in zip(both, separate, strict=True):
        np.testing.assert_array_equal(got.per_class, want.per_class)
        np.testing.assert_array_equal(got.mean, want.mean)


def _check_lstr(case, result, index):
    for name, got in zip(("lstr_AP", "lstr_cAP"), result, strict=True):
        want = case[name]
        per_class = np.asarray(got.per_class[index])
        scored = {int(k) for k in want["per_class"]}
        for c in range(case["num_classes"]):
            if c in scored:
                assert abs(per_class[c] - want["per_class"][str(c)]) <= 1e-6, (name, c)
            else:
                assert np.isnan(per_class[c]), (name, c)
        mean = float(got.mean[index])
        assert math.isnan(mean) if want["mean"] is None else abs(mean - want["mean"]) <= 1e-6, name


def test_golden_online_lstr():
    """All cases in one batch: each case's ambiguous column moves to the last (padding) column,
    so one static ``ambiguous`` serves every case (a column of zeros drops no frame)."""
    data, arrays = _load("online")
    cases = data["cases"]
    width = max(c["num_classes"] for c in cases) + 1
    targets, scores, mask = _online_batch(cases, arrays, max(c["n_frames"] for c in cases), width)
    for i, case in enumerate(cases):
        a = case["ambiguous_index"]
        if a is not None:
            targets[i, :, [a, -1]] = targets[i, :, [-1, a]]
            scores[i, :, [a, -1]] = scores[i, :, [-1, a]]
    result = _online(targets, scores, mask, (0,), (width - 1,))
    for i, case in enumerate(cases):
        _check_lstr(case, result, i)


def test_golden_online_sklearn_all_frames():
    data, arrays = _load("online")
    cases = data["cases"]
    batch = _online_batch(
        cases, arrays, max(c["n_frames"] for c in cases), max(c["num_classes"] for c in cases)
    )
    ap, _ = _online(*batch, (), ())
    for i, case in enumerate(cases):
        got = np.asarray(ap.per_class[i, : case["num_classes"]])
        has = np.asarray(case["has_positive_all_frames"])
        want = np.asarray(case["sklearn_ap_all_frames_per_class"])
        np.testing.assert_allclose(got[has], want[has], atol=1e-6, rtol=0)
        assert np.isnan(got[~has]).all()  # sklearn: 0.0 with a warning; here undefined


@functools.partial(jax.jit, static_argnames=("k",))
def _top_k(targets, scores, mask, k):
    return M.top_k_accuracy(targets, scores, k=k, mask=mask)


def test_golden_top_k():
    data, arrays = _load("retrieval")
    cases = data["topk"]
    n, c = max(x["n"] for x in cases), max(x["num_classes"] for x in cases)
    scores = np.full((len(cases), n, c), -np.inf, np.float32)  # padded classes never outrank
    labels = np.zeros((len(cases), n), np.int32)
    mask = np.zeros((len(cases), n), bool)
    for i, case in enumerate(cases):
        s = arrays[f"topk_scores_{case['key']}"]
        scores[i, : s.shape[0], : s.shape[1]] = s
        labels[i, : s.shape[0]] = arrays[f"topk_labels_{case['key']}"]
        mask[i, : s.shape[0]] = True
    got = np.asarray(_top_k(labels, scores, mask, (1, 5)))
    want = [[case["top1"], case["top5"]] for case in cases]
    np.testing.assert_allclose(got, want, atol=1e-6, rtol=0)


# ---------------------------------------------------------------------------- random parity
R_ROWS, R_N = 24, 64


def _random_rows(seed, ties):
    rng = np.random.default_rng(seed)
    scores = rng.random((R_ROWS, R_N)).astype(np.float32)
    if ties:
        scores = np.round(scores * rng.integers(1, 6, (R_ROWS, 1))).astype(np.float32) / 5
    targets = rng.random((R_ROWS, R_N)) < rng.uniform(0.05, 0.7, (R_ROWS, 1))
    targets[0] = False  # no positive
    targets[1] = True  # all positive
    mask = rng.random((R_ROWS, R_N)) < 0.85
    mask[2] = False  # fully masked row
    return targets, scores, mask


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("interpolation", ["step", "11point", "all_point"])
def test_ap_matches_reference_and_sklearn(ties, interpolation):
    targets, scores, mask = _random_rows(7 + ties, ties)
    npos = (targets & mask).sum(-1).astype(np.int32)
    got = np.asarray(_ap(targets, scores, mask, npos, interpolation))
    fn = {"step": ref.step_ap, "11point": ref.eleven_point_ap, "all_point": ref.all_point_ap}
    for r in range(R_ROWS):
        want = fn[interpolation](targets[r][mask[r]], scores[r][mask[r]])
        if math.isnan(want):
            assert np.isnan(got[r]), r
        else:
            assert abs(got[r] - want) <= 1e-6, (r, got[r], want)
        if interpolation == "step" and npos[r] > 0:
            sk = skm.average_precision_score(targets[r][mask[r]], scores[r][mask[r]])
            assert abs(got[r] - sk) <= 1e-6


def test_ap_extreme_scores_use_the_general_sort():
    """Scores spanning more than 2**31 keys take the key/value sort; same values."""
    targets, scores, mask = _random_rows(3, ties=True)
    scores = scores * np.float32(1e30) - np.float32(1e29)
    scores[:, :5] = np.float32(-3e-38)
    scores[:, 5:7] = -np.inf
    npos = (targets & mask).sum(-1).astype(np.int32)
    got = np.asarray(_ap(targets, scores, mask, npos, "step"))
    for r in range(3, R_ROWS):
        want = ref.step_ap(targets[r][mask[r]], scores[r][mask[r]])
        assert abs(got[r] - want) <= 1e-6, r


@pytest.mark.parametrize("n", [1, 5, 32, 33, 200, 4099])
def test_tree_sum_is_exact_on_integers_and_close_on_floats(n):
    rng = np.random.default_rng(n)
    small = rng.integers(0, 10, (3, n)).astype(np.float32)  # every partial sum is exact
    np.testing.assert_array_equal(ranking._tree_sum(small), small.sum(-1))
    x = rng.random((3, n)).astype(np.float32)
    bound = (16 + math.log2(n + 1)) * np.finfo(np.float32).eps * np.abs(x).sum(-1)
    exact = [math.fsum(row) for row in x.astype(np.float64)]
    assert np.all(np.abs(np.asarray(ranking._tree_sum(x), np.float64) - exact) <= bound)


def test_tree_sum_and_ap_do_not_depend_on_the_padding():
    """Zeros appended to a row (masked entries, a streaming buffer's capacity) leave the sum
    and every AP unchanged bit for bit: a pairwise tree over 32 or fewer entries and blocks
    beyond gave 0.75793648 for 8 frames padded to 32 and 0.75793654 padded to 33."""
    rng = np.random.default_rng(3)
    x = rng.random((4, 20)).astype(np.float32)
    sums = [np.asarray(ranking._tree_sum(np.pad(x, [(0, 0), (0, pad)]))) for pad in (0, 13, 44)]
    for other in sums[1:]:
        np.testing.assert_array_equal(other, sums[0])
    targets = rng.integers(0, 2, (6, 20)).astype(bool)
    targets[:, 0] = True
    scores = rng.random((6, 20)).astype(np.float32)
    for interpolation in ("step", "all_point", "11point"):
        values = []
        for width in (20, 32, 33, 100):
            pad = [(0, 0), (0, width - 20)]
            mask = np.pad(np.ones((6, 20), bool), pad)
            values.append(
                np.asarray(
                    M.average_precision(
                        np.pad(targets, pad),
                        np.pad(scores, pad),
                        mask=mask,
                        interpolation=interpolation,
                    )
                )
            )
        for other in values[1:]:
            np.testing.assert_array_equal(other, values[0])


def _long_rows(rows):
    """uint32 ``[rows, 2^14]`` keys: rows long enough to be sorted in pieces."""
    n = ranking._SORT_PIECE_LENGTH
    return np.random.default_rng(rows).integers(0, 1 << 20, (rows, n)).astype(np.uint32)


@pytest.mark.parametrize("rows", [9, 10, 21, 30])
def test_long_rows_sorted_in_pieces(rows):
    # On CPU, 10 or more rows of at least 2^14 entries are sorted as independent pieces: up
    # to 24 for one metric per row, 12 for two.
    x = _long_rows(rows)
    for metrics, most in ((1, 24), (2, 12)):
        pieces = ranking._cpu_sort_pieces(*x.shape, metrics)
        assert pieces == (min(rows, most) if rows >= 10 else 1)
        blocks = jax.jit(ranking._sort_rows, static_argnums=1)(x, pieces)
        assert len(blocks) == pieces
        np.testing.assert_array_equal(np.concatenate(blocks), np.sort(x, axis=-1))
    assert ranking._cpu_sort_pieces(rows, x.shape[1] - 1, 1) == 1  # short rows: one sort


@pytest.mark.parametrize("rows", [3, 12])
def test_packed_ranking_equals_the_sort_of_triples(rows):
    # CPU packs key and label into one word (in pieces of rows from 10 long rows); other
    # backends sort (validity, key, label) triples: the same values, bit for bit.
    x = _long_rows(rows)
    targets, scores, valid = (x % 3 == 0).T, (x % 1000).astype(np.float32).T, (x % 7 > 0).T
    row_values = (ranking._precision_sum, ranking._calibrated_ap)

    def ranked(rank):
        run = jax.jit(lambda t, s, v: rank(lambda: (t, s, v), row_values))
        return run(targets, scores, valid)

    packed, triples = ranked(ranking._rank_packed), ranked(ranking._rank_sorted)
    jax.tree.map(np.testing.assert_array_equal, packed, triples)


# One row per piece (10 rows), and pieces of unequal rows for one and two metrics (30).
@pytest.mark.parametrize("rows", [10, 30])
def test_metrics_of_rows_sorted_in_pieces(rows):
    x = _long_rows(rows)
    targets = x % 3 == 0
    scores = (x % 1000).astype(np.float32)  # many ties
    got = M.mean_average_precision(targets.T, scores.T).per_class
    want = [skm.average_precision_score(t, s) for t, s in zip(targets, scores)]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    both = ranking.frame_ap_and_cap(targets.T, scores.T)
    np.testing.assert_array_equal(both[0].per_class, got)
    cap = M.calibrated_average_precision(targets.T, scores.T).per_class
    np.testing.assert_array_equal(both[1].per_class, cap)
    np.testing.assert_allclose(
        cap, [_calibrated_from_sklearn(t, s) for t, s in zip(targets, scores)], rtol=0, atol=1e-6
    )
    missed = np.arange(rows)  # positives never scored: a larger recall denominator per row
    got = M.average_precision(targets, scores, num_positives=targets.sum(-1) + missed)
    np.testing.assert_allclose(
        got, np.array(want) * (1 - missed / (targets.sum(-1) + missed)), atol=1e-6
    )


def _calibrated_from_sklearn(targets, scores):
    """cAP from scikit-learn's precision-recall curve (tied scores grouped): calibrated
    precision ``p w / (p w + 1 - p)``, ``w = negatives / positives``, summed over recall steps."""
    precision, recall, _ = skm.precision_recall_curve(targets, scores)
    ratio = (len(targets) - targets.sum()) / targets.sum()
    calibrated = ratio * precision / (ratio * precision + 1 - precision)
    return -np.sum(np.diff(recall) * calibrated[:-1])


def _ap_small(rows, interpolation="step"):
    """AP of a few short rows ``(targets, scores, mask)`` through the shared compiled shape."""
    targets = np.zeros((R_ROWS, R_N), bool)
    scores = np.zeros((R_ROWS, R_N), np.float32)
    mask = np.zeros((R_ROWS, R_N), bool)
    for i, (t, sc, m) in enumerate(rows):
        targets[i, : len(t)], scores[i, : len(t)], mask[i, : len(t)] = t, sc, m
    npos = (targets & mask).sum(-1).astype(np.int32)
    return np.asarray(_ap(targets, scores, mask, npos, interpolation))[: len(rows)]


def test_ap_signed_zero_is_one_tie():
    row = (np.array([1, 0, 1, 0]), np.array([0.0, -0.0, 0.0, -0.0]), np.ones(4, bool))
    assert _ap_small([row])[0] == pytest.approx(0.5)


def test_ap_ranks_subnormal_scores_above_zero():
    # Compared by their bits: XLA's CPU code may flush subnormal floats to zero.
    tiny = np.float32(1e-40)
    rows = [
        (np.array([1, 0]), np.array([tiny, 0.0], np.float32), np.ones(2, bool)),
        (np.array([0, 1]), np.array([-tiny, -0.0], np.float32), np.ones(2, bool)),
    ]
    np.testing.assert_array_equal(_ap_small(rows), [1.0, 1.0])


_TINY = np.float32(1e-40)
_WINDOW_ROWS = {
    "subnormal": [_TINY, 2 * _TINY, 0.0, -_TINY, -0.0, 3e-45],
    "tiny and normal": [_TINY, 1e-30, 0.5, -_TINY],
    "probabilities": [0.0, 0.25, 1.0, 0.75],
    "unit interval, both signs": [-1.0, 1.0, 0.0, -0.5],
    "infinities": [np.inf, -np.inf, 0.0, 1.0],
    "wide logits": [-30.0, 30.0, 1e-3, -1e-3],
}


@pytest.mark.parametrize("name", list(_WINDOW_ROWS))
@pytest.mark.parametrize("masked", [False, True])
def test_key_window_bounds_every_valid_key(name, masked):
    # The window comes from float reductions, where XLA may flush subnormals to zero; it must
    # still hold every valid key, and be found for the usual score ranges.
    row = np.array(_WINDOW_ROWS[name], np.float32)
    valid = np.ones(len(row), bool)
    if masked:
        valid[np.argmax(row)] = valid[np.argmin(row)] = False
    keys = np.asarray(ranking.unsigned_keys(ranking.descending_keys(row))).astype(np.int64)
    lo, fits = jax.jit(ranking._key_window)(row[:, None], valid[:, None])
    lo = int(lo[0, 0])
    kept = keys[valid]
    if fits:
        assert kept.min() >= lo and kept.max() - lo <= 2**31 - 2
    if kept.max() - kept.min() <= 2**31 - 2 - 2 * ranking._KEY_MARGIN:
        assert fits


def test_key_window_of_rows_without_valid_entries():
    scores = np.array([[0.5, -1e30], [-2.0, 1e30]], np.float32)  # [N, rows]
    _, fits = jax.jit(ranking._key_window)(scores, np.zeros((2, 2), bool))
    assert fits


def test_ap_with_only_subnormal_and_zero_scores():
    scores = np.array([_TINY, 2 * _TINY, 0.0, -_TINY, -0.0, 3e-45, _TINY, 0.0], np.float32)
    targets = np.array([0, 1, 1, 0, 1, 0, 1, 0], bool)
    got = float(M.average_precision(targets, scores))
    assert got == pytest.approx(ref.step_ap(targets, scores), abs=1e-6)


@pytest.mark.parametrize("ties", [False, True])
def test_calibrated_ap_matches_reference(ties):
    targets, scores, _ = _random_rows(11 + ties, ties)
    _, result = _online(targets.T[None], scores.T[None], np.ones((1, R_N), bool), (), ())
    assert result.per_class.shape == (1, R_ROWS)
    for r in range(R_ROWS):
        want = ref.calibrated_ap(targets[r], scores[r])
        got = float(result.per_class[0, r])
        assert math.isnan(got) if math.isnan(want) else abs(got - want) <= 1e-6, r
    assert float(result.per_class[0, 1]) == 1.0  # every frame positive


def test_mean_average_precision_mask_background_ambiguous():
    rng = np.random.default_rng(5)
    targets = np.eye(R_ROWS, dtype=np.uint8)[rng.integers(0, 4, R_N)]  # classes >= 4 absent
    scores = rng.random((R_N, R_ROWS)).astype(np.float32)
    mask = rng.random(R_N) < 0.8
    ap, cap = _online(targets[None], scores[None], mask[None], (0,), (3,))
    for metric, got in ((ref.step_ap, ap), (ref.calibrated_ap, cap)):
        per_class, mean = ref.per_class(metric, targets[mask], scores[mask], (0,), (3,))
        np.testing.assert_allclose(np.asarray(got.per_class[0]), per_class, atol=1e-6)
        assert float(got.mean[0]) == pytest.approx(mean, abs=1e-6)
    ap, cap = _online(targets[None], scores[None], np.zeros((1, R_N), bool), (0,), (3,))
    assert np.isnan(np.asarray(ap.per_class)).all() and np.isnan(float(ap.mean[0]))
    assert np.isnan(np.asarray(cap.per_class)).all() and np.isnan(float(cap.mean[0]))


def test_precision_recall_curve_matches_sklearn():
    rng = np.random.default_rng(2)
    scores = np.round(rng.random(40), 1).astype(np.float32)
    targets = rng.random(40) < 0.4
    curve = jax.jit(M.precision_recall_curve)(targets, scores)
    valid = np.asarray(curve.valid)
    precision, recall, thresholds = skm.precision_recall_curve(targets, scores)
    np.testing.assert_allclose(np.asarray(curve.thresholds)[valid], thresholds[::-1], atol=0)
    np.testing.assert_allclose(np.asarray(curve.precision)[valid], precision[:-1][::-1], atol=1e-6)
    np.testing.assert_allclose(np.asarray(curve.recall)[valid], recall[:-1][::-1], atol=1e-6)


def test_ap_degenerate_values():
    one, yes, no = np.ones(4), np.ones(4, bool), np.zeros(4, bool)
    rows = [(no, one, yes), (yes, one, yes), (yes, one, no), (np.array([1, 0, 0, 0]), one, yes)]
    for interpolation in ("step", "11point", "all_point"):
        no_positive, all_positive, all_masked, constant = _ap_small(rows, interpolation)
        assert np.isnan(no_positive) and np.isnan(all_masked)
        assert all_positive == 1.0
        if interpolation == "step":  # a constant score holds everything: AP = prevalence
            assert constant == 0.25
    empty = M.average_precision(np.zeros((2, 0), int), np.zeros((2, 0)))
    assert empty.shape == (2,) and np.isnan(np.asarray(empty)).all()


@pytest.mark.parametrize("interpolation", ["step", "11point", "all_point"])
def test_ap_without_entries_is_that_of_entries_all_masked(interpolation):
    """An empty entry axis (N = 0) with num_positives gave NaN, but every entry masked gave
    0: nothing ranked, recall 0 of num_positives (ActivityNet: no prediction, AP 0)."""
    num_positives = np.array([3, 0])
    masked = M.average_precision(
        np.ones((2, 2), int),
        np.ones((2, 2)),
        mask=np.zeros((2, 2), bool),
        num_positives=num_positives,
        interpolation=interpolation,
    )
    empty = M.average_precision(
        np.zeros((2, 0), int),
        np.zeros((2, 0)),
        num_positives=num_positives,
        interpolation=interpolation,
    )
    want = [0.0, np.nan]  # 0 of 3 positives retrieved; no positive at all: 0/0
    np.testing.assert_array_equal(masked, want)
    np.testing.assert_array_equal(empty, want)


@pytest.mark.parametrize("interpolation", ["step", "11point", "all_point"])
def test_ap_with_fewer_num_positives_than_positives_is_nan(interpolation):
    """A recall denominator below the positives scored would give AP 2.0 (or -2.0 for -1)."""
    targets, scores = np.array([[1, 1], [1, 0]]), np.array([[0.1, 0.2], [0.1, 0.2]])
    for num_positives in ([1, 1], [-1, 3]):
        ap = np.asarray(
            M.average_precision(
                targets, scores, num_positives=np.array(num_positives), interpolation=interpolation
            )
        )
        assert np.isnan(ap[0]) and 0.0 < ap[1] < 1.0


def test_eleven_point_ap_with_num_positives_past_2_27():
    """``10 * tp`` and ``tenth * num_positives`` wrapped past int32: 2 positives found of
    2**28 reached recall 0.2 and 0.4, and 11-point AP read 4/11 instead of 1/11."""
    targets, scores = np.array([1, 0, 1]), np.array([0.9, 0.5, 0.4])
    for num_positives in (2**27, 2**28, 2**31 - 1):
        want = ref.eleven_point_ap(targets, scores, num_positives)
        got = M.average_precision(
            targets, scores, num_positives=num_positives, interpolation="11point"
        )
        assert float(got) == pytest.approx(want, rel=1e-6)
    assert ref.eleven_point_ap(targets, scores, 2**28) == pytest.approx(1 / 11)


def test_ap_errors_name_the_argument():
    with pytest.raises(ValueError, match="interpolation"):
        M.average_precision(np.ones(3, int), np.ones(3), interpolation="trapezoid")
    with pytest.raises(ValueError, match="targets and scores"):
        M.average_precision(np.ones(3, int), np.ones(4))
    with pytest.raises(TypeError, match="targets"):
        M.average_precision(np.ones(3), np.ones(3))
    with pytest.raises(ValueError, match="num_positives"):
        M.average_precision(np.ones((2, 3), int), np.ones((2, 3)), num_positives=np.ones(3, int))
    with pytest.raises(ValueError, match="ambiguous"):
        M.mean_average_precision(np.ones((3, 2), int), np.ones((3, 2)), ambiguous=(2,))


# ---------------------------------------------------------------------------- top-k
def test_top_k_ties_follow_sklearn_and_reference():
    rng = np.random.default_rng(4)
    scores = np.round(rng.random((200, 7)) * 3).astype(np.float32)
    targets = rng.integers(0, 7, 200)
    mask = rng.random(200) < 0.9
    got = np.asarray(_top_k(targets, scores, mask, (1, 3, 7)))
    for j, k in enumerate((1, 3, 7)):
        want = np.mean(
            [ref.top_k_correct(t, s, k) for t, s in zip(targets[mask], scores[mask], strict=True)]
        )
        assert abs(got[j] - want) <= 1e-6
        if k < 7:
            sk = skm.top_k_accuracy_score(targets[mask], scores[mask], k=k, labels=np.arange(7))
            assert abs(got[j] - sk) <= 1e-6
    assert got[2] == 1.0
    assert np.isnan(np.asarray(_top_k(targets, scores, mask & False, (1, 3, 7)))).all()


def test_top_k_ranks_subnormal_scores_above_zero():
    # Compared by their bits, like AP: a flushed subnormal would tie with 0 and lose the tie.
    scores = np.array([[0.0, 1e-40, 0.0], [-1e-40, -0.0, 0.0]], np.float32)
    targets = np.array([1, 0])
    got = np.asarray(_top_k(targets, scores, np.ones(2, bool), (1, 2)))
    want = [skm.top_k_accuracy_score(targets, scores, k=k, labels=np.arange(3)) for k in (1, 2)]
    np.testing.assert_array_equal(got, [0.5, 0.5])
    np.testing.assert_array_equal(got, want)


def test_top_k_ranks_float64_subnormal_scores_above_zero():
    """Under x64, float64 scores were compared as floats, which XLA's CPU code flushes to
    zero: 5e-324 tied with 0 and lost the tie (scikit-learn ranks it first)."""
    scores = np.array([[0.0, 5e-324, 0.0], [1e-310, 0.0, -0.0]])
    targets = np.array([1, 0])
    want = skm.top_k_accuracy_score(targets, scores, k=1, labels=np.arange(3))
    assert want == 1.0
    with jax.enable_x64(True):
        got = M.top_k_accuracy(jax.numpy.asarray(targets), jax.numpy.asarray(scores), k=1)
        assert got.dtype == np.float32
    np.testing.assert_array_equal(got, [want])


def test_top_k_errors():
    with pytest.raises(ValueError, match="k must"):
        M.top_k_accuracy(np.zeros(3, int), np.ones((3, 4)), k=(0,))
    with pytest.raises(ValueError, match="scores must have shape"):
        M.top_k_accuracy(np.zeros(3, int), np.ones((2, 4)))


def test_ap_is_jittable_and_vmappable():
    targets, scores, mask = _random_rows(1, ties=True)
    npos = (targets & mask).sum(-1).astype(np.int32)
    direct = _ap(targets, scores, mask, npos, "step")
    mapped = jax.jit(jax.vmap(lambda t, s, m: M.average_precision(t, s, mask=m)))(
        targets, scores, mask
    )
    np.testing.assert_allclose(np.asarray(direct), np.asarray(mapped), atol=0)


def test_vmapped_rankings_take_one_branch_for_all_examples():
    # Batched by vmap, the predicates "every key fits the packed sort" and "a run of more
    # than two tied positives" would make each cond run both of its branches (both sorts)
    # on every call; one predicate for all mapped examples keeps them conds.
    targets, scores, mask = _random_rows(5, ties=True)
    scores[3, :40], targets[3, :40] = 0.5, True  # a long run of tied positives
    scores[4, 0] = -np.inf  # keys too far apart to pack: the general sort for all

    def ap(t, s, m):
        return M.average_precision(t, s, mask=m)

    jaxpr = jax.make_jaxpr(jax.vmap(ap))(targets, scores, mask)
    assert "sort" not in unconditional_primitives(jaxpr)
    for rows in (slice(None), slice(5, None)):  # with and without the long run and far key
        t, s, m = targets[rows], scores[rows], mask[rows]
        np.testing.assert_array_equal(jax.jit(jax.vmap(ap))(t, s, m), ap(t, s, m))

    videos = (targets.reshape(4, 6, R_N).swapaxes(1, 2), scores.reshape(4, 6, R_N).swapaxes(1, 2))
    for metric in (M.calibrated_average_precision, M.mean_average_precision):
        per_class = lambda t, s, metric=metric: metric(t, s).per_class  # noqa: E731
        np.testing.assert_array_equal(jax.jit(jax.vmap(per_class))(*videos), per_class(*videos))


# ---------------------------------------------------------------------------- sort helpers
@pytest.mark.parametrize(
    "length, key_bits",
    [(1, 32), (5, 32), (100, 32), (1024, 32), (1025, 32), (2048, 30), (2049, 30), (70000, 8)],
)
def test_stable_order_is_numpys_stable_argsort(length, key_bits):
    # One pass (key and index fit in 32 bits), two passes (top bits, then group + rest) and
    # the key/value fallback; keys tied exactly, or sharing all the bits of the first pass.
    rng = np.random.default_rng(length)
    top = rng.integers(0, 4, (3, length)).astype(np.uint64) << max(0, key_bits - 2)
    keys = np.stack(
        [
            rng.integers(0, 2**key_bits, length),  # almost no ties
            top[0] + rng.integers(0, 8, length),  # equal top bits, low bits decide
            top[1],  # exact ties only
        ]
    ).astype(np.uint32)
    keys[:, :1] = 2**key_bits - 1  # the largest key
    want = np.argsort(keys, axis=-1, kind="stable")
    got = np.asarray(jax.jit(lambda k: ranking.stable_order(k, key_bits=key_bits))(keys))
    np.testing.assert_array_equal(got, want)
    # The other backends' formulation, the same order bit for bit.
    np.testing.assert_array_equal(np.asarray(jax.jit(ranking._paired_stable_order)(keys)), want)


def test_unsigned_keys_keep_the_order_of_score_keys():
    scores = np.array([np.inf, 1.0, 0.5, 0.0, -0.0, -1e-45, -3.0, -np.inf], np.float32)
    keys = np.asarray(ranking.unsigned_keys(ranking.descending_keys(scores)))
    assert np.all(keys[:-1] <= keys[1:]) and keys[3] == keys[4]


@pytest.mark.parametrize("length", [0, 1, 31, 32, 33, 1000, 70001])
def test_cumulative_count_equals_cumsum(length):
    x = np.random.default_rng(length).random((3, length)) < [[0.05], [0.5], [1.0]]
    got = jax.jit(ranking.cumulative_count)(x)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, np.cumsum(x, axis=-1))


def _suffix_max_reference(values, ends):
    out = np.empty_like(values)
    for r in range(values.shape[0]):
        best = -np.inf
        for i in reversed(range(values.shape[1])):
            best = values[r, i] if ends[r, i] else max(best, values[r, i])
            out[r, i] = best
    return out


@pytest.mark.parametrize("length", [0, 1, 31, 33, 1057, 33000])
def test_suffix_max_restarts_at_segment_ends(length):
    rng = np.random.default_rng(length)
    values = rng.random((2, length)).astype(np.float32)
    ends = rng.random((2, length)) < 0.01
    got = jax.jit(ranking.suffix_max)(values, ends)
    np.testing.assert_array_equal(np.asarray(got), _suffix_max_reference(values, ends))
    plain = jax.jit(ranking.suffix_max)(values)
    np.testing.assert_array_equal(np.asarray(plain), _suffix_max_reference(values, ends & False))


def test_ap_and_cap_with_pairs_of_tied_scores():
    # Every score appears exactly twice (tied pairs: both positive, mixed, both negative), the
    # one-comparison case of the tie handling; triples and more are covered by ties=True above.
    rng = np.random.default_rng(12)
    scores = rng.permuted(np.repeat(rng.random((R_ROWS, R_N // 2)), 2, axis=1), axis=1)
    scores = scores.astype(np.float32)
    targets = rng.random((R_ROWS, R_N)) < rng.uniform(0.2, 0.8, (R_ROWS, 1))
    mask = np.ones((R_ROWS, R_N), bool)
    npos = targets.sum(-1).astype(np.int32)
    got = np.asarray(_ap(targets, scores, mask, npos, "step"))
    _, cap = _online(targets.T[None], scores.T[None], np.ones((1, R_N), bool), (), ())
    for r in range(R_ROWS):
        sk = skm.average_precision_score(targets[r], scores[r])
        assert abs(got[r] - sk) <= 1e-6 and abs(got[r] - ref.step_ap(targets[r], scores[r])) <= 1e-6
        assert abs(float(cap.per_class[0, r]) - ref.calibrated_ap(targets[r], scores[r])) <= 1e-6


def test_top_k_targets_outside_the_classes_never_score():
    """Target -1 used to be clipped onto class 0 (and 7 of 3 onto class 2) and scored as hits."""
    from jaxseg import streaming

    scores = np.array([[0.9, 0.1, 0.0], [0.1, 0.8, 0.1], [0.0, 0.1, 0.9]], np.float32)
    targets = np.array([-1, 1, 7])
    np.testing.assert_allclose(M.top_k_accuracy(targets, scores, k=(1, 3, 5)), [1 / 3] * 3)
    acc = streaming.top_k(k=(1, 3))
    state = jax.jit(acc.update)(acc.init(), targets, scores)
    np.testing.assert_allclose(acc.compute(state)["accuracy"], [1 / 3] * 2)


def test_top_k_with_k_past_int32_takes_every_class():
    """k >= C is always correct for a target in [0, C); a k of 2**31 or more raised
    OverflowError from inside the comparison with the int32 ranks."""
    scores = np.array([[0.1, 0.5, 0.4], [0.3, 0.3, 0.4]], np.float32)
    targets = np.array([2, 5])  # a hit at any k >= 2, and a target that names no class
    want = [0.5, 0.5, 0.5]  # reference: sklearn's rule for the known target, a miss for 5
    assert ref.top_k_correct(2, scores[0], 3)
    ks = (3, 2**31, 2**40)
    np.testing.assert_array_equal(M.top_k_accuracy(targets, scores, k=ks), want)
    accumulator = S.top_k(k=ks)
    state = accumulator.update(accumulator.init(), targets, scores)
    np.testing.assert_array_equal(accumulator.compute(state)["accuracy"], want)


def test_top_k_accuracy_is_the_correctly_rounded_quotient():
    """Without a mask the count was one number that XLA divided by as a product with its
    reciprocal: 9 hits of 10 read 0.90000004."""
    n = 200
    scores = np.zeros((n + 1, n, 3), np.float32)
    scores[..., 0] = 1.0
    targets = (np.arange(n)[None, :] >= np.arange(n + 1)[:, None]).astype(np.int32)
    want = np.arange(n + 1, dtype=np.float32) / np.float32(n)
    top_1 = functools.partial(M.top_k_accuracy, k=(1,))
    for fn in (top_1, jax.jit(top_1), jax.vmap(top_1)):
        np.testing.assert_array_equal(np.asarray(fn(targets, scores))[:, 0], want)
