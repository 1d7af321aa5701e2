"""A field's meaning is said on the field (plan/meaning.py marks in plan/models/); the lists
the loader and the host variables used to keep beside the model are read back from it."""

from __future__ import annotations

from pathlib import Path

from orchestrator.apply.compile import compile_plan
from orchestrator.plan.host_vars import ALLOWED
from orchestrator.plan.loader import load_plan
from orchestrator.plan.meaning import (
    Meaning,
    controller_path,
    expand,
    host_vars,
    patterns,
    sections_of,
    step_of,
)
from orchestrator.plan.models import Plan

REPO = Path(__file__).resolve().parents[2]


def test_the_controller_paths_and_host_variable_places_come_from_the_model() -> None:
    assert patterns(Plan, controller_path) == (
        ("files", "*", "template"), ("bench", "dataset"), ("bench", "tokenizer"))
    assert set(patterns(Plan, host_vars)) == {
        ("env",), ("files",), ("service", "args"), ("service", "extra_args"), ("commands",),
        ("service", "nodes", "address"), ("service", "nodes", "ray_args")}
    assert set(ALLOWED) == set(patterns(Plan, host_vars))


def test_a_pattern_names_the_paths_the_data_holds() -> None:
    data = {"files": [{"path": "/a", "template": "a.j2"}, {"path": "/b", "content": "x"},
                      {"path": "/c", "template": "c.j2"}],
            "bench": {"dataset": "d.jsonl"}}
    found = [p for pattern in patterns(Plan, controller_path) for p in expand(data, pattern)]
    assert found == [("files", 0, "template"), ("files", 2, "template"), ("bench", "dataset")]
    assert expand({"files": "not a list"}, ("files", "*", "template")) == []


def test_the_step_a_path_belongs_to_is_said_on_its_section() -> None:
    assert step_of(Plan, "install.packages") == step_of(Plan, "python.venv") == "python"
    assert step_of(Plan, "service.args.max-num-seqs") == step_of(Plan, "env.VLLM_X") == "service"
    assert step_of(Plan, "files") == "files" and step_of(Plan, "commands") == "commands"
    assert step_of(Plan, "bench.concurrency") is None  # runs after the steps: costs no step
    assert step_of(Plan, "no.such.path") is None
    assert sections_of(Plan, "python") == ("python", "install")  # what an install depends on


def test_every_step_a_section_names_is_a_step_compile_builds() -> None:
    loaded = load_plan(REPO / "plans/sim/kimi-nvfp4.yaml", sets=[
        "files=[{path: /tmp/orch-meaning-test.conf, content: x}]",
        "commands=[{name: hello, run: ['true']}]", "model={repo: orch/tiny, dir: /tmp/m}"])
    compiled = compile_plan(loaded, {}, ["h"])
    built = {step.name for step in compiled.steps["h"]}
    named = {m.step for info in Plan.model_fields.values() for m in info.metadata
             if isinstance(m, Meaning) and m.step}
    assert named == {"python", "model", "files", "commands", "service"} and named <= built
