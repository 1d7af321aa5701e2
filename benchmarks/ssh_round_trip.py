"""Cost of one remote command over loopback SSH, with and without TCP_NODELAY.

Starts a throwaway sshd (the test fixture's `SshServer`) and times `run("true")`, a 4 KiB
`put` and a 4 KiB `get` on one reused connection, for each combination of TCP_NODELAY on
the controller's socket and the host's shell rc (empty, or this machine's ~/.bashrc).
Prints medians of N runs in a table.

    .venv/bin/python benchmarks/ssh_round_trip.py [-n 30]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from fixtures.sshd import SshServer  # noqa: E402

from orchestrator.transport.command import Command  # noqa: E402
from orchestrator.transport.ssh import SshTransport  # noqa: E402
from orchestrator.transport.target import resolve_target  # noqa: E402


def _median_ms(action: Callable[[], object], n: int) -> float:
    action()  # warm-up
    times = []
    for _ in range(n):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def measure(server: SshServer, nodelay: bool, n: int, scratch: Path) -> dict[str, float]:
    inventory = server.inventory(1)
    transport = SshTransport(
        "h1", resolve_target("h1", inventory), inventory.ssh, nodelay=nodelay
    )
    started = time.perf_counter()
    transport.open()
    connect_ms = (time.perf_counter() - started) * 1000
    path = str(scratch / "blob")
    data = b"x" * 4096
    try:
        return {
            "connect": connect_ms,
            "run": _median_ms(lambda: transport.run(Command("true")), n),
            "put": _median_ms(lambda: transport.put(data, path), n),
            "get": _median_ms(lambda: transport.get(path), n),
        }
    finally:
        transport.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=30, help="timed runs per cell (default 30)")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="orch-bench-ssh-") as tmp:
        for shell_rc in (False, True):
            with SshServer(Path(tmp) / f"sshd-{shell_rc}", shell_rc=shell_rc) as server:
                for nodelay in (True, False):
                    figures = measure(server, nodelay, args.n, Path(tmp))
                    rows.append((shell_rc, nodelay, figures))
    print(f"median of {args.n} runs, one reused connection, loopback sshd (ms)")
    print(f"| {'shell rc':<16} | {'TCP_NODELAY':<11} | connect | run true | put 4 KiB | get 4 KiB |")
    print(f"|{'-' * 18}|{'-' * 13}|---------|----------|-----------|-----------|")
    for shell_rc, nodelay, f in rows:
        rc = "~/.bashrc" if shell_rc else "empty"
        print(
            f"| {rc:<16} | {'on' if nodelay else 'off':<11} | {f['connect']:7.1f} "
            f"| {f['run']:8.1f} | {f['put']:9.1f} | {f['get']:9.1f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
