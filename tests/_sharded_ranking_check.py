"""Sharded updates of the dense, top-k, retrieval, frame AP and detection accumulators on 8
simulated CPU devices equal the single-device result exactly (run by ``tests/test_sharding.py``
in a subprocess): ``python tests/_sharded_ranking_check.py [auto] [explicit]``.

Both modes of the AP accumulators are checked: the binned one (additive counts, also merged
by ``shard_map`` + ``psum``) and the buffer of scores (``capacity=``), whose rows must land in
the order of the unsharded batch.
"""

from __future__ import annotations

import os
import sys

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
).strip()
# The eight devices are simulated CPUs: on a machine with a GPU, JAX would take its one GPU.
os.environ["JAX_PLATFORMS"] = "cpu"

import _sharded_check as base
import jax
from _streaming_cases import ranking_cases


def main(axis_types) -> int:
    assert jax.device_count() == base.DEVICES, jax.devices()
    cases = []
    for name, (acc, arrays, keywords, additive) in ranking_cases().items():
        meshes = base.meshes(axis_types)
        cases += base.checks(name, acc, meshes, arrays, keywords, additive=additive)
    return base.run(cases)


if __name__ == "__main__":
    sys.exit(main(base.parse_axis_types(sys.argv[1:])))
