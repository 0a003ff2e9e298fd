"""The demo dataset shipped with jaxseg: synthetic, deterministic, shaped like GTEA.

28 videos (4 subjects x 7 recipes), 11 classes (GTEA's 10 verbs and ``background``), a few
hundred frames each, in the MS-TCN layout: ``mapping.txt``, ``groundTruth/<video>.txt`` (one
label per line) and ``predictions/<video>`` (MS-TCN results format). The predictions imitate a
model's typical errors: shifted boundaries, confused verbs, short spurious segments and missed
short actions. A private SplitMix64 generator makes the files identical on every platform and
numpy version; ``python -m jaxseg._host.demo`` rewrites the shipped copy.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

DEMO_DIRECTORY = Path(__file__).resolve().parent.parent / "data" / "demo"

CLASS_NAMES = (
    "take", "open", "pour", "close", "shake", "scoop", "stir", "put", "fold", "spread",
    "background",
)  # fmt: skip
BACKGROUND = "background"

_RECIPES = {
    "Cheese": ("take", "open", "take", "spread", "put", "fold", "put", "close"),
    "CofHoney": ("take", "open", "scoop", "pour", "close", "take", "open", "pour", "stir", "put"),
    "Coffee": ("take", "open", "scoop", "pour", "close", "take", "pour", "stir", "put"),
    "Hotdog": ("take", "put", "take", "fold", "take", "open", "pour", "close", "put"),
    "Pealate": ("take", "open", "scoop", "spread", "close", "take", "open", "spread", "fold"),
    "Peanut": ("take", "open", "scoop", "spread", "close", "fold", "put"),
    "Tea": ("take", "open", "take", "put", "close", "take", "pour", "stir", "shake", "put"),
}
_DURATION = {  # frames (GTEA runs at 15 fps)
    "take": (20, 60), "open": (30, 90), "pour": (45, 130), "close": (20, 60), "shake": (35, 90),
    "scoop": (45, 110), "stir": (60, 160), "put": (15, 55), "fold": (35, 90), "spread": (65, 160),
}  # fmt: skip
_CONFUSED_WITH = {
    "take": ("put", "open"), "open": ("close", "take"), "pour": ("scoop", "stir"),
    "close": ("open", "put"), "shake": ("stir", "pour"), "scoop": ("pour", "spread"),
    "stir": ("shake", "scoop"), "put": ("take", "close"), "fold": ("spread", "put"),
    "spread": ("scoop", "fold"), "background": ("take", "put"),
}  # fmt: skip
_MASK64 = (1 << 64) - 1


class _SplitMix64:
    """A tiny, platform-independent pseudo-random generator (Steele, Lea and Flood, 2014)."""

    def __init__(self, seed: int):
        self.state = seed & _MASK64

    def bits(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & _MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
        return z ^ (z >> 31)

    def uniform(self) -> float:
        return (self.bits() >> 11) / (1 << 53)

    def integer(self, low: int, high: int) -> int:
        """Uniform integer in ``[low, high]`` (inclusive)."""
        return low + self.bits() % (high - low + 1)

    def choice(self, options):
        return options[self.integer(0, len(options) - 1)]


def _ground_truth_runs(recipe: tuple[str, ...], rng: _SplitMix64) -> list[list]:
    """Runs ``[label, length]`` of one video: the recipe's steps with background between."""
    steps = [step for step in recipe if rng.uniform() > 0.1]
    if rng.uniform() < 0.4:  # a subject repeats one step
        position = rng.integer(0, len(steps) - 1)
        steps.insert(position, steps[position])
    runs = [[BACKGROUND, rng.integer(10, 40)]]
    for step in steps:
        if rng.uniform() < 0.5:
            runs.append([BACKGROUND, rng.integer(4, 30)])
        runs.append([step, rng.integer(*_DURATION[step])])
    runs.append([BACKGROUND, rng.integer(10, 40)])
    return _merge(runs)


def _merge(runs: list[list]) -> list[list]:
    """Joins neighbouring runs of the same label and drops empty runs."""
    merged: list[list] = []
    for label, length in runs:
        if length <= 0:
            continue
        if merged and merged[-1][0] == label:
            merged[-1][1] += length
        else:
            merged.append([label, length])
    return merged


def _predicted_runs(truth: list[list], rng: _SplitMix64) -> list[list]:
    """A plausible model output for ``truth``: each error rate grows as the quality drops."""
    error = 0.02 + 0.2 * rng.uniform()
    runs = [list(run) for run in truth]
    for left, right in itertools.pairwise(runs):  # shift boundaries
        shift = rng.integer(-8, 8)
        shift = max(min(shift, right[1] - 1), 1 - left[1])
        left[1] += shift
        right[1] -= shift
    predicted: list[list] = []
    for label, length in runs:
        if label != BACKGROUND and length < 25 and rng.uniform() < error:  # missed action
            label = predicted[-1][0] if predicted else BACKGROUND
        elif rng.uniform() < error:  # confused verb
            label = rng.choice(_CONFUSED_WITH[label])
        if length > 20 and rng.uniform() < error:  # short spurious segment inside
            spurious = rng.integer(3, 12)
            head = rng.integer(1, length - spurious - 1)
            predicted += [
                [label, head],
                [rng.choice(_CONFUSED_WITH[label]), spurious],
                [label, length - head - spurious],
            ]
        else:
            predicted.append([label, length])
    return _merge(predicted)


def _frames(runs: list[list]) -> list[str]:
    return [label for label, length in runs for _ in range(length)]


def demo_videos() -> dict[str, tuple[list[str], list[str]]]:
    """The demo's videos: name -> (ground-truth labels, predicted labels), one name per frame."""
    videos = {}
    for subject in range(1, 5):
        for number, (recipe, steps) in enumerate(sorted(_RECIPES.items())):
            rng = _SplitMix64(1000 * subject + number)
            truth = _ground_truth_runs(steps, rng)
            videos[f"S{subject}_{recipe}_C1"] = (
                _frames(truth),
                _frames(_predicted_runs(truth, rng)),
            )
    return videos


def write_demo(directory: str | os.PathLike) -> None:
    """Writes the demo dataset into ``directory`` (created if needed) in the MS-TCN layout."""
    directory = Path(directory)
    (directory / "groundTruth").mkdir(parents=True, exist_ok=True)
    (directory / "predictions").mkdir(parents=True, exist_ok=True)
    mapping = "".join(f"{index} {name}\n" for index, name in enumerate(CLASS_NAMES))
    (directory / "mapping.txt").write_bytes(mapping.encode())
    for name, (truth, predicted) in demo_videos().items():
        (directory / "groundTruth" / f"{name}.txt").write_bytes(
            "".join(f"{x}\n" for x in truth).encode()
        )
        results = "### Frame level recognition: ###\n" + " ".join(predicted) + "\n"
        (directory / "predictions" / name).write_bytes(results.encode())


if __name__ == "__main__":
    write_demo(DEMO_DIRECTORY)
