"""`${vars.NAME}` substitution and reference checks."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.plan.variables import (
    ReferenceProblem,
    render_vars,
    resolve_vars,
    substitute_vars,
)

VARS = resolve_vars(
    {
        "version": "0.17.1",
        "venv": "/opt/venvs/vllm-${vars.version}",
        "tp": 8,
        "ep": True,
        "levels": [1, 2],
        "gpu": {"count": 8, "name": "RTX PRO 6000"},
    }
)


def test_variables_may_use_variables() -> None:
    assert VARS["venv"] == "/opt/venvs/vllm-0.17.1"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("${vars.tp}", 8),  # a whole-string reference keeps the type
        ("${vars.ep}", True),
        ("${vars.levels}", [1, 2]),
        ("${vars.gpu.count}", 8),
        ("tp=${vars.tp}", "tp=8"),
        ("ep=${vars.ep}", "ep=true"),
        ("${vars.gpu.name} x${vars.gpu.count}", "RTX PRO 6000 x8"),
        ("vllm==${vars.version}", "vllm==0.17.1"),
        ("$${vars.tp}", "${vars.tp}"),  # escaped
        ("${env:HF_TOKEN}", "${env:HF_TOKEN}"),  # secrets stay references
        ("export PATH=${HOME}/bin:${PATH}", "export PATH=${HOME}/bin:${PATH}"),  # not ours
        ("${ENVIRONMENT} ${VARIANT}", "${ENVIRONMENT} ${VARIANT}"),
        ("no references", "no references"),
        (["${vars.tp}", {"k": "${vars.version}"}], [8, {"k": "0.17.1"}]),
        (7, 7),
    ],
)
def test_substitute(value: Any, expected: Any) -> None:
    assert substitute_vars(value, VARS) == expected


@pytest.mark.parametrize(
    ("value", "fragment", "hint"),
    [
        ("${vars.verison}", "unknown variable ${vars.verison}", "did you mean 'version'?"),
        ("${vars.gpu.cuont}", "vars.gpu has no key 'cuont'", "did you mean 'count'?"),
        ("${vars.version.major}", "vars.version has no key 'major'", None),
        ("x-${vars.levels}", "${vars.levels} is a list", None),
        ("x-${vars.gpu}", "${vars.gpu} is a mapping", None),
        ("${var.tp}", "malformed reference '${var.tp}'", "write ${vars.tp}"),
        ("${vars:tp}", "malformed reference", "write ${vars.tp}"),
        ("${env.HF_TOKEN}", "malformed reference", "write ${env:HF_TOKEN}"),
        ("${ENV:HF_TOKEN}", "malformed reference", "write ${env:HF_TOKEN}"),
        ("${env:HF-TOKEN}", "malformed reference", None),
        ("${vars.}", "malformed reference", None),
        ("a ${vars.tp", "unterminated reference", "write ${vars.tp}"),
    ],
)
def test_bad_references(value: str, fragment: str, hint: str | None) -> None:
    with pytest.raises(ReferenceProblem) as raised:
        substitute_vars({"service": {"model": value}}, VARS)
    assert fragment in raised.value.message
    assert raised.value.path == ("service", "model")
    if hint:
        assert hint in (raised.value.hint or "")


def test_cycles_are_named() -> None:
    with pytest.raises(ReferenceProblem) as raised:
        resolve_vars({"a": "${vars.b}", "b": "x", "c": "${vars.d}", "d": "-${vars.c}"})
    assert "${vars.c} -> ${vars.d} -> ${vars.c}" in raised.value.message


def test_a_variable_cannot_refer_to_itself() -> None:
    with pytest.raises(ReferenceProblem, match="cycle"):
        resolve_vars({"a": "${vars.a}"})


def test_render_vars_always_gives_text() -> None:
    assert render_vars("${vars.tp}", VARS) == "8"
    assert render_vars("listen ${vars.tp}\n", VARS) == "listen 8\n"


def test_controller_home_is_the_home_of_the_user_running_orch(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the simulated plans keep their venvs under: the user's own folder (issue 38)."""
    monkeypatch.setenv("HOME", "/home/alice/")
    assert substitute_vars("${controller.home}/.cache/orch/sim", VARS) == "/home/alice/.cache/orch/sim"
    assert substitute_vars("$${controller.home}", VARS) == "${controller.home}"
    for wrong in ("${controller.hom}", "${Controller:home}", "${controller.home"):
        with pytest.raises(ReferenceProblem, match=r"\$\{controller\.home\} \(the home folder"):
            substitute_vars(wrong, VARS, ("python", "venv"))
    monkeypatch.setenv("HOME", "relative")
    with pytest.raises(ReferenceProblem, match="has no home folder"):
        substitute_vars("${controller.home}/v", VARS)
