"""Dense (pixel / voxel) segmentation metrics from a confusion matrix: accuracy, IoU, Dice.

One confusion matrix per map (the trailing ``spatial_ndim`` axes), counted exactly with one
scatter-add; dataset-level (mmsegmentation-style pooled) values come from
``jaxseg.streaming.dense``, which sums these matrices.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from jaxseg._src import checks, frame
from jaxseg._src.numerics import safe_divide
from jaxseg._src.programs import one_program
from jaxseg._src.ranking import ClassScores, nanmean_classes


def _prepare(targets, predictions, mask, num_classes, ignore_index, spatial_ndim):
    num_classes = checks.static_int("num_classes", num_classes, minimum=1)
    spatial_ndim = checks.static_int("spatial_ndim", spatial_ndim, minimum=1)
    ignore_index = checks.static_ignore_index(ignore_index)
    targets = checks.as_int_labels("targets", targets, min_ndim=spatial_ndim)
    predictions = checks.as_int_labels("predictions", predictions, min_ndim=spatial_ndim)
    checks.same_shape("targets", targets, "predictions", predictions)
    mask = checks.as_mask(mask, targets.shape)
    return targets, predictions, mask, num_classes, ignore_index, spatial_ndim


def confusion_matrices(targets, predictions, valid, num_classes: int, spatial_ndim: int):
    """``int32[..., C + 1, C + 1]`` (rows = target, columns = prediction) of each map.

    Row / column ``C`` counts the valid pixels whose target / prediction lies outside
    [0, C) (compared in the labels' own dtype, so no label wraps onto a class). Pixels that
    are not ``valid`` are not counted.
    """
    batch = targets.shape[: targets.ndim - spatial_ndim]
    # Sizes, not -1: a batch of no maps cannot infer the pixels of each.
    maps, pixels = math.prod(batch), math.prod(targets.shape[targets.ndim - spatial_ndim :])
    size = num_classes + 1

    def index_of(labels):
        labels = labels.reshape(maps, pixels)
        known = checks.in_label_range(labels, num_classes)
        # int32 before the where: C in the labels' dtype would wrap (int8 200 reads -56 and
        # sent a pixel labelled -1 into another class's cell)
        return jnp.where(known, labels.astype(jnp.int32), num_classes)

    t, p = index_of(targets), index_of(predictions)
    v = valid.reshape(maps, pixels)
    cells = size * size
    offset = jnp.arange(maps, dtype=jnp.int32)[:, None] * cells
    index = jnp.where(v, offset + t * size + p, maps * cells)
    counts = jnp.zeros(maps * cells + 1, jnp.int32).at[index.reshape(-1)].add(1)
    return counts[:-1].reshape(*batch, size, size)


def _map_scores(targets, predictions, mask, num_classes, ignore_index, spatial_ndim):
    """Accuracy ``[...]``, IoU and Dice ``[..., C]`` of each map from the public arguments."""
    targets, predictions, mask, num_classes, ignore_index, spatial_ndim = _prepare(
        targets, predictions, mask, num_classes, ignore_index, spatial_ndim
    )
    valid = jnp.ones(targets.shape, bool) if mask is None else mask
    # Compared in the labels' dtype only where it holds the value: ``!=`` would wrap 255 onto
    # an int8 label -1, or 511 onto a uint8 label 255, and drop those pixels.
    valid = checks.without_ignored(targets, valid, ignore_index)
    matrix = confusion_matrices(targets, predictions, valid, num_classes, spatial_ndim)
    return map_scores_from_confusion(matrix.astype(jnp.float32))


def map_scores_from_confusion(matrix):
    """``(pixel_accuracy, iou, dice)`` from float32 ``[..., C + 1, C + 1]`` counts.

    As mmsegmentation's ``intersect_and_union``: a prediction outside [0, C) is dropped but
    its target pixel stays (a miss: in the accuracy's denominator and the class's FN); a
    target outside [0, C) (other than ``ignore_index``) is dropped but its prediction stays
    (an FP of the predicted class; not in the accuracy). NaN where 0/0.
    """
    num_classes = matrix.shape[-1] - 1
    tp = jnp.diagonal(matrix, axis1=-2, axis2=-1)[..., :num_classes]
    labelled = jnp.sum(matrix[..., :num_classes, :], axis=(-2, -1))
    accuracy = safe_divide(jnp.sum(tp, axis=-1), labelled, jnp.nan)
    iou = frame.scores_from_confusion(matrix, "iou", "none")[..., :num_classes]
    dice = frame.scores_from_confusion(matrix, "f1", "none")[..., :num_classes]  # Dice = F1
    return accuracy, iou, dice


@one_program
def pixel_accuracy(
    targets: jax.typing.ArrayLike,
    predictions: jax.typing.ArrayLike,
    *,
    num_classes: int,
    mask: jax.typing.ArrayLike | None = None,
    ignore_index: int | None = None,
    spatial_ndim: int = 2,
) -> jax.Array:
    r"""Fraction of valid pixels predicted correctly (mmsegmentation's aAcc), per map.

    :math:`aAcc = \sum_c TP_c / \#\{\text{valid pixels whose target lies in } [0, C)\}`.

    Args:
      targets: integer ``[..., *S]`` class ids in [0, C) (or ``ignore_index``); ``S`` is the
        last ``spatial_ndim`` axes (one map: an image ``[H, W]``, a volume or a video). A
        pixel whose target lies outside [0, C) is not a pixel of any class, but its
        prediction still counts as a false positive (mmsegmentation).
      predictions: integer ``[..., *S]`` class ids; one outside [0, C) is dropped and its
        pixel counts as a miss (mmsegmentation).
      num_classes: static number of classes C.
      mask: optional ``bool[..., *S]``, True = valid pixel (default None: every pixel).
      ignore_index: static int or None (default): target value whose pixels are removed
        (e.g. 255 or -1; a value the labels' dtype cannot hold removes none).
      spatial_ndim: static number of trailing axes forming one map (default 2).

    Returns:
      ``float32[...]`` in [0, 1]; NaN when no pixel is valid.

    >>> pixel_accuracy(jnp.array([[0, 1], [1, 255]]), jnp.array([[0, 1], [0, 0]]),
    ...                num_classes=2, ignore_index=255).tolist()
    0.6666666865348816

    Note: as mmsegmentation's ``IoUMetric``, a prediction outside [0, C) counts as a miss
    and a target outside [0, C) (other than ``ignore_index``) leaves the denominator.

    References:
      mmsegmentation ``IoUMetric`` (``aAcc``).
    """
    return _map_scores(targets, predictions, mask, num_classes, ignore_index, spatial_ndim)[0]


@one_program
def iou(
    targets: jax.typing.ArrayLike,
    predictions: jax.typing.ArrayLike,
    *,
    num_classes: int,
    mask: jax.typing.ArrayLike | None = None,
    ignore_index: int | None = None,
    spatial_ndim: int = 2,
) -> ClassScores:
    r"""Per-class intersection over union (Jaccard) and its mean, per map.

    :math:`IoU_c = TP_c / (TP_c + FP_c + FN_c)` from the map's confusion matrix. A class absent
    from both target and prediction is NaN and left out of the mean; one present in only one
    of them scores 0.

    Args:
      targets, predictions, num_classes, mask, ignore_index, spatial_ndim: as in
        :func:`pixel_accuracy`.

    Returns:
      :class:`ClassScores`: ``per_class`` ``float32[..., C]`` and ``mean`` ``float32[...]``
      (NaN if every class is absent).

    >>> result = iou(jnp.array([[0, 0], [1, 1]]), jnp.array([[0, 1], [1, 1]]), num_classes=3)
    >>> result.per_class.tolist(), float(result.mean)
    ([0.5, 0.6666666865348816, nan], 0.5833333730697632)

    References:
      mmsegmentation ``IoUMetric`` (dataset-level pooling is ``jaxseg.streaming.dense``).
    """
    scores = _map_scores(targets, predictions, mask, num_classes, ignore_index, spatial_ndim)
    return nanmean_classes(scores[1])


@one_program
def dice(
    targets: jax.typing.ArrayLike,
    predictions: jax.typing.ArrayLike,
    *,
    num_classes: int,
    mask: jax.typing.ArrayLike | None = None,
    ignore_index: int | None = None,
    spatial_ndim: int = 2,
) -> ClassScores:
    r"""Per-class Dice (F1) and its mean, per map.

    :math:`Dice_c = 2 TP_c / (2 TP_c + FP_c + FN_c)`; absent classes as in :func:`iou`.

    Args:
      targets, predictions, num_classes, mask, ignore_index, spatial_ndim: as in
        :func:`pixel_accuracy`.

    Returns:
      :class:`ClassScores`: ``per_class`` ``float32[..., C]`` and ``mean`` ``float32[...]``.

    >>> result = dice(jnp.array([[0, 0], [1, 1]]), jnp.array([[0, 1], [1, 1]]), num_classes=2)
    >>> result.per_class.tolist()
    [0.6666666865348816, 0.800000011920929]

    References:
      mmsegmentation ``IoUMetric`` (``mDice``).
    """
    scores = _map_scores(targets, predictions, mask, num_classes, ignore_index, spatial_ndim)
    return nanmean_classes(scores[2])
