"""The classic host-side evaluator: ``Evaluator().add(targets, predictions)`` ... ``.get()``."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxseg._host.compilation import jit
from jaxseg._host.intervals import dataset_metrics, segmentation_intervals, video_metrics
from jaxseg._host.io_files import LABEL_LIMIT
from jaxseg._host.padding import (
    PaddedBuffers,
    bucket,
    check_batch,
    label_bound,
    largest_label,
    length_groups,
    round_up,
    video_array,
)
from jaxseg._src import checks
from jaxseg._src.deprecation import renamed_arguments
from jaxseg._src.f1 import Candidates, candidate_overlaps
from jaxseg._src.numerics import count_set_bits
from jaxseg._src.segmentation import (
    DEFAULT_IOU_THRESHOLDS,
    SegmentationStatistics,
    static_arguments,
    statistics_from_tables,
    tables_from_words,
)
from jaxseg._src.segments import Segments, background_tallies, pair_words
from jaxseg._src.stats_segmentation import ClassStatistics

_INT32 = np.iinfo(np.int32)
_FLUSH_FRAMES = 1 << 24  # queued frames that trigger an evaluation
_COUNT_BINS_FROM_BOUND = 1 << 16  # a larger label bound is checked against the valid frames
# Padding a batch of queued videos may add this many frames (padding.length_groups): a
# Breakfast-sized set (1712 videos of 300-6000 frames, 5.4 M frames) pads by 4.8 M and stays
# one batch; one 20 M-frame video gets a batch of its own.
_GROUP_WASTE = 1 << 23


def _words(targets, predictions, lengths, *, background):
    """The boundary words of every video of a padded batch ``[B, T]``."""
    return jax.vmap(pair_words, in_axes=(0, 0, 0, None))(targets, predictions, lengths, background)


def _blank_words(targets, predictions, lengths, *, background):
    """Zeros shaped like the words of :func:`_words`: the first ``reused`` of phase 1."""
    shapes = jax.eval_shape(
        functools.partial(_words, background=background), targets, predictions, lengths
    )
    return jax.tree.map(lambda shape: jnp.zeros(shape.shape, shape.dtype), shapes)


# ``reused`` is donated (and kept though unread, or JAX would drop it and its donation).
@functools.partial(
    jax.jit, static_argnames="background", donate_argnames="reused", keep_unused=True
)
def _survey(targets, predictions, lengths, reused, *, background):
    """Phase 1: boundary words (kept on the device) and, for the host, the numbers of target
    segments, predicted segments and candidate matches of every video (to choose static
    capacities) and the frame counts of each background label.

    ``reused``: the words of an earlier batch of this shape, which phase 1 overwrites. Words
    in fresh memory would be fresh pages, which the CPU faults in on every call."""
    words = _words(targets, predictions, lengths, background=background)
    sizes = jnp.stack(
        [
            count_set_bits(words.target.starts.words),
            count_set_bits(words.prediction.starts.words),
            count_set_bits(words.matches.words),
        ]
    )
    tallies = jax.vmap(background_tallies)(words)
    return words, sizes, tallies


def _class_tallies(target: Segments, prediction: Segments, candidates: Candidates):
    """Entries of the class counts of one video: ``(label, frames)`` of every target and
    predicted segment, and of every same-label overlap (the correctly predicted frames)."""
    overlapping, inter, _ = candidate_overlaps(target, prediction, candidates)
    return (
        (target.labels, target.ends - target.starts),
        (prediction.labels, prediction.ends - prediction.starts),
        (jnp.where(overlapping, target.labels[candidates.other], -1), inter),
    )


def _label_range(target: Segments, prediction: Segments):
    """``[4]``: smallest target and predicted segment label, then the largest ones."""
    big = jnp.iinfo(jnp.int32).max
    lowest = lambda s: jnp.min(jnp.where(s.valid, s.labels, big))  # noqa: E731
    highest = lambda s: jnp.max(jnp.where(s.valid, s.labels, -1))  # noqa: E731
    return jnp.stack([lowest(target), lowest(prediction), highest(target), highest(prediction)])


@jit(static_argnames="tables")
def _tabulate(targets, predictions, lengths, words, *, tables):
    """Phase 2a: the segment tables and candidate matches of every video (``tables``: static
    keyword items of ``tables_from_words``).

    Phase 2 is two programs: as one, XLA:CPU ran it slower (``benchmarks/segmentation.py``,
    both data sets); both use the fast-compiling options of :mod:`jaxseg._host.compilation`."""
    one = lambda *args: tables_from_words(*args, **dict(tables))  # noqa: E731
    return jax.vmap(one)(targets, predictions, lengths, words)


def _video_measure(n, words, target, prediction, candidates, *, options):
    """Phase 2b for one video: statistics, segment label range and class-count entries."""
    stats = statistics_from_tables(n, words, target, prediction, candidates, **options)
    tallies = _class_tallies(target, prediction, candidates)
    return stats, _label_range(target, prediction), tallies


@jit(static_argnames=("options", "num_classes"))
def _measure(lengths, words, target, prediction, candidates, *, options, num_classes):
    """Phase 2b: per-video statistics and label ranges from the tables of phase 2a, and the
    class counts of the batch (``options``: static keyword items of
    ``statistics_from_tables``; ``num_classes``: more than the largest label).

    The class counts are summed here rather than by a program of their own: the scatter then
    runs beside the edit distances, and the host waits for one program less."""
    one = lambda *args: _video_measure(*args, options=dict(options))  # noqa: E731
    stats, label_range, tallies = jax.vmap(one)(lengths, words, target, prediction, candidates)
    return stats, label_range, _pooled_class_counts(tallies, num_classes)


def _pooled_class_counts(tallies, num_classes: int):
    """int32 ``[3, C]``: target, predicted and correct frames of each class over a batch."""

    def add(labels, frames):
        labels = jnp.where(labels < 0, num_classes, labels).ravel()
        return jnp.zeros((num_classes,), jnp.int32).at[labels].add(frames.ravel(), mode="drop")

    return jnp.stack([add(*entries) for entries in tallies])


def _is_one_video(values) -> bool:
    if isinstance(values, np.ndarray) or hasattr(values, "__array__"):
        return np.ndim(values) == 1
    return not (isinstance(values, Sequence) and len(values) > 0 and np.ndim(values[0]) >= 1)


def _padded_array(names, what: str, rows) -> np.ndarray:
    """``rows`` as an array ``[B, T]``, or a ValueError naming the first row whose length
    differs from the first row's (numpy's own says only "inhomogeneous shape")."""
    try:
        return np.asarray(rows)
    except ValueError:
        frames = len(rows[0])
        for name, row in zip(names, rows):
            if np.ndim(row) != 1 or len(row) != frames:
                raise ValueError(
                    f"{name}: {what} of a padded batch (given mask or lengths) must be rows of "
                    f"the same T = {frames} frames, got shape {np.shape(row)}; add videos of "
                    "different lengths as a list, without mask or lengths."
                ) from None
        raise


class Evaluator:
    """Dataset-level action-segmentation metrics, the way MS-TCN's ``eval.py`` reports them.

    ``add`` takes one video (1-D labels), a list of videos, or a padded batch ``[B, T]`` with
    ``mask`` or ``lengths``; ``get`` returns accuracy (pooled over frames), class accuracy,
    edit (mean of per-video scores) and segmental precision/recall/F1@tau (from TP/FP/FN
    summed over videos), as fractions in [0, 1]. Inputs are validated on the host, and segment
    capacities are chosen from the data, so no video can overflow.

    Args:
      num_classes: number of classes C, or None to infer it as the largest label seen + 1;
        at most ``2**20`` (labels index per-class count tables: relabel larger ids, e.g. with
        ``np.unique(..., return_inverse=True)``).
      background: labels that form no segment (edit and F1 only; accuracy counts all frames).
      iou_thresholds: IoU thresholds of the segmental scores.
      legacy_asformer_end: reproduce ASFormer/DiffAct's last-segment end (F1 only).

    >>> ev = Evaluator(background=(0,), iou_thresholds=(0.5,))
    >>> ev.add([1, 1, 0, 2, 2], [1, 1, 0, 0, 2])
    >>> ev.add([3, 3, 3, 0, 0], [3, 0, 3, 0, 0])
    >>> result = ev.get()
    >>> round(result["accuracy"], 4), result["edit"], round(result["f1"][0.5], 4)
    (0.8, 0.75, 0.5714)
    """

    @renamed_arguments(overlaps="iou_thresholds")
    def __init__(
        self,
        num_classes: int | None = None,
        background=(),
        iou_thresholds=DEFAULT_IOU_THRESHOLDS,
        legacy_asformer_end: bool = False,
    ):
        self.num_classes = checks.static_int("num_classes", num_classes, minimum=1, allow_none=True)
        if (self.num_classes or 0) > LABEL_LIMIT:
            raise ValueError(
                f"num_classes must be at most 2**20 = {LABEL_LIMIT} (the Evaluator keeps a "
                f"frame count per class), got {self.num_classes}."
            )
        self.background = checks.static_labels("background", background)
        checks.static_thresholds("iou_thresholds", iou_thresholds)  # simple fractions
        self.iou_thresholds = checks.static_unit_floats("iou_thresholds", iou_thresholds)
        self.legacy_asformer_end = checks.static_bool("legacy_asformer_end", legacy_asformer_end)
        self._buffers = PaddedBuffers()
        self._reused = (None, None)  # (padded shape, phase 1's words of the last batch)
        self.reset()

    def reset(self) -> None:
        """Forgets every video added so far."""
        self._names: list[str] = []
        self._stats: list[SegmentationStatistics] = []
        # target, predicted and correct frames of each class: [3, C] from the start if C is known
        self._class_counts = np.zeros((3, self.num_classes or 0), np.int64)
        self._pending: list[tuple[str, np.ndarray, np.ndarray]] = []
        self._pending_frames = 0
        self._pending_bound = 0  # the largest queued label (padding.label_bound)

    # -- adding videos -------------------------------------------------------------------

    @renamed_arguments(gt="targets", pred="predictions")
    def add(self, targets, predictions, *, mask=None, lengths=None, name=None) -> None:
        """Adds one video, a list of videos, or a padded batch.

        Args:
          targets: target labels: ``[T]`` (one video), a list of ``[T_i]`` arrays, or
            ``[B, T]`` padded (then give ``mask`` or ``lengths``; without them every frame is
            valid). The keyword ``gt`` (jaxseg 0.1) still works and warns.
          predictions: predicted labels, same layout as ``targets`` (old keyword: ``pred``).
          mask: bool ``[B, T]`` for a padded batch, True = valid frame.
          lengths: int ``[B]`` for a padded batch: the valid frames are the first
            ``lengths[b]``.
          name: a name (or list of names) used in error messages and ``per_video``.

        Raises:
          ValueError: naming the video, for a length mismatch, an empty video, non-integer,
            negative or out-of-range labels.
        """
        if mask is None and lengths is None:
            self._add_videos(targets, predictions, name)
            return
        self._flush()
        self._process(*self._padded_batch(targets, predictions, mask, lengths, name))

    def _add_videos(self, gt, pred, name):
        """Validates one video or a list of videos on the host and queues them.

        Queued videos are evaluated together (one compiled program for many videos) when
        results are asked for or when enough frames are waiting.
        """
        start = len(self._names) + len(self._pending)
        if _is_one_video(gt):
            names, gt, pred = self._names_for(name, 1, start), [gt], [pred]
        else:
            if len(pred) != len(gt):
                raise ValueError(f"targets hold {len(gt)} videos but predictions hold {len(pred)}.")
            names = self._names_for(name, len(gt), start)
        targets, predictions = [], []
        for video, t, p in zip(names, gt, pred):
            t, p = video_array(video, "targets", t), video_array(video, "predictions", p)
            if len(t) != len(p):
                raise ValueError(
                    f"{video}: targets have {len(t)} frames but predictions have {len(p)}."
                )
            targets.append(t)
            predictions.append(p)
        bound = largest_label(targets, predictions)
        if bound >= self._label_limit():  # find the video, name the label
            for video, t, p in zip(names, targets, predictions):
                self._check_range(
                    [video], np.array([[t.min()], [p.min()]]), np.array([[t.max()], [p.max()]])
                )
        self._pending.extend(zip(names, targets, predictions))
        self._pending_bound = max(self._pending_bound, bound)
        self._pending_frames += sum(len(t) for t in targets)
        if self._pending_frames >= _FLUSH_FRAMES:
            self._flush()

    def _flush(self):
        """Evaluates the queued videos, padded in groups of similar length
        (:func:`~jaxseg._host.padding.length_groups`: memory follows the data), and keeps
        their statistics in the order they were added."""
        if not self._pending:
            return
        names, targets, predictions = zip(*self._pending)
        bound = self._pending_bound
        self._pending, self._pending_frames, self._pending_bound = [], 0, 0
        groups = length_groups([len(t) for t in targets], waste=_GROUP_WASTE)
        batches, videos = len(self._stats), len(self._names)
        for group in groups:
            chosen = [[x[i] for i in group] for x in (names, targets, predictions)]
            self._process(chosen[0], *self._buffers.fill_videos(*chosen, bound))
        if len(groups) > 1:
            self._restore_order(batches, videos, np.concatenate(groups))

    def _restore_order(self, batches: int, videos: int, order: np.ndarray) -> None:
        """Puts the videos evaluated since ``batches`` statistics and ``videos`` names back
        in the order they were added (``order[k]`` = index of the k-th evaluated one)."""
        back = np.argsort(order)
        stats = jax.tree_util.tree_map(lambda *xs: np.concatenate(xs), *self._stats[batches:])
        self._stats[batches:] = [jax.tree_util.tree_map(lambda x: x[back], stats)]
        self._names[videos:] = [self._names[videos + i] for i in back]

    def _process(self, names, padded_t, padded_p, padded_lengths, bound):
        """Both device phases over a padded batch whose valid labels are at most ``bound``;
        appends the statistics of ``names``."""
        device = jax.device_put((padded_t, padded_p, padded_lengths))
        size = len(names)
        count_bins = self._count_bins(
            names, padded_t[:size], padded_p[:size], padded_lengths, bound
        )
        words, sizes, background_frames = _survey(
            *device, self._reusable_words(device), background=self.background
        )
        self._reused = (padded_t.shape, words)
        n_target, n_prediction, n_candidates = jax.device_get(sizes)[:, :size].max(axis=1)
        static = self._phase_two_static(padded_t.shape[-1], n_target, n_prediction, n_candidates)
        tables = _tabulate(*device, words, tables=static["tables"])
        stats, label_range, counts = _measure(
            device[2], words, *tables, options=static["options"], num_classes=count_bins
        )
        background_frames, label_range, counts, stats = jax.device_get(
            (background_frames, label_range, counts, stats)
        )
        background_frames = background_frames[:size]
        label_range = self._with_background(label_range[:size].T, background_frames)
        self._check_range(names, label_range[:2], label_range[2:])
        seen = int(label_range[2:].max()) + 1
        classes = self._grow_class_counts(seen)
        counts = counts[:, :classes].astype(np.int64)
        for label, frames in zip(self.background, background_frames.sum(axis=0).T):
            if 0 <= label < classes:  # a negative or larger background label does not occur
                counts[:, label] += frames
        self._stats.append(jax.tree_util.tree_map(lambda x: x[:size], stats))
        self._class_counts += counts
        self._names.extend(names)

    def _reusable_words(self, device):
        """Phase 1's words of the last batch if it had the shape of ``device``'s arrays
        (donated: phase 1 writes over them), else zeros of that shape."""
        shape, words = self._reused
        self._reused = (None, None)  # donated below: never read again
        if shape == device[0].shape:
            return words
        return _blank_words(*device, background=self.background)

    def _phase_two_static(self, frames, n_target, n_prediction, n_candidates) -> dict:
        """The static ``tables`` and ``options`` of phase 2 for a batch of padded length
        ``frames`` whose largest video has these numbers of segments and candidates."""
        static = static_arguments(
            frames,
            self.iou_thresholds,
            self.background,
            self._capacity(n_target),
            self._capacity(n_prediction),
            self.legacy_asformer_end,
            candidate_capacity=self._capacity(n_candidates),
        )
        capacities = ("target_capacity", "prediction_capacity", "candidate_capacity")
        tables = {key: static[key] for key in capacities} | {"contiguous": not self.background}
        options = {key: static[key] for key in ("thresholds", "legacy_asformer_end")}
        return {"tables": tuple(tables.items()), "options": tuple(options.items())}

    def _count_bins(self, names, targets, predictions, lengths, bound) -> int:
        """The static number of class counts of phase 2b: more than any valid label of the
        batch ``[B, T]`` (at most ``bound``), ``num_classes`` and the classes seen so far.

        At least 128, so that labels from lists and from padded batches share one program. A
        bound from the padding (a large sentinel, or a negative one) is replaced by the largest
        valid label; negative valid labels are reported after phase 2b, labels from the
        limit of :meth:`_label_limit` on here (before any table is sized by them).
        """
        if bound >= _COUNT_BINS_FROM_BOUND:
            valid = np.arange(targets.shape[1]) < lengths[: len(targets), None]
            bound = max(label_bound(targets[valid]), label_bound(predictions[valid]))
            if bound >= self._label_limit():
                self._check_batch_range(names, targets, predictions, lengths)
        largest = bound if bound <= _INT32.max else 0
        classes = max(self.num_classes or 1, self._class_counts.shape[1], largest + 1)
        return bucket(classes, minimum=128)

    def _with_background(self, label_range, background_frames):
        """Widens the per-video segment label ranges ``[4, B]`` by the background labels that
        occur (``background_frames [B, 3, len(background)]``)."""
        label_range = label_range.copy()
        for i, label in enumerate(self.background):
            for side in (0, 1):
                seen = background_frames[:, side, i] > 0
                if not seen.any():  # a label no video holds (one past int32 among them)
                    continue
                low, high = label_range[side], label_range[side + 2]
                low[seen] = np.minimum(low[seen], label)
                high[seen] = np.maximum(high[seen], label)
        return label_range

    @staticmethod
    def _names_for(name, count, start):
        """The names of ``count`` videos: ``name`` (a string names one video, a sequence one
        per video), or ``video <index>``."""
        if name is None:
            return [f"video {start + i}" for i in range(count)]
        if isinstance(name, str):
            if count != 1:
                raise ValueError(
                    f"name is one name, {name!r}, for {count} videos; give a list of {count}."
                )
            return [name]
        if not isinstance(name, Iterable):  # any iterable of names: a list, an array, a Series
            raise TypeError(f"name must be a string or an iterable of {count} names, got {name!r}.")
        names = list(name)
        if len(names) != count:
            raise ValueError(f"name holds {len(names)} names for {count} videos.")
        return names

    def _padded_batch(self, gt, pred, mask, lengths, name):
        """Validates a padded batch ``[B, T]`` and copies it into the padded buffers."""
        if len(pred) != len(gt):
            raise ValueError(f"targets hold {len(gt)} videos but predictions hold {len(pred)}.")
        count = len(gt)
        names = self._names_for(name, count, len(self._names))
        if mask is not None and lengths is not None:
            raise ValueError("give mask or lengths, not both.")
        gt, pred = _padded_array(names, "targets", gt), _padded_array(names, "predictions", pred)
        if count == 0:
            raise ValueError(f"the padded batch holds no video (targets of shape {gt.shape}).")
        if gt.ndim != 2 or gt.shape != pred.shape:
            raise ValueError(
                f"a padded batch needs gt and pred of the same shape [B, T], got "
                f"{gt.shape} and {pred.shape}."
            )
        if mask is not None:
            mask = np.asarray(mask)
            if mask.dtype != np.bool_ or mask.shape != gt.shape:
                raise ValueError(
                    f"mask must be bool of shape {gt.shape}, got {mask.dtype} {mask.shape}."
                )
            lengths = mask.sum(axis=1)
            if not np.array_equal(mask, np.arange(gt.shape[1]) < lengths[:, None]):
                return (
                    names,
                    *self._fill_videos(
                        names, [g[m] for g, m in zip(gt, mask)], [p[m] for p, m in zip(pred, mask)]
                    ),
                )
        lengths = np.asarray(lengths)
        if (
            lengths.shape != (count,)
            or not np.issubdtype(lengths.dtype, np.integer)
            or np.any((lengths < 0) | (lengths > gt.shape[1]))
        ):
            raise ValueError(
                f"lengths must be {count} integers in [1, {gt.shape[1]}], got {lengths!r}."
            )
        empty = np.flatnonzero(lengths <= 0)
        if empty.size:
            raise ValueError(f"{names[empty[0]]}: the video is empty (0 frames).")
        check_batch(names, "targets", gt, lengths)
        check_batch(names, "predictions", pred, lengths)
        return (names, *self._buffers.fill_padded(gt, pred, lengths))

    def _fill_videos(self, names, gt, pred):
        targets = [video_array(n, "targets", g) for n, g in zip(names, gt)]
        predictions = [video_array(n, "predictions", p) for n, p in zip(names, pred)]
        bound = largest_label(targets, predictions)
        return self._buffers.fill_videos(names, targets, predictions, bound)

    def _label_limit(self) -> int:
        """One more than the largest label this Evaluator accepts."""
        return self.num_classes or LABEL_LIMIT

    def _check_range(self, names, low, high):
        for side, what in enumerate(("targets", "predictions")):
            bad = np.flatnonzero(low[side] < 0)
            if bad.size:
                raise ValueError(
                    f"{names[bad[0]]}: {what} hold a negative label ({low[side][bad[0]]})."
                )
            bad = np.flatnonzero(high[side] >= self._label_limit())
            if not bad.size:
                continue
            label = high[side][bad[0]]
            if self.num_classes is not None:
                raise ValueError(
                    f"{names[bad[0]]}: {what} hold label {label}, outside "
                    f"[0, num_classes={self.num_classes})."
                )
            raise ValueError(
                f"{names[bad[0]]}: {what} hold label {label}; the Evaluator counts frames per "
                f"class in tables of (largest label + 1) entries and takes labels below "
                f"2**20 = {LABEL_LIMIT}. Relabel the classes to 0..C-1 (e.g. "
                "np.unique(..., return_inverse=True))."
            )

    def _check_batch_range(self, names, targets, predictions, lengths) -> None:
        """:meth:`_check_range` of the valid frames of a padded batch, video by video."""
        ranges = [
            (side[:n].min(), side[:n].max())
            for t, p, n in zip(targets, predictions, lengths)
            for side in (t, p)
        ]
        low, high = np.array(ranges, np.int64).T.reshape(2, -1, 2).transpose(0, 2, 1)
        self._check_range(names, low, high)

    def _grow_class_counts(self, labels_seen: int) -> int:
        size = max(self.num_classes or labels_seen, labels_seen, self._class_counts.shape[1])
        if size > self._class_counts.shape[1]:
            grown = np.zeros((3, size), np.int64)
            grown[:, : self._class_counts.shape[1]] = self._class_counts
            self._class_counts = grown
        return size

    @staticmethod
    def _capacity(largest) -> int:
        """A static capacity for the largest count: few sizes (compilations), <= 12.5% waste."""
        return round_up(max(int(largest), 1), multiple=8)

    # -- results -------------------------------------------------------------------------

    def statistics(self) -> SegmentationStatistics:
        """Per-video sufficient statistics of every video added, stacked (numpy ``[N, ...]``)."""
        self._flush()
        if not self._stats:
            raise ValueError("no video has been added yet.")
        return jax.tree_util.tree_map(lambda *xs: np.concatenate(xs), *self._stats)

    def class_counts(self) -> ClassStatistics:
        """Frame counts of each class over every video added: the confusion matrix's row sums
        (``support``), column sums (``predicted``) and diagonal (``correct``), numpy int64
        ``[C]``, background classes included. ``get()``'s class accuracy is
        ``correct / support``; ``jaxseg evaluate --per-class`` reports these same counts.

        >>> ev = Evaluator(num_classes=3)
        >>> ev.add([0, 1, 1, 2], [0, 1, 2, 2])
        >>> ev.class_counts().correct.tolist()
        [1, 1, 1]
        """
        self._flush()
        return ClassStatistics(*(counts.copy() for counts in self._class_counts))

    def get(
        self, confidence: float | None = None, *, num_samples: int = 10_000, seed: int = 0
    ) -> dict:
        """Dataset-level metrics of all videos added so far (fractions in [0, 1]).

        Args:
          confidence: if given (e.g. 0.95), also bootstrap confidence intervals over videos
            (:func:`jaxseg.stats.segmentation_intervals`), under ``"intervals"``.
          num_samples: bootstrap replicates (with ``confidence``).
          seed: seed of the bootstrap in ``[0, 2**32)`` (with ``confidence``): same seed, same
            intervals.

        Returns:
          dict with ``accuracy``, ``edit``, ``precision``/``recall``/``f1`` (dicts keyed by
          overlap threshold), ``tp``/``fp``/``fn`` (dicts of ints), ``class_accuracy``
          (numpy ``[C]``, NaN for a class absent from targets and predictions),
          ``mean_class_accuracy``, ``videos``, ``frames``, and with ``confidence`` the
          ``intervals`` dict of ``(lower, upper)`` pairs of accuracy, edit and the segmental
          scores.
        """
        s = self.statistics()
        pooled = ClassStatistics(*(counts[None] for counts in self._class_counts))
        values = dataset_metrics(s, class_stats=pooled)
        per_tau = lambda items: dict(zip(self.iou_thresholds, items))  # noqa: E731
        counts = {
            key: np.sum(getattr(s, key), axis=0, dtype=np.int64) for key in ("tp", "fp", "fn")
        }
        results = {
            "accuracy": float(values["accuracy"]),
            "edit": float(values["edit"]),
            **{key: per_tau(map(float, values[key])) for key in ("precision", "recall", "f1")},
            **{key: per_tau(map(int, counts[key])) for key in ("tp", "fp", "fn")},
            "class_accuracy": values["class_accuracy"],
            "mean_class_accuracy": float(values["mean_class_accuracy"]),
            "videos": len(self._names),
            "frames": int(s.frames.sum(dtype=np.int64)),
        }
        if confidence is not None:
            results["intervals"] = segmentation_intervals(
                s,
                iou_thresholds=self.iou_thresholds,
                confidence=confidence,
                num_samples=num_samples,
                seed=seed,
            )
        return results

    def per_video(self) -> list[dict]:
        """One dict of per-video values for every video added, in the order added."""
        s = self.statistics()
        values = video_metrics(s)
        per_tau = lambda items: dict(zip(self.iou_thresholds, items))  # noqa: E731
        out = []
        for i, name in enumerate(self._names):
            out.append(
                {
                    "name": name,
                    "frames": int(s.frames[i]),
                    "accuracy": float(values["accuracy"][i]),
                    "edit": float(values["edit"][i]),
                    "f1": per_tau(map(float, values["f1"][i])),
                    **{key: per_tau(map(int, getattr(s, key)[i])) for key in ("tp", "fp", "fn")},
                    "target_segments": int(s.target_segments[i]),
                    "predicted_segments": int(s.predicted_segments[i]),
                }
            )
        return out
