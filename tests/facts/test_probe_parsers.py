"""The fact program's parsers, on output captured from real hosts (tests/facts/captured/:
this machine's /etc/os-release, /proc/meminfo, /proc/cpuinfo, /proc/net/tcp with a server
listening on 127.0.0.1:18765, and /proc/PID/stat of a sleeping, a stopped and an oddly
named process). The nvidia-smi sample follows its CSV query format (`--format=csv,noheader,
nounits`): no GPU is at hand here."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from orchestrator.facts import Facts, HostFacts, ServiceFacts, parse_answer
from orchestrator.facts.gpus import parse_nvidia_smi
from orchestrator.facts.host import parse_cpu_model, parse_meminfo, parse_os_release
from orchestrator.facts.processes import parse_proc_stat
from orchestrator.facts.service import parse_listening_ports, parse_systemctl_show

CAPTURED = Path(__file__).parent / "captured"


def read(name: str) -> str:
    return (CAPTURED / name).read_text()


def test_os_release_and_meminfo_and_cpuinfo() -> None:
    assert parse_os_release(read("os-release"))["PRETTY_NAME"].startswith("Debian GNU/Linux")
    memory = parse_meminfo(read("meminfo"))
    assert memory["MemTotal"] > memory["MemAvailable"] > 0
    assert memory["MemTotal"] % 1024 == 0  # kB -> bytes
    assert parse_cpu_model(read("cpuinfo"))


def test_nvidia_smi_gpus() -> None:
    gpus = parse_nvidia_smi(read("nvidia-smi-8x-rtx-pro-6000.csv"))
    assert [g["index"] for g in gpus] == list(range(8))
    assert gpus[0] == {"index": 0, "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
                       "memory_mib": 97887, "driver": "575.57.08", "compute_cap": "12.0",
                       "pci_bus_id": "00000000:01:00.0"}
    assert gpus[7]["memory_mib"] is None  # "[N/A]"
    assert parse_nvidia_smi("") == []
    assert parse_nvidia_smi("No devices were found\n") == []


def test_listening_ports_from_proc_net_tcp() -> None:
    ports = parse_listening_ports(read("proc-net-tcp"))
    assert ports[18765] == "182626"  # the server started for the capture
    assert all(isinstance(p, int) for p in ports)
    assert isinstance(parse_listening_ports(read("proc-net-tcp6")), dict)


@pytest.mark.parametrize(("name", "state"), [
    ("proc-stat-sleeping", "S"), ("proc-stat-stopped", "T"), ("proc-stat-odd-name", "S"),
])
def test_proc_stat_state_and_start_time(name: str, state: str) -> None:
    found, ticks = parse_proc_stat(read(name))
    assert found == state
    assert ticks > 0
    # The start time is field 22 of the whole line, whatever the command name holds.
    assert str(ticks) == read(name).rsplit(")", 1)[1].split()[19]


def test_systemctl_show() -> None:
    text = "ActiveState=active\nSubState=running\nMainPID=4242\nExecMainStartTimestampMonotonic=9\n"
    assert parse_systemctl_show(text)["MainPID"] == "4242"


def test_the_answer_becomes_typed_facts() -> None:
    answer = (
        '{"probe_version": 1, "probe_seconds": 0.05, '
        '"host": {"hostname": "gpu1", "user": "root", "systemd": true, "cpu_count": 64, '
        '"gpus": [{"index": 0, "name": "RTX", "memory_mib": 97887, "driver": "575", '
        '"compute_cap": "12.0", "pci_bus_id": "0:1"}]}, '
        '"service": {"pid": 7, "process": {"pid": 7, "state": "T", "cmdline": ["vllm", "serve"], '
        '"uptime": 3.5, "start_ticks": 9}, "spec": "{}", "spec_file": "abc", '
        '"port": {"number": 8000, "listening": true, "holder": {"pid": 7, "cmdline": []}}}}'
    )
    facts = parse_answer(answer)
    assert isinstance(facts, Facts) and isinstance(facts.host, HostFacts)
    assert facts.host.is_root and facts.host.systemd and facts.host.gpus is not None
    assert facts.host.gpus[0].memory_mib == 97887
    assert isinstance(facts.service, ServiceFacts)
    assert facts.service.process is not None and facts.service.process.state == "T"
    assert facts.service.port is not None and facts.service.port.holder is not None
    assert facts.service.port.holder.pid == 7
    assert facts.service.digests == {"spec_file": "abc"}
    # No nvidia-smi on the host: no GPU facts at all (not "zero GPUs").
    assert parse_answer('{"probe_version": 1, "host": {"gpus": null}}').host.gpus is None


def test_who_holds_gpu_memory_is_read_with_each_process_group(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in nvidia-smi on the host's PATH, in nvidia-smi's CSV formats: the probe asks it
    for the GPUs and for the compute processes, and reads each process's group from /proc."""
    import subprocess

    from orchestrator.facts import ProbeRequest, probe
    from orchestrator.transport.local import LocalTransport

    holder = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        smi = tmp_path / "bin" / "nvidia-smi"
        smi.parent.mkdir()
        smi.write_text(
            "#!/bin/sh\n"
            'case "$1" in\n'
            "  --query-gpu=*) echo '0, NVIDIA RTX PRO 6000, 97887, 580.95, 12.0, 00000000:01:00.0';;\n"
            f"  --query-compute-apps=*) echo '{holder.pid}, 00000000:01:00.0, 90112';;\n"
            "  topo) echo 'GPU0 X';;\n"
            "esac\n")
        smi.chmod(0o755)
        monkeypatch.setenv("PATH", f"{smi.parent}:{os.environ['PATH']}")
        facts = probe(LocalTransport("local"), ProbeRequest())
        assert facts.host.gpu_apps is not None
        (app,) = facts.host.gpu_apps
        assert (app.pid, app.bus_id, app.used_mib, app.pgid, app.cmdline) == (
            holder.pid, "00000000:01:00.0", 90112, holder.pid, ("sleep", "30"))
    finally:
        holder.kill()
        holder.wait()
