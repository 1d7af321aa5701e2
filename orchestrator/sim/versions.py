"""What differs on the wire between vLLM versions (facts §2, §3.1, §5, §8.2).

The version that switched the start-up wording and the `max_tokens` clamping lies somewhere
between 0.17.1 and 0.33.0 and is not known; the simulator switches at 0.33.0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_VLLM_VERSION = "0.17.1"


def parse_version(text: str) -> tuple[int, int, int]:
    """'0.17.1' -> (0, 17, 1); also accepts '0.17', '0.17.1rc1', '0.17.1.dev3+gabc'."""
    match = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?", text.strip())
    if not match:
        raise ValueError(f"invalid vLLM version {text!r} (expected a version such as 0.17.1)")
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


@dataclass(frozen=True)
class VllmVersion:
    text: str

    @property
    def key(self) -> tuple[int, int, int]:
        return parse_version(self.text)

    @property
    def reasoning_fields(self) -> tuple[str, ...]:
        """Names of the reasoning field in deltas and messages, in key order."""
        if self.key <= (0, 11, 0):
            return ("reasoning_content",)
        if self.key < (0, 16, 0):
            return ("reasoning", "reasoning_content")
        return ("reasoning",)

    @property
    def include_usage_default(self) -> bool:
        """`stream_options.include_usage` when stream_options is given without it."""
        return self.key < (0, 33, 0)

    @property
    def new_wording(self) -> bool:
        """0.33-style start-up lines and length handling."""
        return self.key >= (0, 33, 0)

    @property
    def engine_process(self) -> str:
        return "EngineCore" if self.new_wording else "EngineCore_DP0"


@dataclass(frozen=True)
class LengthCheck:
    """Outcome of checking a request against the context length."""

    max_tokens: int  # output limit to apply
    error: str | None = None
    param: str | None = None


def check_lengths(
    version: VllmVersion,
    prompt_tokens: int,
    requested: int | None,
    field: str,
    max_model_len: int,
) -> LengthCheck:
    """Validate prompt + requested output against `max_model_len`, worded as `version` does."""
    n, length = prompt_tokens, max_model_len
    if requested is not None and requested < 1:
        return LengthCheck(0, f"{field} must be at least 1, got {requested}.", field)
    if version.new_wording:
        if requested is not None and requested > length:
            msg = (
                f"max_tokens={requested} cannot be greater than max_model_len={length}. "
                "Please request fewer output tokens."
            )
            return LengthCheck(0, msg, field)
        if n >= length:
            msg = (
                f"This model's maximum context length is {length} tokens. However, your prompt "
                f"contains {n} input tokens, which exceeds this limit even without any output "
                "tokens. Please reduce the length of the input prompt."
            )
            return LengthCheck(0, msg, "input_tokens")
        return LengthCheck(min(requested or length, length - n))
    if version.key >= (0, 17, 0):
        return _lengths_0_17(n, requested, field, length)
    return _lengths_before_0_17(n, requested, length)


def _lengths_0_17(n: int, requested: int | None, field: str, length: int) -> LengthCheck:
    """vLLM 0.17's checks and words."""
    if requested is not None and requested > length:
        # sic: vLLM 0.17.1's message lacks a space and says max_total_tokens
        msg = (
            f"{field}={requested}cannot be greater than max_model_len=max_total_tokens="
            f"{length}. Please request fewer output tokens."
        )
        return LengthCheck(0, msg, field)
    wanted = requested if requested is not None else max(0, length - n)
    if n + wanted > length or n >= length:
        msg = (
            f"You passed {n} input tokens and requested {wanted} output tokens. However, "
            f"the model's context length is only {length} tokens, resulting in a maximum "
            f"input length of {length - wanted} tokens. Please reduce the length of the "
            "input prompt."
        )
        return LengthCheck(0, msg, "input_tokens")
    return LengthCheck(wanted)


def _lengths_before_0_17(n: int, requested: int | None, length: int) -> LengthCheck:
    """The checks and words of vLLM before 0.17."""
    if n >= length:
        msg = (
            f"This model's maximum context length is {length} tokens. However, your request "
            f"has {n} input tokens. Please reduce the length of the input messages."
        )
        return LengthCheck(0, msg, None)
    if requested is not None and n + requested > length:
        msg = (
            f"'max_tokens' or 'max_completion_tokens' is too large: {requested}. This model's "
            f"maximum context length is {length} tokens and your request has {n} input tokens "
            f"({requested} > {length} - {n})."
        )
        return LengthCheck(0, msg, None)
    return LengthCheck(requested if requested is not None else length - n)
