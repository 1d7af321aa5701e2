"""The shape of the code, held: each folder of orchestrator/ (and each module beside them) sits
in one layer, and imports only from its own layer or below; no two folders import each other;
no module imports itself back through others; nothing outside engines/ imports an engine's
package; modules and functions stay small (docs/concepts.md draws the same layers). Read
from the sources with `ast`; every import counts, those under `if TYPE_CHECKING:` and those
inside functions too: a type or a deferred import ties two modules as surely as any other."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "orchestrator"

# Bottom up: each folder of orchestrator/ (`apply/`) and each module beside them (`cli.py`)
# in exactly one layer; everything inside a folder is in the folder's layer.
LAYERS: list[tuple[str, ...]] = [
    ("__init__.py", "errors.py", "exit_codes.py", "masking.py", "names.py", "metrics.py",
     "local_files.py", "events.py", "holder.py", "http_deadline.py", "console.py", "tables.py",
     "selfwheel.py"),  # what every layer shares
    ("whatif/",),  # pure, stdlib only: the what-if model the simulator prices its steps by
    ("sim/",),  # stdlib only: shipped to hosts
    ("plan/",),  # the plan's model (the engines' names, matrix, tune, SLO), loader, layers
    ("inventory/",),
    ("transport/",),
    ("facts/",),
    ("steps/", "packages.py"),
    ("engines/",),  # the registry, the Engine value and each engine's package
    ("runs/",),  # run folders, their records, what a host's apply ended with
    ("bench/", "server_client.py", "router_client.py"),
    ("limits/",),  # pure: why a level plateaus (reads bench, runs, engines, plan)
    ("service/",),  # the model server, and the host's locks
    ("cluster/",),
    ("fleet/",),  # the fleet behind the router: replicas as hosts, the router as a service,
                  # its workers; the roll, the drain, the repair
    ("output.py", "live_view.py"),
    ("apply/",),
    ("report/",),
    ("matrix/",),
    ("init/",),  # orch init's work: it checks its files with the apply's compile
    ("tune/",),  # orch tune: applies, reads runs and reports, above the matrix
    ("commands/", "cli.py", "cli_hints.py"),
]
ENGINE_PACKAGES = ("orchestrator.engines.vllm", "orchestrator.engines.sim",
                   "orchestrator.engines.sglang", "orchestrator.engines.llama",
                   "orchestrator.engines.router")
MAX_MODULE_LINES = 450  # physical lines, docstrings and comments included
MAX_FUNCTION_LINES = 50  # from its `def` line to its last, nested functions included


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        name = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


MODULES = _modules()


def _imports(tree: ast.AST) -> Iterator[tuple[str, str | None, int]]:
    """(module, name, line) of every orchestrator import, at any depth, types only too."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("orchestrator"):
            yield from ((node.module, alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.Import):
            yield from ((a.name, None, node.lineno) for a in node.names
                        if a.name.startswith("orchestrator"))


def _edges() -> dict[str, set[tuple[str, int]]]:
    edges: dict[str, set[tuple[str, int]]] = {}
    for name, path in MODULES.items():
        for module, imported, line in _imports(ast.parse(path.read_text())):
            target = f"{module}.{imported}" if f"{module}.{imported}" in MODULES else module
            if target != name:
                edges.setdefault(name, set()).add((target, line))
    return edges


def folder(module: str) -> str:
    """The folder (`apply/`) or the module beside the folders (`cli.py`) a module is part of."""
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__.py"
    return f"{parts[1]}/" if (ROOT / parts[1]).is_dir() else f"{parts[1]}.py"


def layer(module: str) -> int:
    found = [index for index, entries in enumerate(LAYERS) if folder(module) in entries]
    assert found, f"{folder(module)} has no layer: add it to LAYERS and docs/concepts.md"
    return found[0]


def test_the_layers_name_each_folder_once() -> None:
    named = [entry for entries in LAYERS for entry in entries]
    present = {folder(module) for module in MODULES}
    assert sorted(named) == sorted(present), (
        f"LAYERS names {sorted(set(named) - present) or 'nothing'} that is not under "
        f"orchestrator/, misses {sorted(present - set(named)) or 'nothing'}, or names one twice")


def test_no_two_folders_import_each_other() -> None:
    ties = {(folder(a), folder(b)) for a, targets in _edges().items() for b, _ in targets
            if folder(a) != folder(b)}
    mutual = sorted(f"{a} <-> {b}" for a, b in ties if (b, a) in ties and a < b)
    assert not mutual, "folders that import each other:\n" + "\n".join(mutual)


def test_every_import_goes_down_or_stays_in_its_layer() -> None:
    upward = sorted(f"{a}:{line} imports {b} ({folder(b)}, layer {layer(b)}, is above "
                    f"{folder(a)}, layer {layer(a)})"
                    for a, targets in _edges().items() for b, line in targets
                    if layer(b) > layer(a))
    assert not upward, "imports that run from a lower layer up:\n" + "\n".join(upward)


def test_no_module_imports_itself_back_through_others() -> None:
    edges = {a: {b for b, _ in targets} for a, targets in _edges().items()}
    circles: list[list[str]] = []
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in edges.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in MODULES:
        if module not in index:
            visit(module)
    assert not circles, "modules that import each other, in a circle:\n" + "\n".join(
        ", ".join(circle) for circle in circles)


def test_only_engines_import_an_engines_package() -> None:
    outside = [f"{a}:{line} imports {b}" for a, targets in _edges().items()
               if not a.startswith("orchestrator.engines.") for b, line in targets
               if any(b == p or b.startswith(p + ".") for p in ENGINE_PACKAGES)]
    assert outside == []


def test_no_parameter_defaults_to_an_engine() -> None:
    """A caller passes the plan's engine: a default would silently mean vLLM for the others."""
    defaulted = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                params = node.args.posonlyargs + node.args.args
                pairs = [*zip(params[len(params) - len(node.args.defaults):], node.args.defaults,
                              strict=True),
                         *zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True)]
                defaulted += [f"{module}.{node.name}({arg.arg}={default.value!r})"
                              for arg, default in pairs if arg.arg.startswith("engine")
                              and isinstance(default, ast.Constant) and isinstance(default.value, str)]
    assert defaulted == []


def test_no_module_is_over_450_lines() -> None:
    long = [f"{module} ({n} lines)" for module, path in MODULES.items()
            if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES]
    assert long == [], "split each by concept: " + ", ".join(long)


def test_no_function_is_over_50_lines() -> None:
    long = [f"{module}.{node.name} ({n} lines)" for module, path in MODULES.items()
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno
            and (n := node.end_lineno - node.lineno + 1) > MAX_FUNCTION_LINES]
    assert long == [], "split each into named steps: " + ", ".join(long)


# A module path in prose: `orchestrator/...` (a .py file or a folder ending in `/`), or a
# .py path relative to orchestrator/ starting at one of its folders (`plan/loader.py`).
_FOLDERS = "|".join(sorted(p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()))
_NAMED_PATH = re.compile(
    rf"(?<![\w/.-])(?:orchestrator/(?:\w+/)*(?:\w+\.py\b)?|(?:{_FOLDERS})/(?:\w+/)*\w+\.py\b)")


def test_every_module_path_named_in_docs_and_docstrings_exists() -> None:
    texts = [*sorted(ROOT.parent.glob("docs/*.md")), ROOT.parent / "README.md", *MODULES.values()]
    stale = [f"{text.relative_to(ROOT.parent)}:{number}: {path}" for text in texts
             for number, line in enumerate(text.read_text().splitlines(), 1)
             for path in _NAMED_PATH.findall(line)
             if not (ROOT.parent / path).exists() and not (ROOT / path).exists()]
    assert stale == []


def _defined(path: Path) -> set[str]:
    """The functions, classes and module-level names a module defines (not imports)."""
    tree = ast.parse(path.read_text())
    names = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def test_every_name_a_doc_places_in_a_module_is_defined_there() -> None:
    """`plan/secrets.py: is_private` in a doc or docstring: the module defines the name."""
    texts = [*sorted(ROOT.parent.glob("docs/*.md")), ROOT.parent / "README.md", *MODULES.values()]
    placed = {(text.relative_to(ROOT.parent), path, name) for text in texts
              for path, name in re.findall(r"`(?:orchestrator/)?((?:\w+/)+\w+\.py): (\w+)`",
                                           text.read_text())}
    missing = [f"{text}: `{path}: {name}`" for text, path, name in sorted(placed)
               if not (ROOT / path).exists() or name not in _defined(ROOT / path)]
    assert missing == []
