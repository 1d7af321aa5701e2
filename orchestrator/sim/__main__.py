"""`python -m orchestrator.sim serve MODEL [flags]`: the simulator without the orch CLI."""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "serve":
        print("usage: python -m orchestrator.sim serve MODEL [flags]  (--help for the flags)")
        return 2
    from orchestrator.sim.serve import main as serve_main

    return serve_main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
