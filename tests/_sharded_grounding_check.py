"""Sharded updates of the grounding and proposal accumulators on 8 simulated CPU devices equal
the single-device result exactly (run by tests/test_grounding.py in a subprocess):
``python tests/_sharded_grounding_check.py [auto] [explicit]``.

For each accumulator: jit over a batch sharded on a NamedSharding (meshes of either axis
type), and shard_map + psum of per-device states (Auto); exact counts must be equal and
computed metrics bit-identical.
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
from _streaming_cases import grounding_cases


def main(axis_types) -> int:
    assert jax.device_count() == base.DEVICES, jax.devices()
    cases = []
    for name, (acc, arrays, masks) in grounding_cases().items():
        cases += base.checks(name, acc, base.meshes(axis_types), arrays, masks)
    return base.run(cases)


if __name__ == "__main__":
    sys.exit(main(base.parse_axis_types(sys.argv[1:])))
