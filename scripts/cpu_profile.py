"""Where a command's CPU went, machine-wide: every process that ended while it ran, by kind.

    python3 scripts/cpu_profile.py scripts/test          (as root)

Runs the command with the kernel's process accounting on (acct(2): one record per process
that exits, with its CPU time and name), while a sampler reads the command lines in /proc
every 0.2 s, so that a Python process is known by what it ran. Then prints CPU seconds by
kind: vLLM, Ray, the tests' forked `orch` runs, `orch sim serve`, pip, uv, the remote
programs of orch (probe, lock), sshd... Processes sshd starts count too (a cgroup of the
command would miss them). Processes still alive at the end are not counted."""

from __future__ import annotations

import collections
import ctypes
import os
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time

_RECORD = struct.Struct("<BBHIIIIIIfHHHHHHHH16s")  # struct acct_v3 (linux/acct.h)
_KINDS = [  # (words of the command line, kind), the first that matches
    (("cpu_profile.py",), "this profiler"),
    (("fixtures/zygote.py",), "tests: forked orch runs (and their zygotes)"),
    (("quick_venv.py",), "tests: quick venv copies"),
    (("-m pytest", "execnet", "exec(eval(sys.stdin.readline("), "tests: pytest and its workers"),
    (("orchestrator.cli apply",), "orch apply (fresh process)"),
    (("orchestrator.cli",), "orch, other commands (fresh process)"),
    (("orchestrator.sim", "bin/orch sim"), "orch sim serve (simulated engines)"),
    (("vllm", "VLLM::"), "vLLM"),
    (("ray", "raylet", "gcs_server"), "Ray"),
    (("-m venv", "ensurepip"), "python -m venv"),
    (("-m pip",), "pip"),
    (("import errno, fcntl",), "orch's lock program (on hosts)"),
    (("exec(compile(sys.stdin",), "orch's probe and other stdin programs (on hosts)"),
    (("llama-server",), "llama.cpp server"),
    (("uv ", "/uv"), "uv"),
    (("sshd",), "sshd"),
]


def _comp(value: int) -> float:
    """comp_t: 13 bits of mantissa, 3 of base-8 exponent, in clock ticks."""
    return float((value & 0x1FFF) << (3 * (value >> 13)))


def _kind(comm: str, command: str) -> str:
    text = f"{command} {comm}"
    for words, kind in _KINDS:
        if any(word in text for word in words):
            return kind
    return f"other: {comm}"


def _sample(lines: dict[int, str], stop: threading.Event) -> None:
    """Command lines by pid; a pid seen again is read again only while it may still exec
    (a fork of pytest or of the zygote shows its parent's line until then)."""
    while not stop.is_set():
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            pid = int(name)
            known = lines.get(pid)
            if known is not None and not any(w in known for w in ("pytest", "zygote", "orchestrator.cli")):
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as file:
                    line = file.read().replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                continue
            if line:
                lines[pid] = line[:300]
        stop.wait(0.2)


def main(command: list[str]) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    with tempfile.TemporaryDirectory() as folder:
        records = os.path.join(folder, "pacct")
        with open(records, "wb"):
            pass
        if libc.acct(records.encode()) != 0:
            sys.exit(f"acct(2) failed: {os.strerror(ctypes.get_errno())} (needs root)")
        lines: dict[int, str] = {}
        stop = threading.Event()
        sampler = threading.Thread(target=_sample, args=(lines, stop), daemon=True)
        sampler.start()
        began = time.monotonic()
        try:
            code = subprocess.call(command)
        finally:
            libc.acct(None)
            stop.set()
        wall = time.monotonic() - began
        with open(records, "rb") as file:
            data = file.read()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu: dict[str, float] = collections.defaultdict(float)
    count: collections.Counter[str] = collections.Counter()
    for offset in range(0, len(data) - _RECORD.size + 1, _RECORD.size):
        fields = _RECORD.unpack_from(data, offset)
        pid, utime, stime, comm = fields[6], fields[10], fields[11], fields[18]
        name = comm.split(b"\0")[0].decode(errors="replace")
        kind = _kind(name, lines.get(pid, ""))
        cpu[kind] += (_comp(utime) + _comp(stime)) / ticks
        count[kind] += 1
    print(f"\n{wall:.0f} s of wall time, {sum(cpu.values()):.0f} CPU-seconds in the processes "
          f"that ended, exit {code}\n\n{'CPU s':>8} {'processes':>10}  kind")
    for kind, seconds in sorted(cpu.items(), key=lambda item: -item[1])[:25]:
        print(f"{seconds:>8.1f} {count[kind]:>10}  {kind}")
    return code


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends it quietly
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if len(sys.argv) >= 2 else 64)
    sys.exit(main(sys.argv[1:]))
