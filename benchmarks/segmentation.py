"""Benchmark: dataset accuracy + edit + F1@{10,25,50} with jaxseg vs per-video Python loops.

Everything runs in this process on the same synthetic data; the ratios are what we report.
Two baselines: the reference scripts' organisation of the algorithms (MS-TCN ``eval.py``:
per-frame loops, a numpy DP matrix, numpy IoU vectors, segments re-extracted per metric) and a
lean pure-Python version (lists, segments extracted once). jaxseg is timed warm (compiled),
through ``jaxseg.Evaluator``, with all host work included: validation, padding into aligned
buffers, transfer, both device phases and the final sums.

Run: ``python benchmarks/segmentation.py [--repeats N]``.
"""

from __future__ import annotations

import argparse
import resource
import time

import jax
import numpy as np
from _data import (
    baseline,
    breakfast_like,
    machine_summary,
    over_segmented,
    pad,
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


def _check(name, ours, reference):
    accuracy, edit, f1 = reference
    got = np.array([ours["accuracy"], ours["edit"], *(ours["f1"][t] for t in OVERLAPS)])
    want = np.array([accuracy, edit, *f1])
    if not np.allclose(got, want, rtol=0, atol=1e-9):
        raise AssertionError(f"{name}: jaxseg {got} != baseline {want}")


def run(name, targets, predictions, repeats):
    start = time.perf_counter()
    reference = reference_style_baseline(targets, predictions, overlaps=OVERLAPS)
    reference_time = time.perf_counter() - start
    start = time.perf_counter()
    lean = baseline(targets, predictions, overlaps=OVERLAPS)
    lean_time = time.perf_counter() - start
    if not np.allclose(np.hstack(lean), np.hstack(reference), rtol=0, atol=1e-12):
        raise AssertionError(f"{name}: the two baselines disagree: {lean} != {reference}")

    padded_t, lengths = pad(targets)
    padded_p, _ = pad(predictions)
    evaluator = jaxseg.Evaluator(overlaps=OVERLAPS)

    def from_padded():
        evaluator.reset()
        evaluator.add(padded_t, padded_p, lengths=lengths)
        return evaluator.get()

    def from_lists():
        evaluator.reset()
        evaluator.add(targets, predictions)
        return evaluator.get()

    rows = []
    for label, fn in (
        ("padded numpy arrays", from_padded),
        ("lists of per-video arrays", from_lists),
    ):
        start = time.perf_counter()
        _check(name, fn(), reference)  # first call: compiles
        first = time.perf_counter() - start
        seconds, result = _best_of(fn, repeats)
        _check(name, result, reference)
        rows.append((label, seconds, first - seconds))

    frames = int(lengths.sum())
    print(
        f"\n{name}: {len(targets)} videos, {frames / 1e6:.2f} M frames, padded to {padded_t.shape}"
    )
    print(f"  baseline, reference-script style: {reference_time * 1e3:9.1f} ms")
    print(f"  baseline, lean pure Python:       {lean_time * 1e3:9.1f} ms")
    for label, seconds, compile_seconds in rows:
        print(
            f"  jaxseg, {label:26s} {seconds * 1e3:8.1f} ms  = x{reference_time / seconds:5.0f}"
            f" (reference style), x{lean_time / seconds:5.0f} (lean)"
            f"   (first call +{compile_seconds:.1f} s: compilation)"
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    print(machine_summary())
    jax.block_until_ready(jax.numpy.zeros(1))  # start the backend: not part of any compilation
    run("Breakfast-shaped", *breakfast_like(), args.repeats)
    run("over-segmented", *over_segmented(), args.repeats)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak resident memory of the process: {peak:.0f} MiB")


if __name__ == "__main__":
    main()
