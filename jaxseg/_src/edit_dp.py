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
vector operation along the shorter axis. The soft value has a ``custom_vjp`` whose backward pass
is the expected-alignment recursion (Mensch & Blondel, 2018): the forward pass stores the three
softmin probabilities of every cell, so the backward loop only multiplies and adds; it also
returns the exact derivative with respect to γ, so γ can be a traced (annealed) value. The
same forward without ``custom_vjp`` (``backward="autodiff"``) is kept as a test oracle and for
higher-order or forward-mode derivatives. Memory is ``O(N M)`` for the soft value (3 floats per
cell with ``custom_vjp``) and ``O(N + M)`` for :func:`hard_levenshtein`.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax import lax

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
    j = d - i if jnp.ndim(d) == 0 else d - i[None, :]
    return i, j, (j >= 0) & (j <= m)


def _sweep(
    diagonal_costs: Callable,
    xs,
    n: int,
    m: int,
    len_a,
    len_b,
    combine: Callable,
    big,
    dtype,
    keep: bool,
):
    """Runs the wavefront over anti-diagonals ``d = 1..n+m`` (rows ``i = 0..n`` are the vector).

    ``diagonal_costs(d, x)`` returns the deletion, substitution and insertion cost of every cell
    ``(i, d - i)`` (vectors of length ``n + 1``; values of out-of-grid cells are ignored), where
    ``x`` is the slice ``d - 1`` of ``xs`` (any pytree of ``[n + m, ...]`` arrays, or None).
    ``combine(up, diag, left)`` returns the new cells and per-cell auxiliary values (or None).
    Returns ``R[len_a, len_b]`` and, if ``keep``, the auxiliary values of the diagonals
    ``d = 1..n+m`` (``[n + m, n + 1]`` each, 0 outside the grid).
    """
    big = jnp.asarray(big, dtype)
    target = len_a + len_b
    r0 = jnp.full((n + 1,), big).at[0].set(0)
    at_row = jnp.arange(n + 1, dtype=jnp.int32) == jnp.clip(len_a, 0, n)  # no gather per step

    def step(carry, d_x):
        d, x = d_x
        r1, r2, result = carry
        c_del, c_sub, c_ins = diagonal_costs(d, x)
        _, _, in_grid = _in_grid(n, m, d)
        up = _shift_down(r1, big) + c_del
        diag = _shift_down(r2, big) + c_sub
        left = r1 + c_ins
        r, aux = combine(up, diag, left)
        r = jnp.where(in_grid, r, big)
        result = jnp.where(d == target, jnp.sum(jnp.where(at_row, r, 0)), result)
        aux = jax.tree_util.tree_map(lambda a: jnp.where(in_grid, a, 0), aux) if keep else None
        return (r, r1, result), aux

    init = (r0, jnp.full((n + 1,), big), jnp.zeros((), dtype))
    d = jnp.arange(1, n + m + 1, dtype=jnp.int32)
    (_, _, result), aux = lax.scan(step, init, (d, xs))
    return result, aux


def _skew(c_del, c_sub, c_ins):
    """Per-diagonal cost layout: ``sub[d - 1, i] = c_sub[i - 1, d - i - 1]`` (one gather).

    Returns the deletion cost of each row ``[n + 1]`` and the substitution and insertion costs
    of the cells of each anti-diagonal ``d = 1..n+m``, ``[n + m, n + 1]`` each (0 outside).
    """
    n, m = c_sub.shape
    d = jnp.arange(1, n + m + 1, dtype=jnp.int32)[:, None]
    i = jnp.arange(n + 1, dtype=jnp.int32)[None, :]
    j = d - i
    in_columns = (j >= 1) & (j <= m)
    row, col = jnp.clip(i - 1, 0, n - 1), jnp.clip(j - 1, 0, m - 1)
    sub = jnp.where(in_columns & (i >= 1), c_sub[row, col], 0.0)
    ins = jnp.where(in_columns, c_ins[col], 0.0)
    return jnp.concatenate([jnp.zeros((1,), c_del.dtype), c_del]), sub, ins


def _unskew(per_diagonal, n: int, m: int, first_row: int):
    """Inverse layout of :func:`_skew`: ``out[i - first_row, j - 1] = per_diagonal[i + j - 1, i]``
    for rows ``i = first_row..n`` and columns ``j = 1..m``."""
    i = jnp.arange(first_row, n + 1, dtype=jnp.int32)[:, None]
    j = jnp.arange(1, m + 1, dtype=jnp.int32)[None, :]
    return per_diagonal[i + j - 1, i]


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

    def diagonal_costs(d, _):
        i, j, _ = _in_grid(n, m, d)
        sub = a[jnp.clip(i - 1, 0, n - 1)] != b[jnp.clip(j - 1, 0, m - 1)]
        return ones_row, sub.astype(jnp.int32), ones_row

    def hard_min(up, diag, left):
        return jnp.minimum(jnp.minimum(up, diag), left), None

    result, _ = _sweep(
        diagonal_costs, None, n, m, len_a, len_b, hard_min, BIG_INT, jnp.int32, False
    )
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


def _prepare(c_del, c_sub, c_ins, len_a, len_b, gamma):
    """Casts the costs and γ to one float dtype, at least float32."""
    dtype = compute_dtype(c_del, c_sub, c_ins)
    c_del, c_sub, c_ins = (jnp.asarray(c, dtype) for c in (c_del, c_sub, c_ins))
    gamma = jnp.maximum(jnp.asarray(gamma, dtype), _MIN_GAMMA)
    return c_del, c_sub, c_ins, jnp.asarray(len_a, jnp.int32), jnp.asarray(len_b, jnp.int32), gamma


def _soft_forward(c_del, c_sub, c_ins, len_a, len_b, gamma, keep):
    n, m = c_sub.shape
    del_row, sub, ins = _skew(c_del, c_sub, c_ins)

    def diagonal_costs(d, x):
        return del_row, x[0], x[1]

    return _sweep(
        diagonal_costs,
        (sub, ins),
        n,
        m,
        len_a,
        len_b,
        _softmin3(gamma, keep),
        BIG_FLOAT,
        c_sub.dtype,
        keep,
    )


def _soft_dp_autodiff(c_del, c_sub, c_ins, len_a, len_b, gamma):
    return _soft_forward(c_del, c_sub, c_ins, len_a, len_b, gamma, False)[0]


@jax.custom_vjp
def _soft_dp_custom(c_del, c_sub, c_ins, len_a, len_b, gamma):
    return _soft_forward(c_del, c_sub, c_ins, len_a, len_b, gamma, False)[0]


def _soft_dp_custom_fwd(c_del, c_sub, c_ins, len_a, len_b, gamma):
    value, weights = _soft_forward(c_del, c_sub, c_ins, len_a, len_b, gamma, True)
    return value, (c_del.shape[0], c_ins.shape[0], len_a, len_b, weights)


def _soft_dp_custom_bwd(residuals, cotangent):
    """Expected-alignment recursion: ``E[i, j] = ∂R[len_a, len_b] / ∂R[i, j]``, pushed backwards.

    Every cell passes ``E`` times each of its softmin probabilities (stored by the forward
    pass, 3 floats per cell) to the predecessor of that branch; the same products are the
    gradients of the branch's cost. The loop only multiplies and adds.
    ``∂R/∂γ = Σ_cells E · Σ_k p_k log p_k``.
    """
    n, m, len_a, len_b, (p_up, p_diag, p_left) = residuals
    dtype = p_up.dtype
    d = jnp.arange(1, n + m + 1, dtype=jnp.int32)[:, None]
    at_row = jnp.arange(n + 1, dtype=jnp.int32) == jnp.clip(len_a, 0, n)
    seed = (d == len_a + len_b) & at_row[None, :]
    seed = seed.astype(dtype)

    def step(carry, xs):
        e_next, e_next2 = carry  # partial E of diagonals d and d - 1
        s, pu, pd, pl = xs
        e = e_next + s
        g_up, g_diag, g_left = e * pu, e * pd, e * pl
        e_prev = e_next2 + _shift_up(g_up, 0.0) + g_left  # to R_{d-1}
        return (e_prev, _shift_up(g_diag, 0.0)), (g_up, g_diag, g_left)

    zeros = jnp.zeros((n + 1,), dtype)
    _, (g_up, g_diag, g_left) = lax.scan(
        step, (zeros, zeros), (seed, p_up, p_diag, p_left), reverse=True
    )
    # ∂smin_γ/∂γ = Σ_k p_k log p_k per cell, weighted by E = Σ_k g_k: Σ_k g_k log p_k.
    d_gamma = sum(
        jnp.sum(jnp.where(p > 0, g * jnp.log(jnp.where(p > 0, p, 1.0)), 0.0))
        for g, p in ((g_up, p_up), (g_diag, p_diag), (g_left, p_left))
    )
    grad_sub = _unskew(g_diag, n, m, first_row=1) * cotangent
    grad_ins = jnp.sum(_unskew(g_left, n, m, first_row=0), axis=0) * cotangent
    grad_del = jnp.sum(g_up[:, 1:], axis=0) * cotangent
    return (grad_del, grad_sub, grad_ins, None, None, d_gamma * cotangent)


_soft_dp_custom.defvjp(_soft_dp_custom_fwd, _soft_dp_custom_bwd)


def _prefix_total(costs, length):
    return jnp.sum(jnp.where(jnp.arange(costs.shape[0], dtype=jnp.int32) < length, costs, 0.0))


def soft_edit_dp(c_del, c_sub, c_ins, len_a, len_b, gamma, *, backward: str = "custom"):
    """Soft edit distance ``R[len_a, len_b]`` of the general recursion (module docstring).

    Args:
      c_del: ``float[N]``, cost of consuming row ``i`` alone (``c_del[i - 1]``).
      c_sub: ``float[N, M]``, cost of consuming row ``i`` and column ``j`` together.
      c_ins: ``float[M]``, cost of consuming column ``j`` alone.
      len_a: int scalar in ``[0, N]``, valid rows.
      len_b: int scalar in ``[0, M]``, valid columns.
      gamma: float scalar ≥ 0, the temperature (traced: changing it does not recompile); 0 gives
        the hard minimum, with gradients split evenly between tied branches.
      backward: ``"custom"`` (expected-alignment recursion, first order only) or
        ``"autodiff"`` (JAX differentiates the forward scan; any order, forward mode too).

    Returns:
      float scalar, float32 (or float64 for float64 costs): bf16/float16 costs are upcast,
      since γ/cost ratios underflow in half precision.

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
    if c_sub.shape[0] > c_sub.shape[1]:  # run the vector along the shorter axis
        c_del, c_sub, c_ins, len_a, len_b = c_ins, c_sub.T, c_del, len_b, len_a
    args = _prepare(c_del, c_sub, c_ins, len_a, len_b, gamma)
    if 0 in c_sub.shape:  # one side is empty: consume the other one alone
        c_del, _, c_ins, len_a, len_b, _ = args
        return _prefix_total(c_del, len_a) + _prefix_total(c_ins, len_b)
    fn = _soft_dp_custom if backward == "custom" else _soft_dp_autodiff
    return fn(*args)
