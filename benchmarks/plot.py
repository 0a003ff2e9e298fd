"""`jaxseg evaluate --plot` against the same run without pictures, on a Breakfast-sized folder.

Writes the synthetic Breakfast-shaped dataset of ``benchmarks/cli.py`` (1712 videos, 300-6000
frames, 48 classes, MS-TCN layout) to ``--folder`` (a temporary folder by default), runs
``python -m jaxseg evaluate`` once to fill the compilation cache, then times ``--rounds``
back-to-back rounds of the plain run and the run with ``--plot DIR`` (each a new process, as
a user runs it) and prints each side's median and the ratio of the medians. The issue's
target is a ratio of at most 2.

Run: ``python benchmarks/plot.py [--rounds 3] [--videos 1712] [--folder DIR]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import machine_summary
from cli import write_folder


def _seconds(command: list[str], environment: dict) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, env=environment)
    return time.perf_counter() - start


def _measure(root: Path, videos: int, rounds: int) -> None:
    truth, predicted = root / "groundTruth", root / "predictions"
    if not truth.is_dir():
        write_folder(root, videos)
    plain = [sys.executable, "-m", "jaxseg", "evaluate", str(truth), str(predicted),
             "--background", "SIL", "--quiet", "--output", str(root / "results.txt")]  # fmt: skip
    plotted = [*plain, "--plot", str(root / "plots")]
    environment = {**os.environ, "JAXSEG_CACHE_DIR": str(root / "cache")}
    _seconds(plotted, environment)  # fills the compilation cache and matplotlib's font cache
    times = {"plain": [], "plot": []}
    for _ in range(rounds):
        times["plain"].append(_seconds(plain, environment))
        times["plot"].append(_seconds(plotted, environment))
    for name, values in times.items():
        rounded = ", ".join(f"{v:.2f}" for v in values)
        print(f"{name:6s} median {statistics.median(values):.2f} s  (rounds: {rounded})")
    ratio = statistics.median(times["plot"]) / statistics.median(times["plain"])
    print(f"ratio --plot / plain: {ratio:.2f} (target <= 2)")
    print("load average after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--videos", type=int, default=1712)
    parser.add_argument("--folder", type=Path, default=None, help="reuse or create this folder")
    args = parser.parse_args()
    import matplotlib

    print(f"{machine_summary()}, matplotlib {matplotlib.__version__}")
    print("load average before: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    if args.folder is not None:
        args.folder.mkdir(parents=True, exist_ok=True)
        _measure(args.folder, args.videos, args.rounds)
        return
    with tempfile.TemporaryDirectory() as temporary:
        _measure(Path(temporary), args.videos, args.rounds)


if __name__ == "__main__":
    main()
