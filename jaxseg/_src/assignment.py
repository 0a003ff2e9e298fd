"""Optimal one-to-one matching of a table's rows and columns, paired as scipy pairs them.

``optax.assignment.base_hungarian_algorithm`` is a port of the shortest-augmenting-path algorithm
of scipy's ``linear_sum_assignment`` (Crouse 2016): the same row order, the same column scan
order and the same rule on ties. On the same cost matrix it therefore returns the same pairs
as scipy, ties included, as long as the arithmetic is exact (integer costs below 2**24 in
float32, 2**53 under ``jax_enable_x64``). The references of the unsupervised protocols call
scipy on tables of only the labels that occur; :func:`match_block` embeds such a table of
dynamic size in a static matrix without changing any decision of the algorithm.
"""

from __future__ import annotations

import functools

import jax.numpy as jnp
import optax
from jax import lax

from jaxseg._src import checks
from jaxseg._src.batching import largest, lift
from jaxseg._src.programs import one_program

# Cost of the cells outside the live block: above any path cost inside it, finite in float32.
_OUTSIDE = 1e30


def float_dtype():
    """float32, or float64 under ``jax_enable_x64`` (the precision optax solves in)."""
    return jnp.asarray(0.0).dtype


def match_block(cost, num_rows, num_cols, *, few_rows: int = 0):
    """scipy's ``linear_sum_assignment(cost[:num_rows, :num_cols])`` on a static ``cost``.

    Args:
      cost: float ``[R, N]`` costs to minimise; only the top-left block counts.
      num_rows: int32 scalar (may be traced), rows of the live block, ``<= R``.
      num_cols: int32 scalar (may be traced), columns of the live block, ``<= N``.
      few_rows: static; if positive, a matrix of that many rows serves whenever every block
        of the batch has at most that many rows once oriented (0: always the full one).

    Returns:
      ``(col_for_row int32 [R], row_for_col int32 [N])``: the partner of each row/column of
      the block, -1 where it has none (outside the block, or left over in a rectangular one).

    scipy solves the transposed block when it has fewer columns than rows; so does this. The
    oriented block (``r <= c``) sits in the top-left of the static matrix of
    :func:`_embedded_solution`, and the algorithm runs one augmentation per row of that
    matrix: ``max(R, N)`` rows, or ``few_rows`` where every oriented block of the batch (of
    all examples under ``jax.vmap``) fits them, as a video's clusters against every class do
    in the per-video unsupervised protocols. Both are compiled; one runs.
    """
    R, N = cost.shape
    S = max(R, N, 1)
    transpose = num_cols < num_rows
    square = jnp.zeros((S, S), cost.dtype).at[:R, :N].set(cost)
    oriented = jnp.where(transpose, square.T, square)
    live_rows = jnp.where(transpose, num_cols, num_rows)
    live_cols = jnp.where(transpose, num_rows, num_cols)
    solve = functools.partial(_embedded_solution, oriented, live_rows, live_cols)
    if 0 < few_rows < S:
        cols = lax.cond(
            largest(live_rows) <= few_rows,
            lambda: jnp.pad(solve(few_rows), (0, S - few_rows), constant_values=-1),
            lambda: solve(S),
        )
    else:
        cols = solve(S)
    rows = jnp.arange(S, dtype=jnp.int32)
    live = rows < live_rows
    partner = jnp.where(live, cols, -1)
    inverse = jnp.full(S, -1, jnp.int32).at[jnp.where(live, cols, S)].set(rows, mode="drop")
    col_for_row = jnp.where(transpose, inverse, partner)[:R]
    row_for_col = jnp.where(transpose, partner, inverse)[:N]
    return col_for_row, row_for_col


# Rows of match_block's small matrix for batches of small blocks (one augmentation each):
# more than the clusters of a video of the unsupervised benchmarks.
FEW_ROWS = 16


def _embedded_solution(oriented, live_rows, live_cols, rows: int):
    """int32 ``[rows]``: the column of each of the first ``rows`` rows when the oriented live
    block (top-left of ``oriented [S, S]``, ``live_rows <= rows``) is solved inside a
    ``[rows, S + rows]`` matrix.

    The block's rows come first in the algorithm's row loop and its columns last in the
    column scan (which runs from the last column down), exactly as when it is solved alone;
    every other cell of the block's rows costs :data:`_OUTSIDE`, so no shortest path leaves
    the block, and each extra row has a zero-cost spare column of its own (columns ``S`` on),
    so no extra row ever enters it.
    """
    S = oriented.shape[0]
    i = jnp.arange(rows)[:, None]
    j = jnp.arange(S + rows)[None, :]
    padded = jnp.concatenate([oriented[:rows], jnp.zeros((rows, rows), oriented.dtype)], axis=1)
    inside = (i < live_rows) & (j < live_cols)
    spare = (i >= live_rows) & (j >= S)
    matrix = jnp.where(inside, padded, jnp.where(spare, 0.0, _OUTSIDE).astype(oriented.dtype))
    _, cols = optax.assignment.base_hungarian_algorithm(matrix)
    return cols.astype(jnp.int32)


@one_program
def hungarian_matching(table, *, num_rows=None, num_cols=None):
    """Maximum-weight one-to-one matching of the rows and columns of each table.

    Maximises ``sum_i table[i, m(i)]`` over one-to-one maps ``m`` between the first
    ``num_rows`` rows and the first ``num_cols`` columns, matching ``min(num_rows, num_cols)``
    pairs (a rectangular table leaves the surplus rows or columns unmatched). Among optimal
    matchings the one returned is the one ``scipy.optimize.linear_sum_assignment(table,
    maximize=True)`` returns (same algorithm, same tie rule), deterministic, exact for integer
    tables below 2**24 (2**53 under ``jax_enable_x64``).

    Args:
      table: ``[..., R, N]`` numbers to maximise (e.g. a :func:`contingency_table`).
      num_rows: optional int ``[...]`` (may be traced), rows taking part, ``<= R``; default R.
      num_cols: optional int ``[...]``, columns taking part, ``<= N``; default N.

    Returns:
      ``(col_for_row, row_for_col)``: int32 ``[..., R]`` and ``[..., N]``, the partner of each
      row and column, -1 where there is none.

    >>> col_for_row, row_for_col = hungarian_matching([[1, 5, 0], [4, 4, 1]])
    >>> col_for_row.tolist(), row_for_col.tolist()
    ([1, 0], [1, 0, -1])

    References:
      Kuhn, The Hungarian method for the assignment problem, 1955. Crouse, On implementing 2D
      rectangular assignment algorithms, IEEE TAES 2016 (scipy's and optax's algorithm).
    """
    table = checks.as_float("table", table, min_ndim=2)
    R, N = table.shape[-2:]
    batch = table.shape[:-2]
    num_rows = jnp.broadcast_to(jnp.asarray(R if num_rows is None else num_rows), batch)
    num_cols = jnp.broadcast_to(jnp.asarray(N if num_cols is None else num_cols), batch)
    cost = -table.astype(float_dtype())

    def one(c, r, n):
        return match_block(c, r.astype(jnp.int32), n.astype(jnp.int32), few_rows=FEW_ROWS)

    return lift(one, (cost, num_rows, num_cols), (2, 0, 0))


def compact(present):
    """Indices with ``present`` first (ascending), then the others; and how many are present.

    ``table[compact(rows)[0]]`` puts the labels that occur first in sorted order, as
    ``np.unique`` lists them, followed by all-zero rows.
    """
    order = jnp.argsort(~present, stable=True).astype(jnp.int32)
    return order, jnp.sum(present, dtype=jnp.int32)
