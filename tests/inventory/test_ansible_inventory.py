"""Ansible inventories (YAML and INI) read by `-i`: real files, the examples of Ansible's own
documentation, precedence, the connection keys, every error with its location, and `orch plan`
through the CLI."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fixtures.orchcli import orch
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.errors import InventoryError, PlanError
from orchestrator.inventory import HostSpec, Inventory, load_inventory
from orchestrator.inventory.ansible import detect_format, to_inventory
from orchestrator.inventory.ansible_parse import expand_hosts, parse_ini, parse_yaml
from orchestrator.plan.source import parse_document

ROOT = Path(__file__).resolve().parents[2]


def load(tmp_path: Path, name: str, text: str) -> Inventory:
    path = tmp_path / name
    path.write_text(text)
    return load_inventory(path)


def summary(inventory: Inventory) -> dict[str, dict[str, Any]]:
    return {name: spec.model_dump(exclude_defaults=True) for name, spec in inventory.hosts.items()}


# -- the examples of Ansible's documentation ---------------------------------------------

# "How to build your inventory": the same basic inventory in both formats.
BASIC_INI = """\
mail.example.com

[webservers]
foo.example.com
bar.example.com

[dbservers]
one.example.com
two.example.com
three.example.com
"""
BASIC_YAML = """\
all:
  hosts:
    mail.example.com:
  children:
    webservers:
      hosts:
        foo.example.com:
        bar.example.com:
    dbservers:
      hosts:
        one.example.com:
        two.example.com:
        three.example.com:
"""


@pytest.mark.parametrize(("name", "text"), [("hosts.ini", BASIC_INI), ("hosts.yml", BASIC_YAML),
                                            ("hosts", BASIC_INI), ("inventory", BASIC_YAML)])
def test_the_basic_inventory_of_the_docs_reads_the_same_in_both_formats(
        tmp_path: Path, name: str, text: str) -> None:
    inventory = load(tmp_path, name, text)
    assert inventory.select("webservers") == ["foo.example.com", "bar.example.com"]
    assert inventory.select("dbservers") == ["one.example.com", "two.example.com",
                                             "three.example.com"]
    assert inventory.select("ungrouped") == ["mail.example.com"]
    assert inventory.select("all") == ["mail.example.com", "foo.example.com", "bar.example.com",
                                       "one.example.com", "two.example.com", "three.example.com"]
    assert all(spec == HostSpec() for spec in inventory.hosts.values())
    assert inventory.source == str(tmp_path / name)


# The ini inventory plugin's examples 1 and 2.
PLUGIN_INI = """\
# example cfg file
[web]
host1
host2 ansible_port=222 # defined inline, interpreted as an integer

[web:vars]
http_port=8080 # all members of 'web' will inherit these
myvar=23 # defined in a :vars section, interpreted as a string

[web:children] # child groups will automatically add their hosts to parent group
apache
nginx

[apache]
tomcat1
tomcat2 myvar=34 # host specific vars override group vars
tomcat3 mysecret="'03#pa33w0rd'" # proper quoting to prevent value changes

[nginx]
jenkins1

[nginx:vars]
has_java = True # vars in child groups override same in parent

[all:vars]
has_java = False # 'all' is 'top' parent
"""
PLUGIN_INI_2 = """\
host1 # this is 'ungrouped'

# both hosts have same IP but diff ports, also 'ungrouped'
host2 ansible_host=127.0.0.1 ansible_port=44
host3 ansible_host=127.0.0.1 ansible_port=45

[g1]
host4

[g2]
host4 # same host as above, but member of 2 groups, will inherit vars from both
      # inventory hostnames are unique
"""


def test_the_ini_plugin_examples(tmp_path: Path) -> None:
    inventory = load(tmp_path, "example.ini", PLUGIN_INI)
    hosts = summary(inventory)
    assert hosts["host2"]["port"] == 222
    assert hosts["host1"]["vars"] == {"http_port": 8080, "myvar": 23, "has_java": False}
    assert hosts["tomcat2"]["vars"]["myvar"] == 34  # host vars beat group vars
    assert hosts["tomcat3"]["vars"]["mysecret"] == "03#pa33w0rd"  # the quoting kept the '#'
    assert hosts["jenkins1"]["vars"]["has_java"] is True  # child group beats all
    assert hosts["tomcat1"]["vars"]["has_java"] is False
    assert inventory.select("web") == ["host1", "host2", "tomcat1", "tomcat2", "tomcat3",
                                       "jenkins1"]
    assert inventory.select("nginx") == ["jenkins1"]

    second = load(tmp_path, "example2.ini", PLUGIN_INI_2)
    assert second.select("ungrouped") == ["host1", "host2", "host3"]
    assert summary(second)["host3"] == {"address": "127.0.0.1", "port": 45}
    assert second.select("g1") == second.select("g2") == ["host4"]


# The yaml inventory plugin's example (with a colon after every host, as it advises).
PLUGIN_YAML = """\
all: # keys must be unique, i.e. only one 'hosts' per group
    hosts:
        test1:
        test2:
            host_var: value
    vars:
        group_all_var: value
    children:   # key order does not matter, indentation does
        other_group:
            children:
                group_x:
                    hosts:
                        test5:
                group_y:
                    hosts:
                        test6:
            vars:
                g2_var2: value3
            hosts:
                test4:
                    ansible_host: 127.0.0.1
        last_group:
            hosts:
                test1: # same host as above, additional group membership
            vars:
                group_last_var: value
"""


def test_the_yaml_plugin_example(tmp_path: Path) -> None:
    inventory = load(tmp_path, "example.yaml", PLUGIN_YAML)
    hosts = summary(inventory)
    assert inventory.select("other_group") == ["test4", "test5", "test6"]
    assert inventory.select("last_group") == ["test1"]
    assert inventory.select("ungrouped") == ["test2"]
    assert hosts["test4"] == {"address": "127.0.0.1",
                              "vars": {"group_all_var": "value", "g2_var2": "value3"}}
    assert hosts["test5"]["vars"] == {"group_all_var": "value", "g2_var2": "value3"}
    assert hosts["test2"]["vars"] == {"group_all_var": "value", "host_var": "value"}
    assert hosts["test1"]["vars"] == {"group_all_var": "value", "group_last_var": "value"}


# -- precedence ----------------------------------------------------------------------------

PRECEDENCE_YAML = """\
all:
  vars: {level: all, from_all: 1, ansible_user: everyone}
  children:
    gpus:
      vars: {level: gpus, ansible_user: gpuadmin}
      children:
        blackwell:
          vars: {level: blackwell}
          hosts:
            gpu1: {level: host}
            gpu2:
    alpha:
      vars: {tie: alpha}
      hosts: {gpu2: }
    zulu:
      vars: {tie: zulu}
      hosts: {gpu2: }
"""


def test_host_beats_child_group_beats_parent_beats_all(tmp_path: Path) -> None:
    hosts = summary(load(tmp_path, "p.yml", PRECEDENCE_YAML))
    assert hosts["gpu1"]["vars"] == {"level": "host", "from_all": 1}
    assert hosts["gpu2"]["vars"] == {"level": "blackwell", "from_all": 1, "tie": "zulu"}
    assert hosts["gpu1"]["user"] == "gpuadmin"  # connection keys follow the same order


def test_groups_of_equal_depth_go_by_priority_then_name(tmp_path: Path) -> None:
    text = PRECEDENCE_YAML.replace("{tie: alpha}", "{tie: alpha, ansible_group_priority: 5}")
    assert summary(load(tmp_path, "p.yml", text))["gpu2"]["vars"]["tie"] == "alpha"


def test_ini_precedence_and_ungrouped_hosts(tmp_path: Path) -> None:
    text = """\
lonely ansible_host=10.0.0.9

[gpus:children]
blackwell

[blackwell]
gpu1 level=host
gpu2

[all:vars]
level=all

[gpus:vars]
level=gpus
ansible_port=2222

[blackwell:vars]
level=blackwell
"""
    inventory = load(tmp_path, "hosts.ini", text)
    hosts = summary(inventory)
    assert hosts["gpu1"] == {"port": 2222, "vars": {"level": "host"}}
    assert hosts["gpu2"] == {"port": 2222, "vars": {"level": "blackwell"}}
    assert hosts["lonely"] == {"address": "10.0.0.9", "vars": {"level": "all"}}
    assert inventory.select("ungrouped") == ["lonely"]
    assert inventory.select("gpus") == ["gpu1", "gpu2"]


def test_a_group_reached_along_two_paths_is_no_cycle(tmp_path: Path) -> None:
    text = "[gpu]\nh1\n[prod:children]\ngpu\n[eu:children]\ngpu\n[world:children]\nprod\neu\n"
    inventory = load(tmp_path, "diamond.ini", text)
    assert inventory.select("world") == ["h1"]
    assert inventory.select(["prod", "eu", "all"]) == ["h1"]


# -- connection keys ------------------------------------------------------------------------


def test_connection_keys_map_to_host_fields(tmp_path: Path) -> None:
    text = """\
bastion ansible_host=203.0.113.7 ansible_user=ops
here ansible_connection=local ansible_python_interpreter=/usr/bin/python3

[gpus]
gpu1 ansible_host=10.0.0.5 ansible_port=2200 ansible_user=ubuntu ansible_ssh_private_key_file=~/.ssh/gpu gpus=8
gpu2 ansible_ssh_host=10.0.0.6 ansible_ssh_user=root ansible_timeout=30
gpu3 ansible_ssh_common_args='-o StrictHostKeyChecking=no -o ProxyJump=ops@jump.example.com:2222'
gpu4 ansible_ssh_extra_args="-C -J bastion" ansible_connection=smart

[gpus:vars]
ansible_become_method=sudo
"""
    hosts = summary(load(tmp_path, "hosts", text))
    assert hosts["gpu1"] == {"address": "10.0.0.5", "port": 2200, "user": "ubuntu",
                             "identity_file": "~/.ssh/gpu", "vars": {"gpus": 8}}
    assert hosts["gpu2"] == {"address": "10.0.0.6", "user": "root", "connect_timeout": 30.0}
    assert hosts["gpu3"] == {"jump": "ops@jump.example.com:2222"}
    assert hosts["gpu4"] == {"jump": "bastion"}  # an inventory host: its settings
    assert hosts["here"] == {"connection": "local"}


def test_host_patterns(tmp_path: Path) -> None:
    assert expand_hosts("gpu[01:04]") == (["gpu01", "gpu02", "gpu03", "gpu04"], None)
    assert expand_hosts("db-[a:c].example.com") == (
        ["db-a.example.com", "db-b.example.com", "db-c.example.com"], None)
    assert expand_hosts("n[1:10:4]:2222") == (["n1", "n5", "n9"], 2222)
    assert expand_hosts("r[1:2]c[1:2]") == (["r1c1", "r1c2", "r2c1", "r2c2"], None)
    assert expand_hosts("badwolf.example.com:5309") == (["badwolf.example.com"], 5309)
    assert expand_hosts("[2001:db8::1]:22") == (["2001:db8::1"], 22)
    assert expand_hosts("fe80::1") == (["fe80::1"], None)
    inventory = load(tmp_path, "r.yaml", "all:\n  children:\n    gpus:\n      hosts:\n"
                                         "        gpu[1:3]:2022:\n          gpus: 8\n")
    assert inventory.select("gpus") == ["gpu1", "gpu2", "gpu3"]
    assert summary(inventory)["gpu3"] == {"port": 2022, "vars": {"gpus": 8}}


def test_format_detection(tmp_path: Path) -> None:
    assert detect_format(Path("x.ini"), "all:\n") == "ini"
    assert detect_format(Path("x.yml"), "[web]\n") == "yaml"
    assert detect_format(Path("hosts"), "# comment\n; other\n\n[web]\nh\n") == "ini"
    assert detect_format(Path("hosts"), "gpu1:2222 ansible_user=x\n") == "ini"
    assert detect_format(Path("hosts"), "gpu1\n") == "ini"
    assert detect_format(Path("hosts.cfg"), "---\nall:\n") == "yaml"
    assert detect_format(Path("hosts"), "all:\n  hosts:\n") == "yaml"
    # orch's own format is still read by orch's own loader, with its own messages
    own = load(tmp_path, "own", "hosts:\n  h: {connection: local}\ngroups:\n  g: [h]\n")
    assert own.groups == {"g": ["h"]}
    with pytest.raises(InventoryError, match=r"unknown key 'adress' in hosts\.h"):
        load(tmp_path, "own.yaml", "hosts:\n  h: {adress: x}\n")


def test_the_examples_of_docs_plans_md_say_the_same(tmp_path: Path) -> None:
    docs = (ROOT / "docs" / "plans.md").read_text()
    blocks = [block.split("\n", 1)[1] for block in docs.split("```")[1::2]]  # minus the language
    yaml_text = next(block for block in blocks if block.startswith("# hosts.yml"))
    ini_text = next(block for block in blocks if block.startswith("# hosts.ini"))
    from_yaml, from_ini = load(tmp_path, "hosts.yml", yaml_text), load(tmp_path, "hosts.ini", ini_text)
    assert from_yaml.hosts == from_ini.hosts
    assert from_yaml.groups == from_ini.groups
    assert from_ini.select("blackwell") == ["gpu1", "gpu2"]
    assert summary(from_ini)["gpu2"] == {"user": "ubuntu", "jump": "bastion", "vars": {"gpus": 8}}
    assert summary(from_ini)["bastion"]["user"] == "ops"  # the host's own beats all:vars


def test_the_shipped_ansible_example_is_the_shipped_example(tmp_path: Path) -> None:
    ini = load_inventory(ROOT / "inventory" / "ansible-example.ini")
    own = load_inventory(ROOT / "inventory" / "example.yaml")
    assert ini.hosts == own.hosts
    for group, members in own.groups.items():
        assert ini.select(group) == members
    assert ini.select("all") == ["bastion", "gpu1", "gpu2", "localhost"]


# -- errors: file:line:column, the field, what was expected ----------------------------------


@dataclass(frozen=True)
class Bad:
    name: str
    file: str
    text: str
    says: tuple[str, ...]  # `{file}` is the file's path


BAD = [
    Bad("port not a number", "i.ini", "[gpus]\ngpu1 ansible_port=ssh\n",
        ("{file}:2:19: gpu1.ansible_port: expected an integer (or null), got the string 'ssh'",
         "field: gpu1.ansible_port", "expected: an integer",
         "2 | gpu1 ansible_port=ssh\n    |                   ^")),
    Bad("port out of range, from group vars", "i.ini",
        "[gpus]\ngpu1\n[gpus:vars]\nansible_port = 70000\n",
        ("{file}:4:16: gpu1.ansible_port: should be less than or equal to 65535",)),
    Bad("port in a YAML host", "i.yml", "all:\n  hosts:\n    gpu1:\n      ansible_port: [22]\n",
        ("{file}:4:21: gpu1.ansible_port: expected an integer (or null), got a list",)),
    Bad("negative timeout", "i.ini", "gpu1 ansible_timeout=-5\n",
        ("{file}:1:22: gpu1.ansible_timeout: should be greater than 0",)),
    Bad("child group never declared", "i.ini", "[gpus:children]\nblackwel\n[blackwell]\nh\n",
        ("{file}:2:1: group 'gpus' names child group 'blackwel', which this file never declares",
         "field: gpus.children", "expected: a [blackwel] or [blackwel:children] section")),
    Bad("vars of a group never declared", "i.ini", "h\n[gpus:vars]\nx=1\n",
        ("{file}:2:1: [gpus:vars] sets variables of group 'gpus', which this file never declares",)),
    Bad("group cycle in INI", "i.ini", "[a:children]\nb\n[b:children]\na\n[a]\nh\n",
        ("{file}:4:1: groups contain each other in a cycle: a -> b -> a",)),
    Bad("group cycle in YAML", "i.yaml",
        "all:\n  children:\n    a:\n      children:\n        b:\n          children:\n            a:\n",
        ("{file}:7:13: groups contain each other in a cycle: a -> b -> a",)),
    Bad("'all' as a child", "i.ini", "[g:children]\nall\n",
        ("{file}:2:1: group 'g' names 'all' as a child group",)),
    Bad("nested too deep", "i.ini",
        "".join(f"[g{i}:children]\ng{i + 1}\n" for i in range(70)) + "[g70]\nh\n",
        ("groups are nested more than 64 deep",)),
    Bad("unclosed quote", "i.ini", "[gpus]\ngpu1 ansible_user='ubuntu\n",
        ("{file}:2:1: cannot read this host line: No closing quotation",
         "expected: host [key=value ...], a value with spaces in quotes")),
    Bad("a word that is not key=value", "i.ini", "[gpus]\ngpu1 ubuntu\n",
        ("{file}:2:1: expected key=value after the host name, got 'ubuntu'",)),
    Bad("section header with a space", "i.ini", "[gpu servers]\nh\n",
        ("{file}:1:1: cannot read this section header", "no spaces")),
    Bad("section of an unknown type", "i.ini", "[gpus:hots]\nh\n",
        ("{file}:1:1: section [gpus:hots] has an unknown type 'hots'",
         "expected: [gpus], [gpus:children] or [gpus:vars]")),
    Bad("vars line without =", "i.ini", "[g]\nh\n[g:vars]\nansible_user ubuntu\n",
        ("{file}:4:1: cannot read this line of [g:vars]", "expected: one key=value per line")),
    Bad("two names on a children line", "i.ini", "[g:children]\na b\n",
        ("{file}:2:1: cannot read this line of [g:children]",)),
    Bad("backwards range", "i.ini", "gpu[04:01]\n",
        ("{file}:1:1: host pattern 'gpu[04:01]': range [04:01] runs backwards",)),
    Bad("mixed range", "i.ini", "gpu[1:c]\n", ("must run from a letter to a later one",)),
    Bad("unequal padding", "i.ini", "gpu[01:100]\n", ("the same width",)),
    Bad("huge range", "i.ini", "gpu[0:99999999]\n", ("expands to more than 10,000 hosts",)),
    Bad("bad port in a pattern", "i.ini", "gpu1:99999\n", ("port 99999 is not from 1 to 65535",)),
    Bad("a host name with a space", "i.yaml", "all:\n  hosts:\n    'gpu 1':\n",
        ("{file}:3:5: 'gpu 1' is not a host name",)),
    Bad("an address that is an option", "i.ini", "gpu1 ansible_host=-oProxyCommand=x\n",
        ("{file}:1:19: '-oProxyCommand=x' is not a host name or address",)),
    Bad("a host named like a group", "i.ini", "[gpus]\ngpu1\n[gpu1]\nother\n",
        ("{file}:2:1: host 'gpu1' has the same name as a group",)),
    Bad("a host named all", "i.ini", "all\n", ("host 'all' has the same name as a group",)),
    Bad("login password", "i.ini", "gpu1 ansible_user=root ansible_password=hunter2\n",
        ("{file}:1:24: ansible_password (host 'gpu1'): orch signs in with SSH keys only",
         "field: gpu1.ansible_password", "expected: key authentication")),
    Bad("ssh password from group vars", "i.yaml",
        "all:\n  vars:\n    ansible_ssh_pass: hunter2\n  hosts:\n    gpu1:\n",
        ("{file}:3:5: ansible_ssh_pass (host 'gpu1')", "never with a password")),
    Bad("become password", "i.ini", "[g]\ngpu1\n[g:vars]\nansible_become_password=hunter2\n",
        ("{file}:4:1: ansible_become_password (host 'gpu1'): orch does not escalate privileges",)),
    Bad("become", "i.ini", "gpu1 ansible_become=yes\n",
        ("{file}:1:6: ansible_become (host 'gpu1'): orch does not escalate privileges",
         "expected: ansible_user set to a user with the rights the plan needs")),
    Bad("a connection orch has not", "i.ini", "web ansible_connection=docker\n",
        ("{file}:1:24: ansible_connection (host 'web') is 'docker', which orch cannot honour",
         "expected: ssh (or smart, paramiko) or local")),
    Bad("ProxyCommand", "i.ini",
        "gpu1 ansible_ssh_common_args='-o ProxyCommand=\"ssh -W %h:%p -q bastion\"'\n",
        ("{file}:1:30: ansible_ssh_common_args (host 'gpu1') sets -o ProxyCommand",
         "expected: instead: -J user@bastion (ProxyJump)")),
    Bad("a port in ssh options", "i.ini", "gpu1 ansible_ssh_extra_args='-p 2222'\n",
        ("sets -p, which orch does not take from ssh options", "expected: instead: ansible_port")),
    Bad("a jump through two hosts", "i.ini", "gpu1 ansible_ssh_common_args='-J a.example,b.example'\n",
        ("jumps through several hosts (a.example,b.example)",)),
    Bad("a jump to no inventory host", "i.ini", "gpu1 ansible_ssh_common_args='-J bastoin'\n",
        ("{file}:1:30: gpu1.ansible_ssh_common_args: jump 'bastoin' is not a host of this inventory",)),
    Bad("a jump with a bad port", "i.ini", "gpu1 ansible_ssh_common_args='-J ops@b.example:x'\n",
        ("jump 'ops@b.example:x': port 'x' is not a number from 1 to 65535",)),
    Bad("ssh option without its value", "i.ini", "gpu1 ansible_ssh_common_args=-J\n",
        ("-J has no value",)),
    Bad("a template", "i.yaml",
        "all:\n  hosts:\n    gpu1:\n      ansible_host: '{{ inventory_hostname }}.lan'\n",
        ("{file}:4:21: ansible_host (host 'gpu1') is a Jinja template",)),
    Bad("a priority that is no number", "i.ini", "[g]\nh\n[g:vars]\nansible_group_priority=high\n",
        ("{file}:4:24: ansible_group_priority must be an integer, got the string 'high'",)),
    Bad("unknown key in a YAML group", "i.yaml", "all:\n  host:\n    gpu1:\n",
        ("{file}:2:3: unknown key 'host' in group 'all'", "did you mean 'hosts'?")),
    Bad("orch's format mixed in", "i.yaml",
        "all:\n  hosts: {a: }\nhosts:\n  gpu1: {address: x}\n",
        ("unknown key 'gpu1' in group 'hosts'", "cannot be mixed")),
    Bad("hosts without colons", "i.yaml", "all:\n  children:\n    g:\n      hosts:\n        test5\n",
        ("{file}:5:9: hosts of group 'g' must be a mapping, got the string 'test5'",
         "end each host name with a colon")),
    Bad("host vars that are no mapping", "i.yaml", "all:\n  hosts:\n    gpu1: 10.0.0.5\n",
        ("{file}:3:11: host 'gpu1': its variables must be a mapping, got the string '10.0.0.5'",)),
    Bad("a group that is a list", "i.yaml", "all:\n  children:\n    g: [a, b]\n",
        ("{file}:3:8: group 'g' must be a mapping, got a list",)),
    Bad("YAML syntax", "i.yaml", "all:\n  hosts:\n   a:\n  - b\n", ("{file}:4:3: YAML syntax error",)),
]


@pytest.mark.parametrize("case", BAD, ids=[case.name for case in BAD])
def test_bad_inventories_are_located(tmp_path: Path, case: Bad) -> None:
    path = tmp_path / case.file
    with pytest.raises(InventoryError) as raised:
        load(tmp_path, case.file, case.text)
    text = str(raised.value)
    for expected in case.says:
        assert expected.format(file=path) in text, text
    assert "hunter2" not in text  # a password is never echoed


def test_the_first_of_several_problems_leads_and_the_rest_follow(tmp_path: Path) -> None:
    text = "a ansible_port=x\nb ansible_timeout=0\n"
    with pytest.raises(InventoryError) as raised:
        load(tmp_path, "two.ini", text)
    message = str(raised.value)
    assert message.startswith(f"{tmp_path / 'two.ini'}:1:16: a.ansible_port:")
    assert f"1 more problem(s):\n    {tmp_path / 'two.ini'}:2:19: b.ansible_timeout:" in message


PIECES = [*"[]:=#;'\" \n\t-ab01{}%,.@", "ansible_port=", "ansible_host=", "[g]\n", "[g:vars]\n",
          "[g:children]\n", "gpu[01:03]", "ansible_ssh_common_args=", "-J ", "-o ",
          "ansible_connection=", "all:\n", "  hosts:\n", "  children:\n", "    g:\n", "  vars:\n"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=30).map("".join))
def test_any_text_is_an_inventory_or_one_located_error(text: str) -> None:
    try:
        to_inventory(parse_ini(text, "f.ini"))
    except InventoryError as error:
        assert str(error).startswith("f.ini:")
    try:
        to_inventory(parse_yaml(parse_document(text, "f.yaml")))
    except (InventoryError, PlanError) as error:
        assert str(error).startswith("f.yaml")


# -- files are read as safely as any other input ---------------------------------------------


def test_unreadable_ini_files_are_refused_like_yaml_ones(tmp_path: Path) -> None:
    (tmp_path / "loop.ini").symlink_to("loop.ini")
    os.mkfifo(tmp_path / "fifo.ini")
    (tmp_path / "bin.ini").write_bytes(b"\xff\xfe\x00garbage")
    (tmp_path / "dir.ini").mkdir()
    with open(tmp_path / "huge", "w") as handle:
        handle.write("[g]\nh\n# " + "x" * (9 * 1024 * 1024) + "\n")
    expected = {"loop.ini": "inventory file is a symlink loop",
                "fifo.ini": "inventory file is not a regular file",
                "bin.ini": "inventory file is not UTF-8 text",
                "dir.ini": "inventory file is a directory",
                "huge": "inventory file is too large",
                "missing.ini": "inventory file not found"}
    for name, says in expected.items():
        with pytest.raises(InventoryError, match=says):
            load_inventory(tmp_path / name)


# -- end to end ------------------------------------------------------------------------------


@pytest.mark.slow
def test_orch_plan_with_an_ansible_inventory(tmp_path: Path) -> None:
    (tmp_path / "hosts.ini").write_text("[sim]\nlocalhost ansible_connection=local\n")
    result = orch("plan", ROOT / "plans" / "sim" / "kimi-nvfp4.yaml", "-i", tmp_path / "hosts.ini",
                  "--set", "hosts=sim", cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr  # planned (pending or not)
    assert "plan (check mode) sim-kimi-nvfp4 on localhost" in result.stdout
    assert "Traceback" not in result.stderr

    (tmp_path / "bad.ini").write_text("[sim]\nlocalhost ansible_connection=local ansible_port=x\n")
    bad = orch("plan", ROOT / "plans" / "sim" / "kimi-nvfp4.yaml", "-i", tmp_path / "bad.ini",
               cwd=tmp_path, timeout=120)
    assert bad.returncode == 1
    assert "bad.ini:2:49: localhost.ansible_port: expected an integer" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_groups_sharing_a_subgroup_are_no_cycle_in_orchs_own_format(tmp_path: Path) -> None:
    # a diamond: gpu is reached through both racks; and 30 stacked diamonds stay fast
    inventory = load(tmp_path, "inv.yaml", """
hosts: {g1: {connection: local}, g2: {connection: local}}
groups:
  gpu: [g1, g2]
  rack1: [gpu]
  rack2: [gpu]
  site: [rack1, rack2]
""")
    assert inventory.select("site") == ["g1", "g2"]
    groups = {"l0a": ["g1"], "l0b": ["g1"]}
    for level in range(1, 30):
        below = [f"l{level - 1}a", f"l{level - 1}b"]
        groups[f"l{level}a"] = below
        groups[f"l{level}b"] = below
    deep = Inventory.model_validate({"hosts": {"g1": {"connection": "local"}}, "groups": groups})
    assert deep.select("l29a") == ["g1"]
