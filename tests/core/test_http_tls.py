"""orch's httpx clients share one TLS context (building one costs ~23 ms of CPU a client) and
every one of them still verifies: a real https server with a self-signed certificate is
refused by each, through a real TLS handshake."""

from __future__ import annotations

import datetime
import http.server
import ipaddress
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from orchestrator import http_deadline


def _self_signed(key_file: Path, cert_file: Path) -> None:
    """A certificate for 127.0.0.1 signed by its own key (cryptography: paramiko's own)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(key, hashes.SHA256()))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


@pytest.fixture
def https_url(tmp_path: Path) -> Iterator[str]:
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    _self_signed(key, cert)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{server.server_address[1]}/health"
    server.shutdown()
    server.server_close()


def test_every_client_shares_one_context_and_still_refuses_an_unknown_certificate(
        https_url: str) -> None:
    assert http_deadline.tls() is http_deadline.tls()
    for _ in range(2):  # the second client gets the context the first one built
        with http_deadline.client(5.0) as client, pytest.raises(httpx.ConnectError) as refused:
            client.get(https_url)
        assert "CERTIFICATE_VERIFY_FAILED" in str(refused.value)
