"""`--forks` end to end over a real sshd: five hosts (loopback aliases of one sshd, one
machine's filesystem), `orch apply --forks 2`; each host's command writes when it started
and ended into one shared file, so how many hosts worked at once is read from what the hosts
did, not from orch's own account."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from fixtures import quick_venv
from fixtures.orchcli import last_run, orch, write_inventory
from fixtures.sshd import SshServer

pytestmark = pytest.mark.slow


def most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most spans (start, end) that overlap at one moment."""
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    inside = most = 0
    for _, step in edges:  # an end sorts before a start at the same moment
        inside += step
        most = max(most, inside)
    return most


def test_apply_with_forks_2_works_on_two_of_five_hosts_at_once(tmp_path: Path,
                                                               sshd: SshServer) -> None:
    inventory = write_inventory(tmp_path / "inventory.yaml", sshd.inventory(5))
    record = tmp_path / "spans.log"
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({
        "name": "forks", "hosts": "all",
        "files": [{"path": str(tmp_path / "${host.name}.conf"), "content": "x\n"}],
        "commands": [{"name": "hold", "shell": (
            f"echo \"${{host.name}} start $(date +%s.%N)\" >> {record}; sleep 0.6; "
            f"echo \"${{host.name}} end $(date +%s.%N)\" >> {record}")}],
    }))
    mark = sshd.log_mark()
    result = orch("apply", plan, "-i", inventory, "--forks", "2", cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr

    times: dict[str, dict[str, float]] = {}
    for line in record.read_text().splitlines():
        host, what, stamp = line.split()
        times.setdefault(host, {})[what] = float(stamp)
    assert sorted(times) == [f"h{i}" for i in range(1, 6)]  # every host ran its command
    assert most_at_once([(t["start"], t["end"]) for t in times.values()]) == 2
    assert all((tmp_path / f"h{i}.conf").exists() for i in range(1, 6))  # and converged

    events = [json.loads(line) for line in (last_run(tmp_path) / "events.jsonl").open()]
    starts = [e["host"] for e in events if e["event"] == "host_start"]
    ends = {e["host"]: e for e in events if e["event"] == "host_end"}
    assert starts[2:] == ["h3", "h4", "h5"]  # the hosts beyond the bound, in inventory order
    assert sorted(ends) == sorted(starts) == [f"h{i}" for i in range(1, 6)]
    assert not any(e["failed"] for e in ends.values())
    assert all(n >= 1 for n in sshd.round_trips(sshd.inventory(5), since=mark).values())


def test_the_nodes_of_a_multi_node_server_run_all_at_once_whatever_the_bound(
    tmp_path: Path, sshd: SshServer
) -> None:
    """Each node's vote waits for the others': bounded to one at a time, the first node would
    wait for the second forever (the gate's six-hour safety net). `orch plan` votes too."""
    inventory = write_inventory(tmp_path / "inventory.yaml", sshd.inventory(2))
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({
        "name": "forks-gate", "hosts": "all",
        "python": {"venv": str(tmp_path / "venv"), "interpreter": quick_venv.interpreter()},
        "service": {"engine": "sim", "model": "moonshotai/Kimi-K2.5", "backend": "process",
                    "args": {"tensor-parallel-size": 8, "pipeline-parallel-size": 2},
                    "nodes": {"backend": "mp", "gpus": 8}},
    }))
    result = orch("plan", plan, "-i", inventory, "--forks", "1", cwd=tmp_path, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "the 2 nodes of the server run at once (--forks 1 does not bound" in result.stdout
    # both nodes voted: the group's decision reached each
    assert result.stdout.count("start orch-vllm (process; not running)") == 2, result.stdout
