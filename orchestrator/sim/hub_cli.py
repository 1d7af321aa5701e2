"""`orch sim hub REPO=FOLDER ...`: publish folders to a stand-in Hugging Face hub and serve it.

Prints `stand-in hub on http://HOST:PORT: REPO@COMMIT ...` once it listens, and runs until
SIGTERM or Ctrl-C (exit 0). Bad input (a missing folder, a bad repository id, a port in use)
is one line on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType

from orchestrator.sim.hub_store import HubStore, HubStoreError, check_repo_id

USAGE_ERROR = 2  # as `orch sim serve` (and vllm serve) exit on bad input


def _port(text: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"expected a port number 0-65535, got {text!r}")
    return int(text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="where to listen (default 127.0.0.1)")
    parser.add_argument("--port", type=_port, default=8790, help="the hub's port (default 8790; 0: any)")
    parser.add_argument("--cdn-port", type=_port, default=0,
                        help="the port LFS files are redirected to (default: any free one)")
    parser.add_argument("--root", type=Path, default=None,
                        help="the store's folder, kept (default: a temporary one, removed at exit)")
    parser.add_argument("--private", metavar="TOKEN", default=None,
                        help="make the published repositories need `Authorization: Bearer TOKEN`")
    parser.add_argument("--tree-page-size", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("repos", nargs="*", metavar="REPO=FOLDER",
                        help="publish FOLDER's files as repository REPO (namespace/name), branch main")


def _pairs(values: list[str]) -> list[tuple[str, Path]]:
    pairs = []
    for value in values:
        repo_id, sep, folder = value.partition("=")
        if not sep or not folder:
            raise HubStoreError(f"expected REPO=FOLDER, got {value!r}")
        check_repo_id(repo_id)
        if not Path(folder).is_dir():
            raise HubStoreError(f"{repo_id}: no such folder {folder!r}")
        pairs.append((repo_id, Path(folder)))
    return pairs


def run(args: argparse.Namespace) -> int:
    try:
        pairs = _pairs(args.repos)
    except HubStoreError as error:
        print(f"orch sim hub: {error}", file=sys.stderr)
        return USAGE_ERROR
    root = args.root or Path(tempfile.mkdtemp(prefix="orch-sim-hub-"))
    try:
        return _serve(args, root, pairs)
    finally:
        if args.root is None:
            HubStore(root).remove()


def _serve(args: argparse.Namespace, root: Path, pairs: list[tuple[str, Path]]) -> int:
    try:
        store = HubStore(root)
        published = [f"{repo_id}@{store.publish(repo_id, folder)}" for repo_id, folder in pairs]
        for repo_id, _ in pairs if args.private else ():
            store.private(repo_id, args.private)
    except (HubStoreError, OSError) as error:
        print(f"orch sim hub: {error}", file=sys.stderr)
        return USAGE_ERROR
    from orchestrator.sim.hub import TREE_PAGE_SIZE, StandInHub  # the server, only to serve

    try:
        hub = StandInHub(root, args.host, args.port, cdn_port=args.cdn_port,
                         tree_page_size=args.tree_page_size or TREE_PAGE_SIZE)
    except OSError as error:
        print(f"orch sim hub: cannot listen on {args.host}:{args.port}: "
              f"{error.strerror or error}", file=sys.stderr)
        return USAGE_ERROR
    stop = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _stop)
    with hub:
        print(f"stand-in hub on {hub.url}: {' '.join(published)}".rstrip(), flush=True)
        while not stop.wait(0.2):
            pass
    return 0


def main(argv: list[str]) -> int:
    """`python -m orchestrator.sim hub ...`."""
    parser = argparse.ArgumentParser(prog="python -m orchestrator.sim hub",
                                     description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))
