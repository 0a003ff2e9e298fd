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
    """The state's counts as integers and its other leaves (buffers of scores) as arrays."""
    is_count = lambda x: isinstance(x, streaming.Count)  # noqa: E731
    leaves = jax.tree.leaves(state, is_leaf=is_count)
    return [np.asarray(streaming.to_int(x) if is_count(x) else x) for x in leaves]


def assert_identical(sharded, single, acc):
    """Equal exact counts and bit-identical computed metrics."""
    for a, b in zip(exact(sharded), exact(single), strict=True):
        np.testing.assert_array_equal(a, b)
    results = jax.tree.leaves(acc.compute(sharded)), jax.tree.leaves(acc.compute(single))
    for a, b in zip(*results, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def checks(name, acc, meshes, arrays, keywords, *, additive=True):
    """``(mesh, label, thunk)`` triples; each thunk raises when its sharded result differs.

    ``update(state, *arrays, **keywords)`` (arrays ``[V, ...]``, keyword arrays or None)
    under jit over the batch sharded along V, on each mesh (of either axis type); on an Auto
    mesh also a ``shard_map`` of per-device updates merged by ``psum``, for ``additive``
    states (a buffer of scores is merged by concatenation, not by a sum).

    The reference is the unsharded batch's update without a mesh, computed here once for all
    meshes (the checks run under ``jax.set_mesh``): the program compiled under a context mesh
    must give the same bits. Highlight's APs once did not (XLA divided their precisions by
    the reciprocals of constant ranks in one of the two programs, ``numerics.count_ratio``).
    """
    update = jax.jit(acc.update)
    reference = update(acc.init(), *arrays, **keywords)
    return [
        (mesh, label, thunk)
        for mesh in meshes
        for label, thunk in _mesh_checks(
            name, acc, mesh, update, reference, arrays, keywords, additive
        )
    ]


def _mesh_checks(name, acc, mesh, update, reference, arrays, keywords, additive):
    """:func:`checks` on one mesh: ``(label, thunk)`` pairs."""
    single = lambda: reference  # noqa: E731
    inputs = jax.device_put((arrays, keywords), NamedSharding(mesh, P("data")))
    assert all(len(x.sharding.device_set) == DEVICES for x in jax.tree.leaves(inputs))

    def jit_over_named_sharding():
        assert_identical(update(acc.init(), *inputs[0], **inputs[1]), single(), acc)

    def step(state, arrays, keywords):
        local = acc.update(acc.init(), *arrays, **keywords)
        return acc.merge(state, jax.lax.psum(local, "data"))

    def shard_map_psum():
        specs = dict(in_specs=(P(), P("data"), P("data")), out_specs=P())
        mapped = jax.jit(jax.shard_map(step, mesh=mesh, **specs))
        first = jax.tree.map(lambda x: x[:3], (arrays, keywords))
        start = update(acc.init(), *first[0], **first[1])
        assert_identical(mapped(start, *inputs), acc.merge(start, single()), acc)

    axis = mesh.axis_types[0].name
    out = [(f"{name}, {axis} mesh: jit over NamedSharding", jit_over_named_sharding)]
    # shard_map does not depend on the axis type
    if additive and mesh.axis_types[0] == AxisType.Auto:
        out.append((f"{name}, {axis} mesh: shard_map + psum", shard_map_psum))
    return out


def meshes(axis_types):
    """One mesh of all devices on the ``data`` axis per axis type."""
    return [jax.make_mesh((DEVICES,), ("data",), axis_types=(t,)) for t in axis_types]


def parse_axis_types(names):
    """Command-line names (``auto``, ``explicit``) as axis types; default Auto."""
    return [AxisType[name.capitalize()] for name in names] or [AxisType.Auto]


def accumulators():
    """The accumulators checked here, by name."""
    return {
        "segmentation": streaming.segmentation(
            num_classes=C, background=(0,), max_target_segments=16, max_predicted_segments=24
        ),
        "frame_metrics": streaming.frame_metrics(num_classes=C),
    }


def main(axis_types) -> int:
    assert jax.device_count() == DEVICES, jax.devices()
    targets, predictions, mask = random_batch(0)
    assert (~mask.any(axis=1)).any(), "the batch should hold padding rows"
    cases = []
    for name, acc in accumulators().items():
        cases += checks(name, acc, meshes(axis_types), (targets, predictions), {"mask": mask})
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
    sys.exit(main(parse_axis_types(sys.argv[1:])))
