"""One synchronous client for vLLM's router (`vllm-router`): its health, its workers (list,
add, remove, loads) and its Prometheus counters, read per worker.

What vllm-router 0.1.17 answers (tried against it): `GET /health` 200 "All servers healthy"
(also with no worker); `GET /list_workers` `{"urls": [...]}`; `POST /add_worker?url=U`
200 "Successfully added worker: U" (it waits for the worker's health first);
`POST /remove_worker?url=U`; `GET /get_loads` `{"workers": [{"worker": U, "load": n}]}`
(-1: not tracked). Its metrics live on their own port (`--prometheus-port`):
`vllm_router_processed_requests_total{worker}` counts attempts sent to a worker (a failed
one and its retry elsewhere both count), `vllm_router_cb_outcomes_total{worker,outcome}`
success/failure, `vllm_router_worker_health{worker}`, `vllm_router_cb_state{worker}`
(0 closed), `vllm_router_retries_total{route}`, `vllm_router_requests_total{route}`,
`vllm_router_generate_duration_seconds` (a histogram of the whole routed request).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from orchestrator.errors import ServerUnreachable

if TYPE_CHECKING:
    import httpx

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
MAX_PAGE = 4 * 1024 * 1024  # a router's metrics with a few dozen workers are tens of KB


@dataclass
class RouterCounters:
    """The router's counters at one moment, by worker URL (and its totals)."""

    processed: dict[str, float] = field(default_factory=dict)  # attempts sent to a worker
    succeeded: dict[str, float] = field(default_factory=dict)  # circuit-breaker successes
    failed: dict[str, float] = field(default_factory=dict)  # circuit-breaker failures
    healthy: dict[str, float] = field(default_factory=dict)  # 1 healthy, 0 not
    circuit: dict[str, float] = field(default_factory=dict)  # 0 closed, else open/half-open
    retries: float = 0.0
    requests: float = 0.0
    duration_sum: float = 0.0  # seconds over every routed request
    duration_count: float = 0.0

    def minus(self, before: RouterCounters) -> RouterCounters:
        """What happened between `before` and this (gauges: this one's)."""
        def delta(now: dict[str, float], then: dict[str, float]) -> dict[str, float]:
            return {url: value - then.get(url, 0.0) for url, value in now.items()}
        return RouterCounters(
            delta(self.processed, before.processed), delta(self.succeeded, before.succeeded),
            delta(self.failed, before.failed), dict(self.healthy), dict(self.circuit),
            self.retries - before.retries, self.requests - before.requests,
            self.duration_sum - before.duration_sum,
            self.duration_count - before.duration_count)


def parse_counters(lines: Iterable[str]) -> RouterCounters:
    """The router's counters from its Prometheus text (unknown families ignored)."""
    out = RouterCounters()
    for line in lines:
        found = _SAMPLE.match(line)
        if found is None or line.startswith("#"):
            continue
        name, labels, text = found.group(1), dict(_LABEL.findall(found.group(2) or "")), found.group(3)
        try:
            value = float(text)
        except ValueError:
            continue
        _take(out, name, labels, value)
    return out


def _take(out: RouterCounters, name: str, labels: dict[str, str], value: float) -> None:
    worker = labels.get("worker")
    per_worker = {"vllm_router_processed_requests_total": out.processed,
                  "vllm_router_worker_health": out.healthy,
                  "vllm_router_cb_state": out.circuit}
    if worker is not None and name in per_worker:
        per_worker[name][worker] = value
    elif worker is not None and name == "vllm_router_cb_outcomes_total":
        into = out.succeeded if labels.get("outcome") == "success" else out.failed
        into[worker] = into.get(worker, 0.0) + value
    elif name == "vllm_router_retries_total":
        out.retries += value
    elif name == "vllm_router_requests_total":
        out.requests += value
    elif name == "vllm_router_generate_duration_seconds_sum":
        out.duration_sum += value
    elif name == "vllm_router_generate_duration_seconds_count":
        out.duration_count += value


class RouterClient:
    """The router at `base_url`, its metrics at `metrics_url`."""

    def __init__(self, base_url: str, metrics_url: str | None = None, *,
                 timeout: float = 10.0) -> None:
        import httpx  # start-up time: only once a router is asked

        from orchestrator.http_deadline import tls

        self.base_url = base_url.rstrip("/")
        self.metrics_url = metrics_url.rstrip("/") if metrics_url else None
        self._http = httpx.Client(timeout=timeout, trust_env=False, verify=tls())

    def __enter__(self) -> RouterClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        import httpx

        try:
            return self._http.request(method, url, **kwargs)
        except httpx.HTTPError as error:
            raise ServerUnreachable(f"the router at {url} did not answer: {error}",
                                    reason=type(error).__name__) from None

    def health(self) -> int:
        return self._call("GET", f"{self.base_url}/health").status_code

    def workers(self) -> list[str]:
        answer = self._call("GET", f"{self.base_url}/list_workers")
        urls = answer.json().get("urls", []) if answer.status_code == 200 else []
        return [str(url) for url in urls]

    def add(self, url: str, timeout: float = 600.0) -> tuple[bool, str]:
        """Register `url` (the router waits for its health first): (done, its words)."""
        answer = self._call("POST", f"{self.base_url}/add_worker", params={"url": url},
                            timeout=timeout)
        return answer.status_code == 200, answer.text[:500]

    def remove(self, url: str) -> tuple[bool, str]:
        answer = self._call("POST", f"{self.base_url}/remove_worker", params={"url": url})
        return answer.status_code == 200, answer.text[:500]

    def loads(self) -> dict[str, int]:
        answer = self._call("GET", f"{self.base_url}/get_loads")
        if answer.status_code != 200:
            return {}
        return {str(w.get("worker")): int(w.get("load", -1))
                for w in answer.json().get("workers", []) if isinstance(w, dict)}

    def counters(self) -> RouterCounters:
        if self.metrics_url is None:
            raise ServerUnreachable("the router's metrics port is not known", reason="no port")
        answer = self._call("GET", f"{self.metrics_url}/metrics")
        return parse_counters(answer.text[:MAX_PAGE].splitlines())
