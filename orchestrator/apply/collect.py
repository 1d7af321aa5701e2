"""The collect stage, run whatever happened before it: every log of the service's processes
and the plan's `collect:` files, read in one round trip (any content survives the trip: a
file longer than MAX_COLLECT_BYTES keeps its end; a FIFO or a device is never read)."""

from __future__ import annotations

import base64

from orchestrator.errors import StepError
from orchestrator.plan.models import Plan
from orchestrator.runs.writer import RunFolder
from orchestrator.service.step import ServiceStep
from orchestrator.transport.base import Transport
from orchestrator.transport.command import Command, quoted

MAX_COLLECT_BYTES = 64 * 1024 * 1024  # a longer file keeps its end (a log's last part)

# `fetch PATH`: `ok|cut BASE64` for a regular file (`cut`: its last MAX_COLLECT_BYTES), `err
# BASE64` for anything else. A FIFO is never opened (it would block), nor a device read (it
# would never end): only what `test -f` calls a regular file is.
_FETCH = (
    "fetch() { "
    "if [ -f \"$1\" ]; then "
    f"if [ \"$(stat -L -c %s \"$1\")\" -gt {MAX_COLLECT_BYTES} ]; then s=cut; else s=ok; fi; "
    f"if out=$(tail -c {MAX_COLLECT_BYTES} < \"$1\" 2>/dev/null | base64 -w0) "
    "&& [ -r \"$1\" ]; then echo \"$s $out\"; "
    "else echo \"err $(cat \"$1\" 2>&1 >/dev/null | head -c 300 | base64 -w0)\"; fi; "
    "elif [ -e \"$1\" ]; then "
    "echo \"err $(echo \"not a regular file: $(stat -L -c %F \"$1\")\" | base64 -w0)\"; "
    "else echo \"err $(cat \"$1\" 2>&1 >/dev/null | head -c 300 | base64 -w0)\"; fi; }"
)


def collect(transport: Transport, host: str, plan: Plan, folder: RunFolder,
            units: list[ServiceStep]) -> str:
    """Every unit's log and the plan's collect: files into the run folder."""
    paths = [unit.paths.log for unit in units] + [item.path for item in plan.collect]
    found = read_files(transport, paths)  # every log and collected file: one round trip
    got, notes = 0, []
    for unit in units:
        text, _ = found[unit.paths.log]
        if text:
            folder.write_service_log(host, text, unit.unit)
            got += 1
    for item in plan.collect:
        text, why = found[item.path]
        if text is None:
            if not item.optional:
                raise StepError(f"{host}: cannot collect {item.path}: {why}")
            if why.startswith("not a regular file"):  # a missing optional file is normal
                notes.append(f"skipped {item.path}: {why}")
            continue
        folder.write_collected(host, item.path, text)
        got += 1
        if why:
            notes.append(f"kept {why} of {item.path}")
    return "; ".join([f"{got} files", *notes])


def read_files(transport: Transport, paths: list[str]) -> dict[str, tuple[str | None, str]]:
    """path -> (its text, or None and why not), all in one command, so any content survives
    the trip. A file longer than MAX_COLLECT_BYTES comes back as its end, said in the second
    item; anything but a regular file (a FIFO, a device, a folder) comes back as None."""
    if not paths:
        return {}
    script = "; ".join([_FETCH, *(f"fetch {quoted(path)}" for path in paths)])
    lines = transport.run(Command.script(script), check=False).stdout.splitlines()
    out: dict[str, tuple[str | None, str]] = {}
    for path, line in zip(paths, lines + [""] * (len(paths) - len(lines)), strict=True):
        status, _, data = line.partition(" ")
        text = base64.b64decode(data).decode("utf-8", "replace")
        if status == "ok":
            out[path] = (text, "")
        elif status == "cut":
            out[path] = (text, f"its last {MAX_COLLECT_BYTES // 2**20} MiB")
        else:
            out[path] = (None, text.strip() or "no answer")
    return out
