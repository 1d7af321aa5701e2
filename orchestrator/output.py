"""What the user sees while a run goes: one line per finished step and stage, on a terminal
a live line per host for what is in progress (live_view.py; elsewhere each progress message
is a line of its own), a recap table at the end; or, with `--json`, one JSON event per
line on stdout.

Reports are data plus a render function: `recap_table` returns a rich Table that tests
render into a fixed-width console.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from orchestrator import masking
from orchestrator.console import make_console
from orchestrator.events import Event, HostEnd, LevelEnd, LevelProgress, Retry, StageEvent, StepEnd
from orchestrator.inventory import Inventory
from orchestrator.live_view import LiveView
from orchestrator.plan.host_vars import referenced
from orchestrator.plan.loader import LoadedPlan
from orchestrator.runs.outcome import HostOutcome
from orchestrator.tables import Column, TableData, to_rich

_STYLE = {
    "ok": "green",
    "changed": "yellow",
    "pending": "yellow",
    "failed": "bold red",
    "skipped": "dim",
    "unreachable": "bold red",
}


class Reporter:
    """Receives every event of a run (from any host thread)."""

    def __init__(self, console: Console | None = None, *, json_lines: bool = False) -> None:
        self.console = console or make_console()
        self.json_lines = json_lines
        self._lock = threading.Lock()
        self.view: LiveView | None = None

    @contextlib.contextmanager
    def live(self, *, auto_refresh: bool = True) -> Iterator[None]:
        """While the hosts work: the live view on a terminal, plain lines anywhere else.
        `auto_refresh=False`: redrawn by each event instead of a thread (LiveView)."""
        if self.json_lines or not self.console.is_terminal:
            yield
            return
        with LiveView(self.console, auto_refresh=auto_refresh) as view:
            self.view = view
            try:
                yield
            finally:
                self.view = None

    def __call__(self, event: Event, record: dict[str, Any] | None = None) -> None:
        """Show `event`; `record` is its JSON form as the run folder stored it (with `ts`)."""
        with self._lock:
            if self.json_lines:
                if not event.kept:  # progress: its level's end says it once
                    return
                data = record if record is not None else event.to_json()
                sys.stdout.write(masking.dumps(data, default=str) + "\n")
                sys.stdout.flush()
                return
            view = self.view
            if view is not None:
                view.update(event)
                if (isinstance(event, StageEvent) and event.status == "running"
                        and view.board.shows(event.host)):
                    return  # progress: the host's live line says it (else printed)
            line = self.render_event(event)
            if line is not None:
                self.console.print(line)

    @staticmethod
    def render_event(event: Event) -> Text | None:
        if isinstance(event, LevelEnd):
            return level_line(event)
        if isinstance(event, LevelProgress):
            return None  # live only: a pipe gets the level's end
        prefix = Text(f"{event.host:<14} ", style="bold cyan")
        if isinstance(event, StepEnd):
            line = prefix + Text(f"{event.step:<10} ") + Text(f"{event.status:<8}",
                                                               style=_STYLE.get(event.status, ""))
            line += Text(f" {event.seconds:.2f}s", style="dim")
            if event.error:
                line += Text(f"\n{'':15}{event.error}", style="red")
            for change in event.changes:
                line += Text(f"\n{'':15}- {change}")
            for finding in event.findings:
                style = "red" if finding["level"] == "error" else "yellow"
                line += Text(f"\n{'':15}! {finding['message']}", style=style)
                if finding.get("fix"):
                    line += Text(f"\n{'':17}fix: {finding['fix']}", style="dim")
            return line
        if isinstance(event, Retry):
            return prefix + Text(f"retry {event.attempt}: {event.error}", style="yellow")
        if isinstance(event, HostEnd) and event.error:
            return prefix + Text(f"FAILED: {event.error}", style="bold red")
        if isinstance(event, StageEvent):
            if event.status == "running" and not event.message:
                return None
            text = prefix + Text(f"{event.stage:<10} ") + Text(
                f"{event.status:<8}", style=_STYLE.get(event.status, ""))
            if event.message:
                text += Text(f" {event.message}")
            return text
        return None


def level_line(event: LevelEnd) -> Text:
    """A finished benchmark level, under its stage's line (no host: one sweep runs at a
    time); the figures of the sweep's table."""
    note = " (partial)" if event.partial else ""
    if event.output_throughput is None or event.mean_e2el_ms is None:
        return Text(f"  {event.label:>8}: no request finished, {event.failed} failed{note}")
    time_note = " (model time)" if event.model_time else ""
    return Text(f"  {event.label:>8}: {event.output_throughput:,.1f} tok/s, "
                f"mean latency {event.mean_e2el_ms / 1000:.2f} s{time_note}, "
                f"{event.failed} failed{note}")


def recap_table(outcomes: list[HostOutcome], *, title: str = "recap") -> Table:
    """One row per host: its status, steps and stages by result, round trips, time. The
    `changed` column of `orch apply` is `pending` in `orch plan` (check mode)."""
    labels = ["ok", "pending" if title == "plan" else "changed", "failed", "skipped"]
    table = Table(title=title, title_justify="left")
    table.add_column("host", style="cyan", no_wrap=True)
    table.add_column("status", no_wrap=True)
    for label in labels:
        table.add_column(label, justify="right")
    table.add_column("trips", justify="right")
    table.add_column("time", justify="right", no_wrap=True)
    reasons = Text()
    for outcome in outcomes:
        why = failure_reason(outcome)
        if why is not None:
            reasons.append(("\n" if reasons else "") + f"{outcome.host}: ", style="bold")
            reasons.append(why, style="red")
        counts = {label: 0 for label in ("ok", "changed", "pending", "failed", "skipped")}
        for step in outcome.steps:
            counts[step.status] += 1
        counts["failed"] += 1 if outcome.error else 0
        if outcome.failed:
            reached = outcome.steps or outcome.facts is not None  # a lock refused: reached
            status = "failed" if reached else "unreachable"
        elif counts["pending"]:
            status = "pending"
        elif counts["changed"]:
            status = "changed"
        else:
            status = "ok"
        table.add_row(
            outcome.host,
            Text(status, style=_STYLE[status]),
            *(str(counts[label]) for label in labels),
            str(outcome.round_trips),
            f"{outcome.seconds:.2f}s",
        )
    if reasons:
        table.caption = reasons
        table.caption_justify = "left"
    return table


def failure_reason(outcome: HostOutcome) -> str | None:
    """Why a host failed, in one line for the recap: the host's own error (it could not be
    reached, it was cut off), else its first failed step's. None when it did not fail."""
    if outcome.error:
        why = outcome.error
        prefix = f"{outcome.host}: "
        why = why.removeprefix(prefix)
    else:
        step = next((s for s in outcome.steps if s.status == "failed"), None)
        if step is None:
            return None
        why = f"{step.step}: " + (step.error or "failed").removeprefix(f"{outcome.host}: ")
    lines = [line.strip() for line in why.splitlines() if line.strip()] or [why]
    cause = next((line for line in lines[1:] if line.startswith("cause:")), None)
    said = lines[0] if cause is None else f"{lines[0]} {cause}"
    if said.endswith(":") and len(lines) > 1:  # a list follows: its first item says which
        said = f"{said} {lines[1]}"
    return said if len(said) <= 240 else said[:239] + "…"


def print_diffs(console: Console, outcomes: list[HostOutcome]) -> None:
    for outcome in outcomes:
        for step in outcome.steps:
            for diff in step.diffs:
                console.print(f"[bold]{outcome.host}[/] {step.step}:")
                console.print(_coloured(diff), highlight=False, soft_wrap=True)


def _coloured(diff: str) -> Text:
    """A diff with added lines green, removed red, changed yellow (unified diffs and the
    service's `+ flag` / `- flag` / `~ flag` lines alike)."""
    styles = {"+": "green", "-": "red", "~": "yellow", "@": "cyan"}
    text = Text()
    for line in diff.splitlines():
        plain_header = line.startswith(("+++", "---"))
        text.append(line + "\n", style="bold" if plain_header else styles.get(line[:1], ""))
    text.rstrip()
    return text


def print_origins(console: Console, loaded: LoadedPlan, inventory: Inventory | None = None,
                  hosts: Sequence[str] = ()) -> None:
    """Each value of the resolved plan and the layer that set it last (sections are left
    out: their values say more); then each host variable the plan uses, per host, and the
    inventory entry that set it."""
    origins = loaded.origins
    table = TableData(f"origins of {loaded.plan.name}", [Column("field"), Column("set by")],
                      compact=True)
    for key in sorted(origins):
        if not any(other.startswith(key + ".") for other in origins):
            table.add([key, origins[key]])
    console.print(to_rich(table, console.width))
    used = sorted(referenced(loaded.plan.model_dump(mode="python")))
    if inventory is None or not used:
        return
    variables = TableData("host variables", [Column("host"), Column("variable"), Column("value"),
                                             Column("set by", prose=True)], compact=True)
    for host in hosts:
        values = inventory.host_values(host)
        for name in used:
            shown = repr(values[name]) if name in values else "(not set)"
            variables.add([host, f"${{host.{name}}}", shown, inventory.value_origin(host, name)])
    console.print(to_rich(variables, console.width))
