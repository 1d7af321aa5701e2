"""What `orch tune` itself costs beside its trials: a tune of plans/sim/kimi-nvfp4-tune.yaml
(the simulator, on this machine) is run as a child `orch tune`, timed from outside, and its
own records split the wall time:

- applies: each trial's child `orch apply`, as tune.json's `seconds` has it, split by the trial's
  events.jsonl into the converge and start-up (host start to the server ready), the smoke
  checks, the sweep (first level's start to the bench stage's end) and the rest of the apply
  (its process start, plan load, collect, run-folder writes);
- tune's own overhead: the rest of the wall time (the process start, plan loading, Optuna,
  the what-if predictions, tune.json writes, the table, the tuned plan). The goal: under 2%.

    .venv/bin/python benchmarks/tune_overhead.py [--trials 8] [--folder runs/<plan>/tune-<time>]

`--folder` reads a tune that already ran instead (its wall time from tune.json's started and
finished, to the second). The run's folders go to a temporary directory.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PLAN = ROOT / "plans/sim/kimi-nvfp4-tune.yaml"


def _events(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines() if line]


def split(run: Path) -> dict[str, float]:
    """A trial's apply by its events: converge + start-up, smoke, sweep (seconds)."""
    events = _events(run)
    start = next(e["ts"] for e in events if e["event"] == "host_start")
    ready = next((e["ts"] for e in events if e.get("stage") == "ready" and e.get("status") == "ok"),
                 None)
    smoke = next((e["ts"] for e in events if e.get("stage") == "smoke" and e.get("status") == "ok"),
                 None)
    first = next((e["ts"] for e in events if e["event"] == "level_start"), None)
    bench = next((e["ts"] for e in events if e.get("stage") == "bench" and e.get("status") == "ok"),
                 None)
    return {"converge": (ready or start) - start,
            "smoke": (smoke - ready) if smoke and ready else 0.0,
            "sweep": (bench - first) if bench and first else 0.0}


def table(folder: Path, wall: float) -> str:
    record = json.loads((folder / "tune.json").read_text())
    ran = [t for t in record["trials"] if t.get("seconds") is not None]
    applies = sum(t["seconds"] for t in ran)
    parts = {"converge": 0.0, "smoke": 0.0, "sweep": 0.0}
    for trial in ran:
        if trial.get("run"):
            for key, value in split(Path(trial["run"])).items():
                parts[key] += value
    rest = applies - sum(parts.values())
    overhead = wall - applies
    skipped = sum(t["status"] == "skipped" for t in record["trials"])
    rows = [("wall time of orch tune", wall),
            (f"applies ({len(ran)} trials; {skipped} candidates skipped, no apply)", applies),
            ("  converge + start-up (to the server ready)", parts["converge"]),
            ("  smoke checks", parts["smoke"]),
            ("  sweeps", parts["sweep"]),
            ("  the rest of the applies (process start, plan, collect, writes)", rest),
            ("tune's own overhead (Optuna, predictions, plan loads, tune.json, table)", overhead)]
    lines = [f"{'':<72} {'seconds':>8} {'share':>7}"]
    lines += [f"{name:<72} {value:8.2f} {value / wall:7.1%}" for name, value in rows]
    return "\n".join(lines)


def run_tune(trials: int, where: Path) -> tuple[Path, float]:
    argv = [sys.executable, "-m", "orchestrator.cli", "tune", str(PLAN), "--trials", str(trials),
            "--runs-dir", str(where / "runs")]
    began = time.monotonic()
    done = subprocess.run(argv, cwd=where, capture_output=True, text=True, check=False)
    wall = time.monotonic() - began
    subprocess.run([sys.executable, "-m", "orchestrator.cli", "stop", str(PLAN)],
                   cwd=where, capture_output=True, check=False)
    if done.returncode != 0:
        sys.exit(f"orch tune exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    tuned = PLAN.with_name(PLAN.stem + ".tuned.yaml")
    tuned.unlink(missing_ok=True)  # the benchmark's winner is not the plan's to keep
    return next((where / "runs").glob("*/tune-*")), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--folder", type=Path, help="a tune folder that already ran")
    args = parser.parse_args()
    if args.folder is not None:
        record = json.loads((args.folder / "tune.json").read_text())
        wall = (dt.datetime.fromisoformat(record["finished"])
                - dt.datetime.fromisoformat(record["started"])).total_seconds()
        print(table(args.folder, wall))
        return
    with tempfile.TemporaryDirectory(prefix="orch-tune-overhead-") as tmp:
        folder, wall = run_tune(args.trials, Path(tmp))
        print(table(folder, wall))


if __name__ == "__main__":
    main()
