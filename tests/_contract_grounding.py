"""Contract cases of the grounding, highlight and proposal metrics (see _contract.py)."""

from __future__ import annotations

import numpy as np
from _contract import Case

from jaxseg import metrics as M

GT, PRED, VIDEOS, ANNOTATORS = 3, 6, 4, 3


def _windows(rng, shape):
    start = rng.integers(0, 20, shape)
    return np.stack([start, start + rng.integers(1, 8, shape)], -1).astype(np.float32)


def _query(with_scores):
    def args(rng, lead, T):
        out = (_windows(rng, (*lead, GT)), _windows(rng, (*lead, PRED)))
        if with_scores:
            out += (np.round(rng.random((*lead, PRED)), 1).astype(np.float32),)
        return out

    return args


def _saliency(rng, lead, T):
    targets = rng.integers(0, 5, (*lead, T, ANNOTATORS)).astype(np.int32)
    return targets, np.round(rng.random((*lead, T)), 1).astype(np.float32)


def _dataset(rng, lead, T):
    return (
        _windows(rng, (*lead, VIDEOS, GT)),
        _windows(rng, (*lead, VIDEOS, PRED)),
        rng.random((*lead, VIDEOS, PRED)).astype(np.float32),
    )


_QUERY = dict(core_ndims=(2, 2), time_axes=(None, None), takes_mask=False, integer_args=())
_SCORED = dict(core_ndims=(2, 2, 1), time_axes=(None,) * 3, takes_mask=False, integer_args=())
_HL = dict(core_ndims=(2, 1), time_axes=(-2, -1), integer_args=("targets",))

CASES = [
    *(
        Case(
            "jaxseg.metrics.grounding_recall",
            M.grounding_recall,
            _query(False),
            ("targets", "predictions"),
            kwargs=dict(comparison=comparison),
            **_QUERY,
        )
        for comparison in ("strict", "inclusive")
    ),
    Case(
        "jaxseg.metrics.grounding_iou",
        M.grounding_iou,
        _query(False),
        ("targets", "predictions"),
        **_QUERY,
    ),
    Case(
        "jaxseg.metrics.moment_query_recall",
        M.moment_query_recall,
        _query(False),
        ("targets", "predictions"),
        out_dtype="int32",
        **_QUERY,
    ),
    Case(
        "jaxseg.metrics.moment_retrieval_average_precision",
        M.moment_retrieval_average_precision,
        _query(True),
        ("targets", "predictions", "scores"),
        kwargs=dict(max_predictions=4),
        **_SCORED,
    ),
    Case(
        "jaxseg.metrics.highlight_hit_at_1",
        M.highlight_hit_at_1,
        _saliency,
        ("targets", "predictions"),
        **_HL,
    ),
    Case(
        "jaxseg.metrics.highlight_average_precision",
        M.highlight_average_precision,
        _saliency,
        ("targets", "predictions"),
        kwargs=dict(min_score=3),
        **_HL,
    ),
    Case(
        "jaxseg.metrics.proposal_average_recall",
        M.proposal_average_recall,
        _dataset,
        ("targets", "proposals", "scores"),
        core_ndims=(3, 3, 2),
        time_axes=(None,) * 3,
        kwargs=dict(max_average_proposals=5, at=(1, 5)),
        takes_mask=False,
        integer_args=(),
    ),
]
