"""Why an SGLang server died, from its log, with the fix in plan terms: a skeleton's table of
the start-up failures seen most often. Texts read in SGLang 0.4.6.post5, 0.5.2 and 0.5.23
(srt/model_executor/model_runner.py, pool_configurator.py), PyTorch's own OOM texts, and
asyncio's bind error as uvicorn logs it."""

from __future__ import annotations

import re

from orchestrator.engines.signatures import Explain, Signature


def _fixed(cause: str, fix: str) -> Explain:
    return lambda m, _: (cause, fix, {})


SIGNATURES = (
    Signature(
        "kv_pool",
        re.compile(r"Not enough memory\. Please try to increase --mem-fraction-static"),
        _fixed("the KV cache pool does not fit in the share of GPU memory SGLang may use",
               "raise service.args.mem-fraction-static, or lower context-length, or use more "
               "GPUs (service.args.tp-size)"),
    ),
    Signature(
        "oom",
        re.compile(r"CUDA out of memory|CUDA error: out of memory"),
        _fixed("the GPUs ran out of memory",
               "lower service.args.mem-fraction-static or max-running-requests, or use more "
               "GPUs (service.args.tp-size)"),
    ),
    Signature(
        "port_in_use",
        re.compile(r"\[Errno 98\] error while attempting to bind on address \(.*?\): "
                   r"address already in use"),
        _fixed("the service port is already in use by another process (SGLang binds it only "
               "after loading the weights)",
               "stop whatever listens on it (ss -ltnp) or choose another service.port"),
    ),
)
