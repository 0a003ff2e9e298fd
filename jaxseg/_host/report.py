"""Evaluation reports for people and programs: text table, Markdown, CSV and JSON.

A report holds percentages (the unit papers print). Tables round to a number of decimals;
JSON and CSV keep full precision, with missing values (NaN) as ``null`` / an empty cell.
"""

from __future__ import annotations

import csv
import io
import json
import math
import numbers
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from jaxseg._host.io_files import InputError, is_label_file_name, write_atomic

FORMATS = ("table", "json", "csv", "markdown")


class Section(NamedTuple):
    """One table of a report: a key (its name in JSON/CSV), a title, columns and rows.

    Rows hold a name first, then the values.

    ``decimals`` optionally fixes the decimals of some columns (``None`` entries use the
    report's), e.g. 4 for p-values next to percentages.
    """

    key: str
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple, ...]
    decimals: tuple[int | None, ...] | None = None


def _column_decimals(section: Section, decimals: int) -> list[int]:
    fixed = section.decimals or (None,) * len(section.columns)
    return [decimals if d is None else d for d in fixed]


class Report(NamedTuple):
    """What ``jaxseg`` prints: a one-line description and tables of percentages.

    Attributes:
      description: e.g. ``"28 videos, 16,979 frames, 11 classes; background: background"``.
      summary: machine-readable facts about the run (counts, classes, options) for JSON.
      sections: the tables, the dataset-level one first.
    """

    description: str
    summary: dict
    sections: tuple[Section, ...]


def overlap_column(overlap: float, digits: int = 6) -> str:
    """The paper column name of an IoU threshold (``digits`` significant digits).

    >>> overlap_column(0.1), overlap_column(0.25), overlap_column(0.125)
    ('F1@10', 'F1@25', 'F1@12.5')
    """
    return f"F1@{100 * overlap:.{digits}g}"


def overlap_columns(overlaps: Sequence[float]) -> list[str]:
    """The column names of distinct IoU thresholds: :func:`overlap_column`, with more digits
    where six would name two alike (145/1016 and 146/1023 are both ``F1@14.2717``: the JSON
    row and summary kept one of them).

    >>> overlap_columns([0.1, 145 / 1016, 146 / 1023])
    ['F1@10', 'F1@14.27165', 'F1@14.27175']
    """
    for digits in range(6, 18):
        names = [overlap_column(overlap, digits) for overlap in overlaps]
        if len(set(names)) == len(names):
            return names
    return [f"F1@{100 * overlap!r}" for overlap in overlaps]


def _cell(value, decimals: int) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, numbers.Integral):
        return f"{value:,}"
    if value is None or math.isnan(value):
        return "-"
    return f"{value:.{decimals}f}"


def _text_table(section: Section, decimals: int) -> list[str]:
    places = _column_decimals(section, decimals)
    cells = [list(section.columns)]
    cells += [[_cell(v, d) for v, d in zip(row, places, strict=True)] for row in section.rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(section.columns))]

    def line(row):
        first = row[0].ljust(widths[0])
        rest = (cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True))
        return "  ".join([first, *rest]).rstrip()

    return [line(cells[0]), *(line(row) for row in cells[1:])]


def format_table(report: Report, *, decimals: int = 2) -> str:
    """Plain-text tables, numbers right-aligned, values in percent rounded to ``decimals``."""
    lines = [report.description]
    for section in report.sections:
        lines += ["", section.title, *_text_table(section, decimals)]
    return "\n".join(lines) + "\n"


def _markdown_row(cells) -> str:
    """One row of a Markdown table; a ``|`` in a cell (a video or class name) is escaped, or
    it would split the cell and shift every later number into the wrong column."""
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def format_markdown(report: Report, *, decimals: int = 2) -> str:
    """GitHub-flavoured Markdown tables (ready to paste into a README or a paper draft)."""
    lines = [report.description]
    for section in report.sections:
        lines += ["", f"**{section.title}**", ""]
        lines.append(_markdown_row(section.columns))
        lines.append("|" + "|".join([":---"] + ["---:"] * (len(section.columns) - 1)) + "|")
        places = _column_decimals(section, decimals)
        for row in section.rows:
            lines.append(_markdown_row(_cell(v, d) for v, d in zip(row, places, strict=True)))
    return "\n".join(lines) + "\n"


def _plain(value):
    """A JSON value: NaN becomes ``None``, numpy scalars become Python numbers."""
    if isinstance(value, str) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, numbers.Integral):
        return int(value)
    value = float(value)
    return None if math.isnan(value) else value


def format_json(report: Report) -> str:
    """One JSON object: ``summary`` and one list of row objects per section (full precision)."""
    document = {"unit": "percent", "summary": _plain(report.summary)}
    for section in report.sections:
        document[section.key] = [
            {column: _plain(value) for column, value in zip(section.columns, row, strict=True)}
            for row in section.rows
        ]
    return json.dumps(document, indent=2, allow_nan=False) + "\n"


def format_csv(report: Report) -> str:
    """One CSV table over all sections: ``table,name,<union of the sections' columns>``."""
    columns: list[str] = []
    for section in report.sections:
        columns += [c for c in section.columns[1:] if c not in columns]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["table", "name", *columns])
    for section in report.sections:
        for row in section.rows:
            values = dict(zip(section.columns[1:], row[1:], strict=True))
            cells = [_csv_cell(values.get(column, "")) for column in columns]
            writer.writerow([section.key, row[0], *cells])
    return buffer.getvalue()


def _csv_cell(value) -> str:
    value = _plain(value)
    return "" if value is None else str(value)


def render(report: Report, format: str, *, decimals: int = 2) -> str:
    """The report as text in ``format`` (one of :data:`FORMATS`)."""
    if format == "json":
        return format_json(report)
    if format == "csv":
        return format_csv(report)
    if format == "markdown":
        return format_markdown(report, decimals=decimals)
    return format_table(report, decimals=decimals)


def description(
    videos: int, frames: int, classes: int, background: Sequence[str], extra: str = ""
) -> str:
    """The report's first line, e.g. ``28 videos, 16,979 frames, 11 classes; background: ...``."""
    ignored = ", ".join(background) if background else "none"
    return f"{videos:,} videos, {frames:,} frames, {classes} classes; background: {ignored}{extra}"


STDOUT = "-"  # the --output that names stdout, as in most command-line tools


def check_output(path: str | None, *, files=(), folders=()) -> None:
    """Fails early (before any work) when ``--output`` cannot be written (a folder, a missing
    or read-only folder) or would overwrite an input of the run: one of ``files``, or a label
    file of one of ``folders`` (a file there that a later run would read as a video's
    labels). ``-`` is stdout; ``None`` entries of ``files`` and ``folders`` are skipped."""
    if path is None or path == STDOUT:
        return
    if not path:  # Path("") is the current folder
        raise InputError("--output is empty; give a file name (or - for stdout)")
    if Path(path).is_dir():
        raise InputError(f"{path}: is a folder; --output needs a file name")
    target = Path(path).resolve()
    # A symbolic link is written through: the folder that counts is its target's.
    folder = (
        f"symbolic link to {target}: its folder {target.parent}"
        if Path(path).is_symlink()
        else f"output folder {Path(path).parent}"
    )
    if not target.parent.is_dir():
        raise InputError(f"{path}: {folder} does not exist")
    if not os.access(target.parent, os.W_OK):
        raise InputError(f"{path}: {folder} is not writable")
    for given in (f for f in files if f is not None):
        if Path(given).resolve() == target:
            raise InputError(f"{path}: --output would overwrite {given}, an input of this run")
    for given in (f for f in folders if f is not None):
        inside = target.parent == Path(given).resolve()
        if inside and is_label_file_name(target) and target.is_file():
            raise InputError(
                f"{path}: --output would overwrite a label file of {given}, an input of this run"
            )


def check_folder(path: str | None, option: str) -> None:
    """Fails early when ``option``'s folder (created if missing) cannot be: a file, or under a
    folder that cannot be written."""
    if path is None:
        return
    if not path:  # Path("") is the current folder
        raise InputError(f"{option} is empty; give a folder")
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise InputError(f"{path}: is a file; {option} needs a folder")
    existing = folder.resolve()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise InputError(f"{path}: {existing} is a file; {option} needs a folder")
    if not os.access(existing, os.W_OK):
        raise InputError(f"{path}: {existing} is not writable")


def emit(text: str, output: str | None, *, quiet: bool) -> None:
    """Writes results to stdout (``output`` None or ``-``), or atomically to ``output`` (with
    a note on stderr)."""
    if output is None or output == STDOUT:
        try:
            sys.stdout.write(text)
        except UnicodeEncodeError as error:  # a name in a terminal or file of another encoding
            character = error.object[error.start]
            raise InputError(
                f"stdout ({error.encoding}) cannot write {character!r} of a name in the results "
                "(a class or video); write them with --output FILE (UTF-8), or set "
                "PYTHONIOENCODING=utf-8"
            ) from None
        sys.stdout.flush()
        return
    write_atomic(Path(output), text)
    if not quiet:
        print(f"jaxseg: wrote {output}", file=sys.stderr)
