"""Secrets: named by the plan, resolved from the environment, masked, substituted late."""

from __future__ import annotations

import pytest

from orchestrator import masking
from orchestrator.errors import SecretError
from orchestrator.plan.models import Plan
from orchestrator.plan.secrets import resolve_secrets, secret_names, secret_uses, substitute

PLAN = Plan.model_validate(
    {
        "name": "p",
        "env": {"HF_TOKEN": "${env:HF_TOKEN}", "A": "x-${env:EXTRA}-${env:HF_TOKEN}"},
        "service": {"model": "m", "api_key": "${env:API_KEY}"},
        "files": [{"path": "/etc/x", "content": "token=${env:HF_TOKEN}\n${HOME}"}],
    }
)


def test_secret_names_in_order_of_first_use() -> None:
    assert secret_names(PLAN) == ["HF_TOKEN", "EXTRA", "API_KEY"]
    assert secret_uses(PLAN)["HF_TOKEN"] == ["files.0.content", "env.HF_TOKEN", "env.A"]
    assert secret_names(Plan(name="plain")) == []


def test_resolve_reads_the_environment_and_registers_for_masking() -> None:
    environ = {"HF_TOKEN": "hf_abcdef123", "EXTRA": "extra-value", "API_KEY": "sk-12345", "X": "y"}
    values = resolve_secrets(PLAN, environ)
    assert values == {"HF_TOKEN": "hf_abcdef123", "EXTRA": "extra-value", "API_KEY": "sk-12345"}
    assert masking.mask("Bearer sk-12345 and hf_abcdef123") == "Bearer *** and ***"


def test_every_missing_secret_is_named_with_where_it_is_used() -> None:
    with pytest.raises(SecretError) as raised:
        resolve_secrets(PLAN, {"EXTRA": "e-value", "API_KEY": ""})
    text = str(raised.value)
    assert "2 secrets are not set in the environment" in text
    assert "HF_TOKEN (used by files.0.content, env.HF_TOKEN, env.A)" in text
    assert "API_KEY (used by service.api_key)" in text  # empty counts as missing
    assert "export HF_TOKEN=... API_KEY=..." in text
    assert masking.mask("e-value") == "e-value"  # nothing registered on failure


def test_resolve_defaults_to_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    plan = Plan.model_validate({"name": "p", "env": {"T": "${env:ORCH_TEST_SECRET}"}})
    monkeypatch.setenv("ORCH_TEST_SECRET", "from-the-env")
    assert resolve_secrets(plan) == {"ORCH_TEST_SECRET": "from-the-env"}
    monkeypatch.delenv("ORCH_TEST_SECRET")
    with pytest.raises(SecretError, match="ORCH_TEST_SECRET"):
        resolve_secrets(plan)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("HF_TOKEN=${env:HF_TOKEN}", "HF_TOKEN=hf_x"),
        ("a=${env:HF_TOKEN} b=${env:B}", "a=hf_x b=bee"),
        ("${HOME} ${env} $${env:HF_TOKEN}", "${HOME} ${env} $hf_x"),
        ("nothing", "nothing"),
    ],
)
def test_substitute(text: str, expected: str) -> None:
    assert substitute(text, {"HF_TOKEN": "hf_x", "B": "bee"}) == expected


def test_substitute_refuses_an_unresolved_secret() -> None:
    with pytest.raises(SecretError, match="secret NOPE was not resolved"):
        substitute("${env:NOPE}", {})


def test_a_secret_outside_the_private_channels_is_refused() -> None:
    # pip would get the reference verbatim on its command line, where ps and logs see it.
    plan = Plan.model_validate({
        "name": "p", "python": {"venv": "/v"},
        "install": {"packages": ["a==1"], "index_urls": ["https://u:${env:TOK}@index/simple"]},
    })
    with pytest.raises(SecretError, match=r"found TOK in install\.index_urls\.0") as caught:
        resolve_secrets(plan, {"TOK": "a-long-token"})
    assert "pip.conf" in str(caught.value)


def test_a_secret_too_short_to_mask_is_refused() -> None:
    with pytest.raises(SecretError, match="shorter than 4 characters"):
        resolve_secrets(PLAN, {"HF_TOKEN": "abc", "EXTRA": "extra-value", "API_KEY": "key-value"})
