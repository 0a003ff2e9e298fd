"""Frame-transition losses (smoothing, segment starts, CTC transcript) and 1-D interval losses."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from jaxseg._src import checks, ctc
from jaxseg._src.batching import lift
from jaxseg._src.capacity import run_count_bound, sequence_loss
from jaxseg._src.loss_utils import (
    compact_frames,
    compute_dtype,
    labels_within_classes,
    logits_and_labels,
    nan_where_invalid,
    positive_parameter,
    probabilities,
    zero_where_masked,
)
from jaxseg._src.numerics import safe_divide
from jaxseg._src.programs import one_program
from jaxseg._src.segments import count_of, segments_of
from jaxseg._src.soft_edit import segment_starts


@one_program
def smoothing_loss(
    logits, labels=None, *, mask=None, threshold=4.0, ignore_index=None
) -> jax.Array:
    r"""MS-TCN's truncated mean squared error between adjacent frames' log-probabilities.

    .. math::
        \frac{1}{(n-1) C} \sum_{t=1}^{n-1} \sum_c
        \min\big((\log p_t(c) - \mathrm{sg}[\log p_{t-1}(c)])^2, \tau^2\big)

    over the ``n`` valid frames (masked frames removed first, so the frames on both sides of
    a masked gap are adjacent); ``sg`` stops the gradient, as in MS-TCN.

    Args:
      logits: float ``[..., T, C]`` unnormalised scores. A logit of ``-inf`` rules its class
        out at that frame (probability 0): a pair of frames adds 0 for a class ruled out on
        both and ``τ²`` (no gradient) for one ruled out on one only, where the formula would
        give NaN. A valid frame needs a finite logit.
      labels: integer ``[..., T]`` or ``None``; used only to find ``ignore_index`` frames.
      mask: optional bool ``[..., T]``, True = valid frame.
      ignore_index: optional static int: frames whose label equals it are removed like masked
        ones (MS-TCN pads its labels with -100); needs ``labels``.
      threshold: float ``τ``; squared differences are truncated at ``τ²``. Default 4.

    Returns:
      float32 ``[...]`` in ``[0, τ²]``; 0 for a sequence with fewer than two valid frames.

    >>> logits = jnp.log(jnp.array([[0.5, 0.5], [0.5, 0.5], [0.9, 0.1]]))
    >>> round(float(smoothing_loss(logits)), 4)  # ((log 1.8)^2 + (log 0.2)^2) / (2 * 2)
    0.7339

    Note:
      MS-TCN averages over the whole padded batch; this is one value per sequence.

    References:
      Abu Farha & Gall, MS-TCN, CVPR 2019 (the T-MSE term, weight 0.15 there).
    """
    logits = checks.as_float("logits", logits, min_ndim=2)
    positive_parameter("threshold", threshold)
    mask = checks.as_mask(mask, logits.shape[:-1])
    ignore_index = checks.static_ignore_index(ignore_index)
    if labels is not None:
        labels = checks.as_int_labels("labels", labels)
        checks.same_shape("labels", labels, "logits.shape[:-1]", logits[..., 0])
        mask = checks.without_ignored(labels, mask, ignore_index)
    elif ignore_index is not None:
        raise ValueError("smoothing_loss: ignore_index needs labels (got labels=None).")
    mask = jnp.ones(logits.shape[:-1], jnp.bool_) if mask is None else mask
    logits = zero_where_masked(logits, mask)

    return lift(functools.partial(_smoothing_one, threshold=threshold), (logits, mask), (2, 1))


def _smoothing_one(x, valid, *, threshold):
    """:func:`smoothing_loss` of one sequence ``x [T, C]`` with valid frames ``valid [T]``."""
    dtype = compute_dtype(x)
    log_probs, n = compact_frames(jax.nn.log_softmax(x.astype(dtype), axis=-1), valid)
    # A class whose logit is -inf (ruled out, as masking classes by -inf logits does) has
    # log-probability -inf, and -inf - (-inf) is NaN. Its probability stays 0 where it is
    # ruled out on both frames (no change: 0), and changes infinitely in log where on one
    # only (truncated: τ², with no gradient, as any truncated pair); the gradient never
    # reads the infinity (the double ``where``).
    impossible = jnp.isneginf(log_probs)
    log_probs = jnp.where(impossible, 0.0, log_probs)
    difference = log_probs[1:] - jax.lax.stop_gradient(log_probs[:-1])
    squared = jnp.minimum(difference * difference, threshold * threshold)
    both, one_side = impossible[1:] & impossible[:-1], impossible[1:] ^ impossible[:-1]
    squared = jnp.where(one_side, threshold * threshold, jnp.where(both, 0.0, squared))
    pair_valid = (jnp.arange(1, x.shape[0], dtype=jnp.int32) < n)[:, None]
    total = jnp.sum(jnp.where(pair_valid, squared, 0.0))
    return safe_divide(total, (jnp.maximum(n - 1, 0) * x.shape[-1]).astype(dtype))


@one_program(host_check=labels_within_classes())
def segment_start_penalty(
    logits, labels, *, mask=None, background=(), normalize="target", ignore_index=None
) -> jax.Array:
    r"""Soft number of predicted segment starts (a total-variation penalty).

    .. math::
        \sum_t \sum_{c \notin \mathrm{bg}} \max(p_t(c) - p_{t-1}(c), 0), \quad p_{-1} = 0,

    over valid frames; on one-hot probabilities it is the number of predicted (non-background)
    segments. ``normalize="target"`` divides by the number of label segments (at least 1).

    Args:
      logits: float ``[..., T, C]`` unnormalised scores.
      labels: integer ``[..., T]`` frame labels (used for the normalisation only).
      mask: optional bool ``[..., T]``, True = valid frame.
      background: static tuple of labels that form no segment.
      normalize: ``"target"`` or ``"none"``.
      ignore_index: optional static int: frames whose label equals it are removed like
        masked ones (PyTorch-style padding such as -100). Any other label outside ``[0, C)``
        on a valid frame raises ``ValueError`` when the labels are concrete; traced, it makes
        that sequence's loss NaN (with zero gradient).

    Returns:
      float32 ``[...]``, ≥ 0; 0 for a sequence without valid frames; NaN where a valid label
      lies outside ``[0, C)``.

    >>> logits = 20.0 * jax.nn.one_hot(jnp.array([1, 1, 2, 1, 0]), 3)
    >>> round(float(segment_start_penalty(logits, jnp.array([1, 1, 1, 1, 0]),
    ...                                   background=(0,))), 3)
    3.0
    """
    logits, labels, mask, invalid = logits_and_labels(
        logits, labels, mask, ignore_index=ignore_index
    )
    background = checks.static_labels("background", background)
    normalize = checks.static_choice("normalize", normalize, ("target", "none"))

    def one(x, y, valid):
        probs, n = compact_frames(probabilities(x), valid)
        starts = jnp.sum(segment_starts(probs, n, background))
        if normalize == "none":
            return starts
        y, _ = compact_frames(y, valid)
        count = count_of(y, n, background=background)
        return starts / jnp.maximum(count, 1).astype(starts.dtype)

    return nan_where_invalid(lift(one, (logits, labels, mask), (2, 1, 1)), invalid)


@one_program(host_check=labels_within_classes())
def ctc_transcript_loss(
    logits,
    labels,
    *,
    mask=None,
    background=(),
    normalize="target",
    max_segments=None,
    ignore_index=None,
) -> jax.Array:
    r"""CTC loss of the frame-wise prediction against the labels' transcript.

    The transcript is the sequence of segment labels of ``labels`` (background removed); its
    probability sums over all frame labellings whose segments, after removing the blank, give
    it: :math:`-\log P(\mathrm{RLE}(z) = y)`. The blank is the background class when
    ``background`` holds one label, so that two segments of the same label with background
    between them stay two, exactly as the segmentation metrics count them; with no background
    it is a phantom class of probability 0 (adjacent segments never share a label then). The
    α recursion of Graves et al. runs over the frames in log space, gathering each frame's
    emission log-probabilities as it goes (no ``[T, N]`` array; ``O(T^1.5)`` memory at any
    capacity).

    Args:
      logits: float ``[..., T, C]`` unnormalised scores.
      labels: integer ``[..., T]`` frame labels.
      mask: optional bool ``[..., T]``, True = valid frame.
      background: static tuple with at most one label (the blank), in ``[0, C)``.
      normalize: ``"target"`` (divide by the number of segments, at least 1) or ``"none"``.
      max_segments: static transcript capacity, a memory bound (``None``: chosen per call
        among a few static sizes by the batch's longest transcript; never truncates).
      ignore_index: optional static int: frames whose label equals it are removed like
        masked ones (PyTorch-style padding such as -100). Any other label outside ``[0, C)``
        on a valid frame raises ``ValueError`` when the labels are concrete; traced, it makes
        that sequence's loss NaN (with zero gradient).

    Returns:
      float32 ``[...]``, ≥ 0 and finite (the labels themselves are a labelling of the
      transcript), with a finite gradient; about ``1e30 / M`` (``M`` segments,
      ``normalize="target"``) where ``-inf`` logits rule out every labelling of the
      transcript; NaN where the transcript overflows ``max_segments`` or a valid label lies
      outside ``[0, C)``.

    >>> logits = 3.0 * jax.nn.one_hot(jnp.array([1, 1, 0, 2]), 3)
    >>> labels = jnp.array([1, 0, 2, 2])  # transcript [1, 2]: -log P / 2
    >>> round(float(ctc_transcript_loss(logits, labels, background=(0,))), 4)
    0.0927

    References:
      Graves et al., Connectionist temporal classification, ICML 2006; Huang, Fei-Fei &
      Niebles, ECTC, ECCV 2016.
    """
    logits, labels, mask, invalid = logits_and_labels(
        logits, labels, mask, ignore_index=ignore_index
    )
    background = checks.static_labels("background", background)
    if len(background) > 1:
        raise ValueError(
            f"background must hold at most one label (the CTC blank), got {background}."
        )
    if background and not 0 <= background[0] < logits.shape[-1]:  # the blank is a column
        raise ValueError(
            f"background holds the CTC blank, a class of logits' last axis [0, "
            f"{logits.shape[-1]}), got {background}."
        )
    normalize = checks.static_choice("normalize", normalize, ("target", "none"))
    capacity = checks.static_int("max_segments", max_segments, minimum=1, allow_none=True)

    loss = _ctc_program(
        logits, labels, mask, capacity=capacity, background=background, normalize=normalize
    )
    return nan_where_invalid(loss, invalid)


# Validated arguments run as one compiled program per shape and static arguments, so that
# a call under ``jax.grad`` or ``jax.vmap`` outside ``jax.jit`` (where ``one_program`` runs the
# loss as it is) does not dispatch the lattice's operations one by one.
@functools.partial(jax.jit, static_argnames=("capacity", "background", "normalize"))
def _ctc_program(logits, labels, mask, *, capacity, background, normalize):
    """:func:`ctc_transcript_loss` ``[...]`` of validated logits ``[..., T, C]`` and labels."""
    batch_shape, T = labels.shape[:-1], labels.shape[-1]
    logits = jnp.reshape(logits, (-1, *logits.shape[-2:]))
    labels, mask = jnp.reshape(labels, (-1, T)), jnp.reshape(mask, (-1, T))
    bound = run_count_bound(labels, mask, background)
    # Once for every capacity: the rungs differentiate with respect to the compacted
    # log-probabilities (the gradient flows back through the compaction and the softmax) and
    # read the first labels of the whole transcript.
    log_probs, transcripts, valid = jax.vmap(
        functools.partial(_valid_first, background=background)
    )(logits, labels, mask)
    blank = background[0] if background else logits.shape[-1]
    one = functools.partial(_ctc_one, normalize=normalize, blank=blank)

    def lattice_bytes(c):
        return ctc.scratch_bytes(T, c, log_probs.shape[-1])

    rows, others = (log_probs,), (transcripts, valid)
    loss = sequence_loss(
        one, capacity, rows, others, count_bound=bound, bytes_per_sequence=lattice_bytes
    )
    return jnp.reshape(loss, batch_shape)


def _valid_first(x, y, mask, *, background):
    """Of one sequence: log-probabilities ``[T, C']`` with its valid frames first (and a
    phantom blank column of probability 0 when ``background`` is empty: no adjacent segments
    share a label without one), its transcript ``[T]`` (-1 past its length) and a prefix
    mask of its valid frames."""
    log_probs = jax.nn.log_softmax(x.astype(compute_dtype(x)))
    if not background:
        impossible = jnp.full((*log_probs.shape[:-1], 1), ctc.LOG_ZERO, log_probs.dtype)
        log_probs = jnp.concatenate([log_probs, impossible], axis=-1)
    log_probs, n = compact_frames(log_probs, mask)
    y, _ = compact_frames(y, mask)
    transcript = segments_of(y, n, background=background, capacity=y.shape[0]).labels
    return log_probs, transcript, jnp.arange(y.shape[0], dtype=jnp.int32) < n


def _ctc_one(capacity, log_probs, transcript, valid, *, normalize, blank):
    """CTC loss of one compacted sequence against its transcript, NaN if the transcript has
    more than ``capacity`` labels."""
    count = jnp.sum(transcript >= 0, dtype=jnp.int32)
    m = jnp.minimum(count, capacity)
    symbols = jnp.maximum(transcript[:capacity], 0)
    n = jnp.sum(valid, dtype=jnp.int32)
    loss = 0.0 - ctc.ctc_log_likelihood(log_probs, n, symbols, m, blank)  # -log 1 is +0.0
    if normalize == "target":
        loss = loss / jnp.maximum(m, 1).astype(loss.dtype)
    loss = jnp.where(jnp.any(valid), loss, 0.0)  # no frame: 0.0, not -log(1) = -0.0
    return jnp.where(count > capacity, jnp.nan, loss)


# ----------------------------------------------------------------------------- 1-D intervals


def _intervals(targets, predictions, mask):
    targets = checks.as_float("targets", targets, min_ndim=1)
    predictions = checks.as_float("predictions", predictions, min_ndim=1)
    if targets.shape[-1:] != (2,):
        raise ValueError(f"targets must have shape [..., 2] (start, end), got {targets.shape}.")
    checks.same_shape("targets", targets, "predictions", predictions)
    mask = checks.as_mask(mask, targets.shape[:-1])
    return zero_where_masked(targets, mask), zero_where_masked(predictions, mask), mask


def _interval_terms(targets, predictions):
    """IoU, the hull length and the union length of two ``[..., 2]`` interval arrays."""
    ts, te = targets[..., 0], targets[..., 1]
    ps, pe = predictions[..., 0], predictions[..., 1]
    overlap = jnp.minimum(pe, te) - jnp.maximum(ps, ts)
    # Clamped at 0 with the gradient passing at 0 itself (as PyTorch's clamp(min=0) in
    # ActionFormer's losses): a prediction shrunk to a point inside its target, or touching
    # it, is pushed to grow into it; relu's zero gradient there would leave it stuck.
    inter = jnp.where(overlap >= 0, overlap, 0.0)
    union = (pe - ps) + (te - ts) - inter
    hull = jnp.maximum(pe, te) - jnp.minimum(ps, ts)
    return safe_divide(inter, union), hull, union


def _masked(loss, mask):
    return loss if mask is None else jnp.where(mask, loss, 0.0)


@one_program
def temporal_iou_loss(targets, predictions, *, mask=None) -> jax.Array:
    r"""1 − the temporal IoU of two intervals.

    .. math:: 1 - \frac{|A \cap B|}{|A \cup B|}

    Its gradient is zero for disjoint intervals (use the GIoU or DIoU loss there); a
    prediction of length 0 inside its target, or touching it, has the gradient that grows it
    into the target.

    Args:
      targets: float ``[..., 2]`` target intervals ``(start, end)``.
      predictions: float ``[..., 2]`` predicted intervals, the same shape.
      mask: optional bool ``[...]``, True = a valid pair; invalid pairs give 0 (and no
        gradient).

    Returns:
      float32 ``[...]`` in ``[0, 1]``; 1 when the union is empty (two zero-length intervals).

    >>> round(float(temporal_iou_loss(jnp.array([0.0, 4.0]), jnp.array([2.0, 6.0]))), 4)
    0.6667

    Note:
      This loss and the GIoU and DIoU losses are symmetric in their two intervals, so calls
      in jaxseg 0.1's order ``(predictions, targets)`` give the same values and gradients.
    """
    targets, predictions, mask = _intervals(targets, predictions, mask)
    iou, _, _ = _interval_terms(targets, predictions)
    return _masked(1.0 - iou, mask)


@one_program
def temporal_giou_loss(targets, predictions, *, mask=None) -> jax.Array:
    r"""1 − the generalised temporal IoU of two intervals.

    .. math:: 1 - \mathrm{IoU} + \frac{|H| - |A \cup B|}{|H|},\quad H = \text{hull}(A, B)

    Args:
      targets: float ``[..., 2]`` target intervals ``(start, end)``.
      predictions: float ``[..., 2]`` predicted intervals; one disjoint from its target still
        has a gradient, through the hull term.
      mask: optional bool ``[...]``, True = a valid pair (0 and no gradient elsewhere).

    Returns:
      float32 ``[...]`` in ``[0, 2]``; the hull term is 0 when the hull is empty.

    >>> float(temporal_giou_loss(jnp.array([0.0, 1.0]), jnp.array([3.0, 4.0])))  # 1 + 2/4
    1.5

    References:
      Rezatofighi et al., Generalized intersection over union, CVPR 2019.
    """
    targets, predictions, mask = _intervals(targets, predictions, mask)
    iou, hull, union = _interval_terms(targets, predictions)
    return _masked(1.0 - iou + safe_divide(hull - union, hull), mask)


@one_program
def temporal_diou_loss(targets, predictions, *, mask=None) -> jax.Array:
    r"""1 − the distance IoU of two intervals.

    .. math:: 1 - \mathrm{IoU} + \Big(\frac{c_A - c_B}{|H|}\Big)^2

    with centres ``c`` and the hull ``H``.

    Args:
      targets: float ``[..., 2]`` target intervals ``(start, end)``.
      predictions: float ``[..., 2]`` predicted intervals, whose centres the loss pulls
        toward the targets' centres (disjoint or not).
      mask: optional bool ``[...]``, True = a valid pair (0 and no gradient elsewhere).

    Returns:
      float32 ``[...]`` in ``[0, 2]``; the centre term is 0 when the hull is empty.

    >>> float(temporal_diou_loss(jnp.array([0.0, 1.0]), jnp.array([3.0, 4.0])))  # 1 + (3/4)^2
    1.5625

    Note:
      ActionFormer's ``ctr_diou_loss_1d`` takes offsets from an anchor point and adds
      ``eps = 1e-8`` to union and hull; this takes intervals and defines 0/0 as 0.

    References:
      Zheng et al., Distance-IoU loss, AAAI 2020; Zhang, Wu & Li, ActionFormer, ECCV 2022.
    """
    targets, predictions, mask = _intervals(targets, predictions, mask)
    iou, hull, _ = _interval_terms(targets, predictions)
    centre_gap = 0.5 * (
        (targets[..., 0] + targets[..., 1]) - (predictions[..., 0] + predictions[..., 1])
    )
    ratio = safe_divide(centre_gap, hull)
    return _masked(1.0 - iou + ratio * ratio, mask)
