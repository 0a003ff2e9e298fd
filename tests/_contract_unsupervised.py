"""Contract registry entries of the unsupervised (Hungarian-matched) metrics."""

from __future__ import annotations

from _contract import Case, labels

from jaxseg import metrics as M

_LABEL_ARGS = ("targets", "predictions")

CASES = [
    Case(
        "jaxseg.metrics.contingency_table",
        M.contingency_table,
        labels(3),
        _LABEL_ARGS,
        kwargs=dict(num_classes=3, num_clusters=4),
        out_dtype="int32",
    ),
    Case(
        "jaxseg.metrics.per_video_hungarian_scores",
        M.per_video_hungarian_scores,
        labels(3),
        _LABEL_ARGS,
        kwargs=dict(num_classes=3, num_clusters=3),
    ),
]

EXEMPT = {
    # Set-level protocols: all sequences of the batch form one set (one matching), so the
    # value is not per sequence and vmap is not a loop over sequences; jit/vmap, padding and
    # batching are tested in tests/test_unsupervised.py.
    "jaxseg.metrics.global_hungarian_scores",
    "jaxseg.metrics.asot_hungarian_scores",
    # Takes a table [..., R, N], not label sequences; tested against scipy in
    # tests/test_unsupervised.py.
    "jaxseg.metrics.hungarian_matching",
}
