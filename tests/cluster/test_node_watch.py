"""A worker's run ends with the head's (cluster/watch.py), pure parts: the gate says when the
head's run ended and whether it failed, a unit's state and the error line of its log are read
from one command's output, and the recap says why each failed host failed."""

from __future__ import annotations

import base64
import threading

from rich.console import Console

from orchestrator.cluster.gate import Gate
from orchestrator.cluster.topology import build
from orchestrator.cluster.watch import parse_unit_state
from orchestrator.engines import engine
from orchestrator.output import failure_reason, recap_table
from orchestrator.runs.outcome import HostOutcome, StepOutcome

# The end of a Ray node's log that could not start (Ray 2.60, its port inside the workers' range)
RAY_PORT_TAKEN = """\
2026-12-01 18:33:53,011	INFO scripts.py:1043 -- Local node IP: 192.0.2.2
  File "/venv/lib/python3.11/site-packages/ray/_private/parameter.py", line 343, in update_pre_selected_port
    raise ValueError(
ValueError: Ray component worker_ports is trying to use a port number 16399 that is used by other components.
Port information: {'gcs': 'random', 'gcs_server': 16399, 'worker_ports': '9998 ports from 10002 to 19999'}
If you allocate ports, please make sure the same port is not used by multiple components.
"""
# ... and of one killed with SIGKILL while it ran: nothing says so.
RAY_KILLED = """\
2026-12-01 18:51:30,957	INFO scripts.py:1274 -- Process exit logs will be saved to: /tmp/ray/session_x/logs/ray_process_exit.log
"""


def answer(state: str, log: str) -> str:
    """What unit_state_command prints: the state line, the empty log part, the log's end."""
    return f"{state}\n\n{base64.b64encode(log.encode()).decode()}\n"


def test_a_dead_units_log_gives_its_error_line_or_nothing() -> None:
    assert parse_unit_state(answer("dead", RAY_PORT_TAKEN)) == (
        "dead", "ValueError: Ray component worker_ports is trying to use a port number 16399 "
                "that is used by other components.")
    assert parse_unit_state(answer("dead", RAY_KILLED)) == ("dead", "")
    assert parse_unit_state(answer("alive", "")) == ("alive", "")
    assert parse_unit_state("frozen 1234\n\n\n") == ("frozen", "")
    assert parse_unit_state("") == ("unknown", "")


def test_the_gate_says_when_the_head_ended_and_whether_it_failed() -> None:
    topology = build(backend="ray", hosts=["a", "b"], head=None,
                     addresses={"a": "10.0.0.1", "b": "10.0.0.2"},
                     args={"tensor-parallel-size": 8, "pipeline-parallel-size": 2},
                     gpus_per_node=8, ray_port=6379, master_port=29501, ray_args=[],
                     engine=engine("vllm"))
    gate = Gate(topology, check_gpus=False, timeout=5)
    threading.Timer(0.2, gate.withdraw, args=("a", "its bench step failed: server gone")).start()
    assert gate.ended("a") == (True, "its bench step failed: server gone")  # waited for it
    gate.withdraw("b", "its run ended", failed=False)
    assert gate.ended("b") == (False, "its run ended")
    gate.withdraw("b", "again", failed=True)  # the first word stands
    assert gate.ended("b") == (False, "its run ended")


def test_the_recap_says_why_each_failed_host_failed() -> None:
    outcomes = [
        HostOutcome("n1", steps=[StepOutcome("service", "changed"), StepOutcome(
            "bench", "failed", error="n1: the sweep stopped early at c1 (server_gone)\n"
            "  cause: a node of the multi-node server went away: ActorUnavailableError\n"
            "  fix:   orch status PLAN")]),
        HostOutcome("n2", steps=[StepOutcome("ray", "changed"), StepOutcome(
            "node", "failed", error="dropped out of the group: its Ray node (unit x-ray) died "
            "during the apply")]),
        HostOutcome("n3", steps=[StepOutcome("ray", "changed")],
                    error="n3: cut off during the apply: the connection was lost"),
        HostOutcome("n4", steps=[StepOutcome("ray", "changed")]),
    ]
    assert failure_reason(outcomes[0]) == (
        "bench: the sweep stopped early at c1 (server_gone) cause: a node of the multi-node "
        "server went away: ActorUnavailableError")
    assert failure_reason(outcomes[3]) is None
    console = Console(width=160, record=True, color_system=None)
    console.print(recap_table(outcomes))
    text = console.export_text()
    rows = {cells[0]: cells[1] for line in text.splitlines() if line.startswith("│")
            for cells in [[c.strip() for c in line.split("│")[1:-1]]]}
    assert rows == {"n1": "failed", "n2": "failed", "n3": "failed", "n4": "changed"}
    below = " ".join(text.split("└", 1)[1].split())
    assert "n2: node: dropped out of the group: its Ray node (unit x-ray) died during the apply" \
        in below
    assert "n3: cut off during the apply: the connection was lost" in below
    assert "n4:" not in below
