"""Before a sweep: which model to ask for (first of `/v1/models` unless given), which
vLLM version answers, and whether it is orch's simulator and at what time scale.

Off the hot path, so httpx (the project's client) does the talking.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import httpx

from orchestrator.errors import BenchError
from orchestrator.masking import mask

_HEADER_FIELD = re.compile(r"\s*([a-z_-]+)\s*=\s*([^;]+)")


@dataclass(frozen=True)
class ServerInfo:
    model: str
    version: str | None = None
    simulated: bool = False
    profile: str | None = None
    time_scale: float | None = None


def parse_simulator_header(value: str) -> tuple[str | None, float | None]:
    """'profile=kimi; time-scale=0.05' -> ('kimi', 0.05); unknown parts are ignored."""
    profile: str | None = None
    scale: float | None = None
    for part in value.split(";"):
        match = _HEADER_FIELD.match(part)
        if not match:
            continue
        key, raw = match.group(1).replace("_", "-"), match.group(2).strip()
        if key == "profile":
            profile = raw
        elif key == "time-scale":
            try:
                scale = float(raw)
            except ValueError:
                scale = None
    return profile, scale


def _get(client: httpx.Client, url: str) -> httpx.Response:
    try:
        return client.get(url)
    except httpx.HTTPError as error:
        raise BenchError(
            mask(f"cannot reach {url}: {error}"),
            hint="is the server running, and is the URL the server root (e.g. http://127.0.0.1:8000)?",
        ) from None


def probe_server(root: str, *, model: str | None, api_key: str | None, timeout: float = 10.0) -> ServerInfo:
    """Ask the server what it serves; BenchError when it cannot be reached or asked."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    with httpx.Client(timeout=timeout, headers=headers) as client:
        models = _get(client, f"{root}/v1/models")
        if models.status_code == 401:
            raise BenchError(
                f"{root}/v1/models: the server requires an API key (HTTP 401)",
                hint="pass --api-key-env NAME (a variable holding the key), or set service.api_key in the plan",
            )
        found = model
        if found is None:
            if models.status_code != 200:
                raise BenchError(
                    f"{root}/v1/models answered HTTP {models.status_code}; cannot pick a model",
                    hint="name the model with --model",
                )
            found = _first_model(models)
        version_info: dict[str, Any] = {}
        try:
            answer = client.get(f"{root}/version")
            if answer.status_code == 200 and isinstance(answer.json(), dict):
                version_info = answer.json()
        except (httpx.HTTPError, ValueError):
            pass
    sim = version_info.get("orch_simulator")
    profile, scale = (None, None)
    header = models.headers.get("x-orch-simulator")
    if header:
        profile, scale = parse_simulator_header(header)
    if isinstance(sim, dict):
        profile = str(sim.get("profile") or profile or "") or None
        raw_scale = sim.get("time_scale")
        if isinstance(raw_scale, int | float) and raw_scale > 0:
            scale = float(raw_scale)
    simulated = bool(header) or isinstance(sim, dict)
    version = version_info.get("version")
    return ServerInfo(
        model=found,
        version=str(version) if version is not None else None,
        simulated=simulated,
        profile=profile,
        time_scale=scale if simulated else None,
    )


def _first_model(response: httpx.Response) -> str:
    try:
        data = response.json().get("data")
        first = data[0]["id"]
    except (ValueError, AttributeError, IndexError, KeyError, TypeError):
        raise BenchError(
            f"{response.request.url}: no model listed", hint="name the model with --model"
        ) from None
    if not isinstance(first, str) or not first:
        raise BenchError(f"{response.request.url}: no model listed", hint="name the model with --model")
    return first
