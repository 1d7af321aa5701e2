"""tune.json: what a tune tried, rewritten (atomically) as each trial starts and ends, so an
interrupted tune says how far it got and `--resume` knows which trials finished.

    runs/<plan>/tune-<UTC time>/tune.json     the record
    runs/<plan>/tune-<UTC time>/study.db      the Optuna study (its own storage)
    runs/<plan>/tune-<UTC time>/<plan>/<run>  each trial's run folder

The tune folder holds no meta.json, so no reader takes it for a run.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from orchestrator import __version__
from orchestrator.errors import RunFolderError
from orchestrator.runs import writer
from orchestrator.runs.reader import read_record
from orchestrator.runs.run_records import Record
from orchestrator.runs.writer import write_file

FILE = "tune.json"
LOCK = "tune.lock"  # flock(2)ed by the tune running in the folder
PREFIX = "tune-"


class TrialEntry(BaseModel):
    model_config = ConfigDict(extra="allow")

    number: int  # 1-based, in the order trials started (the baseline is 1)
    source: str  # baseline, advice, search
    values: dict[str, Any]  # every tuned axis's value
    changed: dict[str, Any] = Field(default_factory=dict)  # those differing from the baseline
    sets: list[str] = Field(default_factory=list)  # its --set arguments
    host: str | None = None  # the host it ran on
    step: str | None = None  # what reaching it took there: first, install, restart, reuse
    status: str = "pending"  # running, complete, failed, skipped, interrupted
    run: str | None = None  # its run folder
    objective: float | None = None  # measured at the best level meeting the SLO
    peak: float | None = None  # measured peak output tok/s
    at: float | None = None  # the concurrency of that level
    slo: dict[str, dict[str, Any]] = Field(default_factory=dict)  # metric -> value, limit, met
    slo_met: bool | None = None
    limiter: str | None = None  # `compute-bound at C=128`
    constraint: float | None = None  # above 0: the closest level misses the SLO by that fraction
    best: float | None = None  # the objective at its highest level, SLO or not
    advice: list[dict[str, list[Any]]] = Field(default_factory=list)  # what its limiter says to try
    predicted: dict[str, Any] | None = None  # fits, why, peak_output_throughput
    cause: str | None = None  # why it failed, or why it was skipped
    optuna_trial: int | None = None
    seconds: float | None = None


class TuneRecord(Record):
    model_config = ConfigDict(extra="allow")

    orch_version: str = __version__
    plan: str
    plan_file: str
    layers: list[str] = Field(default_factory=list)  # the command line's -f and --set
    slo: str
    objective: str
    space: dict[str, Any] = Field(default_factory=dict)  # axis -> values or range
    hosts: list[str] = Field(default_factory=list)
    budget: dict[str, Any] = Field(default_factory=dict)
    started: str | None = None
    finished: str | None = None
    status: str = "incomplete"  # incomplete, complete, interrupted
    stopped: str | None = None  # why it stopped
    resumed: list[str] = Field(default_factory=list)
    trials: list[TrialEntry] = Field(default_factory=list)
    winner: int | None = None
    tuned_plan: str | None = None


_write_lock = threading.Lock()


def now() -> str:
    return dt.datetime.now(tz=dt.UTC).isoformat(timespec="seconds")


def new_folder(root: Path, plan: str) -> Path:
    stamp = dt.datetime.now(tz=dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return writer.new_folder(root / plan, lambda n: PREFIX + stamp + ("" if n == 1 else f"-{n}"),
                             "tune folder")


def write(folder: Path, record: TuneRecord) -> None:
    with _write_lock:  # the workers of a parallel tune share the record
        text = json.dumps(record.model_dump(mode="json"), indent=2) + "\n"
        write_file(folder / FILE, text)


def read(folder: Path) -> TuneRecord:
    path = folder / FILE
    if not path.is_file():
        raise RunFolderError(f"{folder} is not a tune folder (no {FILE})")
    return read_record(path, TuneRecord)
