"""What the user named as benchmark results, found and read: a run folder, a plan (its latest
complete run), an `orch bench` result directory, or `vllm bench serve` result files
(result_sources.py reads the last two). Above both readers, so neither imports the other."""

from __future__ import annotations

from pathlib import Path

from orchestrator.errors import RunFolderError
from orchestrator.runs import result_sources
from orchestrator.runs.layout import RunLayout
from orchestrator.runs.reader import RunData, latest_complete, load_run, plan_name_of_file


def resolve_run(ref: str, root: Path) -> Path:
    """A run folder (or other benchmark results) from what the user typed: see the module
    docstring."""
    path = Path(ref)
    if path.is_dir():
        if RunLayout(path).meta.exists() or result_sources.is_bench_dir(path):
            return path
        if any(path.glob("*/meta.json")):
            return latest_complete(path.parent, path.name)
        if result_sources.result_files(path):
            return path
        raise result_sources.not_readable(path)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        return latest_complete(root, plan_name_of_file(path))
    if path.is_file():
        if path.suffix == ".json":
            return path
        raise result_sources.not_readable(path)
    if "/" in ref or ref.endswith((".yaml", ".yml", ".json")):
        raise RunFolderError(f"{ref}: no such run folder or plan file",
                             hint=f"give {result_sources.ACCEPTED}")
    return latest_complete(root, ref)


def load_source(path: Path) -> RunData:
    """What `resolve_run` found, read: a run folder, an `orch bench` result directory, or
    `vllm bench serve` result files."""
    if RunLayout(path).meta.exists():
        return load_run(path)
    if result_sources.is_bench_dir(path):
        return result_sources.load_bench_result(path)
    return result_sources.load_vllm_results(path)
