"""`${host.NAME}`: per-host values from the inventory, filled in when the plan is compiled
for each host; located errors for a missing variable or a place that must not vary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures.orchcli import orch

from orchestrator.apply.compile import check, compile_plan
from orchestrator.errors import PlanError
from orchestrator.inventory import Inventory, load_inventory
from orchestrator.plan.loader import load_plan
from orchestrator.service.step import ServiceStep
from orchestrator.steps.files import FilesStep

INVENTORY = {
    "hosts": {
        "a": {"connection": "local", "vars": {"gpus": 8}},
        "b": {"connection": "local", "address": "10.0.0.2", "vars": {"gpus": 4, "nic": "eth9"}},
    },
    "groups": {"all": ["a", "b"], "inner": ["a"], "outer": ["inner"]},
    "group_vars": {"all": {"nic": "eth0", "rack": "r1"}, "outer": {"nic": "ib1"},
                   "inner": {"nic": "ib0"}},
}


def _files(tmp_path: Path, plan: dict[str, Any]) -> tuple[Path, Inventory]:
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump({"name": "hv", "hosts": "all", **plan}, sort_keys=False))
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(yaml.safe_dump(INVENTORY))
    return path, load_inventory(inventory)


SERVICE = {
    "python": {"venv": "/opt/v"},
    "env": {"NCCL_SOCKET_IFNAME": "${host.nic}", "NODE": "${host.name}@${host.address}"},
    "service": {"model": "m", "args": {"tensor-parallel-size": "${host.gpus}"},
                "extra_args": ["--rack", "${host.rack}"]},
    "files": [{"path": "/etc/orch/${host.name}.conf", "content": "nic=${host.nic} $${host.kept}\n"}],
}


def test_each_host_gets_its_own_values_with_group_and_host_precedence(tmp_path: Path) -> None:
    path, inventory = _files(tmp_path, SERVICE)
    compiled = compile_plan(load_plan(path), {}, ["a", "b"], inventory=inventory)
    for host, nic, gpus, address in (("a", "ib0", 8, "a"), ("b", "eth9", 4, "10.0.0.2")):
        service = next(s for s in compiled.steps[host] if isinstance(s, ServiceStep))
        argv = service.spec.argv
        assert argv[argv.index("--tensor-parallel-size") + 1] == str(gpus)
        assert argv[-2:] == ["--rack", "r1"]
        assert service.spec.env["NCCL_SOCKET_IFNAME"] == nic
        assert service.spec.env["NODE"] == f"{host}@{address}"
        assert compiled.plans[host].service.args["tensor-parallel-size"] == gpus  # type: ignore[union-attr]
        files = next(s for s in compiled.steps[host] if isinstance(s, FilesStep))
        (desired,) = files.files
        assert desired.path == f"/etc/orch/{host}.conf"
        assert desired.data == f"nic={nic} ${{host.kept}}\n".encode()  # $${ escapes


def test_a_missing_variable_names_the_host_the_variable_and_where_it_is_used(tmp_path: Path) -> None:
    path, inventory = _files(tmp_path, {"files": [{"path": "/etc/x", "content": "${host.gpus}\n"},
                                                  {"path": "/etc/y", "content": "${host.gpu}\n"}]})
    with pytest.raises(PlanError) as caught:
        compile_plan(load_plan(path), {}, ["a", "b"], inventory=inventory)
    text = str(caught.value)
    assert "host a has no variable 'gpu' (used as ${host.gpu})" in text
    assert "plan.yaml:" in text and "did you mean 'gpus'?" in text


@pytest.mark.parametrize("where, data", [
    ("python.venv", {"python": {"venv": "/opt/${host.name}"}}),
    ("service.port", {"python": {"venv": "/opt/v"}, "service": {"model": "m", "port": "${host.port}"}}),
    ("service.model", {"python": {"venv": "/opt/v"}, "service": {"model": "${host.model}"}}),
])
def test_values_that_must_be_the_same_everywhere_refuse_host_variables(
    tmp_path: Path, where: str, data: dict[str, Any]
) -> None:
    path, inventory = _files(tmp_path, data)
    with pytest.raises(PlanError) as caught:
        compile_plan(load_plan(path), {}, ["a"], inventory=inventory)
    assert "cannot be used here" in str(caught.value) or where in str(caught.value)


def test_a_hostile_value_is_checked_again_for_each_host(tmp_path: Path) -> None:
    path, inventory = _files(tmp_path, {"files": [{"path": "/etc/orch/${host.nic}", "content": "x"}]})
    inventory.hosts["b"].vars["nic"] = "../../etc/shadow"
    compile_plan(load_plan(path), {}, ["a"], inventory=inventory)  # a: ib0, fine
    with pytest.raises(PlanError, match=r"for host b.*'\.\.' is not allowed"):
        compile_plan(load_plan(path), {}, ["a", "b"], inventory=inventory)


def test_validate_accepts_references_without_an_inventory(tmp_path: Path) -> None:
    path, _ = _files(tmp_path, SERVICE)
    check(load_plan(path))  # no inventory: the references stand for themselves


def test_misspelt_references_are_errors(tmp_path: Path) -> None:
    path, inventory = _files(tmp_path, {"env": {"X": "${hosts.nic}"}})
    with pytest.raises(PlanError, match="not a host variable reference"):
        compile_plan(load_plan(path), {}, ["a"], inventory=inventory)


def test_group_vars_must_name_a_group(tmp_path: Path) -> None:
    bad = tmp_path / "inv.yaml"
    bad.write_text(yaml.safe_dump({"hosts": {"a": {"connection": "local"}}, "groups": {"g": ["a"]},
                                   "group_vars": {"gg": {"x": 1}}}))
    from orchestrator.errors import InventoryError

    with pytest.raises(InventoryError, match="group_vars names 'gg', which is not a group"):
        load_inventory(bad)


@pytest.mark.slow
def test_apply_writes_each_hosts_values_and_show_origin_names_their_entries(tmp_path: Path) -> None:
    out = tmp_path / "out"
    path, _ = _files(tmp_path, {"files": [{"path": f"{out}/${{host.name}}.conf",
                                           "content": "nic=${host.nic} gpus=${host.gpus}\n"}]})
    shown = orch("plan", path, "-i", tmp_path / "inv.yaml", "--show-origin",
                 "--detailed-exitcode", cwd=tmp_path)
    assert shown.returncode == 2, shown.stderr
    rows = [line.split()[:4] for line in shown.stdout.splitlines()]
    assert ["a", "${host.nic}", "'ib0'", "group_vars.inner.nic"] in rows
    assert ["b", "${host.nic}", "'eth9'", "hosts.b.vars.nic"] in rows
    assert orch("apply", path, "-i", tmp_path / "inv.yaml", cwd=tmp_path).returncode == 0
    assert (out / "a.conf").read_text() == "nic=ib0 gpus=8\n"
    assert (out / "b.conf").read_text() == "nic=eth9 gpus=4\n"


def test_ansible_group_vars_reach_the_plan(tmp_path: Path) -> None:
    (tmp_path / "hosts.ini").write_text(
        "[gpu]\nn1 ansible_connection=local nic=ib3\nn2 ansible_connection=local\n"
        "[gpu:vars]\nnic=eth0\ngpus=8\n")
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump({"name": "hv", "hosts": "gpu",
                                    "env": {"IF": "${host.nic}", "G": "${host.gpus}"}}))
    inventory = load_inventory(tmp_path / "hosts.ini")
    compiled = compile_plan(load_plan(path), {}, ["n1", "n2"], inventory=inventory)
    assert compiled.plans["n1"].env == {"IF": "ib3", "G": "8"}
    assert compiled.plans["n2"].env == {"IF": "eth0", "G": "8"}


def test_a_host_value_the_plan_cannot_take_is_located_and_named_per_host(tmp_path: Path) -> None:
    """The filled plan is validated as the loader validates: the field, its file and line,
    what was expected, and which host's value it was."""
    inventory = {**INVENTORY, "hosts": {**INVENTORY["hosts"], "b": {
        "connection": "local", "vars": {"gpus": [{"count": 4}], "nic": "eth9"}}}}
    path, _ = _files(tmp_path, SERVICE)
    (tmp_path / "inv.yaml").write_text(yaml.safe_dump(inventory))
    with pytest.raises(PlanError) as raised:
        compile_plan(load_plan(path), {}, ["a", "b"], inventory=load_inventory(tmp_path / "inv.yaml"))
    said = str(raised.value)
    assert "for host b, after filling in its variables" in said
    assert said.startswith(f"{path}:") and "service.args.tensor-parallel-size" in said, said
