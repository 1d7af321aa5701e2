"""The stand-in Hugging Face hub: the parts of the Hub's HTTP API that huggingface_hub uses
to look at and download a model (`model_info`, `list_repo_tree`, `hf_hub_download`,
`snapshot_download`), served from a HubStore (hub_store.py) on loopback.

    GET  /api/models/{repo}[/revision/{rev}]        ModelInfo JSON (?blobs=true: sizes, LFS)
    GET  /api/models/{repo}/tree/{rev}[/{path}]     RepoFile/RepoFolder JSON, paged by Link
    HEAD|GET /{repo}/resolve/{rev}/{path}           the file (200/206), or for an LFS file a
                                                    302 to the CDN with X-Linked-Etag/-Size
    HEAD|GET {cdn}/lfs/{sha256}?filename=...        an LFS file's content (200/206)

The CDN is a second listener (another port, so another origin): the client then reads the
file's metadata from the 302 itself and does not send its token there, as with the real Hub.
No X-Xet-* headers are sent, so clients take the plain HTTP path. Errors carry the Hub's
X-Error-Code / X-Error-Message, which the client turns into its own exceptions.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import socket
import socketserver
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from orchestrator.sim.hub_files import send_file
from orchestrator.sim.hub_store import HubFile, HubStore, Repo

TREE_PAGE_SIZE = 1000  # the Hub's page size for a tree listing without expand


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str, port: int, hub: StandInHub, origin: str) -> None:
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.hub, self.origin = hub, origin
        super().__init__((host, port), _Handler)

    def server_bind(self) -> None:
        # HTTPServer's own looks the host's name up (getfqdn), which can stall without DNS.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = str(self.server_address[0]), int(self.server_address[1])


class StandInHub:
    """Both listeners on `host`: the hub on `port`, the CDN on `cdn_port` (0: any free one)."""

    def __init__(self, root: Path | str, host: str = "127.0.0.1", port: int = 0, *,
                 cdn_port: int = 0, tree_page_size: int = TREE_PAGE_SIZE) -> None:
        self.store = HubStore(root)
        self.tree_page_size = tree_page_size
        self._hub = _Server(host, port, self, "hub")
        try:
            self._cdn = _Server(host, cdn_port, self, "cdn")
        except OSError:
            self._hub.server_close()
            raise
        self._threads: list[threading.Thread] = []

    @staticmethod
    def _url(server: _Server) -> str:
        host = server.server_name
        return f"http://[{host}]:{server.server_port}" if ":" in host else \
            f"http://{host}:{server.server_port}"

    @property
    def url(self) -> str:
        """The endpoint: what HF_ENDPOINT or `endpoint=` is set to."""
        return self._url(self._hub)

    @property
    def cdn_url(self) -> str:
        return self._url(self._cdn)

    @property
    def cdn_port(self) -> int:
        return self._cdn.server_port

    def start(self) -> StandInHub:
        for server in (self._hub, self._cdn):
            thread = threading.Thread(target=server.serve_forever, name=f"hub-{server.origin}",
                                      kwargs={"poll_interval": 0.1}, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        for server in (self._hub, self._cdn):
            if self._threads:
                server.shutdown()
            server.server_close()
        self._threads.clear()

    def __enter__(self) -> StandInHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def running_hub(root: Path | str, host: str = "127.0.0.1", port: int = 0,
                **options: Any) -> Iterator[StandInHub]:
    """A stand-in hub serving `root` in this process's threads; `.url` is the endpoint and
    `.store` the HubStore to publish to, arm faults on and read the request log of."""
    with StandInHub(root, host, port, **options) as hub:
        yield hub


def serve(root: Path | str, host: str = "127.0.0.1", port: int = 8790, **options: Any) -> None:
    """Serve until KeyboardInterrupt (the CLI, hub_cli.py, also ends on SIGTERM)."""
    with running_hub(root, host, port, **options), contextlib.suppress(KeyboardInterrupt):
        threading.Event().wait()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: every response has a Content-Length
    server: _Server
    _status = 0
    _cut: int | None = None

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the store's request log says what was served

    _logged = False

    def send_response(self, code: int, message: str | None = None) -> None:
        self._status = code
        super().send_response(code, message)

    def end_headers(self) -> None:
        # logged before the client can see the answer: a client that has its whole answer
        # finds the request in the store's log (logged after the body, it could be missing)
        self._log()
        super().end_headers()

    def _set_cut(self, cut: int | None) -> None:
        self._cut = cut

    def _log(self) -> None:
        if self._logged:
            return
        self._logged = True
        parts = urlsplit(self.path)
        entry: dict[str, Any] = {"origin": self.server.origin, "method": self.command,
                                 "path": unquote(parts.path), "query": parts.query,
                                 "range": self.headers.get("Range"), "status": self._status,
                                 "auth": "Authorization" in self.headers}
        if self._cut is not None:
            entry["cut"] = self._cut
        self.server.hub.store.log_request(entry)

    def do_GET(self) -> None:
        self._handle(head=False)

    def do_HEAD(self) -> None:
        self._handle(head=True)

    def _refuse(self) -> None:
        self.close_connection = True  # its body, if any, is not read
        self._error(405, None, f"{self.command} is not served by the stand-in hub")

    do_POST = do_PUT = do_DELETE = _refuse

    def _handle(self, head: bool) -> None:
        self._status, self._cut, self._logged = 0, None, False
        try:
            if self.server.origin == "cdn":
                self._cdn(head)
            else:
                self._route(head)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        self._log()  # one that ended before its headers

    # -- responses ------------------------------------------------------------------------------

    def _send(self, status: int, body: bytes, headers: dict[str, str], head: bool) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _json(self, data: Any, headers: dict[str, str] | None = None, head: bool = False) -> None:
        body = json.dumps(data).encode()
        self._send(200, body, {"Content-Type": "application/json; charset=utf-8", **(headers or {})},
                   head)

    def _error(self, status: int, code: str | None, message: str,
               headers: dict[str, str] | None = None, head: bool = False) -> None:
        said = message.encode("ascii", "backslashreplace").decode()  # a header is latin-1 at most
        extra = {"X-Error-Message": said, **({"X-Error-Code": code} if code else {})}
        self._send(status, json.dumps({"error": message}).encode(),
                   {"Content-Type": "application/json; charset=utf-8", **extra, **(headers or {})},
                   head)

    # -- routes ---------------------------------------------------------------------------------

    def _route(self, head: bool) -> None:
        parts = urlsplit(self.path)
        segments = parts.path.strip("/").split("/")
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        api = segments[:2] == ["api", "models"]
        found = _match(self.server.hub.store, segments[2:] if api else segments, api)
        if found is None:
            self._error(404, None, "Sorry, we can't find the page you are looking for.", head=head)
            return
        repo, verb, rest = found
        if repo is None:
            self._error(404, "RepoNotFound", "Repository not found", head=head)
            return
        if not self._authorized(repo, head):
            return
        revision = unquote(rest[0]) if rest else "main"
        commit = repo.resolve(revision)
        if commit is None:
            self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}", head=head)
            return
        path = unquote("/".join(rest[1:]))
        if verb == "info":
            self._json(_model_info(repo, commit, query), head=head)
        elif verb == "tree":
            self._tree(repo, commit, path, query, head)
        else:
            self._resolve(repo, commit, path, head)

    def _authorized(self, repo: Repo, head: bool) -> bool:
        if repo.token_sha256 is None:
            return True
        given = self.headers.get("Authorization", "")
        if not given:
            # What the Hub answers for a private repository without a token.
            self._error(401, "RepoNotFound", "Repository not found", head=head)
            return False
        token = given.removeprefix("Bearer ").strip()
        if hashlib.sha256(token.encode()).hexdigest() != repo.token_sha256:
            self._error(401, None, "Invalid credentials in Authorization header", head=head)
            return False
        return True

    def _tree(self, repo: Repo, commit: str, path: str, query: dict[str, str], head: bool) -> None:
        recursive = query.get("recursive", "").lower() in ("true", "1")
        entries = _tree_entries(repo.files(commit), path, recursive)
        if entries is None:
            self._error(404, "EntryNotFound", f"{path} does not exist on \"{commit}\"",
                        {"X-Repo-Commit": commit}, head)
            return
        try:
            start = int(base64.urlsafe_b64decode(query.get("cursor", "MA==")).decode())
        except ValueError:
            self._error(400, None, "Invalid cursor", head=head)
            return
        end = start + self.server.hub.tree_page_size
        headers = {"X-Repo-Commit": commit}
        if end < len(entries):
            cursor = base64.urlsafe_b64encode(str(end).encode()).decode()
            parts = urlsplit(self.path)
            page = {**query, "cursor": cursor}
            link = f"http://{self.headers['Host']}{parts.path}?" + \
                "&".join(f"{k}={quote(v, safe='')}" for k, v in page.items())
            headers["Link"] = f'<{link}>; rel="next"'
        self._json(entries[start:end], headers, head)

    def _resolve(self, repo: Repo, commit: str, path: str, head: bool) -> None:
        file = repo.files(commit).get(path)
        if file is None:
            self._error(404, "EntryNotFound", "Entry not found", {"X-Repo-Commit": commit}, head)
            return
        name = path.rsplit("/", 1)[-1]
        headers = {"X-Repo-Commit": commit, "Accept-Ranges": "bytes",
                   "Content-Disposition": _disposition(name)}
        if file.lfs:
            location = f"{self._cdn_origin()}/lfs/{file.sha256}?filename={quote(name)}"
            body = f"Found. Redirecting to {location}".encode()
            self._send(302, body, {**headers, "Location": location, "ETag": f'"{file.sha256}"',
                                   "X-Linked-Etag": f'"{file.sha256}"',
                                   "X-Linked-Size": str(file.size),
                                   "Content-Type": "text/plain; charset=utf-8"}, head)
            return
        send_file(self, self.server.hub.store, file.sha256, file.size,
                  {**headers, "ETag": f'"{file.git_sha1}"'}, head, self._set_cut)

    def _cdn_origin(self) -> str:
        """The CDN on the host name the client reached the hub by (a port forward, 0.0.0.0)."""
        host = self.headers.get("Host") or self.server.server_name
        name = host.rsplit("]", 1)[0] + "]" if host.startswith("[") else host.split(":")[0]
        return f"http://{name}:{self.server.hub.cdn_port}"

    def _cdn(self, head: bool) -> None:
        parts = urlsplit(self.path)
        segments = parts.path.strip("/").split("/")
        store = self.server.hub.store
        if len(segments) != 2 or segments[0] != "lfs" or not store.blob_path(segments[1]).is_file():
            self._send(404, b"NoSuchKey", {"Content-Type": "text/plain"}, head)
            return
        sha256 = segments[1]
        name = parse_qs(parts.query).get("filename", [sha256])[-1]
        headers = {"ETag": f'"{sha256}"', "Accept-Ranges": "bytes",
                   "Content-Disposition": _disposition(name)}
        size = store.blob_path(sha256).stat().st_size
        send_file(self, store, sha256, size, headers, head, self._set_cut)


def _disposition(name: str) -> str:
    return f"inline; filename*=UTF-8''{quote(name)}; filename=\"{name}\";"


def _match(store: HubStore, segments: list[str], api: bool) -> tuple[Repo | None, str, list[str]] | None:
    """(the repository or None if unknown, verb, the rest) for an API path after /api/models/ or a
    resolve path; the repository id has one or two segments, so both are tried."""
    shapes: list[tuple[str, str, list[str]]] = []
    for length in (2, 1):
        repo_id, tail = "/".join(unquote(s) for s in segments[:length]), segments[length:]
        if api and not tail:
            shapes.append((repo_id, "info", []))
        elif api and len(tail) == 2 and tail[0] == "revision":
            shapes.append((repo_id, "info", tail[1:]))
        elif api and len(tail) >= 2 and tail[0] == "tree":
            shapes.append((repo_id, "tree", tail[1:]))
        elif not api and len(tail) >= 3 and tail[0] == "resolve":
            shapes.append((repo_id, "resolve", tail[1:]))
    if not shapes:
        return None
    for repo_id, verb, rest in shapes:
        repo = store.repo(repo_id)
        if repo is not None:
            return repo, verb, rest
    return None, shapes[0][1], shapes[0][2]


def _model_info(repo: Repo, commit: str, query: dict[str, str]) -> dict[str, Any]:
    files = repo.files(commit)
    with_blobs = query.get("blobs", "").lower() in ("true", "1")
    siblings = [_sibling(f, with_blobs) for f in files.values()]
    namespace = repo.repo_id.split("/")[0] if "/" in repo.repo_id else None
    first = min(repo.commits, key=repo.date)
    info: dict[str, Any] = {
        "_id": hashlib.sha1(repo.repo_id.encode()).hexdigest()[:24], "id": repo.repo_id,
        "modelId": repo.repo_id, "author": namespace, "sha": commit,
        "lastModified": repo.date(commit), "createdAt": repo.date(first),
        "private": repo.token_sha256 is not None, "gated": False, "disabled": False,
        "downloads": 0, "likes": 0, "tags": [], "siblings": siblings,
        "usedStorage": sum(f.size for f in files.values()),
    }
    if "expand" in query:  # only what was asked for, as the Hub answers
        wanted = set(query["expand"].split(",")) | {"_id", "id"}
        info = {k: v for k, v in info.items() if k in wanted}
    return info


def _sibling(file: HubFile, with_blobs: bool) -> dict[str, Any]:
    if not with_blobs:
        return {"rfilename": file.path}
    sibling: dict[str, Any] = {"rfilename": file.path, "size": file.size, "blobId": file.oid}
    if file.lfs:
        sibling["lfs"] = {"sha256": file.sha256, "size": file.size,
                          "pointerSize": len(file.pointer)}
    return sibling


def _tree_entries(files: dict[str, HubFile], path: str, recursive: bool) -> list[dict[str, Any]] | None:
    """The tree listing under `path` ("" for the root), None if no such folder."""
    prefix = f"{path.strip('/')}/" if path.strip("/") else ""
    inside = {p: f for p, f in files.items() if p.startswith(prefix)}
    if prefix and not inside:
        return None
    entries: dict[str, dict[str, Any]] = {}
    for file_path, file in inside.items():
        parts = file_path[len(prefix):].split("/")
        for depth in range(1, len(parts)):
            folder = prefix + "/".join(parts[:depth])
            if recursive or depth == 1:
                entries.setdefault(folder, {"type": "directory", "path": folder, "size": 0,
                                            "oid": _folder_oid(files, folder)})
        if recursive or len(parts) == 1:
            entries[file_path] = _tree_file(file)
    return [entries[k] for k in sorted(entries)]


def _tree_file(file: HubFile) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "file", "oid": file.oid, "size": file.size, "path": file.path}
    if file.lfs:
        entry["lfs"] = {"oid": file.sha256, "size": file.size, "pointerSize": len(file.pointer)}
    return entry


def _folder_oid(files: dict[str, HubFile], folder: str) -> str:
    """A stable id for a folder's content (git's tree id is not needed by any client)."""
    inside = sorted(f"{p} {f.oid}" for p, f in files.items() if p.startswith(folder + "/"))
    return hashlib.sha1("\n".join(inside).encode()).hexdigest()
