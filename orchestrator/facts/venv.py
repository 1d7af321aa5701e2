"""The venv: does it exist, its Python, its distributions and versions (read from their
`*.dist-info/METADATA`, never imported: importing flashinfer with a mismatched cubin would
crash, the very thing to report), uv in it, and where the plan's interpreter is."""
# ruff: noqa: UP006, UP035 - the host side runs on Python 3.8 hosts
from __future__ import annotations

import glob
import os
import re
import shutil
from dataclasses import dataclass
from typing import Any, Dict, List

from orchestrator.facts.common import read_text
from orchestrator.facts.fact import Fact
from orchestrator.facts.venv_trust import venv_distrust

# == host side: shipped to the host (stdlib only, Python 3.8) ==


def site_packages(venv: str) -> List[str]:
    return sorted(glob.glob(os.path.join(venv, "lib", "python*", "site-packages")))


def canonical_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


DISTRIBUTIONS: Dict[str, Dict[str, Dict[str, str]]] = {}  # venv -> its distributions, once per run


def distributions(venv: str) -> Dict[str, Dict[str, str]]:
    """Canonical name -> {name, version, dist_info} of every distribution in the venv; none
    read from a venv another user could change (venv_trust.py: never read, run or written)."""
    if venv in DISTRIBUTIONS:
        return DISTRIBUTIONS[venv]
    if venv_distrust(venv):
        return {}
    found: Dict[str, Dict[str, str]] = {}
    for site in site_packages(venv):
        for info in sorted(glob.glob(os.path.join(site, "*.dist-info"))):
            name = version = None
            for line in (read_text(os.path.join(info, "METADATA")) or "").splitlines():
                if line.startswith("Name:") and name is None:
                    name = line[5:].strip()
                elif line.startswith("Version:") and version is None:
                    version = line[8:].strip()
                elif not line.strip():
                    break
            if name and version:
                found[canonical_name(name)] = {"name": name, "version": version, "dist_info": info}
    DISTRIBUTIONS[venv] = found
    return found


def write_access(path: str) -> Dict[str, Any]:
    """Whether this user may write `path`, or create it: the nearest existing directory on
    the way up decides (and its owner is named when it says no)."""
    here = path
    while not os.path.exists(here) and os.path.dirname(here) != here:
        here = os.path.dirname(here)
    writable = os.access(here, os.W_OK | os.X_OK)
    owner = None
    if not writable:
        try:
            import pwd  # not on every platform; the owner is only a courtesy

            owner = pwd.getpwuid(os.stat(here).st_uid).pw_name
        except (ImportError, KeyError, OSError):
            owner = None
    return {"writable": writable, "checked": here, "owner": owner}


def venv_facts(venv: str) -> Dict[str, Any]:
    venv = os.path.expanduser(venv)
    python = os.path.join(venv, "bin", "python")
    cfg = read_text(os.path.join(venv, "pyvenv.cfg")) or ""
    version = None
    match = re.search(r"^version(?:_info)?\s*=\s*(\S+)", cfg, re.M)
    if match:
        version = match.group(1)
    exists = os.path.isfile(python) and os.access(python, os.X_OK) and bool(cfg)
    return {
        "path": venv,
        "exists": exists,
        "python_version": version,
        "distributions": distributions(venv) if exists else {},
        "has_uv": os.path.isfile(os.path.join(venv, "bin", "uv")),
        "access": write_access(venv),
    }


def gather_venv(request: Dict[str, Any], answer: Dict[str, Any]) -> None:
    if request.get("venv"):
        answer["venv"] = venv_facts(request["venv"])
        if request.get("interpreter"):
            answer["venv"]["interpreter"] = shutil.which(request["interpreter"])


# == controller side ==


@dataclass(frozen=True)
class Distribution:
    name: str
    version: str


@dataclass
class VenvFacts:
    path: str
    exists: bool
    python_version: str | None
    distributions: dict[str, Distribution]  # canonical name -> distribution
    has_uv: bool
    interpreter_path: str | None = None  # the plan's interpreter on the host's PATH, if asked
    # Whether the login user may write the venv (or create it): False names the directory
    # that says no (the venv, or its nearest existing parent) and that directory's owner.
    writable: bool = True
    write_checked: str | None = None
    write_owner: str | None = None

    def installed(self) -> dict[str, str]:
        """Canonical name -> installed version."""
        return {name: d.version for name, d in self.distributions.items()}

    def freeze(self) -> str:
        """`pip freeze`-style lines, sorted by name (read from metadata, no pip call)."""
        lines = sorted(f"{d.name}=={d.version}" for d in self.distributions.values())
        return "\n".join(lines) + ("\n" if lines else "")


def parse(answer: dict[str, Any]) -> dict[str, Any]:
    venv = answer.get("venv")
    if not venv:
        return {}
    return {"venv": VenvFacts(
        path=venv["path"],
        exists=bool(venv["exists"]),
        python_version=venv.get("python_version"),
        distributions={
            key: Distribution(name=d["name"], version=d["version"])
            for key, d in venv.get("distributions", {}).items()
        },
        has_uv=bool(venv.get("has_uv")),
        interpreter_path=venv.get("interpreter"),
        writable=bool((venv.get("access") or {}).get("writable", True)),
        write_checked=(venv.get("access") or {}).get("checked"),
        write_owner=(venv.get("access") or {}).get("owner"),
    )}


FACT = Fact(gather="gather_venv", parse=parse)
