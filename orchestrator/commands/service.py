"""`orch status|logs|stop|restart PLAN`: look after the service a plan deployed.

Parsing and printing only: what is asked of the host lives in `service/control.py`;
`restart` is an apply with a forced restart (no smoke checks, no benchmark).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.commands.plan_options import add_forks_option, add_plan_options, limit_hosts

if TYPE_CHECKING:  # imported for real only inside the commands (start-up time)
    from rich.console import Console

    from orchestrator.inventory import Inventory
    from orchestrator.plan.models import Plan
    from orchestrator.service.control import ServiceHandle, ServiceStatus
    from orchestrator.tables import TableData
    from orchestrator.transport.base import Transport

# The library is imported inside the functions that use it, not here: orch imports this
# module to build its parser, and start-up time matters (cli.py).


def configure(parser: argparse.ArgumentParser) -> None:
    add_plan_options(parser)
    command = parser.prog.rsplit(" ", 1)[-1]
    if command == "logs":
        parser.add_argument("-n", "--lines", type=int, default=100, help="lines to show (100)")
        parser.add_argument("--follow", action="store_true", help="keep printing new lines")
        parser.add_argument("--unit", choices=("server", "ray"), default="server",
                            help="a multi-node server's process to show: the server (default) "
                                 "or a node's Ray node")
    if command == "status":
        parser.add_argument("--json", action="store_true", help="print the status as JSON")
    if command == "stop":  # it takes the service's lock, as an apply of the service does
        parser.add_argument("--wait", action="store_true",
                            help="wait while an apply of the service holds its lock (default: "
                                 "fail at once, naming it)")
        parser.add_argument("--break-lock", action="store_true",
                            help="stop the service even while an apply of it holds its lock "
                                 "(that apply then stops, saying so)")
    if command == "restart":
        parser.add_argument("--runs-dir", type=Path, default=Path("runs"),
                            help="where the restart's run folder goes (default ./runs)")
        add_forks_option(parser)
    parser.set_defaults(service_command=command)


def _restart(args: argparse.Namespace, limit: list[str]) -> int:
    """`orch restart`: an apply that relaunches the service and stops before smoke and bench."""
    from orchestrator.apply.run import ApplyOptions, execute

    return execute(ApplyOptions(
        plan=args.plan, inventory=args.inventory, overlays=list(args.overlay),
        sets=list(args.sets), limit=limit, skip={"smoke", "bench"}, restart=True,
        runs_dir=args.runs_dir, forks=args.forks,
    ))


def run(args: argparse.Namespace) -> int:
    limit = limit_hosts(args)
    if args.service_command == "restart":
        return _restart(args, limit)
    from orchestrator.console import make_console
    from orchestrator.errors import OrchError, PlanError
    from orchestrator.inventory import load_inventory
    from orchestrator.inventory.limit import narrow
    from orchestrator.plan.loader import load_plan
    from orchestrator.service import control
    from orchestrator.transport.connect import connect

    plan = load_plan(args.plan, args.overlay, args.sets).plan
    if plan.service is None or plan.python is None:
        raise PlanError(f"{args.plan} has no service to look after", field="service")
    inventory = load_inventory(args.inventory)
    hosts = narrow(inventory, inventory.select(plan.hosts), limit)
    targets = _targets(plan, inventory.select(plan.hosts), hosts, args.service_command,
                       getattr(args, "unit", "server"))
    plans: dict[str, Plan | None] = {}  # a fleet: each replica's plan; None: the router's
    if plan.router is not None:
        inventory, targets, plans = _fleet_targets(plan, hosts, inventory, args.service_command)
    console = make_console()
    action = args.service_command
    api_key, key_missing = _status_key(plan) if action == "status" else (None, None)
    rows: list[ServiceStatus] = []
    never_ran: list[str] = []
    for host, unit, serves in targets:
        with connect(host, inventory) as transport:
            handle = control.ServiceHandle.look(
                transport, _target_plan(plan, plans, host, transport), unit, serves=serves)
            if action == "status":
                rows.append(_status_row(handle, inventory, api_key, key_missing,
                                        router=plans.get(host, plan) is None))
            elif action == "logs":
                label = f"{host}: " if len(targets) > 1 else ""
                printed = _print_log(handle, args, label)
                if printed is None:
                    never_ran.append(f"the service {handle.paths.name} has not run on {host} "
                                     f"(no {handle.paths.log})")
                elif not printed:
                    return 0  # Ctrl-C is how a user ends --follow
            elif action == "stop":
                _stop(handle, args, console)
    if action == "status":
        return _print_status(rows, args.json, console)
    if never_ran:  # said after the logs there are, not instead of them
        raise OrchError("no log: " + "; ".join(never_ran),
                        hint="`orch apply` starts the service; `orch status` shows where it runs")
    return 0


def _fleet_targets(plan: Plan, hosts: list[str], inventory: Inventory, action: str,
                   ) -> tuple[Inventory, list[tuple[str, str | None, bool]], dict[str, Plan | None]]:
    """A fleet's replicas, each a host of its own, and its router: one line each (stop:
    the router first, so that it routes to no replica being stopped)."""
    from orchestrator.apply.fleet import Fleet
    from orchestrator.plan.replicas import replica_plan

    fleet = Fleet.of(plan, hosts, inventory)
    plans: dict[str, Plan | None] = {r.id: replica_plan(plan, r) for r in fleet.replicas}
    plans[fleet.router.name] = None
    replicas: list[tuple[str, str | None, bool]] = [(r.id, None, True) for r in fleet.replicas]
    router: list[tuple[str, str | None, bool]] = [(fleet.router.name, None, True)]
    targets = [*router, *replicas] if action == "stop" else [*replicas, *router]
    reached: Inventory = fleet.inventory
    return reached, targets, plans


def _status_row(handle: ServiceHandle, inventory: Inventory, api_key: str | None,
                key_missing: str | None, *, router: bool) -> ServiceStatus:
    """The service's line; a fleet's running router with the workers it lists."""
    from orchestrator.service import control

    row = control.status(handle, inventory, api_key, key_missing=key_missing)
    if router and row.state == "running":
        row.workers = _router_workers(handle, inventory)
    return row


def _router_workers(handle: ServiceHandle, inventory: Inventory) -> list[str] | None:
    """The workers a fleet's running router lists (None: it did not answer)."""
    from orchestrator.errors import OrchError
    from orchestrator.router_client import RouterClient
    from orchestrator.service import control

    try:
        with control.reach(handle.transport, inventory, handle.plan) as url, \
                RouterClient(url, timeout=5) as client:
            return sorted(client.workers())
    except OrchError:
        return None


def _target_plan(plan: Plan, plans: dict[str, Plan | None], host: str,
                 transport: Transport) -> Plan:
    """The plan of what runs as `host`: the plan's own, a replica's, or the router's."""
    if host not in plans:
        return plan
    found = plans[host]
    if found is not None:
        return found
    from orchestrator.fleet.router_service import router_plan, router_venv

    assert plan.router is not None
    return router_plan(plan, router_venv(plan.router, transport), host)


def _stop(handle: ServiceHandle, args: argparse.Namespace, console: Console) -> None:
    """Stop the service while holding its lock: never under an apply of it (which would
    relaunch or replace it), unless --break-lock; an apply started meanwhile waits or fails
    naming this stop."""
    from orchestrator.console import shown
    from orchestrator.holder import Holder
    from orchestrator.service import control
    from orchestrator.service.lock import HostLock, service_lock_path

    assert handle.plan.service is not None
    host, name = handle.transport.host, handle.paths.name

    def say(line: str) -> None:
        console.print(f"{host}: {shown(line, markup=True)}", soft_wrap=True)

    lock = HostLock(handle.transport, (service_lock_path(handle.plan.service.name, host),),
                    Holder.me(None, "stop"), wait=args.wait, break_lock=args.break_lock,
                    on_wait=lambda who: say(f"waiting for {who}"), on_takeover=say)
    try:
        lock.acquire()
        was = control.stop(handle)
    finally:
        lock.release()
    say(f"stopped {name}" if was else f"{name} was not running")
    found = handle.found
    if found is not None and found.registry_problem and handle.unit is None:
        from orchestrator.service.step import registry_note

        say(registry_note(handle.paths, found))


def _status_key(plan: Plan) -> tuple[str | None, str | None]:
    """The API key status asks /v1 with (it answers 401 without), or why there is none."""
    from orchestrator.errors import SecretError
    from orchestrator.plan.secrets import resolve_secrets, substitute

    assert plan.service is not None
    if not plan.service.api_key:
        return None, None
    try:
        return substitute(plan.service.api_key, resolve_secrets(plan)), None
    except SecretError:
        return None, "set the API key's variable to list"


def _print_log(handle: ServiceHandle, args: argparse.Namespace, label: str) -> bool | None:
    """The log's tail, then (--follow) what it grows by; False when Ctrl-C ended --follow,
    None when there is no log (nothing to follow either). The log is the server's text, not
    orch's: its terminal controls are shown escaped (`shown`), on a terminal and in a pipe."""
    import codecs

    from orchestrator.console import shown
    from orchestrator.errors import Interrupted
    from orchestrator.service import control

    try:  # from the tail on: Ctrl-C while it prints ends --follow the same way
        tail = control.log_tail(handle, args.lines)
        if tail is None:
            return None
        for line in tail.text.removesuffix("\n").split("\n") if tail.text else []:
            sys.stdout.write(f"{label}{shown(line)}\n")
        sys.stdout.flush()
        text = codecs.getincrementaldecoder("utf-8")("replace")  # a character cut by a poll
        for chunk in control.follow_log(handle, tail) if args.follow else ():
            if isinstance(chunk, control.LogReplaced):
                sys.stderr.write(f"{label}orch: {chunk.log} was replaced or cut (a restart?): "
                                 "following the new log from its start\n")
                sys.stderr.flush()
                text.reset()
                continue
            sys.stdout.write(shown(text.decode(chunk)))
            sys.stdout.flush()
    except KeyboardInterrupt as stopped:
        if isinstance(stopped, Interrupted) or not args.follow:  # SIGTERM, SIGHUP
            raise
        return False
    return True


def _print_status(rows: list[ServiceStatus], as_json: bool, console: Console) -> int:
    from orchestrator.console import shown
    from orchestrator.exit_codes import ExitCode
    from orchestrator.tables import to_rich

    if as_json:
        import json

        # JSON only: an apply in progress is each row's `apply`, not a line after them
        print(json.dumps([row.to_json() for row in rows], indent=2))
    else:
        console.print(to_rich(status_table(rows), console.width))
        for line, warn in kernel_lines(rows):
            console.print(line, style="yellow" if warn else None, markup=False, soft_wrap=True)
        for row in rows:
            if row.apply:
                console.print(f"{row.host}: an apply is in progress: "
                              f"{shown(row.apply, markup=True)}", soft_wrap=True)
            if row.registry:
                console.print(f"{row.host}: {shown(row.registry, markup=True)}", style="yellow",
                              soft_wrap=True)
            if row.workers is not None:
                console.print(f"{row.host}: {len(row.workers)} worker(s) registered: "
                              f"{', '.join(row.workers) or '-'}", markup=False, soft_wrap=True)
    return ExitCode.OK if all(row.healthy for row in rows) else ExitCode.UNHEALTHY


def _targets(plan: Plan, every: list[str], hosts: list[str], action: str,
             unit: str) -> list[tuple[str, str | None, bool]]:
    """(host, unit, has an API) to look at, in order: one server per host, or for a
    multi-node server each node's processes (stop: in the order the group needs)."""
    assert plan.service is not None
    nodes = plan.service.nodes
    if nodes is None:
        return [(host, None, True) for host in hosts]
    from orchestrator.cluster.topology import head_of, stop_order, units

    listed = (stop_order if action == "stop" else units)(nodes.backend, every, nodes.head)
    head = head_of(every, nodes.head)
    if action == "logs":
        wanted = None if unit == "server" else unit
        listed = [(h, u) for h, u in listed if u == wanted]
    return [(h, u, h == head) for h, u in listed if h in hosts]


def kernel_lines(rows: list[ServiceStatus]) -> list[tuple[str, bool]]:
    """Under the table: the kernels each running server's start-up chose (its startup.json on
    the host), and each fallback vLLM warned about (True: a warning)."""
    from orchestrator.engines.kernels import describe, fallbacks_of, short_fallback

    lines: list[tuple[str, bool]] = []
    for row in rows:
        if not row.kernels:
            continue
        where = row.host if row.unit == "server" else f"{row.host} ({row.unit})"
        lines.append((f"{where}: kernels: {describe(row.kernels, fallbacks=False)}", False))
        lines += [(f"{where}: kernel fallback: {short_fallback(f)}", True)
                  for f in fallbacks_of(row.kernels)]
    return lines


def status_table(rows: list[ServiceStatus]) -> TableData:
    from orchestrator.tables import Column, TableData

    clustered = any(r.unit != "server" for r in rows)
    table = TableData("service status", [
        Column("host"), *([Column("unit", priority=1)] if clustered else []), Column("state"), Column("backend", priority=2), Column("pid", "right", priority=2),
        Column("uptime", "right", priority=2), Column("health", priority=1),
        Column("served", priority=1, prose=True), Column("vLLM", priority=1),
        Column("pins", prose=True),
    ])
    for row in rows:
        table.add([row.host, *([row.unit] if clustered else []), row.state, row.backend, str(row.pid or "-"),
                   f"{row.uptime_s}s" if row.uptime_s is not None else "-", row.health,
                   ", ".join(row.served) or "-", row.vllm_version or "-", row.pins])
    return table
