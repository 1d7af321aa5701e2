"""Benchmark results that are not run folders, read as one: an `orch bench` result directory
(level-*.json, summary.json) and `vllm bench serve --save-result` files (one file, or a
directory of them). Each is a `RunData` with one host and no plan, meta or facts, so
`orch compare` and `orch report` take it beside run folders.

vLLM's result file is one JSON object per run (`--append-result` adds one per line): the
keys `date`, `endpoint_type`, `backend`, `label`, `model_id`, `tokenizer_id`, `num_prompts`,
`request_rate` (`"inf"`), `burstiness`, `max_concurrency` (null without the flag), then the
figures (`duration`, `completed`, `failed`, `output_throughput`, `mean_ttft_ms`,
`p99_ttft_ms`, ...). orch's level files keep those keys, so each object reads as a
`LevelResult`; its load level is the one orch would name it by: `c8` for
`--max-concurrency 8` (a closed loop), `r2` for `--request-rate 2`, and `c<num_prompts>`
for all prompts at once (a batch).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pydantic import ValidationError

from orchestrator import local_files
from orchestrator.errors import RunFolderError
from orchestrator.runs.json_reader import Refused, loads, position
from orchestrator.runs.layout import BenchLayout
from orchestrator.runs.reader import BenchData, HostData, RunData, load_bench
from orchestrator.runs.run_records import LevelResult, Meta, SweepSummary

# The keys every `vllm bench serve --save-result` object of a generation benchmark holds.
VLLM_KEYS = ("date", "backend", "model_id", "num_prompts", "request_rate", "max_concurrency",
             "duration", "completed", "output_throughput")
# vLLM's backend -> orch's endpoint word (its `openai` and `vllm` backends use completions).
ENDPOINTS = {"openai-chat": "chat", "openai": "completions", "vllm": "completions"}
COMPANION = ".pytorch.json"  # vLLM writes one beside every result: another format, not read
ACCEPTED = ("a run folder (meta.json), a plan name or plan file, an `orch bench` result "
            "directory (level-*.json, summary.json), or `vllm bench serve --save-result` "
            "JSON files (one file, or a directory of them)")


def is_bench_dir(path: Path) -> bool:
    layout = BenchLayout(path)
    return path.is_dir() and (layout.summary.exists() or bool(layout.levels()))


def result_files(directory: Path) -> list[Path]:
    """The JSON files of a directory a `vllm bench serve --result-dir` wrote."""
    return sorted(p for p in directory.glob("*.json")
                  if p.is_file() and not p.name.endswith(COMPANION))


def not_readable(path: Path) -> RunFolderError:
    """What `path` is, and what orch compare reads instead."""
    if path.is_dir():
        entries = sorted(p.name + ("/" if p.is_dir() else "") for p in path.iterdir())
        shown = ", ".join(entries[:6]) + (", ..." if len(entries) > 6 else "")
        found = f"a directory holding {shown}" if entries else "an empty directory"
    else:
        found = f"a file that is neither a plan (.yaml) nor a JSON result ({path.suffix or 'no suffix'})"
    return RunFolderError(f"{path}: not a run or benchmark result: found {found}",
                          hint=f"give {ACCEPTED}")


def load_bench_result(directory: Path) -> RunData:
    """An `orch bench --result-dir` folder, labelled by its `--label` or its name."""
    bench = load_bench(directory)
    assert bench is not None  # is_bench_dir said it holds results
    summary = bench.summary
    recorded = (summary.labels.get("label") if summary else None) or _one_label(
        [level.extra("label") for level in bench.levels])
    if summary is None:
        status = "incomplete"
    else:
        status = "interrupted" if summary.stopped == "interrupted" else "complete"
    meta = Meta(plan=recorded or directory.name, command="bench", status=status,
                started=summary.started if summary else None,
                finished=summary.finished if summary else None,
                simulated=bench.simulated, engine="sim" if bench.simulated else None)
    url = summary.base_url if summary else None
    host = (urlparse(url).hostname if url else None) or "server"
    return RunData(directory, meta, None, None, [HostData(host, None, bench)], source="bench")


def load_vllm_results(path: Path) -> RunData:
    """`vllm bench serve --save-result` results: a file (each object one level) or a
    directory of such files; labelled by their `--label`, else the file or folder name."""
    files = result_files(path) if path.is_dir() else [path]
    if not files:
        raise not_readable(path)
    levels: dict[str, tuple[LevelResult, Path]] = {}
    for file in files:
        for data in _objects(file):
            level = level_of(data, file)
            if level.level in levels:
                raise RunFolderError(
                    f"{path}: two results for load {level.level} ({levels[level.level][1].name} and {file.name})",
                    hint="give a directory holding one result per load level")
            levels[level.level] = (level, file)
    results = [level for level, _ in levels.values()]
    ordered = sorted(results, key=lambda r: (r.mode == "rate", _load(r)))
    first = ordered[0]
    endpoint = ENDPOINTS.get(str(first.extra("backend")), first.extra("backend"))
    mode = "batch" if all(r.mode == "batch" for r in ordered) else "closed"
    summary = SweepSummary(model=first.model_id, config={"endpoint": endpoint, "mode": mode})
    name = _one_label([r.extra("label") for r in ordered]) or (path.name if path.is_dir() else path.stem)
    meta = Meta(plan=name, command="vllm bench serve", status="complete")
    bench = BenchData(path, ordered, summary)
    return RunData(path, meta, None, None, [HostData("server", None, bench)], source="vllm")


def level_of(data: dict[str, Any], file: Path) -> LevelResult:
    """One vLLM result object as a level (an orch level file keeps its own level and mode)."""
    rate = _rate(data.get("request_rate"))
    cap = data.get("max_concurrency")
    if rate is not None:
        mode, label = "rate", f"r{rate:g}"
    elif isinstance(cap, int) and cap > 0:
        mode, label = "closed", f"c{cap}"
    else:
        cap = data.get("num_prompts")
        mode, label = "batch", f"c{cap}"
    fields = {**data, "level": data.get("level") or label, "mode": data.get("mode") or mode,
              "max_concurrency": cap, "request_rate": rate if rate is not None else "inf"}
    try:
        return LevelResult.model_validate(fields)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "<result>"
        raise RunFolderError(f"{file}: {where}: {first['msg']}") from None


def _objects(file: Path) -> list[dict[str, Any]]:
    """The result objects of one file: one, or one per line (`--append-result`)."""
    try:
        text = local_files.read_text(file, errors="replace")
    except OSError as error:
        raise RunFolderError(f"cannot read {file}: {error.strerror or error}") from None
    try:
        values: list[Any] = [_loads(file, text, 0)]
    except json.JSONDecodeError as error:
        try:
            values = [_loads(file, line, number - 1) for number, line in enumerate(text.splitlines(), 1)
                      if line.strip()]
        except json.JSONDecodeError:
            raise RunFolderError(
                f"{file}: not valid JSON (line {error.lineno}, column {error.colno}: {error.msg})",
                hint=f"give {ACCEPTED}") from None
    for value in values:
        _check(value, file)
    return values


def _loads(file: Path, text: str, lines_before: int) -> Any:
    """One JSON value of a result file (json_reader.py's bounds on depth and figures)."""
    try:
        return loads(text, figures=True)
    except Refused as refused:
        line, column = position(text, refused.pos)
        raise RunFolderError(f"{file}:{line + lines_before}:{column}: {refused.what}",
                             hint=f"give {ACCEPTED}") from None


def _check(value: Any, file: Path) -> None:
    if not isinstance(value, dict):
        raise RunFolderError(
            f"{file}: not a `vllm bench serve` result: found a JSON {type(value).__name__}, "
            "expected an object", hint=f"give {ACCEPTED}")
    missing = [key for key in VLLM_KEYS if key not in value]
    if missing:
        keys = ", ".join(list(value)[:8]) + (", ..." if len(value) > 8 else "")
        raise RunFolderError(
            f"{file}: not a `vllm bench serve` result: it lacks {', '.join(missing)} "
            f"(its keys: {keys or 'none'})", hint=f"give {ACCEPTED}")


def _rate(value: Any) -> float | None:
    """A finite request rate; None for `"inf"` (or vLLM's older `Infinity`) and none."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        rate = float(value)
    except ValueError:
        return None
    return rate if math.isfinite(rate) and rate > 0 else None


def _load(result: LevelResult) -> float:
    value = result.request_rate if result.mode == "rate" else result.max_concurrency
    return float(value) if isinstance(value, int | float) else 0.0


def _one_label(values: list[Any]) -> str | None:
    """The `--label` every level was run with, when they agree."""
    found = {v for v in values if isinstance(v, str) and v}
    return found.pop() if len(found) == 1 else None
