"""The edit-distance dynamic programme, hard and soft, as an anti-diagonal wavefront.

One recursion serves every edit distance in jaxseg::

    R[0, 0] = 0
    R[i, j] = smin_γ(R[i-1, j] + c_del[i], R[i-1, j-1] + c_sub[i, j], R[i, j-1] + c_ins[j])
    smin_γ(x) = -γ log Σ_k exp(-x_k / γ)        (γ = 0: min)

and the value is ``R[len_a, len_b]``. Cell ``(i, j)`` depends only on cells above and to the
left of it, so the value is independent of padded rows and columns; those cells are only kept
finite (out-of-grid predecessors are ``BIG``, never ``inf``, because ``0 * inf`` would poison
gradients).

The grid is swept one anti-diagonal ``d = i + j`` at a time: ``N + M`` sequential steps, each a
vector operation along the shorter axis. The soft value's derivative (a ``custom_jvp``) comes
from the expected-alignment recursion (Mensch & Blondel, 2018), run backward over the grid:
the forward pass stores the three softmin probabilities of every cell, so the backward loop
only multiplies and adds; it also gives the exact derivative with respect to γ, so γ can be a
traced (annealed) value. The derivative is that gradient dotted with the tangents, so reverse
mode, forward mode and higher derivatives (which differentiate the recursion) all work. The
same forward without it (``backward="autodiff"``) is kept as a test oracle.

Each anti-diagonal gathers its costs as it goes, so no ``N x M`` array of costs is formed when
they come from a table (:func:`soft_edit_dp_by_label`). The custom backward pass needs the
softmin probabilities (3 floats a cell): kept from the forward pass on small grids; on large
ones the forward pass keeps only the cells of the two diagonals before every block of about
``sqrt(N + M)`` diagonals, and the backward pass recomputes one block's probabilities at a
time (gradient checkpointing: twice the forward work, ``O(sqrt(N + M) min(N, M))`` memory).
:func:`hard_levenshtein` needs ``O(N + M)``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from jaxseg._src.capacity import recompute_blocks
from jaxseg._src.loss_utils import compute_dtype

BIG_INT = 1 << 28
BIG_FLOAT = 1e9
_MIN_GAMMA = 1e-30  # γ = 0 is evaluated as this (a hard min with tie-splitting gradients)


def _shift_down(v, fill):
    """``out[..., i] = v[..., i - 1]``, ``out[..., 0] = fill``."""
    return jnp.concatenate([jnp.full((*v.shape[:-1], 1), fill, v.dtype), v[..., :-1]], axis=-1)


def _shift_up(v, fill):
    """``out[..., i] = v[..., i + 1]``, ``out[..., -1] = fill``."""
    return jnp.concatenate([v[..., 1:], jnp.full((*v.shape[:-1], 1), fill, v.dtype)], axis=-1)


def _in_grid(n: int, m: int, d):
    """Row indices ``i = 0..n`` of anti-diagonal ``d``, their columns and in-grid flags."""
    i = jnp.arange(n + 1, dtype=jnp.int32)
    j = d - i
    return i, j, (j >= 0) & (j <= m)


def _wavefront_step(diagonal_costs: Callable, n: int, m: int, combine: Callable, big):
    """``step(r1, r2, d)``: the cells of anti-diagonal ``d`` from those of ``d - 1`` and ``d - 2``.

    ``diagonal_costs(d)`` returns the deletion, substitution and insertion cost of every cell
    ``(i, d - i)`` (vectors of length ``n + 1``; values of out-of-grid cells are ignored);
    ``combine(up, diag, left)`` returns the new cells and per-cell auxiliary values (or None).
    The step returns the cells (``big`` outside the grid), the auxiliary values and the
    in-grid flags.
    """

    def step(r1, r2, d):
        c_del, c_sub, c_ins = diagonal_costs(d)
        _, _, in_grid = _in_grid(n, m, d)
        up = _shift_down(r1, big) + c_del
        diag = _shift_down(r2, big) + c_sub
        left = r1 + c_ins
        r, aux = combine(up, diag, left)
        return jnp.where(in_grid, r, big), aux, in_grid

    return step


def _sweep(step: Callable, diagonals, carry, target, at_row, keep: bool):
    """Runs ``step`` over the anti-diagonals ``diagonals`` (int32 ``[S]``, increasing) from
    ``carry = (r1, r2, result)``, the cells of the two diagonals before them and the value so
    far; ``result`` becomes the cell of row ``at_row`` (a one-hot ``[n + 1]`` mask) on diagonal
    ``target``. Returns the carry after the last diagonal and, if ``keep``, the auxiliary
    values of every diagonal (``[S, n + 1]`` each, 0 outside the grid).
    """

    def body(carry, d):
        r1, r2, result = carry
        r, aux, in_grid = step(r1, r2, d)
        result = jnp.where(d == target, jnp.sum(jnp.where(at_row, r, 0)), result)
        aux = jax.tree_util.tree_map(lambda a: jnp.where(in_grid, a, 0), aux) if keep else None
        return (r, r1, result), aux

    return lax.scan(body, carry, diagonals)


def _first_carry(n: int, big, dtype):
    """The carry before diagonal 1: ``R[0, 0] = 0`` on diagonal 0, nothing on diagonal -1."""
    big = jnp.asarray(big, dtype)
    return jnp.full((n + 1,), big).at[0].set(0), jnp.full((n + 1,), big), jnp.zeros((), dtype)


def _target_row(n: int, len_a):
    """One-hot ``[n + 1]`` mask of row ``len_a`` (a mask, not a gather, on every step)."""
    return jnp.arange(n + 1, dtype=jnp.int32) == jnp.clip(len_a, 0, n)


# ----------------------------------------------------------------------------- hard (integer)


def hard_levenshtein(a, b, len_a, len_b) -> jax.Array:
    """Levenshtein distance between the valid prefixes of two integer sequences (unit costs).

    Args:
      a: ``int[N]`` first sequence; only ``a[:len_a]`` is used.
      b: ``int[M]`` second sequence; only ``b[:len_b]`` is used.
      len_a: int scalar in ``[0, N]``, the valid length of ``a``.
      len_b: int scalar in ``[0, M]``, the valid length of ``b``.

    Returns:
      ``int32`` scalar, the minimum number of insertions, deletions and substitutions turning
      ``a[:len_a]`` into ``b[:len_b]``. Runs ``N + M`` vectorised steps in ``O(N + M)`` memory,
      with no ``N × M`` matrix; vmap it for batches.

    >>> int(hard_levenshtein(jnp.array([1, 2, 3, 0]), jnp.array([1, 3, 4]), 3, 3))
    2
    """
    a = jnp.asarray(a)
    b = jnp.asarray(b)
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError(
            f"a and b must be 1-D sequences [N] and [M], got shapes {a.shape} and {b.shape}."
        )
    len_a = jnp.asarray(len_a, jnp.int32)
    len_b = jnp.asarray(len_b, jnp.int32)
    if a.shape[0] > b.shape[0]:  # the vector runs along the shorter axis; Levenshtein is symmetric
        a, b, len_a, len_b = b, a, len_b, len_a
    n, m = a.shape[0], b.shape[0]
    if n == 0 or m == 0:
        return (len_a + len_b).astype(jnp.int32)
    ones_row = jnp.ones((n + 1,), jnp.int32)

    def diagonal_costs(d):
        i, j, _ = _in_grid(n, m, d)
        sub = a[jnp.clip(i - 1, 0, n - 1)] != b[jnp.clip(j - 1, 0, m - 1)]
        return ones_row, sub.astype(jnp.int32), ones_row

    def hard_min(up, diag, left):
        return jnp.minimum(jnp.minimum(up, diag), left), None

    step = _wavefront_step(diagonal_costs, n, m, hard_min, BIG_INT)
    diagonals = jnp.arange(1, n + m + 1, dtype=jnp.int32)
    first = _first_carry(n, BIG_INT, jnp.int32)
    (_, _, result), _ = _sweep(step, diagonals, first, len_a + len_b, _target_row(n, len_a), False)
    return result


# ----------------------------------------------------------------------------- soft (float)


def _softmin3(gamma, with_weights: bool):
    """The fused 3-way ``smin_γ`` (no stacking; stable for any finite inputs).

    With ``with_weights``, also returns the softmin's probabilities of its three arguments,
    from the same exponentials.
    """

    def combine(x, y, z):
        low = jnp.minimum(jnp.minimum(x, y), z)
        ex, ey, ez = (jnp.exp((low - v) / gamma) for v in (x, y, z))
        total = ex + ey + ez
        log_total = jnp.log(total)
        value = low - gamma * log_total
        if not with_weights:
            return value, None
        inverse = 1.0 / total
        return value, (ex * inverse, ey * inverse, ez * inverse)

    return combine


class _Layout(NamedTuple):
    """Static layout of one soft DP (the vector runs along the rows, ``n <= m``)."""

    labels_on_rows: bool  # rows are the labelled side and columns the table's rows, or reverse
    blocks: int  # blocks of diagonals; the backward pass recomputes one block's weights at a time
    size: int  # diagonals per block; ``blocks * size >= n + m``


def _layout(n: int, m: int, labels_on_rows: bool, whole: bool) -> _Layout:
    """One block of every diagonal if ``whole``, else :func:`recompute_blocks` of the
    ``n + m`` diagonals of ``n + 1`` cells (the softmin weights the backward pass needs)."""
    if whole:
        return _Layout(labels_on_rows, 1, n + m)
    return _Layout(labels_on_rows, *recompute_blocks(n + m, n + 1))


def soft_dp_bytes(n: int, m: int) -> int:
    """Scratch bytes of one float32 soft DP's value and custom gradient on an ``n x m`` grid:
    the softmin weights kept for the backward pass (3 floats a cell of one block) and the two
    diagonals kept before each block; the costs and their gradients are the caller's."""
    short = min(n, m)
    layout = _layout(short, max(n, m), True, whole=False)
    return 4 * (short + 1) * (3 * layout.size + 2 * layout.blocks)


def _block_diagonals(layout: _Layout):
    """int32 ``[blocks, size]``: the anti-diagonals ``1..blocks * size``, block by block (those
    past ``n + m`` lie outside the grid and change nothing)."""
    d = jnp.arange(1, layout.blocks * layout.size + 1, dtype=jnp.int32)
    return d.reshape(layout.blocks, layout.size)


def _table_indices(layout: _Layout, labels, n: int, m: int, d):
    """For the cells of diagonal ``d``: the table row and class of their substitution cost
    ``table[row, class]``, and their column (clipped into range; out-of-grid cells get
    any index, their values and gradients are unused or 0)."""
    i, j, _ = _in_grid(n, m, d)
    row, column = jnp.clip(i - 1, 0, n - 1), jnp.clip(j - 1, 0, m - 1)
    labelled, tabled = (row, column) if layout.labels_on_rows else (column, row)
    return tabled, labels[labelled], column


def _diagonal_costs(layout: _Layout, costs: tuple):
    """``diagonal_costs(d)`` of :func:`_wavefront_step` from ``costs = (row_costs [n],
    column_costs [m], table, labels)``: one gather per diagonal, no ``n x m`` array."""
    row_costs, column_costs, table, labels = costs
    n, m = row_costs.shape[0], column_costs.shape[0]
    del_row = jnp.concatenate([jnp.zeros((1,), row_costs.dtype), row_costs])

    def diagonal_costs(d):
        tabled, label, column = _table_indices(layout, labels, n, m, d)
        return del_row, table[tabled, label], column_costs[column]

    return diagonal_costs


def _soft_forward(layout: _Layout, costs: tuple, len_a, len_b, gamma, keep: bool):
    """The soft value ``R[len_a, len_b]`` and what the backward pass needs: with one block, the
    softmin weights of every cell (if ``keep``, else None); with several, the cells of the two
    diagonals before each block (``[blocks, n + 1]`` each)."""
    row_costs, column_costs = costs[:2]
    n, m, dtype = row_costs.shape[0], column_costs.shape[0], row_costs.dtype
    with_weights = keep and layout.blocks == 1
    combine = _softmin3(gamma, with_weights)
    step = _wavefront_step(_diagonal_costs(layout, costs), n, m, combine, BIG_FLOAT)
    first = _first_carry(n, BIG_FLOAT, dtype)
    target, at_row = len_a + len_b, _target_row(n, len_a)
    diagonals = _block_diagonals(layout)
    if layout.blocks == 1:
        (_, _, value), weights = _sweep(step, diagonals[0], first, target, at_row, with_weights)
        return value, weights

    def block(carry, block_diagonals):
        after, _ = _sweep(step, block_diagonals, carry, target, at_row, False)
        return after, carry[:2]

    (_, _, value), before_blocks = lax.scan(block, first, diagonals)
    return value, before_blocks


class _Gradients(NamedTuple):
    """Running sums of the backward pass: the cost gradients and ``∂R/∂γ``."""

    rows: jax.Array  # [n + 1], row 0 unused
    columns: jax.Array  # [m]
    table: jax.Array  # the table's shape
    gamma: jax.Array  # scalar


def _expected_alignment(layout: _Layout, labels, n: int, m: int, target, at_row):
    """``block(carry, (diagonals, weights))``: the expected-alignment recursion over a block of
    diagonals, last first (module docstring).

    ``E[i, j] = ∂R[len_a, len_b] / ∂R[i, j]``: every cell passes ``E`` times each of its softmin
    probabilities to the predecessor of that branch, and the same products are the gradients
    of the branch's cost, added to the running sums where the forward pass gathered the cost;
    ``∂smin_γ/∂γ = Σ_k p_k log p_k`` per cell, weighted by ``E``. The carry is the partial
    ``E`` of the two diagonals after the block and the :class:`_Gradients` so far.
    """

    def step(carry, inputs):
        e_next, e_next2, sums = carry
        d, (p_up, p_diag, p_left) = inputs
        e = e_next + ((d == target) & at_row).astype(e_next.dtype)
        g_up, g_diag, g_left = e * p_up, e * p_diag, e * p_left
        e_prev = e_next2 + _shift_up(g_up, 0.0) + g_left
        tabled, label, column = _table_indices(layout, labels, n, m, d)
        entropy = sum(
            jnp.sum(jnp.where(p > 0, g * jnp.log(jnp.where(p > 0, p, 1.0)), 0.0))
            for g, p in ((g_up, p_up), (g_diag, p_diag), (g_left, p_left))
        )
        sums = _Gradients(
            sums.rows + g_up,
            sums.columns.at[column].add(g_left),
            sums.table.at[tabled, label].add(g_diag),
            sums.gamma + entropy,
        )
        return (e_prev, _shift_up(g_diag, 0.0), sums), None

    return lambda carry, inputs: lax.scan(step, carry, inputs, reverse=True)[0]


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _soft_dp_custom(layout, row_costs, column_costs, table, labels, len_a, len_b, gamma):
    costs = (row_costs, column_costs, table, labels)
    return _soft_forward(layout, costs, len_a, len_b, gamma, keep=False)[0]


@_soft_dp_custom.defjvp
def _soft_dp_custom_jvp(layout, primals, tangents):
    """The value and its derivative along ``tangents``: the gradient of the expected-alignment
    recursion (:func:`_alignment_gradients`) dotted with the cost and γ tangents.

    Linear in the tangents, so reverse mode transposes it into the gradient times the
    cotangent, forward mode (``jax.jvp``, ``jax.jacfwd``) runs it as it is, and higher
    derivatives differentiate the recursion itself.
    """
    row_costs, column_costs, table, labels, len_a, len_b, gamma = primals
    costs = (row_costs, column_costs, table, labels)
    value, kept = _soft_forward(layout, costs, len_a, len_b, gamma, keep=True)
    gradients = _alignment_gradients(layout, costs, len_a, len_b, gamma, kept)
    d_rows, d_columns, d_table, _, _, _, d_gamma = tangents
    pairs = zip(gradients, (d_rows, d_columns, d_table, d_gamma), strict=True)
    return value, sum(jnp.sum(g * t.astype(g.dtype)) for g, t in pairs)


def _alignment_gradients(layout, costs, len_a, len_b, gamma, kept):
    """The gradients of ``R[len_a, len_b]`` with respect to the row costs, column costs,
    table and γ: the expected-alignment recursion over the kept weights, or block by block
    (last block first) over weights recomputed from the diagonals kept before each block."""
    row_costs, column_costs, table, labels = costs
    n, m, dtype = row_costs.shape[0], column_costs.shape[0], row_costs.dtype
    target, at_row = len_a + len_b, _target_row(n, len_a)
    backward = _expected_alignment(layout, labels, n, m, target, at_row)
    zeros = jnp.zeros((n + 1,), dtype)
    sums = _Gradients(zeros, jnp.zeros_like(column_costs), jnp.zeros_like(table), zeros[0])
    diagonals = _block_diagonals(layout)
    if layout.blocks == 1:
        _, _, sums = backward((zeros, zeros, sums), (diagonals[0], kept))
    else:
        combine = _softmin3(gamma, True)
        step = _wavefront_step(_diagonal_costs(layout, costs), n, m, combine, BIG_FLOAT)

        def block(carry, inputs):
            block_diagonals, (r1, r2) = inputs
            start = (r1, r2, zeros[0])
            _, weights = _sweep(step, block_diagonals, start, target, at_row, True)
            return backward(carry, (block_diagonals, weights)), None

        (_, _, sums), _ = lax.scan(block, (zeros, zeros, sums), (diagonals, kept), reverse=True)
    return sums.rows[1:], sums.columns, sums.table, sums.gamma


def _prefix_total(costs, length):
    return jnp.sum(jnp.where(jnp.arange(costs.shape[0], dtype=jnp.int32) < length, costs, 0.0))


def soft_edit_dp_by_label(
    c_del, labels, table, c_ins, len_a, len_b, gamma, *, backward: str = "custom"
):
    """Soft edit distance ``R[len_a, len_b]`` whose substitution costs are gathered by label:
    ``c_sub[i, j] = table[j - 1, labels[i - 1]]`` (module docstring's recursion).

    The segment-level losses compare ``K`` labelled items with ``T`` frames whose costs come
    from a ``[T, C]`` table; gathering each anti-diagonal's costs from it keeps the memory at
    ``O(T C + K + T)`` plus the backward pass's softmin weights, which are kept for a small
    grid and otherwise recomputed block by block from every ~``sqrt(K + T)``-th diagonal
    (:func:`~jaxseg._src.capacity.recompute_blocks`: ``O((K + T)^1/2 min(K, T))``, twice the
    forward work).

    Args:
      c_del: ``float[N]``, cost of consuming row ``i`` alone (``c_del[i - 1]``).
      labels: ``int[N]`` in ``[0, C)``, the label of each row.
      table: ``float[M, C]``, the cost of consuming column ``j`` with a row of label ``c``
        (``table[j - 1, c]``).
      c_ins: ``float[M]``, cost of consuming column ``j`` alone.
      len_a: int scalar in ``[0, N]``, valid rows.
      len_b: int scalar in ``[0, M]``, valid columns.
      gamma: float scalar ≥ 0, the temperature (traced: changing it does not recompile); 0 gives
        the hard minimum, with gradients split evenly between tied branches.
      backward: ``"custom"`` (expected-alignment recursion) or ``"autodiff"`` (JAX
        differentiates the forward scan); both in any mode and order.

    Returns:
      float scalar, float32 (or float64 for float64 costs): bf16/float16 costs are upcast,
      since γ/cost ratios underflow in half precision.

    >>> table = jnp.array([[0., 1.], [1., 0.]])  # frame 0 looks like label 0, frame 1 like 1
    >>> float(soft_edit_dp_by_label(jnp.ones(2), jnp.array([0, 1]), table, jnp.ones(2), 2, 2, 0.0))
    0.0
    """
    labels = jnp.asarray(labels)
    dtype = compute_dtype(c_del, table, c_ins)
    c_del, table, c_ins = (jnp.asarray(c, dtype) for c in (c_del, table, c_ins))
    gamma = jnp.maximum(jnp.asarray(gamma, dtype), _MIN_GAMMA)
    len_a, len_b = jnp.asarray(len_a, jnp.int32), jnp.asarray(len_b, jnp.int32)
    n, m = labels.shape[0], table.shape[0]
    if n == 0 or m == 0:  # one side is empty: consume the other one alone
        return _prefix_total(c_del, len_a) + _prefix_total(c_ins, len_b)
    if n <= m:  # the vector runs along the shorter side; the recursion is symmetric
        rows, columns = (c_del, len_a), (c_ins, len_b)
    else:
        rows, columns = (c_ins, len_b), (c_del, len_a)
    layout = _layout(min(n, m), max(n, m), n <= m, whole=backward == "autodiff")
    costs = (rows[0], columns[0], table, labels)
    if backward == "autodiff":
        return _soft_forward(layout, costs, rows[1], columns[1], gamma, keep=False)[0]
    return _soft_dp_custom(layout, *costs, rows[1], columns[1], gamma)


def soft_edit_dp(c_del, c_sub, c_ins, len_a, len_b, gamma, *, backward: str = "custom"):
    """Soft edit distance ``R[len_a, len_b]`` of the general recursion (module docstring).

    Args:
      c_del: ``float[N]``, cost of consuming row ``i`` alone (``c_del[i - 1]``).
      c_sub: ``float[N, M]``, cost of consuming row ``i`` and column ``j`` together.
      c_ins: ``float[M]``, cost of consuming column ``j`` alone.
      len_a: int scalar in ``[0, N]``, valid rows.
      len_b: int scalar in ``[0, M]``, valid columns.
      gamma: float scalar ≥ 0, the temperature, as in :func:`soft_edit_dp_by_label`.
      backward: ``"custom"`` or ``"autodiff"``, as in :func:`soft_edit_dp_by_label`.

    Returns:
      float scalar, float32 (or float64 for float64 costs).

    >>> float(soft_edit_dp(jnp.ones(2), jnp.array([[0., 1.], [1., 0.]]), jnp.ones(2), 2, 2, 0.0))
    0.0
    """
    c_del, c_sub, c_ins = jnp.asarray(c_del), jnp.asarray(c_sub), jnp.asarray(c_ins)
    if c_sub.ndim != 2 or c_del.shape != c_sub.shape[:1] or c_ins.shape != c_sub.shape[1:]:
        raise ValueError(
            "c_del, c_sub and c_ins must have shapes [N], [N, M] and [M], got "
            f"{c_del.shape}, {c_sub.shape} and {c_ins.shape}."
        )
    if backward not in ("custom", "autodiff"):
        raise ValueError(f"backward must be 'custom' or 'autodiff', got {backward!r}.")
    rows = jnp.arange(c_sub.shape[0], dtype=jnp.int32)  # row i's "label" is its own column
    return soft_edit_dp_by_label(
        c_del, rows, c_sub.T, c_ins, len_a, len_b, gamma, backward=backward
    )
