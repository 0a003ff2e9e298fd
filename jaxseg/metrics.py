"""Public namespace: every metric function (one value per sequence, truth first)."""

from jaxseg._src.assignment import hungarian_matching
from jaxseg._src.dense import dice, iou, pixel_accuracy
from jaxseg._src.detection import box_iou, detection_average_precision, temporal_iou
from jaxseg._src.frame import (
    accuracy,
    class_accuracy,
    confusion_matrix,
    f1_score,
    precision,
    recall,
)
from jaxseg._src.grounding import (
    grounding_iou,
    grounding_recall,
    highlight_average_precision,
    highlight_hit_at_1,
    moment_query_recall,
    moment_retrieval_average_precision,
)
from jaxseg._src.proposals import ProposalCurve, proposal_average_recall
from jaxseg._src.ranking import (
    ClassScores,
    PrecisionRecallCurve,
    average_precision,
    calibrated_average_precision,
    mean_average_precision,
    precision_recall_curve,
    top_k_accuracy,
)
from jaxseg._src.retrieval import (
    mean_rank,
    mean_reciprocal_rank,
    median_rank,
    recall_at_k,
    retrieval_ranks,
)
from jaxseg._src.segmentation import (
    edit_distance,
    edit_score,
    segmental_counts,
    segmental_f1,
    segmental_precision,
    segmental_recall,
)
from jaxseg._src.unsupervised import (
    asot_hungarian_scores,
    contingency_table,
    global_hungarian_scores,
    per_video_hungarian_scores,
)

__all__ = [
    "ClassScores",
    "PrecisionRecallCurve",
    "ProposalCurve",
    "accuracy",
    "asot_hungarian_scores",
    "average_precision",
    "box_iou",
    "calibrated_average_precision",
    "class_accuracy",
    "confusion_matrix",
    "contingency_table",
    "detection_average_precision",
    "dice",
    "edit_distance",
    "edit_score",
    "f1_score",
    "global_hungarian_scores",
    "grounding_iou",
    "grounding_recall",
    "highlight_average_precision",
    "highlight_hit_at_1",
    "hungarian_matching",
    "iou",
    "mean_average_precision",
    "mean_rank",
    "mean_reciprocal_rank",
    "median_rank",
    "moment_query_recall",
    "moment_retrieval_average_precision",
    "per_video_hungarian_scores",
    "pixel_accuracy",
    "precision",
    "precision_recall_curve",
    "proposal_average_recall",
    "recall",
    "recall_at_k",
    "retrieval_ranks",
    "segmental_counts",
    "segmental_f1",
    "segmental_precision",
    "segmental_recall",
    "temporal_iou",
    "top_k_accuracy",
]
