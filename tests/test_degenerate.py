"""Degenerate inputs: empty axes, non-finite padding, scores that are all -inf.

An empty axis (no target window, no prediction, no video, no frame) is legal and means what
the same data padded with one masked-out entry means; the kernels take arg-maxes and
remainders over such axes, so each case is compared with its padded, masked form. Padding
holds anything, NaN and infinities included: neither a value nor a gradient may see it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxseg import losses as L
from jaxseg import metrics as M
from jaxseg import streaming as S
from jaxseg.segments import lengths_to_mask

WINDOWS = np.array([[0.0, 9.0], [20.0, 30.0]], np.float32)
SCORES = np.array([0.9, 0.8], np.float32)
NO_WINDOW = np.zeros((0, 2), np.float32)
ONE_WINDOW = np.zeros((1, 2), np.float32)
NOWHERE = np.zeros(1, bool)


def _assert_same(got, want):
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def _detection(boxes_g, labels_g, boxes_p, labels_p, scores, **masks):
    return M.detection_average_precision(
        boxes_g, labels_g, boxes_p, labels_p, scores, num_classes=2, iou_thresholds=(0.5,), **masks
    )


def _proposals(targets, proposals, scores, **masks):
    return M.proposal_average_recall(
        targets, proposals, scores, max_average_proposals=2, at=(1, 2), **masks
    ).at


GT_BOXES, GT_LABELS = np.array([[[0.0, 10.0]]]), np.array([[0]])
PRED_BOXES, PRED_LABELS, PRED_SCORES = np.array([[[0.0, 9.0]]]), np.array([[0]]), np.array([[0.9]])
VIDEOS = np.array([[[0.0, 10.0]], [[5.0, 8.0]]], np.float32)

# name: (the call with an empty axis, the same data with one masked-out entry instead)
EMPTY_AXES = {
    "grounding_recall, no target": (
        lambda: M.grounding_recall(NO_WINDOW, WINDOWS),
        lambda: M.grounding_recall(ONE_WINDOW, WINDOWS, target_mask=NOWHERE),
    ),
    "grounding_iou, no target": (
        lambda: M.grounding_iou(NO_WINDOW, WINDOWS),
        lambda: M.grounding_iou(ONE_WINDOW, WINDOWS, target_mask=NOWHERE),
    ),
    "grounding_recall, no prediction": (
        lambda: M.grounding_recall(WINDOWS, NO_WINDOW),
        lambda: M.grounding_recall(WINDOWS, ONE_WINDOW, prediction_mask=NOWHERE),
    ),
    "moment_retrieval_average_precision, no target": (
        lambda: M.moment_retrieval_average_precision(NO_WINDOW, WINDOWS, SCORES),
        lambda: M.moment_retrieval_average_precision(
            ONE_WINDOW, WINDOWS, SCORES, target_mask=NOWHERE
        ),
    ),
    "moment_retrieval_average_precision, no prediction": (
        lambda: M.moment_retrieval_average_precision(WINDOWS, NO_WINDOW, np.zeros(0)),
        lambda: M.moment_retrieval_average_precision(
            WINDOWS, ONE_WINDOW, np.zeros(1), prediction_mask=NOWHERE
        ),
    ),
    "highlight_hit_at_1, no clip": (
        lambda: M.highlight_hit_at_1(np.zeros((0, 3), np.int32), np.zeros(0)),
        lambda: M.highlight_hit_at_1(np.zeros((1, 3), np.int32), np.zeros(1), mask=NOWHERE),
    ),
    "streaming.grounding, no target": (
        lambda: _streamed(S.grounding(), NO_WINDOW[None], WINDOWS[None], SCORES[None]),
        lambda: _streamed(
            S.grounding(), ONE_WINDOW[None], WINDOWS[None], SCORES[None], target_mask=NOWHERE[None]
        ),
    ),
    "detection, no ground truth": (
        lambda: _detection(
            np.zeros((1, 0, 2)), np.zeros((1, 0), int), PRED_BOXES, PRED_LABELS, PRED_SCORES
        ),
        lambda: _detection(
            GT_BOXES, GT_LABELS, PRED_BOXES, PRED_LABELS, PRED_SCORES, target_mask=[[False]]
        ),
    ),
    "detection, no prediction": (
        lambda: _detection(
            GT_BOXES, GT_LABELS, np.zeros((1, 0, 2)), np.zeros((1, 0), int), np.zeros((1, 0))
        ),
        lambda: _detection(
            GT_BOXES, GT_LABELS, PRED_BOXES, PRED_LABELS, PRED_SCORES, prediction_mask=[[False]]
        ),
    ),
    "detection, no video": (
        lambda: _detection(
            np.zeros((0, 1, 2)),
            np.zeros((0, 1), int),
            np.zeros((0, 1, 2)),
            np.zeros((0, 1), int),
            np.zeros((0, 1)),
        ),
        lambda: _detection(
            GT_BOXES,
            GT_LABELS,
            PRED_BOXES,
            PRED_LABELS,
            PRED_SCORES,
            target_mask=[[False]],
            prediction_mask=[[False]],
        ),
    ),
    "proposal_average_recall, no proposal": (
        lambda: _proposals(VIDEOS, np.zeros((2, 0, 2)), np.zeros((2, 0))),
        lambda: _proposals(
            VIDEOS, np.zeros((2, 1, 2)), np.zeros((2, 1)), proposal_mask=np.zeros((2, 1), bool)
        ),
    ),
    "proposal_average_recall, no video": (
        lambda: _proposals(np.zeros((0, 1, 2)), np.zeros((0, 2, 2)), np.zeros((0, 2))),
        lambda: _proposals(
            VIDEOS[:1],
            np.zeros((1, 2, 2)),
            np.zeros((1, 2)),
            target_mask=[[False]],
            proposal_mask=np.zeros((1, 2), bool),
        ),
    ),
    "streaming.global_hungarian, no frame": (
        lambda: _streamed(_hungarian(), *[np.zeros((2, 0), np.int32)] * 2),
        lambda: _streamed(
            _hungarian(), *[np.zeros((2, 1), np.int32)] * 2, mask=np.zeros((2, 1), bool)
        ),
    ),
}


def _hungarian():
    return S.global_hungarian(num_classes=2, num_clusters=2)


def _streamed(accumulator, *args, **kwargs):
    return accumulator.compute(accumulator.update(accumulator.init(), *args, **kwargs))


@pytest.mark.parametrize("name", sorted(EMPTY_AXES))
def test_an_empty_axis_means_one_masked_entry(name):
    empty, masked = EMPTY_AXES[name]
    _assert_same(empty(), masked())


def test_moment_retrieval_without_predictions_scores_0_per_query_and_threshold():
    ap = M.moment_retrieval_average_precision(
        np.stack([WINDOWS] * 3), np.zeros((3, 0, 2)), np.zeros((3, 0)), iou_thresholds=(0.5, 0.7)
    )
    assert ap.tolist() == [[0.0, 0.0]] * 3  # it raised, and with one threshold lost the queries


SEQUENCE_LOSSES = [name for name in L.__all__ if not name.startswith("temporal_")]  # [..., T, C]


@pytest.mark.parametrize("name", SEQUENCE_LOSSES)
def test_a_loss_of_sequences_without_frames_is_0(name):
    loss = getattr(L, name)(jnp.zeros((2, 0, 3)), jnp.zeros((2, 0), jnp.int32))
    assert loss.tolist() == [0.0, 0.0] and not np.signbit(loss).any()  # ctc gave -0.0
    nothing = jnp.zeros((2, 4), bool)
    labels_too = {"label_mask": nothing} if name == "soft_levenshtein" else {}  # its own mask
    masked = getattr(L, name)(
        jnp.zeros((2, 4, 3)), jnp.zeros((2, 4), jnp.int32), mask=nothing, **labels_too
    )
    assert masked.tolist() == [0.0, 0.0] and not np.signbit(masked).any()


@pytest.mark.parametrize("padding", [np.nan, -np.inf, np.inf])
@pytest.mark.parametrize("name", SEQUENCE_LOSSES)
def test_non_finite_padding_reaches_no_loss_and_no_gradient(name, padding):
    logits = jax.random.normal(jax.random.key(0), (2, 6, 3))
    labels = jnp.array([[0, 1, 1, 2, 0, 0], [2, 2, 0, 1, 1, 1]])
    mask = jnp.arange(6)[None] < jnp.array([[4], [6]])
    padded = jnp.where(mask[..., None], logits, padding)

    def total(x):
        return jnp.sum(getattr(L, name)(x, labels, mask=mask))

    want_value, want_grad = jax.value_and_grad(total)(logits)
    value, grad = jax.value_and_grad(total)(padded)
    assert value == want_value
    np.testing.assert_array_equal(grad, want_grad)  # 0 on the padding, finite elsewhere
    assert not np.any(grad[0, 4:])


@pytest.mark.parametrize("padding", [np.nan, np.inf])
@pytest.mark.parametrize("name", ["temporal_iou_loss", "temporal_giou_loss", "temporal_diou_loss"])
def test_non_finite_masked_intervals_reach_no_gradient(name, padding):
    targets = jnp.array([[0.0, 1.0], [0.0, 2.0]])
    predictions = jnp.array([[0.0, 2.0], [1.0, padding]])
    mask = jnp.array([True, False])

    def total(p):
        return jnp.sum(getattr(L, name)(targets, p, mask=mask))

    grad = jax.grad(total)(predictions)
    assert np.all(np.isfinite(grad)) and not np.any(grad[1])
    assert total(predictions) == total(predictions.at[1].set(0.0))


def test_highlight_hit_with_every_valid_score_minus_infinity_reads_a_valid_clip():
    """The first maximum among valid clips, also when every valid clip scores -inf: the
    masked clip 0 must not be taken (the call on the valid clips alone gives 1)."""
    saliency = np.array([[0], [4]])
    scores = np.array([0.0, -np.inf], np.float32)
    mask = np.array([False, True])
    assert float(M.highlight_hit_at_1(saliency[1:], scores[1:])) == 1.0
    assert float(M.highlight_hit_at_1(saliency, scores, mask=mask)) == 1.0
    accumulator = S.highlight(min_scores=(2,), num_annotators=1)
    state = accumulator.update(accumulator.init(), saliency[None], scores[None], mask=mask[None])
    assert accumulator.compute(state)["hit_at_1"].tolist() == [1.0]


@pytest.mark.parametrize(
    "name, option",
    [
        ("soft_dice_loss", {"smooth": -1.0}),
        ("soft_jaccard_loss", {"smooth": -1.0}),
        ("tversky_loss", {"smooth": -1.0}),
        ("tversky_loss", {"alpha": -1.0}),
        ("tversky_loss", {"beta": -0.5}),
        ("generalized_dice_loss", {"smooth": -1.0}),
        ("smoothing_loss", {"threshold": -1.0}),
    ],
)
def test_negative_loss_constants_are_refused(name, option):
    """A negative ``smooth`` gave a Dice loss of 1.34; a negative ``threshold`` acted as +1; a
    negative Tversky ``alpha`` a loss of 2.4."""
    (key,) = option
    with pytest.raises(ValueError, match=f"{key} must be"):
        getattr(L, name)(jnp.zeros((1, 4, 3)), jnp.zeros((1, 4), jnp.int32), **option)


def test_lengths_beyond_the_padded_length_are_refused():
    """A length above T gave a row of T valid frames, silently (a traced one still does)."""
    for lengths in ([1, 5], [-1, 2]):
        with pytest.raises(ValueError, match=r"lengths must lie in \[0, T\] = \[0, 4\]"):
            lengths_to_mask(np.array(lengths), 4)
    assert lengths_to_mask(np.array([0, 4]), 4).tolist() == [[False] * 4, [True] * 4]
