"""The plan's `model:` section: the weights, as a pinned resource converged on each host with
the real `huggingface_hub` client (steps/model.py), and how the service reaches them."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, field_validator

from orchestrator.plan.models.base import Duration, StrictModel, host_path

# The Hub's repository ids: owner/name, letters, digits and `-_.`, no `--` or `..` (the cache
# folder `models--owner--name` splits on `--`).
_REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}")
# A branch, a tag or a commit: git ref characters, no `..`, no leading `-` (an option).
_REVISION = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./-]{0,127}")
COMMIT = re.compile(r"[0-9a-f]{40}")
_PATTERN = re.compile(r"[A-Za-z0-9_.*?\[\]/@+-]{1,200}")
_URL = re.compile(r"https?://[A-Za-z0-9.-]+(:\d{1,5})?(/[A-Za-z0-9._~/-]*)?")


class ModelSpec(StrictModel):
    """The model's weights: which repository and revision, which files, and where they go.
    orch fetches what is missing before the service starts, resumes a partial download,
    refetches a file whose hash is wrong, and records the commit with the run."""

    repo: str = Field(description="Hub repository id, e.g. `nvidia/Kimi-K2.5-NVFP4`.")
    revision: str = Field(
        "main", description="Branch, tag or 40-hex commit. A commit is fully reproducible and "
                            "lets a converged host skip the hub; `orch plan` shows the commit "
                            "a branch resolves to.")
    dir: str | None = Field(
        None, description="Put the files in this host folder (the service is given the "
                          "folder). Without it they go to the Hugging Face cache.")
    cache: str | None = Field(
        None, description="The Hugging Face cache folder on the host (`HF_HUB_CACHE`), "
                          "without `dir`; default: the host user's own (`~/.cache/huggingface/hub`).")
    allow: list[str] = Field(
        default_factory=list, description="Only files matching one of these patterns "
                                          "(fnmatch, e.g. `*.safetensors`); empty: all.")
    ignore: list[str] = Field(
        default_factory=list, description="Leave out files matching these patterns.")
    token: str | None = Field(
        None, description="Hub token for a gated or private repository: a secret reference "
                          "`${env:HF_TOKEN}` (sent on stdin, never stored).")
    endpoint: str | None = Field(
        None, description="The hub's address (`HF_ENDPOINT`); default: the host's "
                          "`HF_ENDPOINT`, else huggingface.co.")
    timeout: Duration = Field(
        6 * 3600.0, gt=0, description="Give up on a download after this long (6h).")

    @field_validator("repo")
    @classmethod
    def _repo(cls, value: str) -> str:
        if not _REPO.fullmatch(value) or "--" in value or ".." in value:
            raise ValueError(f"expected a repository id such as nvidia/Kimi-K2.5-NVFP4 "
                             f"(owner/name: letters, digits, - _ .), got {value!r}")
        return value

    @field_validator("revision")
    @classmethod
    def _revision(cls, value: str) -> str:
        if not _REVISION.fullmatch(value) or ".." in value or value.endswith(("/", ".lock")):
            raise ValueError(f"expected a branch, tag or 40-hex commit, got {value!r}")
        return value

    @field_validator("dir", "cache")
    @classmethod
    def _folder(cls, value: str | None) -> str | None:
        return None if value is None else host_path(value.rstrip("/") or "/")

    @field_validator("allow", "ignore")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        for pattern in value:
            if not _PATTERN.fullmatch(pattern) or ".." in pattern.split("/"):
                raise ValueError(f"expected a file pattern such as *.safetensors, got "
                                 f"{pattern!r}")
        return value

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        if value is not None and not _URL.fullmatch(value.rstrip("/")):
            raise ValueError(f"expected an http(s) address such as http://10.0.0.5:8790, "
                             f"got {value!r}")
        return None if value is None else value.rstrip("/")

    @field_validator("token")
    @classmethod
    def _one_line(cls, value: str | None) -> str | None:
        if value is not None and ("\n" in value or "\r" in value):
            raise ValueError("a token cannot hold a line break")
        return value

    @property
    def pinned(self) -> bool:
        return COMMIT.fullmatch(self.revision) is not None


def service_defaults(data: Any) -> Any:
    """A plan whose `service:` names no `model`, beside a `model:` section, serves the
    section's files: its folder (clients use the repository id as the model's name), or from
    the cache the repository at its revision, offline (the server loads what orch fetched)."""
    if not isinstance(data, dict):
        return data
    model, service = data.get("model"), data.get("service")
    if not isinstance(model, dict) or not isinstance(service, dict) or "model" in service:
        return data
    repo = model.get("repo")
    if not isinstance(repo, str):
        return data
    service = dict(service)
    env = dict(data.get("env") or {})
    env.setdefault("HF_HUB_OFFLINE", "1")
    if model.get("dir"):
        service["model"] = model["dir"]
        service.setdefault("served_model_name", repo)
    else:
        service["model"] = repo
        args = dict(service.get("args") or {})
        args.setdefault("revision", model.get("revision", "main"))
        service["args"] = args
        if model.get("cache"):
            env.setdefault("HF_HUB_CACHE", model["cache"])
    return {**data, "service": service, "env": env}
