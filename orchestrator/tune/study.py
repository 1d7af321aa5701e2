"""The Optuna study of a tune, in Optuna's own storage: SQLite in the tune folder by default
(`study.db`), so `--resume` finds every trial told and the workers of a parallel tune share
one study. The sampler is Optuna's TPE with its constraint handling: a trial's constraint is
how far its best level misses the SLO (0 or less: met), stored on the trial."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial, Trial, TrialState

STUDY = "tune"
CONSTRAINT = "constraint"  # the user attribute the sampler's constraints_func reads
DB = "study.db"


def constraints(trial: FrozenTrial) -> Sequence[float]:
    """Optuna's constraints_func: above 0 is infeasible (the SLO missed by that fraction)."""
    return [float(trial.user_attrs.get(CONSTRAINT, 1.0))]


class Study:
    """The shared study; ask and tell are serialised (SQLite has one writer)."""

    def __init__(self, folder: Path, *, seed: int | None, storage: str | None = None) -> None:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        url = storage or f"sqlite:///{folder / DB}"
        sampler = optuna.samplers.TPESampler(seed=seed, constraints_func=constraints,
                                             n_startup_trials=4)
        self.study = optuna.create_study(study_name=STUDY, storage=url, sampler=sampler,
                                         direction="maximize", load_if_exists=True)
        self._lock = threading.Lock()

    def ask(self) -> Trial:
        with self._lock:
            return self.study.ask()

    def enqueue(self, params: dict[str, Any]) -> None:
        with self._lock:
            self.study.enqueue_trial(params, skip_if_exists=True)

    def tell(self, trial: Trial, value: float | None, constraint: float | None,
             state: TrialState = TrialState.COMPLETE) -> None:
        with self._lock:
            if constraint is not None:
                trial.set_user_attr(CONSTRAINT, constraint)
            if state == TrialState.COMPLETE and value is not None:
                self.study.tell(trial, value)
            else:
                self.study.tell(trial, state=TrialState.FAIL if state == TrialState.COMPLETE
                                else state)

    def record(self, params: dict[str, Any], distributions: dict[str, BaseDistribution],
               value: float, constraint: float) -> None:
        """A trial measured outside the sampler (the baseline): told so the sampler learns."""
        with self._lock:
            self.study.add_trial(optuna.trial.create_trial(
                params=params, distributions=distributions, value=value,
                user_attrs={CONSTRAINT: constraint}, system_attrs={}))

    def forget_running(self) -> None:
        """Trials a stopped tune had asked and not told (cut by Ctrl-C): failed, so a resumed
        study does not count them running."""
        with self._lock:
            for trial in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
                self.study.tell(trial.number, state=TrialState.FAIL)
