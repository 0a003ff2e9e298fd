"""Tests of the edit-distance DP engine (jaxseg/_src/edit_dp.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _reference_losses import levenshtein, soft_dp
from jax.test_util import check_grads

from jaxseg._src import capacity, edit_dp


def _random_pair(rng, n, m, alphabet):
    a = rng.integers(0, alphabet, n)
    b = rng.integers(0, alphabet, m)
    return a, b, int(rng.integers(0, n + 1)), int(rng.integers(0, m + 1))


@pytest.mark.parametrize("n, m", [(7, 7), (5, 40), (40, 5), (1, 3), (33, 50)])
def test_hard_levenshtein_matches_python_dp(n, m):
    rng = np.random.default_rng(n * 100 + m)
    pairs = [_random_pair(rng, n, m, 4) for _ in range(60)]
    a, b, la, lb = (np.stack(x) for x in zip(*pairs, strict=True))
    got = jax.jit(jax.vmap(edit_dp.hard_levenshtein))(a, b, la, lb)
    want = [levenshtein(x[:p], y[:q]) for x, y, p, q in pairs]
    assert got.dtype == jnp.int32
    np.testing.assert_array_equal(np.asarray(got), want)


def test_hard_levenshtein_edge_cases():
    a = jnp.array([1, 2, 3])
    lengths = jnp.array([[0, 0], [3, 0], [0, 2], [3, 3]])
    got = jax.jit(jax.vmap(edit_dp.hard_levenshtein, (None, None, 0, 0)))(
        a, a, lengths[:, 0], lengths[:, 1]
    )
    assert got.tolist() == [0, 3, 2, 0]
    assert int(edit_dp.hard_levenshtein(a, jnp.zeros((0,), jnp.int32), 2, 0)) == 2
    # Values beyond the valid prefixes are ignored.
    assert int(edit_dp.hard_levenshtein(jnp.array([5, 9, 9]), jnp.array([5, 7]), 1, 1)) == 0


def test_hard_levenshtein_long_sequences():
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 3, 150), rng.integers(0, 3, 90)
    got = int(jax.jit(edit_dp.hard_levenshtein)(a, b, 150, 87))
    assert got == levenshtein(a, b[:87])


def test_hard_levenshtein_rejects_bad_rank():
    with pytest.raises(ValueError, match="a and b"):
        edit_dp.hard_levenshtein(jnp.zeros((2, 3), jnp.int32), jnp.zeros(3, jnp.int32), 1, 1)


# ----------------------------------------------------------------------------- soft DP


def _random_costs(rng, n, m):
    return rng.random(n) * 2, rng.random((n, m)) * 2, rng.random(m) * 2


def _batch(rng, n, m, size):
    """Random costs, valid lengths (including 0 and full) and temperatures for one shape."""
    c_del, c_sub, c_ins = (rng.random((size, *shape)) * 2 for shape in ((n,), (n, m), (m,)))
    la, lb = rng.integers(0, n + 1, size), rng.integers(0, m + 1, size)
    la[:2], lb[:2] = (n, 0), (m, m)
    gamma = rng.choice([0.0, 1e-3, 0.05, 1.0], size)
    return c_del, c_sub, c_ins, la, lb, gamma.astype(np.float32)


def _soft_batch(backward):
    return jax.jit(jax.vmap(lambda *a: edit_dp.soft_edit_dp(*a, backward=backward)))


@pytest.mark.parametrize("n, m", [(5, 7), (7, 4)])
def test_soft_dp_matches_full_grid_reference(n, m):
    rng = np.random.default_rng(n + 10 * m)
    c_del, c_sub, c_ins, la, lb, gamma = _batch(rng, n, m, 24)
    got = _soft_batch("custom")(c_del, c_sub, c_ins, la, lb, gamma)
    for k in range(24):
        p, q = la[k], lb[k]
        want = soft_dp(c_del[k, :p], c_sub[k, :p, :q], c_ins[k, :q], float(gamma[k]))
        np.testing.assert_allclose(float(got[k]), want, rtol=1e-5, atol=1e-5)


def test_soft_dp_at_gamma_zero_is_hard_levenshtein():
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 3, (40, 9)), rng.integers(0, 3, (40, 12))
    la, lb = rng.integers(0, 10, 40), rng.integers(0, 13, 40)

    def soft(x, y, p, q):
        c_sub = (x[:, None] != y[None, :]).astype(jnp.float32)
        return edit_dp.soft_edit_dp(jnp.ones(9), c_sub, jnp.ones(12), p, q, 0.0)

    soft_values = jax.vmap(soft)(a, b, la, lb)
    hard_values = jax.vmap(edit_dp.hard_levenshtein)(a, b, la, lb)
    np.testing.assert_array_equal(np.asarray(soft_values), np.asarray(hard_values))


@pytest.mark.parametrize("n, m", [(5, 7), (7, 4)])
def test_custom_vjp_equals_autodiff(n, m):
    rng = np.random.default_rng(7 + n)
    args = _batch(rng, n, m, 16)

    def grads(backward):
        def total(c_del, c_sub, c_ins, gamma):
            values = jax.vmap(
                lambda cd, cs, ci, p, q, g: edit_dp.soft_edit_dp(
                    cd, cs, ci, p, q, g, backward=backward
                )
            )(c_del, c_sub, c_ins, *args[3:5], gamma)
            return jnp.sum(values)

        return jax.jit(jax.grad(total, argnums=(0, 1, 2, 3)))(*args[:3], args[5])

    custom, auto = grads("custom"), grads("autodiff")
    for x, y in zip(custom[:3], auto[:3], strict=True):
        assert np.all(np.isfinite(np.asarray(x)))
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-4, atol=2e-5)
    # dR/dγ: the custom backward is finite everywhere (0 at γ = 0); differentiating the
    # forward through γ = 0 divides by zero, so compare where γ > 0.
    positive = args[5] > 0
    assert np.all(np.isfinite(np.asarray(custom[3])))
    np.testing.assert_array_equal(np.asarray(custom[3])[~positive], 0.0)
    np.testing.assert_allclose(
        np.asarray(custom[3])[positive], np.asarray(auto[3])[positive], rtol=1e-4, atol=2e-5
    )


def test_soft_dp_gradients_float64():
    rng = np.random.default_rng(11)
    c_del, c_sub, c_ins = _random_costs(rng, 3, 5)
    with jax.enable_x64():
        args = [jnp.asarray(c, jnp.float64) for c in (c_del, c_sub, c_ins)]
        for backward in ("custom", "autodiff"):

            def fn(cd, cs, ci, g, backward=backward):
                return edit_dp.soft_edit_dp(cd, cs, ci, 3, 4, g, backward=backward)

            fn = jax.jit(fn)
            assert fn(*args, jnp.float64(0.3)).dtype == jnp.float64
            check_grads(fn, (*args, jnp.float64(0.3)), order=1, modes=["rev"], eps=1e-4)


def test_soft_dp_gradients_are_exactly_zero_beyond_the_valid_prefixes():
    rng = np.random.default_rng(5)
    c_del, c_sub, c_ins = _random_costs(rng, 6, 8)
    for backward in ("custom", "autodiff"):
        g_del, g_sub, g_ins = jax.jit(
            jax.grad(
                lambda *c, b=backward: edit_dp.soft_edit_dp(*c, 4, 5, 0.5, backward=b),
                argnums=(0, 1, 2),
            )
        )(c_del, c_sub, c_ins)
        assert np.all(np.asarray(g_del)[4:] == 0) and np.all(np.asarray(g_ins)[5:] == 0)
        assert np.all(np.asarray(g_sub)[4:] == 0) and np.all(np.asarray(g_sub)[:, 5:] == 0)
        # On the valid part, the gradients are alignment probabilities.
        assert np.all(np.asarray(g_sub) >= 0) and np.all(np.asarray(g_sub) <= 1 + 1e-6)


def test_soft_dp_upcasts_bfloat16_and_gamma_does_not_recompile():
    rng = np.random.default_rng(2)
    c_del, c_sub, c_ins = (jnp.asarray(c, jnp.bfloat16) for c in _random_costs(rng, 4, 5))
    traces = []

    def fn(g):
        traces.append(1)
        return edit_dp.soft_edit_dp(c_del, c_sub, c_ins, 4, 5, g)

    jitted = jax.jit(fn)
    values = [jitted(jnp.float32(g)) for g in (1.0, 0.1, 0.01)]
    assert len(traces) == 1
    assert all(v.dtype == jnp.float32 for v in values)
    want = soft_dp(*(np.asarray(c, np.float64) for c in (c_del, c_sub, c_ins)), 0.01)
    np.testing.assert_allclose(float(values[-1]), want, rtol=1e-5)


def test_soft_dp_rejects_inconsistent_shapes():
    with pytest.raises(ValueError, match="c_del, c_sub and c_ins"):
        edit_dp.soft_edit_dp(jnp.ones(3), jnp.ones((2, 4)), jnp.ones(4), 2, 4, 0.1)
    with pytest.raises(ValueError, match="backward"):
        edit_dp.soft_edit_dp(jnp.ones(2), jnp.ones((2, 4)), jnp.ones(4), 2, 4, 0.1, backward="x")


def _by_label_batch(rng, n, m, classes, size):
    """Random costs gathered by label, valid lengths (0 and full included) and temperatures."""
    c_del, c_ins = rng.random((size, n)) * 2, rng.random((size, m)) * 2
    labels, table = rng.integers(0, classes, (size, n)), rng.random((size, m, classes)) * 2
    la, lb = rng.integers(0, n + 1, size), rng.integers(0, m + 1, size)
    la[:2], lb[:2] = (n, 0), (m, m)
    gamma = rng.choice([0.0, 1e-3, 0.05, 1.0], size).astype(np.float32)
    return c_del, labels, table, c_ins, la, lb, gamma


@pytest.mark.parametrize("n, m", [(4, 9), (9, 4)])
def test_soft_dp_by_label_gathers_the_costs_of_the_full_grid(n, m):
    rng = np.random.default_rng(n * 10 + m)
    c_del, labels, table, c_ins, la, lb, gamma = _by_label_batch(rng, n, m, 3, 20)
    got = jax.jit(jax.vmap(edit_dp.soft_edit_dp_by_label))(
        c_del, labels, table, c_ins, la, lb, gamma
    )
    for k in range(20):
        p, q = la[k], lb[k]
        c_sub = table[k][:, labels[k]].T  # c_sub[i, j] = table[j, labels[i]]
        want = soft_dp(c_del[k, :p], c_sub[:p, :q], c_ins[k, :q], float(gamma[k]))
        np.testing.assert_allclose(float(got[k]), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n, m", [(5, 40), (40, 5), (17, 17), (1, 9)])
@pytest.mark.parametrize("kept_cells", [1, 16])
def test_soft_dp_recomputing_blocks_of_weights_changes_no_bit(monkeypatch, n, m, kept_cells):
    # Grids above _KEPT_CELLS keep only the diagonals before each block and recompute the
    # softmin weights in the backward pass; the same operations run in the same order, so
    # the value and every gradient equal those of the kept weights exactly.
    rng = np.random.default_rng(n + m + kept_cells)
    c_del, labels, table, c_ins, la, lb, gamma = _by_label_batch(rng, n, m, 4, 6)

    def value_and_grads():
        def one(cd, y, tb, ci, p, q, g):
            return edit_dp.soft_edit_dp_by_label(cd, y, tb, ci, p, q, g)

        def total(cd, tb, ci, g):
            return jnp.sum(jax.vmap(one)(cd, labels, tb, ci, la, lb, g))

        fn = jax.jit(jax.value_and_grad(total, argnums=(0, 1, 2, 3)))
        return jax.tree_util.tree_leaves(fn(c_del, table, c_ins, gamma))

    kept = value_and_grads()
    monkeypatch.setattr(capacity, "_KEPT_CELLS", kept_cells)
    assert edit_dp._layout(min(n, m), max(n, m), True, whole=False).blocks > 1
    recomputed = value_and_grads()
    for x, y in zip(recomputed, kept, strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
