"""``jax.jit`` with XLA options that compile faster on CPU, for programs whose compilation
costs more than their run: the Evaluator's phase 2 compiles once per dataset shape.

XLA:CPU's default code generation in JAX 0.10 (the MLIR fusion emitters) compiles phase 2,
about 190 small fusions, more slowly than its classic emitters, whose program gives the same
bits a little later; memory-bound passes (the frame pass) lose more than they gain, so they
keep ``jax.jit`` (``benchmarks/README.md``, choices measured once).
"""

from __future__ import annotations

import functools

import jax
import numpy as np

_FAST_CPU_COMPILE = {"xla_cpu_use_fusion_emitters": False}


@functools.cache
def compiler_options() -> dict:
    """The fast-compile options on the CPU backend, where they were measured; {} elsewhere.

    An XLA:CPU that does not know the option rejects it when the probe compiles (a
    ``jax.errors.JaxRuntimeError``); the options are then left out.
    """
    if jax.default_backend() != "cpu":
        return {}
    try:
        probe = jax.jit(lambda x: x + 1, compiler_options=_FAST_CPU_COMPILE)
        probe.lower(np.int32(0)).compile()
    except jax.errors.JaxRuntimeError:
        return {}
    return dict(_FAST_CPU_COMPILE)


def jit(fun=None, **jit_kwargs):
    """``jax.jit(fun, **jit_kwargs)`` with :func:`compiler_options`, built at the first use
    (so that importing jaxseg compiles nothing). Usable as ``@jit`` or ``@jit(...)``.
    ``lower(*args)`` is ``jax.jit``'s: compiling its result fills the cache that calls use.

    >>> double = jit(lambda x: 2 * x)
    >>> int(double(3))
    6
    """
    if fun is None:
        return functools.partial(jit, **jit_kwargs)

    @functools.cache
    def compiled():
        return jax.jit(fun, compiler_options=compiler_options(), **jit_kwargs)

    @functools.wraps(fun)
    def call(*args, **kwargs):
        return compiled()(*args, **kwargs)

    call.lower = lambda *args, **kwargs: compiled().lower(*args, **kwargs)
    return call
