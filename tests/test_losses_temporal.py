"""Tests of smoothing_loss, segment_start_penalty, ctc_transcript_loss and the interval losses."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _reference_losses import ctc_brute_force, intervals, segment_labels, smoothing, softmax
from jax.test_util import check_grads

from jaxseg import losses
from jaxseg._src import capacity, ctc

ONE_HOT_SCALE = 40.0


def test_smoothing_matches_ms_tcn_formula_and_ignores_masked_frames():
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 3, (6, 20, 4)).astype(np.float32)
    masks = rng.random((6, 20)) < 0.7
    masks[0] = False
    masks[1] = np.arange(20) == 3  # a single valid frame: no adjacent pair
    got = jax.jit(lambda x, m: losses.smoothing_loss(x, mask=m, threshold=2.0))(logits, masks)
    for k in range(6):
        log_probs = np.log(softmax(logits[k][masks[k]]))
        np.testing.assert_allclose(float(got[k]), smoothing(log_probs, 2.0), rtol=1e-5, atol=1e-7)
    assert float(got[0]) == 0.0 and float(got[1]) == 0.0
    grads = np.asarray(
        jax.jit(jax.grad(lambda x: jnp.sum(losses.smoothing_loss(x, mask=masks))))(logits)
    )
    assert np.all(np.isfinite(grads)) and np.all(grads[~masks] == 0.0)


def test_smoothing_with_classes_ruled_out_by_minus_inf_logits_is_finite():
    """-inf logits (a class masked out at some frames): a class ruled out on both frames of a
    pair adds 0, on one of them the truncated tau^2; the value and gradient stay finite."""
    rng = np.random.default_rng(5)
    logits = rng.normal(0, 2, (2, 9, 4)).astype(np.float32)
    logits[0, 2:6, 1] = -np.inf  # ruled out on frames 2..5: pairs (1,2) and (5,6) one-sided
    logits[0, 7, 3] = -np.inf
    logits[1, :, 2] = -np.inf  # ruled out everywhere
    mask = np.ones((2, 9), bool)
    mask[0, 4] = False  # a masked frame inside the ruled-out run
    got = jax.jit(lambda x: losses.smoothing_loss(x, mask=mask, threshold=2.0))(logits)
    with np.errstate(divide="ignore", invalid="ignore"):  # log(0) = -inf where ruled out
        log_probs = np.log(softmax(logits[0][mask[0]]))
        ruled_out = np.isneginf(log_probs)
        both, one_side = ruled_out[1:] & ruled_out[:-1], ruled_out[1:] ^ ruled_out[:-1]
        squared = np.minimum((log_probs[1:] - log_probs[:-1]) ** 2, 4.0)
    squared = np.where(one_side, 4.0, np.where(both, 0.0, squared))
    np.testing.assert_allclose(float(got[0]), squared.mean(), rtol=1e-5)
    # Ruled out everywhere: the other classes' terms, as if the class were not there.
    without = float(losses.smoothing_loss(np.delete(logits[1], 2, axis=-1), threshold=2.0))
    np.testing.assert_allclose(float(got[1]), without * 3 / 4, rtol=1e-5)
    grads = jax.jit(jax.grad(lambda x: jnp.sum(losses.smoothing_loss(x, mask=mask))))(logits)
    grads = np.asarray(grads)
    assert np.all(np.isfinite(grads))
    assert np.all(grads[np.isneginf(logits)] == 0.0) and np.all(grads[~mask] == 0.0)


def test_segment_start_penalty_counts_predicted_segments_on_one_hot_inputs():
    rng = np.random.default_rng(1)
    labels = np.repeat(rng.integers(0, 4, (16, 10)), 3, axis=1)
    predictions = np.where(rng.random((16, 30)) < 0.15, rng.integers(0, 4, (16, 30)), labels)
    masks = rng.random((16, 30)) < 0.8
    logits = ONE_HOT_SCALE * jax.nn.one_hot(predictions, 4)

    @jax.jit
    def run(logits, labels, masks):
        return (
            losses.segment_start_penalty(logits, labels, mask=masks, background=(0,)),
            losses.segment_start_penalty(logits, labels, mask=masks, normalize="none"),
        )

    by_target, raw = (np.asarray(x) for x in run(logits, labels, masks))
    for k in range(16):
        m = masks[k]
        n_pred = len(segment_labels(predictions[k][m], (0,)))
        n_target = len(segment_labels(labels[k][m], (0,)))
        np.testing.assert_allclose(by_target[k], n_pred / max(n_target, 1), atol=1e-5)
        np.testing.assert_allclose(raw[k], len(segment_labels(predictions[k][m])), atol=1e-5)


@pytest.mark.parametrize("background", [(), (0,)])
def test_ctc_transcript_loss_equals_brute_force_enumeration(background):
    rng = np.random.default_rng(2)
    size, length, classes = 12, 5, 3
    logits = rng.normal(0, 1.5, (size, length, classes)).astype(np.float32)
    labels = rng.integers(0, classes, (size, length))
    masks = rng.random((size, length)) < 0.85
    got = jax.jit(
        lambda x, y, m: losses.ctc_transcript_loss(
            x, y, mask=m, background=background, normalize="none"
        )
    )(logits, labels, masks)
    for k in range(size):
        m = masks[k]
        probs = softmax(logits[k][m])
        blank = background[0] if background else classes
        if not background:  # the phantom blank column has logit -1e5: probability 0
            probs = np.hstack([probs, np.zeros((len(probs), 1))])
        transcript = segment_labels(labels[k][m], background)
        want = ctc_brute_force(probs, transcript, blank) if m.any() else 0.0
        np.testing.assert_allclose(float(got[k]), want, rtol=1e-4, atol=1e-4)


def test_ctc_transcript_loss_normalisation_overflow_and_errors():
    labels = np.array([1, 1, 2, 2, 1, 0])
    logits = ONE_HOT_SCALE * jax.nn.one_hot(labels, 3)
    loss = jax.jit(lambda x, y: losses.ctc_transcript_loss(x, y, background=(0,)))
    np.testing.assert_allclose(float(loss(logits, labels)), 0.0, atol=1e-5)
    assert float(loss(logits, np.array([1, 1, 1, 1, 1, 0]))) > 10.0
    overflow = jax.jit(lambda x, y: losses.ctc_transcript_loss(x, y, max_segments=2))
    assert np.isnan(float(overflow(logits, labels)))
    with pytest.raises(ValueError, match="background"):
        losses.ctc_transcript_loss(logits, labels, background=(0, 1))


@pytest.mark.parametrize("blank", [3, 7, -1, -3])
def test_ctc_transcript_loss_refuses_a_blank_outside_the_classes(blank):
    """The blank is a column of the logits: one outside [0, C) read another class's column
    (-1 and 7 the last, -3 the first) and gave a wrong loss silently."""
    labels = np.array([0, 1, 1, 2, 0])
    logits = np.random.default_rng(0).normal(0, 2, (5, 3)).astype(np.float32)
    with pytest.raises(ValueError, match=r"background.*\[0, 3\)"):
        losses.ctc_transcript_loss(logits, labels, background=(blank,))


def _random_lattices(rng, size, frames, capacity, classes):
    """Log-probabilities, valid frames, transcripts with repeats and their lengths."""
    logits = rng.normal(0, 2, (size, frames, classes)).astype(np.float32)
    transcripts = rng.integers(1, 3, (size, capacity)).astype(np.int32)  # labels 1, 2: repeats
    n_labels = rng.integers(0, capacity + 1, size)
    n_frames = np.minimum(frames, 2 * n_labels + rng.integers(0, frames, size))
    return np.asarray(jax.nn.log_softmax(logits)), n_frames, transcripts, n_labels


def test_ctc_transcript_loss_of_a_certain_or_impossible_transcript():
    """A transcript of probability 1 costs +0.0 (not -log 1 = -0.0); one that -inf logits
    rule out costs about 1e30 / M, finite, with a finite gradient."""
    labels = np.array([[0, 0, 0, 0], [1, 1, 0, 2]])
    certain = jax.jit(
        lambda x, y: losses.ctc_transcript_loss(x, y, background=(0,), normalize="none")
    )(np.zeros((2, 4, 1), np.float32), np.zeros_like(labels))
    assert not np.any(np.signbit(np.asarray(certain))) and np.all(np.asarray(certain) == 0.0)
    logits = np.random.default_rng(6).normal(0, 1, (2, 4, 3)).astype(np.float32)
    logits[1, :, 2] = -np.inf  # label 2 can never be emitted: transcript [1, 2] is impossible
    for background in ((), (0,)):

        def loss(x, background=background):
            return losses.ctc_transcript_loss(x, labels, background=background)

        values = np.asarray(jax.jit(loss)(logits))
        grads = np.asarray(jax.jit(jax.grad(lambda x: jnp.sum(loss(x))))(logits))
        assert np.isfinite(values[1]) and values[1] > 1e20 and values[0] < 1e3
        assert np.all(np.isfinite(grads))


def test_ctc_log_likelihood_equals_optax_ctc_loss():
    import optax

    rng = np.random.default_rng(4)
    log_probs, n_frames, transcripts, n_labels = _random_lattices(rng, 64, 40, 12, 4)
    got = jax.jit(jax.vmap(lambda *a: ctc.ctc_log_likelihood(*a, blank=0)))(
        log_probs, n_frames, transcripts, n_labels
    )
    frame_paddings = (np.arange(40) >= n_frames[:, None]).astype(np.float32)
    label_paddings = (np.arange(12) >= n_labels[:, None]).astype(np.float32)
    with jax.default_matmul_precision("highest"):
        want = optax.ctc_loss(log_probs, frame_paddings, transcripts, label_paddings, blank_id=0)
    np.testing.assert_allclose(-np.asarray(got), np.asarray(want), rtol=2e-6, atol=2e-5)


def test_ctc_recomputing_blocks_of_frames_changes_no_bit(monkeypatch):
    # Lattices above _KEPT_CELLS are differentiated block by block (jax.checkpoint): the same
    # operations in the same order, so the values and gradients equal the kept lattice's.
    rng = np.random.default_rng(5)
    log_probs, n_frames, transcripts, n_labels = _random_lattices(rng, 8, 30, 6, 3)

    def value_and_grad():
        def total(x):
            one = lambda *a: ctc.ctc_log_likelihood(*a, blank=0)  # noqa: E731
            return jnp.sum(jax.vmap(one)(x, n_frames, transcripts, n_labels))

        return jax.jit(jax.value_and_grad(total))(log_probs)

    kept = value_and_grad()
    monkeypatch.setattr(capacity, "_KEPT_CELLS", 50)
    assert capacity.recompute_blocks(30, 13)[0] > 1
    recomputed = value_and_grad()
    for x, y in zip(recomputed, kept, strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_interval_losses_match_the_formulas_and_have_gradients_when_disjoint():
    rng = np.random.default_rng(3)
    starts = rng.uniform(0, 10, (50, 2))
    lengths = rng.uniform(0, 5, (50, 2))
    lengths[:3] = 0.0  # zero-length intervals
    preds = np.stack([starts[:, 0], starts[:, 0] + lengths[:, 0]], -1).astype(np.float32)
    targets = np.stack([starts[:, 1], starts[:, 1] + lengths[:, 1]], -1).astype(np.float32)
    targets[0] = preds[0]  # identical zero-length intervals: empty union and hull
    fns = (losses.temporal_iou_loss, losses.temporal_giou_loss, losses.temporal_diou_loss)
    got = jax.jit(lambda t, p: [f(t, p) for f in fns])(targets, preds)
    for k in range(50):
        want = intervals(preds[k].astype(np.float64), targets[k].astype(np.float64))
        for value, w in zip(got, want, strict=True):
            np.testing.assert_allclose(float(value[k]), 1.0 - w, rtol=1e-5, atol=1e-5)
    disjoint = (jnp.array([0.0, 1.0]), jnp.array([3.0, 4.0]))
    for fn, moves in zip(fns, (False, True, True), strict=True):
        grad = np.asarray(jax.grad(lambda p, f=fn: f(disjoint[1], p))(disjoint[0]))
        assert np.all(np.isfinite(grad)) and bool(np.any(grad != 0)) == moves
    with jax.enable_x64(), jax.numpy_dtype_promotion("standard"):
        p64, t64 = jnp.asarray(preds[5:9], jnp.float64), jnp.asarray(targets[5:9], jnp.float64)
        for fn in fns:
            check_grads(lambda p, f=fn: f(t64, p), (p64,), order=1, modes=["rev"], eps=1e-6)
    mask = np.arange(50) % 2 == 0
    masked = losses.temporal_giou_loss(targets, preds, mask=mask)
    assert np.all(np.asarray(masked)[~mask] == 0.0)
    with pytest.raises(ValueError, match="targets"):
        losses.temporal_iou_loss(targets[:, :1], preds[:, :1])


# (The GIoU loss's hull term already gave these cases their gradient.)
@pytest.mark.parametrize("name", ["temporal_iou_loss", "temporal_diou_loss"])
def test_interval_losses_grow_a_prediction_shrunk_to_a_point_or_touching(name):
    """Overlap exactly 0 (a zero-length prediction inside its target, as ReLU'd offsets
    give; a prediction touching its target): the gradient is the limit of the gradients at
    a small positive overlap, not relu's 0 at 0, which would leave the prediction stuck."""
    fn = getattr(losses, name)
    grad = jax.jit(jax.grad(lambda p, t: jnp.sum(fn(t, p))))
    targets = np.array([[0.0, 4.0], [0.0, 4.0], [0.0, 1.0]], np.float32)
    at_zero = np.array([[2.0, 2.0], [1.0, 1.0], [1.0, 2.0]], np.float32)
    grown = at_zero + np.array([[-1e-3, 1e-3], [-1e-3, 1e-3], [-1e-3, 0.0]], np.float32)
    got, want = np.asarray(grad(at_zero, targets)), np.asarray(grad(grown, targets))
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-3)
    assert np.all(got[:, 0] > 0)  # the start moves back: the overlap grows


def test_interval_losses_are_symmetric_so_the_old_argument_order_still_holds():
    # jaxseg 0.1 took (predictions, targets); the library order is now (targets,
    # predictions). Both orders give the same values, and the same gradient with respect to
    # the predictions, bit for bit.
    rng = np.random.default_rng(5)
    starts = rng.uniform(0, 10, (64, 2))
    ends = starts + rng.uniform(0, 5, (64, 2))
    targets = np.stack([starts[:, 0], ends[:, 0]], -1).astype(np.float32)
    preds = np.stack([starts[:, 1], ends[:, 1]], -1).astype(np.float32)
    for fn in (losses.temporal_iou_loss, losses.temporal_giou_loss, losses.temporal_diou_loss):
        np.testing.assert_array_equal(fn(targets, preds), fn(preds, targets))
        new = jax.grad(lambda p, f=fn: f(targets, p).sum())(preds)
        old = jax.grad(lambda p, f=fn: f(p, targets).sum())(preds)
        np.testing.assert_array_equal(new, old)


def test_start_penalty_check_grads_float64():
    # (smoothing_loss stops the gradient through the previous frame, as MS-TCN does, so its
    # gradient is deliberately not the finite-difference derivative of its value.)
    rng = np.random.default_rng(4)
    mask = np.array([1, 1, 0, 1, 1, 1, 0, 1], bool)
    with jax.enable_x64(), jax.numpy_dtype_promotion("standard"):
        logits = jnp.asarray(rng.normal(0, 1, (8, 3)), jnp.float64)
        starts = jax.jit(
            lambda x: losses.segment_start_penalty(
                x, jnp.zeros(8, jnp.int32), mask=mask, normalize="none"
            )
        )
        check_grads(starts, (logits,), order=1, modes=["rev"], eps=1e-6)


_LABELLED_LOSSES = {
    "soft_edit_loss": lambda x, y, **kw: losses.soft_edit_loss(x, y, background=(0,), **kw),
    "ctc_transcript_loss": lambda x, y, **kw: losses.ctc_transcript_loss(
        x, y, background=(0,), **kw
    ),
    "segment_start_penalty": losses.segment_start_penalty,
    "smoothing_loss": losses.smoothing_loss,
    "soft_dice_loss": losses.soft_dice_loss,
    "soft_jaccard_loss": losses.soft_jaccard_loss,
    "tversky_loss": losses.tversky_loss,
    "generalized_dice_loss": losses.generalized_dice_loss,
    "lovasz_softmax_loss": losses.lovasz_softmax_loss,
}


def _padded_batch(pad):
    """Three sequences of 4 classes padded with ``pad`` labels, and their valid lengths."""
    rng = np.random.default_rng(20)
    logits = rng.normal(0, 2, (3, 16, 4)).astype(np.float32)
    labels = np.repeat(rng.integers(0, 4, (3, 4)), 4, axis=1)
    lengths = np.array([16, 11, 5])
    labels[np.arange(16) >= lengths[:, None]] = pad
    return logits, labels, lengths


@pytest.mark.parametrize("name", sorted(_LABELLED_LOSSES))
def test_ignore_index_equals_cutting_the_padding_off(name):
    loss = _LABELLED_LOSSES[name]
    logits, labels, lengths = _padded_batch(-100)
    got = np.asarray(jax.jit(lambda x, y: loss(x, y, ignore_index=-100))(logits, labels))
    for k, n in enumerate(lengths):
        alone = float(loss(logits[k, :n], labels[k, :n]))
        np.testing.assert_allclose(got[k], alone, rtol=2e-5, atol=1e-6)
    grads = jax.jit(jax.grad(lambda x, y: jnp.sum(loss(x, y, ignore_index=-100))))(logits, labels)
    grads = np.asarray(grads)
    assert np.all(np.isfinite(grads))
    assert np.all(grads[np.arange(16) >= lengths[:, None]] == 0.0)


@pytest.mark.parametrize("name", sorted(set(_LABELLED_LOSSES) - {"smoothing_loss"}))
def test_labels_outside_the_classes_raise_or_give_nan(name):
    """Concrete labels outside [0, C): ValueError naming the label. Traced: NaN for that
    sequence only, the others unchanged, and finite (zero) gradients. Both pads in one test:
    they are values of the same shapes, so the programs compile once."""
    loss = _LABELLED_LOSSES[name]
    grad = jax.jit(jax.grad(lambda x, y: jnp.sum(jnp.nan_to_num(loss(x, y)))))
    for pad in (-100, 4):
        logits, labels, lengths = _padded_batch(pad)
        with pytest.raises(ValueError, match=rf"= {pad} lies outside \[0, 4\)"):
            loss(logits, labels)
        masked = np.arange(16) < lengths[:, None]
        assert np.all(np.isfinite(np.asarray(loss(logits, labels, mask=masked))))
        got = np.asarray(jax.jit(loss)(logits, labels))
        assert not np.isnan(got[0]) and np.all(np.isnan(got[1:])), pad
        np.testing.assert_allclose(got[0], float(loss(logits[0], labels[0])), rtol=2e-5)
        grads = np.asarray(grad(logits, labels))
        assert np.all(np.isfinite(grads)), pad
        assert np.all(grads[1:] == 0.0), pad


@pytest.mark.parametrize("name", sorted(_LABELLED_LOSSES))
def test_a_class_ruled_out_by_minus_inf_logits_is_as_if_it_were_not_there(name):
    """Masking a class with -inf logits on every frame (it is never a label) gives the loss
    without that class (smoothing_loss: its 0 terms still count in the mean over classes),
    a finite gradient, and none to the -inf logits."""
    loss = _LABELLED_LOSSES[name]
    logits, labels, lengths = _padded_batch(0)
    labels = np.where(labels == 3, 1, labels)
    mask = np.arange(16) < lengths[:, None]
    ruled_out = logits.copy()
    ruled_out[..., 3] = -np.inf
    got = np.asarray(jax.jit(lambda x: loss(x, labels, mask=mask))(ruled_out))
    want = np.asarray(loss(logits[..., :3], labels, mask=mask))
    want = want * 3 / 4 if name == "smoothing_loss" else want
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)
    grads = jax.jit(jax.grad(lambda x: jnp.sum(loss(x, labels, mask=mask))))(ruled_out)
    grads = np.asarray(grads)
    assert np.all(np.isfinite(grads)) and np.all(grads[..., 3] == 0.0)
    assert np.all(grads[~mask] == 0.0)


@pytest.mark.parametrize("name", ["soft_edit_loss", "ctc_transcript_loss"])
def test_gradient_of_an_empty_batch_is_empty(name):
    """At the default capacity the gradient of a batch of no sequence raised numpy's
    ZeroDivisionError ('integer modulo by zero') while the value was []."""
    loss = getattr(losses, name)
    labels = np.zeros((0, 5), np.int32)
    grads = jax.grad(lambda x: jnp.sum(loss(x, labels)))(jnp.zeros((0, 5, 3)))
    assert grads.shape == (0, 5, 3)


@pytest.mark.parametrize(
    "name",
    [
        "soft_edit_loss",
        "soft_levenshtein",
        "ctc_transcript_loss",
        "segment_start_penalty",
        "soft_jaccard_loss",
        "soft_dice_loss",
        "tversky_loss",
        "generalized_dice_loss",
        "lovasz_softmax_loss",
    ],
)
def test_logits_without_a_class_raise_naming_logits(name):
    """Logits [T, 0] raised numpy's ZeroDivisionError ('integer modulo by zero') or a JAX
    gather error, naming nothing, even with every frame masked; inside jit too."""
    loss = getattr(losses, name)
    logits, labels = np.zeros((3, 0), np.float32), np.zeros(3, np.int32)
    for call in (loss, jax.jit(loss)):
        with pytest.raises(ValueError, match=r"logits.*C >= 1.*\(3, 0\)"):
            call(logits, labels, mask=np.zeros(3, bool))
