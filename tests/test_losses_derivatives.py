"""Every loss under JAX's derivative transformations at its default arguments: second
derivatives (jax.hessian) agree with the plain autodiff path (backward="autodiff" at a fixed
max_segments)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxseg import losses

LABELS = np.array([[0, 0, 1, 1, 2, 2], [1, 1, 1, 0, 0, 2]], np.int32)
MASK = np.array([[1, 1, 1, 1, 0, 1], [1, 1, 1, 1, 1, 1]], bool)


def _logits():
    return np.random.default_rng(0).normal(0, 1, (2, 6, 3)).astype(np.float32)


# name: (the loss at its defaults, the same loss on the autodiff path at a fixed capacity)
_PAIRS = {
    "soft_edit_loss": (
        lambda x: losses.soft_edit_loss(x, LABELS, mask=MASK, gamma=0.3),
        lambda x: losses.soft_edit_loss(
            x, LABELS, mask=MASK, gamma=0.3, backward="autodiff", max_segments=6
        ),
    ),
    "soft_edit_loss stride": (
        lambda x: losses.soft_edit_loss(x, LABELS, mask=MASK, gamma=0.3, stride=2),
        lambda x: losses.soft_edit_loss(
            x, LABELS, mask=MASK, gamma=0.3, stride=2, backward="autodiff", max_segments=6
        ),
    ),
    "soft_levenshtein": (
        lambda x: losses.soft_levenshtein(x, LABELS[:, :4], mask=MASK),
        lambda x: losses.soft_levenshtein(x, LABELS[:, :4], mask=MASK, backward="autodiff"),
    ),
    "ctc_transcript_loss": (
        lambda x: losses.ctc_transcript_loss(x, LABELS, mask=MASK),
        lambda x: losses.ctc_transcript_loss(x, LABELS, mask=MASK, max_segments=6),
    ),
    "ctc_transcript_loss background": (
        lambda x: losses.ctc_transcript_loss(x, LABELS, mask=MASK, background=(0,)),
        lambda x: losses.ctc_transcript_loss(x, LABELS, mask=MASK, background=(0,), max_segments=6),
    ),
}


@pytest.mark.parametrize("name", sorted(_PAIRS))
def test_default_arguments_have_second_derivatives(name):
    loss, plain = _PAIRS[name]
    logits = _logits()
    hessian = np.asarray(jax.jit(jax.hessian(lambda x: jnp.sum(loss(x))))(logits))
    want = np.asarray(jax.hessian(lambda x: jnp.sum(plain(x)))(logits))
    np.testing.assert_allclose(hessian, want, rtol=1e-4, atol=1e-6)
    assert np.all(hessian[~MASK] == 0.0) and np.all(hessian[..., ~MASK, :] == 0.0)
