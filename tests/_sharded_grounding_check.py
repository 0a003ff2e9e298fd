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
import numpy as np

from jaxseg import streaming

BATCH = 32


def windows(rng, shape):
    start = rng.integers(0, 40, shape)
    return np.stack([start, start + rng.integers(1, 12, shape)], -1).astype(np.float32)


def batches():
    rng = np.random.default_rng(0)
    gm = rng.random((BATCH, 3)) < 0.7
    gm[[2, 9]] = False  # padding queries
    pm = rng.random((BATCH, 8)) < 0.8
    grounding = (
        windows(rng, (BATCH, 3)),
        windows(rng, (BATCH, 8)),
        np.round(rng.random((BATCH, 8)), 2).astype(np.float32),
    )
    saliency = (
        rng.integers(0, 5, (BATCH, 20, 3)).astype(np.int32),
        np.round(rng.random((BATCH, 20)), 1).astype(np.float32),
    )
    clips = np.arange(20)[None] < rng.integers(0, 21, BATCH)[:, None]
    videos = (
        windows(rng, (BATCH, 2, 3)),
        windows(rng, (BATCH, 2, 8)),
        rng.random((BATCH, 2, 8)).astype(np.float32),
    )
    vm, vpm = gm[:, None, :].repeat(2, 1), pm[:, None, :].repeat(2, 1)
    return {
        "grounding": (streaming.grounding(), grounding, dict(target_mask=gm, prediction_mask=pm)),
        "highlight": (streaming.highlight(), saliency, dict(mask=clips)),
        "moment_queries": (
            streaming.moment_queries(),
            grounding[:2],
            dict(target_mask=gm, prediction_mask=pm),
        ),
        "proposals": (
            streaming.proposals(capacity=8, max_average_proposals=4, at=(1, 4)),
            videos,
            dict(target_mask=vm, proposal_mask=vpm),
        ),
    }


def main(axis_types) -> int:
    assert jax.device_count() == base.DEVICES, jax.devices()
    cases = []
    for mesh in base.meshes(axis_types):
        for name, (acc, arrays, masks) in batches().items():
            labelled = base.checks(name, acc, mesh, arrays, masks)
            cases += [(mesh, label, thunk) for label, thunk in labelled]
    return base.run(cases)


if __name__ == "__main__":
    sys.exit(main(base.parse_axis_types(sys.argv[1:])))
