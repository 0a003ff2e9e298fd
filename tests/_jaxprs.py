"""What a traced program runs (the walks over jaxprs that the vmap tests assert on) and which
programs XLA compiles."""

from __future__ import annotations

import contextlib
import logging

import jax
from jax.extend.core import jaxprs_in_params


def branch_counts(closed_jaxpr) -> list[int]:
    """The number of branches of every ``cond`` in a jaxpr, nested ones included."""
    counts = []

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "cond":
                counts.append(len(eqn.params["branches"]))
            for inner in jaxprs_in_params(eqn.params):
                walk(inner)

    walk(closed_jaxpr.jaxpr)
    return counts


def unconditional_primitives(closed_jaxpr) -> set[str]:
    """The names of the primitives a jaxpr runs on every call (outside the branches of a
    ``cond``), nested calls included."""
    names = set()

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            names.add(eqn.primitive.name)
            if eqn.primitive.name != "cond":
                for inner in jaxprs_in_params(eqn.params):
                    walk(inner)

    walk(closed_jaxpr.jaxpr)
    return names


def primitives(closed_jaxpr) -> set[str]:
    """The names of every primitive of a jaxpr, in branches and nested calls too."""
    names = set()

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            names.add(eqn.primitive.name)
            for inner in jaxprs_in_params(eqn.params):
                walk(inner)

    walk(closed_jaxpr.jaxpr)
    return names


def float_products(closed_jaxpr) -> list:
    """The ``precision`` of every ``dot_general`` with floating operands in a jaxpr, nested
    ones included (``None`` where the default applies: TF32 on some GPUs)."""
    found = []

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "dot_general" and all(
                jax.numpy.issubdtype(v.aval.dtype, jax.numpy.floating) for v in eqn.invars
            ):
                found.append(eqn.params["precision"])
            for inner in jaxprs_in_params(eqn.params):
                walk(inner)

    walk(closed_jaxpr.jaxpr)
    return found


@contextlib.contextmanager
def compilations():
    """The names of the programs XLA compiles inside the block."""
    names = []

    class Record(logging.Handler):
        def emit(self, record):
            message = record.getMessage()
            if message.startswith("Finished XLA compilation of "):
                names.append(message.split(" in ")[0].removeprefix("Finished XLA compilation of "))

    logger, handler = logging.getLogger("jax"), Record(logging.WARNING)
    logger.addHandler(handler)
    try:
        with jax.log_compiles(True):
            yield names
    finally:
        logger.removeHandler(handler)
