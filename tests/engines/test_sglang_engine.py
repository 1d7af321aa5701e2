"""The SGLang engine skeleton (engines/sglang/): its launch from a plan, its start-up phases
and crash signatures on SGLang's own texts, and `orch bench` reading its /metrics names from
the simulator behind a proxy that renames vLLM's names to SGLang's.

The start-up log (tests/service/logs/sglang-0.5.2-tp2-startup.log) is assembled from SGLang 0.5.2's format
strings and log prefix (no SGLang server runs here): it proves the reader, not the fit."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

import pytest
from fixtures.orchcli import orch
from fixtures.renaming_proxy import renaming_proxy
from fixtures.service_plans import make_plan

from orchestrator.engines import engine
from orchestrator.engines.startup_summary import KEYS
from orchestrator.errors import PlanError
from orchestrator.service.diagnosis import diagnose
from orchestrator.service.launch import render_launch
from orchestrator.sim.testing import DEFAULT_MODEL, running_simulator

LOGS = Path(__file__).parents[1] / "service" / "logs"
TO_SGLANG = {
    "vllm:num_requests_running": "sglang:num_running_reqs",
    "vllm:num_requests_waiting": "sglang:num_queue_reqs",
    "vllm:kv_cache_usage_perc": "sglang:token_usage",
    "vllm:generation_tokens_total": "sglang:generation_tokens_total",
    "vllm:prompt_tokens_total": "sglang:prompt_tokens_total",
    "vllm:request_success_total": "sglang:num_requests_total",
}


def test_a_plan_launches_sglangs_server_module_with_its_flags() -> None:
    plan = make_plan({"engine": "sglang", "model": "Qwen/Qwen2.5-7B-Instruct", "port": 30000,
                      "served_model_name": "qwen", "args": {"tp-size": 2, "enable-metrics": True}})
    spec = render_launch(plan, venv_bin="/opt/sglang/bin")
    assert spec.argv == ["/opt/sglang/bin/python", "-m", "sglang.launch_server",
                         "--model-path", "Qwen/Qwen2.5-7B-Instruct", "--host", "0.0.0.0",
                         "--port", "30000", "--served-model-name", "qwen",
                         "--tp-size", "2", "--enable-metrics"]


@pytest.mark.parametrize("flag", ["model-path", "api-key", "port"])
def test_its_reserved_flags_point_at_their_fields(flag: str) -> None:
    plan = make_plan({"engine": "sglang", "args": {flag: "x"}})
    with pytest.raises(PlanError, match="has its own field"):
        render_launch(plan, venv_bin="/opt/sglang/bin")


def test_an_api_key_is_refused_since_sglang_reads_it_only_from_its_command_line() -> None:
    plan = make_plan({"engine": "sglang", "api_key": "${env:KEY}"})
    with pytest.raises(PlanError, match="reads its API key only from a command-line flag"):
        render_launch(plan, venv_bin="/opt/sglang/bin")


def replay(name: str) -> list[dict[str, object]]:
    """The log fed line by line at the times its prefix gives."""
    reader = engine("sglang").startup(None)
    for line in (LOGS / name).read_text().splitlines():
        stamp = re.match(r"\[(\d\d\d\d-\d\d-\d\d \d\d:\d\d:\d\d)", line)
        assert stamp is not None
        now = datetime.fromisoformat(stamp.group(1)).timestamp()
        reader.feed_text(line + "\n", now)
    assert reader.ready
    return reader.summary()


def test_its_startup_phases_are_read_from_its_log() -> None:
    phases = {p["phase"]: p for p in replay("sglang-0.5.2-tp2-startup.log")}
    assert list(phases) == ["process", "weights", "kv_cache", "cuda_graphs", "api_server", "ready"]
    assert phases["weights"]["duration_s"] == 18.0
    assert phases["kv_cache"]["tokens"] == 2138562
    assert phases["cuda_graphs"]["engine_seconds"] == 21.43
    assert phases["ready"]["start_s"] == 56.0


def test_its_0_5_23_wording_is_read_too() -> None:
    reader = engine("sglang").startup(0.0)
    reader.feed([
        "[2026-11-30 09:00:11] Load weight begin. avail mem=93.21 GB",
        "[2026-11-30 09:00:29] Load weight end. elapsed=17.62 s, type=Qwen2ForCausalLM, "
        "avail mem=85.98 GB, mem usage=7.23 GB.",
        "[2026-11-30 09:00:30] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1000, "
        "K size: 1.00 GB, V size: 1.00 GB",
        "[2026-11-30 09:00:31] Capture target decode CUDA graph begin. backend=flashinfer, "
        "num_tokens_per_req=1, avail mem=12.91 GB",
    ], 5.0)
    status = reader.current(5.0)
    assert status is not None and status.label == "capturing CUDA graphs" and not status.api_up
    reader.feed(["[2026-11-30 09:00:52] Capture target decode CUDA graph end. bs=[1, 2, 4], "
                 "elapsed=21.43 s, mem usage=1.10 GB, avail mem=11.81 GB."], 9.0)
    graphs = next(p for p in reader.summary() if p["phase"] == "cuda_graphs")
    assert graphs["engine_seconds"] == 21.43 and graphs["end_s"] == 9.0


@pytest.mark.parametrize(("line", "key"), [
    ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
     "Current value: mem_fraction_static=0.5", "kv_pool"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB.", "oom"),
    ("[2026-11-30 09:01:00] [Errno 98] error while attempting to bind on address "
     "('0.0.0.0', 30000): address already in use", "port_in_use"),
])
def test_its_crash_signatures_name_the_cause_and_the_fix(line: str, key: str) -> None:
    found = diagnose(f"[2026-11-30 09:00:01] Load weight begin.\n{line}\n", "sglang")
    assert [d.key for d in found if d.level == "error"] == [key]
    assert found[0].fix and found[0].evidence_line.endswith(line[-20:])


@pytest.mark.slow
def test_orch_bench_reads_sglangs_metric_names(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with running_simulator(profile="instant") as sim, renaming_proxy(sim.base_url, TO_SGLANG) as url:
        result = orch("bench", "--url", url, "--model", DEFAULT_MODEL, "--concurrency", "1,4",
                      "--num-prompts", "8", "--max-tokens", "16", "--num-warmups", "0",
                      "--result-dir", out, cwd=tmp_path, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    c4 = json.loads((out / "level-c4.json").read_text())
    server = c4["server_metrics"]
    assert server["source"] == "sglang"
    # read through SGLang's names: the token counter's delta and the running gauge
    assert server["delta_generation_tokens"] > 0 and "max_running" in server


@pytest.mark.parametrize("name", ["vllm", "sim", "sglang"])
def test_every_engines_startup_summary_has_the_same_keys(name: str) -> None:
    """One builder (engines/startup_summary.py) writes every engine's startup.json entries:
    the same keys, `engine_seconds` for what the engine printed (vLLM's was `vllm_seconds`)."""
    reader = engine(name).startup(0.0)
    reader.feed([], 0.0)
    entries = reader.summary()
    assert entries and [list(entry)[:6] for entry in entries] == [list(KEYS)] * len(entries)
