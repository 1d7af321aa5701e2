"""`orch bench --url URL [...]`: benchmark any OpenAI-compatible server without a plan.

argparse only at import time; the engine is imported when the command runs.
"""

from __future__ import annotations

import argparse
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def _levels(text: str) -> list[int] | str:
    if text.strip() == "auto":
        return "auto"
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected levels such as 1,2,4,8 or 'auto', got {text!r}"
        ) from None
    if not values:
        raise argparse.ArgumentTypeError("give at least one level")
    return values


def _rates(text: str) -> list[float]:
    try:
        return [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected rates such as 2,4,8 (req/s), got {text!r}") from None


def _requests(text: str) -> int | str:
    return int(text) if text.strip().isdigit() else text.strip()


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", required=True, help="server root, e.g. http://127.0.0.1:8000")
    parser.add_argument("--model", help="model name (default: the first of /v1/models)")
    parser.add_argument("--endpoint", choices=["chat", "completions"], help="API endpoint (chat)")
    parser.add_argument("--mode", choices=["closed", "batch"], help="closed loop (default) or batch")
    parser.add_argument("--concurrency", type=_levels, help="levels, e.g. 1,2,4,8, or 'auto'")
    parser.add_argument("--rate", type=_rates, help="open-loop request rates, e.g. 2,4,8")
    parser.add_argument("--arrivals", choices=["poisson", "constant"], help="open-loop arrivals")
    parser.add_argument("--burstiness", type=float, help="gamma shape of arrivals (1 = Poisson)")
    parser.add_argument("--max-tokens", type=int, help="completion token limit (1024)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--requests", type=_requests, help="requests per level: N, or a multiple such as 2x")
    group.add_argument("--duration", help="run each level this long instead, e.g. 60s")
    parser.add_argument("--warmup", type=int, help="warm-up requests per level (1)")
    parser.add_argument("--repeats", type=int, help="repeat each level and report the spread")
    parser.add_argument("--prompt", help="fixed prompt")
    parser.add_argument("--dataset", help="JSONL file of prompts")
    parser.add_argument("--input-len", type=int, help="synthetic prompts of about this many tokens")
    parser.add_argument("--ignore-eos", action="store_true", default=None, help="always generate max tokens")
    parser.add_argument("--temperature", type=float)
    parser.add_argument("--thinking", choices=["on", "off"], help="thinking on or off (chat_template_kwargs)")
    parser.add_argument("--timeout", help="per-request timeout, e.g. 600s")
    parser.add_argument("--slo-ttft-ms", type=float, help="goodput objective: TTFT")
    parser.add_argument("--slo-tpot-ms", type=float, help="goodput objective: TPOT")
    parser.add_argument("--slo-e2el-ms", type=float, help="goodput objective: end-to-end latency")
    parser.add_argument("--threshold", type=float, help="auto: stop when a doubling gains less (0.05)")
    parser.add_argument("--max-concurrency", type=int, help="auto: upper bound of the search")
    parser.add_argument("--no-metrics", action="store_true", help="do not scrape the server's /metrics")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY", metavar="NAME",
                        help="environment variable holding the API key (OPENAI_API_KEY)")
    parser.add_argument("--label", help="label stored in every result")
    parser.add_argument("--out", type=Path, help="output folder (default: bench-results/<time>)")


def bench_config(args: argparse.Namespace) -> dict[str, Any]:
    """The `bench:` section the arguments describe (only what was given)."""
    data: dict[str, Any] = {}
    simple = {
        "endpoint": "endpoint", "mode": "mode", "concurrency": "concurrency", "rate": "rate",
        "arrivals": "arrivals", "burstiness": "burstiness", "max_tokens": "max_tokens",
        "requests": "requests_per_level", "duration": "duration", "warmup": "warmup",
        "repeats": "repeats", "prompt": "prompt", "dataset": "dataset", "input_len": "input_len",
        "ignore_eos": "ignore_eos", "temperature": "temperature", "timeout": "request_timeout",
    }
    for arg, key in simple.items():
        value = getattr(args, arg, None)
        if value is not None:
            data[key] = value
    if args.thinking is not None:
        data["thinking"] = args.thinking == "on"
    slo = {k: getattr(args, f"slo_{k}") for k in ("ttft_ms", "tpot_ms", "e2el_ms")}
    if any(v is not None for v in slo.values()):
        data["slo"] = {k: v for k, v in slo.items() if v is not None}
    auto = {"threshold": args.threshold, "max_concurrency": args.max_concurrency}
    if any(v is not None for v in auto.values()):
        data["auto"] = {k: v for k, v in auto.items() if v is not None}
    if args.no_metrics:
        data["metrics_interval"] = None
    return data


def run(args: argparse.Namespace) -> int:
    from pydantic import ValidationError
    from rich.console import Console

    from orchestrator import masking
    from orchestrator.bench.sweep import run_sweep
    from orchestrator.errors import BenchError
    from orchestrator.plan.models import Bench

    try:
        config = Bench.model_validate(bench_config(args))
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors()
        )
        raise BenchError(f"invalid benchmark options: {problems}") from None
    api_key = os.environ.get(args.api_key_env) or None
    if api_key:
        masking.register(api_key)
    out = args.out or Path("bench-results") / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    console = Console()
    if not console.is_terminal:  # a log file or a pipe: do not squeeze the table into 80 columns
        console = Console(width=max(console.width, 132))
    labels = {"label": args.label} if args.label else {}
    console.print(f"benchmarking {masking.mask(args.url)}, results in {out}")
    result = run_sweep(
        config,
        base_url=args.url,
        model=args.model,
        api_key=api_key,
        out_dir=out,
        console=console,
        labels=labels,
    )
    console.print(result.render())
    if result.stopped == "interrupted":
        console.print("interrupted: finished levels are kept; the last one is marked partial")
        return 130
    if result.stopped == "server_gone":
        console.print("[red]the server stopped answering (connections refused); the sweep ended early[/red]")
        return 1
    if result.stopped == "server_unhealthy":
        console.print("[red]the server reports its engine dead (/health 503); the sweep ended early[/red]")
        return 1
    return 0
