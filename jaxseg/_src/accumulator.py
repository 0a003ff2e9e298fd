"""The accumulator pattern: a named bundle of pure functions over additive states."""

from __future__ import annotations

import dataclasses
import functools
import types
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxseg._src.deprecation import renamed_arguments
from jaxseg._src.programs import one_program


def _key(value, depth: int = 0):
    """A hashable key that is equal for two closures of the same code over equal static
    values (ints, strings, tuples, dicts, nested closures, accumulators); None if there is
    none."""
    if depth > 8:
        return None
    if isinstance(value, Accumulator):
        parts = tuple(_key(f, depth + 1) for f in value._functions)
        return None if None in parts else ("accumulator", parts)
    if isinstance(value, types.FunctionType):
        cells = tuple(_key(c.cell_contents, depth + 1) for c in value.__closure__ or ())
        defaults = _key(value.__defaults__ or (), depth + 1)
        keywords = _key(tuple(sorted((value.__kwdefaults__ or {}).items())), depth + 1)
        if None in cells or defaults is None or keywords is None:
            return None
        return ("function", value.__code__, cells, defaults, keywords)
    if hasattr(value, "__wrapped__"):  # a jitted function
        return _key(value.__wrapped__, depth + 1)
    if isinstance(value, float):
        return (float, repr(value))  # -0.0 and 0.0 differ
    if isinstance(value, (int, str, bool, type(None))):
        return (type(value), value)
    if isinstance(value, tuple):
        parts = tuple(_key(v, depth + 1) for v in value)
        return None if None in parts else ("tuple", parts)
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        parts = tuple((k, _key(v, depth + 1)) for k, v in sorted(value.items()))
        return None if any(v is None for _, v in parts) else ("dict", parts)
    return None


class _SameCode:
    """A function equal to every function of the same code over equal static values
    (:func:`_key`), so that accumulators built with the same arguments share their programs."""

    def __init__(self, fn: Callable, key):
        functools.update_wrapper(self, fn)
        self._fn, self._key = fn, key

    def __call__(self, *args, **kwargs):
        return self._fn(*args, **kwargs)

    def __hash__(self):
        return hash(self._key)

    def __eq__(self, other):
        return isinstance(other, _SameCode) and self._key == other._key


def _one_program(fn: Callable) -> Callable:
    """:func:`~jaxseg._src.programs.one_program` of ``fn``, shared by equal closures; the
    deprecated names of a :func:`renamed_arguments` function are renamed before the program,
    because the program binds the new ones only (an old one would make it run ``fn``
    operation by operation)."""
    renames = getattr(fn, "renames", None)
    if renames is not None:
        return renamed_arguments(**renames)(_one_program(fn.__wrapped__))
    key = _key(fn)
    return one_program(fn if key is None else _SameCode(fn, key))


def _fields(state) -> dict[str, tuple[int, ...]]:
    """The shape of each array of ``state``, by its path (``tp.high``)."""
    leaves = jax.tree_util.tree_flatten_with_path(state)[0]
    return {jax.tree_util.keystr(p, simple=True, separator="."): jnp.shape(x) for p, x in leaves}


def _check_state(state, expected, name: str) -> None:
    """Raises ``ValueError`` unless ``state`` has the fields and shapes of ``expected`` (the
    shapes ``init()`` gives), as every state of one accumulator does: a state of another
    accumulator (other classes, thresholds or capacity) was added with broadcasting, or read
    with the other's sizes, silently.

    Args:
      state: the state given to ``update``, ``merge`` or ``compute`` (arrays or tracers).
      expected: ``jax.eval_shape(init)``.
      name: how the message names the state, e.g. ``"merge's b"``.
    """
    got, want = _fields(state), _fields(expected)
    for field in sorted(got.keys() ^ want.keys()):
        raise ValueError(
            f"{name} is a state of another accumulator: "
            + (
                f"it has a field {field}, which this accumulator's states lack."
                if field in got
                else f"it lacks the field {field} of this accumulator's states."
            )
        )
    for field, shape in got.items():
        if shape != want[field]:
            raise ValueError(
                f"{name} is a state of another accumulator: its {field} has shape {shape}, "
                f"this accumulator's {want[field]}."
            )


def _checking_states(fn: Callable, names: tuple[str, ...], expected: Callable) -> Callable:
    """``fn`` that first checks its leading positional arguments, states named ``names``,
    against ``expected()`` (:func:`_check_state`); a check at trace time inside ``jax.jit``."""

    @functools.wraps(fn)
    def checked(*args, **kwargs):
        shapes, treedef, leaf_shapes = expected()
        for name, state in zip(names, args):
            leaves, structure = jax.tree_util.tree_flatten(state)
            if structure != treedef or [np.shape(x) for x in leaves] != leaf_shapes:
                _check_state(state, shapes, name)
        return fn(*args, **kwargs)

    return checked


@dataclasses.dataclass(frozen=True, eq=False)
class Accumulator:
    """Streaming evaluation as pure functions, in the spirit of an optax transformation.

    ``state = init()``; ``state = update(state, targets, predictions, *, mask=None)``;
    ``merge(a, b)`` combines two states; ``compute(state) -> dict`` of metric values. States
    are NamedTuples of additive sufficient statistics, so results do not depend on how the
    data was split, and a cross-device merge is ``jax.lax.psum`` of the state. The exception
    is the buffer of ``capacity=`` in ``frame_average_precision`` and ``detection``: ``merge``
    concatenates buffers, which ``psum`` would add entry by entry, so gather such states
    across devices and ``merge`` them.

    ``update``, ``merge`` and ``compute`` raise ``ValueError`` for a state whose fields or
    shapes are not those of ``init()`` (a state of another accumulator, which would broadcast).

    Called outside ``jax.jit``, ``update``, ``merge`` and ``compute`` each run as one compiled
    program per shape and static arguments (shared by accumulators built with the same
    arguments), not one per operation; inside a trace they are the functions given. The four
    functions unpack like a tuple: ``init, update, merge, compute = acc``.

    On a mesh with Explicit axes (``jax.make_mesh``'s default), ``update`` runs with them as
    Auto axes and returns its state replicated: any sharding of the batch gives the counts
    of one device.
    """

    init: Callable[[], Any]
    update: Callable[..., Any]
    merge: Callable[[Any, Any], Any]
    compute: Callable[[Any], dict]

    def __post_init__(self):
        object.__setattr__(self, "_functions", (self.init, self.update, self.merge, self.compute))
        for name, names in (
            ("update", ("update's state",)),
            ("merge", ("merge's a", "merge's b")),
            ("compute", ("compute's state",)),
        ):
            program = _one_program(getattr(self, name))
            object.__setattr__(self, name, _checking_states(program, names, self._state_shapes))

    def _state_shapes(self):
        """``jax.eval_shape(init)``, its tree structure and its leaves' shapes, found once."""
        if "_shapes" not in self.__dict__:
            shapes = jax.eval_shape(self.init)
            leaves, treedef = jax.tree_util.tree_flatten(shapes)
            object.__setattr__(self, "_shapes", (shapes, treedef, [x.shape for x in leaves]))
        return self._shapes

    def __iter__(self) -> Iterator[Callable]:
        return iter((self.init, self.update, self.merge, self.compute))
