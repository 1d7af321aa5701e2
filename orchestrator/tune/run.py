"""`orch tune PLAN`: open the tune folder (new, or the one --resume names), run the loop, then
print the table and the winner and write the tuned plan beside the plan."""

from __future__ import annotations

import os
from pathlib import Path

from rich.console import Console

from orchestrator.console import make_console
from orchestrator.errors import UsageError
from orchestrator.exit_codes import ExitCode
from orchestrator.holder import Holder
from orchestrator.runs.writer import lock_folder, name_holder
from orchestrator.tables import to_rich
from orchestrator.tune import tune_file
from orchestrator.tune.loop import Tuner, run_workers
from orchestrator.tune.setup import Setup, TuneOptions, prepare, space_json
from orchestrator.tune.study import Study
from orchestrator.tune.table import label, table, winner
from orchestrator.tune.trials import Runner
from orchestrator.tune.tune_file import LOCK, TuneRecord
from orchestrator.tune.tuned_plan import write_tuned


def layers(options: TuneOptions) -> list[str]:
    return [f"-f {o}" for o in options.overlays] + [f"--set {s}" for s in options.sets]


def _open(options: TuneOptions, setup: Setup, folder: Path) -> TuneRecord:
    if options.resume is None:
        record = TuneRecord(
            plan=setup.name, plan_file=str(options.plan), layers=layers(options),
            slo=setup.slo_text, objective=setup.objective, space=space_json(setup.space),
            hosts=setup.hosts, started=tune_file.now(),
            budget={"trials": options.trials, "seconds": options.seconds})
        tune_file.write(folder, record)
        return record
    record = tune_file.read(folder)
    ours = {"plan": setup.name, "layers": layers(options), "slo": setup.slo_text,
            "objective": setup.objective, "space": space_json(setup.space)}
    for key, value in ours.items():
        if getattr(record, key) != value:
            raise UsageError(f"--resume {folder}: that tune ran with {key} "
                             f"{getattr(record, key)!r}, this one has {value!r}",
                             hint="resume it with the plan, --set, --slo and --objective it ran "
                                  "with, or start a new tune")
    for entry in record.trials:
        if entry.status in ("running", "interrupted"):
            entry.status = "pending"  # run again, in its own run folder (resumed there)
    record.resumed.append(tune_file.now())
    record.status, record.finished, record.stopped = "incomplete", None, None
    record.budget = {"trials": options.trials, "seconds": options.seconds}
    tune_file.write(folder, record)
    return record


def _lock(folder: Path) -> int:
    """The tune folder's lock, held while this tune runs: a second `--resume` of it fails at
    once, naming the tune that holds it."""
    lock = folder / LOCK
    fd = lock_folder(lock, folder)
    name_holder(fd, Holder.me(str(folder), "tune"), lock)
    return fd


def tune(options: TuneOptions) -> int:
    setup = prepare(options)
    if options.resume is not None and not (options.resume / tune_file.FILE).is_file():
        raise UsageError(f"--resume {options.resume}: not a tune folder (no {tune_file.FILE})",
                         hint="give the runs/<plan>/tune-<time> folder the tune printed")
    folder = options.resume or tune_file.new_folder(options.runs_dir, setup.name)
    fd = _lock(folder)
    try:
        return _tune(options, setup, folder)
    finally:
        os.close(fd)


def _tune(options: TuneOptions, setup: Setup, folder: Path) -> int:
    console = make_console()
    record = _open(options, setup, folder)
    kept = sum(t.status in ("complete", "failed", "skipped") for t in record.trials)
    runner = Runner(plan=options.plan, folder=folder, overlays=options.overlays,
                    sets=options.sets, inventory=options.inventory, slo=setup.slo,
                    objective=setup.objective, quiet=len(setup.workers) > 1)
    study = Study(folder, seed=options.seed)
    study.forget_running()

    def say(line: str) -> None:
        console.print(f"== {line}", soft_wrap=True, markup=False)

    tuner = Tuner(setup, options, record, study, runner, say)
    console.print(f"tune {setup.name}: {setup.objective} meeting {setup.slo_text}, over "
                  f"{', '.join(setup.space.params)}; on {', '.join(setup.hosts) or 'this machine'}"
                  f"; tune folder: {folder}" + (f" ({kept} trials kept)" if options.resume else ""),
                  soft_wrap=True, markup=False)
    try:
        run_workers(tuner)
    except KeyboardInterrupt:
        for entry in record.trials:  # one whose worker had not said so yet is cut short too
            if entry.status == "running":
                found = runner.run_folder(entry)  # where --resume continues it
                entry.status, entry.run = "interrupted", entry.run or (str(found) if found else None)
        record.status, record.stopped, record.finished = "interrupted", "Ctrl-C", tune_file.now()
        tune_file.write(folder, record)
        console.print(to_rich(table(record, None), console.width))
        console.print(f"tune interrupted; continue it with: orch tune {options.plan} "
                      f"--resume {folder}", soft_wrap=True, markup=False)
        raise
    if tuner.busy:  # the trial the host did not take runs again on --resume
        record.status, record.stopped, record.finished = "interrupted", tuner.stopped, tune_file.now()
        tune_file.write(folder, record)
        console.print(to_rich(table(record, None), console.width))
        console.print(f"stopped: {record.stopped}", soft_wrap=True, markup=False)
        console.print(f"continue it when the host is free: orch tune {options.plan} --resume "
                      f"{folder}", soft_wrap=True, markup=False)
        return ExitCode.LOCKED
    tuner.close()
    record.status, record.stopped, record.finished = "complete", tuner.stopped, tune_file.now()
    return _conclude(console, options, record, folder)


def _conclude(console: Console, options: TuneOptions, record: TuneRecord, folder: Path) -> int:
    found = winner(record)
    console.print(to_rich(table(record, found.entry if found else None), console.width))
    console.print(f"stopped: {record.stopped}", soft_wrap=True, markup=False)
    if found is None:
        tune_file.write(folder, record)
        console.print(f"no trial met {record.slo}: no winner", soft_wrap=True, markup=False)
        return ExitCode.ERROR
    record.winner = found.entry.number
    console.print(f"winner: trial {found.entry.number}, {found.reason}", soft_wrap=True,
                  markup=False)
    if found.entry.source != "baseline" and found.entry.changed:
        comment = (f"Tuned by orch tune: trial {found.entry.number} of {folder} "
                   f"({label(found.entry.changed)}).\nApply it with: orch apply <this file>; "
                   f"the winner's exact package set: orch apply --locked {found.entry.run}")
        path = write_tuned(options.plan, options.sets, found.entry.changed, comment,
                           options.overlays)
        record.tuned_plan = str(path)
        console.print(f"tuned plan: {path} (orch apply {path} deploys the winner)",
                      soft_wrap=True, markup=False)
    tune_file.write(folder, record)
    return ExitCode.OK
