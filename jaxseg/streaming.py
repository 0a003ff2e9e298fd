"""Public namespace: streaming accumulators (init / update / merge / compute).

An accumulator is a named bundle of pure functions, like an optax transformation::

    acc = jaxseg.streaming.segmentation(iou_thresholds=(0.1, 0.25, 0.5), background=(0,))
    state = acc.init()
    state = acc.update(state, targets, predictions, mask=mask)   # inside jit, any sharding
    state = acc.merge(state, jax.lax.psum(local_state, "data"))  # inside shard_map
    results = acc.compute(state)

States are NamedTuples of exact additive counts: results do not depend on batching or sharding.
"""

from jaxseg._src.accumulator import Accumulator
from jaxseg._src.counting import Count, to_int
from jaxseg._src.ranking_streaming import (
    DenseState,
    DetectionBufferState,
    DetectionHistogramState,
    FrameBufferState,
    FrameHistogramState,
    RetrievalState,
    TopKState,
    dense,
    detection,
    frame_average_precision,
    retrieval,
    top_k,
)
from jaxseg._src.streaming_grounding import (
    GroundingState,
    HighlightState,
    MomentQueryState,
    ProposalState,
    grounding,
    highlight,
    moment_queries,
    proposals,
)
from jaxseg._src.streaming_segmentation import (
    FrameState,
    SegmentationState,
    frame_metrics,
    segmentation,
)
from jaxseg._src.streaming_unsupervised import (
    PerVideoState,
    TableState,
    global_hungarian,
    per_video_hungarian,
)

__all__ = [
    "Accumulator",
    "Count",
    "DenseState",
    "DetectionBufferState",
    "DetectionHistogramState",
    "FrameBufferState",
    "FrameHistogramState",
    "FrameState",
    "GroundingState",
    "HighlightState",
    "MomentQueryState",
    "PerVideoState",
    "ProposalState",
    "RetrievalState",
    "SegmentationState",
    "TableState",
    "TopKState",
    "dense",
    "detection",
    "frame_average_precision",
    "frame_metrics",
    "global_hungarian",
    "grounding",
    "highlight",
    "moment_queries",
    "per_video_hungarian",
    "proposals",
    "retrieval",
    "segmentation",
    "to_int",
    "top_k",
]
