"""Benchmark: jaxseg's backend dispatches, the branch this backend runs against the other one.

A few kernels choose their formulation by backend with ``lax.platform_dependent``: on CPU
sorts of one packed word and running sums by matrix products, elsewhere sorts of pairs and
``jnp.cumsum``. This script runs the public calls that reach them twice, as shipped and with
every dispatch forced to the branch this backend does not take, checks that both give the
same bits, and times both: the measurement behind each choice, on the backend at hand (CPU
here, a GPU through ``benchmarks/accelerator.sh``).

Run: ``python benchmarks/dispatch.py [--repeats N] [--rounds R] [--cases NAME ...]``. The
inputs are put on the device first, so that the times are the programs'. Each round compiles
both variants afresh (``jax.clear_caches``), shipped first, and times the first call and the
median of N calls.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time

import jax
import numpy as np
from _data import breakfast_like, machine_summary, pad
from ranking import detection_data, frames_data

from jaxseg import metrics, segments

# Dispatches for correct results, not speed: numerics.divide rounds float32 quotients itself
# where the backend's division is not IEEE 754's.
CORRECTNESS = {"divide"}


@contextlib.contextmanager
def other_branch(sites=None):
    """Every ``lax.platform_dependent`` traced inside, called from a function named in
    ``sites`` (all if None), takes the branch this backend does not (the default branch on
    CPU, the CPU branch elsewhere); yields the set of the functions that dispatched."""
    shipped, seen = jax.lax.platform_dependent, set()
    on_cpu = jax.default_backend() == "cpu"

    def forced(*args, default, **per_platform):
        site = sys._getframe(1).f_code.co_name
        if site in CORRECTNESS:
            return shipped(*args, default=default, **per_platform)
        seen.add(site)
        if sites is not None and site not in sites:
            return shipped(*args, default=default, **per_platform)
        return (default if on_cpu else per_platform["cpu"])(*args)

    jax.lax.platform_dependent = forced
    try:
        yield seen
    finally:
        jax.lax.platform_dependent = shipped


def ranking_case():
    """Per-frame mAP of 200,000 x 21 (the ranking's sorts, running counts)."""
    targets, scores = frames_data(200_000, 21)
    fn = lambda t, s: metrics.mean_average_precision(t, s).per_class  # noqa: E731
    return "per-frame mAP, 200000 x 21", fn, (targets, scores)


def hungarian_case():
    """CTE's global Hungarian scores at default arguments (running sums of packed flags)."""
    targets, predictions = breakfast_like()
    padded_t, lengths = pad(targets)
    padded_p, _ = pad(predictions)

    def fn(t, p, lengths):
        m = segments.lengths_to_mask(lengths, t.shape[-1])
        options = dict(num_classes=48, num_clusters=48, mask=m)
        return metrics.global_hungarian_scores(t, p, **options)

    return "global Hungarian (MoF, IoU, F1), 1712 x 6000", fn, (padded_t, padded_p, lengths)


def detection_case():
    """ActivityNet detection mAP@0.5:0.95 of ``benchmarks/ranking.py``'s set (the stable
    order of the predictions' scores)."""
    thresholds = tuple(np.round(np.linspace(0.5, 0.95, 10), 2).tolist())
    boxes, labels, target_mask, predicted, predicted_labels, scores, prediction_mask = (
        detection_data(5000, 200, 100, 4)
    )

    def fn(boxes, labels, predicted, predicted_labels, scores, target_mask, prediction_mask):
        return metrics.detection_average_precision(
            boxes,
            labels,
            predicted,
            predicted_labels,
            scores,
            num_classes=200,
            iou_thresholds=thresholds,
            target_mask=target_mask,
            prediction_mask=prediction_mask,
        ).mean

    args = (boxes, labels, predicted, predicted_labels, scores, target_mask, prediction_mask)
    return "detection mAP@0.5:0.95, 5000 videos x 100, 200 classes", fn, args


CASES = {"ranking": ranking_case, "hungarian": hungarian_case, "detection": detection_case}


def timed(fn, args, repeats):
    """(first call s, median warm call s, outputs as numpy) of ``jax.jit(fn)``, compiled
    afresh."""
    jax.clear_caches()
    call = jax.jit(fn)
    start = time.perf_counter()
    out = jax.block_until_ready(call(*args))
    first = time.perf_counter() - start
    warm = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(call(*args))
        warm.append(time.perf_counter() - start)
    return first, float(np.median(warm)) if warm else np.nan, jax.tree.map(np.asarray, out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    args = parser.parse_args()
    print(machine_summary())
    other = "default" if jax.default_backend() == "cpu" else "cpu"
    print(
        f"| case | dispatches forced to the {other} branch | shipped | forced | ratio "
        "| first calls (s) |"
    )
    print("|---|---|---|---|---|---|")
    for make in (CASES[name] for name in args.cases):
        name, fn, host_args = make()
        device_args = jax.device_put(host_args)
        with other_branch() as seen:
            timed(fn, device_args, 0)
        for sites in [None] + ([{s} for s in sorted(seen)] if len(seen) > 1 else []):
            firsts, ratios, times = [], [], []
            for _ in range(args.rounds):
                first, warm, want = timed(fn, device_args, args.repeats)
                with other_branch(sites):
                    first_other, warm_other, got = timed(fn, device_args, args.repeats)
                jax.tree.map(np.testing.assert_array_equal, got, want)
                firsts.append((first, first_other))
                times.append((warm, warm_other))
                ratios.append(warm_other / warm)
            shipped, forced = np.median(times, axis=0) * 1e3
            first, first_other = np.median(firsts, axis=0)
            label = ", ".join(sorted(seen if sites is None else sites))
            print(
                f"| {name} | {label} | {shipped:.2f} ms | {forced:.2f} ms | "
                f"x{np.median(ratios):.2f} [{min(ratios):.2f}-{max(ratios):.2f}] | "
                f"{first:.1f} / {first_other:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
