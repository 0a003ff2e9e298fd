"""Trace-time validation of arguments: ranks, shapes, dtypes and static arguments.

Every check raises ``ValueError`` or ``TypeError`` with a message naming the argument, the
expected and the actual value. Nothing here looks at array values, so all of it runs at trace
time under ``jax.jit``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxseg._src.thresholds import MAX_DENOMINATOR, simple_fraction


def on_host(value) -> bool:
    """Whether ``value`` (an array, or a list or tuple of them) holds no JAX array, traced or
    not: only then are its values on the host, to be looked at without a sync (a list of
    traced scalars, under ``jax.jit``, has none)."""
    return not any(isinstance(leaf, jax.Array) for leaf in jax.tree_util.tree_leaves(value))


def first_index(flags: np.ndarray) -> tuple[int, ...]:
    """The index of the first True entry of a host boolean array (row-major), for an error
    message that names where a bad value is; ``flags`` must hold one."""
    return tuple(int(i) for i in np.argwhere(flags)[0])


def host_labels(name: str, value, *, what: str = "label"):
    """Host data (a list, a numpy array) as JAX would hold it, refusing to truncate a label.

    Without ``jax_enable_x64`` JAX stores 64-bit integers in 32 bits and would wrap a label
    such as ``2**32 + 1`` onto ``1``. Host data is already on the host, so its values are
    checked here (never a traced or device array: that would be a host sync). Labels that fit
    int32 are given as int32, so mixing say uint32 and int32 host arrays compares exactly.
    ``what`` names the values in the error: ``"label"``, or ``"value"`` for an argument that
    may hold frames, counts or windows.
    """
    host = np.asarray(value)
    if host.dtype == object:  # JAX would refuse it in an error that names no argument
        raise TypeError(
            f"{name} holds values numpy keeps as Python objects (an integer past 64 bits, or "
            "mixed types); give an integer or floating array."
        )
    if host.dtype.kind not in "iu" or host.dtype.itemsize < 4:
        return value
    if host.dtype == np.int32:
        return host
    small = host.size == 0 or (host.min() >= -(2**31) and host.max() < 2**31)
    if small:
        return host.astype(np.int32)
    if jax.dtypes.canonicalize_dtype(host.dtype) != host.dtype:
        bad = host.max() if host.max() >= 2**31 else host.min()
        narrow = jax.dtypes.canonicalize_dtype(host.dtype)
        remedy = (
            "Relabel to int32 (e.g. np.unique(..., return_inverse=True))"
            if what == "label"
            else "Give values within int32 (labels can be renumbered, e.g. np.unique(..., "
            "return_inverse=True))"
        )
        raise ValueError(
            f"{name} holds {what} {int(bad)}, outside the {narrow} range JAX stores "
            f"{host.dtype} in without jax_enable_x64; it would be truncated onto another "
            f"{what}. {remedy} or enable jax_enable_x64."
        )
    return host


def host_labels_within_classes(
    name: str, labels, valid, num_classes: int, *, classes: str, hint: str, lowest: int = 0
) -> None:
    """Raises ``ValueError`` naming the first of the host ``labels`` outside ``[lowest,
    num_classes)`` where ``valid`` (bool, broadcast to them): its index, its value, what the
    classes are (``classes``) and what to do (``hint``). The comparisons are in int64, so no
    bound wraps into a narrow label dtype."""
    labels = np.asarray(labels)
    values = labels.astype(np.int64) if labels.dtype.itemsize < 8 else labels
    below = values < lowest if values.dtype.kind == "i" else False  # lowest <= 0
    outside = (below | (values >= num_classes)) & valid
    if outside.any():
        where = first_index(outside)
        raise ValueError(
            f"{name}{list(where)} = {int(labels[where])} lies outside [{lowest}, {num_classes}) "
            f"on a valid frame ({classes}); {hint}."
        )


def as_int_labels(name: str, value, *, min_ndim: int = 1) -> jnp.ndarray:
    """Returns ``value`` as an integer array, checking its dtype and rank.

    Host labels (lists, numpy arrays) that the array would truncate (64-bit labels beyond
    int32 without ``jax_enable_x64``) raise ``ValueError``.
    """
    if on_host(value):
        value = host_labels(name, value)
    value = jnp.asarray(value)
    if not jnp.issubdtype(value.dtype, jnp.integer):
        raise TypeError(f"{name} must hold integer labels, got dtype {value.dtype}.")
    if value.ndim < min_ndim:
        raise ValueError(
            f"{name} must have at least {min_ndim} dimension(s) [..., T], got shape {value.shape}."
        )
    return value


def int32_labels(name: str, value) -> jnp.ndarray:
    """Integer labels as int32, for a kernel that returns them in an int32 table (-1 where
    empty).

    Host labels are checked first (:func:`host_labels`, :func:`host_int32_labels`): one beyond
    int32 raises ``ValueError``. Device or traced labels of a wider dtype (uint32, or int64
    with ``jax_enable_x64``), whose values cannot be looked at here, must lie in int32's
    range (a precondition).
    """
    if on_host(value):
        host_int32_labels(name, value)
    return as_int_labels(name, value).astype(jnp.int32)


def host_int32_labels(name: str, value) -> None:
    """Raises ``ValueError`` if host integer labels hold a label beyond int32."""
    host = np.asarray(value)
    if host.dtype.kind not in "iu" or host.size == 0:
        return
    info = np.iinfo(np.int32)
    high, low = host.max(), host.min()
    if high > info.max or low < info.min:
        raise ValueError(
            f"{name} holds label {int(high if high > info.max else low)}, beyond int32, the "
            "dtype of the labels this returns; relabel to int32 (e.g. np.unique(..., "
            "return_inverse=True))."
        )


def as_float(name: str, value, *, min_ndim: int = 0, dtype=jnp.float32) -> jnp.ndarray:
    """Returns ``value`` as a floating array of at least single precision: integers and bools
    are converted to ``dtype``, half precision (float16, bfloat16, 8-bit floats) to float32.

    The conversion of half precision is exact, so scores rank and windows meet as they are
    given; computed in half precision, an IoU and the threshold it is compared with would
    both be rounded to 8 or 11 bits, and a score times a number of bins would round into the
    next bin.
    """
    value = jnp.asarray(value)
    if not jnp.issubdtype(value.dtype, jnp.floating):
        value = value.astype(dtype)
    elif jnp.finfo(value.dtype).bits < 32:
        value = value.astype(jnp.float32)
    if value.ndim < min_ndim:
        raise ValueError(
            f"{name} must have at least {min_ndim} dimension(s), got shape {value.shape}."
        )
    return value


def label_pair(targets, predictions):
    """Validates two label arrays of one shape; returns them with one integer dtype.

    Labels of different integer dtypes (say uint8 targets, int32 predictions) are cast to a
    dtype that holds both exactly: int32 when both fit, else uint32 or int64. A pair with no
    such dtype (traced uint32 with signed labels without ``jax_enable_x64``, uint64 with
    signed) raises ``TypeError`` instead of comparing wrapped values. The kernels compare
    labels in this dtype, so 64-bit labels (with ``jax_enable_x64``) are taken whole.
    """
    targets = as_int_labels("targets", targets)
    predictions = as_int_labels("predictions", predictions)
    same_shape("targets", targets, "predictions", predictions)
    if targets.dtype != predictions.dtype:
        common = _common_label_dtype(targets.dtype, predictions.dtype)
        targets, predictions = targets.astype(common), predictions.astype(common)
    return targets, predictions


def _common_label_dtype(a, b):
    """The integer dtype that holds every value of dtypes ``a`` and ``b`` (see label_pair)."""
    both = np.promote_types(a, b)
    if both.kind == "i" and both.itemsize <= 4:
        return jnp.int32
    if both.kind == "u" and both.itemsize <= 4:
        return jnp.uint32 if both.itemsize == 4 else jnp.int32
    if both.kind in "iu" and jax.dtypes.canonicalize_dtype(both) == both:
        return both
    # uint64 with a signed dtype has no such dtype even with jax_enable_x64 (no int128)
    why = "no int128" if jax.config.jax_enable_x64 else "without jax_enable_x64 JAX has no int64"
    raise TypeError(
        f"targets ({a}) and predictions ({b}) have no common integer dtype that holds both "
        f"exactly ({why}); give both the same dtype, e.g. int32."
    )


def in_label_range(labels, upper: int) -> jnp.ndarray:
    """bool ``labels.shape``: ``0 <= labels < upper``, compared in the labels' own dtype
    without wrapping ``upper`` into it (``int8 < 200`` would compare with -56)."""
    labels = jnp.asarray(labels)
    info = jnp.iinfo(labels.dtype)
    inside = labels >= 0
    if upper <= info.max:
        inside = inside & (labels < jnp.asarray(upper, labels.dtype))
    return inside


def at_least(labels, value: int) -> jnp.ndarray:
    """bool ``labels.shape``: ``labels >= value`` for a static int ``value``, compared without
    wrapping ``value`` into the labels' dtype (``uint8 >= 256`` would compare with 0)."""
    labels = jnp.asarray(labels)
    info = jnp.iinfo(labels.dtype)
    if value > info.max:
        return jnp.zeros(labels.shape, bool)
    return labels >= jnp.asarray(max(value, info.min), labels.dtype)


def static_ignore_index(value) -> int | None:
    """Returns ``ignore_index`` as a static Python int (any sign, e.g. -100 or 255) or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"ignore_index must be a static Python int or None, got {value!r}.")
    return int(value)


def without_ignored(labels, mask, ignore_index: int | None):
    """``mask`` (None = every frame valid) with the frames whose label is ``ignore_index``
    removed, as optax and PyTorch's ``ignore_index`` do; None when nothing is removed.

    The label is compared in the labels' own dtype only when that dtype holds it: an
    ``ignore_index`` of -100 never equals a uint8 label 156.
    """
    if ignore_index is None:
        return mask
    info = jnp.iinfo(labels.dtype)
    if not info.min <= ignore_index <= info.max:
        return mask
    kept = labels != jnp.asarray(ignore_index, labels.dtype)
    return kept if mask is None else mask & kept


def same_shape(name_a: str, a, name_b: str, b) -> None:
    """Raises unless ``a`` and ``b`` have the same shape."""
    if a.shape != b.shape:
        raise ValueError(
            f"{name_a} and {name_b} must have the same shape, got {a.shape} and {b.shape}."
        )


def as_mask(mask, shape: tuple[int, ...], name: str = "mask") -> jnp.ndarray | None:
    """Returns ``mask`` as a boolean array of ``shape`` (``None`` passes through)."""
    if mask is None:
        return None
    mask = jnp.asarray(mask)
    if mask.dtype != jnp.bool_:
        raise TypeError(
            f"{name} must be a boolean array (True = valid entry), got dtype {mask.dtype}."
        )
    if mask.shape != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {mask.shape}.")
    return mask


def with_a_frame(targets, predictions, mask):
    """Labels of sequences without frames (``[..., 0]``) as one masked frame each: the
    kernels read a sequence's first frame, and its statistics are those of a sequence
    whose frames are all masked (``mask`` may be None; it is not, for no frame)."""
    if targets.shape[-1] > 0:
        return targets, predictions, mask
    shape = (*targets.shape[:-1], 1)
    zeros = lambda x: jnp.zeros(shape, x.dtype)  # noqa: E731
    return zeros(targets), zeros(predictions), jnp.zeros(shape, bool)


def with_an_entry(mask, *values, axis: int = -1):
    """``mask`` and ``values`` (whose leading axes are the mask's) with an empty ``axis`` of
    the mask padded to one masked-out entry: the kernels take arg-maxes and remainders over
    that axis, and a masked entry counts as none.

    >>> [x.shape for x in with_an_entry(jnp.ones((3, 0), bool), jnp.ones((3, 0, 2)))]
    [(3, 1), (3, 1, 2)]
    """
    axis = axis % mask.ndim
    if mask.shape[axis] > 0:
        return (mask, *values)
    return tuple(jnp.pad(x, [(0, int(i == axis)) for i in range(x.ndim)]) for x in (mask, *values))


def as_valid(mask, shape: tuple[int, ...], name: str = "mask") -> jnp.ndarray:
    """:func:`as_mask`, with ``None`` meaning every entry is valid: ``bool`` of ``shape``."""
    mask = as_mask(mask, shape, name)
    return jnp.ones(shape, bool) if mask is None else mask


def integer_values(name: str, value, shape: tuple[int, ...]) -> jnp.ndarray:
    """``value``, integers broadcast to ``shape`` (the batch of the arrays it belongs to). A
    float, which would be truncated, or a shape that does not broadcast (an obscure error, or
    silently more results) raises, naming ``name``."""
    try:
        value = jnp.asarray(value)
    except OverflowError:  # a Python int past int32 (int64 under x64)
        raise ValueError(
            f"{name} must be integers that {jnp.asarray(0).dtype} holds, got {value!r}."
        ) from None
    if not jnp.issubdtype(value.dtype, jnp.integer):
        raise TypeError(f"{name} must be integers, got dtype {value.dtype}.")
    try:
        fits = np.broadcast_shapes(value.shape, shape) == shape
    except ValueError:
        fits = False
    if not fits:
        expected = f"broadcastable to shape {shape}" if shape else "a scalar"
        raise ValueError(f"{name} must be {expected}, got shape {value.shape}.")
    return jnp.broadcast_to(value, shape)


def static_int(name: str, value, *, minimum: int = 0, allow_none: bool = False) -> int | None:
    """Returns a static Python int >= ``minimum`` (or ``None`` when allowed)."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be a static Python int, got {value!r}.")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}.")
    return int(value)


def static_bool(name: str, value) -> bool:
    """``value`` as a Python bool; anything but ``True`` or ``False`` (a string such as
    ``"no"``, which ``bool`` takes as true, an int, a traced value) raises ``TypeError``."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}.")
    return bool(value)


def static_float(name: str, value) -> float:
    """``value`` as a Python float; a traced one (a static option passed to a function under
    ``jax.jit`` as a traced argument) or a bool (``True`` is no threshold 1.0) raises
    ``TypeError`` naming ``name``."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must hold numbers, got {value!r}.")
    if isinstance(value, jax.core.Tracer):
        raise TypeError(
            f"{name} must hold static Python floats, got a traced value {value}; under "
            "jax.jit, bind it with functools.partial or static_argnames."
        )
    return float(value)


def static_ints(name: str, values, *, minimum: int = 1) -> tuple[int, ...]:
    """``values`` (an int, a sequence of ints or a numpy array of them, as the functions
    taking it accept) as a non-empty tuple of Python ints >= ``minimum``, in the given order."""
    if isinstance(values, np.ndarray) and values.ndim <= 1:
        values = values.tolist()
    if isinstance(values, (int, np.integer)) and not isinstance(values, bool):
        values = (values,)
    if not isinstance(values, (tuple, list)) or not values:
        raise ValueError(f"{name} must be a non-empty tuple of ints >= {minimum}, got {values!r}.")
    return tuple(static_int(name, v, minimum=minimum) for v in values)


def static_labels(name: str, values) -> tuple[int, ...]:
    """Returns a static tuple of distinct integer labels (e.g. ``background``)."""
    if isinstance(values, (int, np.integer)) and not isinstance(values, bool):
        values = (values,)
    if not isinstance(values, Sequence) or isinstance(values, str):
        raise TypeError(f"{name} must be a tuple of integer labels, got {values!r}.")
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{name} must be a tuple of integer labels, got element {v!r}.")
        out.append(int(v))
    return tuple(sorted(set(out)))


def static_choice(name: str, value, choices: Sequence[str]) -> str:
    """Returns ``value`` if it is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {tuple(choices)}, got {value!r}.")
    return value


def static_unit_floats(name: str, values) -> tuple[float, ...]:
    """``values`` (a number, a sequence of numbers, or a 0-d or 1-D array of them, as the
    functions taking thresholds accept) as a non-empty tuple of Python floats in (0, 1], in
    the given order."""
    if isinstance(values, (int, float)) or getattr(values, "ndim", None) == 0:
        values = (values,)  # numpy scalars and 0-d arrays too
    if getattr(values, "ndim", 1) != 1:
        raise ValueError(
            f"{name} must be a number or a 1-D sequence of numbers in (0, 1], got shape "
            f"{values.shape}."
        )
    expected = f"{name} must be a non-empty tuple of numbers in (0, 1]"
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ValueError(f"{expected}, got {values!r}.")
    values = tuple(static_float(name, v) for v in values)
    if not values or not all(0.0 < v <= 1.0 for v in values):
        raise ValueError(f"{expected}, got {values!r}.")
    return values


def static_thresholds(
    name: str, values, *, max_denominator: int = MAX_DENOMINATOR
) -> tuple[tuple[int, int], ...]:
    """Returns each threshold in (0, 1] (:func:`static_unit_floats`) as an exact fraction
    ``(numerator, denominator)``: the simple fraction it was written as
    (:func:`~jaxseg._src.thresholds.simple_fraction`).
    """
    out = []
    for v in static_unit_floats(name, values):
        frac = simple_fraction(v, max_denominator)
        if frac is None:
            raise ValueError(
                f"{name} must be simple fractions such as 0.1 or 0.25 (denominator <= "
                f"{max_denominator}); {v!r} is not."
            )
        out.append((frac.numerator, frac.denominator))
    return tuple(out)
