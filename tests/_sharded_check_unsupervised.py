"""Sharded updates of the unsupervised accumulators on 8 simulated CPU devices equal one
device exactly (run by ``tests/test_sharding_unsupervised.py`` in a subprocess):
``python tests/_sharded_check_unsupervised.py [auto] [explicit]``.

The per-video accumulators solve a Hungarian matching per video inside ``update``: its loops'
carries vary over ``shard_map``'s axes as the tables do, and on an explicit mesh the tables
(replicated sums of a scatter) and the sharded labels meet in one ``jax.vmap``.
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

from jaxseg import streaming

K = 4  # clusters


def accumulators():
    kw = dict(num_classes=base.C, num_clusters=K)
    return {
        "global_hungarian cte": streaming.global_hungarian(exclude_background=True, **kw),
        "global_hungarian asot": streaming.global_hungarian(protocol="asot", **kw),
        "per_video_hungarian twfinch": streaming.per_video_hungarian(**kw),
        "per_video_hungarian asot": streaming.per_video_hungarian(protocol="asot", **kw),
    }


def main(axis_types) -> int:
    assert jax.device_count() == base.DEVICES, jax.devices()
    targets, predictions, mask = base.random_batch(0)
    batch = (targets - 1, (predictions + 1) % K - 1, mask)  # background -1 in both
    cases = []
    for name, acc in accumulators().items():
        cases += base.checks(name, acc, base.meshes(axis_types), batch[:2], {"mask": batch[2]})
    return base.run(cases)


if __name__ == "__main__":
    sys.exit(main(base.parse_axis_types(sys.argv[1:])))
