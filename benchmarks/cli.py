"""`jaxseg evaluate` on a Breakfast-sized folder, file reading included.

Writes a synthetic Breakfast-shaped dataset (1712 videos, 300-6000 frames, 48 classes; ground
truth one label per line, predictions in the MS-TCN results format) to a temporary folder,
then times, in this process:

* reading only (``jaxseg.io.load_segmentation_dataset``),
* ``jaxseg evaluate`` in-process, first run (compiles) and warm (best of ``--repeats``),
* ``python -m jaxseg evaluate`` as a user runs it (a new process: imports, reads, and
  compiles, or loads the compiled programs from the on-disk cache on later runs),
* the baseline: reading the files the way the reference scripts do (``read().split('\\n')``
  per file, label names mapped per frame in Python) and evaluating with per-video Python loops
  (``benchmarks/_data.py``), with the same numbers checked.

Run: ``python benchmarks/cli.py`` (``--quick`` for 200 videos).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import baseline, breakfast_like, machine_summary

CLASS_NAMES = ["SIL"] + [f"action_{i:02d}" for i in range(1, 48)]


def write_folder(root: Path, videos: int) -> tuple[Path, Path]:
    targets, predictions = breakfast_like(seed=0, videos=videos)
    truth, predicted = root / "groundTruth", root / "predictions"
    truth.mkdir()
    predicted.mkdir()
    (root / "mapping.txt").write_text("".join(f"{i} {n}\n" for i, n in enumerate(CLASS_NAMES)))
    names = np.array(CLASS_NAMES)
    for v, (target, prediction) in enumerate(zip(targets, predictions, strict=True)):
        (truth / f"video_{v:04d}.txt").write_text("\n".join(names[target]) + "\n")
        header = "### Frame level recognition: ###\n"
        (predicted / f"video_{v:04d}").write_text(header + " ".join(names[prediction]) + "\n")
    return truth, predicted


def baseline_run(truth: Path, predicted: Path, background: tuple[str, ...]):
    """The reference scripts' way: split lines, map names per frame, per-video Python loops."""
    index = {name: i for i, name in enumerate(CLASS_NAMES)}
    targets, predictions = [], []
    for path in sorted(truth.iterdir()):
        gt = path.read_text().split("\n")[:-1]
        recognized = (predicted / path.stem).read_text().split("\n")[1].split()
        targets.append(np.array([index[x] for x in gt]))
        predictions.append(np.array([index[x] for x in recognized]))
    accuracy, edit, f1 = baseline(
        targets, predictions, background=tuple(index[b] for b in background)
    )
    return 100 * accuracy, 100 * edit, [100 * x for x in f1]


def timed(function):
    start = time.perf_counter()
    result = function()
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 videos instead of 1712")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-baseline", action="store_true")
    args = parser.parse_args()
    videos = 200 if args.quick else 1712

    os.environ["JAXSEG_CACHE_DIR"] = ""  # in-process runs: no disk cache (compile once)
    from jaxseg._host.cli import main as jaxseg_main
    from jaxseg.io import load_segmentation_dataset

    print(machine_summary())
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary)
        seconds, (truth, predicted) = timed(lambda: write_folder(root, videos))
        frames = sum(len(p.read_bytes().split()) for p in truth.iterdir())
        size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
        print(f"dataset: {videos} videos, {frames:,} frames, 48 classes, {size / 1e6:.0f} MB "
              f"of text (written in {seconds:.1f} s)")  # fmt: skip
        argv = ["evaluate", str(truth), str(predicted), "--background", "SIL", "--format", "json",
                "--output", str(root / "results.json"), "--quiet"]  # fmt: skip

        read, _ = timed(lambda: load_segmentation_dataset(truth, predicted))
        first, _ = timed(lambda: jaxseg_main(argv))
        warm = min(timed(lambda: jaxseg_main(argv))[0] for _ in range(args.repeats))
        command = [sys.executable, "-m", "jaxseg", *argv]
        environment = {**os.environ, "JAXSEG_CACHE_DIR": str(root / "cache")}
        cold, _ = timed(lambda: subprocess.run(command, check=True, env=environment))
        cached, _ = timed(lambda: subprocess.run(command, check=True, env=environment))
        row = json.loads((root / "results.json").read_text())["results"][0]
        ours = [row["Acc"], row["Edit"], row["F1@10"], row["F1@25"], row["F1@50"]]
        print(f"reading only (load_segmentation_dataset): {read:6.2f} s")
        print(f"jaxseg evaluate, in-process, first run:   {first:6.2f} s (includes compilation)")
        print(f"jaxseg evaluate, in-process, warm:        {warm:6.2f} s (best of {args.repeats})")
        print(f"python -m jaxseg evaluate, new process, empty cache: {cold:6.2f} s")
        print(
            f"python -m jaxseg evaluate, new process, cached:      {cached:6.2f} s  <- later runs"
        )
        print("jaxseg:   Acc {:.4f}  Edit {:.4f}  F1@10,25,50 {:.4f} {:.4f} {:.4f}".format(*ours))
        if not args.no_baseline:
            slow, (accuracy, edit, f1) = timed(lambda: baseline_run(truth, predicted, ("SIL",)))
            reference = [accuracy, edit, *f1]
            print("baseline: Acc {:.4f}  Edit {:.4f}  F1@10,25,50 {:.4f} {:.4f} {:.4f}".format(
                *reference))  # fmt: skip
            assert np.allclose(ours, reference, atol=1e-9), (ours, reference)
            print(f"baseline (per-line reading + per-video Python loops): {slow:6.2f} s; "
                  f"ratio baseline / jaxseg: {slow / cached:.1f}x (new process, cached), "
                  f"{slow / warm:.1f}x (warm)")  # fmt: skip


if __name__ == "__main__":
    main()
