"""The model step: the plan's `model:` section converged on the host. Its facts (facts/model.py)
say which commit the revision names and which files are there and verified; its plan says
what is missing or wrong and checks the free space first; its change runs the real
`huggingface_hub` client on the host (model_fetch_host.py), showing bytes, rate and ETA."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass

from orchestrator import console, masking
from orchestrator.errors import StepError
from orchestrator.events import Emit, StageEvent
from orchestrator.facts import Facts, ProbeRequest
from orchestrator.facts.model import ModelFacts, ModelFile, model_files_dir, model_record_path
from orchestrator.plan.models import ModelSpec, PythonEnv
from orchestrator.plan.secrets import substitute
from orchestrator.steps.base import Change, Finding, Step, StepPlan
from orchestrator.steps.model_fetch_host import PROGRAM
from orchestrator.transport.base import Transport
from orchestrator.transport.command import Command, Raw

SPACE_MARGIN = 1 << 30  # the filesystem keeps this much free after the download
_SILENCE_S = 120.0  # the program reports each second: this long silent means it is gone
_PROGRESS_EVERY_S = 5.0  # a progress line (and event) at most this often


def size_text(size: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(size) < 1000 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    raise AssertionError("unreachable")


def _duration_text(seconds: float) -> str:
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


@dataclass(frozen=True)
class Need:
    """What a host still needs of the model."""

    fetch: list[ModelFile]  # missing, a wrong size, or unverified (hashed, then maybe fetched)
    fetch_bytes: int  # at most this much to download (partial files resume)

    @property
    def converged(self) -> bool:
        return not self.fetch


def need(facts: ModelFacts) -> Need:
    assert facts.files is not None
    todo = [f for f in facts.files if f.state != "ok"]
    download = sum(f.size or 0 for f in todo if f.state != "unverified")
    return Need(todo, max(0, download - facts.partial_bytes))


def describe(spec: ModelSpec, facts: ModelFacts, wanted: Need) -> str:
    """`orch plan`'s line: what is missing or wrong, in files and bytes."""
    assert facts.files is not None
    states = [f.state for f in wanted.fetch]
    parts = []
    for state, words in (("missing", "missing"), ("size", "of the wrong size"),
                         ("link", "linked out of the folder or not a file: replaced"),
                         ("unverified", "changed or never verified: hashed first")):
        if states.count(state):
            parts.append(f"{states.count(state)} {words}")
    short = (facts.commit or "?")[:12]
    text = (f"model: {spec.repo}@{short}: {len(wanted.fetch)} of {len(facts.files)} files "
            f"({', '.join(parts)}), {size_text(wanted.fetch_bytes)} to fetch")
    unverified = sum(f.size or 0 for f in wanted.fetch if f.state == "unverified")
    if unverified:
        text += f" (and up to {size_text(unverified)} more if a hash differs)"
    if facts.partial_bytes:
        text += f" (resuming {size_text(facts.partial_bytes)} already on disk)"
    return text


class ModelStep(Step):
    name = "model"
    follows_earlier_changes = True  # the venv (its huggingface_hub) may be new

    def __init__(self, spec: ModelSpec, python: PythonEnv, secrets: Mapping[str, str], *,
                 restart_marker: str | None = None,
                 commit: str | None = None) -> None:
        self.spec = spec
        self.commit = commit  # --locked: the commit the earlier run was made on
        self.python = f"{python.venv}/bin/python"
        self.token = substitute(spec.token, secrets) if spec.token else None
        self.restart_marker = restart_marker

    def request(self) -> ProbeRequest:
        spec = self.spec
        return ProbeRequest(asks={"model": {
            "repo": spec.repo, "revision": self.commit or spec.revision, "dir": spec.dir,
            "cache": spec.cache,
            "allow": spec.allow, "ignore": spec.ignore, "endpoint": spec.endpoint,
            "token": self.token, "python": self.python}})

    def plan(self, facts: Facts) -> StepPlan:
        found = facts.extra.get("model")
        plan = StepPlan(self.name)
        if not isinstance(found, ModelFacts):
            plan.blocked = "the host did not answer about the model's files"
            return plan
        if found.refused is not None:
            return _refused(self.spec, found, plan)
        plan.findings += _revision_findings(self.spec, found)
        if found.commit is None or found.files is None:
            return _unknown(self.spec, found, plan)
        wanted = need(found)
        if wanted.converged:
            return plan
        if found.free_bytes is not None and wanted.fetch_bytes + SPACE_MARGIN > found.free_bytes:
            plan.blocked = (
                f"not enough disk space for the model: {found.space_path} has "
                f"{size_text(found.free_bytes)} free, the download needs "
                f"{size_text(wanted.fetch_bytes)} (plus {size_text(SPACE_MARGIN)} kept free)")
            plan.findings.append(Finding("error", plan.blocked, "free space there, or point "
                                         "model.dir / model.cache at a larger filesystem"))
            return plan
        plan.changes.append(self._change(found, wanted))
        return plan

    def _change(self, found: ModelFacts, wanted: Need) -> Change:
        assert found.commit is not None and found.files is not None
        places = found.places
        request = {
            "repo": self.spec.repo, "revision": self.spec.revision, "commit": found.commit,
            "allow": self.spec.allow, "ignore": self.spec.ignore, "endpoint": self.spec.endpoint,
            "token": self.token, "places": places,
            "files_dir": model_files_dir(places, found.commit),
            "record": model_record_path(places, found.commit), "margin": SPACE_MARGIN,
            "files": [{"path": f.path, "size": f.size, "sha256": f.sha256, "blob": f.blob,
                       "state": f.state} for f in found.files]}
        summary = describe(self.spec, found, wanted)
        commands = []
        if self.restart_marker is not None:  # a running server reloads what changed
            marker_dir = self.restart_marker.rpartition("/")[0] or "/"
            commands = [Command("mkdir", "-p", marker_dir), Command("touch", self.restart_marker)]

        def run(transport: Transport, emit: Emit) -> None:
            fetch(transport, self.python, request, emit, timeout=self.spec.timeout)

        return Change(summary, commands=commands, stream=run)


def _revision_findings(spec: ModelSpec, found: ModelFacts) -> list[Finding]:
    said = []
    if found.resolved is not None and not spec.pinned:
        said.append(Finding("info", f"model: revision {spec.revision} of {spec.repo} is commit "
                                    f"{found.resolved}", "pin it (model.revision: "
                                    f"{found.resolved}) to keep every host on these weights"))
    if found.hub_error is not None and found.commit is not None:
        said.append(Finding("warning", f"model: the hub was not reached ({found.hub_error}); "
                                       f"using commit {found.commit[:12]}, the last fetched"))
    return said


def _refused(spec: ModelSpec, found: ModelFacts, plan: StepPlan) -> StepPlan:
    """A listing that lies, a record that was tampered with, a folder others may write in:
    nothing is fetched, stat'ed or removed on its word."""
    plan.blocked = f"model: {spec.repo}@{spec.revision}: {console.shown(found.refused or '')}"
    hints = {"listing": "orch fetches nothing on such a listing: check model.endpoint (the hub, "
                        "or whoever is on the path to a plain-http endpoint, sent it)",
             "record": "remove orch's record there; the next apply hashes the files again",
             "folder": "the folder and the folders below it must be this user's own and "
                       "writable by nobody else"}
    plan.findings.append(Finding("error", plan.blocked, hints.get(found.refused_kind or "", "")))
    return plan


def _unknown(spec: ModelSpec, found: ModelFacts, plan: StepPlan) -> StepPlan:
    """No file list to compare with: before the venv exists (its client asks the hub), or
    the hub refused or could not be reached."""
    if found.hub_error_kind == "client":
        plan.changes.append(Change(f"model: fetch {spec.repo}@{spec.revision} (its files are "
                                   "listed once the venv has huggingface_hub)"))
        return plan
    hints = {"auth": "set model.token: ${env:HF_TOKEN} and export a token that may read it",
             "repository": "check model.repo (or the token: a private repository reads as "
                           "missing without one)",
             "revision": "check model.revision: a branch, tag or commit of the repository",
             "unreachable": "check model.endpoint / HF_ENDPOINT and the host's network"}
    tries = f" after {found.attempts} attempts" if (found.attempts or 0) > 1 else ""
    plan.blocked = f"{spec.repo}@{spec.revision}: the hub at {found.hub}{tries}: {found.hub_error}"
    plan.findings.append(Finding("error", plan.blocked, hints.get(found.hub_error_kind or "", "")))
    return plan


def fetch(transport: Transport, python: str, request: Mapping[str, object], emit: Emit,
          *, timeout: float) -> None:
    """Run the fetch program on the host, showing its progress; raise on its error."""
    # Its warnings join its events (a stderr nobody reads would fill and stall it).
    held = transport.hold(Command(python, "-u", "-c", PROGRAM, Raw("2>&1")),
                          stdin=(json.dumps(request) + "\n").encode())
    host, started, shown = transport.host, time.monotonic(), 0.0
    other: list[str] = []  # what it printed that is not an event: said if it dies
    try:
        while True:
            line = held.line(timeout=_SILENCE_S)
            if line is None:
                last = masking.mask(" | ".join(other[-5:]))
                raise StepError(f"{host}: the model's fetch program ended without a word "
                                f"(killed, or the connection dropped){': ' + last if last else ''}",
                                hint="apply again: the download resumes where it stopped")
            event = _event(line)
            what = event.get("event")
            if what == "output":
                other = [*other[-20:], str(event.get("line"))]
            if what == "done":
                emit(StageEvent(host, stage="model", status="changed",
                                message=f"fetched {size_text(_number(event.get('done')))}"))
                return
            if what == "error":
                raise _failure(event, host)
            if what in ("refetch", "retry"):
                emit(StageEvent(host, stage="model", status="running", message=_said(event)))
            elif what == "progress" and time.monotonic() - shown >= _PROGRESS_EVERY_S:
                shown = time.monotonic()
                emit(StageEvent(host, stage="model", status="running",
                                message=progress_text(event, shown - started)))
            if time.monotonic() - started > timeout:
                raise StepError(f"{host}: the model's download took longer than model.timeout "
                                f"({_duration_text(timeout)})",
                                hint="raise model.timeout; apply again resumes the download")
    finally:
        held.release()


def _event(line: str) -> dict[str, object]:
    try:
        event = json.loads(line)
    except ValueError:
        return {"event": "output", "line": line}
    return event if isinstance(event, dict) else {"event": "output", "line": line}


def _said(event: Mapping[str, object]) -> str:
    if event.get("event") == "refetch":
        return f"{event.get('path')}: {event.get('why')}: fetching it again"
    return masking.mask(f"hub error, retry {event.get('attempt')}: {event.get('message')}")


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


def progress_text(event: Mapping[str, object], seconds: float) -> str:
    done, total = _number(event.get("done")), _number(event.get("total"))
    rate = done / seconds if seconds > 0 else 0.0
    text = f"{size_text(done)} of {size_text(total)}"
    if rate > 0:
        text += f", {size_text(rate)}/s, ETA {_duration_text(max(0.0, total - done) / rate)}"
    return text


def _failure(event: Mapping[str, object], host: str) -> StepError:
    message = masking.mask(str(event.get("message") or ""))
    hint = None
    if event.get("space"):
        hint = "the filesystem filled up: free space, or point model.dir / model.cache elsewhere"
    elif "401" in message or "403" in message or event.get("kind") == "GatedRepoError":
        hint = "set model.token: ${env:HF_TOKEN} and export a token that may read the repository"
    return StepError(f"{host}: fetching the model failed: {event.get('kind')}: {message}",
                     hint=hint or "apply again to retry: what was fetched is kept")
