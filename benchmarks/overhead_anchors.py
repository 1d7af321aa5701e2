"""Anchor rows for benchmarks/apply_overhead.py (`--anchors`): Ansible and pyinfra doing the
no-op of the first table on the same loopback hosts: the 10 pins already installed in the
venv (Ansible's pip module, pyinfra's pip.packages, each given the venv's pip and the same
wheels) and the 10 files already in place (copy / files.put). ansible-core runs with forks 32
and pipelining over its ssh ControlPersist connections; pyinfra with --parallel 32.

Both are installed from the package index into a scratch venv (ANCHORS, made on the first
run, `pip install ansible-core pyinfra`); without them the table says why.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml
from fixtures.sshd import SshServers

ANCHORS = Path("/tmp/orch-bench-anchors")
PINS = [f"orchbench-p{i}==1.0.{i}" for i in range(10)]


def anchors_venv() -> Path | None:
    """The scratch venv with ansible-core and pyinfra (made once), None when they cannot be
    installed here."""
    if not (ANCHORS / "bin" / "pyinfra").exists():
        made = subprocess.run(
            f"{sys.executable} -m venv {ANCHORS} && {ANCHORS}/bin/pip install --quiet "
            "ansible-core pyinfra", shell=True, capture_output=True, text=True, check=False)
        if made.returncode != 0:
            print(f"anchors: cannot install ansible-core and pyinfra: {made.stderr[-300:]}")
            return None
    return ANCHORS


def _ansible_files(servers: SshServers, work: Path, count: int) -> tuple[Path, Path]:
    inventory = servers.inventory(count)
    hosts = {name: {"ansible_host": spec.address, "ansible_port": spec.port,
                    "ansible_user": spec.user or "root",
                    "ansible_ssh_private_key_file": spec.identity_file,
                    "ansible_python_interpreter": "/usr/bin/python3"}
             for name, spec in inventory.hosts.items()}
    inv = work / f"ansible-{count}.yaml"
    inv.write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    play = [{"hosts": "all", "gather_facts": False, "tasks": [
        {"name": "pins", "ansible.builtin.pip": {
            "name": PINS, "virtualenv": str(work / "venv"),
            "extra_args": f"--no-index --find-links {work / 'wheels'}"}},
        {"name": "files", "ansible.builtin.copy": {
            "dest": str(work / "etc" / "f{{ item }}.conf"), "content": "setting_{{ item }} = "
            "{{ item }}\n"}, "loop": list(range(10))},
    ]}]
    playbook = work / "playbook.yaml"
    playbook.write_text(yaml.safe_dump(play))
    return inv, playbook


def _pyinfra_files(servers: SshServers, work: Path, count: int) -> tuple[Path, Path]:
    inventory = servers.inventory(count)
    known = servers.inventory(1).ssh.known_hosts
    hosts = [(spec.address, {"ssh_port": spec.port, "ssh_user": spec.user or "root",
                             "ssh_key": spec.identity_file, "ssh_known_hosts_file": known})
             for spec in inventory.hosts.values()]
    inv = work / f"pyinfra_inventory_{count}.py"
    inv.write_text(f"hosts = {hosts!r}\n")
    deploy = work / "pyinfra_deploy.py"
    deploy.write_text(
        "from io import StringIO\n"
        "from pyinfra.operations import files, pip\n"
        f"pip.packages(name='pins', packages={PINS!r}, pip={str(work / 'venv/bin/pip')!r},\n"
        f"             extra_install_args='--no-index --find-links {work / 'wheels'}')\n"
        "for i in range(10):\n"
        f"    files.put(name=f'f{{i}}', src=StringIO(f'setting_{{i}} = {{i}}\\n'),\n"
        f"              dest=f'{work / 'etc'}/f{{i}}.conf')\n")
    return inv, deploy


def _timed(command: list[str], work: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise SystemExit(f"{command[0]} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return time.perf_counter() - started


def measure_anchors(servers: SshServers, work: Path, counts: list[int],
                    repeats: int) -> list[tuple[str, int, float, float]]:
    """[(tool, hosts, median s, best s)] of no-op runs (the first run, which may change
    nothing either, is not counted)."""
    venv = anchors_venv()
    if venv is None:
        return []
    env = {**os.environ, "ANSIBLE_PIPELINING": "True", "ANSIBLE_FORKS": "32",
           "ANSIBLE_HOST_KEY_CHECKING": "False", "ANSIBLE_NOCOLOR": "1"}
    rows = []
    for count in counts:
        inv, playbook = _ansible_files(servers, work, count)
        ansible = [str(venv / "bin" / "ansible-playbook"), "-i", str(inv), str(playbook)]
        inv_py, deploy = _pyinfra_files(servers, work, count)
        pyinfra = [str(venv / "bin" / "pyinfra"), "-y", "--parallel", "32", str(inv_py),
                   str(deploy)]
        for tool, command in (("ansible-core", ansible), ("pyinfra", pyinfra)):
            _timed(command, work, env)
            times = [_timed(command, work, env) for _ in range(repeats)]
            rows.append((tool, count, statistics.median(times), min(times)))
    return rows


def print_anchors(rows: list[tuple[str, int, float, float]], repeats: int) -> None:
    print(f"anchors: the same no-op (10 pins installed, 10 files in place), {repeats} runs")
    if not rows:
        print("(ansible-core and pyinfra could not be installed here)")
        return
    print(f"{'tool':<14} | {'hosts':>5} | {'median s':>8} | {'best s':>6}")
    print("-" * 44)
    for tool, count, median, best in rows:
        print(f"{tool:<14} | {count:>5} | {median:>8.3f} | {best:>6.3f}")
