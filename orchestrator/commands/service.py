"""`orch status|logs|stop|restart PLAN`: look after the service a plan deployed."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported for real only inside the commands (start-up time)
    from rich.console import Console
    from rich.table import Table

    from orchestrator.inventory import Inventory
    from orchestrator.plan.models import Plan
    from orchestrator.probe import Facts
    from orchestrator.service.backends import Backend, ServicePaths
    from orchestrator.transport.base import Transport
    from orchestrator.transport.command import Command


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("plan", type=Path, help="plan file (YAML)")
    parser.add_argument("-i", "--inventory", type=Path, help="inventory file")
    parser.add_argument("--limit", action="append", default=[], metavar="HOST",
                        help="only these hosts (repeat, or comma-separated)")
    parser.add_argument("-f", "--overlay", action="append", type=Path, default=[], metavar="FILE")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="PATH=VALUE")
    command = parser.prog.rsplit(" ", 1)[-1]
    if command == "logs":
        parser.add_argument("-n", "--lines", type=int, default=100, help="lines to show (100)")
        parser.add_argument("--follow", action="store_true", help="keep printing new lines")
    if command == "status":
        parser.add_argument("--json", action="store_true", help="print the status as JSON")
    if command == "restart":
        parser.add_argument("--runs-dir", type=Path, default=Path("runs"),
                            help="where the restart's run folder goes (default ./runs)")
    parser.set_defaults(service_command=command)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from orchestrator.errors import PlanError
    from orchestrator.inventory import load_inventory
    from orchestrator.plan.loader import load_plan
    from orchestrator.transport.connect import connect

    if args.service_command == "restart":
        # The apply path: converge, preflight, a fresh env file, a forced restart, readiness
        # with phases and diagnosis, and a run folder; no smoke checks or benchmark.
        from orchestrator.apply import ApplyOptions, execute

        return execute(ApplyOptions(
            plan=args.plan, inventory=args.inventory, overlays=list(args.overlay),
            sets=list(args.sets), limit=[h for item in args.limit for h in item.split(",") if h],
            skip={"smoke", "bench"}, restart=True, runs_dir=args.runs_dir,
        ))
    loaded = load_plan(args.plan, args.overlay, args.sets)
    plan = loaded.plan
    if plan.service is None or plan.python is None:
        raise PlanError(f"{args.plan} has no service to look after", field="service")
    inventory = load_inventory(args.inventory)
    limit = [h for item in args.limit for h in item.split(",") if h]
    hosts = inventory.select(plan.hosts, limit or None)
    console = Console(highlight=False)
    action = args.service_command
    rows: list[dict[str, Any]] = []
    for host in hosts:
        with connect(host, inventory) as transport:
            if action == "status":
                rows.append(_status(transport, plan, inventory))
            elif action == "logs":
                _logs(transport, plan, console, lines=args.lines, follow=args.follow,
                      prefix=len(hosts) > 1)
            elif action == "stop":
                console.print(f"{host}: {_stop(transport, plan)}")
    if action == "status":
        if getattr(args, "json", False):
            import json

            print(json.dumps(rows, indent=2))
        else:
            console.print(_status_table(rows))
        return 0 if all(r["state"] == "running" and r["health"] == "200" for r in rows) else 3
    return 0


def _paths_and_backend(transport: Transport, plan: Plan) -> tuple[ServicePaths, Backend, Facts]:
    assert plan.service is not None and plan.python is not None  # checked by run()
    from orchestrator.probe import ProbeRequest, probe
    from orchestrator.service.backends import ServicePaths
    from orchestrator.steps.service import choose_backend, recorded_backend_of, service_request

    paths = ServicePaths.for_venv(plan.python.venv, plan.service.name)
    facts = probe(transport, ProbeRequest(venv=plan.python.venv,
                                          service=service_request(paths, plan.service)))
    # What the running service was started with wins over what the plan says now.
    backend = recorded_backend_of(facts) or choose_backend(plan.service.backend, facts.host)
    return paths, backend, facts


def _status(transport: Transport, plan: Plan, inventory: Inventory) -> dict[str, Any]:
    assert plan.service is not None
    import httpx

    from orchestrator.lifecycle import reach
    from orchestrator.steps.python_env import same_version

    _, backend, facts = _paths_and_backend(transport, plan)
    service = facts.service or {}
    process = service.get("process")
    row: dict[str, Any] = {
        "host": transport.host, "backend": backend, "state": "stopped", "pid": None,
        "uptime_s": None, "health": "-", "served": [], "vllm_version": None, "pins": "-",
    }
    if process:
        row.update(state="running", pid=process["pid"], uptime_s=round(process["uptime"] or 0))
    elif service.get("pid"):
        row["state"] = "dead"
    if facts.venv is not None and not facts.venv.exists:
        row["pins"] = f"no venv at {plan.python.venv if plan.python else '?'}"
    elif facts.venv is not None:
        installed = {k: d.version for k, d in facts.venv.distributions.items()}
        drift = [f"{n} {installed.get(n, 'missing')} (pin {v})" for n, v in plan.install.pins().items()
                 if n not in installed or not same_version(installed[n], v)]
        row["pins"] = "ok" if not drift else "; ".join(drift)
    if process:
        headers = {}
        if plan.service.api_key:  # /v1 answers 401 without it
            from orchestrator.errors import SecretError
            from orchestrator.plan.secrets import resolve_secrets, substitute

            try:
                headers["Authorization"] = "Bearer " + substitute(plan.service.api_key,
                                                                  resolve_secrets(plan))
            except SecretError:
                row["served"] = ["(set the API key's variable to list)"]
        with reach(transport, inventory, plan) as base_url, httpx.Client(timeout=5) as client:
            try:
                health = client.get(f"{base_url}/health")
                row["health"] = str(health.status_code)
                models = client.get(f"{base_url}/v1/models", headers=headers)
                if models.status_code == 200:
                    row["served"] = [m["id"] for m in models.json().get("data", [])]
                version = client.get(f"{base_url}/version")
                if version.status_code == 200:
                    row["vllm_version"] = version.json().get("version")
            except (httpx.HTTPError, ValueError) as error:
                row["health"] = type(error).__name__
    return row


def _status_table(rows: list[dict[str, Any]]) -> Table:
    from rich.table import Table

    table = Table(title="service status", title_justify="left")
    for column in ("host", "state", "backend", "pid", "uptime", "health", "served", "vLLM", "pins"):
        table.add_column(column, overflow="fold")  # never cut a version or a pin drift
    for row in rows:
        uptime = f"{row['uptime_s']}s" if row["uptime_s"] is not None else "-"
        style = {"running": "green", "dead": "bold red"}.get(row["state"], "yellow")
        table.add_row(row["host"], f"[{style}]{row['state']}[/]", row["backend"], str(row["pid"] or "-"),
                      uptime, row["health"], ", ".join(row["served"]) or "-",
                      row["vllm_version"] or "-", row["pins"])
    return table


def _logs(transport: Transport, plan: Plan, console: Console, *, lines: int, follow: bool,
          prefix: bool) -> None:
    from orchestrator.service.backends import tail_command, watch_command
    from orchestrator.service.readiness import parse_watch

    paths, backend, _ = _paths_and_backend(transport, plan)
    label = f"{transport.host}: " if prefix else ""
    text = transport.run(tail_command(paths, lines), check=False).stdout
    for line in text.splitlines():
        sys.stdout.write(f"{label}{line}\n")
    sys.stdout.flush()
    if not follow:
        return
    size = transport.run(_size(paths.log), check=False).stdout.strip()
    offset = int(size) if size.isdigit() else 0
    try:
        while True:
            time.sleep(1.0)
            _, chunk = parse_watch(transport.run(watch_command(backend, paths, offset),
                                                 check=False).stdout)
            offset += len(chunk)
            if chunk:
                sys.stdout.buffer.write(chunk)
                sys.stdout.flush()
    except KeyboardInterrupt:
        return


def _size(path: str) -> Command:
    from orchestrator.transport.command import Command, Raw

    return Command("stat", "-c", "%s", path, Raw("2>/dev/null"), Raw("||"), "echo", "0")


def _stop(transport: Transport, plan: Plan) -> str:
    from orchestrator.service.backends import stop_command

    assert plan.service is not None
    paths, backend, facts = _paths_and_backend(transport, plan)
    was_running = (facts.service or {}).get("process") is not None or backend == "systemd"
    transport.run(stop_command(backend, paths), timeout=120)
    return f"stopped {plan.service.name}" if was_running else f"{plan.service.name} was not running"
