"""Host-side batching: validating per-video label arrays and padding them for the device.

Buffers are 64-byte aligned so that ``jax.device_put`` can use them without a copy on CPU,
and shapes are rounded up to a few sizes so that compiled programs are reused.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

_ALIGNMENT = 64
_INT32 = np.iinfo(np.int32)
_INT32_SAFE = {np.dtype(name) for name in ("int8", "int16", "int32", "uint8", "uint16")}
_INT8_MAX = np.iinfo(np.int8).max
_BLOCK_BYTES = 1 << 21  # blocks of labels read while they are in cache


def aligned_zeros(shape, dtype) -> np.ndarray:
    """A zero-filled numpy array whose data starts on a 64-byte boundary."""
    dtype = np.dtype(dtype)
    size = int(np.prod(shape)) * dtype.itemsize
    raw = np.zeros(size + _ALIGNMENT, np.uint8)
    offset = (-raw.ctypes.data) % _ALIGNMENT
    return raw[offset : offset + size].view(dtype).reshape(shape)


def pad_videos(videos, *, pad_value: int = 0, dtype=np.int32) -> tuple[np.ndarray, np.ndarray]:
    """Pads per-video label arrays into one ``[B, T]`` array that JAX can use without a copy.

    ``jax.device_put`` (and a jitted function called with numpy arrays) copies a numpy array
    on CPU unless its data is 64-byte aligned, which numpy's own allocations are not; this
    array is (``benchmarks/README.md`` has the cost of the copy).

    Args:
      videos: sequence of B integer arrays ``[T_i]`` (floats holding whole numbers are
        taken as integers).
      pad_value: the label written after each video's frames.
      dtype: integer dtype of the result; a label or ``pad_value`` it cannot hold, or a
        value that is no integer, raises ``ValueError`` (it would be wrapped or truncated).

    Returns:
      ``(padded, lengths)``: ``padded`` ``[B, max T_i]`` of ``dtype``, 64-byte aligned;
      ``lengths`` int32 ``[B]`` (give ``jaxseg.segments.lengths_to_mask(lengths, T)`` as the
      metrics' ``mask``).

    >>> padded, lengths = pad_videos([[1, 1, 2], [3]], pad_value=-1)
    >>> padded.tolist(), lengths.tolist()
    ([[1, 1, 2], [3, -1, -1]], [3, 1])
    """
    dtype = np.dtype(dtype)
    _check_fits("pad_value", np.asarray(pad_value), dtype)
    videos = [_one_video(f"videos[{i}]", v, dtype) for i, v in enumerate(videos)]
    lengths = np.array([len(v) for v in videos], np.int32)
    padded = aligned_zeros((len(videos), int(lengths.max(initial=0))), dtype)
    padded.fill(pad_value)
    for row, video in zip(padded, videos):
        row[: len(video)] = video
    return padded, lengths


def _one_video(name: str, video, dtype: np.dtype) -> np.ndarray:
    """One video of :func:`pad_videos` as a 1-D array, checked to fit ``dtype``."""
    try:
        array = np.asarray(video)
    except ValueError as error:  # ragged
        raise ValueError(f"{name} must be one video of shape [T]: {error}") from None
    if array.ndim != 1:
        raise ValueError(f"{name} must be one video of shape [T], got shape {array.shape}.")
    _check_fits(name, array, dtype)
    return array


def _check_fits(name: str, values: np.ndarray, dtype: np.dtype) -> None:
    """Raises ``ValueError`` naming ``name`` unless ``values`` convert to the integer (or
    bool) ``dtype`` without change: numbers, whole, within its range."""
    if values.dtype.kind not in "biuf":
        raise ValueError(f"{name} must hold integer labels, got dtype {values.dtype}.")
    if dtype.kind not in "biu" or values.size == 0 or np.can_cast(values.dtype, dtype):
        return
    whole = values.dtype.kind != "f" or np.isfinite(values) & (values == np.round(values))
    if not np.all(whole):
        raise ValueError(f"{name} must hold integer labels, got {values[~whole].flat[0]}.")
    low, high = (0, 1) if dtype.kind == "b" else (np.iinfo(dtype).min, np.iinfo(dtype).max)
    if values.min() < low or values.max() > high:
        bad = values.min() if values.min() < low else values.max()
        raise ValueError(
            f"{name} holds {bad}, outside the range [{low}, {high}] of dtype {dtype}; it "
            "would be wrapped onto another label. Choose a wider dtype."
        )


def bucket(n: int, minimum: int = 1) -> int:
    """Rounds ``n`` up to a power of two (at least ``minimum``), the sizes we compile for."""
    n = max(int(n), minimum, 1)
    return 1 << (n - 1).bit_length()


def size_groups(sizes) -> list[tuple[tuple[int, ...], list[int]]]:
    """The items grouped by their sizes, each rounded up by :func:`bucket`, smallest first.

    ``sizes[i]`` is a tuple of item i's sizes (its detections and targets, say), or None to
    leave it out. Padded to its group's sizes, an item takes fewer than twice its own: one
    large item no longer pads every other one to its size.

    Returns:
      ``(rounded sizes, indices in increasing order)`` per group.
    """
    members: dict[tuple[int, ...], list[int]] = {}
    for i, size in enumerate(sizes):
        if size is not None:
            members.setdefault(tuple(bucket(n) for n in size), []).append(i)
    return sorted(members.items())


def round_up(n: int, multiple: int = 1) -> int:
    """Rounds ``n`` up to a multiple of ``multiple`` with at most 8 sizes per octave.

    Padded shapes are rounded this way: few distinct shapes (few compilations) and at most
    12.5% of padding.
    """
    n = max(int(n), 1)
    step = max(multiple, 1 << max(0, n.bit_length() - 4))
    return -(-n // step) * step


def length_groups(lengths, *, waste: int) -> list[np.ndarray]:
    """Groups videos so that padding each group to its longest video adds at most ``waste``
    frames: the memory of an evaluation follows its data.

    Videos are taken longest first; a group grows while ``videos x longest - frames`` (its
    padding) stays within ``waste``. One long video among short ones thus gets a batch of
    its own instead of making every short video as long (27 videos of a few hundred frames
    and one of 20 M frames: 28 x 20 M padded frames in one batch), while a dataset of
    similar lengths stays one batch, one compiled shape.

    Args:
      lengths: int ``[N]`` frames of each video.
      waste: padded frames a group may add to its data.

    Returns:
      index arrays, one per group, each in increasing order; together a partition of
      ``range(N)``, the group of the longest video first.

    >>> [g.tolist() for g in length_groups([300, 20_000_000, 250, 400], waste=1 << 23)]
    [[1], [0, 2, 3]]
    """
    lengths = np.asarray(lengths, np.int64)
    order = np.argsort(-lengths, kind="stable")
    groups, start = [], 0
    while start < len(order):
        rest = lengths[order[start:]]
        padding = np.arange(1, len(rest) + 1) * rest[0] - np.cumsum(rest)
        size = int(np.searchsorted(padding, waste, side="right"))  # padding never decreases
        groups.append(np.sort(order[start : start + size]))
        start += size
    return groups


_UNSIGNED = {np.dtype(f"i{size}"): np.dtype(f"u{size}") for size in (1, 2, 4, 8)}
_LARGEST = np.maximum.reduce


def _start_copiers() -> None:
    """Two threads for host copies and reductions (a forked child starts its own)."""
    global _COPIERS
    _COPIERS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="jaxseg-copy")


_start_copiers()
if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_start_copiers)


def label_bound(labels: np.ndarray) -> int:
    """The largest label of an integer (or bool) array, or 2^63 if any label is negative (one
    pass: signed values are read as unsigned, so negative ones have the sign bit set)."""
    unsigned = _UNSIGNED.get(labels.dtype)
    if unsigned is None:
        return int(_LARGEST(labels, axis=None))
    largest = int(_LARGEST(labels.view(unsigned), axis=None))
    return largest if largest < 1 << (8 * labels.dtype.itemsize - 1) else 1 << 63


def largest_label(targets, predictions) -> int:
    """:func:`label_bound` over two lists of 1-D label arrays (checked by :func:`video_array`).

    Many videos of one dtype are reduced a few at a time, concatenated (:func:`_joint_bound`),
    a list on each of two threads: numpy's overhead per call would cost more than the
    reduction of a short video.
    """
    videos = (*targets, *predictions)
    if len(videos) < 64 or len({v.dtype for v in videos}) > 1:
        return max(map(label_bound, videos))
    return max(_COPIERS.map(_joint_bound, (targets, predictions)))


def _joint_bound(videos) -> int:
    """:func:`label_bound` of 1-D arrays of one dtype, concatenated ~2 MB at a time into one
    reused buffer, which stays in cache for the reduction (one concatenation of a whole list
    would be read back from memory)."""
    buffer = np.empty(_BLOCK_BYTES // videos[0].itemsize, videos[0].dtype)
    bound, start = 0, 0
    while start < len(videos):
        stop, size = start, 0
        while stop < len(videos) and size + len(videos[stop]) <= len(buffer):
            size += len(videos[stop])
            stop += 1
        if stop == start:  # a video larger than the buffer
            bound, stop = max(bound, label_bound(videos[start])), start + 1
        else:
            joint = np.concatenate(videos[start:stop], out=buffer[:size])
            bound = max(bound, label_bound(joint))
        start = stop
    return bound


def buffer_dtype(bound: int) -> np.dtype:
    """int8 device buffers when every label lies in [0, 127] (the frame pass, bound by
    memory bandwidth, then reads a quarter of the bytes), int32 otherwise."""
    return np.dtype(np.int8) if bound <= _INT8_MAX else np.dtype(np.int32)


def video_array(name: str, what: str, values) -> np.ndarray:
    """One video's labels as a 1-D integer numpy array, or a ValueError naming the problem."""
    if (
        isinstance(values, np.ndarray)
        and values.ndim == 1
        and values.size
        and values.dtype in _INT32_SAFE
    ):
        return values
    array = np.asarray(values)
    # bool is no label type (the metrics refuse it too): True/False predictions are more
    # likely a comparison or a mask passed by mistake than two classes.
    if array.dtype == object or not (
        np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)
    ):
        raise ValueError(f"{name}: {what} must be integer labels, got dtype {array.dtype}.")
    if np.issubdtype(array.dtype, np.floating):
        if not np.all(np.isfinite(array)) or np.any(array != np.round(array)):
            raise ValueError(f"{name}: {what} must be integer labels, got non-integer values.")
        array = array.astype(np.int64)
    if array.ndim != 1:
        raise ValueError(f"{name}: {what} must be one video of shape [T], got {array.shape}.")
    if array.size == 0:
        raise ValueError(f"{name}: {what} is empty (0 frames).")
    if array.dtype.itemsize >= 4 and (array.min() < _INT32.min or array.max() > _INT32.max):
        raise ValueError(f"{name}: {what} hold labels outside the int32 range.")
    return array


def check_batch(names, what: str, values: np.ndarray, lengths: np.ndarray) -> None:
    """Checks that the valid frames of a padded batch ``[B, T]`` (the first ``lengths[b]`` of
    row ``b``) are integer labels within int32; a ValueError names the first bad video."""
    if values.dtype in _INT32_SAFE:
        return
    try:
        video_array("", what, values[np.arange(values.shape[1]) < lengths[:, None]])
    except ValueError:
        for name, row, length in zip(names, values, lengths):
            video_array(name, what, row[:length])
        raise


def _copy(destination, source):
    with np.errstate(invalid="ignore"):  # NaN in the padding of a float batch: never read
        np.copyto(destination, source, casting="unsafe")


def copy_pair(destinations, sources) -> None:
    """``destination[...] = source`` for two pairs of arrays, on two threads.

    numpy releases the GIL while it copies a large block, and one core does not saturate the
    memory bandwidth (``benchmarks/README.md``, choices measured once).
    """
    copies = [_COPIERS.submit(_copy, d, s) for d, s in zip(destinations, sources)]
    for copy in copies:
        copy.result()


def copy_if_int8(destination: np.ndarray, source: np.ndarray) -> bool:
    """Copies integer (or bool) ``source [B, T]`` into the int8 ``destination[:B, :T]`` if
    every label lies in [0, 127]; returns whether it did.

    Blocks of ~2 MB are checked and then copied while they are in cache, so memory is read
    once, not by a pass for the bound and another for the copy. At the first block with a
    label out of range it stops, unfinished.
    """
    rows = max(1, _BLOCK_BYTES // max(1, source[:1].nbytes))
    for first in range(0, len(source), rows):
        block = source[first : first + rows]
        if label_bound(block) > _INT8_MAX:
            return False
        _copy(destination[first : first + len(block), : source.shape[1]], block)
    return True


def _padded_bound(labels: np.ndarray) -> int:
    """:func:`label_bound` of a padded batch (padding included); 2^63 for float labels."""
    return label_bound(labels) if labels.dtype.kind in "iub" else 1 << 63


class PaddedBuffers:
    """Reusable aligned buffers ``[B, T]`` for targets and predictions, by bucketed shape and
    :func:`buffer_dtype`.

    Fresh buffers for a whole dataset cost more in page faults than the evaluation itself;
    reusing them keeps ``add`` cheap. The contents are only valid until the next ``fill``.
    """

    def __init__(self):
        self._cache: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}

    def _get(self, batch: int, frames: int, bound: int):
        shape, dtype = (round_up(batch), round_up(frames, multiple=32)), buffer_dtype(bound)
        key = (*shape, dtype)
        if key not in self._cache:
            self._cache = {key: (aligned_zeros(shape, dtype), aligned_zeros(shape, dtype))}
        return self._cache[key]

    def fill_videos(self, names, targets, predictions, bound: int):
        """Pads 1-D videos; returns ``(targets, predictions, lengths, bound)``, the first three
        of bucketed shape.

        ``bound`` is the largest label (:func:`largest_label`): it chooses the buffers' type.
        Raises ValueError naming the video when its two lengths differ.
        """
        lengths = np.fromiter((len(t) for t in targets), np.int64, len(targets))
        for name, t, p in zip(names, targets, predictions):
            if len(t) != len(p):
                raise ValueError(
                    f"{name}: targets have {len(t)} frames but predictions have {len(p)}."
                )
        padded_t, padded_p = self._get(len(targets), int(lengths.max()), bound)
        for row, (t, p) in enumerate(zip(targets, predictions)):
            padded_t[row, : len(t)] = t
            padded_p[row, : len(p)] = p
        return padded_t, padded_p, self._lengths(lengths, padded_t.shape[0]), bound

    def fill_padded(self, targets: np.ndarray, predictions: np.ndarray, lengths: np.ndarray):
        """Copies a padded batch ``[B, T]`` into a bucketed buffer (check the labels first with
        :func:`check_batch`: they are converted to the buffer's integer type); returns
        ``(targets, predictions, lengths, bound)``.

        ``bound`` is at least the largest valid label: the largest label of the whole batch,
        padding included (2^63 if a label there is negative or not an integer).

        Integer labels are first copied into int8 buffers, each block checked as it is copied
        (:func:`copy_if_int8`); a label outside [0, 127] sends them to int32 buffers instead.
        """
        if targets.dtype.kind in "biu" and predictions.dtype.kind in "biu":
            padded = self._get(*targets.shape, 0)
            if all(list(_COPIERS.map(copy_if_int8, padded, (targets, predictions)))):
                return (*padded, self._lengths(lengths, padded[0].shape[0]), _INT8_MAX)
        bound = max(_COPIERS.map(_padded_bound, (targets, predictions)))
        padded_t, padded_p = self._get(*targets.shape, bound)
        batch, frames = targets.shape
        copy_pair((padded_t[:batch, :frames], padded_p[:batch, :frames]), (targets, predictions))
        return padded_t, padded_p, self._lengths(lengths, padded_t.shape[0]), bound

    @staticmethod
    def _lengths(lengths, batch):
        out = np.zeros(batch, np.int32)
        out[: len(lengths)] = lengths
        return out
