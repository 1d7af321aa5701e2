"""`orch apply` of a prefill/decode fleet on the simulator: one prefill and two decode
replicas behind the real router in vLLM's P/D mode. Each request visits a prefill and a
decode replica (the router's counts say so), the decode replicas pull the prompt's KV
(their own metrics say so), and the level is not blamed on the router for the second hop."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from fixtures import quick_venv
from fixtures.fleet_plans import fleet_plan
from fixtures.orchcli import last_run, orch
from fixtures.ports import free_ports

pytestmark = pytest.mark.slow


def _external_kv_tokens(url: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=5).text
    return sum(float(line.split()[-1]) for line in text.splitlines()
               if line.startswith("vllm:prompt_tokens_by_source_total")
               and 'source="external_kv_transfer"' in line)


def test_a_pd_fleet_serves_each_request_by_a_prefill_then_a_decode_replica(
        tmp_path: Path) -> None:
    port = free_ports(3)
    plan = fleet_plan(tmp_path / "fleet.yaml", venv=str(tmp_path / "venv"),
                      interpreter=quick_venv.interpreter(), hosts="localhost", port=port,
                      name=f"fp{tmp_path.name[-6:]}",
                      replicas={"per_host": 3, "gpus": 1, "prefill": 1})
    urls = [f"http://127.0.0.1:{p}" for p in (port, port + 1, port + 2)]
    try:
        # Answers long enough (200 tokens) that the router's few ms on a loaded machine are a
        # small share, and half a request's time (the second hop unseen) a large one.
        done = orch("apply", plan, "--set", "router.mode=pd", "--set", "bench.concurrency=[4]",
                    "--set", "bench.requests_per_level=12", "--set", "bench.max_tokens=200",
                    cwd=tmp_path, timeout=600)
        said = done.stdout + done.stderr
        assert done.returncode == 0, said
        run = last_run(tmp_path)
        record = json.loads((run / "fleet.json").read_text())
        assert record["state"] == "ready"
        assert [r["role"] for r in record["replicas"]] == ["prefill", "decode", "decode"]
        level = json.loads((run / "hosts" / record["router"]["host"] / "bench" /
                            "level-c4.json").read_text())
        assert (level["completed"], level["failed"]) == (12, 0)
        sent = {row["url"]: row["processed"] for row in level["router"]["replicas"]}
        assert sent[urls[0]] == 12 and sent[urls[1]] + sent[urls[2]] == 12, sent
        assert _external_kv_tokens(urls[0]) == 0
        assert _external_kv_tokens(urls[1]) + _external_kv_tokens(urls[2]) > 0
        # The replicas' own time per request adds both halves: what is left is the router's.
        assert 0 <= level["router_added_ms"] < 0.25 * level["mean_e2el_ms"], (
            level["router_added_ms"], level["mean_e2el_ms"])
        assert level["limiter"]["name"] != "router-bound", level["limiter"]
    finally:
        orch("stop", plan, cwd=tmp_path)
