"""Tables as data, with two renderers: rich (the terminal) and HTML (the report).

Builders (the report's tables, `orch runs`, `orch status`, a sweep's table) produce `TableData`; they never format for one
medium, so the terminal and the report always show the same figures. Cell text is masked
and, for HTML, escaped here.
"""

from __future__ import annotations

import html
import textwrap
from dataclasses import dataclass, field, replace
from typing import Literal

from rich import box
from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from orchestrator.console import shown
from orchestrator.masking import mask

Align = Literal["left", "right"]


@dataclass(frozen=True)
class Column:
    header: str
    align: Align = "left"
    group: str | None = None  # spanning header above (HTML) / prefix (terminal)
    # At a width too narrow for the whole table, columns go from the highest priority down
    # (0: never); text that names something (a run, a host, a setting) never breaks.
    priority: int = 0
    prose: bool = False  # free text that may wrap (a knee's explanation, a path)


@dataclass
class TableData:
    title: str
    columns: list[Column]
    rows: list[list[str]] = field(default_factory=list)
    caption: str = ""
    # (row, column) cells to emphasise: the best value of a row
    strong: set[tuple[int, int]] = field(default_factory=set)
    compact: bool = False  # terminal: no cell borders (a listing, like `ls -l`)

    def add(self, cells: list[str]) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"{self.title}: {len(cells)} cells for {len(self.columns)} columns")
        self.rows.append(cells)


def split_groups(data: TableData) -> list[TableData]:
    """One table per column group (the ungrouped leading columns repeated in each): the
    terminal form of a wide table, which stays readable at 80 columns."""
    lead = [i for i, c in enumerate(data.columns) if c.group is None]
    groups = list(dict.fromkeys(c.group for c in data.columns if c.group is not None))
    if not groups:
        return [data]
    tables = []
    for group in groups:
        keep = lead + [i for i, c in enumerate(data.columns) if c.group == group]
        part = TableData(
            f"{data.title}: {group}",
            [replace(data.columns[i], group=None) for i in keep],
            [[row[i] for i in keep] for row in data.rows],
            data.caption,
            {(r, keep.index(c)) for r, c in data.strong if c in keep},
        )
        tables.append(part)
    return tables


def to_rich(data: TableData, width: int | None = None, *,
            wrap_headers: bool = True) -> RenderableType:
    """The table for a terminal. At `width`, low-priority columns are left out until it fits
    (the caption says which); when even the essential ones do not fit, one record per block.
    Without `wrap_headers` (a pipe) each header stays on one line."""
    if width is None or _needed(data) <= width:
        return _rich_table(data, wrap_headers=wrap_headers)
    kept = list(range(len(data.columns)))
    for priority in sorted({c.priority for c in data.columns if c.priority > 0}, reverse=True):
        kept = [i for i in kept if data.columns[i].priority != priority]
        narrower = _select(data, kept)
        if _needed(narrower) <= width:
            left = [data.columns[i].header for i in range(len(data.columns)) if i not in kept]
            narrower.caption = (f"{narrower.caption} " if narrower.caption else "") + (
                f"(left out at {width} columns: {', '.join(left)}; a wider terminal or a pipe "
                "shows them)")
            return _rich_table(narrower)
    return _records(data)


def _select(data: TableData, keep: list[int]) -> TableData:
    return TableData(data.title, [data.columns[i] for i in keep],
                     [[row[i] for i in keep] for row in data.rows], data.caption,
                     {(r, keep.index(c)) for r, c in data.strong if c in keep}, data.compact)


def _widths(data: TableData) -> list[int]:
    """Each column's narrowest width with every name and figure whole: its widest cell (its
    widest word, for prose); headers are labels, so they may wrap between words."""
    out = []
    for index, column in enumerate(data.columns):
        cells = [_plain(row[index]) for row in data.rows]
        if column.prose:
            cells = [word for cell in cells for word in cell.split()]
        words = [word for text in (column.header, column.group or "") for word in _plain(text).split()]
        out.append(max([len(c) for c in cells] + [len(w) for w in words] + [1]))
    return out


def _needed(data: TableData) -> int:
    return 1 + sum(width + 3 for width in _widths(data))  # padding and a border each


def text_width(data: TableData) -> int:
    """The narrowest width of the whole table in characters, with every figure whole."""
    return _needed(data)


def _records(data: TableData) -> RenderableType:
    """One block per row: `header: value` lines, for a terminal too narrow for the table."""
    lines = [Text(_plain(data.title), style="bold")]
    for row in data.rows:
        lines.append(Text(""))
        for column, cell in zip(data.columns, row, strict=True):
            header = f"{column.group} {column.header}" if column.group else column.header
            lines.append(Text(f"{_plain(header)}: ", style="dim") + Text(_plain(cell)))
    if data.caption:
        lines += [Text(""), Text(_plain(data.caption), style="dim")]
    return Group(*lines)


def _rich_table(data: TableData, *, wrap_headers: bool = True) -> Table:
    table = Table(title=escape(_plain(data.title)), title_justify="left", caption_justify="left")
    if data.compact:
        table.box = box.SIMPLE_HEAD
        table.padding = (0, 1)
    for column, width in zip(data.columns, _widths(data), strict=True):
        if not wrap_headers:
            width = max(width, len(_plain(column.header)), len(_plain(column.group or "")))
        header = "\n".join(textwrap.wrap(_plain(column.header), width) or [""])
        if column.group:
            header = "\n".join(textwrap.wrap(_plain(column.group), width)) + "\n" + header
        # names and figures never break or crop: a column is as wide as its widest cell
        table.add_column(escape(header), justify=column.align, min_width=None if column.prose else width,
                         overflow="fold" if column.prose else "ellipsis",
                         no_wrap=not column.prose)
    for r, row in enumerate(data.rows):
        cells = [
            f"[bold]{escape(_plain(cell))}[/bold]" if (r, c) in data.strong else escape(_plain(cell))
            for c, cell in enumerate(row)
        ]
        table.add_row(*cells)
    if data.caption:
        table.caption = escape(_plain(data.caption))
    return table


def _plain(value: str) -> str:
    """Masked, with terminal controls made visible (before widths are measured)."""
    return shown(mask(value))


def text(value: str) -> str:
    """Masked, HTML-escaped text."""
    return html.escape(mask(value))


def to_html(data: TableData) -> str:
    parts = ['<div class="table-wrap"><table>']
    parts.append(f"<caption>{text(data.title)}</caption>")
    groups = [c.group for c in data.columns]
    parts.append("<thead>")
    if any(groups):
        parts.append("<tr>")
        index = 0
        while index < len(groups):
            span = 1
            while index + span < len(groups) and groups[index + span] == groups[index]:
                span += 1
            label = text(groups[index] or "")
            parts.append(f'<th colspan="{span}" class="group">{label}</th>')
            index += span
        parts.append("</tr>")
    parts.append("<tr>")
    for column in data.columns:
        parts.append(f'<th class="{column.align}">{text(column.header)}</th>')
    parts.append("</tr></thead><tbody>")
    for r, row in enumerate(data.rows):
        parts.append("<tr>")
        for c, (cell, column) in enumerate(zip(row, data.columns, strict=True)):
            body = f"<strong>{text(cell)}</strong>" if (r, c) in data.strong else text(cell)
            parts.append(f'<td class="{column.align}">{body}</td>')
        parts.append("</tr>")
    parts.append("</tbody></table>")
    if data.caption:
        parts.append(f'<p class="caption">{text(data.caption)}</p>')
    parts.append("</div>")
    return "".join(parts)
