"""Registry of public functions for the contract test (tests/test_contract.py).

Every public callable of ``jaxseg.metrics``, ``jaxseg.segments`` and ``jaxseg.losses`` needs a
``Case`` here or in another ``tests/_contract*.py`` module (each exposes ``CASES``, a list of
``Case``, and may expose ``EXEMPT``, a set of public names with the reason in a comment). The
contract test then checks, for every case: jit equals eager; vmap equals a loop; extra leading
dims work; padding with a mask equals slicing; no retrace when only values change; wrong rank,
shapes or dtypes raise ``ValueError``/``TypeError`` naming the argument; output dtypes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from jaxseg import metrics as M
from jaxseg import segments as S


@dataclasses.dataclass(frozen=True)
class Case:
    """How to call one public function on random data.

    Attributes:
      name: the public dotted name, e.g. ``"jaxseg.metrics.edit_score"``.
      fn: called as ``fn(*arrays, mask=mask, **kwargs)`` (``mask`` only if ``takes_mask``).
      make_args: ``make_args(rng, lead, T)`` -> tuple of numpy arrays, each of shape
        ``lead + core`` (``core`` may depend on the number of frames ``T``).
      arg_names: names of the positional arguments, as the error messages must spell them.
      core_ndims: number of per-sequence dimensions of each argument.
      time_axes: axis (negative, counted from the end) of the frames in each argument, or
        ``None`` for an argument without a time axis.
      kwargs: static keyword arguments.
      takes_mask: the function takes ``mask: bool[..., T]``.
      integer_args: arguments that must be integers (a float array must raise TypeError).
      out_dtype: dtype of every output leaf, or a tuple with one dtype per leaf.
      canonical: maps an output pytree to what must be equal (e.g. hides table entries whose
        value is unspecified); identity when None.
      tolerance: rtol = atol for comparing floating outputs.
    """

    name: str
    fn: Callable[..., Any]
    make_args: Callable[[np.random.Generator, tuple[int, ...], int], tuple[np.ndarray, ...]]
    arg_names: tuple[str, ...]
    core_ndims: tuple[int, ...] = (1, 1)
    time_axes: tuple[int | None, ...] = (-1, -1)
    kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    takes_mask: bool = True
    integer_args: tuple[str, ...] = ("targets", "predictions")
    out_dtype: str | tuple[str, ...] = "float32"
    canonical: Callable[[Any], Any] | None = None
    tolerance: float = 1e-6

    @property
    def id(self) -> str:
        extra = ",".join(f"{k}={v}" for k, v in sorted(self.kwargs.items()))
        return f"{self.name.rsplit('.', 1)[-1]}[{extra}]" if extra else self.name.rsplit(".")[-1]


def labels(num_classes: int, count: int = 2):
    """``make_args`` for ``count`` integer label arrays ``[..., T]`` in ``[0, num_classes)``."""

    def make(rng, lead, T):
        return tuple(
            rng.integers(0, num_classes, (*lead, T)).astype(np.int32) for _ in range(count)
        )

    return make


def _lengths(rng, lead, T):
    return (rng.integers(0, T + 1, lead).astype(np.int32),)


def segments_canonical(s):
    """A Segments table with the unspecified entries (valid False) replaced by -1."""
    valid = np.asarray(s.valid)
    hide = lambda x: np.where(valid, np.asarray(x), -1)  # noqa: E731
    return (hide(s.labels), hide(s.starts), hide(s.ends), valid, np.asarray(s.count))


_LABEL_ARGS = ("targets", "predictions")

CASES = [
    # jaxseg.segments
    Case(
        "jaxseg.segments.to_segments",
        S.to_segments,
        labels(4, 1),
        ("labels",),
        (1,),
        (-1,),
        dict(background=(0,), max_segments=5),
        integer_args=("labels",),
        out_dtype=("int32", "int32", "int32", "bool", "int32"),
        canonical=segments_canonical,
    ),
    Case(
        "jaxseg.segments.count_segments",
        S.count_segments,
        labels(3, 1),
        ("labels",),
        (1,),
        (-1,),
        dict(background=(0,)),
        integer_args=("labels",),
        out_dtype="int32",
    ),
    Case(
        "jaxseg.segments.lengths_to_mask",
        S.lengths_to_mask,
        _lengths,
        ("lengths",),
        (0,),
        (None,),
        dict(T=10),
        takes_mask=False,
        integer_args=("lengths",),
        out_dtype="bool",
    ),
    # jaxseg.metrics, frame level
    Case("jaxseg.metrics.accuracy", M.accuracy, labels(3), _LABEL_ARGS),
    Case(
        "jaxseg.metrics.confusion_matrix",
        M.confusion_matrix,
        labels(4),
        _LABEL_ARGS,
        kwargs=dict(num_classes=4),
        out_dtype="int32",
    ),
    Case(
        "jaxseg.metrics.precision",
        M.precision,
        labels(4),
        _LABEL_ARGS,
        kwargs=dict(num_classes=5, average="none"),
    ),
    Case(
        "jaxseg.metrics.recall",
        M.recall,
        labels(4),
        _LABEL_ARGS,
        kwargs=dict(num_classes=4, average="weighted"),
    ),
    Case(
        "jaxseg.metrics.f1_score",
        M.f1_score,
        labels(4),
        _LABEL_ARGS,
        kwargs=dict(num_classes=4, average="macro"),
    ),
    Case(
        "jaxseg.metrics.class_accuracy",
        M.class_accuracy,
        labels(3),
        _LABEL_ARGS,
        kwargs=dict(num_classes=4),
    ),
    # jaxseg.metrics, segmental
    Case(
        "jaxseg.metrics.edit_distance",
        M.edit_distance,
        labels(4),
        _LABEL_ARGS,
        kwargs=dict(background=(0,)),
    ),
    Case(
        "jaxseg.metrics.edit_score",
        M.edit_score,
        labels(3),
        _LABEL_ARGS,
        kwargs=dict(max_target_segments=4, max_predicted_segments=5),
    ),
    Case(
        "jaxseg.metrics.segmental_counts",
        M.segmental_counts,
        labels(3),
        _LABEL_ARGS,
        kwargs=dict(background=(0,), iou_thresholds=(0.1, 0.5)),
    ),
    Case(
        "jaxseg.metrics.segmental_precision",
        M.segmental_precision,
        labels(3),
        _LABEL_ARGS,
        kwargs=dict(legacy_asformer_end=True),
    ),
    Case(
        "jaxseg.metrics.segmental_recall",
        M.segmental_recall,
        labels(3),
        _LABEL_ARGS,
        kwargs=dict(max_target_segments=4, max_predicted_segments=4),
    ),
    Case(
        "jaxseg.metrics.segmental_f1",
        M.segmental_f1,
        labels(3),
        _LABEL_ARGS,
        kwargs=dict(background=(0,)),
    ),
]

# Public names that need no case (e.g. thin aliases). Keep the reason next to each entry.
EXEMPT: set[str] = set()
