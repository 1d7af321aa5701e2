"""The name of every file of a run folder. Writers and readers ask here; no path of a run
folder is spelt anywhere else.

    runs/<plan>/<UTC time>-<hash8>/
      meta.json                      Meta: orch version, plan, hosts, times, status
      plan.yaml                      the resolved plan (secret references, never values)
      events.jsonl                   one event per line, as they happened
      apply.lock                     held by the apply writing the run (who it is, as JSON)
      hosts/<host>/
        facts.json                   HostFactsRecord: what the probe found
        freeze.txt                   the venv's packages, `name==version` (--locked reads it)
        model.json                   the model's weights: repo, revision, commit, files (--locked)
        steps.json                   HostSteps: every step and stage and its outcome
        startup.json                 Startup: readiness, phases, restarts
        diagnosis.json               [DiagnosisRecord]: why the service died
        service.log                  the service's log
        ray.log                      a multi-node server's Ray node on this host
        smoke/<check>.json           one smoke check's request, answer and verdict
        commands/<name>.log          what a plan command printed (stdout, then stderr; masked)
        collect/<path>               files the plan's `collect:` fetched
        environment/                 nvidia-smi-q.txt, collect-env.txt (vLLM's collect-env)
                                     and environment.json: what was captured, what failed
        bench/                       BenchLayout: the benchmark's files

    runs/<plan>/matrix-<UTC time>-<hash8>/matrix.json    a matrix run (MatrixLayout)

`orch bench --result-dir DIR` writes the same benchmark files into any folder but a run folder
(`refuse_inside_run`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import RunFolderError, UsageError
from orchestrator.names import NAME_CHARS, is_name


def safe_name(name: str) -> str:
    """A file name for an arbitrary label (a check name, a remote path)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name.strip("/")) or "file"


@dataclass(frozen=True)
class BenchLayout:
    """A benchmark's folder: one JSON per level, its requests, the CSV and the summary."""

    root: Path

    def level(self, label: str) -> Path:
        return self.root / f"level-{label}.json"

    def requests(self, label: str) -> Path:
        return self.root / f"requests-{label}.jsonl"

    @property
    def sweep_csv(self) -> Path:
        return self.root / "sweep.csv"

    @property
    def summary(self) -> Path:
        return self.root / "summary.json"

    def levels(self) -> list[Path]:
        return sorted(self.root.glob("level-*.json"))

    def interrupted(self, label: str, attempt: int) -> tuple[Path, Path]:
        """Where a level the server died in is kept apart (its level file and requests)
        once it runs again after a relaunch: not a `level-*` file, so no reader takes it
        for the level."""
        return (self.root / f"interrupted-{attempt}-level-{label}.json",
                self.root / f"interrupted-{attempt}-requests-{label}.jsonl")


@dataclass(frozen=True)
class HostLayout:
    root: Path

    @property
    def facts(self) -> Path:
        return self.root / "facts.json"

    @property
    def freeze(self) -> Path:
        return self.root / "freeze.txt"

    @property
    def model(self) -> Path:
        return self.root / "model.json"

    @property
    def steps(self) -> Path:
        return self.root / "steps.json"

    @property
    def startup(self) -> Path:
        return self.root / "startup.json"

    @property
    def diagnosis(self) -> Path:
        return self.root / "diagnosis.json"

    @property
    def service_log(self) -> Path:
        return self.root / "service.log"

    def unit_log(self, unit: str) -> Path:
        """The log of another process the host ran for the service (`ray.log`: a Ray node)."""
        return self.root / f"{unit}.log"

    def smoke(self, check: str) -> Path:
        return self.root / "smoke" / f"{safe_name(check)}.json"

    def command_output(self, name: str) -> Path:
        return self.root / "commands" / f"{safe_name(name)}.log"

    @property
    def environment(self) -> EnvironmentLayout:
        """The run's environment (apply/environment.py): nvidia-smi -q, vLLM's collect-env."""
        return EnvironmentLayout(self.root / "environment")

    def collected(self, remote_path: str) -> Path:
        """`collect/` + the remote path as it is, so two paths never share a file (the plan
        loader holds it to a host path: absolute, no `..`)."""
        parts = [part for part in remote_path.split("/") if part not in ("", ".")]
        if not parts or ".." in parts:
            raise RunFolderError(f"cannot keep {remote_path!r} in a run folder: expected an "
                                 "absolute path without '..'")
        return self.root.joinpath("collect", *parts)

    @property
    def bench(self) -> BenchLayout:
        return BenchLayout(self.root / "bench")


@dataclass(frozen=True)
class EnvironmentLayout:
    """A host's `environment/` folder (apply/environment.py writes it)."""

    root: Path
    NVIDIA_SMI = "nvidia-smi-q.txt"  # the names environment.json's `file` keys give
    COLLECT_ENV = "collect-env.txt"

    @property
    def nvidia_smi(self) -> Path:
        return self.root / self.NVIDIA_SMI

    @property
    def collect_env(self) -> Path:
        return self.root / self.COLLECT_ENV

    @property
    def record(self) -> Path:
        """environment.json: what was captured, what failed."""
        return self.root / "environment.json"


@dataclass(frozen=True)
class MatrixLayout:
    """A matrix run's folder: its `matrix.json` lists the variants' run folders."""

    root: Path
    FILE = "matrix.json"

    @property
    def record(self) -> Path:
        return self.root / self.FILE

    @property
    def lock(self) -> Path:
        """flock(2)ed by the apply running the matrix (a run folder's `apply.lock`, alike)."""
        return self.root / "apply.lock"


@dataclass(frozen=True)
class RunLayout:
    root: Path

    @property
    def meta(self) -> Path:
        return self.root / "meta.json"

    @property
    def plan(self) -> Path:
        return self.root / "plan.yaml"

    @property
    def events(self) -> Path:
        return self.root / "events.jsonl"

    @property
    def fleet(self) -> Path:
        """A fleet's replicas and router (runs/fleet_record.py)."""
        return self.root / "fleet.json"

    @property
    def lock(self) -> Path:
        """flock(2)ed by the apply writing the run, for its whole life; names it (holder.py)."""
        return self.root / "apply.lock"

    @property
    def hosts_dir(self) -> Path:
        return self.root / "hosts"

    def host(self, name: str) -> HostLayout:
        # The inventory loader holds host names to this rule already; a name that slipped
        # past it must still not climb out of the run folder.
        if not is_name(name):
            raise RunFolderError(f"host name {name!r} cannot name a folder: expected "
                                 f"{NAME_CHARS}")
        return HostLayout(self.hosts_dir / name)


def run_folder_name(stamp: str, plan_digest: str, attempt: int = 1) -> str:
    """`<UTC time>-<hash8>`, with `-N` for a second run within the same second."""
    name = f"{stamp}-{plan_digest[:8]}"
    return name if attempt == 1 else f"{name}-{attempt}"


def enclosing_run(path: Path) -> Path | None:
    """The run folder `path` is in, or is: the nearest folder holding a meta.json, after
    symlinks (a link that leads into a run folder is inside it). The same test the reader
    uses to call a folder a run folder."""
    real = Path(os.path.realpath(path.expanduser()))  # never raises, even on a loop
    for folder in (real, *real.parents):
        if os.path.lexists(RunLayout(folder).meta):
            return folder
    return None


def refuse_inside_run(path: Path, option: str) -> None:
    """A file or folder the user named for orch to write (`report -o`, `compare --plots`,
    `init --dir`, ...) must lie outside every run folder: a run's records are written once,
    by its apply, and a report written over `meta.json` would lose that run."""
    run = enclosing_run(path)
    if run is not None:
        raise UsageError(
            f"{option} {path}: that is inside the run folder {run}, and orch never writes "
            "over a run's records",
            hint="choose a place outside every run folder (a folder holding meta.json)")
