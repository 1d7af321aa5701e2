"""The Optuna study of a tune, in Optuna's own storage: SQLite in the tune folder by default
(`study.db`), so `--resume` finds every trial told and the workers of a parallel tune share
one study. The sampler is Optuna's TPE with its constraint handling: a trial's constraint (Optuna's
`Trial.set_constraint`, which replaced the samplers' `constraints_func` in Optuna 5) is how far
its closest level misses the SLO as a fraction of the limit (0 or less: met), so the sampler
learns from a trial that missed without taking it for a good one."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import Trial, TrialState

STUDY = "tune"
CONSTRAINT = "slo"  # the trial's constraint: above 0 it missed the SLO by that fraction
DB = "study.db"


class Study:
    """The shared study; ask and tell are serialised (SQLite has one writer)."""

    def __init__(self, folder: Path, *, seed: int | None, storage: str | None = None) -> None:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        url = storage or f"sqlite:///{folder / DB}"
        # a new study.db gets this Optuna's own schema: its version check (alembic, about 0.6 s
        # of a tune's own time) is for a study an older Optuna made, which --resume may open
        new = storage is None and not (folder / DB).exists()
        sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=4)
        self.study = optuna.create_study(study_name=STUDY, storage=optuna.storages.RDBStorage(
            url, skip_compatibility_check=new) if storage is None else url, sampler=sampler,
                                         direction="maximize", load_if_exists=True)
        self._lock = threading.Lock()

    def ask(self) -> Trial:
        with self._lock:
            return self.study.ask()

    def tell(self, trial: Trial, value: float | None, constraint: float | None,
             state: TrialState = TrialState.COMPLETE) -> None:
        with self._lock:
            if constraint is not None:
                trial.set_constraint(CONSTRAINT, constraint)
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
                constraints={CONSTRAINT: constraint}))

    def forget_running(self) -> None:
        """Trials a stopped tune had asked and not told (cut by Ctrl-C): failed, so a resumed
        study does not count them running."""
        with self._lock:
            for trial in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
                self.study.tell(trial.number, state=TrialState.FAIL)
