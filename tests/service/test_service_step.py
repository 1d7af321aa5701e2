"""The service step's decisions from facts (pure): start, leave alone, restart and why,
and moving between backends."""

from __future__ import annotations

import json
from typing import Any

from orchestrator.facts import Facts, HostFacts, ServiceFacts
from orchestrator.plan.models import Plan
from orchestrator.service.launch import render_launch
from orchestrator.service.step import ServiceStep

PLAN = Plan.model_validate({
    "name": "p",
    "python": {"venv": "/opt/v"},
    "service": {"engine": "vllm", "model": "m", "backend": "process", "args": {"max-num-seqs": 64}},
})


def step(plan: Plan = PLAN) -> ServiceStep:
    return ServiceStep(plan, render_launch(plan, venv_bin="/opt/v/bin"), {}, file_digests={})


def facts(*, running: bool, record: dict[str, Any] | None) -> Facts:
    process = {"pid": 42, "cmdline": ["/opt/v/bin/vllm"], "uptime": 5.0, "start_ticks": 7}
    # The service part as the fact program answers it, read by the probe's own parser.
    return Facts(host=HostFacts(systemd=False, user="root"), service=ServiceFacts.from_json({
        "pid": 42 if running else None,
        "process": process if running else None,
        "spec": json.dumps(record) if record is not None else None,
        "port": {"number": 8000, "listening": running,
                 "holder": {"pid": 42, "cmdline": []} if running else None},
    }))


def started_with(service: ServiceStep, **record: Any) -> dict[str, Any]:
    return {"fingerprint": service.fingerprint(Facts()), "backend": "process", **record}


def test_not_running_is_started() -> None:
    (change,) = step().plan(facts(running=False, record=None)).changes
    assert change.summary == "start orch-vllm (process; not running)"
    assert [u.mode for u in change.uploads if u.path.endswith("/env")] == [0o600]


def test_running_as_planned_is_left_alone() -> None:
    service = step()
    assert service.plan(facts(running=True, record=started_with(service))).converged


def test_a_changed_flag_restarts_and_says_what_changed() -> None:
    old = step()
    record = started_with(old)
    new_plan = PLAN.model_copy(deep=True)
    assert new_plan.service is not None
    new_plan.service.args["max-num-seqs"] = 128
    (change,) = step(new_plan).plan(facts(running=True, record=record)).changes
    assert change.summary == "restart orch-vllm (process; changed: command line)"


def written_record(service: ServiceStep) -> dict[str, Any]:
    """spec.json exactly as the step uploads it when it starts the service."""
    (change,) = service.plan(facts(running=False, record=None)).changes
    (upload,) = [u for u in change.uploads if u.path.endswith("/spec.json")]
    record: dict[str, Any] = json.loads(upload.data)
    return record


def test_a_restart_shows_flags_env_and_files_as_a_diff_without_secret_values() -> None:
    before = Plan.model_validate({
        "name": "p", "python": {"venv": "/opt/v"},
        "env": {"NCCL_P2P_LEVEL": "SYS", "HF_TOKEN": "hf_literal_secret_value", "OLD": "1"},
        "service": {"engine": "vllm", "model": "m", "backend": "process",
                    "args": {"max-num-seqs": 256, "kv-cache-dtype": "fp8", "trust-remote-code": True}},
    })
    old = ServiceStep(before, render_launch(before, venv_bin="/opt/v/bin"), {},
                      file_digests={"/etc/a.conf": "1", "/etc/gone.conf": "2"})
    record = written_record(old)
    assert "hf_literal_secret_value" not in json.dumps(record)
    after = before.model_copy(deep=True)
    assert after.service is not None
    after.service.model = "m2"
    after.service.args = {"max-num-seqs": 64, "trust-remote-code": True, "enable-expert-parallel": True}
    after.env = {"NCCL_P2P_LEVEL": "SYS", "HF_TOKEN": "hf_other_secret_value", "NCCL_DEBUG": "INFO"}
    new = ServiceStep(after, render_launch(after, venv_bin="/opt/v/bin"), {},
                      file_digests={"/etc/a.conf": "changed", "/etc/new.conf": "3"})
    plan = new.plan(facts(running=True, record=record))
    (change,) = plan.changes
    assert change.diff.splitlines() == [
        "~ model: m -> m2",
        "+ --enable-expert-parallel",
        "- --kv-cache-dtype fp8",
        "~ --max-num-seqs: 256 -> 64",
        "+ env NCCL_DEBUG=INFO",
        "- env OLD",
        # a new model and KV cache dtype: another compile cache (test_compile_cache.py)
        "~ compile cache: another key (its graphs compile again: a cold start)",
        "~ config file /etc/a.conf (content changed)",
        "- config file /etc/gone.conf",
        "+ config file /etc/new.conf",
        "~ env HF_TOKEN: a secret's value changed (values are not shown)",
    ]
    assert "secret_value" not in change.diff + change.summary
    (cost,) = [f for f in plan.findings if "full start-up" in f.message]
    assert cost.level == "warning" and "minutes for a large model" in cost.message


def test_the_restart_warning_quotes_the_last_start_up() -> None:
    old = step()
    record = written_record(old)
    new_plan = PLAN.model_copy(deep=True)
    assert new_plan.service is not None
    new_plan.service.args["max-num-seqs"] = 128
    found = facts(running=True, record=record)
    assert found.service is not None
    found.service = ServiceFacts(**{**found.service.__dict__,
                                    "startup_text": json.dumps({"seconds": 782.4})})
    plan = step(new_plan).plan(found)
    assert [f.message for f in plan.findings if "start-up" in f.message] == [
        "applying restarts orch-vllm: a full start-up (the last one took 13m 2s), "
        "during which it serves nothing"]


def test_a_record_without_argv_still_says_which_parts_changed() -> None:
    old = step()
    record = started_with(old)  # fingerprint only, as older orch versions wrote it
    new_plan = PLAN.model_copy(deep=True)
    assert new_plan.service is not None
    new_plan.service.args["max-num-seqs"] = 128
    (change,) = step(new_plan).plan(facts(running=True, record=record)).changes
    assert change.diff == "~ launch_spec"


def test_a_first_start_has_no_diff_and_no_restart_warning() -> None:
    plan = step().plan(facts(running=False, record=None))
    assert plan.changes[0].diff == ""
    assert not [f for f in plan.findings if "start-up" in f.message]


def test_moving_from_systemd_stops_what_systemd_started() -> None:
    service = step()
    record = started_with(service)
    record["backend"] = "systemd"
    record["fingerprint"] = {**record["fingerprint"], "backend": "systemd"}
    (change,) = service.plan(facts(running=True, record=record)).changes
    assert "changed: backend" in change.summary
    scripts = [c.raw() for c in change.commands]
    assert scripts[0].startswith("mkdir -p") and "systemctl stop orch-vllm.service" in scripts[0]
    assert "systemctl" not in scripts[1] and "kill -INT" in scripts[1]


def test_the_heads_ray_node_is_not_started_when_the_servers_port_is_taken() -> None:
    """Checked before anything starts: a Ray head started first would be stranded when the
    server after it cannot launch."""
    plan = Plan.model_validate({
        "name": "p", "python": {"venv": "/opt/v"},
        "service": {"engine": "sim", "model": "m", "backend": "process", "port": 8000}})
    ray = ServiceStep(plan, render_launch(plan, venv_bin="/opt/v/bin"), {}, file_digests={},
                      unit="ray", checks_server=True)
    assert ray.request().service is not None  # the server's port is asked in the same trip
    taken = Facts(host=HostFacts(systemd=False, user="root"), service=ServiceFacts.from_json({
        "port": {"number": 8000, "listening": True,
                 "holder": {"pid": 777, "cmdline": ["nginx"]}}}))
    planned = ray.plan(taken)
    assert planned.blocked is not None and planned.blocked.startswith("preflight")
    assert any("port 8000 (service.port) is already in use by pid 777: nginx" in f.message
               for f in planned.findings)


def test_a_service_of_the_same_name_from_another_venv_is_replaced_only_on_its_own_port() -> None:
    """A plan that moves the service to another venv replaces it; a server of the same name
    on another port may be a second deployment on the box: it is named, and left running."""
    def other_on(port: int) -> Facts:
        record = {"fingerprint": {}, "backend": "process", "port": port,
                  "argv": ["/old/bin/vllm", "serve", "m", "--port", str(port)]}
        return Facts(host=HostFacts(systemd=False, user="root"), service=ServiceFacts.from_json({
            "other": {"state_dir": "/old/.orch/service/orch-vllm", "pid": 9,
                      "process": {"pid": 9, "cmdline": ["/old/bin/vllm"], "start_ticks": 1},
                      "spec": json.dumps(record)}}))

    same = step().plan(other_on(8000))
    (change,) = same.changes
    assert change.summary == ("replace orch-vllm (process; replaces the one started from /old)")
    assert "/old/.orch/service/orch-vllm/pid" in " ".join(str(c) for c in change.commands)
    elsewhere = step().plan(other_on(9000))
    assert [c.summary for c in elsewhere.changes] == ["start orch-vllm (process; not running)"]
    assert [f.message for f in elsewhere.findings if f.level == "warning"] == [
        "another orch-vllm runs from /old on port 9000; it is left running"]
