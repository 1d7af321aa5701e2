"""The corpus's servers round: servers that misbehave (what the CLI meets at the other end of
a URL or a port; the live faults of /metrics and a DCGM exporter are
tests/hostile/test_misbehaving_servers.py), and failures reported where they happen: one
host of two fails at a known step, a smoke check, a benchmark level, a server's start-up,
and the summary line, meta.json and events.jsonl must name that host and that step."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fixtures import quick_venv, zygote
from fixtures.ports import free_port
from hostile.corpus import Case, section

TWO = "hosts:\n  a: {connection: local}\n  b: {connection: local}\ngroups: {g: [a, b]}\n"
ONE = "hosts:\n  a: {connection: local}\n"
APPLY = ["apply", "{tmp}/p.yaml", "-i", "{tmp}/i.yaml", "--runs-dir", "{tmp}/runs"]


def _served(name: str, *, slow_start: bool = False, smoke: str = "",
            bench: str = "bench: null\n") -> str:
    """A plan of one simulated server on host a (its own name and port: cases run at once)."""
    return (f"name: {name}-{os.getpid()}\nhosts: a\n"
            "python: {venv: '{tmp}/venv', interpreter: " + quick_venv.interpreter() + ", installer: pip}\n"
            f"service:\n  engine: sim\n  model: m\n  host: 127.0.0.1\n  port: {free_port()}\n"
            f"  backend: process\n  name: corpus-{name}-{os.getpid()}\n"
            "  sim: {profile: tiny-qwen2-vllm-cpu-2-cores, time_scale: 0.1, "
            f"startup_time_scale: {1 if slow_start else 0.001}}}\n"
            f"health: {{startup_timeout: {2 if slow_start else 60}s, poll_interval: 0.2s}}\n"
            + smoke + bench)


def _stopped(tmp: Path) -> Callable[[], None]:
    """prepare: writes the venv path into the plan; the undo stops the server it started."""
    plan = tmp / "p.yaml"
    plan.write_text(plan.read_text().replace("{tmp}", str(tmp)))

    def stop() -> None:
        zygote.run(["stop", str(plan), "-i", str(tmp / "i.yaml")], cwd=tmp, timeout=60)
    return stop


def _run_folder(tmp: Path) -> Path | None:
    runs = sorted((tmp / "runs").glob("*/*"))
    return runs[-1] if runs else None


def _events(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]


def recorded(host: str, step: str, words: str, *, others: tuple[str, ...] = ()) -> \
        Callable[[Path], str | None]:
    """after: meta.json's `failures` and events.jsonl name `host` and `step` (with `words` in
    the error), and no one else: the `others` hosts ended well."""
    def check(tmp: Path) -> str | None:
        run = _run_folder(tmp)
        if run is None:
            return "no run folder"
        meta = json.loads((run / "meta.json").read_text())
        failures = meta.get("failures")
        if meta.get("status") != "failed" or not failures or len(failures) != 1:
            return f"meta.json: status {meta.get('status')}, failures {failures}"
        failure = failures[0]
        if (failure["host"], failure["step"]) != (host, step) or words not in failure["error"]:
            return f"meta.json names {failure}, not {host} at {step} ({words})"
        events = _events(run)
        ends = {e["host"]: e for e in events if e["event"] == "host_end"}
        if not ends.get(host, {}).get("failed") or ends[host].get("step") != step:
            return f"events.jsonl: host_end of {host} is {ends.get(host)}"
        if any(ends.get(other, {}).get("failed", True) for other in others):
            return f"events.jsonl: another host failed too: {ends}"
        said = [e for e in events if e.get("host") == host and e.get("status") == "failed"
                and step in (e.get("step"), e.get("stage"))]
        if not said or words not in str(said[0].get("error") or said[0].get("message")):
            return f"events.jsonl: no failed {step} of {host} saying {words!r}"
        return None
    return check


def _level_failed(tmp: Path) -> str | None:
    problem = recorded("a", "bench", "level c1: no request succeeded")(tmp)
    run = _run_folder(tmp)
    if problem or run is None:
        return problem
    ends = [e for e in _events(run) if e["event"] == "level_end" and e["label"] == "c1"]
    return None if ends and ends[0]["failed"] == 2 else f"events.jsonl: level c1 ended {ends}"


def _dcgm_said(tmp: Path) -> str | None:
    run = _run_folder(tmp)
    if run is None:
        return "no run folder"
    level = json.loads((run / "hosts/a/bench/level-c1.json").read_text())
    reason = level["gpu_telemetry"].get("reason", "")
    said = "DCGM exporter at http://127.0.0.1:"
    return None if said in reason and "/metrics on a: HTTP 400" in reason else \
        f"gpu_telemetry does not say what the exporter did: {level['gpu_telemetry']}"


def _blocked_target(tmp: Path) -> None:
    """prepare: host a's target folder is there, host b's is a file."""
    _fill_tmp(tmp)
    (tmp / "a-dir").mkdir()
    (tmp / "b-dir").write_text("a file where host b's target needs a folder")


BREAKS = "shell: 'test \"${host.name}\" != b || { echo broken on purpose >&2; exit 3; }'"
QUICK = ["--concurrency", "1", "--requests", "2", "--warmup", "0", "--result-dir", "{tmp}/out"]

CASES: list[Case] = [
    *section(
        "servers that misbehave",
        Case("bench: a server that answers 400 to everything",
             ["bench", "--url", "http://127.0.0.1:{http}", *QUICK],
             says=("answered HTTP 400", "cannot pick a model"), at=("/v1/models",)),
        Case("bench: a server that answers 400 to every request of a level",
             ["bench", "--url", "http://127.0.0.1:{http}", "--model", "m", *QUICK],
             says=("no request succeeded", "HTTP 400"), at=("c1",)),
        Case("bench: nothing listens at the URL",
             ["bench", "--url", "http://127.0.0.1:1", *QUICK],
             says=("Connection refused",), at=("http://127.0.0.1:1/v1/models",)),
        Case("apply: a DCGM exporter port that answers HTTP 400",
             APPLY, files={"i.yaml": ONE, "p.yaml": _served("dcgm400", bench=(
                 "bench: {concurrency: [1], requests_per_level: 2, warmup: 0, max_tokens: 8, "
                 "gpu_telemetry: 0.2s, dcgm_port: {http}}\n"))},
             code=0, prepare=_stopped, after=_dcgm_said, timeout=240),
    ),
    *section(
        "failures reported where they happen",
        Case("one host of two fails a command",
             APPLY, files={"i.yaml": TWO, "p.yaml": (
                 f"name: cmd-{os.getpid()}\nhosts: g\ncommands:\n  - {{name: first, shell: 'true'}}\n"
                 f"  - name: breaks\n    {BREAKS}\n  - {{name: later, shell: 'true'}}\n")},
             says=("command failed with exit code 3",), at=("b: commands: run breaks:",),
             after=recorded("b", "commands", "run breaks", others=("a",))),
        Case("one host of two cannot write a file target",
             APPLY, files={"i.yaml": TWO, "p.yaml": (
                 f"name: files-{os.getpid()}\nhosts: g\nfiles:\n"
                 "  - {path: '{tmp}/${host.name}-dir/f.txt', content: x}\n")},
             prepare=_blocked_target,
             says=("File exists",), at=("b: files: create",),
             after=recorded("b", "files", "b-dir/f.txt", others=("a",))),
        Case("a smoke check that fails",
             APPLY, files={"i.yaml": ONE, "p.yaml": _served("smoke", smoke=(
                 "smoke:\n  - {name: says-zebra, prompt: hello, max_tokens: 8, "
                 "expect: {contains: [zebra-never]}}\n"))},
             prepare=_stopped, says=("content does not contain 'zebra-never'",),
             at=("a: smoke: 1 of 1 smoke check(s) failed: says-zebra",),
             after=recorded("a", "smoke", "says-zebra"), timeout=240),
        Case("a benchmark level whose every request fails",
             APPLY, files={"i.yaml": ONE, "p.yaml": _served("level", bench=(
                 "bench: {concurrency: [1], requests_per_level: 2, warmup: 0, "
                 "max_tokens: 100000000}\n"))},
             prepare=_stopped, says=("HTTP 400", "cannot be greater than max_model_len"),
             at=("a: bench: level c1: no request succeeded",),
             after=_level_failed, timeout=240),
        Case("a server that is not ready within its start-up deadline",
             APPLY, files={"i.yaml": ONE, "p.yaml": _served("slow", slow_start=True)},
             prepare=_stopped, says=("not ready after 2 s (health.startup_timeout)",),
             at=("a: ready:",), after=recorded("a", "ready", "not ready after 2 s"), timeout=240),
    ),
]


def _fill_tmp(tmp: Path) -> None:
    """prepare: `{tmp}` in the plan is the case's folder."""
    plan = tmp / "p.yaml"
    plan.write_text(plan.read_text().replace("{tmp}", str(tmp)))
