"""Benchmark: public functions called outside ``jax.jit`` (a notebook, a per-video loop).

Every public metric, loss and statistics function, and an accumulator's ``update``, ``merge``
and ``compute``, run as one compiled program per shape and static arguments
(``programs.one_program``; a loss checks its concrete labels on the host beside it). The
baseline, in the same run, is the same call with every program of jaxseg replaced by its body,
so that every operation is dispatched on its own, as before the programs existed. Both are
timed warm (best of N after one call) and on their first call with a new shape.

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
from jaxseg._src import programs, segmentation, soft_edit, temporal_losses

# The programs of jaxseg that run inside the public functions (beside one_program's).
INNER = (
    (segmentation, "_statistics_program"),
    (soft_edit, "_soft_edit_program"),
    (temporal_losses, "_ctc_program"),
)


def _run_body(fn, static, arrays):
    return fn(**programs._values(static), **arrays)


@contextlib.contextmanager
def _dispatched_one_by_one():
    """Every program of jaxseg replaced by its body for the duration (``one_program``'s and
    the inner ones), so that each operation is dispatched on its own."""
    bodies = [(programs, "_program", _run_body)]
    bodies += [(module, name, getattr(module, name).__wrapped__) for module, name in INNER]
    saved = [(module, name, getattr(module, name)) for module, name, _ in bodies]
    for module, name, body in bodies:
        setattr(module, name, body)
    try:
        yield
    finally:
        for module, name, program in saved:
            setattr(module, name, program)


def _calls(batch, frames, classes):
    """{name: (public function, its arguments)} on random data of this shape."""
    rng = np.random.default_rng(0)
    labels = np.repeat(rng.integers(0, classes, (batch, frames // 20 + 1)), 20, axis=1)[:, :frames]
    predictions = np.where(rng.random(labels.shape) < 0.1, rng.integers(0, classes), labels)
    logits = jnp.asarray(rng.normal(size=(batch, frames, classes)), jnp.float32)
    scores = rng.random((batch, frames)).astype(np.float32)
    count = frames // 10  # boxes, so that a new number of frames is a new shape here too
    boxes = np.sort(rng.random((batch, count, 2)), axis=-1).astype(np.float32)
    box_labels = rng.integers(0, 3, (batch, count))
    m, losses, streaming = jaxseg.metrics, jaxseg.losses, jaxseg.streaming
    segmentation = streaming.segmentation(num_classes=classes)
    ranking = streaming.frame_average_precision(num_classes=classes, num_thresholds=1000)
    # Ten-frame videos, so that a new number of frames is a new number of videos here.
    statistics = jaxseg.stats.segmentation_statistics(
        labels.reshape(-1, 10), predictions.reshape(-1, 10)
    )
    resampling = dict(key=jax.random.key(0), num_samples=1000)
    return {
        "edit_score": (m.edit_score, (labels, predictions), {}),
        "to_segments": (jaxseg.segments.to_segments, (labels,), {}),
        "accuracy": (m.accuracy, (labels, predictions), {}),
        "average_precision": (m.average_precision, (labels == 1, scores), {}),
        "detection_average_precision": (
            m.detection_average_precision,
            (boxes, box_labels, boxes[:, ::-1] * 0.9, box_labels, scores[:, :count]),
            {"num_classes": 3},
        ),
        "highlight_average_precision": (
            m.highlight_average_precision,
            (rng.integers(0, 5, (batch, frames, 3)), scores),
            {},
        ),
        "asot_hungarian_scores": (
            m.asot_hungarian_scores,
            (labels, predictions),
            {"num_classes": classes, "num_clusters": classes, "mode": "per"},
        ),
        "soft_edit_loss": (losses.soft_edit_loss, (logits, labels), {}),
        "ctc_transcript_loss": (losses.ctc_transcript_loss, (logits, labels), {}),
        "soft_levenshtein": (losses.soft_levenshtein, (logits[:, ::10], labels[:, ::20]), {}),
        "segment_start_penalty": (losses.segment_start_penalty, (logits, labels), {}),
        "lovasz_softmax_loss": (losses.lovasz_softmax_loss, (logits, labels), {}),
        "soft_dice_loss": (losses.soft_dice_loss, (logits, labels), {}),
        "temporal_giou_loss": (losses.temporal_giou_loss, (boxes, boxes * 0.9), {}),
        "stats.segmentation_metrics": (jaxseg.stats.segmentation_metrics, (statistics,), {}),
        "stats.bootstrap": (
            jaxseg.stats.bootstrap,
            (statistics, jaxseg.stats.segmentation_metrics),
            resampling,
        ),
        "streaming.segmentation update": (
            segmentation.update,
            (segmentation.init(), labels, predictions),
            {},
        ),
        "streaming.frame_average_precision update": (
            ranking.update,
            (ranking.init(), labels[..., None] == np.arange(classes), logits),
            {},
        ),
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
    for shape_index, (batch, frames) in enumerate([(4, 200), (4, 210)]):
        for name, (public, arrays, options) in _calls(batch, frames, classes=6).items():
            ours = _time(lambda: public(*arrays, **options), args.repeats)  # noqa: B023
            with _dispatched_one_by_one():
                baseline = _time(lambda: public(*arrays, **options), args.repeats)  # noqa: B023
            if shape_index:  # the second shape: both paths have compiled their pieces once
                print(
                    f"| {name} [{batch}, {frames}] | {ours[0]:.2f} s / {1e3 * ours[1]:.2f} ms "
                    f"| {baseline[0]:.2f} s / {1e3 * baseline[1]:.1f} ms "
                    f"| x{baseline[1] / ours[1]:.0f} |"
                )


if __name__ == "__main__":
    main()
