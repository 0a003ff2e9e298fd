"""Run-time capacity choice: default arguments give the bits of an explicit capacity."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _jaxprs import branch_counts, primitives
from _reference import segments as reference_segments
from jax import lax

import jaxseg.segments as jseg
from jaxseg import losses, metrics
from jaxseg._src.batching import any_example, largest, rows_at_once
from jaxseg._src.capacity import capacity_ladder, run_count_bound, rung

T, C = 600, 6


def _labels(rng, batch, segments):
    """``[batch, T]`` labels whose rows have about ``segments`` runs (classes 0..C-1)."""
    rows = []
    for _ in range(batch):
        cuts = np.sort(rng.choice(np.arange(1, T), segments - 1, replace=False))
        lengths = np.diff(np.concatenate([[0], cuts, [T]]))
        rows.append(np.repeat(rng.integers(0, C, segments), lengths))
    return np.stack(rows).astype(np.int32)


def _mask(rng, batch, holes):
    mask = np.arange(T)[None, :] < rng.integers(T // 2, T + 1, (batch, 1))
    if holes:
        mask &= rng.random((batch, T)) > 0.1
    return mask


def test_capacity_ladder_is_short_and_ends_at_the_worst_case():
    assert capacity_ladder(6000) == (32, 256, 2048, 6000)
    assert capacity_ladder(300) == (32, 300)
    assert capacity_ladder(40) == (40,)
    assert capacity_ladder(0) == (1,)


@pytest.mark.parametrize("holes", [False, True])
@pytest.mark.parametrize("background", [(), (0,)])
def test_run_count_bound_is_exact_for_prefix_masks_and_an_upper_bound_otherwise(holes, background):
    rng = np.random.default_rng(len(background) + 2 * holes)
    labels = _labels(rng, 16, 40)
    labels[:, ::7] = rng.integers(0, C, labels[:, ::7].shape)  # one-frame segments
    mask = _mask(rng, 16, holes)
    bound = np.asarray(run_count_bound(jnp.asarray(labels), jnp.asarray(mask), background))
    exact = [len(reference_segments(y, m, background)) for y, m in zip(labels, mask)]
    if holes:
        assert np.all(bound >= exact) and np.any(bound > exact)
    else:
        np.testing.assert_array_equal(bound, exact)


@functools.cache  # one program per loss and options, shared by the cases that ask for it
def _value_and_grad(loss, **kwargs):
    """``(losses [B], gradients of their sum)``. The per-sequence losses are what a loss
    promises bit for bit; the order of the sum's additions is XLA's, and depends on the fusions
    around it (a sum of three equal terms differed by 1 ulp between two programs)."""

    def total(logits, gamma, labels, mask):
        per_sequence = loss(logits, labels, mask=mask, **kwargs, **gamma)
        return jnp.sum(per_sequence), per_sequence

    def losses_and_gradients(*args):
        (_, per_sequence), gradients = jax.value_and_grad(total, (0, 1), has_aux=True)(*args)
        return per_sequence, gradients

    return jax.jit(losses_and_gradients)


# A loss's cases run one after another, so that they share its default and capacity-T
# programs (_value_and_grad is cached).
@pytest.mark.parametrize(
    "loss, gamma, segments",
    [
        pytest.param(loss, gamma, segments, id=f"{loss.__name__}-{segments}")
        for loss, gamma in (
            (losses.soft_edit_loss, {"gamma": 0.3}),
            (losses.ctc_transcript_loss, {}),
        )
        for segments in (5, 100, 400)  # the rungs 32, 256 and T
    ],
)
def test_default_capacity_gives_the_bits_of_the_rung_and_the_exact_values(loss, gamma, segments):
    """Bit for bit what the smallest sufficient rung gives when asked for, never NaN, and the
    value of capacity T (to rounding: CTC sums over its padded transcript).

    Bits on CPU; XLA:GPU compiles the rung inside the switch into fusions of its own, whose
    gradients may differ in the last bits.
    """
    same = (
        np.testing.assert_array_equal
        if jax.default_backend() == "cpu"
        else functools.partial(np.testing.assert_allclose, rtol=1e-5, atol=1e-8)
    )
    rng = np.random.default_rng(segments)
    labels = _labels(rng, 3, segments)
    mask = _mask(rng, 3, holes=True)
    logits = rng.normal(0, 2, (3, T, C)).astype(np.float32)
    gamma = {k: jnp.float32(v) for k, v in gamma.items()}
    args = (logits, gamma, labels, mask)
    needed = int(np.max(run_count_bound(jnp.asarray(labels), jnp.asarray(mask), (0,))))
    rung = min(c for c in capacity_ladder(T) if c >= needed)
    value, grads = _value_and_grad(loss, background=(0,))(*args)
    rung_value, rung_grads = _value_and_grad(loss, background=(0,), max_segments=rung)(*args)
    exact_value, exact_grads = _value_and_grad(loss, background=(0,), max_segments=T)(*args)
    assert np.all(np.isfinite(value))
    np.testing.assert_array_equal(value, rung_value)
    np.testing.assert_allclose(value, exact_value, rtol=1e-6)
    for got, want, exact in zip(*map(jax.tree_util.tree_leaves, (grads, rung_grads, exact_grads))):
        same(got, want)
        np.testing.assert_allclose(got, exact, rtol=1e-4, atol=1e-7)


def test_default_capacity_keeps_leading_batch_dims_and_forward_mode():
    rng = np.random.default_rng(7)
    labels = _labels(rng, 4, 10).reshape(2, 2, T)
    logits = rng.normal(0, 2, (2, 2, T, C)).astype(np.float32)
    value = losses.soft_edit_loss(logits, labels)
    assert value.shape == (2, 2)
    np.testing.assert_array_equal(value, losses.soft_edit_loss(logits, labels, max_segments=32))
    tangent = rng.normal(0, 1, logits.shape).astype(np.float32)
    _, jvp = jax.jvp(
        lambda x: losses.soft_edit_loss(x, labels, backward="autodiff"), (logits,), (tangent,)
    )
    _, jvp_exact = jax.jvp(
        lambda x: losses.soft_edit_loss(x, labels, backward="autodiff", max_segments=32),
        (logits,),
        (tangent,),
    )
    np.testing.assert_allclose(jvp, jvp_exact, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("loss", ["soft_edit_loss", "soft_levenshtein"])
@pytest.mark.parametrize("gamma", [0.0, -0.1])
def test_soft_dp_losses_reject_a_concrete_non_positive_gamma(loss, gamma):
    with pytest.raises(ValueError, match="gamma must be > 0"):
        getattr(losses, loss)(jnp.zeros((4, 3)), jnp.zeros((4,), jnp.int32), gamma=gamma)


def test_pad_videos_gives_aligned_arrays_that_jax_uses_without_a_copy():
    import jaxseg

    videos = [np.arange(5), np.arange(70) % 3, np.array([7])]
    padded, lengths = jaxseg.io.pad_videos(videos, pad_value=-1)
    assert padded.dtype == np.int32 and padded.shape == (3, 70)
    np.testing.assert_array_equal(lengths, [5, 70, 1])
    for row, video, n in zip(padded, videos, lengths):
        np.testing.assert_array_equal(row[:n], video)
        assert np.all(row[n:] == -1)
    assert padded.ctypes.data % 64 == 0
    if jax.default_backend() == "cpu":  # the array itself becomes the device buffer
        assert jax.device_put(padded).unsafe_buffer_pointer() == padded.ctypes.data


@pytest.mark.parametrize(
    ("videos", "kwargs", "message"),
    [
        ([[1, 300]], {"dtype": np.int8}, r"videos\[0\] holds 300, outside the range \[-128, 127\]"),
        ([[1], [-1, 2]], {"dtype": np.uint8}, r"videos\[1\] holds -1, outside .* uint8"),
        ([np.array([2**40])], {}, r"videos\[0\] holds 1099511627776, outside .* int32"),
        ([np.array([2**31 + 5], np.uint32)], {}, r"videos\[0\] holds 2147483653"),
        ([[1, 2], [1.5, 2.0]], {}, r"videos\[1\] must hold integer labels, got 1.5"),
        ([[np.nan, 2.0]], {}, r"videos\[0\] must hold integer labels, got nan"),
        (
            [np.zeros((3, 2), int)],
            {},
            r"videos\[0\] must be one video of shape \[T\], got shape \(3, 2\)",
        ),
        ([5], {}, r"videos\[0\] must be one video of shape \[T\], got shape \(\)"),
        ([["a", "b"]], {}, r"videos\[0\] must hold integer labels, got dtype <U1"),
        ([[1]], {"pad_value": 300, "dtype": np.int8}, r"pad_value holds 300, outside"),
        ([[1]], {"pad_value": 0.5}, r"pad_value must hold integer labels, got 0.5"),
    ],
)
def test_pad_videos_refuses_values_its_dtype_would_change(videos, kwargs, message):
    """They were wrapped (300 -> 44 in int8, 2**40 -> 0), truncated (1.5 -> 1, NaN ->
    -2**31) or met numpy's broadcasting error, none naming the video."""
    import jaxseg

    with pytest.raises(ValueError, match=message):
        jaxseg.io.pad_videos(videos, **kwargs)
    # floats holding whole numbers are labels
    padded, _ = jaxseg.io.pad_videos([np.array([1.0, 127.0]), [3]], pad_value=-1, dtype=np.int8)
    assert padded.tolist() == [[1, 127], [3, -1]]


def test_largest_is_one_unbatched_value_for_all_examples():
    counts = jnp.array([[1, 5], [3, 2]])
    assert int(largest(counts)) == 5 and int(largest(jnp.zeros((0,), jnp.int32))) == 0
    assert jax.vmap(largest)(counts).tolist() == [5, 5]
    assert jax.vmap(jax.vmap(largest))(jnp.arange(24).reshape(2, 3, 4)).tolist() == [[23] * 3] * 2
    # One index for every example, so a switch on it stays a switch under vmap.
    ladder = (128, 1024, 6000)
    assert jax.vmap(lambda c: rung(ladder, c))(jnp.array([[100], [2000]])).tolist() == [2, 2]
    switched = jax.vmap(lambda c: lax.switch(rung(ladder, c), [lambda: 0, lambda: 1, lambda: 2]))
    assert 3 in branch_counts(jax.make_jaxpr(switched)(jnp.array([[100], [2000]])))


def test_any_example_is_one_unbatched_flag_for_all_examples():
    flags = jnp.array([[False, True], [False, False]])
    assert bool(any_example(flags)) and not bool(any_example(jnp.zeros((0,), bool)))
    assert jax.vmap(any_example)(flags).tolist() == [True, True]
    assert jax.vmap(any_example)(~flags | True).tolist() == [True, True]
    assert jax.vmap(jax.vmap(any_example))(jnp.zeros((2, 3, 4), bool)).tolist() == [[False] * 3] * 2
    # One predicate for every example, so a cond on it stays a cond under vmap.
    chosen = jax.vmap(lambda f: lax.cond(any_example(f), lambda: 1, lambda: 0))
    assert 2 in branch_counts(jax.make_jaxpr(chosen)(flags))


def test_rows_at_once_equals_the_rows_one_by_one():
    def total_and_largest(x, mask):
        kept = x if mask is None else jnp.where(mask, x, 0)
        return jnp.sum(kept, axis=-1), jnp.broadcast_to(jnp.max(kept), x.shape[:1])

    at_once = rows_at_once(total_and_largest)
    x = jnp.arange(24).reshape(2, 3, 4)
    mask = (x % 3) > 0
    sums, largest_of_all = jax.vmap(at_once)(x, mask)
    np.testing.assert_array_equal(sums, jnp.sum(jnp.where(mask, x, 0), axis=-1))
    assert np.all(largest_of_all == 23)  # the mapped rows were joined: one call saw them all
    sums, _ = jax.vmap(at_once, in_axes=(0, None))(x, mask[0])  # an unbatched operand
    np.testing.assert_array_equal(sums, jnp.sum(jnp.where(mask[0], x, 0), axis=-1))
    sums, _ = jax.vmap(at_once, in_axes=(0, None))(x, None)  # None passes through
    np.testing.assert_array_equal(sums, jnp.sum(x, axis=-1))
    nested, _ = jax.vmap(jax.vmap(at_once))(x.reshape(2, 1, 3, 4), mask.reshape(2, 1, 3, 4))
    np.testing.assert_array_equal(nested.reshape(2, 3), jnp.sum(jnp.where(mask, x, 0), axis=-1))


@functools.cache  # one program per capacities, shared by the masks with and without gaps
def _edit_and_counts(capacities: tuple):
    def statistics(t, p, m):
        options = dict(mask=m, **dict(capacities))
        return metrics.edit_score(t, p, **options), metrics.segmental_counts(t, p, **options)

    return statistics, jax.jit(jax.vmap(statistics))


@pytest.mark.parametrize(
    "capacities, gaps",
    [
        pytest.param(capacities, gaps, id=f"{name}-{'gaps' if gaps else 'prefix'}")
        for name, capacities in (
            ("default", ()),
            ("given", (("max_target_segments", 64), ("max_predicted_segments", 48))),
        )
        for gaps in (False, True)
    ],
)
def test_vmap_of_the_segmental_statistics_equals_the_batch(capacities, gaps):
    # The mapped sequences join one batch: its loops run as many steps as its largest
    # sequence needs, and no branch holds the kernels (conds of two branches: only the
    # backend dispatch of lax.platform_dependent); a mask with gaps is read, not sorted.
    frames = 2048
    rng = np.random.default_rng(3)
    targets = np.repeat(rng.integers(0, C, (3, 16)), frames // 16, axis=1).astype(np.int32)
    predictions = np.where(rng.random((3, frames)) < 0.01, 0, targets).astype(np.int32)
    mask = np.arange(frames)[None, :] < np.array([[frames], [1500], [700]])
    if gaps:
        mask &= rng.random((3, frames)) > 0.05
    statistics, vmapped = _edit_and_counts(capacities)
    jaxpr = jax.make_jaxpr(jax.vmap(statistics))(targets, predictions, mask)
    assert set(branch_counts(jaxpr)) <= {2} and "sort" not in primitives(jaxpr)
    for got, want in zip(
        jax.tree_util.tree_leaves(vmapped(targets, predictions, mask)),
        jax.tree_util.tree_leaves(statistics(targets, predictions, mask)),
    ):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("gaps", [False, True])
def test_vmap_of_to_segments_with_a_mask_decides_the_ranking_once(gaps):
    # Batched by vmap, the "every mask is a prefix" predicate would differ per example and
    # both of to_segments' forms (bounds ranked among the valid frames or not) would run on
    # every call; the mapped rows join one batch instead, and the cond stays a cond. No sort
    # compacts the masked frames.
    rng = np.random.default_rng(11)
    labels = _labels(rng, 4, 12)
    mask = np.arange(T) < rng.integers(T // 2, T + 1, (4, 1))
    if gaps:
        mask &= rng.random((4, T)) > 0.1

    def one(x, m):
        return jseg.to_segments(x, mask=m, max_segments=40), jseg.count_segments(x, mask=m)

    jaxpr = jax.make_jaxpr(jax.vmap(one))(labels, mask)
    conds = branch_counts(jax.make_jaxpr(one)(labels, mask))
    assert conds and branch_counts(jaxpr) == conds and "sort" not in primitives(jaxpr)
    for got, want in zip(
        jax.tree_util.tree_leaves(jax.jit(jax.vmap(one))(labels, mask)),
        jax.tree_util.tree_leaves(one(labels, mask)),
    ):
        np.testing.assert_array_equal(got, want)


def test_vmap_of_a_segment_loss_runs_one_capacity_for_all_examples():
    rng = np.random.default_rng(5)
    labels = _labels(rng, 3, 10)
    logits = rng.normal(0, 2, (3, T, C)).astype(np.float32)

    def vmapped(x):
        return jnp.sum(jax.vmap(losses.soft_edit_loss)(x, labels))

    def batched(x):
        return jnp.sum(losses.soft_edit_loss(x, labels))

    ladder = capacity_ladder(T)
    assert len(ladder) in branch_counts(jax.make_jaxpr(jax.value_and_grad(vmapped))(logits))
    value, grad = jax.jit(jax.value_and_grad(vmapped))(logits)
    want_value, want_grad = jax.value_and_grad(batched)(logits)
    np.testing.assert_allclose(value, want_value, rtol=1e-6)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize(
    "loss, kwargs",
    [(losses.soft_edit_loss, {}), (losses.ctc_transcript_loss, {"background": (0,)})],
)
def test_the_last_rung_needs_no_frames_squared_memory(loss, kwargs):
    """Every compiled program holds the last rung (as many segments as frames): it once kept
    ``T x T`` arrays there (the soft edit DP's costs, weights and gradients, optax's CTC
    lattice), 4 GB and 1.5 GB of scratch for every call at T = 6000."""
    frames = 6000
    logits, labels = jnp.zeros((1, frames, 4)), jnp.zeros((1, frames), jnp.int32)

    def total(x, y):
        return jnp.sum(loss(x, y, **kwargs))

    compiled = jax.jit(jax.grad(total)).lower(logits, labels).compile()
    assert compiled.memory_analysis().temp_size_in_bytes < 4 * frames * frames
