"""The files step: configuration files with exact content and mode.

Compared by sha256 on the host; written atomically by the transport; `orch plan` shows a
unified diff (secrets masked).
"""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from orchestrator import local_files, masking
from orchestrator.errors import PlanError
from orchestrator.facts import Facts, ProbeRequest
from orchestrator.plan.models import FileSpec
from orchestrator.plan.source import MAX_FILE_BYTES
from orchestrator.steps.base import Change, Finding, Step, StepPlan, Upload
from orchestrator.transport.command import Command


@dataclass(frozen=True)
class DesiredFile:
    path: str
    data: bytes
    mode: str
    # Holds secrets (a `${env:...}` reference, or a private mode): never shown in a diff,
    # since the host's copy may hold an old secret that this run cannot mask.
    sensitive: bool = False

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


def render_files(
    files: list[FileSpec], *, base_dir: Path, render_template: Callable[[str], str],
    fill_secrets: Callable[[str], str],
) -> list[DesiredFile]:
    """Plan file specs -> exact bytes. A template's text gets what the plan's own strings got
    when loaded (`render_template`: vars, host variables); then both `${env:X}` secrets."""
    out: list[DesiredFile] = []
    for spec in files:
        if spec.content is not None:
            text = spec.content
        else:
            assert spec.template is not None
            text = render_template(read_template(base_dir / spec.template))
        private = int(spec.mode, 8) & 0o077 == 0
        out.append(DesiredFile(spec.path, fill_secrets(text).encode(), spec.mode,
                               sensitive=private or "${env:" in text))
    return out


def read_template(path: Path) -> str:
    """A template's text: a regular file of UTF-8 text, as small as a plan file must be."""
    try:
        return local_files.read_text(path, max_bytes=MAX_FILE_BYTES)
    except OSError as error:
        raise PlanError(f"cannot read template {path}: {error.strerror or error}",
                        field="files.template") from None
    except UnicodeDecodeError as error:
        raise PlanError(f"template {path} is not UTF-8 text ({error.reason})",
                        field="files.template") from None


def unified_diff(path: str, old: str | None, new: str) -> str:
    """A masked unified diff of a file's content."""
    old_lines = (old or "").splitlines(keepends=True)
    new_lines = new.splitlines(keepends=True)
    diff = difflib.unified_diff(
        old_lines, new_lines, fromfile=f"{path} (host)" if old is not None else "/dev/null",
        tofile=f"{path} (plan)",
    )
    return masking.mask("".join(diff))


class FilesStep(Step):
    name = "files"

    def __init__(self, files: list[DesiredFile]) -> None:
        self.files = files

    def request(self) -> ProbeRequest:
        return ProbeRequest(files={f.path: f.sha256 for f in self.files})

    def plan(self, facts: Facts) -> StepPlan:
        result = StepPlan(step=self.name)
        for desired in self.files:
            have = facts.files.get(desired.path)
            if have is not None and have.kind is not None:
                # Writing would replace a device or a FIFO (or fail on a folder): never silently.
                result.findings.append(Finding(
                    "error", f"{desired.path} is a {have.kind} on the host, not a regular file",
                    fix="remove it, or choose another path for this file"))
                result.blocked = f"{desired.path} is a {have.kind}, not a regular file"
                continue
            mode = int(desired.mode, 8)
            if have is None or not have.exists or have.sha256 != desired.sha256:
                text = desired.data.decode("utf-8", errors="replace")
                if desired.sensitive:
                    before = have.sha256[:12] if have is not None and have.sha256 else "none"
                    diff = (f"{desired.path}: content differs, not shown (it holds secrets); "
                            f"sha256 {before} -> {desired.sha256[:12]}\n")
                elif have is not None and have.exists and have.content is None:
                    diff = f"{desired.path}: binary or large file differs\n"
                else:
                    diff = unified_diff(desired.path, have.content if have else None, text)
                verb = "update" if have is not None and have.exists else "create"
                result.changes.append(
                    Change(f"{verb} {desired.path} (mode {desired.mode})",
                           uploads=[Upload(desired.path, desired.data, mode)], diff=diff)
                )
            elif have.mode != desired.mode:
                result.changes.append(
                    Change(f"chmod {desired.mode} {desired.path} (was {have.mode})",
                           [Command("chmod", desired.mode, desired.path)])
                )
        return result
