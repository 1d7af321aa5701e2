"""The program shipped to the host, assembled from the host sides of this package's modules.

A module's host side is the part between its `# == host side` and `# == controller side`
lines: stdlib only, Python 3.8 (it runs under the host's python3). The program is their
stdlib imports, those parts one after the other (so every top-level name they define must be
unique), and `GATHER`: the gatherer of every module that declares a `FACT`. A host side uses
another's functions through ordinary `from orchestrator.facts.<module> import ...` lines,
which the program leaves out: there, the names are defined in the same text.
"""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil
import re
import threading
from functools import cache
from importlib import resources
from types import ModuleType
from typing import Any

from orchestrator.facts.compiled import CALL_MARK, digest
from orchestrator.facts.fact import Fact

PACKAGE = "orchestrator.facts"
HOST_MARK, CONTROLLER_MARK = "# == host side", "# == controller side"


def _modules() -> list[ModuleType]:
    """Every module of the package, by name (so `common` comes before the facts)."""
    package = importlib.import_module(PACKAGE)
    names = sorted(info.name for info in pkgutil.iter_modules(package.__path__))
    return [importlib.import_module(f"{PACKAGE}.{name}") for name in names]


@cache
def discovered() -> tuple[Fact, ...]:
    """The facts: every module that declares `FACT`."""
    return tuple(m.FACT for m in _modules() if isinstance(getattr(m, "FACT", None), Fact))


def _shipped_imports(tree: ast.Module) -> dict[str, set[str]]:
    """A module's top-level imports the host needs too (not `__future__`, not orch's own):
    module -> the names taken from it ("" for a plain `import`)."""
    found: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            found.setdefault("", set()).update(
                _named(a) for a in node.names if not a.name.startswith("orchestrator"))
        elif isinstance(node, ast.ImportFrom) and node.module not in (None, "__future__") \
                and not str(node.module).startswith("orchestrator"):
            found.setdefault(str(node.module), set()).update(map(_named, node.names))
    return found


def _named(alias: ast.alias) -> str:
    return f"{alias.name} as {alias.asname}" if alias.asname else alias.name


def _defined(tree: ast.Module) -> set[str]:
    """The top-level names a host side defines."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) else []
        names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def host_side(name: str) -> tuple[dict[str, set[str]], str] | None:
    """A module's shipped imports and host-side source (None: it has no host side)."""
    source = resources.files(PACKAGE).joinpath(f"{name}.py").read_text()
    start = source.find("\n" + HOST_MARK)
    if start < 0:
        return None
    body_start = source.index("\n", start + 1) + 1
    end = source.find("\n" + CONTROLLER_MARK, body_start)
    host = source[body_start:end if end >= 0 else len(source)].strip("\n")
    # The module's own imports stand above its host side: only that head is parsed (a
    # no-op apply assembles the program once, and parsing whole modules was most of it).
    return _shipped_imports(ast.parse(source[:start])), host


def _uses(names: set[str], imported: str) -> bool:
    """Whether a host side, by the names it uses (`_names`), uses an imported name (`os.path`
    binds `os`, `x as y` binds y): the controller side's imports stay on the controller, and
    the host's python starts faster without them (ast, dataclasses: ~10 ms)."""
    return imported.split(" as ")[-1].split(".")[0] in names


def _names(host: str) -> set[str]:
    """Every name a host side's text uses (an attribute, after a dot, is not one): one scan of
    it, not one per import (assembling the program is on every apply's path)."""
    return set(re.findall(r"(?<![\w.])[A-Za-z_]\w*", host))


# Modules only some facts need (a tool's output, a RECORD, vLLM's sources): imported on
# their first use, so a probe that needs none of them starts ~13 ms sooner on each host.
LAZY = ("ast", "csv", "platform", "socket", "subprocess")
_LAZY_LOADER = '''class _Lazy:
    def __init__(self, name):
        self.name = name
    def __getattr__(self, attribute):
        module = globals()[self.name] = __import__(self.name)
        return getattr(module, attribute)'''


def _import_lines(imports: dict[str, set[str]]) -> list[str]:
    plain = imports.get("", set())
    lazy = sorted(n for n in plain if n in LAZY)
    eager = {**imports, "": plain - set(lazy)}
    lines = [f"import {', '.join(sorted(names))}" if not module else
             f"from {module} import {', '.join(sorted(names))}"
             for module, names in sorted(eager.items()) if names]
    if lazy:
        lines += [_LAZY_LOADER, *(f"{name} = _Lazy({name!r})" for name in lazy)]
    return lines


def _host_sides() -> list[tuple[str, dict[str, set[str]], str]]:
    found = [(m.__name__.rsplit(".", 1)[1], host_side(m.__name__.rsplit(".", 1)[1]))
             for m in _modules()]
    return [(name, side[0], side[1]) for name, side in found if side is not None]


def clashes() -> list[str]:
    """Top-level names two host sides both define (one program: they would clash); a test
    holds this empty, so assembling the program need not parse every host side."""
    owners: dict[str, str] = {}
    said = []
    for name, _, host in _host_sides():
        for defined in sorted(_defined(ast.parse(host))):
            if owners.setdefault(defined, name) != name:
                said.append(f"facts/{name}.py and facts/{owners[defined]}.py both define "
                            f"{defined!r} on the host side")
    return said


_ASSEMBLING = threading.Lock()


def program_source() -> str:
    """The fact program, assembled once per process: the hosts of a run start at once, each
    in its thread, and would each assemble it (~10 ms of CPU, 64 hosts: 0.6 s) without the
    lock."""
    with _ASSEMBLING:
        return _assembled()


@cache
def _assembled() -> str:
    imports: dict[str, set[str]] = {}
    parts: list[str] = []
    for name, shipped, host in _host_sides():
        used = _names(host)
        for module_name, names in shipped.items():
            imports.setdefault(module_name, set()).update(n for n in names if _uses(used, n))
        parts.append(f"# -- facts/{name}.py\n\n{host}\n")
    imports = {module: names for module, names in imports.items() if names}
    gather = ", ".join(fact.gather for fact in discovered())
    return "\n".join([
        '"""orch\'s fact program, assembled from orchestrator/facts/ (program.py)."""',
        "from __future__ import annotations\n", *_import_lines(imports), "\n", "\n\n".join(parts),
        f"GATHER.extend([{gather}])\n",
    ])


def call_stdin(function: str, argument: Any) -> bytes:
    """The program plus one call of its host-side `function` with `argument` (JSON)."""
    program = program_source()
    call = f"{function}(json.loads({json.dumps(json.dumps(argument))}))"
    # the comment line names the program: the host keeps it compiled (facts/compiled.py)
    return f"{program}{CALL_MARK}{digest(program)}\n{call}\n".encode()
