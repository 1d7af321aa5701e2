"""Package logic (pure): version equality, families, pin drift, and the pip/uv command lines
(uv's own way into a venv: tests/steps/test_uv_bootstrap.py, through a real shell)."""

from __future__ import annotations

import pytest

from orchestrator.packages import Installer, family_mismatches, pin_drift, same_version
from orchestrator.plan.models import Install, PythonEnv


@pytest.mark.parametrize(
    ("installed", "pinned", "same"),
    [
        ("0.6.4", "0.6.4", True),
        ("1.0", "1.0.0", True),
        ("0.6.4+cu129", "0.6.4", True),
        ("0.6.3", "0.6.4", False),
        ("0.6.4+cu129", "0.6.4+cu130", False),
        ("weird", "weird", True),
    ],
)
def test_same_version(installed: str, pinned: str, same: bool) -> None:
    assert same_version(installed, pinned) is same


def test_jit_cache_local_label_matches_family() -> None:
    assert family_mismatches(
        {"flashinfer-python": "0.6.4", "flashinfer-jit-cache": "0.6.4+cu129"},
        [["flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache"]],
        {"flashinfer-python": "0.6.4"},
    ) == []


def test_pin_drift_names_each_pin_not_held() -> None:
    assert pin_drift({"vllm": "0.16.0", "torch": "2.10.0"}, {"vllm": "0.17.1", "flashinfer-python": "0.6.4",
                                                              "torch": "2.10.0"}) == [
        "vllm 0.16.0 (pin 0.17.1)", "flashinfer-python missing (pin 0.6.4)"]


@pytest.mark.parametrize(("kind", "reinstall", "no_deps", "expected"), [
    ("pip", False, False, "/v/bin/python -m pip install --quiet --disable-pip-version-check "
                          "--find-links /w --no-index a==1"),
    ("pip", False, True, "/v/bin/python -m pip install --quiet --disable-pip-version-check "
                         "--no-deps --find-links /w --no-index a==1"),
    ("pip", True, False, "/v/bin/python -m pip install --quiet --disable-pip-version-check "
                         "--force-reinstall --no-deps --find-links /w --no-index a==1"),
    ("uv", False, False, "/v/bin/uv pip install --quiet --python /v/bin/python --link-mode copy "
                         "--torch-backend auto --find-links /w --no-index a==1"),
    ("uv", True, False, "/v/bin/uv pip install --quiet --python /v/bin/python --link-mode copy "
                        "--no-deps --reinstall --no-cache --torch-backend auto --find-links /w "
                        "--no-index a==1"),
])  # fmt: skip
def test_install_command_lines(kind: str, reinstall: bool, no_deps: bool, expected: str) -> None:
    install = Install(packages=["a==1"], find_links=["/w"], no_index=True, torch_backend="auto")
    installer = Installer.of(PythonEnv(venv="/v", installer=kind), install)  # type: ignore[arg-type]
    assert installer.install(["a==1"], reinstall=reinstall, no_deps=no_deps).raw() == expected


def test_uninstall() -> None:
    pip = Installer.of(PythonEnv(venv="/v"))
    assert pip.uninstall(["x"]).raw() == ("/v/bin/python -m pip uninstall --yes --quiet "
                                          "--disable-pip-version-check x")
