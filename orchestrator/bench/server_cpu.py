"""How busy the server's own processes were during each level: `ServerCpuSampler`.

A server can be held by its host's CPU while its GPUs wait (vLLM's API server at 100% of one
core at high concurrency; the lever is `--api-server-count`). This sampler measures it from
/proc on the host, with no agent and no new dependency: at each repeat's start one
long-lived command (`Transport.hold`) finds the server's main process (`pid_script`, a shell
fragment that sets `$pid`: service/backends.py's `main_pid`) and runs the host's python3 on
server_cpu_host.py's program, which reads every process of that process's session (pid,
name, utime + stime) with the host's clock (/proc/uptime) at once, every `interval` seconds
and when the repeat's stop closes its input. A thread of its own reads the lines, stamped
with the time since the repeat's origin; they are parsed only afterwards.

A process counts over the part of the repeat it lived: one not there at the first reading
(started since) from zero, one gone before the last from its last reading. Per repeat and
level the block `server_processes` has each process's CPU seconds and `cpu` (CPU seconds
per wall second, 1.0 = one core busy), the busiest named, all of them summed, and the host's
`cores` (so 1.0 on a 2-core host reads as half the machine, and as one core flat out). The
level gets two figures (`level_figures`): `server_cpu`, the busiest process's, and
`server_cpu_total`, all processes' (orchestrator/metrics.py names them; limits/evidence.py
reads `server_cpu`). A host without /proc, without python3, or whose server is gone: the
block is `{"source": "none", "reason": ...}` and nothing fails.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from itertools import pairwise
from typing import Any, ClassVar

from orchestrator.bench.samplers import Sampler, Snapshot
from orchestrator.errors import OrchError
from orchestrator.metrics import SERVER_CPU, SERVER_CPU_TOTAL
from orchestrator.transport.base import Held, Transport
from orchestrator.transport.command import Command, quoted

__all__ = ["BLOCK", "Ended", "Reading", "ServerCpuSampler", "parse_lines", "sample_command"]

BLOCK = "server_processes"
HOST_CPU_BUSY = "host_cpu_busy"  # in the block: the whole host's CPUs busy, 0-1 of every core
INTERVAL_S = 1.0  # between readings: a time series; the figures need only the first and last
NO_PYTHON = "no python3 on the host"
_POLL_S = 0.25
# The repeat starts once the first reading is in (or this long has passed): a level shorter
# than the host program's start-up (a python3 over SSH on a busy host: seconds) is measured.
FIRST_READING_S = 10.0


@cache
def host_program() -> str:
    return resources.files("orchestrator.bench").joinpath("server_cpu_host.py").read_text()


def sample_command(pid_script: str, interval_s: float) -> Command:
    """`pid_script` (sets $pid, empty when the server does not run), then the host program
    until the held command's input closes."""
    no_python = quoted(json.dumps({"error": NO_PYTHON}))
    return Command.script(
        f"{pid_script}; "
        f"command -v python3 >/dev/null 2>&1 || {{ echo {no_python}; exit 0; }}; "
        f'exec python3 -S -c {quoted(host_program())} "${{pid:-}}" {interval_s:g}'
    )


@dataclass(frozen=True)
class Reading(Snapshot):
    """One reading of the session: `values` has each process's CPU ticks (utime + stime) by
    `<pid>:<start ticks>` (a pid used again is another process), `comms` their names."""

    uptime_s: float = 0.0  # the host's clock
    comms: Mapping[str, str] = field(default_factory=dict)
    host: tuple[float, float] | None = None  # the whole host's (busy, all) CPU ticks


@dataclass(frozen=True)
class Ended(Snapshot):
    """The last snapshot of a repeat: its stop (`t_s`), what the host program said first
    (`header`: pid, session, hz, cores; or `error`) and what went wrong (`problem`)."""

    header: Mapping[str, Any] = field(default_factory=dict)
    problem: str = ""


def parse_lines(lines: Iterable[tuple[float, str]], end_s: float) -> list[Snapshot]:
    """Timed lines of the host program -> its readings, then an `Ended` at `end_s`."""
    header: dict[str, Any] = {}
    readings: list[Snapshot] = []
    unparsed: list[str] = []
    for t_s, line in lines:
        try:
            data = json.loads(line)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            if line.strip():
                unparsed.append(line.strip())
        elif "t" in data and isinstance(data.get("p"), list):
            readings.append(_reading(t_s, data))
        elif not header:
            header = data
    problem = "" if header else (
        f"the host program said: {unparsed[-1]}" if unparsed else "the host program gave no answer")
    return [*readings, Ended(end_s, {"unparsed": float(len(unparsed))}, header, problem)]


def _reading(t_s: float, data: Mapping[str, Any]) -> Reading:
    values: dict[str, float] = {}
    comms: dict[str, str] = {}
    for pid, start, comm, ticks in data["p"]:
        key = f"{pid}:{start}"
        values[key], comms[key] = float(ticks), str(comm)
    host = data.get("h")
    pair = (float(host[0]), float(host[1])) if isinstance(host, list) and len(host) == 2 else None
    return Reading(t_s, values, uptime_s=float(data["t"]), comms=comms, host=pair)


class ServerCpuSampler:
    """The server's processes' CPU time on one host for a whole sweep (samplers.py's
    protocol). `pid_script` sets `$pid` to the server's main process on the host (each
    repeat runs it again: a relaunched server is found); `interval` seconds between readings
    (0: at the start and the stop only)."""

    block: ClassVar[str] = BLOCK
    repeat_keys: ClassVar[tuple[str, ...]] = (SERVER_CPU,)

    def __init__(self, transport: Transport, pid_script: str, interval: float = INTERVAL_S) -> None:
        self.transport = transport
        self.pid_script = pid_script
        self.interval = interval
        self.origin_ns = 0
        self._raw: list[tuple[float, str]] = []
        self._end_s = 0.0
        self._problem = ""
        self._held: Held | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._first = threading.Event()  # set by the reader on the repeat's first line

    def start(self, origin_ns: int) -> None:
        self.origin_ns, self._raw, self._end_s, self._problem = origin_ns, [], 0.0, ""
        self._stop = threading.Event()
        try:
            held = self.transport.hold(sample_command(self.pid_script, self.interval))
        except OrchError as error:
            self._problem = f"the sampler did not start: {str(error).strip().splitlines()[0]}"
            return
        self._held = held
        self._first = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(held, self._raw, self._stop),
                                        name="orch-server-cpu", daemon=True)
        self._thread.start()
        self._first.wait(FIRST_READING_S)

    def _read(self, held: Held, raw: list[tuple[float, str]], stop: threading.Event) -> None:
        try:
            while True:
                asked = time.monotonic()
                line = held.line(timeout=_POLL_S)
                if line is not None:
                    raw.append(((time.perf_counter_ns() - self.origin_ns) / 1e9, line))
                    if line.startswith('{"t"'):  # a reading (the header line comes first)
                        self._first.set()
                elif time.monotonic() - asked < _POLL_S / 2 or stop.is_set():
                    return  # the command ended (or the stop gave up on it)
        except Exception:  # a connection closed under the read: the lines read are kept
            return
        finally:
            self._first.set()  # an ended program: nobody waits for its first line

    def stop(self) -> None:
        """Close the program's input (it takes its last reading and ends), then read to its end."""
        self._end_s = (time.perf_counter_ns() - self.origin_ns) / 1e9
        if self._held is not None:
            self._held.release()
            self._held = None
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def snapshots(self) -> list[Snapshot]:
        """The last repeat's readings up to its stop, then an `Ended`."""
        snaps = parse_lines(self._raw, self._end_s)
        if self._problem:
            ended = snaps[-1]
            assert isinstance(ended, Ended)
            snaps[-1] = Ended(ended.t_s, ended.values, ended.header, self._problem)
        return snaps

    # -- figures (pure: what the repeats read) ------------------------------------------

    def summarize(self, snapshots: Sequence[Snapshot]) -> dict[str, Any]:
        return summarize_readings(snapshots, interval_s=self.interval)

    def merge(self, repeats: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
        return merge_summaries(repeats)

    def level_figures(self, block: Mapping[str, Any] | None,
                      level: Mapping[str, Any]) -> dict[str, Any]:
        return level_cpu(block)


def _fraction(cpu_s: float, wall_s: float) -> float:
    return round(cpu_s / wall_s, 4) if wall_s > 0 else 0.0


def _busiest_first(process: Mapping[str, Any]) -> tuple[float, int]:
    return -float(process["cpu_s"]), int(process["pid"])


def _per_process(readings: Sequence[Reading], hz: float) -> list[dict[str, Any]]:
    """Each process's CPU seconds over the readings: from zero for one started since the
    first reading, from its first reading otherwise, to its last reading."""
    base: dict[str, float] = {}
    last: dict[str, float] = {}
    comms: dict[str, str] = {}
    for index, reading in enumerate(readings):
        for key, ticks in reading.values.items():
            base.setdefault(key, ticks if index == 0 else 0.0)
            last[key], comms[key] = ticks, reading.comms.get(key, "?")
    out = [{"pid": int(key.partition(":")[0]), "comm": comms[key],
            "cpu_s": round(max(0.0, last[key] - base[key]) / hz, 2)} for key in last]
    return sorted(out, key=_busiest_first)


def _timeline(readings: Sequence[Reading], hz: float) -> list[dict[str, Any]]:
    """Between consecutive readings: the busiest process's and all processes' CPU per second."""
    points = []
    for before, after in pairwise(readings):
        wall = after.uptime_s - before.uptime_s
        if wall <= 0:
            continue
        used = [max(0.0, ticks - before.values.get(key, 0.0)) / hz for key, ticks in after.values.items()]
        points.append({"t_s": round(after.t_s, 3), SERVER_CPU: _fraction(max(used, default=0.0), wall),
                       SERVER_CPU_TOTAL: _fraction(sum(used), wall)})
    return points


def summarize_readings(snapshots: Sequence[Snapshot], *, interval_s: float | None = None) -> dict[str, Any]:
    """One repeat's `server_processes` from its snapshots (an `Ended` last)."""
    end = next((s for s in reversed(snapshots) if isinstance(s, Ended)), Ended(0.0, {}))
    readings = sorted((s for s in snapshots if isinstance(s, Reading)), key=lambda r: r.uptime_s)
    head = end.header
    if "error" in head or (end.problem and not readings):
        return {"source": "none", "reason": str(head.get("error") or end.problem)}
    hz = float(head.get("hz") or 100)
    wall = readings[-1].uptime_s - readings[0].uptime_s if readings else 0.0
    out: dict[str, Any] = {"source": "proc", "main_pid": head.get("pid"), "session": head.get("session"),
                           "cores": head.get("cores"), "clock_ticks": int(hz), "interval_s": interval_s,
                           "samples": len(readings), "window_s": round(wall, 3),
                           "first_sample_s": round(readings[0].t_s, 3) if readings else None}
    if wall <= 0:
        return {**out, "samples": 0, "reason": "fewer than two readings of the server's processes"}
    processes = _per_process(readings, hz)
    return {**out, **_figures(processes, wall), **_host_busy(readings), "timeline": _timeline(readings, hz),
            **({"problem": end.problem} if end.problem else {})}


def _host_busy(readings: Sequence[Reading]) -> dict[str, Any]:
    """`host_cpu_busy`: the whole host's CPUs busy over the readings (0-1 of every core)."""
    ticks = [r.host for r in readings if r.host is not None]
    if len(ticks) < 2 or ticks[-1][1] <= ticks[0][1]:
        return {}
    busy = (ticks[-1][0] - ticks[0][0]) / (ticks[-1][1] - ticks[0][1])
    return {HOST_CPU_BUSY: round(min(1.0, max(0.0, busy)), 4)}


def _figures(processes: Sequence[Mapping[str, Any]], wall_s: float) -> dict[str, Any]:
    """The busiest process, all of them summed, and each one's share of a core."""
    listed = [{**p, "cpu": _fraction(p["cpu_s"], wall_s)} for p in processes]
    busiest = listed[0] if listed else None
    total = sum(p["cpu_s"] for p in listed)
    return {
        "cpu_s": round(total, 2),
        SERVER_CPU: busiest["cpu"] if busiest else 0.0,
        SERVER_CPU_TOTAL: _fraction(total, wall_s),
        "busiest": {k: busiest[k] for k in ("pid", "comm", "cpu")} if busiest else None,
        "processes": listed,
    }


def merge_summaries(repeats: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The level's block: one repeat's summary as it is; several summed (each process's CPU
    seconds over all their windows, by pid and name), the last one's timeline, and each
    repeat's figures under `repeats`; the first repeat's when none read anything."""
    if not repeats:
        return None
    read = [r for r in repeats if r.get("samples")]
    if not read:
        return dict(repeats[0])
    if len(read) == 1:
        return dict(read[0])
    wall = sum(r["window_s"] for r in read)
    summed: dict[tuple[int, str], float] = {}
    for repeat in read:
        for p in repeat["processes"]:
            summed[(p["pid"], p["comm"])] = summed.get((p["pid"], p["comm"]), 0.0) + p["cpu_s"]
    processes = sorted(({"pid": pid, "comm": comm, "cpu_s": round(cpu_s, 2)}
                        for (pid, comm), cpu_s in summed.items()), key=_busiest_first)
    merged = {k: read[0].get(k) for k in ("source", "main_pid", "session", "cores", "clock_ticks", "interval_s",
                                       "first_sample_s")}
    merged |= {"samples": sum(r["samples"] for r in read), "window_s": round(wall, 3),
               **_figures(processes, wall), "timeline": read[-1].get("timeline", [])}
    busy = [(r[HOST_CPU_BUSY], r["window_s"]) for r in read if r.get(HOST_CPU_BUSY) is not None]
    if busy and wall > 0:
        merged[HOST_CPU_BUSY] = round(sum(b * w for b, w in busy) / sum(w for _, w in busy), 4)
    merged["repeats"] = [{k: r.get(k) for k in ("samples", "window_s", SERVER_CPU, SERVER_CPU_TOTAL)}
                         for r in read]
    return merged


def level_cpu(block: Mapping[str, Any] | None) -> dict[str, Any]:
    """The sampler's `level_figures`: the block's two figures (None where it has none)."""
    if block is None:
        return {}
    return {SERVER_CPU: block.get(SERVER_CPU), SERVER_CPU_TOTAL: block.get(SERVER_CPU_TOTAL)}


def _is_a_sampler(sampler: ServerCpuSampler) -> Sampler:  # mypy checks the protocol here
    return sampler
