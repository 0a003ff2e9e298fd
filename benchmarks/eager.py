"""Benchmark: public functions called outside ``jax.jit`` (a notebook, a per-video loop).

Each public segmental metric and segment-level loss validates its arguments and then runs one
compiled program per shape and static arguments. The baseline, in the same run, is the same
function with that program replaced by its undecorated body, so that every operation is
dispatched on its own, as before the programs existed. Both are timed warm (best of N after
one call) and on their first call with a new shape.

Run: ``python benchmarks/eager.py [--repeats N]``.
"""

from __future__ import annotations

import argparse
import contextlib
import time

import jax
import jax.numpy as jnp
import numpy as np
from _data import machine_summary

import jaxseg
from jaxseg._src import segmentation, segments, soft_edit, temporal_losses

# (module, name of its compiled program) behind each public function timed here.
_PROGRAMS = {
    "edit_score": (segmentation, "_statistics_program"),
    "segmental_f1": (segmentation, "_statistics_program"),
    "to_segments": (segments, "_segments_program"),
    "soft_edit_loss": (soft_edit, "_soft_edit_program"),
    "ctc_transcript_loss": (temporal_losses, "_ctc_program"),
}


@contextlib.contextmanager
def _dispatched_one_by_one(module, name):
    """The module's compiled program replaced by its body for the duration."""
    program = getattr(module, name)
    setattr(module, name, program.__wrapped__)
    try:
        yield
    finally:
        setattr(module, name, program)


def _calls(batch, frames, classes):
    rng = np.random.default_rng(0)
    labels = np.repeat(rng.integers(0, classes, (batch, frames // 20 + 1)), 20, axis=1)[:, :frames]
    predictions = np.where(rng.random(labels.shape) < 0.1, rng.integers(0, classes), labels)
    logits = jnp.asarray(rng.normal(size=(batch, frames, classes)), jnp.float32)
    m, losses = jaxseg.metrics, jaxseg.losses
    return {
        "edit_score": lambda: m.edit_score(labels, predictions),
        "segmental_f1": lambda: m.segmental_f1(labels, predictions),
        "to_segments": lambda: jaxseg.segments.to_segments(labels).count,
        "soft_edit_loss": lambda: losses.soft_edit_loss(logits, labels),
        "ctc_transcript_loss": lambda: losses.ctc_transcript_loss(logits, labels),
    }


def _time(fn, repeats):
    start = time.perf_counter()
    jax.block_until_ready(fn())
    first = time.perf_counter() - start
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - start)
    return first, best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(machine_summary())
    print("| function | one program: first / warm | op by op: first / warm | warm ratio |")
    print("|---|---|---|---|")
    for shape_index, (batch, frames) in enumerate([(4, 200), (4, 201)]):
        calls = _calls(batch, frames, classes=6)
        for name, call in calls.items():
            ours = _time(call, args.repeats)
            with _dispatched_one_by_one(*_PROGRAMS[name]):
                baseline = _time(call, args.repeats)
            if shape_index:  # the second shape: both paths have compiled their pieces once
                print(
                    f"| {name} [{batch}, {frames}] | {ours[0]:.2f} s / {1e3 * ours[1]:.2f} ms "
                    f"| {baseline[0]:.2f} s / {1e3 * baseline[1]:.1f} ms "
                    f"| x{baseline[1] / ours[1]:.0f} |"
                )


if __name__ == "__main__":
    main()
