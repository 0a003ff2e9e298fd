"""Thresholds as exact fractions. No JAX here: the command line checks its arguments with
this before it imports JAX."""

from __future__ import annotations

import fractions

import numpy as np

MAX_DENOMINATOR = 1 << 15

# 0.5:0.05:0.95 as ActivityNet and Moment-DETR compute it, np.linspace(0.5, 0.95, 10), not
# the decimals: under x64 a tIoU of 0.8999999999999999 reaches their ninth threshold (numpy 2
# computes it so), and would miss a 0.9. Here, with no JAX, for the command line as well.
ACTIVITYNET_THRESHOLDS = tuple(float(t) for t in np.linspace(0.5, 0.95, 10))


def simple_fraction(value: float, max_denominator: int = MAX_DENOMINATOR):
    """The fraction of smallest denominator (at most ``max_denominator``) that rounds to
    exactly the double ``value``, or None if there is none.

    A float such as ``0.1`` is taken to mean the simple fraction it was written as (1/10), so
    that ``i / u >= 1/10`` tested on integers agrees with the reference scripts, which compare
    the double ``i / u`` with the double ``0.1``.

    >>> simple_fraction(0.1), simple_fraction(0.5000001)
    (Fraction(1, 10), None)
    """
    frac = fractions.Fraction(value).limit_denominator(max_denominator)
    return frac if float(frac) == value else None
