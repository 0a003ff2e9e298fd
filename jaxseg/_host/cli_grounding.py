"""``jaxseg grounding`` (Ego4D NLQ JSON, QVHighlights / Moment-DETR JSONL) and the proposal
files of ``jaxseg detection --proposals`` (ActivityNet JSON).

Files are read into padded tables on the host and scored by the jaxseg metrics in float64
(``jax.enable_x64``), the arithmetic of the reference scripts, so that a tIoU equal to a
threshold is decided as they decide it.
"""

from __future__ import annotations

import argparse
import functools
import json
from pathlib import Path
from typing import NamedTuple

import numpy as np

from jaxseg._host import report as reports
from jaxseg._host.io_files import (
    InputError,
    _decode_text,
    _read_bytes,
    is_finite_number,
    parse_json,
    read_json,
    text_lines,
)
from jaxseg._host.padding import bucket, size_groups

NLQ_THRESHOLDS = (0.3, 0.5)
NLQ_TOP_K = (1, 5)
MR_THRESHOLDS = (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)
MR_PREDICTIONS = 10  # the windows MR-mAP ranks (Moment-DETR's max_pred_windows)
LENGTH_RANGES = {"short": (0, 10), "middle": (10, 30), "long": (30, 150)}
SALIENCY_MINIMA = {"Fair": 2, "Good": 3, "VeryGood": 4}


class ProposalData(NamedTuple):
    """Ground truth and proposals of each of V videos, unpadded: the subset's videos, then
    videos only in the proposal file (as the reference, their proposals count in the total
    that sets each video's budget)."""

    annotated: int  # videos of the subset with a ground-truth window
    targets: tuple[list[tuple[float, float]], ...]  # V lists of (start, end) seconds
    proposals: tuple[list[tuple[float, float, float]], ...]  # V lists of (start, end, score)


class ProposalGroup(NamedTuple):
    """Videos scored together, padded to the group's sizes (W videos, G / P slots)."""

    videos: np.ndarray  # int64 [n <= W]: indices into ProposalData's rows, increasing
    targets: np.ndarray  # float64 [W, G, 2] seconds
    target_mask: np.ndarray  # bool [W, G]
    proposals: np.ndarray  # float64 [W, P, 2]
    scores: np.ndarray  # float64 [W, P]
    proposal_mask: np.ndarray  # bool [W, P]


def add_parser(commands, add_output_arguments, add_confidence_arguments) -> None:
    """Adds the ``grounding`` subcommand to the ``jaxseg`` parser."""
    parser = commands.add_parser(
        "grounding",
        help="temporal grounding / moment retrieval: Recall@k at tIoU and mIoU (Ego4D NLQ), "
        "MR-R1, MR-mAP, HL-mAP and HL-Hit@1 (QVHighlights / Moment-DETR)",
        description="Ego4D NLQ (JSON files): Recall@k at tIoU > t (strict, as "
        "evaluate_ego4d_nlq.py) and mIoU of the top prediction, over the predicted queries. "
        "QVHighlights (JSONL files): Moment-DETR's standalone_eval numbers, MR-R1@t (IoU >= t), "
        "MR-mAP over tIoU 0.5:0.05:0.95 (full and short/middle/long windows), HL-mAP and "
        "HL-Hit@1 at minimum saliency Fair/Good/VeryGood. Recalls, mIoU and MR-mAP are computed "
        "in float64, as the scripts; HL-mAP and HL-Hit@1 in float32.",
    )
    parser.add_argument(
        "ground_truth",
        metavar="GROUND_TRUTH",
        help="Ego4D NLQ annotations JSON ({'videos': [{'clips': [{'clip_uid', 'annotations': "
        "[{'annotation_uid', 'language_queries': [{'clip_start_sec', 'clip_end_sec'}]}]}]}]}) "
        "or QVHighlights JSONL (qid, duration, relevant_windows, relevant_clip_ids, "
        "saliency_scores)",
    )
    parser.add_argument(
        "predictions",
        metavar="PREDICTIONS",
        help="Ego4D NLQ predictions JSON ({'results': [{'clip_uid', 'annotation_uid', "
        "'query_idx', 'predicted_times': [[start, end], ...]}]}) or a Moment-DETR submission "
        "JSONL (qid, pred_relevant_windows [[start, end, score], ...], pred_saliency_scores)",
    )
    parser.add_argument(
        "--thresholds",
        nargs="+",
        type=float,
        metavar="TIOU",
        help="NLQ: tIoU thresholds (default 0.3 0.5)",
    )
    parser.add_argument(
        "--top-k",
        nargs="+",
        type=int,
        metavar="K",
        help="NLQ: k of Recall@k (default 1 5)",
    )
    add_confidence_arguments(parser, "queries")
    add_output_arguments(parser)


# ------------------------------------------------------------------------------------------
# Reading
# ------------------------------------------------------------------------------------------
def load_jsonl(path: Path, what: str) -> list[tuple[int, dict]]:
    """(line number, object) of every non-blank line of a JSON Lines file."""
    rows = []
    lines = text_lines(_decode_text(path, _read_bytes(path, what), what))
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = parse_json(line)
        except json.JSONDecodeError as error:
            raise InputError(
                f"{path}:{number}: not a JSON object ({error.msg}, column {error.colno})"
            ) from None
        except ValueError as error:  # a repeated key
            raise InputError(f"{path}:{number}: {error}") from None
        if not isinstance(row, dict):
            raise InputError(f"{path}:{number}: expected a JSON object, got {type(row).__name__}")
        rows.append((number, row))
    if not rows:
        raise InputError(f"{path}: {what} holds no line")
    return rows


def window(where: str, value, *, scored: bool = False) -> tuple[float, ...]:
    """``[start, end]`` (``[start, end, score]`` when ``scored``) as floats, start <= end."""
    size = 3 if scored else 2
    ok = (
        isinstance(value, (list, tuple))
        and len(value) >= size
        and all(is_finite_number(x) for x in value[:size])
    )
    if not ok or value[1] < value[0]:
        shape = "[start, end, score]" if scored else "[start, end]"
        raise InputError(
            f"{where}: expected {shape}, finite numbers with start <= end, got {value!r}"
        )
    return tuple(float(x) for x in value[:size])


def pad(rows: list[list[tuple[float, ...]]], width: int | None = None, *, size: int = 2):
    """Lists of ``size``-tuples -> float64 ``[N, W, size]`` table and bool ``[N, W]`` mask."""
    width = max(1, max((len(r) for r in rows), default=1)) if width is None else width
    table = np.zeros((len(rows), width, size), np.float64)
    mask = np.zeros((len(rows), width), bool)
    for i, r in enumerate(rows):
        if r:
            table[i, : len(r)] = r
            mask[i, : len(r)] = True
    return table, mask


def _field(path: Path, where: str, row: dict, key: str, kind, what: str):
    if not isinstance(row, dict):
        raise InputError(f"{path}: {where}: expected an object with '{key}', got {row!r}")
    value = row.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise InputError(f"{path}: {where}: '{key}' must be {what}, got {value!r}")
    return value


def read_nlq(ground_truth: Path, predictions: Path, keep: int):
    """Ego4D NLQ annotations and predictions -> (targets [Q, 1, 2], predictions [Q, P, 2],
    mask [Q, P], number of annotated queries); one row per prediction entry, its first
    ``keep`` predictions (the largest k of Recall@k: padding every query to the longest list
    grew the memory with it), every prediction checked.

    A (clip_uid, annotation_uid) pair annotated twice is an error: the script keeps the last
    one for matching but counts the queries of both. So is a query predicted twice, which the
    script counts twice."""
    document = read_json(ground_truth, "ground-truth file")
    if not isinstance(document, dict) or not isinstance(document.get("videos"), list):
        qvhighlights = isinstance(document, dict) and "qid" in document
        hint = "; QVHighlights files are JSON Lines, read by the .jsonl suffix"
        raise InputError(
            f"{ground_truth}: an Ego4D NLQ file needs a 'videos' list{hint * qvhighlights}"
        )
    queries: dict[tuple[str, str], list] = {}
    first: dict[tuple[str, str], str] = {}  # where each pair is annotated
    for v, video in enumerate(document["videos"]):
        for c, clip in enumerate(
            _field(ground_truth, f"videos[{v}]", video, "clips", list, "a list")
        ):
            where = f"videos[{v}].clips[{c}]"
            uid = _field(ground_truth, where, clip, "clip_uid", str, "a string")
            for a, ann in enumerate(
                _field(ground_truth, where, clip, "annotations", list, "a list")
            ):
                at = f"{where}.annotations[{a}]"
                key = (uid, _field(ground_truth, at, ann, "annotation_uid", str, "a string"))
                if key in first:
                    raise InputError(
                        f"{ground_truth}: {at}: clip_uid/annotation_uid {key[0]}/{key[1]} "
                        f"appears twice (first at {first[key]})"
                    )
                first[key] = at
                rows = _field(ground_truth, at, ann, "language_queries", list, "a list")
                queries[key] = [(at + f".language_queries[{i}]", q) for i, q in enumerate(rows)]
    document = read_json(predictions, "predictions file")
    if not isinstance(document, dict) or not isinstance(document.get("results"), list):
        raise InputError(f"{predictions}: NLQ predictions need a 'results' list")
    targets, predicted = [], []
    predicted_at: dict[tuple, int] = {}  # the entry of each predicted query
    for i, entry in enumerate(document["results"]):
        where = f"{predictions}: results[{i}]"
        key = tuple(
            _field(predictions, f"results[{i}]", entry, k, str, "a string")
            for k in ("clip_uid", "annotation_uid")
        )
        index = _field(predictions, f"results[{i}]", entry, "query_idx", int, "an integer")
        if key not in queries or not 0 <= index < len(queries[key]):
            raise InputError(f"{where}: no annotated query {key[0]}/{key[1]} #{index}")
        if (*key, index) in predicted_at:
            raise InputError(
                f"{where}: query {key[0]}/{key[1]} #{index} is predicted twice (first at "
                f"results[{predicted_at[(*key, index)]}])"
            )
        predicted_at[(*key, index)] = i
        at, query = queries[key][index]
        times = ("clip_start_sec", "clip_end_sec")
        if not isinstance(query, dict) or not all(t in query for t in times):
            raise InputError(
                f"{ground_truth}: {at}: expected an object with 'clip_start_sec' and "
                f"'clip_end_sec', got {query!r}"
            )
        gt = [query[t] for t in times]
        targets.append([window(f"{ground_truth}: {at}", gt)])
        times = _field(predictions, f"results[{i}]", entry, "predicted_times", list, "a list")
        windows = [window(f"{where}.predicted_times[{j}]", w) for j, w in enumerate(times)]
        predicted.append(windows[:keep])
    if not targets:
        raise InputError(f"{predictions}: 'results' is empty")
    total = sum(len(rows) for rows in queries.values())
    return pad(targets)[0], *pad(predicted), total


def _qids(path: Path, rows, what: str) -> dict:
    out = {}
    for number, row in rows:
        qid = row.get("qid")
        if qid is None or isinstance(qid, (list, dict, bool)):
            raise InputError(f"{path}:{number}: 'qid' must be a number or string, got {qid!r}")
        if qid in out:
            raise InputError(f"{path}:{number}: {what} qid {qid!r} appears twice")
        out[qid] = (number, row)
    return out


def _num_clips(path: Path, number: int, row: dict) -> int:
    """``mk_gt_scores``' number of 2-second clips, ``int(duration / 2)``: at least one (the
    reference takes the argmax of each query's scores)."""
    duration = row.get("duration")
    if not is_finite_number(duration) or duration <= 0:
        raise InputError(
            f"{path}:{number}: 'duration' must be a finite number > 0, got {duration!r}"
        )
    if duration >= 2**32:  # no file holds that many scores; 1e300 clips were allocated
        raise InputError(f"{path}:{number}: 'duration' {duration!r} seconds is too long (< 2^32)")
    if duration < 2:
        raise InputError(
            f"{path}:{number}: 'duration' {duration!r} holds no 2-second clip for "
            "pred_saliency_scores"
        )
    return int(duration / 2)


def _saliency(path: Path, number: int, row: dict, num_clips: int) -> np.ndarray:
    """``mk_gt_scores``: ``[num_clips, 3]`` scores, 0 outside ``relevant_clip_ids``."""
    ids, scores = row.get("relevant_clip_ids", []), row.get("saliency_scores", [])
    out = np.zeros((num_clips, 3), np.int32)
    if not isinstance(ids, list) or not isinstance(scores, list) or len(ids) != len(scores):
        raise InputError(
            f"{path}:{number}: relevant_clip_ids and saliency_scores must be lists of one length"
        )
    for clip, score in zip(ids, scores, strict=True):
        if not isinstance(clip, int) or not 0 <= clip < num_clips:
            raise InputError(f"{path}:{number}: clip id {clip!r} outside the {num_clips} clips")
        if (
            not isinstance(score, list)
            or len(score) != 3
            or not all(type(s) is int and 0 <= s <= 4 for s in score)  # a JSON true is no score
        ):
            raise InputError(
                f"{path}:{number}: saliency score {score!r} is not 3 integers in 0..4 (Very Bad "
                "to Very Good)"
            )
        out[clip] = score
    return out


def _check_in_every_line(submission: Path, sub: dict, key: str, count: int) -> None:
    """Raises :class:`InputError` naming the first line (and qid) without ``key`` when some
    of the submission's ``sub`` lines (qid -> (line, entry)) have it."""
    if 0 < count < len(sub):
        line, qid = min((m, qid) for qid, (m, entry) in sub.items() if key not in entry)
        raise InputError(
            f"{submission}:{line}: qid {qid!r} has no {key}, which {count} of the "
            f"{len(sub)} lines have"
        )


def _check_same_qids(ground_truth: Path, truth: dict, submission: Path, sub: dict) -> None:
    """Raises :class:`InputError` naming the first line whose qid the other file lacks (the
    submission's first), with the qid's repr: ``2`` and ``"2"`` are different qids."""
    extra = [(m, qid) for qid, (m, _) in sub.items() if qid not in truth]
    missing = [(n, qid) for qid, (n, _) in truth.items() if qid not in sub]
    if not extra and not missing:
        return
    if extra:
        line, qid = min(extra)
        where = f"{submission}:{line}: qid {qid!r} is not in {ground_truth}"
    else:
        line, qid = min(missing)
        where = f"{ground_truth}:{line}: qid {qid!r} has no line in {submission}"
    raise InputError(
        f"{where}; qids differ in {len(extra) + len(missing)} queries, and the reference "
        "requires the same qids"
    )


def read_qvhighlights(ground_truth: Path, submission: Path) -> dict:
    """QVHighlights JSONL -> padded float64 tables (MR) and saliency tables (HL, or None).
    Each query keeps its first ``MR_PREDICTIONS`` predicted windows, all that MR-R1 and MR-mAP
    read, every window checked."""
    truth = _qids(ground_truth, load_jsonl(ground_truth, "ground-truth file"), "ground-truth")
    sub = _qids(submission, load_jsonl(submission, "submission file"), "submission")
    _check_same_qids(ground_truth, truth, submission, sub)
    qids = list(truth)
    gt, pred, scores, labels = [], [], [], []
    for qid in qids:
        (n, row), (m, entry) = truth[qid], sub[qid]
        windows = _field(ground_truth, f"line {n}", row, "relevant_windows", list, "a list")
        gt.append([window(f"{ground_truth}:{n}", w) for w in windows])
        if "pred_relevant_windows" in entry:
            # standalone_eval raises on such a query (compute_mr_r1); left out of the means,
            # it made MR-R1 and MR-mAP count fewer queries than the file has, without a word.
            if not windows:
                raise InputError(
                    f"{ground_truth}:{n}: qid {qid!r} has no relevant_windows, which MR-R1 "
                    "and MR-mAP need (one window at least)"
                )
            rows = _field(submission, f"line {m}", entry, "pred_relevant_windows", list, "a list")
            windows = [window(f"{submission}:{m}", w, scored=True) for w in rows]
            pred.append(windows[:MR_PREDICTIONS])
        if "pred_saliency_scores" in entry:
            num_clips = _num_clips(ground_truth, n, row)
            values = _field(submission, f"line {m}", entry, "pred_saliency_scores", list, "a list")
            if not all(is_finite_number(v) for v in values):
                raise InputError(f"{submission}:{m}: pred_saliency_scores must be numbers")
            # standalone_eval asserts one score per clip (get_ap); neither cut nor pad them
            if len(values) != num_clips:
                raise InputError(
                    f"{submission}:{m}: qid {qid!r}: pred_saliency_scores has {len(values)} "
                    f"scores, expected {num_clips}, one per 2-second clip of the duration "
                    f"{row['duration']!r} ({ground_truth}:{n})"
                )
            scores.append(np.array(values, np.float64))
            labels.append(_saliency(ground_truth, n, row, num_clips))
    out = {"queries": len(qids), "mr": None, "hl": None}
    if not pred and not scores:
        raise InputError(f"{submission}: no line has pred_relevant_windows or pred_saliency_scores")
    _check_in_every_line(submission, sub, "pred_relevant_windows", len(pred))
    _check_in_every_line(submission, sub, "pred_saliency_scores", len(scores))
    if pred:
        table, mask = pad(pred, size=3)
        out["mr"] = (*pad(gt), table[..., :2], table[..., 2], mask)
    if scores:
        width = max(len(s) for s in scores)
        clip_mask = np.arange(width)[None] < np.array([len(s) for s in scores])[:, None]
        y = np.zeros((len(scores), width, 3), np.int32)
        s = np.zeros((len(scores), width))
        for i, (yi, si) in enumerate(zip(labels, scores, strict=True)):
            y[i, : len(si)], s[i, : len(si)] = yi, si
        out["hl"] = (y, s, clip_mask)
    return out


# ------------------------------------------------------------------------------------------
# Scoring (float64) and reports
# ------------------------------------------------------------------------------------------
def _threshold_texts(thresholds) -> list[str]:
    """The thresholds as ``%g`` text, with more digits where six would name two alike (a JSON
    row kept one of two columns both named ``R@1 IoU>0.5``)."""
    for digits in range(6, 18):
        texts = [f"{t:.{digits}g}" for t in thresholds]
        if len(set(texts)) == len(texts):
            return texts
    return [repr(t) for t in thresholds]


def _nlq_report(args, gt, pred, mask, total) -> reports.Report:
    import jax

    from jaxseg._host.cli import mean_interval_section
    from jaxseg.metrics import grounding_iou, grounding_recall

    # Each once: a value given twice gave the table a column twice and the JSON one key.
    thresholds = tuple(dict.fromkeys(args.thresholds or NLQ_THRESHOLDS))
    ks = tuple(dict.fromkeys(args.top_k or NLQ_TOP_K))
    bad = [t for t in thresholds if not 0.0 < t <= 1.0]
    if bad:
        raise InputError(f"--thresholds must be in (0, 1], got {bad[0]}")
    # Ranks are compared in int32; a k past every query's predictions counts all of them.
    bad = [k for k in ks if not 1 <= k < 2**31]
    if bad:
        raise InputError(f"--top-k must be in 1..{2**31 - 1}, got {bad[0]}")
    with jax.enable_x64(True):
        recall = jax.jit(grounding_recall, static_argnames=("k", "iou_thresholds", "comparison"))(
            gt, pred, k=ks, iou_thresholds=thresholds, comparison="strict", prediction_mask=mask
        )
        iou = jax.jit(grounding_iou)(gt, pred, prediction_mask=mask)
    recall, iou = np.asarray(recall), np.asarray(iou)  # [Q, T, K], [Q]
    # a column per reported number, in the table's order
    per_query = np.concatenate([recall.transpose(0, 2, 1).reshape(len(gt), -1), iou[:, None]], 1)
    means = [*recall.mean(axis=0).T.reshape(-1), iou.mean()]
    columns = [f"R@{k} IoU>{t}" for k in ks for t in _threshold_texts(thresholds)]
    values = [100 * m for m in means]
    sections = [
        reports.Section("nlq", "Ego4D NLQ (%)", ("name", *columns, "mIoU"), (("NLQ", *values),))
    ]
    summary = {
        "evaluated": len(gt),
        "annotated_queries": total,
        "thresholds": list(thresholds),
        "top_k": list(ks),
        **dict(zip([*columns, "mIoU"], values, strict=True)),
    }
    if args.confidence is not None:
        kept = np.ones(per_query.shape, bool)
        section, facts = mean_interval_section(
            args, "queries", [*columns, "mIoU"], per_query, kept, values
        )
        sections.append(section)
        summary.update(facts)
    text = f"Evaluated: {len(gt)} / {total} instances (Ego4D NLQ, IoU > threshold)"
    return reports.Report(text, summary, tuple(sections))


def _mr_rows(tables):
    import jax

    from jaxseg.metrics import grounding_recall, moment_retrieval_average_precision

    gt, gm, pred, scores, pm = tables
    r1 = jax.jit(grounding_recall, static_argnames=("k", "iou_thresholds", "comparison"))
    ap = jax.jit(
        moment_retrieval_average_precision, static_argnames=("iou_thresholds", "max_predictions")
    )
    length = gt[..., 1] - gt[..., 0]
    rows, brief, columns = [], {}, []
    for name in ("full", *LENGTH_RANGES):
        mask = (
            gm
            if name == "full"
            else gm & (length > LENGTH_RANGES[name][0]) & (length <= LENGTH_RANGES[name][1])
        )
        kw = dict(target_mask=mask, prediction_mask=pm)
        hits = np.asarray(
            r1(gt, pred, k=(1,), iou_thresholds=MR_THRESHOLDS, comparison="inclusive", **kw)
        )[..., 0]
        aps = np.asarray(
            ap(gt, pred, scores, iou_thresholds=MR_THRESHOLDS, max_predictions=MR_PREDICTIONS, **kw)
        )
        kept = mask.any(axis=1)
        r, a = 100 * _mean_of_kept(hits, kept), 100 * _mean_of_kept(aps, kept)
        rows.append((name, int(kept.sum()), r[0], r[4], a[0], a[5], a.mean()))
        per_query = (hits[:, 0], hits[:, 4], aps[:, 0], aps[:, 5], aps.mean(axis=1))
        names = ("R1@0.5", "R1@0.7", "mAP@0.5", "mAP@0.75", "mAP")
        columns += [
            (f"MR-{name}-{n}", v, kept, x) for n, v, x in zip(names, per_query, rows[-1][2:])
        ]
        brief[f"MR-{name}-mAP"] = a.mean()
        if name == "full":
            brief.update(
                {
                    "MR-full-mAP@0.5": a[0],
                    "MR-full-mAP@0.75": a[5],
                    "MR-full-R1@0.5": r[0],
                    "MR-full-R1@0.7": r[4],
                }
            )
    return rows, brief, columns


def _stacked(blocks):
    """``(names, per_query, kept, reported)`` of blocks of ``(name, values [Q_b], kept [Q_b],
    reported)`` columns, each block's queries rows of their own (kept nowhere else)."""
    names = [c[0] for block in blocks for c in block]
    reported = [c[3] for block in blocks for c in block]
    sizes = [len(block[0][1]) for block in blocks]
    per_query, kept = np.zeros((sum(sizes), len(names))), np.zeros((sum(sizes), len(names)), bool)
    row, column = 0, 0
    for size, block in zip(sizes, blocks):
        for _, values, keep, _ in block:
            per_query[row : row + size, column] = values
            kept[row : row + size, column] = keep
            column += 1
        row += size
    return names, per_query, kept, reported


def _mean_of_kept(values, kept):
    """The mean of ``values [Q, ...]`` over the ``kept`` queries, NaN for none (an empty length
    range, where standalone_eval's ``eval_submission`` raises ``TypeError``)."""
    if not kept.any():
        return np.full(values.shape[1:], np.nan)
    return values[kept].mean(axis=0)


def _hl_rows(tables):
    import jax

    from jaxseg.metrics import highlight_average_precision, highlight_hit_at_1

    y, s, mask = tables
    hit = jax.jit(highlight_hit_at_1, static_argnames=("min_score",))
    ap = jax.jit(highlight_average_precision, static_argnames=("min_score",))
    rows, brief, columns = [], {}, []
    for name, minimum in SALIENCY_MINIMA.items():
        hits = np.asarray(hit(y, s, min_score=minimum, mask=mask))  # [Q]
        aps = np.asarray(ap(y, s, min_score=minimum, mask=mask))  # [Q, annotators]
        h, a = 100 * float(hits.mean()), 100 * float(aps.mean())
        rows.append((f"min {name} ({minimum})", a, h))
        brief[f"HL-min-{name}-mAP"], brief[f"HL-min-{name}-Hit1"] = a, h
        kept = np.ones(len(hits), bool)
        columns += [
            (f"HL-min-{name}-mAP", aps.astype(np.float64).mean(axis=1), kept, a),
            (f"HL-min-{name}-Hit1", hits, kept, h),
        ]
    return rows, brief, columns


def _qvhighlights_report(args, data) -> reports.Report:
    import jax

    from jaxseg._host.cli import mean_interval_section

    sections, brief, blocks = [], {}, []
    with jax.enable_x64(True):
        if data["mr"] is not None:
            rows, more, mr_columns = _mr_rows(data["mr"])
            columns = ("windows", "queries", "R1@0.5", "R1@0.7", "mAP@0.5", "mAP@0.75", "mAP")
            sections.append(
                reports.Section("moment_retrieval", "Moment retrieval (%)", columns, tuple(rows))
            )
            brief.update(more)
            blocks.append(mr_columns)
        if data["hl"] is not None:
            rows, more, hl_columns = _hl_rows(data["hl"])
            sections.append(
                reports.Section(
                    "highlights",
                    "Highlight detection (%)",
                    ("saliency", "HL-mAP", "HL-Hit1"),
                    tuple(rows),
                )
            )
            brief.update(more)
            blocks.append(hl_columns)
    summary = {"queries": data["queries"], "brief": {k: float(v) for k, v in sorted(brief.items())}}
    if args.confidence is not None:
        section, facts = mean_interval_section(args, "queries", *_stacked(blocks))
        sections.append(section)
        summary.update(facts)
    text = f"{data['queries']:,} queries (QVHighlights / Moment-DETR standalone_eval)"
    return reports.Report(text, summary, tuple(sections))


def run(args: argparse.Namespace) -> int:
    """Runs ``jaxseg grounding``; returns the exit status."""
    from jaxseg._host.cli import check_resampling_options

    check_resampling_options(args)
    reports.check_output(args.output, files=(args.ground_truth, args.predictions))
    ground_truth, predictions = Path(args.ground_truth), Path(args.predictions)
    if ground_truth.suffix == ".jsonl" or predictions.suffix == ".jsonl":
        for value, flag in ((args.thresholds, "--thresholds"), (args.top_k, "--top-k")):
            if value is not None:  # QVHighlights' thresholds and ranks are its script's
                raise InputError(f"{flag} is for Ego4D NLQ; QVHighlights (.jsonl) does not take it")
        report = _qvhighlights_report(args, read_qvhighlights(ground_truth, predictions))
    else:
        keep = max(1, *(args.top_k or NLQ_TOP_K))  # the top-k read; bad ks are named later
        report = _nlq_report(args, *read_nlq(ground_truth, predictions, keep))
    text = reports.render(report, args.format, decimals=args.decimals)
    reports.emit(text, args.output, quiet=args.quiet)
    return 0


# ------------------------------------------------------------------------------------------
# ActivityNet proposals (jaxseg detection --proposals)
# ------------------------------------------------------------------------------------------
def read_activitynet_proposals(ground_truth: Path, proposals: Path, subset: str) -> ProposalData:
    """Ground-truth windows of ``subset`` and the proposals of every video of the file, as
    :class:`ProposalData`."""
    from jaxseg._host.cli_detection import _member, _segment, _without_subset

    database = _member(
        ground_truth,
        read_json(ground_truth, "ground-truth file"),
        "database",
        "ground-truth file",
    )
    results = _member(proposals, read_json(proposals, "proposal file"), "results", "proposal file")
    truth = {}
    for video, entry in database.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("annotations", []), list):
            raise InputError(
                f"{ground_truth}: video {video!r}: expected an object with 'annotations': [...]"
            )
        if subset == "all" or entry.get("subset") == subset:
            truth[video] = [
                _segment(ground_truth, f"video {video!r}, annotation {n}", a)
                for n, a in enumerate(entry.get("annotations", []), start=1)
            ]
    if not any(truth.values()):
        raise InputError(
            f"{ground_truth}: no annotated video in subset {subset!r} (use --subset)"
            f"{_without_subset(database)}"
        )
    found = {}
    for video, entries in results.items():
        if not isinstance(entries, list):
            raise InputError(f"{proposals}: video {video!r}: expected a list of proposals")
        rows = []
        for number, entry in enumerate(entries, start=1):
            where = f"video {video!r}, proposal {number}"
            start, end = _segment(proposals, where, entry)
            score = entry.get("score")
            if not is_finite_number(score):
                raise InputError(f"{proposals}: {where}: 'score' must be a number, got {score!r}")
            rows.append((start, end, float(score)))
        found[video] = rows
    videos = list(truth) + [v for v in found if v not in truth]
    return ProposalData(
        sum(bool(rows) for rows in truth.values()),
        tuple(truth.get(v, []) for v in videos),
        tuple(found.get(v, []) for v in videos),
    )


def proposal_groups(data: ProposalData) -> list[ProposalGroup]:
    """The videos with targets and proposals, grouped as
    :func:`~jaxseg._host.cli_detection.video_groups` groups them: by their numbers of
    proposals and of targets, each rounded up to a power of two, as is the number of videos
    of a group, so that the tables stay within four times the data (one table padded to the
    largest video grew with videos x largest video). The other videos recall nothing; their
    targets and proposals count in the totals of :func:`proposal_curve`.
    """
    sizes = [
        (len(rows), len(truth)) if truth and rows else None
        for truth, rows in zip(data.targets, data.proposals, strict=True)
    ]
    groups = []
    for (width, gt_width), videos in size_groups(sizes):
        blank = [[]] * (bucket(len(videos)) - len(videos))  # rows without a target
        gt, gm = pad([data.targets[v] for v in videos] + blank, gt_width)
        table, pm = pad([data.proposals[v] for v in videos] + blank, width, size=3)
        video = np.array(videos, np.int64)
        groups.append(ProposalGroup(video, gt, gm, table[..., :2], table[..., 2], pm))
    return groups


@functools.cache
def _proposal_programs():
    """The jitted budgets of all videos, first-step histogram of a group, and curve."""
    import jax

    from jaxseg._src.proposals import curve_from_histogram, first_step_histogram, video_budgets

    return (
        jax.jit(video_budgets, static_argnames=("capacity", "max_average")),
        jax.jit(first_step_histogram, static_argnames=("thresholds",)),
        jax.jit(curve_from_histogram, static_argnames=("at_index", "dtype")),
    )


def proposal_curve(data: ProposalData, max_average: int, at: tuple[int, ...]):
    """AR-AN of ``data`` as :func:`jaxseg.metrics.proposal_average_recall` gives it for one
    padded table of all videos (float64 windows and scores), bit for bit: the budgets come
    from every video's number of proposals, then the integer histograms of first recall
    steps of the groups of :func:`proposal_groups` are summed and the curve built once.

    Returns:
      :class:`~jaxseg._src.proposals.ProposalCurve` of numpy arrays (``recall [T, 100]``,
      ``average_recall [100]``, ``proposals_per_video [100]``, ``auc []``, ``at [len(at)]``).
    """
    import jax

    from jaxseg._src import checks
    from jaxseg._src.detection import ACTIVITYNET_THRESHOLDS
    from jaxseg._src.proposals import STEPS, static_at

    budgets, histogram, curve = _proposal_programs()
    thresholds = checks.static_unit_floats("thresholds", ACTIVITYNET_THRESHOLDS)
    count = np.array([len(rows) for rows in data.proposals], np.int32)
    has_targets = np.array([bool(truth) for truth in data.targets])
    found = np.zeros((len(thresholds), STEPS + 1), np.int32)
    with jax.enable_x64(True):
        budget, num_videos, total, pcn = budgets(
            count, has_targets, capacity=int(count.max(initial=0)), max_average=max_average
        )
        budget = np.asarray(budget)
        for group in proposal_groups(data):
            rows = np.zeros((len(group.target_mask), STEPS), np.int32)  # padding: no target
            rows[: len(group.videos)] = budget[group.videos]
            found += np.asarray(histogram(*group[1:], rows, thresholds=thresholds))
        targets = np.int32(sum(len(truth) for truth in data.targets))
        at_index, dtype = static_at(at, max_average), np.dtype(np.float64)
        return jax.device_get(
            curve(found, targets, num_videos, total, pcn, at_index=at_index, dtype=dtype)
        )


def _on_curve(average: int, max_average: int) -> bool:
    """Whether the curve has a point at ``average`` proposals: its AN are j * M / 100."""
    return 1 <= average <= max_average and (average * 100) % max_average == 0


def _default_at(max_average: int) -> tuple[int, ...]:
    """The AN points reported without --at: ActivityNet's, or those of the usual points that
    lie on the curve and the curve's end M (none of them lies on it for M = 3, 7 or 30)."""
    if max_average == 100:
        return (1, 5, 10, 100)  # ActivityNet
    candidates = (1, 5, 10, 50, 100, 200, 500, 1000)  # THUMOS-14 (M = 1000): 50 ... 1000
    return tuple(dict.fromkeys(a for a in (*candidates, max_average) if _on_curve(a, max_average)))


def _at(args) -> tuple[int, ...]:
    """The AN points of the report: --at (checked against the curve's points) or defaults."""
    max_average = args.max_proposals
    if max_average < 1:
        raise InputError(f"--max-proposals must be at least 1, got {max_average}")
    if not args.at:
        return _default_at(max_average)
    for average in args.at:
        if average > max_average:
            raise InputError(
                f"--at {average} is above --max-proposals {max_average}, the curve's end "
                "(give a larger --max-proposals)"
            )
        if not _on_curve(average, max_average):
            raise InputError(
                f"--at values must be multiples of --max-proposals/100 up to {max_average} "
                f"(the curve's points), got {average}"
            )
    return tuple(dict.fromkeys(args.at))


def proposal_report(args) -> reports.Report:
    """``jaxseg detection --proposals``: AR@AN and AUC (float64, as eval_proposal.py)."""
    max_average, at = args.max_proposals, _at(args)  # before the files are read
    data = read_activitynet_proposals(Path(args.ground_truth), Path(args.predictions), args.subset)
    # video_budgets computes M x videos in int32, where a larger product would wrap.
    if max_average * data.annotated >= 2**31:
        raise InputError(
            f"--max-proposals {max_average} is too large for {data.annotated:,} annotated "
            f"videos: their product must be below 2^31 (at most {(2**31 - 1) // data.annotated:,})"
        )
    curve = proposal_curve(data, max_average, at)
    instances = sum(len(truth) for truth in data.targets)
    proposals = sum(len(rows) for rows in data.proposals)
    columns = ("name", *(f"AR@{a}" for a in at), "AUC")
    values = (*(100 * float(x) for x in curve.at), 100 * float(curve.auc))
    section = reports.Section(
        "proposals", "Average recall (%) vs proposals per video", columns, (("AR", *values),)
    )
    summary = {
        "videos": data.annotated,
        "ground_truth_instances": instances,
        "proposals": proposals,
        "max_average_proposals": max_average,
        "subset": args.subset,
        **dict(zip(columns[1:], values, strict=True)),
        "average_recall": [100 * float(x) for x in curve.average_recall],  # as "unit" says
        "proposals_per_video": [float(x) for x in curve.proposals_per_video],
    }
    text = (
        f"{data.annotated:,} videos ({args.subset}), {instances:,} ground-truth instances, "
        f"{proposals:,} proposals; tIoU 0.5:0.05:0.95, at most {max_average} per video"
    )
    return reports.Report(text, summary, (section,))
