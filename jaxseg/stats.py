"""Public namespace: bootstrap intervals and paired tests over per-video statistics.

A dataset metric is ``metric_fn(statistics, weights)``: the metric of the videos of
``statistics`` (leaves ``[N, ...]``) taken ``weights[i]`` times each. Resampling videos is
then a weighted sum, and 10,000 bootstrap replicates cost little more than one evaluation::

    statistics = jaxseg.stats.segmentation_statistics(targets, predictions, mask=mask)
    result = jax.jit(jaxseg.stats.bootstrap, static_argnums=1)(
        statistics, jaxseg.stats.segmentation_metrics, key=jax.random.key(0))
    result.lower["f1"], result.upper["f1"]
"""

from jaxseg._host.intervals import (
    dataset_metrics,
    segmentation_comparison,
    segmentation_intervals,
)
from jaxseg._src.segmentation import SegmentationStatistics, segmentation_statistics
from jaxseg._src.stats import (
    BootstrapResult,
    PairedTestResult,
    PermutationTestResult,
    bootstrap,
    bootstrap_replicates,
    paired_bootstrap_test,
    permutation_test,
    resample_indices,
    weighted_sum,
)
from jaxseg._src.stats_segmentation import (
    ClassStatistics,
    class_metrics,
    class_statistics,
    segmentation_metrics,
)

__all__ = [
    "BootstrapResult",
    "ClassStatistics",
    "PairedTestResult",
    "PermutationTestResult",
    "SegmentationStatistics",
    "bootstrap",
    "bootstrap_replicates",
    "class_metrics",
    "class_statistics",
    "dataset_metrics",
    "paired_bootstrap_test",
    "permutation_test",
    "resample_indices",
    "segmentation_comparison",
    "segmentation_intervals",
    "segmentation_metrics",
    "segmentation_statistics",
    "weighted_sum",
]
