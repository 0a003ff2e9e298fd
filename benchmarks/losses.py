"""Speed of jaxseg's losses: forward + backward, a full training step, compile time and memory.

Every time is a ratio to a baseline measured in the same run: the loss times to
``optax.losses.softmax_cross_entropy_with_integer_labels`` on the same batch, the training steps
to the cross-entropy-only step of the example's TCN (examples/train_flax.py), 8 x 2000 frames x
48 classes. ``soft_levenshtein`` runs on 64 sequences of 200 predicted and 200 target symbols.

    python benchmarks/losses.py [--repeats 20] [--quick] [--full-length]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

import jaxseg

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import train_flax  # the example's model

B, T, C = 8, 2000, 48
MAX_SEGMENTS = 64


def machine():
    cpus = os.cpu_count()
    return (
        f"{platform.processor() or platform.machine()}, {cpus} CPUs, {platform.system()}; "
        f"python {platform.python_version()}, jax {jax.__version__}, "
        f"jaxlib {importlib.metadata.version('jaxlib')}, optax {optax.__version__}, "
        f"numpy {np.__version__}; "
        f"backend {jax.default_backend()}"
    )


def measure(fn, args, repeats):
    """(compile seconds, best run seconds, XLA temp bytes) of ``jax.jit(fn)(*args)``.

    The best of ``repeats`` runs: on a shared machine the minimum is the least noisy estimate.
    """
    jitted = jax.jit(fn)
    start = time.perf_counter()
    compiled = jitted.lower(*args).compile()
    compile_time = time.perf_counter() - start
    memory = compiled.memory_analysis()
    temp = getattr(memory, "temp_size_in_bytes", float("nan")) if memory else float("nan")
    jax.block_until_ready(compiled(*args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        times.append(time.perf_counter() - start)
    return compile_time, min(times), temp


def synthetic_batch(rng, frames=T):
    """Labels with ~20 segments per video (some background 0), padding on two videos."""
    labels = np.zeros((B, frames), np.int32)
    for b in range(B):
        cuts = np.sort(rng.choice(np.arange(1, frames), 19, replace=False))
        lengths = np.diff(np.concatenate([[0], cuts, [frames]]))
        labels[b] = np.repeat(rng.integers(0, C, 20), lengths)
    mask = np.ones((B, frames), bool)
    mask[0, frames - 300 :] = False
    mask[1, frames - 700 :] = False
    logits = rng.normal(0, 2, (B, frames, C)).astype(np.float32)
    return logits, labels, mask


def every_error_ranked(logits, labels):
    """The logits with one frame per segment predicted with probability 1 (its error is 0).

    Lovász-Softmax then ranks every error of a class present in a video (the errors after the
    last foreground error in the decreasing order, which it skips, are only those equal to 0):
    its slowest case.
    """
    starts = np.ones(labels.shape, bool)
    starts[:, 1:] = labels[:, 1:] != labels[:, :-1]
    b, t = np.nonzero(starts)
    sharp = logits.copy()
    sharp[b, t, labels[b, t]] = 100.0
    return sharp


def loss_table():
    """name -> loss(logits, labels, mask) summed over the batch."""
    L = jaxseg.losses
    return {
        "soft_edit_loss (K=64, backward=custom)": lambda x, y, m: L.soft_edit_loss(
            x, y, mask=m, background=(0,), max_segments=MAX_SEGMENTS
        ),
        "soft_edit_loss (K=64, autodiff)": lambda x, y, m: L.soft_edit_loss(
            x, y, mask=m, background=(0,), max_segments=MAX_SEGMENTS, backward="autodiff"
        ),
        "soft_edit_loss (K=32)": lambda x, y, m: L.soft_edit_loss(
            x, y, mask=m, background=(0,), max_segments=32
        ),
        "soft_edit_loss (default arguments)": lambda x, y, m: L.soft_edit_loss(
            x, y, mask=m, background=(0,)
        ),
        "soft_edit_loss (K=64, stride 4)": lambda x, y, m: L.soft_edit_loss(
            x, y, mask=m, background=(0,), max_segments=MAX_SEGMENTS, stride=4
        ),
        "smoothing_loss": lambda x, y, m: L.smoothing_loss(x, mask=m),
        "segment_start_penalty": lambda x, y, m: L.segment_start_penalty(
            x, y, mask=m, background=(0,)
        ),
        "ctc_transcript_loss (K=64)": lambda x, y, m: L.ctc_transcript_loss(
            x, y, mask=m, background=(0,), max_segments=MAX_SEGMENTS
        ),
        "ctc_transcript_loss (default arguments)": lambda x, y, m: L.ctc_transcript_loss(
            x, y, mask=m, background=(0,)
        ),
        "soft_jaccard_loss": lambda x, y, m: L.soft_jaccard_loss(x, y, mask=m),
        "soft_dice_loss": lambda x, y, m: L.soft_dice_loss(x, y, mask=m),
        "tversky_loss": lambda x, y, m: L.tversky_loss(x, y, mask=m),
        "generalized_dice_loss": lambda x, y, m: L.generalized_dice_loss(x, y, mask=m),
        "lovasz_softmax_loss": lambda x, y, m: L.lovasz_softmax_loss(x, y, mask=m),
    }


def cross_entropy(x, y, m):
    per_frame = optax.losses.softmax_cross_entropy_with_integer_labels(x, y)
    return jnp.where(m, per_frame, 0.0)


def value_and_grad(loss):
    return jax.value_and_grad(lambda x, y, m: jnp.sum(loss(x, y, m)))


def print_row(name, compile_time, run_time, base, temp):
    print(
        f"| {name} | {1e3 * run_time:.2f} | {run_time / base:.2f}x | {compile_time:.2f} | "
        f"{temp / 2**20:.1f} |"
    )


def bench_losses(repeats):
    rng = np.random.default_rng(0)
    args = synthetic_batch(rng)
    print(
        f"\n## Loss forward + backward, {B} x {T} x {C} (time, ratio to optax CE, compile s, "
        "XLA temp MiB)\n"
    )
    print("| loss | ms | ratio | compile s | temp MiB |\n|---|---|---|---|---|")
    _, base, _ = measure(value_and_grad(cross_entropy), args, repeats)
    print_row("optax softmax_cross_entropy_with_integer_labels", 0.0, base, base, 0.0)
    for name, loss in loss_table().items():
        c, r, t = measure(value_and_grad(loss), args, repeats)
        print_row(name, c, r, base, t)
    lovasz = value_and_grad(loss_table()["lovasz_softmax_loss"])
    sharp = (every_error_ranked(args[0], args[1]), *args[1:])
    c, r, t = measure(lovasz, sharp, repeats)
    print_row("lovasz_softmax_loss, every error ranked", c, r, base, t)

    n = 200
    sym_logits = rng.normal(0, 2, (64, n, C)).astype(np.float32)
    sym_labels = rng.integers(0, C, (64, n)).astype(np.int32)
    sym_mask = np.ones((64, n), bool)
    sym_args = (sym_logits, sym_labels, sym_mask)
    _, base, _ = measure(value_and_grad(cross_entropy), sym_args, repeats)
    print(f"\n64 x {n} symbols vs {n} targets, ratio to CE on [64, {n}, {C}]:\n")
    print("| loss | ms | ratio | compile s | temp MiB |\n|---|---|---|---|---|")
    for backward in ("custom", "autodiff"):
        loss = lambda x, y, m, b=backward: jaxseg.losses.soft_levenshtein(  # noqa: E731
            x, y, mask=m, backward=b
        )
        c, r, t = measure(value_and_grad(loss), sym_args, repeats)
        print_row(f"soft_levenshtein ({backward})", c, r, base, t)


def training_objectives():
    """name -> the loss added to the CE of the training step (None: CE alone)."""
    L = jaxseg.losses
    return {
        "CE only": None,
        "CE + soft_edit_loss (default arguments)": lambda z, y, m: L.soft_edit_loss(
            z, y, mask=m, background=(0,)
        ),
        "CE + soft_edit_loss (K=64)": lambda z, y, m: L.soft_edit_loss(
            z, y, mask=m, background=(0,), max_segments=MAX_SEGMENTS
        ),
        "CE + soft_edit_loss (K=64, stride 4)": lambda z, y, m: L.soft_edit_loss(
            z, y, mask=m, background=(0,), max_segments=MAX_SEGMENTS, stride=4
        ),
        "CE + soft_edit_loss (K=32)": lambda z, y, m: L.soft_edit_loss(
            z, y, mask=m, background=(0,), max_segments=32
        ),
        "CE + smoothing_loss": lambda z, y, m: L.smoothing_loss(z, mask=m),
        "CE + soft_jaccard_loss": lambda z, y, m: L.soft_jaccard_loss(z, y, mask=m),
        "CE + soft_dice_loss": lambda z, y, m: L.soft_dice_loss(z, y, mask=m),
        "CE + generalized_dice_loss": lambda z, y, m: L.generalized_dice_loss(z, y, mask=m),
        "CE + lovasz_softmax_loss": lambda z, y, m: L.lovasz_softmax_loss(z, y, mask=m),
        "CE + ctc_transcript_loss (K=64)": lambda z, y, m: L.ctc_transcript_loss(
            z, y, mask=m, background=(0,), max_segments=MAX_SEGMENTS
        ),
    }


def bench_full_length(repeats):
    """Full-length videos (Breakfast's longest, 6000 frames): the soft edit and CTC losses at
    default arguments against ``max_segments=32``, and the training step with the soft edit
    loss against CE alone."""
    frames = 6000
    args = synthetic_batch(np.random.default_rng(2), frames)
    L = jaxseg.losses
    print(f"\n## Full-length videos: losses forward + backward, {B} x {frames} x {C}\n")
    print("| loss | ms | ratio to K=32 | compile s | temp MiB |\n|---|---|---|---|---|")
    rows = {}
    for name, kwargs in (("K=32", {"max_segments": 32}), ("default arguments", {})):
        loss = lambda x, y, m, kw=kwargs: L.soft_edit_loss(  # noqa: E731
            x, y, mask=m, background=(0,), **kw
        )
        rows[name] = measure(value_and_grad(loss), args, repeats)
    per_video = jax.vmap(lambda x, y, m: L.soft_edit_loss(x, y, mask=m, background=(0,)))
    rows["default arguments, jax.vmap over videos"] = measure(
        value_and_grad(per_video), args, repeats
    )
    # A batch that needs the last capacity rung: a new label on every frame (K = T).
    alternating = np.tile(np.arange(frames, dtype=np.int32) % 2 + 1, (B, 1))
    rows["default arguments, a segment per frame (K = T)"] = measure(
        value_and_grad(per_video), (args[0], alternating, np.ones_like(args[2])), repeats
    )
    for name, (c, r, t) in rows.items():
        print_row(f"soft_edit_loss ({name})", c, r, rows["K=32"][1], t)
    ctc = {}
    for name, kwargs in (("K=32", {"max_segments": 32}), ("default arguments", {})):
        loss = lambda x, y, m, kw=kwargs: L.ctc_transcript_loss(  # noqa: E731
            x, y, mask=m, background=(0,), **kw
        )
        ctc[name] = measure(value_and_grad(loss), args, repeats)
    for name, (c, r, t) in ctc.items():
        print_row(f"ctc_transcript_loss ({name})", c, r, ctc["K=32"][1], t)
    objectives = training_objectives()
    subset = ("CE only", "CE + soft_edit_loss (default arguments)", "CE + soft_edit_loss (K=32)")
    bench_training(repeats, frames, {k: objectives[k] for k in subset})


def bench_training(repeats, frames=T, extras=None):
    from flax import nnx

    rng = np.random.default_rng(1)
    _, labels, mask = synthetic_batch(rng, frames)
    features = rng.normal(0, 1, (B, frames, train_flax.FEATURES)).astype(np.float32)
    model = train_flax.TCN(train_flax.FEATURES, 64, C, nnx.Rngs(0))
    graphdef, params = nnx.split(model, nnx.Param)
    optimizer = optax.adam(1e-3)
    opt_state = optimizer.init(params)
    extras = training_objectives() if extras is None else extras
    print(f"\n## Training step of the example TCN (64 channels) + adam, {B} x {frames} x {C}\n")
    print("(steps timed round-robin, best of the repeats: a load change hits every row alike)\n")
    print("| objective | ms | ratio to CE step | compile s | temp MiB |\n|---|---|---|---|---|")
    args = (params, opt_state, features, labels, mask)
    compiled = {}
    for name, extra in extras.items():

        def loss_fn(p, x, y, m, extra=extra):
            z = nnx.merge(graphdef, p)(x)
            loss = train_flax.masked_cross_entropy(z, y, m)
            return loss if extra is None else loss + 0.3 * jnp.mean(extra(z, y, m))

        def step(p, s, x, y, m, loss_fn=loss_fn):
            grads = jax.grad(loss_fn)(p, x, y, m)
            updates, s = optimizer.update(grads, s, p)
            return optax.apply_updates(p, updates), s

        start = time.perf_counter()
        fn = jax.jit(step).lower(*args).compile()
        compile_time = time.perf_counter() - start
        memory = fn.memory_analysis()
        temp = getattr(memory, "temp_size_in_bytes", float("nan")) if memory else float("nan")
        jax.block_until_ready(fn(*args))
        compiled[name] = (fn, compile_time, temp)
    best = dict.fromkeys(compiled, float("inf"))
    for _ in range(repeats):
        for name, (fn, _, _) in compiled.items():
            start = time.perf_counter()
            jax.block_until_ready(fn(*args))
            best[name] = min(best[name], time.perf_counter() - start)
    for name, (_, compile_time, temp) in compiled.items():
        print_row(name, compile_time, best[name], best["CE only"], temp)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="3 repeats")
    parser.add_argument("--full-length", action="store_true", help="only the 6000-frame rows")
    args = parser.parse_args()
    repeats = 3 if args.quick else args.repeats
    print(machine())
    if not args.full_length:
        bench_losses(repeats)
        bench_training(repeats)
    bench_full_length(repeats)


if __name__ == "__main__":
    main()
