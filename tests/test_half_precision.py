"""Half-precision scores, similarities and windows (bfloat16, float16: mixed-precision
training's dtypes) in the streaming accumulators and the bootstrap's sums give the numbers of
the same values in float32. The public functions are checked by
``tests/test_contract.py::test_half_precision_arguments_give_the_numbers_of_their_values``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _streaming_cases import grounding_cases, ranking_cases

from jaxseg import stats, streaming

HALF = ("bfloat16", "float16")


def _cases():
    """``name: (accumulator, arrays, keyword arrays)`` of every accumulator that takes floats."""
    cases = {name: case[:3] for name, case in ranking_cases().items()}
    cases |= grounding_cases()
    return {
        name: case
        for name, case in cases.items()
        if any(np.issubdtype(np.asarray(x).dtype, np.floating) for x in case[1])
    }


CASES = _cases()


def _in(dtype, arrays):
    """The floating arrays in ``dtype`` (integer ones as they are)."""
    floating = lambda x: np.issubdtype(np.asarray(x).dtype, np.floating)  # noqa: E731
    return tuple(jnp.asarray(x, dtype) if floating(x) else x for x in arrays)


def _computed(acc, arrays, keywords):
    return jax.device_get(acc.compute(acc.update(acc.init(), *arrays, **keywords)))


def _assert_identical(got, want):
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        assert np.asarray(a).dtype == np.asarray(b).dtype
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("half", HALF)
@pytest.mark.parametrize("name", sorted(CASES))
def test_streaming_half_precision_gives_the_numbers_of_its_values(name, half):
    acc, arrays, keywords = CASES[name]
    halves = _in(half, arrays)
    _assert_identical(
        _computed(acc, halves, keywords), _computed(acc, _in(jnp.float32, halves), keywords)
    )


@pytest.mark.parametrize("binned", ["frame_average_precision", "detection"])
def test_a_bfloat16_score_falls_in_the_bin_of_its_value(binned):
    """0.69921875 (exact in bfloat16) lies in bin 69 of 100; times 100 in bfloat16 it
    rounds to 70.0, the bin of the positive 0.703125 above it, which halved the AP."""
    scores = np.array([0.703125, 0.69921875], np.float32)  # a positive, then a negative
    if binned == "frame_average_precision":
        acc = streaming.frame_average_precision(num_classes=1, num_thresholds=100)
        arrays = (np.array([[1], [0]]), scores[:, None])
    else:
        acc = streaming.detection(num_classes=1, iou_thresholds=(0.5,), num_thresholds=100)
        target, predicted = np.array([[[0.0, 10.0]]]), np.array([[[0.0, 10.0], [50.0, 60.0]]])
        arrays = (target, np.array([[0]]), predicted, np.array([[0, 0]]), scores[None])
    ap = _computed(acc, _in(jnp.bfloat16, arrays), {})["ap"]
    np.testing.assert_array_equal(ap, np.ones_like(ap))


@pytest.mark.parametrize("half", HALF)
def test_weighted_sums_of_half_precision_values_are_float32_sums(half):
    values = jnp.full(500, 0.53, half)  # bfloat16 sums of these reach 266 (265.625 exactly)
    weights = jnp.ones(500, jnp.int32)
    total = stats.weighted_sum(values, weights)
    assert total.dtype == jnp.float32
    assert total == stats.weighted_sum(values.astype(jnp.float32), weights)
