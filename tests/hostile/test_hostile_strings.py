"""Hostile strings in every plan value that reaches a host, through a real shell, locally
and over SSH: each is either refused where the plan is loaded (a clear error), or arrives
as exactly the same bytes: nothing executes, nothing lands outside its folder.

What is checked, per kind of value:
  command-line words  service.model, served_model_name, args values, extra_args, host,
                      install.index_urls: the rendered words are printed back by a real
                      `printf` run through the transport, and must equal the plan's
  environment values  env: the service's env file is sourced by a real sh (as the process
                      backend does) and each value printed back
  paths and names     python.venv, python.interpreter, files[].path, collect[].path,
                      service.name: what the loader accepts stays inside the safe set
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from orchestrator.packages import Installer
from orchestrator.plan.models import Plan
from orchestrator.service.backends import ServicePaths
from orchestrator.service.launch import render_env_file, render_launch
from orchestrator.transport import Command
from orchestrator.transport.base import Transport

WORK = Path(tempfile.mkdtemp(prefix="orch-hostile-"))
MARKER = WORK / "PWNED"
PAYLOADS = [
    f"$(touch {MARKER})", f"`touch {MARKER}`", f"; touch {MARKER} #", f"' ; touch {MARKER}; '",
    f'"; touch {MARKER}; "', f"\ntouch {MARKER}\n", f"x|touch {MARKER}", f"x&&touch {MARKER}",
    f"$(IFS=_;c=touch_{MARKER};$c)", "${HOME}", "~root", "*", "-rf", "--help", "a\\", "\\'",
    f"../../{MARKER.name}", "/../../etc/passwd", "$'\\x41'", "%s%n", "é€😀", "\t\r",
]
HOSTILE = st.one_of(
    st.sampled_from(PAYLOADS),
    st.text(alphabet=st.sampled_from(list("$`;|&'\"\\\n\t (){}<>*?~#!%=,:/.-_aZ0é\x01")),
            min_size=1, max_size=24),
)
SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(autouse=True)
def _nothing_executed() -> Iterator[None]:
    """After each test (and its transport's close): no hostile string ran."""
    yield
    assert not MARKER.exists(), "a hostile string executed"


def plan_with(**service: Any) -> Plan | None:
    data: dict[str, Any] = {"name": "p", "python": {"venv": str(WORK / "venv")},
                            "service": {"model": "m", **service}}
    return _load(data)


def _load(data: dict[str, Any]) -> Plan | None:
    try:
        return Plan.model_validate(data)
    except ValidationError:
        return None  # refused where it is loaded: fine (the loader turns it into a PlanError)


def printed_back(transport: Transport, words: list[str]) -> list[str]:
    result = transport.run(Command("printf", "%s\\0", *words))
    return result.stdout.split("\0")[:-1]


@SETTINGS
@given(value=HOSTILE, where=st.sampled_from(["model", "served", "arg", "extra", "host"]))
def test_command_line_words_arrive_unchanged(transport: Transport, value: str, where: str) -> None:
    service = {
        "model": {"model": value}, "served": {"served_model_name": value},
        "arg": {"args": {"tool-call-parser": value}}, "extra": {"extra_args": [value]},
        "host": {"host": value},
    }[where]
    plan = plan_with(**service)
    if plan is None:
        return
    try:
        spec = render_launch(plan, venv_bin=str(WORK / "venv" / "bin"))
    except Exception as error:  # only plan errors are allowed here, never a crash
        from orchestrator.errors import PlanError
        assert isinstance(error, PlanError), error
        return
    assert printed_back(transport, spec.argv) == spec.argv
    assert value in spec.argv or any(value in word for word in spec.argv)


@SETTINGS
@given(value=HOSTILE)
def test_package_index_urls_arrive_unchanged(transport: Transport, value: str) -> None:
    plan = _load({"name": "p", "python": {"venv": str(WORK / "venv")},
                  "install": {"packages": ["a==1"], "index_urls": [value]}})
    if plan is None or plan.python is None:
        return
    command = Installer.of(plan.python, plan.install).install(["a==1"])
    words = [w for w in command.parts if isinstance(w, str)]
    assert printed_back(transport, words) == words


@SETTINGS
@given(value=HOSTILE)
@pytest.mark.slow
def test_environment_values_arrive_unchanged(transport: Transport, value: str) -> None:
    plan = _load({"name": "p", "python": {"venv": str(WORK / "venv")}, "env": {"HOSTILE": value},
                  "service": {"model": "m"}})
    if plan is None:
        return
    spec = render_launch(plan, venv_bin=str(WORK / "venv" / "bin"))
    env_file = WORK / "env"
    transport.put(render_env_file(spec, {}).encode(), str(env_file), mode=0o600)
    # As the process backend reads it: `set -a; . FILE`.
    shown = transport.run(Command("sh", "-c", 'set -a; . "$0"; set +a; printf "%s" "$HOSTILE"',
                                  str(env_file)))
    assert shown.stdout == value


@settings(max_examples=300, deadline=None)
@given(value=HOSTILE, where=st.sampled_from(["venv", "interpreter", "file", "collect", "name"]))
def test_paths_and_names_the_loader_accepts_stay_safe(value: str, where: str) -> None:
    data: dict[str, Any] = {"name": "p", "python": {"venv": "/opt/v"}, "service": {"model": "m"}}
    if where == "venv":
        data["python"]["venv"] = "/opt/" + value
    elif where == "interpreter":
        data["python"]["interpreter"] = value
    elif where == "file":
        data["files"] = [{"path": "/etc/orch/" + value, "content": "x"}]
    elif where == "collect":
        data["collect"] = [{"path": "/var/log/" + value}]
    else:
        data["service"]["name"] = value
    plan = _load(data)
    if plan is None:
        return
    assert plan.python is not None and plan.service is not None
    accepted = {"venv": plan.python.venv, "interpreter": plan.python.interpreter,
                "file": plan.files[0].path if plan.files else "",
                "collect": plan.collect[0].path if plan.collect else "",
                "name": plan.service.name}[where]
    # names.py lets a name hold `:` (a systemd unit name may); a host path never does
    safe = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._+@/-"
    assert set(accepted) <= set(safe + (":" if where == "name" else ""))
    assert ".." not in accepted.split("/")
    state = ServicePaths.for_venv(plan.python.venv, plan.service.name).state_dir
    assert state.startswith(plan.python.venv.rstrip("/") + "/.orch/service/")
    assert "/" not in state[len(plan.python.venv.rstrip("/") + "/.orch/service/"):]


@SETTINGS
@given(word=HOSTILE, value=HOSTILE)
def test_command_words_and_environment_arrive_unchanged(
    transport: Transport, word: str, value: str
) -> None:
    from orchestrator.plan.models import CommandSpec
    from orchestrator.steps.commands import command_of, environment_text

    try:
        spec = CommandSpec(name="c", run=["printf", "%s\\0%s", word], env={"V": value})
    except ValidationError:
        return  # a line break in an environment value: refused where it is loaded
    script = command_of(spec.model_copy(update={"run": ["sh", "-c", 'printf "%s\\0%s" "$0" "$V"',
                                                         word]}))
    shown = transport.run(script, stdin=environment_text(spec, {}))
    assert shown.stdout == f"{word}\0{value}"


@SETTINGS
@given(value=HOSTILE, where=st.sampled_from(["ray_args", "address"]))
def test_a_multi_node_servers_words_arrive_unchanged_or_are_refused(
    transport: Transport, value: str, where: str
) -> None:
    from orchestrator.cluster.topology import build
    from orchestrator.engines import engine
    from orchestrator.errors import PlanError

    addresses = {"a": "10.0.0.1", "b": value if where == "address" else "10.0.0.2"}
    try:
        topology = build(backend="ray", hosts=["a", "b"], head=None, addresses=addresses,
                         args={}, gpus_per_node=None, ray_port=6379, master_port=29501,
                         ray_args=[value] if where == "ray_args" else [],
                         engine=engine("vllm"))
    except PlanError:
        assert where == "address"  # an address that is not one is refused where it is loaded
        return
    for node in topology.nodes:
        argv = topology.ray_node_argv(node, str(WORK / "venv" / "bin"))
        assert printed_back(transport, argv) == argv
        flags = topology.server_flags(node)
        assert printed_back(transport, flags) == flags
