"""`jaxseg grounding` on Ego4D NLQ JSON and QVHighlights JSONL, and `jaxseg detection
--proposals` on ActivityNet proposal JSON, built from the golden sets; errors on bad files."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from conftest import golden_path

from jaxseg._host.cli import main


def _golden(name):
    path = golden_path(f"{name}/{name}.json")
    if not path.exists():
        pytest.skip(f"golden data not found at {path}")
    return json.loads(path.read_text()), dict(np.load(golden_path(f"{name}/{name}.npz")))


def run(capsys, *argv):
    code = main([*map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_qvhighlights_prints_the_official_numbers(tmp_path, capsys):
    data, _ = _golden("grounding")
    gt = _jsonl(tmp_path / "gt.jsonl", data["raw_queries"]["ground_truth"])
    sub = _jsonl(tmp_path / "sub.jsonl", data["raw_queries"]["submission"])
    code, out, err = run(capsys, "grounding", gt, sub, "--format", "json")
    assert code == 0, err
    brief = json.loads(out)["summary"]["brief"]
    official = data["expected"]["mdetr_official_rounded"]["brief"]
    assert set(brief) == set(official)
    for key, value in official.items():
        assert abs(brief[key] - value) <= 0.005 + 1e-9, key
    code, out, _ = run(capsys, "grounding", gt, sub)
    assert code == 0 and "R1@0.5" in out and "min VeryGood (4)" in out


def _write_nlq(tmp_path, arrays):
    clips, results = [], []
    for q in range(len(arrays["gt_windows"])):
        s, e = (float(x) for x in arrays["gt_windows"][q, 0])
        clips.append(
            {
                "clip_uid": f"clip{q}",
                "annotations": [
                    {
                        "annotation_uid": f"ann{q}",
                        "language_queries": [
                            {"clip_start_sec": 0.0, "clip_end_sec": 1.0, "query": "x"},
                            {"clip_start_sec": s, "clip_end_sec": e, "query": "y"},
                        ],
                    }
                ],
            }
        )
        predicted = arrays["pred_windows"][q][arrays["pred_mask"][q]].tolist()
        results.append(
            {
                "clip_uid": f"clip{q}",
                "annotation_uid": f"ann{q}",
                "query_idx": 1,
                "predicted_times": predicted,
            }
        )
    gt = tmp_path / "nlq_gt.json"
    gt.write_text(json.dumps({"version": "1", "videos": [{"video_uid": "v", "clips": clips}]}))
    pred = tmp_path / "nlq_pred.json"
    pred.write_text(
        json.dumps({"version": "1.0", "challenge": "ego4d_nlq_challenge", "results": results})
    )
    return gt, pred


def test_nlq_prints_the_reference_recalls_and_miou(tmp_path, capsys):
    data, arrays = _golden("grounding")
    gt, pred = _write_nlq(tmp_path, arrays)
    code, out, err = run(capsys, "grounding", gt, pred, "--format", "json")
    assert code == 0, err
    summary = json.loads(out)["summary"]
    expected = data["expected"]["nlq"]
    for k in expected["topK"]:
        for t in expected["thresholds"]:
            want = 100 * expected["recall"][f"R@{k}_IoU>{t}"]
            assert abs(summary[f"R@{k} IoU>{t:g}"] - want) < 1e-4
    assert abs(summary["mIoU"] - 100 * expected["mIoU"]) < 1e-4
    assert summary["evaluated"] == 200 and summary["annotated_queries"] == 400


def _intervals(out):
    """The ``--confidence`` section of a JSON report: ``{metric: (value, low, high)}``."""
    section = json.loads(out)["intervals"]
    return {row["metric"]: (row["value"], row["low"], row["high"]) for row in section}


def test_nlq_intervals_are_the_percentile_bootstrap_of_the_reference_per_query_values(
    tmp_path, capsys
):
    import jax

    from jaxseg.stats import resample_indices

    data, arrays = _golden("grounding")
    gt, pred = _write_nlq(tmp_path, arrays)
    argv = ("grounding", gt, pred, "--format", "json", "--confidence", "0.9", "--samples", "500")
    code, out, err = run(capsys, *argv, "--seed", "7")
    assert code == 0, err
    intervals = _intervals(out)
    summary = json.loads(out)["summary"]
    assert (summary["confidence"], summary["samples"], summary["seed"]) == (0.9, 500, 7)
    queries = len(arrays["exp_nlq_iou_top1"])
    indices = np.asarray(resample_indices(jax.random.key(7), num_videos=queries, num_samples=500))
    expected = data["expected"]["nlq"]
    per_query = {"mIoU": arrays["exp_nlq_iou_top1"]}
    for i, t in enumerate(expected["thresholds"]):
        for j, k in enumerate(expected["topK"]):
            per_query[f"R@{k} IoU>{t:g}"] = arrays["exp_nlq_hits"][i, j]
    assert set(intervals) == set(per_query)
    for name, values in per_query.items():
        replicates = 100 * values[indices].mean(axis=1)
        want = np.quantile(replicates, [0.05, 0.95])
        np.testing.assert_allclose(intervals[name][1:], want, rtol=1e-5, err_msg=name)
        assert intervals[name][1] <= intervals[name][0] <= intervals[name][2]
    code, again, _ = run(capsys, *argv, "--seed", "7")
    assert code == 0 and again == out
    code, other, _ = run(capsys, *argv, "--seed", "8")
    assert code == 0 and _intervals(other) != intervals


def test_qvhighlights_intervals_name_every_reported_number(tmp_path, capsys):
    data, _ = _golden("grounding")
    gt = _jsonl(tmp_path / "gt.jsonl", data["raw_queries"]["ground_truth"])
    sub = _jsonl(tmp_path / "sub.jsonl", data["raw_queries"]["submission"])
    code, out, err = run(capsys, "grounding", gt, sub, "--format", "json", "--confidence", "0.95")
    assert code == 0, err
    intervals, brief = _intervals(out), json.loads(out)["summary"]["brief"]
    ranges = ("full", "short", "middle", "long")
    names = ("R1@0.5", "R1@0.7", "mAP@0.5", "mAP@0.75", "mAP")
    assert set(intervals) == {f"MR-{r}-{n}" for r in ranges for n in names} | {
        k for k in brief if k.startswith("HL-")
    }
    for name, (value, low, high) in intervals.items():
        assert low <= value <= high and low < high, name
        if name in brief:
            assert value == brief[name], name
    rows = {row["windows"]: row for row in json.loads(out)["moment_retrieval"]}
    assert intervals["MR-short-R1@0.7"][0] == rows["short"]["R1@0.7"]


def test_resampling_options_need_confidence(tmp_path, capsys):
    _, arrays = _golden("grounding")
    gt, pred = _write_nlq(tmp_path, arrays)
    for option in ("--samples", "--seed"):
        _check_error(
            capsys, ["grounding", gt, pred, option, "3"], f"{option} goes with --confidence"
        )
    gt = _jsonl(tmp_path / "gt.jsonl", [{"qid": 1, "duration": 10, "relevant_windows": [[0, 4]]}])
    sub = _jsonl(tmp_path / "sub.jsonl", [{"qid": 1, "pred_relevant_windows": [[0, 4, 0.9]]}])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        code, out, err = run(capsys, "grounding", gt, sub, "--format", "json", "--confidence", ".9")
    assert code == 0 and err == "", err
    # one query: every replicate would be that query, so no interval
    assert all(low is None and high is None for _, low, high in _intervals(out).values())


@pytest.mark.parametrize("cfg", ["std", "var"])
def test_proposals_print_the_reference_ar_and_auc(tmp_path, capsys, cfg):
    data, _ = _golden("proposals")
    raw = data["raw_inputs"][cfg]
    gt, prop = tmp_path / "gt.json", tmp_path / "prop.json"
    gt.write_text(json.dumps({"version": "1.3", "taxonomy": [], "database": raw["ground_truth"]}))
    prop.write_text(
        json.dumps({"version": "1.3", "external_data": {}, "results": raw["proposals"]})
    )
    code, out, err = run(capsys, "detection", "--proposals", gt, prop, "--format", "json")
    assert code == 0, err
    summary = json.loads(out)["summary"]
    expected = data["expected"][cfg]
    assert abs(summary["AUC"] - expected["auc_percent"]) < 1e-6
    for k in ("1", "5", "10", "100"):
        assert abs(summary[f"AR@{k}"] - 100 * expected["ar_at_index"][k]) < 1e-6
    code, out, err = run(capsys, "detection", "--proposals", gt, prop, "--max-proposals", "1000")
    assert code == 0 and "AR@50" in out and "AR@1000" in out, err


def _check_error(capsys, argv, *fragments):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.startswith("jaxseg: error: ") and err.count("\n") == 1, err
    for fragment in fragments:
        assert fragment in err, err


def test_bad_files_give_one_line_errors(tmp_path, capsys):
    gt = _jsonl(tmp_path / "gt.jsonl", [{"qid": 1, "duration": 10, "relevant_windows": [[0, 4]]}])
    sub = tmp_path / "sub.jsonl"
    sub.write_text('{"qid": 1, "pred_relevant_windows": [[0, 4, 0.9]]}\n{"qid": 2,\n')
    _check_error(capsys, ["grounding", gt, sub], f"{sub}:2:", "not a JSON object")
    _jsonl(sub, [{"qid": 2, "pred_relevant_windows": [[0, 4, 0.9]]}])
    _check_error(capsys, ["grounding", gt, sub], "qids differ")
    # U+2028 may stand in a JSON string as it is; str.splitlines broke the line there. No
    # query is middle or long: their rows are empty, without numpy's warnings on stderr.
    sub.write_text('{"qid": 1, "query": "a\u2028b", "pred_relevant_windows": [[0, 4, 1]]}\n')
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        code, out, err = run(capsys, "grounding", gt, sub, "--format", "json")
    assert code == 0 and err == "", err
    assert json.loads(out)["summary"]["brief"]["MR-middle-mAP"] is None
    _jsonl(sub, [{"qid": 1, "pred_relevant_windows": [[5, 4, 0.9]]}])
    _check_error(capsys, ["grounding", gt, sub], f"{sub}:1", "start <= end")
    saliency = {"pred_saliency_scores": [1, 0, 0, 0, 0]}  # one per 2-second clip of 10 s
    _jsonl(sub, [{"qid": 1, "pred_relevant_windows": [[0, 4, 0.9]], **saliency}])
    _jsonl(
        gt,
        [
            {
                "qid": 1,
                "duration": 10,
                "relevant_windows": [[0, 4]],
                "relevant_clip_ids": [9],
                "saliency_scores": [[1, 2, 3]],
            }
        ],
    )
    _check_error(capsys, ["grounding", gt, sub], f"{gt}:1", "clip id 9")
    _check_error(capsys, ["grounding", tmp_path / "missing.json", sub], "missing.json", "not found")
    nlq = tmp_path / "nlq.json"
    nlq.write_text('{"videos": [}')
    _check_error(capsys, ["grounding", nlq, nlq], f"{nlq}:1:", "not valid JSON")
    nlq.write_text(json.dumps({"videos": [{"clips": [{"clip_uid": "c", "annotations": []}]}]}))
    pred = tmp_path / "pred.json"
    pred.write_text(
        json.dumps(
            {
                "results": [
                    {"clip_uid": "c", "annotation_uid": "a", "query_idx": 0, "predicted_times": []}
                ]
            }
        )
    )
    _check_error(capsys, ["grounding", nlq, pred], f"{pred}: results[0]", "no annotated query")
    database = {"v": {"subset": "validation", "annotations": [{"segment": [0, 1], "label": "a"}]}}
    gt_json, prop = tmp_path / "anet.json", tmp_path / "prop.json"
    gt_json.write_text(json.dumps({"database": database}))
    prop.write_text(json.dumps({"results": {"v": [{"segment": [0, 1]}]}}))
    _check_error(capsys, ["detection", "--proposals", gt_json, prop], "proposal 1", "'score'")
    prop.write_text(json.dumps({"results": {"v": [{"segment": [0, 1], "score": 1}]}}))
    _check_error(
        capsys,
        ["detection", "--proposals", gt_json, prop, "--at", "30", "--max-proposals", "20"],
        "--at",
    )


def test_qvhighlights_lines_without_predictions_are_named(tmp_path, capsys):
    """'pred_relevant_windows is missing in some lines' named no line or qid; 'the submission
    has neither ...' named no file."""
    rows = [{"qid": q, "duration": 10, "relevant_windows": [[0, 4]]} for q in (1, 2, 3)]
    gt, sub = _jsonl(tmp_path / "gt.jsonl", rows), tmp_path / "sub.jsonl"
    windows = {"pred_relevant_windows": [[0, 4, 0.9]]}
    _jsonl(sub, [{"qid": 1, **windows}, {"qid": 3}, {"qid": 2, **windows}])
    _check_error(
        capsys,
        ["grounding", gt, sub],
        f"{sub}:2: qid 3 has no pred_relevant_windows, which 2 of the 3 lines have",
    )
    scores = {"pred_saliency_scores": [1, 0, 0, 0, 0]}
    _jsonl(sub, [{"qid": 1, **windows}, {"qid": 2, **windows, **scores}, {"qid": 3, **windows}])
    _check_error(
        capsys,
        ["grounding", gt, sub],
        f"{sub}:1: qid 1 has no pred_saliency_scores, which 1 of the 3 lines have",
    )
    _jsonl(sub, [{"qid": q} for q in (1, 2, 3)])
    _check_error(
        capsys,
        ["grounding", gt, sub],
        f"{sub}: no line has pred_relevant_windows or pred_saliency_scores",
    )


def test_nlq_entries_that_are_not_objects_are_named_as_such(tmp_path, capsys):
    """A null result was reported as "'clip_uid' must be a string, got None"."""
    query = {"clip_start_sec": 0, "clip_end_sec": 4}
    annotation = {"annotation_uid": "a", "language_queries": [query]}
    nlq, pred = tmp_path / "nlq.json", tmp_path / "pred.json"
    nlq.write_text(
        json.dumps({"videos": [{"clips": [{"clip_uid": "c", "annotations": [annotation]}]}]})
    )
    pred.write_text(json.dumps({"results": [None]}))
    _check_error(
        capsys,
        ["grounding", nlq, pred],
        f"{pred}: results[0]: expected an object with 'clip_uid', got None",
    )
    result = {"clip_uid": "c", "annotation_uid": "a", "query_idx": 0, "predicted_times": [[0, 4]]}
    pred.write_text(json.dumps({"results": [result]}))
    annotation["language_queries"] = ["x"]
    nlq.write_text(
        json.dumps({"videos": [{"clips": [{"clip_uid": "c", "annotations": [annotation]}]}]})
    )
    _check_error(
        capsys,
        ["grounding", nlq, pred],
        f"{nlq}: videos[0].clips[0].annotations[0].language_queries[0]: expected an object with "
        "'clip_start_sec' and 'clip_end_sec', got 'x'",
    )


def test_a_bootstrap_out_of_memory_names_samples(tmp_path, capsys, monkeypatch):
    _, arrays = _golden("grounding")
    gt, pred = _write_nlq(tmp_path, arrays)

    def exhausted(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr("jaxseg._host.intervals.mean_intervals", exhausted)
    _check_error(
        capsys,
        ["grounding", gt, pred, "--confidence", "0.9"],
        "out of memory; evaluate fewer queries at once or fewer bootstrap replicates "
        "(--samples, now 10,000), or on a machine with more memory",
    )


def test_an_empty_json_file_and_a_qvhighlights_line_in_a_json_file_are_named(tmp_path, capsys):
    """An empty file read "is not valid JSON (Expecting value, column 1)"; a QVHighlights
    line in a .json file "an Ego4D NLQ file needs a 'videos' list", without a word on the
    suffix that tells the formats apart."""
    empty = tmp_path / "empty.json"
    empty.write_text(" \n")
    for command in ("detection", "grounding"):
        _check_error(
            capsys,
            [command, empty, empty],
            f"{empty}: empty file; the ground-truth file must be a JSON document",
        )
    line = tmp_path / "line.json"
    line.write_text(json.dumps({"qid": 1, "duration": 10, "relevant_windows": [[0, 4]]}))
    _check_error(
        capsys,
        ["grounding", line, line],
        f"{line}: an Ego4D NLQ file needs a 'videos' list; QVHighlights files are JSON Lines, "
        "read by the .jsonl suffix",
    )


@pytest.mark.parametrize("score", [[-7, 1, 1], [10**20, 1, 1], [5, 0, 0], [True, 1, 1]])
def test_saliency_scores_outside_0_to_4_are_named(tmp_path, capsys, score):
    """-7 was taken as a score; 10**20 raised OverflowError (a traceback)."""
    row = {"qid": 1, "duration": 4, "relevant_windows": [[0, 4]], "relevant_clip_ids": [0, 1]}
    gt = _jsonl(tmp_path / "gt.jsonl", [{**row, "saliency_scores": [score, [2, 2, 2]]}])
    sub = _jsonl(
        tmp_path / "sub.jsonl",
        [{"qid": 1, "pred_relevant_windows": [[0, 4, 0.9]], "pred_saliency_scores": [1, 0]}],
    )
    _check_error(
        capsys,
        ["grounding", gt, sub],
        f"{gt}:1: saliency score {score!r} is not 3 integers in 0..4 (Very Bad to Very Good)",
    )


def test_grounding_tables_keep_only_the_predictions_the_metrics_read(tmp_path, capsys):
    """Every query was padded to the longest prediction list: one list of 20,000 windows
    took 1.5 GB for 1000 queries. NLQ reads the first max(k), QVHighlights the first 10."""
    from jaxseg._host.cli_grounding import read_nlq, read_qvhighlights

    _, arrays = _golden("grounding")
    gt, pred = _write_nlq(tmp_path, arrays)
    document = json.loads(pred.read_text())
    hit = document["results"][0]["predicted_times"][0]
    document["results"][0]["predicted_times"] = [[0.0, 0.001]] * 30 + [hit]  # the 31st hits
    pred.write_text(json.dumps(document))
    assert read_nlq(gt, pred, 5)[1].shape[1] == 5
    assert read_nlq(gt, pred, 40)[1].shape[1] == 31
    argv = ("grounding", gt, pred, "--format", "json", "--thresholds", "0.01")
    code, out, err = run(capsys, *argv, "--top-k", "30", "31")
    assert code == 0, err
    summary = json.loads(out)["summary"]
    assert summary["R@31 IoU>0.01"] - summary["R@30 IoU>0.01"] == pytest.approx(100 / 200)
    rows = [
        {"qid": 1, "duration": 10, "relevant_windows": [[0, 4]]},
        {"qid": 2, "duration": 10, "relevant_windows": [[2, 4]]},
    ]
    windows = [[5, 6, 0.1]] * 10 + [[0, 4, 0.9]]  # the 11th would match, were it read
    sub = [
        {"qid": 1, "pred_relevant_windows": windows},
        {"qid": 2, "pred_relevant_windows": [[2, 4, 1]]},
    ]
    truth, submission = _jsonl(tmp_path / "gt.jsonl", rows), _jsonl(tmp_path / "s.jsonl", sub)
    assert read_qvhighlights(truth, submission)["mr"][2].shape[1] == 10
    code, out, err = run(capsys, "grounding", truth, submission, "--format", "json")
    assert code == 0, err
    assert json.loads(out)["summary"]["brief"]["MR-full-mAP@0.5"] == 50.0
