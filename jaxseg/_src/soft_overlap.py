"""Soft overlap losses: Jaccard, Dice, Tversky, generalised Dice and Lovász-Softmax.

Each is computed per example (a sequence ``[T, C]`` or, with ``event_ndim=2``, an image
``[H, W, C]``) from the per-class sums over valid positions of ``p = softmax(logits) * mask``
and ``g = one_hot(labels) * mask``: ``I_c = Σ p g``, ``P_c = Σ p``, ``G_c = Σ g``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from jaxseg._src import checks
from jaxseg._src.batching import lift
from jaxseg._src.loss_utils import logits_and_labels, probabilities
from jaxseg._src.numerics import safe_divide
from jaxseg._src.ranking import cumulative_count, stable_order

_CLASSES = ("present", "all")


def _flat_example(logits, labels, mask, event_ndim):
    """Probabilities ``[F, C]`` and one-hot labels ``[F, C]`` of one example, both masked."""
    num_classes = logits.shape[-1]
    probs = probabilities(logits).reshape(-1, num_classes)
    valid = mask.reshape(-1, 1)
    onehot = jax.nn.one_hot(labels.reshape(-1), num_classes, dtype=probs.dtype)
    return jnp.where(valid, probs, 0.0), jnp.where(valid, onehot, 0.0)


def _lift_example(fn, logits, labels, mask, event_ndim, classes):
    """Validates the arguments and maps ``fn(probs [F, C], onehot [F, C])`` over examples."""
    event_ndim = checks.static_int("event_ndim", event_ndim, minimum=1)
    logits, labels, mask = logits_and_labels(logits, labels, mask, event_ndim=event_ndim)
    checks.static_choice("classes", classes, _CLASSES)

    def one(x, y, valid):
        return fn(*_flat_example(x, y, valid, event_ndim))

    return lift(one, (logits, labels, mask), (event_ndim + 1, event_ndim, event_ndim))


def _class_mean(loss_per_class, present, classes):
    """Mean over the classes present in the labels (``"present"``) or over all classes.

    With ``"present"`` and no present class (no valid position) the mean is 0.
    """
    if classes == "all":
        return jnp.mean(loss_per_class, axis=-1)
    weights = present.astype(loss_per_class.dtype)
    return safe_divide(jnp.sum(weights * loss_per_class, axis=-1), jnp.sum(weights, axis=-1))


def _overlap_sums(probs, onehot):
    return (jnp.sum(probs * onehot, axis=0), jnp.sum(probs, axis=0), jnp.sum(onehot, axis=0))


def _ratio_loss(numerator, denominator, smooth):
    """``1 - (numerator + s) / (denominator + s)``; a 0/0 ratio (s = 0, empty class) counts 1."""
    return 1.0 - safe_divide(numerator + smooth, denominator + smooth, fill=1.0)


_COMMON_ARGS = """logits: float ``[..., T, C]`` (or ``[..., H, W, C]`` with ``event_ndim=2``)
        unnormalised scores; softmax over the last axis inside, in float32.
      labels: integer ``[..., T]`` (or ``[..., H, W]``) labels in ``[0, C)``.
      mask: optional bool, the shape of ``labels``, True = valid; masked positions are removed
        (their probabilities and labels are zeroed before any sum) and get zero gradient."""


def soft_jaccard_loss(
    logits, labels, *, mask=None, smooth=0.0, classes="present", event_ndim=1
) -> jax.Array:
    r"""Soft Jaccard (IoU) loss, per example, averaged over classes.

    .. math:: 1 - \frac{I_c + s}{P_c + G_c - I_c + s}

    On one-hot probabilities with ``smooth=0`` it equals 1 − the IoU of each class.

    Args:
      {common}
      smooth: float ``s`` added to numerator and denominator. Default 0 (the exact
        relaxation); with ``classes="all"`` use ``s > 0`` so that classes absent from both
        prediction and labels score 1 instead of 0.
      classes: ``"present"`` (mean over classes present in the labels) or ``"all"``.
      event_ndim: static, number of axes of one example before the class axis (1: ``[T]``,
        2: ``[H, W]``).

    Returns:
      float32 ``[...]`` in ``[0, 1]``; 0 for an example without valid positions (``"present"``).
      A 0/0 class ratio (``s = 0``, class absent from both) scores 1 (loss 0).

    >>> logits = 20.0 * jax.nn.one_hot(jnp.array([0, 0, 1, 1]), 2)
    >>> round(float(soft_jaccard_loss(logits, jnp.array([0, 1, 1, 1]))), 4)  # 1 - (1/2 + 2/3)/2
    0.4167

    References:
      Rahman & Wang, Optimizing intersection-over-union in deep neural networks for image
      segmentation, ISVC 2016.
    """

    def fn(probs, onehot):
        inter, pred, target = _overlap_sums(probs, onehot)
        per_class = _ratio_loss(inter, pred + target - inter, smooth)
        return _class_mean(per_class, target > 0, classes)

    return _lift_example(fn, logits, labels, mask, event_ndim, classes)


def soft_dice_loss(
    logits, labels, *, mask=None, smooth=0.0, form="sorensen", classes="present", event_ndim=1
) -> jax.Array:
    r"""Soft Dice loss, per example, averaged over classes.

    .. math::
        1 - \frac{2 I_c + s}{P_c + G_c + s}\ (\text{"sorensen"}) \quad\text{or}\quad
        1 - \frac{2 I_c + s}{\sum p_c^2 + \sum g_c^2 + s}\ (\text{"squared"}, V-Net)

    On one-hot probabilities with ``smooth=0`` both equal 1 − the Dice coefficient.

    Args:
      {common}
      smooth: float ``s`` added to numerator and denominator. Default 0.
      form: ``"sorensen"`` or ``"squared"``.
      classes: ``"present"`` or ``"all"`` (as :func:`soft_jaccard_loss`).
      event_ndim: static, axes of one example before the class axis.

    Returns:
      float32 ``[...]`` in ``[0, 1]``; 0 for an example without valid positions.

    >>> logits = 20.0 * jax.nn.one_hot(jnp.array([0, 0, 1, 1]), 2)
    >>> round(float(soft_dice_loss(logits, jnp.array([0, 1, 1, 1]))), 4)  # 1 - (2/3 + 4/5)/2
    0.2667

    Note:
      ``optax.losses.dice_loss`` has no mask and its ``smooth`` enters as ``2 s`` in this
      form; this function puts ``s`` once in numerator and denominator.

    References:
      Milletari, Navab & Ahmadi, V-Net, 3DV 2016 (squared form).
    """
    form = checks.static_choice("form", form, ("sorensen", "squared"))

    def fn(probs, onehot):
        inter, pred, target = _overlap_sums(probs, onehot)
        if form == "squared":
            pred, target = jnp.sum(probs * probs, axis=0), jnp.sum(onehot * onehot, axis=0)
        per_class = _ratio_loss(2.0 * inter, pred + target, smooth)
        return _class_mean(per_class, jnp.sum(onehot, axis=0) > 0, classes)

    return _lift_example(fn, logits, labels, mask, event_ndim, classes)


def tversky_loss(
    logits, labels, *, mask=None, alpha=0.5, beta=0.5, smooth=0.0, classes="present", event_ndim=1
) -> jax.Array:
    r"""Tversky loss, per example, averaged over classes.

    .. math:: 1 - \frac{I_c + s}{I_c + \alpha (P_c - I_c) + \beta (G_c - I_c) + s}

    ``alpha`` weighs false positives, ``beta`` false negatives; ``alpha = beta = 1/2`` is the
    Dice loss and ``alpha = beta = 1`` the Jaccard loss.

    Args:
      {common}
      alpha: float weight of false positives. Default 0.5.
      beta: float weight of false negatives. Default 0.5.
      smooth: float ``s`` added to numerator and denominator. Default 0.
      classes: ``"present"`` or ``"all"``.
      event_ndim: static, axes of one example before the class axis.

    Returns:
      float32 ``[...]`` in ``[0, 1]``; 0 for an example without valid positions.

    >>> logits = 20.0 * jax.nn.one_hot(jnp.array([0, 0, 1, 1]), 2)
    >>> round(float(tversky_loss(logits, jnp.array([0, 1, 1, 1]), alpha=1.0, beta=1.0)), 4)
    0.4167

    References:
      Salehi, Erdogmus & Gholipour, Tversky loss function for image segmentation using 3D
      fully convolutional deep networks, MLMI 2017.
    """

    def fn(probs, onehot):
        inter, pred, target = _overlap_sums(probs, onehot)
        denominator = inter + alpha * (pred - inter) + beta * (target - inter)
        per_class = _ratio_loss(inter, denominator, smooth)
        return _class_mean(per_class, target > 0, classes)

    return _lift_example(fn, logits, labels, mask, event_ndim, classes)


def generalized_dice_loss(logits, labels, *, mask=None, smooth=0.0, event_ndim=1) -> jax.Array:
    r"""Generalised Dice loss (Sudre et al.), per example.

    .. math::
        1 - \frac{2 \sum_c w_c I_c + s}{\sum_c w_c (P_c + G_c) + s},\quad w_c = 1 / G_c^2

    with ``w_c = 0`` for classes absent from the labels (their ``1/G_c^2`` is infinite).

    Args:
      {common}
      smooth: float ``s`` added to numerator and denominator. Default 0.
      event_ndim: static, axes of one example before the class axis.

    Returns:
      float32 ``[...]`` in ``[0, 1]``; 0 for an example without valid positions.

    >>> logits = 20.0 * jax.nn.one_hot(jnp.array([0, 0, 1, 1]), 2)
    >>> round(float(generalized_dice_loss(logits, jnp.array([0, 1, 1, 1]))), 4)
    0.3125

    Note:
      ``optax.losses.multiclass_generalized_dice_loss`` weighs per-class losses with
      frequencies pooled over the batch; this is Sudre's ratio of weighted sums, per example.

    References:
      Sudre et al., Generalised Dice overlap as a deep learning loss function for highly
      unbalanced segmentations, DLMIA 2017.
    """

    def fn(probs, onehot):
        inter, pred, target = _overlap_sums(probs, onehot)
        weights = safe_divide(1.0, target * target)
        numerator = 2.0 * jnp.sum(weights * inter)
        denominator = jnp.sum(weights * (pred + target))
        return 1.0 - safe_divide(numerator + smooth, denominator + smooth, fill=1.0)

    return _lift_example(fn, logits, labels, mask, event_ndim, "all")


_ONE_BITS = 0x3F800000  # float32 1.0: errors in [0, 1] have bit patterns in [0, 2**30)


def _decreasing_order(errors):
    """Stable argsort of ``errors`` (in [0, 1]) by decreasing value along the last axis.

    float32 errors are ranked by their bit patterns (order-preserving for non-negative
    floats) with integer sorts; other dtypes sort the negated errors.
    """
    if errors.dtype != jnp.float32:
        index = lax.broadcasted_iota(jnp.int32, errors.shape, errors.ndim - 1)
        return lax.sort((-errors, index), num_keys=1, is_stable=True)[1]
    bits = jnp.clip(lax.bitcast_convert_type(errors, jnp.int32), 0, _ONE_BITS)
    return stable_order((_ONE_BITS - bits).astype(jnp.uint32), key_bits=30)


def _lovasz_weights(errors, foreground):
    """Order and weights of the Lovász extension of the Jaccard loss of rows ``[R, F]``.

    ``order`` ranks the errors decreasingly (stable); ``weights[k]`` is the increment of the
    Jaccard loss when the ``k``-th of them joins the mispredicted set. Integer counts, exact.
    """
    order = _decreasing_order(errors)
    foreground = jnp.take_along_axis(foreground, order, axis=-1) > 0
    seen_foreground = cumulative_count(foreground)
    seen = lax.broadcasted_iota(jnp.int32, foreground.shape, foreground.ndim - 1) + 1
    total = seen_foreground[..., -1:]
    intersection = (total - seen_foreground).astype(errors.dtype)
    union = (total + seen - seen_foreground).astype(errors.dtype)
    jaccard = 1.0 - intersection / union  # union >= 1 everywhere
    weights = jnp.concatenate([jaccard[..., :1], jnp.diff(jaccard, axis=-1)], axis=-1)
    return order, weights


def _lovasz_rows(errors, foreground, present):
    """Lovász loss of every row ``[R, F]``; only the rows with foreground are ranked.

    Without foreground the Jaccard loss of every non-empty prefix is 1, so the loss is the
    largest error (taken at its first index, like the stable order). The rows with foreground
    are ranked in the smallest of ``R/4``, ``R/2`` or ``R`` rows that holds them (a
    ``lax.switch`` without gradient; under ``vmap`` every branch runs).
    """
    rows, frames = errors.shape
    if frames == 0:
        return jnp.zeros((rows,), errors.dtype)
    fixed = lax.stop_gradient(errors)

    def ranked(capacity):
        index = jnp.nonzero(present, size=capacity, fill_value=rows)[0]
        picked = (
            jnp.take(x, index, axis=0, mode="fill", fill_value=0) for x in (fixed, foreground)
        )
        order, weights = _lovasz_weights(*picked)
        full_order = jnp.zeros((rows, frames), jnp.int32).at[index].set(order, mode="drop")
        return full_order, jnp.zeros_like(fixed).at[index].set(weights, mode="drop")

    capacities = sorted({-(-rows // 4), -(-rows // 2), rows})
    count = jnp.sum(present, dtype=jnp.int32)
    branch = sum((count > c).astype(jnp.int32) for c in capacities[:-1])
    order, weights = lax.switch(branch, [lambda c=c: ranked(c) for c in capacities])
    ranked_loss = jnp.sum(jnp.take_along_axis(errors, order, axis=-1) * weights, axis=-1)
    first_max = jnp.argmax(fixed, axis=-1)[:, None]
    largest = jnp.take_along_axis(errors, first_max, axis=-1)[:, 0]
    return jnp.where(present, ranked_loss, largest)


def lovasz_softmax_loss(logits, labels, *, mask=None, classes="present", event_ndim=1) -> jax.Array:
    r"""Lovász-Softmax loss: the Lovász extension of 1 − IoU, per example, averaged over classes.

    For class ``c``, the errors ``e_i = |g_{ic} - p_{ic}|`` over valid positions, sorted in
    decreasing order, are weighted by the increments of the Jaccard loss
    :math:`\Delta_{J_c}` along that order:
    :math:`\mathrm{loss}_c = \sum_i e_{(i)} (\Delta_{J_c}(\{1..i\}) - \Delta_{J_c}(\{1..i-1\}))`.
    The weights are piecewise constant and carry no gradient.

    On one-hot probabilities it equals 1 − the IoU of each class.

    Args:
      {common}
      classes: ``"present"`` (mean over classes present in the labels) or ``"all"``.
      event_ndim: static, axes of one example before the class axis.

    Returns:
      float32 ``[...]`` in ``[0, 1]``; 0 for an example without valid positions.

    >>> logits = 20.0 * jax.nn.one_hot(jnp.array([0, 0, 1, 1]), 2)
    >>> round(float(lovasz_softmax_loss(logits, jnp.array([0, 1, 1, 1]))), 4)
    0.4167

    Note:
      No smoothing term (the reference has none). Masked positions enter with error 0 and no
      foreground, so they sort last and contribute nothing.

    References:
      Berman, Rannen Triki & Blaschko, The Lovász-Softmax loss, CVPR 2018
      (bermanmaxim/LovaszSoftmax).
    """

    def rows(probs, onehot):
        return jnp.abs(onehot - probs).T, onehot.T

    errors, foreground = _lift_example(rows, logits, labels, mask, event_ndim, classes)
    *batch, num_classes, frames = errors.shape
    present = jnp.any(foreground > 0, axis=-1)
    per_class = _lovasz_rows(
        errors.reshape(-1, frames), foreground.reshape(-1, frames), present.reshape(-1)
    )
    return _class_mean(per_class.reshape(*batch, num_classes), present, classes)


for _fn in (
    soft_jaccard_loss,
    soft_dice_loss,
    tversky_loss,
    generalized_dice_loss,
    lovasz_softmax_loss,
):
    _fn.__doc__ = _fn.__doc__.replace("{common}", _COMMON_ARGS)
