"""Evaluator.get(confidence=...): bootstrap intervals of the dataset metrics over videos."""

import re

import numpy as np
import pytest

import jaxseg


def _evaluator(seed=0, videos=24):
    rng = np.random.default_rng(seed)
    targets = [np.repeat(rng.integers(0, 4, 6), rng.integers(5, 30, 6)) for _ in range(videos)]
    predictions = [
        np.where(rng.random(t.size) < 0.2, rng.integers(0, 4, t.size), t) for t in targets
    ]
    ev = jaxseg.Evaluator(background=(0,), iou_thresholds=(0.1, 0.5))
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


def test_intervals_contain_their_float64_estimate_when_every_replicate_is_equal():
    """Every video scores 5/6 (accuracy) and 1 - 1/3 (edit), so every bootstrap replicate does
    too; its float32 value lies below the float64 estimate, which the interval must hold."""
    ev = jaxseg.Evaluator(background=(0,), iou_thresholds=(0.5,))
    ev.add([[1, 1, 1, 2, 2, 3]] * 4, [[1, 1, 1, 2, 2, 2]] * 4)
    result = ev.get(confidence=0.95, num_samples=200)
    assert result["accuracy"] == 5 / 6 and result["edit"] == 1 - 1 / 3  # 1 edit, 3 segments
    assert float(np.float32(5 / 6)) < 5 / 6  # the replicates' value, alone, would exclude it
    for name in ("accuracy", "edit"):
        low, high = result["intervals"][name]
        assert low <= result[name] <= high, (name, low, result[name], high)
        assert high - low <= 4 * np.spacing(np.float32(result[name]))


def test_comparison_reports_float64_values_and_contains_the_difference():
    ev_a, ev_b = (jaxseg.Evaluator(iou_thresholds=(0.5,)) for _ in range(2))
    targets = [[1, 1, 1, 2, 2, 3]] * 4
    ev_a.add(targets, [[1, 1, 1, 2, 2, 2]] * 4)  # 5/6 of the frames
    ev_b.add(targets, [[1, 1, 2, 2, 2, 2]] * 4)  # 4/6
    result = jaxseg.stats.segmentation_comparison(
        ev_a.statistics(), ev_b.statistics(), iou_thresholds=(0.5,), num_samples=200
    )["accuracy"]
    assert result["a"] == 5 / 6 and result["b"] == 4 / 6
    assert result["difference"] == 5 / 6 - 4 / 6
    assert result["lower"] <= result["difference"] <= result["upper"]


def test_a_seed_that_is_no_integer_is_named():
    """``get(confidence=..., seed=None)`` (and ``"3"``, ``1.5``, ``True``) failed in JAX with
    messages naming no argument ("None is not a valid value for jnp.array"), or ran."""
    ev = jaxseg.Evaluator()
    ev.add([[1, 1, 2], [2, 2, 1]], [[1, 2, 2], [2, 2, 2]])
    for seed in (None, "3", 1.5, True, [3]):
        message = re.escape(f"seed must be an integer, got {seed!r}.")
        with pytest.raises(TypeError, match=f"^{message}$"):
            ev.get(confidence=0.9, num_samples=10, seed=seed)
    for seed in (3, np.int64(3), np.uint32(3)):
        assert (
            ev.get(confidence=0.9, num_samples=10, seed=seed)["intervals"]["accuracy"]
            == (ev.get(confidence=0.9, num_samples=10, seed=3)["intervals"]["accuracy"])
        )
    for seed in (-1, 2**32 + 3):  # jax.random.key keeps 32 bits: these drew as 2**32-1 and 3
        with pytest.raises(ValueError, match=rf"^seed must lie in \[0, 2\*\*32\), got {seed}\.$"):
            ev.get(confidence=0.9, num_samples=10, seed=seed)


@pytest.mark.parametrize("thresholds", [0.5, np.array([0.5], np.float32)], ids=repr)
def test_the_interval_keys_are_the_thresholds_as_floats(thresholds):
    """``segmentation_intervals`` and ``segmentation_comparison`` failed after their bootstrap
    on a single number ("'float' object is not iterable") and keyed their results by float32
    scalars for a float32 array; they read thresholds as the metrics do, into Python floats."""
    ev = jaxseg.Evaluator(iou_thresholds=(0.5,))
    ev.add([[1, 1, 1, 2, 2, 3]] * 4, [[1, 1, 1, 2, 2, 2]] * 4)
    s = ev.statistics()
    f1 = jaxseg.stats.segmentation_intervals(s, iou_thresholds=thresholds, num_samples=20)["f1"]
    table = jaxseg.stats.segmentation_comparison(s, s, iou_thresholds=thresholds, num_samples=20)[
        "f1"
    ]
    for keys in (f1, table):
        assert [type(key) for key in keys] == [float] and list(keys) == [0.5]
