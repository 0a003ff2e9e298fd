"""Input checks of `jaxseg detection` (offline, --online, --proposals) and `jaxseg grounding`:
bad input is a one-line error with exit status 2, never a traceback or a silently wrong number."""

from __future__ import annotations

import json

import numpy as np
import pytest

from jaxseg._host.cli import main


def run(capsys, *argv):
    code = main([*map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def fails(capsys, *argv) -> str:
    """The one-line error of a command that must exit with status 2."""
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "", (code, err)
    assert err.startswith("jaxseg: error: ") and err.count("\n") == 1, err
    return err


ONE_VIDEO = (
    '"v1": {"subset": "validation", "annotations": '
    '[{"segment": [0, 10], "label": "a"}, {"segment": [20, 30], "label": "a"}]}'
)


def _anet(tmp_path, database_videos=ONE_VIDEO):
    truth = tmp_path / "gt.json"
    truth.write_text(f'{{"database": {{{database_videos}}}}}')
    return truth


# ------------------------------------------------------------------------------------------
# Offline detection: the counts of the report
# ------------------------------------------------------------------------------------------
def test_submission_videos_without_detections_are_not_counted_as_videos(tmp_path, capsys):
    """Two videos only in the submission, with empty lists, made the report say 3 videos."""
    truth, submission = _anet(tmp_path), tmp_path / "sub.json"
    submission.write_text(
        '{"results": {"v1": [{"segment": [0, 10], "label": "a", "score": 0.9}], '
        '"v8": [], "v9": []}}'
    )
    code, out, err = run(capsys, "detection", truth, submission, "--format", "json")
    assert code == 0 and err == "", err
    summary = json.loads(out)["summary"]
    assert summary["videos"] == 1 and summary["videos_without_ground_truth"] == []
    assert summary["ground_truth_instances"] == 2 and summary["detections"] == 1


def test_a_label_in_another_unicode_normalization_is_pointed_out(tmp_path, capsys):
    """'café' as e + combining accent printed as the ground truth's 'café' in the error."""
    composed, decomposed = "caf\u00e9", "cafe\u0301"
    truth = _anet(tmp_path, ONE_VIDEO.replace('"a"', json.dumps(composed)))
    submission = tmp_path / "sub.json"
    detection = {"segment": [0, 10], "label": decomposed, "score": 0.9}
    submission.write_text(json.dumps({"results": {"v1": [detection]}}))
    err = fails(capsys, "detection", truth, submission)
    assert (
        f"label {decomposed!r} is not a class of the ground truth (subset 'validation': 1 "
        f"classes) ({decomposed!r} is the known {composed!r} in another Unicode "
        "normalization: 'cafe\\u0301' vs 'caf\\xe9')"
    ) in err


@pytest.mark.parametrize(
    ("annotation", "message"),
    [
        ('{"segment": [30, 20], "label": "a"}',
         "'segment' must be [start, end], finite numbers with start <= end, got [30, 20]"),
        ('{"segment": [20, 30]}', "'label' must be a string, got None"),
        ("[20, 30]", "expected an object with 'segment', got [20, 30]"),
    ],
)  # fmt: skip
def test_ground_truth_errors_name_the_annotation(tmp_path, capsys, annotation, message):
    """They named the video only: which of its annotations was not said."""
    annotations = f'[{{"segment": [0, 10], "label": "a"}}, {annotation}]'
    truth = _anet(tmp_path, f'"v1": {{"subset": "validation", "annotations": {annotations}}}')
    submission = tmp_path / "sub.json"
    submission.write_text('{"results": {}}')
    err = fails(capsys, "detection", truth, submission)
    assert f"{truth}: video 'v1', annotation 2: {message}" in err
    if "label" not in message:  # proposals read no label
        err = fails(capsys, "detection", "--proposals", truth, submission)
        assert f"{truth}: video 'v1', annotation 2: {message}" in err


@pytest.mark.parametrize(("subset", "shown"), [("", "None"), (', "subset": 3', "3")])
def test_videos_without_a_string_subset_are_named(tmp_path, capsys, subset, shown):
    """They were listed as subsets "None" or "3", which --subset None or 3 did not select."""
    truth = _anet(
        tmp_path,
        f'"v1": {{"annotations": [{{"segment": [0, 10], "label": "a"}}]{subset}}}, '
        '"v2": {"subset": "training", "annotations": []}',
    )
    submission = tmp_path / "sub.json"
    submission.write_text('{"results": {"v1": [{"segment": [0, 10], "label": "a", "score": 1}]}}')
    note = f"1 video(s) have no string 'subset' (e.g. 'v1': {shown}), which only --subset all"
    note += " selects"
    err = fails(capsys, "detection", truth, submission, "--subset", shown)
    assert f"no video in subset '{shown}'; subsets: training (use --subset); {note}" in err
    submission.write_text('{"results": {"v1": [{"segment": [0, 10], "score": 1}]}}')
    err = fails(capsys, "detection", "--proposals", truth, submission, "--subset", shown)
    assert f"no annotated video in subset '{shown}' (use --subset); {note}" in err
    assert run(capsys, "detection", "--proposals", truth, submission, "--subset", "all")[0] == 0


# ------------------------------------------------------------------------------------------
# --proposals: the AN points of the report
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("max_proposals", "points"),
    [
        (100, [1, 5, 10, 100]),  # ActivityNet
        (1000, [10, 50, 100, 200, 500, 1000]),
        (20, [1, 5, 10, 20]),  # the curve's end is reported too
        (30, [30]),  # none of 1 5 10 50 ... lies on the curve: a traceback before
        (3, [3]),
        (7, [7]),
    ],
)
def test_proposals_without_at_report_the_points_on_the_curve(
    tmp_path, capsys, max_proposals, points
):
    truth = _anet(tmp_path)
    proposals = tmp_path / "prop.json"
    proposals.write_text(json.dumps({"results": {"v1": [{"segment": [0, 10], "score": 0.9}]}}))
    argv = ["detection", "--proposals", truth, proposals, "--format", "json"]
    code, out, err = run(capsys, *argv, "--max-proposals", max_proposals)
    assert code == 0, err
    row = json.loads(out)["proposals"][0]
    assert [k for k in row if k.startswith("AR@")] == [f"AR@{p}" for p in points]
    assert row[f"AR@{max_proposals}"] == pytest.approx(50.0)  # 1 of the 2 instances found


def test_proposal_points_off_the_curve_are_errors(tmp_path, capsys):
    truth = _anet(tmp_path)
    proposals = tmp_path / "prop.json"
    proposals.write_text(json.dumps({"results": {"v1": [{"segment": [0, 10], "score": 0.9}]}}))
    argv = ["detection", "--proposals", truth, proposals]
    err = fails(capsys, *argv, "--max-proposals", "20", "--at", "10", "30")
    assert "--at 30 is above --max-proposals 20, the curve's end" in err
    err = fails(capsys, *argv, "--max-proposals", "30", "--at", "10")
    assert "multiples of --max-proposals/100 up to 30 (the curve's points), got 10" in err
    assert "--max-proposals must be at least 1, got 0" in fails(
        capsys, *argv, "--max-proposals", "0", "--at", "1"
    )


def test_max_proposals_beyond_the_int32_budgets_is_an_error(tmp_path, capsys):
    """M x videos wrapped in int32: M = 2^30 with 2 videos, each proposal a hit, gave AR 0
    and a curve of nulls; M = 2^31 raised OverflowError."""
    video = '"v%d": {"subset": "validation", "annotations": [{"segment": [0, 10], "label": "a"}]}'
    truth = _anet(tmp_path, f"{video % 1}, {video % 2}")
    proposals = tmp_path / "prop.json"
    proposals.write_text(
        json.dumps({"results": {v: [{"segment": [0, 10], "score": 0.9}] for v in ("v1", "v2")}})
    )
    argv = ["detection", "--proposals", truth, proposals]
    for m in (2**30, 2**31):
        err = fails(capsys, *argv, "--max-proposals", m)
        assert (
            f"--max-proposals {m} is too large for 2 annotated videos: their product must be "
            f"below 2^31 (at most {(2**31 - 1) // 2:,})"
        ) in err
    code, out, err = run(capsys, *argv, "--max-proposals", 2**30 - 1, "--format", "json")
    assert code == 0, err
    summary = json.loads(out)["summary"]
    assert summary[f"AR@{2**30 - 1}"] == 100.0
    assert summary["proposals_per_video"][-1] == pytest.approx(2**30 - 1)


@pytest.mark.parametrize("results", [{}, {"v1": [], "v2": []}])
def test_proposal_files_without_a_proposal_give_recall_0(tmp_path, capsys, results):
    """As the README says (eval_proposal.py divides by zero); an IndexError before."""
    truth, proposals = _anet(tmp_path), tmp_path / "prop.json"
    proposals.write_text(json.dumps({"results": results}))
    code, out, err = run(capsys, "detection", "--proposals", truth, proposals, "--format", "json")
    assert code == 0, err
    document = json.loads(out)
    assert document["proposals"][0] == {
        "name": "AR", "AR@1": 0.0, "AR@5": 0.0, "AR@10": 0.0, "AR@100": 0.0, "AUC": 0.0
    }  # fmt: skip
    assert document["summary"]["proposals"] == 0


# ------------------------------------------------------------------------------------------
# Repeated keys and ids
# ------------------------------------------------------------------------------------------
DETECTION = '{"segment": [%d, %d], "label": "a", "score": 0.9}'


def test_a_video_repeated_in_the_submission_is_an_error(tmp_path, capsys):
    """json keeps the last of repeated keys: the first detections were lost (mAP 50, not 100)."""
    truth, submission = _anet(tmp_path), tmp_path / "sub.json"
    submission.write_text(
        f'{{"results": {{"v1": [{DETECTION % (0, 10)}],\n "v1": [{DETECTION % (20, 30)}]}}}}'
    )
    err = fails(capsys, "detection", truth, submission, "--thresholds", "0.5")
    assert f"{submission}: key 'v1' appears twice in the object ['results']" in err
    submission.write_text(
        f'{{"results": {{"v1": [{DETECTION % (0, 10)}, {DETECTION % (20, 30)}]}}}}'
    )
    code, out, err = run(capsys, "detection", truth, submission, "--thresholds", "0.5",
                         "--format", "csv")  # fmt: skip
    assert code == 0 and out.splitlines()[1] == "map,mAP,100.0,100.0", err


def test_a_video_repeated_in_the_ground_truth_is_an_error(tmp_path, capsys):
    video = '"v1": {"subset": "validation", "annotations": [{"segment": [0, 10], "label": "a"}]}'
    truth, submission = _anet(tmp_path, f"{video}, {video}"), tmp_path / "sub.json"
    submission.write_text(f'{{"results": {{"v1": [{DETECTION % (0, 10)}]}}}}')
    err = fails(capsys, "detection", truth, submission)
    assert f"{truth}: key 'v1' appears twice in the object ['database']" in err
    proposals = tmp_path / "prop.json"
    proposals.write_text('{"results": {"v1": [{"segment": [0, 10], "score": 0.9}]}}')
    err = fails(capsys, "detection", "--proposals", truth, proposals)
    assert f"{truth}: key 'v1' appears twice in the object ['database']" in err


def test_json_nested_too_deeply_is_an_error(tmp_path, capsys):
    """json raised RecursionError, a traceback, for a JSON or JSON Lines file of arrays nested
    some thousand levels."""
    truth, submission = _anet(tmp_path), tmp_path / "sub.json"
    submission.write_text("[" * 100_000 + "]" * 100_000)
    err = fails(capsys, "detection", truth, submission)
    assert f"{submission}: the JSON is nested too deeply to read (arrays or objects)" in err
    truth, submission = _qvhighlights(tmp_path, "10", [0.9, 0.1, 0, 0, 0])
    deep = '{"qid": ' + "[" * 100_000 + "]" * 100_000 + "}\n"
    submission.write_text(submission.read_text() + deep)
    err = fails(capsys, "grounding", truth, submission)
    assert f"{submission}:2: the JSON is nested too deeply to read (arrays or objects)" in err


def test_a_key_repeated_in_a_detection_or_proposal_is_an_error(tmp_path, capsys):
    truth, submission = _anet(tmp_path), tmp_path / "sub.json"
    submission.write_text(
        '{"results": {"v1": [{"segment": [0, 10], "segment": [50, 60], "score": 1}]}}'
    )
    err = fails(capsys, "detection", "--proposals", truth, submission)
    assert f"{submission}: key 'segment' appears twice in the object ['results']['v1'][0]" in err


def _nlq(tmp_path, annotations, query_idx=0):
    truth, predictions = tmp_path / "nlq.json", tmp_path / "pred.json"
    clips = [{"clip_uid": "c1", "annotations": [a]} for a in annotations]
    truth.write_text(json.dumps({"videos": [{"clips": clips}]}))
    result = {"clip_uid": "c1", "annotation_uid": "a1", "query_idx": query_idx,
              "predicted_times": [[0, 4]]}  # fmt: skip
    predictions.write_text(json.dumps({"results": [result]}))
    return truth, predictions


def test_an_nlq_query_annotated_twice_is_an_error(tmp_path, capsys):
    """The second copy replaced the first: a prediction of the first scored 0, not 100."""
    first = {"annotation_uid": "a1", "language_queries": [{"clip_start_sec": 0, "clip_end_sec": 4}]}
    second = {"annotation_uid": "a1",
              "language_queries": [{"clip_start_sec": 100, "clip_end_sec": 104}]}  # fmt: skip
    truth, predictions = _nlq(tmp_path, [first, second])
    err = fails(capsys, "grounding", truth, predictions)
    assert (
        f"{truth}: videos[0].clips[1].annotations[0]: clip_uid/annotation_uid c1/a1 appears "
        "twice (first at videos[0].clips[0].annotations[0])"
    ) in err
    truth, predictions = _nlq(tmp_path, [first])
    code, out, err = run(capsys, "grounding", truth, predictions, "--format", "json")
    assert code == 0 and json.loads(out)["summary"]["mIoU"] == pytest.approx(100.0), err


def test_an_nlq_query_predicted_twice_or_without_times_is_an_error(tmp_path, capsys):
    """Two results of one query were both counted ('Evaluated: 2 / 1'); a query without its
    times read "expected [start, end] with start <= end, got [None, None]"."""
    query = {"clip_start_sec": 0, "clip_end_sec": 4}
    truth, predictions = _nlq(tmp_path, [{"annotation_uid": "a1", "language_queries": [query]}])
    result = json.loads(predictions.read_text())["results"][0]
    predictions.write_text(json.dumps({"results": [result, {**result, "predicted_times": []}]}))
    assert fails(capsys, "grounding", truth, predictions).endswith(
        f"{predictions}: results[1]: query c1/a1 #0 is predicted twice (first at results[0])\n"
    )
    _, predictions = _nlq(tmp_path, [{"annotation_uid": "a1", "language_queries": [query]}])
    truth, _ = _nlq(
        tmp_path, [{"annotation_uid": "a1", "language_queries": [{"clip_start_sec": 0}]}]
    )
    assert (
        "expected an object with 'clip_start_sec' and 'clip_end_sec', got {'clip_start_sec': 0}"
        in fails(capsys, "grounding", truth, predictions)
    )


def test_a_key_repeated_in_an_nlq_or_jsonl_file_is_an_error(tmp_path, capsys):
    truth, predictions = _nlq(tmp_path, [{"annotation_uid": "a1", "language_queries": []}])
    predictions.write_text('{"results": [], "results": []}')
    err = fails(capsys, "grounding", truth, predictions)
    assert f"{predictions}: key 'results' appears twice in the object at the top" in err
    truth, submission = tmp_path / "gt.jsonl", tmp_path / "sub.jsonl"
    truth.write_text('{"qid": 1, "duration": 10, "relevant_windows": [[0, 4]]}\n')
    submission.write_text(
        '{"qid": 1, "pred_relevant_windows": [[0, 4, 0.9]]}\n'
        '{"qid": 2, "pred_relevant_windows": [[0, 4, 0.9]], "qid": 1}\n'
    )
    assert f"{submission}:2: key 'qid' appears twice" in fails(
        capsys, "grounding", truth, submission
    )


def test_nlq_options_are_taken_once_and_refused_for_qvhighlights(tmp_path, capsys):
    """A threshold given twice showed its column twice in the table (once in the JSON);
    QVHighlights ignored --thresholds and --top-k without a word."""
    truth, predictions = _nlq(tmp_path, [{"annotation_uid": "a1", "language_queries": [
        {"clip_start_sec": 0, "clip_end_sec": 4}]}])  # fmt: skip
    argv = ["grounding", truth, predictions, "--format", "json"]
    code, out, err = run(capsys, *argv, "--thresholds", "0.3", "0.3", "--top-k", "1", "1")
    assert code == 0, err
    assert [c for c in json.loads(out)["nlq"][0] if c.startswith("R@")] == ["R@1 IoU>0.3"]
    gt, submission = _qvhighlights(tmp_path, "10", [0.9, 0.1, 0.2, 0.3, 0.4])
    for option in (["--thresholds", "0.5"], ["--top-k", "1"]):
        assert f"{option[0]} is for Ego4D NLQ; QVHighlights (.jsonl) does not take it" in fails(
            capsys, "grounding", gt, submission, *option
        )


def test_nlq_top_k_and_thresholds_out_of_range_are_named(tmp_path, capsys):
    """--top-k 2^31 raised OverflowError from the int32 ranks; a k above the number of
    predictions counts all of them (the one prediction here hits: R@k 100)."""
    truth, predictions = _nlq(tmp_path, [{"annotation_uid": "a1", "language_queries": [
        {"clip_start_sec": 0, "clip_end_sec": 4}]}])  # fmt: skip
    argv = ["grounding", truth, predictions]
    for k in (0, -3, 2**31, 10**20):
        assert f"--top-k must be in 1..2147483647, got {k}" in fails(capsys, *argv, "--top-k", k)
    for t in (0, 1.5, "nan"):
        message = f"--thresholds must be in (0, 1], got {float(t)}"
        assert message in fails(capsys, *argv, "--thresholds", t)
    code, out, err = run(capsys, *argv, "--top-k", 2**31 - 1, "--format", "json")
    assert code == 0, err
    assert json.loads(out)["summary"][f"R@{2**31 - 1} IoU>0.5"] == 100.0


def test_nlq_thresholds_alike_in_six_digits_get_columns_of_their_own(tmp_path, capsys):
    """0.5 and 0.5000001 were both 'R@1 IoU>0.5': the JSON row kept one of the two."""
    query = {"clip_start_sec": 0, "clip_end_sec": 8}  # the prediction [0, 4]: IoU 0.5
    truth, predictions = _nlq(tmp_path, [{"annotation_uid": "a1", "language_queries": [query]}])
    argv = ["grounding", truth, predictions, "--top-k", "1", "--format", "json"]
    code, out, err = run(capsys, *argv, "--thresholds", "0.3", "0.5", "0.5000001")
    assert code == 0, err
    row = json.loads(out)["nlq"][0]
    assert row == {"name": "NLQ", "R@1 IoU>0.3": 100.0, "R@1 IoU>0.5": 0.0,
                   "R@1 IoU>0.5000001": 0.0, "mIoU": 50.0}  # fmt: skip


def test_json_lines_under_a_json_name_get_a_hint(tmp_path, capsys):
    truth, predictions = _nlq(tmp_path, [{"annotation_uid": "a1", "language_queries": []}])
    truth.write_text('{"qid": 1, "duration": 10}\n{"qid": 2, "duration": 10}\n')
    assert "a JSON Lines file needs the .jsonl suffix" in fails(
        capsys, "grounding", truth, predictions
    )


# ------------------------------------------------------------------------------------------
# QVHighlights: duration and saliency scores
# ------------------------------------------------------------------------------------------
def _qvhighlights(tmp_path, duration: str, scores: list):
    truth, submission = tmp_path / "gt.jsonl", tmp_path / "sub.jsonl"
    truth.write_text(
        f'{{"qid": 1, "duration": {duration}, "relevant_windows": [[0, 4]], '
        '"relevant_clip_ids": [0, 1], "saliency_scores": [[1, 1, 1], [4, 4, 4]]}\n'
    )
    entry = {"qid": 1, "pred_relevant_windows": [[0, 4, 0.9]], "pred_saliency_scores": scores}
    submission.write_text(json.dumps(entry) + "\n")
    return truth, submission


@pytest.mark.parametrize(
    ("duration", "message"),
    [
        ("-4", "'duration' must be a finite number > 0, got -4"),  # negative dimensions
        ("0", "'duration' must be a finite number > 0, got 0"),
        ("NaN", "'duration' must be a finite number > 0, got nan"),  # ValueError
        ("Infinity", "'duration' must be a finite number > 0, got inf"),  # OverflowError
        ("1" + "0" * 400, "'duration' must be a finite number > 0, got 1000"),
        ('"10"', "'duration' must be a finite number > 0, got '10'"),
        ("true", "'duration' must be a finite number > 0, got True"),
        ("1e300", "'duration' 1e+300 seconds is too long (< 2^32)"),  # maximum dimension
        ("1.5", "'duration' 1.5 holds no 2-second clip for pred_saliency_scores"),
    ],
)
def test_qvhighlights_duration_is_checked(tmp_path, capsys, duration, message):
    truth, submission = _qvhighlights(tmp_path, duration, [0.9, 0.1])
    assert f"{truth}:1: {message}" in fails(capsys, "grounding", truth, submission)


def test_qvhighlights_qids_that_differ_are_named_with_their_line(tmp_path, capsys):
    """The error said "qids differ ... (e.g. 2)" for the qid "2" of a file whose ground truth
    has 2: the two printed alike, and no line was named."""
    truth, submission = _qvhighlights(tmp_path, "10", [0.9, 0.1, 0, 0, 0])
    truth.write_text(
        truth.read_text() + '{"qid": 2, "duration": 10, "relevant_windows": [[0, 4]]}\n'
    )
    entry = json.loads(submission.read_text())
    submission.write_text(json.dumps(entry) + "\n" + json.dumps({**entry, "qid": "2"}) + "\n")
    err = fails(capsys, "grounding", truth, submission)
    assert (
        f"{submission}:2: qid '2' is not in {truth}; qids differ in 2 queries, and the "
        "reference requires the same qids"
    ) in err
    submission.write_text(json.dumps(entry) + "\n")
    err = fails(capsys, "grounding", truth, submission)
    assert f"{truth}:2: qid 2 has no line in {submission}; qids differ in 1 queries" in err


def test_qvhighlights_query_without_relevant_windows_is_an_error_for_mr(tmp_path, capsys):
    """It was left out of MR-R1 and MR-mAP without a word (the reference raises); saliency
    alone still scores it."""
    truth, submission = _qvhighlights(tmp_path, "10", [0.1, 0.9, 0, 0, 0])
    truth.write_text(
        truth.read_text().replace('"relevant_windows": [[0, 4]]', '"relevant_windows": []')
    )
    err = fails(capsys, "grounding", truth, submission)
    assert f"{truth}:1: qid 1 has no relevant_windows, which MR-R1 and MR-mAP need" in err
    entry = json.loads(submission.read_text())
    del entry["pred_relevant_windows"]
    submission.write_text(json.dumps(entry) + "\n")
    code, out, err = run(capsys, "grounding", truth, submission, "--format", "json")
    assert code == 0, err
    assert json.loads(out)["summary"]["brief"]["HL-min-Fair-Hit1"] == 100.0  # clip 1, saliency 4


@pytest.mark.parametrize("count", [8, 0, 4])
def test_qvhighlights_saliency_scores_are_one_per_clip(tmp_path, capsys, count):
    """They were cut or padded with zeros to int(duration / 2); standalone_eval asserts."""
    truth, submission = _qvhighlights(tmp_path, "10", ([0.9, 0.1] + [0.0] * 8)[:count])
    err = fails(capsys, "grounding", truth, submission)
    assert (
        f"{submission}:1: qid 1: pred_saliency_scores has {count} scores, expected 5, one per "
        f"2-second clip of the duration 10 ({truth}:1)"
    ) in err
    truth, submission = _qvhighlights(tmp_path, "11.5", [0.9, 0.1, 0, 0, 0])
    code, out, err = run(capsys, "grounding", truth, submission, "--format", "json")
    assert code == 0, err
    assert json.loads(out)["summary"]["brief"]["HL-min-Fair-Hit1"] == pytest.approx(0.0)


def test_qvhighlights_without_a_predicted_window_gives_0(tmp_path, capsys):
    """Every pred_relevant_windows empty: an IndexError before."""
    truth, submission = _qvhighlights(tmp_path, "10", [0.9, 0.1, 0, 0, 0])
    entry = json.loads(submission.read_text())
    submission.write_text(json.dumps({**entry, "pred_relevant_windows": []}) + "\n")
    code, out, err = run(capsys, "grounding", truth, submission, "--format", "json")
    assert code == 0, err
    assert json.loads(out)["summary"]["brief"]["MR-full-mAP"] == 0.0


# ------------------------------------------------------------------------------------------
# --online: targets
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_online_non_finite_targets_are_errors(tmp_path, capsys, value):
    """`targets != 0` counted a NaN column as all positive: AP 100."""
    rng = np.random.default_rng(0)
    np.save(tmp_path / "scores.npy", rng.random((20, 3)).astype(np.float32))
    targets = np.eye(3)[rng.integers(0, 3, 20)]
    targets[4:, 2] = value
    np.save(tmp_path / "targets.npy", targets)
    err = fails(capsys, "detection", "--online", tmp_path / "targets.npy", tmp_path / "scores.npy")
    assert f"targets.npy: targets[4, 2] = {value}; expected 0 or 1" in err
    scores = rng.random((20, 3)).astype(np.float32)
    scores[7, 1] = np.nan
    np.save(tmp_path / "scores.npy", scores)
    err = fails(capsys, "detection", "--online", tmp_path / "targets.npy", tmp_path / "scores.npy")
    assert "scores.npy: scores hold NaN (first at scores[7, 1])" in err


@pytest.mark.parametrize(
    ("coding", "message"),
    [
        (lambda onehot: np.where(onehot > 0, 1, -1), "targets[0, 0] = -1"),
        (lambda onehot: 0.9 * onehot + 0.025, "targets[0, 0] = 0.025"),
        (lambda onehot: 2 * onehot.astype(np.int8), "targets[0, 2] = 2"),
    ],
    ids=["plus-minus-one", "soft", "two"],
)
def test_online_targets_other_than_0_or_1_are_errors(tmp_path, capsys, coding, message):
    """`targets != 0` counted -1 and 0.025 as positives: mAP 100 for +-1 or soft targets."""
    rng = np.random.default_rng(0)
    np.save(tmp_path / "scores.npy", rng.random((20, 4)).astype(np.float32))
    np.save(tmp_path / "targets.npy", coding(np.eye(4)[[2, *rng.integers(0, 4, 19)]]))
    err = fails(capsys, "detection", "--online", tmp_path / "targets.npy", tmp_path / "scores.npy")
    assert f"targets.npy: {message}; expected 0 or 1" in err
    for targets in (np.eye(4, dtype=bool)[rng.integers(0, 4, 20)], np.eye(4)[[2] * 20]):
        np.save(tmp_path / "targets.npy", targets)
        argv = ("detection", "--online", tmp_path / "targets.npy", tmp_path / "scores.npy")
        assert run(capsys, *argv)[0] == 0


def test_online_files_that_are_not_npy_or_have_no_class_are_named(tmp_path, capsys):
    """JSON files gave numpy's message on pickled data (inviting allow_pickle); scores [N, 0]
    gave 'class index 0 is outside the 0 score columns', naming no file."""
    truth, submission = _anet(tmp_path), tmp_path / "sub.json"
    submission.write_text('{"results": {}}')
    err = fails(capsys, "detection", "--online", truth, submission)
    assert f"{submission}: scores file is not a .npy file (it starts with b'{{\"result'" in err
    np.save(tmp_path / "scores.npy", np.zeros((50, 3), np.float32))
    err = fails(capsys, "detection", "--online", truth, tmp_path / "scores.npy")
    assert f"{truth}: targets file is not a .npy file (it starts with b'{{\"databa'" in err
    np.save(tmp_path / "scores.npy", np.zeros((50, 0), np.float32))
    np.save(tmp_path / "targets.npy", np.zeros((50, 0), bool))
    err = fails(capsys, "detection", "--online", tmp_path / "targets.npy", tmp_path / "scores.npy")
    assert (
        "scores.npy: expected float scores [N, C] with N, C >= 1, got dtype float32 shape (50, 0)"
        in err
    )


# ------------------------------------------------------------------------------------------
# Options a mode does not use
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("mode", "options", "message"),
    [
        (["--online"], ["--thresholds", "5"], "--thresholds is not used by --online"),
        (["--online"], ["--subset", "validation"], "--subset is not used by --online"),
        (["--online"], ["--preset", "thumos14"], "--preset is not used by --online"),
        (["--online"], ["--at", "1"], "--at is not used by --online (only by --proposals)"),
        (["--online", "--proposals"], [], "--online and --proposals cannot be combined"),
        ([], ["--background", "0"],
         "--background is not used by offline detection (only by --online)"),
        ([], ["--ambiguous"], "--ambiguous is not used by offline detection"),
        ([], ["--max-proposals", "100"], "--max-proposals is not used by offline detection"),
        ([], ["--preset", "activitynet", "--thresholds", "0.5"],
         "give --preset or --thresholds, not both"),
        (["--proposals"], ["--thresholds", "0.5"], "--thresholds is not used by --proposals"),
        (["--proposals"], ["--per-class"],
         "--per-class is not used by --proposals (only by offline detection and --online)"),
    ],
)  # fmt: skip
def test_options_a_mode_does_not_use_are_refused(tmp_path, capsys, mode, options, message):
    """They were ignored without a word (`--online --thresholds 5` printed mAP)."""
    np.save(tmp_path / "scores.npy", np.random.default_rng(0).random((10, 3)).astype(np.float32))
    np.save(tmp_path / "targets.npy", np.zeros(10, np.int64))
    argv = ["detection", *mode, tmp_path / "targets.npy", tmp_path / "scores.npy", *options]
    assert message in fails(capsys, *argv)
