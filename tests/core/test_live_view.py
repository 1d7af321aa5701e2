"""The live view of a run: the board's state from events (pure, a fake clock), and a real
apply of a simulated service on a pseudo-terminal against the same apply piped."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from fixtures import quick_venv
from fixtures.ports import free_port
from rich.console import Console

from orchestrator.events import HostEnd, HostStart, Probed, Retry, StageEvent, StepEnd, StepStart
from orchestrator.live_view import HostBoard
from tests.fixtures.orchcli import orch
from tests.fixtures.terminal import PseudoTerminal

pytestmark = pytest.mark.slow


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _shown(board: HostBoard) -> str:
    console = Console(width=120, record=True, color_system=None)
    console.print(board.table())
    return console.export_text()


def test_the_board_shows_what_each_host_does_and_for_how_long() -> None:
    clock = Clock()
    board = HostBoard(clock)
    board.update(HostStart("gpu1"))
    board.update(HostStart("gpu2"))
    clock.now += 1.5
    board.update(Probed("gpu1"))
    board.update(StepStart("gpu1", step="python"))
    board.update(Retry("gpu2", attempt=1, error="connection refused"))
    clock.now += 2.0
    lines = _shown(board).splitlines()
    assert lines[0].split() == ["gpu1", "python", "2.0s", "(host", "4s)"]
    assert "gpu2" in lines[1] and "connecting" in lines[1] and "retry 1: connection refused" in lines[1]
    board.update(StepEnd("gpu1", step="python", status="changed"))
    board.update(StageEvent("gpu1", stage="startup", message="loading weights, 3/119 shards"))
    clock.now += 60
    board.update(StageEvent("gpu1", stage="startup", message="torch.compile"))
    clock.now += 5
    (gpu1,) = [line for line in _shown(board).splitlines() if line.startswith("gpu1")]
    # a new message within the stage keeps the stage's clock
    assert "startup" in gpu1 and "torch.compile" in gpu1 and "65.0s" in gpu1
    board.update(HostEnd("gpu1"))
    assert "gpu1" not in _shown(board) and "gpu2" in _shown(board)


def _sim_plan(tmp_path: Path) -> Path:
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({
        "name": "live", "hosts": "localhost",
        "python": {"venv": str(tmp_path / "venv"), "interpreter": quick_venv.interpreter(), "installer": "pip"},
        "service": {"engine": "sim", "model": "moonshotai/Kimi-K2.5", "host": "127.0.0.1",
                    "port": free_port(), "backend": "process", "name": f"live-{tmp_path.name[-10:]}",
                    "sim": {"profile": "kimi-k2.5-nvfp4-8x-rtx-pro-6000", "time_scale": 0.01,
                            "startup_time_scale": 0.01}},  # ~8 s: seen live on a loaded machine
        "health": {"poll_interval": "0.2s"},
    }))
    return plan


def test_a_terminal_gets_a_live_line_per_host_and_a_pipe_gets_plain_lines(tmp_path: Path) -> None:
    plan = _sim_plan(tmp_path)
    try:
        term = PseudoTerminal(["apply", str(plan)], cwd=tmp_path)
        assert term.finish(timeout=240) == 0, term.output
        # the live line: the stage, what it said, its clock and the host's
        assert "(host " in term.output and "since launch)" in term.output
        # finished work stays as lines; progress is not printed as lines of its own
        assert "localhost      ready      ok" in term.output
        assert "startup    running" not in term.output
        orch("stop", plan, cwd=tmp_path)
        piped = orch("apply", plan, cwd=tmp_path)
        assert piped.returncode == 0, piped.stdout + piped.stderr
        assert "\x1b[" not in piped.stdout and "(host " not in piped.stdout
        assert "localhost      startup    running  " in piped.stdout  # progress as lines
        assert "localhost      ready      ok" in piped.stdout
    finally:
        orch("stop", plan, cwd=tmp_path)
