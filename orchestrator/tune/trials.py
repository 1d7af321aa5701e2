"""One trial: a real `orch apply` of the plan with the candidate's `--set`s on one host (its
install pivots, restart, wait, smoke and sweep included), in a run folder of its own under
the tune folder (`<tune>/trial-<n>/<plan>/<run>`), then its sweep judged.

The apply runs as a child `orch apply` process: workers of a parallel tune each run their
own, and Ctrl-C reaches it as it would from the terminal (it marks its run interrupted and
stops its server's sweep cleanly). A trial that fails (start-up, OOM, a refused flag) is a
result with its diagnosed cause, not an error of the tune.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from orchestrator.exit_codes import ExitCode
from orchestrator.plan.models.objective import Condition
from orchestrator.tune.measure import cause, finished, measure
from orchestrator.tune.tune_file import TrialEntry


@dataclass(frozen=True)
class Runner:
    """What every trial's apply shares: the plan, its layers, the inventory, where to write."""

    plan: Path
    folder: Path  # the tune folder
    overlays: list[Path] = field(default_factory=list)
    sets: list[str] = field(default_factory=list)
    inventory: Path | None = None
    slo: tuple[Condition, ...] = ()
    objective: str = "output_throughput"
    quiet: bool = False  # the apply's output to its log only (a parallel tune)

    def command(self, entry: TrialEntry, host: str | None, resume: Path | None) -> list[str]:
        argv = [sys.executable, "-m", "orchestrator.cli", "apply", str(self.plan),
                "--runs-dir", str(self.trial_dir(entry))]
        for overlay in self.overlays:
            argv += ["-f", str(overlay)]
        for value in [*self.sets, *entry.sets]:
            argv += ["--set", value]
        if self.inventory is not None:
            argv += ["-i", str(self.inventory)]
        if host is not None:
            argv += ["--limit", host]
        if resume is not None:
            argv += ["--resume", str(resume)]
        return argv

    def trial_dir(self, entry: TrialEntry) -> Path:
        return self.folder / f"trial-{entry.number}"

    def run_folder(self, entry: TrialEntry) -> Path | None:
        found = sorted(self.trial_dir(entry).glob("*/*/meta.json"))
        return found[-1].parent if found else None


class Children:
    """The trials' apply processes, so Ctrl-C can be passed on to each and waited for."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen[bytes]] = set()
        self.stopping = False

    def start(self, argv: list[str], log: IO[bytes] | None) -> subprocess.Popen[bytes]:
        with self._lock:
            if self.stopping:
                raise KeyboardInterrupt
            # a session of its own: the terminal's Ctrl-C reaches the tune only, which passes
            # exactly one on (a second would cut the apply's own clean-up short)
            child = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT if log else None,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"},
                                     start_new_session=True)
            self._running.add(child)
            return child

    def done(self, child: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._running.discard(child)

    def interrupt(self) -> None:
        """Ctrl-C to every apply still running, as the terminal would send it."""
        with self._lock:
            self.stopping = True
            children = list(self._running)
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGINT)
        for child in children:
            child.wait()


def run_trial(runner: Runner, children: Children, entry: TrialEntry, host: str | None) -> bool:
    """Apply and judge the trial; its entry says what happened (complete, failed, or
    interrupted when Ctrl-C stopped it). False when the host never took it: another apply
    holds the host's lock (the apply's exit 75), which says nothing of the candidate, so the
    entry is interrupted (run again by --resume) and the tune stops rather than fail every
    trial it has left in a second."""
    started = time.monotonic()
    earlier = Path(entry.run) if entry.run else None
    resume = earlier if earlier is not None and earlier.is_dir() and not finished(earlier) else None
    runner.trial_dir(entry).mkdir(parents=True, exist_ok=True)
    log_path = runner.trial_dir(entry) / "apply.log"
    with open(log_path, "ab") if runner.quiet else contextlib.nullcontext() as log:
        child = children.start(runner.command(entry, host, resume), log)
        try:
            code = child.wait()
        finally:
            children.done(child)
    run = runner.run_folder(entry)
    entry.run = str(run) if run else None
    entry.seconds = round((entry.seconds or 0) + time.monotonic() - started, 3)
    if children.stopping:
        entry.status = "interrupted"
        return True
    if code == ExitCode.LOCKED:
        entry.status = "interrupted"
        entry.cause = cause(run) or f"another apply holds {host or 'a host'}"
        return False
    judged = measure(run, runner.slo, runner.objective) if run is not None and code == 0 else None
    if judged is None:
        entry.status = "failed"
        entry.cause = cause(run) or (f"apply exited {code}" + (f" (its output: {log_path})"
                                                              if runner.quiet else ""))
        return True
    entry.status = "complete"
    entry.objective, entry.peak, entry.at = judged.score, judged.peak, judged.at
    entry.slo, entry.slo_met = judged.slo, judged.score is not None
    entry.limiter = judged.limiter
    entry.constraint, entry.best, entry.advice = judged.constraint, judged.best, judged.suggestions
    return True
