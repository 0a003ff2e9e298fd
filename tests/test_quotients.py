"""Quotients of exact counts are the correctly rounded float32 of the exact ratio.

XLA divides by a number it sees as one for a whole vector (a shape-derived count without a
mask, one total spread over several thresholds) as a product with its reciprocal, 1 ulp off
(9 / 10 read 0.90000004); ``numerics.count_ratio`` divides quotient by quotient. Each case
below has a vector of quotients over one denominator, the shape where that happened.
"""

from __future__ import annotations

import numpy as np
import pytest

from jaxseg import metrics as M
from jaxseg import streaming as S


def _exact(numerator, denominator) -> np.float32:
    return np.float32(np.float64(numerator) / np.float64(denominator))


def _similarity(queries=10, ahead=2):
    """Query 0's match has ``ahead`` items ranked before it, the others none."""
    sim = np.eye(queries, dtype=np.float32)
    sim[0, 1 : 1 + ahead] = 2.0
    return sim


def _streamed(accumulator, *args):
    return accumulator.compute(accumulator.update(accumulator.init(), *args))


def _grounding():
    """7 queries, 3 found at the first rank, none later."""
    targets = np.tile(np.array([[[0.0, 10.0]]], np.float32), (7, 1, 1))
    predictions = np.tile(np.array([[[50.0, 60.0], [70.0, 80.0]]], np.float32), (7, 1, 1))
    predictions[:3, 0] = [0.0, 9.0]
    return targets, predictions


def _moments():
    """3 queries of 2 moments each: 5 of the 6 recalled."""
    targets = np.array([[[0.0, 10.0], [20.0, 30.0]]] * 3, np.float32)
    predictions = np.array([[[0.0, 9.0], [20.0, 29.0]]] * 3, np.float32)
    predictions[0, 1] = [90.0, 99.0]
    return targets, predictions


def _saliency():
    """7 queries whose top clip is relevant in 3."""
    labels = np.zeros((7, 2, 1), np.int32)
    labels[:3, 0, 0] = 4
    return labels, np.tile(np.array([[1.0, 0.0]], np.float32), (7, 1))


def _proposals():
    """10 videos of one target, 9 of them found at tIoU 0.95 by their one proposal."""
    targets = np.tile(np.array([[[0.0, 10.0]]], np.float32), (10, 1, 1))
    proposals = np.tile(np.array([[[0.0, 9.5]]], np.float32), (10, 1, 1))
    proposals[9] = [[50.0, 60.0]]
    return targets, proposals, np.ones((10, 1), np.float32)


def _top_k_scores():
    """10 rows of class 0, whose score is highest in 9 and second in 1."""
    scores = np.zeros((10, 3), np.float32)
    scores[:, 0] = 1.0
    scores[9] = [0.5, 1.0, 0.0]
    return scores


CASES = {
    "recall_at_k": (lambda: M.recall_at_k(_similarity(), k=(1, 2, 3)), [9, 9, 10], 10),
    "mean_rank": (lambda: M.mean_rank(_similarity(queries=3)), 5, 3),
    "mean_reciprocal_rank": (  # query 0 at rank 1 (reciprocal 1/2): an exact sum
        lambda: M.mean_reciprocal_rank(_similarity(queries=3, ahead=1)),
        2.5,
        3,
    ),
    "streaming.top_k": (
        lambda: _streamed(S.top_k(k=(1, 2)), np.zeros(10, np.int32), _top_k_scores())["accuracy"],
        [9, 10],
        10,
    ),
    "streaming.retrieval mean_rank": (  # (it added 1 to the mean: two roundings)
        lambda: _streamed(S.retrieval(num_items=3), _similarity(queries=3))["mean_rank"],
        5,
        3,
    ),
    "streaming.grounding": (
        lambda: _streamed(S.grounding(k=(1, 2), iou_thresholds=(0.5,)), *_grounding())["recall"],
        [[3, 3]],
        7,
    ),
    "streaming.moment_queries": (
        lambda: _streamed(S.moment_queries(ranks=(1, 2), iou_thresholds=(0.5,)), *_moments())[
            "recall"
        ],
        [[5, 5]],
        6,
    ),
    "streaming.highlight": (
        lambda: _streamed(S.highlight(min_scores=(2, 3), num_annotators=1), *_saliency())[
            "hit_at_1"
        ],
        [3, 3],
        7,
    ),
    "proposal_average_recall": (
        lambda: M.proposal_average_recall(
            *_proposals(), iou_thresholds=(0.5, 0.9), max_average_proposals=1, at=(1,)
        ).recall[:, -1],
        [9, 9],
        10,
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_quotients_of_counts_are_correctly_rounded(name):
    compute, numerators, denominator = CASES[name]
    want = np.vectorize(_exact)(np.asarray(numerators, np.float64), denominator)
    np.testing.assert_array_equal(np.asarray(compute()), want.astype(np.float32))
