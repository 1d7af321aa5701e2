"""An engine's compile cache, kept between starts: a warm start loads what an earlier start of
the same deployment compiled (vLLM: torch.compile's graphs under `VLLM_CACHE_ROOT`), and skips
minutes of compiling.

orch gives each service one cache root per key, outside the venv (a reinstalled venv keeps
it): `~/.cache/orch/compile/<service>/<key>`. The key is a digest of what changes the compiled
graphs (the engine build's pinned version, the model and its revision, the flags the engine
names in `key_flags`: parallel sizes, dtype, quantization, context length, compilation
config), and of nothing else: a tuner that changes only `max-num-seqs` keeps its warm cache,
and pivots between layouts do not overwrite each other's. The engine expands the `~` itself
(vLLM's envs.py: `os.path.expanduser`), so the path reads the same in a systemd unit's
environment file and in a shell."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from orchestrator.engines.layout import flag_values

ROOT = "~/.cache/orch/compile"
KEY_FORMAT = "orch-compile-key/1"

Start = Literal["cold", "warm"]


@dataclass(frozen=True)
class CompileCache:
    """Where an engine keeps what its start-up compiles, and what changes it."""

    env: str  # the variable naming its cache root (VLLM_CACHE_ROOT)
    subdir: str  # under the root: what a warm start loads (torch_compile_cache)
    key_flags: tuple[str, ...]  # flags whose values change what is compiled
    aliases: Mapping[str, str]  # short spellings of those flags (`-tp`, `-O`)


def cache_key(cache: CompileCache, *, build: str, model: str, revision: str | None,
              argv: Sequence[str]) -> str:
    """16 hex digits over the build, the model and the compile-relevant flags of the launch's
    `argv` (whatever part of the plan wrote them), nothing else (pure)."""
    flags = flag_values({}, argv, cache.key_flags, cache.aliases)
    canonical = json.dumps(
        {"format": KEY_FORMAT, "build": build, "model": model, "revision": revision,
         "flags": {name: flags[name] for name in sorted(flags)}},
        sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def cache_root(service: str, key: str) -> str:
    """The cache root of one service and key (a `~` path: the engine expands it)."""
    return f"{ROOT}/{service}/{key}"


# vLLM's own lines (compilation/backends.py, decorators.py in 0.32 and 0.33), with the
# optional `[tag] ` prefix: a graph loaded from the cache, or compiled now.
LOADED = re.compile(r"Directly load (?:the compiled graph|AOT compilation)")
COMPILED = re.compile(r"Compiling a graph for (?:compile range|dynamic shape|shape)"
                      r"|saved AOT compiled function to")
# The AOT function found but not loadable (0.32 on the CPU: "'function' object has no attribute
# 'finalize_loading'"): vLLM compiles again, and inductor's kernels in the same root serve it.
LOAD_FAILED = re.compile(r"Compiling model again due to a load failure from (\S+?),? reason: (.*)$")


class GraphLog:
    """What a start-up's log says of its compiled graphs: loaded from the cache, compiled now,
    and a load that failed (the reason vLLM gave)."""

    def __init__(self) -> None:
        self.loaded = 0
        self.compiled = 0
        self.load_failure: str | None = None

    def line(self, line: str) -> None:
        if LOADED.search(line):
            self.loaded += 1
        elif COMPILED.search(line):
            self.compiled += 1
        failed = LOAD_FAILED.search(line)
        if failed:
            self.load_failure = failed.group(2).strip()

    def to_json(self) -> dict[str, object]:
        if not (self.loaded or self.compiled or self.load_failure):
            return {}
        out: dict[str, object] = {"loaded": self.loaded, "compiled": self.compiled}
        if self.load_failure is not None:
            out["load_failure"] = self.load_failure
        return out


def start_kind(existed: bool | None, graphs: Mapping[str, object] | None) -> Start:
    """`warm` when the key's cache was there before the launch and the engine's log says it
    read it: its graphs loaded and none compiled, or a load that failed and a compile again
    (which inductor's cached kernels in the root serve); else `cold`."""
    graphs = graphs or {}
    loaded, compiled = graphs.get("loaded", 0), graphs.get("compiled", 0)
    read = (isinstance(loaded, int) and loaded > 0 and compiled == 0) or \
        graphs.get("load_failure") is not None
    return "warm" if existed and read else "cold"
