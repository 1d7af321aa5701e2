"""No-op re-apply overhead over loopback SSH: whole-command wall time and remote round trips.

A plan with 10 pinned packages (small real wheels) and 10 files is applied once to converge,
then re-applied REPEATS times; the table shows the median wall time of the whole `orch apply`
process and the sessions each host opened (counted from the sshd log), at 1 and 4 hosts.
For scale (the anchors note): Ansible 8.0 s / 19.0 s, pyinfra 2.4 s / 3.8 s for a comparable
10-step converge at 1 / 4 hosts. Goals: <= 2 round trips per host, <= 0.8 s (1 host), <= 1.0 s
(4 hosts).

    .venv/bin/python benchmarks/apply_overhead.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fixtures.sshd import SshServer  # noqa: E402
from fixtures.wheels import make_wheel  # noqa: E402


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


def orch(args: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    command = [str(ROOT / ".venv" / "bin" / "orch"), *args]
    started = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    return time.perf_counter() - started, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    options = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        wheels = work / "wheels"
        for i in range(10):
            make_wheel(wheels, f"orchbench-p{i}", f"1.0.{i}")
        with SshServer(work / "sshd") as server:
            for count in (1, 4):
                inventory = server.inventory(count)
                inv_file = work / f"inventory-{count}.yaml"
                inv_file.write_text(yaml.safe_dump(inventory.model_dump(mode="json")))
                # Hosts share this machine's disk: one venv and one set of files serves all.
                plan = write_plan(work, wheels, "all")
                _, first = orch(["apply", str(plan), "-i", str(inv_file)], work)
                if first.returncode != 0:
                    print(first.stdout, first.stderr, file=sys.stderr)
                    return 1
                times, trips = [], []
                for _ in range(options.repeats):
                    mark = server.log_mark()
                    seconds, result = orch(["apply", str(plan), "-i", str(inv_file)], work)
                    if result.returncode != 0 or "changed" in result.stdout.split("recap")[0]:
                        print(result.stdout, result.stderr, file=sys.stderr)
                        return 1
                    times.append(seconds)
                    trips.append(max(server.round_trips(inventory, since=mark).values()))
                rows.append((count, statistics.median(times), min(times), max(trips)))
    goal = {1: 0.8, 4: 1.0}
    print(f"no-op re-apply, 10 pins + 10 files, loopback sshd, {options.repeats} runs, "
          f"{os.cpu_count()} cores")
    print(f"{'hosts':>5} | {'median wall s':>13} | {'best s':>6} | {'round trips/host':>16} | goal")
    print("-" * 66)
    for count, median, best, trips in rows:
        ok = "met" if median <= goal[count] and trips <= 2 else "missed"
        print(f"{count:>5} | {median:>13.3f} | {best:>6.3f} | {trips:>16} | "
              f"<= {goal[count]} s, <= 2 trips: {ok}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
