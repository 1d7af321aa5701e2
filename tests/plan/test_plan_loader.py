"""load_plan: layers (extends, overlays, --set), vars, origins, digest, positioned errors."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from orchestrator import masking
from orchestrator.errors import InventoryError, PlanError
from orchestrator.inventory import Inventory
from orchestrator.plan.loader import load_plan, load_validated_yaml


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    write(
        tmp_path / "base" / "common.yaml",
        """\
name: common
hosts: gpus
vars:
  version: "0.17.1"
python:
  venv: /opt/venvs/vllm-${vars.version}
install:
  packages:
    - vllm==${vars.version}
  clean: true
env:
  HF_TOKEN: ${env:HF_TOKEN}
  NCCL_P2P_LEVEL: SYS
files:
  - path: /etc/orch/a.conf
    template: templates/a.conf.j2
""",
    )
    write(tmp_path / "base" / "templates" / "a.conf.j2", "version ${vars.version}\n")
    write(
        tmp_path / "plan.yaml",
        """\
name: top
extends: base/common.yaml
service:
  model: m
  port: 8000
  args:
    tensor-parallel-size: 8
""",
    )
    write(
        tmp_path / "overlays" / "sim.yaml",
        """\
hosts: localhost
vars:
  version: "0.18.0"
env:
  HF_TOKEN: null
service:
  engine: sim
""",
    )
    return tmp_path


def test_layers_merge_in_order(tree: Path) -> None:
    loaded = load_plan(tree / "plan.yaml", [tree / "overlays" / "sim.yaml"], ["service.port=8001"])
    plan = loaded.plan
    assert [
        Path(layer).name if not layer.startswith("--") else layer for layer in loaded.layers
    ] == [
        "common.yaml",
        "plan.yaml",
        "sim.yaml",
        "--set service.port=8001",
    ]
    assert plan.name == "top"
    assert plan.hosts == "localhost"
    assert plan.service is not None
    assert (plan.service.engine, plan.service.port, plan.service.model) == ("sim", 8001, "m")
    assert plan.service.args == {"tensor-parallel-size": 8}
    # vars are filled in after all layers: the overlay's version reaches the base's strings.
    assert plan.python is not None and plan.python.venv == "/opt/venvs/vllm-0.18.0"
    assert plan.install.packages == ["vllm==0.18.0"]
    assert plan.install.clean is True
    # null deleted the inherited secret.
    assert plan.env == {"NCCL_P2P_LEVEL": "SYS"}
    assert loaded.path == (tree / "plan.yaml").resolve()
    assert loaded.base_dir == tree.resolve()
    assert loaded.data["python"]["venv"] == "/opt/venvs/vllm-0.18.0"
    assert dataclasses.is_dataclass(loaded)
    with pytest.raises(dataclasses.FrozenInstanceError):
        loaded.digest = "x"  # type: ignore[misc]


def test_origins_name_the_layer_and_line(tree: Path) -> None:
    loaded = load_plan(tree / "plan.yaml", [tree / "overlays" / "sim.yaml"], ["service.port=8001"])
    origins = {key: value.split("/")[-1] for key, value in loaded.origins.items()}
    assert origins["install.packages"] == "common.yaml:8"
    assert origins["install.clean"] == "common.yaml:10"
    assert origins["python.venv"] == "common.yaml:6"
    assert origins["vars.version"] == "sim.yaml:3"
    assert origins["hosts"] == "sim.yaml:1"
    assert origins["service.engine"] == "sim.yaml:7"
    assert origins["service.model"] == "plan.yaml:4"
    assert origins["service.args.tensor-parallel-size"] == "plan.yaml:7"
    assert loaded.origins["service.port"] == "--set service.port=8001"
    assert origins["env.NCCL_P2P_LEVEL"] == "common.yaml:13"
    assert "env.HF_TOKEN" not in origins  # deleted by the overlay


def test_a_list_replaces_and_takes_its_origin(tree: Path) -> None:
    loaded = load_plan(tree / "plan.yaml", sets=["install.packages=[vllm==0.17.1, uv==0.5.0]"])
    assert loaded.plan.install.packages == ["vllm==0.17.1", "uv==0.5.0"]
    assert loaded.origins["install.packages"].startswith("--set install.packages=")
    # Items of a list come with the list: not listed one by one.
    assert "install.packages.1" not in loaded.origins


def test_set_can_change_one_list_item(tree: Path) -> None:
    write(tree / "smoke.yaml", "smoke:\n  - {name: a, prompt: x}\n  - {name: b, prompt: y}\n")
    loaded = load_plan(tree / "plan.yaml", [tree / "smoke.yaml"], ["smoke.1.max_tokens=64"])
    assert [s.max_tokens for s in loaded.plan.smoke] == [1024, 64]
    assert loaded.origins["smoke.1.max_tokens"] == "--set smoke.1.max_tokens=64"
    assert loaded.origins["smoke"].endswith("smoke.yaml:1")
    assert "smoke.1.name" not in loaded.origins  # set with the list, by the same layer


def test_template_paths_are_relative_to_the_file_that_names_them(tree: Path) -> None:
    loaded = load_plan(tree / "plan.yaml")
    template = loaded.plan.files[0].template
    assert template == str(tree.resolve() / "base" / "templates" / "a.conf.j2")
    assert (loaded.base_dir / str(template)).read_text() == "version ${vars.version}\n"


def test_a_missing_template_is_a_plan_error(tree: Path) -> None:
    (tree / "base" / "templates" / "a.conf.j2").unlink()
    with pytest.raises(PlanError) as raised:
        load_plan(tree / "plan.yaml")
    assert "template file not found" in raised.value.message
    assert raised.value.file is not None and raised.value.file.endswith("common.yaml")
    assert (raised.value.line, raised.value.column) == (16, 15)


def test_several_bases_merge_in_order(tmp_path: Path) -> None:
    write(tmp_path / "one.yaml", "name: one\ndescription: from one\nhosts: a\n")
    write(tmp_path / "two.yaml", "name: two\nhosts: b\n")
    write(tmp_path / "deep" / "three.yaml", "extends: [../one.yaml, ../two.yaml]\nname: three\n")
    loaded = load_plan(tmp_path / "deep" / "three.yaml")
    assert (loaded.plan.name, loaded.plan.hosts, loaded.plan.description) == (
        "three",
        "b",
        "from one",
    )
    assert [Path(p).name for p in loaded.layers] == ["one.yaml", "two.yaml", "three.yaml"]


def test_a_diamond_is_not_a_cycle(tmp_path: Path) -> None:
    write(tmp_path / "root.yaml", "name: root\n")
    write(tmp_path / "left.yaml", "extends: root.yaml\nname: left\n")
    write(tmp_path / "right.yaml", "extends: root.yaml\nname: right\n")
    write(tmp_path / "top.yaml", "extends: [left.yaml, right.yaml]\nname: top\n")
    assert load_plan(tmp_path / "top.yaml").plan.name == "top"


def test_cycles_name_the_chain(tmp_path: Path) -> None:
    write(tmp_path / "a.yaml", "name: a\nextends: b.yaml\n")
    write(tmp_path / "b.yaml", "name: b\nextends: sub/c.yaml\n")
    write(tmp_path / "sub" / "c.yaml", "name: c\nextends: ../a.yaml\n")
    with pytest.raises(PlanError) as raised:
        load_plan(tmp_path / "a.yaml")
    message = raised.value.message
    assert message.startswith("extends cycle: ")
    chain = [Path(part).name for part in message.removeprefix("extends cycle: ").split(" -> ")]
    assert chain == ["a.yaml", "b.yaml", "c.yaml", "a.yaml"]
    assert raised.value.file is not None and raised.value.file.endswith("c.yaml")
    assert (raised.value.line, raised.value.column) == (2, 10)


def test_overlays_may_extend(tmp_path: Path) -> None:
    write(tmp_path / "plan.yaml", "name: p\n")
    write(tmp_path / "o" / "common.yaml", "description: shared overlay\n")
    write(tmp_path / "o" / "one.yaml", "extends: common.yaml\nhosts: x\n")
    loaded = load_plan(tmp_path / "plan.yaml", [tmp_path / "o" / "one.yaml"])
    assert (loaded.plan.description, loaded.plan.hosts) == ("shared overlay", "x")


def test_errors_point_at_the_layer_that_set_the_value(tree: Path) -> None:
    # The bad value comes from --set: the error names the --set, not a file.
    with pytest.raises(PlanError) as raised:
        load_plan(tree / "plan.yaml", sets=["service.port=http"])
    assert raised.value.file == "--set service.port=http"
    assert raised.value.line is None
    # The overlay sets a bad value over a good one: the error points into the overlay.
    write(tree / "bad.yaml", "service:\n  port: [8000]\n")
    with pytest.raises(PlanError) as raised:
        load_plan(tree / "plan.yaml", [tree / "bad.yaml"])
    assert raised.value.file is not None and raised.value.file.endswith("bad.yaml")
    assert (raised.value.line, raised.value.column) == (2, 9)
    # A later layer fixes what an earlier one got wrong: no error at all.
    write(tree / "fix.yaml", "service:\n  port: 8002\n")
    assert load_plan(tree / "plan.yaml", [tree / "bad.yaml", tree / "fix.yaml"]).plan.service


def test_an_error_in_a_substituted_value_points_at_the_reference(tmp_path: Path) -> None:
    write(
        tmp_path / "p.yaml",
        "name: p\nvars: {port: http}\nservice:\n  model: m\n  port: ${vars.port}\n",
    )
    with pytest.raises(PlanError) as raised:
        load_plan(tmp_path / "p.yaml")
    assert (raised.value.line, raised.value.column, raised.value.field) == (5, 9, "service.port")
    assert "expected an integer, got the string 'http'" in raised.value.message


def test_every_problem_is_reported(tmp_path: Path) -> None:
    write(
        tmp_path / "p.yaml",
        "name: p\nservice:\n  model: m\n  port: x\n  engin: sim\nbench:\n  mode: z\n",
    )
    with pytest.raises(PlanError) as raised:
        load_plan(tmp_path / "p.yaml")
    text = str(raised.value)
    assert raised.value.line == 4  # the first problem in file order leads
    assert "2 more problem(s)" in text
    assert "p.yaml:5:3: unknown key 'engin' in service" in text
    assert "p.yaml:7:9: bench.mode: the string 'z' is not one of the allowed values" in text


def test_digest_is_stable_and_follows_the_resolved_plan(tree: Path) -> None:
    first = load_plan(tree / "plan.yaml")
    assert load_plan(tree / "plan.yaml").digest == first.digest
    assert len(first.digest) == 64 and int(first.digest, 16) >= 0
    assert load_plan(tree / "plan.yaml", sets=["service.port=8001"]).digest != first.digest
    # Setting a value to what it already is changes nothing.
    assert load_plan(tree / "plan.yaml", sets=["service.port=8000"]).digest == first.digest


def test_digest_is_computed_over_masked_text(tmp_path: Path) -> None:
    write(tmp_path / "a.yaml", "name: p\ndescription: token s3cr3t-value\n")
    write(tmp_path / "b.yaml", "name: p\ndescription: token ***\n")
    plain = load_plan(tmp_path / "a.yaml").digest
    masking.register("s3cr3t-value")
    masked = load_plan(tmp_path / "a.yaml").digest
    assert masked != plain
    assert masked == load_plan(tmp_path / "b.yaml").digest


def test_missing_plan_and_overlay_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match=r"plan file not found: .*nope\.yaml"):
        load_plan(tmp_path / "nope.yaml")
    write(tmp_path / "p.yaml", "name: p\n")
    with pytest.raises(PlanError, match=r"overlay file not found: .*gone\.yaml"):
        load_plan(tmp_path / "p.yaml", [tmp_path / "gone.yaml"])


def test_load_validated_yaml_raises_the_given_error(tmp_path: Path) -> None:
    write(tmp_path / "inv.yaml", "hosts:\n  gpu1:\n    adress: 10.0.0.5\n")
    with pytest.raises(InventoryError) as raised:
        load_validated_yaml(tmp_path / "inv.yaml", Inventory, error=InventoryError)
    text = str(raised.value)
    assert "inv.yaml:3:5: unknown key 'adress' in hosts.gpu1" in text
    assert "did you mean 'address'?" in text
    assert "    adress: 10.0.0.5" in text
    write(tmp_path / "ok.yaml", "hosts:\n  h: {connection: local}\ngroups:\n  g: [h]\n")
    inventory = load_validated_yaml(tmp_path / "ok.yaml", Inventory, error=InventoryError)
    assert inventory.select("g") == ["h"]
