"""The launch spec: the exact command line and environment of the model server, from the plan.

`render_launch` turns a plan's `service:` and `env:` sections into a `LaunchSpec` that both
backends (systemd unit, detached process) start verbatim, so what runs never depends on the
backend. Two rules hold by construction:

- no secret ever reaches the command line: the API key travels in the engine's variable
  (`Engine.api_key_env`: `VLLM_API_KEY` for vLLM and the simulator) and a `${env:NAME}`
  reference anywhere in the argv is a plan error;
- the spec keeps secret references as `${env:NAME}`; only `render_env_file` substitutes the
  values, into the text of a mode-0600 environment file.

`spec_hash` identifies the spec for "restart only on change". It covers the argv, the working
directory and the environment with secret *references* (names), never secret values: rotating
a secret does not change the hash. Whoever writes the environment file compares that file's
digest instead (it is a config file the service depends on).
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

from orchestrator import masking
from orchestrator.engines import engine
from orchestrator.engines.base import Engine
from orchestrator.engines.compile_cache import cache_key, cache_root
from orchestrator.errors import PlanError, SecretError
from orchestrator.names import flag_name
from orchestrator.plan.models import ArgValue, Plan, ServiceSpec
from orchestrator.plan.variables import ENV_REF as SECRET_REF
from orchestrator.transport.command import quote_env_value

# Names whose values are secret even when the plan writes them literally (and the engine's
# API-key variable).
_ALWAYS_SECRET = frozenset({"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"})
_HASH_FORMAT = "orch-launch/1"


@dataclass(frozen=True)
class LaunchSpec:
    """What the service runs: argv, environment (secrets as `${env:NAME}`), where and on what port."""

    engine: str
    model: str
    argv: list[str]
    env: dict[str, str]
    secret_env_names: frozenset[str]
    workdir: str
    host: str
    port: int
    served_names: list[str] = field(default_factory=list)

    def display(self) -> str:
        """The command line as a shell would read it, masked, for logs and the run folder."""
        return masking.mask(shlex.join(self.argv))

    def public_env(self, literal_secret: str = masking.MASK) -> dict[str, str]:
        """The environment as it may be stored and shown: secret references stay names
        (`${env:HF_TOKEN}`), a secret written literally becomes `literal_secret`."""
        return {name: literal_secret if name in self.secret_env_names
                and not SECRET_REF.search(value) else value
                for name, value in sorted(self.env.items())}


def render_launch(plan: Plan, *, venv_bin: str, workdir: str | None = None) -> LaunchSpec:
    """The launch spec of `plan`'s service, with executables taken from `venv_bin`.

    `venv_bin` is the venv's bin directory on the host (e.g. `/opt/vllm/bin`); `workdir`
    defaults to the venv directory itself."""
    service = plan.service
    if service is None:
        raise PlanError("the plan has no `service:` section to launch", field="service")
    venv_bin = venv_bin.rstrip("/") or "/"
    chosen = engine(service.engine)
    argv = chosen.launch_argv(service.model, venv_bin, plan.install.pins())
    argv += _service_flags(service)
    argv += _args_flags(service.args, chosen.reserved_flags)
    if chosen.own_flags is not None:
        argv += chosen.own_flags(service)
    argv += list(service.extra_args)
    _reject_secrets_in_argv(service, chosen.api_key_env)
    env, secret_names = _environment(plan, service, chosen.api_key_env)
    if chosen.compile_cache is not None:  # a root the plan names is the plan's to key
        env.setdefault(chosen.compile_cache.env, _compile_root(plan, chosen, argv))
    return LaunchSpec(
        engine=service.engine,
        model=service.model,
        argv=argv,
        env=env,
        secret_env_names=secret_names,
        workdir=workdir or posixpath.dirname(venv_bin),
        host=service.host,
        port=service.port,
        served_names=service.served_names(),
    )


def _compile_root(plan: Plan, chosen: Engine, argv: list[str]) -> str:
    """The service's compile cache root for this launch (engines/compile_cache.py)."""
    assert plan.service is not None and chosen.compile_cache is not None
    pins = plan.install.pins()
    builds = sorted(f"{name}=={version}" for name, version in pins.items()
                    if chosen.builds is not None and re.fullmatch(chosen.builds, name))
    key = cache_key(chosen.compile_cache, build=",".join(builds), model=plan.service.model,
                    revision=plan.model.revision if plan.model is not None else None, argv=argv)
    return cache_root(plan.service.name, key)


def _service_flags(service: ServiceSpec) -> list[str]:
    out = ["--host", service.host, "--port", str(service.port)]
    if service.served_model_name is not None:
        names = service.served_names()
        if not names:
            raise PlanError(
                "served_model_name is an empty list",
                field="service.served_model_name",
                expected="a name or a non-empty list of names",
            )
        out += ["--served-model-name", *names]
    return out


def _args_flags(args: Mapping[str, ArgValue], reserved: Mapping[str, str]) -> list[str]:
    """`service.args` as flags: true -> bare flag, false -> omitted, lists repeat values after
    one flag, maps become compact JSON."""
    out: list[str] = []
    for key, value in args.items():
        normal = flag_name(key)
        if normal in reserved:
            raise PlanError(
                f"flag {key!r} has its own field",
                field=f"service.args.{key}",
                expected=f"set {reserved[normal]} instead",
            )
        flag = f"--{key}"
        if isinstance(value, bool):
            if value:
                out.append(flag)
        elif isinstance(value, list):
            if value:
                out += [flag, *(_scalar(item) for item in value)]
        elif isinstance(value, dict):
            out += [flag, json.dumps(value, separators=(",", ":"), ensure_ascii=False)]
        else:
            out += [flag, _scalar(value)]
    return out


def _scalar(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _reject_secrets_in_argv(service: ServiceSpec, api_key_env: str | None) -> None:
    places: list[tuple[str, str]] = [("service.model", service.model)]
    places += [(f"service.args.{k}", json.dumps(v)) for k, v in service.args.items()]
    places += [(f"service.extra_args[{i}]", a) for i, a in enumerate(service.extra_args)]
    for where, text in places:
        if SECRET_REF.search(text):
            raise PlanError(
                "a secret reference would end up on the command line, visible to every user "
                "of the host",
                field=where,
                expected="secrets only in `env:` (e.g. env: {HF_TOKEN: '${env:HF_TOKEN}'}) "
                "or service.api_key",
            )
    for i, arg in enumerate(service.extra_args):
        if arg == "--api-key" or arg.startswith("--api-key="):
            raise PlanError(
                "the API key must not be a command-line argument",
                field=f"service.extra_args[{i}]",
                expected=f"service.api_key: ${{env:NAME}} (passed as {api_key_env})"
                if api_key_env else "no API key on the command line",
            )


def _environment(plan: Plan, service: ServiceSpec,
                 api_key_env: str | None) -> tuple[dict[str, str], frozenset[str]]:
    env = dict(plan.env)
    if service.api_key is not None:
        if api_key_env is None:
            raise PlanError(
                f"engine {service.engine} reads its API key only from a command-line flag, "
                "which orch never writes (every user of the host could read the key)",
                field="service.api_key",
                expected="no service.api_key for this engine (keep the server on a private "
                "address or behind a proxy that checks the key)",
            )
        if api_key_env in env and env[api_key_env] != service.api_key:
            raise PlanError(
                f"{api_key_env} is set both in env: and as service.api_key",
                field=f"env.{api_key_env}",
                expected="one of the two",
            )
        env[api_key_env] = service.api_key
    # Log lines must reach the file as they happen, or the phases would show late.
    env.setdefault("PYTHONUNBUFFERED", "1")
    secret = frozenset(n for n, v in env.items()
                       if n in _ALWAYS_SECRET or n == api_key_env or SECRET_REF.search(v))
    return env, secret


def secret_refs(spec: LaunchSpec) -> list[str]:
    """Controller environment variables the spec's environment needs (sorted, unique)."""
    return sorted({m for v in spec.env.values() for m in SECRET_REF.findall(v)})


def spec_hash(spec: LaunchSpec) -> str:
    """sha256 over a canonical form of argv, workdir and environment, with secret references
    (names) but never secret values; a literal secret counts only as being present."""
    canonical = json.dumps(
        {"format": _HASH_FORMAT, "argv": spec.argv, "env": spec.public_env("<literal secret>"),
         "workdir": spec.workdir},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def render_env_file(spec: LaunchSpec, secrets: Mapping[str, str]) -> str:
    """The environment file text (`KEY="value"` lines, sorted), secrets substituted.

    The quoting reads the same in systemd's EnvironmentFile= and in a POSIX shell's `.`:
    double quotes, with a backslash before `\\`, `"`, `$` and a backtick. `secrets` maps the
    controller variable names of `${env:NAME}` references to their values."""
    lines = ["# Written by orch: the service environment. Contains secrets: keep mode 0600."]
    for name, template in sorted(spec.env.items()):
        value = _substitute(name, template, secrets)
        lines.append(f"{name}={quote_env_value(value)}")
    return "\n".join(lines) + "\n"


def _substitute(name: str, template: str, secrets: Mapping[str, str]) -> str:
    def one(match: re.Match[str]) -> str:
        ref = match.group(1)
        if ref not in secrets:
            raise SecretError(
                f"env.{name} needs ${{env:{ref}}}, which is not set on the controller",
                hint=f"export {ref}=... before running orch",
            )
        value = secrets[ref]
        if "\n" in value or "\r" in value or "\0" in value:
            raise SecretError(
                f"the secret {ref} (for env.{name}) holds a line break or NUL byte, which an "
                "environment file cannot carry"
            )
        return value

    return SECRET_REF.sub(one, template)

