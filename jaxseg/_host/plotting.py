"""Pictures of segmentation results (matplotlib, imported only when a picture is drawn).

Figures are built with ``matplotlib.figure.Figure`` (no pyplot, no global state) and written
as PNG with the Agg renderer, so they work on machines without a display. Each function
returns the figure and, given ``path``, also writes it; the pixel size is ``figsize * dpi``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

BACKGROUND_COLOR = "#d9d9d9"
# Names from the data (class names, a video's name) are drawn as written: matplotlib reads a
# text with two unescaped ``$`` as mathtext, which failed on a name such as ``b$_$`` (and
# drew ``$x$`` as an italic x).
_AS_WRITTEN = {"parse_math": False}


def _matplotlib():
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError(
            "jaxseg's pictures need matplotlib: pip install 'jaxseg[plot]' (or matplotlib)"
        ) from None
    return matplotlib, Figure


def class_colors(num_classes: int, *, background: Sequence[int] = ()) -> list[str]:
    """One colour per class, the same in every picture (tab20, 20b, 20c), background in grey.

    Args:
      num_classes: number of classes C.
      background: class indices drawn in light grey.

    Returns:
      C colours as ``#rrggbb`` strings (repeating after 60 action classes).

    >>> class_colors(3, background=(0,))
    ['#d9d9d9', '#1f77b4', '#ff7f0e']
    """
    matplotlib, _ = _matplotlib()
    pairs = matplotlib.colormaps["tab20"].colors  # dark/light pairs: all darks first
    cycle = [
        matplotlib.colors.to_hex(color)
        for color in (
            *pairs[0::2],
            *pairs[1::2],
            *matplotlib.colormaps["tab20b"].colors,
            *matplotlib.colormaps["tab20c"].colors,
        )
    ]
    colors, action = [], 0
    for index in range(num_classes):
        if index in background:
            colors.append(BACKGROUND_COLOR)
        else:
            colors.append(cycle[action % len(cycle)])
            action += 1
    return colors


def _save(figure, path: str | os.PathLike | None, dpi: int):
    if path is not None:
        figure.savefig(os.fspath(path), dpi=dpi, format="png")
    return figure


def timeline(
    target: np.ndarray,
    prediction: np.ndarray,
    *,
    class_names: Sequence[str],
    background: Sequence[int] = (),
    title: str | None = None,
    path: str | os.PathLike | None = None,
    figsize: tuple[float, float] = (10.0, 2.4),
    dpi: int = 100,
):
    """Barcode picture of one video: ground truth above, prediction below, one colour per class.

    Args:
      target: int ``[T]`` ground-truth class indices.
      prediction: int ``[T]`` predicted class indices.
      class_names: the C class names (the legend shows the classes that occur).
      background: class indices drawn in grey.
      title: shown above the picture (e.g. the video name), as written (no mathtext).
      path: if given, the PNG is written there.
      figsize: size in inches; the PNG has ``figsize * dpi`` pixels.
      dpi: pixels per inch.

    Returns:
      The ``matplotlib.figure.Figure``.

    >>> figure = timeline(
    ...     np.array([0, 0, 1, 1, 2]), np.array([0, 1, 1, 1, 2]),
    ...     class_names=["background", "cut", "pour"], background=(0,),
    ... )
    >>> [text.get_text() for text in figure.legends[0].get_texts()]
    ['background', 'cut', 'pour']
    """
    matplotlib, Figure = _matplotlib()
    colors = class_colors(len(class_names), background=background)
    rows = np.stack([np.asarray(target), np.asarray(prediction)])
    figure = Figure(figsize=figsize, dpi=dpi, layout="constrained")
    axes = figure.add_subplot()
    cmap = matplotlib.colors.ListedColormap(colors)
    axes.imshow(
        rows,
        aspect="auto",
        interpolation="nearest",
        cmap=cmap,
        vmin=-0.5,
        vmax=len(colors) - 0.5,
        extent=(0, rows.shape[1], 1.5, -0.5),
    )
    axes.set_yticks([0, 1], ["ground truth", "prediction"])
    axes.set_xlabel("frame")
    if title:
        axes.set_title(title, fontsize="medium", **_AS_WRITTEN)
    present = np.unique(rows)
    handles = [matplotlib.patches.Patch(color=colors[c], label=class_names[c]) for c in present]
    columns = -(-len(handles) // 10)  # at most 10 names a column: many classes stay readable
    legend = figure.legend(
        handles=handles, loc="outside right center", fontsize="small", frameon=False,
        ncols=columns,
    )  # fmt: skip
    for text in legend.get_texts():
        text.set(**_AS_WRITTEN)
    return _save(figure, path, dpi)


# Class labels are drawn at LABEL_POINTS and each class gets CLASS_INCHES along an axis, so
# that neighbouring labels never overlap, at 10 classes as at 200 (the picture grows instead).
LABEL_POINTS = 7.0
CLASS_INCHES = 0.16


def _class_axis_inches(num_classes: int, minimum: float) -> float:
    return max(minimum, CLASS_INCHES * num_classes + 2.5)


def _draw_class_scores(axes, class_names, scores, *, title=None):
    positions = np.arange(len(class_names))
    width = 0.8 / max(len(scores), 1)
    for number, (label, values) in enumerate(scores.items()):
        offset = (number - (len(scores) - 1) / 2) * width
        axes.bar(positions + offset, np.nan_to_num(values, nan=0.0), width, label=label)
    axes.set_xticks(positions, class_names, rotation=90, fontsize=LABEL_POINTS, **_AS_WRITTEN)
    axes.set_xlim(-0.6, len(class_names) - 0.4)
    axes.set_ylim(0, 100)
    axes.set_ylabel("%")
    # above the bars, outside the axes: a legend never covers a bar
    axes.legend(
        fontsize="small", loc="lower right", bbox_to_anchor=(1.0, 1.0), ncols=len(scores),
        frameon=False, borderaxespad=0.2,
    )  # fmt: skip
    if title:
        axes.set_title(title, fontsize="medium", loc="left")


def class_scores(
    class_names: Sequence[str],
    scores: dict[str, Sequence[float]],
    *,
    title: str | None = None,
    path: str | os.PathLike | None = None,
    figsize: tuple[float, float] | None = None,
    dpi: int = 100,
):
    """Grouped bar chart of per-class scores in percent (e.g. frame F1 and accuracy).

    Args:
      class_names: the C class names (x axis).
      scores: series name -> C values in percent; NaN (class absent) draws no bar.
      title: shown above the chart.
      path: if given, the PNG is written there.
      figsize: size in inches; the PNG has ``figsize * dpi`` pixels. Default: wide enough
        for every class label (``0.16 C + 2.5`` inches, at least 10), 4 inches high.
      dpi: pixels per inch.

    Returns:
      The ``matplotlib.figure.Figure``; the legend sits above the bars, outside the axes.

    >>> figure = class_scores(["cut", "pour"], {"F1": [80.0, 55.5], "Acc": [90.0, np.nan]})
    >>> figure.get_size_inches().tolist()
    [10.0, 4.0]
    """
    _, Figure = _matplotlib()
    if figsize is None:
        figsize = (_class_axis_inches(len(class_names), 10.0), 4.0)
    figure = Figure(figsize=figsize, dpi=dpi, layout="constrained")
    _draw_class_scores(figure.add_subplot(), class_names, scores, title=title)
    return _save(figure, path, dpi)


def confusion(
    matrix: np.ndarray,
    *,
    class_names: Sequence[str],
    title: str | None = None,
    path: str | os.PathLike | None = None,
    figsize: tuple[float, float] | None = None,
    dpi: int = 100,
):
    """Heatmap of a confusion matrix, each row normalised to the fraction of its true frames.

    Args:
      matrix: int ``[C, C]`` counts, rows = ground truth, columns = prediction.
      class_names: the C class names.
      title: shown above the heatmap.
      path: if given, the PNG is written there.
      figsize: size in inches; the PNG has ``figsize * dpi`` pixels. Default: large enough
        for every class label (``0.16 C + 2.5`` inches, at least 7).
      dpi: pixels per inch.

    Returns:
      The ``matplotlib.figure.Figure``; rows without frames are left blank. Cells are
      annotated with percentages when C <= 20.

    >>> figure = confusion(np.array([[3, 1], [0, 2]]), class_names=["cut", "pour"])
    >>> [text.get_text() for text in figure.axes[0].texts]  # row 1: 75% and 25%, row 2: 100%
    ['75', '25', '100']
    """
    _, Figure = _matplotlib()
    if figsize is None:
        side = _class_axis_inches(len(class_names), 7.0)
        figsize = (side + 1.5, side)
    figure = Figure(figsize=figsize, dpi=dpi, layout="constrained")
    _draw_confusion(figure, figure.add_subplot(), matrix, class_names, title=title)
    return _save(figure, path, dpi)


def _draw_confusion(figure, axes, matrix, class_names, *, title=None):
    matrix = np.asarray(matrix, dtype=np.float64)
    totals = matrix.sum(axis=1, keepdims=True)
    fractions = np.divide(matrix, totals, out=np.full_like(matrix, np.nan), where=totals > 0)
    image = axes.imshow(fractions, cmap="Blues", vmin=0.0, vmax=1.0, interpolation="nearest")
    ticks = np.arange(len(class_names))
    axes.set_xticks(ticks, class_names, rotation=90, fontsize=LABEL_POINTS, **_AS_WRITTEN)
    axes.set_yticks(ticks, class_names, fontsize=LABEL_POINTS, **_AS_WRITTEN)
    axes.set_xlabel("prediction")
    axes.set_ylabel("ground truth")
    if len(class_names) <= 20:
        for (row, column), value in np.ndenumerate(fractions):
            if value >= 0.005:
                color = "white" if value > 0.6 else "black"
                axes.text(
                    column,
                    row,
                    f"{100 * value:.0f}",
                    ha="center",
                    va="center",
                    fontsize="x-small",
                    color=color,
                )
    figure.colorbar(image, ax=axes, label="fraction of true frames", shrink=0.8)
    if title:
        axes.set_title(title, fontsize="medium", loc="left")


def overview(
    matrix: np.ndarray,
    scores: dict[str, Sequence[float]],
    *,
    class_names: Sequence[str],
    title: str | None = None,
    path: str | os.PathLike | None = None,
    dpi: int = 100,
):
    """One picture of a dataset: per-class scores (bars) above the confusion matrix.

    The size grows with the number of classes so that every class label stays readable
    (7-point labels, 0.16 inch per class: 48 or 200 classes without overlap).

    Args:
      matrix: int ``[C, C]`` counts, rows = ground truth, columns = prediction.
      scores: series name -> C values in percent (see :func:`class_scores`).
      class_names: the C class names.
      title: shown at the top.
      path: if given, the PNG is written there.
      dpi: pixels per inch.

    Returns:
      The ``matplotlib.figure.Figure``.

    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = os.path.join(folder, "overview.png")
    ...     figure = overview(
    ...         np.array([[3, 1], [0, 2]]), {"F1": [85.7, 80.0]}, class_names=["cut", "pour"],
    ...         path=path,
    ...     )
    ...     open(path, "rb").read(4)
    b'\\x89PNG'
    """
    _, Figure = _matplotlib()
    side = _class_axis_inches(len(class_names), 8.0)
    bars = 4.0
    figure = Figure(figsize=(side + 1.5, side + bars), dpi=dpi, layout="constrained")
    top, bottom = figure.subplots(2, 1, height_ratios=(bars, side))
    _draw_class_scores(top, class_names, scores, title="Per-class frame scores (%)")
    _draw_confusion(
        figure, bottom, matrix, class_names, title="Confusion matrix (rows: ground truth)"
    )
    if title:
        figure.suptitle(title, fontsize="large")
    return _save(figure, path, dpi)
