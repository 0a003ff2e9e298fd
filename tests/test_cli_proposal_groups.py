"""`jaxseg detection --proposals` scores videos in groups of similar sizes: the same AR-AN
curve, bit for bit, as one table padded to the largest video, in tables that grow with the
data, not with (videos x largest video)."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest
from _cli_data import window_near

from jaxseg._host import cli_grounding
from jaxseg._host.cli import main
from jaxseg._host.padding import bucket
from jaxseg.metrics import proposal_average_recall


def skewed_dataset(seed):
    """ActivityNet ground truth and proposals: most videos with 0-5 proposals, a few with
    hundreds; scores rounded to 0.1 (many ties); videos without targets, videos without
    proposals, videos of the proposal file outside the ground truth (their proposals count
    in the total), a video of another subset."""
    rng = np.random.default_rng(seed)
    database, results = {}, {}
    for v in range(60):
        targets = int(rng.integers(0, 4)) if v % 17 else int(rng.integers(20, 40))
        annotations = []
        for _ in range(targets):
            start = float(np.round(rng.uniform(0, 100), 2))
            annotations.append({"segment": [start, start + float(rng.uniform(1, 20))]})
        database[f"v{v}"] = {"subset": "validation", "annotations": annotations}
        if v % 7 == 3:
            continue  # no proposals
        count = int(rng.integers(0, 6)) if v % 13 else int(rng.choice([150, 300, 700]))
        proposals = []
        for _ in range(count):
            segment = window_near(rng, annotations)
            proposals.append({"segment": segment, "score": float(np.round(rng.random(), 1))})
        results[f"v{v}"] = proposals
    for v in range(3):  # outside the ground truth
        results[f"extra{v}"] = [{"segment": [0.0, 5.0], "score": 0.5}] * (2 + 60 * v)
    database["v_train"] = {"subset": "training", "annotations": [{"segment": [0, 1]}]}
    return {"database": database}, {"results": results}


def write(tmp_path, truth, proposals):
    (tmp_path / "gt.json").write_text(json.dumps(truth))
    (tmp_path / "prop.json").write_text(json.dumps(proposals))
    return tmp_path / "gt.json", tmp_path / "prop.json"


def one_table(data, max_average, at):
    """The curve of one table padded to the largest video, as `jaxseg detection --proposals`
    computed it."""
    gt, gm = cli_grounding.pad(list(data.targets))
    table, pm = cli_grounding.pad(list(data.proposals), size=3)
    with jax.enable_x64(True):
        curve = jax.jit(proposal_average_recall, static_argnames=("max_average_proposals", "at"))(
            gt,
            table[..., :2],
            table[..., 2],
            target_mask=gm,
            proposal_mask=pm,
            max_average_proposals=max_average,
            at=at,
        )
        return jax.device_get(curve)


@pytest.mark.parametrize(("seed", "max_average"), [(0, 100), (1, 7), (2, 7)])
def test_groups_give_the_curve_of_one_padded_table_bit_for_bit(tmp_path, capsys, seed, max_average):
    truth, proposals = write(tmp_path, *skewed_dataset(seed))
    data = cli_grounding.read_activitynet_proposals(truth, proposals, "validation")
    assert len(cli_grounding.proposal_groups(data)) > 3
    assert len({rows[2] for video in data.proposals for rows in video}) <= 11  # ties
    at = cli_grounding._default_at(max_average)
    expected = one_table(data, max_average, at)
    assert 0 < expected.auc < 1 and np.isfinite(expected.recall).all()
    grouped = cli_grounding.proposal_curve(data, max_average, at)
    for name, value in expected._asdict().items():
        np.testing.assert_array_equal(np.asarray(getattr(grouped, name)), value, err_msg=name)
    argv = ["detection", "--proposals", truth, proposals, "--format", "json"]
    assert main([*map(str, argv), "--max-proposals", str(max_average)]) == 0
    summary = json.loads(capsys.readouterr().out)["summary"]
    assert [summary[f"AR@{a}"] for a in at] == [100 * float(x) for x in expected.at]
    assert summary["AUC"] == 100 * float(expected.auc)
    # percentages, as AR@n, AUC and the file's "unit" (it held fractions)
    assert summary["average_recall"] == [100 * float(x) for x in expected.average_recall]
    assert summary["proposals"] == sum(len(rows) for rows in data.proposals)


def test_a_file_without_proposals_gives_the_curve_of_one_table():
    targets = ([(0.0, 10.0), (20.0, 30.0)], [], [(5.0, 6.0)], [])
    data = cli_grounding.ProposalData(2, targets, ([], [], [], []))
    assert cli_grounding.proposal_groups(data) == []
    expected = one_table(data, 100, (1, 100))
    grouped = cli_grounding.proposal_curve(data, 100, (1, 100))
    assert (expected.recall == 0).all() and expected.auc == 0
    for name, value in expected._asdict().items():
        np.testing.assert_array_equal(np.asarray(getattr(grouped, name)), value, err_msg=name)


def test_tables_stay_within_four_times_the_data():
    """2000 videos of one proposal and one with 20,000: one padded table held 2001 x 20,000
    proposal slots and [V, P, G, T] IoU and hit tables of several GB."""
    one, window = [(0.0, 1.0, 0.5)], [(0.0, 1.0)]
    targets = (*[window] * 2001, [], window)
    proposals = (*[one] * 2000, one * 20000, one * 3, [])  # only in the proposal file; none
    data = cli_grounding.ProposalData(2002, targets, proposals)
    groups = cli_grounding.proposal_groups(data)
    assert [(g.proposal_mask.shape, g.target_mask.shape) for g in groups] == [
        ((2048, 1), (2048, 1)),
        ((1, 32768), (1, 1)),
    ]
    assert bucket(20000) == 32768
    proposal_slots = sum(g.proposal_mask.size for g in groups)
    target_slots = sum(g.target_mask.size for g in groups)
    assert proposal_slots <= 4 * (22000 + 2001) and target_slots <= 4 * (2001 + 2001)
    assert sorted(np.concatenate([g.videos for g in groups])) == list(range(2001))
    assert all((np.diff(g.videos) > 0).all() for g in groups)
    for g in groups:
        assert g.proposal_mask.sum() == sum(len(proposals[v]) for v in g.videos)
        assert g.target_mask.sum() == len(g.videos)
        assert g.proposals.shape == (*g.proposal_mask.shape, 2)
        assert g.scores.shape == g.proposal_mask.shape
        assert g.targets.shape == (*g.target_mask.shape, 2)
