"""Sharded streaming updates on 8 simulated CPU devices equal the single-device result exactly.

The checks live in ``tests/_sharded_check.py`` and run in a subprocess, because the number of
simulated devices (``XLA_FLAGS=--xla_force_host_platform_device_count=8``) must be set before
JAX is imported.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

SCRIPT = pathlib.Path(__file__).with_name("_sharded_check.py")


def run_checks(*axis_types: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8")
    env.pop("JAX_ENABLE_X64", None)
    return subprocess.run(
        [sys.executable, str(SCRIPT), *axis_types],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def assert_passed(result: subprocess.CompletedProcess):
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert "all sharded checks passed" in result.stdout


@pytest.mark.multidevice
def test_sharded_equals_single_device_on_auto_mesh():
    """jit over a NamedSharding-sharded batch, and shard_map + psum merge, both accumulators."""
    result = run_checks("auto")
    assert_passed(result)
    assert result.stdout.count("ok: ") == 4


@pytest.mark.multidevice
def test_sharded_equals_single_device_on_explicit_mesh():
    """jax.make_mesh's default axis type: jit over an explicitly sharded batch, under
    ``jax.set_mesh``, equals the single-device result exactly (both accumulators)."""
    result = run_checks("explicit")
    assert_passed(result)
    assert result.stdout.count("ok: ") == 2
