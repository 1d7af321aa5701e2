"""The one reader of run folders: meta, resolved plan, host facts, frozen package sets and
benchmark results, as the typed records of `run_records.py` (paths from `layout.py`).

Nothing here writes. A run reference (sources.py `resolve_run`) is a run folder, a plan name (its
latest complete run with benchmark results), a plan's folder under the runs root, or a plan
file (the plan's name is read from it); `orch compare` also takes benchmark results that are
not run folders (`load_source`: an `orch bench` directory, `vllm bench serve` files, see
result_sources.py). Every failure is a `RunFolderError` that names the file and says what
was expected.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import ValidationError

from orchestrator import local_files
from orchestrator.errors import OrchError, RunFolderError
from orchestrator.plan.models import Plan
from orchestrator.plan.models.base import parse_pin
from orchestrator.runs.json_reader import REPAIR as _REPAIR
from orchestrator.runs.json_reader import not_a_figure, parse_json
from orchestrator.runs.layout import BenchLayout, RunLayout
from orchestrator.runs.run_records import (
    HostFactsRecord,
    LevelResult,
    Meta,
    Record,
    RequestRow,
    SweepSummary,
)

DEFAULT_ROOT = Path("runs")
R = TypeVar("R", bound=Record)


@dataclass(frozen=True)
class BenchData:
    """One host's benchmark: level results (by mode, then load) and the sweep summary."""

    directory: Path
    levels: list[LevelResult]
    summary: SweepSummary | None

    @property
    def simulated(self) -> bool:
        return any(level.simulated for level in self.levels) or bool(
            self.summary and self.summary.simulated)

    @property
    def time_scale(self) -> float | None:
        sources: list[LevelResult | SweepSummary] = [*self.levels]
        if self.summary is not None:
            sources.append(self.summary)
        return next((s.time_scale for s in sources
                     if s.time_scale and math.isfinite(s.time_scale) and s.time_scale > 0), None)


@dataclass(frozen=True)
class HostData:
    name: str
    facts: dict[str, Any] | None  # the "host" block of facts.json
    bench: BenchData | None


@dataclass(frozen=True)
class RunData:
    path: Path
    meta: Meta
    plan: Plan | None
    plan_problem: str | None  # why plan.yaml could not be read, if so
    hosts: list[HostData]
    # "run": a run folder; "bench": an `orch bench` directory; "vllm": `vllm bench serve`
    # files (these two have no plan, facts or meta.json: result_sources.py)
    source: str = "run"

    @property
    def name(self) -> str:
        return self.meta.plan or self.path.parent.name

    @property
    def stamp(self) -> str:
        return self.path.name

    @property
    def status(self) -> str:
        return self.meta.status or "unknown"

    @property
    def engine(self) -> str | None:
        if self.meta.engine:
            return self.meta.engine
        if self.plan is not None and self.plan.service is not None:
            return self.plan.service.engine
        return None

    @property
    def simulated(self) -> bool:
        """Said by meta.json, the results themselves, or the plan's engine."""
        if any(h.bench is not None and h.bench.simulated for h in self.hosts):
            return True
        if self.meta.simulated is not None:
            return self.meta.simulated
        from orchestrator.engines import known  # the engines: only for a run that names one

        engine = known(self.engine or "")
        return engine is not None and engine.simulated

    @property
    def benches(self) -> list[HostData]:
        return [h for h in self.hosts if h.bench is not None and h.bench.levels]


def _read_json(path: Path, *, figures: bool = False) -> Any:
    try:
        text = local_files.read_text(path, errors="replace")
    except OSError as error:
        raise RunFolderError(f"cannot read {path}: {error.strerror or error}") from None
    return parse_json(path, text, figures=figures)


def _read_object(path: Path, *, figures: bool = False) -> dict[str, Any]:
    value = _read_json(path, figures=figures)
    if not isinstance(value, dict):
        raise RunFolderError(f"{path}: expected a JSON object, found {_json_kind(value)}")
    return value


def _json_kind(value: Any) -> str:
    kinds = {list: "a list", str: "a string", bool: "a boolean", int: "a number",
             float: "a number", type(None): "null"}
    return kinds.get(type(value), type(value).__name__)


def read_record(path: Path, kind: type[R], *, figures: bool = False) -> R:
    """A record file as its type; a RunFolderError naming the file and the field otherwise.
    `figures`: a result file, whose numbers must be measurements (json_reader.py)."""
    try:
        return kind.model_validate(_read_object(path, figures=figures))
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "<record>"
        raise RunFolderError(f"{path}: {where}: {first['msg']}") from None


def _level_order(result: LevelResult) -> tuple[int, float, str]:
    if result.mode == "rate":
        rate = result.request_rate
        return (1, float(rate) if isinstance(rate, int | float) else 0.0, result.level)
    return (0, float(result.max_concurrency or 0), result.level)


def load_bench(directory: Path) -> BenchData | None:
    """The level results in `directory` (None when it holds none)."""
    if not directory.is_dir():
        return None
    layout = BenchLayout(directory)
    summary = read_record(layout.summary, SweepSummary, figures=True) if layout.summary.exists() else None
    levels = [read_record(path, LevelResult, figures=True) for path in layout.levels()]
    if not levels and summary is None:
        return None
    return BenchData(directory, sorted(levels, key=_level_order), summary)


def read_requests(directory: Path, label: str) -> list[RequestRow]:
    """The requests of one level (requests-<label>.jsonl of a benchmark folder), warm-ups
    included; [] when the file is missing. Read on demand: a level's file holds every ITL."""
    path = BenchLayout(directory).requests(label)
    if not path.exists():
        return []
    try:
        lines = local_files.read_text(path, errors="replace").splitlines()
    except OSError as error:
        raise RunFolderError(f"cannot read {path}: {error.strerror or error}") from None
    rows = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = RequestRow.model_validate_json(line)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "<line>"
            raise RunFolderError(f"{path}: line {number}: {where}: {first['msg']}") from None
        for name in ("ttft_ms", "e2el_ms", "output_tokens"):  # what the distributions plot
            if (problem := not_a_figure(getattr(row, name))) is not None:
                raise RunFolderError(f"{path}: line {number}: {name}: {problem}", hint=_REPAIR)
        rows.append(row)
    return rows


def load_plan_yaml(path: Path) -> Plan:
    """A resolved plan as `orch apply` wrote it (plan.yaml of a run folder)."""
    try:
        data = yaml.safe_load(local_files.read_text(path, errors="replace"))
    except OSError as error:
        raise RunFolderError(f"cannot read {path}: {error.strerror or error}") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise RunFolderError(f"{where}: not valid YAML: {problem}", hint=_REPAIR) from None
    if not isinstance(data, dict):
        raise RunFolderError(f"{path}: expected a plan (a YAML mapping)")
    try:
        return Plan.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "<plan>"
        raise RunFolderError(
            f"{path}: not a valid plan ({error.error_count()} problem(s); first at {where}: {first['msg']})"
        ) from None


def read_meta(path: Path) -> Meta:
    meta_file = RunLayout(path).meta
    if not path.is_dir():
        raise RunFolderError(f"{path}: no such folder" if not path.exists() else
                             f"{path} is not a run folder (a file, not a folder)")
    if not meta_file.exists():
        raise RunFolderError(f"{path} is not a run folder (no meta.json)")
    return read_record(meta_file, Meta)


def list_runs(root: Path = DEFAULT_ROOT) -> list[Path]:
    """Every run folder under `root`, oldest first."""
    if not root.is_dir():
        return []
    found = [meta.parent for meta in root.glob("*/*/meta.json")]
    return sorted(found, key=lambda p: (p.name, p.parent.name))


_RUN_NAME = re.compile(r"\d{8}T\d{6}Z-[0-9a-f]{8}(-\d+)?")  # runs/layout.py: run_folder_name


def folders_without_meta(root: Path = DEFAULT_ROOT) -> list[Path]:
    """Folders under `root` that are run folders by their name or their records (plan.yaml,
    events.jsonl, hosts/) but hold no meta.json: a run cut before its first record, or one
    edited by hand. `orch runs` lists them rather than leave them out unsaid."""
    if not root.is_dir():
        return []
    found = [folder for folder in root.glob("*/*") if folder.is_dir()
             and not os.path.lexists(folder / "meta.json")
             and (_RUN_NAME.fullmatch(folder.name) or any(
                 os.path.lexists(folder / record) for record in ("plan.yaml", "events.jsonl", "hosts")))]
    return sorted(found, key=lambda p: (p.name, p.parent.name))


def load_run(path: Path) -> RunData:
    meta = read_meta(path)
    layout = RunLayout(path)
    plan: Plan | None = None
    problem: str | None = None
    if layout.plan.exists():
        try:
            plan = load_plan_yaml(layout.plan)
        except RunFolderError as error:
            problem = str(error)
    else:
        problem = f"{layout.plan} is missing"
    names = list(meta.hosts)
    if layout.hosts_dir.is_dir():
        names += sorted(p.name for p in layout.hosts_dir.iterdir()
                        if p.is_dir() and p.name not in names)
    hosts: list[HostData] = []
    for name in names:
        host = layout.host(name)
        facts = read_record(host.facts, HostFactsRecord).host if host.facts.exists() else None
        hosts.append(HostData(name, facts, load_bench(host.bench.root)))
    return RunData(path, meta, plan, problem, hosts)


def frozen_sets(path: Path) -> dict[str, list[str]]:
    """host -> the `name==version` lines its freeze.txt holds (for --locked)."""
    found = {host: frozen_set(path, host) for host in read_meta(path).hosts}
    return {host: lines for host, lines in found.items() if lines is not None}


def frozen_set(path: Path, host: str) -> list[str] | None:
    """The `name==version` lines of a host's freeze.txt; None when it has none. An empty
    one, or a line that is not an exact pin, is a RunFolderError at `file:line` (a locked
    apply uninstalls what the set does not list: an empty set would take everything)."""
    freeze = RunLayout(path).host(host).freeze
    if not freeze.exists():
        return None
    try:
        text = local_files.read_text(freeze, errors="replace")
    except OSError as error:
        raise RunFolderError(f"cannot read {freeze}: {error.strerror or error}") from None
    lines: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            parse_pin(line)
        except ValueError:
            raise RunFolderError(f"{freeze}:{number}: {line.strip()!a} is not an exact pin "
                                 "(name==version)", hint=_REPAIR) from None
        lines.append(line.strip())
    if not lines:
        raise RunFolderError(f"{freeze}: the file is empty: the run froze no package for "
                             f"{host} (a locked apply would uninstall everything)", hint=_REPAIR)
    return lines


def model_record(path: Path, host: str, *, strict: bool = False) -> dict[str, Any] | None:
    """A host's model.json (the weights it served: repo, revision, commit, files), if any.
    `strict` (--locked, which pins its commit): one that is not such a record is a located
    error, not a record quietly missing."""
    model = RunLayout(path).host(host).model
    if not model.exists():
        return None
    try:
        record = _read_json(model)
    except RunFolderError:
        if strict:
            raise
        return None
    fits = isinstance(record, dict) and all(
        isinstance(record.get(key), str) and record.get(key) for key in ("repo", "commit"))
    if not fits and strict:
        raise RunFolderError(f"{model}: expected the weights' record (a JSON object with "
                             "repo and commit)", hint=_REPAIR)
    return record if fits and isinstance(record, dict) else None


def weights_of(record: dict[str, Any] | None) -> str | None:
    """`repo@commit` (12 digits) of a model.json, for tables."""
    if not record:
        return None
    return f"{record.get('repo')}@{str(record.get('commit'))[:12]}"


def plan_runs(root: Path, plan_name: str) -> list[Path]:
    """Run folders of one plan, oldest first."""
    return [p for p in list_runs(root) if p.parent.name == plan_name]


def latest_complete(root: Path, plan_name: str) -> Path:
    """The newest run of `plan_name` that completed and holds benchmark results."""
    folders = plan_runs(root, plan_name)
    if not folders:
        known = sorted({p.parent.name for p in list_runs(root)})
        listed = ", ".join(known) if known else "none"
        raise RunFolderError(
            f"no run folder or plan named {plan_name!r} under {root}/",
            hint=f"give a run folder path or one of the plans with runs: {listed}",
        )
    statuses: list[str] = []
    for folder in reversed(folders):
        status = read_meta(folder).status
        statuses.append(f"{folder.name}: {status}")
        if status == "complete" and any(RunLayout(folder).hosts_dir.glob("*/bench/level-*.json")):
            return folder
    raise RunFolderError(
        f"plan {plan_name!r} has no complete run with benchmark results under {root}/{plan_name}/",
        hint="runs found: " + "; ".join(statuses[:5]) + " (give a run folder to use one anyway)",
    )


def plan_name_of_file(path: Path) -> str:
    # the YAML loader only when a plan file is read (start-up time)
    from orchestrator.plan.loader import load_plan

    try:
        return load_plan(path).plan.name
    except OrchError as error:
        raise RunFolderError(f"cannot read the plan {path}:\n{error}") from None
