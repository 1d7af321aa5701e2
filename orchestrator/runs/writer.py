"""The one writer of run folders (and of a benchmark's folder): every file is validated as
its record, masked, and written atomically (a temporary file, then a rename).

`meta.json` says `incomplete` from the first moment, so an interrupted apply (Ctrl-C, a lost
connection, a killed controller) leaves a readable folder that says so. The apply writing a
run holds a flock(2) on its `apply.lock` from before its first byte until it ends (the kernel
drops it with the process): a second apply (`--resume` of a run still being written) is
refused naming the first before it writes anything.
"""

from __future__ import annotations

import datetime as dt
import errno
import fcntl
import json
import os
import stat
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from orchestrator import __version__, local_files, masking
from orchestrator.errors import LockBusy, RunFolderError
from orchestrator.events import Event
from orchestrator.holder import Holder, describe_text
from orchestrator.runs.layout import BenchLayout, HostLayout, RunLayout, run_folder_name
from orchestrator.runs.reader import read_meta
from orchestrator.runs.run_records import (
    DiagnosisRecord,
    HostFactsRecord,
    HostSteps,
    LevelResult,
    Meta,
    Record,
    Startup,
    SweepSummary,
)

DEFAULT_ROOT = Path("runs")


def _utc_stamp(now: float) -> str:
    return dt.datetime.fromtimestamp(now, tz=dt.UTC).strftime("%Y%m%dT%H%M%SZ")


def _iso(now: float) -> str:
    return dt.datetime.fromtimestamp(now, tz=dt.UTC).isoformat(timespec="seconds")


def finite(value: Any) -> Any:
    """JSON has no NaN or infinity: write them as null."""
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if isinstance(value, Mapping):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def dumps(obj: Any) -> str:
    """Pretty JSON, masked; records by their JSON form, non-finite numbers as null."""
    if isinstance(obj, Record):
        obj = obj.model_dump(mode="json")
    elif isinstance(obj, list):
        obj = [o.model_dump(mode="json") if isinstance(o, Record) else o for o in obj]
    return masking.dumps(finite(obj), indent=2, default=str, allow_nan=False) + "\n"


def write_file(path: Path, text: str, *, durable: bool = True) -> Path:
    """Masked, atomic (local_files.write_atomic: a full disk or a crash leaves the old file
    whole and no temporary file behind); the folder is made as needed. A RunFolderError says
    what failed. Not `durable`: on the disk once `local_files.sync_files` says so."""
    try:
        local_files.write_atomic(path, masking.mask(text), durable=durable)
    except OSError as error:
        raise RunFolderError(f"cannot write {path}: {error.strerror or error}",
                             hint=_hint(error)) from None
    return path


def _hint(error: OSError) -> str | None:
    if error.errno == errno.ENOSPC:
        return "the disk is full: free some space (or choose another place with --runs-dir)"
    if error.errno in (errno.EACCES, errno.EROFS):
        return "choose a writable place with --runs-dir"
    return None


# -- a benchmark's folder ---------------------------------------------------------------


def new_folder(parent: Path, name: Callable[[int], str], what: str) -> Path:
    """A folder of its own under `parent`, named `name(1)`, else `name(2)`... when another
    apply or tune made that one within the same second (mkdir decides: no race)."""
    for attempt in range(1, 100):
        folder = parent / name(attempt)
        try:
            folder.mkdir(parents=True)
            return folder
        except FileExistsError:
            continue
        except OSError as error:
            raise RunFolderError(f"cannot create the {what} {folder}: {error.strerror or error}",
                                 hint="choose a writable place with --runs-dir") from None
    raise RunFolderError(f"cannot create a {what} under {parent}")


def write_level(bench: BenchLayout, result: LevelResult, rows: Sequence[Mapping[str, Any]]) -> None:
    """One level: its result (in the key order it was made with: `vllm bench serve`'s, then
    orch's; keys never set are not written) and its requests, one JSON line each."""
    data = result.model_dump(exclude_unset=True)
    write_file(bench.level(result.level), masking.dumps(finite(data), indent=2, default=str,
                                                        allow_nan=False) + "\n")
    lines = "".join(masking.dumps(finite(row), default=str) + "\n" for row in rows)
    write_file(bench.requests(result.level), lines)


def write_sweep(bench: BenchLayout, csv_text: str, summary: SweepSummary) -> None:
    write_file(bench.sweep_csv, csv_text)
    write_file(bench.summary, dumps(summary))


# -- a run folder -----------------------------------------------------------------------


def lock_folder(lock: Path, folder: Path) -> int:
    """`folder`'s lock (a run's, a matrix run's: `lock` in it), taken for this apply and held
    while the descriptor is open; LockBusy naming the apply that holds it. `name_holder`
    writes who holds it."""
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
                     | os.O_CLOEXEC, 0o600)
    except OSError as error:
        raise RunFolderError(f"cannot lock the run folder: {lock}: {error.strerror or error}",
                             hint=_hint(error)) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            raise RunFolderError(f"{lock} is not a regular file of its own (a FIFO, a device "
                                 "or a hard link)", hint="the folder was edited: remove it")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.read(fd, 2048).decode("utf-8", "replace")
            raise LockBusy(f"another apply is writing the run folder {folder}: "
                           f"{describe_text(text)}",
                           hint="let it end: a run it leaves unfinished is resumed then") from None
        except OSError as error:  # a filesystem without flock
            raise RunFolderError(f"cannot lock the run folder: {lock}: "
                                 f"{error.strerror or error}") from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def name_holder(fd: int, holder: Holder, lock: Path) -> None:
    """Who holds a folder's lock, written in place (a file renamed over it would not be the
    file the flock is on)."""
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(asdict(holder)).encode(), 0)
    except OSError as error:
        raise RunFolderError(f"cannot write {lock}: {error.strerror or error}",
                             hint=_hint(error)) from None


class RunFolder:
    """A run folder being written (by one apply; its host threads share it), its lock held
    until `close()` or the process ends."""

    def __init__(self, path: Path, meta: Meta, started: float, holder: Holder,
                 lock_fd: int | None = None) -> None:
        self.path = path
        self.layout = RunLayout(path)
        self.meta = meta
        self.holder = holder  # this apply, as its locks name it
        self._started = started
        self._lock = threading.Lock()
        self._lock_fd = lock_fd
        self._unsynced: list[Path] = []  # records written since the last sync()

    @classmethod
    def create(cls, plan_name: str, plan_digest: str, *, root: Path = DEFAULT_ROOT,
               command: str = "apply", hosts: Sequence[str] = (), holder: Holder | None = None,
               **fields: Any) -> RunFolder:
        now = time.time()
        stamp = _utc_stamp(now)
        path = new_folder(root / plan_name, lambda n: run_folder_name(stamp, plan_digest, n),
                          "run folder")
        holder = replace(holder or Holder.me(None, command), run=str(path))
        fd = lock_folder(RunLayout(path).lock, path)
        name_holder(fd, holder, RunLayout(path).lock)
        meta = Meta(orch_version=__version__, plan=plan_name, plan_digest=plan_digest,
                    command=command, hosts=list(hosts), started=_iso(now), **fields)
        folder = cls(path, meta, now, holder, fd)
        folder.write_meta()
        return folder

    @classmethod
    def claim(cls, path: Path, holder: Holder) -> RunFolder:
        """An unfinished run folder to continue (`orch apply --resume`), locked for this
        apply and read, nothing written: the caller checks it may, then calls `resume()`."""
        holder = replace(holder, run=str(path))
        fd = lock_folder(RunLayout(path).lock, path)
        try:
            meta = read_meta(path)
        except BaseException:
            os.close(fd)
            raise
        return cls(path, meta, time.time(), holder, fd)

    def resume(self) -> None:
        """Incomplete again until this apply ends, the resumption kept in its meta."""
        if self._lock_fd is not None:
            name_holder(self._lock_fd, self.holder, self.layout.lock)
        self.meta.status = "incomplete"
        self.meta.finished = None
        self.meta.resumed = [*self.meta.resumed, _iso(self._started)]
        self.write_meta()

    def close(self) -> None:
        """Let the run folder go (its lock; the process's end does the same)."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def host(self, name: str) -> HostLayout:
        return self.layout.host(name)

    def write_meta(self) -> None:
        with self._lock:
            write_file(self.layout.meta, dumps(self.meta))

    def finish(self, status: str, *, best_effort: bool = False) -> None:
        """Say how the run ended. `best_effort`: after another failure, a folder that cannot
        be written any more (a full disk) must not hide that failure."""
        now = time.time()
        self.meta.status = status
        self.meta.finished = _iso(now)
        self.meta.duration_s = round(now - self._started, 3)
        try:
            self.sync()
            self.write_meta()
        except RunFolderError:
            if not best_effort:
                raise

    def _write(self, path: Path, text: str) -> None:
        """A record, on the disk by `sync()`: the records of a run reach the disk together
        before meta.json says how it ended (one fsync each, one after another, cost a 64-host
        no-op apply ~0.8 s; together ~20 ms). After a crash before that, meta.json still
        says `incomplete`."""
        write_file(path, text, durable=False)
        with self._lock:
            self._unsynced.append(path)

    def sync(self) -> None:
        """Every record written so far, on the disk (RunFolderError: one could not be)."""
        with self._lock:
            paths, self._unsynced = self._unsynced, []
        try:
            local_files.sync_files(paths)
        except OSError as error:
            raise RunFolderError(f"cannot write {error.filename or self.path}: "
                                 f"{error.strerror or error}", hint=_hint(error)) from None

    def event(self, event: Event) -> dict[str, Any]:
        """Append `event` to events.jsonl; returns the record as written (with its time)."""
        record = {"ts": round(time.time(), 3), **event.to_json()}
        line = masking.dumps(record, default=str)
        try:
            with self._lock, open(self.layout.events, "a") as handle:
                handle.write(line + "\n")
        except OSError as error:
            raise RunFolderError(f"cannot write {self.layout.events}: {error.strerror or error}",
                                 hint=_hint(error)) from None
        return record

    # -- the records --------------------------------------------------------------------

    def write_plan(self, text: str) -> None:
        self._write(self.layout.plan, text)

    def write_fleet(self, record: Record) -> None:
        self._write(self.layout.fleet, dumps(record))

    def write_steps(self, steps: HostSteps) -> None:
        self._write(self.host(steps.host).steps, dumps(steps))

    def write_facts(self, host: str, facts: HostFactsRecord) -> None:
        self._write(self.host(host).facts, dumps(facts))

    def write_freeze(self, host: str, freeze: str) -> None:
        self._write(self.host(host).freeze, freeze)

    def write_model(self, host: str, record: Mapping[str, Any]) -> None:
        self._write(self.host(host).model, json.dumps(record, indent=2) + "\n")

    def write_startup(self, host: str, startup: Startup) -> None:
        self._write(self.host(host).startup, dumps(startup))

    def write_diagnosis(self, host: str, diagnoses: Sequence[Mapping[str, Any]]) -> None:
        records = [DiagnosisRecord.model_validate(d) for d in diagnoses]
        self._write(self.host(host).diagnosis, dumps(records))

    def write_smoke(self, host: str, check: str, result: Mapping[str, Any]) -> None:
        self._write(self.host(host).smoke(check), dumps(dict(result)))

    def write_service_log(self, host: str, text: str, unit: str | None = None) -> None:
        layout = self.host(host)
        self._write(layout.unit_log(unit) if unit else layout.service_log, text)

    def write_command_output(self, host: str, name: str, text: str) -> None:
        self._write(self.host(host).command_output(name), text)

    def write_collected(self, host: str, remote_path: str, text: str) -> None:
        self._write(self.host(host).collected(remote_path), text)
