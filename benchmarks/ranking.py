"""Benchmark: ranking, detection, top-k and dense metrics against baselines in the same run.

Each row times the jitted jaxseg function (inputs already on the device, compile excluded,
best of ``--repeats``) and a baseline on the same data, in ``--rounds`` back-to-back rounds,
checks that both give the same numbers, and prints the median of the rounds' ratios
baseline / jaxseg.

    python benchmarks/ranking.py            # full sizes (the issue's)
    python benchmarks/ranking.py --quick    # small sizes, smoke test
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections.abc import Callable
from typing import NamedTuple

import jax
import numpy as np

from jaxseg import metrics as M
from jaxseg._host.cli_detection import _online_scores


def best_time(fn, repeats):
    best = float("inf")
    out = None
    for _ in range(repeats):
        start = time.perf_counter()
        out = jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - start)
    return best, out


# ---------------------------------------------------------------------------- baselines
def ap_and_cap_sklearn(targets, scores):
    """AP and calibrated AP of one column from scikit-learn's precision-recall curve (tied
    scores grouped into one threshold, as jaxseg does).

    Calibrated precision (De Geest et al. 2016) with ``w = negatives / positives`` is
    ``TP w / (TP w + FP) = p w / (p w + 1 - p)`` for precision ``p``; both are summed over
    the recall steps like ``average_precision_score``.
    """
    from sklearn.metrics import precision_recall_curve

    precision, recall, _ = precision_recall_curve(targets, scores)
    ratio = (len(targets) - targets.sum()) / targets.sum()
    calibrated = ratio * precision / (ratio * precision + 1 - precision)
    steps = -np.diff(recall)
    return float(np.sum(steps * precision[:-1])), float(np.sum(steps * calibrated[:-1]))


def cap_numpy(targets, scores):
    """Calibrated AP of one column, straightforward numpy: LSTR's algorithm and its sort
    (numpy's default, unstable, which orders tied scores arbitrarily)."""
    order = np.argsort(-scores)
    hits = targets[order].astype(np.float64)
    tp, fp = np.cumsum(hits), np.cumsum(1 - hits)
    ratio = (len(hits) - hits.sum()) / hits.sum()
    cprec = tp * ratio / (tp * ratio + fp)
    return float(np.sum(cprec * hits) / hits.sum())


def anet_loop(gt, pred, num_classes, thresholds):
    """ActivityNet's per-class loop, written plainly in Python + numpy.

    ``gt``: dict video -> (segments [G, 2], labels [G]); ``pred``: (video [P], segments [P, 2],
    labels [P], scores [P]) flat arrays. Returns mAP per threshold.
    """
    videos, segments, labels, scores = pred
    aps = []
    for c in range(num_classes):
        gts = {v: s[lab == c] for v, (s, lab) in gt.items() if np.any(lab == c)}
        npos = sum(len(s) for s in gts.values())
        if npos == 0:
            continue
        idx = np.flatnonzero(labels == c)
        idx = idx[np.argsort(-scores[idx], kind="stable")]
        tp = np.zeros((len(thresholds), len(idx)))
        fp = np.zeros((len(thresholds), len(idx)))
        locked = {v: np.zeros((len(thresholds), len(s)), bool) for v, s in gts.items()}
        for i, p in enumerate(idx):
            g = gts.get(videos[p])
            if g is None:
                fp[:, i] = 1
                continue
            seg = segments[p]
            inter = np.clip(np.minimum(seg[1], g[:, 1]) - np.maximum(seg[0], g[:, 0]), 0, None)
            union = (seg[1] - seg[0]) + (g[:, 1] - g[:, 0]) - inter
            tiou = inter / union
            order = np.argsort(-tiou, kind="stable")
            for t, thr in enumerate(thresholds):
                for j in order:
                    if tiou[j] < thr:
                        break
                    if locked[videos[p]][t, j]:
                        continue
                    tp[t, i] = 1
                    locked[videos[p]][t, j] = True
                    break
                if tp[t, i] == 0:
                    fp[t, i] = 1
        row = []
        for t in range(len(thresholds)):
            ctp, cfp = np.cumsum(tp[t]), np.cumsum(fp[t])
            rec = np.concatenate([[0], ctp / npos, [1]])
            prec = np.concatenate([[0], ctp / np.maximum(ctp + cfp, 1), [0]])
            prec = np.maximum.accumulate(prec[::-1])[::-1]
            steps = np.flatnonzero(rec[1:] != rec[:-1]) + 1
            row.append(np.sum((rec[steps] - rec[steps - 1]) * prec[steps]))
        aps.append(row)
    return np.mean(aps, axis=0)


# ---------------------------------------------------------------------------- data
def frames_data(n, c, seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, c, n)
    targets = np.eye(c, dtype=np.uint8)[labels]
    scores = rng.random((n, c)).astype(np.float32) + 0.5 * targets  # a weak but real signal
    return targets, (scores / 1.5).astype(np.float32)


def detection_data(num_videos, num_classes, preds_per_video, gt_capacity, seed=0):
    rng = np.random.default_rng(seed)
    num_gt = rng.integers(1, 4, num_videos)
    duration = rng.uniform(30, 240, num_videos)
    gb = np.zeros((num_videos, gt_capacity, 2), np.float32)
    gl = np.zeros((num_videos, gt_capacity), np.int32)
    gm = np.arange(gt_capacity)[None, :] < num_gt[:, None]
    start = rng.uniform(0, 0.7, (num_videos, gt_capacity)) * duration[:, None]
    length = rng.uniform(0.05, 0.3, (num_videos, gt_capacity)) * duration[:, None]
    gb[..., 0], gb[..., 1] = start, start + length
    gl[:] = rng.integers(0, num_classes, (num_videos, gt_capacity))
    p = preds_per_video
    src = rng.integers(0, gt_capacity, (num_videos, p)) % num_gt[:, None]
    base = np.take_along_axis(gb, src[..., None], axis=1)
    jitter = rng.normal(0, 0.15, (num_videos, p, 2)) * (base[..., 1:] - base[..., :1])
    pb = np.sort(base + jitter, axis=-1).astype(np.float32)
    pl = np.where(
        rng.random((num_videos, p)) < 0.5,
        np.take_along_axis(gl, src, axis=1),
        rng.integers(0, num_classes, (num_videos, p)),
    ).astype(np.int32)
    ps = rng.random((num_videos, p)).astype(np.float32)
    pm = np.ones((num_videos, p), bool)
    return gb, gl, gm, pb, pl, ps, pm


# ---------------------------------------------------------------------------- rows
class Row(NamedTuple):
    """A timed comparison: ``ours`` and ``baseline`` are called with no arguments; ``check``
    asserts that their results agree."""

    task: str
    baseline_name: str
    ours: Callable
    baseline: Callable
    check: Callable
    baseline_repeats: int = 2


def _close(atol):
    def check(ours, base):
        assert np.allclose(ours, base, atol=atol), np.abs(np.asarray(ours) - base).max()

    return check


def bench_frames(n, c):
    from sklearn.metrics import average_precision_score

    targets, scores = frames_data(n, c)
    t_dev, s_dev = jax.device_put(targets), jax.device_put(scores)
    map_fn = jax.jit(lambda t, s: M.mean_average_precision(t, s).per_class)
    # AP written for one class's column and mapped over the classes.
    map_vmapped = jax.jit(jax.vmap(M.average_precision, in_axes=1))
    cap_fn = jax.jit(lambda t, s: M.calibrated_average_precision(t, s).per_class)
    both_fn = jax.jit(  # what `jaxseg detection --online` runs: one ranking serves both
        lambda t, s: _online_scores(t, s, None, background=(), ambiguous=())
    )
    ours_map = np.asarray(map_fn(t_dev, s_dev))
    ours_cap = np.asarray(cap_fn(t_dev, s_dev))
    ours_both_map, ours_both_cap = both_fn(t_dev, s_dev)
    assert np.array_equal(map_vmapped(t_dev, s_dev), ours_map, equal_nan=True)
    assert np.array_equal(ours_both_map.per_class, ours_map, equal_nan=True)
    assert np.array_equal(ours_both_cap.per_class, ours_cap, equal_nan=True)

    def base_map():
        return np.array([average_precision_score(targets[:, k], scores[:, k]) for k in range(c)])

    def base_cap():
        return np.array([ap_and_cap_sklearn(targets[:, k], scores[:, k])[1] for k in range(c)])

    def base_cap_lstr():
        return np.array([cap_numpy(targets[:, k], scores[:, k]) for k in range(c)])

    def base_both():
        return np.array([ap_and_cap_sklearn(targets[:, k], scores[:, k]) for k in range(c)]).T

    def check_both(ours, base):
        _close(1e-5)(ours[0].per_class, base[0])
        _close(1e-5)(ours[1].per_class, base[1])

    return [
        Row(
            f"per-frame mAP, {n} x {c}",
            "scikit-learn average_precision_score per class",
            lambda: map_fn(t_dev, s_dev),
            base_map,
            _close(1e-5),
        ),
        Row(
            f"per-frame AP, {n} x {c}, `jax.vmap` over the classes",
            "scikit-learn average_precision_score per class",
            lambda: map_vmapped(t_dev, s_dev),
            base_map,
            _close(1e-5),
        ),
        Row(
            f"per-frame cAP, {n} x {c}",
            "scikit-learn precision_recall_curve per class, calibrated",
            lambda: cap_fn(t_dev, s_dev),
            base_cap,
            _close(1e-5),
        ),
        Row(
            f"per-frame cAP, {n} x {c}",
            "numpy cAP per class, as LSTR (argsort + cumsum; ties unordered)",
            lambda: cap_fn(t_dev, s_dev),
            base_cap_lstr,
            _close(1e-5),
        ),
        Row(
            f"per-frame mAP and cAP together, {n} x {c}",
            "scikit-learn precision_recall_curve per class, both from it",
            lambda: both_fn(t_dev, s_dev),
            base_both,
            check_both,
        ),
    ]


def bench_detection(num_videos, num_classes, preds):
    thresholds = tuple(np.round(np.linspace(0.5, 0.95, 10), 2).tolist())
    gb, gl, gm, pb, pl, ps, pm = detection_data(num_videos, num_classes, preds, 4)
    args = [jax.device_put(x) for x in (gb, gl, pb, pl, ps, gm, pm)]
    fn = jax.jit(
        lambda a, b, c, d, e, f, g: (
            M.detection_average_precision(
                a,
                b,
                c,
                d,
                e,
                num_classes=num_classes,
                iou_thresholds=thresholds,
                target_mask=f,
                prediction_mask=g,
            ).mean
        )
    )
    fn(*args).block_until_ready()
    gt = {v: (gb[v][gm[v]], gl[v][gm[v]]) for v in range(num_videos)}
    flat = (
        np.repeat(np.arange(num_videos), preds),
        pb.reshape(-1, 2),
        pl.reshape(-1),
        ps.reshape(-1),
    )
    return [
        Row(
            f"detection mAP@0.5:0.95, {num_videos} videos x {preds} preds, {num_classes} cls",
            "Python ActivityNet loop (per class, per prediction)",
            lambda: fn(*args),
            lambda: anet_loop(gt, flat, num_classes, thresholds),
            _close(1e-5),
            baseline_repeats=1,
        )
    ]


def bench_top_k(n, c):
    from sklearn.metrics import top_k_accuracy_score

    rng = np.random.default_rng(0)
    scores = rng.random((n, c)).astype(np.float32)
    labels = rng.integers(0, c, n).astype(np.int32)
    s_dev, l_dev = jax.device_put(scores), jax.device_put(labels)
    fn = jax.jit(lambda t, s: M.top_k_accuracy(t, s, k=(5,)))
    fn(l_dev, s_dev).block_until_ready()
    return [
        Row(
            f"top-5 accuracy, {n} x {c}",
            "scikit-learn top_k_accuracy_score",
            lambda: fn(l_dev, s_dev)[0],
            lambda: top_k_accuracy_score(labels, scores, k=5, labels=np.arange(c)),
            _close(1e-6),
        )
    ]


def bench_miou(b, h, w, c):
    rng = np.random.default_rng(0)
    target = rng.integers(0, c, (b, h, w)).astype(np.uint8)
    target[rng.random((b, h, w)) < 0.05] = 255
    pred = np.where(rng.random((b, h, w)) < 0.7, target % 255, rng.integers(0, c, (b, h, w)))
    pred = pred.astype(np.uint8)
    t_dev, p_dev = jax.device_put(target), jax.device_put(pred)
    fn = jax.jit(lambda t, p: M.iou(t, p, num_classes=c, ignore_index=255, spatial_ndim=3).mean)
    fn(t_dev, p_dev).block_until_ready()

    def fast_hist():  # the usual FCN-style numpy code
        keep = target != 255
        hist = np.bincount(c * target[keep].astype(int) + pred[keep], minlength=c * c)
        hist = hist.reshape(c, c)
        with np.errstate(all="ignore"):
            iou = np.diag(hist) / (hist.sum(0) + hist.sum(1) - np.diag(hist))
        return np.nanmean(iou)

    def lean_hist():  # a tuned variant: int32 cells, ignored pixels sent to an extra bin
        cell = np.where(target == 255, c * c, target.astype(np.int32) * c + pred)
        hist = np.bincount(cell.ravel(), minlength=c * c + 1)[: c * c].reshape(c, c)
        with np.errstate(all="ignore"):
            iou = np.diag(hist) / (hist.sum(0) + hist.sum(1) - np.diag(hist))
        return np.nanmean(iou)

    task = f"mIoU, {b} x {h} x {w}, {c} classes"
    ours = lambda: fn(t_dev, p_dev)  # noqa: E731
    return [
        Row(task, "numpy bincount (FCN fast_hist, mask index)", ours, fast_hist, _close(1e-6), 5),
        Row(task, "numpy bincount (int32, no mask index)", ours, lean_hist, _close(1e-6), 5),
    ]


def timed_rounds(row: Row, repeats: int, rounds: int):
    """``rounds`` back-to-back rounds of jaxseg (best of ``repeats``) then the baseline (best
    of its repeats): each ratio compares times taken seconds apart, which matters on a
    machine whose speed drifts between minutes. Checks the results of the first round."""
    ours_times, base_times = [], []
    for r in range(rounds):
        ours_time, ours = best_time(row.ours, repeats)
        base_time, base = best_time(row.baseline, row.baseline_repeats)
        if r == 0:
            row.check(ours, base)
        ours_times.append(ours_time)
        base_times.append(base_time)
    return np.array(ours_times), np.array(base_times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    parser.add_argument("--repeats", type=int, default=5, help="jaxseg: best of N, per round")
    parser.add_argument("--rounds", type=int, default=3, help="jaxseg + baseline rounds")
    args = parser.parse_args()
    import sklearn

    print(
        f"machine: {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"python {platform.python_version()}, jax {jax.__version__}, numpy {np.__version__}, "
        f"scikit-learn {sklearn.__version__}, devices {jax.devices()}"
    )
    q = args.quick
    rows = []
    rows += bench_frames(2_000 if q else 200_000, 21)
    rows += bench_detection(50 if q else 5_000, 20 if q else 200, 100)
    rows += bench_top_k(4_096 if q else 262_144, 48)
    rows += bench_miou(2 if q else 64, 64 if q else 512, 64 if q else 512, 21)
    print(
        f"\n{args.rounds} rounds; times: medians over the rounds; speed-up: median of the rounds'"
        " ratios [lowest-highest]"
    )
    print("\n| task | baseline | jaxseg | baseline time | speed-up |\n|---|---|---|---|---|")
    for row in rows:
        ours, base = timed_rounds(row, args.repeats, args.rounds)
        ratios = base / ours
        print(
            f"| {row.task} | {row.baseline_name} | {np.median(ours) * 1e3:.1f} ms"
            f" | {np.median(base) * 1e3:.1f} ms | {np.median(ratios):.1f}x"
            f" [{ratios.min():.1f}-{ratios.max():.1f}] |"
        )


if __name__ == "__main__":
    main()
