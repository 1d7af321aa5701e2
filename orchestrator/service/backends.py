"""How the service is started, stopped and watched on the host: shell commands for the two
backends, built from parts (quoted by construction, secrets never on a command line).

Host layout for service NAME (all under the venv, writable wherever the venv is):

    <venv>/.orch/service/NAME/env          environment file (mode 0600, holds secrets)
    <venv>/.orch/service/NAME/spec.json    what runs and the fingerprint it was started with
    <venv>/.orch/service/NAME/startup.json how long its last start-up took, by phase
    <venv>/.orch/service/NAME/pid          pidfile: `PID STARTTIME` (process backend)
    <venv>/.orch/service/NAME/stopped      present after `orch stop`, until the next start
    <venv>/.orch/service/NAME/restart      a command asked for a restart (until the next start)
    <venv>/.orch/service/NAME/service.log  stdout+stderr of the server (both backends)
    /etc/systemd/system/NAME.service       unit (systemd backend)

Both backends write the log to the same file, so readiness reads start-up phases the same
way; the previous start's log is kept as `service.log.1`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from orchestrator.facts import Process
from orchestrator.service.launch import LaunchSpec
from orchestrator.service.systemd import stop_policy
from orchestrator.transport.command import Command, Raw, quoted

Backend = Literal["systemd", "process"]


REGISTRY_DIR = "~/.orch/services"  # one entry per service name on a host
RAY_UNIT = "ray"  # a multi-node server's Ray node: the unit <name>-ray beside it


@dataclass(frozen=True)
class ServicePaths:
    name: str
    state_dir: str

    @classmethod
    def for_venv(cls, venv: str, name: str) -> ServicePaths:
        return cls(name=name, state_dir=f"{venv.rstrip('/')}/.orch/service/{name}")

    @property
    def registry_entry(self) -> str:
        """The host-wide record of which state folder runs the service of this name: a
        service is (host, name), whatever venv a plan puts it in (read with ~ expanded)."""
        return f"{REGISTRY_DIR}/{self.name}"

    @property
    def env_file(self) -> str:
        return f"{self.state_dir}/env"

    @property
    def spec_file(self) -> str:
        return f"{self.state_dir}/spec.json"

    @property
    def startup_file(self) -> str:
        return f"{self.state_dir}/startup.json"

    @property
    def pidfile(self) -> str:
        return f"{self.state_dir}/pid"

    @property
    def stopped_marker(self) -> str:
        return f"{self.state_dir}/stopped"

    @property
    def restart_marker(self) -> str:
        return f"{self.state_dir}/restart"

    @property
    def log(self) -> str:
        return f"{self.state_dir}/service.log"

    @property
    def unit_file(self) -> str:
        return f"/etc/systemd/system/{self.name}.service"

    @property
    def unit(self) -> str:
        return f"{self.name}.service"


# What the service gets of the environment it is started from (both backends: a systemd
# unit inherits nothing of it anyway): the rest comes from the plan's env file only.
BASE_ENV = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TMPDIR")
_BASE_ENV_ARGS = " ".join(f'${{{name}:+{name}="${name}"}}' for name in BASE_ENV)


def _rotate_log(paths: ServicePaths) -> Command:
    return Command(
        "mkdir", "-p", paths.state_dir, Raw("&&"), Raw("{"), "mv", "-f", paths.log,
        paths.log + ".1", Raw("2>/dev/null"), Raw("||"), "true", Raw(";"), Raw("}"),
    )


def describe_survivors(processes: Sequence[Process]) -> str:
    """'2 processes of its group live on: pid 12 VLLM::EngineCore, pid 13 VLLM::Worker'."""
    named = ", ".join(f"pid {p.pid} {p.cmdline[0] if p.cmdline else '?'}" for p in processes[:6])
    more = f" and {len(processes) - 6} more" if len(processes) > 6 else ""
    noun = "process" if len(processes) == 1 else "processes"
    return f"{len(processes)} {noun} of its group live on: {named}{more}"


def _owned(pidfile: str) -> str:
    """Shell test: the pidfile's process is still the one orch started. The pidfile holds
    `PID STARTTIME` (field 22 of /proc/PID/stat), so a pid reused by another process after
    a reboot or a crash is never taken for the service, nor signalled. Sets $pid."""
    return (
        f"set -- $(cat {pidfile} 2>/dev/null); pid=${{1:-}}; "
        '[ -n "$pid" ] && [ -n "${2:-}" ] && '
        """[ "$(sed 's/.*) //' /proc/$pid/stat 2>/dev/null | cut -d' ' -f20)" = "$2" ]"""
    )


def main_pid(backend: Backend, paths: ServicePaths) -> str:
    """Shell that sets $pid to the service's main process (it leads the service's session),
    or to nothing when it does not run: the process backend's pidfile, checked as the one
    orch started (`_owned`); systemd's MainPID (0 when the unit is down)."""
    if backend == "systemd":
        return (f"pid=$(systemctl show -p MainPID --value {quoted(paths.unit)} 2>/dev/null); "
                '[ "$pid" != 0 ] || pid=')
    return f"{_owned(quoted(paths.pidfile))} || pid="


def _record_pid(pidfile: str) -> str:
    return f"""echo "$! $(sed 's/.*) //' /proc/$!/stat | cut -d' ' -f20)" > {pidfile}"""


REGISTRY_KEEP = 16  # state folders remembered per name (a pivot back and forth repeats them)


def _register(paths: ServicePaths) -> Command:
    """Claim the service's name on the host for this state folder: it goes last in the
    name's entry, which lists every folder that started the name (the latest last), so a
    later plan finds the one on its port whichever ran since (service names are validated to
    a safe set; only $HOME is left to the shell). Only lines of a state folder's form are
    kept (what else the entry holds, or a file it was linked to, is dropped); the entry is
    replaced, never written through (`mv -T`: a folder standing there is an error)."""
    folder = REGISTRY_DIR.removeprefix("~/")
    entry = f'"$HOME"/{folder}/{quoted(paths.name)}'
    state = quoted(paths.state_dir)
    form = quoted(f"/.+/\\.orch/service/{paths.name.replace('.', chr(92) + '.')}")
    return Command.script(
        f'mkdir -p "$HOME"/{folder} && {{ grep -xE -- {form} {entry} 2>/dev/null | '
        f"grep -vxF -- {state}; printf '%s\\n' {state}; }} | tail -n {REGISTRY_KEEP} "
        f"> {entry}.tmp.$$ && mv -fT {entry}.tmp.$$ {entry} || "
        f"{{ rm -f {entry}.tmp.$$; echo \"orch: cannot record {paths.name} in $HOME/{folder}: "
        f'a folder or a file orch cannot replace stands there" >&2; exit 1; }}')


def start_command(backend: Backend, spec: LaunchSpec, paths: ServicePaths) -> Command:
    """Start the service detached; the command returns at once."""
    if backend == "systemd":
        return _register(paths).then(_rotate_log(paths)).then(
            Command("rm", "-f", paths.stopped_marker, paths.restart_marker)).then(
            Command("systemctl", "daemon-reload")
        ).then(Command("systemctl", "enable", "--quiet", paths.unit)).then(
            Command("systemctl", "restart", paths.unit)
        )
    # A new session (setsid) with all three standard streams redirected, so the SSH session
    # that started it can close; `exec` keeps the pid the pidfile names. The environment is
    # BASE_ENV and the plan's env file, nothing else of the shell that starts it.
    launcher = 'set -a; . "$0"; set +a; exec "$@"'
    return _register(paths).then(_rotate_log(paths)).then(
        Command("cd", spec.workdir)
    ).then(
        Command(
            "rm", "-f", paths.stopped_marker, paths.restart_marker, Raw("&&"),
            Raw("{"), "env", "-i", Raw(_BASE_ENV_ARGS), "setsid", "sh", "-c", launcher,
            paths.env_file, *spec.argv,
            Raw(">>"), paths.log, Raw("2>&1"), Raw("</dev/null"), Raw("&"),
            Raw(_record_pid(quoted(paths.pidfile))), Raw(";"), Raw("}"),
        )
    )


# True while a process of session $pid lives, SIGKILLing it: /proc/PID/stat's 4th field after
# the command name is the session id (the name may hold spaces: cut after its last ") ").
# Shell builtins only: it reads every process's stat on each turn.
_SESSION_LEFT = (
    "{ left=1; for d in /proc/[0-9]*; do "
    'read -r l 2>/dev/null < "$d/stat" || continue; set -- ${l##*) }; '
    '[ "$4" = "$pid" ] && [ "$1" != Z ] && { kill -KILL "${d#/proc/}" 2>/dev/null; left=0; }; '
    'done; [ $left = 0 ]; }'
)


def stop_command(backend: Backend, paths: ServicePaths, *, engine: str,
                 timeout_s: int | None = None, only_if_present: bool = False) -> Command:
    """Stop the service if it runs (SIGINT like vLLM's own Ctrl-C; SIGTERM for a Ray node:
    systemd.stop_policy), then SIGKILL; never fails when it is already stopped. Leaves a
    marker so that a start-up in progress elsewhere (an apply waiting for readiness) does not
    relaunch what was stopped on purpose. `only_if_present`: nothing at all (no marker, no
    state folder made) when the service has no state folder: a unit that may never have run
    there (the Ray node beside a replaced server)."""
    script = _stop_script(backend, paths, engine=engine, timeout_s=timeout_s)
    if only_if_present:
        script = f"if [ -d {quoted(paths.state_dir)} ]; then {script}; fi"
    return Command.script(script)


def _stop_script(backend: Backend, paths: ServicePaths, *, engine: str,
                 timeout_s: int | None) -> str:
    marker = quoted(paths.stopped_marker)
    if backend == "systemd":
        return (f"mkdir -p {quoted(paths.state_dir)} && touch {marker}; "
                f"systemctl stop {quoted(paths.unit)} 2>/dev/null || true")
    # Signal the whole process group (vLLM's engine and workers), even when its leader, the
    # API server, is already gone: leftover workers hold GPU memory and the port.
    pidfile = quoted(paths.pidfile)
    signal, grace_s = stop_policy(engine)
    timeout_s = grace_s if timeout_s is None else timeout_s
    script = (
        f"mkdir -p {quoted(paths.state_dir)} && touch {marker}; "
        f"if {_owned(pidfile)} || {{ [ -n \"$pid\" ] && ! kill -0 \"$pid\" 2>/dev/null; }}; then "
        f'kill -{signal.removeprefix("SIG")} -- -"$pid" 2>/dev/null; '
        f"i=0; while kill -0 -- -\"$pid\" 2>/dev/null && [ $i -lt {timeout_s * 10} ]; do sleep 0.1; i=$((i+1)); done; "
        'kill -KILL -- -"$pid" 2>/dev/null; '
        # Then its whole session (it was started with setsid): a process that made a group
        # of its own (a Ray `ray::IDLE` worker) is still of the session. Wait until nothing
        # of it remains (memory, GPUs and the port free).
        f"i=0; while {_SESSION_LEFT} && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; "
        "fi; "
        f"rm -f {pidfile}"
    )
    return script


def watch_command(backend: Backend, paths: ServicePaths, offset: int) -> Command:
    """One round trip of readiness: is the process alive, and the log from byte `offset`.
    Prints `alive`, `frozen PID`, `stopped` (orch stop) or `dead` on the first line, then
    the new log bytes."""
    if backend == "systemd":
        unit = quoted(paths.unit)
        alive = (f"systemctl is-active --quiet {unit} && "
                 f"pid=$(systemctl show -p MainPID --value {unit} 2>/dev/null)")
    else:
        alive = _owned(quoted(paths.pidfile))
    log = quoted(paths.log)
    marker = quoted(paths.stopped_marker)
    # A process in state T (SIGSTOP, a debugger) is alive but will never answer: `frozen PID`.
    state = """st=$(sed 's/.*) //' /proc/"$pid"/stat 2>/dev/null | cut -d' ' -f1)"""
    # The log bytes travel base64-encoded: the offset stays exact in bytes whatever the log
    # holds (invalid UTF-8, a multi-byte character cut by a poll).
    return Command.script(
        f"if {alive}; then {state}; "
        'case "$st" in T|t) echo "frozen $pid" ;; *) echo alive ;; esac; '
        f"elif [ -e {marker} ]; then echo stopped; else echo dead; fi; "
        f"tail -c +{offset + 1} {log} 2>/dev/null | base64 -w0 || true"
    )


def tail_command(paths: ServicePaths, lines: int) -> Command:
    return Command.script(f"tail -n {int(lines)} {quoted(paths.log)} 2>/dev/null || true")
