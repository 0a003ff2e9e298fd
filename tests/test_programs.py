"""one_program: eager calls run as one compiled program; traced calls join the caller's."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _jaxprs import compilations

from jaxseg import losses as L
from jaxseg import metrics as M
from jaxseg import segments as SEG
from jaxseg import stats as ST
from jaxseg import streaming as S
from jaxseg._src.programs import one_program


def _nested_jit_names(closed_jaxpr) -> list[str]:
    return [e.params["name"] for e in closed_jaxpr.jaxpr.eqns if e.primitive.name == "pjit"]


def test_a_traced_call_runs_the_function_itself():
    calls = []

    def total(x, *, scale=1):
        calls.append(type(x))
        return scale * jnp.sum(x)

    wrapped = one_program(total)
    jaxpr = jax.make_jaxpr(lambda x: wrapped(x, scale=3))(jnp.arange(4))
    assert "_program" not in _nested_jit_names(jaxpr)
    assert int(jax.jit(lambda x: wrapped(x, scale=3))(jnp.arange(4))) == 18
    assert int(jax.grad(lambda x: wrapped(x, scale=3))(1.0)) == 3


def test_an_eager_call_traces_once_per_shape_and_static_value():
    traces = []

    def total(x, *, scale=1):
        traces.append((x.shape, scale))
        return scale * jnp.sum(x)

    wrapped = one_program(total)
    results = [
        int(wrapped(np.arange(4), scale=2)),
        int(wrapped(np.arange(4) + 1, scale=2)),  # new values: no new trace
        int(wrapped([1, 2], scale=2)),  # a list for a positional argument is an array
        int(wrapped(np.arange(4), scale=3)),
    ]
    assert results == [12, 20, 6, 18]
    assert traces == [((4,), 2), ((2,), 2), ((4,), 3)]


def test_a_list_is_an_array_or_the_tuple_its_option_takes():
    """A list given for a keyword array (a mask) is an array of the program, like one given
    for a positional argument; it was static and unhashable, so the call ran the function
    operation by operation, one small program per operation. A list or an array given for
    an option whose default is a tuple is the tuple of its items (as an array it was traced
    where the function needs its values, ``iou_thresholds=np.linspace(...)``)."""
    traces = []

    def total(x, *, mask=None, scales=(1,)):
        traces.append((type(mask), scales))
        return sum(scales) * jnp.sum(jnp.where(mask, x, 0))

    wrapped = one_program(total)
    results = [
        int(wrapped(np.arange(4), mask=[True, False, True, True], scales=[2, 3])),
        int(wrapped(np.arange(4), mask=[False, True, True, True], scales=(2, 3))),
        int(wrapped(np.arange(4), mask=np.ones(4, bool), scales=np.array([2, 3]))),
    ]
    assert results == [25, 30, 30]
    assert len(traces) == 1 and traces[0][1] == (2, 3)  # one program for all three calls
    rng = np.random.default_rng(0)
    targets, mask = rng.random((3, 20)) < 0.5, rng.random((3, 20)) < 0.8
    scores = rng.random((3, 20)).astype(np.float32)
    want = M.average_precision(targets, scores, mask=mask)
    with compilations() as first:
        got = M.average_precision(targets, scores, mask=mask.tolist())
    with compilations() as again:
        M.average_precision(targets, scores, mask=(~mask).tolist())
    np.testing.assert_array_equal(got, want)
    assert (len(first), len(again)) == (0, 0), (first, again)  # the array call's program
    boxes = np.sort(rng.random((2, 2, 3, 2)), axis=-1)
    labels, scores = rng.integers(0, 2, (2, 2, 3)), rng.random((2, 3))
    detections = (boxes[0], labels[0], boxes[1], labels[1], scores)
    thresholds = np.linspace(0.5, 0.95, 10)
    want = M.detection_average_precision(
        *detections, num_classes=2, iou_thresholds=tuple(thresholds.tolist())
    )
    with compilations() as compiled:
        got = M.detection_average_precision(*detections, num_classes=2, iou_thresholds=thresholds)
    assert compiled == [] and got.mean.shape == (10,)
    np.testing.assert_array_equal(got.mean, want.mean)


def test_a_deprecated_name_runs_the_program_of_the_new_one():
    """Old names are renamed before the program, which binds the new ones only: an old
    detection name ran ``detection_average_precision`` and the streaming ``update``
    operation by operation."""
    rng = np.random.default_rng(0)
    boxes = [np.sort(rng.random((2, n, 2)), axis=-1) for n in (3, 4)]
    target_labels, predicted_labels = rng.integers(0, 2, (2, 3)), rng.integers(0, 2, (2, 4))
    scores, frames = rng.random((2, 4)), rng.integers(0, 3, (2, 12))
    new = (boxes[0], target_labels, boxes[1], predicted_labels, scores)
    old = dict(zip(("gt_boxes", "gt_labels", "pred_boxes", "pred_labels", "pred_scores"), new))
    predicted = {name: old[name] for name in ("pred_boxes", "pred_labels", "pred_scores")}
    accumulator = S.detection(num_classes=2, iou_thresholds=(0.5,), capacity=8)
    calls = {
        "detection_average_precision": (
            lambda: M.detection_average_precision(*new, num_classes=2).per_class,
            lambda: M.detection_average_precision(**old, num_classes=2).per_class,
        ),
        "streaming.detection update": (
            lambda: accumulator.update(accumulator.init(), *new),
            lambda: accumulator.update(accumulator.init(), *new[:2], **predicted),
        ),
        "segmental_f1": (
            lambda: M.segmental_f1(frames, frames[::-1], iou_thresholds=(0.5,)),
            lambda: M.segmental_f1(frames, frames[::-1], overlaps=(0.5,)),
        ),
    }
    for name, (with_new, with_old) in calls.items():
        want = with_new()
        with compilations() as compiled, pytest.warns(DeprecationWarning):
            got = with_old()
        assert compiled == [], (name, compiled)
        for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
            np.testing.assert_array_equal(a, b)


def test_every_public_function_renames_before_its_program():
    """A function with deprecated names renames them first (``renamed_arguments`` outermost):
    under ``one_program`` an old name binds no parameter and the call runs eagerly."""
    functions = {name: getattr(m, name) for m in (M, L, ST, SEG) for name in m.__all__}
    renaming = {name for name, f in functions.items() if getattr(f, "renames", None)}
    assert {"detection_average_precision", "segmental_f1", "bootstrap"} <= renaming
    for name in renaming:
        assert functions[name].__code__.co_name == "renamed", name


def test_static_values_of_other_types_are_other_programs():
    """``5`` and ``5.0`` (a value a check refuses) get programs of their own, and a numpy
    scalar option is taken as the Python number it holds: after a tuple, jit compared
    ``np.float64(0.5) == (0.1, 0.5)``, an array, and raised."""
    seen = []

    def scaled(x, *, scale=1):
        seen.append(type(scale))
        if not isinstance(scale, int):
            raise TypeError(f"scale must be an int, got {scale!r}")
        return scale * jnp.sum(x)

    wrapped = one_program(scaled)
    assert int(wrapped(np.arange(3), scale=5)) == 15
    with pytest.raises(TypeError, match=r"got 5\.0"):
        wrapped(np.arange(3), scale=5.0)
    assert int(wrapped(np.arange(3), scale=np.int64(5))) == 15  # the int program again
    assert seen == [int, float]  # one trace each: the int program served np.int64(5)
    y = np.array([1, 1, 2, 2])
    M.segmental_f1(y, y, iou_thresholds=(0.1, 0.5))
    for threshold in np.array([0.1, 0.5]):
        assert M.segmental_f1(y, y, iou_thresholds=threshold).tolist() == [1.0]


def test_calls_the_program_cannot_take_run_as_they_are():
    wrapped = one_program(lambda x, n: jnp.zeros(int(n)) + x)
    # int() of a traced array: JAX refuses it while tracing, the call runs eagerly
    np.testing.assert_array_equal(wrapped(np.float32(1.0), np.array(3)), np.ones(3))
    options = one_program(lambda x, *, weights: x * weights["a"])
    assert float(options(np.float32(2.0), weights={"a": 3.0})) == 6.0  # unhashable: eager


def test_host_integers_beyond_int32_raise_naming_the_argument():
    """Any integer argument, not only labels: a frame window is not called a label."""
    wrapped = one_program(lambda targets, windows: targets + windows)
    with pytest.raises(ValueError, match="targets holds value 1099511627776, outside the int32"):
        wrapped(np.array([2**40], np.int64), np.array([0]))
    with pytest.raises(ValueError, match=r"windows holds value -1099511627776.* within int32"):
        wrapped(np.array([0]), np.array([-(2**40)], np.int64))
    assert wrapped(np.array([7], np.int64), np.array([0])).dtype == jnp.int32


def test_host_integers_past_64_bits_raise_naming_the_argument():
    """A list holding 2**70 becomes a numpy object array, which JAX refused in an error
    about "_program" and an "abstract array" that named no argument of the metric."""
    for call in (lambda x: SEG.to_segments(x), lambda x: M.accuracy([1, 2], x)):
        with pytest.raises(TypeError, match=r"^(labels|predictions) holds values numpy keeps"):
            call([2**70, 1])


def test_a_public_metric_keeps_its_name_signature_and_deprecated_names():
    assert M.segmental_counts.__name__ == "segmental_counts"
    assert "iou_thresholds" in M.segmental_counts.__doc__
    targets, predictions = [1, 1, 1, 1, 2, 2], [1, 1, 3, 3, 2, 2]
    with pytest.warns(DeprecationWarning, match="overlaps"):
        old = M.segmental_counts(targets, predictions, overlaps=(0.5,))
    new = M.segmental_counts(targets, predictions, iou_thresholds=(0.5,))
    np.testing.assert_array_equal(old, new)


def test_the_host_check_sees_every_argument_of_a_program_call_and_only_those():
    seen = []

    def total(x, *, scale=1, offset=0):
        return scale * jnp.sum(x) + offset

    wrapped = one_program(total, host_check=seen.append)
    assert int(wrapped(np.arange(3), scale=2)) == 6
    assert [sorted(a) for a in seen] == [["offset", "scale", "x"]]
    assert (seen[0]["scale"], seen[0]["offset"]) == (2, 0)
    np.testing.assert_array_equal(seen[0]["x"], np.arange(3))
    assert int(jax.jit(wrapped)(np.arange(3))) == 3  # traced: the function's own checks
    assert len(seen) == 1


def test_a_loss_called_eagerly_raises_on_a_label_outside_the_classes():
    from jaxseg import losses

    logits = np.zeros((2, 5, 3), np.float32)
    labels = np.array([[0, 1, 2, 1, 0], [0, 1, 7, 1, 0]], np.int32)
    with pytest.raises(ValueError, match=r"labels\[1, 2\] = 7 lies outside \[0, 3\)"):
        losses.soft_dice_loss(logits, labels)
    mask = np.arange(5) != 2
    assert losses.soft_dice_loss(logits, labels, mask=np.broadcast_to(mask, (2, 5))).shape == (2,)
    with pytest.raises(ValueError, match=r"labels\[1, 2\] = 7"):
        losses.soft_levenshtein(logits, labels)
    short = losses.soft_levenshtein(logits, labels, label_mask=np.broadcast_to(mask, (2, 5)))
    assert np.all(np.isfinite(short))
    traced = jax.jit(losses.soft_dice_loss)(logits, labels)  # traced labels: NaN, no error
    assert np.isnan(traced[1]) and np.isfinite(traced[0])


@pytest.mark.parametrize(
    "fn",
    [
        lambda y: M.accuracy(y, y[::-1]),
        lambda y: M.edit_score(y, y[::-1]),
        lambda y: M.segmental_f1(y, y[::-1]),
        lambda y: M.confusion_matrix(y, y[::-1], num_classes=3),
        lambda y: SEG.to_segments(y).count,
        lambda y: L.soft_edit_loss(jnp.eye(3)[jnp.asarray(y)], y),
        lambda y: L.ctc_transcript_loss(jnp.eye(3)[jnp.asarray(y)], y),
    ],
    ids=[
        "accuracy",
        "edit_score",
        "segmental_f1",
        "confusion_matrix",
        "to_segments",
        "soft_edit_loss",
        "ctc_transcript_loss",
    ],
)
def test_a_list_of_traced_labels_is_labels(fn):
    """Under ``jax.jit`` a Python list of labels is a list of traced scalars: the checks of
    host labels leave it alone (nothing of it is on the host) rather than fail to convert
    it, and it gives the numbers of the list outside ``jax.jit``."""
    labels = [0, 0, 1, 2, 2, 2, 1]
    jitted = jax.jit(lambda *y: fn(list(y)))(*labels)
    np.testing.assert_array_equal(jitted, fn(labels))
