"""Pictures render to PNG files of the expected size with visible content."""

from __future__ import annotations

import itertools
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
    assert _png_size(tmp_path / "cm.png") == (340, 280)  # 7 x 7 inches and a colour bar
    texts = sorted(t.get_text() for t in figure.axes[0].texts)
    assert texts == sorted(["83", "17", "18", "82"])  # row-normalised percentages


def test_names_with_dollar_signs_are_drawn_as_written(tmp_path):
    """Class and video names holding two ``$`` were read as mathtext: ``b$_$`` raised a
    ValueError when the PNG was written (a traceback from ``jaxseg evaluate --plot``) and
    ``$x$`` was drawn as an italic x. They are drawn as written."""
    names = ("bg", "b$_$", "$x$", "c$")
    target, prediction = np.repeat([0, 1, 2, 3], 5), np.repeat([0, 2, 1, 3], 5)
    figure = plot.timeline(
        target, prediction, class_names=names, title="v$^$", path=tmp_path / "timeline.png"
    )
    texts = [figure.axes[0].title, *figure.legends[0].get_texts()]
    matrix = np.array([[5, 0, 0, 0], [0, 3, 2, 0], [0, 2, 3, 0], [0, 0, 0, 5]])
    scores = {"F1": np.full(4, 50.0)}
    figure = plot.overview(matrix, scores, class_names=names, path=tmp_path / "overview.png")
    for axes in figure.axes[:2]:
        texts += [*axes.get_xticklabels(), *axes.get_yticklabels()]
    drawn = {text.get_text() for text in texts if not text.get_parse_math()}
    assert {*names, "v$^$"} <= drawn


def test_missing_matplotlib_gives_an_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"pip install 'jaxseg\[plot\]'"):
        plot.class_colors(3)


def _extents(figure, texts):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    renderer = canvas.get_renderer()
    shown = [t for t in texts if not hasattr(t, "get_text") or t.get_text()]
    return [t.get_window_extent(renderer) for t in shown]


def _no_overlap(boxes, axis):
    """Neighbouring boxes along ``axis`` (0 = x, 1 = y) do not overlap."""
    spans = sorted((b.x0, b.x1) if axis == 0 else (b.y0, b.y1) for b in boxes)
    return all(end <= start + 0.01 for (_, end), (start, _) in itertools.pairwise(spans))


@pytest.mark.parametrize("num_classes", [48, 200])
def test_overview_labels_stay_readable(num_classes):
    """At 48 classes the confusion-matrix labels used to overlap and the bar chart's legend
    covered bars. Every class label is drawn at 7 points without touching its neighbours,
    inside the picture, and the legend sits outside the bars."""
    rng = np.random.default_rng(num_classes)
    names = [f"action_{i:03d}_long_name" for i in range(num_classes)]
    matrix = rng.integers(0, 50, (num_classes, num_classes)) + 200 * np.eye(num_classes, dtype=int)
    scores = {"F1": rng.uniform(0, 100, num_classes), "Recall": rng.uniform(90, 100, num_classes)}
    figure = plot.overview(matrix, scores, class_names=names, dpi=30)
    bars, heatmap = figure.axes[0], figure.axes[1]
    width, height = figure.bbox.width, figure.bbox.height
    heatmap_labels = [heatmap.get_xticklabels(), heatmap.get_yticklabels()]
    for axes, axis_labels in ((bars, [bars.get_xticklabels()]), (heatmap, heatmap_labels)):
        for number, labels in enumerate(axis_labels):
            assert len(labels) == num_classes
            assert all(label.get_fontsize() >= 7 for label in labels)
            boxes = _extents(figure, labels)
            assert _no_overlap(boxes, 0 if number == 0 else 1), (axes.get_title(), number)
            assert all(b.x0 >= -1 and b.y0 >= -1 and b.x1 <= width + 1 and b.y1 <= height + 1
                       for b in boxes)  # fmt: skip
    (legend_box,) = _extents(figure, [bars.get_legend()])
    plot_area = bars.get_window_extent()
    assert legend_box.y0 >= plot_area.y1 - 1  # above the axes: it covers no bar


def test_class_scores_legend_is_outside_the_bars():
    names = [f"class {i}" for i in range(48)]
    full = {"F1": np.full(48, 100.0), "Acc": np.full(48, 100.0)}
    figure = plot.class_scores(names, full, dpi=30)
    (legend_box,) = _extents(figure, [figure.axes[0].get_legend()])
    assert legend_box.y0 >= figure.axes[0].get_window_extent().y1 - 1
    assert _no_overlap(_extents(figure, figure.axes[0].get_xticklabels()), 0)
