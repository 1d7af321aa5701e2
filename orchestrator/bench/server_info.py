"""Before a sweep: which model to ask for (first of `/v1/models` unless given), which
vLLM version answers, and whether it is orch's simulator and at what time scale.

Off the hot path, so the server client (`server_client.py`) does the talking.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from orchestrator.errors import BenchError, ServerUnreachable
from orchestrator.server_client import ServerClient

PROBE_TIMEOUT_S = 10.0  # the look at the server before a sweep (at most the request timeout)
_HEADER_FIELD = re.compile(r"\s*([a-z_-]+)\s*=\s*([^;]+)")


@dataclass(frozen=True)
class ServerInfo:
    model: str
    version: str | None = None
    simulated: bool = False
    profile: str | None = None
    time_scale: float | None = None


def usable_scale(raw: object) -> float | None:
    """A time scale divides every figure: only a finite number above 0 is one (a server
    saying `nan` or `-1` would turn every figure into nan or a negative)."""
    try:
        value = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) and value > 0 else None


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
            scale = usable_scale(raw)
    return profile, scale


def probe_server(root: str, *, model: str | None, api_key: str | None,
                 timeout: float = PROBE_TIMEOUT_S) -> ServerInfo:
    """Ask the server what it serves; BenchError when it cannot be reached or asked. Each
    request takes at most PROBE_TIMEOUT_S, or `timeout` (the benchmark's) when shorter."""
    with ServerClient(root, api_key=api_key, timeout=min(PROBE_TIMEOUT_S, timeout)) as client:
        try:
            models = client.models()
        except ServerUnreachable as error:
            raise BenchError(
                str(error),
                hint="is the server running, and is the URL the server root (e.g. http://127.0.0.1:8000)?",
            ) from None
        if models.status == 401:
            raise BenchError(
                f"{root}/v1/models: the server requires an API key (HTTP 401)",
                hint="pass --api-key-env NAME (a variable holding the key), or set service.api_key in the plan",
            )
        if model is None and models.status != 200:
            raise BenchError(
                f"{root}/v1/models answered HTTP {models.status}; cannot pick a model",
                hint="name the model with --model",
            )
        if model is None and not models.names:
            raise BenchError(f"{root}/v1/models: no model listed", hint="name the model with --model")
        found = model or models.names[0]
        version_info = client.version()
    sim = version_info.get("orch_simulator")
    profile, scale = (None, None)
    if models.simulator:
        profile, scale = parse_simulator_header(models.simulator)
    if isinstance(sim, dict):
        profile = str(sim.get("profile") or profile or "") or None
        raw_scale = sim.get("time_scale")
        if isinstance(raw_scale, int | float) and usable_scale(raw_scale) is not None:
            scale = float(raw_scale)
    simulated = bool(models.simulator) or isinstance(sim, dict)
    version = version_info.get("version")
    return ServerInfo(
        model=found,
        version=str(version) if version is not None else None,
        simulated=simulated,
        profile=profile,
        time_scale=scale if simulated else None,
    )
