"""The loop of `orch tune`: the baseline first (the plan as written), then what its limiter
advises (inside the tune space), then Optuna's proposals, each a real apply and sweep, until a
stop rule holds. One worker per host of the plan runs trials side by side; they share the
Optuna study (ask and tell) and tune.json, and wait for the baseline before anything else.

A candidate is checked before it runs: an invalid plan, a prediction that it does not fit
or loses by far, or values already tried are recorded (or told to the sampler) and cost no
apply.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from optuna.trial import Trial, TrialState

from orchestrator.errors import OrchError, PlanError
from orchestrator.matrix.expand import transition
from orchestrator.matrix.preview import TAKES
from orchestrator.plan.loader import load_plan
from orchestrator.plan.models import Plan
from orchestrator.tune import tune_file
from orchestrator.tune.candidates import advised
from orchestrator.tune.forecast import skip_reason
from orchestrator.tune.setup import Setup, TuneOptions
from orchestrator.tune.space import Values, key_of, tune_sets
from orchestrator.tune.stop import Budget, stop_reason
from orchestrator.tune.study import Study
from orchestrator.tune.trials import Children, Runner, run_trial
from orchestrator.tune.tune_file import TrialEntry, TuneRecord

MAX_PROPOSALS = 50  # proposals in a row tried before or skipped: the search is done
RANKED = 4  # with a prediction, proposals drawn at once: the highest predicted peak runs first
Say = Callable[[str], None]


def changed(values: Values, baseline: Values) -> dict[str, Any]:
    return {k: v for k, v in values.items() if key_of({k: v}) != key_of({k: baseline.get(k)})}


@dataclass
class Tuner:
    setup: Setup
    options: TuneOptions
    record: TuneRecord
    study: Study
    runner: Runner
    say: Say
    children: Children = field(default_factory=Children)
    stopped: str | None = None
    busy: bool = False  # a host was held by another apply: the tune stopped, to be resumed
    errors: list[BaseException] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.cond = threading.Condition()
        self.began = time.monotonic()
        self.budget = Budget(self.options.trials, self.options.seconds)
        self.asked: dict[int, Trial] = {}
        self.plans: dict[int, Plan] = {}  # each checked candidate's plan, by trial number
        self.last: dict[str | None, Plan] = {}  # what each worker's host runs now
        self.scores = [t.objective if t.slo_met else None for t in self.record.trials
                       if t.status in ("complete", "failed")]

    # -- choosing the next trial (under the condition's lock) --------------------------------

    def next(self, worker: str | None) -> TrialEntry | None:
        with self.cond:
            while True:
                entry = self._next(worker)
                if entry is not None or self.stopped is not None:
                    return entry
                self.cond.wait()  # the baseline runs on another worker

    def _next(self, worker: str | None) -> TrialEntry | None:
        ran = sum(t.status not in ("skipped", "pending") for t in self.record.trials)
        reason = stop_reason(self.budget, ran, time.monotonic() - self.began, self.scores)
        if reason is not None or self.stopped is not None:
            self.stopped = self.stopped or reason
            self.cond.notify_all()
            return None
        base = self.baseline()
        if base is None:
            base = self._entry("baseline", self.setup.baseline, tune_sets({}))
            self._check(base)
            return self._start(base, worker)
        if base.status == "running":
            return None
        pending = [t for t in self.record.trials if t.status == "pending"]
        for entry in sorted(pending, key=lambda t: -_peak_of(t)):  # the highest predicted first
            if self._check(entry):
                return self._start(entry, worker)
            self._prune(entry)
            tune_file.write(self.runner.folder, self.record)
        return self._ask(worker)

    def baseline(self) -> TrialEntry | None:
        return next((t for t in self.record.trials if t.source == "baseline"), None)

    def _entry(self, source: str, values: Values, sets: list[str]) -> TrialEntry:
        entry = TrialEntry(number=len(self.record.trials) + 1, source=source, values=values,
                           changed=changed(values, self.setup.baseline), sets=sets)
        self.record.trials.append(entry)
        return entry

    def _start(self, entry: TrialEntry, worker: str | None) -> TrialEntry:
        entry.status, entry.host, entry.cause = "running", worker or ",".join(self.setup.hosts), None
        tune_file.write(self.runner.folder, self.record)
        return entry

    def _ask(self, worker: str | None) -> TrialEntry | None:
        size = self.setup.space.size()
        space = self.setup.space
        tried = {key_of(t.values) for t in self.record.trials
                 if space.optuna_params(t.values) is not None}  # the baseline may lie outside
        drawn: list[TrialEntry] = []
        for _ in range(MAX_PROPOSALS):
            if size is not None and len(tried) >= size:
                break
            trial = self.study.ask()
            values = self.setup.space.suggest(trial)
            same = next((t for t in self.record.trials if key_of(t.values) == key_of(values)), None)
            if same is not None:
                self._tell(trial, same)
                continue
            entry = self._entry("search", values, tune_sets(values))
            entry.optuna_trial = trial.number
            tried.add(key_of(values))
            if self._check(entry):
                self.asked[entry.number] = trial
                drawn.append(entry)
                # ranked only by a prediction: one the model could not make runs at once
                if len(drawn) >= (RANKED if _predicted(entry) else 1):
                    break
                continue
            self.study.tell(trial, None, None, TrialState.PRUNED)
            tune_file.write(self.runner.folder, self.record)
        if drawn:  # the highest predicted runs; the others wait as pending, ranked so too
            best = max(drawn, key=_peak_of)
            for entry in drawn:
                entry.status = "pending"
            return self._start(best, worker)
        self.stopped = "every candidate of the tune space was tried" if size is not None and \
            len(tried) >= size else f"{MAX_PROPOSALS} proposals in a row were tried before or " \
                                    "skipped"
        self.cond.notify_all()
        return None

    def _check(self, entry: TrialEntry) -> bool:
        """Whether the candidate is worth an apply: a valid plan, predicted to fit and not to
        lose by far (the baseline runs whatever is predicted); else the entry is skipped with
        why."""
        try:
            plan = load_plan(self.options.plan, self.options.overlays,
                             [*self.options.sets, *entry.sets]).plan
        except PlanError as error:
            entry.status, entry.cause = "skipped", f"skipped: not a valid plan: {error.message}"
            return False
        self.plans[entry.number] = plan
        if self.options.predict is None:
            return True
        try:
            forecast = self.options.predict(plan)
        except OrchError as error:  # a model or GPU the what-if model does not know: said, and run
            entry.predicted = {"error": error.message.splitlines()[0]}
            return True
        entry.predicted = {"fits": forecast.fits, "why": forecast.why,
                           "peak_output_throughput": forecast.peak_output_throughput}
        reason = skip_reason(forecast, self.best_peak()) if entry.source != "baseline" else None
        if reason is not None:
            entry.status, entry.cause = "skipped", reason
            return False
        return True

    def best_peak(self) -> float | None:
        """The highest measured peak output tok/s of a trial meeting the SLO: what a predicted
        peak is held against (a peak against a peak, whatever the objective)."""
        return max((t.peak for t in self.record.trials
                    if t.status == "complete" and t.slo_met and t.peak), default=None)

    def _prune(self, entry: TrialEntry) -> None:
        trial = self.asked.pop(entry.number, None)
        if trial is not None:
            self.study.tell(trial, None, None, TrialState.PRUNED)

    def close(self) -> None:
        """The tune stopped: proposals drawn but not run are skipped, said why (the advice
        not run stays pending, as before)."""
        for entry in self.record.trials:
            if entry.status == "pending" and entry.source == "search":
                entry.status, entry.cause = "skipped", "skipped: not run before the tune stopped"
                self._prune(entry)

    def _tell(self, trial: Trial, entry: TrialEntry) -> None:
        """A proposal already tried: the sampler is told what that trial measured."""
        if entry.status == "complete":
            self.study.tell(trial, _value(entry), entry.constraint)
        else:
            self.study.tell(trial, None, None, TrialState.FAIL if entry.status == "failed"
                            else TrialState.PRUNED)

    # -- a trial ended ------------------------------------------------------------------------

    def finish(self, entry: TrialEntry) -> None:
        with self.cond:
            trial = self.asked.pop(entry.number, None)
            if entry.status == "complete" and trial is not None:
                self.study.tell(trial, _value(entry), entry.constraint)
            elif entry.status == "complete":
                params = self.setup.space.optuna_params(entry.values)
                value = _value(entry)
                if params is not None and value is not None:
                    self.study.record(params, self.setup.space.distributions(), value,
                                      entry.constraint if entry.constraint is not None else 1.0)
            elif entry.status == "failed" and trial is not None:
                self.study.tell(trial, None, None, TrialState.FAIL)
            if entry.status in ("complete", "failed"):
                self.scores.append(entry.objective if entry.slo_met else None)
            if entry.source == "baseline" and entry.status in ("complete", "failed"):
                self._advise(entry)
            tune_file.write(self.runner.folder, self.record)
            self.cond.notify_all()

    def _advise(self, base: TrialEntry) -> None:
        """The limiter's advice at the baseline's plateau, as trials to run next (the highest
        predicted peak first, when there is a prediction)."""
        found = advised(base.advice, self.setup.space, self.setup.baseline)
        for values in sorted(found, key=lambda v: -self._predicted_peak(v)):
            self._entry("advice", values, tune_sets(values))

    def _predicted_peak(self, values: Values) -> float:
        if self.options.predict is None:
            return 0.0
        try:
            plan = load_plan(self.options.plan, self.options.overlays,
                             [*self.options.sets, *tune_sets(values)]).plan
            return float(self.options.predict(plan).peak_output_throughput)
        except OrchError:  # an invalid plan or an unknown model: said when it is checked
            return 0.0

    # -- the workers --------------------------------------------------------------------------

    def work(self, worker: str | None) -> None:
        try:
            while (entry := self.next(worker)) is not None:
                plan = self.plans.get(entry.number)
                entry.step = transition(self.last.get(worker), plan) if plan else None
                if plan is not None:
                    self.last[worker] = plan
                takes = f" ({TAKES[entry.step]})" if entry.step else ""
                self.say(f"trial {entry.number} ({entry.source}) on {entry.host}: "
                         f"{_label(entry.changed)}{takes}")
                took = True
                try:
                    took = run_trial(self.runner, self.children, entry, worker)
                except KeyboardInterrupt:
                    entry.status = "interrupted"
                self.finish(entry)
                self.say(f"trial {entry.number}: {entry.status}"
                         + (f": {entry.cause}" if entry.cause else "")
                         + (f", {entry.objective:,.0f} tok/s meeting the SLO"
                            if entry.objective is not None and entry.slo_met else ""))
                if not took:
                    with self.cond:
                        self.busy = True
                        self.stopped = self.stopped or f"a host was busy: {entry.cause}"
                        self.cond.notify_all()
                if self.children.stopping or not took:
                    return
        except BaseException as error:  # told to the main thread, which raises it
            self.errors.append(error)
            with self.cond:
                self.stopped = self.stopped or f"an error: {error}"
                self.cond.notify_all()


def _predicted(entry: TrialEntry) -> bool:
    return "peak_output_throughput" in (entry.predicted or {})


def _peak_of(entry: TrialEntry) -> float:
    peak = (entry.predicted or {}).get("peak_output_throughput")
    return float(peak) if isinstance(peak, int | float) else 0.0


def _value(entry: TrialEntry) -> float | None:
    """What the sampler maximises: the objective meeting the SLO, else the best level's (the
    constraint tells the sampler it missed)."""
    return entry.objective if entry.objective is not None else entry.best


def _label(values: dict[str, Any]) -> str:
    from orchestrator.tune.table import label

    return label(values)


def run_workers(tuner: Tuner) -> None:
    """One thread per worker until the tune stops; Ctrl-C passes on to the trials' applies
    and their entries are marked interrupted."""
    threads = [threading.Thread(target=tuner.work, args=(w,), name=f"tune-{w or 'all'}",
                                daemon=True) for w in tuner.setup.workers]
    for thread in threads:
        thread.start()
    try:
        while any(t.is_alive() for t in threads):
            for thread in threads:
                thread.join(timeout=0.2)
    except KeyboardInterrupt:
        with tuner.cond:
            tuner.stopped = "interrupted (Ctrl-C)"
            tuner.cond.notify_all()
        tuner.children.interrupt()
        for thread in threads:
            thread.join()
        raise
    if tuner.errors:
        raise tuner.errors[0]
