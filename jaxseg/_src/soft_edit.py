"""Soft (differentiable) edit distances: the frame-level segmental edit and soft Levenshtein."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from jaxseg._src import checks, edit_dp
from jaxseg._src.batching import lift
from jaxseg._src.capacity import (
    capacity_ladder,
    run_count_bound,
    sequence_loss,
    switch_capacity,
)
from jaxseg._src.loss_utils import (
    compact_frames,
    compute_dtype,
    labels_in_range,
    labels_within_classes,
    logits_and_labels,
    nan_where_invalid,
    no_class,
    probabilities,
    temperature,
    zero_where_masked,
)
from jaxseg._src.numerics import safe_divide
from jaxseg._src.programs import one_program
from jaxseg._src.segments import is_background, segments_of


def segment_starts(probs, n_valid, background: tuple[int, ...]):
    """Soft segment starts of one compacted sequence ``probs [T, C]`` (valid rows ``< n_valid``).

    Returns ``u [T, C]`` with ``u[t, c] = relu(p[t, c] - p[t-1, c])`` for non-background ``c``
    (``p[-1] = 0``; rows past ``n_valid`` are 0): exactly 1 where a class-``c`` segment starts
    when ``probs`` is one-hot, else 0.
    """
    T, C = probs.shape
    probs = jnp.where((jnp.arange(T, dtype=jnp.int32) < n_valid)[:, None], probs, 0.0)
    previous = jnp.concatenate([jnp.zeros((1, C), probs.dtype), probs[:-1]], axis=0)
    foreground = ~is_background(jnp.arange(C, dtype=jnp.int32), background)
    return jnp.where(foreground, jax.nn.relu(probs - previous), 0.0)


def soft_edit_distance(
    probs, n_valid, segment_labels, n_segments, *, background, gamma, backward, stride=1
):
    """Soft edit distance ``D[n_valid, n_segments]`` of one compacted sequence ``probs [T, C]``
    against target segment labels ``[K]``; also returns the soft number of starts ``Σ_t s_t``.

    With ``stride > 1`` the DP runs over windows of ``stride`` frames: a window's soft starts
    ``U_w(c) = Σ_{t∈w} u_t(c)`` and ``s_w = Σ_c U_w(c)`` give the costs ``s_w`` (delete the
    window's starts) and ``max(s_w, 1) - min(U_w(y_k), 1)`` (one start is ``y_k``'s, the others
    are deleted). For ``stride = 1`` (``s_t ≤ 1``) this is the frame-level recursion.
    """
    u = segment_starts(probs, n_valid, background)
    if stride > 1:
        T, C = u.shape
        windows = -(-T // stride)
        u = jnp.pad(u, ((0, windows * stride - T), (0, 0))).reshape(windows, stride, C).sum(1)
        n_valid = (n_valid + stride - 1) // stride
    starts = jnp.sum(u, axis=-1)
    # c_sub[k, t] = table[t, y_k] = 1 - u[t, y_k]: a segment of the k-th target label starts
    # at frame t; gathered by the DP one anti-diagonal at a time, never as a [K, T] array.
    if stride > 1:
        table = jnp.maximum(starts, 1.0)[:, None] - jnp.minimum(u, 1.0)
    else:
        table = 1.0 - u
    c_del = jnp.ones(segment_labels.shape, u.dtype)
    distance = edit_dp.soft_edit_dp_by_label(
        c_del,
        jnp.maximum(segment_labels, 0),
        table,
        starts,
        n_segments,
        n_valid,
        gamma,
        backward=backward,
    )
    return distance, jnp.sum(starts)


def _soft_edit_one(
    probs, transcript, mask, *, background, capacity, gamma, normalize, backward, stride
):
    """:func:`soft_edit_loss` of one sequence from its transcript (:func:`_transcript`)."""
    probs, n = compact_frames(probs, mask)
    count = jnp.sum(transcript >= 0, dtype=jnp.int32)
    m = jnp.minimum(count, capacity)
    distance, starts = soft_edit_distance(
        probs,
        n,
        transcript[:capacity],
        m,
        background=background,
        gamma=gamma,
        backward=backward,
        stride=stride,
    )
    if normalize == "target":
        denominator = jnp.maximum(m, 1).astype(distance.dtype)
    else:
        denominator = jnp.maximum(jnp.maximum(starts, m.astype(distance.dtype)), 1.0)
    loss = safe_divide(distance, denominator)
    return jnp.where(count > capacity, jnp.nan, loss)


def _transcript(labels, mask, *, background):
    """int32 ``[T]``: the segment labels of one sequence's valid frames (-1 past them),
    extracted once for every capacity rung."""
    labels, n = compact_frames(labels, mask)
    return segments_of(labels, n, background=background, capacity=labels.shape[0]).labels


@one_program(host_check=labels_within_classes())
def soft_edit_loss(
    logits,
    labels,
    *,
    mask=None,
    background=(),
    gamma=0.1,
    normalize="target",
    max_segments=None,
    stride=1,
    backward="custom",
    ignore_index=None,
) -> jax.Array:
    r"""Soft segmental edit distance between frame-wise class probabilities and labels.

    MS-TCN's edit distance of segments, smoothed and computed on frames (no decoding). With
    :math:`p_t = \mathrm{softmax}(\text{logits}_t)` and :math:`p_{-1} = 0`, a soft
    "class-:math:`c` segment starts at :math:`t`" is
    :math:`u_t(c) = \max(p_t(c) - p_{t-1}(c), 0)` for :math:`c \notin` background, and
    :math:`s_t = \sum_c u_t(c)`. With :math:`y_1..y_M` the label segments (background removed),

    .. math::
        D[t, k] = \mathrm{smin}_\gamma(D[t-1, k] + s_t,\ D[t-1, k-1] + 1 - u_t(y_k),\
                  D[t, k-1] + 1),

    where :math:`\mathrm{smin}_\gamma(x) = -\gamma \log \sum_i e^{-x_i/\gamma}`. The loss is
    :math:`D[T, M] / \max(M, 1)` (``normalize="target"``) or
    :math:`D[T, M] / \max(\sum_t s_t, M, 1)` (``"max"``: 1 − the MS-TCN edit score on one-hot
    inputs). For one-hot probabilities and :math:`\gamma \to 0`, :math:`D[T, M]` is the
    Levenshtein distance between the segment label sequences, with MS-TCN's background rule.

    Args:
      logits: float ``[..., T, C]`` unnormalised scores (softmax inside, in float32).
      labels: integer ``[..., T]`` frame labels in ``[0, C)``.
      mask: optional bool ``[..., T]``, True = valid frame; others are removed (zero gradient).
      background: static tuple of labels that form no segment.
      gamma: float > 0, scalar or ``[...]``: the temperature (<= 0 raises ``ValueError``;
        traced, annealing does not recompile); default 0.1. Keep ``gamma <= 1 / log(T / M)``:
        larger values bias the value negative and can flip the gradient's sign at true starts.
      normalize: ``"target"`` (divide by the number of label segments) or ``"max"``.
      max_segments: static capacity of label segments, a memory bound. ``None`` (default):
        per call, the smallest of a few static capacities (32, 256, 2048, ..., ``T``) holding
        the batch's label segments, never truncating (``O(T^1.5)`` memory);
        ``backward="autodiff"`` then runs every capacity.
      stride: static int ≥ 1: the DP runs over windows of ``stride`` frames (that many times
        fewer sequential steps) with summed soft starts ``s_w = Σ_{t∈w} s_t``, ``U_w(c) =
        Σ_{t∈w} u_t(c)`` and match cost ``max(s_w, 1) − min(U_w(y_k), 1)``; exact (one-hot,
        γ → 0) when no window holds two starts of a side. Default 1 (the recursion above).
      backward: ``"custom"`` (expected-alignment backward pass) or ``"autodiff"``; both
        have forward-mode (``jax.jvp``, ``jax.jacfwd``) and second derivatives.
      ignore_index: optional static int: frames of this label are removed like masked ones
        (PyTorch's -100). Another label outside ``[0, C)`` on a valid frame raises
        ``ValueError`` if the labels are concrete, else makes the loss NaN (zero gradient).

    Returns:
      float32 ``[...]``, one loss per sequence, ≥ 0 up to the entropic bias (at worst about
      ``-γ log 3`` per DP step); NaN where the labels have more segments than
      ``max_segments`` or a label is out of range; 0 for a sequence without valid frames.

    >>> logits = 20.0 * jax.nn.one_hot(jnp.array([1, 1, 2, 1, 1]), 3)
    >>> labels = jnp.array([1, 1, 1, 1, 1])
    >>> round(float(soft_edit_loss(logits, labels, gamma=0.01)), 2)  # 2 extra segments, 1 target
    1.99

    References:
      Abu Farha & Gall, MS-TCN, CVPR 2019 (the edit score); Lea et al., ECCV 2016;
      Mensch & Blondel, Differentiable Dynamic Programming, ICML 2018 (smoothed min).
    """
    logits, labels, mask, invalid = logits_and_labels(
        logits, labels, mask, ignore_index=ignore_index
    )
    background = checks.static_labels("background", background)
    normalize = checks.static_choice("normalize", normalize, ("target", "max"))
    backward = checks.static_choice("backward", backward, ("custom", "autodiff"))
    capacity = checks.static_int("max_segments", max_segments, minimum=1, allow_none=True)
    stride = checks.static_int("stride", stride, minimum=1)
    gamma = temperature(gamma, labels.shape[:-1])
    options = dict(background=background, normalize=normalize, backward=backward, stride=stride)
    loss = _soft_edit_program(logits, labels, mask, gamma, capacity=capacity, **options)
    return nan_where_invalid(loss, invalid)


# Validated arguments run as one compiled program per shape and static arguments, so that
# a call under ``jax.grad`` or ``jax.vmap`` outside ``jax.jit`` (where ``one_program`` runs the
# loss as it is) does not dispatch the dynamic programme's operations one by one.
@functools.partial(
    jax.jit, static_argnames=("capacity", "background", "normalize", "backward", "stride")
)
def _soft_edit_program(
    logits, labels, mask, gamma, *, capacity, background, normalize, backward, stride
):
    """:func:`soft_edit_loss` ``[...]`` of validated logits ``[..., T, C]`` and labels."""
    options = dict(background=background, normalize=normalize, backward=backward, stride=stride)
    batch_shape, T = labels.shape[:-1], labels.shape[-1]
    logits = jnp.reshape(logits, (-1, *logits.shape[-2:]))
    labels, mask = jnp.reshape(labels, (-1, T)), jnp.reshape(mask, (-1, T))
    gammas = jnp.reshape(jnp.asarray(gamma, compute_dtype(logits)), labels.shape[:1])

    def one(c, x, g, y, valid):
        return _soft_edit_one(probabilities(x), y, valid, capacity=c, gamma=g, **options)

    count_bound = run_count_bound(labels, mask, background)
    transcripts = jax.vmap(functools.partial(_transcript, background=background))(labels, mask)
    rows, others = (logits, gammas), (transcripts, mask)
    if capacity is None and backward == "autodiff":  # any order: the switch's own derivative
        ladder = capacity_ladder(max(T, 1))

        def at(c):
            return lambda *operands: jax.vmap(functools.partial(one, c))(*operands)

        loss = switch_capacity(at, ladder, count_bound, *rows, *others)
    else:
        windows, classes = -(-T // stride), logits.shape[-1]

        def dp_bytes(c):  # the DP's own, then the soft starts, cost table and their gradients
            return edit_dp.soft_dp_bytes(c, windows) + 16 * windows * classes

        loss = sequence_loss(
            one, capacity, rows, others, count_bound=count_bound, bytes_per_sequence=dp_bytes
        )
    return jnp.reshape(loss, batch_shape)


def _soft_levenshtein_one(probs, labels, mask, label_mask, *, gamma, backward):
    probs, n = compact_frames(probs, mask)
    labels, m = compact_frames(labels, label_mask)
    # Rows are the targets, columns the predicted symbols (the distance is symmetric):
    # substituting symbol i by target j costs 1 - p_i(y_j) (total variation to one-hot y_j).
    labels = jnp.clip(labels, 0, probs.shape[-1] - 1)
    ones_a = jnp.ones(labels.shape, probs.dtype)
    ones_b = jnp.ones(probs.shape[:1], probs.dtype)
    return edit_dp.soft_edit_dp_by_label(
        ones_a, labels, 1.0 - probs, ones_b, m, n, gamma, backward=backward
    )


@one_program(host_check=labels_within_classes(mask="label_mask"))
def soft_levenshtein(
    logits, labels, *, mask=None, label_mask=None, gamma=0.1, backward="custom", ignore_index=None
) -> jax.Array:
    r"""Soft Levenshtein distance between a sequence of symbol distributions and a label sequence.

    For a model that predicts a transcript: :math:`p_i = \mathrm{softmax}(\text{logits}_i)`,
    ``i < N``, against target symbols :math:`y_j`, ``j < M``. Deleting or inserting a symbol
    costs 1 and substituting :math:`p_i` by :math:`y_j` costs :math:`1 - p_i(y_j)` (the total
    variation distance to the one-hot :math:`y_j`):

    .. math::
        R[i, j] = \mathrm{smin}_\gamma(R[i-1, j] + 1,\ R[i-1, j-1] + 1 - p_i(y_j),\
                  R[i, j-1] + 1),

    and the loss is :math:`R[N, M]`. For one-hot :math:`p` and :math:`\gamma \to 0` it is the
    Levenshtein distance.

    Args:
      logits: float ``[..., N, C]`` unnormalised scores of the predicted symbols.
      labels: integer ``[..., M]`` target symbols in ``[0, C)``.
      mask: optional bool ``[..., N]``, True = a valid predicted symbol.
      label_mask: optional bool ``[..., M]``, True = a valid target symbol.
      gamma: float > 0, scalar or ``[...]`` (one temperature per sequence): the temperature
        (a concrete value <= 0 raises ``ValueError``; it may be traced). Default 0.1.
      backward: ``"custom"`` (expected-alignment backward pass) or ``"autodiff"``; both
        have forward-mode (``jax.jvp``, ``jax.jacfwd``) and second derivatives.
      ignore_index: optional static int: target symbols equal to it are removed like masked
        ones (PyTorch-style padding such as -100). Any other symbol outside ``[0, C)`` that
        is valid raises ``ValueError`` when the labels are concrete; traced, it makes that
        sequence's distance NaN (with zero gradient).

    Returns:
      float32 ``[...]``, the soft distance (not normalised), in
      ``[-γ log(3) (N + M), N + M]``; equal to the Levenshtein distance up to ``O(γ)``; NaN
      where a valid target symbol lies outside ``[0, C)``.

    >>> logits = 20.0 * jax.nn.one_hot(jnp.array([0, 1, 2]), 4)
    >>> round(float(soft_levenshtein(logits, jnp.array([0, 2, 3]), gamma=0.01)), 1)
    2.0

    References:
      Ofitserov, Tsvetkov & Nazarov, Soft edit distance for differentiable comparison of
      symbolic sequences, arXiv:1904.12562, 2019; Mensch & Blondel, ICML 2018.
    """
    logits = checks.as_float("logits", logits, min_ndim=2)
    no_class(logits)
    labels = checks.as_int_labels("labels", labels)
    if labels.shape[:-1] != logits.shape[:-2]:
        raise ValueError(
            f"labels [..., M] must share the leading dims of logits [..., N, C] "
            f"{logits.shape[:-2]}, got shape {labels.shape}."
        )
    mask = checks.as_mask(mask, logits.shape[:-1])
    label_mask = checks.as_mask(label_mask, labels.shape, name="label_mask")
    mask = jnp.ones(logits.shape[:-1], jnp.bool_) if mask is None else mask
    logits = zero_where_masked(logits, mask)
    label_mask, invalid = labels_in_range(
        labels, label_mask, logits.shape[-1], ignore_index=ignore_index
    )
    backward = checks.static_choice("backward", backward, ("custom", "autodiff"))
    gamma = temperature(gamma, labels.shape[:-1]).astype(compute_dtype(logits))

    def one(x, y, valid, label_valid, g):
        return _soft_levenshtein_one(
            probabilities(x), y, valid, label_valid, gamma=g, backward=backward
        )

    distance = lift(one, (logits, labels, mask, label_mask, gamma), (2, 1, 1, 1, 0))
    return nan_where_invalid(distance, invalid)
