"""`orch bench --url URL [...]`: benchmark any OpenAI-compatible server without a plan.

argparse only at import time; the engine is imported when the command runs.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args, get_origin

from orchestrator.metrics import OBJECTIVES

if TYPE_CHECKING:
    from orchestrator.plan.models import Bench
# The library is imported inside the functions that use it, not here: orch imports this
# module to build its parser, and start-up time matters (cli.py).


def _levels(text: str) -> list[int] | str:
    if text.strip() == "auto":
        return "auto"
    return _counts(text)


def _counts(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected levels such as 1,2,4,8, got {text!r}"
        ) from None
    if not values:
        raise argparse.ArgumentTypeError("give at least one level")
    return values


def _rates(text: str) -> list[float]:
    """2,4,8 or inf (vllm bench serve's default: no arrival schedule at all)."""
    try:
        return [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected rates such as 2,4,8 (req/s) or inf, got {text!r}") from None


def _requests(text: str) -> int | str:
    return int(text) if text.strip().isdigit() else text.strip()


def _thinking(text: str) -> bool:
    if text not in ("on", "off"):
        raise argparse.ArgumentTypeError(f"expected on or off, got {text!r}")
    return text == "on"


def _floats(text: str) -> list[float]:
    try:
        return [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers such as 50,90,95,99, got {text!r}") from None


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _json_object(text: str) -> dict[str, Any]:
    import json

    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r} ({error.msg})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object such as '{{\"top_k\": 20}}', got {text!r}")
    return value


# vllm bench serve's --endpoint paths -> orch's endpoint names
ENDPOINT_PATHS = {"/v1/chat/completions": "chat", "/v1/completions": "completions"}


def _endpoint(text: str) -> str:
    """chat or completions, or vllm bench serve's path of either."""
    return ENDPOINT_PATHS.get(text.rstrip("/"), text)


VLLM_RANDOM_INPUT_LEN = 1024  # vllm bench serve's --random-input-len default


def _dataset_name(text: str) -> str:
    """vllm bench serve's --dataset-name: `random` is orch's synthetic prompts; orch reads no
    other dataset by name."""
    if text != "random":
        raise argparse.ArgumentTypeError(
            f"orch bench supports only --dataset-name random (synthetic prompts of --input-len "
            f"tokens), not {text!r}; for prompts of your own give --dataset FILE.jsonl (one "
            '{"prompt": ...} or {"messages": [...]} per line)')
    return text


# each objective of orchestrator/metrics.py -> its `slo.<name>_ms` field
GOODPUT_KEYS = {name: f"{name}_ms" for name in OBJECTIVES}


def _goodput(text: str) -> tuple[str, float]:
    """One `--goodput` objective, vllm bench serve's form: `ttft:500` (milliseconds)."""
    name, _, value = text.partition(":")
    if name not in GOODPUT_KEYS:
        raise argparse.ArgumentTypeError(
            f"expected {', '.join(f'{n}:MS' for n in GOODPUT_KEYS)}, got {text!r}")
    try:
        ms = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected milliseconds after {name}:, got {text!r}") from None
    if ms <= 0:
        raise argparse.ArgumentTypeError(f"an objective is a positive number of ms, got {text!r}")
    return GOODPUT_KEYS[name], ms


# Flags (the first name is shown, the others are aliases: vllm bench serve's names where
# the meaning is the same) -> the `bench:` field they set (dotted for nested sections), and
# how their text is read (None: a string the model validates, such as a duration). Help
# text and choices come from the model itself, so the command and the plan reference
# cannot disagree. --request-rate, --max-concurrency and --goodput are composed below.
FLAGS: list[tuple[tuple[str, ...], str, Callable[[str], Any] | None]] = [
    (("--endpoint",), "endpoint", _endpoint),
    (("--mode",), "mode", None),
    (("--concurrency",), "concurrency", _levels),
    (("--arrivals",), "arrivals", None),
    (("--burstiness",), "burstiness", float),
    (("--max-tokens", "--random-output-len"), "max_tokens", int),
    (("--num-prompts", "--requests"), "requests_per_level", _requests),
    (("--duration",), "duration", None),
    (("--num-warmups", "--warmup"), "warmup", int),
    (("--repeats",), "repeats", int),
    (("--prompt",), "prompt", None),
    (("--dataset",), "dataset", None),
    (("--input-len", "--random-input-len"), "input_len", int),
    (("--tokenizer",), "tokenizer", None),
    (("--prompt-prefix",), "prompt_prefix", None),
    (("--max-failed-fraction",), "max_failed_fraction", float),
    (("--temperature",), "temperature", float),
    (("--thinking",), "thinking", _thinking),
    (("--seed",), "seed", int),
    (("--timeout",), "request_timeout", None),
    (("--extra-body",), "extra_body", _json_object),
    (("--metric-percentiles",), "percentiles", _floats),
    (("--percentile-metrics",), "percentile_metrics", _names),
    (("--auto-threshold",), "auto.threshold", float),
    (("--auto-max-concurrency",), "auto.max_concurrency", int),
    (("--client-processes",), "client_processes", int),
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


def _shown_default(info: Any) -> str:
    default = info.get_default(call_default_factory=True)
    if default is None or (isinstance(default, dict | list) and not default):
        return ""
    if isinstance(default, list):
        return f" (default {','.join(f'{v:g}' if isinstance(v, float) else str(v) for v in default)})"
    return f" (default {default})"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", required=True, help="server root, e.g. http://127.0.0.1:8000")
    parser.add_argument("--model", help="model name (default: the first of /v1/models)")
    duration_group = parser.add_mutually_exclusive_group()
    for names, path, kind in FLAGS:
        info = _field(path)
        target = duration_group if path in ("requests_per_level", "duration") else parser
        options: dict[str, Any] = {"help": (info.description or "").rstrip(".") + _shown_default(info),
                                   "choices": _choices(info), "dest": _dest(names[0])}
        if kind is not None:
            options["type"] = kind
        if kind is _thinking:
            options["metavar"] = "{on,off}"
        if kind is _endpoint:
            options["help"] += " (or vllm bench serve's /v1/chat/completions, /v1/completions)"
        target.add_argument(*names, **options)
    parser.add_argument(
        "--request-rate", "--rate", type=_rates, metavar="RATES",
        help="open-loop levels at these request rates (req/s), e.g. 2,4,8; `inf` sends without "
             "a schedule: with --max-concurrency C, C in flight back to back (closed levels), "
             "without it every prompt at once (one batch of --num-prompts, default 1000)")
    parser.add_argument(
        "--max-concurrency", type=_counts, metavar="N[,N...]",
        help="cap on requests in flight, as in vllm bench serve: with a finite --request-rate "
             "the cap of those levels; otherwise closed levels at each N (as --concurrency)")
    parser.add_argument(
        "--goodput", type=_goodput, nargs="+", metavar="KEY:MS",
        help="objectives for goodput, e.g. --goodput ttft:500 tpot:50 e2el:10000 (ms; against "
             "a simulator in model time)")
    parser.add_argument("--ignore-eos", action="store_true", default=None,
                        help=_field("ignore_eos").description)
    parser.add_argument("--no-metrics", action="store_true", help="do not scrape the server's /metrics")
    parser.add_argument("--router-metrics", metavar="URL",
                        help="when --url is a vllm-router: its metrics port (--prometheus-port), "
                             "e.g. http://127.0.0.1:29000, so each level records the requests per "
                             "replica as the router counted them")
    parser.add_argument("--router-policy", metavar="NAME",
                        help="the router's --policy, named in the level records and the verdicts "
                             "(the router does not say it)")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY", metavar="NAME",
                        help="environment variable holding the API key (OPENAI_API_KEY)")
    parser.add_argument("--label", help="label stored in every result")
    parser.add_argument("--result-dir", "--out", dest="out", type=Path, metavar="DIR",
                        help="output folder (default: bench-results/<time>)")
    parser.add_argument("--dataset-name", type=_dataset_name, metavar="random",
                        help="as in vllm bench serve: random is synthetic prompts of --input-len "
                             f"tokens (default {VLLM_RANDOM_INPUT_LEN}); other datasets: --dataset")
    parser.add_argument("--save-result", action="store_true",
                        help="accepted as in vllm bench serve: orch always saves its results "
                             "(in --result-dir)")


def flag_of(loc: tuple[str, ...]) -> str:
    """The flag that set a `bench:` field, for an error about that field."""
    path = ".".join(part for part in loc if not part.isdigit())
    composed = {"rate": "--request-rate", "max_in_flight": "--max-concurrency",
                "concurrency": "--concurrency/--max-concurrency", "metrics_interval": "--no-metrics"}
    if path.startswith("slo."):
        return "--goodput"
    for names, field_path, _ in FLAGS:
        if field_path == path:
            return names[0]
    return composed.get(path, path)


VLLM_DEFAULT_PROMPTS = 1000  # vllm bench serve's --num-prompts


def bench_config(args: argparse.Namespace) -> dict[str, Any]:
    """The `bench:` section the arguments describe (only what was given); a combination
    that would leave a flag without effect is a usage error, never silently ignored."""
    from orchestrator.errors import UsageError

    data: dict[str, Any] = {}
    for names, path, _ in FLAGS:
        value = getattr(args, _dest(names[0]), None)
        if value is None:
            continue
        *sections, name = path.split(".")
        target = data
        for section in sections:
            target = target.setdefault(section, {})
        target[name] = value
    if getattr(args, "dataset_name", None) == "random":
        if "dataset" in data or "prompt" in data:
            raise UsageError("--dataset-name random makes synthetic prompts: give it without "
                             "--dataset and --prompt")
        data.setdefault("input_len", VLLM_RANDOM_INPUT_LEN)
    finite = _rate_levels(args, data)
    if not finite and ("arrivals" in data or "burstiness" in data):
        raise UsageError("--arrivals and --burstiness shape open-loop arrivals: give a finite "
                         "--request-rate too")
    if "auto" in data and data.get("concurrency") != "auto":
        raise UsageError("--auto-threshold and --auto-max-concurrency tune --concurrency auto")
    if args.goodput:
        data["slo"] = dict(args.goodput)
    if args.ignore_eos:
        data["ignore_eos"] = True
    if args.no_metrics:
        data["metrics_interval"] = None
    return data


def _rate_levels(args: argparse.Namespace, data: dict[str, Any]) -> list[float]:
    """vllm bench serve's --request-rate and --max-concurrency as levels in `data`; returns
    the finite rates."""
    from orchestrator.errors import UsageError

    rates: list[float] | None = args.request_rate
    caps: list[int] | None = args.max_concurrency
    if caps is not None and "concurrency" in data:
        raise UsageError("--max-concurrency and --concurrency both give closed levels: use one")
    finite = [r for r in rates or [] if r != float("inf")]
    if rates is not None and finite and len(finite) != len(rates):
        raise UsageError("--request-rate: inf cannot be mixed with finite rates in one sweep")
    if finite:
        data["rate"] = finite
        if caps is not None:
            if len(caps) != 1:
                raise UsageError("--max-concurrency with --request-rate: one cap for the rate levels")
            data["max_in_flight"] = caps[0]
    elif caps is not None:  # no schedule, C in flight: closed levels
        data["concurrency"] = caps
    elif rates is not None:  # inf and no cap: every prompt at once, one batch
        prompts = data.get("requests_per_level", VLLM_DEFAULT_PROMPTS)
        if not isinstance(prompts, int):
            raise UsageError("--request-rate inf without --max-concurrency sends --num-prompts "
                             "at once: give it as a count")
        data.update(mode="batch", concurrency=[prompts], requests_per_level=prompts)
    return finite


def _problem(item: dict[str, Any]) -> str:
    """One validation error, at the flag it names: a model validator's own (its `at`)
    with its message alone."""
    cause = (item.get("ctx") or {}).get("error")
    at = tuple(getattr(cause, "at", ()) or ())
    message = str(cause) if at else item["msg"]
    return f"{flag_of(tuple(str(p) for p in (*item['loc'], *at)))}: {message}"


def _config(args: argparse.Namespace) -> Bench:
    """The arguments' `bench:` section, validated; a bad value names its flag."""
    from pydantic import ValidationError

    from orchestrator.errors import UsageError
    from orchestrator.plan.models import Bench

    try:
        return Bench.model_validate(bench_config(args))
    except ValidationError as error:
        problems = "; ".join(_problem(dict(e)) for e in error.errors())
        raise UsageError(f"invalid benchmark options: {problems}") from None


def _api_key(args: argparse.Namespace) -> str | None:
    """The key in --api-key-env's variable, registered for masking; one that cannot go in a
    header is a usage error."""
    from orchestrator import masking
    from orchestrator.errors import UsageError
    from orchestrator.plan.secrets import header_problem

    api_key = os.environ.get(args.api_key_env) or None
    if api_key:
        masking.register(api_key)
        if problem := header_problem(api_key):
            raise UsageError(f"--api-key-env {args.api_key_env}: the API key in "
                             f"{args.api_key_env} cannot be sent: {problem}")
    return api_key


def run(args: argparse.Namespace) -> int:
    from orchestrator import masking
    from orchestrator.bench.sweep import run_sweep
    from orchestrator.console import make_console, shown
    from orchestrator.limits.verdicts import Judge, plateau_lines
    from orchestrator.output import Reporter
    from orchestrator.runs.layout import refuse_inside_run

    config = _config(args)
    masking.register_url(args.url)
    if args.router_metrics:
        masking.register_url(args.router_metrics)
    api_key = _api_key(args)
    out = args.out or Path("bench-results") / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    refuse_inside_run(out, "--result-dir")  # a run's own bench/ is its apply's record
    console = make_console()
    labels = {"label": args.label} if args.label else {}
    console.print(f"benchmarking {shown(masking.mask(args.url), markup=True)}, results in "
                  f"{shown(str(out), markup=True)}")
    reporter = Reporter(console)  # the levels' lines, and their progress on a terminal
    with reporter.live(auto_refresh=False):
        result = run_sweep(
            config,
            base_url=args.url,
            model=args.model,
            api_key=api_key,
            out_dir=out,
            emit=reporter,
            labels=labels,
            judge=Judge(threshold=config.auto.threshold),  # no plan: the server's figures alone
            router_metrics=args.router_metrics,
            router_policy=args.router_policy,
        )
    console.print(result.render(width=console.width))
    plateau = result.summary.get("plateau")
    for line in plateau_lines(plateau, "YOUR-PLAN.yaml") if isinstance(plateau, dict) else []:
        console.print(masking.mask(line), markup=False, soft_wrap=True)
    if result.stopped == "interrupted":
        console.print("interrupted: finished levels are kept; the last one is marked partial")
        return 128 + (result.signum or 2)
    verdict = result.verdict(config.max_failed_fraction)
    if verdict is not None:
        console.print("[red]error:[/red] " + shown(verdict, markup=True), soft_wrap=True)
        return 1
    return 0
