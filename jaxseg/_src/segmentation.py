"""Segmental metrics of action segmentation (MS-TCN semantics) and their per-video statistics."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxseg._src import checks
from jaxseg._src.batching import MATCHING_ROWS, rows_at_once, rows_per_step
from jaxseg._src.deprecation import renamed_arguments
from jaxseg._src.edit import (
    edit_score_from_distance,
    pattern_rows,
    segment_edit_distance,
    words_edit_distance,
)
from jaxseg._src.f1 import (
    Candidates,
    candidate_bound,
    match_candidates,
    match_counts,
    table_match_counts,
)
from jaxseg._src.numerics import count_set_bits, precision_recall_f1
from jaxseg._src.programs import one_program
from jaxseg._src.segments import (
    WORD_BITS,
    PairWords,
    Segments,
    full_lengths,
    index_bits,
    mask_summary,
    pair_words,
    segments_from_words,
)

DEFAULT_IOU_THRESHOLDS = (0.1, 0.25, 0.5)
_EDIT_ONLY = object()  # the iou_thresholds of the edit metrics' statistics: no matching


class SegmentationStatistics(NamedTuple):
    """Additive per-sequence statistics from which every segmentation metric follows.

    Attributes (int32):
      frames: ``[...]`` valid frames.
      correct: ``[...]`` correctly predicted valid frames.
      edit_distance: ``[...]`` Levenshtein distance of the segment label sequences.
      target_segments: ``[...]`` true number of target segments.
      predicted_segments: ``[...]`` true number of predicted segments.
      tp, fp, fn: ``[..., K]`` segmental matches per overlap threshold.
      overflow: bool ``[...]``, a segment capacity was exceeded (edit and matches invalid).
    """

    frames: jax.Array
    correct: jax.Array
    edit_distance: jax.Array
    target_segments: jax.Array
    predicted_segments: jax.Array
    tp: jax.Array
    fp: jax.Array
    fn: jax.Array
    overflow: jax.Array


def tables_from_words(
    targets,
    predictions,
    n,
    words: PairWords,
    *,
    target_capacity,
    prediction_capacity,
    candidate_capacity,
    contiguous,
) -> tuple[Segments, Segments, Candidates | None]:
    """The target and predicted segment tables of one sequence, from the boundary words of
    its frame pass, and the candidate matches (``candidate_capacity`` 0: none; ``contiguous``:
    there is no background)."""
    target = segments_from_words(
        targets, n, words.target, capacity=target_capacity, contiguous=contiguous
    )
    prediction = segments_from_words(
        predictions, n, words.prediction, capacity=prediction_capacity, contiguous=contiguous
    )
    if not candidate_capacity:
        return target, prediction, None
    candidates = match_candidates(
        words,
        capacity=candidate_capacity,
        target_capacity=target_capacity,
        prediction_capacity=prediction_capacity,
    )
    return target, prediction, candidates


def statistics_from_tables(
    n,
    words: PairWords,
    target: Segments,
    prediction: Segments,
    candidates: Candidates,
    *,
    thresholds,
    legacy_asformer_end,
) -> SegmentationStatistics:
    """Statistics of one sequence from its boundary words, segment tables and candidate
    matches (the Evaluator's, sized to its batch)."""
    overflow = (target.count > target.labels.shape[-1]) | (
        prediction.count > prediction.labels.shape[-1]
    )
    distance = segment_edit_distance(target, prediction)
    tp, fp, fn = (jnp.zeros((0,), jnp.int32),) * 3
    if thresholds:
        frames = words.correct.shape[-1] * WORD_BITS
        options = dict(legacy_asformer_end=legacy_asformer_end, frames=frames)
        tp, fp, fn = table_match_counts(target, prediction, candidates, n, thresholds, **options)
    correct = count_set_bits(words.correct)
    return SegmentationStatistics(
        n, correct, distance, target.count, prediction.count, tp, fp, fn, overflow
    )


def _matches(
    words: PairWords, n, valid, *, thresholds, background, legacy_asformer_end, chunk, gaps
):
    """``(tp, fp, fn)`` int32 ``[K]`` of one sequence (none for no threshold)."""
    if not thresholds:
        return (jnp.zeros((0,), jnp.int32),) * 3
    return match_counts(
        words,
        n,
        thresholds,
        background=background,
        legacy_asformer_end=legacy_asformer_end,
        chunk=chunk,
        valid=valid,
        gaps=gaps,
    )


def _statistics(
    targets,
    predictions,
    mask,
    iou_thresholds,
    background,
    max_target_segments,
    max_predicted_segments,
    legacy_asformer_end,
    ignore_index=None,
    *,
    edit: bool = True,
) -> SegmentationStatistics:
    """:func:`segmentation_statistics` for ``iou_thresholds`` (the user's, validated here, or
    ``_EDIT_ONLY``: no matching); without ``edit`` the edit distances are 0 (the segmental
    counts alone).

    The arguments are validated here, and the computation is a program of its own per shape
    and static arguments: traced once for all the metrics of a user's ``jax.jit`` that share
    them (precision, recall and F1), and compiled whole under ``jax.vmap`` or ``jax.grad``
    outside ``jax.jit``, where the public functions run as they are.
    """
    targets, predictions = checks.label_pair(targets, predictions)
    mask = checks.as_mask(mask, targets.shape)
    targets, predictions, mask = checks.with_a_frame(targets, predictions, mask)
    edit_only = iou_thresholds is _EDIT_ONLY
    static = static_arguments(
        targets.shape[-1],
        (1.0,) if edit_only else iou_thresholds,
        background,
        max_target_segments,
        max_predicted_segments,
        legacy_asformer_end,
    )
    chosen = max_target_segments is not None or max_predicted_segments is not None
    capacities = ("target_capacity", "prediction_capacity")
    return _statistics_program(
        targets,
        predictions,
        mask,
        thresholds=() if edit_only else static["thresholds"],
        background=static["background"],
        legacy_asformer_end=static["legacy_asformer_end"],
        capacities=tuple(static[k] for k in capacities) if chosen else None,
        ignore_index=checks.static_ignore_index(ignore_index),
        edit=edit,
    )


@functools.partial(
    jax.jit,
    static_argnames=(
        "thresholds",
        "background",
        "legacy_asformer_end",
        "capacities",
        "ignore_index",
        "edit",
    ),
)
def _statistics_program(targets, predictions, mask, *, capacities, ignore_index, edit, **rule):
    """The statistics of validated labels ``[..., T]``, sequences with more segments than
    the static ``capacities`` (target, prediction; ``None``: no limit) flagged as overflowing;
    frames whose target is ``ignore_index`` are removed like masked ones."""
    mask = checks.without_ignored(targets, mask, ignore_index)
    batch_shape, T = targets.shape[:-1], targets.shape[-1]
    flat = [None if x is None else jnp.reshape(x, (-1, T)) for x in (targets, predictions, mask)]
    # Under jax.vmap the mapped sequences join the batch: the loops' step widths are sized
    # by the whole batch (rows_per_step, pattern_rows).
    of_rows = functools.partial(_statistics_of_rows, capacities=capacities, edit=edit, rule=rule)
    stats = rows_at_once(of_rows)(*flat)
    return jax.tree_util.tree_map(lambda x: jnp.reshape(x, (*batch_shape, *x.shape[1:])), stats)


def _statistics_of_rows(targets, predictions, mask, *, capacities, edit, rule):
    """:func:`_statistics_program` of a flat batch ``[B, T]``.

    The frame pass runs once: it is the pass that accuracy shares under one ``jax.jit``, and
    its words give the segment counts, the candidate matches and the segments' labels. A mask
    is taken as its bits, gaps anywhere (:func:`~jaxseg._src.segments.pair_words`).
    """
    lengths, words, valid, gaps = _frame_pass(targets, predictions, mask, rule["background"])
    distance = jnp.zeros(lengths.shape, jnp.int32)
    if edit:
        block = pattern_rows(lengths.shape[0])
        edit_distances = functools.partial(words_edit_distance, block=block)
        distance = jax.vmap(edit_distances)(targets, predictions, words)
    return _with_distances(lengths, words, distance, valid, gaps, capacities, rule)


@functools.partial(jax.jit, static_argnames="background")
def _frame_pass(targets, predictions, mask, background):
    """The frame pass of rows ``[B, T]``: ``(lengths, words, valid, gaps)``, ``valid`` the
    mask's bits and ``gaps`` a bool scalar, whether any row's valid frames have gaps (both
    None without a mask: the valid frames are the first ``lengths``).

    A program of its own: the segmental metrics of one ``jax.jit`` (edit, the segmental
    counts), whose programs differ in their static arguments, share its trace and its
    lowering, one function in the program that XLA receives rather than a copy per metric
    (its mask loops are most of what a mask adds to a first call's compilation).
    """
    if mask is None:
        lengths, valid, gaps = full_lengths(targets), None, None
    else:
        lengths, is_prefix, mask_words = jax.vmap(mask_summary)(mask)
        valid, gaps = jax.vmap(index_bits)(mask_words), jnp.any(~is_prefix)
    words = jax.vmap(pair_words, in_axes=(0, 0, 0, None, 0))(
        targets, predictions, lengths, background, valid
    )
    return lengths, words, valid, gaps


def _with_distances(lengths, words, distance, valid, gaps, capacities, rule):
    """The :class:`SegmentationStatistics` of rows ``[B, T]`` from their frame pass's words
    and their edit distances (``valid`` and ``gaps`` from :func:`_frame_pass`)."""
    target_segments = words.target.starts.total
    predicted_segments = words.prediction.starts.total
    if capacities is None:
        overflow = jnp.zeros(lengths.shape, jnp.bool_)
    else:
        overflow = (target_segments > capacities[0]) | (predicted_segments > capacities[1])
    chunk = rows_per_step(lengths.shape[0], MATCHING_ROWS)
    matches = functools.partial(_matches, chunk=chunk, gaps=gaps, **rule)
    tp, fp, fn = jax.vmap(matches)(words, lengths, valid)
    correct = jax.vmap(count_set_bits)(words.correct)
    return SegmentationStatistics(
        lengths, correct, distance, target_segments, predicted_segments, tp, fp, fn, overflow
    )


@renamed_arguments(overlaps="iou_thresholds")
@one_program
def segmentation_statistics(
    targets,
    predictions,
    *,
    mask=None,
    iou_thresholds=DEFAULT_IOU_THRESHOLDS,
    background=(),
    max_target_segments=None,
    max_predicted_segments=None,
    legacy_asformer_end=False,
    ignore_index=None,
) -> SegmentationStatistics:
    """Per-sequence sufficient statistics of accuracy, edit score and segmental F1.

    Dataset-level numbers as the MS-TCN evaluation script reports them follow by summing:
    accuracy = sum(correct) / sum(frames), F1@tau from summed tp/fp/fn, and edit = mean of the
    per-sequence edit scores (see :func:`edit_score`).

    Args:
      targets: integer ``[..., T]`` true labels.
      predictions: integer ``[..., T]`` predicted labels.
      mask: optional bool ``[..., T]``, True = valid frame (masked frames are removed first).
      iou_thresholds: static tuple of IoU thresholds in (0, 1], simple fractions such as 0.1.
      background: static tuple of labels that form no segment.
      max_target_segments: optional static limit on a sequence's target segments: one with
        more is reported (``overflow``), not counted. No table is sized by it (the kernels'
        loops run as many steps as the data needs), so ``None``, no limit, is exact and as
        fast.
      max_predicted_segments: the same for the predicted segments.
      legacy_asformer_end: static; if True the last segment ends one frame early when it
        reaches the end of the sequence, as in the ASFormer, DiffAct and ASRF scripts.
      ignore_index: optional static int: frames whose target equals it are removed like
        masked ones (ASRF's ``ignore_index``; segments on both sides of them can merge).

    Returns:
      :class:`SegmentationStatistics` of int32 arrays ``[...]`` (``[..., K]`` for tp/fp/fn).

    >>> s = segmentation_statistics([1, 1, 2, 2, 2], [1, 1, 1, 1, 2])
    >>> int(s.correct), int(s.edit_distance), s.tp.tolist(), s.fn.tolist()
    (3, 0, [2, 2, 1], [0, 0, 1])
    """
    return _statistics(
        targets,
        predictions,
        mask,
        iou_thresholds,
        background,
        max_target_segments,
        max_predicted_segments,
        legacy_asformer_end,
        ignore_index,
    )


def static_arguments(
    T,
    iou_thresholds,
    background,
    max_target_segments,
    max_predicted_segments,
    legacy_asformer_end,
    candidate_capacity=None,
) -> dict:
    """Validated static arguments of :func:`segmentation_statistics` for padded length T.

    The candidate matches (same-label overlapping segment pairs) number at most
    :func:`~jaxseg._src.f1.candidate_bound` and at most T, so their default capacity can never
    overflow unless a segment table does.
    """
    T = max(T, 1)
    target_capacity = (
        checks.static_int("max_target_segments", max_target_segments, minimum=1, allow_none=True)
        or T
    )
    prediction_capacity = (
        checks.static_int(
            "max_predicted_segments", max_predicted_segments, minimum=1, allow_none=True
        )
        or T
    )
    background = checks.static_labels("background", background)
    bound = candidate_bound(target_capacity, prediction_capacity, background)
    return dict(
        thresholds=checks.static_thresholds("iou_thresholds", iou_thresholds),
        background=background,
        target_capacity=target_capacity,
        prediction_capacity=prediction_capacity,
        candidate_capacity=candidate_capacity or min(T, bound),
        legacy_asformer_end=checks.static_bool("legacy_asformer_end", legacy_asformer_end),
    )


def _nan_if(overflow, value):
    overflow = jnp.reshape(overflow, overflow.shape + (1,) * (value.ndim - overflow.ndim))
    return jnp.where(overflow, jnp.nan, value)


def _counts(
    targets, predictions, mask, iou_thresholds, background, capacities, legacy, ignore_index
):
    """``(tp, fp, fn)`` float32 ``[..., K]`` of :func:`segmental_counts` (NaN on overflow)."""
    stats = _statistics(
        targets,
        predictions,
        mask,
        iou_thresholds,
        background,
        *capacities,
        legacy,
        ignore_index,
        edit=False,
    )
    return tuple(_nan_if(stats.overflow, x.astype(jnp.float32)) for x in stats[5:8])


@one_program
def edit_distance(
    targets,
    predictions,
    *,
    mask=None,
    background=(),
    max_target_segments=None,
    max_predicted_segments=None,
    ignore_index=None,
) -> jax.Array:
    """Levenshtein distance between the segment label sequences.

    The frame-wise labels are turned into segments (:func:`jaxseg.segments.to_segments`) and
    ``D = Levenshtein(P, Y)`` is computed on the label sequences P (predicted) and Y (target),
    with unit costs for insertion, deletion and substitution; timing is ignored.

    Args:
      targets: integer ``[..., T]`` true frame-wise labels.
      predictions: integer ``[..., T]`` predicted frame-wise labels.
      mask: optional bool ``[..., T]``, True = valid frame (masked frames are removed first,
        so segments on both sides of a masked gap can merge).
      background: static tuple of labels that form no segment (removed after run-length
        encoding: two same-label segments split by background stay two).
      max_target_segments: optional static limit on a sequence's target segments: one with
        more gives NaN. No table is sized by it, so ``None`` (no limit) is exact and as fast.
      max_predicted_segments: the same for the predicted segments.
      ignore_index: optional static int: frames whose target equals it are removed like
        masked ones (ASRF's ``ignore_index``, PyTorch-style padding such as -100).

    Returns:
      float32 ``[...]``, integer valued; NaN where a segment capacity overflowed.

    >>> float(edit_distance([1, 1, 2, 2, 3], [1, 2, 2, 4, 3]))
    1.0

    References:
      Lea et al., Segmental spatiotemporal CNNs for fine-grained action segmentation,
      ECCV 2016.
    """
    capacities = (max_target_segments, max_predicted_segments)
    stats = _statistics(
        targets, predictions, mask, _EDIT_ONLY, background, *capacities, False, ignore_index
    )
    return _nan_if(stats.overflow, stats.edit_distance.astype(jnp.float32))


@one_program
def edit_score(
    targets,
    predictions,
    *,
    mask=None,
    background=(),
    max_target_segments=None,
    max_predicted_segments=None,
    ignore_index=None,
) -> jax.Array:
    """Segmental edit score: ``1 - D / max(|P|, |Y|)`` per sequence.

    ``D`` is :func:`edit_distance`, ``|P|`` and ``|Y|`` the numbers of predicted and target
    segments. The dataset-level edit score of MS-TCN is the mean of these values over videos.

    Args:
      targets, predictions, mask, background, max_target_segments, max_predicted_segments,
        ignore_index: as in :func:`edit_distance`.

    Returns:
      float32 ``[...]`` in [0, 1]; 1.0 when neither sequence has a segment (MS-TCN's
      ``eval.py`` returns NaN there and kage1020's evaluator 0.0); NaN past a segment
      limit.

    >>> float(edit_score([1, 1, 2, 2, 3], [1, 2, 2, 4, 3]))
    0.75

    References:
      Lea et al., Segmental spatiotemporal CNNs for fine-grained action segmentation,
      ECCV 2016; Abu Farha & Gall, MS-TCN, CVPR 2019 (``eval.py``).
    """
    capacities = (max_target_segments, max_predicted_segments)
    stats = _statistics(
        targets, predictions, mask, _EDIT_ONLY, background, *capacities, False, ignore_index
    )
    score = edit_score_from_distance(
        stats.edit_distance, stats.target_segments, stats.predicted_segments
    )
    return _nan_if(stats.overflow, score)


@renamed_arguments(overlaps="iou_thresholds")
@one_program
def segmental_counts(
    targets,
    predictions,
    *,
    iou_thresholds=DEFAULT_IOU_THRESHOLDS,
    mask=None,
    background=(),
    max_target_segments=None,
    max_predicted_segments=None,
    legacy_asformer_end=False,
    ignore_index=None,
):
    """Segmental true positives, false positives and false negatives.

    MS-TCN matching: predicted segments are visited in temporal order; each is compared with
    the same-label target segment of highest IoU (``IoU = intersection / span``, first index
    on ties) and is a TP iff ``IoU >= tau`` and that target is still unused, otherwise an FP
    (there is no fall-back to the second-best target). FN = targets never matched. A sequence
    whose targets have no segment counts every prediction as FP (MS-TCN raises there).

    Args:
      targets, predictions, mask, background, max_target_segments, max_predicted_segments,
        ignore_index: as in :func:`edit_distance`.
      iou_thresholds: static tuple of IoU thresholds tau in (0, 1]; they must be simple fractions
        (0.1, 0.25, 0.5, ...) so that ``IoU >= tau`` is decided exactly on integers.
      legacy_asformer_end: static; reproduce ASFormer/DiffAct/ASRF, whose last segment (if
        not background) ends one frame early. Changes F1 only, never edit or accuracy.

    Returns:
      ``(tp, fp, fn)``, each float32 ``[..., K]``, integer valued; NaN where a segment
      capacity overflowed.

    >>> tp, fp, fn = segmental_counts([1, 1, 1, 1, 2, 2], [1, 1, 3, 3, 2, 2], iou_thresholds=(0.5,))
    >>> tp.tolist(), fp.tolist(), fn.tolist()
    ([2.0], [1.0], [0.0])

    References:
      Lea et al., Temporal convolutional networks for action segmentation and detection,
      CVPR 2017; Abu Farha & Gall, MS-TCN, CVPR 2019 (``f_score`` in ``eval.py``).
    """
    capacities = (max_target_segments, max_predicted_segments)
    return _counts(
        targets,
        predictions,
        mask,
        iou_thresholds,
        background,
        capacities,
        legacy_asformer_end,
        ignore_index,
    )


@renamed_arguments(overlaps="iou_thresholds")
@one_program
def segmental_precision(
    targets,
    predictions,
    *,
    iou_thresholds=DEFAULT_IOU_THRESHOLDS,
    mask=None,
    background=(),
    max_target_segments=None,
    max_predicted_segments=None,
    legacy_asformer_end=False,
    ignore_index=None,
):
    """Segmental precision@tau of each sequence: ``tp / (tp + fp)``.

    Counts come from :func:`segmental_counts` (MS-TCN matching). This is the per-sequence
    value; the number MS-TCN reports sums TP/FP/FN over all videos first
    (``jaxseg.streaming.segmentation``).

    Args:
      targets, predictions, iou_thresholds, mask, background, max_target_segments,
        max_predicted_segments, legacy_asformer_end, ignore_index: as in
        :func:`segmental_counts`.

    Returns:
      float32 ``[..., K]`` in [0, 1]; 0 where ``tp + fp`` is 0 (MS-TCN's ``nan_to_num``);
      NaN where a segment capacity overflowed.

    >>> print(segmental_precision([1, 1, 1, 1, 2, 2], [1, 1, 3, 3, 2, 2], iou_thresholds=(0.5,)))
    [0.6666667]

    References:
      Lea et al., Temporal convolutional networks for action segmentation and detection,
      CVPR 2017.
    """
    capacities = (max_target_segments, max_predicted_segments)
    counts = _counts(
        targets,
        predictions,
        mask,
        iou_thresholds,
        background,
        capacities,
        legacy_asformer_end,
        ignore_index,
    )
    return precision_recall_f1(*counts)[0]


@renamed_arguments(overlaps="iou_thresholds")
@one_program
def segmental_recall(
    targets,
    predictions,
    *,
    iou_thresholds=DEFAULT_IOU_THRESHOLDS,
    mask=None,
    background=(),
    max_target_segments=None,
    max_predicted_segments=None,
    legacy_asformer_end=False,
    ignore_index=None,
):
    """Segmental recall@tau of each sequence: ``tp / (tp + fn)``.

    Counts come from :func:`segmental_counts`; the dataset number sums TP/FP/FN over videos
    first (``jaxseg.streaming.segmentation``).

    Args:
      targets, predictions, iou_thresholds, mask, background, max_target_segments,
        max_predicted_segments, legacy_asformer_end, ignore_index: as in
        :func:`segmental_counts`.

    Returns:
      float32 ``[..., K]`` in [0, 1]; 0 where ``tp + fn`` is 0; NaN where a segment capacity
      overflowed.

    >>> print(segmental_recall([1, 1, 1, 1, 2, 2], [1, 1, 3, 3, 2, 2], iou_thresholds=(0.5,)))
    [1.]

    References:
      Lea et al., Temporal convolutional networks for action segmentation and detection,
      CVPR 2017.
    """
    capacities = (max_target_segments, max_predicted_segments)
    counts = _counts(
        targets,
        predictions,
        mask,
        iou_thresholds,
        background,
        capacities,
        legacy_asformer_end,
        ignore_index,
    )
    return precision_recall_f1(*counts)[1]


@renamed_arguments(overlaps="iou_thresholds")
@one_program
def segmental_f1(
    targets,
    predictions,
    *,
    iou_thresholds=DEFAULT_IOU_THRESHOLDS,
    mask=None,
    background=(),
    max_target_segments=None,
    max_predicted_segments=None,
    legacy_asformer_end=False,
    ignore_index=None,
):
    """Segmental F1@tau of each sequence: ``2 tp / (2 tp + fp + fn)``.

    Counts come from :func:`segmental_counts`; the F1@tau MS-TCN reports is computed from
    TP/FP/FN summed over videos (``jaxseg.streaming.segmentation``), not a mean of these.

    Args:
      targets, predictions, iou_thresholds, mask, background, max_target_segments,
        max_predicted_segments, legacy_asformer_end, ignore_index: as in
        :func:`segmental_counts`.

    Returns:
      float32 ``[..., K]`` in [0, 1]; 0 where the denominator is 0; NaN where a segment
      capacity overflowed.

    >>> print(segmental_f1([1, 1, 1, 1, 2, 2], [1, 1, 3, 3, 2, 2], iou_thresholds=(0.5,)))
    [0.8]

    References:
      Lea et al., Temporal convolutional networks for action segmentation and detection,
      CVPR 2017.
    """
    capacities = (max_target_segments, max_predicted_segments)
    counts = _counts(
        targets,
        predictions,
        mask,
        iou_thresholds,
        background,
        capacities,
        legacy_asformer_end,
        ignore_index,
    )
    return precision_recall_f1(*counts)[2]
