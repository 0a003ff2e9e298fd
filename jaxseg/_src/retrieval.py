"""Retrieval metrics from a similarity matrix: ranks, Recall@K, MRR, median and mean rank.

The rank of a query's match is counted, not sorted: the number of valid items scored higher,
plus a share of the tied ones set by ``ties``. So a constant similarity earns no credit under
the default ``"pessimistic"`` rule, and neither does a NaN one (NaN counts as -inf).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

from jaxseg._src import checks
from jaxseg._src.numerics import count_ratio, divide, pairwise_sum, safe_divide
from jaxseg._src.programs import one_program
from jaxseg._src.ranking import descending_keys

TIES = ("pessimistic", "optimistic", "average")


def _ranks(similarity, targets, mask, item_mask, ties):
    """Validated 0-based ranks ``float32[..., Q]`` and the query validity ``bool[..., Q]``."""
    ties = checks.static_choice("ties", ties, TIES)
    similarity = checks.as_float("similarity", similarity, min_ndim=2)
    # NaN (a diverged model) is the lowest similarity: a NaN match must not rank first
    similarity = jnp.where(jnp.isnan(similarity), -jnp.inf, similarity)
    *batch, num_queries, num_items = similarity.shape
    batch = tuple(batch)
    if targets is None:
        if num_queries > num_items:
            raise ValueError(
                f"similarity [..., Q, I] needs Q <= I for diagonal matches (targets=None), got "
                f"{similarity.shape}."
            )
        targets = jnp.broadcast_to(jnp.arange(num_queries, dtype=jnp.int32), (*batch, num_queries))
    targets = checks.as_int_labels("targets", targets)
    if targets.shape != (*batch, num_queries):
        raise ValueError(f"targets must have shape {(*batch, num_queries)}, got {targets.shape}.")
    mask = checks.as_mask(mask, (*batch, num_queries))
    item_mask = checks.as_mask(item_mask, (*batch, num_items), "item_mask")
    target = jnp.clip(targets.astype(jnp.int32), 0, max(num_items - 1, 0))[..., None]
    # compared by their bits, as top-k: XLA's CPU code flushes subnormals to zero in float
    # comparisons, which tied a subnormal similarity with 0
    keys = descending_keys(similarity)
    matched = jnp.take_along_axis(keys, target, axis=-1)
    index = lax.broadcasted_iota(jnp.int32, similarity.shape, similarity.ndim - 1)
    others = index != target
    if item_mask is not None:
        others = others & item_mask[..., None, :]
    higher = jnp.sum(others & (keys < matched), axis=-1, dtype=jnp.int32)
    tied = jnp.sum(others & (keys == matched), axis=-1, dtype=jnp.int32)
    if ties == "pessimistic":
        rank = (higher + tied).astype(jnp.float32)
    elif ties == "optimistic":
        rank = higher.astype(jnp.float32)
    else:
        rank = higher.astype(jnp.float32) + 0.5 * tied.astype(jnp.float32)
    # A match that is no item (a target outside [0, I), or a padding item) is never
    # retrieved: rank +inf, so it is a miss at every k and adds 0 to the MRR.
    real = checks.in_label_range(targets, num_items)
    if item_mask is not None:
        items = jnp.broadcast_to(item_mask[..., None, :], similarity.shape)
        real = real & jnp.take_along_axis(items, target, axis=-1)[..., 0]
    rank = jnp.where(real, rank, jnp.inf)
    valid = jnp.ones(targets.shape, bool) if mask is None else mask
    return rank, valid


def doubled_ranks(rank, num_items: int):
    """int32 twice the 0-based ranks ``[...]`` (exact for the half ranks of ``"average"``
    ties), ``2 * num_items`` for a match never retrieved (rank +inf): the cells of a
    histogram of ranks, ``[2 I + 1]``."""
    doubled = jnp.where(jnp.isfinite(rank), 2.0 * rank, 2.0 * num_items)
    return jnp.round(doubled).astype(jnp.int32)


def reciprocal_rank_mean(counts):
    """MRR from float32 rank histograms ``[..., 2 I + 1]`` (:func:`doubled_ranks`' cells):
    ``sum_r counts_r / (r + 1) / sum_r counts_r``, NaN for no query.

    The batch metric and the streaming accumulator both compute it so, from the same counts
    in the same order of additions, so that they give the same bits: a sum over queries in
    their order would depend on that order and on how the stream split them.
    """
    cells = counts.shape[-1]
    rank = jnp.arange(cells, dtype=jnp.float32) / 2.0
    reciprocal = jnp.where(jnp.arange(cells) < cells - 1, divide(jnp.float32(1.0), rank + 1.0), 0.0)
    total = pairwise_sum(counts * reciprocal.reshape((1,) * (counts.ndim - 1) + (cells,)))
    return safe_divide(total, pairwise_sum(counts), jnp.nan)


def _query_mean(values, valid):
    """Mean of ``values`` over the valid queries (last axis), NaN for none."""
    total = jnp.sum(jnp.where(valid, values, 0.0), axis=-1)
    return count_ratio(total, jnp.sum(valid, axis=-1, dtype=jnp.int32), jnp.nan)


@one_program
def retrieval_ranks(
    similarity: jax.typing.ArrayLike,
    *,
    targets: jax.typing.ArrayLike | None = None,
    item_mask: jax.typing.ArrayLike | None = None,
    ties: str = "pessimistic",
) -> jax.Array:
    """0-based rank of each query's match: the number of items ranked ahead of it.

    Args:
      similarity: float ``[..., Q, I]``, query ``q`` against item ``i`` (higher = closer);
        NaN counts as -inf, the lowest.
      targets: optional integer ``[..., Q]``: index of each query's match; default None, the
        diagonal (query ``q`` matches item ``q``, which needs ``Q <= I``). A match outside
        ``[0, I)`` or on a padding item is never retrieved (rank +inf: a miss at every k,
        reciprocal rank 0).
      item_mask: optional ``bool[..., I]``, True = real item (padding items never outrank);
        default None: every item is real.
      ties: static ``"pessimistic"`` (default: tied items rank ahead of the match),
        ``"optimistic"`` (behind it) or ``"average"`` (half of them ahead).

    Returns:
      ``float32[..., Q]`` in [0, I - 1] (a multiple of 0.5 with ``ties="average"``); +inf
      for a match that is no real item.

    >>> sim = jnp.array([[0.9, 0.1, 0.5], [0.7, 0.2, 0.2], [0.3, 0.3, 0.3]])
    >>> retrieval_ranks(sim).tolist()
    [0.0, 2.0, 2.0]

    Note: the similarity comes first (not truth first) because the targets are optional.
    """
    return _ranks(similarity, targets, None, item_mask, ties)[0]


@one_program
def recall_at_k(
    similarity: jax.typing.ArrayLike,
    *,
    k: tuple[int, ...] = (1, 5, 10),
    targets: jax.typing.ArrayLike | None = None,
    mask: jax.typing.ArrayLike | None = None,
    item_mask: jax.typing.ArrayLike | None = None,
    ties: str = "pessimistic",
) -> jax.Array:
    """Recall@K: fraction of valid queries whose match ranks among the first ``k`` items.

    ``R@k = mean_q [rank_q < k]`` with 0-based ranks from :func:`retrieval_ranks`.

    Args:
      similarity, targets, item_mask, ties: as in :func:`retrieval_ranks`.
      k: static tuple of positive ints (an int is accepted); default ``(1, 5, 10)``.
      mask: optional ``bool[..., Q]``, True = valid query; default None: every query.

    Returns:
      ``float32[..., len(k)]`` in [0, 1]; NaN when no query is valid.

    >>> sim = jnp.array([[0.9, 0.1, 0.5], [0.7, 0.2, 0.2], [0.3, 0.3, 0.3]])
    >>> recall_at_k(sim, k=(1, 2)).tolist()
    [0.3333333432674408, 0.3333333432674408]

    References:
      Luo et al., "CLIP4Clip", 2021 (``metrics.compute_metrics``, no ties);
      Liu et al., "Use What You Have: Video retrieval using representations from collaborative
      experts", BMVC 2019 (tie averaging).
    """
    ks = checks.static_ints("k", k)
    rank, valid = _ranks(similarity, targets, mask, item_mask, ties)
    # k past I takes every item; capped, so that a k past int32 is no OverflowError
    num_items = jnp.shape(similarity)[-1]
    hits = [_query_mean((rank < min(kk, num_items)).astype(jnp.float32), valid) for kk in ks]
    return jnp.stack(hits, axis=-1)


@one_program
def mean_reciprocal_rank(
    similarity: jax.typing.ArrayLike,
    *,
    targets: jax.typing.ArrayLike | None = None,
    mask: jax.typing.ArrayLike | None = None,
    item_mask: jax.typing.ArrayLike | None = None,
    ties: str = "pessimistic",
) -> jax.Array:
    """Mean reciprocal rank: ``mean_q 1 / (rank_q + 1)`` over valid queries.

    Args:
      similarity, targets, mask, item_mask, ties: as in :func:`recall_at_k`.

    Returns:
      ``float32[...]`` in (0, 1]; NaN when no query is valid.

    >>> sim = jnp.array([[0.9, 0.1, 0.5], [0.7, 0.2, 0.2], [0.3, 0.3, 0.3]])
    >>> round(float(mean_reciprocal_rank(sim)), 6)
    0.555556

    References:
      Voorhees, "The TREC-8 Question Answering Track Report", TREC 1999.
    """
    rank, valid = _ranks(similarity, targets, mask, item_mask, ties)
    batch, cells = rank.shape[:-1], 2 * similarity.shape[-1] + 1
    size = math.prod(batch) * cells
    # Each row's histogram of ranks, scattered flat: row b's cells start at b * cells.
    rows = jnp.arange(math.prod(batch), dtype=jnp.int32).reshape((*batch, 1)) * cells
    index = jnp.where(valid, rows + doubled_ranks(rank, similarity.shape[-1]), size)
    counts = jnp.zeros(size, jnp.float32).at[index].add(1.0, mode="drop")
    return reciprocal_rank_mean(counts.reshape((*batch, cells)))


@one_program
def mean_rank(
    similarity: jax.typing.ArrayLike,
    *,
    targets: jax.typing.ArrayLike | None = None,
    mask: jax.typing.ArrayLike | None = None,
    item_mask: jax.typing.ArrayLike | None = None,
    ties: str = "pessimistic",
) -> jax.Array:
    """Mean 1-based rank of the matches (CLIP4Clip's MeanR).

    ``MeanR = mean_q (rank_q + 1)`` over valid queries, ``rank_q`` from :func:`retrieval_ranks`.

    Args:
      similarity, targets, mask, item_mask, ties: as in :func:`recall_at_k`.

    Returns:
      ``float32[...]`` in [1, I], +inf where a match is no real item; NaN when no query is
      valid.

    >>> sim = jnp.array([[0.9, 0.1, 0.5], [0.7, 0.2, 0.2], [0.3, 0.3, 0.3]])
    >>> round(float(mean_rank(sim)), 6)
    2.333333

    References:
      Luo et al., "CLIP4Clip", 2021 (``metrics.compute_metrics``).
    """
    rank, valid = _ranks(similarity, targets, mask, item_mask, ties)
    return _query_mean(rank + 1.0, valid)


@one_program
def median_rank(
    similarity: jax.typing.ArrayLike,
    *,
    targets: jax.typing.ArrayLike | None = None,
    mask: jax.typing.ArrayLike | None = None,
    item_mask: jax.typing.ArrayLike | None = None,
    ties: str = "pessimistic",
) -> jax.Array:
    """Median 1-based rank of the matches (CLIP4Clip's MedR; mean of the middle two if even).

    ``MedR = median_q (rank_q + 1)`` over valid queries, ``rank_q`` from :func:`retrieval_ranks`.

    Args:
      similarity, targets, mask, item_mask, ties: as in :func:`recall_at_k`.

    Returns:
      ``float32[...]`` in [1, I], +inf where a match is no real item; NaN when no query is
      valid.

    >>> sim = jnp.array([[0.9, 0.1, 0.5], [0.7, 0.2, 0.2], [0.3, 0.3, 0.3]])
    >>> float(median_rank(sim))
    3.0

    References:
      Luo et al., "CLIP4Clip", 2021 (``metrics.compute_metrics``).
    """
    rank, valid = _ranks(similarity, targets, mask, item_mask, ties)
    count = jnp.sum(valid, axis=-1, dtype=jnp.int32, keepdims=True)
    ordered = jnp.sort(jnp.where(valid, rank, jnp.inf), axis=-1)
    last = max(ordered.shape[-1] - 1, 0)
    lower = jnp.take_along_axis(ordered, jnp.clip((count - 1) // 2, 0, last), axis=-1)
    upper = jnp.take_along_axis(ordered, jnp.clip(count // 2, 0, last), axis=-1)
    median = 0.5 * (lower + upper) + 1.0
    return jnp.where(count > 0, median, jnp.nan)[..., 0]
