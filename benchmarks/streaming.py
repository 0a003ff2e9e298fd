"""Benchmark: Evaluator.add by video / by batch / whole dataset, and the jitted streaming update.

On the Breakfast-shaped synthetic set (benchmarks/_data.py), against the two per-video
baselines of ``benchmarks/segmentation.py`` run in the same process (reference-script style and
lean pure Python; both ratios printed). Evaluator times include all host work
(validation, padding, transfer, both device phases, ``get``). Each Evaluator mode is timed
twice: a cold pass, which includes the compilations it triggers, and a warm pass (best of
``--repeats``) once every shape it needs has been compiled. Before timing, the numbers are
checked against the baseline (1e-9).

The jitted ``jaxseg.streaming.segmentation(...).update`` is timed on padded batches of the first
16, 64, 256 and 512 videos at default arguments (what a user writes: no segment capacity), each
call taking the previous state as an eval loop does (compilation excluded; the best and the
median of 100 calls, as a call takes 0.3-10 ms and this machine's speed drifts); the dataset
numbers of the 101 updates must equal the lean baseline's on the batch's videos to 1e-6, the
accumulator's float32 (the same videos counted 101 times give the same ratios); frames/second
counts padded frames.

Run: ``python benchmarks/streaming.py [--repeats N] [--quick]``.
"""

from __future__ import annotations

import argparse
import functools
import time

import jax
import numpy as np
from _data import baseline, breakfast_like, machine_summary, pad, reference_style_baseline

import jaxseg
from jaxseg import streaming

OVERLAPS = (0.1, 0.25, 0.5)


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def best_of(fn, repeats):
    times, result = [], None
    for _ in range(repeats):
        elapsed, result = timed(fn)
        times.append(elapsed)
    return min(times), result


def check(name, ours, reference, atol=1e-9):
    accuracy, edit, f1 = reference
    got = np.array([ours["accuracy"], ours["edit"], *(ours["f1"][t] for t in OVERLAPS)])
    want = np.array([accuracy, edit, *f1])
    if not np.allclose(got, want, rtol=0, atol=atol):
        raise AssertionError(f"{name}: jaxseg {got} != baseline {want}")


def evaluator_modes(targets, predictions, batch):
    padded_t, lengths = pad(targets)
    padded_p, _ = pad(predictions)

    def whole_dataset(ev):
        ev.add(padded_t, padded_p, lengths=lengths)

    def batches(ev):
        for start in range(0, len(targets), batch):
            ev.add(targets[start : start + batch], predictions[start : start + batch])

    def one_video_per_call(ev):
        for t, p in zip(targets, predictions, strict=True):
            ev.add(t, p)

    return {
        "whole dataset (padded + lengths)": whole_dataset,
        f"batches of {batch} (lists)": batches,
        "one video per call": one_video_per_call,
    }


def run_evaluator(targets, predictions, repeats, batch, per_call_videos):
    """Times every mode; one video per call runs on the first ``per_call_videos`` videos."""
    print(
        f"{'mode':36s} {'videos':>6s} {'ref-style s':>11s} {'lean s':>7s} {'cold s':>7s} "
        f"{'warm s':>7s} {'ratio ref-style':>15s} {'ratio lean':>10s}",
        flush=True,
    )
    for name, add in evaluator_modes(targets, predictions, batch).items():
        if name == "one video per call":
            targets, predictions = targets[:per_call_videos], predictions[:per_call_videos]
            add = evaluator_modes(targets, predictions, batch)[name]
        reference_time, reference = timed(
            functools.partial(reference_style_baseline, targets, predictions, overlaps=OVERLAPS)
        )
        lean_time, _ = timed(functools.partial(baseline, targets, predictions, overlaps=OVERLAPS))
        evaluator = jaxseg.Evaluator(iou_thresholds=OVERLAPS)

        def evaluate(add=add, evaluator=evaluator):
            evaluator.reset()
            add(evaluator)
            return evaluator.get()

        cold, result = timed(evaluate)
        check(name, result, reference)
        warm, result = best_of(evaluate, repeats)
        check(name, result, reference)
        print(
            f"{name:36s} {len(targets):6d} {reference_time:11.3f} {lean_time:7.3f} {cold:7.3f} "
            f"{warm:7.3f} {reference_time / warm:14.1f}x {lean_time / warm:9.1f}x",
            flush=True,
        )


def run_update(targets, predictions, batch):
    acc = streaming.segmentation(iou_thresholds=OVERLAPS)
    padded_t, lengths = pad(targets[:batch])
    padded_p, _ = pad(predictions[:batch])
    mask = np.arange(padded_t.shape[1]) < lengths[:, None]
    update = jax.jit(acc.update)
    inputs = jax.device_put((padded_t, padded_p, mask))
    state = acc.init()
    compile_time, _ = timed(
        lambda: jax.block_until_ready(update(state, inputs[0], inputs[1], mask=inputs[2]))
    )
    states = [state]  # as in an eval loop: each update takes the previous state

    def step():
        states[0] = jax.block_until_ready(update(states[0], inputs[0], inputs[1], mask=inputs[2]))

    times = [timed(step)[0] for _ in range(100)]
    elapsed, median = min(times), float(np.median(times))
    results = acc.compute(states[0])
    f1 = dict(zip(OVERLAPS, np.asarray(results["f1"]).tolist(), strict=True))
    reference = baseline(targets[:batch], predictions[:batch], overlaps=OVERLAPS)
    # The accumulator's ratios are float32 (the Evaluator's float64).
    check(f"update of {batch} videos", {**results, "f1": f1}, reference, atol=1e-6)
    frames = padded_t.size
    print(
        f"\njitted segmentation update, batch {padded_t.shape}, default arguments: first call "
        f"{compile_time:.1f} s, "
        f"then {elapsed * 1e3:.2f} ms = {frames / elapsed / 1e6:.1f} M frames/s "
        f"({int(mask.sum()) / elapsed / 1e6:.1f} M valid frames/s); median "
        f"{median * 1e3:.2f} ms = {frames / median / 1e6:.1f} M frames/s",
        flush=True,
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="128 videos, 1 repeat")
    parser.add_argument(
        "--per-call-videos",
        type=int,
        default=None,
        help="videos added one per call (default: all)",
    )
    args = parser.parse_args()
    videos = 128 if args.quick else 1712
    if args.per_call_videos is None:
        args.per_call_videos = videos
    repeats = 1 if args.quick else args.repeats
    print(machine_summary())
    targets, predictions = breakfast_like(videos=videos)
    frames = sum(len(t) for t in targets)
    print(f"Breakfast-shaped set: {len(targets)} videos, {frames} frames, 48 classes")
    for batch in (b for b in (16, 64, 256, 512) if b <= len(targets)):  # 64: the reference
        run_update(targets, predictions, batch)
    print("\nEvaluator vs the per-video baselines (same videos, same run; warm ratios)")
    run_evaluator(targets, predictions, repeats, batch=64, per_call_videos=args.per_call_videos)


if __name__ == "__main__":
    main()
