"""Whether the venv is safe to run: orch runs its `bin/python` (pip, the fact program's vLLM
and hub queries, the service) as the login user, root on most GPU hosts, so a venv another
user could change is that user's code run as root.

The rule (docs/security.md, "A venv of the user's own"), on the host as the login user:
- every existing folder from `/` down to the venv, the venv itself and what runs from it
  (`bin`, `bin/python`, `pyvenv.cfg`, `lib`, the site-packages folders), on the path as given
  and after its symlinks are followed, is owned by the user or by root;
- none of the venv's own is writable by group or others, nor is the folder it lies in (or
  will be created in: the nearest one that exists), unless that folder is sticky (`/tmp`'s
  1777) and the user's own; a folder further up may be writable by others only when sticky.
A group that is the user's own (its primary group, with no other member) counts as the user.
"""
# ruff: noqa: UP006, UP035 - the host side runs on Python 3.8 hosts
from __future__ import annotations

import glob
import os
import stat
from dataclasses import dataclass, field
from typing import Any, Dict, List

from orchestrator.facts.fact import Fact

# == host side: shipped to the host (stdlib only, Python 3.8) ==

VENV_TRUST: Dict[str, List[Dict[str, Any]]] = {}  # venv -> its problems, once per run


def _trust_name(uid: int) -> str:
    try:
        import pwd  # not on every platform: the uid alone then

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return str(uid)


def _own_group(gid: int) -> bool:
    """The login user's own group: its primary group, no other member listed."""
    if gid != os.getegid():
        return False
    try:
        # not on every platform: no group is then the user's own
        import grp

        members = set(grp.getgrgid(gid).gr_mem)
    except (ImportError, KeyError):
        return False
    return members <= {_trust_name(os.geteuid())}


def _trust_problem(path: str, info: os.stat_result, why: str) -> Dict[str, Any]:
    return {"path": path, "owner": _trust_name(info.st_uid), "uid": info.st_uid,
            "mode": f"{stat.S_IMODE(info.st_mode):04o}", "why": why}


def _trust_check(path: str, strict: bool, own_sticky: bool) -> List[Dict[str, Any]]:
    """One path (not followed): its owner, and who else may write it. `strict`: no write
    for others at all (but a sticky folder of the user's own when `own_sticky`)."""
    try:
        info = os.lstat(path)
    except OSError:
        return []
    if info.st_uid not in (0, os.geteuid()):
        return [_trust_problem(path, info, "owned by another user")]
    if stat.S_ISLNK(info.st_mode):  # a link's own mode means nothing; its owner made it
        return []
    others = info.st_mode & stat.S_IWOTH or (info.st_mode & stat.S_IWGRP
                                               and not _own_group(info.st_gid))
    sticky = stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_ISVTX
    if not others or (sticky and (not strict or (own_sticky and info.st_uid == os.geteuid()))):
        return []
    return [_trust_problem(path, info, "writable by others")]


def _trust_paths(venv: str) -> List[Any]:
    """(path, strict, own_sticky) for each path the rule checks: the venv's own, the folder
    it is (or will be created) in, and every folder above; again after links are followed."""
    chosen: List[Any] = []
    for target in dict.fromkeys((venv, os.path.realpath(venv))):
        home = target
        while not os.path.lexists(home) and os.path.dirname(home) != home:
            home = os.path.dirname(home)
        if home == target:
            home = os.path.dirname(target)
        inside = [target] + [os.path.join(target, p) for p in
                             ("bin", "bin/python", "pyvenv.cfg", "lib")]
        for site in sorted(glob.glob(os.path.join(target, "lib", "python*", "site-packages"))):
            inside += [os.path.dirname(site), site]
        chosen += [(p, True, False) for p in inside if os.path.lexists(p)] + [(home, True, True)]
        above = os.path.dirname(home)
        while above != chosen[-1][0]:
            chosen.append((above, False, False))
            above = os.path.dirname(above)
    return chosen


def venv_distrust(venv: str) -> List[Dict[str, Any]]:
    """Why the venv is not safe to run as this user (empty: it is); see the module's rule."""
    venv = os.path.normpath(os.path.expanduser(venv))
    if venv not in VENV_TRUST:
        found: List[Dict[str, Any]] = []
        seen = set()
        for path, strict, own_sticky in _trust_paths(venv):
            if path not in seen:
                seen.add(path)
                found += _trust_check(path, strict, own_sticky)
        VENV_TRUST[venv] = found
    return VENV_TRUST[venv]


def gather_venv_trust(request: Dict[str, Any], answer: Dict[str, Any]) -> None:
    if request.get("venv"):
        answer["venv_trust"] = {"user": _trust_name(os.geteuid()),
                                "problems": venv_distrust(request["venv"])}


# == controller side ==


@dataclass(frozen=True)
class TrustProblem:
    """A path that lets another user change the venv: whose it is, its mode, and why."""

    path: str
    owner: str
    mode: str
    why: str

    def describe(self) -> str:
        return f"{self.path} (owner {self.owner}, mode {self.mode}) is {self.why}"


@dataclass(frozen=True)
class VenvTrust:
    user: str
    problems: list[TrustProblem] = field(default_factory=list)


def parse(answer: dict[str, Any]) -> dict[str, Any]:
    said = answer.get("venv_trust")
    if not isinstance(said, dict):
        return {}
    return {"venv_trust": VenvTrust(
        user=str(said.get("user", "")),
        problems=[TrustProblem(path=str(p.get("path")), owner=str(p.get("owner")),
                               mode=str(p.get("mode")), why=str(p.get("why")))
                  for p in said.get("problems") or [] if isinstance(p, dict)])}


def venv_trust(extra: dict[str, Any]) -> VenvTrust | None:
    """The venv's trust as the probe found it, from the facts' `extra` (None: not asked)."""
    found = extra.get("venv_trust")
    return found if isinstance(found, VenvTrust) else None


def refusal(trust: VenvTrust | None, venv: str, doing: str) -> str | None:
    """Why orch will not act in the venv (None: it may): the first problem, with the fix.
    `doing`: what orch does there as the user ("runs")."""
    if trust is None or not trust.problems:
        return None
    first, user = trust.problems[0], trust.user or "the login user"
    more = f" (and {len(trust.problems) - 1} more)" if len(trust.problems) > 1 else ""
    undo = (f"remove {first.path} (another user made it)" if first.why.startswith("owned") else
            f"`chmod go-w {first.path}`" + ("" if first.owner == user else
                                            f" and `chown {user} {first.path}`"))
    return (f"refusing the venv {venv}: {first.describe()}{more}, so another user could "
            f"change what orch {doing} there as {user}; give python.venv a folder of {user}'s own "
            f"(e.g. under its home, ~/.cache/orch/...), or {undo}")


FACT = Fact(gather="gather_venv_trust", parse=parse)
