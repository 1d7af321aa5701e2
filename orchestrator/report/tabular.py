"""Tables as data, with two renderers: rich (the terminal) and HTML (the report).

Builders (compare_tables, listing, plan_diff) produce `TableData`; they never format for one
medium, so the terminal and the report always show the same figures. Cell text is masked
and, for HTML, escaped here.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Literal

from rich import box
from rich.markup import escape
from rich.table import Table

from orchestrator.masking import mask

Align = Literal["left", "right"]


@dataclass(frozen=True)
class Column:
    header: str
    align: Align = "left"
    group: str | None = None  # spanning header above (HTML) / prefix (terminal)


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
            [Column(data.columns[i].header, data.columns[i].align) for i in keep],
            [[row[i] for i in keep] for row in data.rows],
            data.caption,
            {(r, keep.index(c)) for r, c in data.strong if c in keep},
        )
        tables.append(part)
    return tables


def to_rich(data: TableData) -> Table:
    table = Table(title=mask(data.title), title_justify="left", caption_justify="left")
    if data.compact:
        table.box = box.SIMPLE_HEAD
        table.padding = (0, 1)
    for index, column in enumerate(data.columns):
        header = f"{column.group}\n{column.header}" if column.group else column.header
        # figures never break: a right-aligned column is as wide as its widest cell
        widest = max((len(row[index]) for row in data.rows), default=0) if column.align == "right" else None
        table.add_column(
            mask(header), justify=column.align, overflow="fold", min_width=widest
        )
    for r, row in enumerate(data.rows):
        cells = [
            f"[bold]{escape(mask(cell))}[/bold]" if (r, c) in data.strong else escape(mask(cell))
            for c, cell in enumerate(row)
        ]
        table.add_row(*cells)
    if data.caption:
        table.caption = escape(mask(data.caption))
    return table


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
