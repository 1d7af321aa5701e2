"""Python packages in a host's venv: version equality, package families, and the one place
that builds pip and uv command lines. Pure: nothing here talks to a host.

Used by the python step (pins, families, clean reinstalls, locked redeploys), the orch wheel
step (the simulator's own build), preflight and `orch status` (pin drift).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from orchestrator.plan.models import Install, PythonEnv, canonical_name
from orchestrator.transport.command import Command, Raw


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
    """Families whose installed members do not share one version.

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


def pin_drift(installed: dict[str, str], pins: dict[str, str]) -> list[str]:
    """`name installed (pin X)` for every pin the venv does not hold at its version."""
    return [
        f"{name} {installed.get(name, 'missing')} (pin {version})"
        for name, version in pins.items()
        if name not in installed or not same_version(installed[name], version)
    ]


@dataclass(frozen=True)
class Installer:
    """pip or uv inside one venv, with the plan's indexes."""

    venv: str
    kind: str  # "pip" or "uv"
    index_args: tuple[str, ...] = ()
    torch_backend: str | None = None

    @classmethod
    def of(cls, python: PythonEnv, install: Install | None = None) -> Installer:
        args: list[str] = []
        if install is not None:
            for i, url in enumerate(install.index_urls):
                args += ["--index-url" if i == 0 else "--extra-index-url", url]
            for link in install.find_links:
                args += ["--find-links", link]
            if install.no_index:
                args.append("--no-index")
        return cls(python.venv, python.installer, tuple(args),
                   install.torch_backend if install is not None else None)

    @property
    def python(self) -> str:
        return f"{self.venv}/bin/python"

    def install(self, specs: Sequence[str], *, reinstall: bool = False,
                no_deps: bool = False) -> Command:
        """Install `specs` (pins, or wheel files). A reinstall never takes dependencies and
        rewrites every file."""
        no_deps = no_deps or reinstall
        if self.kind == "uv":
            # Copies, not uv's default hardlinks into its cache: a patch edited in place in
            # site-packages would otherwise corrupt the cache, and a reinstall would bring
            # the patch back. A reinstall also bypasses the cache for the same reason.
            extra = ["--link-mode", "copy", *(["--no-deps"] if no_deps else [])]
            extra += ["--reinstall", "--no-cache"] if reinstall else []
            if self.torch_backend:
                extra += ["--torch-backend", self.torch_backend]
            return Command(f"{self.venv}/bin/uv", "pip", "install", "--quiet", "--python",
                           self.python, *extra, *self.index_args, *specs)
        extra = ["--force-reinstall"] if reinstall else []
        extra += ["--no-deps"] if no_deps else []
        return Command(self.python, "-m", "pip", "install", "--quiet",
                       "--disable-pip-version-check", *extra, *self.index_args, *specs)

    def uninstall(self, names: Sequence[str]) -> Command:
        if self.kind == "uv":
            return Command(f"{self.venv}/bin/uv", "pip", "uninstall", "--quiet", "--python",
                           self.python, *names)
        return Command(self.python, "-m", "pip", "uninstall", "--yes", "--quiet",
                       "--disable-pip-version-check", *names)

    def install_uv(self, spec: str, interpreter: str) -> Command:
        """uv itself goes into the venv, from the same indexes, with the first pip there is:
        the venv's own; else `interpreter`'s, which installs into another environment with
        `--python` from pip 22.3 on (a uv venv is made without pip: ensurepip is most of a
        cold venv's seconds); else one ensurepip puts into the venv."""
        pip = ["install", "--quiet", "--disable-pip-version-check", *self.index_args, spec]
        recent = ("import sys, pip; sys.exit(tuple(int(p) for p in pip.__version__.split('.')[:2])"
                  " < (22, 3))")
        return Command(
            Raw("if"), self.python, "-c", "import pip", Raw("2>/dev/null; then"),
            self.python, "-m", "pip", *pip,
            Raw("; elif"), interpreter, "-c", recent, Raw("2>/dev/null; then"),
            interpreter, "-m", "pip", "--python", self.python, *pip,
            Raw("; else"), self.python, "-m", "ensurepip", "--default-pip", Raw(">/dev/null &&"),
            self.python, "-m", "pip", *pip, Raw("; fi"),
        )  # fmt: skip
