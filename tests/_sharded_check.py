"""Sharded streaming updates on 8 simulated CPU devices equal the single-device result exactly.

Run by ``tests/test_sharding.py`` in a subprocess (the device count must be set before JAX is
imported): ``python tests/_sharded_check.py [auto] [explicit]`` checks meshes of those axis
types (default auto). Every check must give the same exact counts and bit-identical metrics as
one device; failures are printed and the exit status is 1.
"""

from __future__ import annotations

import os
import sys

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
).strip()
# The eight devices are simulated CPUs: on a machine with a GPU, JAX would take its one GPU.
os.environ["JAX_PLATFORMS"] = "cpu"

import jax
import numpy as np
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxseg import streaming

DEVICES = 8
C = 5
BATCH, FRAMES = 16, 40


def random_batch(seed):
    """Piecewise-constant targets, noisy predictions, prefix masks incl. all-padding rows."""
    rng = np.random.default_rng(seed)
    segment = np.cumsum(rng.random((BATCH, FRAMES)) < 0.15, axis=1)
    targets = (segment * 7 + rng.integers(0, C, (BATCH, 1))) % C
    predictions = np.where(
        rng.random((BATCH, FRAMES)) < 0.1, rng.integers(0, C, (BATCH, FRAMES)), targets
    )
    lengths = rng.integers(0, FRAMES + 1, BATCH)
    mask = np.arange(FRAMES) < lengths[:, None]
    mask[rng.random(mask.shape) < 0.05] = False  # interior holes too
    mask[[3, 10]] = False  # padding rows
    return targets.astype(np.int32), predictions.astype(np.int32), mask


def exact(state):
    is_count = lambda x: isinstance(x, streaming.Count)  # noqa: E731
    return [np.asarray(streaming.to_int(c)) for c in jax.tree.leaves(state, is_leaf=is_count)]


def assert_identical(sharded, single, acc):
    """Equal exact counts and bit-identical computed metrics."""
    for a, b in zip(exact(sharded), exact(single), strict=True):
        np.testing.assert_array_equal(a, b)
    results = jax.tree.leaves(acc.compute(sharded)), jax.tree.leaves(acc.compute(single))
    for a, b in zip(*results, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def checks(name, acc, mesh, batch):
    """``(label, thunk)`` pairs; each thunk raises when its sharded result differs."""
    targets, predictions, mask = batch
    update = jax.jit(acc.update)
    single = update(acc.init(), targets, predictions, mask=mask)

    inputs = jax.device_put((targets, predictions, mask), NamedSharding(mesh, P("data")))
    assert len(inputs[0].sharding.device_set) == DEVICES

    def jit_over_named_sharding():
        sharded = update(acc.init(), inputs[0], inputs[1], mask=inputs[2])
        assert_identical(sharded, single, acc)

    def step(state, t, p, m):
        local = acc.update(acc.init(), t, p, mask=m)
        return acc.merge(state, jax.lax.psum(local, "data"))

    def shard_map_psum(check_vma):
        specs = dict(in_specs=(P(), P("data"), P("data"), P("data")), out_specs=P())
        mapped = jax.jit(jax.shard_map(step, mesh=mesh, check_vma=check_vma, **specs))
        start = update(acc.init(), targets[:3], predictions[:3], mask=mask[:3])
        merged = mapped(start, *inputs)
        assert_identical(merged, acc.merge(start, single), acc)

    axis = mesh.axis_types[0].name
    out = [(f"{name}, {axis} mesh: jit over NamedSharding", jit_over_named_sharding)]
    if mesh.axis_types[0] == AxisType.Auto:  # shard_map does not depend on the axis type
        out.append((f"{name}, {axis} mesh: shard_map + psum", lambda: shard_map_psum(True)))
    return out


def main(axis_types) -> int:
    assert jax.device_count() == DEVICES, jax.devices()
    batch = random_batch(0)
    assert (~batch[2].any(axis=1)).any(), "the batch should hold padding rows"
    accumulators = {
        "segmentation": streaming.segmentation(
            num_classes=C, background=(0,), max_target_segments=16, max_predicted_segments=24
        ),
        "frame_metrics": streaming.frame_metrics(num_classes=C),
    }
    cases = []
    for axis_type in axis_types:
        mesh = jax.make_mesh((DEVICES,), ("data",), axis_types=(axis_type,))
        for name, acc in accumulators.items():
            cases += [(mesh, label, thunk) for label, thunk in checks(name, acc, mesh, batch)]
    return run(cases)


def run(cases) -> int:
    """Runs ``(mesh, label, thunk)`` cases under their mesh, prints each outcome, and returns
    the exit status (1 if any failed): every case runs even after a failure."""
    failed = []
    for mesh, label, thunk in cases:
        try:
            with jax.set_mesh(mesh):  # the mesh context Explicit axes require
                thunk()
            print(f"ok: {label}")
        except Exception as error:  # reported below, then exit status 1
            failed.append(label)
            print(f"FAILED: {label}: {type(error).__name__}: {str(error)[:300]}")
    print(f"{len(failed)} failed" if failed else "all sharded checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main([AxisType[name.capitalize()] for name in sys.argv[1:]] or [AxisType.Auto]))
