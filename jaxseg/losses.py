"""Public namespace: losses (differentiable relaxations of the metrics), optax-style.

Every loss is ``loss(logits, labels, *, mask=None, ...) -> [...]``: one value per sequence (or
image), no reduction inside.
"""

from jaxseg._src.soft_edit import soft_edit_loss, soft_levenshtein
from jaxseg._src.soft_overlap import (
    generalized_dice_loss,
    lovasz_softmax_loss,
    soft_dice_loss,
    soft_jaccard_loss,
    tversky_loss,
)
from jaxseg._src.temporal_losses import (
    ctc_transcript_loss,
    segment_start_penalty,
    smoothing_loss,
    temporal_diou_loss,
    temporal_giou_loss,
    temporal_iou_loss,
)

__all__ = [
    "ctc_transcript_loss",
    "generalized_dice_loss",
    "lovasz_softmax_loss",
    "segment_start_penalty",
    "smoothing_loss",
    "soft_dice_loss",
    "soft_edit_loss",
    "soft_jaccard_loss",
    "soft_levenshtein",
    "temporal_diou_loss",
    "temporal_giou_loss",
    "temporal_iou_loss",
    "tversky_loss",
]
