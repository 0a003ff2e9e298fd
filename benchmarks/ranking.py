"""Benchmark: ranking, detection, top-k and dense metrics against baselines in the same run.

Each row times the jitted jaxseg function (inputs already on the device, compile excluded,
best of ``--repeats``) and a baseline on the same data, checks that both give the same
numbers, and prints the ratio baseline / jaxseg.

    python benchmarks/ranking.py            # full sizes (the issue's)
    python benchmarks/ranking.py --quick    # small sizes, smoke test
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import jax
import numpy as np

from jaxseg import metrics as M
from jaxseg._src.cli_detection import _online_scores


def best_time(fn, repeats):
    best = float("inf")
    out = None
    for _ in range(repeats):
        start = time.perf_counter()
        out = jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - start)
    return best, out


# ---------------------------------------------------------------------------- baselines
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
def bench_frames(n, c, repeats):
    from sklearn.metrics import average_precision_score

    targets, scores = frames_data(n, c)
    t_dev, s_dev = jax.device_put(targets), jax.device_put(scores)
    map_fn = jax.jit(lambda t, s: M.mean_average_precision(t, s).per_class)
    cap_fn = jax.jit(lambda t, s: M.calibrated_average_precision(t, s).per_class)
    both_fn = jax.jit(  # what `jaxseg detection --online` runs: one ranking serves both
        lambda t, s: _online_scores(t, s, None, background=(), ambiguous=())
    )
    map_fn(t_dev, s_dev).block_until_ready()
    cap_fn(t_dev, s_dev).block_until_ready()
    jax.block_until_ready(both_fn(t_dev, s_dev))
    t_map, ours_map = best_time(lambda: map_fn(t_dev, s_dev), repeats)
    t_cap, ours_cap = best_time(lambda: cap_fn(t_dev, s_dev), repeats)
    t_both, (ours_both_map, ours_both_cap) = best_time(lambda: both_fn(t_dev, s_dev), repeats)
    base_repeats = max(1, repeats // 2)
    b_map, base_map = best_time(
        lambda: np.array([average_precision_score(targets[:, k], scores[:, k]) for k in range(c)]),
        base_repeats,
    )
    b_cap, base_cap = best_time(
        lambda: np.array([cap_numpy(targets[:, k], scores[:, k]) for k in range(c)]), base_repeats
    )
    assert np.allclose(ours_map, base_map, atol=1e-5), np.abs(ours_map - base_map).max()
    assert np.allclose(ours_cap, base_cap, atol=1e-5), np.abs(ours_cap - base_cap).max()
    assert np.array_equal(ours_both_map.per_class, ours_map, equal_nan=True)
    assert np.array_equal(ours_both_cap.per_class, ours_cap, equal_nan=True)
    return [
        (
            f"per-frame mAP, {n} x {c}",
            "scikit-learn average_precision_score per class",
            t_map,
            b_map,
        ),
        (
            f"per-frame cAP, {n} x {c}",
            "numpy cAP per class, as LSTR (argsort + cumsum)",
            t_cap,
            b_cap,
        ),
        (
            f"per-frame mAP and cAP together, {n} x {c}",
            "the two baselines above, one after the other",
            t_both,
            b_map + b_cap,
        ),
    ]


def bench_detection(num_videos, num_classes, preds, repeats):
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
                gt_mask=f,
                pred_mask=g,
            ).mean
        )
    )
    fn(*args).block_until_ready()
    t_ours, ours = best_time(lambda: fn(*args), repeats)
    gt = {v: (gb[v][gm[v]], gl[v][gm[v]]) for v in range(num_videos)}
    flat = (
        np.repeat(np.arange(num_videos), preds),
        pb.reshape(-1, 2),
        pl.reshape(-1),
        ps.reshape(-1),
    )
    t_base, base = best_time(lambda: anet_loop(gt, flat, num_classes, thresholds), 1)
    assert np.allclose(ours, base, atol=1e-5), np.abs(ours - base).max()
    return [
        (
            f"detection mAP@0.5:0.95, {num_videos} videos x {preds} preds, {num_classes} cls",
            "Python ActivityNet loop (per class, per prediction)",
            t_ours,
            t_base,
        )
    ]


def bench_top_k(n, c, repeats):
    from sklearn.metrics import top_k_accuracy_score

    rng = np.random.default_rng(0)
    scores = rng.random((n, c)).astype(np.float32)
    labels = rng.integers(0, c, n).astype(np.int32)
    s_dev, l_dev = jax.device_put(scores), jax.device_put(labels)
    fn = jax.jit(lambda t, s: M.top_k_accuracy(t, s, k=(5,)))
    fn(l_dev, s_dev).block_until_ready()
    t_ours, ours = best_time(lambda: fn(l_dev, s_dev), repeats)
    t_base, base = best_time(
        lambda: top_k_accuracy_score(labels, scores, k=5, labels=np.arange(c)), 2
    )
    assert abs(float(ours[0]) - base) < 1e-6
    return [(f"top-5 accuracy, {n} x {c}", "scikit-learn top_k_accuracy_score", t_ours, t_base)]


def bench_miou(b, h, w, c, repeats):
    rng = np.random.default_rng(0)
    target = rng.integers(0, c, (b, h, w)).astype(np.uint8)
    target[rng.random((b, h, w)) < 0.05] = 255
    pred = np.where(rng.random((b, h, w)) < 0.7, target % 255, rng.integers(0, c, (b, h, w)))
    pred = pred.astype(np.uint8)
    t_dev, p_dev = jax.device_put(target), jax.device_put(pred)
    fn = jax.jit(lambda t, p: M.iou(t, p, num_classes=c, ignore_index=255, spatial_ndim=3).mean)
    fn(t_dev, p_dev).block_until_ready()
    t_ours, ours = best_time(lambda: fn(t_dev, p_dev), repeats)

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

    t_base, base = best_time(fast_hist, repeats)
    t_lean, lean = best_time(lean_hist, repeats)
    assert abs(float(ours) - base) < 1e-6 and abs(base - lean) < 1e-12
    return [
        (
            f"mIoU, {b} x {h} x {w}, {c} classes",
            "numpy bincount (FCN fast_hist, mask index)",
            t_ours,
            t_base,
        ),
        (
            f"mIoU, {b} x {h} x {w}, {c} classes",
            "numpy bincount (int32, no mask index)",
            t_ours,
            t_lean,
        ),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    parser.add_argument("--repeats", type=int, default=5)
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
    rows += bench_frames(2_000 if q else 200_000, 21, args.repeats)
    rows += bench_detection(50 if q else 5_000, 20 if q else 200, 100, args.repeats)
    rows += bench_top_k(4_096 if q else 262_144, 48, args.repeats)
    rows += bench_miou(2 if q else 64, 64 if q else 512, 64 if q else 512, 21, args.repeats)
    print("\n| task | baseline | jaxseg | baseline time | speed-up |\n|---|---|---|---|---|")
    for task, baseline, ours, base in rows:
        print(
            f"| {task} | {baseline} | {ours * 1e3:.1f} ms | {base * 1e3:.1f} ms | "
            f"{base / ours:.1f}x |"
        )


if __name__ == "__main__":
    main()
