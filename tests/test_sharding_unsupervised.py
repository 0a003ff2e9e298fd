"""The unsupervised accumulators on 8 simulated CPU devices equal one device exactly
(checks in ``tests/_sharded_check_unsupervised.py``, run in a subprocess)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

SCRIPT = pathlib.Path(__file__).with_name("_sharded_check_unsupervised.py")


@pytest.mark.multidevice
def test_unsupervised_accumulators_sharded():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8")
    env.pop("JAX_ENABLE_X64", None)
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "auto", "explicit"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert "all sharded checks passed" in result.stdout
    # each of the four: jit + shard_map on an Auto mesh, jit on an Explicit one
    assert result.stdout.count("ok: ") == 12
