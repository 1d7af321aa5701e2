"""The /metrics page parses with prometheus_client and carries vLLM's names and labels."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from orchestrator.sim.metrics import EngineMetrics, format_value, render
from orchestrator.sim.scheduler import Sequence


def test_the_page_parses_with_vllm_names_and_labels() -> None:
    metrics = EngineMetrics()
    seq = Sequence(prompt_tokens=30, max_tokens=3, natural_tokens=None, arrival=0.0)
    metrics.admitted(seq, 0.5, True)
    for now in (1.0, 1.25, 1.5):
        metrics.tokens([seq], now)
        seq.generated += 1
        seq.last_token_at = now
    seq.finish_reason = "length"
    metrics.finished(seq, 1.5)
    text = render(metrics, "kimi", (2, 3, 0.25), {"profile": "instant", "time_scale": "1.0"},
                  {"block_size": "16"})  # fmt: skip
    families = {f.name: f for f in text_string_to_metric_families(text)}
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families.values() for s in f.samples}
    base = (("engine", "0"), ("model_name", "kimi"))
    assert samples[("vllm:num_requests_running", base)] == 2
    assert samples[("vllm:num_requests_waiting", base)] == 3
    assert samples[("vllm:kv_cache_usage_perc", base)] == 0.25
    assert samples[("vllm:prompt_tokens_total", base)] == 30
    assert samples[("vllm:generation_tokens_total", base)] == 3
    length = tuple(sorted((*base, ("finished_reason", "length"))))
    assert samples[("vllm:request_success_total", length)] == 1
    assert families["vllm:prompt_tokens"].type == "counter"
    assert families["vllm:time_to_first_token_seconds"].type == "histogram"
    assert samples[("vllm:time_to_first_token_seconds_count", base)] == 1
    assert samples[("vllm:time_to_first_token_seconds_sum", base)] == 1.0
    assert samples[("vllm:inter_token_latency_seconds_count", base)] == 2
    assert samples[("vllm:inter_token_latency_seconds_bucket", tuple(sorted((*base, ("le", "0.3")))))] == 2
    assert samples[("vllm:inter_token_latency_seconds_bucket", tuple(sorted((*base, ("le", "0.2")))))] == 0
    assert samples[("vllm:e2e_request_latency_seconds_bucket", tuple(sorted((*base, ("le", "+Inf")))))] == 1
    assert samples[("orch_simulator_info", (("profile", "instant"), ("time_scale", "1.0")))] == 1


def test_values_are_printed_like_prometheus_clients() -> None:
    assert [format_value(v) for v in (3, 0.5, 1795996102.5, float("inf"))] == [
        "3.0", "0.5", "1.7959961025e+09", "+Inf"]  # fmt: skip
