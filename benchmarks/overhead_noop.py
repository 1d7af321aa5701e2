"""The no-op re-apply table of benchmarks/apply_overhead.py: wall time, the orch process's CPU,
its peak of concurrent SSH sessions and the round trips per host, per host count and transport,
each row judged against the goals.

Goals: 1 host within 0.35 s of a bare `orch --version` (measured in the same run); 16 hosts
under 1.5x and 64 hosts under 3x the 1-host time of the same transport; the controller's CPU
per host under 20 ms, as (cpu(N) - cpu(1)) / (N - 1) of the orch process (its CPU beyond
what one host costs, shared out over the other hosts); at most `--forks` sessions at once; one
round trip per host.

The peak is sampled every 10 ms from /proc while orch runs: its TCP connections (paramiko:
one per host in flight) plus its `ssh` children (openssh: one process per command,
over the host's master connection, which outlives the run). A session shorter than 10 ms
can be missed; these last 50 ms and more.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

GOAL_OVER_BARE_S = 0.35  # 1 host: a no-op re-apply within this of `orch --version`
GOAL_RATIO = {16: 1.5, 64: 3.0}  # N hosts: under this times the 1-host time
GOAL_CPU_PER_HOST_S = 0.020
DEFAULT_FORKS = 32  # orch's --forks default (orchestrator/apply/forks.py)


def default_transport() -> tuple[str | None, str]:
    """(the inventory's ssh.transport for the default row: None, unset; its label)."""
    from orchestrator.inventory import SshSettings

    name = str(SshSettings().transport)
    if name == "auto":
        return None, f"auto (default) = {'openssh' if shutil.which('ssh') else 'paramiko'}"
    return None, f"{name} (default)"


class PeakSessions:
    """The most SSH sessions one process had at once (see the module's docstring)."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self._stop = pid, 0, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, self._sockets() + self._ssh_children())

    def _sockets(self) -> int:
        """Its TCP connections (not the Unix sockets it checks a master's socket with)."""
        folder = f"/proc/{self.pid}/fd"
        inodes = set()
        try:
            for fd in os.listdir(folder):
                with contextlib.suppress(OSError):
                    link = os.readlink(f"{folder}/{fd}")
                    if link.startswith("socket:["):
                        inodes.add(link[8:-1])
            if not inodes:
                return 0
            count = 0
            for table in ("tcp", "tcp6"):
                with open(f"/proc/{self.pid}/net/{table}") as rows:
                    count += sum(1 for row in rows if row.split()[9:10] and
                                 row.split()[9] in inodes)
        except OSError:
            return 0
        return count

    def _ssh_children(self) -> int:
        count = 0
        try:
            for task in os.listdir(f"/proc/{self.pid}/task"):
                with open(f"/proc/{self.pid}/task/{task}/children") as listed:
                    for child in listed.read().split():
                        with open(f"/proc/{child}/comm") as comm:
                            count += comm.read().strip() == "ssh"
        except OSError:
            pass
        return count

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def run_sampled(command: list[str], cwd: Path, env: dict[str, str],
                sample: bool) -> tuple[float, int, subprocess.CompletedProcess[str]]:
    """(wall s, peak sessions, the finished process) of one command."""
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    peak = PeakSessions(process.pid) if sample else None
    out, err = process.communicate()
    seconds = time.perf_counter() - started
    sessions = peak.stop() if peak is not None else 0
    return seconds, sessions, subprocess.CompletedProcess(command, process.returncode, out, err)


@dataclass
class Row:
    count: int
    label: str  # the transport (and options)
    forks: int
    median: float
    best: float
    trips: int
    cpu: float  # median CPU s of the orch process
    peak: int  # most sessions at once


def cpu_per_host(row: Row, one: Row | None) -> float | None:
    """(cpu(N) - cpu(1)) / (N - 1), None at 1 host or without the 1-host row."""
    if one is None or row.count == 1:
        return None
    return (row.cpu - one.cpu) / (row.count - 1)


def verdict(row: Row, one: Row | None, bare: float) -> str:
    """`met`, or `missed:` and what (the goals of the module's docstring)."""
    missed = []
    if row.count == 1 and row.median > bare + GOAL_OVER_BARE_S:
        missed.append(f"> bare + {GOAL_OVER_BARE_S} s")
    ratio = GOAL_RATIO.get(row.count)
    if ratio is not None and one is not None and row.median >= ratio * one.median:
        missed.append(f">= {ratio}x")
    per_host = cpu_per_host(row, one)
    if per_host is not None and per_host >= GOAL_CPU_PER_HOST_S:
        missed.append("CPU/host")
    if row.peak > row.forks:
        missed.append("peak > forks")
    if row.trips > 1:
        missed.append("trips")
    return "met" if not missed else "missed: " + ", ".join(missed)


def print_table(rows: list[Row], repeats: int, bare: float) -> None:
    print(f"no-op re-apply, 10 pins + 10 files, loopback sshd, {repeats} runs, "
          f"{os.cpu_count()} cores; bare `orch --version` {bare:.3f} s (median)")
    print("CPU/host: (cpu(N) - cpu(1)) / (N - 1) of the orch process; peak: most SSH "
          "sessions at once (sampled)")
    print(f"{'hosts':>5} | {'transport, options':<30} | {'median s':>8} | {'best s':>6} | "
          f"{'x 1 host':>8} | {'orch CPU s':>10} | {'CPU/host ms':>11} | {'peak/forks':>10} | "
          f"{'trips':>5} | goal")
    print("-" * 135)
    ones = {row.label: row for row in rows if row.count == 1}
    for row in rows:
        one = ones.get(row.label.split(" --forks")[0])
        ratio = f"{row.median / one.median:>8.2f}" if one is not None else f"{'-':>8}"
        per_host = cpu_per_host(row, one)
        shown = f"{per_host * 1000:>11.1f}" if per_host is not None else f"{'-':>11}"
        print(f"{row.count:>5} | {row.label:<30} | {row.median:>8.3f} | {row.best:>6.3f} | "
              f"{ratio} | {row.cpu:>10.2f} | {shown} | {f'{row.peak}/{row.forks}':>10} | "
              f"{row.trips:>5} | {verdict(row, one, bare)}")


def bare_seconds(orch: Callable[[list[str]], tuple[float, subprocess.CompletedProcess[str]]],
                 repeats: int) -> float:
    """The median wall time of `orch --version`: the interpreter and orch's CLI alone."""
    return statistics.median(orch(["--version"])[0] for _ in range(repeats))
