"""Public namespace: reading action-segmentation datasets and label files."""

from jaxseg._host.io_files import (
    InputError,
    SegmentationDataset,
    load_segmentation_dataset,
    read_label_array,
    read_label_text,
    read_labels,
    read_mapping,
    read_split,
)
from jaxseg._host.padding import pad_videos

__all__ = [
    "InputError",
    "SegmentationDataset",
    "load_segmentation_dataset",
    "pad_videos",
    "read_label_array",
    "read_label_text",
    "read_labels",
    "read_mapping",
    "read_split",
]
