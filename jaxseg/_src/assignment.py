"""Optimal one-to-one matching of a table's rows and columns, paired as scipy pairs them.

:func:`shortest_augmenting_paths` is the algorithm of scipy's ``linear_sum_assignment``
(Crouse 2016): the same row order, the same column scan order and the same rule on ties. On
the same cost matrix it therefore returns the same pairs as scipy, ties included, as long as
the arithmetic is exact: the path lengths and dual variables it sums from integer costs must
stay below 2**24 in float32 (2**53 under ``jax_enable_x64``). They exceed the largest cost:
a 3 x 3 table of entries just below 2**24 already misses scipy's optimum by one in float32.
The references of the unsupervised protocols call scipy on tables of only
the labels that occur; :func:`match_block` embeds such a table of dynamic size in a static
matrix without changing any decision of the algorithm.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxseg._src import checks
from jaxseg._src.batching import lift
from jaxseg._src.programs import one_program

# Cost of the cells outside the live block: above any path cost inside it, finite in float32.
_OUTSIDE = 1e30


def float_dtype():
    """float32, or float64 under ``jax_enable_x64`` (the precision the matching solves in)."""
    return jnp.asarray(0.0).dtype


def match_block(cost, num_rows, num_cols):
    """scipy's ``linear_sum_assignment(cost[:num_rows, :num_cols])`` on a static ``cost``.

    Args:
      cost: float ``[R, N]`` costs to minimise; only the top-left block counts.
      num_rows: int32 scalar (may be traced), rows of the live block, ``<= R``.
      num_cols: int32 scalar (may be traced), columns of the live block, ``<= N``.

    Returns:
      ``(col_for_row int32 [R], row_for_col int32 [N])``: the partner of each row/column of
      the block, -1 where it has none (outside the block, or left over in a rectangular one).

    scipy solves the transposed block when it has fewer columns than rows; so does this. The
    oriented block (``r <= c``) sits in the top-left of an ``[S, 2S]`` matrix (``S =
    max(R, N)``): its rows come first in the row loop and its columns last in the column scan
    (which runs from the last column down), exactly as when solved alone; every other cell of
    the block's rows costs :data:`_OUTSIDE`, so no shortest path leaves the block, and each
    extra row has a zero-cost extra column of its own, so no extra row ever enters it.
    """
    R, N = cost.shape
    S = max(R, N, 1)
    transpose = num_cols < num_rows
    square = jnp.zeros((S, S), cost.dtype).at[:R, :N].set(cost)
    oriented = jnp.where(transpose, square.T, square)
    live_rows = jnp.where(transpose, num_cols, num_rows)
    live_cols = jnp.where(transpose, num_rows, num_cols)
    i = jnp.arange(S, dtype=jnp.int32)[:, None]
    j = jnp.arange(2 * S, dtype=jnp.int32)[None, :]
    padded = jnp.concatenate([oriented, jnp.zeros((S, S), cost.dtype)], axis=1)
    inside = (i < live_rows) & (j < live_cols)
    spare = (i >= live_rows) & (j >= S)
    matrix = jnp.where(inside, padded, jnp.where(spare, 0.0, _OUTSIDE).astype(cost.dtype))
    cols = shortest_augmenting_paths(matrix)
    rows = jnp.arange(S, dtype=jnp.int32)
    # A row left on an outside column has no partner: with forbidden (+inf cost) cells a
    # row may have no finite one (scipy: "infeasible"), and that column is not in the block.
    live = (rows < live_rows) & (cols < live_cols)
    partner = jnp.where(live, cols, -1)
    inverse = jnp.full(S, -1, jnp.int32).at[jnp.where(live, cols, S)].set(rows, mode="drop")
    col_for_row = jnp.where(transpose, inverse, partner)[:R]
    row_for_col = jnp.where(transpose, partner, inverse)[:N]
    return col_for_row, row_for_col


class _Search(NamedTuple):
    """The state of one row's search for a shortest augmenting path (scipy's names).

    Attributes:
      row: int32, the row whose edges are scanned next.
      min_value: float, the length of the path to the column reached last.
      path_costs: float ``[N]``, the shortest path found to each column so far.
      path: int32 ``[N]``, the row before each column on that path.
      scanned_columns: bool ``[N]``, columns reached (no longer in the scan).
      scanned_rows: bool ``[R]``, rows whose edges were scanned.
      position: int32 ``[N]``, each unscanned column's place in the scan order.
      remaining: int32, the number of unscanned columns.
      sink: int32, the free column reached (-1: none yet).
    """

    row: jax.Array
    min_value: jax.Array
    path_costs: jax.Array
    path: jax.Array
    scanned_columns: jax.Array
    scanned_rows: jax.Array
    position: jax.Array
    remaining: jax.Array
    sink: jax.Array


def _search_step(cost, u, v, row4col, search: _Search) -> _Search:
    """One step of the search: relax the edges of ``search.row``, then reach the unscanned
    column of shortest path, scipy's way.

    scipy scans the unscanned columns in order and keeps a column of lower cost, or of equal
    cost if it is free: of the columns of lowest cost that is the last free one in the scan
    order if there is one, else the first. It then moves the scan's last column into the
    reached column's place. All columns are relaxed at once here (each independently of the
    others, with the same float operations), and the choice is made from the scan positions.
    """
    i = search.row
    unscanned = ~search.scanned_columns
    reduced = search.min_value + cost[i] - u[i] - v
    better = unscanned & (reduced < search.path_costs)
    path = jnp.where(better, i, search.path)
    path_costs = jnp.where(better, reduced, search.path_costs)
    values = jnp.where(unscanned, path_costs, jnp.inf)
    lowest = jnp.min(values)
    ties = unscanned & (values == lowest)
    free = ties & (row4col < 0)
    last_free = jnp.argmax(jnp.where(free, search.position, -1))
    first_tie = jnp.argmin(jnp.where(ties, search.position, cost.shape[1]))
    j = jnp.where(jnp.any(free), last_free, first_tie).astype(jnp.int32)
    remaining = search.remaining - 1
    moved = jnp.argmax(unscanned & (search.position == remaining))
    reaches_free = row4col[j] < 0
    return _Search(
        jnp.where(reaches_free, i, row4col[j]),
        lowest,
        path_costs,
        path,
        search.scanned_columns.at[j].set(True),
        search.scanned_rows,
        search.position.at[moved].set(search.position[j]),
        remaining,
        jnp.where(reaches_free, j, -1),
    )


def _filled(like, shape, value, dtype):
    """``jnp.full(shape, value, dtype)``, varying over a ``shard_map``'s axes as ``like`` does:
    a loop's carry must keep its type, and the steps mix it with ``like``."""
    return jnp.full_like(like, value, dtype=dtype, shape=shape)


def _assign_row(cost, row, state):
    """Adds ``row`` to the matching ``state = (u, v, row4col, col4row)``: a shortest
    augmenting path from it, the dual variables updated, the path's pairs flipped."""
    u, v, row4col, col4row = state
    R, N = cost.shape

    def step(search):
        search = search._replace(scanned_rows=search.scanned_rows.at[search.row].set(True))
        return _search_step(cost, u, v, row4col, search)

    start = _Search(
        row + _filled(cost, (), 0, jnp.int32),
        _filled(cost, (), 0, cost.dtype),
        _filled(cost, (N,), jnp.inf, cost.dtype),
        _filled(cost, (N,), -1, jnp.int32),
        _filled(cost, (N,), False, jnp.bool_),
        _filled(cost, (R,), False, jnp.bool_),
        _filled(cost, (N,), N - 1, jnp.int32) - jnp.arange(N, dtype=jnp.int32),  # last first
        _filled(cost, (), N, jnp.int32),
        _filled(cost, (), -1, jnp.int32),
    )
    found = lax.while_loop(lambda search: search.sink < 0, step, start)
    min_value, path_costs = found.min_value, found.path_costs
    u = u.at[row].add(min_value)
    others = found.scanned_rows & (jnp.arange(R, dtype=jnp.int32) != row)
    u = jnp.where(others, u + (min_value - path_costs[jnp.maximum(col4row, 0)]), u)
    v = jnp.where(found.scanned_columns, v - (min_value - path_costs), v)

    def flip(carry):
        j, row4col, col4row, _ = carry
        i = found.path[j]
        return col4row[i], row4col.at[j].set(i), col4row.at[i].set(j), i == row

    carry = (found.sink, row4col, col4row, _filled(cost, (), False, jnp.bool_))
    _, row4col, col4row, _ = lax.while_loop(lambda c: ~c[3], flip, carry)
    return u, v, row4col, col4row


def shortest_augmenting_paths(cost):
    """The column of each row in a minimum-cost matching of ``cost`` (scipy's
    ``linear_sum_assignment``, rows at most as many as columns).

    Each row in turn joins the matching along a shortest augmenting path (Dijkstra's search
    on reduced costs, the dual variables ``u``, ``v`` keeping them non-negative). The search
    visits one column per step and relaxes every column at once, so a step costs a few
    vector operations over the columns.

    Args:
      cost: float ``[R, N]`` with ``R <= N``, finite.

    Returns:
      int32 ``[R]``: each row's column.

    >>> shortest_augmenting_paths(jnp.array([[4.0, 1.0, 3.0], [2.0, 0.0, 5.0]])).tolist()
    [1, 0]

    References:
      Crouse, On implementing 2D rectangular assignment algorithms, IEEE TAES 2016 (the
      algorithm of scipy's ``linear_sum_assignment``).
    """
    R, N = cost.shape
    start = (
        _filled(cost, (R,), 0, cost.dtype),
        _filled(cost, (N,), 0, cost.dtype),
        _filled(cost, (N,), -1, jnp.int32),
        _filled(cost, (R,), -1, jnp.int32),
    )
    assign = functools.partial(_assign_row, cost)
    return lax.fori_loop(0, R, assign, start)[3]


def _block_within_table(arguments: dict) -> None:
    """Host check of :func:`hungarian_matching`: ``0 <= num_rows <= R``, ``0 <= num_cols <= N``,
    and no NaN or +inf in the table (scipy refuses them; the search would pair at random)."""
    table = np.asarray(arguments["table"])
    invalid = np.isnan(table) | (table == np.inf) if table.dtype.kind == "f" else None
    if invalid is not None and invalid.any():
        where = checks.first_index(invalid)
        raise ValueError(
            f"table{list(where)} = {table[where]}: the table must hold finite numbers "
            "(or -inf for a pair that must not be matched)."
        )
    R, N = np.shape(arguments["table"])[-2:]
    for name, size in (("num_rows", R), ("num_cols", N)):
        if arguments[name] is None:
            continue
        value = np.asarray(arguments[name])
        outside = (value < 0) | (value > size)
        if outside.any():
            where = checks.first_index(outside)
            raise ValueError(
                f"{name} must lie in [0, {size}] (the table's "
                f"{'rows' if name == 'num_rows' else 'columns'}), got {value[where]}"
                + (f" at index {where}." if where else ".")
            )


def _live_size(name: str, value, size: int, batch: tuple[int, ...]) -> jax.Array:
    """``value`` (default ``size``) as int32 broadcast to ``batch``, clipped to ``[0, size]``."""
    value = checks.integer_values(name, size if value is None else value, batch)
    return jnp.clip(value, 0, size).astype(jnp.int32)


@one_program(host_check=_block_within_table)
def hungarian_matching(table, *, num_rows=None, num_cols=None):
    """Maximum-weight one-to-one matching of the rows and columns of each table.

    Maximises ``sum_i table[i, m(i)]`` over one-to-one maps ``m`` between the first
    ``num_rows`` rows and the first ``num_cols`` columns, matching ``min(num_rows, num_cols)``
    pairs (a rectangular table leaves the surplus rows or columns unmatched). Among optimal
    matchings the one returned is the one ``scipy.optimize.linear_sum_assignment(table,
    maximize=True)`` returns (same algorithm, same tie rule), deterministic, and exact for
    integer tables while the sums the algorithm forms stay below 2**24 (2**53 under
    ``jax_enable_x64``). Those sums exceed the largest entry (a 3 x 3 table of entries just
    below 2**24 misses scipy's optimum by 1): for counts in the millions, enable x64.

    Args:
      table: ``[..., R, N]`` numbers to maximise (e.g. a :func:`contingency_table`), finite
        or -inf for a pair that must not be matched. A NaN or +inf raises ``ValueError``
        (under ``jax.jit`` it is a precondition).
      num_rows: optional int ``[...]``, rows taking part, in ``[0, R]``; default R. A
        concrete value outside raises ``ValueError``; a traced one is clipped there.
      num_cols: optional int ``[...]``, columns taking part, in ``[0, N]``; default N (the
        same rule).

    Returns:
      ``(col_for_row, row_for_col)``: int32 ``[..., R]`` and ``[..., N]``, the partner of each
      row and column, -1 where there is none (also where -inf leaves a row no partner, a
      table scipy calls infeasible).

    >>> col_for_row, row_for_col = hungarian_matching([[1, 5, 0], [4, 4, 1]])
    >>> col_for_row.tolist(), row_for_col.tolist()
    ([1, 0], [1, 0, -1])

    References:
      Kuhn, The Hungarian method for the assignment problem, 1955. Crouse, On implementing 2D
      rectangular assignment algorithms, IEEE TAES 2016 (scipy's algorithm).
    """
    # Integers straight to the matching's precision: through float32 they would round
    # above 2**24.
    table = checks.as_float("table", table, min_ndim=2, dtype=float_dtype())
    R, N = table.shape[-2:]
    batch = table.shape[:-2]
    num_rows = _live_size("num_rows", num_rows, R, batch)
    num_cols = _live_size("num_cols", num_cols, N, batch)
    cost = -table.astype(float_dtype())
    return lift(match_block, (cost, num_rows, num_cols), (2, 0, 0))


def compact(present):
    """Indices with ``present`` first (ascending), then the others; and how many are present.

    ``table[compact(rows)[0]]`` puts the labels that occur first in sorted order, as
    ``np.unique`` lists them, followed by all-zero rows.
    """
    order = jnp.argsort(~present, stable=True).astype(jnp.int32)
    return order, jnp.sum(present, dtype=jnp.int32)
