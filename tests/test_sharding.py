"""Sharded streaming updates on 8 simulated CPU devices equal the single-device result exactly,
and the public functions take a batch sharded on an Explicit mesh.

The checks live in ``tests/_sharded_check.py`` (segmentation, frame metrics),
``tests/_sharded_ranking_check.py`` (dense, top-k, retrieval, frame AP, detection), the
unsupervised and grounding scripts and ``tests/_sharded_public_check.py`` (every function of
the contract registry), and run in a subprocess, because the number of simulated
devices (``XLA_FLAGS=--xla_force_host_platform_device_count=8``) must be set before JAX is
imported.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys

import _contract
import _contract_grounding
import _contract_losses
import _contract_ranking
import _contract_unsupervised
import pytest
from _sharded_run import assert_passed, run_checks

import jaxseg

TESTS = pathlib.Path(__file__).parent
SCRIPT = TESTS / "_sharded_check.py"


@pytest.mark.multidevice
def test_sharded_equals_single_device_on_auto_and_explicit_meshes():
    """Both accumulators, jit over a NamedSharding-sharded batch on an Auto mesh and on an
    Explicit one (jax.make_mesh's default axis type, under ``jax.set_mesh``), and shard_map +
    psum merges on the Auto mesh, equal the single-device result exactly."""
    assert_passed(run_checks(SCRIPT, "auto", "explicit"), checks=6)


@pytest.mark.multidevice
def test_ranking_accumulators_sharded():
    """Dense, top-k, retrieval, and frame AP and detection in both modes (binned counts and
    buffers of scores): jit over a sharded batch on Auto and Explicit meshes, and shard_map +
    psum of the additive states, equal one device exactly. On an Explicit mesh their scatters
    into replicated counts, reshapes and sorts raised until ``update`` ran on Auto axes."""
    result = run_checks(TESTS / "_sharded_ranking_check.py", "auto", "explicit")
    assert_passed(result, checks=19)  # 7 x jit (2 meshes) + 5 additive shard_maps


@pytest.mark.multidevice
def test_public_functions_on_an_explicit_mesh():
    """Every function of the contract registry under ``jax.jit`` over a batch sharded on an
    Explicit mesh, two outside ``jax.jit`` and the sequence losses' gradients, equal one
    device (13 raised ``ShardingTypeError`` before the public functions ran such axes as
    Auto)."""
    modules = (_contract, _contract_grounding, _contract_losses, _contract_ranking)
    cases = sum(len(m.CASES) for m in (*modules, _contract_unsupervised))
    assert_passed(run_checks(TESTS / "_sharded_public_check.py"), checks=cases + 2)


# The accumulators each check script exercises, by the factory that made them.
_CHECKED = """
import _sharded_check as a, _sharded_check_unsupervised as b, _streaming_cases as c
accumulators = [*a.accumulators().values(), *b.accumulators().values()]
accumulators += [case[0] for case in (*c.grounding_cases().values(), *c.ranking_cases().values())]
print(*sorted({acc.update.__qualname__.split(".")[0] for acc in accumulators}))
"""


def test_every_streaming_accumulator_has_a_sharded_check():
    """Each factory of ``jaxseg.streaming`` is checked on Auto and Explicit meshes by one of
    the scripts (a new accumulator must join one)."""
    factories = {
        name
        for name in jaxseg.streaming.__all__
        if getattr(getattr(jaxseg.streaming, name), "__annotations__", {}).get("return")
        == "Accumulator"
    }
    result = subprocess.run(
        [sys.executable, "-c", _CHECKED], capture_output=True, text=True, timeout=120, cwd=TESTS
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert set(result.stdout.split()) == factories
