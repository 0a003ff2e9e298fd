"""The demo dataset shipped in the package equals a fresh generation and has the GTEA shape."""

from __future__ import annotations

import numpy as np

from jaxseg import io
from jaxseg._host import demo


def _files(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_shipped_demo_equals_a_fresh_generation(tmp_path):
    demo.write_demo(tmp_path)
    shipped, fresh = _files(demo.DEMO_DIRECTORY), _files(tmp_path)
    assert sorted(shipped) == sorted(fresh)
    different = [name for name in fresh if shipped[name] != fresh[name]]
    assert different == []


def test_demo_is_small_and_gtea_shaped():
    assert sum(len(b) for b in _files(demo.DEMO_DIRECTORY).values()) < 300_000
    dataset = io.load_segmentation_dataset(
        demo.DEMO_DIRECTORY / "groundTruth", demo.DEMO_DIRECTORY / "predictions"
    )
    assert len(dataset.names) == 28
    assert dataset.class_names[-1] == "background" and len(dataset.class_names) == 11
    lengths = np.array([t.size for t in dataset.targets])
    assert 300 <= lengths.min() and lengths.max() <= 1500 and 500 <= lengths.mean() <= 1000
    truth, predicted = np.concatenate(dataset.targets), np.concatenate(dataset.predictions)
    assert set(np.unique(truth)) == set(range(11))  # every class occurs
    assert 0.6 < np.mean(truth == predicted) < 0.95  # a plausible model, neither perfect nor bad
    assert 0.1 < np.mean(truth == 10) < 0.5  # background between actions


def test_generator_is_deterministic_and_videos_differ():
    first, second = demo.demo_videos(), demo.demo_videos()
    assert first == second
    truths = {tuple(truth) for truth, _ in first.values()}
    assert len(truths) == 28
