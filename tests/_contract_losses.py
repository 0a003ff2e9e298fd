"""Contract cases of the losses (see _contract.py): every public function of jaxseg.losses."""

from __future__ import annotations

import numpy as np
from _contract import Case

from jaxseg import losses as L

C, SYMBOLS = 4, 6
_LOGIT_ARGS = ("logits", "labels")


def _logits_labels(rng, lead, T):
    """Logits ``[..., T, C]`` and labels ``[..., T]`` with runs (so segments are longer than 1)."""
    labels = rng.integers(0, C, (*lead, T))
    labels = np.where(rng.random((*lead, T)) < 0.5, np.roll(labels, 1, axis=-1), labels)
    return rng.normal(0, 2, (*lead, T, C)).astype(np.float32), labels.astype(np.int32)


def _logits(rng, lead, T):
    return (_logits_labels(rng, lead, T)[0],)


def _symbols(rng, lead, T):
    """Predicted symbol logits ``[..., T, C]`` and a target transcript ``[..., SYMBOLS]``."""
    return (
        rng.normal(0, 2, (*lead, T, C)).astype(np.float32),
        rng.integers(0, C, (*lead, SYMBOLS)).astype(np.int32),
    )


def _intervals(rng, lead, T):
    def make():
        start = rng.uniform(0, 10, (*lead, T))
        return np.stack([start, start + rng.uniform(0, 5, (*lead, T))], -1).astype(np.float32)

    return make(), make()


def _loss(name, fn, **kwargs):
    return Case(
        f"jaxseg.losses.{name}",
        fn,
        _logits_labels,
        _LOGIT_ARGS,
        (2, 1),
        (-2, -1),
        kwargs,
        integer_args=("labels",),
        tolerance=1e-5,
    )


def _interval_loss(name, fn):
    return Case(
        f"jaxseg.losses.{name}",
        fn,
        _intervals,
        ("predictions", "targets"),
        (1, 1),
        (None, None),
        takes_mask=False,
        integer_args=(),
        tolerance=1e-5,
    )


CASES = [
    _loss("soft_edit_loss", L.soft_edit_loss, background=(0,), gamma=0.1),
    _loss(
        "soft_edit_loss", L.soft_edit_loss, normalize="max", max_segments=10, backward="autodiff"
    ),
    Case(
        "jaxseg.losses.soft_levenshtein",
        L.soft_levenshtein,
        _symbols,
        _LOGIT_ARGS,
        (2, 1),
        (-2, None),
        dict(gamma=0.3),
        integer_args=("labels",),
        tolerance=1e-5,
    ),
    _loss("soft_jaccard_loss", L.soft_jaccard_loss),
    _loss("soft_dice_loss", L.soft_dice_loss, form="squared", smooth=1.0, classes="all"),
    _loss("tversky_loss", L.tversky_loss, alpha=0.3, beta=0.7),
    _loss("generalized_dice_loss", L.generalized_dice_loss),
    _loss("lovasz_softmax_loss", L.lovasz_softmax_loss),
    Case(
        "jaxseg.losses.smoothing_loss",
        L.smoothing_loss,
        _logits,
        ("logits",),
        (2,),
        (-2,),
        dict(threshold=2.0),
        integer_args=(),
        tolerance=1e-5,
    ),
    _loss("segment_start_penalty", L.segment_start_penalty, background=(0,)),
    _loss("ctc_transcript_loss", L.ctc_transcript_loss, background=(0,)),
    _interval_loss("temporal_iou_loss", L.temporal_iou_loss),
    _interval_loss("temporal_giou_loss", L.temporal_giou_loss),
    _interval_loss("temporal_diou_loss", L.temporal_diou_loss),
]
