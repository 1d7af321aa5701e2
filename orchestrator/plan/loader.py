"""Load a plan: read its layers, merge them, fill in `${vars.NAME}`, validate.

Layers, lowest first: the `extends:` chain (bases before the files that extend them), the
plan file, each `-f` overlay (which may have its own `extends:`), then each `--set`. See
`layers.py` for the merge rules. Every failure is one PlanError that points at the layer,
line and column responsible; no partial plan ever leaves this module.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from orchestrator import masking
from orchestrator.errors import OrchError, PlanError
from orchestrator.masking import mask
from orchestrator.plan.layers import (
    apply_set,
    get_path,
    merge,
    parse_set,
    set_argument,
    update_origins,
)
from orchestrator.plan.meaning import controller_path, expand, patterns
from orchestrator.plan.models import Plan
from orchestrator.plan.secrets import (
    SECRET_FIELDS,
    SECRETS_HINT,
    literal_secrets,
    misplaced_secrets,
)
from orchestrator.plan.source import (
    Document,
    FieldPath,
    Origin,
    arg_snippet,
    display_path,
    dotted,
    read_document,
    resolve_path,
)
from orchestrator.plan.validation import Positions, Problem, problem_error, validate
from orchestrator.plan.variables import (
    ReferenceProblem,
    resolve_vars,
    substitute_vars,
    whole_references,
)

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class LoadedPlan:
    """A validated plan and where each of its values came from."""

    plan: Plan
    path: Path  # the plan file (absolute)
    base_dir: Path  # its directory
    layers: list[str]  # files and --set arguments, in merge order
    field_origins: dict[str, Origin]  # dotted field path -> the layer (and line) that set it
    data: dict[str, Any]  # merged mapping after vars substitution, before validation
    digest: str  # sha256 of the canonical JSON of the resolved plan (masked)
    positions: Positions | None = None  # where each path came from: a later validation's errors

    @property
    def origins(self) -> dict[str, str]:
        """Dotted field path -> "file:line" or "--set a.b=c", for people."""
        return {key: str(origin) for key, origin in self.field_origins.items()}


def load_plan(
    path: Path | str, overlays: Sequence[Path | str] = (), sets: Sequence[str] = ()
) -> LoadedPlan:
    """Read, layer, substitute and validate a plan; raise one PlanError on any problem."""
    main = Path(path)
    cache: dict[Path, Document] = {}
    documents = _chain(main, "plan file", cache, ())
    root = documents[-1][0].values[()]  # missing top-level keys point at the plan file
    for overlay in overlays:
        documents += _chain(Path(overlay), "overlay file", cache, ())

    layering = _Layering()
    for doc, directory in documents:
        layering.add_document(doc, directory)
    for text in sets:
        layering.add_set(text)
    data = layering.data
    positions = Positions(keys=layering.keys, values=layering.values,
                          texts={doc.name: doc.text for doc, _ in documents},
                          order=layering.layers, root=root, via_vars=whole_references(data),
                          deleted=layering.deleted)
    data = _substitute(data, positions)
    _anchor_local_paths(data, positions, layering.directories)
    plan = validate(Plan, data, positions)
    _check_secret_places(plan, positions)
    _check_local_files(plan, positions)

    resolved = resolve_path(main, what="plan")
    return LoadedPlan(
        plan=plan,
        path=resolved,
        base_dir=resolved.parent,
        layers=layering.layers,
        field_origins=_origins(layering.keys, data),
        data=data,
        digest=plan_digest(plan),
        positions=positions,
    )


@dataclass
class _Layering:
    """The merged data so far, and the layer (and line) each key and value came from."""

    data: dict[str, Any] = field(default_factory=dict)
    keys: dict[FieldPath, Origin] = field(default_factory=dict)
    values: dict[FieldPath, Origin] = field(default_factory=dict)
    layers: list[str] = field(default_factory=list)
    directories: dict[str, Path] = field(default_factory=dict)
    deleted: dict[FieldPath, Origin] = field(default_factory=dict)

    def add_document(self, doc: Document, directory: Path) -> None:
        self.keys = update_origins(self.keys, self.data, (), doc.data, doc.keys.get)
        self.values = update_origins(self.values, self.data, (), doc.data, doc.values.get)
        self.data = merge(self.data, doc.data)
        self.layers.append(doc.name)
        self.directories[doc.name] = directory

    def add_set(self, text: str) -> None:
        """One `--set a.b=c` on top of everything below it."""
        argument = set_argument(text)
        segments, value = parse_set(text)
        if segments[0] == "extends":
            raise PlanError(
                "extends cannot be set with --set: the base plans are read before any --set",
                file=argument, snippet=arg_snippet(argument, len("--set ")),
                hint="add the base plan with -f FILE (an overlay), or name it in the plan file",
            )
        new_data, field_path = apply_set(self.data, segments, value, argument=argument)
        if value is None:
            self.deleted[field_path] = Origin(argument, None, len("--set "))
        _, below = get_path(self.data, field_path)
        key_origin = Origin(argument, None, len("--set "))
        value_origin = Origin(argument, None, len(argument) - len(text) + text.index("=") + 1)
        for size in range(1, len(field_path)):  # maps the --set created on its way down
            self.keys.setdefault(field_path[:size], key_origin)
        self.keys = update_origins(self.keys, below, field_path, value, _always(key_origin))
        self.values = update_origins(self.values, below, field_path, value,
                                     _always(value_origin))
        self.data = new_data
        self.layers.append(argument)


def _origins(keys: dict[FieldPath, Origin], data: dict[str, Any]) -> dict[str, Origin]:
    """Dotted path -> origin, for every path of the final data. Values inside a list are left
    out when they come from the layer that set the list (a list is set as a whole)."""
    out: dict[str, Origin] = {}
    for field_path, origin in keys.items():
        if not field_path or not get_path(data, field_path)[0]:
            continue
        lists = [i for i, part in enumerate(field_path) if isinstance(part, int)]
        if lists:
            enclosing = keys.get(field_path[: lists[-1]])
            if enclosing is not None and enclosing.layer == origin.layer:
                continue
        out[dotted(field_path)] = origin
    return out


def _always(origin: Origin) -> Callable[[FieldPath], Origin]:
    return lambda _path: origin


def plan_digest(plan: Plan) -> str:
    """sha256 hex of the plan's canonical JSON, with registered secrets masked."""
    canonical = json.dumps(plan.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(mask(canonical).encode()).hexdigest()


def load_validated_yaml(
    path: Path | str, model_cls: type[M], *, error: type[OrchError] = PlanError,
    what: str = "file",
) -> M:
    """Read one YAML file and validate it with `model_cls`; failures are positioned like plan
    errors and raised as `error` (e.g. InventoryError)."""
    try:
        doc = read_document(Path(path), what=what)
        positions = Positions(
            keys=doc.keys, values=doc.values, texts={doc.name: doc.text}, order=[doc.name]
        )
        return validate(model_cls, doc.data, positions)
    except PlanError as failure:
        if issubclass(error, PlanError):
            raise
        raise error(str(failure)) from None


def _chain(
    path: Path, what: str, cache: dict[Path, Document], stack: tuple[Path, ...]
) -> list[tuple[Document, Path]]:
    """The documents of `path`'s extends chain, bases first, then `path` itself."""
    resolved = resolve_path(path, what=what)
    if resolved not in cache:
        cache[resolved] = read_document(path, what=what)
    doc = cache[resolved]
    stack = (*stack, resolved)
    out: list[tuple[Document, Path]] = []
    for index, base, origin in _bases(doc):
        try:
            target = resolve_path(resolved.parent / base, what="base plan")
        except PlanError as loop:
            raise _at(doc, origin, loop.message, path=_extends_path(doc, index)) from None
        if target in stack:
            chain = " -> ".join(display_path(p) for p in (*stack[stack.index(target) :], target))
            raise _at(
                doc,
                origin,
                f"extends cycle: {chain}",
                path=_extends_path(doc, index),
                hint="a plan cannot extend itself, directly or through its bases",
            )
        if not target.is_file():
            raise _at(
                doc,
                origin,
                f"base plan not found: {display_path(target)}",
                path=_extends_path(doc, index),
                expected="a plan file path relative to this file",
            )
        out += _chain(target, "base plan", cache, stack)
    out.append((doc, resolved.parent))
    return out


def _bases(doc: Document) -> list[tuple[int, str, Origin]]:
    extends = doc.data.get("extends")
    if extends is None:
        return []
    items = [extends] if isinstance(extends, str) else extends
    if not isinstance(items, list) or not all(isinstance(i, str) and i for i in items):
        origin = doc.values[("extends",)]
        raise _at(
            doc,
            origin,
            "extends must name base plan files",
            path=("extends",),
            expected="a file name or a list of file names, relative to this file",
        )
    if isinstance(extends, str):
        return [(0, extends, doc.values[("extends",)])]
    return [(i, item, doc.values[("extends", i)]) for i, item in enumerate(items)]


def _extends_path(doc: Document, index: int) -> FieldPath:
    return ("extends",) if isinstance(doc.data.get("extends"), str) else ("extends", index)


def _at(
    doc: Document,
    origin: Origin,
    message: str,
    *,
    path: FieldPath = (),
    expected: str | None = None,
    hint: str | None = None,
) -> PlanError:
    """A PlanError pointing at `origin` in `doc`."""
    problem = Problem(path, message, origin, expected=expected, hint=hint, name_field=False)
    return problem_error(problem, Positions(keys={}, values={}, texts={doc.name: doc.text}))


def _substitute(data: dict[str, Any], positions: Positions) -> dict[str, Any]:
    raw_vars = data.get("vars")
    try:
        variables = resolve_vars(raw_vars) if isinstance(raw_vars, dict) else {}
        out = {
            key: (
                variables
                if key == "vars" and isinstance(raw_vars, dict)
                else substitute_vars(value, variables, (key,))
            )
            for key, value in data.items()
        }
    except ReferenceProblem as problem:
        raise problem_error(
            Problem(
                problem.path,
                problem.message,
                positions.locate(problem.path),
                expected=problem.expected,
                hint=problem.hint,
            ),
            positions,
        ) from None
    return out


def _local_path_fields(data: dict[str, Any]) -> list[FieldPath]:
    """Paths of the fields that name files on the controller: those marked CONTROLLER_PATH in
    plan/models/ (templates, datasets, tokenizers)."""
    return [path for pattern in patterns(Plan, controller_path) for path in expand(data, pattern)]


def _anchor_local_paths(
    data: dict[str, Any], positions: Positions, directories: dict[str, Path]
) -> None:
    """Make relative template/dataset paths absolute, relative to the file that wrote them."""
    for field_path in _local_path_fields(data):
        _, value = get_path(data, field_path)
        if not isinstance(value, str) or not value:
            continue
        origin = positions.locate(field_path)
        directory = directories.get(origin.layer, Path.cwd()) if origin else Path.cwd()
        if field_path[-1] == "template":
            _template_inside(value, directory, field_path, positions)
        elif value.startswith(("/", "~")):
            continue
        _, parent = get_path(data, field_path[:-1])
        parent[field_path[-1]] = str(directory / value)


def _template_inside(value: str, directory: Path, field_path: FieldPath,
                     positions: Positions) -> None:
    """A template comes from the folder of the file that names it (the plan's repository):
    `orch plan` prints its text in a diff, so it must not read whatever the controller holds."""
    relative = Path(value)
    inside = not relative.is_absolute() and not value.startswith("~") and ".." not in relative.parts
    if inside:
        try:
            (directory / relative).resolve().relative_to(directory.resolve())
        except (ValueError, OSError, RuntimeError):  # a symlink out of the folder, or a loop
            inside = False
    if not inside:
        raise problem_error(Problem(
            field_path, f"template {value!r} is outside the folder of the file that names it",
            positions.locate(field_path),
            expected="a path relative to that file, within its folder (no '..', no absolute "
                     "path, no ~)"), positions)


def _check_secret_places(plan: Plan, positions: Positions) -> None:
    """A `${env:NAME}` where the host would not get its value privately (a script, a prompt,
    a command line) is refused here, so `orch validate` says it at its line, not `orch plan`."""
    _check_literal_secrets(plan, positions)
    misplaced = misplaced_secrets(plan)
    if not misplaced:
        return
    name, field_path = misplaced[0]
    raise problem_error(
        Problem(
            field_path,
            f"${{env:{name}}} cannot stand here: a secret is filled in only where a host "
            "receives it privately, never in a script, a prompt or a command line",
            positions.locate(field_path),
            expected=f"a secret reference only in {', '.join(SECRET_FIELDS)}",
            hint=SECRETS_HINT,
        ),
        positions,
    )


def _check_literal_secrets(plan: Plan, positions: Positions) -> None:
    """A secret written out (`HF_TOKEN: hf_...`, in a file or by --set) would be kept in
    clear in the run folder's plan.yaml and meta.json: refused at its line, the value masked
    where the error quotes it."""
    found = literal_secrets(plan)
    for _, value in found:
        masking.register(value)
    if not found:
        return
    field_path = found[0][0]
    name = "NAME" if field_path[-1] in ("api_key", "token") else str(field_path[-1])
    raise problem_error(Problem(
        field_path, "a secret written out in the plan would be kept in clear in the run "
        "folder (plan.yaml, meta.json)", positions.locate(field_path),
        expected=f"a secret reference, ${{env:{name}}}, its value exported where orch runs",
        hint=f"write '${{env:{name}}}' here and export {name}=... before running orch"),
        positions)


def _check_local_files(plan: Plan, positions: Positions) -> None:
    checks: list[tuple[FieldPath, str | None, str]] = [
        (("files", i, "template"), spec.template, "template") for i, spec in enumerate(plan.files)
    ]
    if plan.bench is not None:
        checks.append((("bench", "dataset"), plan.bench.dataset, "dataset"))
        checks.append((("bench", "tokenizer"), plan.bench.tokenizer, "tokenizer"))
    for field_path, value, what in checks:
        if value is None:
            continue
        file = Path(value).expanduser()
        if what == "tokenizer" and file.is_dir():
            file = file / "tokenizer.json"
        if not file.is_file():
            raise problem_error(
                Problem(
                    field_path,
                    f"{what} file not found: {display_path(file)}",
                    positions.locate(field_path),
                    expected=f"a readable local {'tokenizer.json or a folder holding one' if what == 'tokenizer' else 'file'}"
                    " (a relative path is relative to the plan file that sets it)",
                ),
                positions,
            )


def locate(error: PlanError, loaded: LoadedPlan) -> PlanError:
    """A PlanError raised after loading (e.g. while rendering the launch command), pointed
    at the layer that set its field, when it does not say where already."""
    if error.file is not None or not error.field:
        return error
    field = error.field
    while field and field not in loaded.field_origins:  # service.args.port -> service.args -> ...
        field = field.rpartition(".")[0]
    origin = loaded.field_origins.get(field)
    if origin is None:
        return error
    located = PlanError(
        error.message, field=error.field, expected=error.expected, hint=error.hint,
        file=origin.layer, line=origin.line,
    )
    return located
