"""Three hosts in parallel, each a network namespace with its own sshd, one transport per
host used from one worker thread each (the runner's pattern)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from fixtures.netns import NetnsHosts

from orchestrator.transport import Command, connect


def test_three_hosts_in_parallel(netns_hosts: NetnsHosts) -> None:
    inventory = netns_hosts.inventory()  # paramiko: a session per command and none more
    inventory = inventory.model_copy(
        update={"ssh": inventory.ssh.model_copy(update={"transport": "paramiko"})})
    marks = netns_hosts.log_marks()
    names = inventory.select("all")
    assert names == ["n1", "n2", "n3"]

    def work(name: str) -> tuple[str, str, bytes, int]:
        with connect(name, inventory) as transport:
            address = transport.run(Command.script("ip -4 -o addr show dev eth0")).stdout
            path = f"/tmp/orch-netns-{name}/marker"
            transport.put(name.encode(), path)
            data = transport.get(path)
            transport.run(Command("rm", "-rf", f"/tmp/orch-netns-{name}"))
            return name, address, data, transport.round_trips

    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(work, names))

    for (name, address, data, round_trips), host in zip(results, netns_hosts.hosts, strict=True):
        assert f"inet {host.address}/30" in address  # each command ran in its own namespace
        assert data == name.encode()
        assert round_trips == 4
    assert netns_hosts.round_trips(since=marks) == {"n1": 4, "n2": 4, "n3": 4}
