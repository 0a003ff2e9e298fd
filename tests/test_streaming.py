"""Streaming accumulators: batching-independence, merge algebra, exact counts, reference values.

Every jitted update runs on one padded shape ``[B, T]`` (plus ``[1, T]`` once), so JAX compiles
a handful of programs; a "chunk" of a batch is the same arrays with the other rows masked out.
Values are compared with the numpy oracle of ``tests/_reference.py``.
"""

from __future__ import annotations

import math
import os

import _reference as ref
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _jaxprs import compilations
from _streaming_cases import grounding_cases, ranking_cases
from _videos import CORRUPTIONS, VideoSpec, pad_batch, pad_rows
from hypothesis import given
from hypothesis import strategies as st

from jaxseg import streaming
from jaxseg._src import counting

C = 6
B = 8
T = 48
CHUNKS = 4
OVERLAPS = (0.1, 0.25, 0.5)
BACKGROUND = (0,)
AVERAGES = ("micro", "macro", "weighted", "none")

SEGMENTATION = streaming.segmentation(num_classes=C, iou_thresholds=OVERLAPS, background=BACKGROUND)
FRAMES = streaming.frame_metrics(num_classes=C)
UPDATE = jax.jit(SEGMENTATION.update)
FRAME_UPDATE = jax.jit(FRAMES.update)
MERGE = jax.jit(SEGMENTATION.merge)

specs = st.builds(
    VideoSpec,
    length=st.one_of(st.integers(1, 8), st.integers(1, T)),
    num_classes=st.integers(1, C),
    segment_length=st.sampled_from([1, 2, 4, 10, 40]),
    background=st.sampled_from([0.0, 0.3, 1.0]),
    corruption=st.sampled_from(CORRUPTIONS),
    noise=st.sampled_from([0.05, 0.3]),
    mask=st.sampled_from(["prefix", "prefix", "holes", "empty"]),
    seed=st.integers(0, 2**32 - 1),
)
batches = st.lists(specs, min_size=B, max_size=B)


def _is_count(x):
    return isinstance(x, counting.Count)


def exact(state) -> list:
    """Every count of a state as exact host integers (numpy int64 arrays)."""
    return [np.asarray(streaming.to_int(c)) for c in jax.tree.leaves(state, is_leaf=_is_count)]


def assert_same_state(a, b):
    for x, y in zip(exact(a), exact(b), strict=True):
        np.testing.assert_array_equal(x, y)


def chunk_masks(mask, chunk_of_row):
    """One mask per chunk: the rows of the other chunks become padding (all False)."""
    chunk_of_row = np.asarray(chunk_of_row)
    return [mask & (chunk_of_row == c)[:, None] for c in range(CHUNKS)]


def reference_results(y, p, m) -> dict:
    """The MS-TCN dataset numbers and pooled frame metrics of a padded batch, by the oracle."""
    rows = [i for i in range(len(y)) if m[i].any()]
    counts = [ref.segmental_counts(y[i], p[i], OVERLAPS, m[i], BACKGROUND) for i in rows]
    # zeros when every row is padding (np.sum of no rows would be one scalar)
    zeros = np.zeros(len(OVERLAPS), np.int64)
    tp, fp, fn = (sum((np.asarray(c[k]) for c in counts), zeros) for k in range(3))
    precision, recall, f1 = ref.segmental_scores(tp, fp, fn)
    edits = [ref.edit_score(y[i], p[i], m[i], BACKGROUND) for i in rows]
    all_y, all_p = y[m], p[m]
    out = {
        "videos": len(rows),
        "frames": int(m.sum()),
        "accuracy": ref.accuracy(all_y, all_p),
        "edit": float(np.mean(edits)) if rows else math.nan,
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "class_accuracy": ref.class_accuracy(all_y, all_p, C),
        "confusion": ref.confusion_matrix(all_y, all_p, C),
    }
    for metric in ("precision", "recall", "f1"):
        out[f"frame_{metric}"] = {
            average: ref.average_scores(all_y, all_p, C, metric, average) for average in AVERAGES
        }
    return out


def assert_results_match(results, expected):
    """jaxseg float32 results vs float64 oracle values (NaN must match NaN)."""
    close = dict(rtol=2e-6, atol=2e-7)
    for key in ("videos", "frames"):
        assert float(results[key]) == expected[key], key
    for key in ("accuracy", "edit", "precision", "recall", "f1", "class_accuracy"):
        np.testing.assert_allclose(np.asarray(results[key]), expected[key], **close, err_msg=key)
    np.testing.assert_array_equal(np.asarray(results["confusion"]), expected["confusion"])
    for metric in ("precision", "recall", "f1"):
        for average in AVERAGES:
            np.testing.assert_allclose(
                np.asarray(results[f"frame_{metric}"][average]),
                expected[f"frame_{metric}"][average],
                **close,
                err_msg=f"frame_{metric} {average}",
            )
    assert float(results["overflow"]) == 0


# ------------------------------------------------------------------------------------------
# Independence of batching.


@given(
    batch=batches,
    chunk_of_row=st.lists(st.integers(0, CHUNKS - 1), min_size=B, max_size=B),
    order=st.permutations(range(CHUNKS)),
    rows=st.permutations(range(B)),
)
def test_chunked_updates_equal_one_shot(batch, chunk_of_row, order, rows):
    y, p, m, _ = pad_batch(batch, T)
    one_shot = UPDATE(SEGMENTATION.init(), y, p, mask=m)
    masks = chunk_masks(m, chunk_of_row)
    chunked = SEGMENTATION.init()
    for c in order:
        chunked = UPDATE(chunked, y, p, mask=masks[c])
    assert_same_state(chunked, one_shot)
    rows = np.asarray(rows)
    assert_same_state(UPDATE(SEGMENTATION.init(), y[rows], p[rows], mask=m[rows]), one_shot)
    frames_only = FRAME_UPDATE(FRAMES.init(), y, p, mask=m)
    assert_same_state(frames_only, one_shot.frame)


@given(batch=batches, chunk_of_row=st.lists(st.integers(0, 2), min_size=B, max_size=B))
def test_merge_is_associative_and_commutative(batch, chunk_of_row):
    y, p, m, _ = pad_batch(batch, T)
    a, b, c = (
        UPDATE(SEGMENTATION.init(), y, p, mask=mask) for mask in chunk_masks(m, chunk_of_row)[:3]
    )
    left = MERGE(MERGE(a, b), c)
    assert_same_state(left, MERGE(a, MERGE(b, c)))
    assert_same_state(left, MERGE(MERGE(c, b), a))
    assert_same_state(MERGE(a, b), MERGE(b, a))
    assert_same_state(MERGE(SEGMENTATION.init(), a), a)
    assert_same_state(left, UPDATE(SEGMENTATION.init(), y, p, mask=m))
    frame_a, frame_b = a.frame, b.frame
    assert_same_state(FRAMES.merge(frame_a, frame_b), FRAMES.merge(frame_b, frame_a))


def test_merge_refuses_states_of_different_accumulators():
    """A state of 1 threshold merged with one of 2 broadcast silently (the first one's
    count added to both thresholds); merge now names the field whose shapes differ."""
    one = streaming.segmentation(iou_thresholds=(0.5,))
    two = streaming.segmentation(iou_thresholds=(0.5, 0.75))
    state = one.update(one.init(), np.array([[1, 1, 2]]), np.array([[1, 1, 2]]))
    shapes = r"merge's b is .* its tp\.high has shape \(2,\), this accumulator's \(1,\)"
    with pytest.raises(ValueError, match=shapes):
        one.merge(state, two.init())
    framed = streaming.segmentation(iou_thresholds=(0.5,), num_classes=3)
    with pytest.raises(ValueError, match=r"b .* has a field frame\.confusion\.high, which"):
        one.merge(one.init(), framed.init())
    with pytest.raises(ValueError, match=r"merge's a .* lacks the field frame\.confusion\.high"):
        framed.merge(one.init(), framed.init())
    buffers = [streaming.frame_average_precision(num_classes=c, capacity=4) for c in (1, 2)]
    with pytest.raises(ValueError, match=r"merge's b .* its targets has shape"):
        buffers[0].merge(buffers[0].init(), buffers[1].init())


@pytest.mark.parametrize("traced", [False, True])
def test_update_and_compute_refuse_a_state_of_another_accumulator(traced):
    """A state of 3 classes given to the accumulator of 2: ``compute`` returned the 3-class
    numbers as the 2-class accumulator's, ``update`` added into it, both silently."""
    two, three = (streaming.frame_metrics(num_classes=c) for c in (2, 3))
    labels = np.array([[0, 1, 1]])
    state = three.update(three.init(), labels, labels)
    update, compute = (jax.jit(f) if traced else f for f in (two.update, two.compute))
    with pytest.raises(ValueError, match=r"compute's state .* shape \(3, 3\), .* \(2, 2\)"):
        compute(state)
    with pytest.raises(ValueError, match=r"update's state is a state of another accumulator"):
        update(state, labels, labels)
    np.testing.assert_array_equal(
        compute(update(two.init(), labels, labels))["confusion"], [[1, 0], [0, 2]]
    )


def test_updates_of_different_batch_shapes_agree():
    batch = [
        VideoSpec(10 + 4 * i, C, 5, 0.3, CORRUPTIONS[i % 7], 0.1, "holes", i) for i in range(B)
    ]
    y, p, m, _ = pad_batch(batch, T)
    one_row = jax.jit(SEGMENTATION.update)
    state = SEGMENTATION.init()
    for i in range(B):
        state = one_row(state, y[i : i + 1], p[i : i + 1], mask=m[i : i + 1])
    assert_same_state(state, UPDATE(SEGMENTATION.init(), y, p, mask=m))


def test_padding_rows_change_nothing():
    (y, p), m = pad_rows(
        [([1, 1, 0, 2, 2], [1, 1, 0, 0, 2]), ([3, 3, 3, 0, 0, 4], [3, 0, 3, 0, 0, 4])], T
    )
    y, p, m = (np.concatenate([a, np.zeros((B - 2, T), a.dtype)]) for a in (y, p, m))
    garbage = np.random.default_rng(0).integers(0, C, size=(2, B - 2, T)).astype(np.int32)
    with_garbage = [a.copy() for a in (y, p)]
    with_garbage[0][2:], with_garbage[1][2:] = garbage
    clean = UPDATE(SEGMENTATION.init(), y, p, mask=m)
    assert_same_state(UPDATE(SEGMENTATION.init(), *with_garbage, mask=m), clean)
    results = SEGMENTATION.compute(clean)
    assert float(results["videos"]) == 2 and float(results["frames"]) == 11
    assert_results_match(results, reference_results(y, p, m))
    all_padding = UPDATE(SEGMENTATION.init(), *with_garbage, mask=np.zeros_like(m))
    assert_same_state(all_padding, SEGMENTATION.init())


# ------------------------------------------------------------------------------------------
# Values.


@given(batch=batches)
def test_values_equal_the_reference(batch):
    y, p, m, _ = pad_batch(batch, T)
    results = SEGMENTATION.compute(UPDATE(SEGMENTATION.init(), y, p, mask=m))
    assert_results_match(results, reference_results(y, p, m))
    frame_results = FRAMES.compute(FRAME_UPDATE(FRAMES.init(), y, p, mask=m))
    for key in ("accuracy", "class_accuracy", "mean_class_accuracy", "confusion"):
        np.testing.assert_array_equal(np.asarray(frame_results[key]), np.asarray(results[key]))
    for metric in ("precision", "recall", "f1"):
        for average in AVERAGES:
            np.testing.assert_array_equal(
                np.asarray(frame_results[metric][average]),
                np.asarray(results[f"frame_{metric}"][average]),
            )


def test_compute_of_init_is_defined():
    """No data: accuracy, edit and every frame-level ratio are NaN (0/0); the segmental
    precision/recall/F1 are 0 (MS-TCN's nan_to_num); counts and the confusion matrix are 0."""
    results = SEGMENTATION.compute(SEGMENTATION.init())
    assert math.isnan(results["accuracy"]) and math.isnan(results["edit"])
    for key in ("precision", "recall", "f1"):
        np.testing.assert_array_equal(results[key], np.zeros(len(OVERLAPS), np.float32))
    for key in ("videos", "frames", "overflow"):
        assert float(results[key]) == 0.0
    np.testing.assert_array_equal(results["confusion"], np.zeros((C, C)))
    assert np.all(np.isnan(results["class_accuracy"]))
    assert math.isnan(results["mean_class_accuracy"])
    for metric in ("precision", "recall", "f1"):
        for average in AVERAGES:
            assert np.all(np.isnan(results[f"frame_{metric}"][average])), (metric, average)
    frame_results = FRAMES.compute(FRAMES.init())
    assert math.isnan(frame_results["accuracy"])
    np.testing.assert_array_equal(frame_results["confusion"], np.zeros((C, C)))
    without_classes = streaming.segmentation(iou_thresholds=OVERLAPS)
    state = without_classes.init()
    assert state.frame is None
    assert set(without_classes.compute(state)) == {
        "accuracy",
        "edit",
        "precision",
        "recall",
        "f1",
        "videos",
        "frames",
        "tp",
        "fp",
        "fn",
        "overflow",
    }


def test_thresholds_given_as_an_array_are_the_tuple_of_their_items():
    """The README: an array for a tuple option is the tuple of its items. The segmentation
    accumulator and the Evaluator refused ``np.array([0.1, 0.5])`` (the metrics took it)."""
    from jaxseg import Evaluator

    y, p = [[1, 1, 2, 2, 2, 3]], [[1, 2, 2, 3, 3, 3]]
    results = []
    for thresholds in ((0.1, 0.5), [0.1, 0.5], np.array([0.1, 0.5])):
        acc = streaming.segmentation(iou_thresholds=thresholds)
        evaluator = Evaluator(iou_thresholds=thresholds)
        evaluator.add(y[0], p[0])
        results.append((acc.compute(acc.update(acc.init(), y, p))["f1"], evaluator.get()["f1"]))
    for f1, by_threshold in results:
        np.testing.assert_array_equal(f1, results[0][0])
        assert by_threshold == results[0][1] and list(by_threshold) == [0.1, 0.5]


# ------------------------------------------------------------------------------------------
# Exact counts without jax_enable_x64.


def test_add_sum_is_exact_past_2_to_the_32():
    assert not jax.config.jax_enable_x64
    values = np.full(3000, 2**31 - 1, np.int64)
    values[::7] = 2**31 - 2**20 - 5
    count = counting.add_sum(counting.zeros(), jnp.asarray(values, jnp.int32))
    assert count.high.dtype == jnp.int32
    assert streaming.to_int(count) == int(values.sum())
    assert streaming.to_int(count) > 2**42
    bigger = counting.add_sum(count, jnp.asarray(values[:10], jnp.int32))
    assert streaming.to_int(bigger) == int(values.sum()) + int(values[:10].sum())


def test_states_stay_exact_past_2_to_the_32_frames():
    assert not jax.config.jax_enable_x64
    batch = [VideoSpec(T, C, 6, 0.3, "mixed", 0.1, "holes", 10 + i) for i in range(B)]
    y, p, m, _ = pad_batch(batch, T)
    small = UPDATE(SEGMENTATION.init(), y, p, mask=m)
    doublings = 25
    big = small
    for _ in range(doublings):
        big = MERGE(big, big)
    scale = 2**doublings
    frames = int(m.sum()) * scale
    assert frames > 2**32
    assert streaming.to_int(big.frames) == frames
    assert streaming.to_int(big.videos) == B * scale
    np.testing.assert_array_equal(
        streaming.to_int(big.frame.confusion), ref.confusion_matrix(y[m], p[m], C) * scale
    )
    for a, b in zip(exact(big), exact(small), strict=True):
        np.testing.assert_array_equal(a, b * scale)
    # Scaling every count by a power of two leaves every float32 ratio bit-identical.
    before, after = SEGMENTATION.compute(small), SEGMENTATION.compute(big)
    for key in ("accuracy", "edit", "precision", "recall", "f1", "class_accuracy"):
        np.testing.assert_array_equal(after[key], before[key], err_msg=key)
    # Updating a huge state adds exactly.
    bigger = UPDATE(big, y, p, mask=m)
    assert streaming.to_int(bigger.frames) == frames + int(m.sum())
    np.testing.assert_array_equal(
        streaming.to_int(bigger.frame.confusion),
        ref.confusion_matrix(y[m], p[m], C) * (scale + 1),
    )


def test_compute_returns_counts_as_exact_integers():
    """17,000,017 frames is not a float32; compute gives it (and every count) as an exact
    integer, and a count past int32 as -1, never a rounded value."""
    assert not jax.config.jax_enable_x64
    batch = [VideoSpec(T, C, 6, 0.3, "mixed", 0.1, "holes", 30 + i) for i in range(B)]
    y, p, m, _ = pad_batch(batch, T)
    small = UPDATE(SEGMENTATION.init(), y, p, mask=m)
    big = small
    for _ in range(18):
        big = MERGE(big, big)
    one_frame = np.zeros_like(m)
    one_frame[0, np.argmax(m[0])] = True
    state = UPDATE(big, y, p, mask=one_frame)
    frames = int(m.sum()) * 2**18 + 1
    assert frames > 2**24 and int(np.float32(frames)) != frames
    results = SEGMENTATION.compute(state)
    assert results["frames"].dtype == np.int32 and int(results["frames"]) == frames
    assert int(results["videos"]) == B * 2**18 + 1
    counts = [ref.segmental_counts(y[i], p[i], OVERLAPS, m[i], BACKGROUND) for i in range(B)]
    first = ref.segmental_counts(y[0], p[0], OVERLAPS, one_frame[0], BACKGROUND)
    for k, key in enumerate(("tp", "fp", "fn")):
        want = np.sum([c[k] for c in counts], axis=0) * 2**18 + first[k]
        np.testing.assert_array_equal(results[key], want)
        assert results[key].dtype == np.int32
    confusion = ref.confusion_matrix(y[m], p[m], C) * 2**18
    confusion += ref.confusion_matrix(y[one_frame], p[one_frame], C)
    np.testing.assert_array_equal(results["confusion"], confusion)
    assert results["confusion"].dtype == np.int32
    huge = state
    for _ in range(8):
        huge = MERGE(huge, huge)
    assert int(SEGMENTATION.compute(huge)["frames"]) == -1
    assert streaming.to_int(huge.frames) == frames * 2**8 > 2**31


# ------------------------------------------------------------------------------------------
# Capacity overflow.


def test_overflow_is_counted_and_poisons_segmental_scores():
    capacity = 2
    acc = streaming.segmentation(
        iou_thresholds=OVERLAPS, max_target_segments=capacity, max_predicted_segments=capacity
    )
    update = jax.jit(acc.update)
    rows = [
        ([1, 1, 2, 2], [1, 1, 2, 2]),  # 2 / 2 segments: fits
        ([1, 2, 3, 4], [1, 1, 1, 1]),  # 4 target segments: overflows
        ([5, 5, 5, 5], [5, 4, 5, 4]),  # 4 predicted segments: overflows
        ([0, 0, 3, 3], [0, 3, 3, 3]),  # fits
    ]
    (y, p), m = pad_rows(rows, T)
    expected_overflow = sum(
        max(len(ref.segments(y[i], m[i])), len(ref.segments(p[i], m[i]))) > capacity
        for i in range(len(rows))
    )
    assert expected_overflow == 2
    results = acc.compute(update(acc.init(), y, p, mask=m))
    assert float(results["overflow"]) == expected_overflow
    assert math.isnan(results["edit"])
    for key in ("precision", "recall", "f1"):
        assert np.all(np.isnan(results[key])), key
    assert float(results["accuracy"]) == pytest.approx(ref.accuracy(y[m], p[m]), rel=1e-6)
    assert float(results["frames"]) == m.sum()
    fitting = np.array([True, False, False, True])
    results = acc.compute(update(acc.init(), y, p, mask=m & fitting[:, None]))
    assert float(results["overflow"]) == 0
    expected = reference_results(y, p, m & fitting[:, None])
    assert float(results["edit"]) == pytest.approx(
        np.mean([ref.edit_score(y[i], p[i], m[i]) for i in (0, 3)]), rel=1e-6
    )
    counts = [ref.segmental_counts(y[i], p[i], OVERLAPS, m[i]) for i in (0, 3)]
    _, _, f1 = ref.segmental_scores(*(np.sum([c[k] for c in counts], axis=0) for k in range(3)))
    np.testing.assert_allclose(results["f1"], f1, rtol=1e-6)
    assert expected["videos"] == float(results["videos"])


def test_labels_outside_the_classes_are_reported_not_aliased():
    acc = streaming.frame_metrics(num_classes=3)
    state = acc.update(acc.init(), np.array([[0, 1, 2]]), np.array([[4, 1, -1]]))
    result = acc.compute(state)
    assert float(result["out_of_range"]) == 2
    assert np.isnan(float(result["accuracy"])) and np.all(np.isnan(result["class_accuracy"]))
    assert float(result["confusion"].sum()) == 1  # only the in-range frame is counted


def test_accumulator_is_four_functions_each_one_program():
    """No NamedTuple `count`/`index` on an accumulator; outside jit, update, merge and compute
    each compile one program (shared by accumulators with the same arguments) instead of one
    per operation, and give what they give under jax.jit."""
    from jaxseg import streaming

    def build(num_classes=5):
        return streaming.segmentation(
            num_classes=num_classes, background=(0,), iou_thresholds=(0.1, 0.4)
        )

    acc = build()
    assert not hasattr(acc, "count") and not hasattr(acc, "index")
    assert tuple(acc) == (acc.init, acc.update, acc.merge, acc.compute)  # unpacks as a tuple
    targets, predictions = np.array([[0, 1, 1, 2, 4, 4, 1]]), np.array([[0, 1, 2, 2, 3, 4, 4]])
    steps = {
        "update": lambda a, empty: a.update(empty, targets, predictions, mask=targets != 1),
        "merge": lambda a, empty: a.merge(empty, empty),
        "compute": lambda a, empty: a.compute(empty),
    }
    for name, step in steps.items():
        accumulators = acc, build(), build(num_classes=6)
        states = [jax.block_until_ready(a.init()) for a in accumulators]
        calls = []
        for a, empty in zip(accumulators, states):
            with compilations() as compiled:
                calls.append(jax.block_until_ready(step(a, empty)))
            calls.append(compiled)
        got, first, again, alike, _, other = calls
        assert (len(first), len(alike), len(other)) == (1, 0, 1), (name, first, alike, other)
        jitted = jax.jit(step, static_argnums=0)(acc, states[0])
        for x, y, z in zip(jax.tree.leaves(got), jax.tree.leaves(again), jax.tree.leaves(jitted)):
            np.testing.assert_array_equal(x, y, err_msg=name)
            np.testing.assert_array_equal(x, z, err_msg=name)


def test_command_prints_its_version(capsys):
    import jaxseg
    from jaxseg._host.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"jaxseg {jaxseg.__version__}\n"


def test_ignore_index_counts_like_a_mask():
    """PyTorch-style -100 padding with ignore_index gives the state of the masked batch."""
    batch = [VideoSpec(T, C, 6, 0.3, "mixed", 0.1, "holes", 50 + i) for i in range(B)]
    y, p, m, _ = pad_batch(batch, T)
    padded = np.where(m, y, -100)
    acc = streaming.segmentation(
        num_classes=C, iou_thresholds=OVERLAPS, background=BACKGROUND, ignore_index=-100
    )
    state = jax.jit(acc.update)(acc.init(), padded, p)
    assert_same_state(state, UPDATE(SEGMENTATION.init(), y, p, mask=m))
    assert_results_match(acc.compute(state), reference_results(y, p, m))
    frames = streaming.frame_metrics(num_classes=C, ignore_index=-100)
    frame_state = frames.update(frames.init(), padded, p)
    assert_same_state(frame_state, FRAME_UPDATE(FRAMES.init(), y, p, mask=m))


def _compute_cases():
    """``name: (accumulator, arrays [V, ...], keyword arrays)`` of every kind of state."""
    batch = [
        VideoSpec(12 + 3 * i, C, 4, 0.3, CORRUPTIONS[i % 7], 0.1, "holes", i) for i in range(B)
    ]
    y, p, m, _ = pad_batch(batch, T)
    cases = {name: case[:3] for name, case in ranking_cases().items()}
    cases |= grounding_cases()
    cases["segmentation"] = (SEGMENTATION, (y, p), dict(mask=m))
    cases["frame_metrics"] = (FRAMES, (y, p), dict(mask=m))
    return cases


# Under XLA:CPU's classic emitters (these tests' quick flags, tests/conftest.py) the
# proposals' AUC of one state is 1 ulp from the vmapped one and from numpy's float32 value;
# at XLA's default settings the two are equal. The cause is not found: optimization barriers
# around the curve's area, its terms and their inputs left it as it was.
_CLASSIC_EMITTERS = jax.default_backend() == "cpu" and (
    "--xla_cpu_use_fusion_emitters=false" in os.environ.get("XLA_FLAGS", "")
)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(
            name,
            marks=pytest.mark.xfail(
                name == "proposals" and _CLASSIC_EMITTERS,
                reason="AUC 1 ulp off under XLA:CPU's classic emitters",
                strict=True,
            ),
        )
        for name in _compute_cases()
    ],
)
def test_vmap_of_compute_gives_each_states_bits(name):
    """``jax.vmap(compute)`` over stacked states equals ``compute`` of each: the binned frame
    AP and CAP and the mAPs of grounding and highlight were 1 ulp off, their sums over bins
    or thresholds ordered by XLA, differently for a batch of states (``pairwise_sum`` now)."""
    acc, arrays, keywords = _compute_cases()[name]
    parts = [slice(0, 3), slice(3, 7), slice(7, None)]
    states = [
        acc.update(
            acc.init(),
            *(x[part] for x in arrays),
            **{k: None if v is None else v[part] for k, v in keywords.items()},
        )
        for part in parts
    ]
    batched = jax.vmap(acc.compute)(jax.tree.map(lambda *x: jnp.stack(x), *states))
    for i, state in enumerate(states):
        got = jax.tree.map(lambda x, i=i: np.asarray(x[i]), batched)
        jax.tree.map(
            np.testing.assert_array_equal, got, jax.tree.map(np.asarray, acc.compute(state))
        )
