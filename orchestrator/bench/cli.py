"""`orch bench --url URL [...]`: benchmark any OpenAI-compatible server without a plan.

argparse only at import time; the engine is imported when the command runs.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, get_args, get_origin


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


def _thinking(text: str) -> bool:
    if text not in ("on", "off"):
        raise argparse.ArgumentTypeError(f"expected on or off, got {text!r}")
    return text == "on"


# Flag -> the `bench:` field it sets (dotted for nested sections), and how its text is read
# (None: a string the model validates, such as a duration). Help text and choices come from
# the model itself, so the command and the plan reference cannot disagree.
FLAGS: list[tuple[str, str, Callable[[str], Any] | None]] = [
    ("--endpoint", "endpoint", None),
    ("--mode", "mode", None),
    ("--concurrency", "concurrency", _levels),
    ("--rate", "rate", _rates),
    ("--arrivals", "arrivals", None),
    ("--burstiness", "burstiness", float),
    ("--max-tokens", "max_tokens", int),
    ("--requests", "requests_per_level", _requests),
    ("--duration", "duration", None),
    ("--warmup", "warmup", int),
    ("--repeats", "repeats", int),
    ("--prompt", "prompt", None),
    ("--dataset", "dataset", None),
    ("--input-len", "input_len", int),
    ("--temperature", "temperature", float),
    ("--thinking", "thinking", _thinking),
    ("--seed", "seed", int),
    ("--timeout", "request_timeout", None),
    ("--slo-ttft-ms", "slo.ttft_ms", float),
    ("--slo-tpot-ms", "slo.tpot_ms", float),
    ("--slo-e2el-ms", "slo.e2el_ms", float),
    ("--threshold", "auto.threshold", float),
    ("--max-concurrency", "auto.max_concurrency", int),
]


def _field(path: str) -> Any:
    """The pydantic FieldInfo of a dotted `bench:` field."""
    from orchestrator.plan.models import Bench

    model: Any = Bench
    info: Any = None
    for part in path.split("."):
        info = model.model_fields[part]
        model = info.annotation
    return info


def _choices(info: Any) -> list[str] | None:
    annotation = info.annotation
    if get_origin(annotation) is Literal:
        return [str(a) for a in get_args(annotation)]
    return None


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", required=True, help="server root, e.g. http://127.0.0.1:8000")
    parser.add_argument("--model", help="model name (default: the first of /v1/models)")
    duration_group = parser.add_mutually_exclusive_group()
    for flag, path, kind in FLAGS:
        info = _field(path)
        default = info.get_default(call_default_factory=True)
        shown = "" if default is None or (isinstance(default, dict | list) and not default) else \
            f" (default {','.join(map(str, default)) if isinstance(default, list) else default})"
        target = duration_group if flag in ("--requests", "--duration") else parser
        options: dict[str, Any] = {"help": (info.description or "").rstrip(".") + shown,
                                   "choices": _choices(info)}
        if kind is not None:
            options["type"] = kind
        if kind is _thinking:
            options["metavar"] = "{on,off}"
        target.add_argument(flag, **options)
    parser.add_argument("--ignore-eos", action="store_true", default=None,
                        help=_field("ignore_eos").description)
    parser.add_argument("--no-metrics", action="store_true", help="do not scrape the server's /metrics")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY", metavar="NAME",
                        help="environment variable holding the API key (OPENAI_API_KEY)")
    parser.add_argument("--label", help="label stored in every result")
    parser.add_argument("--out", type=Path, help="output folder (default: bench-results/<time>)")


def bench_config(args: argparse.Namespace) -> dict[str, Any]:
    """The `bench:` section the arguments describe (only what was given)."""
    data: dict[str, Any] = {}
    for flag, path, _ in FLAGS:
        value = getattr(args, _dest(flag), None)
        if value is None:
            continue
        *sections, name = path.split(".")
        target = data
        for section in sections:
            target = target.setdefault(section, {})
        target[name] = value
    if args.ignore_eos:
        data["ignore_eos"] = True
    if args.no_metrics:
        data["metrics_interval"] = None
    return data


def run(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from orchestrator import masking
    from orchestrator.bench.sweep import run_sweep
    from orchestrator.console import make_console
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
    console = make_console()
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
        return 128 + (result.signum or 2)
    if result.stopped == "server_gone":
        console.print("[red]the server stopped answering (connections refused); the sweep ended early[/red]")
        return 1
    if result.stopped == "server_unhealthy":
        console.print("[red]the server reports its engine dead (/health 503); the sweep ended early[/red]")
        return 1
    return 0
