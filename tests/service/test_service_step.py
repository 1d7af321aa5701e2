"""The service step's decisions from facts (pure): start, leave alone, restart and why,
and moving between backends."""

from __future__ import annotations

import json
from typing import Any

from orchestrator.plan.models import Plan
from orchestrator.probe import Facts, HostFacts, ServiceFacts
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
    assert change.summary == "restart orch-vllm (process; changed: launch_spec)"


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
