"""The plan's `smoke:` checks: a request and what its answer must show."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import (
    Field,
    field_validator,
)

from orchestrator.names import check_name
from orchestrator.plan.models.base import Duration, StrictModel


class FunctionCall(StrictModel):
    """One call of the function and the value it must return."""

    args: list[Any] = Field(default_factory=list, description="Positional arguments.")
    returns: Any = Field(description="Expected return value (compared with ==).")


class PythonFunctionExpect(StrictModel):
    """The answer's Python code block must define this function and pass these calls."""

    name: str = Field(description="Name of the function the answer must define.")
    calls: list[FunctionCall] = Field(default_factory=list, description="Calls and their results.")


class SmokeExpect(StrictModel):
    """Expectations on a smoke check's answer; all of them must hold."""

    success: bool = Field(True, description="The request must succeed (HTTP 200, no error event).")
    non_empty: bool = Field(True, description="The content must not be empty.")
    reasoning: Literal["present", "absent"] | None = Field(
        None, description="Whether reasoning tokens must be present or absent."
    )
    contains: list[str] = Field(default_factory=list, description="Substrings the content must hold.")
    content_regex: str | None = Field(None, description="A regex the content must match.")
    json_valid: bool = Field(False, description="The content must be valid JSON.")
    min_tokens: int | None = Field(None, ge=1, description="Minimum completion tokens.")
    python_function: PythonFunctionExpect | None = Field(
        None, description="Run the answer's Python code block with these calls."
    )

    @field_validator("content_regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as error:
                raise ValueError(f"invalid regular expression: {error}") from None
        return value


class SmokeCheck(StrictModel):
    """One chat request and what its answer must satisfy."""

    name: str = Field(description="Name shown in the output and the run folder.")
    prompt: str = Field(description="User message.")
    thinking: bool | None = Field(
        None, description="Turn thinking on or off through chat_template_kwargs; unset = default."
    )
    max_tokens: int = Field(1024, ge=1, description="Completion token limit.")
    temperature: float | None = Field(None, ge=0, description="Sampling temperature.")
    timeout: Duration = Field(300.0, gt=0, description="Request timeout.")
    expect: SmokeExpect = Field(
        default_factory=SmokeExpect, description="What the answer must satisfy."
    )

    @field_validator("name")
    @classmethod
    def _file_safe(cls, value: str) -> str:
        return check_name(value, "a check name (it names smoke/<name>.json)", max_length=64)


# one field `<name>_ms` per objective of orchestrator/metrics.py (a test holds them equal)
