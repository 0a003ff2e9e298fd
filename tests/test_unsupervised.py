"""Unsupervised protocols (CTE global, TW-FINCH per video, ASOT full/per): golden parity,
an independent numpy/scipy oracle (tests/_reference_unsupervised.py), scipy's tie rule,
degenerate cases, jit/vmap and batching invariance of the accumulators.

The references' F1 draws frames at random; jaxseg gives the deterministic limit. The golden
``*_f1_seeded`` values are reproduced here by the oracle with numpy's legacy generator seeded
as the golden generator seeded it (exactly), and jaxseg equals the oracle's limit (1e-6).
"""

from __future__ import annotations

import functools
import math

import _reference_unsupervised as ref
import jax
import numpy as np
import pytest
from _videos import pad_batch, video_specs
from conftest import load_golden
from hypothesis import given
from hypothesis import strategies as st
from scipy.optimize import linear_sum_assignment

from jaxseg import metrics as M
from jaxseg import streaming
from jaxseg._src.assignment import shortest_augmenting_paths

C, K = 14, 12  # class / cluster capacities covering the golden set (labels <= 13, ids <= 11)
T_MAX, C_MAX = 300, 40  # the property test's padded length and largest table
TOL = 1e-6


@pytest.fixture(scope="module")
def golden():
    return load_golden("unsupervised/tas")


def _activity(arrays, a):
    """``(videos, gt, pred, mask)`` of activity ``a``: its video indices, and its padded rows
    followed by padding rows (no valid frame, so not videos) up to the largest activity's
    count, so that every activity is one shape and the metrics compile once for all."""
    videos = np.flatnonzero(arrays["video_activity"] == a)
    rows = np.bincount(arrays["video_activity"]).max()
    fill = rows - len(videos)

    def padded(x, value):
        return np.concatenate([x[videos], np.full((fill, x.shape[1]), value, x.dtype)])

    return (
        videos,
        padded(arrays["gt_padded"], -100),
        padded(arrays["pred_padded"], -100),
        padded(arrays["mask"], False),
    )


def _concat(gt, pred, mask):
    return gt[mask], pred[mask]


def _close(got, want, tol=TOL):
    got, want = float(got), float(want)
    if math.isnan(want):
        return math.isnan(got)
    return abs(got - want) <= tol


@functools.partial(jax.jit, static_argnames=("background",))
def _global(gt, pred, mask, k, background):
    return M.global_hungarian_scores(
        gt,
        pred,
        mask=mask,
        num_classes=C,
        num_clusters=K,
        exclude_background=background,
        segments_per_video=k,
    )


@functools.partial(jax.jit, static_argnames=("mode", "exclude"))
def _asot(gt, pred, mask, mode, exclude):
    return M.asot_hungarian_scores(
        gt, pred, mask=mask, num_classes=C, num_clusters=K, mode=mode, exclude_background=exclude
    )


# ------------------------------------------------------------------------------------------
# Golden parity


def test_golden_cte(golden):
    data, arrays = golden
    for a, activity in enumerate(data["activities"]):
        videos, gt, pred, mask = _activity(arrays, a)
        bg, k = bool(arrays["activity_bg"][a]), int(arrays["activity_K"][a])
        got = _global(gt, pred, mask, k, bg)
        for key in ("mof", "mof_bg", "iou", "iou_bg"):
            assert _close(got[key], arrays[f"exp_cte_{key}"][a]), (a, key)
        # The matching itself: class label -> cluster id (padding labels left out).
        matched = {int(g): c for g, c in activity["expected"]["cte"]["gt2cluster"].items()}
        class_cluster = np.asarray(got["class_cluster"])
        present = np.unique(gt[mask])
        for g in present:
            assert class_cluster[g + 1] - 1 == matched[int(g)] or (
                matched[int(g)] >= K or matched[int(g)] not in np.unique(pred[mask])
            ), (a, g)
        # F1: jaxseg = the oracle's deterministic limit; oracle with the seeded draws = golden.
        flat_gt, flat_pred = _concat(gt, pred, mask)
        limit = ref.cte(flat_gt, flat_pred, background=bg, k=k, n_videos=len(videos))
        assert _close(got["f1"], limit["f1"]), a
        seeded = ref.cte(
            flat_gt,
            flat_pred,
            background=bg,
            k=k,
            n_videos=len(videos),
            rng=np.random.RandomState(0),
        )
        assert _close(seeded["f1"], arrays["exp_cte_f1_seeded"][a], 1e-12), a
        assert _close(got["f1"], seeded["f1"], 0.02), a


def test_golden_asot(golden):
    data, arrays = golden
    per_video = {key: [] for key in ("mof", "miou", "f1")}
    for a, activity in enumerate(data["activities"]):
        videos, gt, pred, mask = _activity(arrays, a)
        bg = bool(arrays["activity_bg"][a])
        full = _asot(gt, pred, mask, "full", bg)
        per = _asot(gt, pred, mask, "per", bg)
        for key in ("mof", "miou"):
            assert _close(full[key], arrays[f"exp_asot_full_{key}"][a]), (a, key)
            per_videos = per[key][: len(videos)]
            np.testing.assert_allclose(per_videos, arrays[f"exp_asot_per_{key}"][videos], atol=TOL)
        expected = {int(c): g for c, g in activity["expected"]["asot_full_pred_to_gt"].items()}
        got = {int(c) - 1: g - 1 for g, c in enumerate(np.asarray(full["class_cluster"])) if c >= 0}
        assert got == expected, a
        flat_gt, flat_pred = _concat(gt, pred, mask)
        limit = ref.asot(flat_gt, flat_pred, exclude_background=bg, n_videos=len(videos))
        assert _close(full["f1"], limit["f1"]), a
        seeded = ref.asot(
            flat_gt,
            flat_pred,
            exclude_background=bg,
            n_videos=len(videos),
            rng=np.random.RandomState(0),
        )
        assert _close(seeded["f1"], arrays["exp_asot_full_f1_seeded"][a], 1e-12), a
        for row, v in enumerate(videos):
            g, p = gt[row][mask[row]], pred[row][mask[row]]
            assert _close(per["f1"][row], ref.asot(g, p, exclude_background=bg, n_videos=1)["f1"])
            seeded = ref.asot(g, p, exclude_background=bg, n_videos=1, rng=np.random.RandomState(0))
            assert _close(seeded["f1"], arrays["exp_asot_per_f1_seeded"][v], 1e-12), v
        for key in per_video:
            per_video[key].extend(np.asarray(per[key][: len(videos)]).tolist())
    means = data["dataset_level"]["asot_per_mean_over_all_videos"]
    for key in ("mof", "miou"):
        assert _close(np.mean(per_video[key]), means[key])


def test_golden_twfinch(golden):
    data, arrays = golden
    got = M.per_video_hungarian_scores(
        arrays["gt_padded"],
        arrays["pred_padded"],
        mask=arrays["mask"],
        num_classes=C,
        num_clusters=K,
        iou_divisor=arrays["finch_n_clusters"],
    )
    for key in ("mof", "iou", "f1"):
        np.testing.assert_allclose(got[key], arrays[f"exp_finch_{key}"], atol=TOL)
    means = data["dataset_level"]["finch_mean_over_videos"]
    for key, name in (("mof", "mof"), ("iou", "iou"), ("f1", "f1_macro")):
        assert _close(np.mean(np.asarray(got[key], np.float64)), means[name])


def test_golden_means_over_activities(golden):
    data, arrays = golden
    means = data["dataset_level"]
    cte = {k: [] for k in ("mof", "mof_bg", "iou", "iou_bg")}
    full = {k: [] for k in ("mof", "miou")}
    for a in range(len(data["activities"])):
        _, gt, pred, mask = _activity(arrays, a)
        bg, k = bool(arrays["activity_bg"][a]), int(arrays["activity_K"][a])
        got = _global(gt, pred, mask, k, bg)
        for key in cte:
            cte[key].append(float(got[key]))
        got = _asot(gt, pred, mask, "full", bg)
        for key in full:
            full[key].append(float(got[key]))
    for key, values in cte.items():
        assert _close(np.mean(values), means["cte_mean_over_activities"][key])
    for key, values in full.items():
        assert _close(np.mean(values), means["asot_full_mean_over_activities"][key])


# ------------------------------------------------------------------------------------------
# The oracle on random sets with many ties; scipy's tie rule


def _random_set(rng, videos, length, classes, clusters, background):
    lengths = rng.integers(0, length + 1, videos)
    gt = np.full((videos, length), -100, np.int32)
    pred = np.full((videos, length), -100, np.int32)
    mask = np.arange(length)[None, :] < lengths[:, None]
    for v, n in enumerate(lengths):
        cuts = np.sort(rng.integers(0, n + 1, rng.integers(0, 4)))
        labels = rng.integers(-1 if background else 0, classes, len(cuts) + 1)
        gt[v, :n] = np.repeat(labels, np.diff(np.concatenate([[0], cuts, [n]])))
        noisy = rng.random(n) < 0.3
        pred[v, :n] = np.where(noisy, rng.integers(-1, clusters, n), (gt[v, :n] + 1) % clusters)
    return gt, pred, mask


def test_protocols_match_oracle():
    # The seeds in one test: the programs depend only on whether background is excluded, so
    # they compile twice, not twice on each test worker that runs some of the seeds.
    for seed in range(12):
        _protocols_match_oracle(seed)


def _protocols_match_oracle(seed):
    rng = np.random.default_rng(seed)
    background = seed % 2 == 1
    gt, pred, mask = _random_set(rng, 4, 12, 4, 3 + seed % 3, background)
    if background:
        gt[0, 0], mask[0, 0] = -1, True  # CTE needs a background frame
        pred[0, 0] = pred[0, 0] if pred[0, 0] != -100 else 0
    flat_gt, flat_pred = gt[mask], pred[mask]
    videos = int(np.sum(mask.any(axis=1)))
    got = _global(gt, pred, mask, 3, background)
    want = ref.cte(flat_gt, flat_pred, background=background, k=3, n_videos=videos)
    for key in ("mof", "mof_bg", "iou", "iou_bg", "f1"):
        assert _close(got[key], want[key]), (seed, key)
    for mode in ("full", "per"):
        got = _asot(gt, pred, mask, mode, background)
        rows = (
            [(gt[mask], pred[mask], videos)]
            if mode == "full"
            else [(gt[v][mask[v]], pred[v][mask[v]], 1) for v in range(len(gt))]
        )
        for i, (g, p, n) in enumerate(rows):
            want = ref.asot(g, p, exclude_background=background, n_videos=n)
            for key in ("mof", "miou", "f1"):
                value = got[key] if mode == "full" else got[key][i]
                assert _close(value, want[key]), (seed, mode, key, i)
    got = M.per_video_hungarian_scores(gt, pred, mask=mask, num_classes=C, num_clusters=K)
    for v in range(len(gt)):
        want = ref.twfinch(gt[v][mask[v]], pred[v][mask[v]])
        for key in ("mof", "iou", "f1"):
            assert _close(got[key][v], want[key]), (seed, v, key)


def test_hungarian_matching_breaks_ties_as_scipy():
    rng = np.random.default_rng(0)
    solve = jax.jit(lambda t, r, c: M.hungarian_matching(t, num_rows=r, num_cols=c))
    for _ in range(200):
        # Static shapes wide, tall and square; the live block (r x c) inside them varies on
        # every draw, and it alone decides the algorithm's path (match_block).
        R, N = rng.choice([1, 3, 6], 2)
        table = rng.integers(0, rng.integers(1, 4), (R, N)).astype(np.int32)
        r, c = int(rng.integers(0, R + 1)), int(rng.integers(0, N + 1))
        rows, cols = linear_sum_assignment(table[:r, :c], maximize=True)
        col_for_row, row_for_col = solve(table, r, c)
        want_c, want_r = np.full(R, -1), np.full(N, -1)
        want_c[rows], want_r[cols] = cols, rows
        np.testing.assert_array_equal(col_for_row, want_c)
        np.testing.assert_array_equal(row_for_col, want_r)


@pytest.mark.parametrize("rows, cols", [(1, 1), (3, 7), (6, 6), (9, 13)])
def test_shortest_augmenting_paths_pair_rows_as_scipy(rows, cols):
    # Costs of a few values (ties everywhere) and of many: the column of every row is
    # scipy's, so the search scans the columns and breaks ties as scipy does.
    rng = np.random.default_rng(rows * 100 + cols)
    high = np.repeat([2, 3, 1000], 100)[:, None, None]
    costs = (rng.random((300, rows, cols)) * high).astype(np.int32).astype(np.float32)
    got = np.asarray(jax.jit(jax.vmap(shortest_augmenting_paths))(costs))
    for cost, columns in zip(costs, got):
        np.testing.assert_array_equal(columns, linear_sum_assignment(cost)[1])


def test_hungarian_matching_of_small_blocks_in_wide_tables_breaks_ties_as_scipy():
    # Tables of 20-40 rows and columns (a video's clusters against every class) whose live
    # blocks are small once oriented, or in some batches large: every table of a vmapped
    # batch pairs its block's rows and columns as scipy does on the block alone.
    rng = np.random.default_rng(2)
    solve = jax.jit(jax.vmap(lambda t, r, c: M.hungarian_matching(t, num_rows=r, num_cols=c)))
    for small_only in (True, False, True, False):
        R, N = rng.integers(20, 41, 2)
        tables = rng.integers(0, rng.integers(1, 6), (6, R, N)).astype(np.int32)
        live = rng.integers(0, 17, (6, 2))
        live[:, rng.integers(0, 2)] = rng.integers(0, min(R, N) + 1, 6)  # wide or tall
        live = np.minimum(live, [R, N])
        if not small_only:
            live[3] = (min(R, N), min(R, N))  # one block of 20 or more rows either way
        col_for_row, row_for_col = solve(tables, live[:, 0], live[:, 1])
        for table, (r, c), got_c, got_r in zip(tables, live, col_for_row, row_for_col):
            rows, cols = linear_sum_assignment(table[:r, :c], maximize=True)
            want_c, want_r = np.full(R, -1), np.full(N, -1)
            want_c[rows], want_r[cols] = cols, rows
            np.testing.assert_array_equal(got_c, want_c)
            np.testing.assert_array_equal(got_r, want_r)


def test_hungarian_matching_vmaps():
    rng = np.random.default_rng(1)
    tables = rng.integers(0, 5, (3, 2, 4, 5)).astype(np.int32)
    col_for_row, row_for_col = jax.jit(jax.vmap(M.hungarian_matching))(tables)
    assert col_for_row.shape == (3, 2, 4) and row_for_col.shape == (3, 2, 5)
    for i in np.ndindex(3, 2):
        rows, cols = linear_sum_assignment(tables[i], maximize=True)
        np.testing.assert_array_equal(col_for_row[i][rows], cols)


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"num_rows": 3}, ValueError, r"num_rows must lie in \[0, 2\].*got 3"),
        ({"num_cols": -1}, ValueError, r"num_cols must lie in \[0, 3\].*got -1"),
        ({"num_rows": 1.5}, TypeError, "num_rows must be integers, got dtype float32"),
        ({"num_cols": [2, 3]}, ValueError, r"num_cols must be a scalar, got shape \(2,\)"),
    ],
)
def test_hungarian_matching_refuses_a_block_outside_the_table(options, error, message):
    with pytest.raises(error, match=message):
        M.hungarian_matching([[1, 5, 0], [4, 4, 1]], **options)


def test_hungarian_matching_leaves_a_row_without_a_finite_pair_unmatched():
    """-inf forbids a pair. A row whose every pair is forbidden (scipy: "infeasible") was
    given a column outside the table or the live block (col_for_row [2, 0] of a 2-column
    table; row_for_col of a column not taking part); it has none now, and the other rows
    are paired as scipy pairs the table without that row."""
    inf = np.inf
    table = np.array([[-inf, -inf, 7.0], [2.0, -inf, 1.0]], np.float32)
    for solve in (M.hungarian_matching, jax.jit(M.hungarian_matching)):
        col_for_row, row_for_col = solve(table, num_cols=2)
        rows, cols = linear_sum_assignment(table[1:, :2], maximize=True)
        assert (rows.tolist(), cols.tolist()) == ([0], [0])
        assert np.asarray(col_for_row).tolist() == [-1, 0]
        assert np.asarray(row_for_col).tolist() == [1, -1, -1]
    with pytest.raises(ValueError, match=r"^table\[1, 0\] = nan: the table must hold finite"):
        M.hungarian_matching([[1.0, 2.0], [np.nan, 0.0]])
    with pytest.raises(ValueError, match=r"^table\[0, 1\] = inf: the table must hold finite"):
        M.hungarian_matching([[1.0, inf], [3.0, 0.0]])


def test_hungarian_matching_clips_a_traced_block_to_the_table():
    table = np.array([[1, 5, 0], [4, 4, 1]])
    solve = jax.jit(lambda r, c: M.hungarian_matching(table, num_rows=r, num_cols=c))
    for (r, c), (live_r, live_c) in {(7, 9): (2, 3), (-2, 3): (0, 3), (1, 5): (1, 3)}.items():
        got, want = solve(r, c), M.hungarian_matching(table, num_rows=live_r, num_cols=live_c)
        for got_side, want_side in zip(got, want):
            np.testing.assert_array_equal(got_side, want_side)


def test_contingency_table():
    gt = np.array([[0, 0, 1, 2, -1], [1, 1, 1, 0, 0]])
    pred = np.array([[1, 1, 0, 2, 0], [2, 2, 2, 9, 1]])
    mask = np.array([[True] * 5, [True, True, True, True, False]])
    got = np.asarray(M.contingency_table(gt, pred, num_classes=3, num_clusters=3, mask=mask))
    want = np.zeros((2, 3, 3), int)
    for v in range(2):
        for g, p, m in zip(gt[v], pred[v], mask[v]):
            if m and 0 <= g < 3 and 0 <= p < 3:
                want[v, g, p] += 1
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("protocol", ["global", "asot", "per-video"])
def test_a_label_beyond_the_declared_ranges_is_named(protocol):
    """Cluster 2 with num_clusters=2 (ids counted from 1, say) was left out of the table:
    the other frames scored alone, MoF 2/3 where it is 3/4 (scipy matches cluster 2 to
    class 1). A masked frame may hold anything."""
    fn = {
        "global": M.global_hungarian_scores,
        "asot": M.asot_hungarian_scores,
        "per-video": M.per_video_hungarian_scores,
    }[protocol]
    gt, pred = np.array([[0, 0, 1, 1, 1]]), np.array([[0, 0, 2, 0, 7]])
    mask = np.array([[True, True, True, True, False]])
    with pytest.raises(ValueError, match=r"^predictions\[0, 2\] = 2 lies outside \[-1, 2\) on a "):
        fn(gt, pred, num_classes=2, num_clusters=2, mask=mask)
    with pytest.raises(ValueError, match=r"^targets\[0, 3\] = -2 lies outside \[-1, 2\) on a "):
        fn([[0, 0, 1, -2, 1]], [[0, 0, 1, 1, 1]], num_classes=2, num_clusters=2)
    got = fn(gt, pred, num_classes=2, num_clusters=3, mask=mask)
    assert float(np.asarray(got["mof"]).item()) == 0.75


@pytest.mark.parametrize(
    ("option", "value", "error", "message"),
    [
        ("segments_per_video", -2, ValueError, r"must be at least 1, got -2\.$"),
        ("segments_per_video", 0, ValueError, r"must be at least 1, got 0\.$"),
        ("segments_per_video", 2.5, TypeError, "must be integers, got dtype float32"),
        ("segments_per_video", [2, 3], ValueError, r"must be a scalar, got shape \(2,\)\."),
        ("segments_per_video", 2**31, ValueError, r"must be integers that int32 holds, got 2147"),
        ("iou_divisor", [3, 0], ValueError, r"must be at least 1, got 0 at index \(1,\)\.$"),
        ("iou_divisor", 1.5, TypeError, "must be integers, got dtype float32"),
        (
            "iou_divisor",
            [2, 2, 2],
            ValueError,
            r"must be broadcastable to shape \(2,\), got shape \(3,\)",
        ),
    ],
)
def test_divisors_outside_their_domain_are_named(option, value, error, message):
    """segments_per_video=-2 gave F1 -2.0 (0: NaN), 2.5 was taken as is; an iou_divisor of 0
    gave NaN, and one of the wrong shape an error about broadcasting that named nothing."""
    fn = {
        "segments_per_video": M.global_hungarian_scores,
        "iou_divisor": M.per_video_hungarian_scores,
    }[option]
    gt, pred = [[0, 0, 1, 1], [1, 1, 0, 0]], [[1, 1, 0, 0], [0, 0, 0, 1]]
    with pytest.raises(error, match=f"^{option} {message}"):
        fn(gt, pred, num_classes=2, num_clusters=2, **{option: value})


@pytest.mark.parametrize("segments", [2**30, 2**31 - 1])
def test_f1s_precision_takes_k_times_the_videos_without_wrapping(segments):
    """K * V was an int32 product: K = 2**31 - 1 over 2 videos gave F1 600%, 2**30 a
    negative F1."""
    gt, pred = [[0, 0, 1, 1], [1, 1, 0, 0]], [[1, 1, 0, 0], [0, 0, 1, 1]]
    fn = functools.partial(M.global_hungarian_scores, gt, pred, num_classes=2, num_clusters=2)
    small, got = fn(segments_per_video=2), fn(segments_per_video=segments)
    correct_runs = float(small["precision"]) * 2 * 2  # precision = correct runs / (K V)
    precision = correct_runs / (2.0 * segments)
    np.testing.assert_allclose(float(got["precision"]), precision, rtol=1e-6)
    recall = float(got["recall"])
    assert recall == float(small["recall"]) > 0
    np.testing.assert_allclose(
        float(got["f1"]), 2 * precision * recall / (precision + recall), rtol=1e-6
    )


def test_64_bit_labels_beyond_int32_are_left_out_not_wrapped():
    """Under jax_enable_x64 the labels were narrowed to int32 before their range was
    tested: cluster 2**32 + 1 counted as cluster 1, target 2**32 as class 0."""
    gt = np.array([0, 0, 1, 1, 2**32], np.int64)
    pred = np.array([0, 0, 2**32 + 1, 1, 0], np.int64)
    with jax.enable_x64():
        got = np.asarray(M.contingency_table(gt, pred, num_classes=2, num_clusters=2))
        # Under jit (called directly it names them): the frames outside are left out.
        cte = jax.jit(functools.partial(M.global_hungarian_scores, num_classes=2, num_clusters=2))
        mof = cte(gt, pred)["mof"]
    np.testing.assert_array_equal(got, [[2, 0], [0, 1]])  # frames 2 and 4 left out
    assert float(mof) == 1.0  # 3 of the 3 frames inside the ranges


# ------------------------------------------------------------------------------------------
# Degenerate cases


def _all(gt, pred, mask=None, background=False):
    gt, pred = np.asarray(gt, np.int32), np.asarray(pred, np.int32)
    kw = dict(mask=mask, num_classes=C, num_clusters=K)
    return (
        M.global_hungarian_scores(gt, pred, exclude_background=background, **kw),
        M.asot_hungarian_scores(gt, pred, mode="full", exclude_background=background, **kw),
        M.per_video_hungarian_scores(gt, pred, **kw),
    )


def test_one_cluster():
    cte, asot, finch = _all([[0, 0, 1, 1, 1, 2]], [[0, 0, 0, 0, 0, 0]])
    assert _close(cte["mof"], 0.5) and _close(asot["mof"], 0.5)
    assert _close(finch["mof"][0], 0.5)
    assert _close(asot["miou"], 0.5 / 3)  # one matched pair (class 1), three classes
    assert _close(cte["iou"], 0.5 / 3)


def test_more_clusters_than_frames():
    gt, pred = [[3, 3, 5]], [[0, 7, 11]]
    for got, want in zip(_all(gt, pred), (ref.cte, ref.asot, ref.twfinch)):
        g, p = np.array(gt[0]), np.array(pred[0])
        kw = {
            ref.cte: dict(background=False, k=K, n_videos=1),
            ref.asot: dict(exclude_background=False, n_videos=1),
            ref.twfinch: {},
        }[want]
        expected = want(g, p, **kw)
        for key in ("mof", "f1"):
            value = got[key][0] if want is ref.twfinch else got[key]
            assert _close(value, expected[key]), (want.__name__, key)


def test_empty_and_padding_rows():
    gt = np.array([[1, 1, 2, 2], [0, 0, 0, 0], [5, 5, 5, 5]], np.int32)
    pred = np.array([[0, 0, 1, 1], [3, 3, 3, 3], [4, 4, 4, 4]], np.int32)
    mask = np.array([[True] * 4, [False] * 4, [True, True, False, False]])
    cte, asot, finch = _all(gt, pred, mask)
    sliced = _all(gt[[0, 2]], pred[[0, 2]], mask[[0, 2]])  # the padding row removed
    for a, b in zip((cte, asot), sliced[:2]):
        for key in ("mof", "f1"):
            assert _close(a[key], b[key]), key
    assert np.isnan(np.asarray(finch["mof"])[1]) and np.isnan(np.asarray(finch["f1"])[1])
    # No valid frame at all: every score NaN, nothing raises.
    for got in _all(gt, pred, np.zeros_like(mask)):
        assert all(np.isnan(np.asarray(got[k])).all() for k in ("mof", "f1"))


def test_all_background():
    gt, pred = [[-1, -1, -1]], [[-1, 0, 0]]
    cte, asot, _ = _all(gt, pred, background=True)
    assert np.isnan(cte["mof"]) and np.isnan(cte["iou"]) and np.isnan(cte["f1"])
    assert _close(cte["mof_bg"], 1 / 3)
    assert np.isnan(asot["mof"]) and np.isnan(asot["miou"]) and np.isnan(asot["f1"])


def test_background_without_background_frames_is_plain():
    gt, pred = [[0, 0, 1, 1, 2]], [[1, 1, 0, 0, 0]]
    on, off = _all(gt, pred, background=True), _all(gt, pred, background=False)
    for key in ("mof", "mof_bg", "iou", "iou_bg", "f1"):
        assert _close(on[0][key], off[0][key]), key


# ------------------------------------------------------------------------------------------
# jit / vmap and batching invariance


def test_jit_vmap_over_sets():
    rng = np.random.default_rng(3)
    sets = [_random_set(rng, 3, 10, 4, 4, False) for _ in range(2)]
    gt, pred, mask = (np.stack(x) for x in zip(*sets))

    def scores(g, p, m):
        return M.global_hungarian_scores(g, p, mask=m, num_classes=C, num_clusters=K)["mof"]

    batched = jax.jit(jax.vmap(scores))(gt, pred, mask)
    for i in range(2):
        assert _close(batched[i], scores(gt[i], pred[i], mask[i]))


@pytest.mark.parametrize("protocol", ["cte", "asot"])
def test_global_accumulator_is_batch_invariant(protocol):
    rng = np.random.default_rng(4)
    gt, pred, mask = _random_set(rng, 7, 16, 5, 4, True)
    gt[0, 0], mask[0, 0] = -1, True
    acc = streaming.global_hungarian(
        num_classes=C, num_clusters=K, protocol=protocol, exclude_background=True
    )
    update = jax.jit(acc.update)
    results = []
    for splits in ([7], [1, 6], [3, 2, 2], [1] * 7):
        state, start = acc.init(), 0
        for size in splits:
            state = update(
                state,
                gt[start : start + size],
                pred[start : start + size],
                mask=mask[start : start + size],
            )
            start += size
        results.append(jax.jit(acc.compute)(state))
    if protocol == "cte":
        whole = M.global_hungarian_scores(
            gt, pred, mask=mask, num_classes=C, num_clusters=K, exclude_background=True
        )
    else:
        whole = M.asot_hungarian_scores(
            gt, pred, mask=mask, num_classes=C, num_clusters=K, exclude_background=True
        )
    for result in results:
        for key in ("mof", "mof_bg", "iou", "iou_bg", "miou"):
            if key in result:
                assert float(result[key]) == float(results[0][key])
                assert _close(result[key], whole[key])
        np.testing.assert_array_equal(result["class_cluster"], whole["class_cluster"])


@pytest.mark.parametrize("protocol", ["twfinch", "asot"])
def test_per_video_accumulator_is_batch_invariant(protocol):
    rng = np.random.default_rng(5)
    gt, pred, mask = _random_set(rng, 6, 16, 5, 4, protocol == "asot")
    acc = streaming.per_video_hungarian(num_classes=C, num_clusters=K, protocol=protocol)
    results = []
    for splits in ([6], [2, 4], [1] * 6):
        state, start = acc.init(), 0
        for size in splits:
            sl = slice(start, start + size)
            state = acc.update(state, gt[sl], pred[sl], mask=mask[sl])
            start += size
        results.append(acc.compute(state))
    if protocol == "twfinch":
        per = M.per_video_hungarian_scores(gt, pred, mask=mask, num_classes=C, num_clusters=K)
    else:
        per = M.asot_hungarian_scores(
            gt, pred, mask=mask, num_classes=C, num_clusters=K, mode="per"
        )
    for result in results:
        for key in result:
            if key == "videos":
                continue
            assert float(result[key]) == float(results[0][key])
            values = np.asarray(per[key], np.float64)[mask.any(axis=1)]
            assert _close(result[key], np.nanmean(values), 1e-6)


def test_per_video_accumulator_refuses_the_other_protocols_option():
    """exclude_background=True with TW-FINCH and iou_divisor= with ASOT were silently
    ignored: the means kept the background frames, and the divisor changed nothing."""
    with pytest.raises(ValueError, match=r"^exclude_background is ASOT's \(protocol='asot'\)"):
        streaming.per_video_hungarian(num_classes=2, num_clusters=2, exclude_background=True)
    acc = streaming.per_video_hungarian(num_classes=2, num_clusters=2, protocol="asot")
    with pytest.raises(ValueError, match=r"^iou_divisor is TW-FINCH's \(protocol='twfinch'\)"):
        acc.update(acc.init(), [[0, 0, 1, 1]], [[1, 1, 0, 0]], iou_divisor=3)


@functools.partial(jax.jit, static_argnames=("num_classes", "num_clusters"))
def _tables(targets, predictions, mask, num_classes, num_clusters):
    """The tables by runs (per row and pooled) and the plain frame-by-frame ones, per row."""
    from jaxseg._src.unsupervised import label_tables, pair_table, shifted_labels

    args = (targets, predictions, mask, num_classes, num_clusters)
    per_row, pooled = (label_tables(*args, pooled=pooled) for pooled in (False, True))

    def plain(t, p, m):
        table = functools.partial(pair_table, num_rows=num_classes + 1, num_cols=num_clusters + 1)
        return table(*shifted_labels(t, p, m, num_classes, num_clusters))

    return per_row, pooled, jax.vmap(plain)(targets, predictions, mask)


@given(
    specs=st.lists(video_specs(T_MAX), min_size=6, max_size=6),
    sizes=st.sampled_from(((1, 1), (7, 3), (C_MAX, 9))),
    shift=st.integers(0, 2),
    prefix_only=st.booleans(),
)
def test_label_tables_by_runs_equal_the_frame_by_frame_table(specs, sizes, shift, prefix_only):
    """Bit for bit, per row and pooled, with labels outside [-1, C) and [-1, K) left out
    (C, K below the videos' labels; a shift by -2 below -1), masks with gaps or prefixes,
    garbage padding; the plain table equals a numpy count."""
    targets, predictions, mask, _ = pad_batch(specs, T_MAX)
    if prefix_only:
        mask = np.arange(T_MAX) < mask.sum(axis=1, keepdims=True)
    targets, predictions = targets - shift, predictions - 1
    per_row, pooled, plain = _tables(targets, predictions, mask, *sizes)
    np.testing.assert_array_equal(per_row, plain)
    np.testing.assert_array_equal(pooled, np.asarray(plain).sum(axis=0))
    rows, cols = sizes[0] + 1, sizes[1] + 1
    for row, (y, p, m) in enumerate(zip(targets + 1, predictions + 1, mask)):
        kept = m & (y >= 0) & (y < rows) & (p >= 0) & (p < cols)
        expected = np.zeros((rows, cols), np.int64)
        np.add.at(expected, (y[kept], p[kept]), 1)
        np.testing.assert_array_equal(plain[row], expected)


def test_exclude_background_must_be_a_bool():
    """``exclude_background="no"`` was taken as True (``bool("no")``), silently, by the
    metrics and the accumulators alike."""
    gt, pred = np.array([[0, 1, 1]]), np.array([[1, 0, 0]])
    sizes = dict(num_classes=2, num_clusters=2)
    calls = (
        lambda: M.global_hungarian_scores(gt, pred, exclude_background="no", **sizes),
        lambda: M.asot_hungarian_scores(gt, pred, exclude_background="no", **sizes),
        lambda: streaming.global_hungarian(exclude_background="no", **sizes),
        lambda: streaming.per_video_hungarian(protocol="asot", exclude_background="no", **sizes),
    )
    for call in calls:
        with pytest.raises(TypeError, match=r"^exclude_background must be True or False, got 'no'"):
            call()
