#!/usr/bin/env python3
"""Write, or check, orch's table of one `vllm-router` release's flags: its own `--help`,
captured at a fixed width, which `orch validate` checks a plan's `router.args` against
(orchestrator/engines/router/flags.py).

    python scripts/router_flags.py VENV VERSION           # writes flags-<VERSION>.txt
    python scripts/router_flags.py VENV VERSION --check   # compares: exit 1 and the difference

VENV holds `vllm-router==VERSION` (`bin/vllm-router`). Run it with orch's Python.
"""

from __future__ import annotations

import argparse
import difflib
import os
import subprocess
import sys
from pathlib import Path

from orchestrator.engines.router import flags

TABLES = Path(flags.__file__).parent


def capture(venv: Path) -> str:
    """`vllm-router --help` at the table's width."""
    env = {**os.environ, "COLUMNS": flags.HELP_COLUMNS}
    done = subprocess.run([str(venv / "bin" / "vllm-router"), "--help"], capture_output=True,
                          text=True, env=env, timeout=60, check=True)
    return done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("venv", type=Path)
    parser.add_argument("version")
    parser.add_argument("--check", action="store_true", help="compare with the shipped table")
    parser.add_argument("--tables", type=Path, default=TABLES, help="where the tables are")
    args = parser.parse_args()
    text = capture(args.venv)
    table = args.tables / flags.table_name(args.version)
    if args.check:
        shipped = table.read_text() if table.is_file() else ""
        if shipped != text:
            sys.stdout.writelines(difflib.unified_diff(
                shipped.splitlines(True), text.splitlines(True), str(table), "vllm-router --help"))
            return 1
        print(f"{table}: the same as vllm-router --help")
        return 0
    table.write_text(text)
    print(f"wrote {table} ({len(flags.parse_help(text))} flags)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
