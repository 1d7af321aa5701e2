"""What the host side of every fact shares: reading a file, running a tool, and `main`, the
entry point of the program shipped to the host (program.py assembles it and fills `GATHER`
with each fact's gatherer)."""
# ruff: noqa: UP006, UP035, UP045 - the host side runs on Python 3.8 hosts
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional

# == host side: shipped to the host (stdlib only, Python 3.8) ==

# Each fact's `gather(request, answer)`, in the order program.py lists them.
GATHER: List[Callable[[Dict[str, Any], Dict[str, Any]], None]] = []


def read_text(path: str) -> Optional[str]:
    """A regular file's text, or None: a FIFO or a device where a file is read (a venv's
    pyvenv.cfg) would hold the probe, and `orch plan`, forever."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(os.dup(fd), encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None
    finally:
        os.close(fd)


def run_tool(argv: List[str], timeout: float = 10.0) -> Optional[str]:
    """A tool's output, or None when it is not on the PATH, fails or takes too long."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def main(request: Dict[str, Any]) -> None:
    """Gather what `request` asks for; print it as one JSON document."""
    started = time.time()
    answer: Dict[str, Any] = {"probe_version": 1}
    for gather in GATHER:
        gather(request, answer)
    answer["probe_seconds"] = round(time.time() - started, 4)
    sys.stdout.write(json.dumps(answer))
    sys.stdout.write("\n")
