"""Streaming accumulators of the unsupervised (Hungarian-matched) protocols.

The global protocols (CTE, ASOT "full") match once over the whole set: their state is the
summed ``[C+1, K+1]`` contingency table (exact counts), so the matching, MoF and IoU do not
depend on batching or sharding. Their F1 is not accumulated: it scores runs of the set's
frames concatenated in order (a run may cross a batch boundary and the last run of the set
is special), which no order-free additive state holds; compute it with
:func:`jaxseg.metrics.global_hungarian_scores` or :func:`jaxseg.metrics.asot_hungarian_scores`
on the whole set. The per-video protocols (TW-FINCH, ASOT "per") accumulate per-video values
in fixed point (2**-24 per video), so their means are additive too.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from jaxseg._src import checks, counting
from jaxseg._src.accumulator import Accumulator
from jaxseg._src.streaming_segmentation import merge_states
from jaxseg._src.unsupervised import (
    _asot_frame_scores,
    _cte_frame_scores,
    _inputs,
    asot_hungarian_scores,
    asot_matching,
    cte_matching,
    label_tables,
    per_video_hungarian_scores,
)

SCALE = 1 << 24
GLOBAL_PROTOCOLS = ("cte", "asot")
PER_VIDEO_PROTOCOLS = ("twfinch", "asot")


class TableState(NamedTuple):
    """Summed contingency table ``[C+1, K+1]`` (index = label + 1) and videos, exact."""

    table: counting.Count
    videos: counting.Count


class PerVideoState(NamedTuple):
    """Sums over videos of each score times 2**24 (rounded per video), videos with a
    defined value of each score, and all videos."""

    sums: counting.Count
    defined: counting.Count
    videos: counting.Count


def _as_int32(count):
    """A count as int32 (exact below 2**31; the matching is exact below 2**24 per cell)."""
    count = counting.normalize(count)
    return count.high * (1 << counting.LOW_BITS) + count.low


def global_hungarian(
    *,
    num_classes: int,
    num_clusters: int,
    protocol: str = "cte",
    exclude_background: bool = False,
) -> Accumulator:
    """Accumulator of a global protocol's matching, MoF and IoU (CTE or ASOT "full").

    Args:
      num_classes: static number of classes C (targets in ``[-1, C)``).
      num_clusters: static number of clusters K (predictions in ``[-1, K)``).
      protocol: static; ``"cte"`` (:func:`jaxseg.metrics.global_hungarian_scores`) or
        ``"asot"`` (:func:`jaxseg.metrics.asot_hungarian_scores`, ``mode="full"``).
      exclude_background: static; CTE's background handling / ASOT's removal of target -1.

    Returns:
      An :class:`~jaxseg.streaming.Accumulator`; ``compute`` gives the protocol's
      ``mof``, ``mof_bg``, ``iou``, ``iou_bg`` (CTE) or ``mof``, ``miou`` (ASOT), the
      matching (``class_cluster``), ``table`` and ``videos`` (exact integer counts): equal to
      the function on all the data at once, however it was split. F1 is not accumulated (see
      the module).

    >>> acc = global_hungarian(num_classes=2, num_clusters=3)
    >>> state = acc.update(acc.init(), [[0, 0, 1]], [[2, 2, 0]])
    >>> state = acc.update(state, [[1, 1, 0]], [[0, 0, 1]])
    >>> round(float(acc.compute(state)["mof"]), 4)
    0.8333
    """
    C = checks.static_int("num_classes", num_classes, minimum=1)
    K = checks.static_int("num_clusters", num_clusters, minimum=1)
    protocol = checks.static_choice("protocol", protocol, GLOBAL_PROTOCOLS)
    background = checks.static_bool("exclude_background", exclude_background)

    def init():
        return TableState(counting.zeros((C + 1, K + 1)), counting.zeros())

    def update(state, targets, predictions, *, mask=None):
        targets, predictions, mask, _, _ = _inputs(targets, predictions, mask, C, K)
        table = label_tables(targets, predictions, mask, C, K, pooled=True)
        videos = jnp.sum(jnp.any(mask, axis=-1), dtype=jnp.int32)  # T = 0 has no reshape
        return TableState(
            counting.add_sum(state.table, table, axis=()), counting.add(state.videos, videos)
        )

    def compute(state):
        table = _as_int32(state.table)
        if protocol == "cte":
            class_cluster, _, _, bg = cte_matching(table, background)
            scores = _cte_frame_scores(table, class_cluster, bg)
        else:
            table, class_cluster, classes = asot_matching(table, background)
            scores = _asot_frame_scores(table, class_cluster, classes)
        scores = {k: v.astype(jnp.float32) for k, v in scores.items()}
        return {
            **scores,
            "class_cluster": class_cluster,
            "table": counting.to_integer(state.table),
            "videos": counting.to_integer(state.videos),
        }

    return Accumulator(init, update, merge_states, compute)


def per_video_hungarian(
    *,
    num_classes: int,
    num_clusters: int,
    protocol: str = "twfinch",
    exclude_background: bool = False,
) -> Accumulator:
    """Accumulator of a per-video protocol's dataset values: means over videos.

    Args:
      num_classes, num_clusters: as in :func:`global_hungarian`.
      protocol: static; ``"twfinch"`` (:func:`jaxseg.metrics.per_video_hungarian_scores`,
        keys ``mof``, ``iou``, ``f1``; ``update`` takes ``iou_divisor=``) or ``"asot"``
        (:func:`jaxseg.metrics.asot_hungarian_scores` with ``mode="per"``, keys ``mof``,
        ``miou``, ``f1``).
      exclude_background: static, ASOT only (``ValueError`` with ``"twfinch"``): remove
        frames whose target is -1.

    Returns:
      An :class:`~jaxseg.streaming.Accumulator`; ``compute`` gives the mean of each
      score over the videos where it is defined (values summed in fixed point, 2**-24 per
      video, so the result does not depend on batching), and ``videos``.

    >>> acc = per_video_hungarian(num_classes=2, num_clusters=2)
    >>> state = acc.update(acc.init(), [[0, 0, 1, 1]], [[1, 1, 0, 0]])
    >>> state = acc.update(state, [[0, 1, 1, 1]], [[0, 0, 0, 0]])
    >>> float(acc.compute(state)["mof"])
    0.875
    """
    C = checks.static_int("num_classes", num_classes, minimum=1)
    K = checks.static_int("num_clusters", num_clusters, minimum=1)
    protocol = checks.static_choice("protocol", protocol, PER_VIDEO_PROTOCOLS)
    keys = ("mof", "iou", "f1") if protocol == "twfinch" else ("mof", "miou", "f1")
    exclude = checks.static_bool("exclude_background", exclude_background)
    if exclude and protocol == "twfinch":  # TW-FINCH scores -1 as a class: it was ignored
        raise ValueError(
            "exclude_background is ASOT's (protocol='asot'); TW-FINCH scores background as a class."
        )

    def init():
        return PerVideoState(counting.zeros(len(keys)), counting.zeros(len(keys)), counting.zeros())

    def update(state, targets, predictions, *, mask=None, iou_divisor=None):
        kw = dict(num_classes=C, num_clusters=K, mask=mask)
        if protocol == "twfinch":
            scores = per_video_hungarian_scores(targets, predictions, iou_divisor=iou_divisor, **kw)
        elif iou_divisor is not None:  # ASOT divides by the classes: it was ignored
            raise ValueError("iou_divisor is TW-FINCH's (protocol='twfinch'); ASOT takes none.")
        else:
            scores = asot_hungarian_scores(
                targets, predictions, mode="per", exclude_background=exclude, **kw
            )
        targets = jnp.asarray(targets)
        valid = jnp.ones(targets.shape, jnp.bool_) if mask is None else jnp.asarray(mask)
        video = jnp.any(valid, axis=-1).reshape(-1)
        values = jnp.stack([jnp.reshape(scores[k], (-1,)) for k in keys], axis=-1)
        defined = video[:, None] & ~jnp.isnan(values)
        fixed = jnp.where(defined, jnp.round(values * SCALE), 0).astype(jnp.int32)
        sums, counts, videos = counting.add_sums(state, (fixed, defined, video))
        return PerVideoState(sums, counts, videos)

    def compute(state):
        means = counting.ratio(state.sums, state.defined) / SCALE  # rounded once
        out = {k: means[i] for i, k in enumerate(keys)}
        return {**out, "videos": counting.to_integer(state.videos)}

    return Accumulator(init, update, merge_states, compute)
