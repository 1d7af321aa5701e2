"""Preflight: what would make the launch fail, caught before a 13-minute start-up finds it.

Pure: `preflight(plan, facts)` reads the probe's typed facts and returns findings; nothing
here talks to a host. What it reads, each check skipped when its fact is missing: the
service's port and who holds it (`facts.service`), the GPUs nvidia-smi lists
(`facts.host.gpus`, None without nvidia-smi) and the venv's distributions (`facts.venv`);
then the engine's own rules (`Engine.preflight`: vLLM's flags, names and variables checked
against the installed vLLM, engines/vllm/preflight.py).

Errors stop the launch; warnings are shown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from orchestrator import masking
from orchestrator.engines import engine
from orchestrator.engines.base import Engine
from orchestrator.errors import PreflightError
from orchestrator.facts import Facts, Gpu
from orchestrator.packages import family_mismatches
from orchestrator.plan.models import ArgValue, Plan
from orchestrator.plan.replicas import gpus_needed
from orchestrator.plan.variables import ENV_REF as SECRET_REF
from orchestrator.steps.base import Finding


def preflight(plan: Plan, facts: Facts) -> list[Finding]:
    """Every problem the facts reveal, errors first."""
    if plan.service is None:
        return []
    found: list[Finding] = []
    found += _port_findings(plan, facts)
    found += _fleet_gpu_findings(plan, facts) or _gpu_findings(plan, facts)
    found += _gpu_busy_findings(plan, facts)
    found += _family_findings(plan, facts)
    found += engine(plan.service.engine).preflight(plan, facts)
    return sorted(found, key=lambda f: f.level != "error")


def raise_on_errors(findings: list[Finding]) -> None:
    """A PreflightError listing every error finding (with its fix), if there is one."""
    errors = [f for f in findings if f.level == "error"]
    if not errors:
        return
    lines = [f"preflight found {len(errors)} problem(s) that would make the launch fail:"]
    for finding in errors:
        lines.append(f"  - {finding.message}")
        if finding.fix:
            lines.append(f"    fix: {finding.fix}")
    raise PreflightError("\n".join(lines))


def _port_findings(plan: Plan, facts: Facts) -> list[Finding]:
    assert plan.service is not None
    found = facts.service.port if facts.service is not None else None
    if found is None or not found.listening or found.number != plan.service.port:
        return []
    port = found.number
    own: set[int | None] = set()
    if facts.service is not None:
        own = {facts.service.pid}
        if facts.service.other is not None:  # the same service from another venv: replaced
            own.add(facts.service.other.pid)  # (a holder of this very port is that one)
        own -= {None}
    pid = found.holder.pid if found.holder is not None else None
    if pid is not None and pid in own:
        return []
    command = _display_cmdline(found.holder.cmdline if found.holder is not None else ())
    who = f"pid {pid}" if pid is not None else "a process orch cannot see (another user's?)"
    if command:
        who += f": {command}"
    if pid is None and own:
        return [
            Finding(
                "warning",
                f"port {port} is held by {who}; it may be the running service itself",
                "check with `ss -ltnp` on the host",
            )
        ]
    return [
        Finding(
            "error",
            f"port {port} (service.port) is already in use by {who}",
            "stop that process, or set service.port to a free port",
        )
    ]


def _display_cmdline(words: Sequence[str]) -> str:
    shown: list[str] = []
    hide_next = False
    for word in words:
        if hide_next:
            shown.append(masking.MASK)
            hide_next = False
        elif word == "--api-key":
            shown.append(word)
            hide_next = True
        elif word.startswith("--api-key="):
            shown.append(f"--api-key={masking.MASK}")
        else:
            shown.append(word)
    text = " ".join(shown)
    return masking.mask(text if len(text) <= 200 else text[:197] + "...")


def required_gpus(server: Engine, args: Mapping[str, ArgValue], extra_args: Sequence[str] = ()) -> int:
    """GPUs one host needs, in the engine's own flags (engines/layout.py: tensor x pipeline
    split over the nodes, times the local data parallel replicas)."""
    return server.layout(args, extra_args).gpus_per_host


def visible_gpus(gpus: Sequence[Gpu], cuda_visible_devices: str | None) -> int:
    """How many GPUs CUDA will show: all of them, or the CUDA_VISIBLE_DEVICES entries up to the
    first one that names no GPU (CUDA ignores the rest)."""
    if cuda_visible_devices is None:
        return len(gpus)
    indexes = {str(g.index) for g in gpus}
    count = 0
    for entry in (e.strip() for e in cuda_visible_devices.split(",")):
        if entry.startswith(("GPU-", "MIG-")):
            count += 1  # a UUID: nvidia-smi facts carry no UUIDs to compare with
        elif entry in indexes:
            count += 1
        else:
            break
    return min(count, len(gpus))


def _gpu_findings(plan: Plan, facts: Facts) -> list[Finding]:
    assert plan.service is not None
    gpus, server = facts.host.gpus, engine(plan.service.engine)
    if not server.uses_gpus or gpus is None:
        return []
    cvd = plan.env.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None and SECRET_REF.search(cvd):
        cvd = None
    visible = visible_gpus(gpus, cvd)
    needed = required_gpus(server, plan.service.args, plan.service.extra_args)
    if visible >= needed:
        return []
    where = f"CUDA_VISIBLE_DEVICES={cvd!r} leaves {visible}" if cvd is not None else f"{visible}"
    return [
        Finding(
            "error",
            f"the service needs {needed} GPUs (tensor x pipeline x data parallel) but {where} "
            f"of the host's {len(gpus)} GPUs visible",
            f"lower {_sizes(server)}, or list more devices in env: CUDA_VISIBLE_DEVICES",
        )
    ]


def _fleet_gpu_findings(plan: Plan, facts: Facts) -> list[Finding]:
    """A fleet's host must hold every replica's GPU set (`replicas.per_host x gpus`)."""
    assert plan.service is not None
    gpus, needed, server = facts.host.gpus, gpus_needed(plan), engine(plan.service.engine)
    spec = plan.replicas
    if not server.uses_gpus or needed is None or spec is None or spec.gpus is None:
        return []
    layout = required_gpus(server, plan.service.args, plan.service.extra_args)
    if layout > spec.gpus:
        return [Finding(
            "error", f"each replica has {spec.gpus} GPUs (replicas.gpus) but the service needs "
            f"{layout} (tensor x pipeline x data parallel)",
            f"set replicas.gpus to {layout}, or lower {_sizes(server)}")]
    if gpus is None or len(gpus) >= needed:
        return []
    return [Finding(
        "error", f"the fleet puts {spec.per_host} replica(s) of {spec.gpus} GPUs on this host "
        f"(replicas.per_host x replicas.gpus = {needed}) but it has {len(gpus)} GPUs",
        f"lower replicas.per_host or replicas.gpus to fit {len(gpus)} GPUs, or use hosts "
        "with more")]


def _sizes(server: Engine) -> str:
    """The engine's parallel size flags, as a plan sets them."""
    named = [server.flags.tensor, server.flags.pipeline, server.flags.data]
    return " or ".join(f"service.args.{n}" for n in named if n) or "the parallel sizes"


def _gpu_busy_findings(plan: Plan, facts: Facts) -> list[Finding]:
    """GPU memory held on the plan's GPUs by processes that are not this service's (a killed
    API server's engine, another server): the start would fail for lack of GPU memory."""
    assert plan.service is not None
    gpus, apps = facts.host.gpus, facts.host.gpu_apps
    if not engine(plan.service.engine).uses_gpus or gpus is None or not apps:
        return []
    own: set[int | None] = set()
    if facts.service is not None:  # its own group is stopped before it starts again
        own = {facts.service.pid}
        if facts.service.other is not None:
            own.add(facts.service.other.pid)
    own -= {None}
    cvd = plan.env.get("CUDA_VISIBLE_DEVICES")
    shown = gpus
    if cvd is not None and not SECRET_REF.search(cvd):  # only those the server will see
        wanted = {e.strip() for e in cvd.split(",")}
        shown = tuple(g for g in gpus if str(g.index) in wanted)
    index = {(g.pci_bus_id or "").lower(): g.index for g in shown}
    busy = [a for a in apps if a.bus_id.lower() in index and a.pgid not in own and a.pid not in own]
    if not busy:
        return []
    named = ", ".join(
        f"pid {a.pid} {_display_cmdline(a.cmdline[:1]) or '?'} ({a.used_mib} MiB on GPU "
        f"{index[a.bus_id.lower()]})" for a in busy[:6])
    return [Finding(
        "error", f"GPU memory of the plan's GPUs is held by {len(busy)} process(es) that are not "
        f"this service: {named}; the server would fail for lack of GPU memory",
        "stop them (a leftover of another server: `orch status` of its plan names it), or "
        "list other GPUs in env: CUDA_VISIBLE_DEVICES")]


def _family_findings(plan: Plan, facts: Facts) -> list[Finding]:
    """A family out of step that no pin settles (the python step aligns the others)."""
    if facts.venv is None:
        return []
    installed = facts.venv.installed()
    return [
        Finding("error", mismatch.describe(),
                "pin every member of the family to one version in install.packages")
        for mismatch in family_mismatches(installed, plan.install.families, plan.install.pins())
        if mismatch.target is None
    ]
