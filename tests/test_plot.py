"""Pictures render to PNG files of the expected size with visible content."""

from __future__ import annotations

import struct
import sys

import numpy as np
import pytest

from jaxseg import plot

matplotlib = pytest.importorskip("matplotlib")  # the optional 'plot' extra
from matplotlib import image as mpimg  # noqa: E402

NAMES = ("take", "open", "pour", "close", "background")


def _png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def _colors(path):
    pixels = mpimg.imread(path)[..., :3]
    return {tuple(c) for c in np.round(pixels.reshape(-1, 3) * 255).astype(int)}


def test_timeline_png_size_and_class_colors(tmp_path):
    target = np.repeat([4, 0, 1, 4, 2], 40)
    prediction = np.repeat([4, 0, 0, 1, 4, 3], [40, 30, 10, 40, 40, 40])
    path = tmp_path / "timeline.png"
    figure = plot.timeline(
        target,
        prediction,
        class_names=NAMES,
        background=(4,),
        title="video",
        path=path,
        figsize=(8, 2),
        dpi=50,
    )
    assert _png_size(path) == (400, 100)
    assert figure.get_size_inches().tolist() == [8, 2]
    colors = _colors(path)
    palette = plot.class_colors(len(NAMES), background=(4,))
    for c in (0, 1, 2, 3, 4):  # every class that occurs is drawn in its palette colour
        rgb = tuple(int(palette[c][i : i + 2], 16) for i in (1, 3, 5))
        assert rgb in colors, (c, palette[c])
    legend = figure.legends[0]
    assert [t.get_text() for t in legend.get_texts()] == list(NAMES)


def test_palette_is_consistent_and_distinct():
    palette = plot.class_colors(48, background=(0,))
    assert palette == plot.class_colors(48, background=(0,))
    assert palette[0] == plot.class_colors(3, background=(0,))[0] == "#d9d9d9"
    assert len(set(palette[1:])) == 47
    assert plot.class_colors(3)[:2] == palette[1:3]  # classes keep their colour across pictures


def test_class_scores_and_confusion(tmp_path):
    f1 = np.array([80.0, 50.0, np.nan, 10.0, 95.0])
    accuracy = np.array([70.0, 60.0, np.nan, 0.0, 99.0])
    plot.class_scores(
        NAMES,
        {"F1": f1, "Acc": accuracy},
        title="scores",
        path=tmp_path / "bars.png",
        figsize=(6, 3),
        dpi=80,
    )
    assert _png_size(tmp_path / "bars.png") == (480, 240)
    assert len(_colors(tmp_path / "bars.png")) > 10
    matrix = np.array([[5, 1, 0], [0, 0, 0], [2, 0, 9]])
    figure = plot.confusion(matrix, class_names=NAMES[:3], path=tmp_path / "cm.png", dpi=40)
    assert _png_size(tmp_path / "cm.png") == (320, 280)
    texts = sorted(t.get_text() for t in figure.axes[0].texts)
    assert texts == sorted(["83", "17", "18", "82"])  # row-normalised percentages


def test_missing_matplotlib_gives_an_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"pip install 'jaxseg\[plot\]'"):
        plot.class_colors(3)
