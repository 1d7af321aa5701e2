"""What the host keeps of the running server: its `spec.json` (the fingerprint it was started
with, its argv, environment without secret values and config digests) and its
`startup.json` (how its last start-up went), read back from the probe's facts; and what a
restart would change, in `orch plan`'s words."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from pydantic import ValidationError

from orchestrator.facts import OtherInstance, ServiceFacts
from orchestrator.runs.run_records import Startup
from orchestrator.service import spec_diff
from orchestrator.service.backends import Backend
from orchestrator.steps.base import Finding


@dataclass(frozen=True)
class ServiceRecord:
    """The service's `spec.json` on the host: what the running server was started with
    (argv, environment without secret values, config file digests: what `orch plan` diffs)."""

    fingerprint: dict[str, str]
    backend: Backend | None
    command: str = ""
    port: int | None = None
    served_names: tuple[str, ...] = ()
    written: float = 0.0
    argv: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    secrets: str = ""  # digest of the secret variables' values: "a secret changed", not which value

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "served_names": list(self.served_names),
                           "argv": list(self.argv)}, indent=2) + "\n"


def _strings(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def record_of(found: ServiceFacts | OtherInstance | None) -> ServiceRecord | None:
    text = found.spec_text if found is not None else None
    try:
        data = json.loads(text or "")
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict):
        return None
    backend = data.get("backend")
    argv = data.get("argv")
    return ServiceRecord(
        fingerprint=_strings(data.get("fingerprint")),
        backend=backend if backend in ("systemd", "process") else None,
        command=str(data.get("command") or ""),
        port=data.get("port") if isinstance(data.get("port"), int) else None,
        served_names=tuple(str(n) for n in data.get("served_names") or ()),
        written=float(data.get("written") or 0.0),
        argv=tuple(str(a) for a in argv) if isinstance(argv, list) else (),
        env=_strings(data.get("env")),
        files=_strings(data.get("files")),
        secrets=str(data.get("secrets") or ""),
    )


def last_startup(found: ServiceFacts | None) -> Startup | None:
    """How the running server's last start-up went (the startup.json beside it, written when
    it became ready); None when orch did not start it, or an older orch wrote another form."""
    text = found.startup_text if found is not None else None
    try:
        return Startup.model_validate_json(text or "")
    except ValidationError:
        return None


def last_startup_s(found: ServiceFacts | None) -> float | None:
    """Seconds the last start-up took."""
    startup = last_startup(found)
    return startup.seconds if startup is not None else None


def last_kernels(found: ServiceFacts | None) -> dict[str, Any]:
    """The kernels the running server's start-up chose (the engine's start-up reader); empty when
    its start-up said nothing of them or orch did not start it."""
    startup = last_startup(found)
    kernels = startup.facts.get("kernels") if startup is not None else None
    return kernels if isinstance(kernels, dict) else {}


def other_port(other: OtherInstance) -> int | None:
    """The port the service of the same name from another venv was started on."""
    record = record_of(other)
    return record.port if record is not None else None


def venv_of(state_dir: str) -> str:
    """The venv a service's state folder belongs to (<venv>/.orch/service/<name>)."""
    head, marker, _ = state_dir.rpartition("/.orch/service/")
    return head if marker else state_dir


def restart_diff(before: ServiceRecord, after: ServiceRecord, secret_names: frozenset[str]) -> list[str]:
    """What the restart changes, one `+`/`-`/`~` line each (spec_diff.py)."""
    if not before.argv:  # a record from an orch that kept no argv: say which parts changed
        return [f"~ {key}" for key in sorted(after.fingerprint)
                if before.fingerprint.get(key) != after.fingerprint[key]]
    lines = spec_diff.argv_changes(before.argv, after.argv)
    lines += spec_diff.env_changes(before.env, after.env, secret_names)
    lines += spec_diff.files_changes(before.files, after.files)
    changed = {k for k in after.fingerprint if before.fingerprint.get(k) != after.fingerprint[k]}
    if before.secrets != after.secrets and secret_names:
        lines.append(f"~ env {', '.join(sorted(secret_names))}: a secret's value changed "
                     "(values are not shown)")
    if "packages" in changed:
        lines.append("~ installed packages (the python step lists them)")
    if "orch_build" in changed:
        lines.append(f"~ orch build {before.fingerprint.get('orch_build', '?')[:12]} -> "
                     f"{after.fingerprint['orch_build'][:12]}")
    if "backend" in changed:
        lines.append(f"~ backend: {before.backend} -> {after.backend}")
    return lines


def restart_cost(name: str, seconds: float | None) -> Finding:
    took = f"the last one took {spec_diff.duration(seconds)}" if seconds else \
        "weights and torch.compile: minutes for a large model"
    return Finding("warning", f"applying restarts {name}: a full start-up ({took}), "
                              "during which it serves nothing")
