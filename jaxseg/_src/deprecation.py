"""Renamed arguments: the old keyword names keep working, with a ``DeprecationWarning``."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable


def renamed_arguments(**renames: str) -> Callable[[Callable], Callable]:
    """Decorator: ``fn(old=x)`` calls ``fn(new=x)`` and warns, for each ``old="new"`` given.

    The signature users see (``inspect.signature``, ``help``) is the new one; passing both
    names is a ``TypeError``, as for any argument given twice.

    >>> @renamed_arguments(gt="targets")
    ... def count(targets):
    ...     return len(targets)
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     count(gt=[1, 2])
    2
    >>> str(caught[0].message)
    "count(): 'gt' is deprecated, use 'targets'."
    """

    def decorate(fn: Callable) -> Callable:
        name = getattr(fn, "__name__", "function")

        @functools.wraps(fn)
        def renamed(*args, **kwargs):
            for old, new in renames.items():
                if old not in kwargs:
                    continue
                if new in kwargs:
                    raise TypeError(f"{name}() got both {old!r} (deprecated) and {new!r}.")
                warnings.warn(
                    f"{name}(): {old!r} is deprecated, use {new!r}.",
                    DeprecationWarning,
                    stacklevel=2,
                )
                kwargs[new] = kwargs.pop(old)
            return fn(*args, **kwargs)

        renamed.renames = dict(renames)  # for a wrapper that must rename first
        return renamed

    return decorate
