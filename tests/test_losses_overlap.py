"""Tests of the soft overlap losses against hard IoU/Dice and slow numpy references."""

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _reference_losses import class_sums, hard_dice, hard_iou, lovasz_class, softmax
from jax.test_util import check_grads

from jaxseg import losses
from jaxseg._src import soft_overlap

T, C = 40, 4
ONE_HOT_SCALE = 40.0


def _data(seed, size=8, length=T, classes=C):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes - 1, (size, length))  # the last class is never a label
    predictions = np.where(
        rng.random((size, length)) < 0.3, rng.integers(0, classes, (size, length)), labels
    )
    masks = rng.random((size, length)) < 0.8
    masks[0] = False  # an example without valid positions
    logits = rng.normal(0, 2, (size, length, classes)).astype(np.float32)
    return labels, predictions, masks, logits


def _reference(name, probs, labels, classes, num_classes):
    """Per-example loss from the formulas, with smooth = 0."""
    inter, pred, target = class_sums(probs, labels, num_classes)
    present = target > 0
    if name == "generalized_dice":
        w = np.where(present, 1.0 / np.maximum(target, 1) ** 2, 0.0)
        den = np.sum(w * (pred + target))
        return 1.0 - 2 * np.sum(w * inter) / den if den else 0.0
    if name == "jaccard":
        union = pred + target - inter
        per_class = 1.0 - np.divide(inter, union, out=np.ones_like(union), where=union > 0)
    elif name == "dice":
        total = pred + target
        per_class = 1.0 - np.divide(2 * inter, total, out=np.ones_like(total), where=total > 0)
    elif name == "tversky":  # alpha = 0.3, beta = 0.7
        den = inter + 0.3 * (pred - inter) + 0.7 * (target - inter)
        per_class = 1.0 - np.divide(inter, den, out=np.ones_like(den), where=den > 0)
    else:
        onehot = np.eye(num_classes)[labels]
        per_class = np.array(
            [
                lovasz_class(np.abs(onehot[:, c] - probs[:, c]), onehot[:, c])
                for c in range(num_classes)
            ]
        )
    if classes == "all":
        return per_class.mean()
    return per_class[present].mean() if present.any() else 0.0


_LOSSES = {
    "jaccard": losses.soft_jaccard_loss,
    "dice": losses.soft_dice_loss,
    "tversky": lambda *a, **k: losses.tversky_loss(*a, alpha=0.3, beta=0.7, **k),
    "lovasz": losses.lovasz_softmax_loss,
}


@pytest.mark.parametrize("classes", ["present", "all"])
def test_overlap_losses_match_the_reference_on_soft_inputs(classes):
    labels, _, masks, logits = _data(0)

    @jax.jit
    def run(logits, labels, masks):
        out = {
            name: fn(logits, labels, mask=masks, classes=classes) for name, fn in _LOSSES.items()
        }
        out["generalized_dice"] = losses.generalized_dice_loss(logits, labels, mask=masks)
        return out

    got = run(logits, labels, masks)
    for name, values in got.items():
        assert values.shape == (8,) and values.dtype == jnp.float32
        for k in range(8):
            m = masks[k]
            want = _reference(name, softmax(logits[k][m]), labels[k][m], classes, C)
            np.testing.assert_allclose(
                float(values[k]), want, rtol=1e-5, atol=1e-6, err_msg=f"{name} example {k}"
            )


def test_overlap_losses_equal_one_minus_the_hard_metric_on_one_hot_inputs():
    labels, predictions, masks, _ = _data(1, size=32)
    logits = ONE_HOT_SCALE * jax.nn.one_hot(predictions, C)

    @jax.jit
    def run(logits, labels, masks):
        kw = dict(mask=masks)
        return (
            losses.soft_jaccard_loss(logits, labels, **kw),
            losses.lovasz_softmax_loss(logits, labels, **kw),
            losses.soft_dice_loss(logits, labels, **kw),
            losses.soft_dice_loss(logits, labels, form="squared", **kw),
            losses.tversky_loss(logits, labels, alpha=1.0, beta=1.0, **kw),
        )

    jaccard, lovasz, dice, dice_squared, tversky = (
        np.asarray(x) for x in run(logits, labels, masks)
    )
    for k in range(1, 32):
        m = masks[k]
        present = np.isin(np.arange(C), labels[k][m])
        iou = 1.0 - np.mean(hard_iou(predictions[k][m], labels[k][m], C)[present])
        dsc = 1.0 - np.mean(hard_dice(predictions[k][m], labels[k][m], C)[present])
        for value in (jaccard[k], lovasz[k], tversky[k]):
            np.testing.assert_allclose(value, iou, atol=1e-6)
        for value in (dice[k], dice_squared[k]):
            np.testing.assert_allclose(value, dsc, atol=1e-6)
    np.testing.assert_array_equal(jaccard[0], 0.0)  # no valid position


def test_dense_images_and_smoothing():
    rng = np.random.default_rng(2)
    labels = rng.integers(0, 3, (2, 6, 5))
    logits = rng.normal(0, 1, (2, 6, 5, 3)).astype(np.float32)
    mask = rng.random((2, 6, 5)) < 0.9
    fns = (losses.soft_jaccard_loss, losses.soft_dice_loss, losses.lovasz_softmax_loss)
    dense = jax.jit(lambda x, y, m: [f(x, y, mask=m, event_ndim=2) for f in fns])(
        logits, labels, mask
    )
    flat = jax.jit(lambda x, y, m: [f(x, y, mask=m) for f in fns])(
        logits.reshape(2, 30, 3), labels.reshape(2, 30), mask.reshape(2, 30)
    )
    for a, b in zip(dense, flat, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)
    # Smoothing enters numerator and denominator: an absent class scores 1 with "all".
    probs = softmax(logits[0].reshape(30, 3))
    inter, pred, target = class_sums(probs, labels[0].reshape(30), 3)
    want = np.mean(1.0 - (inter + 1.0) / (pred + target - inter + 1.0))
    got = losses.soft_jaccard_loss(logits[0], labels[0], smooth=1.0, classes="all", event_ndim=2)
    np.testing.assert_allclose(float(got), want, rtol=1e-6)
    with pytest.raises(ValueError, match="classes"):
        losses.soft_jaccard_loss(logits[0], labels[0], classes="some", event_ndim=2)
    with pytest.raises(ValueError, match="labels must have shape"):
        losses.soft_dice_loss(logits[0], labels[0, :, :4])


def test_overlap_gradients_float64_finite_and_zero_on_masked_positions():
    labels, _, masks, logits = _data(3, size=3, length=10)
    with jax.enable_x64(), jax.numpy_dtype_promotion("standard"):
        x = jnp.asarray(logits[1:], jnp.float64)
        for name, fn in {**_LOSSES, "generalized_dice": losses.generalized_dice_loss}.items():
            loss = jax.jit(lambda z, f=fn: jnp.sum(f(z, labels[1:], mask=masks[1:])))
            if name != "lovasz":  # piecewise linear: finite differences cross the sort order
                check_grads(loss, (x,), order=1, modes=["rev"], eps=1e-6)
    grad_fns = [
        jax.jit(jax.grad(lambda z, f=fn: jnp.sum(f(z, labels, mask=masks))))
        for fn in (*_LOSSES.values(), losses.generalized_dice_loss)
    ]
    for grad_fn in grad_fns:
        grads = np.asarray(grad_fn(logits))
        assert np.all(np.isfinite(grads))
        assert np.all(grads[~masks] == 0.0)
        assert np.any(grads[masks] != 0.0)
    # Degenerate: one class everywhere, one-hot and exactly right.
    one_class = ONE_HOT_SCALE * jax.nn.one_hot(np.zeros((1, 10), int), 1)
    zeros = np.zeros((1, 10), int)
    for fn in (*_LOSSES.values(), losses.generalized_dice_loss):
        value, grads = jax.jit(jax.value_and_grad(lambda z, f=fn: jnp.sum(f(z, zeros))))(one_class)
        np.testing.assert_allclose(float(value), 0.0, atol=1e-6)
        assert np.all(np.isfinite(np.asarray(grads)))


def test_lovasz_gradient_is_the_sorted_jaccard_increment():
    # d loss / d p for one class: the Lovász weights along the error order (no gradient
    # through the sort), checked against the reference weights by finite differences.
    rng = np.random.default_rng(4)
    labels = rng.integers(0, 2, 12)
    logits = rng.normal(0, 1, (12, 2)).astype(np.float32)
    with jax.enable_x64(), jax.numpy_dtype_promotion("standard"):
        x = jnp.asarray(logits, jnp.float64)
        fn = jax.jit(lambda z: losses.lovasz_softmax_loss(z, labels, classes="all"))
        grads = np.asarray(jax.grad(fn)(x))
        eps = 1e-7
        numeric = np.zeros_like(grads)
        for i in range(12):
            for c in range(2):
                step = np.zeros_like(logits, dtype=np.float64)
                step[i, c] = eps
                numeric[i, c] = (float(fn(x + step)) - float(fn(x - step))) / (2 * eps)
    np.testing.assert_allclose(grads, numeric, rtol=1e-5, atol=1e-8)


def _stable_lovasz_weights(errors, foreground):
    """d loss / d errors of one class: the Jaccard increments along the stable error order."""
    order = np.argsort(-errors, kind="stable")
    g = foreground[order]
    seen = np.arange(1, len(g) + 1)
    inter = g.sum() - np.cumsum(g)
    union = g.sum() + seen - np.cumsum(g)
    jaccard = 1.0 - inter / union
    weights = np.empty_like(errors)
    weights[order] = np.diff(jaccard, prepend=0.0)
    return weights


@pytest.mark.parametrize("length", [40, 2000, 2100])
def test_lovasz_ranks_tied_and_close_errors_exactly(length):
    # Integer sorts (two passes up to 2048 entries, key/value beyond): exactly tied errors keep
    # their index order, errors that differ only in their last bits are still ordered, and 0,
    # 1 and subnormal errors are ranked like numpy ranks them.
    rng = np.random.default_rng(length)
    base = np.float32([0.0, 1.0, 0.5, 1e-45, 3e-39, 0.25])
    errors = rng.choice(base, (3, length))
    errors[1] = np.float32(0.3) + rng.integers(0, 600, length) * np.float32(2**-25)
    errors[2] = rng.random(length).astype(np.float32)
    foreground = (rng.random((3, length)) < 0.3).astype(np.float32)
    order = jax.jit(soft_overlap._decreasing_order)(errors)
    np.testing.assert_array_equal(np.asarray(order), np.argsort(-errors, axis=-1, kind="stable"))
    foreground[2] = 0  # no foreground: the largest error, at its first index
    errors[2, 7] = errors[2, 5] = errors[2].max()
    _check_lovasz_rows(errors, foreground)


def _lovasz_rows_loss(errors, foreground):
    """Sum of the Lovász losses of rows ``[3, F]``, as the 3 classes of one example."""
    errors, foreground = errors.T[None], foreground.T[None] > 0
    return jnp.sum(soft_overlap._lovasz_per_class(errors, foreground, jnp.any(foreground, 1)))


_lovasz_rows_value_and_grad = jax.jit(jax.value_and_grad(_lovasz_rows_loss))


def _check_lovasz_rows(errors, foreground):
    """Value and gradient of :func:`_lovasz_rows_loss` against the float64 references."""
    value, grads = _lovasz_rows_value_and_grad(errors, foreground)
    e64, g64 = errors.astype(np.float64), foreground.astype(np.float64)
    want = sum(lovasz_class(e64[c], g64[c]) for c in range(3))
    np.testing.assert_allclose(float(value), want, rtol=1e-5)
    weights = np.stack([_stable_lovasz_weights(e64[c], g64[c]) for c in range(3)])
    np.testing.assert_allclose(np.asarray(grads), weights, atol=1e-6)


@pytest.mark.parametrize("ranked", [250, 251, 900, 1900])
def test_lovasz_ranks_only_the_errors_up_to_the_last_foreground_exactly(ranked):
    # The errors after the last foreground one (in the stable decreasing order) have weight 0;
    # the others (`ranked` in row 0, fewer in rows 1 and 2) are moved into F/8 = 250, F/4, F/2
    # or F columns and ranked there. Row 1 has 6 errors tied with the last foreground error,
    # before and after its index, row 2 errors one ulp above and below it.
    rng = np.random.default_rng(ranked)
    errors = rng.random((3, 2000)).astype(np.float32)
    foreground = np.zeros((3, 2000), np.float32)
    for r, count in enumerate((ranked, ranked - 10, ranked - 10)):
        top = np.argsort(-errors[r], kind="stable")[:count]
        foreground[r, rng.choice(top[:-1], 30, replace=False)] = 1
        foreground[r, top[-1]] = 1  # the last foreground error
    for r, shift in ((1, (0, 0)), (2, (-1, 1))):
        last = np.argsort(-errors[r], kind="stable")[ranked - 11]
        near = rng.choice(np.flatnonzero(foreground[r] == 0), (2, 3), replace=False)
        for step, index in zip(shift, near, strict=True):
            toward = np.float32(np.inf if step > 0 else -np.inf)
            errors[r, index] = np.nextafter(errors[r, last], toward) if step else errors[r, last]
    counts = np.asarray(jnp.sum(~soft_overlap._after_last_foreground(errors, foreground > 0), -1))
    for r in range(3):
        order = np.argsort(-errors[r], kind="stable")
        assert counts[r] == np.flatnonzero(foreground[r][order])[-1] + 1
    assert counts[0] == ranked and counts[1:].max() < ranked
    _check_lovasz_rows(errors, foreground)


_LOVASZ_IN_A_PROCESS = """
import sys
import jax
import numpy as np
from jaxseg import losses
data = np.load(sys.argv[1])
loss = jax.jit(losses.lovasz_softmax_loss)(data["logits"], data["labels"], mask=data["masks"])
np.save(sys.argv[2], np.asarray(loss))
"""


def test_lovasz_ranks_every_foreground_error_where_xla_recomputes_the_errors(tmp_path):
    # XLA:CPU drops the optimization barrier and recomputes the softmax's division in each
    # fusion that reads the errors; at LLVM optimisation level 0 the copies differ in the last
    # bit. The foreground error ranked last was then left out of the ranking in 9 of these 64
    # masked examples (losses off by up to 0.22): a process compiled so must still match.
    labels, _, masks, logits = _data(2, size=64, length=12)
    np.savez(tmp_path / "data.npz", logits=logits, labels=labels, masks=masks)
    env = dict(os.environ, XLA_FLAGS="--xla_backend_optimization_level=0", JAX_PLATFORMS="cpu")
    script = (_LOVASZ_IN_A_PROCESS, tmp_path / "data.npz", tmp_path / "loss.npy")
    run = subprocess.run([sys.executable, "-c", *map(str, script)], env=env, capture_output=True)
    assert run.returncode == 0, run.stderr.decode()[-3000:]
    got = np.load(tmp_path / "loss.npy")
    for k, (x, y, m) in enumerate(zip(logits, labels, masks, strict=True)):
        want = _reference("lovasz", softmax(x[m]), y[m], "present", C) if m.any() else 0.0
        np.testing.assert_allclose(got[k], want, rtol=1e-5, atol=1e-6, err_msg=f"example {k}")


_CONFIDENT_LOSSES = {
    "jaccard": losses.soft_jaccard_loss,
    "dice": losses.soft_dice_loss,
    "dice_squared": lambda x, y, **kw: losses.soft_dice_loss(x, y, form="squared", **kw),
    "tversky": losses.tversky_loss,
    "tversky_beta0": lambda x, y, **kw: losses.tversky_loss(x, y, alpha=0.7, beta=0.0, **kw),
}


@pytest.mark.parametrize("name", sorted(_CONFIDENT_LOSSES))
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16, jnp.float16])
def test_confident_correct_predictions_have_finite_gradients(name, dtype):
    """Logits ``[[0, -45]]`` with label 0 gave NaN gradients: the absent class's denominator
    (~1e-20) squared underflows in the gradient of the ratio. Any finite logits, any dtype."""
    margins = [5.0, 20.0, 45.0, 60.0, 80.0, 100.0, 104.0, 200.0, 6e4]
    rows = []
    for m in margins:
        rows += [[[0.0, -m], [0.0, -m]], [[m, -m], [m, -m]], [[0.0, -m], [-m, 0.0]]]
    logits = jnp.asarray(np.array(rows, np.float32), dtype)  # [B, 2, 2]
    labels = jnp.asarray(np.tile([[0, 0], [0, 0], [0, 1]], (len(margins), 1)))
    for classes in ("present", "all"):
        for smooth in (0.0, 1e-30, 1.0):

            def total(x, classes=classes, smooth=smooth):
                fn = _CONFIDENT_LOSSES[name]
                return jnp.sum(fn(x, labels, classes=classes, smooth=smooth))

            value, grad = jax.value_and_grad(total)(logits)
            assert np.isfinite(float(value)), (classes, smooth)
            grad = np.asarray(grad, np.float32)
            assert np.all(np.isfinite(grad)), (classes, smooth, np.argwhere(~np.isfinite(grad)))
    # The value is unchanged: a confident correct prediction scores (almost) no loss.
    confident = jnp.asarray([[[0.0, -45.0]]], dtype)
    assert float(_CONFIDENT_LOSSES[name](confident, jnp.array([[0]]))[0]) < 1e-3


@pytest.mark.parametrize(
    "name, option",
    [
        ("soft_jaccard_loss", "smooth"),
        ("soft_dice_loss", "smooth"),
        ("tversky_loss", "alpha"),
        ("tversky_loss", "beta"),
        ("generalized_dice_loss", "smooth"),
        ("smoothing_loss", "threshold"),
    ],
)
def test_a_number_option_that_is_no_number_or_no_scalar_raises_naming_it(name, option):
    """None failed in Python arithmetic naming no argument, a [2] array in JAX's broadcasting;
    generalized_dice_loss(smooth=[2 values]) of a [2] batch returned [2, 2] losses silently."""
    loss = getattr(losses, name)
    logits, labels = np.zeros((2, 4, 3), np.float32), np.zeros((2, 4), np.int32)
    for bad, error, words in (
        (None, TypeError, "must be a float"),
        ("1", TypeError, "must be a float"),
        (np.array([1.0, 2.0], np.float32), ValueError, r"must be a scalar, got shape \(2,\)"),
        (np.float32(-1.0), ValueError, "must be >"),
    ):
        with pytest.raises(error, match=f"{option} {words}"):
            loss(logits, labels, **{option: bad})
