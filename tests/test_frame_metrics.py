"""Tests of the frame-level metrics: accuracy, confusion matrix, precision/recall/F1."""

from __future__ import annotations

import functools
import math

import _reference as ref
import jax
import numpy as np
import pytest
from _videos import pad_batch, pad_rows, video_specs
from hypothesis import given
from hypothesis import strategies as st

from jaxseg import metrics as M
from jaxseg._src.frame import class_totals_by_runs, confusion_by_runs, count_classes, count_pairs

AVERAGES = ("none", "micro", "macro", "weighted")
SCORES = {"precision": M.precision, "recall": M.recall, "f1": M.f1_score}
HAND_T, HAND_C = 8, 5
BATCH, T_MAX, C_MAX = 16, 3000, 200


@functools.partial(jax.jit, static_argnames="num_classes")
def _frame(targets, predictions, mask, num_classes):
    """Every frame metric for one padded batch (one compile per num_classes)."""
    kw = dict(mask=mask, num_classes=num_classes)
    out = {
        "accuracy": M.accuracy(targets, predictions, mask=mask),
        "confusion_matrix": M.confusion_matrix(targets, predictions, **kw),
        "class_accuracy": M.class_accuracy(targets, predictions, **kw),
    }
    for name, fn in SCORES.items():
        for average in AVERAGES:
            out[f"{name}_{average}"] = fn(targets, predictions, average=average, **kw)
    return out


def _row(tree, i):
    return jax.tree.map(lambda x: x[i], tree)


# ------------------------------------------------------------------------------------------
# Hand-computed cases (C = 5).

T, F = True, False
N = math.nan
HAND = {
    # class 0: TP 1, FP 0, FN 1; class 1: TP 2, FP 1, FN 0; class 2: only in targets;
    # class 3: only predicted; class 4: absent from both (NaN, left out of the means).
    "mixed": ([0, 0, 1, 1, 2], [0, 1, 1, 1, 3], None),
    "perfect": ([2, 2, 2, 4], [2, 2, 2, 4], None),
    # Masked frames are removed: the same as "perfect" once frames 2 and 3 are dropped.
    "masked": ([2, 2, 0, 1, 2, 4], [2, 2, 1, 1, 2, 4], [T, T, F, F, T, T]),
    "fully_masked": ([1, 2], [1, 2], [F, F]),
    "all_wrong": ([0, 0, 0], [1, 1, 1], None),
}
EXPECTED = {
    "mixed": dict(
        accuracy=3 / 5,
        precision=[1, 2 / 3, 0, 0, N],
        recall=[1 / 2, 1, 0, 0, N],
        f1=[2 / 3, 4 / 5, 0, 0, N],
        precision_macro=(1 + 2 / 3) / 4,
        recall_macro=(1 / 2 + 1) / 4,
        f1_macro=(2 / 3 + 4 / 5) / 4,
        precision_weighted=(2 * 1 + 2 * 2 / 3) / 5,
        recall_weighted=3 / 5,
        f1_weighted=(2 * 2 / 3 + 2 * 4 / 5) / 5,
        cm=[[1, 1, 0, 0, 0], [0, 2, 0, 0, 0], [0, 0, 0, 1, 0], [0] * 5, [0] * 5],
    ),
    "perfect": dict(
        accuracy=1.0,
        precision=[N, N, 1, N, 1],
        recall=[N, N, 1, N, 1],
        f1=[N, N, 1, N, 1],
        precision_macro=1.0,
        recall_macro=1.0,
        f1_macro=1.0,
        precision_weighted=1.0,
        recall_weighted=1.0,
        f1_weighted=1.0,
        cm=[[0] * 5, [0] * 5, [0, 0, 3, 0, 0], [0] * 5, [0, 0, 0, 0, 1]],
    ),
    "fully_masked": dict(
        accuracy=N,
        precision=[N] * 5,
        recall=[N] * 5,
        f1=[N] * 5,
        precision_macro=N,
        recall_macro=N,
        f1_macro=N,
        precision_weighted=N,
        recall_weighted=N,
        f1_weighted=N,
        cm=[[0] * 5] * 5,
    ),
    "all_wrong": dict(
        accuracy=0.0,
        precision=[0, 0, N, N, N],
        recall=[0, 0, N, N, N],
        f1=[0, 0, N, N, N],
        precision_macro=0.0,
        recall_macro=0.0,
        f1_macro=0.0,
        precision_weighted=0.0,
        recall_weighted=0.0,
        f1_weighted=0.0,
        cm=[[0, 3, 0, 0, 0]] + [[0] * 5] * 4,
    ),
}
EXPECTED["masked"] = EXPECTED["perfect"]


@functools.cache
def _hand_results():
    rows = list(HAND.values())
    (targets, predictions), mask = pad_rows([r[:2] for r in rows], HAND_T, [r[2] for r in rows])
    out = jax.device_get(_frame(targets, predictions, mask, HAND_C))
    return {name: _row(out, i) for i, name in enumerate(HAND)}


def _close(got, want):
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-6, atol=0)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_hand_case(name):
    got, want = _hand_results()[name], EXPECTED[name]
    _close(got["accuracy"], want["accuracy"])
    np.testing.assert_array_equal(got["confusion_matrix"], want["cm"])
    _close(got["class_accuracy"], want["recall"])
    for score in SCORES:
        _close(got[f"{score}_none"], want[score])
        _close(got[f"{score}_macro"], want[f"{score}_macro"])
        _close(got[f"{score}_weighted"], want[f"{score}_weighted"])
        _close(got[f"{score}_micro"], want["accuracy"])  # single-label: micro = accuracy


@pytest.mark.parametrize("name", list(EXPECTED))
def test_hand_case_reference(name):
    """The reference reproduces the hand values too."""
    y, p, mask = HAND[name]
    want = EXPECTED[name]
    assert ref.accuracy(y, p, mask) == pytest.approx(want["accuracy"], nan_ok=True)
    np.testing.assert_array_equal(ref.confusion_matrix(y, p, HAND_C, mask), want["cm"])
    for score in SCORES:
        for average in ("none", "macro", "weighted"):
            key = score if average == "none" else f"{score}_{average}"
            np.testing.assert_allclose(
                ref.average_scores(y, p, HAND_C, score, average, mask), want[key], rtol=1e-12
            )


def test_output_dtypes():
    got = _hand_results()["mixed"]
    assert got["confusion_matrix"].dtype == np.int32
    for key, value in got.items():
        if key != "confusion_matrix":
            assert value.dtype == np.float32, key


def test_any_integer_dtype():
    """Labels may have any integer dtype, and targets and predictions may differ."""
    y = np.array([0, 0, 1, 1, 2], np.uint8)
    p = np.array([0, 1, 1, 1, 3], np.int16)
    cm = jax.jit(functools.partial(M.confusion_matrix, num_classes=HAND_C))(y, p)
    np.testing.assert_array_equal(cm, EXPECTED["mixed"]["cm"])
    assert float(jax.jit(M.accuracy)(y, p)) == pytest.approx(3 / 5)


def test_labels_beyond_int32_are_never_truncated():
    """64-bit labels JAX would store in 32 bits raise instead of wrapping onto a real label
    (2**32 + 1 used to score as label 1); where JAX can hold them they compare exactly."""
    import jax.numpy as jnp

    from jaxseg import streaming

    for targets in ([2**32 + 1], np.array([2**32 + 1]), np.array([-(2**40)], np.int64)):
        with pytest.raises(ValueError, match=r"targets holds value .* outside the int32 range"):
            M.accuracy(targets, [1])
    with pytest.raises(ValueError, match="predictions holds value"):
        M.confusion_matrix([1], np.array([2**32 + 1], np.uint64), num_classes=3)
    acc = streaming.frame_metrics(num_classes=3)
    with pytest.raises(ValueError, match="targets holds value"):
        acc.update(acc.init(), np.array([[2**32 + 1]]), np.array([[1]]))
    # In range, 64-bit and 32-bit host labels mix freely.
    assert float(M.accuracy(np.array([3, 2**31 - 1], np.int64), np.array([3, 0], np.uint32))) == 0.5
    # Traced uint32 against signed labels has no exact 32-bit dtype: refused, not wrapped.
    with pytest.raises(TypeError, match="no common integer dtype"):
        jax.jit(M.accuracy)(jnp.array([2**31], jnp.uint32), jnp.array([-(2**31)], jnp.int32))
    with jax.enable_x64():
        assert float(M.accuracy(np.array([2**32 + 1]), np.array([1], np.int32))) == 0.0
        assert float(M.accuracy(jnp.array([2**32 + 1]), jnp.array([2**32 + 1]))) == 1.0
        # uint64 against int64 is refused for lack of int128, not of x64 (which is on)
        with pytest.raises(TypeError, match=r"uint64\) and predictions \(int64.*no int128"):
            M.accuracy(np.array([2**63], np.uint64), np.array([-(2**40)], np.int64))


def test_errors_name_the_argument():
    y = np.array([0, 1, 2], np.int32)
    with pytest.raises(TypeError, match="targets"):
        M.accuracy(np.array([0.0, 1.0, 2.0]), y)
    with pytest.raises(ValueError, match="predictions"):
        M.confusion_matrix(y, np.array([0, 1], np.int32), num_classes=3)
    with pytest.raises(ValueError, match="average"):
        M.precision(y, y, num_classes=3, average="samples")
    with pytest.raises(ValueError, match="num_classes"):
        M.recall(y, y, num_classes=0)
    with pytest.raises(TypeError, match="num_classes"):
        M.f1_score(y, y, num_classes=3.0)
    with pytest.raises(TypeError, match="mask"):
        M.class_accuracy(y, y, num_classes=3, mask=np.array([1, 1, 0]))


def test_labels_outside_the_classes_raise_outside_jit():
    """A label outside [0, C) on a valid frame was left out of the confusion matrix, so a
    prediction outside raised the recall: [0, 0, 0, 1] predicted as [0, 2, 2, 1] scored
    recall [1, 1], where scikit-learn's ``labels=range(2)`` gives [1/3, 1]. Called outside
    jit, the class metrics now raise; a masked or ignored frame may hold any label."""
    y, p = np.array([0, 0, 0, 1]), np.array([0, 2, 2, 1])
    outside_p = r"^predictions\[1\] = 2 lies outside \[0, 2\) on a valid frame \(num_classes\)"
    for metric in (M.confusion_matrix, M.precision, M.recall, M.f1_score, M.class_accuracy):
        with pytest.raises(ValueError, match=outside_p):
            metric(y, p, num_classes=2)
        with pytest.raises(ValueError, match=r"^targets\[0, 1\] = -1 lies outside \[0, 2\)"):
            metric(np.array([[0, -1]]), np.array([[0, 0]]), num_classes=2)
    masked = M.confusion_matrix(y, p, num_classes=2, mask=np.array([True, False, False, True]))
    assert np.asarray(masked).tolist() == [[1, 0], [0, 1]]
    ignored = M.recall([0, -100, -100, 1], p, num_classes=2, ignore_index=-100, average="none")
    assert np.asarray(ignored).tolist() == [1.0, 1.0]
    # Inside jit the range is a precondition, not checked (as documented).
    traced = jax.jit(functools.partial(M.recall, num_classes=2, average="none"))(y, p)
    assert np.asarray(traced).tolist() == [1.0, 1.0]


# ------------------------------------------------------------------------------------------
# The reference agrees with scikit-learn where their conventions coincide.


@pytest.mark.filterwarnings("ignore:A single label was found")
def test_reference_matches_scikit_learn():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(1)
    for _ in range(40):
        c = int(rng.integers(1, 8))
        n = int(rng.integers(1, 30))
        y, p = rng.integers(0, c, n), rng.integers(0, c, n)
        present = np.union1d(y, p)  # sklearn's labels= excludes absent classes like we do
        np.testing.assert_array_equal(
            ref.confusion_matrix(y, p, c), metrics.confusion_matrix(y, p, labels=range(c))
        )
        for score, fn in (
            ("precision", metrics.precision_score),
            ("recall", metrics.recall_score),
            ("f1", metrics.f1_score),
        ):
            for average in ("macro", "weighted", "micro"):
                want = fn(y, p, labels=present, average=average, zero_division=0)
                got = ref.average_scores(y, p, c, score, average)
                assert got == pytest.approx(want, rel=1e-12), (score, average)


# ------------------------------------------------------------------------------------------
# Parity with the reference on random batches [16, 3000] with num_classes = 200 (classes the
# videos do not use are absent: NaN per class and left out of the means).


@given(specs=st.lists(video_specs(T_MAX), min_size=BATCH, max_size=BATCH))
def test_matches_reference(specs):
    targets, predictions, mask, videos = pad_batch(specs, T_MAX)
    out = jax.device_get(_frame(targets, predictions, mask, C_MAX))
    for i, (y, p, m) in enumerate(videos):
        got = _row(out, i)
        _close(got["accuracy"], ref.accuracy(y, p, m))
        np.testing.assert_array_equal(got["confusion_matrix"], ref.confusion_matrix(y, p, C_MAX, m))
        _close(got["class_accuracy"], ref.class_accuracy(y, p, C_MAX, m))
        for score in SCORES:
            for average in AVERAGES:
                _close(
                    got[f"{score}_{average}"], ref.average_scores(y, p, C_MAX, score, average, m)
                )


@functools.partial(jax.jit, static_argnames="num_classes")
def _confusions(targets, predictions, mask, num_classes):
    """The fast kernels (the matrices per row and pooled, the class totals per row) and the
    plain frame-by-frame counts, per row."""
    per_row = confusion_by_runs(targets, predictions, mask, num_classes, pooled=False)
    pooled = confusion_by_runs(targets, predictions, mask, num_classes, pooled=True)
    totals = class_totals_by_runs(targets, predictions, mask, num_classes)
    frames = (targets, predictions, mask.astype(np.int32), num_classes)
    plain = jax.vmap(count_pairs, in_axes=(0, 0, 0, None))(*frames)
    plain_totals = jax.vmap(count_classes, in_axes=(0, 0, 0, None))(*frames)
    return (per_row, pooled, plain), (totals, plain_totals)


def _assert_runs_equal_frames(targets, predictions, mask, num_classes):
    (per_row, pooled, plain), (totals, plain_totals) = _confusions(
        targets, predictions, mask, num_classes
    )
    np.testing.assert_array_equal(per_row, plain)
    np.testing.assert_array_equal(pooled, np.asarray(plain).sum(axis=0))
    np.testing.assert_array_equal(totals, plain_totals)
    return np.asarray(plain_totals)


@given(
    specs=st.lists(video_specs(T_MAX), min_size=6, max_size=6),
    num_classes=st.sampled_from((1, 7, C_MAX)),
    shift=st.integers(0, 1),
    prefix_only=st.booleans(),
)
def test_counts_by_runs_equal_the_frame_by_frame_counts(specs, num_classes, shift, prefix_only):
    """The confusion matrices and the class totals, bit for bit, with labels outside [0, C)
    left out (C = 1 or 7 below the videos' labels, a shift by -1 below 0), masks with gaps or
    prefixes, garbage padding; the plain class totals equal the numpy oracle's."""
    targets, predictions, mask, _ = pad_batch(specs, T_MAX)
    if prefix_only:  # the bounds are not ranked among the valid frames (no row has a gap)
        mask = np.arange(T_MAX) < mask.sum(axis=1, keepdims=True)
    targets = targets - shift
    plain_totals = _assert_runs_equal_frames(targets, predictions, mask, num_classes)
    for row, (y, p, m) in enumerate(zip(targets, predictions, mask)):
        expected = ref.class_totals(y, p, num_classes, m)
        np.testing.assert_array_equal(plain_totals[row], expected)


@pytest.mark.parametrize("gaps", [False, True])
def test_confusion_by_runs_of_sequences_counted_in_pieces(gaps):
    """Sequences longer than a piece (``_PIECE_WORDS`` words) are cut into pieces side by
    side: runs across the cuts, masks with gaps, each row's own matrix and the pooled one."""
    from jaxseg._src.frame import _PIECE_WORDS

    piece = _PIECE_WORDS * 32
    rng = np.random.default_rng(7)
    T = 2 * piece + 1000
    runs = rng.integers(1, 3000, size=(3, 200)).cumsum(axis=1)
    targets = np.searchsorted(runs[0], np.arange(T)) % 9
    targets = np.stack([targets, np.roll(targets, 5000), targets[::-1]])
    predictions = np.where(rng.random((3, T)) < 0.001, 4, targets).astype(np.int32)
    mask = np.arange(T) < np.array([[T], [T - 7], [piece]])
    if gaps:
        mask &= np.repeat(rng.random((3, T // 100 + 1)) < 0.8, 100, axis=1)[:, :T]
    _assert_runs_equal_frames(targets.astype(np.int32), predictions, mask, 9)


def test_label_range_checks_do_not_wrap_the_bound_into_a_narrow_dtype():
    """``int8 < 200`` compares with -56 in JAX; the range checks of top-k, retrieval, dense
    and detection compare without wrapping, so label 100 of 200 classes stays valid."""
    import jax.numpy as jnp

    from jaxseg._src import checks

    labels = jnp.array([-1, 0, 100, 127], jnp.int8)
    assert checks.in_label_range(labels, 200).tolist() == [False, True, True, True]
    assert checks.in_label_range(labels, 100).tolist() == [False, True, False, False]
    assert checks.in_label_range(jnp.array([0, 255], jnp.uint8), 300).tolist() == [True, True]
    scores = np.zeros((1, 200), np.float32)
    scores[0, 100] = 1.0
    assert float(M.top_k_accuracy(np.array([100], np.int8), scores, k=1)[0]) == 1.0
    sim = np.zeros((1, 200), np.float32)
    sim[0, 100] = 1.0
    assert float(M.recall_at_k(sim, targets=np.array([100], np.int8), k=1)[0]) == 1.0
    target = np.array([[100, 3]], np.int8)
    assert float(M.pixel_accuracy(target, target, num_classes=200)) == 1.0
    seg = np.array([[[0.0, 1.0]]], np.float32)
    ap = M.detection_average_precision(
        seg, np.array([[100]], np.int8), seg, np.array([[100]], np.int8), np.ones((1, 1)),
        num_classes=200, iou_thresholds=(0.5,),
    )  # fmt: skip
    assert float(ap.per_class[100, 0]) == 1.0


def test_ignore_index_removes_pytorch_padding_frames():
    """Frames labelled ``ignore_index`` leave every frame metric, as if they were cut out."""
    rng = np.random.default_rng(20)
    C, T = 5, 300
    targets = rng.integers(0, C, (4, T))
    predictions = np.where(rng.random((4, T)) < 0.6, targets, rng.integers(0, C, (4, T)))
    targets[rng.random((4, T)) < 0.3] = -100
    targets[3] = -100  # a row of padding only
    kw = dict(num_classes=C, ignore_index=-100)
    got = {
        "accuracy": M.accuracy(targets, predictions, ignore_index=-100),
        "cm": M.confusion_matrix(targets, predictions, **kw),
        "class_accuracy": M.class_accuracy(targets, predictions, **kw),
        "recall": M.recall(targets, predictions, average="none", **kw),
        "f1": M.f1_score(targets, predictions, **kw),
    }
    for k in range(4):
        keep = targets[k] != -100
        t, p = targets[k][keep], predictions[k][keep]
        want_cm = np.zeros((C, C), np.int64)
        np.add.at(want_cm, (t, p), 1)
        np.testing.assert_array_equal(np.asarray(got["cm"][k]), want_cm)
        want_accuracy = np.mean(t == p) if keep.any() else np.nan
        np.testing.assert_allclose(float(got["accuracy"][k]), want_accuracy, rtol=1e-6)
        support = want_cm.sum(1)
        with np.errstate(invalid="ignore", divide="ignore"):
            recall = np.diag(want_cm) / support
        recall[(support == 0) & (want_cm.sum(0) > 0)] = 0.0
        np.testing.assert_allclose(np.asarray(got["recall"][k]), recall, rtol=1e-6)
        np.testing.assert_allclose(np.asarray(got["class_accuracy"][k]), recall, rtol=1e-6)
        want_f1 = ref.average_scores(t, p, C, "f1", "macro")
        np.testing.assert_allclose(float(got["f1"][k]), want_f1, rtol=1e-6)
    assert np.isnan(float(got["accuracy"][3]))
    # Without ignore_index, -100 is a label like any other: it counts as a missed frame.
    plain = np.asarray(M.accuracy(targets[:1], predictions[:1]))
    np.testing.assert_allclose(plain, np.mean(targets[0] == predictions[0]), rtol=1e-6)


def test_ignore_index_outside_the_label_dtype_ignores_nothing():
    """uint8 label 156 is not -100: comparing in the labels' dtype would wrap -100 onto it."""
    targets = np.array([0, 156, 156, 1], np.uint8)
    predictions = np.array([0, 156, 0, 0], np.uint8)
    got = float(M.accuracy(targets, predictions, ignore_index=-100))
    assert got == np.mean(targets == predictions)
    kept = float(M.accuracy(targets, predictions, ignore_index=156))
    assert kept == np.mean(targets[[0, 3]] == predictions[[0, 3]])
    with pytest.raises(TypeError, match="ignore_index"):
        M.accuracy(targets, predictions, ignore_index=1.5)


@pytest.mark.parametrize(
    "metric",
    [
        functools.partial(M.confusion_matrix, num_classes=3),
        functools.partial(M.precision, num_classes=3),
        functools.partial(M.f1_score, num_classes=3, average="weighted"),
        functools.partial(M.class_accuracy, num_classes=3),
        functools.partial(M.contingency_table, num_classes=3, num_clusters=4),
        functools.partial(M.per_video_hungarian_scores, num_classes=3, num_clusters=4),
    ],
)
def test_a_batch_of_no_sequences_gives_no_values(metric):
    """B = 0: empty results, directly and under jit, as accuracy gives (it raised
    ZeroDivisionError when the runs' steps were reshaped into zero rows)."""
    labels = np.zeros((0, 5), np.int32)
    for fn in (metric, jax.jit(metric)):
        for leaf in jax.tree_util.tree_leaves(fn(labels, labels)):
            assert leaf.shape[0] == 0


def test_accuracy_is_the_correctly_rounded_quotient_whatever_the_batch():
    """Without a mask every row has T frames; XLA divided by that one number as a product
    with its reciprocal, 1 ulp off for most counts (9 / 10 read 0.90000004 in a batch of 2)."""
    T = 200
    correct = np.arange(T + 1)
    targets = np.zeros((T + 1, T), np.int32)
    predictions = (np.arange(T)[None, :] >= correct[:, None]).astype(np.int32)
    want = correct.astype(np.float32) / np.float32(T)
    for fn in (M.accuracy, jax.jit(M.accuracy), jax.vmap(M.accuracy)):
        np.testing.assert_array_equal(np.asarray(fn(targets, predictions)), want)
