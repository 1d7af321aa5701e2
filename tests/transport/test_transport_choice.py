"""`ssh.transport: auto` (the default): the rule on a table of hosts and clients, the lookup
of the `ssh` client on this machine, and whole `orch apply` runs whose PATH has the OpenSSH
client, none, or another `ssh`, each saying its choice in --debug and in facts.json."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from fixtures import zygote
from fixtures.orchcli import last_run, write_inventory
from fixtures.sshd import SshServer

from orchestrator.errors import InventoryError
from orchestrator.inventory import HostSpec, Inventory, load_inventory
from orchestrator.transport import connect
from orchestrator.transport.choice import (
    SshClient,
    TransportChoice,
    choose,
    config_proxy,
    find_ssh_client,
    forget_ssh_client,
)
from orchestrator.transport.target import SshTarget

OPENSSH = SshClient("/usr/bin/ssh", "OpenSSH_9.2p1 Debian-2+deb12u10, OpenSSL 3.0.19 27 Jan 2026")
HOST = SshTarget(name="h1", host="10.0.0.1", user="root", identity_file="~/.ssh/id_ed25519")
FOLDER = "/root/.orch/ssh"


@pytest.mark.parametrize(("setting", "target", "client", "folder", "name", "why"), [
    ("paramiko", HOST, OPENSSH, FOLDER, "paramiko", "ssh.transport: paramiko"),
    ("openssh", HOST, None, FOLDER, "openssh", "ssh.transport: openssh"),
    ("auto", HOST, OPENSSH, FOLDER, "openssh", "auto: ssh client found at /usr/bin/ssh"),
    ("auto", HOST, SshClient("/usr/bin/ssh", "OpenSSH_5.6p1"), FOLDER, "openssh",
     "auto: ssh client found at /usr/bin/ssh"),
    ("auto", HOST, None, FOLDER, "paramiko", "auto: no ssh client on the PATH"),
    ("auto", HOST, SshClient("/usr/local/bin/ssh", "Dropbear v2022.83"), FOLDER, "paramiko",
     "auto: /usr/local/bin/ssh is not an OpenSSH client (it says 'Dropbear v2022.83')"),
    ("auto", HOST, SshClient("/usr/bin/ssh", ""), FOLDER, "paramiko",
     "auto: /usr/bin/ssh is not an OpenSSH client"),
    ("auto", HOST, SshClient("/usr/bin/ssh", "OpenSSH_5.3p1, OpenSSL 1.0.1e-fips"), FOLDER,
     "paramiko", "auto: /usr/bin/ssh is OpenSSH_5.3p1, older than ControlPersist (5.6)"),
    ("auto", HOST, SshClient("C:/ssh.exe", "OpenSSH_for_Windows_8.1p1, LibreSSL 3.0.2"), FOLDER,
     "paramiko", "auto: C:/ssh.exe is OpenSSH for Windows, which has no ControlMaster"),
    ("auto", SshTarget(name="gpu", host="10.0.0.2", jump=SshTarget(name="bastion", host="b")),
     OPENSSH, FOLDER, "paramiko",
     "auto: reached through the jump host bastion, whose own errors ssh hides"),
    ("auto", SshTarget(name="h1", host="10.0.0.1", identity_file="/keys/a\nb"), OPENSSH, FOLDER,
     "paramiko", "auto: h1's identity_file holds a control character, which ssh cannot be given"),
    ("auto", SshTarget(name="h1", host="10.0.0.1", user="ro\x7fot"), OPENSSH, FOLDER,
     "paramiko", "auto: h1's user holds a control character, which ssh cannot be given"),
    ("auto", HOST, OPENSSH, "/home/" + "d" * 80, "paramiko",
     f"auto: a socket path under /home/{'d' * 80} is too long for ssh's master connection"),
])
def test_the_rule(setting: str, target: SshTarget, client: SshClient | None, folder: str,
                  name: str, why: str) -> None:
    assert choose(setting, target, "/root/.ssh/known_hosts", client, folder) == \
        TransportChoice(name, why)  # type: ignore[arg-type]


def test_a_proxy_from_the_ssh_config_chooses_paramiko() -> None:
    choice = choose("auto", HOST, None, OPENSSH, FOLDER, config_proxy="ProxyJump")
    assert choice == TransportChoice(
        "paramiko", "auto: the ssh config gives it a ProxyJump, whose own errors ssh hides")
    assert choose("openssh", HOST, None, OPENSSH, FOLDER, config_proxy="ProxyJump").name == \
        "openssh"


def test_ssh_is_asked_for_a_proxy_only_when_the_config_names_one(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    fake = SshClient(str(_fake_ssh(tmp_path / "bin", marker) / "ssh"), "OpenSSH_9.2p1")
    plain = tmp_path / "plain"
    plain.write_text("Host *\n  User root\n  # ProxyJump in a comment is none\n")
    assert config_proxy(fake, ["ssh", "--", "box"], [str(plain), str(tmp_path / "none")]) is None
    assert not marker.exists()
    (tmp_path / "conf.d").mkdir()
    (tmp_path / "conf.d" / "jumps.conf").write_text("Host box\n  ProxyJump bastion\n")
    including = tmp_path / "including"
    including.write_text(f"Include {tmp_path}/conf.d/*.conf\n")
    config_proxy(fake, ["ssh", "--", "box"], [str(plain), str(including)])
    assert marker.exists()  # an included file names a proxy: ssh -G is asked


def test_ssh_says_which_host_its_config_proxies(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text("Host box\n  ProxyJump bastion\nHost other\n  User root\n")
    client = find_ssh_client()
    assert client is not None
    argv = ["ssh", "-F", str(config), "--"]
    assert config_proxy(client, [*argv, "box"], [str(config)]) == "ProxyJump"
    assert config_proxy(client, [*argv, "other"], [str(config)]) is None


def test_a_known_hosts_path_ssh_cannot_take_chooses_paramiko() -> None:
    choice = choose("auto", HOST, "/etc/kh\tx", OPENSSH, FOLDER)
    assert choice.name == "paramiko"
    assert choice.why == "auto: ssh.known_hosts holds a control character, which ssh cannot be given"
    assert choose("auto", HOST, None, OPENSSH, FOLDER).name == "openssh"  # known_hosts: false


def test_the_client_is_looked_up_on_the_path_once(monkeypatch: pytest.MonkeyPatch) -> None:
    forget_ssh_client()
    try:
        found = find_ssh_client()
        assert found is not None and found.path == "/usr/bin/ssh"
        assert found.version.startswith("OpenSSH_")
        monkeypatch.setenv("PATH", "/nonexistent")
        assert find_ssh_client() == found  # once per process: the PATH is read once
        forget_ssh_client()
        assert find_ssh_client() is None
    finally:
        forget_ssh_client()


def _fake_ssh(folder: Path, marker: Path) -> Path:
    """An `ssh` that is not OpenSSH (it says it is Dropbear's) and leaves `marker` when run."""
    folder.mkdir()
    script = folder / "ssh"
    script.write_text(f'#!/bin/sh\n: > {marker}\necho "Dropbear v2022.83" >&2\nexit 1\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return folder


def _apply(workdir: Path, path: str, hosts: str = "h1") -> tuple[str, dict[str, str] | None]:
    """`orch --debug apply` with this PATH: its --debug transport line, facts.json's entry."""
    (workdir / "p.yaml").write_text(
        f"name: t\nhosts: {hosts}\nfiles: [{{path: {workdir}/out, content: x}}]\n")
    done = zygote.run(["--debug", "apply", "p.yaml", "-i", "i.yaml"], cwd=workdir,
                      env={**os.environ, "PATH": path}, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    said = [line.split(":", 2)[2] for line in done.stderr.splitlines()
            if line.startswith("DEBUG:orchestrator.transport:") and "transport" in line]
    facts = json.loads((last_run(workdir) / "hosts" / hosts / "facts.json").read_text())
    return (said[0] if said else ""), facts.get("transport")


def test_apply_over_each_choice_says_which_and_why(sshd: SshServer, tmp_path: Path) -> None:
    write_inventory(tmp_path / "i.yaml", sshd.inventory(1))
    assert _apply(tmp_path, os.environ["PATH"]) == (
        "h1: transport openssh (auto: ssh client found at /usr/bin/ssh)",
        {"name": "openssh", "why": "auto: ssh client found at /usr/bin/ssh"})
    assert _apply(tmp_path, str(tmp_path / "nothing")) == (
        "h1: transport paramiko (auto: no ssh client on the PATH)",
        {"name": "paramiko", "why": "auto: no ssh client on the PATH"})
    marker = tmp_path / "ran"
    fake = _fake_ssh(tmp_path / "bin", marker)
    why = f"auto: {fake}/ssh is not an OpenSSH client (it says 'Dropbear v2022.83')"
    assert _apply(tmp_path, str(fake)) == (f"h1: transport paramiko ({why})",
                                           {"name": "paramiko", "why": why})
    assert marker.exists()  # the control: the lookup runs this `ssh`


def test_a_local_run_looks_for_no_ssh_client(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    fake = _fake_ssh(tmp_path / "bin", marker)
    write_inventory(tmp_path / "i.yaml", Inventory(hosts={"here": HostSpec(connection="local")}))
    said, facts = _apply(tmp_path, f"{fake}:{os.environ['PATH']}", hosts="here")
    assert (said, facts) == ("here: transport local (connection: local)",
                             {"name": "local", "why": "connection: local"})
    assert not marker.exists()  # nothing about SSH was probed


def test_connect_says_its_choice_on_the_transport(sshd: SshServer) -> None:
    forget_ssh_client()
    with connect("h1", sshd.inventory(1)) as transport:
        assert transport.choice == TransportChoice(
            "openssh", "auto: ssh client found at /usr/bin/ssh")


def test_the_setting_defaults_to_auto_and_a_bad_value_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "i.yaml"
    path.write_text("hosts:\n  a: {address: 10.0.0.1}\n")
    assert load_inventory(path).ssh.transport == "auto"
    path.write_text("hosts:\n  a: {address: 10.0.0.1}\nssh:\n  transport: fastest\n")
    with pytest.raises(InventoryError) as caught:
        load_inventory(path)
    said = f"{caught.value}\n{caught.value.hint or ''}"
    assert f"{path}:4:14: ssh.transport:" in said and "'fastest'" in said
    assert "one of `auto`, `openssh`, `paramiko`" in said
