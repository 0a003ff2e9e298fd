"""Every public function of the contract registry on a batch sharded over an Explicit mesh
equals its one-device result.

Run by ``tests/test_sharding.py`` in a subprocess (the device count must be set before JAX is
imported): ``python tests/_sharded_public_check.py``. On an Explicit axis each operation must
resolve its output's sharding while traced, and until the public functions ran their
Explicit axes as Auto ones (:mod:`jaxseg._src.programs`) the scatters, sorts and vmaps of 13
of them raised ``ShardingTypeError`` inside a user's ``jax.jit``. Integer results must be
equal; floating ones within rounding (the partitioned program may sum in another order).
"""

from __future__ import annotations

import os
import sys

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
).strip()
# The eight devices are simulated CPUs: on a machine with a GPU, JAX would take its one GPU.
os.environ["JAX_PLATFORMS"] = "cpu"

import _contract
import _contract_grounding
import _contract_losses
import _contract_ranking
import _contract_unsupervised
import jax
import numpy as np
from _sharded_check import DEVICES, run
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxseg import losses, metrics

FRAMES = 48


def cases():
    """Every registered case of the contract test."""
    modules = (
        _contract,
        _contract_grounding,
        _contract_losses,
        _contract_ranking,
        _contract_unsupervised,
    )
    return [case for module in modules for case in module.CASES]


def assert_close(got, want):
    """Equal integers and booleans; floats within rounding."""
    got, want = jax.tree.leaves(got), jax.tree.leaves(want)
    assert len(got) == len(want), (len(got), len(want))
    for a, b in zip(got, want, strict=True):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
        if np.issubdtype(a.dtype, np.inexact):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7, equal_nan=True)
        else:
            np.testing.assert_array_equal(a, b)


def batch_of(case, seed):
    """The case's positional arrays and keyword arguments for a batch of ``DEVICES`` rows
    (the mask with padding at the end and a hole)."""
    arrays = case.make_args(np.random.default_rng(seed), (DEVICES,), FRAMES)
    keywords = {}
    if case.takes_mask:
        mask = np.arange(FRAMES) < np.arange(DEVICES)[:, None] * 5 + 10
        mask[:, 3:5] = False
        keywords["mask"] = mask
    return arrays, keywords


def jit_check(case, mesh, seed):
    """``jax.jit`` of the function over the batch sharded by its rows."""

    def check():
        arrays, keywords = batch_of(case, seed)
        fn = jax.jit(lambda *a, **k: case.fn(*a, **k, **case.kwargs))
        want = fn(*arrays, **keywords)
        rows = NamedSharding(mesh, P("batch"))
        sharded = [jax.device_put(x, rows) for x in arrays]
        keywords = {k: jax.device_put(v, rows) for k, v in keywords.items()}
        assert_close(fn(*sharded, **keywords), want)

    return check


def eager_check(mesh):
    """Outside ``jax.jit`` (each function's own program): a sort, a scatter into counts."""

    def check():
        rng = np.random.default_rng(5)
        targets = rng.random((DEVICES, FRAMES)) < 0.3
        scores = rng.random((DEVICES, FRAMES)).astype(np.float32)
        truth, guess = rng.integers(0, 4, (2, DEVICES, FRAMES)).astype(np.int32)

        def both(targets, scores, truth, guess):
            ranked = metrics.average_precision(targets, scores)
            return ranked, metrics.confusion_matrix(truth, guess, num_classes=4)

        want = both(targets, scores, truth, guess)
        rows = NamedSharding(mesh, P("batch"))
        assert_close(
            both(*(jax.device_put(x, rows) for x in (targets, scores, truth, guess))), want
        )

    return check


def gradient_check(mesh):
    """Gradients of the sequence losses of a sharded batch of logits."""

    def check():
        rng = np.random.default_rng(6)
        logits = rng.normal(0, 2, (DEVICES, FRAMES, 4)).astype(np.float32)
        labels = np.repeat(rng.integers(0, 4, (DEVICES, FRAMES // 8)), 8, axis=1)

        def total(logits, labels):
            options = dict(max_segments=16)
            return (
                losses.soft_edit_loss(logits, labels, **options).sum()
                + losses.lovasz_softmax_loss(logits, labels).sum()
            )

        grad = jax.jit(jax.grad(total))
        want = grad(logits, labels)
        rows = NamedSharding(mesh, P("batch"))
        assert_close(grad(jax.device_put(logits, rows), jax.device_put(labels, rows)), want)

    return check


def main() -> int:
    assert jax.device_count() == DEVICES, jax.devices()
    mesh = jax.make_mesh((DEVICES,), ("batch",), axis_types=(AxisType.Explicit,))
    checks = [(mesh, f"jit {case.id}", jit_check(case, mesh, i)) for i, case in enumerate(cases())]
    checks += [(mesh, "eager", eager_check(mesh)), (mesh, "gradients", gradient_check(mesh))]
    return run(checks)


if __name__ == "__main__":
    sys.exit(main())
