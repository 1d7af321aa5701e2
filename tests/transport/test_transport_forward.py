"""Port forwarding through the SSH connection, with real HTTP servers on the far side."""

from __future__ import annotations

import http.server
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from fixtures.netns import NetnsHosts
from fixtures.ports import free_port
from fixtures.sshd import SshServer

from orchestrator.transport import Command, Transport, connect
from orchestrator.transport.ssh import SshTransport

BODY = bytes(range(256)) * 4096  # 1 MiB


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: several requests per tunnel connection

    def do_GET(self) -> None:
        body = BODY if self.path == "/big" else f"path={self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        data = self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[::-1])

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(params=["ssh", "openssh"])
def tunnelling(request: pytest.FixtureRequest) -> Transport:
    """Each transport that forwards ports: paramiko's direct-tcpip, OpenSSH's `ssh -W`."""
    made: Transport = request.getfixturevalue(request.param)
    return made


@pytest.fixture
def http_port() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


def test_http_through_the_tunnel(tunnelling: Transport, http_port: int) -> None:
    with tunnelling.forward(http_port) as port:
        assert port != http_port
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            assert client.get("/hello").text == "path=/hello"
            assert client.get("/big").content == BODY  # same keep-alive connection
            assert client.post("/echo", content=BODY).content == BODY[::-1]


def test_many_clients_at_once(tunnelling: Transport, http_port: int) -> None:
    with tunnelling.forward(http_port) as port:

        def fetch(index: int) -> str:
            with httpx.Client(timeout=10) as client:
                return client.get(f"http://127.0.0.1:{port}/{index}").text

        with ThreadPoolExecutor(8) as pool:
            assert list(pool.map(fetch, range(16))) == [f"path=/{i}" for i in range(16)]


def test_closed_remote_port_closes_the_client_and_the_tunnel_lives_on(
    tunnelling: Transport, http_port: int
) -> None:
    dead = free_port()
    with tunnelling.forward(dead) as port, socket.create_connection(("127.0.0.1", port), timeout=5) as client:
        assert client.recv(1) == b""  # closed at once, as a refused port would be
    with tunnelling.forward(http_port) as port:
        assert httpx.get(f"http://127.0.0.1:{port}/again", timeout=10).text == "path=/again"


def test_leaving_the_context_closes_the_port_and_open_tunnels(tunnelling: Transport, http_port: int) -> None:
    with tunnelling.forward(http_port) as port:
        held = socket.create_connection(("127.0.0.1", port), timeout=5)
        held.sendall(b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = b""
        while not answer.endswith(b"path=/x"):  # the whole answer: it may come in pieces
            piece = held.recv(4096)
            assert piece, answer
            answer += piece
        assert b"200 OK" in answer
    started = time.monotonic()
    held.settimeout(5)
    assert held.recv(4096) == b""  # the open tunnel was closed
    held.close()
    assert time.monotonic() - started < 3
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5)


def test_tunnel_reaches_a_server_only_the_namespace_can_see(netns_hosts: NetnsHosts) -> None:
    """The far side's loopback is private to its namespace: only the tunnel gets there."""
    with connect("n1", netns_hosts.inventory()) as transport:
        remote_port = 18080
        script = (
            f"cd /tmp; nohup python3 -m http.server {remote_port} --bind 127.0.0.1 < /dev/null "
            "> /dev/null 2>&1 & echo $!"
        )
        pid = transport.run(Command.script(script)).stdout.strip()
        try:
            with pytest.raises(OSError):  # not reachable from the controller directly
                socket.create_connection(("127.0.0.1", remote_port), timeout=0.5).close()
            with transport.forward(remote_port) as port:
                deadline = time.monotonic() + 10
                while True:
                    try:
                        response = httpx.get(f"http://127.0.0.1:{port}/", timeout=5)
                        break
                    except httpx.TransportError:
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(0.1)
                assert response.status_code == 200
                assert "Directory listing" in response.text
        finally:
            transport.run(Command("kill", pid), check=False)


def test_a_new_tunnel_after_a_dropped_connection_reconnects(
    sshd: SshServer, ssh: SshTransport, http_port: int
) -> None:
    with ssh.forward(http_port) as port:
        assert httpx.get(f"http://127.0.0.1:{port}/before", timeout=10).text == "path=/before"
        address = ssh.local_address
        assert address is not None
        assert sshd.drop(address[1])
        time.sleep(0.1)
        assert httpx.get(f"http://127.0.0.1:{port}/after", timeout=10).text == "path=/after"
        assert ssh.local_address != address
