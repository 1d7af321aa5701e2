"""`python -m orchestrator.sim serve MODEL [flags]`: the simulator without the orch CLI;
`python -m orchestrator.sim hub REPO=FOLDER ...`: the stand-in Hugging Face hub."""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    if argv[:1] == ["hub"]:
        # only the command asked for is imported (start-up time)
        from orchestrator.sim.hub_cli import main as hub_main

        return hub_main(argv[1:])
    if not argv or argv[0] != "serve":
        print("usage: python -m orchestrator.sim serve MODEL [flags]  (--help for the flags)")
        return 2
    # only the command asked for is imported (start-up time)
    from orchestrator.sim.serve import main as serve_main

    return serve_main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
