"""Unsupervised action segmentation: Hungarian-matched MoF, IoU and F1 in the field's protocols.

Predictions are cluster ids; each protocol first matches clusters to classes one-to-one (the
Hungarian algorithm on a (class, cluster) contingency table), then scores the matched labels.
Three protocols are in use, and they give different numbers on the same predictions:

* **global** (CTE, Kukleva et al. 2019, ``ute``): one matching over all videos of a set
  (an activity), on a square table; optionally the background label -1 is forced onto the
  cluster -1 and left out of the denominators. :func:`global_hungarian_scores`.
* **per video** (TW-FINCH, Sarfraz et al. 2021): one matching per video. MoF, IoU (the sum
  of per-label Jaccard divided by the number of clusters) and macro F1 per video; the dataset
  value is their mean. :func:`per_video_hungarian_scores`.
* **ASOT** (Xu & Gould 2024, ``src/metrics.py``): a rectangular matching, "full" over all
  videos of a set or "per" video. :func:`asot_hungarian_scores`.

Label conventions of the three references' data: targets in ``[-1, C)`` with -1 the
background, predictions in ``[-1, K)`` with -1 a "background cluster" (CTE produces it).
Internally every table is indexed by ``label + 1``. The matchings call
:func:`~jaxseg._src.assignment.match_block` on exactly the tables the references hand to
scipy (only the labels that occur, in sorted order), so ties are broken as there.

CTE and ASOT score F1 on frames drawn at random (15 per ground-truth run, 50 repetitions).
Here F1 is the deterministic limit of their procedures: CTE's expected number of correct
samples per run is the run's fraction of correct frames; ASOT's run is a hit with the
probability that at least 8 of 15 uniform draws are correct. The references' values scatter
around these (a few hundredths on short sets) and depend on numpy's global random state.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxseg._src import checks
from jaxseg._src.assignment import compact as compact_labels
from jaxseg._src.assignment import float_dtype, match_block
from jaxseg._src.batching import lift
from jaxseg._src.frame import sum_over_runs
from jaxseg._src.numerics import divide, running_sum, safe_divide
from jaxseg._src.programs import one_program

F1_EPS = 1e-8  # the references' epsilon in F1 = 2PR / (P + R + eps)
SAMPLES_PER_RUN = 15  # frames drawn per ground-truth run by CTE and ASOT
EXPERIMENTS = 50  # repetitions of the draw in CTE and ASOT
ASOT_MODES = ("full", "per")


# ------------------------------------------------------------------------------------------
# Inputs and tables


def _inputs(targets, predictions, mask, num_classes, num_clusters):
    num_classes = checks.static_int("num_classes", num_classes, minimum=1)
    num_clusters = checks.static_int("num_clusters", num_clusters, minimum=1)
    targets, predictions = checks.label_pair(targets, predictions)
    mask = checks.as_mask(mask, targets.shape)
    if mask is None:
        mask = jnp.ones(targets.shape, jnp.bool_)
    return targets, predictions, mask, num_classes, num_clusters


def _labels_within(arguments: dict) -> None:
    """Host check of the protocols: on every valid frame, ``targets`` in ``[-1,
    num_classes)`` and ``predictions`` in ``[-1, num_clusters)``. The tables leave such a
    frame out, which would score the remaining frames as if it did not exist. And the
    divisors ``segments_per_video`` / ``iou_divisor`` at least 1 (-2 gave F1 -2.0)."""
    for name in ("segments_per_video", "iou_divisor"):
        value = arguments.get(name)
        if value is not None and (np.asarray(value) < 1).any():
            small = np.asarray(value)
            where = checks.first_index(small < 1)
            raise ValueError(
                f"{name} must be at least 1, got {small[where]}"
                + (f" at index {where}." if where else ".")
            )
    valid = True if arguments["mask"] is None else np.asarray(arguments["mask"])
    for name, option in (("targets", "num_classes"), ("predictions", "num_clusters")):
        checks.host_labels_within_classes(
            name,
            arguments[name],
            valid,
            arguments[option],
            classes=option,
            hint=f"raise {option}, or leave the frame out with mask",
            lowest=-1,
        )


def _index(labels, upper: int):
    """``(labels + 1, inside)``: int32 table indices, and whether each label lies in
    ``[-1, upper)``. The range is tested in the labels' own dtype: a 64-bit label narrowed to
    int32 first would wrap onto a label inside it (``2**32 + 1`` onto 1)."""
    inside = checks.at_least(labels, -1) & ~checks.at_least(labels, upper)
    return labels.astype(jnp.int32) + 1, inside


def shifted_labels(targets, predictions, mask, num_classes, num_clusters):
    """``(rows, cols, keep)``: table indices ``label + 1`` and the frames that count.

    A frame counts if it is valid and both labels lie in ``[-1, C)`` and ``[-1, K)``.
    """
    rows, rows_inside = _index(targets, num_classes)
    cols, cols_inside = _index(predictions, num_clusters)
    return rows, cols, mask & rows_inside & cols_inside


def pair_table(rows, cols, keep, num_rows, num_cols):
    """int32 ``[num_rows, num_cols]``: number of kept frames at each ``(row, col)``, one
    update per frame (the plain specification of :func:`label_tables`)."""
    bins = num_rows * num_cols
    cells = jnp.where(keep, rows * num_cols + cols, bins).reshape(-1)
    counts = jnp.zeros(bins + 1, jnp.int32)
    # out_sharding: on an explicitly sharded batch the counts are replicated (as frame.py).
    counts = counts.at[cells].add(
        1, mode="promise_in_bounds", out_sharding=jax.typeof(counts).sharding
    )
    return counts[:bins].reshape(num_rows, num_cols)


def label_tables(targets, predictions, mask, num_classes: int, num_clusters: int, *, pooled):
    """int32 ``[..., C + 1, K + 1]`` (``pooled``: one ``[C + 1, K + 1]`` for all): the
    valid frames of each sequence ``[..., T]`` at each (target + 1, prediction + 1), as
    :func:`pair_table` of :func:`shifted_labels` counts them, equal to it, with one update
    per run of the pair of labels rather than per frame
    (:func:`~jaxseg._src.frame.sum_over_runs`).
    """
    rows, cols = num_classes + 1, num_clusters + 1
    targets, predictions, mask = checks.with_a_frame(targets, predictions, mask)
    batch, T = targets.shape[:-1], targets.shape[-1]
    flat = [jnp.reshape(x, (-1, T)) for x in (targets, predictions, mask)]
    size = rows * cols * (1 if pooled else flat[0].shape[0])

    def cells_of(sequence, t, p):
        (t, t_inside), (p, p_inside) = _index(t, num_classes), _index(p, num_clusters)
        offset = 0 if pooled else sequence * (rows * cols)
        return [jnp.where(t_inside & p_inside, offset + t * cols + p, size)]

    tables = sum_over_runs(*flat, cells_of, size)
    return jnp.reshape(tables, (rows, cols) if pooled else (*batch, rows, cols))


@one_program
def contingency_table(targets, predictions, *, num_classes: int, num_clusters: int, mask=None):
    """Contingency table of each sequence: frames of class i predicted as cluster j.

    ``table[i, j] = #{valid t : targets[t] == i and predictions[t] == j}``

    Args:
      targets: integer ``[..., T]`` class labels in ``[0, num_classes)``.
      predictions: integer ``[..., T]`` cluster ids in ``[0, num_clusters)``.
      num_classes: static number of classes C (rows).
      num_clusters: static number of clusters K (columns), may differ from C.
      mask: optional bool ``[..., T]``, True = valid frame.

    Returns:
      int32 ``[..., C, K]``. Frames with a label outside the ranges are left out. Sum the
      tables of several videos (or batches, or devices) for the table of the whole set.

    >>> contingency_table([0, 0, 1, 1], [2, 2, 2, 0], num_classes=2, num_clusters=3).tolist()
    [[0, 0, 2], [1, 0, 1]]

    References:
      Kukleva et al., Unsupervised learning of action classes with continuous temporal
      embedding, CVPR 2019 (the "voting table" of ``ute/eval_utils/accuracy_class.py``).
    """
    targets, predictions, mask, C, K = _inputs(
        targets, predictions, mask, num_classes, num_clusters
    )

    return label_tables(targets, predictions, mask, C, K, pooled=False)[..., 1:, 1:]


# ------------------------------------------------------------------------------------------
# Runs of equal target labels on a sequence of kept frames (for the sampled F1 scores)


def _packed(flags):
    """bool ``[N]`` as uint32 words ``[W]`` (bit j of word w = entry 32 w + j)."""
    words = -(-flags.shape[0] // 32)
    bits = jnp.pad(flags, (0, words * 32 - flags.shape[0])).reshape(words, 32)
    shifts = jnp.arange(32, dtype=jnp.uint32)
    return jnp.sum(bits.astype(jnp.uint32) << shifts[None, :], axis=1, dtype=jnp.uint32)


def running_count(flags):
    """Inclusive running count of bool ``flags [N]`` (int32), through bit-packed words.

    Packing 32 flags per word leaves a running sum over N / 32 word counts; each entry then
    adds the set bits of its word up to itself. On CPU this is several times faster than a
    running sum over N entries.
    """
    packed = _packed(flags)
    per_word = lax.population_count(packed).astype(jnp.int32)
    before = running_sum(per_word, largest=32) - per_word
    shifts = jnp.arange(32, dtype=jnp.uint32)
    upto = (jnp.uint32(2) << shifts) - jnp.uint32(1)  # bits 0..j (all 32 for j = 31)
    within = lax.population_count(packed[:, None] & upto[None, :]).astype(jnp.int32)
    return (before[:, None] + within).reshape(-1)[: flags.shape[0]]


def previous_kept(keep):
    """int32 ``[N]``: index of the last kept entry before each entry (-1 if none).

    The highest set bit below the entry in its own word, else the last kept entry of the
    earlier words (a running max over N / 32 words only).
    """
    N = keep.shape[0]
    packed = _packed(keep)
    W = packed.shape[0]
    base = 32 * jnp.arange(W, dtype=jnp.int32)
    below = packed[:, None] & ((jnp.uint32(1) << jnp.arange(32, dtype=jnp.uint32)) - 1)[None, :]
    highest = 31 - lax.clz(below).astype(jnp.int32)
    last = jnp.where(packed != 0, base + 31 - lax.clz(packed).astype(jnp.int32), -1)
    earlier = jnp.concatenate([jnp.full(1, -1, jnp.int32), lax.cummax(last)[:-1]])
    out = jnp.where(below != 0, base[:, None] + highest, earlier[:, None])
    return out.reshape(-1)[:N]


def runs(labels, keep):
    """Runs of equal ``labels`` over the kept entries of a sequence (other entries skipped).

    Returns ``(start, run, previous)``: bool ``[N]`` marks of each run's first entry, int32
    ``[N]`` run index of each entry (non-decreasing; an entry that is not kept carries the
    index of the last run before it, or 0), and :func:`previous_kept`.
    """
    previous = previous_kept(keep)
    start = keep & ((previous < 0) | (labels[jnp.maximum(previous, 0)] != labels))
    run = jnp.maximum(running_count(start) - 1, 0)
    return start, run, previous


def run_sums(values, run, num_runs: int):
    """Sums of int32 ``values [N, M]`` per run (:func:`runs`), ``[num_runs, M]``."""
    return jax.ops.segment_sum(values, run, num_segments=num_runs, indices_are_sorted=True)


def majority_probability(p, samples: int = SAMPLES_PER_RUN):
    """``P(X > samples / 2)`` for ``X ~ Binomial(samples, p)``: ASOT's hit probability."""
    total = jnp.zeros_like(p)
    for k in range(samples // 2 + 1, samples + 1):
        total = total + math.comb(samples, k) * p**k * (1 - p) ** (samples - k)
    return total


def _f1(correct, predicted_total, true_total, recall_eps=0.0):
    """The references' ``2PR / (P + R + 1e-8)``; NaN where a denominator is 0."""
    precision = safe_divide(correct, predicted_total, jnp.nan)
    recall = safe_divide(correct, true_total + recall_eps, jnp.nan)
    return precision, recall, divide(2 * precision * recall, precision + recall + F1_EPS)


def _videos(mask):
    """Number of rows with at least one valid frame (padding rows are not videos)."""
    if mask.ndim == 1:
        return jnp.any(mask).astype(jnp.int32)
    return jnp.sum(jnp.any(mask, axis=-1), dtype=jnp.int32)


def _pooled(targets, predictions, mask, C, K):
    """The whole batch as one concatenated sequence (row-major, as the references concatenate)."""
    rows, cols, keep = shifted_labels(targets, predictions, mask, C, K)
    return rows.reshape(-1), cols.reshape(-1), keep.reshape(-1)


def _matched_counts(table, class_cluster):
    """Per table row: ``(tp, union)`` with its matched column (``-1``: none, 0 and the row)."""
    matched = class_cluster >= 0
    column = jnp.maximum(class_cluster, 0)
    tp = jnp.where(matched, jnp.take_along_axis(table, column[:, None], axis=1)[:, 0], 0)
    predicted = jnp.where(matched, jnp.sum(table, axis=0, dtype=table.dtype)[column], 0)
    return tp, jnp.sum(table, axis=1, dtype=table.dtype) + predicted - tp


# ------------------------------------------------------------------------------------------
# Global protocol (CTE)


def cte_matching(table, background: bool):
    """CTE's matching on a ``[C+1, K+1]`` table (index = label + 1) of one set of videos.

    Returns ``(class_cluster [C+1], cluster_class [K+1], raw [K+1], bg)``: the cluster matched
    to each class and the class matched to each cluster (-1: none or a padding label), the
    cluster that keeps its own id in F1 (CTE's relabelling quirk), and whether background
    handling is on (``background`` and some target frame is background).
    """
    G, Q = table.shape
    S = max(G, Q)
    row_order, n_rows = compact_labels(jnp.sum(table, axis=1) > 0)
    col_order, n_cols = compact_labels(jnp.sum(table, axis=0) > 0)
    size = jnp.maximum(n_rows, n_cols)
    votes = jnp.zeros((S, S), float_dtype())
    votes = votes.at[:G, :Q].set(table[row_order][:, col_order].astype(votes.dtype))
    col_label = (
        jnp.full(S, -1, jnp.int32)
        .at[:Q]
        .set(jnp.where(jnp.arange(Q, dtype=jnp.int32) < n_cols, col_order, -1))
    )
    raw = jnp.zeros(Q, jnp.bool_)
    bg = jnp.asarray(False)
    if background:
        # Label -1 sorts first: when present it is row 0 / column 0 of the compacted table.
        bg = table[0].sum() > 0
        pred_bg = table[:, 0].sum() > 0
        first = jnp.arange(S, dtype=jnp.int32) == 0
        votes = jnp.where(bg & (first[:, None] | (pred_bg & first[None, :])), 0.0, votes)
        forced = jnp.where(pred_bg, 0, size - 1)
        votes = votes.at[0, forced].set(
            jnp.where(bg, size.astype(votes.dtype) * jnp.max(votes), votes[0, forced])
        )
        # Quirk: without a cluster -1 the last column is relabelled -1; its cluster keeps its id.
        relabel = bg & ~pred_bg
        last = col_label[size - 1]
        raw = raw.at[jnp.maximum(last, 0)].set(relabel & (last >= 0))
        col_label = col_label.at[size - 1].set(jnp.where(relabel, 0, last))
    col_for_row, _ = match_block(-votes, size, size)
    matched = jnp.where(
        jnp.arange(S, dtype=jnp.int32) < n_rows, col_label[jnp.maximum(col_for_row, 0)], -1
    )
    class_cluster = jnp.full(G, -1, jnp.int32).at[row_order].set(matched[:G])
    cluster_class = jnp.full(Q + 1, -1, jnp.int32)
    cluster_class = cluster_class.at[jnp.where(class_cluster >= 0, class_cluster, Q)].set(
        jnp.arange(G, dtype=jnp.int32)
    )
    return class_cluster, cluster_class[:Q], raw, bg


def _cte_frame_scores(table, class_cluster, bg):
    """CTE's MoF and IoU, with and without the background class (float32 scalars)."""
    f = float_dtype()
    tp, union = _matched_counts(table, class_cluster)
    support = jnp.sum(table, axis=1, dtype=table.dtype)
    present = support > 0
    foreground = present & ~((jnp.arange(table.shape[0], dtype=jnp.int32) == 0) & bg)
    frames = jnp.sum(support).astype(f)
    background_frames = jnp.where(bg, support[0], 0).astype(f)
    iou = safe_divide(tp.astype(f), union.astype(f), 0.0)
    classes = (jnp.sum(present, dtype=jnp.int32) - bg.astype(jnp.int32)).astype(f)
    return {
        "mof": safe_divide(
            jnp.sum(jnp.where(foreground, tp, 0)).astype(f), frames - background_frames, jnp.nan
        ),
        "mof_bg": safe_divide(jnp.sum(tp).astype(f), frames, jnp.nan),
        "iou": safe_divide(jnp.sum(jnp.where(foreground, iou, 0.0)), classes, jnp.nan),
        "iou_bg": safe_divide(jnp.sum(jnp.where(present, iou, 0.0)), classes, jnp.nan),
    }


def _cte_f1(rows, cols, keep, cluster_class, raw, bg, segments, videos):
    """CTE's F1, deterministic limit: every run but the last scores its fraction correct."""
    f = float_dtype()
    N = rows.shape[0]
    keep = keep & ~(bg & (rows == 0))
    matched = cluster_class[cols]
    correct = keep & jnp.where(matched >= 0, matched == rows, raw[cols] & (cols == rows))
    start, run, _ = runs(rows, keep)
    columns = jnp.stack([keep, correct], 1).astype(jnp.int32)
    sums = run_sums(columns, run, N)
    n_runs = jnp.sum(start, dtype=jnp.int32)
    counted = jnp.arange(N, dtype=jnp.int32) < n_runs - 1  # the last run is never added
    fraction = safe_divide(sums[:, 1].astype(f), sums[:, 0].astype(f), 0.0)
    correct_runs = jnp.sum(jnp.where(counted, fraction, 0.0))
    n_runs = (n_runs - 1).astype(f)
    # K * V in floats: an int32 product wrapped past 2**31 (F1 600% or negative)
    precision, recall, f1 = _f1(correct_runs, segments.astype(f) * videos.astype(f), n_runs)
    undefined = n_runs <= 0  # CTE raises ZeroDivisionError
    nan = lambda x: jnp.where(undefined, jnp.nan, x)  # noqa: E731
    return {"f1": nan(f1), "precision": nan(precision), "recall": nan(recall)}


@one_program(host_check=_labels_within)
def global_hungarian_scores(
    targets,
    predictions,
    *,
    num_classes: int,
    num_clusters: int,
    mask=None,
    exclude_background: bool = False,
    segments_per_video=None,
    f1: bool = True,
) -> dict:
    """MoF, IoU and F1 after one Hungarian matching over all videos (CTE's global protocol).

    All sequences of the batch are one set (an activity, or a whole dataset), concatenated in
    row-major order. A square table of the labels that occur (rows: sorted classes, columns:
    sorted clusters, the shorter side padded with unused labels) is matched one-to-one
    maximising matched frames; then, with ``tp_c`` the frames of class c on its cluster and
    ``u_c`` the union of the class's and the cluster's frames,
    ``mof = sum_c tp_c / N``, ``iou = (1 / |classes|) sum_c tp_c / u_c``, and
    ``f1 = 2PR / (P + R + 1e-8)`` with ``P = n / (k V)``, ``R = n / (runs - 1)``, where n sums
    the fraction of correctly mapped frames of every ground-truth run of the concatenation but
    the last, k is ``segments_per_video`` and V the number of videos.

    With ``exclude_background=True`` (CTE's ``opt.bg``), target label -1 is background: its
    row and the column of cluster -1 are zeroed, the cell (-1, -1) is set to ``size *
    max(table)`` so that background matches cluster -1, and background frames leave the
    denominators and F1; ``mof_bg``/``iou_bg`` put its term back in the numerator
    (``iou_bg`` keeps ``iou``'s denominator, as CTE does, so it can exceed 1).

    Args:
      targets: integer ``[..., T]`` class labels in ``[-1, num_classes)``, -1 = background.
      predictions: integer ``[..., T]`` cluster ids in ``[-1, num_clusters)``. A label outside
        either range on a valid frame raises ``ValueError`` (under ``jax.jit``: left out).
      num_classes: static number of classes C.
      num_clusters: static number of clusters K.
      mask: optional bool ``[..., T]``, True = valid frame.
      exclude_background: static; CTE's background handling (see above).
      segments_per_video: CTE's K in F1's precision (the number of clusters the method was
        asked for); int or int scalar array >= 1 (``ValueError`` below); default K.
      f1: static; also compute F1 (its runs cost several times the table).

    Returns:
      dict of float32 scalars ``mof``, ``mof_bg``, ``iou``, ``iou_bg``, ``f1``,
      ``precision``, ``recall`` (the last three only with ``f1``; fractions; NaN where a
      denominator is 0), and int32 ``cluster_class [K+1]`` and ``class_cluster [C+1]``:
      entry ``i`` belongs to label ``i - 1`` and holds the matched label plus one (0 =
      cluster/class -1, -1 = none).

    >>> r = global_hungarian_scores([[0, 0, 1, 1]], [[3, 3, 2, 2]], num_classes=2, num_clusters=4)
    >>> float(r["mof"]), float(r["iou"])
    (1.0, 1.0)

    Differences from the reference (``ute`` at 2fd98b4): F1 is the deterministic limit of
    CTE's sampling (expected correct samples per run; CTE's mean F1 of 50 random draws
    scatters around it); ``exclude_background=True`` without background frames acts like
    ``exclude_background=False`` (CTE raises ``KeyError``); 0/0 gives NaN. Kept as in CTE:
    without a prediction -1 the last column's cluster loses its match (its frames keep their
    own id in F1); F1's runs cross video boundaries and the last run is dropped (F1 is NaN
    with fewer than two runs: CTE raises); ties are broken as scipy breaks them.

    References:
      Kukleva et al., Unsupervised learning of action classes with continuous temporal
      embedding, CVPR 2019; github.com/Annusha/unsup_temp_embed ``ute/eval_utils``
      (``accuracy_class.py``, ``f1_score.py``) and ``ute/corpus.py:accuracy_corpus``.
    """
    targets, predictions, mask, C, K = _inputs(
        targets, predictions, mask, num_classes, num_clusters
    )
    background = checks.static_bool("exclude_background", exclude_background)
    segments = K if segments_per_video is None else segments_per_video
    segments = checks.integer_values("segments_per_video", segments, ())
    table = label_tables(targets, predictions, mask, C, K, pooled=True)
    class_cluster, cluster_class, raw, bg = cte_matching(table, background)
    scores = _cte_frame_scores(table, class_cluster, bg)
    if f1:
        videos = _videos(mask)
        rows, cols, keep = _pooled(targets, predictions, mask, C, K)
        scores.update(_cte_f1(rows, cols, keep, cluster_class, raw, bg, segments, videos))
    scores = {k: v.astype(jnp.float32) for k, v in scores.items()}
    return {**scores, "cluster_class": cluster_class, "class_cluster": class_cluster}


# ------------------------------------------------------------------------------------------
# ASOT (full and per video)


def asot_matching(table, exclude_background: bool):
    """ASOT's rectangular matching on a ``[C+1, K+1]`` table (index = label + 1).

    Rows of scipy's table are the clusters that occur, columns the classes that occur (after
    removing background targets if ``exclude_background``). Returns ``(table, class_cluster,
    classes)``: the table without excluded frames, the cluster matched to each class (-1:
    none) and the number of classes that occur.
    """
    if exclude_background:
        table = table.at[0].set(0)
    G = table.shape[0]
    row_order, n_rows = compact_labels(jnp.sum(table, axis=1) > 0)
    col_order, n_cols = compact_labels(jnp.sum(table, axis=0) > 0)
    affinity = table[row_order][:, col_order].T.astype(float_dtype())  # [clusters, classes]
    _, cluster_for_class = match_block(-affinity, n_cols, n_rows)
    matched = jnp.where(cluster_for_class >= 0, col_order[jnp.maximum(cluster_for_class, 0)], -1)
    class_cluster = jnp.full(G, -1, jnp.int32).at[row_order].set(matched)
    return table, class_cluster, n_rows


def _asot_frame_scores(table, class_cluster, classes):
    f = float_dtype()
    tp, union = _matched_counts(table, class_cluster)
    iou = safe_divide(tp.astype(f), union.astype(f), 0.0)
    return {
        "mof": safe_divide(jnp.sum(tp).astype(f), jnp.sum(table).astype(f), jnp.nan),
        "miou": safe_divide(
            jnp.sum(jnp.where(class_cluster >= 0, iou, 0.0)), classes.astype(f), jnp.nan
        ),
    }


def _asot_f1(rows, cols, keep, class_cluster, classes, videos):
    """ASOT's F1, deterministic limit: each run's hit probability with 15 draws.

    Run i draws from frames ``b_i .. b_{i+1}`` inclusive (the next run's first frame too);
    it is a hit when more than half of the draws fall on the class's matched cluster.
    """
    f = float_dtype()
    N = rows.shape[0]
    target_cluster = class_cluster[rows]
    hit = keep & (target_cluster >= 0) & (cols == target_cluster)
    start, run, previous = runs(rows, keep)
    # The first frame of each run but the first joins the previous run's draws.
    joins = start & (previous >= 0)
    earlier_cluster = target_cluster[jnp.maximum(previous, 0)]
    crossing = joins & (earlier_cluster >= 0) & (cols == earlier_cluster)
    own = run_sums(jnp.stack([keep, hit], 1).astype(jnp.int32), run, N)
    into_previous = jnp.where(joins, run - 1, run)  # still non-decreasing
    extra = run_sums(jnp.stack([joins, crossing], 1).astype(jnp.int32), into_previous, N)
    sums = own + extra
    p = safe_divide(sums[:, 1].astype(f), sums[:, 0].astype(f), 0.0)
    n_runs = jnp.sum(start, dtype=jnp.int32)
    expected_hits = jnp.sum(
        jnp.where(jnp.arange(N, dtype=jnp.int32) < n_runs, majority_probability(p), 0.0)
    )
    n_runs = n_runs.astype(f)
    # ASOT: precision = hits / (V * classes * 50), recall = hits / (runs * 50 + 1e-8).
    precision, recall, f1 = _f1(
        expected_hits * EXPERIMENTS,
        (videos * classes * EXPERIMENTS).astype(f),
        n_runs * EXPERIMENTS,
        recall_eps=F1_EPS,
    )
    nan = lambda x: jnp.where(n_runs > 0, x, jnp.nan)  # noqa: E731
    return {"f1": nan(f1), "precision": nan(precision), "recall": nan(recall)}


def _asot_sequence(table, rows, cols, keep, videos, exclude_background, f1):
    """ASOT's three scores on one (concatenated) sequence: its :func:`label_tables` table
    and its :func:`shifted_labels`."""
    table, class_cluster, classes = asot_matching(table, exclude_background)
    if exclude_background:
        keep = keep & (rows != 0)
    scores = _asot_frame_scores(table, class_cluster, classes)
    if f1:
        scores.update(_asot_f1(rows, cols, keep, class_cluster, classes, videos))
    scores = {k: v.astype(jnp.float32) for k, v in scores.items()}
    return {**scores, "class_cluster": class_cluster}


@one_program(host_check=_labels_within)
def asot_hungarian_scores(
    targets,
    predictions,
    *,
    num_classes: int,
    num_clusters: int,
    mask=None,
    mode: str = "full",
    exclude_background: bool = False,
    f1: bool = True,
) -> dict:
    """MoF, mIoU and F1 after ASOT's Hungarian matching, over a set ("full") or per video.

    The table has a row per cluster and a column per class that occur (background targets
    removed first when ``exclude_background``); ``min(#clusters, #classes)`` pairs are
    matched, maximising matched frames; unmatched clusters and classes score nothing. With
    ``tp_c`` the frames of class c on its cluster and ``u_c`` their union:
    ``mof = sum_c tp_c / N``, ``miou = (1 / |classes|) sum_c tp_c / u_c``, and
    ``f1 = 2PR / (P + R + 1e-8)`` with ``P = h / (V |classes|)``, ``R = h / runs``, where h
    sums over the ground-truth runs the probability that more than 7 of 15 frames drawn
    uniformly from the run and the next run's first frame lie on the run's matched cluster.

    Args:
      targets: integer ``[..., T]`` class labels in ``[-1, num_classes)``.
      predictions: integer ``[..., T]`` cluster ids in ``[-1, num_clusters)``. A label outside
        either range on a valid frame raises ``ValueError`` (under ``jax.jit``: left out).
      num_classes: static number of classes C.
      num_clusters: static number of clusters K.
      mask: optional bool ``[..., T]``, True = valid frame.
      mode: static; ``"full"``: one matching over all sequences of the batch, concatenated
        (ASOT's ``*_full`` metrics); ``"per"``: one matching per sequence (``*_per``, V = 1;
        the dataset value is the mean over videos).
      exclude_background: static; remove frames whose target is -1 (ASOT's
        ``exclude_cls=-1``).
      f1: static; also compute F1 (its runs cost several times the table on CPU).

    Returns:
      dict with float32 ``mof``, ``miou``, ``f1``, ``precision``, ``recall`` (the last three
      only with ``f1``; scalars for
      ``"full"``, ``[...]`` for ``"per"``; NaN where a denominator is 0) and int32
      ``class_cluster [(...,) C+1]``: entry ``i`` belongs to class ``i - 1`` and holds its
      matched cluster plus one (-1 = none).

    >>> r = asot_hungarian_scores([[0, 0, 1, 1]], [[3, 3, 3, 2]], num_classes=2,
    ...                           num_clusters=4)
    >>> float(r["mof"]), round(float(r["miou"]), 4)
    (0.75, 0.5833)

    Differences from the reference (action_seg_ot at 0c4c86b): F1 is the deterministic limit
    of ASOT's 50 random draws (the expected hit count); 0/0 gives NaN (ASOT: NaN or an
    error). Kept as in ASOT: a run's draws include the next run's first frame, runs cross
    video boundaries in "full" mode, precision can exceed 1 (more runs than videos times
    classes), and ties are broken as scipy breaks them.

    References:
      Xu & Gould, Temporally consistent unbalanced optimal transport for unsupervised action
      segmentation, CVPR 2024; github.com/mingu6/action_seg_ot ``src/metrics.py``
      (``pred_to_gt_match``, ``eval_mof``, ``eval_miou``, ``eval_f1``,
      ``indep_eval_metrics``).
    """
    targets, predictions, mask, C, K = _inputs(
        targets, predictions, mask, num_classes, num_clusters
    )
    mode = checks.static_choice("mode", mode, ASOT_MODES)
    exclude = checks.static_bool("exclude_background", exclude_background)
    if mode == "full":
        table = label_tables(targets, predictions, mask, C, K, pooled=True)
        rows, cols, keep = _pooled(targets, predictions, mask, C, K)
        return _asot_sequence(table, rows, cols, keep, _videos(mask), exclude, bool(f1))

    def one(table, t, p, m):
        rows, cols, keep = shifted_labels(t, p, m, C, K)
        return _asot_sequence(table, rows, cols, keep, jnp.int32(1), exclude, bool(f1))

    tables = label_tables(targets, predictions, mask, C, K, pooled=False)
    return lift(one, (tables, targets, predictions, mask), (2, 1, 1, 1))


# ------------------------------------------------------------------------------------------
# Per-video protocol (TW-FINCH)


def finch_matching(table):
    """TW-FINCH's matching on one video's ``[C+1, K+1]`` table (index = label + 1).

    scipy's table has a row per cluster that occurs (dense ids in sorted order, as FINCH
    outputs them) and a column per target value ``0 .. max`` after TW-FINCH's shift (targets
    move up by one when the video holds -1), at least as many columns as rows; absent values
    are zero columns. Returns ``(label_tp, label_support, label_predicted)``, int32 over the
    shifted target values: frames on the matched cluster, target frames, predicted frames.
    """
    G, Q = table.shape
    W = max(G, Q)
    shift_off = (jnp.sum(table[0]) == 0).astype(jnp.int32)  # column j <-> table row j + off
    col_order, n_clusters = compact_labels(jnp.sum(table, axis=0) > 0)
    top = jnp.max(jnp.where(jnp.sum(table, axis=1) > 0, jnp.arange(G, dtype=jnp.int32), 0))
    width = jnp.maximum(n_clusters, top - shift_off + 1)
    padded = jnp.zeros((W + 1, Q), jnp.int32).at[:G].set(table)
    by_value = lax.dynamic_slice_in_dim(padded, shift_off, W, axis=0)  # [W, Q]
    profit = by_value[:, col_order].T.astype(float_dtype())  # [clusters, values]
    label_for_cluster, _ = match_block(-profit, n_clusters, width)
    live = label_for_cluster >= 0
    column = jnp.where(live, label_for_cluster, W)
    clusters = by_value[:, col_order]  # [W, Q] (value, compact cluster)
    tp_of_cluster = jnp.where(
        live, clusters[jnp.minimum(column, W - 1), jnp.arange(Q, dtype=jnp.int32)], 0
    )
    label_tp = jnp.zeros(W, jnp.int32).at[column].add(tp_of_cluster, mode="drop")
    sizes = jnp.where(live, jnp.sum(clusters, axis=0, dtype=jnp.int32), 0)
    label_predicted = jnp.zeros(W, jnp.int32).at[column].add(sizes, mode="drop")
    return label_tp, jnp.sum(by_value, axis=1, dtype=jnp.int32), label_predicted


def _finch_scores(table, divisor):
    f = float_dtype()
    tp, support, predicted = (x.astype(f) for x in finch_matching(table))
    labels = (support > 0) | (predicted > 0)  # sklearn's labels: union of true and predicted
    f1 = safe_divide(2 * tp, support + predicted, 0.0)
    iou = safe_divide(tp, support + predicted - tp, 0.0)
    frames = jnp.sum(support)
    n_labels = jnp.sum(labels).astype(f)
    return {
        "mof": safe_divide(jnp.sum(tp), frames, jnp.nan),
        "iou": safe_divide(jnp.sum(jnp.where(labels, iou, 0.0)), divisor.astype(f), jnp.nan),
        "f1": safe_divide(jnp.sum(jnp.where(labels, f1, 0.0)), n_labels, jnp.nan),
    }


@one_program(host_check=_labels_within)
def per_video_hungarian_scores(
    targets, predictions, *, num_classes: int, num_clusters: int, mask=None, iou_divisor=None
) -> dict:
    """MoF, IoU and macro F1 of each video after its own Hungarian matching (TW-FINCH).

    Each video's clusters are matched one-to-one to target values (every cluster gets a
    value; absent values are candidates too), maximising matched frames. With the mapped
    predictions, over the labels L that occur in the targets or the mapped predictions and
    ``tp_l``, ``fp_l``, ``fn_l`` their frame counts: ``mof = sum_l tp_l / T``,
    ``iou = (1 / D) sum_l tp_l / (tp_l + fp_l + fn_l)`` with D = ``iou_divisor`` (TW-FINCH
    divides by the number of clusters, so over- and under-clustering cost alike), and
    ``f1 = (1 / |L|) sum_l 2 tp_l / (2 tp_l + fp_l + fn_l)`` (scikit-learn's macro F1).
    The dataset value of each is the mean over videos.

    Args:
      targets: integer ``[..., T]`` class labels in ``[-1, num_classes)``; a video holding
        -1 has all its labels shifted up by one first, as TW-FINCH's ``read_gt_label`` does
        (this can change which absent values pad the table).
      predictions: integer ``[..., T]`` cluster ids in ``[-1, num_clusters)``; they are
        relabelled densely in sorted order (FINCH's output already is). A label outside
        either range on a valid frame raises ``ValueError`` (under ``jax.jit``: left out).
      num_classes: static number of classes C.
      num_clusters: static number of clusters K.
      mask: optional bool ``[..., T]``, True = valid frame.
      iou_divisor: int or int array broadcasting to ``[...]``, at least 1 (a concrete value
        below raises ``ValueError``), TW-FINCH's ``n_clusters`` (the K the videos were
        clustered to); default: the number of distinct clusters in each video.

    Returns:
      dict of float32 ``[...]``: ``mof``, ``iou``, ``f1`` (NaN for a video without valid
      frames).

    >>> r = per_video_hungarian_scores([0, 0, 1, 1, 1], [1, 1, 1, 0, 0], num_classes=2,
    ...                                num_clusters=2)
    >>> [round(float(r[k]), 4) for k in ("mof", "iou", "f1")]
    [0.8, 0.6667, 0.8]

    Differences from the reference (FINCH-Clustering at b181669): cluster ids need not be
    dense (TW-FINCH indexes its table by cluster id); a video without frames gives NaN.

    References:
      Sarfraz et al., Temporally-weighted hierarchical clustering for unsupervised action
      segmentation, CVPR 2021; github.com/ssarfraz/FINCH-Clustering
      ``TW-FINCH/python/read_utils.py:estimate_cost_matrix``, ``TW-FINCH/run_on_dataset.py``.
    """
    targets, predictions, mask, C, K = _inputs(
        targets, predictions, mask, num_classes, num_clusters
    )
    batch = targets.shape[:-1]
    divisor = (
        None if iou_divisor is None else checks.integer_values("iou_divisor", iou_divisor, batch)
    )

    def one(table, d):
        if d is None:
            d = jnp.sum(jnp.sum(table, axis=0) > 0)
        scores = _finch_scores(table, d)
        return {k: v.astype(jnp.float32) for k, v in scores.items()}

    tables = label_tables(targets, predictions, mask, C, K, pooled=False)
    return lift(one, (tables, divisor), (2, 0))
