"""The systemd backend's unit file, rendered from a launch spec.

Choices, and why:
- `Restart=no`: orch owns the restart budget (`service.restart.max_restarts`). If systemd also
  restarted the unit, a start-up crash would loop out of orch's sight, and every relaunch
  would cost a 13-minute start before anyone saw the diagnosis.
- `KillSignal=SIGINT`: vLLM shuts its engine and workers down cleanly on an interrupt;
  `TimeoutStopSec` bounds that before systemd sends SIGKILL to the whole control group.
- `StandardOutput=append:LOG`: vLLM logs to stdout; appending to a file (stderr inherits it)
  lets readiness parse the start-up phases from the same file for both backends. Without a
  log path the output goes to the journal.
- No `Environment=` lines: the whole environment (secrets included) comes from the
  `EnvironmentFile=`, which is mode 0600, while unit files are world-readable.
"""

from __future__ import annotations

import re
from typing import Literal

from orchestrator import engines
from orchestrator.errors import PlanError
from orchestrator.service.launch import LaunchSpec

STOP_TIMEOUT_S = 60
LIMIT_NOFILE = 1048576  # vLLM opens many sockets and files under load
_BARE_ARG = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")
_UNIT_NAME = re.compile(r"[A-Za-z0-9:_.\\-]+")


RAY_GRACE_S = 5  # then SIGKILL, as `ray stop --force`: a Ray node keeps no state


def stop_policy(engine: str) -> tuple[Literal["SIGINT", "SIGTERM"], int]:
    """How a process is asked to stop, and how long it gets before SIGKILL. vLLM (and the
    simulator) stop cleanly on SIGINT; a Ray node (`ray start --block`) only on SIGTERM, as
    `ray stop` sends it (on SIGINT it lingers); a head often ignores even that while its
    GCS shuts down (seen for 20 s and more with Ray 2.60), so it gets a few seconds, then
    SIGKILL: a Ray node keeps no state that a clean exit would save."""
    if engine == "ray":  # a process beside the server, not an engine
        return "SIGTERM", RAY_GRACE_S
    return engines.engine(engine).stop_signal, STOP_TIMEOUT_S


def render_unit(
    spec: LaunchSpec,
    *,
    name: str,
    env_file: str,
    log_path: str | None,
) -> str:
    """The text of `<name>.service` for `spec`."""
    if not _UNIT_NAME.fullmatch(name):
        raise PlanError(
            f"{name!r} is not a valid systemd unit name",
            field="service.name",
            expected="letters, digits, ':', '_', '.', '-'",
        )
    for label, path in (("the executable", spec.argv[0]), ("env_file", env_file)):
        if not path.startswith("/"):
            raise PlanError(
                f"systemd needs an absolute path for {label}, got {path!r}",
                field="python.venv",
                expected="an absolute path (expand ~ before rendering)",
            )
    if log_path is not None and not log_path.startswith("/"):
        raise PlanError(f"the service log path must be absolute, got {log_path!r}")
    output = f"append:{_escape_specifiers(log_path)}" if log_path else "journal"
    what = "a Ray node" if spec.engine == "ray" else engines.engine(spec.engine).display
    lines = [
        "# Managed by orch: edits are overwritten on the next apply.",
        "[Unit]",
        f"Description={_escape_specifiers(f'{what} serving {spec.model}')}",
        "After=network-online.target",
        "Wants=network-online.target",
        "",
        "[Service]",
        "Type=simple",
        f"WorkingDirectory={_escape_specifiers(spec.workdir)}",
        f"EnvironmentFile={_escape_specifiers(env_file)}",
        f"ExecStart={exec_line(spec.argv)}",
        "Restart=no",
        f"KillSignal={stop_policy(spec.engine)[0]}",
        f"TimeoutStopSec={stop_policy(spec.engine)[1]}",
        f"LimitNOFILE={LIMIT_NOFILE}",
        f"StandardOutput={output}",
        "StandardError=inherit",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
    ]
    return "\n".join(lines) + "\n"


def exec_line(argv: list[str]) -> str:
    """argv as an ExecStart= value: each word bare when safe, else double-quoted with C-style
    escapes; `%` doubled (specifiers) and `$` doubled (variable expansion) everywhere."""
    if not argv:
        raise ValueError("empty argv")
    return " ".join(quote_exec_arg(arg) for arg in argv)


def quote_exec_arg(arg: str) -> str:
    """One ExecStart= word that systemd reads back as exactly `arg`."""
    if "\0" in arg:
        raise PlanError("a command-line argument cannot hold a NUL byte")
    if _BARE_ARG.fullmatch(arg) and arg != ";":
        return arg.replace("%", "%%")
    out = []
    for char in arg:
        if char in '\\"':
            out.append("\\" + char)
        elif char == "%":
            out.append("%%")
        elif char == "$":
            out.append("$$")
        elif char == "\n":
            out.append("\\n")
        elif char == "\t":
            out.append("\\t")
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\x{ord(char):02x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def unquote_exec_line(line: str) -> list[str]:
    """The inverse of `exec_line` for the subset it produces (bare words and double-quoted words
    with the escapes above); for tests and for reading back an installed unit."""
    words: list[str] = []
    i, n = 0, len(line)
    while i < n:
        if line[i] == " ":
            i += 1
            continue
        word: list[str] = []
        if line[i] == '"':
            i += 1
            while i < n and line[i] != '"':
                i, char = _read_char(line, i, quoted=True)
                word.append(char)
            if i >= n:
                raise ValueError(f"unterminated quote in {line!r}")
            i += 1
        else:
            while i < n and line[i] != " ":
                i, char = _read_char(line, i, quoted=False)
                word.append(char)
        words.append("".join(word))
    return words


_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"'}


def _read_char(line: str, i: int, *, quoted: bool) -> tuple[int, str]:
    char = line[i]
    if char in "%$" and i + 1 < len(line) and line[i + 1] == char:
        return i + 2, char
    if quoted and char == "\\" and i + 1 < len(line):
        nxt = line[i + 1]
        if nxt == "x":
            return i + 4, chr(int(line[i + 2 : i + 4], 16))
        if nxt in _ESCAPES:
            return i + 2, _ESCAPES[nxt]
    return i + 1, char


def _escape_specifiers(text: str) -> str:
    if "\n" in text:
        raise PlanError(f"a unit setting cannot hold a line break: {text!r}")
    return text.replace("%", "%%")
