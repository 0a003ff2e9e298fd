"""Every loss under JAX's derivative transformations at its default arguments: forward mode
(jax.jvp, jax.jacfwd) and second derivatives (jax.hessian) agree with reverse mode and with
the plain autodiff path (backward="autodiff" at a fixed max_segments)."""

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
def test_default_arguments_have_forward_mode_and_second_derivatives(name):
    loss, plain = _PAIRS[name]
    logits = _logits()
    tangent = np.random.default_rng(1).normal(0, 1, logits.shape).astype(np.float32)
    value, derivative = jax.jvp(loss, (logits,), (tangent,))
    np.testing.assert_allclose(value, plain(logits), rtol=1e-5)
    want = jax.jvp(plain, (logits,), (tangent,))[1]
    np.testing.assert_allclose(derivative, want, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(jax.jacfwd(loss)(logits), jax.jacrev(plain)(logits), atol=1e-5)
    hessian = np.asarray(jax.jit(jax.hessian(lambda x: jnp.sum(loss(x))))(logits))
    want = np.asarray(jax.hessian(lambda x: jnp.sum(plain(x)))(logits))
    np.testing.assert_allclose(hessian, want, rtol=1e-4, atol=1e-6)
    assert np.all(hessian[~MASK] == 0.0) and np.all(hessian[..., ~MASK, :] == 0.0)


def test_soft_edit_temperature_derivative_in_forward_mode():
    """d loss / d gamma from jax.jvp (SOFT_LOSSES.md: the Gibbs expected cost R - gamma dR/dgamma)
    equals the autodiff path's and reverse mode's."""
    logits = _logits()

    def at(gamma, backward, max_segments=None):
        return losses.soft_edit_loss(
            logits, LABELS, mask=MASK, gamma=gamma, backward=backward, max_segments=max_segments
        )

    gamma = jnp.float32(0.3)
    forward = jax.jvp(lambda g: at(g, "custom"), (gamma,), (jnp.float32(1.0),))[1]
    plain = jax.jvp(lambda g: at(g, "autodiff", 6), (gamma,), (jnp.float32(1.0),))[1]
    reverse = jax.jacrev(lambda g: at(g, "custom"))(gamma)
    np.testing.assert_allclose(forward, plain, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(forward, reverse, rtol=1e-4, atol=1e-6)
    assert np.all(np.asarray(forward) != 0.0)
