"""The names vLLM's flags accept: reasoning parsers, tool call parsers, attention backends.

The truth is the vLLM installed on the host: the probe reads its registries from the
package's files (`facts/engine_build.py: engine_build_facts`), and a name missing there is an error, since
vLLM 0.17.1 accepts a wrong `--reasoning-parser` at launch and dies only after loading the
weights and sizing the KV cache. Before vLLM is installed (check mode on a fresh host), the
built-in lists of vLLM 0.17.1 stand in, as warnings; the real-package tests compare them
with the registry of the real 0.17.1 wheel.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from orchestrator.facts import EngineBuild
from orchestrator.packages import same_version

REASONING_PARSERS_0_17 = frozenset({
    "deepseek_r1", "deepseek_v3", "ernie45", "glm45", "granite", "holo2", "hunyuan_a13b",
    "kimi_k2", "minimax_m2", "minimax_m2_append_think", "mistral", "nemotron_v3", "olmo3",
    "openai_gptoss", "qwen3", "seed_oss", "step3", "step3p5",
})
TOOL_CALL_PARSERS_0_17 = frozenset({
    "deepseek_v3", "deepseek_v31", "deepseek_v32", "ernie45", "functiongemma", "gigachat3",
    "glm45", "glm47", "granite", "granite-20b-fc", "hermes", "hunyuan_a13b", "internlm",
    "jamba", "kimi_k2", "llama3_json", "llama4_json", "llama4_pythonic", "longcat", "minimax",
    "minimax_m2", "mistral", "olmo3", "openai", "phi4_mini_json", "pythonic", "qwen3_coder",
    "qwen3_xml", "seed_oss", "step3", "step3p5", "xlam",
})
ATTENTION_BACKENDS_0_17 = frozenset({
    "FLASH_ATTN", "FLASH_ATTN_DIFFKV", "TRITON_ATTN", "ROCM_ATTN", "ROCM_AITER_MLA",
    "ROCM_AITER_TRITON_MLA", "ROCM_AITER_FA", "ROCM_AITER_MLA_SPARSE", "TORCH_SDPA",
    "FLASHINFER", "FLASHINFER_MLA", "FLASHINFER_MLA_SPARSE", "TRITON_MLA", "CUTLASS_MLA",
    "FLASHMLA", "FLASHMLA_SPARSE", "FLASH_ATTN_MLA", "NO_ATTENTION", "FLEX_ATTENTION",
    "TREE_ATTN", "ROCM_AITER_UNIFIED_ATTN", "CPU_ATTN", "CUSTOM",
})
FLAGS = ("reasoning-parser", "tool-call-parser", "attention-backend")


@dataclass(frozen=True)
class KnownNames:
    by_flag: dict[str, frozenset[str]]  # only the flags whose names are known
    source: str  # "is not <source>", where they come from
    authoritative: bool  # read from the vLLM that will run (a miss is an error)


def known_names(installed: EngineBuild | None, planned: str | None) -> KnownNames | None:
    """The names to check the plan's flags against: the installed vLLM's when it is the one
    that will run, else the built-in 0.17.1 lists (a 0.17.x or an unpinned vLLM), else
    none (another release is planned and not installed yet)."""
    if installed is not None and (planned is None or same_version(installed.version, planned)):
        found = {
            "reasoning-parser": installed.reasoning_parsers,
            "tool-call-parser": installed.tool_parsers,
            "attention-backend": installed.attention_backends,
        }
        return KnownNames({k: v for k, v in found.items() if v},
                          f"a name the host's vLLM {installed.version} knows", authoritative=True)
    if planned is None or planned.split(".")[:2] == ["0", "17"]:
        return KnownNames(
            {"reasoning-parser": REASONING_PARSERS_0_17, "tool-call-parser": TOOL_CALL_PARSERS_0_17,
             "attention-backend": ATTENTION_BACKENDS_0_17},
            "among vLLM 0.17.1's known names (built-in list: vLLM is not installed yet)",
            authoritative=False,
        )
    return None


def suggestion(name: str, known: frozenset[str]) -> str:
    close = difflib.get_close_matches(name, sorted(known), n=1)
    return f"did you mean {close[0]!r}? " if close else ""
