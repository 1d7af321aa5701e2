"""`probe`: run the fact program on the host's python3 and read its answer, in one round trip."""

from __future__ import annotations

import shlex

from orchestrator.errors import ProbeError
from orchestrator.facts.answer import Facts, parse_answer
from orchestrator.facts.compiled import RUNNER
from orchestrator.facts.program import call_stdin
from orchestrator.facts.request import ProbeRequest
from orchestrator.transport.base import Transport
from orchestrator.transport.command import Command

# Runs the host's python3 (or python) on the program given on stdin. `-S`: the program is
# stdlib only, and a host's site-packages (conda's .pth files, say) can cost more than it.
# Read whole, not as `python3 -`: that reads its script one byte per read(2), 50,000 system
# calls for the probe (~40 ms of a host's CPU per probe, 16 hosts on one box: 0.6 s).
# The program's compiled code is kept on the host (facts/compiled.py).
HOST_PYTHON = Command.script(
    'exec "$(command -v python3 || command -v python || echo python3)" -S -c ' + shlex.quote(
        RUNNER + "import sys\n_orch_run(sys.stdin.buffer.read(), globals())\n")
)


def build_stdin(request: ProbeRequest) -> bytes:
    return call_stdin("main", request.to_json())


PROBE_TIMEOUT_S = 120.0


def probe(transport: Transport, request: ProbeRequest, *,
          timeout: float = PROBE_TIMEOUT_S) -> Facts:
    """Run the fact program on the host: one round trip."""
    result = transport.run(HOST_PYTHON, stdin=build_stdin(request), timeout=timeout, check=False)
    if result.returncode != 0:
        raise probe_failed(transport.host, result.stderr, exit_code=result.returncode)
    return parse_answer(result.stdout)


def probe_failed(host: str, said: str, *, exit_code: int | None = None) -> ProbeError:
    """The error of a fact program that failed (run alone, or by the lock program)."""
    code = "" if exit_code is None else f" (exit {exit_code})"
    return ProbeError(
        f"{host}: the fact program failed{code}: {said.strip()[-500:]}",
        hint="the host needs python3 (3.8 or newer) on the PATH of a non-interactive shell",
    )
