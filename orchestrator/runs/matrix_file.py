"""A matrix run: one `matrix.json` that lists the variant runs of one `orch apply` of a plan
with a `matrix:` and the values of each.

    runs/<plan>/matrix-<UTC time>-<hash8>/matrix.json

Each variant is a normal run folder beside it (`runs/<plan>/<UTC time>-<hash8>/`), so
`orch runs`, `orch compare RUN` and `--resume` treat it as any run; the matrix folder holds
no meta.json, so no reader takes it for a run. The file is rewritten (atomically) as each
variant starts and ends: an interrupted matrix says how far it got.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from orchestrator import __version__
from orchestrator.errors import RunFolderError
from orchestrator.runs import writer
from orchestrator.runs.layout import MatrixLayout, run_folder_name
from orchestrator.runs.reader import read_record
from orchestrator.runs.run_records import Record
from orchestrator.runs.writer import write_file

FILE = MatrixLayout.FILE
PREFIX = "matrix-"


class VariantEntry(BaseModel):
    model_config = ConfigDict(extra="allow")

    index: int  # as the matrix writes it (1-based)
    label: str  # the values that vary: `max-num-seqs=64 kv-cache-dtype=fp8`
    values: dict[str, Any]  # every value the variant sets
    sets: list[str] = Field(default_factory=list)  # its --set arguments
    digest: str = ""  # its resolved plan's digest
    step: str = ""  # install, restart, reuse, first: what reaching it takes
    status: str = "pending"  # pending, running, complete, failed, interrupted, skipped
    run: str | None = None  # its run folder
    cause: str | None = None  # why it failed
    seconds: float | None = None


class MatrixRecord(Record):
    model_config = ConfigDict(extra="allow")

    orch_version: str = __version__
    plan: str
    plan_file: str | None = None
    layers: list[str] = Field(default_factory=list)
    axes: list[str] = Field(default_factory=list)
    varying: list[str] = Field(default_factory=list)
    objective: str | None = None
    started: str | None = None
    finished: str | None = None
    status: str = "incomplete"  # incomplete, complete, failed, interrupted
    resumed: list[str] = Field(default_factory=list)
    variants: list[VariantEntry] = Field(default_factory=list)  # in run order

    def variant(self, index: int) -> VariantEntry:
        return next(v for v in self.variants if v.index == index)


def same_values(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two variants set the same values (1 and "1" differ)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _now() -> str:
    return dt.datetime.now(tz=dt.UTC).isoformat(timespec="seconds")


def new_folder(root: Path, plan: str, digest: str) -> Path:
    stamp = dt.datetime.now(tz=dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return writer.new_folder(root / plan, lambda n: PREFIX + run_folder_name(stamp, digest, n),
                             "matrix folder")


def write(folder: Path, record: MatrixRecord) -> None:
    write_file(folder / FILE, json.dumps(record.model_dump(mode="json"), indent=2) + "\n")


def started(record: MatrixRecord) -> MatrixRecord:
    record.started = record.started or _now()
    return record


def finish(folder: Path, record: MatrixRecord, status: str) -> None:
    record.status = status
    record.finished = _now()
    write(folder, record)


def resumed(folder: Path, record: MatrixRecord) -> None:
    record.resumed.append(_now())
    record.status = "incomplete"
    record.finished = None
    write(folder, record)


def read(folder: Path) -> MatrixRecord:
    path = folder / FILE if folder.is_dir() else folder
    if not path.is_file():
        raise RunFolderError(f"{folder} is not a matrix run (no {FILE})")
    return read_record(path, MatrixRecord)


def matrices(root: Path, plan: str) -> list[Path]:
    """The matrix folders of `plan` under `root`, oldest first."""
    folder = root / plan
    if not folder.is_dir():
        return []
    return sorted(p.parent for p in folder.glob(f"{PREFIX}*/{FILE}"))


def is_matrix(path: Path) -> bool:
    return (path / FILE).is_file() if path.is_dir() else path.name == FILE and path.is_file()


def folder_of(path: Path) -> Path:
    return path if path.is_dir() else path.parent


def elapsed(since: float) -> float:
    return round(time.monotonic() - since, 3)
