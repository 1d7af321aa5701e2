"""Secrets that a server or a hub repeats back: a 401 whose message holds the Authorization
header orch sent (tests/fixtures/hostile_server.py, `echo_auth`). The key or token never
reaches the terminal (a real pseudo-terminal, where a table cell cuts the message) nor a
result file, whole or in part, whatever characters it holds; a key an HTTP header cannot
carry is refused before anything is sent."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from fixtures.hostile_server import Misbehaviour, hostile_server
from fixtures.orchcli import orch
from fixtures.terminal import PseudoTerminal

pytestmark = pytest.mark.slow  # servers and orch processes: seconds a test

QUICK = ("--concurrency", "1", "--requests", "1", "--warmup", "0", "--no-metrics")
LONG_KEY = "sk-proj-" + "abcdefghijklmnopqrstuvwxyz0123456789" * 2
QUOTED_KEY = 'sk-with"quote\\back-slash'


def _forms(secret: str) -> list[str]:
    """The secret, its JSON form, and its first 12 characters (what a cut would leave)."""
    return [secret, json.dumps(secret)[1:-1], secret[:12]]


def test_a_key_the_server_repeats_is_masked_on_the_terminal(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MYKEY", LONG_KEY)
    with hostile_server(Misbehaviour(echo_auth=True)) as url:
        terminal = PseudoTerminal(["bench", "--url", url, *QUICK, "--api-key-env", "MYKEY",
                                   "--result-dir", str(tmp_path / "out")], cwd=tmp_path,
                                  columns=100)
        terminal.expect("no request succeeded", timeout=60)
        code = terminal.finish()
    assert code == 1
    assert "Traceback" not in terminal.output
    assert "Authorization: Bearer ***" in " ".join(terminal.output.split())
    for form in _forms(LONG_KEY):
        assert form not in terminal.raw, terminal.output


@pytest.mark.parametrize("key", [LONG_KEY, QUOTED_KEY], ids=["long", "quote-and-backslash"])
def test_a_key_the_server_repeats_is_masked_in_every_result_file(
        tmp_path: Path, key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    monkeypatch.setenv("ORCH_TEST_KEY", key)
    with hostile_server(Misbehaviour(echo_auth=True)) as url:
        result = orch("bench", "--url", url, *QUICK, "--api-key-env", "ORCH_TEST_KEY",
                      "--result-dir", out, cwd=tmp_path)
    said = result.stdout + result.stderr
    assert result.returncode == 1, said
    for written in [*out.iterdir()]:
        text = written.read_text()
        for form in _forms(key):
            assert form not in text, (written.name, text)
    level = json.loads((out / "level-c1.json").read_text())
    assert "Authorization: Bearer ***" in level["error_messages"][0]["message"]
    for form in _forms(key):
        assert form not in said


def test_a_key_a_header_cannot_carry_is_refused(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORCH_TEST_KEY", "sk-clé-secrète")
    with hostile_server(Misbehaviour()) as url:
        result = orch("bench", "--url", url, *QUICK, "--api-key-env", "ORCH_TEST_KEY",
                      "--result-dir", tmp_path / "out", cwd=tmp_path)
    said = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 64, said
    assert "Traceback" not in said and "clé" not in said
    assert ("--api-key-env ORCH_TEST_KEY: the API key in ORCH_TEST_KEY cannot be sent: its "
            "character 6 is not printable ASCII") in said
    assert not (tmp_path / "out").exists()


def test_a_token_the_hub_repeats_is_masked_even_where_its_message_is_cut(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hub's message puts the token across the place where the host cuts it (600
    characters): the part left would not match the token, so it is masked before the cut.
    The venv is this test's own (it has huggingface_hub: tokenizers needs it)."""
    pytest.importorskip("huggingface_hub")
    token = "hf_" + "abcdefghijklmnopqrstuvwxyz0123456789"
    monkeypatch.setenv("HF_TOKEN", token)
    for pad in (330, 345):  # the token cut after 25 and 10 of its characters
        with hostile_server(Misbehaviour(echo_auth=True, echo_pad=pad)) as url:
            plan = tmp_path / "plan.yaml"
            plan.write_text(yaml.safe_dump({"name": "hub", "python": {"venv": sys.prefix},
                                            "model": {"repo": "org/m", "dir": str(tmp_path / "m"),
                                                      "endpoint": url,
                                                      "token": "${env:HF_TOKEN}"}}))
            result = orch("plan", plan, cwd=tmp_path)
        said = result.stdout + result.stderr
        assert result.returncode == 1 and "Traceback" not in said, said
        assert "HfHubHTTPError" in said and "401" in said, said
        assert token[:10] not in said, said


@pytest.mark.parametrize("key", ["sk-clé-secrète", "sk-abc\r\nX-Injected: 1"],
                         ids=["non-ascii", "header-injection"])
def test_a_plan_key_a_header_cannot_carry_is_refused(tmp_path: Path, key: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_API_KEY", key)
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({
        "name": "k", "python": {"venv": str(tmp_path / "v")},
        "service": {"engine": "sim", "model": "m", "api_key": "${env:MY_API_KEY}"}}))
    result = orch("plan", plan, cwd=tmp_path)
    said = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 1 and "Traceback" not in said, said
    assert "MY_API_KEY (used by service.api_key): its character " in said
    assert "is not printable ASCII" in said and "clé" not in said and "Injected" not in said


@pytest.mark.parametrize(("where", "field", "at"), [
    ("file", "env.HF_TOKEN", "p.yaml:5:13"),
    ("set", "env.HF_TOKEN", "--set env.HF_TOKEN=***"),
    ("command", "commands.0.env.DB_PASSWORD", "p.yaml:6:24"),
    ("api_key", "service.api_key", "p.yaml:3:30"),
])
def test_a_secret_written_out_is_refused_at_its_place_and_not_repeated(
        tmp_path: Path, where: str, field: str, at: str) -> None:
    """It would be kept in clear in plan.yaml and meta.json; `${env:NAME}` is the way."""
    secret = "hf_written_out_secret_value"
    text = {"file": f"name: x\npython: {{venv: /opt/v}}\nenv:\n  HF_TOKEN: {secret}\n",
            "set": "name: x\npython: {venv: /opt/v}\n",
            "command": ("name: x\npython: {venv: /opt/v}\ncommands:\n  - name: c\n"
                        f"    run: [env]\n    env: {{DB_PASSWORD: {secret}}}\n"),
            "api_key": f"name: x\npython: {{venv: /opt/v}}\nservice: {{model: m, api_key: {secret}}}\n",
            }[where]
    text = text.replace("env:\n  HF_TOKEN", "env:\n  TOKENIZERS_PARALLELISM: 'false'\n  HF_TOKEN")
    (tmp_path / "p.yaml").write_text(text)
    extra = ["--set", f"env.HF_TOKEN={secret}"] if where == "set" else []
    result = orch("plan", "p.yaml", *extra, cwd=tmp_path)
    said = result.stdout + result.stderr
    assert result.returncode == 1 and "Traceback" not in said, said
    assert f"{field}: a secret written out in the plan would be kept in clear" in said, said
    assert at in said and "${env:" in said, said
    assert secret not in said, said
    assert not (tmp_path / "runs").exists()


def test_flags_and_numbers_under_secret_looking_names_are_values(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(
        "name: x\npython: {venv: /opt/v}\nenv: {TOKENIZERS_PARALLELISM: 'false', "
        "HF_HUB_DISABLE_IMPLICIT_TOKEN: '1', PYTHON_KEYRING_BACKEND: keyring.backends.null.Keyring}\n")
    result = orch("validate", "p.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
