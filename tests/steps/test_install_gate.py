"""The install digest the host's install record keeps (apply/install_gate.py): what the install
converges changes it, what only the server's launch changes does not."""

from __future__ import annotations

from typing import Any

from orchestrator.apply.install_gate import install_digest
from orchestrator.plan.models import Plan

BASE: dict[str, Any] = {
    "name": "p", "python": {"venv": "/opt/v"}, "install": {"packages": ["vllm==0.33.0"]},
    "model": {"repo": "org/m", "revision": "a" * 40},
    "service": {"engine": "vllm", "model": "org/m", "args": {"max-num-seqs": 64}},
}


def digest(files: dict[str, str] | None = None, **changes: Any) -> str:
    plan = Plan.model_validate({**BASE, **changes})
    assert plan.python is not None
    return install_digest(plan.python, plan.install, plan.model, files or {})


def test_server_flags_and_env_leave_the_install_unchanged() -> None:
    service = {**BASE["service"], "args": {"max-num-seqs": 256, "tensor-parallel-size": 2}}
    assert digest(service=service, env={"NCCL_DEBUG": "INFO"}) == digest()


def test_what_the_install_converges_changes_it() -> None:
    assert digest(install={"packages": ["vllm==0.33.1"]}) != digest()
    assert digest(install={"packages": ["vllm==0.33.0"], "clean": True}) != digest()
    assert digest(python={"venv": "/opt/w"}) != digest()
    assert digest(model={"repo": "org/m", "revision": "b" * 40}) != digest()
    assert digest({"/etc/a.conf": "1"}) != digest({"/etc/a.conf": "2"})
