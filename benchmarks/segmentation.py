"""Benchmark: dataset accuracy + edit + F1@{10,25,50} with jaxseg vs a per-video Python loop.

Both sides run in this process on the same synthetic data; the ratio is what we report.
jaxseg is timed warm (compiled), through ``jaxseg.Evaluator``, with all host work included:
validation, padding into aligned buffers, transfer, both device phases and the final sums.

Run: ``python benchmarks/segmentation.py [--repeats N]``.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np
from _data import baseline, breakfast_like, machine_summary, over_segmented, pad

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
    reference = baseline(targets, predictions, overlaps=OVERLAPS)
    baseline_time = time.perf_counter() - start

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
    print(f"  pure-Python baseline: {baseline_time * 1e3:9.1f} ms")
    for label, seconds, compile_seconds in rows:
        print(
            f"  jaxseg, {label:26s} {seconds * 1e3:8.1f} ms  = x{baseline_time / seconds:6.0f}"
            f"   (first call +{compile_seconds:.1f} s: compilation)"
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    print(machine_summary())
    run("Breakfast-shaped", *breakfast_like(), args.repeats)
    run("over-segmented", *over_segmented(), args.repeats)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak resident memory of the process: {peak:.0f} MiB")


if __name__ == "__main__":
    main()
