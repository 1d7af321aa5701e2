"""`orch tune PLAN --slo ...`: find the best deployment of a plan by itself (docs/tune.md).

Exit codes: 0 with a winner (a trial meeting the SLO), 1 when no trial met it, 64 on a
usage error (a plan without `tune:`, an SLO that does not read).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from orchestrator.commands.plan_options import add_plan_options, limit_hosts


def _duration(text: str) -> float:
    from orchestrator.plan.models.base import parse_duration

    try:
        return parse_duration(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{text!r}: {error}") from None


def _trials(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a number of trials of at least 1, got {text!r}")
    return int(text)


def configure(parser: argparse.ArgumentParser) -> None:
    add_plan_options(parser)
    parser.add_argument("--slo", metavar="TERMS",
                        help="what every trial is held to, e.g. 'p99_ttft<=2s,p99_tpot<=60ms' "
                             "(default: the plan's tune.slo)")
    parser.add_argument("--objective", metavar="METRIC",
                        help="the throughput to maximise at a level meeting the SLO (default "
                             "output_throughput, or the plan's tune.objective)")
    parser.add_argument("--trials", type=_trials, metavar="N",
                        help="stop after N trials that ran an apply, the baseline included")
    parser.add_argument("--budget", type=_duration, metavar="DURATION",
                        help="stop starting trials after this long, e.g. 2h or 90m")
    parser.add_argument("--resume", type=Path, metavar="DIR",
                        help="continue the tune in DIR (runs/<plan>/tune-<time>): finished "
                             "trials are kept, the one that was cut runs again")
    parser.add_argument("--runs-dir", type=Path, default=Path("runs"),
                        help="where the tune folder goes (default ./runs)")
    parser.add_argument("--seed", type=int, default=0,
                        help="the sampler's seed (default 0: the same trials for the same results)")


def run(args: argparse.Namespace) -> int:
    from orchestrator.plan.prediction import predict_plan  # the prediction candidates are ranked by
    from orchestrator.tune.run import tune
    from orchestrator.tune.setup import TuneOptions

    return tune(TuneOptions(
        plan=args.plan, inventory=args.inventory, limit=limit_hosts(args),
        overlays=list(args.overlay), sets=list(args.sets), slo=args.slo,
        objective=args.objective, trials=args.trials, seconds=args.budget,
        resume=args.resume, runs_dir=args.runs_dir, seed=args.seed, predict=predict_plan))
