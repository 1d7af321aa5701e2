"""The pure parts of a multi-node server: topology, `ray status`, the nodes' vote and order."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import pytest
import yaml

from orchestrator.cluster.gate import ClusterError, Gate, Vote
from orchestrator.cluster.ray_status import parse_ray_status
from orchestrator.cluster.topology import Node, build, stop_order, units
from orchestrator.engines import engine
from orchestrator.engines.base import MultiNode
from orchestrator.errors import PlanError

# What `ray status` (Ray 2.60) printed for a head with 8 logical GPUs.
RAY_STATUS = """======== Autoscaler status: 2026-12-01 04:01:37.799197 ========
Node status
---------------------------------------------------------------
Active:
 1 node_9b7fc36b231e7b354f69702012ccb61a6cd617387aeb0704e0f98e55
 1 node_1c7fc36b231e7b354f69702012ccb61a6cd617387aeb0704e0f98e77
Pending:
 (no pending nodes)
Recent failures:
 (no failures)

Resources
---------------------------------------------------------------
Total Usage:
 0.0/1.0 CPU
 0.0/16.0 GPU
 0B/23.10GiB memory
 0B/76.29MiB object_store_memory

From request_resources:
 (none)
Pending Demands:
 (no resource demands)
"""


def topology(backend: str = "ray", hosts: tuple[str, ...] = ("a", "b", "c"), head: str | None = None,
             gpus: int | None = 8, tp: int = 8, pp: int = 3):
    return build(backend=backend, hosts=list(hosts), head=head,  # type: ignore[arg-type]
                 addresses={h: f"10.0.0.{i + 1}" for i, h in enumerate(hosts)},
                 args={"tensor-parallel-size": tp, "pipeline-parallel-size": pp},
                 gpus_per_node=gpus, ray_port=6379, master_port=29501, ray_args=["--num-cpus=1"],
                 engine=engine("vllm"))


def test_ray_nodes_and_the_server_flags() -> None:
    t = topology(head="b")
    assert [n.host for n in t.nodes] == ["b", "a", "c"] and t.head.address == "10.0.0.2"
    head, worker = t.node("b"), t.node("c")
    assert t.ray_node_argv(head, "/v/bin") == [
        "/v/bin/ray", "start", "--block", "--disable-usage-stats", "--node-ip-address=10.0.0.2",
        "--num-gpus=8", "--head", "--port=6379", "--include-dashboard=false", "--num-cpus=1"]
    assert "--address=10.0.0.2:6379" in t.ray_node_argv(worker, "/v/bin")
    assert t.server_flags(head) == ["--distributed-executor-backend", "ray"]
    assert t.server_env(worker) == {"VLLM_HOST_IP": "10.0.0.3", "RAY_ADDRESS": "10.0.0.2:6379"}


def test_mp_ranks_and_headless_workers() -> None:
    t = topology("mp", ("a", "b"), pp=2)
    assert t.server_flags(t.node("a")) == [
        "--distributed-executor-backend", "mp", "--nnodes", "2", "--node-rank", "0",
        "--master-addr", "10.0.0.1", "--master-port", "29501"]
    worker = t.server_flags(t.node("b"))
    assert worker[worker.index("--node-rank") + 1] == "1" and worker[-1] == "--headless"


def test_undeclared_gpus_leave_the_count_to_ray() -> None:
    t = topology(gpus=None)
    assert not any(a.startswith("--num-gpus") for a in t.ray_node_argv(t.head, "/v/bin"))


@pytest.mark.parametrize(("change", "says"), [
    ({"tp": 8, "pp": 2}, "8 x 2 = 16 GPUs, but 3 node(s) x 8 GPU(s) = 24"),
    ({"head": "zz"}, "the head 'zz' is not among the plan's hosts"),
])
def test_layouts_the_nodes_cannot_hold_are_plan_errors(change: dict, says: str) -> None:
    with pytest.raises(PlanError, match=says.replace("(", r"\(").replace(")", r"\)")):
        topology(**change)


def test_a_hostile_address_is_refused() -> None:
    with pytest.raises(PlanError, match="is not an address"):
        build(backend="ray", hosts=["a"], head=None, addresses={"a": "10.0.0.1;touch /tmp/x"},
              args={}, gpus_per_node=None, ray_port=6379, master_port=29501, ray_args=[],
              engine=engine("vllm"))


def test_units_and_the_order_the_group_goes_down_in() -> None:
    assert units("ray", ["a", "b", "c"], "b") == [("b", None), ("b", "ray"), ("a", "ray"), ("c", "ray")]
    assert stop_order("ray", ["a", "b", "c"], None) == [
        ("a", None), ("b", "ray"), ("c", "ray"), ("a", "ray")]
    assert stop_order("mp", ["a", "b"], None) == [("a", None), ("b", None)]


def test_ray_status_counts_active_nodes_and_gpus() -> None:
    status = parse_ray_status(RAY_STATUS)
    assert status is not None and (status.active_nodes, status.gpus) == (2, 16.0)
    assert status.complete(2, 16) and not status.complete(3, 16) and not status.complete(2, 24)
    assert parse_ray_status("ConnectionError: could not find any running Ray instance") is None


def vote_all(gate: Gate, votes: dict[str, Vote]) -> dict[str, object]:
    results: dict[str, object] = {}

    def one(host: str) -> None:
        try:
            results[host] = gate.vote(host, votes[host])
        except ClusterError as error:
            results[host] = error

    threads = [threading.Thread(target=one, args=(h,)) for h in votes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    return results


def test_one_node_that_needs_a_start_restarts_the_whole_group() -> None:
    gate = Gate(topology(), check_gpus=False, timeout=5)
    same = {"ray": "2.60.0"}
    decisions = vote_all(gate, {"a": Vote(None, same), "b": Vote(None, same),
                                "c": Vote("not running", same)})
    assert {d.restart for d in decisions.values()} == {True}  # type: ignore[attr-defined]
    assert decisions["a"].why() == "c: not running"  # type: ignore[attr-defined]


def test_version_skew_blocks_the_group() -> None:
    gate = Gate(topology(), check_gpus=False, timeout=5)
    decisions = vote_all(gate, {"a": Vote(None, {"ray": "2.60.0"}), "b": Vote(None, {"ray": "2.60.0"}),
                                "c": Vote(None, {"ray": "2.59.0"})})
    blocked = decisions["a"].blocked  # type: ignore[attr-defined]
    assert blocked == "version skew between nodes, ray: a 2.60.0, b 2.60.0, c 2.59.0"


def test_probed_gpus_are_checked_against_the_layout() -> None:
    gate = Gate(topology(gpus=None), check_gpus=True, timeout=5)
    decisions = vote_all(gate, {h: Vote(None, {}, gpus=4) for h in "abc"})
    assert "3 node(s) x 4 GPU(s) = 12" in decisions["a"].blocked  # type: ignore[attr-defined]
    gate = Gate(topology(gpus=8), check_gpus=True, timeout=5)
    decisions = vote_all(gate, {"a": Vote(None, gpus=8), "b": Vote(None, gpus=8), "c": Vote(None)})
    assert decisions["a"].blocked == "node c has 0 GPU(s), the layout needs 8 per node"  # type: ignore[attr-defined]


def test_a_node_that_ends_early_releases_the_others_with_its_reason() -> None:
    gate = Gate(topology(), check_gpus=False, timeout=5)
    gate.withdraw("c", "its python step failed: no space left on device")
    decisions = vote_all(gate, {"a": Vote(None), "b": Vote(None)})
    assert decisions["a"].blocked == \
        "node c could not take part: its python step failed: no space left on device"  # type: ignore[attr-defined]


def test_the_start_order_waits_for_marks_and_names_a_node_that_left() -> None:
    gate = Gate(topology(), check_gpus=False, timeout=5)
    gate.mark("a", "up:ray-node")
    threading.Timer(0.2, gate.mark, args=("b", "up:ray-node")).start()
    gate.wait_for(["a", "b"], "up:ray-node")  # returns once b marks
    gate.withdraw("c", "lost its connection")
    with pytest.raises(ClusterError, match="node c failed: lost its connection"):
        gate.wait_for(["a", "c"], "up:ray-node")


def test_a_shipped_two_node_plan_validates(tmp_path: Path) -> None:
    from orchestrator.apply.compile import check
    from orchestrator.plan.loader import load_plan

    root = Path(__file__).resolve().parents[2]
    for name in ("plans/kimi-k2.5-2x8-ray.yaml", "plans/sim/kimi-k2.5-2x8-ray.yaml"):
        loaded = load_plan(root / name)
        check(loaded)
        assert loaded.plan.service is not None and loaded.plan.service.nodes is not None
        assert yaml.safe_load((root / name).read_text())


def test_limit_cannot_pick_some_nodes_of_a_server(tmp_path: Path) -> None:
    from fixtures.orchcli import orch

    (tmp_path / "inventory.yaml").write_text(yaml.safe_dump({
        "hosts": {"a": {"connection": "local"}, "b": {"connection": "local"}},
        "groups": {"pair": ["a", "b"]}}))
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump({
        "name": "pair", "hosts": "pair", "python": {"venv": str(tmp_path / "v")},
        "service": {"engine": "sim", "model": "m", "args": {"tensor-parallel-size": 8},
                    "nodes": {"gpus": 4}}}))
    result = orch("plan", tmp_path / "plan.yaml", "-i", tmp_path / "inventory.yaml",
                  "--limit", "b", cwd=tmp_path)
    assert result.returncode == 64, result.stdout + result.stderr
    assert "a multi-node server starts whole" in result.stderr
    assert not (tmp_path / "v").exists()  # refused before anything reached a host


def test_the_nodes_not_joined_are_named_by_host_from_the_drivers_answer() -> None:
    from orchestrator.cluster.ray_status import not_joined, parse_alive_addresses

    said = 'some ray warning\n["10.0.0.1", "10.0.0.3"]\n'
    alive = parse_alive_addresses(said)
    assert alive == {"10.0.0.1", "10.0.0.3"}
    declared = [("a", "10.0.0.1"), ("b", "10.0.0.2"), ("c", "10.0.0.3")]
    assert not_joined(declared, alive) == [("b", "10.0.0.2")]
    assert parse_alive_addresses("Traceback ...\nConnectionError: no GCS") is None


def test_each_ray_node_gets_its_own_host_variables_in_ray_args(tmp_path: Path) -> None:
    """`${host.X}` in service.nodes.ray_args is filled per node (not with the head's values
    for every node)."""
    from orchestrator.apply.compile import compile_plan
    from orchestrator.inventory import Inventory
    from orchestrator.plan.loader import load_plan

    (tmp_path / "plan.yaml").write_text(yaml.safe_dump({
        "name": "pair", "hosts": "all", "python": {"venv": str(tmp_path / "v")},
        "service": {"engine": "sim", "model": "m",
                    "args": {"tensor-parallel-size": 8, "pipeline-parallel-size": 2},
                    "nodes": {"gpus": 8, "address": "${host.ip}",
                              "ray_args": ["--node-manager-port=${host.nm_port}"]}}}))
    inventory = Inventory.model_validate({"hosts": {
        "a": {"connection": "local", "vars": {"ip": "10.0.0.1", "nm_port": 0}},
        "b": {"connection": "local", "vars": {"ip": "10.0.0.2", "nm_port": 16399}}}})
    compiled = compile_plan(load_plan(tmp_path / "plan.yaml"), {}, ["a", "b"],
                            inventory=inventory)
    assert compiled.gate is not None
    topology = compiled.gate.topology
    assert topology.ray_node_argv(topology.node("a"), "/v/bin")[-1] == "--node-manager-port=0"
    assert topology.ray_node_argv(topology.node("b"), "/v/bin")[-1] == "--node-manager-port=16399"


def test_the_server_flags_and_node_variable_are_the_engines_own() -> None:
    """cluster/ writes the names the engine declares (`Engine.multi_node`), none of its own."""
    names = MultiNode(executor="executor", nodes="node-count", rank="rank", master_addr="dist-host",
                      master_port="dist-port", headless=None, host_ip_env="OTHER_HOST_IP")
    other = dataclasses.replace(engine("vllm"), multi_node=names)
    t = build(backend="mp", hosts=["a", "b"], head=None,
              addresses={"a": "10.0.0.1", "b": "10.0.0.2"}, args={"tensor-parallel-size": 2},
              gpus_per_node=1, ray_port=6379, master_port=29501, ray_args=[], engine=other)
    assert t.server_flags(t.node("b")) == [  # no headless switch declared: none written
        "--executor", "mp", "--node-count", "2", "--rank", "1", "--dist-host", "10.0.0.1",
        "--dist-port", "29501"]
    assert t.server_env(t.node("b")) == {"OTHER_HOST_IP": "10.0.0.2"}
    quiet = dataclasses.replace(other, multi_node=dataclasses.replace(names, host_ip_env=None))
    assert build(backend="ray", hosts=["a"], head=None, addresses={"a": "10.0.0.1"}, args={},
                 gpus_per_node=None, ray_port=6379, master_port=29501, ray_args=[],
                 engine=quiet).node_env(Node("a", 0, "10.0.0.1")) == {}


def test_an_engine_without_multi_node_flags_refuses_service_nodes_at_plan_time(
    tmp_path: Path,
) -> None:
    from orchestrator.apply.compile import check
    from orchestrator.plan.loader import load_plan

    (tmp_path / "plan.yaml").write_text(yaml.safe_dump({
        "name": "pair", "hosts": "all", "python": {"venv": str(tmp_path / "v")},
        "service": {"engine": "sglang", "model": "m", "args": {"tp-size": 8},
                    "nodes": {"gpus": 4}}}, sort_keys=False))
    with pytest.raises(PlanError) as raised:
        check(load_plan(tmp_path / "plan.yaml"))
    error = raised.value
    assert "SGLang cannot span nodes" in error.message and error.field == "service.nodes"
    assert error.file is not None and error.line is not None
