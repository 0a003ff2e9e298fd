"""Evaluator.get(confidence=...): bootstrap intervals of the dataset metrics over videos."""

import numpy as np
import pytest

import jaxseg


def _evaluator(seed=0, videos=24):
    rng = np.random.default_rng(seed)
    targets = [np.repeat(rng.integers(0, 4, 6), rng.integers(5, 30, 6)) for _ in range(videos)]
    predictions = [
        np.where(rng.random(t.size) < 0.2, rng.integers(0, 4, t.size), t) for t in targets
    ]
    ev = jaxseg.Evaluator(background=(0,), overlaps=(0.1, 0.5))
    ev.add(targets, predictions)  # one call: one compiled shape
    return ev


def test_intervals_bracket_the_estimates_and_repeat_with_the_seed():
    ev = _evaluator()
    first = ev.get(confidence=0.9, num_samples=1000, seed=3)
    again = ev.get(confidence=0.9, num_samples=1000, seed=3)
    assert first["intervals"] == again["intervals"]
    low, high = first["intervals"]["accuracy"]
    assert low < first["accuracy"] < high
    low, high = first["intervals"]["edit"]
    assert low <= first["edit"] <= high
    for tau in (0.1, 0.5):
        low, high = first["intervals"]["f1"][tau]
        assert low <= first["f1"][tau] <= high


def test_identical_videos_give_zero_width():
    ev = jaxseg.Evaluator()
    ev.add([[1, 1, 2, 2, 3]] * 5, [[1, 2, 2, 2, 3]] * 5)
    result = ev.get(confidence=0.9, num_samples=1000)
    low, high = result["intervals"]["accuracy"]
    assert low == pytest.approx(result["accuracy"]) and high == pytest.approx(result["accuracy"])


def test_no_intervals_without_confidence():
    assert "intervals" not in _evaluator(videos=3).get()
