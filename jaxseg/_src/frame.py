"""Frame-level metrics: accuracy (MoF) and the confusion-matrix family.

The confusion matrix and the per-class totals are counted per run of the pair of labels
(:func:`sum_over_runs`: :func:`confusion_by_runs`, :func:`class_totals_by_runs`), beside
their frame-by-frame definitions (:func:`count_pairs`, :func:`count_classes`), which the
tests hold them to.
"""

from __future__ import annotations

import functools
import operator

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxseg._src import checks
from jaxseg._src.batching import any_example, largest, lift, rows_per_step
from jaxseg._src.numerics import (
    count_ratio,
    count_set_bits,
    nanmean,
    pairwise_sum,
    safe_divide,
)
from jaxseg._src.programs import one_program
from jaxseg._src.segments import (
    WORD_BITS,
    IndexedBits,
    bits_before,
    index_bits,
    pack_bits,
    pair_flags,
    previous_frame,
    select_ranks,
    valid_words,
)

AVERAGES = ("micro", "macro", "weighted", "none")


def _frame_inputs(targets, predictions, mask, ignore_index):
    targets, predictions = checks.label_pair(targets, predictions)
    mask = checks.as_mask(mask, targets.shape)
    mask = checks.without_ignored(targets, mask, checks.static_ignore_index(ignore_index))
    if mask is None:
        mask = jnp.ones(targets.shape, jnp.bool_)
    return checks.with_a_frame(targets, predictions, mask)


@one_program
def accuracy(targets, predictions, *, mask=None, ignore_index=None) -> jax.Array:
    """Frame accuracy (mean over frames, "MoF") of each sequence.

    ``accuracy = #{valid t : predictions[t] == targets[t]} / #{valid t}``

    Args:
      targets: integer ``[..., T]`` true labels.
      predictions: integer ``[..., T]`` predicted labels.
      mask: optional bool ``[..., T]``, True = valid frame; default None: every frame.
      ignore_index: optional static int (default None): frames whose target equals it are
        removed like masked ones (PyTorch-style padding such as -100, or 255).

    Returns:
      float32 ``[...]`` in [0, 1]; NaN for a sequence without valid frames. Background frames
      count like any other (as in MS-TCN); dataset-level accuracy pools frames over videos
      (``jaxseg.streaming``), it is not the mean of these values.

    >>> float(accuracy([0, 1, 1, 2], [0, 1, 2, 2]))
    0.75
    >>> float(accuracy([0, 1, -100, -100], [0, 2, 0, 0], ignore_index=-100))
    0.5

    References:
      Abu Farha & Gall, MS-TCN, CVPR 2019 (``eval.py``).
    """
    targets, predictions, mask = _frame_inputs(targets, predictions, mask, ignore_index)
    correct, frames = lift(_correct_and_valid_frames, (targets, predictions, mask), (1, 1, 1))
    return count_ratio(correct, frames, jnp.nan)


def _correct_and_valid_frames(targets, predictions, mask):
    """int32 counts of one sequence's correct valid frames and valid frames.

    The flags are packed 32 frames to a word and counted by popcount: a plain sum over the
    boolean frames is several times slower on CPU (it widens every flag to an integer). The
    agreement words are those of the segmental metrics' frame pass (:func:`pair_flags`), so
    that accuracy computed beside them under one ``jax.jit`` costs no pass of its own.
    """
    agree = pair_flags(targets, predictions)[2]
    valid = pack_bits(mask)
    return count_set_bits(agree & valid), count_set_bits(valid)


def _labels_within_classes(arguments: dict) -> None:
    """Host check of the class metrics: on every valid frame (not masked, its target not
    ``ignore_index``), ``targets`` and ``predictions`` in ``[0, num_classes)``. The confusion
    matrix leaves such a frame out, so a prediction outside, which scikit-learn's
    ``labels=range(C)`` counts as a miss, raised the recall (``[0, 0, 0, 1]`` predicted as
    ``[0, 2, 2, 1]``: 1.0 for 1/3)."""
    targets = np.asarray(arguments["targets"])
    mask, ignore_index = arguments["mask"], arguments["ignore_index"]
    valid = np.ones(targets.shape, bool) if mask is None else np.asarray(mask)
    if ignore_index is not None:
        valid = valid & (targets.astype(np.int64) != ignore_index)
    for name in ("targets", "predictions"):
        checks.host_labels_within_classes(
            name,
            arguments[name],
            valid,
            arguments["num_classes"],
            classes="num_classes",
            hint="raise num_classes, or leave the frame out with mask or ignore_index",
        )


@one_program(host_check=_labels_within_classes)
def confusion_matrix(
    targets, predictions, *, num_classes: int, mask=None, ignore_index=None
) -> jax.Array:
    """Confusion matrix of each sequence: ``cm[i, j]`` = frames of class i predicted as j.

    Counted per run of the pair of labels: the cost follows the number of label changes, not
    of frames.

    Args:
      targets: integer ``[..., T]`` true labels in ``[0, num_classes)``.
      predictions: integer ``[..., T]`` predicted labels in ``[0, num_classes)``.
      num_classes: static number of classes C.
      mask, ignore_index: as in :func:`accuracy`.

    Returns:
      int32 ``[..., C, C]``, rows = targets, columns = predictions (as scikit-learn). Labels
      outside ``[0, C)`` on a valid frame are a precondition violation: called outside jit
      they raise ``ValueError``; inside jit they are not checked (such frames are left out
      of the matrix, and of the scores of :func:`precision`, :func:`recall`, ...).

    >>> confusion_matrix([0, 1, 1], [0, 1, 0], num_classes=2).tolist()
    [[1, 0], [1, 1]]
    """
    num_classes = checks.static_int("num_classes", num_classes, minimum=1)
    targets, predictions, mask = _frame_inputs(targets, predictions, mask, ignore_index)
    batch_shape, T = targets.shape[:-1], targets.shape[-1]
    rows = [jnp.reshape(x, (-1, T)) for x in (targets, predictions, mask)]
    matrices = _confusion_of_rows(*rows, num_classes)
    return jnp.reshape(matrices, (*batch_shape, num_classes, num_classes))


@functools.partial(jax.jit, static_argnums=3)
def _confusion_of_rows(targets, predictions, mask, num_classes: int):
    """:func:`confusion_by_runs` of rows ``[B, T]``, one matrix per row: a program of its own,
    so that the frame metrics of one ``jax.jit`` (precision, recall, F1, class accuracy) share
    its trace and its lowering rather than each compiling a copy."""
    return confusion_by_runs(targets, predictions, mask, num_classes, pooled=False)


def count_pairs(targets, predictions, counts, num_classes: int) -> jax.Array:
    """Sums ``counts`` into an int32 ``[C, C]`` matrix at ``(targets, predictions)``: the
    confusion matrix as its definition states it, one update per frame (the plain
    specification of :func:`confusion_by_runs`).

    Pairs with a label outside ``[0, C)`` are left out (never aliased into another cell).
    """
    inside = checks.in_label_range(targets, num_classes)
    inside = inside & checks.in_label_range(predictions, num_classes)
    t, p = targets.astype(jnp.int32), predictions.astype(jnp.int32)
    cell = jnp.where(inside, t * num_classes + p, num_classes * num_classes)
    matrix = jnp.zeros(num_classes * num_classes, jnp.int32)
    # out_sharding: on an explicitly sharded batch the sum is replicated, like the matrix.
    matrix = matrix.at[cell.reshape(-1)].add(
        counts.reshape(-1), mode="drop", out_sharding=jax.typeof(matrix).sharding
    )
    return matrix.reshape(num_classes, num_classes)


def count_classes(targets, predictions, counts, num_classes: int) -> jax.Array:
    """Sums ``counts`` into int32 ``[3, C]`` per-class totals, one update per frame: the
    frames of each target class (support), of each predicted class, and of each class both
    agree on (the plain specification of :func:`class_totals_by_runs`; the confusion matrix's
    row sums, column sums and diagonal where both labels lie in ``[0, C)``).

    A label outside ``[0, C)`` is left out of its own total (never aliased into a class).
    """
    t_in = checks.in_label_range(targets, num_classes)
    p_in = checks.in_label_range(predictions, num_classes)
    t, p = targets.astype(jnp.int32), predictions.astype(jnp.int32)
    drop = 3 * num_classes
    cells = [
        jnp.where(t_in, t, drop),
        jnp.where(p_in, num_classes + p, drop),
        jnp.where(t_in & (targets == predictions), 2 * num_classes + t, drop),
    ]
    totals = jnp.zeros(drop, jnp.int32)
    for cell in cells:
        totals = totals.at[cell.reshape(-1)].add(counts.reshape(-1), mode="drop")
    return totals.reshape(3, num_classes)


# Sequences of more words are cut into pieces of at most this many (confusion_by_runs).
_PIECE_WORDS = 1 << 10


def _run_start_words(targets, predictions, mask):
    """uint32 ``[W]`` words of one sequence ``[T]``: the valid frames where a run of its pair
    of labels starts (a label changes, or the frame before is not valid), and the valid
    frames."""
    changes_t, changes_p, _ = pair_flags(targets, predictions)
    valid = pack_bits(mask)
    return (changes_t | changes_p | ~previous_frame(valid)) & valid, valid


def _in_pieces(words, pieces: int):
    """uint32 ``[B, W]`` as ``[B * pieces, W']``, each row cut in ``pieces`` (padded with 0)."""
    if pieces == 1:
        return words
    width = -(-words.shape[-1] // pieces)
    words = jnp.pad(words, ((0, 0), (0, pieces * width - words.shape[-1])))
    return words.reshape(-1, width)


def _piece_runs(starts, valid):
    """The runs of one piece's words: :class:`IndexedBits` of their starts (the piece's
    first frame starts one if valid: a run cut by the piece's start), the number of valid
    frames, and whether these are a prefix of the piece."""
    starts = starts.at[0].set(starts[0] | (valid[0] & 1))
    total = count_set_bits(valid)
    return index_bits(starts), total, jnp.all(valid == valid_words(total, valid.shape[-1]))


def _labels_at(labels, frames):
    """``labels [B, T]`` of each row at its ``frames [B, R]``."""
    return jax.vmap(lambda x, i: x[i])(labels, frames)


def _run_bounds(runs: IndexedBits, valid, total, ranks, gaps):
    """First frame, valid frames and presence of one piece's runs of consecutive ``ranks [R]``;
    ``gaps`` (bool scalar) says whether any piece's valid frames (words ``valid``, ``total``
    of them) have gaps.

    A run's frames are the valid frames from its start to the next run's (the first valid
    frame after a gap starts a run), counted as ranks among the valid frames, which for a
    prefix are the frames themselves. Only a batch with gaps indexes the valid frames (in
    every step: cheaper than an index that the usual prefix masks would compute unread).
    """
    count, frames = runs.total, runs.words.shape[-1] * WORD_BITS
    wanted = jnp.concatenate([ranks, ranks[-1:] + 1])  # the next run starts where one ends
    bounds = select_ranks(runs, jnp.clip(wanted, 0, jnp.maximum(count - 1, 0)))
    rows = ranks.shape[0]
    start = bounds[:rows]
    bounds = jnp.concatenate([start, jnp.where(ranks + 1 < count, bounds[1:], frames)])
    prefix = lambda f: jnp.minimum(f, total)  # noqa: E731
    ranked = lambda f: bits_before(index_bits(valid), f)  # noqa: E731
    positions = lax.cond(gaps, ranked, prefix, bounds)
    return start, positions[rows:] - positions[:rows], ranks < count


def sum_over_runs(targets, predictions, mask, cells_of, size: int):
    """int32 ``[size]``: the frames of every run of the pair of labels of rows ``[B, T]``
    added to the cells that ``cells_of(row, t, p)`` gives it (a list of int32 arrays shaped
    like the labels ``t``, ``p`` at the runs' starts; a cell of ``size`` or more is left out).

    A run of the pair (target, prediction) is a stretch of valid frames where neither label
    changes: its frames all fall in the same cells. The runs' starts are bit-packed by the
    frame pass that accuracy shares (:func:`pair_flags`); a sequence longer than
    ``_PIECE_WORDS`` words is cut into pieces side by side (a run that a cut splits falls
    in the same cells all the same), since selecting a set bit costs about the square root
    of the words searched. The runs are selected
    :func:`~jaxseg._src.batching.rows_per_step` per piece per step of a loop that runs as
    many steps as the most runs of a piece need.
    """
    sequences, T = targets.shape
    if sequences == 0:  # no run: nothing to add (and no rows to reshape the steps into)
        return jnp.zeros(size, jnp.int32)
    starts, valid = jax.vmap(_run_start_words)(targets, predictions, mask)
    pieces = -(-starts.shape[-1] // _PIECE_WORDS)
    starts, valid = _in_pieces(starts, pieces), _in_pieces(valid, pieces)
    runs, total, is_prefix = jax.vmap(_piece_runs)(starts, valid)
    gaps = any_example(~is_prefix)
    row = jnp.arange(starts.shape[0], dtype=jnp.int32) // pieces
    first_frame = (
        jnp.arange(starts.shape[0], dtype=jnp.int32) % pieces * (starts.shape[-1] * WORD_BITS)
    )
    step_rows = rows_per_step(starts.shape[0])

    def step(i, sums):
        ranks = i * step_rows + jnp.arange(step_rows, dtype=jnp.int32)
        bounds = functools.partial(_run_bounds, ranks=ranks, gaps=gaps)
        start, frames, used = jax.vmap(bounds)(runs, valid, total)
        # The labels at the runs' first frames, gathered row by row (a row's pieces together).
        frame = jnp.minimum(first_frame[:, None] + start, T - 1).reshape(sequences, -1)
        t, p = (_labels_at(x, frame).reshape(start.shape) for x in (targets, predictions))
        cells = [jnp.where(used, c, size) for c in cells_of(row[:, None], t, p)]
        # out_sharding: on an explicitly sharded batch the sums stay replicated.
        return sums.at[jnp.concatenate([c.reshape(-1) for c in cells])].add(
            jnp.tile(frames.reshape(-1), len(cells)),
            mode="drop",
            out_sharding=jax.typeof(sums).sharding,
        )

    steps = -(-largest(runs.total) // step_rows)
    # Zeros derived from the data vary like it (under shard_map, a shard's own counts).
    zeros = jnp.zeros(size, jnp.int32) + jnp.sum(runs.total & 0, dtype=jnp.int32)
    return lax.fori_loop(0, steps, step, zeros)


def confusion_by_runs(targets, predictions, mask, num_classes: int, *, pooled: bool):
    """The confusion matrices of rows ``[B, T]`` from the runs of their pairs of labels
    (:func:`sum_over_runs`): :func:`count_pairs` of the valid frames, equal to it, with one
    update per run rather than per frame.

    Args:
      targets, predictions: integer ``[B, T]`` labels; a label outside ``[0, C)`` is left
        out (as in :func:`count_pairs`).
      mask: bool ``[B, T]``, True = valid frame (gaps anywhere).
      num_classes: static C.
      pooled: static: one matrix of all rows, or one per row.

    Returns:
      int32 ``[C, C]`` (``pooled``) or ``[B, C, C]``: frames of class i predicted as j.
    """
    C, sequences = num_classes, targets.shape[0]
    size = C * C if pooled else sequences * C * C

    def cells_of(row, t, p):
        inside = checks.in_label_range(t, C) & checks.in_label_range(p, C)
        cell = t.astype(jnp.int32) * C + p.astype(jnp.int32)
        return [jnp.where(inside, cell + (0 if pooled else row * (C * C)), size)]

    matrices = sum_over_runs(targets, predictions, mask, cells_of, size)
    return matrices.reshape((C, C) if pooled else (sequences, C, C))


def class_totals_by_runs(targets, predictions, mask, num_classes: int):
    """The per-class totals of rows ``[B, T]`` from the runs of their pairs of labels
    (:func:`sum_over_runs`): :func:`count_classes` of the valid frames, equal to it, with
    one update per run and total rather than per frame.

    Args:
      targets, predictions: integer ``[B, T]`` labels; a label outside ``[0, C)`` is left
        out of its own total (as in :func:`count_classes`).
      mask: bool ``[B, T]``, True = valid frame (gaps anywhere).
      num_classes: static C.

    Returns:
      int32 ``[B, 3, C]``: each row's frames of every target class, of every predicted
      class, and of every class both agree on.
    """
    C, sequences = num_classes, targets.shape[0]
    size = sequences * 3 * C

    def cells_of(row, t, p):
        t_in, p_in, agree = checks.in_label_range(t, C), checks.in_label_range(p, C), t == p
        base, t, p = row * (3 * C), t.astype(jnp.int32), p.astype(jnp.int32)
        return [
            jnp.where(t_in, base + t, size),
            jnp.where(p_in, base + C + p, size),
            jnp.where(t_in & agree, base + 2 * C + t, size),
        ]

    totals = sum_over_runs(targets, predictions, mask, cells_of, size)
    return totals.reshape(sequences, 3, C)


def class_totals(targets, predictions, mask, num_classes: int) -> jax.Array:
    """int32 ``[..., 3, C]``: :func:`class_totals_by_runs` of sequences ``[..., T]``
    (validated here; ``mask`` None: every frame is valid)."""
    num_classes = checks.static_int("num_classes", num_classes, minimum=1)
    targets, predictions, mask = _frame_inputs(targets, predictions, mask, None)
    batch_shape, T = targets.shape[:-1], targets.shape[-1]
    rows = [jnp.reshape(x, (-1, T)) for x in (targets, predictions, mask)]
    totals = class_totals_by_runs(*rows, num_classes)
    return jnp.reshape(totals, (*batch_shape, 3, num_classes))


# ------------------------------------------------------------------------------------------
# Everything below works on confusion matrices [..., C, C] (per sequence or summed).


def _class_counts(cm):
    """``(tp, support, predicted)`` float32 ``[..., C]``: the diagonal, the target frames
    (row sums) and the predicted frames (column sums) of confusion matrices."""
    cm = cm.astype(jnp.float32)
    return jnp.diagonal(cm, axis1=-2, axis2=-1), jnp.sum(cm, axis=-1), jnp.sum(cm, axis=-2)


def score_fraction(score: str, tp, support, predicted, *, add=operator.add, subtract=operator.sub):
    """Numerator and denominator of a class's precision, recall, F1 or IoU from its counts:
    ``TP / predicted``, ``TP / support``, ``2 TP / (support + predicted)`` and
    ``TP / (support + predicted - TP)``; ``add`` and ``subtract`` work on the counts' type."""
    if score == "precision":
        return tp, predicted
    if score == "recall":
        return tp, support
    both = add(support, predicted)
    return (add(tp, tp), both) if score == "f1" else (tp, subtract(both, tp))


def average_over_classes(per_class, support, micro, average: str):
    """The ``average`` (DESIGN's four) of per-class scores ``[..., C]`` (NaN: undefined,
    left out), weighted by ``support`` for ``"weighted"``; ``micro`` is the pooled score."""
    if average == "none":
        return per_class
    if average == "micro":
        return micro
    if average == "macro":
        return nanmean(per_class)
    defined = ~jnp.isnan(per_class)
    weights = jnp.where(defined, support, 0.0)
    values = jnp.where(defined, per_class, 0.0)
    return safe_divide(pairwise_sum(weights * values), jnp.sum(weights, -1), jnp.nan)


def scores_from_confusion(cm, score: str, average: str) -> jax.Array:
    """Precision, recall, F1 or IoU (``score``) from confusion matrices ``[..., C, C]``.

    A class absent from both targets and predictions is NaN and left out of the means; any
    other undefined ratio is 0 (scikit-learn's ``zero_division=0``). Each ratio is correctly
    rounded for counts below 2**24 (``streaming`` divides larger ones exactly).
    """
    tp, support, predicted = _class_counts(cm)
    per_class = safe_divide(*score_fraction(score, tp, support, predicted), 0.0)
    per_class = jnp.where(support + predicted == 0, jnp.nan, per_class)
    micro = safe_divide(jnp.sum(tp, -1), jnp.sum(support, -1), jnp.nan)
    return average_over_classes(per_class, support, micro, average)


def _score(score, targets, predictions, num_classes, mask, average, ignore_index):
    average = checks.static_choice("average", average, AVERAGES)
    cm = confusion_matrix(
        targets, predictions, num_classes=num_classes, mask=mask, ignore_index=ignore_index
    )
    return scores_from_confusion(cm, score, average)


@one_program(host_check=_labels_within_classes)
def precision(
    targets, predictions, *, num_classes: int, mask=None, average="macro", ignore_index=None
) -> jax.Array:
    """Frame-level precision of each sequence.

    Per class c, with TP, FP and FN counted over the valid frames of one sequence:
    ``precision_c = TP / (TP + FP)``. A class absent from both targets and predictions is NaN
    and excluded from the means; any other 0/0 is 0 (scikit-learn's ``zero_division=0``).

    Args:
      targets, predictions, num_classes, mask, ignore_index: as in :func:`confusion_matrix`.
      average: static, default ``"macro"``: the mean over the defined classes; ``"none"``:
        per class ``[..., C]``; ``"weighted"``: mean weighted by target frames (support);
        ``"micro"``: from pooled counts, which for single-label frames equals accuracy.

    Returns:
      float32 ``[...]`` (``[..., C]`` for ``average="none"``) in [0, 1], NaN where undefined.

    >>> print(precision([0, 0, 1, 1], [0, 1, 1, 1], num_classes=3, average="none"))
    [1.        0.6666667       nan]

    References:
      scikit-learn ``precision_score`` (``average``, ``zero_division=0``).
    """
    return _score("precision", targets, predictions, num_classes, mask, average, ignore_index)


@one_program(host_check=_labels_within_classes)
def recall(
    targets, predictions, *, num_classes: int, mask=None, average="macro", ignore_index=None
) -> jax.Array:
    """Frame-level recall of each sequence.

    ``recall_c = TP / (TP + FN)`` per class c; absent classes, 0/0 and the averages as in
    :func:`precision`.

    Args:
      targets, predictions, num_classes, mask, ignore_index, average: as in :func:`precision`.

    Returns:
      float32 ``[...]`` (``[..., C]`` for ``average="none"``) in [0, 1], NaN where undefined.

    >>> float(recall([0, 0, 1, 1], [0, 1, 1, 1], num_classes=3))
    0.75

    References:
      scikit-learn ``recall_score``.
    """
    return _score("recall", targets, predictions, num_classes, mask, average, ignore_index)


@one_program(host_check=_labels_within_classes)
def f1_score(
    targets, predictions, *, num_classes: int, mask=None, average="macro", ignore_index=None
) -> jax.Array:
    """Frame-level F1 score of each sequence.

    ``f1_c = 2 TP / (2 TP + FP + FN)`` per class c; absent classes, 0/0 and the averages as in
    :func:`precision`.

    Args:
      targets, predictions, num_classes, mask, ignore_index, average: as in :func:`precision`.

    Returns:
      float32 ``[...]`` (``[..., C]`` for ``average="none"``) in [0, 1], NaN where undefined.

    >>> round(float(f1_score([0, 0, 1, 1], [0, 1, 1, 1], num_classes=2, average="weighted")), 4)
    0.7333

    References:
      scikit-learn ``f1_score``.
    """
    return _score("f1", targets, predictions, num_classes, mask, average, ignore_index)


@one_program(host_check=_labels_within_classes)
def class_accuracy(
    targets, predictions, *, num_classes: int, mask=None, ignore_index=None
) -> jax.Array:
    """Per-class accuracy: the fraction of each class's frames predicted correctly.

    This is per-class recall, ``cm[c, c] / sum_j cm[c, j]``. A class absent from both targets
    and predictions is NaN; a class only predicted scores 0 (as in mmaction2's
    ``mean_class_accuracy`` and the classic evaluator). The mean class accuracy is
    ``recall(..., average="macro")``.

    Args:
      targets, predictions, num_classes, mask, ignore_index: as in :func:`confusion_matrix`.

    Returns:
      float32 ``[..., C]`` in [0, 1] or NaN.

    >>> class_accuracy([0, 0, 1, 1], [0, 2, 1, 1], num_classes=4).tolist()
    [0.5, 1.0, 0.0, nan]
    """
    return _score("recall", targets, predictions, num_classes, mask, "none", ignore_index)
