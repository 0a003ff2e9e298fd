"""Registry-driven contract test over every public function (DESIGN.md §3).

The registry is the union of ``CASES`` of every ``tests/_contract*.py`` module. Each case is
compiled once, in a bundle that evaluates the function batched, vmapped, looped over rows
(``lax.map``), with extra leading dims, and on the sliced (mask-compacted) rows; the bundle
is called twice with new values under ``chex.assert_max_traces(n=1)``.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import pathlib

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _contract import Case
from _jaxprs import compilations, float_products

T, N_VALID, LEAD = 10, 7, (2, 3)
BATCH = LEAD[0] * LEAD[1]
PUBLIC_MODULES = ("jaxseg.metrics", "jaxseg.segments", "jaxseg.losses")


def _registry() -> tuple[list[Case], set[str]]:
    cases, exempt = [], set()
    for path in sorted(pathlib.Path(__file__).parent.glob("_contract*.py")):
        module = importlib.import_module(path.stem)
        cases += module.CASES
        exempt |= set(getattr(module, "EXEMPT", ()))
    return cases, exempt


CASES, EXEMPT = _registry()
IDS = [c.id for c in CASES]


def _masks():
    """Six masks of T frames with exactly N_VALID valid ones: prefix, holes, scattered."""
    rng = np.random.default_rng(7)
    rows = [np.arange(T) < N_VALID, np.arange(T) >= T - N_VALID]
    while len(rows) < BATCH:
        rows.append(np.isin(np.arange(T), rng.choice(T, N_VALID, replace=False)))
    return np.stack(rows)


MASK = _masks()


def _call(case: Case, args, mask):
    kwargs = dict(case.kwargs)
    if case.takes_mask:
        kwargs["mask"] = mask
    return case.fn(*args, **kwargs)


def _compact(case: Case, args):
    """Each row's valid frames (MASK) only: arrays [BATCH, N_VALID, ...]."""
    out = []
    for x, axis in zip(args, case.time_axes, strict=True):
        if axis is None:
            out.append(x)
            continue
        rows = [np.compress(m, row, axis=axis) for row, m in zip(x, MASK, strict=True)]
        out.append(np.stack(rows))
    return tuple(out)


def _bundle(case: Case):
    """One jitted function evaluating every formulation the contract compares."""

    @jax.jit
    @chex.assert_max_traces(n=1)
    def bundle(args, sliced):
        mask = MASK if case.takes_mask else None
        row = lambda xs: _call(case, xs[:-1], xs[-1])  # noqa: E731
        row_nomask = lambda xs: _call(case, xs, None)  # noqa: E731
        out = {"batched": _call(case, args, mask)}
        if case.takes_mask:
            out["vmapped"] = jax.vmap(lambda *xs: row(xs))(*args, mask)
            out["looped"] = jax.lax.map(row, (*args, mask))
            out["sliced"] = jax.lax.map(row_nomask, sliced)
        else:
            out["vmapped"] = jax.vmap(lambda *xs: row_nomask(xs))(*args)
            out["looped"] = jax.lax.map(row_nomask, args)
        leading = tuple(x.reshape(LEAD + x.shape[1:]) for x in args)
        lead_mask = None if mask is None else mask.reshape(LEAD + mask.shape[1:])
        out["leading"] = _call(case, leading, lead_mask)
        return out

    return bundle


def _canonical(case: Case, tree):
    tree = jax.device_get(tree)
    return case.canonical(tree) if case.canonical else tree


def _assert_same(case: Case, got, want, what):
    got, want = _canonical(case, got), _canonical(case, want)
    assert jax.tree.structure(got) == jax.tree.structure(want), what
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape, (what, a.shape, b.shape)
        if np.issubdtype(a.dtype, np.floating):
            np.testing.assert_allclose(a, b, rtol=case.tolerance, atol=case.tolerance, err_msg=what)
        else:
            np.testing.assert_array_equal(a, b, err_msg=what)


@pytest.fixture(scope="module", params=range(len(CASES)), ids=IDS)
def index(request) -> int:
    """The index of a case in CASES. A module-scoped parameter, so that pytest runs a case's
    tests one after another (and pytest-xdist sends them to one worker): its bundle, the
    largest program of the contract, then compiles once per run instead of once per worker."""
    return request.param


@pytest.fixture(scope="module")
def results(index):
    """(inputs and bundle outputs for two value sets, eager output, the programs its eager
    call compiled) of CASES[index], computed once for the case's tests."""
    case = CASES[index]
    rng = np.random.default_rng(index)
    chex.clear_trace_counter()
    bundle = _bundle(case)
    runs = []
    for _ in range(2):  # new values, same shapes: must not retrace
        args = case.make_args(rng, (BATCH,), T)
        runs.append((args, jax.device_get(bundle(args, _compact(case, args)))))
    with compilations() as compiled:  # the case's first eager call at these shapes
        eager = jax.block_until_ready(_call(case, runs[0][0], MASK if case.takes_mask else None))
    return runs, eager, compiled


def test_jit_equals_eager_without_retrace(index, results):
    case = CASES[index]
    runs, eager, _ = results  # the second bundle call would raise on a retrace
    _assert_same(case, runs[0][1]["batched"], eager, "jit vs eager")
    assert not all(np.array_equal(a, b) for a, b in zip(runs[0][0], runs[1][0], strict=True)), (
        "the two calls must use different values"
    )


def test_vmap_equals_loop(index, results):
    case = CASES[index]
    for _, out in results[0]:
        _assert_same(case, out["vmapped"], out["looped"], "vmap vs lax.map loop")
        _assert_same(case, out["batched"], out["looped"], "batched vs loop")


def test_extra_leading_dims(index, results):
    case = CASES[index]
    for _, out in results[0]:
        leading = jax.tree.map(lambda x: x.reshape((BATCH, *x.shape[len(LEAD) :])), out["leading"])
        for leaf in jax.tree.leaves(out["leading"]):
            assert leaf.shape[: len(LEAD)] == LEAD
        _assert_same(case, leading, out["batched"], "[2, 3, ...] vs [6, ...]")


@pytest.mark.parametrize(
    "index",
    [i for i, c in enumerate(CASES) if c.takes_mask],
    ids=[c.id for c in CASES if c.takes_mask],
    indirect=True,
)
def test_padding_with_mask_equals_slicing(index, results):
    case = CASES[index]
    for _, out in results[0]:
        _assert_same(case, out["batched"], out["sliced"], "mask vs sliced rows")


def test_output_dtypes(index, results):
    case = CASES[index]
    leaves = jax.tree.leaves(results[0][0][1]["batched"])
    want = case.out_dtype if isinstance(case.out_dtype, tuple) else (case.out_dtype,) * len(leaves)
    assert tuple(str(x.dtype) for x in leaves) == want


def test_float_products_run_at_full_precision(index, results):
    """Every float matrix product asks for full precision: at the default one XLA:GPU may
    round its operands to TF32 (11 bits), which changes losses and counts."""
    case = CASES[index]
    mask = MASK if case.takes_mask else None
    jaxpr = jax.make_jaxpr(lambda *args: _call(case, args, mask))(*results[0][0][0])
    highest = (jax.lax.Precision.HIGHEST, jax.lax.Precision.HIGHEST)
    assert all(p == highest for p in float_products(jaxpr)), float_products(jaxpr)


def test_an_eager_call_compiles_one_program(index, results):
    """Outside jax.jit a public metric or loss compiles once for a new shape (not once per
    operation) and its later calls, with new values, compile nothing."""
    case = CASES[index]
    runs, _, first = results
    with compilations() as again:
        jax.block_until_ready(_call(case, runs[1][0], MASK if case.takes_mask else None))
    assert (len(first), len(again)) == (1, 0), first


@contextlib.contextmanager
def _default_branches():
    """Every ``lax.platform_dependent`` traced inside takes its default branch, the one that
    backends other than the CPU run (jit caches cleared on the way in and out, so that no
    program traced with the other branch is reused)."""

    def default_branch(*args, default, **per_platform):
        return default(*args)

    jax.clear_caches()
    shipped, jax.lax.platform_dependent = jax.lax.platform_dependent, default_branch
    try:
        yield
    finally:
        jax.lax.platform_dependent = shipped
        jax.clear_caches()


def test_other_backends_formulations_give_the_same_bits(index, results):
    """With every backend dispatch on its non-CPU branch (sorts of pairs, ``jnp.cumsum``,
    float32 quotients from the operands' significands), the metrics' outputs are the CPU's,
    bit for bit: the formulations a GPU or TPU runs, checked where CI runs. The losses,
    whose float arithmetic XLA:CPU may contract (a quotient as a product with a reciprocal),
    agree within the case's tolerance."""
    case = CASES[index]
    args, mask = results[0][0][0], MASK if case.takes_mask else None
    want = jax.jit(lambda *args: _call(case, args, mask))(*args)
    with _default_branches():
        got = jax.jit(lambda *args: _call(case, args, mask))(*args)
    if case.name.startswith("jaxseg.losses."):
        _assert_same(case, got, want, "default branches vs CPU branches")
        return
    got, want = _canonical(case, got), _canonical(case, want)
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def _floating(args) -> list[bool]:
    return [np.issubdtype(np.asarray(x).dtype, np.floating) for x in args]


# The cases with a floating argument (scores, windows, boxes, logits).
FLOATING = [
    i
    for i, c in enumerate(CASES)
    if any(_floating(c.make_args(np.random.default_rng(i), (BATCH,), T)))
]


@pytest.mark.parametrize("half", ["bfloat16", "float16"])
@pytest.mark.parametrize("index", FLOATING, ids=[IDS[i] for i in FLOATING], indirect=True)
def test_half_precision_arguments_give_the_numbers_of_their_values(index, half):
    """Floating arguments in bfloat16 or float16 (mixed-precision training's dtypes) give the
    outputs, bit for bit and in the same dtypes, of the same values in float32, and a loss's
    gradient is that of float32 in the logits' dtype: half precision is widened on the way
    in, never computed in (an IoU and its threshold both rounded to 8 bits, a score times the
    bins rounded into the next bin)."""
    case = CASES[index]
    args = case.make_args(np.random.default_rng(index), (BATCH,), T)
    floating = _floating(args)
    halves = tuple(jnp.asarray(x, half) if f else x for x, f in zip(args, floating))
    values = tuple(np.asarray(x, np.float32) if f else x for x, f in zip(halves, floating))
    mask = MASK if case.takes_mask else None
    got, want = (_canonical(case, _call(case, xs, mask)) for xs in (halves, values))
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    if case.name.startswith("jaxseg.losses."):  # the first argument is the logits

        def total(logits, rest):
            return jnp.sum(_call(case, (logits, *rest), mask))

        gradient = jax.grad(total)(halves[0], halves[1:])
        assert gradient.dtype == jnp.dtype(half)
        np.testing.assert_array_equal(gradient, jax.grad(total)(values[0], values[1:]).astype(half))


def _raises_naming(case: Case, args, mask, name):
    with pytest.raises((ValueError, TypeError), match=name):
        _call(case, args, mask)


def test_bad_input_errors_name_the_argument(index):
    case = CASES[index]
    rng = np.random.default_rng(0)
    args = case.make_args(rng, (), T)
    mask = np.ones(T, bool) if case.takes_mask else None
    for i, name in enumerate(case.arg_names):
        bad = list(args)
        if case.core_ndims[i] >= 1:  # one dimension too few
            bad[i] = np.asarray(args[i])[0]
            _raises_naming(case, bad, mask, name)
        if name in case.integer_args:  # floats where integers are required
            bad[i] = np.asarray(args[i], np.float32)
            _raises_naming(case, bad, mask, name)
    time_args = [i for i, a in enumerate(case.time_axes) if a is not None]
    if len(time_args) >= 2:  # mismatched number of frames
        i = time_args[-1]
        bad = list(args)
        bad[i] = np.concatenate(
            [args[i], np.take(args[i], [0], axis=case.time_axes[i])], axis=case.time_axes[i]
        )
        _raises_naming(case, bad, mask, case.arg_names[i])
    if case.takes_mask:
        _raises_naming(case, args, np.ones(T + 1, bool), "mask")
        _raises_naming(case, args, np.ones(T, np.int32), "mask")


def _public_callables():
    names = []
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        public = getattr(module, "__all__", [n for n in dir(module) if not n.startswith("_")])
        for name in public:
            obj = getattr(module, name)
            if inspect.isclass(obj) or inspect.ismodule(obj) or not callable(obj):
                continue  # NamedTuples and other classes are not functions
            names.append(f"{module_name}.{name}")
    return names


def test_every_public_function_has_a_contract_case():
    covered = {c.name for c in CASES} | EXEMPT
    missing = sorted(set(_public_callables()) - covered)
    assert not missing, f"public functions without a Case in tests/_contract*.py: {missing}"
    unknown = sorted({c.name for c in CASES} - set(_public_callables()))
    assert not unknown, f"contract cases for names that are not public: {unknown}"
