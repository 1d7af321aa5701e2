"""Secrets: `${env:NAME}` references, resolved on the controller from its environment.

The plan object only ever holds the reference. Values are read once, before any connection
(a missing secret fails the run at once, not after a 13-minute start-up), registered with
`orchestrator.masking` so that every later `mask()` hides them, and substituted only into
what goes to a host through a private channel (the service's mode-0600 environment file).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from orchestrator import masking
from orchestrator.errors import SecretError
from orchestrator.plan.models import Plan
from orchestrator.plan.source import FieldPath
from orchestrator.plan.variables import ENV_REF

# Where `${env:NAME}` may stand: places whose text reaches a host only privately.
SECRET_FIELDS = ("env.NAME", "files[].content", "service.api_key", "commands[].env.NAME",
                 "model.token")
SECRETS_HINT = ("give a command its secret through commands[].env (env: {TOKEN: '${env:TOKEN}'}, "
                "then $TOKEN in the script); keep credentials for package indexes in the host's "
                "pip.conf, uv.toml or .netrc (a files: entry with mode 0600 can write it)")


# Secrets orch itself sends in an HTTP header (Authorization: Bearer ...).
HEADER_FIELDS = ("service.api_key", "model.token")


def header_problem(value: str) -> str:
    """Why `value` cannot go in an HTTP header ("" when it can): a header carries printable
    ASCII only (a non-ASCII character has no one encoding; a control could end the header).
    The character is not shown: it is part of a secret."""
    bad = next((at for at, char in enumerate(value) if not " " <= char <= "~"), None)
    if bad is None:
        return ""
    return (f"its character {bad + 1} is not printable ASCII, and an HTTP header (where it "
            "is sent, as Authorization: Bearer ...) carries printable ASCII only")


# An env name that reads as a secret: one of its `_`-separated words is, or ends in, one of
# these (HF_TOKEN, VLLM_API_KEY, AWS_SECRET_ACCESS_KEY, DB_PASSWORD, HFTOKEN; not
# TOKENIZERS_PARALLELISM, VLLM_MAX_TOKENS or PYTHON_KEYRING_BACKEND).
SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIALS")
# Values no secret is: a flag or a number (HF_HUB_DISABLE_IMPLICIT_TOKEN: "1").
_NOT_A_SECRET = re.compile(r"(?i)true|false|yes|no|on|off|[+-]?[0-9]+(\.[0-9]+)?")


def secret_looking(name: str) -> bool:
    """Whether an environment variable's name reads as a secret's (SECRET_WORDS)."""
    return any(word.endswith(SECRET_WORDS) for word in name.upper().split("_"))


def literal_secrets(plan: Plan) -> list[tuple[FieldPath, str]]:
    """The fields holding a secret written out (and its value), which plan.yaml and meta.json
    would keep in clear: service.api_key and model.token, and an env entry of a secret-looking
    name, with a value that is neither a reference (`${env:NAME}`, `${host.NAME}`) nor a flag
    or a number."""
    found: list[tuple[FieldPath, str]] = []
    if plan.service is not None and plan.service.api_key and _literal(plan.service.api_key):
        found.append((("service", "api_key"), plan.service.api_key))
    if plan.model is not None and plan.model.token and _literal(plan.model.token):
        found.append((("model", "token"), plan.model.token))
    envs: list[tuple[FieldPath, dict[str, str]]] = [(("env",), plan.env)]
    envs += [(("commands", at, "env"), command.env) for at, command in enumerate(plan.commands)]
    for where, env in envs:
        found += [((*where, name), value) for name, value in env.items()
                  if secret_looking(name) and _literal(value) and not _NOT_A_SECRET.fullmatch(value)]
    return found


def _literal(value: str) -> bool:
    return bool(value) and "${" not in value


def is_private(path: FieldPath) -> bool:
    """Whether a secret may stand at `path` (one of SECRET_FIELDS)."""
    match path:
        case ("env", str()) | ("files", int(), "content") | ("service", "api_key"):
            return True
        case ("model", "token"):
            return True
        case ("commands", int(), "env", str()):
            return True
    return False


def secret_places(plan: Plan) -> list[tuple[str, FieldPath]]:
    """Every `${env:NAME}` of the plan and where it stands, in plan order."""
    found: list[tuple[str, FieldPath]] = []
    _walk(plan.model_dump(mode="python"), (), found)
    return found


def misplaced_secrets(plan: Plan) -> list[tuple[str, FieldPath]]:
    """The references standing where a host would not receive the value privately (a
    command line, a script, a prompt): the loader refuses them at their line."""
    return [(name, path) for name, path in secret_places(plan) if not is_private(path)]


def secret_uses(plan: Plan) -> dict[str, list[str]]:
    """Every secret name -> the dotted fields that reference it, in plan order."""
    uses: dict[str, list[str]] = {}
    for name, path in secret_places(plan):
        fields = uses.setdefault(name, [])
        where = ".".join(str(part) for part in path)
        if where not in fields:
            fields.append(where)
    return uses


def secret_names(plan: Plan) -> list[str]:
    """Every `${env:NAME}` the plan references, in order of first use."""
    return list(secret_uses(plan))


def resolve_secrets(plan: Plan, environ: Mapping[str, str] | None = None,
                    origins: Mapping[str, object] | None = None) -> dict[str, str]:
    """NAME -> value for every secret the plan uses, read from `environ` (default: the
    process environment). Raises SecretError naming every missing (or empty) one and where
    it is used (with its file:line from `origins`, the loaded plan's field origins). Each
    value is registered for masking."""
    env = os.environ if environ is None else environ
    uses = secret_uses(plan)
    misplaced = [f"{name} in {'.'.join(map(str, path))}" for name, path in misplaced_secrets(plan)]
    if misplaced:  # the loader refuses these at their line; a plan built in code meets this
        raise SecretError(
            "secret references are only filled in where a host receives them privately "
            f"({', '.join(SECRET_FIELDS)}); found " + "; ".join(misplaced), hint=SECRETS_HINT)
    missing = [name for name in uses if not env.get(name)]
    if missing:
        def at(field: str) -> str:
            origin = (origins or {}).get(field)
            return f"{field} at {origin}" if origin is not None else field

        lines = [f"{name} (used by {', '.join(map(at, uses[name]))})" for name in missing]
        noun = "secret is" if len(missing) == 1 else "secrets are"
        raise SecretError(
            f"{len(missing)} {noun} not set in the environment: " + "; ".join(lines),
            hint="export "
            + " ".join(f"{name}=..." for name in missing)
            + " before running orch (the value is never written to logs or the run folder)",
        )
    values = {name: env[name] for name in uses}
    short = [name for name, value in values.items() if len(value) < masking.MIN_LENGTH]
    if short:
        raise SecretError(
            f"{', '.join(short)}: a secret shorter than {masking.MIN_LENGTH} characters cannot "
            "be masked in output without shredding other text",
            hint="use a real token (Hugging Face and API keys are far longer)",
        )
    for value in values.values():
        masking.register(value)
    for name, value in values.items():
        headers = [field for field in uses[name] if field in HEADER_FIELDS]
        if headers and (problem := header_problem(value)):
            raise SecretError(f"{name} (used by {', '.join(headers)}): {problem}",
                              hint=f"export {name} as the key or token exactly as issued")
    return values


def substitute(text: str, secrets: Mapping[str, str]) -> str:
    """`text` with each `${env:NAME}` replaced by its value. Use only for what goes to a
    host privately (an env file), never for output."""

    def value(match: Any) -> str:
        name = match.group(1)
        if name not in secrets:
            raise SecretError(
                f"secret {name} was not resolved before use",
                hint="resolve_secrets(plan) must run first and the text must come from that plan",
            )
        return secrets[name]

    return ENV_REF.sub(value, text)


def _walk(value: Any, path: FieldPath, found: list[tuple[str, FieldPath]]) -> None:
    if isinstance(value, str):
        found.extend((match.group(1), path) for match in ENV_REF.finditer(value))
    elif isinstance(value, dict):
        for key, item in value.items():
            _walk(item, (*path, str(key)), found)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _walk(item, (*path, index), found)
