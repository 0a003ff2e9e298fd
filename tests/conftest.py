"""Shared pytest configuration: strict JAX promotion, hypothesis profiles, golden data.

``jax_enable_x64`` stays off (the library must be exact in 32 bits). Implicit rank promotion
raises and dtype promotion is strict, so a kernel that relies on either fails its tests (JAX's
own environment variables JAX_NUMPY_RANK_PROMOTION / JAX_NUMPY_DTYPE_PROMOTION override this).
Hypothesis profiles: ``default`` (CI: few examples, each a batch of videos) and ``thorough``
(``HYPOTHESIS_PROFILE=thorough``); both without deadline because the first example compiles.

The tests compile quickly rather than well (:func:`_quick_compile_flags`);
``JAXSEG_TEST_XLA=default`` keeps XLA's own settings, as CI does for the golden tests.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, settings

_QUICK_COMPILE = ("--xla_backend_optimization_level=1", "--xla_cpu_use_fusion_emitters=false")


def _quick_compile_flags(flags: str) -> str:
    """``flags`` (XLA_FLAGS) with XLA options that compile faster, where this XLA knows them.

    The suite spends most of its time compiling small programs. LLVM at optimisation level 1
    instead of 3, and XLA:CPU's classic emitters (the Evaluator's phase 2 uses them too,
    ``jaxseg/_host/compilation.py``), take about a third less time, and every test passes
    at both. Level 0 saves more, but there XLA:CPU's copies of a value it recomputes in
    several fusions can differ in the last bit, unlike at its default level (the Lovász test
    runs at level 0 for that reason).

    An XLA that does not know a flag aborts, so a fresh process tries them first. Flags that
    are already set (by the user, or by the pytest-xdist controller) are left as they are.
    """
    if os.environ.get("JAXSEG_TEST_XLA") == "default" or any(
        flag.split("=")[0] in flags for flag in _QUICK_COMPILE
    ):
        return flags
    quick = " ".join((flags, *_QUICK_COMPILE)).strip()
    probe = "import jax; jax.jit(lambda x: x + 1)(1)"
    env = dict(os.environ, XLA_FLAGS=quick, JAX_PLATFORMS="cpu")
    tried = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True)
    return quick if tried.returncode == 0 else flags


# Before JAX starts its backend (at the first computation, not at import): it reads the flags
# once.
os.environ["XLA_FLAGS"] = _quick_compile_flags(os.environ.get("XLA_FLAGS", ""))

jax.config.update("jax_numpy_rank_promotion", os.environ.get("JAX_NUMPY_RANK_PROMOTION", "raise"))
jax.config.update(
    "jax_numpy_dtype_promotion", os.environ.get("JAX_NUMPY_DTYPE_PROMOTION", "strict")
)

_SLOW_DATA = [HealthCheck.too_slow, HealthCheck.data_too_large]
settings.register_profile(
    "default", max_examples=30, deadline=None, suppress_health_check=_SLOW_DATA
)
settings.register_profile(
    "thorough", max_examples=400, deadline=None, suppress_health_check=_SLOW_DATA
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(autouse=True, scope="module")
def _fresh_jax_caches():
    """Each test module leaves JAX's caches empty behind it. A worker that kept the compiled
    programs of every module it ran grew to 5-6 GB, and twice XLA:CPU crashed inside its
    compiler late in such a worker, on tests that pass in a fresh process."""
    yield
    jax.clear_caches()


@pytest.fixture(autouse=True)
def _no_compilation_cache(monkeypatch):
    """No test writes compiled programs to ~/.cache: the CLI turns JAX's persistent cache on
    for its whole process, so one in-process CLI test would send every later compilation of
    that test worker through a directory shared with the other worker and with earlier runs
    (a worker once crashed reading an entry there). A test of the cache sets its own."""
    monkeypatch.setenv("JAXSEG_CACHE_DIR", "")


# The reference numbers ship with the tests (tests/golden/README.md gives their source), so
# every golden test runs on a fresh clone.
GOLDEN = pathlib.Path(__file__).resolve().parent / "golden"
GOLDEN_FILES = tuple(
    f"{name}.{ext}"
    for name in (
        "ap",
        "dense",
        "detection",
        "online",
        "retrieval",
        "segmentation",
        "unsupervised/tas",
        "grounding/grounding",
        "proposals/proposals",
    )
    for ext in ("json", "npz")
)


def golden_path(name: str) -> pathlib.Path:
    """Path of a golden file (tests/golden); the environment variable JAXSEG_GOLDEN overrides
    the folder."""
    return pathlib.Path(os.environ.get("JAXSEG_GOLDEN", GOLDEN)) / name


def load_golden(stem: str):
    """``(json, npz arrays)`` of golden ``<stem>.json`` and ``<stem>.npz``; skips the test
    when they are absent (a JAXSEG_GOLDEN folder without them)."""
    path = golden_path(f"{stem}.json")
    if not path.exists():
        pytest.skip(f"golden data not found at {path} (set JAXSEG_GOLDEN)")
    with open(path) as f:
        data = json.load(f)
    return data, dict(np.load(golden_path(f"{stem}.npz")))


@pytest.fixture(scope="session")
def golden_segmentation():
    """``(json, npz)`` of golden/segmentation.{json,npz}."""
    return load_golden("segmentation")


def pytest_collection_modifyitems(items):
    """The subprocess checks (``multidevice``, a minute or two each) first: pytest-xdist
    hands the first tests to its workers in turn, so they start on both workers at once
    instead of ending the run on one while the other waits. The rest keep their order."""
    items.sort(key=lambda item: item.get_closest_marker("multidevice") is None)
