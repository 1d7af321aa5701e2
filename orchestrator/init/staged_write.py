"""Both files of `orch init` put in place together or not at all: each is written to a
temporary file beside its target, validated (validation.py), then linked or renamed into
place; on any failure nothing is left behind (no temporary file, no directory this created,
no plan without its inventory). Existing files are kept unless `force`."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from orchestrator.errors import OrchError
from orchestrator.init.documents import render_inventory, render_plan
from orchestrator.init.spec import InitSpec
from orchestrator.init.validation import validate


def write_files(spec: InitSpec, directory: Path, *, force: bool) -> list[tuple[Path, bool]]:
    """Validate, then put both files in place; (path, overwritten) for each. On any failure
    nothing is left behind: no temporary file, no directory this call created."""
    texts = {directory / "plans" / f"{spec.name}.yaml": render_plan(spec),
             directory / "inventory" / f"{spec.name}.yaml": render_inventory(spec)}
    existing = [path for path in texts if os.path.lexists(path)]
    if existing and not force:
        raise OrchError(f"{_and(existing)} already exist{'s' if len(existing) == 1 else ''}; "
                        "nothing was written", hint="pass --force to overwrite")
    created: list[Path] = []
    staged: dict[Path, Path] = {}
    placed: list[Path] = []
    try:
        for path, text in texts.items():
            created += _make_dirs(path.parent)
            staged[path] = _stage(path, text)
        plan_file, inventory_file = staged.values()
        validate(spec, plan_file, inventory_file)
        for path, temporary in staged.items():
            _place(temporary, path, force=force)
            placed.append(path)
    except BaseException as error:
        for temporary in staged.values():
            _remove(temporary)
        if not force:
            for path in placed:  # the inventory could not follow the plan: take it back
                _remove(path)
        for folder in reversed(created):
            with contextlib.suppress(OSError):  # not empty: someone else's files now
                folder.rmdir()
        if isinstance(error, OSError):  # a full disk, a --dir that is a file, ...
            where = f" {error.filename}" if error.filename else ""
            raise OrchError(f"cannot write{where}: {error.strerror or error}") from None
        raise
    return [(path, path in existing) for path in texts]


def _and(paths: list[Path]) -> str:
    return " and ".join(str(path) for path in paths)


def _make_dirs(folder: Path) -> list[Path]:
    """Create `folder` and its missing parents; the ones created, outermost first."""
    missing: list[Path] = []
    for candidate in [folder, *folder.parents]:
        if os.path.lexists(candidate):
            break
        missing.append(candidate)
    for candidate in reversed(missing):
        candidate.mkdir()
    return list(reversed(missing))


def _stage(path: Path, text: str) -> Path:
    """A temporary file beside `path` (same file system, so the rename is atomic). Its name
    is fixed, never built from NAME."""
    handle, name = tempfile.mkstemp(dir=path.parent, prefix=".orch-init-", suffix=".yaml")
    with os.fdopen(handle, "w", encoding="utf-8") as file:
        file.write(text)
    umask = os.umask(0o022)
    os.umask(umask)
    os.chmod(name, 0o666 & ~umask)  # mkstemp's 0600 would outlive the rename
    return Path(name)


def _place(temporary: Path, path: Path, *, force: bool) -> None:
    if force:
        os.replace(temporary, path)
        return
    try:
        os.link(temporary, path)  # fails if the file appeared meanwhile: never clobbers it
    except FileExistsError:
        raise OrchError(f"{path} already exists; nothing was written",
                        hint="pass --force to overwrite") from None
    except OSError:  # no hard links on this file system: check, then rename
        if os.path.lexists(path):
            raise OrchError(f"{path} already exists; nothing was written",
                            hint="pass --force to overwrite") from None
        os.replace(temporary, path)
        return
    os.unlink(temporary)


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
