"""Running a sharded check script (``tests/_sharded*_check*.py``) in a fresh process.

The script asks XLA for 8 simulated CPU devices before it imports JAX, on top of the test
process's own XLA_FLAGS (``conftest._quick_compile_flags``), which it keeps.
"""

from __future__ import annotations

import os
import subprocess
import sys


def run_checks(script, *axis_types: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """Run ``script`` with ``axis_types`` ("auto", "explicit") as its arguments, in 32 bits."""
    env = dict(os.environ)
    env.pop("JAX_ENABLE_X64", None)
    return subprocess.run(
        [sys.executable, str(script), *axis_types],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def assert_passed(result: subprocess.CompletedProcess, checks: int):
    """The script exited cleanly, reported success and ran ``checks`` checks."""
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert "all sharded checks passed" in result.stdout
    assert result.stdout.count("ok: ") == checks
