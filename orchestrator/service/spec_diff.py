"""What a restart of the service would change, as `orch plan` shows it (Terraform-style):
the flags added, removed and changed, the environment keys, the model, the packages, the
config files and the build, between the record the running server was started with and
the launch the plan asks for.

Pure functions of two `ServiceRecord`-like views; secret values never appear (the record
keeps secret references as `${env:NAME}` and literal secrets as `***`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from orchestrator.engines import all_engines

SECRET_SHOWN = "(secret)"


def _split(argv: list[str]) -> tuple[list[str], str, list[str]]:
    """(program, model, the rest) of `PROGRAM... serve MODEL ...` or of a server module's
    `PYTHON -m MODULE --model MODEL ...` (engines/vllm/ launches both)."""
    if "serve" in argv:
        serve = argv.index("serve")
        return argv[:serve + 1], argv[serve + 1] if serve + 1 < len(argv) else "", argv[serve + 2:]
    if "--model" in argv:
        at = argv.index("--model")
        model = argv[at + 1] if at + 1 < len(argv) else ""
        return argv[:at], model, argv[at + 2:]
    return argv, "", []


def program(argv: Sequence[str]) -> list[str]:
    """What runs the server (the venv's script or python and module), without its flags."""
    return _split(list(argv))[0]


def flags(argv: Sequence[str]) -> tuple[str, dict[str, list[str]]]:
    """(model, flag -> values) of a server command line: `vllm serve MODEL --a 1 --b` gives
    ("MODEL", {"--a": ["1"], "--b": [""]}); a repeated flag keeps every value."""
    _, model, rest = _split(list(argv))
    out: dict[str, list[str]] = {}
    current: str | None = None
    for token in rest:
        if token.startswith("--") and len(token) > 2:
            name, eq, value = token.partition("=")
            current = name
            out.setdefault(name, []).append(value if eq else "")
        elif current is not None:  # a flag's value (or one of several: nargs="+")
            values = out[current]
            values[-1] = f"{values[-1]} {token}".strip()
    return model, out


def _show(values: list[str]) -> str:
    return ", ".join(v if v else "(on)" for v in values)


def argv_changes(before: Sequence[str], after: Sequence[str]) -> list[str]:
    model_a, flags_a = flags(before)
    model_b, flags_b = flags(after)
    lines: list[str] = []
    if program(before) != program(after):
        lines.append(f"~ program: {' '.join(program(before))} -> {' '.join(program(after))}")
    if model_a != model_b:
        lines.append(f"~ model: {model_a or '(none)'} -> {model_b}")
    for name in sorted(flags_a.keys() | flags_b.keys()):
        old, new = flags_a.get(name), flags_b.get(name)
        if old == new:
            continue
        if old is None and new is not None:
            lines.append(f"+ {name}" + (f" {_show(new)}" if any(new) else ""))
        elif new is None and old is not None:
            lines.append(f"- {name}" + (f" {_show(old)}" if any(old) else ""))
        elif old is not None and new is not None:
            lines.append(f"~ {name}: {_show(old)} -> {_show(new)}")
    return lines


def _env_value(value: str, secret: bool) -> str:
    return SECRET_SHOWN if secret or value == "***" else value


def _cache_roots() -> frozenset[str]:
    """The variables orch sets to an engine's compile cache root (engines/compile_cache.py):
    derived from the flags a diff already shows, so said in words, not as a path."""
    return frozenset(e.compile_cache.env for e in all_engines() if e.compile_cache is not None)


def env_changes(
    before: Mapping[str, str], after: Mapping[str, str], secret_names: frozenset[str]
) -> list[str]:
    lines: list[str] = []
    roots = _cache_roots()
    for key in sorted(before.keys() | after.keys()):
        old, new = before.get(key), after.get(key)
        secret = key in secret_names
        if old == new:
            continue
        if key in roots:
            lines.append("~ compile cache: another key (its graphs compile again: a cold start)"
                         if old is not None and new is not None else
                         f"{'+' if new is not None else '-'} compile cache ({key})")
            continue
        if old is None and new is not None:
            lines.append(f"+ env {key}={_env_value(new, secret)}")
        elif new is None:
            lines.append(f"- env {key}")
        elif secret or "***" in (old, new):
            lines.append(f"~ env {key}: {SECRET_SHOWN} changed")
        else:
            lines.append(f"~ env {key}: {old} -> {new}")
    return lines


def files_changes(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    lines: list[str] = []
    for path in sorted(before.keys() | after.keys()):
        if path not in before:
            lines.append(f"+ config file {path}")
        elif path not in after:
            lines.append(f"- config file {path}")
        elif before[path] != after[path]:
            lines.append(f"~ config file {path} (content changed)")
    return lines


def duration(seconds: float) -> str:
    """13m 2s, 1h 4m, 23.7s: how long a start-up takes, as people say it."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {secs}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes}m"
