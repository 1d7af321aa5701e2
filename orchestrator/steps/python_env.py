"""The Python environment step: a venv holding exactly the pinned packages.

Converges: the venv exists; every pin is installed at its version; package families (e.g.
flashinfer-python / flashinfer-cubin / flashinfer-jit-cache) share one version; the files of
pinned distributions match their RECORD (reinstalled when `install.clean`); with `exact`
(a `--locked` redeploy) nothing else is installed.
"""

from __future__ import annotations

import posixpath

from orchestrator.facts import Facts, ProbeRequest, VenvFacts
from orchestrator.facts.venv_trust import refusal, venv_trust
from orchestrator.packages import Installer, family_mismatches, same_version
from orchestrator.plan.models import Install, PythonEnv, canonical_name
from orchestrator.steps.base import Change, Finding, Step, StepPlan
from orchestrator.transport.command import Command, quoted

# Never uninstalled by an exact (locked) converge: the venv's own tools, and orch itself
# (installed from the controller's build by the orch step for `engine: sim`).
_VENV_TOOLS = {"pip", "setuptools", "wheel", "uv", "orch"}
_MAX_LISTED_FILES = 10


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
    def installer(self) -> Installer:
        return Installer.of(self.python, self.install)

    def request(self) -> ProbeRequest:
        return ProbeRequest(venv=self.python.venv, interpreter=self.python.interpreter,
                            record=sorted(self.pins), verify_all=self.verify_all)

    # -- plan -------------------------------------------------------------------------

    def plan(self, facts: Facts) -> StepPlan:
        result = StepPlan(step=self.name)
        untrusted = refusal(venv_trust(facts.extra), self.python.venv, "runs")
        if untrusted is not None:  # before anything runs its python (pip, the service)
            result.blocked = untrusted
            return result
        venv = facts.venv or VenvFacts(self.python.venv, False, None, {}, False)
        if not venv.exists and venv.interpreter_path is None and facts.venv is not None:
            result.blocked = (
                f"cannot create the venv {self.python.venv}: {self.python.interpreter} is not on "
                "the host's PATH (python.interpreter); install it or name another interpreter"
            )
            return result
        result.changes.extend(self._venv_changes(venv))
        installed = {name: d.version for name, d in venv.distributions.items()}
        specs, notes = self._pin_specs(installed)
        self._align_families(installed, specs, notes, result)
        if specs:
            result.changes.append(
                # A locked (exact) install takes exactly the frozen set: resolving dependencies
                # could pull in anything (a drifted flashinfer once brought a new torch and 47
                # more packages).
                Change("install " + "; ".join(notes),
                       [self.installer.install(sorted(specs.values()), no_deps=self.exact)])
            )
        result.changes.extend(self._record_changes(facts, installed, specs, result.findings))
        result.changes.extend(self._absent_changes(installed, installing=bool(specs)))
        if self.exact:
            result.changes.extend(self._unpinned_changes(venv))
        if result.changes and not venv.writable:
            result.blocked = self._not_writable(venv, facts)
        return result

    def _not_writable(self, venv: VenvFacts, facts: Facts) -> str:
        """Said at plan time, before anything is installed: the apply would fail mid-install."""
        who = f"user {facts.host.user!r}" if facts.host.user else "the login user"
        owner = f" (owned by {venv.write_owner})" if venv.write_owner else ""
        return (f"cannot write the venv {self.python.venv}: {who} may not write "
                f"{venv.write_checked or self.python.venv}{owner}; give python.venv a path that "
                "user can write (e.g. under its home), or make the user its owner")

    def _venv_changes(self, venv: VenvFacts) -> list[Change]:
        """Create the venv, and put uv into it when uv installs (a uv venv without pip:
        uv needs none, and ensurepip is most of a new venv's time); pip into one that pip
        installs and lacks it (a uv venv the plan moved to pip)."""
        changes: list[Change] = []
        uv = self.python.installer == "uv"
        if not venv.exists:
            changes.append(
                Change(
                    f"create venv {self.python.venv} with {self.python.interpreter}",
                    [self._own_parent() +
                     Command(self.python.interpreter, "-m", "venv",
                             *(["--without-pip"] if uv else []), self.python.venv)],
                )
            )
        elif not uv and "pip" not in venv.distributions:  # a uv venv, now pip's
            changes.append(Change("put pip into the venv (made without it)",
                                  [Command(self.installer.python, "-m", "ensurepip",
                                           "--default-pip")]))
        if uv and not venv.has_uv:
            uv_spec = f"uv=={self.pins['uv']}" if "uv" in self.pins else "uv"
            changes.append(Change("install uv into the venv",
                                  [self.installer.install_uv(uv_spec, self.python.interpreter)]))
        return changes

    def _own_parent(self) -> Command:
        """The venv's folder made, and still the user's own when the venv is made in it: one
        that another user made since the probe (a race for a shared /tmp) is refused."""
        parent = quoted(posixpath.dirname(self.python.venv.rstrip("/")) or "/")
        return Command.script(
            f"mkdir -p -- {parent} && {{ test -O {parent} || {{ printf '%s\\n' "
            f"\"refusing to create the venv: $(ls -ld {parent}) is not $(id -un)'s own\" >&2; "
            "exit 1; }; } &&")

    def _pin_specs(self, installed: dict[str, str]) -> tuple[dict[str, str], list[str]]:
        """(name -> `name==version` to install, what each changes) for the pins not met."""
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
        return specs, notes

    def _align_families(self, installed: dict[str, str], specs: dict[str, str],
                        notes: list[str], result: StepPlan) -> None:
        """Members of a package family on other versions: aligned to the pinned one (added
        to `specs`), or the step is blocked when no pin says which version they share."""
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

    def _unpinned_changes(self, venv: VenvFacts) -> list[Change]:
        """An exact (locked) converge uninstalls what no pin names (the venv's tools stay)."""
        extras = sorted(
            d.name for key, d in venv.distributions.items()
            if key not in self.pins and key not in _VENV_TOOLS
        )
        if not extras:
            return []
        return [Change(f"uninstall {len(extras)} unpinned: {', '.join(extras)}",
                       [self.installer.uninstall(extras)])]

    def _absent_changes(self, installed: dict[str, str], *, installing: bool) -> list[Change]:
        """Remove what must not be there. After an install every absent name is removed
        (not only those present now): a dependency of what is being installed may bring one."""
        absent = [canonical_name(n) for n in self.install.absent]
        present = [n for n in absent if n in installed]
        names = absent if installing else present
        if not names:
            return []
        shown = ", ".join(f"{n} {installed[n]}" if n in installed else n for n in names)
        return [Change(f"remove {shown} (install.absent)", [self.installer.uninstall(names)])]

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
                           [self.installer.install([f"{name}=={pinned}"], reinstall=True)])
                )
            else:
                findings.append(
                    Finding("warning", what, "set install.clean: true to reinstall it")
                )
        return changes
