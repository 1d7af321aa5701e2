"""Where a test run's time went, from its timeline (ORCH_TEST_TIMELINE=FILE scripts/test):
each worker's busy and idle time and when it finished, and the files that took longest.

    ORCH_TEST_TIMELINE=/tmp/timeline.tsv scripts/test
    python scripts/test_timeline.py /tmp/timeline.tsv
    python scripts/test_timeline.py /tmp/timeline.tsv --write tests/durations.tsv

`--write` records each file's seconds for tests/conftest.py, which starts the longest first.
"""

from __future__ import annotations

import signal
import sys
from collections import defaultdict

HEADER = ("# seconds each test file took in a whole run (scripts/test_timeline.py --write): the\n"
          "# longest start first, so no worker is left with a long file at the end\n")


def main(path: str, write: str | None = None, top: int = 15) -> None:
    rows = []
    with open(path) as lines:
        for line in lines:
            worker, start, end, nodeid, *cpu = line.rstrip("\n").split("\t")
            rows.append((worker, float(start), float(end), nodeid, float(cpu[0]) if cpu else 0.0))
    if not rows:
        sys.exit(f"{path}: no tests recorded")
    origin = min(row[1] for row in rows)
    workers: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    files: dict[str, list[float]] = defaultdict(lambda: [float("inf"), 0.0, 0.0, 0.0])
    for worker, start, end, nodeid, cpu in rows:
        workers[worker].append((start - origin, end - origin, cpu))
        span = files[nodeid.split("::", 1)[0]]
        span[0], span[1] = min(span[0], start - origin), max(span[1], end - origin)
        span[2] += end - start
        span[3] += cpu
    print(f"{'worker':<8} {'tests':>6} {'busy s':>8} {'CPU s':>7} {'ends at s':>10} "
          f"{'idle before end s':>18}")
    for worker, spans in sorted(workers.items()):
        busy = sum(end - start for start, end, _ in spans)
        last = max(end for _, end, _ in spans)
        print(f"{worker:<8} {len(spans):>6} {busy:>8.0f} {sum(c for *_, c in spans):>7.0f} "
              f"{last:>10.0f} {last - busy:>18.0f}")
    print("\nCPU s: the worker's and the processes it waited for (orch runs, sshd, simulators "
          "it started), not daemons they left running")
    print(f"\n{'file':<60} {'from s':>7} {'to s':>7} {'in tests s':>10} {'CPU s':>7}")
    longest = sorted(files.items(), key=lambda f: -f[1][2])
    for name, (start, end, busy, cpu) in longest[:top]:
        print(f"{name:<60} {start:>7.0f} {end:>7.0f} {busy:>10.0f} {cpu:>7.0f}")
    if write:
        with open(write, "w") as out:
            out.write(HEADER + "".join(f"{name}\t{busy:.0f}\n" for name, (_, _, busy, _) in longest
                                       if busy >= 2))


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends it quietly
    arguments = sys.argv[1:]
    if arguments[:1] in (["-h"], ["--help"]):
        print(__doc__)
        sys.exit(0)
    if len(arguments) not in (1, 3) or (len(arguments) == 3 and arguments[1] != "--write"):
        sys.exit(__doc__)
    main(arguments[0], arguments[2] if len(arguments) == 3 else None)
