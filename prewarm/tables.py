"""Report tables that never cut a number.

In a terminal a table is drawn with rich and split into several tables of fewer columns when
it is wider than the terminal: each repeats the key column (model, policy), and no cell is
wrapped or shortened. Anywhere else (a pipe, a file, a CI log) it is printed as a Markdown
table, whole whatever the width. A value that could not be computed is a :class:`Missing`
cell, shown as ``—`` with a footnote giving the reason.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

MISSING = "—"
_SUPERSCRIPTS = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


@dataclass(frozen=True)
class Missing:
    """A value that could not be computed, and why."""

    reason: str


Cell = str | Missing


@dataclass(frozen=True)
class TableSpec:
    """What a report table shows, independent of where it is printed.

    Parameters
    ----------
    title
        One line above the table.
    key
        Header of the first column, which names each row.
    headers
        Headers of the other columns; a newline splits a header over two lines.
    rows
        ``(name, cells)`` per row, one cell per header; a cell's newlines split it over lines.
    notes
        Lines printed below the table, after the footnotes of the missing cells.
    left
        Headers of the columns aligned left (text); the others are numbers, aligned right.
    highlight
        Name of the row to emphasise in a terminal.
    """

    title: str
    key: str
    headers: tuple[str, ...]
    rows: Sequence[tuple[str, Sequence[Cell]]]
    notes: Sequence[str] = field(default_factory=tuple)
    left: tuple[str, ...] = ()
    highlight: str | None = None


def print_table(console: Any, spec: TableSpec) -> None:
    """Print ``spec`` on the rich ``console``: fitted to a terminal, Markdown elsewhere."""
    if not console.is_terminal:
        console.out(markdown_table(spec), highlight=False)
        return
    cells, footnotes = _resolve(spec)
    console.print(spec.title, style="bold", markup=False, highlight=False)
    for columns in _fitting_groups(console, spec, cells):
        console.print(_rich_table(spec, cells, columns))
    for note in [*footnotes, *spec.notes]:
        console.print(note, markup=False, highlight=False)


def markdown_table(spec: TableSpec) -> str:
    """The title, a GitHub Markdown table, its footnotes and notes, as one string."""
    cells, footnotes = _resolve(spec)
    headers = [spec.key, *(_one_line(h, " ") for h in spec.headers)]
    lines = [
        spec.title,
        "",
        "| " + " | ".join(headers) + " |",
        "|---|" + "".join("---|" if h in spec.left else "---:|" for h in spec.headers),
    ]
    for (name, _), row in zip(spec.rows, cells, strict=True):
        lines.append("| " + " | ".join([name, *(_one_line(c, ", ") for c in row)]) + " |")
    notes = [*footnotes, *spec.notes]
    return "\n".join(lines + (["", *notes] if notes else []))


def _one_line(text: str, joiner: str) -> str:
    return joiner.join(text.splitlines()).replace("|", "\\|")


def _resolve(spec: TableSpec) -> tuple[list[list[str]], list[str]]:
    """Cell texts, with each missing value as ``—`` and a footnote mark per distinct reason
    (the reasons name their metric: one footnote serves every cell it explains)."""
    marks: dict[str, str] = {}
    texts = [
        [
            MISSING + marks.setdefault(cell.reason, _superscript(len(marks) + 1))
            if isinstance(cell, Missing)
            else cell
            for cell in row
        ]
        for _, row in spec.rows
    ]
    return texts, [f"{mark} {reason}" for reason, mark in marks.items()]


def _superscript(number: int) -> str:
    return str(number).translate(_SUPERSCRIPTS)


def _rich_table(spec: TableSpec, cells: list[list[str]], columns: Sequence[int]) -> Any:
    from rich.table import Table

    table = Table()
    # no_wrap everywhere: a table that does not fit is split into more tables instead.
    table.add_column(spec.key, no_wrap=True)
    for i in columns:
        left = spec.headers[i] in spec.left
        table.add_column(spec.headers[i], justify="left" if left else "right", no_wrap=True)
    for (name, _), row in zip(spec.rows, cells, strict=True):
        style = "bold green" if name == spec.highlight else None
        table.add_row(name, *(row[i] for i in columns), style=style)
    return table


def _fitting_groups(console: Any, spec: TableSpec, cells: list[list[str]]) -> list[list[int]]:
    """Consecutive columns per table: as few tables as the console's width allows, their
    columns shared out evenly where that fits (a table has at least one column, so a
    terminal narrower than the key and one column still shows every value)."""
    from rich.measure import Measurement

    # Measured without the console's limit: with no cell wrapped, the natural width is the
    # width the table needs.
    unbounded = console.options.update_width(sys.maxsize)

    def fits(columns: list[int]) -> bool:
        table = _rich_table(spec, cells, columns)
        return bool(Measurement.get(console, unbounded, table).maximum <= console.width)

    greedy: list[list[int]] = [[]]
    for i in range(len(spec.headers)):
        if greedy[-1] and not fits([*greedy[-1], i]):
            greedy.append([])
        greedy[-1].append(i)
    count, extra = divmod(len(spec.headers), len(greedy))
    sizes = [count + (k < extra) for k in range(len(greedy))]
    bounds = [sum(sizes[:k]) for k in range(len(sizes) + 1)]
    even = [list(range(bounds[k], bounds[k + 1])) for k in range(len(sizes))]
    return even if all(fits(columns) for columns in even) else greedy
