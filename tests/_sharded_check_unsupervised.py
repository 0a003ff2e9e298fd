"""Sharded updates of the unsupervised accumulators on 8 simulated CPU devices equal one
device exactly (run by ``tests/test_sharding_unsupervised.py`` in a subprocess):
``python tests/_sharded_check_unsupervised.py [auto] [explicit]``.

The per-video accumulators solve a Hungarian matching per video inside ``update``, in
optax's ``base_hungarian_algorithm`` (optax 0.2.8), whose loops accept neither an explicitly
sharded batch nor ``shard_map``'s varying-manual-axes check: they are checked under jit over
an auto-sharded batch and under ``shard_map(..., check_vma=False)``.
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

import _sharded_check as base
import jax
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxseg import streaming

K = 4  # clusters


def _shard_map(acc, mesh, batch):
    """``base.checks``' shard_map + psum check, with ``check_vma=False``."""
    targets, predictions, mask = batch
    inputs = jax.device_put(batch, NamedSharding(mesh, P("data")))
    update = jax.jit(acc.update)
    single = update(acc.init(), targets, predictions, mask=mask)

    def step(state, t, p, m):
        local = acc.update(acc.init(), t, p, mask=m)
        return acc.merge(state, jax.lax.psum(local, "data"))

    specs = dict(in_specs=(P(), P("data"), P("data"), P("data")), out_specs=P())
    mapped = jax.jit(jax.shard_map(step, mesh=mesh, check_vma=False, **specs))
    start = update(acc.init(), targets[:3], predictions[:3], mask=mask[:3])
    base.assert_identical(mapped(start, *inputs), acc.merge(start, single), acc)


def main(axis_types) -> int:
    assert jax.device_count() == base.DEVICES, jax.devices()
    targets, predictions, mask = base.random_batch(0)
    batch = (targets - 1, (predictions + 1) % K - 1, mask)  # background -1 in both
    kw = dict(num_classes=base.C, num_clusters=K)
    accumulators = {
        "global_hungarian cte": streaming.global_hungarian(exclude_background=True, **kw),
        "global_hungarian asot": streaming.global_hungarian(protocol="asot", **kw),
        "per_video_hungarian twfinch": streaming.per_video_hungarian(**kw),
        "per_video_hungarian asot": streaming.per_video_hungarian(protocol="asot", **kw),
    }
    cases = []
    for axis_type in axis_types:
        mesh = jax.make_mesh((base.DEVICES,), ("data",), axis_types=(axis_type,))
        for name, acc in accumulators.items():
            per_video = name.startswith("per_video")
            if per_video and axis_type == AxisType.Explicit:
                continue
            checks = base.checks(name, acc, mesh, batch)
            if per_video:  # shard_map without the varying-manual-axes check (see above)
                checks = [
                    checks[0],
                    (
                        f"{name}, Auto mesh: shard_map + psum, no vma check",
                        functools.partial(_shard_map, acc, mesh, batch),
                    ),
                ]
            cases += [(mesh, label, thunk) for label, thunk in checks]
    return base.run(cases)


if __name__ == "__main__":
    sys.exit(main([AxisType[name.capitalize()] for name in sys.argv[1:]] or [AxisType.Auto]))
