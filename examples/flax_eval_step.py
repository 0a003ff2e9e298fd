"""Evaluate a Flax NNX model with a jitted eval step that updates a jaxseg streaming state.

The batch is sharded over all available devices (a 1-D "data" mesh): every device computes
its rows' predictions and segment statistics, and the state -- exact additive counts -- is
reduced by XLA. The numbers are the MS-TCN dataset numbers (accuracy pooled over frames, mean
edit, F1@{10,25,50} from summed TP/FP/FN) and do not depend on the batching or sharding.

The data is synthetic: videos of 3-8 action segments of 6 classes (0 = background), every
frame's feature is its class embedding plus noise. A small 1-D conv net is trained for a few
steps with optax first, so that the metrics mean something.

    python examples/flax_eval_step.py            # 1 device (or as many as JAX sees)
    python examples/flax_eval_step.py --quick    # smoke test, a few seconds + compilation
    XLA_FLAGS=--xla_force_host_platform_device_count=8 python examples/flax_eval_step.py
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import jaxseg

NUM_CLASSES = 6
FEATURES = 8
FRAMES = 128  # padded length; videos have 48-128 valid frames
NOISE = 1.5


class TemporalConvNet(nnx.Module):
    """Two 1-D convolutions over time: features [B, T, F] -> logits [B, T, C]."""

    def __init__(self, rngs: nnx.Rngs):
        self.hidden = nnx.Conv(FEATURES, 32, kernel_size=(9,), rngs=rngs)
        self.out = nnx.Conv(32, NUM_CLASSES, kernel_size=(9,), rngs=rngs)

    def __call__(self, x):
        return self.out(nnx.relu(self.hidden(x)))


def synthetic_batch(rng, batch):
    """Padded features [B, T, F], labels [B, T] and a prefix mask [B, T]."""
    embedding = np.random.default_rng(0).normal(size=(NUM_CLASSES, FEATURES))
    labels = np.zeros((batch, FRAMES), np.int32)
    mask = np.zeros((batch, FRAMES), bool)
    for row in range(batch):
        length = int(rng.integers(48, FRAMES + 1))
        cuts = np.sort(
            rng.choice(np.arange(1, length), size=int(rng.integers(2, 8)), replace=False)
        )
        segment = np.searchsorted(cuts, np.arange(length), side="right")
        labels[row, :length] = rng.integers(0, NUM_CLASSES, size=len(cuts) + 1)[segment]
        mask[row, :length] = True
    features = embedding[labels] + NOISE * rng.normal(size=(batch, FRAMES, FEATURES))
    return features.astype(np.float32), labels, mask


def train(model, rng, steps, batch):
    optimizer = nnx.Optimizer(model, optax.adam(3e-3), wrt=nnx.Param)

    @nnx.jit
    def train_step(model, optimizer, x, y, mask):
        def loss_fn(model):
            losses = optax.softmax_cross_entropy_with_integer_labels(model(x), y)
            return jnp.sum(jnp.where(mask, losses, 0.0)) / jnp.sum(mask)

        loss, grads = nnx.value_and_grad(loss_fn)(model)
        optimizer.update(model, grads)
        return loss

    for _ in range(steps):
        loss = train_step(model, optimizer, *synthetic_batch(rng, batch))
    return float(loss)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few training steps and batches")
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    devices = jax.device_count()
    batch = 8 * devices  # rows per eval batch: a multiple of the device count
    mesh = jax.make_mesh((devices,), ("data",), axis_types=(AxisType.Auto,))
    rows = NamedSharding(mesh, P("data"))

    model = TemporalConvNet(nnx.Rngs(0))
    loss = train(model, rng, steps=30 if args.quick else 300, batch=16)
    print(f"{devices} device(s); trained, last cross-entropy {loss:.3f}")

    # A static limit, not a capacity: targets have <= 8 segments, and a video past it would be
    # counted in `overflow` with NaN scores, never truncated. No segment table is sized by it
    # (None, the predictions' default, is exact and as fast), so flickering predictions need none.
    accumulator = jaxseg.streaming.segmentation(
        num_classes=NUM_CLASSES, background=(0,), max_target_segments=8
    )

    @nnx.jit
    def eval_step(model, state, features, labels, mask):
        predictions = jnp.argmax(model(features), axis=-1)
        return accumulator.update(state, labels, predictions, mask=mask)

    state = accumulator.init()
    for _ in range(2 if args.quick else 20):
        features, labels, mask = jax.device_put(synthetic_batch(rng, batch), rows)
        state = eval_step(model, state, features, labels, mask)

    results = accumulator.compute(state)
    print(
        f"videos {int(results['videos'])}, frames {int(results['frames'])}, "
        f"overflowed videos {int(results['overflow'])}"
    )
    print(
        f"accuracy {float(results['accuracy']):.4f}  edit {float(results['edit']):.4f}  "
        f"mean class accuracy {float(results['mean_class_accuracy']):.4f}"
    )
    for tau, f1 in zip((0.1, 0.25, 0.5), results["f1"].tolist(), strict=True):
        print(f"F1@{tau:g} {f1:.4f}", end="  ")
    print()


if __name__ == "__main__":
    main()
