"""The simulator's torch.compile cache, where vLLM keeps its own: under `VLLM_CACHE_ROOT`, in
`torch_compile_cache/<hash>/rank_0_0/backbone`, the hash over what changes the compiled graph.
A start that finds its graph there loads it (vLLM's "Directly load the compiled graph(s) ...
from the cache" line) and skips the simulated compile time; one that does not compiles and
saves it. Without `VLLM_CACHE_ROOT` it keeps none (every start compiles, and `orch sim serve`
run by hand writes nothing into the user's home); orch sets it for every service."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from orchestrator.sim.options import SimOptions

ARTIFACT = "computation_graph.py"  # vLLM's file of a saved graph (compilation/backends.py)


@dataclass(frozen=True)
class SimCompileCache:
    folder: Path | None  # None: no cache root given

    @classmethod
    def of(cls, options: SimOptions) -> SimCompileCache:
        root = os.environ.get("VLLM_CACHE_ROOT")
        if not root:
            return cls(None)
        factors = {"model": options.model, "profile": options.profile.name,
                   "max_model_len": options.max_model_len, "tp": options.tensor_parallel,
                   "pp": options.pipeline_parallel, "kv": options.cache_dtype,
                   "version": options.version.text, "range": options.max_num_batched_tokens}
        digest = hashlib.sha256(json.dumps(factors, sort_keys=True).encode()).hexdigest()[:10]
        return cls(Path(os.path.expanduser(root)) / "torch_compile_cache" / digest / "rank_0_0"
                   / "backbone")

    def shown(self) -> str:
        """The folder as vLLM's "Using cache directory" line names it."""
        return f"{self.folder}/" if self.folder else \
            "/root/.cache/vllm/torch_compile_cache/3f1a9c2e7b/rank_0_0/backbone"

    def warm(self) -> bool:
        return self.folder is not None and (self.folder / ARTIFACT).is_file()

    def save(self) -> None:
        """Best effort, as vLLM's: an unwritable cache only means compiling again next time."""
        if self.folder is None:
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            (self.folder / ARTIFACT).write_text("# the simulator's compiled graph (none)\n")
        except OSError:
            pass
