"""The accumulator pattern: a named bundle of pure functions over additive states."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple


class Accumulator(NamedTuple):
    """Streaming evaluation as pure functions, in the spirit of an optax transformation.

    ``state = init()``; ``state = update(state, targets, predictions, *, mask=None)``;
    ``merge(a, b)`` adds two states (a cross-device merge is ``jax.lax.psum`` of the state);
    ``compute(state) -> dict`` of metric values. States are NamedTuples of additive
    sufficient statistics, so results do not depend on how the data was split.
    """

    init: Callable[[], Any]
    update: Callable[..., Any]
    merge: Callable[[Any, Any], Any]
    compute: Callable[[Any], dict]
