"""YAML files read with the position of every key and value, and carets under them.

PyYAML's composer gives nodes with start marks; we build plain Python data from the nodes
ourselves so that every path (`("service", "args", "tensor-parallel-size")`) keeps the line
and column of its key and of its value. Error messages point at these positions.

Mapping keys are taken as written (`on:` stays the string "on", not YAML 1.1's `True`):
keys in orch files are always names. Duplicate keys are an error, not a silent override.
"""

from __future__ import annotations

import errno
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from orchestrator import local_files
from orchestrator.errors import PlanError

FieldPath = tuple[str | int, ...]


def dotted(path: FieldPath) -> str:
    """`service.args.port`, `files.0.mode`: a field path as plans and errors write it."""
    return ".".join(str(part) for part in path)

_MAX_DEPTH = 64
_MAX_NODES = 100_000  # bounds alias expansion ("billion laughs") and runaway files
_MERGE_TAG = "tag:yaml.org,2002:merge"
_BINARY_TAG = "tag:yaml.org,2002:binary"


@dataclass(frozen=True)
class Origin:
    """Where a value came from: a file position, or a `--set` argument (line is None)."""

    layer: str
    line: int | None = None  # 1-based
    column: int | None = None  # 1-based; for --set, the offset into the argument

    def __str__(self) -> str:
        return f"{self.layer}:{self.line}" if self.line is not None else self.layer


@dataclass
class Document:
    """One parsed YAML file: its data and the origin of every path in it."""

    name: str
    text: str
    data: Any
    keys: dict[FieldPath, Origin] = field(default_factory=dict)
    values: dict[FieldPath, Origin] = field(default_factory=dict)


def display_path(path: Path) -> str:
    """`path` relative to the working directory when it lies below it, else absolute."""
    absolute = path.absolute()
    try:
        return str(absolute.relative_to(Path.cwd()))
    except ValueError:
        return str(absolute)


def snippet(text: str, line: int, column: int) -> str:
    """The source line with a caret under `column` (both 1-based), indented for messages."""
    lines = text.splitlines()
    if not 1 <= line <= len(lines):
        return ""
    source = lines[line - 1]
    # Keep tabs so the caret lines up however the terminal expands them.
    pad = "".join("\t" if ch == "\t" else " " for ch in source[: max(column - 1, 0)])
    width = len(str(line))
    return f"  {line:>{width}} | {source}\n  {'':>{width}} | {pad}^"


def arg_snippet(argument: str, offset: int) -> str:
    """A `--set` argument with a caret under character `offset` (0-based)."""
    return f"  {argument}\n  {' ' * offset}^"


MAX_FILE_BYTES = 8 * 1024 * 1024  # a plan or inventory is text for people, not data


def resolve_path(path: Path, *, what: str = "file") -> Path:
    """`path` made absolute with symlinks followed; a symlink loop is a PlanError."""
    try:
        return path.resolve()
    except (RuntimeError, OSError):
        name = display_path(path)
        raise PlanError(f"{what} is a symlink loop: {name}", file=name) from None


def read_document(path: Path, *, what: str = "file") -> Document:
    """Read and parse one YAML file whose top level must be a mapping."""
    return parse_document(read_text(path, what=what), display_path(path))


def read_text(path: Path, *, what: str = "file", expected: str = "a YAML file") -> str:
    """A file's text, refused with a clear error when it cannot be an input: missing, a
    symlink loop, a directory, a FIFO or device (which would block or never end), larger
    than MAX_FILE_BYTES, or not UTF-8."""
    name = display_path(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise PlanError(f"{what} not found: {name}", file=name) from None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise PlanError(f"{what} is a symlink loop: {name}", file=name) from None
        raise PlanError(f"cannot read {what}: {error.strerror}", file=name) from None
    if stat.S_ISDIR(info.st_mode):
        raise PlanError(f"{what} is a directory, expected {expected}: {name}", file=name)
    if not stat.S_ISREG(info.st_mode):  # a FIFO would block forever, a device never end
        raise PlanError(f"{what} is not a regular file (a pipe or a device?): {name}", file=name)
    if info.st_size > MAX_FILE_BYTES:
        raise PlanError(f"{what} is too large ({info.st_size:,} bytes, at most "
                        f"{MAX_FILE_BYTES:,}): {name}", file=name)
    try:
        return local_files.read_text(path, max_bytes=MAX_FILE_BYTES)
    except FileNotFoundError:
        raise PlanError(f"{what} not found: {name}", file=name) from None
    except IsADirectoryError:
        raise PlanError(f"{what} is a directory, expected {expected}: {name}", file=name) from None
    except UnicodeDecodeError as error:
        raise PlanError(f"{what} is not UTF-8 text ({error.reason})", file=name) from None
    except OSError as error:
        raise PlanError(f"cannot read {what}: {error.strerror}", file=name) from None


def parse_document(text: str, name: str) -> Document:
    """Parse YAML text into a Document; every failure is a positioned PlanError."""
    loader_cls = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        loader = loader_cls(text)  # the pure-Python reader checks every character here
    except yaml.reader.ReaderError as error:
        raise _reader_error(error, text, name) from None
    try:
        try:
            root = loader.get_single_node()
        except yaml.MarkedYAMLError as error:
            raise _syntax_error(error, text, name) from None
        except yaml.reader.ReaderError as error:
            raise _reader_error(error, text, name) from None
        except yaml.YAMLError as error:
            raise PlanError(f"YAML error: {error}", file=name) from None
        if root is None:
            raise PlanError(
                "the file is empty; expected a mapping of keys such as `name:`",
                file=name,
                expected="a YAML mapping",
            )
        doc = Document(name=name, text=text, data=None)
        builder = _Builder(loader, doc)
        doc.data = builder.build(root, ())
        doc.keys[()] = doc.values[()] = Origin(
            name, root.start_mark.line + 1, root.start_mark.column + 1
        )
    finally:
        loader.dispose()
    if not isinstance(doc.data, dict):
        origin = doc.values[()]
        raise PlanError(
            f"the top level must be a mapping of keys, got {kind_of(doc.data)}",
            file=name,
            line=origin.line,
            column=origin.column,
            expected="a YAML mapping (key: value lines)",
            snippet=snippet(text, origin.line or 1, origin.column or 1),
        )
    return doc


def kind_of(value: Any) -> str:
    """A short phrase naming what a YAML value is, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        shown = value if len(value) <= 60 else value[:57] + "..."
        return f"the string {shown!r}"
    if isinstance(value, int):
        return f"the integer {value}"
    if isinstance(value, float):
        return f"the number {value}"
    return f"{type(value).__name__} {value!r}"


def _reader_error(error: yaml.reader.ReaderError, text: str, name: str) -> PlanError:
    """A character YAML refuses (a NUL, a control character), even in a comment, at its
    line and column."""
    # The first such character is the one the reader stopped at (libyaml counts its position
    # in bytes, the Python reader in characters: the text itself says where it is).
    at = text.find(chr(error.character))
    at = at if at >= 0 else max(0, min(error.position, len(text)))
    line = text.count("\n", 0, at) + 1
    column = at - (text.rfind("\n", 0, at) + 1) + 1
    what = "a NUL byte" if error.character == 0 else f"the control character {chr(error.character)!r}"
    return PlanError(f"{what} cannot stand anywhere in a YAML file, a comment included", file=name,
                     line=line, column=column, snippet=snippet(text, line, column))


def _syntax_error(error: yaml.MarkedYAMLError, text: str, name: str) -> PlanError:
    mark = error.problem_mark or error.context_mark
    if mark is not None and mark.line >= len(text.splitlines()) and error.context_mark is not None:
        mark = error.context_mark  # the problem is at the end of the file: show where it began
    problem = error.problem or "invalid YAML"
    context = f" ({error.context})" if error.context and error.problem else ""
    hint = None
    if "\t" in text and ("tab" in problem or "found character" in problem):
        hint = "YAML indentation must use spaces, not tabs"
    elif mark is not None and "${" in (text.splitlines()[mark.line : mark.line + 1] or [""])[0]:
        hint = 'inside [...] or {...}, quote values that contain ${...}: "vllm==${vars.version}"'
    elif "mapping values are not allowed" in problem:
        hint = "a value containing ': ' must be quoted, or a key is indented wrongly"
    if mark is None:
        return PlanError(f"YAML syntax error: {problem}{context}", file=name, hint=hint)
    line, column = mark.line + 1, mark.column + 1
    return PlanError(
        f"YAML syntax error: {problem}{context}",
        file=name,
        line=line,
        column=column,
        snippet=snippet(text, line, column),
        hint=hint,
    )


class _Builder:
    """Turns composed nodes into Python data, recording key and value positions."""

    def __init__(self, loader: Any, doc: Document) -> None:
        # A yaml (C)SafeLoader: its constructor builds scalars and resolves merge keys.
        self._loader = loader
        self._doc = doc
        self._nodes = 0

    def _origin(self, node: yaml.Node) -> Origin:
        return Origin(self._doc.name, node.start_mark.line + 1, node.start_mark.column + 1)

    def _fail(self, node: yaml.Node, message: str, hint: str | None = None) -> PlanError:
        origin = self._origin(node)
        return PlanError(
            message,
            file=self._doc.name,
            line=origin.line,
            column=origin.column,
            snippet=snippet(self._doc.text, origin.line or 1, origin.column or 1),
            hint=hint,
        )

    def build(self, node: yaml.Node, path: FieldPath) -> Any:
        self._nodes += 1
        if len(path) > _MAX_DEPTH:
            raise self._fail(node, f"the document is nested more than {_MAX_DEPTH} levels deep "
                                   "(a recursive alias?)")
        if self._nodes > _MAX_NODES:
            raise self._fail(
                node, f"the document holds more than {_MAX_NODES:,} values (aliases count each "
                      "time they are used); a plan or an inventory is far smaller"
            )
        self._doc.values[path] = self._origin(node)
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path)
        if isinstance(node, yaml.SequenceNode):
            items = []
            for index, item in enumerate(node.value):
                self._doc.keys[(*path, index)] = self._origin(item)
                items.append(self.build(item, (*path, index)))
            return items
        if node.tag == _BINARY_TAG:  # bytes would reach a name or a command as b'...'
            raise self._fail(node, "a !!binary value cannot stand in a plan or an inventory: "
                                   "write it as text", hint="drop the !!binary tag")
        try:
            return self._loader.construct_object(node)
        except yaml.MarkedYAMLError as error:
            raise _syntax_error(error, self._doc.text, self._doc.name) from None

    def _mapping(self, node: yaml.MappingNode, path: FieldPath) -> dict[str, Any]:
        own = sum(1 for key, _ in node.value if key.tag != _MERGE_TAG)
        try:
            # Resolve `<<: *anchor` merge keys: merged entries come first, own entries last.
            self._loader.flatten_mapping(node)
        except yaml.MarkedYAMLError as error:
            raise _syntax_error(error, self._doc.text, self._doc.name) from None
        merged_count = len(node.value) - own
        result: dict[str, Any] = {}
        first_seen: dict[str, yaml.Node] = {}
        for position, (key_node, value_node) in enumerate(node.value):
            if not isinstance(key_node, yaml.ScalarNode):
                raise self._fail(key_node, "a key must be a plain name, not a list or mapping")
            key = str(key_node.value)
            if position >= merged_count:  # keys from `<<:` may be overridden; own keys may not
                if key in first_seen:
                    raise self._fail(
                        key_node,
                        f"duplicate key {key!r} (first at line {first_seen[key].start_mark.line + 1})",
                        hint="remove one of them; otherwise the last one would silently win",
                    )
                first_seen[key] = key_node
            self._doc.keys[(*path, key)] = self._origin(key_node)
            result[key] = self.build(value_node, (*path, key))
        return result
