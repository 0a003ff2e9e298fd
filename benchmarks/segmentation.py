"""Benchmark: dataset accuracy + edit + F1@{10,25,50} with jaxseg vs per-video Python loops.

Everything runs in this process on the same synthetic data; the ratios are what we report.
Two baselines: the reference scripts' organisation of the algorithms (MS-TCN ``eval.py``:
per-frame loops, a numpy DP matrix, numpy IoU vectors, segments re-extracted per metric) and a
lean pure-Python version (lists, segments extracted once). jaxseg is timed warm (compiled) in
three ways: the public functions at default arguments under one ``jax.jit``, called with the
padded numpy arrays and lengths as a user would (transfer and the host's dataset sums
included); the same written for one video and mapped with ``jax.vmap``; and
``jaxseg.Evaluator`` with all its host work (validation, padding into aligned buffers,
transfer, both device phases and the final sums).

Run: ``python benchmarks/segmentation.py [--repeats N] [--rounds R] [--background L ...]
[--gaps G]`` (background labels form no segment, as MS-TCN's ``bg_class``; the edit and F1 of
both baselines and of jaxseg then leave them out; with ``--gaps``, every video also loses G
stretches of 50 frames, given to jaxseg as a mask and removed from the baselines' videos).
Each round runs both baselines, then jaxseg (best of N); the ratio reported is the median over
the rounds.
"""

from __future__ import annotations

import argparse
import functools
import resource
import time

import jax
import numpy as np
from _data import (
    baseline,
    breakfast_like,
    machine_summary,
    over_segmented,
    reference_style_baseline,
)

import jaxseg

OVERLAPS = (0.1, 0.25, 0.5)


def _best_of(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def _check(name, ours, reference, atol=1e-9):
    accuracy, edit, f1 = reference
    got = np.array([ours["accuracy"], ours["edit"], *(ours["f1"][t] for t in OVERLAPS)])
    want = np.array([accuracy, edit, *f1])
    if not np.allclose(got, want, rtol=0, atol=atol):
        raise AssertionError(f"{name}: jaxseg {got} != baseline {want}")


def _mask(valid, labels):
    """``valid`` itself if it is a mask (shaped like ``labels``), else the mask of lengths
    ``valid``."""
    if valid.ndim == labels.ndim:
        return valid
    return jaxseg.segments.lengths_to_mask(valid, labels.shape[-1])


@functools.partial(jax.jit, static_argnames="background")
def _public_functions(targets, predictions, valid, background=()):
    """What a user writes: the public metrics at default arguments under one jit (``valid``:
    the lengths, or a mask)."""
    mask = _mask(valid, targets)
    m = jaxseg.metrics
    options = dict(mask=mask, background=background)
    return (
        m.accuracy(targets, predictions, mask=mask),
        m.edit_score(targets, predictions, **options),
        m.segmental_counts(targets, predictions, iou_thresholds=OVERLAPS, **options),
    )


@functools.partial(jax.jit, static_argnames="background")
@functools.partial(jax.vmap, in_axes=(0, 0, 0, None))
def _public_functions_per_video(target, prediction, valid, background=()):
    """The same written for one video and mapped over the batch with ``jax.vmap``."""
    mask = _mask(valid, target)
    m = jaxseg.metrics
    options = dict(mask=mask, background=background)
    return (
        m.accuracy(target, prediction, mask=mask),
        m.edit_score(target, prediction, **options),
        m.segmental_counts(target, prediction, iou_thresholds=OVERLAPS, **options),
    )


def _dataset_numbers(accuracy, edit, counts, frames):
    """MS-TCN's dataset numbers from per-video values, on the host in float64."""
    tp, fp, fn = (np.asarray(x, np.float64).sum(axis=0) for x in counts)
    f1 = np.where(tp > 0, 2 * tp / np.maximum(2 * tp + fp + fn, 1), 0.0)
    frames = np.asarray(frames, np.float64)
    return {
        "accuracy": float(np.dot(np.asarray(accuracy, np.float64), frames) / frames.sum()),
        "edit": float(np.mean(np.asarray(edit, np.float64))),
        "f1": dict(zip(OVERLAPS, f1)),
    }


def run(name, targets, predictions, repeats, rounds, background=(), gaps=0):
    """Times both baselines and jaxseg's entry points in ``rounds`` back-to-back rounds,
    so that each ratio compares times measured within a few seconds of each other (this
    machine's speed drifts by tens of percent between minutes), and prints their median."""
    padded_t, lengths = jaxseg.io.pad_videos(targets)
    padded_p, _ = jaxseg.io.pad_videos(predictions)
    valid, frames, options = lengths, lengths, {"lengths": lengths}
    if gaps:
        masks = [_with_gaps(len(t), gaps, np.random.default_rng(i)) for i, t in enumerate(targets)]
        valid, _ = jaxseg.io.pad_videos(masks, dtype=bool)
        frames, options = valid.sum(axis=1), {"mask": valid}
        targets = [t[m] for t, m in zip(targets, masks)]
        predictions = [p[m] for p, m in zip(predictions, masks)]
    evaluator = jaxseg.Evaluator(iou_thresholds=OVERLAPS, background=background)

    def from_padded():
        evaluator.reset()
        evaluator.add(padded_t, padded_p, **options)
        return evaluator.get()

    def from_lists():
        evaluator.reset()
        evaluator.add(targets, predictions)
        return evaluator.get()

    def public_functions():
        numbers = _public_functions(padded_t, padded_p, valid, background=background)
        return _dataset_numbers(*numbers, frames)

    def per_video_vmapped():
        numbers = _public_functions_per_video(padded_t, padded_p, valid, background)
        return _dataset_numbers(*numbers, frames)

    entry_points = {
        "public functions, defaults": public_functions,
        "the same under jax.vmap": per_video_vmapped,
        "Evaluator, padded arrays": from_padded,
        "Evaluator, lists of videos": from_lists,
    }
    # Per-video float32 accuracies and edit scores, summed on the host: 1e-6, not exact.
    tolerance = {"public functions, defaults": 1e-6, "the same under jax.vmap": 1e-6}
    compile_seconds = {}
    times = {"reference": [], "lean": [], **{label: [] for label in entry_points}}
    for _ in range(rounds):
        start = time.perf_counter()
        reference = reference_style_baseline(targets, predictions, background, OVERLAPS)
        times["reference"].append(time.perf_counter() - start)
        start = time.perf_counter()
        lean = baseline(targets, predictions, background, OVERLAPS)
        times["lean"].append(time.perf_counter() - start)
        if not np.allclose(np.hstack(lean), np.hstack(reference), rtol=0, atol=1e-12):
            raise AssertionError(f"{name}: the two baselines disagree: {lean} != {reference}")
        for label, fn in entry_points.items():
            if label not in compile_seconds:
                start = time.perf_counter()
                _check(name, fn(), reference, tolerance.get(label, 1e-9))  # compiles
                compile_seconds[label] = time.perf_counter() - start
            seconds, result = _best_of(fn, repeats)
            _check(name, result, reference, tolerance.get(label, 1e-9))
            times[label].append(seconds)

    print(
        f"\n{name}: {len(targets)} videos, {int(frames.sum()) / 1e6:.2f} M frames, padded to "
        f"{padded_t.shape}; {rounds} rounds"
    )
    print(f"  baseline, reference-script style: {_spread(times['reference'], 1e3, '.1f')} ms")
    print(f"  baseline, lean pure Python:       {_spread(times['lean'], 1e3, '.1f')} ms")
    for label in entry_points:
        ours = np.array(times[label])
        versus_reference = np.array(times["reference"]) / ours
        versus_lean = np.array(times["lean"]) / ours
        print(
            f"  jaxseg, {label:27s} {_spread(ours, 1e3, '.1f')} ms"
            f" = x{np.median(versus_reference):.0f} (reference style, rounds"
            f" {_spread(versus_reference, 1, '.0f')}), x{np.median(versus_lean):.0f} (lean)"
            f"   (first call +{compile_seconds[label] - ours[0]:.1f} s: compilation)"
        )


def _with_gaps(frames, gaps, rng):
    """bool ``[frames]``: every frame valid but those of ``gaps`` stretches of 50 frames."""
    mask = np.ones(frames, bool)
    for start in rng.integers(0, max(frames - 50, 1), gaps):
        mask[start : start + 50] = False
    return mask


def _spread(values, scale, fmt):
    """``median [min-max]`` of ``values * scale``."""
    values = np.asarray(values) * scale
    low, mid, high = (format(x, fmt) for x in (values.min(), np.median(values), values.max()))
    return f"{mid} [{low}-{high}]"


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=10, help="jaxseg: best of N, per round")
    parser.add_argument("--rounds", type=int, default=3, help="baseline + jaxseg rounds")
    parser.add_argument(
        "--background",
        type=int,
        nargs="*",
        default=[],
        help="labels that form no segment (MS-TCN's bg_class), e.g. --background 0",
    )
    parser.add_argument(
        "--gaps", type=int, default=0, help="stretches of 50 frames masked in every video"
    )
    args = parser.parse_args()
    print(machine_summary())
    background = tuple(args.background)
    if background:
        print(f"background labels: {background}")
    jax.block_until_ready(jax.numpy.zeros(1))  # start the backend: not part of any compilation
    if args.gaps:
        print(f"masked: {args.gaps} stretches of 50 frames per video")
    options = dict(background=background, gaps=args.gaps)
    run("Breakfast-shaped", *breakfast_like(), args.repeats, args.rounds, **options)
    run("over-segmented", *over_segmented(), args.repeats, args.rounds, **options)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak resident memory of the process: {peak:.0f} MiB")


if __name__ == "__main__":
    main()
