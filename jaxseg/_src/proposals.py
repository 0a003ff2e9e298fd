"""Temporal action proposals: ActivityNet average recall vs average number of proposals (AR-AN).

Per video, the first rank at which each ground-truth instance is recalled at each tIoU (one
IoU matrix, a minimum over ranks); then the reference's per-video proposal budgets, which are
float64 products (``int(n * pcn)``), computed exactly by :mod:`jaxseg._src.binary64` as small
tables indexed by the number of proposals; a binary search of each instance's first rank in
its video's budgets gives the first step that recalls it, and one histogram over steps gives
every recall. Nothing loops over videos or steps.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxseg._src import batching, binary64, checks
from jaxseg._src.detection import ACTIVITYNET_THRESHOLDS
from jaxseg._src.grounding import query_inputs, union_iou
from jaxseg._src.numerics import count_ratio, divide
from jaxseg._src.programs import one_program
from jaxseg._src.ranking import descending_keys, key_order

STEPS = 100  # the reference's np.arange(1, 101) / 100.0
_STEP_FRACTIONS = binary64.constant(np.arange(1, STEPS + 1) / 100.0)


class ProposalCurve(NamedTuple):
    """Average recall against the average number of proposals per video (AN), ``J = 100``."""

    recall: jax.Array  # [..., T, J] recall at each tIoU threshold and step
    average_recall: jax.Array  # [..., J] mean over thresholds
    proposals_per_video: jax.Array  # [..., J] AN of each step (j * M / 100 up to rounding)
    auc: jax.Array  # [...] area under AR-AN / AN[-1], in [0, 1] (official AUC = 100 * auc)
    at: jax.Array  # [..., len(at)] AR at the requested AN values


def first_hits(gt, gm, proposals, scores, pm, thresholds):
    """One video: 1-based rank (decreasing score) of the first proposal with tIoU ``>= t``
    with each target, ``int32 [G, T]``; ``P + 1`` when none."""
    order = key_order(descending_keys(scores, pm))
    iou = union_iou(proposals[order], gt)  # [P, G]
    t = jnp.asarray(thresholds, iou.dtype)[None, None, :]
    hit = (iou[..., None] >= t) & pm[order][:, None, None]
    rank = jnp.arange(1, iou.shape[0] + 1, dtype=jnp.int32)
    return jnp.min(jnp.where(hit, rank[:, None, None], iou.shape[0] + 1), axis=0)


def budgets(num_videos, all_proposals, counts_with_targets, capacity, max_average):
    """The reference's per-video budgets as tables over the number n of proposals of a video.

    Returns ``kept [capacity + 1]``, the total kept over videos with targets, ``steps
    [capacity + 1, J]`` (:func:`step_budgets` of every number kept) and ``pcn``.
    """
    kept, total, pcn = kept_proposals(
        num_videos, all_proposals, counts_with_targets, capacity, max_average
    )
    return kept, total, step_budgets(jnp.arange(capacity + 1, dtype=jnp.int32), pcn), pcn


def kept_proposals(num_videos, all_proposals, counts_with_targets, capacity, max_average):
    """``kept [capacity + 1]`` (``min(int(n * ratio), n)`` of a video with n proposals), the
    total kept over the videos with targets and ``pcn`` (a binary64 ``[J]``), float64-exact."""
    n = jnp.arange(capacity + 1, dtype=jnp.int32)
    scaled = jnp.asarray(max_average, jnp.int32) * num_videos
    ratio = binary64.quotient(scaled, jnp.maximum(all_proposals, 1))
    kept = jnp.minimum(binary64.floor(binary64.product(binary64.from_int(n), ratio)), n)
    total = jnp.sum(counts_with_targets * kept, dtype=jnp.int32)
    pcn = binary64.product(_STEP_FRACTIONS, binary64.quotient(scaled, jnp.maximum(total, 1)))
    return kept, total, pcn


def step_budgets(kept, pcn):
    """``min(int(kept * pcn_j), kept)``, float64-exact: the proposals used at each step j by
    videos keeping ``kept`` (int32 ``[N]``) proposals, int32 ``[N, J]``."""
    double = binary64.from_int(kept)
    wide = binary64.Double(double.limbs[:, None, :], double.exponent[:, None])
    steps = binary64.floor(binary64.product(wide, jax.tree.map(lambda x: x[None], pcn)))
    return jnp.minimum(steps, kept[:, None])


def curve_from_recalled(recalled, num_targets, num_videos, total, pcn, at_index, dtype):
    """:class:`ProposalCurve` from recalled-target counts ``[T, J]`` (float ``dtype``)."""
    recall = count_ratio(recalled.astype(dtype), num_targets, jnp.nan)
    average = jnp.mean(recall, axis=0)
    proposals_per_video = divide(total.astype(dtype), num_videos.astype(dtype))
    per_video = binary64.to_float(pcn, dtype) * proposals_per_video
    nominal = jnp.arange(1, STEPS + 1, dtype=dtype) / STEPS
    per_video = jnp.where(total > 0, per_video, jnp.nan * nominal)
    area = jnp.sum(jnp.diff(per_video) * (average[1:] + average[:-1]) / 2)
    empty = jnp.where(num_targets > 0, 0.0, jnp.nan)
    auc = jnp.where(total > 0, divide(area, per_video[-1]), empty)
    return ProposalCurve(recall, average, per_video, auc, average[jnp.asarray(at_index)])


def static_at(at, max_average: int) -> tuple[int, ...]:
    """The curve's step indices of the AN values ``at`` (an int or a non-empty tuple of
    ints): the curve has a point at ``j * max_average / STEPS`` proposals per video,
    j = 1..STEPS.

    >>> static_at((1, 5, 100), 100)
    (0, 4, 99)
    """
    out = []
    for a in checks.static_ints("at", at):
        if (a * STEPS) % max_average or a > max_average:
            raise ValueError(
                f"at must hold AN values on the curve's steps j * {max_average} / {STEPS} "
                f"(j = 1..{STEPS}), got {a}."
            )
        out.append(a * STEPS // max_average - 1)
    return tuple(out)


@one_program
def proposal_average_recall(
    targets: jax.typing.ArrayLike,
    proposals: jax.typing.ArrayLike,
    scores: jax.typing.ArrayLike,
    *,
    iou_thresholds: tuple[float, ...] = ACTIVITYNET_THRESHOLDS,
    max_average_proposals: int = 100,
    at: tuple[int, ...] = (1, 5, 10, 100),
    target_mask: jax.typing.ArrayLike | None = None,
    proposal_mask: jax.typing.ArrayLike | None = None,
) -> ProposalCurve:
    r"""Average recall vs average number of proposals per video (AR-AN) over a dataset.

    ActivityNet's ``average_recall_vs_avg_nr_proposals``: with V videos having targets and
    :math:`N` proposals in all, each video keeps its :math:`n_v = \min(\lfloor N_v \cdot M V /
    N\rfloor, N_v)` best-scored proposals; at step :math:`j = 1..100` it uses the first
    :math:`\min(\lfloor n_v \cdot \frac{j}{100} \cdot \frac{MV}{\sum n_v}\rfloor, n_v)` (float64
    products, reproduced exactly). A target is recalled at tIoU t when one of those has
    :math:`\mathrm{tIoU} \ge t` (inclusive; no one-to-one matching); recall = recalled / all
    targets; AR = mean over thresholds; AN of step j = :math:`jM/100`; AUC = trapezoidal area
    under AR-AN divided by the last AN.

    Args:
      targets: float ``[..., V, G, 2]`` ground-truth windows of each video.
      proposals: float ``[..., V, P, 2]`` proposals of each video (any order).
      scores: float ``[..., V, P]`` proposal scores (no NaN).
      iou_thresholds: static tuple of T thresholds; default ``np.linspace(0.5, 0.95, 10)``.
      max_average_proposals: static int M (ActivityNet 100; THUMOS-14 AR@AN: 1000); M V
        must fit int32 (``ValueError`` otherwise).
      at: static tuple of AN values for :attr:`ProposalCurve.at`, multiples of ``M / 100``;
        default AR@1, 5, 10, 100 (THUMOS-14: ``(50, 100, 200, 500, 1000)`` with M = 1000).
      target_mask: optional ``bool[..., V, G]``; a video without a valid target is not one of
        the V videos, but its proposals count in N, as in the reference.
      proposal_mask: optional ``bool[..., V, P]``.

    Returns:
      :class:`ProposalCurve` (``recall [..., T, 100]``, ``average_recall [..., 100]``,
      ``proposals_per_video [..., 100]``, ``auc [...]``, ``at [..., len(at)]``); NaN without
      targets; recall 0 and AN NaN when the videos with targets have no proposal.

    >>> gt = jnp.array([[[0.0, 10.0]], [[5.0, 8.0]]])
    >>> props = jnp.array([[[0.0, 9.0], [20.0, 30.0]], [[0.0, 1.0], [5.0, 8.0]]])
    >>> curve = proposal_average_recall(
    ...     gt, props, jnp.array([[0.9, 0.8], [0.7, 0.6]]), max_average_proposals=2, at=(1, 2))
    >>> curve.at.tolist()
    [0.45000001788139343, 0.949999988079071]

    References:
      Caba Heilbron et al., "ActivityNet", CVPR 2015 (``Evaluation/eval_proposal.py``,
      ``ANETproposal.evaluate``, ``average_recall_vs_avg_nr_proposals``); Escorcia et al.,
      "DAPs", ECCV 2016 (AR-AN).

    Notes: IoUs follow the input dtype (float32 by default: a tIoU near a threshold, by up to
    about ``6e-8 * time / length``, may be decided differently, and scores equal in float32
    tie; with ``jax_enable_x64`` and float64 windows and scores every decision and order is
    the reference's). Equal scores keep input order (the reference: numpy's unstable sort).
    The reference stores the raw area (``auc * AN[-1]``) and prints ``100 * auc``; it divides
    by zero when no video with targets has a proposal.
    """
    thresholds = checks.static_unit_floats("iou_thresholds", iou_thresholds)
    max_average = checks.static_int("max_average_proposals", max_average_proposals, minimum=1)
    at_index = static_at(at, max_average)
    gt, props, gm, pm, scores = _dataset_inputs(
        targets, proposals, scores, target_mask, proposal_mask
    )
    _check_budget_range(max_average, gt.shape[-3])
    one_dataset = functools.partial(
        _dataset_curve, thresholds=thresholds, max_average=max_average, at_index=at_index
    )
    return batching.lift(one_dataset, (gt, gm, props, scores, pm), (3, 2, 3, 2, 2))


def _dataset_curve(gt, gm, props, scores, pm, *, thresholds, max_average, at_index):
    """:class:`ProposalCurve` of one dataset ``[V, ...]``."""
    count = jnp.sum(pm, axis=-1, dtype=jnp.int32)
    budget, num_videos, total, pcn = video_budgets(
        count, jnp.any(gm, axis=-1), capacity=props.shape[-2], max_average=max_average
    )
    histogram = first_step_histogram(gt, gm, props, scores, pm, budget, thresholds=thresholds)
    num_targets = jnp.sum(gm, dtype=jnp.int32)
    return curve_from_histogram(
        histogram, num_targets, num_videos, total, pcn, at_index=at_index, dtype=gt.dtype
    )


def _check_budget_range(max_average: int, videos: int) -> None:
    """Raises ``ValueError`` unless ``max_average * videos`` fits int32, where
    :func:`kept_proposals` scales the budgets (a larger product would wrap)."""
    if max_average * videos > np.iinfo(np.int32).max:
        raise ValueError(
            f"max_average_proposals={max_average} is too large for {videos} videos: their "
            f"product must fit int32 (at most {np.iinfo(np.int32).max // videos} for them)."
        )


def video_budgets(count, has_targets, *, capacity, max_average):
    """Proposals each video uses at each step, set by the numbers of proposals of all videos.

    Args:
      count: int32 ``[V]`` proposals of each video, those without targets included (they
        count in the total N).
      has_targets: bool ``[V]``: the video has a valid target (one of the curve's videos).
      capacity: static int, at least ``max(count)``.
      max_average: static int M.

    Returns:
      ``budget`` int32 ``[V, J]`` (nondecreasing in j; 0 without targets), the number of
      videos with targets, the total kept over them and ``pcn`` (binary64 ``[J]``).
    """
    counts = jnp.zeros(capacity + 1, jnp.int32).at[count].add(has_targets.astype(jnp.int32))
    num_videos = jnp.sum(has_targets, dtype=jnp.int32)
    kept, total, pcn = kept_proposals(num_videos, jnp.sum(count), counts, capacity, max_average)
    used = jnp.where(has_targets, kept[count], 0)
    # The steps of each distinct number kept, not of every number up to the capacity: the
    # table over every number would grow with the largest video, whatever the others.
    rows = min(used.shape[0], capacity + 1)
    values, inverse = jnp.unique(used, size=rows, fill_value=0, return_inverse=True)
    return step_budgets(values, pcn)[inverse.reshape(-1)], num_videos, total, pcn


def first_step_histogram(gt, gm, props, scores, pm, budget, *, thresholds):
    """Targets of some videos by the first step that recalls them, at each threshold.

    Sums over any split of the videos give the histogram of the whole dataset: a video's
    first hits depend only on its own proposals, and a rank beyond its count (``P + 1``
    for none, whatever the padded width P) is past every one of its budgets.

    Args:
      gt, gm: float ``[V, G, 2]`` targets and bool ``[V, G]`` their mask.
      props, scores, pm: float ``[V, P, 2]`` proposals, ``[V, P]`` scores and bool mask.
      budget: int32 ``[V, J]`` rows of :func:`video_budgets` for these videos.
      thresholds: static tuple of T tIoU thresholds.

    Returns:
      int32 ``[T, J + 1]``: targets first recalled at step j (column J: never).
    """
    first = jax.vmap(first_hits, (0, 0, 0, 0, 0, None))(gt, gm, props, scores, pm, thresholds)
    first_step = jax.vmap(jnp.searchsorted)(budget, first.reshape(first.shape[0], -1))
    first_step = first_step.astype(jnp.int32).reshape(first.shape)  # [V, G, T]: j < it miss
    weight = jnp.broadcast_to(gm[..., None], first.shape).astype(jnp.int32)
    lane = jnp.arange(len(thresholds), dtype=jnp.int32)[None, None, :]
    index = lane * (STEPS + 1) + first_step
    histogram = jnp.zeros(len(thresholds) * (STEPS + 1), jnp.int32).at[index].add(weight)
    return histogram.reshape(len(thresholds), STEPS + 1)


def curve_from_histogram(histogram, num_targets, num_videos, total, pcn, *, at_index, dtype):
    """:class:`ProposalCurve` from a :func:`first_step_histogram` of all videos.

    Args:
      histogram: int32 ``[T, J + 1]``; num_targets, num_videos, total: int scalars; pcn:
        binary64 ``[J]`` (:func:`video_budgets`); at_index: static tuple of step indices;
        dtype: static float dtype of the curve.

    Returns:
      :class:`ProposalCurve` (``recall [T, J]``, ``average_recall [J]``, ...).
    """
    recalled = jnp.cumsum(histogram, axis=-1)[:, :STEPS]
    return curve_from_recalled(recalled, num_targets, num_videos, total, pcn, at_index, dtype)


def _dataset_inputs(targets, proposals, scores, target_mask, proposal_mask):
    for name, x in (("targets", targets), ("proposals", proposals)):
        if jnp.ndim(x) < 3:
            raise ValueError(f"{name} must have shape [..., V, N, 2], got {jnp.shape(x)}.")
    gt, props, gm, pm, scores = query_inputs(
        targets, proposals, target_mask, proposal_mask, scores, name="proposals"
    )
    gm, gt, props, pm, scores = checks.with_an_entry(gm, gt, props, pm, scores, axis=-2)
    return gt, props, gm, pm, scores  # no video: one without targets
