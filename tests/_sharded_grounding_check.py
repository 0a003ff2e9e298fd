"""Sharded updates of the grounding and proposal accumulators on 8 simulated CPU devices equal
the single-device result exactly (run by tests/test_grounding.py in a subprocess).

For each accumulator: jit over a batch sharded on a NamedSharding, and shard_map + psum of
per-device states; exact counts must be equal and computed metrics bit-identical.
"""

from __future__ import annotations

import os
import sys

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
).strip()
# The eight devices are simulated CPUs: on a machine with a GPU, JAX would take its one GPU.
os.environ["JAX_PLATFORMS"] = "cpu"

import functools

import jax
import numpy as np
from _sharded_check import assert_identical, run
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from jaxseg import streaming

DEVICES, BATCH = 8, 32


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


def check(acc, arrays, masks, mesh):
    update = jax.jit(acc.update)
    single = update(acc.init(), *arrays, **masks)
    names = list(masks)
    sharded = jax.device_put((*arrays, *masks.values()), NamedSharding(mesh, P("data")))
    data, mask_values = sharded[: len(arrays)], sharded[len(arrays) :]
    assert_identical(
        update(acc.init(), *data, **dict(zip(names, mask_values, strict=True))), single, acc
    )

    def step(state, *xs):
        local = acc.update(
            acc.init(), *xs[: len(arrays)], **dict(zip(names, xs[len(arrays) :], strict=True))
        )
        return acc.merge(state, jax.lax.psum(local, "data"))

    specs = dict(in_specs=(P(),) + (P("data"),) * len(sharded), out_specs=P())
    mapped = jax.jit(jax.shard_map(step, mesh=mesh, **specs))
    assert_identical(mapped(acc.init(), *sharded), single, acc)


def main() -> int:
    assert jax.device_count() == DEVICES, jax.devices()
    mesh = jax.make_mesh((DEVICES,), ("data",), axis_types=(jax.sharding.AxisType.Auto,))
    cases = [
        (mesh, name, functools.partial(check, acc, arrays, masks, mesh))
        for name, (acc, arrays, masks) in batches().items()
    ]
    return run(cases)


if __name__ == "__main__":
    sys.exit(main())
