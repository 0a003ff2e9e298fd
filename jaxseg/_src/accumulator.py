"""The accumulator pattern: a named bundle of pure functions over additive states."""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable, Hashable, Iterator
from typing import Any

import jax

_JITTED: dict[Hashable, Callable] = {}  # one compiled compute per rule and static arguments


def _key(value, depth: int = 0):
    """A hashable key that is equal for two closures of the same code over equal static
    values (ints, strings, tuples, nested closures, accumulators); None if there is none."""
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
    return None


@dataclasses.dataclass(frozen=True, eq=False)
class Accumulator:
    """Streaming evaluation as pure functions, in the spirit of an optax transformation.

    ``state = init()``; ``state = update(state, targets, predictions, *, mask=None)``;
    ``merge(a, b)`` adds two states (a cross-device merge is ``jax.lax.psum`` of the state);
    ``compute(state) -> dict`` of metric values. States are NamedTuples of additive
    sufficient statistics, so results do not depend on how the data was split.

    ``compute`` is jitted here: its first call outside ``jit`` compiles one program (shared
    by accumulators built with the same arguments), not one per operation. ``init``,
    ``update`` and ``merge`` are left for the caller to jit. The four functions unpack like a
    tuple: ``init, update, merge, compute = acc``.
    """

    init: Callable[[], Any]
    update: Callable[..., Any]
    merge: Callable[[Any, Any], Any]
    compute: Callable[[Any], dict]

    def __post_init__(self):
        object.__setattr__(self, "_functions", (self.init, self.update, self.merge, self.compute))
        key = _key(self.compute)
        jitted = _JITTED.get(key) if key is not None else None
        if jitted is None:
            jitted = jax.jit(self.compute)
            if key is not None and len(_JITTED) < 256:
                _JITTED[key] = jitted
        object.__setattr__(self, "compute", jitted)

    def __iter__(self) -> Iterator[Callable]:
        return iter((self.init, self.update, self.merge, self.compute))
