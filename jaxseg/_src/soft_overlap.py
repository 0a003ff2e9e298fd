"""Soft overlap losses: Jaccard, Dice, Tversky, generalised Dice and Lovász-Softmax.

Each is computed per example (a sequence ``[T, C]`` or, with ``event_ndim=2``, an image
``[H, W, C]``) from the per-class sums over valid positions of ``p = softmax(logits) * mask``
and ``g = one_hot(labels) * mask``: ``I_c = Σ p g``, ``P_c = Σ p``, ``G_c = Σ g``.
The gradients are finite for any finite logits: a class ratio whose denominator falls below
2^-40 (a class absent from the labels and all but ruled out by the prediction) keeps its value
but passes no gradient, instead of a NaN from 1/den² underflowing.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax import lax

from jaxseg._src import checks
from jaxseg._src.batching import lift, rows_at_once
from jaxseg._src.loss_utils import (
    labels_within_classes,
    logits_and_labels,
    nan_where_invalid,
    positive_parameter,
    probabilities,
)
from jaxseg._src.numerics import safe_divide
from jaxseg._src.programs import one_program
from jaxseg._src.ranking import cumulative_count, stable_order

_CLASSES = ("present", "all")


def _flat_example(logits, labels, mask, event_ndim):
    """Probabilities ``[F, C]`` and one-hot labels ``[F, C]`` of one example, both masked."""
    num_classes = logits.shape[-1]
    probs = probabilities(logits).reshape(-1, num_classes)
    valid = mask.reshape(-1, 1)
    onehot = jax.nn.one_hot(labels.reshape(-1), num_classes, dtype=probs.dtype)
    return jnp.where(valid, probs, 0.0), jnp.where(valid, onehot, 0.0)


def _lift_example(fn, logits, labels, mask, event_ndim, classes, ignore_index):
    """Validates the arguments and maps ``fn(probs [F, C], onehot [F, C])`` over examples."""
    event_ndim = checks.static_int("event_ndim", event_ndim, minimum=1)
    logits, labels, mask, invalid = logits_and_labels(
        logits, labels, mask, event_ndim=event_ndim, ignore_index=ignore_index
    )
    checks.static_choice("classes", classes, _CLASSES)

    def one(x, y, valid):
        return fn(*_flat_example(x, y, valid, event_ndim))

    loss = lift(one, (logits, labels, mask), (event_ndim + 1, event_ndim, event_ndim))
    return nan_where_invalid(loss, invalid)


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


# A class ratio whose denominator is below this (a class absent from the labels, predicted
# with a total probability that small) keeps its value but passes no gradient: its gradient
# through 1/den² underflows (0 · inf = NaN for a confident correct prediction) and, when the
# class is absent with s = 0, the true gradient is 0 anyway (the ratio is 0 for every P > 0).
_TINY_DENOMINATOR = 2.0**-40


def _ratio_loss(numerator, denominator, smooth):
    """``1 - (numerator + s) / (denominator + s)``; a 0/0 ratio (s = 0, empty class) counts 1."""
    numerator, denominator = numerator + smooth, denominator + smooth
    tiny = denominator < _TINY_DENOMINATOR
    ratio = safe_divide(numerator, jnp.where(tiny, 1.0, denominator))
    frozen = lax.stop_gradient(safe_divide(numerator, denominator, fill=1.0))
    return 1.0 - jnp.where(tiny, frozen, ratio)


@one_program(host_check=labels_within_classes())
def soft_jaccard_loss(
    logits, labels, *, mask=None, smooth=0.0, classes="present", event_ndim=1, ignore_index=None
) -> jax.Array:
    r"""Soft Jaccard (IoU) loss, per example, averaged over classes.

    .. math:: 1 - \frac{I_c + s}{P_c + G_c - I_c + s}

    On one-hot probabilities with ``smooth=0`` it equals 1 − the IoU of each class.

    Args:
      logits: float ``[..., T, C]`` (or ``[..., H, W, C]`` with ``event_ndim=2``)
        unnormalised scores; softmax over the last axis inside, in float32.
      labels: integer ``[..., T]`` (or ``[..., H, W]``) labels in ``[0, C)``.
      mask: optional bool, the shape of ``labels``, True = valid (default None: every
        position); masked positions are removed (their probabilities and labels are zeroed
        before any sum) and get zero gradient.
      smooth: float ``s`` added to numerator and denominator. Default 0 (the exact
        relaxation); with ``classes="all"`` use ``s > 0`` so that classes absent from both
        prediction and labels score 1 instead of 0.
      classes: static, ``"present"`` (default: mean over classes present in the labels) or
        ``"all"``.
      event_ndim: static, number of axes of one example before the class axis (default 1:
        ``[T]``; 2: ``[H, W]``).
      ignore_index: optional static int (default None): positions whose label equals it are
        removed like masked ones (PyTorch-style padding such as -100, or 255). Any other label
        outside ``[0, C)`` on a valid position raises ``ValueError`` when the labels are
        concrete; traced, it makes that example's loss NaN (with zero gradient).

    Returns:
      float32 ``[...]`` in ``[0, 1]``; 0 for an example without valid positions (``"present"``).
      A 0/0 class ratio (``s = 0``, class absent from both) scores 1 (loss 0). A class absent
      from the labels but given any probability scores 0 (loss 1) at ``s = 0``; a softmax
      gives every class some probability until it underflows, so with ``classes="all"``
      even near one-hot logits leave that loss (``s > 0`` removes it).

    >>> logits = 20.0 * jax.nn.one_hot(jnp.array([0, 0, 1, 1]), 2)
    >>> round(float(soft_jaccard_loss(logits, jnp.array([0, 1, 1, 1]))), 4)  # 1 - (1/2 + 2/3)/2
    0.4167

    References:
      Rahman & Wang, Optimizing intersection-over-union in deep neural networks for image
      segmentation, ISVC 2016.
    """
    positive_parameter("smooth", smooth, or_zero=True)

    def fn(probs, onehot):
        inter, pred, target = _overlap_sums(probs, onehot)
        per_class = _ratio_loss(inter, pred + target - inter, smooth)
        return _class_mean(per_class, target > 0, classes)

    return _lift_example(fn, logits, labels, mask, event_ndim, classes, ignore_index)


@one_program(host_check=labels_within_classes())
def soft_dice_loss(
    logits,
    labels,
    *,
    mask=None,
    smooth=0.0,
    form="sorensen",
    classes="present",
    event_ndim=1,
    ignore_index=None,
) -> jax.Array:
    r"""Soft Dice loss, per example, averaged over classes.

    .. math::
        1 - \frac{2 I_c + s}{P_c + G_c + s}\ (\text{"sorensen"}) \quad\text{or}\quad
        1 - \frac{2 I_c + s}{\sum p_c^2 + \sum g_c^2 + s}\ (\text{"squared"}, V-Net)

    On one-hot probabilities with ``smooth=0`` both equal 1 − the Dice coefficient.

    Args:
      logits, labels, mask, smooth, classes, event_ndim, ignore_index: as in
        :func:`soft_jaccard_loss`.
      form: static, ``"sorensen"`` (default) or ``"squared"``.

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
    positive_parameter("smooth", smooth, or_zero=True)
    form = checks.static_choice("form", form, ("sorensen", "squared"))

    def fn(probs, onehot):
        inter, pred, target = _overlap_sums(probs, onehot)
        if form == "squared":
            pred, target = jnp.sum(probs * probs, axis=0), jnp.sum(onehot * onehot, axis=0)
        per_class = _ratio_loss(2.0 * inter, pred + target, smooth)
        return _class_mean(per_class, jnp.sum(onehot, axis=0) > 0, classes)

    return _lift_example(fn, logits, labels, mask, event_ndim, classes, ignore_index)


@one_program(host_check=labels_within_classes())
def tversky_loss(
    logits,
    labels,
    *,
    mask=None,
    alpha=0.5,
    beta=0.5,
    smooth=0.0,
    classes="present",
    event_ndim=1,
    ignore_index=None,
) -> jax.Array:
    r"""Tversky loss, per example, averaged over classes.

    .. math:: 1 - \frac{I_c + s}{I_c + \alpha (P_c - I_c) + \beta (G_c - I_c) + s}

    ``alpha`` weighs false positives, ``beta`` false negatives; ``alpha = beta = 1/2`` is the
    Dice loss (``smooth=s`` here is ``smooth=2 s`` there) and ``alpha = beta = 1`` the Jaccard
    loss.

    Args:
      logits, labels, mask, smooth, classes, event_ndim, ignore_index: as in
        :func:`soft_jaccard_loss`.
      alpha: float weight of false positives, ≥ 0 (a concrete negative value raises
        ``ValueError``). Default 0.5.
      beta: float weight of false negatives, ≥ 0 likewise. Default 0.5.

    Returns:
      float32 ``[...]`` in ``[0, 1]``; 0 for an example without valid positions.

    >>> logits = 20.0 * jax.nn.one_hot(jnp.array([0, 0, 1, 1]), 2)
    >>> round(float(tversky_loss(logits, jnp.array([0, 1, 1, 1]), alpha=1.0, beta=1.0)), 4)
    0.4167

    References:
      Salehi, Erdogmus & Gholipour, Tversky loss function for image segmentation using 3D
      fully convolutional deep networks, MLMI 2017.
    """
    positive_parameter("smooth", smooth, or_zero=True)
    # A negative weight rewards errors: the loss leaves [0, 1] (alpha = -1 gave 2.4).
    positive_parameter("alpha", alpha, or_zero=True)
    positive_parameter("beta", beta, or_zero=True)

    def fn(probs, onehot):
        inter, pred, target = _overlap_sums(probs, onehot)
        denominator = inter + alpha * (pred - inter) + beta * (target - inter)
        per_class = _ratio_loss(inter, denominator, smooth)
        return _class_mean(per_class, target > 0, classes)

    return _lift_example(fn, logits, labels, mask, event_ndim, classes, ignore_index)


@one_program(host_check=labels_within_classes())
def generalized_dice_loss(
    logits, labels, *, mask=None, smooth=0.0, event_ndim=1, ignore_index=None
) -> jax.Array:
    r"""Generalised Dice loss (Sudre et al.), per example.

    .. math::
        1 - \frac{2 \sum_c w_c I_c + s}{\sum_c w_c (P_c + G_c) + s},\quad w_c = 1 / G_c^2

    with ``w_c = 0`` for classes absent from the labels (their ``1/G_c^2`` is infinite).

    Args:
      logits, labels, mask, smooth, event_ndim, ignore_index: as in :func:`soft_jaccard_loss`.

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
    positive_parameter("smooth", smooth, or_zero=True)

    def fn(probs, onehot):
        inter, pred, target = _overlap_sums(probs, onehot)
        weights = safe_divide(jnp.ones_like(target), target * target)  # in the sums' dtype
        numerator = 2.0 * jnp.sum(weights * inter)
        denominator = jnp.sum(weights * (pred + target))
        return 1.0 - safe_divide(numerator + smooth, denominator + smooth, fill=1.0)

    return _lift_example(fn, logits, labels, mask, event_ndim, "all", ignore_index)


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


def _order_bits(errors):
    """The bits of ``errors >= 0`` as integers: same order, compared exactly (subnormals too)."""
    return lax.bitcast_convert_type(errors, jnp.int64 if errors.dtype.itemsize == 8 else jnp.int32)


def _after_last_foreground(errors, foreground, axis=-1):
    """True where the stable decreasing order along ``axis`` ranks an error after all foreground.

    Everywhere in a row without foreground; never at a foreground position, even where XLA
    reads ``errors`` from copies that differ in the last bit (:func:`_lovasz_per_class`).
    """
    bits = _order_bits(errors)
    index = lax.broadcasted_iota(jnp.int32, errors.shape, axis % errors.ndim)
    lowest = jnp.min(jnp.where(foreground, bits, jnp.iinfo(bits.dtype).max), axis, keepdims=True)
    last = jnp.max(jnp.where(foreground & (bits == lowest), index, -1), axis, keepdims=True)
    return ~foreground & ((bits < lowest) | ((bits == lowest) & (index > last)))


def _lovasz_weights(errors, foreground, ranked, capacity):
    """Lovász weights of rows ``[R, F]`` with foreground, at the positions of the errors.

    Along the stable decreasing order of the errors, the ``k``-th weight is the increment of
    the Jaccard loss when the ``k``-th error joins the mispredicted set (integer counts,
    exact). Once every foreground error is in that set the Jaccard loss stays 1, so only the
    errors up to the last foreground one (``ranked``, at most ``capacity`` per row) have a
    nonzero weight: they are moved, in index order, into ``[R, capacity]`` and ranked there
    (ties stay in index order); one scatter puts each weight back at its error's position.
    """
    rows, frames = errors.shape
    index = lax.broadcasted_iota(jnp.int32, errors.shape, 1)
    if capacity < frames:
        row = lax.broadcasted_iota(jnp.int32, errors.shape, 0)
        slot = jnp.where(ranked, cumulative_count(ranked) - 1, capacity)  # capacity: dropped
        index = jnp.full((rows, capacity), frames).at[row, slot].set(index, mode="drop")
        # the padding (index F) has error 0, ranks last and has no foreground
        errors = jnp.take_along_axis(errors, index, axis=-1, mode="fill", fill_value=0)
    else:  # error 0 ranks the others last, in index order (ranked errors equal to 0 come first)
        errors = jnp.where(ranked, errors, 0.0)
    order = _decreasing_order(errors)
    index = jnp.take_along_axis(index, order, axis=-1)
    foreground = jnp.take_along_axis(foreground, index, axis=-1, mode="fill", fill_value=False)
    seen_foreground = cumulative_count(foreground)
    seen = lax.broadcasted_iota(jnp.int32, foreground.shape, 1) + 1
    total = seen_foreground[..., -1:]
    intersection = (total - seen_foreground).astype(errors.dtype)
    union = (total + seen - seen_foreground).astype(errors.dtype)
    jaccard = 1.0 - intersection / union  # union >= 1 everywhere
    weights = jnp.concatenate([jaccard[..., :1], jnp.diff(jaccard, axis=-1)], axis=-1)
    row = lax.broadcasted_iota(jnp.int32, index.shape, 0)
    return jnp.zeros((rows, frames), errors.dtype).at[row, index].set(weights, mode="drop")


def _first_largest(errors, axis):
    """One-hot of the first largest error along ``axis``."""
    bits = _order_bits(errors)
    index = lax.broadcasted_iota(jnp.int32, errors.shape, axis)
    largest = jnp.max(bits, axis=axis, keepdims=True)
    first = jnp.min(jnp.where(bits == largest, index, errors.shape[axis]), axis, keepdims=True)
    return index == first


_BLOCK_SIZE = 2**16  # entries per loop step (32 rows of 2000 frames)


def _ranked_weights(errors, foreground, ranked):
    """Lovász weights ``[R, F]`` of rows whose ``ranked`` errors are those up to the last fg.

    A row without foreground has no ranked error and weights 0. The rows are ranked in
    blocks, in a loop that stops after the last row with foreground; a block ranks its errors
    in the smallest of ``F/8``, ``F/4``, ``F/2`` (if at least 128) or ``F`` columns that
    holds them (``lax.switch``). The rows are taken by increasing count, so that a block
    holds rows of similar counts.
    """
    rows, frames = errors.shape
    block = max(1, min(rows, _BLOCK_SIZE // frames))
    num_blocks = -(-rows // block)
    size = jnp.sum(ranked, axis=-1, dtype=jnp.int32)
    picked = jnp.argsort(jnp.where(size > 0, size, frames + 1), stable=True).astype(jnp.int32)
    picked = jnp.pad(picked, (0, num_blocks * block - rows), constant_values=rows)
    capacities = sorted({c for c in (-(-frames // d) for d in (8, 4, 2)) if c >= 128} | {frames})
    branches = [functools.partial(_lovasz_weights, capacity=c) for c in capacities]

    def rank_block(i, weights):
        index = lax.dynamic_slice_in_dim(picked, i * block, block)
        block_rows = tuple(
            jnp.take(x, index, axis=0, mode="fill", fill_value=0)
            for x in (errors, foreground, ranked)
        )
        # Counted from the block's own rows, which the branch moves into its columns: ``size``
        # may come from another copy of ``ranked`` (_lovasz_per_class), and a branch too
        # narrow for the block would drop its last error.
        count = jnp.max(jnp.sum(block_rows[2], axis=-1, dtype=jnp.int32))
        branch = sum((count > c).astype(jnp.int32) for c in capacities[:-1])
        return weights.at[index].set(lax.switch(branch, branches, *block_rows), mode="drop")

    count = jnp.sum(size > 0, dtype=jnp.int32)
    return lax.fori_loop(0, -(-count // block), rank_block, jnp.zeros_like(errors))


def _lovasz_per_class(errors, foreground, present):
    """Lovász loss ``[N, C]`` of every class from errors and bool foreground ``[N, F, C]``.

    ``Σ_f errors * weights`` with the Lovász weights at the errors' positions and without
    gradient, so the backward pass is the weights themselves (no gather, no scatter). The
    errors are moved to ``[N * C, F]`` rows to be ranked, without gradient. Without foreground
    the Jaccard loss of every non-empty prefix is 1: the weight is 1 at the first largest
    error (where the stable order puts it) and 0 elsewhere.
    """
    n, frames, num_classes = errors.shape
    if errors.size == 0:
        return jnp.zeros((n, num_classes), errors.dtype)
    # XLA may recompute an elementwise value in each fusion that reads it, and the copies can
    # differ in the last bit (XLA:GPU's; XLA:CPU's at LLVM optimisation level 0). The barrier
    # asks for one stored copy for the decisions below, but XLA:CPU drops it and recomputes
    # the softmax's division in each reader. So every foreground error is ranked whatever copy
    # a decision reads (_after_last_foreground); copies that disagree can still rank errors
    # within a few ulps of each other differently.
    fixed = lax.optimization_barrier(lax.stop_gradient(errors))
    ranked = ~_after_last_foreground(fixed, foreground, axis=1)

    def rows(x):
        return jnp.swapaxes(x, 1, 2).reshape(n * num_classes, frames)

    # Under jax.vmap the rows of all examples are ranked together: one loop, one branch a block.
    weights = rows_at_once(_ranked_weights)(rows(fixed), rows(foreground), rows(ranked))
    weights = jnp.swapaxes(weights.reshape(n, num_classes, frames), 1, 2)
    largest = _first_largest(fixed, axis=1).astype(errors.dtype)
    weights = jnp.where(present[:, None, :], weights, largest)
    return jnp.sum(errors * lax.stop_gradient(weights), axis=1)


@one_program(host_check=labels_within_classes())
def lovasz_softmax_loss(
    logits, labels, *, mask=None, classes="present", event_ndim=1, ignore_index=None
) -> jax.Array:
    r"""Lovász-Softmax loss: the Lovász extension of 1 − IoU, per example, averaged over classes.

    For class ``c``, the errors ``e_i = |g_{ic} - p_{ic}|`` over valid positions, sorted in
    decreasing order, are weighted by the increments of the Jaccard loss
    :math:`\Delta_{J_c}` along that order:
    :math:`\mathrm{loss}_c = \sum_i e_{(i)} (\Delta_{J_c}(\{1..i\}) - \Delta_{J_c}(\{1..i-1\}))`.
    The weights are piecewise constant and carry no gradient.

    On one-hot probabilities it equals 1 − the IoU of each class.

    Args:
      logits, labels, mask, classes, event_ndim, ignore_index: as in :func:`soft_jaccard_loss`.

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

    event_ndim = checks.static_int("event_ndim", event_ndim, minimum=1)
    logits, labels, mask, invalid = logits_and_labels(
        logits, labels, mask, event_ndim=event_ndim, ignore_index=ignore_index
    )
    checks.static_choice("classes", classes, _CLASSES)
    batch = labels.shape[: labels.ndim - event_ndim]
    num_classes = logits.shape[-1]
    n, frames = math.prod(batch), math.prod(labels.shape[labels.ndim - event_ndim :])
    probs = probabilities(logits).reshape(n, frames, num_classes)
    valid = mask.reshape(n, frames, 1)
    foreground = jax.nn.one_hot(labels.reshape(n, frames), num_classes, dtype=jnp.bool_) & valid
    errors = jnp.where(valid, jnp.abs(foreground.astype(probs.dtype) - probs), 0.0)
    present = jnp.any(foreground, axis=1)
    per_class = _lovasz_per_class(errors, foreground, present)
    return nan_where_invalid(_class_mean(per_class, present, classes).reshape(batch), invalid)
