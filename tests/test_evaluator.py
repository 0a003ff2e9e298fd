"""The host-side Evaluator: golden dataset numbers, every way of adding videos, bad input.

Golden values (``golden/segmentation.json``) are percentages from the anchors' own scripts;
the Evaluator returns fractions. Its float64 arithmetic on exact counts matches them to 1e-12.
The synthetic videos of the other tests are at most 32 frames long with few segments, so all
of them share a handful of compiled programs.
"""

from __future__ import annotations

import collections
import logging
import math
import os
import re
import signal
import time
import warnings

import _reference as ref
import jax
import numpy as np
import pytest
from _videos import pad_batch, video_specs
from hypothesis import given
from hypothesis import strategies as st

from jaxseg import Evaluator, metrics
from jaxseg._host import evaluator as evaluator_module
from jaxseg._host.padding import length_groups

TAUS = (0.1, 0.25, 0.5)
GOLDEN_CLASSES = 14  # the golden labels are 0..11: classes 12 and 13 are absent (NaN)
CLOSE = dict(abs=1e-12)


# ------------------------------------------------------------------------------------------
# Golden dataset numbers.


@pytest.fixture(scope="module")
def golden(golden_segmentation):
    data, arrays = golden_segmentation
    names = [str(n) for n in arrays["names"]]
    assert names == [v["name"] for v in data["videos"]]
    return data, arrays, names


def add_rows(ev, golden, rows):
    _, arrays, names = golden
    rows = np.asarray(rows)
    ev.add(
        arrays["gt"][rows],
        arrays["pred"][rows],
        lengths=arrays["lengths"][rows],
        name=[names[i] for i in rows],
    )
    return ev


def subset_rows(golden):
    data, _, names = golden
    excluded = set(data["dataset"]["mstcn_bg0_finite_subset"]["excluded_videos"])
    assert excluded == set(data["dataset"]["asformer_bg0_finite_subset"]["excluded_videos"])
    return [i for i, n in enumerate(names) if n not in excluded], [
        i for i, n in enumerate(names) if n in excluded
    ]


@pytest.fixture(scope="module")
def no_background(golden):
    ev = Evaluator(num_classes=GOLDEN_CLASSES)
    return add_rows(ev, golden, range(len(golden[2])))


@pytest.fixture(scope="module")
def background_zero(golden):
    """``(per_video, finite-subset result, all-videos result)`` with background 0."""
    ev = Evaluator(background=(0,))
    subset, rest = subset_rows(golden)
    subset_result = add_rows(ev, golden, subset).get()
    all_result = add_rows(ev, golden, rest).get()
    return ev.per_video(), subset_result, all_result


def assert_dataset(result, anchor):
    assert result["accuracy"] == pytest.approx(anchor["acc"] / 100, **CLOSE)
    assert result["edit"] == pytest.approx(anchor["edit"] / 100, **CLOSE)
    for tau in TAUS:
        assert result["f1"][tau] == pytest.approx(anchor[f"f1@{tau}"] / 100, **CLOSE), tau
        tp, fp, fn = anchor[f"sum_tp_fp_fn@{tau}"]
        assert (result["tp"][tau], result["fp"][tau], result["fn"][tau]) == (tp, fp, fn), tau
        assert result["precision"][tau] == pytest.approx(tp / (tp + fp), **CLOSE)
        assert result["recall"][tau] == pytest.approx(tp / (tp + fn), **CLOSE)


def test_mstcn_no_background(golden, no_background):
    result = no_background.get()
    assert_dataset(result, golden[0]["dataset"]["mstcn_no_bg"])
    assert result["videos"] == 50
    assert result["frames"] == int(golden[1]["lengths"].sum())


def test_asformer_no_background(golden):
    ev = add_rows(Evaluator(legacy_asformer_end=True), golden, range(len(golden[2])))
    assert_dataset(ev.get(), golden[0]["dataset"]["asformer_no_bg"])


def test_mstcn_background_zero_finite_subset(golden, background_zero):
    assert_dataset(background_zero[1], golden[0]["dataset"]["mstcn_bg0_finite_subset"])


def test_asformer_background_zero_finite_subset(golden):
    ev = add_rows(
        Evaluator(background=(0,), legacy_asformer_end=True), golden, subset_rows(golden)[0]
    )
    assert_dataset(ev.get(), golden[0]["dataset"]["asformer_bg0_finite_subset"])


def test_kage1020_background_zero_all_videos(golden, background_zero):
    data = golden[0]
    anchor = data["dataset"]["kage1020_bg0_all_videos"]
    result = background_zero[2]
    assert result["accuracy"] == pytest.approx(anchor["acc"] / 100, **CLOSE)
    for tau, f1 in zip(TAUS, anchor["f1_fraction@0.1,0.25,0.5"], strict=True):
        assert result["f1"][tau] == pytest.approx(f1, **CLOSE)
    # kage1020 scores a video without segments on either side 0.0, jaxseg 1.0: correct for them.
    both_empty = [
        v for v in data["videos"] if v["mstcn_bg0"]["n_seg_gt"] == v["mstcn_bg0"]["n_seg_pred"] == 0
    ]
    assert len(both_empty) == 2 and all(v["kage1020_bg0"]["edit"] == 0.0 for v in both_empty)
    corrected = anchor["edit"] / 100 + len(both_empty) / len(data["videos"])
    assert result["edit"] == pytest.approx(corrected, **CLOSE)


def _golden_per_video(entry, index, arrays, key):
    """The anchor's per-video values as jaxseg reports them (fractions; documented choices)."""
    anchor = entry[key]
    n_gt, n_pred = anchor["n_seg_gt"], anchor["n_seg_pred"]
    counts = {}
    for tau in TAUS:
        value = entry[key][f"tp_fp_fn@{tau}"]
        if isinstance(value, dict):  # the anchor raised: kage1020's all-FP counts
            value = entry["kage1020_bg0"][f"tp_fp_fn@{tau}"]
        counts[tau] = tuple(int(x) for x in value)
    return {
        "frames": int(arrays["lengths"][index]),
        "accuracy": entry["correct_frames"] / entry["T"],
        "edit": 1.0 if anchor["edit"] is None else anchor["edit"] / 100,
        "target_segments": n_gt,
        "predicted_segments": n_pred,
        "counts": counts,
    }


def assert_per_video(per_video, golden, key):
    data, arrays, names = golden
    by_name = {v["name"]: v for v in per_video}
    assert sorted(by_name) == sorted(names)
    for index, entry in enumerate(data["videos"]):
        ours, expected = by_name[entry["name"]], _golden_per_video(entry, index, arrays, key)
        assert ours["frames"] == expected["frames"] == entry["T"]
        assert ours["accuracy"] == pytest.approx(expected["accuracy"], **CLOSE)
        assert ours["edit"] == pytest.approx(expected["edit"], **CLOSE), entry["name"]
        assert ours["target_segments"] == expected["target_segments"]
        assert ours["predicted_segments"] == expected["predicted_segments"]
        for tau in TAUS:
            counts = (ours["tp"][tau], ours["fp"][tau], ours["fn"][tau])
            assert counts == expected["counts"][tau], (entry["name"], tau)
            tp, fp, fn = counts
            f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0
            assert ours["f1"][tau] == pytest.approx(f1, **CLOSE)


def test_per_video_no_background(golden, no_background):
    per_video = no_background.per_video()
    assert [v["name"] for v in per_video] == golden[2]
    assert_per_video(per_video, golden, "mstcn_no_bg")


def test_per_video_background_zero(golden, background_zero):
    assert_per_video(background_zero[0], golden, "mstcn_bg0")


def test_class_accuracy_is_confusion_matrix_recall(golden, no_background):
    _, arrays, _ = golden
    valid = ref.lengths_to_mask(arrays["lengths"], arrays["gt"].shape[1])
    expected = ref.class_accuracy(arrays["gt"][valid], arrays["pred"][valid], GOLDEN_CLASSES)
    result = no_background.get()
    assert np.isnan(expected[12:]).all() and not np.isnan(expected[:12]).any()
    np.testing.assert_allclose(result["class_accuracy"], expected, rtol=0, atol=1e-12)
    assert result["mean_class_accuracy"] == pytest.approx(np.nanmean(expected), **CLOSE)


def test_statistics_are_the_per_video_sufficient_statistics(golden, no_background):
    s = no_background.statistics()
    np.testing.assert_array_equal(s.frames, golden[1]["lengths"])
    result = no_background.get()
    assert s.tp.shape == (50, 3)
    assert [int(x) for x in s.tp.sum(axis=0)] == [result["tp"][t] for t in TAUS]


# ------------------------------------------------------------------------------------------
# Every way of adding videos gives the same numbers.

SHORT = 32  # all synthetic videos fit one padded length


def short_videos():
    """Six 12-30 frame videos, labels 0-4, 4 target and 8 predicted segments each (so that
    every video needs the same segment capacities and compiled programs are shared)."""
    rng = np.random.default_rng(3)
    out = []
    for length in (12, 15, 19, 24, 30, 17):
        cuts = np.sort(rng.choice(np.arange(6, length), size=3, replace=False))
        segment = np.searchsorted(cuts, np.arange(length), side="right")
        target = np.cumsum(rng.integers(1, 5, size=4))[segment] % 5
        prediction = target.copy()
        prediction[[1, 3]] = (target[0] + rng.integers(1, 5)) % 5
        assert len(ref.runs(target)) == 4 and len(ref.runs(prediction)) == 8
        out.append((target.astype(np.int32), prediction.astype(np.int32)))
    return out


def padded(videos, fill=-1):
    y = np.full((len(videos), SHORT), fill, np.int32)
    p = np.full((len(videos), SHORT), fill, np.int32)
    for i, (t, q) in enumerate(videos):
        y[i, : len(t)], p[i, : len(q)] = t, q
    return y, p


def with_holes(videos, rng):
    """A padded batch whose valid frames are scattered (non-prefix mask) among garbage."""
    y = rng.integers(0, 5, size=(len(videos), SHORT)).astype(np.int32)
    p = rng.integers(0, 5, size=(len(videos), SHORT)).astype(np.int32)
    mask = np.zeros((len(videos), SHORT), bool)
    for i, (t, q) in enumerate(videos):
        where = np.sort(rng.choice(SHORT, size=len(t), replace=False))
        if len(t) < SHORT and where[-1] == len(t) - 1:  # make sure the mask is not a prefix
            where[-1] = SHORT - 1
        mask[i, where] = True
        y[i, where], p[i, where] = t, q
    assert not all(np.array_equal(m, np.arange(SHORT) < m.sum()) for m in mask)
    return y, p, mask


def assert_same_results(a: dict, b: dict):
    assert a.keys() == b.keys()
    for key in a:
        if key == "class_accuracy":
            np.testing.assert_array_equal(a[key], b[key])
        else:
            assert a[key] == b[key] or (a[key] != a[key] and b[key] != b[key]), key


def test_every_way_of_adding_gives_the_same_numbers():
    videos = short_videos()
    names = [f"clip{i}" for i in range(len(videos))]
    y, p = padded(videos)
    lengths = np.array([len(t) for t, _ in videos])
    y_holes, p_holes, holes = with_holes(videos, np.random.default_rng(0))

    def fresh():
        return Evaluator(num_classes=7)

    one_at_a_time = fresh()
    for name, (t, q) in zip(names, videos, strict=True):
        one_at_a_time.add(t, q, name=name)
    ways = {"one at a time": one_at_a_time}
    ways["list of arrays"] = fresh()
    ways["list of arrays"].add([t for t, _ in videos], [q for _, q in videos], name=names)
    ways["lists of ints"] = fresh()
    ways["lists of ints"].add(
        [t.tolist() for t, _ in videos], [q.tolist() for _, q in videos], name=names
    )
    ways["padded + lengths"] = fresh()
    ways["padded + lengths"].add(y, p, lengths=lengths, name=names)
    ways["padded + prefix mask"] = fresh()
    ways["padded + prefix mask"].add(y, p, mask=np.arange(SHORT) < lengths[:, None], name=names)
    ways["padded + scattered mask"] = fresh()
    ways["padded + scattered mask"].add(y_holes, p_holes, mask=holes, name=names)
    ways["two batches"] = fresh()
    ways["two batches"].add(y[:1], p[:1], lengths=lengths[:1], name=names[:1])
    ways["two batches"].add([t for t, _ in videos[1:]], [q for _, q in videos[1:]], name=names[1:])
    ways["one at a time, a list of one name each"] = fresh()
    for name, (t, q) in zip(names, videos, strict=True):
        ways["one at a time, a list of one name each"].add(t, q, name=[name])

    expected = ways["one at a time"].get()
    expected_per_video = ways["one at a time"].per_video()
    assert [v["name"] for v in expected_per_video] == names
    for way, ev in ways.items():
        assert_same_results(ev.get(), expected)
        assert ev.per_video() == expected_per_video, way

    # ... and those numbers are the oracle's.
    per_video = [ref.segmental_counts(t, q, TAUS) for t, q in videos]
    tp, fp, fn = (np.sum([c[k] for c in per_video], axis=0) for k in range(3))
    scores = ref.dataset_scores(
        lengths,
        [np.sum(t == q) for t, q in videos],
        [ref.edit_score(t, q) for t, q in videos],
        *(np.array([c[k] for c in per_video]) for k in range(3)),
    )
    assert expected["accuracy"] == pytest.approx(scores["accuracy"], **CLOSE)
    assert expected["edit"] == pytest.approx(scores["edit"], **CLOSE)
    assert [expected["f1"][t] for t in TAUS] == pytest.approx(list(scores["f1"]), **CLOSE)
    assert [expected["tp"][t] for t in TAUS] == tp.tolist()
    assert [expected["fn"][t] for t in TAUS] == fn.tolist()
    assert [expected["fp"][t] for t in TAUS] == fp.tolist()
    all_y = np.concatenate([t for t, _ in videos])
    all_p = np.concatenate([q for _, q in videos])
    class_accuracy = ref.class_accuracy(all_y, all_p, 7)
    assert np.isnan(class_accuracy[5:]).all()
    np.testing.assert_allclose(expected["class_accuracy"], class_accuracy, rtol=0, atol=1e-12)


def test_integral_floats_are_labels():
    t, q = short_videos()[1]
    as_int, as_float = Evaluator(), Evaluator()
    as_int.add(t, q)
    as_float.add(t.astype(np.float32), q.astype(np.float64))
    assert_same_results(as_int.get(), as_float.get())


@pytest.mark.parametrize("padding", [0, -1, np.iinfo(np.int32).max])
def test_int8_and_int32_buffers_agree(padding):
    # Labels in [0, 127] go to the device as int8 (from lists, or a batch whose padding is
    # also in range); a label of 127 + 1, or -1 padding, keeps them int32. The class counts
    # are sized by the valid labels, not by a sentinel in the padding.
    from jaxseg._host.padding import buffer_dtype

    assert buffer_dtype(127) == np.int8 and buffer_dtype(128) == np.int32
    videos = short_videos()
    shifted = [(t + 123, q + 123) for t, q in videos]  # labels 123-127
    wide = [(t + 200, q + 200) for t, q in videos]
    T = max(len(t) for t, _ in videos)
    lengths = np.array([len(t) for t, _ in videos])
    results = []
    for labels in (shifted, wide):
        ev = Evaluator()
        ev.add([t for t, _ in labels], [q for _, q in labels])
        padded = np.full((2, len(labels), T), padding, np.int32)
        for row, (t, q) in enumerate(labels):
            padded[0, row, : len(t)], padded[1, row, : len(q)] = t, q
        batch = Evaluator()
        batch.add(*padded, lengths=lengths)
        assert_same_results(ev.get(), batch.get())
        assert ev.per_video() == batch.per_video()
        results.append(ev.get())
    for key in ("accuracy", "edit", "f1", "tp", "fp", "fn", "mean_class_accuracy"):
        assert results[0][key] == results[1][key], key
    np.testing.assert_array_equal(
        results[0]["class_accuracy"][123:], results[1]["class_accuracy"][200:]
    )


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
def test_largest_label_of_long_lists(monkeypatch, dtype):
    # The labels of a long list are reduced a block of videos at a time (here 64 bytes: some
    # blocks of several videos, some videos larger than a block); a negative label anywhere
    # gives 2^63, as label_bound does.
    from jaxseg._host import padding

    monkeypatch.setattr(padding, "_BLOCK_BYTES", 64)
    rng = np.random.default_rng(int(np.dtype(dtype).itemsize))
    lengths = rng.integers(1, 40, 2 * 80)
    videos = [rng.integers(0, 100, n).astype(dtype) for n in lengths]
    targets, predictions = videos[:80], videos[80:]
    predictions[57][-1] = 200
    assert padding.largest_label(targets, predictions) == 200
    if np.dtype(dtype).kind == "i":
        targets[71][0] = -1
        assert padding.largest_label(targets, predictions) == 1 << 63


@pytest.mark.parametrize("late", [128, -1])
def test_a_label_outside_int8_in_a_late_block(monkeypatch, late):
    # A padded batch is copied into int8 buffers block by block, each block checked first;
    # a label outside [0, 127] in the last block sends the batch to int32 buffers (or, when
    # negative, to the error naming its video), never wrapped into int8.
    from jaxseg._host import padding

    rng = np.random.default_rng(5)
    batch, frames = 40, 600
    monkeypatch.setattr(padding, "_BLOCK_BYTES", 8 * frames * 4)  # 8 rows per block
    targets = np.repeat(rng.integers(0, 5, (batch, frames // 50)), 50, axis=1).astype(np.int32)
    predictions = np.where(rng.random((batch, frames)) < 0.02, 3, targets).astype(np.int32)
    predictions[-1, 7] = late
    lengths = np.full(batch, frames)
    padded, listed = Evaluator(), Evaluator()
    if late < 0:
        with pytest.raises(ValueError, match=r"video 39: predictions hold a negative label"):
            padded.add(targets, predictions, lengths=lengths)
        return
    padded.add(targets, predictions, lengths=lengths)
    listed.add(list(targets), list(predictions))
    assert_same_results(padded.get(), listed.get())
    assert padded.per_video() == listed.per_video()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork")
@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # JAX's; the child uses numpy only
def test_host_copies_work_in_a_forked_child():
    # The copy threads do not survive a fork; the child must start its own, not wait forever.
    from jaxseg._host import padding

    sources = [np.arange(6), np.arange(6) * 2]
    list(padding._COPIERS.map(time.sleep, (0.05, 0.05)))  # both of the parent's threads idle
    pid = os.fork()
    if pid == 0:  # child: numpy only, killed by the alarm if a copy never runs
        signal.alarm(20)
        destinations = [np.zeros(6, int), np.zeros(6, int)]
        padding.copy_pair(destinations, sources)
        os._exit(0 if all(map(np.array_equal, destinations, sources)) else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.uint32])
def test_padded_batches_of_wide_dtypes_equal_int32(dtype):
    # Only the valid frames are checked: NaN or out-of-range padding is fine.
    videos = short_videos()[:3]
    T = max(len(t) for t, _ in videos)
    lengths = np.array([len(t) for t, _ in videos])
    pad = np.nan if dtype == np.float64 else np.iinfo(dtype).max
    padded = [np.full((3, T), pad, dtype) for _ in range(2)]
    for row, (t, q) in enumerate(videos):
        padded[0][row, : len(t)], padded[1][row, : len(q)] = t, q
    as_int, wide = Evaluator(), Evaluator()
    as_int.add([t for t, _ in videos], [q for _, q in videos])
    wide.add(*padded, lengths=lengths)
    assert_same_results(as_int.get(), wide.get())


def test_num_classes_is_inferred_as_labels_grow():
    ev = Evaluator()
    ev.add([0, 1, 1], [0, 1, 2])
    assert ev.get()["class_accuracy"].shape == (3,)
    ev.add([4, 4, 0], [4, 0, 0])
    result = ev.get()
    expected = ref.class_accuracy([0, 1, 1, 4, 4, 0], [0, 1, 2, 4, 0, 0], 5)
    assert result["class_accuracy"].shape == (5,)
    np.testing.assert_allclose(result["class_accuracy"], expected, rtol=0, atol=1e-12)
    assert math.isnan(result["class_accuracy"][3]) and result["class_accuracy"][2] == 0.0
    assert result["mean_class_accuracy"] == pytest.approx(np.nanmean(expected), **CLOSE)


def test_reset_forgets():
    videos = short_videos()
    ev = Evaluator()
    ev.add(*videos[0])
    ev.add(*videos[1])
    ev.reset()
    with pytest.raises(ValueError, match="no video"):
        ev.get()
    ev.add(*videos[2], name="after reset")
    fresh = Evaluator()
    fresh.add(*videos[2], name="after reset")
    assert_same_results(ev.get(), fresh.get())
    assert ev.per_video() == fresh.per_video()
    assert ev.get()["videos"] == 1


# ------------------------------------------------------------------------------------------
# Bad input.

BAD_INPUTS = {
    "length mismatch": (
        dict(gt=[1, 2, 3], pred=[1, 2], name="clip7"),
        r"clip7: targets have 3 frames but predictions have 2",
    ),
    "negative target": (
        dict(gt=[0, -1, 1], pred=[0, 1, 1], name="neg"),
        r"neg: targets hold a negative label \(-1\)",
    ),
    "negative prediction": (
        dict(gt=[0, 1, 1], pred=[0, 1, -3], name="negp"),
        r"negp: predictions hold a negative label \(-3\)",
    ),
    "negative int8 target": (
        dict(gt=np.array([0, -1, 1], np.int8), pred=np.array([0, 1, 1], np.int8), name="n8"),
        r"n8: targets hold a negative label \(-1\)",
    ),
    "negative int16 prediction": (
        dict(gt=np.array([0, 1, 1], np.int16), pred=np.array([0, -128, 1], np.int16), name="n16"),
        r"n16: predictions hold a negative label \(-128\)",
    ),
    "uint32 label beyond int32": (
        dict(gt=np.array([0, 2**31], np.uint32), pred=np.array([0, 1], np.uint32), name="u32"),
        r"u32: targets hold labels outside the int32 range",
    ),
    "uint32 label beyond int32 in a padded batch": (
        dict(
            gt=np.array([[0, 1], [0, 2**31]], np.uint32),
            pred=np.ones((2, 2), np.uint32),
            lengths=np.array([2, 2]),
            name=["a", "b"],
        ),
        r"b: targets hold labels outside the int32 range",
    ),
    "label >= num_classes": (
        dict(gt=[0, 1, 2], pred=[0, 3, 2], name="big"),
        r"big: predictions hold label 3, outside \[0, num_classes=3\)",
    ),
    "fractional floats": (
        dict(gt=[0.0, 1.5, 1.0], pred=[0, 1, 1], name="frac"),
        r"frac: targets must be integer labels, got non-integer values",
    ),
    "fractional floats in a padded batch": (
        dict(
            gt=np.ones((2, 3)),
            pred=np.array([[0.0, 1.0, 1.0], [0.0, 1.5, 1.0]]),
            lengths=np.array([3, 3]),
            name=["a", "b"],
        ),
        r"b: predictions must be integer labels, got non-integer values",
    ),
    "NaN": (
        dict(gt=[0, 1, 1], pred=[0.0, float("nan"), 1.0], name="nan"),
        r"nan: predictions must be integer labels",
    ),
    "strings": (
        dict(gt=["a", "b"], pred=[0, 1], name="text"),
        r"text: targets must be integer labels, got dtype <U1",
    ),
    # the metrics refuse bool labels; True/False are no classes but a comparison or a mask
    "bool labels": (
        dict(gt=[0, 1, 1], pred=np.array([True, False, True]), name="b"),
        r"b: predictions must be integer labels, got dtype bool",
    ),
    "bool labels in a padded batch": (
        dict(gt=np.ones((2, 3), bool), pred=np.ones((2, 3), int), lengths=[3, 2], name=["a", "b"]),
        r"a: targets must be integer labels, got dtype bool",
    ),
    "rows of unequal length with lengths": (
        dict(gt=[[0, 1, 1], [0, 1]], pred=[[0, 1, 1], [0, 1]], lengths=[3, 2], name=["a", "b"]),
        r"b: targets of a padded batch .* same T = 3 frames, got shape \(2,\)",
    ),
    "rows of unequal length with a mask": (
        dict(
            gt=[[0, 1, 1], [0, 1, 1]],
            pred=[[0, 1, 1], [0, 1]],
            mask=np.ones((2, 3), bool),
            name=["a", "b"],
        ),
        r"b: predictions of a padded batch .* same T = 3 frames, got shape \(2,\)",
    ),
    "a padded batch of no video": (
        dict(gt=np.ones((0, 4), int), pred=np.ones((0, 4), int), lengths=np.ones(0, int)),
        r"the padded batch holds no video \(targets of shape \(0, 4\)\)",
    ),
    "empty video": (dict(gt=[], pred=[], name="void"), r"void: targets is empty \(0 frames\)"),
    "empty row of a padded batch": (
        dict(
            gt=np.ones((2, 4), int),
            pred=np.ones((2, 4), int),
            lengths=np.array([4, 0]),
            name=["a", "b"],
        ),
        r"b: the video is empty",
    ),
    "all-False mask row": (
        dict(
            gt=np.ones((2, 4), int),
            pred=np.ones((2, 4), int),
            mask=np.array([[True] * 4, [False] * 4]),
            name=["a", "b"],
        ),
        r"b: the video is empty",
    ),
    "batch counts differ": (
        dict(gt=[[1, 2], [1]], pred=[[1, 2]]),
        r"targets hold 2 videos but predictions hold 1",
    ),
    "padded shapes differ": (
        dict(gt=np.ones((2, 4), int), pred=np.ones((2, 5), int), lengths=np.array([4, 4])),
        r"same shape \[B, T\], got \(2, 4\) and \(2, 5\)",
    ),
    "mask shape": (
        dict(gt=np.ones((2, 4), int), pred=np.ones((2, 4), int), mask=np.ones((2, 3), bool)),
        r"mask must be bool of shape \(2, 4\), got bool \(2, 3\)",
    ),
    "integer mask": (
        dict(gt=np.ones((2, 4), int), pred=np.ones((2, 4), int), mask=np.ones((2, 4), int)),
        r"mask must be bool of shape \(2, 4\), got int64",
    ),
    "lengths beyond T": (
        dict(gt=np.ones((2, 4), int), pred=np.ones((2, 4), int), lengths=np.array([4, 5])),
        r"lengths must be 2 integers in \[1, 4\]",
    ),
    "negative lengths": (
        dict(gt=np.ones((2, 4), int), pred=np.ones((2, 4), int), lengths=np.array([4, -1])),
        r"lengths must be 2 integers in \[1, 4\], got array\(\[ 4, -1\]\)",
    ),
    "mask and lengths": (
        dict(
            gt=np.ones((2, 4), int),
            pred=np.ones((2, 4), int),
            lengths=np.array([4, 4]),
            mask=np.ones((2, 4), bool),
        ),
        r"mask or lengths, not both",
    ),
    "names count": (
        dict(gt=[[1, 2], [1]], pred=[[1, 2], [1]], name=["only one"]),
        r"name holds 1 names for 2 videos",
    ),
    # a string is one name: "ab" named two videos 'a' and 'b'
    "one name, two videos": (
        dict(gt=[[1, 2], [1]], pred=[[1, 2], [1]], name="ab"),
        r"name is one name, 'ab', for 2 videos; give a list of 2",
    ),
    "one name, a padded batch of two": (
        dict(gt=np.ones((2, 4), int), pred=np.ones((2, 4), int), lengths=[4, 4], name="ab"),
        r"name is one name, 'ab', for 2 videos",
    ),
    "two names, one video": (
        dict(gt=[1, 2], pred=[1, 2], name=["a", "b"]),
        r"name holds 2 names for 1 videos",
    ),
    # Labels index per-class count tables: 2**28 asked for 6-13 GB, 2**31 - 1 overflowed.
    "label 2**28, past the class tables": (
        dict(gt=[0, 2**28, 2**28], pred=[0, 2**28, 2**28], name="huge"),
        r"huge: targets hold label 268435456; .* labels below 2\*\*20 = 1048576",
    ),
    "label 2**31 - 1, past the class tables": (
        dict(gt=[0, 1, 1], pred=[0, 2**31 - 1, 2**31 - 1], name="top"),
        r"top: predictions hold label 2147483647; .* labels below 2\*\*20",
    ),
    "label 2**31 - 1 in a padded batch": (
        dict(
            gt=np.array([[0, 1, 1], [0, 2**31 - 1, 7]]),
            pred=np.ones((2, 3), int),
            lengths=np.array([3, 2]),
            name=["a", "b"],
        ),
        r"b: targets hold label 2147483647; .* labels below 2\*\*20",
    ),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_raises_and_changes_nothing(case):
    kwargs, message = BAD_INPUTS[case]
    ev = Evaluator(num_classes=3 if case == "label >= num_classes" else None)
    ev.add([0, 1, 1, 2], [0, 1, 2, 2], name="good")
    before, per_video = ev.get(), ev.per_video()
    gt, pred = kwargs.pop("gt"), kwargs.pop("pred")
    with pytest.raises(ValueError, match=message):
        ev.add(gt, pred, **kwargs)
    assert_same_results(ev.get(), before)
    assert ev.per_video() == per_video


def test_names_are_any_iterable_and_a_number_is_refused():
    ev = Evaluator()
    with pytest.raises(TypeError, match=r"name must be a string or an iterable of 1 names, got 5"):
        ev.add([0, 1], [0, 1], name=5)
    with pytest.raises(ValueError, match="no video"):
        ev.get()
    ev.add([[0, 1], [1, 1]], [[0, 1], [1, 0]], name=(f"clip {i}" for i in range(2)))
    ev.add(np.ones((1, 2), int), np.ones((1, 2), int), lengths=[2], name=np.array(["last"]))
    assert [v["name"] for v in ev.per_video()] == ["clip 0", "clip 1", "last"]


def test_num_classes_past_the_class_tables_is_refused():
    with pytest.raises(ValueError, match=r"num_classes must be at most 2\*\*20"):
        Evaluator(num_classes=2**28)


@pytest.mark.parametrize(
    ("num_classes", "bad", "message"),
    [
        (None, -2, r"clip 50: predictions hold a negative label \(-2\)"),
        (5, 5, r"clip 50: predictions hold label 5, outside \[0, num_classes=5\)"),
    ],
)
@pytest.mark.parametrize("dtype", [np.int32, np.int16])
def test_bad_label_in_a_long_list_names_its_video(num_classes, bad, message, dtype):
    # Many videos of one dtype are range-checked with one reduction; the error still names
    # the video, and nothing of the failed call is kept.
    videos = [(t.astype(dtype), q.astype(dtype)) for t, q in short_videos() * 12]
    targets, predictions = [t for t, _ in videos], [q.copy() for _, q in videos]
    predictions[50][3] = bad
    ev = Evaluator(num_classes=num_classes)
    ev.add(*short_videos()[0])
    before = ev.get()
    with pytest.raises(ValueError, match=message):
        ev.add(targets, predictions, name=[f"clip {i}" for i in range(len(videos))])
    assert_same_results(ev.get(), before)


@pytest.mark.parametrize("background", [(0,), (0, 3), (6,)])
@pytest.mark.parametrize("num_classes", [None, 8])
def test_class_accuracy_counts_background_frames(background, num_classes):
    # Background frames are in no segment table; their class counts come from the frame pass.
    rng = np.random.default_rng(len(background) + (num_classes or 0))
    videos = [
        (rng.integers(0, 7, size=n).astype(np.int32), rng.integers(0, 7, size=n).astype(np.int32))
        for n in (5, 17, 30, 9)
    ]
    videos.append((np.full(6, background[0], np.int32), np.full(6, background[-1], np.int32)))
    lengths = np.array([len(t) for t, _ in videos])
    y, p = padded(videos)
    as_lists, as_padded = Evaluator(num_classes, background), Evaluator(num_classes, background)
    as_lists.add([t for t, _ in videos], [q for _, q in videos])
    as_padded.add(y, p, lengths=lengths)
    all_y = np.concatenate([t for t, _ in videos])
    all_p = np.concatenate([q for _, q in videos])
    expected = ref.class_accuracy(
        all_y, all_p, num_classes or int(max(all_y.max(), all_p.max())) + 1
    )
    for ev in (as_lists, as_padded):
        np.testing.assert_allclose(ev.get()["class_accuracy"], expected, rtol=0, atol=1e-12)


_SPEC_CLASSES = 200  # video_specs' labels are below it


@given(
    specs=st.lists(video_specs(600), min_size=6, max_size=6),
    background=st.sampled_from([(), (0,), (0, 3)]),
)
def test_class_counts_are_the_confusion_matrix_sums(specs, background):
    """The counts behind class accuracy and the CLI's per-class table (from the Evaluator's
    segment tables and background frames) are the row sums, column sums and diagonal of the
    public confusion matrix of the same frames, background classes and masks with gaps
    included."""
    targets, predictions, mask, _ = pad_batch(specs, 600)
    if not mask.any(axis=1).all():
        mask[:, 0] = True  # the Evaluator takes no empty video
    ev = Evaluator(num_classes=_SPEC_CLASSES, background=background)
    ev.add(targets, predictions, mask=mask)
    confusion = np.asarray(
        metrics.confusion_matrix(targets, predictions, num_classes=_SPEC_CLASSES, mask=mask)
    ).sum(axis=0)
    counts = ev.class_counts()
    np.testing.assert_array_equal(counts.support, confusion.sum(axis=1))
    np.testing.assert_array_equal(counts.predicted, confusion.sum(axis=0))
    np.testing.assert_array_equal(counts.correct, np.diagonal(confusion))
    support = counts.support.astype(float)
    recall = np.divide(counts.correct, support, out=np.zeros(support.size), where=support > 0)
    np.testing.assert_allclose(ev.get()["class_accuracy"][support > 0], recall[support > 0])


def test_class_counts_have_num_classes_entries_before_any_video():
    """``class_counts()`` promises ``[C]`` counts; with ``num_classes`` given it returned
    empty arrays until a video was added (and again after ``reset``)."""
    ev = Evaluator(num_classes=4)
    for _ in range(2):
        counts = ev.class_counts()
        for values in counts:
            np.testing.assert_array_equal(values, np.zeros(4, np.int64))
        ev.add([0, 1], [0, 2])
        assert ev.class_counts().predicted.tolist() == [1, 0, 1, 0]
        ev.reset()
    assert Evaluator().class_counts().support.shape == (0,)  # C is not known yet


def test_background_only_labels_set_the_inferred_class_count():
    ev = Evaluator(background=(9,))
    ev.add([9, 9, 1], [9, 1, 1])
    expected = ref.class_accuracy([9, 9, 1], [9, 1, 1], 10)
    np.testing.assert_allclose(ev.get()["class_accuracy"], expected, rtol=0, atol=1e-12)
    absent = Evaluator(background=(9,))  # a background label that never occurs
    absent.add([0, 2, 2], [0, 2, 1])
    expected = ref.class_accuracy([0, 2, 2], [0, 2, 1], 3)
    np.testing.assert_allclose(absent.get()["class_accuracy"], expected, rtol=0, atol=1e-12)
    for label in (-9, 2**32):  # cannot occur: labels are never negative, nor past 2**20
        never = Evaluator(background=(label,))  # 2**32 raised OverflowError naming nothing
        never.add([0, 2, 2], [0, 2, 1])
        np.testing.assert_allclose(never.get()["class_accuracy"], expected, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="outside"):
        Evaluator(num_classes=5, background=(9,)).add(
            np.array([[9, 9, 1]]), np.array([[1, 1, 1]]), lengths=[3]
        )


# ------------------------------------------------------------------------------------------
# A first evaluation compiles phase 2 beside phase 1, for capacities counted on the host.


def runs_of(rng, length, num_classes, longest):
    """Labels made of runs of 1..longest frames."""
    labels = rng.integers(0, num_classes, length)
    return np.repeat(labels, rng.integers(1, longest + 1, length))[:length]


def test_a_first_evaluation_compiles_each_program_once(caplog):
    # Phase 1 counts the segments, phase 2 runs at those capacities: one compilation each.
    rng = np.random.default_rng(5)
    videos = []
    for _ in range(13):  # a batch shape and options no other test uses
        n = int(rng.integers(700, 1100))
        t = runs_of(rng, n, 9, 120)
        videos.append((t, np.where(rng.random(n) < 0.9, t, runs_of(rng, n, 9, 3))))
    ev = Evaluator(num_classes=9, background=(5,), iou_thresholds=(0.3, 0.7))
    jax.config.update("jax_log_compiles", True)
    try:
        with caplog.at_level(logging.WARNING, logger="jax._src.dispatch"):
            ev.add([t for t, _ in videos], [q for _, q in videos])
            result = ev.get()
    finally:
        jax.config.update("jax_log_compiles", False)
    compiled = collections.Counter(re.findall(r"XLA compilation of jit\((\w+)\)", caplog.text))
    assert {name: compiled[name] for name in compiled if name.startswith("_")} == {
        "_survey": 1,
        "_tabulate": 1,
        "_measure": 1,
    }
    tp, fp, fn = (
        np.sum([ref.segmental_counts(t, q, (0.3, 0.7), background=(5,))[k] for t, q in videos], 0)
        for k in range(3)
    )
    assert [result["tp"][tau] for tau in (0.3, 0.7)] == tp.tolist()
    assert [result["fp"][tau] for tau in (0.3, 0.7)] == fp.tolist()
    assert [result["fn"][tau] for tau in (0.3, 0.7)] == fn.tolist()


def test_phase_one_writes_over_the_words_of_the_last_batch_of_its_shape():
    """Phase 1 gets the boundary words of the last batch of its padded shape, donated, and
    XLA writes the new ones over them (fresh memory would be faulted in on every call); a
    batch of another shape starts from new buffers. Nothing warns that a donated buffer was
    left unused, and the numbers are those of a fresh Evaluator per batch."""
    rng = np.random.default_rng(3)
    batches = [rng.integers(0, 4, (2, 5, T)) for T in (100, 100, 300)]
    ev = Evaluator(background=(0,))
    words = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for targets, predictions in batches:
            ev.add(targets, predictions, lengths=np.full(5, targets.shape[1]))
            words.append(jax.tree.leaves(ev._reused[1]))
    assert all(x.is_deleted() for x in words[0])  # the second batch wrote over them
    assert not any(x.is_deleted() for x in words[1] + words[2])  # the third had its own
    fresh = []
    for targets, predictions in batches:
        one = Evaluator(background=(0,))
        one.add(targets, predictions, lengths=np.full(5, targets.shape[1]))
        fresh.append(one.statistics())
    stacked = jax.tree.map(lambda *xs: np.concatenate(xs), *fresh)
    jax.tree.map(np.testing.assert_array_equal, ev.statistics(), stacked)


def test_length_groups_partition_and_bound_the_padding():
    rng = np.random.default_rng(11)
    for lengths in ([300] * 27 + [20_000_000], rng.integers(1, 5000, 300), [7] * 5):
        lengths = np.asarray(lengths)
        groups = length_groups(lengths, waste=4096)
        np.testing.assert_array_equal(np.sort(np.concatenate(groups)), np.arange(len(lengths)))
        for group in groups:
            padding = len(group) * lengths[group].max() - lengths[group].sum()
            assert len(group) == 1 or padding <= 4096
    groups = length_groups([300] * 27 + [20_000_000], waste=1 << 23)
    assert [g.tolist() for g in groups] == [[27], list(range(27))]


def test_one_long_video_is_not_padding_for_the_others(monkeypatch):
    """Videos queued together are padded in groups: the padded frames stay within the data
    plus the allowed waste per group, and the numbers and the order are those of adding the
    videos one at a time."""
    monkeypatch.setattr(evaluator_module, "_GROUP_WASTE", 1000)
    videos = short_videos() * 4
    rng = np.random.default_rng(5)
    long_target = np.repeat(rng.integers(0, 5, 40), 150).astype(np.int32)  # 6000 frames
    long_prediction = np.where(rng.random(6000) < 0.1, 1, long_target).astype(np.int32)
    videos.insert(7, (long_target, long_prediction))
    shapes = []
    process = Evaluator._process

    def spy(self, names, padded_t, *rest):
        shapes.append((len(names), padded_t.shape))
        return process(self, names, padded_t, *rest)

    monkeypatch.setattr(Evaluator, "_process", spy)
    ev = Evaluator(background=(0,))
    ev.add([t for t, _ in videos], [p for _, p in videos])
    together = ev.get()
    frames = sum(len(t) for t, _ in videos)
    padded_frames = sum(count * shape[1] for count, shape in shapes)  # rows holding videos
    assert len(shapes) >= 2 and padded_frames <= frames + 1000 * len(shapes) + 32 * len(videos)
    assert padded_frames < len(videos) * 6000 // 4  # one batch would pad every video to 6000
    one_by_one = Evaluator(background=(0,))
    for t, p in videos:
        one_by_one.add(t, p)
        one_by_one.get()  # evaluates this video alone
    assert_same_results(together, one_by_one.get())
    assert ev.per_video() == one_by_one.per_video()
    for a, b in zip(ev.statistics(), one_by_one.statistics(), strict=True):
        np.testing.assert_array_equal(a, b)


def test_no_process_global_state():
    # What an Evaluator remembers (shapes compiled ahead, buffers) belongs to the instance:
    # the module holds constants and functions only.
    from concurrent import futures

    mutable = (set, dict, list, futures.Executor)
    state = [
        name
        for name, value in vars(evaluator_module).items()
        if not name.startswith("__") and isinstance(value, mutable)
    ]
    assert not state, state
