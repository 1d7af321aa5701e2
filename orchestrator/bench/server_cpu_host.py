"""The host side of the server CPU sampler (server_cpu.py), shipped whole as
`python3 -S -c <this file> PID INTERVAL` in one held command per repeat: stdlib only,
Python 3.8, no orch import.

It prints JSON lines. First what the readings need, or why there are none (then it ends):

    {"pid": 4242, "session": 4242, "hz": 100, "cores": 2}
    {"error": "the server's main process is not running"}

then a reading at once, one every INTERVAL seconds (0: none in between) and a last one when
its input closes (the sampler's stop, or the controller gone), and it ends:

    {"t": <the host's /proc/uptime, s>, "p": [[pid, start ticks, comm, utime+stime ticks], ...],
     "h": [busy ticks, all ticks]}

one entry per process of the main process's session (the service's main process leads it:
setsid, or systemd), threads included in their process's ticks; "h" is the whole host's CPU
time from /proc/stat (every core; idle and iowait are not busy), so a reader can tell a
server short of CPU because other programs took it.
"""
# ruff: noqa: UP006, UP035, UP045 - runs on Python 3.8 hosts
from __future__ import annotations

import contextlib
import json
import os
import select
import sys
from typing import Any, Dict, List, Optional, Tuple

PROC = "/proc"


def parse_stat(text: str) -> Optional[Tuple[str, int, int, int]]:
    """/proc/PID/stat -> (comm, session, utime + stime, start time), the times in clock ticks;
    None for text that is not one. The command name may hold spaces and parentheses, so the
    fields are counted after its last `)`: field n of proc(5) is fields[n - 3]."""
    head, closing, rest = text.rpartition(")")
    if not closing or "(" not in head:
        return None
    fields = rest.split()
    try:
        return head.partition("(")[2], int(fields[3]), int(fields[11]) + int(fields[12]), int(fields[19])
    except (IndexError, ValueError):
        return None


def _read(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def session_of(pid: int) -> Optional[int]:
    parsed = parse_stat(_read(f"{PROC}/{pid}/stat") or "")
    return parsed[1] if parsed else None


def host_ticks(text: str) -> Optional[List[int]]:
    """/proc/stat's first line -> [busy, all] clock ticks of every core together."""
    fields = text.split("\n", 1)[0].split()
    if not fields or fields[0] != "cpu":
        return None
    try:
        ticks = [int(value) for value in fields[1:9]]  # user .. steal (guest is within user)
    except ValueError:
        return None
    idle = sum(ticks[3:5])  # idle, iowait
    return [sum(ticks) - idle, sum(ticks)]


def reading(session: int) -> Dict[str, Any]:
    """Every process of `session` now, with the host's uptime (read first)."""
    uptime = float((_read(f"{PROC}/uptime") or "0").split()[0])
    host = host_ticks(_read(f"{PROC}/stat") or "")
    found: List[List[Any]] = []
    for entry in os.listdir(PROC):
        if not entry.isdigit():
            continue
        parsed = parse_stat(_read(f"{PROC}/{entry}/stat") or "")  # gone meanwhile: ""
        if parsed is not None and parsed[1] == session:
            comm, _, ticks, start = parsed
            found.append([int(entry), start, comm, ticks])
    return {"t": uptime, "p": found, "h": host}


def _say(data: Dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(data) + "\n")
    sys.stdout.flush()


def header(pid_text: str) -> Dict[str, Any]:
    """What the readings need, or {"error": why there are none}."""
    if not os.path.isfile(f"{PROC}/uptime"):
        return {"error": "the host has no /proc (not Linux)"}
    if not pid_text.isdigit() or int(pid_text) <= 0:
        return {"error": "the server's main process is not running"}
    session = session_of(int(pid_text))
    if session is None:
        return {"error": f"the server's main process {pid_text} is gone"}
    return {"pid": int(pid_text), "session": session, "hz": os.sysconf("SC_CLK_TCK"),
            "cores": os.cpu_count()}


def main(argv: List[str]) -> None:
    """Read until the input closes (module doc)."""
    head = header(argv[0] if argv else "")
    _say(head)
    if "error" in head:
        return
    interval = float(argv[1]) if len(argv) > 1 else 0.0
    while True:
        _say(reading(head["session"]))
        ready, _, _ = select.select([0], [], [], interval if interval > 0 else None)
        if ready and not os.read(0, 4096):  # the input closed: a last reading, then end
            _say(reading(head["session"]))
            return


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError, KeyboardInterrupt):  # the controller went away
        main(sys.argv[1:])
