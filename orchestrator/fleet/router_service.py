"""vLLM's router as a service of its own: the plan it runs as (its venv pinning
`vllm-router==<version>`, its launch through the router engine: `--host --port` and the flags
written from `router:`), so the service machinery installs, launches, supervises, reports and
stops it as it does a model server.

Its venv defaults to `~/.cache/orch/router/<version>` on the machine it runs on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from orchestrator.plan.models import Install, Plan, PythonEnv, ServiceSpec
from orchestrator.plan.models.fleet import Router
from orchestrator.plan.replicas import Replica
from orchestrator.transport.base import Transport
from orchestrator.transport.command import Command

PACKAGE = "vllm-router"
_INDEX_FIELDS = ("index_urls", "find_links", "no_index")  # where the plan installs from


def default_venv(home: str, version: str) -> str:
    return f"{home.rstrip('/')}/.cache/orch/router/{version}"


def router_venv(router: Router, transport: Transport) -> str:
    """Its venv: the plan's, or the default under the home of the user orch runs it as there
    (asked of the host: one round trip, only when the plan names none)."""
    if router.venv is not None:
        return router.venv
    home = transport.run(Command("sh", "-c", 'printf "%s" "$HOME"'), timeout=60).stdout.strip()
    return default_venv(home or "/tmp", router.version)


def router_plan(plan: Plan, venv: str, host: str, pd_workers: Sequence[tuple[str, str]] = ()
                ) -> Plan:
    """`plan`'s router as a plan of its own on inventory host `host`: its venv, its package,
    its service (`pd_workers`: (role, url) of the replicas a P/D router is launched with)."""
    router = plan.router
    assert router is not None
    install = Install.model_validate({
        **plan.install.model_dump(include=set(_INDEX_FIELDS)),
        "packages": [f"{PACKAGE}=={router.version}"], "families": []})
    args = {"prometheus-host": router.host, "prometheus-port": router.metrics_port,
            "policy": router.policy, **router.args}
    extra: list[str] = []
    if router.mode == "pd":
        extra.append("--vllm-pd-disaggregation")
        for role, url in pd_workers:
            extra += [f"--{role}", url]
    served = plan.service.served_names()[0] if plan.service is not None else PACKAGE
    service = ServiceSpec.model_validate({
        "model": served, "host": router.host, "port": router.port, "name": router.name,
        "backend": plan.service.backend if plan.service is not None else "auto",
        "args": args, "extra_args": extra,
    }).model_copy(update={"engine": "router"})  # an engine no plan names: orch's own front
    return plan.model_copy(update={
        "hosts": host, "python": PythonEnv(venv=venv, interpreter="python3", installer="pip"),
        "install": install, "model": None, "files": [], "env": {}, "service": service,
        "smoke": [], "bench": None, "collect": [], "commands": [], "replicas": None,
        "router": None, "matrix": None, "tune": None})


def pd_workers(replicas: Sequence[Replica], urls: Mapping[str, str]) -> list[tuple[str, str]]:
    """(role, url) of each replica (`urls`: by replica id) for a P/D router's launch,
    prefill first."""
    order = {"prefill": 0, "decode": 1, "both": 2}
    return [("prefill" if r.role == "prefill" else "decode", urls[r.id])
            for r in sorted(replicas, key=lambda r: order[r.role])]
