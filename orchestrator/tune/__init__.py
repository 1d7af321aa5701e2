"""`orch tune`: a closed loop that finds the best deployment of a plan (docs/tune.md).

    spec.py        the plan's `tune:` section (part of the plan model)
    slo.py         `--slo p99_ttft<=2s,p99_tpot<=60ms` and `--objective`, read once
    space.py       the tune space as Optuna distributions; values -> `--set`s
    study.py       the Optuna study in its own storage (SQLite in the tune folder)
    forecast.py    the prediction a candidate is ranked or skipped by
    measure.py     a trial's run folder -> objective, SLO per metric, limiter, cause
    candidates.py  the limiter's advice as candidates inside the space
    tune_file.py   tune.json: the trials, as they start and end
    stop.py        the stop rules: trials, time, three trials without a 3% gain
    loop.py        the loop: baseline, advice, search; one worker per host
    table.py       the table and the winner's reason
    tuned_plan.py  plans/<name>.tuned.yaml

Nothing is imported here: spec.py and slo.py sit under the plan model, the rest above apply.
"""
