"""The JSON / CSV of every command follow the schema in README.md
("Output formats"): every table and field documented, rows named by their first field, no
`""` key, interval bounds as fields (not rows), no CSV column shared by two meanings."""

from __future__ import annotations

import csv
import io
import json
import pathlib
import re

from _cli_data import random_videos, write_dataset

from jaxseg._host.cli import main

NAMES = ("SIL", "take", "pour", "stir", "background")
ROW_NAMES = ("name", "video", "class", "metric", "windows", "saliency")
README = (pathlib.Path(__file__).resolve().parents[1] / "README.md").read_text()
SCHEMA = README.split("### Output formats", 1)[1].split("\n## ", 1)[0]
DOCUMENTED = set(re.findall(r"`([^`]+)`", SCHEMA))


def _run(capsys, *argv) -> str:
    code = main([*map(str, argv)])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def _documented(field: str) -> bool:
    generic = re.sub(r"^F1@[0-9.]+", "F1@<100τ>", field)
    generic = re.sub(r"^(Acc|Edit|F1@<100τ>) (low|high)$", r"<metric> \2", generic)
    generic = re.sub(r"^AR@[0-9]+$", "AR@<n>", generic)
    generic = re.sub(r"^R@[0-9]+ IoU>[0-9.]+$", "R@<k> IoU><t>", generic)
    return generic in DOCUMENTED or re.fullmatch(r"0\.[0-9]+", field) is not None


def _check(document: dict) -> None:
    assert document["unit"] == "percent"
    for key in document["summary"]:
        assert _documented(key), f"summary field {key!r} is not in README's Output formats"
    for table, rows in document.items():
        if table in ("unit", "summary"):
            continue
        assert table in DOCUMENTED, f"table {table!r} is not in README's Output formats"
        for row in rows:
            fields = list(row)
            assert fields[0] in ROW_NAMES and "" not in fields
            for field in fields:
                assert _documented(field), f"{table}.{field} is not in README's Output formats"


def _csv_columns_keep_one_meaning(text: str, same_meaning=frozenset({"frames"})) -> None:
    rows = list(csv.DictReader(io.StringIO(text)))
    assert "" not in rows[0]
    per_table: dict[str, set] = {}
    for row in rows:
        filled = {k for k, v in row.items() if v != "" and k not in ("table", "name")}
        per_table.setdefault(row["table"], set()).update(filled)
    # a metric column belongs to one table (frames / predicted are counts wherever they are)
    shared = set.intersection(*per_table.values()) if len(per_table) > 1 else set()
    assert shared <= same_meaning, shared
    assert "Acc" not in per_table.get("per_class", set())


def test_evaluate_and_compare_schema(tmp_path, capsys):
    videos = random_videos(31, 6, len(NAMES))
    truth, predictions = write_dataset(tmp_path, videos, NAMES)
    argv = ("evaluate", truth, predictions, "--per-video", "--per-class", "--confidence", "0.9",
            "--samples", "200")  # fmt: skip
    document = json.loads(_run(capsys, *argv, "--format", "json"))
    _check(document)
    assert len(document["results"]) == 1  # bounds are fields of the one row
    assert {"Acc low", "Acc high", "F1@50 high"} <= set(document["results"][0])
    _csv_columns_keep_one_meaning(_run(capsys, *argv, "--format", "csv"))
    argv = ("compare", truth, predictions, predictions, "--samples", "200")
    document = json.loads(_run(capsys, *argv, "--format", "json"))
    _check(document)
    assert list(document["comparison"][0])[4:6] == ["low", "high"]  # the level is in summary
    assert document["summary"]["confidence"] == 0.95


def test_detection_schema(tmp_path, capsys):
    database = {
        "v_1": {"subset": "validation", "annotations": [
            {"segment": [0.0, 5.0], "label": "jump"}, {"segment": [6.0, 9.0], "label": "run"}]},
    }  # fmt: skip
    results = {"v_1": [{"segment": [0.5, 5.0], "label": "jump", "score": 0.9}]}
    (tmp_path / "gt.json").write_text(json.dumps({"database": database}))
    (tmp_path / "sub.json").write_text(json.dumps({"results": results}))
    argv = ("detection", tmp_path / "gt.json", tmp_path / "sub.json", "--per-class")
    document = json.loads(_run(capsys, *argv, "--format", "json"))
    _check(document)
    assert document["map"][0]["name"] == "mAP"
    thresholds = {c for c in document["map"][0] if c not in ("name",)}  # AP at each tIoU
    _csv_columns_keep_one_meaning(_run(capsys, *argv, "--format", "csv"), thresholds)


def _write_json(path, document) -> pathlib.Path:
    path.write_text(json.dumps(document))
    return path


def test_proposal_and_grounding_schema(tmp_path, capsys):
    """The NLQ and proposal tables named their rows by an empty field (``""``)."""
    segment = lambda start, end: {"segment": [start, end]}  # noqa: E731
    database = {
        "v1": {
            "subset": "validation",
            "annotations": [{**segment(0, 10), "label": "a"}, {**segment(20, 30), "label": "b"}],
        }
    }
    proposals = {"v1": [{**segment(0, 9), "score": 0.9}, {**segment(21, 30), "score": 0.8}]}
    runs = [
        (
            "detection",
            "--proposals",
            _write_json(tmp_path / "gt.json", {"database": database}),
            _write_json(tmp_path / "props.json", {"results": proposals}),
        )
    ]
    query = lambda start, end: {"clip_start_sec": start, "clip_end_sec": end}  # noqa: E731
    clips = [
        {
            "clip_uid": "c1",
            "annotations": [
                {"annotation_uid": "a1", "language_queries": [query(0.0, 10.0), query(20.0, 30.0)]}
            ],
        }
    ]
    predicted = [
        {
            "clip_uid": "c1",
            "annotation_uid": "a1",
            "query_idx": i,
            "predicted_times": [[0.0, 9.0], [20.0, 30.0]],
        }
        for i in (0, 1)
    ]
    runs.append(
        (
            "grounding",
            _write_json(tmp_path / "nlq.json", {"videos": [{"clips": clips}]}),
            _write_json(tmp_path / "nlq_predictions.json", {"results": predicted}),
        )
    )
    truth = {
        "qid": 1,
        "duration": 150,
        "relevant_windows": [[0, 10]],
        "relevant_clip_ids": [0, 1, 2],
        "saliency_scores": [[4, 4, 4]] * 3,
    }
    submission = {
        "qid": 1,
        "pred_relevant_windows": [[0, 10, 0.9], [20, 30, 0.5]],
        "pred_saliency_scores": [1.0] * 75,
    }
    runs.append(
        (
            "grounding",
            _write_json(tmp_path / "qv.jsonl", truth),
            _write_json(tmp_path / "qv_submission.jsonl", submission),
        )
    )
    tables = set()
    for argv in runs:
        document = json.loads(_run(capsys, *argv, "--format", "json"))
        _check(document)
        tables |= set(document) - {"unit", "summary"}
    assert tables == {"proposals", "nlq", "moment_retrieval", "highlights"}


def test_matching_schema(tmp_path, capsys):
    """`evaluate --matching` named its result row by an empty field (``""``)."""
    videos = random_videos(32, 4, len(NAMES))
    truth, _ = write_dataset(tmp_path, videos, NAMES)
    clusters = tmp_path / "clusters"
    clusters.mkdir()
    for name, (_, prediction) in videos.items():  # class indices as cluster ids
        (clusters / f"{name}.txt").write_text("".join(f"{x}\n" for x in prediction))
    for matching in ("global", "per-video", "asot-full", "asot-per"):
        extra = ("--per-video",) if matching in ("per-video", "asot-per") else ()
        argv = ("evaluate", truth, clusters, "--matching", matching, "--background",
                "background", *extra)  # fmt: skip
        document = json.loads(_run(capsys, *argv, "--format", "json"))
        _check(document)
        assert document["results"][0]["name"] in ("all", "mean over videos")
