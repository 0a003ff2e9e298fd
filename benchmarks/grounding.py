"""Benchmark: grounding (10,000 queries) and ActivityNet-sized proposals against numpy baselines.

Baselines are written here in the style of the reference scripts (not copied): per query,
Ego4D NLQ's ``compute_IoU`` + recall loop, Moment-DETR's ``compute_mr_r1``,
``compute_average_precision_detection`` (Python loops over predictions, thresholds and
targets) and ``get_ap`` (scikit-learn's precision-recall curve); per video, ActivityNet's
``average_recall_vs_avg_nr_proposals`` (a dict instead of pandas' groupby, which only makes the
baseline faster). jaxseg: one jitted function over padded arrays already on the device
(compile excluded, best of ``--repeats``). Each round times both back to back; the printed
speed-up is the median of the rounds' ratios, after a check that both agree.

    python benchmarks/grounding.py              # the issue's sizes
    python benchmarks/grounding.py --quick      # small sizes, smoke test
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np
from _data import machine_summary

from jaxseg import metrics as M

MR_THRESHOLDS = (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)
AN_THRESHOLDS = np.linspace(0.5, 0.95, 10)


def best_time(fn, repeats):
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - start)
    return best, out


# ------------------------------------------------------------------------------ data
def grounding_data(num_queries, seed=0):
    """QVHighlights-like: 150 s videos (75 clips), 1-3 target windows, 10 scored predictions."""
    rng = np.random.default_rng(seed)
    num_gt = rng.integers(1, 4, num_queries)
    start = rng.integers(0, 60, (num_queries, 3)) * 2.0
    gt = np.stack([start, start + rng.integers(1, 20, (num_queries, 3)) * 2.0], -1)
    gm = np.arange(3)[None] < num_gt[:, None]
    centre = gt[:, :1, :].mean(-1) + rng.normal(0, 8, (num_queries, 10))
    half = np.abs(rng.normal(10, 6, (num_queries, 10))) + 0.5
    pred = np.clip(np.stack([centre - half, centre + half], -1), 0, 150)
    scores = np.round(rng.random((num_queries, 10)), 4)
    saliency = rng.integers(0, 5, (num_queries, 75, 3)).astype(np.int32)
    pred_saliency = np.round(rng.random((num_queries, 75)), 4)
    return _float32(gt), gm, _float32(pred), _float32(scores), saliency, _float32(pred_saliency)


def _float32(x):
    """The float32 values both sides compute on (the baseline in float64)."""
    return x.astype(np.float32).astype(np.float64)


def proposal_data(num_videos, proposals, instances, seed=0):
    """ActivityNet-1.3-val-sized: every video 1+ targets (``instances`` in all), 100 proposals."""
    rng = np.random.default_rng(seed)
    counts = 1 + rng.multinomial(instances - num_videos, np.ones(num_videos) / num_videos)
    width = int(counts.max())
    duration = rng.uniform(30, 240, (num_videos, 1))
    start = rng.uniform(0, 0.7, (num_videos, width)) * duration
    gt = np.stack([start, start + rng.uniform(0.05, 0.3, (num_videos, width)) * duration], -1)
    gm = np.arange(width)[None] < counts[:, None]
    ps = rng.uniform(0, 0.8, (num_videos, proposals)) * duration
    props = np.stack([ps, ps + rng.uniform(0.02, 0.5, (num_videos, proposals)) * duration], -1)
    return _float32(gt), gm, _float32(props), _float32(rng.random((num_videos, proposals)))


# ------------------------------------------------------------------------------ baselines
def _iou_hull(pred, gt):  # Ego4D compute_IoU style: [P, 2] x [G, 2]
    inter = np.maximum(
        0.0,
        np.minimum(pred[:, 1, None], gt[None, :, 1]) - np.maximum(pred[:, 0, None], gt[None, :, 0]),
    )
    union = np.maximum(
        0.0,
        np.maximum(pred[:, 1, None], gt[None, :, 1]) - np.minimum(pred[:, 0, None], gt[None, :, 0]),
    )
    return inter / union


def _iou_cross(a, b):  # Moment-DETR compute_temporal_iou_batch_cross style
    inter = np.clip(
        np.minimum(a[:, None, 1], b[None, :, 1]) - np.maximum(a[:, None, 0], b[None, :, 0]), 0, None
    )
    return inter / ((a[:, 1] - a[:, 0])[:, None] + (b[:, 1] - b[:, 0])[None, :] - inter)


def _detection_ap(gts, preds, thresholds):  # compute_average_precision_detection style
    order = sorted(range(len(preds)), key=lambda i: -preds[i][2])
    preds = [preds[i] for i in order]
    tp = np.zeros((len(thresholds), len(preds)))
    fp = np.zeros((len(thresholds), len(preds)))
    lock = np.full((len(thresholds), len(gts)), -1)
    for idx, p in enumerate(preds):
        iou = _iou_cross(np.array([p[:2]]), np.array(gts))[0]
        ranked = iou.argsort()[::-1]
        for t_idx, thr in enumerate(thresholds):
            for j in ranked:
                if iou[j] < thr:
                    fp[t_idx, idx] = 1
                    break
                if lock[t_idx, j] >= 0:
                    continue
                tp[t_idx, idx] = 1
                lock[t_idx, j] = idx
                break
            if fp[t_idx, idx] == 0 and tp[t_idx, idx] == 0:
                fp[t_idx, idx] = 1
    tp_c, fp_c = np.cumsum(tp, axis=1), np.cumsum(fp, axis=1)
    recall, precision = tp_c / len(gts), tp_c / (tp_c + fp_c)
    out = []
    for t in range(len(thresholds)):
        mp = np.hstack([[0], precision[t], [0]])
        mr = np.hstack([[0], recall[t], [1]])
        for i in range(len(mp) - 1)[::-1]:
            mp[i] = max(mp[i], mp[i + 1])
        idx = np.where(mr[1:] != mr[:-1])[0] + 1
        out.append(np.sum((mr[idx] - mr[idx - 1]) * mp[idx]))
    return out


def _get_ap(y_true, y_score):  # Moment-DETR get_ap(interpolate=True) style
    from sklearn.metrics import precision_recall_curve

    if len(set(y_true)) == 1:
        return float(y_true[0] != 0)
    precision, recall, _ = precision_recall_curve(y_true, y_score)
    recall = recall.astype(np.float32)
    for i in range(1, len(precision)):
        precision[i] = max(precision[i - 1], precision[i])
    return float(np.mean(precision[np.where(np.diff(recall))]))


def grounding_baseline(gt, gm, pred, scores, saliency, pred_saliency):
    out = {"nlq": [], "miou": [], "r1": [], "ap": [], "hit": [], "hl_ap": []}
    for q in range(len(gt)):
        gts = gt[q][gm[q]]
        iou = _iou_hull(pred[q], gts[:1])
        out["miou"].append(np.mean(np.sort(iou[0])[-3:]))
        out["nlq"].append([[(iou > t)[:k].any() for k in (1, 5)] for t in (0.3, 0.5)])
        best = np.argmax(_iou_cross(pred[q][:1], gts)[0])
        r1 = _iou_hull(pred[q][:1], gts[best : best + 1])[0, 0]
        out["r1"].append([r1 >= t for t in MR_THRESHOLDS])
        preds = [(*pred[q][i], scores[q][i]) for i in range(10)]
        out["ap"].append(_detection_ap([tuple(g) for g in gts], preds, MR_THRESHOLDS))
        hits, aps = [], []
        for minimum in (2, 3, 4):
            binary = (saliency[q] >= minimum).astype(float)
            hits.append(binary[np.argmax(pred_saliency[q])].max())
            aps.append([_get_ap(binary[:, a], pred_saliency[q]) for a in range(3)])
        out["hit"].append(hits)
        out["hl_ap"].append(aps)
    return {k: np.mean(np.asarray(v, np.float64), axis=0) for k, v in out.items()}


def proposal_baseline(gt, gm, props, scores, max_average=100):  # eval_proposal.py style
    videos = list(range(len(gt)))
    total_props = props.shape[0] * props.shape[1]
    ratio = max_average * float(len(videos)) / total_props
    score_lst, total = [], 0
    for v in videos:
        ground = gt[v][gm[v]]
        order = scores[v].argsort()[::-1]
        p = props[v][order]
        n = min(int(p.shape[0] * ratio), p.shape[0])
        total += n
        p = p[:n]
        tt1 = np.maximum(p[None, :, 0], ground[:, None, 0])
        tt2 = np.minimum(p[None, :, 1], ground[:, None, 1])
        inter = (tt2 - tt1).clip(0)
        union = (p[None, :, 1] - p[None, :, 0]) + (ground[:, None, 1] - ground[:, None, 0]) - inter
        score_lst.append(inter / union)
    pcn = np.arange(1, 101) / 100.0 * (max_average * float(len(videos)) / total)
    matches = np.empty((len(videos), len(pcn)))
    positives = np.empty(len(videos))
    recall = np.empty((len(AN_THRESHOLDS), len(pcn)))
    for r, tiou in enumerate(AN_THRESHOLDS):
        for i, score in enumerate(score_lst):
            positives[i] = score.shape[0]
            hit = score >= tiou
            counts = np.minimum((score.shape[1] * pcn).astype(int), score.shape[1])
            for j, n in enumerate(counts):
                matches[i, j] = np.count_nonzero(hit[:, :n].sum(axis=1))
        recall[r] = matches.sum(axis=0) / positives.sum()
    average = recall.mean(axis=0)
    per_video = pcn * (float(total) / len(videos))
    return average, np.trapezoid(average, per_video) / per_video[-1]


# ------------------------------------------------------------------------------ jaxseg
@jax.jit
def grounding_jaxseg(gt, gm, pred, scores, saliency, pred_saliency):
    first = gm & (jnp.arange(gm.shape[1]) == 0)[None, :]
    out = {
        "nlq": M.grounding_recall(gt, pred, comparison="strict", target_mask=first),
        "miou": M.grounding_iou(gt, pred, target_mask=first),
        "r1": M.grounding_recall(gt, pred, k=(1,), iou_thresholds=MR_THRESHOLDS, target_mask=gm)[
            ..., 0
        ],
        "ap": M.moment_retrieval_average_precision(gt, pred, scores, target_mask=gm),
        "hit": jnp.stack(
            [M.highlight_hit_at_1(saliency, pred_saliency, min_score=m) for m in (2, 3, 4)], -1
        ),
        "hl_ap": jnp.stack(
            [
                M.highlight_average_precision(saliency, pred_saliency, min_score=m)
                for m in (2, 3, 4)
            ],
            1,
        ),
    }
    return {k: jnp.mean(v, axis=0) for k, v in out.items()}


@jax.jit
def proposals_jaxseg(gt, gm, props, scores):
    curve = M.proposal_average_recall(gt, props, scores, target_mask=gm)
    return curve.average_recall, curve.auc


# jaxseg computes IoUs in float32, the baselines in float64: an IoU within ~1e-7 of a
# threshold (about one pair in a million here) may be decided differently, which moves a mean
# over 10,000 queries by 1e-4 at most.
def _check_grounding(ours, base):
    for key in base:
        np.testing.assert_allclose(
            np.asarray(ours[key], np.float64), base[key], atol=2e-4, err_msg=key
        )


def _check_proposals(ours, base):
    np.testing.assert_allclose(np.asarray(ours[0]), base[0], atol=2e-6)
    np.testing.assert_allclose(float(ours[1]), base[1], atol=2e-6)


def rounds(name, ours, base, check, repeats, count):
    times = []
    for r in range(count):
        base_time, base_out = best_time(base, 1)
        our_time, our_out = best_time(ours, repeats)
        check(our_out, base_out)
        times.append((base_time, our_time))
        print(
            f"  {name} round {r + 1}: baseline {base_time:.3f} s, jaxseg {our_time * 1e3:.1f} ms,"
            f" x{base_time / our_time:.0f}",
            flush=True,
        )
    base_t, our_t = np.array(times).T
    ratios = base_t / our_t
    return (
        f"| {name} | {np.median(base_t):.2f} s | {np.median(our_t) * 1e3:.1f} ms | "
        f"x{np.median(ratios):.0f} [{ratios.min():.0f}-{ratios.max():.0f}] |"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    parser.add_argument("--repeats", type=int, default=5, help="jaxseg timings per round")
    parser.add_argument("--rounds", type=int, default=3, help="back-to-back rounds")
    args = parser.parse_args()
    print(machine_summary())
    queries = 500 if args.quick else 10_000
    videos, instances = (200, 300) if args.quick else (4926, 7292)
    rows = []

    data = grounding_data(queries)
    gt, gm, pred, scores, saliency, pred_saliency = data
    device = jax.device_put(
        (
            gt.astype(np.float32),
            gm,
            pred.astype(np.float32),
            scores.astype(np.float32),
            saliency,
            pred_saliency.astype(np.float32),
        )
    )
    start = time.perf_counter()
    jax.block_until_ready(grounding_jaxseg(*device))
    print(f"grounding: first call (trace + compile) {time.perf_counter() - start:.2f} s")
    name = f"grounding: NLQ R@{{1,5}} + mIoU, MR-R1, MR-mAP, HL-mAP/Hit@1 x3, {queries:,} queries"
    rows.append(
        rounds(
            name,
            lambda: grounding_jaxseg(*device),
            lambda: grounding_baseline(*data),
            _check_grounding,
            args.repeats,
            args.rounds,
        )
    )

    gt, gm, props, pscores = proposal_data(videos, 100, instances)
    device = jax.device_put(
        (gt.astype(np.float32), gm, props.astype(np.float32), pscores.astype(np.float32))
    )
    start = time.perf_counter()
    jax.block_until_ready(proposals_jaxseg(*device))
    print(f"proposals: first call (trace + compile) {time.perf_counter() - start:.2f} s")
    name = f"proposals: AR-AN + AUC, {videos:,} videos x 100, {instances:,} instances"
    rows.append(
        rounds(
            name,
            lambda: proposals_jaxseg(*device),
            lambda: proposal_baseline(gt, gm, props, pscores),
            _check_proposals,
            args.repeats,
            args.rounds,
        )
    )
    print(
        "\n| task | baseline | jaxseg | speed-up (median of rounds [min-max]) |\n|---|---|---|---|"
    )
    print("\n".join(rows))


if __name__ == "__main__":
    main()
