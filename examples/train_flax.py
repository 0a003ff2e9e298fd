"""Train a small temporal convolutional network with jaxseg losses (Flax NNX + optax).

A synthetic action-segmentation dataset is generated here: each video is a sequence of 4-10
action segments of 8 classes; every frame's feature is its class embedding plus Gaussian noise,
so a frame-wise classifier flickers and over-segments. The same network is trained with
cross-entropy (CE) alone and with jaxseg's segment-aware losses added, over several seeds, and
evaluated with jaxseg.metrics (frame accuracy, edit score, F1@{10,25,50}).

    python examples/train_flax.py            # 3 seeds, about 2-4 minutes on a 2-core CPU
    python examples/train_flax.py --quick    # 1 seed, few steps: a smoke test (< 60 s)
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

import jaxseg

NUM_CLASSES = 8
FEATURES = 16
NOISE = 2.2
MAX_SEGMENTS = 16  # capacity of target segments for the soft edit loss (videos have <= 10)
OVERLAPS = (0.1, 0.25, 0.5)

# name -> (weight of soft_edit_loss, weight of smoothing_loss)
CONFIGS = {
    "CE": (0.0, 0.0),
    "CE + 0.3 soft edit": (0.3, 0.0),
    "CE + 0.15 smoothing": (0.0, 0.15),
    "CE + both": (0.3, 0.15),
}


# ----------------------------------------------------------------------------- data


def make_dataset(rng, num_videos, min_length, max_length, embedding):
    """Padded features ``[N, T, D]``, labels ``[N, T]`` and validity masks ``[N, T]``."""
    T = max_length
    features = np.zeros((num_videos, T, FEATURES), np.float32)
    labels = np.zeros((num_videos, T), np.int32)
    mask = np.zeros((num_videos, T), bool)
    for v in range(num_videos):
        length = int(rng.integers(min_length, max_length + 1))
        num_segments = int(rng.integers(4, 11))
        classes = [int(rng.integers(NUM_CLASSES))]
        while len(classes) < num_segments:  # adjacent segments have different classes
            c = int(rng.integers(NUM_CLASSES))
            if c != classes[-1]:
                classes.append(c)
        cuts = np.sort(rng.choice(np.arange(1, length), num_segments - 1, replace=False))
        frame_labels = np.repeat(classes, np.diff(np.concatenate([[0], cuts, [length]])))
        labels[v, :length] = frame_labels
        mask[v, :length] = True
        noise = rng.normal(0.0, NOISE, (length, FEATURES))
        features[v, :length] = embedding[frame_labels] + noise
    return features, labels, mask


# ----------------------------------------------------------------------------- model


class DilatedResidual(nnx.Module):
    def __init__(self, channels, dilation, rngs):
        self.conv = nnx.Conv(
            channels, channels, kernel_size=(3,), kernel_dilation=(dilation,), rngs=rngs
        )
        self.out = nnx.Conv(channels, channels, kernel_size=(1,), rngs=rngs)

    def __call__(self, x):
        return x + self.out(jax.nn.relu(self.conv(x)))


class TCN(nnx.Module):
    """1x1 conv, three dilated residual convolutions (dilation 1, 2, 4), 1x1 classifier."""

    def __init__(self, in_features, channels, num_classes, rngs):
        self.inp = nnx.Conv(in_features, channels, kernel_size=(1,), rngs=rngs)
        self.blocks = nnx.List([DilatedResidual(channels, d, rngs) for d in (1, 2, 4)])
        self.head = nnx.Conv(channels, num_classes, kernel_size=(1,), rngs=rngs)

    def __call__(self, x):
        x = self.inp(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


# ----------------------------------------------------------------------------- training


def masked_cross_entropy(logits, labels, mask):
    per_frame = optax.losses.softmax_cross_entropy_with_integer_labels(logits, labels)
    return jnp.sum(jnp.where(mask, per_frame, 0.0)) / jnp.maximum(jnp.sum(mask), 1)


def make_loss(graphdef, edit_weight, smooth_weight, gamma=0.1):
    """The training objective: CE plus the weighted jaxseg losses, averaged over the batch."""

    def loss_fn(params, features, labels, mask):
        logits = nnx.merge(graphdef, params)(features)
        loss = masked_cross_entropy(logits, labels, mask)
        if edit_weight:
            edit = jaxseg.losses.soft_edit_loss(
                logits, labels, mask=mask, gamma=gamma, max_segments=MAX_SEGMENTS
            )
            loss = loss + edit_weight * jnp.mean(edit)
        if smooth_weight:
            smooth = jaxseg.losses.smoothing_loss(logits, mask=mask)
            loss = loss + smooth_weight * jnp.mean(smooth)
        return loss

    return loss_fn


def make_train_step(loss_fn, optimizer):
    @jax.jit
    def train_step(params, opt_state, features, labels, mask):
        loss, grads = jax.value_and_grad(loss_fn)(params, features, labels, mask)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return train_step


def init_params(seed):
    return nnx.split(TCN(FEATURES, 64, NUM_CLASSES, nnx.Rngs(seed)), nnx.Param)


def train(train_step, optimizer, seed, data, steps, batch_size):
    _, params = init_params(seed)
    opt_state = optimizer.init(params)
    features, labels, mask = data
    order_rng = np.random.default_rng(seed + 1000)
    for _ in range(steps):
        idx = order_rng.choice(len(features), batch_size, replace=False)
        params, opt_state, _ = train_step(params, opt_state, features[idx], labels[idx], mask[idx])
    return params


@jax.jit
def evaluate_predictions(labels, predictions, mask):
    """Dataset-level accuracy (pooled frames), edit (mean over videos) and F1 (pooled counts)."""
    frames = jnp.sum(mask, axis=-1)
    accuracy = jaxseg.metrics.accuracy(labels, predictions, mask=mask)
    edit = jaxseg.metrics.edit_score(labels, predictions, mask=mask)
    tp, fp, fn = (
        jnp.sum(x, axis=0)
        for x in jaxseg.metrics.segmental_counts(
            labels, predictions, mask=mask, iou_thresholds=OVERLAPS
        )
    )
    f1 = 2 * tp / jnp.maximum(2 * tp + fp + fn, 1)
    pooled_accuracy = jnp.sum(accuracy * frames) / jnp.sum(frames)
    segments = jaxseg.segments.count_segments(predictions, mask=mask)
    return pooled_accuracy, jnp.mean(edit), f1, jnp.mean(segments)


def evaluate(predict, params, data):
    features, labels, mask = data
    predictions = jnp.argmax(predict(params, features), axis=-1).astype(jnp.int32)
    return [np.asarray(x) for x in evaluate_predictions(labels, predictions, mask)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 seed, few steps (CI smoke run)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    seeds, steps, num_train, num_test, max_length = args.seeds, args.steps, 256, 64, 600
    if args.quick:
        seeds, steps, num_train, num_test, max_length = 1, 30, 48, 16, 200

    print(f"jax {jax.__version__}, optax {optax.__version__}, devices {jax.devices()}")
    start = time.perf_counter()
    rows = {name: [] for name in CONFIGS}
    graphdef, _ = init_params(0)  # the same structure for every seed: compile once per loss
    optimizer = optax.adam(3e-3)
    steps_by_config = {
        name: make_train_step(make_loss(graphdef, *weights), optimizer)
        for name, weights in CONFIGS.items()
    }
    predict = jax.jit(lambda p, x: nnx.merge(graphdef, p)(x))
    for seed in range(1, seeds + 1):
        rng = np.random.default_rng(seed)
        embedding = rng.normal(0.0, 1.0, (NUM_CLASSES, FEATURES)).astype(np.float32)
        train_data = make_dataset(rng, num_train, max_length // 2, max_length, embedding)
        test_data = make_dataset(rng, num_test, max_length // 2, max_length, embedding)
        for name in CONFIGS:
            params = train(steps_by_config[name], optimizer, seed, train_data, steps, batch_size=16)
            accuracy, edit, f1, segments = evaluate(predict, params, test_data)
            rows[name].append([100 * accuracy, 100 * edit, *(100 * f1), segments])
            print(
                f"  seed {seed} {name:<22} acc {100 * accuracy:5.1f} edit {100 * edit:5.1f} "
                f"({time.perf_counter() - start:.0f} s)",
                flush=True,
            )

    gt_segments = np.mean(jaxseg.segments.count_segments(test_data[1], mask=test_data[2]))
    print(
        f"\nTest set, mean over {seeds} seed(s) ({steps} steps each; "
        f"ground truth has {gt_segments:.1f} segments per video):"
    )
    header = ["loss", "Acc", "Edit", "F1@10", "F1@25", "F1@50", "#segs"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name, values in rows.items():
        mean = np.mean(values, axis=0)
        print(f"| {name} | " + " | ".join(f"{v:.1f}" for v in mean) + " |")
    print(f"\ntotal time {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
