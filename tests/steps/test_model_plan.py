"""The model step's pure half: what it says and decides from the host's facts (no host here;
tests/steps/test_model_weights.py runs it against the stand-in hub), and what the `model:`
section gives the service."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.errors import PlanError
from orchestrator.facts import Facts
from orchestrator.facts.model import ModelFacts, ModelFile, model_places
from orchestrator.plan.loader import LoadedPlan, load_plan
from orchestrator.plan.models import ModelSpec, PythonEnv
from orchestrator.steps.model import SPACE_MARGIN, ModelStep, progress_text, size_text

GB = 10**9
COMMIT = "0fd0a5e6879298d3476e3b61852a79792a35ae3d"
SPEC = ModelSpec(repo="nvidia/Kimi-K2.5-NVFP4", revision=COMMIT, dir="/models/kimi")


def load_plan_text(text: str, folder: Path) -> LoadedPlan:
    (folder / "plan.yaml").write_text(text)
    return load_plan(folder / "plan.yaml")


def step(spec: ModelSpec = SPEC) -> ModelStep:
    return ModelStep(spec, PythonEnv(venv="/opt/v"), {})


def facts(*files: ModelFile, free: int | None = 10**15, partial: int = 0,
          **more: object) -> Facts:
    found = Facts()
    given: dict[str, object] = {"commit": COMMIT, "files": list(files), **more}
    found.extra["model"] = ModelFacts(
        places=model_places({"dir": "/models/kimi", "repo": SPEC.repo}), repo=SPEC.repo,
        revision=COMMIT, partial_bytes=partial,
        space_path="/models", free_bytes=free, **given)  # type: ignore[arg-type]
    return found


def shards(state: str, count: int, size: int = 5 * GB) -> list[ModelFile]:
    return [ModelFile(f"model-{i:05d}.safetensors", size, sha256="a" * 64, state=state)
            for i in range(count)]


def test_what_is_missing_in_files_and_bytes() -> None:
    plan = step().plan(facts(*shards("ok", 96), *shards("missing", 23),
                             partial=3_200_000_000))
    assert [c.summary for c in plan.changes] == [
        "model: nvidia/Kimi-K2.5-NVFP4@0fd0a5e68792: 23 of 119 files (23 missing), 111.8 GB "
        "to fetch (resuming 3.2 GB already on disk)"]
    assert plan.blocked is None


def test_a_converged_host_has_nothing_to_do() -> None:
    plan = step().plan(facts(*shards("ok", 119)))
    assert plan.converged and plan.blocked is None and not plan.findings


def test_unverified_files_are_hashed_before_anything_is_fetched() -> None:
    plan = step().plan(facts(*shards("ok", 2), *shards("unverified", 1), *shards("size", 1)))
    assert plan.changes[0].summary.endswith(
        "2 of 4 files (1 of the wrong size, 1 changed or never verified: hashed first), "
        "5.0 GB to fetch (and up to 5.0 GB more if a hash differs)")


def test_too_little_space_blocks_before_any_download() -> None:
    plan = step().plan(facts(*shards("missing", 2), free=10 * GB))
    assert not plan.changes
    assert plan.blocked == (
        "not enough disk space for the model: /models has 10.0 GB free, the download needs "
        f"10.0 GB (plus {size_text(SPACE_MARGIN)} kept free)")
    assert plan.findings[0].fix.startswith("free space there")


def test_before_the_venv_exists_the_fetch_is_pending_not_an_error() -> None:
    plan = step(SPEC.model_copy(update={"revision": "main"})).plan(facts(
        commit=None, files=None, hub_error="the venv has no python yet", hub_error_kind="client"))
    assert plan.blocked is None
    assert [c.summary for c in plan.changes] == [
        "model: fetch nvidia/Kimi-K2.5-NVFP4@main (its files are listed once the venv has "
        "huggingface_hub)"]


@pytest.mark.parametrize(("kind", "fix"), [
    ("auth", "set model.token: ${env:HF_TOKEN}"),
    ("revision", "check model.revision"),
    ("unreachable", "check model.endpoint / HF_ENDPOINT"),
])
def test_what_the_hub_refused_blocks_the_step_with_its_fix(kind: str, fix: str) -> None:
    plan = step().plan(facts(commit=None, files=None, hub_error="HfHubHTTPError: 401",
                             hub_error_kind=kind, hub="https://huggingface.co", attempts=3))
    assert plan.blocked == ("nvidia/Kimi-K2.5-NVFP4@" + COMMIT + ": the hub at "
                            "https://huggingface.co after 3 attempts: HfHubHTTPError: 401")
    assert plan.findings[-1].fix.startswith(fix)


def test_a_branch_says_its_commit_and_a_stale_one_is_a_warning() -> None:
    branch = step(SPEC.model_copy(update={"revision": "main"}))
    said = branch.plan(facts(*shards("ok", 1), resolved=COMMIT)).findings
    assert said[0].message == f"model: revision main of nvidia/Kimi-K2.5-NVFP4 is commit {COMMIT}"
    stale = branch.plan(facts(*shards("ok", 1), hub_error="ConnectError", from_ref=True))
    assert stale.converged and stale.findings[0].level == "warning"


def test_progress_reads_as_bytes_rate_and_eta() -> None:
    assert progress_text({"done": 120 * GB, "total": 600 * GB}, 100.0) == \
        "120.0 GB of 600.0 GB, 1.2 GB/s, ETA 6m40s"
    assert progress_text({"done": 0, "total": 5_200_000}, 0.0) == "0 B of 5.2 MB"


PLAN = """
name: p
python: {venv: /opt/v}
model: {repo: org/m, revision: main%s}
service: {engine: vllm%s}
"""


def test_the_service_serves_the_section_unless_it_names_a_model(tmp_path: Path) -> None:
    folder = load_plan_text(PLAN % (", dir: /models/m", ""), tmp_path).plan
    assert folder.service is not None and folder.service.model == "/models/m"
    assert folder.service.served_names() == ["org/m"] and folder.env["HF_HUB_OFFLINE"] == "1"
    cache = load_plan_text(PLAN % (", cache: /data/hf", ""), tmp_path).plan
    assert cache.service is not None and cache.service.model == "org/m"
    assert cache.service.args["revision"] == "main"
    assert cache.env == {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": "/data/hf"}
    named = load_plan_text(PLAN % ("", ", model: /elsewhere"), tmp_path).plan
    assert named.service is not None and named.service.model == "/elsewhere"
    assert "revision" not in named.service.args and named.env == {}


@pytest.mark.parametrize("bad", ["owner/na--me", "a/b/c", "-x/y", "org/m;id", "org/..",
                                 "org/$(id)"])
def test_a_repository_id_is_held_to_the_hubs_characters(bad: str, tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="expected a repository id"):
        load_plan_text(PLAN.replace("org/m", f"'{bad}'") % ("", ""), tmp_path)
