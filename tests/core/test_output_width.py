"""Output anywhere: at 80 columns, wide tables leave out low-priority columns (and say so)
or become one record per block; piped, nothing is wrapped or cropped. Names and figures
never break."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from orchestrator.commands.service import status_table
from orchestrator.console import make_console
from orchestrator.service.control import ServiceStatus
from orchestrator.tables import Column, TableData, to_rich

LABELS = ["sim-kimi-nvfp4-8x-rtx-pro-6000", "sim-minimax-m2.5-4x-expert-parallel",
          "sim-kimi-int4-8x-rtx-pro-6000"]


def headline() -> TableData:
    table = TableData("Headline", [
        Column("Run"), Column("Single stream (tok/s)", "right"), Column("Peak (tok/s)", "right"),
        Column("Peak at", priority=2), Column("Peak per GPU (tok/s)", "right", priority=1),
        Column("Knee", prose=True),
    ])
    for label, knee in zip(LABELS, ["C=128", "still rising at C=256", "C=128"], strict=True):
        table.add([label, "61.2", "1,243.9", "C=256", "155.5", knee])
    return table


def render(renderable: object, width: int) -> str:
    console = Console(width=width, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return console.file.getvalue()  # type: ignore[attr-defined, no-any-return]


def test_at_80_columns_low_priority_columns_go_and_names_stay_whole() -> None:
    text = render(to_rich(headline(), 80), 80)
    assert all(len(line) <= 80 for line in text.splitlines())
    for label in LABELS:
        assert label in text  # never cropped ("sim-mini…") nor broken
    assert "1,243.9" in text and "C=128" in text
    assert "left out at 80 columns: Peak at" in " ".join(text.split())


def test_too_narrow_for_any_table_gives_one_record_per_block() -> None:
    text = render(to_rich(headline(), 40), 40)
    assert "Run: sim-minimax-m2.5-4x-expert-parallel" in text
    assert "Knee: still rising at C=256" in text


def test_a_status_row_keeps_its_host_whole() -> None:
    rows = [ServiceStatus(host="localhost-gpu-node-17", backend="process", state="running", pid=4242,
                          uptime_s=3600, health="200", served=["kimi-k2.5"], vllm_version="0.17.1",
                          pins="flashinfer-cubin 0.6.3 (pin 0.6.4)")]
    text = render(to_rich(status_table(rows), 80), 80)
    assert "localhost-gpu-node-17" in text and "flashinfer-cubin" in text


def test_piped_output_is_never_wrapped_or_cropped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    buffer = io.StringIO()
    console = make_console(file=buffer)
    assert not console.is_terminal and console.soft_wrap
    long_line = "localhost      startup    running  loading weights, 39/119 shards (33%) " * 3
    console.print(long_line)
    console.print(to_rich(headline(), console.width))
    text = buffer.getvalue()
    assert long_line.rstrip() in text  # one line, as printed
    assert "left out" not in text
    row = next(line for line in text.splitlines() if LABELS[1] in line)
    assert "155.5" in row and "still rising at C=256" in row  # the whole record on one line
