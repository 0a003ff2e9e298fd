"""Tests of jaxseg.segments: run-length segments, masks, capacities."""

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

from jaxseg import segments as jseg
from jaxseg._src import segments as packing

BATCH, T_MAX, SMALL = 16, 3000, 16


def table(s, row=None):
    """The valid segments of one row of a Segments table as ``[(label, start, end)]``."""
    labels, starts, ends, valid = (np.asarray(x) for x in (s.labels, s.starts, s.ends, s.valid))
    if row is not None:
        labels, starts, ends, valid = labels[row], starts[row], ends[row], valid[row]
    return [
        (int(a), int(b), int(c))
        for a, b, c, v in zip(labels, starts, ends, valid, strict=True)
        if v
    ]


# ------------------------------------------------------------------------------------------
# Hand-computed cases, all padded into one [N, 16] batch per background so each compiles once.

HAND_T = 16
T, F = True, False
# (id, labels, extra mask or None, background, expected [(label, start, end)])
HAND = [
    ("bg_removed_after_encoding", [1, 1, 0, 1], None, (0,), [(1, 0, 2), (1, 3, 4)]),
    ("no_bg_every_run", [1, 1, 0, 1], None, (), [(1, 0, 2), (0, 2, 3), (1, 3, 4)]),
    ("two_bg_labels", [3, 0, 1, 3, 1, 1, 2], None, (0, 3), [(1, 2, 3), (1, 4, 6), (2, 6, 7)]),
    ("mask_merges_runs", [1, 2, 1], [T, F, T], (), [(1, 0, 2)]),
    ("mask_then_bg", [1, 0, 1, 2, 2], [T, T, F, T, T], (0,), [(1, 0, 1), (2, 2, 4)]),
    ("mask_prefix", [4, 4, 2, 2, 2, 7, 7, 7], [T] * 5 + [F] * 3, (), [(4, 0, 2), (2, 2, 5)]),
    ("fully_masked", [1, 2, 3], [F, F, F], (), []),
    ("single_frame", [5], None, (), [(5, 0, 1)]),
    ("single_frame_bg", [0], None, (0,), []),
    ("all_bg", [0, 0, 0, 0], None, (0,), []),
    (
        "alternating",
        [1, 2, 1, 2, 1],
        None,
        (),
        [(1, 0, 1), (2, 1, 2), (1, 2, 3), (2, 3, 4), (1, 4, 5)],
    ),
    ("exactly_capacity", [0, 1, 1], None, (), [(0, 0, 1), (1, 1, 3)]),
    ("full_length", [2] * 8 + [3] * 8, None, (), [(2, 0, 8), (3, 8, 16)]),
    ("full_length_bg_end", [2] * 15 + [0], None, (0,), [(2, 0, 15)]),
]
CAPACITY = 2  # the hand batch is also run with max_segments=2 (several rows overflow)


@functools.partial(jax.jit, static_argnames=("background", "capacity"))
def _segments_batch(labels, mask, background, capacity):
    full = jseg.to_segments(labels, mask=mask, background=background)
    small = jseg.to_segments(labels, mask=mask, background=background, max_segments=capacity)
    counts = jseg.count_segments(labels, mask=mask, background=background)
    return full, small, counts


@functools.cache
def _hand_results(background):
    rows = [case for case in HAND if case[3] == background]
    (labels,), mask = pad_rows([(c[1],) for c in rows], HAND_T, [c[2] for c in rows])
    out = jax.device_get(_segments_batch(labels, mask, background, CAPACITY))
    return {c[0]: jax.tree.map(lambda x, i=i: x[i], out) for i, c in enumerate(rows)}


@pytest.mark.parametrize("case", HAND, ids=[c[0] for c in HAND])
def test_hand_segments(case):
    name, _, _, background, want = case
    full, small, count = _hand_results(background)[name]
    assert table(full) == want
    assert full.labels.shape == (HAND_T,)  # capacity None = T
    assert int(full.count) == len(want) == int(count)
    # Capacity 2: the true count is reported even past the capacity, and (as documented in
    # to_segments) the table holds the first S segments.
    assert small.labels.shape == (CAPACITY,)
    assert int(small.count) == len(want)
    assert table(small) == want[:CAPACITY]


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.uint32])
def test_any_integer_dtype(dtype):
    labels = np.array([1, 1, 0, 3, 3, 2], dtype)
    s = jax.jit(functools.partial(jseg.to_segments, background=(0,)))(labels)
    assert table(s) == [(1, 0, 2), (3, 3, 5), (2, 5, 6)]
    assert s.labels.dtype == np.int32
    assert s.starts.dtype == np.int32 and s.ends.dtype == np.int32
    assert s.valid.dtype == np.bool_ and s.count.dtype == np.int32


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_empty_rows_are_minus_one_for_unsigned_labels(dtype):
    """-1 in the table's int32, not the unsigned dtype's 255 or 65535 (real labels there)."""
    s = jseg.to_segments(np.array([1, 1, 2], dtype), max_segments=4)
    assert s.labels.tolist() == [1, 2, -1, -1]


def test_background_at_the_top_of_an_unsigned_dtype_is_compared_in_that_dtype():
    """uint32 labels (which count_segments and the metrics take whole) with a background
    label beyond int32: it raised JAX's OverflowError on parsing the Python int."""
    from jaxseg import metrics

    top = 2**32 - 1
    labels = np.array([[1, top, top, 2, 3_000_000_000, 2], [top, 1, 1, top, 5, 5]], np.uint32)
    background = (top, 3_000_000_000)
    want = [len(ref.segments(row.astype(np.int64), None, background)) for row in labels]
    assert jseg.count_segments(labels, background=background).tolist() == want
    assert jseg.count_segments(jnp.asarray(labels), background=background).tolist() == want
    small = np.unique(labels, return_inverse=True)[1].reshape(labels.shape)  # same runs
    relabelled = tuple(int(np.flatnonzero(np.unique(labels) == b)[0]) for b in background)
    predictions = labels[::-1]
    np.testing.assert_array_equal(
        metrics.edit_score(labels, predictions, background=background),
        metrics.edit_score(small, small[::-1], background=relabelled),
    )


def test_host_labels_beyond_int32_raise():
    """The table's labels are int32: a uint32 label of 2**31 or more would wrap negative."""
    with pytest.raises(ValueError, match="labels holds label 2147483653, beyond int32"):
        jseg.to_segments(np.array([2**31 + 5, 2], np.uint32))
    assert jseg.to_segments(np.array([2**31 - 1, 2], np.uint32)).labels.tolist() == [2**31 - 1, 2]
    # int64 labels (x64, a user's default promotion): truncated onto other labels until checked
    with jax.enable_x64(True), jax.numpy_dtype_promotion("standard"):
        with pytest.raises(ValueError, match="labels holds label 1099511627776, beyond int32"):
            jseg.to_segments(np.array([2**40, 2**40, 1, 0]))
        assert jseg.to_segments(jnp.array([0, 1, 1])).labels.tolist() == [0, 1, -1]


def test_doc_example_unpadded():
    s = jseg.to_segments([1, 2, 1, 2, 1])
    assert s.labels.shape == (5,)  # capacity defaults to T
    assert table(s) == [(1, 0, 1), (2, 1, 2), (1, 2, 3), (2, 3, 4), (1, 4, 5)]


@pytest.mark.parametrize("with_mask", [False, True])
def test_zero_length_batch(with_mask):
    """T = 0: every sequence is empty (no segment), with or without jit and a mask."""
    labels = np.zeros((2, 0), np.int32)
    mask = np.zeros((2, 0), bool) if with_mask else None
    to_segments = functools.partial(jseg.to_segments, max_segments=3)
    for fn in (to_segments, jax.jit(to_segments)):
        segments = fn(labels, mask=mask)
        assert segments.count.tolist() == [0, 0]
        assert not np.asarray(segments.valid).any()
    assert jseg.count_segments(labels, mask=mask).tolist() == [0, 0]


def test_lengths_to_mask():
    got = jseg.lengths_to_mask(np.array([0, 2, 4]), 4)
    assert got.dtype == np.bool_
    assert np.asarray(got).tolist() == [
        [False, False, False, False],
        [True, True, False, False],
        [True, True, True, True],
    ]
    np.testing.assert_array_equal(
        jseg.lengths_to_mask(np.array([[1], [3]]), 3), ref.lengths_to_mask([[1], [3]], 3)
    )


def test_traced_lengths_beyond_T_are_clipped_in_any_dtype():
    """As documented; a uint32 length of 2**31 or more compared with int32 frames wrapped
    negative and gave an all-False row, and under strict dtype promotion any dtype but int32
    raised TypePromotionError."""
    fn = jax.jit(jseg.lengths_to_mask, static_argnums=1)
    for dtype in (np.uint32, np.int32, np.uint8, np.int8):
        info = np.iinfo(dtype)
        lengths = np.array([info.max, info.min, 3, 0, min(info.max, 2**31)], dtype)
        want = ref.lengths_to_mask(np.clip(lengths.astype(np.int64), 0, 5), 5)
        np.testing.assert_array_equal(fn(jnp.asarray(lengths), 5), want, err_msg=str(dtype))


# ------------------------------------------------------------------------------------------
# Bad input: clear errors naming the argument.


def test_float_labels_rejected():
    with pytest.raises(TypeError, match="labels"):
        jseg.to_segments(np.array([1.0, 2.0]))


def test_scalar_labels_rejected():
    with pytest.raises(ValueError, match="labels"):
        jseg.to_segments(np.int32(3))


def test_mask_shape_and_dtype_checked():
    with pytest.raises(ValueError, match="mask"):
        jseg.to_segments([1, 2, 3], mask=[True, False])
    with pytest.raises(TypeError, match="mask"):
        jseg.to_segments([1, 2, 3], mask=[1, 0, 1])


def test_static_arguments_checked():
    with pytest.raises(ValueError, match="max_segments"):
        jseg.to_segments([1, 2], max_segments=0)
    with pytest.raises(TypeError, match="background"):
        jseg.to_segments([1, 2], background=(0.5,))
    with pytest.raises(TypeError, match="T must"):
        jseg.lengths_to_mask([1], 2.0)


# ------------------------------------------------------------------------------------------
# Parity with the numpy reference on random padded batches (one compile per background).


@given(
    specs=st.lists(video_specs(T_MAX), min_size=BATCH, max_size=BATCH),
    background=st.sampled_from([(), (0,)]),
)
def test_to_segments_matches_reference(specs, background):
    targets, predictions, mask, videos = pad_batch(specs, T_MAX)
    for which, labels in ((0, targets), (1, predictions)):
        full, small, counts = jax.device_get(_segments_batch(labels, mask, background, SMALL))
        for i, v in enumerate(videos):
            want = ref.segments(v[which], v[2], background)
            assert table(full, i) == want, specs[i]
            assert int(full.count[i]) == len(want)
            assert int(counts[i]) == len(want)
            assert int(small.count[i]) == len(want)  # the true count, even past the capacity
            assert table(small, i) == want[:SMALL]


@pytest.mark.parametrize(
    ("n", "largest"), [(1, 1), (7, 32), (64, 1), (65, 32), (4097, 32), (300_000, 1), (600_000, 31)]
)
def test_running_sums_are_exact(n, largest):
    # Blocked float32 matrix products (one, two or three levels of 64) while largest * n is
    # below 2^24, a prefix scan beyond (the last case); large values first, so that every
    # partial sum is as large as it can be.
    from jaxseg._src.numerics import running_sum

    values = np.random.default_rng(n).integers(0, largest + 1, n)
    values[: 9 * n // 10] = largest
    got = jax.jit(lambda x: running_sum(x, largest=largest))(values.astype(np.int32))
    np.testing.assert_array_equal(np.asarray(got), np.cumsum(values))


@pytest.mark.parametrize("n_words", [1, 7, 8, 188, 300])
def test_index_bits_running_popcounts(n_words):
    # The running popcount, padded to whole search blocks with a count no rank reaches.
    from jaxseg._src.segments import _NEVER, _search_block, index_bits

    words = np.random.default_rng(n_words).integers(0, 2**32, n_words, dtype=np.uint32)
    indexed = index_bits(words)
    bits = np.unpackbits(words.view(np.uint8)).reshape(n_words, 32).sum(axis=1)
    padded = -(-n_words // _search_block(n_words)) * _search_block(n_words)
    assert indexed.running.shape == (padded,)
    np.testing.assert_array_equal(np.asarray(indexed.running[:n_words]), np.cumsum(bits))
    assert (np.asarray(indexed.running[n_words:]) == _NEVER).all()


@pytest.mark.parametrize("n_words", [1, 9, 188])
def test_bits_before_counts_the_earlier_set_bits(n_words):
    from jaxseg._src.segments import bits_before, index_bits

    words = np.random.default_rng(n_words).integers(0, 2**32, n_words, dtype=np.uint32)
    flags = np.unpackbits(words.view(np.uint8), bitorder="little")
    frames = np.arange(32 * n_words + 1, dtype=np.int32)
    want = np.concatenate([[0], np.cumsum(flags)])
    np.testing.assert_array_equal(bits_before(index_bits(words), frames), want)


@pytest.mark.parametrize("step", [4, 1 << 14])
def test_selection_in_steps_equals_the_set_bits(monkeypatch, step):
    # Capacities past _SELECT_STEP select that many ranks per loop step, until the count;
    # a step of 4 takes hundreds of steps here, one of 2**14 selects all 5000 ranks at once.
    from jaxseg._src import segments as kernels

    rng = np.random.default_rng(11)
    words = rng.integers(0, 1 << 32, 300, dtype=np.uint64).astype(np.uint32)
    words[rng.random(300) < 0.3] = 0
    want_frames = np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little"))
    monkeypatch.setattr(kernels, "_SELECT_STEP", step)
    frames, count = jax.jit(kernels.select_bits, static_argnums=1)(kernels.index_bits(words), 5000)
    assert int(count) == len(want_frames) < 5000
    np.testing.assert_array_equal(frames[: len(want_frames)], want_frames)


def test_segment_tables_of_long_videos_need_memory_of_their_size():
    # Selecting all ranks at once compares each with a block of words (capacity x sqrt(T)
    # cells, gigabytes for a 2M-frame table of T rows); in chunks the scratch stays near the
    # table's own size.
    labels = jax.ShapeDtypeStruct((1, 2_000_000), np.int32)
    compiled = jax.jit(jseg.to_segments).lower(labels).compile()
    assert compiled.memory_analysis().temp_size_in_bytes < 256 * 2**20


@pytest.mark.parametrize("T", [1, 31, 32, 33, 100])
def test_unpack_bits_inverts_pack_bits(T):
    flags = np.random.default_rng(T).random(T) < 0.5
    words = packing.pack_bits(flags)
    assert words.shape == (packing.word_count(T),)
    np.testing.assert_array_equal(packing.unpack_bits(words, T), flags)
