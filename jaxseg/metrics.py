"""Public namespace: every metric function (one value per sequence, truth first)."""

from jaxseg._src.frame import (
    accuracy,
    class_accuracy,
    confusion_matrix,
    f1_score,
    precision,
    recall,
)
from jaxseg._src.segmentation import (
    edit_distance,
    edit_score,
    segmental_counts,
    segmental_f1,
    segmental_precision,
    segmental_recall,
)

__all__ = [
    "accuracy",
    "class_accuracy",
    "confusion_matrix",
    "edit_distance",
    "edit_score",
    "f1_score",
    "precision",
    "recall",
    "segmental_counts",
    "segmental_f1",
    "segmental_precision",
    "segmental_recall",
]
