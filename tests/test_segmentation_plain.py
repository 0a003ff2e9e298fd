"""The fast segmental kernels equal the plain specification bit for bit.

``jaxseg._src.segmentation_plain`` states the rules (run-length encoding from change points,
the Levenshtein recursion, MS-TCN's greedy matching as a scan); the public functions run
bit-packed kernels at capacities chosen per call. Every statistic must be identical, on
random batches with hundreds of segments, one-frame segments, background and masks with gaps
(``tests/_videos.py``), and the plain form must agree with the numpy oracle.
"""

import functools

import _reference as ref
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _videos import pad_batch, video_specs
from hypothesis import given
from hypothesis import strategies as st

from jaxseg._src import checks
from jaxseg._src.loss_utils import compact_frames
from jaxseg._src.segmentation import segmentation_statistics
from jaxseg._src.segmentation_plain import run_length_segments, sequence_statistics
from jaxseg._src.segments import is_background, to_segments

T_MAX, BATCH = 700, 6
OVERLAPS = (0.1, 0.25, 0.5, 0.75)


@functools.partial(jax.jit, static_argnames=("background", "legacy_asformer_end"))
def _plain(targets, predictions, mask, *, background, legacy_asformer_end):
    targets, lengths = jax.vmap(compact_frames)(targets, mask)
    predictions, _ = jax.vmap(compact_frames)(predictions, mask)
    T = targets.shape[-1]
    one = functools.partial(
        sequence_statistics,
        background=background,
        thresholds=checks.static_thresholds("overlaps", OVERLAPS),
        legacy_asformer_end=legacy_asformer_end,
        target_capacity=T,
        prediction_capacity=T,
    )
    return jax.vmap(one)(targets, predictions, lengths)


@functools.partial(jax.jit, static_argnames=("background", "legacy_asformer_end"))
def _fast(targets, predictions, mask, *, background, legacy_asformer_end):
    return segmentation_statistics(
        targets,
        predictions,
        mask=mask,
        iou_thresholds=OVERLAPS,
        background=background,
        legacy_asformer_end=legacy_asformer_end,
    )


@given(
    specs=st.lists(video_specs(T_MAX), min_size=BATCH, max_size=BATCH),
    background=st.sampled_from([(), (0,), (0, 3)]),
    legacy=st.booleans(),
    prefix_only=st.booleans(),
)
def test_fast_statistics_equal_the_plain_specification(specs, background, legacy, prefix_only):
    targets, predictions, mask, _ = pad_batch(specs, T_MAX)
    if prefix_only:  # no gap loop step; masks with gaps settle the runs across their gaps
        mask = np.arange(T_MAX) < mask.sum(axis=1, keepdims=True)
    options = dict(background=background, legacy_asformer_end=legacy)
    fast = _fast(targets, predictions, mask, **options)
    plain = _plain(targets, predictions, mask, **options)
    for name, got, want in zip(fast._fields, fast, plain):
        np.testing.assert_array_equal(got, want, err_msg=name)


@given(specs=st.lists(video_specs(T_MAX), min_size=2, max_size=2))
def test_plain_specification_equals_the_numpy_oracle(specs):
    targets, predictions, mask, _ = pad_batch(specs, T_MAX)
    plain = _plain(targets, predictions, mask, background=(0,), legacy_asformer_end=False)
    for i in range(len(specs)):
        y, p, m = targets[i], predictions[i], mask[i]
        tp, fp, fn = ref.segmental_counts(y, p, OVERLAPS, m, background=(0,))
        assert int(plain[2][i]) == ref.edit_distance(y, p, m, background=(0,))
        np.testing.assert_array_equal(plain[5][i], tp)
        np.testing.assert_array_equal(plain[6][i], fp)
        np.testing.assert_array_equal(plain[7][i], fn)


@pytest.mark.parametrize("gaps", [False, True])
@pytest.mark.parametrize("background", [(), (0,)])
def test_run_length_segments_equal_to_segments(background, gaps):
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 3, (20, 50)).astype(np.int32)
    mask = np.arange(50) < rng.integers(0, 51, (20, 1))
    if gaps:
        mask &= rng.random((20, 50)) > 0.3
    compacted, lengths = jax.vmap(compact_frames)(jnp.asarray(labels), jnp.asarray(mask))
    plain = jax.vmap(lambda y, n: run_length_segments(y, n, background=background, capacity=50))(
        compacted, lengths
    )
    fast = to_segments(jnp.asarray(labels), mask=jnp.asarray(mask), background=background)
    for name, got, want in zip(fast._fields, fast, plain):
        np.testing.assert_array_equal(got, want, err_msg=name)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16])
def test_a_background_label_outside_the_dtype_is_no_label_of_it(dtype):
    """Every label the dtype holds is background only if named: 256 compared in int8 would
    wrap onto label 0 (issue #20, item 1)."""
    info = np.iinfo(dtype)
    labels = np.arange(info.min, info.max + 1).astype(dtype)
    for background in [(256,), (300,), (65536,), (0, 300), (-1,), (65535,)]:
        want = np.isin(labels.astype(np.int64), background)
        np.testing.assert_array_equal(is_background(jnp.asarray(labels), background), want)


# Each background names a label the dtype cannot hold that would wrap onto label 0, alone or
# beside one the dtype holds; the rule for every label is the test above.
@pytest.mark.parametrize(
    "dtype, background",
    [(np.int8, (256,)), (np.uint8, (1, 256)), (np.int16, (65536,)), (np.uint16, (2, 65536))],
)
def test_the_metrics_never_alias_a_background_label_outside_the_dtype(dtype, background):
    from jaxseg import metrics

    rng = np.random.default_rng(5)
    targets = rng.integers(0, 3, (4, 40)) * (rng.random((4, 40)) < 0.9)
    predictions = rng.integers(0, 3, (4, 40))
    want = [
        metrics.edit_score(targets, predictions, background=background),
        metrics.segmental_f1(targets, predictions, background=background),
    ]
    narrow_t, narrow_p = targets.astype(dtype), predictions.astype(dtype)
    got = [
        metrics.edit_score(narrow_t, narrow_p, background=background),
        metrics.segmental_f1(narrow_t, narrow_p, background=background),
    ]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    held = tuple(b for b in background if b <= np.iinfo(dtype).max)  # the int32 path too
    np.testing.assert_array_equal(got[0], metrics.edit_score(targets, predictions, background=held))
