"""A host's environment.json, typed: what the apply's environment stage captured of the host
(`nvidia-smi -q`, the engine's environment collector) and, for what it did not, why.

apply/environment.py builds and writes these records; `orch compare` and `orch report` read
them back here, without the apply's stack. A record keeps only the keys it was given
(`to_json`), so a file reads back as it was written; a missing or unreadable file is an
empty record, never an error (a run without one predates it, or its capture failed).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field, ValidationError

from orchestrator.runs.layout import EnvironmentLayout
from orchestrator.runs.run_records import Record


class NvidiaSmiCapture(Record):
    """`nvidia-smi -q`: kept (its versions and GPU names), or why not."""

    captured: bool = False
    file: str | None = None  # EnvironmentLayout.NVIDIA_SMI, beside environment.json
    why: str | None = None
    error: str | None = None  # what nvidia-smi said when it failed but printed its text
    driver_version: str | None = None
    cuda_version: str | None = None
    gpu_names: list[str] = Field(default_factory=list)


class CollectEnvCapture(Record):
    """The engine's environment collector: its command (None: the engine has none), and
    whether its output was kept, how long it took, or why not."""

    command: str | None = None
    timeout_s: int | None = None
    captured: bool = False
    file: str | None = None  # EnvironmentLayout.COLLECT_ENV, kept even when it failed
    seconds: float | None = None
    why: str | None = None


class EnvironmentRecord(Record):
    """environment.json."""

    nvidia_smi: NvidiaSmiCapture | None = None
    collect_env: CollectEnvCapture | None = None
    key: str | None = None  # what the capture depends on (apply/environment.py: environment_key)
    kept_from: str | None = None  # the earlier run whose capture this one kept

    def to_json(self) -> dict[str, Any]:
        """The keys that were set, as the file holds them."""
        return self.model_dump(mode="json", exclude_unset=True)

    @property
    def cuda_version(self) -> str | None:
        return self.nvidia_smi.cuda_version if self.nvidia_smi is not None else None

    @property
    def driver_version(self) -> str | None:
        return self.nvidia_smi.driver_version if self.nvidia_smi is not None else None


def read_environment(where: EnvironmentLayout) -> EnvironmentRecord:
    """A run folder's environment.json (an empty record when it has none, or none readable)."""
    try:
        return EnvironmentRecord.model_validate(json.loads(where.record.read_text()))
    except (OSError, ValueError, ValidationError):
        return EnvironmentRecord()
