"""The Python environment step: a venv holding exactly the pinned packages.

Converges: the venv exists; every pin is installed at its version; package families (e.g.
flashinfer-python / flashinfer-cubin / flashinfer-jit-cache) share one version; the files of
pinned distributions match their RECORD (reinstalled when `install.clean`); with `exact`
(a `--locked` redeploy) nothing else is installed.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from orchestrator.plan.models import Install, PythonEnv, canonical_name
from orchestrator.probe import Facts, ProbeRequest, VenvFacts
from orchestrator.steps.base import Change, Finding, Step, StepPlan
from orchestrator.transport.command import Command

# Never uninstalled by an exact (locked) converge: the venv's own tools, and orch itself
# (installed from the controller's build by the orch step for `engine: sim`).
_VENV_TOOLS = {"pip", "setuptools", "wheel", "uv", "orch"}
_MAX_LISTED_FILES = 10


def same_version(installed: str, pinned: str) -> bool:
    """PEP 440 equality; a pin without a local label (+cu129) accepts any local label."""
    try:
        have, want = Version(installed), Version(pinned)
    except InvalidVersion:
        return installed == pinned
    if want.local is None:
        return Version(have.public) == Version(want.public)
    return have == want


@dataclass(frozen=True)
class FamilyMismatch:
    members: dict[str, str]  # canonical name -> installed version
    target: str | None  # the version they must share (from a pin), if known

    def describe(self) -> str:
        found = ", ".join(f"{name} {version}" for name, version in sorted(self.members.items()))
        return f"package family out of step: {found}"


def family_mismatches(
    installed: dict[str, str], families: list[list[str]], pins: dict[str, str]
) -> list[FamilyMismatch]:
    """Families whose installed members do not share one version. Pure.

    `installed` and `pins` map canonical names to versions. The target version is the
    pinned version of a pinned member, when there is one."""
    out: list[FamilyMismatch] = []
    for family in families:
        names = [canonical_name(n) for n in family]
        members = {n: installed[n] for n in names if n in installed}
        pinned = [pins[n] for n in names if n in pins]
        target = pinned[0] if pinned else None
        reference = target or next(iter(members.values()), None)
        if reference is None:
            continue
        if any(not same_version(v, reference) for v in members.values()):
            out.append(FamilyMismatch(members=members, target=target))
    return out


class PythonEnvStep(Step):
    name = "python"

    def __init__(
        self, python: PythonEnv, install: Install, *, exact: bool = False, verify_all: bool = False
    ) -> None:
        self.python = python
        self.install = install
        self.exact = exact
        self.verify_all = verify_all
        self.pins = install.pins()

    @property
    def venv_python(self) -> str:
        return f"{self.python.venv}/bin/python"

    def request(self) -> ProbeRequest:
        return ProbeRequest(venv=self.python.venv, interpreter=self.python.interpreter,
                            record=sorted(self.pins), verify_all=self.verify_all)

    # -- commands ---------------------------------------------------------------------

    def _index_args(self) -> list[str]:
        args: list[str] = []
        for i, url in enumerate(self.install.index_urls):
            args += ["--index-url" if i == 0 else "--extra-index-url", url]
        for link in self.install.find_links:
            args += ["--find-links", link]
        if self.install.no_index:
            args.append("--no-index")
        return args

    def _install(self, specs: list[str], *, reinstall: bool = False) -> Command:
        # A locked (exact) install takes exactly the frozen set: resolving dependencies
        # could pull in anything (a drifted flashinfer once brought a new torch and 47 more).
        no_deps = ["--no-deps"] if self.exact or reinstall else []
        if self.python.installer == "uv":
            # Copies, not uv's default hardlinks into its cache: a patch edited in place in
            # site-packages would otherwise corrupt the cache, and a reinstall would bring
            # the patch back. A reinstall also bypasses the cache for the same reason.
            extra = ["--link-mode", "copy", *no_deps]
            extra += ["--reinstall", "--no-cache"] if reinstall else []
            if self.install.torch_backend:
                extra += ["--torch-backend", self.install.torch_backend]
            return Command(
                f"{self.python.venv}/bin/uv", "pip", "install", "--quiet",
                "--python", self.venv_python, *extra, *self._index_args(), *specs,
            )
        extra = ["--force-reinstall", *no_deps] if reinstall else no_deps
        return Command(
            self.venv_python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
            *extra, *self._index_args(), *specs,
        )

    def _uninstall(self, names: list[str]) -> Command:
        if self.python.installer == "uv":
            return Command(
                f"{self.python.venv}/bin/uv", "pip", "uninstall", "--quiet",
                "--python", self.venv_python, *names,
            )
        return Command(
            self.venv_python, "-m", "pip", "uninstall", "--yes", "--quiet",
            "--disable-pip-version-check", *names,
        )

    # -- plan -------------------------------------------------------------------------

    def plan(self, facts: Facts) -> StepPlan:
        result = StepPlan(step=self.name)
        venv = facts.venv or VenvFacts(self.python.venv, False, None, {}, False)
        if not venv.exists and venv.interpreter_path is None and facts.venv is not None:
            result.blocked = (
                f"cannot create the venv {self.python.venv}: {self.python.interpreter} is not on "
                "the host's PATH (python.interpreter); install it or name another interpreter"
            )
            return result
        if not venv.exists:
            result.changes.append(
                Change(
                    f"create venv {self.python.venv} with {self.python.interpreter}",
                    [Command(self.python.interpreter, "-m", "venv", self.python.venv)],
                )
            )
        if self.python.installer == "uv" and not venv.has_uv:
            uv_spec = f"uv=={self.pins['uv']}" if "uv" in self.pins else "uv"
            result.changes.append(
                Change(
                    "install uv into the venv",
                    [Command(self.venv_python, "-m", "pip", "install", "--quiet",
                             "--disable-pip-version-check", *self._index_args(), uv_spec)],
                )
            )
        installed = {name: d.version for name, d in venv.distributions.items()}
        specs: dict[str, str] = {}
        notes: list[str] = []
        for name, version in self.pins.items():
            have = installed.get(name)
            if have is None:
                specs[name] = f"{name}=={version}"
                notes.append(f"{name} missing -> {version}")
            elif not same_version(have, version):
                specs[name] = f"{name}=={version}"
                notes.append(f"{name} {have} -> {version}")
        for mismatch in family_mismatches(installed, self.install.families, self.pins):
            if mismatch.target is None:
                # Nothing says which version they should share: vLLM would crash at start-up
                # (flashinfer refuses to import), and orch cannot choose for the user.
                members = sorted(mismatch.members)
                fix = (f"pin {' and '.join(members)} to one version in install.packages "
                       f"(e.g. {members[0]}=={mismatch.members[members[0]]})")
                result.findings.append(Finding("error", mismatch.describe(), fix))
                result.blocked = "no pin says which version the package family shares (below)"
                continue
            unpinned = sorted(
                n for n, v in mismatch.members.items()
                if n not in self.pins and not same_version(v, mismatch.target)
            )
            fix = (f"pin {', '.join(f'{n}=={mismatch.target}' for n in unpinned)} in "
                   "install.packages (this apply aligns it meanwhile)") if unpinned else ""
            result.findings.append(
                Finding("warning", mismatch.describe() + f" (they must all be {mismatch.target})", fix)
            )
            for name, have in mismatch.members.items():
                if not same_version(have, mismatch.target) and name not in specs:
                    specs[name] = f"{name}=={mismatch.target}"
                    notes.append(f"{name} {have} -> {mismatch.target} (family)")
        if specs:
            result.changes.append(
                Change("install " + "; ".join(notes), [self._install(sorted(specs.values()))])
            )
        result.changes.extend(self._record_changes(facts, installed, specs, result.findings))
        if self.exact:
            extras = sorted(
                d.name for key, d in venv.distributions.items()
                if key not in self.pins and key not in _VENV_TOOLS
            )
            if extras:
                result.changes.append(
                    Change(f"uninstall {len(extras)} unpinned: {', '.join(extras)}",
                           [self._uninstall(extras)])
                )
        return result

    def _record_changes(
        self,
        facts: Facts,
        installed: dict[str, str],
        reinstalling: dict[str, str],
        findings: list[Finding],
    ) -> list[Change]:
        changes: list[Change] = []
        for name, record in sorted(facts.record.items()):
            pinned = self.pins.get(name)
            bad = record.modified + record.missing
            if not bad or pinned is None or name in reinstalling:
                continue
            listed = ", ".join(bad[:_MAX_LISTED_FILES])
            more = f" and {len(bad) - _MAX_LISTED_FILES} more" if len(bad) > _MAX_LISTED_FILES else ""
            what = f"{name} {installed.get(name, pinned)}: {len(record.modified)} modified, " \
                   f"{len(record.missing)} missing files against RECORD ({listed}{more})"
            if self.install.clean:
                findings.append(Finding("warning", what, "reinstalled because install.clean is true"))
                changes.append(
                    Change(f"reinstall {name}=={pinned} ({len(bad)} files differ from RECORD)",
                           [self._install([f"{name}=={pinned}"], reinstall=True)])
                )
            else:
                findings.append(
                    Finding("warning", what, "set install.clean: true to reinstall it")
                )
        return changes
