"""The shape of the code, held: layers import only downwards, no circles, nothing outside
engines/ imports an engine's package, and modules and functions stay small (docs/concepts.md
draws the same layers). Read from the sources with `ast`; imports under `if TYPE_CHECKING:`
are types only and do not count."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "orchestrator"

# Bottom up; a module belongs to the layer of its longest matching prefix.
LAYERS: list[tuple[str, ...]] = [
    ("orchestrator", "orchestrator.errors", "orchestrator.masking", "orchestrator.names",
     "orchestrator.exit_codes", "orchestrator.metrics", "orchestrator.local_files",
     "orchestrator.console", "orchestrator.tables", "orchestrator.events",
     "orchestrator.selfwheel"),
    ("orchestrator.engines", "orchestrator.engines.base", "orchestrator.engines.signatures",
     "orchestrator.engines.kernels", "orchestrator.engines.layout"),  # the registry, the value
    ("orchestrator.whatif",),  # pure, stdlib only: the simulator runs its engine from it
    ("orchestrator.sim",),  # stdlib only: shipped to hosts
    ("orchestrator.plan", "orchestrator.matrix.spec", "orchestrator.matrix.objective",
     "orchestrator.tune.spec", "orchestrator.tune.slo"),
    ("orchestrator.inventory",),
    ("orchestrator.transport",),
    ("orchestrator.facts",),
    ("orchestrator.packages", "orchestrator.steps"),
    ("orchestrator.runs", "orchestrator.matrix.matrix_file"),
    ("orchestrator.server_client", "orchestrator.bench"),
    ("orchestrator.limits",),  # pure: why a level plateaus (reads bench, runs, engines, plan)
    ENGINE_PACKAGES := ("orchestrator.engines.vllm", "orchestrator.engines.sim",
                        "orchestrator.engines.sglang", "orchestrator.engines.llama"),
    ("orchestrator.apply.lock", "orchestrator.apply.outcome"),
    ("orchestrator.service",),
    ("orchestrator.cluster",),
    ("orchestrator.apply", "orchestrator.output", "orchestrator.live_view"),
    ("orchestrator.report",),
    ("orchestrator.matrix",),
    ("orchestrator.init",),  # orch init's work: it checks its files with the apply's compile
    ("orchestrator.tune",),  # orch tune: applies, reads runs and reports, above the matrix
    ("orchestrator.commands", "orchestrator.cli", "orchestrator.cli_hints",
     "orchestrator.bench.cli"),
]
MAX_MODULE_LINES = 450  # physical lines, docstrings and comments included
MAX_FUNCTION_LINES = 50  # from its `def` line to its last, nested functions included



def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        name = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


MODULES = _modules()


def _runtime_imports(tree: ast.AST) -> Iterator[tuple[str, str | None, int]]:
    """(module, name, line) of every orchestrator import, at any depth, but types only."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("orchestrator"):
            yield from ((node.module, alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.Import):
            yield from ((a.name, None, node.lineno) for a in node.names
                        if a.name.startswith("orchestrator"))
        stack.extend(ast.iter_child_nodes(node))


def _edges() -> dict[str, set[tuple[str, int]]]:
    edges: dict[str, set[tuple[str, int]]] = {}
    for name, path in MODULES.items():
        for module, imported, line in _runtime_imports(ast.parse(path.read_text())):
            target = f"{module}.{imported}" if f"{module}.{imported}" in MODULES else module
            if target != name:
                edges.setdefault(name, set()).add((target, line))
    return edges


def layer(module: str) -> int:
    best, rank = -1, -1
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, rank = len(prefix), index
    assert rank >= 0, f"{module} has no layer: add it to LAYERS and docs/concepts.md"
    return rank


def test_every_import_goes_down_or_stays_in_its_layer() -> None:
    upward = [f"{a}:{line} imports {b} (layer {layer(b)} above {layer(a)})"
              for a, targets in _edges().items() for b, line in targets if layer(b) > layer(a)]
    assert upward == []


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
    assert circles == []


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
