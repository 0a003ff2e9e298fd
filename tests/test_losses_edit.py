"""Tests of soft_edit_loss and soft_levenshtein against the hard distances and slow references."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _reference_losses import levenshtein, segment_labels, soft_dp, softmax
from _reference_losses import soft_edit_distance as soft_edit_distance_reference
from jax.test_util import check_grads

from jaxseg import losses, metrics
from jaxseg._src.soft_edit import soft_edit_distance
from jaxseg.segments import to_segments

T, C = 48, 5
ONE_HOT_SCALE = 40.0  # softmax(40 * one_hot) is one-hot to float32 precision


def _videos(rng, size, length=T, classes=C, hole_fraction=0.5):
    """Target labels with runs, noisy predictions (over-segmented) and masks with holes/padding."""
    targets, predictions, masks = [], [], []
    for _ in range(size):
        runs = rng.integers(1, 10, 20)
        target = np.repeat(rng.integers(0, classes, 20), runs)[:length]
        target = np.pad(target, (0, length - len(target)))
        prediction = target.copy()
        flips = rng.random(length) < rng.choice([0.0, 0.05, 0.2])
        prediction[flips] = rng.integers(0, classes, flips.sum())
        valid = np.arange(length) < rng.integers(0, length + 1)
        if rng.random() < hole_fraction:
            valid &= rng.random(length) > 0.2
        targets.append(target)
        predictions.append(prediction)
        masks.append(valid)
    return np.stack(targets), np.stack(predictions), np.stack(masks)


@pytest.mark.parametrize("background", [(), (0,)])
def test_soft_edit_rounds_to_the_hard_distance_on_one_hot_inputs(background):
    rng = np.random.default_rng(len(background))
    targets, predictions, masks = _videos(rng, 300)
    logits = ONE_HOT_SCALE * jax.nn.one_hot(predictions, C)

    @jax.jit
    def run(logits, targets, masks):
        kwargs = dict(mask=masks, background=background, gamma=0.01, max_segments=32)
        return (
            losses.soft_edit_loss(logits, targets, normalize="target", **kwargs),
            losses.soft_edit_loss(logits, targets, normalize="max", **kwargs),
            metrics.edit_distance(targets, predictions, mask=masks, background=background),
            metrics.edit_score(targets, predictions, mask=masks, background=background),
        )

    by_target, by_max, hard, score = (np.asarray(x) for x in run(logits, targets, masks))
    want = np.array(
        [
            levenshtein(segment_labels(p[m], background), segment_labels(t[m], background))
            for t, p, m in zip(targets, predictions, masks, strict=True)
        ]
    )
    n_target = np.array(
        [len(segment_labels(t[m], background)) for t, m in zip(targets, masks, strict=True)]
    )
    np.testing.assert_array_equal(hard, want)  # the reference agrees with jaxseg.metrics
    distance = by_target * np.maximum(n_target, 1)
    np.testing.assert_array_equal(np.round(distance), want)
    assert np.all(distance <= want + 1e-4)  # the soft minimum never exceeds the hard one
    np.testing.assert_allclose(distance, want, atol=0.06)
    np.testing.assert_allclose(by_max, 1.0 - score, atol=0.06 / 1)
    assert np.any(want > 0) and np.any(want == 0)


def test_soft_edit_matches_the_reference_on_soft_inputs():
    rng = np.random.default_rng(1)
    targets, _, masks = _videos(rng, 12, length=14, classes=3)
    logits = rng.normal(0, 2, (12, 14, 3)).astype(np.float32)
    gammas = np.array([0.05, 0.3, 1.0] * 4, np.float32)

    @jax.jit
    def run(logits, targets, masks, gammas):
        def one(x, y, m, g, normalize):
            return losses.soft_edit_loss(
                x, y, mask=m, background=(0,), gamma=g, normalize=normalize
            )

        return [
            jax.vmap(lambda *a, n=n: one(*a, n))(logits, targets, masks, gammas)
            for n in ("target", "max")
        ]

    by_target, by_max = run(logits, targets, masks, gammas)
    for k in range(12):
        m = masks[k]
        want, n_target, starts = soft_edit_distance_reference(
            softmax(logits[k][m]), targets[k][m], float(gammas[k]), background=(0,)
        )
        np.testing.assert_allclose(
            float(by_target[k]), want / max(n_target, 1), rtol=2e-5, atol=2e-5
        )
        np.testing.assert_allclose(
            float(by_max[k]), want / max(starts.sum(), n_target, 1), rtol=2e-5, atol=2e-5
        )


def _grad_fn(backward, gamma=0.1, background=(0,)):
    def total(logits, targets, masks):
        return jnp.sum(
            losses.soft_edit_loss(
                logits, targets, mask=masks, gamma=gamma, background=background, backward=backward
            )
        )

    return jax.jit(jax.grad(total))


def test_soft_edit_gradients_custom_equal_autodiff_and_vanish_on_masked_frames():
    rng = np.random.default_rng(3)
    targets, _, masks = _videos(rng, 16, hole_fraction=1.0)
    logits = rng.normal(0, 2, (16, T, C)).astype(np.float32)
    custom = np.asarray(_grad_fn("custom")(logits, targets, masks))
    auto = np.asarray(_grad_fn("autodiff")(logits, targets, masks))
    assert np.all(np.isfinite(custom))
    np.testing.assert_allclose(custom, auto, rtol=1e-4, atol=1e-6)
    assert np.all(custom[~masks] == 0.0)
    assert np.any(custom[masks] != 0.0)


@pytest.mark.parametrize("case", ["all_masked", "one_class", "one_hot", "tiny_gamma"])
def test_soft_edit_gradients_finite_on_degenerate_inputs(case):
    rng = np.random.default_rng(4)
    targets, predictions, masks = _videos(rng, 4)
    logits = rng.normal(0, 2, (4, T, C)).astype(np.float32)
    gamma = 0.1
    if case == "all_masked":
        masks = np.zeros_like(masks)
    elif case == "one_class":
        targets = np.zeros_like(targets)
        logits = logits[..., :1]
    elif case == "one_hot":
        logits = ONE_HOT_SCALE * np.eye(C, dtype=np.float32)[predictions]
    else:
        gamma = 1e-3
    values = jax.jit(lambda x, y, m: losses.soft_edit_loss(x, y, mask=m, gamma=gamma))(
        logits, targets, masks
    )
    grads = np.asarray(_grad_fn("custom", gamma=gamma, background=())(logits, targets, masks))
    assert np.all(np.isfinite(np.asarray(values))) and np.all(np.isfinite(grads))
    assert np.all(grads[~masks] == 0.0)
    if case == "all_masked":
        np.testing.assert_array_equal(np.asarray(values), 0.0)


def test_soft_edit_check_grads_float64():
    rng = np.random.default_rng(5)
    targets = np.array([1, 1, 2, 2, 2, 0, 1, 1])
    # The target segments carry no gradient: encode them in 32 bits, then differentiate the
    # soft distance of the probabilities in float64.
    segments = to_segments(targets, background=(0,), max_segments=8)
    with jax.enable_x64():
        probs = jnp.asarray(softmax(rng.normal(0, 1, (8, 3))), jnp.float64)
        for backward in ("custom", "autodiff"):
            fn = jax.jit(
                lambda p, b=backward: soft_edit_distance(
                    p,
                    jnp.int32(7),
                    segments.labels,
                    segments.count,
                    background=(0,),
                    gamma=jnp.float64(0.3),
                    backward=b,
                )[0]
            )
            assert fn(probs).dtype == jnp.float64
            want, _, _ = soft_edit_distance_reference(
                np.asarray(probs)[:7], targets[:7], 0.3, background=(0,)
            )
            np.testing.assert_allclose(float(fn(probs)), want, rtol=1e-10)
            check_grads(fn, (probs,), order=1, modes=["rev"], eps=1e-5)


def test_soft_edit_batching_masking_and_overflow():
    rng = np.random.default_rng(6)
    targets, _, masks = _videos(rng, 6, hole_fraction=1.0)
    logits = rng.normal(0, 2, (6, T, C)).astype(np.float32)
    flicker = np.arange(T) % 2
    loss = jax.jit(lambda x, y, m: losses.soft_edit_loss(x, y, mask=m, max_segments=T // 2))
    batched = loss(logits.reshape(2, 3, T, C), targets.reshape(2, 3, T), masks.reshape(2, 3, T))
    assert batched.shape == (2, 3) and batched.dtype == jnp.float32
    # Masked frames behave like frames removed from the sequence (moved past the valid ones).
    m = masks[5]
    order = np.argsort(~m, kind="stable")
    single = loss(logits[5][order], targets[5][order], np.sort(m)[::-1])
    np.testing.assert_allclose(float(batched[1, 2]), float(single), rtol=1e-5, atol=1e-6)
    over = loss(logits[0], flicker, np.ones(T, bool))  # T segments > capacity T / 2
    assert np.isnan(float(over))


def test_soft_edit_accepts_bfloat16_and_rejects_bad_arguments():
    logits = jnp.zeros((6, C), jnp.bfloat16)
    labels = jnp.zeros(6, jnp.int32)
    value = jax.jit(lambda x: losses.soft_edit_loss(x, labels, max_segments=4))(logits)
    assert value.dtype == jnp.float32
    with pytest.raises(ValueError, match="labels must have shape"):
        losses.soft_edit_loss(logits, labels[:-1])
    with pytest.raises(TypeError, match="labels"):
        losses.soft_edit_loss(logits, labels.astype(jnp.float32))
    with pytest.raises(ValueError, match="normalize"):
        losses.soft_edit_loss(logits, labels, normalize="gt")
    with pytest.raises(ValueError, match="mask"):
        losses.soft_edit_loss(logits, labels, mask=jnp.ones(5, bool))


# ----------------------------------------------------------------------------- soft Levenshtein


def test_soft_levenshtein_equals_levenshtein_on_one_hot_and_reference_on_soft():
    rng = np.random.default_rng(7)
    n, m, size = 9, 11, 40
    symbols, labels = rng.integers(0, 4, (size, n)), rng.integers(0, 4, (size, m))
    mask = np.arange(n) < rng.integers(0, n + 1, (size, 1))
    label_mask = np.arange(m) < rng.integers(0, m + 1, (size, 1))
    fn = jax.jit(lambda x, y, a, b, g: losses.soft_levenshtein(x, y, mask=a, label_mask=b, gamma=g))
    hard = fn(ONE_HOT_SCALE * jax.nn.one_hot(symbols, 4), labels, mask, label_mask, 1e-3)
    want = [
        levenshtein(s[a], y[b])
        for s, y, a, b in zip(symbols, labels, mask, label_mask, strict=True)
    ]
    np.testing.assert_allclose(np.asarray(hard), want, atol=0.01)
    logits = rng.normal(0, 2, (size, n, 4)).astype(np.float32)
    soft = np.asarray(fn(logits, labels, mask, label_mask, 0.5))
    for k in range(size):
        p = softmax(logits[k][mask[k]])
        y = labels[k][label_mask[k]]
        c_sub = 1.0 - p[:, y]
        want = soft_dp(np.ones(len(p)), c_sub.reshape(len(p), len(y)), np.ones(len(y)), 0.5)
        np.testing.assert_allclose(soft[k], want, rtol=1e-5, atol=1e-5)
    grads = jax.grad(lambda x: jnp.sum(fn(x, labels, mask, label_mask, 0.5)))(logits)
    assert np.all(np.asarray(grads)[~mask] == 0.0) and np.all(np.isfinite(np.asarray(grads)))


def test_soft_edit_with_stride_is_exact_when_segments_span_whole_windows():
    rng = np.random.default_rng(8)
    size, length, stride = 64, 96, 4

    def runs(count):  # segments of 4..12 frames
        x = np.repeat(rng.integers(0, C, count), rng.integers(4, 13, count))[:length]
        return np.pad(x, (0, length - len(x)), mode="edge")

    targets = np.stack([runs(12) for _ in range(size)])
    predictions = np.stack([t if rng.random() < 0.3 else runs(16) for t in targets])
    logits = ONE_HOT_SCALE * jax.nn.one_hot(predictions, C)
    loss = jax.jit(
        lambda x, y, s: losses.soft_edit_loss(
            x, y, background=(0,), gamma=0.01, max_segments=24, stride=s
        ),
        static_argnums=2,
    )
    want = np.array(
        [
            levenshtein(segment_labels(p, (0,)), segment_labels(t, (0,)))
            for t, p in zip(targets, predictions, strict=True)
        ]
    )
    n_target = np.array([max(len(segment_labels(t, (0,))), 1) for t in targets])
    for s in (1, stride):
        np.testing.assert_array_equal(
            np.round(np.asarray(loss(logits, targets, s)) * n_target), want
        )
    # Soft inputs: stride 1 is the frame-level recursion, and the strided loss has gradients.
    soft = rng.normal(0, 2, (4, length, C)).astype(np.float32)
    grads = jax.grad(lambda x: jnp.sum(loss(x, targets[:4], stride)))(soft)
    assert np.all(np.isfinite(np.asarray(grads))) and np.any(np.asarray(grads) != 0)
    with pytest.raises(ValueError, match="stride"):
        losses.soft_edit_loss(soft, targets[:4], stride=0)


def test_soft_levenshtein_check_grads_float64():
    rng = np.random.default_rng(9)
    labels = np.array([0, 2, 1, 1, 3])
    mask = np.array([1, 1, 0, 1, 1, 1], bool)
    with jax.enable_x64():
        logits = jnp.asarray(rng.normal(0, 1, (6, 4)), jnp.float64)
        for backward in ("custom", "autodiff"):
            fn = jax.jit(
                lambda x, b=backward: losses.soft_levenshtein(
                    x, labels, mask=mask, gamma=0.3, backward=b
                )
            )
            assert fn(logits).dtype == jnp.float64
            check_grads(fn, (logits,), order=1, modes=["rev"], eps=1e-5)


def test_soft_levenshtein_ignore_index_and_symbols_outside_the_classes():
    rng = np.random.default_rng(20)
    logits = rng.normal(0, 2, (2, 6, 4)).astype(np.float32)
    symbols = np.array([[1, 3, 0, -100, -100], [2, 2, 1, 3, -100]])
    got = np.asarray(losses.soft_levenshtein(logits, symbols, ignore_index=-100))
    for k in range(2):
        kept = symbols[k][symbols[k] != -100]
        np.testing.assert_allclose(
            got[k], float(losses.soft_levenshtein(logits[k], kept)), rtol=1e-5
        )
    with pytest.raises(ValueError, match=r"= -100 lies outside \[0, 4\)"):
        losses.soft_levenshtein(logits, symbols)
    traced = np.asarray(jax.jit(losses.soft_levenshtein)(logits, symbols))
    assert np.all(np.isnan(traced))


@pytest.mark.parametrize("loss", [losses.soft_edit_loss, losses.soft_levenshtein])
def test_gamma_per_sequence_broadcasts_over_the_batch_and_bad_gammas_name_gamma(loss):
    """A gamma of shape [2, 1] or [3] on a [2, 3] batch raised JAX's broadcasting errors, and
    gamma=None 'None is not a valid value for jnp.array', naming nothing; a gamma broadcast to
    the batch is one temperature per sequence, as a [B] gamma already was for a [B] batch
    (soft_levenshtein took a scalar only)."""
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 2, (2, 3, 6, 3)).astype(np.float32)
    labels = rng.integers(0, 3, (2, 3, 6))
    for gamma in (np.array([[0.1], [0.3]]), np.array([0.1, 0.2, 0.3])):
        got = loss(logits, labels, gamma=jnp.asarray(gamma, jnp.float32))
        each = np.broadcast_to(gamma, (2, 3))
        want = [
            [float(loss(logits[i, j], labels[i, j], gamma=float(each[i, j]))) for j in range(3)]
            for i in range(2)
        ]
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
    for bad, error in ((None, TypeError), ("0.1", TypeError), (True, TypeError)):
        with pytest.raises(error, match="gamma"):
            loss(logits, labels, gamma=bad)
    with pytest.raises(ValueError, match="gamma must be > 0"):
        loss(logits, labels, gamma=-0.1)
    with pytest.raises(ValueError, match=r"gamma must be a scalar or broadcastable to \(2, 3\)"):
        loss(logits, labels, gamma=jnp.ones(2))
