"""SGLang (`python -m sglang.launch_server`), a skeleton: its launch, its start-up phases
(startup.py), its crash signatures (signatures.py) and its /metrics names. It is benchmarked
like any server; what it lacks next to vLLM: a reader of the installed package (the probe
reads none, so its flags are checked by SGLang at launch, not by preflight) and its kernels.

The launch (srt/server_args.py of 0.4.6.post5 and 0.5.2; srt/arg_groups/ of 0.5.23):
`--model-path`, `--host`, `--port`, `--served-model-name` as orch passes them; parallelism is
`--tp-size`, `--pp-size`, `--dp-size`, `--ep-size` in `service.args` (the long names: `--tp` is
only an argparse abbreviation), declared with its scheduler cap, batch budget and KV dtype in
`FLAGS`, which preflight, the report's GPU count and the limiter's advice read. SGLang reads
its API key only from `--api-key` (no variable), which orch never puts on a command line: a
plan cannot give it `service.api_key`. It serves /metrics on its port only with
`--enable-metrics` (service.args.enable-metrics: true).
"""

from __future__ import annotations

from collections.abc import Mapping

from orchestrator.engines.base import Engine, MetricNames
from orchestrator.engines.layout import EngineFlags
from orchestrator.engines.sglang.signatures import SIGNATURES
from orchestrator.engines.sglang.startup import SglangStartup

MODULE = "sglang.launch_server"
RESERVED_FLAGS = {
    "host": "service.host",
    "port": "service.port",
    "served-model-name": "service.served_model_name",
    "model-path": "service.model",
    "model": "service.model",
    "api-key": "service.api_key (which SGLang cannot take from its environment: none)",
}
# srt/metrics/collector.py (0.5.23: srt/observability/metrics_collector.py); gauges are
# labelled per rank, summed like every engine's.
METRICS = MetricNames(
    prefix="sglang",
    gauges={
        "running": ("sglang:num_running_reqs",),
        "waiting": ("sglang:num_queue_reqs",),
        "kv_cache_usage": ("sglang:token_usage",),
    },
    counters={
        "generation_tokens": ("sglang:generation_tokens_total",),
        "prompt_tokens": ("sglang:prompt_tokens_total",),
        "requests_finished": ("sglang:num_requests_total",),
    },
)


# Its flag vocabulary (srt/server_args.py).
FLAGS = EngineFlags(
    tensor="tp-size", pipeline="pp-size", data="dp-size", nodes="nnodes", expert="ep-size",
    data_local=None,  # none: a node runs the replicas its GPUs hold
    expert_switch=None,  # none: `ep-size` sets expert parallelism
    data_in_tensor="enable-dp-attention",  # DP attention: the DP ranks are the TP GPUs
    # Its aliases (`--tp` is only an argparse abbreviation of `--tp-size`, not read here).
    aliases={"--tensor-parallel-size": "tp-size", "--pipeline-parallel-size": "pp-size",
             "--data-parallel-size": "dp-size"},
    scheduler_cap="max-running-requests",
    scheduler_default=None,  # none fixed: sized from the KV cache at start-up
    batch_tokens="chunked-prefill-size", kv_dtype="kv-cache-dtype",
    kv_fp8="fp8_e4m3",  # its choices name the format (no plain `fp8`)
    context_length="context-length",
    api_servers=None,  # one tokenizer manager serves the API; no count of API processes
    also_parallel=("dcp-size", "attn-cp-size", "moe-a2a-backend"),
)


def launch_argv(model: str, venv_bin: str, pins: Mapping[str, str]) -> list[str]:
    return [f"{venv_bin}/python", "-m", MODULE, "--model-path", model]


ENGINE = Engine(
    name="sglang",
    summary="SGLang (`python -m sglang.launch_server`; a skeleton: no preflight of its flags)",
    display="SGLang",
    launch_argv=launch_argv,
    metrics=METRICS,
    startup=SglangStartup,
    reserved_flags=RESERVED_FLAGS,
    api_key_env=None,
    stop_signal="SIGINT",  # uvicorn's graceful shutdown; SGLang then ends its schedulers
    signatures=SIGNATURES,
    flags=FLAGS,
    # None: orch's topology does not start it on several nodes yet (SGLang joins a group by
    # `--nnodes`, `--node-rank` and `--dist-init-addr HOST:PORT`: address and port in one
    # flag, not the shape `MultiNode` declares).
    multi_node=None,
    # None: not wired yet (SGLang has `python -m sglang.check_env`; orch has not read its
    # output), so a run says it has no collector rather than running vLLM's.
    env_collector=None,
)
