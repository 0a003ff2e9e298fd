"""The golden reference numbers ship with the tests, so no golden test skips on a fresh clone."""

from __future__ import annotations

import json
import pathlib

import numpy as np
from conftest import GOLDEN_FILES, golden_path

HERE = pathlib.Path(__file__).resolve().parent


def test_every_golden_file_ships_in_tests_golden():
    folder = HERE / "golden"
    assert (folder / "README.md").is_file()  # the source of every number
    for name in GOLDEN_FILES:
        assert (folder / name).is_file(), name
        if name.endswith(".json"):
            data = json.loads((folder / name).read_text())
            assert data.get("anchor") or data.get("anchors"), name
        else:
            with np.load(folder / name) as arrays:  # no pickle
                assert arrays.files, name


def test_golden_path_reads_tests_golden(monkeypatch):
    monkeypatch.delenv("JAXSEG_GOLDEN", raising=False)
    assert golden_path("segmentation.json") == HERE / "golden" / "segmentation.json"
