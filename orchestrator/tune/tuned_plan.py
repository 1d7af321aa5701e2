"""plans/<name>.tuned.yaml: the winner as a plan of its own, beside the plan it tuned. It
extends the original and sets only what the winner changed (plus the tune's own --sets),
removes the tune: and matrix: sections, and names the tune folder it came from in a
comment: `orch apply` of it is the winner's deployment. The tune's `-f` overlays are bases of
it too, after the plan (the order the tune merged them in)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from orchestrator import local_files
from orchestrator.plan.layers import parse_set
from orchestrator.plan.models.matrix import canonical


def tuned_path(plan_file: Path) -> Path:
    return plan_file.with_name(f"{plan_file.stem}.tuned.yaml")


def _nest(out: dict[str, Any], path: list[str] | tuple[str, ...], value: Any) -> None:
    node = out
    for segment in path[:-1]:
        node = node.setdefault(segment, {})
    node[path[-1]] = value


def tuned_text(plan_file: Path, sets: list[str], changed: dict[str, Any], comment: str,
               overlays: Sequence[Path] = ()) -> str:
    body: dict[str, Any] = {}
    for text in sets:
        path, value = parse_set(text)
        _nest(body, path, value)
    for key, value in changed.items():
        _nest(body, canonical(key), value)
    target = tuned_path(plan_file)
    bases = [os.path.relpath(p, target.parent) for p in (plan_file, *overlays)]
    head = {"extends": bases[0] if len(bases) == 1 else bases}
    tail = {"tune": None, "matrix": None}
    lines = [f"# {line}" for line in comment.splitlines()]
    return "\n".join(lines) + "\n" + yaml.safe_dump({**head, **body, **tail}, sort_keys=False)


def write_tuned(plan_file: Path, sets: list[str], changed: dict[str, Any], comment: str,
                overlays: Sequence[Path] = ()) -> Path:
    target = tuned_path(plan_file)
    local_files.write_atomic(target, tuned_text(plan_file, sets, changed, comment, overlays))
    return target
