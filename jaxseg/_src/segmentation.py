"""Segmental metrics of action segmentation (MS-TCN semantics) and their per-video statistics."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from jaxseg._src import checks
from jaxseg._src.batching import largest, rows_at_once
from jaxseg._src.capacity import capacity_ladder, in_blocks, rung
from jaxseg._src.deprecation import renamed_arguments
from jaxseg._src.edit import edit_score_from_distance, segment_edit_distance
from jaxseg._src.f1 import (
    Candidates,
    candidate_bound,
    legacy_last_end,
    match_candidates,
    match_counts,
)
from jaxseg._src.numerics import count_set_bits, precision_recall_f1
from jaxseg._src.programs import one_program
from jaxseg._src.segments import (
    WORD_BITS,
    PairWords,
    Segments,
    compact_batch,
    full_lengths,
    mask_summary,
    pair_words,
    segments_from_words,
    unpack_bits,
)

DEFAULT_IOU_THRESHOLDS = (0.1, 0.25, 0.5)


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
    """The target and predicted segment tables and the candidate matches of one sequence,
    from the boundary words of its frame pass (``contiguous``: there is no background;
    ``candidate_capacity`` 0: no candidates, for the edit distance alone)."""
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
    candidates: Candidates | None,
    *,
    thresholds,
    legacy_asformer_end,
) -> SegmentationStatistics:
    """Statistics of one sequence from its boundary words, segment tables and candidate
    matches (without candidates, for no threshold: the edit distance alone)."""
    overflow = (target.count > target.labels.shape[-1]) | (
        prediction.count > prediction.labels.shape[-1]
    )
    distance = segment_edit_distance(target, prediction)
    if legacy_asformer_end:
        target, prediction = legacy_last_end(target, n), legacy_last_end(prediction, n)
    if candidates is None:
        tp = fp = fn = jnp.zeros((0,), jnp.int32)
    else:
        overflow = overflow | (candidates.count > candidates.owner.shape[-1])
        frames = words.correct.shape[-1] * WORD_BITS
        tp, fp, fn = match_counts(target, prediction, candidates, thresholds, frames=frames)
    correct = count_set_bits(words.correct)
    return SegmentationStatistics(
        n, correct, distance, target.count, prediction.count, tp, fp, fn, overflow
    )


def _batch_statistics(targets, predictions, lengths, words, *, capacities, thresholds, **rule):
    """Statistics of a batch ``[B, T]`` of prefix sequences (valid frames ``< lengths``) with
    their boundary words, at static ``capacities`` (target, prediction, candidates)."""
    target_capacity, prediction_capacity, candidate_capacity = capacities

    def one(t, p, n, w):
        tables = tables_from_words(
            t,
            p,
            n,
            w,
            target_capacity=target_capacity,
            prediction_capacity=prediction_capacity,
            candidate_capacity=candidate_capacity if thresholds else 0,
            contiguous=not rule["background"],
        )
        return statistics_from_tables(
            n, w, *tables, thresholds=thresholds, legacy_asformer_end=rule["legacy_asformer_end"]
        )

    return jax.vmap(one)(targets, predictions, lengths, words)


def _batch_words(targets, predictions, lengths, background):
    return jax.vmap(pair_words, in_axes=(0, 0, 0, None))(targets, predictions, lengths, background)


def _at_capacities(capacities: tuple, shape: tuple, rule: dict, *, compact: bool):
    """A branch of :func:`_statistics_of_rows`: the statistics at static ``capacities``
    (target, prediction, candidates) from the frame pass's words; with ``compact``, the valid
    frames are first moved to the front (a mask with gaps) and the words computed again.
    ``shape`` ``(B, T)`` is the batch's."""
    T = shape[-1]

    def run(targets, predictions, lengths, words, mask_words):
        if compact:
            mask = jax.vmap(unpack_bits, in_axes=(0, None))(mask_words, T)
            (targets, predictions), lengths = compact_batch((targets, predictions), mask)
            words = _batch_words(targets, predictions, lengths, rule["background"])
        return _batch_statistics(
            targets, predictions, lengths, words, capacities=capacities, **rule
        )

    block = _sequences_per_block(capacities[:2], shape, rule["background"])
    return functools.partial(in_blocks, run, block=block)


def _sequences_per_block(tables: tuple, shape: tuple, background: tuple) -> int | None:
    """How many sequences of a batch of ``shape`` ``(B, T)`` one block of
    :func:`~jaxseg._src.capacity.in_blocks` holds with segment ``tables`` of these (target,
    prediction) capacities: on CPU, as many as keep the program's scratch memory within
    ``_SCRATCH_BUDGET``; elsewhere all.

    XLA:CPU allocates a program's scratch memory afresh on every call, and glibc serves
    blocks beyond its mmap threshold (at most 32 MiB) straight from the kernel, so every page
    the program touches is faulted in again on every call. The scratch of the larger rungs
    (hundreds of MB, even when they do not run) put every call of a Breakfast-sized batch
    there, the faults a large part of its time (``benchmarks/README.md``). Blocks cost time
    of their own, so they are as large as the budget allows. Other backends keep their
    memory in a pool.
    """
    if jax.default_backend() != "cpu":
        return None
    rows, T = shape
    # The frame pass's words, outside the blocks, take under a byte per frame.
    room = max(_SCRATCH_BUDGET - rows * T, _SCRATCH_BUDGET // 4)
    return max(1, room // _scratch_per_sequence(tables, T, background))


def _scratch_per_sequence(tables: tuple, T: int, background: tuple) -> int:
    """An upper estimate of one sequence's XLA:CPU scratch memory with segment ``tables`` of
    these capacities, in bytes.

    Measured with XLA's ``memory_analysis`` (jax 0.10, T = 500-30000): 87-100 bytes per row
    of the two tables' mean capacity (tables of 128 and 1024 rows take about as much as two
    of 576), 125-175 with background, and about one byte per frame; beyond 16384 frames (512
    words) the rows take about T / 40 bytes (T / 20 with background).
    """
    capacity = -(-sum(tables) // 2)
    per_row = 100 if T <= 16384 else T // 40 + 1
    if background:
        per_row *= 2
    return capacity * per_row + T


# Below glibc's largest mmap threshold (32 MiB).
_SCRATCH_BUDGET = 30 << 20


def _rung_capacities(words: PairWords, T: int):
    """The capacities (target, prediction, candidates) of each branch of the tables' ladder
    (:func:`_table_rungs`), the index of the smallest that holds every sequence's segments
    and candidate matches, and the index of the branch of T rows."""
    ladder = capacity_ladder(T, **_LADDER)
    index = _table_rung(
        ladder, words.target.starts.total, words.prediction.starts.total, words.matches.total
    )
    # As many candidates as two tables can have without background; with it they can have
    # more, and _table_rung chooses a rung that holds them.
    sizes = [(*t, candidate_bound(*t, ())) for t in _table_rungs(ladder)]
    return sizes, index, len(ladder) - 1


def _table_rungs(ladder: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """The (target, prediction) table capacities compiled for a capacity ``ladder``: each
    rung for both tables, then the smallest rung for the targets with each larger rung but
    the last for the predictions.

    Predictions split into many more segments than the targets have (a weak model, or one
    without smoothing) are the usual reason for a larger rung: there the target table stays
    as small as the targets need, and the candidate matches with it ((128 + c) / 2 of them;
    a batch with more, possible with background, takes the rung of both). Every rung
    compiles once more, so targets with many more segments than the predictions take the
    rung of both.

    >>> _table_rungs((128, 1024, 6000))
    ((128, 128), (1024, 1024), (6000, 6000), (128, 1024))
    """
    return (*((c, c) for c in ladder), *((ladder[0], c) for c in ladder[1:-1]))


def _table_rung(ladder: tuple[int, ...], target_counts, prediction_counts, match_counts):
    """Index into :func:`_table_rungs` of the smallest tables that hold every count, with
    room for the candidate matches: as many as two tables can have without background
    (:func:`~jaxseg._src.f1.candidate_bound`; on a rung of equal tables, their rows) (under
    ``jax.vmap``, the counts of all examples: :func:`~jaxseg._src.capacity.rung`)."""
    for_targets = rung(ladder, target_counts)
    for_predictions = rung(ladder, jnp.maximum(prediction_counts, match_counts))
    both = jnp.maximum(for_targets, for_predictions)
    last = len(ladder) - 1
    uneven_candidates = jnp.array([candidate_bound(ladder[0], c, ()) for c in ladder])
    uneven = (
        (for_targets == 0)
        & (for_predictions > 0)
        & (for_predictions < last)
        & (largest(match_counts) <= uneven_candidates[for_predictions])
    )
    return jnp.where(uneven, last + for_predictions, both)


# The tables' cost grows with their capacity: rungs 8x apart keep the compiled branches few.
_LADDER = dict(smallest=128, factor=8)


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
) -> SegmentationStatistics:
    """:func:`segmentation_statistics` for ``iou_thresholds`` (a tuple, or None: edit only).

    The arguments are validated here, and the computation is a program of its own per shape
    and static arguments: traced once for all the metrics of a user's ``jax.jit`` that share
    them (precision, recall and F1), and compiled whole under ``jax.vmap`` or ``jax.grad``
    outside ``jax.jit``, where the public functions run as they are.
    """
    targets, predictions = checks.label_pair(targets, predictions, bits=32)
    mask = checks.as_mask(mask, targets.shape)
    static = static_arguments(
        targets.shape[-1],
        iou_thresholds or (1.0,),
        background,
        max_target_segments,
        max_predicted_segments,
        legacy_asformer_end,
    )
    chosen = max_target_segments is not None or max_predicted_segments is not None
    capacities = ("target_capacity", "prediction_capacity", "candidate_capacity")
    return _statistics_program(
        targets,
        predictions,
        mask,
        thresholds=static["thresholds"] if iou_thresholds else (),
        background=static["background"],
        legacy_asformer_end=static["legacy_asformer_end"],
        capacities=tuple(static[k] for k in capacities) if chosen else None,
        ignore_index=checks.static_ignore_index(ignore_index),
    )


@functools.partial(
    jax.jit,
    static_argnames=(
        "thresholds",
        "background",
        "legacy_asformer_end",
        "capacities",
        "ignore_index",
    ),
)
def _statistics_program(targets, predictions, mask, *, capacities, ignore_index, **rule):
    """The statistics of validated labels ``[..., T]`` at static ``capacities`` (target,
    prediction, candidates), or at the capacities chosen per call when they are ``None``;
    frames whose target is ``ignore_index`` are removed like masked ones."""
    mask = checks.without_ignored(targets, mask, ignore_index)
    batch_shape, T = targets.shape[:-1], targets.shape[-1]
    flat = [None if x is None else jnp.reshape(x, (-1, T)) for x in (targets, predictions, mask)]
    # Under jax.vmap the mapped sequences join the batch: one rung (and one decision to
    # compact the masked frames) for all of them.
    of_rows = functools.partial(_statistics_of_rows, capacities=capacities, rule=rule)
    stats = rows_at_once(of_rows)(*flat)
    return jax.tree_util.tree_map(lambda x: jnp.reshape(x, (*batch_shape, *x.shape[1:])), stats)


def _statistics_of_rows(targets, predictions, mask, *, capacities, rule):
    """:func:`_statistics_program` of a flat batch ``[B, T]``.

    The frame pass runs once, before any branch: its words give the true counts that choose
    the capacities when they are not given (:func:`_rung_capacities`), and it is the pass
    that accuracy shares under one ``jax.jit``. A mask with a gap (not a prefix) takes the
    branch that moves the valid frames to the front first (a sort): at given capacities, a
    branch of its own; otherwise the last rung (tables of T rows).
    """
    T = max(targets.shape[-1], 1)
    if mask is None:
        lengths, mask_words = full_lengths(targets), None
    else:
        # The branches take the mask as words: a bool mask there would be materialised, an
        # array of the labels' size in the program's scratch memory (see _SCRATCH_BUDGET).
        lengths, is_prefix, mask_words = jax.vmap(mask_summary)(mask)
    words = _batch_words(targets, predictions, lengths, rule["background"])
    if capacities is None:
        sizes, index, compacting = _rung_capacities(words, T)
    else:
        # One branch for prefix masks, one that compacts masks with gaps.
        sizes = [capacities] if mask is None else [capacities, capacities]
        index, compacting = 0, 1
    if mask is not None:
        index = jnp.where(jnp.all(is_prefix), index, compacting)
    shape = (targets.shape[0], T)
    branches = [
        _at_capacities(c, shape, rule, compact=mask is not None and i == compacting)
        for i, c in enumerate(sizes)
    ]
    operands = (targets, predictions, lengths, words, mask_words)
    if len(branches) == 1:
        return branches[0](*operands)
    return lax.switch(index, branches, *operands)


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
      max_target_segments: static capacity of the target segment table, a memory bound.
        ``None`` (with ``max_predicted_segments`` ``None``): each call uses the smallest of a
        few static capacities (128, 1024, ..., T; target tables of 128 beside larger
        prediction tables) that holds the batch's segments, so it costs what the data needs
        and never truncates (under ``jax.vmap``, one capacity for all mapped sequences).
      max_predicted_segments: static capacity of the predicted segment table (``None``: as
        above, or T when ``max_target_segments`` is given).
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
        legacy_asformer_end=bool(legacy_asformer_end),
    )


def _nan_if(overflow, value):
    overflow = jnp.reshape(overflow, overflow.shape + (1,) * (value.ndim - overflow.ndim))
    return jnp.where(overflow, jnp.nan, value)


def _counts(
    targets, predictions, mask, iou_thresholds, background, capacities, legacy, ignore_index
):
    """``(tp, fp, fn)`` float32 ``[..., K]`` of :func:`segmental_counts` (NaN on overflow)."""
    stats = _statistics(
        targets, predictions, mask, iou_thresholds, background, *capacities, legacy, ignore_index
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
      max_target_segments: static capacity of the target segment table, a memory bound
        (overflow gives NaN). ``None`` (with ``max_predicted_segments`` ``None``): each call
        uses the smallest of a few static capacities that holds the batch's segments (under
        ``jax.vmap``, of all mapped sequences), exact for any input.
      max_predicted_segments: the same for the predictions (``None``: T when
        ``max_target_segments`` is given).
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
        targets, predictions, mask, None, background, *capacities, False, ignore_index
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
      ``eval.py`` returns NaN there and kage1020's evaluator 0.0); NaN where a segment
      capacity overflowed.

    >>> float(edit_score([1, 1, 2, 2, 3], [1, 2, 2, 4, 3]))
    0.75

    References:
      Lea et al., Segmental spatiotemporal CNNs for fine-grained action segmentation,
      ECCV 2016; Abu Farha & Gall, MS-TCN, CVPR 2019 (``eval.py``).
    """
    capacities = (max_target_segments, max_predicted_segments)
    stats = _statistics(
        targets, predictions, mask, None, background, *capacities, False, ignore_index
    )
    score = edit_score_from_distance(
        stats.edit_distance, stats.target_segments, stats.predicted_segments
    )
    return _nan_if(stats.overflow, score)


@one_program
@renamed_arguments(overlaps="iou_thresholds")
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


@one_program
@renamed_arguments(overlaps="iou_thresholds")
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


@one_program
@renamed_arguments(overlaps="iou_thresholds")
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


@one_program
@renamed_arguments(overlaps="iou_thresholds")
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
