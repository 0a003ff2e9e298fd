"""A public function called outside ``jax.jit`` runs as one compiled program.

Called eagerly, a JAX function dispatches its operations one by one: each compiles a small
program of its own the first time it meets a shape, and a metric of a few hundred operations
pays a few hundred compilations on its first call and a few hundred dispatches on every
later one. :func:`one_program` compiles the whole function instead, once per shapes, dtypes
and static arguments. Under a trace (``jax.jit``, ``jax.vmap``, ``jax.grad``) it calls the
function as it is, so that it joins the caller's program.

On a mesh with Explicit axes (``jax.make_mesh``'s default) the function runs with those axes
as Auto ones (:class:`_ExplicitAxesAsAuto`), so that every public function takes a batch
sharded over them, inside a user's ``jax.jit`` or not.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from jaxseg._src import checks


def one_program(fn: Callable | None = None, *, host_check: Callable | None = None) -> Callable:
    """``fn`` compiled as one program when called outside a trace; ``fn`` itself inside one.

    Arrays (numpy or JAX, a list, a tuple or dict of arrays such as an accumulator's state)
    are the program's arguments; every other argument (ints, floats, strings, tuples of
    numbers, None, functions) is static, so a new value of it compiles anew, as a new shape
    does (pass a JAX array for a number that changes from call to call). A list or an array
    given for an option whose default is a tuple (``iou_thresholds``, ``background``) is the
    tuple of its items. Host integer arrays are checked as
    :func:`~jaxseg._src.checks.as_int_labels` checks them, before JAX would narrow them to 32
    bits. A call the program cannot take runs ``fn`` as it is: a traced or unhashable
    argument, a name the signature does not bind, or an array where ``fn`` needs a concrete
    value (JAX refuses it while tracing, before anything runs).

    Inside the program every array is traced, so a check ``fn`` makes on concrete values only
    (a ``ValueError`` naming a bad label, where a traced call returns NaN) would not run there:
    ``host_check`` makes it on the host instead, after the program has validated the shapes.

    Args:
      fn: a function of arrays and static options that JAX can trace.
      host_check: optional ``check(arguments)``, called with every argument of a call that
        runs as the program (a dict by parameter name, defaults included); it raises on bad
        values.

    Returns:
      A function with ``fn``'s signature, docstring and results (``one_program(host_check=...)``
      without ``fn``: a decorator).

    >>> import jax.numpy as jnp
    >>> total = one_program(lambda x, *, scale=1: scale * jnp.sum(x))
    >>> int(total([1, 2, 3], scale=2))
    12
    """
    if fn is None:
        return functools.partial(one_program, host_check=host_check)
    signature = inspect.signature(fn)
    runs = _ExplicitAxesAsAuto(fn)
    defaults = {
        name: parameter.default
        for name, parameter in signature.parameters.items()
        if parameter.default is not inspect.Parameter.empty
    }

    @functools.wraps(fn)
    def call(*args, **kwargs):
        split = _split_arguments(signature, args, kwargs)
        if split is None:
            return runs(*args, **kwargs)
        static, arrays = split
        try:
            result = _program(runs, static, arrays)
        except (jax.errors.JAXTypeError, jax.errors.JAXIndexError):
            return runs(*args, **kwargs)
        if host_check is not None:
            host_check({**defaults, **_values(static), **arrays})
        return result

    return call


def _explicit_mesh(arrays):
    """The mesh with Explicit axes that ``arrays`` are typed on: the context mesh
    (``jax.set_mesh``), else the mesh of an argument's sharding; None where there is none (no
    mesh, an Auto mesh, only Manual axes inside ``shard_map``)."""
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty:
        meshes = (getattr(jax.typeof(x).sharding, "mesh", None) for x in arrays)
        mesh = next((m for m in meshes if m is not None and m.explicit_axes), mesh)
    return mesh if not mesh.empty and mesh.explicit_axes else None


class _ExplicitAxesAsAuto:
    """``fn`` traced with the Explicit axes of its arguments' mesh made Auto, its results
    replicated; ``fn`` itself where there are none. Equal for equal ``fn`` (a static
    argument of :func:`_program`, which programs of equal functions share).

    On an Explicit axis every operation must resolve its output's sharding while it is
    traced, and the kernels' scatters of a sharded batch into replicated counts, their
    reshapes, sorts of rows against replicated ones and vmaps over a batch sharded in some
    operands only do not (``ShardingTypeError``). On Auto axes the compiler partitions them
    as on an Auto mesh, into the numbers of one device. Arrays are passed through
    ``jax.sharding.auto_axes`` (which retypes them), every other argument as it is; the
    results are replicated because their shapes (per sequence, per class, one number) are
    known only once traced, and ``auto_axes`` asks for their sharding before.
    """

    def __init__(self, fn: Callable):
        self.fn = fn

    def __eq__(self, other):
        return isinstance(other, _ExplicitAxesAsAuto) and self.fn == other.fn

    def __hash__(self):
        return hash(self.fn)

    def __call__(self, *args, **kwargs):
        leaves, tree = jax.tree.flatten((args, kwargs))
        where = [i for i, x in enumerate(leaves) if isinstance(x, jax.Array)]
        mesh = _explicit_mesh([leaves[i] for i in where])
        if mesh is None:
            return self.fn(*args, **kwargs)

        def on_arrays(arrays):
            retyped = dict(zip(where, arrays, strict=True))
            args, kwargs = jax.tree.unflatten(
                tree, [retyped.get(i, x) for i, x in enumerate(leaves)]
            )
            return self.fn(*args, **kwargs)

        replicated = NamedSharding(mesh, P())
        on_auto = jax.sharding.auto_axes(
            on_arrays, axes=mesh.explicit_axes, out_sharding=replicated
        )
        return on_auto([leaves[i] for i in where])


@functools.partial(jax.jit, static_argnums=(0, 1))
def _program(fn, static, arrays):
    return fn(**_values(static), **arrays)


def _values(static) -> dict:
    """The static arguments by name, from :func:`_split_arguments`' entries."""
    return {name: value for name, value, _ in static}


def _plain(value):
    """``value`` with numpy scalars as Python ones (``np.float64(0.5) == (0.1, 0.5)`` is an
    array, which jit's comparison of static arguments cannot take)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, tuple):
        return tuple(_plain(x) for x in value)
    return value


def _types(value):
    """The types of ``value``'s scalars, which make ``5`` and ``5.0`` (or ``1`` and
    ``True``) different static arguments: a value that ``fn`` refuses never gets the program
    compiled for an equal value of another type."""
    if isinstance(value, tuple):
        return tuple(_types(x) for x in value)
    return type(value)


def _split_arguments(signature, args, kwargs):
    """``(static, arrays)``: a tuple of the static ``(name, value, types)`` entries, sorted by
    name, and a dict of the program's arguments; None where the call must run as it is."""
    if any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves((args, kwargs))):
        return None
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return None
    static, arrays = [], {}
    for name, value in bound.arguments.items():
        kind = signature.parameters[name].kind
        if kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            return None
        # A list is unhashable and an array is traced, so neither can be a static option
        # whose values fn reads (iou_thresholds): such an option is the tuple of its items.
        # Any other list (a mask) is the array it holds.
        if isinstance(signature.parameters[name].default, tuple):
            if isinstance(value, (np.ndarray, jax.Array)):
                value = value.tolist()
            value = _as_tuple(value) if isinstance(value, list) else value
        elif isinstance(value, list):
            try:
                value = np.asarray(value)
            except ValueError:  # a ragged list: fn says why
                return None
        if _holds_arrays(value):
            arrays[name] = jax.tree_util.tree_map(
                lambda x, name=name: (
                    checks.host_labels(name, x, what="value") if checks.on_host(x) else x
                ),
                value,
            )
            continue
        value = _plain(value)
        try:
            hash(value)
        except TypeError:
            return None
        static.append((name, value, _types(value)))
    return tuple(sorted(static, key=lambda entry: entry[0])), arrays


def _as_tuple(value):
    """``value`` with its lists, nested ones too, as tuples."""
    return tuple(map(_as_tuple, value)) if isinstance(value, (list, tuple)) else value


def _holds_arrays(value) -> bool:
    """Whether ``value`` is an array, or a tuple or dict of arrays (an accumulator's state)."""
    if isinstance(value, (np.ndarray, jax.Array)):
        return True
    if not isinstance(value, (tuple, dict)):
        return False
    leaves = jax.tree_util.tree_leaves(value)
    return bool(leaves) and all(isinstance(x, (np.ndarray, jax.Array)) for x in leaves)
