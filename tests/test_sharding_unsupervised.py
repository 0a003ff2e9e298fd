"""The unsupervised accumulators on 8 simulated CPU devices equal one device exactly
(checks in ``tests/_sharded_check_unsupervised.py``, run in a subprocess)."""

from __future__ import annotations

import pathlib

import pytest
from _sharded_run import assert_passed, run_checks

SCRIPT = pathlib.Path(__file__).with_name("_sharded_check_unsupervised.py")


@pytest.mark.multidevice
def test_unsupervised_accumulators_sharded():
    # each of the four: jit + shard_map on an Auto mesh, jit on an Explicit one
    assert_passed(run_checks(SCRIPT, "auto", "explicit"), checks=12)
