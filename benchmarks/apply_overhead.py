"""No-op re-apply overhead over loopback SSH: whole-command wall time, CPU and round trips.

A plan with 10 pinned packages (small real wheels) and 10 files is applied once to converge,
then re-applied REPEATS times; the first table shows, per host count (`--hosts`, default
1, 16, 64; one loopback sshd per 12 hosts) and transport (`--transport`, default paramiko,
openssh and the inventory's default, labelled `(default)`, with ssh.transport unset), the
median wall time of the whole `orch apply` process, its ratio to 1 host, the orch process's
CPU and its CPU per host, the peak of concurrent SSH sessions beside --forks, the sessions
each host opened (counted from the sshd logs), and whether the row meets its goals
(benchmarks/overhead_noop.py says which and how each is measured); the largest count runs
again with `--forks 8`. The OpenSSH rows reuse the master connections earlier runs left open.

`--anchors` adds Ansible (ansible-core, forks 32, pipelining) and pyinfra doing the same
no-op on the same hosts (benchmarks/overhead_anchors.py): both install from the package
index into a scratch venv (the first run makes it under /tmp).

`--cold` adds a cold apply with `python.installer: uv` (a new venv, 2 pins from wheels on
disk, 2 files, one command), the venv removed before each run (benchmarks/overhead_cold.py).

The second table does the same on a real vLLM venv: the vLLM 0.17.1, flashinfer-python and
flashinfer-cubin 0.6.4 wheels from the index (installed --no-deps; tests/fixtures/realpkgs.py
caches them), pinned with `install.clean: true`, so every run verifies each installed file
against its RECORD. `--verify-all` hashes them all (the first verification); a no-op re-apply
trusts the stat signatures kept on the host. `--with-torch` adds torch 2.10 to the pins
(the whole vLLM venv of the heavy tests, about 11 GB, made once in the cache).

`--cluster` adds a multi-node server (root: network namespaces): the simulator on a real Ray
cluster of 2 and 3 hosts (tests/fixtures/cluster.py), converged once, then `orch plan` (the
probe and the nodes' vote) and a no-op `orch apply --skip smoke` (also the lock, the
readiness check on the head and the logs collected) timed and their sessions counted per host.

    .venv/bin/python benchmarks/apply_overhead.py [--repeats 7] [--hosts 1,16,64]
        [--transport paramiko,openssh,default] [--anchors] [--cold] [--no-real]
        [--with-torch] [--cluster]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from fixtures.cluster import RAY_ARGS, cluster_hosts, write_cluster_plan  # noqa: E402
from fixtures.realpkgs import LIGHT_PINS, UV, full_venv, install_light, wheels_dir  # noqa: E402
from fixtures.sshd import SshServers  # noqa: E402
from fixtures.wheels import make_wheel  # noqa: E402
from overhead_noop import (  # noqa: E402
    DEFAULT_FORKS,
    Row,
    bare_seconds,
    default_transport,
    print_table,
    run_sampled,
)


def write_plan(work: Path, wheels: Path, hosts: str) -> Path:
    plan = {
        "name": "overhead",
        "hosts": hosts,
        "python": {"venv": str(work / "venv"), "interpreter": "python3", "installer": "pip"},
        "install": {
            "packages": [f"orchbench-p{i}==1.0.{i}" for i in range(10)],
            "find_links": [str(wheels)],
            "no_index": True,
        },
        "files": [
            {"path": str(work / "etc" / f"f{i}.conf"), "content": f"setting_{i} = {i}\n"}
            for i in range(10)
        ],
    }
    path = work / f"plan-{hosts}.yaml"
    path.write_text(yaml.safe_dump(plan))
    return path


# The orch beside the interpreter running this (.venv/bin/python: .venv/bin/orch; a worktree
# runs another checkout's venv with PYTHONPATH pointing at itself).
ORCH = Path(sys.executable).with_name("orch")
GOAL_SECONDS = {1: 0.5, 4: 0.8, 16: 0.8}  # the real venv's no-op re-apply, per host count
FEW_FORKS = 8  # the largest host count again with --forks 8
_CHANGED = re.compile(r"^\S+\s+\S+\s+changed\b", re.MULTILINE)  # a step line that changed


def orch_command(args: list[str]) -> tuple[list[str], dict[str, str]]:
    command = [str(ORCH if ORCH.exists() else ROOT / ".venv" / "bin" / "orch"), *args]
    # As on any installed Python: bytecode is cached (an environment that turns the cache
    # off makes every run compile orch's sources again, ~0.1 s that no user pays).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return command, env


def orch(args: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    command, env = orch_command(args)
    started = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False,
                            env=env)
    return time.perf_counter() - started, result


def controller_cpu() -> float:
    """CPU seconds of this process's ended children so far (each `orch` run, once waited)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def write_inventory(servers: SshServers, count: int, work: Path, transport: str | None) -> Path:
    """The inventory of `count` hosts, ssh.transport set (None: left to its default)."""
    inventory = servers.inventory(count)
    data = inventory.model_dump(mode="json")
    if transport is None:
        data["ssh"].pop("transport", None)
    else:
        data["ssh"]["transport"] = transport
    inv_file = work / f"inventory-{count}-{transport or 'default'}.yaml"
    inv_file.write_text(yaml.safe_dump(data))
    return inv_file


def measure(
    servers: SshServers, count: int, plan: Path, work: Path, repeats: int, *extra: str,
    transport: str | None = "paramiko",
) -> tuple[float, float, int, int | None, float, int]:
    """(median s, best s, round trips per host, files hashed per probe, median CPU s of the
    orch process, peak SSH sessions) of no-op applies over `transport` (None: the default)."""
    inventory = servers.inventory(count)
    inv_file = write_inventory(servers, count, work, transport)
    _, first = orch(["apply", str(plan), "-i", str(inv_file)], work)
    if first.returncode != 0:
        raise SystemExit(first.stdout + first.stderr)
    times, trips, hashed, cpu, peaks = [], [], None, [], []
    for _ in range(repeats):
        marks = servers.log_marks()
        used = controller_cpu()
        command, env = orch_command(["apply", str(plan), "-i", str(inv_file), *extra])
        seconds, peak, result = run_sampled(command, work, env, sample=True)
        cpu.append(controller_cpu() - used)
        if result.returncode != 0 or _CHANGED.search(result.stdout.split("recap")[0]):
            raise SystemExit(result.stdout + result.stderr)
        times.append(seconds)
        peaks.append(peak)
        trips.append(max(servers.round_trips(inventory, since=marks).values()))
        runs = sorted((work / "runs").glob("*/*"), key=lambda p: p.name)
        facts = json.loads((runs[-1] / "hosts" / "h1" / "facts.json").read_text())
        hashed = facts.get("record_files", {}).get("hashed")
    return (statistics.median(times), min(times), max(trips), hashed, statistics.median(cpu),
            max(peaks))


def noop_rows(servers: SshServers, plan: Path, work: Path, options: argparse.Namespace) -> list[Row]:
    """The first table's rows: every transport at every host count, then --forks 8."""
    rows = []
    for name in options.transport:
        transport, label = default_transport() if name == "default" else (name, name)
        for count in options.hosts:
            median, best, trips, _, cpu, peak = measure(
                servers, count, plan, work, options.repeats, transport=transport)
            rows.append(Row(count, label, DEFAULT_FORKS, median, best, trips, cpu, peak))
    largest = options.hosts[-1]
    if largest > FEW_FORKS:
        for name in [n for n in options.transport if n != "default"]:
            median, best, trips, _, cpu, peak = measure(
                servers, largest, plan, work, options.repeats, "--forks", str(FEW_FORKS),
                transport=name)
            rows.append(Row(largest, f"{name} --forks {FEW_FORKS}", FEW_FORKS, median, best,
                            trips, cpu, peak))
    return rows


def real_plan(work: Path, venv: Path, pins: list[str]) -> Path:
    plan = {
        "name": "overhead-real",
        "hosts": "all",
        "python": {"venv": str(venv), "interpreter": "python3", "installer": "uv"},
        "install": {"packages": pins, "find_links": [str(wheels_dir())], "no_index": True,
                    "clean": True},
    }
    path = work / "plan-real.yaml"
    path.write_text(yaml.safe_dump(plan))
    return path


def host_counts(text: str) -> list[int]:
    try:
        counts = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected host counts such as 1,4,16,64, got {text!r}") from None
    if not counts or counts[0] < 1:
        raise argparse.ArgumentTypeError(f"expected host counts of at least 1, got {text!r}")
    return counts


def parse_options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--hosts", type=host_counts, default=[1, 16, 64], metavar="N,N,...",
                        help="the host counts of the no-op re-apply table (default 1,16,64)")
    parser.add_argument("--transport", type=lambda text: text.split(","),
                        default=["paramiko", "openssh", "default"], metavar="NAME,...",
                        help="ssh.transport of the no-op table; `default` leaves it unset "
                             "(default paramiko,openssh,default)")
    parser.add_argument("--anchors", action="store_true",
                        help="also Ansible and pyinfra doing the same no-op (slow)")
    parser.add_argument("--cold", action="store_true",
                        help="also a cold apply with python.installer: uv")
    parser.add_argument("--no-real", action="store_true", help="leave out the real vLLM venv")
    parser.add_argument("--with-torch", action="store_true",
                        help="also a venv pinning torch (the heavy tests' whole vLLM venv)")
    parser.add_argument("--cluster", action="store_true",
                        help="also a multi-node Ray cluster of 2 and 3 hosts (needs root)")
    parser.add_argument("--cluster-only", action="store_true", help="only the cluster table")
    return parser.parse_args()


def main() -> int:
    options = parse_options()
    if options.cluster_only:
        print_cluster(measure_cluster(options.repeats), options.repeats)
        return 0
    real_rows: list[tuple[str, int, int, str, float, float, int, int | None, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        wheels = work / "wheels"
        for i in range(10):
            make_wheel(wheels, f"orchbench-p{i}", f"1.0.{i}")
        with SshServers(work / "sshd", max(*options.hosts, 4)) as servers:
            # Hosts share this machine's disk: one venv and one set of files serves all,
            # converged by one host first (many hosts would make the one venv at once).
            plan = write_plan(work, wheels, "all")
            converge(servers, plan, work)
            bare = bare_seconds(lambda args: orch(args, work), options.repeats)
            rows = noop_rows(servers, plan, work, options)
            print_table(rows, options.repeats, bare)
            if options.anchors:
                from overhead_anchors import measure_anchors, print_anchors

                print()
                print_anchors(measure_anchors(servers, work, options.hosts, options.repeats),
                              options.repeats)
            if options.cold:
                from overhead_cold import measure_cold, print_cold

                print()
                print_cold(measure_cold(servers, work, wheels, options.repeats, orch),
                           options.repeats)
            if not options.no_real:
                real_rows = measure_real(servers, work, options)
    if real_rows:
        print()
        print_real(real_rows, options.repeats)
    if options.cluster:
        print()
        print_cluster(measure_cluster(options.repeats), options.repeats)
    return 0


def measure_real(servers: SshServers, work: Path, options: argparse.Namespace,
                 ) -> list[tuple[str, int, int, str, float, float, int, int | None, float]]:
    venv = work / "real-venv"
    install_light(venv)
    shutil.copy(UV, venv / "bin" / "uv")
    cases = [("vllm + flashinfer x2", venv, LIGHT_PINS)]
    if options.with_torch:
        cases.append(("... + torch 2.10", full_venv(), [*LIGHT_PINS, "torch==2.10.0"]))
    real_rows = []
    for label, path, pins in cases:
        plan = real_plan(work, path, pins)
        files = real_files(path, pins)
        full = measure(servers, 1, plan, work, options.repeats, "--verify-all")[:5]
        real_rows.append((label, files, 1, "--verify-all", *full))
        for count in (1, 4):
            cached = measure(servers, count, plan, work, options.repeats)[:5]
            real_rows.append((label, files, count, "no-op (stat cache)", *cached))
    return real_rows


def print_real(real_rows: list[tuple[str, int, int, str, float, float, int, int | None, float]],
               repeats: int) -> None:
    print(f"real vLLM venv, install.clean: true (RECORD checked every run), {repeats} runs")
    print(f"{'pins':<22} | {'files':>6} | {'hosts':>5} | {'mode':<18} | {'median s':>8} | "
          f"{'best s':>6} | {'hashed':>6} | {'trips':>5} | goal")
    print("-" * 110)
    full_by_label: dict[str, float] = {}
    for label, files, count, mode, median, best, trips, hashed, _ in real_rows:
        if mode == "--verify-all":
            full_by_label[label] = median
            verdict = "(the first verification)"
        else:
            ok = "met" if median <= GOAL_SECONDS[count] and trips <= 1 else "missed"
            verdict = (f"<= {GOAL_SECONDS[count]} s, 1 trip: {ok}; "
                       f"{full_by_label[label] / median:.1f}x faster than --verify-all")
        print(f"{label:<22} | {files:>6,} | {count:>5} | {mode:<18} | {median:>8.3f} | "
              f"{best:>6.3f} | {hashed if hashed is not None else '-':>6} | {trips:>5} | {verdict}")


def converge(servers: SshServers, plan: Path, work: Path) -> None:
    inv_file = work / "inventory-converge.yaml"
    inv_file.write_text(yaml.safe_dump(servers.inventory(1).model_dump(mode="json")))
    _, result = orch(["apply", str(plan), "-i", str(inv_file)], work)
    if result.returncode != 0:
        raise SystemExit(result.stdout + result.stderr)


def measure_cluster(repeats: int) -> list[tuple[int, str, float, float, dict[str, int]]]:
    """(nodes, command, median s, best s, sessions per host) on a converged Ray cluster."""
    from fixtures.orchcli import write_inventory

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        with cluster_hosts(work / "hosts", 3) as cluster:
            inventory = write_inventory(work / "inventory.yaml", cluster.inventory(connect_retries=0))
            for count in (2, 3):
                hosts = [f"n{i}" for i in range(1, count + 1)]
                plan = write_cluster_plan(
                    work, f"ray{count}", hosts, {"backend": "ray", "ray_args": RAY_ARGS},
                    {"tensor-parallel-size": 8, "pipeline-parallel-size": count}, bench=False)
                _, first = orch(["apply", str(plan), "-i", str(inventory)], work)
                if first.returncode != 0:
                    raise SystemExit(first.stdout + first.stderr)
                try:
                    for command in (["plan"], ["apply", "--skip", "smoke"]):
                        times, trips = [], {}
                        for _ in range(repeats):
                            marks = cluster.log_marks()
                            seconds, result = orch([command[0], str(plan), "-i", str(inventory),
                                                    *command[1:]], work)
                            if result.returncode != 0 or "- start" in result.stdout \
                                    or "- restart" in result.stdout:
                                raise SystemExit(result.stdout + result.stderr)
                            times.append(seconds)
                            trips = {h: n for h, n in cluster.round_trips(marks).items() if h in hosts}
                        rows.append((count, " ".join(command), statistics.median(times), min(times),
                                     trips))
                finally:
                    orch(["stop", str(plan), "-i", str(inventory)], work)
    return rows


def print_cluster(rows: list[tuple[int, str, float, float, dict[str, int]]], repeats: int) -> None:
    print(f"converged multi-node server (simulator on a real Ray cluster, network namespaces), "
          f"{repeats} runs")
    print(f"{'nodes':>5} | {'command':<19} | {'median s':>8} | {'best s':>6} | sessions per host")
    print("-" * 78)
    for count, command, median, best, trips in rows:
        listed = ", ".join(f"{h} {n}" for h, n in sorted(trips.items()))
        print(f"{count:>5} | {command:<19} | {median:>8.3f} | {best:>6.3f} | {listed}")


def real_files(venv: Path, pins: list[str]) -> int:
    """How many RECORD entries the pinned distributions have (what a probe checks)."""
    from orchestrator.facts.installed_files import record_rows

    site = next((venv / "lib").glob("python*/site-packages"))
    total = 0
    for pin in pins:
        name = pin.split("==")[0].replace("-", "_")
        for info in site.glob(f"{name}-*.dist-info"):
            total += len(record_rows((info / "RECORD").read_text()))
    return total


if __name__ == "__main__":
    sys.exit(main())
