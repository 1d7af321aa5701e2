"""Processes as the host's /proc shows them: state, start time, group, command line. Not a
fact of its own: the service and GPU facts name processes with it."""
# ruff: noqa: UP006, UP035, UP045 - the host side runs on Python 3.8 hosts
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from orchestrator.facts.common import read_text
from orchestrator.facts.fact import as_float, as_int, as_str

# == host side: shipped to the host (stdlib only, Python 3.8) ==


def parse_proc_stat(text: str) -> Tuple[str, int]:
    """/proc/PID/stat -> (state letter, start time in clock ticks). The command name may
    hold spaces and parentheses, so fields are counted after its last `)`."""
    fields = text.rsplit(")", 1)[1].split()
    return fields[0], int(fields[19])


def process_group(text: str) -> int:
    """/proc/PID/stat -> the process group id (field 5)."""
    return int(text.rsplit(")", 1)[1].split()[2])


def read_process(pid: int) -> Optional[Dict[str, Any]]:
    """A live process (None: gone, or a zombie)."""
    stat = read_text(f"/proc/{pid}/stat")
    if stat is None:
        return None
    state, start_ticks = parse_proc_stat(stat)
    if state == "Z":
        return None
    cmdline = (read_text(f"/proc/{pid}/cmdline") or "").split("\0")
    uptime = float((read_text("/proc/uptime") or "0").split()[0])
    hz = os.sysconf("SC_CLK_TCK")
    return {
        "pid": pid,
        "state": state,  # R, S, D, T (stopped: SIGSTOP), ...
        "cmdline": [c for c in cmdline if c],
        "uptime": max(0.0, uptime - start_ticks / hz),
        "start_ticks": start_ticks,
    }


def group_members(pgid: int) -> List[Dict[str, Any]]:
    """The live processes of process group `pgid` (the service's leader started it with
    setsid): what is left of a server whose API process died (vLLM's EngineCore and
    workers, reparented to init, holding GPU memory)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        stat = read_text(f"/proc/{entry}/stat")
        if stat is None:
            continue
        try:
            if process_group(stat) != pgid:
                continue
        except (IndexError, ValueError):
            continue
        process = read_process(int(entry))
        if process is not None:
            found.append(process)
    return found


# == controller side ==


@dataclass(frozen=True)
class Process:
    """A process on the host (from /proc)."""

    pid: int | None
    cmdline: tuple[str, ...] = ()
    state: str | None = None  # R, S, D, T (stopped), ...
    uptime: float | None = None  # seconds since it started
    start_ticks: int | None = None

    @classmethod
    def from_json(cls, data: Any) -> Process | None:
        if not isinstance(data, dict):
            return None
        return cls(pid=as_int(data.get("pid")), cmdline=tuple(str(c) for c in data.get("cmdline") or ()),
                   state=as_str(data.get("state")), uptime=as_float(data.get("uptime")),
                   start_ticks=as_int(data.get("start_ticks")))
